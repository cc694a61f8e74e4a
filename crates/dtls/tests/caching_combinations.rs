//! Handshake caching (RFC 7924 objects, client-certificate tickets, seed 003) combined with
//! the rest of the engine on the in-memory pair: resumption by ticket and by session ID
//! (caching for the long term, resumption for the short term), Connection IDs, the IPC and TCS
//! socket strategies of seed 001, and PSK suites, which caching must leave byte for byte alone.

mod caching_common;

use caching_common::*;
use fastshake_dtls::{
    CachedServer, ClientConfig, ClientSession, HandshakeSummary, MobilityMode, NegotiatedMobility,
    Resumption, ServerConfig, SessionCacheConfig, SocketAction, TicketKeys,
};
use fastshake_testkit::dtls::{client_config, server_config, Pair};
use fastshake_testkit::net::{Datagram, Dir};
use std::net::SocketAddr;
use std::time::Duration;

/// Client-certificate caching, as on the wire.
const EXT_CLIENT_CERT_CACHE: u16 = 0xFFA0;
/// RFC 7924 cached_info.
const EXT_CACHED_INFO: u16 = 25;
const SECOND: Duration = Duration::from_secs(1);

fn bithac_client(pki: &fastshake_pki::generate::TestPki) -> ClientConfig {
    client(pki, true, true)
}

/// A server that resumes by ticket only (no session cache), so that every full handshake
/// also leaves the client a ticket.
fn ticket_server(pki: &fastshake_pki::generate::TestPki) -> ServerConfig {
    ServerConfig {
        tickets: Some(TicketKeys::new(1, [9; 16])),
        session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
        ..server(pki)
    }
}

/// The next handshake from a new client port offering `session` and `cached`.
fn reconnect(
    pair: &mut Pair,
    config: ClientConfig,
    session: Option<ClientSession>,
    cached: Option<CachedServer>,
    seed: u8,
) {
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.cached_client(config, session, cached, seed);
    pair.server_events.clear();
}

fn assert_bithac(c: &HandshakeSummary, s: &HandshakeSummary) {
    assert_eq!(c.resumption, None, "a full handshake");
    assert!(c.from_cache.server_certificate && c.from_cache.certificate_request, "{:?}", c.from_cache);
    assert!(c.from_cache.client_certificate && s.from_cache.client_certificate, "{:?}", s.from_cache);
}

/// Full, BiTHaC, resumed, BiTHaC again: the abbreviated handshake neither uses nor changes a
/// cache on either side, and the ticket the BiTHaC handshake derived still opens the client's
/// chain afterwards, once.
fn caching_and_resumption(server_config: ServerConfig, kind: Resumption) {
    let pki = p256_pki();
    let mut pair = Pair::new(bithac_client(pki), server_config);
    let (_, _, first) = first_handshake(&mut pair);

    reconnect(&mut pair, bithac_client(pki), None, Some(first.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("BiTHaC handshake");
    assert_bithac(&c, &s);
    let cached = c.cache_update.clone().expect("a fresh ticket");
    assert_ne!(cached, first);
    let session = c.session.clone().expect("something to resume");
    assert_eq!(session.has_ticket(), kind == Resumption::Ticket);
    let bithac_bytes = handshake_bytes(&c);
    assert_eq!(pair.server.client_cert_cache_size().0, 1);

    // Short term: resumption, with the caching extensions offered beside it.
    reconnect(&mut pair, bithac_client(pki), Some(session), Some(cached.clone()), 3);
    let (c, s) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert_eq!((c.resumption, s.resumption), (Some(kind), Some(kind)));
    assert!(!c.from_cache.any() && !s.from_cache.any(), "{:?} {:?}", c.from_cache, s.from_cache);
    assert_eq!(c.cache_update, None, "the client's entry stays as it was");
    assert_eq!(pair.server.client_cert_cache_size().0, 1, "the server's entry is back, unchanged");
    assert!(!c.chain_validation_skipped && !s.chain_validation_skipped);
    let resumed_bytes = handshake_bytes(&c);
    assert!(resumed_bytes < bithac_bytes, "resumed {resumed_bytes} B, BiTHaC {bithac_bytes} B");
    pair.exchange_data(1);

    // Long term: a full handshake again uses every cached object and gets a fresh ticket.
    reconnect(&mut pair, bithac_client(pki), None, Some(cached.clone()), 4);
    let (c, s) = pair.handshake(MINUTE).expect("BiTHaC after resumption");
    assert_bithac(&c, &s);
    let next = c.cache_update.clone().expect("a fresh ticket");
    assert!(next.has_client_ticket() && next != cached);
    assert_eq!(s.peer_leaf.as_ref(), pki.client_chain().first());
    println!(
        "{kind:?}: BiTHaC {bithac_bytes} B, resumed {resumed_bytes} B, BiTHaC again {} B",
        handshake_bytes(&c)
    );

    // That ticket opened its entry: offered again it gets an ordinary full handshake.
    reconnect(&mut pair, bithac_client(pki), None, Some(cached), 5);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake after a replay");
    assert!(!c.from_cache.client_certificate && !s.from_cache.client_certificate);
}

#[test]
fn resumption_by_ticket_leaves_the_caches_for_the_next_full_handshake() {
    caching_and_resumption(ticket_server(p256_pki()), Resumption::Ticket);
}

#[test]
fn resumption_by_session_id_leaves_the_caches_for_the_next_full_handshake() {
    caching_and_resumption(server(p256_pki()), Resumption::SessionId);
}

/// Resumption offered with a session the server no longer knows: the handshake falls back to a
/// full one, and that one still uses the caches.
#[test]
fn a_resumption_that_fails_falls_back_to_a_cached_full_handshake() {
    let pki = p256_pki();
    let mut pair = Pair::new(bithac_client(pki), ticket_server(pki));
    let (first, _, _) = first_handshake(&mut pair);
    let session = first.session.clone().expect("a ticket");
    // A server with other ticket keys (another instance, or keys rotated twice) cannot open
    // the ticket; it learnt the client's chain in a full handshake of its own first.
    let fresh = ServerConfig { tickets: Some(TicketKeys::new(2, [3; 16])), ..ticket_server(pki) };
    let mut pair2 = Pair::with_seed(bithac_client(pki), fresh, 7);
    let (_, _, entry2) = first_handshake(&mut pair2);
    reconnect(&mut pair2, bithac_client(pki), Some(session), Some(entry2), 2);
    let (c, s) = pair2.handshake(MINUTE).expect("full handshake");
    assert_eq!((c.resumption, s.resumption), (None, None), "the foreign ticket does not resume");
    assert_bithac(&c, &s);
    assert!(c.session.is_some(), "a new ticket for next time");
}

fn expected(side: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{side}-{i}").into_bytes()).collect()
}

/// A BiTHaC handshake negotiating a connection ID (with return routability checks); then the
/// client's address changes and the session follows it, records flowing both ways.
#[test]
fn bithac_with_connection_ids_and_a_client_that_moves() {
    let pki = p256_pki();
    let cid_client = || ClientConfig { mobility: MobilityMode::Cid.client_mobility(), ..bithac_client(pki) };
    let server = ServerConfig { mobility: MobilityMode::Cid.server_mobility(), ..server(pki) };
    let mut pair = Pair::new(cid_client(), server);
    let (_, _, entry) = first_handshake(&mut pair);
    reconnect(&mut pair, cid_client(), None, Some(entry), 2);
    let (c, s) = pair.handshake(MINUTE).expect("BiTHaC with a connection ID");
    assert_bithac(&c, &s);
    assert_eq!(
        pair.client.negotiated_mobility(),
        NegotiatedMobility { connection_id: true, return_routability: true, port_move: false },
        "CID and RRC negotiated"
    );
    let h = pair.server_handle();
    let cid = pair.server.connection(h).unwrap().connection_id().expect("the server issued one").to_vec();
    assert_eq!(cid.len(), 8);

    let moved_to: SocketAddr = "203.0.113.9:50000".parse().unwrap();
    pair.client_addr = moved_to;
    let before = pair.log.len();
    for i in 0..3 {
        pair.client.send(format!("c-{i}").as_bytes()).unwrap();
        pair.elapse(Duration::from_millis(50));
        pair.server.send(h, format!("s-{i}").as_bytes()).unwrap();
        pair.elapse(Duration::from_millis(50));
    }
    pair.elapse(2 * SECOND);
    assert_eq!(pair.server_data(), expected("c", 3));
    assert_eq!(pair.client_data(), expected("s", 3));
    let conn = pair.server.connection(h).expect("the same session");
    assert_eq!(conn.remote(), moved_to);
    assert_eq!(conn.mobility_stats().path_changes, 1);
    assert!(conn.mobility_stats().path_challenges_sent >= 1, "the new address was checked (RRC)");
    assert!(pair.client.mobility_stats().path_responses_sent >= 1);
    assert_eq!(pair.server.stats().connections_accepted, 2, "no new handshake for the move");
    // Every record from the new address carries the connection ID (tls12_cid, RFC 9146).
    let from_new: Vec<&Datagram> = pair.log[before..].iter().filter(|d| d.src == moved_to).collect();
    assert!(!from_new.is_empty());
    assert!(from_new.iter().all(|d| d.payload[0] == 25 && d.payload[11..19] == cid[..]));
}

/// The server side of a seed 001 strategy in memory: the driver's socket actions, carried out
/// on the pair (every port of the server's IP reaches the endpoint, so a temporary connected
/// socket on the welcome port needs nothing more).
fn strategy_driver(pair: &mut Pair, mode: MobilityMode, first_port: u16) {
    let ip = pair.server_addr.ip();
    let mut port = first_port;
    pair.on_server_event = Box::new(move |server, h, e| {
        let Some(action) = server.connection(h).and_then(|c| mode.socket_action(e, c)) else { return };
        match action {
            SocketAction::OpenOwn => {
                server.set_local(h, SocketAddr::new(ip, port));
                port += 1;
            }
            SocketAction::MoveToOwn => {
                server.move_to(h, SocketAddr::new(ip, port)).expect("an established session moves");
                port += 1;
            }
            SocketAction::OpenTemporary { .. } => {}
            SocketAction::StayOnWelcomePort(why) => panic!("{mode}: {why}"),
        }
    });
}

/// Seed 001's client that hands over: from a new address it has to handshake again, through
/// the welcome port, and the new handshake takes what the first one cached.
fn hand_over_with_caching(mode: MobilityMode) {
    let pki = p256_pki();
    let moving = |cached_info, tickets| ClientConfig {
        mobility: mode.client_mobility(),
        ..client(pki, cached_info, tickets)
    };
    let server = ServerConfig { mobility: mode.server_mobility(), ..server(pki) };
    let welcome = SocketAddr::new(pair_server_ip(), 5684);
    let mut pair = Pair::new(moving(true, true), server);
    strategy_driver(&mut pair, mode, 7000);
    let (first, _, entry) = first_handshake(&mut pair);
    pair.elapse(5 * SECOND);
    let own = pair.client.remote();
    assert_ne!(own, welcome, "{mode}: the session has a port of its own");
    assert_eq!(own.ip(), welcome.ip());
    pair.exchange_data(1);

    // Handover: a new address, a new handshake (standard DTLS sessions do not follow a client
    // that lost its state), the caches offered.
    pair.client_addr = "203.0.113.9:40000".parse().unwrap();
    pair.cached_client(moving(true, true), None, Some(entry), 2);
    pair.server_events.clear();
    let (cached, s) = pair.handshake(MINUTE).expect("handshake after the handover");
    assert_bithac(&cached, &s);
    pair.elapse(5 * SECOND);
    let again = pair.client.remote();
    assert!(again != welcome && again != own, "{mode}: a new session port {again}");
    pair.exchange_data(1);

    // The same handover without caching, for the bytes.
    pair.client_addr = "203.0.113.9:40001".parse().unwrap();
    pair.cached_client(moving(false, false), None, None, 3);
    pair.server_events.clear();
    let (vanilla, s) = pair.handshake(MINUTE).expect("vanilla handshake after the handover");
    assert!(!vanilla.from_cache.any() && !s.from_cache.any());
    let (cached_bytes, vanilla_bytes) = (handshake_bytes(&cached), handshake_bytes(&vanilla));
    println!(
        "{mode} handover, P-256 x3 mutual: vanilla {vanilla_bytes} B, BiTHaC {cached_bytes} B ({:.1} %), first {} B",
        100.0 * cached_bytes as f64 / vanilla_bytes as f64,
        handshake_bytes(&first)
    );
    // Both chains (three certificates each) are more than half of a vanilla handshake, and
    // they stay at home.
    let chains: u64 = pki.client_chain().iter().chain(&pki.server_chain()).map(|c| c.len() as u64).sum();
    assert!(2 * chains > vanilla_bytes);
    assert!(2 * cached_bytes < vanilla_bytes, "{mode}: {cached_bytes} B vs {vanilla_bytes} B");
}

fn pair_server_ip() -> std::net::IpAddr {
    "198.51.100.1".parse().unwrap()
}

#[test]
fn an_ipc_client_that_hands_over_uses_its_caches_in_the_new_handshake() {
    hand_over_with_caching(MobilityMode::Ipc);
}

#[test]
fn a_tcs_client_that_hands_over_uses_its_caches_in_the_new_handshake() {
    hand_over_with_caching(MobilityMode::Tcs);
}

/// Every datagram's bytes, in order.
fn wire(log: &[Datagram]) -> Vec<(Dir, Vec<u8>)> {
    log.iter().map(|d| (d.dir, d.payload.clone())).collect()
}

/// A PSK client with caching configured (and an entry from some certificate handshake at hand)
/// sends neither caching extension: the handshake is byte for byte the one without caching.
#[test]
fn psk_handshakes_are_unaffected_by_caching() {
    let pki = p256_pki();
    let mut cert_pair = Pair::new(bithac_client(pki), server(pki));
    let (_, _, entry) = first_handshake(&mut cert_pair);

    let psk_server = server_config;
    let mut plain = Pair::new(client_config(), psk_server());
    let (plain_c, _) = plain.handshake(MINUTE).expect("PSK handshake");
    let caching = ClientConfig {
        cached_info: true,
        client_certificate_caching: true,
        server_name: Some("localhost".into()),
        ..client_config()
    };
    let mut with_caching = Pair::new(caching.clone(), psk_server());
    with_caching.cached_client(caching, None, Some(entry), 1);
    let (c, s) = with_caching.handshake(MINUTE).expect("PSK handshake with caching configured");
    assert!(!c.from_cache.any() && !s.from_cache.any() && c.cache_update.is_none());
    assert!(!with_caching.log.iter().any(|d| client_hello_has_extension(d, EXT_CACHED_INFO)
        || client_hello_has_extension(d, EXT_CLIENT_CERT_CACHE)));
    assert_eq!(wire(&with_caching.log), wire(&plain.log), "byte for byte the same handshake");
    assert_eq!(handshake_bytes(&c), handshake_bytes(&plain_c));
    with_caching.exchange_data(1);
}

/// A client that offers both certificate and PSK suites with caching (and so sends both
/// extensions) to a PSK-only server: the server ignores them and answers neither.
#[test]
fn a_psk_server_ignores_caching_extensions() {
    let pki = p256_pki();
    let mut cert_pair = Pair::new(bithac_client(pki), server(pki));
    let (_, _, entry) = first_handshake(&mut cert_pair);
    let both = || ClientConfig { psk: client_config().psk, ..bithac_client(pki) };
    let mut pair = Pair::new(both(), server_config());
    pair.cached_client(both(), None, Some(entry), 1);
    let (c, s) = pair.handshake(MINUTE).expect("PSK handshake");
    assert!(pair.log.iter().any(|d| client_hello_has_extension(d, EXT_CACHED_INFO)));
    assert!(pair.log.iter().any(|d| client_hello_has_extension(d, EXT_CLIENT_CERT_CACHE)));
    assert_eq!(c.suite, s.suite);
    assert!(c.suite.is_psk(), "{:?}", c.suite);
    assert!(!c.from_cache.any() && !s.from_cache.any());
    assert_eq!(c.cache_update, None, "nothing learnt from a PSK handshake");
    // The ServerHello answers neither extension.
    let hello = pair
        .log
        .iter()
        .filter(|d| d.dir == Dir::ToClient)
        .flat_map(|d| {
            handshake_bodies(&d.payload, 2).into_iter().map(move |(at, len)| &d.payload[at..at + len])
        })
        .next()
        .expect("a ServerHello");
    for ext in [EXT_CACHED_INFO, EXT_CLIENT_CERT_CACHE] {
        assert_eq!(extension_at(hello, 2 + 32, false, ext), None, "extension {ext:#x}");
    }
    pair.exchange_data(1);
}
