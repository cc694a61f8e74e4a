//! Two SCTP [`Endpoint`]s over UDP encapsulation on virtual time, joined by the in-memory
//! network of [`crate::net`].
//!
//! The client is at [`client_addr`] (and [`client_addr2`] when multihomed), the server at
//! [`server_addr`]; more clients, each at an address of its own, can be added for a server with
//! many peers. What the server sends goes to the client, or to the added client it is addressed to. Datagrams arrive one at a time, in order of
//! arrival, and timers fire only when nothing is due.
//!
//! ```
//! use fastshake_testkit::sctp::{client_config, server_config, Pair};
//! use fastshake_sctp::{ConnectOptions, HandshakeMode};
//! use std::time::Duration;
//!
//! let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Both));
//! pair.connect(ConnectOptions::default());
//! assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected));
//! ```

use crate::net::{self, Counter, Datagram, Dir, Filter, InFlight};
use fastshake_sctp::packet::{Chunk, DataChunk, InitChunk, Packet, Param};
use fastshake_sctp::{
    AssociationHandle, Config, ConnectOptions, Endpoint, Event, HandshakeMode, Instant, Message, Transmit,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const CLIENT_PORT: u16 = 5001;
pub const SERVER_PORT: u16 = 5000;

/// The client's first address.
pub fn client_addr() -> SocketAddr {
    "10.0.0.1:9899".parse().expect("address")
}

/// The client's second address (a multihomed client).
pub fn client_addr2() -> SocketAddr {
    "10.0.1.1:9899".parse().expect("address")
}

pub fn server_addr() -> SocketAddr {
    "10.0.0.2:9899".parse().expect("address")
}

/// A client (not listening) on SCTP port [`CLIENT_PORT`].
pub fn client_config(mode: HandshakeMode) -> Config {
    Config { local_port: CLIENT_PORT, mode, listen: false, ..Config::default() }
}

/// A listening server on SCTP port [`SERVER_PORT`].
pub fn server_config(mode: HandshakeMode) -> Config {
    Config { local_port: SERVER_PORT, mode, listen: true, ..Config::default() }
}

/// An ordered message of 51 (PPID) on `stream`.
pub fn msg(stream: u16, data: &[u8]) -> Message {
    Message { stream, unordered: false, ppid: 51, data: data.to_vec() }
}

/// A packet a crafted peer on SCTP port `port` sends to the server's port: `vtag` and `chunks`.
pub fn crafted_from(port: u16, vtag: u32, chunks: Vec<Chunk>) -> Vec<u8> {
    let mut p = Packet::new(port, SERVER_PORT, vtag);
    p.chunks = chunks;
    p.encode()
}

/// A packet from a crafted peer on [`CLIENT_PORT`].
pub fn crafted(vtag: u32, chunks: Vec<Chunk>) -> Vec<u8> {
    crafted_from(CLIENT_PORT, vtag, chunks)
}

/// Delivers `packet` to `ep` (at [`server_addr`]) from `from`; returns every packet `ep` sends
/// back.
pub fn exchange(ep: &mut Endpoint, now: Instant, from: SocketAddr, mut packet: Vec<u8>) -> Vec<Packet> {
    ep.handle_datagram(now, server_addr(), from, &mut packet);
    drain(ep, now)
}

/// Every packet `ep` has to send at `now`.
pub fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Packet> {
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit(now) {
        out.push(Packet::parse(&t.payload).expect("engine sent a malformed packet"));
    }
    out
}

/// A lone endpoint with `config`, made cookieless, for a crafted peer to talk to.
pub fn cookieless_server(config: Config) -> Endpoint {
    Endpoint::new(Arc::new(Config { cookieless: true, ..config }), [4; 32])
}

/// The tag a crafted peer on SCTP port `port` puts in its INIT (see [`open_crafted`]).
pub fn crafted_peer_tag(port: u16) -> u32 {
    0x5151_0000 + u32::from(port)
}

/// Opens an association of the cookieless server `ep` by a crafted INIT from `from` and SCTP
/// port `port` (its tag [`crafted_peer_tag`]); returns the server's tag (the verification tag
/// of the crafted peer's packets).
pub fn open_crafted(ep: &mut Endpoint, now: Instant, from: SocketAddr, port: u16, initial_tsn: u32) -> u32 {
    let init = Chunk::Init(InitChunk {
        initiate_tag: crafted_peer_tag(port),
        a_rwnd: 1 << 20,
        outbound_streams: 2,
        inbound_streams: 2,
        initial_tsn,
        params: vec![Param::AltCookie(Vec::new())],
    });
    let answers = exchange(ep, now, from, crafted_from(port, 0, vec![init]));
    let Some(Chunk::InitAck(ack)) = answers.first().and_then(|p| p.chunks.first()) else {
        panic!("INIT-ACK expected, got {answers:?}")
    };
    ack.initiate_tag
}

/// An ordered DATA chunk on stream 0 (SACK-IMMEDIATELY set) of `len` bytes: a whole message or
/// a fragment of one, by `beginning` and `ending`.
pub fn data_fragment(tsn: u32, ssn: u16, beginning: bool, ending: bool, len: usize) -> Chunk {
    Chunk::Data(DataChunk {
        tsn,
        stream: 0,
        ssn,
        ppid: 0,
        unordered: false,
        beginning,
        ending,
        immediate: true,
        data: vec![0xEE; len],
    })
}

/// The messages among `events`, in order.
pub fn messages(events: &[(AssociationHandle, Event)]) -> Vec<Message> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Message(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// A logged datagram read as an SCTP packet.
pub trait SctpDatagram {
    /// The packet; panics if the engine sent a malformed one.
    fn packet(&self) -> Packet;
    /// The type of each of its chunks.
    fn chunk_types(&self) -> Vec<u8>;
}

impl SctpDatagram for Datagram {
    fn packet(&self) -> Packet {
        Packet::parse(&self.payload).expect("engine sent a malformed packet")
    }

    fn chunk_types(&self) -> Vec<u8> {
        self.packet().chunks.iter().map(Chunk::chunk_type).collect()
    }
}

/// Another client endpoint, at an address of its own.
pub struct Node {
    pub addr: SocketAddr,
    pub endpoint: Endpoint,
    pub events: Vec<(AssociationHandle, Event)>,
}

pub struct Pair {
    pub now: Instant,
    pub client: Endpoint,
    pub server: Endpoint,
    /// One-way delay of the network.
    pub delay: Duration,
    pub filter: Filter,
    /// Every datagram sent, in order, with its fate.
    pub log: Vec<Datagram>,
    pub client_events: Vec<(AssociationHandle, Event)>,
    pub server_events: Vec<(AssociationHandle, Event)>,
    /// More clients of the same server ([`Pair::add_client`]).
    pub more_clients: Vec<Node>,
    /// The server sends every message it receives back on the same association.
    pub echo: bool,
    /// Rewrites the UDP source port of the client's datagrams (a NAT rebinding).
    pub client_nat_port: Option<u16>,
    wire: InFlight,
    counter: Counter,
}

impl Pair {
    /// The client's randomness seeded with 1s, the server's with 2s; 10 ms apart, clock at 1 s.
    pub fn new(client: Config, server: Config) -> Pair {
        Pair {
            now: Instant::from_millis(1_000),
            client: Endpoint::new(Arc::new(client), [1; 32]),
            server: Endpoint::new(Arc::new(server), [2; 32]),
            delay: Duration::from_millis(10),
            filter: net::deliver_all(),
            log: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            more_clients: Vec::new(),
            echo: false,
            client_nat_port: None,
            wire: InFlight::default(),
            counter: Counter::default(),
        }
    }

    /// A pair whose client opened an association with default options, run until both sides
    /// are connected: the pair, the client's handle and the server's.
    pub fn connected(client: Config, server: Config) -> (Pair, AssociationHandle, AssociationHandle) {
        let mut pair = Pair::new(client, server);
        let h = pair.connect(ConnectOptions::default());
        assert!(pair.run_until(pair.now + Duration::from_secs(5), Pair::both_connected), "connected");
        let sh = pair.server.associations()[0];
        (pair, h, sh)
    }

    /// Adds a client endpoint at `addr`; returns its index in [`Pair::more_clients`].
    pub fn add_client(&mut self, addr: SocketAddr, config: Config, seed: u8) -> usize {
        let endpoint = Endpoint::new(Arc::new(config), [seed; 32]);
        self.more_clients.push(Node { addr, endpoint, events: Vec::new() });
        self.more_clients.len() - 1
    }

    /// The round trip of the network.
    pub fn rtt(&self) -> Duration {
        self.delay * 2
    }

    /// The client opens an association from [`client_addr`] to the server.
    pub fn connect(&mut self, opts: ConnectOptions) -> AssociationHandle {
        self.client.connect(self.now, Some(client_addr()), server_addr(), SERVER_PORT, opts)
    }

    /// Polls every endpoint until none has anything more to send (the echo answers too).
    fn collect(&mut self) {
        loop {
            let mut any = false;
            while let Some(t) = self.client.poll_transmit(self.now) {
                any = true;
                let mut src = t.src.unwrap_or(client_addr());
                if let Some(port) = self.client_nat_port {
                    src.set_port(port);
                }
                self.send(Dir::ToServer, src, t);
            }
            while let Some(t) = self.server.poll_transmit(self.now) {
                any = true;
                self.send(Dir::ToClient, t.src.unwrap_or(server_addr()), t);
            }
            for i in 0..self.more_clients.len() {
                while let Some(t) = self.more_clients[i].endpoint.poll_transmit(self.now) {
                    any = true;
                    self.send(Dir::ToServer, t.src.unwrap_or(self.more_clients[i].addr), t);
                }
            }
            while let Some(e) = self.client.poll_event() {
                self.client_events.push(e);
            }
            while let Some(e) = self.server.poll_event() {
                if let (true, (h, Event::Message(m))) = (self.echo, &e) {
                    any = true;
                    self.server.send(*h, m.clone()).expect("echo");
                }
                self.server_events.push(e);
            }
            for node in &mut self.more_clients {
                while let Some(e) = node.endpoint.poll_event() {
                    node.events.push(e);
                }
            }
            if !any {
                break;
            }
        }
    }

    fn send(&mut self, dir: Dir, src: SocketAddr, t: Transmit) {
        let d = self.counter.datagram(dir, self.now, src, t.dst, t.payload);
        net::transmit(d, &mut self.filter, self.delay, &mut self.log, &mut self.wire);
    }

    /// Hands `d` to the endpoint it is addressed to.
    fn deliver(&mut self, mut d: Datagram) {
        let now = self.now;
        let endpoint = match d.dir {
            Dir::ToServer => &mut self.server,
            Dir::ToClient => match self.more_clients.iter_mut().find(|n| n.addr == d.dst) {
                Some(node) => &mut node.endpoint,
                None => &mut self.client,
            },
        };
        endpoint.handle_datagram(now, d.dst, d.src, &mut d.payload);
    }

    fn next_timer(&self) -> Option<Instant> {
        let more = self.more_clients.iter().filter_map(|n| n.endpoint.poll_timeout());
        [self.client.poll_timeout(), self.server.poll_timeout()].into_iter().flatten().chain(more).min()
    }

    /// Runs until nothing is on the wire and no timer is due within `limit`.
    pub fn run_for(&mut self, limit: Duration) {
        let end = self.now + limit;
        self.run_until(end, |_| false);
    }

    /// Runs until `done` holds or the clock would pass `end` (it then stops at `end`); returns
    /// whether `done` held. Returns false at once, the clock where it is, when nothing at all
    /// is left to happen.
    pub fn run_until(&mut self, end: Instant, mut done: impl FnMut(&Pair) -> bool) -> bool {
        for _ in 0..1_000_000 {
            self.collect();
            if done(self) {
                return true;
            }
            let Some(next) = [self.wire.next_arrival(), self.next_timer()].into_iter().flatten().min() else {
                return false;
            };
            if next > end {
                self.now = end;
                return false;
            }
            self.now = self.now.max(next);
            if let Some(d) = self.wire.pop_due(self.now, |_| true) {
                self.deliver(d);
                continue;
            }
            let now = self.now;
            let more = self.more_clients.iter_mut().map(|n| &mut n.endpoint);
            for endpoint in [&mut self.client, &mut self.server].into_iter().chain(more) {
                if endpoint.poll_timeout().is_some_and(|t| t <= now) {
                    endpoint.handle_timeout(now);
                }
            }
        }
        panic!("the pair did not settle");
    }

    pub fn client_connected(&self) -> Option<&Event> {
        self.client_events.iter().map(|(_, e)| e).find(|e| matches!(e, Event::Connected { .. }))
    }

    pub fn server_connected(&self) -> Option<&Event> {
        self.server_events.iter().map(|(_, e)| e).find(|e| matches!(e, Event::Connected { .. }))
    }

    pub fn both_connected(&self) -> bool {
        self.client_connected().is_some() && self.server_connected().is_some()
    }

    /// Every message the server received, in order.
    pub fn server_messages(&self) -> Vec<Message> {
        messages(&self.server_events)
    }

    /// Every message the client received, in order.
    pub fn client_messages(&self) -> Vec<Message> {
        messages(&self.client_events)
    }

    /// The datagrams of the log with a chunk of `chunk_type`.
    pub fn sent_with(&self, chunk_type: u8) -> Vec<&Datagram> {
        self.log.iter().filter(|d| d.chunk_types().contains(&chunk_type)).collect()
    }
}
