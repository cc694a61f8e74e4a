//! The benchmarks' headline figures beside their anchors, measured in the same run by
//! `fastshake-bench` (a subprocess: see [`super::run_bench`]). One row of [`BENCHES`] per
//! benchmark that writes `--json`; E5 runs `sctp` itself.

use super::super::progress::Step;
use super::super::registry::{Context, Experiment};
use super::super::results::{Figure, Section, Status, Table};
use serde_json::Value;
use std::time::Duration;

pub struct Benchmarks;

/// A benchmark: its arguments (quick, full) and how its JSON becomes figures.
struct Bench {
    name: &'static str,
    quick: &'static [&'static str],
    full: &'static [&'static str],
    figures: fn(&Value) -> Vec<Figure>,
}

/// `bench load`, `bench flood` and `bench caching` join here, one row each, once they write --json.
const BENCHES: &[Bench] = &[Bench {
    name: "handshake",
    quick: &["handshake", "--quick"],
    full: &["handshake"],
    figures: handshake_figures,
}];

fn handshake_figures(v: &Value) -> Vec<Figure> {
    let runs = v.get("runs").and_then(Value::as_u64).unwrap_or(0) as u32;
    let anchor = v.get("anchor").and_then(Value::as_str).unwrap_or("OpenSSL").to_string();
    let target = super::number(v, "target_handshakes_per_s").unwrap_or(0.0);
    let rows = v.get("engine_handshakes").and_then(Value::as_array).cloned().unwrap_or_default();
    rows.iter()
        .map(|row| {
            let suite = row.get("suite").and_then(Value::as_str).unwrap_or("?");
            let ours = super::number(row, "ours_per_s");
            let theirs = super::number(row, "openssl_per_s").unwrap_or(f64::NAN);
            let f = Figure::measured(format!("full PSK handshakes per second, engine only, {suite}"), "1/s", ours, runs)
                .against(theirs, format!("{anchor}, same run"));
            let met = ours.is_some_and(|o| o >= target);
            f.met_if(met, format!("≥ {target:.0}/s (the benchmark's target)")).note(
                "client and server in memory on one core, interleaved runs with OpenSSL's so machine noise hits both alike",
            )
        })
        .collect()
}

impl Experiment for Benchmarks {
    fn id(&self) -> &'static str {
        "BENCH"
    }
    fn title(&self) -> &'static str {
        "benchmarks' headline figures beside their anchors"
    }
    fn estimate(&self, quick: bool) -> Duration {
        Duration::from_secs(if quick { 15 } else { 90 })
    }

    fn run(&self, ctx: &Context, step: &Step) -> anyhow::Result<Section> {
        let mut section = super::super::blank(self);
        section.source =
            "anchors measured in the same run on this machine (OpenSSL through the openssl crate)".into();
        section.paper_method =
            "No paper: each benchmark names an anchor — another implementation doing the same \
            work on the same machine in the same run — and a target."
                .into();
        section.our_setup =
            "fastshake-bench, run as a subprocess (it links OpenSSL and a counting allocator, the \
            fastshake binary neither); its full tables are in the bench-*.txt files beside this page."
                .into();
        if ctx.bench.is_none() {
            section.status = Status::Skipped {
                reason: "no fastshake-bench beside fastshake (cargo build --release -p fastshake -p fastshake-bench)"
                    .into(),
            };
            return Ok(section);
        }
        let mut logs = Table::new("Benchmark outputs", &["benchmark", "command", "tables"]);
        for bench in BENCHES {
            let args = if ctx.quick { bench.quick } else { bench.full };
            step.running(format!("fastshake-bench {}", args.join(" ")));
            let json = super::run_bench(ctx, bench.name, args)?;
            section.figures.extend((bench.figures)(&json));
            logs.row([
                bench.name.to_string(),
                format!("fastshake-bench {}", args.join(" ")),
                format!("bench-{}.txt", bench.name),
            ]);
        }
        section.tables.push(logs);
        section.meaning =
            "Timed figures vary with the machine's other load; the anchor ran interleaved with ours, \
            so the ratio is the steadier figure."
                .into();
        Ok(section)
    }
}
