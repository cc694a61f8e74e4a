//! `fastshake demo`: a server and a client over loopback.

#[derive(clap::Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<()> {
    anyhow::bail!("the demo is not built yet")
}
