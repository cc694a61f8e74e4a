//! A test PKI written by `fastshake pki` into a scratch directory (removed on drop), and the
//! command-line arguments that hand its files to `fastshake`, OpenSSL and GnuTLS.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `DIR/{ca.pem, server.pem, server.key, client.pem, client.key}` of one `fastshake pki` run.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Runs `fastshake pki --out DIR --chain-len CHAIN_LEN --key KEY` (`p256`, `rsa2048`).
    pub fn generate(key: &str, chain_len: usize) -> Pki {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "dtls-pki-{}-{}-{key}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let output = Command::new(env!("CARGO_BIN_EXE_fastshake"))
            .args(["pki", "--out"])
            .arg(&dir)
            .args(["--chain-len", &chain_len.to_string(), "--key", key])
            .output()
            .expect("run fastshake pki");
        assert!(output.status.success(), "fastshake pki failed: {}", String::from_utf8_lossy(&output.stderr));
        Pki { dir }
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).to_str().expect("a UTF-8 scratch path").to_owned()
    }

    /// The root certificate.
    pub fn ca(&self) -> String {
        self.file("ca.pem")
    }

    /// Leaf and intermediates of the server.
    pub fn server_cert(&self) -> String {
        self.file("server.pem")
    }

    pub fn server_key(&self) -> String {
        self.file("server.key")
    }

    /// Leaf and intermediates of the client.
    pub fn client_cert(&self) -> String {
        self.file("client.pem")
    }

    pub fn client_key(&self) -> String {
        self.file("client.key")
    }

    /// The server's intermediates alone, for OpenSSL's `-cert_chain` (`-cert` takes the leaf;
    /// given the whole chain file, OpenSSL would send the leaf twice).
    pub fn server_intermediates(&self) -> String {
        self.intermediates_of("server.pem", "server-intermediates.pem")
    }

    /// The client's intermediates alone, for OpenSSL's `-cert_chain`.
    pub fn client_intermediates(&self) -> String {
        self.intermediates_of("client.pem", "client-intermediates.pem")
    }

    fn intermediates_of(&self, chain: &str, out: &str) -> String {
        const END: &str = "-----END CERTIFICATE-----";
        let pem = std::fs::read_to_string(self.file(chain)).expect("read the chain");
        let after_leaf = pem.split_once(END).map_or("", |(_, rest)| rest).trim_start();
        std::fs::write(self.file(out), after_leaf).expect("write the intermediates");
        self.file(out)
    }

    /// A path in the scratch directory for a file a test makes (a session file, say).
    pub fn scratch(&self, name: &str) -> String {
        self.file(name)
    }

    /// `fastshake server` arguments: our chain and key.
    pub fn fastshake_server_args(&self) -> Vec<String> {
        vec!["--cert".into(), self.server_cert(), "--key".into(), self.server_key()]
    }

    /// `fastshake server` arguments: our chain and key, and the root that client chains must
    /// lead to, with `--client-auth POLICY`.
    pub fn fastshake_mutual_server_args(&self, policy: &str) -> Vec<String> {
        let mut args = self.fastshake_server_args();
        args.extend(["--ca".into(), self.ca(), "--client-auth".into(), policy.into()]);
        args
    }

    /// `fastshake client` arguments: the root to validate the server's chain against.
    pub fn fastshake_client_args(&self) -> Vec<String> {
        vec!["--ca".into(), self.ca()]
    }

    /// `fastshake client` arguments: the root, and our chain and key for the server that asks.
    pub fn fastshake_mutual_client_args(&self) -> Vec<String> {
        let mut args = self.fastshake_client_args();
        args.extend(["--cert".into(), self.client_cert(), "--key".into(), self.client_key()]);
        args
    }

    /// Subject of the server leaf as `fastshake pki` names it ("fastshake test server ...").
    pub fn server_subject_fragment(&self) -> &'static str {
        "fastshake test server"
    }

    pub fn client_subject_fragment(&self) -> &'static str {
        "fastshake test client"
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `&[String]` as `Vec<&str>` for the process helpers.
pub fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
