//! A DTLS client [`Connection`] and server [`Endpoint`] on virtual time, joined by the
//! in-memory network of [`crate::net`].
//!
//! The client sends from [`Pair::client_addr`], which a test may change at any time (a client
//! that moved); the server gets every datagram addressed to any port of its IP (the listening
//! port, a session's own socket, a port it moved to), the client only what is addressed to its
//! current address; the rest arrives at nobody and is counted in [`Pair::lost_at`]. Hooks on
//! the events of each side run before that side's next datagrams leave, as a driver's would
//! (e.g. [`Pair::session_sockets`] gives each accepted session a socket of its own).
//! Datagrams due at the same instant reach the server first, then the client: the order the
//! wire-golden fingerprints (`crates/dtls/tests/wire_golden.rs`) were taken in.
//!
//! ```
//! use fastshake_testkit::dtls::{client_config, server_config, Pair};
//! use fastshake_testkit::net::{self, Dir};
//! use std::time::Duration;
//!
//! let mut pair = Pair::new(client_config(), server_config());
//! // The client's second datagram (its ClientHello with the cookie) is lost once.
//! pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index == 1);
//! let (client, _server) = pair.handshake(Duration::from_secs(60)).expect("connected");
//! assert_eq!(client.retransmissions, 1);
//! ```

use crate::net::{self, Counter, Datagram, Dir, Filter, InFlight};
use fastshake_dtls::{
    CachedServer, ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, Error, Event,
    HandshakeSummary, Instant, ServerConfig, Versions,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const PSK_ID: &[u8] = b"Client_identity";
pub const PSK_KEY: &[u8] = &[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];

/// A DTLS 1.2 PSK client of [`server_config`] (the 1.3 tests set `versions`).
pub fn client_config() -> ClientConfig {
    ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(PSK_ID, PSK_KEY) }
}

/// A DTLS 1.2 PSK server for [`client_config`] (the 1.3 tests set `versions`).
pub fn server_config() -> ServerConfig {
    ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk(PSK_ID, PSK_KEY) }
}

/// The failure of a handshake whose two sides hold different keys for [`PSK_ID`]: found by
/// this side (`sent`) or told by the peer.
pub fn psk_mismatch(sent: bool) -> Error {
    let identity = String::from_utf8_lossy(PSK_ID).into_owned();
    Error::PskMismatch { identity, alert: fastshake_dtls::AlertDescription::DecryptError, sent }
}

/// Runs on each server event before the server's next datagrams are polled.
pub type ServerHook = Box<dyn FnMut(&mut Endpoint, ConnectionHandle, &Event)>;
/// Runs on each client event before the client's next datagrams are polled.
pub type ClientHook = Box<dyn FnMut(&mut Connection, &Event)>;

pub struct Pair {
    pub now: Instant,
    pub client: Connection,
    pub server: Endpoint,
    /// Where the client sends from and receives at.
    pub client_addr: SocketAddr,
    /// The server's listening address; its IP takes datagrams to any port.
    pub server_addr: SocketAddr,
    /// One-way delay of the network.
    pub delay: Duration,
    /// Reverse the order of the datagrams one side emits in one burst.
    pub reorder: bool,
    /// Pack the datagrams of one burst into one datagram, as a sender that writes a whole
    /// flight (or a flight and data) at once does.
    pub coalesce: bool,
    /// A datagram longer than this leaves as two: its first bytes, then the rest (a sender that
    /// flushes a fixed-size write buffer mid-record, as OpenSSL 3.0 does at 4096 bytes).
    pub split_over: Option<usize>,
    pub filter: Filter,
    pub on_server_event: ServerHook,
    pub on_client_event: ClientHook,
    /// Every datagram sent, in order, with its fate.
    pub log: Vec<Datagram>,
    pub client_events: Vec<Event>,
    pub server_events: Vec<(ConnectionHandle, Event)>,
    /// Bytes that arrived where nobody listens (an address the client left, a spoofed source).
    pub lost_at: BTreeMap<SocketAddr, u64>,
    wire: InFlight,
    counter: Counter,
}

impl Pair {
    /// Client at 192.0.2.1:5684, server at 198.51.100.1:5684, 10 ms apart, clock at 1 s.
    pub fn new(client: ClientConfig, server: ServerConfig) -> Pair {
        Self::with_seed(client, server, 1)
    }

    /// Like [`Pair::new`], the client's randomness seeded with `seed`, the server's with `seed + 100`.
    pub fn with_seed(client: ClientConfig, server: ServerConfig, seed: u8) -> Pair {
        let client_addr: SocketAddr = "192.0.2.1:5684".parse().expect("address");
        let server_addr: SocketAddr = "198.51.100.1:5684".parse().expect("address");
        let now = Instant::from_millis(1_000);
        Pair {
            now,
            client: Connection::client(Arc::new(client), now, server_addr, [seed; 32]),
            server: Endpoint::new(Arc::new(server), [seed.wrapping_add(100); 32])
                .expect("a valid server configuration"),
            client_addr,
            server_addr,
            delay: Duration::from_millis(10),
            reorder: false,
            coalesce: false,
            split_over: None,
            filter: net::deliver_all(),
            on_server_event: Box::new(|_, _, _| {}),
            on_client_event: Box::new(|_, _| {}),
            log: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            lost_at: BTreeMap::new(),
            wire: InFlight::default(),
            counter: Counter::default(),
        }
    }

    /// A new client connection in place of the old one (same address, so the same 4-tuple),
    /// its events cleared.
    pub fn new_client(&mut self, config: ClientConfig, seed: u8) {
        self.client = Connection::client(Arc::new(config), self.now, self.server_addr, [seed; 32]);
        self.client_events.clear();
    }

    /// A new client connection offering `session` for resumption, its events cleared.
    pub fn resume_client(&mut self, config: ClientConfig, session: Option<ClientSession>, seed: u8) {
        self.client = Connection::client_with_session(
            Arc::new(config),
            self.now,
            self.server_addr,
            [seed; 32],
            session,
        );
        self.client_events.clear();
    }

    /// A new client connection offering `session` for resumption and `cached` (RFC 7924
    /// objects, client-certificate ticket) as its configuration allows, its events cleared.
    pub fn cached_client(
        &mut self,
        config: ClientConfig,
        session: Option<ClientSession>,
        cached: Option<CachedServer>,
        seed: u8,
    ) {
        self.client = Connection::client_with_cache(
            Arc::new(config),
            self.now,
            self.server_addr,
            [seed; 32],
            session,
            cached,
        );
        self.client_events.clear();
    }

    /// IPC (a socket per session): every session the server accepts from now on gets its own
    /// socket on the server's IP, ports from `first_port` up. Takes the place of
    /// [`Pair::on_server_event`].
    pub fn session_sockets(&mut self, first_port: u16) {
        let ip = self.server_addr.ip();
        let mut port = first_port;
        self.on_server_event = Box::new(move |server, h, e| {
            if *e == Event::Accepted {
                server.set_local(h, SocketAddr::new(ip, port));
                port += 1;
            }
        });
    }

    /// How many datagrams were sent in `dir` so far.
    pub fn sent(&self, dir: Dir) -> usize {
        self.counter.sent(dir)
    }

    /// Polls both sides: events (and their hooks) first, then every datagram each side has,
    /// one burst per side onto the network.
    pub fn collect(&mut self) {
        self.poll_events();
        let mut burst = Vec::new();
        while let Some(t) = self.client.poll_transmit(self.now) {
            burst.push((self.client_addr, t.dst, t.payload));
        }
        self.send(Dir::ToServer, burst);
        let mut burst = Vec::new();
        while let Some(t) = self.server.poll_transmit(self.now) {
            burst.push((t.src.unwrap_or(self.server_addr), t.dst, t.payload));
        }
        self.send(Dir::ToClient, burst);
        self.poll_events();
    }

    fn poll_events(&mut self) {
        while let Some(e) = self.client.poll_event() {
            (self.on_client_event)(&mut self.client, &e);
            self.client_events.push(e);
        }
        while let Some((h, e)) = self.server.poll_event() {
            (self.on_server_event)(&mut self.server, h, &e);
            self.server_events.push((h, e));
        }
    }

    fn send(&mut self, dir: Dir, mut burst: Vec<(SocketAddr, SocketAddr, Vec<u8>)>) {
        if self.reorder {
            burst.reverse();
        }
        if self.coalesce && burst.len() > 1 {
            burst = coalesce(burst);
        }
        if let Some(n) = self.split_over {
            burst = burst
                .into_iter()
                .flat_map(|(s, d, p)| {
                    if p.len() > n {
                        vec![(s, d, p[..n].to_vec()), (s, d, p[n..].to_vec())]
                    } else {
                        vec![(s, d, p)]
                    }
                })
                .collect();
        }
        for (src, dst, payload) in burst {
            let d = self.counter.datagram(dir, self.now, src, dst, payload);
            net::transmit(d, &mut self.filter, self.delay, &mut self.log, &mut self.wire);
        }
    }

    /// Hands a datagram to whoever listens at `dst`, now, outside the network (not logged):
    /// a replay, a forgery, a copy an attacker sends from elsewhere.
    pub fn inject(&mut self, src: SocketAddr, dst: SocketAddr, mut payload: Vec<u8>) {
        if dst.ip() == self.server_addr.ip() {
            self.server.handle_datagram(self.now, dst, src, &mut payload);
        } else if dst == self.client_addr {
            self.client.handle_datagram(self.now, src, &mut payload);
        } else {
            *self.lost_at.entry(dst).or_default() += payload.len() as u64;
        }
        self.collect();
    }

    /// Every datagram still on its way, taken off the network (a test that delivers them
    /// itself, with [`Pair::inject`]).
    pub fn take_in_flight(&mut self) -> Vec<Datagram> {
        self.wire.take_all()
    }

    /// One step: advances the clock to the next arrival or timer, unless that is after
    /// `limit`; delivers what is due (to the server first, then to the client), then fires
    /// due timers. Returns false when nothing is left to happen by `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.collect();
        let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()].into_iter().flatten().min();
        let Some(next) = [self.wire.next_arrival(), next_timer].into_iter().flatten().min() else {
            return false;
        };
        if next > limit {
            return false;
        }
        self.now = self.now.max(next);
        let server_ip = self.server_addr.ip();
        while let Some(d) = self.wire.pop_due(self.now, |d| d.dst.ip() == server_ip) {
            self.inject(d.src, d.dst, d.payload);
        }
        while let Some(d) = self.wire.pop_due(self.now, |d| d.dst.ip() != server_ip) {
            self.inject(d.src, d.dst, d.payload);
        }
        if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
            self.client.handle_timeout(self.now);
        }
        if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
            self.server.handle_timeout(self.now);
        }
        self.collect();
        true
    }

    /// Runs what happens within `d` of virtual time; the clock stays at the last thing that
    /// happened (use [`Pair::elapse`] to let all of `d` pass).
    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        while self.step(limit) {}
        self.collect();
    }

    /// Runs what happens within `d` of virtual time and leaves the clock `d` later.
    pub fn elapse(&mut self, d: Duration) {
        let limit = self.now + d;
        self.run_for(d);
        self.now = self.now.max(limit);
    }

    /// Runs until the client and a server session are both connected, at most `max` of
    /// virtual time; returns their summaries, or None when the client closed or time ran out.
    pub fn handshake(&mut self, max: Duration) -> Option<(HandshakeSummary, HandshakeSummary)> {
        let limit = self.now + max;
        loop {
            if let (Some(c), Some(s)) = (self.client_summary(), self.server_summary()) {
                return Some((c, s));
            }
            if self.client.is_closed() || !self.step(limit) {
                return None;
            }
        }
    }

    /// The client's first `Connected` summary.
    pub fn client_summary(&self) -> Option<HandshakeSummary> {
        self.client_events.iter().find_map(|e| match e {
            Event::Connected(s) => Some(s.clone()),
            _ => None,
        })
    }

    /// The summary of the server's latest `Connected` session.
    pub fn server_summary(&self) -> Option<HandshakeSummary> {
        self.server_events.iter().rev().find_map(|(_, e)| match e {
            Event::Connected(s) => Some(s.clone()),
            _ => None,
        })
    }

    /// The server's session with the client's current address.
    pub fn server_handle(&self) -> ConnectionHandle {
        self.server.handle_for(self.client_addr).expect("a server session for the client's address")
    }

    /// Every record of application data the client received, in order.
    pub fn client_data(&self) -> Vec<Vec<u8>> {
        self.client_events.iter().filter_map(data).collect()
    }

    /// Every record of application data the server received, in order.
    pub fn server_data(&self) -> Vec<Vec<u8>> {
        self.server_events.iter().filter_map(|(_, e)| data(e)).collect()
    }

    /// Sends `n` distinct records each way and checks that each arrives exactly once,
    /// unaltered and in order, after what had arrived before.
    pub fn exchange_data(&mut self, n: usize) {
        let h = self.server_handle();
        let before_c = self.client_data().len();
        let before_s = self.server_data().len();
        for i in 0..n {
            self.client.send(format!("client record {i}").as_bytes()).unwrap();
            self.server.send(h, format!("server record {i}").as_bytes()).unwrap();
        }
        self.run_for(Duration::from_secs(1));
        let want_s: Vec<Vec<u8>> = (0..n).map(|i| format!("client record {i}").into_bytes()).collect();
        let want_c: Vec<Vec<u8>> = (0..n).map(|i| format!("server record {i}").into_bytes()).collect();
        assert_eq!(
            self.server_data()[before_s..],
            want_s,
            "server received every client record once, in order"
        );
        assert_eq!(
            self.client_data()[before_c..],
            want_c,
            "client received every server record once, in order"
        );
    }

    /// The client's first failure.
    pub fn client_failure(&self) -> Option<Error> {
        self.client_events.iter().find_map(failure)
    }

    /// The first failure of any server session.
    pub fn server_failure(&self) -> Option<Error> {
        self.server_events.iter().find_map(|(_, e)| failure(e))
    }
}

fn data(e: &Event) -> Option<Vec<u8>> {
    match e {
        Event::ApplicationData(d) => Some(d.clone()),
        _ => None,
    }
}

fn failure(e: &Event) -> Option<Error> {
    match e {
        Event::Failed(err) => Some(err.clone()),
        _ => None,
    }
}

/// Packs consecutive datagrams of one burst into one. A DTLS 1.3 record without a length (RFC
/// 9147 §4: it extends to the end of its datagram, which is how a record sent alone goes) must
/// stay last: a packed datagram ends with it.
fn coalesce(burst: Vec<(SocketAddr, SocketAddr, Vec<u8>)>) -> Vec<(SocketAddr, SocketAddr, Vec<u8>)> {
    let mut packed: Vec<(SocketAddr, SocketAddr, Vec<u8>)> = Vec::new();
    let mut open = false;
    for (src, dst, payload) in burst {
        let last = payload.first().is_some_and(|&b| fastshake_dtls::dtls13::ends_datagram(b));
        match packed.last_mut() {
            Some((_, _, into)) if open => into.extend_from_slice(&payload),
            _ => packed.push((src, dst, payload)),
        }
        open = !last;
    }
    packed
}
