//! `fastshake lab e4`.

use fastshake_lab::e4::RunOptions;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Repetitions of the CPU measurement (medians); 0 skips it.
    #[arg(long, default_value_t = RunOptions::default().cpu_runs)]
    cpu_runs: usize,
    /// Seeds of the TSCH and X-MAC runs (means); 0 skips them.
    #[arg(long, default_value_t = RunOptions::default().mac_seeds)]
    mac_seeds: u64,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions { json: a.json, cpu_runs: a.cpu_runs, mac_seeds: a.mac_seeds }
    }
}
