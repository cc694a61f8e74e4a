//! An in-memory client/server pair on virtual time, with a programmable network between them.
#![allow(dead_code)]

use fastshake_dtls::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, Event, HandshakeSummary, Instant, ServerConfig,
};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const PSK_ID: &[u8] = b"Client_identity";
pub const PSK_KEY: &[u8] = &[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    ToServer,
    ToClient,
}

/// What the network does with one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    Duplicate,
    /// Delivered once, this much later than the link's delay.
    Late(Duration),
    /// Delivered on time, and a copy this much later.
    DuplicateLate(Duration),
}

/// Decides each datagram's fate: direction, index of the datagram in that direction (from 0), payload.
pub type Filter = Box<dyn FnMut(Dir, usize, &[u8]) -> Fate>;

pub struct Pair {
    pub now: Instant,
    pub client: Connection,
    pub server: Endpoint,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    /// One-way delay of the link.
    pub delay: Duration,
    /// Reverse the order of the datagrams emitted in one burst.
    pub reorder: bool,
    /// Pack the datagrams of one burst into one datagram, as a sender that writes a whole
    /// flight (or a flight and data) at once does.
    pub coalesce: bool,
    /// A datagram longer than this leaves as two: its first bytes, then the rest (a sender that
    /// flushes a fixed-size write buffer mid-record, as OpenSSL 3.0 does at 4096 bytes).
    pub split_over: Option<usize>,
    pub filter: Filter,
    to_server: VecDeque<(Instant, Vec<u8>)>,
    to_client: VecDeque<(Instant, Vec<u8>)>,
    pub sent_to_server: usize,
    pub sent_to_client: usize,
    pub client_events: Vec<Event>,
    pub server_events: Vec<(ConnectionHandle, Event)>,
    /// Every datagram that crossed the network, for corpus capture.
    pub log: Vec<(Dir, Vec<u8>)>,
}

pub fn client_config() -> ClientConfig {
    ClientConfig::psk(PSK_ID, PSK_KEY)
}

pub fn server_config() -> ServerConfig {
    ServerConfig::psk(PSK_ID, PSK_KEY)
}

impl Pair {
    pub fn new(client: ClientConfig, server: ServerConfig) -> Pair {
        Self::with_seed(client, server, 1)
    }

    pub fn with_seed(client: ClientConfig, server: ServerConfig, seed: u8) -> Pair {
        let client_addr: SocketAddr = "192.0.2.1:5684".parse().unwrap();
        let server_addr: SocketAddr = "198.51.100.1:5684".parse().unwrap();
        let now = Instant::from_millis(1_000);
        Pair {
            now,
            client: Connection::client(Arc::new(client), now, server_addr, [seed; 32]),
            server: Endpoint::new(Arc::new(server), [seed.wrapping_add(100); 32]),
            client_addr,
            server_addr,
            delay: Duration::from_millis(10),
            reorder: false,
            coalesce: false,
            split_over: None,
            filter: Box::new(|_, _, _| Fate::Deliver),
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            sent_to_server: 0,
            sent_to_client: 0,
            client_events: Vec::new(),
            server_events: Vec::new(),
            log: Vec::new(),
        }
    }

    /// A new client connection on the same address (same 4-tuple), replacing the old one.
    pub fn new_client(&mut self, config: ClientConfig, seed: u8) {
        self.client = Connection::client(Arc::new(config), self.now, self.server_addr, [seed; 32]);
    }

    fn collect(&mut self) {
        let mut burst = Vec::new();
        while let Some(t) = self.client.poll_transmit(self.now) {
            burst.push(t.payload);
        }
        self.enqueue(Dir::ToServer, burst);
        let mut burst = Vec::new();
        while let Some(t) = self.server.poll_transmit(self.now) {
            assert_eq!(t.dst, self.client_addr);
            burst.push(t.payload);
        }
        self.enqueue(Dir::ToClient, burst);
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
    }

    fn enqueue(&mut self, dir: Dir, mut burst: Vec<Vec<u8>>) {
        if self.reorder {
            burst.reverse();
        }
        if self.coalesce && burst.len() > 1 {
            burst = vec![burst.concat()];
        }
        if let Some(n) = self.split_over {
            burst = burst
                .into_iter()
                .flat_map(|d| if d.len() > n { vec![d[..n].to_vec(), d[n..].to_vec()] } else { vec![d] })
                .collect();
        }
        for d in burst {
            let index = match dir {
                Dir::ToServer => &mut self.sent_to_server,
                Dir::ToClient => &mut self.sent_to_client,
            };
            let i = *index;
            *index += 1;
            let fate = (self.filter)(dir, i, &d);
            self.log.push((dir, d.clone()));
            let on_time = self.now + self.delay;
            let arrivals = match fate {
                Fate::Deliver => vec![on_time],
                Fate::Drop => vec![],
                Fate::Duplicate => vec![on_time, on_time],
                Fate::Late(extra) => vec![on_time + extra],
                Fate::DuplicateLate(extra) => vec![on_time, on_time + extra],
            };
            for at in arrivals {
                let queue = match dir {
                    Dir::ToServer => &mut self.to_server,
                    Dir::ToClient => &mut self.to_client,
                };
                // Arrival order: by time, and in sending order at the same time.
                let i = queue.partition_point(|(t, _)| *t <= at);
                queue.insert(i, (at, d.clone()));
            }
        }
    }

    /// One step: deliver what is due, else advance time to the next arrival or timer.
    /// Returns false when nothing is left to happen before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.collect();
        let next_arrival =
            [self.to_server.front(), self.to_client.front()].into_iter().flatten().map(|(t, _)| *t).min();
        let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()].into_iter().flatten().min();
        let Some(next) = [next_arrival, next_timer].into_iter().flatten().min() else { return false };
        if next > limit {
            return false;
        }
        self.now = self.now.max(next);
        let local = self.server_addr;
        while self.to_server.front().is_some_and(|(t, _)| *t <= self.now) {
            let (_, mut d) = self.to_server.pop_front().unwrap();
            self.server.handle_datagram(self.now, local, self.client_addr, &mut d);
            self.collect();
        }
        while self.to_client.front().is_some_and(|(t, _)| *t <= self.now) {
            let (_, mut d) = self.to_client.pop_front().unwrap();
            self.client.handle_datagram(self.now, self.server_addr, &mut d);
            self.collect();
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

    /// Runs until the client and the server connection are both established (or failed),
    /// at most `max` of virtual time. Returns the summaries when both connected.
    pub fn handshake(&mut self, max: Duration) -> Option<(HandshakeSummary, HandshakeSummary)> {
        let limit = self.now + max;
        loop {
            let c = self.client_summary();
            let s = self.server_summary();
            if let (Some(c), Some(s)) = (c, s) {
                // Let the last flight land (and any retransmission it triggers).
                return Some((c, s));
            }
            if self.client.is_closed() || !self.step(limit) {
                return None;
            }
        }
    }

    pub fn client_summary(&self) -> Option<HandshakeSummary> {
        self.client_events.iter().find_map(|e| match e {
            Event::Connected(s) => Some(s.clone()),
            _ => None,
        })
    }

    pub fn server_summary(&self) -> Option<HandshakeSummary> {
        self.server_events.iter().rev().find_map(|(_, e)| match e {
            Event::Connected(s) => Some(s.clone()),
            _ => None,
        })
    }

    pub fn server_handle(&self) -> ConnectionHandle {
        self.server.handle_for(self.client_addr).expect("server connection")
    }

    /// Runs for `d` of virtual time (or until nothing is left to do).
    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        while self.step(limit) {}
        self.collect();
    }

    pub fn client_data(&self) -> Vec<Vec<u8>> {
        self.client_events
            .iter()
            .filter_map(|e| match e {
                Event::ApplicationData(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn server_data(&self) -> Vec<Vec<u8>> {
        self.server_events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::ApplicationData(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn client_failure(&self) -> Option<fastshake_dtls::Error> {
        self.client_events.iter().find_map(|e| match e {
            Event::Failed(err) => Some(err.clone()),
            _ => None,
        })
    }

    pub fn server_failure(&self) -> Option<fastshake_dtls::Error> {
        self.server_events.iter().find_map(|(_, e)| match e {
            Event::Failed(err) => Some(err.clone()),
            _ => None,
        })
    }
}
