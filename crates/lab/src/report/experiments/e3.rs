//! E3 in the report: `lab e3`'s report (Engset against the real Endpoint, TSCH prices, eviction)
//! as a section, with blocking against ρ beside both Engset curves.

use super::super::progress::Step;
use super::super::registry::{About, Context, Experiment};
use super::super::results::{Plot, Section, Table};
use super::super::svg::{Chart, Reference, Series};
use crate::e3::{self, engset, Report, PAPER_POINT};

pub struct E3;

/// ρ at seed 002's R = 3, N = 5 for the blocking plot.
const RHO_QUICK: [f64; 5] = [0.1, 0.25, 0.5, 1.0, 2.0];
const RHO_FULL: [f64; 9] = [0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0];

impl Experiment for E3 {
    fn about(&self) -> About {
        About::new("E3", "session slots on a constrained server (seed 002, Section IV)", (30, 360))
    }

    fn run(&self, ctx: &Context, step: &Step) -> anyhow::Result<Section> {
        let (replications, requests, tsch_seeds) = if ctx.quick { (6, 1500, 5) } else { (10, 3000, 20) };
        let (r, n, _) = PAPER_POINT;
        let rhos: &[f64] = if ctx.quick { &RHO_QUICK } else { &RHO_FULL };
        let mut grid: Vec<(usize, usize, f64)> = rhos.iter().map(|&rho| (r, n, rho)).collect();
        if !ctx.quick {
            let rest: Vec<_> = e3::grid().into_iter().filter(|p| !grid.contains(p)).collect();
            grid.extend(rest);
        }
        let options = e3::Options {
            seeds: super::seeds_from(ctx, replications),
            requests,
            tsch_seeds: super::seeds_from(ctx, tsch_seeds),
            threads: ctx.threads,
            grid,
            eviction_points: if ctx.quick { vec![PAPER_POINT] } else { vec![PAPER_POINT, (3, 10, 1.0)] },
        };
        // Each grid point, TSCH measurement and eviction row, then the plot and capture.
        step.steps(e3::steps(&options) + 1);
        let report = e3::experiment_stepwise(&options, |what| step.begin(what))?;
        step.begin("plot and capture");
        let mut section = super::super::blank(
            self,
            "seed 002: M. Vučinić et al., DTLS Performance in Duty-Cycled Networks, PIMRC 2015, Section IV",
        );
        section.paper_method = "tinyDTLS needs about 400 B of RAM per PSK session, so a 16 kB WiSMote holds 3 session slots. \
            With R slots and N clients, each asking at rate λ and holding a session for a mean 1/µ (ρ = λ/µ), the server \
            is an M/M/R/R/N loss system: the paper gives the Engset blocking, about 17 % at R = 3, N = 5, ρ = 0.5 \
            (that is the time congestion, 0.1724; the share of requests refused, the call congestion, is 0.100). \
            Analytic only: the paper ran no experiment for it.".into();
        section.our_setup = format!(
            "N clients against the real fastshake Endpoint with R slots (PSK handshakes, refuse when full), on simulated \
             time: {} independent replications of ~{} requests per point (seeds {:?}), 95 % Student-t intervals; \
             then the same workload with eviction (lru, idlest) and what it costs the evicted, priced as PSK \
             handshakes over one TSCH hop (L = 101, C = 1; {} seeds).",
            report.seeds.len(),
            report.requests_per_replication,
            report.seeds,
            options.tsch_seeds.len()
        );
        section.figures = e3::figures(&report);
        section.tables = tables(&report);
        blocking_plot(&report, ctx)?;
        section.plots.push(Plot {
            file: "e3-blocking.svg".into(),
            title: "Blocking against ρ at R = 3, N = 5: the real Endpoint beside both Engset curves".into(),
        });
        section.capture = Some(super::capture_scenario(
            ctx,
            include_str!("../../../../../scenarios/dtls-tsch.toml"),
            "e3-tsch-handshakes.pcap",
            "scenarios/dtls-tsch.toml: PSK handshakes over TSCH hops, what each evicted client pays to come back",
        )?);
        let judged: Vec<_> = report.grid.iter().flat_map(|g| [g.time_verdict, g.call_verdict]).collect();
        let outside = judged.iter().filter(|v| **v == e3::Verdict::Outside).count();
        section.meaning = format!(
            "The engine's slots behave as the Engset model says: {outside} of {} simulated figures fall outside their \
             95 % interval around the formula. The paper's 17 % is the share of time all slots are busy; a client \
             asking is refused less often (call congestion). Eviction trades refusals for reconnections that, over \
             TSCH, cost the evicted seconds and millijoules (tables above).",
            judged.len()
        );
        Ok(section)
    }
}

fn tables(r: &Report) -> Vec<Table> {
    let mut grid = Table::new(
        "Engset against the real Endpoint (refuse when full)",
        &[
            "R",
            "N",
            "ρ",
            "requests",
            "Engset time",
            "ours time ± 95 %",
            "",
            "Engset call",
            "ours call ± 95 %",
            "",
        ],
    );
    for g in &r.grid {
        grid.row([
            g.slots.to_string(),
            g.clients.to_string(),
            format!("{}", g.rho),
            g.requests.to_string(),
            format!("{:.4}", g.engset_time),
            format!("{:.4} ± {:.4}", g.time.mean, g.time.half_width),
            format!("{:?}", g.time_verdict).to_lowercase(),
            format!("{:.4}", g.engset_call),
            format!("{:.4} ± {:.4}", g.call.mean, g.call.half_width),
            format!("{:?}", g.call_verdict).to_lowercase(),
        ]);
    }
    let mut prices = Table::new(
        "A handshake over one TSCH hop (L = 101, C = 1, 10 ms slots), mean over seeds",
        &["handshake", "timer", "s", "client mJ", "DTLS bytes", "datagrams", "frames"],
    );
    for (timer, costs) in [("2 s", &r.tsch), ("60 s", &r.tsch_patient_timer)] {
        for (name, c) in [("full PSK", &costs.full), ("ticket", &costs.abbreviated)] {
            prices.row([
                name.to_string(),
                timer.to_string(),
                format!("{:.3}", c.duration_s),
                format!("{:.2}", c.client_energy_mj),
                format!("{:.0}", c.dtls_bytes),
                format!("{:.1}", c.datagrams),
                format!("{:.1}", c.data_frames),
            ]);
        }
    }
    let mut eviction = Table::new(
        "What eviction costs the evicted (per evicted session)",
        &[
            "R",
            "N",
            "ρ",
            "policy",
            "reconnect",
            "call ± 95 %",
            "evictions /100 req",
            "extra handshakes",
            "bytes",
            "TSCH s",
            "TSCH mJ",
        ],
    );
    for part in &r.eviction {
        for row in &part.rows {
            eviction.row([
                part.slots.to_string(),
                part.clients.to_string(),
                format!("{}", part.rho),
                row.when_full.clone(),
                format!("{:?}", row.reconnect).to_lowercase(),
                format!("{:.4} ± {:.4}", row.call.mean, row.call.half_width),
                format!("{:.2}", row.evictions_per_100_requests),
                format!("{:.2}", row.extra_handshakes),
                format!("{:.0}", row.extra_bytes),
                format!("{:.2}", row.extra_tsch_s),
                format!("{:.2}", row.extra_tsch_client_mj),
            ]);
        }
    }
    vec![grid, prices, eviction]
}

fn blocking_plot(r: &Report, ctx: &Context) -> anyhow::Result<()> {
    let (slots, clients, paper_rho) = PAPER_POINT;
    let at_paper_point: Vec<_> = r.grid.iter().filter(|g| g.slots == slots && g.clients == clients).collect();
    let (lo, hi) =
        at_paper_point.iter().fold((paper_rho, paper_rho), |(lo, hi), g| (lo.min(g.rho), hi.max(g.rho)));
    let curve = |f: fn(usize, usize, f64) -> f64| -> Vec<(f64, f64)> {
        (0..=60)
            .map(|i| lo * (hi / lo).powf(f64::from(i) / 60.0))
            .map(|rho| (rho, f(clients, slots, rho)))
            .collect()
    };
    let simulated = |pick: fn(&e3::GridRow) -> engset::Estimate| {
        let mut s =
            Series::markers(String::new(), at_paper_point.iter().map(|g| (g.rho, pick(g).mean)).collect());
        s.errors = at_paper_point.iter().map(|g| pick(g).half_width).collect();
        s
    };
    let mut time = simulated(|g| g.time);
    time.label = "ours: time congestion (95 % interval)".into();
    let mut call = simulated(|g| g.call);
    call.label = "ours: call congestion (share of requests refused)".into();
    let chart = Chart {
        title: format!("E3: blocking with R = {slots} slots, N = {clients} clients"),
        x_desc: "ρ = λ/µ (offered load per idle client)".into(),
        y_desc: "blocking probability".into(),
        log_x: true,
        log_y: false,
        series: vec![time, call],
        x_labels: Vec::new(),
        references: vec![
            Reference::Curve {
                points: curve(engset::time_congestion),
                label: "Engset time congestion".into(),
            },
            Reference::Curve {
                points: curve(engset::call_congestion),
                label: "Engset call congestion (N−1)".into(),
            },
            Reference::Points {
                points: vec![(paper_rho, e3::PAPER_TIME)],
                label: "paper: about 17 % at ρ = 0.5".into(),
            },
        ],
    };
    chart.draw(&ctx.path("e3-blocking.svg"))
}
