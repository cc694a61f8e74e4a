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
#![forbid(unsafe_code)]

use fastshake_core::Instant;
use fastshake_dtls::{
    ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, Error as DtlsError, Event,
    HandshakeSummary, Resumption, ServerConfig, Stats, TicketKey, TicketKeys, WallClock,
};
use rand_core::{OsRng, RngCore};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Largest UDP payload we accept; bigger datagrams cannot arrive over UDP/IPv4 anyway.
const RECEIVE_BUFFER: usize = 65_536;

/// How often a server replaces its HelloVerifyRequest cookie key. The engine keeps the previous
/// key too, so a handshake in progress survives one rotation.
pub const DEFAULT_COOKIE_ROTATION: Duration = Duration::from_secs(120);

/// How often a server replaces its session-ticket key (RFC 5077). Tickets sealed under the
/// previous key still open, so a ticket opens for at least one rotation period: this equals the
/// default ticket lifetime of [`TicketKeys::new`] (2 h), so a ticket lasts as long as its hint says.
pub const DEFAULT_TICKET_ROTATION: Duration = Duration::from_secs(2 * 3600);

/// Maps the process's monotonic clock onto engine time, counted from the moment of `new`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Clock { base: std::time::Instant::now() }
    }

    /// The current engine time.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// The std instant matching engine time `t` (for timers); far in the future if unrepresentable.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.base
            .checked_add(t.since_origin())
            .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(86_400 * 365))
    }

    /// Pins Unix time (the system clock, now) to engine time, for certificate validity and
    /// session lifetimes.
    pub fn wall_clock(&self) -> WallClock {
        let unix_secs =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        WallClock { at: self.now(), unix_secs }
    }
}

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

/// The one-line handshake summary both `fastshake server` and `fastshake client` print.
pub fn summary_line(summary: &HandshakeSummary) -> String {
    format!(
        "handshake done: {}, {}, {}, {:.2} ms, {} flight(s) sent + {} resent; sent {} datagrams / {} B, received {} datagrams / {} B",
        summary.suite.iana_name(),
        resumption_text(summary),
        if summary.extended_master_secret {
            "with extended master secret"
        } else {
            "without extended master secret"
        },
        summary.duration.as_secs_f64() * 1e3,
        summary.flights_sent,
        summary.retransmissions,
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
    /// The socket failed.
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
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

/// Options of a [`DtlsClient`] beyond the engine's [`ClientConfig`].
#[derive(Clone, Default)]
pub struct ClientOptions {
    /// Local address to bind; default: the loopback address for a loopback peer, else the
    /// unspecified address of the peer's family, port 0.
    pub bind: Option<SocketAddr>,
    /// Sees every datagram.
    pub trace: Option<DatagramTrace>,
    /// An earlier session to offer for resumption (by ticket if it has one, else by session ID);
    /// the server may decline, and the handshake is then a full one.
    pub session: Option<ClientSession>,
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("bind", &self.bind)
            .field("trace", &self.trace.is_some())
            .field("session", &self.session)
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
}

enum ClientCommand {
    Send(Vec<u8>),
    Close,
}

/// A DTLS client session on its own UDP socket, driven by a tokio task.
///
/// Dropping it (or cancelling [`DtlsClient::connect`]) closes the command channel, and the task
/// then sends close_notify (or abandons the handshake) and ends by itself.
pub struct DtlsClient {
    local_addr: SocketAddr,
    remote: SocketAddr,
    summary: HandshakeSummary,
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
        // A connected socket only delivers datagrams from the server.
        socket.connect(remote).await?;
        let local_addr = socket.local_addr()?;
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        let (handshake_tx, handshake_rx) = oneshot::channel();
        let task =
            tokio::spawn(run_client(socket, remote, config, options, command_rx, event_tx, handshake_tx));
        match handshake_rx.await {
            Ok(Ok(summary)) => {
                Ok(DtlsClient { local_addr, remote, summary, commands: command_tx, events: event_rx, task })
            }
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

    /// The local socket address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// How the handshake went.
    pub fn summary(&self) -> &HandshakeSummary {
        &self.summary
    }

    /// Queues `data` as one application record (the engine splits it if it exceeds the MTU).
    pub fn send(&self, data: Vec<u8>) -> Result<(), DriverError> {
        self.commands.send(ClientCommand::Send(data)).map_err(|_| DriverError::TaskStopped)
    }

    /// The next event; `None` once the session has ended and every event was taken.
    pub async fn recv(&mut self) -> Option<ClientEvent> {
        self.events.recv().await
    }

    /// Sends close_notify after everything queued, and returns the session's traffic totals.
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

fn timer(clock: &Clock, deadline: Option<Instant>) -> tokio::time::Sleep {
    let at = match deadline {
        Some(t) => clock.to_std(t),
        None => std::time::Instant::now() + Duration::from_secs(86_400),
    };
    tokio::time::sleep_until(tokio::time::Instant::from_std(at))
}

type HandshakeVerdict = Result<HandshakeSummary, DriverError>;

async fn run_client(
    socket: UdpSocket,
    remote: SocketAddr,
    config: Arc<ClientConfig>,
    options: ClientOptions,
    mut commands: mpsc::UnboundedReceiver<ClientCommand>,
    events: mpsc::UnboundedSender<ClientEvent>,
    handshake: oneshot::Sender<HandshakeVerdict>,
) -> Result<Traffic, DriverError> {
    let clock = Clock::new();
    let started = clock.now();
    let config = client_config_with_clock(config, &clock);
    let ClientOptions { trace, session, .. } = options;
    let mut connection = Connection::client_with_session(config, started, remote, os_seed(), session);
    let mut handshake = Some(handshake);
    let mut buffer = vec![0u8; RECEIVE_BUFFER];
    let mut closing = false;
    let mut commands_open = true;

    loop {
        let now = clock.now();
        while let Some(transmit) = connection.poll_transmit(now) {
            if let Some(trace) = &trace {
                trace(Direction::Sent, remote, &transmit.payload);
            }
            if let Err(error) = socket.send(&transmit.payload).await {
                if !is_icmp_error(&error) {
                    return Err(fail_client(&events, &mut handshake, error.into()));
                }
            }
        }

        while let Some(event) = connection.poll_event() {
            match event {
                Event::Connected(summary) => {
                    if let Some(tx) = handshake.take() {
                        let _ = tx.send(Ok(summary));
                    }
                }
                Event::ApplicationData(data) => {
                    let _ = events.send(ClientEvent::Data(data));
                }
                Event::Closed => {
                    let _ = events.send(ClientEvent::Closed);
                    closing = true;
                }
                // Session mobility (not used by this driver yet).
                Event::Accepted | Event::PathChanged(_) => {}
                Event::Failed(error) => {
                    let elapsed = clock.now() - started;
                    return Err(fail_client(
                        &events,
                        &mut handshake,
                        DriverError::from_engine(error, elapsed),
                    ));
                }
            }
        }

        if closing || connection.is_closed() {
            if let Some(tx) = handshake.take() {
                let _ = tx.send(Err(DriverError::Dtls(DtlsError::Closed)));
            }
            return Ok(Traffic::from(connection.stats()));
        }

        let deadline = connection.poll_timeout();
        tokio::select! {
            received = socket.recv(&mut buffer) => match received {
                Ok(len) => {
                    let datagram = &mut buffer[..len];
                    if let Some(trace) = &trace {
                        trace(Direction::Received, remote, datagram);
                    }
                    connection.handle_datagram(clock.now(), remote, datagram);
                }
                Err(error) if is_icmp_error(&error) => {}
                Err(error) => return Err(fail_client(&events, &mut handshake, error.into())),
            },
            _ = timer(&clock, deadline), if deadline.is_some() => connection.handle_timeout(clock.now()),
            command = commands.recv(), if commands_open => match command {
                Some(ClientCommand::Send(data)) => {
                    if let Err(error) = connection.send(&data) {
                        let _ = events.send(ClientEvent::SendFailed(error));
                    }
                }
                Some(ClientCommand::Close) | None => {
                    commands_open = false;
                    connection.close();
                    // close_notify is flushed at the top of the loop, then the task ends.
                    closing = true;
                }
            },
        }
    }
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
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            trace: None,
            cookie_rotation: DEFAULT_COOKIE_ROTATION,
            ticket_rotation: DEFAULT_TICKET_ROTATION,
        }
    }
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("trace", &self.trace.is_some())
            .field("cookie_rotation", &self.cookie_rotation)
            .field("ticket_rotation", &self.ticket_rotation)
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
        handle: ConnectionHandle,
        /// The client's address.
        remote: SocketAddr,
        /// How the handshake went.
        summary: HandshakeSummary,
    },
    /// One application record from a client.
    Data {
        /// The connection.
        handle: ConnectionHandle,
        /// The client's address.
        remote: SocketAddr,
        /// The record's content.
        data: Vec<u8>,
    },
    /// A client closed its session with close_notify.
    Closed {
        /// The connection.
        handle: ConnectionHandle,
        /// The client's address, if still known.
        remote: Option<SocketAddr>,
    },
    /// A connection failed (fatal alert, handshake timeout).
    Failed {
        /// The connection.
        handle: ConnectionHandle,
        /// The client's address, if still known.
        remote: Option<SocketAddr>,
        /// Why.
        error: DtlsError,
    },
}

enum ServerCommand {
    Send(ConnectionHandle, Vec<u8>),
    Close(ConnectionHandle),
    Shutdown,
}

/// A DTLS server: one UDP socket, one [`Endpoint`], many clients, driven by a tokio task.
pub struct DtlsServer {
    local_addr: SocketAddr,
    commands: mpsc::UnboundedSender<ServerCommand>,
    events: mpsc::UnboundedReceiver<ServerEvent>,
    task: JoinHandle<Result<(), DriverError>>,
}

impl DtlsServer {
    /// Binds `listen` and starts serving.
    pub async fn bind(
        listen: SocketAddr,
        config: Arc<ServerConfig>,
        options: ServerOptions,
    ) -> Result<DtlsServer, DriverError> {
        let socket = UdpSocket::bind(listen).await?;
        let local_addr = socket.local_addr()?;
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run_server(socket, config, options, command_rx, event_tx));
        Ok(DtlsServer { local_addr, commands: command_tx, events: event_rx, task })
    }

    /// The bound address (with the real port if `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that can send and close from another task while this one waits for events.
    pub fn controller(&self) -> ServerController {
        ServerController { commands: self.commands.clone() }
    }

    /// Queues `data` as one application record to connection `handle`.
    pub fn send(&self, handle: ConnectionHandle, data: Vec<u8>) -> Result<(), DriverError> {
        self.controller().send(handle, data)
    }

    /// Closes connection `handle` with close_notify.
    pub fn close(&self, handle: ConnectionHandle) -> Result<(), DriverError> {
        self.controller().close(handle)
    }

    /// The next event; `None` once the server has stopped.
    pub async fn next_event(&mut self) -> Option<ServerEvent> {
        self.events.recv().await
    }

    /// Closes every connection with close_notify and stops.
    pub async fn shutdown(self) -> Result<(), DriverError> {
        let _ = self.commands.send(ServerCommand::Shutdown);
        match self.task.await {
            Ok(result) => result,
            Err(_) => Err(DriverError::TaskStopped),
        }
    }
}

/// Sends to and closes connections of a running [`DtlsServer`].
#[derive(Clone)]
pub struct ServerController {
    commands: mpsc::UnboundedSender<ServerCommand>,
}

impl ServerController {
    /// Queues `data` as one application record to connection `handle`.
    pub fn send(&self, handle: ConnectionHandle, data: Vec<u8>) -> Result<(), DriverError> {
        self.commands.send(ServerCommand::Send(handle, data)).map_err(|_| DriverError::TaskStopped)
    }

    /// Closes connection `handle` with close_notify.
    pub fn close(&self, handle: ConnectionHandle) -> Result<(), DriverError> {
        self.commands.send(ServerCommand::Close(handle)).map_err(|_| DriverError::TaskStopped)
    }
}

async fn run_server(
    socket: UdpSocket,
    config: Arc<ServerConfig>,
    options: ServerOptions,
    mut commands: mpsc::UnboundedReceiver<ServerCommand>,
    events: mpsc::UnboundedSender<ServerEvent>,
) -> Result<(), DriverError> {
    let clock = Clock::new();
    let local = socket.local_addr()?;
    let config = server_config_with_clock(config, &clock);
    let issues_tickets = config.tickets.is_some();
    let mut endpoint = Endpoint::new(config, os_seed());
    endpoint.rotate_cookie_key(os_cookie_key());
    let mut next_rotation = tokio::time::Instant::now() + options.cookie_rotation;
    let mut next_ticket_rotation = tokio::time::Instant::now() + options.ticket_rotation;
    // Addresses of the engine's connections, so that Closed/Failed can still name the peer after
    // the engine has let the connection go. Bounded by the engine's connection table: entries
    // leave on Closed/Failed and at each cookie rotation if the engine no longer knows them.
    let mut remotes: HashMap<u64, SocketAddr> = HashMap::new();
    let mut buffer = vec![0u8; RECEIVE_BUFFER];
    let mut shutting_down = false;
    let mut commands_open = true;

    loop {
        let now = clock.now();
        while let Some(transmit) = endpoint.poll_transmit(now) {
            if let Some(trace) = &options.trace {
                trace(Direction::Sent, transmit.dst, &transmit.payload);
            }
            // A datagram that cannot be sent is a lost datagram: the engine's timers cope.
            let _ = socket.send_to(&transmit.payload, transmit.dst).await;
        }

        while let Some((handle, event)) = endpoint.poll_event() {
            let known = endpoint.connection(handle).map(|c| c.remote());
            match event {
                Event::Connected(summary) => {
                    let remote = known.or_else(|| remotes.get(&handle.0).copied());
                    if let Some(remote) = remote {
                        remotes.insert(handle.0, remote);
                        let _ = events.send(ServerEvent::Connected { handle, remote, summary });
                    }
                }
                Event::ApplicationData(data) => {
                    if let Some(remote) = known.or_else(|| remotes.get(&handle.0).copied()) {
                        let _ = events.send(ServerEvent::Data { handle, remote, data });
                    }
                }
                Event::Closed => {
                    let remote = known.or_else(|| remotes.remove(&handle.0));
                    remotes.remove(&handle.0);
                    let _ = events.send(ServerEvent::Closed { handle, remote });
                }
                Event::Failed(error) => {
                    let remote = known.or_else(|| remotes.remove(&handle.0));
                    remotes.remove(&handle.0);
                    let _ = events.send(ServerEvent::Failed { handle, remote, error });
                }
                // Session mobility (not used by this driver yet).
                Event::Accepted | Event::PathChanged(_) => {}
            }
        }

        if shutting_down {
            return Ok(());
        }

        let deadline = endpoint.poll_timeout();
        tokio::select! {
            received = socket.recv_from(&mut buffer) => match received {
                Ok((len, remote)) => {
                    let datagram = &mut buffer[..len];
                    if let Some(trace) = &options.trace {
                        trace(Direction::Received, remote, datagram);
                    }
                    endpoint.handle_datagram(clock.now(), local, remote, datagram);
                    // Remember the peer of a new connection now, so that a handshake failing
                    // before it completes can still be reported with the client's address.
                    if let Some(handle) = endpoint.handle_for(remote) {
                        remotes.entry(handle.0).or_insert(remote);
                    }
                }
                Err(error) if is_icmp_error(&error) => {}
                Err(error) => return Err(error.into()),
            },
            _ = timer(&clock, deadline), if deadline.is_some() => endpoint.handle_timeout(clock.now()),
            _ = tokio::time::sleep_until(next_rotation) => {
                endpoint.rotate_cookie_key(os_cookie_key());
                next_rotation = tokio::time::Instant::now() + options.cookie_rotation;
                // Forget peers whose connection the engine has dropped without an event.
                remotes.retain(|&id, _| endpoint.connection(ConnectionHandle(id)).is_some());
            }
            _ = tokio::time::sleep_until(next_ticket_rotation), if issues_tickets => {
                endpoint.rotate_ticket_key(os_ticket_key());
                next_ticket_rotation = tokio::time::Instant::now() + options.ticket_rotation;
            }
            command = commands.recv(), if commands_open => match command {
                Some(ServerCommand::Send(handle, data)) => {
                    // A send to a connection that is gone or not established is dropped: the
                    // caller learns of the end through Closed/Failed.
                    let _ = endpoint.send(handle, &data);
                }
                Some(ServerCommand::Close(handle)) => endpoint.close(handle),
                Some(ServerCommand::Shutdown) | None => {
                    commands_open = false;
                    for &id in remotes.keys() {
                        endpoint.close(ConnectionHandle(id));
                    }
                    shutting_down = true;
                }
            },
        }
    }
}

/// Names the DTLS records in a datagram, from their plaintext headers only: content type, epoch,
/// and for unencrypted handshake records the message names (and fragment ranges). For the demo
/// and for tracing; it never fails, it describes what it cannot parse as such.
pub fn describe_datagram(datagram: &[u8]) -> Vec<String> {
    const RECORD_HEADER: usize = 13;
    let mut out = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        let Some(header) = rest.get(..RECORD_HEADER) else {
            out.push(format!("{} trailing byte(s)", rest.len()));
            break;
        };
        let content_type = header[0];
        let epoch = u16::from_be_bytes([header[3], header[4]]);
        let length = usize::from(u16::from_be_bytes([header[11], header[12]]));
        let Some(body) = rest.get(RECORD_HEADER..RECORD_HEADER + length) else {
            out.push(format!("truncated record (type {content_type})"));
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
            (25, _) => out.push(format!("tls12_cid record ({length} B)")),
            (other, _) => out.push(format!("record of content type {other}")),
        }
    }
    out
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
        assert_eq!(describe_datagram(&truncated), vec!["truncated record (type 23)"]);
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
    fn clock_maps_engine_time_back_to_std_time() {
        let clock = Clock::new();
        let t = clock.now() + Duration::from_millis(250);
        let std_t = clock.to_std(t);
        assert_eq!(std_t.duration_since(clock.base), t.since_origin());
        assert_ne!(os_seed(), os_seed());
    }
}
