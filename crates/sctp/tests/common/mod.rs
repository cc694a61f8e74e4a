//! An in-memory pair of endpoints on virtual time: fixed one-way delay, optional jitter,
//! a loss rule, and a log of every datagram.
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use fastshake_sctp::packet::{Chunk, Packet};
use fastshake_sctp::{AssociationHandle, Config, Endpoint, Event, HandshakeMode, Instant, Message, Transmit};

pub const CLIENT_PORT: u16 = 5001;
pub const SERVER_PORT: u16 = 5000;

pub fn client_addr() -> SocketAddr {
    "10.0.0.1:9899".parse().unwrap()
}
pub fn client_addr2() -> SocketAddr {
    "10.0.1.1:9899".parse().unwrap()
}
pub fn server_addr() -> SocketAddr {
    "10.0.0.2:9899".parse().unwrap()
}

pub fn client_config(mode: HandshakeMode) -> Config {
    Config { local_port: CLIENT_PORT, mode, listen: false, ..Config::default() }
}

pub fn server_config(mode: HandshakeMode) -> Config {
    Config { local_port: SERVER_PORT, mode, listen: true, ..Config::default() }
}

#[derive(Clone, Debug)]
pub struct Sent {
    pub at: Instant,
    pub to_server: bool,
    pub src: Option<SocketAddr>,
    pub dst: SocketAddr,
    pub payload: Vec<u8>,
    pub dropped: bool,
}

impl Sent {
    pub fn packet(&self) -> Packet {
        Packet::parse(&self.payload).expect("engine sent a malformed packet")
    }
    pub fn chunk_types(&self) -> Vec<u8> {
        self.packet().chunks.iter().map(Chunk::chunk_type).collect()
    }
}

type LossRule = Box<dyn FnMut(usize, &Sent) -> bool>;

pub struct Pair {
    pub now: Instant,
    pub client: Endpoint,
    pub server: Endpoint,
    pub delay: Duration,
    /// Extra delay per datagram from this pseudo-random sequence (reordering), if set.
    pub jitter: Option<(Duration, u64)>,
    in_flight: Vec<(Instant, u64, Sent)>,
    seq: u64,
    pub loss: LossRule,
    pub log: Vec<Sent>,
    pub client_events: Vec<(AssociationHandle, Event)>,
    pub server_events: Vec<(AssociationHandle, Event)>,
    pub client_ips: Vec<IpAddr>,
    /// The server sends every message it receives back on the same association.
    pub echo: bool,
    /// Rewrites the UDP source port of the client's datagrams (a NAT rebinding).
    pub client_nat_port: Option<u16>,
}

impl Pair {
    pub fn new(client: Config, server: Config) -> Pair {
        Pair {
            now: Instant::from_millis(1_000),
            client: Endpoint::new(Arc::new(client), [1; 32]),
            server: Endpoint::new(Arc::new(server), [2; 32]),
            delay: Duration::from_millis(10),
            jitter: None,
            in_flight: Vec::new(),
            seq: 0,
            loss: Box::new(|_, _| false),
            log: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            client_ips: vec![client_addr().ip(), client_addr2().ip()],
            echo: false,
            client_nat_port: None,
        }
    }

    pub fn rtt(&self) -> Duration {
        self.delay * 2
    }

    pub fn connect(&mut self, opts: fastshake_sctp::ConnectOptions) -> AssociationHandle {
        self.client.connect(self.now, Some(client_addr()), server_addr(), SERVER_PORT, opts)
    }

    fn collect(&mut self) {
        loop {
            let mut any = false;
            while let Some(t) = self.client.poll_transmit(self.now) {
                any = true;
                self.schedule(t, true);
            }
            while let Some(t) = self.server.poll_transmit(self.now) {
                any = true;
                self.schedule(t, false);
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
            if !any {
                break;
            }
        }
    }

    fn schedule(&mut self, t: Transmit, from_client: bool) {
        let to_server = !self.client_ips.contains(&t.dst.ip());
        let mut src = t.src;
        if let (true, Some(port)) = (from_client, self.client_nat_port) {
            src = Some(std::net::SocketAddr::new(src.map_or(client_addr().ip(), |s| s.ip()), port));
        }
        let mut sent = Sent { at: self.now, to_server, src, dst: t.dst, payload: t.payload, dropped: false };
        let index = self.log.len();
        sent.dropped = (self.loss)(index, &sent);
        self.log.push(sent.clone());
        if sent.dropped {
            return;
        }
        let mut delay = self.delay;
        if let Some((max, state)) = self.jitter.as_mut() {
            *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let frac = (*state >> 33) % 1000;
            delay += *max * frac as u32 / 1000;
        }
        self.seq += 1;
        self.in_flight.push((self.now + delay, self.seq, sent));
    }

    /// Runs until nothing is in flight and no timer is due before `limit` after now.
    pub fn run_for(&mut self, limit: Duration) {
        let end = self.now + limit;
        self.run_until(end, |_| false);
    }

    /// Runs until `done` holds or virtual time reaches `end`. Returns whether `done` held.
    pub fn run_until(&mut self, end: Instant, mut done: impl FnMut(&Pair) -> bool) -> bool {
        for _ in 0..1_000_000 {
            self.collect();
            if done(self) {
                return true;
            }
            let arrival = self.in_flight.iter().map(|(t, s, _)| (*t, *s)).min();
            let timers = [self.client.poll_timeout(), self.server.poll_timeout()].into_iter().flatten().min();
            let next = match (arrival.map(|a| a.0), timers) {
                (Some(a), Some(t)) => a.min(t),
                (Some(a), None) => a,
                (None, Some(t)) => t,
                (None, None) => return false,
            };
            if next > end {
                self.now = end;
                return false;
            }
            self.now = self.now.max(next);
            if let Some((at, seq)) = arrival {
                if at <= self.now {
                    let i = self.in_flight.iter().position(|(t, s, _)| *t == at && *s == seq).unwrap();
                    let (_, _, sent) = self.in_flight.remove(i);
                    let mut buf = sent.payload.clone();
                    let local = sent.dst;
                    let remote =
                        sent.src.unwrap_or(if sent.to_server { client_addr() } else { server_addr() });
                    if sent.to_server {
                        self.server.handle_datagram(self.now, local, remote, &mut buf);
                    } else {
                        self.client.handle_datagram(self.now, local, remote, &mut buf);
                    }
                    continue;
                }
            }
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
            }
        }
        panic!("pair did not settle");
    }

    pub fn client_connected(&self) -> Option<&Event> {
        self.client_events.iter().map(|(_, e)| e).find(|e| matches!(e, Event::Connected { .. }))
    }

    pub fn server_connected(&self) -> Option<&Event> {
        self.server_events.iter().map(|(_, e)| e).find(|e| matches!(e, Event::Connected { .. }))
    }

    pub fn server_messages(&self) -> Vec<Message> {
        messages(&self.server_events)
    }

    pub fn client_messages(&self) -> Vec<Message> {
        messages(&self.client_events)
    }

    pub fn both_connected(&self) -> bool {
        self.client_connected().is_some() && self.server_connected().is_some()
    }

    /// Datagrams of the log containing a chunk of `chunk_type`.
    pub fn sent_with(&self, chunk_type: u8) -> Vec<&Sent> {
        self.log.iter().filter(|s| s.chunk_types().contains(&chunk_type)).collect()
    }
}

pub fn messages(events: &[(AssociationHandle, Event)]) -> Vec<Message> {
    events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Message(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

pub fn msg(stream: u16, data: &[u8]) -> Message {
    Message { stream, unordered: false, ppid: 51, data: data.to_vec() }
}
