//! One association: the state machine of RFC 9260 §4 with the alternative handshake of seed
//! 004. The association holds what identifies it (ports, verification tags, state), its
//! timers, and what it has for the endpoint (datagrams, events); it reads each packet's chunks
//! and hands each to the part that owns its concern:
//!
//! - [`handshake`]: INIT, INIT-ACK, COOKIE-ECHO, COOKIE-ACK and the alternative handshake
//!   (ALT-COOKIE, cookieless, ALT-DATA/ALT-SACK), T1, INIT collision and restart (§5), SNAP's
//!   opening from two INITs exchanged out of band, with
//!   [`init`]: what an INIT says and the stateless INIT-ACK the endpoint sends;
//! - [`data`]: the send and receive queues, TSNs, SACKs and the delayed SACK, packing (§6),
//!   and partial reliability (RFC 3758): abandoned messages and FORWARD-TSN both ways;
//! - [`congestion`]: cwnd, ssthresh, Fast Recovery, what may be in flight (§7.2);
//! - [`paths`]: the peer's addresses, HEARTBEATs, error counters and the RTO (§8, §6.3);
//! - [`shutdown`]: SHUTDOWN, SHUTDOWN-ACK, SHUTDOWN-COMPLETE, T2 and the T5 guard (§9.2);
//! - [`reconfig`]: stream reset (RFC 6525), the RE-CONFIG chunk both ways;
//! - [`timer`]: every timer as a kind of one [`fastshake_core::TimerTable`].

mod congestion;
mod data;
mod handshake;
mod init;
mod paths;
mod reconfig;
mod shutdown;
mod timer;

pub(crate) use handshake::{InitOutcome, MAX_ALT_COOKIE, MIN_INITIAL_RWND};
pub(crate) use init::{own_init, regular_init_ack, InitFields, InitParams, InitVerdict};

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use congestion::Congestion;
use data::DataState;
use handshake::Handshake;
use paths::{Path, Paths, Probe};
use reconfig::Reconfig;
use timer::{Timer, Timers};

use crate::packet::{Chunk, ErrorCause, Packet, UnknownChunkAction, CHUNK_FORWARD_TSN};
use crate::queue::RecvBudget;
use crate::rto::RtoEstimator;
use crate::{
    AssociationInfo, AssociationState, AssociationStats, Config, Error, Event, HandshakeKind, Instant,
    Transmit,
};

/// What every association of an endpoint shares: its settings and its receive buffer budget.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) budget: RecvBudget,
}

pub(crate) struct Association {
    config: Arc<Config>,
    pub(crate) state: AssociationState,
    is_client: bool,
    /// The handshake that opened it, once known.
    pub(crate) kind: Option<HandshakeKind>,
    pub(crate) local_port: u16,
    pub(crate) remote_port: u16,
    pub(crate) my_tag: u32,
    pub(crate) peer_tag: u32,
    rng: ChaCha20Rng,
    timers: Timers,
    handshake: Handshake,
    data: DataState,
    congestion: Congestion,
    paths: Paths,
    reconfig: Reconfig,
    /// T2 expiries, against Association.Max.Retrans.
    t2_retransmits: u32,
    /// Control chunks waiting for the next packet.
    control: VecDeque<Chunk>,
    pub(crate) out: VecDeque<Transmit>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) stats: AssociationStats,
    /// Set once when an alternative opening with a cookie finished: the endpoint fetches
    /// cookies for the other paths.
    pub(crate) wants_path_cookies: bool,
    /// A user call (send, shutdown) left work for the next call that brings the time.
    pub(crate) user_pending: bool,
}

/// A random verification tag: never zero, which marks an INIT (RFC 9260 §3.3.2).
pub(crate) fn nonzero_u32(rng: &mut ChaCha20Rng) -> u32 {
    loop {
        let v = rng.next_u32();
        if v != 0 {
            return v;
        }
    }
}

impl Association {
    fn blank(shared: Shared, rng_seed: [u8; 32], is_client: bool, remote_port: u16, path: Path) -> Self {
        let Shared { config, budget } = shared;
        let mut rng = ChaCha20Rng::from_seed(rng_seed);
        let my_tag = nonzero_u32(&mut rng);
        let my_initial_tsn = rng.next_u32();
        let rto = RtoEstimator::new(config.rto_initial, config.rto_min, config.rto_max);
        Association {
            paths: Paths::new(path, rto),
            data: DataState::new(my_initial_tsn, &config, budget),
            congestion: Congestion::new(config.mtu.max(256)),
            handshake: Handshake::new(my_initial_tsn),
            reconfig: Reconfig::default(),
            local_port: config.local_port,
            config,
            state: AssociationState::Closed,
            is_client,
            kind: None,
            remote_port,
            my_tag,
            peer_tag: 0,
            rng,
            timers: Timers::default(),
            t2_retransmits: 0,
            control: VecDeque::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: AssociationStats::default(),
            wants_path_cookies: false,
            user_pending: false,
        }
    }

    fn mtu(&self) -> usize {
        self.config.mtu.max(256)
    }

    // ---------------------------------------------------------------- incoming

    /// Whether `vtag` may carry `packet` to this association (RFC 9260 §8.5, §8.5.1).
    fn tag_ok(&self, packet: &Packet) -> bool {
        let vtag = packet.verification_tag;
        match packet.chunks.first() {
            Some(Chunk::Abort { t_bit, .. }) | Some(Chunk::ShutdownComplete { t_bit }) => {
                if *t_bit {
                    self.peer_tag != 0 && vtag == self.peer_tag
                } else {
                    vtag == self.my_tag
                }
            }
            _ => vtag == self.my_tag,
        }
    }

    /// Learns the peer's encapsulation port and new source addresses of known peer IPs
    /// (RFC 6951 §5.5): the answer goes where the peer sent from.
    pub(crate) fn learn_path(&mut self, local: SocketAddr, remote: SocketAddr) -> usize {
        self.paths.learn(local, remote)
    }

    /// A packet whose addresses matched this association: each chunk to the part it concerns.
    pub(crate) fn handle_packet(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        packet: Packet,
        size: usize,
    ) {
        if self.state == AssociationState::Closed || !self.tag_ok(&packet) {
            return;
        }
        let path = self.learn_path(local, remote);
        self.stats.packets_in += 1;
        self.stats.bytes_in += size as u64;
        if self.state == AssociationState::Established && !self.paths.heartbeats_allowed {
            // The first packet from the client on the association: it is open on its side too.
            self.paths.heartbeats_allowed = true;
            self.schedule_heartbeat(now);
        }
        let mut got_data = false;
        let mut immediate = false;
        for chunk in packet.chunks {
            if self.state == AssociationState::Closed {
                break;
            }
            match chunk {
                Chunk::Data(d) => {
                    if matches!(self.state, AssociationState::CookieWait | AssociationState::CookieEchoed) {
                        continue;
                    }
                    got_data = true;
                    immediate |= d.immediate;
                    self.on_data_chunk(d);
                }
                Chunk::Sack(s) => self.on_sack(now, &s),
                Chunk::InitAck(ack) => self.on_init_ack(now, &ack),
                Chunk::CookieAck => self.on_cookie_ack(now),
                Chunk::Heartbeat(info) => self.answer_heartbeat(local, path, info),
                Chunk::HeartbeatAck(info) => self.on_heartbeat_ack(now, &info),
                Chunk::Abort { causes, .. } => {
                    let reason =
                        causes.first().map_or_else(|| "peer aborted".to_string(), ErrorCause::describe);
                    self.close(Event::Aborted { reason });
                }
                Chunk::Shutdown { cumulative_tsn_ack } => self.on_shutdown(now, cumulative_tsn_ack),
                Chunk::ShutdownAck => self.on_shutdown_ack(),
                Chunk::ShutdownComplete { .. } => self.on_shutdown_complete(),
                Chunk::Error { causes } => self.on_error(now, causes),
                // A COOKIE-ECHO is only valid first in its packet, where the endpoint verifies it
                // (a retransmission after a lost COOKIE-ACK is answered there); INIT is handled
                // by the endpoint too.
                Chunk::CookieEcho(_) | Chunk::Init(_) => {}
                Chunk::Reconfig(r) if self.config.stream_reset => self.on_reconfig(now, r),
                Chunk::ForwardTsn(f) if self.data.partial_reliability => {
                    if !matches!(self.state, AssociationState::CookieWait | AssociationState::CookieEchoed) {
                        self.on_forward_tsn(&f);
                    }
                }
                // A FORWARD-TSN we cannot read from a peer we speak PR-SCTP with: dropped,
                // not reported as a chunk type we do not know.
                Chunk::Unknown { chunk_type: CHUNK_FORWARD_TSN, .. } if self.data.partial_reliability => {}
                // Without stream reset we did not announce RE-CONFIG, nor FORWARD-TSN without
                // PR-SCTP: each is unknown to us like any chunk we do not implement (a
                // malformed one is, either way; RFC 3758 §3.3.1 asks for the report).
                chunk @ (Chunk::Reconfig(_) | Chunk::ForwardTsn(_) | Chunk::Unknown { .. }) => {
                    if self.on_unrecognized_chunk(&chunk) {
                        break;
                    }
                }
            }
        }
        if got_data {
            self.on_data_packet(now, immediate);
        }
        self.flush(now);
    }

    /// A chunk we do not implement, handled as its type's two high bits say (RFC 9260 §3.2);
    /// returns whether the rest of the packet is to be discarded.
    fn on_unrecognized_chunk(&mut self, chunk: &Chunk) -> bool {
        let action = UnknownChunkAction::of(chunk.chunk_type());
        if matches!(action, UnknownChunkAction::StopAndReport | UnknownChunkAction::SkipAndReport) {
            let raw = chunk.to_bytes();
            self.control.push_back(Chunk::Error { causes: vec![ErrorCause::UnrecognizedChunk(raw)] });
        }
        matches!(action, UnknownChunkAction::Stop | UnknownChunkAction::StopAndReport)
    }

    // ---------------------------------------------------------------- timers

    /// The earliest deadline of all the association's timers.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Handles every timer due at `now`, each once, in [`fastshake_core::TimerKind::ALL`]
    /// order, then sends what they queued.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        for &timer in <Timer as fastshake_core::TimerKind>::ALL {
            if self.timers.get(timer).is_none_or(|at| at > now) {
                continue;
            }
            self.timers.stop(timer);
            let alive = match timer {
                Timer::ShutdownGuard => {
                    self.on_shutdown_guard_expiry();
                    false
                }
                Timer::T1Init | Timer::T1Cookie => self.on_t1_expiry(now, timer),
                Timer::T3Rtx => self.on_t3_expiry(),
                Timer::T2Shutdown => self.on_t2_expiry(now),
                Timer::DelayedSack => {
                    self.data.sack_now = true;
                    true
                }
                Timer::Heartbeat => {
                    self.send_heartbeats(now, Probe::All);
                    true
                }
                Timer::Reconfig => self.on_reconfig_expiry(now),
            };
            if !alive {
                return;
            }
        }
        self.flush(now);
    }

    // ---------------------------------------------------------------- user calls and endings

    /// Sends what user calls queued, now that the time is known.
    pub(crate) fn run_pending(&mut self, now: Instant) {
        if std::mem::take(&mut self.user_pending) {
            self.check_shutdown_progress(now);
            self.flush(now);
        }
    }

    pub(crate) fn abort(&mut self, reason: &str) {
        if self.state == AssociationState::Closed {
            return;
        }
        self.send_abort(Some(ErrorCause::UserAbort(reason.as_bytes().to_vec())));
        self.close(Event::Aborted { reason: format!("aborted locally: {reason}") });
    }

    fn send_abort(&mut self, cause: Option<ErrorCause>) {
        if self.peer_tag != 0 {
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks.push(Chunk::Abort { t_bit: false, causes: cause.into_iter().collect() });
            self.emit_packet(self.paths.primary_index(), p);
        }
    }

    fn close(&mut self, event: Event) {
        self.state = AssociationState::Closed;
        self.timers = Timers::default();
        self.control.clear();
        self.events.push_back(event);
    }

    fn fail(&mut self, error: Error) {
        self.close(Event::Failed(error));
    }

    /// Queues `packet` to the peer address of path `path` (the first path if there is no such
    /// path).
    fn emit_packet(&mut self, path: usize, packet: Packet) {
        let Some(p) = self.paths.get(path).or_else(|| self.paths.get(0)) else { return };
        let (src, dst) = (p.local, p.remote);
        let payload = packet.encode();
        self.stats.packets_out += 1;
        self.stats.bytes_out += payload.len() as u64;
        self.out.push_back(Transmit { src, dst, payload });
    }

    // ---------------------------------------------------------------- views

    pub(crate) fn is_client_side(&self) -> bool {
        self.is_client
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state == AssociationState::Closed
    }

    pub(crate) fn remote(&self) -> SocketAddr {
        self.paths.primary().remote
    }

    pub(crate) fn local(&self) -> Option<SocketAddr> {
        self.paths.primary().local
    }

    /// Every peer address the association knows.
    pub(crate) fn peer_addresses(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.paths.iter().map(|p| p.remote)
    }

    pub(crate) fn owns_ip(&self, ip: IpAddr) -> bool {
        self.paths.iter().any(|p| p.remote.ip() == ip)
    }

    pub(crate) fn info(&self) -> AssociationInfo {
        AssociationInfo {
            state: self.state,
            handshake: self.kind,
            is_client: self.is_client,
            remote: self.remote(),
            remote_addresses: self.peer_addresses().collect(),
            remote_port: self.remote_port,
            local_tag: self.my_tag,
            peer_tag: self.peer_tag,
            streams_out: self.data.streams_out,
            streams_in: self.data.streams_in,
            partial_reliability: self.data.partial_reliability,
            flight_size: self.data.send.flight_size(),
            srtt: self.paths.rto.srtt(),
            rto: self.paths.rto(),
            stats: self.stats,
        }
    }

    /// Packets of the INIT (for probes) reuse the association's ports.
    pub(crate) fn ports(&self) -> (u16, u16) {
        (self.local_port, self.remote_port)
    }

    pub(crate) fn rto(&self) -> Duration {
        self.paths.rto()
    }
}
