//! `fastshake lab chaos-real`, and `fastshake netlab chaos` and `chaos-peer`.

use fastshake_lab::chaos_real::{Knobs as KnobOptions, PeerOptions, RunOptions};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// `fastshake lab chaos-real`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Seconds of load in all (clients start during that time, in waves; the pauses between the
    /// waves come on top).
    #[arg(long, default_value_t = RunOptions::default().duration)]
    duration: u64,
    /// Clients at once (each slot runs one client after another).
    #[arg(long, default_value_t = RunOptions::default().clients)]
    clients: u32,
    /// Probability that the relay drops a datagram (each way).
    #[arg(long, default_value_t = RunOptions::default().loss)]
    loss: f64,
    /// Probability that the relay sends a datagram twice.
    #[arg(long, default_value_t = RunOptions::default().duplicate)]
    duplicate: f64,
    /// One-way delay of the relay, ms (client to server and back: twice).
    #[arg(long, default_value_t = RunOptions::default().delay_ms)]
    delay_ms: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

impl From<Args> for RunOptions {
    fn from(a: Args) -> RunOptions {
        RunOptions {
            duration: a.duration,
            clients: a.clients,
            loss: a.loss,
            duplicate: a.duplicate,
            delay_ms: a.delay_ms,
            json: a.json,
        }
    }
}

/// `fastshake netlab chaos`: the soak with every knob.
#[derive(clap::Args, Debug, Clone)]
pub struct Knobs {
    #[command(flatten)]
    main: Args,
    /// Waves of load; the first warms the server up, and its memory after the pause is the baseline.
    #[arg(long, default_value_t = KnobOptions::default().waves)]
    waves: u32,
    /// Records each client sends (and gets back) before it closes.
    #[arg(long, default_value_t = KnobOptions::default().records)]
    records: u32,
    /// Records outstanding at once per client.
    #[arg(long, default_value_t = KnobOptions::default().window)]
    window: u32,
    /// A record unanswered this long is sent again as a new attempt, and then after twice and
    /// four times as long; default: 8 delays + 200 ms.
    #[arg(long)]
    request_timeout_ms: Option<u64>,
    /// A record unanswered this long after its first transmission counts as lost, s. Longer than
    /// the handshake timeout (60 s): in an abbreviated handshake whose client Finished is lost the
    /// client already sends records, which wait for the server's retransmission timer (1, 2, 4,
    /// 8, 16 s ... after it), so a few losses in a row hold them up for tens of seconds.
    #[arg(long, default_value_t = KnobOptions::default().give_up_s)]
    give_up_s: f64,
    /// One client in this many moves to another address halfway (0: none).
    #[arg(long, default_value_t = KnobOptions::default().move_every)]
    move_every: u32,
    /// Every this many-th client of a slot resumes the session of the one before (0: none).
    #[arg(long, default_value_t = KnobOptions::default().resume_every)]
    resume_every: u32,
    /// Probability that the relay holds a datagram back by --reorder-delay-ms more.
    #[arg(long, default_value_t = KnobOptions::default().reorder)]
    reorder: f64,
    /// The extra delay of a reordered datagram, ms.
    #[arg(long, default_value_t = KnobOptions::default().reorder_delay_ms)]
    reorder_delay_ms: u64,
    /// How long after the original the relay's copy leaves, ms (0: right behind it).
    #[arg(long, default_value_t = KnobOptions::default().duplicate_delay_ms)]
    duplicate_delay_ms: u64,
    /// The server's --idle-timeout, s. Sessions whose close_notify was lost end then; a
    /// handshake in progress, or one whose last flight the client has not confirmed, is not idle
    /// and stays until the handshake timeout, however short this is.
    #[arg(long, default_value_t = KnobOptions::default().idle_timeout_s)]
    idle_timeout_s: f64,
    /// Pause after each wave before the server's memory is read, s; default: the idle timeout + 2 s.
    #[arg(long)]
    pause_s: Option<f64>,
    /// Seed of the relay's loss, duplication and reordering.
    #[arg(long, default_value_t = KnobOptions::default().seed)]
    seed: u64,
    /// Growth of the server's memory from the baseline to the end that still counts as flat, KiB;
    /// default: see the report's memory section.
    #[arg(long)]
    rss_tolerance_kib: Option<u64>,
    /// Write the server's standard error (its summary lines) to this file.
    #[arg(long)]
    server_log: Option<PathBuf>,
    /// Run the server with -v (every datagram in --server-log, each line stamped with the Unix time).
    #[arg(long, requires = "server_log")]
    server_verbose: bool,
    /// Trace every client's datagrams and print the trace of each client that failed, lost a
    /// record or saw one twice (standard error).
    #[arg(long)]
    trace_failures: bool,
}

impl From<Knobs> for KnobOptions {
    fn from(k: Knobs) -> KnobOptions {
        KnobOptions {
            main: k.main.into(),
            waves: k.waves,
            records: k.records,
            window: k.window,
            request_timeout_ms: k.request_timeout_ms,
            give_up_s: k.give_up_s,
            move_every: k.move_every,
            resume_every: k.resume_every,
            reorder: k.reorder,
            reorder_delay_ms: k.reorder_delay_ms,
            duplicate_delay_ms: k.duplicate_delay_ms,
            idle_timeout_s: k.idle_timeout_s,
            pause_s: k.pause_s,
            seed: k.seed,
            rss_tolerance_kib: k.rss_tolerance_kib,
            server_log: k.server_log,
            server_verbose: k.server_verbose,
            trace_failures: k.trace_failures,
        }
    }
}

/// `fastshake netlab chaos-peer`: the load of a real chaos soak (started by `fastshake netlab chaos`).
#[derive(clap::Args, Debug)]
pub struct PeerArgs {
    /// The server's address.
    #[arg(long)]
    server: SocketAddr,
    #[arg(long)]
    psk_identity: String,
    /// The PSK, hex.
    #[arg(long)]
    psk: String,
    /// Trust anchors for the server's certificate chain, PEM.
    #[arg(long)]
    ca: PathBuf,
    /// The name the server's certificate carries.
    #[arg(long)]
    server_name: String,
    /// The address every client binds first (port 0).
    #[arg(long)]
    stay: IpAddr,
    /// Addresses a moving client moves to, in turn.
    #[arg(long, value_delimiter = ',')]
    move_to: Vec<IpAddr>,
    /// Clients at once.
    #[arg(long)]
    clients: u32,
    /// Records each client sends.
    #[arg(long)]
    records: u32,
    /// Records outstanding at once per client.
    #[arg(long)]
    window: u32,
    /// A record unanswered this long is sent again.
    #[arg(long)]
    request_timeout_ms: u64,
    /// A record unanswered this long after its first transmission counts as lost.
    #[arg(long)]
    give_up_ms: u64,
    /// One client in this many moves (0: none).
    #[arg(long)]
    move_every: u32,
    /// Every this many-th client of a slot resumes the session of the one before (0: none).
    #[arg(long)]
    resume_every: u32,
    /// Trace every client's datagrams, and print the trace of each client that failed, lost a
    /// record or saw one twice on standard error.
    #[arg(long)]
    trace_failures: bool,
}

impl From<PeerArgs> for PeerOptions {
    fn from(a: PeerArgs) -> PeerOptions {
        PeerOptions {
            server: a.server,
            psk_identity: a.psk_identity,
            psk: a.psk,
            ca: a.ca,
            server_name: a.server_name,
            stay: a.stay,
            move_to: a.move_to,
            clients: a.clients,
            records: a.records,
            window: a.window,
            request_timeout_ms: a.request_timeout_ms,
            give_up_ms: a.give_up_ms,
            move_every: a.move_every,
            resume_every: a.resume_every,
            trace_failures: a.trace_failures,
        }
    }
}
