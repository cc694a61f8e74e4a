//! The client: a [`DtlsClient`] on its own UDP socket, and the task that drives its engine
//! [`Connection`] (handshakes, reconnections, held datagrams, refusals).

use super::{is_icmp_error, os_seed, DatagramTrace, Direction, DriverError, Traffic, RECEIVE_BUFFER};
use crate::icmp::{RefusalHook, RefusalsInARow};
use crate::Clock;
use fastshake_core::{Instant, Transmit};
use fastshake_dtls::{
    CachedServer, ClientConfig, ClientSession, Connection, Error as DtlsError, Event, HandshakeSummary,
};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// `config` with the driver's wall clock, unless the caller pinned one.
fn client_config_with_clock(config: Arc<ClientConfig>, clock: &Clock) -> Arc<ClientConfig> {
    if config.wall_clock.is_some() {
        return config;
    }
    Arc::new(ClientConfig { wall_clock: Some(clock.wall_clock()), ..(*config).clone() })
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
    ///
    /// It applies to a session whose handshake agreed nothing that carries it across a move: no
    /// connection ID (RFC 9146) and no `port_move`. That is every standard session, and one whose
    /// server declined the mobility the configuration offered; a session that agreed either
    /// follows the move instead and never reconnects on silence. Each handshake decides anew.
    pub app_timeout: Option<Duration>,
    /// How a reconnection after `app_timeout` (or [`DtlsClient::reconnect`]) is made. A
    /// reconnection handshake that gets no answer within the configuration's handshake timeout
    /// is started again; the session fails on a fatal alert, or when
    /// [`crate::icmp::REFUSALS_TO_GIVE_UP`] flights in a row are refused (nothing listens at the
    /// server's address), with [`DriverError::ReconnectFailed`]. Closed while the handshake is
    /// still under way, with records unanswered, it ends in [`DriverError::ClosedReconnecting`].
    pub reconnect: Reconnect,
    /// What the client's cache holds for this server (RFC 7924 objects, client-certificate
    /// ticket), offered as `ClientConfig::cached_info` and `client_certificate_caching` allow.
    /// The handshake summary's `cache_update` says what to keep for next time.
    pub cached: Option<CachedServer>,
    /// Told at once when a flight of the first handshake or of a reconnection is refused (ICMP
    /// port unreachable: nothing listens at the server's address), before
    /// [`crate::icmp::REFUSALS_TO_GIVE_UP`] refusals in a row end it with [`DriverError::Refused`]
    /// (within [`DriverError::ReconnectFailed`] for a reconnection).
    pub on_refused: Option<RefusalHook>,
    /// DTLS 1.3: the first record, given to the engine as 0-RTT early data right after the
    /// ClientHello ([`Connection::send_early_data`]: early data if the configuration and the
    /// session's ticket allow it, else sent once the handshake is over; once either way).
    pub early_data: Option<Vec<u8>>,
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
            .field("early_data", &self.early_data.as_ref().map(Vec::len))
            .finish()
    }
}

/// What an established client connection reports.
#[derive(Debug)]
pub enum ClientEvent {
    /// One application record from the server.
    Data(Vec<u8>),
    /// The server closed the session with close_notify. Records still waiting to be sent are
    /// dropped: [`DtlsClient::unsent_records`] counts them.
    Closed,
    /// The session failed (fatal alert, socket error, a failed reconnection). Nothing follows.
    Failed(DriverError),
    /// A record could not be sent; the session goes on.
    SendFailed(DtlsError),
    /// The session now sends to this server address: it followed the server to another port of
    /// the same IP (a session port of an IPC or TCS server).
    PathChanged(SocketAddr),
    /// A new session replaced the old one (after `app_timeout` or [`DtlsClient::reconnect`]), and
    /// the records sent since the last record received were sent again on it.
    Reconnected(Box<HandshakeSummary>),
    /// DTLS 1.3: the server issued a ticket after the handshake; a reconnection resumes it, and
    /// an application that keeps sessions across runs keeps the latest.
    SessionTicket(ClientSession),
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
    /// Why the session ended, set by the task before it stops.
    ended: Arc<OnceLock<DriverError>>,
    /// Records handed to `send` that the task dropped when the session ended.
    unsent: Arc<AtomicUsize>,
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
        let driver = ClientDriver::new(socket, remote, config, options, command_rx, event_tx, handshake_tx);
        let ended = Arc::clone(&driver.ended);
        let unsent = Arc::clone(&driver.unsent);
        let task = tokio::spawn(driver.run());
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
                ended,
                unsent,
            }),
            Ok(Err(error)) => {
                task.abort();
                Err(error)
            }
            // The task ended without a verdict: its own result says why.
            Err(_) => match task.await {
                Ok(Err(error)) => Err(error),
                _ => Err(ended.get().map_or(DriverError::TaskStopped, DriverError::duplicate)),
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
    /// Once the session has ended, the error that ended it (the same one
    /// [`ClientEvent::Failed`] carries), or [`DtlsError::Closed`] after a close.
    pub fn send(&self, data: Vec<u8>) -> Result<(), DriverError> {
        self.command(ClientCommand::Send(data))
    }

    /// Records handed to [`DtlsClient::send`] that the session ended before it sent them (the
    /// server closed it, or it failed, while they waited for the task): final once
    /// [`ClientEvent::Closed`] or [`ClientEvent::Failed`] has been handed out. Records the engine
    /// took are not counted here (a failed reconnection counts those it left unanswered).
    pub fn unsent_records(&self) -> usize {
        self.unsent.load(Ordering::SeqCst)
    }

    /// Hands `command` to the task, or says why the session ended.
    fn command(&self, command: ClientCommand) -> Result<(), DriverError> {
        if let Some(error) = self.ended.get() {
            return Err(error.duplicate());
        }
        self.commands.send(command).map_err(|_| self.why_stopped())
    }

    /// Why the task stopped: it records the session's end before it stops, so only a task that
    /// died (a panic) leaves [`DriverError::TaskStopped`].
    fn why_stopped(&self) -> DriverError {
        self.ended.get().map_or(DriverError::TaskStopped, DriverError::duplicate)
    }

    /// Replaces the session with a new one now (resuming the current session if `resume`), as
    /// `app_timeout` does; [`ClientEvent::Reconnected`] follows once the handshake is done, and the
    /// records sent since the last record received are sent again (with `app_timeout` set; without
    /// it nothing is kept to resend).
    pub fn reconnect(&self, resume: bool) -> Result<(), DriverError> {
        self.command(ClientCommand::Reconnect { resume })
    }

    /// Moves the session to a new socket bound to `local` (port 0: any free port) and closes the
    /// old one: what a handover does to a client (a new address or port, as a NAT rebinding or a
    /// new interface gives). The engine does not learn of it; the server sees records from a new
    /// address. Returns the new local address.
    pub async fn rebind(&mut self, local: SocketAddr) -> Result<SocketAddr, DriverError> {
        let (tx, rx) = oneshot::channel();
        self.command(ClientCommand::Rebind(local, tx))?;
        let bound = rx.await.map_err(|_| self.why_stopped())??;
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
    commands: mpsc::UnboundedReceiver<ClientCommand>,
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
    /// When the reconnection's first handshake started, and whether the server's silence
    /// started it (`app_timeout`) rather than the application.
    reconnect_began: Instant,
    reconnect_after_silence: bool,
    /// Flights sent and resent by the reconnection's earlier attempts (each one timed out).
    reconnect_flights: u32,
    app_timeout: Option<Duration>,
    /// The latest handshake agreed nothing that carries the session across a move, so
    /// `app_timeout` applies (see [`ClientOptions::app_timeout`]).
    reconnects_on_silence: bool,
    resume_on_reconnect: bool,
    /// Records sent since the last record received (kept while `app_timeout` applies, and
    /// while a reconnection is under way).
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
    /// ICMP port unreachables for the flights of the first handshake and of reconnections.
    refusals: RefusalsInARow,
    on_refused: Option<RefusalHook>,
    /// Why the session ended, for the handle's later calls.
    ended: Arc<OnceLock<DriverError>>,
    /// Records the application handed over that the session ended before sending.
    unsent: Arc<AtomicUsize>,
}

impl ClientDriver {
    fn new(
        socket: UdpSocket,
        server: SocketAddr,
        config: Arc<ClientConfig>,
        options: ClientOptions,
        commands: mpsc::UnboundedReceiver<ClientCommand>,
        events: mpsc::UnboundedSender<ClientEvent>,
        handshake: oneshot::Sender<HandshakeVerdict>,
    ) -> ClientDriver {
        let clock = Clock::new();
        let started = clock.now();
        let config = client_config_with_clock(config, &clock);
        let ClientOptions { trace, session, app_timeout, reconnect, cached, on_refused, early_data, .. } =
            options;
        let mut connection = Connection::client_with_cache(
            Arc::clone(&config),
            started,
            server,
            os_seed(),
            session.clone(),
            cached.clone(),
        );
        if let Some(data) = &early_data {
            // Not sent as early data: kept by the engine for after the handshake.
            let _ = connection.send_early_data(data);
        }
        ClientDriver {
            clock,
            config,
            socket,
            commands,
            server,
            trace,
            events,
            connection,
            started,
            handshake: Some(handshake),
            reconnecting: false,
            resuming: false,
            reconnect_began: started,
            reconnect_after_silence: false,
            reconnect_flights: 0,
            app_timeout,
            // Decided by each handshake's summary.
            reconnects_on_silence: false,
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
            ended: Arc::default(),
            unsent: Arc::default(),
        }
    }

    /// Reports a fatal error to whoever waits (the handshake or the event stream), records it for
    /// the handle's later calls (first, so no caller can see the task gone without it) and
    /// returns a copy for the task result.
    fn fail(&mut self, error: DriverError) -> DriverError {
        let _ = self.ended.set(error.duplicate());
        self.refuse_commands();
        let for_task = error.duplicate();
        match self.handshake.take() {
            Some(tx) => {
                let _ = tx.send(Err(error));
            }
            None => {
                let _ = self.events.send(ClientEvent::Failed(error));
            }
        }
        for_task
    }

    /// Once the session has ended (`ended` set): takes no more commands, and counts the records
    /// that waited among them, so none is dropped unsaid. Later calls on the handle get `ended`.
    fn refuse_commands(&mut self) {
        self.commands.close();
        let mut unsent = 0;
        while let Ok(command) = self.commands.try_recv() {
            // A waiting rebind learns `ended` from its dropped reply.
            if let ClientCommand::Send(_) = command {
                unsent += 1;
            }
        }
        self.unsent.fetch_add(unsent, Ordering::SeqCst);
    }

    /// The app timeout, if it applies to the current session.
    fn active_app_timeout(&self) -> Option<Duration> {
        self.app_timeout.filter(|_| self.reconnects_on_silence)
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

    /// Queues one application record, keeping it for a resend if reconnections are on (and, during
    /// a reconnection, until the new session can send it).
    fn send_record(&mut self, data: Vec<u8>) {
        if !self.reconnecting {
            if let Err(error) = self.connection.send(&data) {
                let _ = self.events.send(ClientEvent::SendFailed(error));
                return;
            }
        }
        if self.reconnecting || self.active_app_timeout().is_some() {
            if self.unanswered.len() == MAX_UNANSWERED_RECORDS {
                self.unanswered.pop_front();
            }
            self.unanswered.push_back(data);
            self.unanswered_since.get_or_insert(self.clock.now());
        }
    }

    /// Replaces the connection with a new handshake from the current socket; `after_silence`
    /// when the app timeout started it (an attempt started again keeps the first one's reason).
    fn start_reconnection(&mut self, resume: bool, after_silence: bool) {
        let now = self.clock.now();
        if self.reconnecting {
            let stats = self.connection.stats();
            self.reconnect_flights += stats.flights_sent + stats.flights_resent;
        } else {
            self.reconnect_began = now;
            self.reconnect_after_silence = after_silence;
            self.reconnect_flights = 0;
        }
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

    /// What a reconnection's failure (`cause`) ends the session with.
    fn reconnect_failed(&self, cause: DriverError) -> DriverError {
        DriverError::ReconnectFailed {
            cause: Box::new(cause),
            unanswered: self.unanswered.len(),
            silent_for: self.silence_that_started_it(),
        }
    }

    /// The app timeout, when the server's silence started the reconnection under way.
    fn silence_that_started_it(&self) -> Option<Duration> {
        self.app_timeout.filter(|_| self.reconnect_after_silence)
    }

    /// Closed by the application during a reconnection's handshake: what it leaves unanswered.
    fn closed_reconnecting(&self) -> DriverError {
        let stats = self.connection.stats();
        DriverError::ClosedReconnecting {
            elapsed: self.clock.now() - self.reconnect_began,
            flights: self.reconnect_flights + stats.flights_sent + stats.flights_resent,
            unanswered: self.unanswered.len(),
            silent_for: self.silence_that_started_it(),
        }
    }

    /// When the driver must act next: the engine's timer, the app timeout, a held datagram.
    fn deadline(&self) -> Option<Instant> {
        let app_deadline = match (self.active_app_timeout(), self.unanswered_since) {
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
        let silent_too_long = match (self.active_app_timeout(), self.unanswered_since) {
            (Some(timeout), Some(since)) => !self.reconnecting && now >= since + timeout,
            _ => false,
        };
        if silent_too_long {
            self.start_reconnection(self.resume_on_reconnect, true);
        }
    }

    /// Handles the engine's events; `Ok(true)` once the session is over.
    fn handle_events(&mut self) -> Result<bool, DriverError> {
        while let Some(event) = self.connection.poll_event() {
            match event {
                Event::Connected(summary) => {
                    // A connection ID or a port of its own carries the session across a move;
                    // without either, only a new session does (seed 001, Section II).
                    self.reconnects_on_silence =
                        !(summary.mobility.connection_id || summary.mobility.port_move);
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
                        if self.active_app_timeout().is_none() {
                            // Kept only to be sent on the new session.
                            self.unanswered.clear();
                        } else if !self.unanswered.is_empty() {
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
                Event::SessionTicket(session) => {
                    self.last_session = Some(session.clone());
                    let _ = self.events.send(ClientEvent::SessionTicket(session));
                }
                // Only an endpoint accepts, evicts and refuses.
                Event::Accepted | Event::Evicted { .. } | Event::Refused { .. } => {}
                Event::Closed => {
                    let _ = self.ended.set(DriverError::Dtls(DtlsError::Closed));
                    self.refuse_commands();
                    let _ = self.events.send(ClientEvent::Closed);
                    return Ok(true);
                }
                // A reconnection that got no answer (every interface down, the server away) is
                // started again: only the application gives up on its session.
                Event::Failed(DtlsError::HandshakeTimeout { .. }) if self.reconnecting => {
                    self.start_reconnection(self.resuming, false);
                }
                Event::Failed(error) => {
                    let elapsed = self.clock.now() - self.started;
                    let mut error = DriverError::from_engine(error, elapsed);
                    if self.reconnecting {
                        error = self.reconnect_failed(error);
                    }
                    return Err(self.fail(error));
                }
            }
        }
        Ok(self.connection.is_closed())
    }

    async fn run(mut self) -> Result<Traffic, DriverError> {
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
                // Closed by us or by the peer: later calls say so.
                let _ = self.ended.set(DriverError::Dtls(DtlsError::Closed));
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
                command = self.commands.recv(), if commands_open => match command {
                    Some(ClientCommand::Send(data)) => self.send_record(data),
                    Some(ClientCommand::Reconnect { resume }) => self.start_reconnection(resume, false),
                    Some(ClientCommand::Rebind(local, reply)) => {
                        let result = self.rebind(local).await;
                        let _ = reply.send(result);
                    }
                    Some(ClientCommand::Close) | None => {
                        commands_open = false;
                        if self.reconnecting && !self.unanswered.is_empty() {
                            // The handshake is abandoned (the server never learnt of it); what it
                            // was to carry is said, not dropped.
                            let error = self.closed_reconnecting();
                            return Err(self.fail(error));
                        }
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

    /// Reads the refusals queued on the socket. During the first handshake or a reconnection,
    /// each one for the server's address is told at once, and the handshake ends after enough in
    /// a row (a reconnection then fails: nothing listens where the session could go on). In an
    /// established session a refusal only says the server went away, which the app timeout (if
    /// it applies) answers with a reconnection.
    fn take_refusals(&mut self) -> Result<(), DriverError> {
        let mut refused = Vec::new();
        crate::icmp::take_refusals(&self.socket, |refusal| refused.push(refusal))?;
        for refusal in refused {
            let handshaking = self.handshake.is_some() || self.reconnecting;
            if !handshaking || refusal.destination != self.connection.remote() {
                continue;
            }
            let Some(in_a_row) = self.refusals.refused() else { continue };
            if let Some(hook) = &self.on_refused {
                hook(refusal, in_a_row);
            }
            if in_a_row >= crate::icmp::REFUSALS_TO_GIVE_UP {
                if self.reconnecting {
                    let elapsed = self.clock.now() - self.reconnect_began;
                    return Err(self.reconnect_failed(DriverError::Refused { refusal, in_a_row, elapsed }));
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtls::testing::{loopback, step};
    use fastshake_dtls::Versions;

    #[tokio::test]
    async fn a_cancelled_connect_stops_retransmitting() {
        let silent = std::net::UdpSocket::bind(loopback()).unwrap();
        silent.set_nonblocking(true).unwrap();
        let config = Arc::new(ClientConfig {
            versions: Versions::Dtls12,
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
            versions: Versions::Dtls12,
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
}
