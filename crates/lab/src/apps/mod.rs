//! The engines as simulator apps: sans-IO endpoints the simulator drives in virtual time like
//! any other [`fastshake_sim::apps::App`], shared by the lab's experiments and the benchmarks.
//!
//! - [`dtls_client`]: a DTLS client that runs sessions one after another (full, resumed by
//!   ticket, moving mid-session), each followed by a request/echo exchange;
//! - [`dtls_server`]: one DTLS [`fastshake_dtls::Endpoint`] that echoes requests and counts;
//! - [`mobile_client`]: a DTLS client on a moving host (seed 001's workload, E1's): one request
//!   outstanding across handovers, one or two interfaces, reconnecting as standard DTLS must;
//! - [`sctp_client`] and [`sctp_server`]: SCTP associations one after another (regular,
//!   alternative, cached ALT-COOKIE, zero-RTT, cookieless) and an echo server;
//! - [`scenario`]: the factory that makes all of these from a scenario file's `[[app]]` entries;
//! - [`records`]: the request/echo records, named so that a record the engine delivers twice
//!   shows;
//! - [`session_ports`]: a DTLS server's socket strategy (IPC, TCS) on simulated ports;
//! - [`cross_traffic`]: steady traffic that keeps a shared link's loss process moving.

pub mod cross_traffic;
pub mod dtls_client;
pub mod dtls_server;
pub mod mobile_client;
pub mod records;
pub mod scenario;
pub mod sctp_client;
pub mod sctp_server;
pub mod session_ports;

use fastshake_dtls::{Error, Resumption, Versions};

/// A DTLS handshake's kind as the scenario summary names it: DTLS 1.2 handshakes by how they
/// resumed, DTLS 1.3 ones the same with a `dtls13-` prefix, so a server that speaks both shows
/// which version each client got.
pub fn dtls_kind(version: Versions, resumption: Option<Resumption>) -> &'static str {
    match (version == Versions::Dtls13, resumption) {
        (false, None) => "full",
        (false, Some(Resumption::Ticket)) => "resumed-ticket",
        (false, Some(Resumption::SessionId)) => "resumed-session-id",
        (true, None) => "dtls13-full",
        (true, Some(Resumption::Ticket)) => "dtls13-resumed-ticket",
        (true, Some(Resumption::SessionId)) => "dtls13-resumed-session-id",
    }
}

/// An error as reports group it: the variant and alert, without the parts that differ from one
/// occurrence to the next (retransmission counts, free text).
pub fn error_class(error: &Error) -> String {
    match error {
        Error::HandshakeTimeout { .. } => "HandshakeTimeout".into(),
        Error::PeerAuthentication { alert, .. } => format!("PeerAuthentication({alert:?})"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastshake_dtls::AlertDescription;

    #[test]
    fn dtls13_kinds_are_named_apart() {
        assert_eq!(dtls_kind(Versions::Dtls12, None), "full");
        assert_eq!(dtls_kind(Versions::Dtls12, Some(Resumption::Ticket)), "resumed-ticket");
        assert_eq!(dtls_kind(Versions::Dtls13, None), "dtls13-full");
        assert_eq!(dtls_kind(Versions::Dtls13, Some(Resumption::SessionId)), "dtls13-resumed-session-id");
    }

    #[test]
    fn errors_group_by_kind_and_alert() {
        assert_eq!(
            error_class(&Error::AlertSent(AlertDescription::UnexpectedMessage)),
            "AlertSent(UnexpectedMessage)"
        );
        let a = error_class(&Error::HandshakeTimeout { retransmissions: 3 });
        assert_eq!(a, error_class(&Error::HandshakeTimeout { retransmissions: 9 }));
        let auth = |reason: &str| Error::PeerAuthentication {
            alert: AlertDescription::BadCertificate,
            reason: reason.into(),
        };
        assert_eq!(error_class(&auth("x")), error_class(&auth("y")));
    }
}
