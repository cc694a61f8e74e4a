//! `fastshake-bench`, which `fastshake bench` runs: figures beside their anchors, measured in the
//! same run (OpenSSL, usrsctp, a bare UDP echo, the papers' tables). Benchmarks print; they never
//! assert. One module per benchmark. This is the one binary that links OpenSSL and installs a
//! counting allocator; the `fastshake` binary that users run has neither.
#![forbid(unsafe_code)]

mod caching;
mod capture;
mod driver;
mod flood;
mod handshake;
mod handshake13;
mod key_cache;
mod load;
mod openssl_anchor;
mod sctp;
mod sim;
mod webrtc;
mod webrtc_relay;
mod webrtc_sim;

use anyhow::Context;
use clap::{Parser, Subcommand};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::path::PathBuf;
use std::process::ExitCode;

/// How long a timed benchmark runs: the flags the handshake benchmarks share.
#[derive(clap::Args, Clone, Copy)]
pub(crate) struct Repetitions {
    /// A few-second run: shorter and fewer repetitions.
    #[arg(long)]
    pub quick: bool,
    /// Repetitions of each timed measurement; the median is printed.
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,
}

impl Repetitions {
    /// `--runs`, or `quick` repetitions in a quick run and `full` otherwise.
    pub fn runs_or(self, quick: usize, full: usize) -> usize {
        self.runs.unwrap_or(if self.quick { quick } else { full })
    }
}

/// Counts every allocation, for the benchmarks that report allocations per operation.
#[global_allocator]
pub(crate) static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[derive(Parser)]
#[command(name = "fastshake-bench", version, about = "Benchmarks that print figures beside their anchors")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Heap allocations per application record through the tokio server driver on loopback,
    /// records as events beside records read in place.
    Driver(driver::Args),
    /// Floods of first packets answered statelessly: ClientHellos (HelloVerifyRequest) and SCTP
    /// INITs (ALT-COOKIE), beside a bare UDP echo, OpenSSL's DTLSv1_listen and usrsctp.
    Flood(flood::Args),
    /// DTLS handshakes per second, record throughput, session memory — beside OpenSSL.
    Handshake(handshake::Args),
    /// Handshakes per second with handshake caching (seed 003): vanilla, BiTHaC, BiTHaC + key
    /// cache, per chain type, and CPU per role — beside OpenSSL's full handshake of the same chains.
    Caching(caching::Args),
    /// Chain validation, full vs validated-key cache hit (seed 003), and the memory of an entry.
    KeyCache(key_cache::Args),
    /// A load generator: many clients, many handshakes in flight, against one server or, with
    /// --compare, against fastshake (1 and 2 workers), openssl s_server and pion; memory and a
    /// valid-cookie flood.
    Load(Box<load::Args>),
    /// SCTP INIT flood answers and time to first byte — beside usrsctp.
    Sctp(sctp::Args),
    /// Simulator events per second.
    Sim(sim::Args),
    /// Time to a data channel's first byte: headless Chromium and `webrtc connect` against
    /// `fastshake webrtc serve` and a pion/webrtc v4 server, in one run, on loopback and over the
    /// netlab delay relay (root: network namespaces).
    Webrtc(webrtc::Args),
}

/// The `fastshake` binary the loopback measurements run as their server and client: `$FASTSHAKE`,
/// or the one beside this binary (both are built into the same target directory).
pub(crate) fn fastshake_program() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("FASTSHAKE") {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().context("the path of fastshake-bench")?;
    let beside = me.with_file_name(format!("fastshake{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        beside.exists(),
        "no fastshake binary beside {} (build both: cargo build --release -p fastshake -p fastshake-bench, \
         or set FASTSHAKE)",
        me.display()
    );
    Ok(beside)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.bench {
        Bench::Driver(a) => driver::run(a),
        Bench::Flood(a) => flood::run(a),
        Bench::Handshake(a) => handshake::run(a),
        Bench::Caching(a) => caching::run(a),
        Bench::KeyCache(a) => key_cache::run(a),
        Bench::Load(a) => load::run(*a),
        Bench::Sctp(a) => sctp::run(a),
        Bench::Sim(a) => sim::run(a),
        Bench::Webrtc(a) => webrtc::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastshake-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
