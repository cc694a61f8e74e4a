//! One DTLS session, client or server.

use crate::config::{ClientConfig, ServerConfig};
use crate::error::Error;
use crate::suite::CipherSuite;
use fastshake_core::{Instant, SansIo, Transmit};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Which side of the handshake a connection plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends the ClientHello.
    Client,
    /// Answers it.
    Server,
}

/// Something the application should know.
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
}

/// What a completed handshake cost and agreed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeSummary {
    /// The suite agreed.
    pub suite: CipherSuite,
    /// Whether an earlier session was resumed (abbreviated handshake).
    pub resumed: bool,
    /// From the first ClientHello sent (client) or the cookie-verified ClientHello (server) to completion.
    pub duration: Duration,
    /// Flights sent, first transmissions only.
    pub flights_sent: u32,
    /// Flights resent.
    pub retransmissions: u32,
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

/// One session, client or server.
pub struct Connection {
    _todo: (),
}

impl Connection {
    /// A client session towards `remote`; the ClientHello is ready in `poll_transmit`.
    pub fn client(
        config: Arc<ClientConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
    ) -> Connection {
        let _ = (config, now, remote, rng_seed);
        todo!()
    }

    #[allow(dead_code)]
    pub(crate) fn server(
        config: Arc<ServerConfig>,
        now: Instant,
        remote: SocketAddr,
        rng_seed: [u8; 32],
    ) -> Connection {
        let _ = (config, now, remote, rng_seed);
        todo!()
    }

    /// A datagram from `remote` arrived; it may be decrypted in place.
    pub fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        let _ = (now, remote, datagram);
        todo!()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let _ = now;
        todo!()
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }

    /// The deadline from `poll_timeout` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
        todo!()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        todo!()
    }

    /// Queues `data` as application data (several records if it exceeds one datagram).
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        let _ = data;
        todo!()
    }

    /// Sends close_notify and closes the session.
    pub fn close(&mut self) {
        todo!()
    }

    /// Whether the handshake completed and the session is open.
    pub fn is_established(&self) -> bool {
        todo!()
    }

    /// Whether the session ended (closed or failed).
    pub fn is_closed(&self) -> bool {
        todo!()
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        todo!()
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        todo!()
    }

    /// The agreed suite, once known.
    pub fn suite(&self) -> Option<CipherSuite> {
        todo!()
    }

    /// Client or server.
    pub fn role(&self) -> Role {
        todo!()
    }

    /// Writes one datagram holding one application record with `data` into `out`; returns its
    /// length. No heap allocation.
    pub fn seal_into(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let _ = (data, out);
        todo!()
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
        let _ = (now, remote, datagram, on_data);
        todo!()
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
