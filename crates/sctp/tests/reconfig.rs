//! Stream reset (RFC 6525) on the in-memory pair and against a crafted peer: the order of
//! delivery around a reset, the data-channel close both ways, "In progress" when the request
//! overtakes its data, lost and repeated requests and responses, negotiation, and the codec.

use std::time::Duration;

use fastshake_sctp::packet::{
    Chunk, DataChunk, InitChunk, Packet, Param, ReconfigChunk, ReconfigParam, ReconfigResult, CHUNK_RECONFIG,
    PARAM_SUPPORTED_EXTENSIONS,
};
use fastshake_sctp::{AssociationHandle, Config, Error, Event, HandshakeMode, Instant, Message};
use fastshake_testkit::net::{self, Datagram, Dir, Fate};
use fastshake_testkit::sctp::*;
use proptest::prelude::*;

fn with_reset(config: Config) -> Config {
    Config { stream_reset: true, ..config }
}

fn reset_pair(mode: HandshakeMode) -> (Pair, AssociationHandle, AssociationHandle) {
    Pair::connected(with_reset(client_config(mode)), with_reset(server_config(mode)))
}

/// The RE-CONFIG parameters each datagram `dir` carried, one list per chunk, in order.
fn reconfigs(log: &[Datagram], dir: Dir) -> Vec<Vec<ReconfigParam>> {
    log.iter()
        .filter(|d| d.dir == dir)
        .flat_map(|d| d.packet().chunks)
        .filter_map(|c| match c {
            Chunk::Reconfig(r) => Some(r.params),
            _ => None,
        })
        .collect()
}

/// The results of every Re-configuration Response sent `dir`.
fn results(log: &[Datagram], dir: Dir) -> Vec<ReconfigResult> {
    reconfigs(log, dir)
        .into_iter()
        .flatten()
        .filter_map(|p| match p {
            ReconfigParam::Response { result, .. } => Some(result),
            _ => None,
        })
        .collect()
}

/// The request sequence numbers of every Outgoing SSN Reset Request sent `dir`.
fn requests(log: &[Datagram], dir: Dir) -> Vec<(u32, Vec<u16>)> {
    reconfigs(log, dir)
        .into_iter()
        .flatten()
        .filter_map(|p| match p {
            ReconfigParam::OutgoingSsnReset { request_seq, streams, .. } => Some((request_seq, streams)),
            _ => None,
        })
        .collect()
}

fn incoming_resets(events: &[(AssociationHandle, Event)]) -> Vec<Vec<u16>> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::IncomingStreamsReset { streams } => Some(streams.clone()),
            _ => None,
        })
        .collect()
}

fn outgoing_resets(events: &[(AssociationHandle, Event)]) -> Vec<(Vec<u16>, bool)> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::OutgoingStreamsReset { streams, performed } => Some((streams.clone(), *performed)),
            _ => None,
        })
        .collect()
}

/// Messages and incoming resets in the order they were reported: `"m:<data>"` and `"reset"`.
fn timeline(events: &[(AssociationHandle, Event)]) -> Vec<String> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Message(m) => Some(format!("m:{}", String::from_utf8_lossy(&m.data))),
            Event::IncomingStreamsReset { streams } => Some(format!("reset{streams:?}")),
            _ => None,
        })
        .collect()
}

/// The SSNs of the DATA chunks on `stream` the client sent, first transmissions in TSN order.
fn client_ssns(log: &[Datagram], stream: u16) -> Vec<u16> {
    let mut seen = std::collections::BTreeMap::new();
    for d in log.iter().filter(|d| d.dir == Dir::ToServer) {
        for c in d.packet().chunks {
            if let Chunk::Data(c) = c {
                if c.stream == stream {
                    seen.insert(c.tsn, c.ssn);
                }
            }
        }
    }
    seen.into_values().collect()
}

fn has_data_on(d: &Datagram, stream: u16) -> bool {
    d.packet().chunks.iter().any(|c| matches!(c, Chunk::Data(c) if c.stream == stream))
}

#[test]
fn reset_delivers_everything_before_it_then_numbers_from_zero() {
    let (mut pair, h, sh) = reset_pair(HandshakeMode::Both);
    for text in ["one", "two", "three"] {
        pair.client.send(h, msg(3, text.as_bytes())).unwrap();
    }
    pair.client.reset_streams(h, &[3]).unwrap();
    // §5.1.2 A1: nothing new on the stream until the answer; other streams go on.
    assert_eq!(pair.client.send(h, msg(3, b"too early")), Err(Error::StreamResetPending(3)));
    pair.client.send(h, msg(1, b"other stream")).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert_eq!(
        timeline(&pair.server_events),
        ["m:one", "m:two", "m:three", "m:other stream", "reset[3]"],
        "the messages before the reset are delivered first"
    );
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![3], true)]);
    assert_eq!(results(&pair.log, Dir::ToClient), vec![ReconfigResult::Performed]);
    // Both sides start the stream at SSN 0 again: the server takes SSN 0 as the next message.
    pair.client.send(h, msg(3, b"again")).unwrap();
    pair.client.send(h, msg(3, b"and again")).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert_eq!(client_ssns(&pair.log, 3), vec![0, 1, 2, 0, 1]);
    let tail: Vec<Message> = pair.server_messages().into_iter().skip(4).collect();
    assert_eq!(tail, vec![msg(3, b"again"), msg(3, b"and again")]);
    assert_eq!(pair.server.association(sh).unwrap().state, fastshake_sctp::AssociationState::Established);
}

#[test]
fn data_channel_close_resets_both_directions() {
    // Regular handshake: the server learns the client's support from its own state cookie.
    let (mut pair, h, sh) = reset_pair(HandshakeMode::Regular);
    pair.client.send(h, msg(3, b"client bye")).unwrap();
    pair.server.send(sh, msg(3, b"server bye")).unwrap();
    pair.client.reset_streams(h, &[3]).unwrap();
    // The remote closed the channel: the server closes its side (RFC 8831 §6.7).
    let server_saw =
        pair.run_until(pair.now + Duration::from_secs(5), |p| !incoming_resets(&p.server_events).is_empty());
    assert!(server_saw);
    pair.server.reset_streams(sh, &[3]).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert_eq!(timeline(&pair.server_events), ["m:client bye", "reset[3]"]);
    assert_eq!(timeline(&pair.client_events), ["m:server bye", "reset[3]"]);
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![3], true)]);
    assert_eq!(outgoing_resets(&pair.server_events), vec![(vec![3], true)]);
    // Each side's requests start at its initial TSN and count up (RFC 6525 §4.1).
    assert_eq!(requests(&pair.log, Dir::ToServer).len(), 1);
    assert_eq!(requests(&pair.log, Dir::ToClient).len(), 1);
}

#[test]
fn request_overtaking_its_data_is_in_progress_until_the_data_arrives() {
    let (mut pair, h, _) = reset_pair(HandshakeMode::Both);
    // The client's DATA on stream 3 takes 300 ms longer than anything else.
    pair.filter = Box::new(|d: &mut Datagram| {
        if d.dir == Dir::ToServer && has_data_on(d, 3) {
            Fate::Late(Duration::from_millis(300))
        } else {
            Fate::Deliver
        }
    });
    pair.client.send(h, msg(3, b"slow")).unwrap();
    pair.client.send(h, msg(3, b"slower")).unwrap();
    pair.client.reset_streams(h, &[3]).unwrap();
    pair.run_for(Duration::from_secs(5));
    // §5.2.2 E2: "In progress" first; the retransmitted request gets the result.
    assert_eq!(
        results(&pair.log, Dir::ToClient),
        vec![ReconfigResult::InProgress, ReconfigResult::Performed]
    );
    let reqs = requests(&pair.log, Dir::ToServer);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0], reqs[1], "the same request again (§5.1.1)");
    assert_eq!(timeline(&pair.server_events), ["m:slow", "m:slower", "reset[3]"]);
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![3], true)]);
}

#[test]
fn lost_request_is_retransmitted_on_the_rto() {
    let (mut pair, h, _) = reset_pair(HandshakeMode::Both);
    let mut dropped = false;
    pair.filter = net::drop_if(move |d| {
        let first_reconfig = d.dir == Dir::ToServer && !dropped && d.chunk_types().contains(&CHUNK_RECONFIG);
        dropped |= first_reconfig;
        first_reconfig
    });
    pair.client.reset_streams(h, &[2]).unwrap();
    pair.run_for(Duration::from_millis(900));
    assert!(outgoing_resets(&pair.client_events).is_empty(), "nothing before the RTO");
    pair.run_for(Duration::from_secs(3));
    let sent = requests(&pair.log, Dir::ToServer);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], sent[1]);
    assert_eq!(incoming_resets(&pair.server_events), vec![vec![2]]);
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![2], true)]);
    // The expiry counted like a T3-rtx one: the RTO doubled.
    assert_eq!(pair.client.association(h).unwrap().rto, Duration::from_secs(2));
}

#[test]
fn lost_response_is_sent_again_without_a_second_reset() {
    let (mut pair, h, _) = reset_pair(HandshakeMode::Both);
    let mut dropped = false;
    pair.filter = net::drop_if(move |d| {
        let first = d.dir == Dir::ToClient && !dropped && d.chunk_types().contains(&CHUNK_RECONFIG);
        dropped |= first;
        first
    });
    pair.client.reset_streams(h, &[1]).unwrap();
    pair.run_for(Duration::from_secs(4));
    assert_eq!(requests(&pair.log, Dir::ToServer).len(), 2);
    assert_eq!(results(&pair.log, Dir::ToClient), vec![ReconfigResult::Performed, ReconfigResult::Performed]);
    assert_eq!(incoming_resets(&pair.server_events), vec![vec![1]], "reset once (§5.2.1)");
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![1], true)]);
}

#[test]
fn duplicated_request_is_answered_twice_and_performed_once() {
    let (mut pair, h, _) = reset_pair(HandshakeMode::Both);
    pair.filter = Box::new(|d: &mut Datagram| {
        if d.dir == Dir::ToServer && d.chunk_types().contains(&CHUNK_RECONFIG) {
            Fate::DuplicateLate(Duration::from_millis(50))
        } else {
            Fate::Deliver
        }
    });
    pair.client.send(h, msg(0, b"before")).unwrap();
    pair.client.reset_streams(h, &[0]).unwrap();
    pair.run_for(Duration::from_secs(3));
    assert_eq!(results(&pair.log, Dir::ToClient), vec![ReconfigResult::Performed, ReconfigResult::Performed]);
    assert_eq!(timeline(&pair.server_events), ["m:before", "reset[0]"]);
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![0], true)], "the second answer is stale");
    pair.client.send(h, msg(0, b"after")).unwrap();
    pair.run_for(Duration::from_secs(1));
    assert_eq!(timeline(&pair.server_events), ["m:before", "reset[0]", "m:after"]);
}

#[test]
fn calls_during_a_request_go_together_in_the_next() {
    let (mut pair, h, _) = reset_pair(HandshakeMode::Both);
    pair.client.reset_streams(h, &[1]).unwrap();
    pair.run_until(pair.now + Duration::from_secs(1), |p| !requests(&p.log, Dir::ToServer).is_empty());
    // §5.1.1: one request in flight; these wait for its answer, then go in one request.
    pair.client.reset_streams(h, &[4, 2]).unwrap();
    pair.client.reset_streams(h, &[1, 5, 4]).unwrap();
    pair.run_for(Duration::from_secs(2));
    let reqs = requests(&pair.log, Dir::ToServer);
    assert_eq!(reqs.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(), vec![vec![1], vec![4, 2, 5]]);
    assert_eq!(reqs[1].0, reqs[0].0.wrapping_add(1));
    assert_eq!(outgoing_resets(&pair.client_events), vec![(vec![1], true), (vec![4, 2, 5], true)]);
    assert_eq!(incoming_resets(&pair.server_events), vec![vec![1], vec![4, 2, 5]]);
}

#[test]
fn stream_lists_are_cut_to_fit_the_mtu() {
    let many = |c: Config| Config { streams_out: 2000, streams_in: 2000, ..with_reset(c) };
    let (mut pair, h, _) =
        Pair::connected(many(client_config(HandshakeMode::Both)), many(server_config(HandshakeMode::Both)));
    let all: Vec<u16> = (0..1500).collect();
    pair.client.reset_streams(h, &all).unwrap();
    pair.run_for(Duration::from_secs(3));
    let sizes: Vec<usize> = requests(&pair.log, Dir::ToServer).iter().map(|(_, s)| s.len()).collect();
    // (1200 - 12 common header - 4 chunk header - 16 parameter header) / 2 = 584 per request.
    assert_eq!(sizes, vec![584, 584, 332]);
    assert!(pair.log.iter().all(|d| d.payload.len() <= 1200), "every packet within the MTU");
    let done: Vec<u16> = outgoing_resets(&pair.client_events).into_iter().flat_map(|(s, _)| s).collect();
    assert_eq!(done, all);
}

#[test]
fn an_unanswered_request_fails_the_association_at_the_retransmission_limit() {
    let quiet = |c: Config| Config {
        max_retransmits: 3,
        heartbeat_interval: Duration::from_secs(3600),
        ..with_reset(c)
    };
    let (mut pair, h, _) =
        Pair::connected(quiet(client_config(HandshakeMode::Both)), quiet(server_config(HandshakeMode::Both)));
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.chunk_types().contains(&CHUNK_RECONFIG));
    pair.client.reset_streams(h, &[0]).unwrap();
    pair.run_for(Duration::from_secs(60));
    // 1 + 3 retransmissions at 1, 2, 4 s; the fourth expiry is one too many.
    assert_eq!(requests(&pair.log, Dir::ToServer).len(), 4);
    assert!(pair.client_events.iter().any(|(_, e)| *e == Event::Failed(Error::RetransmitLimit)));
}

#[test]
fn no_reset_without_both_sides_announcing_it() {
    for (client_on, server_on) in [(true, false), (false, true), (false, false)] {
        let client = Config { stream_reset: client_on, ..client_config(HandshakeMode::Both) };
        let server = Config { stream_reset: server_on, ..server_config(HandshakeMode::Both) };
        let (mut pair, h, sh) = Pair::connected(client, server);
        assert_eq!(pair.client.reset_streams(h, &[0]), Err(Error::StreamResetUnsupported));
        assert_eq!(pair.server.reset_streams(sh, &[0]), Err(Error::StreamResetUnsupported));
        pair.run_for(Duration::from_secs(2));
        assert!(pair.sent_with(CHUNK_RECONFIG).is_empty());
        // Only the side that has it on announces it.
        let announces = |dir: Dir| {
            pair.log.iter().filter(|d| d.dir == dir).flat_map(|d| d.packet().chunks).any(|c| match c {
                Chunk::Init(i) | Chunk::InitAck(i) => {
                    i.params.contains(&Param::SupportedExtensions(vec![CHUNK_RECONFIG]))
                }
                _ => false,
            })
        };
        assert_eq!((announces(Dir::ToServer), announces(Dir::ToClient)), (client_on, server_on));
    }
    let (mut pair, h, _) = reset_pair(HandshakeMode::Both);
    assert_eq!(pair.client.reset_streams(h, &[16]), Err(Error::InvalidStream(16)));
    assert_eq!(pair.client.reset_streams(AssociationHandle(99), &[0]), Err(Error::UnknownAssociation));
    pair.client.shutdown(h);
    assert_eq!(pair.client.reset_streams(h, &[0]), Err(Error::Closing));
}

#[test]
fn stream_reset_off_leaves_the_init_as_it_was() {
    for mode in [HandshakeMode::Regular, HandshakeMode::Both] {
        let (pair, _, _) = Pair::connected(client_config(mode), server_config(mode));
        for d in &pair.log {
            for c in d.packet().chunks {
                if let Chunk::Init(i) | Chunk::InitAck(i) = c {
                    assert!(i.params.iter().all(|p| p.param_type() != PARAM_SUPPORTED_EXTENSIONS));
                }
            }
        }
    }
}

// ---------------------------------------------------------------- a crafted peer

const PEER_TSN: u32 = 100;

/// A cookieless server with stream reset `on`, opened by a crafted INIT; returns it and the tag
/// the crafted peer's packets carry.
fn crafted_server(on: bool) -> (fastshake_sctp::Endpoint, u32) {
    let mut ep = cookieless_server(Config { stream_reset: on, ..server_config(HandshakeMode::Both) });
    let tag = open_crafted(&mut ep, Instant::from_millis(1), client_addr(), CLIENT_PORT, PEER_TSN);
    ep.poll_event();
    (ep, tag)
}

fn data(tsn: u32, ssn: u16, text: &str) -> Chunk {
    Chunk::Data(DataChunk {
        tsn,
        stream: 0,
        ssn,
        ppid: 0,
        unordered: false,
        beginning: true,
        ending: true,
        immediate: true,
        data: text.as_bytes().to_vec(),
    })
}

fn request(seq: u32, last_tsn: u32, streams: Vec<u16>) -> Chunk {
    Chunk::Reconfig(ReconfigChunk {
        params: vec![ReconfigParam::OutgoingSsnReset {
            request_seq: seq,
            response_seq: 0,
            last_tsn,
            streams,
        }],
    })
}

/// Sends `chunks` from the crafted peer; returns the responses (sequence number and result)
/// and the timeline of what the server reported.
fn feed(
    ep: &mut fastshake_sctp::Endpoint,
    tag: u32,
    chunks: Vec<Chunk>,
) -> (Vec<(u32, ReconfigResult)>, Vec<String>) {
    let now = Instant::from_millis(2);
    let out = exchange(ep, now, client_addr(), crafted(tag, chunks));
    let responses = out
        .iter()
        .flat_map(|p| p.chunks.clone())
        .filter_map(|c| match c {
            Chunk::Reconfig(r) => Some(r.params),
            _ => None,
        })
        .flatten()
        .filter_map(|p| match p {
            ReconfigParam::Response { response_seq, result, .. } => Some((response_seq, result)),
            _ => None,
        })
        .collect();
    let mut events = Vec::new();
    while let Some(e) = ep.poll_event() {
        events.push(e);
    }
    (responses, timeline(&events))
}

#[test]
fn deferred_reset_holds_data_sent_after_it() {
    use ReconfigResult::*;
    let (mut ep, tag) = crafted_server(true);
    // Messages at TSN 100 and 101 (SSN 0, 1), the reset, then a message at 102 numbered from 0.
    // The request arrives first: "In progress".
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN, 101, vec![0])]),
        (vec![(PEER_TSN, InProgress)], vec![])
    );
    // After the reset, SSN 0 again: held, not taken for the SSN 0 before the reset.
    assert_eq!(feed(&mut ep, tag, vec![data(102, 0, "new")]).1, Vec::<String>::new());
    assert_eq!(feed(&mut ep, tag, vec![data(101, 1, "old 2")]).1, Vec::<String>::new());
    assert_eq!(
        feed(&mut ep, tag, vec![data(100, 0, "old 1")]).1,
        ["m:old 1", "m:old 2", "reset[0]", "m:new"]
    );
    // The retransmitted request gets the result, and nothing happens twice.
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN, 101, vec![0])]),
        (vec![(PEER_TSN, Performed)], vec![])
    );
    // Sequence numbers other than the next one or the last two answered (§5.2.1).
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN + 2, 102, vec![0])]).0,
        vec![(PEER_TSN + 2, BadSequenceNumber)]
    );
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN - 1, 102, vec![0])]).0,
        vec![(PEER_TSN - 1, BadSequenceNumber)]
    );
    // The next one, for every stream (an empty list), done at once.
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN + 1, 102, vec![])]),
        (vec![(PEER_TSN + 1, Performed)], vec!["reset[0, 1]".to_string()])
    );
    assert_eq!(feed(&mut ep, tag, vec![data(103, 0, "fresh")]).1, ["m:fresh"]);
}

#[test]
fn retry_under_a_new_sequence_number_is_not_a_second_reset() {
    use ReconfigResult::*;
    let (mut ep, tag) = crafted_server(true);
    assert_eq!(feed(&mut ep, tag, vec![request(PEER_TSN, 100, vec![1])]).0, vec![(PEER_TSN, InProgress)]);
    assert_eq!(feed(&mut ep, tag, vec![data(100, 0, "last")]).1, ["m:last", "reset[1]"]);
    // dcSCTP asks again under the next number after "In progress".
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN + 1, 100, vec![1])]),
        (vec![(PEER_TSN + 1, Performed)], vec![])
    );
}

#[test]
fn other_requests_are_denied_and_bad_combinations_ignored() {
    use ReconfigResult::*;
    let (mut ep, tag) = crafted_server(true);
    let both = Chunk::Reconfig(ReconfigChunk {
        params: vec![
            ReconfigParam::OutgoingSsnReset {
                request_seq: PEER_TSN,
                response_seq: 0,
                last_tsn: 99,
                streams: vec![0],
            },
            ReconfigParam::IncomingSsnReset { request_seq: PEER_TSN + 1, streams: vec![0] },
        ],
    });
    assert_eq!(
        feed(&mut ep, tag, vec![both.clone()]),
        (vec![(PEER_TSN, Performed), (PEER_TSN + 1, Denied)], vec!["reset[0]".to_string()])
    );
    // The same chunk again: the same answers, nothing done twice.
    assert_eq!(feed(&mut ep, tag, vec![both]).0, vec![(PEER_TSN, Performed), (PEER_TSN + 1, Denied)]);
    for (i, p) in [
        ReconfigParam::SsnTsnReset { request_seq: PEER_TSN + 2 },
        ReconfigParam::AddOutgoingStreams { request_seq: PEER_TSN + 3, new_streams: 4 },
        ReconfigParam::AddIncomingStreams { request_seq: PEER_TSN + 4, new_streams: 4 },
    ]
    .into_iter()
    .enumerate()
    {
        let seq = PEER_TSN + 2 + i as u32;
        assert_eq!(
            feed(&mut ep, tag, vec![Chunk::Reconfig(ReconfigChunk { params: vec![p] })]).0,
            vec![(seq, Denied)]
        );
    }
    // Streams that do not exist: nothing to reset.
    assert_eq!(
        feed(&mut ep, tag, vec![request(PEER_TSN + 5, 99, vec![7, 9])]),
        (vec![(PEER_TSN + 5, Denied)], vec![])
    );
    // Two Outgoing SSN Reset Requests in one chunk are no combination of §3.1: no answer.
    let twice = Chunk::Reconfig(ReconfigChunk {
        params: vec![
            ReconfigParam::OutgoingSsnReset {
                request_seq: PEER_TSN + 6,
                response_seq: 0,
                last_tsn: 99,
                streams: vec![0],
            },
            ReconfigParam::OutgoingSsnReset {
                request_seq: PEER_TSN + 7,
                response_seq: 0,
                last_tsn: 99,
                streams: vec![1],
            },
        ],
    });
    assert_eq!(feed(&mut ep, tag, vec![twice]), (vec![], vec![]));
}

#[test]
fn reconfig_is_an_unknown_chunk_when_stream_reset_is_off() {
    let (mut ep, tag) = crafted_server(false);
    let now = Instant::from_millis(2);
    let out = exchange(
        &mut ep,
        now,
        client_addr(),
        crafted(tag, vec![request(PEER_TSN, 99, vec![0]), data(100, 0, "x")]),
    );
    // Type 130, high bits 10: skipped silently, and the DATA behind it still counts.
    assert!(out.iter().all(|p| p.chunks.iter().all(|c| matches!(c, Chunk::Sack(_)))), "{out:?}");
    let mut msgs = Vec::new();
    while let Some((_, e)) = ep.poll_event() {
        msgs.push(e);
    }
    assert_eq!(
        msgs,
        vec![Event::Message(Message { stream: 0, unordered: false, ppid: 0, data: b"x".to_vec() })]
    );
}

/// The INIT a browser's dcSCTP sends: RE-CONFIG and FORWARD-TSN in Supported Extensions,
/// Forward-TSN-Supported, Zero Checksum Acceptable (RFC 9653, EDMID 1: DTLS).
fn browser_init(tag: u32) -> Chunk {
    Chunk::Init(InitChunk {
        initiate_tag: tag,
        a_rwnd: 131_072,
        outbound_streams: 1024,
        inbound_streams: 1024,
        initial_tsn: PEER_TSN,
        params: vec![
            Param::SupportedExtensions(vec![CHUNK_RECONFIG, 0xC0]),
            Param::Unknown { param_type: 0xC000, value: vec![] },
            Param::Unknown { param_type: 0x8001, value: vec![0, 0, 0, 1] },
        ],
    })
}

#[test]
fn browser_init_is_answered_and_negotiates_stream_reset_through_the_cookie() {
    let mut ep = fastshake_sctp::Endpoint::new(
        std::sync::Arc::new(with_reset(server_config(HandshakeMode::Regular))),
        [4; 32],
    );
    let now = Instant::from_millis(1);
    let out = exchange(&mut ep, now, client_addr(), crafted(0, vec![browser_init(0x7777)]));
    let Some(Chunk::InitAck(ack)) = out.first().and_then(|p| p.chunks.first()).cloned() else {
        panic!("INIT-ACK expected: {out:?}")
    };
    // 0xC000 (11): reported back, telling the browser there is no PR-SCTP here; 0x8001 (10):
    // skipped, so checksums stay on; 0x8008: read, answered with our own, RE-CONFIG only.
    assert!(ack.params.contains(&Param::UnrecognizedParameter(vec![0xC0, 0x00, 0, 4])));
    assert_eq!(ack.params.iter().filter(|p| matches!(p, Param::UnrecognizedParameter(_))).count(), 1);
    assert!(ack.params.contains(&Param::SupportedExtensions(vec![CHUNK_RECONFIG])));
    let cookie = ack.state_cookie().unwrap().to_vec();
    let out =
        exchange(&mut ep, now, client_addr(), crafted(ack.initiate_tag, vec![Chunk::CookieEcho(cookie)]));
    assert!(matches!(out[0].chunks[0], Chunk::CookieAck));
    let h = ep.associations()[0];
    // The association built from the cookie knows the browser announced RE-CONFIG.
    ep.reset_streams(h, &[5]).unwrap();
    ep.handle_timeout(now);
    let sent = drain(&mut ep, now);
    let Some(Chunk::Reconfig(r)) = sent.first().and_then(|p| p.chunks.first()) else { panic!("{sent:?}") };
    assert_eq!(
        r.params,
        vec![ReconfigParam::OutgoingSsnReset {
            request_seq: ack.initial_tsn,
            response_seq: PEER_TSN - 1,
            last_tsn: ack.initial_tsn - 1,
            streams: vec![5],
        }]
    );
    // A browser INIT without RE-CONFIG in its list: no stream reset.
    let mut ep = fastshake_sctp::Endpoint::new(
        std::sync::Arc::new(Config { cookieless: true, ..with_reset(server_config(HandshakeMode::Both)) }),
        [5; 32],
    );
    let mut init = browser_init(0x8888);
    if let Chunk::Init(i) = &mut init {
        i.params[0] = Param::SupportedExtensions(vec![0xC0]);
        i.params.push(Param::AltCookie(vec![]));
    }
    exchange(&mut ep, now, client_addr(), crafted(0, vec![init]));
    let h = ep.associations()[0];
    assert_eq!(ep.reset_streams(h, &[0]), Err(Error::StreamResetUnsupported));
}

// ---------------------------------------------------------------- codec

fn reconfig_param() -> impl Strategy<Value = ReconfigParam> {
    let streams = || proptest::collection::vec(any::<u16>(), 0..9);
    prop_oneof![
        (any::<u32>(), any::<u32>(), any::<u32>(), streams()).prop_map(
            |(request_seq, response_seq, last_tsn, streams)| ReconfigParam::OutgoingSsnReset {
                request_seq,
                response_seq,
                last_tsn,
                streams
            }
        ),
        (any::<u32>(), streams())
            .prop_map(|(request_seq, streams)| ReconfigParam::IncomingSsnReset { request_seq, streams }),
        any::<u32>().prop_map(|request_seq| ReconfigParam::SsnTsnReset { request_seq }),
        (any::<u32>(), any::<u32>(), proptest::option::of(any::<(u32, u32)>())).prop_map(
            |(response_seq, result, next_tsns)| ReconfigParam::Response {
                response_seq,
                result: ReconfigResult::from_u32(result % 9),
                next_tsns
            }
        ),
        (any::<u32>(), any::<u16>()).prop_map(|(request_seq, new_streams)| {
            ReconfigParam::AddOutgoingStreams { request_seq, new_streams }
        }),
        (any::<u32>(), any::<u16>()).prop_map(|(request_seq, new_streams)| {
            ReconfigParam::AddIncomingStreams { request_seq, new_streams }
        }),
        (19u16.., proptest::collection::vec(any::<u8>(), 0..13))
            .prop_map(|(param_type, value)| ReconfigParam::Unknown { param_type, value }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6525),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reconfig_chunks_round_trip(params in proptest::collection::vec(reconfig_param(), 0..4), tail in any::<bool>()) {
        let mut p = Packet::new(1, 2, 3);
        p.chunks.push(Chunk::Reconfig(ReconfigChunk { params }));
        if tail {
            p.chunks.push(Chunk::CookieAck);
        }
        let bytes = p.encode();
        prop_assert_eq!(bytes.len(), p.encoded_len());
        prop_assert_eq!(bytes.len() % 4, 0);
        prop_assert_eq!(Packet::parse(&bytes).unwrap(), p);
    }

    #[test]
    fn reconfig_parameters_round_trip_alone(param in reconfig_param()) {
        let bytes = param.to_bytes();
        prop_assert_eq!(ReconfigParam::parse(&bytes).unwrap(), (param, bytes.len()));
        for cut in 0..bytes.len() {
            let _ = ReconfigParam::parse(&bytes[..cut]);
            let _ = ReconfigChunk::parse_value(&bytes[..cut]);
        }
    }
}

#[test]
fn malformed_reconfig_stays_an_unknown_chunk() {
    // A response followed by two stray bytes: not a RE-CONFIG we can read, so the chunk is kept
    // raw and the packet's other chunks still parse.
    let value = vec![0, 16, 0, 12, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0];
    let raw = Chunk::Unknown { chunk_type: CHUNK_RECONFIG, flags: 0, value };
    let mut p = Packet::new(1, 2, 3);
    p.chunks = vec![raw.clone(), Chunk::CookieAck];
    assert_eq!(Packet::parse(&p.encode()).unwrap().chunks, vec![raw, Chunk::CookieAck]);
}

#[test]
fn in_progress_answers_keep_the_request_going_without_counting_errors() {
    use ReconfigResult::*;
    let config =
        Config { cookieless: true, max_retransmits: 2, ..with_reset(server_config(HandshakeMode::Both)) };
    let mut ep = fastshake_sctp::Endpoint::new(std::sync::Arc::new(config), [6; 32]);
    let mut now = Instant::from_millis(1);
    let init = Chunk::Init(InitChunk {
        initiate_tag: 0x5151,
        a_rwnd: 65_536,
        outbound_streams: 2,
        inbound_streams: 2,
        initial_tsn: PEER_TSN,
        params: vec![Param::SupportedExtensions(vec![CHUNK_RECONFIG]), Param::AltCookie(vec![])],
    });
    let out = exchange(&mut ep, now, client_addr(), crafted(0, vec![init]));
    let Some(Chunk::InitAck(ack)) = out.first().and_then(|p| p.chunks.first()).cloned() else {
        panic!("{out:?}")
    };
    let h = ep.associations()[0];
    ep.reset_streams(h, &[1]).unwrap();
    ep.handle_timeout(now);
    let answer = |ep: &mut fastshake_sctp::Endpoint, now: Instant, result: ReconfigResult| {
        let response = ReconfigParam::Response { response_seq: ack.initial_tsn, result, next_tsns: None };
        let chunk = Chunk::Reconfig(ReconfigChunk { params: vec![response] });
        exchange(ep, now, client_addr(), crafted(ack.initiate_tag, vec![chunk]))
    };
    let is_request = |p: &Packet| p.chunks.iter().any(|c| matches!(c, Chunk::Reconfig(_)));
    assert_eq!(drain(&mut ep, now).iter().filter(|p| is_request(p)).count(), 1);
    assert!(answer(&mut ep, now, InProgress).is_empty());
    // Six expiries, more than Association.Max.Retrans (2): the request goes again every RTO,
    // neither doubled nor counted (§5.1.1), and the association lives on.
    for _ in 0..6 {
        now += Duration::from_secs(1);
        assert_eq!(ep.poll_timeout(), Some(now));
        ep.handle_timeout(now);
        assert_eq!(drain(&mut ep, now).iter().filter(|p| is_request(p)).count(), 1);
        answer(&mut ep, now, InProgress);
    }
    answer(&mut ep, now, Denied);
    let mut events = Vec::new();
    while let Some((_, e)) = ep.poll_event() {
        events.push(e);
    }
    assert!(
        events.contains(&Event::OutgoingStreamsReset { streams: vec![1], performed: false }),
        "{events:?}"
    );
    // Denied: the stream takes messages again, numbered on.
    ep.send(h, msg(1, b"still open")).unwrap();
}

#[test]
fn reconfig_fuzz_seeds_parse_as_reconfig() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/sctp_chunk");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("reconfig-") {
            let bytes = std::fs::read(entry.path()).unwrap();
            let (chunk, used) = Chunk::parse(&bytes).unwrap();
            assert!(matches!(chunk, Chunk::Reconfig(ref r) if r.is_allowed_combination()), "{chunk:?}");
            assert_eq!((chunk.to_bytes(), used), (bytes, used));
            seen += 1;
        }
    }
    assert_eq!(seen, 4);
}
