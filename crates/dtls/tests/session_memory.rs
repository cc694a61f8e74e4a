//! What an established DTLS 1.2 PSK session costs its server: the endpoint's heap per session,
//! its tables included, at most 400 bytes with or without a Connection ID. The session alone:
//! the session-ID cache (resumption, seed 003) is off, as its entries are counted apart (its own
//! binary: the counting allocator sees every thread, so nothing else may run beside it). The
//! figures of record, for both versions, are `fastshake bench handshake`'s.
use fastshake_dtls::{ClientConfig, Connection, Endpoint, Instant, ServerConfig};
use fastshake_testkit::dtls::{client_config, server_config};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SESSIONS: u16 = 200;
const SERVER: &str = "198.51.100.1:5684";

fn live_heap() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64 + s.bytes_reallocated as i64
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
    let mut sent = false;
    for _ in 0..16 {
        while let Some(t) = client.poll_transmit(now) {
            server.handle_datagram(now, to, from, &mut t.payload.clone());
        }
        while let Some(t) = server.poll_transmit(now) {
            client.handle_datagram(now, to, &mut t.payload.clone());
        }
        while client.poll_event().is_some() {}
        while server.poll_event().is_some() {}
        if client.is_established() && !sent {
            client.send(b"from the client").unwrap();
            let h = server.handle_for(from).expect("the server's session");
            server.send(h, b"from the server").unwrap();
            sent = true;
        }
    }
    assert!(client.is_established() && sent, "session {seed} established");
    client
}

/// The server's heap per established session: `SESSIONS` of them, once their handshake state
/// has timed out, beside an empty endpoint.
fn per_session(client: ClientConfig, mut server: ServerConfig) -> i64 {
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
