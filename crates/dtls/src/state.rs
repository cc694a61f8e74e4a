//! The explicit states of a connection.

/// Where a connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Handshaking(HandshakeState),
    /// Application data flows.
    Established,
    /// close_notify sent or received.
    Closed,
    /// A fatal alert or a timeout ended the session.
    Failed,
}

/// Steps of the full handshake (RFC 6347 §4.2.4 flights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandshakeState {
    /// Client sent ClientHello (flight 1 or 3); expects HelloVerifyRequest or ServerHello.
    ClientWaitServerHello,
    /// Client has ServerHello; expects ServerKeyExchange and ServerHelloDone (rest of flight 4).
    ClientWaitServerHelloDone,
    /// Client sent flight 5; expects ChangeCipherSpec and Finished (flight 6).
    ClientWaitServerFinished,
    /// Server sent flight 4; expects ClientKeyExchange.
    ServerWaitClientKeyExchange,
    /// Server has ClientKeyExchange; expects the client's Finished.
    ServerWaitClientFinished,
}
