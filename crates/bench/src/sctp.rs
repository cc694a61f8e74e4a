//! `fastshake bench sctp`: INIT-flood answers and time to first byte, beside usrsctp and the
//! bare UDP echo floor. Prints figures; asserts nothing.

use crate::flood::servers::{bare_echo_server, free_udp_port, start_bound_process, ChildGuard, ServerThread};
use crate::flood::{median, usrsctp_row, FloodLimits, FloodResult, Row, Settings};
use anyhow::Context;
use fastshake_sctp::packet::{Chunk, ErrorCause, InitChunk, Packet, Param, PARAM_IPV4, PARAM_IPV6};
use fastshake_sctp::{Config, Endpoint, HandshakeMode, Instant};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

#[derive(clap::Args)]
pub struct Args {
    /// A short run (about 10 s): smaller floods, fewer delays.
    #[arg(long)]
    quick: bool,
    /// usrsctp's echo server (Debian `libusrsctp-examples`); skipped if absent.
    #[arg(long, default_value = "/usr/lib/usrsctp/echo_server")]
    usrsctp_echo_server: PathBuf,
    /// Only the engine-alone figures (no sockets, no simulator): for profiling.
    #[arg(long)]
    engine_only: bool,
    /// Offered INIT rate of the flood, packets per second.
    #[arg(long, default_value_t = 400_000)]
    rate: u64,
    /// Also write the figures as JSON to this file (what `fastshake lab all` reads).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `fastshake sctp server --mode alt` (this very binary) on a free loopback port.
fn start_own_server() -> anyhow::Result<(ChildGuard, u16)> {
    let port = free_udp_port()?;
    let mut command = Command::new(crate::fastshake_program()?);
    command
        .args(["sctp", "server", "--listen", &format!("127.0.0.1:{port}"), "--port"])
        .arg(FLOOD_DST_SCTP_PORT.to_string())
        .args(["--mode", "alt"]);
    Ok((start_bound_process(command, "fastshake sctp server", port)?, port))
}

/// The flood's INIT: 112 bytes (common header and one INIT chunk) announcing the extensions
/// seed 004's flood announced — Forward-TSN, the Supported Extensions list (ASCONF, ASCONF-ACK,
/// RE-CONFIG, FORWARD-TSN, AUTH, I-DATA, PKTDROP), AUTH's RANDOM, CHUNKS and HMAC-ALGO — plus an
/// empty ALT-COOKIE.
pub(crate) fn flood_init(dst_port: u16) -> Vec<u8> {
    let params = vec![
        Param::SupportedAddressTypes(vec![PARAM_IPV4, PARAM_IPV6]),
        Param::Unknown { param_type: 0xC000, value: Vec::new() },
        Param::Unknown { param_type: 0x8008, value: vec![0xC1, 0x80, 0x82, 0xC0, 0x0F, 0x40, 0x81] },
        Param::Unknown { param_type: 0x8002, value: (0u8..32).map(|i| i.wrapping_mul(37) ^ 0x5A).collect() },
        Param::Unknown { param_type: 0x8003, value: vec![0xC1, 0x80] },
        Param::Unknown { param_type: 0x8004, value: vec![0x00, 0x01] },
        Param::AltCookie(Vec::new()),
    ];
    let mut packet = Packet::new(FLOOD_SRC_SCTP_PORT, dst_port, 0);
    packet.chunks.push(Chunk::Init(InitChunk {
        initiate_tag: 0x1234_5678,
        a_rwnd: 65_535,
        outbound_streams: 10,
        inbound_streams: 65_535,
        initial_tsn: 0x0BAD_CAFE,
        params,
    }));
    packet.encode()
}

const FLOOD_SRC_SCTP_PORT: u16 = 5001;
pub(crate) const FLOOD_DST_SCTP_PORT: u16 = 7;

/// What kind of packet an answer is: the type of its first chunk and, for ERROR, its first cause.
pub(crate) fn describe_answer(answer: &[u8]) -> String {
    match Packet::parse(answer) {
        Ok(p) => match p.chunks.first() {
            Some(Chunk::Abort { .. }) => "ABORT".into(),
            Some(Chunk::InitAck(init)) => {
                if init.state_cookie().is_some() {
                    "INIT-ACK with state cookie".into()
                } else {
                    "INIT-ACK".into()
                }
            }
            Some(Chunk::Error { causes }) => match causes.first() {
                Some(ErrorCause::AltCookieRequired(c)) => format!("ERROR, {}-B ALT-COOKIE", c.len()),
                Some(other) => format!("ERROR cause {}", other.code()),
                None => "ERROR".into(),
            },
            Some(other) => format!("chunk type {}", other.chunk_type()),
            None => "empty packet".into(),
        },
        Err(e) => format!("unparsable ({e})"),
    }
}

/// Our engine behind a plain blocking loop: one datagram in, its answers out.
fn engine_server(config: Config) -> anyhow::Result<ServerThread> {
    let mut endpoint = Endpoint::new(Arc::new(config), [7u8; 32]);
    let origin = StdInstant::now();
    ServerThread::spawn(move |local, from, datagram, out| {
        let now = Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX));
        endpoint.handle_datagram(now, local, from, datagram);
        while let Some(t) = endpoint.poll_transmit(now) {
            out.push((t.dst, t.payload));
        }
        while endpoint.poll_event().is_some() {}
    })
}

/// The engine alone, no sockets: INITs handed straight to `handle_datagram`, answers taken with
/// `poll_transmit`. The CPU cost of an answer, which the paper's flood figures are about.
/// Returns the ERROR+ALT-COOKIE answer's cost, seconds per INIT.
fn engine_only(count: u32) -> f64 {
    let init = flood_init(FLOOD_DST_SCTP_PORT);
    let local: SocketAddr = "127.0.0.1:9899".parse().expect("literal");
    let remote: SocketAddr = "127.0.0.1:40000".parse().expect("literal");
    println!("== Engine alone (no syscalls): {count} INITs of {} B each, one core ==", init.len());
    let cases = [
        // Every packet answered, as seed 004 measures the cost of an answer (by default the
        // endpoint rate-limits out-of-the-blue answers to 200/s).
        (
            "no listener (ABORT)",
            Config { local_port: 9, listen: true, ootb_answers: None, ..Config::default() },
        ),
        (
            "regular (INIT-ACK)",
            Config {
                local_port: FLOOD_DST_SCTP_PORT,
                listen: true,
                mode: HandshakeMode::Regular,
                ..Config::default()
            },
        ),
        (
            "alternative (ERROR+ALT-COOKIE)",
            Config {
                local_port: FLOOD_DST_SCTP_PORT,
                listen: true,
                mode: HandshakeMode::AltOnly,
                ..Config::default()
            },
        ),
    ];
    let mut buf = init.clone();
    let mut alt_cost = 0.0;
    for (label, config) in cases {
        let is_alt = config.mode == HandshakeMode::AltOnly;
        let mut endpoint = Endpoint::new(Arc::new(config), [9u8; 32]);
        let mut answer_bytes = 0u64;
        let started = StdInstant::now();
        for i in 0..count {
            buf.copy_from_slice(&init);
            let now = Instant::from_micros(u64::from(i));
            endpoint.handle_datagram(now, local, remote, &mut buf);
            while let Some(t) = endpoint.poll_transmit(now) {
                answer_bytes += t.payload.len() as u64;
            }
            while endpoint.poll_event().is_some() {}
        }
        let elapsed = started.elapsed();
        let per = elapsed.as_secs_f64() / f64::from(count.max(1));
        let stats = endpoint.stats();
        println!(
            "{:<34} {:>8.0} ns per INIT = {:>9.0} answers/s per core, {:.2} B out per B in, {} associations opened",
            label,
            per * 1e9,
            1.0 / per,
            answer_bytes as f64 / (f64::from(count) * init.len() as f64),
            stats.associations_opened
        );
        if is_alt {
            alt_cost = per;
        }
    }
    alt_cost
}

/// A row of the INIT flood and the paper's figure beside it.
struct FloodTarget {
    row: Row,
    paper: &'static str,
}

impl FloodTarget {
    /// The best round: load from elsewhere on the machine only ever lowers a rate.
    fn best_rate(&self) -> f64 {
        self.row.rounds.iter().map(FloodResult::answers_per_second).fold(0.0, f64::max)
    }
}

fn print_flood(targets: &[FloodTarget], init_len: usize) {
    println!(
        "{:<68} {:>10} {:>10} {:>17} {:>9} {:>8} {:>10} {:>9}  paper (seed 004)",
        "server [answer]",
        "offered/s",
        "answers/s",
        "(min-max)",
        "CPU us/ans",
        "answer B",
        "B out/B in",
        "answered",
    );
    for t in targets {
        let row = &t.row;
        if let Some(e) = &row.error {
            println!("{:<68} not run: {e}  {}", row.label, t.paper);
            continue;
        }
        let rates: Vec<f64> = row.rounds.iter().map(FloodResult::answers_per_second).collect();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(0.0, f64::max);
        let kind =
            row.rounds.iter().rev().find_map(|r| r.answer_kind.clone()).unwrap_or_else(|| "no answer".into());
        let sent: u64 = row.rounds.iter().map(|r| r.sent).sum();
        println!(
            "{:<68} {:>10.0} {:>10.0} {:>17} {:>9} {:>8} {:>10.2} {:>8.1}%  {}",
            format!("{} [{}]", row.label, kind),
            median(row.rounds.iter().map(FloodResult::offered_per_second).collect()),
            row.median_rate(),
            format!("({min:.0}-{max:.0})"),
            row.cpu_us().map(|c| format!("{c:.2}")).unwrap_or_else(|| "-".into()),
            row.answer_size(),
            median(row.rounds.iter().map(FloodResult::bytes_out_per_byte_in).collect()),
            if sent > 0 { 100.0 * row.answers() as f64 / sent as f64 } else { 0.0 },
            t.paper
        );
    }
    println!("INIT: {init_len} B SCTP packet in one UDP datagram; sizes are UDP payloads.");
    println!(
        "answers/s: median of the rounds, each over its first-to-last answer (the server drains its socket"
    );
    println!(
        "  buffer after the sender stops). B out/B in: answer bytes over all flood bytes offered, dropped"
    );
    println!(
        "  INITs included. CPU us/ans: the server's CPU time per answer from /proc (schedstat; usrsctp: all"
    );
    println!("  its threads); it does not depend on what else runs on the machine.");
    println!(
        "  (`fastshake bench flood` floods from many source ports, beside OpenSSL's DTLSv1_listen too.)"
    );
}

/// One flood target's figures for `--json`.
fn flood_json(t: &FloodTarget) -> serde_json::Value {
    let row = &t.row;
    let rates: Vec<f64> = row.rounds.iter().map(FloodResult::answers_per_second).collect();
    serde_json::json!({
        "label": row.label,
        "paper": t.paper,
        "error": row.error,
        "rounds": row.rounds.len(),
        "answer_kind": row.rounds.iter().rev().find_map(|r| r.answer_kind.clone()),
        "answer_bytes": row.answer_size(),
        "median_answers_per_s": row.median_rate(),
        "min_answers_per_s": rates.iter().copied().fold(f64::INFINITY, f64::min).min(f64::MAX),
        "max_answers_per_s": rates.iter().copied().fold(0.0, f64::max),
        "median_cpu_us_per_answer": row.cpu_us(),
        "median_bytes_out_per_byte_in": row.bytes_out_per_byte_in(),
    })
}

fn run_floods(
    args: &Args,
    limits: FloodLimits,
    rounds: usize,
    engine_alt_cost: f64,
) -> anyhow::Result<serde_json::Value> {
    println!(
        "== INIT flood: {rounds} rounds, each at most {} packets or {:.1} s per server, offered {} pps from one port, loopback ==",
        limits.max_packets,
        limits.max_time.as_secs_f64(),
        limits.rate_pps
    );
    let init = flood_init(FLOOD_DST_SCTP_PORT);
    let target = |label: &str, paper, server: anyhow::Result<ServerThread>| FloodTarget {
        row: match server {
            Ok(s) => Row::new(label, s.addr, s.cpu.clone(), Box::new(s)),
            Err(e) => Row::failed(label, e),
        },
        paper,
    };

    // Every server stays up for all rounds; the rounds interleave the servers so that a burst
    // of load from elsewhere on the machine does not fall on one of them only.
    // The INIT is for SCTP port 7; this endpoint listens on another port.
    let no_listener =
        engine_server(Config { local_port: 9, listen: true, ootb_answers: None, ..Config::default() });
    let regular = engine_server(Config {
        local_port: FLOOD_DST_SCTP_PORT,
        listen: true,
        mode: HandshakeMode::Regular,
        ..Config::default()
    });
    let alternative = engine_server(Config {
        local_port: FLOOD_DST_SCTP_PORT,
        listen: true,
        mode: HandshakeMode::AltOnly,
        ..Config::default()
    });
    let mut targets = vec![
        target("bare UDP echo (syscall floor)", "-", bare_echo_server()),
        target("fastshake, no listener", "ABORT 74 kpps FreeBSD / 32 kpps Linux, 16 B", no_listener),
        target("fastshake, regular", "INIT-ACK 13-18 kpps, 416 B", regular),
        target("fastshake, alternative", "ERROR+ALT-COOKIE ~52 kpps, 40 B", alternative),
    ];
    const USRSCTP: &str = "usrsctp echo_server";
    let usrsctp_row = usrsctp_row(USRSCTP, &args.usrsctp_echo_server);
    targets.push(FloodTarget { row: usrsctp_row, paper: "INIT-ACK 13-18 kpps (kernel stacks)" });

    // The real server command (tokio driver) in alternative-only mode, to see what the driver
    // adds to the bare engine loop.
    const COMMAND: &str = "server command (tokio), alternative";
    let process_row = match start_own_server() {
        Ok((guard, port)) => {
            Row::new(COMMAND, SocketAddr::from(([127, 0, 0, 1], port)), Some(guard.cpu()), Box::new(guard))
        }
        Err(e) => Row::failed(COMMAND, e),
    };
    targets.push(FloodTarget { row: process_row, paper: "-" });

    // As before: one source port, bursts of 64 (usrsctp answers to one port only).
    let settings = Settings { limits, rounds, sources: 1, per_source: 64, coalesce: false };
    let mut rows: Vec<Row> = targets
        .iter_mut()
        .map(|t| std::mem::replace(&mut t.row, Row::failed("", anyhow::anyhow!(""))))
        .collect();
    crate::flood::measure(&mut rows, &init, describe_answer, &settings);
    for (t, row) in targets.iter_mut().zip(rows) {
        t.row = row;
    }
    print_flood(&targets, init.len());
    let json = serde_json::json!({
        "init_bytes": init.len(),
        "rounds": rounds,
        "offered_pps": limits.rate_pps,
        "targets": targets.iter().map(flood_json).collect::<Vec<_>>(),
    });

    let rate = |i: usize| targets.get(i).map(|t| t.row.median_rate()).unwrap_or(0.0);
    let size = |i: usize| targets.get(i).map(|t| t.row.answer_size()).unwrap_or(0);
    let (floor_rate, regular_rate, alt_rate, usrsctp_rate) = (rate(0), rate(2), rate(3), rate(4));
    let ratio = |answer: usize| answer as f64 / init.len() as f64;
    println!(
        "ALT-COOKIE answer: {} B = {:.2}x the INIT (target <= 1.10x; paper 40 B); our INIT-ACK {} B = {:.2}x; \
         usrsctp's INIT-ACK {} B = {:.2}x",
        size(3),
        ratio(size(3)),
        size(2),
        ratio(size(2)),
        size(4),
        ratio(size(4))
    );
    let best = |i: usize| targets.get(i).map(FloodTarget::best_rate).unwrap_or(0.0);
    if usrsctp_rate > 0.0 && best(4) > 0.0 {
        println!(
            "ALT-COOKIE answer rate = {:.2}x usrsctp's INIT-ACK rate by medians, {:.2}x by best rounds \
             (target >= 3x; paper: 52 kpps vs 13-18 kpps)",
            alt_rate / usrsctp_rate,
            best(3) / best(4)
        );
    }
    let cpu = |i: usize| targets.get(i).and_then(|t| t.row.cpu_us());
    if let (Some(alt_cpu), Some(usrsctp_cpu)) = (cpu(3), cpu(4)) {
        println!(
            "By server CPU per answer: ALT-COOKIE {:.2}x usrsctp's INIT-ACK rate per CPU-second (target >= 3x)",
            usrsctp_cpu / alt_cpu
        );
    }
    if let (Some(alt_cpu), Some(floor_cpu)) = (cpu(3), cpu(0)) {
        println!(
            "By server CPU per answer: ALT-COOKIE {:.0}% of the bare echo's rate per CPU-second (target >= 80%); \
             INIT-ACK {:.0}%, ABORT {:.0}%",
            100.0 * floor_cpu / alt_cpu,
            cpu(2).map(|c| 100.0 * floor_cpu / c).unwrap_or(0.0),
            cpu(1).map(|c| 100.0 * floor_cpu / c).unwrap_or(0.0)
        );
    }
    if let (Some(process_cpu), Some(alt_cpu)) = (cpu(5), cpu(3)) {
        println!(
            "The server command (tokio driver) spends {:.2} us of CPU per ALT-COOKIE answer, the bare engine loop {:.2} us",
            process_cpu, alt_cpu
        );
    }
    if floor_rate > 0.0 && best(0) > 0.0 {
        println!(
            "ALT-COOKIE answer rate = {:.0}% of the bare UDP echo by medians, {:.0}% by best rounds (target >= 80%); \
             our INIT-ACK {:.0}% / {:.0}%, our ABORT {:.0}% / {:.0}%",
            100.0 * alt_rate / floor_rate,
            100.0 * best(3) / best(0),
            100.0 * regular_rate / floor_rate,
            100.0 * best(2) / best(0),
            100.0 * rate(1) / floor_rate,
            100.0 * best(1) / best(0)
        );
        println!(
            "(rates move with the machine's other load, CPU per answer much less: read the CPU lines first)"
        );
    }
    if let Some(floor_cpu) = cpu(0) {
        // The engine's own cost, measured without sockets, on top of the floor's two syscalls.
        let engine_us = engine_alt_cost * 1e6;
        println!(
            "Estimate from the engine alone: {engine_us:.2} us per ALT-COOKIE answer on top of the echo's {floor_cpu:.2} us \
             = {:.0}% of the bare echo's rate (target >= 80%)",
            100.0 * floor_cpu / (floor_cpu + engine_us)
        );
    }
    Ok(json)
}

/// Time to first byte over a modelled path: the client opens an association and sends a
/// request, the server answers; the clock stops when the answer reaches the client.
mod ttfb {
    use fastshake_sctp::{
        AssociationHandle, Config, ConnectOptions, Endpoint, Event, HandshakeKind, HandshakeMode, Instant,
        Message,
    };
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    /// The paper's link: 2 Mbit/s, delay varied.
    const RATE_BPS: u64 = 2_000_000;
    /// IPv4 and UDP headers in front of every SCTP packet on the modelled wire.
    const IP_UDP_OVERHEAD: usize = 28;
    const REQUEST: &[u8] = b"GET /status request of a signalling client, well under 100 bytes";
    const RESPONSE: &[u8] = b"200 OK: the answer of the signalling server, also under 100 bytes";

    /// One direction of the path: FIFO serialisation at `RATE_BPS`, then `delay`.
    struct Direction {
        delay: Duration,
        free_at: Instant,
    }

    impl Direction {
        fn arrival(&mut self, now: Instant, bytes: usize) -> Instant {
            let start = now.max(self.free_at);
            let serialisation =
                Duration::from_nanos(((bytes + IP_UDP_OVERHEAD) as u64 * 8 * 1_000_000_000) / RATE_BPS);
            self.free_at = start + serialisation;
            self.free_at + self.delay
        }
    }

    #[derive(Clone, Copy)]
    enum Variant {
        Regular,
        Alternative,
        AlternativeDataAfterOpen,
        CachedZeroRtt,
        Cookieless,
    }

    const VARIANTS: [Variant; 5] = [
        Variant::Regular,
        Variant::Alternative,
        Variant::AlternativeDataAfterOpen,
        Variant::CachedZeroRtt,
        Variant::Cookieless,
    ];

    impl Variant {
        fn label(self) -> &'static str {
            match self {
                Variant::Regular => "regular (DATA with COOKIE-ECHO)",
                Variant::Alternative => "alternative (ERROR+cookie, INIT+data)",
                Variant::AlternativeDataAfterOpen => "alternative, data only after INIT-ACK",
                Variant::CachedZeroRtt => "cached ALT-COOKIE + zero-RTT data",
                Variant::Cookieless => "cookieless + zero-RTT data",
            }
        }
    }

    struct Outcome {
        ttfb: Duration,
        handshake: Option<HandshakeKind>,
        packets: usize,
        cookie: Option<Vec<u8>>,
        ended: Instant,
    }

    /// A datagram on the path: arrival, sequence (FIFO among equal arrivals), towards the
    /// client, payload.
    type InFlight = (Instant, u64, bool, Vec<u8>);

    const CLIENT: &str = "10.0.0.1:9899";
    const SERVER: &str = "10.0.0.2:9899";

    /// One association on the modelled path, from `connect` to the first response byte.
    fn exchange(
        server: &mut Endpoint,
        client_mode: HandshakeMode,
        cached_cookie: Option<Vec<u8>>,
        delay: Duration,
        seed: u8,
        start: Instant,
        data_in_init: bool,
    ) -> anyhow::Result<Outcome> {
        let client_addr: SocketAddr = CLIENT.parse()?;
        let server_addr: SocketAddr = SERVER.parse()?;
        // A port of its own per client, so a later association is never taken for a restart.
        let config = Config {
            local_port: 5000 + u16::from(seed),
            mode: client_mode,
            listen: false,
            ..Config::default()
        };
        let mut client = Endpoint::new(Arc::new(config), [seed; 32]);
        let mut now = start;
        let mut to_server = Direction { delay, free_at: now };
        let mut to_client = Direction { delay, free_at: now };
        // (arrival, sequence, to_client, payload)
        let mut in_flight: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
        let mut sequence = 0u64;
        let request = Message { stream: 0, unordered: false, ppid: 0, data: REQUEST.to_vec() };
        // Zero-RTT data where the handshake allows it (else right after COOKIE-ECHO, bundled);
        // or, for comparison, only once the association is open.
        let zero_rtt = if data_in_init { vec![request.clone()] } else { Vec::new() };
        let handle: AssociationHandle = client.connect(
            now,
            Some(client_addr),
            server_addr,
            7,
            ConnectOptions { zero_rtt, cached_cookie },
        );
        let mut outcome =
            Outcome { ttfb: Duration::ZERO, handshake: None, packets: 0, cookie: None, ended: start };
        let limit = start + Duration::from_secs(120);
        loop {
            while let Some(t) = client.poll_transmit(now) {
                let at = to_server.arrival(now, t.payload.len());
                in_flight.push(Reverse((at, sequence, false, t.payload)));
                sequence += 1;
            }
            while let Some(t) = server.poll_transmit(now) {
                let at = to_client.arrival(now, t.payload.len());
                in_flight.push(Reverse((at, sequence, true, t.payload)));
                sequence += 1;
            }
            while let Some((h, event)) = server.poll_event() {
                if let Event::Message(m) = event {
                    if m.data == REQUEST {
                        let answer =
                            Message { stream: m.stream, unordered: false, ppid: 0, data: RESPONSE.to_vec() };
                        server.send(h, answer)?;
                    }
                }
            }
            while let Some((h, event)) = client.poll_event() {
                if h != handle {
                    continue;
                }
                match event {
                    Event::Connected { handshake, .. } => {
                        outcome.handshake = Some(handshake);
                        if !data_in_init {
                            client.send(handle, request.clone())?;
                        }
                    }
                    Event::AltCookie { cookie, .. } => outcome.cookie = Some(cookie),
                    Event::Message(m) if m.data == RESPONSE => {
                        outcome.ttfb = now - start;
                        outcome.ended = now;
                        // The measurement is taken; end the association at once (the ABORT
                        // reaches the server without delay) so the server holds no state.
                        client.abort(handle);
                        while let Some(mut t) = client.poll_transmit(now) {
                            server.handle_datagram(now, server_addr, client_addr, &mut t.payload);
                        }
                        drain_server(server, now);
                        return Ok(outcome);
                    }
                    Event::Aborted { reason } => anyhow::bail!("aborted: {reason}"),
                    Event::Failed(e) => anyhow::bail!("failed: {e}"),
                    _ => {}
                }
            }
            // Something to do: queue changes above; otherwise advance time.
            let next_packet = in_flight.peek().map(|Reverse((at, ..))| *at);
            let next =
                [next_packet, client.poll_timeout(), server.poll_timeout()].into_iter().flatten().min();
            let Some(next) = next else { anyhow::bail!("stalled: nothing in flight and no timer") };
            if next > limit {
                anyhow::bail!("no answer within 120 s of modelled time");
            }
            now = now.max(next);
            while in_flight.peek().is_some_and(|Reverse((at, ..))| *at <= now) {
                let Some(Reverse((_, _, to_client_side, mut payload))) = in_flight.pop() else { break };
                outcome.packets += 1;
                if to_client_side {
                    client.handle_datagram(now, client_addr, server_addr, &mut payload);
                } else {
                    server.handle_datagram(now, server_addr, client_addr, &mut payload);
                }
            }
            if client.poll_timeout().is_some_and(|t| t <= now) {
                client.handle_timeout(now);
            }
            if server.poll_timeout().is_some_and(|t| t <= now) {
                server.handle_timeout(now);
            }
        }
    }

    fn drain_server(server: &mut Endpoint, now: Instant) {
        while server.poll_transmit(now).is_some() {}
        while server.poll_event().is_some() {}
    }

    fn server_endpoint(cookieless: bool) -> Endpoint {
        let config = Config {
            local_port: 7,
            mode: HandshakeMode::Both,
            cookieless,
            listen: true,
            ..Config::default()
        };
        Endpoint::new(Arc::new(config), [42; 32])
    }

    fn measure(variant: Variant, delay: Duration) -> anyhow::Result<Outcome> {
        let start = Instant::from_millis(1);
        let (both, regular) = (HandshakeMode::Both, HandshakeMode::Regular);
        match variant {
            Variant::Regular => exchange(&mut server_endpoint(false), regular, None, delay, 1, start, true),
            Variant::Alternative => exchange(&mut server_endpoint(false), both, None, delay, 2, start, true),
            Variant::AlternativeDataAfterOpen => {
                exchange(&mut server_endpoint(false), both, None, delay, 6, start, false)
            }
            Variant::Cookieless => exchange(&mut server_endpoint(true), both, None, delay, 3, start, true),
            Variant::CachedZeroRtt => {
                let mut server = server_endpoint(false);
                let first = exchange(&mut server, both, None, delay, 4, start, true)?;
                let cookie = first
                    .cookie
                    .ok_or_else(|| anyhow::anyhow!("the first association brought no ALT-COOKIE"))?;
                let later = first.ended + Duration::from_secs(1);
                exchange(&mut server, both, Some(cookie), delay, 5, later, true)
            }
        }
    }

    /// The same exchange inside `fastshake-sim`: two hosts, one wired link of `RATE_BPS` and
    /// `delay` each way, the engines run as simulator apps.
    mod simulated {
        use super::{Variant, REQUEST, RESPONSE};
        use fastshake_core::{SansIo, Transmit};
        use fastshake_sctp::{
            AssociationHandle, Config, ConnectOptions, Endpoint, Event, HandshakeKind, HandshakeMode,
            Instant, Message,
        };
        use fastshake_sim::apps::App;
        use fastshake_sim::link::LinkConfig;
        use fastshake_sim::{Role, Simulator};
        use std::cell::RefCell;
        use std::net::SocketAddr;
        use std::rc::Rc;
        use std::sync::Arc;
        use std::time::Duration;

        #[derive(Default)]
        pub struct Round {
            pub ttfb: Option<Duration>,
            pub handshake: Option<HandshakeKind>,
        }

        enum Phase {
            Waiting { at: Instant },
            Running { handle: AssociationHandle, started: Instant },
            Done,
        }

        /// Opens `rounds` associations one after another, each with the request as zero-RTT
        /// data, and times the response; later rounds offer the ALT-COOKIE the first got.
        struct Client {
            endpoint: Endpoint,
            local: SocketAddr,
            server: SocketAddr,
            phase: Phase,
            rounds_left: u32,
            offer_cached_cookie: bool,
            data_in_init: bool,
            cookie: Option<Vec<u8>>,
            rounds: Rc<RefCell<Vec<Round>>>,
        }

        impl Client {
            fn after_engine(&mut self, now: Instant) {
                while let Some((h, event)) = self.endpoint.poll_event() {
                    let Phase::Running { handle, started } = self.phase else { continue };
                    match event {
                        Event::AltCookie { cookie, .. } => self.cookie = Some(cookie),
                        _ if h != handle => {}
                        Event::Connected { handshake, .. } => {
                            if let Some(r) = self.rounds.borrow_mut().last_mut() {
                                r.handshake = Some(handshake);
                            }
                            if !self.data_in_init {
                                let _ = self.endpoint.send(handle, request());
                            }
                        }
                        Event::Message(m) if m.data == RESPONSE => {
                            if let Some(r) = self.rounds.borrow_mut().last_mut() {
                                r.ttfb = Some(now - started);
                            }
                            // Timed; end the association so the server keeps no state.
                            self.endpoint.abort(handle);
                            self.rounds_left = self.rounds_left.saturating_sub(1);
                            self.phase = if self.rounds_left > 0 {
                                Phase::Waiting { at: now + Duration::from_secs(1) }
                            } else {
                                Phase::Done
                            };
                        }
                        Event::Aborted { .. } | Event::Failed(_) | Event::Closed => self.phase = Phase::Done,
                        _ => {}
                    }
                }
            }
        }

        impl SansIo for Client {
            fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, d: &mut [u8]) {
                self.endpoint.handle_datagram(now, local, remote, d);
                self.after_engine(now);
            }
            fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
                self.endpoint.poll_transmit(now)
            }
            fn poll_timeout(&self) -> Option<Instant> {
                let start = match self.phase {
                    Phase::Waiting { at } => Some(at),
                    _ => None,
                };
                [start, self.endpoint.poll_timeout()].into_iter().flatten().min()
            }
            fn handle_timeout(&mut self, now: Instant) {
                if let Phase::Waiting { at } = self.phase {
                    if now >= at {
                        let cached_cookie = if self.offer_cached_cookie { self.cookie.clone() } else { None };
                        let zero_rtt = if self.data_in_init { vec![request()] } else { Vec::new() };
                        let options = ConnectOptions { zero_rtt, cached_cookie };
                        let handle = self.endpoint.connect(now, Some(self.local), self.server, 7, options);
                        self.rounds.borrow_mut().push(Round::default());
                        self.phase = Phase::Running { handle, started: now };
                    }
                }
                if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                    self.endpoint.handle_timeout(now);
                }
                self.after_engine(now);
            }
        }

        impl App for Client {}

        fn request() -> Message {
            Message { stream: 0, unordered: false, ppid: 0, data: REQUEST.to_vec() }
        }

        /// Answers every request with the response.
        struct Server(Endpoint);

        impl Server {
            fn after_engine(&mut self) {
                while let Some((h, event)) = self.0.poll_event() {
                    if let Event::Message(m) = event {
                        if m.data == REQUEST {
                            let answer = Message {
                                stream: m.stream,
                                unordered: false,
                                ppid: 0,
                                data: RESPONSE.to_vec(),
                            };
                            let _ = self.0.send(h, answer);
                        }
                    }
                }
            }
        }

        impl SansIo for Server {
            fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, d: &mut [u8]) {
                self.0.handle_datagram(now, local, remote, d);
                self.after_engine();
            }
            fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
                self.0.poll_transmit(now)
            }
            fn poll_timeout(&self) -> Option<Instant> {
                self.0.poll_timeout()
            }
            fn handle_timeout(&mut self, now: Instant) {
                self.0.handle_timeout(now);
                self.after_engine();
            }
        }

        impl App for Server {}

        /// The rounds of one variant; the last one is the measurement.
        pub fn measure(variant: Variant, delay: Duration, rate_bps: u64) -> anyhow::Result<Vec<Round>> {
            let (client_mode, cookieless, rounds) = match variant {
                Variant::Regular => (HandshakeMode::Regular, false, 1),
                Variant::Alternative | Variant::AlternativeDataAfterOpen => (HandshakeMode::Both, false, 1),
                Variant::CachedZeroRtt => (HandshakeMode::Both, false, 2),
                Variant::Cookieless => (HandshakeMode::Both, true, 1),
            };
            let mut sim = Simulator::new(2018);
            let c = sim.add_node("client", Role::Host);
            let s = sim.add_node("server", Role::Host);
            let c0 = sim.add_interface(c, "eth0", "10.0.0.1".parse()?)?;
            let s0 = sim.add_interface(s, "eth0", "10.0.0.2".parse()?)?;
            let link = LinkConfig {
                delay_ms: delay.as_secs_f64() * 1e3,
                rate_bps: Some(rate_bps),
                ..LinkConfig::default()
            };
            sim.connect("path", c0, s0, link)?;
            let server_config = Config { local_port: 7, listen: true, cookieless, ..Config::default() };
            sim.add_app(
                s,
                "sctp-server",
                9899,
                Box::new(Server(Endpoint::new(Arc::new(server_config), [42; 32]))),
            )?;
            let client_config = Config { local_port: 5000, mode: client_mode, ..Config::default() };
            let results = Rc::new(RefCell::new(Vec::new()));
            let client = Client {
                endpoint: Endpoint::new(Arc::new(client_config), [1; 32]),
                local: "10.0.0.1:9899".parse()?,
                server: "10.0.0.2:9899".parse()?,
                phase: Phase::Waiting { at: Instant::from_millis(1) },
                rounds_left: rounds,
                offer_cached_cookie: true,
                data_in_init: !matches!(variant, Variant::AlternativeDataAfterOpen),
                cookie: None,
                rounds: results.clone(),
            };
            sim.add_app(c, "sctp-client", 9899, Box::new(client))?;
            sim.run_until(Instant::from_millis(120_000));
            let rounds = std::mem::take(&mut *results.borrow_mut());
            Ok(rounds)
        }
    }

    pub fn run(delays_ms: &[u64]) -> anyhow::Result<serde_json::Value> {
        let mut rows = Vec::new();
        println!(
            "== Time to first byte: request {} B, response {} B as zero-RTT/first data, {} Mbit/s each way, IPv4+UDP headers counted ==",
            REQUEST.len(),
            RESPONSE.len(),
            RATE_BPS / 1_000_000
        );
        println!(
            "   sim: fastshake-sim, one wired link; pair: this module's in-memory path model (cross-check)"
        );
        println!(
            "{:<40} {:>8} {:>11} {:>8} {:>12}  opened by",
            "setup", "delay ms", "sim TTFB ms", "RTTs", "pair TTFB ms"
        );
        for &delay_ms in delays_ms {
            let delay = Duration::from_millis(delay_ms);
            let rtt = 2.0 * delay.as_secs_f64();
            for variant in VARIANTS {
                let pair = match measure(variant, delay) {
                    Ok(o) => format!("{:.2}", o.ttfb.as_secs_f64() * 1e3),
                    Err(e) => format!("failed: {e:#}"),
                };
                let simulated = simulated::measure(variant, delay, RATE_BPS);
                let sim_ttfb = simulated.as_ref().ok().and_then(|r| r.last()).and_then(|r| r.ttfb);
                rows.push(serde_json::json!({
                    "variant": variant.label(),
                    "delay_ms": delay_ms,
                    "sim_ttfb_ms": sim_ttfb.map(|t| t.as_secs_f64() * 1e3),
                    "round_trips": sim_ttfb.map(|t| t.as_secs_f64() / rtt),
                    "pair_ttfb_ms": pair,
                }));
                match simulated {
                    Ok(rounds) => match rounds.last() {
                        Some(simulated::Round { ttfb: Some(t), handshake }) => println!(
                            "{:<40} {:>8} {:>11.2} {:>8.2} {:>12}  {}",
                            variant.label(),
                            delay_ms,
                            t.as_secs_f64() * 1e3,
                            t.as_secs_f64() / rtt,
                            pair,
                            handshake.map(|h| format!("{h:?}")).unwrap_or_else(|| "?".into())
                        ),
                        _ => println!(
                            "{:<40} {:>8} {:>11}  (pair {pair})",
                            variant.label(),
                            delay_ms,
                            "no answer"
                        ),
                    },
                    Err(e) => {
                        println!("{:<40} {:>8}  sim failed: {e:#} (pair {pair})", variant.label(), delay_ms)
                    }
                }
            }
        }
        println!("RTTs = TTFB / (2 x delay); serialisation of each packet at 2 Mbit/s adds the rest.");
        println!("Target: cached ALT-COOKIE + zero-RTT data = 1 RTT.");
        println!("Paper (seed 004, Fig. 16): regular and alternative about equal; a cached cookie halves the time.");
        Ok(serde_json::json!({ "rate_bps": RATE_BPS, "rows": rows }))
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let limits = if args.quick {
        FloodLimits { max_packets: 50_000, max_time: Duration::from_secs(1), rate_pps: args.rate }
    } else {
        FloodLimits { max_packets: 200_000, max_time: Duration::from_secs(5), rate_pps: args.rate }
    };
    if args.engine_only {
        engine_only(if args.quick { 200_000 } else { 2_000_000 });
        return Ok(());
    }
    let engine_alt_cost = engine_only(if args.quick { 20_000 } else { 200_000 });
    println!();
    let flood = run_floods(&args, limits, if args.quick { 3 } else { 5 }, engine_alt_cost)?;
    println!();
    let ttfb = ttfb::run(if args.quick { &[5, 50] } else { &[5, 20, 50, 100] })?;
    println!();
    let webrtc_ttfb = crate::webrtc_sim::run(if args.quick { &[5, 50] } else { &[5, 20, 50, 100] })?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "bench": "sctp",
            "quick": args.quick,
            "engine_alt_cookie_us": engine_alt_cost * 1e6,
            "flood": flood,
            "ttfb": ttfb,
            "webrtc_ttfb": webrtc_ttfb,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
