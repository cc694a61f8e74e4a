//! wolfssl-peer: a DTLS 1.3 (and 1.2) peer on wolfSSL, an independent implementation for
//! fastshake's interop tests, and the in-memory handshake benchmark fastshake's own is held against.
//!
//!   wolfssl-peer server --listen 127.0.0.1:0 (--psk-identity ID --psk HEX | --cert CHAIN.pem --key KEY.pem
//!                       [--ca CA.pem --mutual]) [--dtls 1.3|1.2] [--groups G,..] [--suite NAME] [--cid]
//!                       [--psk-ke] [--no-hrr-cookie] [--early-data] [--sessions N] [--time-limit 30s]
//!   wolfssl-peer client --connect HOST:PORT (--psk-identity ID --psk HEX | --ca CA.pem [--server-name NAME]
//!                       [--cert CHAIN.pem --key KEY.pem]) [--dtls ..] [--groups ..] [--suite ..] [--cid]
//!                       [--psk-ke] [--key-update] [--resume [--early-data]] [--rebind-after N]
//!                       [--linger 2s] [--time-limit 30s]
//!   wolfssl-peer bench --handshakes N (--psk | --cert CHAIN.pem --key KEY.pem --ca CA.pem) [--groups ..]
//!                      [--suite NAME] [--psk-ke] [--no-hrr-cookie] [--dtls ..]
//!                      [--records N --record-bytes B]
//!
//! bench with --records: after the handshakes, the last pair's client writes N records of B bytes
//! (timed: "seal MB/s"), then its server reads them (timed: "open MB/s"), through the in-memory
//! queues (one copy of each datagram into its queue).
//!
//! The server says "listening on ADDR" once bound, serves one client after the other (a ClientHello
//! from a new address ends the current session), and echoes every record (also printed on stdout).
//! The client sends each line of its stdin as one record and prints the replies. Each prints one
//! "handshake done: version=.. suite=.. group=.. hrr=.. resumed=.. resent=.." line on stderr
//! (with `early_data=..` after --early-data: the client's status, the bytes the server took).
//!
//! --early-data: a server takes up to 16 kB of 0-RTT data (it needs --no-hrr-cookie: a
//! HelloRetryRequest refuses early data, RFC 8446 §4.1.2) and echoes it after the handshake; a
//! client with --resume sends the first line of stdin as early data in the resumption.
//! --rebind-after N: the client moves to a new local port after the Nth reply. With --cid the
//! server takes a record carrying its CID from a new address and, once wolfSSL deprotected it,
//! sends there (RFC 9146 §6; wolfSSL does this itself only on its own socket IO).

mod wolf;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wolf::{Context, Datagrams, Role, Ssl, Step, Version};

const DEFAULT_SUITE_13: &str = "TLS13-AES128-GCM-SHA256";
/// The bench's PSK when none is given.
const BENCH_IDENTITY: &str = "bench";
const BENCH_KEY: &str = "00112233445566778899aabbccddeeff";

#[derive(Clone, Default)]
struct Options {
    listen: Option<String>,
    connect: Option<String>,
    psk_identity: Option<String>,
    psk: Option<String>,
    psk_switch: bool,
    cert: Option<String>,
    key: Option<String>,
    ca: Option<String>,
    mutual: bool,
    server_name: Option<String>,
    dtls: Option<String>,
    groups: Vec<u16>,
    suite: Option<String>,
    cid: bool,
    psk_ke: bool,
    no_hrr_cookie: bool,
    key_update: bool,
    resume: bool,
    early_data: bool,
    rebind_after: Option<u64>,
    sessions: u64,
    linger: Option<Duration>,
    time_limit: Option<Duration>,
    handshakes: u64,
    /// bench: records (and their bytes) to time after the handshakes.
    records: u32,
    record_bytes: usize,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let number = |digits: &str| digits.parse::<f64>().map_err(|_| format!("not a duration: {text:?}"));
    let seconds = if let Some(ms) = text.strip_suffix("ms") {
        number(ms)? / 1000.0
    } else if let Some(s) = text.strip_suffix('s') {
        number(s)?
    } else if let Some(m) = text.strip_suffix('m') {
        number(m)? * 60.0
    } else {
        number(text)?
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// The named groups by the names fastshake uses (and wolfSSL's for the rest).
fn group_id(name: &str) -> Result<u16, String> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "x25519mlkem768" => 0x11ec,
        "secp256r1mlkem768" => 0x11eb,
        "mlkem768" => 0x0201,
        "x25519" => 29,
        "x448" => 30,
        "secp256r1" | "p256" | "p-256" => 23,
        "secp384r1" | "p384" | "p-384" => 24,
        "secp521r1" => 25,
        _ => return Err(format!("unknown group {name:?}")),
    })
}

fn parse(mode: &str, args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => o.listen = Some(value()?),
            "--connect" => o.connect = Some(value()?),
            "--psk-identity" => o.psk_identity = Some(value()?),
            // In bench a switch (a built-in key); elsewhere the key in hex.
            "--psk" if mode == "bench" => o.psk_switch = true,
            "--psk" => o.psk = Some(value()?),
            "--cert" => o.cert = Some(value()?),
            "--key" => o.key = Some(value()?),
            "--ca" => o.ca = Some(value()?),
            "--mutual" => o.mutual = true,
            "--server-name" => o.server_name = Some(value()?),
            "--dtls" => o.dtls = Some(value()?),
            "--groups" => o.groups = value()?.split(',').map(group_id).collect::<Result<_, _>>()?,
            "--suite" => o.suite = Some(value()?),
            "--cid" => o.cid = true,
            "--psk-ke" => o.psk_ke = true,
            "--no-hrr-cookie" => o.no_hrr_cookie = true,
            "--key-update" => o.key_update = true,
            "--resume" => o.resume = true,
            "--early-data" => o.early_data = true,
            "--rebind-after" => {
                o.rebind_after = Some(value()?.parse().map_err(|_| "--rebind-after: not a number")?)
            }
            "--sessions" => o.sessions = value()?.parse().map_err(|_| "--sessions: not a number")?,
            "--linger" => o.linger = Some(parse_duration(&value()?)?),
            "--time-limit" => o.time_limit = Some(parse_duration(&value()?)?),
            "-v" => wolf::TRACE.store(true, std::sync::atomic::Ordering::Relaxed),
            "--handshakes" => o.handshakes = value()?.parse().map_err(|_| "--handshakes: not a number")?,
            "--records" => o.records = value()?.parse().map_err(|_| "--records: not a number")?,
            "--record-bytes" => {
                o.record_bytes = value()?.parse().map_err(|_| "--record-bytes: not a number")?
            }
            _ => return Err(format!("unknown flag {flag:?}")),
        }
    }
    Ok(o)
}

impl Options {
    fn version(&self) -> Result<Version, String> {
        match self.dtls.as_deref() {
            None | Some("1.3") => Ok(Version::Dtls13),
            Some("1.2") => Ok(Version::Dtls12),
            Some(other) => Err(format!("--dtls {other}: 1.3 or 1.2")),
        }
    }

    /// The CTX of one role with every setting the flags ask for.
    fn context(&self, role: Role) -> Result<Context, String> {
        let version = self.version()?;
        let ctx = Context::new(role, version)?;
        let suite_13 = self.suite.clone().unwrap_or_else(|| DEFAULT_SUITE_13.to_string());
        if let Some(suite) = &self.suite {
            ctx.set_suites(suite)?;
        } else if version == Version::Dtls13 {
            ctx.set_suites(DEFAULT_SUITE_13)?;
        }
        let psk = match (&self.psk_identity, &self.psk) {
            (Some(identity), Some(hex)) => Some((identity.clone(), decode_hex(hex)?)),
            (None, None) if self.psk_switch => Some((BENCH_IDENTITY.to_string(), decode_hex(BENCH_KEY)?)),
            (None, None) => None,
            _ => return Err("--psk-identity and --psk go together".into()),
        };
        if let Some((identity, key)) = &psk {
            ctx.use_psk(identity, key, &suite_13)?;
        }
        if self.psk_ke {
            ctx.psk_without_dhe()?;
        }
        if self.early_data && role == Role::Server {
            ctx.accept_early_data(16 * 1024)?;
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => ctx.use_chain(cert, key)?,
            (None, None) => {}
            _ => return Err("--cert and --key go together".into()),
        }
        if let Some(ca) = &self.ca {
            ctx.verify_with(ca, role == Role::Server && self.mutual)?;
        } else if self.mutual {
            return Err("--mutual needs --ca".into());
        }
        if psk.is_none() && self.ca.is_none() && self.cert.is_none() {
            return Err(
                "no credentials: --psk-identity/--psk, or --cert/--key (server), or --ca (client)".into()
            );
        }
        if !self.groups.is_empty() {
            ctx.set_groups(&self.groups)?;
        }
        Ok(ctx)
    }

    /// A session of `ctx` over `transport` with the per-session settings.
    fn session(&self, ctx: &Context, transport: Box<dyn Datagrams>) -> Result<Ssl, String> {
        let mut ssl = ctx.session(transport)?;
        if self.cid {
            ssl.use_cid(&random_cid())?;
        }
        match ctx.role {
            Role::Client => {
                if let Some(&first) = self.groups.first() {
                    ssl.key_share(first)?;
                }
                if let Some(name) = &self.server_name {
                    ssl.expect_name(name)?;
                }
            }
            Role::Server if self.no_hrr_cookie && self.version()? == Version::Dtls13 => {
                ssl.no_hrr_cookie()?
            }
            Role::Server => {}
        }
        Ok(ssl)
    }
}

/// The CID the peer is to put on its records: 8 bytes, as pion-peer's server issues.
fn random_cid() -> [u8; 8] {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    hasher.finish().to_be_bytes()
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("--psk is not hex: {hex:?}");
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return Err(bad());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect()
}

/// Ends the process with status 2 once `limit` passes: no run of this peer hangs a test.
fn exit_after(mode: &str, limit: Duration) {
    let mode = mode.to_string();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("wolfssl-peer {mode}: time limit of {limit:?} reached");
        std::process::exit(2);
    });
}

/// A datagram from another client that opened with a ClientHello, kept for the next session.
type NextHello = Rc<RefCell<Option<(SocketAddr, Vec<u8>)>>>;

/// A UDP socket towards one peer; datagrams from elsewhere are dropped, except a server's new
/// ClientHello, which is kept for the next session.
struct Udp {
    socket: Rc<UdpSocket>,
    peer: SocketAddr,
    /// Datagrams with where they came from.
    pending: VecDeque<(SocketAddr, Vec<u8>)>,
    next_hello: Option<NextHello>,
    /// The CID on the records we receive, once negotiated.
    cid: Option<Vec<u8>>,
    /// Where the datagram last handed to wolfSSL came from.
    last_from: Option<SocketAddr>,
}

impl Udp {
    fn new(socket: Rc<UdpSocket>, peer: SocketAddr, next_hello: Option<NextHello>) -> Udp {
        Udp { socket, peer, pending: VecDeque::new(), next_hello, cid: None, last_from: None }
    }

    /// A DTLS 1.3 unified header with the C bit and our CID (RFC 9147 §4): `001C SLEE`, then the CID.
    fn carries_our_cid(&self, datagram: &[u8]) -> bool {
        let Some(cid) = &self.cid else { return false };
        datagram.len() > 1 + cid.len() && datagram[0] & 0xf0 == 0x30 && datagram[1..1 + cid.len()] == cid[..]
    }

    /// The client moves to a new local port (a NAT rebinding, say).
    fn rebind(&mut self) -> Result<SocketAddr, String> {
        let local = self.socket.local_addr().map_err(|e| e.to_string())?;
        let socket = UdpSocket::bind(SocketAddr::new(local.ip(), 0)).map_err(|e| format!("rebind: {e}"))?;
        self.socket = Rc::new(socket);
        self.socket.local_addr().map_err(|e| e.to_string())
    }
}

impl Datagrams for Udp {
    fn send(&mut self, datagram: &[u8]) -> std::io::Result<()> {
        self.socket.send_to(datagram, self.peer).map(|_| ())
    }

    fn recv(&mut self) -> Option<Vec<u8>> {
        let (from, datagram) = self.pending.pop_front()?;
        self.last_from = Some(from);
        Some(datagram)
    }

    fn wait(&mut self, timeout: Duration) -> bool {
        if !self.pending.is_empty() {
            return true;
        }
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.socket.set_read_timeout(Some(left)).is_err() {
                return false;
            }
            match self.socket.recv_from(&mut buf) {
                Ok((n, from)) if from == self.peer || self.carries_our_cid(&buf[..n]) => {
                    self.pending.push_back((from, buf[..n].to_vec()));
                    return true;
                }
                Ok((n, from)) => {
                    if let Some(next) = &self.next_hello {
                        if wolf::is_client_hello(&buf[..n]) {
                            *next.borrow_mut() = Some((from, buf[..n].to_vec()));
                            return true;
                        }
                    }
                }
                Err(_) => return false,
            }
        }
    }

    fn peer_id(&self) -> Vec<u8> {
        self.peer.to_string().into_bytes()
    }

    fn expect_cid(&mut self, cid: Vec<u8>) {
        self.cid = Some(cid);
    }

    fn follow_sender(&mut self) -> Option<String> {
        let from = self.last_from.filter(|from| *from != self.peer)?;
        self.peer = from;
        Some(from.to_string())
    }

    fn rebind(&mut self) -> Result<String, String> {
        Udp::rebind(self).map(|to| to.to_string())
    }
}

/// `early`: what to say of 0-RTT, when asked for.
fn handshake_line(role: &str, ssl: &mut Ssl, early: Option<String>) {
    let mut line = format!("wolfssl-peer {role}: handshake done: {}", ssl.describe());
    if let Some((tx, rx)) = ssl.cids() {
        line += &format!(" cid_out={} cid_in={}", hex(&tx), hex(&rx));
    }
    if let Some(early) = early {
        line += &format!(" early_data={early}");
    }
    eprintln!("{line}");
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "none".into();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn run_server(o: &Options) -> Result<(), String> {
    let ctx = o.context(Role::Server)?;
    let listen = o.listen.as_deref().unwrap_or("127.0.0.1:0");
    let socket = Rc::new(UdpSocket::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?);
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    eprintln!("wolfssl-peer server: listening on {local}");
    let next: NextHello = Rc::default();
    let mut served = 0;
    while o.sessions == 0 || served < o.sessions {
        let taken = next.borrow_mut().take();
        let (peer, hello) = match taken {
            Some(first) => first,
            None => first_hello(&socket)?,
        };
        let mut transport = Udp::new(socket.clone(), peer, Some(next.clone()));
        transport.pending.push_back((peer, hello));
        if let Err(why) = serve(o, &ctx, Box::new(transport), &next) {
            eprintln!("wolfssl-peer server: session with {peer} failed: {why}");
        }
        served += 1;
    }
    Ok(())
}

/// Waits for a ClientHello from anyone (stray records of an ended session are dropped).
fn first_hello(socket: &UdpSocket) -> Result<(SocketAddr, Vec<u8>), String> {
    socket.set_read_timeout(None).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from) = socket.recv_from(&mut buf).map_err(|e| format!("receive: {e}"))?;
        if wolf::is_client_hello(&buf[..n]) {
            return Ok((from, buf[..n].to_vec()));
        }
    }
}

fn serve(o: &Options, ctx: &Context, transport: Box<dyn Datagrams>, next: &NextHello) -> Result<(), String> {
    let peer = transport.peer_id();
    let mut peer = String::from_utf8_lossy(&peer).into_owned();
    let mut ssl = o.session(ctx, transport)?;
    let mut buf = vec![0u8; 1 << 14];
    let mut early = Vec::new();
    if o.early_data {
        loop {
            match ssl.read_early_data(&mut buf)? {
                Step::Done(0) => break,
                Step::Done(n) => early.push(buf[..n].to_vec()),
                Step::WantRead if ssl.is_done() => break,
                Step::WantRead => ssl.wait_or_retransmit()?,
                Step::Closed => return Err("the peer closed during the handshake".into()),
            }
        }
    }
    ssl.handshake(Role::Server)?;
    let early_bytes = o.early_data.then(|| early.iter().map(Vec::len).sum::<usize>().to_string());
    handshake_line("server", &mut ssl, early_bytes);
    if let Some((_, rx)) = ssl.cids().filter(|(_, rx)| !rx.is_empty()) {
        ssl.transport().expect_cid(rx);
    }
    let mut stdout = std::io::stdout();
    // Early data is echoed once the handshake is done, under the 1-RTT keys.
    for data in early {
        let _ = stdout.write_all(&data);
        let _ = stdout.flush();
        ssl.write(&data)?;
    }
    loop {
        if next.borrow().is_some() {
            eprintln!("wolfssl-peer server: session with {peer} ended: a new client");
            return Ok(());
        }
        match ssl.read(&mut buf)? {
            Step::Done(n) => {
                if let Some(to) = ssl.transport().follow_sender() {
                    eprintln!("wolfssl-peer server: session with {peer} moved to {to}");
                    peer = to;
                }
                let _ = stdout.write_all(&buf[..n]);
                let _ = stdout.flush();
                ssl.write(&buf[..n])?;
            }
            Step::WantRead => ssl.wait_or_retransmit()?,
            Step::Closed => {
                eprintln!("wolfssl-peer server: session with {peer} ended: close_notify");
                return Ok(());
            }
        }
    }
}

/// A client session; `early` goes as 0-RTT data of the resumption of `resume`.
fn client_session(
    o: &Options,
    ctx: &Context,
    resume: Option<&wolf::Session>,
    early: Option<&[u8]>,
) -> Result<Ssl, String> {
    let connect = o.connect.as_deref().ok_or("--connect is required")?;
    let peer = connect
        .to_socket_addrs()
        .map_err(|e| format!("--connect {connect}: {e}"))?
        .next()
        .ok_or_else(|| format!("--connect {connect}: no address"))?;
    let local = match peer {
        SocketAddr::V4(a) if a.ip().is_loopback() => "127.0.0.1:0",
        SocketAddr::V4(_) => "0.0.0.0:0",
        SocketAddr::V6(a) if a.ip().is_loopback() => "[::1]:0",
        SocketAddr::V6(_) => "[::]:0",
    };
    let socket = Rc::new(UdpSocket::bind(local).map_err(|e| format!("bind {local}: {e}"))?);
    let transport = Udp::new(socket, peer, None);
    let mut ssl = o.session(ctx, Box::new(transport))?;
    if let Some(session) = resume {
        ssl.resume(session)?;
    }
    if let Some(data) = early {
        loop {
            match ssl.write_early_data(data)? {
                Step::Done(_) => break,
                Step::WantRead => ssl.wait_or_retransmit()?,
                Step::Closed => return Err("the server closed during the handshake".into()),
            }
        }
    }
    ssl.handshake(Role::Client).map_err(|e| format!("handshake with {peer}: {e}"))?;
    let status = (o.early_data && resume.is_some()).then(|| ssl.early_data_status().to_string());
    handshake_line("client", &mut ssl, status);
    Ok(ssl)
}

/// Reads until the server's NewSessionTicket has come (DTLS 1.3 sends it after the handshake).
fn await_ticket(ssl: &mut Ssl) -> Result<wolf::Session, String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; 1 << 14];
    while Instant::now() < deadline {
        if let Some(session) = ssl.ticket_session() {
            return Ok(session);
        }
        match ssl.read(&mut buf)? {
            Step::Done(_) => {}
            Step::WantRead => {
                ssl.transport().wait(Duration::from_millis(50));
            }
            Step::Closed => return Err("the server closed before sending a ticket".into()),
        }
    }
    Err("no session ticket from the server within 5 s".into())
}

fn run_client(o: &Options) -> Result<(), String> {
    let ctx = o.context(Role::Client)?;
    let (lines_tx, lines) = mpsc::channel::<Option<String>>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(Some(line)).is_err() {
                return;
            }
        }
        let _ = lines_tx.send(None);
    });
    let mut sent = 0u64;
    let mut ssl = client_session(o, &ctx, None, None)?;
    if o.resume {
        let session = await_ticket(&mut ssl)?;
        ssl.shutdown();
        drop(ssl);
        // The first line of stdin, as 0-RTT data.
        let early = match o.early_data.then(|| lines.recv()) {
            Some(Ok(Some(line))) => Some(format!("{line}\n")),
            _ => None,
        };
        sent += u64::from(early.is_some());
        ssl = client_session(o, &ctx, Some(&session), early.as_deref().map(str::as_bytes))?;
    }

    let linger = o.linger.unwrap_or(Duration::from_secs(2));
    let mut queue: VecDeque<String> = VecDeque::new();
    let mut eof_at: Option<Instant> = None;
    let mut replies = 0u64;
    // With --key-update, nothing more is sent until the first echo came and the keys were updated.
    let mut key_update_due = o.key_update;
    let mut buf = vec![0u8; 1 << 14];
    let mut stdout = std::io::stdout();
    for data in std::mem::take(&mut ssl.read_ahead) {
        let _ = stdout.write_all(&data);
        replies += 1;
    }
    let _ = stdout.flush();
    let mut idle = Duration::ZERO;
    loop {
        while let Ok(line) = lines.try_recv() {
            match line {
                Some(line) => queue.push_back(line),
                None => eof_at = Some(Instant::now()),
            }
        }
        while !(key_update_due && sent > 0) {
            let Some(line) = queue.pop_front() else { break };
            ssl.write(format!("{line}\n").as_bytes())?;
            sent += 1;
        }
        match ssl.read(&mut buf)? {
            Step::Done(n) => {
                idle = Duration::ZERO;
                let _ = stdout.write_all(&buf[..n]);
                let _ = stdout.flush();
                replies += 1;
                if o.rebind_after == Some(replies) {
                    let to = ssl.transport().rebind()?;
                    eprintln!("wolfssl-peer client: moved to {to}");
                }
                if key_update_due {
                    key_update_due = false;
                    ssl.update_keys()?;
                    eprintln!("wolfssl-peer client: key update sent");
                    ssl.write(b"after key update\n")?;
                    sent += 1;
                }
            }
            Step::WantRead => {
                let step = Duration::from_millis(20);
                if ssl.transport().wait(step) {
                    idle = Duration::ZERO;
                } else {
                    idle += step;
                    // Unacknowledged records (a KeyUpdate, say) go again on wolfSSL's timer.
                    if idle >= ssl.timeout() {
                        idle = Duration::ZERO;
                        ssl.wait_or_retransmit()?;
                    }
                }
            }
            Step::Closed => {
                eprintln!("wolfssl-peer client: the server closed");
                return Ok(());
            }
        }
        if let Some(at) = eof_at {
            let answered = queue.is_empty() && !key_update_due && replies >= sent;
            if answered || at.elapsed() >= linger {
                break;
            }
        }
    }
    ssl.shutdown();
    Ok(())
}

/// One end of an in-memory link: what it sends lands in the other's inbox.
struct Memory {
    inbox: Rc<RefCell<VecDeque<Vec<u8>>>>,
    outbox: Rc<RefCell<VecDeque<Vec<u8>>>>,
}

impl Datagrams for Memory {
    fn send(&mut self, datagram: &[u8]) -> std::io::Result<()> {
        self.outbox.borrow_mut().push_back(datagram.to_vec());
        Ok(())
    }

    fn recv(&mut self) -> Option<Vec<u8>> {
        self.inbox.borrow_mut().pop_front()
    }

    fn wait(&mut self, _timeout: Duration) -> bool {
        !self.inbox.borrow().is_empty()
    }

    fn peer_id(&self) -> Vec<u8> {
        b"memory".to_vec()
    }
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we hand it; zeroed is a valid rusage.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn run_bench(o: &Options) -> Result<(), String> {
    if o.handshakes == 0 {
        return Err("--handshakes N is required".into());
    }
    // The server authenticates with the chain, the client validates it: neither the other's.
    let client_ctx = Options { cert: None, key: None, ..o.clone() }.context(Role::Client)?;
    let server_ctx = Options { ca: None, ..o.clone() }.context(Role::Server)?;
    let mut times = Vec::with_capacity(o.handshakes as usize);
    let mut description = String::new();
    let mut last = None;
    let cpu_start = cpu_time();
    let wall_start = Instant::now();
    for i in 0..o.handshakes {
        let (to_server, to_client) = (Rc::default(), Rc::default());
        let client_io = Memory { inbox: Rc::clone(&to_client), outbox: Rc::clone(&to_server) };
        let server_io = Memory { inbox: to_server, outbox: to_client };
        let start = Instant::now();
        let mut client = o.session(&client_ctx, Box::new(client_io))?;
        let mut server = o.session(&server_ctx, Box::new(server_io))?;
        let (mut client_done, mut server_done) = (false, false);
        for _round in 0..64 {
            if !client_done {
                client_done = matches!(client.handshake_step(Role::Client)?, Step::Done(()));
            }
            if !server_done {
                server_done = matches!(server.handshake_step(Role::Server)?, Step::Done(()));
            }
            if client_done && server_done {
                break;
            }
        }
        if !(client_done && server_done) {
            return Err(format!("handshake {i} stalled"));
        }
        times.push(start.elapsed());
        if i == 0 {
            description = client.describe();
        }
        // Each pair lives until the next one exists, as sessions do on a server, and as they do
        // in fastshake's own bench (its endpoint keeps up to 1000). Freeing every session before
        // the next handshake let glibc hand the heap back to the OS each time: about 200 page
        // faults per handshake, a third of a hybrid handshake's time, which no server pays.
        last = Some((client, server));
    }
    let wall = wall_start.elapsed();
    let cpu = cpu_time() - cpu_start;
    if let (Some((client, server)), true) = (&mut last, o.records > 0) {
        let (seal, open) = record_throughput(client, server, o.records, o.record_bytes)?;
        println!("seal MB/s: {seal:.1}");
        println!("open MB/s: {open:.1}");
    }
    times.sort();
    let n = o.handshakes as f64;
    let median = times[times.len() / 2];
    let credentials = if o.cert.is_some() { "certificates" } else { "psk" };
    println!("wolfssl-peer bench: {} handshakes, {credentials}, {description}", o.handshakes);
    println!("handshakes/s: {:.1}", n / wall.as_secs_f64());
    println!("CPU ms per handshake: {:.3} (client and server together)", cpu.as_secs_f64() * 1000.0 / n);
    println!("median ms per handshake: {:.3}", median.as_secs_f64() * 1000.0);
    Ok(())
}

/// The client writes `count` records of `size` bytes, then the server reads them: MB/s of
/// application data each way (seal, open).
fn record_throughput(
    client: &mut Ssl,
    server: &mut Ssl,
    count: u32,
    size: usize,
) -> Result<(f64, f64), String> {
    let data = vec![0x42u8; size];
    let start = Instant::now();
    for _ in 0..count {
        client.write(&data)?;
    }
    let seal = start.elapsed().as_secs_f64();
    let mut buf = vec![0u8; size.max(1)];
    let (mut opened, mut records) = (0usize, 0u32);
    let start = Instant::now();
    while records < count {
        match server.read(&mut buf)? {
            Step::Done(n) => {
                opened += n;
                records += 1;
            }
            _ => break,
        }
    }
    let open = start.elapsed().as_secs_f64();
    if opened != size * count as usize {
        return Err(format!("read {opened} bytes of {} written", size * count as usize));
    }
    let megabytes = opened as f64 / 1e6;
    Ok((megabytes / seal, megabytes / open))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = args.first().cloned() else {
        eprintln!("usage: wolfssl-peer server|client|bench [flags]");
        std::process::exit(64);
    };
    let result = parse(&mode, &args[1..]).and_then(|o| {
        let limit = o.time_limit.or((mode != "bench").then_some(Duration::from_secs(30)));
        if let Some(limit) = limit {
            exit_after(&mode, limit);
        }
        match mode.as_str() {
            "server" => run_server(&o),
            "client" => run_client(&o),
            "bench" => run_bench(&o),
            other => Err(format!("unknown command {other:?}: server, client or bench")),
        }
    });
    if let Err(why) = result {
        eprintln!("wolfssl-peer {mode}: {why}");
        std::process::exit(1);
    }
}
