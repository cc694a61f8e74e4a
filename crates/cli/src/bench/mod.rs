//! `fastshake bench`: figures beside their anchors. Benchmarks print; they never assert.
//! One module per benchmark.

mod handshake;
mod sctp;
mod sim;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(clap::Subcommand)]
enum Bench {
    /// DTLS handshakes per second, record throughput, session memory — beside OpenSSL.
    Handshake(handshake::Args),
    /// SCTP INIT flood answers and time to first byte — beside usrsctp.
    Sctp(sctp::Args),
    /// Simulator events per second.
    Sim(sim::Args),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.bench {
        Bench::Handshake(a) => handshake::run(a),
        Bench::Sctp(a) => sctp::run(a),
        Bench::Sim(a) => sim::run(a),
    }
}
