//! Real peers for the command-line tests: `fastshake` itself, OpenSSL, GnuTLS, the usrsctp
//! examples and the pion and wolfSSL peers of `interop/`. Every process runs under a [`Peer`]
//! guard that kills and reaps it when dropped, whatever path the test takes; every wait is bounded, so a
//! hung peer fails its test instead of hanging the suite.
//!
//! The `fastshake` binary is known only to the tests of its own package
//! (`env!("CARGO_BIN_EXE_fastshake")`), so they name it once per test file:
//!
//! ```no_run
//! use fastshake_testkit::peers::{dtls::PSK_HEX, Fastshake};
//! const FASTSHAKE: Fastshake = Fastshake("/path/of/target/debug/fastshake");
//!
//! let (server, port) = FASTSHAKE.server(&["--echo"]);
//! let mut client = FASTSHAKE.client(port, PSK_HEX, &[]);
//! client.write_line("hello");
//! client.expect_stdout("hello");
//! ```

pub mod boringssl;
pub mod dtls;
pub mod lab;
pub mod pion;
pub mod sctp;
pub mod wolfssl;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long any one expected thing may take before the test fails.
pub const STEP: Duration = Duration::from_secs(10);

/// The `fastshake` binary under test: `Fastshake(env!("CARGO_BIN_EXE_fastshake"))`.
#[derive(Clone, Copy, Debug)]
pub struct Fastshake(pub &'static str);

impl Fastshake {
    pub fn path(self) -> &'static str {
        self.0
    }

    /// `fastshake` with no arguments yet.
    pub fn command(self) -> Command {
        Command::new(self.0)
    }

    /// `fastshake server --listen 127.0.0.1:0 --psk-identity x --psk 00 EXTRA`, not started: a
    /// server with the least it needs, for the flags it must refuse.
    pub fn psk_server_command(self, extra: &[&str]) -> Command {
        let mut command = self.command();
        command.args(["server", "--listen", "127.0.0.1:0", "--psk-identity", "x", "--psk", "00"]).args(extra);
        command
    }

    /// `fastshake ARGS`, running, its output captured.
    pub fn spawn(self, args: &[impl AsRef<OsStr>]) -> Peer {
        let mut command = self.command();
        command.args(args);
        Peer::spawn("fastshake", command)
    }
}

/// A line from `client` ("hello from fastshake") and one back from `server` ("hello from
/// `server_name`"), each seen on the other side's standard output.
pub fn hello_both_ways(client: &mut Peer, server: &mut Peer, server_name: &str) {
    client.write_line("hello from fastshake");
    server.expect_stdout("hello from fastshake");
    let answer = format!("hello from {server_name}");
    server.write_line(&answer);
    client.expect_stdout(&answer);
}

/// A UDP port on 127.0.0.1 that was free a moment ago, for a server the test starts next.
///
/// Chosen at random below the kernel's ephemeral range: a port the kernel hands out for port 0
/// could be given, between this check and the server's bind, to a client socket of a test
/// running beside this one, and the server would rightly refuse the taken address. Unique within
/// this process and, through a file lock, among test processes running at once on the machine.
pub fn free_udp_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_start.max(10_001));
    for _ in 0..1000 {
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let port = low + (random % u64::from(high - low)) as u16;
        // Never the same port twice in one test process: two tests that drew it at once would
        // both find it free before either server binds it.
        static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !handed_out.contains(&port)
            && UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
            && claim_across_processes(port)
        {
            handed_out.insert(port);
            return port;
        }
    }
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind an ephemeral UDP port");
    socket.local_addr().expect("local address").port()
}

/// Whether no other test process on this machine holds `port`: each claim is a lock on a file
/// named after the port, held until this process exits (the kernel drops it even on a crash), so
/// two test runs side by side never draw the same port between the check and the server's bind.
fn claim_across_processes(port: u16) -> bool {
    static CLAIMS: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join("fastshake-test-ports");
    let file = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(port.to_string()))
    });
    let Ok(file) = file else {
        // No shared directory to coordinate in: the bind check alone has to do.
        return true;
    };
    if file.try_lock().is_err() {
        return false;
    }
    CLAIMS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(file);
    true
}

/// A command that must exist on the machine (`.ci/run` installs the Debian packages).
pub fn tool(name: &str) -> Command {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{name} is not installed (apt-get install openssl gnutls-bin libusrsctp-examples)");
    Command::new(name)
}

/// A directory for the files tests make (builds, PKIs), inside the target directory beside the
/// test executables, so concurrent checkouts never share it.
pub fn scratch_dir() -> PathBuf {
    fastshake_interop::build_dir()
}

/// Why the network-namespace testbed (`fastshake netlab`) cannot run here, if it cannot: it needs
/// root, network namespaces, and a TUN device for its delay relay.
pub fn netlab_unavailable() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().map(|out| out.stdout).unwrap_or_default();
    if String::from_utf8_lossy(&uid).trim() != "0" {
        return Some("not root: the testbed needs ip netns, veth, nftables and a TUN device".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun for the delay relay".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("no network namespaces: {}", String::from_utf8_lossy(&out.stderr).trim())),
        Err(e) => Some(format!("no `ip` command: {e}")),
    }
}

/// Text a stream of a process produced so far, read on a thread of its own.
#[derive(Clone, Default)]
pub struct Output(Arc<(Mutex<Vec<u8>>, Condvar)>);

impl Output {
    fn read_from(mut source: impl Read + Send + 'static) -> Output {
        let output = Output::default();
        let sink = output.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = source.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let (lock, cv) = &*sink.0;
                lock.lock().expect("output lock").extend_from_slice(&buf[..n]);
                cv.notify_all();
            }
        });
        output
    }

    /// Everything read so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.0 .0.lock().expect("output lock").clone()
    }

    /// Everything read so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// Waits until the text contains `needle`; false after `timeout`.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_until(timeout, |text| text.contains(needle))
    }

    /// Waits until `seen` holds for the text; false after `timeout`.
    pub fn wait_until(&self, timeout: Duration, seen: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.0;
        let mut data = lock.lock().expect("output lock");
        loop {
            if seen(&String::from_utf8_lossy(&data)) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            data = cv.wait_timeout(data, deadline - now).expect("output lock").0;
        }
    }
}

/// A running process with its standard input open and its output captured as it comes;
/// killed and reaped when dropped.
pub struct Peer {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    pub stdout: Output,
    pub stderr: Output,
}

impl Peer {
    /// Starts `command` (its standard streams are taken over); `name` is for messages.
    pub fn spawn(name: &str, mut command: Command) -> Peer {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdin = child.stdin.take();
        let stdout = Output::read_from(child.stdout.take().expect("stdout pipe"));
        let stderr = Output::read_from(child.stderr.take().expect("stderr pipe"));
        Peer { name: name.to_owned(), child, stdin, stdout, stderr }
    }

    /// Starts `program ARGS`, named after the program.
    pub fn start(program: impl AsRef<Path>, args: &[impl AsRef<OsStr>]) -> Peer {
        let program = program.as_ref();
        let mut command = Command::new(program);
        command.args(args);
        Peer::spawn(&program.display().to_string(), command)
    }

    /// The process id (to read its CPU time and memory from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Both outputs so far, for failure messages.
    /// Every "handshake done:" line the peer printed on standard error so far (fastshake's
    /// summaries and the interop peers' alike), in order.
    pub fn handshake_lines(&self) -> Vec<String> {
        self.stderr.text().lines().filter(|l| l.contains("handshake done:")).map(str::to_owned).collect()
    }

    pub fn transcript(&self) -> String {
        let name = &self.name;
        format!("--- {name} stdout:\n{}\n--- {name} stderr:\n{}", self.stdout.text(), self.stderr.text())
    }

    pub fn write(&mut self, data: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap_or_else(|| panic!("{} stdin already closed", self.name));
        stdin.write_all(data).expect("write to the peer's stdin");
        stdin.flush().expect("flush the peer's stdin");
    }

    pub fn write_line(&mut self, line: &str) {
        self.write(format!("{line}\n").as_bytes());
    }

    /// Closes the process's standard input (end of file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Whether the process has ended.
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    /// Sends SIGTERM (a polite stop).
    pub fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        assert!(status.is_ok_and(|s| s.success()), "cannot signal {}", self.name);
    }

    /// Waits until standard output contains `text`; fails the test after [`STEP`].
    pub fn expect_stdout(&self, text: &str) {
        if !self.stdout.wait_for(text, STEP) {
            panic!("{} never printed {text:?} within {STEP:?}\n{}", self.name, self.transcript());
        }
    }

    /// Waits until standard error contains `text`; fails the test after [`STEP`].
    pub fn expect_stderr(&self, text: &str) {
        if !self.stderr.wait_for(text, STEP) {
            panic!("{} never printed {text:?} within {STEP:?}\n{}", self.name, self.transcript());
        }
    }

    /// Waits until one line of standard error contains every one of `parts`; returns it.
    /// Only whole lines count: a line still being written may lack what follows `parts`.
    pub fn expect_stderr_line_with(&self, parts: &[&str]) -> String {
        let matches = |line: &&str| parts.iter().all(|part| line.contains(part));
        let found = |text: &str| whole_lines(text).find(matches).map(str::to_owned);
        if !self.stderr.wait_until(STEP, |text| found(text).is_some()) {
            let what = parts.join(" ... ");
            panic!("{} never printed {what:?} within {STEP:?}\n{}", self.name, self.transcript());
        }
        found(&self.stderr.text()).unwrap_or_default()
    }

    /// Waits for the process to end; `None` after `timeout`, and the process is killed.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the reading threads take the last bytes.
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

    /// Waits for the process to end; fails the test after [`STEP`].
    pub fn expect_exit(&mut self) -> ExitStatus {
        match self.wait_timeout(STEP) {
            Some(status) => status,
            None => panic!("{} did not exit within {STEP:?}\n{}", self.name, self.transcript()),
        }
    }

    /// Writes `line` and waits until standard output shows it (anywhere).
    pub fn write_and_see(&mut self, line: &str) {
        self.write_line(line);
        self.expect_stdout(line);
    }

    /// Writes `line` and waits for it to come back on standard output (an echo).
    pub fn echo_line(&mut self, line: &str) {
        self.write_line(line);
        self.expect_stdout(&format!("{line}\n"));
    }

    /// Writes `line`, waits until standard output shows it, then closes standard input and
    /// waits for the exit, whatever its status: for the real peers' clients, whose exit status
    /// the tests do not judge.
    pub fn echo_and_close(&mut self, line: &str) -> ExitStatus {
        self.write_and_see(line);
        self.close_stdin();
        self.expect_exit()
    }

    /// Closes standard input and checks that the process then exits successfully; a failure
    /// shows its transcript and those of `others` (the peers it talked to).
    pub fn finish(&mut self, others: &[&Peer]) {
        self.close_stdin();
        let status = self.expect_exit();
        if !status.success() {
            let others: Vec<String> = others.iter().map(|peer| peer.transcript()).collect();
            panic!("{} failed: {status}\n{}\n{}", self.name, self.transcript(), others.join("\n"));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a process that ran to its end left behind.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Finished {
    /// Standard output and standard error, one after the other, as text.
    pub fn text(&self) -> String {
        format!("{}{}", String::from_utf8_lossy(&self.stdout), self.stderr)
    }
}

/// Runs `command` to its end with no input; fails the test when it takes longer than `timeout`
/// (the process is then killed).
pub fn run(name: &str, command: Command, timeout: Duration) -> Finished {
    let mut peer = Peer::spawn(name, command);
    peer.close_stdin();
    match peer.wait_timeout(timeout) {
        Some(status) => Finished { status, stdout: peer.stdout.bytes(), stderr: peer.stderr.text() },
        None => panic!("{name} did not finish within {timeout:?}\n{}", peer.transcript()),
    }
}

/// Starts `make(port)` on a probed free port until `ready` holds (at most three ports): a port
/// taken between the probe and the bind is retried with another.
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
            if peer.exited() {
                break; // most likely the port was taken meanwhile
            }
            thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{name} did not start on port {port}\n{}", peer.transcript());
    }
    panic!("{name} could not be started");
}

/// The port a process printed after `banner` (e.g. "listening on 127.0.0.1:") on stderr,
/// waiting at most [`STEP`] for the whole number (a line may arrive in pieces).
pub fn announced_port(peer: &Peer, banner: &str) -> u16 {
    let port = |text: &str| -> Option<u16> {
        let rest = text.split(banner).nth(1)?;
        let end = rest.find(|c: char| !c.is_ascii_digit())?;
        rest[..end].parse().ok()
    };
    if !peer.stderr.wait_until(STEP, |text| port(text).is_some()) {
        panic!("no port after {banner:?} within {STEP:?}\n{}", peer.transcript());
    }
    port(&peer.stderr.text()).expect("the port seen above")
}

/// The lines of `text` that have ended (the last one, without its newline yet, is left out).
fn whole_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n').filter_map(|line| line.strip_suffix('\n'))
}
