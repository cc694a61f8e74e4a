//! `fastshake lab`: the papers' experiments, our figures beside theirs.
//! One module per experiment (EXPERIMENTS.md numbering).

mod e2_tsch;

#[derive(clap::Args)]
pub struct LabArgs {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(clap::Subcommand)]
enum Experiment {
    /// E2, TSCH: seed 002's Tables I and II beside the simulator.
    #[command(name = "e2-tsch")]
    E2Tsch(e2_tsch::Args),
}

pub fn run(args: LabArgs) -> anyhow::Result<()> {
    match args.experiment {
        Experiment::E2Tsch(a) => e2_tsch::run(a),
    }
}
