//! DTLS 1.2 over tokio UDP sockets.
//!
//! The driver owns what a sans-IO engine must not: the socket, the clock (the process's monotonic
//! clock mapped onto [`fastshake_core::Instant`] from a base taken at start) and the OS randomness
//! that seeds each engine. Handshakes, timers, records and alerts all happen in `fastshake_dtls`.
//!
//! Each side runs as one tokio task that talks to its owner over channels: [`DtlsClient`] wraps one
//! [`Connection`], [`DtlsServer`] wraps one [`Endpoint`] serving many clients. Inside a task every
//! await that can be interrupted (socket receive, timer, command) is cancel-safe, and datagrams are
//! flushed outside `select!`, so no datagram is lost to a cancelled future.
//!
//! Moving clients (seed 001): a server gives its sessions sockets as its [`MobilityMode`] says
//! (see [`crate::mobility`]) and reports moves ([`ServerEvent::PathChanged`]). A client's socket
//! is never connected, so it follows the server to a session port and sends from whatever address
//! the routing table gives it; a send that finds no route is held and tried again. A standard
//! client can instead set up a new session when the server goes silent
//! ([`ClientOptions::app_timeout`]), resending what went unanswered.
#![forbid(unsafe_code)]

use crate::cookie_schedule::{CookieRotation, CookieSchedule};
use crate::fleet::{CidOwner, Fleet, FrameKind, ReplayWindows};
use crate::icmp::{Refusal, RefusalHook, RefusalsInARow};
use crate::mobility::{Incoming, SessionSockets, SocketAction};
use crate::session_store::{MemoryStore, SessionStore};
use crate::udp::{BatchIo, DatagramSocket, PortSharing, SendQueue};
use crate::Clock;
use fastshake_core::{Instant, Transmit};
use fastshake_dtls::{
    CachedServer, ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, EndpointStats,
    Error as DtlsError, Event, HandshakeSummary, Resumption, ServerConfig, SharedClientCertCache, Stats,
    TicketKey, TicketKeys, WhenFull,
};
use rand_core::{OsRng, RngCore};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use crate::mobility::MobilityMode;

/// Largest UDP payload we accept; bigger datagrams cannot arrive over UDP/IPv4 anyway.
const RECEIVE_BUFFER: usize = 65_536;

/// How often a server replaces its HelloVerifyRequest cookie key. The engine keeps the previous
/// key too, so a handshake in progress survives one rotation.
pub const DEFAULT_COOKIE_ROTATION: Duration = Duration::from_secs(120);

/// How often a server replaces its session-ticket key (RFC 5077). Tickets sealed under the
/// previous key still open, so a ticket opens for at least one rotation period: this equals the
/// default ticket lifetime of [`TicketKeys::new`] (2 h), so a ticket lasts as long as its hint says.
pub const DEFAULT_TICKET_ROTATION: Duration = Duration::from_secs(2 * 3600);

/// `config` with the driver's wall clock, unless the caller pinned one.
fn client_config_with_clock(config: Arc<ClientConfig>, clock: &Clock) -> Arc<ClientConfig> {
    if config.wall_clock.is_some() {
        return config;
    }
    Arc::new(ClientConfig { wall_clock: Some(clock.wall_clock()), ..(*config).clone() })
}

/// `config` with the driver's wall clock, unless the caller pinned one.
fn server_config_with_clock(config: Arc<ServerConfig>, clock: &Clock) -> Arc<ServerConfig> {
    if config.wall_clock.is_some() {
        return config;
    }
    Arc::new(ServerConfig { wall_clock: Some(clock.wall_clock()), ..(*config).clone() })
}

/// A fresh 32-byte seed from the operating system, for one engine's RNG.
pub fn os_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    OsRng.fill_bytes(&mut seed);
    seed
}

/// A fresh cookie key from the operating system.
fn os_cookie_key() -> [u8; 16] {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    key
}

/// A fresh ticket key from the operating system, with a random id.
pub fn os_ticket_key() -> TicketKey {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    TicketKey::new(OsRng.next_u32(), key)
}

/// Ticket keys for a server: one fresh key from the operating system, no previous key.
pub fn os_ticket_keys() -> TicketKeys {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    TicketKeys::new(OsRng.next_u32(), key)
}

/// Datagrams and bytes each way for one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Datagrams this side sent.
    pub datagrams_sent: u64,
    /// UDP payload bytes this side sent.
    pub bytes_sent: u64,
    /// Datagrams this side received.
    pub datagrams_received: u64,
    /// UDP payload bytes this side received.
    pub bytes_received: u64,
}

impl From<&Stats> for Traffic {
    fn from(stats: &Stats) -> Self {
        Traffic {
            datagrams_sent: stats.datagrams_sent,
            bytes_sent: stats.bytes_sent,
            datagrams_received: stats.datagrams_received,
            bytes_received: stats.bytes_received,
        }
    }
}

impl Traffic {
    /// Both totals added up.
    pub fn plus(&self, other: &Traffic) -> Traffic {
        Traffic {
            datagrams_sent: self.datagrams_sent + other.datagrams_sent,
            bytes_sent: self.bytes_sent + other.bytes_sent,
            datagrams_received: self.datagrams_received + other.datagrams_received,
            bytes_received: self.bytes_received + other.bytes_received,
        }
    }
}

/// How a handshake went as the summary line says it: `full (not resumed)`, `resumed by session
/// ID` or `resumed by ticket`.
pub fn resumption_text(summary: &HandshakeSummary) -> &'static str {
    match summary.resumption {
        Some(Resumption::SessionId) => "resumed by session ID",
        Some(Resumption::Ticket) => "resumed by ticket",
        None if summary.resumed => "resumed",
        None => "full (not resumed)",
    }
}

/// What a handshake took from a cache, as the summary line says it ("" when nothing).
pub fn cache_text(summary: &HandshakeSummary) -> String {
    let used = &summary.from_cache;
    let parts: Vec<&str> = [
        (used.server_certificate, "server certificate from cache (RFC 7924)"),
        (used.certificate_request, "certificate request from cache (RFC 7924)"),
        (used.client_certificate, "client certificate from cache (ticket)"),
    ]
    .into_iter()
    .filter_map(|(on, text)| on.then_some(text))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(", {}", parts.join(", "))
    }
}

/// The one-line handshake summary both `fastshake server` and `fastshake client` print.
pub fn summary_line(summary: &HandshakeSummary) -> String {
    // The smoothed round trip, when an exchange of flights (or a cached estimate) gave one.
    let rtt = summary.rtt.filter(|r| r.samples > 0).map_or(String::new(), |r| {
        format!(
            "; RTT {:.2} ms (±{:.2} ms, {} sample(s))",
            r.smoothed.as_secs_f64() * 1e3,
            r.variation.as_secs_f64() * 1e3,
            r.samples
        )
    });
    format!(
        "handshake done: {}, {}, {}{}, {:.2} ms, {} flight(s) sent + {} resent, {} resent by the peer; sent {} datagrams / {} B, received {} datagrams / {} B{rtt}",
        summary.suite.iana_name(),
        resumption_text(summary),
        if summary.extended_master_secret {
            "with extended master secret"
        } else {
            "without extended master secret"
        },
        cache_text(summary),
        summary.duration.as_secs_f64() * 1e3,
        summary.flights_sent,
        summary.retransmissions,
        summary.peer_retransmissions,
        summary.datagrams_sent,
        summary.bytes_sent,
        summary.datagrams_received,
        summary.bytes_received,
    )
}

/// Which way a traced datagram went, seen from the side that traces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// This side sent it.
    Sent,
    /// This side received it (traced before the engine decrypts it in place).
    Received,
}

/// Called with every datagram a driver sends or receives, and the peer's address. For
/// demonstrations and debugging; keep it cheap.
pub type DatagramTrace = Arc<dyn Fn(Direction, SocketAddr, &[u8]) + Send + Sync>;

/// What can go wrong in a driver.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The socket failed (its error says how).
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Nothing listens at the server's address: the kernel reported an ICMP port unreachable
    /// for each of `in_a_row` flights of the handshake, with no answer between them.
    #[error("{refusal}, {in_a_row} times in a row ({:.1} s)", elapsed.as_secs_f64())]
    Refused {
        /// The last refusal.
        refusal: Refusal,
        /// Flights refused in a row.
        in_a_row: u32,
        /// Time from the first ClientHello to giving up.
        elapsed: Duration,
    },
    /// The handshake got no answer: the engine gave up after its retransmissions.
    #[error("no answer after {retransmissions} retransmissions ({:.1} s)", elapsed.as_secs_f64())]
    NoAnswer {
        /// Flights resent before giving up.
        retransmissions: u32,
        /// Time from the first ClientHello to giving up.
        elapsed: Duration,
    },
    /// The DTLS engine reported a failure (an alert sent or received, a protocol error, ...).
    #[error("{0}")]
    Dtls(DtlsError),
    /// The driver task ended before answering.
    #[error("the connection task has stopped")]
    TaskStopped,
}

impl DriverError {
    fn from_engine(error: DtlsError, elapsed: Duration) -> Self {
        match error {
            DtlsError::HandshakeTimeout { retransmissions } => {
                DriverError::NoAnswer { retransmissions, elapsed }
            }
            other => DriverError::Dtls(other),
        }
    }
}

/// How a standard client sets up a new session when the server has gone silent (see
/// [`ClientOptions::app_timeout`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reconnect {
    /// A full handshake.
    Full,
    /// An abbreviated handshake resuming the last session (a full one if there is no session to
    /// resume or the server declines).
    #[default]
    Resumed,
}

/// Options of a [`DtlsClient`] beyond the engine's [`ClientConfig`].
#[derive(Clone, Default)]
pub struct ClientOptions {
    /// Local address to bind; default: the loopback address for a loopback peer, else the
    /// unspecified address of the peer's family (so the routing table picks the interface for
    /// every datagram), port 0.
    pub bind: Option<SocketAddr>,
    /// Sees every datagram.
    pub trace: Option<DatagramTrace>,
    /// An earlier session to offer for resumption (by ticket if it has one, else by session ID);
    /// the server may decline, and the handshake is then a full one.
    pub session: Option<ClientSession>,
    /// Standard DTLS's answer to a handover (seed 001, Section II): when records were sent and no
    /// authenticated record came back for this long, the client sets up a new session (see
    /// `reconnect`) and sends again every record sent since the last record it received. Delivery
    /// is then at least once: the server may see a record twice across a reconnection. `None`
    /// (the default): never; the session waits for the server however long it is silent.
    pub app_timeout: Option<Duration>,
    /// How a reconnection after `app_timeout` (or [`DtlsClient::reconnect`]) is made. A
    /// reconnection handshake that gets no answer within the configuration's handshake timeout
    /// is started again; the session fails only on a fatal alert (or when closed).
    pub reconnect: Reconnect,
    /// What the client's cache holds for this server (RFC 7924 objects, client-certificate
    /// ticket), offered as `ClientConfig::cached_info` and `client_certificate_caching` allow.
    /// The handshake summary's `cache_update` says what to keep for next time.
    pub cached: Option<CachedServer>,
    /// Told at once when the first handshake's flight is refused (ICMP port unreachable: nothing
    /// listens at the server's address), before [`crate::icmp::REFUSALS_TO_GIVE_UP`] refusals in
    /// a row end it with [`DriverError::Refused`].
    pub on_refused: Option<RefusalHook>,
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("bind", &self.bind)
            .field("trace", &self.trace.is_some())
            .field("session", &self.session)
            .field("app_timeout", &self.app_timeout)
            .field("reconnect", &self.reconnect)
            .field("cached", &self.cached)
            .field("on_refused", &self.on_refused.is_some())
            .finish()
    }
}

/// What an established client connection reports.
#[derive(Debug)]
pub enum ClientEvent {
    /// One application record from the server.
    Data(Vec<u8>),
    /// The server closed the session with close_notify.
    Closed,
    /// The session failed (fatal alert, socket error). Nothing follows.
    Failed(DriverError),
    /// A record could not be sent; the session goes on.
    SendFailed(DtlsError),
    /// The session now sends to this server address: it followed the server to another port of
    /// the same IP (a session port of an IPC or TCS server).
    PathChanged(SocketAddr),
    /// A new session replaced the old one (after `app_timeout` or [`DtlsClient::reconnect`]), and
    /// the records sent since the last record received were sent again on it.
    Reconnected(Box<HandshakeSummary>),
}

enum ClientCommand {
    Send(Vec<u8>),
    Close,
    Reconnect { resume: bool },
    Rebind(SocketAddr, oneshot::Sender<io::Result<SocketAddr>>),
}

/// A DTLS client session on its own UDP socket, driven by a tokio task.
///
/// The socket is not connected: it sends from whatever address the routing table gives it (so a
/// client whose interface goes down goes on over another one) and takes datagrams from any port
/// of the server's IP (so it can follow the server to a session port); datagrams from any other
/// IP are dropped unread, and without `follow_server_port` so is any other port of the server.
///
/// Dropping it (or cancelling [`DtlsClient::connect`]) closes the command channel, and the task
/// then sends close_notify (or abandons the handshake) and ends by itself.
pub struct DtlsClient {
    local_addr: SocketAddr,
    remote: SocketAddr,
    summary: HandshakeSummary,
    reconnections: u32,
    path_changes: u32,
    commands: mpsc::UnboundedSender<ClientCommand>,
    events: mpsc::UnboundedReceiver<ClientEvent>,
    task: JoinHandle<Result<Traffic, DriverError>>,
}

impl DtlsClient {
    /// Connects to `remote` and completes the handshake (retransmitting as the engine decides).
    pub async fn connect(
        remote: SocketAddr,
        config: Arc<ClientConfig>,
        options: ClientOptions,
    ) -> Result<DtlsClient, DriverError> {
        let bind = options.bind.unwrap_or_else(|| default_bind(remote));
        let socket = UdpSocket::bind(bind).await?;
        crate::icmp::report_refusals(&socket, remote)?;
        let local_addr = socket.local_addr()?;
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        let (handshake_tx, handshake_rx) = oneshot::channel();
        let driver = ClientDriver::new(socket, remote, config, options, event_tx, handshake_tx);
        let task = tokio::spawn(driver.run(command_rx));
        match handshake_rx.await {
            Ok(Ok(summary)) => Ok(DtlsClient {
                local_addr,
                remote,
                summary,
                reconnections: 0,
                path_changes: 0,
                commands: command_tx,
                events: event_rx,
                task,
            }),
            Ok(Err(error)) => {
                task.abort();
                Err(error)
            }
            // The task ended without a verdict: its own result says why.
            Err(_) => match task.await {
                Ok(Err(error)) => Err(error),
                _ => Err(DriverError::TaskStopped),
            },
        }
    }

    /// The local socket address (it changes with [`DtlsClient::rebind`]).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's address as the session sends to it now: the address given to `connect`
    /// until the client follows the server to another port (see [`ClientEvent::PathChanged`];
    /// updated as [`DtlsClient::recv`] hands that event out).
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// How the latest handshake went (the first one's, until a [`ClientEvent::Reconnected`] is
    /// handed out by [`DtlsClient::recv`]).
    pub fn summary(&self) -> &HandshakeSummary {
        &self.summary
    }

    /// Reconnections handed out by [`DtlsClient::recv`] so far.
    pub fn reconnections(&self) -> u32 {
        self.reconnections
    }

    /// Server port changes ([`ClientEvent::PathChanged`]) handed out by [`DtlsClient::recv`] so far.
    pub fn path_changes(&self) -> u32 {
        self.path_changes
    }

    /// Queues `data` as one application record (the engine splits it if it exceeds the MTU).
    pub fn send(&self, data: Vec<u8>) -> Result<(), DriverError> {
        self.commands.send(ClientCommand::Send(data)).map_err(|_| DriverError::TaskStopped)
    }

    /// Replaces the session with a new one now (resuming the current session if `resume`), as
    /// `app_timeout` does; [`ClientEvent::Reconnected`] follows once the handshake is done, and the
    /// records sent since the last record received are sent again (with `app_timeout` set; without
    /// it nothing is kept to resend).
    pub fn reconnect(&self, resume: bool) -> Result<(), DriverError> {
        self.commands.send(ClientCommand::Reconnect { resume }).map_err(|_| DriverError::TaskStopped)
    }

    /// Moves the session to a new socket bound to `local` (port 0: any free port) and closes the
    /// old one: what a handover does to a client (a new address or port, as a NAT rebinding or a
    /// new interface gives). The engine does not learn of it; the server sees records from a new
    /// address. Returns the new local address.
    pub async fn rebind(&mut self, local: SocketAddr) -> Result<SocketAddr, DriverError> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(ClientCommand::Rebind(local, tx)).map_err(|_| DriverError::TaskStopped)?;
        let bound = rx.await.map_err(|_| DriverError::TaskStopped)??;
        self.local_addr = bound;
        Ok(bound)
    }

    /// The next event; `None` once the session has ended and every event was taken.
    pub async fn recv(&mut self) -> Option<ClientEvent> {
        let event = self.events.recv().await;
        match &event {
            Some(ClientEvent::PathChanged(remote)) => {
                self.remote = *remote;
                self.path_changes += 1;
            }
            Some(ClientEvent::Reconnected(summary)) => {
                self.summary = (**summary).clone();
                self.reconnections += 1;
            }
            _ => {}
        }
        event
    }

    /// Sends close_notify after everything queued, and returns the traffic totals of every
    /// session this client had (the reconnections' included).
    pub async fn close(self) -> Result<Traffic, DriverError> {
        // The task may already have ended (peer closed); its result is what counts.
        let _ = self.commands.send(ClientCommand::Close);
        match self.task.await {
            Ok(result) => result,
            Err(_) => Err(DriverError::TaskStopped),
        }
    }
}

fn default_bind(remote: SocketAddr) -> SocketAddr {
    let ip = match remote.ip() {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_loopback() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

fn is_icmp_error(error: &io::Error) -> bool {
    // An ICMP "port unreachable" from an earlier datagram surfaces on a later receive; it says
    // nothing the retransmission timer does not already handle.
    matches!(error.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset)
}

/// A send that failed because this host has, for now, no route or no address to send from: an
/// interface went down mid-handover. Worth trying again once the routing table has changed.
fn is_no_route_yet(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::AddrNotAvailable
            | io::ErrorKind::NetworkDown
    )
}

type HandshakeVerdict = Result<HandshakeSummary, DriverError>;

/// Most records a client keeps for resending after a reconnection; beyond it the oldest go (an
/// application sending this much into silence has lost them either way).
const MAX_UNANSWERED_RECORDS: usize = 1024;

/// Most datagrams a client holds while it has no route; beyond it the oldest go.
const MAX_HELD_DATAGRAMS: usize = 64;

/// How soon a datagram that found no route is tried again when the engine has no earlier timer.
const NO_ROUTE_RETRY: Duration = Duration::from_millis(200);

/// The client task: one engine connection at a time (a reconnection replaces it) on one socket.
struct ClientDriver {
    clock: Clock,
    config: Arc<ClientConfig>,
    socket: UdpSocket,
    /// Where handshakes go: the address given to `connect`.
    server: SocketAddr,
    trace: Option<DatagramTrace>,
    events: mpsc::UnboundedSender<ClientEvent>,
    connection: Connection,
    /// When the current handshake started.
    started: Instant,
    /// The first handshake's verdict goes here; later ones are events.
    handshake: Option<oneshot::Sender<HandshakeVerdict>>,
    /// A reconnection's handshake is under way: records wait in `unanswered`.
    reconnecting: bool,
    /// Whether that handshake resumes the last session.
    resuming: bool,
    app_timeout: Option<Duration>,
    resume_on_reconnect: bool,
    /// Records sent since the last record received (kept only with `app_timeout`).
    unanswered: VecDeque<Vec<u8>>,
    /// When the oldest of `unanswered` was sent.
    unanswered_since: Option<Instant>,
    /// The session to resume on a reconnection.
    last_session: Option<ClientSession>,
    /// The cache entry for this server, updated by each handshake (reconnections offer it).
    last_cached: Option<CachedServer>,
    /// Traffic of the sessions replaced by reconnections.
    earlier_traffic: Traffic,
    /// Datagrams that found no route, and when to try them again.
    held: VecDeque<Transmit>,
    retry_at: Option<Instant>,
    /// ICMP port unreachables for the first handshake's flights.
    refusals: RefusalsInARow,
    on_refused: Option<RefusalHook>,
}

impl ClientDriver {
    fn new(
        socket: UdpSocket,
        server: SocketAddr,
        config: Arc<ClientConfig>,
        options: ClientOptions,
        events: mpsc::UnboundedSender<ClientEvent>,
        handshake: oneshot::Sender<HandshakeVerdict>,
    ) -> ClientDriver {
        let clock = Clock::new();
        let started = clock.now();
        let config = client_config_with_clock(config, &clock);
        let ClientOptions { trace, session, app_timeout, reconnect, cached, on_refused, .. } = options;
        let connection = Connection::client_with_cache(
            Arc::clone(&config),
            started,
            server,
            os_seed(),
            session.clone(),
            cached.clone(),
        );
        ClientDriver {
            clock,
            config,
            socket,
            server,
            trace,
            events,
            connection,
            started,
            handshake: Some(handshake),
            reconnecting: false,
            resuming: false,
            app_timeout,
            resume_on_reconnect: reconnect == Reconnect::Resumed,
            unanswered: VecDeque::new(),
            unanswered_since: None,
            last_session: session,
            last_cached: cached,
            earlier_traffic: Traffic::default(),
            held: VecDeque::new(),
            retry_at: None,
            refusals: RefusalsInARow::default(),
            on_refused,
        }
    }

    /// Reports a fatal error to whoever waits (the handshake or the event stream) and returns a
    /// copy for the task result.
    fn fail(&mut self, error: DriverError) -> DriverError {
        fail_client(&self.events, &mut self.handshake, error)
    }

    /// Takes datagrams from the server's IP only; from its other ports only when the session may
    /// follow the server there.
    fn accepts_datagram_from(&self, from: SocketAddr) -> bool {
        let remote = self.connection.remote();
        from.ip() == remote.ip() && (from.port() == remote.port() || follows_server_port(&self.config))
    }

    fn traffic(&self) -> Traffic {
        self.earlier_traffic.plus(&Traffic::from(self.connection.stats()))
    }

    /// Sends one datagram; a datagram that finds no route is held for a later try.
    async fn send_datagram(&mut self, transmit: Transmit) -> Result<(), DriverError> {
        if let Some(trace) = &self.trace {
            trace(Direction::Sent, transmit.dst, &transmit.payload);
        }
        match self.socket.send_to(&transmit.payload, transmit.dst).await {
            Ok(_) => {
                self.refusals.sent();
                Ok(())
            }
            Err(error) if is_icmp_error(&error) => Ok(()),
            Err(error) if is_no_route_yet(&error) => {
                if self.held.len() == MAX_HELD_DATAGRAMS {
                    self.held.pop_front();
                }
                self.held.push_back(transmit);
                Ok(())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Sends what the engine has queued; first, once due, what found no route before.
    async fn flush(&mut self) -> Result<(), DriverError> {
        let now = self.clock.now();
        if self.retry_at.is_some_and(|at| now >= at) {
            self.retry_at = None;
            let held = std::mem::take(&mut self.held);
            for transmit in held {
                self.send_datagram(transmit).await?;
            }
        }
        while let Some(transmit) = self.connection.poll_transmit(now) {
            self.send_datagram(transmit).await?;
        }
        if !self.held.is_empty() && self.retry_at.is_none() {
            // The next engine timer retries too (see `deadline`); this bounds the wait when
            // there is none.
            self.retry_at = Some(now + NO_ROUTE_RETRY);
        }
        Ok(())
    }

    /// Queues one application record, keeping it for a resend if reconnections are on.
    fn send_record(&mut self, data: Vec<u8>) {
        if !self.reconnecting {
            if let Err(error) = self.connection.send(&data) {
                let _ = self.events.send(ClientEvent::SendFailed(error));
                return;
            }
        }
        if self.app_timeout.is_some() {
            if self.unanswered.len() == MAX_UNANSWERED_RECORDS {
                self.unanswered.pop_front();
            }
            self.unanswered.push_back(data);
            self.unanswered_since.get_or_insert(self.clock.now());
        }
    }

    /// Replaces the connection with a new handshake from the current socket.
    fn start_reconnection(&mut self, resume: bool) {
        let now = self.clock.now();
        self.earlier_traffic = self.traffic();
        let session = if resume { self.last_session.clone() } else { None };
        self.connection = Connection::client_with_cache(
            Arc::clone(&self.config),
            now,
            self.server,
            os_seed(),
            session,
            self.last_cached.clone(),
        );
        self.started = now;
        self.reconnecting = true;
        self.resuming = resume;
        self.unanswered_since = None;
    }

    /// When the driver must act next: the engine's timer, the app timeout, a held datagram.
    fn deadline(&self) -> Option<Instant> {
        let app_deadline = match (self.app_timeout, self.unanswered_since) {
            (Some(timeout), Some(since)) if !self.reconnecting => Some(since + timeout),
            _ => None,
        };
        [self.connection.poll_timeout(), app_deadline, self.retry_at].into_iter().flatten().min()
    }

    fn on_timer(&mut self) {
        let now = self.clock.now();
        if self.connection.poll_timeout().is_some_and(|t| now >= t) {
            self.connection.handle_timeout(now);
            // The engine's timer is also the moment to retry datagrams that found no route.
            if !self.held.is_empty() {
                self.retry_at = Some(now);
            }
        }
        let silent_too_long = match (self.app_timeout, self.unanswered_since) {
            (Some(timeout), Some(since)) => !self.reconnecting && now >= since + timeout,
            _ => false,
        };
        if silent_too_long {
            self.start_reconnection(self.resume_on_reconnect);
        }
    }

    /// Handles the engine's events; `Ok(true)` once the session is over.
    fn handle_events(&mut self) -> Result<bool, DriverError> {
        while let Some(event) = self.connection.poll_event() {
            match event {
                Event::Connected(summary) => {
                    if summary.session.is_some() {
                        self.last_session = summary.session.clone();
                    }
                    if summary.cache_update.is_some() {
                        self.last_cached = summary.cache_update.clone();
                    }
                    if let Some(tx) = self.handshake.take() {
                        let _ = tx.send(Ok(summary));
                    } else if self.reconnecting {
                        self.reconnecting = false;
                        let _ = self.events.send(ClientEvent::Reconnected(Box::new(summary)));
                        let resend: Vec<Vec<u8>> = self.unanswered.iter().cloned().collect();
                        for data in resend {
                            if let Err(error) = self.connection.send(&data) {
                                let _ = self.events.send(ClientEvent::SendFailed(error));
                            }
                        }
                        if !self.unanswered.is_empty() {
                            self.unanswered_since = Some(self.clock.now());
                        }
                    }
                }
                Event::ApplicationData(data) => {
                    self.unanswered.clear();
                    self.unanswered_since = None;
                    let _ = self.events.send(ClientEvent::Data(data));
                }
                Event::PathChanged(remote) => {
                    let _ = self.events.send(ClientEvent::PathChanged(remote));
                }
                // Only an endpoint accepts, evicts and refuses.
                Event::Accepted | Event::Evicted { .. } | Event::Refused { .. } => {}
                Event::Closed => {
                    let _ = self.events.send(ClientEvent::Closed);
                    return Ok(true);
                }
                // A reconnection that got no answer (every interface down, the server away) is
                // started again: only the application gives up on its session.
                Event::Failed(DtlsError::HandshakeTimeout { .. }) if self.reconnecting => {
                    self.start_reconnection(self.resuming);
                }
                Event::Failed(error) => {
                    let elapsed = self.clock.now() - self.started;
                    return Err(self.fail(DriverError::from_engine(error, elapsed)));
                }
            }
        }
        Ok(self.connection.is_closed())
    }

    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<ClientCommand>,
    ) -> Result<Traffic, DriverError> {
        let mut buffer = vec![0u8; RECEIVE_BUFFER];
        let mut commands_open = true;
        let mut closing = false;
        loop {
            if let Err(error) = self.flush().await {
                return Err(self.fail(error));
            }
            if self.handle_events()? || closing {
                if let Some(tx) = self.handshake.take() {
                    let _ = tx.send(Err(DriverError::Dtls(DtlsError::Closed)));
                }
                // close_notify (if we closed) was flushed above.
                if let Err(error) = self.flush().await {
                    return Err(self.fail(error));
                }
                return Ok(self.traffic());
            }
            // A reconnection's resent records.
            if let Err(error) = self.flush().await {
                return Err(self.fail(error));
            }

            let deadline = self.deadline();
            tokio::select! {
                ready = self.socket.ready(Interest::READABLE | Interest::ERROR) => {
                    let received = ready.map_err(DriverError::from).and_then(|ready| {
                        if ready.is_error() {
                            self.take_refusals()?;
                        }
                        self.receive(&mut buffer)
                    });
                    if let Err(error) = received {
                        return Err(self.fail(error));
                    }
                }
                _ = self.clock.sleep_until(deadline), if deadline.is_some() => self.on_timer(),
                command = commands.recv(), if commands_open => match command {
                    Some(ClientCommand::Send(data)) => self.send_record(data),
                    Some(ClientCommand::Reconnect { resume }) => self.start_reconnection(resume),
                    Some(ClientCommand::Rebind(local, reply)) => {
                        let result = self.rebind(local).await;
                        let _ = reply.send(result);
                    }
                    Some(ClientCommand::Close) | None => {
                        commands_open = false;
                        self.connection.close();
                        closing = true;
                    }
                },
            }
        }
    }

    /// Hands the engine the next datagram from the server, if the socket holds one.
    fn receive(&mut self, buffer: &mut [u8]) -> Result<(), DriverError> {
        loop {
            match self.socket.try_recv_from(buffer) {
                Ok((len, from)) => {
                    if !self.accepts_datagram_from(from) {
                        continue;
                    }
                    self.refusals.answered();
                    let datagram = &mut buffer[..len];
                    if let Some(trace) = &self.trace {
                        trace(Direction::Received, from, datagram);
                    }
                    self.connection.handle_datagram(self.clock.now(), from, datagram);
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // A refusal queued after the error queue was read: read it next time round.
                Err(error) if is_icmp_error(&error) => return self.take_refusals(),
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Reads the refusals queued on the socket. During the first handshake, each one for the
    /// server's address is told at once, and the handshake ends after enough in a row; later a
    /// refusal only says the server went away, which the session's own timers handle.
    fn take_refusals(&mut self) -> Result<(), DriverError> {
        let mut refused = Vec::new();
        crate::icmp::take_refusals(&self.socket, |refusal| refused.push(refusal))?;
        for refusal in refused {
            if self.handshake.is_none() || refusal.destination != self.connection.remote() {
                continue;
            }
            let Some(in_a_row) = self.refusals.refused() else { continue };
            if let Some(hook) = &self.on_refused {
                hook(refusal, in_a_row);
            }
            if in_a_row >= crate::icmp::REFUSALS_TO_GIVE_UP {
                let elapsed = self.clock.now() - self.started;
                return Err(DriverError::Refused { refusal, in_a_row, elapsed });
            }
        }
        Ok(())
    }

    /// Swaps the socket for a new one bound to `local`.
    async fn rebind(&mut self, local: SocketAddr) -> io::Result<SocketAddr> {
        let socket = UdpSocket::bind(local).await?;
        crate::icmp::report_refusals(&socket, self.server)?;
        let bound = socket.local_addr()?;
        self.socket = socket;
        Ok(bound)
    }
}

/// Whether a client configuration follows the server to another port (and so takes datagrams
/// from any port of the server's IP).
fn follows_server_port(config: &ClientConfig) -> bool {
    config.mobility.follow_server_port
}

/// Reports a fatal error to whoever waits (the handshake or the event stream) and returns a copy
/// for the task result.
fn fail_client(
    events: &mpsc::UnboundedSender<ClientEvent>,
    handshake: &mut Option<oneshot::Sender<HandshakeVerdict>>,
    error: DriverError,
) -> DriverError {
    let for_task = match &error {
        DriverError::Io(e) => DriverError::Io(io::Error::new(e.kind(), e.to_string())),
        DriverError::NoAnswer { retransmissions, elapsed } => {
            DriverError::NoAnswer { retransmissions: *retransmissions, elapsed: *elapsed }
        }
        DriverError::Refused { refusal, in_a_row, elapsed } => {
            DriverError::Refused { refusal: *refusal, in_a_row: *in_a_row, elapsed: *elapsed }
        }
        DriverError::Dtls(e) => DriverError::Dtls(e.clone()),
        DriverError::TaskStopped => DriverError::TaskStopped,
    };
    match handshake.take() {
        Some(tx) => {
            let _ = tx.send(Err(error));
        }
        None => {
            let _ = events.send(ClientEvent::Failed(error));
        }
    }
    for_task
}

/// Options of a [`DtlsServer`] beyond the engine's [`ServerConfig`].
#[derive(Clone)]
pub struct ServerOptions {
    /// Sees every datagram.
    pub trace: Option<DatagramTrace>,
    /// How often the cookie key is replaced with fresh OS randomness.
    pub cookie_rotation: Duration,
    /// How often the session-ticket key is replaced with fresh OS randomness (when the
    /// configuration issues tickets); keep it at least the tickets' lifetime.
    pub ticket_rotation: Duration,
    /// How sessions get their sockets (see [`MobilityMode`]); the engine's
    /// `ServerConfig.mobility` says what the server accepts and must suit it.
    pub mobility: MobilityMode,
    /// Close an established session that received nothing authenticated for this long (with
    /// close_notify; it is reported as failed with `Error::Closed`); `None`: the engine's default
    /// (5 minutes).
    pub idle_timeout: Option<Duration>,
    /// Workers, each an [`Endpoint`] of its own on a socket of its own bound to the listen
    /// address with SO_REUSEPORT (the kernel spreads clients over them by 4-tuple); at most
    /// [`MAX_WORKERS`]. Session limits of the configuration apply per worker; the cookie key,
    /// the ticket keys (rotated once for all), the session-ID cache (`session_store`, else a
    /// [`MemoryStore`] as large as one worker's cache) and the cache of client chains are shared,
    /// so a client resumes at any worker.
    pub workers: usize,
    /// Whether the listening sockets read and write in batches (see [`crate::udp`]).
    pub batch: BatchIo,
    /// Whether other processes may listen on the same address (by default, binding fails with
    /// "address in use" when one does).
    pub port_sharing: PortSharing,
    /// Ticket keys shared by a fleet: read from this file (see [`crate::fleet`]) at the start,
    /// again when its modification time or length changes (polled) and on
    /// [`DtlsServer::reload_ticket_keys`]; the server then never rotates keys itself.
    pub ticket_keys_file: Option<PathBuf>,
    /// The session-ID cache shared by a fleet (needs the same ticket keys on every node: they
    /// seal what is stored). A store that does not answer in [`STORE_TIMEOUT`] is a miss.
    pub session_store: Option<Arc<dyn SessionStore>>,
    /// This server as a node of a fleet: its CIDs carry the node id, and CID records of other
    /// nodes' sessions are forwarded to them (see [`crate::fleet`]).
    pub fleet: Option<Fleet>,
}

/// How long a session-store lookup may take before the handshake goes on without it.
pub const STORE_TIMEOUT: Duration = Duration::from_millis(300);
/// After a store error, lookups are skipped (full handshakes) for this long.
const STORE_BACKOFF: Duration = Duration::from_secs(5);
/// Store lookups and writes under way at most per worker; beyond it a lookup is a miss.
const STORE_IN_FLIGHT: usize = 256;
/// How often the ticket-key file's modification time is checked.
const TICKET_FILE_POLL: Duration = Duration::from_millis(250);
/// Clients whose answers go back through another node, at most per worker.
const MAX_RETURN_PATHS: usize = 65_536;

/// Most workers of one server: a worker is named by the first byte of the CIDs it issues.
pub const MAX_WORKERS: usize = 255;

/// Most CID records waiting to be passed to the worker that holds their session; beyond it they
/// are dropped, as a full socket buffer would.
const FORWARD_QUEUE: usize = 1024;

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            trace: None,
            cookie_rotation: DEFAULT_COOKIE_ROTATION,
            ticket_rotation: DEFAULT_TICKET_ROTATION,
            mobility: MobilityMode::Standard,
            idle_timeout: None,
            workers: 1,
            batch: BatchIo::On,
            port_sharing: PortSharing::Exclusive,
            ticket_keys_file: None,
            session_store: None,
            fleet: None,
        }
    }
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("trace", &self.trace.is_some())
            .field("cookie_rotation", &self.cookie_rotation)
            .field("ticket_rotation", &self.ticket_rotation)
            .field("mobility", &self.mobility)
            .field("idle_timeout", &self.idle_timeout)
            .field("workers", &self.workers)
            .field("batch", &self.batch)
            .field("port_sharing", &self.port_sharing)
            .field("ticket_keys_file", &self.ticket_keys_file)
            .field("session_store", &self.session_store.as_ref().map(|s| s.name()))
            .field("fleet", &self.fleet)
            .finish()
    }
}

/// What the server reports, per connection.
// `Connected` carries the whole summary (with the peer's leaf and the session); events are few
// (one per handshake), so boxing it would only make every match clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ServerEvent {
    /// A handshake completed.
    Connected {
        /// The connection.
        handle: SessionHandle,
        /// The client's address.
        remote: SocketAddr,
        /// How the handshake went.
        summary: HandshakeSummary,
    },
    /// One application record from a client.
    Data {
        /// The connection.
        handle: SessionHandle,
        /// The client's address.
        remote: SocketAddr,
        /// The record's content.
        data: Vec<u8>,
    },
    /// A client closed its session with close_notify.
    Closed {
        /// The connection.
        handle: SessionHandle,
        /// The client's address, if still known.
        remote: Option<SocketAddr>,
    },
    /// A connection failed (fatal alert, handshake timeout, idle expiry).
    Failed {
        /// The connection.
        handle: SessionHandle,
        /// The client's address, if still known.
        remote: Option<SocketAddr>,
        /// Why.
        error: DtlsError,
    },
    /// Every session slot was taken (`ServerConfig::max_sessions`): this session was closed with
    /// close_notify to make room for `newcomer`, chosen by `policy`.
    Evicted {
        /// The connection.
        handle: SessionHandle,
        /// The client's address, if still known.
        remote: Option<SocketAddr>,
        /// The policy that chose it.
        policy: WhenFull,
        /// The client it made room for.
        newcomer: SocketAddr,
    },
    /// Every session slot was taken: a client that returned a valid cookie was refused with a
    /// fatal internal_error alert and no state kept.
    Refused {
        /// The client's address.
        remote: SocketAddr,
    },
    /// The client moved: the session now sends to `to` (a CID or a session socket let the
    /// server recognise it, and with `rrc` the new address answered a path_challenge).
    PathChanged {
        /// The connection.
        handle: SessionHandle,
        /// The client's previous address, if known.
        from: Option<SocketAddr>,
        /// Its address now.
        to: SocketAddr,
    },
    /// The session now sends from a socket of its own at `local` (IPC: from its ServerHello on;
    /// TCS: once the client has used the port the server announced).
    OwnSocket {
        /// The connection.
        handle: SessionHandle,
        /// The session's socket.
        local: SocketAddr,
    },
    /// The session stays on the welcome port: IPC, the client cannot follow the server to another
    /// port (it did not offer `port_move`), so it is served like a standard session; TCS, the
    /// session could not move and stays on its temporary socket.
    StaysOnWelcomePort {
        /// The connection.
        handle: SessionHandle,
        /// Why.
        reason: String,
    },
    /// The ticket keys were read again from `ServerOptions::ticket_keys_file`.
    TicketKeysReloaded {
        /// The current key's id.
        current: u32,
        /// Whether a previous key came with it.
        with_previous: bool,
    },
    /// The ticket-key file could not be read; the keys in use stay.
    TicketKeysUnreadable {
        /// Why.
        error: String,
    },
    /// The session store failed (reported once, by whichever worker saw it first, until it
    /// answers again): lookups are misses meanwhile, so clients get full handshakes.
    SessionStoreUnavailable {
        /// Why.
        error: String,
    },
}

/// Names one session of a [`DtlsServer`]: the worker that holds it and its handle there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionHandle {
    worker: u8,
    connection: ConnectionHandle,
}

impl SessionHandle {
    /// The worker that holds the session (0 with one worker).
    pub fn worker(&self) -> usize {
        usize::from(self.worker)
    }

    /// The session's handle in its worker's [`Endpoint`].
    pub fn connection(&self) -> ConnectionHandle {
        self.connection
    }
}

impl fmt::Display for SessionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.worker, self.connection)
    }
}

enum ServerCommand {
    SetTicketKeys(TicketKeys),
    Send(ConnectionHandle, Vec<u8>),
    Close(ConnectionHandle),
    Stats(oneshot::Sender<WorkerStats>),
    Shutdown,
}

/// What one worker counted, handed back by [`DtlsServer::shutdown`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// The worker's endpoint counters.
    pub endpoint: EndpointStats,
    /// Datagrams read from the worker's listening socket.
    pub datagrams_received: u64,
    /// CID records that arrived here for a session of another worker and were passed on.
    pub passed_on: u64,
    /// CID records another worker passed here.
    pub taken_over: u64,
    /// Whether the socket read and wrote in batches (false: batching off, or not available).
    pub batched: bool,
    /// CID records of another node's sessions forwarded to it.
    pub forwarded_to_nodes: u64,
    /// CID records another node forwarded here.
    pub forwarded_from_nodes: u64,
    /// Answers sent back through the node the client sent to.
    pub answers_through_nodes: u64,
    /// Session-store lookups, and how many found a session.
    pub store_lookups: u64,
    /// Session-store lookups that found a session.
    pub store_hits: u64,
}

/// Every worker's counters, in worker order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// One entry per worker.
    pub workers: Vec<WorkerStats>,
}

impl ServerStats {
    /// Handshakes accepted by every worker.
    pub fn connections_accepted(&self) -> u64 {
        self.workers.iter().map(|w| w.endpoint.connections_accepted).sum()
    }

    /// HelloVerifyRequests sent by every worker.
    pub fn hello_verify_sent(&self) -> u64 {
        self.workers.iter().map(|w| w.endpoint.hello_verify_sent).sum()
    }

    /// CID records passed from the worker the kernel chose to the worker holding their session.
    pub fn passed_on(&self) -> u64 {
        self.workers.iter().map(|w| w.passed_on).sum()
    }

    /// One line over every worker, with each worker's share of the handshakes.
    pub fn summary_line(&self) -> String {
        let received: u64 = self.workers.iter().map(|w| w.datagrams_received).sum();
        let dropped: u64 = self.workers.iter().map(|w| w.endpoint.datagrams_dropped).sum();
        let shares: Vec<String> =
            self.workers.iter().map(|w| w.endpoint.connections_accepted.to_string()).collect();
        let batched = self.workers.iter().filter(|w| w.batched).count();
        let evicted: u64 = self.workers.iter().map(|w| w.endpoint.handshakes_evicted).sum();
        let sum = |field: fn(&WorkerStats) -> u64| self.workers.iter().map(field).sum::<u64>();
        format!(
            "{} worker(s) ({batched} with batched I/O): {} handshake(s) accepted (per worker: {}), {} HelloVerifyRequest(s), {received} datagram(s) received, {dropped} dropped, {evicted} half-open handshake(s) evicted, {} CID record(s) passed between workers; fleet: {} CID record(s) forwarded to other nodes, {} from them, {} answer(s) sent back through them; session store: {} lookup(s), {} found",
            self.workers.len(),
            self.connections_accepted(),
            shares.join("/"),
            self.hello_verify_sent(),
            self.passed_on(),
            sum(|w| w.forwarded_to_nodes),
            sum(|w| w.forwarded_from_nodes),
            sum(|w| w.answers_through_nodes),
            sum(|w| w.store_lookups),
            sum(|w| w.store_hits),
        )
    }
}

/// A DTLS server: a listening UDP socket per worker (and, in the IPC and TCS modes, a socket per
/// session), an [`Endpoint`] per worker, many clients, each worker driven by a tokio task.
pub struct DtlsServer {
    local_addr: SocketAddr,
    reload: Arc<tokio::sync::Notify>,
    keys: Arc<SharedKeys>,
    commands: Arc<[mpsc::UnboundedSender<ServerCommand>]>,
    events: mpsc::UnboundedReceiver<ServerEvent>,
    tasks: Vec<JoinHandle<Result<WorkerStats, DriverError>>>,
}

impl DtlsServer {
    /// Binds `listen` and starts serving.
    pub async fn bind(
        listen: SocketAddr,
        config: Arc<ServerConfig>,
        options: ServerOptions,
    ) -> Result<DtlsServer, DriverError> {
        let workers = options.workers.clamp(1, MAX_WORKERS);
        // Workers share the listen port, and so do TCS temporary sockets; other processes only
        // when asked.
        let sockets = DatagramSocket::bind_listeners(listen, workers, options.port_sharing, options.batch)?;
        let local_addr = sockets[0].local_addr()?;
        let (forward_to, forwarded): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| mpsc::channel::<Passed>(FORWARD_QUEUE)).unzip();
        let forward_to: Arc<[mpsc::Sender<Passed>]> = forward_to.into();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        // A node of a fleet: one socket for frames from and to the other nodes.
        let mut fleet_out = None;
        let mut answers = None;
        if let Some(fleet) = options.fleet.clone() {
            let socket = UdpSocket::bind(fleet.own_address()).await?;
            let (out_tx, out_rx) = mpsc::channel(FORWARD_QUEUE);
            let (answer_tx, answer_rx) = mpsc::channel(FORWARD_QUEUE);
            fleet_out = Some(out_tx);
            answers = Some(answer_rx);
            let cid_len = usize::from(config.mobility.connection_id.unwrap_or(0));
            tokio::spawn(run_fleet(
                socket,
                fleet,
                out_rx,
                Arc::clone(&forward_to),
                answer_tx,
                local_addr,
                cid_len,
            ));
        }
        let mut config = config;
        if let Some(path) = &options.ticket_keys_file {
            let keys = crate::fleet::load_ticket_keys(path)?;
            config = Arc::new(ServerConfig { tickets: Some(keys), ..(*config).clone() });
        }
        // Workers share one session-ID cache: the fleet's store, else one in this process,
        // sealed under the ticket keys or, without tickets, a key that never leaves the process.
        let mut options = options;
        let mut seal_keys = None;
        if workers > 1 && options.session_store.is_none() && config.session_cache.max_entries > 0 {
            options.session_store = Some(Arc::new(MemoryStore::new(config.session_cache.max_entries)));
            if config.tickets.is_none() {
                seal_keys = Some(os_ticket_keys());
            }
        }
        let cookie_key = os_cookie_key();
        let cookie_schedule = CookieSchedule::starting_now(options.cookie_rotation);
        let store_down_reported = Arc::default();
        // And one cache of client chains (client-certificate caching, seed 003).
        let client_chains = (workers > 1).then(|| SharedClientCertCache::new(config.client_cert_cache));
        let mut commands = Vec::with_capacity(workers);
        let mut tasks = Vec::with_capacity(workers);
        for (index, (socket, forwarded)) in sockets.into_iter().zip(forwarded).enumerate() {
            let (command_tx, command_rx) = mpsc::unbounded_channel();
            commands.push(command_tx);
            let peers = Peers {
                index: index as u8,
                forward_to: Arc::clone(&forward_to),
                forwarded,
                fleet_out: fleet_out.clone(),
                answers: if index == 0 { answers.take() } else { None },
                cookie_key,
                cookie_rotation: CookieRotation::following(&cookie_schedule),
                seal_keys: seal_keys.clone(),
                store_down_reported: Arc::clone(&store_down_reported),
                client_chains: client_chains.clone(),
            };
            let run =
                run_server(socket, peers, Arc::clone(&config), options.clone(), command_rx, event_tx.clone());
            tasks.push(tokio::spawn(run));
        }
        let commands: Arc<[mpsc::UnboundedSender<ServerCommand>]> = commands.into();
        let reload = Arc::new(tokio::sync::Notify::new());
        // Keys from a file are rotated by the file; else by this server, once for every worker.
        let own_tickets = config.tickets.clone().filter(|_| options.ticket_keys_file.is_none());
        let rotates_tickets = own_tickets.is_some();
        let keys = Arc::new(SharedKeys {
            tickets: std::sync::Mutex::new(own_tickets),
            workers: Arc::downgrade(&commands),
        });
        if rotates_tickets {
            tokio::spawn(rotate_ticket_keys(Arc::clone(&keys), options.ticket_rotation));
        }
        if let Some(path) = options.ticket_keys_file.clone() {
            tokio::spawn(watch_ticket_keys(path, Arc::clone(&reload), Arc::clone(&commands), event_tx));
        }
        Ok(DtlsServer { local_addr, reload, keys, commands, events: event_rx, tasks })
    }

    /// Reads the ticket-key file again now (SIGHUP), whether or not it looks changed.
    pub fn reload_ticket_keys(&self) {
        self.reload.notify_one();
    }

    /// Rotates the ticket keys of every worker now, as `ServerOptions::ticket_rotation` does:
    /// a fresh key becomes current, the current one previous. Commands sent after it reach
    /// each worker after the new keys. Does nothing without tickets or with keys from a file
    /// (rotate the file then).
    pub fn rotate_ticket_key(&self) {
        self.keys.rotate_ticket_key();
    }

    /// How many workers serve.
    pub fn workers(&self) -> usize {
        self.tasks.len()
    }

    /// The bound address (with the real port if `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that can send and close from another task while this one waits for events.
    pub fn controller(&self) -> ServerController {
        ServerController { commands: Arc::clone(&self.commands) }
    }

    /// Queues `data` as one application record to connection `handle`.
    pub fn send(&self, handle: SessionHandle, data: Vec<u8>) -> Result<(), DriverError> {
        self.controller().send(handle, data)
    }

    /// Closes connection `handle` with close_notify.
    pub fn close(&self, handle: SessionHandle) -> Result<(), DriverError> {
        self.controller().close(handle)
    }

    /// The next event; `None` once the server has stopped.
    pub async fn next_event(&mut self) -> Option<ServerEvent> {
        self.events.recv().await
    }

    /// Closes every connection with close_notify, stops every worker and returns their counters.
    pub async fn shutdown(self) -> Result<ServerStats, DriverError> {
        for worker in self.commands.iter() {
            let _ = worker.send(ServerCommand::Shutdown);
        }
        let mut stats = ServerStats::default();
        let mut first_error = None;
        for task in self.tasks {
            match task.await {
                Ok(Ok(worker)) => stats.workers.push(worker),
                Ok(Err(error)) => {
                    first_error.get_or_insert(error);
                }
                Err(_) => {
                    first_error.get_or_insert(DriverError::TaskStopped);
                }
            }
        }
        first_error.map_or(Ok(stats), Err)
    }
}

/// Sends to and closes connections of a running [`DtlsServer`].
#[derive(Clone)]
pub struct ServerController {
    commands: Arc<[mpsc::UnboundedSender<ServerCommand>]>,
}

impl ServerController {
    fn to_worker(&self, handle: SessionHandle, command: ServerCommand) -> Result<(), DriverError> {
        let worker = self.commands.get(handle.worker()).ok_or(DriverError::TaskStopped)?;
        worker.send(command).map_err(|_| DriverError::TaskStopped)
    }

    /// Queues `data` as one application record to connection `handle`.
    pub fn send(&self, handle: SessionHandle, data: Vec<u8>) -> Result<(), DriverError> {
        self.to_worker(handle, ServerCommand::Send(handle.connection, data))
    }

    /// Closes connection `handle` with close_notify.
    pub fn close(&self, handle: SessionHandle) -> Result<(), DriverError> {
        self.to_worker(handle, ServerCommand::Close(handle.connection))
    }

    /// Every worker's counters now.
    pub async fn stats(&self) -> Result<ServerStats, DriverError> {
        let mut stats = ServerStats::default();
        for worker in self.commands.iter() {
            let (tx, rx) = oneshot::channel();
            worker.send(ServerCommand::Stats(tx)).map_err(|_| DriverError::TaskStopped)?;
            stats.workers.push(rx.await.map_err(|_| DriverError::TaskStopped)?);
        }
        Ok(stats)
    }
}

/// How a worker reaches the others: the CID records it receives for their sessions go to
/// `forward_to[owner]`, and theirs for its sessions arrive on `forwarded`.
struct Peers {
    index: u8,
    forward_to: Arc<[mpsc::Sender<Passed>]>,
    forwarded: mpsc::Receiver<Passed>,
    /// Frames for other nodes (a fleet only).
    fleet_out: Option<mpsc::Sender<FleetOut>>,
    /// Answers other nodes' sessions send to clients that reached them through this node
    /// (worker 0 of a fleet node only).
    answers: Option<mpsc::Receiver<(SocketAddr, Vec<u8>)>>,
    /// The cookie key every worker starts with, and the server's schedule of later ones.
    cookie_key: [u8; 16],
    cookie_rotation: CookieRotation,
    /// What seals the sessions workers share when the configuration issues no tickets.
    seal_keys: Option<TicketKeys>,
    /// Whether a store failure has been reported (once for all workers).
    store_down_reported: Arc<std::sync::atomic::AtomicBool>,
    /// The client chains every worker keeps (several workers only).
    client_chains: Option<SharedClientCertCache>,
}

/// The ticket keys every worker of one server uses, rotated here once for all, so that a ticket
/// one worker made opens at every other.
struct SharedKeys {
    /// The ticket keys, when this server rotates them (not with keys from a file).
    tickets: std::sync::Mutex<Option<TicketKeys>>,
    /// Weak, so that dropping the server and its controllers still stops the workers.
    workers: std::sync::Weak<[mpsc::UnboundedSender<ServerCommand>]>,
}

impl SharedKeys {
    /// Hands `command` to every worker; false once they have all stopped.
    fn to_every_worker(&self, command: impl Fn() -> ServerCommand) -> bool {
        let Some(workers) = self.workers.upgrade() else { return false };
        // Every worker gets it: no stopping at the first that has stopped.
        let mut delivered = false;
        for worker in workers.iter() {
            delivered |= worker.send(command()).is_ok();
        }
        delivered
    }

    fn rotate_ticket_key(&self) -> bool {
        let mut tickets = self.tickets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(keys) = tickets.as_mut() else { return true };
        keys.rotate(os_ticket_key());
        let keys = keys.clone();
        self.to_every_worker(|| ServerCommand::SetTicketKeys(keys.clone()))
    }
}

/// Rotates the ticket key every `every`, until every worker has stopped. (Cookie keys follow
/// the server's `CookieSchedule`, which each worker reads on its own.)
async fn rotate_ticket_keys(keys: Arc<SharedKeys>, every: Duration) {
    let every = every.max(Duration::from_millis(1));
    let Some(first) = tokio::time::Instant::now().checked_add(every) else { return };
    let mut timer = tokio::time::interval_at(first, every);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        timer.tick().await;
        if !keys.rotate_ticket_key() {
            return;
        }
    }
}

/// A datagram handed to the worker holding its session, and the node it came through (when
/// another node received it from the client).
struct Passed {
    incoming: Incoming,
    via: Option<u8>,
}

/// What a worker hands the fleet task.
enum FleetOut {
    /// A client's CID record for the node holding its session.
    Forward { node: u8, remote: SocketAddr, datagram: Vec<u8> },
    /// An answer to a client that reached us through `node`.
    Answer { node: u8, remote: SocketAddr, datagram: Vec<u8> },
}

/// Sends and receives the frames between this node and the others.
async fn run_fleet(
    socket: UdpSocket,
    fleet: Fleet,
    mut outbound: mpsc::Receiver<FleetOut>,
    forward_to: Arc<[mpsc::Sender<Passed>]>,
    answers: mpsc::Sender<(SocketAddr, Vec<u8>)>,
    welcome_addr: SocketAddr,
    cid_len: usize,
) {
    let mut sequence = crate::fleet::first_sequence();
    let mut replay = ReplayWindows::default();
    let mut buffer = vec![0u8; RECEIVE_BUFFER];
    loop {
        tokio::select! {
            out = outbound.recv() => {
                let Some(out) = out else { return };
                let (kind, node, remote, datagram) = match out {
                    FleetOut::Forward { node, remote, datagram } => (FrameKind::Forward, node, remote, datagram),
                    FleetOut::Answer { node, remote, datagram } => (FrameKind::Answer, node, remote, datagram),
                };
                // A node not in the fleet file: nobody can hold the session, drop it.
                let Some(&to) = fleet.nodes.get(&node) else { continue };
                sequence += 1;
                let frame = crate::fleet::seal_frame(&fleet, kind, sequence, remote, &datagram);
                let _ = socket.send_to(&frame, to).await;
            }
            received = socket.recv_from(&mut buffer) => {
                let Ok((n, _)) = received else { continue };
                let Ok(frame) = crate::fleet::open_frame(&fleet, &buffer[..n]) else { continue };
                if frame.sender == fleet.node || replay.check_and_mark(frame.sender, frame.sequence).is_err() {
                    continue;
                }
                match frame.kind {
                    FrameKind::Forward => {
                        // The worker byte of our CID; a record for no worker of ours is dropped.
                        let worker = match crate::fleet::cid_owner(frame.datagram, cid_len, Some(fleet.node), u8::MAX, forward_to.len()) {
                            Some(CidOwner::Worker(w)) => w,
                            _ => continue,
                        };
                        let incoming = Incoming { local: welcome_addr, remote: frame.address, datagram: frame.datagram.to_vec() };
                        let _ = forward_to[worker].try_send(Passed { incoming, via: Some(frame.sender) });
                    }
                    FrameKind::Answer => {
                        let _ = answers.try_send((frame.address, frame.datagram.to_vec()));
                    }
                }
            }
        }
    }
}

/// Reads the ticket-key file when it changes or when asked, and hands the keys to every worker.
async fn watch_ticket_keys(
    path: PathBuf,
    reload: Arc<tokio::sync::Notify>,
    workers: Arc<[mpsc::UnboundedSender<ServerCommand>]>,
    events: mpsc::UnboundedSender<ServerEvent>,
) {
    let mut stamp = crate::fleet::file_stamp(&path);
    let mut poll = tokio::time::interval(TICKET_FILE_POLL);
    loop {
        let asked = tokio::select! {
            _ = poll.tick() => false,
            _ = reload.notified() => true,
        };
        let now = crate::fleet::file_stamp(&path);
        if !asked && now == stamp {
            continue;
        }
        stamp = now;
        let event = match crate::fleet::load_ticket_keys(&path) {
            Ok(keys) => {
                let event = ServerEvent::TicketKeysReloaded {
                    current: keys.current.id,
                    with_previous: keys.previous.is_some(),
                };
                for worker in workers.iter() {
                    if worker.send(ServerCommand::SetTicketKeys(keys.clone())).is_err() {
                        return;
                    }
                }
                event
            }
            Err(error) => ServerEvent::TicketKeysUnreadable { error: error.to_string() },
        };
        if events.send(event).is_err() {
            return;
        }
    }
}

/// A session-store lookup that came back (its ClientHello waits in the engine).
struct LookupDone {
    id: [u8; 32],
    answer: io::Result<Option<Vec<u8>>>,
}

/// A worker's link to the session store.
struct StoreLink {
    store: Arc<dyn SessionStore>,
    done: mpsc::Sender<LookupDone>,
    failures: mpsc::Sender<String>,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    ttl: Duration,
    /// Lookups are skipped until then after an error.
    down_until: Option<tokio::time::Instant>,
}

impl StoreLink {
    fn busy(&self) -> bool {
        self.in_flight.load(std::sync::atomic::Ordering::Relaxed) >= STORE_IN_FLIGHT
            || self.down_until.is_some_and(|t| tokio::time::Instant::now() < t)
    }

    /// Asks the store for `id`: its answer when it has one at once (the workers' store in this
    /// process), else `None` and the answer comes back as a [`LookupDone`].
    fn look_up(&self, id: [u8; 32]) -> Option<io::Result<Option<Vec<u8>>>> {
        let mut lookup = self.store.get(id);
        if let Some(answer) = ready_now(&mut lookup) {
            return Some(answer);
        }
        let (done, in_flight) = (self.done.clone(), Arc::clone(&self.in_flight));
        in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            let answer = match tokio::time::timeout(STORE_TIMEOUT, lookup).await {
                Ok(answer) => answer,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
            };
            in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            let _ = done.send(LookupDone { id, answer }).await;
        });
        None
    }

    fn put(&self, id: [u8; 32], sealed: Vec<u8>) {
        if self.in_flight.load(std::sync::atomic::Ordering::Relaxed) >= STORE_IN_FLIGHT {
            return;
        }
        let mut put = self.store.put(id, sealed, self.ttl);
        if let Some(result) = ready_now(&mut put) {
            if let Err(error) = result {
                let _ = self.failures.try_send(error.to_string());
            }
            return;
        }
        let (failures, in_flight) = (self.failures.clone(), Arc::clone(&self.in_flight));
        in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            let result = match tokio::time::timeout(STORE_TIMEOUT, put).await {
                Ok(result) => result,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
            };
            in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(error) = result {
                let _ = failures.try_send(error.to_string());
            }
        });
    }
}

/// Polls a store's future once: a store in this process answers without a task of its own.
fn ready_now<T>(future: &mut crate::session_store::StoreFuture<T>) -> Option<io::Result<T>> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(result) => Some(result),
        std::task::Poll::Pending => None,
    }
}

/// How often a server with session sockets checks for sessions the engine let go without an
/// event, to close their sockets.
const SOCKET_SWEEP: Duration = Duration::from_secs(1);

/// The server task's state besides the engine.
struct ServerDriver {
    clock: Clock,
    mode: MobilityMode,
    trace: Option<DatagramTrace>,
    /// This worker's index, the first byte of its CIDs with several workers.
    worker: u8,
    welcome_addr: SocketAddr,
    /// What leaves from the listening socket, batched per peer.
    outgoing: SendQueue,
    stats: WorkerStats,
    sockets: SessionSockets<ConnectionHandle>,
    events: mpsc::UnboundedSender<ServerEvent>,
    /// Addresses of the engine's connections, so that Closed/Failed can still name the peer after
    /// the engine has let the connection go. Bounded by the engine's connection table: entries
    /// leave on Closed/Failed and at each cookie rotation if the engine no longer knows them.
    remotes: HashMap<ConnectionHandle, SocketAddr>,
    /// Sessions whose sockets close once the datagrams queued before their end are out.
    ended: Vec<ConnectionHandle>,
    /// Clients that reached us through another node of the fleet: our answers go back through
    /// it, as a client (behind a NAT, or a load balancer) takes answers only from the address it
    /// sent to.
    return_paths: HashMap<SocketAddr, u8>,
    fleet_out: Option<mpsc::Sender<FleetOut>>,
    store: Option<StoreLink>,
    /// Whether the store's failure has been reported since it last answered (by any worker).
    store_down_reported: Arc<std::sync::atomic::AtomicBool>,
    /// This worker's place in the server's cookie-key schedule.
    cookie_rotation: CookieRotation,
}

impl ServerDriver {
    /// Sends every datagram the engine has queued, each from the socket its `src` names.
    async fn flush(&mut self, endpoint: &mut Endpoint, welcome: &DatagramSocket) {
        let now = self.clock.now();
        while let Some(transmit) = endpoint.poll_transmit(now) {
            if let Some(trace) = &self.trace {
                trace(Direction::Sent, transmit.dst, &transmit.payload);
            }
            // A datagram that cannot be sent is a lost datagram: the engine's timers cope.
            match transmit.src {
                Some(src) if src != self.welcome_addr => {
                    if let Some(socket) = self.sockets.socket_for(src) {
                        let _ = socket.send_to(&transmit.payload, transmit.dst).await;
                    }
                    // TCS: the session sends from its own port, so the client has used it.
                    if let Some(handle) = self.sockets.sent_from(src) {
                        let _ = self
                            .events
                            .send(ServerEvent::OwnSocket { handle: self.session(handle), local: src });
                    }
                }
                _ => match (self.return_paths.get(&transmit.dst), &self.fleet_out) {
                    (Some(&node), Some(out)) => {
                        let answer =
                            FleetOut::Answer { node, remote: transmit.dst, datagram: transmit.payload };
                        if out.try_send(answer).is_ok() {
                            self.stats.answers_through_nodes += 1;
                        }
                    }
                    _ => self.outgoing.push_owned(welcome, transmit.dst, transmit.payload),
                },
            }
        }
        if let Some(store) = &self.store {
            while let Some((id, sealed)) = endpoint.poll_shared_session() {
                store.put(id, sealed);
            }
        }
        // Refused datagrams are lost datagrams: the engine's timers cope.
        let _ = self.outgoing.flush(welcome).await;
        for handle in self.ended.drain(..) {
            self.sockets.close(handle);
        }
    }

    /// Hands the engine's events on, giving sessions their sockets as the mode says.
    fn handle_events(&mut self, endpoint: &mut Endpoint) {
        while let Some((handle, event)) = endpoint.poll_event() {
            let known = endpoint.connection(handle).map(|c| c.remote());
            if let Some(action) = endpoint.connection(handle).and_then(|c| self.mode.socket_action(&event, c))
            {
                self.carry_out(endpoint, handle, action);
            }
            match event {
                Event::Connected(summary) => {
                    let remote = known.or_else(|| self.remotes.get(&handle).copied());
                    if let Some(remote) = remote {
                        self.remotes.insert(handle, remote);
                        let _ = self.events.send(ServerEvent::Connected {
                            handle: self.session(handle),
                            remote,
                            summary,
                        });
                    }
                }
                Event::ApplicationData(data) => {
                    if let Some(remote) = known.or_else(|| self.remotes.get(&handle).copied()) {
                        let _ = self.events.send(ServerEvent::Data {
                            handle: self.session(handle),
                            remote,
                            data,
                        });
                    }
                }
                Event::Closed => {
                    let remote = known.or_else(|| self.remotes.remove(&handle));
                    self.remotes.remove(&handle);
                    self.ended.push(handle);
                    let _ = self.events.send(ServerEvent::Closed { handle: self.session(handle), remote });
                }
                Event::Failed(error) => {
                    let remote = known.or_else(|| self.remotes.remove(&handle));
                    self.remotes.remove(&handle);
                    self.ended.push(handle);
                    let _ =
                        self.events.send(ServerEvent::Failed { handle: self.session(handle), remote, error });
                }
                Event::Evicted { policy, newcomer } => {
                    let remote = known.or_else(|| self.remotes.remove(&handle));
                    self.remotes.remove(&handle);
                    self.ended.push(handle);
                    let _ = self.events.send(ServerEvent::Evicted {
                        handle: self.session(handle),
                        remote,
                        policy,
                        newcomer,
                    });
                }
                Event::Refused { remote } => {
                    let _ = self.events.send(ServerEvent::Refused { remote });
                }
                // Remember the peer of a new connection now, so that a handshake failing before
                // it completes can still be reported with the client's address.
                Event::Accepted => {
                    if let Some(remote) = known {
                        self.remotes.entry(handle).or_insert(remote);
                    }
                }
                Event::PathChanged(to) => {
                    let from = self.remotes.insert(handle, to);
                    let _ =
                        self.events.send(ServerEvent::PathChanged { handle: self.session(handle), from, to });
                }
            }
        }
    }

    /// Does what the strategy decided for session `handle`'s sockets. A socket that cannot be
    /// opened leaves the session on the welcome socket, like a standard one.
    fn carry_out(&mut self, endpoint: &mut Endpoint, handle: ConnectionHandle, action: SocketAction) {
        let result = match action {
            // IPC: the ServerHello already leaves from the session's own socket.
            SocketAction::OpenOwn => self
                .sockets
                .open_own(handle)
                .map(|local| {
                    endpoint.set_local(handle, local);
                    let _ = self.events.send(ServerEvent::OwnSocket { handle: self.session(handle), local });
                })
                .map_err(|error| format!("no socket of its own: {error}")),
            // TCS: the rest of the handshake over a socket connected to the client.
            SocketAction::OpenTemporary { client } => self
                .sockets
                .open_temporary(handle, client)
                .map_err(|error| format!("no temporary socket: {error}")),
            // TCS: a port of its own, announced by the engine; the temporary socket goes once the
            // session sends from the new port.
            SocketAction::MoveToOwn => self
                .sockets
                .open_own(handle)
                .and_then(|local| {
                    endpoint.move_to(handle, local).map_err(|error| {
                        self.sockets.close_own(handle);
                        io::Error::other(error.to_string())
                    })
                })
                .map_err(|error| format!("no move to a port of its own: {error}")),
            SocketAction::StayOnWelcomePort(reason) => Err(reason.to_owned()),
        };
        if let Err(reason) = result {
            let _ =
                self.events.send(ServerEvent::StaysOnWelcomePort { handle: self.session(handle), reason });
        }
    }

    /// The store failed: full handshakes for a while, and one event until it answers again.
    fn store_failed(&mut self, error: String) {
        if let Some(store) = &mut self.store {
            store.down_until = Some(tokio::time::Instant::now() + STORE_BACKOFF);
        }
        if !self.store_down_reported.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let _ = self.events.send(ServerEvent::SessionStoreUnavailable { error });
        }
    }

    fn session(&self, connection: ConnectionHandle) -> SessionHandle {
        SessionHandle { worker: self.worker, connection }
    }

    /// Applies the cookie keys of the server's schedule that fell due, in order.
    fn rotate_due_cookie_keys(&mut self, endpoint: &mut Endpoint) {
        if !self.cookie_rotation.apply_due(|key| endpoint.rotate_cookie_key(key)) {
            return;
        }
        // Forget peers whose connection the engine has dropped without an event.
        self.remotes.retain(|&h, _| endpoint.connection(h).is_some());
        let known: std::collections::HashSet<SocketAddr> = self.remotes.values().copied().collect();
        self.return_paths.retain(|remote, _| known.contains(remote));
    }

    /// A datagram arrived at `local` from `remote`.
    fn receive(
        &mut self,
        endpoint: &mut Endpoint,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        if let Some(trace) = &self.trace {
            trace(Direction::Received, remote, datagram);
        }
        endpoint.handle_datagram(self.clock.now(), local, remote, datagram);
        // A ClientHello naming a session another worker or node made: it waits in the engine
        // for the store's answer.
        while let Some(id) = endpoint.poll_session_lookup() {
            let asked = match &self.store {
                Some(store) if !store.busy() => {
                    self.stats.store_lookups += 1;
                    store.look_up(id)
                }
                // A store busy or down: a miss.
                _ => Some(Ok(None)),
            };
            // Without an answer now, it comes back as a `LookupDone`.
            let Some(answer) = asked else { continue };
            let found = answer.unwrap_or_else(|error| {
                self.store_failed(error.to_string());
                None
            });
            self.stats.store_hits += u64::from(found.is_some());
            endpoint.answer_session_lookup(self.clock.now(), id, found.as_deref());
        }
    }
}

async fn run_server(
    mut welcome: DatagramSocket,
    mut peers: Peers,
    config: Arc<ServerConfig>,
    options: ServerOptions,
    mut commands: mpsc::UnboundedReceiver<ServerCommand>,
    events: mpsc::UnboundedSender<ServerEvent>,
) -> Result<WorkerStats, DriverError> {
    let clock = Clock::new();
    let welcome_addr = welcome.local_addr()?;
    let config = server_config_with_clock(config, &clock);
    let cid_len = usize::from(config.mobility.connection_id.unwrap_or(0));
    let workers = peers.forward_to.len();
    let session_lifetime = config.session_cache.lifetime;
    let mut endpoint = Endpoint::new(config, os_seed());
    endpoint.rotate_cookie_key(peers.cookie_key);
    if let Some(cache) = peers.client_chains.take() {
        endpoint.share_client_cert_cache(cache);
    }
    let node = options.fleet.as_ref().map(|f| f.node);
    match node {
        Some(node) => endpoint.set_cid_prefix(&crate::fleet::cid_prefix(cid_len as u8, node, peers.index)),
        None if workers > 1 => endpoint.set_cid_prefix(&[peers.index]),
        None => {}
    }
    let (lookup_tx, mut lookups_done) = mpsc::channel::<LookupDone>(STORE_IN_FLIGHT);
    let (failure_tx, mut store_failures) = mpsc::channel::<String>(16);
    let seal_keys = peers.seal_keys.take();
    let store = options.session_store.clone().map(|store| {
        match seal_keys {
            Some(keys) => endpoint.share_sessions_sealed_by(keys),
            None => endpoint.share_sessions(),
        }
        StoreLink {
            store,
            done: lookup_tx,
            failures: failure_tx,
            in_flight: Arc::default(),
            ttl: session_lifetime,
            down_until: None,
        }
    });
    let mut answers = peers.answers.take();
    if let Some(idle) = options.idle_timeout {
        endpoint.set_idle_timeout(Some(idle));
    }
    let mut next_sweep = tokio::time::Instant::now() + SOCKET_SWEEP;
    let (sockets, mut incoming) = SessionSockets::new(welcome_addr);
    let mut driver = ServerDriver {
        clock,
        mode: options.mobility,
        trace: options.trace.clone(),
        worker: peers.index,
        welcome_addr,
        outgoing: SendQueue::default(),
        stats: WorkerStats { batched: welcome.is_batched(), ..WorkerStats::default() },
        sockets,
        events,
        remotes: HashMap::new(),
        ended: Vec::new(),
        return_paths: HashMap::new(),
        fleet_out: peers.fleet_out.clone(),
        store,
        store_down_reported: peers.store_down_reported.clone(),
        cookie_rotation: peers.cookie_rotation,
    };
    let mut shutting_down = false;
    let mut commands_open = true;
    // One timer for every deadline of the loop (the engine's, the socket sweep, the next cookie
    // key), moved only when the earliest moves: a timer made afresh on every pass would be
    // registered in and removed from tokio's wheel on every pass, which a flood pays per batch.
    // Ticket keys come by command.
    let timer = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(timer);

    loop {
        // Events first: a session accepted just now gets its socket before its first flight goes.
        driver.handle_events(&mut endpoint);
        driver.flush(&mut endpoint, &welcome).await;

        if shutting_down {
            driver.stats.endpoint = endpoint.stats();
            return Ok(driver.stats);
        }

        // Once per pass (a batch of datagrams), not per datagram: the keys that fell due, so a
        // cookie another worker made under a new key opens here too.
        driver.rotate_due_cookie_keys(&mut endpoint);
        let engine_at = endpoint.poll_timeout().map(|t| driver.clock.to_tokio(t));
        let sweep_at = (!driver.sockets.is_empty()).then_some(next_sweep);
        let rotation_at = driver.cookie_rotation.next_due();
        let wake_at = [engine_at, sweep_at, rotation_at].into_iter().flatten().min();
        if let Some(at) = wake_at.filter(|&at| at != timer.deadline()) {
            timer.as_mut().reset(at);
        }
        tokio::select! {
            ready = welcome.readable() => {
                ready?;
                let me = peers.index;
                let forward_to = &peers.forward_to;
                let received = welcome.try_recv(|remote, datagram| {
                    driver.stats.datagrams_received += 1;
                    match crate::fleet::cid_owner(datagram, cid_len, node, me, workers) {
                        // The kernel chose by 4-tuple and the client has moved: its session lives
                        // with another worker. A full queue drops it, as a full socket would.
                        Some(CidOwner::Worker(owner)) => {
                            let incoming = Incoming { local: welcome_addr, remote, datagram: datagram.to_vec() };
                            if forward_to[owner].try_send(Passed { incoming, via: None }).is_ok() {
                                driver.stats.passed_on += 1;
                            }
                        }
                        // A load balancer or a NAT sent the client here: its session is another
                        // node's.
                        Some(CidOwner::Node(owner)) => {
                            let out = FleetOut::Forward { node: owner, remote, datagram: datagram.to_vec() };
                            if driver.fleet_out.as_ref().is_some_and(|o| o.try_send(out).is_ok()) {
                                driver.stats.forwarded_to_nodes += 1;
                            }
                        }
                        None => {
                            if !driver.return_paths.is_empty() {
                                driver.return_paths.remove(&remote);
                            }
                            driver.receive(&mut endpoint, welcome_addr, remote, datagram)
                        }
                    }
                });
                match received {
                    Ok(_) => {}
                    Err(error) if is_icmp_error(&error) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            Some(Passed { incoming: mut arrived, via }) = peers.forwarded.recv() => {
                match via {
                    Some(node) => {
                        driver.stats.forwarded_from_nodes += 1;
                        if driver.return_paths.len() < MAX_RETURN_PATHS || driver.return_paths.contains_key(&arrived.remote) {
                            driver.return_paths.insert(arrived.remote, node);
                        }
                    }
                    None => driver.stats.taken_over += 1,
                }
                driver.receive(&mut endpoint, arrived.local, arrived.remote, &mut arrived.datagram);
            }
            Some((remote, datagram)) = async { answers.as_mut()?.recv().await }, if answers.is_some() => {
                driver.outgoing.push(&welcome, remote, &datagram);
            }
            Some(LookupDone { id, answer }) = lookups_done.recv() => {
                let found = match answer {
                    Ok(found) => {
                        driver.store_down_reported.store(false, std::sync::atomic::Ordering::Relaxed);
                        found
                    }
                    Err(error) => {
                        driver.store_failed(error.to_string());
                        None
                    }
                };
                if found.is_some() {
                    driver.stats.store_hits += 1;
                }
                endpoint.answer_session_lookup(driver.clock.now(), id, found.as_deref());
            }
            Some(error) = store_failures.recv() => driver.store_failed(error),
            Some(mut arrived) = incoming.recv() => {
                driver.receive(&mut endpoint, arrived.local, arrived.remote, &mut arrived.datagram);
            }
            () = &mut timer, if wake_at.is_some() => {
                let now = tokio::time::Instant::now();
                if engine_at.is_some_and(|at| at <= now) {
                    endpoint.handle_timeout(driver.clock.now());
                }
                if sweep_at.is_some_and(|at| at <= now) {
                    driver.sockets.retain(|h| endpoint.connection(h).is_some());
                    next_sweep = now + SOCKET_SWEEP;
                }
            }
            command = commands.recv(), if commands_open => match command {
                Some(ServerCommand::SetTicketKeys(keys)) => endpoint.set_ticket_keys(keys),
                Some(ServerCommand::Send(handle, data)) => {
                    // The engine dates a send by the latest time it was given (session slots
                    // evict the least recently used): give it the time now.
                    endpoint.handle_timeout(driver.clock.now());
                    // A send to a connection that is gone or not established is dropped: the
                    // caller learns of the end through Closed/Failed.
                    let _ = endpoint.send(handle, &data);
                }
                Some(ServerCommand::Close(handle)) => endpoint.close(handle),
                Some(ServerCommand::Stats(reply)) => {
                    let _ = reply.send(WorkerStats { endpoint: endpoint.stats(), ..driver.stats.clone() });
                }
                Some(ServerCommand::Shutdown) | None => {
                    commands_open = false;
                    for &h in driver.remotes.keys() {
                        endpoint.close(h);
                    }
                    shutting_down = true;
                }
            },
        }
    }
}

/// Whether a record header can start with these bytes: a known content type and DTLS version.
fn plausible_record_header(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(20..=23 | 25 | 27)) && matches!(bytes.get(1..3), Some([0xfe, 0xfd | 0xff]))
}

/// How many leading bytes of `datagram` continue a record split across datagrams: the datagram
/// does not start with a record header, and from some point on holds whole records only.
fn split_record_rest(datagram: &[u8]) -> Option<usize> {
    if plausible_record_header(datagram) {
        return None;
    }
    let whole = |mut d: &[u8]| {
        while d.len() >= 13 && plausible_record_header(d) {
            let end = 13 + usize::from(u16::from_be_bytes([d[11], d[12]]));
            let Some(next) = d.get(end..) else { return false };
            d = next;
        }
        d.is_empty()
    };
    (1..datagram.len()).find(|&k| plausible_record_header(&datagram[k..]) && whole(&datagram[k..]))
}

/// Names the DTLS records in a datagram, from their plaintext headers only: content type, epoch,
/// and for unencrypted handshake records the message names (and fragment ranges). For the demo
/// and for tracing; it never fails, it describes what it cannot parse as such.
pub fn describe_datagram(datagram: &[u8]) -> Vec<String> {
    const RECORD_HEADER: usize = 13;
    let mut out = Vec::new();
    let mut rest = datagram;
    // The rest of a record its sender split across datagrams (RFC 6347 §4.1.1 forbids it; OpenSSL
    // 3.0 does it on loopback): bytes that are no record header, followed by whole records.
    if let Some(k) = split_record_rest(datagram) {
        out.push(format!("{k} B continuing a record split across datagrams"));
        rest = &datagram[k..];
    }
    while !rest.is_empty() {
        let Some(header) = rest.get(..RECORD_HEADER) else {
            out.push(format!("{} trailing byte(s)", rest.len()));
            break;
        };
        let content_type = header[0];
        let epoch = u16::from_be_bytes([header[3], header[4]]);
        if content_type == 25 {
            // tls12_cid (RFC 9146): the CID sits between the sequence number and the length,
            // and only its receiver knows how long it is; take the length that makes the record
            // end where the datagram or a next record header does.
            match tls12_cid_record_len(rest) {
                Some((cid_len, length)) => {
                    out.push(format!("tls12_cid record (CID {cid_len} B, {length} B encrypted)"));
                    rest = &rest[RECORD_HEADER + cid_len + length..];
                    continue;
                }
                None => {
                    out.push("tls12_cid record (unparsed)".to_owned());
                    break;
                }
            }
        }
        let length = usize::from(u16::from_be_bytes([header[11], header[12]]));
        let Some(body) = rest.get(RECORD_HEADER..RECORD_HEADER + length) else {
            let got = rest.len() - RECORD_HEADER.min(rest.len());
            out.push(format!("truncated record (type {content_type}, {got} of {length} B)"));
            break;
        };
        rest = &rest[RECORD_HEADER + length..];
        match (content_type, epoch) {
            (20, _) => out.push("ChangeCipherSpec".to_owned()),
            (21, 0) => out.push(describe_plain_alert(body)),
            (21, _) => out.push("Alert (encrypted)".to_owned()),
            (22, 0) => describe_handshake(body, &mut out),
            // In DTLS 1.2 the only handshake message of epoch 1 is Finished.
            (22, _) => out.push("Finished (encrypted)".to_owned()),
            (23, _) => out.push(format!("ApplicationData ({length} B encrypted)")),
            (27, _) => out.push("return_routability_check (encrypted)".to_owned()),
            (other, _) => out.push(format!("record of content type {other}")),
        }
    }
    out
}

/// The CID length and ciphertext length of the `tls12_cid` record at the start of `rest`.
fn tls12_cid_record_len(rest: &[u8]) -> Option<(usize, usize)> {
    (0..=usize::from(u8::MAX)).find_map(|cid_len| {
        let at = 11 + cid_len;
        let length = usize::from(u16::from_be_bytes([*rest.get(at)?, *rest.get(at + 1)?]));
        let end = at + 2 + length;
        let next_is_header =
            rest.get(end..end + 3).is_some_and(|h| (20..=27).contains(&h[0]) && h[1..] == [0xfe, 0xfd]);
        (end == rest.len() || next_is_header).then_some((cid_len, length))
    })
}

fn describe_plain_alert(body: &[u8]) -> String {
    match body {
        [level, description, ..] => {
            format!("Alert ({}, description {description})", if *level == 2 { "fatal" } else { "warning" })
        }
        _ => "Alert (truncated)".to_owned(),
    }
}

fn describe_handshake(mut body: &[u8], out: &mut Vec<String>) {
    const HANDSHAKE_HEADER: usize = 12;
    while !body.is_empty() {
        let Some(header) = body.get(..HANDSHAKE_HEADER) else {
            out.push("truncated handshake header".to_owned());
            return;
        };
        let msg_type = header[0];
        let total = u24(&header[1..4]);
        let offset = u24(&header[6..9]);
        let fragment_len = u24(&header[9..12]);
        let Some(fragment) = body.get(HANDSHAKE_HEADER..HANDSHAKE_HEADER + fragment_len) else {
            out.push(format!("{} (truncated)", handshake_name(msg_type)));
            return;
        };
        body = &body[HANDSHAKE_HEADER + fragment_len..];
        let mut name = handshake_name(msg_type).to_owned();
        if offset == 0 {
            match msg_type {
                1 => {
                    if let Some(cookie) = client_hello_cookie_len(fragment) {
                        name = if cookie == 0 {
                            "ClientHello (no cookie)".to_owned()
                        } else {
                            format!("ClientHello (cookie {cookie} B)")
                        };
                    }
                }
                3 => {
                    if let Some(&cookie) = fragment.get(2) {
                        name = format!("HelloVerifyRequest (cookie {cookie} B)");
                    }
                }
                _ => {}
            }
        }
        if offset != 0 || fragment_len != total {
            name.push_str(&format!(" [fragment {offset}..{} of {total} B]", offset + fragment_len));
        }
        out.push(name);
    }
}

fn u24(bytes: &[u8]) -> usize {
    bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
}

/// The cookie length of a ClientHello body: version(2) random(32) session_id<0..32> cookie<0..255>.
fn client_hello_cookie_len(body: &[u8]) -> Option<usize> {
    let session_id_len = usize::from(*body.get(34)?);
    body.get(35 + session_id_len).map(|&len| usize::from(len))
}

fn handshake_name(msg_type: u8) -> &'static str {
    match msg_type {
        0 => "HelloRequest",
        1 => "ClientHello",
        2 => "ServerHello",
        3 => "HelloVerifyRequest",
        4 => "NewSessionTicket",
        11 => "Certificate",
        12 => "ServerKeyExchange",
        13 => "CertificateRequest",
        14 => "ServerHelloDone",
        15 => "CertificateVerify",
        16 => "ClientKeyExchange",
        20 => "Finished",
        _ => "unknown handshake message",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(content_type: u8, epoch: u16, body: &[u8]) -> Vec<u8> {
        let mut r = vec![content_type, 0xfe, 0xfd];
        r.extend_from_slice(&epoch.to_be_bytes());
        r.extend_from_slice(&[0, 0, 0, 0, 0, 1]);
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    }

    fn handshake(msg_type: u8, total: usize, offset: usize, fragment: &[u8]) -> Vec<u8> {
        let mut h = vec![msg_type];
        h.extend_from_slice(&(total as u32).to_be_bytes()[1..]);
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&(offset as u32).to_be_bytes()[1..]);
        h.extend_from_slice(&(fragment.len() as u32).to_be_bytes()[1..]);
        h.extend_from_slice(fragment);
        h
    }

    #[test]
    fn describes_a_flight_of_several_records() {
        let mut hello = vec![0xfe, 0xfd];
        hello.extend_from_slice(&[7; 32]);
        hello.push(0); // session id
        hello.push(3); // cookie length
        hello.extend_from_slice(&[1, 2, 3]);
        let mut datagram = record(22, 0, &handshake(1, hello.len(), 0, &hello));
        datagram.extend(record(20, 0, &[1]));
        datagram.extend(record(22, 1, &[0; 40]));
        assert_eq!(
            describe_datagram(&datagram),
            vec!["ClientHello (cookie 3 B)", "ChangeCipherSpec", "Finished (encrypted)"]
        );
    }

    #[test]
    fn names_fragments_and_survives_garbage() {
        let datagram = record(22, 0, &handshake(12, 100, 40, &[0; 20]));
        assert_eq!(describe_datagram(&datagram), vec!["ServerKeyExchange [fragment 40..60 of 100 B]"]);
        assert_eq!(describe_datagram(&[22, 0xfe]), vec!["2 trailing byte(s)"]);
        let mut truncated = record(23, 1, &[0; 30]);
        truncated.truncate(20);
        assert_eq!(describe_datagram(&truncated), vec!["truncated record (type 23, 7 of 30 B)"]);
        // The rest of a split record, then a ChangeCipherSpec.
        let mut continued = vec![0x83, 7, 7];
        continued.extend(record(20, 0, &[1]));
        assert_eq!(
            describe_datagram(&continued),
            vec!["3 B continuing a record split across datagrams", "ChangeCipherSpec"]
        );
    }

    #[test]
    fn finds_the_length_of_a_tls12_cid_record_behind_its_cid() {
        let cid_record = |cid: &[u8], length: usize| {
            let mut r = vec![25, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9];
            r.extend_from_slice(cid);
            r.extend_from_slice(&(length as u16).to_be_bytes());
            r.extend(std::iter::repeat_n(0xa5, length));
            r
        };
        assert_eq!(
            describe_datagram(&cid_record(&[1, 2, 3, 4], 30)),
            vec!["tls12_cid record (CID 4 B, 30 B encrypted)"]
        );
        let mut two = cid_record(&[9; 8], 20);
        two.extend(record(21, 1, &[0; 26]));
        assert_eq!(
            describe_datagram(&two),
            vec!["tls12_cid record (CID 8 B, 20 B encrypted)", "Alert (encrypted)"]
        );
    }

    fn loopback() -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
    }

    fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> impl std::future::Future<Output = T> {
        let what = what.to_owned();
        async move {
            tokio::time::timeout(Duration::from_secs(10), f)
                .await
                .unwrap_or_else(|_| panic!("{what} did not happen within 10 s"))
        }
    }

    #[tokio::test]
    async fn client_and_server_exchange_records_and_close() {
        let server_config = Arc::new(ServerConfig::psk("id", [7u8; 16]));
        let mut server = DtlsServer::bind(loopback(), server_config, ServerOptions::default()).await.unwrap();
        let client_config = Arc::new(ClientConfig::psk("id", [7u8; 16]));
        let connect = DtlsClient::connect(server.local_addr(), client_config, ClientOptions::default());
        let mut client = step("handshake", connect).await.unwrap();
        assert!(client.summary().datagrams_sent >= 2, "ClientHello twice (cookie), then the final flight");

        let handle = match step("server Connected", server.next_event()).await {
            Some(ServerEvent::Connected { handle, remote, .. }) => {
                assert_eq!(remote, client.local_addr());
                handle
            }
            other => panic!("expected Connected, got {other:?}"),
        };
        client.send(b"to the server".to_vec()).unwrap();
        match step("server Data", server.next_event()).await {
            Some(ServerEvent::Data { data, .. }) => assert_eq!(data, b"to the server"),
            other => panic!("expected Data, got {other:?}"),
        }
        server.send(handle, b"to the client".to_vec()).unwrap();
        match step("client Data", client.recv()).await {
            Some(ClientEvent::Data(data)) => assert_eq!(data, b"to the client"),
            other => panic!("expected Data, got {other:?}"),
        }

        // A server shutdown closes its sessions with close_notify.
        step("shutdown", server.shutdown()).await.unwrap();
        match step("client Closed", client.recv()).await {
            Some(ClientEvent::Closed) => {}
            other => panic!("expected Closed, got {other:?}"),
        }
        let traffic = step("client end", client.close()).await.unwrap();
        assert!(traffic.datagrams_received >= 3 && traffic.bytes_received > 0, "{traffic:?}");
    }

    #[tokio::test]
    async fn one_server_serves_many_clients_at_once() {
        const CLIENTS: usize = 16;
        let server_config = Arc::new(ServerConfig::psk("id", [9u8; 16]));
        let mut server = DtlsServer::bind(loopback(), server_config, ServerOptions::default()).await.unwrap();
        let addr = server.local_addr();
        let controller = server.controller();
        // The server echoes every record to its sender.
        let connected = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&connected);
        let echo = tokio::spawn(async move {
            while let Some(event) = server.next_event().await {
                match event {
                    ServerEvent::Connected { .. } => {
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    ServerEvent::Data { handle, data, .. } => controller.send(handle, data).unwrap(),
                    ServerEvent::Closed { .. } => {}
                    ServerEvent::Failed { error, .. } => panic!("a session failed: {error}"),
                    other => panic!("standard sessions do not move: {other:?}"),
                }
            }
        });
        let clients = (0..CLIENTS).map(|i| {
            tokio::spawn(async move {
                let config = Arc::new(ClientConfig::psk("id", [9u8; 16]));
                let mut client = DtlsClient::connect(addr, config, ClientOptions::default()).await.unwrap();
                let message = format!("client {i}").into_bytes();
                client.send(message.clone()).unwrap();
                match client.recv().await {
                    Some(ClientEvent::Data(data)) => {
                        assert_eq!(data, message, "each client gets its own echo")
                    }
                    other => panic!("client {i}: expected its echo, got {other:?}"),
                }
                client.close().await.unwrap();
            })
        });
        let all = futures_join_all(clients.collect());
        step("all clients echoed", all).await;
        echo.abort();
        assert_eq!(connected.load(std::sync::atomic::Ordering::Relaxed), CLIENTS);
    }

    /// Awaits every task, failing on the first panic.
    async fn futures_join_all(tasks: Vec<JoinHandle<()>>) {
        for task in tasks {
            task.await.expect("a client task panicked");
        }
    }

    #[tokio::test]
    async fn a_cancelled_connect_stops_retransmitting() {
        let silent = std::net::UdpSocket::bind(loopback()).unwrap();
        silent.set_nonblocking(true).unwrap();
        let config = Arc::new(ClientConfig {
            initial_retransmit: Duration::from_millis(20),
            max_retransmit: Duration::from_millis(20),
            ..ClientConfig::psk("id", [7u8; 16])
        });
        let connect = DtlsClient::connect(silent.local_addr().unwrap(), config, ClientOptions::default());
        assert!(tokio::time::timeout(Duration::from_millis(100), connect).await.is_err());
        let drain = |socket: &std::net::UdpSocket| {
            let mut buf = [0u8; 2048];
            std::iter::from_fn(|| socket.recv(&mut buf).ok()).count()
        };
        assert!(drain(&silent) >= 2, "the client was retransmitting before the cancellation");
        // A retransmission every 20 ms while alive: a quiet 100 ms means the task has stopped.
        let quiet = async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if drain(&silent) == 0 {
                    break;
                }
            }
        };
        step("the abandoned handshake going quiet", quiet).await;
    }

    #[tokio::test]
    async fn a_silent_server_gives_no_answer_after_retransmissions() {
        let silent = std::net::UdpSocket::bind(loopback()).unwrap();
        let config = Arc::new(ClientConfig {
            initial_retransmit: Duration::from_millis(20),
            handshake_timeout: Duration::from_millis(300),
            ..ClientConfig::psk("id", [7u8; 16])
        });
        let result = step(
            "giving up",
            DtlsClient::connect(silent.local_addr().unwrap(), config, ClientOptions::default()),
        )
        .await;
        match result {
            Err(DriverError::NoAnswer { retransmissions, elapsed }) => {
                assert!(retransmissions >= 1, "{retransmissions}");
                assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
            }
            Err(other) => panic!("expected NoAnswer, got {other}"),
            Ok(_) => panic!("a silent server cannot complete a handshake"),
        }
    }

    #[tokio::test]
    async fn a_client_resumes_the_session_of_an_earlier_handshake() {
        for tickets in [false, true] {
            let server_config = Arc::new(ServerConfig {
                tickets: tickets.then(os_ticket_keys),
                ..ServerConfig::psk("id", [5u8; 16])
            });
            let server = DtlsServer::bind(loopback(), server_config, ServerOptions::default()).await.unwrap();
            let client_config =
                Arc::new(ClientConfig { enable_tickets: tickets, ..ClientConfig::psk("id", [5u8; 16]) });
            let connect = DtlsClient::connect(
                server.local_addr(),
                Arc::clone(&client_config),
                ClientOptions::default(),
            );
            let first = step("full handshake", connect).await.unwrap();
            assert_eq!(first.summary().resumption, None);
            let session = first.summary().session.clone().expect("the server issued a session");
            assert_eq!(session.has_ticket(), tickets);
            step("first close", first.close()).await.unwrap();

            let options = ClientOptions { session: Some(session), ..ClientOptions::default() };
            let connect = DtlsClient::connect(server.local_addr(), client_config, options);
            let second = step("resumed handshake", connect).await.unwrap();
            let expected = if tickets { Resumption::Ticket } else { Resumption::SessionId };
            assert_eq!(second.summary().resumption, Some(expected));
            assert!(resumption_text(second.summary()).starts_with("resumed by "));
            step("second close", second.close()).await.unwrap();
            step("shutdown", server.shutdown()).await.unwrap();
        }
    }

    #[test]
    fn os_seeds_differ() {
        assert_ne!(os_seed(), os_seed());
    }
}
