//! New handshakes at the endpoint: ClientHellos reassembled from fragments (the one state kept
//! before a cookie, bounded), the stateless cookie exchange (RFC 6347 §4.2.1), and the admission
//! of a new session against the table's limits.

use super::incoming::{EarlierDatagrams, HelloBody, HelloInfo, HelloScan, Incoming};
use super::shared::WaitingHello;
use super::{ConnectionHandle, Endpoint, EndpointDataSink, Slot};
use crate::config::AddressValidation;
use crate::connection::{Connection, Event, VerifiedHello};
use crate::handshake::{
    fragment_ranges, ClientHello, Fragment, HandshakeHeader, HandshakeType, HelloVerifyRequest, Reassembler,
    HANDSHAKE_HEADER_LEN,
};
use crate::record::{ContentType, RecordHeader, Records, DTLS_1_2, HEADER_LEN};
use fastshake_core::{Instant, Transmit, COOKIE_LEN};
use rand_core::RngCore;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

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
/// A partial ClientHello that gained no fragment for this long is dropped. Generous: on a
/// duty-cycled link the fragments of one hello can be a slotframe (1 s or more) apart, and on a
/// lossy one the fragments still missing come with the client's next retransmission, whose
/// timer backs off to a minute (RFC 6347 §4.2.4.1); a DTLS 1.3 ClientHello with a post-quantum
/// key share is 15 or more fragments on an 802.15.4 link. The table stays bounded in entries
/// and bytes whatever this is.
const PARTIAL_HELLO_MAX_IDLE: Duration = Duration::from_secs(64);
/// Largest ClientHello reassembled from fragments.
const MAX_FRAGMENTED_HELLO: u32 = 8 * 1024;

/// A ClientHello whose fragments are still coming.
pub(super) struct PartialHello {
    /// When its last fragment came.
    last: Instant,
    /// The ClientHello's length as its fragments claim it (what its buffer costs).
    claimed: u32,
    from: SocketAddr,
    record_seq: u64,
    /// The datagrams that carried its fragments so far, for the session it may start.
    earlier: EarlierDatagrams,
    reassembler: Reassembler,
}

/// The partial ClientHellos one datagram adds fragments to, by message_seq: it counts once for
/// each. A client's datagram carries one hello's; more than this is not counted further.
type Carried = [Option<u16>; 4];

/// Marks the inputs of a cookie bound to the client's address only (`reusable_cookies`).
const REUSABLE_COOKIE_LABEL: &[u8] = b"fastshake reusable cookie";

/// Bytes of a dated cookie's (adaptive policy) issue time, in milliseconds modulo 2^24 (4.7
/// hours): it takes them from the tag, so the cookie stays 16 bytes and the ClientHello that
/// returns it no larger than under the fixed policy (on an 802.15.4 hop a few bytes more can
/// cost a frame).
const DATED_COOKIE_TIME_LEN: usize = 3;
const DATED_COOKIE_TIME_MASK: u64 = (1 << (8 * DATED_COOKIE_TIME_LEN)) - 1;

/// A HelloVerifyRequest cookie on the stack.
type Cookie = [u8; COOKIE_LEN];

/// Engine time in milliseconds.
fn cookie_millis(now: Instant) -> u64 {
    now.as_nanos() / 1_000_000
}

/// The cookie's input for the client address: IP and port.
pub(super) fn addr_bytes(addr: &SocketAddr) -> ([u8; 18], usize) {
    let mut out = [0u8; 18];
    let n = match addr.ip() {
        IpAddr::V4(ip) => {
            out[..4].copy_from_slice(&ip.octets());
            4
        }
        IpAddr::V6(ip) => {
            out[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    out[n..n + 2].copy_from_slice(&addr.port().to_be_bytes());
    (out, n + 2)
}

impl Endpoint {
    /// The time slot a cookie made at `now` is bound to.
    pub(super) fn cookie_slot(&self, now: Instant) -> u64 {
        let slot_nanos = (self.cookie_lifetime.as_nanos() / 2).clamp(1, u64::MAX as u128) as u64;
        now.as_nanos() / slot_nanos
    }

    /// A stateless cookie over `inputs`, 16 bytes: a HelloVerifyRequest's (RFC 6347 §4.2.1), or
    /// the tag of a HelloRetryRequest's (`hello13`).
    /// Under the fixed policy it is bound to the current time slot. Under the adaptive one it
    /// carries the millisecond it was issued (the low 24 bits after a 12-byte tag, the tag over
    /// the whole of it): the ClientHello that returns it tells the stateless server the round
    /// trip of the cookie exchange. That age can only be too long (a client that resent its
    /// ClientHello returns the same cookie later), which errs on the side of a longer timer.
    pub(super) fn sign_cookie(&self, now: Instant, inputs: &[&[u8]; 6]) -> Cookie {
        let [a, b, c, d, e, f] = *inputs;
        let mut cookie = [0; COOKIE_LEN];
        if self.adaptive() {
            let issued = cookie_millis(now);
            let (tagged, time) = cookie.split_at_mut(COOKIE_LEN - DATED_COOKIE_TIME_LEN);
            self.cookie.sign_into(&[a, b, c, d, e, f, &issued.to_be_bytes()], tagged);
            time.copy_from_slice(&issued.to_be_bytes()[8 - DATED_COOKIE_TIME_LEN..]);
            return cookie;
        }
        self.cookie.sign_into(&[a, b, c, d, e, f, &self.cookie_slot(now).to_be_bytes()], &mut cookie);
        cookie
    }

    /// Whether `cookie` is ours for these `inputs` and fresh: `None` if not, else its age when
    /// it carries its issue time.
    pub(super) fn verify_cookie(
        &self,
        now: Instant,
        cookie: &[u8],
        inputs: &[&[u8]; 6],
    ) -> Option<Option<Duration>> {
        let [a, b, c, d, e, f] = *inputs;
        if cookie.len() != COOKIE_LEN {
            return None;
        }
        if self.adaptive() {
            let (tagged, time) = cookie.split_at(COOKIE_LEN - DATED_COOKIE_TIME_LEN);
            let low = time.iter().fold(0u64, |v, &b| v << 8 | u64::from(b));
            // The latest millisecond with these low bits: a cookie older than the wrap comes
            // out younger than it is, and its tag, over the true time, no longer verifies.
            let now_ms = cookie_millis(now);
            let age = now_ms.wrapping_sub(low) & DATED_COOKIE_TIME_MASK;
            let issued = now_ms.checked_sub(age)?;
            let age = Duration::from_millis(age);
            let fresh = age <= self.cookie_lifetime
                && self.cookie.verify_truncated(tagged, &[a, b, c, d, e, f, &issued.to_be_bytes()]);
            return fresh.then_some(Some(age));
        }
        let slot = self.cookie_slot(now);
        let fresh = self.cookie.verify(cookie, &[a, b, c, d, e, f, &slot.to_be_bytes()])
            || (slot > 0
                && self.cookie.verify(cookie, &[a, b, c, d, e, f, &slot.wrapping_sub(1).to_be_bytes()]));
        fresh.then_some(None)
    }

    /// Finds an epoch-0 ClientHello in the datagram, whole or completed from fragments; `first`
    /// is its first record's header, read already. A partial ClientHello the datagram adds to
    /// and does not complete counts it among its earlier datagrams.
    pub(super) fn scan_client_hello(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &[u8],
        first: &RecordHeader,
    ) -> HelloScan {
        let mut carried = Carried::default();
        let scan = self.scan_records(now, remote, datagram, first, &mut carried);
        for seq in carried.into_iter().flatten() {
            // Gone if completed (the session counts the completing datagram itself) or evicted.
            if let Some(p) =
                self.partial_hellos.iter_mut().find(|p| p.from == remote && p.reassembler.next_seq() == seq)
            {
                p.earlier.add(datagram.len());
            }
        }
        scan
    }

    /// [`Self::scan_client_hello`]'s records, noting in `carried` the partial ClientHellos
    /// the datagram adds to.
    fn scan_records(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &[u8],
        first: &RecordHeader,
        carried: &mut Carried,
    ) -> HelloScan {
        let mut scan = HelloScan::None;
        let first_range = first.len()..(first.len() + first.length as usize).min(datagram.len());
        let records = std::iter::once(Ok((*first, first_range))).chain(Records::after(datagram, first, 0));
        for rec in records {
            let Ok((rh, range)) = rec else { break };
            if rh.content_type != ContentType::Handshake || rh.epoch != 0 {
                continue;
            }
            let Some(body) = datagram.get(range.clone()) else { break };
            for frag in fragment_ranges(body) {
                let Ok((hh, in_body)) = frag else { break };
                if hh.msg_type != HandshakeType::ClientHello {
                    continue;
                }
                let in_datagram = range.start + in_body.start..range.start + in_body.end;
                if hh.fragment_offset == 0 && hh.fragment_length == hh.length {
                    return HelloScan::Complete(HelloInfo {
                        record_seq: rh.seq,
                        message_seq: hh.message_seq,
                        body: HelloBody::InDatagram(in_datagram),
                    });
                }
                let Some(data) = datagram.get(in_datagram) else { break };
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
                            earlier: EarlierDatagrams::default(),
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
                    let (record_seq, earlier) = (partial.record_seq, partial.earlier);
                    self.partial_hellos.remove(pos);
                    return HelloScan::Complete(HelloInfo {
                        record_seq,
                        message_seq,
                        body: HelloBody::Fragmented { body, earlier },
                    });
                }
                if !carried.contains(&Some(hh.message_seq)) {
                    if let Some(free) = carried.iter_mut().find(|c| c.is_none()) {
                        *free = Some(hh.message_seq);
                    }
                }
            }
        }
        scan
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
            if let Some(i) = self.partial_hellos.iter().position(|p| counts.get(&p.from.ip()) == Some(&most))
            {
                self.partial_hellos.remove(i);
                evicted += 1;
            }
        }
        self.stats.partial_hellos_dropped += evicted as u64;
    }

    /// A whole ClientHello, parsed here once: a copy of the one a session at this address
    /// started from (late or retransmitted) goes to that session; any other is a new handshake.
    pub(super) fn client_hello(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        hello: &HelloInfo,
        incoming: Incoming<'_>,
        on_data: EndpointDataSink<'_>,
    ) {
        // With the datagrams that carried its earlier fragments.
        let datagram_len = incoming.len().saturating_add(hello.earlier().bytes as usize);
        let body = hello.body(incoming.bytes());
        let Ok(ch) = ClientHello::parse(body) else {
            self.stats.datagrams_dropped += 1;
            return;
        };
        // RFC 6347 §4.2.8: the same client starting over (another random, or a higher
        // message_seq) is a new handshake.
        let existing = self.by_addr.get(&remote, &self.connections);
        let pending = self.pending.get(&remote).copied();
        let copy_of = [pending, existing].into_iter().flatten().find(|h| {
            self.connections.get(h).is_some_and(|s| s.conn.started_from(&ch.random, hello.message_seq))
        });
        match copy_of {
            Some(h) => self.deliver(now, local, remote, h, incoming, on_data),
            None => self.new_client_hello(now, remote, hello, &ch, body, datagram_len),
        }
    }

    /// A ClientHello that is no copy of a session's: a HelloVerifyRequest unless its cookie is
    /// fresh, else a new session (replacing a handshake on the same address at once, and an
    /// established session once the new handshake completes). `body` is the ClientHello `ch` was
    /// parsed from; `datagram_len` the bytes of every datagram that carried it (the new session
    /// counts them, and those datagrams, as received).
    pub(super) fn new_client_hello(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        hello: &HelloInfo,
        ch: &ClientHello<'_>,
        body: &[u8],
        datagram_len: usize,
    ) {
        if self.speaks13(ch) {
            self.new_client_hello13(now, remote, hello, ch, body, datagram_len);
            return;
        }
        if !self.role.config.versions.dtls12() {
            // A DTLS 1.3 server and a client that offers only 1.2 (RFC 8446 §4.2.1).
            self.refuse_version(remote, hello.record_seq, ch);
            return;
        }
        let (addr, n) = addr_bytes(&remote);
        let version = ch.version.to_be_bytes();
        // A reusable cookie covers the address alone (and a label keeping the two kinds apart),
        // so it verifies in the ClientHellos of later handshakes too.
        let inputs: [&[u8]; 6] = if self.role.config.reusable_cookies {
            [&addr[..n], &version[..], REUSABLE_COOKIE_LABEL, &[], &[], &[]]
        } else {
            ch.cookie_inputs(&version, &addr[..n])
        };
        let verified = match self.role.config.address_validation {
            AddressValidation::Cookie => self.verify_cookie(now, ch.cookie, &inputs),
            AddressValidation::Transport => Some(None),
        };
        let Some(cookie_age) = verified else {
            if !ch.cookie.is_empty() {
                self.stats.cookies_rejected += 1;
            }
            let cookie = self.sign_cookie(now, &inputs);
            let cookie = cookie.as_slice();
            // The answer to a flood: one buffer, written front to back, the record header last.
            let body_len = 3 + cookie.len();
            let mut out = Vec::with_capacity(HEADER_LEN + HANDSHAKE_HEADER_LEN + body_len);
            out.resize(HEADER_LEN, 0);
            HandshakeHeader {
                msg_type: HandshakeType::HelloVerifyRequest,
                length: body_len as u32,
                message_seq: hello.message_seq,
                fragment_offset: 0,
                fragment_length: body_len as u32,
            }
            .write(&mut out);
            HelloVerifyRequest::encode(&mut out, cookie);
            // RFC 6347 §4.2.1: the HelloVerifyRequest reuses the ClientHello's record sequence number.
            RecordHeader {
                content_type: ContentType::Handshake,
                version: DTLS_1_2,
                epoch: 0,
                seq: hello.record_seq,
                length: (out.len() - HEADER_LEN) as u16,
                cid_len: 0,
            }
            .write(&mut out[..HEADER_LEN], &[]);
            self.push_stateless(Transmit { src: None, dst: remote, payload: out });
            self.stats.hello_verify_sent += 1;
            return;
        };
        // A session ID of another node's session: the driver fetches it from the fleet's store,
        // and this ClientHello waits for the answer.
        let cached = self.session_cache.contains(ch.session_id);
        if self.shared.must_look_up(ch.session_id, now, cached) {
            if let Ok(id) = <[u8; 32]>::try_from(ch.session_id) {
                let hello = hello.kept(body);
                self.shared.wait(WaitingHello { id, from: remote, hello, datagram_len });
            }
            return;
        }
        if !self.admit(remote, hello.record_seq, self.replaced_at(remote).3) {
            return;
        }
        // Read after `admit`, which may have evicted the session at this address.
        let (existing, pending, existing_in_handshake, replaced) = self.replaced_at(remote);
        let evictable = self.half_open.len().saturating_sub(replaced);
        if self.connections.len() >= self.role.config.max_connections + replaced && evictable == 0 {
            // Every slot holds an established session: those are never evicted for a handshake.
            self.stats.connections_refused += 1;
            return;
        }
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let verified = VerifiedHello {
            record_seq: hello.record_seq,
            message_seq: hello.message_seq,
            body,
            hello: ch,
            datagram_len,
            cached: self
                .session_cache
                .get(ch.session_id, crate::clock::unix_now(self.role.config.wall_clock, now)),
            ticket_keys: self.ticket_keys.clone(),
            issued_cid: self.issue_cid(ch),
            cached_rtt: self.adaptive().then(|| self.rtt_cache.get(remote.ip())).flatten(),
            // The HelloVerifyRequest: a record header, a handshake header and the cookie. A
            // reusable cookie may come from an earlier handshake: its age is no round trip.
            cookie_rtt: cookie_age
                .filter(|_| !self.role.config.reusable_cookies)
                .map(|age| (age, (HEADER_LEN + HANDSHAKE_HEADER_LEN + 3 + ch.cookie.len()) as u32)),
            client_chain: self.take_cached_client_chain(ch),
        };
        let mut conn = Connection::server(&self.role, now, remote, seed, verified);
        conn.count_hello_datagrams(u64::from(hello.earlier().datagrams));
        let h = ConnectionHandle(self.next_id);
        self.next_id += 1;
        self.connections.insert(h, Slot::new(conn, now));
        self.half_open.insert(h, remote.ip());
        *self.half_open_per_ip.entry(remote.ip()).or_default() += 1;
        self.stats.connections_accepted += 1;
        self.after(h);
        if !self.connections.contains_key(&h) {
            // The new ClientHello was refused (version, suites, keys): whatever lived on this
            // address goes on.
            return;
        }
        self.register_cids(h);
        self.events.push_back((h, Event::Accepted));
        if let Some(old) = pending {
            self.pending.remove(&remote);
            self.supersede(old);
            self.stats.replacements_abandoned += 1;
        }
        match existing {
            Some(old) if existing_in_handshake.is_some() => {
                self.supersede(old);
                self.stats.connections_replaced += 1;
                self.by_addr.insert(remote, h, &self.connections);
            }
            Some(_) => {
                self.pending.insert(remote, h);
            }
            None => {
                self.by_addr.insert(remote, h, &self.connections);
            }
        }
        self.make_room_for(h, remote.ip());
    }

    /// The session and the pending replacement at `remote`, the session if it is still in its
    /// handshake, and how many connections a new handshake from there replaces at once (they
    /// do not count against the table).
    #[allow(clippy::type_complexity)]
    fn replaced_at(
        &self,
        remote: SocketAddr,
    ) -> (Option<ConnectionHandle>, Option<ConnectionHandle>, Option<ConnectionHandle>, usize) {
        let existing = self.by_addr.get(&remote, &self.connections);
        let pending = self.pending.get(&remote).copied();
        let existing_in_handshake =
            existing.filter(|h| self.connections.get(h).is_some_and(|s| !s.conn.is_established()));
        let replaced = usize::from(pending.is_some()) + usize::from(existing_in_handshake.is_some());
        (existing, pending, existing_in_handshake, replaced)
    }

    /// A random Connection ID of `len` bytes no session of ours has (RFC 9146 §3: the receiver
    /// tells sessions apart by it).
    pub(super) fn fresh_cid(&mut self, len: u8) -> Vec<u8> {
        let mut cid = vec![0u8; len as usize];
        let fixed = self.cid_prefix.len().min(cid.len());
        cid[..fixed].copy_from_slice(&self.cid_prefix[..fixed]);
        for _ in 0..16 {
            self.rng.fill_bytes(&mut cid[fixed..]);
            if !self.by_cid.is_taken(&cid) {
                break;
            }
        }
        cid
    }

    /// Evicts the oldest half-open handshakes (never `new`, never an established session)
    /// until the limits hold again.
    fn make_room_for(&mut self, new: ConnectionHandle, ip: IpAddr) {
        if let Some(per_ip) = self.role.config.max_handshakes_per_ip {
            while self.half_open_per_ip.get(&ip).copied().unwrap_or(0) > per_ip {
                let Some(oldest) =
                    self.half_open.iter().find(|&(&h, &a)| a == ip && h != new).map(|(&h, _)| h)
                else {
                    break;
                };
                self.evict(oldest);
            }
        }
        while self.half_open.len() > self.role.config.max_handshakes
            || self.connections.len() > self.role.config.max_connections
        {
            let Some(oldest) = self.half_open.keys().copied().find(|&h| h != new) else { break };
            self.evict(oldest);
        }
    }

    fn evict(&mut self, h: ConnectionHandle) {
        if self.remove_connection(h).is_some() {
            self.stats.handshakes_evicted += 1;
        }
    }
}
