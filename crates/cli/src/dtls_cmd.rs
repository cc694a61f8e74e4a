//! `fastshake server` and `fastshake client` (DTLS 1.2).

#[derive(clap::Args)]
pub struct ServerArgs {}

#[derive(clap::Args)]
pub struct ClientArgs {}

pub fn server(_args: ServerArgs) -> anyhow::Result<()> {
    anyhow::bail!("the DTLS server is not built yet")
}

pub fn client(_args: ClientArgs) -> anyhow::Result<()> {
    anyhow::bail!("the DTLS client is not built yet")
}
