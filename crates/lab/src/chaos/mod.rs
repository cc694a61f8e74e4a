//! E6, the chaos soak (ours; no paper measured it): every handshake completes and every record arrives
//! exactly once, over links that delay, lose, duplicate, reorder, fragment and duty-cycle — in
//! the simulator, reproducible from the seed.
//!
//! Each cell runs `--handshakes` (1,000; `--quick`: 100) handshakes of one mode over one link
//! profile: 16 client nodes at once against one server `Endpoint`, each client running its
//! sessions one after the other from fresh ports. A session: the handshake, then 4 requests
//! each echoed by the server (32-byte records), then close_notify.
//!
//! The application rule: DTLS records are unreliable, so the client sends one request at a
//! time (CoAP's NSTART = 1) and resends it until its echo arrives (1 s, doubling up to 16 s,
//! so a live session never falls silent for the server's 300 s idle timeout), and the server
//! echoes every copy it receives; each request copy and each echo is a distinct record with its
//! own name (`apps::records`). A name that arrives twice was delivered twice by the engine,
//! whose replay window must stop it
//! (RFC 6347 §4.1.2.6): the "twice" column, which must be 0. A session fails if the engine
//! reports a failure, or stalls: a request unanswered for as long as the cell's handshake
//! timeout. The target: 0 failed in every cell.
//!
//! Modes (`grid::Mode`): PSK (TLS_PSK_WITH_AES_128_CCM_8); ECDHE-ECDSA with mutual
//! authentication, each side sending a chain of 3 (about 1.6 kB, so the Certificate flights
//! are fragmented even at 1,472 bytes at a time); resumed (that full handshake, then a
//! resumption by its ticket from a new port: 1,000 of each per cell); CID (PSK, Connection ID
//! and return-routability check; once half the requests are echoed, the client's address
//! changes and the session must carry on without a new handshake). DTLS 1.3 (RFC 9147, all
//! TLS_AES_128_CCM_8_SHA256, each full handshake with its stateless HelloRetryRequest): psk13
//! (PSK with x25519), ecdsa13 (ECDHE-ECDSA with x25519, mutual, chains of 3), hybrid13 (PSK with
//! X25519MLKEM768, whose second ClientHello is 1.4 kB), resumed13 (ecdsa13, then a resumption by
//! the NewSessionTicket that came after it: a full session waits for its ticket before it ends;
//! a resumption answered with a full handshake fails the cell), early13 (resumed13 whose
//! resumptions send the first request as 0-RTT early data: the server takes it, or refuses it
//! and the engine sends it again after the handshake; counted both ways, and the early record
//! must arrive once — never twice, and, in a cell where the links lost nothing, always) and cid13
//! (psk13 with Connection IDs and the return-routability check, moving as cid does).
//!
//! Link profiles (`grid::LinkProfile`), on each client's access link (burst loss on the core
//! link all clients share, beside steady cross traffic; see `cell`). The retransmission timer
//! keeps RFC 6347's 1 s initial value and doubling everywhere, so that on the slow links flights
//! are resent before their answer can come:
//!
//! | profile     | one-way delay   | loss                 | dup / reorder          | MTU    | timeout |
//! |-------------|-----------------|----------------------|------------------------|--------|---------|
//! | clean       | 1 ms            | -                    | -                      | 1472   | 60 s    |
//! | delay-3s    | 3 s + 0-20 ms   | -                    | (jitter)               | 1472   | 300 s   |
//! | loss-30     | 30 ms           | 30 % each way        | -                      | 1472   | 1200 s  |
//! | burst-30    | 30 ms           | 30 %, bursts of 4    | -                      | 1472   | 1200 s  |
//! | dup-reorder | 30 ms + 0-10 ms | -                    | 30 % / 30 % by 100 ms  | 1472   | 60 s    |
//! | jumbo       | 30 ms           | -                    | -                      | 8972 † | 60 s    |
//! | mtu-96      | 30 ms           | -                    | -                      | 96     | 60 s    |
//! | tsch        | one TSCH hop: L = 101, C = 1, 10 ms slots, PDR 1                 | 1200   | 3600 s  |
//! | worst-wan   | 3 s + 0-20 ms   | 30 %, bursts of 4    | 10 % / 10 % by 1 s     | 96     | 1800 s  |
//! | worst-tsch  | TSCH hop as above, PDR 0.7 (3 MAC retries)                       | 1200   | 3600 s  |
//!
//! † the client only: it sends whole flights in one datagram, the server keeps 1,200 bytes.
//!
//! Why this grid: each stress alone (a failure then names its cause), every mode over every
//! stress, and two cells that combine the extremes — a long, lossy, duplicating, reordering,
//! narrow wide-area path behind a port-restricted NAT (where a CID client's move reaches the
//! server as a NAT rebinding, a new port), and a lossy TSCH hop. The MTU is the largest UDP
//! payload the path carries (the link drops larger IP packets) and the engines are told it;
//! over TSCH, 6LoWPAN fragments the datagrams. The handshake timeout is what a user of each
//! link would set: the default 60 s on ordinary links; where one round trip or one flight
//! takes seconds, or half the round trips are lost (the RFC timer then needs 20 minutes for
//! about 24 attempts at a flight), more. 100 cells (10 modes: four of DTLS 1.2, six of DTLS 1.3),
//! 130,000 handshakes (the resumed cells count a full and a resumed handshake per session pair).
//!
//! Figures per cell: handshakes completed/failed, flights resent per handshake (client and
//! server `HandshakeSummary`), client handshake time p50/p95/p99 (virtual), UDP bytes per
//! handshake the client sent and received, requests echoed/sent and resent, records delivered
//! twice, moves, 0-RTT accepted and refused, and the failures grouped by error with the first few listed (client, handshake
//! number, port, times) to re-run them: `--only CELL --seed N --pcap FILE` captures the cell.

mod cell;
pub mod grid;
pub mod report;

use crate::pki::LabPki;
use cell::{run_cell, CellParams};
use grid::{grid, selected};
pub use report::CellReport;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// What `fastshake lab chaos` runs and how it prints it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// 100 handshakes per cell instead of 1,000.
    pub quick: bool,
    /// Print the figures as JSON.
    pub json: bool,
    /// Seed of the run: the same seed gives the same figures (wall time aside).
    pub seed: u64,
    /// Cells to run: comma-separated patterns matched against `mode/link` (`*` is a wildcard,
    /// plain text matches a substring), e.g. `psk/*,*/worst-wan`. Modes psk, ecdsa, resumed,
    /// cid (DTLS 1.2) and psk13, ecdsa13, hybrid13, resumed13, early13, cid13 (DTLS 1.3; `*13/*`
    /// selects them).
    pub only: Option<String>,
    /// Handshakes per cell (resumed cells: this many resumptions, each after a full handshake).
    pub handshakes: Option<u32>,
    /// Client nodes per cell, running at once against the one server.
    pub clients: u16,
    /// Requests (each echoed) per session.
    pub records: u16,
    /// Write every datagram of the run to this pcap (one cell only).
    pub pcap: Option<PathBuf>,
    /// Make a new test PKI instead of the kept one (the run is then not reproducible).
    pub fresh_pki: bool,
    /// Exit with an error unless the target (0 failed in every cell) is met.
    pub check: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            quick: false,
            json: false,
            seed: 1,
            only: None,
            handshakes: None,
            clients: 16,
            records: 4,
            pcap: None,
            fresh_pki: false,
            check: false,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Totals {
    pub cells: usize,
    pub cells_meeting_target: usize,
    pub handshakes_started: u64,
    pub handshakes_completed: u64,
    pub handshakes_failed: u64,
    pub sessions_failed_after_handshake: u64,
    pub records_lost: u64,
    pub records_delivered_twice: u64,
    pub wall_s: f64,
    /// 0 failed in every cell, every record once.
    pub target_met: bool,
}

impl Totals {
    pub fn of(reports: &[CellReport], wall_s: f64) -> Totals {
        let sum = |f: &dyn Fn(&CellReport) -> u64| reports.iter().map(f).sum::<u64>();
        Totals {
            cells: reports.len(),
            cells_meeting_target: reports.iter().filter(|r| r.target_met).count(),
            handshakes_started: sum(&|r| u64::from(r.handshakes.started)),
            handshakes_completed: sum(&|r| u64::from(r.handshakes.completed)),
            handshakes_failed: sum(&|r| u64::from(r.handshakes.failed)),
            sessions_failed_after_handshake: sum(&|r| u64::from(r.records.sessions_failed)),
            records_lost: sum(&|r| r.records.lost),
            records_delivered_twice: sum(&|r| r.records.delivered_twice),
            wall_s,
            target_met: reports.iter().all(|r| r.target_met),
        }
    }
}

/// A soak as the library runs it (`lab chaos` and `lab all` alike).
#[derive(Clone, Debug)]
pub struct Soak {
    pub seed: u64,
    /// Per cell (resumed cells: this many resumptions, each after a full handshake).
    pub handshakes: u32,
    pub clients: u16,
    pub records: u16,
    /// Patterns of cells to run (see [`grid::selected`]); none: every cell.
    pub only: Option<String>,
    /// Capture every datagram of each cell.
    pub capture: bool,
}

impl Soak {
    /// The cells this soak runs, in the grid's order.
    pub fn cells(&self) -> Vec<grid::Cell> {
        grid().into_iter().filter(|c| self.only.as_deref().is_none_or(|p| selected(&c.name(), p))).collect()
    }

    /// Runs the cells one after the other; `each` gets every cell's report (and its capture,
    /// when asked) as it ends.
    pub fn run(
        &self,
        pki: &LabPki,
        mut each: impl FnMut(&CellReport, Option<Vec<u8>>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Vec<CellReport>> {
        let cells = self.cells();
        anyhow::ensure!(!cells.is_empty(), "no cell matches --only {}", self.only.as_deref().unwrap_or(""));
        anyhow::ensure!(self.handshakes > 0, "at least one handshake per cell");
        let params = CellParams {
            seed: self.seed,
            handshakes: self.handshakes,
            clients: self.clients,
            records: self.records,
            capture: self.capture,
        };
        let mut reports = Vec::new();
        for cell in &cells {
            let mut run = run_cell(cell, &params, pki)?;
            let report = CellReport::new(cell, &params, &run);
            each(&report, run.pcap.take())?;
            reports.push(report);
        }
        Ok(reports)
    }
}

#[derive(Serialize)]
struct Report<'a> {
    experiment: &'static str,
    seed: u64,
    handshakes_per_cell: u32,
    clients: u16,
    records_per_session: u16,
    retransmission_timer: &'static str,
    application_rule: &'static str,
    cells: &'a [CellReport],
    totals: Totals,
}

/// The DTLS retransmission timer of every cell, in words.
pub const TIMER: &str = "1 s initial, doubling to 60 s (RFC 6347) in every cell";
/// The application's rule, in words.
pub const APP_RULE: &str = "one request at a time, resent until its echo arrives (1 s doubling to 16 s; unanswered for \
     the handshake timeout: stalled); the server echoes every copy; each copy and echo is a distinct record, so one that \
     arrives twice was delivered twice by the engine";

/// `fastshake lab chaos`: runs the cells and prints the table (or JSON).
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    let soak = Soak {
        seed: args.seed,
        handshakes: args.handshakes.unwrap_or(if args.quick { 100 } else { 1000 }),
        clients: args.clients,
        records: args.records,
        only: args.only.clone(),
        capture: args.pcap.is_some(),
    };
    let cells = soak.cells();
    anyhow::ensure!(!cells.is_empty(), "no cell matches --only {}", args.only.as_deref().unwrap_or(""));
    anyhow::ensure!(
        args.pcap.is_none() || cells.len() == 1,
        "--pcap captures one cell: narrow --only to one"
    );
    let handshakes = soak.handshakes;
    let pki = if args.fresh_pki { crate::pki::LabPki::fresh()? } else { crate::pki::LabPki::kept()? };
    if !args.json {
        println!(
            "E6 chaos soak: {} cells, {handshakes} handshakes per cell (resumed cells: as many resumptions, each after a full \
             handshake), {} clients at once against one server, {} requests echoed per session, seed {}",
            cells.len(),
            args.clients,
            args.records,
            args.seed
        );
        println!("DTLS retransmission timer {TIMER}; application: {APP_RULE}.");
        println!();
        println!("{}", CellReport::header());
    }
    let started = std::time::Instant::now();
    let reports = soak.run(&pki, |report, pcap| {
        if let (Some(path), Some(pcap)) = (&args.pcap, pcap) {
            std::fs::write(path, pcap)?;
        }
        if args.json {
            eprintln!("lab chaos: {} done in {:.1} s", report.cell, report.wall_s);
        } else {
            println!("{}", report.row());
            std::io::stdout().flush()?;
        }
        Ok(())
    })?;
    let totals = Totals::of(&reports, started.elapsed().as_secs_f64());
    let target_met = totals.target_met;
    if args.json {
        let report = Report {
            experiment: "E6 chaos soak",
            seed: args.seed,
            handshakes_per_cell: handshakes,
            clients: args.clients,
            records_per_session: args.records,
            retransmission_timer: TIMER,
            application_rule: APP_RULE,
            cells: &reports,
            totals,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!();
        println!("links:");
        for link in grid::LinkProfile::all() {
            println!("  {:<12} {}", link.name, link.what);
        }
        let missed: Vec<_> = reports.iter().filter(|r| !r.target_met).map(|r| r.cell.as_str()).collect();
        println!();
        println!(
            "total: {} cells, {} handshakes: {} completed, {} failed; {} sessions failed after the handshake, {} records \
             lost, {} delivered twice; {:.1} s wall",
            totals.cells,
            totals.handshakes_started,
            totals.handshakes_completed,
            totals.handshakes_failed,
            totals.sessions_failed_after_handshake,
            totals.records_lost,
            totals.records_delivered_twice,
            totals.wall_s
        );
        if totals.target_met {
            println!("target (0 failed in every cell, every record exactly once): met");
        } else {
            println!(
                "target (0 failed in every cell, every record exactly once): NOT met in {}",
                missed.join(", ")
            );
        }
    }
    anyhow::ensure!(!args.check || target_met, "the soak's target is not met");
    Ok(())
}
