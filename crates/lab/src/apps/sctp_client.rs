//! An SCTP client app (over UDP encapsulation, RFC 6951) that opens associations one after
//! another and exchanges numbered messages with an echo server ([`super::sctp_server`]).
//!
//! Association `k` (from 0) is its own [`Endpoint`] on SCTP port `base_port + k`, so the server
//! never takes a later one for a restart of an earlier one (RFC 9260 §5.2.4) while the UDP port
//! stays the app's. On each: the handshake the client's mode offers (regular, or the alternative
//! of seed 004 with its ALT-COOKIE), the first message in the INIT's ALT-DATA when
//! [`SctpPlan::zero_rtt`], and from the second association on the ALT-COOKIE the server gave
//! before when [`SctpPlan::cache_cookie`] (one round trip). Then `messages` messages one at a
//! time, each sent once its predecessor's echo is back (SCTP delivers them reliably), then a
//! graceful SHUTDOWN; the next association opens `interval` after it closed.

use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_sctp::{AssociationHandle, Config, ConnectOptions, Endpoint, Event, HandshakeKind, Message};
use fastshake_sim::apps::{App, AppStats, HandshakeStats, NodeEvent};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::dtls_client::SeedTemplate;

/// What an [`SctpClientLoop`] does.
#[derive(Clone, Debug)]
pub struct SctpPlan {
    /// The server's UDP address.
    pub server: SocketAddr,
    /// The server's SCTP port.
    pub server_port: u16,
    /// Association `k` uses SCTP port `base_port + k`.
    pub base_port: u16,
    /// Associations to open, one after another.
    pub associations: u32,
    /// Messages per association.
    pub messages: u32,
    /// Bytes of each message (at least its 9-byte header).
    pub message_len: usize,
    /// Send the first message in the INIT (seed 004's ALT-DATA; after the handshake otherwise).
    pub zero_rtt: bool,
    /// Offer the ALT-COOKIE of an earlier association.
    pub cache_cookie: bool,
    /// When the first association opens.
    pub first_start: Instant,
    /// Pause between an association's end and the next one.
    pub interval: Duration,
    /// Engine settings; `local_port` and `listen` are set per association.
    pub config: Config,
    /// Engine seeds, one per association.
    pub seeds: SeedTemplate,
}

/// Stream and payload protocol identifier of the messages.
const STREAM: u16 = 0;
const PPID: u32 = 0;
const TAG: u8 = b'S';
const HEADER: usize = 9;

/// Message `seq` of association `index`: tag, association, number, zero padding.
fn message(index: u32, seq: u32, len: usize) -> Message {
    let mut data = vec![0u8; len.max(HEADER)];
    data[0] = TAG;
    data[1..5].copy_from_slice(&index.to_be_bytes());
    data[5..9].copy_from_slice(&seq.to_be_bytes());
    Message { stream: STREAM, unordered: false, ppid: PPID, data }
}

fn parse(data: &[u8]) -> Option<(u32, u32)> {
    if data.len() < HEADER || data[0] != TAG {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
    Some((word(1), word(5)))
}

/// An SCTP handshake's kind as the scenario summary names it; `+0rtt` when data rode in the
/// INIT and the server took it.
pub fn sctp_kind(kind: HandshakeKind, zero_rtt_accepted: usize) -> String {
    let name = match kind {
        HandshakeKind::Regular => "regular",
        HandshakeKind::AltCookie => "alt-cookie",
        HandshakeKind::AltCached => "alt-cached",
        HandshakeKind::Cookieless => "cookieless",
        HandshakeKind::Snap => "snap",
    };
    if zero_rtt_accepted > 0 {
        format!("{name}+0rtt")
    } else {
        name.to_owned()
    }
}

/// The association in progress.
struct Current {
    index: u32,
    port: u16,
    handle: AssociationHandle,
    started: Instant,
    connected: bool,
    /// Messages sent (the next one's number), and when the one in flight went.
    sent: u32,
    sent_at: Instant,
    echoed: u32,
    closing: bool,
}

/// Runs [`SctpPlan`] (see the module documentation).
pub struct SctpClientLoop {
    plan: SctpPlan,
    /// The app's UDP port.
    udp_port: u16,
    local_ip: Option<Ipv4Addr>,
    /// Every association's endpoint by SCTP port. An ended one stays: it answers a SHUTDOWN-ACK
    /// the server sends again (its SHUTDOWN-COMPLETE was lost) with another (RFC 9260 §8.4).
    endpoints: BTreeMap<u16, Endpoint>,
    current: Option<Current>,
    next_index: u32,
    next_start_at: Option<Instant>,
    cookie: Option<Vec<u8>>,
    handshakes: HandshakeStats,
    stats: AppStats,
    /// Associations whose messages were all echoed.
    pub associations_done: u32,
}

impl SctpClientLoop {
    /// A client on UDP port `udp_port` that runs `plan`.
    pub fn new(plan: SctpPlan, udp_port: u16) -> Self {
        let next_start_at = (plan.associations > 0).then_some(plan.first_start);
        let handshakes = HandshakeStats { planned: Some(u64::from(plan.associations)), ..Default::default() };
        SctpClientLoop {
            plan,
            udp_port,
            local_ip: None,
            endpoints: BTreeMap::new(),
            current: None,
            next_index: 0,
            next_start_at,
            cookie: None,
            handshakes,
            stats: AppStats::default(),
            associations_done: 0,
        }
    }

    fn start(&mut self, now: Instant) {
        let index = self.next_index;
        self.next_index += 1;
        let port = self.plan.base_port.wrapping_add(index as u16);
        let config = Config { local_port: port, listen: false, ..self.plan.config.clone() };
        let mut endpoint = Endpoint::new(Arc::new(config), self.plan.seeds.for_index(u64::from(index) + 1));
        let local = self.local_ip.map(|ip| SocketAddr::from((ip, self.udp_port)));
        let zero_rtt = if self.plan.zero_rtt && self.plan.messages > 0 {
            vec![message(index, 0, self.plan.message_len)]
        } else {
            Vec::new()
        };
        let sent = zero_rtt.len() as u32;
        self.stats.requests_sent += u64::from(sent);
        let cached_cookie = if self.plan.cache_cookie { self.cookie.clone() } else { None };
        let options = ConnectOptions { zero_rtt, cached_cookie };
        let handle = endpoint.connect(now, local, self.plan.server, self.plan.server_port, options);
        self.endpoints.insert(port, endpoint);
        self.current = Some(Current {
            index,
            port,
            handle,
            started: now,
            connected: false,
            sent,
            sent_at: now,
            echoed: 0,
            closing: false,
        });
    }

    /// Handles what every endpoint reported; the association in progress may move on or end.
    fn drain(&mut self, now: Instant) {
        let ports: Vec<u16> = self.endpoints.keys().copied().collect();
        for port in ports {
            while let Some((handle, event)) = self.endpoints.get_mut(&port).and_then(Endpoint::poll_event) {
                if let Event::AltCookie { cookie, .. } = &event {
                    self.cookie = Some(cookie.clone());
                    continue;
                }
                let current = self.current.as_ref().is_some_and(|c| c.port == port && c.handle == handle);
                if current {
                    self.on_event(now, event);
                }
            }
        }
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        let Some(c) = self.current.as_mut() else { return };
        let endpoint = self.endpoints.get_mut(&c.port);
        match event {
            Event::Connected { handshake, zero_rtt_accepted, .. } => {
                c.connected = true;
                let bytes = endpoint
                    .and_then(|e| e.association(c.handle))
                    .map_or(0, |a| a.stats.bytes_in + a.stats.bytes_out);
                let took = now.saturating_duration_since(c.started).as_nanos() as u64;
                self.handshakes.complete(&sctp_kind(handshake, zero_rtt_accepted), Some(took), bytes);
                self.next_message(now);
            }
            Event::Message(m) => {
                let Some((index, seq)) = parse(&m.data) else { return };
                if index != c.index || seq != c.echoed || seq >= c.sent {
                    return;
                }
                c.echoed += 1;
                self.stats.replies += 1;
                self.stats.rtts_ns.push(now.saturating_duration_since(c.sent_at).as_nanos() as u64);
                self.next_message(now);
            }
            Event::Closed => self.end(now),
            Event::Aborted { .. } | Event::Failed(_) => {
                if c.connected {
                    self.handshakes.sessions_failed += 1;
                } else {
                    self.handshakes.failed += 1;
                }
                self.end(now);
            }
            // The lab's applications use no stream reset (RFC 6525).
            Event::AltCookie { .. }
            | Event::IncomingStreamsReset { .. }
            | Event::OutgoingStreamsReset { .. } => {}
        }
    }

    /// Sends the next message once the last one is echoed, or shuts down after the last.
    fn next_message(&mut self, now: Instant) {
        let Some(c) = self.current.as_mut().filter(|c| c.connected && !c.closing) else { return };
        let Some(endpoint) = self.endpoints.get_mut(&c.port) else { return };
        if c.echoed < c.sent {
            return;
        }
        if c.sent < self.plan.messages {
            if endpoint.send(c.handle, message(c.index, c.sent, self.plan.message_len)).is_ok() {
                c.sent += 1;
                c.sent_at = now;
                self.stats.requests_sent += 1;
            }
            return;
        }
        c.closing = true;
        self.associations_done += 1;
        endpoint.shutdown(c.handle);
    }

    fn end(&mut self, now: Instant) {
        self.current = None;
        if self.next_index < self.plan.associations {
            self.next_start_at = Some(now + self.plan.interval);
        } else if self.associations_done == self.plan.associations {
            self.stats.completed_at_ns = Some(now.as_nanos());
        }
    }
}

impl SansIo for SctpClientLoop {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        // The SCTP common header's destination port picks the association's endpoint.
        let Some(port) = datagram.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]])) else { return };
        let Some(endpoint) = self.endpoints.get_mut(&port) else { return };
        endpoint.handle_datagram(now, local, remote, datagram);
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.endpoints.values_mut().find_map(|e| e.poll_transmit(now))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoints.values().filter_map(Endpoint::poll_timeout).chain(self.next_start_at).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        for endpoint in self.endpoints.values_mut() {
            if endpoint.poll_timeout().is_some_and(|t| t <= now) {
                endpoint.handle_timeout(now);
            }
        }
        if self.current.is_none() && self.next_start_at.is_some_and(|t| t <= now) {
            self.next_start_at = None;
            self.start(now);
        }
        self.drain(now);
    }
}

impl App for SctpClientLoop {
    fn handle_node_event(&mut self, _now: Instant, event: &NodeEvent) {
        match event {
            NodeEvent::InterfaceUp { addr, .. } => self.local_ip = Some(*addr),
            NodeEvent::AddressChanged { new, .. } => self.local_ip = Some(*new),
            NodeEvent::InterfaceDown { .. } => {}
        }
    }

    fn stats(&self) -> Option<AppStats> {
        Some(self.stats.clone())
    }

    fn handshakes(&self) -> Option<HandshakeStats> {
        Some(self.handshakes.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
