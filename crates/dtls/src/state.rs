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
    /// Client has ServerHello of a certificate suite; expects the server's Certificate.
    ClientWaitCertificate,
    /// Client validated the server's chain; expects the signed ServerKeyExchange.
    ClientWaitServerKeyExchange,
    /// Client has ServerHello (PSK: and maybe ServerKeyExchange; certificates: and the signed
    /// ServerKeyExchange); expects CertificateRequest (certificates) and ServerHelloDone.
    ClientWaitServerHelloDone,
    /// Client sent flight 5; expects ChangeCipherSpec and Finished (flight 6).
    ClientWaitServerFinished,
    /// Server sent flight 4 with a CertificateRequest; expects the client's Certificate.
    ServerWaitClientCertificate,
    /// Server sent flight 4; expects ClientKeyExchange.
    ServerWaitClientKeyExchange,
    /// Server has a client certificate and ClientKeyExchange; expects CertificateVerify.
    ServerWaitCertificateVerify,
    /// Server has ClientKeyExchange; expects the client's Finished.
    ServerWaitClientFinished,
}
