//! Real peer processes for the DTLS tests: `fastshake`, `openssl`, `gnutls-cli`, `gnutls-serv`.
//! Every process is killed and reaped when its guard drops, whatever path the test takes; every
//! wait is bounded so a hung peer fails the test instead of hanging the suite.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, UdpSocket};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long any one expected thing may take before the test fails.
pub const STEP: Duration = Duration::from_secs(10);

pub const PSK_IDENTITY: &str = "interop";
pub const PSK_HEX: &str = "00112233445566778899aabbccddeeff";
pub const WRONG_PSK_HEX: &str = "ffeeddccbbaa99887766554433221100";

pub const CCM8: &str = "TLS_PSK_WITH_AES_128_CCM_8";
/// What a handshake summary line says when neither side resent a flight.
pub const NO_RESEND: &str = "+ 0 resent, 0 resent by the peer";
pub const GCM: &str = "TLS_PSK_WITH_AES_128_GCM_SHA256";

/// OpenSSL's name of a suite.
pub fn openssl_cipher(iana: &str) -> &'static str {
    match iana {
        CCM8 => "PSK-AES128-CCM8",
        GCM => "PSK-AES128-GCM-SHA256",
        other => panic!("no OpenSSL name for {other}"),
    }
}

/// A GnuTLS priority string allowing exactly DTLS 1.2 with PSK and one AEAD (see `gnutls-cli --list --priority ...`).
pub fn gnutls_priority(iana: &str) -> String {
    let cipher = match iana {
        CCM8 => "AES-128-CCM-8",
        GCM => "AES-128-GCM",
        other => panic!("no GnuTLS name for {other}"),
    };
    format!("NORMAL:-VERS-ALL:+VERS-DTLS1.2:-KX-ALL:+PSK:-CIPHER-ALL:+{cipher}:-MAC-ALL:+AEAD")
}

/// A UDP port on 127.0.0.1 that was free a moment ago.
pub fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind an ephemeral UDP port");
    socket.local_addr().expect("local address").port()
}

/// `fastshake` as built for this test run.
pub fn fastshake() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fastshake"))
}

/// A command that must exist on the machine (CI installs openssl and gnutls-bin).
pub fn tool(name: &str) -> Command {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(found, "{name} is not installed (apt-get install openssl gnutls-bin)");
    Command::new(name)
}

/// A running process with its standard input open and its output captured as it comes.
pub struct Peer {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

fn capture(mut from: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let sink = Arc::new(Mutex::new(Vec::new()));
    let writer = Arc::clone(&sink);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            writer.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    sink
}

impl Peer {
    pub fn spawn(name: &str, mut command: Command) -> Peer {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdin = child.stdin.take();
        let stdout = capture(child.stdout.take().expect("stdout pipe"));
        let stderr = capture(child.stderr.take().expect("stderr pipe"));
        Peer { name: name.to_owned(), child, stdin, stdout, stderr }
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// What the test saw, for failure messages.
    pub fn transcript(&self) -> String {
        format!("--- {} stdout:\n{}\n--- {} stderr:\n{}", self.name, self.stdout(), self.name, self.stderr())
    }

    pub fn write_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap_or_else(|| panic!("{} stdin already closed", self.name));
        stdin.write_all(format!("{line}\n").as_bytes()).expect("write to the peer's stdin");
        stdin.flush().expect("flush the peer's stdin");
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait_for(&self, what: &str, seen: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + STEP;
        while Instant::now() < deadline {
            if seen(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{} never showed {what:?} within {STEP:?}\n{}", self.name, self.transcript());
    }

    /// Sends SIGTERM (a polite stop) to this process.
    pub fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        assert!(status.map(|s| s.success()).unwrap_or(false), "cannot signal {}", self.name);
    }

    /// Waits until standard output contains `text`; fails the test after [`STEP`].
    pub fn expect_stdout(&self, text: &str) {
        self.wait_for(text, |p| p.stdout().contains(text));
    }

    /// Waits until standard error contains `text`; fails the test after [`STEP`].
    pub fn expect_stderr(&self, text: &str) {
        self.wait_for(text, |p| p.stderr().contains(text));
    }

    /// Waits until one line of standard error contains every one of `parts`.
    pub fn expect_stderr_line_with(&self, parts: &[&str]) {
        let what = parts.join(" ... ");
        self.wait_for(&what, |p| p.stderr().lines().any(|line| parts.iter().all(|part| line.contains(part))));
    }

    /// Waits until one line of standard error is a handshake summary (`handshake done`)
    /// containing every one of `parts`, and checks from it that no flight was resent on either
    /// side: over loopback a resent flight means one side waited for a retransmission timer, a
    /// stall, which a passing interop test must not hide. Returns the line.
    pub fn expect_handshake_without_resend(&self, parts: &[&str]) -> String {
        let mut all = vec!["handshake done"];
        all.extend_from_slice(parts);
        self.expect_stderr_line_with(&all);
        let stderr = self.stderr();
        let line = stderr.lines().find(|l| all.iter().all(|p| l.contains(p))).unwrap_or_default().to_owned();
        assert!(line.contains(NO_RESEND), "a flight was resent, a stall: {line}\n{}", self.transcript());
        line
    }

    /// Every handshake summary this fastshake process printed so far shows no resent flight.
    pub fn assert_no_resend_in_any_handshake(&self) {
        let stderr = self.stderr();
        let summaries: Vec<&str> = stderr.lines().filter(|l| l.contains("handshake done")).collect();
        assert!(!summaries.is_empty(), "no handshake summary\n{}", self.transcript());
        for line in summaries {
            assert!(line.contains(NO_RESEND), "a flight was resent, a stall: {line}\n{}", self.transcript());
        }
    }

    /// Waits for the process to end; fails the test after [`STEP`] (the guard then kills it).
    pub fn expect_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + STEP;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("poll the child") {
                // Let the capture threads take the last bytes.
                std::thread::sleep(Duration::from_millis(50));
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{} did not exit within {STEP:?}\n{}", self.name, self.transcript());
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `openssl s_server` with a PSK and no certificate on a free port, ready to accept; returns it
/// and its port. A port taken between the probe and the bind is retried with another.
pub fn openssl_s_server(iana: &str, psk_hex: &str) -> (Peer, u16) {
    start_on_free_port(
        "openssl s_server",
        |port| {
            let mut command = tool("openssl");
            command
                .args(["s_server", "-dtls1_2", "-nocert", "-psk", psk_hex, "-psk_identity", PSK_IDENTITY])
                .args(["-cipher", openssl_cipher(iana), "-accept", &format!("127.0.0.1:{port}")]);
            command
        },
        |peer| peer.stdout().contains("ACCEPT"),
    )
}

/// Starts `make(port)` on a probed free port until `ready` holds (at most three ports).
pub fn start_on_free_port(
    name: &str,
    make: impl Fn(u16) -> Command,
    ready: impl Fn(&Peer) -> bool,
) -> (Peer, u16) {
    for _ in 0..3 {
        let port = free_udp_port();
        let mut peer = Peer::spawn(name, make(port));
        let deadline = Instant::now() + STEP;
        while Instant::now() < deadline {
            if ready(&peer) {
                return (peer, port);
            }
            if peer.child.try_wait().ok().flatten().is_some() {
                break; // exited: most likely the port was taken meanwhile
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{name} did not start on port {port}\n{}", peer.transcript());
        peer.close_stdin();
    }
    panic!("{name} could not be started");
}

/// `fastshake server` on 127.0.0.1 with a port of the kernel's choice (so no other process can
/// take it first), ready to accept; returns the server and its port.
pub fn fastshake_server(extra: &[&str]) -> (Peer, u16) {
    let mut args = vec!["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    args.extend_from_slice(extra);
    fastshake_server_with(&args)
}

/// `fastshake server --listen 127.0.0.1:0 ARGS` (credentials all in `args`), ready to accept;
/// returns the server and its port.
pub fn fastshake_server_with(args: &[&str]) -> (Peer, u16) {
    let mut command = fastshake();
    command.args(["server", "--listen", "127.0.0.1:0"]).args(args);
    let peer = Peer::spawn("fastshake server", command);
    peer.expect_stderr("listening on 127.0.0.1:");
    let port = peer
        .stderr()
        .split("listening on 127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no port in the server's banner\n{}", peer.transcript()));
    (peer, port)
}

/// `fastshake client` towards 127.0.0.1:`port`.
pub fn fastshake_client(port: u16, psk_hex: &str, extra: &[&str]) -> Peer {
    let mut command = fastshake();
    command
        .args(["client", "--connect", &format!("127.0.0.1:{port}"), "--psk-identity", PSK_IDENTITY])
        .args(["--psk", psk_hex, "--linger", "300"])
        .args(extra);
    Peer::spawn("fastshake client", command)
}

/// `fastshake client --connect 127.0.0.1:PORT ARGS` (credentials all in `args`).
pub fn fastshake_client_with(port: u16, args: &[&str]) -> Peer {
    let mut command = fastshake();
    command.args(["client", "--connect", &format!("127.0.0.1:{port}"), "--linger", "300"]).args(args);
    Peer::spawn("fastshake client", command)
}
