//! One worker of a server: its listening socket, its [`Endpoint`], and the loop that feeds the
//! engine datagrams, commands and time, and carries out what comes back.

use super::fleet_link::{FleetOut, Passed, ReturnPaths};
use super::server::{
    PendingReplies, RecordHandler, Replies, ServerCommand, ServerEvent, ServerOptions, SessionHandle,
    WorkerStats,
};
use super::store_link::{LookupDone, StoreLink, STORE_BACKOFF, STORE_IN_FLIGHT};
use super::{is_icmp_error, os_seed, DatagramTrace, Direction, DriverError, MobilityMode};
use crate::cookie_schedule::CookieRotation;
use crate::fleet::CidOwner;
use crate::mobility::{Arrived, SessionSockets, SocketAction};
use crate::udp::{DatagramSocket, SendQueue};
use crate::Clock;
use fastshake_dtls::{
    ConnectionHandle, Endpoint, Event, HelloRefusal, Incoming, ServerConfig, SharedClientCertCache,
    TicketKeys,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// `config` with the driver's wall clock, unless the caller pinned one.
fn server_config_with_clock(config: Arc<ServerConfig>, clock: &Clock) -> Arc<ServerConfig> {
    if config.wall_clock.is_some() {
        return config;
    }
    Arc::new(ServerConfig { wall_clock: Some(clock.wall_clock()), ..(*config).clone() })
}

/// How a worker reaches the others: the CID records it receives for their sessions go to
/// `forward_to[owner]`, and theirs for its sessions arrive on `forwarded`.
pub(super) struct Peers {
    pub(super) index: u8,
    pub(super) forward_to: Arc<[mpsc::Sender<Passed>]>,
    pub(super) forwarded: mpsc::Receiver<Passed>,
    /// Frames for other nodes (a fleet only).
    pub(super) fleet_out: Option<mpsc::Sender<FleetOut>>,
    /// Answers other nodes' sessions send to clients that reached them through this node
    /// (worker 0 of a fleet node only).
    pub(super) answers: Option<mpsc::Receiver<(SocketAddr, Vec<u8>)>>,
    /// The cookie key every worker starts with, and the server's schedule of later ones.
    pub(super) cookie_key: [u8; 16],
    pub(super) cookie_rotation: CookieRotation,
    /// What seals the sessions workers share when the configuration issues no tickets.
    pub(super) seal_keys: Option<TicketKeys>,
    /// Whether a store failure has been reported (once for all workers).
    pub(super) store_down_reported: Arc<std::sync::atomic::AtomicBool>,
    /// The client chains every worker keeps (several workers only).
    pub(super) client_chains: Option<SharedClientCertCache>,
    /// The DTLS 1.3 early data every worker takes once among them.
    pub(super) early_data: Arc<fastshake_dtls::EarlyDataRegister>,
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
    /// Clients that reached us through another node of the fleet.
    return_paths: ReturnPaths,
    fleet_out: Option<mpsc::Sender<FleetOut>>,
    store: Option<StoreLink>,
    /// Whether the store's failure has been reported since it last answered (by any worker).
    store_down_reported: Arc<std::sync::atomic::AtomicBool>,
    /// This worker's place in the server's cookie-key schedule.
    cookie_rotation: CookieRotation,
    /// Reads application records in place, if the server has one.
    on_record: Option<RecordHandler>,
    /// What it answered while the current datagram was read.
    replies: PendingReplies,
    /// The largest datagram the engine sends (the configuration's MTU).
    mtu: usize,
    /// How many stateless refusals were reported lately.
    refusal_log: RefusalLog,
}

/// Refusals reported per second at most, per worker; the rest are counted and said in one
/// event with the next one reported.
const REFUSALS_SHOWN_PER_SECOND: u32 = 10;

/// A rate limit on refusal events: a window of a second, how many it showed, how many hid.
#[derive(Default)]
struct RefusalLog {
    window: Option<fastshake_core::Instant>,
    shown: u32,
    hidden: u64,
}

enum Admit {
    /// Report it, after saying how many were not reported since the last one that was.
    Yes {
        hidden_before: u64,
    },
    No,
}

impl RefusalLog {
    fn admit(&mut self, now: fastshake_core::Instant) -> Admit {
        if self.window.is_none_or(|start| now.saturating_duration_since(start) >= Duration::from_secs(1)) {
            self.window = Some(now);
            self.shown = 0;
        }
        if self.shown >= REFUSALS_SHOWN_PER_SECOND {
            self.hidden += 1;
            return Admit::No;
        }
        self.shown += 1;
        Admit::Yes { hidden_before: std::mem::take(&mut self.hidden) }
    }
}

impl ServerDriver {
    /// Sends every datagram the engine has queued, each from the socket its `src` names.
    async fn flush(&mut self, endpoint: &mut Endpoint, welcome: &DatagramSocket) {
        self.send_replies(endpoint, welcome);
        let now = self.clock.now();
        while let Some(transmit) = endpoint.poll_transmit(now) {
            if let Some(trace) = &self.trace {
                trace(Direction::Sent, transmit.dst, &transmit.payload);
            }
            // A datagram that cannot be sent is a lost datagram: the engine's timers cope.
            match transmit.src {
                Some(src) if src != self.welcome_addr => {
                    if let Some(handle) = self.sockets.send_from(src, transmit.dst, &transmit.payload).await {
                        let _ = self
                            .events
                            .send(ServerEvent::OwnSocket { handle: self.session(handle), local: src });
                    }
                }
                _ => match (self.return_paths.through(transmit.dst), &self.fleet_out) {
                    (Some(node), Some(out)) => {
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

    /// Seals what the record handler answered since the last flush straight into the outgoing
    /// buffers. A session
    /// with a socket of its own, or whose client reached us through another node, takes the
    /// engine's queue instead (its datagrams leave by another way).
    fn send_replies(&mut self, endpoint: &mut Endpoint, welcome: &DatagramSocket) {
        let PendingReplies { bytes, spans } = &mut self.replies;
        for (connection, span) in spans.drain(..) {
            let data = &bytes[span];
            let Some(conn) = endpoint.connection(connection) else { continue };
            let remote = conn.remote();
            if conn.local().is_some() || self.return_paths.through(remote).is_some() {
                if endpoint.send(connection, data).is_err() {
                    self.stats.replies_refused += 1;
                }
                continue;
            }
            let trace = self.trace.as_ref();
            let sealed = self.outgoing.push_with(welcome, remote, self.mtu, |out| {
                let len = endpoint.seal_into(connection, data, out)?;
                if let Some(trace) = trace {
                    trace(Direction::Sent, remote, &out[..len]);
                }
                Ok::<usize, fastshake_dtls::Error>(len)
            });
            if sealed.is_err() {
                // More than one record holds, the client's new address is being checked
                // (datagrams go to both), or datagrams wait in the engine's queue (this one
                // must not overtake them): the engine's queue does it. A send to an ended
                // session is dropped; one refused by a session still there is counted.
                if endpoint.send(connection, data).is_err() {
                    self.stats.replies_refused += 1;
                }
            }
        }
        bytes.clear();
    }

    /// Hands the engine's events on, giving sessions their sockets as the mode says.
    /// Hands the engine's events on. `arrived_from`: the sender of the datagram just handled,
    /// the peer of a connection that it created and ended at once (a ClientHello refused).
    fn handle_events(&mut self, endpoint: &mut Endpoint, arrived_from: Option<SocketAddr>) {
        while let Some(refusal) = endpoint.poll_refusal() {
            // Refusals come before any address is proven: a flood of forged hellos must not
            // flood the log, nor the unbounded event channel.
            match self.refusal_log.admit(self.clock.now()) {
                Admit::Yes { hidden_before } => {
                    if hidden_before > 0 {
                        let _ = self.events.send(ServerEvent::RefusalsNotShown { count: hidden_before });
                    }
                    let HelloRefusal { remote, reason, alert } = refusal;
                    let _ = self.events.send(ServerEvent::HelloRefused { remote, reason, alert });
                }
                Admit::No => {}
            }
        }
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
                // A record the engine kept until the handshake completed (it came before the
                // client's Finished) goes where records read in place go: to the handler.
                Event::ApplicationData(data) if self.on_record.is_some() => {
                    if let Some(handler) = self.on_record.clone() {
                        let session = self.session(handle);
                        handler(
                            session,
                            &data,
                            &mut Replies { pending: &mut self.replies, connection: handle },
                        );
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
                    let remote = known.or_else(|| self.remotes.remove(&handle)).or(arrived_from);
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
                // A client's alone.
                Event::SessionTicket(_) => {}
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

    /// Carries out what the strategy decided for session `handle`'s sockets (see
    /// [`crate::mobility`]) and reports where the session sends from.
    fn carry_out(&mut self, endpoint: &mut Endpoint, handle: ConnectionHandle, action: SocketAction) {
        let session = self.session(handle);
        let event = match self.sockets.carry_out(endpoint, handle, action) {
            Ok(Some(local)) => ServerEvent::OwnSocket { handle: session, local },
            Ok(None) => return,
            Err(reason) => ServerEvent::StaysOnWelcomePort { handle: session, reason },
        };
        let _ = self.events.send(event);
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
        self.return_paths.keep_only(&known);
    }

    /// A datagram arrived at `local` from `remote`, its first record's header read already.
    fn receive(
        &mut self,
        endpoint: &mut Endpoint,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: Incoming<'_>,
    ) {
        if let Some(trace) = &self.trace {
            trace(Direction::Received, remote, datagram.bytes());
        }
        let now = self.clock.now();
        match self.on_record.clone() {
            Some(handler) => {
                let (worker, replies) = (self.worker, &mut self.replies);
                endpoint.open_in_place(now, local, remote, datagram, &mut |connection, record| {
                    let session = SessionHandle { worker, connection };
                    handler(session, record, &mut Replies { pending: replies, connection });
                });
            }
            None => endpoint.handle_incoming(now, local, remote, datagram),
        }
        self.handle_events(endpoint, Some(remote));
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

pub(super) async fn run_worker(
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
    let cid_len = config.mobility.connection_id.unwrap_or(0);
    let mtu = config.mtu;
    let workers = peers.forward_to.len();
    let session_lifetime = config.session_cache.lifetime;
    let mut endpoint = Endpoint::new(config, os_seed()).map_err(DriverError::Dtls)?;
    endpoint.rotate_cookie_key(peers.cookie_key);
    if let Some(cache) = peers.client_chains.take() {
        endpoint.share_client_cert_cache(cache);
    }
    endpoint.share_early_data_register(Arc::clone(&peers.early_data));
    let node = options.fleet.as_ref().map(|f| f.node);
    match node {
        Some(node) => endpoint.set_cid_prefix(&crate::fleet::cid_prefix(cid_len, node, peers.index)),
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
        return_paths: ReturnPaths::default(),
        fleet_out: peers.fleet_out.clone(),
        store,
        store_down_reported: peers.store_down_reported.clone(),
        cookie_rotation: peers.cookie_rotation,
        on_record: options.on_record.clone(),
        replies: PendingReplies::default(),
        mtu,
        refusal_log: RefusalLog::default(),
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
        driver.handle_events(&mut endpoint, None);
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
                    // The first record's header, read once: its CID names the session's worker
                    // and node here, and the engine reads nothing again.
                    let incoming = endpoint.incoming(datagram);
                    match crate::fleet::cid_owner(incoming.connection_id(), node, me, workers) {
                        // The kernel chose by 4-tuple and the client has moved: its session lives
                        // with another worker. A full queue drops it, as a full socket would.
                        Some(CidOwner::Worker(owner)) => {
                            let datagram = incoming.bytes().to_vec();
                            let incoming = Arrived { local: welcome_addr, remote, datagram };
                            if forward_to[owner].try_send(Passed { incoming, via: None }).is_ok() {
                                driver.stats.passed_on += 1;
                            }
                        }
                        // A load balancer or a NAT sent the client here: its session is another
                        // node's.
                        Some(CidOwner::Node(owner)) => {
                            let out = FleetOut::Forward { node: owner, remote, datagram: incoming.bytes().to_vec() };
                            if driver.fleet_out.as_ref().is_some_and(|o| o.try_send(out).is_ok()) {
                                driver.stats.forwarded_to_nodes += 1;
                            }
                        }
                        None => {
                            driver.return_paths.arrived_direct(remote);
                            driver.receive(&mut endpoint, welcome_addr, remote, incoming)
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
                        driver.return_paths.arrived_through(arrived.remote, node);
                    }
                    None => driver.stats.taken_over += 1,
                }
                let incoming = endpoint.incoming(&mut arrived.datagram);
                driver.receive(&mut endpoint, arrived.local, arrived.remote, incoming);
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
                let datagram = endpoint.incoming(&mut arrived.datagram);
                driver.receive(&mut endpoint, arrived.local, arrived.remote, datagram);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_shown_ten_a_second_and_the_rest_counted() {
        let mut log = RefusalLog::default();
        let start = fastshake_core::Instant::ZERO;
        let shown = |log: &mut RefusalLog, at| matches!(log.admit(at), Admit::Yes { .. });
        let first_second = (0..25).filter(|_| shown(&mut log, start)).count();
        assert_eq!(first_second, REFUSALS_SHOWN_PER_SECOND as usize);
        // The next second's first one says how many were hidden.
        match log.admit(start + Duration::from_millis(1000)) {
            Admit::Yes { hidden_before } => assert_eq!(hidden_before, 15),
            Admit::No => panic!("a new second shows refusals again"),
        }
        match log.admit(start + Duration::from_millis(1001)) {
            Admit::Yes { hidden_before } => assert_eq!(hidden_before, 0, "said once"),
            Admit::No => panic!("within the budget"),
        }
    }
}
