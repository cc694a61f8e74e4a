//! The server side: stateless cookies and a bounded table of connections.

use crate::config::ServerConfig;
use crate::connection::{Connection, Event};
use crate::error::Error;
use fastshake_core::{Instant, SansIo, Transmit};
use std::net::SocketAddr;
use std::sync::Arc;

/// Names one connection of an [`Endpoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub u64);

/// Counters of an endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// HelloVerifyRequests sent (no state kept).
    pub hello_verify_sent: u64,
    /// ClientHellos whose cookie did not verify.
    pub cookies_rejected: u64,
    /// Connections in the table now.
    pub connections_open: u64,
    /// Connections created since the start.
    pub connections_accepted: u64,
    /// ClientHellos ignored because the table was full.
    pub connections_refused: u64,
    /// Datagrams dropped before reaching a connection (unparsable, unknown peer, ...).
    pub datagrams_dropped: u64,
}

/// The server side of DTLS.
pub struct Endpoint {
    _todo: (),
}

impl Endpoint {
    /// A server with `config`; `rng_seed` seeds the first cookie key and every connection's randomness.
    pub fn new(config: Arc<ServerConfig>, rng_seed: [u8; 32]) -> Endpoint {
        let _ = (config, rng_seed);
        todo!()
    }

    /// A datagram arrived at `local` from `remote`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        let _ = (now, local, remote, datagram);
        todo!()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let _ = now;
        todo!()
    }

    /// The earliest deadline of any connection.
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }

    /// Runs the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
        todo!()
    }

    /// The next event of any connection.
    pub fn poll_event(&mut self) -> Option<(ConnectionHandle, Event)> {
        todo!()
    }

    /// Queues application data on connection `h`.
    pub fn send(&mut self, h: ConnectionHandle, data: &[u8]) -> Result<(), Error> {
        let _ = (h, data);
        todo!()
    }

    /// Closes connection `h` with close_notify.
    pub fn close(&mut self, h: ConnectionHandle) {
        let _ = h;
        todo!()
    }

    /// Connection `h`, if still in the table.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        let _ = h;
        todo!()
    }

    /// Connection `h`, mutable (for `seal_into` / `open_in_place` on the data path).
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let _ = h;
        todo!()
    }

    /// The connection with peer `remote`, if any.
    pub fn handle_for(&self, remote: SocketAddr) -> Option<ConnectionHandle> {
        let _ = remote;
        todo!()
    }

    /// Makes `key` the current cookie key; cookies under the previous key still verify.
    pub fn rotate_cookie_key(&mut self, key: [u8; 16]) {
        let _ = key;
        todo!()
    }

    /// Counters.
    pub fn stats(&self) -> EndpointStats {
        todo!()
    }
}

impl SansIo for Endpoint {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        Endpoint::handle_datagram(self, now, local, remote, datagram)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        Endpoint::poll_transmit(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now)
    }
}
