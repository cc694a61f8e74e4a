//! DTLS 1.3 resumption and 0-RTT on the in-memory pair: the NewSessionTicket after the
//! handshake, resumption without certificates, at another endpoint holding the same ticket keys
//! (a fleet), across one key rotation; tampered, foreign and expired tickets cost a full
//! handshake; early data taken once (by any worker of the server that issued the ticket, never
//! by another node), a replayed ClientHello's refused, and refused early data delivered after
//! the handshake, once.

use fastshake_dtls::{
    ClientConfig, ClientSession, EarlyDataRegister, Endpoint, Event, HandshakeSummary, Instant, Resumption,
    ServerConfig, TicketKey, TicketKeys, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{Datagram, Dir, Fate};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn keys() -> TicketKeys {
    TicketKeys::new(1, [7; 16])
}

fn psk_client() -> ClientConfig {
    ClientConfig { versions: Versions::Dtls13, wall_clock: CLOCK, ..client_config() }
}

fn psk_server() -> ServerConfig {
    ServerConfig { versions: Versions::Dtls13, tickets: Some(keys()), wall_clock: CLOCK, ..server_config() }
}

fn cert_client() -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls13,
        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        server_name: Some("localhost".into()),
        wall_clock: CLOCK,
        ..Default::default()
    }
}

fn cert_server() -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls13,
        certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
        tickets: Some(keys()),
        wall_clock: CLOCK,
        ..Default::default()
    }
}

fn early_client() -> ClientConfig {
    ClientConfig { early_data: true, ..cert_client() }
}

fn early_server() -> ServerConfig {
    ServerConfig { max_early_data: 4096, ..cert_server() }
}

/// The tickets the client received so far.
fn tickets(pair: &Pair) -> Vec<ClientSession> {
    pair.client_events
        .iter()
        .filter_map(|e| match e {
            Event::SessionTicket(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// A full handshake, then the ticket that follows it (once: the ACK stops its retransmission).
fn first_session(pair: &mut Pair) -> (HandshakeSummary, ClientSession) {
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert_eq!((c.resumed, s.resumed), (false, false));
    assert!(c.session.is_none(), "a 1.3 ticket comes after the handshake");
    pair.run_for(Duration::from_secs(5));
    let issued = tickets(pair);
    assert_eq!(issued.len(), 1, "one NewSessionTicket, received once");
    let server = pair.server.connection(pair.server_handle()).expect("the server's session");
    assert!(!server.holds_handshake_state(), "the ticket's ACK freed the server's state");
    assert!(issued[0].is_dtls13());
    (c, issued[0].clone())
}

/// A new client on a fresh port (same IP) offering `session`, events cleared.
fn reconnect(pair: &mut Pair, config: ClientConfig, session: Option<ClientSession>, seed: u8) {
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.resume_client(config, session, seed);
    pair.server_events.clear();
}

/// What the client sent the server as its datagrams `first..first + count`: for a replay.
fn to_server(pair: &Pair, first: usize, count: usize) -> Vec<Vec<u8>> {
    let wanted = |d: &&Datagram| d.dir == Dir::ToServer && (first..first + count).contains(&d.index);
    pair.log.iter().filter(wanted).map(|d| d.payload.clone()).collect()
}

fn resumed(c: &HandshakeSummary, s: &HandshakeSummary) -> bool {
    let both = c.resumed && s.resumed;
    assert_eq!(both, c.resumption == Some(Resumption::Ticket) && s.resumption == Some(Resumption::Ticket));
    assert_eq!(c.resumed, s.resumed, "both sides agree");
    both
}

#[test]
fn a_ticket_resumes_without_certificates_and_with_fewer_bytes() {
    let mut pair = Pair::new(cert_client(), cert_server());
    let (full, session) = first_session(&mut pair);
    assert_eq!(full.peer_certificates, 3);
    // Through bytes, as a session file keeps it.
    let bytes = session.to_bytes();
    let session = ClientSession::from_bytes(&bytes).expect("the bytes read back");
    assert_eq!(session.to_bytes(), bytes);
    reconnect(&mut pair, cert_client(), Some(session), 2);
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!((c.peer_certificates, c.peer_leaf.is_some()), (0, false), "no Certificate on resumption");
    assert!(c.bytes_received < full.bytes_received / 2, "{} vs {}", c.bytes_received, full.bytes_received);
    assert_eq!(c.early_data, None);
    pair.exchange_data(3);
    // The resumed session gets a ticket of its own, which resumes too.
    pair.run_for(Duration::from_secs(5));
    let next = tickets(&pair).pop().expect("a ticket after the resumed handshake");
    assert_ne!(next.to_bytes(), bytes);
    reconnect(&mut pair, cert_client(), Some(next), 3);
    let (c, s) = pair.handshake(MINUTE).expect("resumed again");
    assert!(resumed(&c, &s));
}

#[test]
fn a_psk_session_resumes_at_another_endpoint_with_the_fleets_keys_only() {
    let mut pair = Pair::new(psk_client(), psk_server());
    let (_, session) = first_session(&mut pair);
    for (keys, resumes) in [(keys(), true), (TicketKeys::new(1, [8; 16]), false)] {
        let config = ServerConfig { tickets: Some(keys.clone()), ..psk_server() };
        pair.server = Endpoint::new(Arc::new(config), [9; 32]).expect("a valid configuration");
        reconnect(&mut pair, psk_client(), Some(session.clone()), 3);
        let (c, s) = pair.handshake(MINUTE).expect("a handshake either way");
        assert_eq!(resumed(&c, &s), resumes, "{keys:?}");
        // Resumed or not, the keys are the external PSK's (and the ticket says whose).
        assert_eq!(s.psk_identity, PSK_ID);
        pair.exchange_data(2);
    }
}

#[test]
fn one_key_rotation_keeps_tickets_two_do_not() {
    let mut pair = Pair::new(cert_client(), cert_server());
    let (_, session) = first_session(&mut pair);
    pair.server.rotate_ticket_key(TicketKey::new(2, [8; 16]));
    reconnect(&mut pair, cert_client(), Some(session.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    assert!(resumed(&c, &s), "the previous key still opens");
    pair.server.rotate_ticket_key(TicketKey::new(3, [9; 16]));
    reconnect(&mut pair, cert_client(), Some(session), 3);
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    assert!(!resumed(&c, &s), "a key two rotations old no longer opens");
    assert_eq!(c.peer_certificates, 3, "a full handshake with certificates");
}

#[test]
fn tampered_and_expired_tickets_fall_back_to_full_handshakes() {
    let mut pair = Pair::new(cert_client(), cert_server());
    let (_, session) = first_session(&mut pair);
    let bytes = session.to_bytes();
    // The ticket follows the format byte, the suite and its length.
    for at in [5, 5 + 4, 5 + 20, 5 + 40] {
        let mut tampered = bytes.clone();
        tampered[at] ^= 0x01;
        let forged = ClientSession::from_bytes(&tampered).expect("still well formed");
        reconnect(&mut pair, cert_client(), Some(forged), 2);
        let (c, s) = pair.handshake(MINUTE).expect("full handshake, not a failure");
        assert!(!resumed(&c, &s), "byte {at}");
        assert_eq!(c.peer_certificates, 3);
    }
    // Expired at the server (its lifetime) while the client still offers it.
    let short = TicketKeys { lifetime: Duration::from_secs(10), ..keys() };
    let mut pair = Pair::new(cert_client(), ServerConfig { tickets: Some(short), ..cert_server() });
    let (_, session) = first_session(&mut pair);
    assert!(session.expires_unix() <= PKI_TIME + 60 + 20, "the lifetime went to the client");
    pair.now += Duration::from_secs(30);
    reconnect(&mut pair, cert_client(), Some(session.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!resumed(&c, &s));
    assert_eq!(c.peer_certificates, 3);
}

#[test]
fn early_data_is_taken_once_and_a_replayed_client_hello_gets_none() {
    let mut pair = Pair::new(early_client(), early_server());
    let (_, session) = first_session(&mut pair);
    assert_eq!(session.max_early_data(), 4096);
    reconnect(&mut pair, early_client(), Some(session), 2);
    // The server answers the early data at once: held until the client's Finished is checked.
    pair.on_server_event = Box::new(|server, h, e| {
        if *e == Event::ApplicationData(b"early hello".to_vec()) {
            assert!(!server.connection(h).unwrap().is_established());
            server.send(h, b"early answer").expect("held for the handshake's end");
        }
    });
    assert_eq!(pair.client.send_early_data(b"early hello"), Ok(true), "sent as 0-RTT");
    assert_eq!(pair.client.send_early_data(&[b'y'; 3000]), Ok(true), "in records that fit the MTU");
    // The next two datagrams to the server: the ClientHello and the early record.
    let first_datagram = pair.sent(Dir::ToServer);
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!((c.early_data, s.early_data), (Some(true), Some(true)));
    assert!(!c.hello_retry && !s.hello_retry, "the resumption skipped the cookie exchange");
    pair.run_for(Duration::from_secs(1));
    pair.exchange_data(1);
    assert_eq!(pair.server_data().iter().filter(|d| &d[..] == b"early hello").count(), 1);
    assert_eq!(pair.client_data().iter().filter(|d| &d[..] == b"early answer").count(), 1);
    let data = pair.server_data();
    let ys: Vec<&Vec<u8>> = data.iter().filter(|d| d.first() == Some(&b'y')).collect();
    assert_eq!(ys.iter().map(|d| d.len()).sum::<usize>(), 3000);
    assert!(ys.len() > 1 && pair.log.iter().all(|d| d.payload.len() <= 1500), "split by the MTU");
    pair.on_server_event = Box::new(|_, _, _| {});
    // The early data came before the session was up, in the datagram after the ClientHello.
    let early_at =
        pair.server_events.iter().position(|(_, e)| *e == Event::ApplicationData(b"early hello".to_vec()));
    let connected_at = pair.server_events.iter().position(|(_, e)| matches!(e, Event::Connected(_)));
    assert!(early_at < connected_at, "{early_at:?} {connected_at:?}");

    // An attacker replays the ClientHello and the early record from the client's IP.
    let replayed = to_server(&pair, first_datagram, 2);
    assert_eq!(replayed.len(), 2, "the ClientHello and the early record");
    let mut attacker = pair.client_addr;
    attacker.set_port(attacker.port() + 100);
    let before = pair.server_events.len();
    let accepted = pair.server.stats().connections_accepted;
    for payload in replayed {
        pair.inject(attacker, pair.server_addr, payload);
    }
    pair.run_for(Duration::from_secs(2));
    let after: Vec<&Event> = pair.server_events[before..].iter().map(|(_, e)| e).collect();
    assert!(!after.iter().any(|e| matches!(e, Event::ApplicationData(_))), "{after:?}");
    assert_eq!(
        pair.server.stats().connections_accepted,
        accepted + 1,
        "the copy got a session, not its data"
    );
    assert_eq!(pair.server_data().iter().filter(|d| &d[..] == b"early hello").count(), 1, "once");
}

#[test]
fn early_data_is_taken_by_any_worker_of_the_issuing_server_and_by_no_other_node() {
    // Two workers of one server share a register: the ticket worker 1 issued carries early
    // data to worker 2, and the ClientHello replayed to worker 1 gets none.
    let register = Arc::new(EarlyDataRegister::new([7; 8]));
    let worker = |seed: u8| {
        let mut endpoint =
            Endpoint::new(Arc::new(early_server()), [seed; 32]).expect("a valid configuration");
        endpoint.share_early_data_register(Arc::clone(&register));
        endpoint
    };
    let mut pair = Pair::new(early_client(), early_server());
    pair.server = worker(1);
    let (_, session) = first_session(&mut pair);
    let worker1 = std::mem::replace(&mut pair.server, worker(2));
    reconnect(&mut pair, early_client(), Some(session.clone()), 2);
    assert_eq!(pair.client.send_early_data(b"early hello"), Ok(true));
    let first_datagram = pair.sent(Dir::ToServer);
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!((c.early_data, s.early_data), (Some(true), Some(true)), "another worker took it");
    pair.run_for(Duration::from_secs(1));
    let replayed = to_server(&pair, first_datagram, 2);
    pair.server = worker1;
    let before = pair.server_events.len();
    let mut attacker = pair.client_addr;
    attacker.set_port(attacker.port() + 100);
    for payload in replayed {
        pair.inject(attacker, pair.server_addr, payload);
    }
    pair.run_for(Duration::from_secs(2));
    let after: Vec<&Event> = pair.server_events[before..].iter().map(|(_, e)| e).collect();
    assert!(!after.iter().any(|e| matches!(e, Event::ApplicationData(_))), "replayed to worker 1: {after:?}");

    // Another node of the fleet: the same ticket keys (it resumes the session) and early data
    // on, but its own register, so the ticket's early data is not its to take: it asks for a
    // cookie, which refuses the early data, and the client sends it after the handshake.
    pair.server = Endpoint::new(Arc::new(early_server()), [3; 32]).expect("a valid configuration");
    reconnect(&mut pair, early_client(), Some(session), 4);
    assert_eq!(pair.client.send_early_data(b"early hello"), Ok(true));
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!(c.early_data, Some(false), "refused at another node");
    assert!(c.hello_retry);
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_data(), vec![b"early hello".to_vec()], "after the handshake, once");
}

#[test]
fn early_data_a_server_refuses_arrives_after_the_handshake_once() {
    let mut pair = Pair::new(early_client(), early_server());
    let (_, session) = first_session(&mut pair);
    // Another node with the fleet's keys but no early data: it asks for a cookie, which refuses
    // the early data (RFC 8446 §4.1.2), and the client sends it again after the handshake.
    pair.server = Endpoint::new(Arc::new(cert_server()), [9; 32]).expect("a valid configuration");
    reconnect(&mut pair, early_client(), Some(session.clone()), 2);
    assert_eq!(pair.client.send_early_data(b"early one"), Ok(true));
    assert_eq!(pair.client.send_early_data(&[b'x'; 5000]), Ok(false), "beyond the ticket's allowance");
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!(c.early_data, Some(false), "refused");
    assert!(c.hello_retry);
    pair.run_for(Duration::from_secs(1));
    let mut want = b"early one".to_vec();
    want.extend_from_slice(&[b'x'; 5000]);
    let got: Vec<u8> = pair.server_data().concat();
    assert!(got == want, "each once, in order: {} bytes, not {}", got.len(), want.len());
    assert_eq!(pair.server_data()[0], b"early one");

    // A client that did not turn early data on never sends any.
    let mut pair = Pair::new(cert_client(), early_server());
    let (_, session) = first_session(&mut pair);
    reconnect(&mut pair, cert_client(), Some(session), 2);
    assert_eq!(pair.client.send_early_data(b"later"), Ok(false));
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!(c.early_data, None);
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_data(), vec![b"later".to_vec()]);
}

/// A link whose round trip is longer than the tolerance of the ticket-age check (a multi-hop
/// duty-cycled radio): the client's idea of a ticket's age starts when the ticket arrives, ours
/// when we sent it, and its ClientHello takes a one-way trip more to come back.
#[test]
fn early_data_is_taken_over_a_link_whose_round_trip_is_longer_than_the_age_tolerance() {
    let slow = |d: Duration| d * 6;
    let client = ClientConfig {
        initial_retransmit: Duration::from_secs(60),
        handshake_timeout: Duration::from_secs(600),
        ..early_client()
    };
    let server = ServerConfig {
        initial_retransmit: Duration::from_secs(60),
        handshake_timeout: Duration::from_secs(600),
        ..early_server()
    };
    let mut pair = Pair::new(client.clone(), server);
    // 7 s each way: a 14 s round trip, beyond the 10 s either side the age check allows.
    pair.delay = Duration::from_secs(7);
    let (c, _) = pair.handshake(slow(MINUTE)).expect("full handshake");
    assert!(!c.resumed);
    pair.run_for(Duration::from_secs(30));
    let issued = tickets(&pair);
    assert_eq!(issued.len(), 1, "one NewSessionTicket");
    pair.run_for(Duration::from_secs(20));
    reconnect(&mut pair, client, Some(issued[0].clone()), 2);
    assert_eq!(pair.client.send_early_data(b"slow hello"), Ok(true));
    let (c, s) = pair.handshake(slow(MINUTE)).expect("resumed handshake");
    assert!(resumed(&c, &s));
    assert_eq!((c.early_data, s.early_data), (Some(true), Some(true)), "taken as 0-RTT");
    assert_eq!(c.retransmissions + s.retransmissions, 0, "no flight was resent");
    pair.run_for(Duration::from_secs(30));
    assert_eq!(pair.server_data(), vec![b"slow hello".to_vec()], "once");
}

#[test]
fn a_lost_new_session_ticket_is_sent_again() {
    let mut pair = Pair::new(psk_client(), psk_server());
    // The server's datagrams: HelloRetryRequest, its flight, its ACK, then the ticket.
    pair.filter =
        Box::new(|d| if d.dir == Dir::ToClient && d.index == 3 { Fate::Drop } else { Fate::Deliver });
    let (_, session) = first_session(&mut pair);
    assert!(pair.sent(Dir::ToClient) > 4, "the ticket went again");
    reconnect(&mut pair, psk_client(), Some(session), 2);
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(resumed(&c, &s));
}

#[test]
fn a_1_2_client_ignores_a_1_3_session() {
    let mut pair = Pair::new(psk_client(), psk_server());
    let (_, session) = first_session(&mut pair);
    let v12 = ServerConfig { versions: Versions::Dtls12, tickets: Some(keys()), ..server_config() };
    pair.server = Endpoint::new(Arc::new(v12), [9; 32]).expect("a valid configuration");
    reconnect(&mut pair, ClientConfig { versions: Versions::Dtls12, ..client_config() }, Some(session), 2);
    let (c, s) = pair.handshake(MINUTE).expect("a full 1.2 handshake");
    assert_eq!((c.version, c.resumed, s.resumed), (Versions::Dtls12, false, false));
}

/// A client offering both versions offers a 1.3 session's ticket in the 1.3 part of its hello:
/// a server answering 1.3 resumes it; a 1.2-only server, to whom the ticket means nothing,
/// runs a full 1.2 handshake.
#[test]
fn a_client_offering_both_versions_resumes_a_1_3_ticket() {
    let both = || ClientConfig { versions: Versions::Both, ..cert_client() };
    for server_versions in [Versions::Dtls13, Versions::Both] {
        let server = ServerConfig { versions: server_versions, ..cert_server() };
        let mut pair = Pair::new(both(), server);
        let (full, session) = first_session(&mut pair);
        assert_eq!((full.version, full.peer_certificates), (Versions::Dtls13, 3));
        reconnect(&mut pair, both(), Some(session.clone()), 2);
        let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
        assert!(resumed(&c, &s), "against a {server_versions:?} server");
        assert_eq!((c.version, c.peer_certificates), (Versions::Dtls13, 0));
        assert_eq!(c.retransmissions + s.retransmissions, 0);

        let v12 = ServerConfig { versions: Versions::Dtls12, ..cert_server() };
        pair.server = Endpoint::new(Arc::new(v12), [9; 32]).expect("a valid configuration");
        reconnect(&mut pair, both(), Some(session), 3);
        let (c, s) = pair.handshake(MINUTE).expect("a full 1.2 handshake");
        assert_eq!(
            (c.version, c.resumed, s.resumed, c.peer_certificates),
            (Versions::Dtls12, false, false, 3)
        );
    }
}

/// A ticket is offered only to the server name it came from (RFC 8446 §4.6.1): a PSK session
/// made with no name is not offered by a client that names a server.
#[test]
fn a_ticket_is_not_offered_to_another_server_name() {
    let mut pair = Pair::new(psk_client(), psk_server());
    let (_, session) = first_session(&mut pair);
    assert_eq!(session.server_name(), None);
    for versions in [Versions::Dtls13, Versions::Both] {
        let named = ClientConfig { versions, server_name: Some("elsewhere.example".into()), ..psk_client() };
        reconnect(&mut pair, named, Some(session.clone()), 4);
        let (c, s) = pair.handshake(MINUTE).expect("a full handshake");
        assert_eq!((c.resumed, s.resumed), (false, false), "{versions:?}");
    }
}

/// A certificate client with no session yet lists its PSK modes in its first ClientHello: a
/// server sends tickets only for modes the client advertised (RFC 8446 §4.2.9), and one that
/// holds to it (pion's) sent none to a hello without them.
#[test]
fn a_first_client_hello_advertises_psk_modes_for_the_tickets_to_come() {
    let mut pair = Pair::new(cert_client(), cert_server());
    first_session(&mut pair);
    let hello = &pair.log[0].payload;
    // psk_key_exchange_modes (45): psk_dhe_ke (1) alone, as the client has groups.
    assert!(hello.windows(6).any(|w| w == [0x00, 0x2d, 0x00, 0x02, 0x01, 0x01]), "{hello:02x?}");
}

#[test]
fn a_client_that_takes_no_tickets_lists_no_psk_modes_and_is_sent_none() {
    let client = ClientConfig { enable_tickets: false, ..cert_client() };
    let mut pair = Pair::new(client, cert_server());
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert_eq!((c.resumed, s.resumed), (false, false));
    pair.run_for(Duration::from_secs(5));
    assert!(tickets(&pair).is_empty(), "no ticket handed out");
    let hello = &pair.log[0].payload;
    assert!(!hello.windows(2).any(|w| w == [0x00, 0x2d]), "no psk_key_exchange_modes: {hello:02x?}");
    let server = pair.server.connection(pair.server_handle()).expect("the server's session");
    assert!(!server.holds_handshake_state(), "no NewSessionTicket awaits an ACK");
    pair.exchange_data(2);
}

#[test]
fn accepted_early_data_that_overtook_or_lost_its_client_hello_arrives_once() {
    // The early record reaches the server before its ClientHello (no session for it yet), is
    // lost, or arrives twice. The server took early data, so the refused-data resend after the
    // handshake does not apply: the record goes again, as it was sealed, in front of the
    // client's Finished, and the replay window drops a copy of one already taken.
    for case in ["overtakes", "lost", "duplicated"] {
        let mut pair = Pair::new(early_client(), early_server());
        let (_, session) = first_session(&mut pair);
        reconnect(&mut pair, early_client(), Some(session), 2);
        let hello = pair.sent(Dir::ToServer);
        let fate = match case {
            "overtakes" => (hello, Fate::Late(Duration::from_millis(30))),
            "lost" => (hello + 1, Fate::Drop),
            _ => (hello + 1, Fate::DuplicateLate(Duration::from_millis(15))),
        };
        pair.filter =
            Box::new(
                move |d| {
                    if d.dir == Dir::ToServer && d.index == fate.0 {
                        fate.1
                    } else {
                        Fate::Deliver
                    }
                },
            );
        assert_eq!(pair.client.send_early_data(b"early hello"), Ok(true), "{case}");
        let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
        assert!(resumed(&c, &s), "{case}");
        assert_eq!((c.early_data, s.early_data), (Some(true), Some(true)), "{case}: accepted");
        pair.run_for(Duration::from_secs(2));
        assert_eq!(pair.server_data(), vec![b"early hello".to_vec()], "{case}: delivered once");
        pair.exchange_data(1);
    }
}

#[test]
fn a_resent_finished_is_acknowledged_by_its_own_records_and_the_ack_does_not_grow() {
    let mut pair = Pair::new(psk_client(), psk_server());
    // The server's datagrams: HelloRetryRequest (0), its flight (1), then the ACK of the client's
    // Finished and the ticket, both lost for a while: the client resends its Finished, and the
    // server (its ticket unacknowledged, so still holding the handshake) answers each copy.
    pair.filter = Box::new(|d| match d.dir {
        Dir::ToClient if (2..12).contains(&d.index) => Fate::Drop,
        _ => Fate::Deliver,
    });
    pair.handshake(MINUTE).expect("connected");
    pair.run_for(2 * MINUTE);
    let answers: Vec<usize> = pair
        .log
        .iter()
        .filter(|d| d.dir == Dir::ToClient && (2..12).contains(&d.index))
        .map(|d| d.payload.len())
        .collect();
    assert_eq!(answers.len(), 10, "the client resent its Finished: {answers:?}");
    // RFC 9147 §7: an ACK names the records of the flight as received this time, not every
    // copy ever received, so after the first answer there is one ACK size and one ticket size.
    let mut later: Vec<usize> = answers[2..].to_vec();
    later.sort_unstable();
    later.dedup();
    assert!(later.len() <= 2, "the ACK grew with each copy: {answers:?}");
    assert!(later.iter().all(|&len| len <= answers[0].max(answers[1])), "{answers:?}");
    assert!(!pair.client.holds_handshake_state(), "acknowledged in the end");
    assert_eq!(tickets(&pair).len(), 1);
    pair.exchange_data(3);
}

/// Under a SHA-384 suite with a 256-bit key, the secrets are 48 bytes and the record keys the
/// long kind: the ticket (from the resumption secret) resumes, and key updates both ways, which
/// derive from the traffic secrets, keep data flowing in both sessions.
#[test]
fn under_aes_256_gcm_sha384_a_ticket_resumes_and_keys_update_both_ways() {
    let suites13 = vec![fastshake_dtls::dtls13::Suite13::Aes256GcmSha384];
    let client = ClientConfig { suites13: suites13.clone(), ..cert_client() };
    let mut pair = Pair::new(client.clone(), cert_server());
    let (full, session) = first_session(&mut pair);
    assert_eq!(full.suite, fastshake_dtls::CipherSuite::Aes256GcmSha384);
    for resumed_session in [false, true] {
        if resumed_session {
            reconnect(&mut pair, client.clone(), Some(session.clone()), 2);
            let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
            assert!(resumed(&c, &s));
            assert_eq!(c.suite, fastshake_dtls::CipherSuite::Aes256GcmSha384);
        }
        pair.exchange_data(2);
        let now = pair.now;
        pair.client.update_keys(now, true).expect("a 1.3 session");
        pair.run_for(Duration::from_secs(5));
        pair.exchange_data(2);
        let h = pair.server_handle();
        pair.server.update_keys(h, false).expect("the server's update");
        pair.run_for(Duration::from_secs(5));
        pair.exchange_data(2);
        assert!(pair.client_failure().is_none() && pair.server_failure().is_none());
    }
}
