//! One data-channel session as the answerer runs it: ICE-lite, then DTLS as server, then SCTP
//! inside DTLS (RFC 8261), then DCEP (RFC 8832), all on one socket (RFC 7983), sans-IO.
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

use crate::channels::ChannelLayer;
use crate::dcep::{ChannelType, DcepError, DtlsRole};
use crate::demux::{classify, Protocol};
use crate::ice::{Credentials, CredentialsError, IceEvent, IceLiteAgent};

/// The SCTP port both sides use unless SDP says otherwise (RFC 8841 §5).
pub const SCTP_PORT: u16 = 5000;

/// use_srtp profiles agreed though no media flows (RFC 8827 §6.5 requires DTLS-SRTP support;
/// pion/webrtc refuses a handshake without a profile): SRTP_AEAD_AES_128_GCM (RFC 7714) and
/// SRTP_AES128_CM_HMAC_SHA1_80 (RFC 5764 §4.1.2), browsers' first two.
pub const SRTP_PROFILES: [u16; 2] = [0x0007, 0x0001];

/// The largest message we take, announced as `a=max-message-size` (RFC 8841 §6). The SCTP
/// receive window is four times as large, so one whole message always fits beside others.
pub const MAX_MESSAGE_SIZE: usize = 256 * 1024;

/// DTLS datagrams that wait for the browser's nomination at most (see [`Peer`]): a whole
/// server flight of either version with room to spare.
const MAX_HELD: usize = 32;

/// What the answerer needs to run one session.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// Our ICE credentials, as written in the answer.
    pub local: Credentials,
    /// The offer's `a=ice-ufrag`.
    pub remote_ufrag: String,
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
}

/// What happened in a session, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// The browser nominated this address (ICE): the session's datagrams go there.
    Selected(SocketAddr),
    /// The DTLS handshake completed.
    DtlsConnected(Box<dtls::HandshakeSummary>),
    /// The SCTP association inside DTLS is open.
    SctpConnected,
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

/// One browser's session: ICE-lite agent, DTLS server, SCTP association, channels.
///
/// # When datagrams flow
///
/// DTLS is taken only from addresses that passed an authenticated ICE check, which is also why
/// the DTLS server skips its cookie exchange ([`dtls::AddressValidation::Transport`]): the
/// check already proved the address. Our DTLS datagrams wait until the browser nominates a
/// pair, the earliest an ICE-lite agent may send (RFC 8445 §12.1.1; see [`IceLiteAgent`]), and
/// then go to the selected address.
pub struct Peer {
    ice: IceLiteAgent,
    dtls: dtls::Endpoint,
    dtls_session: Option<dtls::ConnectionHandle>,
    layer: ChannelLayer,
    local: SocketAddr,
    held: VecDeque<Transmit>,
    out: VecDeque<Transmit>,
    events: VecDeque<PeerEvent>,
    closed: bool,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("local", &self.local)
            .field("selected", &self.ice.selected())
            .field("dtls_session", &self.dtls_session)
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
        let ice = IceLiteAgent::new(config.local, &config.remote_ufrag)?;
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
            dtls,
            dtls_session: None,
            layer: ChannelLayer::new(DtlsRole::Server, sctp_seed),
            local,
            held: VecDeque::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
        })
    }

    /// Our ICE credentials.
    pub fn local_credentials(&self) -> &Credentials {
        self.ice.local_credentials()
    }

    /// The address the browser nominated, if it has.
    pub fn selected(&self) -> Option<SocketAddr> {
        self.ice.selected()
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
                if let Some(answer) = self.ice.handle(now, remote, datagram) {
                    self.out.push_back(Transmit { src: None, dst: remote, payload: answer });
                }
                self.ice_events();
            }
            Protocol::Dtls if self.ice.may_receive_from(remote) => {
                self.dtls.handle_datagram(now, self.local, remote, datagram);
            }
            // DTLS from an address no check vouched for, and whatever else shares the port.
            _ => return,
        }
        self.pump(now);
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

    /// Opens a channel of ours (an odd stream id, as DTLS server); its id comes with
    /// [`PeerEvent::ChannelAcked`].
    pub fn open_channel(&mut self, now: Instant, label: &str, channel_type: ChannelType) {
        self.layer.open(label, channel_type);
        self.pump(now);
    }

    /// Closes channel `stream` by resetting its stream (RFC 8831 §6.7);
    /// [`PeerEvent::ChannelClosed`] follows once the peer reset its side too.
    pub fn close_channel(&mut self, now: Instant, stream: u16) -> Result<(), PeerError> {
        self.layer.close(stream)?;
        self.pump(now);
        Ok(())
    }

    fn ice_events(&mut self) {
        while let Some(event) = self.ice.poll_event() {
            match event {
                IceEvent::Selected(address) => {
                    self.events.push_back(PeerEvent::Selected(address));
                    // What the DTLS server wrote before the nomination goes now, to the pair
                    // the browser chose.
                    for mut held in self.held.drain(..) {
                        held.dst = address;
                        self.out.push_back(held);
                    }
                }
                IceEvent::ConsentExpired => self.close("ICE consent expired (RFC 7675)".into()),
                IceEvent::CheckSucceeded(_) => {}
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
            while let Some((handle, event)) = self.dtls.poll_event() {
                progress = true;
                self.dtls_event(now, handle, event);
            }
            while let Some(packet) = self.layer.poll_packet(now) {
                progress = true;
                if let Some(session) = self.dtls_session {
                    // One SCTP packet, one DTLS record (RFC 8261 §4). A refusal means the
                    // session is ending; SCTP notices by its own timers.
                    let _ = self.dtls.send(session, &packet);
                }
            }
            progress |= self.layer.drain(&mut self.events);
            if let Some(why) = self.layer.take_ended() {
                self.close(why);
            }
            while let Some(transmit) = self.dtls.poll_transmit(now) {
                progress = true;
                match self.ice.selected() {
                    Some(selected) if self.ice.may_send_to(selected) => {
                        self.out.push_back(Transmit { dst: selected, ..transmit })
                    }
                    _ if self.held.len() < MAX_HELD => self.held.push_back(transmit),
                    // DTLS resends what is lost.
                    _ => {}
                }
            }
            if !progress || self.closed {
                return;
            }
        }
    }

    fn dtls_event(&mut self, now: Instant, handle: dtls::ConnectionHandle, event: dtls::Event) {
        match event {
            dtls::Event::Connected(summary) => {
                self.dtls_session = Some(handle);
                if let Some(remote) = self.dtls.connection(handle).map(|c| c.remote()) {
                    self.layer.dtls_connected(now, remote);
                }
                self.events.push_back(PeerEvent::DtlsConnected(Box::new(summary)));
            }
            dtls::Event::ApplicationData(mut packet) if self.dtls_session == Some(handle) => {
                self.layer.handle_packet(now, self.local, &mut packet);
            }
            dtls::Event::Closed => self.close("the peer closed DTLS (close_notify)".into()),
            dtls::Event::Failed(error) => self.close(format!("DTLS failed: {error}")),
            _ => {}
        }
    }
}
