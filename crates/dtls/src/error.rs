//! Errors a user of the engine sees.

use crate::alert::AlertDescription;

/// Why a session failed or an operation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The peer ended the session with a fatal alert.
    #[error("the peer aborted the session with alert {0}")]
    AlertReceived(AlertDescription),
    /// This side ended the session with a fatal alert.
    #[error("the session was aborted locally with alert {0}")]
    AlertSent(AlertDescription),
    /// The handshake did not complete in time.
    #[error("no answer from the peer after {retransmissions} retransmissions")]
    HandshakeTimeout {
        /// Flights resent before giving up.
        retransmissions: u32,
    },
    /// The session is closed.
    #[error("the session is closed")]
    Closed,
    /// The handshake has not completed yet.
    #[error("the session is not established yet")]
    NotEstablished,
    /// The peer started a new handshake from the same address, which replaced this session.
    #[error("the peer started a new handshake from the same address")]
    Superseded,
    /// Client: the server answered our ClientHello with a fatal internal_error alert before any
    /// ServerHello. A fastshake server does so when every session slot is taken
    /// (`ServerConfig::max_sessions`, `WhenFull::Refuse`); another server may mean another
    /// internal failure.
    #[error(
        "no free session slot on the server: it answered the ClientHello with a fatal {alert} alert \
         (what a fastshake server sends when all its session slots are taken; another server may send \
         it for another reason)"
    )]
    NoSessionSlot {
        /// The alert received.
        alert: AlertDescription,
    },
    /// The output buffer cannot hold the record.
    #[error("the output buffer is too small: {needed} bytes needed")]
    BufferTooSmall {
        /// Bytes the record needs.
        needed: usize,
    },
    /// The data does not fit one record within the configured MTU.
    #[error("{len} bytes of data do not fit one record within an MTU of {mtu} bytes")]
    TooLarge {
        /// Bytes of data.
        len: usize,
        /// The configured datagram size.
        mtu: usize,
    },
    /// The handle names no connection.
    #[error("no such connection")]
    UnknownConnection,
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
    /// The peer's certificate chain or handshake signature was refused; `alert` was sent.
    #[error("the peer's certificate or signature was refused ({alert}): {reason}")]
    PeerAuthentication {
        /// The fatal alert sent.
        alert: AlertDescription,
        /// Why, in words.
        reason: String,
    },
    /// The operation needs an extension the peer did not negotiate, or a state the session is
    /// not in (e.g. `Endpoint::move_to` before `Event::Connected`).
    #[error("not possible in this session: {0}")]
    NotNegotiated(&'static str),
    /// Serialized session bytes could not be read.
    #[error("bad session bytes: {0}")]
    BadSession(&'static str),
}

impl Error {
    /// The fatal alert this side sent or received, if the session ended with one.
    pub fn alert(&self) -> Option<AlertDescription> {
        match self {
            Error::AlertReceived(a) | Error::AlertSent(a) => Some(*a),
            Error::PeerAuthentication { alert, .. } | Error::NoSessionSlot { alert } => Some(*alert),
            _ => None,
        }
    }
}
