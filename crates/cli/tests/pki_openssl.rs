//! `fastshake pki` files read directly by real tools: `openssl verify`, `openssl pkey`, GnuTLS
//! `certtool --verify`, and mutually authenticated DTLS 1.2 handshakes between `openssl s_server`
//! and `openssl s_client`, and between `gnutls-serv` and `gnutls-cli`, using them — the PKI is
//! right before our engine relies on it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Kills and reaps its process on every path out of a test.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl ChildGuard {
    /// Waits for the process to exit by itself, at most `timeout`.
    fn wait_bounded(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.0.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A fresh directory under cargo's per-target temporary directory, removed when the test passes
/// (kept after a failure, with the tools' output in it).
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

/// Runs a tool to completion (bounded), its output captured in files beside the PKI.
fn run_tool(dir: &Path, label: &str, program: &str, args: &[&str]) -> (bool, String) {
    let out_path = dir.join(format!("{label}.out"));
    let out = File::create(&out_path).expect("output file");
    let err = out.try_clone().expect("output file");
    let child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} (is it installed?): {e}"));
    let mut guard = ChildGuard(child);
    let status = guard
        .wait_bounded(TOOL_TIMEOUT)
        .unwrap_or_else(|| panic!("{program} {args:?} did not finish in {TOOL_TIMEOUT:?}"));
    (status.success(), std::fs::read_to_string(&out_path).unwrap_or_default())
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
    let output = Command::new(env!("CARGO_BIN_EXE_fastshake"))
        .args(["pki", "--out"])
        .arg(&*dir)
        .args(["--chain-len", "3", "--key", key])
        .output()
        .expect("run fastshake pki");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "fastshake pki failed: {}", String::from_utf8_lossy(&output.stderr));
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

fn free_udp_port() -> u16 {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind loopback");
    socket.local_addr().expect("local addr").port()
}

/// Polls a file until it contains `needle` or the deadline passes.
fn wait_for_text(path: &Path, needle: &str, deadline: Instant) -> bool {
    loop {
        if std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn_logged(dir: &Path, program: &str, label: &str, args: &[&str]) -> (ChildGuard, ChildStdin, PathBuf) {
    let out_path = dir.join(format!("{label}.out"));
    let err_path = dir.join(format!("{label}.err"));
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} (is it installed?): {e}"));
    // Keep stdin open: both tools stop when it closes.
    let stdin = child.stdin.take().expect("stdin");
    (ChildGuard(child), stdin, out_path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
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
    let accept = format!("127.0.0.1:{}", free_udp_port());
    // `-cert` reads only the first certificate of a file; the intermediates go in `-cert_chain`.
    let (mut server, _server_stdin, server_out) = spawn_logged(
        dir,
        "openssl",
        "s_server",
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
    );
    let deadline = Instant::now() + TOOL_TIMEOUT;
    assert!(wait_for_text(&server_out, "ACCEPT", deadline), "s_server did not start: {}", read(&server_out));

    let (client_cert, client_chain, client_key) =
        (format!("{client}.pem"), format!("{client}-intermediates.pem"), format!("{client}.key"));
    let (mut client, mut client_stdin, client_out) = spawn_logged(
        dir,
        "openssl",
        "s_client",
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
    client_stdin.write_all(b"ping from the client\n").expect("write to s_client");
    client_stdin.flush().expect("flush s_client stdin");
    // Until the data arrives or the client gives up (a refused handshake ends it).
    let mut data_arrived = false;
    while Instant::now() < deadline {
        if read(&server_out).contains("ping from the client") {
            data_arrived = true;
            break;
        }
        if matches!(client.0.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(client_stdin); // s_client closes the session on end of input
    let client_exit = client.wait_bounded(TOOL_TIMEOUT);
    let server_stopped = server.wait_bounded(TOOL_TIMEOUT).is_some();
    Session {
        data_arrived,
        client_succeeded: client_exit.is_some_and(|s| s.success()),
        server_stopped,
        client_text: format!("{}{}", read(&client_out), read(&dir.join("s_client.err"))),
        server_text: format!("{}{}", read(&server_out), read(&dir.join("s_server.err"))),
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
    let port = free_udp_port().to_string();
    let (mut server, _server_stdin, server_out) = spawn_logged(
        &dir,
        "gnutls-serv",
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
    );
    let deadline = Instant::now() + TOOL_TIMEOUT;
    // gnutls-serv announces itself on standard error (its standard output is block-buffered).
    let server_err = dir.join("gnutls-serv.err");
    assert!(
        wait_for_text(&server_err, "listening on IPv4", deadline),
        "gnutls-serv did not start: {}",
        read(&server_err)
    );
    let (mut client, mut client_stdin, client_out) = spawn_logged(
        &dir,
        "gnutls-cli",
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
    client_stdin.write_all(b"ping from gnutls-cli\n").expect("write to gnutls-cli");
    client_stdin.flush().expect("flush gnutls-cli stdin");
    // The echo comes back only over an established session.
    let mut echoed = false;
    while Instant::now() < deadline {
        if read(&client_out).contains("ping from gnutls-cli") {
            echoed = true;
            break;
        }
        if matches!(client.0.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(client_stdin);
    let client_exit = client.wait_bounded(TOOL_TIMEOUT);
    server.0.kill().ok(); // gnutls-serv serves until stopped
    let client_text = format!("{}{}", read(&client_out), read(&dir.join("gnutls-cli.err")));
    let context = format!(
        "--- gnutls-cli:\n{client_text}\n--- gnutls-serv:\n{}{}",
        read(&server_out),
        read(&dir.join("gnutls-serv.err"))
    );
    assert!(echoed, "no echo over the DTLS session\n{context}");
    assert!(client_exit.is_some_and(|s| s.success()), "gnutls-cli failed\n{context}");
    assert!(client_text.contains("- Status: The certificate is trusted."), "server chain\n{context}");
    assert!(client_text.contains("Handshake was completed"), "handshake\n{context}");
    assert!(client_text.contains("(DTLS1.2-X.509)"), "protocol\n{context}");
}
