//! `fastshake pki`: a test PKI that OpenSSL and GnuTLS read directly.

#[derive(clap::Args)]
pub struct PkiArgs {}

pub fn run(_args: PkiArgs) -> anyhow::Result<()> {
    anyhow::bail!("fastshake pki is not built yet")
}
