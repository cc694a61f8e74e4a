//! `fastshake bench flood`: floods of first packets over loopback, each answered statelessly,
//! measured side by side in one run — a DTLS ClientHello flood (HelloVerifyRequest answers,
//! RFC 6347 §4.2.1) against `fastshake server` with single-datagram and batched I/O, OpenSSL's
//! `DTLSv1_listen` loop and a bare UDP echo; an SCTP INIT flood (ALT-COOKIE answers) against
//! `fastshake sctp server`, usrsctp's echo server and the same echo. Every flood stops by itself
//! (count and time). Prints figures; asserts nothing.

mod flooder;
pub(crate) mod servers;

pub(crate) use flooder::{flood, loopback_sources, FloodLimits, FloodPlan, FloodResult};
use servers::{
    bare_echo_server, batched_echo_server, build_dtls_listen, free_udp_port, start_bound_process,
    start_dtls_listen, start_usrsctp_echo, ChildGuard, CpuAccount, ScratchDir, ServerThread,
};

use fastshake_dtls::Versions;
use fastshake_dtls::{CipherSuite, ClientConfig, Connection, Instant};
use fastshake_net::udp::BatchIo;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// A short run (a few seconds): small floods, 3 repetitions.
    #[arg(long)]
    quick: bool,
    /// Most datagrams in one flood (per server and repetition).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Longest flood in seconds (per server and repetition).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Offered rate, datagrams per second (the flooder sends as fast as it can below it).
    #[arg(long, value_name = "R", default_value_t = 2_000_000)]
    rate: u64,
    /// Repetitions of every flood; the median is printed.
    #[arg(long, value_name = "N")]
    rounds: Option<usize>,
    /// Source ports the flood comes from (one socket each, on 127.0.0.1).
    #[arg(long, value_name = "N", default_value_t = 64)]
    sources: usize,
    /// Datagrams sent from one source port in a row (one sendmmsg) before the next port.
    #[arg(long, value_name = "N", default_value_t = 8)]
    per_source: usize,
    /// The ClientHello flood as super-datagrams: each port's datagrams in a row leave in one UDP
    /// GSO send, which loopback hands unsplit to a UDP_GRO socket (the batched servers) and
    /// segments for others. A flood the kernel can coalesce; separate clients never send so.
    #[arg(long)]
    coalesce: bool,
    /// Let the scheduler place the servers and the flooder (default: the servers on one core,
    /// the flooder on another).
    #[arg(long)]
    no_pinning: bool,
    /// Flood only this server (already running) with ClientHellos, or INITs with --sctp: for
    /// profiling a server under flood.
    #[arg(long, value_name = "ADDR")]
    connect: Option<SocketAddr>,
    /// With --connect: an SCTP INIT flood.
    #[arg(long, requires = "connect")]
    sctp: bool,
    /// usrsctp's echo server (Debian `libusrsctp-examples`); skipped if absent.
    #[arg(long, default_value = "/usr/lib/usrsctp/echo_server")]
    usrsctp_echo_server: PathBuf,
    /// Also write every row's figures (answers/s, CPU per answer, bytes) as JSON to this file
    /// (what `fastshake lab all` reads).
    #[arg(long, value_name = "FILE", conflicts_with = "connect")]
    json: Option<PathBuf>,
}

/// How every flood of a run is sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub limits: FloodLimits,
    pub rounds: usize,
    pub sources: usize,
    pub per_source: usize,
    /// Each port's datagrams in a row as one UDP GSO send (see [`FloodPlan::coalesce`]).
    pub coalesce: bool,
}

impl Args {
    fn settings(&self) -> anyhow::Result<Settings> {
        let (count, secs, rounds) = if self.quick { (30_000, 0.5, 3) } else { (400_000, 2.0, 5) };
        let secs = self.duration.unwrap_or(secs);
        anyhow::ensure!(secs > 0.0 && secs <= 60.0, "--duration is between 0 and 60 s");
        anyhow::ensure!(self.rate > 0, "--rate is at least 1");
        Ok(Settings {
            limits: FloodLimits {
                max_packets: self.count.unwrap_or(count).max(1),
                max_time: Duration::from_secs_f64(secs),
                rate_pps: self.rate,
            },
            rounds: self.rounds.unwrap_or(rounds).max(1),
            sources: self.sources.clamp(1, 1024),
            // A GSO send carries at most 64 segments on older kernels.
            per_source: self.per_source.clamp(1, if self.coalesce { 64 } else { 1024 }),
            coalesce: self.coalesce,
        })
    }
}

/// What keeps a measured server running until its row is dropped: its thread, its process, or
/// whatever else the caller started.
pub(crate) type Running = Box<dyn Send>;

/// One server under flood and what each repetition measured.
pub(crate) struct Row {
    pub label: String,
    pub addr: SocketAddr,
    /// The one source socket to flood from, for a server told its peer's port in advance
    /// (usrsctp); otherwise the flood comes from many fresh ports.
    pub fixed_source: Option<UdpSocket>,
    pub cpu: Option<CpuAccount>,
    pub rounds: Vec<FloodResult>,
    pub error: Option<String>,
    _running: Option<Running>,
}

impl Row {
    pub fn new(label: impl Into<String>, addr: SocketAddr, cpu: Option<CpuAccount>, running: Running) -> Row {
        Row {
            label: label.into(),
            addr,
            fixed_source: None,
            cpu,
            rounds: Vec::new(),
            error: None,
            _running: Some(running),
        }
    }
    fn thread(label: &str, server: anyhow::Result<ServerThread>) -> Row {
        match server {
            Ok(s) => Row::new(label, s.addr, s.cpu.clone(), Box::new(s)),
            Err(e) => Row::failed(label, e),
        }
    }
    fn process(label: &str, port: u16, guard: anyhow::Result<ChildGuard>) -> Row {
        match guard {
            Ok(g) => Row::new(label, SocketAddr::from(([127, 0, 0, 1], port)), Some(g.cpu()), Box::new(g)),
            Err(e) => Row::failed(label, e),
        }
    }
    pub fn failed(label: &str, error: anyhow::Error) -> Row {
        Row {
            label: label.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            fixed_source: None,
            cpu: None,
            rounds: Vec::new(),
            error: Some(format!("{error:#}")),
            _running: None,
        }
    }
    pub fn median_rate(&self) -> f64 {
        median(self.rounds.iter().map(FloodResult::answers_per_second).collect())
    }
    fn median_of(&self, f: impl Fn(&FloodResult) -> Option<f64>) -> Option<f64> {
        let values: Vec<f64> = self.rounds.iter().filter_map(f).collect();
        (!values.is_empty()).then(|| median(values))
    }
    /// Median server CPU per answer, microseconds.
    pub fn cpu_us(&self) -> Option<f64> {
        self.median_of(|r| r.cpu_per_answer().map(|d| d.as_secs_f64() * 1e6))
    }
    pub fn answer_size(&self) -> usize {
        self.rounds.iter().map(|r| r.answer_size).max().unwrap_or(0)
    }
    pub fn answers(&self) -> u64 {
        self.rounds.iter().map(|r| r.answers).sum()
    }
    pub fn bytes_out_per_byte_in(&self) -> f64 {
        let (out, offered) =
            self.rounds.iter().fold((0, 0), |(o, i), r| (o + r.answer_bytes, i + r.sent_bytes));
        if offered > 0 {
            out as f64 / offered as f64
        } else {
            0.0
        }
    }
    fn kind(&self) -> String {
        self.rounds.iter().find_map(|r| r.answer_kind.clone()).unwrap_or_else(|| "no answer".into())
    }
    /// The row's figures for `--json`.
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "label": self.label,
            "error": self.error,
            "rounds": self.rounds.len(),
            "answer": self.kind(),
            "median_answers_per_s": (self.error.is_none() && !self.rounds.is_empty()).then(|| self.median_rate()),
            "median_cpu_us_per_answer": self.cpu_us(),
            "answer_bytes": self.answer_size(),
            "bytes_out_per_byte_in": self.bytes_out_per_byte_in(),
        })
    }
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Floods every row `settings.rounds` times with `packet`, interleaving the rows so that load
/// from elsewhere on the machine does not fall on one of them only.
pub(crate) fn measure(rows: &mut [Row], packet: &[u8], describe: fn(&[u8]) -> String, settings: &Settings) {
    for _ in 0..settings.rounds {
        for row in rows.iter_mut().filter(|r| r.error.is_none()) {
            let sources = match &row.fixed_source {
                Some(socket) => socket.try_clone().map(|s| vec![s]).map_err(anyhow::Error::from),
                None => loopback_sources(settings.sources),
            };
            let plan = FloodPlan {
                target: row.addr,
                packet,
                limits: settings.limits,
                per_source: settings.per_source,
                coalesce: settings.coalesce,
                describe,
            };
            let cpu_before = row.cpu.as_ref().and_then(CpuAccount::read);
            match sources.and_then(|s| flood(s, plan)) {
                Ok(mut r) => {
                    let cpu_after = row.cpu.as_ref().and_then(CpuAccount::read);
                    r.server_cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
                    row.rounds.push(r);
                }
                Err(e) => row.error = Some(format!("{e:#}")),
            }
        }
    }
}

/// What held a row's rate down, from the CPU each side used and what got lost.
fn limited_by(row: &Row, settings: &Settings) -> String {
    let lost: u64 = row.rounds.iter().map(FloodResult::lost).sum();
    let sent: u64 = row.rounds.iter().map(|r| r.sent).sum();
    let server = row.median_of(FloodResult::server_load);
    let flooder = row.median_of(FloodResult::flooder_load);
    let offered = median(row.rounds.iter().map(FloodResult::offered_per_second).collect());
    let pct = |x: Option<f64>| x.map_or("?".into(), |v| format!("{:.0}%", v * 100.0));
    let loads = format!("server {} of a core, flooder {}", pct(server), pct(flooder));
    if sent > 0 && (lost as f64) < 0.02 * sent as f64 {
        if offered >= 0.9 * settings.limits.rate_pps as f64 {
            format!("the offered rate ({loads})")
        } else {
            format!("the flooder: server kept up ({loads})")
        }
    } else if server.is_some_and(|s| s >= 0.85) {
        format!("server CPU ({loads})")
    } else {
        format!("the 2 cores shared ({loads})")
    }
}

fn print_rows(rows: &[Row], settings: &Settings) {
    println!(
        "{:<52} {:>10} {:>10} {:>17} {:>8} {:>8} {:>6} {:>8} {:>14}  dropped at srv/fld",
        "server [answer]",
        "offered/s",
        "answers/s",
        "(min-max)",
        "srv us/a",
        "fld us/d",
        "ans B",
        "out/in",
        "lost",
    );
    for row in rows {
        if let Some(e) = &row.error {
            println!("{:<52} not run: {e}", row.label);
            continue;
        }
        let rates: Vec<f64> = row.rounds.iter().map(FloodResult::answers_per_second).collect();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(0.0, f64::max);
        let sent: u64 = row.rounds.iter().map(|r| r.sent).sum();
        let lost: u64 = row.rounds.iter().map(FloodResult::lost).sum();
        let flooder_us = row.median_of(|r| r.flooder_cpu_per_datagram().map(|d| d.as_secs_f64() * 1e6));
        let dropped = |f: fn(&FloodResult) -> Option<u64>| {
            row.rounds.iter().map(f).sum::<Option<u64>>().map_or("?".into(), |d| d.to_string())
        };
        println!(
            "{:<52} {:>10.0} {:>10.0} {:>17} {:>8} {:>8} {:>6} {:>8.2} {:>14}  {} / {}",
            format!("{} [{}]", row.label, row.kind()),
            median(row.rounds.iter().map(FloodResult::offered_per_second).collect()),
            row.median_rate(),
            format!("({min:.0}-{max:.0})"),
            row.cpu_us().map_or("-".into(), |c| format!("{c:.2}")),
            flooder_us.map_or("-".into(), |c| format!("{c:.2}")),
            row.answer_size(),
            row.bytes_out_per_byte_in(),
            format!("{lost} ({:.1}%)", if sent > 0 { 100.0 * lost as f64 / sent as f64 } else { 0.0 }),
            dropped(|r| r.dropped_at_server),
            dropped(|r| r.dropped_at_flooder),
        );
        println!("{:<52}   limited by {}", "", limited_by(row, settings));
    }
}

fn print_legend(settings: &Settings) {
    println!(
        "answers/s: median of {} floods, each over its first to last answer; srv us/a: the server's CPU",
        settings.rounds
    );
    println!("  per answer (schedstat, all its threads); fld us/d: the flooder's CPU per datagram sent (its");
    println!(
        "  sending and counting threads); out/in: answer bytes over flood bytes, dropped ones included;"
    );
    println!("  lost: sent - answered over all floods; dropped at srv/fld: of them, how many the kernel dropped at");
    println!("  the server's full socket buffer and, of the answers, at the flooder's (/proc/net/udp).");
}

/// `a` over `b` with a verdict against `target`.
fn ratio_line(what: &str, a: f64, b: f64, target: f64) -> String {
    if a > 0.0 && b > 0.0 {
        let r = a / b;
        let verdict = if r >= target { "met" } else { "NOT met" };
        format!("{what}: {r:.2}x (target >= {target:.2}x): {verdict}")
    } else {
        format!("{what}: not measured")
    }
}

// ---------------------------------------------------------------------------------------------
// The DTLS ClientHello flood.

const PSK_IDENTITY: &str = "flood";
const PSK_KEY: [u8; 16] = *b"fastshake-flood!";

/// A real first ClientHello of our client (PSK suites, no cookie): what a flood of new clients
/// sends.
pub(crate) fn client_hello() -> anyhow::Result<Vec<u8>> {
    let config = Arc::new(ClientConfig {
        versions: Versions::Dtls12,
        suites: vec![CipherSuite::PskWithAes128Ccm8, CipherSuite::PskWithAes128GcmSha256],
        ..ClientConfig::psk(PSK_IDENTITY.as_bytes(), PSK_KEY)
    });
    let server = SocketAddr::from(([127, 0, 0, 1], 4433));
    let mut client = Connection::client(config, Instant::from_millis(1), server, [0x46; 32]);
    let hello = client.poll_transmit(Instant::from_millis(1)).map(|t| t.payload);
    hello.ok_or_else(|| anyhow::anyhow!("the client sent no ClientHello"))
}

/// Names the DTLS messages of an answer.
pub(crate) fn describe_dtls(answer: &[u8]) -> String {
    fastshake_net::dtls::describe_datagram(answer).join(" + ")
}

/// `fastshake server` on a free port, 1 worker, batching as given.
fn our_dtls_server(batch: BatchIo) -> anyhow::Result<(u16, anyhow::Result<ChildGuard>)> {
    let port = free_udp_port()?;
    let mut command = servers::server_command(&crate::fastshake_program()?);
    command
        .args(["server", "--listen", &format!("127.0.0.1:{port}"), "--psk-identity", PSK_IDENTITY])
        .args(["--psk", &hex::encode(PSK_KEY), "--workers", "1", "--batch", &batch.to_string()]);
    Ok((port, start_bound_process(command, "fastshake server", port)))
}

/// The rows of the DTLS flood: the floors first, then ours single and batched, then OpenSSL.
pub(crate) const DTLS_FLOOR: usize = 0;
pub(crate) const DTLS_OURS_SINGLE: usize = 2;
pub(crate) const DTLS_OURS_BATCHED: usize = 3;
pub(crate) const DTLS_OPENSSL: usize = 4;

/// The floors and the OpenSSL anchor; `ours` adds our two servers (single, batched) between.
pub(crate) fn dtls_rows(scratch: &ScratchDir, ours: [Row; 2]) -> Vec<Row> {
    let [single, batched] = ours;
    let openssl = build_dtls_listen(&scratch.0).and_then(|program| {
        let port = free_udp_port()?;
        Ok((port, start_dtls_listen(&program, port)))
    });
    let openssl = match openssl {
        Ok((port, guard)) => Row::process("OpenSSL DTLSv1_listen loop", port, guard),
        Err(e) => Row::failed("OpenSSL DTLSv1_listen loop", e),
    };
    vec![
        Row::thread("bare UDP echo, single-datagram (floor)", bare_echo_server()),
        Row::thread("bare UDP echo, batched (quinn-udp)", batched_echo_server()),
        single,
        batched,
        openssl,
    ]
}

/// The HelloVerifyRequest checks: answer no larger than the ClientHello (RFC 6347 §4.2.1).
pub(crate) fn amplification_line(row: &Row, hello_len: usize) -> String {
    let size = row.answer_size();
    let ratio = row.bytes_out_per_byte_in();
    let ok = size <= hello_len && ratio <= 1.0;
    format!(
        "{}: answer {size} B for a {hello_len} B ClientHello, {ratio:.2} B out per B in (<= 1, RFC 6347 §4.2.1): {}",
        row.label,
        if ok { "met" } else { "NOT met" }
    )
}

fn dtls_flood(settings: &Settings, scratch: &ScratchDir) -> anyhow::Result<Vec<serde_json::Value>> {
    let hello = client_hello()?;
    println!(
        "== DTLS ClientHello flood: {} B ClientHello (no cookie), {} floods per server, each at most {} datagrams or {:.1} s,",
        hello.len(),
        settings.rounds,
        settings.limits.max_packets,
        settings.limits.max_time.as_secs_f64()
    );
    let sends = if settings.coalesce {
        "one UDP GSO send each: COALESCED, not the separate datagrams of separate clients"
    } else {
        "sendmmsg: separate datagrams"
    };
    println!(
        "   offered up to {} /s from {} source ports on 127.0.0.1, {} datagrams per port in a row ({sends}) ==",
        settings.limits.rate_pps, settings.sources, settings.per_source
    );
    let ours = [BatchIo::Off, BatchIo::On].map(|batch| {
        let label = format!("fastshake server --batch {batch} --workers 1");
        match our_dtls_server(batch) {
            Ok((port, guard)) => Row::process(&label, port, guard),
            Err(e) => Row::failed(&label, e),
        }
    });
    let mut rows = dtls_rows(scratch, ours);
    measure(&mut rows, &hello, describe_dtls, settings);
    print_rows(&rows, settings);
    print_legend(settings);
    if settings.coalesce {
        coalesced_ratios(&rows);
    } else {
        dtls_verdicts(&rows, hello.len());
    }
    Ok(rows.iter().map(Row::json).collect())
}

/// Under a coalesced flood every row, the floors included, meets super-datagrams: its ratios
/// say what GRO and GSO give, not the targets' (separate datagrams from separate clients).
fn coalesced_ratios(rows: &[Row]) {
    let rate = |i: usize| rows.get(i).map_or(0.0, Row::median_rate);
    let per_cpu = |i: usize| rows.get(i).and_then(Row::cpu_us).map_or(0.0, |us| 1e6 / us);
    let over = |a: f64, b: f64| a / b.max(f64::MIN_POSITIVE);
    println!("Coalesced flood: no target is judged here (the targets count separate datagrams, the run without --coalesce).");
    println!(
        "   answers/s over the single-datagram echo under this flood: batched echo {:.2}x, ours batched {:.2}x, ours single {:.2}x",
        over(rate(DTLS_FLOOR + 1), rate(DTLS_FLOOR)),
        over(rate(DTLS_OURS_BATCHED), rate(DTLS_FLOOR)),
        over(rate(DTLS_OURS_SINGLE), rate(DTLS_FLOOR)),
    );
    println!(
        "   answers per CPU-second over the single-datagram echo's: batched echo {:.2}x, ours batched {:.2}x, ours single {:.2}x",
        over(per_cpu(DTLS_FLOOR + 1), per_cpu(DTLS_FLOOR)),
        over(per_cpu(DTLS_OURS_BATCHED), per_cpu(DTLS_FLOOR)),
        over(per_cpu(DTLS_OURS_SINGLE), per_cpu(DTLS_FLOOR)),
    );
}

pub(crate) fn dtls_verdicts(rows: &[Row], hello_len: usize) {
    let rate = |i: usize| rows.get(i).map_or(0.0, Row::median_rate);
    let cpu = |i: usize| rows.get(i).and_then(Row::cpu_us).unwrap_or(0.0);
    for i in [DTLS_OURS_SINGLE, DTLS_OURS_BATCHED, DTLS_OPENSSL] {
        if let Some(row) = rows.get(i).filter(|r| r.error.is_none()) {
            println!("{}", amplification_line(row, hello_len));
        }
    }
    println!(
        "{}",
        ratio_line(
            "Target: HVR answers/s, single-datagram I/O, over the single-datagram bare echo",
            rate(DTLS_OURS_SINGLE),
            rate(DTLS_FLOOR),
            0.9
        )
    );
    println!(
        "{}",
        ratio_line(
            "Target: HVR answers/s, batched I/O, over the single-datagram bare echo",
            rate(DTLS_OURS_BATCHED),
            rate(DTLS_FLOOR),
            2.0
        )
    );
    // Per CPU-second: what the rates would be with a core each, whatever else runs.
    let per_cpu = |i: usize| if cpu(i) > 0.0 { 1e6 / cpu(i) } else { 0.0 };
    print_batching_ceiling(rows, DTLS_FLOOR);
    println!(
        "   by server CPU per answer: single {:.2}x, batched {:.2}x the single-datagram echo's answers per CPU-second",
        per_cpu(DTLS_OURS_SINGLE) / per_cpu(DTLS_FLOOR).max(f64::MIN_POSITIVE),
        per_cpu(DTLS_OURS_BATCHED) / per_cpu(DTLS_FLOOR).max(f64::MIN_POSITIVE),
    );
    println!(
        "   beside OpenSSL's DTLSv1_listen loop: single {:.2}x, batched {:.2}x its answers/s; {:.2}x / {:.2}x its answers per CPU-second",
        rate(DTLS_OURS_SINGLE) / rate(DTLS_OPENSSL).max(f64::MIN_POSITIVE),
        rate(DTLS_OURS_BATCHED) / rate(DTLS_OPENSSL).max(f64::MIN_POSITIVE),
        per_cpu(DTLS_OURS_SINGLE) / per_cpu(DTLS_OPENSSL).max(f64::MIN_POSITIVE),
        per_cpu(DTLS_OURS_BATCHED) / per_cpu(DTLS_OPENSSL).max(f64::MIN_POSITIVE),
    );
    println!(
        "   (OpenSSL's cookie here: HMAC-SHA256 of the client's address in the C callback; ours: SipHash-2-4 keyed MAC over"
    );
    println!("   the address and the ClientHello's fields, RFC 6347 §4.2.1)");
}

/// What batching gives the bare echo itself: the most the batched server can expect over the
/// single-datagram echo, since both pay the same kernel path per datagram.
fn print_batching_ceiling(rows: &[Row], floor: usize) {
    let batched_floor = floor + 1;
    let (Some(single), Some(batched)) = (rows.get(floor), rows.get(batched_floor)) else { return };
    let by_rate = batched.median_rate() / single.median_rate().max(f64::MIN_POSITIVE);
    let by_cpu = match (single.cpu_us(), batched.cpu_us()) {
        (Some(s), Some(b)) if b > 0.0 => s / b,
        _ => 0.0,
    };
    println!(
        "   the ceiling: the bare batched echo itself answers {by_rate:.2}x the single-datagram echo's rate and {by_cpu:.2}x its answers"
    );
    println!(
        "   per CPU-second (recvmmsg saves system calls, not the per-datagram path through the loopback stack)"
    );
}

// ---------------------------------------------------------------------------------------------
// The SCTP INIT flood.

pub(crate) const SCTP_FLOOR: usize = 0;
pub(crate) const SCTP_OURS_SINGLE: usize = 2;
pub(crate) const SCTP_OURS_BATCHED: usize = 3;
pub(crate) const SCTP_USRSCTP: usize = 4;

/// `fastshake sctp server --mode alt` on a free port, 1 worker, batching as given.
fn our_sctp_server(batch: BatchIo) -> anyhow::Result<(u16, anyhow::Result<ChildGuard>)> {
    let port = free_udp_port()?;
    let mut command = servers::server_command(&crate::fastshake_program()?);
    command
        .args(["sctp", "server", "--listen", &format!("127.0.0.1:{port}"), "--port"])
        .arg(crate::sctp::FLOOD_DST_SCTP_PORT.to_string())
        .args(["--mode", "alt", "--workers", "1", "--batch", &batch.to_string()]);
    Ok((port, start_bound_process(command, "fastshake sctp server", port)))
}

/// usrsctp's echo_server (`program`) as the row `label`: usrsctp answers to the one UDP port it
/// is told, so the flood comes from that port (the row's fixed source). A missing program or a
/// failed start is a failed row.
pub(crate) fn usrsctp_row(label: &str, program: &std::path::Path) -> Row {
    if !program.exists() {
        let missing =
            anyhow::anyhow!("{} not found (apt-get install libusrsctp-examples)", program.display());
        return Row::failed(label, missing);
    }
    let started = (|| {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        let their_port = free_udp_port()?;
        let guard = start_usrsctp_echo(program, their_port, socket.local_addr()?.port())?;
        anyhow::Ok((socket, their_port, guard))
    })();
    match started {
        Ok((socket, port, guard)) => {
            let mut row = Row::process(label, port, Ok(guard));
            row.fixed_source = Some(socket);
            row
        }
        Err(e) => Row::failed(label, e),
    }
}

/// The floors and usrsctp around our two servers (single, batched).
pub(crate) fn sctp_rows(usrsctp: &std::path::Path, ours: [Row; 2]) -> Vec<Row> {
    let [single, batched] = ours;
    const USRSCTP: &str = "usrsctp echo_server (one source port)";
    let usrsctp = usrsctp_row(USRSCTP, usrsctp);
    vec![
        Row::thread("bare UDP echo, single-datagram (floor)", bare_echo_server()),
        Row::thread("bare UDP echo, batched (quinn-udp)", batched_echo_server()),
        single,
        batched,
        usrsctp,
    ]
}

fn sctp_flood(settings: &Settings, usrsctp: &std::path::Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let init = crate::sctp::flood_init(crate::sctp::FLOOD_DST_SCTP_PORT);
    println!(
        "== SCTP INIT flood: {} B INIT with an empty ALT-COOKIE (UDP encapsulation), {} floods per server, each at most",
        init.len(),
        settings.rounds
    );
    println!(
        "   {} datagrams or {:.1} s, offered up to {} /s from {} source ports, {} per port in a row (sendmmsg: separate datagrams) ==",
        settings.limits.max_packets,
        settings.limits.max_time.as_secs_f64(),
        settings.limits.rate_pps,
        settings.sources,
        settings.per_source
    );
    let ours = [BatchIo::Off, BatchIo::On].map(|batch| {
        let label = format!("fastshake sctp server --batch {batch} --workers 1");
        match our_sctp_server(batch) {
            Ok((port, guard)) => Row::process(&label, port, guard),
            Err(e) => Row::failed(&label, e),
        }
    });
    let mut rows = sctp_rows(usrsctp, ours);
    measure(&mut rows, &init, crate::sctp::describe_answer, settings);
    print_rows(&rows, settings);
    print_legend(settings);
    sctp_verdicts(&rows, init.len());
    Ok(rows.iter().map(Row::json).collect())
}

pub(crate) fn sctp_verdicts(rows: &[Row], init_len: usize) {
    let rate = |i: usize| rows.get(i).map_or(0.0, Row::median_rate);
    if let Some(row) = rows.get(SCTP_OURS_SINGLE) {
        println!(
            "ALT-COOKIE answer: {} B for a {init_len} B INIT, {:.2} B out per B in",
            row.answer_size(),
            row.bytes_out_per_byte_in()
        );
    }
    println!(
        "{}",
        ratio_line(
            "ALT-COOKIE answers/s, single-datagram I/O, over the single-datagram bare echo",
            rate(SCTP_OURS_SINGLE),
            rate(SCTP_FLOOR),
            0.9
        )
    );
    println!(
        "{}",
        ratio_line(
            "ALT-COOKIE answers/s, batched I/O, over the single-datagram bare echo",
            rate(SCTP_OURS_BATCHED),
            rate(SCTP_FLOOR),
            2.0
        )
    );
    print_batching_ceiling(rows, SCTP_FLOOR);
    if rows.get(SCTP_USRSCTP).is_some_and(|r| r.error.is_none()) {
        println!(
            "   beside usrsctp's INIT-ACK (its flood from one source port): single {:.2}x, batched {:.2}x its answers/s",
            rate(SCTP_OURS_SINGLE) / rate(SCTP_USRSCTP).max(f64::MIN_POSITIVE),
            rate(SCTP_OURS_BATCHED) / rate(SCTP_USRSCTP).max(f64::MIN_POSITIVE),
        );
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let settings = args.settings()?;
    if let Some(addr) = args.connect {
        return flood_one(addr, args.sctp, &settings);
    }
    let scratch = ScratchDir::new("flood")?;
    let pinning = if args.no_pinning { None } else { servers::pin_to_separate_cores() };
    match pinning {
        Some(p) => println!(
            "{} cores here: every server runs on core {}, the flooder (sending and counting threads) on core {};\n\
             other processes on the machine still take their share of both.",
            available_cores(),
            p.server,
            p.flooder
        ),
        None => println!("{} cores here, shared by the flooder and each server as the scheduler sees fit.", available_cores()),
    }
    let dtls = dtls_flood(&settings, &scratch)?;
    // usrsctp listens to one port and takes no GSO; the coalesced flood is the DTLS one's.
    let sctp = if settings.coalesce {
        Vec::new()
    } else {
        println!();
        sctp_flood(&settings, &args.usrsctp_echo_server)?
    };
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "bench": "flood",
            "quick": args.quick,
            "rounds": settings.rounds,
            // The rows' order: the floors (single, batched echo), ours (single, batched), the anchor.
            "dtls": dtls,
            "sctp": sctp,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
    }
    Ok(())
}

/// Floods a server started elsewhere (no CPU account of it here).
fn flood_one(addr: SocketAddr, sctp: bool, settings: &Settings) -> anyhow::Result<()> {
    let describe: fn(&[u8]) -> String = if sctp { crate::sctp::describe_answer } else { describe_dtls };
    let packet =
        if sctp { crate::sctp::flood_init(crate::sctp::FLOOD_DST_SCTP_PORT) } else { client_hello()? };
    let mut rows = vec![Row::new(addr.to_string(), addr, None, Box::new(()))];
    measure(&mut rows, &packet, describe, settings);
    print_rows(&rows, settings);
    Ok(())
}

fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastshake_dtls::ServerConfig;
    use fastshake_net::dtls::{DtlsServer, ServerOptions};
    use fastshake_net::sctp::SctpDriver;
    use fastshake_sctp::{Config, HandshakeMode};

    /// Tiny floods: enough for every server to answer, far too few to load anything.
    fn tiny() -> Settings {
        Settings {
            limits: FloodLimits { max_packets: 300, max_time: Duration::from_secs(2), rate_pps: 20_000 },
            rounds: 1,
            sources: 4,
            per_source: 4,
            coalesce: false,
        }
    }

    /// Our driver (the one the commands run) on a thread of its own until the row is dropped.
    struct InProcess {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Drop for InProcess {
        fn drop(&mut self) {
            if let Some(stop) = self.stop.take() {
                let _ = stop.send(());
            }
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    fn in_process<F, Fut>(label: String, serve: F) -> Row
    where
        F: FnOnce(std::sync::mpsc::Sender<SocketAddr>, tokio::sync::oneshot::Receiver<()>) -> Fut
            + Send
            + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (account_tx, account_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let _ = account_tx.send(CpuAccount::this_thread());
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(serve(addr_tx, stop_rx));
        });
        let running = InProcess { stop: Some(stop_tx), thread: Some(thread) };
        let addr = addr_rx.recv_timeout(Duration::from_secs(10)).expect("the server binds");
        let cpu = account_rx.recv_timeout(Duration::from_secs(1)).ok().flatten();
        Row::new(label, addr, cpu, Box::new(running))
    }

    fn our_dtls_in_process(batch: BatchIo) -> Row {
        in_process(format!("fastshake server driver, batch {batch}"), move |addr_tx, stop| async move {
            let config = Arc::new(ServerConfig {
                versions: Versions::Dtls12,
                ..ServerConfig::psk(PSK_IDENTITY.as_bytes(), PSK_KEY)
            });
            let options = ServerOptions { workers: 1, batch, ..ServerOptions::default() };
            let server = DtlsServer::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config, options)
                .await
                .expect("binds");
            addr_tx.send(server.local_addr()).unwrap();
            let _ = stop.await;
            let _ = server.shutdown().await;
        })
    }

    fn our_sctp_in_process(batch: BatchIo) -> Row {
        in_process(
            format!("fastshake sctp server driver, batch {batch}"),
            move |addr_tx, mut stop| async move {
                let config = Config {
                    local_port: crate::sctp::FLOOD_DST_SCTP_PORT,
                    listen: true,
                    mode: HandshakeMode::AltOnly,
                    ..Config::default()
                };
                let mut driver =
                    SctpDriver::bind_worker(SocketAddr::from(([127, 0, 0, 1], 0)), Arc::new(config), batch)
                        .expect("binds");
                addr_tx.send(driver.local_addr()).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut stop => break,
                        event = driver.next_event() => if event.is_err() { break },
                    }
                }
            },
        )
    }

    #[test]
    fn every_dtls_server_answers_with_hello_verify_requests_no_larger_than_the_client_hello() {
        let scratch = ScratchDir::new("flood-test").unwrap();
        let ours = [BatchIo::Off, BatchIo::On].map(our_dtls_in_process);
        let mut rows = dtls_rows(&scratch, ours);
        let hello = client_hello().unwrap();
        measure(&mut rows, &hello, describe_dtls, &tiny());
        for row in &rows {
            assert_eq!(row.error, None, "{}", row.label);
            assert!(row.answers() > 0, "{} answered nothing", row.label);
        }
        for i in [DTLS_OURS_SINGLE, DTLS_OURS_BATCHED, DTLS_OPENSSL] {
            let row = &rows[i];
            assert!(row.kind().starts_with("HelloVerifyRequest"), "{}: {}", row.label, row.kind());
            assert!(row.answer_size() <= hello.len(), "{}: {} B", row.label, row.answer_size());
            assert!(row.bytes_out_per_byte_in() <= 1.0);
            let line = amplification_line(row, hello.len());
            assert!(line.ends_with(": met"), "{line}");
        }
        // The echoes send the ClientHello back: a bigger answer than ours fails the check.
        assert!(amplification_line(&rows[DTLS_FLOOR], hello.len() - 1).ends_with("NOT met"));
    }

    #[test]
    fn every_sctp_server_answers_the_init_flood() {
        let usrsctp = std::path::Path::new("/usr/lib/usrsctp/echo_server");
        let ours = [BatchIo::Off, BatchIo::On].map(our_sctp_in_process);
        let mut rows = sctp_rows(usrsctp, ours);
        let init = crate::sctp::flood_init(crate::sctp::FLOOD_DST_SCTP_PORT);
        measure(&mut rows, &init, crate::sctp::describe_answer, &tiny());
        for (i, row) in rows.iter().enumerate() {
            if i == SCTP_USRSCTP && !usrsctp.exists() {
                eprintln!("skipped: {} (no libusrsctp-examples)", row.label);
                continue;
            }
            assert_eq!(row.error, None, "{}", row.label);
            assert!(row.answers() > 0, "{} answered nothing", row.label);
        }
        for i in [SCTP_OURS_SINGLE, SCTP_OURS_BATCHED] {
            assert!(rows[i].kind().contains("ALT-COOKIE"), "{}", rows[i].kind());
            assert!(rows[i].answer_size() < init.len());
        }
    }

    /// A tiny flood of "ping" from 5 ports, 3 datagrams per port in a row.
    fn ping_flood(target: SocketAddr, coalesce: bool) -> FloodResult {
        let plan = FloodPlan {
            target,
            packet: b"ping",
            limits: tiny().limits,
            per_source: 3,
            coalesce,
            describe: |a| String::from_utf8_lossy(a).into_owned(),
        };
        flood(loopback_sources(5).unwrap(), plan).unwrap()
    }

    #[test]
    fn the_flood_stops_at_its_count_and_every_answer_is_counted() {
        let echo = bare_echo_server().unwrap();
        let result = ping_flood(echo.addr, false);
        assert_eq!(result.sent, 300);
        assert_eq!(result.sent_bytes, 1200);
        // Loopback at 20k/s into an idle echo: nothing is lost.
        assert_eq!(result.answers, 300);
        assert_eq!(result.answer_kind.as_deref(), Some("ping"));
        assert_eq!(result.lost(), 0);
    }

    #[test]
    fn a_coalesced_flood_counts_every_answer_of_every_super_datagram() {
        // The batched echo receives each port's three datagrams as one (GRO) and answers them
        // as one GSO send, which the flooder reads as one datagram and counts as three.
        let echo = batched_echo_server().unwrap();
        let result = ping_flood(echo.addr, true);
        assert_eq!(result.sent, 300);
        assert_eq!(result.answers, 300);
        assert_eq!(result.answer_bytes, 1200);
        assert_eq!(result.answer_size, 4, "one answer's size, not its super-datagram's");
        assert_eq!(result.answer_kind.as_deref(), Some("ping"));
    }

    #[test]
    fn settings_follow_the_options_and_stay_bounded() {
        let args = |extra: &[&str]| {
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                flood: Args,
            }
            let argv = std::iter::once("flood").chain(extra.iter().copied());
            <Cli as clap::Parser>::try_parse_from(argv).map(|c| c.flood)
        };
        let quick = args(&["--quick"]).unwrap().settings().unwrap();
        assert_eq!((quick.limits.max_packets, quick.rounds), (30_000, 3));
        let chosen =
            args(&["--count", "7", "--duration", "0.25", "--rate", "1000"]).unwrap().settings().unwrap();
        assert_eq!(chosen.limits.max_packets, 7);
        assert_eq!(chosen.limits.max_time, Duration::from_millis(250));
        assert_eq!(chosen.limits.rate_pps, 1000);
        assert!(args(&["--duration", "0"]).unwrap().settings().is_err());
        assert!(args(&["--duration", "3600"]).unwrap().settings().is_err());
        assert!(args(&["--sctp"]).is_err(), "--sctp needs --connect");
    }
}
