//! `fastshake sim SCENARIO.toml`.

#[derive(clap::Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("the simulator command is not built yet")
}
