//! One DTLS session as a WebRTC peer runs it, whichever role `a=setup` gave us (RFC 8842 §5):
//! the answering [`crate::peer::Peer`] is always the server; the offering
//! [`crate::client::Client`] is the client, or the server when the answer chose
//! `a=setup:active`.

use std::net::SocketAddr;

use fastshake_core::{Instant, Transmit};
use fastshake_dtls as dtls;

/// Our side of one DTLS session: a client connection, or a server endpoint that ends up with
/// one session (the address ICE checked) and reports only that session's events.
pub(crate) enum DtlsSide {
    Client(dtls::Connection),
    Server { endpoint: Box<dtls::Endpoint>, session: Option<dtls::ConnectionHandle>, local: SocketAddr },
}

impl DtlsSide {
    /// A server answering on `local`, with no session yet.
    pub(crate) fn server(endpoint: dtls::Endpoint, local: SocketAddr) -> DtlsSide {
        DtlsSide::Server { endpoint: Box::new(endpoint), session: None, local }
    }

    /// The peer's address once the session is up.
    pub(crate) fn session_remote(&self) -> Option<SocketAddr> {
        match self {
            DtlsSide::Client(c) => c.is_established().then(|| c.remote()),
            DtlsSide::Server { endpoint, session, .. } => {
                session.and_then(|h| endpoint.connection(h)).map(|c| c.remote())
            }
        }
    }

    pub(crate) fn handle_datagram(&mut self, now: Instant, remote: SocketAddr, datagram: &mut [u8]) {
        match self {
            DtlsSide::Client(c) => c.handle_datagram(now, remote, datagram),
            DtlsSide::Server { endpoint, local, .. } => {
                endpoint.handle_datagram(now, *local, remote, datagram)
            }
        }
    }

    /// The next event of the session (a server's other connections have none worth reporting:
    /// only the checked peer reaches it).
    pub(crate) fn poll_event(&mut self) -> Option<dtls::Event> {
        match self {
            DtlsSide::Client(c) => c.poll_event(),
            DtlsSide::Server { endpoint, session, .. } => loop {
                let (handle, event) = endpoint.poll_event()?;
                if let dtls::Event::Connected(_) = &event {
                    *session = Some(handle);
                }
                if *session == Some(handle) || matches!(event, dtls::Event::Failed(_)) {
                    return Some(event);
                }
            },
        }
    }

    pub(crate) fn send(&mut self, data: &[u8]) -> Result<(), dtls::Error> {
        match self {
            DtlsSide::Client(c) => c.send(data),
            DtlsSide::Server { endpoint, session, .. } => {
                endpoint.send(session.ok_or(dtls::Error::UnknownConnection)?, data)
            }
        }
    }

    pub(crate) fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        match self {
            DtlsSide::Client(c) => c.poll_transmit(now),
            DtlsSide::Server { endpoint, .. } => endpoint.poll_transmit(now),
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            DtlsSide::Client(c) => c.poll_timeout(),
            DtlsSide::Server { endpoint, .. } => endpoint.poll_timeout(),
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        match self {
            DtlsSide::Client(c) => c.handle_timeout(now),
            DtlsSide::Server { endpoint, .. } => endpoint.handle_timeout(now),
        }
    }

    pub(crate) fn close(&mut self) {
        match self {
            DtlsSide::Client(c) => c.close(),
            DtlsSide::Server { endpoint, session, .. } => {
                if let Some(h) = session {
                    endpoint.close(*h);
                }
            }
        }
    }
}
