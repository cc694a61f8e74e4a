//! `fastshake sctp server|client`.

#[derive(clap::Args)]
pub struct SctpArgs {}

pub fn run(_args: SctpArgs) -> anyhow::Result<()> {
    anyhow::bail!("the SCTP commands are not built yet")
}
