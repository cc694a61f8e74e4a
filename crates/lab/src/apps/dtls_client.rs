//! A DTLS client app that runs sessions one after another, each from a fresh UDP port (so the
//! server sees a new peer every time), and after each handshake exchanges numbered requests and
//! echoes with the server (`records`).
//!
//! A session: handshake (full, or resumed with the ticket of the full handshake just before it
//! when [`SessionPlan::resume`]: DTLS 1.2's comes with the handshake, DTLS 1.3's NewSessionTicket
//! after it, so a full 1.3 session waits for its ticket before it ends; with
//! [`SessionPlan::early_data`] the resumed handshake sends its first request as 0-RTT early
//! data, right after the ClientHello); then `records` requests one at a time, as CoAP with NSTART = 1
//! (RFC 7252 §4.7), each resent on a timer (initial `record_rto`, doubling up to
//! `max_record_rto`) until its echo arrives, the next one sent at once or, with
//! [`DtlsClientLoop::with_record_interval`], that long after; then close_notify (when `close`).
//! It sends from the address of the interface the host announced last (up, or a new address),
//! so a session carries on across a handover the scenario makes. With
//! [`SessionPlan::move_mid_session`] the client asks for a new address once the first half of
//! the requests are echoed ([`DtlsClientLoop::move_wanted`]; whoever drives the simulator moves
//! its interface), sends the next request at once (it may be in flight when the move comes),
//! and the rest once it has moved: the session must carry on from the new address.
//!
//! A session fails when the engine reports `Failed` (or the peer closes it), or when a request
//! goes unanswered for `stall_after`: the session stalled. Every failure is kept with the
//! handshake's number, port and times, so a run can be narrowed down to it.

use super::records::{self, RequestId};
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_dtls::{
    ClientConfig, ClientSession, Connection, Error, Event, NamedGroup, Resumption, Versions,
};
use fastshake_sim::apps::{App, AppStats, HandshakeStats, NodeEvent};
use std::collections::{BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The engine seeds of a run of sessions: a template whose first 8 bytes are replaced by the
/// handshake's number, so each handshake draws its own randomness and a run is reproducible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedTemplate(pub [u8; 32]);

impl SeedTemplate {
    /// The seed of handshake `index`.
    pub fn for_index(&self, index: u64) -> [u8; 32] {
        self.for_index_at(index, 0)
    }

    /// The seed of handshake `index`, its number in bytes `at..at + 8` (little-endian) instead.
    pub fn for_index_at(&self, index: u64, at: usize) -> [u8; 32] {
        let mut seed = self.0;
        seed[at..at + 8].copy_from_slice(&index.to_le_bytes());
        seed
    }
}

/// What a [`DtlsClientLoop`] does.
#[derive(Clone, Debug)]
pub struct SessionPlan {
    /// The server's address.
    pub server: SocketAddr,
    /// Handshake `k` (from 0) leaves from port `base_port + k`.
    pub base_port: u16,
    /// Sessions to run; with `resume`, each is a full handshake followed by a resumed one.
    pub sessions: u32,
    /// Follow every full handshake with one that resumes it by the ticket it gave.
    pub resume: bool,
    /// DTLS 1.3: each resumed handshake sends its first request as 0-RTT early data (the
    /// configuration's `early_data` must be on).
    pub early_data: bool,
    /// Requests per session (0: the session ends at the handshake).
    pub records: u16,
    /// Bytes of each request and echo.
    pub record_len: usize,
    /// Ask to move to a new address in the middle of each session's requests.
    pub move_mid_session: bool,
    /// Send close_notify when a session is done.
    pub close: bool,
    /// First resend timeout of a request.
    pub record_rto: Duration,
    /// Ceiling of the doubling resend timeout.
    pub max_record_rto: Duration,
    /// A request unanswered this long after it first went out means the session stalled.
    pub stall_after: Duration,
    /// When the first handshake starts.
    pub first_start: Instant,
    /// Engine seeds.
    pub seeds: SeedTemplate,
}

impl SessionPlan {
    /// Handshakes the plan runs if every full one succeeds.
    pub fn handshakes(&self) -> u32 {
        self.sessions * if self.resume { 2 } else { 1 }
    }
}

/// Where a session was when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Before `Event::Connected`.
    Handshake,
    /// Exchanging requests and echoes.
    Records,
}

/// One failed session.
#[derive(Clone, Debug)]
pub struct ClientFailure {
    /// The handshake's number in this client's run (from 0).
    pub index: u32,
    /// The port it left from.
    pub port: u16,
    /// Whether it offered to resume.
    pub resuming: bool,
    /// When its ClientHello went out, and when it failed.
    pub started: Instant,
    pub at: Instant,
    pub phase: Phase,
    /// The error grouped for reports (see [`super::error_class`]).
    pub class: String,
    /// The error in full.
    pub detail: String,
}

/// One completed handshake, as the client's `HandshakeSummary` tells it.
#[derive(Clone, Copy, Debug)]
pub struct HandshakeSample {
    pub index: u32,
    pub resumed: bool,
    /// How it resumed, if it did.
    pub resumption: Option<Resumption>,
    /// The version it spoke, and its key-exchange group (`None`: PSK alone).
    pub version: Versions,
    pub group: Option<NamedGroup>,
    pub duration: Duration,
    pub flights_resent: u32,
    /// UDP payload bytes sent and received during the handshake.
    pub bytes: u64,
}

/// What a client saw, for the report.
#[derive(Clone, Debug, Default)]
pub struct ClientTally {
    /// Handshakes started.
    pub started: u32,
    pub samples: Vec<HandshakeSample>,
    pub failures: Vec<ClientFailure>,
    /// Resumed handshakes offered, accepted, and answered with a full handshake instead.
    pub resumptions_offered: u32,
    pub resumed: u32,
    pub resumptions_declined: u32,
    /// Resumptions not attempted because the full session before them got no ticket.
    pub resumptions_skipped: u32,
    /// DTLS 1.3 NewSessionTicket events (a ticket the engine delivered twice counts twice).
    pub tickets_received: u32,
    /// First requests sent as 0-RTT early data, and those the engine kept for after the
    /// handshake instead (no ticket allowing it).
    pub early_sent: u32,
    pub early_held: u32,
    /// Of the handshakes that sent early data: the server accepted it, or refused it (the engine
    /// then sends it again after the handshake).
    pub early_accepted: u32,
    pub early_refused: u32,
    /// Sessions whose requests were all echoed.
    pub sessions_done: u32,
    /// Distinct requests sent, and echoed.
    pub requests: u64,
    pub requests_echoed: u64,
    /// Requests sent again after their timer ran out.
    pub requests_resent: u64,
    /// From the last send of each echoed request to its echo, in echo order.
    pub request_rtts: Vec<Duration>,
    /// Echo records received, and those received before (the engine delivered them twice).
    pub echoes_received: u64,
    pub duplicate_echoes: u64,
    /// Moves asked for and made.
    pub moves_asked: u32,
    pub moves_done: u32,
    /// Datagrams for a session that had already ended (its socket closed).
    pub stale_datagrams: u64,
    /// When the last session ended.
    pub last_done_at: Instant,
}

/// The request in flight.
struct Outstanding {
    seq: u16,
    attempts: u16,
    first_sent: Instant,
    last_sent: Instant,
    resend_at: Instant,
    rto: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MoveState {
    NotNeeded,
    /// Until the first half of the requests are echoed.
    Later,
    Asked,
    Done,
}

struct Session {
    index: u32,
    port: u16,
    conn: Connection,
    started: Instant,
    resuming: bool,
    /// Set at `Event::Connected`.
    connected: bool,
    /// Requests sent so far (the next one's number).
    sent: u16,
    /// The request waiting for its echo, if any.
    outstanding: Option<Outstanding>,
    /// When the next request goes out (a pause between requests).
    next_request_at: Option<Instant>,
    echoes: BTreeSet<u32>,
    moving: MoveState,
    /// Its first request went out as early data.
    early: bool,
    /// A full DTLS 1.3 session whose requests are done waits for its ticket until then.
    ticket_deadline: Option<Instant>,
}

/// Runs [`SessionPlan`] against one DTLS server (see the module documentation).
pub struct DtlsClientLoop {
    config: Arc<ClientConfig>,
    plan: SessionPlan,
    /// Pause between an echo and the next request.
    record_interval: Duration,
    local_ip: Option<Ipv4Addr>,
    /// Handshakes started (the next one's number).
    next_index: u32,
    session: Option<Session>,
    /// Sessions that ended with datagrams not yet handed out (close_notify, a fatal alert),
    /// with their ports.
    closing: VecDeque<(u16, Connection)>,
    next_start_at: Option<Instant>,
    /// The session of the last full handshake, for the resumption that follows it.
    ticket: Option<ClientSession>,
    pub tally: ClientTally,
}

impl DtlsClientLoop {
    /// A client with `config` that runs `plan`.
    pub fn new(config: Arc<ClientConfig>, plan: SessionPlan) -> Self {
        let next_start_at = (plan.handshakes() > 0).then_some(plan.first_start);
        DtlsClientLoop {
            config,
            plan,
            record_interval: Duration::ZERO,
            local_ip: None,
            next_index: 0,
            session: None,
            closing: VecDeque::new(),
            next_start_at,
            ticket: None,
            tally: ClientTally::default(),
        }
    }

    /// Waits `interval` after each echo before sending the next request (default: none), so
    /// that a session lasts long enough for what a scenario does to the network meanwhile.
    pub fn with_record_interval(mut self, interval: Duration) -> Self {
        self.record_interval = interval;
        self
    }

    /// Whether every handshake of the plan has run and ended.
    pub fn done(&self) -> bool {
        self.next_index >= self.plan.handshakes()
            && self.session.is_none()
            && self.closing.is_empty()
            && self.next_start_at.is_none()
    }

    /// Whether the session in progress waits for its address to change.
    pub fn move_wanted(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.moving == MoveState::Asked)
    }

    fn start(&mut self, now: Instant) {
        let index = self.next_index;
        self.next_index += 1;
        let resuming = self.plan.resume && index % 2 == 1;
        let port = self.plan.base_port.wrapping_add(index as u16);
        let seed = self.plan.seeds.for_index(u64::from(index) + 1);
        let (config, server) = (self.config.clone(), self.plan.server);
        let conn = if resuming {
            self.tally.resumptions_offered += 1;
            Connection::client_with_session(config, now, server, seed, self.ticket.take())
        } else {
            Connection::client(config, now, server, seed)
        };
        self.tally.started += 1;
        let moving = if self.plan.move_mid_session { MoveState::Later } else { MoveState::NotNeeded };
        let mut conn = conn;
        let mut outstanding = None;
        let mut sent = 0;
        let early = resuming && self.plan.early_data && self.plan.records > 0;
        if early {
            let id = RequestId { seq: 0, attempt: 0 };
            match conn.send_early_data(&records::request(id, self.plan.record_len)) {
                Ok(true) => self.tally.early_sent += 1,
                _ => self.tally.early_held += 1,
            }
            self.tally.requests += 1;
            sent = 1;
            let rto = self.plan.record_rto;
            // Its timers start when the session is up (`Event::Connected`).
            outstanding = Some(Outstanding {
                seq: 0,
                attempts: 1,
                first_sent: now,
                last_sent: now,
                resend_at: now + rto,
                rto,
            });
        }
        self.session = Some(Session {
            index,
            port,
            conn,
            started: now,
            resuming,
            connected: false,
            sent,
            outstanding,
            next_request_at: None,
            echoes: BTreeSet::new(),
            moving,
            early,
            ticket_deadline: None,
        });
    }

    /// Handles the session's events; it may end there.
    fn drain(&mut self, now: Instant) {
        while let Some(event) = self.session.as_mut().and_then(|s| s.conn.poll_event()) {
            match event {
                Event::Connected(summary) => {
                    let Some(s) = self.session.as_mut() else { return };
                    self.tally.samples.push(HandshakeSample {
                        index: s.index,
                        resumed: summary.resumed,
                        resumption: summary.resumption,
                        version: summary.version,
                        group: summary.group,
                        duration: summary.duration,
                        flights_resent: summary.retransmissions,
                        bytes: summary.bytes_sent + summary.bytes_received,
                    });
                    if s.resuming {
                        if summary.resumed {
                            self.tally.resumed += 1;
                        } else {
                            self.tally.resumptions_declined += 1;
                        }
                    } else if self.plan.resume {
                        // DTLS 1.2's ticket; 1.3's comes later, as `Event::SessionTicket`.
                        self.ticket = summary.session;
                    }
                    if s.early {
                        match summary.early_data {
                            Some(true) => self.tally.early_accepted += 1,
                            Some(false) => self.tally.early_refused += 1,
                            None => {}
                        }
                    }
                    if let Some(o) = s.outstanding.as_mut() {
                        // The early request: resent, and stalled, from the session's start on.
                        o.first_sent = now;
                        o.resend_at = now + o.rto;
                    }
                    s.connected = true;
                    self.progress(now);
                }
                Event::ApplicationData(data) => self.on_echo(now, &data),
                Event::Failed(error) => self.fail(now, error_detail(&error), super::error_class(&error)),
                Event::Closed => {
                    self.fail(now, "the server closed the session".into(), "Closed by the server".into())
                }
                Event::SessionTicket(ticket) => {
                    self.tally.tickets_received += 1;
                    if self.plan.resume && self.session.as_ref().is_some_and(|s| !s.resuming) {
                        self.ticket = Some(ticket);
                        self.progress(now);
                    }
                }
                Event::PathChanged(_) | Event::Accepted | Event::Evicted { .. } | Event::Refused { .. } => {}
            }
        }
    }

    /// Sends the next request for the first time.
    fn send_next(&mut self, now: Instant) {
        let Some(s) = self.session.as_mut().filter(|s| s.sent < self.plan.records) else { return };
        let seq = s.sent;
        s.sent += 1;
        let _ = s.conn.send(&records::request(RequestId { seq, attempt: 0 }, self.plan.record_len));
        self.tally.requests += 1;
        let rto = self.plan.record_rto;
        s.next_request_at = None;
        s.outstanding = Some(Outstanding {
            seq,
            attempts: 1,
            first_sent: now,
            last_sent: now,
            resend_at: now + rto,
            rto,
        });
    }

    fn on_echo(&mut self, now: Instant, data: &[u8]) {
        let Some(s) = self.session.as_mut() else { return };
        let Some((id, echo_id)) = records::parse_echo(data) else { return };
        self.tally.echoes_received += 1;
        if !s.echoes.insert(echo_id) {
            self.tally.duplicate_echoes += 1;
        }
        if let Some(o) = s.outstanding.take_if(|o| o.seq == id.seq) {
            self.tally.requests_echoed += 1;
            self.tally.request_rtts.push(now.saturating_duration_since(o.last_sent));
            if !self.record_interval.is_zero() && s.sent < self.plan.records {
                s.next_request_at = Some(now + self.record_interval);
            }
        }
        self.progress(now);
    }

    /// Moves the session on once no request waits for its echo.
    fn progress(&mut self, now: Instant) {
        let Some(s) = self.session.as_mut() else { return };
        if !s.connected || s.outstanding.is_some() || s.next_request_at.is_some_and(|t| t > now) {
            return;
        }
        let (sent, records) = (s.sent, self.plan.records);
        match s.moving {
            MoveState::Later if sent >= (records / 2).max(1) => {
                s.moving = MoveState::Asked;
                self.tally.moves_asked += 1;
                // The next request goes out at once, so it may be in flight when the move comes;
                // one is kept for after the move.
                if records - sent >= 2 {
                    self.send_next(now);
                }
            }
            MoveState::Asked => {}
            _ if sent < records => self.send_next(now),
            // A DTLS 1.3 ticket comes after the handshake: the pair's resumption needs it.
            _ if self.plan.resume && !s.resuming && self.ticket.is_none() => {
                s.ticket_deadline.get_or_insert(now + self.plan.stall_after);
            }
            _ => {
                self.tally.sessions_done += 1;
                self.end_session(now);
            }
        }
    }

    fn fail(&mut self, now: Instant, detail: String, class: String) {
        let Some(s) = self.session.as_ref() else { return };
        let phase = if s.connected { Phase::Records } else { Phase::Handshake };
        self.tally.failures.push(ClientFailure {
            index: s.index,
            port: s.port,
            resuming: s.resuming,
            started: s.started,
            at: now,
            phase,
            class,
            detail,
        });
        if self.plan.resume && !s.resuming && self.ticket.is_none() {
            // No ticket to resume with: the pair's resumption is skipped.
            self.next_index += 1;
            self.tally.resumptions_skipped += 1;
        }
        self.end_session(now);
    }

    fn end_session(&mut self, now: Instant) {
        let Some(mut s) = self.session.take() else { return };
        if self.plan.close && s.conn.is_established() {
            s.conn.close();
        }
        // What the engine queued (close_notify, a fatal alert) leaves before the socket closes.
        self.closing.push_back((s.port, s.conn));
        self.tally.last_done_at = now;
        if self.next_index < self.plan.handshakes() {
            self.next_start_at = Some(now);
        }
    }

    fn on_timers(&mut self, now: Instant) {
        if self.session.as_ref().and_then(|s| s.next_request_at).is_some_and(|t| t <= now) {
            self.progress(now);
        }
        let Some(s) = self.session.as_mut() else { return };
        if !s.conn.is_established() {
            return;
        }
        if s.ticket_deadline.is_some_and(|t| t <= now) {
            let detail =
                format!("no NewSessionTicket {} s after the requests", self.plan.stall_after.as_secs());
            self.fail(now, detail, "No ticket".into());
            return;
        }
        let Some(r) = s.outstanding.as_mut().filter(|r| r.resend_at <= now) else { return };
        if now >= r.first_sent + self.plan.stall_after {
            let detail = format!(
                "request {} of {} unanswered after {} sends over {} s",
                r.seq,
                self.plan.records,
                r.attempts,
                self.plan.stall_after.as_secs()
            );
            self.fail(now, detail, "Records stalled".into());
            return;
        }
        let id = RequestId { seq: r.seq, attempt: r.attempts };
        let _ = s.conn.send(&records::request(id, self.plan.record_len));
        r.attempts = r.attempts.saturating_add(1);
        r.last_sent = now;
        r.rto = (r.rto * 2).min(self.plan.max_record_rto);
        r.resend_at = (now + r.rto).min(r.first_sent + self.plan.stall_after);
        self.tally.requests_resent += 1;
    }

    fn src(&self, port: u16) -> Option<SocketAddr> {
        self.local_ip.map(|ip| SocketAddr::from((ip, port)))
    }
}

/// The error as a report line shows it in full.
fn error_detail(error: &Error) -> String {
    format!("{error:?}")
}

impl SansIo for DtlsClientLoop {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        // A datagram to an earlier session's port finds its socket closed.
        let Some(s) = self.session.as_mut().filter(|s| s.port == local.port()) else {
            self.tally.stale_datagrams += 1;
            return;
        };
        s.conn.handle_datagram(now, remote, datagram);
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        while let Some((port, conn)) = self.closing.front_mut() {
            let port = *port;
            match conn.poll_transmit(now) {
                Some(t) => return Some(Transmit { src: self.src(port), ..t }),
                None => {
                    self.closing.pop_front();
                }
            }
        }
        let s = self.session.as_mut()?;
        let port = s.port;
        let t = s.conn.poll_transmit(now)?;
        Some(Transmit { src: self.src(port), ..t })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let session = self.session.as_ref().map(|s| {
            let resend = s.outstanding.as_ref().map(|r| r.resend_at);
            let established = s.conn.is_established();
            [
                s.conn.poll_timeout(),
                resend.filter(|_| established),
                s.next_request_at,
                s.ticket_deadline.filter(|_| established),
            ]
        });
        session.into_iter().flatten().chain([self.next_start_at]).flatten().min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.next_start_at.is_some_and(|t| t <= now) {
            self.next_start_at = None;
            self.start(now);
        } else if let Some(s) = self.session.as_mut() {
            if s.conn.poll_timeout().is_some_and(|t| t <= now) {
                s.conn.handle_timeout(now);
            }
        }
        self.drain(now);
        self.on_timers(now);
    }
}

impl App for DtlsClientLoop {
    fn handle_node_event(&mut self, now: Instant, event: &NodeEvent) {
        match event {
            NodeEvent::InterfaceUp { addr, .. } => self.local_ip = Some(*addr),
            NodeEvent::AddressChanged { new, .. } => {
                self.local_ip = Some(*new);
                if let Some(s) = self.session.as_mut().filter(|s| s.moving == MoveState::Asked) {
                    s.moving = MoveState::Done;
                    self.tally.moves_done += 1;
                    self.progress(now);
                }
            }
            NodeEvent::InterfaceDown { .. } => {}
        }
    }

    fn stats(&self) -> Option<AppStats> {
        let t = &self.tally;
        let all_done = self.done() && t.sessions_done == self.plan.handshakes();
        Some(AppStats {
            requests_sent: t.requests + t.requests_resent,
            retransmissions: t.requests_resent,
            replies: t.requests_echoed,
            duplicate_replies: t.duplicate_echoes,
            answered: 0,
            rtts_ns: t.request_rtts.iter().map(|d| d.as_nanos() as u64).collect(),
            completed_at_ns: all_done.then(|| t.last_done_at.as_nanos()),
        })
    }

    fn handshakes(&self) -> Option<HandshakeStats> {
        let t = &self.tally;
        let mut stats =
            HandshakeStats { planned: Some(u64::from(self.plan.handshakes())), ..Default::default() };
        for sample in &t.samples {
            let kind = super::dtls_kind(sample.version, sample.resumption);
            stats.complete(kind, Some(sample.duration.as_nanos() as u64), sample.bytes);
        }
        stats.failed = t.failures.iter().filter(|f| f.phase == Phase::Handshake).count() as u64;
        stats.sessions_failed = t.failures.len() as u64 - stats.failed;
        Some(stats)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
