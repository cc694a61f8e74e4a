//! N clients against one real `Endpoint` with R session slots, on simulated time.
//!
//! A deterministic event loop of its own (not the simulator's world): the world's DTLS client
//! app runs a fixed plan of sessions, while Engset's sources ask again only once they hold no
//! session, and a grid point needs tens of thousands of handshakes per replication, so the loop
//! keeps nothing but the engines, a calendar and a lossless link of fixed one-way delay.
//!
//! A client thinks for Exp(λ), then opens a real `Connection` (PSK). Refused (fatal alert,
//! `Error::NoSessionSlot`), it thinks again: lost calls cleared. Admitted, it keeps the session
//! for Exp(µ) from the moment it is connected, then sends close_notify. A slot is counted as the
//! server counts it (`EndpointStats::connections_open`): from the cookie-verified ClientHello
//! that creates the connection until the close_notify arrives, i.e. the holding time plus four
//! one-way delays (the server's flight, the client's, the server's Finished, the close_notify):
//! 20 ms against a mean of 100 s at the default settings, a bias of 2·10⁻⁴ of the load.
//!
//! With application traffic (the eviction runs), even clients send a request now and then (Exp,
//! mean `record_interval`) that the server echoes, while odd clients only listen: the server
//! pushes them a notification as often. So a listener's session is used (LRU sees it) but
//! silent (the idlest policy sees that). An evicted client (close_notify from the server) that
//! still wants its session reconnects after a back-off (Exp, mean `reconnect_after`), with a
//! full handshake or by its ticket. The server's idle expiry is off: sessions end by
//! close_notify or eviction only.

use super::engset::Estimate;
use fastshake_dtls::Versions;
use fastshake_dtls::{
    ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, Error, Event, Instant, ServerConfig,
    SessionCacheConfig, TicketKeys, WallClock, WhenFull,
};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How an evicted client that still wants its session comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Reconnect {
    /// A full handshake.
    Full,
    /// An abbreviated handshake with the ticket of its last session (RFC 5077).
    Ticket,
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Workload {
    /// N.
    pub clients: usize,
    /// R.
    pub slots: usize,
    /// ρ = λ/µ.
    pub rho: f64,
    pub when_full: WhenFull,
    pub reconnect: Reconnect,
    /// 1/µ.
    pub mean_hold: Duration,
    /// Mean gap between application records of a session (requests or notifications); none
    /// without application traffic.
    pub record_interval: Option<Duration>,
    /// Mean back-off of an evicted client before it reconnects.
    pub reconnect_after: Duration,
    pub one_way_delay: Duration,
    /// Simulated before measuring starts.
    pub warmup: Duration,
    /// Simulated while measuring.
    pub measured: Duration,
}

impl Workload {
    /// Engset's setting: refuse when full, no application traffic (the congestion does not
    /// depend on it), measuring long enough for about `requests` requests.
    pub fn engset(clients: usize, slots: usize, rho: f64, requests: u64) -> Workload {
        let mean_hold = Duration::from_secs(100);
        let think = mean_hold.as_secs_f64() / rho;
        // One cycle (think + hold) per request and client, blocking aside.
        let cycle = think + mean_hold.as_secs_f64();
        let measured = Duration::from_secs_f64(requests as f64 * cycle / clients as f64);
        Workload {
            clients,
            slots,
            rho,
            when_full: WhenFull::Refuse,
            reconnect: Reconnect::Full,
            mean_hold,
            record_interval: None,
            reconnect_after: Duration::from_secs(5),
            one_way_delay: Duration::from_millis(5),
            warmup: Duration::from_secs_f64(5.0 * cycle),
            measured,
        }
    }

    /// The same load with application traffic every 2 s (mean) in each session, and an evicted
    /// client back after 5 s (mean; about one handshake over seed 002's TSCH hop, Table I).
    pub fn eviction(clients: usize, slots: usize, rho: f64, requests: u64, when_full: WhenFull) -> Workload {
        Workload {
            when_full,
            record_interval: Some(Duration::from_secs(2)),
            ..Workload::engset(clients, slots, rho, requests)
        }
    }
}

/// An eviction, seen from the evicted.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Victims {
    pub count: u64,
    /// Since the server completed the victim's handshake, seconds (summed; see `mean_*`).
    pub age_s: f64,
    /// Since the victim's last application record (sent or received), seconds.
    pub idle_s: f64,
    /// Since the victim last sent anything (its Finished or a request), seconds: what the
    /// server heard.
    pub silent_s: f64,
    /// Victims that send requests (the others only listen).
    pub talkers: u64,
    /// Victims with an application record within the last mean record interval.
    pub active: u64,
    /// Victims that had been silent (see `silent_s`) the longest of the established sessions,
    /// and whose last application record was the oldest (within a few link delays: the
    /// client's view of the server's clocks).
    pub most_silent: u64,
    pub least_recently_used: u64,
    /// Victims whose client still wanted the session (and so reconnected).
    pub still_wanted: u64,
}

/// What one replication measured (inside the measuring window).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    pub measured_s: f64,
    /// Time with all R slots taken, by the server's own connection count.
    pub all_busy_s: f64,
    /// New requests (reconnections after an eviction not included) and how many were refused.
    pub requests: u64,
    pub refused: u64,
    pub sessions: u64,
    pub victims: Victims,
    /// Reconnections after an eviction: handshakes started, completed, resumed by ticket,
    /// refused, and their bytes on the wire (both directions, cookie exchange included).
    pub reconnects: u64,
    pub reconnects_completed: u64,
    pub reconnects_resumed: u64,
    pub reconnects_refused: u64,
    pub reconnect_bytes: u64,
    /// Bytes of the first handshakes of requests that got a session (for comparison).
    pub request_handshake_bytes: u64,
    /// Refusals while the server held an established session it could have evicted.
    pub refused_while_established: u64,
    /// Anything else that failed (none expected on a lossless link).
    pub other_failures: u64,
    /// The most connections the server held at once.
    pub max_open: usize,
    /// The endpoint's own counters over the whole run.
    pub server_evicted: u64,
    pub server_refusals: u64,
}

impl Outcome {
    pub fn time_congestion(&self) -> f64 {
        self.all_busy_s / self.measured_s
    }

    pub fn call_congestion(&self) -> f64 {
        self.refused as f64 / self.requests.max(1) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Thinking,
    Handshaking,
    Holding,
}

struct SimClient {
    addr: SocketAddr,
    talker: bool,
    conn: Option<Connection>,
    phase: Phase,
    /// End of thinking, or of the wanted session (close then).
    wake: Option<Instant>,
    /// Next request (talker) or the server's next notification (listener).
    traffic_at: Option<Instant>,
    wanted_until: Instant,
    reconnecting: bool,
    handshake_bytes: u64,
    last_record: Instant,
    last_sent: Instant,
    ticket: Option<ClientSession>,
}

/// Seconds of `[from, to]` inside `[start, end]`.
fn overlap(from: Instant, to: Instant, start: Instant, end: Instant) -> f64 {
    let (a, b) = (from.max(start), to.min(end));
    if b > a {
        (b - a).as_secs_f64()
    } else {
        0.0
    }
}

fn psk_configs(workload: &Workload) -> (ClientConfig, ServerConfig) {
    let (identity, key) = (b"e3-client".as_slice(), [0x3eu8; 16]);
    let mut client = ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(identity, key) };
    client.enable_tickets = workload.reconnect == Reconnect::Ticket;
    let server = ServerConfig {
        versions: Versions::Dtls12,
        max_sessions: Some(workload.slots),
        when_full: workload.when_full,
        // A constrained server keeps no session cache: resumption is by ticket or not at all.
        session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
        tickets: (workload.reconnect == Reconnect::Ticket).then(|| {
            let mut keys = TicketKeys::new(1, [0x5a; 16]);
            keys.lifetime = Duration::from_secs(365 * 24 * 3600);
            keys
        }),
        wall_clock: Some(WallClock { at: Instant::ZERO, unix_secs: 1_800_000_000 }),
        ..ServerConfig::psk(identity, key)
    };
    (client, server)
}

struct Run<'a> {
    w: &'a Workload,
    rng: ChaCha8Rng,
    now: Instant,
    start: Instant,
    end: Instant,
    client_config: Arc<ClientConfig>,
    server: Endpoint,
    server_addr: SocketAddr,
    clients: Vec<SimClient>,
    by_addr: BTreeMap<SocketAddr, usize>,
    /// The server's connections: client, and when its handshake completed.
    handles: BTreeMap<ConnectionHandle, (usize, Option<Instant>)>,
    /// Datagrams on the link: (arrival, towards the server, client, bytes).
    wire: VecDeque<(Instant, bool, usize, Vec<u8>)>,
    open: usize,
    open_since: Instant,
    out: Outcome,
}

impl Run<'_> {
    fn exp(&mut self, mean: Duration) -> Duration {
        // U in (0, 1]: -ln U is Exp(1).
        let u = ((self.rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        Duration::from_secs_f64(-u.ln() * mean.as_secs_f64())
    }

    fn seed(&mut self) -> [u8; 32] {
        let mut s = [0u8; 32];
        self.rng.fill_bytes(&mut s);
        s
    }

    fn measuring(&self) -> bool {
        self.now >= self.start && self.now < self.end
    }

    /// Books the time since the last change of the server's connection count.
    fn account(&mut self) {
        if self.open >= self.w.slots {
            self.out.all_busy_s += overlap(self.open_since, self.now, self.start, self.end);
        }
        self.open_since = self.now;
        self.open = self.server.stats().connections_open as usize;
        self.out.max_open = self.out.max_open.max(self.open);
    }

    fn think(&mut self, i: usize) {
        let gap = self.exp(self.w.mean_hold.div_f64(self.w.rho));
        let c = &mut self.clients[i];
        c.phase = Phase::Thinking;
        c.conn = None;
        c.traffic_at = None;
        c.reconnecting = false;
        c.wake = Some(self.now + gap);
    }

    fn connect(&mut self, i: usize, reconnecting: bool) {
        let seed = self.seed();
        let c = &mut self.clients[i];
        let session =
            if reconnecting && self.w.reconnect == Reconnect::Ticket { c.ticket.clone() } else { None };
        c.conn = Some(Connection::client_with_session(
            self.client_config.clone(),
            self.now,
            self.server_addr,
            seed,
            session,
        ));
        c.phase = Phase::Handshaking;
        c.reconnecting = reconnecting;
        c.handshake_bytes = 0;
        c.wake = None;
        c.traffic_at = None;
    }

    /// Moves every datagram onto the link and handles every event, until nothing moves.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            for i in 0..self.clients.len() {
                while let Some(t) = self.clients[i].conn.as_mut().and_then(|c| c.poll_transmit(self.now)) {
                    moved = true;
                    if self.clients[i].phase == Phase::Handshaking {
                        self.clients[i].handshake_bytes += t.payload.len() as u64;
                    }
                    self.wire.push_back((self.now + self.w.one_way_delay, true, i, t.payload));
                }
            }
            while let Some(t) = self.server.poll_transmit(self.now) {
                moved = true;
                if let Some(&i) = self.by_addr.get(&t.dst) {
                    if self.clients[i].phase == Phase::Handshaking {
                        self.clients[i].handshake_bytes += t.payload.len() as u64;
                    }
                    self.wire.push_back((self.now + self.w.one_way_delay, false, i, t.payload));
                }
            }
            while let Some((h, e)) = self.server.poll_event() {
                moved = true;
                self.server_event(h, e);
            }
            for i in 0..self.clients.len() {
                while let Some(e) = self.clients[i].conn.as_mut().and_then(|c| c.poll_event()) {
                    moved = true;
                    self.client_event(i, e);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn server_event(&mut self, h: ConnectionHandle, e: Event) {
        match e {
            Event::Accepted => {
                let remote = self.server.connection(h).map(|c| c.remote());
                if let Some(&i) = remote.and_then(|r| self.by_addr.get(&r)) {
                    self.handles.insert(h, (i, None));
                }
            }
            Event::Connected(_) => {
                if let Some(entry) = self.handles.get_mut(&h) {
                    entry.1 = Some(self.now);
                }
            }
            Event::ApplicationData(data) => {
                // Echo the request.
                let _ = self.server.send(h, &data);
            }
            Event::Evicted { .. } => {
                if let Some((i, established)) = self.handles.remove(&h) {
                    if self.measuring() {
                        let c = &self.clients[i];
                        let v = &mut self.out.victims;
                        v.count += 1;
                        v.age_s += established.map_or(0.0, |t| (self.now - t).as_secs_f64());
                        let idle = (self.now - c.last_record).as_secs_f64();
                        v.idle_s += idle;
                        v.silent_s += (self.now - c.last_sent).as_secs_f64();
                        let slack = self.w.one_way_delay * 3;
                        let others = self
                            .clients
                            .iter()
                            .enumerate()
                            .filter(|&(j, o)| j != i && o.phase == Phase::Holding);
                        let (mut most_silent, mut least_recent) = (true, true);
                        for (_, other) in others {
                            most_silent &= c.last_sent <= other.last_sent + slack;
                            least_recent &= c.last_record <= other.last_record + slack;
                        }
                        v.most_silent += u64::from(most_silent);
                        v.least_recently_used += u64::from(least_recent);
                        v.talkers += u64::from(c.talker);
                        let interval = self.w.record_interval.map_or(0.0, |d| d.as_secs_f64());
                        v.active += u64::from(idle < interval);
                        v.still_wanted += u64::from(self.now < c.wanted_until);
                    }
                }
            }
            Event::Closed | Event::Failed(_) => {
                self.handles.remove(&h);
            }
            Event::Refused { .. } => {
                if self.handles.values().any(|(_, established)| established.is_some()) {
                    self.out.refused_while_established += 1;
                }
            }
            Event::PathChanged(_) | Event::SessionTicket(_) => {}
        }
    }

    fn client_event(&mut self, i: usize, e: Event) {
        let measuring = self.measuring();
        match e {
            Event::Connected(summary) => {
                let hold = self.exp(self.w.mean_hold);
                let first_gap = self.w.record_interval.map(|mean| self.exp(mean));
                let c = &mut self.clients[i];
                c.phase = Phase::Holding;
                c.last_record = self.now;
                c.last_sent = self.now;
                if summary.session.is_some() {
                    c.ticket = summary.session;
                }
                if c.reconnecting {
                    if measuring {
                        self.out.reconnects_completed += 1;
                        self.out.reconnects_resumed += u64::from(summary.resumed);
                        self.out.reconnect_bytes += c.handshake_bytes;
                    }
                } else {
                    c.wanted_until = self.now + hold;
                    if measuring {
                        self.out.sessions += 1;
                        self.out.request_handshake_bytes += c.handshake_bytes;
                    }
                }
                c.wake = Some(c.wanted_until.max(self.now));
                c.traffic_at = first_gap.map(|gap| self.now + gap);
            }
            Event::ApplicationData(_) => self.clients[i].last_record = self.now,
            Event::Closed => {
                // The server closed it: evicted.
                if self.clients[i].phase == Phase::Holding && self.now < self.clients[i].wanted_until {
                    let back_off = self.exp(self.w.reconnect_after);
                    let c = &mut self.clients[i];
                    c.conn = None;
                    c.phase = Phase::Thinking;
                    c.reconnecting = true;
                    c.traffic_at = None;
                    c.wake = Some(self.now + back_off);
                } else {
                    self.think(i);
                }
            }
            Event::Failed(error) => {
                let c = &self.clients[i];
                let refused = matches!(error, Error::NoSessionSlot { .. });
                if measuring {
                    match (refused, c.reconnecting) {
                        (true, false) => self.out.refused += 1,
                        (true, true) => self.out.reconnects_refused += 1,
                        (false, _) => self.out.other_failures += 1,
                    }
                }
                self.think(i);
            }
            _ => {}
        }
    }

    /// The next instant anything happens.
    fn next(&self) -> Option<Instant> {
        let clients = self
            .clients
            .iter()
            .flat_map(|c| [c.wake, c.traffic_at, c.conn.as_ref().and_then(|conn| conn.poll_timeout())]);
        let wire = self.wire.front().map(|d| d.0);
        clients.chain([wire, self.server.poll_timeout()]).flatten().min()
    }

    fn step(&mut self) {
        while self.wire.front().is_some_and(|d| d.0 <= self.now) {
            let Some((_, to_server, i, mut bytes)) = self.wire.pop_front() else { break };
            let addr = self.clients[i].addr;
            if to_server {
                self.server.handle_datagram(self.now, self.server_addr, addr, &mut bytes);
                self.account();
            } else if let Some(conn) = self.clients[i].conn.as_mut() {
                conn.handle_datagram(self.now, self.server_addr, &mut bytes);
            }
        }
        if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
            self.server.handle_timeout(self.now);
            self.account();
        }
        for i in 0..self.clients.len() {
            if let Some(conn) = self.clients[i].conn.as_mut() {
                if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                    conn.handle_timeout(self.now);
                }
            }
            if self.clients[i].traffic_at.is_some_and(|t| t <= self.now) {
                self.traffic(i);
            }
            if self.clients[i].wake.is_some_and(|t| t <= self.now) {
                self.wake(i);
            }
        }
    }

    fn traffic(&mut self, i: usize) {
        let gap = self.w.record_interval.map(|mean| self.exp(mean));
        let c = &mut self.clients[i];
        c.traffic_at = gap.map(|gap| self.now + gap);
        c.last_record = self.now;
        if c.talker {
            c.last_sent = self.now;
            if let Some(conn) = c.conn.as_mut() {
                let _ = conn.send(b"request");
            }
        } else if let Some(h) = self.server.handle_for(c.addr) {
            // The endpoint dates a send by the latest time it was given (`Endpoint::send`).
            self.server.handle_timeout(self.now);
            let _ = self.server.send(h, b"notification");
            self.account();
        }
    }

    fn wake(&mut self, i: usize) {
        let measuring = self.measuring();
        let c = &mut self.clients[i];
        c.wake = None;
        match c.phase {
            Phase::Thinking if c.reconnecting => {
                if self.now < c.wanted_until {
                    if measuring {
                        self.out.reconnects += 1;
                    }
                    self.connect(i, true);
                } else {
                    self.think(i);
                }
            }
            Phase::Thinking => {
                if measuring {
                    self.out.requests += 1;
                }
                self.connect(i, false);
            }
            Phase::Holding => {
                if let Some(conn) = c.conn.as_mut() {
                    conn.close();
                    // close_notify goes out before the connection is dropped.
                    while let Some(t) = conn.poll_transmit(self.now) {
                        self.wire.push_back((self.now + self.w.one_way_delay, true, i, t.payload));
                    }
                }
                self.think(i);
            }
            Phase::Handshaking => {}
        }
    }
}

/// One replication of `workload`, all randomness from `seed`.
pub fn simulate(workload: &Workload, seed: u64) -> Outcome {
    let (client_config, mut server_config) = psk_configs(workload);
    // Sessions end by close_notify or eviction only: an idle expiry would end a listener's
    // session early (it sends nothing) and take load off the slots.
    server_config.idle_timeout = None;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut server_seed = [0u8; 32];
    rng.fill_bytes(&mut server_seed);
    let server =
        Endpoint::new(Arc::new(server_config), server_seed).expect("E3's PSK server configuration is valid");
    let origin = Instant::from_millis(1_000);
    let start = origin + workload.warmup;
    let clients = (0..workload.clients)
        .map(|i| SimClient {
            addr: SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 5684)),
            talker: i % 2 == 0,
            conn: None,
            phase: Phase::Thinking,
            wake: None,
            traffic_at: None,
            wanted_until: origin,
            reconnecting: false,
            handshake_bytes: 0,
            last_record: origin,
            last_sent: origin,
            ticket: None,
        })
        .collect::<Vec<_>>();
    let mut run = Run {
        w: workload,
        rng,
        now: origin,
        start,
        end: start + workload.measured,
        client_config: Arc::new(client_config),
        server,
        server_addr: SocketAddr::from(([10, 1, 0, 1], 5684)),
        by_addr: clients.iter().enumerate().map(|(i, c)| (c.addr, i)).collect(),
        clients,
        handles: BTreeMap::new(),
        wire: VecDeque::new(),
        open: 0,
        open_since: origin,
        out: Outcome { measured_s: workload.measured.as_secs_f64(), ..Outcome::default() },
    };
    for i in 0..workload.clients {
        run.think(i);
    }
    loop {
        run.pump();
        let Some(next) = run.next() else { break };
        if next >= run.end {
            run.now = run.end;
            run.account();
            break;
        }
        run.now = run.now.max(next);
        run.step();
    }
    let stats = run.server.stats();
    run.out.server_evicted = stats.sessions_evicted;
    run.out.server_refusals = stats.slot_refusals;
    run.out
}

/// Replications of `workload`, one per seed, on up to `threads` threads; in seed order.
pub fn replicate(workload: &Workload, seeds: &[u64], threads: usize) -> Vec<Outcome> {
    let threads = threads.clamp(1, seeds.len().max(1));
    let mut outcomes: Vec<Option<Outcome>> = vec![None; seeds.len()];
    std::thread::scope(|scope| {
        let chunks: Vec<_> = outcomes.chunks_mut(seeds.len().div_ceil(threads).max(1)).collect();
        let mut offset = 0;
        for chunk in chunks {
            let these = &seeds[offset..offset + chunk.len()];
            offset += chunk.len();
            scope.spawn(move || {
                for (slot, &seed) in chunk.iter_mut().zip(these) {
                    *slot = Some(simulate(workload, seed));
                }
            });
        }
    });
    outcomes.into_iter().flatten().collect()
}

/// The time and call congestion of replications, each with its confidence interval.
pub fn congestion(outcomes: &[Outcome]) -> (Estimate, Estimate) {
    let time: Vec<f64> = outcomes.iter().map(Outcome::time_congestion).collect();
    let call: Vec<f64> = outcomes.iter().map(Outcome::call_congestion).collect();
    (Estimate::of(&time), Estimate::of(&call))
}
