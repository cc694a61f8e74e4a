//! E6 in the report: the chaos soak (`lab chaos`: 10 handshake modes over 10 hostile links, in
//! the simulator) as a section, with handshake time and resends per cell, a capture of one CID cell,
//! and, with `--real` as root, the soak on real sockets through the delay relay (`netlab chaos`).

use super::super::progress::Step;
use super::super::registry::{About, Context, Experiment};
use super::super::results::{Capture, Figure, Plot, Section, Table};
use super::super::svg::{Chart, Series};
use crate::chaos::grid::{LinkProfile, Mode};
use crate::chaos::{CellReport, Soak, Totals, APP_RULE, TIMER};
use serde_json::Value;

pub struct E6;

/// The cell whose every datagram the page links: a client that moves mid-session, behind
/// duplication and reordering.
const CAPTURED_CELL: &str = "cid/dup-reorder";

/// The real-socket soak: `fastshake netlab chaos` arguments (quick, full).
const REAL_QUICK: &[&str] = &["--duration", "10", "--waves", "2", "--clients", "20"];
const REAL_FULL: &[&str] = &["--duration", "60", "--waves", "4", "--clients", "50"];

impl Experiment for E6 {
    fn about(&self) -> About {
        About::new("E6", "chaos soak: every handshake completes, every record once (ours)", (10, 100))
            .with_real((50, 160))
    }

    fn run(&self, ctx: &Context, step: &Step) -> anyhow::Result<Section> {
        let soak = Soak {
            seed: ctx.seed,
            handshakes: if ctx.quick { 100 } else { 1000 },
            clients: 16,
            records: 4,
            only: None,
            capture: false,
        };
        let pki = crate::pki::LabPki::kept()?;
        let cells = soak.cells().len() as u64;
        step.steps(cells + 2);
        let started = std::time::Instant::now();
        let reports = soak.run(&pki, |r, _| {
            step.did(format!("{} done", r.cell));
            Ok(())
        })?;
        let totals = Totals::of(&reports, started.elapsed().as_secs_f64());

        let mut section = super::super::blank(
            self,
            "ours (E6): no paper; the target is 0 failed handshakes in every cell and \
            every record delivered exactly once",
        );
        section.paper_method = "No paper measured this. The claim: a handshake completes and the records of a session \
            arrive exactly once over links that delay (1 ms to 3 s one way, longer than the retransmission timer), \
            lose (30 % independently or in bursts), duplicate, reorder, narrow the MTU to 96 bytes or widen it to 9,000, \
            or duty-cycle (a TSCH hop) — for PSK, ECDHE-ECDSA with chains of 3, resumption by ticket and CID with a \
            move mid-session in DTLS 1.2, and PSK, ECDHE-ECDSA with chains of 3, the post-quantum hybrid \
            X25519MLKEM768, resumption by NewSessionTicket, 0-RTT early data (accepted or refused, the early record \
            once either way) and CID with a move mid-session in DTLS 1.3."
            .into();
        section.our_setup = format!(
            "The simulator, reproducible from the seed ({}): {} cells = {} modes × {} link profiles, {} handshakes per \
             cell (resumed cells: as many resumptions, each after a full handshake), {} clients at once against one \
             server Endpoint, {} requests echoed per session. DTLS timer: {TIMER}. Application: {APP_RULE}.",
            ctx.seed,
            totals.cells,
            Mode::ALL.len(),
            LinkProfile::all().len(),
            soak.handshakes,
            soak.clients,
            soak.records
        );
        section.figures = figures(&reports, &totals);
        section.tables = vec![cell_table(&reports, soak.handshakes), link_table()];
        step.begin("plots and capture");
        time_plot(&reports, ctx)?;
        resent_plot(&reports, ctx)?;
        section.plots = vec![
            Plot {
                file: "e6-handshake-time.svg".into(),
                title: "Handshake time p50 and p99 per link profile and mode (virtual time, log scale)"
                    .into(),
            },
            Plot {
                file: "e6-resent.svg".into(),
                title: "Flights the client resent per completed handshake, per link profile and mode".into(),
            },
        ];
        section.capture = Some(capture(ctx, &pki)?);
        step.begin("real sockets");
        match real_soak(ctx, step) {
            Ok((figures, table)) => {
                section.figures.extend(figures);
                section.tables.push(table);
            }
            Err(not_run) => section
                .tables
                .push(not_run.table(
                    "On real sockets (fastshake netlab chaos: the delay relay in network namespaces)",
                )),
        }
        let missed: Vec<&str> = reports.iter().filter(|r| !r.target_met).map(|r| r.cell.as_str()).collect();
        section.meaning = if missed.is_empty() {
            format!(
                "Every one of the {} handshakes completed and every record arrived exactly once in all {} cells: \
                 the flight engine's resends, the replay window and the reassembly hold under every stress alone and \
                 combined. The price shows in the tables: on the slow and lossy links a handshake resends flights \
                 several times and its p99 grows to minutes, which is why those cells allow a longer timeout.",
                totals.handshakes_completed, totals.cells
            )
        } else {
            format!(
                "The target is missed in {}: the table lists the failures by error; `fastshake lab chaos --only CELL \
                 --seed {} --pcap FILE` replays and captures one.",
                missed.join(", "),
                ctx.seed
            )
        };
        Ok(section)
    }
}

/// A target of zero, met or not.
fn zero(name: &str, unit: &str, ours: u64, note: String) -> Figure {
    Figure::simulated(name, unit, ours as f64)
        .against(0.0, "the soak's target")
        .met_if(ours == 0, "0")
        .note(note)
}

fn figures(reports: &[CellReport], t: &Totals) -> Vec<Figure> {
    let mut figures = vec![
        zero(
            "handshakes failed, all cells",
            "handshakes",
            t.handshakes_failed,
            format!("{} of {} handshakes completed over {} cells", t.handshakes_completed, t.handshakes_started, t.cells),
        ),
        zero(
            "sessions failed after their handshake",
            "sessions",
            t.sessions_failed_after_handshake,
            "a request unanswered for the cell's handshake timeout, or an error after Connected".into(),
        ),
        zero(
            "records lost",
            "records",
            t.records_lost,
            "requests never echoed after every resend".into(),
        ),
        zero(
            "records delivered twice",
            "records",
            t.records_delivered_twice,
            "each copy is a distinct record: one delivered twice got past the replay window (RFC 6347 §4.1.2.6)".into(),
        ),
        Figure::simulated("cells meeting the target", "cells", t.cells_meeting_target as f64)
            .against(t.cells as f64, "every cell")
            .met_if(t.target_met, "all cells")
            .note("0 failed, every request echoed once, every resumption resumed, every CID client moved"),
    ];
    let cid: Vec<&CellReport> = reports.iter().filter(|r| r.moves.is_some()).collect();
    if !cid.is_empty() {
        let (asked, made): (u64, u64) = cid
            .iter()
            .filter_map(|r| r.moves.as_ref())
            .fold((0, 0), |(a, m), mv| (a + u64::from(mv.asked), m + u64::from(mv.made)));
        figures.push(
            Figure::simulated("CID sessions that moved mid-session and carried on", "sessions", made as f64)
                .against(asked as f64, "moves asked")
                .met_if(made == asked, "every move made, no new handshake")
                .note("the client's address changes once half its requests are echoed (a NAT rebinding in worst-wan)"),
        );
    }
    if let Some(worst) = reports.iter().max_by(|a, b| {
        a.client_flights_resent_per_handshake.total_cmp(&b.client_flights_resent_per_handshake)
    }) {
        figures.push(
            Figure::simulated(
                "flights the client resent per handshake, worst cell",
                "flights",
                worst.client_flights_resent_per_handshake,
            )
            .note(format!("{} (the server: {:.2})", worst.cell, worst.server_flights_resent_per_handshake)),
        );
    }
    let p99 = |r: &CellReport| r.handshake_time_s.as_ref().map_or(0.0, |p| p.p99);
    if let Some(worst) = reports.iter().max_by(|a, b| p99(a).total_cmp(&p99(b))) {
        figures.push(
            Figure::simulated("handshake time p99, worst cell", "s", p99(worst))
                .note(format!("{}, timeout {:.0} s (virtual time)", worst.cell, worst.handshake_timeout_s)),
        );
    }
    figures
}

fn cell_table(reports: &[CellReport], handshakes: u32) -> Table {
    let mut t = Table::new(
        format!("Every cell: {handshakes} handshakes (virtual time; bytes are the client's UDP payload both ways)"),
        &[
            "cell",
            "timeout s",
            "completed",
            "failed",
            "resent/hs client",
            "resent/hs server",
            "p50 s",
            "p95 s",
            "p99 s",
            "bytes/hs",
            "records echoed/sent",
            "twice",
            "target",
        ],
    );
    for r in reports {
        let p = r.handshake_time_s.clone().unwrap_or_default();
        t.row([
            r.cell.clone(),
            format!("{:.0}", r.handshake_timeout_s),
            r.handshakes.completed.to_string(),
            r.handshakes.failed.to_string(),
            format!("{:.2}", r.client_flights_resent_per_handshake),
            format!("{:.2}", r.server_flights_resent_per_handshake),
            secs(p.p50),
            secs(p.p95),
            secs(p.p99),
            format!("{:.0}", r.bytes_per_handshake),
            format!("{}/{}", r.records.echoed, r.records.requests),
            r.records.delivered_twice.to_string(),
            if r.target_met { "met".into() } else { "NOT met".into() },
        ]);
    }
    t
}

fn link_table() -> Table {
    let mut t = Table::new("The link profiles (each client's access link)", &["link", "what", "timeout s"]);
    for l in LinkProfile::all() {
        t.row([l.name.to_string(), l.what.to_string(), format!("{:.0}", l.handshake_timeout.as_secs_f64())]);
    }
    t
}

fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.3}")
    } else {
        format!("{s:.1}")
    }
}

/// One series per mode over the link profiles, from `value` (cells without one are left out).
fn per_mode(
    reports: &[CellReport],
    value: impl Fn(&CellReport) -> Option<f64>,
) -> Vec<(Mode, Vec<(f64, f64)>)> {
    let links = LinkProfile::all();
    Mode::ALL
        .iter()
        .map(|&mode| {
            let points = reports
                .iter()
                .filter(|r| r.mode == mode)
                .filter_map(|r| {
                    let x = links.iter().position(|l| l.name == r.link.name)?;
                    Some((x as f64, value(r)?))
                })
                .collect();
            (mode, points)
        })
        .collect()
}

fn link_labels() -> Vec<String> {
    LinkProfile::all().iter().map(|l| l.name.to_string()).collect()
}

fn time_plot(reports: &[CellReport], ctx: &Context) -> anyhow::Result<()> {
    let mut series = Vec::new();
    let p50 = per_mode(reports, |r| r.handshake_time_s.as_ref().map(|p| p.p50).filter(|v| *v > 0.0));
    let p99 = per_mode(reports, |r| r.handshake_time_s.as_ref().map(|p| p.p99).filter(|v| *v > 0.0));
    for (i, ((mode, a), (_, b))) in p50.into_iter().zip(p99).enumerate() {
        let mut s = Series::line(format!("{} p50", mode.name()), a);
        s.palette = Some(i);
        series.push(s);
        let mut s = Series::line(format!("{} p99", mode.name()), b);
        s.palette = Some(i);
        s.dashed = true;
        series.push(s);
    }
    Chart {
        title: "E6: handshake time per link profile (virtual)".into(),
        x_desc: "link profile".into(),
        y_desc: "handshake time, s".into(),
        log_x: false,
        log_y: true,
        series,
        references: Vec::new(),
        x_labels: link_labels(),
    }
    .draw(&ctx.path("e6-handshake-time.svg"))
}

fn resent_plot(reports: &[CellReport], ctx: &Context) -> anyhow::Result<()> {
    let series = per_mode(reports, |r| Some(r.client_flights_resent_per_handshake))
        .into_iter()
        .map(|(mode, points)| Series::line(mode.name(), points))
        .collect();
    Chart {
        title: "E6: flights the client resent per completed handshake".into(),
        x_desc: "link profile".into(),
        y_desc: "flights resent per handshake".into(),
        log_x: false,
        log_y: false,
        series,
        references: Vec::new(),
        x_labels: link_labels(),
    }
    .draw(&ctx.path("e6-resent.svg"))
}

/// A few sessions of [`CAPTURED_CELL`], every datagram.
fn capture(ctx: &Context, pki: &crate::pki::LabPki) -> anyhow::Result<Capture> {
    let soak = Soak {
        seed: ctx.seed,
        handshakes: 4,
        clients: 2,
        records: 4,
        only: Some(CAPTURED_CELL.into()),
        capture: true,
    };
    let mut pcap = None;
    soak.run(pki, |_, p| {
        pcap = p;
        Ok(())
    })?;
    let bytes = pcap.ok_or_else(|| anyhow::anyhow!("the soak captured nothing"))?;
    let file = "e6-cid-dup-reorder.pcap";
    std::fs::write(ctx.path(file), bytes)?;
    Ok(Capture {
        file: file.into(),
        what: format!(
            "{CAPTURED_CELL}, seed {}: 2 clients, 4 PSK handshakes with a Connection ID, each client moving mid-session, \
             over a link that duplicates and reorders (`fastshake lab chaos --only {CAPTURED_CELL} --pcap FILE` \
             captures a whole cell)",
            ctx.seed
        ),
    })
}

/// `fastshake netlab chaos --json` as a subprocess (it builds network namespaces: root only):
/// its verdicts as figures and its rows as a table; `Err` is why it did not run.
fn real_soak(ctx: &Context, step: &Step) -> Result<(Vec<Figure>, Table), super::NotRun> {
    let args = if ctx.quick { REAL_QUICK } else { REAL_FULL };
    let v = super::run_real(ctx, "e6-real", "chaos", args, step)?;
    let verdict = &v["verdict"];
    let count = |key: &str| verdict.get(key).and_then(Value::as_u64).unwrap_or(0);
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    let sum = |key: &str| rows.iter().filter_map(|r| r.get(key).and_then(Value::as_u64)).sum::<u64>();
    let plan = |key: &str| v.pointer(&format!("/params/{key}")).and_then(Value::as_f64).unwrap_or(0.0);
    let path = format!(
        "{} clients at once for {:.0} s through the relay ({:.0} ms each way, {:.0} % loss, {:.0} % \
         duplicated)",
        plan("clients"),
        plan("duration_s"),
        plan("delay_ms"),
        plan("loss") * 100.0,
        plan("duplicate") * 100.0
    );
    let real = |name: &str, unit: &str, key: &str, note: &str| {
        let ours = count(key);
        Figure::measured(format!("real sockets: {name}"), unit, Some(ours as f64), 1)
            .against(0.0, "the soak's target")
            .met_if(ours == 0, "0")
            .note(format!("real sockets, {path}; {note}"))
    };
    let mut figures = vec![
        real(
            "handshakes failed",
            "handshakes",
            "failed_handshakes",
            &format!("{} completed", sum("handshakes_ok")),
        ),
        real("records lost", "records", "lost", &format!("{} records echoed", sum("echoed"))),
        real("records delivered twice", "records", "duplicates", "echoes of an answered attempt seen again"),
        real(
            "moved clients that lost their session",
            "clients",
            "moved_without_session",
            "one client in four moves",
        ),
    ];
    let memory = &v["memory"];
    figures.push(
        Figure::measured(
            "real sockets: server memory growth after the warm-up",
            "KiB",
            memory.get("growth_kib").and_then(Value::as_f64),
            1,
        )
        .against(memory.get("tolerance_kib").and_then(Value::as_f64).unwrap_or(f64::NAN), "tolerance")
        .met_if(
            verdict.get("memory_flat").and_then(Value::as_bool).unwrap_or(false),
            "≤ the tolerance (flat)",
        )
        .note(memory.get("tolerance_basis").and_then(Value::as_str).unwrap_or_default().to_string()),
    );
    let mut t = Table::new(
        format!("On real sockets: {path} (wall-clock times, measured)"),
        &[&["kind", "clients", "completed"][..], &crate::chaos_real::DELIVERY_COLUMNS, &["lost"]].concat(),
    );
    let num = |r: &Value, key: &str| match r.get(key).and_then(Value::as_f64) {
        Some(x) if x.fract() == 0.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
        None => "—".into(),
    };
    for r in &rows {
        t.row([
            r.get("kind").and_then(Value::as_str).unwrap_or("?").to_string(),
            num(r, "clients"),
            num(r, "handshakes_ok"),
            num(r, "handshakes_failed"),
            num(r, "flights_resent_per_handshake"),
            num(r, "handshake_ms_p50"),
            num(r, "handshake_ms_p95"),
            num(r, "handshake_ms_p99"),
            num(r, "records"),
            num(r, "echoed"),
            num(r, "duplicates"),
            num(r, "lost"),
        ]);
    }
    Ok((figures, t))
}
