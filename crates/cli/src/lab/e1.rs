//! E1: handover resilience (seed 001, Fig. 4 and Table I).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("lab e1 is not built yet")
}
