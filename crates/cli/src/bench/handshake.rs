//! `fastshake bench handshake`.

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("bench handshake is not built yet")
}
