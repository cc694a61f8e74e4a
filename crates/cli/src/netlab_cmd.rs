//! `fastshake netlab`: the network-namespace testbed of the real-socket experiments.

#[derive(clap::Args)]
pub struct NetlabArgs {}

pub fn run(_args: NetlabArgs) -> anyhow::Result<()> {
    anyhow::bail!("fastshake netlab is not built yet")
}
