//! Memory a peer that never authenticates can make the server hold for one connection (its own
//! binary: the counting allocator sees every thread, so nothing else may run beside it).
use fastshake_dtls::{Connection, Endpoint, Instant};
use fastshake_testkit::dtls::{client_config, server_config};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::SocketAddr;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn record(content_type: u8, epoch: u16, seq: u64, body: &[u8]) -> Vec<u8> {
    let mut v = vec![content_type, 0xfe, 0xfd];
    v.extend_from_slice(&epoch.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes()[2..]);
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn fragment(msg_type: u8, length: u32, message_seq: u16, offset: u32, data: &[u8]) -> Vec<u8> {
    let mut v = vec![msg_type];
    v.extend_from_slice(&length.to_be_bytes()[1..]);
    v.extend_from_slice(&message_seq.to_be_bytes());
    v.extend_from_slice(&offset.to_be_bytes()[1..]);
    v.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    v.extend_from_slice(data);
    v
}

fn held(region: &Region<'_, System>) -> i64 {
    let c = region.change();
    // stats_alloc counts a growing realloc in bytes_allocated (and a shrinking one in
    // bytes_deallocated) as well as in bytes_reallocated.
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

#[test]
fn half_open_connection_pins_a_bounded_amount_of_memory() {
    let server_addr: SocketAddr = "198.51.100.1:5684".parse().unwrap();
    let from: SocketAddr = "203.0.113.9:40000".parse().unwrap();
    let now = Instant::from_millis(1_000);
    let mut server = Endpoint::new(Arc::new(server_config()), [3; 32]).expect("a valid server configuration");
    let mut client = Connection::client(Arc::new(client_config()), now, server_addr, [4; 32]);
    // ClientHello, HelloVerifyRequest.
    let hello = client.poll_transmit(now).unwrap();
    server.handle_datagram(now, server_addr, from, &mut hello.payload.clone());
    let mut hvr = server.poll_transmit(now).unwrap().payload;
    client.handle_datagram(now, server_addr, &mut hvr);
    let mut cookie_hello = client.poll_transmit(now).unwrap().payload;

    let region = Region::new(GLOBAL);
    server.handle_datagram(now, server_addr, from, &mut cookie_hello);
    while server.poll_transmit(now).is_some() {}
    let created = held(&region);
    assert_eq!(server.stats().connections_open, 1);

    // The peer never answers flight 4; instead it claims the largest messages it can, one byte
    // each: 64 KiB ones (message_seq 2 and 3), then ones just within the reassembly budget ...
    let mut seq = 10;
    for (claimed, message_seq) in [(65_535, 2u16), (65_535, 3), (16 * 1024 - 1, 4), (16 * 1024 - 1, 5)] {
        seq += 1;
        let mut d = record(22, 0, seq, &fragment(16, claimed, message_seq, 0, &[0]));
        server.handle_datagram(now, server_addr, from, &mut d);
    }
    // ... and epoch-1 records, which nothing can decrypt yet, large and small.
    for (i, size) in [18_000usize, 18_000, 18_000, 18_000, 200, 200, 200, 200].into_iter().enumerate() {
        let mut d = record(22, 1, i as u64, &vec![0u8; size]);
        server.handle_datagram(now, server_addr, from, &mut d);
    }
    while server.poll_transmit(now).is_some() {}
    let pinned = held(&region);
    println!("half-open connection: {created} bytes once created, {pinned} bytes after the attack datagrams");
    assert_eq!(server.stats().connections_open, 1, "the connection is still there");
    assert!(pinned < 40 * 1024, "{pinned} bytes pinned by a peer that never authenticated");
}
