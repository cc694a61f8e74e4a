//! E1 in the report: `lab e1`'s cells (single- and multihomed, 5/30/100 ms, every strategy) as a
//! section, with WCT per strategy beside the ideal bound and the TCS gain beside Table I; with
//! `--real` as root, the same cells on real sockets in network namespaces (`netlab e1`) beside them.

use super::super::progress::Step;
use super::super::registry::{About, Context, Experiment};
use super::super::results::{Capture, Figure, Plot, Section, Table};
use super::super::svg::{Chart, Reference, Series};
use crate::e1::{self, Cell, CellReport, Params, Strategy};

pub struct E1;

const DELAYS_MS: [u64; 3] = [5, 30, 100];
/// Seed 001 Table I: DTLS-TCS and DTLS-TCS-multi over standard DTLS, percent.
const PAPER_GAINS: [(u64, f64, f64); 3] = [(5, 8.35, 16.61), (30, 13.63, 17.48), (100, 15.22, 23.42)];

impl Experiment for E1 {
    fn about(&self) -> About {
        About::new("E1", "handover resilience (seed 001, Fig. 4 and Table I)", (2, 5)).with_real((100, 720))
    }

    fn run(&self, ctx: &Context, step: &Step) -> anyhow::Result<Section> {
        let params = Params { messages: 600, outage_ms: 1000, app_timeout_ms: 1000, jitter_us: 0 };
        let seeds = super::seeds_from(ctx, if ctx.quick { 3 } else { 10 });
        // Cells, then plots and capture, then the real-socket part.
        step.steps(DELAYS_MS.len() as u64 * 2 + 2);
        let versions = [fastshake_dtls::Versions::Dtls12, fastshake_dtls::Versions::Dtls13];
        let reports = e1::experiment(&params, &DELAYS_MS, &[None], &seeds, &versions, |cell| {
            step.begin(format!(
                "{} ms, {}",
                cell.delay_ms,
                if cell.multihomed { "multihomed" } else { "single-homed" }
            ))
        })?;
        step.begin("plots and capture");
        let mut section = super::super::blank(
            self,
            "seed 001: DTLS handover with fast resumption and socket strategies (IPC, TCS), Section IV",
        );
        section.paper_method = "A client sends 600 messages, the server acknowledges each; the figure is the wall-clock \
            time until all 600 acknowledgements are in (WCT). 5, 30 and 100 ms of delay on every packet of the client; \
            every 10 s its interface goes down and comes back (multihomed: two interfaces, interleaved by 5 s). \
            Standard DTLS declares the connection broken after a 1 s application timeout and sets up a new one; \
            DTLS-TCS keeps the session. Table I gives the gains only (Fig. 4 has no values).".into();
        section.our_setup = format!(
            "The same protocol in the simulator with our engine: {} messages, an outage of {} ms every 10 s (each a \
             handover to a new address; the paper gives no outage length), 1 s application timeout, PSK, seeds {:?}; \
             every strategy (standard with a full or a resumed reconnection, RFC 9146 CID, IPC, TCS and an oracle \
             whose session follows the address for free), and the ideal bound: 600 round trips plus the outage time \
             no protocol can avoid. Every strategy also in DTLS 1.3 (PSK in psk_ke mode, TLS_AES_128_CCM_8_SHA256; \
             resumption by ticket), its gains over standard DTLS 1.3; the real-socket part runs DTLS 1.2.",
            params.messages, params.outage_ms, seeds
        );
        section.figures = e1::figures(&reports, &params);
        section.tables = vec![table(&reports)];
        wct_plot(&reports, ctx)?;
        gain_plot(&reports, ctx)?;
        section.plots = vec![
            Plot {
                file: "e1-wct.svg".into(),
                title: "WCT per strategy and delay, single- and multihomed, with the ideal bound".into(),
            },
            Plot {
                file: "e1-gain.svg".into(),
                title: "Gain of DTLS-TCS over standard DTLS beside seed 001 Table I".into(),
            },
        ];
        let cell = Cell { delay_ms: 30, multihomed: false, nat: None };
        let (_, pcap) = e1::run_one_captured(Strategy::Tcs, &cell, &params, seeds[0])?;
        std::fs::write(ctx.path("e1-tcs-30ms.pcap"), pcap)?;
        section.capture = Some(Capture {
            file: "e1-tcs-30ms.pcap".into(),
            what: format!("DTLS-TCS, 30 ms, single-homed, seed {}: every datagram on every link", seeds[0]),
        });
        step.begin("real sockets");
        let real_delays = if ctx.quick { REAL_DELAYS_QUICK } else { REAL_DELAYS_FULL };
        match super::run_real(ctx, "e1-real", "e1", &["--delays", real_delays], step) {
            Ok(v) => {
                let (figures, table) = real(&v, &reports);
                section.figures.extend(figures);
                section.tables.push(table);
            }
            Err(not_run) => section.tables.push(not_run.table(&format!(
                "On real sockets (fastshake netlab e1 --delays {real_delays}: network namespaces, the delay relay)"
            ))),
        }
        section.meaning = "The gain of keeping the session is bounded by the oracle's: what a reconnection costs against \
            what the outage costs anyway. Our gains differ from Table I where our outage and timeouts differ from the \
            paper's unstated ones; the ordering of the strategies and the distance to the ideal bound are the \
            reproducible part."
            .into();
        Ok(section)
    }
}

/// Delays of the real-socket part: each cell takes its own time (600 round trips and the
/// outages, every strategy, single- and multihomed).
const REAL_DELAYS_QUICK: &str = "5";
const REAL_DELAYS_FULL: &str = "5,30";

/// `netlab e1 --json`'s cells beside the simulated ones, and DTLS-TCS's gain on real sockets
/// beside Table I.
fn real(v: &serde_json::Value, simulated: &[CellReport]) -> (Vec<Figure>, Table) {
    use serde_json::Value;
    let mut t = Table::new(
        "On real sockets (one run per cell, wall clock) beside the simulator (mean over seeds)",
        &[
            "delay ms",
            "homed",
            "strategy",
            "WCT s, real",
            "WCT s, simulated",
            "real / simulated",
            "handshakes",
            "ideal s, real",
        ],
    );
    let mut figures = Vec::new();
    let f = |x: Option<f64>, p: usize| x.map_or("—".to_string(), |x| format!("{x:.p$}"));
    for cell in v["cells"].as_array().into_iter().flatten() {
        let delay = cell.pointer("/cell/delay_ms").and_then(Value::as_u64).unwrap_or(0);
        let multihomed = cell.pointer("/cell/multihomed").and_then(Value::as_bool).unwrap_or(false);
        let sim = simulated.iter().find(|r| r.cell.delay_ms == delay && r.cell.multihomed == multihomed);
        for row in cell["rows"].as_array().into_iter().flatten() {
            let strategy = row["strategy"].as_str().unwrap_or("?");
            let real_wct = row["mean_wct_s"].as_f64();
            let sim_wct = sim.and_then(|s| {
                s.rows.iter().find(|r| {
                    r.version == "1.2"
                        && serde_json::to_value(r.strategy).ok().as_ref().and_then(Value::as_str)
                            == Some(strategy)
                })
            });
            let sim_wct = sim_wct.and_then(|r| r.mean_wct_s);
            t.row([
                delay.to_string(),
                if multihomed { "multi" } else { "single" }.to_string(),
                row["label"].as_str().unwrap_or(strategy).to_string(),
                row["status"].as_str().map_or_else(|| f(real_wct, 3), str::to_string),
                f(sim_wct, 3),
                f(real_wct.zip(sim_wct).map(|(a, b)| a / b), 2),
                f(row["mean_handshakes"].as_f64(), 1),
                f(cell["ideal_s"].as_f64(), 3),
            ]);
            if strategy == "tcs" {
                let paper =
                    PAPER_GAINS.iter().find(|p| p.0 == delay).map(|p| if multihomed { p.2 } else { p.1 });
                let gain = row["gain_over_single_homed_standard_full_pct"].as_f64();
                if let Some(paper) = paper {
                    figures.push(
                        Figure::measured(
                            format!(
                                "real sockets: DTLS-TCS{} gain over standard DTLS, {delay} ms",
                                if multihomed { "-multi" } else { "" }
                            ),
                            "%",
                            gain,
                            1,
                        )
                        .against(paper, "seed 001 Table I")
                        .note("one run through the delay relay in network namespaces, the simulator's applications on UDP sockets"),
                    );
                }
            }
        }
    }
    (figures, t)
}

fn table(reports: &[CellReport]) -> Table {
    let mut t = Table::new(
        "WCT per cell and strategy (mean over seeds)",
        &[
            "delay ms",
            "homed",
            "strategy",
            "WCT s",
            "gain vs 1-homed std %",
            "above ideal %",
            "handshakes",
            "ideal s",
        ],
    );
    let cell = |v: Option<f64>, p: usize| v.map_or("—".to_string(), |v| format!("{v:.p$}"));
    for r in reports {
        for row in &r.rows {
            t.row([
                r.cell.delay_ms.to_string(),
                if r.cell.multihomed { "multi" } else { "single" }.to_string(),
                row.label.to_string(),
                row.status.clone().unwrap_or_else(|| cell(row.mean_wct_s, 3)),
                cell(row.gain_over_single_homed_standard_full_pct, 2),
                cell(row.above_ideal_pct, 2),
                cell(row.mean_handshakes, 1),
                format!("{:.3}", r.ideal_s),
            ]);
        }
    }
    t
}

fn wct_plot(reports: &[CellReport], ctx: &Context) -> anyhow::Result<()> {
    let mut series = Vec::new();
    for multihomed in [false, true] {
        let cells: Vec<&CellReport> = reports.iter().filter(|r| r.cell.multihomed == multihomed).collect();
        let Some(first) = cells.first() else { continue };
        for (i, row) in first.rows.iter().enumerate() {
            // Every 1.2 row; of the 1.3 rows the standard one and CID (the others lie on 1.3 CID).
            if row.version == "1.3" && !matches!(row.strategy, Strategy::StandardFull | Strategy::Cid) {
                continue;
            }
            let points: Vec<(f64, f64)> = cells
                .iter()
                .filter_map(|c| c.rows.get(i).and_then(|r| r.mean_wct_s).map(|w| (c.cell.delay_ms as f64, w)))
                .collect();
            if points.is_empty() {
                continue;
            }
            let mut s = Series::line(
                format!("{}{}", row.label, if multihomed { ", multihomed" } else { "" }),
                points,
            );
            s.dashed = multihomed;
            series.push(s);
        }
    }
    let ideal: Vec<(f64, f64)> =
        reports.iter().filter(|r| !r.cell.multihomed).map(|r| (r.cell.delay_ms as f64, r.ideal_s)).collect();
    let chart = Chart {
        title: "E1: time to 600 acknowledgements (WCT), outage every 10 s".into(),
        x_desc: "one-way delay, ms".into(),
        y_desc: "WCT, s".into(),
        log_x: true,
        log_y: true,
        series,
        x_labels: Vec::new(),
        references: vec![Reference::Curve { points: ideal, label: "ideal bound (single-homed)".into() }],
    };
    chart.draw(&ctx.path("e1-wct.svg"))
}

fn gain_plot(reports: &[CellReport], ctx: &Context) -> anyhow::Result<()> {
    let gains = |multihomed: bool, strategy: Strategy| -> Vec<(f64, f64)> {
        reports
            .iter()
            .filter(|r| r.cell.multihomed == multihomed)
            .filter_map(|r| {
                let row = r.rows.iter().find(|row| row.strategy == strategy && row.version == "1.2")?;
                row.gain_over_single_homed_standard_full_pct.map(|g| (r.cell.delay_ms as f64, g))
            })
            .collect()
    };
    let mut oracle = Series::line("ours: oracle (upper bound), single-homed", gains(false, Strategy::Oracle));
    oracle.dashed = true;
    let chart = Chart {
        title: "E1: gain over single-homed standard DTLS (full reconnection)".into(),
        x_desc: "one-way delay, ms".into(),
        y_desc: "gain, % of standard DTLS's WCT".into(),
        log_x: true,
        log_y: false,
        series: vec![
            Series::line("ours: DTLS-TCS", gains(false, Strategy::Tcs)),
            Series::line("ours: DTLS-TCS-multi", gains(true, Strategy::Tcs)),
            oracle,
        ],
        x_labels: Vec::new(),
        references: vec![
            Reference::Points {
                points: PAPER_GAINS.iter().map(|&(d, single, _)| (d as f64, single)).collect(),
                label: "paper: DTLS-TCS (Table I)".into(),
            },
            Reference::Curve {
                points: PAPER_GAINS.iter().map(|&(d, _, multi)| (d as f64, multi)).collect(),
                label: "paper: DTLS-TCS-multi (Table I)".into(),
            },
        ],
    };
    chart.draw(&ctx.path("e1-gain.svg"))
}
