//! Connection IDs in DTLS 1.3 (RFC 9147 §9, the unified header's CID of §4) on virtual time:
//! negotiation under the mobility knobs of DTLS 1.2, records routed by CID, NAT rebinding and a
//! client that moves (with and without the return-routability check of RFC 9853), records that
//! must not move a session, NewConnectionId and RequestConnectionId under loss, and a record
//! that reaches the wrong node of a fleet.

use fastshake_dtls::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, Event, Mobility, NegotiatedMobility, ServerConfig,
    Versions,
};
use fastshake_testkit::dtls::{client_config, server_config, Pair};
use fastshake_testkit::net::{self, Datagram, Dir};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);
/// The C bit of the unified header's first byte (RFC 9147 §4).
const C_BIT: u8 = 0b0001_0000;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn mobility(connection_id: Option<u8>, rrc: bool) -> Mobility {
    Mobility { connection_id, return_routability_check: rrc, follow_server_port: false }
}

fn client13(m: Mobility) -> ClientConfig {
    ClientConfig { versions: Versions::Dtls13, mobility: m, ..client_config() }
}

fn server13(m: Mobility) -> ServerConfig {
    ServerConfig { versions: Versions::Dtls13, mobility: m, ..server_config() }
}

fn connect(pair: &mut Pair) -> ConnectionHandle {
    pair.elapse(5 * SECOND);
    assert!(pair.client.is_established(), "client connected: {:?}", pair.client_events);
    let h = pair
        .server_events
        .iter()
        .find_map(|(h, e)| matches!(e, Event::Connected(_)).then_some(*h))
        .expect("server connected");
    assert!(!pair.client.holds_handshake_state(), "the handshake is over on both sides");
    h
}

fn server_conn(pair: &Pair, h: ConnectionHandle) -> &Connection {
    pair.server.connection(h).expect("session still there")
}

fn server_path_changes(pair: &Pair) -> Vec<SocketAddr> {
    let changes = pair.server_events.iter().filter_map(|(_, e)| match e {
        Event::PathChanged(a) => Some(*a),
        _ => None,
    });
    changes.collect()
}

fn exchange(pair: &mut Pair, h: ConnectionHandle, tag: &str, n: usize) {
    for i in 0..n {
        pair.client.send(format!("c-{tag}-{i}").as_bytes()).unwrap();
        pair.server.send(h, format!("s-{tag}-{i}").as_bytes()).unwrap();
        pair.elapse(Duration::from_millis(50));
    }
    pair.elapse(SECOND);
}

fn expected(side: &str, tags: &[&str], n: usize) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for tag in tags {
        for i in 0..n {
            all.push(format!("{side}-{tag}-{i}").into_bytes());
        }
    }
    all
}

/// A datagram that starts with a protected 1.3 record (a unified header).
fn is_unified(d: &Datagram) -> bool {
    d.payload[0] & 0b1110_0000 == 0b0010_0000
}

fn to_server(pair: &Pair, d: &Datagram) -> bool {
    d.dst.ip() == pair.server_addr.ip()
}

#[test]
fn connection_ids_are_negotiated_and_carried_in_every_protected_record() {
    // The server issues 4-byte CIDs; the client wants none (the usual IoT case), then 3 bytes.
    for client_cid in [0u8, 3] {
        let mut pair =
            Pair::new(client13(mobility(Some(client_cid), false)), server13(mobility(Some(4), false)));
        let h = connect(&mut pair);
        let server_cid = server_conn(&pair, h).connection_id().expect("negotiated").to_vec();
        assert_eq!(server_cid.len(), 4);
        assert_eq!(pair.client.connection_id().map(<[u8]>::len), Some(client_cid as usize));
        let both = NegotiatedMobility { connection_id: true, return_routability: false, port_move: false };
        assert_eq!(pair.client.negotiated_mobility(), both);
        assert_eq!(server_conn(&pair, h).negotiated_mobility(), both);
        // The handshake summaries of both sides say so too.
        let connected = |events: Vec<&Event>| {
            events.into_iter().find_map(|e| match e {
                Event::Connected(summary) => Some(summary.mobility),
                _ => None,
            })
        };
        assert_eq!(connected(pair.client_events.iter().collect()), Some(both));
        assert_eq!(connected(pair.server_events.iter().map(|(_, e)| e).collect()), Some(both));
        exchange(&mut pair, h, "a", 3);
        assert_eq!(pair.server_data(), expected("c", &["a"], 3));
        assert_eq!(pair.client_data(), expected("s", &["a"], 3));
        let client_cid = pair.client.connection_id().unwrap().to_vec();
        // Handshake epoch and application data alike: the receiver's CID right after the first
        // byte (RFC 9147 §4); none when it asked for an empty one.
        let protected: Vec<&Datagram> = pair.log.iter().filter(|d| is_unified(d)).collect();
        assert!(protected.iter().filter(|d| to_server(&pair, d)).count() >= 4);
        for d in protected {
            if to_server(&pair, d) {
                assert_eq!(d.payload[0] & C_BIT, C_BIT, "{d:?}");
                assert_eq!(&d.payload[1..5], &server_cid[..]);
            } else if client_cid.is_empty() {
                assert_eq!(d.payload[0] & C_BIT, 0, "{d:?}");
            } else {
                assert_eq!(d.payload[0] & C_BIT, C_BIT, "{d:?}");
                assert_eq!(&d.payload[1..4], &client_cid[..]);
            }
        }
    }
}

#[test]
fn no_connection_id_unless_both_sides_configure_one() {
    let cases = [
        (mobility(Some(0), false), Mobility::default()),
        (Mobility::default(), mobility(Some(4), false)),
        (Mobility::default(), Mobility::default()),
    ];
    for (c, s) in cases {
        let mut pair = Pair::new(client13(c.clone()), server13(s.clone()));
        let h = connect(&mut pair);
        assert_eq!(pair.client.connection_id(), None, "{c:?} {s:?}");
        assert_eq!(server_conn(&pair, h).connection_id(), None);
        assert_eq!(pair.client.negotiated_mobility(), NegotiatedMobility::default());
        let client_summary = pair.client_events.iter().find_map(|e| match e {
            Event::Connected(summary) => Some(summary.mobility),
            _ => None,
        });
        assert_eq!(client_summary, Some(NegotiatedMobility::default()), "the summary agrees");
        exchange(&mut pair, h, "a", 2);
        assert_eq!(pair.server_data(), expected("c", &["a"], 2));
        assert!(pair.log.iter().filter(|d| is_unified(d)).all(|d| d.payload[0] & C_BIT == 0));
        // Without a CID a 1.3 session stays with its address, as a 1.2 one does.
        pair.client_addr = addr("203.0.113.9:50000");
        pair.client.send(b"from elsewhere").unwrap();
        pair.elapse(SECOND);
        assert_eq!(pair.server_data(), expected("c", &["a"], 2));
        assert!(server_path_changes(&pair).is_empty());
    }
}

/// Runs a session, moves the client to a new address, and checks the session goes on there
/// without a new handshake, every message delivered once.
fn assert_session_follows(pair: &mut Pair, h: ConnectionHandle) {
    exchange(pair, h, "before", 3);
    let moved_to = addr("203.0.113.9:50000");
    pair.client_addr = moved_to;
    pair.client.send(b"c-moved").unwrap();
    pair.elapse(2 * SECOND);
    exchange(pair, h, "after", 3);
    let mut want = expected("c", &["before"], 3);
    want.push(b"c-moved".to_vec());
    want.extend(expected("c", &["after"], 3));
    assert_eq!(pair.server_data(), want);
    assert_eq!(pair.client_data(), expected("s", &["before", "after"], 3));
    assert_eq!(server_path_changes(pair), vec![moved_to]);
    assert_eq!(server_conn(pair, h).remote(), moved_to);
    assert_eq!(pair.server.handle_for(moved_to), Some(h), "the address index follows");
    assert_eq!(pair.server.stats().connections_accepted, 1, "no new handshake");
}

#[test]
fn data_goes_on_across_a_nat_rebinding() {
    let mut pair = Pair::new(client13(mobility(Some(0), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    assert_session_follows(&mut pair, h);
    assert_eq!(server_conn(&pair, h).mobility_stats().path_changes, 1);
    assert_eq!(server_conn(&pair, h).mobility_stats().path_challenges_sent, 0, "no rrc agreed");
}

#[test]
fn a_client_that_moves_is_checked_with_the_return_routability_check() {
    let mut pair = Pair::new(client13(mobility(Some(0), true)), server13(mobility(Some(4), true)));
    let h = connect(&mut pair);
    let all = NegotiatedMobility { connection_id: true, return_routability: true, port_move: false };
    assert_eq!(pair.client.negotiated_mobility(), all);
    assert_eq!(server_conn(&pair, h).negotiated_mobility(), all);
    assert_session_follows(&mut pair, h);
    let stats = server_conn(&pair, h).mobility_stats();
    assert!(stats.path_challenges_sent >= 1, "{stats:?}");
    assert_eq!(stats.path_validations_failed, 0);
    assert!(pair.client.mobility_stats().path_responses_sent >= 1);
    // The challenge went to the new address only.
    let moved_to = addr("203.0.113.9:50000");
    assert!(pair.log.iter().any(|d| d.dst == moved_to));
}

#[test]
fn a_spoofed_copy_is_checked_and_the_session_stays_with_the_client() {
    let mut pair = Pair::new(client13(mobility(Some(0), true)), server13(mobility(Some(4), true)));
    let h = connect(&mut pair);
    exchange(&mut pair, h, "before", 2);
    let spoofed = addr("203.0.113.66:666");
    pair.client.send(b"c-fresh").unwrap();
    pair.collect();
    let [genuine]: [Datagram; 1] = pair.take_in_flight().try_into().expect("one datagram on its way");
    pair.inject(spoofed, genuine.dst, genuine.payload.clone());
    pair.inject(genuine.src, genuine.dst, genuine.payload);
    pair.elapse(60 * SECOND);
    let stats = server_conn(&pair, h).mobility_stats();
    assert_eq!(stats.path_validations_failed, 1, "{stats:?}");
    assert!(server_path_changes(&pair).is_empty());
    assert_eq!(server_conn(&pair, h).remote(), pair.client_addr);
    exchange(&mut pair, h, "after", 2);
    let mut want = expected("c", &["before"], 2);
    want.push(b"c-fresh".to_vec());
    want.extend(expected("c", &["after"], 2));
    assert_eq!(pair.server_data(), want);
}

#[test]
fn replayed_and_forged_records_from_a_new_address_never_move_the_session() {
    let mut pair = Pair::new(client13(mobility(Some(0), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    let before = pair.log.len();
    exchange(&mut pair, h, "a", 2);
    let captured: Vec<Datagram> =
        pair.log[before..].iter().filter(|d| to_server(&pair, d)).cloned().collect();
    assert!(!captured.is_empty());
    let attacker = addr("203.0.113.66:666");
    // Replays, then every bit of one record flipped and every cut of it.
    let mut variants: Vec<Vec<u8>> = captured.iter().map(|d| d.payload.clone()).collect();
    let sample = &captured[0].payload;
    for bit in 0..sample.len() * 8 {
        let mut d = sample.clone();
        d[bit / 8] ^= 1 << (bit % 8);
        variants.push(d);
    }
    variants.extend((0..sample.len()).map(|n| sample[..n].to_vec()));
    let dropped = server_conn(&pair, h).stats().records_dropped;
    for payload in variants {
        pair.inject(attacker, pair.server_addr, payload);
    }
    pair.elapse(10 * SECOND);
    assert!(server_path_changes(&pair).is_empty());
    assert_eq!(server_conn(&pair, h).remote(), pair.client_addr);
    assert_eq!(pair.server_data(), expected("c", &["a"], 2), "nothing of theirs delivered");
    assert!(server_conn(&pair, h).stats().records_dropped > dropped, "they reached the session");
    assert!(server_conn(&pair, h).is_established());
    exchange(&mut pair, h, "b", 1);
    let mut want = expected("c", &["a"], 2);
    want.extend(expected("c", &["b"], 1));
    assert_eq!(pair.server_data(), want);
}

#[test]
fn a_record_with_a_connection_id_of_no_session_is_dropped_silently() {
    let mut pair = Pair::new(client13(mobility(Some(0), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    exchange(&mut pair, h, "a", 1);
    let sample = pair.log.iter().rev().find(|d| to_server(&pair, d) && is_unified(d)).unwrap().clone();
    let (endpoint_drops, session_drops) =
        (pair.server.stats().datagrams_dropped, server_conn(&pair, h).stats().records_dropped);
    let sent = pair.log.len();
    for from in [pair.client_addr, addr("203.0.113.66:666")] {
        let mut unknown = sample.payload.clone();
        unknown[1] ^= 0xff;
        pair.inject(from, pair.server_addr, unknown);
    }
    // A unified header with the C bit and nothing after it, and one with no room for the CID.
    pair.inject(addr("203.0.113.66:666"), pair.server_addr, vec![0x3c]);
    pair.inject(addr("203.0.113.66:666"), pair.server_addr, vec![0x3c, 1, 2]);
    pair.elapse(SECOND);
    assert_eq!(pair.server.stats().datagrams_dropped, endpoint_drops + 4);
    assert_eq!(server_conn(&pair, h).stats().records_dropped, session_drops, "no session saw them");
    assert_eq!(pair.log.len(), sent, "no answer");
    assert!(pair.server_events.iter().all(|(_, e)| !matches!(e, Event::Failed(_) | Event::Closed)));
    exchange(&mut pair, h, "b", 1);
    assert_eq!(pair.server_data(), expected("c", &["a", "b"], 1));
}

/// Loses the first datagram towards `dir` sent after now.
fn lose_next(pair: &mut Pair, dir: Dir) {
    let first = pair.sent(dir);
    pair.filter = net::drop_if(move |d| d.dir == dir && d.index == first);
}

#[test]
fn new_connection_ids_from_the_server_are_resent_until_acknowledged_and_route() {
    let mut pair = Pair::new(client13(mobility(Some(0), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    let first_cid = server_conn(&pair, h).connection_id().unwrap().to_vec();
    // Spares first; the NewConnectionId's first transmission is lost.
    lose_next(&mut pair, Dir::ToClient);
    pair.server.new_connection_ids(h, 2, false).unwrap();
    assert!(pair.server.new_connection_ids(h, 1, false).is_err(), "one NewConnectionId at a time");
    pair.elapse(5 * SECOND);
    assert!(!server_conn(&pair, h).holds_handshake_state(), "acknowledged");
    let spares: Vec<Vec<u8>> = pair.client.spare_connection_ids().iter().map(|c| c.to_vec()).collect();
    assert_eq!(spares.len(), 2);
    assert!(spares.iter().all(|c| c.len() == 4 && *c != first_cid));
    assert!(pair.log.iter().filter(|d| d.dir == Dir::ToClient).any(|d| d.fate == net::Fate::Drop));
    // The client moves to a spare: its records carry it and reach the session.
    assert!(pair.client.use_spare_connection_id());
    let mark = pair.log.len();
    exchange(&mut pair, h, "spare", 2);
    assert_eq!(pair.server_data(), expected("c", &["spare"], 2));
    for d in pair.log[mark..].iter().filter(|d| to_server(&pair, d)) {
        assert_eq!(&d.payload[1..5], &spares[0][..]);
    }
    // Now one for immediate use: the client switches to it, and once it has written one the
    // CIDs it replaced route nowhere.
    pair.server.new_connection_ids(h, 1, true).unwrap();
    pair.elapse(2 * SECOND);
    let current = server_conn(&pair, h).connection_id().unwrap().to_vec();
    assert!(current != first_cid && !spares.contains(&current));
    assert!(pair.client.spare_connection_ids().is_empty(), "the earlier spares went with the switch");
    let mark = pair.log.len();
    exchange(&mut pair, h, "now", 1);
    let sent: Vec<&Datagram> = pair.log[mark..].iter().filter(|d| to_server(&pair, d)).collect();
    assert!(sent.iter().all(|d| d.payload[1..5] == current[..]));
    let old =
        pair.log.iter().find(|d| to_server(&pair, d) && is_unified(d) && d.payload[1..5] == spares[0][..]);
    let dropped = pair.server.stats().datagrams_dropped;
    pair.inject(pair.client_addr, pair.server_addr, old.unwrap().payload.clone());
    assert_eq!(pair.server.stats().datagrams_dropped, dropped + 1, "a retired CID routes nowhere");
    let mut want = expected("c", &["spare"], 2);
    want.extend(expected("c", &["now"], 1));
    assert_eq!(pair.server_data(), want, "the replay with the retired CID was not delivered");
}

#[test]
fn request_connection_id_is_answered_both_ways_under_loss() {
    let mut pair = Pair::new(client13(mobility(Some(3), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    // The client asks the server; its request is lost once.
    lose_next(&mut pair, Dir::ToServer);
    let now = pair.now;
    pair.client.request_connection_ids(now, 3).unwrap();
    assert!(pair.client.request_connection_ids(now, 1).is_err(), "one request at a time");
    pair.elapse(5 * SECOND);
    assert_eq!(pair.client.spare_connection_ids().len(), 3);
    assert!(!pair.client.holds_handshake_state(), "the request was acknowledged");
    let now = pair.now;
    pair.client.request_connection_ids(now, 1).unwrap();
    pair.elapse(5 * SECOND);
    assert_eq!(pair.client.spare_connection_ids().len(), 4, "at most 4 spares kept");
    // The server asks the client; the client's answer is lost once.
    lose_next(&mut pair, Dir::ToServer);
    pair.server.request_connection_ids(h, 2).unwrap();
    pair.elapse(5 * SECOND);
    let spares = server_conn(&pair, h).spare_connection_ids();
    assert_eq!(spares.len(), 2);
    assert!(spares.iter().all(|c| c.len() == 3));
    // The server moves to one of them: the client reads it.
    assert!(pair.server.use_spare_connection_id(h));
    exchange(&mut pair, h, "x", 2);
    assert_eq!(pair.client_data(), expected("s", &["x"], 2));
}

#[test]
fn connection_id_updates_need_a_non_empty_connection_id() {
    // The client asked for no CID: it cannot be asked for more, nor give any.
    let mut pair = Pair::new(client13(mobility(Some(0), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    assert!(pair.server.request_connection_ids(h, 1).is_err());
    let now = pair.now;
    assert!(pair.client.new_connection_ids(now, 1, false).is_err());
    // No CID negotiated at all, and a DTLS 1.2 session.
    let mut pair = Pair::new(client13(Mobility::default()), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    assert!(pair.server.new_connection_ids(h, 1, false).is_err());
    let mut pair = Pair::new(
        ClientConfig { mobility: mobility(Some(0), false), ..client_config() },
        ServerConfig { mobility: mobility(Some(4), false), ..server_config() },
    );
    let h = connect(&mut pair);
    assert!(pair.server.new_connection_ids(h, 1, false).is_err());
    assert!(pair.client.request_connection_ids(pair.now, 1).is_err());
}

#[test]
fn a_record_at_the_wrong_node_of_a_fleet_is_forwarded_by_its_connection_id() {
    // Node 1 holds the session; node 2 gets the client's datagrams after a load balancer
    // changed its mind. Both issue 8-byte CIDs led by QUIC-LB's first octet, node and worker.
    let server = server13(mobility(Some(8), false));
    let mut pair = Pair::new(client13(mobility(Some(0), false)), server.clone());
    pair.server.set_cid_prefix(&[7, 1, 0]);
    let h = connect(&mut pair);
    let mut node2 = Endpoint::new(Arc::new(server), [9; 32]).unwrap();
    node2.set_cid_prefix(&[7, 2, 0]);
    pair.client.send(b"to node 1").unwrap();
    pair.collect();
    let [d]: [Datagram; 1] = pair.take_in_flight().try_into().expect("one datagram");
    let mut bytes = d.payload.clone();
    let now = pair.now;
    let incoming = node2.incoming(&mut bytes);
    let cid = incoming.connection_id().expect("node 2 reads the CID of a 1.3 record").to_vec();
    assert_eq!(cid[..3], [7, 1, 0], "it names node 1");
    // The driver forwards it; node 2's own engine would have dropped it.
    let mut copy = d.payload.clone();
    node2.handle_datagram(now, d.dst, d.src, &mut copy);
    assert_eq!(node2.stats().datagrams_dropped, 1);
    let mut got = Vec::new();
    let incoming = pair.server.incoming(&mut bytes);
    assert_eq!(incoming.connection_id(), Some(&cid[..]));
    pair.server.open_in_place(now, d.dst, d.src, incoming, &mut |hh, data| {
        assert_eq!(hh, h);
        got.extend_from_slice(data)
    });
    assert_eq!(got, b"to node 1");
}

#[test]
fn a_client_offering_both_versions_gets_connection_ids_in_either() {
    let client = ClientConfig { versions: Versions::Both, ..client13(mobility(Some(3), false)) };
    for server_versions in [Versions::Dtls13, Versions::Dtls12] {
        let server = ServerConfig { versions: server_versions, ..server13(mobility(Some(4), false)) };
        let mut pair = Pair::new(client.clone(), server);
        let h = connect(&mut pair);
        assert_eq!(pair.client_summary().unwrap().version, server_versions);
        let server_cid = server_conn(&pair, h).connection_id().expect("negotiated").to_vec();
        assert_eq!(pair.client.connection_id().map(<[u8]>::len), Some(3));
        let mark = pair.log.len();
        exchange(&mut pair, h, "a", 2);
        assert_eq!(pair.server_data(), expected("c", &["a"], 2));
        for d in pair.log[mark..].iter().filter(|d| to_server(&pair, d)) {
            match server_versions {
                // The unified header's C bit, the CID after the first byte (RFC 9147 §4) ...
                Versions::Dtls13 => {
                    assert_eq!((d.payload[0] & C_BIT, &d.payload[1..5]), (C_BIT, &server_cid[..]))
                }
                // ... or tls12_cid with the CID after the sequence number (RFC 9146 §4).
                _ => assert_eq!((d.payload[0], &d.payload[11..15]), (25, &server_cid[..])),
            }
        }
        // In 1.3 the client can give the server more of its own.
        let now = pair.now;
        assert_eq!(
            pair.client.new_connection_ids(now, 2, false).is_ok(),
            server_versions == Versions::Dtls13
        );
        pair.elapse(2 * SECOND);
        let spares = server_conn(&pair, h).spare_connection_ids().len();
        assert_eq!(spares, if server_versions == Versions::Dtls13 { 2 } else { 0 });
    }
}

#[test]
fn a_request_that_meets_an_unacknowledged_new_connection_id_is_answered_after_it() {
    let mut pair = Pair::new(client13(mobility(Some(3), false)), server13(mobility(Some(4), false)));
    let h = connect(&mut pair);
    // The server's NewConnectionId is lost once; the client's request arrives while it is out.
    lose_next(&mut pair, Dir::ToClient);
    pair.server.new_connection_ids(h, 1, false).unwrap();
    pair.collect();
    let now = pair.now;
    pair.client.request_connection_ids(now, 2).unwrap();
    pair.elapse(10 * SECOND);
    // One NewConnectionId at a time (RFC 9147 §9): the spare first, then the two asked for.
    assert_eq!(pair.client.spare_connection_ids().len(), 3);
    assert!(!server_conn(&pair, h).holds_handshake_state(), "both acknowledged");
    // The request was answered: another may go out.
    let now = pair.now;
    pair.client.request_connection_ids(now, 1).unwrap();
}
