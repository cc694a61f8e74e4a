//! `fastshake sctp server|client`: SCTP over UDP encapsulation with the alternative handshake.
//!
//! The server prints what arrives to standard output (and echoes it with `--echo`); the client
//! sends standard input, one message per read, and prints what arrives. Both write a summary of
//! each association to standard error: the handshake that opened it, its round trips, and the
//! bytes each way.
//!
//! ```text
//! fastshake sctp server --listen 0.0.0.0:9899 --port 5060 --mode both --echo
//! echo hi | fastshake sctp client --connect 192.0.2.1:9899 --port 5060 --cookie-cache ~/.sctp-cookies
//! echo hi | fastshake sctp client --connect 192.0.2.1:9899 --port 5060 --cookie-cache ~/.sctp-cookies --zero-rtt
//! ```
//! The first client run takes the alternative handshake with a cookie exchange (2 round trips)
//! and caches the ALT-COOKIE; the second opens with the cached cookie and carries "hi" in the
//! INIT: the answer arrives after one round trip. Failures exit non-zero with the reason (ABORT
//! and its cause, no answer after the INIT retransmissions, timeout).

use crate::say::say;
use anyhow::{bail, Context};
use fastshake_net::cache_file::AltCookieFile;
use fastshake_net::sctp::{DriverStats, SctpDriver, DEFAULT_COOKIE_ROTATION, UDP_ENCAPSULATION_PORT};
use fastshake_sctp::{
    AssociationHandle, AssociationStats, Config, ConnectOptions, Event, HandshakeKind, HandshakeMode, Message,
};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::sync::watch;

#[derive(clap::Args)]
pub struct SctpArgs {
    #[command(subcommand)]
    role: Role,
}

#[derive(clap::Subcommand)]
enum Role {
    /// Accept associations; print what arrives (and echo it with --echo).
    Server(ServerArgs),
    /// Open one association; send standard input, print what arrives.
    Client(ClientArgs),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    /// RFC 9260 handshake only (the paper's 0).
    Regular,
    /// Alternative handshake where both sides speak it, regular otherwise (the paper's 1).
    Both,
    /// Alternative handshake only: a server never sends an INIT-ACK with a state cookie (the
    /// paper's 2).
    Alt,
}

impl From<ModeArg> for HandshakeMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Regular => HandshakeMode::Regular,
            ModeArg::Both => HandshakeMode::Both,
            ModeArg::Alt => HandshakeMode::AltOnly,
        }
    }
}

#[derive(clap::Args)]
pub struct ServerArgs {
    /// UDP address to listen on (RFC 6951 encapsulation).
    #[arg(long, default_value_t = SocketAddr::from(([0, 0, 0, 0], UDP_ENCAPSULATION_PORT)))]
    listen: SocketAddr,
    /// SCTP port to accept associations on.
    #[arg(long)]
    port: u16,
    /// Handshakes offered.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    mode: ModeArg,
    /// Open associations on an INIT with an empty ALT-COOKIE (protected environments only).
    #[arg(long)]
    cookieless: bool,
    /// Change the cookie key every SECONDS (every worker at once). A cookie opens under the
    /// current and the previous key, so a client's cached ALT-COOKIE lasts one to two periods.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_COOKIE_ROTATION.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    cookie_rotation: u64,
    /// Send every message back on the stream it came on.
    #[arg(long)]
    echo: bool,
    /// Exit after this many associations have ended (over every worker).
    #[arg(long)]
    exit_after: Option<u64>,
    /// Serve with N workers, each a thread with its own socket on --listen (SO_REUSEPORT: the
    /// kernel spreads peers by address and port) and its own associations. A packet that reaches
    /// a worker other than its association's (a multihomed peer's other path) is passed to the
    /// owner by its verification tag; the cookie key is shared, so an ALT-COOKIE opens at every
    /// worker. Default: one worker per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=255))]
    workers: Option<u16>,
    #[command(flatten)]
    socket: crate::dtls_cmd::SocketArgs,
}

#[derive(clap::Args)]
pub struct ClientArgs {
    /// The server's UDP address (RFC 6951 encapsulation).
    #[arg(long)]
    connect: SocketAddr,
    /// The server's SCTP port.
    #[arg(long)]
    port: u16,
    /// Handshakes offered.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    mode: ModeArg,
    /// Carry the first chunk of standard input in the INIT (ALT-DATA).
    #[arg(long)]
    zero_rtt: bool,
    /// File of ALT-COOKIEs per (local address, server): read before, updated after.
    #[arg(long)]
    cookie_cache: Option<PathBuf>,
    /// Local UDP address (default: any port on the matching family).
    #[arg(long)]
    local: Option<SocketAddr>,
    /// A further local IP address (multihoming; repeatable): the same UDP port is bound on it, it
    /// is announced in the INIT, and an ALT-COOKIE for it is fetched after the handshake (and
    /// cached with --cookie-cache).
    #[arg(long = "extra-local")]
    extra_local: Vec<IpAddr>,
    /// Our SCTP port (0: a random one from the dynamic range 49152-65535).
    #[arg(long, default_value_t = 0)]
    local_port: u16,
    /// After standard input ends, wait this long for answers before shutting down.
    #[arg(long, default_value_t = 500)]
    linger_ms: u64,
    /// Shut down as soon as this many bytes have arrived (instead of lingering).
    #[arg(long)]
    expect_bytes: Option<u64>,
    /// Give up (non-zero exit) if the whole exchange takes longer than this.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
    /// Bytes of standard input per message at most (larger than the MTU: fragmented).
    #[arg(long, default_value_t = DEFAULT_MESSAGE)]
    message_bytes: usize,
    /// INIT retransmissions before giving up.
    #[arg(long, default_value_t = 4)]
    max_init_retransmits: u32,
    /// Initial retransmission timeout (RFC 9260 RTO.Initial).
    #[arg(long, default_value_t = 1000)]
    rto_initial_ms: u64,
}

pub fn run(args: SctpArgs) -> anyhow::Result<()> {
    let runtime = match &args.role {
        Role::Server(a) if server_workers(a) > 1 => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(server_workers(a))
            .enable_all()
            .build()?,
        _ => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
    };
    match args.role {
        Role::Server(a) => runtime.block_on(server(a)),
        Role::Client(a) => runtime.block_on(client(a)),
    }
}

/// What an association sent again, from the engine's counters: on a clean path all of it is
/// zero but the zero-RTT data a server did not take (sent again as DATA by design), so the
/// interop tests read this line to tell a stall from a clean run.
fn resent_summary(stats: &AssociationStats) -> String {
    format!(
        "resent: {} INIT/COOKIE-ECHO, {} DATA chunk(s), {} SHUTDOWN/SHUTDOWN-ACK; {} T3-rtx expiries, {} fast retransmits",
        stats.handshake_retransmits,
        stats.retransmitted_chunks,
        stats.shutdown_retransmits,
        stats.t3_expiries,
        stats.fast_retransmits
    )
}

/// The counters of `handle`, alive or just ended.
fn association_stats(driver: &SctpDriver, handle: AssociationHandle) -> Option<AssociationStats> {
    let endpoint = driver.endpoint();
    endpoint.association(handle).or_else(|| endpoint.ended_association(handle)).map(|info| info.stats)
}

fn handshake_name(kind: HandshakeKind) -> &'static str {
    match kind {
        HandshakeKind::Regular => "regular",
        HandshakeKind::AltCookie => "alt-cookie",
        HandshakeKind::AltCached => "alt-cached",
        HandshakeKind::Cookieless => "cookieless",
        HandshakeKind::Snap => "snap",
    }
}

/// What one side saw of one association.
#[derive(Default)]
struct Tally {
    peer: Option<SocketAddr>,
    handshake: Option<(HandshakeKind, u32, usize)>,
    messages_in: u64,
    bytes_in: u64,
    messages_out: u64,
    bytes_out: u64,
    /// Server: echoes waiting for room in the association's send buffer.
    echo_queue: VecDeque<Message>,
}

fn write_stdout(data: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(data)?;
    out.flush()?;
    Ok(())
}

fn server_workers(args: &ServerArgs) -> usize {
    match args.workers {
        None => crate::dtls_cmd::default_workers().clamp(1, 255),
        Some(n) => usize::from(n),
    }
}

async fn server(args: ServerArgs) -> anyhow::Result<()> {
    let config = Arc::new(Config {
        local_port: args.port,
        mode: args.mode.into(),
        cookieless: args.cookieless,
        listen: true,
        ..Config::default()
    });
    let workers = server_workers(&args);
    let sharing = args.socket.port_sharing();
    let mut drivers = SctpDriver::bind_workers(args.listen, config, args.socket.batch, workers, sharing)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    SctpDriver::rotate_cookie_keys(&mut drivers, Duration::from_secs(args.cookie_rotation));
    let local = drivers[0].local_addr();
    say!("sctp server: listening on {} port {}", local, args.port);
    let batched = drivers.iter().filter(|d| d.is_batched()).count();
    let (stop_tx, stop) = watch::channel(false);
    let ended = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, driver) in drivers.into_iter().enumerate() {
        let label = move |h: AssociationHandle| {
            if workers > 1 {
                format!("{index}.{}", h.0)
            } else {
                h.0.to_string()
            }
        };
        let worker =
            serve_worker(driver, label, args.echo, args.exit_after, Arc::clone(&ended), stop.clone());
        tasks.spawn(worker);
    }
    let mut totals = DriverStats::default();
    let mut outcome = Ok(());
    let mut note = |joined: Result<anyhow::Result<DriverStats>, tokio::task::JoinError>| match joined {
        Ok(Ok(stats)) => {
            totals.datagrams_in += stats.datagrams_in;
            totals.datagrams_out += stats.datagrams_out;
            totals.bytes_in += stats.bytes_in;
            totals.bytes_out += stats.bytes_out;
            totals.send_errors += stats.send_errors;
            totals.passed_on += stats.passed_on;
        }
        Ok(Err(e)) => outcome = Err(e),
        Err(e) => outcome = Err(anyhow::anyhow!("a worker stopped: {e}")),
    };
    // The first worker to end (--exit-after reached, or an error) ends them all.
    tokio::select! {
        Some(joined) = tasks.join_next() => note(joined),
        _ = tokio::signal::ctrl_c() => say!("sctp server: interrupted"),
    }
    let _ = stop_tx.send(true);
    while let Some(joined) = tasks.join_next().await {
        note(joined);
    }
    say!(
        "sctp server: {workers} worker(s) ({batched} with batched I/O): {} ended association(s); sent {} datagrams / {} B, received {} datagrams / {} B, {} send error(s), {} packet(s) passed between workers",
        ended.load(Ordering::Relaxed),
        totals.datagrams_out,
        totals.bytes_out,
        totals.datagrams_in,
        totals.bytes_in,
        totals.send_errors,
        totals.passed_on
    );
    outcome
}

/// One worker of `fastshake sctp server`: its own endpoint and socket, until `stop` turns true
/// or every worker together has seen `exit_after` associations end.
async fn serve_worker(
    mut driver: SctpDriver,
    label: impl Fn(AssociationHandle) -> String,
    echo: bool,
    exit_after: Option<u64>,
    ended: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<DriverStats> {
    let mut tallies: HashMap<AssociationHandle, Tally> = HashMap::new();
    loop {
        // Echoes the engine could not take yet, in order, per association.
        for (&h, tally) in tallies.iter_mut() {
            while let Some(message) = tally.echo_queue.front() {
                let len = message.data.len() as u64;
                match driver.send(h, message.clone()) {
                    Ok(()) => {
                        tally.echo_queue.pop_front();
                        tally.messages_out += 1;
                        tally.bytes_out += len;
                    }
                    Err(fastshake_sctp::Error::SendBufferFull) => break,
                    Err(e) => {
                        say!("sctp server: association {}: echo failed: {e}", label(h));
                        tally.echo_queue.clear();
                    }
                }
            }
        }
        let echo_waiting = tallies.values().any(|t| !t.echo_queue.is_empty());
        let (handle, event) = tokio::select! {
            ev = driver.next_event() => ev?,
            // The engine has no "room again" event: try the full send buffers again shortly.
            _ = tokio::time::sleep(OUTBOX_RETRY), if echo_waiting => continue,
            _ = stop.changed() => return Ok(driver.stats()),
        };
        let tally = tallies.entry(handle).or_default();
        match event {
            Event::Connected { handshake, round_trips, zero_rtt_accepted } => {
                tally.peer = driver.endpoint().association(handle).map(|a| a.remote);
                tally.handshake = Some((handshake, round_trips, zero_rtt_accepted));
                say!(
                    "sctp server: association {} from {} opened by the {} handshake ({} round trip(s) on our side, {} zero-RTT message(s))",
                    label(handle),
                    tally.peer.map(|a| a.to_string()).unwrap_or_else(|| "?".into()),
                    handshake_name(handshake),
                    round_trips,
                    zero_rtt_accepted
                );
            }
            Event::Message(message) => {
                tally.messages_in += 1;
                tally.bytes_in += message.data.len() as u64;
                write_stdout(&message.data)?;
                if echo {
                    // Sent at the top of the loop, behind earlier echoes still waiting.
                    tally.echo_queue.push_back(message);
                }
            }
            // The CLI resets no streams (RFC 6525), so it gets no answers to such requests.
            Event::AltCookie { .. }
            | Event::IncomingStreamsReset { .. }
            | Event::OutgoingStreamsReset { .. } => {}
            Event::Closed | Event::Aborted { .. } | Event::Failed(_) => {
                let how = match event {
                    Event::Aborted { reason } => format!("aborted: {reason}"),
                    Event::Failed(e) => format!("failed: {e}"),
                    _ => "closed gracefully".to_string(),
                };
                let tally = tallies.remove(&handle).unwrap_or_default();
                say!(
                    "sctp server: association {} {how}; {} byte(s) in {} message(s) received, {} byte(s) in {} message(s) sent",
                    label(handle), tally.bytes_in, tally.messages_in, tally.bytes_out, tally.messages_out
                );
                if let Some(stats) = association_stats(&driver, handle) {
                    say!("sctp server: association {} {}", label(handle), resent_summary(&stats));
                }
                let ended_so_far = ended.fetch_add(1, Ordering::Relaxed) + 1;
                if exit_after.is_some_and(|n| ended_so_far >= n) {
                    // Let the last SHUTDOWN-COMPLETE or ABORT leave the socket.
                    driver.flush().await?;
                    return Ok(driver.stats());
                }
            }
        }
    }
}

/// Reads standard input in chunks of at most `limit` bytes on a task of its own; each chunk
/// becomes one message. The channel closes at end of input.
fn spawn_stdin_reader(limit: usize) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; limit];
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

/// Default bytes of standard input per message: a zero-RTT message must fit in the INIT beside
/// the handshake parameters.
const DEFAULT_MESSAGE: usize = 1024;
/// Largest message read from standard input at once (fragmented to the path MTU on the wire).
const MAX_MESSAGE: usize = 64 * 1024;

/// Messages held outside the engine before standard input is paused.
const OUTBOX_LIMIT: usize = 4;
/// How soon a full send buffer is tried again.
const OUTBOX_RETRY: Duration = Duration::from_millis(5);

fn random_dynamic_port() -> u16 {
    use rand_core::RngCore;
    49152 + (rand_core::OsRng.next_u32() % 16384) as u16
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

async fn client(args: ClientArgs) -> anyhow::Result<()> {
    let local = args.local.unwrap_or_else(|| {
        if args.connect.is_ipv6() {
            "[::]:0".parse().expect("literal")
        } else {
            "0.0.0.0:0".parse().expect("literal")
        }
    });
    let config = Config {
        local_port: if args.local_port == 0 { random_dynamic_port() } else { args.local_port },
        mode: args.mode.into(),
        listen: false,
        max_init_retransmits: args.max_init_retransmits,
        rto_initial: Duration::from_millis(args.rto_initial_ms),
        rto_min: Config::default().rto_min.min(Duration::from_millis(args.rto_initial_ms)),
        ..Config::default()
    };
    if !args.extra_local.is_empty() && local.ip().is_unspecified() {
        // A wildcard socket would own the port on every address, the extra ones included.
        bail!("--extra-local needs --local with a specific IP address");
    }
    let mut driver = SctpDriver::bind_multihomed(local, &args.extra_local, config)
        .await
        .with_context(|| format!("binding {local} and {:?}", args.extra_local))?;
    let local_key =
        AltCookieFile::local_key(Some(driver.local_addr()), args.local.is_some_and(|a| a.port() != 0));
    let mut cache = match &args.cookie_cache {
        Some(path) => Some(AltCookieFile::open(path).with_context(|| format!("reading {}", path.display()))?),
        None => None,
    };

    let mut stdin = spawn_stdin_reader(args.message_bytes.clamp(1, MAX_MESSAGE));
    let mut options = ConnectOptions {
        cached_cookie: cache.as_ref().and_then(|c| c.get(&local_key, args.connect)),
        ..ConnectOptions::default()
    };
    let used_cached_cookie = options.cached_cookie.is_some();
    let mut tally = Tally::default();
    let mut stdin_done = false;
    if args.zero_rtt {
        // The first chunk travels in the INIT, so it must be read before connecting.
        match stdin.recv().await {
            Some(data) => {
                tally.messages_out += 1;
                tally.bytes_out += data.len() as u64;
                options.zero_rtt.push(Message { stream: 0, unordered: false, ppid: 0, data });
            }
            None => stdin_done = true,
        }
    }

    let started = tokio::time::Instant::now();
    let deadline = started + Duration::from_secs(args.timeout_s);
    let handle = driver.connect(args.connect, args.port, options);
    driver.on_refused(Arc::new(|refusal, in_a_row| {
        let last = fastshake_net::icmp::REFUSALS_TO_GIVE_UP;
        if in_a_row < last {
            say!("sctp client: {refusal} ({in_a_row} of {last} in a row before giving up)");
        }
    }));
    let mut connected_at = None;
    let mut first_byte_at = None;
    // Messages read but not yet taken by the engine: before the association opened, or while its
    // send buffer is full. Standard input is not read further while this holds a few.
    let mut outbox: VecDeque<Vec<u8>> = VecDeque::new();
    // When the client stops waiting for answers and shuts down.
    let mut quiet_deadline: Option<tokio::time::Instant> = None;
    let mut shutting_down = false;
    let outcome: anyhow::Result<()> = 'session: loop {
        if connected_at.is_some() && !shutting_down {
            while let Some(data) = outbox.front() {
                let message = Message { stream: 0, unordered: false, ppid: 0, data: data.clone() };
                match driver.send(handle, message) {
                    Ok(()) => {
                        outbox.pop_front();
                    }
                    Err(fastshake_sctp::Error::SendBufferFull) => break,
                    Err(e) => break 'session Err(anyhow::anyhow!("sending: {e}")),
                }
            }
        }
        if !shutting_down && stdin_done && outbox.is_empty() && connected_at.is_some() {
            let enough = args.expect_bytes.is_some_and(|n| tally.bytes_in >= n);
            let quiet = args.expect_bytes.is_none()
                && quiet_deadline.is_some_and(|t| tokio::time::Instant::now() >= t);
            if enough || quiet {
                driver.shutdown(handle);
                shutting_down = true;
            }
        }
        // The quiet time counts only once the association is open (else, with standard input
        // ended early, a past deadline would wake this loop without end).
        let mut wake = quiet_deadline
            .filter(|_| !shutting_down && connected_at.is_some())
            .unwrap_or(deadline)
            .min(deadline);
        if connected_at.is_some() && !outbox.is_empty() {
            // The engine has no "room again" event: try the send buffer again shortly.
            wake = wake.min(tokio::time::Instant::now() + OUTBOX_RETRY);
        }
        tokio::select! {
            ev = driver.next_event() => {
                let (h, event) = ev?;
                // Cookies for other paths may come on their own handles; everything else
                // belongs to our one association.
                if h != handle && !matches!(event, Event::AltCookie { .. }) {
                    continue;
                }
                match event {
                    Event::Connected { handshake, round_trips, zero_rtt_accepted } => {
                        connected_at = Some(started.elapsed());
                        tally.handshake = Some((handshake, round_trips, zero_rtt_accepted));
                        if stdin_done {
                            quiet_deadline = Some(tokio::time::Instant::now() + Duration::from_millis(args.linger_ms));
                        }
                    }
                    Event::Message(message) => {
                        first_byte_at.get_or_insert_with(|| started.elapsed());
                        tally.messages_in += 1;
                        tally.bytes_in += message.data.len() as u64;
                        write_stdout(&message.data)?;
                        if stdin_done {
                            quiet_deadline = Some(tokio::time::Instant::now() + Duration::from_millis(args.linger_ms));
                        }
                    }
                    Event::AltCookie { server, local, cookie } => {
                        say!(
                            "sctp client: {}-byte ALT-COOKIE for the path {} -> {server}",
                            cookie.len(),
                            local.map(|l| l.to_string()).unwrap_or_else(|| "?".into())
                        );
                        if let Some(cache) = cache.as_mut() {
                            let key = AltCookieFile::local_key(local.or(Some(driver.local_addr())), args.local.is_some_and(|a| a.port() != 0));
                            cache.put(key, server, cookie);
                        }
                    }
                    Event::IncomingStreamsReset { .. } | Event::OutgoingStreamsReset { .. } => {}
                    Event::Closed => break Ok(()),
                    Event::Aborted { reason } => {
                        break Err(anyhow::anyhow!(
                            "association aborted by {} port {}: {reason}",
                            args.connect,
                            args.port
                        ))
                    }
                    Event::Failed(e) => {
                        let detail = match e {
                            fastshake_sctp::Error::HandshakeTimeout => format!(
                                "no answer from {} port {} after {} INIT retransmission(s)",
                                args.connect, args.port, args.max_init_retransmits
                            ),
                            _ => format!("peer {} port {}", args.connect, args.port),
                        };
                        break Err(anyhow::anyhow!("association failed: {e} ({detail})"));
                    }
                }
            }
            chunk = stdin.recv(), if !stdin_done && outbox.len() < OUTBOX_LIMIT => {
                match chunk {
                    Some(data) => {
                        tally.messages_out += 1;
                        tally.bytes_out += data.len() as u64;
                        outbox.push_back(data);
                    }
                    None => {
                        stdin_done = true;
                        quiet_deadline = Some(tokio::time::Instant::now() + Duration::from_millis(args.linger_ms));
                    }
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                if tokio::time::Instant::now() >= deadline {
                    driver.abort(handle);
                    let _ = driver.flush().await;
                    break Err(anyhow::anyhow!("timed out after {} s", args.timeout_s));
                }
            }
        }
    };

    if let (Some(cache), Some(_)) = (cache.as_ref(), args.cookie_cache.as_ref()) {
        cache.save().with_context(|| format!("writing {}", cache.path().display()))?;
    }
    let summary = match tally.handshake {
        Some((kind, rtts, zero_rtt)) => format!(
            "sctp client: {} handshake, {} round trip(s) to open{}{}, connected after {}",
            handshake_name(kind),
            rtts,
            if args.zero_rtt { format!(", {zero_rtt} zero-RTT message(s) accepted") } else { String::new() },
            if used_cached_cookie { ", cached ALT-COOKIE offered" } else { "" },
            connected_at.map(ms).unwrap_or_default()
        ),
        None => "sctp client: no association".to_string(),
    };
    say!("{summary}");
    say!(
        "sctp client: sent {} byte(s) in {} message(s), received {} byte(s) in {} message(s){}; {} datagram(s) / {} byte(s) out, {} / {} in",
        tally.bytes_out,
        tally.messages_out,
        tally.bytes_in,
        tally.messages_in,
        first_byte_at.map(|t| format!(", first byte after {}", ms(t))).unwrap_or_default(),
        driver.stats().datagrams_out,
        driver.stats().bytes_out,
        driver.stats().datagrams_in,
        driver.stats().bytes_in,
    );
    if let Some(stats) = association_stats(&driver, handle) {
        say!("sctp client: {}", resent_summary(&stats));
    }
    if outcome.is_ok() {
        say!("sctp client: closed gracefully");
    }
    if tally.handshake.is_none() && outcome.is_ok() {
        bail!("closed before the association opened");
    }
    outcome
}
