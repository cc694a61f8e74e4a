//! `fastshake pki` files read directly by real tools: `openssl verify`, `openssl pkey`, GnuTLS
//! `certtool --verify`, and mutually authenticated DTLS 1.2 handshakes between `openssl s_server`
//! and `openssl s_client`, and between `gnutls-serv` and `gnutls-cli`, using them — the PKI is
//! right before our engine relies on it.

use fastshake_testkit::peers::{run, start_on_free_port, Fastshake, Peer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// A fresh directory under cargo's per-target temporary directory, removed when the test passes
/// (kept after a failure).
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> Self {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        ScratchDir(dir)
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs a tool to completion in `dir` (bounded); returns whether it succeeded, and its standard
/// output and standard error.
fn run_tool(dir: &Path, label: &str, program: &str, args: &[&str]) -> (bool, String) {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir);
    let done = run(&format!("{program} ({label})"), command, TOOL_TIMEOUT);
    (done.status.success(), done.text())
}

/// The PEM certificates of a file, in order.
fn split_certificates(pem: &str) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    pem.split(BEGIN)
        .filter(|part| part.contains("-----END CERTIFICATE-----"))
        .map(|part| format!("{BEGIN}{part}"))
        .collect()
}

/// Runs `fastshake pki` into a directory of its own (tests run in parallel) and writes, beside its files, each chain split into leaf and intermediates.
fn make_pki(key: &str, purpose: &str) -> ScratchDir {
    let dir = ScratchDir::new(&format!("pki-openssl-{purpose}-{key}"));
    let mut command = FASTSHAKE.command();
    command.args(["pki", "--out"]).arg(&*dir).args(["--chain-len", "3", "--key", key]);
    let output = run("fastshake pki", command, TOOL_TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "fastshake pki failed: {}", output.stderr);
    for file in ["ca.pem", "server.pem", "server.key", "client.pem", "client.key"] {
        assert!(dir.join(file).is_file(), "{file} not written");
        assert!(stdout.contains(file), "summary does not mention {file}: {stdout}");
    }
    let root = std::fs::read_to_string(dir.join("ca.pem")).unwrap();
    assert_eq!(split_certificates(&root).len(), 1, "ca.pem holds the root alone");
    for side in ["server", "client"] {
        let chain = split_certificates(&std::fs::read_to_string(dir.join(format!("{side}.pem"))).unwrap());
        assert_eq!(chain.len(), 3, "{side}.pem: leaf and two intermediates");
        assert!(!chain.contains(&root), "{side}.pem must not carry the root");
        std::fs::write(dir.join(format!("{side}-leaf.pem")), &chain[0]).unwrap();
        std::fs::write(dir.join(format!("{side}-intermediates.pem")), chain[1..].concat()).unwrap();
    }
    dir
}

fn check_with_tools(key: &str) {
    let dir = make_pki(key, "tools");
    for (side, purpose) in [("server", "sslserver"), ("client", "sslclient")] {
        let leaf = format!("{side}-leaf.pem");
        let intermediates = format!("{side}-intermediates.pem");
        let (ok, out) = run_tool(
            &dir,
            &format!("verify-{side}"),
            "openssl",
            &["verify", "-CAfile", "ca.pem", "-untrusted", &intermediates, "-purpose", purpose, &leaf],
        );
        assert!(ok && out.contains(&format!("{leaf}: OK")), "openssl verify {side}: {out}");

        let key_file = format!("{side}.key");
        let (ok, out) =
            run_tool(&dir, &format!("pkey-{side}"), "openssl", &["pkey", "-in", &key_file, "-noout"]);
        assert!(ok, "openssl pkey {side}: {out}");
        // The key is the one the leaf certifies.
        let (_, key_public) =
            run_tool(&dir, &format!("pub-key-{side}"), "openssl", &["pkey", "-in", &key_file, "-pubout"]);
        let (_, cert_public) = run_tool(
            &dir,
            &format!("pub-cert-{side}"),
            "openssl",
            &["x509", "-in", &leaf, "-noout", "-pubkey"],
        );
        assert!(
            key_public.contains("BEGIN PUBLIC KEY") && key_public == cert_public,
            "{side}: key and leaf differ"
        );

        let chain = format!("{side}.pem");
        let mut args = vec!["--verify", "--load-ca-certificate", "ca.pem", "--infile", &chain];
        if side == "server" {
            args.extend(["--verify-hostname", "localhost"]);
        }
        let (ok, out) = run_tool(&dir, &format!("certtool-{side}"), "certtool", &args);
        assert!(ok && out.contains("Chain verification output: Verified"), "certtool {side}: {out}");
    }
    // A name the server certificate does not carry is refused by GnuTLS too.
    let (ok, out) = run_tool(
        &dir,
        "certtool-wrong-name",
        "certtool",
        &[
            "--verify",
            "--load-ca-certificate",
            "ca.pem",
            "--infile",
            "server.pem",
            "--verify-hostname",
            "example.com",
        ],
    );
    assert!(!ok || !out.contains("Chain verification output: Verified"), "wrong name accepted: {out}");
}

/// `program ARGS` running in `dir`, its standard input open (both tools stop when it closes).
fn spawn_in(dir: &Path, program: &str, args: &[&str]) -> Peer {
    Peer::spawn(program, command_in(dir, program, args))
}

fn command_in(dir: &Path, program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir);
    command
}

/// Standard output, then standard error.
fn text(peer: &Peer) -> String {
    format!("{}{}", peer.stdout.text(), peer.stderr.text())
}

/// What happened between `openssl s_server` and `openssl s_client`.
struct Session {
    data_arrived: bool,
    client_succeeded: bool,
    server_stopped: bool,
    client_text: String,
    server_text: String,
}

impl Session {
    fn context(&self) -> String {
        format!("--- s_client:\n{}\n--- s_server:\n{}", self.client_text, self.server_text)
    }
}

/// Runs one DTLS 1.2 session with mutual authentication between OpenSSL's tools in `dir`:
/// the server trusts `server_ca` for client chains, the client trusts `client_ca` and checks `name`.
fn dtls_session(
    dir: &Path,
    server_ca: &str,
    client: &str,
    client_ca: &str,
    name: &str,
    cipher: &str,
) -> Session {
    // `-cert` reads only the first certificate of a file; the intermediates go in `-cert_chain`.
    let s_server = |port: u16| {
        let accept = format!("127.0.0.1:{port}");
        command_in(
            dir,
            "openssl",
            &[
                "s_server",
                "-dtls1_2",
                "-accept",
                &accept,
                "-naccept",
                "1",
                "-cert",
                "server.pem",
                "-cert_chain",
                "server-intermediates.pem",
                "-key",
                "server.key",
                "-Verify",
                "2",
                "-verify_return_error",
                "-CAfile",
                server_ca,
            ],
        )
    };
    let (mut server, port) =
        start_on_free_port("openssl s_server", s_server, |s| s.stdout.text().contains("ACCEPT"));
    let accept = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + TOOL_TIMEOUT;

    let (client_cert, client_chain, client_key) =
        (format!("{client}.pem"), format!("{client}-intermediates.pem"), format!("{client}.key"));
    let mut client = spawn_in(
        dir,
        "openssl",
        &[
            "s_client",
            "-dtls1_2",
            "-connect",
            &accept,
            "-cipher",
            cipher,
            "-CAfile",
            client_ca,
            "-verify_return_error",
            "-verify_hostname",
            name,
            "-cert",
            &client_cert,
            "-cert_chain",
            &client_chain,
            "-key",
            &client_key,
        ],
    );
    client.write(b"ping from the client\n");
    // Until the data arrives or the client gives up (a refused handshake ends it).
    let mut data_arrived = false;
    while Instant::now() < deadline {
        if server.stdout.text().contains("ping from the client") {
            data_arrived = true;
            break;
        }
        if client.exited() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    client.close_stdin(); // s_client closes the session on end of input
    let client_exit = client.wait_timeout(TOOL_TIMEOUT);
    let server_stopped = server.wait_timeout(TOOL_TIMEOUT).is_some();
    Session {
        data_arrived,
        client_succeeded: client_exit.is_some_and(|s| s.success()),
        server_stopped,
        client_text: text(&client),
        server_text: text(&server),
    }
}

/// A DTLS 1.2 handshake with mutual authentication between OpenSSL's tools, using our files.
fn openssl_dtls_handshake(key: &str, cipher: &str) {
    let dir = make_pki(key, "dtls");
    let session = dtls_session(&dir, "ca.pem", "client", "ca.pem", "localhost", cipher);
    let context = session.context();
    assert!(session.data_arrived, "data did not cross the DTLS session\n{context}");
    assert!(session.client_succeeded, "s_client failed\n{context}");
    assert!(session.server_stopped, "s_server did not stop after one session\n{context}");
    let (client_text, server_text) = (&session.client_text, &session.server_text);
    assert!(client_text.contains("Verification: OK"), "server chain not verified\n{context}");
    assert!(client_text.contains("Verified peername: localhost"), "server name not verified\n{context}");
    assert!(client_text.contains(&format!("Cipher is {cipher}")), "suite\n{context}");
    assert!(client_text.contains("Protocol  : DTLSv1.2"), "protocol\n{context}");
    // The server verified the whole client chain down to the client leaf.
    assert!(
        server_text.contains("CN = fastshake test client") && server_text.contains("depth=2"),
        "client chain\n{context}"
    );
    assert!(!server_text.contains("verify error"), "client chain refused\n{context}");
}

/// The same tools refuse what they must: a name the server certificate lacks, and a client
/// certificate from another PKI — so the successful runs above prove something.
#[test]
fn openssl_dtls_refuses_wrong_name_and_foreign_client() {
    let dir = make_pki("p256", "dtls-refused");
    let cipher = "ECDHE-ECDSA-AES128-GCM-SHA256";
    let session = dtls_session(&dir, "ca.pem", "client", "ca.pem", "example.com", cipher);
    assert!(!session.data_arrived && !session.client_succeeded, "wrong name accepted\n{}", session.context());
    assert!(session.client_text.contains("hostname mismatch"), "{}", session.context());

    // A client chain from a second PKI; the client itself trusts the server's root.
    let other = make_pki("p256", "dtls-other");
    for file in ["client.pem", "client-intermediates.pem", "client.key"] {
        std::fs::copy(other.join(file), dir.join(format!("other-{file}"))).unwrap();
    }
    let session = dtls_session(&dir, "ca.pem", "other-client", "ca.pem", "localhost", cipher);
    assert!(
        !session.data_arrived && !session.client_succeeded,
        "foreign client accepted\n{}",
        session.context()
    );
    assert!(session.server_text.contains("verify error"), "{}", session.context());
}

#[test]
fn p256_files_pass_openssl_and_gnutls_checks() {
    check_with_tools("p256");
}

#[test]
fn rsa2048_files_pass_openssl_and_gnutls_checks() {
    check_with_tools("rsa2048");
}

#[test]
fn openssl_dtls_mutual_auth_with_p256_files() {
    openssl_dtls_handshake("p256", "ECDHE-ECDSA-AES128-GCM-SHA256");
}

#[test]
fn openssl_dtls_mutual_auth_with_rsa2048_files() {
    openssl_dtls_handshake("rsa2048", "ECDHE-RSA-AES128-GCM-SHA256");
}

/// GnuTLS reads the same files for a DTLS 1.2 session: the whole chain from `--x509certfile`, the
/// client certificate required and verified by the server, the server's name checked by the client.
#[test]
fn gnutls_dtls_mutual_auth_with_p256_files() {
    let dir = make_pki("p256", "gnutls");
    let gnutls_serv = |port: u16| {
        let port = port.to_string();
        command_in(
            &dir,
            "gnutls-serv",
            &[
                "--udp",
                "--echo",
                "-p",
                &port,
                "--x509certfile",
                "server.pem",
                "--x509keyfile",
                "server.key",
                "--x509cafile",
                "ca.pem",
                "--require-client-cert",
                "--verify-client-cert",
            ],
        )
    };
    // gnutls-serv announces itself on standard error (its standard output is block-buffered).
    let (server, port) =
        start_on_free_port("gnutls-serv", gnutls_serv, |s| s.stderr.text().contains("listening on IPv4"));
    let port = port.to_string();
    let deadline = Instant::now() + TOOL_TIMEOUT;
    let mut client = spawn_in(
        &dir,
        "gnutls-cli",
        &[
            "--udp",
            "-p",
            &port,
            "--x509cafile",
            "ca.pem",
            "--x509certfile",
            "client.pem",
            "--x509keyfile",
            "client.key",
            "localhost",
        ],
    );
    client.write(b"ping from gnutls-cli\n");
    // The echo comes back only over an established session.
    let mut echoed = false;
    while Instant::now() < deadline {
        if client.stdout.text().contains("ping from gnutls-cli") {
            echoed = true;
            break;
        }
        if client.exited() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    client.close_stdin();
    let client_exit = client.wait_timeout(TOOL_TIMEOUT);
    let client_text = text(&client);
    // gnutls-serv serves until stopped: its guard stops it.
    let context = format!("--- gnutls-cli:\n{client_text}\n--- gnutls-serv:\n{}", text(&server));
    assert!(echoed, "no echo over the DTLS session\n{context}");
    assert!(client_exit.is_some_and(|s| s.success()), "gnutls-cli failed\n{context}");
    assert!(client_text.contains("- Status: The certificate is trusted."), "server chain\n{context}");
    assert!(client_text.contains("Handshake was completed"), "handshake\n{context}");
    assert!(client_text.contains("(DTLS1.2-X.509)"), "protocol\n{context}");
}
