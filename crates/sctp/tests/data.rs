//! Data transfer over the in-memory pair: loss, reordering, fragmentation, streams, ordering,
//! retransmission paths, delayed SACK and graceful shutdown.

use std::collections::BTreeMap;
use std::time::Duration;

use fastshake_sctp::packet::{CHUNK_DATA, CHUNK_SACK};
use fastshake_sctp::{AssociationHandle, ConnectOptions, Event, HandshakeMode, Message};
use fastshake_testkit::net::{self, Dir, Fate};
use fastshake_testkit::sctp::*;

fn open_pair() -> (Pair, AssociationHandle) {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server);
    let h = pair.connect(ConnectOptions::default());
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
    (pair, h)
}

fn workload() -> Vec<Message> {
    (0..60u32)
        .map(|i| {
            let len = [1usize, 100, 1500, 4000, 9000][(i % 5) as usize];
            let data: Vec<u8> = (0..len).map(|b| (b as u32 ^ i) as u8).collect();
            Message { stream: (i % 4) as u16, unordered: i % 7 == 3, ppid: i, data }
        })
        .collect()
}

fn check_delivery(sent: &[Message], got: &[Message]) {
    let mut by_ppid: BTreeMap<u32, usize> = BTreeMap::new();
    for m in got {
        *by_ppid.entry(m.ppid).or_default() += 1;
        assert_eq!(Some(m), sent.iter().find(|s| s.ppid == m.ppid), "content of message {}", m.ppid);
    }
    assert_eq!(by_ppid.len(), sent.len(), "every message delivered");
    assert!(by_ppid.values().all(|n| *n == 1), "no message delivered twice");
    // Ordered messages keep their order within each stream.
    for stream in 0..4u16 {
        let want: Vec<u32> =
            sent.iter().filter(|m| m.stream == stream && !m.unordered).map(|m| m.ppid).collect();
        let have: Vec<u32> =
            got.iter().filter(|m| m.stream == stream && !m.unordered).map(|m| m.ppid).collect();
        assert_eq!(have, want, "order on stream {stream}");
    }
}

#[test]
fn lossless_transfer_fragments_and_reassembles() {
    let (mut pair, h) = open_pair();
    let sent = workload();
    for m in &sent {
        pair.client.send(h, m.clone()).unwrap();
    }
    pair.run_for(Duration::from_secs(30));
    check_delivery(&sent, &pair.server_messages());
    let max = pair.log.iter().map(|s| s.payload.len()).max().unwrap();
    assert!(max <= 1200, "no packet above the MTU ({max} B)");
    let info = pair.client.association(h).unwrap();
    assert_eq!(info.stats.retransmitted_chunks, 0);
    assert!(info.srtt.is_some());
}

#[test]
fn transfer_with_loss_and_reordering_delivers_each_message_once() {
    for seed in 1..=4u64 {
        let (mut pair, h) = open_pair();
        let mut state = seed;
        let mut jitter = net::jitter(Duration::from_millis(15), seed);
        pair.filter = Box::new(move |_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if (state >> 33) % 100 < 12 {
                Fate::Drop
            } else {
                Fate::Late(jitter())
            }
        });
        pair.echo = true;
        let sent = workload();
        for m in &sent {
            pair.client.send(h, m.clone()).unwrap();
        }
        pair.run_for(Duration::from_secs(300));
        check_delivery(&sent, &pair.server_messages());
        check_delivery(&sent, &pair.client_messages());
        let info = pair.client.association(h).unwrap();
        assert!(info.stats.retransmitted_chunks > 0, "seed {seed}: loss was repaired");
    }
}

#[test]
fn single_loss_is_repaired_by_fast_retransmit() {
    let (mut pair, h) = open_pair();
    let start = pair.log.len();
    let mut data_seen = 0;
    pair.filter = net::drop_if(move |s| {
        if s.nth < start || s.dir == Dir::ToClient || !s.chunk_types().contains(&CHUNK_DATA) {
            return false;
        }
        data_seen += 1;
        data_seen == 3
    });
    let sent: Vec<Message> = (0..40)
        .map(|i| Message { stream: 0, unordered: false, ppid: i, data: vec![i as u8; 1000] })
        .collect();
    for m in &sent {
        pair.client.send(h, m.clone()).unwrap();
    }
    pair.run_for(Duration::from_secs(30));
    assert_eq!(pair.server_messages(), sent);
    let info = pair.client.association(h).unwrap();
    assert!(info.stats.fast_retransmits >= 1, "{:?}", info.stats);
    assert_eq!(info.stats.t3_expiries, 0, "repaired before T3-rtx");
}

#[test]
fn tail_loss_is_repaired_by_t3_rtx() {
    let (mut pair, h) = open_pair();
    let start = pair.log.len();
    let mut dropped = false;
    pair.filter = net::drop_if(move |s| {
        if s.nth >= start && s.dir == Dir::ToServer && s.chunk_types().contains(&CHUNK_DATA) && !dropped {
            dropped = true;
            return true;
        }
        false
    });
    pair.client.send(h, msg(0, b"only one")).unwrap();
    pair.run_for(Duration::from_secs(10));
    assert_eq!(pair.server_messages(), vec![msg(0, b"only one")]);
    let info = pair.client.association(h).unwrap();
    assert_eq!(info.stats.t3_expiries, 1);
    assert_eq!(info.stats.retransmitted_chunks, 1);
}

#[test]
fn sack_is_delayed_for_a_single_packet_and_immediate_for_two() {
    let (mut pair, h) = open_pair();
    let start = pair.log.len();
    pair.client.send(h, msg(0, b"one")).unwrap();
    pair.run_for(Duration::from_secs(2));
    let data_at = pair.log[start..].iter().find(|s| s.chunk_types().contains(&CHUNK_DATA)).unwrap().at;
    let sack_at = pair.log[start..].iter().find(|s| s.chunk_types().contains(&CHUNK_SACK)).unwrap().at;
    assert_eq!(sack_at - data_at, pair.delay + Duration::from_millis(200));
    let start = pair.log.len();
    for i in 0..2 {
        pair.client.send(h, Message { stream: 0, unordered: false, ppid: i, data: vec![1; 1100] }).unwrap();
    }
    pair.run_for(Duration::from_secs(2));
    let data_at = pair.log[start..]
        .iter()
        .filter(|s| s.chunk_types().contains(&CHUNK_DATA))
        .map(|s| s.at)
        .max()
        .unwrap();
    let sack_at = pair.log[start..].iter().find(|s| s.chunk_types().contains(&CHUNK_SACK)).unwrap().at;
    assert_eq!(sack_at - data_at, pair.delay, "every second packet is acknowledged at once");
}

#[test]
fn graceful_shutdown_delivers_everything_then_closes_both() {
    let (mut pair, h) = open_pair();
    pair.filter = {
        let mut n = 0u32;
        net::drop_if(move |_| {
            n += 1;
            n.is_multiple_of(5)
        })
    };
    let sent: Vec<Message> =
        (0..20).map(|i| Message { stream: 1, unordered: false, ppid: i, data: vec![7; 3000] }).collect();
    for m in &sent {
        pair.client.send(h, m.clone()).unwrap();
    }
    pair.client.shutdown(h);
    assert!(pair.client.send(h, msg(0, b"late")).is_err(), "no data after shutdown");
    pair.run_for(Duration::from_secs(120));
    assert_eq!(pair.server_messages(), sent);
    assert!(pair.client_events.iter().any(|(_, e)| *e == Event::Closed));
    assert!(pair.server_events.iter().any(|(_, e)| *e == Event::Closed));
    assert!(pair.client.associations().is_empty());
    assert!(pair.server.associations().is_empty());
}

#[test]
fn abort_reaches_the_peer() {
    let (mut pair, h) = open_pair();
    pair.client.abort(h);
    pair.run_for(Duration::from_secs(1));
    assert!(pair
        .server_events
        .iter()
        .any(|(_, e)| matches!(e, Event::Aborted { reason } if reason.contains("user abort"))));
    assert!(pair.server.associations().is_empty());
}

#[test]
fn dead_peer_fails_after_retransmission_limit() {
    let (mut pair, h) = open_pair();
    pair.filter = net::drop_if(|s| s.dir == Dir::ToServer);
    pair.client.send(h, msg(0, b"into the void")).unwrap();
    pair.run_for(Duration::from_secs(3600));
    assert!(pair
        .client_events
        .iter()
        .any(|(_, e)| matches!(e, Event::Failed(fastshake_sctp::Error::RetransmitLimit))));
}

#[test]
fn send_checks_stream_and_emptiness() {
    let (mut pair, h) = open_pair();
    assert_eq!(pair.client.send(h, msg(16, b"x")), Err(fastshake_sctp::Error::InvalidStream(16)));
    assert_eq!(pair.client.send(h, msg(0, b"")), Err(fastshake_sctp::Error::EmptyMessage));
    assert_eq!(
        pair.client.send(AssociationHandle(999), msg(0, b"x")),
        Err(fastshake_sctp::Error::UnknownAssociation)
    );
    let _ = &mut pair;
}

#[test]
fn idle_dead_peer_is_detected_by_heartbeats() {
    let (mut pair, h) = open_pair();
    pair.filter = net::drop_if(|s| s.dir == Dir::ToServer);
    pair.run_for(Duration::from_secs(3 * 3600));
    assert!(pair
        .client_events
        .iter()
        .any(|(_, e)| matches!(e, Event::Failed(fastshake_sctp::Error::RetransmitLimit))));
    assert!(pair.client.association(h).is_none());
}

#[test]
fn server_follows_the_clients_new_encapsulation_port() {
    let (mut pair, h) = open_pair();
    pair.echo = true;
    pair.client_nat_port = Some(40_000);
    pair.client.send(h, msg(0, b"after rebinding")).unwrap();
    pair.run_for(Duration::from_secs(2));
    let server_handle = pair.server.associations()[0];
    assert_eq!(pair.server.association(server_handle).unwrap().remote.port(), 40_000);
    assert_eq!(pair.client_messages(), vec![msg(0, b"after rebinding")]);
    let last_to_client = pair.log.iter().rev().find(|s| s.dir == Dir::ToClient).unwrap();
    assert_eq!(last_to_client.dst.port(), 40_000, "answers go where the peer sent from (RFC 6951)");
}

#[test]
fn data_fails_over_to_the_peers_other_confirmed_address() {
    let mut client = client_config(HandshakeMode::Both);
    client.extra_local_addresses = vec![client_addr2().ip()];
    client.fetch_path_cookies = false;
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    server.path_max_retransmits = 1;
    let mut pair = Pair::new(client, server);
    let h = pair.connect(ConnectOptions::default());
    pair.client.send(h, msg(0, b"hello")).unwrap();
    pair.run_for(Duration::from_secs(2));
    let sh = pair.server.associations()[0];
    let info = pair.server.association(sh).unwrap();
    assert_eq!(info.remote_addresses, vec![client_addr(), client_addr2()]);
    assert!(
        pair.sent_with(fastshake_sctp::packet::CHUNK_HEARTBEAT_ACK).iter().any(|s| s.src == client_addr2()),
        "second path confirmed, answered from the probed address"
    );
    // The client's first address goes dark.
    pair.filter = net::drop_if(|s| s.dst == client_addr());
    pair.server.send(sh, msg(0, b"after the outage")).unwrap();
    pair.run_for(Duration::from_secs(30));
    assert_eq!(pair.client_messages(), vec![msg(0, b"after the outage")]);
    assert_eq!(pair.server.association(sh).unwrap().remote, client_addr2(), "primary moved");
}
