//! One data-channel session as the answerer runs it: ICE (lite or full, controlled), then DTLS
//! as server, then SCTP inside DTLS (RFC 8261), then DCEP (RFC 8832), all on one socket (RFC
//! 7983), sans-IO.
//!
//! The layers stay the engines they are elsewhere: the DTLS [`dtls::Endpoint`] and the SCTP
//! [`sctp::Endpoint`] run unchanged, and this type only moves bytes between them. A DTLS
//! application record is one SCTP packet (RFC 8261 §4); the SCTP endpoint addresses its
//! association by the address the DTLS session came from, which stays its name even if ICE
//! later moves the session to another pair.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use fastshake_core::{Instant, Transmit};
use fastshake_dtls as dtls;
use fastshake_sctp as sctp;

use crate::channels::{ChannelLayer, SctpSetup};
use crate::dcep::{ChannelType, DcepError, DtlsRole};
use crate::demux::{classify, Protocol};
use crate::dtls_side::DtlsSide;
use crate::ice::{Credentials, CredentialsError, FullConfig, IceAgent, IceEvent, IceMode};
use crate::sped::{Sped, SpedState, MAX_RESPONSE_LEN};
use crate::stun;

/// The SCTP port both sides use unless SDP says otherwise (RFC 8841 §5).
pub const SCTP_PORT: u16 = 5000;

/// use_srtp profiles agreed though no media flows (RFC 8827 §6.5 requires DTLS-SRTP support;
/// pion/webrtc refuses a handshake without a profile): SRTP_AEAD_AES_128_GCM (RFC 7714) and
/// SRTP_AES128_CM_HMAC_SHA1_80 (RFC 5764 §4.1.2), browsers' first two.
pub const SRTP_PROFILES: [u16; 2] = [0x0007, 0x0001];

/// The largest message we take, announced as `a=max-message-size` (RFC 8841 §6). The SCTP
/// receive window is four times as large, so one whole message always fits beside others.
pub const MAX_MESSAGE_SIZE: usize = 256 * 1024;

/// DTLS datagrams that wait for ICE to allow sending at most (see [`Peer`]): a whole server
/// flight of either version with room to spare.
const MAX_HELD: usize = 32;

/// What the answerer needs to run one session.
///
/// [`fmt::Debug`](std::fmt::Debug) prints neither password nor the ICE randomness.
#[derive(Clone)]
pub struct PeerConfig {
    /// Our ICE credentials, as written in the answer.
    pub local: Credentials,
    /// The offer's `a=ice-ufrag`.
    pub remote_ufrag: String,
    /// ICE-lite or full (see [`IceAgent`]); the answer must say the same (`a=ice-lite` or not).
    pub ice_mode: IceMode,
    /// The offer's `a=ice-pwd`: a full agent keys its checks with it (RFC 8445 §7.2.2). Not
    /// used, nor checked, in lite mode.
    pub remote_pwd: String,
    /// Randomness for a full agent's tiebreaker and transaction ids ([`FullConfig::new`]), from
    /// a cryptographically secure source. Not used in lite mode.
    pub ice_random: [u8; FullConfig::RANDOM_LEN],
    /// The offer's SHA-256 fingerprints: the browser's certificate must have one of them.
    pub remote_fingerprints: Vec<[u8; 32]>,
    /// Our certificate and key, whose fingerprint the answer carries.
    pub certified_key: Arc<dtls::CertifiedKey>,
    /// DTLS versions accepted.
    pub versions: dtls::Versions,
    /// DTLS 1.3 key-exchange groups, most preferred first.
    pub groups: Vec<dtls::NamedGroup>,
    /// Unix time for the engines.
    pub wall_clock: dtls::WallClock,
    /// The browser's SCTP port (the offer's `a=sctp-port`).
    pub remote_sctp_port: u16,
    /// DTLS in STUN (draft-hancke-webrtc-sped): take the DTLS datagrams the browser embeds in
    /// its checks and embed ours in the responses. Set only when the offer announced it
    /// (`a=ice-options` with `sped` or `googspedv1`); checks without the attributes are
    /// answered as without it either way.
    pub dtls_in_stun: bool,
}

impl std::fmt::Debug for PeerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerConfig")
            .field("local", &self.local)
            .field("remote_ufrag", &self.remote_ufrag)
            .field("ice_mode", &self.ice_mode)
            .field("remote_fingerprints", &self.remote_fingerprints.len())
            .field("versions", &self.versions)
            .field("groups", &self.groups)
            .field("remote_sctp_port", &self.remote_sctp_port)
            .field("dtls_in_stun", &self.dtls_in_stun)
            .finish_non_exhaustive()
    }
}

/// Why a session could not be set up from a [`PeerConfig`].
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The offer's ICE credentials break RFC 8839's syntax.
    #[error("ICE credentials: {0}")]
    Credentials(#[from] CredentialsError),
    /// The offer names no SHA-256 fingerprint: nothing could authenticate the browser.
    #[error("the offer has no sha-256 fingerprint")]
    NoFingerprint,
    /// The DTLS configuration was refused.
    #[error("DTLS: {0}")]
    Dtls(#[from] dtls::Error),
    /// A channel operation failed.
    #[error("data channel: {0}")]
    Channel(#[from] DcepError),
    /// SCTP refused a message.
    #[error("SCTP: {0}")]
    Sctp(sctp::Error),
    /// The association is not open yet.
    #[error("the SCTP association is not open")]
    NotConnected,
    /// A channel was opened before the answer set our DTLS role.
    #[error("no answer yet: our DTLS role, which the answer's a=setup decides, gives a channel's stream id (RFC 8832 §6)")]
    NoAnswer,
}

/// What happened in a session, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// The browser nominated this address (ICE): the session's datagrams go there.
    Selected(SocketAddr),
    /// The DTLS handshake completed.
    DtlsConnected(Box<dtls::HandshakeSummary>),
    /// The DTLS handshake went (partly) through STUN (draft-hancke-webrtc-sped); follows
    /// [`PeerEvent::DtlsConnected`] when the exchange was on.
    DtlsInStun {
        /// The browser's DTLS datagrams taken from its checks (or responses to ours).
        received: u32,
        /// Our DTLS datagrams that rode in responses.
        sent: u32,
    },
    /// The SCTP association inside DTLS is open.
    SctpConnected {
        /// Which handshake opened it: regular (RFC 9260), cookieless (seed 004's alternative
        /// handshake inside DTLS) or SNAP.
        handshake: sctp::HandshakeKind,
        /// Messages that rode in the INIT and were taken (the alternative handshake's data).
        zero_rtt: usize,
    },
    /// The browser opened a channel (we acknowledged it).
    ChannelOpened {
        /// Its stream id.
        stream: u16,
        /// Its label.
        label: String,
        /// Its subprotocol.
        protocol: String,
        /// Reliability and ordering.
        channel_type: ChannelType,
    },
    /// A channel we opened was acknowledged.
    ChannelAcked {
        /// Its stream id.
        stream: u16,
    },
    /// A message arrived on a channel.
    Message {
        /// The channel's stream id.
        stream: u16,
        /// The payload.
        data: Vec<u8>,
        /// Binary (PPID 53/57) rather than a string (51/56).
        binary: bool,
    },
    /// A channel is closed: its stream was reset both ways (RFC 8831 §6.7), and its id may be
    /// used again.
    ChannelClosed {
        /// Its stream id.
        stream: u16,
        /// Its label.
        label: String,
    },
    /// A message was refused by the channel layer (and dropped); the session goes on.
    ChannelError(String),
    /// The session ended: consent lost, DTLS failed or closed, or SCTP aborted.
    Closed(String),
}

/// One browser's session: ICE agent, DTLS server, SCTP association, channels.
///
/// # When datagrams flow
///
/// DTLS is taken only from addresses that passed an authenticated ICE check, which is also why
/// the DTLS server skips its cookie exchange ([`dtls::AddressValidation::Transport`]): the
/// check already proved the address. Our DTLS datagrams are held until
/// [`IceAgent::may_send_to`] allows an address (see [`IceAgent`]):
///
/// - ICE-lite: until the browser nominates a pair, the earliest a lite agent may send (RFC 8445
///   §12.1.1 with §7.3.2); then they go to the selected address.
/// - Full: until our triggered check (§7.3.1.4) to an address the browser checked from is
///   answered, which makes the pair valid; a full agent may send on any valid pair before
///   selection (§12.1). They go to the address the DTLS session came from once its pair is
///   valid, else to the pair that became valid first; after the browser's nomination selects
///   a pair, only to that one (§12.1).
///
/// The agent's own checks (full mode) go out through [`Peer::poll_transmit`] with the rest.
pub struct Peer {
    ice: IceAgent,
    dtls: DtlsSide,
    layer: ChannelLayer,
    local: SocketAddr,
    held: VecDeque<Transmit>,
    out: VecDeque<Transmit>,
    events: VecDeque<PeerEvent>,
    closed: bool,
    sped: Sped,
    /// The address whose check first carried DTLS in STUN: embedded DTLS is taken from its
    /// checks only, so that one DTLS connection (keyed by address) gets the handshake.
    sped_remote: Option<SocketAddr>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("local", &self.local)
            .field("selected", &self.ice.selected())
            .field("dtls_remote", &self.dtls.session_remote())
            .field("channels", &self.layer.channels().len())
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// A session answering on `local`; `seed` seeds both engines.
    pub fn new(config: PeerConfig, local: SocketAddr, seed: [u8; 32]) -> Result<Peer, PeerError> {
        if config.remote_fingerprints.is_empty() {
            return Err(PeerError::NoFingerprint);
        }
        let ice = match config.ice_mode {
            IceMode::Lite => IceAgent::new(config.local, &config.remote_ufrag)?,
            IceMode::Full => {
                let full = FullConfig::new(&config.remote_pwd, &config.ice_random)?;
                IceAgent::full(config.local, &config.remote_ufrag, full)?
            }
        };
        let anchors = dtls::TrustAnchors::pinned_sha256(config.remote_fingerprints.iter().copied())
            .map_err(|_| PeerError::NoFingerprint)?;
        let dtls_config = dtls::ServerConfig {
            versions: config.versions,
            groups: config.groups,
            certified_key: Some(config.certified_key),
            // RFC 8827 §6.5: both sides authenticate by certificate.
            client_auth: dtls::ClientAuth::Require,
            client_trust_anchors: Some(Arc::new(anchors)),
            wall_clock: Some(config.wall_clock),
            address_validation: dtls::AddressValidation::Transport,
            srtp_profiles: SRTP_PROFILES.to_vec(),
            max_connections: 4,
            ..Default::default()
        };
        let dtls = dtls::Endpoint::new(Arc::new(dtls_config), seed)?;
        let mut sctp_seed = seed;
        sctp_seed[0] ^= 0x5c;
        Ok(Peer {
            ice,
            dtls: DtlsSide::server(dtls, local),
            layer: {
                let mut layer = ChannelLayer::new(DtlsRole::Server, SctpSetup::Regular, sctp_seed);
                layer.set_remote_port(config.remote_sctp_port);
                layer
            },
            local,
            held: VecDeque::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
            sped: Sped::new(config.dtls_in_stun),
            sped_remote: None,
        })
    }

    /// The offer carried a SNAP INIT (a=sctp-init, draft-hancke-tsvwg-snap): our own for the
    /// answer, and the association opens from the two once DTLS is up. A malformed INIT is
    /// refused with its reason (the answer then leaves a=sctp-init out: the regular handshake).
    pub fn accept_snap(&mut self, peer_init: &[u8]) -> Result<Vec<u8>, sctp::SnapError> {
        self.layer.snap_answer(peer_init)?;
        Ok(self.layer.snap_offer())
    }

    /// Our ICE credentials.
    pub fn local_credentials(&self) -> &Credentials {
        self.ice.local_credentials()
    }

    /// The address the browser nominated, if it has (in full mode: once that pair is valid).
    pub fn selected(&self) -> Option<SocketAddr> {
        self.ice.selected()
    }

    /// ICE-lite or full.
    pub fn ice_mode(&self) -> IceMode {
        self.ice.mode()
    }

    /// DTLS in STUN: where the exchange stands and what went through it.
    pub fn dtls_in_stun(&self) -> (SpedState, crate::sped::SpedStats) {
        (self.sped.state(), self.sped.stats())
    }

    /// Whether a datagram from `remote` belongs to this session: a STUN check names its
    /// credentials, and everything else must come from an address that passed one.
    pub fn knows(&self, remote: SocketAddr) -> bool {
        self.ice.may_receive_from(remote)
    }

    /// The session ended ([`PeerEvent::Closed`] was emitted).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// A datagram arrived on `local` from `remote`.
    pub fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        if self.closed {
            return;
        }
        match classify(datagram) {
            Protocol::Stun => {
                if let Ok(message) = stun::Message::parse(datagram) {
                    self.stun(now, remote, &message);
                }
            }
            Protocol::Dtls if self.ice.may_receive_from(remote) => {
                // Before DTLS, which may decrypt in place.
                if self.sped.on_plain_dtls(datagram) {
                    self.dtls.handle_datagram(now, remote, datagram);
                }
            }
            // DTLS from an address no check vouched for, and whatever else shares the port.
            _ => return,
        }
        self.pump(now);
    }

    /// A STUN message from `remote`, already parsed (the server routed it by its USERNAME).
    pub fn handle_stun(&mut self, now: Instant, remote: SocketAddr, message: &stun::Message<'_>) {
        if self.closed {
            return;
        }
        self.stun(now, remote, message);
        self.pump(now);
    }

    fn stun(&mut self, now: Instant, remote: SocketAddr, message: &stun::Message<'_>) {
        // Full mode: the browser's responses to our checks may carry its DTLS too.
        let embedding = self.sped.is_enabled()
            && matches!(message.class(), stun::Class::Request | stun::Class::SuccessResponse)
            && (message.dtls_in_stun().is_some()
                || message.attribute(stun::attr::META_DTLS_IN_STUN_ACK).is_some());
        let mut fresh = Vec::new();
        let answer = if embedding {
            self.sped_check(now, remote, message, &mut fresh)
        } else {
            // Without the attributes: today's answer, byte for byte.
            self.ice.handle_message(now, remote, message)
        };
        if let Some(answer) = answer {
            self.out.push_back(Transmit { src: None, dst: remote, payload: answer });
        }
        // What DTLS wrote goes in plain too, under the usual rules: held until ICE allows the
        // address (a lite agent: the nomination, RFC 8445 §12.1.1).
        for transmit in fresh {
            self.send_dtls(transmit);
        }
        self.ice.set_request_attributes(self.sped.request_attributes());
        // Full mode: a triggered check goes after the response (RFC 8445 §7.3.1.4).
        self.ice_transmits();
        self.ice_events();
    }

    /// Answers a check carrying DTLS in STUN's attributes (draft-hancke-webrtc-sped), or takes
    /// such a response to one of ours (full mode). Once MESSAGE-INTEGRITY passed (never before:
    /// unauthenticated bytes must not reach DTLS), the embedded datagram goes to DTLS as one
    /// from `remote`, and what DTLS writes back is in `fresh` and may ride in the response.
    ///
    /// The response goes to the check's source, as every response does (RFC 8445 §7.3); the
    /// DTLS it carries reaches only an address that just proved it knows our password. RFC
    /// 8445 §12.1.1 holds a lite agent's *plain* data until nomination, and that still applies
    /// to `fresh`; the draft lets the handshake ride the responses before it, which is the
    /// point of the exchange.
    fn sped_check(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        message: &stun::Message<'_>,
        fresh: &mut Vec<Transmit>,
    ) -> Option<Vec<u8>> {
        let (dtls, sped, sped_remote) = (&mut self.dtls, &mut self.sped, &mut self.sped_remote);
        // Header, XOR-MAPPED-ADDRESS (IPv4 or IPv6), MESSAGE-INTEGRITY, FINGERPRINT.
        let address_len = if remote.ip().to_canonical().is_ipv4() { 8 } else { 20 };
        let sealed = stun::HEADER_LEN
            + stun::attribute_wire_len(address_len)
            + stun::attribute_wire_len(stun::INTEGRITY_LEN)
            + stun::attribute_wire_len(stun::FINGERPRINT_LEN);
        self.ice.handle_message_with(now, remote, message, || {
            // A malformed ACK (not 4·n bytes, over four) acknowledges nothing, but is present.
            let acks = message
                .attribute(stun::attr::META_DTLS_IN_STUN_ACK)
                .map(|_| message.dtls_in_stun_ack().ok().flatten().unwrap_or_default());
            // The browser embeds the same DTLS stream in its checks on every pair; fed from two
            // addresses it would start two DTLS connections. Checks from another address than
            // the first are answered (ACK, our flight), but their DTLS is neither taken nor acked.
            let first = *sped_remote.get_or_insert(remote) == remote;
            let data = message.dtls_in_stun().filter(|_| first);
            if let Some(datagram) = sped.on_request(data, acks.as_deref()) {
                let mut datagram = datagram.to_vec();
                dtls.handle_datagram(now, remote, &mut datagram);
                while let Some(transmit) = dtls.poll_transmit(now) {
                    fresh.push(transmit);
                }
                sped.capture(fresh.iter().filter(|t| t.dst == remote).map(|t| t.payload.as_slice()));
            }
            if message.class() == stun::Class::SuccessResponse {
                return Vec::new();
            }
            sped.response_attributes(MAX_RESPONSE_LEN.saturating_sub(sealed))
        })
    }

    /// A DTLS datagram to where ICE allows it now, else held.
    fn send_dtls(&mut self, transmit: Transmit) {
        match self.route(transmit.dst) {
            Some(dst) => self.out.push_back(Transmit { dst, ..transmit }),
            None if self.held.len() < MAX_HELD => self.held.push_back(transmit),
            // DTLS resends what is lost.
            None => {}
        }
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<PeerEvent> {
        self.events.pop_front()
    }

    /// When [`Peer::handle_timeout`] is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        [self.ice.poll_timeout(), self.dtls.poll_timeout(), self.layer.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The deadline of [`Peer::poll_timeout`] passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.ice.handle_timeout(now);
        self.ice_transmits();
        self.ice_events();
        self.dtls.handle_timeout(now);
        self.layer.handle_timeout(now);
        self.pump(now);
    }

    /// Sends `data` on channel `stream` (a string unless `binary`).
    pub fn send(&mut self, now: Instant, stream: u16, data: &[u8], binary: bool) -> Result<(), PeerError> {
        self.layer.send(stream, data, binary)?;
        self.pump(now);
        Ok(())
    }

    /// Opens a channel of ours (an odd stream id, as DTLS server) and gives its stream id;
    /// messages may follow at once (RFC 8831 §6.6), and [`PeerEvent::ChannelAcked`] follows
    /// the peer's ACK.
    pub fn open_channel(
        &mut self,
        now: Instant,
        label: &str,
        channel_type: ChannelType,
    ) -> Result<u16, PeerError> {
        let stream = self.layer.open(label, channel_type)?;
        self.pump(now);
        Ok(stream)
    }

    /// Closes channel `stream` by resetting its stream (RFC 8831 §6.7);
    /// [`PeerEvent::ChannelClosed`] follows once the peer reset its side too.
    pub fn close_channel(&mut self, now: Instant, stream: u16) -> Result<(), PeerError> {
        self.layer.close(stream)?;
        self.pump(now);
        Ok(())
    }

    /// The agent's checks (full mode), sent from the session's socket.
    fn ice_transmits(&mut self) {
        while let Some((dst, payload)) = self.ice.poll_transmit() {
            self.out.push_back(Transmit { src: None, dst, payload });
        }
    }

    fn ice_events(&mut self) {
        while let Some(event) = self.ice.poll_event() {
            match event {
                IceEvent::Selected(address) => {
                    self.events.push_back(PeerEvent::Selected(address));
                    // What the DTLS server wrote before the nomination goes now, to the pair
                    // the browser chose.
                    self.release_held();
                }
                // Full mode: a valid pair may carry data before selection (RFC 8445 §12.1).
                IceEvent::PairValid(_) => self.release_held(),
                IceEvent::ConsentExpired => self.close("ICE consent expired (RFC 7675)".into()),
                IceEvent::CheckSucceeded(_) => {}
            }
        }
    }

    /// Where a DTLS datagram addressed to `dst` (where the DTLS session's datagrams came from)
    /// may go now, if anywhere; see the type's documentation.
    fn route(&self, dst: SocketAddr) -> Option<SocketAddr> {
        match self.ice.selected() {
            // Only the selected pair, once there is one (RFC 8445 §12.1); for a lite agent, the
            // first moment it may send at all (§12.1.1).
            Some(selected) => self.ice.may_send_to(selected).then_some(selected),
            // Full mode before selection: any valid pair (§12.1), the session's own first.
            None if self.ice.may_send_to(dst) => Some(dst),
            None => self.ice.first_valid().filter(|&valid| self.ice.may_send_to(valid)),
        }
    }

    /// Sends the held DTLS datagrams that ICE now allows, in order; the rest stay held.
    fn release_held(&mut self) {
        for _ in 0..self.held.len() {
            let Some(held) = self.held.pop_front() else { break };
            match self.route(held.dst) {
                Some(dst) => self.out.push_back(Transmit { dst, ..held }),
                None => self.held.push_back(held),
            }
        }
    }

    fn close(&mut self, why: String) {
        if !self.closed {
            self.closed = true;
            self.held.clear();
            self.events.push_back(PeerEvent::Closed(why));
        }
    }

    /// Moves bytes between the layers until none has anything more to say.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut progress = false;
            while let Some(event) = self.dtls.poll_event() {
                progress = true;
                self.dtls_event(now, event);
            }
            while let Some(packet) = self.layer.poll_packet(now) {
                progress = true;
                // One SCTP packet, one DTLS record (RFC 8261 §4). A refusal means the session
                // is not up or is ending; SCTP notices by its own timers.
                let _ = self.dtls.send(&packet);
            }
            progress |= self.layer.drain(&mut self.events);
            if let Some(why) = self.layer.take_ended() {
                self.close(why);
            }
            let mut flight = Vec::new();
            while let Some(transmit) = self.dtls.poll_transmit(now) {
                progress = true;
                if self.sped.wants_flight() {
                    flight.push(transmit.payload.clone());
                }
                self.send_dtls(transmit);
            }
            // DTLS in STUN: what DTLS wrote for this input may also ride our next responses.
            self.sped.capture(flight.iter().map(Vec::as_slice));
            if !progress || self.closed {
                return;
            }
        }
    }

    /// An event of the session (the DTLS side reports no other connection's but failures).
    fn dtls_event(&mut self, now: Instant, event: dtls::Event) {
        match event {
            dtls::Event::Connected(summary) => {
                self.sped.dtls_connected(summary.version == dtls::Versions::Dtls12);
                if let Some(remote) = self.dtls.session_remote() {
                    self.layer.dtls_connected(now, remote);
                }
                self.events.push_back(PeerEvent::DtlsConnected(Box::new(summary)));
                if self.sped.state() != SpedState::Off {
                    let stats = self.sped.stats();
                    self.events.push_back(PeerEvent::DtlsInStun {
                        received: stats.received_embedded,
                        sent: stats.sent_embedded,
                    });
                }
            }
            dtls::Event::ApplicationData(mut packet) => {
                self.sped.peer_application_data();
                self.layer.handle_packet(now, self.local, &mut packet);
            }
            dtls::Event::Closed => self.close("the peer closed DTLS (close_notify)".into()),
            dtls::Event::Failed(error) => self.close(format!("DTLS failed: {error}")),
            _ => {}
        }
    }
}
