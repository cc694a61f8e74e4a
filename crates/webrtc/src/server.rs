//! Many data-channel sessions on one socket, as a server for browsers runs them, sans-IO.
//!
//! An offer becomes a session and its answer ([`Server::answer`]). A datagram is routed by
//! what it is (RFC 7983): a STUN check by the ufrag its USERNAME names (ours first, RFC 8445
//! §7.2.2), anything else, including the responses to a full agent's own checks (which carry
//! no USERNAME), by the address that an authenticated check came from. Nothing unauthenticated
//! creates state: a session exists only for an offer that came over signalling, and an address
//! joins one only by a check carrying that session's password.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use fastshake_core::{Instant, Transmit};
use fastshake_dtls as dtls;

use crate::dcep::ChannelType;
use crate::demux::{classify, Protocol};
use crate::ice::{Credentials, FullConfig, IceMode};
use crate::peer::{Peer, PeerConfig, PeerError, PeerEvent, MAX_MESSAGE_SIZE};
use crate::sdp::{Answer, Fingerprint, HashFunction, Offer, SdpError};
use crate::stun;

/// Identifies one session of a [`Server`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

/// Random bytes a [`Server`] needs per answer: ICE credentials, the engines' seed, the SDP
/// session id, and a full ICE agent's randomness (unused in lite mode).
pub const ANSWER_RANDOM_LEN: usize = Credentials::RANDOM_LEN + 32 + 8 + FullConfig::RANDOM_LEN;

/// What every session of a server shares.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Our certificate and key (self-signed; the answer carries its fingerprint).
    pub certified_key: Arc<dtls::CertifiedKey>,
    /// The SHA-256 fingerprint of our certificate.
    pub fingerprint: [u8; 32],
    /// The addresses our socket answers on, written as host candidates.
    pub addresses: Vec<SocketAddr>,
    /// DTLS versions accepted.
    pub versions: dtls::Versions,
    /// DTLS 1.3 groups, most preferred first.
    pub groups: Vec<dtls::NamedGroup>,
    /// Unix time for the engines.
    pub wall_clock: dtls::WallClock,
    /// Sessions held at most; an offer beyond it is refused.
    pub max_sessions: usize,
    /// ICE-lite (the default; answers carry `a=ice-lite`) or full and controlled (no
    /// `a=ice-lite`; sessions check back and may send before the browser nominates, RFC 8445
    /// §12.1). See [`crate::ice::IceAgent`].
    pub ice_mode: IceMode,
    /// DTLS in STUN (draft-hancke-webrtc-sped, Chromium's `WebRTC-IceHandshakeDtls`): when an
    /// offer's `a=ice-options` carries `sped` or `googspedv1`, the answer echoes them and the
    /// session takes the DTLS the browser embeds in its checks and embeds ours in the
    /// responses. Other offers, and checks without the attributes, are answered as without it,
    /// which is why it may be on by default ([`ServerConfig::DTLS_IN_STUN_DEFAULT`]).
    pub dtls_in_stun: bool,
}

impl ServerConfig {
    /// The default of [`ServerConfig::dtls_in_stun`].
    pub const DTLS_IN_STUN_DEFAULT: bool = true;
}

/// The `a=ice-options` tags that announce DTLS in STUN: the draft's, and Chromium's (from
/// M155; M149–M154 wrote `goog-sped-v1`, which is not an ice-char token and is not echoed).
pub const DTLS_IN_STUN_ICE_OPTIONS: [&str; 2] = ["sped", "googspedv1"];

/// Why an offer got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The offer is not one we can answer.
    #[error("offer: {0}")]
    Offer(#[from] SdpError),
    /// The session could not be made.
    #[error("session: {0}")]
    Session(#[from] PeerError),
    /// Every session slot is taken.
    #[error("{0} sessions already: no room for another")]
    Full(usize),
}

/// A server's sessions.
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    sessions: HashMap<SessionId, Peer>,
    by_ufrag: HashMap<String, SessionId>,
    by_address: HashMap<SocketAddr, SessionId>,
    next_id: u64,
    out: VecDeque<Transmit>,
    events: VecDeque<(SessionId, PeerEvent)>,
}

impl Server {
    /// A server with no session yet.
    pub fn new(config: ServerConfig) -> Server {
        Server {
            config,
            sessions: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_address: HashMap::new(),
            next_id: 1,
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The shared configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Session `id`.
    pub fn session(&self, id: SessionId) -> Option<&Peer> {
        self.sessions.get(&id)
    }

    /// Takes a browser's offer: a new session and the SDP answer to return. `random` gives the
    /// session its ICE credentials and seeds its engines (fresh OS randomness in a driver).
    pub fn answer(
        &mut self,
        offer: &str,
        local: SocketAddr,
        random: &[u8; ANSWER_RANDOM_LEN],
    ) -> Result<(SessionId, String), ServerError> {
        if self.sessions.len() >= self.config.max_sessions {
            return Err(ServerError::Full(self.sessions.len()));
        }
        let offer = Offer::parse(offer)?;
        let (credential_bytes, rest) = random.split_at(Credentials::RANDOM_LEN);
        let credential_bytes: &[u8; Credentials::RANDOM_LEN] =
            credential_bytes.try_into().expect("split at RANDOM_LEN");
        let (seed, rest) = rest.split_at(32);
        let (session_id, ice_random) = rest.split_at(8);
        let local_credentials = Credentials::from_random(credential_bytes);
        // Echo whichever of the tags the offer carried, and only those (the draft's SDP rules).
        let ice_options: Vec<String> = if self.config.dtls_in_stun {
            offer
                .data
                .ice_options
                .iter()
                .filter(|o| DTLS_IN_STUN_ICE_OPTIONS.contains(&o.as_str()))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let remote_fingerprints: Vec<[u8; 32]> =
            offer.data.sha256_fingerprints().filter_map(|f| f.bytes.as_slice().try_into().ok()).collect();
        let config = PeerConfig {
            local: local_credentials.clone(),
            remote_ufrag: offer.data.ice_ufrag.clone(),
            ice_mode: self.config.ice_mode,
            remote_pwd: offer.data.ice_pwd.clone(),
            ice_random: ice_random.try_into().expect("split at FullConfig::RANDOM_LEN"),
            remote_fingerprints,
            certified_key: self.config.certified_key.clone(),
            versions: self.config.versions,
            groups: self.config.groups.clone(),
            wall_clock: self.config.wall_clock,
            remote_sctp_port: offer.data.sctp_port,
            dtls_in_stun: !ice_options.is_empty(),
        };
        let mut seed_bytes = [0u8; 32];
        seed_bytes.copy_from_slice(seed);
        let mut peer = Peer::new(config, local, seed_bytes)?;
        // SNAP when the browser offers it; a bad INIT leaves it out (the regular handshake).
        let sctp_init = offer.data.sctp_init.as_deref().and_then(|init| peer.accept_snap(init).ok());
        let answer = Answer {
            session_id: u64::from_be_bytes(session_id.try_into().expect("8 bytes")) >> 1,
            ice_lite: self.config.ice_mode == IceMode::Lite,
            ice_ufrag: local_credentials.ufrag().to_owned(),
            ice_pwd: local_credentials.pwd().to_owned(),
            ice_options,
            fingerprint: Fingerprint {
                algorithm: HashFunction::Sha256,
                bytes: self.config.fingerprint.to_vec(),
            },
            max_message_size: MAX_MESSAGE_SIZE as u64,
            sctp_init,
            addresses: self.config.addresses.clone(),
        }
        .to_sdp(&offer)?;
        let id = SessionId(self.next_id);
        self.next_id += 1;
        self.by_ufrag.insert(local_credentials.ufrag().to_owned(), id);
        self.sessions.insert(id, peer);
        Ok((id, answer))
    }

    /// A datagram arrived from `remote`. A STUN message is parsed once, here: requests are
    /// routed by the local ufrag of their USERNAME ("ours:theirs"), responses (which name no
    /// USERNAME, RFC 8489 §14.3) and DTLS by the address an authenticated check came from.
    pub fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        let id = match classify(datagram) {
            Protocol::Stun => {
                let Ok(message) = stun::Message::parse(datagram) else { return };
                let id = match message.class() {
                    stun::Class::SuccessResponse | stun::Class::ErrorResponse => self.by_address.get(&remote),
                    _ => Self::ufrag_of(&message).and_then(|ufrag| self.by_ufrag.get(ufrag)),
                };
                let Some(&id) = id else { return };
                let Some(peer) = self.sessions.get_mut(&id) else { return };
                peer.handle_stun(now, remote, &message);
                id
            }
            Protocol::Dtls => {
                let Some(&id) = self.by_address.get(&remote) else { return };
                let Some(peer) = self.sessions.get_mut(&id) else { return };
                peer.handle_datagram(now, remote, datagram);
                id
            }
            _ => return,
        };
        if self.sessions.get(&id).is_some_and(|peer| peer.knows(remote)) {
            // The address authenticated for this session; an earlier one keeps its own.
            self.by_address.insert(remote, id);
        }
        self.collect(id);
    }

    /// The local ufrag of a check's USERNAME ("ours:theirs").
    fn ufrag_of<'m>(message: &stun::Message<'m>) -> Option<&'m str> {
        let username = message.username().ok()??;
        username.split_once(':').map(|(ours, _)| ours)
    }

    /// Sends on a channel of session `id`.
    pub fn send(
        &mut self,
        now: Instant,
        id: SessionId,
        stream: u16,
        data: &[u8],
        binary: bool,
    ) -> Result<(), PeerError> {
        let peer = self.sessions.get_mut(&id).ok_or(PeerError::NotConnected)?;
        let result = peer.send(now, stream, data, binary);
        self.collect(id);
        result
    }

    /// Opens a channel of ours in session `id` and gives its stream id (see
    /// [`Peer::open_channel`]).
    pub fn open_channel(
        &mut self,
        now: Instant,
        id: SessionId,
        label: &str,
        channel_type: ChannelType,
    ) -> Result<u16, PeerError> {
        let peer = self.sessions.get_mut(&id).ok_or(PeerError::NotConnected)?;
        let result = peer.open_channel(now, label, channel_type);
        self.collect(id);
        result
    }

    /// Closes channel `stream` of session `id` (see [`Peer::close_channel`]).
    pub fn close_channel(&mut self, now: Instant, id: SessionId, stream: u16) -> Result<(), PeerError> {
        let peer = self.sessions.get_mut(&id).ok_or(PeerError::NotConnected)?;
        let result = peer.close_channel(now, stream);
        self.collect(id);
        result
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next event of any session.
    pub fn poll_event(&mut self) -> Option<(SessionId, PeerEvent)> {
        self.events.pop_front()
    }

    /// The earliest deadline of any session.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sessions.values().filter_map(Peer::poll_timeout).min()
    }

    /// Runs every session whose deadline passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, p)| p.poll_timeout().is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            if let Some(peer) = self.sessions.get_mut(&id) {
                peer.handle_timeout(now);
            }
            self.collect(id);
        }
    }

    /// Moves a session's datagrams and events out, and forgets it once it closed.
    fn collect(&mut self, id: SessionId) {
        let Some(peer) = self.sessions.get_mut(&id) else { return };
        while let Some(t) = peer.poll_transmit() {
            self.out.push_back(t);
        }
        while let Some(e) = peer.poll_event() {
            self.events.push_back((id, e));
        }
        if peer.is_closed() {
            let ufrag = peer.local_credentials().ufrag().to_owned();
            self.sessions.remove(&id);
            self.by_ufrag.remove(&ufrag);
            self.by_address.retain(|_, s| *s != id);
        }
    }
}
