//! Session resumption on the in-memory pair: by session ID and by ticket, with lost flights;
//! unknown, forged and expired tickets fall back to full handshakes; key rotation.

mod common;

use common::*;
use fastshake_dtls::{
    ClientConfig, ClientSession, Connection, Event, HandshakeSummary, Instant, Resumption, ServerConfig,
    SessionCacheConfig, TicketKey, TicketKeys, TrustAnchors, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn ticket_server() -> ServerConfig {
    ServerConfig {
        tickets: Some(TicketKeys::new(1, [7; 16])),
        session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
        wall_clock: CLOCK,
        ..server_config()
    }
}

fn id_server() -> ServerConfig {
    ServerConfig { wall_clock: CLOCK, ..server_config() }
}

/// A new client on a fresh port offering `session`, events cleared.
fn reconnect(pair: &mut Pair, config: ClientConfig, session: Option<ClientSession>, seed: u8) {
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.client =
        Connection::client_with_session(Arc::new(config), pair.now, pair.server_addr, [seed; 32], session);
    pair.client_events.clear();
    pair.server_events.clear();
}

fn first_session(pair: &mut Pair) -> (HandshakeSummary, ClientSession) {
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert_eq!((c.resumption, s.resumption), (None, None));
    let session = c.session.clone().expect("the server issued a session");
    (c, session)
}

fn data_flows(pair: &mut Pair) {
    let h = pair.server.handle_for(pair.client_addr).expect("server connection");
    pair.client.send(b"ping").unwrap();
    pair.server.send(h, b"pong").unwrap();
    let limit = pair.now + Duration::from_secs(1);
    while pair.step(limit) {}
    assert!(pair.server_events.iter().any(|(_, e)| *e == Event::ApplicationData(b"ping".to_vec())));
    assert!(pair.client_events.iter().any(|e| *e == Event::ApplicationData(b"pong".to_vec())));
}

#[test]
fn resumption_by_session_id() {
    let mut pair = Pair::new(client_config(), id_server());
    let (_, session) = first_session(&mut pair);
    assert!(!session.has_ticket() && session.session_id().len() == 32);
    // Through bytes, as a session file would keep it.
    let session = ClientSession::from_bytes(&session.to_bytes()).unwrap();
    reconnect(&mut pair, client_config(), Some(session), 2);
    let (c, s) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert_eq!(c.resumption, Some(Resumption::SessionId));
    assert_eq!(s.resumption, Some(Resumption::SessionId));
    assert!(c.resumed && s.resumed && c.extended_master_secret);
    assert_eq!(
        (c.psk_identity.as_slice(), s.psk_identity.as_slice()),
        (PSK_ID, PSK_ID),
        "identity carried over"
    );
    // Server: ServerHello+CCS+Finished; client: ClientHello twice, CCS+Finished.
    assert_eq!((s.flights_sent, c.flights_sent), (1, 3));
    data_flows(&mut pair);
}

#[test]
fn resumption_by_ticket_renews_the_ticket() {
    let mut pair = Pair::new(client_config(), ticket_server());
    let (_, session) = first_session(&mut pair);
    assert!(session.has_ticket() && session.session_id().is_empty());
    reconnect(&mut pair, client_config(), Some(session.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert_eq!((c.resumption, s.resumption), (Some(Resumption::Ticket), Some(Resumption::Ticket)));
    assert_eq!(s.psk_identity, PSK_ID, "the ticket carries the identity");
    let renewed = c.session.expect("a renewed ticket");
    assert!(renewed.has_ticket());
    assert_ne!(renewed.to_bytes(), session.to_bytes());
    data_flows(&mut pair);
    // The renewed ticket resumes too.
    reconnect(&mut pair, client_config(), Some(renewed), 3);
    let (c, _) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert_eq!(c.resumption, Some(Resumption::Ticket));
}

#[test]
fn resumption_survives_lost_flights() {
    for (server, lose) in
        [(id_server(), Dir::ToClient), (ticket_server(), Dir::ToClient), (id_server(), Dir::ToServer)]
    {
        let mut pair = Pair::new(client_config(), server);
        let (_, session) = first_session(&mut pair);
        reconnect(&mut pair, client_config(), Some(session), 2);
        // Lose the first abbreviated flight of the server, or the client's CCS+Finished.
        let (base_s, base_c) = (pair.sent_to_client, pair.sent_to_server);
        pair.filter = Box::new(move |dir, i, _| {
            let first = match dir {
                Dir::ToClient => i == base_s + 1, // after the HelloVerifyRequest
                Dir::ToServer => i == base_c + 2, // after both ClientHellos
            };
            if dir == lose && first {
                Fate::Drop
            } else {
                Fate::Deliver
            }
        });
        let (c, s) = pair.handshake(MINUTE).expect("abbreviated handshake despite loss");
        assert!(c.resumed && s.resumed);
        assert!(c.retransmissions + s.retransmissions > 0, "{lose:?}");
        data_flows(&mut pair);
    }
}

#[test]
fn forged_ticket_falls_back_to_a_full_handshake() {
    let mut pair = Pair::new(client_config(), ticket_server());
    let (_, session) = first_session(&mut pair);
    let mut bytes = session.to_bytes();
    // The ticket sits after format(1), suite(2), session ID (1 + 0) and flag(1) + length(2).
    bytes[1 + 2 + 1 + 1 + 2 + 20] ^= 0x40;
    let forged = ClientSession::from_bytes(&bytes).unwrap();
    reconnect(&mut pair, client_config(), Some(forged), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert_eq!((c.resumption, s.resumption), (None, None));
    assert!(c.session.expect("a new ticket").has_ticket());
}

#[test]
fn unknown_session_id_falls_back_to_a_full_handshake() {
    let mut pair = Pair::new(client_config(), id_server());
    let (_, session) = first_session(&mut pair);
    // Another server (seeded differently, so its session IDs differ): its cache does not know the session.
    let mut other = Pair::with_seed(client_config(), id_server(), 9);
    reconnect(&mut other, client_config(), Some(session), 2);
    let result = other.handshake(MINUTE);
    let (c, s) = result.unwrap_or_else(|| panic!("{:?} {:?}", other.client_events, other.server_events));
    assert_eq!((c.resumption, s.resumption), (None, None));
}

#[test]
fn expired_ticket_and_session_fall_back_to_full_handshakes() {
    let mut sc = ticket_server();
    sc.tickets.as_mut().unwrap().lifetime = Duration::from_secs(10);
    sc.session_cache = SessionCacheConfig { max_entries: 100, lifetime: Duration::from_secs(10) };
    let mut pair = Pair::new(client_config(), sc);
    let (_, session) = first_session(&mut pair);
    assert!(session.has_ticket() && !session.session_id().is_empty());
    pair.now += Duration::from_secs(30);
    reconnect(&mut pair, client_config(), Some(session), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert_eq!((c.resumption, s.resumption), (None, None));
}

#[test]
fn rotation_keeps_the_previous_key_valid() {
    let mut pair = Pair::new(client_config(), ticket_server());
    let (_, session) = first_session(&mut pair);
    pair.server.rotate_ticket_key(TicketKey::new(2, [8; 16]));
    reconnect(&mut pair, client_config(), Some(session.clone()), 2);
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    assert_eq!(c.resumption, Some(Resumption::Ticket), "previous key still opens");
    pair.server.rotate_ticket_key(TicketKey::new(3, [9; 16]));
    reconnect(&mut pair, client_config(), Some(session), 3);
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    assert_eq!(c.resumption, None, "a key two rotations old no longer opens");
}

fn p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

#[test]
fn certificate_sessions_resume_without_certificates() {
    let pki = p256_pki();
    let cc = ClientConfig {
        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())),
        server_name: Some("localhost".into()),
        wall_clock: CLOCK,
        ..Default::default()
    };
    let sc = ServerConfig {
        certified_key: Some(Arc::new(pki.server_certified_key().unwrap())),
        tickets: Some(TicketKeys::new(1, [7; 16])),
        wall_clock: CLOCK,
        ..Default::default()
    };
    let mut pair = Pair::new(cc.clone(), sc);
    let (c, session) = first_session(&mut pair);
    assert_eq!(c.peer_certificates, 2);
    reconnect(&mut pair, cc, Some(session), 2);
    let (c, s) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert_eq!(c.resumption, Some(Resumption::Ticket));
    assert_eq!((c.peer_certificates, s.peer_certificates), (0, 0));
    data_flows(&mut pair);
}

#[test]
fn a_psk_session_stays_as_small_as_before() {
    // The issue-2 figure: certificate and resumption state live in the boxed handshake state.
    assert!(std::mem::size_of::<Connection>() <= 224, "{}", std::mem::size_of::<Connection>());
    let mut pair = Pair::new(client_config(), id_server());
    let (_, session) = first_session(&mut pair);
    assert!(!pair.client.holds_handshake_state(), "a full-handshake client frees its handshake state");
    reconnect(&mut pair, client_config(), Some(session), 2);
    pair.handshake(MINUTE).expect("abbreviated handshake");
    // In the abbreviated handshake the client sent the last flight: it keeps it until the
    // server shows it arrived (its first record), then frees it.
    assert!(pair.client.holds_handshake_state());
    data_flows(&mut pair);
    assert!(!pair.client.holds_handshake_state());
}

/// In an abbreviated handshake the client sends data right behind its Finished; when the
/// Finished is lost (or overtaken), the server keeps the record that authenticated and
/// delivers it once the Finished arrives, instead of dropping it until an application timeout.
#[test]
fn data_that_overtakes_the_clients_finished_is_delivered_after_it() {
    let mut pair = Pair::new(client_config(), id_server());
    let (_, session) = first_session(&mut pair);
    reconnect(&mut pair, client_config(), Some(session), 2);
    let mut dropped = false;
    pair.filter = Box::new(move |dir, _, datagram| {
        // The client's last flight opens with its ChangeCipherSpec record (content type 20).
        if dir == Dir::ToServer && datagram.first() == Some(&20) && !dropped {
            dropped = true;
            return Fate::Drop;
        }
        Fate::Deliver
    });
    let limit = pair.now + MINUTE;
    while !pair.client.is_established() {
        assert!(pair.step(limit), "the client completes its side");
    }
    pair.client.send(b"right behind the Finished").unwrap();
    let (c, _) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert_eq!(c.resumption, Some(Resumption::SessionId));
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_data(), vec![b"right behind the Finished".to_vec()]);
    let connected = pair.server_events.iter().position(|(_, e)| matches!(e, Event::Connected(_)));
    let data = pair.server_events.iter().position(|(_, e)| matches!(e, Event::ApplicationData(_)));
    assert!(connected < data, "delivered after the handshake completed: {:?}", pair.server_events);
}
