//! The server side: the routing of each datagram ([`route`]), stateless cookies and new
//! handshakes ([`hello`], RFC 6347 §4.2.1), and a bounded table of connections found by Connection
//! ID, own socket or client address. Output stays in each connection until the driver polls it,
//! so a session given its own socket after it was accepted sends everything from there.

mod cid;
mod early13;
mod hello;
mod hello13;
mod incoming;
mod index;

pub(crate) use hello13::{hello_retry_request, CookieState};
mod route;

pub use incoming::Incoming;
mod shared;
mod slots;

use crate::config::{RetransmitPolicy, ServerConfig};
use crate::connection::{Connection, EndpointEvent, Event};
use crate::error::Error;
use crate::rtt::RttCache;
pub use early13::EarlyDataRegister;
use fastshake_core::{CookieMac, Instant, Transmit};
use hello::PartialHello;
use index::{AddrIndex, CidIndex};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Where decrypted application data goes: queued as events when `None`.
type EndpointDataSink<'a> = Option<&'a mut dyn FnMut(ConnectionHandle, &[u8])>;

/// Names one connection of an [`Endpoint`]. Handles are never reused; a later one names a
/// connection created later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(u64);

impl std::fmt::Display for ConnectionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Counters of an endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Cookie exchanges started with no state kept: HelloVerifyRequests (1.2), and
    /// HelloRetryRequests carrying a cookie (1.3).
    pub hello_verify_sent: u64,
    /// ClientHellos whose cookie did not verify.
    pub cookies_rejected: u64,
    /// Connections in the table now.
    pub connections_open: u64,
    /// Connections created since the start.
    pub connections_accepted: u64,
    /// ClientHellos refused without a session: the table was full, or (1.3) no version, suite
    /// or group in common (see [`Endpoint::poll_refusal`]).
    pub connections_refused: u64,
    /// Connections replaced by a new handshake from the same address (RFC 6347 §4.2.8).
    pub connections_replaced: u64,
    /// Datagrams dropped before reaching a connection (unparsable, unknown peer, ...).
    pub datagrams_dropped: u64,
    /// Replacement handshakes (a new ClientHello on the address of an established session)
    /// abandoned before they completed; the established session was kept.
    pub replacements_abandoned: u64,
    /// Half-open handshakes removed to make room for newer ones (oldest first).
    pub handshakes_evicted: u64,
    /// Established sessions closed after `idle_timeout` without an authenticated datagram.
    pub sessions_expired: u64,
    /// Established sessions closed with close_notify to give their slot to a new client
    /// (`ServerConfig::max_sessions`, `WhenFull::Lru` or `WhenFull::Idlest`).
    pub sessions_evicted: u64,
    /// Clients with a valid cookie refused with a fatal internal_error alert because every
    /// session slot was taken.
    pub slot_refusals: u64,
    /// Partial (fragmented) ClientHellos dropped before completion: stale, or evicted for newer
    /// ones. A high count means a flood of first fragments.
    pub partial_hellos_dropped: u64,
    /// Stateless refusals not queued for [`Endpoint::poll_refusal`] because
    /// [`MAX_QUEUED_REFUSALS`] were waiting (a flood of hellos that cannot be served).
    pub refusals_dropped: u64,
}

/// Refusals [`Endpoint::poll_refusal`] keeps at most until polled; later ones are only counted
/// ([`EndpointStats::refusals_dropped`]), so a flood costs no memory.
pub const MAX_QUEUED_REFUSALS: usize = 64;

/// A DTLS 1.3 ClientHello refused before any session existed: the endpoint sent a fatal
/// alert in a plaintext record and kept nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloRefusal {
    /// The address the ClientHello came from, unproven: no cookie exchange came first.
    pub remote: SocketAddr,
    /// What the client's offer and our configuration did not share.
    pub reason: crate::error::Mismatch,
    /// The fatal alert sent.
    pub alert: crate::alert::AlertDescription,
}

/// The server side of DTLS.
pub struct Endpoint {
    /// The configuration, and as the connections keep it: one pointer each, to one allocation.
    role: crate::connection::ServerRole,
    cookie: CookieMac,
    rng: ChaCha20Rng,
    /// Ordered so that timers and output run in a reproducible order. Boxed, so the tree's
    /// spare slots cost a pointer rather than a whole connection; the box also holds the
    /// endpoint's bookkeeping for the connection, so that costs no tree entries of its own.
    connections: BTreeMap<ConnectionHandle, Box<Slot>>,
    by_addr: AddrIndex,
    /// A new handshake from the address of an established session. The established session is
    /// kept until this one completes (RFC 6347 §4.2.8: a replayed ClientHello with a valid
    /// cookie proves nothing, a completed handshake does).
    pending: BTreeMap<SocketAddr, ConnectionHandle>,
    /// Cookies are bound to a time slot of half this length and accepted for the current and
    /// the previous slot, so a cookie is never accepted once it is older than this.
    cookie_lifetime: Duration,
    /// Connections still handshaking, by id (ids grow, so the first is the oldest), with the
    /// client's IP address.
    half_open: BTreeMap<ConnectionHandle, IpAddr>,
    half_open_per_ip: BTreeMap<IpAddr, usize>,
    /// When established sessions are next scanned for idle expiry. One endpoint-wide timer
    /// rather than an entry per session in `timers`: a session costs no timer memory.
    idle_sweep: Option<Instant>,
    /// The latest time the driver gave us (for calls that take no time, e.g. `send`).
    clock: Instant,
    next_id: u64,
    /// Who has datagrams for `poll_transmit`, in the order they became ready: answers sent
    /// without a connection (HelloVerifyRequests), and connections, which keep their datagrams
    /// until polled (so a socket given to a session applies to all it has not sent yet).
    output: VecDeque<Output>,
    /// Sessions with their own socket (`set_local`, `move_to`), by that socket's address.
    /// Empty (no allocation) unless sessions have one.
    by_local: BTreeMap<SocketAddr, ConnectionHandle>,
    /// Sessions with a Connection ID we issued (RFC 9146), by that CID. Empty unless CIDs are on.
    by_cid: CidIndex,
    /// Leading bytes of every CID we issue (see [`Endpoint::set_cid_prefix`]); the rest is random.
    cid_prefix: Box<[u8]>,
    events: VecDeque<(ConnectionHandle, Event)>,
    partial_hellos: VecDeque<PartialHello>,
    /// Deadlines of the connections that have one, earliest first, so timers cost O(log n)
    /// rather than a scan of every session. Each connection's entry is also in its `Slot`.
    timers: BTreeSet<(Instant, ConnectionHandle)>,
    stats: EndpointStats,
    /// The ticket keys in use (from the configuration, then rotated).
    ticket_keys: Option<crate::session::TicketKeys>,
    /// Sessions resumable by ID.
    session_cache: crate::session::SessionCache,
    /// Round trips to clients (adaptive retransmission policy).
    rtt_cache: RttCache,
    /// Client chains by client-certificate ticket (seed 003).
    client_cert_cache: crate::cache::SharedClientCertCache,
    /// The session-ID cache a fleet shares through the driver's store (off unless asked).
    shared: shared::SharedSessions,
    /// DTLS 1.3 ClientHellos whose early data was taken (each once).
    replay13: Arc<early13::EarlyDataRegister>,
    /// Stateless refusals not yet polled, at most [`MAX_QUEUED_REFUSALS`].
    refusals: VecDeque<HelloRefusal>,
}

/// Something `poll_transmit` hands out next.
enum Output {
    /// A datagram sent without a connection.
    Stateless(Transmit),
    /// A connection with datagrams (it may have none left when its turn comes).
    Connection(ConnectionHandle),
}

/// A connection with the endpoint's bookkeeping for it.
struct Slot {
    conn: Connection,
    /// When the session last received a datagram it could authenticate and was last used;
    /// meaningful once established (reset then), ignored before.
    activity: Activity,
    /// The deadline filed in `Endpoint::timers`; `Instant::MAX` when none is (a sentinel
    /// rather than an `Option`, which would cost every session 8 bytes).
    deadline: Instant,
}

impl Slot {
    fn new(conn: Connection, now: Instant) -> Box<Slot> {
        Box::new(Slot { conn, activity: Activity { last: now, last_used: now }, deadline: Instant::MAX })
    }

    /// The session's activity once it is established.
    fn established_activity(&self) -> Option<Activity> {
        Some(self.activity).filter(|_| self.conn.is_established())
    }
}

/// When an established session last heard from its peer and was last used.
#[derive(Clone, Copy, Debug)]
struct Activity {
    /// The last datagram that authenticated (idle expiry, `WhenFull::Idlest`).
    last: Instant,
    /// The last application record sent or received, or the handshake's completion
    /// (`WhenFull::Lru`).
    last_used: Instant,
}

impl Endpoint {
    /// A server with `config`; `rng_seed` seeds the first cookie key and every connection's
    /// randomness. A configuration that cannot work ([`ServerConfig::validate`]) is refused.
    pub fn new(config: Arc<ServerConfig>, rng_seed: [u8; 32]) -> Result<Endpoint, Error> {
        config.validate()?;
        let config_clone = config.clone();
        let mut rng = ChaCha20Rng::from_seed(rng_seed);
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        // The early-data register's origin from a stream of its own: the endpoint's other
        // random values stay what the seed gave them before.
        let mut origin_rng = ChaCha20Rng::from_seed(rng_seed);
        origin_rng.set_stream(1);
        let mut origin = [0u8; 8];
        origin_rng.fill_bytes(&mut origin);
        // The address index's hash key, from a third stream for the same reason.
        let mut index_rng = ChaCha20Rng::from_seed(rng_seed);
        index_rng.set_stream(2);
        let by_addr = AddrIndex::new(index_rng.next_u64(), index_rng.next_u64());
        Ok(Endpoint {
            role: crate::connection::ServerRole::new(config),
            cookie: CookieMac::new(key),
            rng,
            connections: BTreeMap::new(),
            by_addr,
            pending: BTreeMap::new(),
            cookie_lifetime: config_clone.effective_cookie_lifetime(),
            half_open: BTreeMap::new(),
            half_open_per_ip: BTreeMap::new(),
            idle_sweep: None,
            clock: Instant::ZERO,
            next_id: 0,
            output: VecDeque::new(),
            by_local: BTreeMap::new(),
            by_cid: CidIndex::default(),
            cid_prefix: Box::default(),
            events: VecDeque::new(),
            partial_hellos: VecDeque::new(),
            timers: BTreeSet::new(),
            stats: EndpointStats::default(),
            ticket_keys: config_clone.tickets.clone(),
            session_cache: crate::session::SessionCache::new(config_clone.session_cache),
            rtt_cache: RttCache::new(config_clone.rtt_cache_entries),
            client_cert_cache: crate::cache::SharedClientCertCache::new(config_clone.client_cert_cache),
            shared: shared::SharedSessions::default(),
            replay13: Arc::new(early13::EarlyDataRegister::new(origin)),
            refusals: VecDeque::new(),
        })
    }

    /// The client chain a ClientHello's client-certificate ticket names, taken out of the cache:
    /// a ticket opens its entry once, so a replayed ClientHello finds nothing.
    fn take_cached_client_chain(
        &mut self,
        ch: &crate::handshake::ClientHello<'_>,
    ) -> Option<([u8; crate::cache::CLIENT_TICKET_LEN], crate::cache::CachedClientChain)> {
        let data = ch.extensions.client_cert_cache?;
        let ticket = crate::handshake::parse_client_cert_offer(data).ok()??;
        let ticket: [u8; crate::cache::CLIENT_TICKET_LEN] = ticket.try_into().ok()?;
        self.client_cert_cache.lock().take(&ticket).map(|entry| (ticket, entry))
    }

    /// Client chains held for client-certificate caching, and their bytes.
    pub fn client_cert_cache_size(&self) -> (usize, usize) {
        let cache = self.client_cert_cache.lock();
        (cache.len(), cache.bytes())
    }

    /// Keeps client chains in `cache`, which other endpoints (the workers of one server) share,
    /// instead of a cache of this endpoint's own.
    pub fn share_client_cert_cache(&mut self, cache: crate::cache::SharedClientCertCache) {
        self.client_cert_cache = cache;
    }

    /// Takes DTLS 1.3 early data through `register`, which other endpoints (the workers of one
    /// server) share, instead of a register of this endpoint's own: tickets any of them issued
    /// carry early data to all, and each ClientHello's is taken once among them.
    pub fn share_early_data_register(&mut self, register: Arc<EarlyDataRegister>) {
        self.replay13 = register;
    }

    /// Makes `key` the current ticket key; the current one stays valid as the previous one.
    /// Does nothing when the configuration has tickets disabled.
    pub fn rotate_ticket_key(&mut self, key: crate::session::TicketKey) {
        if let Some(keys) = self.ticket_keys.as_mut() {
            keys.rotate(key);
        }
    }

    /// Every Connection ID this endpoint issues from now on starts with `prefix` (cut to the
    /// configured CID length), then random bytes. A driver running several endpoints on one
    /// address gives each its own prefix, so the first bytes of a `tls12_cid` record name the
    /// endpoint that holds the session wherever the datagram arrives (RFC 9146 leaves the CID's
    /// content to its issuer). The random part must stay long enough to be unguessable.
    pub fn set_cid_prefix(&mut self, prefix: &[u8]) {
        self.cid_prefix = prefix.into();
    }

    /// A datagram arrived at `local` from `remote`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        let incoming = self.incoming(datagram);
        self.handle(now, local, remote, incoming, None);
    }

    /// [`Endpoint::handle_datagram`] for a datagram read with [`Endpoint::incoming`] (a driver
    /// that looked at its Connection ID first).
    pub fn handle_incoming(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        incoming: Incoming<'_>,
    ) {
        self.handle(now, local, remote, incoming, None);
    }

    /// Like `handle_incoming`, but application data of an established session is decrypted in
    /// place and handed to `on_data` (no allocation per record).
    pub fn open_in_place(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        incoming: Incoming<'_>,
        on_data: &mut dyn FnMut(ConnectionHandle, &[u8]),
    ) {
        self.handle(now, local, remote, incoming, Some(on_data));
    }

    fn handle(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        incoming: Incoming<'_>,
        on_data: EndpointDataSink<'_>,
    ) {
        self.clock = self.clock.max(now);
        let route = self.route(now, local, remote, &incoming);
        self.dispatch(now, local, remote, incoming, route, on_data);
    }

    /// The length of the Connection IDs we issue (0: none), which `tls12_cid` records to us carry.
    fn cid_len(&self) -> u8 {
        self.role.config.mobility.connection_id.unwrap_or(0)
    }

    /// Ends connection `h` because a newer handshake from its address replaces it.
    fn supersede(&mut self, h: ConnectionHandle) {
        let Some(mut slot) = self.remove_connection(h) else { return };
        let conn = &mut slot.conn;
        conn.fail_superseded();
        while let Some(e) = conn.poll_event() {
            self.events.push_back((h, e));
        }
    }

    /// Takes connection `h` out of every table; what it still had to send goes out without it.
    fn remove_connection(&mut self, h: ConnectionHandle) -> Option<Box<Slot>> {
        let mut slot = self.connections.remove(&h)?;
        while let Some(t) = slot.conn.poll_transmit(self.clock) {
            self.push_stateless(t);
        }
        let remote = slot.conn.remote();
        for cid in slot.conn.own_connection_ids() {
            self.by_cid.remove(cid, h);
        }
        if !self.by_local.is_empty() {
            self.by_local.retain(|_, owner| *owner != h);
        }
        if slot.deadline != Instant::MAX {
            self.timers.remove(&(slot.deadline, h));
        }
        self.forget_half_open(h);
        if self.by_addr.remove(&remote, h) {
            // The handshake waiting to replace it takes the address over.
            if let Some(new) = self.pending.remove(&remote) {
                self.by_addr.insert(remote, new, &self.connections);
            }
        }
        if self.pending.get(&remote) == Some(&h) {
            self.pending.remove(&remote);
            self.stats.replacements_abandoned += 1;
        }
        Some(slot)
    }

    fn forget_half_open(&mut self, h: ConnectionHandle) {
        let Some(ip) = self.half_open.remove(&h) else { return };
        if let Some(n) = self.half_open_per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.half_open_per_ip.remove(&ip);
            }
        }
    }

    fn push_stateless(&mut self, t: Transmit) {
        self.output.push_back(Output::Stateless(t));
    }

    /// Files connection `h`'s deadline in the endpoint's timer tree.
    fn set_deadline(&mut self, h: ConnectionHandle, deadline: Option<Instant>) {
        let Some(slot) = self.connections.get_mut(&h) else { return };
        let deadline = deadline.unwrap_or(Instant::MAX);
        let old = std::mem::replace(&mut slot.deadline, deadline);
        if old == deadline {
            return;
        }
        if old != Instant::MAX {
            self.timers.remove(&(old, h));
        }
        if deadline != Instant::MAX {
            self.timers.insert((deadline, h));
        }
    }

    /// After connection `h` handled something: its output's turn, its events for the
    /// application, what it told the endpoint (handled as each happened), and its next deadline.
    fn after(&mut self, h: ConnectionHandle) {
        let Some(slot) = self.connections.get_mut(&h) else { return };
        let conn = &mut slot.conn;
        if conn.has_output() && !matches!(self.output.back(), Some(Output::Connection(last)) if *last == h) {
            self.output.push_back(Output::Connection(h));
        }
        while let Some(e) = conn.poll_event() {
            self.events.push_back((h, e));
        }
        while let Some(event) = self.connections.get_mut(&h).and_then(|s| s.conn.poll_endpoint_event()) {
            if !self.handle_event(h, event) {
                return;
            }
        }
        let deadline = self.connections.get(&h).and_then(|s| s.conn.poll_timeout());
        self.set_deadline(h, deadline);
    }

    /// One event of connection `h`; false once the connection is gone.
    fn handle_event(&mut self, h: ConnectionHandle, event: EndpointEvent) -> bool {
        let now = self.clock;
        match event {
            EndpointEvent::Established { rtt } => {
                let Some(slot) = self.connections.get_mut(&h) else { return false };
                let remote = slot.conn.remote();
                slot.activity = Activity { last: now, last_used: now };
                if let (Some(rtt), RetransmitPolicy::Adaptive { .. }) = (rtt, self.role.config.retransmit) {
                    self.rtt_cache.insert(remote.ip(), rtt);
                }
                if let (None, Some(idle)) = (self.idle_sweep, self.role.config.idle_timeout) {
                    self.idle_sweep = Some(now + idle);
                }
                self.forget_half_open(h);
                if self.pending.get(&remote) == Some(&h) {
                    // The client completed a new handshake from this address: it is the peer now.
                    self.pending.remove(&remote);
                    if let Some(old) = self.by_addr.insert(remote, h, &self.connections) {
                        self.supersede(old);
                        self.stats.connections_replaced += 1;
                    }
                }
            }
            EndpointEvent::NewSession { id, session } => {
                self.shared.offer(self.ticket_keys.as_ref(), &mut self.rng, id, &session);
                self.session_cache.insert(id, session);
            }
            EndpointEvent::ClientChain { ticket, chain } => {
                self.client_cert_cache.lock().insert(ticket, chain);
            }
            EndpointEvent::Moved { from, to } => {
                // The session follows its client: so does the address index.
                self.by_addr.remove(&from, h);
                if self.by_addr.get(&to, &self.connections).is_none() {
                    self.by_addr.insert(to, h, &self.connections);
                }
            }
            EndpointEvent::Ended => {
                self.remove_connection(h);
                return false;
            }
            EndpointEvent::ConnectionIdsRequested(count) => self.answer_cid_request(h, count),
            EndpointEvent::ConnectionIdRetired(cid) => {
                self.by_cid.remove(&cid, h);
            }
        }
        true
    }

    /// The next datagram to send: answers and connections' datagrams in the order they became
    /// ready, each connection's datagrams together.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        while let Some(next) = self.output.pop_front() {
            match next {
                Output::Stateless(t) => return Some(t),
                Output::Connection(h) => {
                    let Some(slot) = self.connections.get_mut(&h) else { continue };
                    let Some(t) = slot.conn.poll_transmit(now) else { continue };
                    if slot.conn.has_output() {
                        self.output.push_front(Output::Connection(h));
                    }
                    return Some(t);
                }
            }
        }
        if self.output.capacity() > 64 {
            self.output = VecDeque::new();
        }
        None
    }

    /// The earliest deadline of any connection.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.timers.first().map(|(t, _)| *t);
        match (timer, self.idle_sweep) {
            (Some(t), Some(s)) => Some(t.min(s)),
            (t, s) => t.or(s),
        }
    }

    /// Runs the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        while let Some(&(t, h)) = self.timers.first() {
            if t > now {
                break;
            }
            // Forget the entry first: after() files the connection's next deadline.
            self.timers.remove(&(t, h));
            if let Some(slot) = self.connections.get_mut(&h) {
                let slot: &mut Slot = slot;
                slot.deadline = Instant::MAX;
                slot.conn.handle_timeout(now);
            }
            self.after(h);
        }
        if self.idle_sweep.is_some_and(|t| now >= t) {
            self.sweep_idle(now);
        }
    }

    /// Closes the established sessions silent for the idle timeout, and files the next scan at
    /// the earliest expiry left, but at most 64 scans per idle period: a session is closed
    /// between `idle` and `idle` × (1 + 1/64) after its last authenticated datagram.
    fn sweep_idle(&mut self, now: Instant) {
        self.idle_sweep = None;
        let Some(idle) = self.role.config.idle_timeout else { return };
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        for (&h, slot) in &self.connections {
            // A session that still keeps its last handshake flight has not heard that the client
            // got it (the client may be waiting out its retransmission timer, whose gaps grow
            // past any idle limit): it is not idle until the handshake state goes.
            let Some(activity) = slot.established_activity() else { continue };
            let expiry = if slot.conn.holds_handshake_state() {
                // Looked at again one idle period on, when the state may have gone.
                now + idle
            } else {
                activity.last + idle
            };
            if now >= expiry {
                expired.push(h);
            } else {
                next = Some(next.map_or(expiry, |t| t.min(expiry)));
            }
        }
        for h in expired {
            if let Some(slot) = self.connections.get_mut(&h) {
                slot.conn.close();
                self.stats.sessions_expired += 1;
                self.events.push_back((h, Event::Failed(Error::IdleTimeout { idle })));
            }
            self.after(h);
        }
        self.idle_sweep = next.map(|t| t.max(now + idle / 64));
    }

    /// The next event of any connection.
    pub fn poll_event(&mut self) -> Option<(ConnectionHandle, Event)> {
        self.events.pop_front()
    }

    /// The next ClientHello refused without a session (DTLS 1.3: no common version, suite or
    /// group), oldest first; a server logs them, as it does the sessions' `Event::Failed`.
    /// At most [`MAX_QUEUED_REFUSALS`] wait; the rest are counted in
    /// [`EndpointStats::refusals_dropped`].
    pub fn poll_refusal(&mut self) -> Option<HelloRefusal> {
        self.refusals.pop_front()
    }

    /// Keeps a stateless refusal for `poll_refusal`, or counts it when the queue is full.
    fn note_refusal(&mut self, refusal: HelloRefusal) {
        if self.refusals.len() < MAX_QUEUED_REFUSALS {
            self.refusals.push_back(refusal);
        } else {
            self.stats.refusals_dropped += 1;
        }
    }

    /// Queues application data on connection `h`. For `WhenFull::Lru` the send is dated by the
    /// latest time the endpoint was given: a driver calls `handle_timeout(now)` first.
    pub fn send(&mut self, h: ConnectionHandle, data: &[u8]) -> Result<(), Error> {
        let now = self.clock;
        let slot = self.connections.get_mut(&h).ok_or(Error::UnknownConnection)?;
        let r = slot.conn.send(data);
        if r.is_ok() {
            slot.activity.last_used = now;
        }
        self.after(h);
        r
    }

    /// Writes one datagram holding one application record of `data` for connection `h` into
    /// `out` (a buffer the driver owns) and returns its length: no queue, no allocation. The
    /// datagram goes to the connection's peer address
    /// ([`Connection::remote`] of [`Endpoint::connection`]), from its own socket if it has one
    /// ([`Connection::local`]).
    pub fn seal_into(&mut self, h: ConnectionHandle, data: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let now = self.clock;
        let slot = self.connections.get_mut(&h).ok_or(Error::UnknownConnection)?;
        let len = slot.conn.seal_into(data, out)?;
        slot.activity.last_used = now;
        Ok(len)
    }

    /// DTLS 1.3: updates the sending keys of connection `h` ([`Connection::update_keys`]),
    /// dated by the latest time the endpoint was given.
    pub fn update_keys(&mut self, h: ConnectionHandle, request_peer: bool) -> Result<(), Error> {
        let now = self.clock;
        let slot = self.connections.get_mut(&h).ok_or(Error::UnknownConnection)?;
        let r = slot.conn.update_keys(now, request_peer);
        self.after(h);
        r
    }

    /// Closes connection `h` with close_notify.
    pub fn close(&mut self, h: ConnectionHandle) {
        if let Some(slot) = self.connections.get_mut(&h) {
            slot.conn.close();
            self.after(h);
        }
    }

    /// Connection `h`, if still in the table.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections.get(&h).map(|s| &s.conn)
    }

    /// The connection with peer `remote`, if any.
    pub fn handle_for(&self, remote: SocketAddr) -> Option<ConnectionHandle> {
        self.by_addr.get(&remote, &self.connections)
    }

    /// The session that lives on its own socket `local` (`set_local`, `move_to`), if any.
    pub fn handle_for_local(&self, local: SocketAddr) -> Option<ConnectionHandle> {
        self.by_local.get(&local).copied()
    }

    /// IPC: session `h` lives on its own socket `local` from now on. Every datagram of it not
    /// yet handed out by `poll_transmit` goes out with `Transmit::src = Some(local)`, and any
    /// datagram arriving at `local` goes to it, whatever its source.
    /// An unknown handle is ignored.
    pub fn set_local(&mut self, h: ConnectionHandle, local: SocketAddr) {
        let Some(slot) = self.connections.get_mut(&h) else { return };
        if let Some(old) = slot.conn.local() {
            if self.by_local.get(&old) == Some(&h) {
                self.by_local.remove(&old);
            }
        }
        slot.conn.set_local(local);
        self.by_local.insert(local, h);
    }

    /// TCS: move established session `h` to its own socket `local`. The engine announces
    /// `local`'s port to the client in a protected record, resent on the retransmission timer
    /// until a record of the client that authenticates arrives at `local`; until then the
    /// session keeps sending from where it did. Err if the client did not offer
    /// `follow_server_port` or the session is not established.
    pub fn move_to(&mut self, h: ConnectionHandle, local: SocketAddr) -> Result<(), Error> {
        let now = self.clock;
        let slot = self.connections.get_mut(&h).ok_or(Error::UnknownConnection)?;
        slot.conn.move_to(now, local)?;
        self.by_local.insert(local, h);
        self.after(h);
        Ok(())
    }

    /// Handles of every connection in the table.
    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.connections.keys().copied()
    }

    /// Makes `key` the current cookie key; cookies under the previous key still verify.
    pub fn rotate_cookie_key(&mut self, key: [u8; 16]) {
        self.cookie.rotate(key);
    }

    /// The round trips remembered per client IP address (filled under
    /// [`RetransmitPolicy::Adaptive`] as handshakes complete).
    pub fn rtt_cache(&self) -> &RttCache {
        &self.rtt_cache
    }

    /// Whether flights are timed by the measured round trip.
    fn adaptive(&self) -> bool {
        matches!(self.role.config.retransmit, RetransmitPolicy::Adaptive { .. })
    }

    /// Counters.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats { connections_open: self.connections.len() as u64, ..self.stats.clone() }
    }
}

fastshake_core::sans_io_by_inherent_methods!(Endpoint);
