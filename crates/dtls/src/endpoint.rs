//! The server side: stateless cookies (RFC 6347 §4.2.1) and a bounded table of connections
//! keyed by the client's address.

use crate::config::ServerConfig;
use crate::connection::{Connection, Event, VerifiedHello};
use crate::error::Error;
use crate::flight::write_record;
use crate::handshake::{
    parse_fragments, ClientHello, Fragment, HandshakeHeader, HandshakeType, HelloVerifyRequest, Reassembler,
    HANDSHAKE_HEADER_LEN,
};
use crate::record::{ContentType, Records, HEADER_LEN};
use fastshake_core::{CookieMac, Instant, SansIo, Transmit};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Where decrypted application data goes: queued as events when `None`.
type EndpointDataSink<'a> = Option<&'a mut dyn FnMut(ConnectionHandle, &[u8])>;

/// Names one connection of an [`Endpoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub u64);

/// Counters of an endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// HelloVerifyRequests sent (no state kept).
    pub hello_verify_sent: u64,
    /// ClientHellos whose cookie did not verify.
    pub cookies_rejected: u64,
    /// Connections in the table now.
    pub connections_open: u64,
    /// Connections created since the start.
    pub connections_accepted: u64,
    /// ClientHellos ignored because the table was full.
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
    /// Partial (fragmented) ClientHellos dropped before completion: stale, or evicted for newer
    /// ones. A high count means a flood of first fragments.
    pub partial_hellos_dropped: u64,
}

/// Half-open handshakes (cookie verified, not yet completed) kept at most unless
/// [`Endpoint::set_max_handshakes`] says otherwise.
pub const DEFAULT_MAX_HANDSHAKES: usize = 1024;
/// How long an established session may stay silent unless [`Endpoint::set_idle_timeout`] says otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// The "connection" of datagrams sent without one (HelloVerifyRequests).
const STATELESS: u64 = u64::MAX;

/// How long a HelloVerifyRequest cookie stays valid at least, unless
/// [`Endpoint::set_cookie_lifetime`] says otherwise: the default is this or twice the
/// configuration's handshake timeout, whichever is longer, so that a cookie stays good for as
/// long as a client resends its ClientHello (its backed-off timer reaches 60 s, and on slow links
/// the handshake timeout is raised to match).
pub const DEFAULT_COOKIE_LIFETIME: Duration = Duration::from_secs(60);

/// The server side of DTLS.
pub struct Endpoint {
    config: Arc<ServerConfig>,
    cookie: CookieMac,
    rng: ChaCha20Rng,
    /// Ordered so that timers and output run in a reproducible order. Boxed, so the tree's
    /// spare slots cost a pointer rather than a whole connection; the box also holds the
    /// endpoint's bookkeeping for the connection, so that costs no tree entries of its own.
    connections: BTreeMap<u64, Box<Slot>>,
    by_addr: BTreeMap<SocketAddr, u64>,
    /// A new handshake from the address of an established session. The established session is
    /// kept until this one completes (RFC 6347 §4.2.8: a replayed ClientHello with a valid
    /// cookie proves nothing, a completed handshake does).
    pending: BTreeMap<SocketAddr, u64>,
    /// Cookies are bound to a time slot of half this length and accepted for the current and
    /// the previous slot, so a cookie is never accepted once it is older than this.
    cookie_lifetime: Duration,
    /// Connections still handshaking, by id (ids grow, so the first is the oldest), with the
    /// client's IP address.
    half_open: BTreeMap<u64, IpAddr>,
    half_open_per_ip: BTreeMap<IpAddr, usize>,
    max_handshakes: usize,
    max_handshakes_per_ip: Option<usize>,
    idle_timeout: Option<Duration>,
    /// When established sessions are next scanned for idle expiry. One endpoint-wide timer
    /// rather than an entry per session in `timers`: a session costs no timer memory.
    idle_sweep: Option<Instant>,
    /// The latest time the driver gave us (for calls that take no time, e.g. `send`).
    clock: Instant,
    next_id: u64,
    /// Datagrams not yet handed out, with the id of the connection that made each
    /// (`STATELESS` for HelloVerifyRequests), so `set_local` can give them their source.
    transmits: VecDeque<(u64, Transmit)>,
    /// Sessions with their own socket (`set_local`, `move_to`), by that socket's address.
    /// Empty (no allocation) unless sessions have one.
    by_local: BTreeMap<SocketAddr, u64>,
    /// Sessions with a Connection ID we issued (RFC 9146), by that CID. Empty unless CIDs are on.
    by_cid: BTreeMap<Box<[u8]>, u64>,
    events: VecDeque<(ConnectionHandle, Event)>,
    partial_hellos: VecDeque<PartialHello>,
    /// Deadlines of the connections that have one, earliest first, so timers cost O(log n)
    /// rather than a scan of every session. Each connection's entry is also in its `Slot`.
    timers: BTreeSet<(Instant, u64)>,
    stats: EndpointStats,
    /// Set when the configuration cannot work: every datagram is dropped.
    config_error: Option<Error>,
    /// The ticket keys in use (from the configuration, then rotated).
    ticket_keys: Option<crate::session::TicketKeys>,
    /// Sessions resumable by ID.
    session_cache: crate::session::SessionCache,
}

/// A ClientHello taken from a datagram.
struct HelloInfo {
    record_seq: u64,
    message_seq: u16,
    body: Vec<u8>,
}

/// What a datagram holds as far as new handshakes are concerned.
enum HelloScan {
    /// No epoch-0 ClientHello.
    None,
    /// ClientHello fragments, buffered until the rest arrives.
    Partial,
    /// A whole ClientHello.
    Complete(HelloInfo),
}

/// Partial ClientHellos kept at most (small-MTU clients fragment theirs, and so does any client
/// whose hello outgrows its MTU: a DTLS 1.3 client offering a post-quantum key share sends
/// 1.5 kB). The one piece of state kept before a cookie, bounded in count and in bytes.
const MAX_PARTIAL_HELLOS: usize = 64;
/// Bytes of all partial ClientHellos together (buffers are sized from the length claimed).
const MAX_PARTIAL_HELLO_BYTES: usize = 128 * 1024;
/// Partial ClientHellos kept at most per client address (IP and port): one client's hello, and
/// the one it starts over with. Many clients behind one NAT share the IP, so the table is shared
/// fairly by IP instead: when it is full, the IP with the most entries loses its oldest, and a
/// host flooding first fragments from many ports evicts its own entries, not other hosts'.
const MAX_PARTIAL_HELLOS_PER_ADDRESS: usize = 2;
/// A partial ClientHello that gained no fragment for this long is dropped. Generous, since on a
/// duty-cycled link the fragments of one hello can be a slotframe (1 s or more) apart.
const PARTIAL_HELLO_MAX_IDLE: Duration = Duration::from_secs(10);
/// Largest ClientHello reassembled from fragments.
const MAX_FRAGMENTED_HELLO: u32 = 8 * 1024;

/// A connection with the endpoint's bookkeeping for it.
struct Slot {
    conn: Connection,
    /// When the session last received a datagram it could authenticate; set once established.
    activity: Option<Activity>,
    /// The deadline filed in `Endpoint::timers`, if any.
    deadline: Option<Instant>,
}

/// What an established session received, to tell authenticated traffic from dropped garbage.
/// The counters are the session's own, truncated: only their changes matter.
#[derive(Clone, Copy, Debug)]
struct Activity {
    last: Instant,
    datagrams_received: u32,
    records_dropped: u32,
}

struct PartialHello {
    /// When its last fragment came.
    last: Instant,
    /// The ClientHello's length as its fragments claim it (what its buffer costs).
    claimed: u32,
    from: SocketAddr,
    record_seq: u64,
    reassembler: Reassembler,
}

fn config_error_of(config: &ServerConfig) -> Option<Error> {
    config.validate().err()
}

fn addr_bytes(addr: &SocketAddr) -> ([u8; 18], usize) {
    let mut out = [0u8; 18];
    let n = match addr.ip() {
        std::net::IpAddr::V4(ip) => {
            out[..4].copy_from_slice(&ip.octets());
            4
        }
        std::net::IpAddr::V6(ip) => {
            out[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    out[n..n + 2].copy_from_slice(&addr.port().to_be_bytes());
    (out, n + 2)
}

impl Endpoint {
    /// A server with `config`; `rng_seed` seeds the first cookie key and every connection's randomness.
    pub fn new(config: Arc<ServerConfig>, rng_seed: [u8; 32]) -> Endpoint {
        let config_clone = config.clone();
        let mut rng = ChaCha20Rng::from_seed(rng_seed);
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        Endpoint {
            config,
            cookie: CookieMac::new(key),
            rng,
            connections: BTreeMap::new(),
            by_addr: BTreeMap::new(),
            pending: BTreeMap::new(),
            cookie_lifetime: DEFAULT_COOKIE_LIFETIME.max(config_clone.handshake_timeout * 2),
            half_open: BTreeMap::new(),
            half_open_per_ip: BTreeMap::new(),
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_handshakes_per_ip: None,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            idle_sweep: None,
            clock: Instant::ZERO,
            next_id: 0,
            transmits: VecDeque::new(),
            by_local: BTreeMap::new(),
            by_cid: BTreeMap::new(),
            events: VecDeque::new(),
            partial_hellos: VecDeque::new(),
            timers: BTreeSet::new(),
            stats: EndpointStats::default(),
            config_error: config_error_of(&config_clone),
            ticket_keys: config_clone.tickets.clone(),
            session_cache: crate::session::SessionCache::new(config_clone.session_cache),
        }
    }

    /// Makes `key` the current ticket key; the current one stays valid as the previous one.
    /// Does nothing when the configuration has tickets disabled.
    pub fn rotate_ticket_key(&mut self, key: crate::session::TicketKey) {
        if let Some(keys) = self.ticket_keys.as_mut() {
            keys.rotate(key);
        }
    }

    /// Cookies older than `lifetime` are refused (a new HelloVerifyRequest is sent instead);
    /// a cookie is accepted for at least half of it. The default is [`DEFAULT_COOKIE_LIFETIME`] or
    /// twice the configured handshake timeout, whichever is longer.
    pub fn set_cookie_lifetime(&mut self, lifetime: Duration) {
        self.cookie_lifetime = lifetime.max(Duration::from_millis(2));
    }

    /// At most `max` half-open handshakes are kept (at least 1); a new one evicts the oldest.
    /// Established sessions are never evicted for a handshake. The default is
    /// [`DEFAULT_MAX_HANDSHAKES`].
    pub fn set_max_handshakes(&mut self, max: usize) {
        self.max_handshakes = max.max(1);
    }

    /// At most `max` half-open handshakes from one IP address (`None`: no limit of its own);
    /// a new one evicts that address's oldest, so one host cannot crowd out the others.
    pub fn set_max_handshakes_per_ip(&mut self, max: Option<usize>) {
        self.max_handshakes_per_ip = max.map(|m| m.max(1));
    }

    /// An established session that receives no authenticated datagram for `idle` is closed
    /// (close_notify, then `Event::Failed(Error::Closed)`); `None` keeps sessions for ever.
    /// The default is [`DEFAULT_IDLE_TIMEOUT`]. Sessions are checked by one endpoint-wide scan
    /// (at most 64 per idle period), so one closes between `idle` and `idle` × 65/64 after its
    /// last authenticated datagram. A session whose last handshake flight the client has not
    /// confirmed yet (by a record of its own) is not idle: it is kept until the handshake timeout,
    /// as the client may still be resending its Finished.
    pub fn set_idle_timeout(&mut self, idle: Option<Duration>) {
        self.idle_timeout = idle;
        // Rescan at the next timeout under the new limit.
        let established = self.connections.values().any(|s| s.activity.is_some());
        self.idle_sweep = idle.filter(|_| established).map(|_| self.clock);
    }

    /// A random Connection ID of `len` bytes no session of ours has (RFC 9146 §3: the receiver
    /// tells sessions apart by it).
    fn fresh_cid(&mut self, len: u8) -> Vec<u8> {
        let mut cid = vec![0u8; len as usize];
        for _ in 0..16 {
            self.rng.fill_bytes(&mut cid);
            if !self.by_cid.contains_key(&cid[..]) {
                break;
            }
        }
        cid
    }

    /// The session a `tls12_cid` datagram names, if CIDs are on (`Some(None)`: none has it).
    fn session_for_cid(&self, datagram: &[u8]) -> Option<Option<u64>> {
        let len = self.config.mobility.connection_id.filter(|&n| n > 0)? as usize;
        if datagram.first() != Some(&(ContentType::Tls12Cid as u8)) {
            return None;
        }
        // type, version, epoch and sequence number, then the CID (RFC 9146 §4).
        Some(datagram.get(11..11 + len).and_then(|cid| self.by_cid.get(cid).copied()))
    }

    /// The time slot a cookie made at `now` is bound to.
    fn cookie_slot(&self, now: Instant) -> u64 {
        let slot_nanos = (self.cookie_lifetime.as_nanos() / 2).clamp(1, u64::MAX as u128) as u64;
        now.as_nanos() / slot_nanos
    }

    /// A datagram arrived at `local` from `remote`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        self.route(now, local, remote, datagram, None);
    }

    /// Like `handle_datagram`, but application data of an established session is decrypted in
    /// place and handed to `on_data` (no allocation per record).
    pub fn open_in_place(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
        on_data: &mut dyn FnMut(ConnectionHandle, &[u8]),
    ) {
        self.route(now, local, remote, datagram, Some(on_data));
    }

    fn route(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
        on_data: EndpointDataSink<'_>,
    ) {
        self.clock = self.clock.max(now);
        if self.config_error.is_some() {
            self.stats.datagrams_dropped += 1;
            return;
        }
        // A record with one of our CIDs belongs to the session that issued it, whatever the
        // source; a session's own socket belongs to it, whatever the source.
        match self.session_for_cid(datagram) {
            Some(Some(id)) => return self.deliver(now, local, remote, id, datagram, on_data),
            Some(None) => {
                self.stats.datagrams_dropped += 1;
                return;
            }
            None => {}
        }
        if let Some(&id) = self.by_local.get(&local) {
            self.deliver(now, local, remote, id, datagram, on_data);
            return;
        }
        let existing = self.by_addr.get(&remote).copied();
        let pending = self.pending.get(&remote).copied();
        let scan = self.scan_client_hello(now, remote, datagram);
        if matches!(scan, HelloScan::Partial) && existing.is_none() {
            return;
        }
        if let HelloScan::Complete(hello) = scan {
            let random = ClientHello::parse(&hello.body).ok().map(|ch| ch.random);
            // A copy of the ClientHello that started a session goes to it (a retransmission
            // makes it resend its flight); a different one, or the same client starting over
            // with a higher message_seq, is a new handshake (RFC 6347 §4.2.8).
            let forward = [pending, existing].into_iter().flatten().find(|id| {
                self.connections
                    .get(id)
                    .zip(random.as_ref())
                    .is_some_and(|(s, random)| s.conn.started_from(random, hello.message_seq))
            });
            match forward {
                Some(id) => self.deliver(now, local, remote, id, datagram, on_data),
                None => self.handle_new_client_hello(now, remote, existing, pending, &hello, datagram.len()),
            }
            return;
        }
        let Some(id) = existing else {
            self.stats.datagrams_dropped += 1;
            return;
        };
        if let Some(new) = pending {
            // Both the established session and the handshake replacing it live on this address:
            // handshake records go to the new one (a copy, as opening records works in place),
            // protected records to the established one, which drops what it cannot authenticate.
            let (mut handshake_records, mut protected_records) = (false, false);
            for (rh, _) in Records::new(datagram).map_while(Result::ok) {
                handshake_records |= rh.content_type != ContentType::ApplicationData;
                protected_records |= rh.epoch != 0;
            }
            if handshake_records {
                let mut copy = datagram.to_vec();
                self.deliver(now, local, remote, new, &mut copy, None);
            }
            if !protected_records {
                return;
            }
        }
        self.deliver(now, local, remote, id, datagram, on_data);
    }

    fn deliver(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        id: u64,
        datagram: &mut [u8],
        on_data: EndpointDataSink<'_>,
    ) {
        let Some(conn) = self.connections.get_mut(&id).map(|s| &mut s.conn) else { return };
        match on_data {
            Some(f) => {
                let mut sink = |d: &[u8]| f(ConnectionHandle(id), d);
                conn.handle_datagram_at(now, local, remote, datagram, Some(&mut sink))
            }
            None => conn.handle_datagram_at(now, local, remote, datagram, None),
        }
        self.drain(id);
    }

    /// Ends connection `id` because a newer handshake from its address replaces it.
    fn supersede(&mut self, id: u64) {
        let Some(mut slot) = self.remove_connection(id) else { return };
        let conn = &mut slot.conn;
        conn.fail_superseded();
        while let Some(e) = conn.poll_event() {
            self.events.push_back((ConnectionHandle(id), e));
        }
    }

    fn handle_new_client_hello(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        existing: Option<u64>,
        pending: Option<u64>,
        hello: &HelloInfo,
        datagram_len: usize,
    ) {
        let Ok(ch) = ClientHello::parse(&hello.body) else {
            self.stats.datagrams_dropped += 1;
            return;
        };
        let (addr, n) = addr_bytes(&remote);
        let version = ch.version.to_be_bytes();
        let slot = self.cookie_slot(now);
        let [a, b, c, d, e, f] = ch.cookie_inputs(&version, &addr[..n]);
        let slot_bytes = slot.to_be_bytes();
        let previous_slot_bytes = slot.wrapping_sub(1).to_be_bytes();
        let fresh = self.cookie.verify(ch.cookie, &[a, b, c, d, e, f, &slot_bytes])
            || (slot > 0 && self.cookie.verify(ch.cookie, &[a, b, c, d, e, f, &previous_slot_bytes]));
        if !fresh {
            if !ch.cookie.is_empty() {
                self.stats.cookies_rejected += 1;
            }
            let cookie = self.cookie.sign(&[a, b, c, d, e, f, &slot_bytes]);
            let mut body = Vec::with_capacity(3 + cookie.len());
            HelloVerifyRequest::encode(&mut body, &cookie);
            let mut hdr = Vec::with_capacity(HANDSHAKE_HEADER_LEN);
            HandshakeHeader {
                msg_type: HandshakeType::HelloVerifyRequest,
                length: body.len() as u32,
                message_seq: hello.message_seq,
                fragment_offset: 0,
                fragment_length: body.len() as u32,
            }
            .write(&mut hdr);
            // RFC 6347 §4.2.1: the HelloVerifyRequest reuses the ClientHello's record sequence number.
            let mut out = vec![0u8; HEADER_LEN + hdr.len() + body.len()];
            write_record(&mut out, ContentType::Handshake, 0, hello.record_seq, None, &[&hdr, &body]);
            self.transmits.push_back((STATELESS, Transmit { src: None, dst: remote, payload: out }));
            self.stats.hello_verify_sent += 1;
            return;
        }
        // Connections this handshake replaces do not count against the table.
        let existing_in_handshake =
            existing.filter(|id| self.connections.get(id).is_some_and(|s| !s.conn.is_established()));
        let replaced = usize::from(pending.is_some()) + usize::from(existing_in_handshake.is_some());
        let evictable = self.half_open.len().saturating_sub(replaced);
        if self.connections.len() >= self.config.max_connections + replaced && evictable == 0 {
            // Every slot holds an established session: those are never evicted for a handshake.
            self.stats.connections_refused += 1;
            return;
        }
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let verified = VerifiedHello {
            record_seq: hello.record_seq,
            message_seq: hello.message_seq,
            body: &hello.body,
            datagram_len,
            cached: self
                .session_cache
                .get(ch.session_id, crate::session::unix_now(self.config.wall_clock, now)),
            ticket_keys: self.ticket_keys.clone(),
            issued_cid: match self.config.mobility.connection_id {
                Some(len) if len > 0 && ch.extensions.connection_id.is_some() => self.fresh_cid(len),
                _ => Vec::new(),
            },
        };
        let conn = Connection::server(self.config.clone(), now, remote, seed, verified);
        let id = self.next_id;
        self.next_id += 1;
        self.connections.insert(id, Box::new(Slot { conn, activity: None, deadline: None }));
        self.half_open.insert(id, remote.ip());
        *self.half_open_per_ip.entry(remote.ip()).or_default() += 1;
        self.stats.connections_accepted += 1;
        self.drain(id);
        if !self.connections.contains_key(&id) {
            // The new ClientHello was refused (version, suites, keys): whatever lived on this
            // address goes on.
            return;
        }
        if let Some(cid) = self.connections.get(&id).and_then(|s| s.conn.connection_id()) {
            if !cid.is_empty() {
                self.by_cid.insert(cid.into(), id);
            }
        }
        self.events.push_back((ConnectionHandle(id), Event::Accepted));
        // The new ClientHello is acceptable: it replaces a handshake in progress on this
        // address at once, and an established session only once it completes.
        if let Some(old) = pending {
            self.pending.remove(&remote);
            self.supersede(old);
            self.stats.replacements_abandoned += 1;
        }
        match existing {
            Some(old) if existing_in_handshake.is_some() => {
                self.supersede(old);
                self.stats.connections_replaced += 1;
                self.by_addr.insert(remote, id);
            }
            Some(_) => {
                self.pending.insert(remote, id);
            }
            None => {
                self.by_addr.insert(remote, id);
            }
        }
        self.make_room_for(id, remote.ip());
    }

    /// Evicts the oldest half-open handshakes (never `new`, never an established session)
    /// until the limits hold again.
    fn make_room_for(&mut self, new: u64, ip: IpAddr) {
        if let Some(per_ip) = self.max_handshakes_per_ip {
            while self.half_open_per_ip.get(&ip).copied().unwrap_or(0) > per_ip {
                let Some(oldest) =
                    self.half_open.iter().find(|&(&id, &a)| a == ip && id != new).map(|(&id, _)| id)
                else {
                    break;
                };
                self.evict(oldest);
            }
        }
        while self.half_open.len() > self.max_handshakes
            || self.connections.len() > self.config.max_connections
        {
            let Some(oldest) = self.half_open.keys().copied().find(|&id| id != new) else { break };
            self.evict(oldest);
        }
    }

    fn evict(&mut self, id: u64) {
        if self.remove_connection(id).is_some() {
            self.stats.handshakes_evicted += 1;
        }
    }

    /// Takes connection `id` out of every table.
    fn remove_connection(&mut self, id: u64) -> Option<Box<Slot>> {
        let slot = self.connections.remove(&id)?;
        let remote = slot.conn.remote();
        if let Some(cid) = slot.conn.connection_id().filter(|c| !c.is_empty()) {
            if self.by_cid.get(cid) == Some(&id) {
                self.by_cid.remove(cid);
            }
        }
        if !self.by_local.is_empty() {
            self.by_local.retain(|_, owner| *owner != id);
        }
        if let Some(t) = slot.deadline {
            self.timers.remove(&(t, id));
        }
        self.forget_half_open(id);
        if self.by_addr.get(&remote) == Some(&id) {
            self.by_addr.remove(&remote);
            // The handshake waiting to replace it takes the address over.
            if let Some(new) = self.pending.remove(&remote) {
                self.by_addr.insert(remote, new);
            }
        }
        if self.pending.get(&remote) == Some(&id) {
            self.pending.remove(&remote);
            self.stats.replacements_abandoned += 1;
        }
        Some(slot)
    }

    fn forget_half_open(&mut self, id: u64) {
        let Some(ip) = self.half_open.remove(&id) else { return };
        if let Some(n) = self.half_open_per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.half_open_per_ip.remove(&ip);
            }
        }
    }

    /// Drops stale partial ClientHellos, then the sender's oldest if it has its quota, then, while
    /// the table is full in entries or bytes, the oldest entry of the IP address holding most.
    fn make_room_for_partial_hello(&mut self, now: Instant, from: SocketAddr, claimed: u32) {
        let before = self.partial_hellos.len();
        self.partial_hellos.retain(|p| now.saturating_duration_since(p.last) < PARTIAL_HELLO_MAX_IDLE);
        let mut evicted = before - self.partial_hellos.len();
        if self.partial_hellos.iter().filter(|p| p.from == from).count() >= MAX_PARTIAL_HELLOS_PER_ADDRESS {
            if let Some(i) = self.partial_hellos.iter().position(|p| p.from == from) {
                self.partial_hellos.remove(i);
                evicted += 1;
            }
        }
        loop {
            let bytes = self.partial_hellos.iter().map(|p| p.claimed as usize).sum::<usize>();
            let full = self.partial_hellos.len() >= MAX_PARTIAL_HELLOS
                || bytes + claimed as usize > MAX_PARTIAL_HELLO_BYTES;
            if !full || self.partial_hellos.is_empty() {
                break;
            }
            // The IP with the most entries (the oldest such on a tie) gives up its oldest one.
            let mut counts: BTreeMap<IpAddr, usize> = BTreeMap::new();
            for p in &self.partial_hellos {
                *counts.entry(p.from.ip()).or_default() += 1;
            }
            let most = counts.values().copied().max().unwrap_or(0);
            let victim = self.partial_hellos.iter().position(|p| counts.get(&p.from.ip()) == Some(&most));
            if let Some(i) = victim {
                self.partial_hellos.remove(i);
                evicted += 1;
            }
        }
        self.stats.partial_hellos_dropped += evicted as u64;
    }

    /// Finds an epoch-0 ClientHello in the datagram, whole or completed from fragments.
    fn scan_client_hello(&mut self, now: Instant, remote: SocketAddr, datagram: &[u8]) -> HelloScan {
        let mut scan = HelloScan::None;
        for rec in Records::new(datagram) {
            let Ok((rh, range)) = rec else { break };
            if rh.content_type != ContentType::Handshake || rh.epoch != 0 {
                continue;
            }
            let Some(body) = datagram.get(range) else { break };
            for frag in parse_fragments(body) {
                let Ok((hh, data)) = frag else { break };
                if hh.msg_type != HandshakeType::ClientHello {
                    continue;
                }
                if hh.fragment_offset == 0 && hh.fragment_length == hh.length {
                    return HelloScan::Complete(HelloInfo {
                        record_seq: rh.seq,
                        message_seq: hh.message_seq,
                        body: data.to_vec(),
                    });
                }
                if hh.length > MAX_FRAGMENTED_HELLO {
                    continue;
                }
                scan = HelloScan::Partial;
                let pos = match self
                    .partial_hellos
                    .iter()
                    .position(|p| p.from == remote && p.reassembler.next_seq() == hh.message_seq)
                {
                    Some(i) => i,
                    None => {
                        self.make_room_for_partial_hello(now, remote, hh.length);
                        self.partial_hellos.push_back(PartialHello {
                            last: now,
                            claimed: hh.length,
                            from: remote,
                            record_seq: rh.seq,
                            reassembler: Reassembler::with_budget(
                                hh.message_seq,
                                MAX_FRAGMENTED_HELLO as usize,
                            ),
                        });
                        self.partial_hellos.len() - 1
                    }
                };
                let Some(partial) = self.partial_hellos.get_mut(pos) else { break };
                partial.record_seq = partial.record_seq.max(rh.seq);
                partial.last = now;
                partial.reassembler.insert(&Fragment { header: hh, data });
                if let Some((_, message_seq, body)) = partial.reassembler.pop() {
                    let record_seq = partial.record_seq;
                    self.partial_hellos.remove(pos);
                    return HelloScan::Complete(HelloInfo { record_seq, message_seq, body });
                }
            }
        }
        scan
    }

    /// Moves a connection's output and events to the endpoint, and forgets it once it ended.
    fn set_deadline(&mut self, id: u64, deadline: Option<Instant>) {
        let Some(slot) = self.connections.get_mut(&id) else { return };
        let old = std::mem::replace(&mut slot.deadline, deadline);
        if old == deadline {
            return;
        }
        if let Some(t) = old {
            self.timers.remove(&(t, id));
        }
        if let Some(t) = deadline {
            self.timers.insert((t, id));
        }
    }

    fn drain(&mut self, id: u64) {
        let now = self.clock;
        let Some(slot) = self.connections.get_mut(&id) else { return };
        let slot: &mut Slot = slot;
        let conn = &mut slot.conn;
        while let Some(t) = conn.poll_transmit(Instant::ZERO) {
            self.transmits.push_back((id, t));
        }
        while let Some(e) = conn.poll_event() {
            self.events.push_back((ConnectionHandle(id), e));
        }
        if let Some((session_id, session)) = conn.take_new_cache_entry() {
            self.session_cache.insert(session_id, session);
        }
        let moved = conn.take_address_change();
        let remote = conn.remote();
        if let Some((old, new)) = moved {
            // The session follows its client: so does the address index.
            if self.by_addr.get(&old) == Some(&id) {
                self.by_addr.remove(&old);
            }
            self.by_addr.entry(new).or_insert(id);
        }
        if conn.is_closed() {
            self.remove_connection(id);
            return;
        }
        let deadline = conn.poll_timeout();
        if conn.is_established() {
            let stats = conn.stats();
            let seen = Activity {
                last: now,
                datagrams_received: stats.datagrams_received as u32,
                records_dropped: stats.records_dropped as u32,
            };
            let activity = slot.activity.get_or_insert(seen);
            // A datagram that arrived and dropped nothing was authenticated: the peer is alive.
            if seen.datagrams_received != activity.datagrams_received
                && seen.records_dropped == activity.records_dropped
            {
                activity.last = now;
            }
            activity.datagrams_received = seen.datagrams_received;
            activity.records_dropped = seen.records_dropped;
            if let (None, Some(idle)) = (self.idle_sweep, self.idle_timeout) {
                self.idle_sweep = Some(now + idle);
            }
            self.forget_half_open(id);
        }
        self.set_deadline(id, deadline);
        if self.connections.get(&id).is_some_and(|s| s.conn.is_established())
            && self.pending.get(&remote) == Some(&id)
        {
            // The client completed a new handshake from this address: it is the peer now.
            self.pending.remove(&remote);
            if let Some(old) = self.by_addr.insert(remote, id) {
                self.supersede(old);
                self.stats.connections_replaced += 1;
            }
        }
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        let t = self.transmits.pop_front();
        if self.transmits.is_empty() && self.transmits.capacity() > 64 {
            self.transmits = VecDeque::new();
        }
        t.map(|(_, t)| t)
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
        while let Some(&(t, id)) = self.timers.first() {
            if t > now {
                break;
            }
            // Forget the entry first: drain() files the connection's next deadline.
            self.timers.remove(&(t, id));
            if let Some(slot) = self.connections.get_mut(&id) {
                let slot: &mut Slot = slot;
                slot.deadline = None;
                slot.conn.handle_timeout(now);
            }
            self.drain(id);
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
        let Some(idle) = self.idle_timeout else { return };
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        for (&id, slot) in &self.connections {
            // A session that still keeps its last handshake flight has not heard that the client
            // got it (the client may be waiting out its retransmission timer, whose gaps grow
            // past any idle limit): it is not idle until the handshake state goes.
            let idle_counts = slot.conn.is_established() && !slot.conn.holds_handshake_state();
            let Some(activity) = slot.activity.filter(|_| idle_counts) else { continue };
            let expiry = activity.last + idle;
            if now >= expiry {
                expired.push(id);
            } else {
                next = Some(next.map_or(expiry, |t| t.min(expiry)));
            }
        }
        for id in expired {
            if let Some(slot) = self.connections.get_mut(&id) {
                slot.conn.close();
                self.stats.sessions_expired += 1;
                self.events.push_back((ConnectionHandle(id), Event::Failed(Error::Closed)));
            }
            self.drain(id);
        }
        self.idle_sweep = next.map(|t| t.max(now + idle / 64));
    }

    /// The next event of any connection.
    pub fn poll_event(&mut self) -> Option<(ConnectionHandle, Event)> {
        self.events.pop_front()
    }

    /// Queues application data on connection `h`.
    pub fn send(&mut self, h: ConnectionHandle, data: &[u8]) -> Result<(), Error> {
        let slot = self.connections.get_mut(&h.0).ok_or(Error::UnknownConnection)?;
        let r = slot.conn.send(data);
        self.drain(h.0);
        r
    }

    /// Closes connection `h` with close_notify.
    pub fn close(&mut self, h: ConnectionHandle) {
        if let Some(slot) = self.connections.get_mut(&h.0) {
            slot.conn.close();
            self.drain(h.0);
        }
    }

    /// Connection `h`, if still in the table.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections.get(&h.0).map(|s| &s.conn)
    }

    /// Connection `h`, mutable (for `seal_into` on the data path). Output queued on it directly
    /// (e.g. by `send`) is picked up by the endpoint's next `poll_transmit` only through
    /// [`Endpoint::send`]; use `seal_into` here.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        self.connections.get_mut(&h.0).map(|s| &mut s.conn)
    }

    /// The connection with peer `remote`, if any.
    pub fn handle_for(&self, remote: SocketAddr) -> Option<ConnectionHandle> {
        self.by_addr.get(&remote).map(|id| ConnectionHandle(*id))
    }

    /// The session that lives on its own socket `local` (`set_local`, `move_to`), if any.
    pub fn handle_for_local(&self, local: SocketAddr) -> Option<ConnectionHandle> {
        self.by_local.get(&local).map(|id| ConnectionHandle(*id))
    }

    /// IPC: session `h` lives on its own socket `local` from now on. Every datagram of it not
    /// yet handed out by `poll_transmit` goes out with `Transmit::src = Some(local)`, and any
    /// datagram arriving at `local` goes to it, whatever its source.
    /// An unknown handle is ignored.
    pub fn set_local(&mut self, h: ConnectionHandle, local: SocketAddr) {
        let Some(slot) = self.connections.get_mut(&h.0) else { return };
        if let Some(old) = slot.conn.local() {
            if self.by_local.get(&old) == Some(&h.0) {
                self.by_local.remove(&old);
            }
        }
        slot.conn.set_local(local);
        self.by_local.insert(local, h.0);
        for (id, t) in self.transmits.iter_mut() {
            if *id == h.0 {
                t.src = Some(local);
            }
        }
    }

    /// TCS: move established session `h` to its own socket `local`. The engine announces
    /// `local`'s port to the client in a protected record, resent on the retransmission timer
    /// until a record of the client that authenticates arrives at `local`; until then the
    /// session keeps sending from where it did. Err if the client did not offer
    /// `follow_server_port` or the session is not established.
    pub fn move_to(&mut self, h: ConnectionHandle, local: SocketAddr) -> Result<(), Error> {
        let now = self.clock;
        let slot = self.connections.get_mut(&h.0).ok_or(Error::UnknownConnection)?;
        slot.conn.move_to(now, local)?;
        self.by_local.insert(local, h.0);
        self.drain(h.0);
        Ok(())
    }

    /// Handles of every connection in the table.
    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.connections.keys().map(|id| ConnectionHandle(*id))
    }

    /// Makes `key` the current cookie key; cookies under the previous key still verify.
    pub fn rotate_cookie_key(&mut self, key: [u8; 16]) {
        self.cookie.rotate(key);
    }

    /// Why the endpoint drops everything, if its configuration cannot work.
    pub fn config_error(&self) -> Option<&Error> {
        self.config_error.as_ref()
    }

    /// Counters.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats { connections_open: self.connections.len() as u64, ..self.stats.clone() }
    }
}

impl SansIo for Endpoint {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        Endpoint::handle_datagram(self, now, local, remote, datagram)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        Endpoint::poll_transmit(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now)
    }
}
