//! E1: handover resilience (seed 001, Section IV, Fig. 4 and Table I), in the simulator.
//!
//! Workload (seed 001 §IV): a client sends `messages` (600) messages one after the other over
//! DTLS 1.2 (PSK, `TLS_PSK_WITH_AES_128_CCM_8`, this project's engine); the server acknowledges
//! each; the figure is the virtual time from the client's first ClientHello until it holds every
//! acknowledgement (WCT).
//!
//! Topology: client — router — server, or client — router — NAT — server. Every packet in and
//! out of the client is delayed by `delay` (one-way, on the client's access links), so a round
//! trip takes 2 × delay. Every 10 s the client's interface goes down for `outage_ms` and comes
//! back with a new address (a handover: the paper's standard DTLS has to set up a new session
//! after each). Multihomed: two interfaces, each going down every 10 s, interleaved by 5 s. The
//! first outage comes at a time drawn from the seed in [1 s, 10 s], so the seeds sample where
//! the outages fall in the run. No loss and, by default, no jitter: the round trips of 10, 60
//! and 200 ms all divide the 9 s between an interface's return and its next outage, so an
//! outage starts at the very instant an acknowledgement is due; the outage, scheduled first,
//! wins the tie, as it would against any real processing delay, and the round trip in flight
//! is lost whole: about one round trip per handover that no strategy avoids and the ideal bound
//! leaves out. `--jitter-us` adds a uniform jitter on the access links; it can reorder datagrams
//! sent back to back (a Finished and the first message), which the engine then drops.
//!
//! The client's application (the same for every strategy): one message outstanding; it is
//! sent again when the application timeout (1 s, the paper's) expires without its
//! acknowledgement, and at once when the interface it left on goes down while another is up,
//! or comes back up. Standard DTLS additionally declares the session broken when the timeout
//! expires for a message first sent on it, and handshakes anew from its current address. The
//! server's application delivers each message number once per client (keyed by PSK identity,
//! across sessions) and acknowledges every copy.
//!
//! Strategies: standard DTLS with a full or a resumed reconnection, an oracle whose session
//! follows the client's address for free (the check of the analytic ideal bound), and the
//! session-keeping strategies of seed 001 and RFC 9146 (CID, IPC, TCS), which the engine does
//! not offer yet and which are printed as such.

use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_dtls::{
    CipherSuite, ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, Event, ServerConfig,
};
use fastshake_sim::apps::{App, NodeEvent};
use fastshake_sim::dist::Jitter;
use fastshake_sim::link::LinkConfig;
use fastshake_sim::nat::{NatConfig, NatPreset};
use fastshake_sim::{Action, IfaceId, Role, Simulator};
use serde::Serialize;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Seed 001, Table I: gain of DTLS-TCS and DTLS-TCS-multi over standard DTLS, percent, by
/// one-way delay in ms. The paper gives no absolute WCTs (Fig. 4 is a bar chart without values),
/// nor the outage length.
const PAPER_TABLE_I: [(u64, f64, f64); 3] = [(5, 8.35, 16.61), (30, 13.63, 17.48), (100, 15.22, 23.42)];

const OUTAGE_PERIOD_MS: u64 = 10_000;
const MULTIHOMED_INTERLEAVE_MS: u64 = 5_000;
const SERVER_PORT: u16 = 5684;
const CLIENT_PORT: u16 = 40_001;
const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const PSK_IDENTITY: &[u8] = b"e1-client";
const PSK_KEY: [u8; 16] = [0x5a; 16];
/// Message size (seed 001 does not say): a tag, the 4-byte number, padding.
const MESSAGE_LEN: usize = 32;

#[path = "e1_real.rs"]
pub(crate) mod real;

#[derive(clap::Args)]
pub struct Args {
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Messages per run (seed 001: 600).
    #[arg(long, default_value_t = 600)]
    messages: u32,
    /// Runs per cell (seeds 1..=N); the figures are means over them.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Length of each outage, ms (seed 001 does not give it).
    #[arg(long, default_value_t = 1000)]
    outage_ms: u64,
    /// Jitter per packet on the client's access links, uniform in [0, N] µs (may reorder).
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// Application timeout, ms (seed 001: 1 s).
    #[arg(long, default_value_t = 1000)]
    app_timeout_ms: u64,
    /// One-way delays on the client's access links, ms.
    #[arg(long, value_delimiter = ',', default_values_t = vec![5, 30, 100])]
    delays: Vec<u64>,
    /// NAT between router and server: none, full-cone, restricted, port-restricted, symmetric, all.
    #[arg(long, default_value = "none")]
    nat: String,
    /// Run on real sockets in network namespaces instead of the simulator (needs root).
    #[arg(long)]
    real: bool,
}

/// How the session copes with the client's address changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Standard DTLS: a new full handshake after the application timeout.
    StandardFull,
    /// Standard DTLS: a new handshake resuming the previous session.
    StandardResumed,
    /// The session follows the client's address at no cost (no checks): the ideal, measured.
    Oracle,
    /// RFC 9146 Connection ID with return-routability check.
    Cid,
    /// Seed 001's IPC: the session lives on a new non-connected server socket.
    Ipc,
    /// Seed 001's TCS: a temporary connected socket, then a non-connected one.
    Tcs,
}

impl Strategy {
    const ALL: [Strategy; 6] = [
        Strategy::StandardFull,
        Strategy::StandardResumed,
        Strategy::Oracle,
        Strategy::Cid,
        Strategy::Ipc,
        Strategy::Tcs,
    ];

    fn label(self) -> &'static str {
        match self {
            Strategy::StandardFull => "standard DTLS, full reconnection",
            Strategy::StandardResumed => "standard DTLS, resumed reconnection",
            Strategy::Oracle => "oracle (session follows the address for free)",
            Strategy::Cid => "DTLS-CID (RFC 9146)",
            Strategy::Ipc => "DTLS-IPC (seed 001)",
            Strategy::Tcs => "DTLS-TCS (seed 001)",
        }
    }

    /// Whether the client must set up a new session after a handover.
    fn reconnects(self) -> bool {
        matches!(self, Strategy::StandardFull | Strategy::StandardResumed)
    }

    /// Why the strategy cannot run yet, if it cannot.
    fn not_built(self) -> Option<&'static str> {
        match self {
            Strategy::Cid | Strategy::Ipc | Strategy::Tcs => Some("not built yet"),
            _ => None,
        }
    }
}

/// One cell of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// One-way delay on the client's access links, ms.
    pub delay_ms: u64,
    /// Two client interfaces instead of one.
    pub multihomed: bool,
    /// NAT between router and server.
    pub nat: Option<NatPreset>,
}

/// Parameters shared by every cell.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    pub messages: u32,
    pub outage_ms: u64,
    pub app_timeout_ms: u64,
    pub jitter_us: u64,
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunResult {
    pub seed: u64,
    /// When the first outage of interface 0 starts, ms.
    pub first_outage_ms: u64,
    /// Virtual time until the last acknowledgement, seconds; `None` if the run did not finish.
    pub wct_s: Option<f64>,
    /// 600 round trips plus the outage time no protocol can avoid, for this run's outages.
    pub ideal_s: f64,
    /// Handshakes the client completed (full and resumed).
    pub handshakes: u32,
    /// Of those, abbreviated (resumed) ones.
    pub resumed_handshakes: u32,
    /// Times the client declared the session broken.
    pub reconnections: u32,
    /// Interface outages that began before the last acknowledgement.
    pub outages: u32,
    /// Messages sent again by the application.
    pub resends: u32,
    /// Messages the client holds an acknowledgement for.
    pub acknowledged: u32,
    /// Acknowledgements beyond the first of their message (late copies).
    pub late_acks: u32,
    /// Messages the server's application delivered exactly once.
    pub delivered_once: u32,
    /// Messages it delivered more than once (a defect).
    pub delivered_more_than_once: u32,
    /// Copies of messages that reached the server beyond the first (lost acknowledgements).
    pub server_copies_beyond_first: u32,
}

impl RunResult {
    fn tally(&mut self, acks: &[u32], receipts: &[u32], deliveries: &[u32]) {
        self.acknowledged = acks.iter().filter(|&&a| a > 0).count() as u32;
        self.late_acks = acks.iter().map(|a| a.saturating_sub(1)).sum();
        self.delivered_once = deliveries.iter().filter(|&&d| d == 1).count() as u32;
        self.delivered_more_than_once = deliveries.iter().filter(|&&d| d > 1).count() as u32;
        self.server_copies_beyond_first = receipts.iter().map(|r| r.saturating_sub(1)).sum();
    }
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// First outage of interface 0, ms: in [1 s, 10 s], after the first handshake.
fn first_outage_ms(seed: u64) -> u64 {
    1000 + splitmix64(seed) % (OUTAGE_PERIOD_MS - 1000 + 1)
}

/// Outages of each interface, `[start, end)` in ms, up to `horizon_ms`.
fn outage_schedule(seed: u64, cell: &Cell, params: &Params, horizon_ms: u64) -> Vec<Vec<(u64, u64)>> {
    let first = first_outage_ms(seed);
    let interfaces = if cell.multihomed { 2 } else { 1 };
    (0..interfaces)
        .map(|i| {
            let mut start = first + i as u64 * MULTIHOMED_INTERLEAVE_MS;
            let mut list = Vec::new();
            while start < horizon_ms {
                list.push((start, start + params.outage_ms));
                start += OUTAGE_PERIOD_MS;
            }
            list
        })
        .collect()
}

/// Times when no interface is up (every interface in an outage), `[start, end)` ms, sorted.
fn unavoidable_outages(schedule: &[Vec<(u64, u64)>]) -> Vec<(u64, u64)> {
    let Some((first, rest)) = schedule.split_first() else { return Vec::new() };
    let mut common = first.clone();
    for other in rest {
        let mut next = Vec::new();
        for &(a0, a1) in &common {
            for &(b0, b1) in other {
                let (s, e) = (a0.max(b0), a1.min(b1));
                if s < e {
                    next.push((s, e));
                }
            }
        }
        common = next;
    }
    common.sort_unstable();
    common
}

/// The ideal bound, ns: `messages` round trips of time when some interface is up.
fn ideal_bound_ns(messages: u32, rtt_ns: u64, unavoidable_ms: &[(u64, u64)]) -> u64 {
    let mut need = u64::from(messages) * rtt_ns;
    let mut t = 0u64;
    for &(s, e) in unavoidable_ms {
        let (s, e) = (s * 1_000_000, e * 1_000_000);
        if t + need <= s {
            break;
        }
        need -= s.saturating_sub(t);
        t = t.max(e);
    }
    t + need
}

fn message(tag: u8, seq: u32) -> Vec<u8> {
    let mut m = vec![0u8; if tag == b'M' { MESSAGE_LEN } else { 5 }];
    m[0] = tag;
    m[1..5].copy_from_slice(&seq.to_be_bytes());
    m
}

fn parse_message(tag: u8, data: &[u8]) -> Option<u32> {
    if data.first() != Some(&tag) {
        return None;
    }
    let bytes: [u8; 4] = data.get(1..5)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

fn seed_bytes(run_seed: u64, salt: u8, index: u64) -> [u8; 32] {
    let mut seed = [salt; 32];
    seed[..8].copy_from_slice(&run_seed.to_le_bytes());
    seed[8..16].copy_from_slice(&index.to_le_bytes());
    seed
}

struct ClientIface {
    name: String,
    addr: Ipv4Addr,
    up: bool,
}

/// The message in flight on the current session.
struct Outstanding {
    /// The interface it last went out on.
    iface: usize,
}

/// The mobile client: its application and its DTLS session.
struct E1Client {
    strategy: Strategy,
    config: Arc<ClientConfig>,
    server: SocketAddr,
    run_seed: u64,
    app_timeout: Duration,
    messages: u32,
    ifaces: Vec<ClientIface>,
    /// The interface in use; kept until it goes down.
    current: Option<usize>,
    conn: Option<Connection>,
    /// The address a handshake in progress was started from.
    handshake_from: Option<Ipv4Addr>,
    /// A new session is needed as soon as an interface is up.
    reconnect_wanted: bool,
    last_session: Option<ClientSession>,
    /// The message to be acknowledged next.
    next_seq: u32,
    outstanding: Option<Outstanding>,
    /// Standard DTLS: when the session counts as broken. Otherwise: when to resend.
    app_deadline: Option<Instant>,
    acks: Vec<u32>,
    handshakes_started: u64,
    handshakes: u32,
    resumed_handshakes: u32,
    reconnections: u32,
    outages: u32,
    resends: u32,
    done_at: Option<Instant>,
}

impl E1Client {
    fn new(strategy: Strategy, config: Arc<ClientConfig>, run_seed: u64, params: &Params) -> Self {
        E1Client {
            strategy,
            config,
            server: SocketAddr::from((SERVER_ADDR, SERVER_PORT)),
            run_seed,
            app_timeout: Duration::from_millis(params.app_timeout_ms),
            messages: params.messages,
            ifaces: Vec::new(),
            current: None,
            conn: None,
            handshake_from: None,
            reconnect_wanted: false,
            last_session: None,
            next_seq: 0,
            outstanding: None,
            app_deadline: None,
            acks: vec![0; params.messages as usize],
            handshakes_started: 0,
            handshakes: 0,
            resumed_handshakes: 0,
            reconnections: 0,
            outages: 0,
            resends: 0,
            done_at: None,
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
        let seed = seed_bytes(self.run_seed, 1, self.handshakes_started);
        let session = match self.strategy {
            Strategy::StandardResumed => self.last_session.clone(),
            _ => None,
        };
        let conn = match session {
            Some(s) => Connection::client_with_session(self.config.clone(), now, self.server, seed, Some(s)),
            None => Connection::client(self.config.clone(), now, self.server, seed),
        };
        self.conn = Some(conn);
        self.handshake_from = Some(addr);
    }

    /// Sends (or sends again) the message `next_seq` on an established session.
    fn send_message(&mut self, now: Instant) {
        if self.done_at.is_some() || self.usable_addr().is_none() {
            return;
        }
        let Some(conn) = self.conn.as_mut().filter(|c| c.is_established()) else { return };
        if conn.send(&message(b'M', self.next_seq)).is_err() {
            return;
        }
        let first_on_session = self.outstanding.is_none();
        if !first_on_session {
            self.resends += 1;
        }
        // Standard DTLS times the session from the message's first send on it; the others
        // time each send.
        if !self.strategy.reconnects() || first_on_session {
            self.app_deadline = Some(now + self.app_timeout);
        }
        let iface = self.current.unwrap_or(0);
        self.outstanding = Some(Outstanding { iface });
    }

    fn drain(&mut self, now: Instant) {
        loop {
            let Some(event) = self.conn.as_mut().and_then(Connection::poll_event) else { break };
            match event {
                Event::Connected(summary) => {
                    self.handshakes += 1;
                    if summary.resumed {
                        self.resumed_handshakes += 1;
                    }
                    if summary.session.is_some() {
                        self.last_session = summary.session;
                    }
                    self.handshake_from = None;
                    self.send_message(now);
                }
                Event::ApplicationData(data) => self.on_ack(now, &data),
                Event::Accepted | Event::PathChanged(_) => {}
                Event::Closed | Event::Failed(_) => {
                    self.conn = None;
                    self.handshake_from = None;
                    if self.done_at.is_none() {
                        self.start_handshake(now);
                    }
                }
            }
        }
    }

    fn on_ack(&mut self, now: Instant, data: &[u8]) {
        let Some(seq) = parse_message(b'A', data) else { return };
        let Some(count) = self.acks.get_mut(seq as usize) else { return };
        *count += 1;
        if seq != self.next_seq || *count != 1 {
            return;
        }
        self.next_seq += 1;
        self.outstanding = None;
        self.app_deadline = None;
        if self.next_seq == self.messages {
            self.done_at = Some(now);
        } else {
            self.send_message(now);
        }
    }

    fn on_app_timeout(&mut self, now: Instant) {
        self.app_deadline = None;
        if self.done_at.is_some() {
            return;
        }
        if self.strategy.reconnects() {
            if self.conn.as_ref().is_some_and(Connection::is_established) {
                self.reconnections += 1;
                self.start_handshake(now);
            }
        } else {
            // Resent now, or when an interface comes up (the outstanding message stays).
            self.send_message(now);
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

impl SansIo for E1Client {
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
        if self.done_at.is_some() {
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

impl App for E1Client {
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
                if self.current.and_then(|c| self.ifaces.get(c)).is_none_or(|f| !f.up) {
                    self.current = Some(idx);
                }
                if self.done_at.is_some() {
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
                    self.send_message(now);
                }
            }
            NodeEvent::InterfaceDown { iface, .. } => {
                let Some(idx) = self.iface_index(iface) else { return };
                self.ifaces[idx].up = false;
                if self.done_at.is_some() {
                    return;
                }
                self.outages += 1;
                if self.current == Some(idx) {
                    self.current = self.ifaces.iter().position(|f| f.up).or(Some(idx));
                }
                self.handshake_address_gone(now);
                let moved = self.usable_addr().is_some();
                if moved && self.outstanding.as_ref().is_some_and(|o| o.iface == idx) {
                    self.send_message(now);
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

/// The server: a DTLS endpoint and the acknowledging application.
struct E1Server {
    endpoint: Endpoint,
    /// Oracle: every datagram is handed to the endpoint as if from the client's first address,
    /// and what the endpoint sends there goes to the address last heard from.
    oracle: bool,
    anchor: Option<SocketAddr>,
    latest: Option<SocketAddr>,
    identities: HashMap<ConnectionHandle, Vec<u8>>,
    /// Message numbers delivered, per client identity (across sessions).
    delivered_by_client: HashMap<Vec<u8>, Vec<bool>>,
    receipts: Vec<u32>,
    deliveries: Vec<u32>,
}

impl E1Server {
    fn drain(&mut self) {
        while let Some((handle, event)) = self.endpoint.poll_event() {
            match event {
                Event::Connected(summary) => {
                    self.identities.insert(handle, summary.psk_identity);
                }
                Event::ApplicationData(data) => {
                    let Some(seq) = parse_message(b'M', &data) else { continue };
                    let Some(identity) = self.identities.get(&handle) else { continue };
                    let Some(receipts) = self.receipts.get_mut(seq as usize) else { continue };
                    *receipts += 1;
                    let messages = self.deliveries.len();
                    let seen = self
                        .delivered_by_client
                        .entry(identity.clone())
                        .or_insert_with(|| vec![false; messages]);
                    if let Some(slot) = seen.get_mut(seq as usize).filter(|s| !**s) {
                        *slot = true;
                        self.deliveries[seq as usize] += 1;
                    }
                    // Every copy is acknowledged: the first acknowledgement may have been lost.
                    let _ = self.endpoint.send(handle, &message(b'A', seq));
                }
                Event::Accepted | Event::PathChanged(_) => {}
                Event::Closed | Event::Failed(_) => {
                    self.identities.remove(&handle);
                }
            }
        }
    }
}

impl SansIo for E1Server {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        let remote = if self.oracle {
            self.latest = Some(remote);
            *self.anchor.get_or_insert(remote)
        } else {
            remote
        };
        self.endpoint.handle_datagram(now, local, remote, datagram);
        self.drain();
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let mut transmit = self.endpoint.poll_transmit(now)?;
        if self.oracle && Some(transmit.dst) == self.anchor {
            if let Some(latest) = self.latest {
                transmit.dst = latest;
            }
        }
        Some(transmit)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain();
    }
}

impl App for E1Server {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

fn configs() -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let mut client = ClientConfig::psk(PSK_IDENTITY, PSK_KEY);
    client.suites = vec![CipherSuite::PskWithAes128Ccm8];
    let mut server = ServerConfig::psk(PSK_IDENTITY, PSK_KEY);
    server.suites = vec![CipherSuite::PskWithAes128Ccm8];
    (Arc::new(client), Arc::new(server))
}

/// The client's address on interface `iface` after its `k`-th handover.
fn client_addr(iface: usize, k: u32) -> Ipv4Addr {
    let net = 1 + iface as u8;
    if k == 0 {
        return Ipv4Addr::new(10, net, 0, 2);
    }
    Ipv4Addr::new(10, net, 1 + (k / 250) as u8, 1 + (k % 250) as u8)
}

/// Runs one strategy in one cell with one seed.
pub fn run_one(strategy: Strategy, cell: &Cell, params: &Params, seed: u64) -> anyhow::Result<RunResult> {
    anyhow::ensure!(strategy.not_built().is_none(), "{} is not built yet", strategy.label());
    anyhow::ensure!(params.messages > 0, "at least one message");
    let rtt_ns = 2 * cell.delay_ms * 1_000_000;
    // Room for every message, one slow reconnection per outage and a margin; the run stops
    // as soon as the last acknowledgement is in.
    let horizon_ms = (u64::from(params.messages) * rtt_ns / 1_000_000) * 4 + 120_000;
    let schedule = outage_schedule(seed, cell, params, horizon_ms);
    let ideal_ns = ideal_bound_ns(params.messages, rtt_ns, &unavoidable_outages(&schedule));

    let (client_config, server_config) = configs();
    let mut sim = Simulator::new(seed);
    let client = sim.add_node("client", Role::Host);
    let router = sim.add_node("router", Role::Router);
    let server = sim.add_node("server", Role::Host);
    let jitter = match params.jitter_us {
        0 => Jitter::None,
        us => Jitter::Uniform { min_ms: 0.0, max_ms: us as f64 / 1000.0 },
    };
    let access = LinkConfig { delay_ms: cell.delay_ms as f64, jitter, ..LinkConfig::default() };
    let wire = LinkConfig::default();
    let interfaces = if cell.multihomed { 2 } else { 1 };
    let mut client_ifaces: Vec<IfaceId> = Vec::new();
    for i in 0..interfaces {
        let c = sim.add_interface(client, &format!("eth{i}"), client_addr(i, 0))?;
        let r = sim.add_interface(router, &format!("c{i}"), Ipv4Addr::new(10, 1 + i as u8, 0, 1))?;
        sim.connect(&format!("access{i}"), c, r, access.clone())?;
        client_ifaces.push(c);
    }
    let server_iface = sim.add_interface(server, "eth0", SERVER_ADDR)?;
    match cell.nat {
        None => {
            let r = sim.add_interface(router, "s", Ipv4Addr::new(10, 9, 0, 1))?;
            sim.connect("core", r, server_iface, wire)?;
        }
        Some(preset) => {
            let nat = sim.add_node("nat", Role::Nat(NatConfig::preset(preset)));
            let r = sim.add_interface(router, "n", Ipv4Addr::new(10, 8, 0, 1))?;
            let inside = sim.add_interface(nat, "in", Ipv4Addr::new(10, 8, 0, 2))?;
            let outside = sim.add_interface(nat, "out", Ipv4Addr::new(10, 9, 0, 1))?;
            sim.set_nat_interfaces(nat, inside, outside);
            sim.connect("inner", r, inside, wire.clone())?;
            sim.connect("core", outside, server_iface, wire)?;
        }
    }
    // Each outage is a handover: the interface comes back with a new address.
    for (i, outages) in schedule.iter().enumerate() {
        for (k, &(start, end)) in outages.iter().enumerate() {
            let iface = client_ifaces[i];
            sim.schedule(Instant::from_millis(start), Action::InterfaceDown(iface));
            let new = client_addr(i, k as u32 + 1);
            sim.schedule(Instant::from_nanos(start * 1_000_000 + 1), Action::SetAddress(iface, new));
            sim.schedule(Instant::from_millis(end), Action::InterfaceUp(iface));
        }
    }
    let client_app = E1Client::new(strategy, client_config, seed, params);
    let client_id = sim.add_app(client, "e1-client", CLIENT_PORT, Box::new(client_app))?;
    let server_app = E1Server {
        endpoint: Endpoint::new(server_config, seed_bytes(seed, 2, 0)),
        oracle: strategy == Strategy::Oracle,
        anchor: None,
        latest: None,
        identities: HashMap::new(),
        delivered_by_client: HashMap::new(),
        receipts: vec![0; params.messages as usize],
        deliveries: vec![0; params.messages as usize],
    };
    let server_id = sim.add_app(server, "e1-server", SERVER_PORT, Box::new(server_app))?;

    let step_ms = 250;
    let mut t_ms = 0;
    let done = loop {
        t_ms += step_ms;
        sim.run_until(Instant::from_millis(t_ms));
        let c = sim.app(client_id).as_any().and_then(|a| a.downcast_ref::<E1Client>());
        let Some(c) = c else { anyhow::bail!("the client app is not where it was put") };
        if c.done_at.is_some() || t_ms >= horizon_ms {
            break c.done_at;
        }
    };
    // Late copies of acknowledgements in flight arrive within one round trip.
    let settle = done.map_or(0, |d| d.as_nanos() + rtt_ns + 1);
    sim.run_until(Instant::from_nanos(settle.max(sim.now().as_nanos())));
    let c = sim.app(client_id).as_any().and_then(|a| a.downcast_ref::<E1Client>());
    let s = sim.app(server_id).as_any().and_then(|a| a.downcast_ref::<E1Server>());
    let (Some(c), Some(s)) = (c, s) else { anyhow::bail!("the E1 apps are not where they were put") };
    let mut result = RunResult {
        seed,
        first_outage_ms: first_outage_ms(seed),
        wct_s: done.map(|d| d.since_origin().as_secs_f64()),
        ideal_s: ideal_ns as f64 / 1e9,
        handshakes: c.handshakes,
        resumed_handshakes: c.resumed_handshakes,
        reconnections: c.reconnections,
        outages: c.outages,
        resends: c.resends,
        ..RunResult::default()
    };
    result.tally(&c.acks, &s.receipts, &s.deliveries);
    Ok(result)
}

/// One strategy's row of a cell.
#[derive(Clone, Debug, Serialize)]
struct Row {
    strategy: Strategy,
    label: &'static str,
    /// Why there are no figures, if there are none.
    status: Option<String>,
    mean_wct_s: Option<f64>,
    /// (WCT of standard DTLS, full − this WCT) / WCT of standard DTLS, full; percent.
    gain_over_standard_full_pct: Option<f64>,
    /// The same against single-homed standard DTLS, full, at the same delay and NAT: seed 001's
    /// Table I compares DTLS-TCS-multi with standard DTLS on one interface.
    gain_over_single_homed_standard_full_pct: Option<f64>,
    /// (this WCT − ideal bound) / ideal bound; percent.
    above_ideal_pct: Option<f64>,
    mean_handshakes: Option<f64>,
    mean_outages: Option<f64>,
    runs: Vec<RunResult>,
}

#[derive(Clone, Debug, Serialize)]
struct CellReport {
    cell: Cell,
    round_trip_s: f64,
    /// Analytic ideal bound, mean over the seeds.
    ideal_s: f64,
    rows: Vec<Row>,
    /// Seed 001, Table I (no NAT): gain of DTLS-TCS (or -multi) over standard DTLS, percent.
    paper_tcs_gain_pct: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0u32), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / f64::from(n))
}

fn run_cell(cell: Cell, params: &Params, seeds: u64) -> anyhow::Result<CellReport> {
    let mut rows = Vec::new();
    for strategy in Strategy::ALL {
        let mut row = Row {
            strategy,
            label: strategy.label(),
            status: strategy.not_built().map(str::to_owned),
            mean_wct_s: None,
            gain_over_standard_full_pct: None,
            gain_over_single_homed_standard_full_pct: None,
            above_ideal_pct: None,
            mean_handshakes: None,
            mean_outages: None,
            runs: Vec::new(),
        };
        if row.status.is_none() {
            for seed in 1..=seeds {
                row.runs.push(run_one(strategy, &cell, params, seed)?);
            }
            let reconnected: u32 = row.runs.iter().map(|r| r.reconnections).sum();
            let resumed: u32 = row.runs.iter().map(|r| r.resumed_handshakes).sum();
            if strategy == Strategy::StandardResumed && reconnected > 0 && resumed == 0 {
                // The engine ran full handshakes: these would be the full-reconnection figures.
                row.status = Some("not available: the DTLS engine does not resume sessions yet".into());
                row.runs.clear();
            } else if row.runs.iter().any(|r| r.wct_s.is_none()) {
                row.status = Some("some runs did not finish".into());
            } else {
                row.mean_wct_s = mean(row.runs.iter().filter_map(|r| r.wct_s));
                row.mean_handshakes = mean(row.runs.iter().map(|r| f64::from(r.handshakes)));
                row.mean_outages = mean(row.runs.iter().map(|r| f64::from(r.outages)));
            }
        }
        rows.push(row);
    }
    let ideal_s = mean((1..=seeds).map(|seed| {
        let rtt_ns = 2 * cell.delay_ms * 1_000_000;
        let horizon = u64::from(params.messages) * rtt_ns / 1_000_000 * 4 + 120_000;
        let schedule = outage_schedule(seed, &cell, params, horizon);
        ideal_bound_ns(params.messages, rtt_ns, &unavoidable_outages(&schedule)) as f64 / 1e9
    }))
    .unwrap_or(0.0);
    let standard = rows.iter().find(|r| r.strategy == Strategy::StandardFull).and_then(|r| r.mean_wct_s);
    for row in &mut rows {
        if let (Some(wct), Some(std)) = (row.mean_wct_s, standard) {
            row.gain_over_standard_full_pct = Some((std - wct) / std * 100.0);
        }
        if let Some(wct) = row.mean_wct_s {
            row.above_ideal_pct = Some((wct - ideal_s) / ideal_s * 100.0);
        }
    }
    let paper_tcs_gain_pct = match cell.nat {
        Some(_) => None,
        None => PAPER_TABLE_I.iter().find(|(d, _, _)| *d == cell.delay_ms).map(|&(_, single, multi)| {
            if cell.multihomed {
                multi
            } else {
                single
            }
        }),
    };
    Ok(CellReport { cell, round_trip_s: 2.0 * cell.delay_ms as f64 / 1e3, ideal_s, rows, paper_tcs_gain_pct })
}

/// Fills `gain_over_single_homed_standard_full_pct` from the single-homed cell of the same delay
/// and NAT.
fn compare_with_single_homed_standard(reports: &mut [CellReport]) {
    let bases: Vec<(u64, Option<NatPreset>, Option<f64>)> = reports
        .iter()
        .filter(|r| !r.cell.multihomed)
        .map(|r| {
            let std = r.rows.iter().find(|row| row.strategy == Strategy::StandardFull);
            (r.cell.delay_ms, r.cell.nat, std.and_then(|row| row.mean_wct_s))
        })
        .collect();
    for report in reports {
        let base = bases
            .iter()
            .find(|(d, nat, _)| *d == report.cell.delay_ms && *nat == report.cell.nat)
            .and_then(|b| b.2);
        for row in &mut report.rows {
            if let (Some(wct), Some(std)) = (row.mean_wct_s, base) {
                row.gain_over_single_homed_standard_full_pct = Some((std - wct) / std * 100.0);
            }
        }
    }
}

fn parse_nat(text: &str) -> anyhow::Result<Vec<Option<NatPreset>>> {
    Ok(match text {
        "none" => vec![None],
        "full-cone" => vec![Some(NatPreset::FullCone)],
        "restricted" => vec![Some(NatPreset::Restricted)],
        "port-restricted" => vec![Some(NatPreset::PortRestricted)],
        "symmetric" => vec![Some(NatPreset::Symmetric)],
        "all" => vec![
            None,
            Some(NatPreset::FullCone),
            Some(NatPreset::Restricted),
            Some(NatPreset::PortRestricted),
            Some(NatPreset::Symmetric),
        ],
        other => anyhow::bail!(
            "unknown --nat {other}: none, full-cone, restricted, port-restricted, symmetric or all"
        ),
    })
}

fn nat_name(nat: Option<NatPreset>) -> &'static str {
    match nat {
        None => "no NAT",
        Some(NatPreset::FullCone) => "full-cone NAT",
        Some(NatPreset::Restricted) => "restricted NAT",
        Some(NatPreset::PortRestricted) => "port-restricted NAT",
        Some(NatPreset::Symmetric) => "symmetric NAT",
    }
}

fn fmt_opt(v: Option<f64>, width: usize, precision: usize) -> String {
    match v {
        Some(v) => format!("{v:>width$.precision$}"),
        None => format!("{:>width$}", "—"),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.real {
        return real::run(args);
    }
    anyhow::ensure!(args.messages > 0, "--messages must be at least 1");
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    anyhow::ensure!(!args.delays.is_empty(), "--delays needs at least one delay");
    anyhow::ensure!(
        (1..OUTAGE_PERIOD_MS).contains(&args.outage_ms),
        "--outage-ms must be at least 1 and shorter than the 10 s period"
    );
    anyhow::ensure!(args.app_timeout_ms > 0, "--app-timeout-ms must be positive");
    let params = Params {
        messages: args.messages,
        outage_ms: args.outage_ms,
        app_timeout_ms: args.app_timeout_ms,
        jitter_us: args.jitter_us,
    };
    let nats = parse_nat(&args.nat)?;
    let mut reports = Vec::new();
    for &nat in &nats {
        for multihomed in [false, true] {
            for &delay_ms in &args.delays {
                reports.push(run_cell(Cell { delay_ms, multihomed, nat }, &params, args.seeds)?);
            }
        }
    }
    compare_with_single_homed_standard(&mut reports);
    if args.json {
        let v = serde_json::json!({
            "experiment": "E1, handover resilience (seed 001, Section IV)",
            "params": params,
            "seeds": args.seeds,
            "outage_period_ms": OUTAGE_PERIOD_MS,
            "multihomed_interleave_ms": MULTIHOMED_INTERLEAVE_MS,
            "suite": "TLS_PSK_WITH_AES_128_CCM_8",
            "paper_source": "seed 001, Table I (gains only; Fig. 4 gives no values; no outage length given)",
            "cells": reports,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "E1 in the simulator: {} messages, outage {} ms every {} s, application timeout {} ms, {}, mean of {} seeds",
        params.messages,
        params.outage_ms,
        OUTAGE_PERIOD_MS / 1000,
        params.app_timeout_ms,
        match params.jitter_us {
            0 => "no jitter".to_owned(),
            us => format!("jitter 0-{us} µs"),
        },
        args.seeds
    );
    println!(
        "(the outage length is ours: seed 001 does not give it; each outage is a handover to a new address)"
    );
    for report in &reports {
        let c = report.cell;
        println!();
        println!(
            "delay {} ms ({}, {}): round trip {:.3} s, ideal bound {:.3} s (analytic)",
            c.delay_ms,
            if c.multihomed { "multihomed" } else { "single-homed" },
            nat_name(c.nat),
            report.round_trip_s,
            report.ideal_s
        );
        println!(
            "  {:<48} {:>9} {:>13} {:>15} {:>11} {:>10} {:>8}",
            "strategy", "WCT s", "gain vs std %", "vs 1-homed std %", "vs ideal %", "handshakes", "outages"
        );
        for row in &report.rows {
            if let Some(status) = &row.status {
                println!("  {:<48} {status}", row.label);
                continue;
            }
            println!(
                "  {:<48} {} {} {} {} {} {}",
                row.label,
                fmt_opt(row.mean_wct_s, 9, 3),
                fmt_opt(row.gain_over_standard_full_pct, 13, 2),
                fmt_opt(row.gain_over_single_homed_standard_full_pct, 15, 2),
                fmt_opt(row.above_ideal_pct, 11, 2),
                fmt_opt(row.mean_handshakes, 10, 1),
                fmt_opt(row.mean_outages, 8, 1),
            );
        }
        if let Some(paper) = report.paper_tcs_gain_pct {
            let oracle = report.rows.iter().find(|r| r.strategy == Strategy::Oracle);
            let oracle_gain = oracle.and_then(|r| r.gain_over_single_homed_standard_full_pct);
            println!(
                "  seed 001 Table I: DTLS-TCS{} gain over (single-homed) standard DTLS {paper:.2} %; ours: DTLS-TCS not built yet, the oracle's gain (the most any session-keeping strategy can reach here) {} %",
                if c.multihomed { "-multi" } else { "" },
                fmt_opt(oracle_gain, 0, 2)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn ideal_bound_adds_only_outages_that_fall_inside_the_run() {
        // 10 round trips of 1 s; down from 3 s to 5 s and from 20 s to 21 s: 12 s.
        assert_eq!(ideal_bound_ns(10, S, &[(3_000, 5_000), (20_000, 21_000)]), 12 * S);
        // An outage starting exactly when the work is done does not count.
        assert_eq!(ideal_bound_ns(3, S, &[(3_000, 4_000)]), 3 * S);
        // Two outages inside: 4 + 1 + 1 = 6 s of run for 4 s of work.
        assert_eq!(ideal_bound_ns(4, S, &[(1_000, 2_000), (3_000, 4_000)]), 6 * S);
    }

    #[test]
    fn multihomed_outages_cost_only_when_both_interfaces_are_down() {
        let apart = vec![vec![(1_000, 2_000)], vec![(6_000, 7_000)]];
        assert!(unavoidable_outages(&apart).is_empty());
        let overlapping = vec![vec![(1_000, 7_000)], vec![(6_000, 8_000)]];
        assert_eq!(unavoidable_outages(&overlapping), vec![(6_000, 7_000)]);
    }

    #[test]
    fn schedule_interleaves_the_second_interface_by_five_seconds() {
        let cell = Cell { delay_ms: 30, multihomed: true, nat: None };
        let params = Params { messages: 1, outage_ms: 1_000, app_timeout_ms: 1_000, jitter_us: 0 };
        let schedule = outage_schedule(7, &cell, &params, 40_000);
        let first = first_outage_ms(7);
        assert!((1_000..=10_000).contains(&first));
        assert_eq!(schedule[0][0], (first, first + 1_000));
        assert_eq!(schedule[0][1].0, first + 10_000);
        assert_eq!(schedule[1][0].0, first + 5_000);
    }
}
