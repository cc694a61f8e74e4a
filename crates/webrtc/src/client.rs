//! The offering side of a data-channel session, sans-IO: a full, controlling ICE agent with
//! host candidates only, DTLS in the role the answer leaves us after our `actpass` (client for
//! `a=setup:passive`, server for `active`), SCTP inside DTLS, DCEP. It is what `fastshake
//! webrtc connect` runs against a server such as ours or pion, and what the in-memory tests
//! open sessions to [`crate::server::Server`] with.
//!
//! # Nomination
//!
//! By default ([`Nomination::Aggressive`]) the first check to each of the answer's candidates
//! already carries USE-CANDIDATE (aggressive nomination, RFC 5245 §8.1.1.2): an answerer that is
//! ICE-lite has one host candidate per address family, so there is nothing to choose, and
//! regular nomination (RFC 8445 §8.1.1) would spend a round trip before the lite side may send
//! (RFC 8445 §12.1.1). The first success response selects its pair and starts DTLS on it. A
//! full answerer (pion, a browser, our server in full mode) takes that nomination only after its
//! own check on the pair succeeded (RFC 8445 §7.3.1.5), so the answerer's checks are answered
//! too.
//!
//! [`Nomination::Regular`] is RFC 8445 §8.1.1's regular nomination, timed the way Chromium
//! does it: checks without USE-CANDIDATE; the first success response makes its pair valid, and
//! DTLS starts on it at once (a full agent may send on a valid pair before selection, §12.1);
//! a nominating check on that pair follows after a delay (Chromium's is its 48 ms ping
//! interval), and its success selects the pair. Against an ICE-lite answerer that delay is
//! paid before the answerer may send; a full one may answer the ClientHello before it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fastshake_core::{Instant, Transmit};
use fastshake_dtls as dtls;

use crate::channels::ChannelLayer;
pub use crate::channels::SctpSetup;
use crate::dcep::{ChannelType, Channels, DtlsRole};
use crate::demux::{classify, Protocol};
use crate::dtls_side::DtlsSide;
use crate::ice::Credentials;
use crate::peer::{PeerError, PeerEvent, MAX_MESSAGE_SIZE, SCTP_PORT};
use crate::sdp::{Fingerprint, Offer, SdpError, Setup};
use crate::stun::{self, Class, IntegrityKey, MessageBuilder, Method, TransactionId};

/// Checks sent per candidate at most before it is given up (RFC 8489 §6.2.1's Rc is 7).
const MAX_CHECKS: u32 = 7;
/// The first check retransmission; doubled each time (RFC 8489 §6.2.1, with ICE's shorter
/// RTO for a host pair on which a round trip is a loopback or LAN one).
const CHECK_RTO: Duration = Duration::from_millis(100);
/// Consent checks on the selected pair (RFC 7675 §5.1: every 5 s, jittered; ours is not).
const CONSENT_INTERVAL: Duration = Duration::from_secs(5);

/// How the offerer, the controlling agent, nominates (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nomination {
    /// USE-CANDIDATE in every check (RFC 5245 §8.1.1.2): the first answered one selects.
    #[default]
    Aggressive,
    /// Regular nomination (RFC 8445 §8.1.1): DTLS starts on the first valid pair, and a check
    /// with USE-CANDIDATE goes to it `delay` later; its success selects the pair.
    Regular {
        /// From the pair becoming valid to the nominating check (Chromium: about 48 ms).
        delay: Duration,
    },
}

/// What the offerer needs.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Our ICE credentials.
    pub credentials: Credentials,
    /// Our certificate and key (self-signed).
    pub certified_key: Arc<dtls::CertifiedKey>,
    /// The SHA-256 fingerprint of our certificate, written into the offer.
    pub fingerprint: [u8; 32],
    /// DTLS versions offered.
    pub versions: dtls::Versions,
    /// DTLS 1.3 groups, the first with a key share.
    pub groups: Vec<dtls::NamedGroup>,
    /// Unix time for the engines.
    pub wall_clock: dtls::WallClock,
    /// The ICE tiebreaker (RFC 8445 §7.1.3), random.
    pub tiebreaker: u64,
    /// How we nominate.
    pub nomination: Nomination,
    /// How the SCTP association inside DTLS is opened.
    pub sctp_setup: SctpSetup,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The SDP does not parse or lacks a data section.
    #[error("answer: {0}")]
    Sdp(#[from] SdpError),
    /// The answer's a=setup is neither active nor passive (RFC 8842 §5.3).
    #[error("the answer chose a=setup:{0}: an answer to actpass is active or passive (RFC 8842 §5.3)")]
    Setup(&'static str),
    /// No candidate with an IP address (an mDNS name cannot be resolved here).
    #[error("the answer has no candidate with an IP address")]
    NoCandidate,
    /// The answer's SNAP INIT is malformed.
    #[error("the answer's a=sctp-init: {0}")]
    Snap(fastshake_sctp::SnapError),
    /// No SHA-256 fingerprint to check the server's certificate against.
    #[error("the answer has no sha-256 fingerprint")]
    NoFingerprint,
}

struct Check {
    to: SocketAddr,
    transaction: TransactionId,
    sent: u32,
    next: Instant,
    /// Carries USE-CANDIDATE.
    nominate: bool,
}

/// The offering side of one session.
pub struct Client {
    config: ClientConfig,
    remote_ufrag: String,
    remote_key: Option<IntegrityKey>,
    remote_fingerprints: Vec<[u8; 32]>,
    checks: Vec<Check>,
    selected: Option<SocketAddr>,
    /// Where DTLS runs: the selected pair, or with regular nomination the first valid one.
    dtls_remote: Option<SocketAddr>,
    next_consent: Option<Instant>,
    transaction_counter: u64,
    dtls: Option<DtlsSide>,
    /// The answer chose `a=setup:active`: we are the DTLS server (RFC 8842 §5.2).
    dtls_server: bool,
    layer: ChannelLayer,
    local: SocketAddr,
    seed: [u8; 32],
    out: VecDeque<Transmit>,
    events: VecDeque<PeerEvent>,
    closed: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("selected", &self.selected)
            .field("channels", &self.layer.channels().len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// An offerer on `local`; `seed` seeds the engines and the transaction ids.
    pub fn new(config: ClientConfig, local: SocketAddr, seed: [u8; 32]) -> Client {
        let mut sctp_seed = seed;
        sctp_seed[0] ^= 0x5c;
        let setup = config.sctp_setup;
        Client {
            config,
            remote_ufrag: String::new(),
            remote_key: None,
            remote_fingerprints: Vec::new(),
            checks: Vec::new(),
            selected: None,
            dtls_remote: None,
            next_consent: None,
            transaction_counter: 0,
            dtls: None,
            dtls_server: false,
            layer: ChannelLayer::new(DtlsRole::Client, setup, sctp_seed),
            local,
            seed,
            out: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
        }
    }

    /// The SDP offer: one data section, `a=setup:actpass` (RFC 8842 §5.2 requires it of an
    /// offerer), our credentials and fingerprint, no candidates (the answerer is ICE-lite and
    /// learns our address from our checks).
    pub fn offer(&mut self, session_id: u64) -> String {
        let fingerprint = Fingerprint::sha256(self.config.fingerprint);
        let lines = [
            "v=0".to_string(),
            format!("o=- {session_id} 1 IN IP4 0.0.0.0"),
            "s=-".into(),
            "t=0 0".into(),
            "a=group:BUNDLE 0".into(),
            "m=application 9 UDP/DTLS/SCTP webrtc-datachannel".into(),
            "c=IN IP4 0.0.0.0".into(),
            format!("a=ice-ufrag:{}", self.config.credentials.ufrag()),
            format!("a=ice-pwd:{}", self.config.credentials.pwd()),
            format!("a=fingerprint:{fingerprint}"),
            "a=setup:actpass".into(),
            "a=mid:0".into(),
            format!("a=sctp-port:{SCTP_PORT}"),
            format!("a=max-message-size:{MAX_MESSAGE_SIZE}"),
        ];
        let mut lines = lines.to_vec();
        if self.config.sctp_setup == SctpSetup::Snap {
            lines.push(format!("a=sctp-init:{}", crate::sdp::base64_encode(&self.layer.snap_offer())));
        }
        let mut sdp = lines.join("\r\n");
        sdp.push_str("\r\n");
        sdp
    }

    /// Takes the answer and starts the connectivity checks.
    pub fn accept_answer(&mut self, now: Instant, answer: &str) -> Result<(), AnswerError> {
        let answer = Offer::parse(answer)?;
        let data = &answer.data;
        // We offered actpass: the answerer picks (RFC 8842 §5.3); without a=setup it is
        // active (RFC 4145 §4), as are browsers and pion by default (RFC 5763 §5).
        self.dtls_server = match data.setup {
            Some(Setup::Passive) => false,
            Some(Setup::Active) | None => true,
            Some(other) => return Err(AnswerError::Setup(other.as_str())),
        };
        self.layer.set_role(if self.dtls_server { DtlsRole::Server } else { DtlsRole::Client });
        self.remote_fingerprints = data
            .sha256_fingerprints()
            .filter_map(|f| <[u8; 32]>::try_from(f.bytes.as_slice()).ok())
            .collect();
        if self.remote_fingerprints.is_empty() {
            return Err(AnswerError::NoFingerprint);
        }
        let candidates: Vec<SocketAddr> = data
            .candidates
            .iter()
            .filter(|c| c.is_udp() && c.component == 1)
            .filter_map(|c| match &c.address {
                crate::sdp::CandidateAddress::Ip(ip) => Some(SocketAddr::new(*ip, c.port)),
                _ => None,
            })
            .filter(|a| a.is_ipv4() == self.local.is_ipv4())
            .collect();
        if candidates.is_empty() {
            return Err(AnswerError::NoCandidate);
        }
        self.layer.set_remote_port(data.sctp_port);
        if let (SctpSetup::Snap, Some(init)) = (self.config.sctp_setup, data.sctp_init.as_deref()) {
            self.layer.snap_answer(init).map_err(AnswerError::Snap)?;
        }
        self.remote_ufrag = data.ice_ufrag.clone();
        self.remote_key = Some(IntegrityKey::short_term(&data.ice_pwd));
        let nominate = self.config.nomination == Nomination::Aggressive;
        for to in candidates {
            let transaction = self.next_transaction();
            self.checks.push(Check { to, transaction, sent: 0, next: now, nominate });
        }
        self.handle_timeout(now);
        Ok(())
    }

    fn next_transaction(&mut self) -> TransactionId {
        self.transaction_counter += 1;
        let mut id = [0u8; 12];
        id[..4].copy_from_slice(&self.seed[..4]);
        id[4..].copy_from_slice(&self.transaction_counter.to_be_bytes());
        TransactionId(id)
    }

    /// A Binding request, nominating its pair if `nominate` (see the module docs).
    fn check(&self, transaction: TransactionId, nominate: bool) -> Option<Vec<u8>> {
        let key = self.remote_key.as_ref()?;
        let username = format!("{}:{}", self.remote_ufrag, self.config.credentials.ufrag());
        let builder = MessageBuilder::new(Class::Request, Method::Binding, transaction)
            .username(&username)
            // A peer-reflexive candidate's priority (RFC 8445 §7.1.1): type preference 110.
            .priority(crate::sdp::candidate_priority(110, 65535, 1))
            .ice_controlling(self.config.tiebreaker);
        let builder = if nominate { builder.use_candidate() } else { builder };
        builder.message_integrity(key).fingerprint().into_bytes().ok()
    }

    /// Opens a channel and gives its stream id. Messages may be sent on it at once: before the
    /// association is open they wait and ride with the SCTP handshake (RFC 8831 §6.6), so the
    /// first of them needs no round trip of its own. [`PeerEvent::ChannelAcked`] follows the
    /// peer's ACK. Refused before the answer, whose a=setup decides our DTLS role and so the
    /// parity of our stream ids (RFC 8832 §6).
    pub fn open_channel(
        &mut self,
        now: Instant,
        label: &str,
        channel_type: ChannelType,
    ) -> Result<u16, PeerError> {
        if self.remote_key.is_none() {
            return Err(PeerError::NoAnswer);
        }
        let stream = self.layer.open(label, channel_type)?;
        self.pump(now);
        Ok(stream)
    }

    /// Sends on channel `stream`.
    pub fn send(&mut self, now: Instant, stream: u16, data: &[u8], binary: bool) -> Result<(), PeerError> {
        self.layer.send(stream, data, binary)?;
        self.pump(now);
        Ok(())
    }

    /// Closes channel `stream` by resetting its stream (RFC 8831 §6.7);
    /// [`PeerEvent::ChannelClosed`] follows once the peer reset its side too.
    pub fn close_channel(&mut self, now: Instant, stream: u16) -> Result<(), PeerError> {
        self.layer.close(stream)?;
        self.pump(now);
        Ok(())
    }

    /// Ends the session: close_notify to the server, which then forgets it at once.
    pub fn close(&mut self, now: Instant) {
        if let Some(dtls) = self.dtls.as_mut() {
            dtls.close();
        }
        self.pump(now);
        self.end("closed by us".into());
    }

    /// The channels opened so far, by stream id.
    pub fn channels(&self) -> &Channels {
        self.layer.channels()
    }

    /// The selected pair's remote address.
    pub fn selected(&self) -> Option<SocketAddr> {
        self.selected
    }

    /// Whether the session ended.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// A datagram arrived from `remote`.
    pub fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        if self.closed {
            return;
        }
        match classify(datagram) {
            Protocol::Stun => self.stun(now, remote, datagram),
            Protocol::Dtls if Some(remote) == self.dtls_remote => {
                if let Some(dtls) = self.dtls.as_mut() {
                    dtls.handle_datagram(now, remote, datagram);
                }
            }
            _ => return,
        }
        self.pump(now);
    }

    fn stun(&mut self, now: Instant, remote: SocketAddr, datagram: &[u8]) {
        let Ok(message) = stun::Message::parse(datagram) else { return };
        if message.verify_fingerprint().is_err() || message.method() != Method::Binding {
            return;
        }
        if message.class() == Class::Request {
            self.answer_check(remote, &message);
            return;
        }
        if message.class() != Class::SuccessResponse {
            return;
        }
        let Some(key) = self.remote_key.as_ref() else { return };
        // A response authenticates with the answerer's password (RFC 8445 §7.2.5.2).
        if message.verify_integrity(key).is_err() {
            return;
        }
        let transaction = message.transaction_id();
        let Some(at) = self.checks.iter().position(|c| c.transaction == transaction && c.to == remote) else {
            return;
        };
        let check = self.checks.remove(at);
        if self.selected.is_some() {
            return;
        }
        if let (Nomination::Regular { delay }, false) = (self.config.nomination, check.nominate) {
            // The first valid pair (RFC 8445 §7.2.5.3.2): DTLS may start on it (§12.1), and it
            // is nominated `delay` later (§8.1.1).
            if self.dtls_remote.is_none() {
                self.checks.clear();
                let transaction = self.next_transaction();
                self.checks.push(Check {
                    to: check.to,
                    transaction,
                    sent: 0,
                    next: now + delay,
                    nominate: true,
                });
                self.start_dtls(now, check.to);
            }
            return;
        }
        self.selected = Some(check.to);
        self.checks.clear();
        self.next_consent = Some(now + CONSENT_INTERVAL);
        self.events.push_back(PeerEvent::Selected(check.to));
        if self.dtls_remote.is_none() {
            self.start_dtls(now, check.to);
        }
    }

    /// Answers the answerer's own connectivity check. A full answerer (pion, a browser) is
    /// controlled and accepts our nomination of a pair only once its own check on that pair has
    /// succeeded (RFC 8445 §7.3.1.5), so every full agent must answer checks (§7.3); an ICE-lite
    /// answerer sends none. Only a check that authenticates gets an answer: USERNAME
    /// "OUR-UFRAG:THEIR-UFRAG" and MESSAGE-INTEGRITY under our password (§7.2.2); the response
    /// carries XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY under our password and FINGERPRINT (RFC 8489
    /// §9.1.3). One with ICE-CONTROLLING gets 487: we offered, so we are controlling (RFC 8445
    /// §6.1.1), and this agent does not change roles.
    fn answer_check(&mut self, remote: SocketAddr, request: &stun::Message<'_>) {
        if self.remote_key.is_none() {
            return;
        }
        let expected = format!("{}:{}", self.config.credentials.ufrag(), self.remote_ufrag);
        if request.username().ok().flatten() != Some(expected.as_str()) {
            return;
        }
        let key = IntegrityKey::short_term(self.config.credentials.pwd());
        if request.verify_integrity(&key).is_err() {
            return;
        }
        let transaction = request.transaction_id();
        let response = if request.ice_controlling().ok().flatten().is_some() {
            MessageBuilder::new(Class::ErrorResponse, Method::Binding, transaction)
                .error_code(stun::error_code::ROLE_CONFLICT, "Role Conflict")
        } else {
            MessageBuilder::new(Class::SuccessResponse, Method::Binding, transaction)
                .xor_mapped_address(SocketAddr::new(remote.ip().to_canonical(), remote.port()))
        };
        if let Ok(payload) = response.message_integrity(&key).fingerprint().into_bytes() {
            self.out.push_back(Transmit { src: None, dst: remote, payload });
        }
    }

    fn start_dtls(&mut self, now: Instant, remote: SocketAddr) {
        let Ok(anchors) = dtls::TrustAnchors::pinned_sha256(self.remote_fingerprints.iter().copied()) else {
            self.end("no fingerprint to trust".into());
            return;
        };
        if self.dtls_server {
            let config = dtls::ServerConfig {
                versions: self.config.versions,
                groups: self.config.groups.clone(),
                certified_key: Some(self.config.certified_key.clone()),
                client_auth: dtls::ClientAuth::Require,
                client_trust_anchors: Some(Arc::new(anchors)),
                wall_clock: Some(self.config.wall_clock),
                // Our checks proved the peer's address (RFC 8445 §7.2.5.3).
                address_validation: dtls::AddressValidation::Transport,
                srtp_profiles: crate::peer::SRTP_PROFILES.to_vec(),
                max_connections: 2,
                ..Default::default()
            };
            match dtls::Endpoint::new(Arc::new(config), self.seed) {
                Ok(endpoint) => {
                    self.dtls_remote = Some(remote);
                    self.dtls = Some(DtlsSide::server(endpoint, self.local));
                }
                Err(e) => self.end(format!("DTLS server: {e}")),
            }
            return;
        }
        let config = dtls::ClientConfig {
            versions: self.config.versions,
            groups: self.config.groups.clone(),
            trust_anchors: Some(Arc::new(anchors)),
            certified_key: Some(self.config.certified_key.clone()),
            wall_clock: Some(self.config.wall_clock),
            // The answerer is ICE-lite: our check proved the address, so it takes the first
            // ClientHello with the hybrid's share at once.
            address_proven: true,
            // What browsers offer first (RFC 8827 §6.5 asks for ECDHE with AES-GCM); CCM_8, the
            // IoT profile's, is not among WebRTC's suites.
            suites: vec![dtls::CipherSuite::EcdheEcdsaWithAes128GcmSha256],
            srtp_profiles: crate::peer::SRTP_PROFILES.to_vec(),
            ..Default::default()
        };
        self.dtls_remote = Some(remote);
        self.dtls =
            Some(DtlsSide::Client(dtls::Connection::client(Arc::new(config), now, remote, self.seed)));
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<PeerEvent> {
        self.events.pop_front()
    }

    /// When [`Client::handle_timeout`] is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let checks = self.checks.iter().map(|c| c.next).min();
        let dtls = self.dtls.as_ref().and_then(DtlsSide::poll_timeout);
        [checks, self.next_consent, dtls, self.layer.poll_timeout()].into_iter().flatten().min()
    }

    /// The deadline of [`Client::poll_timeout`] passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        let mut due = Vec::new();
        for check in &mut self.checks {
            if check.next <= now {
                check.sent += 1;
                check.next = now + CHECK_RTO * (1 << check.sent.min(6));
                due.push((check.to, check.transaction, check.nominate));
            }
        }
        self.checks.retain(|c| c.sent <= MAX_CHECKS);
        if self.selected.is_none() && self.checks.is_empty() && self.remote_key.is_some() && due.is_empty() {
            self.end("no connectivity check was answered (ICE failed)".into());
            return;
        }
        if let (Some(at), Some(selected)) = (self.next_consent, self.selected) {
            if at <= now {
                // A consent check (RFC 7675 §5.1); its answer needs no bookkeeping here, the
                // answerer's own timer is what ends a session whose peer left. It carries
                // USE-CANDIDATE too: the pair is nominated already, and stays so.
                let transaction = self.next_transaction();
                self.next_consent = Some(now + CONSENT_INTERVAL);
                due.push((selected, transaction, true));
            }
        }
        for (to, transaction, nominate) in due {
            if let Some(payload) = self.check(transaction, nominate) {
                self.out.push_back(Transmit { src: None, dst: to, payload });
            }
        }
        if let Some(dtls) = self.dtls.as_mut() {
            dtls.handle_timeout(now);
        }
        self.layer.handle_timeout(now);
        self.pump(now);
    }

    fn end(&mut self, why: String) {
        if !self.closed {
            self.closed = true;
            self.events.push_back(PeerEvent::Closed(why));
        }
    }

    fn pump(&mut self, now: Instant) {
        loop {
            let mut progress = false;
            if let (Some(remote), Some(dtls)) = (self.dtls_remote, self.dtls.as_mut()) {
                while let Some(event) = dtls.poll_event() {
                    progress = true;
                    match event {
                        dtls::Event::Connected(summary) => {
                            self.events.push_back(PeerEvent::DtlsConnected(Box::new(summary)));
                            self.layer.dtls_connected(now, remote);
                        }
                        dtls::Event::ApplicationData(mut packet) => {
                            self.layer.handle_packet(now, self.local, &mut packet);
                        }
                        dtls::Event::Closed => {
                            self.end("the server closed DTLS (close_notify)".into());
                            return;
                        }
                        dtls::Event::Failed(error) => {
                            self.end(format!("DTLS failed: {error}"));
                            return;
                        }
                        _ => {}
                    }
                }
            }
            while let Some(packet) = self.layer.poll_packet(now) {
                progress = true;
                if let Some(dtls) = self.dtls.as_mut() {
                    // One SCTP packet, one DTLS record (RFC 8261 §4).
                    let _ = dtls.send(&packet);
                }
            }
            progress |= self.layer.drain(&mut self.events);
            if let Some(why) = self.layer.take_ended() {
                self.end(why);
            }
            if let Some(dtls) = self.dtls.as_mut() {
                while let Some(transmit) = dtls.poll_transmit(now) {
                    progress = true;
                    self.out.push_back(transmit);
                }
            }
            if !progress || self.closed {
                return;
            }
        }
    }
}
