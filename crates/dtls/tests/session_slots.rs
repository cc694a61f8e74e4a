//! Session slots (`ServerConfig::max_sessions`, seed 002): at most R sessions, and what a client
//! that proved its address gets while all R are taken: a refusal, or the slot of the session
//! least recently used or silent the longest. Several clients against one endpoint, on virtual
//! time, with the slot count checked after every datagram; each case in DTLS 1.2 and in 1.3
//! (whose cookie exchange is a HelloRetryRequest).
use fastshake_dtls::{
    AlertDescription, ClientConfig, Connection, ConnectionHandle, Endpoint, Error, Event, Instant,
    ServerConfig, Versions, WhenFull,
};
use fastshake_testkit::dtls::{client_config, server_config};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const SERVER: &str = "198.51.100.1:5684";
const MINUTE: Duration = Duration::from_secs(60);
const VERSIONS: [Versions; 2] = [Versions::Dtls12, Versions::Dtls13];

fn client_for(versions: Versions) -> ClientConfig {
    ClientConfig { versions, ..client_config() }
}

fn server_addr() -> SocketAddr {
    SERVER.parse().unwrap()
}

struct Client {
    addr: SocketAddr,
    conn: Connection,
    events: Vec<Event>,
    /// Datagrams this client sent.
    sent: usize,
}

impl Client {
    fn closed_by_server(&self) -> bool {
        self.events.contains(&Event::Closed) && self.conn.is_closed()
    }

    fn failure(&self) -> Option<&Error> {
        self.events.iter().find_map(|e| match e {
            Event::Failed(error) => Some(error),
            _ => None,
        })
    }

    fn data(&self) -> Vec<Vec<u8>> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::ApplicationData(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }
}

/// One endpoint with R slots and any number of clients on a lossless network without delay.
struct Net {
    versions: Versions,
    now: Instant,
    slots: usize,
    server: Endpoint,
    clients: Vec<Client>,
    server_events: Vec<(ConnectionHandle, Event)>,
}

impl Net {
    fn new(slots: usize, when_full: WhenFull, versions: Versions) -> Net {
        let config = ServerConfig { max_sessions: Some(slots), when_full, versions, ..server_config() };
        Net {
            versions,
            now: Instant::from_millis(1_000),
            slots,
            server: Endpoint::new(Arc::new(config), [7; 32]).expect("a valid server configuration"),
            clients: Vec::new(),
            server_events: Vec::new(),
        }
    }

    /// R is never exceeded: checked after every datagram and timer.
    fn check_slots(&self) {
        let open = self.server.stats().connections_open as usize;
        assert!(open <= self.slots, "{open} connections with {} slots", self.slots);
    }

    /// A new client at 192.0.2.`host`:5684; returns its index.
    fn add_client(&mut self, host: u8) -> usize {
        let addr = SocketAddr::new(format!("192.0.2.{host}").parse().unwrap(), 5684);
        let conn =
            Connection::client(Arc::new(client_for(self.versions)), self.now, server_addr(), [host; 32]);
        self.clients.push(Client { addr, conn, events: Vec::new(), sent: 0 });
        self.clients.len() - 1
    }

    /// Client `i` starts over with a new connection from the same address.
    fn restart(&mut self, i: usize, seed: u8) {
        let c = &mut self.clients[i];
        c.conn = Connection::client(Arc::new(client_for(self.versions)), self.now, server_addr(), [seed; 32]);
        c.events.clear();
    }

    /// Delivers every datagram until nobody has anything to send.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            for i in 0..self.clients.len() {
                while let Some(t) = self.clients[i].conn.poll_transmit(self.now) {
                    moved = true;
                    self.clients[i].sent += 1;
                    let from = self.clients[i].addr;
                    self.server.handle_datagram(self.now, server_addr(), from, &mut t.payload.clone());
                    self.check_slots();
                }
            }
            while let Some(t) = self.server.poll_transmit(self.now) {
                moved = true;
                // The latest client at an address listens there.
                if let Some(c) = self.clients.iter_mut().rev().find(|c| c.addr == t.dst) {
                    c.conn.handle_datagram(self.now, server_addr(), &mut t.payload.clone());
                }
            }
            for c in &mut self.clients {
                while let Some(e) = c.conn.poll_event() {
                    c.events.push(e);
                }
            }
            while let Some(e) = self.server.poll_event() {
                self.server_events.push(e);
            }
            if !moved {
                return;
            }
        }
    }

    /// Runs timers and traffic for `d` of virtual time.
    fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        loop {
            self.pump();
            let timers = self.clients.iter().filter_map(|c| c.conn.poll_timeout());
            let Some(next) = timers.chain(self.server.poll_timeout()).min().filter(|t| *t <= limit) else {
                break;
            };
            self.now = self.now.max(next);
            for c in &mut self.clients {
                if c.conn.poll_timeout().is_some_and(|t| t <= self.now) {
                    c.conn.handle_timeout(self.now);
                }
            }
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
                self.check_slots();
            }
        }
        self.now = limit;
    }

    /// Client `i` connects (or fails) within a minute.
    fn connect(&mut self, i: usize) -> bool {
        self.run_for(MINUTE);
        self.clients[i].conn.is_established()
    }

    fn handle(&self, i: usize) -> ConnectionHandle {
        self.server.handle_for(self.clients[i].addr).expect("a server session for the client")
    }

    fn established(&self) -> usize {
        self.server.handles().filter(|h| self.server.connection(*h).unwrap().is_established()).count()
    }

    /// Client `i` sends one record; it must arrive.
    fn client_sends(&mut self, i: usize, text: &str) {
        let h = self.handle(i);
        self.clients[i].conn.send(text.as_bytes()).unwrap();
        self.pump();
        let got =
            self.server_events.iter().any(|(eh, e)| *eh == h && *e == Event::ApplicationData(text.into()));
        assert!(got, "the server got {text:?}");
    }

    /// The server sends one record to client `i`; it must arrive.
    fn server_sends(&mut self, i: usize, text: &str) {
        let h = self.handle(i);
        // A send is dated by the latest time the engine was given: a driver gives it the time.
        self.server.handle_timeout(self.now);
        self.server.send(h, text.as_bytes()).unwrap();
        self.pump();
        assert!(self.clients[i].data().contains(&text.as_bytes().to_vec()), "client {i} got {text:?}");
    }

    /// A datagram from `from` that nobody answers (a flood): the server's output is dropped.
    fn inject(&mut self, from: SocketAddr, mut datagram: Vec<u8>) {
        self.server.handle_datagram(self.now, server_addr(), from, &mut datagram);
        self.check_slots();
        while self.server.poll_transmit(self.now).is_some() {}
    }

    fn evictions(&self) -> Vec<(ConnectionHandle, WhenFull, SocketAddr)> {
        self.server_events
            .iter()
            .filter_map(|(h, e)| match e {
                Event::Evicted { policy, newcomer } => Some((*h, *policy, *newcomer)),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn refused_client_gets_an_alert_stops_and_leaves_the_sessions_alone() {
    for versions in VERSIONS {
        let mut net = Net::new(2, WhenFull::Refuse, versions);
        let (a, b) = (net.add_client(1), net.add_client(2));
        assert!(net.connect(a) && net.connect(b));
        let (ha, hb) = (net.handle(a), net.handle(b));

        let c = net.add_client(3);
        net.pump();
        assert!(!net.clients[c].conn.is_established());
        let error = net.clients[c].failure().expect("the third client failed").clone();
        assert_eq!(error, Error::NoSessionSlot { alert: AlertDescription::InternalError });
        assert_eq!(error.alert(), Some(AlertDescription::InternalError));
        let text = error.to_string();
        assert!(
            text.contains("no free session slot on the server") && text.contains("internal_error"),
            "{text}"
        );
        assert!(net.server_events.contains(&(
            net.server_events.last().unwrap().0,
            Event::Refused { remote: net.clients[c].addr }
        )));
        assert_eq!(net.server.stats().slot_refusals, 1);
        assert_eq!(net.server.handle_for(net.clients[c].addr), None, "no state kept");

        // It stops retransmitting: nothing more from it over the next minute.
        let sent = net.clients[c].sent;
        net.run_for(MINUTE);
        assert_eq!(net.clients[c].sent, sent);
        assert_eq!(net.server.stats().slot_refusals, 1);

        // The two sessions are untouched and still carry data.
        assert_eq!((net.handle(a), net.handle(b)), (ha, hb));
        net.client_sends(a, "from a");
        net.server_sends(b, "to b");
        assert!(net.evictions().is_empty());

        // Once one closes, a new client gets in.
        net.clients[a].conn.close();
        net.pump();
        assert!(net.server_events.contains(&(ha, Event::Closed)));
        assert_eq!(net.server.stats().connections_open, 1);
        let d = net.add_client(4);
        assert!(net.connect(d));
        assert_eq!(net.established(), 2);
        net.client_sends(d, "from d");
        net.server_sends(b, "to b again");
    }
}

/// Two sessions where the least recently used and the idlest differ: `b` sent data at +10 s
/// (used and heard then); the server sent data to `a` at +20 s (used then, heard only at the
/// handshake). LRU gives up `b`, idlest gives up `a`.
fn lru_and_idlest_setup(policy: WhenFull, versions: Versions) -> (Net, usize, usize) {
    let mut net = Net::new(2, policy, versions);
    let (a, b) = (net.add_client(1), net.add_client(2));
    assert!(net.connect(a) && net.connect(b));
    net.run_for(Duration::from_secs(10));
    net.client_sends(b, "b speaks");
    net.run_for(Duration::from_secs(10));
    net.server_sends(a, "to a");
    net.run_for(Duration::from_secs(10));
    (net, a, b)
}

fn eviction_makes_room(policy: WhenFull, versions: Versions, victim_of: fn(usize, usize) -> (usize, usize)) {
    let (mut net, a, b) = lru_and_idlest_setup(policy, versions);
    let (victim, survivor) = victim_of(a, b);
    let (hv, hs) = (net.handle(victim), net.handle(survivor));

    let c = net.add_client(3);
    assert!(net.connect(c), "the newcomer completes");
    assert_eq!(net.evictions(), vec![(hv, policy, net.clients[c].addr)]);
    assert!(net.clients[victim].closed_by_server(), "the victim's client got close_notify");
    assert!(net.server.connection(hv).is_none());
    assert_eq!(net.server.stats().sessions_evicted, 1);
    assert!(!net.clients[survivor].conn.is_closed());
    assert_eq!(net.handle(survivor), hs);
    net.client_sends(survivor, "still here");
    net.client_sends(c, "newcomer");

    // The evicted client reconnects, which evicts another in turn: the newcomer is used and
    // heard last, so under either policy the survivor goes.
    net.run_for(Duration::from_secs(1));
    let hc = net.handle(c);
    net.client_sends(c, "newcomer used and heard last");
    net.run_for(Duration::from_secs(1));
    net.restart(victim, 9);
    assert!(net.connect(victim), "the evicted client gets back in");
    let evicted: Vec<_> = net.evictions().iter().map(|e| e.0).collect();
    assert_eq!(evicted, vec![hv, hs]);
    assert!(net.clients[survivor].closed_by_server());
    assert_eq!(net.server.handle_for(net.clients[c].addr), Some(hc));
    assert_eq!(net.established(), 2);
}

#[test]
fn lru_evicts_the_session_least_recently_used() {
    for versions in VERSIONS {
        eviction_makes_room(WhenFull::Lru, versions, |a, b| (b, a));
    }
}

#[test]
fn idlest_evicts_the_session_silent_the_longest() {
    for versions in VERSIONS {
        eviction_makes_room(WhenFull::Idlest, versions, |a, b| (a, b));
    }
}

fn flood_addr(i: u16) -> SocketAddr {
    SocketAddr::new("203.0.113.9".parse().unwrap(), 10_000 + i)
}

#[test]
fn hellos_without_a_valid_cookie_take_no_slot() {
    for versions in VERSIONS {
        let mut net = Net::new(2, WhenFull::Lru, versions);
        let (a, b) = (net.add_client(1), net.add_client(2));
        assert!(net.connect(a) && net.connect(b));
        let sessions = (net.handle(a), net.handle(b));
        let quiet = |net: &Net| {
            assert_eq!(net.server.stats().connections_open, 2);
            assert_eq!((net.handle(a), net.handle(b)), sessions);
            assert!(net.evictions().is_empty());
        };
        for i in 0..100u16 {
            // A first ClientHello (no cookie): a HelloVerifyRequest, no state.
            let mut flooder =
                Connection::client(Arc::new(client_for(net.versions)), net.now, server_addr(), [i as u8; 32]);
            let hello = flooder.poll_transmit(net.now).unwrap().payload;
            net.inject(flood_addr(i), hello.clone());
            quiet(&net);
            // A cookie earned at one address, replayed from another: rejected, no state.
            let mut hvr = None;
            net.server.handle_datagram(net.now, server_addr(), flood_addr(500), &mut hello.clone());
            while let Some(t) = net.server.poll_transmit(net.now) {
                hvr = Some(t.payload);
            }
            flooder.handle_datagram(net.now, server_addr(), &mut hvr.unwrap());
            let with_cookie = flooder.poll_transmit(net.now).unwrap().payload;
            net.inject(flood_addr(i), with_cookie);
            quiet(&net);
            // The first fragment of a ClientHello at the smallest MTU.
            let small =
                fastshake_dtls::ClientConfig { mtu: fastshake_dtls::MIN_MTU, ..client_for(net.versions) };
            let mut fragmenter = Connection::client(Arc::new(small), net.now, server_addr(), [i as u8; 32]);
            net.inject(flood_addr(1000 + i), fragmenter.poll_transmit(net.now).unwrap().payload);
            quiet(&net);
        }
        assert!(net.server.stats().cookies_rejected >= 100);
        net.client_sends(a, "a after the flood");
        net.server_sends(b, "to b after the flood");

        // A client that proves its address does take a slot: here the least recently used one.
        let c = net.add_client(3);
        assert!(net.connect(c));
        assert_eq!(net.evictions().len(), 1);
        assert_eq!(net.server.stats().connections_open, 2);
    }
}

#[test]
fn handshakes_in_progress_hold_their_slot_until_they_end() {
    for versions in VERSIONS {
        let mut net = Net::new(1, WhenFull::Lru, versions);
        // A client that returns its cookie and then goes silent holds the only slot.
        let from: SocketAddr = "192.0.2.200:1".parse().unwrap();
        let mut silent =
            Connection::client(Arc::new(client_for(net.versions)), net.now, server_addr(), [99; 32]);
        let hello = silent.poll_transmit(net.now).unwrap().payload;
        net.server.handle_datagram(net.now, server_addr(), from, &mut hello.clone());
        let mut hvr = net.server.poll_transmit(net.now).unwrap().payload;
        silent.handle_datagram(net.now, server_addr(), &mut hvr);
        net.inject(from, silent.poll_transmit(net.now).unwrap().payload);
        assert_eq!(net.server.stats().connections_open, 1);
        let h = net.server.handle_for(from).unwrap();
        assert!(!net.server.connection(h).unwrap().is_established());

        // No established session to evict: the next client is refused even under LRU.
        let b = net.add_client(2);
        net.pump();
        assert_eq!(
            net.clients[b].failure(),
            Some(&Error::NoSessionSlot { alert: AlertDescription::InternalError })
        );
        assert!(net.evictions().is_empty());

        // The handshake timeout frees the slot.
        net.run_for(2 * MINUTE);
        assert_eq!(net.server.stats().connections_open, 0);
        let c = net.add_client(3);
        assert!(net.connect(c));
    }
}
