//! `fastshake sim SCENARIO.toml [--json] [--pcap FILE] [--frames-pcap FILE] [--seed N]`:
//! runs a simulator scenario (or each value of its sweep) and prints the summary. Besides the
//! simulator's `ping` and `echo`, apps may be the lab's DTLS and SCTP engine apps
//! (`fastshake_lab::apps::scenario`); a file's `[[expect]]` tables are checked after each run,
//! and a run that misses one makes the command fail after printing everything.

use anyhow::Context;
use fastshake_lab::apps::scenario::engine_apps;
use fastshake_sim::scenario::ScenarioFile;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct SimArgs {
    /// The scenario file (TOML; see scenarios/ for examples).
    scenario: PathBuf,
    /// Print the summary as JSON (one object, or an array for a sweep).
    #[arg(long)]
    json: bool,
    /// Write every datagram on every link to this pcap (raw IPv4, nanosecond virtual time).
    /// With a sweep, run i writes FILE with "-i" before its extension.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Write the IEEE 802.15.4 frames of duty-cycled links to this pcap (LINKTYPE 195).
    #[arg(long, value_name = "FILE")]
    frames_pcap: Option<PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
}

/// `dir/name.ext` → `dir/name-i.ext` when `indexed`.
fn numbered(path: &Path, index: usize, indexed: bool) -> PathBuf {
    if !indexed {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{index}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{index}"),
    };
    path.with_file_name(name)
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.scenario)
        .with_context(|| format!("reading {}", args.scenario.display()))?;
    let file = ScenarioFile::parse(&text).with_context(|| format!("loading {}", args.scenario.display()))?;
    let runs = file.runs()?;
    let swept = runs.len() > 1 || file.sweep().is_some();
    let progress = if swept {
        let bar = ProgressBar::new(runs.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} runs  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let capture = args.pcap.is_some() || args.frames_pcap.is_some();
    let mut reports = Vec::with_capacity(runs.len());
    for (index, (label, scenario)) in runs.into_iter().enumerate() {
        progress.set_message(label.clone().unwrap_or_default());
        let out = scenario.run_with(args.seed, capture, label, &mut engine_apps)?;
        if let (Some(path), Some(bytes)) = (&args.pcap, &out.pcap) {
            let path = numbered(path, index, swept);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        if let (Some(path), Some(bytes)) = (&args.frames_pcap, &out.frames_pcap) {
            let path = numbered(path, index, swept);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        reports.push(out.report);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let mut text = String::new();
    if args.json {
        let json = if swept {
            serde_json::to_string_pretty(&reports)?
        } else {
            serde_json::to_string_pretty(&reports[0])?
        };
        text.push_str(&json);
        text.push('\n');
    } else {
        for (i, report) in reports.iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&report.to_table());
        }
    }
    // A reader that stops early (`| head`) is not an error.
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    let unmet: usize = reports.iter().filter_map(|r| r.expectations.as_ref()).map(|e| e.unmet.len()).sum();
    anyhow::ensure!(unmet == 0, "{unmet} expectation(s) of {} not met", args.scenario.display());
    Ok(())
}
