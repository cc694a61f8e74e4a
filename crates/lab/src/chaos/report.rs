//! The figures of a cell, as a table row and as JSON.

use super::cell::{CellParams, CellRun};
use super::grid::{Cell, LinkProfile, Mode};
use crate::apps::dtls_client::Phase;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Failures the table lists one by one per cell (the JSON lists them all).
const FAILURES_LISTED: usize = 8;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values`, in seconds.
    pub fn of(values: &mut [Duration]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort();
        let rank = |p: f64| {
            values[((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1].as_secs_f64()
        };
        Some(Percentiles { p50: rank(0.50), p95: rank(0.95), p99: rank(0.99), max: rank(1.0) })
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Handshakes {
    pub started: u32,
    pub completed: u32,
    /// Failed before `Connected`.
    pub failed: u32,
    pub resumptions_offered: u32,
    pub resumed: u32,
    /// Resumptions answered with a full handshake.
    pub resumptions_declined: u32,
    /// Resumptions not attempted because the full session before them failed without a ticket.
    pub resumptions_skipped: u32,
    /// DTLS 1.3 NewSessionTickets the clients received (after full and resumed handshakes).
    pub tickets_received: u32,
    /// Completed handshakes as the server counted them.
    pub server_completed: u32,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Records {
    /// Distinct requests sent, and echoed back.
    pub requests: u64,
    pub echoed: u64,
    /// Requests never echoed (their session failed after the handshake).
    pub lost: u64,
    /// Request copies the client application sent again after its timer.
    pub resent: u64,
    /// Records the engine delivered more than once (requests at the server, echoes at the
    /// client). Must be 0.
    pub delivered_twice: u64,
    /// Sessions that failed after their handshake completed.
    pub sessions_failed: u32,
}

/// DTLS 1.3 0-RTT: each resumed handshake sends its first request's first copy (the early
/// record) as early data.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Early {
    /// Early records sent as 0-RTT, and those the engine held for after the handshake instead.
    pub sent: u32,
    pub held: u32,
    /// As the client's handshake summary says: the server took the early data, or refused it
    /// (the engine then sends it again after the handshake).
    pub accepted: u32,
    pub refused: u32,
    /// As the server's summary says.
    pub server_offered: u32,
    pub server_accepted: u32,
    /// The early record at the server: delivered as 0-RTT, or after the handshake.
    pub delivered_0rtt: u32,
    pub delivered_after_handshake: u32,
    /// Early records that never arrived (lost on the way; the application resent the request).
    pub not_delivered: u32,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Moves {
    /// Sessions that asked to move, moves made, and sessions that carried on from the new
    /// address (all their requests echoed).
    pub asked: u32,
    pub made: u32,
    pub server_path_changes: u32,
}

/// One failed session, enough to find it again: the client, its handshake number (its port is
/// 20000 + number), and when.
#[derive(Clone, Debug, Serialize)]
pub struct FailureLine {
    pub client: usize,
    pub handshake: u32,
    pub port: u16,
    pub resuming: bool,
    pub phase: Phase,
    pub started_s: f64,
    pub failed_s: f64,
    pub error: String,
}

/// One handshake, to find it again: the client and its handshake number (port 20000 + number).
#[derive(Clone, Debug, Serialize)]
pub struct HandshakeRef {
    pub client: usize,
    pub handshake: u32,
    pub seconds: f64,
}

/// A session the server saw fail.
#[derive(Clone, Debug, Serialize)]
pub struct ServerFailureLine {
    pub peer: Option<String>,
    pub at_s: f64,
    pub established: bool,
    pub error: String,
}

/// The server endpoint's own counters (`EndpointStats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct EndpointCounters {
    pub hello_verify_sent: u64,
    pub cookies_rejected: u64,
    pub connections_accepted: u64,
    pub connections_refused: u64,
    pub connections_replaced: u64,
    pub datagrams_dropped: u64,
    pub handshakes_evicted: u64,
    pub sessions_expired: u64,
    pub partial_hellos_dropped: u64,
    pub connections_open_at_end: u64,
}

/// What the links did to the datagrams (access and core links together, so a datagram crossing
/// both counts twice), for evidence that the stress was there.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Network {
    pub datagrams: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub dropped_mtu: u64,
    pub frames: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CellReport {
    pub cell: String,
    pub mode: Mode,
    pub mode_what: &'static str,
    pub link: LinkProfile,
    pub clients: u16,
    pub handshake_timeout_s: f64,
    pub handshakes: Handshakes,
    /// Mean flights resent per completed handshake, by the client and by the server.
    pub client_flights_resent_per_handshake: f64,
    pub server_flights_resent_per_handshake: f64,
    /// Client-side handshake time (first ClientHello to `Connected`), virtual seconds.
    pub handshake_time_s: Option<Percentiles>,
    /// The same, resumed handshakes only.
    pub resumed_time_s: Option<Percentiles>,
    /// The slowest completed handshake.
    pub slowest: Option<HandshakeRef>,
    /// UDP payload bytes the client sent and received during a handshake, mean.
    pub bytes_per_handshake: f64,
    pub records: Records,
    /// The 0-RTT cells' early records.
    pub early: Option<Early>,
    pub moves: Option<Moves>,
    /// Failed sessions by error (client side; "after handshake:" when the handshake had
    /// completed).
    pub failures: BTreeMap<String, u32>,
    /// Sessions the server saw fail, by error ("after handshake: Superseded" is a NAT giving a
    /// new client the port of an earlier one whose close_notify was lost: RFC 6347 §4.2.8).
    pub server_failures: BTreeMap<String, u32>,
    pub server_failures_listed: Vec<ServerFailureLine>,
    pub server_endpoint: EndpointCounters,
    /// Every failed session.
    pub failures_listed: Vec<FailureLine>,
    pub network: Network,
    pub unfinished_clients: u32,
    pub virtual_s: f64,
    pub events: u64,
    /// Measured on this machine (the one figure that differs between runs of a seed).
    pub wall_s: f64,
    /// Every handshake completed and every request was echoed, none delivered twice.
    pub target_met: bool,
}

impl CellReport {
    pub fn new(cell: &Cell, params: &CellParams, run: &CellRun) -> CellReport {
        let mut h = Handshakes { server_completed: run.server.connected, ..Handshakes::default() };
        let mut records = Records::default();
        let mut moves =
            Moves { made: run.moves_made, server_path_changes: run.server.path_changes, ..Moves::default() };
        let mut early = Early {
            server_offered: run.server.early_offered,
            server_accepted: run.server.early_accepted,
            delivered_0rtt: run.server.early_delivered_0rtt,
            delivered_after_handshake: run.server.early_delivered_after,
            ..Early::default()
        };
        let mut failures = BTreeMap::new();
        let mut listed = Vec::new();
        let (mut durations, mut resumed_durations) = (Vec::new(), Vec::new());
        let (mut flights_resent, mut bytes) = (0u64, 0u64);
        let mut slowest: Option<HandshakeRef> = None;
        for (i, c) in run.clients.iter().enumerate() {
            h.started += c.started;
            h.completed += c.samples.len() as u32;
            h.resumptions_offered += c.resumptions_offered;
            h.resumed += c.resumed;
            h.resumptions_declined += c.resumptions_declined;
            h.resumptions_skipped += c.resumptions_skipped;
            h.tickets_received += c.tickets_received;
            early.sent += c.early_sent;
            early.held += c.early_held;
            early.accepted += c.early_accepted;
            early.refused += c.early_refused;
            for s in &c.samples {
                durations.push(s.duration);
                if slowest.as_ref().is_none_or(|w| s.duration.as_secs_f64() > w.seconds) {
                    slowest = Some(HandshakeRef {
                        client: i,
                        handshake: s.index,
                        seconds: s.duration.as_secs_f64(),
                    });
                }
                if s.resumed {
                    resumed_durations.push(s.duration);
                }
                flights_resent += u64::from(s.flights_resent);
                bytes += s.bytes;
            }
            records.requests += c.requests;
            records.echoed += c.requests_echoed;
            records.resent += c.requests_resent;
            records.delivered_twice += c.duplicate_echoes;
            moves.asked += c.moves_asked;
            for f in &c.failures {
                let key = match f.phase {
                    Phase::Handshake => {
                        h.failed += 1;
                        f.class.clone()
                    }
                    Phase::Records => {
                        records.sessions_failed += 1;
                        format!("after handshake: {}", f.class)
                    }
                };
                *failures.entry(key).or_insert(0) += 1;
                listed.push(FailureLine {
                    client: i,
                    handshake: f.index,
                    port: f.port,
                    resuming: f.resuming,
                    phase: f.phase,
                    started_s: f.started.since_origin().as_secs_f64(),
                    failed_s: f.at.since_origin().as_secs_f64(),
                    error: f.detail.clone(),
                });
            }
        }
        records.lost = records.requests - records.echoed;
        records.delivered_twice += run.server.duplicate_requests;
        let mut server_failures = BTreeMap::new();
        let mut server_failures_listed = Vec::new();
        for f in &run.server.failures {
            let key = if f.established { format!("after handshake: {}", f.class) } else { f.class.clone() };
            *server_failures.entry(key).or_insert(0) += 1;
            server_failures_listed.push(ServerFailureLine {
                peer: f.peer.map(|p| p.to_string()),
                at_s: f.at.since_origin().as_secs_f64(),
                established: f.established,
                error: f.class.clone(),
            });
        }
        let e = &run.endpoint;
        let server_endpoint = EndpointCounters {
            hello_verify_sent: e.hello_verify_sent,
            cookies_rejected: e.cookies_rejected,
            connections_accepted: e.connections_accepted,
            connections_refused: e.connections_refused,
            connections_replaced: e.connections_replaced,
            datagrams_dropped: e.datagrams_dropped,
            handshakes_evicted: e.handshakes_evicted,
            sessions_expired: e.sessions_expired,
            partial_hellos_dropped: e.partial_hellos_dropped,
            connections_open_at_end: e.connections_open,
        };
        let completed = u64::from(h.completed.max(1));
        let a = &run.links;
        let network = Network {
            datagrams: a.datagrams_offered,
            lost: a.dropped_loss,
            duplicated: a.duplicated,
            reordered: a.reordered,
            dropped_mtu: a.dropped_mtu,
            frames: a.frames,
        };
        let is_cid = cell.mode.moves();
        let is_early = cell.mode == Mode::Early13;
        early.not_delivered =
            early.sent.saturating_sub(early.delivered_0rtt + early.delivered_after_handshake);
        // Every resumption sent its early record; the server delivered it as 0-RTT only when it
        // took the early data, and both sides agree on that; with nothing lost on the way, every
        // early record arrived (as 0-RTT or after the handshake), and never twice (`seen`).
        let nothing_lost = network.lost == 0 && network.dropped_mtu == 0;
        let early_met = !is_early
            || (early.held == 0
                && early.sent == h.resumptions_offered
                && early.accepted + early.refused == h.resumed
                && early.delivered_0rtt <= early.server_accepted
                && early.server_accepted == early.accepted
                && early.server_offered == early.accepted + early.refused
                && (!nothing_lost || early.not_delivered == 0));
        let target_met = early_met
            && h.failed == 0
            && records.sessions_failed == 0
            && records.lost == 0
            && records.delivered_twice == 0
            && h.resumptions_declined == 0
            && h.resumptions_skipped == 0
            && run.unfinished_clients == 0
            && (!is_cid || (moves.made == moves.asked && moves.asked == h.completed));
        CellReport {
            cell: cell.name(),
            mode: cell.mode,
            mode_what: cell.mode.describe(),
            link: cell.link.clone(),
            clients: params.clients,
            handshake_timeout_s: cell.link.handshake_timeout.as_secs_f64(),
            client_flights_resent_per_handshake: flights_resent as f64 / completed as f64,
            server_flights_resent_per_handshake: run.server.flights_resent as f64
                / f64::from(run.server.connected.max(1)),
            handshake_time_s: Percentiles::of(&mut durations),
            resumed_time_s: Percentiles::of(&mut resumed_durations),
            slowest,
            bytes_per_handshake: bytes as f64 / completed as f64,
            handshakes: h,
            records,
            early: is_early.then_some(early),
            moves: is_cid.then_some(moves),
            failures,
            server_failures,
            server_failures_listed,
            server_endpoint,
            failures_listed: listed,
            network,
            unfinished_clients: run.unfinished_clients,
            virtual_s: run.virtual_end.since_origin().as_secs_f64(),
            events: run.events,
            wall_s: run.wall.as_secs_f64(),
            target_met,
        }
    }

    /// The table's header lines.
    pub fn header() -> String {
        format!(
            "{:<20} {:>7} {:>11} {:>11} {:>26} {:>8} {:>14} {:>7} {:>5}\n{:<20} {:>7} {:>11} {:>11} {:>26} {:>8} {:>14} {:>7} {:>5}",
            "cell", "timeout", "completed/", "resent/hs", "handshake time, s", "bytes/hs", "records", "resent", "twice",
            "", "", "failed", "client srv", "p50 / p95 / p99", "", "echoed/sent", "", ""
        )
    }

    /// The cell's row, with its failures grouped below it.
    pub fn row(&self) -> String {
        let h = &self.handshakes;
        let time = match &self.handshake_time_s {
            Some(p) => format!("{} / {} / {}", secs(p.p50), secs(p.p95), secs(p.p99)),
            None => "-".into(),
        };
        let mut out = format!(
            "{:<20} {:>5} s {:>11} {:>5.2} {:>5.2} {:>26} {:>8.0} {:>14} {:>7} {:>5}{}",
            self.cell,
            self.handshake_timeout_s,
            format!("{}/{}", h.completed, h.failed),
            self.client_flights_resent_per_handshake,
            self.server_flights_resent_per_handshake,
            time,
            self.bytes_per_handshake,
            format!("{}/{}", self.records.echoed, self.records.requests),
            self.records.resent,
            self.records.delivered_twice,
            if self.target_met { "" } else { "   <- target not met" },
        );
        if h.resumptions_offered > 0 {
            out += &format!(
                "\n    resumed {} of {} offered ({} declined, {} skipped after a failed full handshake){}",
                h.resumed,
                h.resumptions_offered,
                h.resumptions_declined,
                h.resumptions_skipped,
                self.resumed_time_s
                    .as_ref()
                    .map(|p| format!("; resumed p50 / p99 {} / {} s", secs(p.p50), secs(p.p99)))
                    .unwrap_or_default()
            );
        }
        if self.mode.is_dtls13() && h.resumptions_offered > 0 {
            out += &format!("; {} NewSessionTickets received", h.tickets_received);
        }
        if let Some(e) = &self.early {
            out += &format!(
                "\n    0-RTT: {} sent ({} held), {} accepted, {} refused (server: {} of {}); early record delivered \
                 as 0-RTT {}, after the handshake {}, not delivered {}",
                e.sent,
                e.held,
                e.accepted,
                e.refused,
                e.server_accepted,
                e.server_offered,
                e.delivered_0rtt,
                e.delivered_after_handshake,
                e.not_delivered
            );
        }
        if let Some(m) = &self.moves {
            out += &format!(
                "\n    moved mid-session: {} asked, {} made, server followed {} times",
                m.asked, m.made, m.server_path_changes
            );
        }
        if !self.failures.is_empty() {
            out += &format!("\n    failed: {}", grouped(&self.failures));
        }
        if !self.server_failures.is_empty() {
            out += &format!("\n    server saw: {}", grouped(&self.server_failures));
        }
        for f in self.failures_listed.iter().take(FAILURES_LISTED) {
            out += &format!(
                "\n      client {} handshake {} (port {}{}) started {:.3} s, failed {:.3} s: {}",
                f.client,
                f.handshake,
                f.port,
                if f.resuming { ", resuming" } else { "" },
                f.started_s,
                f.failed_s,
                f.error
            );
        }
        if self.failures_listed.len() > FAILURES_LISTED {
            out += &format!("\n      ... {} more in --json", self.failures_listed.len() - FAILURES_LISTED);
        }
        if self.unfinished_clients > 0 {
            out += &format!(
                "\n    {} clients had not finished at the run's time limit",
                self.unfinished_clients
            );
        }
        out
    }
}

fn grouped(map: &BTreeMap<String, u32>) -> String {
    let mut v: Vec<_> = map.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter().map(|(k, n)| format!("{k} ×{n}")).collect::<Vec<_>>().join(", ")
}

fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.3}")
    } else if s < 100.0 {
        format!("{s:.2}")
    } else {
        format!("{s:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_secs).collect();
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
        let mut one = vec![Duration::from_millis(7)];
        assert_eq!(Percentiles::of(&mut one).unwrap().p99, 0.007);
        assert!(Percentiles::of(&mut []).is_none());
    }
}
