//! What an established PSK session costs its server: the endpoint's heap per session, its tables
//! included, at most 400 bytes for DTLS 1.2 with or without a Connection ID; DTLS 1.3's figure,
//! above that still, is held where it stands. The session alone:
//! the session-ID cache (resumption, seed 003) is off, as its entries are counted apart (its own
//! binary: the counting allocator sees every thread, so nothing else may run beside it). The
//! figures of record, for both versions, are `fastshake bench handshake`'s.
use fastshake_dtls::{ClientConfig, Connection, Endpoint, Instant, NamedGroup, ServerConfig, Versions};
use fastshake_testkit::dtls::{client_config, server_config};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SESSIONS: u16 = 200;

/// One measurement at a time: the allocator's counts are the whole process's.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());
const SERVER: &str = "198.51.100.1:5684";

fn live_heap() -> i64 {
    let s = GLOBAL.stats();
    // stats_alloc counts a growing realloc in bytes_allocated (a shrinking one in
    // bytes_deallocated) and again in bytes_reallocated: the latter is not added.
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// What dropping `endpoint` frees.
fn heap_of(endpoint: Endpoint) -> i64 {
    let before = live_heap();
    drop(endpoint);
    before - live_heap()
}

/// A handshake from `from` and one record each way; the client is returned to be dropped
/// apart from the server's count.
fn connect(server: &mut Endpoint, config: &Arc<ClientConfig>, from: SocketAddr, seed: u16) -> Connection {
    let to: SocketAddr = SERVER.parse().unwrap();
    let now = Instant::from_millis(1);
    let mut rng_seed = [0u8; 32];
    rng_seed[..2].copy_from_slice(&seed.to_le_bytes());
    let mut client = Connection::client(Arc::clone(config), now, to, rng_seed);
    let (mut client_sent, mut server_sent) = (false, false);
    for _ in 0..16 {
        while let Some(t) = client.poll_transmit(now) {
            server.handle_datagram(now, to, from, &mut t.payload.clone());
        }
        while let Some(t) = server.poll_transmit(now) {
            client.handle_datagram(now, to, &mut t.payload.clone());
        }
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
        if client.is_established() && !client_sent {
            client.send(b"from the client").unwrap();
            client_sent = true;
        }
        // A 1.3 server is established one flight after its client (the client's Finished).
        let established =
            server.handle_for(from).filter(|h| server.connection(*h).is_some_and(Connection::is_established));
        if let (Some(h), false) = (established, server_sent) {
            server.send(h, b"from the server").unwrap();
            server_sent = true;
        }
    }
    assert!(client_sent && server_sent, "session {seed} established");
    client
}

/// The server's heap per established session: `SESSIONS` of them, once their handshake state
/// has timed out, beside an empty endpoint.
fn per_session(client: ClientConfig, mut server: ServerConfig) -> i64 {
    let _alone = MEASURING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    server.session_cache.max_entries = 0;
    let (client, server) = (Arc::new(client), Arc::new(server));
    let empty = heap_of(Endpoint::new(Arc::clone(&server), [9; 32]).unwrap());
    let mut endpoint = Endpoint::new(Arc::clone(&server), [9; 32]).unwrap();
    for n in 0..SESSIONS {
        let from = SocketAddr::from(([203, 0, 113, 9], 1024 + n));
        drop(connect(&mut endpoint, &client, from, n));
    }
    let settled = Instant::from_millis(1) + server.handshake_timeout + Duration::from_secs(1);
    endpoint.handle_timeout(settled);
    while endpoint.poll_transmit(settled).is_some() {}
    while endpoint.poll_event().is_some() {}
    assert_eq!(endpoint.stats().connections_open, u64::from(SESSIONS));
    (heap_of(endpoint) - empty) / i64::from(SESSIONS)
}

#[test]
fn an_established_psk_session_costs_its_server_at_most_400_bytes() {
    let plain = per_session(client_config(), server_config());
    let mut client = client_config();
    let mut server = server_config();
    client.mobility.connection_id = Some(4);
    server.mobility.connection_id = Some(4);
    let with_cid = per_session(client, server);
    println!("server heap per established PSK session: {plain} B, {with_cid} B with a 4-byte CID");
    assert!(plain <= 400, "{plain} B per session");
    assert!(with_cid <= 400, "{with_cid} B per session with a CID");
    assert!(with_cid > plain, "a CID session keeps its CIDs: {with_cid} B against {plain} B");
}

/// A DTLS 1.3 session (PSK with x25519, AES-128-GCM) keeps its two traffic secrets for key
/// updates (RFC 9147 §8) and the keys of one read and one write epoch: more than a 1.2 session,
/// but no more than it takes today, so that a change that makes every 1.3 session larger fails
/// here.
#[test]
fn an_established_dtls13_psk_session_costs_its_server_at_most_what_it_takes_today() {
    let dtls13 = |cid: Option<u8>| {
        let mut client =
            ClientConfig { versions: Versions::Dtls13, groups: vec![NamedGroup::X25519], ..client_config() };
        let mut server =
            ServerConfig { versions: Versions::Dtls13, groups: vec![NamedGroup::X25519], ..server_config() };
        client.mobility.connection_id = cid;
        server.mobility.connection_id = cid;
        per_session(client, server)
    };
    let (plain, with_cid) = (dtls13(None), dtls13(Some(4)));
    println!("server heap per established DTLS 1.3 PSK session: {plain} B, {with_cid} B with a 4-byte CID");
    assert!(plain <= 504, "{plain} B per session");
    assert!(with_cid <= 572, "{with_cid} B per session with a CID");
}
