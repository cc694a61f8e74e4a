//! One DTLS session, client or server.
//!
//! The handshake-only state (transcript, reassembly buffer, flight, RNG, master secret) lives in
//! a boxed [`Handshake`] that is freed when the handshake completes, so an established session
//! keeps only its traffic keys, sequence numbers, replay window and counters.

use crate::alert::{AlertDescription, AlertLevel};
use crate::codec::DecodeError;
use crate::config::{ClientConfig, ServerConfig, MIN_MTU};
use crate::crypto::{open_in_place, prf_sha256, DirectionKeys, MasterSecret, TrafficKeys};
use crate::error::Error;
use crate::flight::{record_len, write_record, DatagramBuilder, FlightItem, Protect, RetransmitTimer};
use crate::handshake::{
    encode_certificate, encode_ecdhe_params, encode_psk_identity, encode_signed, parse_certificate,
    parse_certificate_verify, parse_ecdhe_client_key_exchange, parse_finished, parse_fragments,
    parse_psk_identity, psk_premaster, u16_list, CertificateRequest, ClientHello, EcdheServerKeyExchange,
    Fragment, HandshakeHeader, HandshakeType, HelloVerifyRequest, Insert, NamedGroup, OutExtensions,
    Reassembler, ServerHello, CERT_TYPE_ECDSA_SIGN, CERT_TYPE_RSA_SIGN, EXT_EXTENDED_MASTER_SECRET,
    EXT_RENEGOTIATION_INFO, MAX_COOKIE_LEN, SCSV_EMPTY_RENEGOTIATION_INFO,
};
use crate::handshake::{encode_new_session_ticket, parse_new_session_ticket};
use crate::mobility::{
    MobilityStats, PathState, PortMove, Probe, AMPLIFICATION_FACTOR, MAX_CHALLENGES, MAX_HELD_DATAGRAMS,
    RRC_PATH_CHALLENGE, RRC_PATH_RESPONSE, RRC_PORT_MOVED,
};
use crate::record::{ContentType, RecordHeader, ReplayWindow, DTLS_1_2, HEADER_LEN, MAX_SEQ};
use crate::session::ClientAuth;
use crate::session::{unix_now, ClientCertificate, ClientSession, Resumption, ServerSession, TicketKeys};
use crate::state::{HandshakeState, State};
use crate::suite::{CipherSuite, KeyExchange, RecordCipher};
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_pki::{CertDer, KeyAlgorithm, PeerPublicKey, PkiError, SignatureScheme};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use ring::digest;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Protected records kept while their keys are not derived yet, and application records that
/// authenticated before the peer's Finished.
const MAX_EARLY_RECORDS: usize = 4;
/// Bytes of protected records kept while their keys are not derived yet: nothing has
/// authenticated them, so this is memory an unauthenticated peer can pin. A Finished, an alert
/// and a first application record fit.
const MAX_EARLY_RECORD_BYTES: usize = 4096;
/// Bytes kept of a record split across datagrams (the start that came in the first one).
const MAX_SPLIT_RECORD_KEPT: usize = 8192;

/// Where decrypted application data goes: queued as events when `None`.
type DataSink<'a> = Option<&'a mut dyn FnMut(&[u8])>;

/// The ClientHello a server connection starts from, as the endpoint verified it.
pub(crate) struct VerifiedHello<'a> {
    /// Record sequence number of the ClientHello (our epoch-0 numbering continues from it, as
    /// the stateless HelloVerifyRequest reused it).
    pub record_seq: u64,
    pub message_seq: u16,
    /// The whole ClientHello body.
    pub body: &'a [u8],
    /// Size of the datagram(s) it came in, for the counters.
    pub datagram_len: usize,
    /// The cached session its session ID names, if any is fresh.
    pub cached: Option<ServerSession>,
    /// The endpoint's ticket keys now.
    pub ticket_keys: Option<TicketKeys>,
    /// The Connection ID the endpoint issues to this session if the client offers
    /// `connection_id` (unique in the endpoint; empty: none).
    pub issued_cid: Vec<u8>,
}

/// Which side of the handshake a connection plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends the ClientHello.
    Client,
    /// Answers it.
    Server,
}

/// Something the application should know.
// Connected carries the whole summary (one per session, so its size costs nothing per record);
// boxing it would break every `Event::Connected(summary)` user for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected(HandshakeSummary),
    /// One application record arrived.
    ApplicationData(Vec<u8>),
    /// The peer closed the session with close_notify.
    Closed,
    /// The session failed.
    Failed(Error),
    /// Endpoint only: a connection was just created for a client that returned a valid cookie;
    /// its first flight is queued but not yet handed out. A driver that gives sessions their own
    /// socket calls [`crate::Endpoint::set_local`] now, before its next `poll_transmit`.
    Accepted,
    /// The session now sends to this peer address (server: the client moved and the move was
    /// accepted; client: it followed the server to another port).
    PathChanged(SocketAddr),
}

/// What a completed handshake cost and agreed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeSummary {
    /// The suite agreed.
    pub suite: CipherSuite,
    /// Whether an earlier session was resumed (abbreviated handshake); `resumption` says how.
    pub resumed: bool,
    /// How the session was resumed, if it was.
    pub resumption: Option<Resumption>,
    /// Client: the session to resume later (session ID and/or ticket), when the server issued one.
    pub session: Option<ClientSession>,
    /// Certificates the peer sent (0 with PSK, or a client that sent none).
    pub peer_certificates: usize,
    /// The peer's validated leaf certificate (DER), if it sent one.
    pub peer_leaf: Option<CertDer>,
    /// From the first ClientHello sent (client) or the cookie-verified ClientHello (server) to completion.
    pub duration: Duration,
    /// Flights sent, first transmissions only.
    pub flights_sent: u32,
    /// Flights resent.
    pub retransmissions: u32,
    /// Datagrams from the peer that repeated handshake messages already received: the peer
    /// resent a flight (or the network duplicated one). With [`Self::retransmissions`], 0 on
    /// both sides means no side waited for a timer.
    pub peer_retransmissions: u32,
    /// Whether the master secret is bound to the handshake (RFC 7627).
    pub extended_master_secret: bool,
    /// The PSK identity used.
    pub psk_identity: Vec<u8>,
    /// Datagrams sent during the handshake.
    pub datagrams_sent: u64,
    /// Datagrams received during the handshake.
    pub datagrams_received: u64,
    /// Bytes sent during the handshake (UDP payload).
    pub bytes_sent: u64,
    /// Bytes received during the handshake (UDP payload).
    pub bytes_received: u64,
}

/// Counters of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams handed out by `poll_transmit` or `seal_into`.
    pub datagrams_sent: u64,
    /// Datagrams passed in.
    pub datagrams_received: u64,
    /// Bytes of those datagrams sent.
    pub bytes_sent: u64,
    /// Bytes of those datagrams received.
    pub bytes_received: u64,
    /// Handshake flights sent (first transmissions).
    pub flights_sent: u64,
    /// Handshake flights resent.
    pub flights_resent: u64,
    /// Records dropped: unparsable, failing authentication, replayed or out of place.
    pub records_dropped: u64,
    /// Application records sent.
    pub app_records_sent: u64,
    /// Application records delivered.
    pub app_records_received: u64,
}

#[derive(Clone)]
enum RoleConfig {
    Client(Arc<ClientConfig>),
    Server(Arc<ServerConfig>),
}

/// Traffic keys of epoch 1, oriented for this side.
struct Protection {
    cipher: RecordCipher,
    read: DirectionKeys,
    write: DirectionKeys,
}

/// State that exists only while handshaking (and, on the server, until the client shows it got
/// the last flight).
struct Handshake {
    started: Instant,
    rng: ChaCha20Rng,
    client_random: [u8; 32],
    server_random: [u8; 32],
    transcript: digest::Context,
    reassembler: Reassembler,
    /// message_seq of our next handshake message.
    next_message_seq: u16,
    /// Next record sequence number in epoch 0.
    epoch0_write_seq: u64,
    flight: Vec<FlightItem>,
    timer: RetransmitTimer,
    flights_sent: u32,
    retransmissions: u32,
    /// Datagrams that repeated messages of the peer already received, and the datagram count
    /// when the last one was counted (so a datagram counts once).
    peer_retransmissions: u32,
    peer_retransmission_seen_at: u64,
    /// message_seq of the last message of the peer's previous flight: seeing it again means our
    /// answer to it was lost.
    peer_prev_flight_last: Option<u16>,
    master: Option<MasterSecret>,
    extended_master_secret: bool,
    psk_identity: Vec<u8>,
    /// Client: the last ClientHello body sent and its message_seq (it opens the transcript).
    client_hello: Vec<u8>,
    client_hello_seq: u16,
    cookie: Vec<u8>,
    /// Server: drop the retained last flight at this time.
    retain_until: Option<Instant>,
    /// Protected records that arrived before their keys (reordered ahead of ClientKeyExchange).
    early_records: Vec<(RecordHeader, Vec<u8>)>,
    /// A record the peer split across two datagrams, waiting for its rest.
    split_record: Option<SplitRecord>,
    /// The first protected handshake record of the peer that failed authentication while none
    /// had authenticated yet: a wrong key, or a forgery.
    auth_failure: Option<AuthFailure>,
    /// Application records that authenticated before the peer's Finished (sent right behind
    /// it and reordered ahead): delivered once the handshake completes, not dropped.
    early_data: Vec<Vec<u8>>,
    /// Certificate suites only; empty otherwise.
    cert: Option<Box<CertHandshake>>,
    /// Session resumption, offered or in progress; empty when neither side does any.
    resume: Option<Box<ResumeHandshake>>,
}

/// A protected handshake record of the peer that did not authenticate before any did.
#[derive(Clone, Copy)]
struct AuthFailure {
    at: Instant,
    /// `stats.datagrams_received` when it came, to tell later datagrams from it.
    datagram: u64,
    /// The peer resent its flight (a handshake message or ChangeCipherSpec again) in a later datagram.
    peer_resent: bool,
}

/// Handshake state of session resumption (RFC 5246 §7.3, RFC 5077).
#[derive(Default)]
struct ResumeHandshake {
    /// How this handshake resumes, once agreed.
    resumption: Option<Resumption>,
    /// Client: the session offered.
    offer: Option<ClientSession>,
    /// Client: the session ID sent in ClientHello (the offer's, or random beside a ticket).
    offered_session_id: Vec<u8>,
    /// The session ID of the ServerHello (the new session's in a full handshake).
    session_id: Vec<u8>,
    /// A NewSessionTicket comes (client) or goes (server) before the server's Finished.
    ticket_expected: bool,
    /// Client: the ticket received and its lifetime hint.
    new_ticket: Option<(u32, Vec<u8>)>,
    /// Server: keys to open and seal tickets with.
    ticket_keys: Option<TicketKeys>,
    /// Server: the session resumed (its creation time carries over into a renewed ticket).
    resumed_session: Option<ServerSession>,
    /// Server: a new session for the endpoint's cache, once the handshake completes.
    new_cache_entry: Option<([u8; 32], ServerSession)>,
}

/// Handshake state of the certificate suites, kept apart so a PSK handshake does not carry it.
#[derive(Default)]
struct CertHandshake {
    /// The raw messages so far, kept only when a CertificateVerify will be made or checked
    /// (its signature covers them all, and ring hashes inside the signature).
    transcript_raw: Option<Vec<u8>>,
    /// Our ephemeral ECDH key and its group.
    ecdhe: Option<(NamedGroup, EcdheSecret)>,
    /// Client: the server's ephemeral public key.
    peer_ecdhe: Option<(NamedGroup, Vec<u8>)>,
    /// The peer's validated leaf key.
    peer_key: Option<PeerPublicKey>,
    peer_certificates: usize,
    peer_leaf: Option<CertDer>,
    /// Client: the server asked for a certificate.
    request: Option<CertificateRequest>,
    /// Server: what validating the client's chain established, for the session it makes.
    client_certificate: Option<ClientCertificate>,
}

impl Handshake {
    /// Checks the peer's Finished against the transcript so far, in constant time
    /// (`from_client`: whose Finished it is). A mismatch is decrypt_error (RFC 5246 §7.4.9).
    fn check_peer_finished(&self, body: &[u8], from_client: bool) -> Result<(), Abort> {
        let verify = parse_finished(body).map_err(Abort::decode)?;
        let expected = match &self.master {
            Some(m) => m.verify_data(from_client, self.transcript_hash().as_ref()),
            None => return Err(Abort::alert(AlertDescription::InternalError)),
        };
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&verify[..], &expected[..])) {
            return Err(Abort::alert(AlertDescription::DecryptError));
        }
        Ok(())
    }

    fn new(now: Instant, seed: [u8; 32], initial: Duration, max: Duration) -> Box<Self> {
        Box::new(Handshake {
            started: now,
            rng: ChaCha20Rng::from_seed(seed),
            client_random: [0; 32],
            server_random: [0; 32],
            transcript: digest::Context::new(&digest::SHA256),
            reassembler: Reassembler::new(0),
            next_message_seq: 0,
            epoch0_write_seq: 0,
            flight: Vec::new(),
            timer: RetransmitTimer::new(initial, max),
            flights_sent: 0,
            retransmissions: 0,
            peer_retransmissions: 0,
            peer_retransmission_seen_at: 0,
            peer_prev_flight_last: None,
            master: None,
            extended_master_secret: false,
            psk_identity: Vec::new(),
            client_hello: Vec::new(),
            client_hello_seq: 0,
            cookie: Vec::new(),
            retain_until: None,
            early_records: Vec::new(),
            split_record: None,
            auth_failure: None,
            early_data: Vec::new(),
            cert: None,
            resume: None,
        })
    }

    fn hash_message(&mut self, msg_type: HandshakeType, message_seq: u16, body: &[u8]) {
        let header = HandshakeHeader::unfragmented(msg_type, message_seq, body.len() as u32);
        self.transcript.update(&header);
        self.transcript.update(body);
        if let Some(raw) = self.cert.as_mut().and_then(|c| c.transcript_raw.as_mut()) {
            raw.extend_from_slice(&header);
            raw.extend_from_slice(body);
        }
    }

    fn resume_mut(&mut self) -> &mut ResumeHandshake {
        self.resume.get_or_insert_with(Default::default)
    }

    fn cert_mut(&mut self) -> Result<&mut CertHandshake, Abort> {
        self.cert.as_deref_mut().ok_or(Abort::alert(AlertDescription::InternalError))
    }

    fn transcript_hash(&self) -> digest::Digest {
        self.transcript.clone().finish()
    }

    /// Adds a message of ours to the current flight and to the transcript.
    fn push_message(&mut self, epoch: u16, msg_type: HandshakeType, body: Vec<u8>, hash: bool) {
        let message_seq = self.next_message_seq;
        self.next_message_seq = self.next_message_seq.wrapping_add(1);
        if hash {
            self.hash_message(msg_type, message_seq, &body);
        }
        self.flight.push(FlightItem::Handshake { epoch, msg_type, message_seq, body });
    }
}

/// The start of a record the peer split across datagrams, kept for the next datagram.
struct SplitRecord {
    /// Header and the part of the body that came.
    bytes: Vec<u8>,
    /// Length of the whole record, header included (at most 13 + 255 + 2^14 + 2048 bytes).
    len: usize,
}

impl SplitRecord {
    /// How many leading bytes of `datagram` complete the record: only when the datagram does not
    /// read as whole records by itself and does once those bytes are taken off, so an ordinary
    /// datagram is never taken apart.
    fn continuation_len(&self, datagram: &[u8], cid_len: u8) -> Option<usize> {
        let need = self.len.checked_sub(self.bytes.len())?;
        let whole = |d: &[u8]| crate::record::Records::with_cid(d, cid_len).all(|r| r.is_ok());
        (need > 0 && datagram.len() >= need && !whole(datagram) && whole(&datagram[need..])).then_some(need)
    }
}

/// A fatal condition found while handling input: the alert to send (if any) and the error.
struct Abort {
    alert: Option<AlertDescription>,
    error: Error,
}

impl Abort {
    fn alert(desc: AlertDescription) -> Self {
        Abort { alert: Some(desc), error: Error::AlertSent(desc) }
    }
    fn decode(_: DecodeError) -> Self {
        Abort::alert(AlertDescription::DecodeError)
    }
    /// The peer's certificate or signature was refused.
    fn peer(e: PkiError) -> Self {
        let alert = AlertDescription::from_code(e.alert_code());
        Abort { alert: Some(alert), error: Error::PeerAuthentication { alert, reason: e.to_string() } }
    }
}

/// Signature schemes we offer and accept, in our order of preference.
const SCHEMES: [u16; 3] = [
    SignatureScheme::EcdsaSecp256r1Sha256.code(),
    SignatureScheme::RsaPssRsaeSha256.code(),
    SignatureScheme::RsaPkcs1Sha256.code(),
];
/// Groups we offer: x25519 (29), then secp256r1 (23).
const GROUPS: [u16; 2] = [29, 23];

/// The key algorithm a certificate suite's server must have.
fn suite_key_algorithm(suite: CipherSuite) -> Option<KeyAlgorithm> {
    match suite.params().key_exchange {
        KeyExchange::Psk => None,
        KeyExchange::EcdheEcdsa => Some(KeyAlgorithm::EcdsaP256),
        KeyExchange::EcdheRsa => Some(KeyAlgorithm::Rsa),
    }
}

/// Our ephemeral ECDH secret, drawn from the seeded RNG (both types zeroize on drop).
enum EcdheSecret {
    X25519(x25519_dalek::EphemeralSecret),
    P256(p256::ecdh::EphemeralSecret),
}

/// A fresh ephemeral key of `group` and its public key as sent (uncompressed point for P-256).
fn ephemeral(group: NamedGroup, rng: &mut ChaCha20Rng) -> (EcdheSecret, Vec<u8>) {
    match group {
        NamedGroup::X25519 => {
            let secret = x25519_dalek::EphemeralSecret::random_from_rng(&mut *rng);
            let public = x25519_dalek::PublicKey::from(&secret).as_bytes().to_vec();
            (EcdheSecret::X25519(secret), public)
        }
        NamedGroup::Secp256r1 => {
            use p256::elliptic_curve::sec1::ToEncodedPoint;
            let secret = p256::ecdh::EphemeralSecret::random(&mut *rng);
            let public = secret.public_key().to_encoded_point(false).as_bytes().to_vec();
            (EcdheSecret::P256(secret), public)
        }
    }
}

/// ECDH with the peer's public key; the shared secret is the premaster secret (RFC 8422 §5.10).
/// A malformed point, a point not on the curve, or a small-order X25519 key is illegal_parameter.
fn agree(secret: EcdheSecret, group: NamedGroup, peer: &[u8]) -> Result<zeroize::Zeroizing<Vec<u8>>, Abort> {
    let illegal = || Abort::alert(AlertDescription::IllegalParameter);
    if peer.len() != group.public_len() {
        return Err(illegal());
    }
    match secret {
        EcdheSecret::X25519(secret) => {
            let bytes: [u8; 32] = peer.try_into().map_err(|_| illegal())?;
            let shared = secret.diffie_hellman(&x25519_dalek::PublicKey::from(bytes));
            // RFC 8422 §5.11: an all-zero result means a small-order peer key.
            if !shared.was_contributory() {
                return Err(illegal());
            }
            Ok(zeroize::Zeroizing::new(shared.as_bytes().to_vec()))
        }
        EcdheSecret::P256(secret) => {
            // Uncompressed points only (RFC 8422 §5.1.2: the only format we offer).
            if peer.first() != Some(&4) {
                return Err(illegal());
            }
            let public = p256::PublicKey::from_sec1_bytes(peer).map_err(|_| illegal())?;
            let shared = secret.diffie_hellman(&public);
            Ok(zeroize::Zeroizing::new(shared.raw_secret_bytes().to_vec()))
        }
    }
}

fn sign(
    key: &fastshake_pki::SigningKey,
    scheme: SignatureScheme,
    message: &[u8],
    rng: &mut ChaCha20Rng,
) -> Result<Vec<u8>, Abort> {
    key.sign(scheme, message, rng).map_err(|_| Abort::alert(AlertDescription::InternalError))
}

/// One session, client or server.
pub struct Connection {
    config: RoleConfig,
    remote: SocketAddr,
    state: State,
    hs: Option<Box<Handshake>>,
    protection: Option<Protection>,
    /// Epoch our records are written in (1 once our ChangeCipherSpec went out). One byte, as
    /// renegotiation is refused: it keeps an established session within its size.
    write_epoch: u8,
    /// Next record sequence number in epoch 1.
    write_seq: u64,
    read_window: ReplayWindow,
    suite: Option<CipherSuite>,
    /// First 4 bytes of the client random of this session's ClientHello and its message_seq,
    /// so the endpoint can tell a copy of it (late or retransmitted) from a new handshake.
    hello_id: u32,
    hello_seq: u16,
    stats: Stats,
    /// Connection ID, address checks, own socket, port moves: only when in use.
    path: Option<Box<PathState>>,
    /// Datagrams and events not yet polled; `None` when both are empty.
    queued: Option<Box<Queues>>,
}

/// Datagrams queued and not yet polled.
fn queued_outgoing(queued: &Option<Box<Queues>>) -> impl Iterator<Item = &Vec<u8>> + '_ {
    queued.iter().flat_map(|q| q.outgoing.iter())
}

/// What a connection has for its driver. Boxed and freed once polled empty, so an idle session
/// keeps one pointer rather than two empty deques (64 bytes).
#[derive(Default)]
struct Queues {
    events: VecDeque<Event>,
    outgoing: VecDeque<Vec<u8>>,
}

impl Connection {
    /// A client session towards `remote`; the ClientHello is ready in `poll_transmit`.
    pub fn client(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
    ) -> Connection {
        let mut conn = Connection::client_inner(config, now, remote, rng_seed, |_| {});
        if conn.hs.is_some() && !conn.is_closed() {
            conn.send_client_hello(now);
        }
        conn
    }

    /// A client connection with its handshake state prepared by `prepare`, before the ClientHello.
    fn client_inner(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
        prepare: impl FnOnce(&mut Handshake),
    ) -> Connection {
        let mut hs = Handshake::new(now, rng_seed, config.initial_retransmit, config.max_retransmit);
        let mut random = [0u8; 32];
        hs.rng.fill_bytes(&mut random);
        hs.client_random = random;
        if config.trust_anchors.is_some() {
            hs.cert = Some(Box::new(CertHandshake {
                transcript_raw: config.certified_key.is_some().then(Vec::new),
                ..Default::default()
            }));
        }
        prepare(&mut hs);
        let path = config.mobility.any().then(|| {
            let mut own_cid = vec![0u8; config.mobility.connection_id.unwrap_or(0) as usize];
            hs.rng.fill_bytes(&mut own_cid);
            Box::new(PathState {
                own_cid: own_cid.into(),
                offered_cid: config.mobility.connection_id.is_some(),
                ..Default::default()
            })
        });
        let mut conn = Connection::bare(RoleConfig::Client(config.clone()), remote, Some(hs));
        conn.path = path;
        conn.hello_id = hello_id(&random);
        conn.state = State::Handshaking(HandshakeState::ClientWaitServerHello);
        if let Err(error) = config.validate() {
            conn.fail(Abort { alert: None, error });
        }
        conn
    }

    /// A client session that offers to resume `session` (by ticket when it has one, else by
    /// session ID); the server may decline and run a full handshake instead.
    pub fn client_with_session(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
        session: Option<ClientSession>,
    ) -> Connection {
        let mut conn = Connection::client_inner(config.clone(), now, remote, rng_seed, |hs| {
            let now_unix = unix_now(config.wall_clock, now);
            // Offer only what can work: a suite still configured, not expired by our clock,
            // made for the same server name.
            let usable = session.filter(|s| {
                config.offered_suites().any(|o| o == s.suite)
                    && (config.wall_clock.is_none() || now_unix < s.expires_unix())
                    && s.server_name == config.server_name
                    && (s.ticket.is_some() || !s.session_id.is_empty())
            });
            if let Some(offer) = usable {
                let mut offered_session_id = offer.session_id.clone();
                if offered_session_id.is_empty() {
                    // RFC 5077 §3.4: a session ID beside the ticket tells us when the server accepts it.
                    let mut id = [0u8; 32];
                    hs.rng.fill_bytes(&mut id);
                    offered_session_id = id.to_vec();
                }
                let resume = hs.resume_mut();
                resume.offered_session_id = offered_session_id;
                resume.offer = Some(offer);
            }
        });
        if conn.hs.is_some() && !conn.is_closed() {
            conn.send_client_hello(now);
        }
        conn
    }

    fn bare(config: RoleConfig, remote: SocketAddr, hs: Option<Box<Handshake>>) -> Connection {
        Connection {
            config,
            remote,
            state: State::Failed,
            hs,
            protection: None,
            write_epoch: 0,
            write_seq: 0,
            read_window: ReplayWindow::default(),
            suite: None,
            hello_id: 0,
            hello_seq: 0,
            stats: Stats::default(),
            path: None,
            queued: None,
        }
    }

    /// A server session for a ClientHello whose cookie the endpoint verified.
    pub(crate) fn server(
        config: Arc<ServerConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
        hello: VerifiedHello<'_>,
    ) -> Connection {
        let VerifiedHello {
            record_seq,
            message_seq,
            body: hello,
            datagram_len,
            cached,
            ticket_keys,
            issued_cid,
        } = hello;
        let mut hs = Handshake::new(now, rng_seed, config.initial_retransmit, config.max_retransmit);
        // Mobility state is made only when the server offers some; dropped again in
        // server_handle_client_hello when the client negotiated none of it.
        let path = config.mobility.any().then(|| {
            let mut seed = [0u8; 32];
            hs.rng.fill_bytes(&mut seed);
            Box::new(PathState {
                own_cid: issued_cid.into(),
                cookie_seed: config.mobility.return_routability_check.then_some(seed),
                ..Default::default()
            })
        });
        if cached.is_some() || ticket_keys.is_some() || config.session_cache.max_entries > 0 {
            let resume = hs.resume_mut();
            resume.resumed_session = cached;
            resume.ticket_keys = ticket_keys;
        }
        let mut conn = Connection::bare(RoleConfig::Server(config), remote, Some(hs));
        conn.path = path;
        conn.stats.datagrams_received = 1;
        conn.stats.bytes_received = datagram_len as u64;
        conn.state = State::Handshaking(HandshakeState::ServerWaitClientKeyExchange);
        if let Some(hs) = conn.hs.as_mut() {
            // Continue after the peer's number; a hostile number near the 48-bit limit restarts at 0.
            hs.epoch0_write_seq = if record_seq < MAX_SEQ / 2 { record_seq + 1 } else { 0 };
        }
        if let Err(abort) = conn.server_handle_client_hello(now, message_seq, hello) {
            conn.fail(abort);
        }
        conn
    }

    fn client_config(&self) -> Option<&Arc<ClientConfig>> {
        match &self.config {
            RoleConfig::Client(c) => Some(c),
            RoleConfig::Server(_) => None,
        }
    }

    fn mtu(&self) -> usize {
        match &self.config {
            RoleConfig::Client(c) => c.mtu,
            RoleConfig::Server(c) => c.mtu,
        }
        .clamp(MIN_MTU, u16::MAX as usize)
    }

    fn handshake_timeout(&self) -> Duration {
        match &self.config {
            RoleConfig::Client(c) => c.handshake_timeout,
            RoleConfig::Server(c) => c.handshake_timeout,
        }
    }

    // ---------------------------------------------------------------- client handshake

    fn send_client_hello(&mut self, now: Instant) {
        let Some(config) = self.client_config().cloned() else { return };
        let Some(hs) = self.hs.as_mut() else { return };
        let own_cid = self.path.as_deref().filter(|p| p.offered_cid).map(|p| &p.own_cid[..]);
        let suites: Vec<u16> = config.offered_suites().map(|s| s.id()).collect();
        let mut body = Vec::with_capacity(160);
        // RFC 6066 §3: server_name carries DNS names only, never address literals.
        let server_name = config
            .server_name
            .as_deref()
            .filter(|n| n.parse::<std::net::IpAddr>().is_err())
            .map(str::as_bytes);
        let offer = hs.resume.as_deref().and_then(|r| r.offer.as_ref().map(|o| (o, &r.offered_session_id)));
        let session_ticket = match offer.and_then(|(o, _)| o.ticket.as_deref()) {
            Some(ticket) => Some(ticket),
            None => config.enable_tickets.then_some(&[][..]),
        };
        let ext = OutExtensions {
            extended_master_secret: true,
            server_name: if hs.cert.is_some() { server_name } else { None },
            ecc: hs.cert.is_some().then_some((&GROUPS[..], &SCHEMES[..])),
            session_ticket,
            connection_id: own_cid,
            rrc: config.mobility.return_routability_check,
            port_move: config.mobility.follow_server_port,
            ..Default::default()
        };
        let session_id = offer.map_or(&[][..], |(_, id)| id.as_slice());
        ClientHello::encode_with(&mut body, &hs.client_random, session_id, &hs.cookie, &suites, &ext);
        hs.flight.clear();
        hs.client_hello_seq = hs.next_message_seq;
        hs.client_hello = body.clone();
        // The transcript starts with the ClientHello the ServerHello answers (RFC 6347 §4.2.6),
        // so it is hashed only when the ServerHello arrives.
        hs.push_message(0, HandshakeType::ClientHello, body, false);
        // The server mirrors our message_seq in its answer.
        hs.reassembler.reset(hs.client_hello_seq);
        self.send_new_flight(now, true);
    }

    fn client_handle_hello_verify(
        &mut self,
        now: Instant,
        message_seq: u16,
        body: &[u8],
    ) -> Result<(), Abort> {
        let hvr = HelloVerifyRequest::parse(body).map_err(Abort::decode)?;
        if hvr.cookie.len() > MAX_COOKIE_LEN {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        let Some(hs) = self.hs.as_mut() else { return Ok(()) };
        // The server answers each ClientHello with its message_seq (RFC 6347 §4.2.2): a lower
        // one answers a ClientHello we already replaced. Taking its cookie would restart the
        // handshake under a ServerHello already on its way, which then looks out of order.
        if message_seq != hs.client_hello_seq {
            self.stats.records_dropped += 1;
            return Ok(());
        }
        if hs.cookie == hvr.cookie {
            // A duplicate answer to a ClientHello we already resent with this cookie.
            return Ok(());
        }
        hs.cookie = hvr.cookie.to_vec();
        self.send_client_hello(now);
        Ok(())
    }

    fn client_handle_message(
        &mut self,
        now: Instant,
        st: HandshakeState,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
    ) -> Result<(), Abort> {
        let config = self.client_config().cloned().ok_or(Abort::alert(AlertDescription::InternalError))?;
        let hs = self.hs.as_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
        match (st, msg_type) {
            (HandshakeState::ClientWaitServerHello, HandshakeType::ServerHello) => {
                let sh = ServerHello::parse(body).map_err(Abort::decode)?;
                if sh.version != DTLS_1_2 {
                    return Err(Abort::alert(AlertDescription::ProtocolVersion));
                }
                let suite = CipherSuite::from_id(sh.cipher_suite)
                    .filter(|s| config.offered_suites().any(|o| o == *s))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                if sh.compression_method != 0 {
                    return Err(Abort::alert(AlertDescription::IllegalParameter));
                }
                if !sh.extensions.unknown_types.is_empty() {
                    return Err(Abort::alert(AlertDescription::UnsupportedExtension));
                }
                // Mobility extensions only as answers to ours (RFC 5246 §7.4.1.4).
                let offered = &config.mobility;
                if (sh.extensions.connection_id.is_some() && offered.connection_id.is_none())
                    || (sh.extensions.rrc && !offered.return_routability_check)
                    || (sh.extensions.port_move && !offered.follow_server_port)
                {
                    return Err(Abort::alert(AlertDescription::UnsupportedExtension));
                }
                if let Some(path) = self.path.as_deref_mut() {
                    path.cid_negotiated = sh.extensions.connection_id.is_some();
                    path.peer_cid = sh.extensions.connection_id.unwrap_or_default().into();
                    if !path.cid_negotiated {
                        path.own_cid = Box::default();
                    }
                    path.rrc = sh.extensions.rrc;
                    path.port_move = sh.extensions.port_move;
                }
                if sh.extensions.renegotiation_info.is_some_and(|r| !r.is_empty()) {
                    return Err(Abort::alert(AlertDescription::HandshakeFailure));
                }
                if !sh.extensions.extended_master_secret && config.require_extended_master_secret {
                    return Err(Abort::alert(AlertDescription::HandshakeFailure));
                }
                hs.extended_master_secret = sh.extensions.extended_master_secret;
                hs.server_random = sh.random;
                let ch = std::mem::take(&mut hs.client_hello);
                let ch_seq = hs.client_hello_seq;
                hs.hash_message(HandshakeType::ClientHello, ch_seq, &ch);
                hs.hash_message(msg_type, message_seq, body);
                self.suite = Some(suite);
                let resumed = hs.resume.as_deref().and_then(|r| {
                    let offer = r.offer.as_ref()?;
                    (!sh.session_id.is_empty() && sh.session_id == r.offered_session_id.as_slice())
                        .then(|| (offer.suite, offer.master_secret, offer.ticket.is_some()))
                });
                let ticket_expected = sh.extensions.session_ticket.is_some();
                let resume = hs.resume_mut();
                resume.session_id = sh.session_id.to_vec();
                resume.ticket_expected = ticket_expected;
                if let Some((session_suite, master, by_ticket)) = resumed {
                    // RFC 7627 §5.3: a session made with the extended master secret resumes only with it.
                    if session_suite != suite {
                        return Err(Abort::alert(AlertDescription::IllegalParameter));
                    }
                    if !sh.extensions.extended_master_secret {
                        return Err(Abort::alert(AlertDescription::HandshakeFailure));
                    }
                    resume.resumption =
                        Some(if by_ticket { Resumption::Ticket } else { Resumption::SessionId });
                    if suite.is_psk() {
                        hs.psk_identity = config.psk.as_ref().map(|p| p.identity.clone()).unwrap_or_default();
                    }
                    hs.master = Some(MasterSecret(master));
                    let keys = keys_from_master(hs).ok_or(Abort::alert(AlertDescription::InternalError))?;
                    self.protection = Some(Protection {
                        cipher: suite.params().cipher,
                        read: keys.server_write.clone(),
                        write: keys.client_write.clone(),
                    });
                    self.state = State::Handshaking(HandshakeState::ClientWaitServerFinished);
                    return Ok(());
                }
                self.state = State::Handshaking(if suite.is_psk() {
                    HandshakeState::ClientWaitServerHelloDone
                } else {
                    HandshakeState::ClientWaitCertificate
                });
                Ok(())
            }
            (HandshakeState::ClientWaitCertificate, HandshakeType::Certificate) => {
                let certs = parse_certificate(body).map_err(Abort::decode)?;
                let chain: Vec<CertDer> = certs.iter().map(|c| CertDer::from(c.to_vec())).collect();
                let anchors =
                    config.trust_anchors.as_ref().ok_or(Abort::alert(AlertDescription::InternalError))?;
                let key = fastshake_pki::verify_server_chain(
                    &chain,
                    anchors,
                    config.wall_clock.map_or(0, |w| w.unix_at(now)),
                    config.server_name.as_deref(),
                )
                .map_err(Abort::peer)?
                .key;
                let suite = self.suite.ok_or(Abort::alert(AlertDescription::InternalError))?;
                if suite_key_algorithm(suite) != Some(key.algorithm()) {
                    return Err(Abort::alert(AlertDescription::UnsupportedCertificate));
                }
                hs.hash_message(msg_type, message_seq, body);
                let cert = hs.cert_mut()?;
                cert.peer_key = Some(key);
                cert.peer_certificates = chain.len();
                cert.peer_leaf = chain.into_iter().next();
                self.state = State::Handshaking(HandshakeState::ClientWaitServerKeyExchange);
                Ok(())
            }
            (HandshakeState::ClientWaitServerKeyExchange, HandshakeType::ServerKeyExchange) => {
                let ske = EcdheServerKeyExchange::parse(body).map_err(Abort::decode)?;
                let group = NamedGroup::from_code(ske.group)
                    .filter(|g| GROUPS.contains(&g.code()))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                if ske.public.len() != group.public_len() {
                    return Err(Abort::alert(AlertDescription::IllegalParameter));
                }
                let scheme = SignatureScheme::from_code(ske.scheme)
                    .filter(|s| SCHEMES.contains(&s.code()))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let mut signed = Vec::with_capacity(64 + ske.params.len());
                signed.extend_from_slice(&hs.client_random);
                signed.extend_from_slice(&hs.server_random);
                signed.extend_from_slice(ske.params);
                let cert = hs.cert.as_deref_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
                let key = cert.peer_key.as_ref().ok_or(Abort::alert(AlertDescription::InternalError))?;
                fastshake_pki::verify_signature(key, scheme, &signed, ske.signature).map_err(Abort::peer)?;
                cert.peer_ecdhe = Some((group, ske.public.to_vec()));
                hs.hash_message(msg_type, message_seq, body);
                self.state = State::Handshaking(HandshakeState::ClientWaitServerHelloDone);
                Ok(())
            }
            (HandshakeState::ClientWaitServerHelloDone, HandshakeType::CertificateRequest)
                if hs.cert.as_ref().is_some_and(|c| c.peer_key.is_some() && c.request.is_none()) =>
            {
                let request = CertificateRequest::parse(body).map_err(Abort::decode)?;
                hs.hash_message(msg_type, message_seq, body);
                hs.cert_mut()?.request = Some(request);
                Ok(())
            }
            (HandshakeState::ClientWaitServerHelloDone, HandshakeType::ServerKeyExchange)
                if self.suite.is_some_and(|s| s.is_psk()) =>
            {
                // The identity hint is informational: the client has one configured key.
                parse_psk_identity(body).map_err(Abort::decode)?;
                hs.hash_message(msg_type, message_seq, body);
                Ok(())
            }
            (HandshakeState::ClientWaitServerHelloDone, HandshakeType::ServerHelloDone) => {
                if !body.is_empty() {
                    return Err(Abort::alert(AlertDescription::DecodeError));
                }
                hs.hash_message(msg_type, message_seq, body);
                hs.peer_prev_flight_last = Some(message_seq);
                self.client_send_key_exchange(now, &config)
            }
            (HandshakeState::ClientWaitServerFinished, HandshakeType::NewSessionTicket)
                if hs.resume.as_ref().is_some_and(|r| r.ticket_expected && r.new_ticket.is_none()) =>
            {
                let (hint, ticket) = parse_new_session_ticket(body).map_err(Abort::decode)?;
                let ticket = ticket.to_vec();
                hs.hash_message(msg_type, message_seq, body);
                // An empty ticket means "none this time" (RFC 5077 §3.3).
                hs.resume_mut().new_ticket = (!ticket.is_empty()).then_some((hint, ticket));
                hs.resume_mut().ticket_expected = false;
                Ok(())
            }
            (HandshakeState::ClientWaitServerFinished, HandshakeType::Finished) => {
                hs.check_peer_finished(body, false)?;
                if hs.resume.as_ref().is_some_and(|r| r.resumption.is_some()) {
                    // Abbreviated handshake: our ChangeCipherSpec and Finished close it.
                    hs.hash_message(msg_type, message_seq, body);
                    hs.peer_prev_flight_last = Some(message_seq);
                    let verify = match &hs.master {
                        Some(m) => m.verify_data(true, hs.transcript_hash().as_ref()),
                        None => return Err(Abort::alert(AlertDescription::InternalError)),
                    };
                    hs.flight.clear();
                    hs.flight.push(FlightItem::ChangeCipherSpec);
                    hs.push_message(1, HandshakeType::Finished, verify.to_vec(), false);
                    self.send_new_flight(now, false);
                }
                self.complete_handshake(now);
                Ok(())
            }
            _ => Err(Abort::alert(AlertDescription::UnexpectedMessage)),
        }
    }

    fn client_send_key_exchange(&mut self, now: Instant, config: &ClientConfig) -> Result<(), Abort> {
        let suite = self.suite.ok_or(Abort::alert(AlertDescription::InternalError))?;
        let hs = self.hs.as_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
        hs.flight.clear();
        // Certificate suites: our certificate (when asked) goes before ClientKeyExchange, and
        // CertificateVerify after it; the scheme is the first of our key's the server accepts.
        let mut verify_with: Option<(SignatureScheme, &fastshake_pki::CertifiedKey)> = None;
        let premaster = if suite.is_psk() {
            let psk = config.psk.as_ref().ok_or(Abort::alert(AlertDescription::InternalError))?;
            let mut cke = Vec::with_capacity(2 + psk.identity.len());
            encode_psk_identity(&mut cke, &psk.identity);
            hs.push_message(0, HandshakeType::ClientKeyExchange, cke, true);
            hs.psk_identity = psk.identity.clone();
            psk_premaster(&psk.key)
        } else {
            let cert = hs.cert.as_deref_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
            let (group, peer_public) =
                cert.peer_ecdhe.take().ok_or(Abort::alert(AlertDescription::InternalError))?;
            if let Some(request) = &cert.request {
                verify_with = config.certified_key.as_deref().and_then(|ck| {
                    let kind = match ck.key.algorithm() {
                        KeyAlgorithm::EcdsaP256 => CERT_TYPE_ECDSA_SIGN,
                        KeyAlgorithm::Rsa => CERT_TYPE_RSA_SIGN,
                    };
                    if !request.certificate_types.contains(&kind) {
                        return None;
                    }
                    let scheme = ck.key.schemes().iter().find(|s| request.schemes.contains(&s.code()))?;
                    Some((*scheme, ck))
                });
                let chain: Vec<&[u8]> = verify_with
                    .map(|(_, ck)| ck.chain.iter().map(|c| c.as_ref()).collect())
                    .unwrap_or_default();
                let mut body = Vec::with_capacity(3 + chain.iter().map(|c| 3 + c.len()).sum::<usize>());
                encode_certificate(&mut body, &chain);
                hs.push_message(0, HandshakeType::Certificate, body, true);
            }
            let (private, public) = ephemeral(group, &mut hs.rng);
            let mut cke = Vec::with_capacity(1 + public.len());
            crate::codec::put_vec8(&mut cke, &public);
            hs.push_message(0, HandshakeType::ClientKeyExchange, cke, true);
            agree(private, group, &peer_public)?
        };
        let keys = derive_keys(hs, &premaster);
        if let Some((scheme, ck)) = verify_with {
            let raw = hs
                .cert
                .as_deref_mut()
                .and_then(|c| c.transcript_raw.take())
                .ok_or(Abort::alert(AlertDescription::InternalError))?;
            let signature = sign(&ck.key, scheme, &raw, &mut hs.rng)?;
            let mut body = Vec::with_capacity(4 + signature.len());
            encode_signed(&mut body, scheme.code(), &signature);
            hs.push_message(0, HandshakeType::CertificateVerify, body, true);
        }
        self.protection = Some(Protection {
            cipher: suite.params().cipher,
            read: keys.server_write.clone(),
            write: keys.client_write.clone(),
        });
        hs.flight.push(FlightItem::ChangeCipherSpec);
        let verify = match &hs.master {
            Some(m) => m.verify_data(true, hs.transcript_hash().as_ref()),
            None => return Err(Abort::alert(AlertDescription::InternalError)),
        };
        hs.push_message(1, HandshakeType::Finished, verify.to_vec(), true);
        self.state = State::Handshaking(HandshakeState::ClientWaitServerFinished);
        self.send_new_flight(now, true);
        Ok(())
    }

    // ---------------------------------------------------------------- server handshake

    fn server_handle_client_hello(
        &mut self,
        now: Instant,
        message_seq: u16,
        body: &[u8],
    ) -> Result<(), Abort> {
        let RoleConfig::Server(config) = self.config.clone() else {
            return Err(Abort::alert(AlertDescription::InternalError));
        };
        let ch = ClientHello::parse(body).map_err(Abort::decode)?;
        // DTLS versions count down: 0xFEFD (1.2) is below 0xFEFF (1.0).
        if ch.version > DTLS_1_2 {
            return Err(Abort::alert(AlertDescription::ProtocolVersion));
        }
        let suite = config
            .suites
            .iter()
            .copied()
            .filter(|s| config.can_serve(*s))
            .find(|s| ch.suites().any(|id| id == s.id()))
            .ok_or(Abort::alert(AlertDescription::HandshakeFailure))?;
        if !ch.compression_methods.contains(&0) {
            return Err(Abort::alert(AlertDescription::HandshakeFailure));
        }
        // RFC 5746 §3.6: an initial handshake carries an empty renegotiation_info or the SCSV.
        if ch.extensions.renegotiation_info.is_some_and(|r| !r.is_empty()) {
            return Err(Abort::alert(AlertDescription::HandshakeFailure));
        }
        let secure_renegotiation = ch.extensions.renegotiation_info.is_some()
            || ch.suites().any(|id| id == SCSV_EMPTY_RENEGOTIATION_INFO);
        let ems = ch.extensions.extended_master_secret;
        if !ems && config.require_extended_master_secret {
            return Err(Abort::alert(AlertDescription::HandshakeFailure));
        }
        // Resumption, only with the extended master secret: a ticket first, then the cached
        // session ID. Anything unknown, forged or expired leads to a full handshake.
        let now_unix = unix_now(config.wall_clock, now);
        let issue_ticket = ems
            && ch.extensions.session_ticket.is_some()
            && self.hs.as_ref().is_some_and(|hs| hs.resume.as_ref().is_some_and(|r| r.ticket_keys.is_some()));
        if ems {
            if let Some(resume) = self.hs.as_mut().and_then(|hs| hs.resume.as_deref_mut()) {
                let by_ticket = match (ch.extensions.session_ticket, resume.ticket_keys.as_ref()) {
                    (Some(t), Some(keys)) if !t.is_empty() => ServerSession::open(keys, t, now_unix),
                    _ => None,
                };
                let candidate = match by_ticket {
                    Some(s) => Some((Resumption::Ticket, s)),
                    None => resume.resumed_session.take().map(|s| (Resumption::SessionId, s)),
                };
                let usable = candidate.filter(|(_, s)| {
                    config.suites.contains(&s.suite)
                        && config.can_serve(s.suite)
                        && ch.suites().any(|id| id == s.suite.id())
                        && s.satisfies_client_auth(&config, now_unix)
                });
                if let Some((kind, session)) = usable {
                    resume.resumption = Some(kind);
                    resume.resumed_session = Some(session);
                }
            }
        }
        let resumed =
            self.hs.as_ref().and_then(|hs| hs.resume.as_ref()).and_then(|r| {
                r.resumption.zip(r.resumed_session.as_ref().map(|s| (s.suite, s.master_secret)))
            });
        if let Some((kind, (suite, master))) = resumed {
            return self.server_resume(
                now,
                message_seq,
                body,
                &ch,
                kind,
                suite,
                master,
                secure_renegotiation,
                issue_ticket,
            );
        }
        // Certificate suites: the group and signature scheme both sides support.
        let ecdhe = match (suite_key_algorithm(suite), config.certified_key.as_ref()) {
            (None, _) => None,
            (Some(_), None) => return Err(Abort::alert(AlertDescription::InternalError)),
            (Some(_), Some(ck)) => {
                let group = match ch.extensions.supported_groups {
                    Some(list) => NamedGroup::ALL
                        .into_iter()
                        .find(|g| u16_list(list).any(|c| c == g.code()))
                        .ok_or(Abort::alert(AlertDescription::HandshakeFailure))?,
                    // RFC 8422 §4: without the extension any curve will do.
                    None => NamedGroup::Secp256r1,
                };
                let scheme = match ch.extensions.signature_algorithms {
                    Some(list) => *ck
                        .key
                        .schemes()
                        .iter()
                        .find(|s| u16_list(list).any(|c| c == s.code()))
                        .ok_or(Abort::alert(AlertDescription::HandshakeFailure))?,
                    // RFC 5246 §7.4.1.4.1 would mean SHA-1, which we do not sign with.
                    None => *ck.key.schemes().last().ok_or(Abort::alert(AlertDescription::InternalError))?,
                };
                Some((ck.clone(), group, scheme))
            }
        };
        self.hello_id = hello_id(&ch.random);
        self.hello_seq = message_seq;
        self.suite = Some(suite);
        let hs = self.hs.as_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
        let request_certificate = ecdhe.is_some() && config.client_auth != ClientAuth::None;
        if ecdhe.is_some() {
            hs.cert = Some(Box::new(CertHandshake {
                transcript_raw: request_certificate.then(Vec::new),
                ..Default::default()
            }));
        }
        hs.client_random = ch.random;
        let mut server_random = [0u8; 32];
        hs.rng.fill_bytes(&mut server_random);
        hs.server_random = server_random;
        hs.extended_master_secret = ems;
        hs.hash_message(HandshakeType::ClientHello, message_seq, body);
        hs.reassembler.reset(message_seq.wrapping_add(1));
        hs.peer_prev_flight_last = Some(message_seq);
        // Our numbering mirrors the client's: ServerHello carries the ClientHello's message_seq.
        hs.next_message_seq = message_seq;
        let mut sh = Vec::with_capacity(64);
        negotiate_mobility(&mut self.path, &config, &ch);
        let path = self.path.as_deref();
        let ext = OutExtensions {
            extended_master_secret: ems,
            renegotiation_info: secure_renegotiation,
            point_formats: ecdhe.is_some() && ch.extensions.ec_point_formats.is_some(),
            session_ticket: issue_ticket.then_some(&[][..]),
            connection_id: path.filter(|p| p.cid_negotiated).map(|p| &p.own_cid[..]),
            rrc: path.is_some_and(|p| p.rrc),
            port_move: path.is_some_and(|p| p.port_move),
            ..Default::default()
        };
        // A new session ID when the cache will keep the session (only sessions with the
        // extended master secret are ever resumed).
        let mut session_id = Vec::new();
        if ems && config.session_cache.max_entries > 0 {
            let mut id = [0u8; 32];
            hs.rng.fill_bytes(&mut id);
            session_id = id.to_vec();
        }
        ServerHello::encode_with(&mut sh, &server_random, &session_id, suite.id(), &ext);
        if issue_ticket || !session_id.is_empty() {
            let resume = hs.resume_mut();
            resume.ticket_expected = issue_ticket;
            resume.session_id = session_id;
        }
        hs.push_message(0, HandshakeType::ServerHello, sh, true);
        if let Some((ck, group, scheme)) = ecdhe {
            let chain: Vec<&[u8]> = ck.chain.iter().map(|c| c.as_ref()).collect();
            let mut body = Vec::with_capacity(3 + chain.iter().map(|c| 3 + c.len()).sum::<usize>());
            encode_certificate(&mut body, &chain);
            hs.push_message(0, HandshakeType::Certificate, body, true);
            let (private, public) = ephemeral(group, &mut hs.rng);
            let mut ske = Vec::with_capacity(80 + ck.key.max_signature_len());
            encode_ecdhe_params(&mut ske, group, &public);
            let mut signed = Vec::with_capacity(64 + ske.len());
            signed.extend_from_slice(&hs.client_random);
            signed.extend_from_slice(&hs.server_random);
            signed.extend_from_slice(&ske);
            let signature = sign(&ck.key, scheme, &signed, &mut hs.rng)?;
            encode_signed(&mut ske, scheme.code(), &signature);
            hs.push_message(0, HandshakeType::ServerKeyExchange, ske, true);
            hs.cert_mut()?.ecdhe = Some((group, private));
            if request_certificate {
                let anchors = config
                    .client_trust_anchors
                    .as_ref()
                    .ok_or(Abort::alert(AlertDescription::InternalError))?;
                let mut cr = Vec::with_capacity(256);
                CertificateRequest::encode(&mut cr, &SCHEMES, anchors.subject_names());
                hs.push_message(0, HandshakeType::CertificateRequest, cr, true);
                self.state = State::Handshaking(HandshakeState::ServerWaitClientCertificate);
            }
        } else if let Some(hint) = &config.psk_identity_hint {
            let mut ske = Vec::with_capacity(2 + hint.len());
            encode_psk_identity(&mut ske, hint);
            hs.push_message(0, HandshakeType::ServerKeyExchange, ske, true);
        }
        hs.push_message(0, HandshakeType::ServerHelloDone, Vec::new(), true);
        self.send_new_flight(now, true);
        Ok(())
    }

    /// The abbreviated handshake (RFC 5246 §7.3): ServerHello echoing the session ID, a
    /// renewed ticket when tickets are in use, then ChangeCipherSpec and Finished at once.
    #[allow(clippy::too_many_arguments)]
    fn server_resume(
        &mut self,
        now: Instant,
        message_seq: u16,
        body: &[u8],
        ch: &ClientHello<'_>,
        kind: Resumption,
        suite: CipherSuite,
        master: [u8; 48],
        secure_renegotiation: bool,
        issue_ticket: bool,
    ) -> Result<(), Abort> {
        self.hello_id = hello_id(&ch.random);
        self.hello_seq = message_seq;
        self.suite = Some(suite);
        let hs = self.hs.as_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
        hs.client_random = ch.random;
        let mut server_random = [0u8; 32];
        hs.rng.fill_bytes(&mut server_random);
        hs.server_random = server_random;
        hs.extended_master_secret = true;
        hs.psk_identity = hs
            .resume
            .as_ref()
            .and_then(|r| r.resumed_session.as_ref())
            .map(|s| s.psk_identity.clone())
            .unwrap_or_default();
        hs.hash_message(HandshakeType::ClientHello, message_seq, body);
        hs.reassembler.reset(message_seq.wrapping_add(1));
        hs.peer_prev_flight_last = Some(message_seq);
        hs.next_message_seq = message_seq;
        let mut sh = Vec::with_capacity(96);
        let config = match &self.config {
            RoleConfig::Server(c) => c.clone(),
            RoleConfig::Client(_) => return Err(Abort::alert(AlertDescription::InternalError)),
        };
        negotiate_mobility(&mut self.path, &config, ch);
        let path = self.path.as_deref();
        let ext = OutExtensions {
            extended_master_secret: true,
            renegotiation_info: secure_renegotiation,
            session_ticket: issue_ticket.then_some(&[][..]),
            connection_id: path.filter(|p| p.cid_negotiated).map(|p| &p.own_cid[..]),
            rrc: path.is_some_and(|p| p.rrc),
            port_move: path.is_some_and(|p| p.port_move),
            ..Default::default()
        };
        ServerHello::encode_with(&mut sh, &server_random, ch.session_id, suite.id(), &ext);
        hs.push_message(0, HandshakeType::ServerHello, sh, true);
        if issue_ticket {
            let mut nonce = [0u8; 12];
            hs.rng.fill_bytes(&mut nonce);
            let resume = hs.resume_mut();
            let ticket = match (resume.resumed_session.as_ref(), resume.ticket_keys.as_ref()) {
                (Some(session), Some(keys)) => session.seal(&keys.current, nonce).map(|t| (t, keys.lifetime)),
                _ => None,
            };
            let (ticket, lifetime) = ticket.unwrap_or_default();
            let mut nst = Vec::with_capacity(8 + ticket.len());
            encode_new_session_ticket(&mut nst, lifetime_hint(lifetime), &ticket);
            hs.push_message(0, HandshakeType::NewSessionTicket, nst, true);
        }
        let _ = kind;
        hs.master = Some(MasterSecret(master));
        let keys = keys_from_master(hs).ok_or(Abort::alert(AlertDescription::InternalError))?;
        self.protection = Some(Protection {
            cipher: suite.params().cipher,
            read: keys.client_write.clone(),
            write: keys.server_write.clone(),
        });
        let verify = match &hs.master {
            Some(m) => m.verify_data(false, hs.transcript_hash().as_ref()),
            None => return Err(Abort::alert(AlertDescription::InternalError)),
        };
        hs.flight.push(FlightItem::ChangeCipherSpec);
        hs.push_message(1, HandshakeType::Finished, verify.to_vec(), true);
        self.state = State::Handshaking(HandshakeState::ServerWaitClientFinished);
        self.send_new_flight(now, true);
        Ok(())
    }

    /// Server: the session the endpoint should cache, once a full handshake completed.
    pub(crate) fn take_new_cache_entry(&mut self) -> Option<([u8; 32], ServerSession)> {
        if !self.is_established() {
            return None;
        }
        self.hs.as_mut()?.resume.as_mut()?.new_cache_entry.take()
    }

    fn server_handle_message(
        &mut self,
        now: Instant,
        st: HandshakeState,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
    ) -> Result<(), Abort> {
        let RoleConfig::Server(config) = self.config.clone() else {
            return Err(Abort::alert(AlertDescription::InternalError));
        };
        let suite = self.suite.ok_or(Abort::alert(AlertDescription::InternalError))?;
        let hs = self.hs.as_mut().ok_or(Abort::alert(AlertDescription::InternalError))?;
        match (st, msg_type) {
            (HandshakeState::ServerWaitClientCertificate, HandshakeType::Certificate) => {
                let certs = parse_certificate(body).map_err(Abort::decode)?;
                if certs.is_empty() {
                    if config.client_auth == ClientAuth::Require {
                        return Err(Abort::peer(PkiError::NoPeerCertificate));
                    }
                } else {
                    let chain: Vec<CertDer> = certs.iter().map(|c| CertDer::from(c.to_vec())).collect();
                    let anchors = config
                        .client_trust_anchors
                        .as_ref()
                        .ok_or(Abort::alert(AlertDescription::InternalError))?;
                    let verified = fastshake_pki::verify_client_chain(
                        &chain,
                        anchors,
                        config.wall_clock.map_or(0, |w| w.unix_at(now)),
                    )
                    .map_err(Abort::peer)?;
                    let cert = hs.cert_mut()?;
                    cert.peer_key = Some(verified.key);
                    cert.client_certificate = Some(ClientCertificate {
                        anchor: verified.anchor,
                        not_after: verified.not_after_unix,
                    });
                    cert.peer_certificates = chain.len();
                    cert.peer_leaf = chain.into_iter().next();
                }
                hs.hash_message(msg_type, message_seq, body);
                self.state = State::Handshaking(HandshakeState::ServerWaitClientKeyExchange);
                Ok(())
            }
            (HandshakeState::ServerWaitClientCertificate, HandshakeType::ClientKeyExchange) => {
                // No Certificate at all (RFC 5246 wants an empty one): the same as an empty one.
                if config.client_auth == ClientAuth::Require {
                    return Err(Abort::peer(PkiError::NoPeerCertificate));
                }
                self.state = State::Handshaking(HandshakeState::ServerWaitClientKeyExchange);
                self.server_handle_message(
                    now,
                    HandshakeState::ServerWaitClientKeyExchange,
                    msg_type,
                    message_seq,
                    body,
                )
            }
            (HandshakeState::ServerWaitClientKeyExchange, HandshakeType::ClientKeyExchange)
                if !suite.is_psk() =>
            {
                let public = parse_ecdhe_client_key_exchange(body).map_err(Abort::decode)?;
                let cert = hs.cert_mut()?;
                let (group, private) =
                    cert.ecdhe.take().ok_or(Abort::alert(AlertDescription::InternalError))?;
                let premaster = agree(private, group, public)?;
                let has_peer_key = cert.peer_key.is_some();
                hs.hash_message(msg_type, message_seq, body);
                let keys = derive_keys(hs, &premaster);
                self.protection = Some(Protection {
                    cipher: suite.params().cipher,
                    read: keys.client_write.clone(),
                    write: keys.server_write.clone(),
                });
                self.state = State::Handshaking(if has_peer_key {
                    HandshakeState::ServerWaitCertificateVerify
                } else {
                    HandshakeState::ServerWaitClientFinished
                });
                Ok(())
            }
            (HandshakeState::ServerWaitCertificateVerify, HandshakeType::CertificateVerify) => {
                let (code, signature) = parse_certificate_verify(body).map_err(Abort::decode)?;
                let scheme = SignatureScheme::from_code(code)
                    .filter(|s| SCHEMES.contains(&s.code()))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let cert = hs.cert_mut()?;
                let raw = cert.transcript_raw.take().ok_or(Abort::alert(AlertDescription::InternalError))?;
                let key = cert.peer_key.as_ref().ok_or(Abort::alert(AlertDescription::InternalError))?;
                fastshake_pki::verify_signature(key, scheme, &raw, signature).map_err(Abort::peer)?;
                hs.hash_message(msg_type, message_seq, body);
                self.state = State::Handshaking(HandshakeState::ServerWaitClientFinished);
                Ok(())
            }
            (HandshakeState::ServerWaitClientKeyExchange, HandshakeType::ClientKeyExchange) => {
                let identity = parse_psk_identity(body).map_err(Abort::decode)?;
                let psk =
                    config.find_psk(identity).ok_or(Abort::alert(AlertDescription::UnknownPskIdentity))?;
                hs.psk_identity = identity.to_vec();
                hs.hash_message(msg_type, message_seq, body);
                let premaster = psk_premaster(&psk.key);
                let keys = derive_keys(hs, &premaster);
                self.protection = Some(Protection {
                    cipher: suite.params().cipher,
                    read: keys.client_write.clone(),
                    write: keys.server_write.clone(),
                });
                self.state = State::Handshaking(HandshakeState::ServerWaitClientFinished);
                Ok(())
            }
            (HandshakeState::ServerWaitClientFinished, HandshakeType::Finished) => {
                hs.check_peer_finished(body, true)?;
                if hs.resume.as_ref().is_some_and(|r| r.resumption.is_some()) {
                    // Abbreviated handshake: the client's Finished is the last message.
                    self.complete_handshake(now);
                    return Ok(());
                }
                hs.hash_message(msg_type, message_seq, body);
                hs.peer_prev_flight_last = Some(message_seq);
                hs.flight.clear();
                let now_unix = unix_now(config.wall_clock, now);
                if let Some(master) = hs.master.as_ref().map(|m| m.0) {
                    let session = ServerSession {
                        suite,
                        master_secret: master,
                        created: now_unix,
                        psk_identity: hs.psk_identity.clone(),
                        client_cert: hs.cert.as_ref().and_then(|c| c.client_certificate),
                    };
                    let mut nonce = [0u8; 12];
                    hs.rng.fill_bytes(&mut nonce);
                    let resume = hs.resume_mut();
                    if let Ok(id) = <[u8; 32]>::try_from(resume.session_id.as_slice()) {
                        resume.new_cache_entry = Some((id, session.clone()));
                    }
                    if resume.ticket_expected {
                        let ticket = resume
                            .ticket_keys
                            .as_ref()
                            .and_then(|keys| Some((session.seal(&keys.current, nonce)?, keys.lifetime)));
                        let mut nst = Vec::with_capacity(8 + crate::session::TICKET_LEN);
                        let (ticket, lifetime) = ticket.unwrap_or_default();
                        encode_new_session_ticket(&mut nst, lifetime_hint(lifetime), &ticket);
                        hs.push_message(0, HandshakeType::NewSessionTicket, nst, true);
                    }
                }
                let server_verify = match &hs.master {
                    Some(m) => m.verify_data(false, hs.transcript_hash().as_ref()),
                    None => return Err(Abort::alert(AlertDescription::InternalError)),
                };
                hs.flight.push(FlightItem::ChangeCipherSpec);
                hs.push_message(1, HandshakeType::Finished, server_verify.to_vec(), false);
                // The last flight is resent only when the client's retransmission shows it was lost.
                self.send_new_flight(now, false);
                self.complete_handshake(now);
                Ok(())
            }
            _ => Err(Abort::alert(AlertDescription::UnexpectedMessage)),
        }
    }

    // ---------------------------------------------------------------- common handshake

    fn complete_handshake(&mut self, now: Instant) {
        let retain = self.handshake_timeout();
        let Some(hs) = self.hs.as_mut() else { return };
        let Some(suite) = self.suite else { return };
        hs.timer.stop();
        let early_data = std::mem::take(&mut hs.early_data);
        let (peer_certificates, peer_leaf) =
            hs.cert.take().map_or((0, None), |c| (c.peer_certificates, c.peer_leaf));
        let resumption = hs.resume.as_ref().and_then(|r| r.resumption);
        let session = match &self.config {
            RoleConfig::Client(config) => client_session(hs, config, suite, now),
            RoleConfig::Server(_) => None,
        };
        let summary = HandshakeSummary {
            suite,
            resumed: resumption.is_some(),
            resumption,
            session,
            peer_certificates,
            peer_leaf,
            duration: now.saturating_duration_since(hs.started),
            flights_sent: hs.flights_sent,
            retransmissions: hs.retransmissions,
            peer_retransmissions: hs.peer_retransmissions,
            extended_master_secret: hs.extended_master_secret,
            psk_identity: hs.psk_identity.clone(),
            datagrams_sent: self.stats.datagrams_sent + queued_outgoing(&self.queued).count() as u64,
            datagrams_received: self.stats.datagrams_received,
            bytes_sent: self.stats.bytes_sent
                + queued_outgoing(&self.queued).map(|d| d.len() as u64).sum::<u64>(),
            bytes_received: self.stats.bytes_received,
        };
        self.state = State::Established;
        // Whoever sent the last flight keeps it until the peer shows it arrived: the server in
        // a full handshake, the client in an abbreviated one.
        match (&self.config, resumption.is_some()) {
            (RoleConfig::Client(_), false) | (RoleConfig::Server(_), true) => self.hs = None,
            _ => {
                hs.retain_until = Some(now + retain);
                hs.master = None;
                hs.reassembler.reset(hs.reassembler.next_seq());
            }
        }
        self.push_event(Event::Connected(summary));
        for data in early_data {
            self.stats.app_records_received += 1;
            self.push_event(Event::ApplicationData(data));
        }
    }

    /// Sends the flight in `hs.flight` for the first time.
    fn send_new_flight(&mut self, now: Instant, timed: bool) {
        if let Some(hs) = self.hs.as_mut() {
            hs.flights_sent += 1;
            hs.timer.on_new_flight(now, timed);
            self.stats.flights_sent += 1;
        }
        self.transmit_flight();
    }

    fn retransmit_flight(&mut self, now: Instant) {
        let Some(hs) = self.hs.as_mut() else { return };
        if hs.flight.is_empty() {
            return;
        }
        hs.retransmissions += 1;
        hs.timer.on_retransmit(now);
        self.stats.flights_resent += 1;
        self.transmit_flight();
    }

    /// Packs the current flight into datagrams with fresh record sequence numbers.
    fn transmit_flight(&mut self) {
        let mtu = self.mtu();
        let Connection { hs, protection, write_seq, write_epoch, queued, path, .. } = self;
        let cid = peer_cid(path);
        let Some(hs) = hs.as_mut() else { return };
        let mut b = DatagramBuilder::new(mtu);
        let epoch0 = &mut hs.epoch0_write_seq;
        for item in &hs.flight {
            match item {
                FlightItem::Handshake { epoch: 0, msg_type, message_seq, body } => {
                    b.push_handshake(0, *msg_type, *message_seq, body, None, &mut || {
                        let s = *epoch0;
                        *epoch0 += 1;
                        s
                    });
                }
                FlightItem::Handshake { epoch, msg_type, message_seq, body } => {
                    let Some(p) = protection.as_ref() else { continue };
                    let protect = Protect { cipher: p.cipher, keys: &p.write, cid };
                    b.push_handshake(*epoch, *msg_type, *message_seq, body, Some(protect), &mut || {
                        let s = *write_seq;
                        *write_seq += 1;
                        s
                    });
                }
                FlightItem::ChangeCipherSpec => {
                    let s = *epoch0;
                    *epoch0 += 1;
                    b.push(ContentType::ChangeCipherSpec, 0, s, None, &[&[1]]);
                    *write_epoch = 1;
                }
            }
        }
        queued.get_or_insert_with(Box::default).outgoing.extend(b.finish());
    }

    /// The peer resent the flight our current flight answers: ours was lost, resend it, but at
    /// most once per half timer period so duplicated datagrams do not multiply flights.
    fn on_peer_retransmission(&mut self, now: Instant) {
        let Some(hs) = self.hs.as_ref() else { return };
        if now < hs.timer.last_sent + hs.timer.current() / 2 {
            return;
        }
        self.retransmit_flight(now);
    }

    fn fail(&mut self, abort: Abort) {
        if matches!(self.state, State::Failed | State::Closed)
            && self.queued.as_ref().is_some_and(|q| !q.events.is_empty())
        {
            return;
        }
        if let Some(desc) = abort.alert {
            self.send_alert(AlertLevel::Fatal, desc);
        }
        self.state = State::Failed;
        self.hs = None;
        self.protection = None;
        self.push_event(Event::Failed(abort.error));
    }

    fn send_alert(&mut self, level: AlertLevel, desc: AlertDescription) {
        let body = [level.to_u8(), desc.code()];
        if self.write_epoch == 0 {
            let seq = match self.hs.as_mut() {
                Some(hs) => {
                    hs.epoch0_write_seq += 1;
                    hs.epoch0_write_seq - 1
                }
                None => 0,
            };
            let mut out = vec![0u8; HEADER_LEN + 2];
            write_record(&mut out, ContentType::Alert, 0, seq, None, &[&body]);
            self.push_datagram(out);
        } else if let Some(p) = &self.protection {
            if self.write_seq > MAX_SEQ {
                return;
            }
            let protect = Protect { cipher: p.cipher, keys: &p.write, cid: peer_cid(&self.path) };
            let mut out = vec![0u8; record_len(Some(protect), 2)];
            write_record(&mut out, ContentType::Alert, 1, self.write_seq, Some(protect), &[&body]);
            self.write_seq += 1;
            self.push_datagram(out);
        }
    }

    // ---------------------------------------------------------------- input

    /// A datagram from `remote` arrived; it may be decrypted in place.
    pub fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        self.handle_input(now, None, remote, datagram, None);
    }

    /// Like `handle_datagram`, but application data is decrypted in place and handed to
    /// `on_data` instead of queued as events. No heap allocation for application records.
    pub fn open_in_place(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &mut [u8],
        on_data: &mut dyn FnMut(&[u8]),
    ) {
        self.handle_input(now, None, remote, datagram, Some(on_data));
    }

    /// Endpoint: a datagram that arrived at our socket `local`.
    pub(crate) fn handle_datagram_at(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
        on_data: DataSink<'_>,
    ) {
        self.handle_input(now, Some(local), remote, datagram, on_data);
    }

    fn handle_input(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        datagram: &mut [u8],
        mut on_data: DataSink<'_>,
    ) {
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        let own_cid_len = self.path.as_deref().map_or(0, |p| p.own_cid.len() as u8);
        let waited_server_hello = self.state == State::Handshaking(HandshakeState::ClientWaitServerHello);
        let mut seen = Authenticated::default();
        let mut pos = 0;
        // The rest of a record the peer split across two datagrams (see `SplitRecord`).
        let split = self.hs.as_mut().and_then(|hs| hs.split_record.take());
        if let Some(split) = split {
            if let Some(n) = split.continuation_len(datagram, own_cid_len) {
                let mut record = split.bytes;
                record.extend_from_slice(&datagram[..n]);
                pos = n;
                if let Ok(header) = RecordHeader::parse(&mut crate::codec::Reader::new(&record), own_cid_len)
                {
                    self.handle_record_bytes(now, remote, header, &mut record, &mut on_data, &mut seen);
                }
            }
        }
        while pos < datagram.len() {
            if matches!(self.state, State::Failed | State::Closed) {
                return;
            }
            let mut r = crate::codec::Reader::new(&datagram[pos..]);
            let header = match RecordHeader::parse(&mut r, own_cid_len) {
                Ok(h) if r.remaining() >= h.length as usize => h,
                Ok(h) => {
                    self.keep_split_record(h, &datagram[pos..]);
                    return;
                }
                Err(_) => {
                    self.stats.records_dropped += 1;
                    return;
                }
            };
            let end = pos + header.len() + header.length as usize;
            self.handle_record_bytes(now, remote, header, &mut datagram[pos..end], &mut on_data, &mut seen);
            pos = end;
        }
        if self.path.is_some() {
            self.after_datagram(now, local, remote, datagram.len(), seen, waited_server_hello);
        }
    }

    /// One whole record (header and body) of a datagram.
    fn handle_record_bytes(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        header: RecordHeader,
        record: &mut [u8],
        on_data: &mut DataSink<'_>,
        seen: &mut Authenticated,
    ) {
        let start = header.len();
        let cid_matches = header.cid_len == 0
            || self.path.as_deref().is_some_and(|p| record[11..start - 2] == p.own_cid[..]);
        if !cid_matches {
            self.stats.records_dropped += 1;
            return;
        }
        if let Some(newest) = self.handle_record(now, remote, header, &mut record[start..], on_data) {
            seen.any = true;
            seen.newest |= newest;
        }
        self.replay_early_records(now, on_data);
    }

    /// A handshake record cut off at the end of a datagram. RFC 6347 §4.1.1 wants every record
    /// inside one datagram, but a sender that writes a flight through a fixed-size buffer (OpenSSL
    /// 3.0 flushes its 4 KiB write buffer mid-record when the path MTU is large, as on loopback)
    /// sends the rest at the start of its next datagram. Keeping the start until then completes
    /// the flight on first arrival instead of after both sides' retransmission timers.
    fn keep_split_record(&mut self, header: RecordHeader, rest: &[u8]) {
        self.stats.records_dropped += 1;
        let handshaking = matches!(self.state, State::Handshaking(_));
        let Some(hs) = self.hs.as_mut().filter(|_| handshaking) else { return };
        if matches!(header.content_type, ContentType::Handshake | ContentType::Tls12Cid)
            && rest.len() <= MAX_SPLIT_RECORD_KEPT
        {
            hs.split_record =
                Some(SplitRecord { bytes: rest.to_vec(), len: header.len() + header.length as usize });
        }
    }

    /// Handles buffered protected records once the keys for them exist.
    fn replay_early_records(&mut self, now: Instant, on_data: &mut DataSink<'_>) {
        if self.protection.is_none() {
            return;
        }
        let Some(hs) = self.hs.as_mut() else { return };
        if hs.early_records.is_empty() {
            return;
        }
        let remote = self.remote;
        for (header, mut body) in std::mem::take(&mut hs.early_records) {
            self.handle_record(now, remote, header, &mut body, on_data);
        }
    }

    /// Handles one record; for a protected record that authenticated, returns whether it is
    /// newer than every record received before (RFC 9146 §6).
    fn handle_record(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        header: RecordHeader,
        body: &mut [u8],
        on_data: &mut DataSink<'_>,
    ) -> Option<bool> {
        let mut authenticated = None;
        let mut content_type = header.content_type;
        let plaintext: &[u8] = match header.epoch {
            0 => {
                if matches!(
                    header.content_type,
                    ContentType::ApplicationData | ContentType::ReturnRoutabilityCheck
                ) {
                    self.stats.records_dropped += 1;
                    return None;
                }
                body
            }
            1 => {
                let Some(p) = &self.protection else {
                    // Keys not derived yet: a Finished reordered ahead of its ClientKeyExchange.
                    // Keep a few such records (RFC 6347 §4.1 lets us) instead of waiting a timeout.
                    match self.hs.as_mut() {
                        Some(hs)
                            if hs.early_records.len() < MAX_EARLY_RECORDS
                                && hs.early_records.iter().map(|(_, b)| b.len()).sum::<usize>()
                                    + body.len()
                                    <= MAX_EARLY_RECORD_BYTES =>
                        {
                            hs.early_records.push((header, body.to_vec()));
                        }
                        _ => self.stats.records_dropped += 1,
                    }
                    return None;
                };
                if !self.read_window.is_fresh(header.seq) || body.len() < RecordCipher::EXPLICIT_NONCE_LEN {
                    self.stats.records_dropped += 1;
                    return None;
                }
                let cid = match (header.cid_len, self.path.as_deref()) {
                    (0, _) | (_, None) => &[][..],
                    (_, Some(path)) => &path.own_cid[..],
                };
                let (explicit, sealed) = body.split_at_mut(RecordCipher::EXPLICIT_NONCE_LEN);
                let mut explicit_nonce = [0u8; 8];
                explicit_nonce.copy_from_slice(explicit);
                match open_in_place(
                    p.cipher,
                    &p.read,
                    explicit_nonce,
                    header.epoch_seq(),
                    header.content_type as u8,
                    header.version,
                    cid,
                    sealed,
                ) {
                    Ok(n) => {
                        let newest = self.read_window.highest().is_none_or(|h| header.seq > h);
                        self.read_window.mark(header.seq);
                        authenticated = Some(newest);
                        let plain =
                            &body[RecordCipher::EXPLICIT_NONCE_LEN..RecordCipher::EXPLICIT_NONCE_LEN + n];
                        if header.content_type == ContentType::Tls12Cid {
                            // DTLSInnerPlaintext: content, real type, zero padding (RFC 9146 §4).
                            let Some(type_at) = plain.iter().rposition(|&b| b != 0) else {
                                self.stats.records_dropped += 1;
                                return authenticated;
                            };
                            match ContentType::from_u8(plain[type_at]) {
                                Some(inner) => content_type = inner,
                                None => {
                                    self.stats.records_dropped += 1;
                                    return authenticated;
                                }
                            }
                            &plain[..type_at]
                        } else {
                            plain
                        }
                    }
                    Err(_) => {
                        self.stats.records_dropped += 1;
                        if matches!(header.content_type, ContentType::Handshake | ContentType::Tls12Cid) {
                            self.on_unauthenticated_handshake_record(now);
                        }
                        return None;
                    }
                }
            }
            _ => {
                self.stats.records_dropped += 1;
                return None;
            }
        };
        match content_type {
            ContentType::Handshake => {
                // Handshake bodies are copied out by the reassembler, so the borrow ends here.
                let copy_needed = plaintext.to_vec();
                self.handle_handshake_record(now, header.epoch, &copy_needed);
            }
            ContentType::ChangeCipherSpec => {
                // Epoch-1 records are read as soon as the keys exist, so ChangeCipherSpec
                // carries no information here beyond being well formed.
                if plaintext != [1] {
                    self.stats.records_dropped += 1;
                } else {
                    self.note_peer_resent();
                }
            }
            ContentType::Alert => {
                let alert = (plaintext.len() == 2)
                    .then(|| (AlertLevel::from_u8(plaintext[0]), AlertDescription::from_code(plaintext[1])));
                match alert {
                    Some((Some(level), desc)) => self.handle_alert(header.epoch, level, desc),
                    _ => self.stats.records_dropped += 1,
                }
            }
            ContentType::ApplicationData => {
                if self.state != State::Established {
                    match self.hs.as_mut() {
                        Some(hs) if authenticated.is_some() && hs.early_data.len() < MAX_EARLY_RECORDS => {
                            hs.early_data.push(plaintext.to_vec());
                        }
                        _ => self.stats.records_dropped += 1,
                    }
                    return authenticated;
                }
                // The client's first protected record shows it has our last flight.
                if let Some(hs) = &self.hs {
                    if hs.retain_until.is_some() {
                        self.hs = None;
                    }
                }
                self.stats.app_records_received += 1;
                match on_data {
                    Some(f) => f(plaintext),
                    None => self.push_event(Event::ApplicationData(plaintext.to_vec())),
                }
            }
            ContentType::ReturnRoutabilityCheck => {
                let message = plaintext.to_vec();
                self.handle_rrc(now, remote, &message);
            }
            ContentType::Tls12Cid => self.stats.records_dropped += 1,
        }
        authenticated
    }

    /// A protected handshake record failed authentication. Records that fail are dropped
    /// silently (RFC 6347 §4.1.2.7), so one forged datagram cannot end a handshake. But while no
    /// record of the peer has authenticated, the peer's own Finished failing means the keys
    /// differ (a wrong PSK): once the peer has resent its flight in a later datagram and a
    /// protected handshake record fails again, at least half a retransmission period after the
    /// first, the handshake fails with decrypt_error (RFC 4279 §2) rather than at its timeout.
    fn on_unauthenticated_handshake_record(&mut self, now: Instant) {
        let (initial, _) = self.retransmit_bounds();
        let datagram = self.stats.datagrams_received;
        if !matches!(self.state, State::Handshaking(_)) || self.read_window.highest().is_some() {
            return;
        }
        let Some(hs) = self.hs.as_mut() else { return };
        match hs.auth_failure {
            None => hs.auth_failure = Some(AuthFailure { at: now, datagram, peer_resent: false }),
            Some(first)
                if first.peer_resent && datagram != first.datagram && now >= first.at + initial / 2 =>
            {
                self.fail(Abort::alert(AlertDescription::DecryptError));
            }
            Some(_) => {}
        }
    }

    /// The peer sent again something of its flight (an old handshake message or a
    /// ChangeCipherSpec): evidence that it resent the flight, for `on_unauthenticated_handshake_record`.
    fn note_peer_resent(&mut self) {
        let datagram = self.stats.datagrams_received;
        if let Some(f) = self.hs.as_mut().and_then(|hs| hs.auth_failure.as_mut()) {
            f.peer_resent |= datagram != f.datagram;
        }
    }

    fn handle_alert(&mut self, epoch: u16, level: AlertLevel, desc: AlertDescription) {
        if self.state == State::Established && epoch == 0 {
            // Unauthenticated: cannot end an established session.
            self.stats.records_dropped += 1;
            return;
        }
        if desc == AlertDescription::CloseNotify {
            // RFC 5246 §7.2.1: answer with a close_notify of our own.
            if self.state == State::Established {
                self.send_alert(AlertLevel::Warning, AlertDescription::CloseNotify);
            }
            self.state = State::Closed;
            self.hs = None;
            self.push_event(Event::Closed);
        } else if level == AlertLevel::Fatal {
            self.state = State::Failed;
            self.hs = None;
            self.protection = None;
            self.push_event(Event::Failed(Error::AlertReceived(desc)));
        }
        // Other warnings (no_renegotiation, ...) change nothing.
    }

    fn handle_handshake_record(&mut self, now: Instant, epoch: u16, body: &[u8]) {
        for fragment in parse_fragments(body) {
            let Ok((header, data)) = fragment else {
                self.stats.records_dropped += 1;
                return;
            };
            if matches!(self.state, State::Failed | State::Closed) {
                return;
            }
            let fragment = Fragment { header, data };
            if let Err(abort) = self.handle_fragment(now, epoch, &fragment) {
                self.fail(abort);
                return;
            }
        }
    }

    fn handle_fragment(&mut self, now: Instant, epoch: u16, fragment: &Fragment<'_>) -> Result<(), Abort> {
        let h = fragment.header;
        let whole = h.fragment_offset == 0 && h.fragment_length == h.length;
        if self.state == State::Established {
            let renegotiation = match self.config {
                RoleConfig::Client(_) => h.msg_type == HandshakeType::HelloRequest,
                RoleConfig::Server(_) => h.msg_type == HandshakeType::ClientHello,
            };
            if renegotiation && epoch == 1 {
                // RFC 5746 §4.2/§4.4: refuse renegotiation with a warning; the session goes on.
                self.send_alert(AlertLevel::Warning, AlertDescription::NoRenegotiation);
                return Ok(());
            }
        }
        let st = match self.state {
            State::Handshaking(st) => Some(st),
            _ => None,
        };
        if st == Some(HandshakeState::ClientWaitServerHello)
            && h.msg_type == HandshakeType::HelloVerifyRequest
        {
            // Not part of the transcript, never fragmented in practice; handled statelessly.
            if epoch == 0 && whole {
                return self.client_handle_hello_verify(now, h.message_seq, fragment.data);
            }
            return Ok(());
        }
        // Finished must be protected; every message before it must not be.
        if (h.msg_type == HandshakeType::Finished) != (epoch == 1) {
            self.stats.records_dropped += 1;
            return Ok(());
        }
        let Some(hs) = self.hs.as_mut() else { return Ok(()) };
        match hs.reassembler.insert(fragment) {
            Insert::Old => {
                let previous_flight = Some(h.message_seq) == hs.peer_prev_flight_last;
                let datagram = self.stats.datagrams_received;
                if hs.peer_retransmission_seen_at != datagram {
                    hs.peer_retransmission_seen_at = datagram;
                    hs.peer_retransmissions += 1;
                }
                self.note_peer_resent();
                if previous_flight {
                    self.on_peer_retransmission(now);
                }
                Ok(())
            }
            Insert::Dropped => {
                self.stats.records_dropped += 1;
                Ok(())
            }
            Insert::Accepted => loop {
                let Some(hs) = self.hs.as_mut() else { return Ok(()) };
                let Some((msg_type, seq, body)) = hs.reassembler.pop() else { return Ok(()) };
                let State::Handshaking(st) = self.state else { return Ok(()) };
                match self.config {
                    RoleConfig::Client(_) => self.client_handle_message(now, st, msg_type, seq, &body)?,
                    RoleConfig::Server(_) => self.server_handle_message(now, st, msg_type, seq, &body)?,
                }
            },
        }
    }

    // ---------------------------------------------------------------- output and timers

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        if self.path.is_some() {
            return self.poll_transmit_mobile();
        }
        let payload = self.queued.as_mut()?.outgoing.pop_front()?;
        self.free_empty_queues();
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += payload.len() as u64;
        Some(Transmit { src: None, dst: self.remote, payload })
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let path_deadline = self.path.as_deref().and_then(PathState::deadline);
        let Some(hs) = self.hs.as_ref() else { return path_deadline };
        let mut t = [hs.timer.deadline(), path_deadline].into_iter().flatten().min();
        if matches!(self.state, State::Handshaking(_)) {
            let limit = hs.started + self.handshake_timeout();
            t = Some(t.map_or(limit, |d| d.min(limit)));
        }
        if let Some(r) = hs.retain_until {
            t = Some(t.map_or(r, |d| d.min(r)));
        }
        t
    }

    /// The deadline from `poll_timeout` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.path.as_deref().and_then(PathState::deadline).is_some_and(|d| now >= d) {
            self.handle_path_timeout(now);
        }
        let Some(hs) = self.hs.as_ref() else { return };
        if matches!(self.state, State::Handshaking(_)) && now >= hs.started + self.handshake_timeout() {
            let retransmissions = hs.retransmissions;
            self.fail(Abort { alert: None, error: Error::HandshakeTimeout { retransmissions } });
            return;
        }
        if hs.retain_until.is_some_and(|r| now >= r) {
            self.hs = None;
            return;
        }
        if hs.timer.deadline().is_some_and(|d| now >= d) {
            self.retransmit_flight(now);
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        let e = self.queued.as_mut()?.events.pop_front();
        self.free_empty_queues();
        e
    }

    fn push_event(&mut self, event: Event) {
        self.queued.get_or_insert_with(Box::default).events.push_back(event);
    }

    fn push_datagram(&mut self, datagram: Vec<u8>) {
        self.queued.get_or_insert_with(Box::default).outgoing.push_back(datagram);
    }

    fn free_empty_queues(&mut self) {
        if self.queued.as_ref().is_some_and(|q| q.events.is_empty() && q.outgoing.is_empty()) {
            self.queued = None;
        }
    }

    // ---------------------------------------------------------------- application data

    fn max_payload(&self) -> usize {
        let overhead = self.protection.as_ref().map_or(HEADER_LEN, |p| {
            record_len(Some(Protect { cipher: p.cipher, keys: &p.write, cid: peer_cid(&self.path) }), 0)
        });
        self.mtu().saturating_sub(overhead).max(1)
    }

    fn check_can_send(&self) -> Result<(), Error> {
        match self.state {
            State::Established => Ok(()),
            State::Handshaking(_) => Err(Error::NotEstablished),
            State::Closed | State::Failed => Err(Error::Closed),
        }
    }

    /// Queues `data` as application data, in several records when it exceeds one datagram.
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        self.check_can_send()?;
        let max = self.max_payload();
        let mut chunks: Vec<&[u8]> = data.chunks(max).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let out = self.seal_record(ContentType::ApplicationData, &[chunk])?;
            self.stats.app_records_sent += 1;
            self.push_datagram(out);
        }
        Ok(())
    }

    /// One protected epoch-1 record of `content_type` holding `parts`, with the peer's CID
    /// when one was negotiated.
    fn seal_record(&mut self, content_type: ContentType, parts: &[&[u8]]) -> Result<Vec<u8>, Error> {
        let plain_len = parts.iter().map(|p| p.len()).sum();
        let Some(p) = &self.protection else { return Err(Error::NotEstablished) };
        let len = record_len(
            Some(Protect { cipher: p.cipher, keys: &p.write, cid: peer_cid(&self.path) }),
            plain_len,
        );
        let mut out = vec![0u8; len];
        let seq = self.next_write_seq()?;
        let Some(p) = &self.protection else { return Err(Error::NotEstablished) };
        let protect = Protect { cipher: p.cipher, keys: &p.write, cid: peer_cid(&self.path) };
        write_record(&mut out, content_type, 1, seq, Some(protect), parts);
        Ok(out)
    }

    fn next_write_seq(&mut self) -> Result<u64, Error> {
        if self.write_seq > MAX_SEQ {
            // Renegotiation is refused, so an exhausted epoch ends the session.
            return Err(Error::Closed);
        }
        self.write_seq += 1;
        Ok(self.write_seq - 1)
    }

    /// Writes one datagram holding one application record with `data` into `out`; returns its
    /// length. No heap allocation.
    pub fn seal_into(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        self.check_can_send()?;
        let Some(p) = &self.protection else { return Err(Error::NotEstablished) };
        let len = record_len(
            Some(Protect { cipher: p.cipher, keys: &p.write, cid: peer_cid(&self.path) }),
            data.len(),
        );
        if len > self.mtu() {
            return Err(Error::TooLarge { len: data.len(), mtu: self.mtu() });
        }
        if out.len() < len {
            return Err(Error::BufferTooSmall { needed: len });
        }
        let seq = self.next_write_seq()?;
        let Some(p) = &self.protection else { return Err(Error::NotEstablished) };
        let protect = Protect { cipher: p.cipher, keys: &p.write, cid: peer_cid(&self.path) };
        write_record(&mut out[..len], ContentType::ApplicationData, 1, seq, Some(protect), &[data]);
        self.stats.app_records_sent += 1;
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
        Ok(len)
    }

    /// Sends close_notify and closes the session.
    pub fn close(&mut self) {
        match self.state {
            State::Closed | State::Failed => {}
            _ => {
                self.send_alert(AlertLevel::Warning, AlertDescription::CloseNotify);
                self.state = State::Closed;
                self.hs = None;
            }
        }
    }

    // ---------------------------------------------------------------- accessors

    /// Whether the handshake completed and the session is open.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Whether the session ended (closed or failed).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed | State::Failed)
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The agreed suite, once known.
    pub fn suite(&self) -> Option<CipherSuite> {
        self.suite
    }

    /// Client or server.
    pub fn role(&self) -> Role {
        match self.config {
            RoleConfig::Client(_) => Role::Client,
            RoleConfig::Server(_) => Role::Server,
        }
    }

    /// Whether handshake state is still held (during the handshake, and on a server until the
    /// client shows it received the last flight).
    pub fn holds_handshake_state(&self) -> bool {
        self.hs.is_some()
    }

    /// Server: whether a ClientHello with this random and message_seq is a copy of the one this
    /// session started from (or of an earlier one of the same client, answered by a
    /// HelloVerifyRequest). A higher message_seq is the client starting over.
    pub(crate) fn started_from(&self, random: &[u8; 32], message_seq: u16) -> bool {
        self.hello_id == hello_id(random) && message_seq <= self.hello_seq
    }

    /// Counters of session mobility (all zero without it).
    pub fn mobility_stats(&self) -> MobilityStats {
        self.path.as_ref().map(|p| p.stats).unwrap_or_default()
    }

    /// Server: the session's own socket, once `Endpoint::set_local` (or a confirmed
    /// `Endpoint::move_to`) gave it one.
    pub fn local(&self) -> Option<SocketAddr> {
        self.path.as_ref().and_then(|p| p.local)
    }

    /// The Connection ID the peer puts in records to us, when one was negotiated (empty: none).
    pub fn connection_id(&self) -> Option<&[u8]> {
        self.path.as_ref().filter(|p| p.cid_negotiated).map(|p| &p.own_cid[..])
    }

    /// Whether the Connection ID (RFC 9146), `rrc` (RFC 9853) and `port_move` were negotiated.
    pub fn negotiated_mobility(&self) -> (bool, bool, bool) {
        self.path.as_ref().map_or((false, false, false), |p| (p.cid_negotiated, p.rrc, p.port_move))
    }

    pub(crate) fn fail_superseded(&mut self) {
        self.state = State::Failed;
        self.hs = None;
        self.protection = None;
        self.push_event(Event::Failed(Error::Superseded));
    }
}

/// What the protected records of one datagram showed.
#[derive(Clone, Copy, Default)]
struct Authenticated {
    /// At least one record authenticated.
    any: bool,
    /// One of them was newer than every record received before (RFC 9146 §6).
    newest: bool,
}

// ---------------------------------------------------------------- session mobility
impl Connection {
    fn retransmit_bounds(&self) -> (Duration, Duration) {
        match &self.config {
            RoleConfig::Client(c) => (c.initial_retransmit, c.max_retransmit),
            RoleConfig::Server(c) => (c.initial_retransmit, c.max_retransmit),
        }
    }

    /// Where a datagram came from and what it proved: the client follows the server's port
    /// (IPC), the server confirms a port move and follows a client that moved.
    fn after_datagram(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        len: usize,
        seen: Authenticated,
        waited_server_hello: bool,
    ) {
        if let Some(config) = self.client_config() {
            // IPC: the ServerHello came from the port of the session's own server socket.
            let follow = config.mobility.follow_server_port;
            if follow
                && waited_server_hello
                && self.state != State::Handshaking(HandshakeState::ClientWaitServerHello)
                && !self.is_closed()
                && remote != self.remote
                && remote.ip() == self.remote.ip()
            {
                self.change_remote(remote);
            }
            return;
        }
        if !seen.any {
            return;
        }
        let current = self.remote;
        let established = self.state == State::Established;
        let Some(path) = self.path.as_deref_mut() else { return };
        // TCS: the client's first authenticated record at the announced socket confirms the move.
        if let (Some(local), Some(moving)) = (local, path.moving()) {
            if moving.local == local {
                path.local = Some(local);
                path.transient().moving = None;
                path.release_idle();
            }
        }
        let mut cancel_probe = false;
        if let Some(probe) = path.transient.as_deref_mut().and_then(|t| t.probe.as_mut()) {
            if probe.addr == remote {
                probe.bytes_received += len as u64;
            } else if remote == current && seen.newest {
                // A newer record from the address in use: the peer is still there.
                cancel_probe = true;
            }
        }
        if cancel_probe {
            self.end_probe(now, false);
            return;
        }
        if !established || !seen.newest || remote == current || !path.may_follow_peer() {
            return;
        }
        if !path.rrc {
            self.change_remote(remote);
        } else if path.probe().is_none_or(|p| p.addr != remote) {
            self.start_probe(now, remote, len as u64);
        }
    }

    /// The session sends to `new` from now on.
    fn change_remote(&mut self, new: SocketAddr) {
        let old = std::mem::replace(&mut self.remote, new);
        if let Some(path) = self.path.as_deref_mut() {
            path.moved_from.get_or_insert(old);
            path.stats.path_changes += 1;
        }
        self.push_event(Event::PathChanged(new));
    }

    /// Endpoint: the peer address before and after a change, once.
    pub(crate) fn take_address_change(&mut self) -> Option<(SocketAddr, SocketAddr)> {
        let old = self.path.as_deref_mut()?.moved_from.take()?;
        Some((old, self.remote))
    }

    fn start_probe(&mut self, now: Instant, addr: SocketAddr, bytes_received: u64) {
        let (initial, _) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut() else { return };
        // A new address while another is checked: the newest wins (RFC 9853 §4 leaves nested
        // rebindings to time out); what was held for the old candidate goes to the known address.
        if path.probe().is_some() {
            self.end_probe(now, false);
        }
        let Some(path) = self.path.as_deref_mut() else { return };
        path.transient().probe = Some(Probe {
            addr,
            cookies: Vec::new(),
            bytes_received,
            bytes_sent: 0,
            challenges_sent: 0,
            deadline: now,
            interval: initial,
        });
        self.send_challenge(now);
    }

    /// Sends a path_challenge to the address under check, within its amplification allowance.
    fn send_challenge(&mut self, now: Instant) {
        let (_, max) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut() else { return };
        let cookie = path.next_cookie();
        let Ok(record) =
            self.seal_record(ContentType::ReturnRoutabilityCheck, &[&[RRC_PATH_CHALLENGE], &cookie])
        else {
            return;
        };
        let Some(path) = self.path.as_deref_mut() else { return };
        let transient = path.transient();
        let Some(probe) = transient.probe.as_mut() else { return };
        probe.challenges_sent += 1;
        probe.deadline = now + probe.interval;
        probe.interval = (probe.interval * 2).min(max);
        let len = record.len() as u64;
        if probe.bytes_sent + len <= AMPLIFICATION_FACTOR * probe.bytes_received {
            probe.bytes_sent += len;
            probe.cookies.push(cookie);
            let to = probe.addr;
            transient.direct.push_back((to, record));
            path.stats.path_challenges_sent += 1;
        }
    }

    /// The check of a new address ends: on success the session moves there and what was held
    /// goes out to it; otherwise it stays where it was and the held datagrams go there.
    fn end_probe(&mut self, _now: Instant, validated: bool) {
        let Some(path) = self.path.as_deref_mut() else { return };
        let Some(transient) = path.transient.as_deref_mut() else { return };
        let Some(probe) = transient.probe.take() else { return };
        let held = std::mem::take(&mut transient.held);
        path.release_idle();
        if validated {
            self.change_remote(probe.addr);
        }
        // Held datagrams are older than anything queued since: they go first.
        for d in held.into_iter().rev() {
            self.queued.get_or_insert_with(Box::default).outgoing.push_front(d);
        }
    }

    fn handle_path_timeout(&mut self, now: Instant) {
        let (_, max) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut() else { return };
        if let Some(probe) = path.probe().filter(|p| now >= p.deadline) {
            if probe.challenges_sent < MAX_CHALLENGES {
                self.send_challenge(now);
            } else {
                path.stats.path_validations_failed += 1;
                self.end_probe(now, false);
            }
        }
        let Some(path) = self.path.as_deref_mut() else { return };
        if let Some(moving) =
            path.transient.as_deref_mut().and_then(|t| t.moving.as_mut()).filter(|m| now >= m.deadline)
        {
            moving.deadline = now + moving.interval;
            moving.interval = (moving.interval * 2).min(max);
            let port = moving.local.port();
            self.announce_port(port);
        }
    }

    /// Queues the protected announcement of our new port (TCS).
    fn announce_port(&mut self, port: u16) {
        if let Ok(record) =
            self.seal_record(ContentType::ReturnRoutabilityCheck, &[&[RRC_PORT_MOVED], &port.to_be_bytes()])
        {
            self.push_datagram(record);
            if let Some(path) = self.path.as_deref_mut() {
                path.stats.port_announcements_sent += 1;
            }
        }
    }

    /// A return_routability_check message (RFC 9853 §3), or our port announcement.
    fn handle_rrc(&mut self, now: Instant, remote: SocketAddr, message: &[u8]) {
        let is_client = self.client_config().is_some();
        let Some(path) = self.path.as_deref_mut() else {
            self.stats.records_dropped += 1;
            return;
        };
        match (message.first().copied(), message.len()) {
            (Some(RRC_PATH_CHALLENGE), 9) if path.rrc => {
                // Answered at once, to where the challenge came from (RFC 9853 §4.4).
                let cookie = &message[1..9];
                if let Ok(record) =
                    self.seal_record(ContentType::ReturnRoutabilityCheck, &[&[RRC_PATH_RESPONSE], cookie])
                {
                    if let Some(path) = self.path.as_deref_mut() {
                        path.transient().direct.push_back((remote, record));
                        path.stats.path_responses_sent += 1;
                    }
                }
            }
            (Some(RRC_PATH_RESPONSE), 9) => {
                let valid = path
                    .probe()
                    .is_some_and(|p| p.addr == remote && p.cookies.iter().any(|c| c[..] == message[1..9]));
                if valid {
                    self.end_probe(now, true);
                }
            }
            (Some(RRC_PORT_MOVED), 3) if path.port_move && is_client => {
                let port = u16::from_be_bytes([message[1], message[2]]);
                let new = SocketAddr::new(self.remote.ip(), port);
                if new != self.remote {
                    self.change_remote(new);
                }
                // Acknowledged from our side to the new port: the server moves once a record
                // of ours authenticates there.
                if let Ok(record) = self.seal_record(
                    ContentType::ReturnRoutabilityCheck,
                    &[&[RRC_PORT_MOVED], &port.to_be_bytes()],
                ) {
                    self.push_datagram(record);
                }
            }
            // path_drop (we run only the basic check), our own port acknowledgements, and
            // unknown types are ignored (RFC 9853 §3).
            _ => {}
        }
    }

    /// Output of a session with mobility state: datagrams with their own destination first
    /// (path challenges, copies, responses). While a new address is checked, each datagram goes
    /// both to it, within its 3x allowance (RFC 9853), and to the address in use: a real move
    /// costs no round trip, a spoofed one loses nothing (the client drops whichever copy comes
    /// second as a replay). What exceeds the allowance is held (at most `MAX_HELD_DATAGRAMS`,
    /// the oldest dropped first) for whichever address the check leaves in use.
    fn poll_transmit_mobile(&mut self) -> Option<Transmit> {
        let src = self.local();
        let path = self.path.as_deref_mut()?;
        let direct = path.transient.as_deref_mut().and_then(|t| t.direct.pop_front());
        path.release_idle();
        let (dst, payload) = match direct {
            Some(d) => d,
            None => loop {
                let payload = self.queued.as_mut()?.outgoing.pop_front()?;
                let path = self.path.as_deref_mut()?;
                let Some(transient) = path.transient.as_deref_mut().filter(|t| t.probe.is_some()) else {
                    break (self.remote, payload);
                };
                if let Some(probe) = transient.probe.as_mut() {
                    let len = payload.len() as u64;
                    if probe.bytes_sent + len <= AMPLIFICATION_FACTOR * probe.bytes_received {
                        probe.bytes_sent += len;
                        let to = probe.addr;
                        transient.direct.push_back((self.remote, payload.clone()));
                        path.stats.bytes_copied_during_checks += len;
                        break (to, payload);
                    }
                }
                path.stats.bytes_held_by_amplification_limit += payload.len() as u64;
                transient.held.push_back(payload);
                if transient.held.len() > MAX_HELD_DATAGRAMS {
                    if let Some(oldest) = transient.held.pop_front() {
                        path.stats.bytes_dropped_by_amplification_limit += oldest.len() as u64;
                    }
                }
            },
        };
        self.free_empty_queues();
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += payload.len() as u64;
        Some(Transmit { src, dst, payload })
    }

    /// Server: the session lives on its own socket `local` from now on.
    pub(crate) fn set_local(&mut self, local: SocketAddr) {
        self.path.get_or_insert_with(Default::default).local = Some(local);
    }

    /// Server: announce a move to `local` (TCS); the session moves once a record of the
    /// client authenticates there.
    pub(crate) fn move_to(&mut self, now: Instant, local: SocketAddr) -> Result<(), Error> {
        if !self.is_established() {
            return Err(Error::NotEstablished);
        }
        let (initial, max) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut().filter(|p| p.port_move) else {
            return Err(Error::NotNegotiated("port_move: the client did not offer follow_server_port"));
        };
        path.transient().moving =
            Some(PortMove { local, deadline: now + initial, interval: (initial * 2).min(max) });
        self.announce_port(local.port());
        Ok(())
    }
}

/// Server: what the client's hello and our configuration agree on; the mobility state goes
/// when nothing is (a session without mobility keeps only an empty pointer).
fn negotiate_mobility(path: &mut Option<Box<PathState>>, config: &ServerConfig, ch: &ClientHello<'_>) {
    let Some(p) = path.as_deref_mut() else { return };
    let offered = &ch.extensions;
    p.cid_negotiated = config.mobility.connection_id.is_some() && offered.connection_id.is_some();
    p.peer_cid = offered.connection_id.filter(|_| p.cid_negotiated).unwrap_or_default().into();
    if !p.cid_negotiated {
        p.own_cid = Box::default();
    }
    p.rrc = config.mobility.return_routability_check && offered.rrc;
    p.port_move = config.mobility.follow_server_port && offered.port_move;
    if !p.rrc {
        p.cookie_seed = None;
    }
    if !p.cid_negotiated && !p.rrc && !p.port_move && p.local.is_none() {
        *path = None;
    }
}

/// The CID to write into our protected records (empty: none).
fn peer_cid(path: &Option<Box<PathState>>) -> &[u8] {
    path.as_deref().map_or(&[][..], |p| &p.peer_cid[..])
}

/// First 4 bytes of a client random: tells a late duplicate ClientHello from a new one (a new
/// random matching by chance, 1 in 2^32, is taken for a duplicate and gets no new session).
pub(crate) fn hello_id(random: &[u8; 32]) -> u32 {
    u32::from_be_bytes([random[0], random[1], random[2], random[3]])
}

/// Client: the session to keep from a completed handshake: new (session ID and/or ticket), or
/// the resumed one (with its renewed ticket, when one came).
fn client_session(
    hs: &mut Handshake,
    config: &ClientConfig,
    suite: CipherSuite,
    now: Instant,
) -> Option<ClientSession> {
    let master = hs.master.as_ref()?.0;
    if !hs.extended_master_secret {
        return None;
    }
    let resume = hs.resume.as_deref_mut()?;
    let created_unix = unix_now(config.wall_clock, now);
    let new_ticket = resume.new_ticket.take();
    if resume.resumption.is_some() {
        let mut session = resume.offer.clone()?;
        if let Some((hint, ticket)) = new_ticket {
            session.ticket = Some(ticket);
            session.lifetime_secs = hint;
            session.created_unix = created_unix;
        }
        return Some(session);
    }
    if resume.session_id.is_empty() && new_ticket.is_none() {
        return None;
    }
    let (lifetime_secs, ticket) = match new_ticket {
        Some((hint, ticket)) => (hint, Some(ticket)),
        None => (DEFAULT_SESSION_LIFETIME_SECS, None),
    };
    Some(ClientSession {
        suite,
        session_id: resume.session_id.clone(),
        ticket,
        master_secret: master,
        server_name: config.server_name.clone(),
        created_unix,
        lifetime_secs,
    })
}

/// How long a client offers a session resumed by ID (the server decides; this bounds our side).
const DEFAULT_SESSION_LIFETIME_SECS: u32 = 2 * 3600;

/// Master secret (extended when negotiated) and the epoch-1 keys (RFC 5246 §6.3, §8.1).
fn derive_keys(hs: &mut Handshake, premaster: &[u8]) -> TrafficKeys {
    let session_hash = hs.transcript_hash();
    let master = MasterSecret::derive(
        premaster,
        hs.extended_master_secret.then_some(session_hash.as_ref()),
        &hs.client_random,
        &hs.server_random,
    );
    hs.master = Some(master);
    keys_from_master(hs).unwrap_or_else(|| TrafficKeys::from_key_block(&[0; 40]))
}

/// The epoch-1 keys from the master secret and this handshake's randoms (RFC 5246 §6.3).
fn keys_from_master(hs: &Handshake) -> Option<TrafficKeys> {
    let master = hs.master.as_ref()?;
    let mut block = zeroize::Zeroizing::new([0u8; 40]);
    prf_sha256(&master.0, b"key expansion", &[&hs.server_random, &hs.client_random], &mut block[..]);
    Some(TrafficKeys::from_key_block(&block))
}

/// NewSessionTicket's lifetime hint in seconds.
fn lifetime_hint(lifetime: Duration) -> u32 {
    u32::try_from(lifetime.as_secs()).unwrap_or(u32::MAX)
}

impl SansIo for Connection {
    fn handle_datagram(&mut self, now: Instant, _local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        Connection::handle_datagram(self, now, remote, datagram)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        Connection::poll_transmit(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Connection::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Connection::handle_timeout(self, now)
    }
}

#[allow(dead_code)]
const _: () = {
    let _ = EXT_EXTENDED_MASTER_SECRET;
    let _ = EXT_RENEGOTIATION_INFO;
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::{client_addr, established_pair, server_addr};

    fn plain_record(content_type: ContentType, seq: u64, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN + body.len()];
        write_record(&mut out, content_type, 0, seq, None, &[body]);
        out
    }

    #[test]
    fn a_split_record_takes_only_a_real_continuation() {
        let record = plain_record(ContentType::Handshake, 7, &[0xab; 300]);
        let split = SplitRecord { bytes: record[..100].to_vec(), len: record.len() };
        let ccs = plain_record(ContentType::ChangeCipherSpec, 8, &[1]);
        // The rest, then whole records: a continuation.
        let rest = [&record[100..], &ccs[..]].concat();
        assert_eq!(split.continuation_len(&rest, 0), Some(record.len() - 100));
        // The rest alone: a continuation too.
        assert_eq!(split.continuation_len(&record[100..], 0), Some(record.len() - 100));
        // A datagram that reads as whole records by itself is never taken apart.
        let whole = [&ccs[..], &plain_record(ContentType::Alert, 9, &[1, 0])[..]].concat();
        assert_eq!(split.continuation_len(&whole, 0), None);
        // Too short, or bytes after the rest that are not records: not a continuation.
        assert_eq!(split.continuation_len(&record[100..150], 0), None);
        let garbage = [&record[100..], &[0x99; 7][..]].concat();
        assert_eq!(split.continuation_len(&garbage, 0), None);
    }

    /// A protected handshake record with one message, as the peer in `from` would write it.
    fn protected_message(from: &Connection, msg_type: HandshakeType, body: &[u8], seq: u64) -> Vec<u8> {
        protected_message_seq(from, msg_type, 9, body, seq)
    }

    fn protected_message_seq(
        from: &Connection,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
        seq: u64,
    ) -> Vec<u8> {
        let p = from.protection.as_ref().unwrap();
        let protect = Protect { cipher: p.cipher, keys: &p.write, cid: &[] };
        let mut hdr = Vec::new();
        HandshakeHeader {
            msg_type,
            length: body.len() as u32,
            message_seq,
            fragment_offset: 0,
            fragment_length: body.len() as u32,
        }
        .write(&mut hdr);
        let mut rec = vec![0u8; record_len(Some(protect), hdr.len() + body.len())];
        write_record(&mut rec, ContentType::Handshake, 1, seq, Some(protect), &[&hdr, body]);
        rec
    }

    fn assert_warning_alert(datagram: &[u8]) {
        // One protected alert record: type 21, epoch 1, 8-byte nonce + 2 bytes + 8-byte CCM tag.
        assert_eq!(datagram[0], ContentType::Alert as u8);
        assert_eq!(&datagram[3..5], &[0, 1]);
        assert_eq!(datagram.len(), HEADER_LEN + 8 + 2 + 8);
    }

    #[test]
    fn renegotiation_is_refused_with_a_warning_and_the_session_goes_on() {
        let (mut client, mut server, _) = established_pair();
        let now = Instant::from_millis(5);
        let h = server.handle_for(client_addr()).unwrap();

        // Server asks for renegotiation: the client answers no_renegotiation and stays up.
        let sconn = server.connection(h).unwrap();
        // A sequence number ahead of the real ones but inside the replay window.
        let mut rec = protected_message(sconn, HandshakeType::HelloRequest, &[], sconn.write_seq + 5);
        client.handle_datagram(now, server_addr(), &mut rec);
        assert_warning_alert(&client.poll_transmit(now).expect("no_renegotiation alert").payload);
        assert!(client.is_established());
        assert_eq!(client.poll_event(), None);

        // Client starts a renegotiating ClientHello: the server refuses the same way.
        let mut body = Vec::new();
        ClientHello::encode(&mut body, &[1; 32], &[], &[0xC0A8], true);
        let mut rec = protected_message(&client, HandshakeType::ClientHello, &body, client.write_seq + 5);
        let conn = server.connection_mut(h).unwrap();
        conn.handle_datagram(now, client_addr(), &mut rec);
        assert_warning_alert(&conn.poll_transmit(now).expect("no_renegotiation alert").payload);
        assert!(conn.is_established());

        // Data still flows both ways.
        let mut buf = [0u8; 128];
        let n = client.seal_into(b"after", &mut buf).unwrap();
        let mut got = Vec::new();
        server.open_in_place(now, server_addr(), client_addr(), &mut buf[..n], &mut |_, d| {
            got.extend_from_slice(d)
        });
        assert_eq!(got, b"after");
    }

    #[test]
    fn forged_records_do_not_disturb_an_established_session() {
        let (mut client, _server, _) = established_pair();
        let now = Instant::from_millis(5);
        // An unauthenticated fatal alert in epoch 0 and a garbage epoch-1 alert are both dropped.
        let mut plain = vec![0u8; HEADER_LEN + 2];
        write_record(&mut plain, ContentType::Alert, 0, 50, None, &[&[2, 40]]);
        client.handle_datagram(now, server_addr(), &mut plain);
        let mut forged = plain.clone();
        forged[3..5].copy_from_slice(&[0, 1]);
        forged.extend_from_slice(&[0; 20]);
        forged[11..13].copy_from_slice(&22u16.to_be_bytes());
        client.handle_datagram(now, server_addr(), &mut forged);
        assert!(client.is_established());
        assert_eq!(client.poll_event(), None);
        assert_eq!(client.stats().records_dropped, 2);
    }

    #[test]
    fn bad_finished_fails_with_decrypt_error() {
        let ccfg = Arc::new(ClientConfig::psk(b"id".to_vec(), b"key".to_vec()));
        let scfg = Arc::new(ServerConfig::psk(b"id".to_vec(), b"key".to_vec()));
        let now = Instant::from_millis(1);
        let mut client = Connection::client(ccfg, now, server_addr(), [1; 32]);
        let mut server = crate::endpoint::Endpoint::new(scfg, [2; 32]);
        let mut server_failed = None;
        for _ in 0..4 {
            while let Some(t) = client.poll_transmit(now) {
                let mut d = t.payload;
                if client.state == State::Handshaking(HandshakeState::ClientWaitServerFinished) {
                    // Flight 5: keep ClientKeyExchange and ChangeCipherSpec, replace Finished by
                    // one with wrong verify_data under the right keys.
                    let mut forged = Vec::new();
                    for rec in crate::record::Records::new(&d) {
                        let (h, range) = rec.unwrap();
                        if h.epoch == 0 {
                            forged.extend_from_slice(&d[range.start - HEADER_LEN..range.end]);
                        } else {
                            let seq = client.write_seq + 1;
                            // Finished is the client's fourth message (ClientHello twice, ClientKeyExchange).
                            forged.extend(protected_message_seq(
                                &client,
                                HandshakeType::Finished,
                                3,
                                &[0x5a; 12],
                                seq,
                            ));
                        }
                    }
                    d = forged;
                }
                server.handle_datagram(now, server_addr(), client_addr(), &mut d);
            }
            while let Some((_, e)) = server.poll_event() {
                server_failed = Some(e);
            }
            while let Some(t) = server.poll_transmit(now) {
                let mut d = t.payload;
                client.handle_datagram(now, server_addr(), &mut d);
            }
        }
        assert_eq!(server_failed, Some(Event::Failed(Error::AlertSent(AlertDescription::DecryptError))));
        assert_eq!(
            client.poll_event(),
            Some(Event::Failed(Error::AlertReceived(AlertDescription::DecryptError)))
        );
    }
}
