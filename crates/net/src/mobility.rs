//! Moving clients (seed 001), the driver's part: the sockets a DTLS server's sessions own under
//! the IPC and TCS strategies, in a table that opens them, reads them into the server's queue,
//! sends from them and closes each with its session, and the code that carries out the engine's
//! [`SocketAction`] for a session (`SessionSockets::carry_out`).
//!
//! The engine's part lives in `fastshake-dtls`: which session gets which socket, and when, is
//! decided by [`fastshake_dtls::MobilityMode::socket_action`] (`crates/dtls/src/strategy.rs`);
//! Connection IDs, return-routability checks (RFC 9853) and port moves are
//! `crates/dtls/src/mobility.rs` and `crates/dtls/src/connection/path.rs`. A worker of
//! [`crate::dtls`] asks `socket_action` after each engine event and hands its answer here.
#![forbid(unsafe_code)]

use fastshake_dtls::{ConnectionHandle, Endpoint};
pub use fastshake_dtls::{MobilityMode, SocketAction, SERVER_CID_LENGTH};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A datagram that arrived on one of the sessions' sockets.
pub(crate) struct Arrived {
    /// The socket's address (for a temporary socket: the welcome address it shares).
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub datagram: Vec<u8>,
}

/// How many datagrams the session sockets' readers may have waiting for the server task; beyond
/// it they stop reading and the kernel's receive buffers take the rest (and drop what overflows).
const INCOMING_QUEUE: usize = 256;

/// Largest UDP payload a session socket reads.
const RECEIVE_BUFFER: usize = 65_536;

/// One socket and the task that reads it; dropping it stops the task, which closes the socket.
struct ReadSocket {
    local: SocketAddr,
    socket: Arc<UdpSocket>,
    reader: JoinHandle<()>,
}

impl Drop for ReadSocket {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[derive(Default)]
struct OwnedSockets {
    /// IPC: from acceptance on; TCS: from `move_to` on.
    own: Option<ReadSocket>,
    /// TCS: during the handshake, and until the client has used `own`.
    temporary: Option<ReadSocket>,
}

/// The sockets a server's sessions own (IPC and TCS), by session and by local address.
pub(crate) struct SessionSockets<K> {
    welcome: SocketAddr,
    incoming: mpsc::Sender<Arrived>,
    sessions: HashMap<K, OwnedSockets>,
    /// Own sockets by local address, for sending from `Transmit.src`.
    by_local: HashMap<SocketAddr, K>,
}

impl<K: Copy + Eq + std::hash::Hash> SessionSockets<K> {
    /// A table for a server whose welcome socket is `welcome`, and the queue of what arrives on
    /// the sessions' sockets.
    pub fn new(welcome: SocketAddr) -> (SessionSockets<K>, mpsc::Receiver<Arrived>) {
        let (tx, rx) = mpsc::channel(INCOMING_QUEUE);
        let table =
            SessionSockets { welcome, incoming: tx, sessions: HashMap::new(), by_local: HashMap::new() };
        (table, rx)
    }

    /// Binds a socket of session `id`'s own on a new port of the welcome IP; returns its address.
    pub fn open_own(&mut self, id: K) -> io::Result<SocketAddr> {
        let std_socket = std::net::UdpSocket::bind(SocketAddr::new(self.welcome.ip(), 0))?;
        std_socket.set_nonblocking(true)?;
        let read = self.start_reading(UdpSocket::from_std(std_socket)?, None)?;
        let local = read.local;
        self.by_local.insert(local, id);
        // A second own socket replaces the first (and closes it).
        if let Some(old) = self.sessions.entry(id).or_default().own.replace(read) {
            self.by_local.remove(&old.local);
        }
        Ok(local)
    }

    /// TCS: a socket on the welcome port connected to `client`, so the kernel hands it that
    /// client's datagrams during session `id`'s handshake. The welcome socket must have been
    /// bound with [`reusable_udp_socket`].
    pub fn open_temporary(&mut self, id: K, client: SocketAddr) -> io::Result<()> {
        let socket = reusable_udp_socket(self.welcome)?;
        socket.connect(&client.into())?;
        let read = self.start_reading(UdpSocket::from_std(socket.into())?, Some(self.welcome))?;
        self.sessions.entry(id).or_default().temporary = Some(read);
        Ok(())
    }

    fn start_reading(&self, socket: UdpSocket, local_as: Option<SocketAddr>) -> io::Result<ReadSocket> {
        let local = local_as.map_or_else(|| socket.local_addr(), Ok)?;
        let socket = Arc::new(socket);
        let reader = tokio::spawn(read_into(Arc::clone(&socket), local, self.incoming.clone()));
        Ok(ReadSocket { local, socket, reader })
    }

    /// The session socket to send from `src`; `None` if no session owns it (any more).
    pub fn socket_for(&self, src: SocketAddr) -> Option<&Arc<UdpSocket>> {
        let id = self.by_local.get(&src)?;
        self.sessions.get(id)?.own.as_ref().map(|read| &read.socket)
    }

    /// Sends `payload` to `dst` from the session socket at `src`; when no session owns it any
    /// more, or the send fails, the datagram is lost and the engine's timers cope. Returns the
    /// session whose temporary socket went (see [`SessionSockets::sent_from`]).
    pub async fn send_from(&mut self, src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Option<K> {
        if let Some(socket) = self.socket_for(src) {
            let _ = socket.send_to(payload, dst).await;
        }
        // TCS: the session sends from its own port, so the client has used it.
        self.sent_from(src)
    }

    /// The engine sends from `src`: if that is a session's own socket while the session still has
    /// a temporary one, the client has used the new port (TCS) and the temporary socket goes.
    /// Returns the session whose temporary socket went.
    pub fn sent_from(&mut self, src: SocketAddr) -> Option<K> {
        let id = *self.by_local.get(&src)?;
        let sockets = self.sessions.get_mut(&id)?;
        sockets.temporary.take().map(|_| id)
    }

    /// Closes every socket of session `id`.
    pub fn close(&mut self, id: K) {
        if let Some(sockets) = self.sessions.remove(&id) {
            if let Some(own) = &sockets.own {
                self.by_local.remove(&own.local);
            }
        }
    }

    /// Closes the own socket of session `id` (a move that could not be made).
    pub fn close_own(&mut self, id: K) {
        if let Some(own) = self.sessions.get_mut(&id).and_then(|s| s.own.take()) {
            self.by_local.remove(&own.local);
        }
    }

    /// Closes the sockets of every session `alive` says is gone.
    pub fn retain(&mut self, mut alive: impl FnMut(K) -> bool) {
        let gone: Vec<K> = self.sessions.keys().copied().filter(|&id| !alive(id)).collect();
        for id in gone {
            self.close(id);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

impl SessionSockets<ConnectionHandle> {
    /// Does what the strategy decided for session `handle`'s sockets, telling `endpoint` where
    /// the session sends from now. Returns the session's own socket when it sends from there at
    /// once (IPC), or why it stays on the welcome socket: a socket that cannot be opened leaves
    /// the session there, like a standard one.
    pub fn carry_out(
        &mut self,
        endpoint: &mut Endpoint,
        handle: ConnectionHandle,
        action: SocketAction,
    ) -> Result<Option<SocketAddr>, String> {
        match action {
            // IPC: the ServerHello already leaves from the session's own socket.
            SocketAction::OpenOwn => self
                .open_own(handle)
                .map(|local| {
                    endpoint.set_local(handle, local);
                    Some(local)
                })
                .map_err(|error| format!("no socket of its own: {error}")),
            // TCS: the rest of the handshake over a socket connected to the client.
            SocketAction::OpenTemporary { client } => self
                .open_temporary(handle, client)
                .map(|()| None)
                .map_err(|error| format!("no temporary socket: {error}")),
            // TCS: a port of its own, announced by the engine; the temporary socket goes once the
            // session sends from the new port.
            SocketAction::MoveToOwn => self
                .open_own(handle)
                .and_then(|local| {
                    endpoint.move_to(handle, local).map_err(|error| {
                        self.close_own(handle);
                        io::Error::other(error.to_string())
                    })
                })
                .map(|()| None)
                .map_err(|error| format!("no move to a port of its own: {error}")),
            SocketAction::StayOnWelcomePort(reason) => Err(reason.to_owned()),
        }
    }
}

/// A non-blocking UDP socket bound to `addr` with SO_REUSEADDR and SO_REUSEPORT, so that
/// connected sockets can share its port (TCS).
pub(crate) fn reusable_udp_socket(addr: SocketAddr) -> io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// Reads `socket` until the server stops listening (or the socket fails), queueing every
/// datagram as arrived at `local`.
async fn read_into(socket: Arc<UdpSocket>, local: SocketAddr, incoming: mpsc::Sender<Arrived>) {
    let mut buffer = vec![0u8; RECEIVE_BUFFER];
    loop {
        match socket.recv_from(&mut buffer).await {
            Ok((len, remote)) => {
                let datagram = buffer[..len].to_vec();
                if incoming.send(Arrived { local, remote, datagram }).await.is_err() {
                    return;
                }
            }
            // ICMP errors of earlier sends surface here; the engine's timers cope.
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
                ) => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_from_their_names() {
        for mode in MobilityMode::ALL {
            assert_eq!(mode.name().parse::<MobilityMode>(), Ok(mode));
        }
        assert!("roaming".parse::<MobilityMode>().unwrap_err().contains("ipc"));
    }

    #[tokio::test]
    async fn carrying_out_an_action_gives_a_socket_or_says_why_not() {
        use fastshake_testkit::dtls::{client_config, server_config, Pair};
        let mut pair = Pair::new(client_config(), server_config());
        pair.handshake(std::time::Duration::from_secs(5)).expect("a handshake");
        let handle = pair.server_handle();
        let welcome = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (mut table, _incoming) = SessionSockets::new(welcome.local_addr().unwrap());
        // IPC: a socket of its own, which the session sends from at once.
        let own = table.carry_out(&mut pair.server, handle, SocketAction::OpenOwn).unwrap();
        let own = own.expect("IPC names the session's socket");
        assert!(table.socket_for(own).is_some());
        assert_eq!(pair.server.connection(handle).and_then(|c| c.local()), Some(own));
        // TCS: a client that did not offer port_move cannot follow; the socket opened for the
        // move closes again, and the session stays where it was.
        let why = table.carry_out(&mut pair.server, handle, SocketAction::MoveToOwn).unwrap_err();
        assert!(why.starts_with("no move to a port of its own: "), "{why}");
        assert!(table.socket_for(own).is_none());
        // The strategy's own refusal is passed on as it is.
        let why = SocketAction::StayOnWelcomePort("the client did not offer port_move");
        assert_eq!(
            table.carry_out(&mut pair.server, handle, why),
            Err("the client did not offer port_move".to_owned())
        );
    }

    #[tokio::test]
    async fn a_closed_session_leaves_no_socket_behind() {
        let welcome = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (mut table, mut incoming) = SessionSockets::<u64>::new(welcome.local_addr().unwrap());
        let own = table.open_own(7).unwrap();
        assert_ne!(own.port(), welcome.local_addr().unwrap().port());
        assert!(table.socket_for(own).is_some());
        // What arrives on the session's socket is queued as arrived there.
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"hello", own).unwrap();
        let arrived = incoming.recv().await.unwrap();
        assert_eq!(
            (arrived.local, arrived.remote, arrived.datagram.as_slice()),
            (own, client.local_addr().unwrap(), &b"hello"[..])
        );
        table.close(7);
        assert!(table.is_empty() && table.socket_for(own).is_none());
        // The reader has stopped and the port is free again.
        let mut rebound = None;
        for _ in 0..100 {
            tokio::task::yield_now().await;
            if let Ok(socket) = std::net::UdpSocket::bind(own) {
                rebound = Some(socket);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(rebound.is_some(), "the session's port {own} is still taken after close");
    }
}
