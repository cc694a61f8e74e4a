//! SCTP over UDP encapsulation (RFC 6951) on tokio sockets.
//!
//! [`SctpDriver`] moves datagrams and time between UDP sockets and one
//! [`fastshake_sctp::Endpoint`]. Each UDP payload is one SCTP packet; the remote `SocketAddr` of
//! a datagram carries the peer's encapsulation port, and the engine answers to whatever port the
//! peer used, so the driver only passes addresses through. A multihomed endpoint has one socket
//! per local address, all on the same UDP port; a datagram goes out of the socket its
//! [`Transmit::src`] names. The monotonic clock and the OS randomness that seeds the engine live
//! here, never in the engine.
//!
//! A server can run several workers on one port ([`SctpDriver::bind_workers`]), each an endpoint
//! of its own: the kernel spreads packets by 4-tuple, so a multihomed peer's other path may reach
//! a worker that does not hold its association. Workers share a map from our verification tag to
//! the worker holding the association; a worker that does not know a packet's tag passes it to
//! that worker.
//!
//! A server's drivers change their cookie key every [`DEFAULT_COOKIE_ROTATION`] (or as
//! [`SctpDriver::rotate_cookie_keys`] says), all through the same keys in the same order.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::cookie_schedule::{CookieRotation, CookieSchedule};
use fastshake_sctp::{
    AssociationHandle, Config, ConnectOptions, Endpoint, Error, Event, Instant, Message, Transmit,
};
use rand_core::{OsRng, RngCore};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::icmp::{RefusalHook, RefusalsInARow};
use crate::udp::{BatchIo, DatagramSocket, PortSharing, SendQueue};
use crate::Clock;

pub use fastshake_sctp::UDP_ENCAPSULATION_PORT;

/// Datagram counters as the socket saw them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Datagrams received / sent.
    pub datagrams_in: u64,
    /// See `datagrams_in`.
    pub datagrams_out: u64,
    /// UDP payload bytes received / sent.
    pub bytes_in: u64,
    /// See `bytes_in`.
    pub bytes_out: u64,
    /// Datagrams the kernel refused to send (dropped, as a lossy link would).
    pub send_errors: u64,
    /// Packets that arrived here for an association of another worker and were passed on.
    pub passed_on: u64,
    /// Packets another worker passed here.
    pub taken_over: u64,
}

/// Packets waiting to be passed to the worker holding their association at most; beyond it they
/// are dropped, as a full socket buffer would.
const FORWARD_QUEUE: usize = 1024;

/// A packet handed to the worker holding its association.
struct Passed {
    local: SocketAddr,
    remote: SocketAddr,
    datagram: Vec<u8>,
}

/// How one worker of a server reaches the others.
struct WorkerLink {
    index: usize,
    /// Our verification tag of every association of every worker, and the worker holding it.
    owners: Arc<std::sync::RwLock<HashMap<u32, usize>>>,
    forward_to: Arc<[mpsc::Sender<Passed>]>,
    forwarded: mpsc::Receiver<Passed>,
    /// The tags this worker put in `owners`, by association.
    registered: HashMap<AssociationHandle, u32>,
}

impl WorkerLink {
    /// The worker a packet belongs to when it is not this one: its tag is none of ours here
    /// but another worker's (an INIT's zero tag is everyone's).
    fn owner_elsewhere(&self, endpoint: &Endpoint, datagram: &[u8]) -> Option<usize> {
        let tag = u32::from_be_bytes(datagram.get(4..8)?.try_into().ok()?);
        if tag == 0 || endpoint.knows_tag(tag) {
            return None;
        }
        let owners = self.owners.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        owners.get(&tag).copied().filter(|&owner| owner != self.index)
    }

    /// Keeps `owners` in step with the associations this worker holds.
    fn note(&mut self, endpoint: &Endpoint, handle: AssociationHandle, event: &Event) {
        let owners = || self.owners.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        match event {
            Event::Connected { .. } => {
                let Some(tag) = endpoint.association(handle).map(|a| a.local_tag) else { return };
                // Tags are random: two workers' associations share one with odds 2^-32, and
                // then the first keeps it.
                owners().entry(tag).or_insert(self.index);
                self.registered.insert(handle, tag);
            }
            Event::Closed | Event::Aborted { .. } | Event::Failed(_) => {
                if let Some(tag) = self.registered.remove(&handle) {
                    let mut owners = owners();
                    if owners.get(&tag) == Some(&self.index) {
                        owners.remove(&tag);
                    }
                }
            }
            _ => {}
        }
    }
}

impl Drop for WorkerLink {
    fn drop(&mut self) {
        let mut owners = self.owners.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        for tag in self.registered.values() {
            if owners.get(tag) == Some(&self.index) {
                owners.remove(tag);
            }
        }
    }
}

/// How often a server's drivers change their cookie key unless told otherwise. The engine keeps
/// the previous key too, so a cookie opens for one to two periods: that is the lifetime of a
/// cached ALT-COOKIE (the seed's alternative handshake limits it by changing the key; RFC 4960
/// §5.1.3 asks for a key changed "reasonably frequently"). A state cookie carries its own,
/// shorter lifetime.
pub const DEFAULT_COOKIE_ROTATION: Duration = Duration::from_secs(3600);

/// One SCTP endpoint on one tokio UDP socket per local address.
pub struct SctpDriver {
    /// The primary socket first; each with the address it is bound to.
    sockets: Vec<(SocketAddr, DatagramSocket)>,
    /// Datagrams taken from the engine but not yet accepted by their socket (one queue per
    /// socket); kept here so that cancelling [`SctpDriver::next_event`] never loses them.
    outgoing: Vec<SendQueue>,
    /// Where the next receive starts looking (round robin over the sockets).
    first_socket: usize,
    endpoint: Endpoint,
    clock: Clock,
    stats: DriverStats,
    /// The other workers of a server with several (see [`SctpDriver::bind_workers`]).
    link: Option<WorkerLink>,
    /// When and to what the cookie key changes (servers; see [`SctpDriver::rotate_cookie_keys`]).
    rotation: Option<CookieRotation>,
    /// A client's peer, whose ICMP port unreachables are counted (see [`crate::icmp`]).
    refusals: Option<WatchedPeer>,
    on_refused: Option<RefusalHook>,
}

/// The peer a client connected to, and its refusals in a row.
struct WatchedPeer {
    peer: SocketAddr,
    in_a_row: RefusalsInARow,
}

impl SctpDriver {
    /// Binds a UDP socket on `addr` (port 0: any free port) and starts an endpoint with `config`,
    /// seeded from the operating system's randomness.
    pub async fn bind(addr: SocketAddr, config: Config) -> io::Result<SctpDriver> {
        let socket = UdpSocket::bind(addr).await?;
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        SctpDriver::with_socket(socket, Arc::new(config), seed)
    }

    /// Binds the primary address `addr` and, for multihoming, the same UDP port on each of
    /// `extra` (announced to the peer through `config.extra_local_addresses`, which this sets).
    pub async fn bind_multihomed(
        addr: SocketAddr,
        extra: &[IpAddr],
        mut config: Config,
    ) -> io::Result<SctpDriver> {
        let primary = UdpSocket::bind(addr).await?;
        let port = primary.local_addr()?.port();
        let mut sockets = vec![primary];
        for ip in extra {
            sockets.push(UdpSocket::bind(SocketAddr::new(*ip, port)).await?);
        }
        config.extra_local_addresses = extra.to_vec();
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        SctpDriver::with_sockets(sockets, Arc::new(config), seed)
    }

    /// Drives an endpoint on an already bound socket with an explicit seed.
    pub fn with_socket(socket: UdpSocket, config: Arc<Config>, seed: [u8; 32]) -> io::Result<SctpDriver> {
        SctpDriver::with_sockets(vec![socket], config, seed)
    }

    /// A server of one worker on `addr` (port 0: any free port), alone on it (see
    /// [`SctpDriver::bind_workers`]).
    pub fn bind_worker(addr: SocketAddr, config: Arc<Config>, batch: BatchIo) -> io::Result<SctpDriver> {
        let mut drivers = SctpDriver::bind_workers(addr, config, batch, 1, PortSharing::Exclusive)?;
        Ok(drivers.remove(0))
    }

    /// `workers` workers of one server on `addr` (port 0: any free port), each an endpoint of its
    /// own on a socket of its own, to be run by a task of its own. Their sockets share the port
    /// (SO_REUSEPORT): the kernel spreads peers over them by 4-tuple, so the associations of one
    /// peer address stay with one worker. Another process on the address is refused unless
    /// `sharing` allows it. They share one cookie key, rotated every
    /// [`DEFAULT_COOKIE_ROTATION`], so a cookie one made opens at every other, and pass each
    /// other the packets of associations they do not hold (a multihomed peer's other path),
    /// found by our verification tag.
    pub fn bind_workers(
        addr: SocketAddr,
        config: Arc<Config>,
        batch: BatchIo,
        workers: usize,
        sharing: PortSharing,
    ) -> io::Result<Vec<SctpDriver>> {
        let mut drivers = Vec::with_capacity(workers.max(1));
        for socket in DatagramSocket::bind_listeners(addr, workers, sharing, batch)? {
            let mut seed = [0u8; 32];
            OsRng.fill_bytes(&mut seed);
            drivers.push(SctpDriver::with_datagram_sockets(vec![socket], Arc::clone(&config), seed)?);
        }
        let mut cookie_key = [0u8; 16];
        OsRng.fill_bytes(&mut cookie_key);
        let owners = Arc::default();
        let (senders, receivers): (Vec<_>, Vec<_>) =
            drivers.iter().map(|_| mpsc::channel(FORWARD_QUEUE)).unzip();
        let forward_to: Arc<[mpsc::Sender<Passed>]> = senders.into();
        let linked = drivers.len() > 1;
        for (index, (driver, forwarded)) in drivers.iter_mut().zip(receivers).enumerate() {
            driver.endpoint.rotate_cookie_key(cookie_key);
            driver.link = linked.then(|| WorkerLink {
                index,
                owners: Arc::clone(&owners),
                forward_to: Arc::clone(&forward_to),
                forwarded,
                registered: HashMap::new(),
            });
        }
        SctpDriver::rotate_cookie_keys(&mut drivers, DEFAULT_COOKIE_ROTATION);
        Ok(drivers)
    }

    /// Changes the cookie key of `drivers` (one server's) every `every`, from now on, all to the
    /// same fresh key at the same time. Replaces any schedule they had.
    pub fn rotate_cookie_keys(drivers: &mut [SctpDriver], every: Duration) {
        let schedule = CookieSchedule::starting_now(every);
        for driver in drivers {
            driver.rotation = Some(CookieRotation::following(&schedule));
        }
    }

    /// Applies the cookie keys that have fallen due, in order (before the engine sees the next
    /// packet, so a cookie another worker made under a new key opens here too).
    fn rotate_due_cookie_keys(&mut self) {
        let Some(rotation) = self.rotation.as_mut() else { return };
        rotation.apply_due(|key| self.endpoint.rotate_cookie_key(key));
    }

    /// Drives an endpoint on already bound sockets (the primary first) with an explicit seed.
    pub fn with_sockets(
        sockets: Vec<UdpSocket>,
        config: Arc<Config>,
        seed: [u8; 32],
    ) -> io::Result<SctpDriver> {
        let sockets = sockets.into_iter().map(|s| DatagramSocket::new(s, BatchIo::On)).collect();
        SctpDriver::with_datagram_sockets(sockets, config, seed)
    }

    fn with_datagram_sockets(
        sockets: Vec<DatagramSocket>,
        config: Arc<Config>,
        seed: [u8; 32],
    ) -> io::Result<SctpDriver> {
        if sockets.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an SCTP driver needs a socket"));
        }
        let sockets =
            sockets.into_iter().map(|s| Ok((s.local_addr()?, s))).collect::<io::Result<Vec<_>>>()?;
        Ok(SctpDriver {
            outgoing: sockets.iter().map(|_| SendQueue::default()).collect(),
            sockets,
            first_socket: 0,
            endpoint: Endpoint::new(config, seed),
            clock: Clock::new(),
            stats: DriverStats::default(),
            link: None,
            rotation: None,
            refusals: None,
            on_refused: None,
        })
    }

    /// Whether the primary socket reads and writes in batches.
    pub fn is_batched(&self) -> bool {
        self.sockets[0].1.is_batched()
    }

    /// The UDP address the primary socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.sockets[0].0
    }

    /// Every local UDP address, the primary first.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|(a, _)| *a).collect()
    }

    /// The socket a datagram from `src` leaves by: the one bound to `src`, else one on its IP,
    /// else the primary.
    fn socket_for(&self, src: Option<SocketAddr>) -> usize {
        let found = src.and_then(|src| {
            self.sockets
                .iter()
                .position(|(a, _)| *a == src)
                .or_else(|| self.sockets.iter().position(|(a, _)| a.ip() == src.ip()))
        });
        found.unwrap_or(0)
    }

    /// The current time on the engine's time line.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The engine, for queries (`association`, `stats`).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The engine, for calls the driver does not wrap. Call [`SctpDriver::flush`] or
    /// [`SctpDriver::next_event`] afterwards so that what it queued goes out.
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// Socket counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// Opens an association to the SCTP port `remote_port` behind the UDP address `remote`.
    pub fn connect(
        &mut self,
        remote: SocketAddr,
        remote_port: u16,
        options: ConnectOptions,
    ) -> AssociationHandle {
        let now = self.clock.now();
        let local = self.local_addr();
        // Setting the option cannot fail on a UDP socket; without it, only the timers tell.
        if self.sockets[0].1.report_refusals(remote).is_ok() {
            self.refusals = Some(WatchedPeer { peer: remote, in_a_row: RefusalsInARow::default() });
        }
        self.endpoint.connect(now, Some(local), remote, remote_port, options)
    }

    /// Called at each ICMP port unreachable for what a connecting driver sends its peer
    /// (nothing listens there) that counts; after [`crate::icmp::REFUSALS_TO_GIVE_UP`] in a row
    /// with no packet from the peer between them, [`SctpDriver::next_event`] fails with
    /// `ConnectionRefused`.
    pub fn on_refused(&mut self, hook: RefusalHook) {
        self.on_refused = Some(hook);
    }

    /// Queues a user message on an association.
    pub fn send(&mut self, handle: AssociationHandle, message: Message) -> Result<(), Error> {
        self.endpoint.send(handle, message)
    }

    /// Starts a graceful shutdown once all queued data is acknowledged.
    pub fn shutdown(&mut self, handle: AssociationHandle) {
        self.endpoint.shutdown(handle)
    }

    /// Aborts an association at once.
    pub fn abort(&mut self, handle: AssociationHandle) {
        self.endpoint.abort(handle)
    }

    /// Sends every datagram the engine has queued. Cancel-safe.
    pub async fn flush(&mut self) -> io::Result<()> {
        let now = self.clock.now();
        while let Some(transmit) = self.endpoint.poll_transmit(now) {
            let Transmit { src, dst, payload, .. } = transmit;
            if let Some(watched) = self.refusals.as_mut().filter(|w| w.peer == dst) {
                watched.in_a_row.sent();
            }
            let i = self.socket_for(src);
            self.stats.datagrams_out += 1;
            self.stats.bytes_out += payload.len() as u64;
            self.outgoing[i].push_owned(&self.sockets[i].1, dst, payload);
        }
        for (queue, (_, socket)) in self.outgoing.iter_mut().zip(&self.sockets) {
            // A refused datagram is lost, as on a lossy path; retransmission timers recover.
            let refused = queue.flush(socket).await?;
            self.stats.send_errors += refused;
            self.stats.datagrams_out -= refused;
        }
        Ok(())
    }

    /// Runs the endpoint (socket, timers) until it has an event. Cancel-safe: use it inside
    /// `tokio::select!` beside other sources (standard input, a deadline).
    pub async fn next_event(&mut self) -> io::Result<(AssociationHandle, Event)> {
        loop {
            if let Some(event) = self.poll_event() {
                // What the event's arrival made the engine queue (an ACK, an answer) goes out
                // first, so the caller's processing time does not delay the peer.
                self.flush().await?;
                return Ok(event);
            }
            self.flush().await?;
            if let Some(event) = self.poll_event() {
                return Ok(event);
            }
            self.turn().await?;
        }
    }

    /// The engine's next event, noted in the workers' tag map first.
    fn poll_event(&mut self) -> Option<(AssociationHandle, Event)> {
        let (handle, event) = self.endpoint.poll_event()?;
        if let Some(link) = &mut self.link {
            link.note(&self.endpoint, handle, &event);
        }
        Some((handle, event))
    }

    /// Runs the endpoint until `deadline`, discarding nothing: events stay queued for
    /// [`SctpDriver::next_event`]. Useful to let retransmissions and SACKs happen while the
    /// caller waits.
    pub async fn drive_until(&mut self, deadline: tokio::time::Instant) -> io::Result<()> {
        loop {
            self.flush().await?;
            if tokio::time::Instant::now() >= deadline {
                return Ok(());
            }
            tokio::select! {
                r = self.turn() => r?,
                _ = tokio::time::sleep_until(deadline) => return Ok(()),
            }
        }
    }

    /// Waits for one datagram or the engine's next deadline, and hands it to the engine.
    async fn turn(&mut self) -> io::Result<()> {
        self.rotate_due_cookie_keys();
        let engine = self.endpoint.poll_timeout().map(|t| self.clock.to_tokio(t));
        let rotation = self.rotation.as_ref().and_then(CookieRotation::next_due);
        let timer = [engine, rotation].into_iter().flatten().min();
        let sleep = async {
            match timer {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending::<()>().await,
            }
        };
        let sockets = &self.sockets;
        // Whichever socket has datagrams first, starting one further each turn so a busy socket
        // cannot starve the others; every socket registers for wake-up.
        self.first_socket = (self.first_socket + 1) % sockets.len();
        let first = self.first_socket;
        let ready = std::future::poll_fn(|cx| {
            for i in (0..sockets.len()).cycle().skip(first).take(sockets.len()) {
                if let Poll::Ready(result) = sockets[i].1.poll_readable(cx) {
                    return Poll::Ready(result.map(|()| i));
                }
            }
            Poll::Pending
        });
        let link = self.link.as_mut();
        let passed = async move {
            match link {
                Some(link) => link.forwarded.recv().await,
                None => std::future::pending().await,
            }
        };
        let watching = self.refusals.is_some();
        let primary = &self.sockets[0].1;
        tokio::select! {
            errored = primary.errored(), if watching => {
                errored?;
                self.take_refusals()?;
            }
            Some(Passed { local, remote, mut datagram }) = passed => {
                self.stats.taken_over += 1;
                self.rotate_due_cookie_keys();
                self.endpoint.handle_datagram(self.clock.now(), local, remote, &mut datagram);
            }
            ready = ready => {
                let i = ready?;
                self.rotate_due_cookie_keys();
                let now = self.clock.now();
                // One batch from the socket that woke us, then whatever the others have ready
                // (a burst of INITs, a window of DATA), without another trip through the reactor.
                self.receive_from(now, i)?;
                for other in (0..self.sockets.len()).filter(|&o| o != i) {
                    self.receive_from(now, other)?;
                }
            }
            _ = sleep => {
                self.rotate_due_cookie_keys();
                self.endpoint.handle_timeout(self.clock.now());
            }
        }
        Ok(())
    }
}

impl SctpDriver {
    /// Reads the primary socket's ICMP errors; fails once the watched peer has refused enough
    /// datagrams in a row.
    fn take_refusals(&mut self) -> io::Result<()> {
        let mut refused = Vec::new();
        self.sockets[0].1.take_refusals(|refusal| refused.push(refusal))?;
        let Some(watched) = self.refusals.as_mut() else { return Ok(()) };
        for refusal in refused.into_iter().filter(|r| r.destination == watched.peer) {
            let Some(in_a_row) = watched.in_a_row.refused() else { continue };
            if let Some(hook) = &self.on_refused {
                hook(refusal, in_a_row);
            }
            if in_a_row >= crate::icmp::REFUSALS_TO_GIVE_UP {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("{refusal}, {in_a_row} times in a row"),
                ));
            }
        }
        Ok(())
    }

    /// Hands what socket `i` has ready now (one batch) to the engine.
    fn receive_from(&mut self, now: Instant, i: usize) -> io::Result<()> {
        let (local, socket) = &mut self.sockets[i];
        let local = *local;
        let endpoint = &mut self.endpoint;
        let stats = &mut self.stats;
        let link = &self.link;
        let mut refusals = self.refusals.as_mut();
        let received = socket.try_recv(|remote, datagram| {
            stats.datagrams_in += 1;
            stats.bytes_in += datagram.len() as u64;
            if let Some(watched) = refusals.as_mut().filter(|w| w.peer == remote) {
                watched.in_a_row.answered();
            }
            if let Some(link) = link {
                if let Some(owner) = link.owner_elsewhere(endpoint, datagram) {
                    // A full queue drops it, as a full socket would.
                    let passed = Passed { local, remote, datagram: datagram.to_vec() };
                    if link.forward_to[owner].try_send(passed).is_ok() {
                        stats.passed_on += 1;
                    }
                    return;
                }
            }
            endpoint.handle_datagram(now, local, remote, datagram);
        });
        match received {
            Ok(_) => Ok(()),
            Err(e) if is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Errors after which the socket is still usable: ICMP reports of an earlier send (Linux and
/// Windows surface them on the next call), momentary buffer shortage, and a destination this
/// socket cannot reach at all — a peer announces all its addresses (multihoming), some of
/// another family than our socket; a path through them is simply dead, not the endpoint.
fn is_transient(e: &io::Error) -> bool {
    const ENOBUFS: i32 = 105;
    const EAFNOSUPPORT: i32 = 97;
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::AddrNotAvailable
            | io::ErrorKind::InvalidInput
            | io::ErrorKind::PermissionDenied
    ) || matches!(e.raw_os_error(), Some(ENOBUFS | EAFNOSUPPORT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastshake_sctp::HandshakeMode;
    use std::time::Duration;

    fn config(local_port: u16, listen: bool, mode: HandshakeMode) -> Config {
        Config { local_port, listen, mode, ..Config::default() }
    }

    /// A client and a server driver on loopback exchange one message each way.
    #[tokio::test]
    async fn loopback_exchange_each_mode() {
        for mode in [HandshakeMode::Regular, HandshakeMode::Both, HandshakeMode::AltOnly] {
            let mut server =
                SctpDriver::bind("127.0.0.1:0".parse().unwrap(), config(7, true, mode)).await.unwrap();
            let mut client =
                SctpDriver::bind("127.0.0.1:0".parse().unwrap(), config(0, false, mode)).await.unwrap();
            let server_addr = server.local_addr();
            let handle = client.connect(server_addr, 7, ConnectOptions::default());

            let exchange = async {
                let mut server_handle = None;
                let mut client_connected = None;
                let mut echoed = None;
                while echoed.is_none() {
                    tokio::select! {
                        ev = client.next_event() => {
                            let (h, ev) = ev.unwrap();
                            assert_eq!(h, handle);
                            match ev {
                                Event::Connected { handshake, .. } => {
                                    client_connected = Some(handshake);
                                    let msg = Message { stream: 0, unordered: false, ppid: 0, data: b"ping".to_vec() };
                                    client.send(handle, msg).unwrap();
                                }
                                Event::Message(m) => echoed = Some(m.data),
                                Event::AltCookie { .. } => {}
                                other => panic!("client: unexpected {other:?}"),
                            }
                        }
                        ev = server.next_event() => {
                            let (h, ev) = ev.unwrap();
                            match ev {
                                Event::Connected { .. } => server_handle = Some(h),
                                Event::Message(m) => {
                                    assert_eq!(Some(h), server_handle);
                                    server.send(h, Message { data: m.data.to_ascii_uppercase(), ..m }).unwrap();
                                }
                                other => panic!("server: unexpected {other:?}"),
                            }
                        }
                    }
                }
                (client_connected, echoed)
            };
            let (handshake, echoed) =
                tokio::time::timeout(Duration::from_secs(10), exchange).await.expect("exchange timed out");
            assert_eq!(echoed.as_deref(), Some(&b"PING"[..]), "mode {mode:?}");
            let expected = match mode {
                HandshakeMode::Regular => fastshake_sctp::HandshakeKind::Regular,
                _ => fastshake_sctp::HandshakeKind::AltCookie,
            };
            assert_eq!(handshake, Some(expected), "mode {mode:?}");
            assert!(client.stats().datagrams_out >= 2 && server.stats().datagrams_in >= 2);
        }
    }

    /// A multihomed client (127.0.0.1 and 127.0.0.2) fetches an ALT-COOKIE for its second path
    /// by an INIT sent from the second socket (seed 004 §III-F); a later client on that address
    /// opens with it in one round trip.
    #[tokio::test]
    async fn multihomed_client_fetches_a_cookie_for_its_second_path() {
        let second: IpAddr = "127.0.0.2".parse().unwrap();
        let mut server =
            SctpDriver::bind("127.0.0.1:0".parse().unwrap(), config(7, true, HandshakeMode::Both))
                .await
                .unwrap();
        let server_addr = server.local_addr();
        let mut client = SctpDriver::bind_multihomed(
            "127.0.0.1:0".parse().unwrap(),
            &[second],
            config(5000, false, HandshakeMode::Both),
        )
        .await
        .unwrap();
        assert_eq!(client.local_addrs().len(), 2);
        client.connect(server_addr, 7, ConnectOptions::default());

        let fetch = async {
            loop {
                tokio::select! {
                    ev = client.next_event() => {
                        if let (_, Event::AltCookie { local: Some(local), cookie, .. }) = ev.unwrap() {
                            if local.ip() == second {
                                return cookie;
                            }
                        }
                    }
                    ev = server.next_event() => { ev.unwrap(); }
                }
            }
        };
        let cookie = tokio::time::timeout(Duration::from_secs(10), fetch)
            .await
            .expect("no cookie for the second path");

        let mut later =
            SctpDriver::bind(SocketAddr::new(second, 0), config(5001, false, HandshakeMode::Both))
                .await
                .unwrap();
        let options = ConnectOptions { cached_cookie: Some(cookie), ..ConnectOptions::default() };
        let handle = later.connect(server_addr, 7, options);
        let open = async {
            loop {
                tokio::select! {
                    ev = later.next_event() => {
                        if let (h, Event::Connected { handshake, round_trips, .. }) = ev.unwrap() {
                            assert_eq!(h, handle);
                            return (handshake, round_trips);
                        }
                    }
                    ev = server.next_event() => { ev.unwrap(); }
                    ev = client.next_event() => { ev.unwrap(); }
                }
            }
        };
        let (handshake, round_trips) =
            tokio::time::timeout(Duration::from_secs(10), open).await.expect("no open");
        assert_eq!(handshake, fastshake_sctp::HandshakeKind::AltCached);
        assert_eq!(round_trips, 1);
    }

    /// The driver's timers work: the first INIT is lost on the way, the engine's T1-init fires
    /// through `handle_timeout`, and the retransmitted INIT opens the association.
    #[tokio::test]
    async fn lost_init_is_retransmitted_by_the_timer() {
        let mut server =
            SctpDriver::bind("127.0.0.1:0".parse().unwrap(), config(7, true, HandshakeMode::Regular))
                .await
                .unwrap();
        let server_addr = server.local_addr();
        // A relay that drops the client's first datagram and forwards everything else.
        let relay = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let relay_addr = relay.local_addr().unwrap();
        let forwarding = tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            let mut client = None;
            let mut dropped = false;
            loop {
                let Ok((n, from)) = relay.recv_from(&mut buf).await else { return };
                if from == server_addr {
                    if let Some(c) = client {
                        let _ = relay.send_to(&buf[..n], c).await;
                    }
                } else {
                    client = Some(from);
                    if !dropped {
                        dropped = true;
                        continue;
                    }
                    let _ = relay.send_to(&buf[..n], server_addr).await;
                }
            }
        });
        let client_config = Config {
            rto_initial: Duration::from_millis(100),
            rto_min: Duration::from_millis(100),
            ..config(5000, false, HandshakeMode::Regular)
        };
        let mut client = SctpDriver::bind("127.0.0.1:0".parse().unwrap(), client_config).await.unwrap();
        let handle = client.connect(relay_addr, 7, ConnectOptions::default());
        let open = async {
            loop {
                tokio::select! {
                    ev = client.next_event() => {
                        if let (h, Event::Connected { .. }) = ev.unwrap() {
                            assert_eq!(h, handle);
                            return;
                        }
                    }
                    ev = server.next_event() => { ev.unwrap(); }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), open).await.expect("no open after the lost INIT");
        assert!(client.stats().datagrams_out >= 3, "INIT, INIT again, COOKIE-ECHO");
        forwarding.abort();
    }
}
