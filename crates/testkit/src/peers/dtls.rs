//! DTLS peers: `fastshake server` and `client`, `openssl s_server`, the names OpenSSL and
//! GnuTLS give our suites, and a test PKI written by `fastshake pki`.

use super::{announced_port, run, scratch_dir, start_on_free_port, tool, Fastshake, Peer, STEP};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

pub const PSK_IDENTITY: &str = "interop";
pub const PSK_HEX: &str = "00112233445566778899aabbccddeeff";
pub const WRONG_PSK_HEX: &str = "ffeeddccbbaa99887766554433221100";

pub const CCM8: &str = "TLS_PSK_WITH_AES_128_CCM_8";
pub const GCM: &str = "TLS_PSK_WITH_AES_128_GCM_SHA256";
/// What a handshake summary line says when neither side resent a flight.
pub const NO_RESEND: &str = "+ 0 resent, 0 resent by the peer";

/// OpenSSL's name of a suite.
pub fn openssl_cipher(iana: &str) -> &'static str {
    match iana {
        CCM8 => "PSK-AES128-CCM8",
        GCM => "PSK-AES128-GCM-SHA256",
        other => panic!("no OpenSSL name for {other}"),
    }
}

/// A GnuTLS priority string allowing exactly DTLS 1.2 with PSK and one AEAD (see
/// `gnutls-cli --list --priority ...`).
pub fn gnutls_priority(iana: &str) -> String {
    let cipher = match iana {
        CCM8 => "AES-128-CCM-8",
        GCM => "AES-128-GCM",
        other => panic!("no GnuTLS name for {other}"),
    };
    format!("NORMAL:-VERS-ALL:+VERS-DTLS1.2:-KX-ALL:+PSK:-CIPHER-ALL:+{cipher}:-MAC-ALL:+AEAD")
}

/// `openssl s_server` with a PSK and no certificate on a free port, ready to accept; returns it
/// and its port.
pub fn openssl_s_server(iana: &str, psk_hex: &str) -> (Peer, u16) {
    openssl_s_server_with(&[
        "-nocert",
        "-psk",
        psk_hex,
        "-psk_identity",
        PSK_IDENTITY,
        "-cipher",
        openssl_cipher(iana),
    ])
}

/// `openssl s_server -dtls1_2 ARGS` (credentials all in `args`) on a free port, ready to
/// accept; returns it and its port.
pub fn openssl_s_server_with(args: &[&str]) -> (Peer, u16) {
    start_on_free_port(
        "openssl s_server",
        |port| {
            let mut command = tool("openssl");
            command.args(["s_server", "-dtls1_2"]).args(args).args(["-accept", &format!("127.0.0.1:{port}")]);
            command
        },
        |peer| peer.stdout.text().contains("ACCEPT"),
    )
}

/// `openssl s_client -dtls1_2 ARGS` (credentials all in `args`) towards 127.0.0.1:`port`.
pub fn openssl_s_client(port: u16, args: &[&str]) -> Peer {
    let mut command = tool("openssl");
    command.args(["s_client", "-dtls1_2"]).args(args).args(["-connect", &format!("127.0.0.1:{port}")]);
    Peer::spawn("openssl s_client", command)
}

/// [`openssl_s_client`] with the shared PSK and identity and one suite.
pub fn openssl_psk_s_client(port: u16, iana: &str) -> Peer {
    openssl_s_client(port, &["-psk", PSK_HEX, "-psk_identity", PSK_IDENTITY, "-cipher", openssl_cipher(iana)])
}

/// `gnutls-serv --udp --echo ARGS` (credentials and priority all in `args`) on a free port,
/// ready to accept; returns it and its port.
pub fn gnutls_serv_echo(args: &[&str]) -> (Peer, u16) {
    start_on_free_port(
        "gnutls-serv",
        |port| {
            let mut command = tool("gnutls-serv");
            command.args(["--udp", "--echo"]).args(args).args(["-p", &port.to_string()]);
            command
        },
        |peer| peer.stderr.text().contains("UDP Echo Server listening on IPv4"),
    )
}

/// `gnutls-cli --udp ARGS` towards 127.0.0.1:`port` (credentials and priority all in `args`).
pub fn gnutls_cli(port: u16, args: &[&str]) -> Peer {
    let mut command = tool("gnutls-cli");
    command.arg("--udp").args(args).args(["-p", &port.to_string(), "127.0.0.1"]);
    Peer::spawn("gnutls-cli", command)
}

impl Fastshake {
    /// `fastshake server` with the shared PSK on 127.0.0.1 and a port of the kernel's choice
    /// (so no other process can take it first), ready to accept; returns it and its port.
    pub fn server(self, extra: &[&str]) -> (Peer, u16) {
        let mut args = vec!["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
        args.extend_from_slice(extra);
        self.server_with(&args)
    }

    /// `fastshake server --listen 127.0.0.1:0 ARGS` (credentials all in `args`), ready to
    /// accept; returns it and its port.
    pub fn server_with(self, args: &[&str]) -> (Peer, u16) {
        let mut command = self.command();
        command.args(["server", "--listen", "127.0.0.1:0"]).args(args);
        let peer = Peer::spawn("fastshake server", command);
        let port = announced_port(&peer, "listening on 127.0.0.1:");
        (peer, port)
    }

    /// `fastshake client` towards 127.0.0.1:`port` with the shared identity and `psk_hex`.
    pub fn client(self, port: u16, psk_hex: &str, extra: &[&str]) -> Peer {
        let mut args = vec!["--psk-identity", PSK_IDENTITY, "--psk", psk_hex];
        args.extend_from_slice(extra);
        self.client_with(port, &args)
    }

    /// `fastshake client --connect 127.0.0.1:PORT ARGS` (credentials all in `args`).
    pub fn client_with(self, port: u16, args: &[&str]) -> Peer {
        let mut command = self.command();
        command.args(["client", "--connect", &format!("127.0.0.1:{port}"), "--linger", "300"]).args(args);
        Peer::spawn("fastshake client", command)
    }

    /// One client run with `client_with(port, args)`: a line out, its echo back, a clean exit;
    /// returns the client's stderr.
    pub fn echo_run(self, port: u16, args: &[&str], line: &str) -> String {
        let mut client = self.client_with(port, args);
        client.expect_handshake_without_resend(&[]);
        client.write_line(line);
        client.expect_stdout(line);
        client.finish(&[]);
        client.stderr.text()
    }

    /// Two [`Fastshake::echo_run`]s with `args`, which name a `--session-file`: the first a full
    /// handshake that writes the file, the second resumed (`by`: "ticket" or "session ID") from
    /// it. Returns both runs' stderr.
    pub fn resumed_by_session_file(self, port: u16, args: &[&str], by: &str) -> (String, String) {
        let first = self.echo_run(port, args, "first run");
        assert!(first.contains("full (not resumed)"), "{first}");
        let second = self.echo_run(port, args, "second run");
        assert!(second.contains(&format!("resumed by {by}")), "{second}");
        (first, second)
    }
}

impl Peer {
    /// Waits until one line of standard error is a handshake summary (`handshake done`)
    /// containing every one of `parts`, and checks from it that no flight was resent on either
    /// side: over loopback a resent flight means one side waited for a retransmission timer, a
    /// stall, which a passing interop test must not hide. Returns the line.
    pub fn expect_handshake_without_resend(&self, parts: &[&str]) -> String {
        let mut all = vec!["handshake done"];
        all.extend_from_slice(parts);
        let line = self.expect_stderr_line_with(&all);
        assert!(line.contains(NO_RESEND), "a flight was resent, a stall: {line}\n{}", self.transcript());
        line
    }

    /// Every handshake summary this fastshake process printed so far shows no resent flight.
    pub fn assert_no_resend_in_any_handshake(&self) {
        let stderr = self.stderr.text();
        let summaries: Vec<&str> = stderr.lines().filter(|l| l.contains("handshake done")).collect();
        assert!(!summaries.is_empty(), "no handshake summary\n{}", self.transcript());
        for line in summaries {
            assert!(line.contains(NO_RESEND), "a flight was resent, a stall: {line}\n{}", self.transcript());
        }
    }
}

/// `DIR/{ca.pem, server.pem, server.key, client.pem, client.key}` of one `fastshake pki` run,
/// in a scratch directory removed on drop; and the arguments that hand them to `fastshake`,
/// OpenSSL and GnuTLS.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Runs `fastshake pki --out DIR --chain-len CHAIN_LEN --key KEY` (`p256`, `rsa2048`).
    pub fn generate(fastshake: Fastshake, key: &str, chain_len: usize) -> Pki {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = scratch_dir().join(format!("dtls-pki-{}-{n}-{key}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut command = fastshake.command();
        command.args(["pki", "--out"]).arg(&dir).args(["--chain-len", &chain_len.to_string(), "--key", key]);
        let done = run("fastshake pki", command, 6 * STEP);
        assert!(done.status.success(), "fastshake pki failed: {}", done.stderr);
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

    /// `openssl s_client` arguments: verify the server against our CA and authenticate with the
    /// client's leaf, `chain` as `-cert_chain` (the intermediates, or the whole chain file as a
    /// new user would give it) and key.
    pub fn openssl_mutual_client_args(&self, chain: &str) -> Vec<String> {
        let ca = self.ca();
        let (cert, key) = (self.client_cert(), self.client_key());
        ["-CAfile", &ca, "-verify_return_error", "-cert", &cert, "-cert_chain", chain, "-key", &key]
            .map(String::from)
            .to_vec()
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

    /// Subject of the server leaf as `fastshake pki` names it.
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
