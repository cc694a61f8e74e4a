//! `fastshake lab e3`.

use fastshake_lab::e3::RunOptions;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// One independent replication per seed (the confidence intervals need at least 2).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6,7,8,9,10")]
    seeds: Vec<u64>,
    /// Requests per replication and grid point (sets the simulated time).
    #[arg(long, default_value_t = RunOptions::default().requests)]
    requests: u64,
    /// Seeds of the TSCH handshake prices.
    #[arg(long, default_value_t = RunOptions::default().tsch_seeds)]
    tsch_seeds: u64,
    /// Threads running replications side by side.
    #[arg(long)]
    threads: Option<usize>,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions {
            json: a.json,
            seeds: a.seeds,
            requests: a.requests,
            tsch_seeds: a.tsch_seeds,
            threads: a.threads,
        }
    }
}
