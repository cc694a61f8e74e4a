//! A mobile DTLS client app (seed 001's workload, E1's client): one numbered request outstanding
//! at a time over one session, from one port, across the handovers of one or two interfaces.
//!
//! The requests and echoes are [`super::records`]. Each request is sent again when the
//! application timeout expires without its echo, and at once when the interface it left on goes
//! down while another is up, or comes back up. With [`MobilePlan::reconnect_on_timeout`]
//! (standard DTLS) the timeout of a request first sent on the session instead declares the
//! session broken, and a new handshake starts from the current address (resuming the last
//! session with [`MobilePlan::resume`]); the numbering carries on across sessions. The first
//! interface is preferred (as a lower route metric would make it); the other is used while it is
//! down. A handshake whose address went away starts again.

use super::dtls_client::SeedTemplate;
use super::records::{self, RequestId};
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_dtls::{ClientConfig, ClientSession, Connection, Event};
use fastshake_sim::apps::{App, NodeEvent};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// What a [`MobileClient`] does.
#[derive(Clone, Debug)]
pub struct MobilePlan {
    /// The server's address.
    pub server: SocketAddr,
    /// Requests in all (each acknowledged before the next goes out); at most 65,536.
    pub requests: u32,
    /// Bytes of each request.
    pub request_len: usize,
    /// The application timeout.
    pub app_timeout: Duration,
    /// Standard DTLS: a timeout declares the session broken (see the module documentation).
    pub reconnect_on_timeout: bool,
    /// A new session resumes the last one.
    pub resume: bool,
    /// Engine seeds: handshake `k` (from 1) gets `seeds.for_index_at(k, seed_index_at)`.
    pub seeds: SeedTemplate,
    pub seed_index_at: usize,
}

/// What the client saw.
#[derive(Clone, Debug, Default)]
pub struct MobileTally {
    /// Echoes received per request number.
    pub acks: Vec<u32>,
    /// Handshakes completed, and of those resumed ones.
    pub handshakes: u32,
    pub resumed_handshakes: u32,
    /// Times the session was declared broken.
    pub reconnections: u32,
    /// Interface outages that began before the last echo.
    pub outages: u32,
    /// Requests sent again.
    pub resends: u32,
    /// Times the session followed the server to another port.
    pub path_changes: u32,
    /// The fastest round trip of a request sent once.
    pub fastest_round_trip: Option<Duration>,
    /// When the last echo arrived.
    pub done_at: Option<Instant>,
}

struct ClientIface {
    name: String,
    addr: Ipv4Addr,
    up: bool,
}

/// The request in flight on the current session.
struct Outstanding {
    /// The interface it last went out on.
    iface: usize,
    /// When it last went out, and how often it went out: a request sent once and echoed gives
    /// one round trip of the path.
    sent_at: Instant,
    sends: u32,
}

/// The client app (see the module documentation).
pub struct MobileClient {
    config: Arc<ClientConfig>,
    plan: MobilePlan,
    ifaces: Vec<ClientIface>,
    /// The interface in use; kept until it goes down.
    current: Option<usize>,
    conn: Option<Connection>,
    /// The address a handshake in progress was started from.
    handshake_from: Option<Ipv4Addr>,
    /// A new session is needed as soon as an interface is up.
    reconnect_wanted: bool,
    last_session: Option<ClientSession>,
    /// The request to be echoed next.
    next_seq: u32,
    outstanding: Option<Outstanding>,
    /// With `reconnect_on_timeout`: when the session counts as broken. Otherwise: when to resend.
    app_deadline: Option<Instant>,
    handshakes_started: u64,
    pub tally: MobileTally,
}

impl MobileClient {
    /// A client with `config` that runs `plan`; it starts when its first interface comes up.
    pub fn new(config: Arc<ClientConfig>, plan: MobilePlan) -> Self {
        let tally = MobileTally { acks: vec![0; plan.requests as usize], ..MobileTally::default() };
        MobileClient {
            config,
            plan,
            ifaces: Vec::new(),
            current: None,
            conn: None,
            handshake_from: None,
            reconnect_wanted: false,
            last_session: None,
            next_seq: 0,
            outstanding: None,
            app_deadline: None,
            handshakes_started: 0,
            tally,
        }
    }

    fn usable_addr(&self) -> Option<Ipv4Addr> {
        let i = self.current?;
        self.ifaces.get(i).filter(|f| f.up).map(|f| f.addr)
    }

    fn start_handshake(&mut self, now: Instant) {
        self.outstanding = None;
        self.app_deadline = None;
        let Some(addr) = self.usable_addr() else {
            self.conn = None;
            self.handshake_from = None;
            self.reconnect_wanted = true;
            return;
        };
        self.reconnect_wanted = false;
        self.handshakes_started += 1;
        let seed = self.plan.seeds.for_index_at(self.handshakes_started, self.plan.seed_index_at);
        let session = if self.plan.resume { self.last_session.clone() } else { None };
        let (config, server) = (self.config.clone(), self.plan.server);
        let conn = match session {
            Some(s) => Connection::client_with_session(config, now, server, seed, Some(s)),
            None => Connection::client(config, now, server, seed),
        };
        self.conn = Some(conn);
        self.handshake_from = Some(addr);
    }

    /// Sends (or sends again) request `next_seq` on an established session.
    fn send_request(&mut self, now: Instant) {
        if self.tally.done_at.is_some() || self.usable_addr().is_none() {
            return;
        }
        let Some(conn) = self.conn.as_mut().filter(|c| c.is_established()) else { return };
        let sends = self.outstanding.as_ref().map_or(0, |o| o.sends) + 1;
        let id = RequestId { seq: self.next_seq as u16, attempt: (sends - 1) as u16 };
        if conn.send(&records::request(id, self.plan.request_len)).is_err() {
            return;
        }
        let first_on_session = self.outstanding.is_none();
        if !first_on_session {
            self.tally.resends += 1;
        }
        // Standard DTLS times the session from the request's first send on it; the others time
        // each send.
        if !self.plan.reconnect_on_timeout || first_on_session {
            self.app_deadline = Some(now + self.plan.app_timeout);
        }
        let iface = self.current.unwrap_or(0);
        self.outstanding = Some(Outstanding { iface, sent_at: now, sends });
    }

    fn drain(&mut self, now: Instant) {
        loop {
            let Some(event) = self.conn.as_mut().and_then(Connection::poll_event) else { break };
            match event {
                Event::Connected(summary) => {
                    self.tally.handshakes += 1;
                    if summary.resumed {
                        self.tally.resumed_handshakes += 1;
                    }
                    if summary.session.is_some() {
                        self.last_session = summary.session;
                    }
                    self.handshake_from = None;
                    self.send_request(now);
                }
                Event::ApplicationData(data) => self.on_echo(now, &data),
                Event::PathChanged(_) => self.tally.path_changes += 1,
                // A DTLS 1.3 ticket comes after the handshake.
                Event::SessionTicket(session) => self.last_session = Some(session),
                Event::Accepted | Event::Evicted { .. } | Event::Refused { .. } => {}
                Event::Closed | Event::Failed(_) => {
                    self.conn = None;
                    self.handshake_from = None;
                    if self.tally.done_at.is_none() {
                        self.start_handshake(now);
                    }
                }
            }
        }
    }

    fn on_echo(&mut self, now: Instant, data: &[u8]) {
        let Some((id, _)) = records::parse_echo(data) else { return };
        let seq = u32::from(id.seq);
        let Some(count) = self.tally.acks.get_mut(seq as usize) else { return };
        *count += 1;
        if seq != self.next_seq || *count != 1 {
            return;
        }
        if let Some(o) = self.outstanding.as_ref().filter(|o| o.sends == 1) {
            let rtt = now.saturating_duration_since(o.sent_at);
            let fastest = &mut self.tally.fastest_round_trip;
            *fastest = Some(fastest.map_or(rtt, |f| f.min(rtt)));
        }
        self.next_seq += 1;
        self.outstanding = None;
        self.app_deadline = None;
        if self.next_seq == self.plan.requests {
            self.tally.done_at = Some(now);
        } else {
            self.send_request(now);
        }
    }

    fn on_app_timeout(&mut self, now: Instant) {
        self.app_deadline = None;
        if self.tally.done_at.is_some() {
            return;
        }
        if self.plan.reconnect_on_timeout {
            if self.conn.as_ref().is_some_and(Connection::is_established) {
                self.tally.reconnections += 1;
                self.start_handshake(now);
            }
        } else {
            // Resent now, or when an interface comes up (the outstanding request stays).
            self.send_request(now);
        }
    }

    fn iface_index(&self, name: &str) -> Option<usize> {
        self.ifaces.iter().position(|f| f.name == name)
    }

    /// After a change of interfaces: a handshake whose address is gone starts again.
    fn handshake_address_gone(&mut self, now: Instant) {
        if let Some(from) = self.handshake_from {
            if self.usable_addr() != Some(from) {
                self.start_handshake(now);
            }
        }
    }
}

impl SansIo for MobileClient {
    fn handle_datagram(&mut self, now: Instant, _local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        if let Some(conn) = &mut self.conn {
            conn.handle_datagram(now, remote, datagram);
        }
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let transmit = self.conn.as_mut()?.poll_transmit(now)?;
        let iface = self.current.unwrap_or(0);
        let src = self.ifaces.get(iface).map(|f| SocketAddr::from((f.addr, 0)));
        Some(Transmit { src, ..transmit })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.tally.done_at.is_some() {
            return None;
        }
        let conn = self.conn.as_ref().and_then(Connection::poll_timeout);
        match (conn, self.app_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(conn) = &mut self.conn {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
        self.drain(now);
        if self.app_deadline.is_some_and(|t| t <= now) {
            self.on_app_timeout(now);
        }
    }
}

impl App for MobileClient {
    fn handle_node_event(&mut self, now: Instant, event: &NodeEvent) {
        match event {
            NodeEvent::InterfaceUp { iface, addr } => {
                let idx = match self.iface_index(iface) {
                    Some(i) => i,
                    None => {
                        self.ifaces.push(ClientIface { name: iface.clone(), addr: *addr, up: true });
                        self.ifaces.len() - 1
                    }
                };
                self.ifaces[idx].up = true;
                self.ifaces[idx].addr = *addr;
                // The first interface is preferred: the client returns to it once it is back,
                // from the next request on, and uses the other one only while it is down.
                if self.current.and_then(|c| self.ifaces.get(c)).is_none_or(|f| !f.up)
                    || self.current.is_some_and(|c| idx < c)
                {
                    self.current = Some(idx);
                }
                if self.tally.done_at.is_some() {
                    return;
                }
                if self.conn.is_none() || self.reconnect_wanted {
                    self.start_handshake(now);
                    return;
                }
                self.handshake_address_gone(now);
                let left_here = self.outstanding.as_ref().is_some_and(|o| o.iface == idx);
                let waiting = self.outstanding.is_some() && self.app_deadline.is_none();
                if self.current == Some(idx) && (left_here || waiting) {
                    self.send_request(now);
                }
            }
            NodeEvent::InterfaceDown { iface, .. } => {
                let Some(idx) = self.iface_index(iface) else { return };
                self.ifaces[idx].up = false;
                if self.tally.done_at.is_some() {
                    return;
                }
                self.tally.outages += 1;
                if self.current == Some(idx) {
                    self.current = self.ifaces.iter().position(|f| f.up).or(Some(idx));
                }
                self.handshake_address_gone(now);
                let moved = self.usable_addr().is_some();
                if moved && self.outstanding.as_ref().is_some_and(|o| o.iface == idx) {
                    self.send_request(now);
                }
            }
            NodeEvent::AddressChanged { iface, new, .. } => {
                if let Some(idx) = self.iface_index(iface) {
                    self.ifaces[idx].addr = *new;
                }
                self.handshake_address_gone(now);
            }
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
