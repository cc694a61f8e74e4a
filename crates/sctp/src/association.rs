//! One association: the state machine of RFC 9260 §4 with the alternative handshake of seed
//! 004, timers (T1-init, T1-cookie, T2-shutdown, T3-rtx, delayed SACK, heartbeat), congestion
//! control (§7.2) and the paths of a multihomed peer.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use fastshake_core::CookieMac;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::cookie::StateCookie;
use crate::packet::{
    Chunk, DataChunk, ErrorCause, InitChunk, InitView, Packet, Param, SackChunk, UnknownChunkAction,
    UnknownParamAction, COMMON_HEADER_LEN, DATA_CHUNK_HEADER_LEN, PARAM_ALT_COOKIE, PARAM_ALT_DATA,
    PARAM_ALT_SACK, PARAM_COOKIE_PRESERVATIVE, PARAM_IPV4, PARAM_IPV6, PARAM_STATE_COOKIE,
    PARAM_SUPPORTED_ADDRESS_TYPES, PARAM_UNRECOGNIZED,
};
use crate::queue::{tsn_lt, DataVerdict, ReceiveQueue, RecvBudget, SendQueue};
use crate::rto::RtoEstimator;
use crate::{
    AssociationInfo, AssociationState, AssociationStats, Config, ConnectOptions, Error, Event, HandshakeKind,
    Instant, Message, Transmit,
};

/// Most bytes of user data queued per association and not yet acknowledged.
const MAX_SEND_BUFFER: usize = crate::queue::MAX_BEYOND_WINDOW;
/// Longest ALT-COOKIE a client keeps from a server's ERROR.
const MAX_ALT_COOKIE: usize = 512;
/// Most peer addresses (paths) kept per association.
const MAX_PATHS: usize = 8;
/// The smallest initial a_rwnd an INIT or INIT-ACK may carry (RFC 9260 §6: 1500 bytes).
const MIN_INITIAL_RWND: u32 = 1500;

/// What every association of an endpoint shares: its settings and its receive buffer budget.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) budget: RecvBudget,
}

/// One (local, remote) address pair the association can use.
#[derive(Clone, Debug)]
pub(crate) struct Path {
    /// Peer UDP address; the port is the peer's encapsulation port, learnt from its packets.
    pub(crate) remote: SocketAddr,
    pub(crate) local: Option<SocketAddr>,
    confirmed: bool,
    heartbeat: Option<(u64, Instant)>,
    /// Consecutive T3-rtx expiries while this was the primary path.
    errors: u32,
}

/// Where the ALT-COOKIE of our INIT came from: decides the handshake kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CookieSource {
    Cached,
    FromError,
}

/// How the endpoint judged an INIT's ALT-COOKIE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InitVerdict {
    /// Opens an association at once, by this kind of alternative handshake.
    Alt(HandshakeKind),
    /// Goes the regular way (INIT-ACK with state cookie).
    Regular,
}

/// What the endpoint must do after an INIT reached an existing association.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InitOutcome {
    Handled,
    /// The peer restarted: drop this association and open a new one from the INIT.
    Restart,
}

/// The parameters of an INIT the receiver acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InitParams {
    pub(crate) alt_cookie: Option<Vec<u8>>,
    pub(crate) alt_data: Option<Vec<u8>>,
    pub(crate) alt_sack: Option<Vec<u8>>,
    pub(crate) state_cookie: Option<Vec<u8>>,
    pub(crate) addresses: Vec<IpAddr>,
    /// Parameters to report back as unrecognised (whole TLVs).
    pub(crate) unrecognized: Vec<Vec<u8>>,
}

impl InitParams {
    /// Scans parameters by RFC 9260 §3.2.1; ALT-* are unknown (skipped by their high bits `10`)
    /// when `alt` is off.
    pub(crate) fn scan(params: &[Param], alt: bool) -> InitParams {
        Self::scan_pairs(params.iter().map(|p| (p.param_type(), p.value_bytes())), alt)
    }

    /// The same scan over the raw parameters of a borrowed INIT.
    pub(crate) fn from_view(view: &InitView<'_>, alt: bool) -> InitParams {
        Self::scan_pairs(view.raw_params().map_while(Result::ok).map(|(t, v)| (t, Cow::Borrowed(v))), alt)
    }

    /// The one implementation of the scan, over (type, value) pairs.
    fn scan_pairs<'a>(pairs: impl Iterator<Item = (u16, Cow<'a, [u8]>)>, alt: bool) -> InitParams {
        let mut out = InitParams::default();
        for (kind, value) in pairs {
            match kind {
                PARAM_IPV4 => {
                    if let Ok(b) = <[u8; 4]>::try_from(&value[..]) {
                        out.addresses.push(IpAddr::from(b));
                    }
                }
                PARAM_IPV6 => {
                    if let Ok(b) = <[u8; 16]>::try_from(&value[..]) {
                        out.addresses.push(IpAddr::from(b));
                    }
                }
                // A repeated parameter counts once: the first one, as everywhere else.
                PARAM_STATE_COOKIE => {
                    out.state_cookie.get_or_insert_with(|| value.into_owned());
                }
                PARAM_ALT_COOKIE if alt => {
                    out.alt_cookie.get_or_insert_with(|| value.into_owned());
                }
                PARAM_ALT_DATA if alt => {
                    out.alt_data.get_or_insert_with(|| value.into_owned());
                }
                PARAM_ALT_SACK if alt => {
                    out.alt_sack.get_or_insert_with(|| value.into_owned());
                }
                PARAM_COOKIE_PRESERVATIVE | PARAM_SUPPORTED_ADDRESS_TYPES | PARAM_UNRECOGNIZED => {}
                other => {
                    let action = UnknownParamAction::of(other);
                    if action.reports() && out.unrecognized.len() < 8 {
                        // The TLV as its length field states it, without padding.
                        let mut tlv = Vec::with_capacity(4 + value.len());
                        tlv.extend_from_slice(&other.to_be_bytes());
                        tlv.extend_from_slice(
                            &u16::try_from(4 + value.len()).unwrap_or(u16::MAX).to_be_bytes(),
                        );
                        tlv.extend_from_slice(&value);
                        out.unrecognized.push(tlv);
                    }
                    if !action.continues() {
                        break;
                    }
                }
            }
        }
        out.addresses.truncate(MAX_PATHS);
        out
    }
}

/// The fixed fields of a peer's INIT that an INIT-ACK and a state cookie need.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InitFields {
    pub(crate) initiate_tag: u32,
    pub(crate) a_rwnd: u32,
    pub(crate) outbound_streams: u16,
    pub(crate) inbound_streams: u16,
    pub(crate) initial_tsn: u32,
}

impl From<&InitChunk> for InitFields {
    fn from(i: &InitChunk) -> Self {
        InitFields {
            initiate_tag: i.initiate_tag,
            a_rwnd: i.a_rwnd,
            outbound_streams: i.outbound_streams,
            inbound_streams: i.inbound_streams,
            initial_tsn: i.initial_tsn,
        }
    }
}

impl From<&InitView<'_>> for InitFields {
    fn from(v: &InitView<'_>) -> Self {
        InitFields {
            initiate_tag: v.initiate_tag,
            a_rwnd: v.a_rwnd,
            outbound_streams: v.outbound_streams,
            inbound_streams: v.inbound_streams,
            initial_tsn: v.initial_tsn,
        }
    }
}

pub(crate) struct Association {
    config: Arc<Config>,
    budget: RecvBudget,
    pub(crate) state: AssociationState,
    is_client: bool,
    pub(crate) kind: Option<HandshakeKind>,
    pub(crate) local_port: u16,
    pub(crate) remote_port: u16,
    pub(crate) my_tag: u32,
    pub(crate) peer_tag: u32,
    pub(crate) paths: Vec<Path>,
    primary: usize,
    rng: ChaCha20Rng,
    rto: RtoEstimator,
    send: SendQueue,
    recv: Option<ReceiveQueue>,
    peer_rwnd: u32,
    cwnd: usize,
    ssthresh: usize,
    partial_bytes_acked: usize,
    /// While in Fast Recovery: the TSN whose acknowledgement ends it.
    fast_recovery_exit: Option<u32>,
    streams_out: u16,
    streams_in: u16,
    my_initial_tsn: u32,
    /// Our INIT (client), kept for retransmission and for an INIT collision.
    init: Option<InitChunk>,
    alt_cookie: Option<(Vec<u8>, CookieSource)>,
    /// TSN ranges of the zero-RTT messages, to count how many the ALT-SACK took.
    zero_rtt: Vec<(u32, u32)>,
    zero_rtt_in_init: bool,
    /// The ALT-DATA of the peer's INIT was taken: the INIT-ACK carries an ALT-SACK.
    alt_sack_pending: bool,
    state_cookie: Option<Vec<u8>>,
    /// Parameters of the INIT-ACK to report in an ERROR behind the COOKIE-ECHO (RFC 9260 §3.2.1).
    unrecognized_in_init_ack: Vec<u8>,
    round_trips: u32,
    /// ERRORs with an ALT-COOKIE and Stale Cookie restarts: bounded like INIT retransmissions.
    handshake_restarts: u32,
    t1: Option<Instant>,
    t1_retransmits: u32,
    t3: Option<Instant>,
    error_count: u32,
    t2: Option<Instant>,
    t2_retransmits: u32,
    /// T5-shutdown-guard, from our first SHUTDOWN on (RFC 9260 §9.2).
    t5: Option<Instant>,
    sack_deadline: Option<Instant>,
    sack_now: bool,
    packets_since_sack: u32,
    hb_deadline: Option<Instant>,
    /// After an alternative opening the server probes other paths only once the client has
    /// sent a packet on the association (seed 004 §III-F). The idle HEARTBEAT on the primary
    /// path still goes after HB.interval, long after any INIT-ACK arrived: an association the
    /// client never took up ends (ABORT or Association.Max.Retrans) instead of living forever.
    heartbeats_allowed: bool,
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

fn seed_rng(seed: [u8; 32]) -> ChaCha20Rng {
    ChaCha20Rng::from_seed(seed)
}

fn nonzero_u32(rng: &mut ChaCha20Rng) -> u32 {
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
        let mut rng = seed_rng(rng_seed);
        let my_tag = nonzero_u32(&mut rng);
        let my_initial_tsn = rng.next_u32();
        let mtu = config.mtu.max(256);
        Association {
            rto: RtoEstimator::new(config.rto_initial, config.rto_min, config.rto_max),
            send: SendQueue::new(my_initial_tsn, config.streams_out),
            recv: None,
            peer_rwnd: 0,
            cwnd: (4 * mtu).min((2 * mtu).max(4404)),
            ssthresh: usize::MAX,
            partial_bytes_acked: 0,
            fast_recovery_exit: None,
            streams_out: config.streams_out,
            streams_in: config.streams_in,
            local_port: config.local_port,
            config,
            budget,
            state: AssociationState::Closed,
            is_client,
            kind: None,
            remote_port,
            my_tag,
            peer_tag: 0,
            paths: vec![Path { confirmed: true, ..path }],
            primary: 0,
            rng,
            my_initial_tsn,
            init: None,
            alt_cookie: None,
            zero_rtt: Vec::new(),
            zero_rtt_in_init: false,
            alt_sack_pending: false,
            state_cookie: None,
            unrecognized_in_init_ack: Vec::new(),
            round_trips: 0,
            handshake_restarts: 0,
            t1: None,
            t1_retransmits: 0,
            t3: None,
            error_count: 0,
            t2: None,
            t2_retransmits: 0,
            t5: None,
            sack_deadline: None,
            sack_now: false,
            packets_since_sack: 0,
            hb_deadline: None,
            heartbeats_allowed: true,
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

    fn max_fragment(&self) -> usize {
        self.mtu() - COMMON_HEADER_LEN - DATA_CHUNK_HEADER_LEN
    }

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
        let path = Path { remote, local, confirmed: true, heartbeat: None, errors: 0 };
        let mut a = Association::blank(shared, rng_seed, true, remote_port, path);
        a.state = AssociationState::CookieWait;
        let alt = a.config.mode.alt_enabled();
        if alt {
            a.alt_cookie = opts.cached_cookie.filter(|c| !c.is_empty()).map(|c| (c, CookieSource::Cached));
        }
        let max_fragment = a.max_fragment();
        for msg in &opts.zero_rtt {
            if msg.data.is_empty() || msg.stream >= a.config.streams_out {
                continue;
            }
            let first = a.send.next_tsn;
            a.send.push_message(msg, max_fragment);
            a.zero_rtt.push((first, a.send.next_tsn.wrapping_sub(1)));
        }
        // No Supported Address Types: its absence means every type (RFC 9260 §3.3.2.1), and a
        // stack that does not implement it stops at its high bits `00` and drops the INIT
        // (pion/sctp does). The engine has no address family of its own to restrict: a path
        // to a peer address of another family than the primary's is never used anyway.
        let mut params: Vec<Param> =
            a.config.extra_local_addresses.iter().map(|ip| address_param(*ip)).collect();
        if alt {
            params.push(Param::AltCookie(Vec::new()));
        }
        a.init = Some(InitChunk {
            initiate_tag: a.my_tag,
            a_rwnd: a.config.receive_window,
            outbound_streams: a.config.streams_out,
            inbound_streams: a.config.streams_in,
            initial_tsn: a.my_initial_tsn,
            params,
        });
        // Zero-RTT data rides in the INIT only if the whole INIT still fits the MTU.
        if alt && !a.send.is_empty() {
            let init_len = a.build_init(true).encoded_len();
            if init_len <= a.mtu() {
                a.zero_rtt_in_init = true;
                for c in a.send.chunks.iter_mut() {
                    c.transmissions = 1;
                    c.sent_at = Some(now);
                }
            }
        }
        a.send_init(now);
        a
    }

    fn build_init(&self, with_data: bool) -> Packet {
        let mut init = self.init.clone().unwrap_or_else(|| InitChunk {
            initiate_tag: self.my_tag,
            a_rwnd: self.config.receive_window,
            outbound_streams: self.config.streams_out,
            inbound_streams: self.config.streams_in,
            initial_tsn: self.my_initial_tsn,
            params: Vec::new(),
        });
        for p in init.params.iter_mut() {
            if let Param::AltCookie(c) = p {
                *c = self.alt_cookie.as_ref().map(|(c, _)| c.clone()).unwrap_or_default();
            }
        }
        if with_data {
            let mut data = Vec::new();
            // Only the zero-RTT messages given to connect; later sends wait for the handshake.
            for c in self.send.chunks.iter().filter(|c| c.transmissions > 0) {
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
        let mut packet = self.build_init(self.zero_rtt_in_init);
        if self.zero_rtt_in_init && packet.encoded_len() > self.mtu() {
            // The cookie the server handed out leaves no room: the data waits for the handshake.
            self.zero_rtt_in_init = false;
            for c in self.send.chunks.iter_mut() {
                c.transmissions = 0;
                c.sent_at = None;
            }
            packet = self.build_init(false);
        }
        self.emit_packet(self.primary, packet);
        self.t1 = Some(now + self.rto.rto());
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
        let path = Path { remote, local: Some(local), confirmed: true, heartbeat: None, errors: 0 };
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
            init.outbound_streams,
            init.inbound_streams,
        );
        self.add_peer_addresses(&params.addresses);
        self.kind = Some(kind);
        self.state = AssociationState::Established;
        self.t1 = None;
        // A client that collided keeps its own zero-RTT data outstanding as ordinary DATA.
        if self.zero_rtt_in_init {
            self.zero_rtt_in_init = false;
            self.send.mark_all_for_retransmit();
        }
        // Connected comes before the zero-RTT messages it delivers.
        let connected_at = self.events.len();
        let zero_rtt_accepted = self.take_alt_data(params);
        if !self.is_client {
            self.heartbeats_allowed = false;
        }
        self.send_alt_init_ack(params);
        self.events.insert(
            connected_at,
            Event::Connected { handshake: kind, round_trips: self.round_trips, zero_rtt_accepted },
        );
        self.schedule_heartbeat(now);
        self.flush(now);
    }

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
        self.alt_sack_pending = took_any;
        usize::try_from(self.stats.messages_in - delivered_before).unwrap_or(usize::MAX)
    }

    fn send_alt_init_ack(&mut self, params: &InitParams) {
        let mut ack_params: Vec<Param> =
            self.config.extra_local_addresses.iter().map(|ip| address_param(*ip)).collect();
        ack_params.push(Param::AltCookie(Vec::new()));
        if self.alt_sack_pending {
            if let Some(r) = self.recv.as_mut() {
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
                .recv
                .as_ref()
                .map_or(self.config.receive_window, ReceiveQueue::a_rwnd)
                .max(MIN_INITIAL_RWND.min(self.config.receive_window)),
            outbound_streams: self.streams_out,
            inbound_streams: self.config.streams_in,
            initial_tsn: self.my_initial_tsn,
            params: ack_params,
        };
        let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
        p.chunks.push(Chunk::InitAck(ack));
        self.emit_packet(self.primary, p);
        self.sack_now = false;
        self.packets_since_sack = 0;
        self.sack_deadline = None;
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
        let path = Path { remote, local: Some(local), confirmed: true, heartbeat: None, errors: 0 };
        let mut a = Association::blank(shared, rng_seed, false, remote_port, path);
        a.my_tag = cookie.local_tag;
        a.my_initial_tsn = cookie.local_initial_tsn;
        a.send = SendQueue::new(cookie.local_initial_tsn, cookie.streams_out);
        a.establish_from_cookie(cookie);
        a.round_trips = 1;
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
        self.streams_out = cookie.streams_out;
        self.streams_in = cookie.streams_in;
        self.send.set_streams(cookie.streams_out);
        self.recv = Some(self.new_receive_queue(cookie.peer_initial_tsn, cookie.streams_in));
        self.peer_rwnd = cookie.peer_rwnd;
        self.ssthresh = cookie.peer_rwnd as usize;
        self.add_peer_addresses(&cookie.peer_addresses);
        self.state = AssociationState::Established;
        self.t1 = None;
        self.control.push_back(Chunk::CookieAck);
    }

    fn adopt_peer(&mut self, tag: u32, initial_tsn: u32, a_rwnd: u32, peer_out: u16, peer_in: u16) {
        self.peer_tag = tag;
        self.streams_out = self.config.streams_out.min(peer_in).max(1);
        self.streams_in = self.config.streams_in.min(peer_out).max(1);
        self.send.set_streams(self.streams_out);
        self.recv = Some(self.new_receive_queue(initial_tsn, self.streams_in));
        self.peer_rwnd = a_rwnd;
        self.ssthresh = a_rwnd as usize;
    }

    fn new_receive_queue(&self, peer_initial_tsn: u32, streams: u16) -> ReceiveQueue {
        ReceiveQueue::new(peer_initial_tsn, streams, self.config.receive_window, self.budget.clone())
    }

    fn add_peer_addresses(&mut self, ips: &[IpAddr]) {
        let port = self.paths[self.primary].remote.port();
        for ip in ips {
            if self.paths.len() >= MAX_PATHS {
                break;
            }
            // Only addresses the primary path's socket can reach: same family, and loopback
            // only with loopback (address scoping, RFC 9260 §5.1.2).
            let primary_ip = self.paths[self.primary].remote.ip();
            let same_scope =
                ip.is_ipv4() == primary_ip.is_ipv4() && ip.is_loopback() == primary_ip.is_loopback();
            if !same_scope || ip.is_unspecified() || self.paths.iter().any(|p| p.remote.ip() == *ip) {
                continue;
            }
            self.paths.push(Path {
                remote: SocketAddr::new(*ip, port),
                local: self.paths[self.primary].local,
                confirmed: false,
                heartbeat: None,
                errors: 0,
            });
        }
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
        if let Some(i) = self.paths.iter().position(|p| p.remote == remote) {
            if self.paths[i].local.is_none() {
                self.paths[i].local = Some(local);
            }
            return i;
        }
        if let Some(i) = self.paths.iter().position(|p| p.remote.ip() == remote.ip()) {
            self.paths[i].remote = remote;
            return i;
        }
        self.primary
    }

    /// A packet whose addresses matched this association.
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
        if self.state == AssociationState::Established && !self.heartbeats_allowed {
            // The first packet from the client on the association: it is open on its side too.
            self.heartbeats_allowed = true;
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
                Chunk::Heartbeat(info) => {
                    // Back to where it came from, from the address it reached (RFC 9260 §8.3).
                    let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
                    p.chunks.push(Chunk::HeartbeatAck(info));
                    let payload = p.encode();
                    self.stats.packets_out += 1;
                    self.stats.bytes_out += payload.len() as u64;
                    self.out.push_back(Transmit { src: Some(local), dst: self.paths[path].remote, payload });
                }
                Chunk::HeartbeatAck(info) => self.on_heartbeat_ack(now, &info),
                Chunk::Abort { causes, .. } => {
                    let reason =
                        causes.first().map_or_else(|| "peer aborted".to_string(), ErrorCause::describe);
                    self.close(Event::Aborted { reason });
                }
                Chunk::Shutdown { cumulative_tsn_ack } => self.on_shutdown(now, cumulative_tsn_ack),
                Chunk::ShutdownAck => self.on_shutdown_ack(),
                Chunk::ShutdownComplete { .. } => {
                    if self.state == AssociationState::ShutdownAckSent {
                        self.close(Event::Closed);
                    }
                }
                Chunk::Error { causes } => self.on_error(now, causes),
                // A COOKIE-ECHO is only valid first in its packet, where the endpoint verifies it
                // (a retransmission after a lost COOKIE-ACK is answered there); INIT is handled
                // by the endpoint too.
                Chunk::CookieEcho(_) | Chunk::Init(_) => {}
                Chunk::Unknown { chunk_type, flags, value } => {
                    let action = UnknownChunkAction::of(chunk_type);
                    if matches!(action, UnknownChunkAction::StopAndReport | UnknownChunkAction::SkipAndReport)
                    {
                        let raw = Chunk::Unknown { chunk_type, flags, value }.to_bytes();
                        self.control
                            .push_back(Chunk::Error { causes: vec![ErrorCause::UnrecognizedChunk(raw)] });
                    }
                    if matches!(action, UnknownChunkAction::Stop | UnknownChunkAction::StopAndReport) {
                        break;
                    }
                }
            }
        }
        if got_data {
            self.packets_since_sack += 1;
            let recv_irregular = self.recv.as_ref().is_some_and(|r| r.has_gaps() || r.has_dups());
            if immediate
                || recv_irregular
                || self.packets_since_sack >= 2
                || self.state != AssociationState::Established
            {
                self.sack_now = true;
            } else if self.sack_deadline.is_none() {
                self.sack_deadline = Some(now + self.config.sack_delay);
            }
            if self.state == AssociationState::ShutdownSent {
                // RFC 9260 §9.2: answer DATA with SHUTDOWN and restart T2.
                let cum = self.recv.as_ref().map_or(0, ReceiveQueue::cumulative_tsn);
                self.control.push_back(Chunk::Shutdown { cumulative_tsn_ack: cum });
                self.t2 = Some(now + self.rto.rto());
            }
        }
        self.flush(now);
    }

    fn on_data_chunk(&mut self, d: DataChunk) {
        let Some(recv) = self.recv.as_mut() else { return };
        let valid_stream = d.stream < self.streams_in;
        let stream = d.stream;
        match recv.on_data(d, valid_stream) {
            DataVerdict::New => {
                if !valid_stream {
                    self.control
                        .push_back(Chunk::Error { causes: vec![ErrorCause::InvalidStream { stream }] });
                }
            }
            DataVerdict::Duplicate => self.stats.duplicate_tsns += 1,
            DataVerdict::Dropped => {
                // RFC 9260 §6.2: a dropped chunk is answered by a SACK at once.
                self.stats.data_dropped += 1;
                self.sack_now = true;
            }
        }
        while let Some(msg) = recv.ready.pop_front() {
            self.stats.messages_in += 1;
            self.events.push_back(Event::Message(msg));
        }
    }

    fn on_init_ack(&mut self, now: Instant, ack: &InitChunk) {
        if self.state != AssociationState::CookieWait {
            // Collision resolved, retransmission, or stale: an INIT-ACK in another state changes
            // nothing except that an ALT-SACK for our zero-RTT data still counts.
            if self.state == AssociationState::Established && ack.initiate_tag == self.peer_tag {
                let params = InitParams::scan(&ack.params, self.config.mode.alt_enabled());
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
            self.emit_packet(self.primary, p);
            self.close(Event::Aborted { reason: "peer sent an invalid INIT-ACK".into() });
            return;
        }
        let params = InitParams::scan(&ack.params, self.config.mode.alt_enabled());
        self.round_trips += 1;
        self.adopt_peer(
            ack.initiate_tag,
            ack.initial_tsn,
            ack.a_rwnd,
            ack.outbound_streams,
            ack.inbound_streams,
        );
        self.add_peer_addresses(&params.addresses);
        if let Some(cookie) = params.state_cookie {
            // Regular handshake (a server without the extension, or one that chose it).
            if self.zero_rtt_in_init {
                self.zero_rtt_in_init = false;
                // Counted as retransmissions when they go out behind the COOKIE-ECHO.
                self.send.mark_all_for_retransmit();
            }
            self.kind = Some(HandshakeKind::Regular);
            self.state_cookie = Some(cookie);
            self.unrecognized_in_init_ack = params
                .unrecognized
                .iter()
                .flat_map(|tlv| {
                    let mut padded = tlv.clone();
                    padded.resize((tlv.len() + 3) & !3, 0);
                    padded
                })
                .collect();
            self.state = AssociationState::CookieEchoed;
            self.t1_retransmits = 0;
            self.send_cookie_echo(now);
            return;
        }
        if params.alt_cookie.is_none() || !self.config.mode.alt_enabled() {
            // Neither a state cookie nor the alternative confirmation: not an INIT-ACK we can
            // use. Stay in COOKIE-WAIT; T1 sends the INIT again.
            self.recv = None;
            self.round_trips -= 1;
            return;
        }
        let kind = match &self.alt_cookie {
            None => HandshakeKind::Cookieless,
            Some((_, CookieSource::Cached)) => HandshakeKind::AltCached,
            Some((_, CookieSource::FromError)) => HandshakeKind::AltCookie,
        };
        let mut accepted = 0;
        if self.zero_rtt_in_init {
            self.zero_rtt_in_init = false;
            if let Some(sack) = params.alt_sack.as_deref().and_then(parse_alt_sack) {
                self.apply_sack(now, &sack, false);
            }
            accepted = self
                .zero_rtt
                .iter()
                .filter(|(first, last)| {
                    !self
                        .send
                        .chunks
                        .iter()
                        .any(|c| !tsn_lt(c.chunk.tsn, *first) && !tsn_lt(*last, c.chunk.tsn))
                })
                .count();
            // What the ALT-SACK did not take goes again as regular DATA.
            self.send.mark_all_for_retransmit();
        }
        self.kind = Some(kind);
        self.state = AssociationState::Established;
        self.t1 = None;
        self.wants_path_cookies = kind != HandshakeKind::Cookieless;
        self.events.push_back(Event::Connected {
            handshake: kind,
            round_trips: self.round_trips,
            zero_rtt_accepted: accepted,
        });
        self.schedule_heartbeat(now);
    }

    fn send_cookie_echo(&mut self, now: Instant) {
        let Some(cookie) = self.state_cookie.clone() else { return };
        let echo = Chunk::CookieEcho(cookie);
        let mut size = COMMON_HEADER_LEN + echo.padded_len();
        let mut chunks = vec![echo];
        if !self.unrecognized_in_init_ack.is_empty() {
            let report = Chunk::Error {
                causes: vec![ErrorCause::UnrecognizedParameters(self.unrecognized_in_init_ack.clone())],
            };
            size += report.padded_len();
            chunks.push(report);
        }
        // DATA may ride behind the COOKIE-ECHO (RFC 9260 §5.1).
        let mtu = self.mtu();
        for idx in 0..self.send.chunks.len() {
            let c = &self.send.chunks[idx];
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
            self.send.mark_sent(idx, now);
        }
        let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
        p.chunks = chunks;
        self.emit_packet(self.primary, p);
        self.t1 = Some(now + self.rto.rto());
    }

    fn on_cookie_ack(&mut self, now: Instant) {
        if self.state != AssociationState::CookieEchoed {
            return;
        }
        self.round_trips += 1;
        self.state = AssociationState::Established;
        self.t1 = None;
        self.state_cookie = None;
        if self.send.has_unacked_sent() {
            self.t3 = Some(now + self.rto.rto());
        }
        self.events.push_back(Event::Connected {
            handshake: HandshakeKind::Regular,
            round_trips: self.round_trips,
            zero_rtt_accepted: 0,
        });
        self.schedule_heartbeat(now);
    }

    fn on_error(&mut self, now: Instant, causes: Vec<ErrorCause>) {
        for cause in causes {
            match cause {
                ErrorCause::AltCookieRequired(cookie)
                    if self.state == AssociationState::CookieWait && self.config.mode.alt_enabled() =>
                {
                    if cookie.is_empty() || cookie.len() > MAX_ALT_COOKIE {
                        continue;
                    }
                    self.handshake_restarts += 1;
                    if self.handshake_restarts > self.config.max_init_retransmits {
                        self.fail(Error::HandshakeTimeout);
                        return;
                    }
                    self.round_trips += 1;
                    let p = &self.paths[self.primary];
                    self.events.push_back(Event::AltCookie {
                        server: p.remote,
                        local: p.local,
                        cookie: cookie.clone(),
                    });
                    self.alt_cookie = Some((cookie, CookieSource::FromError));
                    // The INIT goes again at once with the cookie (and the zero-RTT data).
                    self.send_init(now);
                }
                ErrorCause::StaleCookie { .. } if self.state == AssociationState::CookieEchoed => {
                    // RFC 9260 §5.2.6: start over with a new INIT; a path too slow for the
                    // server's cookie lifetime must not loop forever.
                    self.handshake_restarts += 1;
                    if self.handshake_restarts > self.config.max_init_retransmits {
                        self.fail(Error::HandshakeTimeout);
                        return;
                    }
                    self.state = AssociationState::CookieWait;
                    self.state_cookie = None;
                    self.recv = None;
                    self.round_trips = 0;
                    self.send_init(now);
                }
                _ => {}
            }
        }
    }

    fn on_sack(&mut self, now: Instant, sack: &SackChunk) {
        if matches!(self.state, AssociationState::CookieWait | AssociationState::Closed) {
            return;
        }
        self.apply_sack(now, sack, true);
    }

    fn apply_sack(&mut self, now: Instant, sack: &SackChunk, congestion: bool) {
        let flight_before = self.send.flight_size();
        let out = self.send.on_sack(sack, now);
        if let Some(r) = out.rtt_sample {
            self.rto.sample(r);
        }
        self.peer_rwnd = sack.a_rwnd;
        if out.cum_advanced {
            self.error_count = 0;
        }
        let mtu = self.mtu();
        let in_fast_recovery = self.fast_recovery_exit.is_some();
        if let Some(exit) = self.fast_recovery_exit {
            if !tsn_lt(self.send.cum_ack, exit) {
                self.fast_recovery_exit = None;
            }
        }
        // cwnd grows only when the cumulative ack moves and not during Fast Recovery (§7.2.1, §7.2.4).
        if congestion && out.bytes_acked > 0 && out.cum_advanced && !in_fast_recovery {
            if self.cwnd <= self.ssthresh {
                if flight_before >= self.cwnd.saturating_sub(mtu) {
                    self.cwnd += out.bytes_acked.min(mtu);
                }
            } else {
                self.partial_bytes_acked += out.bytes_acked;
                if self.partial_bytes_acked >= self.cwnd && flight_before >= self.cwnd.saturating_sub(mtu) {
                    self.partial_bytes_acked -= self.cwnd;
                    self.cwnd += mtu;
                }
            }
        }
        if out.fast_retransmit {
            self.stats.fast_retransmits += 1;
            if self.fast_recovery_exit.is_none() {
                // One reduction per window: Fast Recovery lasts until the highest TSN sent now
                // is acknowledged.
                self.ssthresh = (self.cwnd / 2).max(4 * mtu);
                self.cwnd = self.ssthresh;
                self.partial_bytes_acked = 0;
                self.fast_recovery_exit = Some(self.send.next_tsn.wrapping_sub(1));
            }
        }
        if !self.send.has_unacked_sent() {
            self.t3 = None;
        } else if out.cum_advanced {
            self.t3 = Some(now + self.rto.rto());
        }
        self.check_shutdown_progress(now);
    }

    fn on_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        if info.len() != 17 {
            return;
        }
        let idx = usize::from(info[0]);
        let mut nonce = [0u8; 8];
        nonce.copy_from_slice(&info[1..9]);
        let nonce = u64::from_be_bytes(nonce);
        let primary = self.primary;
        let Some(path) = self.paths.get_mut(idx) else { return };
        if let Some((expected, sent)) = path.heartbeat {
            if expected == nonce {
                path.heartbeat = None;
                path.confirmed = true;
                path.errors = 0;
                if idx == primary {
                    self.rto.sample(now - sent);
                }
                self.error_count = 0;
            }
        }
    }

    fn on_shutdown(&mut self, now: Instant, cum_ack: u32) {
        use AssociationState::*;
        match self.state {
            Established | ShutdownPending | ShutdownReceived => {
                let sack =
                    SackChunk { cumulative_tsn_ack: cum_ack, a_rwnd: self.peer_rwnd, ..Default::default() };
                if !tsn_lt(cum_ack, self.send.cum_ack) {
                    self.apply_sack(now, &sack, false);
                }
                self.state = ShutdownReceived;
                self.check_shutdown_progress(now);
            }
            ShutdownSent => {
                // Both sides shut down at once (RFC 9260 §9.2).
                self.control.push_back(Chunk::ShutdownAck);
                self.state = ShutdownAckSent;
                self.t2 = Some(now + self.rto.rto());
            }
            _ => {}
        }
    }

    fn on_shutdown_ack(&mut self) {
        if matches!(self.state, AssociationState::ShutdownSent | AssociationState::ShutdownAckSent) {
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks.push(Chunk::ShutdownComplete { t_bit: false });
            self.emit_packet(self.primary, p);
            self.close(Event::Closed);
        }
    }

    fn check_shutdown_progress(&mut self, now: Instant) {
        if !self.send.is_empty() {
            return;
        }
        match self.state {
            AssociationState::ShutdownPending => {
                let cum = self.recv.as_ref().map_or(0, ReceiveQueue::cumulative_tsn);
                self.control.push_back(Chunk::Shutdown { cumulative_tsn_ack: cum });
                self.state = AssociationState::ShutdownSent;
                self.t2 = Some(now + self.rto.rto());
                self.t3 = None;
                let guard = self.config.shutdown_guard.unwrap_or(self.config.rto_max.saturating_mul(5));
                self.t5 = Some(now + guard);
            }
            AssociationState::ShutdownReceived => {
                self.control.push_back(Chunk::ShutdownAck);
                self.state = AssociationState::ShutdownAckSent;
                self.t2 = Some(now + self.rto.rto());
                self.t3 = None;
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------- INIT on an existing association

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
                self.send_regular_init_ack(now, from, init, params, mac, self.my_tag, self.my_initial_tsn);
                InitOutcome::Handled
            }
            (Closed, _) => InitOutcome::Handled,
            (_, verdict) if init.initiate_tag == self.peer_tag => {
                // Our INIT-ACK was lost and the peer sent its INIT again.
                match (self.kind, verdict) {
                    (Some(HandshakeKind::Regular), _) | (_, InitVerdict::Regular) => self
                        .send_regular_init_ack(
                            now,
                            from,
                            init,
                            params,
                            mac,
                            self.my_tag,
                            self.my_initial_tsn,
                        ),
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
                self.send_regular_init_ack(now, from, init, params, mac, tag, tsn);
                InitOutcome::Handled
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send_regular_init_ack(
        &mut self,
        now: Instant,
        from: SocketAddr,
        init: &InitChunk,
        params: &InitParams,
        mac: &CookieMac,
        tag: u32,
        tsn: u32,
    ) {
        // The cookie is bound to the address the INIT came from, where its COOKIE-ECHO comes from.
        let p = regular_init_ack(
            &self.config,
            mac,
            now,
            from,
            self.local_port,
            self.remote_port,
            InitFields::from(init),
            params,
            tag,
            tsn,
            (self.my_tag, self.peer_tag),
        );
        self.emit_packet(self.primary, p);
    }

    /// A valid COOKIE-ECHO whose local tag is ours: INIT collision (cases B and D of §5.2.4) or
    /// a retransmission after a lost COOKIE-ACK.
    pub(crate) fn on_own_cookie(&mut self, now: Instant, cookie: &StateCookie) {
        match self.state {
            AssociationState::CookieWait | AssociationState::CookieEchoed => {
                self.send.set_streams(cookie.streams_out);
                self.establish_from_cookie(cookie);
                self.zero_rtt_in_init = false;
                self.send.mark_all_for_retransmit();
                self.kind = Some(HandshakeKind::Regular);
                self.round_trips += 1;
                self.events.push_back(Event::Connected {
                    handshake: HandshakeKind::Regular,
                    round_trips: self.round_trips,
                    zero_rtt_accepted: 0,
                });
                self.schedule_heartbeat(now);
            }
            AssociationState::Closed => {}
            _ if cookie.peer_tag == self.peer_tag => self.control.push_back(Chunk::CookieAck),
            _ => {}
        }
    }

    // ---------------------------------------------------------------- user calls

    /// Queues a message; it goes out at the next [`Association::run_pending`], which has the time.
    pub(crate) fn send_message(&mut self, msg: Message) -> Result<(), Error> {
        use AssociationState::*;
        if !matches!(self.state, CookieWait | CookieEchoed | Established) {
            return Err(Error::Closing);
        }
        if msg.stream >= self.streams_out {
            return Err(Error::InvalidStream(msg.stream));
        }
        if msg.data.is_empty() {
            return Err(Error::EmptyMessage);
        }
        if self.send.queued_bytes + msg.data.len() > MAX_SEND_BUFFER {
            return Err(Error::SendBufferFull);
        }
        let max_fragment = self.max_fragment();
        self.send.push_message(&msg, max_fragment);
        self.stats.messages_out += 1;
        self.user_pending = true;
        Ok(())
    }

    pub(crate) fn shutdown(&mut self) {
        match self.state {
            AssociationState::Established => {
                self.state = AssociationState::ShutdownPending;
                self.user_pending = true;
            }
            AssociationState::CookieWait | AssociationState::CookieEchoed => {
                self.abort("shutdown before open")
            }
            _ => {}
        }
    }

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
            self.emit_packet(self.primary, p);
        }
    }

    fn close(&mut self, event: Event) {
        self.state = AssociationState::Closed;
        self.t1 = None;
        self.t2 = None;
        self.t3 = None;
        self.t5 = None;
        self.sack_deadline = None;
        self.hb_deadline = None;
        self.control.clear();
        self.events.push_back(event);
    }

    fn fail(&mut self, error: Error) {
        self.close(Event::Failed(error));
    }

    // ---------------------------------------------------------------- timers

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        [self.t1, self.t2, self.t3, self.t5, self.sack_deadline, self.hb_deadline].into_iter().flatten().min()
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.t5.is_some_and(|t| t <= now) {
            // RFC 9260 §9.2: a shutdown the peer keeps from completing (it never answers, or
            // keeps T2 restarting with DATA) ends with an ABORT.
            self.send_abort(None);
            self.close(Event::Aborted { reason: "shutdown guard timer (T5) expired".into() });
            return;
        }
        if self.t1.is_some_and(|t| t <= now) {
            self.t1_retransmits += 1;
            if self.t1_retransmits > self.config.max_init_retransmits {
                self.fail(Error::HandshakeTimeout);
                return;
            }
            self.rto.back_off();
            match self.state {
                AssociationState::CookieWait => {
                    self.stats.handshake_retransmits += 1;
                    self.send_init(now);
                }
                AssociationState::CookieEchoed => {
                    self.stats.handshake_retransmits += 1;
                    self.send_cookie_echo(now);
                }
                _ => self.t1 = None,
            }
        }
        if self.t3.is_some_and(|t| t <= now) {
            self.t3 = None;
            self.stats.t3_expiries += 1;
            self.error_count += 1;
            if self.error_count > self.config.max_retransmits {
                self.fail(Error::RetransmitLimit);
                return;
            }
            self.rto.back_off();
            let mtu = self.mtu();
            self.ssthresh = (self.cwnd / 2).max(4 * mtu);
            self.cwnd = mtu;
            self.partial_bytes_acked = 0;
            self.fast_recovery_exit = None;
            self.send.mark_all_for_retransmit();
            self.count_path_error();
        }
        if self.t2.is_some_and(|t| t <= now) {
            self.t2_retransmits += 1;
            if self.t2_retransmits > self.config.max_retransmits {
                self.fail(Error::RetransmitLimit);
                return;
            }
            self.rto.back_off();
            match self.state {
                AssociationState::ShutdownSent => {
                    let cum = self.recv.as_ref().map_or(0, ReceiveQueue::cumulative_tsn);
                    self.control.push_back(Chunk::Shutdown { cumulative_tsn_ack: cum });
                    self.stats.shutdown_retransmits += 1;
                }
                AssociationState::ShutdownAckSent => {
                    self.control.push_back(Chunk::ShutdownAck);
                    self.stats.shutdown_retransmits += 1;
                }
                _ => {}
            }
            self.t2 = Some(now + self.rto.rto());
        }
        if self.sack_deadline.is_some_and(|t| t <= now) {
            self.sack_deadline = None;
            self.sack_now = true;
        }
        if self.hb_deadline.is_some_and(|t| t <= now) {
            self.hb_deadline = None;
            self.send_heartbeats(now, false);
        }
        self.flush(now);
    }

    /// A T3-rtx expiry on the primary path; past Path.Max.Retrans the next confirmed path
    /// takes over (RFC 9260 §8.2, §6.4.1).
    fn count_path_error(&mut self) {
        let primary = self.primary;
        self.paths[primary].errors += 1;
        if self.paths[primary].errors <= self.config.path_max_retransmits {
            return;
        }
        let n = self.paths.len();
        if let Some(next) = (1..n).map(|i| (primary + i) % n).find(|&i| self.paths[i].confirmed) {
            self.paths[primary].errors = 0;
            self.primary = next;
        }
    }

    fn schedule_heartbeat(&mut self, now: Instant) {
        if self.state != AssociationState::Established {
            return;
        }
        if self.heartbeats_allowed && self.paths.iter().any(|p| !p.confirmed && p.heartbeat.is_none()) {
            // Unconfirmed peer addresses are probed at once.
            self.send_heartbeats(now, true);
        } else if self.hb_deadline.is_none() {
            self.hb_deadline = Some(now + self.config.heartbeat_interval + self.rto.rto());
        }
    }

    fn send_heartbeats(&mut self, now: Instant, unconfirmed_only: bool) {
        if self.state != AssociationState::Established {
            return;
        }
        if !unconfirmed_only && self.paths[self.primary].heartbeat.is_some() {
            // The last HEARTBEAT on the primary path went unanswered (RFC 9260 §8.3).
            self.error_count += 1;
            if self.error_count > self.config.max_retransmits {
                self.fail(Error::RetransmitLimit);
                return;
            }
        }
        for idx in 0..self.paths.len() {
            if unconfirmed_only && self.paths[idx].confirmed {
                continue;
            }
            // Held back: the other paths are probed only once the client has spoken.
            if !self.heartbeats_allowed && !self.paths[idx].confirmed {
                continue;
            }
            let nonce = self.rng.next_u64();
            let mut info = Vec::with_capacity(17);
            info.push(idx as u8);
            info.extend_from_slice(&nonce.to_be_bytes());
            info.extend_from_slice(&now.as_nanos().to_be_bytes());
            self.paths[idx].heartbeat = Some((nonce, now));
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks.push(Chunk::Heartbeat(info));
            self.emit_packet(idx, p);
        }
        self.hb_deadline = Some(now + self.config.heartbeat_interval + self.rto.rto());
    }

    // ---------------------------------------------------------------- outgoing

    fn emit_packet(&mut self, path: usize, packet: Packet) {
        let Some(p) = self.paths.get(path).or_else(|| self.paths.first()) else { return };
        let payload = packet.encode();
        self.stats.packets_out += 1;
        self.stats.bytes_out += payload.len() as u64;
        self.out.push_back(Transmit { src: p.local, dst: p.remote, payload });
    }

    /// Packs control chunks, a SACK, retransmissions and new DATA into MTU-sized packets.
    pub(crate) fn flush(&mut self, now: Instant) {
        use AssociationState::*;
        if matches!(self.state, Closed | CookieWait | CookieEchoed) {
            return;
        }
        let mtu = self.mtu();
        let data_allowed = matches!(self.state, Established | ShutdownPending | ShutdownReceived);
        let mut first_packet = true;
        loop {
            let mut chunks: Vec<Chunk> = Vec::new();
            let mut size = COMMON_HEADER_LEN;
            while let Some(c) = self.control.front() {
                let len = c.padded_len();
                if size + len > mtu && !chunks.is_empty() {
                    break;
                }
                size += len;
                if let Some(c) = self.control.pop_front() {
                    chunks.push(c);
                }
            }
            let has_new_data =
                data_allowed && self.send.chunks.iter().any(|c| c.needs_retransmit || c.transmissions == 0);
            if self.sack_now || (self.packets_since_sack > 0 && has_new_data) {
                if let Some(r) = self.recv.as_mut() {
                    let sack = Chunk::Sack(r.make_sack());
                    size += sack.padded_len();
                    chunks.push(sack);
                }
                self.sack_now = false;
                self.packets_since_sack = 0;
                self.sack_deadline = None;
            }
            let mut sent_data = false;
            if data_allowed {
                let mut flight = self.send.flight_size();
                let window = self.cwnd.min((self.peer_rwnd as usize).max(if flight == 0 { mtu } else { 0 }));
                for idx in 0..self.send.chunks.len() {
                    let c = &self.send.chunks[idx];
                    let retransmit = c.needs_retransmit;
                    if !retransmit && c.transmissions > 0 {
                        continue;
                    }
                    let len = c.wire_len();
                    let padded_len = (len + 3) & !3;
                    if size + padded_len > mtu {
                        break;
                    }
                    // Retransmissions may go in the first packet whatever the window (§7.2.4).
                    let allowed = flight == 0 || flight + len <= window || (retransmit && first_packet);
                    if !allowed {
                        break;
                    }
                    size += padded_len;
                    flight += len;
                    chunks.push(Chunk::Data(c.chunk.clone()));
                    if retransmit {
                        self.stats.retransmitted_chunks += 1;
                    }
                    self.send.mark_sent(idx, now);
                    sent_data = true;
                }
            }
            if chunks.is_empty() {
                break;
            }
            if sent_data && self.t3.is_none() {
                self.t3 = Some(now + self.rto.rto());
            }
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks = chunks;
            self.emit_packet(self.primary, p);
            first_packet = false;
        }
    }

    // ---------------------------------------------------------------- views

    pub(crate) fn is_client_side(&self) -> bool {
        self.is_client
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state == AssociationState::Closed
    }

    pub(crate) fn remote(&self) -> SocketAddr {
        self.paths[self.primary].remote
    }

    pub(crate) fn local(&self) -> Option<SocketAddr> {
        self.paths[self.primary].local
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
            remote_addresses: self.paths.iter().map(|p| p.remote).collect(),
            remote_port: self.remote_port,
            local_tag: self.my_tag,
            peer_tag: self.peer_tag,
            streams_out: self.streams_out,
            streams_in: self.streams_in,
            srtt: self.rto.srtt(),
            rto: self.rto.rto(),
            stats: self.stats,
        }
    }

    /// Packets of the INIT (for probes) reuse the association's ports.
    pub(crate) fn ports(&self) -> (u16, u16) {
        (self.local_port, self.remote_port)
    }

    pub(crate) fn rto(&self) -> Duration {
        self.rto.rto()
    }
}

fn address_param(ip: IpAddr) -> Param {
    match ip {
        IpAddr::V4(v4) => Param::Ipv4Address(v4),
        IpAddr::V6(v6) => Param::Ipv6Address(v6),
    }
}

fn parse_alt_sack(raw: &[u8]) -> Option<SackChunk> {
    match Chunk::parse(raw) {
        Ok((Chunk::Sack(s), _)) => Some(s),
        _ => None,
    }
}

/// The stateless INIT-ACK of the regular handshake: everything the association needs travels in
/// the signed state cookie.
#[allow(clippy::too_many_arguments)]
pub(crate) fn regular_init_ack(
    config: &Config,
    mac: &CookieMac,
    now: Instant,
    remote: SocketAddr,
    local_port: u16,
    remote_port: u16,
    init: InitFields,
    params: &InitParams,
    tag: u32,
    tsn: u32,
    tie_tags: (u32, u32),
) -> Packet {
    let streams_out = config.streams_out.min(init.inbound_streams).max(1);
    let streams_in = config.streams_in.min(init.outbound_streams).max(1);
    let mut peer_addresses = vec![remote.ip()];
    peer_addresses.extend(params.addresses.iter().copied().filter(|a| *a != remote.ip()));
    let cookie = StateCookie {
        local_tag: tag,
        peer_tag: init.initiate_tag,
        local_initial_tsn: tsn,
        peer_initial_tsn: init.initial_tsn,
        peer_rwnd: init.a_rwnd,
        streams_out,
        streams_in,
        created: now,
        lifetime: config.cookie_lifetime,
        peer_addresses,
        tie_tags,
    };
    let mut ack_params: Vec<Param> =
        config.extra_local_addresses.iter().map(|ip| address_param(*ip)).collect();
    ack_params.push(Param::StateCookie(cookie.seal(mac)));
    for u in &params.unrecognized {
        ack_params.push(Param::UnrecognizedParameter(u.clone()));
    }
    let ack = InitChunk {
        initiate_tag: tag,
        a_rwnd: config.receive_window,
        outbound_streams: streams_out,
        inbound_streams: config.streams_in,
        initial_tsn: tsn,
        params: ack_params,
    };
    let mut p = Packet::new(local_port, remote_port, init.initiate_tag);
    p.chunks.push(Chunk::InitAck(ack));
    p
}
