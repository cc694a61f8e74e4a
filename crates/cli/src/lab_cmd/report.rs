//! `fastshake lab all`.

use fastshake_lab::report::RunOptions;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The output directory (created): index.html, results.json, *.svg, *.pcap.
    #[arg(long)]
    out: PathBuf,
    /// Fewer seeds and grid points: a few minutes on two cores.
    #[arg(long)]
    quick: bool,
    /// Only these experiments, e.g. E1,E3 (default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The seed every simulated figure derives from: the same seed gives the same figures.
    #[arg(long, default_value_t = RunOptions::default().seed)]
    seed: u64,
    /// Also the real-socket parts: E1 and E6 in network namespaces through the delay relay
    /// (root only; skipped with the reason otherwise).
    #[arg(long)]
    real: bool,
    /// `fastshake-bench` (default: beside this binary, else $FASTSHAKE_BENCH).
    #[arg(long)]
    bench: Option<PathBuf>,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions { out: a.out, quick: a.quick, only: a.only, seed: a.seed, real: a.real, bench: a.bench }
    }
}
