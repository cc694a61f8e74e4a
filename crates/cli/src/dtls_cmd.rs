//! `fastshake server` and `fastshake client` (DTLS 1.2 with a pre-shared key, RFC 4279, and/or
//! X.509 certificates with ECDHE, RFC 8422; resumption by session ID and by ticket, RFC 5077).
//!
//! Both print a one-line handshake summary on standard error: the suite, whether and how the
//! session was resumed, and the peer certificate's subject when there is one. The client sends each line of
//! standard input (newline included) as one application record, prints every record it receives
//! to standard output, waits `--linger` milliseconds for replies after the end of input, then
//! closes with close_notify (also on SIGINT/SIGTERM). The server prints what it receives (or sends it back with `--echo`)
//! and serves clients until SIGINT or SIGTERM, then closes every session with close_notify.

use crate::say::say;
use anyhow::{bail, Context};
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{
    CacheStore, CertifiedKey, CipherSuite, ClientAuth, ClientCertCacheConfig, ClientConfig, ClientSession,
    HandshakeSummary, Psk, RetransmitPolicy, Role, ServerConfig, TrustAnchors, ValidatedKeyCache, WhenFull,
    DEFAULT_MTU,
};
use fastshake_net::cache_file::FileCacheStore;
use fastshake_net::credentials::{host_of, parse_mtu, CredentialArgs};
use fastshake_net::dtls::{
    describe_datagram, os_ticket_keys, summary_line, ClientEvent, ClientOptions, DatagramTrace, Direction,
    DtlsClient, DtlsServer, MobilityMode, Reconnect, RecordHandler, Replies, ServerEvent, ServerOptions,
    DEFAULT_COOKIE_ROTATION,
};
use fastshake_net::udp::{BatchIo, PortSharing};
use fastshake_net::Clock;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Settings both roles share.
#[derive(clap::Args, Debug)]
pub struct CommonArgs {
    #[command(flatten)]
    credentials: CredentialArgs,
    /// The protocol version to speak: 1.2 (RFC 6347), 1.3 (RFC 9147: external PSK with (EC)DHE
    /// or alone, or certificates; resumption by ticket and 0-RTT; sessions move as in 1.2), or
    /// both: a client offers 1.3 and 1.2 in one ClientHello, a server answers each
    /// client in the highest version it offers. Default: both. A flag that only one version
    /// carries here makes that one the default (1.3 for --early-data), and so do --suite names
    /// all of one version.
    #[arg(long, value_name = "VERSION", value_enum)]
    dtls: Option<DtlsArg>,
    /// DTLS 1.3 key-exchange groups, most preferred first: x25519mlkem768 (the post-quantum
    /// hybrid), x25519, secp256r1. A client sends a key share for the first (default:
    /// x25519,secp256r1); a server asks a client for its first one it supports (default: all,
    /// the hybrid first). `--groups ""`: none, the PSK alone keys the session (psk_ke, no
    /// forward secrecy; for devices that cannot afford a key exchange).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_group_choice)]
    groups: Vec<GroupChoice>,
    /// DTLS 1.3 certificate compression (RFC 8879), most preferred first: brotli, zstd, zlib,
    /// or none. A client offers them for the server's chain (with --ca); a server sends its
    /// chain compressed with the first the client lists. Each side offers them when the other
    /// asks for its chain, and takes a chain compressed only with one of them. Default:
    /// brotli,zstd,zlib.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_compression)]
    cert_compression: Vec<CompressionChoice>,
    /// Server: issue no session tickets. Client: do not ask for one (RFC 5077).
    #[arg(long)]
    no_tickets: bool,
    /// Keep the peer keys of up to N validated chains (seed 003 §IV-C): a chain seen again
    /// skips validation but for its validity times and trust anchor; least recently used out
    /// first; 0 turns it off. Server: clients' chains, shared by every session. Client: the
    /// server's chain, for --app-timeout reconnections. The default, 256, is more peers than a
    /// constrained deployment has and costs at most about 100 kB (RSA-2048 leaves).
    #[arg(long, value_name = "N", default_value_t = 256)]
    key_cache: usize,
    /// Largest datagram to send, in bytes of UDP payload.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MTU, value_parser = parse_mtu)]
    mtu: usize,
    /// First retransmission timeout in milliseconds (RFC 6347: 1000; doubles up to 60 s).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    initial_retransmit_ms: u64,
    /// How flights are timed: fixed (--initial-retransmit-ms, doubling) or adaptive (from the
    /// round trip measured to the peer, RFC 6298 style: the cookie exchange, each flight, and
    /// earlier handshakes with the same host; never below --rto-floor).
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = RetransmitArg::Fixed)]
    retransmit: RetransmitArg,
    /// With --retransmit adaptive: the shortest retransmission timeout, in milliseconds. On a
    /// duty-cycled link, set it to the MAC's wake-up period and a quarter (check interval, beacon
    /// interval or slotframe): whether an answer catches the current wake-up or the next is
    /// decided by the schedule, not by any round trip measured before.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    rto_floor: u64,
    /// Give up on a handshake not complete after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    handshake_timeout: f64,
    /// Describe every datagram sent and received on standard error.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Serves any number of clients (up to --max-connections or --max-sessions) until SIGINT or \
SIGTERM, then closes every session with close_notify. Without --echo, every record received is written to standard \
output; one summary line per handshake, close and failure goes to standard error.\n\n\
Example: fastshake server --listen 127.0.0.1:4433 --psk-identity me --psk 00112233 --echo"
)]
pub struct ServerArgs {
    /// Address to listen on, e.g. 127.0.0.1:4433 or `[::1]:4433`.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Send every application record back to its sender instead of printing it.
    #[arg(long)]
    echo: bool,
    /// DTLS 1.3: accept up to 16384 bytes of 0-RTT early data from clients resuming a ticket
    /// (and say so in tickets). Early data can be replayed: each ClientHello's is taken at most
    /// once, in a record the server's workers share; a ticket this server did not issue (another
    /// node of a fleet, or this server before a restart) resumes without early data.
    #[arg(long)]
    early_data: bool,
    /// No line per completed handshake or close on standard error (failures, evictions and the
    /// closing counters are still reported): under load those lines cost more than a PSK
    /// handshake's cryptography.
    #[arg(long)]
    quiet: bool,
    /// PSK identity hint sent in ServerKeyExchange (RFC 4279 §2); none by default.
    #[arg(long, value_name = "HINT")]
    hint: Option<String>,
    /// Most sessions held at once (handshaking or established).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_connections: usize,
    /// At most R sessions at once, handshakes in progress included (a slot each, as on a
    /// memory-constrained server); see --when-full. Slots belong to a worker: with this option
    /// the server runs one worker unless --workers says otherwise (then R per worker).
    /// Default: no limit.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: Option<u32>,
    /// With every --max-sessions slot taken, a new client is: refuse (sent a fatal internal_error
    /// alert, so it stops at once), lru (given the slot of the session least recently used for
    /// data, closed), idlest (given the slot of the session silent the longest, closed).
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = WhenFullArg::Refuse, requires = "max_sessions")]
    when_full: WhenFullArg,
    /// Ask clients for a certificate: none, optional (a client without one is accepted) or
    /// require (handshake_failure without one). Needs --ca.
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = ClientAuthArg::None)]
    client_auth: ClientAuthArg,
    /// How sessions get their sockets so that clients can move: standard (one socket, sessions
    /// keyed by the client's address), ipc (a port per session from the ServerHello on), tcs (a
    /// temporary socket connected to the client during the handshake, then a port of its own),
    /// cid (connection IDs, RFC 9146, on one socket). ipc and tcs move only clients that offer
    /// port_move (fastshake --mobility ipc|tcs); others are served on the welcome port. ipc, tcs
    /// and cid check a client's new address with return routability (RFC 9853) when it offers it.
    #[arg(long, value_name = "MODE", default_value_t = MobilityMode::Standard)]
    mobility: MobilityMode,
    /// Client-certificate caching (seed 003): keep the chains of at most N clients that offered
    /// it, least recently used out first, so that they can leave their chain out next time (an
    /// empty Certificate in 1.2, an abbreviated one in 1.3; their CertificateVerify still
    /// proves the key). 0 turns it off.
    #[arg(long, value_name = "N", default_value_t = ClientCertCacheConfig::default().max_entries)]
    client_cache: usize,
    /// Close a session that received nothing for this many seconds (close_notify; its socket,
    /// if it has one, closes with it). Default: 300.
    #[arg(long, value_name = "SECS")]
    idle_timeout: Option<f64>,
    /// Change the HelloVerifyRequest cookie key every SECONDS (every worker at once). A cookie
    /// opens under the current and the previous key, so one a client cached lasts one to two
    /// periods.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_COOKIE_ROTATION.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    cookie_rotation: u64,
    /// Serve with N workers, each a thread with its own socket on --listen (SO_REUSEPORT: the
    /// kernel spreads clients by address and port) and its own sessions; a CID record that
    /// reaches the wrong worker (the client moved) is passed to the right one. Limits
    /// (--max-connections, --max-sessions) are per worker; the session-ID cache, the ticket keys
    /// and the cookie key are shared, so a client resumes at any worker. Default: one worker
    /// per core; 1 with --max-sessions.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=255))]
    workers: Option<u16>,
    #[command(flatten)]
    socket: SocketArgs,
    /// Ticket keys shared by a fleet: current and previous key from FILE (made by `fastshake keys
    /// ticket`, rotated by `fastshake keys rotate`), read again when it changes or on SIGHUP.
    #[arg(long, value_name = "FILE", conflicts_with = "no_tickets")]
    ticket_keys: Option<PathBuf>,
    /// Keep the session-ID cache in Redis (redis://HOST:PORT) instead of this process, sealed
    /// under the ticket keys, so that every node resumes every node's sessions. Needs
    /// --ticket-keys.
    #[arg(long, value_name = "URL", requires = "ticket_keys")]
    session_store: Option<String>,
    /// This server's node id in --fleet: its CIDs carry it, and CID records of other nodes'
    /// sessions are forwarded to them. Needs --mobility cid.
    #[arg(long, value_name = "N", requires = "fleet")]
    node_id: Option<u8>,
    /// The fleet file (TOML): every node's id and forwarding address, and the forwarding key.
    #[arg(long, value_name = "FILE", requires = "node_id")]
    fleet: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

/// How a server's sockets read and share --listen (`fastshake server` and `fastshake sctp server`).
#[derive(clap::Args, Debug)]
pub struct SocketArgs {
    /// Let other processes listen on --listen too, each started with --reuse-port: the kernel
    /// then spreads new peers over all of them by address and port, so every one must serve the
    /// same keys (a DTLS fleet, to resume each other's sessions, the same --ticket-keys).
    /// Without it, an address another process holds is refused ("address already in use"), and
    /// a later server started with it cannot join this one.
    #[arg(long)]
    pub reuse_port: bool,
    /// Read and write datagrams in batches (recvmmsg, GSO): on, or off for one datagram per
    /// system call.
    #[arg(long, value_name = "on|off", default_value_t = BatchIo::On)]
    pub batch: BatchIo,
}

impl SocketArgs {
    /// What `--reuse-port` asks for.
    pub fn port_sharing(&self) -> PortSharing {
        if self.reuse_port {
            PortSharing::WithOtherProcesses
        } else {
            PortSharing::Exclusive
        }
    }
}

/// The number of cores this process may use (1 if unknown).
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Each line of standard input (newline included) is sent as one application record \
(split over several records if it exceeds the MTU); every record received is written to standard output \
as it arrives. After the end of input the client waits --linger ms for replies, then sends close_notify. \
The handshake summary and errors go to standard error.\n\n\
Example: echo hello | fastshake client --connect 127.0.0.1:4433 --psk-identity me --psk 00112233")]
pub struct ClientArgs {
    /// Server address, e.g. 127.0.0.1:4433 or localhost:4433.
    #[arg(long, value_name = "ADDR")]
    connect: String,
    /// After the end of standard input, wait this many milliseconds for replies before closing.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    linger: u64,
    /// The name the server certificate must carry (sent as server_name, RFC 6066); default: the
    /// host part of --connect.
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// Resume the session kept in FILE if there is one; write the session there after a
    /// handshake that yields one (a full handshake, or a new ticket; with --dtls 1.3 the
    /// server's NewSessionTicket after the handshake). Holds the master secret (1.3: the
    /// resumption PSK): written with mode 0600.
    #[arg(long, value_name = "FILE")]
    session_file: Option<PathBuf>,
    /// With --session-file: send the first line of standard input as 0-RTT early data with the
    /// ClientHello when the session's ticket allows it (RFC 8446 §4.2.10); a server that
    /// refuses it gets it after the handshake instead. 0-RTT is DTLS 1.3's: the client offers
    /// 1.3 alone. Early data can be replayed
    /// by an attacker: use it only for a first message that is safe to receive twice.
    #[arg(long, requires = "session_file")]
    early_data: bool,
    /// Handshake caching (seed 003): keep the server's Certificate and CertificateRequest
    /// (RFC 7924) and our client-certificate ticket in FILE, per server, and offer them next
    /// time, in either version (1.3 caches the chain, not the CertificateRequest, and says so
    /// encrypted). Written with mode 0600; a corrupt file is ignored with a warning.
    #[arg(long, value_name = "FILE")]
    cache_file: Option<PathBuf>,
    /// What the client offers so its session survives a move: standard (nothing; see
    /// --app-timeout), ipc or tcs (follow the server to the session's own port, and return
    /// routability checks), cid (a connection ID from the server, and return routability checks).
    #[arg(long, value_name = "MODE", default_value_t = MobilityMode::Standard)]
    mobility: MobilityMode,
    /// Local address to bind (default: loopback for a loopback server, else the unspecified
    /// address, so the routing table picks the interface of every datagram).
    #[arg(long, value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// A session that cannot survive a move (--mobility standard, or a server that declined
    /// the mobility asked for): when records were sent and nothing came back for this many
    /// milliseconds, set up a new session and send again the records sent since the last one
    /// received (the server may then see a record twice); a server that is gone ends the run
    /// with an error. 0: never.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    app_timeout: u64,
    /// How --app-timeout reconnects: full (a full handshake) or resumed (resume the session).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = ReconnectArg::Resumed)]
    reconnect: ReconnectArg,
    /// Testing aid: after receiving this many records, move to a new local socket (see
    /// --rebind-to), as a handover would.
    #[arg(long, value_name = "N", hide = true)]
    rebind_after: Option<u64>,
    /// Testing aid: the address --rebind-after moves to (default: the current IP, a new port).
    #[arg(long, value_name = "ADDR", hide = true, requires = "rebind_after")]
    rebind_to: Option<SocketAddr>,
    #[command(flatten)]
    common: CommonArgs,
}

/// One `--groups` name.
pub(crate) fn parse_group(name: &str) -> Result<fastshake_dtls::NamedGroup, String> {
    fastshake_dtls::NamedGroup::WITH_HYBRID
        .into_iter()
        .find(|g| g.name().eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| format!("unknown group {name:?}: x25519mlkem768, x25519 or secp256r1"))
}

/// One name of `--groups`, or nothing (`--groups ""`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupChoice(Option<fastshake_dtls::NamedGroup>);

fn parse_group_choice(name: &str) -> Result<GroupChoice, String> {
    match name.trim() {
        "" => Ok(GroupChoice(None)),
        name => parse_group(name).map(|g| GroupChoice(Some(g))),
    }
}

/// One name of `--cert-compression`: an algorithm, or `none`.
#[derive(Clone, Copy, Debug)]
struct CompressionChoice(Option<fastshake_dtls::CompressionAlgorithm>);

fn parse_compression(name: &str) -> Result<CompressionChoice, String> {
    match name.trim() {
        "none" => Ok(CompressionChoice(None)),
        other => other.parse().map(|a| CompressionChoice(Some(a))),
    }
}

impl CommonArgs {
    /// `--cert-compression`, or every algorithm.
    fn certificate_compression(&self) -> Arc<fastshake_dtls::CertificateCompression> {
        if self.cert_compression.is_empty() {
            return Arc::new(fastshake_dtls::CertificateCompression::all());
        }
        let chosen: Vec<_> = self.cert_compression.iter().filter_map(|c| c.0).collect();
        Arc::new(fastshake_dtls::CertificateCompression::new(&chosen))
    }

    /// `--dtls`, or the default for this run: both versions, unless `only` names a flag given
    /// that works in one version alone (1.2: handshake caching; 1.3: 0-RTT) or the
    /// `--suite`s given are all of one version, which is then the default. Asked for with
    /// another version, such a flag or suite is refused with the reason.
    fn dtls(&self, only: Option<(DtlsArg, &str)>) -> anyhow::Result<DtlsArg> {
        let (suite12, suite13) = self.credentials.suites_given();
        let by_suites = match (suite12, suite13) {
            (None, None) => None,
            (Some(_), None) => Some(DtlsArg::V1_2),
            (None, Some(_)) => Some(DtlsArg::V1_3),
            (Some(_), Some(_)) => Some(DtlsArg::Both),
        };
        let version = match (self.dtls, only) {
            (Some(asked), Some((version, flag))) if asked != version => bail!(
                "{flag} works in DTLS {} only: use --dtls {} or leave --dtls out",
                version.name(),
                version.name()
            ),
            (Some(asked), _) => asked,
            (None, Some((version, _))) => version,
            (None, None) => by_suites.unwrap_or(DtlsArg::Both),
        };
        let wrong_suite = match version {
            DtlsArg::V1_2 => suite13.map(|s| (s, "1.3", "1.2")),
            DtlsArg::V1_3 => suite12.map(|s| (s, "1.2", "1.3")),
            DtlsArg::Both => None,
        };
        if let Some((suite, of, run)) = wrong_suite {
            bail!("--suite {suite} is a DTLS {of} suite and this run speaks DTLS {run} only");
        }
        if let (DtlsArg::Both, Some(given)) = (version, by_suites.filter(|v| *v != DtlsArg::Both)) {
            let missing = if given == DtlsArg::V1_2 { "1.3" } else { "1.2" };
            bail!(
                "--dtls both needs a --suite of each version or none, and no DTLS {missing} suite was \
                 given: add one or use --dtls {}",
                given.name()
            );
        }
        // What only DTLS 1.3 reads, given to a run that speaks 1.2 alone, would be ignored.
        if version == DtlsArg::V1_2 {
            for (given, flag, what) in [
                (!self.groups.is_empty(), "--groups", "chooses DTLS 1.3 key exchanges"),
                (!self.cert_compression.is_empty(), "--cert-compression", "is DTLS 1.3's (RFC 8879)"),
            ] {
                if given {
                    bail!("{flag} {what} and this run speaks DTLS 1.2 only (by --dtls or --suite)");
                }
            }
        }
        Ok(version)
    }

    /// `--groups`, or the role's default: a client offers the elliptic curves (one 32-byte key
    /// share), a server accepts the post-quantum hybrid first.
    fn groups(&self, server: bool) -> anyhow::Result<Vec<fastshake_dtls::NamedGroup>> {
        if self.groups.is_empty() {
            return Ok(if server {
                fastshake_dtls::NamedGroup::WITH_HYBRID.to_vec()
            } else {
                fastshake_dtls::NamedGroup::ALL.to_vec()
            });
        }
        let mut groups = Vec::new();
        for group in self.groups.iter().filter_map(|g| g.0) {
            if groups.contains(&group) {
                bail!("--groups names {} twice", group.name());
            }
            groups.push(group);
        }
        if groups.is_empty() && self.psk().is_none() {
            bail!("--groups \"\" leaves the PSK alone to key the session (psk_ke), and there is no --psk");
        }
        Ok(groups)
    }
}

/// `--dtls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DtlsArg {
    #[value(name = "1.2")]
    V1_2,
    #[value(name = "1.3")]
    V1_3,
    /// Client: offer both; server: 1.3 with clients that offer it, 1.2 with the others.
    #[value(name = "both")]
    Both,
}

impl DtlsArg {
    fn name(self) -> &'static str {
        match self {
            DtlsArg::V1_2 => "1.2",
            DtlsArg::V1_3 => "1.3",
            DtlsArg::Both => "both",
        }
    }

    pub(crate) fn versions(self) -> fastshake_dtls::Versions {
        match self {
            DtlsArg::V1_2 => fastshake_dtls::Versions::Dtls12,
            DtlsArg::V1_3 => fastshake_dtls::Versions::Dtls13,
            DtlsArg::Both => fastshake_dtls::Versions::Both,
        }
    }
}

/// `--reconnect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReconnectArg {
    Full,
    Resumed,
}

impl From<ReconnectArg> for Reconnect {
    fn from(arg: ReconnectArg) -> Self {
        match arg {
            ReconnectArg::Full => Reconnect::Full,
            ReconnectArg::Resumed => Reconnect::Resumed,
        }
    }
}

/// `--retransmit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RetransmitArg {
    Fixed,
    Adaptive,
}

impl CommonArgs {
    /// The retransmission policy of `--retransmit` and `--rto-floor`.
    fn retransmit(&self) -> RetransmitPolicy {
        match self.retransmit {
            RetransmitArg::Fixed => RetransmitPolicy::Fixed,
            RetransmitArg::Adaptive => {
                RetransmitPolicy::Adaptive { floor: Duration::from_millis(self.rto_floor) }
            }
        }
    }
}

/// `--when-full`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WhenFullArg {
    Refuse,
    Lru,
    Idlest,
}

impl From<WhenFullArg> for WhenFull {
    fn from(arg: WhenFullArg) -> Self {
        match arg {
            WhenFullArg::Refuse => WhenFull::Refuse,
            WhenFullArg::Lru => WhenFull::Lru,
            WhenFullArg::Idlest => WhenFull::Idlest,
        }
    }
}

/// `--client-auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ClientAuthArg {
    None,
    Optional,
    Require,
}

impl From<ClientAuthArg> for ClientAuth {
    fn from(arg: ClientAuthArg) -> Self {
        match arg {
            ClientAuthArg::None => ClientAuth::None,
            ClientAuthArg::Optional => ClientAuth::Optional,
            ClientAuthArg::Require => ClientAuth::Require,
        }
    }
}

impl CommonArgs {
    fn psk(&self) -> Option<Psk> {
        self.credentials.psk()
    }

    fn certified_key(&self) -> anyhow::Result<Option<Arc<CertifiedKey>>> {
        self.credentials.certified_key()
    }

    fn trust_anchors(&self) -> anyhow::Result<Option<Arc<TrustAnchors>>> {
        self.credentials.trust_anchors()
    }

    fn suites(&self) -> Vec<CipherSuite> {
        self.credentials.suites()
    }

    fn suites13(&self) -> Vec<Suite13> {
        self.credentials.suites13()
    }

    /// The validated-key cache of `--key-cache`, if not 0.
    fn key_cache(&self) -> Option<Arc<ValidatedKeyCache>> {
        (self.key_cache > 0).then(|| Arc::new(ValidatedKeyCache::new(self.key_cache)))
    }

    fn handshake_timeout(&self) -> anyhow::Result<Duration> {
        Duration::try_from_secs_f64(self.handshake_timeout)
            .context("--handshake-timeout must be a positive number")
    }

    fn trace(&self, role: &'static str) -> Option<DatagramTrace> {
        if !self.verbose {
            return None;
        }
        Some(Arc::new(move |direction: Direction, peer: SocketAddr, datagram: &[u8]| {
            let arrow = match direction {
                Direction::Sent => "->",
                Direction::Received => "<-",
            };
            say!(
                "fastshake {role}: {arrow} {peer} {} B: {}",
                datagram.len(),
                describe_datagram(datagram).join(", ")
            );
        }))
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub fn server(args: ServerArgs) -> anyhow::Result<()> {
    let common = &args.common;
    if let Some(warning) = common.credentials.weak_psk_warning() {
        say!("fastshake server: {warning}");
    }
    let psk = common.psk();
    let certified_key = common.certified_key()?;
    if psk.is_none() && certified_key.is_none() {
        bail!("a server needs --psk-identity and --psk, or --cert and --key (or both)");
    }
    let client_auth = ClientAuth::from(args.client_auth);
    let client_trust_anchors = common.trust_anchors()?;
    if client_auth != ClientAuth::None && client_trust_anchors.is_none() {
        let policy = clap::ValueEnum::to_possible_value(&args.client_auth).map(|v| v.get_name().to_owned());
        bail!("--client-auth {} needs --ca to validate client certificates", policy.unwrap_or_default());
    }
    let banner = common.credentials.credentials(certified_key.is_some());
    let dtls = common.dtls(None)?;
    if args.hint.is_some() && dtls == DtlsArg::V1_3 {
        bail!(
            "--hint is DTLS 1.2's (RFC 4279's identity hint; 1.3 has none) and this run speaks DTLS 1.3 only"
        );
    }
    if args.early_data && dtls == DtlsArg::V1_2 {
        bail!("--early-data works in DTLS 1.3 only and this run speaks DTLS 1.2 only (by --dtls or --suite)");
    }
    let idle_timeout = match args.idle_timeout {
        Some(secs) => {
            Some(Duration::try_from_secs_f64(secs).context("--idle-timeout must be a positive number")?)
        }
        None => fastshake_dtls::DEFAULT_IDLE_TIMEOUT.into(),
    };
    let config = ServerConfig {
        psk_identity_hint: args.hint.as_ref().map(|h| h.as_bytes().to_vec()),
        psks: psk.into_iter().collect(),
        certified_key,
        client_auth,
        client_trust_anchors,
        key_cache: common.key_cache(),
        tickets: if common.no_tickets { None } else { Some(os_ticket_keys()) },
        suites: common.suites(),
        suites13: common.suites13(),
        mtu: common.mtu,
        initial_retransmit: Duration::from_millis(common.initial_retransmit_ms),
        retransmit: common.retransmit(),
        handshake_timeout: common.handshake_timeout()?,
        max_connections: args.max_connections,
        max_sessions: args.max_sessions.map(|r| r as usize),
        when_full: args.when_full.into(),
        mobility: args.mobility.server_mobility(),
        client_cert_cache: ClientCertCacheConfig {
            max_entries: args.client_cache,
            ..ClientCertCacheConfig::default()
        },
        idle_timeout,
        versions: dtls.versions(),
        groups: common.groups(true)?,
        certificate_compression: common.certificate_compression(),
        max_early_data: if args.early_data { 16 * 1024 } else { 0 },
        ..ServerConfig::default()
    };
    let workers = match args.workers {
        // R slots stand for one constrained server's memory: one worker holds them all.
        None if args.max_sessions.is_some() => 1,
        None => default_workers().min(fastshake_net::dtls::MAX_WORKERS),
        Some(n) => usize::from(n),
    };
    if let (Some(r), true) = (args.max_sessions, workers > 1) {
        eprintln!("fastshake server: {r} session slot(s) per worker, {} in all", r as usize * workers);
    }
    let fleet = match (&args.fleet, args.node_id) {
        (Some(path), Some(node)) => {
            if args.mobility != MobilityMode::Cid {
                bail!("--fleet needs --mobility cid: only CID records can be forwarded to their node");
            }
            Some(fastshake_net::fleet::Fleet::load(path, node).context("cannot read the fleet file")?)
        }
        _ => None,
    };
    let session_store = match &args.session_store {
        Some(url) => Some(std::sync::Arc::new(
            fastshake_net::session_store::RedisStore::new(url).context("bad --session-store")?,
        ) as std::sync::Arc<dyn fastshake_net::session_store::SessionStore>),
        None => None,
    };
    let options = ServerOptions {
        trace: common.trace("server"),
        mobility: args.mobility,
        cookie_rotation: std::time::Duration::from_secs(args.cookie_rotation),
        workers,
        batch: args.socket.batch,
        port_sharing: args.socket.port_sharing(),
        ticket_keys_file: args.ticket_keys.clone(),
        session_store,
        fleet,
        // Echoed where the worker opened the record: no copy, no channel, no allocation.
        on_record: args.echo.then(|| {
            Arc::new(|_, record: &[u8], replies: &mut Replies<'_>| replies.send(record)) as RecordHandler
        }),
        ..ServerOptions::default()
    };
    // The driver pins the wall clock when it starts; validate as it will run.
    let wall_clock = Some(Clock::new().wall_clock());
    ServerConfig { wall_clock, ..config.clone() }.validate().context("unusable server configuration")?;
    let runtime = if workers > 1 {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
    } else {
        runtime()?
    };
    runtime.block_on(serve(args.listen, Arc::new(config), options, args.quiet, banner))
}

async fn serve(
    listen: SocketAddr,
    config: Arc<ServerConfig>,
    options: ServerOptions,
    quiet: bool,
    credentials: &str,
) -> anyhow::Result<()> {
    let mobility = options.mobility;
    let config_version = config.versions;
    let mut server = DtlsServer::bind(listen, config, options)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    // The banner of a standard server stays as it always was.
    let mut mobility_text =
        if mobility == MobilityMode::Standard { String::new() } else { format!(", mobility {mobility}") };
    if server.workers() > 1 {
        mobility_text.push_str(&format!(", {} workers", server.workers()));
    }
    say!(
        "fastshake server: listening on {} ({}, {credentials}{mobility_text})",
        server.local_addr(),
        config_version.name()
    );
    let mut terminate = terminate_signal()?;
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot watch SIGHUP")?;
    loop {
        let event = tokio::select! {
            event = server.next_event() => event,
            _ = terminate.recv() => break,
            _ = hangup.recv() => {
                server.reload_ticket_keys();
                continue;
            }
        };
        let Some(event) = event else {
            break;
        };
        match event {
            ServerEvent::Connected { .. }
            | ServerEvent::Closed { .. }
            | ServerEvent::HelloRefused { .. }
            | ServerEvent::RefusalsNotShown { .. }
                if quiet => {}
            ServerEvent::Connected { remote, summary, .. } => {
                say!(
                    "fastshake server: {remote}: {}{}",
                    summary_line(&summary, Role::Server),
                    peer_text(&summary)
                );
            }
            // With --echo the workers answer records themselves.
            ServerEvent::Data { data, .. } => {
                let mut out = std::io::stdout().lock();
                out.write_all(&data).and_then(|()| out.flush()).context("cannot write to standard output")?;
            }
            ServerEvent::Closed { remote, .. } => {
                say!("fastshake server: {}: closed by the peer (close_notify)", peer_name(remote));
            }
            // Not a failure: the operator's own limit.
            ServerEvent::Failed {
                remote, error: error @ fastshake_dtls::Error::IdleTimeout { .. }, ..
            } => {
                say!("fastshake server: {}: {error}", peer_name(remote));
            }
            ServerEvent::Failed { remote, error, .. } => {
                say!("fastshake server: {}: session failed: {error}", peer_name(remote));
            }
            ServerEvent::Evicted { remote, policy, newcomer, .. } => {
                say!(
                    "fastshake server: {}: evicted ({policy}) to make room for {newcomer}; closed with close_notify",
                    peer_name(remote)
                );
            }
            ServerEvent::Refused { remote } => {
                say!("fastshake server: {remote}: refused, no free session slot (sent internal_error)");
            }
            ServerEvent::HelloRefused { remote, reason, alert } => {
                say!("fastshake server: {remote}: refused: {reason} (sent {alert})");
            }
            ServerEvent::RefusalsNotShown { count } => {
                say!("fastshake server: {count} more hello(s) refused, too many to show one by one");
            }
            ServerEvent::PathChanged { handle, from, to } => {
                say!("fastshake server: client {} moved from {} to {to}", handle, peer_name(from));
            }
            ServerEvent::OwnSocket { handle, local } => {
                say!("fastshake server: client {} now served from its own socket {local}", handle);
            }
            ServerEvent::StaysOnWelcomePort { handle, reason } => {
                say!("fastshake server: client {} stays on the welcome port ({reason})", handle);
            }
            ServerEvent::TicketKeysReloaded { current, with_previous } => {
                let previous = if with_previous { " and a previous key" } else { "" };
                say!("fastshake server: ticket keys reloaded (current key {current:08x}{previous})");
            }
            ServerEvent::TicketKeysUnreadable { error } => {
                say!("fastshake server: ticket keys not reloaded, keeping the keys in use: {error}");
            }
            ServerEvent::SessionStoreUnavailable { error } => {
                say!(
                    "fastshake server: session store unavailable ({error}): a session not in the cache of the \
                     worker a client reaches gets a full handshake meanwhile"
                );
            }
        }
    }
    say!("fastshake server: shutting down, closing every session");
    let stats = server.shutdown().await.context("the server stopped with an error")?;
    say!("fastshake server: {}", stats.summary_line());
    Ok(())
}

fn peer_name(remote: Option<SocketAddr>) -> String {
    remote.map_or_else(|| "a client".to_owned(), |r| r.to_string())
}

/// Resolves on SIGINT or SIGTERM.
fn terminate_signal() -> anyhow::Result<mpsc::UnboundedReceiver<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        let _ = tx.send(());
    });
    Ok(rx)
}

pub fn client(args: ClientArgs) -> anyhow::Result<()> {
    let common = &args.common;
    if let Some(warning) = common.credentials.weak_psk_warning() {
        say!("fastshake client: {warning}");
    }
    let psk = common.psk();
    let trust_anchors = common.trust_anchors()?;
    if psk.is_none() && trust_anchors.is_none() {
        bail!(
            "a client needs --psk-identity and --psk, or --ca to validate the server's certificate (or both)"
        );
    }
    let server_name = args.server_name.clone().or_else(|| host_of(&args.connect));
    let only = args.early_data.then_some((DtlsArg::V1_3, "--early-data"));
    let dtls = common.dtls(only)?;
    let config = ClientConfig {
        psk,
        certified_key: common.certified_key()?,
        trust_anchors,
        server_name,
        key_cache: common.key_cache(),
        enable_tickets: !common.no_tickets,
        suites: common.suites(),
        suites13: common.suites13(),
        mtu: common.mtu,
        initial_retransmit: Duration::from_millis(common.initial_retransmit_ms),
        retransmit: common.retransmit(),
        handshake_timeout: common.handshake_timeout()?,
        mobility: args.mobility.client_mobility(),
        cached_info: args.cache_file.is_some(),
        client_certificate_caching: args.cache_file.is_some(),
        versions: dtls.versions(),
        groups: common.groups(false)?,
        certificate_compression: common.certificate_compression(),
        ..ClientConfig::default()
    };
    let config = ClientConfig { early_data: args.early_data, ..config };
    let wall_clock = Some(Clock::new().wall_clock());
    ClientConfig { wall_clock, ..config.clone() }.validate().context("unusable client configuration")?;
    let session = match &args.session_file {
        Some(path) => {
            check_session_file_place(path)?;
            load_session(path)?
        }
        None => None,
    };
    // Entries are per server: its name and the address as given, so nothing crosses servers.
    let cache_key = format!("{}@{}", config.server_name.as_deref().unwrap_or(""), args.connect);
    let cache = args.cache_file.as_ref().map(|path| {
        let (store, warning) = FileCacheStore::open(path);
        if let Some(warning) = warning {
            say!("fastshake client: {warning}");
        }
        store
    });
    let cached = cache.as_ref().and_then(|c| c.load(&cache_key));
    let options = ClientOptions {
        bind: args.bind,
        trace: common.trace("client"),
        session,
        // Whatever the mode: the driver applies it only to a session whose handshake agreed
        // nothing that survives a move (standard DTLS, or a server that declined our offer).
        app_timeout: (args.app_timeout > 0).then(|| Duration::from_millis(args.app_timeout)),
        reconnect: args.reconnect.into(),
        cached,
        on_refused: Some(Arc::new(|refusal, in_a_row| {
            let last = fastshake_net::icmp::REFUSALS_TO_GIVE_UP;
            if in_a_row < last {
                say!("fastshake client: {refusal} ({in_a_row} of {last} in a row before giving up)");
            }
        })),
        early_data: None,
    };
    let settings = ClientRun {
        linger: Duration::from_millis(args.linger),
        session_file: args.session_file.as_deref(),
        cache: cache.map(|store| (store, cache_key)),
        rebind_after: args.rebind_after,
        rebind_to: args.rebind_to,
        early_data: args.early_data,
        mobility: args.mobility,
        app_timeout: args.app_timeout,
    };
    runtime()?.block_on(run_client(&args.connect, Arc::new(config), options, settings))
}

/// The session kept in `path`; none if the file does not exist. An unreadable or stale file
/// only costs a full handshake, so it is reported and ignored.
fn load_session(path: &Path) -> anyhow::Result<Option<ClientSession>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("cannot read {}", path.display())))
        }
    };
    match ClientSession::from_bytes(&bytes) {
        Ok(session) => Ok(Some(session)),
        Err(error) => {
            say!("fastshake client: ignoring the session in {} ({error}); full handshake", path.display());
            Ok(None)
        }
    }
}

/// Keeps what a handshake says to cache for this server in `--cache-file`.
fn keep_cache_entry(
    cache: &mut Option<(FileCacheStore, String)>,
    summary: &HandshakeSummary,
) -> anyhow::Result<()> {
    if let (Some((store, key)), Some(entry)) = (cache.as_mut(), &summary.cache_update) {
        store.store(key, entry.clone());
        store.save().with_context(|| format!("cannot write the cache file {}", store.path().display()))?;
    }
    Ok(())
}

/// Writes the session a handshake yielded to `path`, readable by the owner only.
/// Refuses a `--session-file` that could not be written after the handshake, before it runs.
fn check_session_file_place(path: &Path) -> anyhow::Result<()> {
    let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !directory.is_dir() {
        bail!("cannot keep the session in {}: {} is not a directory", path.display(), directory.display());
    }
    if path.is_dir() {
        bail!("cannot keep the session in {}: it is a directory", path.display());
    }
    Ok(())
}

fn store_session(path: &Path, session: &ClientSession) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write the session file {}", path.display()))?;
    file.write_all(&session.to_bytes())
        .with_context(|| format!("cannot write the session file {}", path.display()))
}

/// What the summary line adds about the peer's certificates: how many, the validated leaf's
/// subject, and whether the validated-key cache stood in for validating them.
fn peer_text(summary: &HandshakeSummary) -> String {
    let count = match summary.peer_certificates {
        0 => return String::new(),
        n => format!("; peer sent {n} certificate(s)"),
    };
    let text = match summary.peer_leaf.as_deref().and_then(fastshake_pki::subject_text) {
        Some(subject) => format!("{count}, subject \"{subject}\""),
        None => count,
    };
    if summary.chain_validation_skipped {
        format!("{text}, chain validation skipped (key cache)")
    } else {
        text
    }
}

/// What the client loop needs besides the engine's and the driver's settings.
struct ClientRun<'a> {
    linger: Duration,
    session_file: Option<&'a Path>,
    /// `--cache-file`, and this server's key in it.
    cache: Option<(FileCacheStore, String)>,
    rebind_after: Option<u64>,
    rebind_to: Option<SocketAddr>,
    /// Send the first line of standard input as 0-RTT early data.
    early_data: bool,
    /// `--mobility`: what the client offered so its session survives a move.
    mobility: MobilityMode,
    /// `--app-timeout` in milliseconds (0: never).
    app_timeout: u64,
}

async fn run_client(
    connect: &str,
    config: Arc<ClientConfig>,
    mut options: ClientOptions,
    settings: ClientRun<'_>,
) -> anyhow::Result<()> {
    let ClientRun {
        linger,
        session_file,
        mut cache,
        rebind_after,
        rebind_to,
        early_data,
        mobility,
        app_timeout,
    } = settings;
    /// Once the session has ended: the lines of standard input not sent (those the session dropped
    /// and those read but not yet handed over), and whether the input was still open.
    fn lines_not_sent(
        client: &DtlsClient,
        input: &mut mpsc::UnboundedReceiver<std::io::Result<Vec<u8>>>,
        input_open: bool,
    ) -> (usize, bool) {
        let mut waiting = 0;
        let mut still_open = input_open;
        if input_open {
            loop {
                match input.try_recv() {
                    Ok(Ok(_)) => waiting += 1,
                    // A read error ends the input as well.
                    Ok(Err(_)) | Err(mpsc::error::TryRecvError::Disconnected) => {
                        still_open = false;
                        break;
                    }
                    Err(mpsc::error::TryRecvError::Empty) => break,
                }
            }
        }
        (client.unsent_records() + waiting, still_open)
    }

    let mut records_received = 0u64;
    let remote = tokio::net::lookup_host(connect)
        .await
        .with_context(|| format!("cannot resolve {connect}"))?
        .next()
        .with_context(|| format!("{connect} has no address"))?;
    let mut input = spawn_stdin_reader();
    let mut input_open = true;
    if early_data {
        // The first line goes with the ClientHello (or, refused, after the handshake).
        match input.recv().await {
            Some(Ok(line)) => options.early_data = Some(line),
            Some(Err(error)) => return Err(anyhow::Error::new(error).context("cannot read standard input")),
            None => input_open = false,
        }
    }
    let mut client = DtlsClient::connect(remote, config, options)
        .await
        .with_context(|| format!("DTLS handshake with {remote} failed"))?;
    say!(
        "fastshake client: {remote}: {}{}",
        summary_line(client.summary(), Role::Client),
        peer_text(client.summary())
    );
    // What was offered and not agreed: the session cannot follow a move of ours, and only a new
    // session after the app timeout (as in standard mode) carries on.
    let agreed = client.summary().mobility;
    let declined = match mobility {
        MobilityMode::Cid if !agreed.connection_id => Some("connection IDs"),
        MobilityMode::Ipc | MobilityMode::Tcs if !agreed.port_move => Some("port_move"),
        _ => None,
    };
    if let Some(what) = declined {
        let fallback = if app_timeout > 0 {
            format!(
                "when records go unanswered for {app_timeout} ms (--app-timeout), the client sets up a new \
                 session and sends them again"
            )
        } else {
            "with --app-timeout 0, what is sent after a move is lost".to_owned()
        };
        say!(
            "fastshake client: warning: the server did not agree to {what} (--mobility {mobility}): this \
             session cannot follow a change of our address (a NAT rebinding, a new network); {fallback}"
        );
    }
    if let (Some(path), Some(session)) = (session_file, &client.summary().session) {
        store_session(path, session)?;
        say!("fastshake client: kept the session in {} to resume it next time", path.display());
    }
    keep_cache_entry(&mut cache, client.summary())?;

    let mut terminate = terminate_signal()?;
    // Set once standard input ends: replies are still printed until then.
    let mut linger_until: Option<tokio::time::Instant> =
        (!input_open).then(|| tokio::time::Instant::now() + linger);
    let mut peer_closed = false;
    // A line the session refused because the server had closed it.
    let mut refused_line = 0;
    loop {
        let linger_done = async {
            match linger_until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            line = input.recv(), if input_open => match line {
                Some(Ok(line)) => match client.send(line) {
                    Ok(()) => {}
                    // Only the server's close_notify ends the session while we run: this line
                    // and what follows it are counted below.
                    Err(fastshake_net::dtls::DriverError::Dtls(fastshake_dtls::Error::Closed)) => {
                        refused_line = 1;
                        peer_closed = true;
                        break;
                    }
                    // The reason the session ended, in the words the event that says so uses.
                    Err(error) => return Err(anyhow::Error::new(error).context("the session failed")),
                },
                Some(Err(error)) => return Err(anyhow::Error::new(error).context("cannot read standard input")),
                None => {
                    input_open = false;
                    linger_until = Some(tokio::time::Instant::now() + linger);
                }
            },
            event = client.recv() => match event {
                Some(ClientEvent::Data(data)) => {
                    {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&data).and_then(|()| out.flush()).context("cannot write to standard output")?;
                    }
                    records_received += 1;
                    if rebind_after == Some(records_received) {
                        let from = client.local_addr();
                        let to = rebind_to.unwrap_or_else(|| SocketAddr::new(from.ip(), 0));
                        let bound = client.rebind(to).await.with_context(|| format!("cannot move to {to}"))?;
                        say!("fastshake client: moved from {from} to {bound}");
                    }
                }
                Some(ClientEvent::PathChanged(to)) => {
                    say!("fastshake client: following the server to {to}");
                }
                Some(ClientEvent::SessionTicket(session)) => {
                    if let Some(path) = session_file {
                        store_session(path, &session)?;
                        say!("fastshake client: kept the server's DTLS 1.3 ticket in {}", path.display());
                    }
                }
                Some(ClientEvent::Reconnected(summary)) => {
                    say!(
                        "fastshake client: no answer for the app timeout, reconnected: {}{}",
                        summary_line(&summary, Role::Client),
                        peer_text(&summary)
                    );
                    if let (Some(path), Some(session)) = (session_file, &summary.session) {
                        store_session(path, session)?;
                    }
                    keep_cache_entry(&mut cache, &summary)?;
                }
                Some(ClientEvent::SendFailed(error)) => {
                    return Err(anyhow::Error::new(error).context("cannot send a record"));
                }
                Some(ClientEvent::Failed(error)) => {
                    let (unsent, still_open) = lines_not_sent(&client, &mut input, input_open);
                    let lines = match (unsent, still_open) {
                        (0, _) => String::new(),
                        (n, false) => format!(" ({n} line(s) of standard input not sent)"),
                        (n, true) => format!(" ({n} line(s) of standard input not sent, and it was still open)"),
                    };
                    return Err(anyhow::Error::new(error).context(format!("the session failed{lines}")));
                }
                Some(ClientEvent::Closed) | None => {
                    peer_closed = true;
                    break;
                }
            },
            () = linger_done => break,
            // Ctrl-C: still say goodbye with close_notify.
            _ = terminate.recv() => break,
        }
    }
    // Lines the server's close left behind: handed to the session and dropped, or read and
    // waiting. An open input with nothing waiting lost nothing yet (an interactive client).
    let (unsent, still_open) =
        if peer_closed { lines_not_sent(&client, &mut input, input_open) } else { (0, false) };
    let unsent = unsent + refused_line;
    let (reconnections, path_changes) = (client.reconnections(), client.path_changes());
    let traffic = client.close().await.context("closing the session failed")?;
    say!(
        "fastshake client: {} ({}); {} reconnection(s), {} server port change(s); in total sent {} datagrams / {} B, received {} datagrams / {} B",
        if peer_closed { "closed by the server (close_notify)" } else { "closed" },
        remote,
        reconnections,
        path_changes,
        traffic.datagrams_sent,
        traffic.bytes_sent,
        traffic.datagrams_received,
        traffic.bytes_received
    );
    if unsent > 0 {
        bail!(
            "the server closed the session before {unsent} line(s) of standard input were sent{}",
            if still_open { "; standard input was still open, and nothing after them was read" } else { "" }
        );
    }
    Ok(())
}

/// Lines of standard input (newline included), read on a plain thread: a blocked read there never
/// holds up the end of the process the way a runtime-owned blocking read would.
fn spawn_stdin_reader() -> mpsc::UnboundedReceiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if tx.send(Ok(line)).is_err() {
                        return;
                    }
                }
                Err(error) => {
                    let _ = tx.send(Err(error));
                    return;
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_file_that_does_not_exist_means_a_full_handshake() {
        let missing = std::env::temp_dir().join(format!("fastshake-no-session-{}", std::process::id()));
        assert!(load_session(&missing).unwrap().is_none());
    }
}
