//! Child processes for the SCTP tests: killed and reaped on every path, output collected on
//! threads, waits bounded by timeouts so a hung peer fails the test instead of hanging it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// The `fastshake` binary under test.
pub fn fastshake() -> &'static str {
    env!("CARGO_BIN_EXE_fastshake")
}

/// A UDP port free on loopback at the time of the call.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()).expect("binding an ephemeral port").port()
}

/// Text a stream produced so far, shared with the thread that reads it.
#[derive(Clone, Default)]
pub struct Captured(Arc<(Mutex<Vec<u8>>, Condvar)>);

impl Captured {
    fn spawn_reader<R: Read + Send + 'static>(mut source: R) -> Captured {
        let captured = Captured::default();
        let sink = captured.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match source.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let (lock, cv) = &*sink.0;
                        lock.lock().expect("capture lock").extend_from_slice(&buf[..n]);
                        cv.notify_all();
                    }
                }
            }
        });
        captured
    }

    /// Everything read so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.0 .0.lock().expect("capture lock").clone()
    }

    /// Everything read so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// Waits until the output contains `needle`; false after `timeout`.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.0;
        let mut data = lock.lock().expect("capture lock");
        loop {
            if String::from_utf8_lossy(&data).contains(needle) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            data = cv.wait_timeout(data, deadline - now).expect("capture lock").0;
        }
    }
}

/// A running child whose stdout and stderr are captured; killed on drop.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    pub stdout: Captured,
    pub stderr: Captured,
}

impl Proc {
    pub fn spawn(program: impl AsRef<Path>, args: &[String]) -> Proc {
        let program = program.as_ref();
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let stdout = Captured::spawn_reader(child.stdout.take().expect("piped stdout"));
        let stderr = Captured::spawn_reader(child.stderr.take().expect("piped stderr"));
        let stdin = child.stdin.take();
        Proc { name: program.display().to_string(), child, stdin, stdout, stderr }
    }

    /// Writes to the child's standard input.
    pub fn write_stdin(&mut self, data: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(data).expect("writing to child stdin");
        stdin.flush().expect("flushing child stdin");
    }

    /// Closes the child's standard input (end of file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the child to exit; `None` (and the child is killed) after `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the reader threads a moment to drain the pipes.
                thread::sleep(Duration::from_millis(50));
                return Some(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Both outputs, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "--- {} stdout ---\n{}\n--- {} stderr ---\n{}",
            self.name,
            self.stdout.text(),
            self.name,
            self.stderr.text()
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lines of `text` containing `needle`.
pub fn count_lines(text: &str, needle: &str) -> usize {
    BufReader::new(text.as_bytes()).lines().map_while(Result::ok).filter(|l| l.contains(needle)).count()
}

/// A datagram the relay passed on: (from the client, payload).
pub type Datagram = (bool, Vec<u8>);

/// A UDP relay on loopback between one client and one server that records what passes, so a
/// test can look at the packets on the wire. Stops when dropped.
pub struct Relay {
    /// The relay's own port: the client connects here.
    pub port: u16,
    /// The server's port, chosen free while the relay's port is held, so the two never clash.
    pub server_port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    log: Arc<Mutex<Vec<Datagram>>>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Relay {
    /// Relays between whoever sends first (the client) and the server that is to listen on
    /// `server_port` on 127.0.0.1.
    pub fn start() -> Relay {
        Relay::start_lossy(0)
    }

    /// Like [`Relay::start`], but drops every `drop_every`-th datagram (0: none), in either
    /// direction: a deterministic lossy path.
    pub fn start_lossy(drop_every: usize) -> Relay {
        use std::sync::atomic::{AtomicBool, Ordering};
        let socket = UdpSocket::bind("127.0.0.1:0").expect("binding the relay");
        socket.set_read_timeout(Some(Duration::from_millis(20))).expect("read timeout");
        let port = socket.local_addr().expect("relay address").port();
        let server_port = free_udp_port();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let handle = {
            let (stop, log) = (stop.clone(), log.clone());
            thread::spawn(move || {
                let server = std::net::SocketAddr::from(([127, 0, 0, 1], server_port));
                let mut client = None;
                let mut buf = [0u8; 65536];
                let mut seen = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                    // usrsctp answers from an IPv6 socket: compare ports and loopback-ness only.
                    let from_server = from.port() == server_port;
                    let to = if from_server {
                        match client {
                            Some(c) => c,
                            None => continue,
                        }
                    } else {
                        client = Some(from);
                        server
                    };
                    seen += 1;
                    if drop_every > 0 && seen.is_multiple_of(drop_every) {
                        continue;
                    }
                    log.lock().expect("relay log").push((!from_server, buf[..n].to_vec()));
                    let _ = socket.send_to(&buf[..n], to);
                }
            })
        };
        Relay { port, server_port, stop, log, handle: Some(handle) }
    }

    /// Datagrams seen so far: (from the client, payload).
    pub fn datagrams(&self) -> Vec<Datagram> {
        self.log.lock().expect("relay log").clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// What an association of `fastshake sctp` sent again, from its "resent:" summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resent {
    /// INIT and COOKIE-ECHO sent again (T1).
    pub handshake: u64,
    /// DATA chunks sent again (T3-rtx, fast retransmit, zero-RTT data the peer did not take).
    pub data: u64,
    /// SHUTDOWN and SHUTDOWN-ACK sent again (T2).
    pub shutdown: u64,
    /// T3-rtx expiries.
    pub t3: u64,
    /// Fast retransmits.
    pub fast: u64,
}

/// Reads "PREFIX resent: A INIT/COOKIE-ECHO, B DATA chunk(s), C SHUTDOWN/SHUTDOWN-ACK; D T3-rtx
/// expiries, E fast retransmits" from `stderr`.
pub fn resent(stderr: &str, prefix: &str) -> Resent {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(prefix) && l.contains("resent:"))
        .unwrap_or_else(|| panic!("no {prefix:?} resent line in\n{stderr}"));
    let numbers: Vec<u64> = line
        .split_once("resent:")
        .map(|(_, rest)| rest.split_whitespace().filter_map(|w| w.parse().ok()).collect())
        .unwrap_or_default();
    let [handshake, data, shutdown, t3, fast] = numbers[..] else {
        panic!("cannot read the resent counts in {line:?}");
    };
    Resent { handshake, data, shutdown, t3, fast }
}

/// `pion-sctp-peer` (interop/pion-sctp), an SCTP peer on pion/sctp built once per test binary
/// with the Go toolchain; `None` (the tests pass without running) when Go or the module is not
/// available, unless `FASTSHAKE_REQUIRE_PION_SCTP=1` (set by `.ci/run` where both are) makes that a
/// failure.
pub fn pion_sctp_peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_pion_sctp_peer) {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            let required = std::env::var("FASTSHAKE_REQUIRE_PION_SCTP").is_ok_and(|v| v == "1");
            assert!(!required, "FASTSHAKE_REQUIRE_PION_SCTP=1 but pion-sctp-peer is not available: {why}");
            eprintln!("skipped: pion-sctp-peer is not available: {why}");
            None
        }
    }
}

fn build_pion_sctp_peer() -> Result<PathBuf, String> {
    let on_path = Command::new("go").arg("version").output().is_ok_and(|out| out.status.success());
    let go = if on_path {
        PathBuf::from("go")
    } else {
        let tarball = Path::new("/usr/local/go/bin/go");
        if !tarball.exists() {
            return Err("no `go` on the PATH nor at /usr/local/go/bin/go".into());
        }
        tarball.to_path_buf()
    };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/pion-sctp");
    let go_command = || {
        let mut command = Command::new(&go);
        // go.sum is committed: modules are checked against it; no VCS stamping (worktrees).
        command.current_dir(&source).env("GOFLAGS", "-mod=mod -buildvcs=false");
        command
    };
    // A download failure (no module proxy) is a reason to skip; a compile failure is a bug.
    let download = go_command()
        .args(["mod", "download"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", go.display()))?;
    if !download.status.success() {
        return Err(format!("go mod download failed: {}", String::from_utf8_lossy(&download.stderr)));
    }
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pion-sctp-peer");
    let built = go_command()
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", go.display()))?;
    assert!(
        built.status.success(),
        "go build of interop/pion-sctp failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    Ok(binary)
}

/// The chunk counts of one direction from pion-sctp-peer's "wire out: INIT 1, ..., DATA resent 0,
/// ..." (or "wire in: ...") line.
pub fn pion_wire(stderr: &str, direction: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{direction}: ");
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {direction:?} line from pion-sctp-peer in\n{stderr}"));
    line.split(", ")
        .filter_map(|part| {
            let (name, count) = part.rsplit_once(' ')?;
            Some((name.to_string(), count.parse().ok()?))
        })
        .collect()
}
