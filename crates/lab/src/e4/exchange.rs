//! Seed 003's exchange on a lossless, zero-delay path: a handshake, one message in each
//! direction, then close — every datagram kept for the accounting, and the CPU time each role
//! spends in its engine calls during the handshake. A configuration that needs an earlier
//! handshake (to fill a cache or to resume) runs it first against the same server, unmeasured.

use super::chains::{ChainSet, Chains};
use fastshake_dtls::Versions;
use fastshake_dtls::{
    CachedServer, ClientAuth, ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, Event,
    HandshakeSummary, Instant, ServerConfig, TicketKeys, ValidatedKeyCache,
};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the measured handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Config {
    /// Nothing cached, nothing offered.
    Vanilla,
    /// A first handshake offering both caches with nothing cached: the signalling cost.
    FirstOffer,
    /// RFC 7924: the client has the server's Certificate and CertificateRequest.
    Rfc7924,
    /// RFC 7924 and the client-certificate ticket (seed 003).
    Bithac,
    /// BiTHaC, both sides also keeping validated keys (seed 003 §IV-C).
    BithacKeyCache,
    /// Abbreviated handshake, session ID (RFC 5246).
    SessionId,
    /// Abbreviated handshake, ticket (RFC 5077).
    Ticket,
    /// The client offers its ticket and its caches; the server resumes.
    BithacResumption,
    /// BiTHaC at another server of the same service (same chain, a client-chain cache of its
    /// own): the server's chain is cached, the client's ticket opens nothing there.
    BithacOtherServer,
}

impl Config {
    /// The configurations of the byte tables, vanilla first.
    pub const ALL: [Config; 8] = [
        Config::Vanilla,
        Config::FirstOffer,
        Config::Rfc7924,
        Config::Bithac,
        Config::BithacKeyCache,
        Config::SessionId,
        Config::Ticket,
        Config::BithacResumption,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Config::Vanilla => "vanilla",
            Config::FirstOffer => "first (caching offered)",
            Config::Rfc7924 => "RFC 7924",
            Config::Bithac => "BiTHaC",
            Config::BithacKeyCache => "BiTHaC + key cache",
            Config::SessionId => "resumed (session ID)",
            Config::Ticket => "resumed (ticket)",
            Config::BithacResumption => "BiTHaC + resumption",
            Config::BithacOtherServer => "BiTHaC at another server",
        }
    }

    fn offers_cached_info(self) -> bool {
        !matches!(self, Config::Vanilla | Config::SessionId | Config::Ticket)
    }

    fn offers_client_ticket(self) -> bool {
        matches!(
            self,
            Config::FirstOffer
                | Config::Bithac
                | Config::BithacKeyCache
                | Config::BithacResumption
                | Config::BithacOtherServer
        )
    }

    fn tickets(self) -> bool {
        matches!(self, Config::Ticket | Config::BithacResumption)
    }

    fn needs_earlier_handshake(self) -> bool {
        !matches!(self, Config::Vanilla | Config::FirstOffer)
    }

    pub fn resumes(self) -> bool {
        matches!(self, Config::SessionId | Config::Ticket | Config::BithacResumption)
    }
}

/// One datagram of the measured exchange.
#[derive(Clone, Debug)]
pub struct Datagram {
    pub to_server: bool,
    pub payload: Vec<u8>,
}

/// The measured exchange.
pub struct Exchange {
    /// The handshake's datagrams, then the two messages' and the close's.
    pub handshake: Vec<Datagram>,
    pub after: Vec<Datagram>,
    pub client: HandshakeSummary,
    pub server: HandshakeSummary,
    /// CPU time of the engine calls during the handshake (cookie exchange included).
    pub client_cpu: Duration,
    pub server_cpu: Duration,
    /// Memory of the caches after the earlier handshake: the client's entry (RFC 7924 objects
    /// and ticket) and the server's client-chain cache (entries, bytes).
    pub cached_server_bytes: usize,
    pub client_chain_cache: (usize, usize),
}

/// Bytes of each application message (seed 003 sends "one message per direction").
pub const MESSAGE_LEN: usize = 32;

fn server_addr() -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 1], 4433))
}

/// Both configurations of `config`, datagrams up to `mtu` bytes of UDP payload.
pub fn configs(set: &ChainSet, chains: Chains, config: Config, mtu: usize) -> (ClientConfig, ServerConfig) {
    let mut client = ClientConfig {
        versions: Versions::Dtls12,
        ..ClientConfig::certificate(set.server_anchors.clone(), Some("localhost".into()))
    };
    client.certified_key = Some(set.client.clone());
    client.wall_clock = Some(set.wall_clock);
    client.suites = vec![chains.suite()];
    client.mtu = mtu;
    client.handshake_timeout = Duration::from_secs(3600);
    client.enable_tickets = config.tickets();
    client.cached_info = config.offers_cached_info();
    client.client_certificate_caching = config.offers_client_ticket();
    let mut server =
        ServerConfig { versions: Versions::Dtls12, ..ServerConfig::certificate(set.server.clone()) };
    server.client_auth = ClientAuth::Require;
    server.client_trust_anchors = Some(set.client_anchors.clone());
    server.wall_clock = Some(set.wall_clock);
    server.suites = vec![chains.suite()];
    server.mtu = mtu;
    server.handshake_timeout = Duration::from_secs(3600);
    if config.tickets() {
        server.tickets = Some(TicketKeys::new(1, [0x4e; 16]));
    }
    if config == Config::BithacKeyCache {
        client.key_cache = Some(Arc::new(ValidatedKeyCache::new(16)));
        server.key_cache = Some(Arc::new(ValidatedKeyCache::new(16)));
    }
    (client, server)
}

/// An engine seed: `seed` (little-endian) in the first 8 bytes, `salt` in the rest, so the
/// client and the server of one run (different salts) draw different randomness.
pub fn seed_bytes(seed: u64, salt: u8) -> [u8; 32] {
    let mut s = [salt; 32];
    s[..8].copy_from_slice(&seed.to_le_bytes());
    s
}

/// This thread's CPU clock (zero if the OS has none).
fn thread_cpu() -> Duration {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(Duration::ZERO, Duration::from)
}

/// A lossless, zero-delay path between one client and the server: each datagram is handed to
/// the other side as soon as it is sent.
struct Path<'a> {
    now: Instant,
    client: Connection,
    client_addr: SocketAddr,
    server: &'a mut Endpoint,
    log: Vec<Datagram>,
    handle: Option<ConnectionHandle>,
    client_done: Option<HandshakeSummary>,
    server_done: Option<HandshakeSummary>,
    /// A DTLS 1.3 ticket, which comes after the handshake.
    client_ticket: Option<ClientSession>,
    cpu: [Duration; 2],
}

impl Path<'_> {
    /// Runs `f`, adding the CPU time this thread spent in it to `cpu` (time the thread was
    /// preempted by other processes is not counted).
    fn timed<T>(cpu: &mut Duration, f: impl FnOnce() -> T) -> T {
        let start = thread_cpu();
        let out = f();
        *cpu += thread_cpu().saturating_sub(start);
        out
    }

    /// Moves datagrams until neither side has any to send; collects the events.
    fn settle(&mut self) -> anyhow::Result<()> {
        for _ in 0..10_000 {
            let now = self.now;
            let mut moved = false;
            while let Some(t) = Self::timed(&mut self.cpu[0], || self.client.poll_transmit(now)) {
                let mut payload = t.payload;
                self.log.push(Datagram { to_server: true, payload: payload.clone() });
                let (server, client_addr) = (&mut *self.server, self.client_addr);
                Self::timed(&mut self.cpu[1], || {
                    server.handle_datagram(now, server_addr(), client_addr, &mut payload)
                });
                moved = true;
            }
            while let Some(t) = Self::timed(&mut self.cpu[1], || self.server.poll_transmit(now)) {
                let mut payload = t.payload;
                self.log.push(Datagram { to_server: false, payload: payload.clone() });
                let client = &mut self.client;
                Self::timed(&mut self.cpu[0], || client.handle_datagram(now, server_addr(), &mut payload));
                moved = true;
            }
            while let Some(e) = Self::timed(&mut self.cpu[0], || self.client.poll_event()) {
                match e {
                    Event::Connected(s) => self.client_done = Some(s),
                    Event::SessionTicket(t) => self.client_ticket = Some(t),
                    Event::Failed(err) => anyhow::bail!("client failed: {err}"),
                    _ => {}
                }
            }
            while let Some((h, e)) = Self::timed(&mut self.cpu[1], || self.server.poll_event()) {
                if matches!(e, Event::Accepted) && self.handle.is_none() {
                    self.handle = Some(h);
                }
                if self.handle != Some(h) {
                    continue;
                }
                match e {
                    Event::Connected(s) => self.server_done = Some(s),
                    Event::Failed(err) => anyhow::bail!("server failed: {err}"),
                    _ => {}
                }
            }
            if !moved {
                return Ok(());
            }
        }
        anyhow::bail!("the exchange did not settle")
    }
}

/// What one handshake gave: its datagrams, those after it, both summaries, each role's CPU time.
type Handshaken = (Vec<Datagram>, Vec<Datagram>, HandshakeSummary, HandshakeSummary, [Duration; 2]);

/// The client of one handshake: the port it sends from, its engine seed ([`seed_bytes`] with
/// salt 1), and what it resumes or reuses, if anything.
#[derive(Clone, Debug, Default)]
pub struct ClientStart {
    pub port: u16,
    pub seed: u64,
    pub session: Option<ClientSession>,
    pub cached: Option<CachedServer>,
}

/// One handshake of `start`, then (if `exchange`) a message each way and the client's close.
fn handshake(
    server: &mut Endpoint,
    client_config: ClientConfig,
    start: ClientStart,
    exchange: bool,
) -> anyhow::Result<Handshaken> {
    let now = Instant::from_millis(1);
    let ClientStart { port, seed, session, cached } = start;
    let client = Connection::client_with_cache(
        Arc::new(client_config),
        now,
        server_addr(),
        seed_bytes(seed, 1),
        session,
        cached,
    );
    let mut path = Path {
        now,
        client,
        client_addr: SocketAddr::from(([192, 0, 2, 2], port)),
        server,
        log: Vec::new(),
        handle: None,
        client_done: None,
        server_done: None,
        client_ticket: None,
        cpu: [Duration::ZERO; 2],
    };
    path.settle()?;
    let (Some(mut client), Some(server_summary), Some(h)) =
        (path.client_done.clone(), path.server_done.clone(), path.handle)
    else {
        anyhow::bail!("the handshake did not complete without a timer")
    };
    // A DTLS 1.3 ticket comes after the handshake: it is the session to resume all the same.
    if client.session.is_none() {
        client.session = path.client_ticket.take();
    }
    anyhow::ensure!(
        client.retransmissions == 0 && server_summary.retransmissions == 0,
        "a flight was resent"
    );
    let cpu = path.cpu;
    let handshake = std::mem::take(&mut path.log);
    if exchange {
        path.client.send(&[0x61; MESSAGE_LEN])?;
        path.settle()?;
        path.server.send(h, &[0x62; MESSAGE_LEN])?;
        path.settle()?;
    }
    path.client.close();
    path.settle()?;
    Ok((handshake, path.log, client, server_summary, cpu))
}

/// One more handshake against `server` (then the client's close), as the byte figures run it:
/// both summaries and the CPU time of each role's engine calls. For benchmarks that repeat it.
pub fn handshake_once(
    server: &mut Endpoint,
    client_config: ClientConfig,
    start: ClientStart,
) -> anyhow::Result<(HandshakeSummary, HandshakeSummary, [Duration; 2])> {
    let (_, _, client, server_summary, cpu) = handshake(server, client_config, start, false)?;
    Ok((client, server_summary, cpu))
}

/// The server of `config` and what the client brings to the measured handshake (session,
/// cache entry), after the earlier handshake `config` needs, if any.
pub struct Prepared {
    pub server: Endpoint,
    pub client_config: ClientConfig,
    pub session: Option<ClientSession>,
    pub cached: Option<CachedServer>,
    pub cached_server_bytes: usize,
}

/// Runs the earlier handshake of `config` (in memory, unmeasured) against a new server.
pub fn prepare(
    set: &ChainSet,
    chains: Chains,
    config: Config,
    mtu: usize,
    seed: u64,
    adjust: impl Fn(&mut ClientConfig, &mut ServerConfig),
) -> anyhow::Result<Prepared> {
    let (mut client_config, mut server_config) = configs(set, chains, config, mtu);
    adjust(&mut client_config, &mut server_config);
    let server_config = Arc::new(server_config);
    let mut server = Endpoint::new(server_config.clone(), seed_bytes(seed, 2))?;
    let (mut session, mut cached, mut cached_server_bytes) = (None, None, 0);
    if config.needs_earlier_handshake() {
        let (_, _, first, _, _) = handshake(
            &mut server,
            client_config.clone(),
            ClientStart { port: 40_001, seed: seed ^ 0x5eed, ..ClientStart::default() },
            false,
        )?;
        if config.resumes() {
            session = first.session.clone();
            anyhow::ensure!(session.is_some(), "{}: the server issued no session", config.name());
        }
        if config.offers_cached_info() {
            cached = first.cache_update.clone();
            cached_server_bytes = cached.as_ref().map_or(0, CachedServer::memory);
            anyhow::ensure!(cached.is_some(), "{}: nothing to cache", config.name());
        }
        if config == Config::BithacOtherServer {
            server = Endpoint::new(server_config, seed_bytes(seed, 3))?;
        }
    }
    Ok(Prepared { server, client_config, session, cached, cached_server_bytes })
}

/// The measured exchange of `config` over `chains` at `mtu`.
pub fn run(
    set: &ChainSet,
    chains: Chains,
    config: Config,
    mtu: usize,
    seed: u64,
) -> anyhow::Result<Exchange> {
    run_adjusted(set, chains, config, mtu, seed, |_, _| {})
}

/// [`run`] with both configurations changed by `adjust` first (another version, group or
/// compression).
pub fn run_adjusted(
    set: &ChainSet,
    chains: Chains,
    config: Config,
    mtu: usize,
    seed: u64,
    adjust: impl Fn(&mut ClientConfig, &mut ServerConfig),
) -> anyhow::Result<Exchange> {
    let Prepared { mut server, client_config, session, cached, cached_server_bytes } =
        prepare(set, chains, config, mtu, seed, adjust)?;
    let client_chain_cache = server.client_cert_cache_size();
    let (handshake, after, client, server_summary, cpu) =
        handshake(&mut server, client_config, ClientStart { port: 40_002, seed, session, cached }, true)?;
    Ok(Exchange {
        handshake,
        after,
        client,
        server: server_summary,
        client_cpu: cpu[0],
        server_cpu: cpu[1],
        cached_server_bytes,
        client_chain_cache,
    })
}
