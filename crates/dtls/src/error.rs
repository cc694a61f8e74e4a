//! Errors a user of the engine sees.

use crate::alert::AlertDescription;
use crate::handshake::NamedGroup;
use crate::suite::CipherSuite;
use std::fmt;

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
    /// Server: the session was closed (with close_notify) after `idle` without an
    /// authenticated datagram from its peer (`ServerConfig::idle_timeout`).
    #[error("closed after {:.1} s without an authenticated datagram from the peer (idle timeout; close_notify sent)", idle.as_secs_f64())]
    IdleTimeout {
        /// The idle timeout that ran out.
        idle: std::time::Duration,
    },
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
    /// The data exceeds what one record may carry, whatever the MTU (RFC 6347 §4.1, RFC 9147
    /// §4: 2^14 bytes); `send` splits it.
    #[error(
        "{len} bytes of data exceed one record's {max} bytes (RFC 6347 §4.1, RFC 9147 §4); send splits them"
    )]
    RecordTooLarge {
        /// Bytes of data.
        len: usize,
        /// Bytes one record carries at most.
        max: usize,
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
    /// This side refused the handshake because the peer's offer and our configuration share
    /// nothing of one kind; `alert` (the one the RFC names) was sent.
    #[error("handshake refused ({alert} sent): {mismatch}")]
    NoMatch {
        /// The fatal alert sent.
        alert: AlertDescription,
        /// What did not match.
        mismatch: Mismatch,
    },
    /// Client: we offered DTLS 1.3 and 1.2, and the server answered in DTLS 1.2 with the
    /// downgrade sentinel in its random (RFC 8446 §4.1.3): it speaks 1.3, so something on the
    /// path removed 1.3 from our ClientHello.
    #[error(
        "the server answered in DTLS 1.2 although it speaks DTLS 1.3 (downgrade sentinel in its random): \
         something on the path altered our ClientHello; {alert} sent"
    )]
    Downgrade {
        /// The fatal alert sent.
        alert: AlertDescription,
    },
    /// A PSK handshake's proof of the key (a DTLS 1.3 binder, RFC 8446 §4.2.11; a DTLS 1.2
    /// Finished, RFC 4279 §2) did not verify: the sides hold different keys for the identity,
    /// or the handshake was altered on the way; decrypt_error was sent (`sent`) or received.
    #[error(
        "{}: the two sides hold different keys for PSK identity {identity:?}, or the handshake was \
         altered on the way ({alert} {})",
        if *sent { "the peer's proof of the pre-shared key did not verify" }
        else { "the server could not verify our proof of the pre-shared key" },
        if *sent { "sent" } else { "received" }
    )]
    PskMismatch {
        /// The PSK identity both named.
        identity: String,
        /// The alert, decrypt_error.
        alert: AlertDescription,
        /// Whether we found the mismatch (else the peer did and told us).
        sent: bool,
    },
    /// Client: the server answered our ClientHello with a fatal alert before any ServerHello:
    /// it found nothing it accepts in what we offered (its own log says what).
    /// `offered_groups` is non-empty when a mismatch of DTLS 1.3 groups may be the reason.
    #[error(
        "the server refused our ClientHello with alert {alert} (we offered {}{})",
        code_list(offered_suites, suite_name),
        if offered_groups.is_empty() { String::new() }
        else { format!("; groups {}", code_list(offered_groups, group_name)) }
    )]
    HelloRefused {
        /// The alert received.
        alert: AlertDescription,
        /// The cipher suites we offered.
        offered_suites: Vec<u16>,
        /// The DTLS 1.3 groups we offered, when the alert may mean that none is the server's
        /// (handshake_failure, RFC 8446 §4.1.1); empty otherwise.
        offered_groups: Vec<u16>,
    },
    /// Client: the server refused our ClientHello with protocol_version: it speaks none of the
    /// versions we offered (RFC 8446 §4.2.1).
    #[error("the server refused our ClientHello with alert {alert}: it speaks no version we offered (we offered {})", offered.name())]
    VersionRefused {
        /// The alert received.
        alert: AlertDescription,
        /// The versions we offered.
        offered: crate::config::Versions,
    },
    /// Client offering DTLS 1.3 alone: the server answered in DTLS 1.2 (with `message`), so no
    /// version is common (RFC 8446 §4.2.1); `alert` (protocol_version) was sent.
    #[error("the server answered in DTLS 1.2 ({message}); this client offers only DTLS 1.3 ({alert} sent)")]
    ServerSpeaksDtls12 {
        /// The server's message that was in DTLS 1.2: HelloVerifyRequest or ServerHello.
        message: &'static str,
        /// The fatal alert sent.
        alert: AlertDescription,
    },
}

/// What a peer's offer and our configuration did not share (see [`Error::NoMatch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// No cipher suite of the client's is one this server serves with its credentials.
    CipherSuite {
        /// The suites the client offered (code points).
        offered: Vec<u16>,
        /// The suites this server serves.
        served: Vec<CipherSuite>,
    },
    /// No elliptic-curve group of the client's is one we support (RFC 8422 §5.1.1; in DTLS 1.3
    /// RFC 8446 §4.2.7, and no PSK in psk_ke mode to do without one).
    Group {
        /// The groups the client offered (code points).
        offered: Vec<u16>,
        /// The groups we support (code points): in DTLS 1.3 those configured.
        ours: Vec<u16>,
    },
    /// No signature scheme of the client's is one our certificate's key makes.
    SignatureScheme {
        /// The schemes the client offered (code points).
        offered: Vec<u16>,
        /// The schemes our key makes.
        ours: Vec<u16>,
    },
    /// The client offers only a protocol version below ours.
    Version {
        /// The version the client offered.
        offered: u16,
    },
    /// No version the client offers is one this server speaks (RFC 8446 §4.2.1: a DTLS 1.3
    /// server and a client that offers only DTLS 1.2).
    Versions {
        /// The versions the client offered: its supported_versions, else its legacy version.
        offered: Vec<u16>,
        /// The versions this server speaks.
        ours: Vec<u16>,
    },
    /// DTLS 1.3: the client offered no PSK this server knows (`psk_offered`: it offered some)
    /// and this server has no certificate to authenticate with instead.
    Credentials {
        /// Whether the client offered any PSK identity.
        psk_offered: bool,
    },
    /// The client offered no null compression (RFC 5246 §7.4.1.2 requires it).
    Compression,
    /// Our configuration requires the extended master secret (RFC 7627) and the peer did not
    /// offer it.
    ExtendedMasterSecret,
    /// An initial handshake carried a non-empty renegotiation_info (RFC 5746 §3.6).
    Renegotiation,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::CipherSuite { offered, served } => {
                let served: Vec<u16> = served.iter().map(|s| s.id()).collect();
                write!(
                    f,
                    "no common cipher suite: the client offered {}; this server serves {}",
                    code_list(offered, suite_name),
                    code_list(&served, suite_name)
                )
            }
            Mismatch::Group { offered, ours } => write!(
                f,
                "no common group: the client offered {}; we support {}",
                code_list(offered, group_name),
                code_list(ours, group_name)
            ),
            Mismatch::SignatureScheme { offered, ours } => write!(
                f,
                "no common signature scheme: the client offered {}; our key signs with {}",
                code_list(offered, scheme_name),
                code_list(ours, scheme_name)
            ),
            Mismatch::Version { offered } => write!(
                f,
                "no common version: the client offers DTLS up to 0x{offered:04x}; we speak DTLS 1.2 (0x{:04x})",
                crate::record::DTLS_1_2
            ),
            Mismatch::Versions { offered, ours } => write!(
                f,
                "no common version: the client offered {}; this server speaks {}",
                code_list(offered, version_name),
                code_list(ours, version_name)
            ),
            Mismatch::Credentials { psk_offered } => write!(
                f,
                "nothing to authenticate with: the client offered {} and this server has no certificate",
                if *psk_offered { "no PSK identity this server knows" } else { "no PSK" }
            ),
            Mismatch::Compression => f.write_str("the client offered no null compression method"),
            Mismatch::ExtendedMasterSecret => {
                f.write_str("the peer did not offer the extended master secret (RFC 7627), which we require")
            }
            Mismatch::Renegotiation => {
                f.write_str("a non-empty renegotiation_info in an initial handshake (RFC 5746 §3.6)")
            }
        }
    }
}

/// Names each code point by `name`, or in hex where it has none, comma-separated.
fn code_list(codes: &[u16], name: fn(u16) -> Option<&'static str>) -> String {
    if codes.is_empty() {
        return "nothing".to_owned();
    }
    let names: Vec<String> =
        codes.iter().map(|&c| name(c).map_or_else(|| format!("0x{c:04x}"), str::to_owned)).collect();
    names.join(", ")
}

fn suite_name(id: u16) -> Option<&'static str> {
    match id {
        crate::handshake::SCSV_EMPTY_RENEGOTIATION_INFO => Some("TLS_EMPTY_RENEGOTIATION_INFO_SCSV"),
        _ => CipherSuite::from_id(id).map(CipherSuite::iana_name).or_else(|| {
            crate::crypto::tls13::Suite13::from_id(id).map(crate::crypto::tls13::Suite13::iana_name)
        }),
    }
}

fn group_name(code: u16) -> Option<&'static str> {
    NamedGroup::from_code(code).map(NamedGroup::name)
}

fn version_name(code: u16) -> Option<&'static str> {
    match code {
        0xfeff => Some("DTLS 1.0"),
        crate::record::DTLS_1_2 => Some("DTLS 1.2"),
        crate::handshake::DTLS_1_3 => Some("DTLS 1.3"),
        _ => None,
    }
}

fn scheme_name(code: u16) -> Option<&'static str> {
    fastshake_pki::SignatureScheme::from_code(code).map(fastshake_pki::SignatureScheme::name)
}

impl Error {
    /// The fatal alert this side sent or received, if the session ended with one.
    pub fn alert(&self) -> Option<AlertDescription> {
        match self {
            Error::AlertReceived(a) | Error::AlertSent(a) => Some(*a),
            Error::PeerAuthentication { alert, .. }
            | Error::NoSessionSlot { alert }
            | Error::NoMatch { alert, .. }
            | Error::HelloRefused { alert, .. }
            | Error::VersionRefused { alert, .. }
            | Error::ServerSpeaksDtls12 { alert, .. } => Some(*alert),
            _ => None,
        }
    }
}
