//! Client and server configuration.

use crate::cache::ClientCertCacheConfig;
pub use crate::clock::WallClock;
use crate::crypto::tls13::Suite13;
use crate::error::Error;
use crate::handshake::{CertificateCompression, NamedGroup};
use crate::rtt::RttCache;
use crate::session::{ClientAuth, ServerSession, SessionCacheConfig, TicketKeys};
use crate::suite::{CipherSuite, KeyExchange};
use fastshake_pki::{CertifiedKey, KeyAlgorithm, TrustAnchors, ValidatedKeyCache};
use std::sync::Arc;
use std::time::Duration;
use zeroize::Zeroize;

/// Default datagram size: fits every IPv6 path (1280) with room for IP and UDP headers.
pub const DEFAULT_MTU: usize = 1200;
/// Smallest MTU the engine accepts: a protected Finished record and a handshake fragment with
/// at least a few bytes of body must fit.
pub const MIN_MTU: usize = 64;

/// Session mobility: Connection ID (RFC 9146), return-routability check (RFC 9853) and
/// following the server to another port. All off by default: the handshake and the records are
/// then exactly those of a session without these extensions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mobility {
    /// RFC 9146. `None`: not offered (client) / not accepted (server). `Some(n)`: negotiate;
    /// records sent to us carry an `n`-byte CID we choose (`n = 0`: we want none, typical for a
    /// client). A server issues unique random CIDs of this length.
    pub connection_id: Option<u8>,
    /// RFC 9853: offer (client) / accept (server) `rrc`. A new peer address is checked with
    /// path_challenge / path_response before it is trusted; until then at most 3x the bytes
    /// received from it are sent to it.
    pub return_routability_check: bool,
    /// Client: follow the server to another port of the same IP (a ServerHello from the
    /// session's own port, or the server's protected port announcement). Offers the private-use
    /// extension `port_move` (0xFF00, fastshake only). Server: accept it (needed by
    /// `Endpoint::move_to`).
    pub follow_server_port: bool,
}

impl Mobility {
    /// Whether anything is offered or accepted.
    pub fn any(&self) -> bool {
        self.connection_id.is_some() || self.return_routability_check || self.follow_server_port
    }
}

/// A pre-shared key and the identity that names it (RFC 4279).
#[derive(Clone, PartialEq, Eq)]
pub struct Psk {
    /// The identity sent in ClientKeyExchange.
    pub identity: Vec<u8>,
    /// The secret; zeroized on drop.
    pub key: Vec<u8>,
}

impl Psk {
    /// A key `key` named `identity`.
    pub fn new(identity: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        Psk { identity: identity.into(), key: key.into() }
    }
}

impl Drop for Psk {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Psk")
            .field("identity", &String::from_utf8_lossy(&self.identity))
            .field("key", &format_args!("<{} bytes>", self.key.len()))
            .finish()
    }
}

/// How handshake flights are timed (RFC 6347 §4.2.4.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RetransmitPolicy {
    /// Every flight waits `initial_retransmit` first, doubling on each retransmission up to
    /// `max_retransmit` (RFC 6347's timer, with its 1 s default).
    #[default]
    Fixed,
    /// Each flight waits what the path to the peer predicts: at first the estimate cached by an
    /// earlier handshake with it (`initial_retransmit` when there is none), then the round trips
    /// of this handshake (the cookie exchange, then each flight). A flight whose exchange an
    /// earlier handshake measured waits that long and a margin of at least `floor`; others
    /// SRTT + 4·RTTVAR (RFC 6298). Never below `floor`, nor below the time the path takes to
    /// carry the exchange at the pace the peer's datagrams came; no longer than
    /// `initial_retransmit` once this handshake, or twice the last one with the peer, lost a
    /// datagram, nor for a copy sent because the peer resent its flight; the ceiling is
    /// `max_retransmit` or twice the longest exchange measured; doubling on each
    /// retransmission. Suits links whose round trip is far from 1 s: duty-cycled radios
    /// (seconds) and LANs (milliseconds). On a duty-cycled link, a `floor` of a wake-up period
    /// and a quarter covers the shift of a rendezvous from one exchange to the next.
    Adaptive {
        /// The shortest timer armed.
        floor: Duration,
    },
}

impl RetransmitPolicy {
    /// `"fixed"` or `"adaptive"`, as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            RetransmitPolicy::Fixed => "fixed",
            RetransmitPolicy::Adaptive { .. } => "adaptive",
        }
    }
}

/// How a client sets up sessions.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The key to authenticate with.
    pub psk: Option<Psk>,
    /// Suites offered, most preferred first.
    pub suites: Vec<CipherSuite>,
    /// Largest datagram sent, in bytes of UDP payload.
    pub mtu: usize,
    /// First retransmission timeout (RFC 6347: 1 s).
    pub initial_retransmit: Duration,
    /// Ceiling of the doubling retransmission timeout (RFC 6347: 60 s).
    pub max_retransmit: Duration,
    /// How flights are timed: fixed (the default) or adapted to the measured round trip.
    pub retransmit: RetransmitPolicy,
    /// Round trips to servers, by IP address: read when a handshake starts, written when one
    /// completes, under [`RetransmitPolicy::Adaptive`]. Clones of this configuration share it;
    /// give several configurations the same `Arc` to share it between them.
    pub rtt_cache: Arc<RttCache>,
    /// The handshake fails if not complete this long after it started.
    pub handshake_timeout: Duration,
    /// Refuse servers that do not support the extended master secret (RFC 7627).
    pub require_extended_master_secret: bool,
    /// Our certificate chain and key, sent when the server asks (CertificateRequest).
    pub certified_key: Option<Arc<CertifiedKey>>,
    /// Anchors the server's chain must lead to; certificate suites are offered only with them.
    pub trust_anchors: Option<Arc<TrustAnchors>>,
    /// DTLS 1.3 certificate compression (RFC 8879): the algorithms offered for the server's
    /// chain (with trust anchors) and used for ours when the server lists one. All three by
    /// default; [`CertificateCompression::none`] leaves the extension out.
    pub certificate_compression: Arc<CertificateCompression>,
    /// Sent in `server_name` (RFC 6066) and checked against the server's leaf certificate.
    pub server_name: Option<String>,
    /// Validated server keys (seed 003 §IV-C), shareable by many clients: a server chain seen
    /// before for the same name skips validation but for its time window and trust anchor.
    pub key_cache: Option<Arc<ValidatedKeyCache>>,
    /// Offer the `session_ticket` extension (RFC 5077).
    pub enable_tickets: bool,
    /// DTLS 1.3: data given to [`crate::Connection::send_early_data`] goes out as 0-RTT early
    /// data when the resumed session's ticket allows it (RFC 8446 §4.2.10); off by default.
    /// Refused early data is sent again once the handshake is over.
    pub early_data: bool,
    /// Unix time, for certificate validity and session lifetimes; certificate suites need it.
    pub wall_clock: Option<WallClock>,
    /// Connection ID, return-routability check, following the server's port.
    pub mobility: Mobility,
    /// Offer RFC 7924 `cached_info` with the server objects of the [`crate::CachedServer`]
    /// given to the connection, and report this handshake's objects for the next one. DTLS 1.2
    /// only: a hello offering both versions carries it for a 1.2 server; a 1.3 server ignores it.
    pub cached_info: bool,
    /// Offer client-certificate caching (seed 003): the ticket of the [`crate::CachedServer`]
    /// given to the connection, or an empty extension (support) without one. DTLS 1.2 only, like
    /// `cached_info`.
    pub client_certificate_caching: bool,
    /// Key-exchange groups offered with certificate suites, most preferred first (RFC 8422
    /// §5.1.1): x25519, then secp256r1.
    pub groups: Vec<NamedGroup>,
    /// A cookie this server gave in an earlier exchange ([`crate::HandshakeSummary::cookie`]),
    /// sent in the first ClientHello: a server that still accepts it
    /// ([`ServerConfig::reusable_cookies`]) skips the HelloVerifyRequest round trip; one that
    /// does not answers with a fresh cookie as usual. Sent only when offering DTLS 1.2 alone (a
    /// 1.3 server refuses a hello that carries one, RFC 9147 §5.3).
    pub cookie: Option<Vec<u8>>,
    /// The server answers the first ClientHello without a cookie exchange because another
    /// protocol proved our address ([`AddressValidation::Transport`], as ICE does for WebRTC):
    /// the first 1.3 ClientHello then carries the key share of the first group even if it is
    /// the hybrid, whose two fragments a stateless server could not take.
    pub address_proven: bool,
    /// use_srtp (RFC 5764) offered with these protection profiles, most preferred first;
    /// empty: not offered. No SRTP runs here, but WebRTC stacks (pion) refuse a handshake
    /// without a profile even for data channels.
    pub srtp_profiles: Vec<u16>,
    /// The protocol versions offered. The default, [`Versions::Both`], puts DTLS 1.3 and 1.2 in
    /// one ClientHello and the server's answer decides (RFC 9147 §5.3, RFC 8446 §4.2.1);
    /// [`Versions::Dtls12`] reproduces a DTLS 1.2 client's bytes exactly.
    pub versions: Versions,
    /// DTLS 1.3 suites offered, most preferred first (with a PSK only the SHA-256 ones).
    pub suites13: Vec<Suite13>,
}

impl Versions {
    /// How the version is written: "DTLS 1.2", "DTLS 1.3".
    pub fn name(self) -> &'static str {
        match self {
            Versions::Dtls12 => "DTLS 1.2",
            Versions::Dtls13 => "DTLS 1.3",
            Versions::Both => "DTLS 1.3 and 1.2",
        }
    }
}

/// Which DTLS versions a side speaks. By default both: a client offers 1.3 and 1.2, a server
/// answers with the highest the client offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Versions {
    /// DTLS 1.2 only (RFC 6347).
    Dtls12,
    /// DTLS 1.3 only (RFC 9147).
    Dtls13,
    /// Client: both in one ClientHello, the server's answer decides (a 1.2 answer with RFC 8446
    /// §4.1.3's downgrade sentinel is refused). Server: DTLS 1.3 with a client that offers it,
    /// else DTLS 1.2 (with the sentinel in its random, so a 1.3 client can tell an attacker
    /// removed 1.3).
    #[default]
    Both,
}

impl Versions {
    /// Whether DTLS 1.3 is among them.
    pub fn dtls13(self) -> bool {
        matches!(self, Versions::Dtls13 | Versions::Both)
    }

    /// Whether DTLS 1.2 is among them.
    pub fn dtls12(self) -> bool {
        matches!(self, Versions::Dtls12 | Versions::Both)
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            psk: None,
            suites: CipherSuite::ALL.to_vec(),
            mtu: DEFAULT_MTU,
            initial_retransmit: Duration::from_secs(1),
            max_retransmit: Duration::from_secs(60),
            retransmit: RetransmitPolicy::Fixed,
            rtt_cache: Arc::new(RttCache::default()),
            handshake_timeout: Duration::from_secs(60),
            require_extended_master_secret: false,
            certified_key: None,
            trust_anchors: None,
            certificate_compression: Arc::new(CertificateCompression::all()),
            server_name: None,
            key_cache: None,
            enable_tickets: true,
            early_data: false,
            wall_clock: None,
            mobility: Mobility::default(),
            cached_info: false,
            client_certificate_caching: false,
            groups: NamedGroup::ALL.to_vec(),
            cookie: None,
            address_proven: false,
            srtp_profiles: Vec::new(),
            versions: Versions::default(),
            suites13: Suite13::ALL.to_vec(),
        }
    }
}

/// Longest PSK identity, key or hint the wire format can carry (two-byte length).
const MAX_PSK_FIELD: usize = u16::MAX as usize;
/// Most suites offered or accepted.
const MAX_SUITES: usize = 64;

fn check_common(suites: &[CipherSuite], mtu: usize) -> Result<(), Error> {
    if suites.is_empty() {
        return Err(Error::Config("no cipher suite configured"));
    }
    if suites.len() > MAX_SUITES {
        return Err(Error::Config("too many cipher suites"));
    }
    if mtu < MIN_MTU {
        return Err(Error::Config("MTU below 64 bytes"));
    }
    Ok(())
}

/// An external PSK is used with SHA-256 here (RFC 8446 §4.2.11: SHA-256 unless configured
/// otherwise), so a 1.3 configuration with a PSK alone needs a SHA-256 suite.
fn check_psk_suites13(
    versions: Versions,
    suites13: &[Suite13],
    psk_only: bool,
    fix: &'static str,
) -> Result<(), Error> {
    let sha256 = |s: &Suite13| s.hash() == crate::crypto::tls13::SuiteHash::Sha256;
    if versions.dtls13() && psk_only && !suites13.is_empty() && !suites13.iter().any(sha256) {
        return Err(Error::Config(fix));
    }
    Ok(())
}

fn check_psk(psk: &Psk) -> Result<(), Error> {
    if psk.identity.len() > MAX_PSK_FIELD || psk.key.len() > MAX_PSK_FIELD {
        return Err(Error::Config("PSK identity and key must be shorter than 64 KiB"));
    }
    if psk.key.is_empty() {
        return Err(Error::Config("empty PSK"));
    }
    Ok(())
}

impl ClientConfig {
    /// Whether the configuration can work; `Connection::client` fails with this error otherwise.
    pub fn validate(&self) -> Result<(), Error> {
        check_common(&self.suites, self.mtu)?;
        if let Some(psk) = &self.psk {
            check_psk(psk)?;
        }
        if self.psk.is_none() && self.trust_anchors.is_none() {
            return Err(Error::Config("a client needs a PSK or trust anchors"));
        }
        if self.server_name.as_ref().is_some_and(|n| n.is_empty() || n.len() > 255) {
            return Err(Error::Config("server name must be 1 to 255 bytes"));
        }
        if self.trust_anchors.is_some() && self.wall_clock.is_none() {
            return Err(Error::Config("certificate suites need a wall clock (ClientConfig::wall_clock)"));
        }
        if self.trust_anchors.is_some() && self.groups.is_empty() {
            return Err(Error::Config("certificate suites need a key-exchange group (ClientConfig::groups)"));
        }
        if self.cookie.as_ref().is_some_and(|c| c.len() > crate::handshake::MAX_COOKIE_LEN) {
            return Err(Error::Config("cookie longer than a ClientHello can carry"));
        }
        if self.offered_suites().next().is_none() {
            return Err(Error::Config("no configured suite fits the PSK or trust anchors given"));
        }
        check_psk_suites13(
            self.versions,
            &self.suites13,
            self.psk.is_some() && self.trust_anchors.is_none(),
            "TLS_AES_256_GCM_SHA384 hashes with SHA-384, but an external PSK is used with SHA-256 \
             (RFC 8446 §4.2.11); add a SHA-256 suite or trust anchors for a certificate",
        )?;
        Ok(())
    }

    /// The suites offered: PSK ones with a PSK, certificate ones with trust anchors.
    pub(crate) fn offered_suites(&self) -> impl Iterator<Item = CipherSuite> + '_ {
        self.suites.iter().copied().filter(|s| match s.params().key_exchange {
            KeyExchange::Psk => self.psk.is_some(),
            KeyExchange::EcdheEcdsa | KeyExchange::EcdheRsa => self.trust_anchors.is_some(),
            KeyExchange::Tls13 => false,
        })
    }

    /// Defaults with trust anchors for certificate suites.
    pub fn certificate(trust_anchors: Arc<TrustAnchors>, server_name: Option<String>) -> Self {
        ClientConfig { trust_anchors: Some(trust_anchors), server_name, ..Default::default() }
    }

    /// Defaults with one pre-shared key.
    pub fn psk(identity: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        ClientConfig { psk: Some(Psk::new(identity, key)), ..Default::default() }
    }
}

/// How a server learns that a client receives at the address its ClientHello came from,
/// before it keeps state or sends a flight larger than the hello (RFC 6347 §4.2.1,
/// RFC 9147 §5.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AddressValidation {
    /// A cookie round trip: HelloVerifyRequest in 1.2, HelloRetryRequest in 1.3.
    #[default]
    Cookie,
    /// Another protocol already proved every address the driver hands datagrams from, so the
    /// first ClientHello is answered at once. A WebRTC peer has: its ICE connectivity checks
    /// carry MESSAGE-INTEGRITY under the password from the signalling channel, and DTLS only
    /// flows on a pair that passed one (RFC 8445 §7.3, RFC 8842 §4). Only for a driver that
    /// drops datagrams from any other address; a 1.3 hello without a key share for our group
    /// still gets a HelloRetryRequest.
    Transport,
}

/// What a server with every session slot taken (`ServerConfig::max_sessions`) does with a new
/// client whose ClientHello carries a valid cookie.
///
/// Eviction happens when the newcomer's ClientHello arrives, before it authenticates (its state
/// needs the slot): under `Lru` and `Idlest` any host that can receive at its address can end
/// established sessions, so `Refuse` suits servers open to untrusted clients. Handshakes in
/// progress are never evicted (they end within the handshake timeout); when every slot holds
/// one, the newcomer is refused whatever the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WhenFull {
    /// Answer the ClientHello with a fatal `internal_error` alert in epoch 0 and keep no state,
    /// so the client stops retransmitting at once instead of waiting out its handshake timeout.
    /// RFC 5246 §7.2.2: internal_error is "an internal error unrelated to the peer or the
    /// correctness of the protocol (such as a memory allocation failure)", which a full session
    /// table is; handshake_failure or access_denied would blame the client's parameters or
    /// credentials, which were never looked at. A fastshake client reports it as
    /// `Error::NoSessionSlot`.
    #[default]
    Refuse,
    /// Close (close_notify) the session least recently used: the oldest last application record
    /// sent or received, or handshake completion, whichever is later.
    Lru,
    /// Close (close_notify) the session silent the longest: the oldest last datagram from its
    /// peer that authenticated.
    Idlest,
}

impl WhenFull {
    /// The policy's name, as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            WhenFull::Refuse => "refuse",
            WhenFull::Lru => "lru",
            WhenFull::Idlest => "idlest",
        }
    }
}

impl std::fmt::Display for WhenFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a server accepts sessions.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Sent in ServerKeyExchange when set (RFC 4279 §2); no ServerKeyExchange otherwise.
    pub psk_identity_hint: Option<Vec<u8>>,
    /// The keys clients may use, looked up by identity.
    pub psks: Vec<Psk>,
    /// Suites accepted, most preferred first (the server's order wins).
    pub suites: Vec<CipherSuite>,
    /// Largest datagram sent, in bytes of UDP payload.
    pub mtu: usize,
    /// First retransmission timeout (RFC 6347: 1 s).
    pub initial_retransmit: Duration,
    /// Ceiling of the doubling retransmission timeout (RFC 6347: 60 s).
    pub max_retransmit: Duration,
    /// How flights are timed: fixed (the default) or adapted to the measured round trip. The
    /// adaptive policy also dates HelloVerifyRequest cookies, so the server learns the round
    /// trip of the cookie exchange without keeping state.
    pub retransmit: RetransmitPolicy,
    /// Clients whose round trip the endpoint remembers at most (by IP address, least recently
    /// used first out), under [`RetransmitPolicy::Adaptive`].
    pub rtt_cache_entries: usize,
    /// A handshake is dropped if not complete this long after it started.
    pub handshake_timeout: Duration,
    /// Most sessions (in handshake or established) held at once; new clients beyond it are ignored.
    pub max_connections: usize,
    /// Half-open handshakes (cookie verified, not yet completed) kept at most, at least 1; a new
    /// one evicts the oldest. Established sessions are never evicted for a handshake.
    pub max_handshakes: usize,
    /// Half-open handshakes from one IP address at most (`None`: no limit of its own); a new one
    /// evicts that address's oldest, so one host cannot crowd out the others.
    pub max_handshakes_per_ip: Option<usize>,
    /// An established session that receives no authenticated datagram for this long is closed
    /// (close_notify, then `Event::Failed(Error::IdleTimeout { .. })`); `None` keeps sessions for ever.
    /// Sessions are checked by one endpoint-wide scan (at most 64 per idle period), so one closes
    /// between the timeout and 65/64 of it after its last authenticated datagram. A session
    /// whose last handshake flight the client has not confirmed yet is not idle: it is kept until
    /// the handshake timeout, as the client may still be resending its Finished.
    pub idle_timeout: Option<Duration>,
    /// HelloVerifyRequest cookies older than this are refused (a new HelloVerifyRequest is sent
    /// instead); a cookie is accepted for at least half of it. `None`: [`DEFAULT_COOKIE_LIFETIME`]
    /// or twice `handshake_timeout`, whichever is longer, so that a cookie stays good for as long
    /// as a client resends its ClientHello.
    pub cookie_lifetime: Option<Duration>,
    /// Session slots (seed 002: a 16 kB node fits 3 PSK sessions): at most this many
    /// connections exist at once; `None` (the default) sets no limit of its own. A slot is taken
    /// when a ClientHello with a valid cookie creates a connection, so handshakes in progress
    /// hold one and the memory bound is never exceeded, not even for a moment; it is released
    /// when the connection closes, fails, expires or is evicted. A ClientHello without a valid
    /// cookie (or a fragment of one) takes none. A new handshake from the address of an
    /// established session needs a slot of its own, since the session is kept until it
    /// completes (RFC 6347 §4.2.8). `max_connections` and the half-open limits apply as well.
    pub max_sessions: Option<usize>,
    /// What a client that proved its address gets while every slot of `max_sessions` is taken.
    pub when_full: WhenFull,
    /// Refuse clients that do not offer the extended master secret (RFC 7627).
    pub require_extended_master_secret: bool,
    /// Our certificate chain and key for the certificate suites.
    pub certified_key: Option<Arc<CertifiedKey>>,
    /// Whether clients are asked for a certificate.
    pub client_auth: ClientAuth,
    /// Anchors a client's chain must lead to (needed unless `client_auth` is `None`); their
    /// subject names are the CertificateRequest's certificate_authorities.
    pub client_trust_anchors: Option<Arc<TrustAnchors>>,
    /// DTLS 1.3 certificate compression (RFC 8879): our chain goes compressed with the first of
    /// these the client lists, and a client asked for its chain is offered them. All three by
    /// default; [`CertificateCompression::none`] sends and takes chains uncompressed only.
    pub certificate_compression: Arc<CertificateCompression>,
    /// Validated client keys (seed 003 §IV-C): a client chain seen before skips validation but
    /// for its time window and trust anchor.
    pub key_cache: Option<Arc<ValidatedKeyCache>>,
    /// The session-ID cache (resumption by ID).
    pub session_cache: SessionCacheConfig,
    /// Ticket keys (RFC 5077); `None` disables tickets. `Endpoint::rotate_ticket_key` rotates.
    /// DTLS 1.3 sessions get a NewSessionTicket sealed under the same keys (RFC 8446 §4.6.1).
    pub tickets: Option<TicketKeys>,
    /// DTLS 1.3: the most 0-RTT early data (bytes of plaintext) accepted with a resumed
    /// session, and announced in tickets (RFC 8446 §4.2.10); 0 (the default) refuses early
    /// data. Early data can be replayed by an attacker: each ClientHello's early data is taken
    /// once, by the [`crate::EarlyDataRegister`] its ticket names (one per server, shared by its
    /// workers; another node resumes the ticket without early data). It is still not forward
    /// secret and arrives before the handshake is confirmed (RFC 8446 §8).
    pub max_early_data: u32,
    /// Unix time, for certificate validity and session lifetimes; certificate suites need it.
    pub wall_clock: Option<WallClock>,
    /// Connection ID, return-routability check, port moves (`Endpoint::move_to`).
    pub mobility: Mobility,
    /// Answer RFC 7924 `cached_info`: send the fingerprint of our Certificate and
    /// CertificateRequest to a client that has them cached.
    pub cached_info: bool,
    /// The cache of client chains for client-certificate caching (seed 003); `max_entries`
    /// 0 turns it off.
    pub client_cert_cache: ClientCertCacheConfig,
    /// Issue cookies bound to the client's address (IP and port) and their time slot only, not
    /// to one ClientHello's parameters, so a client may send the same cookie in the first
    /// ClientHello of later handshakes ([`ClientConfig::cookie`]) while it is fresh and skip
    /// the HelloVerifyRequest round trip. The cookie still proves the client receives at that
    /// address (RFC 6347 §4.2.1); it no longer ties the cookie to one ClientHello.
    pub reusable_cookies: bool,
    /// How a client proves it receives at its address before the server keeps state for it.
    pub address_validation: AddressValidation,
    /// use_srtp (RFC 5764) profiles accepted, most preferred first: a client that offers one
    /// gets the first of these it lists; empty: use_srtp is ignored. Nothing more than the
    /// agreement is done (no SRTP keys are exported).
    pub srtp_profiles: Vec<u16>,
    /// The protocol versions accepted. The default, [`Versions::Both`], answers each client in
    /// the highest version it offers (RFC 9147 §5.3): DTLS 1.3 when offered, else DTLS 1.2.
    pub versions: Versions,
    /// DTLS 1.3 suites accepted, most preferred first (the server's order wins).
    pub suites13: Vec<Suite13>,
    /// DTLS 1.3 key-exchange groups accepted, most preferred first: a client that offers a
    /// preferred group without a key share for it is asked for one (HelloRetryRequest). By
    /// default the post-quantum hybrid X25519MLKEM768 first, then x25519 and secp256r1.
    pub groups: Vec<NamedGroup>,
}

/// [`ServerConfig::max_handshakes`] by default.
pub const DEFAULT_MAX_HANDSHAKES: usize = 1024;
/// [`ServerConfig::idle_timeout`] by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The shortest default [`ServerConfig::cookie_lifetime`] (a client's backed-off timer reaches
/// 60 s; on slow links the handshake timeout, and with it the lifetime, is raised to match).
pub const DEFAULT_COOKIE_LIFETIME: Duration = Duration::from_secs(60);

impl ServerConfig {
    /// How long a cookie stays fresh: the `cookie_lifetime` field or its default.
    pub(crate) fn effective_cookie_lifetime(&self) -> Duration {
        self.cookie_lifetime.unwrap_or(DEFAULT_COOKIE_LIFETIME.max(self.handshake_timeout * 2))
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            psk_identity_hint: None,
            psks: Vec::new(),
            suites: CipherSuite::ALL.to_vec(),
            mtu: DEFAULT_MTU,
            initial_retransmit: Duration::from_secs(1),
            max_retransmit: Duration::from_secs(60),
            retransmit: RetransmitPolicy::Fixed,
            rtt_cache_entries: crate::rtt::DEFAULT_RTT_CACHE_ENTRIES,
            handshake_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_handshakes_per_ip: None,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            cookie_lifetime: None,
            max_sessions: None,
            when_full: WhenFull::Refuse,
            require_extended_master_secret: false,
            certified_key: None,
            client_auth: ClientAuth::None,
            client_trust_anchors: None,
            certificate_compression: Arc::new(CertificateCompression::all()),
            key_cache: None,
            session_cache: SessionCacheConfig::default(),
            tickets: None,
            max_early_data: 0,
            wall_clock: None,
            mobility: Mobility::default(),
            cached_info: true,
            client_cert_cache: ClientCertCacheConfig::default(),
            reusable_cookies: false,
            address_validation: AddressValidation::Cookie,
            srtp_profiles: Vec::new(),
            versions: Versions::default(),
            suites13: Suite13::ALL.to_vec(),
            groups: NamedGroup::WITH_HYBRID.to_vec(),
        }
    }
}

impl ServerConfig {
    /// Whether the configuration can work; an `Endpoint` with an invalid one drops every datagram.
    pub fn validate(&self) -> Result<(), Error> {
        check_common(&self.suites, self.mtu)?;
        if self.psks.is_empty() && self.certified_key.is_none() {
            return Err(Error::Config("a server needs a PSK or a certified key"));
        }
        if self.client_auth != ClientAuth::None && self.client_trust_anchors.is_none() {
            return Err(Error::Config("client authentication needs client trust anchors"));
        }
        if self.client_auth != ClientAuth::None && self.wall_clock.is_none() {
            return Err(Error::Config("client authentication needs a wall clock (ServerConfig::wall_clock)"));
        }
        if !self.suites.iter().any(|s| self.can_serve(*s)) {
            return Err(Error::Config("no configured suite fits the PSKs or certified key given"));
        }
        for psk in &self.psks {
            check_psk(psk)?;
        }
        check_psk_suites13(
            self.versions,
            &self.suites13,
            !self.psks.is_empty() && self.certified_key.is_none(),
            "TLS_AES_256_GCM_SHA384 hashes with SHA-384, but an external PSK is used with SHA-256 \
             (RFC 8446 §4.2.11); add a SHA-256 suite or a certificate",
        )?;
        if self.max_sessions == Some(0) {
            return Err(Error::Config("max_sessions must be at least 1"));
        }
        if self.max_handshakes == 0 || self.max_handshakes_per_ip == Some(0) {
            return Err(Error::Config("max_handshakes and max_handshakes_per_ip must be at least 1"));
        }
        if self.cookie_lifetime.is_some_and(|l| l < Duration::from_millis(2)) {
            return Err(Error::Config("cookie_lifetime must be at least 2 ms (a cookie lives in two slots)"));
        }
        if self.psk_identity_hint.as_ref().is_some_and(|h| h.len() > MAX_PSK_FIELD) {
            return Err(Error::Config("PSK identity hint must be shorter than 64 KiB"));
        }
        Ok(())
    }

    /// Defaults with one pre-shared key.
    pub fn psk(identity: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        ServerConfig { psks: vec![Psk::new(identity, key)], ..Default::default() }
    }

    /// Defaults with a certified key for the certificate suites.
    pub fn certificate(certified_key: Arc<CertifiedKey>) -> Self {
        ServerConfig { certified_key: Some(certified_key), ..Default::default() }
    }

    /// Whether this configuration has what `suite` needs (a PSK, or a key of the suite's kind).
    pub(crate) fn can_serve(&self, suite: CipherSuite) -> bool {
        let key_algorithm = self.certified_key.as_ref().map(|k| k.key.algorithm());
        match suite.params().key_exchange {
            KeyExchange::Psk => !self.psks.is_empty(),
            KeyExchange::EcdheEcdsa => key_algorithm == Some(KeyAlgorithm::EcdsaP256),
            KeyExchange::EcdheRsa => key_algorithm == Some(KeyAlgorithm::Rsa),
            KeyExchange::Tls13 => false,
        }
    }

    /// Whether the client-authentication policy still lets `session` resume at `now_unix`
    /// (RFC 5246 §7.4.6 leaves a resumed session's authentication to the server): a policy that
    /// now requires a certificate refuses a session made without one, and a session made with
    /// one needs its chain unexpired and its trust anchor still trusted.
    pub(crate) fn lets_resume(&self, session: &ServerSession, now_unix: u64) -> bool {
        self.lets_resume_with(session.client_cert.as_ref(), now_unix)
    }

    /// [`Self::lets_resume`] for a session whose client certificate (if any) is `client_cert`.
    pub(crate) fn lets_resume_with(
        &self,
        client_cert: Option<&crate::session::ClientCertificate>,
        now_unix: u64,
    ) -> bool {
        if self.client_auth == ClientAuth::None {
            return true;
        }
        match client_cert {
            None => self.client_auth == ClientAuth::Optional,
            Some(cert) => {
                now_unix < cert.not_after
                    && self.client_trust_anchors.as_ref().is_some_and(|a| a.contains(&cert.anchor))
            }
        }
    }

    pub(crate) fn find_psk(&self, identity: &[u8]) -> Option<&Psk> {
        self.psks.iter().find(|p| p.identity == identity)
    }
}
