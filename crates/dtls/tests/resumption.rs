//! Session resumption on the in-memory pair: by session ID and by ticket, with lost flights;
//! unknown, forged and expired tickets fall back to full handshakes; key rotation.

use fastshake_dtls::{
    ClientAuth, ClientConfig, ClientSession, Connection, Event, HandshakeSummary, Instant, Resumption,
    ServerConfig, SessionCacheConfig, TicketKey, TicketKeys, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{Dir, Fate};
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
    pair.resume_client(config, session, seed);
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
        let (base_s, base_c) = (pair.sent(Dir::ToClient), pair.sent(Dir::ToServer));
        pair.filter = Box::new(move |d| {
            let first = match d.dir {
                Dir::ToClient => d.index == base_s + 1, // after the HelloVerifyRequest
                Dir::ToServer => d.index == base_c + 2, // after both ClientHellos
            };
            if d.dir == lose && first {
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
        versions: Versions::Dtls12,
        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())),
        server_name: Some("localhost".into()),
        wall_clock: CLOCK,
        ..Default::default()
    };
    let sc = ServerConfig {
        versions: Versions::Dtls12,
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
    // Certificate and resumption state live in the boxed handshake state: an established PSK
    // session stays within its size. (The pointer to a DTLS 1.3 session's state costs 8 bytes
    // over the 224 a 1.2 session took before.)
    assert!(std::mem::size_of::<Connection>() <= 232, "{}", std::mem::size_of::<Connection>());
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
    pair.filter = Box::new(move |d| {
        // The client's last flight opens with its ChangeCipherSpec record (content type 20).
        if d.dir == Dir::ToServer && d.payload.first() == Some(&20) && !dropped {
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

fn other_p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn cert_anchors(pki: &TestPki) -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())
}

/// A certificate client of `p256_pki`, with its own certificate when `with_cert`.
fn cert_client(with_cert: bool, clock: Option<WallClock>) -> ClientConfig {
    let pki = p256_pki();
    ClientConfig {
        versions: Versions::Dtls12,
        trust_anchors: Some(cert_anchors(pki)),
        server_name: Some("localhost".into()),
        certified_key: with_cert.then(|| Arc::new(pki.client_certified_key().unwrap())),
        wall_clock: clock,
        ..Default::default()
    }
}

/// A ticket server of `p256_pki` with the client-authentication policy `auth`, trusting client
/// chains of `client_ca`. Every such server shares the ticket key, as a fleet (or a restarted
/// server with a new policy) would.
fn policy_server(auth: ClientAuth, client_ca: Option<&TestPki>, clock: Option<WallClock>) -> ServerConfig {
    let mut keys = TicketKeys::new(1, [7; 16]);
    keys.lifetime = Duration::from_secs(30 * 86_400);
    ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(Arc::new(p256_pki().server_certified_key().unwrap())),
        client_auth: auth,
        client_trust_anchors: client_ca.map(cert_anchors),
        tickets: Some(keys),
        session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
        wall_clock: clock,
        ..Default::default()
    }
}

/// Makes a session under `first`, then offers it to a server with the policy `then` (from a
/// client with or without a certificate, at `clock`): returns the client's summary of that second
/// handshake, or its failure.
fn resume_under(
    first: ServerConfig,
    with_cert: bool,
    then: ServerConfig,
    clock: Option<WallClock>,
) -> Result<HandshakeSummary, fastshake_dtls::Error> {
    let mut pair = Pair::new(cert_client(with_cert, CLOCK), first);
    let (_, session) = first_session(&mut pair);
    pair.server =
        fastshake_dtls::Endpoint::new(Arc::new(then), [9; 32]).expect("a valid server configuration");
    reconnect(&mut pair, cert_client(with_cert, clock), Some(session), 3);
    match pair.handshake(MINUTE) {
        Some((c, _)) => Ok(c),
        None => Err(pair.client_failure().expect("a failure")),
    }
}

/// Resumption skips client authentication, so it may be used only while the session would still
/// pass the server's client-authentication policy: a policy tightened since the session was made
/// (a certificate now required, a trust anchor withdrawn, the chain expired) gets a full
/// handshake, which then enforces it.
#[test]
fn resumption_rechecks_a_client_auth_policy_tightened_since_the_session_was_made() {
    let pki = p256_pki();
    let handshake_failure =
        fastshake_dtls::Error::AlertReceived(fastshake_dtls::AlertDescription::HandshakeFailure);
    // Control: the same policy resumes.
    let same = resume_under(
        policy_server(ClientAuth::Require, Some(pki), CLOCK),
        true,
        policy_server(ClientAuth::Require, Some(pki), CLOCK),
        CLOCK,
    );
    assert_eq!(same.expect("resumed").resumption, Some(Resumption::Ticket));
    // A session made without a client certificate, offered once one is required.
    let required = resume_under(
        policy_server(ClientAuth::Optional, Some(pki), CLOCK),
        false,
        policy_server(ClientAuth::Require, Some(pki), CLOCK),
        CLOCK,
    );
    assert_eq!(required.unwrap_err(), handshake_failure, "a full handshake, which asks for the certificate");
    // A session whose client chain led to an anchor the server no longer trusts.
    let withdrawn = resume_under(
        policy_server(ClientAuth::Require, Some(pki), CLOCK),
        true,
        policy_server(ClientAuth::Require, Some(other_p256_pki()), CLOCK),
        CLOCK,
    );
    assert_eq!(
        withdrawn.unwrap_err().alert(),
        Some(fastshake_dtls::AlertDescription::UnknownCa),
        "a full handshake, which refuses the chain"
    );
    // Three days later the two-day client chain has expired: no resumption on it.
    let later = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 3 * 86_400 });
    let expired = resume_under(
        policy_server(ClientAuth::Require, Some(pki), CLOCK),
        true,
        policy_server(ClientAuth::Require, Some(pki), later),
        later,
    );
    assert!(expired.is_err(), "a full handshake at a time the chains no longer pass: {expired:?}");
    // A relaxed policy resumes the session whatever it was made with.
    let relaxed = resume_under(
        policy_server(ClientAuth::Require, Some(pki), CLOCK),
        true,
        policy_server(ClientAuth::None, None, CLOCK),
        CLOCK,
    );
    assert_eq!(relaxed.expect("resumed").resumption, Some(Resumption::Ticket));
}

/// Node A's session, sealed for the fleet's store, resumes by session ID at node B (a fresh
/// endpoint with the same ticket keys); sealed under another key it is a miss and a full
/// handshake.
#[test]
fn a_shared_session_resumes_at_another_endpoint_through_the_drivers_store() {
    let config = || ServerConfig { tickets: Some(TicketKeys::new(1, [7; 16])), ..id_server() };
    let mut pair = Pair::new(client_config_without_tickets(), config());
    pair.server.share_sessions();
    let (_, session) = first_session(&mut pair);
    let (id, sealed) = pair.server.poll_shared_session().expect("the new session is offered to the store");
    assert_eq!(&id[..], session.session_id());
    assert!(pair.server.poll_shared_session().is_none());

    for (keys, resumes) in [(TicketKeys::new(1, [7; 16]), true), (TicketKeys::new(1, [8; 16]), false)] {
        pair.server =
            fastshake_dtls::Endpoint::new(Arc::new(config()), [9; 32]).expect("a valid server configuration");
        pair.server.set_ticket_keys(keys.clone());
        pair.server.share_sessions();
        reconnect(&mut pair, client_config_without_tickets(), Some(session.clone()), 3);
        pair.run_for(Duration::from_millis(200));
        let asked = pair.server.poll_session_lookup().expect("a lookup for the unknown session ID");
        assert_eq!(asked, id);
        assert!(pair.server_events.is_empty(), "the ClientHello waits for the store");
        pair.server.answer_session_lookup(pair.now, asked, Some(&sealed));
        let (c, s) = pair.handshake(MINUTE).expect("a handshake after the answer");
        assert_eq!(s.resumption.is_some(), resumes, "{keys:?}");
        assert_eq!(c.resumption, s.resumption);
        assert!(pair.server.poll_session_lookup().is_none(), "one lookup per ID");
        // The waiting ClientHello went on at the answer: the client sent it once.
        assert_eq!(pair.client.stats().flights_resent, 0, "{keys:?}");
    }
}

/// Workers of one server that issues no tickets share sessions sealed under a key of their own:
/// worker A's session resumes by ID at worker B, and never with another sealing key.
#[test]
fn without_tickets_shared_sessions_are_sealed_by_the_workers_key() {
    let config = || ServerConfig { tickets: None, ..id_server() };
    let mut pair = Pair::new(client_config_without_tickets(), config());
    pair.server.share_sessions_sealed_by(TicketKeys::new(3, [4; 16]));
    let (_, session) = first_session(&mut pair);
    let (id, sealed) = pair.server.poll_shared_session().expect("the new session is offered to the store");
    assert_eq!(&id[..], session.session_id());

    for (keys, resumes) in [(TicketKeys::new(3, [4; 16]), true), (TicketKeys::new(3, [5; 16]), false)] {
        pair.server =
            fastshake_dtls::Endpoint::new(Arc::new(config()), [9; 32]).expect("a valid server configuration");
        pair.server.share_sessions_sealed_by(keys.clone());
        reconnect(&mut pair, client_config_without_tickets(), Some(session.clone()), 3);
        pair.run_for(Duration::from_millis(200));
        let asked = pair.server.poll_session_lookup().expect("a lookup for the unknown session ID");
        pair.server.answer_session_lookup(pair.now, asked, Some(&sealed));
        let (c, s) = pair.handshake(MINUTE).expect("a handshake after the answer");
        assert_eq!(s.resumption, resumes.then_some(Resumption::SessionId), "{keys:?}");
        assert_eq!(c.resumption, s.resumption);
    }
}

fn client_config_without_tickets() -> ClientConfig {
    ClientConfig { enable_tickets: false, ..client_config() }
}
