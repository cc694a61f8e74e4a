//! The endpoint: demultiplexing, stateless answers, the association table.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::{
    AssociationHandle, AssociationInfo, Config, ConnectOptions, EndpointStats, Error, Event, Instant,
    Message, Transmit,
};

/// All associations of one local SCTP port, in both roles.
pub struct Endpoint {
    config: Arc<Config>,
    events: VecDeque<(AssociationHandle, Event)>,
    stats: EndpointStats,
    next_handle: u64,
}

impl Endpoint {
    /// An endpoint with `config`, its randomness (tags, TSNs, cookie keys) drawn from `rng_seed`.
    pub fn new(config: Arc<Config>, rng_seed: [u8; 32]) -> Endpoint {
        let _ = rng_seed;
        Endpoint { config, events: VecDeque::new(), stats: EndpointStats::default(), next_handle: 0 }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Opens an association to `remote` (the peer's UDP address) and SCTP port `remote_port`.
    pub fn connect(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        remote_port: u16,
        opts: ConnectOptions,
    ) -> AssociationHandle {
        let _ = (now, local, remote, remote_port, opts);
        self.next_handle += 1;
        AssociationHandle(self.next_handle)
    }

    /// One UDP payload (one SCTP packet) arrived on `local` from `remote`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        let _ = (now, local, remote, datagram);
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let _ = now;
        None
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Deadlines up to `now` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<(AssociationHandle, Event)> {
        self.events.pop_front()
    }

    /// Queues a user message.
    pub fn send(&mut self, handle: AssociationHandle, msg: Message) -> Result<(), Error> {
        let _ = (handle, msg);
        Err(Error::UnknownAssociation)
    }

    /// Graceful shutdown once all queued data is acknowledged.
    pub fn shutdown(&mut self, handle: AssociationHandle) {
        let _ = handle;
    }

    /// Sends ABORT and forgets the association.
    pub fn abort(&mut self, handle: AssociationHandle) {
        let _ = handle;
    }

    /// A snapshot of an association.
    pub fn association(&self, handle: AssociationHandle) -> Option<AssociationInfo> {
        let _ = handle;
        None
    }

    /// Makes `key` the current cookie key (state cookies and ALT-COOKIEs); cookies signed under
    /// the previous key still verify, older ones do not.
    pub fn rotate_cookie_key(&mut self, key: [u8; 16]) {
        let _ = key;
    }

    /// Endpoint counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }
}

impl fastshake_core::SansIo for Endpoint {
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
