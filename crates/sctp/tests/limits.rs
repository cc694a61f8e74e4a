//! Bounds on what a peer or a flood can make an endpoint do, in virtual time: the T5 shutdown
//! guard (RFC 9260 §9.2), the receive buffer cap across all associations (§6.2), and the rate
//! of answers to out-of-the-blue packets (§8.4).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fastshake_sctp::packet::{self, Chunk, InitChunk, Packet};
use fastshake_sctp::{
    AssociationHandle, Config, ConnectOptions, Endpoint, Event, HandshakeMode, Instant, Message, RateLimit,
};
use fastshake_testkit::net::{self, Dir, Fate};
use fastshake_testkit::sctp::*;

fn events(ep: &mut Endpoint) -> Vec<(AssociationHandle, Event)> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

// ------------------------------------------------------------------------------ T5

/// We shut down; the peer never sends SHUTDOWN-ACK and keeps T2 from ever expiring by sending
/// DATA (each one is answered with SHUTDOWN and restarts T2, RFC 9260 §9.2). Only the guard
/// timer ends it: ABORT, `Event::Aborted`, the association gone.
#[test]
fn shutdown_kept_hanging_by_the_peer_ends_with_abort_by_t5() {
    let mut ep = cookieless_server(server_config(HandshakeMode::Both));
    let mut now = Instant::from_millis(1);
    let tag = open_crafted(&mut ep, now, client_addr(), CLIENT_PORT, 100);
    let handle = ep.associations()[0];
    ep.shutdown(handle);
    ep.handle_timeout(now);
    let sent = drain(&mut ep, now);
    assert!(sent.iter().any(|p| p.chunks.iter().any(|c| matches!(c, Chunk::Shutdown { .. }))), "{sent:?}");

    let mut tsn = 100;
    let mut aborts = 0;
    let end = now + Duration::from_secs(2 * 3600);
    while now < end && !ep.associations().is_empty() {
        // A DATA every 500 ms, well inside every RTO; the timers in between.
        let next_data = now + Duration::from_millis(500);
        while let Some(t) = ep.poll_timeout().filter(|t| *t <= next_data) {
            now = now.max(t);
            ep.handle_timeout(now);
            aborts += drain(&mut ep, now)
                .iter()
                .filter(|p| p.chunks.iter().any(|c| matches!(c, Chunk::Abort { .. })))
                .count();
        }
        if ep.associations().is_empty() {
            break;
        }
        now = next_data;
        let answers = exchange(
            &mut ep,
            now,
            client_addr(),
            crafted_from(CLIENT_PORT, tag, vec![data_fragment(tsn, (tsn - 100) as u16, true, true, 8)]),
        );
        assert!(answers.iter().all(|p| !p.chunks.iter().any(|c| matches!(c, Chunk::Abort { .. }))));
        tsn += 1;
    }
    assert!(ep.associations().is_empty(), "the shutdown still hangs after two hours");
    assert_eq!(aborts, 1, "one ABORT tells the peer");
    let ended = events(&mut ep);
    assert!(
        ended
            .iter()
            .any(|(h, e)| *h == handle && matches!(e, Event::Aborted { reason } if reason.contains("T5"))),
        "{ended:?}"
    );
    let info = ep.ended_association(handle).expect("snapshot of the ended association");
    assert!(info.stats.messages_in > 100, "the peer kept it busy all along");
}

/// The guard is configurable, and a peer that simply never answers SHUTDOWN meets it too.
#[test]
fn configured_shutdown_guard_ends_a_shutdown_nobody_answers() {
    let mut pair = Pair::new(
        Config { shutdown_guard: Some(Duration::from_secs(20)), ..client_config(HandshakeMode::Both) },
        Config { cookieless: true, ..server_config(HandshakeMode::Both) },
    );
    let h = pair.connect(ConnectOptions::default());
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
    // From now on the server hears nothing: SHUTDOWN goes unanswered.
    pair.filter = net::drop_if(|s| s.dir == Dir::ToServer);
    pair.client.shutdown(h);
    pair.run_for(Duration::from_secs(120));
    let reason = pair.client_events.iter().find_map(|(hh, e)| match e {
        Event::Aborted { reason } if *hh == h => Some(reason.clone()),
        _ => None,
    });
    assert!(reason.as_deref().is_some_and(|r| r.contains("T5")), "{:?}", pair.client_events);
    // T2 alone would have gone on resending SHUTDOWN up to Association.Max.Retrans.
    let info = pair.client.ended_association(h).unwrap();
    assert!(info.stats.shutdown_retransmits < u64::from(Config::default().max_retransmits));
    assert!(pair
        .log
        .iter()
        .any(|s| s.dir == Dir::ToServer && s.chunk_types().contains(&packet::CHUNK_ABORT)));
}

// ------------------------------------------------------------------------------ receive buffer cap

/// Out-of-order fragments that never complete, from many associations at once: together they
/// would hold far more than the endpoint's cap; they get no more than its out-of-order share,
/// and the windows they are offered shrink to zero. A well-behaved association's whole messages
/// still get through, and everything held is given back when the associations go.
#[test]
fn receive_buffer_cap_holds_across_associations() {
    let cap = 256 * 1024;
    let window = 128 * 1024;
    let config = Config {
        max_receive_buffer: cap,
        receive_window: window as u32,
        max_associations_per_ip: 64,
        ..server_config(HandshakeMode::Both)
    };
    let mut ep = cookieless_server(config);
    let now = Instant::from_millis(1);
    let mut tags = Vec::new();
    let mut last_rwnd = u32::MAX;
    for i in 0..8u16 {
        let port = 6000 + i;
        let tag = open_crafted(&mut ep, now, client_addr(), port, 100);
        tags.push((port, tag));
        // TSN 100 never comes; 101.. are middle fragments of a message that never ends.
        for first in (101..101 + 128).step_by(8) {
            let chunks = (first..first + 8).map(|tsn| data_fragment(tsn, 0, false, false, 1024)).collect();
            for p in exchange(&mut ep, now, client_addr(), crafted_from(port, tag, chunks)) {
                for c in p.chunks {
                    if let Chunk::Sack(s) = c {
                        last_rwnd = s.a_rwnd;
                    }
                }
            }
        }
        let stats = ep.stats();
        assert!(
            stats.receive_buffered <= cap as u64,
            "{} > {cap} after {} associations",
            stats.receive_buffered,
            i + 1
        );
    }
    let stats = ep.stats();
    assert!(stats.receive_buffered_peak <= (cap - cap / 4) as u64, "peak {}", stats.receive_buffered_peak);
    assert!(
        stats.receive_buffered >= (cap / 2) as u64,
        "the cap itself is used ({})",
        stats.receive_buffered
    );
    assert_eq!(last_rwnd, 0, "a full endpoint offers no window");
    let dropped: u64 = ep.associations().iter().map(|h| ep.association(*h).unwrap().stats.data_dropped).sum();
    assert!(dropped > 0);

    // A well-behaved peer's whole, in-order messages need no buffer and still arrive.
    let tag = open_crafted(&mut ep, now, client_addr2(), CLIENT_PORT, 500);
    for i in 0..4u16 {
        exchange(
            &mut ep,
            now,
            client_addr2(),
            crafted_from(CLIENT_PORT, tag, vec![data_fragment(500 + u32::from(i), i, true, true, 900)]),
        );
    }
    let delivered = events(&mut ep).into_iter().filter(|(_, e)| matches!(e, Event::Message(_))).count();
    assert_eq!(delivered, 4);

    // Closing gives everything back.
    for (port, tag) in tags {
        let abort = Chunk::Abort { t_bit: false, causes: Vec::new() };
        exchange(&mut ep, now, client_addr(), crafted_from(port, tag, vec![abort]));
    }
    assert_eq!(ep.associations().len(), 1);
    assert_eq!(ep.stats().receive_buffered, 0);
}

/// Eight clients send fragmented messages over a lossy (10 %), reordering network to one server
/// whose buffers together may hold less than their windows: what does not fit is dropped (or
/// reneged) and sent again, and in the end every message arrives exactly once and in order;
/// the server holds nothing once all is delivered. Returns the most the server held.
fn lossy_transfer_to_a_capped_server(cap: usize) -> u64 {
    let clients = 8u16;
    let server_config = Config {
        receive_window: 64 * 1024,
        max_receive_buffer: cap,
        cookieless: true,
        ..server_config(HandshakeMode::Both)
    };
    // The pair's own client stays idle: the eight are clients added at addresses of their own.
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config);
    let mut state = 7u64;
    let mut random = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        state >> 33
    };
    // 10 ms one way, up to 10 ms more: datagrams overtake each other.
    pair.filter = Box::new(move |_| {
        if random() % 1000 < 100 {
            Fate::Drop
        } else {
            Fate::Late(Duration::from_millis(random() % 10))
        }
    });
    let mut sent: BTreeMap<u16, Vec<Message>> = BTreeMap::new();
    let mut handles = Vec::new();
    for i in 0..clients {
        let config = Config { local_port: CLIENT_PORT + i, ..client_config(HandshakeMode::Both) };
        let addr: SocketAddr = format!("10.0.2.{}:9899", i + 1).parse().unwrap();
        let node = pair.add_client(addr, config, 10 + i as u8);
        let now = pair.now;
        let client = &mut pair.more_clients[node].endpoint;
        let h = client.connect(now, Some(addr), server_addr(), SERVER_PORT, ConnectOptions::default());
        handles.push(h);
        let messages: Vec<Message> = (0..40u32)
            .map(|k| {
                let len = [3000usize, 100, 4000, 1000][(k % 4) as usize];
                let data = (0..len).map(|b| (b as u32 ^ k ^ u32::from(i) << 3) as u8).collect();
                Message { stream: (k % 2) as u16, unordered: false, ppid: u32::from(i) << 16 | k, data }
            })
            .collect();
        for m in &messages {
            client.send(h, m.clone()).unwrap();
        }
        sent.insert(i, messages);
    }
    let total: usize = sent.values().map(Vec::len).sum();
    let all = pair.run_until(pair.now + Duration::from_secs(900), |p| p.server_messages().len() >= total);
    let peak = pair.server.stats().receive_buffered_peak;
    assert!(all, "{} of {total} messages after 900 s", pair.server_messages().len());
    // Per association (one per client), each message once and in order on its stream.
    let mut by_association: BTreeMap<AssociationHandle, Vec<Message>> = BTreeMap::new();
    for (h, e) in &pair.server_events {
        if let Event::Message(m) = e {
            by_association.entry(*h).or_default().push(m.clone());
        }
    }
    assert_eq!(by_association.len(), usize::from(clients));
    for received in by_association.values() {
        let client = &sent[&((received[0].ppid >> 16) as u16)];
        for stream in 0..2 {
            let want: Vec<&Message> = client.iter().filter(|m| m.stream == stream).collect();
            let have: Vec<&Message> = received.iter().filter(|m| m.stream == stream).collect();
            let ppids = |v: &[&Message]| v.iter().map(|m| m.ppid).collect::<Vec<_>>();
            assert_eq!(ppids(&have), ppids(&want), "stream {stream}: every message once, in order");
            assert!(have == want, "stream {stream}: contents");
        }
    }
    assert_eq!(pair.server.stats().receive_buffered, 0, "nothing held once all is delivered");
    for (i, h) in handles.iter().enumerate() {
        let info = pair.more_clients[i].endpoint.association(*h).unwrap();
        assert_eq!(info.stats.messages_out, 40);
    }
    peak
}

#[test]
fn well_behaved_peers_lose_nothing_under_a_small_receive_buffer_cap() {
    let cap = 48 * 1024;
    // The same transfer without a tight cap holds more than `cap` at its peak: the cap binds.
    let unbounded_peak = lossy_transfer_to_a_capped_server(Config::default().max_receive_buffer);
    assert!(unbounded_peak > cap as u64, "the workload needs more than the cap ({unbounded_peak} B)");
    let peak = lossy_transfer_to_a_capped_server(cap);
    assert!(peak <= cap as u64, "held {peak} B, cap {cap} B");
}

// ------------------------------------------------------------------------------ OOTB answers

fn init_packet(tag: u32, dst_port: u16) -> Vec<u8> {
    let mut p = Packet::new(40_000, dst_port, 0);
    p.chunks.push(Chunk::Init(InitChunk {
        initiate_tag: tag,
        a_rwnd: 65_536,
        outbound_streams: 1,
        inbound_streams: 1,
        initial_tsn: tag,
        params: Vec::new(),
    }));
    p.encode()
}

/// An INIT flood to a port without listener, and a flood of stray DATA, for two virtual
/// seconds: answered at the configured rate (burst, then `per_second`), the rest counted.
#[test]
fn out_of_the_blue_answers_are_rate_limited() {
    let limit = RateLimit { per_second: 100, burst: 10 };
    let config = Config { listen: false, ootb_answers: Some(limit), ..server_config(HandshakeMode::Both) };
    let mut ep = Endpoint::new(Arc::new(config), [5; 32]);
    let flooder: SocketAddr = "10.6.6.6:9899".parse().unwrap();
    let mut answers = 0u64;
    let floods = 10_000u64;
    for i in 0..floods {
        // 2 s of flood: a packet every 200 µs, INITs and stray DATA in turn.
        let now = Instant::from_micros(1_000_000 + i * 200);
        let packet = if i % 2 == 0 {
            init_packet(i as u32 + 1, SERVER_PORT)
        } else {
            crafted_from(40_000, 0xdead, vec![data_fragment(i as u32, 0, true, true, 10)])
        };
        for p in exchange(&mut ep, now, flooder, packet) {
            assert!(matches!(p.chunks[..], [Chunk::Abort { .. }]), "{p:?}");
            answers += 1;
        }
    }
    let most = u64::from(limit.burst) + 2 * u64::from(limit.per_second) + 1;
    assert!(answers <= most, "{answers} answers to {floods} packets in 2 s, at most {most}");
    assert!(answers >= 2 * u64::from(limit.per_second), "still answered at the configured rate: {answers}");
    let stats = ep.stats();
    assert_eq!(stats.aborts_sent, answers);
    assert_eq!(stats.ootb_answers_suppressed, floods - answers);
    assert!(ep.associations().is_empty());
}

/// The default bucket holds a flood down too; after a quiet second a lone stray packet is
/// answered again.
#[test]
fn default_ootb_limit_holds_a_flood_and_recovers() {
    let mut ep =
        Endpoint::new(Arc::new(Config { listen: false, ..server_config(HandshakeMode::Both) }), [6; 32]);
    let flooder: SocketAddr = "10.6.6.7:9899".parse().unwrap();
    let start = Instant::from_millis(1_000);
    let mut answers = 0;
    for i in 0..5_000u64 {
        let now = start + Duration::from_micros(i * 100);
        answers += exchange(&mut ep, now, flooder, init_packet(i as u32 + 1, SERVER_PORT)).len();
    }
    let default = Config::default().ootb_answers.expect("limited by default");
    let most = (default.burst + default.per_second / 2 + 1) as usize;
    assert!(answers <= most, "{answers} answers to 5000 INITs in 0.5 s");
    let later = start + Duration::from_secs(2);
    let lone = exchange(&mut ep, later, "10.7.7.7:9899".parse().unwrap(), init_packet(77, SERVER_PORT));
    assert_eq!(lone.len(), 1, "a lone INIT after the flood is answered");
}
