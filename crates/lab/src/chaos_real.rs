//! E6 on real sockets: the chaos soak through the testbed's delay relay.
//!
//! The claim (E6, ours: no paper measured it): every handshake completes, every application record arrives
//! exactly once, and the server's memory stays flat once its clients are gone, over a path that
//! delays, loses, duplicates and reorders datagrams.
//!
//! `fastshake lab chaos-real` (or `fastshake netlab chaos`, with every knob) builds the testbed of
//! `fastshake_netlab::testbed` (client with two interfaces and a second address on the first, router
//! with the userspace relay, server) and runs there:
//! - in the server namespace the product binary, `fastshake server --echo --mobility cid`, with a
//!   PSK and an ECDSA chain of three from `fastshake pki` on one port, so PSK (CCM_8, GCM) and
//!   ECDHE-ECDSA (CCM_8, GCM) clients share it, and a short `--idle-timeout` so that sessions
//!   whose close_notify the relay lost end soon;
//! - in the client namespace one load process, `fastshake netlab chaos-peer` (see its `peer` module): many
//!   concurrent clients on the real-socket DTLS driver, each handshaking (some resuming the
//!   session of the one before, by ticket or by session ID), sending numbered records and
//!   checking their echoes, some moving to another address mid-session, then closing.
//!
//! The load comes in waves, each followed by a pause longer than the idle timeout (10 s by
//! default); the server's
//! resident memory (VmRSS, /proc/PID/status) is sampled during each wave and read after each
//! pause. The first wave warms the server up (allocator arenas, buffers, the first entries of its
//! session cache); what it holds after that pause is the baseline, and the end is compared with it.
//!
//! Figures: handshakes completed and failed by kind, flights resent per handshake (from the
//! clients' summaries and from the server's summary lines), handshake time p50/p95/p99 (wall
//! clock from the first ClientHello to completion), records sent, echoed, delivered twice and
//! lost after every resend, moved clients that kept their session, the relay's counters and the
//! server's memory.

use crate::runner::{check_interrupt, watch_for_interrupts, LineProcess};
use anyhow::{bail, Context};
use fastshake_netlab::relay::RelayCounters;
use fastshake_netlab::testbed::{ClientIface, Host, Testbed, TestbedConfig, TestbedError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod peer;

pub use peer::{run_peer, PeerOptions};

/// What a soak row says of its handshakes and records, in the terminal table and the report's.
pub const DELIVERY_COLUMNS: [&str; 8] =
    ["failed", "resent/hs", "p50 ms", "p95 ms", "p99 ms", "records", "echoed", "twice"];

const SERVER_PORT: u16 = 5684;
const PSK_IDENTITY: &str = "chaos-soak";
const PSK_HEX: &str = "6368616f732d736f616b2d6b65792d31";
/// The name the soak's server certificate carries (and the clients check).
const SERVER_NAME: &str = "chaos.fastshake.test";
/// The second address of the client's eth0: moving clients go there or to eth1.
const SECOND_ETH0_ADDRESS: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 3);
/// How long a process may take to start and say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the running clients may take to finish after a wave's time is up: a handshake
/// gives up after 60 s (the engine's default), a record after its last attempt.
const WAVE_DRAIN_BOUND: Duration = Duration::from_secs(240);
/// How long the server may take to exit after SIGTERM.
const SERVER_EXIT_GRACE: Duration = Duration::from_secs(5);
/// How often the server's memory is read during a wave.
const RSS_SAMPLE_PERIOD: Duration = Duration::from_millis(250);
/// Failures kept word for word in the report.
const FAILURE_SAMPLES: usize = 20;

pub const DEFAULT_DURATION_S: u64 = 60;
pub const DEFAULT_CLIENTS: u32 = 50;
pub const DEFAULT_LOSS: f64 = 0.05;
pub const DEFAULT_DUPLICATE: f64 = 0.05;
pub const DEFAULT_DELAY_MS: u64 = 30;
pub const DEFAULT_WAVES: u32 = 4;
pub const DEFAULT_RECORDS: u32 = 20;
pub const DEFAULT_WINDOW: u32 = 4;
pub const DEFAULT_GIVE_UP_S: f64 = 65.0;
pub const DEFAULT_MOVE_EVERY: u32 = 4;
pub const DEFAULT_RESUME_EVERY: u32 = 3;
pub const DEFAULT_REORDER: f64 = 0.02;
pub const DEFAULT_REORDER_DELAY_MS: u64 = 20;
pub const DEFAULT_IDLE_TIMEOUT_S: f64 = 10.0;
pub const DEFAULT_SEED: u64 = 1;

/// `fastshake lab chaos-real`; [`Default`]: the `DEFAULT_*` constants.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Seconds of load in all (clients start during that time, in waves; the pauses between the
    /// waves come on top).
    pub duration: u64,
    /// Clients at once (each slot runs one client after another).
    pub clients: u32,
    /// Probability that the relay drops a datagram (each way).
    pub loss: f64,
    /// Probability that the relay sends a datagram twice.
    pub duplicate: f64,
    /// One-way delay of the relay, ms (client to server and back: twice).
    pub delay_ms: u64,
    /// Print the report as JSON.
    pub json: bool,
}

/// `fastshake netlab chaos`: the soak with every knob; [`Default`]: the `DEFAULT_*` constants.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// What `fastshake lab chaos-real` takes too.
    pub main: RunOptions,
    /// Waves of load; the first warms the server up, and its memory after the pause is the baseline.
    pub waves: u32,
    /// Records each client sends (and gets back) before it closes.
    pub records: u32,
    /// Records outstanding at once per client.
    pub window: u32,
    /// A record unanswered this long is sent again as a new attempt, and then after twice and
    /// four times as long; default: 8 delays + 200 ms.
    pub request_timeout_ms: Option<u64>,
    /// A record unanswered this long after its first transmission counts as lost, s. Longer than
    /// the handshake timeout (60 s): in an abbreviated handshake whose client Finished is lost the
    /// client already sends records, which wait for the server's retransmission timer (1, 2, 4,
    /// 8, 16 s ... after it), so a few losses in a row hold them up for tens of seconds.
    pub give_up_s: f64,
    /// One client in this many moves to another address halfway (0: none).
    pub move_every: u32,
    /// Every this many-th client of a slot resumes the session of the one before (0: none).
    pub resume_every: u32,
    /// Probability that the relay holds a datagram back by --reorder-delay-ms more.
    pub reorder: f64,
    /// The extra delay of a reordered datagram, ms.
    pub reorder_delay_ms: u64,
    /// How long after the original the relay's copy leaves, ms (0: right behind it).
    pub duplicate_delay_ms: u64,
    /// The server's --idle-timeout, s. Sessions whose close_notify was lost end then; a
    /// handshake in progress, or one whose last flight the client has not confirmed, is not idle
    /// and stays until the handshake timeout, however short this is.
    pub idle_timeout_s: f64,
    /// Pause after each wave before the server's memory is read, s; default: the idle timeout + 2 s.
    pub pause_s: Option<f64>,
    /// Seed of the relay's loss, duplication and reordering.
    pub seed: u64,
    /// Growth of the server's memory from the baseline to the end that still counts as flat, KiB;
    /// default: see the report's memory section.
    pub rss_tolerance_kib: Option<u64>,
    /// Write the server's standard error (its summary lines) to this file.
    pub server_log: Option<PathBuf>,
    /// Run the server with -v (every datagram in --server-log, each line stamped with the Unix time).
    pub server_verbose: bool,
    /// Trace every client's datagrams and print the trace of each client that failed, lost a
    /// record or saw one twice (standard error).
    pub trace_failures: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: DEFAULT_DURATION_S,
            clients: DEFAULT_CLIENTS,
            loss: DEFAULT_LOSS,
            duplicate: DEFAULT_DUPLICATE,
            delay_ms: DEFAULT_DELAY_MS,
            json: false,
        }
    }
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs::from_main(RunOptions::default())
    }
}

impl Knobs {
    /// `main` with every other knob at its default.
    pub fn from_main(main: RunOptions) -> Knobs {
        Knobs {
            main,
            waves: DEFAULT_WAVES,
            records: DEFAULT_RECORDS,
            window: DEFAULT_WINDOW,
            request_timeout_ms: None,
            give_up_s: DEFAULT_GIVE_UP_S,
            move_every: DEFAULT_MOVE_EVERY,
            resume_every: DEFAULT_RESUME_EVERY,
            reorder: DEFAULT_REORDER,
            reorder_delay_ms: DEFAULT_REORDER_DELAY_MS,
            duplicate_delay_ms: 0,
            idle_timeout_s: DEFAULT_IDLE_TIMEOUT_S,
            pause_s: None,
            seed: DEFAULT_SEED,
            rss_tolerance_kib: None,
            server_log: None,
            server_verbose: false,
            trace_failures: false,
        }
    }
}

/// Everything a run needs, checked.
#[derive(Clone, Debug, Serialize)]
struct Plan {
    duration_s: u64,
    clients: u32,
    loss: f64,
    duplicate: f64,
    duplicate_delay_ms: u64,
    reorder: f64,
    reorder_delay_ms: u64,
    delay_ms: u64,
    waves: u32,
    wave_s: f64,
    records: u32,
    window: u32,
    request_timeout_ms: u64,
    give_up_s: f64,
    move_every: u32,
    resume_every: u32,
    idle_timeout_s: f64,
    pause_s: f64,
    seed: u64,
    #[serde(skip)]
    json: bool,
    #[serde(skip)]
    rss_tolerance_kib: Option<u64>,
    #[serde(skip)]
    server_log: Option<PathBuf>,
    #[serde(skip)]
    server_verbose: bool,
    #[serde(skip)]
    trace_failures: bool,
}

fn plan(knobs: Knobs) -> anyhow::Result<Plan> {
    let main = knobs.main;
    for (name, p) in [("--loss", main.loss), ("--duplicate", main.duplicate), ("--reorder", knobs.reorder)] {
        anyhow::ensure!((0.0..1.0).contains(&p), "{name} {p} is outside [0, 1)");
    }
    anyhow::ensure!(main.duration >= 1, "--duration must be at least 1 s");
    anyhow::ensure!(main.clients >= 1, "--clients must be at least 1");
    anyhow::ensure!(knobs.waves >= 2, "--waves must be at least 2: a warm-up and one to compare with it");
    anyhow::ensure!(
        knobs.records >= 2 && knobs.window >= 1,
        "--records must be at least 2, --window at least 1"
    );
    anyhow::ensure!(knobs.give_up_s > 0.0, "--give-up-s must be positive");
    anyhow::ensure!(knobs.idle_timeout_s > 0.0, "--idle-timeout-s must be positive");
    let pause_s = knobs.pause_s.unwrap_or(knobs.idle_timeout_s + 2.0);
    anyhow::ensure!(pause_s >= 0.0, "--pause-s must not be negative");
    Ok(Plan {
        duration_s: main.duration,
        clients: main.clients,
        loss: main.loss,
        duplicate: main.duplicate,
        duplicate_delay_ms: knobs.duplicate_delay_ms,
        reorder: knobs.reorder,
        reorder_delay_ms: knobs.reorder_delay_ms,
        delay_ms: main.delay_ms,
        waves: knobs.waves,
        wave_s: main.duration as f64 / f64::from(knobs.waves),
        records: knobs.records,
        window: knobs.window,
        request_timeout_ms: knobs.request_timeout_ms.unwrap_or(8 * main.delay_ms + 200),
        give_up_s: knobs.give_up_s,
        move_every: knobs.move_every,
        resume_every: knobs.resume_every,
        idle_timeout_s: knobs.idle_timeout_s,
        pause_s,
        seed: knobs.seed,
        json: main.json,
        rss_tolerance_kib: knobs.rss_tolerance_kib,
        server_log: knobs.server_log,
        server_verbose: knobs.server_verbose,
        trace_failures: knobs.trace_failures,
    })
}

/// What one client did, as the load peer reports it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct ClientOutcome {
    pub id: u64,
    /// The suite it offered (one), as [`peer::suite_label`] names it.
    pub suite: String,
    pub cid: bool,
    pub tickets: bool,
    pub resumption_offered: bool,
    /// How the session was resumed, if it was.
    pub resumed: Option<String>,
    /// Planned to move.
    pub moves: bool,
    /// Moved (its socket was rebound to another address).
    pub moved: bool,
    pub handshake_ok: bool,
    pub handshake_error: Option<String>,
    /// Wall clock from `connect` to the end of the handshake (or to its failure).
    pub handshake_ms: Option<f64>,
    /// Flights this client resent during the handshake.
    pub flights_resent: u32,
    /// Datagrams from the server that repeated handshake messages (its resends, or the relay's copies).
    pub peer_resent: u32,
    /// Distinct records sent.
    pub records: u32,
    /// Transmissions (first ones and resends).
    pub transmissions: u32,
    /// Records whose echo came back (once counted).
    pub echoed: u32,
    /// Echoes of a transmission whose echo had already arrived: a record delivered twice.
    pub duplicates: u32,
    /// Records with no echo after every attempt.
    pub lost: u32,
    /// Most transmissions of one record.
    pub most_attempts: u32,
    /// Longest wait from a record's first transmission to its echo, ms.
    pub slowest_echo_ms: f64,
    /// Echoes of an earlier attempt after the record was answered (a resend that was not needed).
    pub late_echoes: u32,
    pub echoed_after_move: u32,
    /// Echoes that were not this client's.
    pub foreign: u32,
    pub send_failures: u32,
    /// Events a CID client that is never reconnected must not see.
    pub unexpected_events: u32,
    pub reconnections: u32,
    /// The session failed after the handshake.
    pub session_error: Option<String>,
    pub closed_cleanly: bool,
}

impl ClientOutcome {
    /// A moved client kept its session: it went on with records after the move on the session it
    /// had, without a failure and without a new handshake.
    fn kept_session(&self) -> bool {
        self.moved && self.session_error.is_none() && self.reconnections == 0 && self.echoed_after_move > 0
    }
}

/// The load peer's word that a wave is over.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct WaveDone {
    pub clients: u64,
    pub seconds: f64,
}

/// `fastshake lab chaos-real`.
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    run_netlab(Knobs::from_main(args))
}

/// `fastshake netlab chaos`.
pub fn run_netlab(knobs: Knobs) -> anyhow::Result<()> {
    let plan = plan(knobs)?;
    match fastshake_netlab::testbed::require_root() {
        Err(TestbedError::NotRoot) => bail!(
            "the chaos soak on real sockets builds network namespaces (ip netns, veth, a TUN relay) and \
             needs root: run it as root (sudo)"
        ),
        other => other?,
    }
    let program = std::env::current_exe().context("the path of this fastshake binary")?;
    watch_for_interrupts();
    let report = soak(&program, &plan)?;
    if plan.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// Sleeps for `length`, waking every 100 ms to notice an interrupt.
fn pause(length: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + length;
    loop {
        check_interrupt()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// A directory removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!("fastshake-chaos-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The soak's PKI: `fastshake pki`, a chain of three (leaf and two intermediates) on P-256.
fn make_pki(program: &Path, dir: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new(program)
        .args(["pki", "--chain-len", "3", "--key", "p256", "--server-name", SERVER_NAME, "--out"])
        .arg(dir)
        .output()
        .context("running fastshake pki")?;
    anyhow::ensure!(out.status.success(), "fastshake pki failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// What the server's standard error said: one summary line per handshake, close and failure.
#[derive(Clone, Debug, Default, Serialize)]
struct ServerLog {
    handshakes: u64,
    resumed: u64,
    /// Flights the server resent, over every handshake.
    flights_resent: u64,
    /// Datagrams of the clients that repeated handshake messages.
    peer_resent: u64,
    /// Handshakes by suite (IANA name).
    by_suite: BTreeMap<String, u64>,
    /// "client N moved from A to B".
    moves: u64,
    /// Sessions the client closed with close_notify.
    closed_by_client: u64,
    /// Sessions that ended at the idle timeout (their close_notify was lost): `closed after ... idle`.
    idle_expired: u64,
    /// Sessions replaced by a new handshake from their client's address: a later client got the
    /// same port from the kernel while the server still held an earlier session whose close_notify
    /// was lost (RFC 6347 §4.2.8). Not a failure.
    replaced_by_new_handshake: u64,
    /// Every other failure (handshakes that timed out, alerts), with samples.
    other_failures: u64,
    failure_samples: Vec<String>,
}

impl ServerLog {
    /// Takes one line of `fastshake server`'s standard error.
    fn take(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("fastshake server: ") else { return };
        if let Some((_, summary)) = rest.split_once(": handshake done: ") {
            self.handshakes += 1;
            let mut parts = summary.split(", ");
            // A DTLS 1.3 suite is followed by its version, group and so on in parentheses.
            if let Some(suite) = parts.next().and_then(|s| s.split(" (").next()) {
                *self.by_suite.entry(suite.to_owned()).or_default() += 1;
            }
            if parts.next().is_some_and(|how| how.starts_with("resumed")) {
                self.resumed += 1;
            }
            self.flights_resent += number_before(summary, " resent,").unwrap_or(0);
            self.peer_resent += number_before(summary, " resent by the peer").unwrap_or(0);
        } else if rest.contains(" moved from ") && rest.starts_with("client ") {
            self.moves += 1;
        } else if rest.ends_with(": closed by the peer (close_notify)") {
            self.closed_by_client += 1;
        } else if rest.contains(": closed after ") && rest.ends_with("(idle timeout; close_notify sent)") {
            self.idle_expired += 1;
        } else if let Some((_, error)) = rest.split_once(": session failed: ") {
            if error == "the peer started a new handshake from the same address" {
                self.replaced_by_new_handshake += 1;
            } else {
                self.other_failures += 1;
                if self.failure_samples.len() < FAILURE_SAMPLES {
                    self.failure_samples.push(rest.to_owned());
                }
            }
        }
    }
}

/// The number just before `marker` in `text` (`2 flight(s) sent + 1 resent,` → 1).
fn number_before(text: &str, marker: &str) -> Option<u64> {
    let head = &text[..text.find(marker)?];
    head.rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Runs `"$0" "$@"` with standard input from /dev/null and sends it SIGTERM once the shell's own
/// standard input ends; exits with its status.
const SUPERVISED: &str = "exec 3<&0; \"$0\" \"$@\" </dev/null & child=$!; \
                          (while read -r _ <&3; do :; done; kill -TERM $child) >/dev/null 2>&1 & \
                          wait $child";

/// `fastshake server` in the server namespace, its standard error read into a [`ServerLog`].
struct ServerProcess {
    child: Child,
    /// The supervising shell's standard input: the server ends when it closes.
    supervisor: Option<ChildStdin>,
    /// The server's own PID (a child of the supervising shell).
    pid: u32,
    log: Arc<Mutex<ServerLog>>,
    reader: Option<JoinHandle<()>>,
}

impl ServerProcess {
    fn start(testbed: &Testbed, program: &Path, plan: &Plan, pki: &Path) -> anyhow::Result<ServerProcess> {
        let listen = SocketAddr::from((testbed.server_address(), SERVER_PORT));
        // The product server has no tie to its supervisor, so a small shell gives it one: it runs
        // the server and ends it with SIGTERM when its standard input (a pipe from this process)
        // closes, as it does if this process is killed outright.
        let mut command = testbed.command(Host::Server, "sh");
        command
            .arg("-c")
            .arg(SUPERVISED)
            .arg(program)
            .arg("server")
            .args(["--listen", &listen.to_string(), "--echo", "--mobility", "cid"])
            .args(["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX])
            .arg("--cert")
            .arg(pki.join("server.pem"))
            .arg("--key")
            .arg(pki.join("server.key"))
            .args(["--idle-timeout", &plan.idle_timeout_s.to_string()]);
        if plan.server_verbose {
            command.arg("-v");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting fastshake server in the server namespace")?;
        let supervisor = child.stdin.take();
        let stderr = child.stderr.take().context("the server's standard error")?;
        let mut file = match &plan.server_log {
            Some(path) => Some(std::io::BufWriter::new(
                std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
            )),
            None => None,
        };
        let log = Arc::new(Mutex::new(ServerLog::default()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reader = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line.starts_with("fastshake server: listening on") {
                        let _ = ready_tx.send(());
                    }
                    if let Some(file) = file.as_mut() {
                        let _ = writeln!(file, "{} {line}", peer::unix_ms());
                    }
                    log.lock().unwrap_or_else(|e| e.into_inner()).take(&line);
                }
                if let Some(file) = file.as_mut() {
                    let _ = file.flush();
                }
            })
        };
        let pid = child.id();
        let mut server = ServerProcess { child, supervisor, pid, log, reader: Some(reader) };
        ready_rx.recv_timeout(START_TIMEOUT).context("the server did not start listening")?;
        server.pid = fastshake_pid(pid).context("the server's process")?;
        Ok(server)
    }

    fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid)
    }

    fn log(&self) -> ServerLog {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// SIGTERM (the server closes every session and exits), then what it said.
    fn stop(mut self) -> ServerLog {
        let _ = std::process::Command::new("sh").args(["-c", &format!("kill -s TERM {}", self.pid)]).status();
        let deadline = Instant::now() + SERVER_EXIT_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(self.supervisor.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.log()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // The shell sends the server SIGTERM when its input closes; the shell itself goes now.
        drop(self.supervisor.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first process named `fastshake` among `pid` and its descendants, breadth first.
fn fastshake_pid(pid: u32) -> Option<u32> {
    let mut queue = std::collections::VecDeque::from([pid]);
    while let Some(next) = queue.pop_front() {
        let comm = std::fs::read_to_string(format!("/proc/{next}/comm")).unwrap_or_default();
        if comm.trim() == "fastshake" {
            return Some(next);
        }
        let children =
            std::fs::read_to_string(format!("/proc/{next}/task/{next}/children")).unwrap_or_default();
        queue.extend(children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
    }
    None
}

/// VmRSS of `pid`, KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The server's memory around one wave.
#[derive(Clone, Debug, Default, Serialize)]
struct WaveMemory {
    clients: u64,
    seconds: f64,
    /// Largest VmRSS read during the wave, KiB.
    peak_kib: u64,
    /// VmRSS after the pause that follows the wave, KiB.
    after_pause_kib: u64,
    /// Handshakes the server had completed by then.
    server_handshakes: u64,
}

/// Runs the soak and returns its report; every process and namespace is gone when it returns.
fn soak(program: &Path, plan: &Plan) -> anyhow::Result<Report> {
    let pki = TempDir::new()?;
    make_pki(program, &pki.0)?;
    let config = TestbedConfig {
        client_interfaces: 2,
        loss: plan.loss,
        loss_seed: plan.seed,
        duplicate: plan.duplicate,
        duplicate_delay: Duration::from_millis(plan.duplicate_delay_ms),
        reorder: plan.reorder,
        reorder_delay: Duration::from_millis(plan.reorder_delay_ms),
        ..TestbedConfig::new(program, Duration::from_millis(plan.delay_ms))
    };
    let mut testbed = Testbed::create(config).context("building the testbed")?;
    testbed.add_client_address(ClientIface::Eth0, SECOND_ETH0_ADDRESS)?;
    let stay = testbed.client_address(ClientIface::Eth0).context("the client's eth0 address")?;
    let eth1 = testbed.client_address(ClientIface::Eth1).context("the client's eth1 address")?;

    let server = ServerProcess::start(&testbed, program, plan, &pki.0)?;
    let idle_before_kib = server.rss_kib();

    let mut command = testbed.command(Host::Client, program);
    command
        .args(["netlab", "chaos-peer"])
        .args(["--server", &SocketAddr::from((testbed.server_address(), SERVER_PORT)).to_string()])
        .args(["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX, "--server-name", SERVER_NAME])
        .arg("--ca")
        .arg(pki.0.join("ca.pem"))
        .args(["--stay", &stay.to_string(), "--move-to", &format!("{SECOND_ETH0_ADDRESS},{eth1}")])
        .args(["--clients", &plan.clients.to_string(), "--records", &plan.records.to_string()])
        .args([
            "--window",
            &plan.window.to_string(),
            "--give-up-ms",
            &((plan.give_up_s * 1e3) as u64).to_string(),
        ])
        .args(["--request-timeout-ms", &plan.request_timeout_ms.to_string()])
        .args([
            "--move-every",
            &plan.move_every.to_string(),
            "--resume-every",
            &plan.resume_every.to_string(),
        ]);
    if plan.trace_failures {
        command.arg("--trace-failures");
    }
    let mut load = LineProcess::start(command, "load peer")?;
    load.wait_for("ready", START_TIMEOUT, |line| (line.trim() == "ready").then_some(()))?;

    let mut outcomes: Vec<ClientOutcome> = Vec::new();
    let mut waves = Vec::new();
    for wave in 0..plan.waves {
        check_interrupt()?;
        if !plan.json {
            eprintln!("  wave {} of {}: {:.1} s of load", wave + 1, plan.waves, plan.wave_s);
        }
        load.tell(&format!("wave {}", plan.wave_s))?;
        let bound = Instant::now() + Duration::from_secs_f64(plan.wave_s) + WAVE_DRAIN_BOUND;
        let mut memory = WaveMemory::default();
        let done = loop {
            check_interrupt()?;
            let now = Instant::now();
            if now >= bound {
                bail!("wave {} did not end within {:?} after its time", wave + 1, WAVE_DRAIN_BOUND);
            }
            memory.peak_kib = memory.peak_kib.max(server.rss_kib().unwrap_or(0));
            if let Some(line) = load.next_line((now + RSS_SAMPLE_PERIOD).min(bound))? {
                if let Some(json) = line.strip_prefix("client ") {
                    outcomes.push(serde_json::from_str(json).context("a client's outcome")?);
                } else if let Some(json) = line.strip_prefix("wave-done ") {
                    break serde_json::from_str::<WaveDone>(json).context("the end of a wave")?;
                }
            }
        };
        memory.clients = done.clients;
        memory.seconds = done.seconds;
        pause(Duration::from_secs_f64(plan.pause_s))?;
        memory.after_pause_kib = server.rss_kib().unwrap_or(0);
        memory.server_handshakes = server.log().handshakes;
        waves.push(memory);
    }
    // `stop`, then a moment to exit before it is killed.
    let _ = load.tell("stop");
    load.close_and_wait(Some(Duration::from_secs(5)));
    let server_log = server.stop();
    let kernel = kernel_drops(&testbed);
    let relay = testbed.stop_relay().ok();
    drop(testbed);
    let mut report = build_report(plan, outcomes, server_log, relay, idle_before_kib, waves);
    report.kernel = kernel;
    Ok(report)
}

/// Datagrams the kernel dropped on the way, beside the relay's own losses: a full socket buffer
/// or a full device queue is loss the soak did not ask for, and worth knowing when a record or a
/// flight goes missing more often than the relay's probability says.
#[derive(Clone, Debug, Default, Serialize)]
struct KernelDrops {
    /// `Udp: RcvbufErrors` and `InErrors` of the server's and the client's namespace (/proc/net/snmp).
    server_udp_rcvbuf_errors: u64,
    server_udp_in_errors: u64,
    client_udp_rcvbuf_errors: u64,
    client_udp_in_errors: u64,
    /// Dropped packets (rx + tx) of each interface that dropped any (`ip -s link`), as
    /// `host/interface`: the relay's TUN device among them, whose queue fills if the relay falls
    /// behind, and the veths, whose peer's backlog may be full.
    link_drops: BTreeMap<String, u64>,
}

fn kernel_drops(testbed: &Testbed) -> Option<KernelDrops> {
    let output = |host: Host, program: &str, args: &[&str]| -> Option<String> {
        let out = testbed.command(host, program).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (server_rcvbuf, server_in) = udp_errors(&output(Host::Server, "cat", &["/proc/net/snmp"])?)?;
    let (client_rcvbuf, client_in) = udp_errors(&output(Host::Client, "cat", &["/proc/net/snmp"])?)?;
    let mut link_drops = BTreeMap::new();
    for (host, name) in [(Host::Client, "client"), (Host::Router, "router"), (Host::Server, "server")] {
        let links: serde_json::Value =
            serde_json::from_str(&output(host, "ip", &["-j", "-s", "link", "show"])?).ok()?;
        for link in links.as_array()? {
            let stats = &link["stats64"];
            let dropped =
                stats["rx"]["dropped"].as_u64().unwrap_or(0) + stats["tx"]["dropped"].as_u64().unwrap_or(0);
            if dropped > 0 {
                link_drops.insert(format!("{name}/{}", link["ifname"].as_str().unwrap_or("?")), dropped);
            }
        }
    }
    Some(KernelDrops {
        server_udp_rcvbuf_errors: server_rcvbuf,
        server_udp_in_errors: server_in,
        client_udp_rcvbuf_errors: client_rcvbuf,
        client_udp_in_errors: client_in,
        link_drops,
    })
}

/// `RcvbufErrors` and `InErrors` from the two `Udp:` lines of /proc/net/snmp.
fn udp_errors(snmp: &str) -> Option<(u64, u64)> {
    let mut lines = snmp.lines().filter(|line| line.starts_with("Udp:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let field = |wanted: &str| {
        names
            .split_whitespace()
            .position(|name| name == wanted)
            .and_then(|i| values.split_whitespace().nth(i))
            .and_then(|v| v.parse().ok())
    };
    Some((field("RcvbufErrors")?, field("InErrors")?))
}

/// One row of the table: the clients of one kind.
#[derive(Clone, Debug, Default, Serialize)]
struct Row {
    kind: String,
    clients: u64,
    handshakes_ok: u64,
    handshakes_failed: u64,
    /// Client flights resent per completed handshake.
    flights_resent_per_handshake: f64,
    handshake_ms_p50: Option<f64>,
    handshake_ms_p95: Option<f64>,
    handshake_ms_p99: Option<f64>,
    records: u64,
    echoed: u64,
    duplicates: u64,
    lost: u64,
    /// Transmissions beyond the first per record.
    resends: u64,
    /// Most transmissions of one record.
    most_attempts: u32,
    /// Longest wait from a record's first transmission to its echo, ms.
    slowest_echo_ms: f64,
    session_failures: u64,
}

fn row(kind: &str, clients: &[&ClientOutcome]) -> Row {
    let ok: Vec<&&ClientOutcome> = clients.iter().filter(|c| c.handshake_ok).collect();
    let mut times: Vec<f64> = ok.iter().filter_map(|c| c.handshake_ms).collect();
    times.sort_by(f64::total_cmp);
    let resent: u64 = ok.iter().map(|c| u64::from(c.flights_resent)).sum();
    let sum = |f: fn(&ClientOutcome) -> u32| clients.iter().map(|c| u64::from(f(c))).sum::<u64>();
    Row {
        kind: kind.to_owned(),
        clients: clients.len() as u64,
        handshakes_ok: ok.len() as u64,
        handshakes_failed: (clients.len() - ok.len()) as u64,
        flights_resent_per_handshake: if ok.is_empty() { 0.0 } else { resent as f64 / ok.len() as f64 },
        handshake_ms_p50: percentile(&times, 50.0),
        handshake_ms_p95: percentile(&times, 95.0),
        handshake_ms_p99: percentile(&times, 99.0),
        records: sum(|c| c.records),
        echoed: sum(|c| c.echoed),
        duplicates: sum(|c| c.duplicates),
        lost: sum(|c| c.lost),
        resends: sum(|c| c.transmissions) - sum(|c| c.records),
        most_attempts: clients
            .iter()
            .map(|c| c.most_attempts.max(u32::from(c.records > 0)))
            .max()
            .unwrap_or(0),
        slowest_echo_ms: clients.iter().map(|c| c.slowest_echo_ms).fold(0.0, f64::max),
        session_failures: clients.iter().filter(|c| c.session_error.is_some()).count() as u64,
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The server's memory over the run, and whether it stayed flat.
#[derive(Clone, Debug, Default, Serialize)]
struct Memory {
    idle_before_kib: Option<u64>,
    waves: Vec<WaveMemory>,
    /// After the first wave's pause: the warm baseline.
    baseline_kib: u64,
    /// After the last wave's pause.
    end_kib: u64,
    growth_kib: i64,
    /// Full handshakes the server completed after the baseline, and the growth per each.
    full_handshakes_after_baseline: u64,
    growth_per_full_handshake_bytes: Option<f64>,
    tolerance_kib: u64,
    /// How the tolerance is made up.
    tolerance_basis: String,
    flat: bool,
}

/// Allowance for the allocator: freed memory that glibc keeps, page granularity; a fixed amount
/// independent of the load.
const RSS_ALLOCATOR_SLACK_KIB: u64 = 1_024;
/// What the server's session-ID cache may keep per full handshake (it keeps up to 10 000 sessions
/// for 2 h, the engine's default): a 32-byte ID twice (the entry and its LRU index), the master
/// secret, the PSK identity and two B-tree slots; half a KiB is generous.
const RSS_PER_CACHED_SESSION_BYTES: u64 = 512;

fn memory(
    plan: &Plan,
    idle_before_kib: Option<u64>,
    waves: Vec<WaveMemory>,
    full_handshakes_after_baseline: u64,
) -> Memory {
    let baseline_kib = waves.first().map_or(0, |w| w.after_pause_kib);
    let end_kib = waves.last().map_or(0, |w| w.after_pause_kib);
    let cache_kib = (full_handshakes_after_baseline * RSS_PER_CACHED_SESSION_BYTES).div_ceil(1024);
    let (tolerance_kib, tolerance_basis) = match plan.rss_tolerance_kib {
        Some(kib) => (kib, "given with --rss-tolerance-kib".to_owned()),
        None => (
            RSS_ALLOCATOR_SLACK_KIB + cache_kib,
            format!(
                "{RSS_ALLOCATOR_SLACK_KIB} KiB allocator slack + {full_handshakes_after_baseline} full handshakes after \
                 the baseline x {RSS_PER_CACHED_SESSION_BYTES} B the session cache may keep for each"
            ),
        ),
    };
    let growth_kib = end_kib as i64 - baseline_kib as i64;
    Memory {
        idle_before_kib,
        waves,
        baseline_kib,
        end_kib,
        growth_kib,
        full_handshakes_after_baseline,
        growth_per_full_handshake_bytes: (full_handshakes_after_baseline > 0)
            .then(|| growth_kib as f64 * 1024.0 / full_handshakes_after_baseline as f64),
        tolerance_kib,
        tolerance_basis,
        flat: baseline_kib > 0 && growth_kib <= tolerance_kib as i64,
    }
}

/// Moved clients.
#[derive(Clone, Debug, Default, Serialize)]
struct Moves {
    planned: u64,
    moved: u64,
    kept_session: u64,
    /// Moves the server reported ("client N moved"): its return-routability check of the new
    /// address (RFC 9853) ended before the client closed. A client that closes soon after moving
    /// may close first (a lost path_challenge is sent again only after a timer); its records were
    /// echoed from the new address all the same.
    seen_by_server: u64,
}

/// The targets, met or not.
#[derive(Clone, Debug, Default, Serialize)]
struct Verdict {
    failed_handshakes: u64,
    duplicates: u64,
    lost: u64,
    session_failures: u64,
    moved_without_session: u64,
    /// Failures the server reported beyond idle expiry and replaced sessions.
    server_failures: u64,
    memory_flat: bool,
    met: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
struct Report {
    experiment: &'static str,
    params: Option<Plan>,
    rows: Vec<Row>,
    moves: Moves,
    resumption_offered: u64,
    resumption_declined: u64,
    late_echoes: u64,
    unexpected_events: u64,
    foreign_echoes: u64,
    closed_cleanly: u64,
    server: ServerLog,
    server_flights_resent_per_handshake: f64,
    relay: Option<RelayFigures>,
    kernel: Option<KernelDrops>,
    memory: Memory,
    failure_samples: Vec<String>,
    verdict: Verdict,
}

#[derive(Clone, Debug, Default, Serialize)]
struct RelayFigures {
    received: u64,
    forwarded: u64,
    dropped_loss: u64,
    duplicated: u64,
    reordered: u64,
    dropped_queue_full: u64,
    write_errors: u64,
    max_queued: u64,
}

impl From<RelayCounters> for RelayFigures {
    fn from(c: RelayCounters) -> Self {
        RelayFigures {
            received: c.received,
            forwarded: c.forwarded,
            dropped_loss: c.dropped_loss,
            duplicated: c.duplicated,
            reordered: c.reordered,
            dropped_queue_full: c.dropped_queue_full,
            write_errors: c.write_errors,
            max_queued: c.max_queued,
        }
    }
}

fn build_report(
    plan: &Plan,
    outcomes: Vec<ClientOutcome>,
    server: ServerLog,
    relay: Option<RelayCounters>,
    idle_before_kib: Option<u64>,
    waves: Vec<WaveMemory>,
) -> Report {
    let mut rows = Vec::new();
    for suite in peer::kind_labels() {
        let of: Vec<&ClientOutcome> = outcomes.iter().filter(|c| c.suite == suite).collect();
        rows.push(row(suite, &of));
    }
    for (kind, how) in [("resumed by ticket", "ticket"), ("resumed by session ID", "session ID")] {
        let of: Vec<&ClientOutcome> = outcomes.iter().filter(|c| c.resumed.as_deref() == Some(how)).collect();
        rows.push(row(kind, &of));
    }
    let full: Vec<&ClientOutcome> =
        outcomes.iter().filter(|c| c.handshake_ok && c.resumed.is_none()).collect();
    rows.push(row("full handshakes", &full));
    let cid: Vec<&ClientOutcome> = outcomes.iter().filter(|c| c.cid && !c.moves).collect();
    rows.push(row("CID, staying", &cid));
    let moving: Vec<&ClientOutcome> = outcomes.iter().filter(|c| c.moves).collect();
    // A client whose handshake failed never got to move: it counts as a failed handshake.
    let moving_connected: Vec<&&ClientOutcome> = moving.iter().filter(|c| c.handshake_ok).collect();
    rows.push(row("CID, moving", &moving));
    let all: Vec<&ClientOutcome> = outcomes.iter().collect();
    let total = row("all", &all);
    rows.push(total.clone());

    let moves = Moves {
        planned: moving_connected.len() as u64,
        moved: moving_connected.iter().filter(|c| c.moved).count() as u64,
        kept_session: moving_connected.iter().filter(|c| c.kept_session()).count() as u64,
        seen_by_server: server.moves,
    };
    let mut failure_samples = Vec::new();
    for c in &outcomes {
        if failure_samples.len() >= FAILURE_SAMPLES {
            break;
        }
        if let Some(error) = &c.handshake_error {
            failure_samples.push(format!("client {} ({}): handshake: {error}", c.id, c.suite));
        } else if let Some(error) = &c.session_error {
            failure_samples.push(format!("client {} ({}): session: {error}", c.id, c.suite));
        }
    }
    // Full handshakes the server completed after the baseline: each may leave a cache entry.
    let baseline_handshakes = waves.first().map_or(0, |w| w.server_handshakes);
    let full_after_baseline = {
        let after = server.handshakes.saturating_sub(baseline_handshakes);
        let resumed_share =
            if server.handshakes == 0 { 0.0 } else { server.resumed as f64 / server.handshakes as f64 };
        (after as f64 * (1.0 - resumed_share)).ceil() as u64
    };
    let memory = memory(plan, idle_before_kib, waves, full_after_baseline);
    let moved_without_session = moves.moved - moves.kept_session + (moves.planned - moves.moved);
    let verdict = Verdict {
        failed_handshakes: total.handshakes_failed,
        duplicates: total.duplicates,
        lost: total.lost,
        session_failures: total.session_failures,
        moved_without_session,
        server_failures: server.other_failures,
        memory_flat: memory.flat,
        met: total.handshakes_failed == 0
            && total.duplicates == 0
            && total.lost == 0
            && total.session_failures == 0
            && moved_without_session == 0
            && server.other_failures == 0
            && memory.flat,
    };
    Report {
        experiment:
            "E6, chaos soak on real sockets (fastshake server --echo, network namespaces, delay relay)",
        params: Some(plan.clone()),
        rows,
        moves,
        resumption_offered: outcomes.iter().filter(|c| c.resumption_offered).count() as u64,
        resumption_declined: outcomes
            .iter()
            .filter(|c| c.resumption_offered && c.handshake_ok && c.resumed.is_none())
            .count() as u64,
        late_echoes: outcomes.iter().map(|c| u64::from(c.late_echoes)).sum(),
        unexpected_events: outcomes.iter().map(|c| u64::from(c.unexpected_events)).sum(),
        foreign_echoes: outcomes.iter().map(|c| u64::from(c.foreign)).sum(),
        closed_cleanly: outcomes.iter().filter(|c| c.closed_cleanly).count() as u64,
        server_flights_resent_per_handshake: if server.handshakes == 0 {
            0.0
        } else {
            server.flights_resent as f64 / server.handshakes as f64
        },
        server,
        relay: relay.map(RelayFigures::from),
        kernel: None,
        memory,
        failure_samples,
        verdict,
    }
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

fn print_report(report: &Report) {
    let Some(p) = &report.params else { return };
    println!(
        "E6 chaos soak on real sockets: fastshake server --echo --mobility cid (PSK and an ECDSA chain of 3 on one \
         port) and {} concurrent clients, {} s of load in {} waves, each followed by a {:.1} s pause",
        p.clients, p.duration_s, p.waves, p.pause_s
    );
    println!(
        "relay: {} ms each way, loss {:.1} %, duplication {:.1} % (copy +{} ms), reordering {:.1} % (+{} ms), seed {}; \
         each client: {} records, {} outstanding, resent after {} ms (then x2, x4), lost after {} s",
        p.delay_ms,
        p.loss * 100.0,
        p.duplicate * 100.0,
        p.duplicate_delay_ms,
        p.reorder * 100.0,
        p.reorder_delay_ms,
        p.seed,
        p.records,
        p.window,
        p.request_timeout_ms,
        p.give_up_s
    );
    println!();
    let [failed, resent, p50, p95, p99, records, echoed, twice] = DELIVERY_COLUMNS;
    println!(
        "  {:<22} {:>7} {:>7} {failed:>6} {resent:>9} {p50:>7} {p95:>7} {p99:>7} {records:>8} {echoed:>8} {twice:>5} {:>5} {:>7} {:>5} {:>9}",
        "clients",
        "number",
        "hs ok",
        "lost",
        "resends",
        "most",
        "slowest s"
    );
    for r in &report.rows {
        println!(
            "  {:<22} {:>7} {:>7} {:>6} {:>9.2} {:>7} {:>7} {:>7} {:>8} {:>8} {:>5} {:>5} {:>7} {:>5} {:>9.1}",
            r.kind,
            r.clients,
            r.handshakes_ok,
            r.handshakes_failed,
            r.flights_resent_per_handshake,
            ms(r.handshake_ms_p50),
            ms(r.handshake_ms_p95),
            ms(r.handshake_ms_p99),
            r.records,
            r.echoed,
            r.duplicates,
            r.lost,
            r.resends,
            r.most_attempts,
            r.slowest_echo_ms / 1e3
        );
    }
    println!(
        "  (resent/hs: flights the clients resent per handshake; handshake time: wall clock from connect to \
         completion, cookie exchange included; most: most transmissions of one record; slowest: longest wait from \
         a record's first transmission to its echo)"
    );
    let m = &report.moves;
    println!(
        "moves: {} planned (handshake done), {} moved, {} kept their session (no new handshake, records echoed after \
         the move); the server confirmed {} by return routability before the client closed",
        m.planned, m.moved, m.kept_session, m.seen_by_server
    );
    println!(
        "resumption: {} offered, {} declined; echoes of resends already answered: {}; closed cleanly: {}; \
         unexpected events: {}, foreign echoes: {}",
        report.resumption_offered,
        report.resumption_declined,
        report.late_echoes,
        report.closed_cleanly,
        report.unexpected_events,
        report.foreign_echoes
    );
    let s = &report.server;
    println!(
        "server: {} handshakes ({} resumed), {:.2} flights resent per handshake, {} client flights repeated; \
         {} closed by the client, {} ended at the idle timeout (close_notify lost), {} replaced by a new handshake \
         from the same address (port reused), {} other failures",
        s.handshakes,
        s.resumed,
        report.server_flights_resent_per_handshake,
        s.peer_resent,
        s.closed_by_client,
        s.idle_expired,
        s.replaced_by_new_handshake,
        s.other_failures
    );
    for sample in &s.failure_samples {
        println!("  server: {sample}");
    }
    if let Some(r) = &report.relay {
        println!(
            "relay: {} datagrams in, {} out; {} lost, {} duplicated, {} reordered, {} dropped on a full queue \
             (at most {} held), {} write errors",
            r.received,
            r.forwarded,
            r.dropped_loss,
            r.duplicated,
            r.reordered,
            r.dropped_queue_full,
            r.max_queued,
            r.write_errors
        );
    }
    if let Some(k) = &report.kernel {
        let links: Vec<String> = k.link_drops.iter().map(|(name, n)| format!("{name} {n}")).collect();
        println!(
            "kernel drops beside the relay's: server UDP receive buffer {} (in errors {}), client UDP receive buffer {} \
             (in errors {}), interfaces: {}",
            k.server_udp_rcvbuf_errors,
            k.server_udp_in_errors,
            k.client_udp_rcvbuf_errors,
            k.client_udp_in_errors,
            if links.is_empty() { "none".to_owned() } else { links.join(", ") }
        );
    }
    let mem = &report.memory;
    println!();
    println!("server memory (VmRSS of the fastshake server process):");
    if let Some(idle) = mem.idle_before_kib {
        println!("  before any client         {idle:>8} KiB");
    }
    for (i, w) in mem.waves.iter().enumerate() {
        println!(
            "  wave {:<2} {:>5} clients     peak {:>8} KiB, after the pause {:>8} KiB{}",
            i + 1,
            w.clients,
            w.peak_kib,
            w.after_pause_kib,
            if i == 0 { "  (warm baseline)" } else { "" }
        );
    }
    println!(
        "  end - baseline: {:+} KiB; tolerance {} KiB ({}): {}",
        mem.growth_kib,
        mem.tolerance_kib,
        mem.tolerance_basis,
        if mem.flat { "flat" } else { "NOT flat" }
    );
    if let Some(per) = mem.growth_per_full_handshake_bytes {
        println!(
            "  that is {per:.0} B per full handshake after the baseline ({}), as the session-ID cache grows: it keeps \
             one session per full handshake (ID, master secret, identity and two B-tree slots, ~350-400 B; LRU, at most \
             10 000, for 2 h)",
            mem.full_handshakes_after_baseline
        );
    }
    for sample in &report.failure_samples {
        println!("  failure: {sample}");
    }
    let v = &report.verdict;
    println!();
    println!(
        "targets: failed handshakes {} (0), records delivered twice {} (0), records lost {} (0), sessions failed {} (0), \
         moved clients without their session {} (0), server failures {} (0), memory flat {}: {}",
        v.failed_handshakes,
        v.duplicates,
        v.lost,
        v.session_failures,
        v.moved_without_session,
        v.server_failures,
        if v.memory_flat { "yes" } else { "no" },
        if v.met { "met" } else { "NOT met" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_log_reads_summaries_moves_closes_and_failures() {
        let mut log = ServerLog::default();
        for line in [
            "fastshake server: listening on 203.0.113.2:5684 (DTLS 1.2, PSK and certificates, mobility cid)",
            "fastshake server: 192.0.2.2:40000: handshake done: TLS_PSK_WITH_AES_128_CCM_8, full (not resumed), \
             with extended master secret, 212.00 ms, 2 flight(s) sent + 1 resent, 3 resent by the peer; sent 4 \
             datagrams / 500 B, received 5 datagrams / 400 B",
            "fastshake server: 192.0.2.2:40001: handshake done: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, resumed by \
             ticket, with extended master secret, 100.00 ms, 2 flight(s) sent + 0 resent, 0 resent by the peer; sent \
             2 datagrams / 300 B, received 3 datagrams / 200 B",
            "fastshake server: client 7 moved from 192.0.2.2:40000 to 192.0.2.3:41000",
            "fastshake server: 192.0.2.3:41000: closed by the peer (close_notify)",
            "fastshake server: 192.0.2.2:40001: closed after 5.0 s without an authenticated datagram from the \
             peer (idle timeout; close_notify sent)",
            "fastshake server: 192.0.2.2:40002: session failed: no answer from the peer after 6 retransmissions",
            "fastshake server: 192.0.2.2:40003: session failed: the peer started a new handshake from the same address",
        ] {
            log.take(line);
        }
        assert_eq!((log.handshakes, log.resumed, log.flights_resent, log.peer_resent), (2, 1, 1, 3));
        assert_eq!(log.by_suite.get("TLS_PSK_WITH_AES_128_CCM_8"), Some(&1));
        assert_eq!((log.moves, log.closed_by_client, log.idle_expired, log.other_failures), (1, 1, 1, 1));
        assert_eq!(log.replaced_by_new_handshake, 1);
        assert_eq!(log.failure_samples.len(), 1);
    }

    #[test]
    fn udp_errors_are_read_from_proc_net_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 59348 171 731 60299 730 0\n\
                    UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    UdpLite: 0 0 0 0 0 0\n";
        assert_eq!(udp_errors(snmp), Some((730, 731)));
        assert_eq!(udp_errors("Ip: 1\n"), None);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&[7.0], 95.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn vm_rss_is_read_from_a_status_file() {
        assert_eq!(parse_vm_rss("Name:\tfastshake\nVmPeak:\t  9000 kB\nVmRSS:\t    5120 kB\n"), Some(5120));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
        assert!(rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
    }

    #[test]
    fn memory_is_flat_within_the_slack_and_the_cache_allowance() {
        let plan = plan(Knobs::from_main(RunOptions {
            duration: 10,
            clients: 4,
            loss: 0.0,
            duplicate: 0.0,
            delay_ms: 5,
            json: false,
        }))
        .unwrap();
        let wave = |after_pause_kib| WaveMemory { after_pause_kib, ..WaveMemory::default() };
        let flat = memory(&plan, None, vec![wave(10_000), wave(10_900), wave(11_000)], 1_000);
        assert_eq!(flat.tolerance_kib, 1_024 + 500);
        assert!(flat.flat && flat.growth_kib == 1_000, "{flat:?}");
        let grown = memory(&plan, None, vec![wave(10_000), wave(12_000)], 0);
        assert!(!grown.flat);
    }
}
