//! E2 over TSCH (seed 002, Tables I and II).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("lab e2-tsch is not built yet")
}
