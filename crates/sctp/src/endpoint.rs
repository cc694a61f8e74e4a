//! The endpoint: demultiplexing, stateless answers, the association table.
//!
//! Packets are matched to an association by (peer UDP address, peer SCTP port); a packet from
//! an address the association does not know yet is matched by its verification tag when its
//! IP address is one of the peer's (RFC 6951 §5.5: the encapsulation port is learnt per
//! packet). INITs are judged here, statelessly, before any association is involved: an
//! ALT-COOKIE that is empty or invalid gets an ERROR with a fresh cookie, an INIT without one
//! gets an INIT-ACK with a state cookie (or, in alternative-only mode, the ERROR as well).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use fastshake_core::CookieMac;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::association::{
    nonzero_u32, own_init, regular_init_ack, Association, InitFields, InitOutcome, InitParams, InitVerdict,
    Shared, MAX_ALT_COOKIE,
};
use crate::cookie::{alt_cookie, alt_cookie_valid, CookieError, StateCookie};
use crate::packet::{self, Chunk, ErrorCause, InitChunk, InitView, Packet, Param};
use crate::queue::RecvBudget;
use crate::snap::{parse_peer_init, SnapError, SnapInit};
use crate::{
    AssociationHandle, AssociationInfo, Config, ConnectOptions, EndpointStats, Error, Event, HandshakeKind,
    HandshakeMode, Instant, Message, RateLimit, Reliability, Transmit,
};

/// Most stateless answers queued before further ones are dropped (a flood cannot grow memory).
const MAX_STATELESS_QUEUE: usize = 1024;
/// Attempts of an INIT that fetches an ALT-COOKIE over another path.
const PROBE_ATTEMPTS: u32 = 3;
/// Snapshots kept of associations that ended, for summaries written after their last event.
const ENDED_KEPT: usize = 64;
/// One token of a [`TokenBucket`] in its fixed-point units (per second of refill).
const TOKEN: u128 = 1_000_000_000;

/// A token bucket on the caller's clock, in fixed point so that it is exact and reproducible.
#[derive(Debug)]
struct TokenBucket {
    limit: RateLimit,
    /// Tokens × `TOKEN`.
    level: u128,
    last: Instant,
}

impl TokenBucket {
    fn new(limit: RateLimit) -> Self {
        TokenBucket { limit, level: u128::from(limit.burst) * TOKEN, last: Instant::ZERO }
    }

    /// Takes a token if there is one at `now`.
    fn take(&mut self, now: Instant) -> bool {
        if now > self.last {
            let elapsed_ns = (now - self.last).as_nanos();
            let refill = elapsed_ns.saturating_mul(u128::from(self.limit.per_second));
            self.level = self.level.saturating_add(refill).min(u128::from(self.limit.burst) * TOKEN);
            self.last = now;
        }
        if self.level >= TOKEN {
            self.level -= TOKEN;
            true
        } else {
            false
        }
    }
}

/// An INIT sent over another path only to fetch its ALT-COOKIE (seed 004 §III-F).
#[derive(Clone, Debug)]
struct PathProbe {
    handle: AssociationHandle,
    local: SocketAddr,
    remote: SocketAddr,
    packet: Vec<u8>,
    tag: u32,
    deadline: Instant,
    attempts: u32,
}

/// All associations of one local SCTP port, in both roles.
pub struct Endpoint {
    config: Arc<Config>,
    rng: ChaCha20Rng,
    mac: CookieMac,
    associations: BTreeMap<u64, Association>,
    by_address: BTreeMap<(SocketAddr, u16), u64>,
    registered: BTreeMap<u64, Vec<(SocketAddr, u16)>>,
    /// Our verification tag of each association, for packets from a new address of the peer.
    by_tag: BTreeMap<u32, u64>,
    stateless: VecDeque<Transmit>,
    events: VecDeque<(AssociationHandle, Event)>,
    probes: Vec<PathProbe>,
    stats: EndpointStats,
    /// Receive buffer memory of all associations against `max_receive_buffer`.
    budget: RecvBudget,
    /// Rate of answers to out-of-the-blue packets (`None`: unlimited).
    ootb_bucket: Option<TokenBucket>,
    /// The last snapshot of associations that ended, newest last.
    ended: VecDeque<(AssociationHandle, AssociationInfo)>,
    next_handle: u64,
    /// The latest time the caller passed in, for calls that take none (send, shutdown).
    now_hint: Instant,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_port", &self.config.local_port)
            .field("associations", &self.associations.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint with `config`, its randomness (tags, TSNs, the first cookie key) drawn from
    /// `rng_seed`.
    pub fn new(config: Arc<Config>, rng_seed: [u8; 32]) -> Endpoint {
        let mut rng = ChaCha20Rng::from_seed(rng_seed);
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        Endpoint {
            budget: RecvBudget::new(config.max_receive_buffer),
            ootb_bucket: config.ootb_answers.map(TokenBucket::new),
            ended: VecDeque::new(),
            config,
            rng,
            mac: CookieMac::new(key),
            associations: BTreeMap::new(),
            by_address: BTreeMap::new(),
            registered: BTreeMap::new(),
            by_tag: BTreeMap::new(),
            stateless: VecDeque::new(),
            events: VecDeque::new(),
            probes: Vec::new(),
            stats: EndpointStats::default(),
            next_handle: 0,
            now_hint: Instant::ZERO,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn next_seed(&mut self) -> [u8; 32] {
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        seed
    }

    fn shared(&self) -> Shared {
        Shared { config: self.config.clone(), budget: self.budget.clone() }
    }

    fn new_handle(&mut self) -> AssociationHandle {
        self.next_handle += 1;
        AssociationHandle(self.next_handle)
    }

    /// Opens an association to `remote` (the peer's UDP address) and SCTP port `remote_port`.
    /// `Event::Connected` or `Event::Failed` follows.
    pub fn connect(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        remote_port: u16,
        opts: ConnectOptions,
    ) -> AssociationHandle {
        self.now_hint = self.now_hint.max(now);
        let handle = self.new_handle();
        if self.associations.len() >= self.config.max_associations {
            self.events.push_back((handle, Event::Failed(Error::TooManyAssociations)));
            return handle;
        }
        if let Some(old) = self.by_address.get(&(remote, remote_port)).copied() {
            // One association per peer address and port (RFC 9260 §1.5.2): the old one goes.
            if let Some(a) = self.associations.get_mut(&old) {
                a.abort("replaced by a new association");
            }
            self.after(AssociationHandle(old));
        }
        let seed = self.next_seed();
        let a = Association::connect(self.shared(), seed, now, local, remote, remote_port, opts);
        self.associations.insert(handle.0, a);
        self.after(handle);
        handle
    }

    /// Our INIT for SNAP (draft-hancke-tsvwg-snap): the INIT this endpoint opens associations
    /// with, its Initiate Tag and Initial TSN drawn from the endpoint's randomness. Its
    /// [`SnapInit::bytes`] go to the peer out of band (base64 in the SDP's `a=sctp-init`), the
    /// value to [`Endpoint::connect_snap`] with the peer's. Nothing else happens: no
    /// association, no timer, no COOKIE-WAIT (draft, "SCTP considerations").
    pub fn snap_init(&mut self) -> SnapInit {
        let tag = nonzero_u32(&mut self.rng);
        let tsn = self.rng.next_u32();
        SnapInit::new(own_init(&self.config, (tag, tsn)))
    }

    /// Opens an association by SNAP with the peer at `remote` (its UDP address) and SCTP port
    /// `remote_port`, from our INIT `ours` ([`Endpoint::snap_init`]) and the peer's INIT chunk
    /// `peer_init` (the bytes of its `a=sctp-init`). The association is ESTABLISHED at once:
    /// [`Event::Connected`] follows with [`HandshakeKind::Snap`] and no round trip, and data may
    /// be sent at once, the first packet on the wire carrying it. Our verification tag is the
    /// peer's Initiate Tag and the peer's is ours; streams, the peer's window and stream reset
    /// are settled as by the four-way handshake (RFC 9260 §5.1).
    ///
    /// SNAP is symmetric: each side calls this with its own INIT and the other's, whichever
    /// offered, and there is no client or server. Call it once the transport below is up (for
    /// WebRTC, when the DTLS handshake finished: draft "SCTP considerations") and before
    /// handing the endpoint any packet of the association, which would otherwise be out of the
    /// blue and answered with ABORT.
    ///
    /// Fails, opening nothing, with [`Error::Snap`] when the peer's INIT is invalid (see
    /// [`crate::validate_snap_init`]) or has our Initiate Tag, when `ours` was made under
    /// another configuration, or when an association with `remote` and `remote_port` exists
    /// already (draft "Modifying the Session": no `a=sctp-init` for an existing association;
    /// abort it first to replace it); with [`Error::TooManyAssociations`] when the endpoint
    /// holds `max_associations`. `ours` is spent either way.
    pub fn connect_snap(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        remote_port: u16,
        ours: SnapInit,
        peer_init: &[u8],
    ) -> Result<AssociationHandle, Error> {
        self.now_hint = self.now_hint.max(now);
        let peer = parse_peer_init(peer_init)?;
        if peer.initiate_tag == ours.initiate_tag() {
            return Err(SnapError::OwnInitiateTag.into());
        }
        // The association settles streams and stream reset from our configuration: it must be
        // what our INIT told the peer.
        if *ours.chunk() != own_init(&self.config, (ours.initiate_tag(), ours.initial_tsn())) {
            return Err(SnapError::ForeignInit.into());
        }
        if self.by_address.contains_key(&(remote, remote_port)) {
            return Err(SnapError::AssociationExists(remote, remote_port).into());
        }
        if self.associations.len() >= self.config.max_associations {
            return Err(Error::TooManyAssociations);
        }
        // ALT-* parameters mean nothing here: there is no cookie exchange to shorten.
        let params = InitParams::scan(&peer.params, false, self.config.partial_reliability);
        let handle = self.new_handle();
        let seed = self.next_seed();
        let a = Association::open_snap(
            self.shared(),
            seed,
            now,
            local,
            remote,
            remote_port,
            ours.chunk(),
            &peer,
            &params,
        );
        self.associations.insert(handle.0, a);
        self.after(handle);
        Ok(handle)
    }

    /// One UDP payload (one SCTP packet) arrived on `local` from `remote`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        self.now_hint = self.now_hint.max(now);
        self.stats.datagrams_in += 1;
        self.stats.bytes_in += datagram.len() as u64;
        let size = datagram.len();
        // INITs first, from a borrowed view: a flood is answered without building packets.
        match InitView::parse(datagram) {
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
            Ok(Some((view, alone))) => {
                // INIT travels alone with a zero tag (RFC 9260 §8.5.1); anything else is discarded.
                if alone && view.header.verification_tag == 0 {
                    self.on_init(now, local, remote, &view, datagram);
                }
                return;
            }
            Ok(None) => {}
        }
        let Ok(packet) = Packet::parse(datagram) else {
            self.stats.malformed += 1;
            return;
        };
        if packet.chunks.is_empty() {
            return;
        }
        if self.on_probe_answer(&packet, local, remote) {
            return;
        }
        if packet.dst_port != self.config.local_port {
            self.answer_out_of_the_blue(remote, local, &packet);
            return;
        }
        if let Some(Chunk::CookieEcho(_)) = packet.chunks.first() {
            self.on_cookie_echo(now, local, remote, packet, size);
            return;
        }
        match self.lookup(remote, &packet) {
            Some(h) => {
                if let Some(a) = self.associations.get_mut(&h) {
                    a.handle_packet(now, local, remote, packet, size);
                }
                self.after(AssociationHandle(h));
            }
            None => self.answer_out_of_the_blue(remote, local, &packet),
        }
    }

    fn lookup(&self, remote: SocketAddr, packet: &Packet) -> Option<u64> {
        if let Some(h) = self.by_address.get(&(remote, packet.src_port)) {
            return Some(*h);
        }
        // A known peer IP on a new UDP port (NAT rebinding) or a new path: match by our tag.
        let h = *self.by_tag.get(&packet.verification_tag)?;
        let a = self.associations.get(&h)?;
        (a.remote_port == packet.src_port && a.owns_ip(remote.ip())).then_some(h)
    }

    fn push_stateless(&mut self, local: Option<SocketAddr>, remote: SocketAddr, packet: Packet) {
        if self.stateless.len() < MAX_STATELESS_QUEUE {
            self.push_stateless_bytes(local, remote, packet.encode());
        }
    }

    fn push_stateless_bytes(&mut self, local: Option<SocketAddr>, remote: SocketAddr, payload: Vec<u8>) {
        if self.stateless.len() < MAX_STATELESS_QUEUE {
            self.stateless.push_back(Transmit { src: local, dst: remote, payload });
        }
    }

    fn send_abort_for_init(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        ports: (u16, u16),
        tag: u32,
        cause: Option<ErrorCause>,
    ) {
        if !self.ootb_answer_allowed() {
            return;
        }
        // RFC 9260 §8.4 (3): the tag is the INIT's Initiate Tag and the T bit is clear.
        let payload = match cause {
            None => packet::encode_bare_abort(ports.0, ports.1, tag, false),
            Some(cause) => {
                let mut p = Packet::new(ports.0, ports.1, tag);
                p.chunks.push(Chunk::Abort { t_bit: false, causes: vec![cause] });
                p.encode()
            }
        };
        self.stats.aborts_sent += 1;
        self.push_stateless_bytes(Some(local), remote, payload);
    }

    fn on_init(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        view: &InitView<'_>,
        raw: &[u8],
    ) {
        self.stats.inits_received += 1;
        let (src_port, dst_port) = (view.header.src_port, view.header.dst_port);
        let ports = (dst_port, src_port);
        if view.initiate_tag == 0 || view.outbound_streams == 0 || view.inbound_streams == 0 {
            // RFC 9260 §3.3.2: a zero tag or stream count is answered with ABORT.
            self.send_abort_for_init(local, remote, ports, view.initiate_tag, None);
            return;
        }
        let existing = if dst_port == self.config.local_port {
            self.by_address.get(&(remote, src_port)).copied()
        } else {
            None
        };
        if existing.is_none() && (!self.config.listen || dst_port != self.config.local_port) {
            self.send_abort_for_init(local, remote, ports, view.initiate_tag, None);
            return;
        }
        let mode = self.config.mode;
        let verdict = match (view.alt_cookie(), mode) {
            (_, HandshakeMode::Regular) => InitVerdict::Regular,
            (Some(c), _) if !c.is_empty() && alt_cookie_valid(&self.mac, remote.ip(), c) => {
                InitVerdict::Alt(HandshakeKind::AltCookie)
            }
            // A cookieless server has no use for the cookie: a stale one opens as well.
            (Some(_), _) if self.config.cookieless => InitVerdict::Alt(HandshakeKind::Cookieless),
            (Some(c), _) => {
                if !c.is_empty() {
                    self.stats.bad_cookies += 1;
                }
                self.send_alt_cookie_error(local, remote, ports, view.initiate_tag);
                return;
            }
            (None, HandshakeMode::AltOnly) => {
                // Alternative-only: never an INIT-ACK with a state cookie, so no amplification.
                self.send_alt_cookie_error(local, remote, ports, view.initiate_tag);
                return;
            }
            (None, _) => InitVerdict::Regular,
        };
        if existing.is_none() && verdict == InitVerdict::Regular {
            // The stateless INIT-ACK: everything goes into the cookie, straight from the view.
            let params = InitParams::from_view(view, mode.alt_enabled(), self.config.partial_reliability);
            let tag = nonzero_u32(&mut self.rng);
            let tsn = self.rng.next_u32();
            let fields = InitFields::from(view);
            let p = regular_init_ack(
                &self.config,
                &self.mac,
                now,
                remote,
                (dst_port, src_port),
                fields,
                &params,
                (tag, tsn),
                (0, 0),
            );
            self.stats.init_acks_sent += 1;
            self.push_stateless(Some(local), remote, p);
            return;
        }
        // From here on state is built: the owned parse.
        let Ok(packet) = Packet::parse_unchecked(raw) else {
            self.stats.malformed += 1;
            return;
        };
        let Some(Chunk::Init(init)) = packet.chunks.into_iter().next() else { return };
        let init = &init;
        let params = InitParams::scan(&init.params, mode.alt_enabled(), self.config.partial_reliability);
        // An alternative INIT repeated from a new UDP port of the same IP (the client's NAT
        // rebound while its INIT-ACK was lost) belongs to the association it opened: a second
        // one would deliver its ALT-DATA twice.
        let existing = existing.or_else(|| {
            let InitVerdict::Alt(_) = verdict else { return None };
            let (h, a) = self.associations.iter_mut().find(|(_, a)| {
                a.peer_tag == init.initiate_tag && a.remote_port == src_port && a.owns_ip(remote.ip())
            })?;
            a.learn_path(local, remote);
            Some(*h)
        });
        let Some(h) = existing else {
            if let InitVerdict::Alt(kind) = verdict {
                self.open_alt(now, local, remote, src_port, init, &params, kind);
            }
            return;
        };
        let outcome = match self.associations.get_mut(&h) {
            Some(a) => {
                let before = a.stats.packets_out;
                let o = a.on_peer_init(now, remote, init, &params, verdict, &self.mac);
                if a.stats.packets_out > before {
                    self.stats.init_acks_sent += 1;
                }
                o
            }
            None => InitOutcome::Handled,
        };
        if let Some(a) = self.associations.get_mut(&h) {
            if outcome == InitOutcome::Restart {
                a.abort("peer restarted");
            }
        }
        self.after(AssociationHandle(h));
        if let (InitOutcome::Restart, InitVerdict::Alt(kind)) = (outcome, verdict) {
            self.open_alt(now, local, remote, src_port, init, &params, kind);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn open_alt(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        src_port: u16,
        init: &InitChunk,
        params: &InitParams,
        kind: HandshakeKind,
    ) {
        if !self.room_for(remote.ip()) {
            let cause = ErrorCause::Other { code: 4, value: Vec::new() }; // Out of Resource
            self.send_abort_for_init(
                local,
                remote,
                (self.config.local_port, src_port),
                init.initiate_tag,
                Some(cause),
            );
            return;
        }
        let handle = self.new_handle();
        let seed = self.next_seed();
        let a =
            Association::accept_alt(self.shared(), seed, now, local, remote, src_port, init, params, kind);
        self.stats.init_acks_sent += 1;
        self.stats.associations_opened += 1;
        self.associations.insert(handle.0, a);
        self.after(handle);
    }

    /// Whether a new server association with a peer at `ip` fits both association limits.
    fn room_for(&self, ip: std::net::IpAddr) -> bool {
        if self.associations.len() >= self.config.max_associations {
            return false;
        }
        let from_ip = self.associations.values().filter(|a| !a.is_client_side() && a.owns_ip(ip)).count();
        from_ip < self.config.max_associations_per_ip
    }

    fn send_alt_cookie_error(&mut self, local: SocketAddr, remote: SocketAddr, ports: (u16, u16), tag: u32) {
        let cookie = alt_cookie(&self.mac, remote.ip());
        self.stats.alt_cookie_errors_sent += 1;
        self.push_stateless_bytes(
            Some(local),
            remote,
            packet::encode_alt_cookie_error(ports.0, ports.1, tag, &cookie),
        );
    }

    fn on_cookie_echo(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        mut packet: Packet,
        size: usize,
    ) {
        let Some(Chunk::CookieEcho(raw)) = packet.chunks.first() else { return };
        let cookie = match StateCookie::open(raw, &self.mac, now) {
            Ok(c) => c,
            Err(CookieError::Invalid) => {
                self.stats.bad_cookies += 1;
                return;
            }
            Err(CookieError::Stale { by, peer_tag }) => {
                let staleness_us = u32::try_from(by.as_micros()).unwrap_or(u32::MAX);
                let mut p = Packet::new(packet.dst_port, packet.src_port, peer_tag);
                p.chunks.push(Chunk::Error { causes: vec![ErrorCause::StaleCookie { staleness_us }] });
                self.push_stateless(Some(local), remote, p);
                return;
            }
        };
        if packet.verification_tag != cookie.local_tag {
            return;
        }
        // The cookie went to the INIT's source address (listed first in it): echoed from any
        // other address it is someone else's, and would let a spoofer open or restart
        // associations at addresses that never asked (RFC 9260 §5.1.5 binds it to its INIT).
        let issued_to = cookie.peer_addresses.first().map(|ip| ip.to_canonical());
        if issued_to != Some(remote.ip().to_canonical()) {
            self.stats.bad_cookies += 1;
            return;
        }
        packet.chunks.remove(0);
        let existing = self.by_address.get(&(remote, packet.src_port)).copied();
        if let Some(h) = existing {
            let restart = match self.associations.get_mut(&h) {
                Some(a) if a.my_tag == cookie.local_tag => {
                    a.on_own_cookie(now, &cookie);
                    a.handle_packet(now, local, remote, packet.clone(), size);
                    false
                }
                // A restart (case A of §5.2.4) only with a cookie issued while this association
                // existed: its tie-tags are the association's tags. Otherwise (case C, or an
                // old cookie replayed) it is silently discarded.
                Some(a) if a.peer_tag != cookie.peer_tag && cookie.tie_tags == (a.my_tag, a.peer_tag) => {
                    a.abort("peer restarted");
                    true
                }
                _ => false,
            };
            self.after(AssociationHandle(h));
            if !restart {
                return;
            }
        }
        if !self.room_for(remote.ip()) {
            return;
        }
        let handle = self.new_handle();
        let seed = self.next_seed();
        let mut a = Association::from_cookie(self.shared(), seed, local, remote, packet.src_port, &cookie);
        a.handle_packet(now, local, remote, packet, size);
        a.flush(now);
        self.stats.associations_opened += 1;
        self.associations.insert(handle.0, a);
        self.after(handle);
    }

    /// RFC 9260 §8.4: answers to packets no association claims.
    fn answer_out_of_the_blue(&mut self, remote: SocketAddr, local: SocketAddr, packet: &Packet) {
        let vtag = packet.verification_tag;
        let reply = |chunk: Chunk| {
            let mut p = Packet::new(packet.dst_port, packet.src_port, vtag);
            p.chunks.push(chunk);
            p
        };
        let mut saw_shutdown_ack = false;
        for c in &packet.chunks {
            match c {
                // Never answer these, or two endpoints could ping-pong forever.
                Chunk::Abort { .. }
                | Chunk::ShutdownComplete { .. }
                | Chunk::Error { .. }
                | Chunk::CookieAck => return,
                Chunk::ShutdownAck => saw_shutdown_ack = true,
                _ => {}
            }
        }
        if !self.ootb_answer_allowed() {
            return;
        }
        if saw_shutdown_ack {
            self.push_stateless(Some(local), remote, reply(Chunk::ShutdownComplete { t_bit: true }));
            return;
        }
        self.stats.aborts_sent += 1;
        self.push_stateless(Some(local), remote, reply(Chunk::Abort { t_bit: true, causes: Vec::new() }));
    }

    /// Whether an answer to an out-of-the-blue packet may go now. Every such answer is a
    /// packet we send for a packet anyone can forge, so they share one token bucket; the rest
    /// are counted and dropped silently, as §8.4 allows for packets no association claims.
    fn ootb_answer_allowed(&mut self) -> bool {
        let now = self.now_hint;
        let allowed = self.ootb_bucket.as_mut().is_none_or(|bucket| bucket.take(now));
        if !allowed {
            self.stats.ootb_answers_suppressed += 1;
        }
        allowed
    }

    /// An answer to one of our path-cookie INITs.
    fn on_probe_answer(&mut self, packet: &Packet, local: SocketAddr, remote: SocketAddr) -> bool {
        let Some(i) = self.probes.iter().position(|p| {
            p.tag == packet.verification_tag && p.remote == remote && p.local.ip() == local.ip()
        }) else {
            return false;
        };
        let probe = self.probes.swap_remove(i);
        for c in &packet.chunks {
            match c {
                Chunk::Error { causes } => {
                    for cause in causes {
                        if let ErrorCause::AltCookieRequired(cookie) = cause {
                            if !cookie.is_empty() && cookie.len() <= MAX_ALT_COOKIE {
                                self.events.push_back((
                                    probe.handle,
                                    Event::AltCookie {
                                        server: remote,
                                        local: Some(probe.local),
                                        cookie: cookie.clone(),
                                    },
                                ));
                            }
                        }
                    }
                }
                Chunk::InitAck(ack) => {
                    // The server opened (or offered) an association we do not want on this path.
                    let mut p = Packet::new(packet.dst_port, packet.src_port, ack.initiate_tag);
                    p.chunks.push(Chunk::Abort { t_bit: false, causes: Vec::new() });
                    self.push_stateless(Some(probe.local), remote, p);
                }
                _ => {}
            }
        }
        true
    }

    /// Bookkeeping after an association was touched: events, address map, path probes, removal.
    fn after(&mut self, handle: AssociationHandle) {
        let Some(a) = self.associations.get_mut(&handle.0) else { return };
        let mut opened = false;
        while let Some(e) = a.events.pop_front() {
            if matches!(e, Event::Connected { .. }) {
                opened = true;
            }
            self.events.push_back((handle, e));
        }
        if opened && a.is_client_side() {
            self.stats.associations_opened += 1;
        }
        let want_probes = std::mem::take(&mut a.wants_path_cookies);
        let keys: Vec<(SocketAddr, u16)> = a.peer_addresses().map(|r| (r, a.remote_port)).collect();
        let closed = a.is_closed();
        let my_tag = a.my_tag;
        if closed {
            // Its last packets (SHUTDOWN-COMPLETE, ABORT) still go out.
            self.stateless.extend(a.out.drain(..));
        }
        if want_probes {
            self.start_path_probes(handle);
        }
        if let Some(old) = self.registered.remove(&handle.0) {
            for k in old {
                if self.by_address.get(&k) == Some(&handle.0) {
                    self.by_address.remove(&k);
                }
            }
        }
        if self.by_tag.get(&my_tag) == Some(&handle.0) {
            self.by_tag.remove(&my_tag);
        }
        if closed {
            if let Some(a) = self.associations.remove(&handle.0) {
                if self.ended.len() >= ENDED_KEPT {
                    self.ended.pop_front();
                }
                self.ended.push_back((handle, a.info()));
            }
            self.probes.retain(|p| p.handle != handle);
            return;
        }
        for k in &keys {
            self.by_address.insert(*k, handle.0);
        }
        self.registered.insert(handle.0, keys);
        self.by_tag.insert(my_tag, handle.0);
    }

    fn start_path_probes(&mut self, handle: AssociationHandle) {
        if !self.config.fetch_path_cookies || self.config.extra_local_addresses.is_empty() {
            return;
        }
        let Some(a) = self.associations.get(&handle.0) else { return };
        let (local_port, remote_port) = a.ports();
        let remote = a.remote();
        let local_udp_port = a.local().map_or(crate::UDP_ENCAPSULATION_PORT, |l| l.port());
        let primary_ip = a.local().map(|l| l.ip());
        let deadline_step = a.rto();
        let mut new = Vec::new();
        for ip in self.config.extra_local_addresses.clone() {
            if Some(ip) == primary_ip {
                continue;
            }
            let tag = nonzero_u32(&mut self.rng);
            let init = InitChunk {
                initiate_tag: tag,
                a_rwnd: self.config.receive_window,
                outbound_streams: self.config.streams_out,
                inbound_streams: self.config.streams_in,
                initial_tsn: self.rng.next_u32(),
                params: vec![Param::AltCookie(Vec::new())],
            };
            let mut p = Packet::new(local_port, remote_port, 0);
            p.chunks.push(Chunk::Init(init));
            new.push(PathProbe {
                handle,
                local: SocketAddr::new(ip, local_udp_port),
                remote,
                packet: p.encode(),
                tag,
                deadline: Instant::ZERO,
                attempts: 0,
            });
        }
        for mut probe in new {
            self.fire_probe(&mut probe, deadline_step);
            self.probes.push(probe);
        }
    }

    fn fire_probe(&mut self, probe: &mut PathProbe, rto: std::time::Duration) {
        probe.attempts += 1;
        probe.deadline = self.now_hint + rto.saturating_mul(1 << probe.attempts.min(6));
        self.stateless.push_back(Transmit {
            src: Some(probe.local),
            dst: probe.remote,
            payload: probe.packet.clone(),
        });
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.now_hint = self.now_hint.max(now);
        let t = self
            .stateless
            .pop_front()
            .or_else(|| self.associations.values_mut().find_map(|a| a.out.pop_front()))?;
        self.stats.datagrams_out += 1;
        self.stats.bytes_out += t.payload.len() as u64;
        Some(t)
    }

    fn run_pending(&mut self, now: Instant) {
        let pending: Vec<u64> =
            self.associations.iter().filter(|(_, a)| a.user_pending).map(|(h, _)| *h).collect();
        for h in pending {
            if let Some(a) = self.associations.get_mut(&h) {
                a.run_pending(now);
            }
            self.after(AssociationHandle(h));
        }
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.associations.values().any(|a| a.user_pending) {
            return Some(self.now_hint);
        }
        let assoc = self.associations.values().filter_map(Association::poll_timeout).min();
        let probe = self.probes.iter().map(|p| p.deadline).min();
        [assoc, probe].into_iter().flatten().min()
    }

    /// Deadlines up to `now` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now_hint = self.now_hint.max(now);
        self.run_pending(now);
        let due: Vec<u64> = self
            .associations
            .iter()
            .filter(|(_, a)| a.poll_timeout().is_some_and(|t| t <= now))
            .map(|(h, _)| *h)
            .collect();
        for h in due {
            if let Some(a) = self.associations.get_mut(&h) {
                a.handle_timeout(now);
            }
            self.after(AssociationHandle(h));
        }
        let mut probes = std::mem::take(&mut self.probes);
        probes.retain(|p| p.deadline > now || p.attempts < PROBE_ATTEMPTS);
        let rto = self.config.rto_initial;
        for p in probes.iter_mut().filter(|p| p.deadline <= now) {
            self.fire_probe(p, rto);
        }
        self.probes = probes;
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<(AssociationHandle, Event)> {
        self.events.pop_front()
    }

    /// Queues a user message. It is packed and sent at the next [`Endpoint::poll_transmit`] or
    /// [`Endpoint::handle_timeout`] (the calls that bring the time; [`Endpoint::poll_timeout`]
    /// says "now" while such work waits). Before the association is open it waits and goes out
    /// behind the COOKIE-ECHO or after the alternative INIT-ACK.
    pub fn send(&mut self, handle: AssociationHandle, msg: Message) -> Result<(), Error> {
        let a = self.associations.get_mut(&handle.0).ok_or(Error::UnknownAssociation)?;
        a.send_message(msg)
    }

    /// Sets the reliability of messages queued on our outgoing `stream` from now on (RFC 3758,
    /// as a WebRTC data channel's type asks: RFC 8831 §6.1); a message keeps the reliability it
    /// was queued with. It is honoured once both sides announced partial reliability
    /// ([`Config::partial_reliability`], [`AssociationInfo::partial_reliability`]); otherwise
    /// every message is carried reliably. A message abandoned is never delivered, and ordered
    /// messages after it on the stream are delivered without it.
    ///
    /// Fails with [`Error::InvalidStream`] for a stream not below the outbound streams.
    pub fn set_stream_reliability(
        &mut self,
        handle: AssociationHandle,
        stream: u16,
        reliability: Reliability,
    ) -> Result<(), Error> {
        let a = self.associations.get_mut(&handle.0).ok_or(Error::UnknownAssociation)?;
        a.set_stream_reliability(stream, reliability)
    }

    /// Resets our outgoing `streams` (RFC 6525 §5.1.2): their stream sequence numbers start
    /// again at 0, as WebRTC closes a data channel (RFC 8831 §6.7). Each stream takes no new
    /// message ([`Error::StreamResetPending`]) until [`Event::OutgoingStreamsReset`] reports the
    /// peer's answer; the peer delivers everything sent on it before the reset first. The
    /// request goes once the messages queued on the streams have been sent, one request at a
    /// time: streams asked for meanwhile go together in the next. An empty list does nothing.
    /// Like [`Endpoint::send`], it takes effect at the next call that brings the time.
    ///
    /// Fails with [`Error::StreamResetUnsupported`] unless both sides announced stream reset
    /// ([`Config::stream_reset`]) and the association is open, [`Error::InvalidStream`] for a
    /// stream not below the negotiated outbound streams, and [`Error::Closing`] once it shuts
    /// down.
    pub fn reset_streams(&mut self, handle: AssociationHandle, streams: &[u16]) -> Result<(), Error> {
        let a = self.associations.get_mut(&handle.0).ok_or(Error::UnknownAssociation)?;
        a.reset_streams(streams)
    }

    /// Graceful shutdown once all queued data is acknowledged; `Event::Closed` follows. Like
    /// [`Endpoint::send`], it takes effect at the next call that brings the time.
    pub fn shutdown(&mut self, handle: AssociationHandle) {
        if let Some(a) = self.associations.get_mut(&handle.0) {
            a.shutdown();
        }
        self.after(handle);
    }

    /// Sends ABORT and forgets the association; `Event::Aborted` follows.
    pub fn abort(&mut self, handle: AssociationHandle) {
        if let Some(a) = self.associations.get_mut(&handle.0) {
            a.abort("user request");
        }
        self.after(handle);
    }

    /// A snapshot of an association.
    pub fn association(&self, handle: AssociationHandle) -> Option<AssociationInfo> {
        self.associations.get(&handle.0).map(Association::info)
    }

    /// The last snapshot of an association that has ended (closed, aborted or failed), for a
    /// summary written after its last event; the most recent few are kept.
    pub fn ended_association(&self, handle: AssociationHandle) -> Option<AssociationInfo> {
        self.ended.iter().rev().find(|(h, _)| *h == handle).map(|(_, info)| info.clone())
    }

    /// Handles of the associations alive now.
    pub fn associations(&self) -> Vec<AssociationHandle> {
        self.associations.keys().map(|h| AssociationHandle(*h)).collect()
    }

    /// Whether `tag` is our verification tag of an association here: a driver running several
    /// endpoints on one port passes packets with a tag none of its own knows to the one that has it.
    pub fn knows_tag(&self, tag: u32) -> bool {
        self.by_tag.contains_key(&tag)
    }

    /// Makes `key` the current cookie key (state cookies and ALT-COOKIEs); cookies signed under
    /// the previous key still verify, older ones do not. This is the ALT-COOKIE's lifetime.
    pub fn rotate_cookie_key(&mut self, key: [u8; 16]) {
        self.mac.rotate(key);
    }

    /// How many times the cookie key was rotated (modulo 256: the epoch byte every cookie
    /// carries).
    pub fn cookie_key_epoch(&self) -> u8 {
        self.mac.epoch()
    }

    /// Endpoint counters.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            receive_buffered: self.budget.used() as u64,
            receive_buffered_peak: self.budget.peak() as u64,
            ..self.stats
        }
    }
}

fastshake_core::sans_io_by_inherent_methods!(Endpoint);
