//! `fastshake lab e2`.

use fastshake_lab::e2::RunOptions;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Seeds (MAC phases, cell placements, losses, DTLS randoms) per real-handshake configuration;
    /// the 10-frame TSCH tables use ten times as many.
    #[arg(long, default_value_t = RunOptions::default().seeds)]
    seeds: u64,
    /// Longest chain, in hops (the paper: 4).
    #[arg(long, default_value_t = RunOptions::default().max_hops)]
    max_hops: usize,
    /// Write SVG plots beside the paper's figures into this directory.
    #[arg(long)]
    plot: Option<PathBuf>,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions { json: a.json, seeds: a.seeds, max_hops: a.max_hops, plot: a.plot }
    }
}
