//! One DTLS session, client or server.
//!
//! The connection is the record layer of the session, its handshake while it runs, and what it
//! has for its driver (datagrams, events, deadlines). The handshake lives in a boxed
//! [`Handshake`] (transcript, reassembly, the flight and its timers, and the typed step the
//! handshake is at: [`client`] and [`server`] hold one state per awaited message) that is freed
//! once the handshake is done, so an established session keeps only its record layer, counters
//! and addresses. Mobility (Connection IDs, address checks, session sockets, port moves) is in
//! [`path`], boxed and made only for sessions that use it.

mod client;
mod handshake;
mod path;
mod server;
mod tls13;
mod version;

pub(crate) use handshake::hello_id;
pub(crate) use server::VerifiedHello;
pub(crate) use tls13::resume as tls13_resume;
pub(crate) use tls13::VerifiedHello13;

use crate::alert::{AlertDescription, AlertLevel};
use crate::cache::{CacheUse, CachedClientChain, CachedServer, CLIENT_TICKET_LEN};
use crate::config::{ClientConfig, ServerConfig, WhenFull, MIN_MTU};
use crate::error::Error;
use crate::flight::Resend;
use crate::handshake::{parse_fragments, Fragment, HandshakeType, Insert, NamedGroup};
use crate::mobility::{MobilityStats, NegotiatedMobility, PathState};
use crate::record::{
    write_record, ContentType, RecordHeader, RecordLayer, Unopened, HEADER_LEN, MAX_PLAINTEXT,
};
use crate::rtt::RttEstimate;
use crate::session::{ClientSession, Resumption, ServerSession};
use crate::suite::CipherSuite;
use client::{ClientStep, ExpectServerHello};
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_pki::CertDer;
use handshake::{Abort, AuthFailure, Handshake, HandshakeTimer, MAX_EARLY_RECORDS, MAX_EARLY_RECORD_BYTES};
use rand_core::RngCore;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Where the handshake is: a typed state per awaited message ([`client`], [`server`]), carrying
/// what the next step needs.
enum Step {
    Client(ClientStep),
    Server(server::ServerStep),
    /// Completed; the side that sent the last flight keeps it (and this state) until the peer
    /// shows it arrived.
    Complete,
}

/// Where decrypted application data goes: queued as events when `None`.
type DataSink<'a> = Option<&'a mut dyn FnMut(&[u8])>;

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
    /// Endpoint only: every session slot was taken (`ServerConfig::max_sessions`), so this
    /// session was closed with close_notify to make room for a new client; `policy` chose it.
    /// The last event of its handle.
    Evicted {
        /// The policy that chose this session.
        policy: WhenFull,
        /// The address of the client it made room for.
        newcomer: SocketAddr,
    },
    /// Endpoint only: a client that returned a valid cookie was refused with a fatal
    /// internal_error alert because every session slot was taken (`WhenFull::Refuse`, or no
    /// established session to evict). No connection was made: the handle names none.
    Refused {
        /// The client's address.
        remote: SocketAddr,
    },
    /// Client, DTLS 1.3: the server issued a ticket after the handshake (NewSessionTicket,
    /// RFC 8446 §4.6.1). Keep the latest to resume with, as a 1.2 client keeps
    /// [`HandshakeSummary::session`].
    SessionTicket(ClientSession),
}

/// What a completed handshake cost and agreed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeSummary {
    /// The protocol version agreed.
    pub version: crate::config::Versions,
    /// The suite agreed.
    pub suite: CipherSuite,
    /// DTLS 1.3: the group of the (EC)DHE exchange (`None` with a PSK alone, and in DTLS 1.2,
    /// where the suite says it).
    pub group: Option<NamedGroup>,
    /// DTLS 1.3: the server answered the first ClientHello with a HelloRetryRequest (for a
    /// cookie or another key share).
    pub hello_retry: bool,
    /// DTLS 1.3: the group whose key share that HelloRetryRequest asked for (RFC 8446 §4.2.8);
    /// `None` when it asked for none (a cookie exchange alone, RFC 9147 §5.1) or none came.
    pub hello_retry_group: Option<NamedGroup>,
    /// Which of Connection IDs, return-routability checks and `port_move` the handshake
    /// agreed: what lets the session survive an address change.
    pub mobility: crate::mobility::NegotiatedMobility,
    /// Whether an earlier session was resumed (abbreviated handshake); `resumption` says how.
    pub resumed: bool,
    /// How the session was resumed, if it was.
    pub resumption: Option<Resumption>,
    /// Client: the session to resume later (session ID and/or ticket), when the server issued one.
    /// DTLS 1.3 tickets come after the handshake, as [`Event::SessionTicket`].
    pub session: Option<ClientSession>,
    /// DTLS 1.3 0-RTT: `None` when no early data was offered, else whether the server
    /// accepted it (refused early data was sent again after the handshake).
    pub early_data: Option<bool>,
    /// Certificates the peer sent (0 with PSK, or a client that sent none).
    pub peer_certificates: usize,
    /// The peer's validated leaf certificate (DER), if it sent one.
    pub peer_leaf: Option<CertDer>,
    /// DTLS 1.3 certificate compression (RFC 8879): the algorithm our chain was sent in ...
    pub certificate_compression_sent: Option<crate::handshake::CompressionAlgorithm>,
    /// ... and the one the peer's chain came in, if either was compressed.
    pub certificate_compression_received: Option<crate::handshake::CompressionAlgorithm>,
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
    /// The round trip to the peer as measured in this handshake (each exchange of flights, and
    /// on a server under the adaptive policy the cookie exchange), RFC 6298-smoothed, starting
    /// from the estimate cached by an earlier handshake when the adaptive policy had one. `None`
    /// when no exchange was measured and nothing was cached; with `samples` 0 when every flight
    /// was resent and only the exchanges' upper bounds (`flights`) were kept.
    pub rtt: Option<RttEstimate>,
    /// Whether the master secret is bound to the handshake (RFC 7627).
    pub extended_master_secret: bool,
    /// The PSK identity used.
    pub psk_identity: Vec<u8>,
    /// The peer's chain was found in the validated-key cache (`key_cache` in the config): path
    /// building and the certificates' signatures were skipped; times and anchor were re-checked.
    pub chain_validation_skipped: bool,
    /// Datagrams sent during the handshake.
    pub datagrams_sent: u64,
    /// Datagrams received during the handshake. A server counts from the ClientHello its
    /// session started from (every datagram that carried a fragment of it); a first ClientHello
    /// answered statelessly with a cookie (RFC 6347 §4.2.1, RFC 9147 §5.1) is not counted.
    pub datagrams_received: u64,
    /// Bytes sent during the handshake (UDP payload).
    pub bytes_sent: u64,
    /// Bytes received during the handshake (UDP payload), of those datagrams.
    pub bytes_received: u64,
    /// What this handshake took from a cache (RFC 7924, client-certificate caching).
    pub from_cache: CacheUse,
    /// Client, full certificate handshake with caching offered: the entry to keep for this
    /// server (its objects and our next ticket), for the next handshake's
    /// [`Connection::client_with_cache`]. `None`: keep what was kept.
    pub cache_update: Option<CachedServer>,
    /// Client: the cookie that admitted this handshake, to send again in the first ClientHello
    /// of a later one ([`crate::ClientConfig::cookie`]); `None` if the server asked for none.
    pub cookie: Option<Vec<u8>>,
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
    /// Handshake flights sent (first transmissions). Flights are few (a handshake's, then
    /// 1.3's post-handshake messages), so 32 bits: every session keeps these counters.
    pub flights_sent: u32,
    /// Handshake flights resent.
    pub flights_resent: u32,
    /// Records dropped: unparsable, failing authentication, replayed or out of place.
    pub records_dropped: u64,
    /// Application records sent.
    pub app_records_sent: u64,
    /// Application records delivered.
    pub app_records_received: u64,
}

/// The configuration of one side, behind one pointer in every connection: a server's
/// connections share their endpoint's ([`ServerRole`]).
pub(crate) enum RoleConfig {
    Client(Arc<ClientConfig>),
    Server(Arc<ServerConfig>),
}

/// A server's configuration, and the same as its connections keep it.
#[derive(Clone)]
pub(crate) struct ServerRole {
    pub config: Arc<ServerConfig>,
    shared: Arc<RoleConfig>,
}

impl ServerRole {
    pub fn new(config: Arc<ServerConfig>) -> Self {
        ServerRole { shared: Arc::new(RoleConfig::Server(Arc::clone(&config))), config }
    }
}

/// Where a connection stands; the handshake's own step is in [`Handshake`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Handshaking,
    /// Application data flows.
    Established,
    /// close_notify sent or received.
    Closed,
    /// A fatal alert or a timeout ended the session.
    Failed,
}

/// What a completed handshake agreed, for its summary.
struct Finished {
    suite: CipherSuite,
    resumption: Option<Resumption>,
    /// Client: the session to keep.
    session: Option<ClientSession>,
    peer_certificates: usize,
    peer_leaf: Option<CertDer>,
    /// Server: the session for the endpoint's session-ID cache.
    cache_entry: Option<([u8; 32], ServerSession)>,
    from_cache: CacheUse,
    /// Client: the entry to keep for this server.
    cache_update: Option<CachedServer>,
    /// Server: the client's chain for the endpoint's client-certificate cache, under its ticket.
    client_chain_entry: Option<([u8; CLIENT_TICKET_LEN], CachedClientChain)>,
}

/// One session, client or server.
pub struct Connection {
    config: Arc<RoleConfig>,
    remote: SocketAddr,
    phase: Phase,
    hs: Option<Box<Handshake>>,
    version: VersionState,
    /// The agreed suite, of either version.
    suite: Option<CipherSuite>,
    /// Server: the first 4 bytes of the client random of the ClientHello this session started
    /// from and its message_seq, so the endpoint can tell a copy of it (late or retransmitted)
    /// from a new handshake.
    hello_id: u32,
    hello_seq: u16,
    stats: Stats,
    /// Connection ID, address checks, own socket, port moves: only when in use.
    path: Option<Box<PathState>>,
    /// Datagrams and events not yet polled; `None` when both are empty.
    queued: Option<Box<Queues>>,
}

/// The record state of the version a session speaks, each with what only it needs: a 1.3
/// session does not carry 1.2's record layer, nor a 1.2 session 1.3's. A client that offers both
/// starts in 1.2's, which sends its hello, and switches when the server answers in 1.3.
enum VersionState {
    /// DTLS 1.2: epochs 0 and 1, inline (the handshake's state is `Connection::hs`).
    Dtls12(RecordLayer),
    /// DTLS 1.3: its write half inline, the rest boxed.
    Dtls13(tls13::Tls13),
}

impl VersionState {
    fn is13(&self) -> bool {
        matches!(self, VersionState::Dtls13(_))
    }

    fn v13(&self) -> Option<&tls13::Tls13> {
        match self {
            VersionState::Dtls13(v13) => Some(v13),
            VersionState::Dtls12(_) => None,
        }
    }

    fn v13_mut(&mut self) -> Option<&mut tls13::Tls13> {
        match self {
            VersionState::Dtls13(v13) => Some(v13),
            VersionState::Dtls12(_) => None,
        }
    }

    /// The 1.3 state, taken out while a borrow of the whole connection is needed; put back with
    /// `VersionState::Dtls13` (a 1.2 layer with no keys stands in meanwhile).
    fn take13(&mut self) -> Option<tls13::Tls13> {
        match std::mem::replace(self, VersionState::Dtls12(RecordLayer::default())) {
            VersionState::Dtls13(v13) => Some(v13),
            twelve => {
                *self = twelve;
                None
            }
        }
    }

    /// The 1.2 record layer, unless the session speaks 1.3.
    fn record12(&self) -> Option<&RecordLayer> {
        match self {
            VersionState::Dtls12(record) => Some(record),
            VersionState::Dtls13(_) => None,
        }
    }

    fn record12_mut(&mut self) -> Option<&mut RecordLayer> {
        match self {
            VersionState::Dtls12(record) => Some(record),
            VersionState::Dtls13(_) => None,
        }
    }

    /// The 1.2 epoch-1 keys the handshake derived (a 1.3 session has its own key schedule).
    fn install12(&mut self, keys: crate::record::Keys) {
        if let Some(record) = self.record12_mut() {
            record.install(keys);
        }
    }

    /// Forgets the 1.2 keys (a failed or superseded session); 1.3 discards its own.
    fn discard_keys12(&mut self) {
        if let Some(record) = self.record12_mut() {
            record.discard_keys();
        }
    }
}

/// What a connection has for its driver. Boxed and freed once polled empty, so an idle session
/// keeps one pointer rather than two empty deques (64 bytes).
#[derive(Default)]
struct Queues {
    events: VecDeque<Event>,
    outgoing: VecDeque<Vec<u8>>,
    endpoint: VecDeque<EndpointEvent>,
}

/// What a server connection tells its endpoint, at the moment it happens (a client has no
/// endpoint: nothing is queued for it).
pub(crate) enum EndpointEvent {
    /// The handshake completed; `rtt` is the round trip it measured, for the endpoint's cache
    /// under the adaptive policy.
    Established {
        /// The estimate the handshake ended with.
        rtt: Option<RttEstimate>,
    },
    /// A full handshake made a session the endpoint's session-ID cache keeps.
    NewSession {
        /// Its session ID.
        id: [u8; 32],
        /// What resuming it needs.
        session: ServerSession,
    },
    /// A client chain for the endpoint's client-certificate cache (seed 003), under the ticket
    /// both sides derived.
    ClientChain {
        /// The client-certificate ticket.
        ticket: [u8; CLIENT_TICKET_LEN],
        /// The chain it stands for.
        chain: CachedClientChain,
    },
    /// The peer's address changed (a move the session accepted).
    Moved {
        /// The address before.
        from: SocketAddr,
        /// The address now.
        to: SocketAddr,
    },
    /// The session is over (closed or failed): what it still has to send goes out without it.
    Ended,
    /// DTLS 1.3: the peer asked for this many spare CIDs (RFC 9147 §9); the endpoint makes them
    /// and the session sends them.
    ConnectionIdsRequested(u8),
    /// DTLS 1.3: the peer no longer writes this CID of ours: it routes to nothing any more.
    ConnectionIdRetired(Box<[u8]>),
}

/// What one datagram did to a connection, for the endpoint's bookkeeping.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Received {
    /// No record of it was dropped: for an established session, the peer is alive.
    pub authentic: bool,
    /// It delivered application data.
    pub app_data: bool,
}

/// What the protected records of one datagram showed.
#[derive(Clone, Copy, Default)]
struct Authenticated {
    /// At least one record authenticated.
    any: bool,
    /// One of them was newer than every record received before (RFC 9146 §6).
    newest: bool,
}

impl Connection {
    /// A client session towards `remote`; the ClientHello is ready in `poll_transmit`.
    pub fn client(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
    ) -> Connection {
        Connection::client_with_session(config, now, remote, rng_seed, None)
    }

    /// A client session that offers to resume `session` (as [`Connection::client_with_session`])
    /// and offers what `cached` holds for this server (RFC 7924 objects, client-certificate
    /// ticket) when the configuration enables it. An entry made for another server name is
    /// not offered.
    pub fn client_with_cache(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
        session: Option<ClientSession>,
        cached: Option<CachedServer>,
    ) -> Connection {
        Connection::client_inner(config, now, remote, rng_seed, session, cached)
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
        Connection::client_inner(config, now, remote, rng_seed, session, None)
    }

    fn client_inner(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
        session: Option<ClientSession>,
        cached: Option<CachedServer>,
    ) -> Connection {
        if config.versions == crate::config::Versions::Dtls13 {
            let mut conn = Connection::bare(Arc::new(RoleConfig::Client(config.clone())), remote);
            if let Err(error) = config.validate() {
                conn.fail(Abort { alert: None, error });
                return conn;
            }
            conn.start_client13(now, &config, rng_seed, session, cached);
            return conn;
        }
        // A 1.3 session (a ticket and its PSK) means nothing to a 1.2 server: only the 1.3
        // offer of a hello offering both carries it.
        let (session, session13) = match session {
            Some(s) if s.is_dtls13() => (None, Some(s)),
            s => (s, None),
        };
        let mut hs = Connection::client_handshake(&config, now, remote, rng_seed, session, cached);
        let path = config.mobility.any().then(|| {
            let mut own_cid = vec![0u8; config.mobility.connection_id.unwrap_or(0) as usize];
            hs.rng.fill_bytes(&mut own_cid);
            Box::new(PathState {
                offered_cid: config.mobility.connection_id.is_some(),
                ..PathState::new(&own_cid, None)
            })
        });
        if config.versions == crate::config::Versions::Both {
            let mut offer13 = version::offer13(&config, &mut hs);
            if let Some(Step::Client(ClientStep::ExpectServerHello(state))) = hs.step.as_mut() {
                offer13.cached.clone_from(&state.cached);
                state.offer13 = Some(offer13);
                state.resume13 =
                    session13.map(|s| Box::new(tls13::resume::Resume13::offering(s, now, &config)));
            }
        }
        let mut conn = Connection::bare(Arc::new(RoleConfig::Client(config.clone())), remote);
        conn.path = path;
        conn.hello_id = hello_id(&hs.client_random);
        if let Err(error) = config.validate() {
            conn.hs = Some(hs);
            conn.fail(Abort { alert: None, error });
            return conn;
        }
        if let Some(Step::Client(ClientStep::ExpectServerHello(mut state))) = hs.step.take() {
            conn.send_client_hello(now, &mut hs, &mut state);
            hs.step = Some(Step::Client(ClientStep::ExpectServerHello(state)));
        }
        conn.hs = Some(hs);
        conn
    }

    fn bare(config: Arc<RoleConfig>, remote: SocketAddr) -> Connection {
        Connection {
            config,
            remote,
            phase: Phase::Handshaking,
            hs: None,
            version: VersionState::Dtls12(RecordLayer::default()),
            suite: None,
            hello_id: 0,
            hello_seq: 0,
            stats: Stats::default(),
            path: None,
            queued: None,
        }
    }

    fn client_config(&self) -> Option<&Arc<ClientConfig>> {
        match &*self.config {
            RoleConfig::Client(c) => Some(c),
            RoleConfig::Server(_) => None,
        }
    }

    fn server_config(&self) -> Option<&Arc<ServerConfig>> {
        match &*self.config {
            RoleConfig::Server(c) => Some(c),
            RoleConfig::Client(_) => None,
        }
    }

    fn mtu(&self) -> usize {
        match &*self.config {
            RoleConfig::Client(c) => c.mtu,
            RoleConfig::Server(c) => c.mtu,
        }
        .clamp(MIN_MTU, u16::MAX as usize)
    }

    fn handshake_timeout(&self) -> Duration {
        match &*self.config {
            RoleConfig::Client(c) => c.handshake_timeout,
            RoleConfig::Server(c) => c.handshake_timeout,
        }
    }

    /// Client, adaptive policy: what `timer` measured of the path, for the next handshake with
    /// this server (a server's endpoint keeps its own on `EndpointEvent::Established`).
    fn keep_rtt(&self, timer: &crate::timer::RetransmitTimer) {
        if let (RoleConfig::Client(config), Some(estimate)) = (&*self.config, timer.estimate()) {
            if timer.adaptive() {
                config.rtt_cache.insert(self.remote.ip(), estimate);
            }
        }
    }

    fn retransmit_bounds(&self) -> (Duration, Duration) {
        match &*self.config {
            RoleConfig::Client(c) => (c.initial_retransmit, c.max_retransmit),
            RoleConfig::Server(c) => (c.initial_retransmit, c.max_retransmit),
        }
    }

    /// The CID to write into our protected records (empty: none).
    fn peer_cid(&self) -> &[u8] {
        self.path.as_deref().map_or(&[][..], |p| p.peer_cid())
    }

    /// Server: the ClientHello this session answers.
    fn started_from_hello(&mut self, random: &[u8; 32], message_seq: u16) {
        self.hello_id = hello_id(random);
        self.hello_seq = message_seq;
    }

    // ---------------------------------------------------------------- flights

    /// Sends the flight in `hs.flight` for the first time.
    fn send_new_flight(&mut self, now: Instant, hs: &mut Handshake, timed: bool) {
        let (bytes, seqs) = self.transmit_flight(hs);
        let received = self.stats.bytes_received;
        match hs.flight.on_first_transmission(now, timed, bytes, seqs, received) {
            Some(at) => hs.timers.set(HandshakeTimer::Retransmit, at),
            None => hs.timers.stop(HandshakeTimer::Retransmit),
        }
        self.stats.flights_sent = self.stats.flights_sent.saturating_add(1);
    }

    fn retransmit_flight(&mut self, now: Instant, hs: &mut Handshake, cause: Resend) {
        if hs.flight.is_empty() {
            return;
        }
        let (_, seqs) = self.transmit_flight(hs);
        match hs.flight.on_retransmission(now, seqs, cause) {
            Some(at) => hs.timers.set(HandshakeTimer::Retransmit, at),
            None => hs.timers.stop(HandshakeTimer::Retransmit),
        }
        self.stats.flights_resent = self.stats.flights_resent.saturating_add(1);
    }

    /// Packs the current flight into datagrams with fresh record sequence numbers; returns its
    /// bytes and the epoch-0 record numbers it used.
    fn transmit_flight(&mut self, hs: &mut Handshake) -> (u32, std::ops::Range<u64>) {
        let mtu = self.mtu();
        let cid = self.path.as_deref().map_or(&[][..], |p| p.peer_cid());
        let first_seq = hs.epoch0_write_seq;
        // A 1.2 flight (a 1.3 handshake has its own flight engine): always a 1.2 layer here.
        let Some(record) = self.version.record12_mut() else { return (0, first_seq..first_seq) };
        let datagrams = hs.flight.pack(mtu, &mut hs.epoch0_write_seq, record, cid);
        let bytes = datagrams.iter().map(Vec::len).sum::<usize>().min(u32::MAX as usize) as u32;
        self.queued.get_or_insert_with(Box::default).outgoing.extend(datagrams);
        (bytes, first_seq..hs.epoch0_write_seq)
    }

    /// The peer resent the flight our current flight answers: ours was lost, resend it, unless
    /// the copy came within the timer's answer window of our last transmission (a duplicated
    /// datagram, or a copy that crossed ours). The window does not grow with a backed-off timer:
    /// a long timer would leave the peer's recovery unanswered for half of it.
    fn on_peer_retransmission(&mut self, now: Instant, hs: &mut Handshake) {
        if now < hs.flight.timer.last_sent + hs.flight.timer.answer_window() {
            return;
        }
        self.retransmit_flight(now, hs, Resend::PeerRetransmission);
    }

    /// The handshake completed: the summary, the early data, and whether its state is kept.
    /// Whoever sent the last flight keeps it until the peer shows it arrived: the server in a
    /// full handshake, the client in an abbreviated one.
    fn complete_handshake(&mut self, now: Instant, hs: &mut Handshake, finished: Finished) -> Step {
        // The peer's last flight answered ours (unless ours is the last and awaits nothing).
        hs.flight.timer.on_answer(now, self.stats.bytes_received);
        let rtt = hs.flight.timer.estimate();
        self.keep_rtt(&hs.flight.timer);
        hs.timers.stop(HandshakeTimer::Retransmit);
        hs.timers.stop(HandshakeTimer::GiveUp);
        let early_data = std::mem::take(&mut hs.early_data);
        let queued = self.queued.iter().flat_map(|q| q.outgoing.iter());
        let (queued_datagrams, queued_bytes) = queued.fold((0, 0), |(n, b), d| (n + 1, b + d.len() as u64));
        let summary = HandshakeSummary {
            version: crate::config::Versions::Dtls12,
            suite: finished.suite,
            group: None,
            hello_retry: false,
            hello_retry_group: None,
            mobility: Default::default(),
            resumed: finished.resumption.is_some(),
            resumption: finished.resumption,
            session: finished.session,
            peer_certificates: finished.peer_certificates,
            peer_leaf: finished.peer_leaf,
            certificate_compression_sent: None,
            certificate_compression_received: None,
            duration: now.saturating_duration_since(hs.started),
            flights_sent: hs.flight.sent,
            retransmissions: hs.flight.resent,
            peer_retransmissions: hs.peer_retransmissions,
            rtt,
            extended_master_secret: hs.extended_master_secret,
            psk_identity: hs.psk_identity.clone(),
            chain_validation_skipped: hs.chain_validation_skipped,
            datagrams_sent: self.stats.datagrams_sent + queued_datagrams,
            datagrams_received: self.stats.datagrams_received,
            bytes_sent: self.stats.bytes_sent + queued_bytes,
            bytes_received: self.stats.bytes_received,
            from_cache: finished.from_cache,
            cache_update: finished.cache_update,
            cookie: (!hs.cookie.is_empty()).then(|| hs.cookie.clone()),
            early_data: None,
        };
        self.phase = Phase::Established;
        self.push_endpoint_event(EndpointEvent::Established { rtt });
        if let Some((id, session)) = finished.cache_entry {
            self.push_endpoint_event(EndpointEvent::NewSession { id, session });
        }
        if let Some((ticket, chain)) = finished.client_chain_entry {
            self.push_endpoint_event(EndpointEvent::ClientChain { ticket, chain });
        }
        let sent_last_flight = match *self.config {
            RoleConfig::Client(_) => finished.resumption.is_some(),
            RoleConfig::Server(_) => finished.resumption.is_none(),
        };
        if sent_last_flight {
            hs.timers.set(HandshakeTimer::Retain, now + self.handshake_timeout());
            hs.reassembler.reset(hs.reassembler.next_seq());
        }
        self.push_connected(summary);
        for data in early_data {
            self.stats.app_records_received += 1;
            self.push_event(Event::ApplicationData(data));
        }
        Step::Complete
    }

    /// The session is over: its handshake state and keys go, and the endpoint is told.
    fn end(&mut self, phase: Phase) {
        self.phase = phase;
        self.hs = None;
        self.push_endpoint_event(EndpointEvent::Ended);
    }

    fn fail(&mut self, abort: Abort) {
        if matches!(self.phase, Phase::Failed | Phase::Closed)
            && self.queued.as_ref().is_some_and(|q| !q.events.is_empty())
        {
            return;
        }
        if let Some(desc) = abort.alert {
            self.send_alert(AlertLevel::Fatal, desc);
        }
        self.end(Phase::Failed);
        self.version.discard_keys12();
        self.push_event(Event::Failed(abort.error));
    }

    fn send_alert(&mut self, level: AlertLevel, desc: AlertDescription) {
        let body = [level.to_u8(), desc.code()];
        let record = self.version.record12_mut().filter(|r| r.write_epoch() != 0);
        if record.is_none() {
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
        } else {
            let cid = self.path.as_deref().map_or(&[][..], |p| p.peer_cid());
            if let Some(Ok(record)) = record.map(|r| r.seal(ContentType::Alert, cid, &[&body])) {
                self.push_datagram(record);
            }
        }
    }

    // ---------------------------------------------------------------- input

    /// A datagram from `remote` arrived; it may be decrypted in place.
    pub fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        self.handle_input(now, None, remote, datagram, None, None);
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
        self.handle_input(now, None, remote, datagram, None, Some(on_data));
    }

    /// Endpoint: a datagram that arrived at our socket `local`.
    pub(crate) fn handle_datagram_at(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
        first: Option<RecordHeader>,
        on_data: DataSink<'_>,
    ) -> Received {
        let (dropped, delivered) = (self.stats.records_dropped, self.stats.app_records_received);
        self.handle_input(now, Some(local), remote, datagram, first, on_data);
        Received {
            authentic: self.stats.records_dropped == dropped,
            app_data: self.stats.app_records_received != delivered,
        }
    }

    /// Whether a client still waits for its ServerHello.
    fn waits_for_server_hello(&self) -> bool {
        self.phase == Phase::Handshaking
            && self.hs.as_ref().is_some_and(|hs| ExpectServerHello::is_current(&hs.step))
    }

    /// The records of one datagram, split once and handled in order; `first` is its first
    /// record's header when the endpoint read it already (with the CID length we issue).
    fn handle_input(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        datagram: &mut [u8],
        mut first: Option<RecordHeader>,
        mut on_data: DataSink<'_>,
    ) {
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        if self.offers_both() && version::answer_version(datagram) == Some(version::Answer::Dtls13) {
            self.switch_to13();
        }
        if self.version.is13() {
            self.handle_input13(now, local, remote, datagram, &mut on_data);
            return;
        }
        if let Some(hs) = self.hs.as_mut() {
            hs.flight.timer.on_datagram(self.stats.datagrams_received, now, datagram.len());
        }
        let own_cid_len = self.path.as_deref().map_or(0, |p| p.own_cid().len() as u8);
        let waited_server_hello = self.waits_for_server_hello();
        let mut seen = Authenticated::default();
        let mut pos = 0;
        // The rest of a record the peer split across two datagrams (see `SplitRecord`).
        if let Some(split) = self.hs.as_mut().and_then(|hs| hs.split_record.take()) {
            if let Some(n) = split.continuation_len(datagram, own_cid_len) {
                let mut record = split.complete(&datagram[..n]);
                pos = n;
                if let Ok(header) =
                    RecordHeader::parse(&mut fastshake_core::codec::Reader::new(&record), own_cid_len)
                {
                    self.handle_record_bytes(now, remote, header, &mut record, &mut on_data, &mut seen);
                }
            }
        }
        // Read by the endpoint: good for the first record unless a split record's rest came first,
        // and for a `tls12_cid` record only if its CID has our length (else it is unreadable here).
        first = first
            .filter(|h| pos == 0 && (h.content_type != ContentType::Tls12Cid || h.cid_len == own_cid_len));
        while pos < datagram.len() {
            if matches!(self.phase, Phase::Failed | Phase::Closed) {
                return;
            }
            let mut r = fastshake_core::codec::Reader::new(&datagram[pos..]);
            let parsed = match first.take() {
                Some(h) => r.take(h.len()).map(|_| h),
                None => RecordHeader::parse(&mut r, own_cid_len),
            };
            let header = match parsed {
                Ok(h) if r.remaining() >= h.length as usize => h,
                Ok(h) => {
                    self.stats.records_dropped += 1;
                    if self.phase == Phase::Handshaking {
                        if let Some(hs) = self.hs.as_mut() {
                            hs.split_record = crate::record::SplitRecord::keep(&h, &datagram[pos..]);
                        }
                    }
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
            let answered = waited_server_hello && !self.waits_for_server_hello();
            self.after_datagram(now, local, remote, datagram.len(), seen, answered);
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
        let cid_matches =
            header.cid_len == 0 || self.path.as_deref().is_some_and(|p| header.cid(record) == p.own_cid());
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

    /// Handles buffered protected records once the keys for them exist.
    fn replay_early_records(&mut self, now: Instant, on_data: &mut DataSink<'_>) {
        if !self.version.record12().is_some_and(RecordLayer::has_keys) {
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
        let (content_type, plaintext, authenticated) = match header.epoch {
            0 => {
                // Over 2^14 bytes (RFC 5246 §6.2.1) and unauthenticated: dropped (RFC 6347 §4.1.2.7).
                if matches!(
                    header.content_type,
                    ContentType::ApplicationData | ContentType::ReturnRoutabilityCheck
                ) || body.len() > MAX_PLAINTEXT
                {
                    self.stats.records_dropped += 1;
                    return None;
                }
                (header.content_type, 0..body.len(), None)
            }
            1 => {
                let own_cid = self.path.as_deref().map_or(&[][..], |p| p.own_cid());
                let opened = match self.version.record12_mut() {
                    Some(record) => record.open(&header, own_cid, body),
                    None => Err(Unopened::NoKeys),
                };
                match opened {
                    Ok(opened) => (opened.content_type, opened.plaintext, Some(opened.newest)),
                    Err(Unopened::NoKeys) => {
                        // Keys not derived yet: a Finished reordered ahead of its ClientKeyExchange.
                        // Keep a few such records (RFC 6347 §4.1 lets us) instead of waiting a timeout.
                        let kept = self.hs.as_mut().is_some_and(|hs| {
                            let bytes: usize = hs.early_records.iter().map(|(_, b)| b.len()).sum();
                            let room = hs.early_records.len() < MAX_EARLY_RECORDS
                                && bytes + body.len() <= MAX_EARLY_RECORD_BYTES;
                            if room {
                                hs.early_records.push((header, body.to_vec()));
                            }
                            room
                        });
                        if !kept {
                            self.stats.records_dropped += 1;
                        }
                        return None;
                    }
                    Err(Unopened::Replayed) => {
                        self.stats.records_dropped += 1;
                        return None;
                    }
                    Err(Unopened::Unauthenticated) => {
                        self.stats.records_dropped += 1;
                        if matches!(header.content_type, ContentType::Handshake | ContentType::Tls12Cid) {
                            self.on_unauthenticated_handshake_record(now);
                        }
                        return None;
                    }
                    Err(Unopened::BadInnerType { newest }) => {
                        self.stats.records_dropped += 1;
                        return Some(newest);
                    }
                    Err(Unopened::Overflow) => {
                        // The peer itself sent a record over 2^14 bytes: not damage, which
                        // RFC 6347 §4.1.2.7 lets us drop, but a broken protocol (RFC 5246
                        // §6.2.1, record_overflow of §7.2.2).
                        self.stats.records_dropped += 1;
                        self.fail(Abort::alert(AlertDescription::RecordOverflow));
                        return None;
                    }
                }
            }
            _ => {
                self.stats.records_dropped += 1;
                return None;
            }
        };
        let plaintext = &body[plaintext];
        if let Some(hs) = self.hs.as_mut() {
            if header.epoch == 0 {
                hs.record_seq_in = header.seq;
            }
            if hs.note_peer_record(header.epoch, header.seq) {
                let answer_begun = hs.reassembler.holds_fragments()
                    || hs
                        .peer_prev_flight_last
                        .is_some_and(|last| hs.reassembler.next_seq() > last.wrapping_add(1));
                hs.flight.timer.on_peer_records_skipped(answer_begun);
            }
        }
        match content_type {
            ContentType::Handshake => {
                // Handshake bodies are copied out by the reassembler, so the borrow ends here.
                let copy = plaintext.to_vec();
                self.handle_handshake_record(now, header.epoch, &copy);
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
                if self.phase != Phase::Established {
                    match self.hs.as_mut() {
                        Some(hs) if authenticated.is_some() && hs.early_data.len() < MAX_EARLY_RECORDS => {
                            hs.early_data.push(plaintext.to_vec());
                        }
                        _ => self.stats.records_dropped += 1,
                    }
                    return authenticated;
                }
                // The peer's first protected record shows it has our last flight.
                if self.hs.as_ref().is_some_and(|hs| hs.timers.is_set(HandshakeTimer::Retain)) {
                    self.hs = None;
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
        if self.phase != Phase::Handshaking || self.version.record12().is_some_and(RecordLayer::read_any) {
            return;
        }
        let is_server = self.server_config().is_some();
        let Some(hs) = self.hs.as_mut() else { return };
        match hs.auth_failure {
            None => hs.auth_failure = Some(AuthFailure { at: now, datagram, peer_resent: false }),
            Some(first)
                if first.peer_resent && datagram != first.datagram && now >= first.at + initial / 2 =>
            {
                // With a PSK, the keys come from it alone: the peer holds another key for the
                // identity.
                let abort = match (is_server, hs.psk_identity.is_empty()) {
                    (true, false) => Abort::psk_mismatch(&hs.psk_identity),
                    _ => Abort::alert(AlertDescription::DecryptError),
                };
                self.fail(abort);
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
        if self.phase == Phase::Established && epoch == 0 {
            // Unauthenticated: cannot end an established session.
            self.stats.records_dropped += 1;
            return;
        }
        if desc == AlertDescription::CloseNotify {
            // RFC 5246 §7.2.1: answer with a close_notify of our own.
            if self.phase == Phase::Established {
                self.send_alert(AlertLevel::Warning, AlertDescription::CloseNotify);
            }
            self.end(Phase::Closed);
            self.push_event(Event::Closed);
        } else if level == AlertLevel::Fatal {
            let error = self.fatal_alert_error(desc, self.waits_for_server_hello(), false);
            self.end(Phase::Failed);
            self.version.discard_keys12();
            self.push_event(Event::Failed(error));
        }
        // Other warnings (no_renegotiation, ...) change nothing.
    }

    /// What a fatal alert `desc` from the peer means; `before_server_hello`: a client got it in
    /// answer to its ClientHello, `dtls13` in a 1.3 handshake.
    fn fatal_alert_error(&self, desc: AlertDescription, before_server_hello: bool, dtls13: bool) -> Error {
        // A server that could not verify our PSK's binder (1.3) or Finished (1.2).
        let psk = self.client_config().and_then(|c| c.psk.as_ref());
        if let (Some(psk), AlertDescription::DecryptError, Phase::Handshaking) = (psk, desc, self.phase) {
            let identity = String::from_utf8_lossy(&psk.identity).into_owned();
            return Error::PskMismatch { identity, alert: desc, sent: false };
        }
        let Some(config) = self.client_config().filter(|_| before_server_hello) else {
            return Error::AlertReceived(desc);
        };
        // A server refusing for want of a session slot answers the ClientHello this way
        // (`WhenFull::Refuse`); say so, with the alert, as others may mean something else.
        if desc == AlertDescription::InternalError {
            return Error::NoSessionSlot { alert: desc };
        }
        if desc == AlertDescription::ProtocolVersion {
            return Error::VersionRefused { alert: desc, offered: config.versions };
        }
        // A 1.3 server also judges the PSK binders (decrypt_error, RFC 8446 §4.2.11) and the
        // hello's form (illegal_parameter) before any ServerHello: only a refusal of what we
        // offered is about our suites and credentials.
        let refusal = [
            AlertDescription::HandshakeFailure,
            AlertDescription::InsufficientSecurity,
            AlertDescription::UnknownPskIdentity,
        ];
        if dtls13 && !refusal.contains(&desc) {
            return Error::AlertReceived(desc);
        }
        // Refused before any ServerHello: what we offered is all the server judged.
        let mut offered_suites: Vec<u16> = Vec::new();
        if config.versions != crate::config::Versions::Dtls12 {
            offered_suites.extend(Connection::suites13(config).iter().map(|s| s.id()));
        }
        if config.versions != crate::config::Versions::Dtls13 {
            offered_suites.extend(config.offered_suites().map(|s| s.id()));
        }
        // A 1.3 server finding no group of ours refuses with handshake_failure (RFC 8446
        // §4.1.1): name the groups too.
        let offered_groups = if config.versions != crate::config::Versions::Dtls12
            && desc == AlertDescription::HandshakeFailure
        {
            config.groups.iter().map(|g| g.code()).collect()
        } else {
            Vec::new()
        };
        Error::HelloRefused { alert: desc, offered_suites, offered_groups }
    }

    fn handle_handshake_record(&mut self, now: Instant, epoch: u16, body: &[u8]) {
        for fragment in parse_fragments(body) {
            let Ok((header, data)) = fragment else {
                self.stats.records_dropped += 1;
                return;
            };
            if matches!(self.phase, Phase::Failed | Phase::Closed) {
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
        if self.phase == Phase::Established {
            let renegotiation = match *self.config {
                RoleConfig::Client(_) => h.msg_type == HandshakeType::HelloRequest,
                RoleConfig::Server(_) => h.msg_type == HandshakeType::ClientHello,
            };
            if renegotiation && epoch == 1 {
                // RFC 5746 §4.2/§4.4: refuse renegotiation with a warning; the session goes on.
                self.send_alert(AlertLevel::Warning, AlertDescription::NoRenegotiation);
                return Ok(());
            }
        }
        if h.msg_type == HandshakeType::HelloVerifyRequest && self.waits_for_server_hello() {
            // Not part of the transcript, never fragmented in practice; handled statelessly.
            if epoch == 0 && whole {
                if let Some(mut hs) = self.hs.take() {
                    let result = self.client_on_hello_verify(now, &mut hs, h.message_seq, fragment.data);
                    self.hs = Some(hs);
                    return result;
                }
            }
            return Ok(());
        }
        // Finished must be protected; every message before it must not be.
        if (h.msg_type == HandshakeType::Finished) != (epoch == 1) {
            self.stats.records_dropped += 1;
            return Ok(());
        }
        let datagram = self.stats.datagrams_received;
        let Some(hs) = self.hs.as_mut() else { return Ok(()) };
        match hs.reassembler.insert(fragment) {
            Insert::Old => {
                let previous_flight = Some(h.message_seq) == hs.peer_prev_flight_last;
                hs.count_peer_retransmission(datagram);
                self.note_peer_resent();
                if previous_flight {
                    if let Some(mut hs) = self.hs.take() {
                        self.on_peer_retransmission(now, &mut hs);
                        self.hs = Some(hs);
                    }
                }
                Ok(())
            }
            Insert::Dropped => {
                self.stats.records_dropped += 1;
                Ok(())
            }
            Insert::Accepted => {
                hs.flight.timer.on_answer_datagram();
                loop {
                    let Some(hs) = self.hs.as_mut() else { return Ok(()) };
                    let Some((msg_type, seq, body)) = hs.reassembler.pop() else { return Ok(()) };
                    if self.phase != Phase::Handshaking {
                        return Ok(());
                    }
                    self.on_handshake_message(now, msg_type, seq, &body)?;
                }
            }
        }
    }

    /// One whole handshake message, in order: handed to the step the handshake is at.
    fn on_handshake_message(
        &mut self,
        now: Instant,
        msg_type: HandshakeType,
        seq: u16,
        body: &[u8],
    ) -> Result<(), Abort> {
        let Some(mut hs) = self.hs.take() else { return Ok(()) };
        let result = match hs.step.take() {
            Some(Step::Client(step)) => self.client_on_message(now, &mut hs, step, msg_type, seq, body),
            Some(Step::Server(step)) => self.server_on_message(now, &mut hs, step, msg_type, seq, body),
            Some(Step::Complete) => Ok(Step::Complete),
            None => Err(Abort::unexpected()),
        };
        match result {
            Ok(next) => {
                let done = matches!(next, Step::Complete);
                hs.step = Some(next);
                // The side that did not send the last flight frees its handshake state now.
                if !done || hs.timers.is_set(HandshakeTimer::Retain) {
                    self.hs = Some(hs);
                }
                Ok(())
            }
            Err(abort) => {
                self.hs = Some(hs);
                Err(abort)
            }
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

    /// Whether datagrams wait for `poll_transmit`.
    pub(crate) fn has_output(&self) -> bool {
        self.queued.as_ref().is_some_and(|q| !q.outgoing.is_empty())
            || self.path.as_deref().is_some_and(PathState::has_direct)
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let path = self.path.as_deref().and_then(PathState::deadline);
        let handshake = self.hs.as_ref().and_then(|hs| hs.timers.next());
        [path, handshake, self.poll_timeout13()].into_iter().flatten().min()
    }

    /// The deadline from `poll_timeout` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.path.as_deref().and_then(PathState::deadline).is_some_and(|d| now >= d) {
            self.handle_path_timeout(now);
        }
        if self.version.is13() {
            self.handle_timeout13(now);
            return;
        }
        let Some(mut hs) = self.hs.take() else { return };
        while let Some(timer) = hs.timers.expire(now) {
            match timer {
                HandshakeTimer::GiveUp => {
                    let retransmissions = hs.flight.resent;
                    self.hs = Some(hs);
                    self.fail(Abort { alert: None, error: Error::HandshakeTimeout { retransmissions } });
                    return;
                }
                // The last flight was kept long enough.
                HandshakeTimer::Retain => return,
                HandshakeTimer::Retransmit => self.retransmit_flight(now, &mut hs, Resend::Timer),
            }
        }
        self.hs = Some(hs);
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

    /// Queues `event` for the endpoint (servers only: a client's would never be read).
    fn push_endpoint_event(&mut self, event: EndpointEvent) {
        if matches!(*self.config, RoleConfig::Server(_)) {
            self.queued.get_or_insert_with(Box::default).endpoint.push_back(event);
        }
    }

    /// The next event for the endpoint.
    pub(crate) fn poll_endpoint_event(&mut self) -> Option<EndpointEvent> {
        let e = self.queued.as_mut()?.endpoint.pop_front();
        self.free_empty_queues();
        e
    }

    fn push_datagram(&mut self, datagram: Vec<u8>) {
        self.queued.get_or_insert_with(Box::default).outgoing.push_back(datagram);
    }

    fn free_empty_queues(&mut self) {
        if self
            .queued
            .as_ref()
            .is_some_and(|q| q.events.is_empty() && q.outgoing.is_empty() && q.endpoint.is_empty())
        {
            self.queued = None;
        }
    }

    // ---------------------------------------------------------------- application data

    /// Most application data in one record: what fits the MTU, and never more than 2^14
    /// bytes (RFC 6347 §4.1, RFC 5246 §6.2.1) however large the MTU.
    fn max_payload(&self) -> usize {
        let overhead = self.version.record12().map_or(0, |r| r.protected_len(self.peer_cid(), 0));
        self.mtu().saturating_sub(overhead).clamp(1, MAX_PLAINTEXT)
    }

    fn check_can_send(&self) -> Result<(), Error> {
        match self.phase {
            Phase::Established => Ok(()),
            Phase::Handshaking => Err(Error::NotEstablished),
            Phase::Closed | Phase::Failed => Err(Error::Closed),
        }
    }

    /// Queues `data` as application data, in several records when it exceeds one datagram.
    /// A DTLS 1.3 server that accepted 0-RTT data holds what it sends before the client's
    /// Finished (an answer to that data) and sends it once the handshake completes.
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        if self.phase == Phase::Handshaking && self.hold_for_handshake13(data) {
            return Ok(());
        }
        self.check_can_send()?;
        if self.version.is13() {
            return self.send13(data);
        }
        let max = self.max_payload();
        let mut chunks: Vec<&[u8]> = data.chunks(max).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let cid = self.path.as_deref().map_or(&[][..], |p| p.peer_cid());
            let record = self.version.record12_mut().ok_or(Error::NotEstablished)?;
            let out = record.seal(ContentType::ApplicationData, cid, &[chunk])?;
            self.stats.app_records_sent += 1;
            self.push_datagram(out);
        }
        Ok(())
    }

    /// Writes one datagram holding one application record with `data` into `out`; returns its
    /// length. No heap allocation. Refused while datagrams wait for `poll_transmit` (`send`
    /// queues behind them), so records leave in the order they were sent. `data` must fit the
    /// MTU and a record: more than 2^14 bytes (RFC 6347 §4.1, RFC 9147 §4) is
    /// [`Error::RecordTooLarge`], whatever the MTU; `send` splits it.
    pub fn seal_into(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        self.check_can_send()?;
        if self.path.as_deref().is_some_and(|p| p.probe().is_some()) {
            // RFC 9853: while a new address is checked, datagrams go to both (`send` does that).
            return Err(Error::NotNegotiated("seal_into while the peer's new address is checked; use send"));
        }
        if self.has_output() {
            // A datagram sealed here leaves at once: it would overtake what waits in the queue
            // (an answer to early data released at the handshake's end, a split record).
            return Err(Error::NotNegotiated("seal_into while datagrams wait in the queue; use send"));
        }
        if self.version.is13() {
            return self.seal_into13(data, out);
        }
        let record = self.version.record12().ok_or(Error::NotEstablished)?;
        let len = record.protected_len(self.peer_cid(), data.len());
        if len > self.mtu() {
            return Err(Error::TooLarge { len: data.len(), mtu: self.mtu() });
        }
        if data.len() > MAX_PLAINTEXT {
            return Err(Error::RecordTooLarge { len: data.len(), max: MAX_PLAINTEXT });
        }
        if out.len() < len {
            return Err(Error::BufferTooSmall { needed: len });
        }
        let cid = self.path.as_deref().map_or(&[][..], |p| p.peer_cid());
        let record = self.version.record12_mut().ok_or(Error::NotEstablished)?;
        record.seal_into(ContentType::ApplicationData, cid, data, &mut out[..len])?;
        self.stats.app_records_sent += 1;
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
        Ok(len)
    }

    /// DTLS 1.3: updates our sending keys (RFC 9147 §8). A KeyUpdate goes out in the current
    /// epoch and is resent until the peer acknowledges it; our records use the next keys from
    /// then on. With `request_peer`, the peer is asked to update its own too. Refused for a
    /// DTLS 1.2 session (which has no key update) and while another update awaits its
    /// acknowledgement.
    pub fn update_keys(&mut self, now: Instant, request_peer: bool) -> Result<(), Error> {
        if !self.version.is13() {
            return Err(Error::NotNegotiated("key updates are DTLS 1.3's"));
        }
        self.update_keys13(now, request_peer)
    }

    /// DTLS 1.3 client: `data` as 0-RTT early data (RFC 8446 §4.2.10), right after the
    /// ClientHello, when [`ClientConfig::early_data`] is on and the resumed session's ticket
    /// allows it: `Ok(true)`. Otherwise (no such ticket, too much data, or the server's answer
    /// already came) it is kept and sent once the handshake is over: `Ok(false)`. Early data the
    /// server refuses is sent again after the handshake, so it arrives once either way; the
    /// summary's `early_data` says which. Early data can be replayed to a server by an attacker
    /// (the server takes each ClientHello's once): send only what is safe to act on twice.
    pub fn send_early_data(&mut self, data: &[u8]) -> Result<bool, Error> {
        if self.phase == Phase::Established {
            self.send(data)?;
            return Ok(false);
        }
        if !self.version.is13() || self.client_config().is_none() || self.phase != Phase::Handshaking {
            return Err(Error::NotEstablished);
        }
        self.send_early13(data)
    }

    /// Sends close_notify and closes the session.
    pub fn close(&mut self) {
        if self.version.is13() && !matches!(self.phase, Phase::Closed | Phase::Failed) {
            self.close13();
            return;
        }
        match self.phase {
            Phase::Closed | Phase::Failed => {}
            _ => {
                self.send_alert(AlertLevel::Warning, AlertDescription::CloseNotify);
                self.end(Phase::Closed);
            }
        }
    }

    // ---------------------------------------------------------------- accessors

    /// Whether the handshake completed and the session is open.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established
    }

    /// Whether the session ended (closed or failed).
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed | Phase::Failed)
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Server: `n` datagrams before the one that completed the ClientHello this session started
    /// from carried fragments of it (their bytes came with the hello): received too.
    pub(crate) fn count_hello_datagrams(&mut self, n: u64) {
        self.stats.datagrams_received += n;
    }

    /// The agreed suite, once known.
    pub fn suite(&self) -> Option<CipherSuite> {
        self.suite
    }

    /// Client or server.
    pub fn role(&self) -> Role {
        match *self.config {
            RoleConfig::Client(_) => Role::Client,
            RoleConfig::Server(_) => Role::Server,
        }
    }

    /// Whether handshake state is still held (during the handshake, and for the side that sent
    /// the last flight until the peer shows it received it).
    pub fn holds_handshake_state(&self) -> bool {
        self.hs.is_some() || self.version.v13().is_some_and(|v| v.state.hs.is_some())
    }

    /// Server: whether a ClientHello with this random and message_seq is a copy of the one this
    /// session started from (or of an earlier one of the same client, answered by a
    /// HelloVerifyRequest). A higher message_seq is the client starting over.
    pub(crate) fn started_from(&self, random: &[u8; 32], message_seq: u16) -> bool {
        self.hello_id == hello_id(random) && message_seq <= self.hello_seq
    }

    /// Counters of session mobility (all zero without it).
    pub fn mobility_stats(&self) -> MobilityStats {
        self.path.as_ref().map(|p| p.stats()).unwrap_or_default()
    }

    /// Server: the session's own socket, once `Endpoint::set_local` (or a confirmed
    /// `Endpoint::move_to`) gave it one.
    pub fn local(&self) -> Option<SocketAddr> {
        self.path.as_ref().and_then(|p| p.local())
    }

    /// The Connection ID the peer puts in records to us, when one was negotiated (empty: none).
    pub fn connection_id(&self) -> Option<&[u8]> {
        self.path.as_ref().filter(|p| p.cid_negotiated).map(|p| p.own_cid())
    }

    /// Reports the handshake's completion with what it agreed.
    pub(crate) fn push_connected(&mut self, mut summary: HandshakeSummary) {
        summary.mobility = self.negotiated_mobility();
        self.push_event(Event::Connected(summary));
    }

    /// Which of the Connection ID (RFC 9146), `rrc` (RFC 9853) and `port_move` were negotiated.
    pub fn negotiated_mobility(&self) -> NegotiatedMobility {
        self.path.as_ref().map_or(NegotiatedMobility::default(), |p| NegotiatedMobility {
            connection_id: p.cid_negotiated,
            return_routability: p.rrc,
            port_move: p.port_move,
        })
    }

    pub(crate) fn fail_superseded(&mut self) {
        self.end(Phase::Failed);
        self.version.discard_keys12();
        self.push_event(Event::Failed(Error::Superseded));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Versions;
    use crate::fuzzing::{client_addr, established_pair, server_addr};
    use crate::handshake::{ClientHello, HandshakeHeader};
    use crate::record::{record_len, HEADER_LEN};

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
        let protect = from.version.record12().unwrap().protect(&[]).unwrap();
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
        let mut rec = protected_message(
            sconn,
            HandshakeType::HelloRequest,
            &[],
            sconn.version.record12().unwrap().peek_write_seq() + 5,
        );
        client.handle_datagram(now, server_addr(), &mut rec);
        assert_warning_alert(&client.poll_transmit(now).expect("no_renegotiation alert").payload);
        assert!(client.is_established());
        assert_eq!(client.poll_event(), None);

        // Client starts a renegotiating ClientHello: the server refuses the same way.
        let mut body = Vec::new();
        ClientHello::encode(&mut body, &[1; 32], &[], &[0xC0A8], true);
        let mut rec = protected_message(
            &client,
            HandshakeType::ClientHello,
            &body,
            client.version.record12().unwrap().peek_write_seq() + 5,
        );
        server.handle_datagram(now, server_addr(), client_addr(), &mut rec);
        assert_warning_alert(&server.poll_transmit(now).expect("no_renegotiation alert").payload);
        assert!(server.connection(h).unwrap().is_established());

        // Data still flows both ways.
        let mut buf = [0u8; 128];
        let n = client.seal_into(b"after", &mut buf).unwrap();
        let mut got = Vec::new();
        let incoming = server.incoming(&mut buf[..n]);
        server
            .open_in_place(now, server_addr(), client_addr(), incoming, &mut |_, d| got.extend_from_slice(d));
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

    /// A record the peer protected with over 2^14 bytes breaks RFC 5246 §6.2.1: the session
    /// ends with record_overflow (§7.2.2) and the record counts as dropped. Unprotected, it is
    /// dropped alone (RFC 6347 §4.1.2.7).
    #[test]
    fn a_record_over_2_14_bytes_is_refused_as_the_rfc_says() {
        let (mut client, server, _) = established_pair();
        let now = Instant::from_millis(5);
        let mut plain = vec![0u8; HEADER_LEN + MAX_PLAINTEXT + 1];
        write_record(&mut plain, ContentType::Handshake, 0, 60, None, &[&[0; MAX_PLAINTEXT + 1]]);
        client.handle_datagram(now, server_addr(), &mut plain);
        assert!(client.is_established());
        assert_eq!(client.poll_event(), None);
        assert_eq!(client.stats().records_dropped, 1);

        let sconn = server.connection(server.handle_for(client_addr()).unwrap()).unwrap();
        let layer = sconn.version.record12().unwrap();
        let protect = layer.protect(&[]).unwrap();
        let data = vec![0x61; MAX_PLAINTEXT + 1];
        let mut rec = vec![0u8; record_len(Some(protect), data.len())];
        let seq = layer.peek_write_seq() + 5;
        write_record(&mut rec, ContentType::ApplicationData, 1, seq, Some(protect), &[&data]);
        client.handle_datagram(now, server_addr(), &mut rec);
        let overflow = Error::AlertSent(AlertDescription::RecordOverflow);
        assert_eq!(client.poll_event(), Some(Event::Failed(overflow)));
        assert_eq!(client.stats().records_dropped, 2);
        let alert = client.poll_transmit(now).expect("the fatal alert").payload;
        assert_eq!((alert[0], &alert[3..5]), (ContentType::Alert as u8, &[0, 1][..]));
    }

    /// A client and a server endpoint of `versions` with PSKs and `mtu`, handshake in lock step.
    fn established_at_mtu(versions: Versions, mtu: usize) -> (Connection, crate::Endpoint) {
        let (id, key) = (b"id".to_vec(), b"key".to_vec());
        let c = ClientConfig { versions, mtu, ..ClientConfig::psk(id.clone(), key.clone()) };
        let s = ServerConfig { versions, mtu, ..ServerConfig::psk(id, key) };
        let now = Instant::from_millis(1);
        let mut client = Connection::client(Arc::new(c), now, server_addr(), [1; 32]);
        let mut server = crate::Endpoint::new(Arc::new(s), [2; 32]).expect("a valid server configuration");
        for _ in 0..10 {
            while let Some(t) = client.poll_transmit(now) {
                server.handle_datagram(now, server_addr(), client_addr(), &mut t.payload.clone());
            }
            while let Some(t) = server.poll_transmit(now) {
                client.handle_datagram(now, server_addr(), &mut t.payload.clone());
            }
            while server.poll_event().is_some() {}
            while client.poll_event().is_some() {}
        }
        assert!(client.is_established(), "{versions:?}");
        (client, server)
    }

    /// `seal_into` never writes a record over 2^14 bytes, however large the MTU.
    #[test]
    fn seal_into_refuses_more_than_2_14_bytes_at_any_mtu() {
        for versions in [Versions::Dtls12, Versions::Dtls13] {
            let (mut client, _) = established_at_mtu(versions, 65_507);
            let mut out = vec![0u8; 65_507];
            assert!(client.seal_into(&[7; MAX_PLAINTEXT], &mut out).is_ok(), "{versions:?}");
            let refused = client.seal_into(&[7; MAX_PLAINTEXT + 1], &mut out);
            assert_eq!(refused, Err(Error::RecordTooLarge { len: MAX_PLAINTEXT + 1, max: MAX_PLAINTEXT }));
        }
    }

    #[test]
    fn bad_finished_fails_with_decrypt_error() {
        let ccfg =
            ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(b"id".to_vec(), b"key".to_vec()) };
        let scfg =
            ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk(b"id".to_vec(), b"key".to_vec()) };
        let (ccfg, scfg) = (Arc::new(ccfg), Arc::new(scfg));
        let now = Instant::from_millis(1);
        let mut client = Connection::client(ccfg, now, server_addr(), [1; 32]);
        let mut server = crate::endpoint::Endpoint::new(scfg, [2; 32]).expect("a valid server configuration");
        let mut server_failed = None;
        for _ in 0..4 {
            while let Some(t) = client.poll_transmit(now) {
                let mut d = t.payload;
                if client.hs.as_ref().is_some_and(|hs| {
                    matches!(hs.step, Some(Step::Client(ClientStep::ExpectServerFinished(_))))
                }) {
                    // Flight 5: keep ClientKeyExchange and ChangeCipherSpec, replace Finished by
                    // one with wrong verify_data under the right keys.
                    let mut forged = Vec::new();
                    for rec in crate::record::Records::new(&d) {
                        let (h, range) = rec.unwrap();
                        if h.epoch == 0 {
                            forged.extend_from_slice(&d[range.start - HEADER_LEN..range.end]);
                        } else {
                            let seq = client.version.record12().unwrap().peek_write_seq() + 1;
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
        // The client cannot tell an altered Finished from another key: it says both.
        let mismatch =
            Error::PskMismatch { identity: "id".into(), alert: AlertDescription::DecryptError, sent: false };
        assert_eq!(client.poll_event(), Some(Event::Failed(mismatch)));
    }
}
