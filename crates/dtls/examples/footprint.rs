//! Prints the engine's own figures: size of the types, heap per established session (counting
//! allocator), allocations per application record on `seal_into` / `open_in_place`, and
//! full PSK handshakes per second (client and server in memory, one thread), and a server's
//! whole memory with R session slots full, beside tinyDTLS (seed 002). DTLS 1.2 sessions, as
//! tinyDTLS's are.
//! Run in release: `cargo run --release -p fastshake-dtls --example footprint`.
//! Prints only; the benchmark of record is `fastshake bench handshake`.

use fastshake_dtls::{ClientConfig, Connection, Endpoint, Instant, Mobility, ServerConfig, Versions};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::SocketAddr;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, (port >> 8) as u8, port as u8], port))
}

/// Runs one handshake between a new client on `from` and `server`, then one record each way.
fn connect(
    cfg: &Arc<ClientConfig>,
    server: &mut Endpoint,
    from: SocketAddr,
    to: SocketAddr,
    seed: u64,
    data: bool,
) -> Connection {
    let now = Instant::from_millis(1);
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&seed.to_le_bytes());
    let mut client = Connection::client(cfg.clone(), now, to, s);
    for _ in 0..8 {
        while let Some(t) = client.poll_transmit(now) {
            let mut d = t.payload;
            server.handle_datagram(now, to, from, &mut d);
        }
        while let Some(t) = server.poll_transmit(now) {
            let mut d = t.payload;
            client.handle_datagram(now, to, &mut d);
        }
        while server.poll_event().is_some() {}
        while client.poll_event().is_some() {}
        if client.is_established() {
            break;
        }
    }
    assert!(client.is_established(), "handshake completes");
    if data {
        let mut buf = [0u8; 128];
        let n = client.seal_into(b"ping", &mut buf).unwrap();
        server.handle_datagram(now, to, from, &mut buf[..n]);
        let h = server.handle_for(from).unwrap();
        server.send(h, b"pong").unwrap();
        while let Some(t) = server.poll_transmit(now) {
            let mut d = t.payload;
            client.open_in_place(now, to, &mut d, &mut |_| {});
        }
        while server.poll_event().is_some() {}
    }
    client
}

/// What an endpoint holding 1000 established sessions frees when dropped, per session.
fn server_bytes_per_session(
    ccfg: &Arc<ClientConfig>,
    scfg: &Arc<ServerConfig>,
    server_addr: SocketAddr,
) -> i64 {
    let mut server = Endpoint::new(scfg.clone(), [8; 32]).expect("a valid server configuration");
    let mut clients = Vec::new();
    for i in 0..1000u16 {
        clients.push(connect(ccfg, &mut server, addr(1000 + i), server_addr, i as u64 + 10, true));
    }
    let region = Region::new(GLOBAL);
    drop(server);
    let freed = region.change();
    drop(clients);
    (freed.bytes_deallocated as i64 - freed.bytes_allocated as i64) / 1000
}

fn main() {
    let server_addr = addr(5684);
    let versions = Versions::Dtls12;
    let ccfg =
        Arc::new(ClientConfig { versions, ..ClientConfig::psk(b"Client_identity".to_vec(), vec![0x11; 16]) });
    let scfg =
        Arc::new(ServerConfig { versions, ..ServerConfig::psk(b"Client_identity".to_vec(), vec![0x11; 16]) });
    println!("size_of::<Connection>() = {} B", std::mem::size_of::<Connection>());
    println!("size_of::<Endpoint>()   = {} B", std::mem::size_of::<Endpoint>());

    // Clients: 1000 sessions against one endpoint; configs were allocated before the region.
    let mut sink = Endpoint::new(scfg.clone(), [8; 32]).expect("a valid server configuration");
    let mut clients = Vec::new();
    for i in 0..1000u16 {
        clients.push(connect(&ccfg, &mut sink, addr(1000 + i), server_addr, i as u64 + 10, true));
    }
    drop(sink);
    // What a value owns on the heap is what dropping it frees.
    let size = std::mem::size_of::<Connection>() as i64;
    let vec_buffer = (clients.capacity() as i64) * size;
    let region = Region::new(GLOBAL);
    drop(clients);
    let freed = region.change();
    let client_heap = (freed.bytes_deallocated as i64 - freed.bytes_allocated as i64 - vec_buffer) / 1000;
    println!(
        "established client session: {} B (size_of {} + heap {}; mean of 1000)",
        size + client_heap,
        size,
        client_heap
    );

    // Server: the session alone (resumption cache off), then the same with the cache on; the
    // difference is what the cache keeps per session so it can be resumed by ID.
    let mut no_cache = (*scfg).clone();
    no_cache.session_cache.max_entries = 0;
    let session = server_bytes_per_session(&ccfg, &Arc::new(no_cache), server_addr);
    let with_cache = server_bytes_per_session(&ccfg, &scfg, server_addr);
    println!(
        "established server session: {session} B including its share of the endpoint's tables \
         (resumption cache off; mean of 1000)"
    );
    println!(
        "resumption cache entry: {} B per session (server with the cache on: {with_cache} B; mean of 1000)",
        with_cache - session
    );

    // The same with session mobility: a 4-byte Connection ID issued by the server (the client
    // wants none), and with the return-routability check on top.
    for (what, mobility) in [
        ("a 4-byte Connection ID", Mobility { connection_id: Some(4), ..Mobility::default() }),
        (
            "a 4-byte Connection ID and RRC",
            Mobility { connection_id: Some(4), return_routability_check: true, ..Mobility::default() },
        ),
    ] {
        let client_mobility =
            Mobility { connection_id: mobility.connection_id.map(|_| 0), ..mobility.clone() };
        let mobile_client = Arc::new(ClientConfig { mobility: client_mobility, ..(*ccfg).clone() });
        let mut mobile_server = (*scfg).clone();
        mobile_server.session_cache.max_entries = 0;
        mobile_server.mobility = mobility;
        let mobile = server_bytes_per_session(&mobile_client, &Arc::new(mobile_server), server_addr);
        println!("established server session with {what}: {mobile} B (cache off; mean of 1000)");
    }

    // Session slots (seed 002): a server holding R established PSK sessions, R slots, no
    // resumption cache (tinyDTLS keeps none), measured whole: the Endpoint value and all it
    // owns on the heap, i.e. what dropping it frees. The marginal cost leaves out the empty
    // endpoint; the step is what each session added since the previous row (the first sessions
    // also pay for the tables' first nodes and queue buffers).
    const TINYDTLS_PSK_SESSION: i64 = 400;
    let slots_config = |r: usize| {
        let mut c = (*scfg).clone();
        c.session_cache.max_entries = 0;
        c.max_sessions = Some(r);
        Arc::new(c)
    };
    let endpoint_bytes = |r: usize| {
        let mut server =
            Endpoint::new(slots_config(r.max(1)), [5; 32]).expect("a valid server configuration");
        let clients: Vec<_> = (0..r as u16)
            .map(|i| connect(&ccfg, &mut server, addr(3000 + i), server_addr, i as u64 + 50, true))
            .collect();
        assert_eq!(server.stats().connections_open, r as u64);
        let region = Region::new(GLOBAL);
        drop(server);
        let freed = region.change();
        drop(clients);
        std::mem::size_of::<Endpoint>() as i64 + freed.bytes_deallocated as i64 - freed.bytes_allocated as i64
    };
    let empty = endpoint_bytes(0);
    println!(
        "server with R slots full of established PSK sessions (cache off; an empty endpoint: {empty} B; \
         tinyDTLS: ~{TINYDTLS_PSK_SESSION} B per PSK session, 3 sessions in a 16 kB WiSMote):"
    );
    println!(
        "{:>4} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "R", "endpoint B", "B/session", "marginal B", "step B", "tinyDTLS B"
    );
    let (mut previous_r, mut previous_total) = (0, empty);
    for r in [1usize, 2, 3, 4, 8, 16, 32, 64] {
        let total = endpoint_bytes(r);
        println!(
            "{r:>4} {total:>12} {:>12} {:>12} {:>12} {:>14}",
            total / r as i64,
            (total - empty) / r as i64,
            (total - previous_total) / (r - previous_r) as i64,
            TINYDTLS_PSK_SESSION * r as i64
        );
        (previous_r, previous_total) = (r, total);
    }

    // Allocations per application record on the data path.
    let mut server = Endpoint::new(scfg.clone(), [7; 32]).expect("a valid server configuration");
    let mut client = connect(&ccfg, &mut server, addr(2), server_addr, 2, true);
    let h = server.handle_for(addr(2)).unwrap();
    let mut buf = [0u8; 1500];
    let now = Instant::from_millis(2);
    let mut received = 0usize;
    let region = Region::new(GLOBAL);
    for _ in 0..10_000 {
        let n = client.seal_into(&[0x42; 1000], &mut buf).unwrap();
        let incoming = server.incoming(&mut buf[..n]);
        server.open_in_place(now, server_addr, addr(2), incoming, &mut |_, d| received += d.len());
        let n = server.seal_into(h, &[0x24; 1000], &mut buf).unwrap();
        client.open_in_place(now, server_addr, &mut buf[..n], &mut |d| received += d.len());
    }
    let r = region.change();
    println!(
        "data path: {} allocations for 20000 records of 1000 B ({} B delivered)",
        r.allocations + r.reallocations,
        received
    );

    // Handshakes per second, engine only, one thread.
    for &suite in fastshake_dtls::CipherSuite::ALL.iter().filter(|s| s.is_psk()) {
        let mut cc = (*ccfg).clone();
        cc.suites = vec![suite];
        let cc = Arc::new(cc);
        let mut server = Endpoint::new(scfg.clone(), [6; 32]).expect("a valid server configuration");
        let n = 20_000u64;
        let start = std::time::Instant::now();
        for i in 0..n {
            let c = connect(&cc, &mut server, addr(3), server_addr, i, false);
            drop(c);
            if let Some(h) = server.handle_for(addr(3)) {
                server.close(h);
            }
            while server.poll_transmit(Instant::ZERO).is_some() {}
            while server.poll_event().is_some() {}
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{}: {:.0} full PSK handshakes/s (client+server, one thread, {n} runs)",
            suite,
            n as f64 / secs
        );
    }
}
