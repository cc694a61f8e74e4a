//! Every handshake variant on an in-memory pair in virtual time, with each packet lost in turn.

use std::time::Duration;

use fastshake_sctp::packet::{
    Chunk, ErrorCause, Packet, Param, CHUNK_ERROR, CHUNK_HEARTBEAT, CHUNK_INIT, CHUNK_INIT_ACK,
};
use fastshake_sctp::{
    AssociationHandle, AssociationInfo, AssociationState, ConnectOptions, Event, HandshakeKind,
    HandshakeMode, Instant, Message,
};
use fastshake_testkit::net::{self, Dir};
use fastshake_testkit::sctp::*;

fn connected_kind(events: &[(AssociationHandle, Event)]) -> Option<(HandshakeKind, u32, usize)> {
    events.iter().find_map(|(_, e)| match e {
        Event::Connected { handshake, round_trips, zero_rtt_accepted } => {
            Some((*handshake, *round_trips, *zero_rtt_accepted))
        }
        _ => None,
    })
}

/// A client in `client` mode and a server in `server` mode, associated within 5 s.
fn connected(client: HandshakeMode, server: HandshakeMode) -> Pair {
    let mut pair = Pair::new(client_config(client), server_config(server));
    pair.connect(ConnectOptions::default());
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
    pair
}

/// The client sends `data` on stream 0 of `h`; within `wait` the server has it, and nothing else.
fn client_delivers(pair: &mut Pair, h: AssociationHandle, data: &[u8], wait: Duration) {
    pair.client.send(h, msg(0, data)).unwrap();
    pair.run_for(wait);
    assert_eq!(pair.server_messages(), vec![msg(0, data)]);
}

fn alt_cookie_event(events: &[(AssociationHandle, Event)]) -> Option<Vec<u8>> {
    events.iter().find_map(|(_, e)| match e {
        Event::AltCookie { cookie, .. } => Some(cookie.clone()),
        _ => None,
    })
}

/// A cookie for the client's address, from one full alternative handshake.
fn fetch_cookie(server_cfg: fastshake_sctp::Config) -> (Pair, Vec<u8>) {
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_cfg);
    pair.connect(ConnectOptions::default());
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
    let cookie = alt_cookie_event(&pair.client_events).expect("cookie event");
    // Close it so the next association to the same address and port is not a restart.
    for h in pair.client.associations() {
        pair.client.shutdown(h);
    }
    pair.run_for(Duration::from_secs(2));
    assert!(pair.client.associations().is_empty() && pair.server.associations().is_empty());
    (pair, cookie)
}

#[test]
fn regular_handshake_four_packets_and_data() {
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server_config(HandshakeMode::Both));
    pair.echo = true;
    let h = pair.connect(ConnectOptions::default());
    pair.client.send(h, msg(0, b"hello")).unwrap();
    assert!(pair.run_until(pair.now + Duration::from_secs(5), |p| !p.client_messages().is_empty()));
    assert_eq!(connected_kind(&pair.client_events), Some((HandshakeKind::Regular, 2, 0)));
    assert_eq!(connected_kind(&pair.server_events).map(|k| k.0), Some(HandshakeKind::Regular));
    assert_eq!(pair.server_messages(), vec![msg(0, b"hello")]);
    assert_eq!(pair.client_messages(), vec![msg(0, b"hello")]);
    let init = pair.log[0].packet();
    let Chunk::Init(init) = &init.chunks[0] else { panic!("first packet is INIT") };
    assert!(init.alt_cookie().is_none(), "regular client does not announce ALT-COOKIE");
    let info = pair.client.association(h).unwrap();
    assert_eq!(info.state, AssociationState::Established);
    assert_eq!(info.handshake, Some(HandshakeKind::Regular));
}

#[test]
fn alt_handshake_exchanges_small_cookie() {
    let pair = connected(HandshakeMode::Both, HandshakeMode::Both);
    assert_eq!(connected_kind(&pair.client_events), Some((HandshakeKind::AltCookie, 2, 0)));
    assert_eq!(connected_kind(&pair.server_events).map(|k| k.0), Some(HandshakeKind::AltCookie));
    let types: Vec<Vec<u8>> = pair.log.iter().map(SctpDatagram::chunk_types).collect();
    assert_eq!(types, vec![vec![CHUNK_INIT], vec![CHUNK_ERROR], vec![CHUNK_INIT], vec![CHUNK_INIT_ACK]]);
    let init_len = pair.log[0].payload.len();
    let error_len = pair.log[1].payload.len();
    assert!(error_len * 10 <= init_len * 11, "ERROR {error_len} B vs INIT {init_len} B");
    assert_eq!(error_len, 36, "12 header + 4 chunk + 4 cause + 16 cookie");
    let Chunk::InitAck(ack) = &pair.log[3].packet().chunks[0] else { panic!() };
    assert_eq!(ack.alt_cookie(), Some(&[][..]), "INIT-ACK confirms with an empty ALT-COOKIE");
    assert!(ack.state_cookie().is_none(), "no state cookie on the alternative path");
    assert!(alt_cookie_event(&pair.client_events).is_some());
    assert_eq!(pair.server.stats().alt_cookie_errors_sent, 1);
}

#[test]
fn cached_cookie_opens_in_one_round_trip() {
    let (mut pair, cookie) = fetch_cookie(server_config(HandshakeMode::Both));
    let start = pair.log.len();
    let h = pair.client.connect(
        pair.now,
        Some(client_addr()),
        server_addr(),
        SERVER_PORT,
        ConnectOptions { cached_cookie: Some(cookie), ..Default::default() },
    );
    let t0 = pair.now;
    let ev_start = pair.client_events.len();
    assert!(pair.run_until(pair.now + Duration::from_secs(5), |p| {
        p.client.association(h).is_some_and(|i| i.state == AssociationState::Established)
    }));
    assert_eq!(connected_kind(&pair.client_events[ev_start..]), Some((HandshakeKind::AltCached, 1, 0)));
    assert_eq!(pair.now - t0, pair.rtt(), "one round trip");
    let types: Vec<Vec<u8>> = pair.log[start..].iter().map(SctpDatagram::chunk_types).collect();
    assert_eq!(types, vec![vec![CHUNK_INIT], vec![CHUNK_INIT_ACK]]);
}

#[test]
fn cookieless_server_opens_on_empty_cookie() {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server);
    pair.connect(ConnectOptions::default());
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
    assert_eq!(connected_kind(&pair.client_events), Some((HandshakeKind::Cookieless, 1, 0)));
    assert_eq!(connected_kind(&pair.server_events).map(|k| k.0), Some(HandshakeKind::Cookieless));
    assert_eq!(pair.log.len(), 2);
}

#[test]
fn zero_rtt_data_with_cached_cookie_answers_in_one_round_trip() {
    let (mut pair, cookie) = fetch_cookie(server_config(HandshakeMode::Both));
    pair.echo = true;
    let t0 = pair.now;
    let ev_start = pair.client_events.len();
    pair.client.connect(
        t0,
        Some(client_addr()),
        server_addr(),
        SERVER_PORT,
        ConnectOptions { cached_cookie: Some(cookie), zero_rtt: vec![msg(1, b"request")] },
    );
    assert!(pair.run_until(t0 + Duration::from_secs(5), |p| !p.client_messages().is_empty()));
    assert_eq!(pair.now - t0, pair.rtt(), "first byte back after one round trip");
    assert_eq!(connected_kind(&pair.client_events[ev_start..]), Some((HandshakeKind::AltCached, 1, 1)));
    // The server reports the zero-RTT message it took, and Connected comes before it.
    let server_events: Vec<&Event> = pair.server_events.iter().map(|(_, e)| e).rev().take(2).collect();
    assert!(
        matches!(
            server_events[1],
            Event::Connected { handshake: HandshakeKind::AltCookie, round_trips: 0, zero_rtt_accepted: 1 }
        ),
        "{server_events:?}"
    );
    assert!(matches!(server_events[0], Event::Message(_)));
    pair.run_for(Duration::from_secs(2));
    assert_eq!(pair.server_messages(), vec![msg(1, b"request")], "delivered exactly once");
    assert_eq!(pair.client_messages(), vec![msg(1, b"request")]);
}

#[test]
fn zero_rtt_data_to_regular_server_is_sent_again_once() {
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Regular));
    pair.echo = true;
    pair.connect(ConnectOptions { zero_rtt: vec![msg(0, b"early")], ..Default::default() });
    assert!(pair.run_until(pair.now + Duration::from_secs(5), |p| !p.client_messages().is_empty()));
    pair.run_for(Duration::from_secs(2));
    assert_eq!(connected_kind(&pair.client_events).map(|k| (k.0, k.2)), Some((HandshakeKind::Regular, 0)));
    assert_eq!(pair.server_messages(), vec![msg(0, b"early")]);
    assert_eq!(pair.client_messages(), vec![msg(0, b"early")]);
    // The legacy server skipped ALT-COOKIE and ALT-DATA silently (high bits 10): no report.
    let Chunk::InitAck(ack) = &pair.log[1].packet().chunks[0] else { panic!() };
    assert!(ack.params.iter().all(|p| !matches!(p, Param::UnrecognizedParameter(_) | Param::AltCookie(_))));
}

#[test]
fn zero_rtt_refused_by_server_goes_as_regular_data() {
    let mut server = server_config(HandshakeMode::Both);
    server.accept_alt_data = false;
    server.cookieless = true;
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server);
    pair.connect(ConnectOptions {
        zero_rtt: vec![msg(0, b"early"), msg(0, b"second")],
        ..Default::default()
    });
    pair.run_for(Duration::from_secs(3));
    assert_eq!(connected_kind(&pair.client_events), Some((HandshakeKind::Cookieless, 1, 0)));
    assert_eq!(pair.server_messages(), vec![msg(0, b"early"), msg(0, b"second")]);
}

#[test]
fn zero_rtt_survives_the_cookie_exchange() {
    // No cached cookie: the first INIT's data is lost with the ERROR, the second INIT carries it.
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Both));
    pair.connect(ConnectOptions { zero_rtt: vec![msg(2, b"data")], ..Default::default() });
    pair.run_for(Duration::from_secs(3));
    assert_eq!(connected_kind(&pair.client_events), Some((HandshakeKind::AltCookie, 2, 1)));
    assert_eq!(pair.server_messages(), vec![msg(2, b"data")]);
    let second_init = pair.log[2].packet();
    let Chunk::Init(init) = &second_init.chunks[0] else { panic!() };
    assert!(init.params.iter().any(|p| matches!(p, Param::AltData(_))));
}

#[test]
fn legacy_client_gets_regular_handshake_from_both_server() {
    let pair = connected(HandshakeMode::Regular, HandshakeMode::Both);
    assert_eq!(connected_kind(&pair.server_events).map(|k| k.0), Some(HandshakeKind::Regular));
    assert_eq!(pair.log.len(), 4);
}

#[test]
fn alt_client_falls_back_with_legacy_server() {
    let pair = connected(HandshakeMode::Both, HandshakeMode::Regular);
    assert_eq!(connected_kind(&pair.client_events), Some((HandshakeKind::Regular, 2, 0)));
}

#[test]
fn alt_only_server_never_sends_state_cookie() {
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server_config(HandshakeMode::AltOnly));
    pair.connect(ConnectOptions::default());
    pair.run_for(Duration::from_secs(600));
    assert!(pair.client_connected().is_none());
    assert!(pair.client_events.iter().any(|(_, e)| matches!(e, Event::Failed(_))));
    for s in pair.log.iter().filter(|s| s.dir == Dir::ToClient) {
        assert_eq!(s.chunk_types(), vec![CHUNK_ERROR]);
        assert!(s.payload.len() <= 36);
    }
    // An alternative client gets in.
    let pair = connected(HandshakeMode::Both, HandshakeMode::AltOnly);
    assert_eq!(connected_kind(&pair.client_events).map(|k| k.0), Some(HandshakeKind::AltCookie));
    assert!(pair.sent_with(CHUNK_INIT_ACK).iter().all(|s| {
        let Chunk::InitAck(a) = &s.packet().chunks[0] else { return false };
        a.state_cookie().is_none()
    }));
}

/// Runs a scenario once to count its datagrams, then again dropping each one in turn; every run
/// must connect both sides and deliver the data exactly once.
fn each_packet_lost_in_turn(
    client_mode: HandshakeMode,
    server: fastshake_sctp::Config,
    cached: bool,
    zero_rtt: bool,
    expect: HandshakeKind,
) {
    let cookie = if cached { Some(fetch_cookie(server.clone()).1) } else { None };
    let setup = |drop_index: Option<usize>| {
        let mut pair = Pair::new(client_config(client_mode), server.clone());
        pair.echo = true;
        if let Some(i) = drop_index {
            pair.filter = net::drop_if(move |d| d.nth == i);
        }
        let opts = ConnectOptions {
            cached_cookie: cookie.clone(),
            zero_rtt: if zero_rtt { vec![msg(0, b"zero")] } else { Vec::new() },
        };
        let h = pair.connect(opts);
        if !zero_rtt {
            pair.client.send(h, msg(0, b"zero")).unwrap();
        }
        let done = pair.run_until(pair.now + Duration::from_secs(60), |p| {
            p.both_connected() && !p.client_messages().is_empty()
        });
        pair.run_for(Duration::from_secs(10));
        (pair, done)
    };
    let (clean, done) = setup(None);
    assert!(done, "lossless run");
    let n = clean.log.len();
    assert!(n >= 2);
    for i in 0..n {
        let (pair, done) = setup(Some(i));
        assert!(done, "{expect:?}: losing datagram {i} of {n} stalls");
        assert_eq!(connected_kind(&pair.client_events).map(|k| k.0), Some(expect), "drop {i}");
        assert_eq!(pair.server_messages(), vec![msg(0, b"zero")], "drop {i}: server got it exactly once");
        assert_eq!(pair.client_messages(), vec![msg(0, b"zero")], "drop {i}: echo exactly once");
    }
}

#[test]
fn regular_handshake_survives_each_loss() {
    each_packet_lost_in_turn(
        HandshakeMode::Regular,
        server_config(HandshakeMode::Both),
        false,
        false,
        HandshakeKind::Regular,
    );
}

#[test]
fn alt_handshake_survives_each_loss() {
    each_packet_lost_in_turn(
        HandshakeMode::Both,
        server_config(HandshakeMode::Both),
        false,
        false,
        HandshakeKind::AltCookie,
    );
}

#[test]
fn cached_zero_rtt_survives_each_loss() {
    each_packet_lost_in_turn(
        HandshakeMode::Both,
        server_config(HandshakeMode::Both),
        true,
        true,
        HandshakeKind::AltCached,
    );
}

#[test]
fn cookieless_zero_rtt_survives_each_loss() {
    let mut s = server_config(HandshakeMode::Both);
    s.cookieless = true;
    each_packet_lost_in_turn(HandshakeMode::Both, s, false, true, HandshakeKind::Cookieless);
}

#[test]
fn fallback_and_alt_only_survive_each_loss() {
    each_packet_lost_in_turn(
        HandshakeMode::Both,
        server_config(HandshakeMode::Regular),
        false,
        true,
        HandshakeKind::Regular,
    );
    each_packet_lost_in_turn(
        HandshakeMode::Both,
        server_config(HandshakeMode::AltOnly),
        false,
        true,
        HandshakeKind::AltCookie,
    );
    // A regular client against the same server: regular_handshake_survives_each_loss.
}

fn init_packet(tag: u32, cookie: Option<Vec<u8>>) -> Vec<u8> {
    let mut params = Vec::new();
    if let Some(c) = cookie {
        params.push(Param::AltCookie(c));
    }
    let mut p = Packet::new(CLIENT_PORT, SERVER_PORT, 0);
    p.chunks.push(Chunk::Init(fastshake_sctp::packet::InitChunk {
        initiate_tag: tag,
        a_rwnd: 65535,
        outbound_streams: 4,
        inbound_streams: 4,
        initial_tsn: 77,
        params,
    }));
    p.encode()
}

/// Sends a crafted INIT from `from`; returns the server's answers.
fn answers_to(
    server: &mut fastshake_sctp::Endpoint,
    from: std::net::SocketAddr,
    packet: Vec<u8>,
) -> Vec<Packet> {
    let mut buf = packet;
    server.handle_datagram(Instant::from_millis(5), server_addr(), from, &mut buf);
    let mut out = Vec::new();
    while let Some(t) = server.poll_transmit(Instant::from_millis(5)) {
        assert_eq!(t.dst, from);
        out.push(Packet::parse(&t.payload).unwrap());
    }
    out
}

fn error_cookie(p: &Packet) -> Vec<u8> {
    match &p.chunks[..] {
        [Chunk::Error { causes }] => match &causes[..] {
            [ErrorCause::AltCookieRequired(c)] => c.clone(),
            other => panic!("unexpected causes {other:?}"),
        },
        other => panic!("expected ERROR, got {other:?}"),
    }
}

#[test]
fn forged_expired_and_wrong_address_cookies_get_a_new_cookie() {
    let (pair, good) = fetch_cookie(server_config(HandshakeMode::Both));
    let mut server = pair.server;
    let before = server.associations().len();
    // Forged: random bytes of the right length, and a bit-flipped real one.
    let mut flipped = good.clone();
    flipped[5] ^= 1;
    for forged in [vec![0x55; good.len()], flipped, vec![1, 2, 3]] {
        let answers = answers_to(&mut server, client_addr(), init_packet(0x1234, Some(forged.clone())));
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].verification_tag, 0x1234);
        assert_eq!(error_cookie(&answers[0]), good, "a fresh valid cookie for this address");
        assert_eq!(server.associations().len(), before, "no association from a forged cookie");
    }
    // Wrong address: the cookie is bound to the client's IP.
    let elsewhere: std::net::SocketAddr = "10.9.9.9:9899".parse().unwrap();
    let answers = answers_to(&mut server, elsewhere, init_packet(0x99, Some(good.clone())));
    assert_ne!(error_cookie(&answers[0]), good);
    assert_eq!(server.associations().len(), before);
    // Expired: two key rotations later.
    server.rotate_cookie_key([7; 16]);
    let answers = answers_to(&mut server, client_addr(), init_packet(0x77, Some(good.clone())));
    assert_eq!(answers[0].chunks[0].chunk_type(), CHUNK_INIT_ACK, "one rotation: still valid");
    server.rotate_cookie_key([8; 16]);
    let answers = answers_to(&mut server, client_addr(), init_packet(0x78, Some(good.clone())));
    let fresh = error_cookie(&answers[0]);
    assert_ne!(fresh, good);
    assert!(server.stats().bad_cookies >= 4);
}

#[test]
fn expired_cached_cookie_costs_one_more_round_trip() {
    let (mut pair, cookie) = fetch_cookie(server_config(HandshakeMode::Both));
    pair.server.rotate_cookie_key([3; 16]);
    pair.server.rotate_cookie_key([4; 16]);
    let ev = pair.client_events.len();
    pair.client.connect(
        pair.now,
        Some(client_addr()),
        server_addr(),
        SERVER_PORT,
        ConnectOptions { cached_cookie: Some(cookie.clone()), ..Default::default() },
    );
    pair.run_for(Duration::from_secs(2));
    assert_eq!(connected_kind(&pair.client_events[ev..]), Some((HandshakeKind::AltCookie, 2, 0)));
    assert_ne!(alt_cookie_event(&pair.client_events[ev..]), Some(cookie), "a new cookie to cache");
}

#[test]
fn init_to_port_without_listener_gets_abort() {
    let mut client = client_config(HandshakeMode::Both);
    client.listen = false;
    let mut ep = fastshake_sctp::Endpoint::new(std::sync::Arc::new(client), [3; 32]);
    let mut p = Packet::parse(&init_packet(0xabcd, Some(Vec::new()))).unwrap();
    p.dst_port = CLIENT_PORT;
    let answers = answers_to(&mut ep, client_addr2(), p.encode());
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].verification_tag, 0xabcd, "tag of the INIT (RFC 9260 §8.4)");
    assert_eq!(answers[0].chunks, vec![Chunk::Abort { t_bit: false, causes: vec![] }]);
    assert_eq!(answers[0].encode().len(), 16);
    assert_eq!(ep.stats().aborts_sent, 1);
}

#[test]
fn invalid_stream_in_alt_data_gets_error() {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    server.streams_in = 2;
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server);
    pair.connect(ConnectOptions {
        zero_rtt: vec![msg(0, b"ok"), msg(9, b"bad stream")],
        ..Default::default()
    });
    pair.run_for(Duration::from_secs(3));
    assert_eq!(pair.server_messages(), vec![msg(0, b"ok")]);
    let errors: Vec<Packet> =
        pair.sent_with(CHUNK_ERROR).iter().filter(|s| s.dir == Dir::ToClient).map(|s| s.packet()).collect();
    assert!(errors.iter().any(|p| p.chunks.iter().any(
        |c| matches!(c, Chunk::Error { causes } if causes == &vec![ErrorCause::InvalidStream { stream: 9 }])
    )));
}

/// A client that also listens, so that the server's INIT can reach it.
fn listening_client(mode: HandshakeMode) -> fastshake_sctp::Config {
    fastshake_sctp::Config { listen: true, ..client_config(mode) }
}

/// Both sides send an INIT at once (the listening client and the server), each with its
/// zero-RTT messages; returns the client's and the server's handle.
fn inits_both_ways(
    pair: &mut Pair,
    client_zero_rtt: Vec<Message>,
    server_zero_rtt: Vec<Message>,
) -> (AssociationHandle, AssociationHandle) {
    let hc = pair.connect(ConnectOptions { zero_rtt: client_zero_rtt, ..Default::default() });
    let hs = pair.server.connect(
        pair.now,
        Some(server_addr()),
        client_addr(),
        CLIENT_PORT,
        ConnectOptions { zero_rtt: server_zero_rtt, ..Default::default() },
    );
    (hc, hs)
}

/// [`inits_both_ways`] without zero-RTT data, run for `d`: each side ends up with an
/// established association whose tags mirror the other's. Returns both handles and what each
/// side says of its association.
fn collide(
    pair: &mut Pair,
    d: Duration,
) -> (AssociationHandle, AssociationHandle, AssociationInfo, AssociationInfo) {
    let (hc, hs) = inits_both_ways(pair, Vec::new(), Vec::new());
    pair.run_for(d);
    let (ci, si) = established_mirrored(pair, hc, hs);
    (hc, hs, ci, si)
}

/// Both sides' associations are established and each side's tags mirror the other's.
fn established_mirrored(
    pair: &Pair,
    hc: AssociationHandle,
    hs: AssociationHandle,
) -> (AssociationInfo, AssociationInfo) {
    let ci = pair.client.association(hc).expect("client association");
    let si = pair.server.association(hs).expect("server association");
    assert_eq!((ci.state, si.state), (AssociationState::Established, AssociationState::Established));
    assert_eq!((ci.local_tag, ci.peer_tag), (si.peer_tag, si.local_tag));
    (ci, si)
}

#[test]
fn init_collision_alt_merges_into_one_association() {
    let mut a = server_config(HandshakeMode::Both);
    a.cookieless = true;
    let b = fastshake_sctp::Config { cookieless: true, ..listening_client(HandshakeMode::Both) };
    let mut pair = Pair::new(b, a);
    let (hc, _, ci, si) = collide(&mut pair, Duration::from_secs(3));
    assert_eq!(pair.client.associations().len(), 1);
    assert_eq!(pair.server.associations().len(), 1);
    // The INIT-ACKs repeat each side's own INIT tag.
    for s in pair.sent_with(CHUNK_INIT_ACK) {
        let Chunk::InitAck(ack) = &s.packet().chunks[0] else { panic!() };
        let own = if s.dir == Dir::ToServer { ci.local_tag } else { si.local_tag };
        assert_eq!(ack.initiate_tag, own);
    }
    client_delivers(&mut pair, hc, b"x", Duration::from_secs(1));
}

#[test]
fn init_collision_regular_merges_into_one_association() {
    let mut pair = Pair::new(listening_client(HandshakeMode::Regular), server_config(HandshakeMode::Regular));
    let (_, hs, _, _) = collide(&mut pair, Duration::from_secs(3));
    pair.server.send(hs, msg(0, b"y")).unwrap();
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.client_messages(), vec![msg(0, b"y")]);
}

#[test]
fn multihoming_heartbeats_wait_and_path_cookies_are_fetched() {
    let mut client = client_config(HandshakeMode::Both);
    client.extra_local_addresses = vec![client_addr2().ip()];
    let (_, cookie) = fetch_cookie(server_config(HandshakeMode::Both));
    let mut pair = Pair::new(client, server_config(HandshakeMode::Both));
    pair.client.connect(
        pair.now,
        Some(client_addr()),
        server_addr(),
        SERVER_PORT,
        ConnectOptions { cached_cookie: Some(cookie), ..Default::default() },
    );
    pair.run_for(Duration::from_secs(5));
    assert_eq!(connected_kind(&pair.client_events).map(|k| k.0), Some(HandshakeKind::AltCached));
    // The server held its HEARTBEATs back until the client spoke on the association.
    let init_ack_at = pair.log.iter().position(|s| s.chunk_types() == vec![CHUNK_INIT_ACK]).unwrap();
    let first_hb =
        pair.log.iter().position(|s| s.dir == Dir::ToClient && s.chunk_types().contains(&CHUNK_HEARTBEAT));
    let first_client_after = pair
        .log
        .iter()
        .skip(init_ack_at)
        .position(|s| s.dir == Dir::ToServer && s.packet().verification_tag != 0);
    if let Some(hb) = first_hb {
        let client_pkt =
            first_client_after.expect("client spoke before the server's HEARTBEAT") + init_ack_at;
        assert!(
            pair.log[client_pkt].at < pair.log[hb].at + pair.delay,
            "HEARTBEAT only after the client's first packet arrived"
        );
    }
    // The client fetched a cookie for its second address with an INIT over that path.
    let extra = pair.client_events.iter().find_map(|(_, e)| match e {
        Event::AltCookie { local: Some(l), cookie, .. } if *l == client_addr2() => Some(cookie.clone()),
        _ => None,
    });
    let extra = extra.expect("cookie for the second path");
    assert!(pair
        .log
        .iter()
        .any(|s| s.dir == Dir::ToServer && s.src == client_addr2() && s.chunk_types() == vec![CHUNK_INIT]));
    assert_eq!(pair.server.associations().len(), 1, "the probe INIT opened nothing");
    // That cookie opens an association from the second address in one round trip.
    for h in pair.client.associations() {
        pair.client.shutdown(h);
    }
    pair.run_for(Duration::from_secs(2));
    assert!(pair.client.associations().is_empty());
    let ev = pair.client_events.len();
    let t0 = pair.now;
    pair.client.connect(
        pair.now,
        Some(client_addr2()),
        server_addr(),
        SERVER_PORT,
        ConnectOptions { cached_cookie: Some(extra), ..Default::default() },
    );
    assert!(pair
        .run_until(pair.now + Duration::from_secs(5), |p| connected_kind(&p.client_events[ev..]).is_some()));
    assert_eq!(
        connected_kind(&pair.client_events[ev..]).map(|k| (k.0, k.1)),
        Some((HandshakeKind::AltCached, 1))
    );
    assert_eq!(pair.now - t0, pair.rtt());
}

#[test]
fn server_heartbeat_is_held_until_client_speaks() {
    // A client announcing a second address: the server must not probe it before the client has
    // sent anything after the INIT-ACK, and must once it has.
    let mut client = client_config(HandshakeMode::Both);
    client.extra_local_addresses = vec![client_addr2().ip()];
    client.fetch_path_cookies = false;
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut pair = Pair::new(client, server);
    let h = pair.connect(ConnectOptions::default());
    pair.run_for(Duration::from_secs(2));
    assert!(pair.both_connected());
    assert!(pair.sent_with(CHUNK_HEARTBEAT).is_empty(), "no HEARTBEAT before the client spoke");
    pair.client.send(h, msg(0, b"hi")).unwrap();
    pair.run_for(Duration::from_secs(2));
    let hbs = pair.sent_with(CHUNK_HEARTBEAT);
    assert!(
        hbs.iter().any(|s| s.dir == Dir::ToClient && s.dst == client_addr2()),
        "second path probed once open on both sides"
    );
}

#[test]
fn stale_state_cookie_is_reported_and_the_client_starts_over() {
    let mut server = server_config(HandshakeMode::Regular);
    server.cookie_lifetime = Duration::from_millis(15);
    // RTT 20 ms: every cookie is 5 ms too old when it comes back.
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server.clone());
    pair.connect(ConnectOptions::default());
    pair.run_for(Duration::from_secs(600));
    let stale_errors = pair
        .log
        .iter()
        .filter(|s| s.dir == Dir::ToClient)
        .filter(|s| s.packet().chunks.iter().any(|c| matches!(c, Chunk::Error { causes } if matches!(causes[..], [ErrorCause::StaleCookie { staleness_us: 5000 }]))))
        .count();
    assert!(stale_errors >= 2, "{stale_errors}");
    assert!(pair
        .client_events
        .iter()
        .any(|(_, e)| matches!(e, Event::Failed(fastshake_sctp::Error::HandshakeTimeout))));
    assert!(pair.server.associations().is_empty(), "no association from a stale cookie");
    // A faster path gets in under the same lifetime.
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server);
    pair.delay = Duration::from_millis(5);
    pair.connect(ConnectOptions::default());
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
}

#[test]
fn restarted_peer_replaces_the_old_association() {
    for (mode, cookieless) in [(HandshakeMode::Regular, false), (HandshakeMode::Both, true)] {
        let mut server = server_config(HandshakeMode::Both);
        server.cookieless = cookieless;
        let mut pair = Pair::new(client_config(mode), server);
        pair.connect(ConnectOptions::default());
        assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
        let old = pair.server.associations();
        assert_eq!(old.len(), 1);
        // The client host reboots: a fresh endpoint on the same address and port.
        pair.client = fastshake_sctp::Endpoint::new(std::sync::Arc::new(client_config(mode)), [9; 32]);
        let ev = pair.client_events.len();
        let h = pair.connect(ConnectOptions::default());
        pair.run_for(Duration::from_secs(5));
        assert!(connected_kind(&pair.client_events[ev..]).is_some(), "{mode:?}: reconnected");
        let now = pair.server.associations();
        assert_eq!(now.len(), 1, "{mode:?}: one association");
        assert_ne!(now, old, "{mode:?}: the old one is gone");
        assert!(pair
            .server_events
            .iter()
            .any(|(hh, e)| *hh == old[0]
                && matches!(e, Event::Aborted { reason } if reason.contains("restart"))));
        client_delivers(&mut pair, h, b"new life", Duration::from_secs(2));
    }
}

#[test]
fn zero_rtt_that_no_longer_fits_waits_and_later_sends_stay_out_of_the_init() {
    // 1130 bytes of data fit beside an empty ALT-COOKIE in a 1200-byte INIT, not beside the
    // 16-byte cookie: the second INIT goes without ALT-DATA and the data follows the handshake.
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Both));
    let big = vec![5u8; 1130];
    let h = pair.connect(ConnectOptions { zero_rtt: vec![msg(0, &big)], ..Default::default() });
    pair.client.send(h, msg(0, b"sent while opening")).unwrap();
    pair.run_for(Duration::from_secs(3));
    assert!(pair.log.iter().all(|s| s.payload.len() <= 1200));
    let inits: Vec<Packet> = pair.sent_with(CHUNK_INIT).iter().map(|s| s.packet()).collect();
    let with_data = |p: &Packet| match &p.chunks[0] {
        Chunk::Init(i) => i.params.iter().any(|p| matches!(p, Param::AltData(_))),
        _ => false,
    };
    assert!(with_data(&inits[0]), "first INIT carries the data");
    assert!(!with_data(&inits[1]), "the INIT with the cookie would exceed the MTU");
    assert_eq!(pair.server_messages(), vec![msg(0, &big), msg(0, b"sent while opening")]);
}

#[test]
fn i_data_in_alt_data_is_ignored_and_not_acknowledged() {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut ep = fastshake_sctp::Endpoint::new(std::sync::Arc::new(server), [6; 32]);
    // An I-DATA chunk (type 64, RFC 8260) as a client that announced I-DATA would send it.
    let i_data = Chunk::Unknown { chunk_type: 64, flags: 3, value: vec![0; 20] }.to_bytes();
    let mut p = Packet::parse(&init_packet(0x4242, Some(Vec::new()))).unwrap();
    if let Chunk::Init(init) = &mut p.chunks[0] {
        init.params.push(Param::AltData(i_data));
    }
    let answers = answers_to(&mut ep, client_addr(), p.encode());
    let Chunk::InitAck(ack) = &answers[0].chunks[0] else { panic!("cookieless INIT-ACK expected") };
    assert!(ack.alt_cookie().is_some());
    assert!(
        !ack.params.iter().any(|p| matches!(p, Param::AltSack(_))),
        "nothing taken, nothing acknowledged"
    );
    let mut events = Vec::new();
    while let Some((_, e)) = ep.poll_event() {
        events.push(e);
    }
    assert!(matches!(events[..], [Event::Connected { zero_rtt_accepted: 0, .. }]), "{events:?}");
}

#[test]
fn init_collision_with_cookie_exchange_on_both_sides() {
    let mut pair = Pair::new(listening_client(HandshakeMode::Both), server_config(HandshakeMode::Both));
    let (hc, hs) = inits_both_ways(&mut pair, vec![msg(0, b"from client")], vec![msg(0, b"from server")]);
    pair.run_for(Duration::from_secs(5));
    let (ci, _) = established_mirrored(&pair, hc, hs);
    assert_eq!(ci.handshake, Some(HandshakeKind::AltCookie));
    assert_eq!(pair.client.associations().len() + pair.server.associations().len(), 2);
    assert_eq!(pair.server_messages(), vec![msg(0, b"from client")]);
    assert_eq!(pair.client_messages(), vec![msg(0, b"from server")]);
}

#[test]
fn init_collision_survives_each_loss() {
    let run = |drop: Option<usize>| {
        let mut pair = Pair::new(listening_client(HandshakeMode::Both), server_config(HandshakeMode::Both));
        if let Some(i) = drop {
            pair.filter = net::drop_if(move |d| d.nth == i);
        }
        let (hc, hs) = inits_both_ways(&mut pair, vec![msg(0, b"c")], vec![msg(0, b"s")]);
        pair.run_for(Duration::from_secs(30));
        (pair, hc, hs)
    };
    let (clean, _, _) = run(None);
    for i in 0..clean.log.len() {
        let (pair, hc, hs) = run(Some(i));
        let ci = pair.client.association(hc);
        let si = pair.server.association(hs);
        // Either both attempts merged, or one side's attempt was replaced by the peer's INIT;
        // in every case exactly one association per side carries the data once each way.
        assert_eq!(pair.client.associations().len(), 1, "drop {i}: {ci:?}");
        assert_eq!(pair.server.associations().len(), 1, "drop {i}: {si:?}");
        assert_eq!(pair.server_messages(), vec![msg(0, b"c")], "drop {i}");
        assert_eq!(pair.client_messages(), vec![msg(0, b"s")], "drop {i}");
    }
}

#[test]
fn cookieless_server_ignores_a_stale_cookie() {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server);
    pair.connect(ConnectOptions { cached_cookie: Some(vec![0xEE; 17]), ..Default::default() });
    assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
    assert_eq!(pair.log.len(), 2, "INIT and INIT-ACK, no cookie exchange");
    assert_eq!(connected_kind(&pair.server_events).map(|k| k.0), Some(HandshakeKind::Cookieless));
}

/// A peer that does not know a parameter whose type's high bits are `00` or `01` stops
/// processing the INIT there (RFC 9260 §3.2.1), and some drop the whole INIT (pion/sctp does).
/// A single-homed INIT carries none: no Supported Address Types, whose absence means every
/// address type (§3.3.2.1); the ALT-* parameters are `10`, skipped by those who do not know them.
#[test]
fn init_carries_no_parameter_an_unaware_peer_stops_at() {
    use fastshake_sctp::packet::UnknownParamAction;
    for mode in [HandshakeMode::Regular, HandshakeMode::Both, HandshakeMode::AltOnly] {
        for opts in [
            ConnectOptions::default(),
            ConnectOptions { zero_rtt: vec![msg(0, b"early")], cached_cookie: Some(vec![9; 16]) },
        ] {
            let mut pair = Pair::new(client_config(mode), server_config(HandshakeMode::Regular));
            pair.connect(opts);
            pair.run_for(Duration::from_millis(1));
            let Chunk::Init(init) = &pair.log[0].packet().chunks[0] else { panic!("INIT first") };
            for p in &init.params {
                let t = p.param_type();
                assert!(UnknownParamAction::of(t).continues(), "{mode:?}: parameter {t:#06x} in the INIT");
            }
        }
    }
}
