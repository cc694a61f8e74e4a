//! `fastshake bench sctp`: INIT-flood answers and time to first byte, beside usrsctp and the
//! bare UDP echo floor. Prints figures; asserts nothing.

use anyhow::Context;
use fastshake_sctp::packet::{Chunk, ErrorCause, InitChunk, Packet, Param, PARAM_IPV4, PARAM_IPV6};
use fastshake_sctp::{Config, Endpoint, HandshakeMode, Instant};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant as StdInstant};

#[derive(clap::Args)]
pub struct Args {
    /// A short run (about 10 s): smaller floods, fewer delays.
    #[arg(long)]
    quick: bool,
    /// usrsctp's echo server (Debian `libusrsctp-examples`); skipped if absent.
    #[arg(long, default_value = "/usr/lib/usrsctp/echo_server")]
    usrsctp_echo_server: PathBuf,
    /// Offered INIT rate of the flood, packets per second.
    #[arg(long, default_value_t = 400_000)]
    rate: u64,
}

/// Bounds of one flood: whichever comes first.
#[derive(Clone, Copy)]
struct FloodLimits {
    max_packets: u64,
    max_time: Duration,
    rate_pps: u64,
}

/// What a flood sender saw.
#[derive(Default, Clone)]
struct FloodResult {
    sent: u64,
    sent_bytes: u64,
    answers: u64,
    answer_bytes: u64,
    /// From the first send to the last send.
    send_window: Duration,
    /// From the first answer to the last: the server answers at its own pace, draining its
    /// socket buffer after the sender stopped.
    answer_window: Duration,
    /// The size of the last answer seen (answers to identical INITs are identical in size).
    answer_size: usize,
    /// What the last answer was.
    answer_kind: Option<String>,
}

impl FloodResult {
    fn answers_per_second(&self) -> f64 {
        let secs = self.answer_window.as_secs_f64();
        if secs > 0.0 && self.answers > 1 {
            (self.answers - 1) as f64 / secs
        } else {
            0.0
        }
    }
    fn offered_per_second(&self) -> f64 {
        let secs = self.send_window.as_secs_f64();
        if secs > 0.0 {
            self.sent as f64 / secs
        } else {
            0.0
        }
    }
    fn bytes_out_per_byte_in(&self) -> f64 {
        if self.sent_bytes > 0 {
            self.answer_bytes as f64 / self.sent_bytes as f64
        } else {
            0.0
        }
    }
}

/// Sends `packet` to `target` at a paced rate within `limits` and counts what comes back.
fn flood(target: SocketAddr, packet: &[u8], limits: FloodLimits) -> anyhow::Result<FloodResult> {
    let socket = UdpSocket::bind(loopback_any(target)).context("binding the flood socket")?;
    flood_from(socket, target, packet, limits)
}

fn flood_from(
    socket: UdpSocket,
    target: SocketAddr,
    packet: &[u8],
    limits: FloodLimits,
) -> anyhow::Result<FloodResult> {
    let receiver = socket.try_clone()?;
    receiver.set_read_timeout(Some(Duration::from_millis(20)))?;
    let sending = Arc::new(AtomicBool::new(true));
    let counter = {
        let sending = sending.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let (mut answers, mut bytes) = (0u64, 0u64);
            let mut last = Vec::new();
            let mut first_at: Option<StdInstant> = None;
            let mut last_at: Option<StdInstant> = None;
            let mut quiet_since: Option<StdInstant> = None;
            loop {
                match receiver.recv_from(&mut buf) {
                    Ok((n, _)) => {
                        answers += 1;
                        let at = StdInstant::now();
                        first_at.get_or_insert(at);
                        last_at = Some(at);
                        bytes += n as u64;
                        if last.len() != n {
                            last = buf[..n].to_vec();
                        }
                        quiet_since = None;
                    }
                    Err(_) => {
                        if !sending.load(Ordering::Relaxed) {
                            // Late answers still in flight get 200 ms after the sender stops.
                            let since = *quiet_since.get_or_insert_with(StdInstant::now);
                            if since.elapsed() > Duration::from_millis(200) {
                                break;
                            }
                        }
                    }
                }
            }
            let window = match (first_at, last_at) {
                (Some(a), Some(b)) => b - a,
                _ => Duration::ZERO,
            };
            (answers, bytes, last, window)
        })
    };

    let start = StdInstant::now();
    let mut sent = 0u64;
    while sent < limits.max_packets {
        let elapsed = start.elapsed();
        if elapsed >= limits.max_time {
            break;
        }
        // Pacing: send what is due by now, in bursts of at most 64, then yield briefly.
        let due = ((elapsed.as_secs_f64() * limits.rate_pps as f64) as u64).min(limits.max_packets);
        if due <= sent {
            thread::sleep(Duration::from_micros(200));
            continue;
        }
        for _ in 0..(due - sent).min(64) {
            // A full socket buffer drops the packet on loopback, like a congested link would.
            let _ = socket.send_to(packet, target);
            sent += 1;
        }
    }
    let send_window = start.elapsed();
    sending.store(false, Ordering::Relaxed);
    let (answers, answer_bytes, last, answer_window) =
        counter.join().map_err(|_| anyhow::anyhow!("counter thread"))?;
    Ok(FloodResult {
        sent,
        sent_bytes: sent * packet.len() as u64,
        answers,
        answer_bytes,
        send_window,
        answer_window,
        answer_size: last.len(),
        answer_kind: (!last.is_empty()).then(|| describe_answer(&last)),
    })
}

fn loopback_any(target: SocketAddr) -> SocketAddr {
    if target.is_ipv6() {
        "[::1]:0".parse().expect("literal")
    } else {
        "127.0.0.1:0".parse().expect("literal")
    }
}

/// A UDP server on its own thread that stops when dropped.
struct ServerThread {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl ServerThread {
    /// Runs `answer(datagram, reply)` for every datagram; `reply` collects the answers to send back.
    fn spawn<F>(mut answer: F) -> anyhow::Result<ServerThread>
    where
        F: FnMut(SocketAddr, SocketAddr, &mut [u8], &mut Vec<(SocketAddr, Vec<u8>)>) + Send + 'static,
    {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        let addr = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = socket.recv_from(&mut buf) {
                        answer(addr, from, &mut buf[..n], &mut out);
                        for (dst, payload) in out.drain(..) {
                            let _ = socket.send_to(&payload, dst);
                        }
                    }
                }
            })
        };
        Ok(ServerThread { addr, stop, handle: Some(handle) })
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The syscall floor: every datagram sent straight back, no parsing.
fn bare_echo_server() -> anyhow::Result<ServerThread> {
    ServerThread::spawn(|_local, from, datagram, out| out.push((from, datagram.to_vec())))
}

/// A child process killed and reaped on every path.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A UDP port free on loopback at the time of the call.
fn free_udp_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// usrsctp's echo server on `encaps_port`, listening on SCTP port 7, answering to
/// `peer_encaps_port`.
fn start_usrsctp_echo(
    binary: &PathBuf,
    encaps_port: u16,
    peer_encaps_port: u16,
) -> anyhow::Result<ChildGuard> {
    let child = Command::new(binary)
        .arg(encaps_port.to_string())
        .arg(peer_encaps_port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let guard = ChildGuard(child);
    // usrsctp binds its UDP socket inside usrsctp_init; give it a moment.
    thread::sleep(Duration::from_millis(300));
    Ok(guard)
}

/// The flood's INIT: 112 bytes (common header and one INIT chunk) announcing the extensions
/// seed 004's flood announced — Forward-TSN, the Supported Extensions list (ASCONF, ASCONF-ACK,
/// RE-CONFIG, FORWARD-TSN, AUTH, I-DATA, PKTDROP), AUTH's RANDOM, CHUNKS and HMAC-ALGO — plus an
/// empty ALT-COOKIE.
fn flood_init(dst_port: u16) -> Vec<u8> {
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
const FLOOD_DST_SCTP_PORT: u16 = 7;

/// What kind of packet an answer is: the type of its first chunk and, for ERROR, its first cause.
fn describe_answer(answer: &[u8]) -> String {
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
                Some(ErrorCause::AltCookieRequired(c)) => format!("ERROR with {}-byte ALT-COOKIE", c.len()),
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

struct FloodRow {
    label: &'static str,
    paper: &'static str,
    result: Option<FloodResult>,
    answer: String,
}

fn print_flood(rows: &[FloodRow], init_len: usize) {
    println!(
        "{:<52} {:>8} {:>10} {:>10} {:>8} {:>10} {:>9}  {}",
        "server [answer]",
        "sent",
        "offered/s",
        "answers/s",
        "answer B",
        "B out/B in",
        "answered",
        "paper (seed 004)"
    );
    for row in rows {
        match &row.result {
            Some(r) => println!(
                "{:<52} {:>8} {:>10.0} {:>10.0} {:>8} {:>10.2} {:>8.1}%  {}",
                format!("{} [{}]", row.label, row.answer),
                r.sent,
                r.offered_per_second(),
                r.answers_per_second(),
                r.answer_size,
                r.bytes_out_per_byte_in(),
                if r.sent > 0 { 100.0 * r.answers as f64 / r.sent as f64 } else { 0.0 },
                row.paper
            ),
            None => println!("{:<52} {:>8}  {}  {}", row.label, "-", row.answer, row.paper),
        }
    }
    println!("(INIT: {init_len} B SCTP packet in one UDP datagram; sizes are UDP payloads)");
}

fn run_floods(args: &Args, limits: FloodLimits) -> anyhow::Result<()> {
    println!(
        "== INIT flood: at most {} packets or {:.1} s per server, offered {} pps, loopback ==",
        limits.max_packets,
        limits.max_time.as_secs_f64(),
        limits.rate_pps
    );
    let init = flood_init(FLOOD_DST_SCTP_PORT);
    let mut rows = Vec::new();
    let mut run = |label: &'static str,
                   paper: &'static str,
                   target: anyhow::Result<(SocketAddr, Option<UdpSocket>)>| {
        let row = match target.and_then(|(addr, socket)| match socket {
            Some(s) => flood_from(s, addr, &init, limits),
            None => flood(addr, &init, limits),
        }) {
            Ok(r) => FloodRow { label, paper, answer: last_answer_kind(&r), result: Some(r) },
            Err(e) => FloodRow { label, paper, result: None, answer: format!("not run: {e:#}") },
        };
        rows.push(row);
    };

    {
        let floor = bare_echo_server()?;
        run("bare UDP echo (syscall floor)", "-", Ok((floor.addr, None)));
    }
    {
        // The INIT is for SCTP port 7; this endpoint listens on another port.
        let server = engine_server(Config { local_port: 9, listen: true, ..Config::default() })?;
        run("fastshake, no listener", "ABORT 74 kpps FreeBSD / 32 kpps Linux", Ok((server.addr, None)));
    }
    {
        let server = engine_server(Config {
            local_port: FLOOD_DST_SCTP_PORT,
            listen: true,
            mode: HandshakeMode::Regular,
            ..Config::default()
        })?;
        run("fastshake, regular", "INIT-ACK 13-18 kpps, 416 B", Ok((server.addr, None)));
    }
    {
        let server = engine_server(Config {
            local_port: FLOOD_DST_SCTP_PORT,
            listen: true,
            mode: HandshakeMode::AltOnly,
            ..Config::default()
        })?;
        run("fastshake, alternative", "ERROR+ALT-COOKIE ~52 kpps, 40 B", Ok((server.addr, None)));
    }
    let usrsctp = if args.usrsctp_echo_server.exists() {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        let our_port = socket.local_addr()?.port();
        let their_port = free_udp_port()?;
        match start_usrsctp_echo(&args.usrsctp_echo_server, their_port, our_port) {
            Ok(guard) => {
                run(
                    "usrsctp echo_server",
                    "INIT-ACK 13-18 kpps (kernel stacks)",
                    Ok((SocketAddr::from(([127, 0, 0, 1], their_port)), Some(socket))),
                );
                drop(guard);
                true
            }
            Err(e) => {
                run("usrsctp echo_server", "-", Err(e));
                false
            }
        }
    } else {
        run(
            "usrsctp echo_server",
            "-",
            Err(anyhow::anyhow!(
                "{} not found (apt-get install libusrsctp-examples)",
                args.usrsctp_echo_server.display()
            )),
        );
        false
    };
    print_flood(&rows, init.len());

    let rate =
        |i: usize| rows.get(i).and_then(|r| r.result.as_ref().map(|r| r.answers_per_second())).unwrap_or(0.0);
    let size = |i: usize| rows.get(i).and_then(|r| r.result.as_ref().map(|r| r.answer_size)).unwrap_or(0);
    let (floor, alt, regular) = (rate(0), rate(3), rate(2));
    println!(
        "ALT-COOKIE answer size: {} B = {:.2}x the INIT (target <= 1.10x); regular INIT-ACK {} B = {:.2}x",
        size(3),
        size(3) as f64 / init.len() as f64,
        size(2),
        size(2) as f64 / init.len() as f64
    );
    if usrsctp && rate(4) > 0.0 {
        println!("ALT-COOKIE answer rate: {:.2}x usrsctp's INIT-ACK rate (target >= 3x)", alt / rate(4));
    }
    if floor > 0.0 {
        println!(
            "ALT-COOKIE answer rate: {:.0}% of the bare UDP echo (target >= 80%); our INIT-ACK {:.0}%",
            100.0 * alt / floor,
            100.0 * regular / floor
        );
    }
    Ok(())
}

fn last_answer_kind(r: &FloodResult) -> String {
    if r.answers == 0 {
        "no answer".into()
    } else {
        r.answer_kind.clone().unwrap_or_default()
    }
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
        CachedZeroRtt,
        Cookieless,
    }

    impl Variant {
        fn label(self) -> &'static str {
            match self {
                Variant::Regular => "regular (DATA with COOKIE-ECHO)",
                Variant::Alternative => "alternative (ERROR+cookie, INIT+data)",
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
        let mut in_flight: BinaryHeap<Reverse<(Instant, u64, bool, Vec<u8>)>> = BinaryHeap::new();
        let mut sequence = 0u64;
        let request = Message { stream: 0, unordered: false, ppid: 0, data: REQUEST.to_vec() };
        let handle: AssociationHandle = client.connect(
            now,
            Some(client_addr),
            server_addr,
            7,
            ConnectOptions { zero_rtt: vec![request], cached_cookie },
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
                    Event::Connected { handshake, .. } => outcome.handshake = Some(handshake),
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
        match variant {
            Variant::Regular => {
                exchange(&mut server_endpoint(false), HandshakeMode::Regular, None, delay, 1, start)
            }
            Variant::Alternative => {
                exchange(&mut server_endpoint(false), HandshakeMode::Both, None, delay, 2, start)
            }
            Variant::Cookieless => {
                exchange(&mut server_endpoint(true), HandshakeMode::Both, None, delay, 3, start)
            }
            Variant::CachedZeroRtt => {
                let mut server = server_endpoint(false);
                let first = exchange(&mut server, HandshakeMode::Both, None, delay, 4, start)?;
                let cookie = first
                    .cookie
                    .ok_or_else(|| anyhow::anyhow!("the first association brought no ALT-COOKIE"))?;
                let later = first.ended + Duration::from_secs(1);
                exchange(&mut server, HandshakeMode::Both, Some(cookie), delay, 5, later)
            }
        }
    }

    pub fn run(delays_ms: &[u64]) -> anyhow::Result<()> {
        println!(
            "== Time to first byte: request {} B, response {} B, 2 Mbit/s each way, IPv4+UDP headers counted ==",
            REQUEST.len(),
            RESPONSE.len()
        );
        println!("   (in-memory path model in virtual time: FIFO serialisation, then one-way delay)");
        println!(
            "{:<40} {:>9} {:>10} {:>8} {:>8}  {}",
            "setup", "delay ms", "TTFB ms", "RTTs", "packets", "opened by"
        );
        for &delay_ms in delays_ms {
            let delay = Duration::from_millis(delay_ms);
            let rtt = 2.0 * delay.as_secs_f64();
            for variant in
                [Variant::Regular, Variant::Alternative, Variant::CachedZeroRtt, Variant::Cookieless]
            {
                match measure(variant, delay) {
                    Ok(o) => println!(
                        "{:<40} {:>9} {:>10.2} {:>8.2} {:>8}  {}",
                        variant.label(),
                        delay_ms,
                        o.ttfb.as_secs_f64() * 1e3,
                        o.ttfb.as_secs_f64() / rtt,
                        o.packets,
                        o.handshake.map(|h| format!("{h:?}")).unwrap_or_else(|| "?".into())
                    ),
                    Err(e) => println!("{:<40} {:>9}  failed: {e:#}", variant.label(), delay_ms),
                }
            }
        }
        println!("Target: cached ALT-COOKIE + zero-RTT data = 1 RTT (plus serialisation).");
        println!(
            "Paper (seed 004, Fig. 16): regular and alternative about equal; cached cookie halves the time."
        );
        Ok(())
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let limits = if args.quick {
        FloodLimits { max_packets: 50_000, max_time: Duration::from_secs(1), rate_pps: args.rate }
    } else {
        FloodLimits { max_packets: 200_000, max_time: Duration::from_secs(5), rate_pps: args.rate }
    };
    run_floods(&args, limits)?;
    println!();
    ttfb::run(if args.quick { &[5, 50] } else { &[5, 20, 50, 100] })
}
