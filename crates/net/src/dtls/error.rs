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
    /// The driver task ended before answering.
    #[error("the connection task has stopped")]
    TaskStopped,
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
            DriverError::TaskStopped => DriverError::TaskStopped,
        }
    }
}
