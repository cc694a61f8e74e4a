//! `fastshake pki`: a test PKI that OpenSSL and GnuTLS read directly.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use fastshake_pki::generate::{generate, GeneratedCert, KeyKind, TestPki, DEFAULT_SERVER_NAMES};

#[derive(clap::Args)]
pub struct PkiArgs {
    /// Directory to write ca.pem, server.pem, server.key, client.pem and client.key into.
    #[arg(long)]
    out: PathBuf,
    /// Certificates each side sends: the leaf and N-1 intermediates (the root is never sent).
    #[arg(long, default_value_t = 3)]
    chain_len: usize,
    /// Key kind of every certificate: p256, rsa2048 or rsa4096.
    #[arg(long, default_value = "p256")]
    key: KeyKind,
    /// A DNS name or IP address the server certificate names (repeatable;
    /// default localhost and 127.0.0.1).
    #[arg(long = "server-name")]
    server_names: Vec<String>,
    /// Validity of every certificate, in days from now.
    #[arg(long, default_value_t = 365)]
    days: u32,
}

pub fn run(args: PkiArgs) -> anyhow::Result<()> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).context("system clock before 1970")?;
    let pki = generate(args.chain_len, args.key, &args.server_names, now.as_secs(), args.days)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    write(&args.out, "ca.pem", pki.ca_pem(), false)?;
    write(&args.out, "server.pem", &pki.server_chain_pem(), false)?;
    write(&args.out, "server.key", &pki.server.key_pem, true)?;
    write(&args.out, "client.pem", &pki.client_chain_pem(), false)?;
    write(&args.out, "client.key", &pki.client.key_pem, true)?;
    print_summary(&args, &pki);
    Ok(())
}

fn write(dir: &Path, name: &str, contents: &str, secret: bool) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", path.display()))?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    Ok(())
}

fn print_summary(args: &PkiArgs, pki: &TestPki) {
    let names = if args.server_names.is_empty() {
        DEFAULT_SERVER_NAMES.join(", ")
    } else {
        args.server_names.join(", ")
    };
    println!(
        "test PKI in {}: key {}, {} certificate(s) sent per side, valid {} days",
        args.out.display(),
        pki.key_kind,
        args.chain_len,
        args.days
    );
    let line = |file: &str, role: &str, cert: &GeneratedCert| {
        println!("  {file:<11} {role:<13} {:>5} B DER  {}", cert.der.len(), cert.subject);
    };
    line("ca.pem", "root", &pki.root);
    line("server.pem", "server leaf", &pki.server.cert);
    for cert in pki.intermediates.iter().rev() {
        line("", "intermediate", cert);
    }
    line("client.pem", "client leaf", &pki.client.cert);
    for cert in pki.intermediates.iter().rev() {
        line("", "intermediate", cert);
    }
    println!("  server.key, client.key: PKCS#8 private keys ({})", pki.key_kind);
    println!("  server names: {names}");
    let der_len = |chain: &[fastshake_pki::CertDer]| chain.iter().map(|c| c.len()).sum::<usize>();
    let server_chain = pki.server_chain();
    let client_chain = pki.client_chain();
    // Certificate message body: 3-byte list length, then a 3-byte length before each certificate.
    println!(
        "  chain DER: server {} B, client {} B; Certificate message body (without the 12-byte DTLS handshake header): server {} B, client {} B",
        der_len(&server_chain),
        der_len(&client_chain),
        3 + der_len(&server_chain) + 3 * server_chain.len(),
        3 + der_len(&client_chain) + 3 * client_chain.len()
    );
}
