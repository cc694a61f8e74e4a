//! The one-line summaries `fastshake server` and `fastshake client` print, and traffic totals.

use fastshake_dtls::{HandshakeSummary, Resumption, Role, Stats};

/// Datagrams and bytes each way for one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Datagrams this side sent.
    pub datagrams_sent: u64,
    /// UDP payload bytes this side sent.
    pub bytes_sent: u64,
    /// Datagrams this side received.
    pub datagrams_received: u64,
    /// UDP payload bytes this side received.
    pub bytes_received: u64,
}

impl From<&Stats> for Traffic {
    fn from(stats: &Stats) -> Self {
        Traffic {
            datagrams_sent: stats.datagrams_sent,
            bytes_sent: stats.bytes_sent,
            datagrams_received: stats.datagrams_received,
            bytes_received: stats.bytes_received,
        }
    }
}

impl Traffic {
    /// Both totals added up.
    pub fn plus(&self, other: &Traffic) -> Traffic {
        Traffic {
            datagrams_sent: self.datagrams_sent + other.datagrams_sent,
            bytes_sent: self.bytes_sent + other.bytes_sent,
            datagrams_received: self.datagrams_received + other.datagrams_received,
            bytes_received: self.bytes_received + other.bytes_received,
        }
    }
}

/// How a handshake went as the summary line says it: `full (not resumed)`, `resumed by session
/// ID` or `resumed by ticket`.
pub fn resumption_text(summary: &HandshakeSummary) -> &'static str {
    match summary.resumption {
        Some(Resumption::SessionId) => "resumed by session ID",
        Some(Resumption::Ticket) => "resumed by ticket",
        None if summary.resumed => "resumed",
        None => "full (not resumed)",
    }
}

/// DTLS 1.3 0-RTT, as `role`'s summary line says it ("" when no early data was offered). A
/// client sends refused early data again after the handshake (RFC 8446 §4.2.10); a server only
/// refused it.
pub fn early_data_text(summary: &HandshakeSummary, role: Role) -> &'static str {
    match (summary.early_data, role) {
        (Some(true), _) => ", 0-RTT accepted",
        (Some(false), Role::Client) => ", 0-RTT refused (sent again after the handshake)",
        (Some(false), Role::Server) => ", 0-RTT refused",
        (None, _) => "",
    }
}

/// What a handshake took from a cache, as the summary line says it ("" when nothing).
pub fn cache_text(summary: &HandshakeSummary) -> String {
    let used = &summary.from_cache;
    // RFC 7924's fingerprint stands for the chain in 1.2, an abbreviated Certificate in 1.3.
    let server_certificate = match summary.version {
        fastshake_dtls::Versions::Dtls13 => "server certificate from cache (abbreviated)",
        _ => "server certificate from cache (RFC 7924)",
    };
    listed(
        ", ",
        ", ",
        [
            (used.server_certificate, server_certificate),
            (used.certificate_request, "certificate request from cache (RFC 7924)"),
            (used.client_certificate, "client certificate from cache (ticket)"),
        ],
    )
}

/// The texts whose flag is set, after `lead` and joined by `between` ("" when none is).
fn listed<const N: usize>(lead: &str, between: &str, parts: [(bool, &str); N]) -> String {
    let on: Vec<&str> = parts.into_iter().filter_map(|(on, text)| on.then_some(text)).collect();
    if on.is_empty() {
        String::new()
    } else {
        format!("{lead}{}", on.join(between))
    }
}

/// What the handshake agreed that lets the session survive an address change ("" when
/// nothing: a session bound to the client's address, as a plain DTLS session is).
pub fn mobility_text(summary: &HandshakeSummary) -> String {
    let agreed = summary.mobility;
    listed(
        ", with ",
        " and ",
        [
            (agreed.connection_id, "connection IDs"),
            (agreed.return_routability, "return-routability checks"),
            (agreed.port_move, "port_move"),
        ],
    )
}

/// After a DTLS 1.3 suite in the summary line: the version, the group (or that the PSK alone keyed the session) and
/// what a HelloRetryRequest asked for, in parentheses (a DTLS 1.2 line reads as it always did).
fn version_text(summary: &HandshakeSummary) -> String {
    if summary.version == fastshake_dtls::Versions::Dtls12 {
        return String::new();
    }
    let mut parts = vec![summary.version.name().to_owned()];
    parts.push(summary.group.map_or_else(|| "PSK only, no (EC)DHE".to_owned(), |g| g.name().to_owned()));
    match (summary.hello_retry, summary.hello_retry_group) {
        (_, Some(group)) => parts.push(format!("after a HelloRetryRequest for {}", group.name())),
        (true, None) => parts.push("after a cookie exchange (HelloRetryRequest)".to_owned()),
        (false, None) => {}
    }
    if let Some(algorithm) = summary.certificate_compression_sent {
        parts.push(format!("our certificate sent {algorithm}-compressed"));
    }
    if let Some(algorithm) = summary.certificate_compression_received {
        parts.push(format!("peer's certificate came {algorithm}-compressed"));
    }
    format!(" ({})", parts.join("; "))
}

/// The one-line handshake summary `fastshake server` and `fastshake client` print: they differ
/// only in what a refused 0-RTT meant to each side.
pub fn summary_line(summary: &HandshakeSummary, role: Role) -> String {
    // The smoothed round trip, when an exchange of flights (or a cached estimate) gave one.
    let rtt = summary.rtt.filter(|r| r.samples() > 0).map_or(String::new(), |r| {
        format!(
            "; RTT {:.2} ms (±{:.2} ms, {} sample(s))",
            r.smoothed().as_secs_f64() * 1e3,
            r.variation().as_secs_f64() * 1e3,
            r.samples()
        )
    });
    format!(
        "handshake done: {}{}, {}{}{}{}{}, {:.2} ms, {} flight(s) sent + {} resent, {} resent by the peer; sent {} datagrams / {} B, received {} datagrams / {} B{rtt}",
        summary.suite.iana_name(),
        version_text(summary),
        resumption_text(summary),
        early_data_text(summary, role),
        // RFC 7627 is DTLS 1.2's; the 1.3 key schedule binds the transcript anyway.
        match (summary.version, summary.extended_master_secret) {
            (fastshake_dtls::Versions::Dtls12, true) => ", with extended master secret",
            (fastshake_dtls::Versions::Dtls12, false) => ", without extended master secret",
            _ => "",
        },
        cache_text(summary),
        mobility_text(summary),
        summary.duration.as_secs_f64() * 1e3,
        summary.flights_sent,
        summary.retransmissions,
        summary.peer_retransmissions,
        summary.datagrams_sent,
        summary.bytes_sent,
        summary.datagrams_received,
        summary.bytes_received,
    )
}
