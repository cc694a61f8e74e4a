//! The server facade: [`DtlsServer`] binds its workers' sockets and starts them, the fleet link
//! and the ticket-key tasks; [`ServerController`] reaches a session's worker; the events and
//! counters the workers report.

use super::fleet_link::{run_fleet, Passed, FORWARD_QUEUE};
use super::seeds::{os_cookie_key, os_early_data_register, os_ticket_keys};
use super::ticket_keys::{rotate_ticket_keys, watch_ticket_keys, SharedKeys};
use super::worker::{run_worker, Peers};
use super::{DatagramTrace, DriverError, MobilityMode};
use crate::cookie_schedule::{CookieRotation, CookieSchedule};
use crate::fleet::Fleet;
use crate::session_store::{MemoryStore, SessionStore};
use crate::udp::{BatchIo, DatagramSocket, PortSharing};
use fastshake_dtls::{
    ConnectionHandle, EndpointStats, Error as DtlsError, HandshakeSummary, ServerConfig,
    SharedClientCertCache, TicketKeys, WhenFull,
};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// How often a server replaces its HelloVerifyRequest cookie key. The engine keeps the previous
/// key too, so a handshake in progress survives one rotation.
pub const DEFAULT_COOKIE_ROTATION: Duration = Duration::from_secs(120);

/// How often a server replaces its session-ticket key (RFC 5077). Tickets sealed under the
/// previous key still open, so a ticket opens for at least one rotation period: this equals the
/// default ticket lifetime of [`TicketKeys::new`] (2 h), so a ticket lasts as long as its hint says.
pub const DEFAULT_TICKET_ROTATION: Duration = Duration::from_secs(2 * 3600);

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
    /// Workers, each an [`Endpoint`](fastshake_dtls::Endpoint) of its own on a socket of its own bound to the listen
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
    /// The session-ID cache shared by a fleet: needs `ticket_keys_file`, the same keys on every
    /// node, as they seal what is stored ([`DtlsServer::bind`] refuses it without). A store that does not answer in [`STORE_TIMEOUT`](super::STORE_TIMEOUT) is a miss.
    pub session_store: Option<Arc<dyn SessionStore>>,
    /// This server as a node of a fleet: its CIDs carry the node id, and CID records of other
    /// nodes' sessions are forwarded to them (see [`crate::fleet`]).
    pub fleet: Option<Fleet>,
    /// What a worker does with each application record. `None`: each becomes a
    /// [`ServerEvent::Data`] (a copy handed over a channel). A handler instead reads the record
    /// where the engine decrypted it, inside the worker, and may answer on the spot (see
    /// [`Replies`]): no copy and no allocation per record.
    pub on_record: Option<RecordHandler>,
}

/// Reads one application record in place, inside a worker: the session, the record, and where
/// to put answers. It runs on the worker's task: keep it short and never block.
pub type RecordHandler = Arc<dyn Fn(SessionHandle, &[u8], &mut Replies<'_>) + Send + Sync>;

/// The answers a [`RecordHandler`] gives to the session whose record it reads: each
/// [`Replies::send`] becomes one application record, sealed straight into the worker's outgoing
/// buffers once the datagram is read.
pub struct Replies<'a> {
    pub(super) pending: &'a mut PendingReplies,
    pub(super) connection: fastshake_dtls::ConnectionHandle,
}

impl Replies<'_> {
    /// Sends `data` back: as one record sealed into the worker's buffers when it fits one,
    /// else split over several as [`DtlsServer::send`] does.
    pub fn send(&mut self, data: &[u8]) {
        let start = self.pending.bytes.len();
        self.pending.bytes.extend_from_slice(data);
        self.pending.spans.push((self.connection, start..self.pending.bytes.len()));
    }
}

/// Answers handlers gave while a datagram was read, kept in buffers the worker reuses.
#[derive(Default)]
pub(super) struct PendingReplies {
    pub(super) bytes: Vec<u8>,
    pub(super) spans: Vec<(fastshake_dtls::ConnectionHandle, std::ops::Range<usize>)>,
}

/// Most workers of one server: a worker is named by the first byte of the CIDs it issues.
pub const MAX_WORKERS: usize = 255;

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            trace: None,
            cookie_rotation: DEFAULT_COOKIE_ROTATION,
            ticket_rotation: DEFAULT_TICKET_ROTATION,
            mobility: MobilityMode::Standard,
            workers: 1,
            batch: BatchIo::On,
            port_sharing: PortSharing::Exclusive,
            ticket_keys_file: None,
            session_store: None,
            fleet: None,
            on_record: None,
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
            .field("workers", &self.workers)
            .field("batch", &self.batch)
            .field("port_sharing", &self.port_sharing)
            .field("ticket_keys_file", &self.ticket_keys_file)
            .field("session_store", &self.session_store.as_ref().map(|s| s.name()))
            .field("fleet", &self.fleet)
            .field("on_record", &self.on_record.is_some())
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
    /// A DTLS 1.3 ClientHello was refused before any session existed (no common version, suite
    /// or group): the fatal `alert` went back and nothing was kept.
    HelloRefused {
        /// The client's address.
        remote: SocketAddr,
        /// What its offer and our configuration did not share.
        reason: fastshake_dtls::Mismatch,
        /// The fatal alert sent.
        alert: fastshake_dtls::AlertDescription,
    },
    /// More refusals than the log shows came (a flood of hellos that cannot be served):
    /// `count` since the last `HelloRefused`, not reported one by one.
    RefusalsNotShown {
        /// How many.
        count: u64,
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
    pub(super) worker: u8,
    pub(super) connection: ConnectionHandle,
}

impl SessionHandle {
    /// The worker that holds the session (0 with one worker).
    pub fn worker(&self) -> usize {
        usize::from(self.worker)
    }

    /// The session's handle in its worker's [`Endpoint`](fastshake_dtls::Endpoint).
    pub fn connection(&self) -> ConnectionHandle {
        self.connection
    }
}

impl fmt::Display for SessionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.worker, self.connection)
    }
}

pub(super) enum ServerCommand {
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
    /// Answers of the record handler their session refused: it was closing, or held as many
    /// answers to early data as it holds until its handshake completes.
    pub replies_refused: u64,
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
            "{} worker(s) ({batched} with batched I/O): {} handshake(s) accepted (per worker: {}), {} cookie exchange(s) (HelloVerifyRequest, HelloRetryRequest), {received} datagram(s) received, {dropped} dropped, {evicted} half-open handshake(s) evicted, {} CID record(s) passed between workers; fleet: {} CID record(s) forwarded to other nodes, {} from them, {} answer(s) sent back through them; session store: {} lookup(s), {} found",
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
        ) + &match sum(|w| w.replies_refused) {
            0 => String::new(),
            n => format!("; {n} answer(s) of the record handler refused by their session (closing, or holding too many before its handshake completed)"),
        }
    }
}

/// A DTLS server: a listening UDP socket per worker (and, in the IPC and TCS modes, a socket per
/// session), an [`Endpoint`](fastshake_dtls::Endpoint) per worker, many clients, each worker driven by a tokio task.
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
        if options.session_store.is_some() && options.ticket_keys_file.is_none() {
            // What this server puts in the store would be sealed under its own keys, which no
            // other node has: nobody else could resume it.
            return Err(DriverError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a session store shared by a fleet needs the fleet's ticket keys (ServerOptions::ticket_keys_file, \
                 --ticket-keys): sessions sealed under this server's own keys resume at no other node",
            )));
        }
        // Refused here, not in each worker: the caller learns why before anything listens. The
        // workers add the driver's wall clock, as here.
        let wall_clock = config.wall_clock.or(Some(crate::Clock::new().wall_clock()));
        ServerConfig { wall_clock, ..(*config).clone() }.validate().map_err(DriverError::Dtls)?;
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
            let cid_len = config.mobility.connection_id.unwrap_or(0);
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
        // And one register of DTLS 1.3 early data taken.
        let early_data = os_early_data_register();
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
                early_data: Arc::clone(&early_data),
            };
            let run =
                run_worker(socket, peers, Arc::clone(&config), options.clone(), command_rx, event_tx.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtls::testing::{loopback, step};
    use crate::dtls::{os_ticket_keys, resumption_text, ClientEvent, ClientOptions, DtlsClient};
    use fastshake_dtls::Versions;
    use fastshake_dtls::{ClientConfig, Resumption};

    #[tokio::test]
    async fn client_and_server_exchange_records_and_close() {
        let server_config =
            Arc::new(ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk("id", [7u8; 16]) });
        let mut server = DtlsServer::bind(loopback(), server_config, ServerOptions::default()).await.unwrap();
        let client_config =
            Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", [7u8; 16]) });
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
    async fn a_record_handler_answers_in_place_and_hands_over_no_record() {
        let server_config =
            Arc::new(ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk("id", [7u8; 16]) });
        let echo: RecordHandler = Arc::new(|_, record: &[u8], replies: &mut Replies<'_>| {
            replies.send(record);
            if record == b"big" {
                // More than one datagram holds: split by the engine's queue.
                replies.send(&[7u8; 3000]);
            }
        });
        let options = ServerOptions { on_record: Some(echo), ..ServerOptions::default() };
        let mut server = DtlsServer::bind(loopback(), server_config, options).await.unwrap();
        let client_config =
            Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", [7u8; 16]) });
        let connect = DtlsClient::connect(server.local_addr(), client_config, ClientOptions::default());
        let mut client = step("handshake", connect).await.unwrap();
        for (record, expected) in
            [(&b"ping"[..], b"ping".to_vec()), (b"big", [&b"big"[..], &[7u8; 3000]].concat())]
        {
            client.send(record.to_vec()).unwrap();
            let mut got = Vec::new();
            while got.len() < expected.len() {
                match step("echo", client.recv()).await {
                    Some(ClientEvent::Data(data)) => got.extend(data),
                    other => panic!("expected Data, got {other:?}"),
                }
            }
            assert!(
                got == expected,
                "{} bytes back for {:?}, not the {} expected",
                got.len(),
                record,
                expected.len()
            );
        }
        assert!(matches!(
            step("server Connected", server.next_event()).await,
            Some(ServerEvent::Connected { .. })
        ));
        // The records never became events.
        let next = tokio::time::timeout(std::time::Duration::from_millis(200), server.next_event()).await;
        assert!(next.is_err(), "no event but Connected: {next:?}");
        step("shutdown", server.shutdown()).await.unwrap();
    }

    #[tokio::test]
    async fn a_shared_session_store_without_the_fleets_ticket_keys_is_refused() {
        let server_config =
            Arc::new(ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk("id", [7u8; 16]) });
        let options = ServerOptions {
            session_store: Some(Arc::new(crate::session_store::MemoryStore::new(8))),
            ..ServerOptions::default()
        };
        let refused = DtlsServer::bind(loopback(), server_config, options).await.err().expect("refused");
        assert!(refused.to_string().contains("needs the fleet's ticket keys"), "{refused}");
    }

    #[tokio::test]
    async fn one_server_serves_many_clients_at_once() {
        const CLIENTS: usize = 16;
        let server_config =
            Arc::new(ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk("id", [9u8; 16]) });
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
                let config = Arc::new(ClientConfig {
                    versions: Versions::Dtls12,
                    ..ClientConfig::psk("id", [9u8; 16])
                });
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
    async fn a_client_resumes_the_session_of_an_earlier_handshake() {
        for tickets in [false, true] {
            let server_config = Arc::new(ServerConfig {
                versions: Versions::Dtls12,
                tickets: tickets.then(os_ticket_keys),
                ..ServerConfig::psk("id", [5u8; 16])
            });
            let server = DtlsServer::bind(loopback(), server_config, ServerOptions::default()).await.unwrap();
            let client_config = Arc::new(ClientConfig {
                versions: Versions::Dtls12,
                enable_tickets: tickets,
                ..ClientConfig::psk("id", [5u8; 16])
            });
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
}
