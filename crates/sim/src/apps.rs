//! Applications hosted on simulated nodes, and the built-in request/response pair that tests
//! the simulator without any protocol engine.
//!
//! Any [`SansIo`] endpoint runs in the simulator through [`App`]: the simulator polls
//! `poll_transmit` and `poll_timeout` after every event that touches the app, exactly as a
//! real driver does. [`App`] adds what only a host can tell: its interfaces going down, up or
//! changing address ([`NodeEvent`]), so a mobile client can move its traffic to another
//! interface (via [`Transmit::src`]) or start a resumption.

use fastshake_core::{Instant, SansIo, Transmit};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};

/// A change of one of the host's interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// The interface can send and receive (also told once per interface at start).
    InterfaceUp {
        /// Name of the interface.
        iface: String,
        /// Its address.
        addr: Ipv4Addr,
    },
    /// The interface went down: datagrams to or from it are lost until it is up again.
    InterfaceDown {
        /// Name of the interface.
        iface: String,
        /// Its address.
        addr: Ipv4Addr,
    },
    /// The interface got a new address; datagrams to the old one are lost from now on.
    AddressChanged {
        /// Name of the interface.
        iface: String,
        /// The address it had.
        old: Ipv4Addr,
        /// The address it has now.
        new: Ipv4Addr,
    },
}

/// What a host application reports for the summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AppStats {
    /// Requests sent, retransmissions included.
    pub requests_sent: u64,
    /// Requests sent again after a timeout.
    pub retransmissions: u64,
    /// Distinct requests answered.
    pub replies: u64,
    /// Replies for requests already answered (duplicates, late copies).
    pub duplicate_replies: u64,
    /// Datagrams answered (servers).
    pub answered: u64,
    /// Round-trip times of the answered requests, nanoseconds, in arrival order (from the
    /// last transmission of each request).
    pub rtts_ns: Vec<u64>,
    /// When the last outstanding request was answered (virtual nanoseconds), if all were.
    pub completed_at_ns: Option<u64>,
}

/// The handshakes of a protocol app (a DTLS or SCTP client or server), for the summary. The
/// simulator knows no protocol: an app names its handshake kinds itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HandshakeStats {
    /// Handshakes the app means to run, when it knows (a client's plan); `None` for a server.
    pub planned: Option<u64>,
    /// Handshakes completed.
    pub completed: u64,
    /// Handshakes that ended before completing (timed out, refused, aborted).
    pub failed: u64,
    /// Sessions that completed their handshake and failed later (stalled, aborted).
    pub sessions_failed: u64,
    /// Completed handshakes by the app's name for their kind (e.g. `full`, `resumed`).
    pub kinds: std::collections::BTreeMap<String, u64>,
    /// Duration of each completed handshake the app timed, nanoseconds, in completion order.
    pub durations_ns: Vec<u64>,
    /// UDP payload bytes sent and received during the completed handshakes.
    pub bytes: u64,
}

impl HandshakeStats {
    /// Counts one completed handshake of `kind` that took `duration_ns` (if timed) and `bytes`.
    pub fn complete(&mut self, kind: &str, duration_ns: Option<u64>, bytes: u64) {
        self.completed += 1;
        *self.kinds.entry(kind.to_owned()).or_default() += 1;
        self.durations_ns.extend(duration_ns);
        self.bytes += bytes;
    }
}

/// An application on a simulated host: a [`SansIo`] endpoint that may also hear about its
/// interfaces. In a [`Transmit::src`], port 0 stands for the app's bound port.
pub trait App: SansIo {
    /// One of the host's interfaces changed. Called at start with `InterfaceUp` for every
    /// interface that is up, then at each change.
    fn handle_node_event(&mut self, _now: Instant, _event: &NodeEvent) {}

    /// A further UDP port the app wants to receive on before it sends from it (a socket it
    /// opened, e.g. a server giving a session a port of its own). Asked after every event that
    /// touches the app, until `None`; a port another app of the host holds is not given.
    fn poll_bind(&mut self) -> Option<u16> {
        None
    }

    /// Figures for the summary table.
    fn stats(&self) -> Option<AppStats> {
        None
    }

    /// Its handshakes, if it runs a protocol that has them.
    fn handshakes(&self) -> Option<HandshakeStats> {
        None
    }

    /// The app as `Any`, so code that built it can read its own type back after a run
    /// (`sim.app(id).as_any()?.downcast_ref::<MyClient>()`).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Runs any [`SansIo`] endpoint that needs no interface events as an [`App`].
#[derive(Debug)]
pub struct Plain<T>(pub T);

impl<T: SansIo> SansIo for Plain<T> {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        self.0.handle_datagram(now, local, remote, datagram)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.0.poll_transmit(now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now)
    }
}

impl<T: SansIo> App for Plain<T> {}

/// Settings of a [`Pinger`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingerConfig {
    /// Where the requests go.
    pub server: SocketAddr,
    /// How many distinct requests.
    #[serde(default = "default_count")]
    pub count: u64,
    /// Open loop: time between requests. Stop-and-wait: pause after a reply. Milliseconds.
    #[serde(default = "default_interval")]
    pub interval_ms: f64,
    /// UDP payload bytes per request (at least 9: a tag byte and the sequence number).
    #[serde(default = "default_payload")]
    pub payload: usize,
    /// When the first request leaves, milliseconds.
    #[serde(default)]
    pub start_ms: f64,
    /// If set, stop-and-wait: one request outstanding, sent again after this many
    /// milliseconds without a reply (as the application of seed 001's E1 does).
    #[serde(default)]
    pub retry_ms: Option<f64>,
}

fn default_count() -> u64 {
    10
}
fn default_interval() -> f64 {
    1000.0
}
fn default_payload() -> usize {
    64
}

const REQUEST_TAG: u8 = b'Q';
const REPLY_TAG: u8 = b'R';
const SEQ_END: usize = 9;

/// Sends numbered requests to an echo server and measures the round trips.
///
/// It sends from the first interface that is up (by `Transmit::src`), so on a multihomed host
/// it moves to another interface when one goes down.
#[derive(Debug)]
pub struct Pinger {
    config: PingerConfig,
    interval_ns: u64,
    retry_ns: Option<u64>,
    /// Interfaces in the order the host announced them: (name, address, up).
    interfaces: Vec<(String, Ipv4Addr, bool)>,
    /// Last send time per request, `None` before the first send.
    sent_at: Vec<Option<u64>>,
    answered: Vec<bool>,
    /// The next request to send for the first time.
    next_seq: u64,
    /// When the next send (first or again) is due.
    next_send_at: Option<u64>,
    outbox: VecDeque<Transmit>,
    stats: AppStats,
}

impl Pinger {
    /// A pinger with `config`.
    pub fn new(config: PingerConfig) -> Self {
        let count = usize::try_from(config.count).unwrap_or(usize::MAX).min(1 << 24);
        let start = crate::dist::ms_to_ns(config.start_ms);
        Pinger {
            interval_ns: crate::dist::ms_to_ns(config.interval_ms),
            retry_ns: config.retry_ms.map(crate::dist::ms_to_ns).map(|r| r.max(1)),
            config: PingerConfig { count: count as u64, ..config },
            interfaces: Vec::new(),
            sent_at: vec![None; count],
            answered: vec![false; count],
            next_seq: 0,
            next_send_at: if count > 0 { Some(start) } else { None },
            outbox: VecDeque::new(),
            stats: AppStats::default(),
        }
    }

    /// The settings (with `count` capped at 2^24).
    pub fn config(&self) -> &PingerConfig {
        &self.config
    }

    fn source(&self) -> Option<SocketAddr> {
        self.interfaces.iter().find(|(_, _, up)| *up).map(|(_, ip, _)| SocketAddr::from((*ip, 0)))
    }

    fn send(&mut self, now: u64, seq: u64) {
        let mut payload = vec![0u8; self.config.payload.max(SEQ_END)];
        payload[0] = REQUEST_TAG;
        payload[1..SEQ_END].copy_from_slice(&seq.to_be_bytes());
        if let Some(slot) = self.sent_at.get_mut(seq as usize) {
            if slot.is_some() {
                self.stats.retransmissions += 1;
            }
            *slot = Some(now);
        }
        self.stats.requests_sent += 1;
        self.outbox.push_back(Transmit { src: self.source(), dst: self.config.server, payload });
    }

    fn stop_and_wait(&self) -> bool {
        self.retry_ns.is_some()
    }
}

impl SansIo for Pinger {
    fn handle_datagram(&mut self, now: Instant, _local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        // Any port of the server's address may answer (a server may move a session to a port
        // of its own, as seed 001's IPC and TCS servers do).
        if remote.ip() != self.config.server.ip() || datagram.first() != Some(&REPLY_TAG) {
            return;
        }
        let Some(seq_bytes) = datagram.get(1..SEQ_END).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
            return;
        };
        let seq = u64::from_be_bytes(seq_bytes);
        let idx = usize::try_from(seq).unwrap_or(usize::MAX);
        let (Some(Some(sent)), Some(done)) = (self.sent_at.get(idx).copied(), self.answered.get(idx)) else {
            return; // never asked for
        };
        if *done {
            self.stats.duplicate_replies += 1;
            return;
        }
        self.answered[idx] = true;
        self.stats.replies += 1;
        self.stats.rtts_ns.push(now.as_nanos().saturating_sub(sent));
        if self.stats.replies == self.config.count {
            self.stats.completed_at_ns = Some(now.as_nanos());
        }
        if self.stop_and_wait() && seq + 1 == self.next_seq {
            self.next_send_at =
                (self.next_seq < self.config.count).then(|| now.as_nanos().saturating_add(self.interval_ns));
        }
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_send_at.map(Instant::from_nanos)
    }

    fn handle_timeout(&mut self, now: Instant) {
        let t = now.as_nanos();
        if self.next_send_at.is_none_or(|due| due > t) {
            return;
        }
        match self.retry_ns {
            None => {
                self.send(t, self.next_seq);
                self.next_seq += 1;
                self.next_send_at =
                    (self.next_seq < self.config.count).then(|| t.saturating_add(self.interval_ns));
            }
            Some(retry) => {
                // The request in flight is the one before next_seq; if it is unanswered (or
                // none is in flight) this timer is a retry, otherwise a fresh request.
                let in_flight = self.next_seq.checked_sub(1);
                let unanswered = in_flight.filter(|&s| !self.answered[s as usize]);
                match unanswered {
                    Some(seq) => self.send(t, seq),
                    None => {
                        self.send(t, self.next_seq);
                        self.next_seq += 1;
                    }
                }
                self.next_send_at = Some(t.saturating_add(retry));
            }
        }
    }
}

impl App for Pinger {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn handle_node_event(&mut self, _now: Instant, event: &NodeEvent) {
        let (name, addr, up) = match event {
            NodeEvent::InterfaceUp { iface, addr } => (iface, *addr, true),
            NodeEvent::InterfaceDown { iface, addr } => (iface, *addr, false),
            NodeEvent::AddressChanged { iface, new, .. } => {
                if let Some(entry) = self.interfaces.iter_mut().find(|(n, _, _)| n == iface) {
                    entry.1 = *new;
                }
                return;
            }
        };
        match self.interfaces.iter_mut().find(|(n, _, _)| n == name) {
            Some(entry) => {
                entry.1 = addr;
                entry.2 = up;
            }
            None => self.interfaces.push((name.clone(), addr, up)),
        }
    }

    fn stats(&self) -> Option<AppStats> {
        Some(self.stats.clone())
    }
}

/// Answers every request with the same bytes (tagged as a reply) from the address it came to,
/// or from another port of that address (as seed 001's IPC server answers from a per-session
/// port, which a port-restricted NAT in front of the client filters).
#[derive(Debug, Default)]
pub struct Echo {
    outbox: VecDeque<Transmit>,
    answered: u64,
    reply_port: Option<u16>,
}

/// Settings of an [`Echo`] in a scenario.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoConfig {
    /// Answer from this port instead of the one the request came to.
    #[serde(default)]
    pub reply_port: Option<u16>,
}

impl Echo {
    /// A fresh echo server answering from the port each request came to.
    pub fn new() -> Self {
        Echo::default()
    }

    /// An echo server with `config`.
    pub fn with_config(config: EchoConfig) -> Self {
        Echo { reply_port: config.reply_port, ..Echo::default() }
    }
}

impl SansIo for Echo {
    fn handle_datagram(&mut self, _now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        if datagram.first() != Some(&REQUEST_TAG) {
            return;
        }
        let mut payload = datagram.to_vec();
        payload[0] = REPLY_TAG;
        self.answered += 1;
        let src = match self.reply_port {
            Some(port) => SocketAddr::new(local.ip(), port),
            None => local,
        };
        self.outbox.push_back(Transmit { src: Some(src), dst: remote, payload });
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}
}

impl App for Echo {
    fn stats(&self) -> Option<AppStats> {
        Some(AppStats { answered: self.answered, ..AppStats::default() })
    }
}
