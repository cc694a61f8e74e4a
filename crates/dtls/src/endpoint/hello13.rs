//! A DTLS 1.3 ClientHello at the endpoint: the stateless HelloRetryRequest (RFC 9147 §5.1,
//! RFC 8446 §4.1.4) whose cookie carries what the server would otherwise keep (the hash of the
//! first ClientHello for the transcript, RFC 8446 §4.4.1, and the suite and group chosen),
//! sealed with the endpoint's cookie MAC, and the session made from a ClientHello that returns
//! a valid one.

use super::incoming::HelloInfo;
use super::{ConnectionHandle, Endpoint, Slot};
use crate::alert::{AlertDescription, AlertLevel};
use crate::config::AddressValidation;
use crate::connection::{Connection, Event, VerifiedHello13};
use crate::crypto::tls13::{Suite13, SuiteHash};
use crate::error::Mismatch;
use crate::handshake::{
    client_shares, offered_versions, psk_modes_allow, transcript_header, u16_list, ClientHello,
    HandshakeType, NamedGroup, OutExtensions, ServerHello, DTLS_1_3, HANDSHAKE_HEADER_LEN,
    HELLO_RETRY_REQUEST_RANDOM, PSK_KE,
};
use crate::record::{write_record, ContentType, HEADER_LEN};
use fastshake_core::{Instant, Transmit, COOKIE_LEN};
use rand_core::RngCore;
use std::net::SocketAddr;
use std::time::Duration;

/// Keeps the 1.3 cookie's MAC inputs apart from the 1.2 ones under the same key.
const COOKIE13_LABEL: &[u8] = b"fastshake dtls13 cookie";

/// What a 1.3 cookie holds besides its tag.
pub(crate) struct CookieState {
    pub suite: Suite13,
    /// The group the HelloRetryRequest asked a key share for, if it did.
    pub group: Option<NamedGroup>,
    /// Hash of the first ClientHello (with the TLS 1.3 message header); empty for a
    /// ClientHello let in without a cookie exchange (see `early13`).
    pub hello_hash: Vec<u8>,
    /// Let in without a cookie exchange, and its early data may be taken (never in a cookie).
    pub zero_rtt: bool,
    /// The first ClientHello offered early data, which the cookie exchange refused (RFC 8446
    /// §4.1.2: the second one drops the offer): the server's summary says so.
    pub early_offered: bool,
}

impl CookieState {
    /// `suite, group (0: none), hash length (top bit: early data offered), hash`, then the tag.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + self.hello_hash.len() + COOKIE_LEN);
        out.extend_from_slice(&self.suite.id().to_be_bytes());
        out.extend_from_slice(&self.group.map_or(0, NamedGroup::code).to_be_bytes());
        out.push(self.hello_hash.len() as u8 | if self.early_offered { 0x80 } else { 0 });
        out.extend_from_slice(&self.hello_hash);
        out
    }

    fn decode(body: &[u8]) -> Option<(Self, usize)> {
        let suite = Suite13::from_id(u16::from_be_bytes([*body.first()?, *body.get(1)?]))?;
        let group = match u16::from_be_bytes([*body.get(2)?, *body.get(3)?]) {
            0 => None,
            code => Some(NamedGroup::from_code(code)?),
        };
        let flagged = *body.get(4)?;
        let (early_offered, len) = (flagged & 0x80 != 0, usize::from(flagged & 0x7f));
        if len != suite.hash().len() {
            return None;
        }
        let hello_hash = body.get(5..5 + len)?.to_vec();
        Some((CookieState { suite, group, hello_hash, zero_rtt: false, early_offered }, 5 + len))
    }
}

/// The HelloRetryRequest the server sends (or, from the cookie, sent): written the same way
/// both times, since the transcript holds it (RFC 8446 §4.4.1).
pub(crate) fn hello_retry_request(session_id: &[u8], state: &CookieState, cookie: &[u8]) -> Vec<u8> {
    let ext = OutExtensions {
        selected_version: Some(DTLS_1_3),
        cookie13: Some(cookie),
        hrr_group: state.group.map(NamedGroup::code),
        ..Default::default()
    };
    let mut body = Vec::with_capacity(64 + cookie.len());
    ServerHello::encode13(&mut body, &HELLO_RETRY_REQUEST_RANDOM, session_id, state.suite.id(), &ext);
    body
}

impl Endpoint {
    /// Whether this endpoint answers `ch` in DTLS 1.3.
    pub(super) fn speaks13(&self, ch: &ClientHello<'_>) -> bool {
        self.role.config.versions.dtls13()
            && ch
                .extensions
                .supported_versions
                .and_then(|d| offered_versions(d).ok())
                .is_some_and(|v| v.contains(DTLS_1_3))
    }

    /// The cookie tag's inputs: the client's address, the label that keeps 1.3 cookies apart
    /// from 1.2 ones under the same key, and what the cookie carries. The tag is 1.2's
    /// (`sign_cookie`): dated under the adaptive policy, so the ClientHello that returns it
    /// tells the stateless server the round trip of the cookie exchange at no cost in bytes.
    fn cookie13_tag(&self, now: Instant, remote: &SocketAddr, state: &[u8], out: &mut [u8]) {
        let (addr, n) = super::hello::addr_bytes(remote);
        out.copy_from_slice(&self.sign_cookie(now, &[&addr[..n], COOKIE13_LABEL, state, &[], &[], &[]]));
    }

    /// What a cookie of ours for `remote` carries, if it is one and fresh, and its age when it
    /// carries its issue time.
    fn verify_cookie13(
        &self,
        now: Instant,
        remote: &SocketAddr,
        cookie: &[u8],
    ) -> Option<(CookieState, Option<Duration>)> {
        let (state, len) = CookieState::decode(cookie)?;
        let (addr, n) = super::hello::addr_bytes(remote);
        let (fields, tag) = cookie.split_at(len);
        let age = self.verify_cookie(now, tag, &[&addr[..n], COOKIE13_LABEL, fields, &[], &[], &[]])?;
        Some((state, age))
    }

    /// A client that offers no version we speak (a DTLS 1.3 server and a hello offering 1.2
    /// alone, RFC 8446 §4.2.1): protocol_version, statelessly.
    pub(super) fn refuse_version(&mut self, remote: SocketAddr, record_seq: u64, ch: &ClientHello<'_>) {
        let offered: Vec<u16> = match ch.extensions.supported_versions.and_then(|d| offered_versions(d).ok())
        {
            Some(list) => list.iter().collect(),
            None => vec![ch.version],
        };
        let reason = Mismatch::Versions { offered, ours: vec![DTLS_1_3] };
        self.refuse_for(remote, record_seq, AlertDescription::ProtocolVersion, reason);
    }

    /// [`Self::refuse13`] for a mismatch, kept for [`Endpoint::poll_refusal`].
    fn refuse_for(&mut self, remote: SocketAddr, record_seq: u64, alert: AlertDescription, reason: Mismatch) {
        self.refuse13(remote, record_seq, alert);
        self.note_refusal(super::HelloRefusal { remote, reason, alert });
    }

    /// A fatal alert in a plaintext record, statelessly (nothing was agreed).
    fn refuse13(&mut self, remote: SocketAddr, record_seq: u64, alert: AlertDescription) {
        let mut out = vec![0u8; HEADER_LEN + 2];
        write_record(
            &mut out,
            ContentType::Alert,
            0,
            record_seq,
            None,
            &[&[AlertLevel::Fatal.to_u8(), alert.code()]],
        );
        self.push_stateless(Transmit { src: None, dst: remote, payload: out });
        self.stats.connections_refused += 1;
    }

    /// A 1.3 ClientHello that is no copy of a session's: a HelloRetryRequest with a cookie
    /// unless it returns a valid one, else a new session.
    pub(super) fn new_client_hello13(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        hello: &HelloInfo,
        ch: &ClientHello<'_>,
        body: &[u8],
        datagram_len: usize,
    ) {
        let ext = &ch.extensions;
        // RFC 9147 §5.3: a 1.3 hello's legacy_cookie is empty (a 1.2 server's cookie in a hello
        // a 1.3 server answers would mix the versions' handshakes).
        if !ch.cookie.is_empty() {
            self.refuse13(remote, hello.record_seq, AlertDescription::IllegalParameter);
            return;
        }
        // The suite: ours first among the client's (with a PSK alone only SHA-256 ones).
        let certificates = self.role.config.certified_key.is_some();
        let suite =
            self.role.config.suites13.iter().copied().find(|s| {
                ch.suites().any(|id| id == s.id()) && (certificates || s.hash() == SuiteHash::Sha256)
            });
        let Some(suite) = suite else {
            let served = self.role.config.suites13.iter().copied();
            let reason = Mismatch::CipherSuite {
                offered: ch.suites().collect(),
                served: served
                    .filter(|s| certificates || s.hash() == SuiteHash::Sha256)
                    .map(Into::into)
                    .collect(),
            };
            self.refuse_for(remote, hello.record_seq, AlertDescription::HandshakeFailure, reason);
            return;
        };
        if let Some((state, age)) = ext.cookie13.and_then(|c| self.verify_cookie13(now, &remote, c)) {
            self.accept13(now, remote, hello, ch, body, datagram_len, state, age);
            return;
        }
        if ext.cookie13.is_some() {
            self.stats.cookies_rejected += 1;
        }
        // A resumption with early data from the ticket's own address goes on without a cookie
        // exchange (RFC 9147 §5.1, see `early13`).
        if let Some(state) = self.zero_rtt_hello13(now, remote, ch, suite) {
            self.accept13(now, remote, hello, ch, body, datagram_len, state, None);
            return;
        }
        // The group: ours first among those the client supports; a HelloRetryRequest asks for
        // its key share unless the client sent one.
        let supported: Vec<u16> = ext.supported_groups.map(|g| u16_list(g).collect()).unwrap_or_default();
        let shares: Vec<u16> = ext
            .key_share
            .and_then(|d| client_shares(d).ok())
            .map(|s| s.iter().map(|e| e.group).collect())
            .unwrap_or_default();
        let group = self.role.config.groups.iter().copied().find(|g| supported.contains(&g.code()));
        // No group in common: only a PSK in psk_ke mode can key the session (RFC 8446 §4.2.9);
        // without one a HelloRetryRequest would lead nowhere (§4.1.1: handshake_failure).
        let psk_ke = ext.pre_shared_key.is_some()
            && ext.psk_key_exchange_modes.is_some_and(|m| psk_modes_allow(m, PSK_KE))
            && (!self.role.config.psks.is_empty() || self.ticket_keys.is_some());
        if group.is_none() && !psk_ke {
            let reason = Mismatch::Group {
                offered: supported,
                ours: self.role.config.groups.iter().map(|g| g.code()).collect(),
            };
            self.refuse_for(remote, hello.record_seq, AlertDescription::HandshakeFailure, reason);
            return;
        }
        let ask_for = group.filter(|g| !shares.contains(&g.code()));
        if self.role.config.address_validation == AddressValidation::Transport && ask_for.is_none() {
            let state = CookieState {
                suite,
                group: None,
                hello_hash: Vec::new(),
                zero_rtt: false,
                early_offered: false,
            };
            self.accept13(now, remote, hello, ch, body, datagram_len, state, None);
            return;
        }
        let hash = suite.hash();
        let mut first = transcript_header(HandshakeType::ClientHello, body.len() as u32).to_vec();
        first.extend_from_slice(body);
        let state = CookieState {
            suite,
            group: ask_for,
            hello_hash: hash.hash(&first).as_ref().to_vec(),
            zero_rtt: false,
            early_offered: ext.early_data.is_some(),
        };
        let mut cookie = state.encode();
        let at = cookie.len();
        cookie.resize(at + COOKIE_LEN, 0);
        let (fields, tag) = cookie.split_at_mut(at);
        self.cookie13_tag(now, &remote, fields, tag);
        let hrr = hello_retry_request(&[], &state, &cookie);
        // In as many datagrams as the MTU needs (a cookie of 69 bytes does not fit a 96-byte
        // 802.15.4 frame); RFC 9147 §5.1: a stateless server numbers its records from the
        // ClientHello's.
        let mut builder =
            crate::flight::DatagramBuilder::new(self.role.config.mtu.clamp(crate::config::MIN_MTU, 1 << 14));
        let mut seq = hello.record_seq;
        builder.push_handshake(0, HandshakeType::ServerHello, hello.message_seq, &hrr, None, &mut || {
            seq += 1;
            seq - 1
        });
        for payload in builder.finish() {
            self.push_stateless(Transmit { src: None, dst: remote, payload });
        }
        self.stats.hello_verify_sent += 1;
    }

    #[allow(clippy::too_many_arguments)]
    fn accept13(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        hello: &HelloInfo,
        ch: &ClientHello<'_>,
        body: &[u8],
        datagram_len: usize,
        state: CookieState,
        cookie_age: Option<Duration>,
    ) {
        if !self.admit(remote, hello.record_seq, self.replaced_at13(remote)) {
            return;
        }
        // The HelloRetryRequest the cookie came in, as the server sent it (one record).
        let cookie_rtt = cookie_age.zip(ch.extensions.cookie13).map(|(age, cookie)| {
            let hrr = hello_retry_request(&[], &state, cookie).len();
            (age, (HEADER_LEN + HANDSHAKE_HEADER_LEN + hrr).min(u32::MAX as usize) as u32)
        });
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let verified = VerifiedHello13 {
            record_seq: hello.record_seq,
            message_seq: hello.message_seq,
            body,
            hello: ch,
            datagram_len,
            state,
            ticket_keys: self.ticket_keys.clone(),
            early_origin: self.replay13.origin(),
            issued_cid: self.issue_cid(ch),
            cached_rtt: self.adaptive().then(|| self.rtt_cache.get(remote.ip())).flatten(),
            cookie_rtt,
            client_chain: self.take_cached_client_chain(ch),
        };
        let mut conn = Connection::server13(&self.role, now, remote, seed, verified);
        conn.count_hello_datagrams(u64::from(hello.earlier().datagrams));
        let h = ConnectionHandle(self.next_id);
        self.next_id += 1;
        self.connections.insert(h, Slot::new(conn, now));
        self.half_open.insert(h, remote.ip());
        *self.half_open_per_ip.entry(remote.ip()).or_default() += 1;
        self.stats.connections_accepted += 1;
        self.after(h);
        if !self.connections.contains_key(&h) {
            return;
        }
        self.register_cids(h);
        self.events.push_back((h, Event::Accepted));
        if let Some(old) = self.by_addr.insert(remote, h, &self.connections) {
            self.supersede(old);
            self.stats.connections_replaced += 1;
        }
    }

    fn replaced_at13(&self, remote: SocketAddr) -> usize {
        usize::from(self.by_addr.get(&remote, &self.connections).is_some())
    }
}
