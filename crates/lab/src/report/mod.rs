//! `fastshake lab all`: every experiment re-run into one report — `DIR/index.html` (one page,
//! nothing fetched), `DIR/*.svg`, `DIR/results.json` (schema: docs/results.schema.json) and a
//! pcap of one representative run per experiment.
//!
//! - [`registry`]: the [`registry::Experiment`] trait and the list of experiments;
//! - [`experiments`]: one module per experiment, turning its report into a [`results::Section`];
//! - [`results`]: the JSON schema's types; [`html`]: the page; [`svg`]: the plots;
//! - [`progress`]: the bars on the terminal.

pub mod experiments;
pub mod html;
pub mod progress;
pub mod registry;
pub mod results;
pub mod svg;

use anyhow::Context as _;
use progress::Progress;
use registry::{Context, Experiment};
use results::{Results, Section, Status};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `fastshake lab all` runs and where it writes; [`Default`] writes into `lab-report`.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The output directory (created): index.html, results.json, *.svg, *.pcap.
    pub out: PathBuf,
    /// Fewer seeds and grid points: a few minutes on two cores.
    pub quick: bool,
    /// Only these experiments, e.g. E1,E3 (default: all).
    pub only: Vec<String>,
    /// The seed every simulated figure derives from: the same seed gives the same figures.
    pub seed: u64,
    /// Also the real-socket parts: E1 and E6 in network namespaces through the delay relay
    /// (root only; skipped with the reason otherwise).
    pub real: bool,
    /// `fastshake-bench` (default: beside this binary, else $FASTSHAKE_BENCH).
    pub bench: Option<PathBuf>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            out: PathBuf::from("lab-report"),
            quick: false,
            only: Vec::new(),
            seed: 1,
            real: false,
            bench: None,
        }
    }
}

/// `fastshake-bench`: given, in the environment, or beside the running binary.
fn find_bench(given: Option<PathBuf>) -> Option<PathBuf> {
    let name = format!("fastshake-bench{}", std::env::consts::EXE_SUFFIX);
    given
        .or_else(|| std::env::var_os("FASTSHAKE_BENCH").map(PathBuf::from))
        .or_else(|| std::env::current_exe().ok().map(|me| me.with_file_name(&name)))
        .filter(|p| p.exists())
}

fn minutes(d: Duration) -> String {
    format!("{:.1} min", d.as_secs_f64() / 60.0)
}

/// The experiments `--only` names, in the registry's order.
fn select(only: &[String]) -> anyhow::Result<Vec<Box<dyn Experiment>>> {
    let all = registry::all();
    let known: Vec<&str> = all.iter().map(|e| e.id()).collect();
    for id in only {
        anyhow::ensure!(
            known.iter().any(|k| k.eq_ignore_ascii_case(id)),
            "unknown experiment {id}: --only takes {}",
            known.join(",")
        );
    }
    let known = known.join(",");
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|e| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(e.id())))
        .collect();
    anyhow::ensure!(!chosen.is_empty(), "no experiment chosen (known: {known})");
    Ok(chosen)
}

/// `fastshake lab all`: runs the chosen experiments and writes the report.
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    let chosen = select(&args.only)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let ctx = Context {
        quick: args.quick,
        seed: args.seed,
        out: args.out.clone(),
        bench: find_bench(args.bench.clone()),
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        real: args.real,
    };
    let estimate_of = |e: &dyn Experiment| {
        e.estimate(args.quick) + if args.real { e.estimate_real(args.quick) } else { Duration::ZERO }
    };
    let estimate: Duration = chosen.iter().map(|e| estimate_of(e.as_ref())).sum();
    let full: Duration = registry::all().iter().map(|e| e.estimate(false)).sum();
    let ids: Vec<&str> = chosen.iter().map(|e| e.id()).collect();
    println!(
        "lab all: {} ({} run{}, seed {}) into {}: about {} here; the full run of everything takes about {}",
        ids.join(", "),
        if args.quick { "quick" } else { "full" },
        if args.real { " with the real-socket parts" } else { "" },
        args.seed,
        args.out.display(),
        minutes(estimate),
        minutes(full)
    );
    match &ctx.bench {
        Some(p) => println!("benchmarks and E5's floods run {}", p.display()),
        None => println!(
            "no fastshake-bench beside this binary: the benchmarks and E5 are skipped \
             (cargo build --release -p fastshake -p fastshake-bench)"
        ),
    }
    let progress = Progress::new(estimate, std::io::stderr().is_terminal());
    let started = Instant::now();
    let mut sections = Vec::new();
    let mut estimate_done = Duration::ZERO;
    for experiment in &chosen {
        let step = progress.step(experiment.id(), estimate_of(experiment.as_ref()));
        step.running(experiment.title());
        let began = Instant::now();
        let mut section = experiment.run(&ctx, &step).unwrap_or_else(|e| {
            let mut s = blank(experiment.as_ref(), "");
            s.status = Status::Failed { reason: format!("{e:#}") };
            s
        });
        section.elapsed_s = began.elapsed().as_secs_f64();
        let verdict = match &section.status {
            Status::Ran => {
                let met = section.figures.iter().filter(|f| f.met == Some(true)).count();
                let judged = section.figures.iter().filter(|f| f.met.is_some()).count();
                format!("done in {:.0} s, {met} of {judged} figures met", section.elapsed_s)
            }
            Status::Skipped { reason } => format!("skipped: {reason}"),
            Status::Failed { reason } => format!("FAILED: {reason}"),
        };
        step.finish(verdict.clone());
        estimate_done += estimate_of(experiment.as_ref());
        progress.done(estimate_done, format!("{} {verdict}", experiment.id()));
        sections.push(section);
    }
    progress.finish();
    let results = Results {
        schema: results::SCHEMA.into(),
        seed: args.seed,
        quick: args.quick,
        only: ids.iter().map(|s| s.to_string()).collect(),
        elapsed_s: started.elapsed().as_secs_f64(),
        experiments: sections,
    };
    let json = serde_json::to_string_pretty(&results)?;
    std::fs::write(args.out.join("results.json"), json)?;
    std::fs::write(args.out.join("index.html"), html::page(&results, &args.out))?;
    for s in &results.experiments {
        match &s.status {
            Status::Ran => results::print_figures(&format!("{} {}", s.id, s.title), &s.figures),
            Status::Skipped { reason } => println!("{} skipped: {reason}", s.id),
            Status::Failed { reason } => println!("{} FAILED: {reason}", s.id),
        }
    }
    println!(
        "wrote {} (and results.json, the plots and captures) in {:.0} s",
        args.out.join("index.html").display(),
        results.elapsed_s
    );
    let failed: Vec<&str> = results
        .experiments
        .iter()
        .filter(|s| matches!(s.status, Status::Failed { .. }))
        .map(|s| s.id.as_str())
        .collect();
    anyhow::ensure!(failed.is_empty(), "{} failed (the page says why)", failed.join(", "));
    Ok(())
}

/// An empty section for `experiment` after `source` (the paper, or what stands in for one), to fill in.
pub fn blank(experiment: &dyn Experiment, source: impl Into<String>) -> Section {
    Section {
        id: experiment.id().into(),
        title: experiment.title().into(),
        source: source.into(),
        paper_method: String::new(),
        our_setup: String::new(),
        status: Status::Ran,
        figures: Vec::new(),
        tables: Vec::new(),
        plots: Vec::new(),
        capture: None,
        meaning: String::new(),
        elapsed_s: 0.0,
    }
}
