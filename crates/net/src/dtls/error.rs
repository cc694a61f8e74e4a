//! What can go wrong in a driver.

use crate::icmp::Refusal;
use fastshake_dtls::Error as DtlsError;
use std::io;
use std::time::Duration;

/// What can go wrong in a driver.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The socket failed (its error says how).
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Nothing listens at the server's address: the kernel reported an ICMP port unreachable
    /// for each of `in_a_row` flights of the handshake, with no answer between them.
    #[error("{refusal}, {in_a_row} times in a row ({:.1} s)", elapsed.as_secs_f64())]
    Refused {
        /// The last refusal.
        refusal: Refusal,
        /// Flights refused in a row.
        in_a_row: u32,
        /// Time from the first ClientHello to giving up.
        elapsed: Duration,
    },
    /// The handshake got no answer: the engine gave up after its retransmissions.
    #[error("no answer after {retransmissions} retransmissions ({:.1} s)", elapsed.as_secs_f64())]
    NoAnswer {
        /// Flights resent before giving up.
        retransmissions: u32,
        /// Time from the first ClientHello to giving up.
        elapsed: Duration,
    },
    /// The DTLS engine reported a failure (an alert sent or received, a protocol error, ...).
    #[error("{0}")]
    Dtls(DtlsError),
    /// A client's reconnection (see `ClientOptions::app_timeout`) failed as `cause` says; the
    /// records sent since the server last answered were never answered.
    #[error(
        "{}reconnecting failed: {cause}; {unanswered} record(s) sent since the server last answered were never answered",
        silence_text(*silent_for)
    )]
    ReconnectFailed {
        /// Why the new session's handshake failed.
        cause: Box<DriverError>,
        /// Records sent since the last one received, none of them answered.
        unanswered: usize,
        /// The app timeout, when the server's silence started the reconnection.
        silent_for: Option<Duration>,
    },
    /// A client was closed while its reconnection's handshake was still under way: the records
    /// sent since the server last answered were never answered.
    #[error(
        "closed while reconnecting: {}the new session's handshake was not done after {:.1} s ({flights} flight(s) sent); {unanswered} record(s) sent since the server last answered were never answered",
        silence_text(*silent_for),
        elapsed.as_secs_f64()
    )]
    ClosedReconnecting {
        /// Time from the reconnection's first ClientHello to the close.
        elapsed: Duration,
        /// Handshake flights sent and resent by the reconnection's attempts.
        flights: u32,
        /// Records sent since the last one received, none of them answered.
        unanswered: usize,
        /// The app timeout, when the server's silence started the reconnection.
        silent_for: Option<Duration>,
    },
    /// The driver task ended before answering.
    #[error("the connection task has stopped")]
    TaskStopped,
}

/// What started a reconnection, as the errors about it begin.
fn silence_text(silent_for: Option<Duration>) -> String {
    silent_for.map_or(String::new(), |after| {
        format!(
            "the server stopped answering (nothing for {} ms after records were sent): ",
            after.as_millis()
        )
    })
}

impl DriverError {
    pub(super) fn from_engine(error: DtlsError, elapsed: Duration) -> Self {
        match error {
            DtlsError::HandshakeTimeout { retransmissions } => {
                DriverError::NoAnswer { retransmissions, elapsed }
            }
            other => DriverError::Dtls(other),
        }
    }

    /// The same error, for a second caller (an `io::Error` keeps its kind and text).
    pub(super) fn duplicate(&self) -> DriverError {
        match self {
            DriverError::Io(e) => DriverError::Io(io::Error::new(e.kind(), e.to_string())),
            DriverError::Refused { refusal, in_a_row, elapsed } => {
                DriverError::Refused { refusal: *refusal, in_a_row: *in_a_row, elapsed: *elapsed }
            }
            DriverError::NoAnswer { retransmissions, elapsed } => {
                DriverError::NoAnswer { retransmissions: *retransmissions, elapsed: *elapsed }
            }
            DriverError::Dtls(e) => DriverError::Dtls(e.clone()),
            DriverError::ReconnectFailed { cause, unanswered, silent_for } => DriverError::ReconnectFailed {
                cause: Box::new(cause.duplicate()),
                unanswered: *unanswered,
                silent_for: *silent_for,
            },
            DriverError::ClosedReconnecting { elapsed, flights, unanswered, silent_for } => {
                DriverError::ClosedReconnecting {
                    elapsed: *elapsed,
                    flights: *flights,
                    unanswered: *unanswered,
                    silent_for: *silent_for,
                }
            }
            DriverError::TaskStopped => DriverError::TaskStopped,
        }
    }
}
