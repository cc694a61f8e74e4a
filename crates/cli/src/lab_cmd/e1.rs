//! `fastshake lab e1`, and the real-socket runs of `fastshake netlab e1` and `e1-peer`.

use fastshake_lab::e1::real::{ClientPeerOptions, PeerOptions, RealOptions, ServerPeerOptions};
use fastshake_lab::e1::RunOptions;
use std::net::SocketAddr;

// The flags both E1 commands start with, in the same words (no doc comment here: a flattened
// struct's would replace the command's description).
#[derive(clap::Args, Debug)]
struct Workload {
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Messages per run (seed 001: 600).
    #[arg(long, default_value_t = RunOptions::default().messages)]
    messages: u32,
}

// The application timeout and the delays, alike in both E1 commands.
#[derive(clap::Args, Debug)]
struct Timing {
    /// Application timeout, ms (seed 001: 1 s).
    #[arg(long, default_value_t = RunOptions::default().app_timeout_ms)]
    app_timeout_ms: u64,
    /// One-way delays on the client's access links, ms.
    #[arg(long, value_delimiter = ',', default_values_t = RunOptions::default().delays)]
    delays: Vec<u64>,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    workload: Workload,
    /// Runs per cell (seeds 1..=N); the figures are means over them.
    #[arg(long, default_value_t = RunOptions::default().seeds)]
    seeds: u64,
    /// Length of each outage, ms (seed 001 does not give it).
    #[arg(long, default_value_t = RunOptions::default().outage_ms)]
    outage_ms: u64,
    /// Jitter per packet on the client's access links, uniform in [0, N] µs (may reorder).
    #[arg(long, default_value_t = RunOptions::default().jitter_us)]
    jitter_us: u64,
    #[command(flatten)]
    timing: Timing,
    /// NAT between router and server: none, full-cone, restricted, port-restricted, symmetric, all.
    #[arg(long, default_value_t = RunOptions::default().nat)]
    nat: String,
    /// Run on real sockets in network namespaces instead of the simulator (needs root; one run
    /// per cell; `fastshake netlab e1` has the real run's further knobs).
    #[arg(long)]
    real: bool,
    /// The DTLS versions whose rows run: 1.2 (the paper's), 1.3 (PSK in psk_ke mode with
    /// TLS_AES_128_CCM_8_SHA256), or both.
    #[arg(long, value_name = "VERSION", value_parser = ["1.2", "1.3", "both"], default_value = "both")]
    dtls: String,
}

/// The versions a `--dtls` value names, 1.2 first.
fn versions(dtls: &str) -> Vec<fastshake_dtls::Versions> {
    match dtls {
        "1.2" => vec![fastshake_dtls::Versions::Dtls12],
        "1.3" => vec![fastshake_dtls::Versions::Dtls13],
        _ => vec![fastshake_dtls::Versions::Dtls12, fastshake_dtls::Versions::Dtls13],
    }
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions {
            json: a.workload.json,
            messages: a.workload.messages,
            seeds: a.seeds,
            outage_ms: a.outage_ms,
            jitter_us: a.jitter_us,
            app_timeout_ms: a.timing.app_timeout_ms,
            delays: a.timing.delays,
            nat: a.nat,
            real: a.real,
            versions: versions(&a.dtls),
        }
    }
}

/// `fastshake netlab e1`: E1 on real sockets with every knob (`fastshake lab e1 --real` is this
/// with the simulator's fixed outage period).
#[derive(clap::Args, Debug)]
pub struct RealArgs {
    #[command(flatten)]
    workload: Workload,
    /// Runs per cell (seeds 1..=N; the seed places the first outage as in the simulator).
    #[arg(long, default_value_t = RealOptions::default().seeds)]
    seeds: u64,
    /// Length of each outage, ms.
    #[arg(long, default_value_t = RealOptions::default().outage_ms)]
    outage_ms: u64,
    #[command(flatten)]
    timing: Timing,
    /// NAT between router and server: none, port-restricted, symmetric or all (the testbed's
    /// nftables NAT has no full-cone or restricted kind).
    #[arg(long, default_value_t = RealOptions::default().nat)]
    nat: String,
    /// Strategies, comma-separated (standard-full, standard-resumed, oracle, cid, ipc, tcs);
    /// default: every one (with `--peers driver`, all but the oracle).
    #[arg(long, value_delimiter = ',')]
    strategies: Vec<String>,
    /// Client interfaces: single, multi or both.
    #[arg(long, default_value_t = RealOptions::default().homing)]
    homing: String,
    /// Time between two outages of one interface, ms (the simulated E1: 10 000).
    #[arg(long, default_value_t = RealOptions::default().outage_period_ms)]
    outage_period_ms: u64,
    /// Offset of the second interface's outages, ms; default: half the period (the simulated
    /// E1: 5 000 of 10 000).
    #[arg(long)]
    interleave_ms: Option<u64>,
    /// First outage, ms after the first ClientHello; default: drawn from the seed in
    /// [1 s, 10 s] as in the simulated E1.
    #[arg(long)]
    first_outage_ms: Option<u64>,
    /// The peers: `app`, the simulated E1's applications over plain UDP sockets (every strategy,
    /// the oracle included), or `driver`, the E1 application on the real-socket DTLS driver
    /// (its server socket strategies and its reconnection).
    #[arg(long, default_value_t = RealOptions::default().peers)]
    peers: String,
    /// The DTLS versions whose rows run: 1.2, 1.3 (PSK, psk_ke, TLS_AES_128_CCM_8_SHA256) or both.
    #[arg(long, value_name = "VERSION", value_parser = ["1.2", "1.3", "both"], default_value = "both")]
    dtls: String,
}

impl From<RealArgs> for RealOptions {
    fn from(a: RealArgs) -> RealOptions {
        RealOptions {
            json: a.workload.json,
            messages: a.workload.messages,
            seeds: a.seeds,
            outage_ms: a.outage_ms,
            app_timeout_ms: a.timing.app_timeout_ms,
            delays: a.timing.delays,
            nat: a.nat,
            strategies: a.strategies,
            homing: a.homing,
            outage_period_ms: a.outage_period_ms,
            interleave_ms: a.interleave_ms,
            first_outage_ms: a.first_outage_ms,
            peers: a.peers,
            versions: versions(&a.dtls),
        }
    }
}

/// `fastshake netlab e1-peer`: one side of a real E1 run, started by the runner in a testbed host.
#[derive(clap::Args, Debug)]
pub struct PeerArgs {
    #[command(subcommand)]
    role: PeerRole,
}

#[derive(clap::Subcommand, Debug)]
enum PeerRole {
    /// The acknowledging server.
    Server(ServerPeerArgs),
    /// The mobile client.
    Client(ClientPeerArgs),
}

#[derive(clap::Args, Debug)]
struct ServerPeerArgs {
    /// Address of the welcome socket.
    #[arg(long)]
    listen: SocketAddr,
    #[arg(long)]
    strategy: String,
    #[arg(long)]
    messages: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run on the DTLS driver instead of the simulated E1's application.
    #[arg(long)]
    driver: bool,
    /// The DTLS version of the run.
    #[arg(long, value_name = "VERSION", value_parser = ["1.2", "1.3"], default_value = "1.2")]
    dtls: String,
}

#[derive(clap::Args, Debug)]
struct ClientPeerArgs {
    /// The server's welcome address.
    #[arg(long)]
    server: SocketAddr,
    /// An interface and its address, `eth0=192.0.2.2`; repeat for each.
    #[arg(long = "iface", required = true)]
    ifaces: Vec<String>,
    #[arg(long)]
    strategy: String,
    #[arg(long)]
    messages: u32,
    #[arg(long, default_value_t = 1000)]
    app_timeout_ms: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run on the DTLS driver instead of the simulated E1's application.
    #[arg(long)]
    driver: bool,
    /// The DTLS version of the run.
    #[arg(long, value_name = "VERSION", value_parser = ["1.2", "1.3"], default_value = "1.2")]
    dtls: String,
}

impl From<PeerArgs> for PeerOptions {
    fn from(a: PeerArgs) -> PeerOptions {
        match a.role {
            PeerRole::Server(s) => PeerOptions::Server(ServerPeerOptions {
                listen: s.listen,
                strategy: s.strategy,
                messages: s.messages,
                seed: s.seed,
                driver: s.driver,
                version: versions(&s.dtls)[0],
            }),
            PeerRole::Client(c) => PeerOptions::Client(ClientPeerOptions {
                server: c.server,
                ifaces: c.ifaces,
                strategy: c.strategy,
                messages: c.messages,
                app_timeout_ms: c.app_timeout_ms,
                seed: c.seed,
                driver: c.driver,
                version: versions(&c.dtls)[0],
            }),
        }
    }
}
