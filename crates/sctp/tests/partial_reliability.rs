//! Partial reliability (PR-SCTP, RFC 3758) on the in-memory pair and against a crafted peer:
//! negotiation by every handshake and by SNAP, messages abandoned after their retransmissions
//! or their lifetime, FORWARD-TSN and the SSNs it skips, a fragmented message abandoned half
//! received, a lost FORWARD-TSN, a peer without PR-SCTP, and FORWARD-TSN chunks that are out of
//! date, too far ahead, malformed or about streams that do not exist.

use std::collections::BTreeSet;
use std::time::Duration;

use fastshake_sctp::packet::{
    Chunk, DataChunk, ErrorCause, ForwardTsnChunk, InitChunk, Packet, Param, SackChunk, CHUNK_FORWARD_TSN,
};
use fastshake_sctp::{
    AssociationHandle, AssociationState, Config, Endpoint, Event, HandshakeMode, Instant, Message,
    Reliability,
};
use fastshake_testkit::net::{self, Datagram, Dir};
use fastshake_testkit::sctp::*;

fn with_pr(config: Config) -> Config {
    Config { partial_reliability: true, ..config }
}

fn pr_pair() -> (Pair, AssociationHandle, AssociationHandle) {
    Pair::connected(with_pr(client_config(HandshakeMode::Both)), with_pr(server_config(HandshakeMode::Both)))
}

/// Message `i` of a test: 1000 bytes, so that each goes alone in a packet, its first byte `i`.
fn numbered(stream: u16, i: u8) -> Message {
    let mut data = vec![0xAB; 1000];
    data[0] = i;
    msg(stream, &data)
}

/// The first bytes of the messages the server received, in order.
fn received(pair: &Pair) -> Vec<u8> {
    pair.server_messages().iter().map(|m| m.data[0]).collect()
}

/// Every DATA chunk `dir` carried, retransmissions included, in order.
fn data_chunks(log: &[Datagram], dir: Dir) -> Vec<DataChunk> {
    log.iter()
        .filter(|d| d.dir == dir)
        .flat_map(|d| d.packet().chunks)
        .filter_map(|c| match c {
            Chunk::Data(d) => Some(d),
            _ => None,
        })
        .collect()
}

/// Every FORWARD-TSN `dir` carried (those the network lost too), in order.
fn forward_tsns(log: &[Datagram], dir: Dir) -> Vec<ForwardTsnChunk> {
    log.iter()
        .filter(|d| d.dir == dir)
        .flat_map(|d| d.packet().chunks)
        .filter_map(|c| match c {
            Chunk::ForwardTsn(f) => Some(f),
            _ => None,
        })
        .collect()
}

/// Whether the datagram carries DATA whose first user byte is one of `marks` (a first fragment).
fn carries(d: &Datagram, marks: &[u8]) -> bool {
    d.packet().chunks.iter().any(|c| matches!(c, Chunk::Data(c) if c.beginning && marks.contains(&c.data[0])))
}

#[test]
fn every_handshake_negotiates_it_and_a_peer_without_it_turns_it_off() {
    for mode in [HandshakeMode::Regular, HandshakeMode::Both] {
        for cookieless in [false, true] {
            let server = Config { cookieless, ..with_pr(server_config(mode)) };
            let (pair, h, sh) = Pair::connected(with_pr(client_config(mode)), server);
            assert!(pair.client.association(h).unwrap().partial_reliability, "{mode:?} {cookieless}");
            assert!(pair.server.association(sh).unwrap().partial_reliability, "{mode:?} {cookieless}");
            // Both announce it: Forward-TSN-Supported, and FORWARD-TSN in Supported Extensions.
            let inits: Vec<InitChunk> = pair
                .log
                .iter()
                .flat_map(|d| d.packet().chunks)
                .filter_map(|c| match c {
                    Chunk::Init(i) | Chunk::InitAck(i) => Some(i),
                    _ => None,
                })
                .collect();
            assert!(inits.len() >= 2);
            for i in &inits {
                assert!(i.params.contains(&Param::ForwardTsnSupported), "{i:?}");
                assert!(i.params.contains(&Param::SupportedExtensions(vec![CHUNK_FORWARD_TSN])), "{i:?}");
                assert!(!i.params.iter().any(|p| matches!(p, Param::UnrecognizedParameter(_))));
            }
        }
    }
    // One side without it: not in use on either side; ours is reported back as unrecognised.
    let (pair, h, sh) = Pair::connected(
        with_pr(client_config(HandshakeMode::Regular)),
        server_config(HandshakeMode::Regular),
    );
    assert!(!pair.client.association(h).unwrap().partial_reliability);
    assert!(!pair.server.association(sh).unwrap().partial_reliability);
    let reported = pair.log.iter().flat_map(|d| d.packet().chunks).any(|c| {
        matches!(c, Chunk::InitAck(ack) if ack.params.contains(&Param::UnrecognizedParameter(vec![0xC0, 0, 0, 4])))
    });
    assert!(reported, "RFC 3758 §3.3.2: the peer reports 0xC000 back");
    let (pair, h, sh) =
        Pair::connected(client_config(HandshakeMode::Both), with_pr(server_config(HandshakeMode::Both)));
    assert!(!pair.client.association(h).unwrap().partial_reliability);
    assert!(!pair.server.association(sh).unwrap().partial_reliability);
}

#[test]
fn lost_messages_of_a_max_retransmits_0_stream_are_skipped_and_later_ones_arrive() {
    let (mut pair, h, sh) = pr_pair();
    pair.client.set_stream_reliability(h, 1, Reliability::MaxRetransmits(0)).unwrap();
    // Messages 3 and 6 are lost every time they are sent.
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && carries(d, &[3, 6]));
    for i in 0..10 {
        pair.client.send(h, numbered(1, i)).unwrap();
    }
    pair.run_for(Duration::from_secs(10));
    // In order, each once, the lost ones skipped: the ordered stream went on without them.
    assert_eq!(received(&pair), [0, 1, 2, 4, 5, 7, 8, 9]);
    let sent = data_chunks(&pair.log, Dir::ToServer);
    for lost in [3, 6] {
        assert_eq!(sent.iter().filter(|c| c.data[0] == lost).count(), 1, "sent once, never again");
    }
    let forwards = forward_tsns(&pair.log, Dir::ToServer);
    assert!(!forwards.is_empty());
    // Each FORWARD-TSN names the stream and the SSN skipped (RFC 3758 §3.5 C4).
    let skipped: BTreeSet<(u16, u16)> = forwards.iter().flat_map(|f| f.streams.iter().copied()).collect();
    assert_eq!(skipped, BTreeSet::from([(1, 3), (1, 6)]));
    let info = pair.client.association(h).unwrap();
    assert_eq!(info.flight_size, 0, "abandoned chunks left the flight");
    assert_eq!(info.stats.abandoned_messages, 2);
    assert_eq!(pair.server.association(sh).unwrap().stats.forward_tsns_in as usize, forwards.len());
    // The stream and the association go on.
    pair.filter = net::deliver_all();
    pair.client.send(h, numbered(1, 10)).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert_eq!(received(&pair), [0, 1, 2, 4, 5, 7, 8, 9, 10]);
    assert_eq!(pair.client.association(h).unwrap().state, AssociationState::Established);
}

#[test]
fn a_reliable_stream_beside_an_unreliable_one_loses_nothing() {
    let (mut pair, h, _) = pr_pair();
    pair.client.set_stream_reliability(h, 1, Reliability::MaxRetransmits(0)).unwrap();
    let mut seen = BTreeSet::new();
    // The first transmission of every third message is lost, on both streams.
    pair.filter = net::drop_if(move |d| {
        let marks: Vec<u8> = d
            .packet()
            .chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::Data(c) if c.beginning => Some(c.data[0]),
                _ => None,
            })
            .collect();
        d.dir == Dir::ToServer && marks.iter().any(|m| m % 3 == 0 && seen.insert(*m))
    });
    for i in 0..12 {
        pair.client.send(h, numbered(if i < 6 { 1 } else { 2 }, i)).unwrap();
    }
    pair.run_for(Duration::from_secs(20));
    assert_eq!(received(&pair), [1, 2, 4, 5, 6, 7, 8, 9, 10, 11], "stream 2 is reliable: 6 and 9 came again");
    assert_eq!(pair.client.association(h).unwrap().flight_size, 0);
}

#[test]
fn a_lifetime_abandons_sent_messages_and_drops_unsent_ones_without_a_tsn() {
    let (mut pair, h, _) = pr_pair();
    pair.client.set_stream_reliability(h, 2, Reliability::Lifetime(Duration::from_millis(100))).unwrap();
    pair.client.send(h, numbered(2, 0)).unwrap();
    pair.run_for(Duration::from_secs(1));
    assert_eq!(received(&pair), [0], "in time: delivered");
    // The peer is cut off for 2.5 s: the window's worth of messages that went is lost, the
    // rest wait for the window, and all outlive their 100 ms.
    let outage_end = pair.now + Duration::from_millis(2500);
    pair.filter = net::drop_if(move |d| d.dir == Dir::ToServer && d.at < outage_end);
    for i in 1..=12 {
        pair.client.send(h, numbered(2, i)).unwrap();
    }
    pair.run_for(Duration::from_secs(6));
    pair.client.send(h, numbered(2, 13)).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert_eq!(received(&pair), [0, 13]);
    let sent = data_chunks(&pair.log, Dir::ToServer);
    let went: BTreeSet<u8> = sent.iter().map(|c| c.data[0]).filter(|m| (1..=12).contains(m)).collect();
    assert!(!went.is_empty() && went.len() < 12, "some went, some never did: {went:?}");
    for m in &went {
        assert_eq!(sent.iter().filter(|c| c.data[0] == *m).count(), 1, "never sent again past its lifetime");
    }
    // The messages that never went used no TSN and no SSN (RFC 3758 TR3): message 13 follows
    // the last that went.
    let tsns: BTreeSet<u32> = sent.iter().map(|c| c.tsn).collect();
    let last = sent.iter().find(|c| c.data[0] == 13).unwrap();
    assert_eq!(tsns.len(), 1 + went.len() + 1);
    assert_eq!(last.tsn, sent[0].tsn.wrapping_add(1 + went.len() as u32), "no hole in the TSNs");
    assert_eq!(usize::from(last.ssn), 1 + went.len());
    let info = pair.client.association(h).unwrap();
    assert_eq!(info.stats.abandoned_messages, 12);
    assert_eq!(info.flight_size, 0);
    assert!(!forward_tsns(&pair.log, Dir::ToServer).is_empty());
}

#[test]
fn a_fragmented_message_half_received_is_dropped_by_the_receiver() {
    let (mut pair, h, _) = pr_pair();
    pair.client.set_stream_reliability(h, 0, Reliability::MaxRetransmits(0)).unwrap();
    // Its middle fragment is lost; the first and the last arrive and wait for it.
    pair.filter = net::drop_if(|d| {
        d.dir == Dir::ToServer
            && d.packet().chunks.iter().any(|c| matches!(c, Chunk::Data(c) if !c.beginning && !c.ending))
    });
    pair.client.send(h, msg(0, &[7; 3000])).unwrap();
    pair.client.send(h, msg(0, b"next")).unwrap();
    pair.run_for(Duration::from_secs(5));
    assert_eq!(pair.server_messages(), [msg(0, b"next")], "the broken message never, the next one once");
    let sent = data_chunks(&pair.log, Dir::ToServer);
    let fragments: Vec<&DataChunk> = sent.iter().filter(|c| c.data[0] == 7).collect();
    assert_eq!(fragments.len(), 3, "three fragments, each sent once");
    // The whole message was abandoned together (RFC 3758 §3.5 A3).
    let forwards = forward_tsns(&pair.log, Dir::ToServer);
    assert_eq!(forwards[0].new_cumulative_tsn, fragments[2].tsn);
    assert_eq!(forwards[0].streams, [(0, 0)]);
    assert_eq!(pair.server.stats().receive_buffered, 0, "the fragments held are given back");
    assert_eq!(pair.client.association(h).unwrap().flight_size, 0);
}

#[test]
fn a_lost_forward_tsn_is_sent_again() {
    let (mut pair, h, _) = pr_pair();
    pair.client.set_stream_reliability(h, 1, Reliability::MaxRetransmits(0)).unwrap();
    let mut forward_lost = false;
    pair.filter = net::drop_if(move |d| {
        if d.dir != Dir::ToServer {
            return false;
        }
        let first_forward = !forward_lost && d.chunk_types().contains(&CHUNK_FORWARD_TSN);
        forward_lost |= first_forward;
        first_forward || carries(d, &[2])
    });
    for i in 0..5 {
        pair.client.send(h, numbered(1, i)).unwrap();
    }
    pair.run_for(Duration::from_secs(10));
    assert_eq!(received(&pair), [0, 1, 3, 4]);
    let forwards = forward_tsns(&pair.log, Dir::ToServer);
    assert!(forwards.len() >= 2, "{forwards:?}");
    assert_eq!(forwards[0], forwards[1], "the same FORWARD-TSN again");
    let info = pair.client.association(h).unwrap();
    assert_eq!((info.flight_size, info.state), (0, AssociationState::Established));
}

#[test]
fn without_pr_sctp_on_both_sides_every_message_is_reliable() {
    for (client, server) in [(true, false), (false, true)] {
        let pick = |on: bool, c: Config| if on { with_pr(c) } else { c };
        let (mut pair, h, _) = Pair::connected(
            pick(client, client_config(HandshakeMode::Both)),
            pick(server, server_config(HandshakeMode::Both)),
        );
        // The policy is taken (RFC 8831 §6.1: a reliable channel is what the peer gets).
        pair.client.set_stream_reliability(h, 1, Reliability::MaxRetransmits(0)).unwrap();
        // The first transmission of messages 2 and 5 is lost.
        let mut seen = BTreeSet::new();
        pair.filter = net::drop_if(move |d| {
            d.dir == Dir::ToServer && [2, 5].iter().any(|m| carries(d, &[*m]) && seen.insert(*m))
        });
        for i in 0..8 {
            pair.client.send(h, numbered(1, i)).unwrap();
        }
        pair.run_for(Duration::from_secs(10));
        assert_eq!(received(&pair), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert!(pair.sent_with(CHUNK_FORWARD_TSN).is_empty());
        assert_eq!(pair.client.association(h).unwrap().stats.abandoned_messages, 0);
    }
}

#[test]
fn invalid_stream_is_refused() {
    let (mut pair, h, _) = pr_pair();
    assert_eq!(
        pair.client.set_stream_reliability(h, 16, Reliability::MaxRetransmits(1)),
        Err(fastshake_sctp::Error::InvalidStream(16))
    );
    assert_eq!(
        pair.client.set_stream_reliability(AssociationHandle(999), 0, Reliability::Reliable),
        Err(fastshake_sctp::Error::UnknownAssociation)
    );
}

// ------------------------------------------------------------------ a crafted peer

/// The crafted peer's first TSN: two below the wrap, so that TSNs wrap in every test.
const PEER_TSN: u32 = u32::MAX - 1;

/// A cookieless server with PR-SCTP, opened by a crafted INIT that announces it; returns the
/// server and the verification tag of the crafted peer's packets.
fn crafted_pr_server() -> (Endpoint, u32) {
    let mut ep = cookieless_server(with_pr(server_config(HandshakeMode::Both)));
    let init = Chunk::Init(InitChunk {
        initiate_tag: crafted_peer_tag(CLIENT_PORT),
        a_rwnd: 1 << 20,
        outbound_streams: 2,
        inbound_streams: 2,
        initial_tsn: PEER_TSN,
        params: vec![Param::AltCookie(Vec::new()), Param::ForwardTsnSupported],
    });
    let answers = exchange(&mut ep, Instant::from_millis(1), client_addr(), crafted(0, vec![init]));
    let Some(Chunk::InitAck(ack)) = answers.first().and_then(|p| p.chunks.first()) else {
        panic!("INIT-ACK expected, got {answers:?}")
    };
    assert!(ack.params.contains(&Param::ForwardTsnSupported));
    let tag = ack.initiate_tag;
    assert!(ep.association(ep.associations()[0]).unwrap().partial_reliability);
    (ep, tag)
}

/// A whole ordered message on stream 0 with SSN `ssn`, its one byte `ssn`.
fn data(tsn: u32, ssn: u16) -> Chunk {
    Chunk::Data(DataChunk {
        tsn,
        stream: 0,
        ssn,
        ppid: 51,
        unordered: false,
        beginning: true,
        ending: true,
        immediate: true,
        data: vec![ssn as u8],
    })
}

fn forward(new_cumulative_tsn: u32, streams: Vec<(u16, u16)>) -> Chunk {
    Chunk::ForwardTsn(ForwardTsnChunk { new_cumulative_tsn, streams })
}

/// The cumulative TSN of the only SACK among `answers`.
fn sacked(answers: &[Packet]) -> u32 {
    let sacks: Vec<&SackChunk> = answers
        .iter()
        .flat_map(|p| &p.chunks)
        .filter_map(|c| match c {
            Chunk::Sack(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(sacks.len(), 1, "one SACK at once: {answers:?}");
    sacks[0].cumulative_tsn_ack
}

/// The single bytes of the messages `ep` delivered since last asked.
fn delivered(ep: &mut Endpoint) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some((_, e)) = ep.poll_event() {
        if let Event::Message(m) = e {
            out.extend(m.data);
        }
    }
    out
}

#[test]
fn forward_tsn_skips_the_ssn_a_held_message_waits_for_and_nothing_comes_twice() {
    let (mut ep, tag) = crafted_pr_server();
    let now = Instant::from_millis(2);
    let send = |ep: &mut Endpoint, chunks| exchange(ep, now, client_addr(), crafted(tag, chunks));
    delivered(&mut ep);
    assert_eq!(sacked(&send(&mut ep, vec![data(PEER_TSN, 0)])), PEER_TSN);
    assert_eq!(delivered(&mut ep), [0]);
    // SSN 2 arrives, SSN 1 (TSN PEER_TSN + 1) is missing: held.
    send(&mut ep, vec![data(PEER_TSN.wrapping_add(2), 2)]);
    assert!(delivered(&mut ep).is_empty());
    // The sender abandoned SSN 1: the cumulative TSN moves over it and over SSN 2, which goes.
    let skip = forward(PEER_TSN.wrapping_add(1), vec![(0, 1)]);
    assert_eq!(sacked(&send(&mut ep, vec![skip.clone()])), PEER_TSN.wrapping_add(2));
    assert_eq!(delivered(&mut ep), [2]);
    // The abandoned message arrives late after all: a duplicate, not delivered.
    let answers = send(&mut ep, vec![data(PEER_TSN.wrapping_add(1), 1)]);
    assert!(delivered(&mut ep).is_empty());
    assert!(answers
        .iter()
        .flat_map(|p| &p.chunks)
        .any(|c| matches!(c, Chunk::Sack(s) if !s.duplicate_tsns.is_empty())));
    // The same FORWARD-TSN again is out of date: answered, nothing moves (§3.6).
    assert_eq!(sacked(&send(&mut ep, vec![skip])), PEER_TSN.wrapping_add(2));
    assert!(delivered(&mut ep).is_empty());
    send(&mut ep, vec![data(PEER_TSN.wrapping_add(3), 3)]);
    assert_eq!(delivered(&mut ep), [3]);
    let h = ep.associations()[0];
    assert_eq!(ep.association(h).unwrap().stats.messages_in, 3);
}

#[test]
fn hostile_forward_tsns_change_nothing_they_should_not() {
    let (mut ep, tag) = crafted_pr_server();
    let now = Instant::from_millis(2);
    let send = |ep: &mut Endpoint, chunks| exchange(ep, now, client_addr(), crafted(tag, chunks));
    send(&mut ep, vec![data(PEER_TSN, 0)]);
    // Behind the cumulative TSN, and far behind it: out of date.
    assert_eq!(sacked(&send(&mut ep, vec![forward(PEER_TSN.wrapping_sub(1), vec![(0, 9)])])), PEER_TSN);
    assert_eq!(sacked(&send(&mut ep, vec![forward(PEER_TSN.wrapping_sub(1 << 30), vec![])])), PEER_TSN);
    // Further ahead than any DATA we would take: ignored like such DATA.
    for ahead in [70_000u32, 1 << 30, (1 << 31) - 1] {
        assert_eq!(
            sacked(&send(&mut ep, vec![forward(PEER_TSN.wrapping_add(ahead), vec![(0, 5)])])),
            PEER_TSN
        );
    }
    // Pairs for streams that do not exist, an SSN half the space away, thousands of pairs.
    let mut pairs = vec![(999, 5), (1, 40_000), (u16::MAX, u16::MAX)];
    pairs.extend((0..10_000u16).map(|i| (2 + i % 100, i)));
    assert_eq!(
        sacked(&send(&mut ep, vec![forward(PEER_TSN.wrapping_add(1), pairs)])),
        PEER_TSN.wrapping_add(1)
    );
    // A FORWARD-TSN that does not parse (a half pair) is dropped, not reported as unknown.
    let mut raw = Packet::new(CLIENT_PORT, SERVER_PORT, tag);
    raw.chunks.push(Chunk::Unknown {
        chunk_type: CHUNK_FORWARD_TSN,
        flags: 0,
        value: vec![0, 0, 0, 9, 0, 1],
    });
    let answers = send_raw(&mut ep, now, raw.encode());
    assert!(answers.iter().flat_map(|p| &p.chunks).all(|c| !matches!(c, Chunk::Error { .. })), "{answers:?}");
    // The association takes data as before: SSN 1 is next on stream 0 (SSN 5 was never skipped
    // by a pair that counted).
    assert!(delivered(&mut ep).contains(&0));
    send(&mut ep, vec![data(PEER_TSN.wrapping_add(2), 1)]);
    assert_eq!(delivered(&mut ep), [1]);
    let h = ep.associations()[0];
    assert_eq!(ep.association(h).unwrap().state, AssociationState::Established);
    assert_eq!(ep.stats().receive_buffered, 0);
}

fn send_raw(ep: &mut Endpoint, now: Instant, packet: Vec<u8>) -> Vec<Packet> {
    exchange(ep, now, client_addr(), packet)
}

#[test]
fn forward_tsn_to_an_endpoint_without_pr_sctp_is_reported_unrecognised() {
    let mut ep = cookieless_server(server_config(HandshakeMode::Both));
    let now = Instant::from_millis(1);
    let tag = open_crafted(&mut ep, now, client_addr(), CLIENT_PORT, 100);
    let chunk = forward(120, vec![(0, 3)]);
    let answers = exchange(&mut ep, now, client_addr(), crafted(tag, vec![chunk.clone()]));
    let reported = answers.iter().flat_map(|p| &p.chunks).any(|c| {
        matches!(c, Chunk::Error { causes } if causes == &[ErrorCause::UnrecognizedChunk(chunk.to_bytes())])
    });
    assert!(reported, "RFC 3758 §3.3.1: an ERROR, as for any chunk we do not take: {answers:?}");
    let h = ep.associations()[0];
    let info = ep.association(h).unwrap();
    assert!(!info.partial_reliability);
    assert_eq!(info.stats.forward_tsns_in, 0);
}

/// Chromium's `a=sctp-init` (see tests/snap.rs): Forward-TSN-Supported and Supported
/// Extensions RE-CONFIG, FORWARD-TSN.
const CHROMIUM_INIT: [u8; 30] = [
    0x01, 0x00, 0x00, 0x1e, 0xeb, 0xac, 0xf2, 0xdf, 0x00, 0x50, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x49,
    0xcd, 0x9d, 0x62, 0xc0, 0x00, 0x00, 0x04, 0x80, 0x08, 0x00, 0x06, 0x82, 0xc0,
];

#[test]
fn snap_inits_carry_it_and_a_browser_init_turns_it_on() {
    for pr in [false, true] {
        let config =
            Config { local_port: 5000, partial_reliability: pr, stream_reset: true, ..Config::default() };
        let mut ep = Endpoint::new(std::sync::Arc::new(config), [3; 32]);
        let ours = ep.snap_init();
        let (chunk, _) = Chunk::parse(ours.bytes()).unwrap();
        let Chunk::Init(init) = chunk else { panic!("an INIT") };
        assert_eq!(ours.bytes().len(), if pr { 30 } else { 25 }, "as long as a browser's with PR-SCTP");
        assert_eq!(init.params.contains(&Param::ForwardTsnSupported), pr);
        let extensions = if pr { vec![0x82, CHUNK_FORWARD_TSN] } else { vec![0x82] };
        assert!(init.params.contains(&Param::SupportedExtensions(extensions)));
        let remote = "192.0.2.1:9899".parse().unwrap();
        let h = ep.connect_snap(Instant::from_millis(1), None, remote, 5000, ours, &CHROMIUM_INIT).unwrap();
        assert_eq!(ep.association(h).unwrap().partial_reliability, pr);
    }
}

#[test]
fn snap_pair_abandons_and_skips() {
    let config = |port| Config { local_port: port, partial_reliability: true, ..Config::default() };
    let mut pair = Pair::new(config(CLIENT_PORT), config(SERVER_PORT));
    let (ours_c, ours_s) = (pair.client.snap_init(), pair.server.snap_init());
    let (bytes_c, bytes_s) = (ours_c.bytes().to_vec(), ours_s.bytes().to_vec());
    let now = pair.now;
    let h = pair
        .client
        .connect_snap(now, Some(client_addr()), server_addr(), SERVER_PORT, ours_c, &bytes_s)
        .unwrap();
    pair.server.connect_snap(now, Some(server_addr()), client_addr(), CLIENT_PORT, ours_s, &bytes_c).unwrap();
    pair.client.set_stream_reliability(h, 0, Reliability::MaxRetransmits(0)).unwrap();
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && carries(d, &[1]));
    for i in 0..4 {
        pair.client.send(h, numbered(0, i)).unwrap();
    }
    pair.run_for(Duration::from_secs(5));
    assert_eq!(received(&pair), [0, 2, 3]);
    assert!(!forward_tsns(&pair.log, Dir::ToServer).is_empty());
}
