//! `bench webrtc` over the netlab testbed: Chromium and `fastshake webrtc connect` in the client
//! namespace, our servers and pion's in the server namespace (203.0.113.2), every packet held
//! by the delay relay once each way. Each browser session is timed from its first STUN check,
//! found in a capture of the client's interface, to the first echoed byte; the round-trip time
//! is measured in the same run (a UDP echo), and the first session's flights are printed.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fastshake_netlab::testbed::{ClientIface, Host, Testbed, TestbedConfig, TestbedError};
use serde_json::{json, Value};

use crate::capture::{self, Binding, Datagram};
use crate::handshake::median;

const LITE_PORT: u16 = 8080;
const PION_PORT: u16 = 8081;
const FULL_PORT: u16 = 8083;
const ECHO_PORT: u16 = 9000;
/// Longest any process of the run lives: `timeout` ends it then even if this one was killed.
const PROCESS_LIMIT: Duration = Duration::from_secs(1800);
/// How long a server or the capture may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Probes of the round-trip measurement.
const PINGS: u32 = 20;

/// What each round trip of a browser session is; printed under the tables.
const BROWSER_ROUND_TRIPS: &[&str] = &[
    "ICE, 1: the check and its success response; the browser sends its ClientHello on the valid pair at once \
     (RFC 8445 §12.1).",
    "DTLS 1.3, 1: ClientHello -> ServerHello..Finished; the browser's Finished leaves with its first SCTP packet.",
    "SCTP regular, 2: INIT -> INIT-ACK, COOKIE-ECHO -> COOKIE-ACK (Chromium opens the channel on the COOKIE-ACK); \
     SNAP, 0: both INITs were in the SDP (a=sctp-init).",
    "Data, 1: DCEP OPEN and the message -> DATA_CHANNEL_ACK and the echo (the browser sends before the ACK, RFC 8832 §6).",
    "fastshake: 3 with SNAP, 5 without; plus processing (the browser's DTLS flight, a few ms) and the relay's timer.",
    "DTLS in STUN (draft-hancke-webrtc-sped) folds the DTLS round trip into the ICE check when the whole ClientHello \
     rides in the first check: 2 with SNAP. Chromium's default hybrid ClientHello takes two datagrams, and the \
     second reaches us plain after the check's answer, so the round trip stays.",
    "ICE-lite adds Chromium's nomination delay: our first DTLS flight waits for its USE-CANDIDATE check (RFC 8445 \
     §12.1.1). Chromium nominates semi-aggressively: on every check to a full agent (the timelines: check+nominate \
     first), but to an ICE-lite one only on the selected, writable pair, so at its next ping after the first \
     success (about 10 ms, up to 60). --ice full answers the ClientHello on a pair its own check validated (§12.1).",
    "pion (full ICE, DTLS 1.2 as the client with a=setup:active, regular SCTP, no SNAP): ICE 1, then its ClientHello \
     once it holds the nominated pair, DTLS 1.2 2, SCTP 2, data 1: about 6.",
];

/// What each round trip of a `webrtc connect` session is; printed under its table.
const CONNECT_ROUND_TRIPS: &[&str] = &[
    "ICE 1 (a lite server may answer the ClientHello at once: the first check nominated), DTLS 1.3 1 or DTLS 1.2 2, \
     then SCTP and the data: the channel's OPEN and the message ride with the SCTP handshake (RFC 8831 §6.6), \
     behind the COOKIE-ECHO in the regular one (2: INIT, then COOKIE-ECHO and the echo), in the INIT in the \
     alternative one (1: the echo comes with the INIT-ACK), in the first packet with SNAP (1).",
    "So regular 4, alternative 3, SNAP 3 with DTLS 1.3; regular 5 with DTLS 1.2. pion: its DTLS 1.2 as the client \
     and regular SCTP.",
];

/// A process in a testbed namespace under `timeout`; stopped when dropped (SIGTERM, which
/// `timeout` passes on, then SIGKILL).
struct Process {
    child: Child,
}

impl Process {
    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // The shell's own kill: no procps needed.
            let _ = Command::new("sh").args(["-c", &format!("kill -s TERM {}", self.child.id())]).status();
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Which of a process's outputs come back as lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lines {
    Stdout,
    Stderr,
}

/// Starts `program args` in `host` under `timeout`; its lines on `lines` arrive on the receiver,
/// the other output is discarded.
fn spawn(
    testbed: &Testbed,
    host: Host,
    program: impl AsRef<OsStr>,
    args: &[&str],
    lines: Lines,
) -> anyhow::Result<(Process, Receiver<String>)> {
    let mut command = testbed.command(host, "timeout");
    command.args(["-k", "3", &PROCESS_LIMIT.as_secs().to_string()]).arg(program.as_ref()).args(args);
    let (out, err) = match lines {
        Lines::Stdout => (Stdio::piped(), Stdio::null()),
        Lines::Stderr => (Stdio::null(), Stdio::piped()),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {} in the testbed", program.as_ref().to_string_lossy()))?;
    let stream: Box<dyn Read + Send> = match lines {
        Lines::Stdout => Box::new(child.stdout.take().context("stdout")?),
        Lines::Stderr => Box::new(child.stderr.take().context("stderr")?),
    };
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    Ok((Process { child }, receiver))
}

/// The next line that starts with `prefix`, before `deadline`.
fn wait_line(
    lines: &Receiver<String>,
    prefix: &str,
    deadline: Instant,
    what: &str,
) -> anyhow::Result<String> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => return Ok(line),
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => bail!("{what}: no `{prefix}` line in time"),
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("{what} ended before `{prefix}`"),
        }
    }
}

/// The testbed, with whatever still runs in its client and server namespaces killed (by pid,
/// each one started by this run) before the namespaces go.
struct Bed(Testbed);

impl Drop for Bed {
    fn drop(&mut self) {
        for host in [Host::Client, Host::Server] {
            let Ok(out) = Command::new("ip").args(["netns", "pids", self.0.namespace(host)]).output() else {
                continue;
            };
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if pid.parse::<u32>().is_ok() {
                    let _ = Command::new("sh").args(["-c", &format!("kill -s KILL {pid}")]).status();
                }
            }
        }
    }
}

/// A program on the PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.exists()))
}

/// The servers the browser goes round, by the `signal` its report names them with.
struct Target {
    name: &'static str,
    signal: String,
}

/// One browser session of the report, placed in the capture.
#[derive(Clone, Debug)]
struct Session {
    from_answer: f64,
    from_check: Option<f64>,
    /// First check minus answer applied, both as wall-clock times.
    check_after_answer: Option<f64>,
    snap: bool,
    port: Option<u16>,
    first_check_unix: Option<f64>,
    echo_unix: f64,
}

/// Runs the relay part of `bench webrtc`; its figures as JSON.
pub(crate) fn run(
    fastshake: &Path,
    browser: &Path,
    pion: &Path,
    runs: usize,
    delay: Duration,
) -> anyhow::Result<Value> {
    let testbed = match Testbed::create(TestbedConfig::new(fastshake, delay)) {
        Err(TestbedError::NotRoot) => {
            bail!("the relay run needs root (network namespaces); --delay-ms 0 skips it")
        }
        other => Bed(other.context("building the testbed")?),
    };
    let server_ip = testbed.0.server_address();
    let client_ip = testbed.0.client_address(ClientIface::Eth0).context("the client's eth0")?;
    let http = |port: u16| format!("{server_ip}:{port}");
    let url = |port: u16| format!("http://{server_ip}:{port}/offer");
    let fs = fastshake.as_os_str();
    let deadline = Instant::now() + START_TIMEOUT;
    let (_lite, lite_lines) =
        spawn(&testbed.0, Host::Server, fs, &["webrtc", "serve", "--http", &http(LITE_PORT)], Lines::Stdout)?;
    wait_line(&lite_lines, "webrtc: page", deadline, "fastshake webrtc serve")?;
    let (_full, full_lines) = spawn(
        &testbed.0,
        Host::Server,
        fs,
        &["webrtc", "serve", "--http", &http(FULL_PORT), "--ice", "full"],
        Lines::Stdout,
    )?;
    wait_line(&full_lines, "webrtc: page", deadline, "fastshake webrtc serve --ice full")?;
    let (_pion, pion_lines) = spawn(
        &testbed.0,
        Host::Server,
        pion,
        &["serve", "--http", &http(PION_PORT), "--ip", &server_ip.to_string()],
        Lines::Stdout,
    )?;
    wait_line(&pion_lines, "listening", deadline, "pion-webrtc-peer serve")?;
    let (_echo, echo_lines) = spawn(
        &testbed.0,
        Host::Server,
        fs,
        &["netlab", "udp-echo", "--bind", &http(ECHO_PORT)],
        Lines::Stdout,
    )?;
    wait_line(&echo_lines, "listening", deadline, "fastshake netlab udp-echo")?;
    // Kept to the end: a receiver dropped would end its reader and close the server's stdout.
    let _drained = (full_lines, pion_lines, echo_lines);

    let pings = udp_ping(&testbed.0, fastshake, &http(ECHO_PORT))?;
    anyhow::ensure!(!pings.is_empty(), "no UDP echo came back through the relay");
    let rtt = median(pings.clone());
    let min_rtt = pings.iter().copied().fold(f64::INFINITY, f64::min);
    let dumpcap = on_path("dumpcap");
    println!();
    println!(
        "Over the delay relay, {} ms each way (netlab testbed: client 192.0.2.2, server {server_ip}): RTT {rtt:.1} ms \
         (median of {} UDP echoes, min {min_rtt:.1}), measured before the sessions",
        delay.as_millis(),
        pings.len()
    );
    if dumpcap.is_none() {
        println!(
            "no dumpcap on the PATH: browser sessions are timed from the answer applied, not the first check"
        );
    }

    let targets = [
        Target { name: "fastshake webrtc serve (ICE-lite)", signal: "/offer".into() },
        Target { name: "fastshake webrtc serve --ice full", signal: url(FULL_PORT) },
        Target { name: "pion/webrtc v4 (anchor)", signal: url(PION_PORT) },
    ];
    let scratch = std::env::temp_dir().join(format!("fastshake-bench-webrtc-relay-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let mut browser_json = Vec::new();
    let mut stun_rtts = Vec::new();
    for trials in
        [Trials::None, Trials::Snap, Trials::SnapAndDtlsInStun, Trials::SnapAndDtlsInStunWithoutHybrid]
    {
        let page = format!(
            "http://{}/?report&bench={runs}&servers={}",
            http(LITE_PORT),
            targets.iter().map(|t| t.signal.as_str()).collect::<Vec<_>>().join(",")
        );
        let (report, datagrams) =
            browser_run(&testbed.0, browser, dumpcap.as_deref(), &lite_lines, &page, runs, trials, &scratch)?;
        stun_rtts.extend(check_rtts(&datagrams, client_ip));
        let sessions = report["bench"].as_array().context("bench results")?;
        println!();
        println!("Chromium to each server, {} ({} sessions each, in turn):", trials.describe(), runs);
        println!(
            "{:<36} {:>5} {:>10} {:>6} {:>7} {:>12} {:>12} {:>5}",
            "", "runs", "first byte", "RTTs", "/ pion", "from answer", "check after", "SNAP"
        );
        println!(
            "{:<36} {:>5} {:>10} {:>6} {:>7} {:>12} {:>12} {:>5}",
            "", "", "ms", "", "", "applied, ms", "answer, ms", ""
        );
        let per_target: Vec<Vec<Session>> = targets
            .iter()
            .map(|t| {
                sessions
                    .iter()
                    .filter(|s| s["signal"] == t.signal.as_str())
                    .map(|s| place(s, &datagrams, client_ip, server_ip))
                    .collect()
            })
            .collect();
        // From the first check where the capture has it, from the answer applied otherwise.
        let first_byte = |s: &[Session]| -> f64 {
            median(s.iter().map(|x| x.from_check.unwrap_or(x.from_answer)).collect())
        };
        let pion_ms = first_byte(&per_target[2]);
        for (target, list) in targets.iter().zip(&per_target) {
            let ms = first_byte(list);
            let from_answer = median(list.iter().map(|s| s.from_answer).collect());
            let gap = median(list.iter().filter_map(|s| s.check_after_answer).collect());
            let placed = list.iter().filter(|s| s.from_check.is_some()).count();
            let snap = list.iter().filter(|s| s.snap).count();
            println!(
                "{:<36} {:>5} {:>10.1} {:>6.2} {:>7.2} {:>12.1} {:>12.1} {:>5}",
                target.name,
                list.len(),
                ms,
                ms / rtt,
                ms / pion_ms,
                from_answer,
                gap,
                format!("{snap}/{}", list.len())
            );
            browser_json.push(json!({
                "trials": trials.key(),
                "server": target.name,
                "runs": list.len(),
                "placed_in_capture": placed,
                "first_byte_ms": ms,
                "round_trips": ms / rtt,
                "ratio_to_pion": ms / pion_ms,
                "from_answer_applied_ms": from_answer,
                "check_after_answer_ms": gap,
                "snap_sessions": snap,
            }));
        }
        for (target, list) in targets.iter().zip(&per_target) {
            // The session nearest the median, packet by packet, from the first check to the echo.
            let ms = first_byte(list);
            let chosen = list.iter().filter(|s| s.from_check.is_some()).min_by(|a, b| {
                (a.from_check.unwrap() - ms).abs().total_cmp(&(b.from_check.unwrap() - ms).abs())
            });
            if let Some(s) = chosen {
                println!(
                    "  {} (session of {:.1} ms): {}",
                    target.name,
                    s.from_check.unwrap_or(0.0),
                    flights(&datagrams, s, client_ip, rtt)
                );
            }
        }
    }
    println!();
    println!(
        "Round trips from the browser's first check to its first echoed byte, counted from the protocols:"
    );
    for line in BROWSER_ROUND_TRIPS {
        println!("  {line}");
    }
    if !stun_rtts.is_empty() {
        println!(
            "STUN checks answered in the captures: median {:.1} ms from check to success response ({} checks)",
            median(stun_rtts.clone()),
            stun_rtts.len()
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);

    println!();
    println!("fastshake webrtc connect (client namespace) to each server, from its first check, {runs} sessions each:");
    println!("{:<58} {:>5} {:>10} {:>6} {:>7}", "", "runs", "first byte", "RTTs", "/ pion");
    let variants: [(&str, u16, &str, &str); 7] = [
        ("ICE-lite, SCTP regular, DTLS 1.3", LITE_PORT, "regular", "1.3"),
        ("ICE-lite, SCTP alternative (seed 004), DTLS 1.3", LITE_PORT, "alt", "1.3"),
        ("ICE-lite, SCTP SNAP, DTLS 1.3", LITE_PORT, "snap", "1.3"),
        ("ICE-lite, SCTP regular, DTLS 1.2", LITE_PORT, "regular", "1.2"),
        ("ICE full, SCTP regular, DTLS 1.3", FULL_PORT, "regular", "1.3"),
        ("ICE full, SCTP SNAP, DTLS 1.3", FULL_PORT, "snap", "1.3"),
        ("pion/webrtc v4 (anchor), SCTP regular, DTLS 1.2", PION_PORT, "regular", "both"),
    ];
    let measured: Vec<(usize, Vec<f64>)> = variants
        .iter()
        .map(|(_, port, sctp, dtls)| connect_runs(&testbed.0, fastshake, &url(*port), sctp, dtls, runs))
        .collect();
    let pion_ms = median(measured[6].1.clone());
    let mut connect_json = Vec::new();
    for ((name, ..), (failed, times)) in variants.iter().zip(&measured) {
        let ms = median(times.clone());
        let failures = if *failed > 0 { format!("  ({failed} failed)") } else { String::new() };
        println!(
            "{:<58} {:>5} {:>10.1} {:>6.2} {:>7.2}{failures}",
            name,
            times.len(),
            ms,
            ms / rtt,
            ms / pion_ms
        );
        connect_json.push(json!({
            "variant": name, "runs": times.len(), "failed": failed, "first_byte_ms": ms,
            "round_trips": ms / rtt, "ratio_to_pion": ms / pion_ms,
        }));
    }
    println!();
    println!(
        "Round trips of `webrtc connect` (aggressive nomination: its first check carries USE-CANDIDATE):"
    );
    for line in CONNECT_ROUND_TRIPS {
        println!("  {line}");
    }
    Ok(json!({
        "delay_ms": delay.as_millis() as u64,
        "rtt_ms": rtt,
        "rtt_min_ms": min_rtt,
        "stun_check_rtt_ms": (!stun_rtts.is_empty()).then(|| median(stun_rtts)),
        "browser": browser_json,
        "connect": connect_json,
    }))
}

/// UDP echo round trips through the relay, in ms (`fastshake netlab udp-ping`).
fn udp_ping(testbed: &Testbed, fastshake: &Path, to: &str) -> anyhow::Result<Vec<f64>> {
    let out = testbed
        .command(Host::Client, "timeout")
        .arg("30")
        .arg(fastshake)
        .args(["netlab", "udp-ping", "--to", to, "--count", &PINGS.to_string(), "--interval-ms", "10"])
        .output()
        .context("fastshake netlab udp-ping")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("rtt_us=").nth(1)?.trim().parse::<f64>().ok())
        .map(|us| us / 1e3)
        .collect())
}

/// The field trials a browser run turns on: what Chromium 156 offers only when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trials {
    None,
    /// SNAP (draft-hancke-tsvwg-snap): the SCTP INIT in the SDP.
    Snap,
    /// SNAP and DTLS in STUN (draft-hancke-webrtc-sped): the DTLS handshake in the checks.
    SnapAndDtlsInStun,
    /// The same with the browser's post-quantum share off, so its ClientHello fits one check.
    SnapAndDtlsInStunWithoutHybrid,
}

impl Trials {
    fn flags(self) -> Vec<String> {
        let trials = match self {
            Trials::None => return Vec::new(),
            Trials::Snap => "WebRTC-Sctp-Snap/Enabled/",
            Trials::SnapAndDtlsInStun | Trials::SnapAndDtlsInStunWithoutHybrid => {
                "WebRTC-Sctp-Snap/Enabled/WebRTC-IceHandshakeDtls/Enabled/"
            }
        };
        let mut flags = vec![format!("--force-fieldtrials={trials}")];
        if self == Trials::SnapAndDtlsInStunWithoutHybrid {
            flags.push("--disable-features=WebRtcPqcForDtls".into());
        }
        flags
    }

    fn key(self) -> &'static str {
        match self {
            Trials::None => "none",
            Trials::Snap => "snap",
            Trials::SnapAndDtlsInStun => "snap+dtls-in-stun",
            Trials::SnapAndDtlsInStunWithoutHybrid => "snap+dtls-in-stun,x25519",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Trials::None => "without SNAP (SCTP's four-way handshake)",
            Trials::Snap => "--force-fieldtrials=WebRTC-Sctp-Snap/Enabled/ (SNAP offered)",
            Trials::SnapAndDtlsInStun => {
                "SNAP and WebRTC-IceHandshakeDtls (DTLS in STUN offered; pion answers neither); the hybrid \
                 ClientHello takes two datagrams, so the second waits for a check or goes plain"
            }
            Trials::SnapAndDtlsInStunWithoutHybrid => {
                "SNAP and DTLS in STUN, --disable-features=WebRtcPqcForDtls (X25519: a ClientHello that fits \
                 the first check; not Chromium's default)"
            }
        }
    }
}

/// One headless Chromium going round the servers (`runs` sessions each), its interface
/// captured meanwhile: the page's report and the datagrams.
#[allow(clippy::too_many_arguments)]
fn browser_run(
    testbed: &Testbed,
    browser: &Path,
    dumpcap: Option<&Path>,
    lite_lines: &Receiver<String>,
    page: &str,
    runs: usize,
    trials: Trials,
    scratch: &Path,
) -> anyhow::Result<(Value, Vec<Datagram>)> {
    let pcap = scratch.join(format!("{}.pcap", trials.key()));
    let capture = match dumpcap {
        Some(dumpcap) => {
            let filter = format!("udp and host {}", testbed.server_address());
            let file = pcap.to_string_lossy().into_owned();
            let (process, lines) = spawn(
                testbed,
                Host::Client,
                dumpcap,
                &["-q", "-i", "eth0", "-f", &filter, "-P", "-w", &file],
                Lines::Stderr,
            )?;
            wait_line(&lines, "Capturing on", Instant::now() + START_TIMEOUT, "dumpcap")?;
            Some((process, lines))
        }
        None => None,
    };
    let profile = scratch.join(format!("chromium-{}", trials.key()));
    let profile_arg = format!("--user-data-dir={}", profile.display());
    let mut args = vec![
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--use-fake-ui-for-media-stream",
        // Nothing but the page's own traffic on the captured interface.
        "--disable-background-networking",
        "--disable-component-update",
        &profile_arg,
    ];
    let flags = trials.flags();
    args.extend(flags.iter().map(String::as_str));
    args.push(page);
    let (chromium, _chromium_lines) = spawn(testbed, Host::Client, browser, &args, Lines::Stdout)?;
    // Three servers, a few round trips of signalling and setup each, and a browser to start.
    let deadline = Instant::now() + Duration::from_secs(60) + Duration::from_secs(3) * (3 * runs) as u32;
    let line = wait_line(lite_lines, "report: ", deadline, "the benchmark page");
    drop(chromium);
    if let Some((mut capture, _lines)) = capture {
        capture.stop();
    }
    let report: Value =
        serde_json::from_str(line?.trim_start_matches("report: ")).context("the page's report")?;
    if report["ok"] != true {
        bail!("the browser's sessions over the relay failed: {report}");
    }
    let datagrams = match std::fs::read(&pcap) {
        Ok(file) => capture::udp_datagrams(&file)?,
        Err(_) => Vec::new(),
    };
    Ok((report, datagrams))
}

/// A session of the report, with its first check found in the capture: the earliest Binding
/// request from its local port to the server between its answer and its echo.
fn place(s: &Value, datagrams: &[Datagram], client: Ipv4Addr, server: Ipv4Addr) -> Session {
    let num = |k: &str| s[k].as_f64();
    let (applied, echo) =
        (num("applied_unix_ms").unwrap_or(f64::NAN), num("echo_unix_ms").unwrap_or(f64::NAN));
    let port = s["port"].as_u64().and_then(|p| u16::try_from(p).ok());
    let first_check_unix = port.and_then(|port| {
        datagrams
            .iter()
            .filter(|d| d.src == SocketAddrV4::new(client, port) && *d.dst.ip() == server)
            // A few ms of slack: the page's clock and the capture's are both the wall clock.
            .filter(|d| d.unix_ms >= applied - 20.0 && d.unix_ms <= echo)
            .find(|d| matches!(capture::binding(&d.payload), Some(Binding::Check { .. })))
            .map(|d| d.unix_ms)
    });
    Session {
        from_answer: num("setup_ms").unwrap_or(f64::NAN),
        from_check: first_check_unix.map(|c| echo - c),
        check_after_answer: first_check_unix.map(|c| c - applied),
        snap: s["snap"] == true,
        port,
        first_check_unix,
        echo_unix: echo,
    }
}

/// Round trips of the browser's checks: each request's first sending to its success response.
fn check_rtts(datagrams: &[Datagram], client: Ipv4Addr) -> Vec<f64> {
    let mut sent = std::collections::HashMap::new();
    let mut rtts = Vec::new();
    for d in datagrams {
        match (capture::binding(&d.payload), *d.src.ip() == client) {
            (Some(Binding::Check { transaction, .. }), true) => {
                sent.entry(transaction).or_insert(d.unix_ms);
            }
            (Some(Binding::Success { transaction }), false) => {
                if let Some(at) = sent.remove(&transaction) {
                    rtts.push(d.unix_ms - at);
                }
            }
            _ => {}
        }
    }
    rtts
}

/// A session's datagrams from its first check to its echo, as flights: `+ms →` (to the
/// server) or `←`, then what each datagram carries; runs of one kind shown once with a count.
fn flights(datagrams: &[Datagram], s: &Session, client: Ipv4Addr, rtt: f64) -> String {
    let (Some(port), Some(start)) = (s.port, s.first_check_unix) else { return String::new() };
    let local = SocketAddrV4::new(client, port);
    let mut out: Vec<String> = Vec::new();
    let mut last: Option<(bool, f64)> = None;
    let mut kinds: Vec<(String, usize)> = Vec::new();
    let flush = |out: &mut Vec<String>, kinds: &mut Vec<(String, usize)>| {
        if let Some(last) = out.last_mut() {
            for (kind, n) in kinds.drain(..) {
                last.push(' ');
                last.push_str(&kind);
                if n > 1 {
                    last.push_str(&format!("×{n}"));
                }
            }
        }
    };
    for d in datagrams.iter().filter(|d| d.unix_ms >= start && d.unix_ms <= s.echo_unix + 0.5) {
        let outbound = match (d.src == local, d.dst == local) {
            (true, _) => true,
            (_, true) => false,
            _ => continue,
        };
        // A new flight: the other direction, or the same one after a pause.
        if last.is_none_or(|(o, t)| o != outbound || d.unix_ms - t > 5.0) {
            flush(&mut out, &mut kinds);
            let t = d.unix_ms - start;
            out.push(format!("{:.0}ms({:.1}) {}", t, t / rtt, if outbound { "→" } else { "←" }));
        }
        last = Some((outbound, d.unix_ms));
        let kind = capture::describe(&d.payload);
        match kinds.last_mut() {
            Some((k, n)) if *k == kind => *n += 1,
            _ => kinds.push((kind, 1)),
        }
    }
    flush(&mut out, &mut kinds);
    out.join(" | ")
}

/// `fastshake webrtc connect` from the client namespace, `runs` times: how many failed, and
/// the first-echo times (ms from the first check) of the others.
fn connect_runs(
    testbed: &Testbed,
    fastshake: &Path,
    url: &str,
    sctp: &str,
    dtls: &str,
    runs: usize,
) -> (usize, Vec<f64>) {
    let mut failed = 0;
    let mut times = Vec::new();
    for _ in 0..runs {
        let out = testbed
            .command(Host::Client, "timeout")
            .arg("20")
            .arg(fastshake)
            .args(["webrtc", "connect", url, "--sctp", sctp, "--dtls", dtls])
            .args(["--messages", "1", "--size", "16", "--timeout", "10"])
            .stdin(Stdio::null())
            .output();
        let time = out.ok().and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.split("first echo ").nth(1)?.split(" ms").next()?.parse::<f64>().ok())
        });
        match time {
            Some(t) => times.push(t),
            None => failed += 1,
        }
    }
    (failed, times)
}
