//! `fastshake lab chaos`.

use fastshake_lab::chaos::RunOptions;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// 100 handshakes per cell instead of 1,000.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Seed of the run: the same seed gives the same figures (wall time aside).
    #[arg(long, default_value_t = RunOptions::default().seed)]
    seed: u64,
    /// Cells to run: comma-separated patterns matched against `mode/link` (`*` is a wildcard,
    /// plain text matches a substring), e.g. `psk/*,*/worst-wan`. Modes psk, ecdsa, resumed,
    /// cid (DTLS 1.2) and psk13, ecdsa13, hybrid13, resumed13, early13, cid13 (DTLS 1.3; `*13/*`
    /// selects them).
    #[arg(long)]
    only: Option<String>,
    /// Handshakes per cell (resumed cells: this many resumptions, each after a full handshake).
    #[arg(long)]
    handshakes: Option<u32>,
    /// Client nodes per cell, running at once against the one server.
    #[arg(long, default_value_t = RunOptions::default().clients)]
    clients: u16,
    /// Requests (each echoed) per session.
    #[arg(long, default_value_t = RunOptions::default().records)]
    records: u16,
    /// Write every datagram of the run to this pcap (one cell only).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Make a new test PKI instead of the kept one (the run is then not reproducible).
    #[arg(long)]
    fresh_pki: bool,
    /// Exit with an error unless the target (0 failed in every cell) is met.
    #[arg(long)]
    check: bool,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions {
            quick: a.quick,
            json: a.json,
            seed: a.seed,
            only: a.only,
            handshakes: a.handshakes,
            clients: a.clients,
            records: a.records,
            pcap: a.pcap,
            fresh_pki: a.fresh_pki,
            check: a.check,
        }
    }
}
