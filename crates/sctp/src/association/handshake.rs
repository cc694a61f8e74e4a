//! Opening an association (RFC 9260 §5) with the alternative handshake of seed 004: INIT,
//! INIT-ACK, COOKIE-ECHO and COOKIE-ACK; ALT-COOKIE (from an ERROR or a cache), the cookieless
//! opening and zero-RTT data (ALT-DATA in the INIT, ALT-SACK in the INIT-ACK); T1-init and
//! T1-cookie; INIT collision and restart (§5.2); and SNAP (draft-hancke-tsvwg-snap), which
//! opens from two INITs exchanged out of band and sends nothing of the handshake.

use std::net::SocketAddr;

use fastshake_core::CookieMac;
use rand_core::RngCore;

use super::init::{
    address_param, extension_params, own_init, parse_alt_sack, regular_init_ack, InitFields, InitParams,
    InitVerdict,
};
use super::paths::Path;
use super::timer::Timer;
use super::{nonzero_u32, Association, Shared};
use crate::cookie::StateCookie;
use crate::packet::{Chunk, ErrorCause, InitChunk, Packet, Param, COMMON_HEADER_LEN};
use crate::queue::{tsn_lt, ReceiveQueue, SendQueue};
use crate::{AssociationState, ConnectOptions, Error, Event, HandshakeKind, Instant};

/// Longest ALT-COOKIE a client keeps from a server's ERROR.
pub(crate) const MAX_ALT_COOKIE: usize = 512;
/// The smallest initial a_rwnd an INIT or INIT-ACK may carry (RFC 9260 §6: 1500 bytes).
pub(crate) const MIN_INITIAL_RWND: u32 = 1500;

/// Where the ALT-COOKIE of our INIT came from: decides the handshake kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CookieSource {
    Cached,
    FromError,
}

/// What the endpoint must do after an INIT reached an existing association.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InitOutcome {
    Handled,
    /// The peer restarted: drop this association and open a new one from the INIT.
    Restart,
}

/// What the opening of the association keeps: our INIT and its cookie, the zero-RTT data it
/// carried, the state cookie to echo, and the counters that bound retries.
#[derive(Debug)]
pub(super) struct Handshake {
    /// Our initial TSN, repeated in every INIT and INIT-ACK we send for this association.
    pub(super) initial_tsn: u32,
    /// Our INIT (client), kept for retransmission and for an INIT collision.
    init: Option<InitChunk>,
    alt_cookie: Option<(Vec<u8>, CookieSource)>,
    /// TSN ranges of the zero-RTT messages, to count how many the ALT-SACK took.
    zero_rtt: Vec<(u32, u32)>,
    /// The zero-RTT data travels in our INIT's ALT-DATA.
    zero_rtt_in_init: bool,
    /// The ALT-DATA of the peer's INIT was taken: the INIT-ACK carries an ALT-SACK.
    alt_sack_pending: bool,
    state_cookie: Option<Vec<u8>>,
    /// Parameters of the INIT-ACK to report in an ERROR behind the COOKIE-ECHO (RFC 9260 §3.2.1).
    unrecognized_in_init_ack: Vec<u8>,
    /// Request/response exchanges so far, for [`Event::Connected`].
    round_trips: u32,
    /// ERRORs with an ALT-COOKIE and Stale Cookie restarts: bounded like INIT retransmissions.
    restarts: u32,
    /// T1 expiries, against Max.Init.Retransmits.
    t1_retransmits: u32,
}

impl Handshake {
    pub(super) fn new(initial_tsn: u32) -> Handshake {
        Handshake {
            initial_tsn,
            init: None,
            alt_cookie: None,
            zero_rtt: Vec::new(),
            zero_rtt_in_init: false,
            alt_sack_pending: false,
            state_cookie: None,
            unrecognized_in_init_ack: Vec::new(),
            round_trips: 0,
            restarts: 0,
            t1_retransmits: 0,
        }
    }

    /// One more ALT-COOKIE or Stale Cookie restart; whether that is one too many.
    fn restart_limit_reached(&mut self, max: u32) -> bool {
        self.restarts += 1;
        self.restarts > max
    }
}

impl Association {
    /// A client association: sends the INIT (with ALT-COOKIE and ALT-DATA when the mode allows).
    pub(crate) fn connect(
        shared: Shared,
        rng_seed: [u8; 32],
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        remote_port: u16,
        opts: ConnectOptions,
    ) -> Self {
        let mut a = Association::blank(shared, rng_seed, true, remote_port, Path::new(remote, local));
        a.state = AssociationState::CookieWait;
        let alt = a.config.mode.alt_enabled();
        if alt {
            a.handshake.alt_cookie =
                opts.cached_cookie.filter(|c| !c.is_empty()).map(|c| (c, CookieSource::Cached));
        }
        let max_fragment = a.max_fragment();
        for msg in &opts.zero_rtt {
            if msg.data.is_empty() || msg.stream >= a.config.streams_out {
                continue;
            }
            let first = a.data.send.next_tsn;
            a.data.send.push_message(msg, max_fragment);
            a.handshake.zero_rtt.push((first, a.data.send.next_tsn.wrapping_sub(1)));
        }
        let mut init = own_init(&a.config, (a.my_tag, a.handshake.initial_tsn));
        if alt {
            init.params.push(Param::AltCookie(Vec::new()));
        }
        a.handshake.init = Some(init);
        // Zero-RTT data rides in the INIT only if the whole INIT still fits the MTU.
        if alt && !a.data.send.is_empty() {
            let init_len = a.build_init(true).encoded_len();
            if init_len <= a.mtu() {
                a.handshake.zero_rtt_in_init = true;
                for c in a.data.send.chunks.iter_mut() {
                    c.transmissions = 1;
                    c.sent_at = Some(now);
                }
            }
        }
        a.send_init(now);
        a
    }

    fn build_init(&self, with_data: bool) -> Packet {
        let mut init = self.handshake.init.clone().unwrap_or_else(|| InitChunk {
            initiate_tag: self.my_tag,
            a_rwnd: self.config.receive_window,
            outbound_streams: self.config.streams_out,
            inbound_streams: self.config.streams_in,
            initial_tsn: self.handshake.initial_tsn,
            params: Vec::new(),
        });
        for p in init.params.iter_mut() {
            if let Param::AltCookie(c) = p {
                *c = self.handshake.alt_cookie.as_ref().map(|(c, _)| c.clone()).unwrap_or_default();
            }
        }
        if with_data {
            let mut data = Vec::new();
            // Only the zero-RTT messages given to connect; later sends wait for the handshake.
            for c in self.data.send.chunks.iter().filter(|c| c.transmissions > 0) {
                Chunk::Data(c.chunk.clone()).encode(&mut data);
            }
            if !data.is_empty() {
                init.params.push(Param::AltData(data));
            }
        }
        let mut p = Packet::new(self.local_port, self.remote_port, 0);
        p.chunks.push(Chunk::Init(init));
        p
    }

    fn send_init(&mut self, now: Instant) {
        let mut packet = self.build_init(self.handshake.zero_rtt_in_init);
        if self.handshake.zero_rtt_in_init && packet.encoded_len() > self.mtu() {
            // The cookie the server handed out leaves no room: the data waits for the handshake.
            self.handshake.zero_rtt_in_init = false;
            for c in self.data.send.chunks.iter_mut() {
                c.transmissions = 0;
                c.sent_at = None;
            }
            packet = self.build_init(false);
        }
        self.emit_packet(self.paths.primary_index(), packet);
        self.timers.stop(Timer::T1Cookie);
        self.timers.set(Timer::T1Init, now + self.paths.rto());
    }

    /// The handshake is over (or starts over): neither T1 runs.
    fn stop_t1(&mut self) {
        self.timers.stop(Timer::T1Init);
        self.timers.stop(Timer::T1Cookie);
    }

    /// T1-init or T1-cookie expired: the INIT or COOKIE-ECHO goes again with a doubled RTO,
    /// up to Max.Init.Retransmits (RFC 9260 §5.1). Returns false when the association failed.
    pub(super) fn on_t1_expiry(&mut self, now: Instant, timer: Timer) -> bool {
        self.handshake.t1_retransmits += 1;
        if self.handshake.t1_retransmits > self.config.max_init_retransmits {
            self.fail(Error::HandshakeTimeout);
            return false;
        }
        self.paths.rto.back_off();
        match (timer, self.state) {
            (Timer::T1Init, AssociationState::CookieWait) => {
                self.stats.handshake_retransmits += 1;
                self.send_init(now);
            }
            (Timer::T1Cookie, AssociationState::CookieEchoed) => {
                self.stats.handshake_retransmits += 1;
                self.send_cookie_echo(now);
            }
            _ => {}
        }
        true
    }

    /// A server association opened at once by an alternative handshake. Queues the INIT-ACK.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept_alt(
        shared: Shared,
        rng_seed: [u8; 32],
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        remote_port: u16,
        init: &InitChunk,
        params: &InitParams,
        kind: HandshakeKind,
    ) -> Self {
        let path = Path::new(remote, Some(local));
        let mut a = Association::blank(shared, rng_seed, false, remote_port, path);
        a.open_from_peer_init(now, init, params, kind);
        a
    }

    /// Takes the peer's INIT (alternative opening, or our side of an INIT collision): the
    /// association goes ESTABLISHED and answers with an INIT-ACK carrying an empty ALT-COOKIE,
    /// our own tag and TSN, and an ALT-SACK for the ALT-DATA it took.
    fn open_from_peer_init(
        &mut self,
        now: Instant,
        init: &InitChunk,
        params: &InitParams,
        kind: HandshakeKind,
    ) {
        self.adopt_peer(
            init.initiate_tag,
            init.initial_tsn,
            init.a_rwnd,
            (init.outbound_streams, init.inbound_streams),
            params,
        );
        self.kind = Some(kind);
        self.state = AssociationState::Established;
        self.stop_t1();
        // A client that collided keeps its own zero-RTT data outstanding as ordinary DATA.
        if self.handshake.zero_rtt_in_init {
            self.handshake.zero_rtt_in_init = false;
            self.data.send.mark_all_for_retransmit();
        }
        // Connected comes before the zero-RTT messages it delivers.
        let connected_at = self.events.len();
        let zero_rtt_accepted = self.take_alt_data(params);
        if !self.is_client {
            self.paths.heartbeats_allowed = false;
        }
        self.send_alt_init_ack(params);
        self.events.insert(
            connected_at,
            Event::Connected { handshake: kind, round_trips: self.handshake.round_trips, zero_rtt_accepted },
        );
        self.schedule_heartbeat(now);
        self.flush(now);
    }

    /// Delivers the DATA of an INIT's ALT-DATA; returns how many messages it completed.
    fn take_alt_data(&mut self, params: &InitParams) -> usize {
        let Some(raw) = params.alt_data.as_ref() else { return 0 };
        if !self.config.accept_alt_data {
            return 0;
        }
        let Ok(chunks) = Chunk::parse_all(raw) else { return 0 };
        let delivered_before = self.stats.messages_in;
        let mut took_any = false;
        for c in chunks {
            // I-DATA and anything else but DATA is not ours to take here (seed 004 §IV-A).
            if let Chunk::Data(d) = c {
                took_any = true;
                self.on_data_chunk(d);
            }
        }
        self.handshake.alt_sack_pending = took_any;
        usize::try_from(self.stats.messages_in - delivered_before).unwrap_or(usize::MAX)
    }

    fn send_alt_init_ack(&mut self, params: &InitParams) {
        let mut ack_params: Vec<Param> =
            self.config.extra_local_addresses.iter().map(|ip| address_param(*ip)).collect();
        ack_params.extend(extension_params(&self.config));
        ack_params.push(Param::AltCookie(Vec::new()));
        if self.handshake.alt_sack_pending {
            if let Some(r) = self.data.recv.as_mut() {
                ack_params.push(Param::AltSack(Chunk::Sack(r.make_sack()).to_bytes()));
            }
        }
        for u in &params.unrecognized {
            ack_params.push(Param::UnrecognizedParameter(u.clone()));
        }
        let ack = InitChunk {
            initiate_tag: self.my_tag,
            // The window left after the ALT-DATA, but never below the RFC's floor for an
            // initial a_rwnd (a peer may abort on less; pion/sctp does).
            a_rwnd: self
                .data
                .recv
                .as_ref()
                .map_or(self.config.receive_window, ReceiveQueue::a_rwnd)
                .max(MIN_INITIAL_RWND.min(self.config.receive_window)),
            outbound_streams: self.data.streams_out,
            inbound_streams: self.config.streams_in,
            initial_tsn: self.handshake.initial_tsn,
            params: ack_params,
        };
        let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
        p.chunks.push(Chunk::InitAck(ack));
        self.emit_packet(self.paths.primary_index(), p);
        self.sack_sent();
    }

    /// An association opened by SNAP from our INIT `ours` and the peer's `peer`, both exchanged
    /// out of band: ESTABLISHED at once, RFC 9260 §5.1 steps A-E skipped
    /// (draft-hancke-tsvwg-snap, "SCTP considerations"), no packet queued and no timer but the
    /// idle HEARTBEAT. Our tag and TSNs come from our INIT, the peer's from its; streams, window
    /// and RE-CONFIG are settled as the INIT-ACK of the four-way handshake would settle them.
    /// Both sides are built alike: the association says it was initiated here, as each side
    /// asked for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open_snap(
        shared: Shared,
        rng_seed: [u8; 32],
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        remote_port: u16,
        ours: &InitChunk,
        peer: &InitChunk,
        params: &InitParams,
    ) -> Self {
        let mut a = Association::blank(shared, rng_seed, true, remote_port, Path::new(remote, local));
        a.my_tag = ours.initiate_tag;
        a.handshake.initial_tsn = ours.initial_tsn;
        a.data.send = SendQueue::new(ours.initial_tsn, ours.outbound_streams);
        a.adopt_peer(
            peer.initiate_tag,
            peer.initial_tsn,
            peer.a_rwnd,
            (peer.outbound_streams, peer.inbound_streams),
            params,
        );
        a.kind = Some(HandshakeKind::Snap);
        a.state = AssociationState::Established;
        a.events.push_back(Event::Connected {
            handshake: HandshakeKind::Snap,
            round_trips: 0,
            zero_rtt_accepted: 0,
        });
        a.schedule_heartbeat(now);
        a
    }

    /// A server association built from a valid COOKIE-ECHO.
    pub(crate) fn from_cookie(
        shared: Shared,
        rng_seed: [u8; 32],
        local: SocketAddr,
        remote: SocketAddr,
        remote_port: u16,
        cookie: &StateCookie,
    ) -> Self {
        let path = Path::new(remote, Some(local));
        let mut a = Association::blank(shared, rng_seed, false, remote_port, path);
        a.my_tag = cookie.local_tag;
        a.handshake.initial_tsn = cookie.local_initial_tsn;
        a.data.send = SendQueue::new(cookie.local_initial_tsn, cookie.streams_out);
        a.establish_from_cookie(cookie);
        a.handshake.round_trips = 1;
        a.kind = Some(HandshakeKind::Regular);
        a.events.push_back(Event::Connected {
            handshake: HandshakeKind::Regular,
            round_trips: 1,
            zero_rtt_accepted: 0,
        });
        a
    }

    fn establish_from_cookie(&mut self, cookie: &StateCookie) {
        self.peer_tag = cookie.peer_tag;
        self.data.streams_out = cookie.streams_out;
        self.data.streams_in = cookie.streams_in;
        self.data.send.set_streams(cookie.streams_out);
        self.data.open_receive(cookie.peer_initial_tsn, self.config.receive_window);
        self.congestion.set_peer_window(cookie.peer_rwnd);
        self.paths.add_peer_addresses(&cookie.peer_addresses);
        self.reconfig.start(cookie.reconfig, self.handshake.initial_tsn, cookie.peer_initial_tsn);
        self.data.partial_reliability = cookie.forward_tsn;
        self.state = AssociationState::Established;
        self.stop_t1();
        self.control.push_back(Chunk::CookieAck);
    }

    /// What the peer's INIT or INIT-ACK tells: its tag, first TSN, window, streams, its other
    /// addresses, and whether it announced RE-CONFIG and PR-SCTP.
    fn adopt_peer(
        &mut self,
        tag: u32,
        initial_tsn: u32,
        a_rwnd: u32,
        (peer_out, peer_in): (u16, u16),
        params: &InitParams,
    ) {
        self.peer_tag = tag;
        let reconfig = self.config.stream_reset && params.reconfig();
        self.reconfig.start(reconfig, self.handshake.initial_tsn, initial_tsn);
        self.data.partial_reliability = self.config.partial_reliability && params.partial_reliability();
        self.data.streams_out = self.config.streams_out.min(peer_in).max(1);
        self.data.streams_in = self.config.streams_in.min(peer_out).max(1);
        self.data.send.set_streams(self.data.streams_out);
        self.data.open_receive(initial_tsn, self.config.receive_window);
        self.congestion.set_peer_window(a_rwnd);
        self.paths.add_peer_addresses(&params.addresses);
    }

    pub(super) fn on_init_ack(&mut self, now: Instant, ack: &InitChunk) {
        if self.state != AssociationState::CookieWait {
            // Collision resolved, retransmission, or stale: an INIT-ACK in another state changes
            // nothing except that an ALT-SACK for our zero-RTT data still counts.
            if self.state == AssociationState::Established && ack.initiate_tag == self.peer_tag {
                let params = InitParams::scan(
                    &ack.params,
                    self.config.mode.alt_enabled(),
                    self.config.partial_reliability,
                );
                if let Some(sack) = params.alt_sack.as_deref().and_then(parse_alt_sack) {
                    self.on_sack(now, &sack);
                }
            }
            return;
        }
        if ack.initiate_tag == 0 || ack.outbound_streams == 0 || ack.inbound_streams == 0 {
            // RFC 9260 §3.3.3: ABORT with "Invalid Mandatory Parameter" (cause 7).
            let mut p = Packet::new(self.local_port, self.remote_port, ack.initiate_tag);
            let cause = ErrorCause::Other { code: 7, value: Vec::new() };
            p.chunks.push(Chunk::Abort { t_bit: false, causes: vec![cause] });
            self.emit_packet(self.paths.primary_index(), p);
            self.close(Event::Aborted { reason: "peer sent an invalid INIT-ACK".into() });
            return;
        }
        let params =
            InitParams::scan(&ack.params, self.config.mode.alt_enabled(), self.config.partial_reliability);
        self.handshake.round_trips += 1;
        self.adopt_peer(
            ack.initiate_tag,
            ack.initial_tsn,
            ack.a_rwnd,
            (ack.outbound_streams, ack.inbound_streams),
            &params,
        );
        if let Some(cookie) = params.state_cookie {
            // Regular handshake (a server without the extension, or one that chose it).
            if self.handshake.zero_rtt_in_init {
                self.handshake.zero_rtt_in_init = false;
                // Counted as retransmissions when they go out behind the COOKIE-ECHO.
                self.data.send.mark_all_for_retransmit();
            }
            self.kind = Some(HandshakeKind::Regular);
            self.handshake.state_cookie = Some(cookie);
            self.handshake.unrecognized_in_init_ack = params
                .unrecognized
                .iter()
                .flat_map(|tlv| {
                    let mut padded = tlv.clone();
                    padded.resize((tlv.len() + 3) & !3, 0);
                    padded
                })
                .collect();
            self.state = AssociationState::CookieEchoed;
            self.handshake.t1_retransmits = 0;
            self.send_cookie_echo(now);
            return;
        }
        if params.alt_cookie.is_none() || !self.config.mode.alt_enabled() {
            // Neither a state cookie nor the alternative confirmation: not an INIT-ACK we can
            // use. Stay in COOKIE-WAIT; T1 sends the INIT again.
            self.data.recv = None;
            self.handshake.round_trips -= 1;
            return;
        }
        let kind = match &self.handshake.alt_cookie {
            None => HandshakeKind::Cookieless,
            Some((_, CookieSource::Cached)) => HandshakeKind::AltCached,
            Some((_, CookieSource::FromError)) => HandshakeKind::AltCookie,
        };
        let mut accepted = 0;
        if self.handshake.zero_rtt_in_init {
            self.handshake.zero_rtt_in_init = false;
            if let Some(sack) = params.alt_sack.as_deref().and_then(parse_alt_sack) {
                self.apply_sack(now, &sack, false);
            }
            let send = &self.data.send;
            accepted = self
                .handshake
                .zero_rtt
                .iter()
                .filter(|(first, last)| {
                    !send.chunks.iter().any(|c| !tsn_lt(c.chunk.tsn, *first) && !tsn_lt(*last, c.chunk.tsn))
                })
                .count();
            // What the ALT-SACK did not take goes again as regular DATA.
            self.data.send.mark_all_for_retransmit();
        }
        self.kind = Some(kind);
        self.state = AssociationState::Established;
        self.stop_t1();
        self.wants_path_cookies = kind != HandshakeKind::Cookieless;
        self.events.push_back(Event::Connected {
            handshake: kind,
            round_trips: self.handshake.round_trips,
            zero_rtt_accepted: accepted,
        });
        self.schedule_heartbeat(now);
    }

    fn send_cookie_echo(&mut self, now: Instant) {
        let Some(cookie) = self.handshake.state_cookie.clone() else { return };
        let echo = Chunk::CookieEcho(cookie);
        let mut size = COMMON_HEADER_LEN + echo.padded_len();
        let mut chunks = vec![echo];
        if !self.handshake.unrecognized_in_init_ack.is_empty() {
            let report = Chunk::Error {
                causes: vec![ErrorCause::UnrecognizedParameters(
                    self.handshake.unrecognized_in_init_ack.clone(),
                )],
            };
            size += report.padded_len();
            chunks.push(report);
        }
        // DATA may ride behind the COOKIE-ECHO (RFC 9260 §5.1).
        let mtu = self.mtu();
        for idx in 0..self.data.send.chunks.len() {
            let c = &self.data.send.chunks[idx];
            if c.transmissions > 0 && !c.needs_retransmit {
                continue;
            }
            let len = Chunk::Data(c.chunk.clone()).padded_len();
            if size + len > mtu {
                break;
            }
            size += len;
            chunks.push(Chunk::Data(c.chunk.clone()));
            if c.transmissions > 0 {
                self.stats.retransmitted_chunks += 1;
            }
            self.data.send.mark_sent(idx, now);
        }
        let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
        p.chunks = chunks;
        self.emit_packet(self.paths.primary_index(), p);
        self.timers.stop(Timer::T1Init);
        self.timers.set(Timer::T1Cookie, now + self.paths.rto());
    }

    pub(super) fn on_cookie_ack(&mut self, now: Instant) {
        if self.state != AssociationState::CookieEchoed {
            return;
        }
        self.handshake.round_trips += 1;
        self.state = AssociationState::Established;
        self.stop_t1();
        self.handshake.state_cookie = None;
        if self.data.send.has_unacked_sent() {
            self.timers.set(Timer::T3Rtx, now + self.paths.rto());
        }
        self.events.push_back(Event::Connected {
            handshake: HandshakeKind::Regular,
            round_trips: self.handshake.round_trips,
            zero_rtt_accepted: 0,
        });
        self.schedule_heartbeat(now);
    }

    /// An ERROR: an ALT-COOKIE for our INIT (seed 004 §III-B) or a Stale Cookie (§5.2.6);
    /// other causes change nothing.
    pub(super) fn on_error(&mut self, now: Instant, causes: Vec<ErrorCause>) {
        for cause in causes {
            match cause {
                ErrorCause::AltCookieRequired(cookie)
                    if self.state == AssociationState::CookieWait && self.config.mode.alt_enabled() =>
                {
                    if cookie.is_empty() || cookie.len() > MAX_ALT_COOKIE {
                        continue;
                    }
                    if self.handshake.restart_limit_reached(self.config.max_init_retransmits) {
                        self.fail(Error::HandshakeTimeout);
                        return;
                    }
                    self.handshake.round_trips += 1;
                    let p = self.paths.primary();
                    self.events.push_back(Event::AltCookie {
                        server: p.remote,
                        local: p.local,
                        cookie: cookie.clone(),
                    });
                    self.handshake.alt_cookie = Some((cookie, CookieSource::FromError));
                    // The INIT goes again at once with the cookie (and the zero-RTT data).
                    self.send_init(now);
                }
                ErrorCause::StaleCookie { .. } if self.state == AssociationState::CookieEchoed => {
                    // RFC 9260 §5.2.6: start over with a new INIT; a path too slow for the
                    // server's cookie lifetime must not loop forever.
                    if self.handshake.restart_limit_reached(self.config.max_init_retransmits) {
                        self.fail(Error::HandshakeTimeout);
                        return;
                    }
                    self.state = AssociationState::CookieWait;
                    self.handshake.state_cookie = None;
                    self.data.recv = None;
                    self.handshake.round_trips = 0;
                    self.send_init(now);
                }
                _ => {}
            }
        }
    }

    /// An INIT from this association's peer address (RFC 9260 §5.2; seed 004 §III-G).
    pub(crate) fn on_peer_init(
        &mut self,
        now: Instant,
        from: SocketAddr,
        init: &InitChunk,
        params: &InitParams,
        verdict: InitVerdict,
        mac: &CookieMac,
    ) -> InitOutcome {
        use AssociationState::*;
        let own = (self.my_tag, self.handshake.initial_tsn);
        match (self.state, verdict) {
            (CookieWait | CookieEchoed, InitVerdict::Alt(kind)) => {
                // INIT collision under the alternative handshake: open now and answer with the
                // tag and TSN of our own INIT, so the peer sees both attempts merged.
                self.open_from_peer_init(now, init, params, kind);
                self.flush(now);
                InitOutcome::Handled
            }
            (CookieWait | CookieEchoed, InitVerdict::Regular) => {
                // RFC 9260 §5.2.1: INIT-ACK with our own INIT's tag and TSN.
                self.send_regular_init_ack(now, from, init, params, mac, own);
                InitOutcome::Handled
            }
            (Closed, _) => InitOutcome::Handled,
            (_, verdict) if init.initiate_tag == self.peer_tag => {
                // Our INIT-ACK was lost and the peer sent its INIT again.
                match (self.kind, verdict) {
                    (Some(HandshakeKind::Regular), _) | (_, InitVerdict::Regular) => {
                        self.send_regular_init_ack(now, from, init, params, mac, own)
                    }
                    _ => {
                        // ALT-DATA again: duplicates are detected by TSN and never delivered twice.
                        let _ = self.take_alt_data(params);
                        self.send_alt_init_ack(params);
                        self.flush(now);
                    }
                }
                InitOutcome::Handled
            }
            (_, InitVerdict::Alt(_)) => InitOutcome::Restart,
            (_, InitVerdict::Regular) => {
                // A restarting peer (§5.2.2): fresh tags in the cookie; the COOKIE-ECHO decides.
                let tag = nonzero_u32(&mut self.rng);
                let tsn = self.rng.next_u32();
                self.send_regular_init_ack(now, from, init, params, mac, (tag, tsn));
                InitOutcome::Handled
            }
        }
    }

    /// An INIT-ACK with a state cookie offering `(tag, tsn)`, bound to the address the INIT
    /// came from, where its COOKIE-ECHO comes from.
    fn send_regular_init_ack(
        &mut self,
        now: Instant,
        from: SocketAddr,
        init: &InitChunk,
        params: &InitParams,
        mac: &CookieMac,
        (tag, tsn): (u32, u32),
    ) {
        let p = regular_init_ack(
            &self.config,
            mac,
            now,
            from,
            (self.local_port, self.remote_port),
            InitFields::from(init),
            params,
            (tag, tsn),
            (self.my_tag, self.peer_tag),
        );
        self.emit_packet(self.paths.primary_index(), p);
    }

    /// A valid COOKIE-ECHO whose local tag is ours: INIT collision (cases B and D of §5.2.4) or
    /// a retransmission after a lost COOKIE-ACK.
    pub(crate) fn on_own_cookie(&mut self, now: Instant, cookie: &StateCookie) {
        match self.state {
            AssociationState::CookieWait | AssociationState::CookieEchoed => {
                self.data.send.set_streams(cookie.streams_out);
                self.establish_from_cookie(cookie);
                self.handshake.zero_rtt_in_init = false;
                self.data.send.mark_all_for_retransmit();
                self.kind = Some(HandshakeKind::Regular);
                self.handshake.round_trips += 1;
                self.events.push_back(Event::Connected {
                    handshake: HandshakeKind::Regular,
                    round_trips: self.handshake.round_trips,
                    zero_rtt_accepted: 0,
                });
                self.schedule_heartbeat(now);
            }
            AssociationState::Closed => {}
            _ if cookie.peer_tag == self.peer_tag => self.control.push_back(Chunk::CookieAck),
            _ => {}
        }
    }
}
