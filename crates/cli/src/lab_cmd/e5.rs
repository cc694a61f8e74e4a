//! `fastshake lab e5`: seed 004's experiment alone, as the report's E5 section.

use fastshake_lab::report::RunOptions;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The output directory (created): index.html, results.json, the plots and the capture.
    #[arg(long, default_value = "lab-e5")]
    out: PathBuf,
    /// Shorter floods and two link delays.
    #[arg(long)]
    quick: bool,
    /// Also headless Chromium against our servers and pion's over the 25 ms delay relay (root,
    /// chromium; `fastshake bench webrtc`).
    #[arg(long)]
    real: bool,
    /// `fastshake-bench`, which measures the floods and times (default: beside this binary, else
    /// $FASTSHAKE_BENCH).
    #[arg(long)]
    bench: Option<PathBuf>,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions {
            out: a.out,
            quick: a.quick,
            only: vec!["E5".into()],
            bench: a.bench,
            real: a.real,
            ..RunOptions::default()
        }
    }
}
