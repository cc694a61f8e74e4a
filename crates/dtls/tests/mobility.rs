//! Session mobility on virtual time: Connection IDs (RFC 9146), the return-routability check
//! (RFC 9853), session sockets (IPC) and port moves (TCS, in DTLS 1.2 and 1.3), between an
//! in-memory client and endpoint whose addresses the test changes.

use fastshake_dtls::{
    ClientConfig, Connection, ConnectionHandle, Event, Instant, Mobility, NegotiatedMobility, ServerConfig,
    Versions,
};
use fastshake_testkit::dtls::{client_config, server_config, Pair};
use fastshake_testkit::net::{self, Datagram, Fate};
use std::net::SocketAddr;
use std::time::Duration;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

const SECOND: Duration = Duration::from_secs(1);

/// Lets the handshake (and its last flight) run for 5 s; returns the server's session.
fn connect(pair: &mut Pair) -> ConnectionHandle {
    pair.elapse(5 * SECOND);
    assert!(pair.client.is_established(), "client connected: {:?}", pair.client_events);
    let h = pair
        .server_events
        .iter()
        .find_map(|(h, e)| matches!(e, Event::Connected(_)).then_some(*h))
        .expect("server connected");
    assert!(pair.server.connection(h).unwrap().is_established());
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

fn client_path_changes(pair: &Pair) -> Vec<SocketAddr> {
    let changes = pair.client_events.iter().filter_map(|e| match e {
        Event::PathChanged(a) => Some(*a),
        _ => None,
    });
    changes.collect()
}

/// Sends `n` numbered messages each way, tagged with `tag`, and lets them arrive.
fn exchange(pair: &mut Pair, h: ConnectionHandle, tag: &str, n: usize) {
    for i in 0..n {
        pair.client.send(format!("c-{tag}-{i}").as_bytes()).unwrap();
        pair.server.send(h, format!("s-{tag}-{i}").as_bytes()).unwrap();
        pair.elapse(Duration::from_millis(50));
    }
    pair.elapse(SECOND);
}

fn mobility(connection_id: Option<u8>, rrc: bool, follow: bool) -> Mobility {
    Mobility { connection_id, return_routability_check: rrc, follow_server_port: follow }
}

fn with_client(m: Mobility) -> ClientConfig {
    ClientConfig { mobility: m, ..client_config() }
}

fn with_server(m: Mobility) -> ServerConfig {
    ServerConfig { mobility: m, ..server_config() }
}

/// The session sockets (IPC) and port moves (TCS) run in both versions.
const VERSIONS: [Versions; 2] = [Versions::Dtls12, Versions::Dtls13];

fn with_client_in(versions: Versions, m: Mobility) -> ClientConfig {
    ClientConfig { versions, ..with_client(m) }
}

fn with_server_in(versions: Versions, m: Mobility) -> ServerConfig {
    ServerConfig { versions, ..with_server(m) }
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

/// The records of a datagram as (outer content type, bytes 11.. of the header).
fn first_type(d: &Datagram) -> u8 {
    d.payload[0]
}

#[test]
fn connection_id_negotiated_and_carried_in_tls12_cid_records() {
    // The server issues 4-byte CIDs; the client wants none (the usual IoT case), then 3 bytes.
    for client_cid in [0u8, 3] {
        let mut pair = Pair::new(
            with_client(mobility(Some(client_cid), false, false)),
            with_server(mobility(Some(4), false, false)),
        );
        let h = connect(&mut pair);
        let server_cid = server_conn(&pair, h).connection_id().expect("negotiated").to_vec();
        assert_eq!(server_cid.len(), 4);
        assert_eq!(pair.client.connection_id().map(<[u8]>::len), Some(client_cid as usize));
        assert_eq!(
            pair.client.negotiated_mobility(),
            NegotiatedMobility { connection_id: true, return_routability: false, port_move: false }
        );
        let before = pair.log.len();
        exchange(&mut pair, h, "a", 3);
        assert_eq!(pair.server_data(), expected("c", &["a"], 3));
        assert_eq!(pair.client_data(), expected("s", &["a"], 3));
        for d in &pair.log[before..] {
            if d.dst.ip() == pair.server_addr.ip() {
                // Client to server: tls12_cid, epoch 1, the server's CID right after the sequence number.
                assert_eq!(first_type(d), 25, "{d:?}");
                assert_eq!(&d.payload[3..5], &[0, 1]);
                assert_eq!(&d.payload[11..15], &server_cid[..]);
            } else if client_cid == 0 {
                // Server to client: the client asked for no CID, so plain application data.
                assert_eq!(first_type(d), 23);
            } else {
                let client_cid = pair.client.connection_id().unwrap().to_vec();
                assert_eq!(first_type(d), 25);
                assert_eq!(&d.payload[11..14], &client_cid[..]);
            }
        }
    }
}

#[test]
fn connection_id_is_not_used_when_one_side_lacks_it() {
    let cases = [
        (mobility(Some(0), false, false), Mobility::default()),
        (Mobility::default(), mobility(Some(4), false, false)),
    ];
    for (c, s) in cases {
        let mut pair = Pair::new(with_client(c), with_server(s));
        let h = connect(&mut pair);
        assert_eq!(pair.client.connection_id(), None);
        assert_eq!(server_conn(&pair, h).connection_id(), None);
        let before = pair.log.len();
        exchange(&mut pair, h, "a", 2);
        assert_eq!(pair.server_data(), expected("c", &["a"], 2));
        assert!(pair.log[before..].iter().all(|d| first_type(d) == 23));
    }
}

/// Runs a session, moves the client to a new address, and checks the session goes on there
/// without a new handshake, every message delivered once.
fn assert_session_follows(mut pair: Pair, h: ConnectionHandle) -> Pair {
    exchange(&mut pair, h, "before", 3);
    let moved_to = addr("203.0.113.9:50000");
    pair.client_addr = moved_to;
    // What the server sends before any record from the new address arrived goes to the old
    // one: the client speaks first, as a client that moved does.
    pair.client.send(b"c-moved").unwrap();
    pair.elapse(SECOND);
    exchange(&mut pair, h, "after", 3);
    let mut want = expected("c", &["before"], 3);
    want.push(b"c-moved".to_vec());
    want.extend(expected("c", &["after"], 3));
    assert_eq!(pair.server_data(), want);
    assert_eq!(pair.client_data(), expected("s", &["before", "after"], 3));
    assert_eq!(server_path_changes(&pair), vec![moved_to]);
    assert_eq!(server_conn(&pair, h).remote(), moved_to);
    assert_eq!(pair.server.handle_for(moved_to), Some(h), "the address index follows");
    assert_eq!(pair.server.stats().connections_accepted, 1, "no new handshake");
    pair
}

#[test]
fn client_address_change_with_connection_id_keeps_the_session() {
    let mut pair =
        Pair::new(with_client(mobility(Some(0), false, false)), with_server(mobility(Some(4), false, false)));
    let h = connect(&mut pair);
    let pair = assert_session_follows(pair, h);
    assert_eq!(server_conn(&pair, h).mobility_stats().path_changes, 1);
}

#[test]
fn client_address_change_on_a_session_socket_keeps_the_session() {
    for versions in VERSIONS {
        client_address_change_on_a_session_socket_keeps_the_session_in(versions);
    }
}

fn client_address_change_on_a_session_socket_keeps_the_session_in(versions: Versions) {
    let mut pair = Pair::new(
        with_client_in(versions, mobility(None, false, true)),
        with_server_in(versions, mobility(None, false, true)),
    );
    pair.session_sockets(7000);
    let h = connect(&mut pair);
    assert_eq!(pair.client_summary().map(|c| c.version), Some(versions));
    let own = addr("198.51.100.1:7000");
    assert_eq!(server_conn(&pair, h).local(), Some(own));
    assert_eq!(pair.server.handle_for_local(own), Some(h));
    // The client followed the ServerHello to the session's port.
    assert_eq!(pair.client.remote(), own);
    assert_eq!(client_path_changes(&pair), vec![own]);
    // Everything the session sent, from its first flight on, left from its own socket.
    let hellos_answered = pair.log.iter().filter(|d| d.src.ip() == own.ip()).skip(1);
    assert!(hellos_answered.clone().all(|d| d.src == own), "{:?}", pair.log);
    assert_session_follows(pair, h);
}

#[test]
fn client_address_change_after_a_port_move_keeps_the_session() {
    for versions in VERSIONS {
        client_address_change_after_a_port_move_keeps_the_session_in(versions);
    }
}

fn client_address_change_after_a_port_move_keeps_the_session_in(versions: Versions) {
    let mut pair = Pair::new(
        with_client_in(versions, mobility(None, false, true)),
        with_server_in(versions, mobility(None, false, true)),
    );
    let h = connect(&mut pair);
    assert_eq!(pair.client_summary().map(|c| c.version), Some(versions));
    let new_port = addr("198.51.100.1:7100");
    pair.server.move_to(h, new_port).unwrap();
    pair.elapse(5 * SECOND);
    assert_eq!(pair.client.remote(), new_port);
    assert_eq!(server_conn(&pair, h).local(), Some(new_port));
    assert_session_follows(pair, h);
}

#[test]
fn standard_session_does_not_move() {
    let mut pair = Pair::new(client_config(), server_config());
    let h = connect(&mut pair);
    exchange(&mut pair, h, "before", 2);
    let old = pair.client_addr;
    pair.client_addr = addr("203.0.113.9:50000");
    pair.client.send(b"from elsewhere").unwrap();
    pair.elapse(SECOND);
    assert_eq!(pair.server_data(), expected("c", &["before"], 2), "nothing from the new address");
    assert!(server_path_changes(&pair).is_empty());
    assert_eq!(server_conn(&pair, h).remote(), old);
    assert_eq!(pair.server.handle_for(pair.client_addr), None);
}

#[test]
fn replayed_record_from_a_new_address_does_not_move_the_session() {
    let mut pair =
        Pair::new(with_client(mobility(Some(0), false, false)), with_server(mobility(Some(4), false, false)));
    let h = connect(&mut pair);
    let before = pair.log.len();
    exchange(&mut pair, h, "a", 2);
    let captured: Vec<Datagram> =
        pair.log[before..].iter().filter(|d| d.dst.ip() == pair.server_addr.ip()).cloned().collect();
    assert!(!captured.is_empty());
    let attacker = addr("203.0.113.66:666");
    for d in captured {
        pair.inject(attacker, d.dst, d.payload);
    }
    pair.elapse(SECOND);
    assert!(server_path_changes(&pair).is_empty());
    assert_eq!(server_conn(&pair, h).remote(), pair.client_addr);
    assert_eq!(pair.server_data(), expected("c", &["a"], 2), "replays are not delivered");
}

/// Client and server with CID and rrc, connected.
fn rrc_pair() -> (Pair, ConnectionHandle) {
    let mut pair =
        Pair::new(with_client(mobility(Some(0), true, false)), with_server(mobility(Some(4), true, false)));
    let h = connect(&mut pair);
    assert_eq!(
        pair.client.negotiated_mobility(),
        NegotiatedMobility { connection_id: true, return_routability: true, port_move: false }
    );
    (pair, h)
}

#[test]
fn spoofed_address_change_is_checked_and_the_session_stays_with_the_client() {
    let (mut pair, h) = rrc_pair();
    exchange(&mut pair, h, "before", 2);
    // The client's next record is copied by an attacker and arrives first from another source.
    let spoofed = addr("203.0.113.66:666");
    pair.client.send(b"c-fresh").unwrap();
    pair.collect();
    let [genuine]: [Datagram; 1] = pair.take_in_flight().try_into().expect("one datagram on its way");
    let received_from_spoofed = genuine.payload.len() as u64;
    pair.inject(spoofed, genuine.dst, genuine.payload.clone());
    pair.inject(genuine.src, genuine.dst, genuine.payload);
    // The server has data for the client meanwhile.
    for i in 0..5 {
        pair.server.send(h, format!("s-during-{i}").as_bytes()).unwrap();
        pair.elapse(Duration::from_millis(20));
    }
    pair.elapse(60 * SECOND);
    let sent_to_spoofed =
        pair.log.iter().filter(|d| d.dst == spoofed).map(|d| d.payload.len() as u64).sum::<u64>();
    assert!(sent_to_spoofed > 0, "the new address was challenged");
    assert!(
        sent_to_spoofed <= 3 * received_from_spoofed,
        "{sent_to_spoofed} B sent to an unverified address that sent {received_from_spoofed} B"
    );
    let stats = server_conn(&pair, h).mobility_stats();
    assert_eq!(stats.path_validations_failed, 1);
    assert!(stats.path_challenges_sent >= 1);
    assert!(server_path_changes(&pair).is_empty());
    assert_eq!(server_conn(&pair, h).remote(), pair.client_addr);
    // Still talking to the client: the held data reached it, and new data flows both ways.
    exchange(&mut pair, h, "after", 2);
    let mut want = expected("c", &["before"], 2);
    want.push(b"c-fresh".to_vec());
    want.extend(expected("c", &["after"], 2));
    assert_eq!(pair.server_data(), want);
    let got = pair.client_data();
    for i in 0..5 {
        assert!(got.contains(&format!("s-during-{i}").into_bytes()), "held data delivered: {got:?}");
    }
    assert!(got.ends_with(&expected("s", &["after"], 2)));
}

#[test]
fn return_routability_check_validates_a_real_move_and_lifts_the_cap() {
    let (mut pair, h) = rrc_pair();
    exchange(&mut pair, h, "before", 2);
    let moved_to = addr("203.0.113.9:50000");
    pair.client_addr = moved_to;
    pair.client.send(b"c-moved").unwrap();
    pair.elapse(2 * SECOND);
    assert_eq!(server_path_changes(&pair), vec![moved_to]);
    assert_eq!(server_conn(&pair, h).remote(), moved_to);
    assert!(server_conn(&pair, h).mobility_stats().path_challenges_sent >= 1);
    assert!(pair.client.mobility_stats().path_responses_sent >= 1);
    // Validated: far more than 3x what the client sent from there now goes to it.
    let received: u64 = pair.log.iter().filter(|d| d.src == moved_to).map(|d| d.payload.len() as u64).sum();
    let big = vec![0x5a; 1000];
    for _ in 0..10 {
        pair.server.send(h, &big).unwrap();
    }
    pair.elapse(SECOND);
    let sent: u64 = pair.log.iter().filter(|d| d.dst == moved_to).map(|d| d.payload.len() as u64).sum();
    assert!(sent > 3 * received, "cap lifted: {sent} B sent, {received} B received");
    assert_eq!(pair.client_data().iter().filter(|d| **d == big).count(), 10);
    assert_eq!(server_conn(&pair, h).mobility_stats().bytes_dropped_by_amplification_limit, 0);
}

#[test]
fn port_announcement_is_resent_until_the_client_uses_the_new_port() {
    for versions in VERSIONS {
        port_announcement_is_resent_until_the_client_uses_the_new_port_in(versions);
    }
}

fn port_announcement_is_resent_until_the_client_uses_the_new_port_in(versions: Versions) {
    let mut pair = Pair::new(
        with_client_in(versions, mobility(None, false, true)),
        with_server_in(versions, mobility(None, false, true)),
    );
    let h = connect(&mut pair);
    exchange(&mut pair, h, "before", 2);
    let new_port = addr("198.51.100.1:7100");
    // The first three server datagrams after the move (the announcements) are lost.
    let mut lost = 0;
    pair.filter = net::drop_if(move |d| {
        if d.src.ip() == "198.51.100.1".parse::<std::net::IpAddr>().unwrap() && lost < 3 {
            lost += 1;
            return true;
        }
        false
    });
    let mark = pair.log.len();
    pair.server.move_to(h, new_port).unwrap();
    pair.elapse(3 * SECOND);
    // Until the client used the new port, the server kept sending from where it did.
    assert!(pair.log[mark..]
        .iter()
        .filter(|d| d.src.ip() == new_port.ip())
        .take(3)
        .all(|d| d.src == pair.server_addr));
    pair.elapse(30 * SECOND);
    assert!(server_conn(&pair, h).mobility_stats().port_announcements_sent >= 4);
    assert_eq!(pair.client.remote(), new_port);
    assert_eq!(client_path_changes(&pair), vec![new_port]);
    assert_eq!(server_conn(&pair, h).local(), Some(new_port));
    let mark = pair.log.len();
    exchange(&mut pair, h, "after", 2);
    for d in &pair.log[mark..] {
        if d.src.ip() == new_port.ip() {
            assert_eq!(d.src, new_port, "the session sends from its new socket");
        } else {
            assert_eq!(d.dst, new_port, "the client sends to it");
        }
    }
    assert_eq!(pair.server_data(), expected("c", &["before", "after"], 2));
    assert_eq!(pair.client_data(), expected("s", &["before", "after"], 2));
}

#[test]
fn move_to_needs_port_move_and_an_established_session() {
    for versions in VERSIONS {
        move_to_needs_port_move_and_an_established_session_in(versions);
    }
}

fn move_to_needs_port_move_and_an_established_session_in(versions: Versions) {
    let mut pair = Pair::new(
        ClientConfig { versions, ..client_config() },
        with_server_in(versions, mobility(None, false, true)),
    );
    let h = connect(&mut pair);
    assert!(pair.server.move_to(h, addr("198.51.100.1:7100")).is_err());
}

#[test]
fn damaged_connection_id_records_never_move_a_session() {
    let (mut pair, h) = rrc_pair();
    let before = pair.log.len();
    exchange(&mut pair, h, "a", 1);
    let sample = pair.log[before..].iter().find(|d| d.dst.ip() == pair.server_addr.ip()).unwrap().clone();
    assert_eq!(first_type(&sample), 25);
    let stranger = addr("203.0.113.66:666");
    let mut variants = Vec::new();
    for len in 0..sample.payload.len() {
        variants.push(sample.payload[..len].to_vec());
    }
    for bit in 0..sample.payload.len() * 8 {
        let mut d = sample.payload.clone();
        d[bit / 8] ^= 1 << (bit % 8);
        variants.push(d);
    }
    for payload in variants {
        pair.inject(stranger, pair.server_addr, payload);
    }
    pair.elapse(10 * SECOND);
    assert!(server_path_changes(&pair).is_empty());
    assert_eq!(server_conn(&pair, h).remote(), pair.client_addr);
    assert_eq!(server_conn(&pair, h).mobility_stats().path_challenges_sent, 0);
    assert_eq!(pair.server.stats().connections_open, 1);
    exchange(&mut pair, h, "b", 1);
    assert_eq!(pair.server_data(), expected("c", &["a", "b"], 1));
}

#[test]
fn session_socket_keeps_its_port_when_its_first_flight_is_lost() {
    for versions in VERSIONS {
        session_socket_keeps_its_port_when_its_first_flight_is_lost_in(versions);
    }
}

fn session_socket_keeps_its_port_when_its_first_flight_is_lost_in(versions: Versions) {
    let mut pair = Pair::new(
        with_client_in(versions, mobility(None, false, true)),
        with_server_in(versions, mobility(None, false, true)),
    );
    pair.session_sockets(7000);
    let own = addr("198.51.100.1:7000");
    let mut dropped = false;
    pair.filter = net::drop_if(move |d| {
        let first = d.src == own && !dropped;
        dropped |= first;
        first
    });
    let h = connect(&mut pair);
    assert_eq!(pair.client.remote(), own);
    assert_eq!(client_path_changes(&pair), vec![own]);
    // The first flight was resent (the client's ClientHello went to the listening port again),
    // from the session's own socket as before.
    let from_server: Vec<_> = pair.log.iter().filter(|d| d.src.ip() == own.ip()).collect();
    assert!(from_server.len() > 3);
    assert!(from_server[1..].iter().all(|d| d.src == own), "{from_server:?}");
    assert_eq!(pair.server.stats().connections_accepted, 1);
    exchange(&mut pair, h, "a", 2);
    assert_eq!(pair.server_data(), expected("c", &["a"], 2));
}

#[test]
fn resumed_session_negotiates_the_connection_id_again() {
    use fastshake_dtls::{TicketKeys, WallClock};
    let clock = Some(WallClock { at: Instant::ZERO, unix_secs: 1_800_000_000 });
    let server = ServerConfig {
        tickets: Some(TicketKeys::new(1, [7; 16])),
        wall_clock: clock,
        ..with_server(mobility(Some(4), false, false))
    };
    let client = with_client(mobility(Some(0), false, false));
    let mut pair = Pair::new(client.clone(), server);
    connect(&mut pair);
    let session = pair.client_events.iter().find_map(|e| match e {
        Event::Connected(s) => s.session.clone(),
        _ => None,
    });
    assert!(session.is_some(), "a ticket was issued");
    pair.client_addr = addr("192.0.2.1:40001");
    pair.resume_client(client, session, 9);
    pair.server_events.clear();
    let h = connect(&mut pair);
    let resumed = pair.client_events.iter().any(|e| matches!(e, Event::Connected(s) if s.resumed));
    assert!(resumed);
    let server_cid = server_conn(&pair, h).connection_id().expect("negotiated again").to_vec();
    assert_eq!(server_cid.len(), 4);
    let mark = pair.log.len();
    exchange(&mut pair, h, "a", 2);
    assert_eq!(pair.server_data(), expected("c", &["a"], 2));
    for d in pair.log[mark..].iter().filter(|d| d.dst.ip() == pair.server_addr.ip()) {
        assert_eq!((first_type(d), &d.payload[11..15]), (25, &server_cid[..]));
    }
}

/// While a new address is checked, data goes to it at once (within its 3x allowance), so a real
/// move costs no round trip; a copy goes to the address in use, in case the move was spoofed.
#[test]
fn data_reaches_a_new_address_while_it_is_checked_and_a_copy_the_old_one() {
    let (mut pair, h) = rrc_pair();
    exchange(&mut pair, h, "before", 2);
    let old = pair.client_addr;
    let moved_to = addr("203.0.113.9:50000");
    pair.client_addr = moved_to;
    pair.client.send(b"c-moved").unwrap();
    pair.collect();
    // From now on the old address is gone and nothing of the client's reaches the server, so
    // the check cannot complete: only the allowance lets data through.
    pair.filter = net::drop_if(move |d| d.dst == old || d.src == moved_to);
    let delay = pair.delay;
    pair.elapse(delay);
    assert_eq!(pair.server_data().last(), Some(&b"c-moved".to_vec()));
    let wire_before = pair.log.len();
    pair.server.send(h, b"s-reply").unwrap();
    pair.elapse(delay * 3);
    assert!(pair.client_data().contains(&b"s-reply".to_vec()), "data reached the new address unchecked");
    assert_eq!(server_conn(&pair, h).remote(), old, "not moved before the check completes");
    let received: u64 = pair.log.iter().filter(|d| d.src == moved_to).map(|d| d.payload.len() as u64).sum();
    let to_new: Vec<&Datagram> = pair.log.iter().filter(|d| d.dst == moved_to).collect();
    let sent: u64 = to_new.iter().map(|d| d.payload.len() as u64).sum();
    assert!(sent <= 3 * received, "{sent} B sent to an unverified address that sent {received} B");
    let reply_copies = pair.log[wire_before..].iter().filter(|d| d.src != moved_to).count();
    assert_eq!(reply_copies, 2, "the reply went to the new address and, as a copy, to the old one");
    assert!(pair.log[wire_before..].iter().any(|d| d.dst == old));
    assert!(server_conn(&pair, h).mobility_stats().bytes_copied_during_checks > 0);
}

/// Every strategy keeps its session across a move when the round trip (3 s) is longer than the
/// retransmission timer and late copies of every datagram keep arriving: copies of old flights,
/// of path challenges and of port announcements change nothing, and every message arrives once.
#[test]
fn late_copies_of_every_datagram_change_no_session_of_any_strategy() {
    for versions in VERSIONS {
        late_copies_of_every_datagram_change_no_session_of_any_strategy_in(versions);
    }
}

fn late_copies_of_every_datagram_change_no_session_of_any_strategy_in(versions: Versions) {
    // (name, client mobility, server mobility, IPC session sockets, TCS port move)
    let cases = [
        ("cid+rrc", mobility(Some(0), true, false), mobility(Some(4), true, false), false, false),
        ("ipc", mobility(None, false, true), mobility(None, false, true), true, false),
        ("tcs", mobility(None, false, true), mobility(None, false, true), false, true),
    ];
    for (name, c, s, ipc, tcs) in cases {
        let mut client = with_client_in(versions, c);
        client.handshake_timeout = 300 * SECOND;
        let mut server = with_server_in(versions, s);
        server.handshake_timeout = 300 * SECOND;
        let mut pair = Pair::new(client, server);
        if ipc {
            pair.session_sockets(7000);
        }
        pair.delay = Duration::from_millis(1_500);
        let mut n = 0u64;
        pair.filter = Box::new(move |_| {
            n += 1;
            Fate::DuplicateLate(Duration::from_millis(n * 7_919 % 6_000))
        });
        pair.elapse(120 * SECOND);
        assert!(pair.client.is_established(), "{name}: {:?}", pair.client_events);
        let h = pair
            .server_events
            .iter()
            .find_map(|(h, e)| matches!(e, Event::Connected(_)).then_some(*h))
            .unwrap_or_else(|| panic!("{name}: server connected: {:?}", pair.server_events));
        if tcs {
            pair.server.move_to(h, addr("198.51.100.1:7100")).unwrap();
            pair.elapse(30 * SECOND);
        }
        for round in ["before", "after"] {
            if round == "after" {
                pair.client_addr = addr("203.0.113.9:50000");
            }
            for i in 0..3 {
                pair.client.send(format!("c-{round}-{i}").as_bytes()).unwrap();
                pair.elapse(SECOND);
            }
            pair.elapse(20 * SECOND);
            for i in 0..3 {
                pair.server.send(h, format!("s-{round}-{i}").as_bytes()).unwrap();
                pair.elapse(SECOND);
            }
            pair.elapse(20 * SECOND);
        }
        assert_eq!(pair.server_data(), expected("c", &["before", "after"], 3), "{name}");
        assert_eq!(pair.client_data(), expected("s", &["before", "after"], 3), "{name}");
        assert_eq!(pair.server.stats().connections_accepted, 1, "{name}: one handshake");
        assert!(server_conn(&pair, h).is_established() && pair.client.is_established(), "{name}");
        assert_eq!(server_conn(&pair, h).remote(), addr("203.0.113.9:50000"), "{name}: the session followed");
    }
}

/// The socket strategy of seed 001, decided in one place for every driver: what each mode does
/// with a session's sockets after each of its events.
#[test]
fn the_socket_strategy_decides_per_mode_and_client() {
    for versions in VERSIONS {
        the_socket_strategy_decides_per_mode_and_client_in(versions);
    }
}

fn the_socket_strategy_decides_per_mode_and_client_in(versions: Versions) {
    use fastshake_dtls::{MobilityMode, SocketAction};
    for mode in MobilityMode::ALL {
        for follows in [true, false] {
            let client = if follows { mode.client_mobility() } else { Mobility::default() };
            let mut pair =
                Pair::new(with_client_in(versions, client), with_server_in(versions, mode.server_mobility()));
            pair.elapse(5 * SECOND);
            let mut actions = Vec::new();
            for (h, e) in &pair.server_events {
                let Some(conn) = pair.server.connection(*h) else { continue };
                if let Some(action) = mode.socket_action(e, conn) {
                    actions.push((format!("{e:?}").split('(').next().unwrap().to_owned(), action));
                }
            }
            let names: Vec<(&str, &SocketAction)> = actions.iter().map(|(e, a)| (e.as_str(), a)).collect();
            let stay = SocketAction::StayOnWelcomePort("the client did not offer port_move");
            let client_addr = pair.client_addr;
            match (mode, follows) {
                (MobilityMode::Ipc, true) => assert_eq!(names, vec![("Accepted", &SocketAction::OpenOwn)]),
                (MobilityMode::Ipc, false) => assert_eq!(names, vec![("Accepted", &stay)]),
                (MobilityMode::Tcs, true) => assert_eq!(
                    names,
                    vec![
                        ("Accepted", &SocketAction::OpenTemporary { client: client_addr }),
                        ("Connected", &SocketAction::MoveToOwn)
                    ]
                ),
                (MobilityMode::Tcs, false) => assert_eq!(
                    names,
                    vec![
                        ("Accepted", &SocketAction::OpenTemporary { client: client_addr }),
                        ("Connected", &stay)
                    ]
                ),
                (MobilityMode::Standard | MobilityMode::Cid, _) => {
                    assert!(names.is_empty(), "{mode}: {names:?}")
                }
            }
        }
    }
}

#[test]
fn issued_connection_ids_start_with_the_endpoint_prefix() {
    for prefix in [&[0xa7u8][..], &[1, 2]] {
        let mut pair = Pair::new(
            with_client(mobility(Some(0), false, false)),
            with_server(mobility(Some(8), false, false)),
        );
        pair.server.set_cid_prefix(prefix);
        let h = connect(&mut pair);
        let cid = server_conn(&pair, h).connection_id().expect("negotiated").to_vec();
        assert_eq!(cid.len(), 8);
        assert_eq!(&cid[..prefix.len()], prefix);
        // The prefix routes, the random rest still tells sessions apart: the session works.
        exchange(&mut pair, h, "a", 2);
        assert_eq!(pair.server_data(), expected("c", &["a"], 2));
    }
}
