//! `fastshake lab`: the flags of each experiment, parsed here and handed to the lab library as
//! its plain options (`fastshake_lab::*::RunOptions`); the library knows no command line.

mod chaos;
pub mod chaos_real;
pub mod e1;
mod e2;
mod e3;
mod e4;
mod e5;
mod report;

#[derive(clap::Args)]
pub struct LabArgs {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(clap::Subcommand)]
enum Experiment {
    /// E1: handover resilience (seed 001, Fig. 4 / Table I), in the simulator.
    E1(e1::Args),
    /// E2: seed 002 Section III (X-MAC, beacon-enabled 802.15.4, TSCH, CCM-8 overhead) with our
    /// real handshake, each figure beside the paper's; variants the paper did not run.
    E2(e2::Args),
    /// E3: session slots on a constrained server (seed 002, Section IV): the Engset formulas
    /// against the real engine, and what eviction (lru, idlest) costs the evicted.
    E3(e3::Args),
    /// E4: handshake caching (seed 003, BiTHaC) over DTLS 1.2: bytes per layer and message,
    /// TLS-framed totals, CPU per role, cache entry sizes, and TSCH / X-MAC, beside the paper.
    E4(e4::Args),
    /// E5: seed 004's alternative SCTP handshake — INIT-flood answers beside usrsctp, time to
    /// first byte per setup on a 2 Mbit/s link, and WebRTC data channels' first byte per setup
    /// (ICE mode, DTLS version, SCTP regular / alternative / SNAP). The report's E5 section alone.
    E5(e5::Args),
    /// Every experiment into one report: DIR/index.html (self-contained), DIR/*.svg,
    /// DIR/results.json (docs/results.schema.json) and a pcap per experiment.
    All(report::Args),
    /// E6: the chaos soak — every handshake completes, every record arrives once, over hostile links.
    Chaos(chaos::Args),
    /// E6 on real sockets: fastshake server and many clients through the delay relay (loss,
    /// duplication, reordering, moves); nothing lost or delivered twice, the server's memory flat.
    #[command(name = "chaos-real")]
    ChaosReal(chaos_real::Args),
}

pub fn run(args: LabArgs) -> anyhow::Result<()> {
    use fastshake_lab as lab;
    match args.experiment {
        Experiment::All(a) => lab::report::run(a.into()),
        Experiment::E1(a) => lab::e1::run(a.into()),
        Experiment::E2(a) => lab::e2::run(a.into()),
        Experiment::E3(a) => lab::e3::run(a.into()),
        Experiment::E4(a) => lab::e4::run(a.into()),
        Experiment::E5(a) => lab::report::run(a.into()),
        Experiment::Chaos(a) => lab::chaos::run(a.into()),
        Experiment::ChaosReal(a) => lab::chaos_real::run(a.into()),
    }
}
