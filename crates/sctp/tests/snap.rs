//! SNAP (draft-hancke-tsvwg-snap): associations opened from two INITs exchanged out of band, on
//! the in-memory pair and against a browser's INIT: data in the first packet, nothing of the
//! handshake on the wire, both sides alike, the peer's INIT validated, stream reset, loss of the
//! first DATA, and an INIT that arrives on the wire all the same.

use std::sync::Arc;
use std::time::Duration;

use fastshake_sctp::packet::{
    Chunk, InitChunk, Packet, Param, ParseError, SackChunk, CHUNK_COOKIE_ACK, CHUNK_COOKIE_ECHO, CHUNK_DATA,
    CHUNK_INIT, CHUNK_INIT_ACK,
};
use fastshake_sctp::{
    validate_snap_init, AssociationHandle, AssociationState, Config, ConnectOptions, Endpoint, Error, Event,
    HandshakeKind, HandshakeMode, Instant, SnapError,
};
use fastshake_testkit::net::{self, Dir, Fate};
use fastshake_testkit::sctp::*;

/// The `a=sctp-init` of a Chromium 156 offer.
const CHROMIUM_SDP_VALUE: &str = "AQAAHuus8t8AUAAA/////0nNnWLAAAAEgAgABoLA";

/// The same, decoded: INIT, length 30; Initiate Tag, a_rwnd 5 MiB, 65535 streams each way,
/// Initial TSN; Forward-TSN-Supported (0xC000); Supported Extensions RE-CONFIG and FORWARD-TSN.
const CHROMIUM_INIT: [u8; 30] = [
    0x01, 0x00, 0x00, 0x1e, 0xeb, 0xac, 0xf2, 0xdf, 0x00, 0x50, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x49,
    0xcd, 0x9d, 0x62, 0xc0, 0x00, 0x00, 0x04, 0x80, 0x08, 0x00, 0x06, 0x82, 0xc0,
];
const CHROMIUM_TAG: u32 = 0xebac_f2df;
const CHROMIUM_TSN: u32 = 0x49cd_9d62;

/// Base64 (RFC 4648 §4) as SDP carries it: enough of a decoder to read an `a=sctp-init`.
fn base64(text: &str) -> Vec<u8> {
    const DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut bits, mut held, mut out) = (0u32, 0u32, Vec::new());
    for c in text.bytes().filter(|c| *c != b'=') {
        let digit = DIGITS.iter().position(|d| *d == c).expect("a base64 digit") as u32;
        bits = (bits << 6 | digit) & 0xFFFF;
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
        }
    }
    out
}

/// An endpoint on SCTP port `port` that does not listen: SNAP needs no listener.
fn config(port: u16) -> Config {
    Config { local_port: port, listen: false, ..Config::default() }
}

fn with_reset(config: Config) -> Config {
    Config { stream_reset: true, ..config }
}

/// A pair opened by SNAP: each side's INIT as made, and its association.
struct Snap {
    pair: Pair,
    client: AssociationHandle,
    server: AssociationHandle,
    client_init: InitChunk,
    server_init: InitChunk,
}

/// Both endpoints make their INIT, exchange the bytes (as offer and answer would) and open.
fn open(client: Config, server: Config) -> Snap {
    let mut pair = Pair::new(client, server);
    let (ours_c, ours_s) = (pair.client.snap_init(), pair.server.snap_init());
    let (client_init, server_init) = (ours_c.chunk().clone(), ours_s.chunk().clone());
    let (bytes_c, bytes_s) = (ours_c.bytes().to_vec(), ours_s.bytes().to_vec());
    let now = pair.now;
    let client = pair
        .client
        .connect_snap(now, Some(client_addr()), server_addr(), SERVER_PORT, ours_c, &bytes_s)
        .expect("the client opens");
    let server = pair
        .server
        .connect_snap(now, Some(server_addr()), client_addr(), CLIENT_PORT, ours_s, &bytes_c)
        .expect("the server opens");
    Snap { pair, client, server, client_init, server_init }
}

fn connected(events: &[(AssociationHandle, Event)]) -> Vec<(HandshakeKind, u32, usize)> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Connected { handshake, round_trips, zero_rtt_accepted } => {
                Some((*handshake, *round_trips, *zero_rtt_accepted))
            }
            _ => None,
        })
        .collect()
}

/// The TSNs of the DATA chunks of `packet`.
fn data_tsns(packet: &Packet) -> Vec<u32> {
    packet
        .chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Data(d) => Some(d.tsn),
            _ => None,
        })
        .collect()
}

fn handshake_chunks_on_the_wire(pair: &Pair) -> usize {
    [CHUNK_INIT, CHUNK_INIT_ACK, CHUNK_COOKIE_ECHO, CHUNK_COOKIE_ACK]
        .iter()
        .map(|t| pair.sent_with(*t).len())
        .sum()
}

#[test]
fn first_packet_on_the_wire_carries_data_and_no_handshake_chunk_ever_goes() {
    let Snap { mut pair, client, server, client_init, server_init } =
        open(config(CLIENT_PORT), config(SERVER_PORT));
    for text in ["one", "two", "three"] {
        pair.client.send(client, msg(1, text.as_bytes())).unwrap();
    }
    for text in ["a", "b"] {
        pair.server.send(server, msg(0, text.as_bytes())).unwrap();
    }
    pair.run_for(Duration::from_secs(3));

    let first = pair.log.first().expect("something was sent").packet();
    assert_eq!(first.chunks.first().map(Chunk::chunk_type), Some(CHUNK_DATA), "the first packet is DATA");
    assert_eq!(first.verification_tag, server_init.initiate_tag, "with the server's Initiate Tag");
    assert_eq!(data_tsns(&first)[0], client_init.initial_tsn, "from the client's Initial TSN");
    let server_first = pair.log.iter().find(|d| d.dir == Dir::ToClient).expect("the server sent").packet();
    assert_eq!(server_first.verification_tag, client_init.initiate_tag);
    assert_eq!(data_tsns(&server_first)[0], server_init.initial_tsn, "the server's first packet is DATA too");
    assert_eq!(handshake_chunks_on_the_wire(&pair), 0, "no INIT, INIT-ACK, COOKIE-ECHO or COOKIE-ACK");

    assert_eq!(pair.server_messages(), vec![msg(1, b"one"), msg(1, b"two"), msg(1, b"three")]);
    assert_eq!(pair.client_messages(), vec![msg(0, b"a"), msg(0, b"b")]);
    assert_eq!(connected(&pair.client_events), vec![(HandshakeKind::Snap, 0, 0)]);
    assert_eq!(connected(&pair.server_events), vec![(HandshakeKind::Snap, 0, 0)]);
}

#[test]
fn both_sides_are_alike_and_either_may_speak_first() {
    let Snap { mut pair, client, server, client_init, server_init } =
        open(config(CLIENT_PORT), config(SERVER_PORT));
    let (c, s) = (pair.client.association(client).unwrap(), pair.server.association(server).unwrap());
    for (info, mine, theirs) in [(&c, &client_init, &server_init), (&s, &server_init, &client_init)] {
        assert_eq!(info.state, AssociationState::Established);
        assert_eq!(info.handshake, Some(HandshakeKind::Snap));
        assert!(info.is_client, "each side opened it");
        assert_eq!((info.local_tag, info.peer_tag), (mine.initiate_tag, theirs.initiate_tag));
        assert_eq!((info.streams_out, info.streams_in), (16, 16));
    }
    assert_eq!(pair.client.stats().associations_opened, 1);
    assert_eq!(pair.server.stats().associations_opened, 1);
    // The side that answered the offer speaks first.
    pair.server.send(server, msg(2, b"answerer first")).unwrap();
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.log[0].dir, Dir::ToClient);
    assert_eq!(pair.log[0].chunk_types(), vec![CHUNK_DATA]);
    assert_eq!(pair.client_messages(), vec![msg(2, b"answerer first")]);
    pair.client.send(client, msg(2, b"and back")).unwrap();
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_messages(), vec![msg(2, b"and back")]);
    assert_eq!(handshake_chunks_on_the_wire(&pair), 0);
}

#[test]
fn snap_init_is_the_init_the_endpoint_would_send_and_changes_nothing() {
    let mut ep = Endpoint::new(Arc::new(config(SERVER_PORT)), [5; 32]);
    let ours = ep.snap_init();
    let bytes = ours.bytes();
    assert_eq!(bytes.len(), 20, "fixed fields only");
    assert_eq!(&bytes[..4], &[CHUNK_INIT, 0, 0, 20]);
    assert_eq!(&bytes[4..8], &ours.initiate_tag().to_be_bytes());
    assert_eq!(&bytes[8..12], &(256u32 * 1024).to_be_bytes(), "a_rwnd is the receive window");
    assert_eq!(&bytes[12..16], &[0, 16, 0, 16], "16 streams each way");
    assert_eq!(&bytes[16..20], &ours.initial_tsn().to_be_bytes());
    assert_ne!(ours.initiate_tag(), 0);
    // "SCTP considerations": no state, no timer.
    assert!(ep.associations().is_empty());
    assert_eq!(ep.poll_timeout(), None);
    assert!(ep.poll_transmit(Instant::from_millis(1)).is_none());
    assert!(ep.poll_event().is_none());
    // Each INIT draws a new tag and TSN, from the endpoint's seed alone.
    let again = ep.snap_init();
    assert_ne!((again.initiate_tag(), again.initial_tsn()), (ours.initiate_tag(), ours.initial_tsn()));
    let twin = Endpoint::new(Arc::new(config(SERVER_PORT)), [5; 32]).snap_init();
    assert_eq!(twin, ours);

    // With stream reset and an extra address: the parameters of the INIT sent on the wire.
    let full = Config {
        mode: HandshakeMode::Regular,
        extra_local_addresses: vec!["10.0.1.1".parse().unwrap()],
        ..with_reset(config(CLIENT_PORT))
    };
    let mut ep = Endpoint::new(Arc::new(full), [6; 32]);
    ep.connect(
        Instant::from_millis(1),
        Some(client_addr()),
        server_addr(),
        SERVER_PORT,
        ConnectOptions::default(),
    );
    let wire = drain(&mut ep, Instant::from_millis(1));
    let Some(Chunk::Init(sent)) = wire.first().and_then(|p| p.chunks.first()) else {
        panic!("INIT expected")
    };
    let ours = ep.snap_init();
    let snap = ours.chunk();
    assert_eq!(snap.params, sent.params);
    assert_eq!(snap.params.last(), Some(&Param::SupportedExtensions(vec![0x82])), "RE-CONFIG announced");
    assert_eq!((snap.a_rwnd, snap.outbound_streams, snap.inbound_streams), (sent.a_rwnd, 16, 16));
    assert_eq!(ours.bytes().len(), 20 + 8 + 5, "unpadded after Supported Extensions");
    assert_eq!(Chunk::parse(ours.bytes()), Ok((Chunk::Init(snap.clone()), ours.bytes().len())));
}

#[test]
fn chromium_init_is_accepted_and_our_first_packet_carries_its_tag() {
    assert_eq!(base64(CHROMIUM_SDP_VALUE), CHROMIUM_INIT);
    assert_eq!(validate_snap_init(&CHROMIUM_INIT), Ok(()));
    let mut ep = Endpoint::new(Arc::new(with_reset(config(SERVER_PORT))), [3; 32]);
    let ours = ep.snap_init();
    let (tag, tsn) = (ours.initiate_tag(), ours.initial_tsn());
    let now = Instant::from_millis(1_000);
    let h =
        ep.connect_snap(now, Some(server_addr()), client_addr(), CLIENT_PORT, ours, &CHROMIUM_INIT).unwrap();
    assert_eq!(
        ep.poll_event(),
        Some((h, Event::Connected { handshake: HandshakeKind::Snap, round_trips: 0, zero_rtt_accepted: 0 }))
    );
    let info = ep.association(h).unwrap();
    assert_eq!((info.peer_tag, info.local_tag), (CHROMIUM_TAG, tag));
    assert_eq!((info.streams_out, info.streams_in), (16, 16), "our 16 against the browser's 65535");
    assert!(drain(&mut ep, now).is_empty(), "nothing goes before there is data");

    ep.send(h, msg(0, b"hello browser")).unwrap();
    ep.handle_timeout(now);
    let sent = drain(&mut ep, now);
    assert_eq!(sent.len(), 1);
    let first = &sent[0];
    assert_eq!(
        (first.src_port, first.dst_port, first.verification_tag),
        (SERVER_PORT, CLIENT_PORT, CHROMIUM_TAG)
    );
    assert_eq!(first.chunks.iter().map(Chunk::chunk_type).collect::<Vec<_>>(), vec![CHUNK_DATA]);
    assert_eq!(data_tsns(first), vec![tsn]);

    // The browser acknowledges and sends from its Initial TSN, to our tag.
    let sack = Chunk::Sack(SackChunk { cumulative_tsn_ack: tsn, a_rwnd: 0x50_0000, ..Default::default() });
    let answer = exchange(
        &mut ep,
        now,
        client_addr(),
        crafted(tag, vec![sack, data_fragment(CHROMIUM_TSN, 0, true, true, 5)]),
    );
    let Some(Chunk::Sack(ours_sack)) = answer.first().and_then(|p| p.chunks.first()) else {
        panic!("SACK expected, got {answer:?}")
    };
    assert_eq!(ours_sack.cumulative_tsn_ack, CHROMIUM_TSN);
    assert!(answer.iter().all(|p| p.verification_tag == CHROMIUM_TAG));
    let messages: Vec<Event> = std::iter::from_fn(|| ep.poll_event()).map(|(_, e)| e).collect();
    assert_eq!(messages.len(), 1);
    assert!(matches!(&messages[0], Event::Message(m) if m.stream == 0 && m.data == [0xEE; 5]));

    // Both announced RE-CONFIG: stream reset is on; Forward-TSN-Supported is never reported.
    ep.reset_streams(h, &[0]).unwrap();
    ep.handle_timeout(now);
    let reset = drain(&mut ep, now);
    assert!(reset.iter().any(|p| p.chunks.iter().any(|c| matches!(c, Chunk::Reconfig(_)))), "{reset:?}");
    let all: Vec<&Packet> = sent.iter().chain(&answer).chain(&reset).collect();
    assert!(all.iter().all(|p| p.chunks.iter().all(|c| !matches!(c, Chunk::Error { .. }))));
}

#[test]
fn stream_reset_works_over_snap_when_both_announce_it() {
    let Snap { mut pair, client, server, .. } =
        open(with_reset(config(CLIENT_PORT)), with_reset(config(SERVER_PORT)));
    pair.client.send(client, msg(1, b"before")).unwrap();
    pair.client.reset_streams(client, &[1]).unwrap();
    pair.run_for(Duration::from_secs(2));
    pair.client.send(client, msg(1, b"after")).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert_eq!(pair.server_messages(), vec![msg(1, b"before"), msg(1, b"after")]);
    assert!(pair
        .server_events
        .iter()
        .any(|(h, e)| *h == server && *e == Event::IncomingStreamsReset { streams: vec![1] }));
    assert!(pair.client_events.iter().any(
        |(h, e)| *h == client && *e == Event::OutgoingStreamsReset { streams: vec![1], performed: true }
    ));
    // The server's side the other way.
    pair.server.reset_streams(server, &[0]).unwrap();
    pair.run_for(Duration::from_secs(2));
    assert!(pair.client_events.iter().any(|(_, e)| *e == Event::IncomingStreamsReset { streams: vec![0] }));
    assert_eq!(handshake_chunks_on_the_wire(&pair), 0);

    // One side without it: neither may reset.
    let Snap { mut pair, client, server, .. } = open(with_reset(config(CLIENT_PORT)), config(SERVER_PORT));
    assert_eq!(pair.client.reset_streams(client, &[1]), Err(Error::StreamResetUnsupported));
    assert_eq!(pair.server.reset_streams(server, &[1]), Err(Error::StreamResetUnsupported));
}

/// A peer INIT with these fixed fields and parameters, as its `a=sctp-init` would carry it.
fn peer_init(tag: u32, a_rwnd: u32, streams: (u16, u16), params: Vec<Param>) -> Vec<u8> {
    let init = InitChunk {
        initiate_tag: tag,
        a_rwnd,
        outbound_streams: streams.0,
        inbound_streams: streams.1,
        initial_tsn: 77,
        params,
    };
    Chunk::Init(init).to_unpadded_bytes()
}

#[test]
fn bad_peer_inits_are_refused_with_their_reason() {
    let good = peer_init(0x1234, 1500, (1, 1), vec![]);
    let with_ext = peer_init(0x1234, 1500, (1, 1), vec![Param::SupportedExtensions(vec![0x82])]);
    let mut truncated = good[..12].to_vec();
    truncated[3] = 20;
    let mut short_length = good.clone();
    short_length[3] = 3;
    let mut bad_param = good.clone();
    bad_param[3] = 24;
    bad_param.extend_from_slice(&[0x80, 0x08, 0x00, 0x02]);
    let init_ack = {
        let mut b = good.clone();
        b[0] = 2;
        b
    };
    let cases: Vec<(&str, Vec<u8>, SnapError, &str)> = vec![
        ("empty", vec![], SnapError::Malformed(ParseError::Truncated("chunk header")), "malformed"),
        ("too long", vec![1; 4096], SnapError::TooLong(4096), "4096 bytes"),
        ("INIT-ACK", init_ack, SnapError::NotInit(2), "type 2"),
        (
            "DATA",
            vec![0, 3, 0, 17, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 9],
            SnapError::NotInit(0),
            "not an INIT",
        ),
        ("truncated", truncated, SnapError::Malformed(ParseError::Truncated("chunk value")), "truncated"),
        (
            "length below header",
            short_length,
            SnapError::Malformed(ParseError::BadLength("chunk")),
            "bad length",
        ),
        (
            "parameter length",
            bad_param,
            SnapError::Malformed(ParseError::BadLength("parameter")),
            "parameter",
        ),
        ("trailing bytes", [good.clone(), vec![0; 4]].concat(), SnapError::TrailingBytes(4), "4 more bytes"),
        ("beyond padding", [with_ext.clone(), vec![0; 4]].concat(), SnapError::TrailingBytes(1), "1 more"),
        ("zero tag", peer_init(0, 1500, (1, 1), vec![]), SnapError::ZeroInitiateTag, "Initiate Tag 0"),
        ("zero OS", peer_init(9, 1500, (0, 1), vec![]), SnapError::ZeroOutboundStreams, "0 outbound"),
        ("zero MIS", peer_init(9, 1500, (1, 0), vec![]), SnapError::ZeroInboundStreams, "0 inbound"),
        ("small window", peer_init(9, 1499, (1, 1), vec![]), SnapError::WindowTooSmall(1499), "1499"),
    ];
    for (name, bytes, expected, says) in cases {
        assert_eq!(validate_snap_init(&bytes), Err(expected.clone()), "{name}");
        let mut ep = Endpoint::new(Arc::new(config(SERVER_PORT)), [7; 32]);
        let ours = ep.snap_init();
        let got = ep.connect_snap(Instant::from_millis(1), None, client_addr(), CLIENT_PORT, ours, &bytes);
        assert_eq!(got, Err(Error::Snap(expected)), "{name}");
        let text = got.unwrap_err().to_string();
        assert!(text.contains(says), "{name}: {text:?} says {says:?}");
        assert!(ep.associations().is_empty() && ep.poll_event().is_none(), "{name}: nothing opened");
        assert!(ep.poll_transmit(Instant::from_millis(1)).is_none(), "{name}: nothing sent");
    }
    // The edges that pass: the window at its minimum, padding after the last parameter.
    assert_eq!(validate_snap_init(&good), Ok(()));
    assert_eq!(validate_snap_init(&[with_ext.clone(), vec![0; 3]].concat()), Ok(()));

    // Our own INIT given as the peer's.
    let mut ep = Endpoint::new(Arc::new(config(SERVER_PORT)), [7; 32]);
    let ours = ep.snap_init();
    let own = ours.bytes().to_vec();
    let got = ep.connect_snap(Instant::from_millis(1), None, client_addr(), CLIENT_PORT, ours, &own);
    assert_eq!(got, Err(Error::Snap(SnapError::OwnInitiateTag)));
    assert!(got.unwrap_err().to_string().contains("our own Initiate Tag"));

    // An INIT made by an endpoint of another configuration.
    let foreign =
        Endpoint::new(Arc::new(Config { streams_out: 4, ..config(SERVER_PORT) }), [8; 32]).snap_init();
    let got = ep.connect_snap(Instant::from_millis(1), None, client_addr(), CLIENT_PORT, foreign, &good);
    assert_eq!(got, Err(Error::Snap(SnapError::ForeignInit)));

    // A second sctp-init for a peer address and port that has an association.
    let first = ep.snap_init();
    let h = ep.connect_snap(Instant::from_millis(1), None, client_addr(), CLIENT_PORT, first, &good).unwrap();
    let second = ep.snap_init();
    let other = peer_init(0x9999, 1500, (1, 1), vec![]);
    let got = ep.connect_snap(Instant::from_millis(2), None, client_addr(), CLIENT_PORT, second, &other);
    assert_eq!(got, Err(Error::Snap(SnapError::AssociationExists(client_addr(), CLIENT_PORT))));
    assert!(got.unwrap_err().to_string().contains("exists already"));
    assert_eq!(ep.associations(), vec![h], "the first association stays");
    assert_eq!(ep.association(h).unwrap().peer_tag, 0x1234);

    // A full endpoint.
    let mut one = Endpoint::new(Arc::new(Config { max_associations: 1, ..config(SERVER_PORT) }), [9; 32]);
    let ours = one.snap_init();
    one.connect_snap(Instant::from_millis(1), None, client_addr(), CLIENT_PORT, ours, &good).unwrap();
    let ours = one.snap_init();
    let got = one.connect_snap(Instant::from_millis(1), None, client_addr2(), CLIENT_PORT, ours, &other);
    assert_eq!(got, Err(Error::TooManyAssociations));
}

#[test]
fn loss_of_the_first_data_packet_is_recovered_by_t3() {
    let Snap { mut pair, client, client_init, .. } = open(config(CLIENT_PORT), config(SERVER_PORT));
    pair.filter = net::drop_if(|d| d.nth == 0);
    pair.client.send(client, msg(0, b"lost once")).unwrap();
    let sent_at = pair.now;
    assert!(pair.run_until(sent_at + Duration::from_secs(5), |p| !p.server_messages().is_empty()));
    assert_eq!(pair.server_messages(), vec![msg(0, b"lost once")]);

    let data: Vec<_> = pair.log.iter().filter(|d| d.dir == Dir::ToServer).collect();
    assert_eq!(data[0].fate, Fate::Drop);
    assert_eq!(data_tsns(&data[0].packet()), vec![client_init.initial_tsn]);
    assert_eq!(data_tsns(&data[1].packet()), vec![client_init.initial_tsn], "the same TSN again");
    assert!(data[1].at - data[0].at >= Duration::from_secs(1), "after RTO.Initial");
    let stats = pair.client.association(client).unwrap().stats;
    assert_eq!((stats.t3_expiries, stats.retransmitted_chunks), (1, 1));
    assert_eq!(handshake_chunks_on_the_wire(&pair), 0);
    pair.run_for(Duration::from_secs(2));
    assert_eq!(pair.server_messages().len(), 1, "delivered once");
}

/// An endpoint opened by SNAP with the Chromium INIT: the endpoint, the association, our tag
/// and Initial TSN.
fn chromium_snap() -> (Endpoint, AssociationHandle, u32, u32) {
    let mut ep = Endpoint::new(Arc::new(config(SERVER_PORT)), [3; 32]);
    let ours = ep.snap_init();
    let (tag, tsn) = (ours.initiate_tag(), ours.initial_tsn());
    let now = Instant::from_millis(1_000);
    let h =
        ep.connect_snap(now, Some(server_addr()), client_addr(), CLIENT_PORT, ours, &CHROMIUM_INIT).unwrap();
    while ep.poll_event().is_some() {}
    (ep, h, tag, tsn)
}

/// The browser's INIT on the wire, with Initiate Tag `tag`.
fn chromium_init_packet(tag: u32) -> Vec<u8> {
    let (Chunk::Init(mut init), _) = Chunk::parse(&CHROMIUM_INIT).unwrap() else { unreachable!() };
    init.initiate_tag = tag;
    crafted(0, vec![Chunk::Init(init)])
}

fn only_chunk(answer: &[Packet]) -> &Chunk {
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0].chunks.len(), 1, "{answer:?}");
    &answer[0].chunks[0]
}

#[test]
fn the_peers_init_on_the_wire_all_the_same_joins_the_same_association() {
    let (mut ep, h, tag, tsn) = chromium_snap();
    let now = Instant::from_millis(1_100);
    // RFC 9260 §5.2.2 with the tags unchanged: the INIT-ACK repeats our SNAP tag and TSN.
    let answer = exchange(&mut ep, now, client_addr(), chromium_init_packet(CHROMIUM_TAG));
    let Chunk::InitAck(ack) = only_chunk(&answer) else { panic!("INIT-ACK expected, got {answer:?}") };
    assert_eq!(answer[0].verification_tag, CHROMIUM_TAG);
    assert_eq!((ack.initiate_tag, ack.initial_tsn), (tag, tsn));
    let cookie = ack.state_cookie().expect("a state cookie").to_vec();
    let answer = exchange(&mut ep, now, client_addr(), crafted(tag, vec![Chunk::CookieEcho(cookie)]));
    assert_eq!(only_chunk(&answer), &Chunk::CookieAck);
    assert_eq!(answer[0].verification_tag, CHROMIUM_TAG);
    // Nothing changed: the same association, open, and no second Connected.
    assert_eq!(ep.associations(), vec![h]);
    let info = ep.association(h).unwrap();
    assert_eq!((info.state, info.handshake), (AssociationState::Established, Some(HandshakeKind::Snap)));
    assert_eq!((info.local_tag, info.peer_tag), (tag, CHROMIUM_TAG));
    assert!(ep.poll_event().is_none());
    ep.send(h, msg(0, b"still here")).unwrap();
    ep.handle_timeout(now);
    let sent = drain(&mut ep, now);
    assert_eq!(sent.iter().flat_map(data_tsns).collect::<Vec<_>>(), vec![tsn]);
    assert!(sent.iter().all(|p| p.verification_tag == CHROMIUM_TAG));
}

#[test]
fn an_init_with_another_tag_restarts_the_association_as_rfc_9260_says() {
    let (mut ep, h, tag, _) = chromium_snap();
    let now = Instant::from_millis(1_100);
    let new_tag = 0x0bad_cafe;
    let answer = exchange(&mut ep, now, client_addr(), chromium_init_packet(new_tag));
    let Chunk::InitAck(ack) = only_chunk(&answer) else { panic!("INIT-ACK expected, got {answer:?}") };
    assert_eq!(answer[0].verification_tag, new_tag);
    assert_ne!(ack.initiate_tag, tag, "fresh tags for the restart (§5.2.2)");
    assert_eq!(ep.associations(), vec![h], "nothing changes before the COOKIE-ECHO");
    let cookie = ack.state_cookie().expect("a state cookie").to_vec();
    let answer =
        exchange(&mut ep, now, client_addr(), crafted(ack.initiate_tag, vec![Chunk::CookieEcho(cookie)]));
    // The old association goes with an ABORT to the old tag; the new one answers to the new.
    let by_tag =
        |vtag: u32| answer.iter().filter(move |p| p.verification_tag == vtag).flat_map(|p| &p.chunks);
    assert!(by_tag(CHROMIUM_TAG).all(|c| matches!(c, Chunk::Abort { .. })), "{answer:?}");
    assert_eq!(by_tag(new_tag).collect::<Vec<_>>(), vec![&Chunk::CookieAck]);
    let events: Vec<_> = std::iter::from_fn(|| ep.poll_event()).collect();
    assert!(events
        .iter()
        .any(|(hh, e)| *hh == h && matches!(e, Event::Aborted { reason } if reason.contains("restart"))));
    let new = ep.associations();
    assert_eq!(new.len(), 1);
    assert_ne!(new[0], h);
    assert!(events.contains(&(
        new[0],
        Event::Connected { handshake: HandshakeKind::Regular, round_trips: 1, zero_rtt_accepted: 0 }
    )));
    assert_eq!(ep.association(new[0]).unwrap().peer_tag, new_tag);
}
