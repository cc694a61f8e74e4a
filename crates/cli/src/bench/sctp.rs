//! `fastshake bench sctp`.

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("bench sctp is not built yet")
}
