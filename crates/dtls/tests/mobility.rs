//! Session mobility on virtual time: Connection IDs (RFC 9146), the return-routability check
//! (RFC 9853), session sockets (IPC) and port moves (TCS), between an in-memory client and
//! endpoint whose addresses the test changes.

mod common;

use common::{client_config, server_config};
use fastshake_dtls::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, Event, Instant, Mobility, ServerConfig,
};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
struct Datagram {
    src: SocketAddr,
    dst: SocketAddr,
    payload: Vec<u8>,
}

/// Decides whether a datagram is lost on the way.
type Loss = Box<dyn FnMut(&Datagram) -> bool>;
/// Decides whether (and how much later) a copy of a datagram arrives again.
type LateCopy = Box<dyn FnMut(&Datagram) -> Option<Duration>>;

/// A client and a server endpoint joined by a network of one-way delay. Datagrams reach the
/// server at any address of its IP, the client only at its current address; the rest is
/// recorded per destination and lost.
struct Net {
    now: Instant,
    client: Connection,
    server: Endpoint,
    client_addr: SocketAddr,
    listen: SocketAddr,
    /// IPC: give every accepted session its own socket (next port from here).
    ipc_next_port: Option<u16>,
    delay: Duration,
    loss: Loss,
    /// A datagram for which this gives a duration arrives again that much later.
    late_copy: LateCopy,
    in_flight: VecDeque<(Instant, Datagram)>,
    client_events: Vec<Event>,
    server_events: Vec<(ConnectionHandle, Event)>,
    /// Every datagram sent, in order.
    wire: Vec<Datagram>,
    /// Bytes that arrived at addresses nobody listens on (e.g. a spoofed source).
    lost_at: BTreeMap<SocketAddr, u64>,
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

const SECOND: Duration = Duration::from_secs(1);

impl Net {
    fn new(client: ClientConfig, server: ServerConfig) -> Net {
        let listen = addr("198.51.100.1:5684");
        let now = Instant::from_millis(1_000);
        Net {
            now,
            client: Connection::client(Arc::new(client), now, listen, [1; 32]),
            server: Endpoint::new(Arc::new(server), [2; 32]),
            client_addr: addr("192.0.2.1:40000"),
            listen,
            ipc_next_port: None,
            delay: Duration::from_millis(10),
            loss: Box::new(|_| false),
            late_copy: Box::new(|_| None),
            in_flight: VecDeque::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            wire: Vec::new(),
            lost_at: BTreeMap::new(),
        }
    }

    fn send(&mut self, d: Datagram) {
        self.wire.push(d.clone());
        if (self.loss)(&d) {
            return;
        }
        let on_time = self.now + self.delay;
        if let Some(extra) = (self.late_copy)(&d) {
            self.arrive_at(on_time + extra, d.clone());
        }
        self.arrive_at(on_time, d);
    }

    /// Files `d` to arrive at `at`, after whatever arrives then or earlier.
    fn arrive_at(&mut self, at: Instant, d: Datagram) {
        let i = self.in_flight.partition_point(|(t, _)| *t <= at);
        self.in_flight.insert(i, (at, d));
    }

    fn collect(&mut self) {
        // Events first: an IPC driver gives a new session its socket before its first flight.
        while let Some((h, e)) = self.server.poll_event() {
            if e == Event::Accepted {
                if let Some(port) = self.ipc_next_port.as_mut() {
                    self.server.set_local(h, SocketAddr::new(self.listen.ip(), *port));
                    *port += 1;
                }
            }
            self.server_events.push((h, e));
        }
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        while let Some(t) = self.client.poll_transmit(self.now) {
            let d = Datagram { src: self.client_addr, dst: t.dst, payload: t.payload };
            self.send(d);
        }
        while let Some(t) = self.server.poll_transmit(self.now) {
            let d = Datagram { src: t.src.unwrap_or(self.listen), dst: t.dst, payload: t.payload };
            self.send(d);
        }
        while let Some((h, e)) = self.server.poll_event() {
            self.server_events.push((h, e));
        }
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
    }

    /// Hands `d` to whoever listens at its destination.
    fn arrive(&mut self, mut d: Datagram) {
        if d.dst.ip() == self.listen.ip() {
            self.server.handle_datagram(self.now, d.dst, d.src, &mut d.payload);
        } else if d.dst == self.client_addr {
            self.client.handle_datagram(self.now, d.src, &mut d.payload);
        } else {
            *self.lost_at.entry(d.dst).or_default() += d.payload.len() as u64;
        }
        self.collect();
    }

    /// Runs the network and the timers for `span` of virtual time.
    fn run_for(&mut self, span: Duration) {
        let limit = self.now + span;
        loop {
            self.collect();
            let arrival = self.in_flight.front().map(|(t, _)| *t);
            let timer = [self.client.poll_timeout(), self.server.poll_timeout()].into_iter().flatten().min();
            let Some(next) = [arrival, timer].into_iter().flatten().min() else { break };
            if next > limit {
                break;
            }
            self.now = self.now.max(next);
            while self.in_flight.front().is_some_and(|(t, _)| *t <= self.now) {
                let (_, d) = self.in_flight.pop_front().unwrap();
                self.arrive(d);
            }
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
            }
        }
        self.now = self.now.max(limit);
        self.collect();
    }

    fn handshake(&mut self) -> ConnectionHandle {
        self.run_for(5 * SECOND);
        assert!(self.client.is_established(), "client connected: {:?}", self.client_events);
        let h = self
            .server_events
            .iter()
            .find_map(|(h, e)| matches!(e, Event::Connected(_)).then_some(*h))
            .expect("server connected");
        assert!(self.server.connection(h).unwrap().is_established());
        h
    }

    fn server_conn(&self, h: ConnectionHandle) -> &Connection {
        self.server.connection(h).expect("session still there")
    }

    fn server_data(&self) -> Vec<Vec<u8>> {
        let data = self.server_events.iter().filter_map(|(_, e)| match e {
            Event::ApplicationData(d) => Some(d.clone()),
            _ => None,
        });
        data.collect()
    }

    fn client_data(&self) -> Vec<Vec<u8>> {
        let data = self.client_events.iter().filter_map(|e| match e {
            Event::ApplicationData(d) => Some(d.clone()),
            _ => None,
        });
        data.collect()
    }

    fn server_path_changes(&self) -> Vec<SocketAddr> {
        let changes = self.server_events.iter().filter_map(|(_, e)| match e {
            Event::PathChanged(a) => Some(*a),
            _ => None,
        });
        changes.collect()
    }

    fn client_path_changes(&self) -> Vec<SocketAddr> {
        let changes = self.client_events.iter().filter_map(|e| match e {
            Event::PathChanged(a) => Some(*a),
            _ => None,
        });
        changes.collect()
    }

    /// Sends `n` numbered messages each way, tagged with `tag`, and lets them arrive.
    fn exchange(&mut self, h: ConnectionHandle, tag: &str, n: usize) {
        for i in 0..n {
            self.client.send(format!("c-{tag}-{i}").as_bytes()).unwrap();
            self.server.send(h, format!("s-{tag}-{i}").as_bytes()).unwrap();
            self.run_for(Duration::from_millis(50));
        }
        self.run_for(SECOND);
    }
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
        let mut net = Net::new(
            with_client(mobility(Some(client_cid), false, false)),
            with_server(mobility(Some(4), false, false)),
        );
        let h = net.handshake();
        let server_cid = net.server_conn(h).connection_id().expect("negotiated").to_vec();
        assert_eq!(server_cid.len(), 4);
        assert_eq!(net.client.connection_id().map(<[u8]>::len), Some(client_cid as usize));
        assert_eq!(net.client.negotiated_mobility(), (true, false, false));
        let before = net.wire.len();
        net.exchange(h, "a", 3);
        assert_eq!(net.server_data(), expected("c", &["a"], 3));
        assert_eq!(net.client_data(), expected("s", &["a"], 3));
        for d in &net.wire[before..] {
            if d.dst.ip() == net.listen.ip() {
                // Client to server: tls12_cid, epoch 1, the server's CID right after the sequence number.
                assert_eq!(first_type(d), 25, "{d:?}");
                assert_eq!(&d.payload[3..5], &[0, 1]);
                assert_eq!(&d.payload[11..15], &server_cid[..]);
            } else if client_cid == 0 {
                // Server to client: the client asked for no CID, so plain application data.
                assert_eq!(first_type(d), 23);
            } else {
                let client_cid = net.client.connection_id().unwrap().to_vec();
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
        let mut net = Net::new(with_client(c), with_server(s));
        let h = net.handshake();
        assert_eq!(net.client.connection_id(), None);
        assert_eq!(net.server_conn(h).connection_id(), None);
        let before = net.wire.len();
        net.exchange(h, "a", 2);
        assert_eq!(net.server_data(), expected("c", &["a"], 2));
        assert!(net.wire[before..].iter().all(|d| first_type(d) == 23));
    }
}

/// Runs a session, moves the client to a new address, and checks the session goes on there
/// without a new handshake, every message delivered once.
fn assert_session_follows(mut net: Net, h: ConnectionHandle) -> Net {
    net.exchange(h, "before", 3);
    let moved_to = addr("203.0.113.9:50000");
    net.client_addr = moved_to;
    // What the server sends before any record from the new address arrived goes to the old
    // one: the client speaks first, as a client that moved does.
    net.client.send(b"c-moved").unwrap();
    net.run_for(SECOND);
    net.exchange(h, "after", 3);
    let mut want = expected("c", &["before"], 3);
    want.push(b"c-moved".to_vec());
    want.extend(expected("c", &["after"], 3));
    assert_eq!(net.server_data(), want);
    assert_eq!(net.client_data(), expected("s", &["before", "after"], 3));
    assert_eq!(net.server_path_changes(), vec![moved_to]);
    assert_eq!(net.server_conn(h).remote(), moved_to);
    assert_eq!(net.server.handle_for(moved_to), Some(h), "the address index follows");
    assert_eq!(net.server.stats().connections_accepted, 1, "no new handshake");
    net
}

#[test]
fn client_address_change_with_connection_id_keeps_the_session() {
    let mut net =
        Net::new(with_client(mobility(Some(0), false, false)), with_server(mobility(Some(4), false, false)));
    let h = net.handshake();
    let net = assert_session_follows(net, h);
    assert_eq!(net.server_conn(h).mobility_stats().path_changes, 1);
}

#[test]
fn client_address_change_on_a_session_socket_keeps_the_session() {
    let mut net =
        Net::new(with_client(mobility(None, false, true)), with_server(mobility(None, false, true)));
    net.ipc_next_port = Some(7000);
    let h = net.handshake();
    let own = addr("198.51.100.1:7000");
    assert_eq!(net.server_conn(h).local(), Some(own));
    assert_eq!(net.server.handle_for_local(own), Some(h));
    // The client followed the ServerHello to the session's port.
    assert_eq!(net.client.remote(), own);
    assert_eq!(net.client_path_changes(), vec![own]);
    // Everything the session sent, from its first flight on, left from its own socket.
    let hellos_answered = net.wire.iter().filter(|d| d.src.ip() == own.ip()).skip(1);
    assert!(hellos_answered.clone().all(|d| d.src == own), "{:?}", net.wire);
    assert_session_follows(net, h);
}

#[test]
fn client_address_change_after_a_port_move_keeps_the_session() {
    let mut net =
        Net::new(with_client(mobility(None, false, true)), with_server(mobility(None, false, true)));
    let h = net.handshake();
    let new_port = addr("198.51.100.1:7100");
    net.server.move_to(h, new_port).unwrap();
    net.run_for(5 * SECOND);
    assert_eq!(net.client.remote(), new_port);
    assert_eq!(net.server_conn(h).local(), Some(new_port));
    assert_session_follows(net, h);
}

#[test]
fn standard_session_does_not_move() {
    let mut net = Net::new(client_config(), server_config());
    let h = net.handshake();
    net.exchange(h, "before", 2);
    let old = net.client_addr;
    net.client_addr = addr("203.0.113.9:50000");
    net.client.send(b"from elsewhere").unwrap();
    net.run_for(SECOND);
    assert_eq!(net.server_data(), expected("c", &["before"], 2), "nothing from the new address");
    assert!(net.server_path_changes().is_empty());
    assert_eq!(net.server_conn(h).remote(), old);
    assert_eq!(net.server.handle_for(net.client_addr), None);
}

#[test]
fn replayed_record_from_a_new_address_does_not_move_the_session() {
    let mut net =
        Net::new(with_client(mobility(Some(0), false, false)), with_server(mobility(Some(4), false, false)));
    let h = net.handshake();
    let before = net.wire.len();
    net.exchange(h, "a", 2);
    let captured: Vec<Datagram> =
        net.wire[before..].iter().filter(|d| d.dst.ip() == net.listen.ip()).cloned().collect();
    assert!(!captured.is_empty());
    let attacker = addr("203.0.113.66:666");
    for mut d in captured {
        d.src = attacker;
        net.arrive(d);
    }
    net.run_for(SECOND);
    assert!(net.server_path_changes().is_empty());
    assert_eq!(net.server_conn(h).remote(), net.client_addr);
    assert_eq!(net.server_data(), expected("c", &["a"], 2), "replays are not delivered");
}

/// Client and server with CID and rrc, connected.
fn rrc_pair() -> (Net, ConnectionHandle) {
    let mut net =
        Net::new(with_client(mobility(Some(0), true, false)), with_server(mobility(Some(4), true, false)));
    let h = net.handshake();
    assert_eq!(net.client.negotiated_mobility(), (true, true, false));
    (net, h)
}

#[test]
fn spoofed_address_change_is_checked_and_the_session_stays_with_the_client() {
    let (mut net, h) = rrc_pair();
    net.exchange(h, "before", 2);
    // The client's next record is copied by an attacker and arrives first from another source.
    let spoofed = addr("203.0.113.66:666");
    net.client.send(b"c-fresh").unwrap();
    net.collect();
    let genuine = net.in_flight.pop_back().unwrap().1;
    let received_from_spoofed = genuine.payload.len() as u64;
    net.arrive(Datagram { src: spoofed, ..genuine.clone() });
    net.arrive(genuine);
    // The server has data for the client meanwhile.
    for i in 0..5 {
        net.server.send(h, format!("s-during-{i}").as_bytes()).unwrap();
        net.run_for(Duration::from_millis(20));
    }
    net.run_for(60 * SECOND);
    let sent_to_spoofed =
        net.wire.iter().filter(|d| d.dst == spoofed).map(|d| d.payload.len() as u64).sum::<u64>();
    assert!(sent_to_spoofed > 0, "the new address was challenged");
    assert!(
        sent_to_spoofed <= 3 * received_from_spoofed,
        "{sent_to_spoofed} B sent to an unverified address that sent {received_from_spoofed} B"
    );
    let stats = net.server_conn(h).mobility_stats();
    assert_eq!(stats.path_validations_failed, 1);
    assert!(stats.path_challenges_sent >= 1);
    assert!(net.server_path_changes().is_empty());
    assert_eq!(net.server_conn(h).remote(), net.client_addr);
    // Still talking to the client: the held data reached it, and new data flows both ways.
    net.exchange(h, "after", 2);
    let mut want = expected("c", &["before"], 2);
    want.push(b"c-fresh".to_vec());
    want.extend(expected("c", &["after"], 2));
    assert_eq!(net.server_data(), want);
    let got = net.client_data();
    for i in 0..5 {
        assert!(got.contains(&format!("s-during-{i}").into_bytes()), "held data delivered: {got:?}");
    }
    assert!(got.ends_with(&expected("s", &["after"], 2)));
}

#[test]
fn return_routability_check_validates_a_real_move_and_lifts_the_cap() {
    let (mut net, h) = rrc_pair();
    net.exchange(h, "before", 2);
    let moved_to = addr("203.0.113.9:50000");
    net.client_addr = moved_to;
    net.client.send(b"c-moved").unwrap();
    net.run_for(2 * SECOND);
    assert_eq!(net.server_path_changes(), vec![moved_to]);
    assert_eq!(net.server_conn(h).remote(), moved_to);
    assert!(net.server_conn(h).mobility_stats().path_challenges_sent >= 1);
    assert!(net.client.mobility_stats().path_responses_sent >= 1);
    // Validated: far more than 3x what the client sent from there now goes to it.
    let received: u64 = net.wire.iter().filter(|d| d.src == moved_to).map(|d| d.payload.len() as u64).sum();
    let big = vec![0x5a; 1000];
    for _ in 0..10 {
        net.server.send(h, &big).unwrap();
    }
    net.run_for(SECOND);
    let sent: u64 = net.wire.iter().filter(|d| d.dst == moved_to).map(|d| d.payload.len() as u64).sum();
    assert!(sent > 3 * received, "cap lifted: {sent} B sent, {received} B received");
    assert_eq!(net.client_data().iter().filter(|d| **d == big).count(), 10);
    assert_eq!(net.server_conn(h).mobility_stats().bytes_dropped_by_amplification_limit, 0);
}

#[test]
fn port_announcement_is_resent_until_the_client_uses_the_new_port() {
    let mut net =
        Net::new(with_client(mobility(None, false, true)), with_server(mobility(None, false, true)));
    let h = net.handshake();
    net.exchange(h, "before", 2);
    let new_port = addr("198.51.100.1:7100");
    // The first three server datagrams after the move (the announcements) are lost.
    let mut lost = 0;
    net.loss = Box::new(move |d| {
        if d.src.ip() == "198.51.100.1".parse::<std::net::IpAddr>().unwrap() && lost < 3 {
            lost += 1;
            return true;
        }
        false
    });
    let mark = net.wire.len();
    net.server.move_to(h, new_port).unwrap();
    net.run_for(3 * SECOND);
    // Until the client used the new port, the server kept sending from where it did.
    assert!(net.wire[mark..]
        .iter()
        .filter(|d| d.src.ip() == new_port.ip())
        .take(3)
        .all(|d| d.src == net.listen));
    net.run_for(30 * SECOND);
    assert!(net.server_conn(h).mobility_stats().port_announcements_sent >= 4);
    assert_eq!(net.client.remote(), new_port);
    assert_eq!(net.client_path_changes(), vec![new_port]);
    assert_eq!(net.server_conn(h).local(), Some(new_port));
    let mark = net.wire.len();
    net.exchange(h, "after", 2);
    for d in &net.wire[mark..] {
        if d.src.ip() == new_port.ip() {
            assert_eq!(d.src, new_port, "the session sends from its new socket");
        } else {
            assert_eq!(d.dst, new_port, "the client sends to it");
        }
    }
    assert_eq!(net.server_data(), expected("c", &["before", "after"], 2));
    assert_eq!(net.client_data(), expected("s", &["before", "after"], 2));
}

#[test]
fn move_to_needs_port_move_and_an_established_session() {
    let mut net = Net::new(client_config(), with_server(mobility(None, false, true)));
    let h = net.handshake();
    assert!(net.server.move_to(h, addr("198.51.100.1:7100")).is_err());
}

#[test]
fn damaged_connection_id_records_never_move_a_session() {
    let (mut net, h) = rrc_pair();
    let before = net.wire.len();
    net.exchange(h, "a", 1);
    let sample = net.wire[before..].iter().find(|d| d.dst.ip() == net.listen.ip()).unwrap().clone();
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
        net.arrive(Datagram { src: stranger, dst: net.listen, payload });
    }
    net.run_for(10 * SECOND);
    assert!(net.server_path_changes().is_empty());
    assert_eq!(net.server_conn(h).remote(), net.client_addr);
    assert_eq!(net.server_conn(h).mobility_stats().path_challenges_sent, 0);
    assert_eq!(net.server.stats().connections_open, 1);
    net.exchange(h, "b", 1);
    assert_eq!(net.server_data(), expected("c", &["a", "b"], 1));
}

#[test]
fn session_socket_keeps_its_port_when_its_first_flight_is_lost() {
    let mut net =
        Net::new(with_client(mobility(None, false, true)), with_server(mobility(None, false, true)));
    net.ipc_next_port = Some(7000);
    let own = addr("198.51.100.1:7000");
    let mut dropped = false;
    net.loss = Box::new(move |d| {
        let first = d.src == own && !dropped;
        dropped |= first;
        first
    });
    let h = net.handshake();
    assert_eq!(net.client.remote(), own);
    assert_eq!(net.client_path_changes(), vec![own]);
    // The first flight was resent (the client's ClientHello went to the listening port again),
    // from the session's own socket as before.
    let from_server: Vec<_> = net.wire.iter().filter(|d| d.src.ip() == own.ip()).collect();
    assert!(from_server.len() > 3);
    assert!(from_server[1..].iter().all(|d| d.src == own), "{from_server:?}");
    assert_eq!(net.server.stats().connections_accepted, 1);
    net.exchange(h, "a", 2);
    assert_eq!(net.server_data(), expected("c", &["a"], 2));
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
    let mut net = Net::new(client.clone(), server);
    net.handshake();
    let session = net.client_events.iter().find_map(|e| match e {
        Event::Connected(s) => s.session.clone(),
        _ => None,
    });
    assert!(session.is_some(), "a ticket was issued");
    net.client_addr = addr("192.0.2.1:40001");
    net.client = Connection::client_with_session(Arc::new(client), net.now, net.listen, [9; 32], session);
    net.client_events.clear();
    net.server_events.clear();
    let h = net.handshake();
    let resumed = net.client_events.iter().any(|e| matches!(e, Event::Connected(s) if s.resumed));
    assert!(resumed);
    let server_cid = net.server_conn(h).connection_id().expect("negotiated again").to_vec();
    assert_eq!(server_cid.len(), 4);
    let mark = net.wire.len();
    net.exchange(h, "a", 2);
    assert_eq!(net.server_data(), expected("c", &["a"], 2));
    for d in net.wire[mark..].iter().filter(|d| d.dst.ip() == net.listen.ip()) {
        assert_eq!((first_type(d), &d.payload[11..15]), (25, &server_cid[..]));
    }
}

/// While a new address is checked, data goes to it at once (within its 3x allowance), so a real
/// move costs no round trip; a copy goes to the address in use, in case the move was spoofed.
#[test]
fn data_reaches_a_new_address_while_it_is_checked_and_a_copy_the_old_one() {
    let (mut net, h) = rrc_pair();
    net.exchange(h, "before", 2);
    let old = net.client_addr;
    let moved_to = addr("203.0.113.9:50000");
    net.client_addr = moved_to;
    net.client.send(b"c-moved").unwrap();
    net.collect();
    // From now on the old address is gone and nothing of the client's reaches the server, so
    // the check cannot complete: only the allowance lets data through.
    net.loss = Box::new(move |d| d.dst == old || d.src == moved_to);
    let delay = net.delay;
    net.run_for(delay);
    assert_eq!(net.server_data().last(), Some(&b"c-moved".to_vec()));
    let wire_before = net.wire.len();
    net.server.send(h, b"s-reply").unwrap();
    net.run_for(delay * 3);
    assert!(net.client_data().contains(&b"s-reply".to_vec()), "data reached the new address unchecked");
    assert_eq!(net.server_conn(h).remote(), old, "not moved before the check completes");
    let received: u64 = net.wire.iter().filter(|d| d.src == moved_to).map(|d| d.payload.len() as u64).sum();
    let to_new: Vec<&Datagram> = net.wire.iter().filter(|d| d.dst == moved_to).collect();
    let sent: u64 = to_new.iter().map(|d| d.payload.len() as u64).sum();
    assert!(sent <= 3 * received, "{sent} B sent to an unverified address that sent {received} B");
    let reply_copies = net.wire[wire_before..].iter().filter(|d| d.src != moved_to).count();
    assert_eq!(reply_copies, 2, "the reply went to the new address and, as a copy, to the old one");
    assert!(net.wire[wire_before..].iter().any(|d| d.dst == old));
    assert!(net.server_conn(h).mobility_stats().bytes_copied_during_checks > 0);
}

/// Every strategy keeps its session across a move when the round trip (3 s) is longer than the
/// retransmission timer and late copies of every datagram keep arriving: copies of old flights,
/// of path challenges and of port announcements change nothing, and every message arrives once.
#[test]
fn late_copies_of_every_datagram_change_no_session_of_any_strategy() {
    // (name, client mobility, server mobility, IPC session sockets, TCS port move)
    let cases = [
        ("cid+rrc", mobility(Some(0), true, false), mobility(Some(4), true, false), false, false),
        ("ipc", mobility(None, false, true), mobility(None, false, true), true, false),
        ("tcs", mobility(None, false, true), mobility(None, false, true), false, true),
    ];
    for (name, c, s, ipc, tcs) in cases {
        let mut client = with_client(c);
        client.handshake_timeout = 300 * SECOND;
        let mut server = with_server(s);
        server.handshake_timeout = 300 * SECOND;
        let mut net = Net::new(client, server);
        if ipc {
            net.ipc_next_port = Some(7000);
        }
        net.delay = Duration::from_millis(1_500);
        let mut n = 0u64;
        net.late_copy = Box::new(move |_| {
            n += 1;
            Some(Duration::from_millis(n * 7_919 % 6_000))
        });
        net.run_for(120 * SECOND);
        assert!(net.client.is_established(), "{name}: {:?}", net.client_events);
        let h = net
            .server_events
            .iter()
            .find_map(|(h, e)| matches!(e, Event::Connected(_)).then_some(*h))
            .unwrap_or_else(|| panic!("{name}: server connected: {:?}", net.server_events));
        if tcs {
            net.server.move_to(h, addr("198.51.100.1:7100")).unwrap();
            net.run_for(30 * SECOND);
        }
        for round in ["before", "after"] {
            if round == "after" {
                net.client_addr = addr("203.0.113.9:50000");
            }
            for i in 0..3 {
                net.client.send(format!("c-{round}-{i}").as_bytes()).unwrap();
                net.run_for(SECOND);
            }
            net.run_for(20 * SECOND);
            for i in 0..3 {
                net.server.send(h, format!("s-{round}-{i}").as_bytes()).unwrap();
                net.run_for(SECOND);
            }
            net.run_for(20 * SECOND);
        }
        assert_eq!(net.server_data(), expected("c", &["before", "after"], 3), "{name}");
        assert_eq!(net.client_data(), expected("s", &["before", "after"], 3), "{name}");
        assert_eq!(net.server.stats().connections_accepted, 1, "{name}: one handshake");
        assert!(net.server_conn(h).is_established() && net.client.is_established(), "{name}");
        assert_eq!(net.server_conn(h).remote(), addr("203.0.113.9:50000"), "{name}: the session followed");
    }
}
