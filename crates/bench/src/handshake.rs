//! `fastshake bench handshake`: DTLS 1.2 PSK handshake rate, record protection throughput,
//! session memory and heap allocations per record; certificate (ECDHE-ECDSA, ECDHE-RSA) and
//! resumed (session ID, ticket) handshake rates and the handshake bytes on the wire — beside
//! OpenSSL's DTLS on the same machine. Prints medians and ratios; asserts nothing.
//!
//! Memory and allocations are measured with a counting global allocator (`stats_alloc`) that
//! wraps the system allocator for the whole `fastshake` binary; it costs a few atomic additions
//! per allocation. OpenSSL allocates through libc directly, so only our side pays that.

use crate::openssl_anchor::{OpensslPair, MTU, PSK_IDENTITY, PSK_KEY};
use crate::GLOBAL;
use anyhow::{bail, Context};
use fastshake_dtls::Versions;
use fastshake_dtls::{
    CipherSuite, ClientAuth, ClientConfig, ClientSession, Connection, ConnectionHandle, Endpoint, Event,
    HandshakeSummary, Instant, Resumption, ServerConfig, TicketKeys, TrustAnchors, WallClock,
};
use fastshake_net::dtls::{ClientOptions, DtlsClient};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Targets of the certificate suites: resumed handshakes per second at least this many times full
/// ECDHE-ECDSA ones; full ECDHE-ECDSA at least OpenSSL's.
const TARGET_RESUMED_OVER_FULL: f64 = 5.0;

/// Targets of the PSK engine: handshakes per second, bytes per server session (tinyDTLS's figure in
/// seed 002), heap allocations per application record.
const TARGET_HANDSHAKES_PER_SECOND: f64 = 20_000.0;
const TARGET_SESSION_BYTES: i64 = 400;
pub(crate) const TARGET_ALLOCATIONS_PER_RECORD: f64 = 0.0;

/// The pre-shared-key suites; the certificate suites have their own sections.
const PSK_SUITES: &[CipherSuite] = &[CipherSuite::PskWithAes128Ccm8, CipherSuite::PskWithAes128GcmSha256];
const SERVER_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)), 4433);
/// Handshakes per server Endpoint before a fresh one (keeps the connection table bounded).
pub(crate) const HANDSHAKES_PER_ENDPOINT: u16 = 1000;
pub(crate) const RECORD_SIZES: [usize; 4] = [16, 64, 256, 1024];

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    repetitions: crate::Repetitions,
    /// Skip the loopback UDP part (it starts `openssl s_server` and `fastshake server`).
    #[arg(long)]
    no_loopback: bool,
    /// The openssl command for the loopback anchor.
    #[arg(long, value_name = "PATH", default_value = "openssl")]
    openssl: String,
    /// Also write the headline figures (handshakes per second beside OpenSSL) as JSON to this
    /// file (what `fastshake lab all` reads).
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

/// How long and how often each measurement runs.
struct Plan {
    runs: usize,
    /// Duration of one timed run of an in-memory measurement.
    slice: Duration,
    /// Duration of one timed run over loopback UDP.
    loopback_slice: Duration,
    /// Repetitions of each certificate and resumption measurement (fewer with `--quick`, so the
    /// quick run stays short).
    certificate_runs: usize,
    /// Duration of one timed certificate run over loopback UDP.
    certificate_loopback_slice: Duration,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (runs, certificate_runs) = (args.repetitions.runs_or(3, 5), args.repetitions.runs_or(1, 5));
    let plan = if args.repetitions.quick {
        Plan {
            runs,
            slice: Duration::from_millis(150),
            loopback_slice: Duration::from_millis(300),
            certificate_runs,
            certificate_loopback_slice: Duration::from_millis(150),
        }
    } else {
        Plan {
            runs,
            slice: Duration::from_millis(500),
            loopback_slice: Duration::from_millis(1000),
            certificate_runs,
            certificate_loopback_slice: Duration::from_millis(1000),
        }
    }
    .validated()?;

    println!(
        "fastshake bench handshake — DTLS 1.2 with a pre-shared key, beside {}",
        openssl::version::version()
    );
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; run `cargo run --release -p fastshake -- bench handshake` for real figures.");
    }
    println!(
        "Median of {} runs; in-memory runs of {} ms, loopback runs of {} ms.\n",
        plan.runs,
        plan.slice.as_millis(),
        plan.loopback_slice.as_millis()
    );

    let headline = engine_handshakes(&plan)?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "bench": "handshake",
            "quick": args.repetitions.quick,
            "runs": plan.runs,
            "anchor": openssl::version::version(),
            "target_handshakes_per_s": TARGET_HANDSHAKES_PER_SECOND,
            "engine_handshakes": headline,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
    }
    record_throughput(&plan)?;
    session_memory()?;
    allocations_per_record()?;
    if args.no_loopback {
        println!("\n(loopback part skipped: --no-loopback)");
    } else {
        loopback_handshakes(&plan, &args.openssl)?;
    }

    println!(
        "\nCertificates and resumption. Test PKI from `fastshake pki`'s generator, made now. \
         Median of {} run(s); in-memory runs of {} ms, loopback runs of {} ms.",
        plan.certificate_runs,
        plan.slice.as_millis(),
        plan.certificate_loopback_slice.as_millis()
    );
    let pkis = BenchPkis::generate()?;
    certificate_engine_handshakes(&plan, &pkis)?;
    handshake_bytes(&pkis)?;
    if !args.no_loopback {
        certificate_loopback_handshakes(&plan, &pkis, &args.openssl)?;
    }
    crate::handshake13::run(plan.certificate_runs.max(plan.runs), plan.slice, &pkis)
}

impl Plan {
    fn validated(self) -> anyhow::Result<Self> {
        if self.runs == 0 {
            bail!("--runs must be at least 1");
        }
        Ok(self)
    }
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

fn openssl_cipher(suite: CipherSuite) -> &'static str {
    match suite {
        CipherSuite::PskWithAes128Ccm8 => "PSK-AES128-CCM8",
        CipherSuite::PskWithAes128GcmSha256 => "PSK-AES128-GCM-SHA256",
        _ => "",
    }
}

fn configs(suite: CipherSuite) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let client = ClientConfig {
        versions: Versions::Dtls12,
        suites: vec![suite],
        mtu: MTU,
        ..ClientConfig::psk(PSK_IDENTITY, PSK_KEY)
    };
    let server = ServerConfig {
        versions: Versions::Dtls12,
        suites: vec![suite],
        mtu: MTU,
        ..ServerConfig::psk(PSK_IDENTITY, PSK_KEY)
    };
    (Arc::new(client), Arc::new(server))
}

/// A seed that differs per handshake; the bench needs variety, not secrecy.
pub(crate) fn seed(n: u64) -> [u8; 32] {
    let mut seed = [0x5a; 32];
    seed[..8].copy_from_slice(&n.to_le_bytes());
    seed
}

/// Seconds since 1970, for certificate validity.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(crate) fn client_addr(n: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 1024 + n)
}

// ---------------------------------------------------------------------------------------------
// Our engine, both sides in memory.

/// Runs one full handshake between a fresh client and `endpoint`, passing datagrams in memory.
pub(crate) fn engine_handshake(
    endpoint: &mut Endpoint,
    config: &Arc<ClientConfig>,
    from: SocketAddr,
    now: Instant,
    n: u64,
) -> anyhow::Result<(Connection, ConnectionHandle)> {
    let (client, handle, _) = engine_handshake_with(endpoint, config, from, now, n, None)?;
    Ok((client, handle))
}

/// [`engine_handshake`] offering `session` for resumption; also returns the client's summary.
pub(crate) fn engine_handshake_with(
    endpoint: &mut Endpoint,
    config: &Arc<ClientConfig>,
    from: SocketAddr,
    now: Instant,
    n: u64,
    session: Option<ClientSession>,
) -> anyhow::Result<(Connection, ConnectionHandle, HandshakeSummary)> {
    let mut client = Connection::client_with_session(Arc::clone(config), now, SERVER_ADDR, seed(n), session);
    let mut handle = None;
    let mut summary = None;
    // A PSK handshake is 3 round trips; more rounds than this means it is stuck.
    for _ in 0..16 {
        let mut moved = false;
        while let Some(mut transmit) = client.poll_transmit(now) {
            endpoint.handle_datagram(now, SERVER_ADDR, from, &mut transmit.payload);
            moved = true;
        }
        while let Some(mut transmit) = endpoint.poll_transmit(now) {
            if transmit.dst == from {
                client.handle_datagram(now, SERVER_ADDR, &mut transmit.payload);
            }
            moved = true;
        }
        while let Some((h, event)) = endpoint.poll_event() {
            match event {
                Event::Connected(_) => handle = Some(h),
                Event::Failed(e) => bail!("server side failed: {e}"),
                _ => {}
            }
        }
        while let Some(event) = client.poll_event() {
            match event {
                Event::Connected(s) => summary = Some(s),
                Event::Failed(e) => bail!("client side failed: {e}"),
                _ => {}
            }
        }
        if let (true, Some(h), Some(s)) = (client.is_established(), handle, summary.as_ref()) {
            return Ok((client, h, s.clone()));
        }
        if !moved {
            break;
        }
    }
    bail!("the in-memory handshake stalled")
}

/// Handshakes per second for `slice`, one core, both sides in this thread.
fn engine_rate(suite: CipherSuite, slice: Duration) -> anyhow::Result<f64> {
    let (client_config, server_config) = configs(suite);
    let start = std::time::Instant::now();
    let mut count: u64 = 0;
    while start.elapsed() < slice {
        let mut endpoint = Endpoint::new(Arc::clone(&server_config), seed(count))?;
        for port in 0..HANDSHAKES_PER_ENDPOINT {
            let now = Instant::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
            let (client, _) = engine_handshake(&mut endpoint, &client_config, client_addr(port), now, count)?;
            drop(client);
            count += 1;
            if port % 64 == 0 && start.elapsed() >= slice {
                break;
            }
        }
    }
    Ok(count as f64 / start.elapsed().as_secs_f64())
}

/// Prints the table and returns its rows for `--json`.
fn engine_handshakes(plan: &Plan) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut rows = Vec::new();
    println!("1. Full PSK handshakes per second, engine only: client and server in memory, one core");
    println!("   (each: ClientHello, HelloVerifyRequest, ClientHello+cookie, ServerHello..Done, CKE+CCS+Finished, CCS+Finished)");
    println!(
        "   {:<34} {:>12} {:>12} {:>13}   target {:.0}/s",
        "suite", "fastshake", "OpenSSL", "ours/OpenSSL", TARGET_HANDSHAKES_PER_SECOND
    );
    for &suite in PSK_SUITES {
        let anchor = OpensslPair::new(openssl_cipher(suite))?;
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        // Interleaved so that machine noise hits both alike.
        for _ in 0..plan.runs {
            ours.push(engine_rate(suite, plan.slice)?);
            theirs.push(anchor.rate(plan.slice)?);
        }
        let (ours, theirs) = (median(ours), median(theirs));
        println!(
            "   {:<34} {:>10.0}/s {:>10.0}/s {:>13.2}   {}",
            suite.iana_name(),
            ours,
            theirs,
            ours / theirs,
            verdict(ours >= TARGET_HANDSHAKES_PER_SECOND)
        );
        rows.push(serde_json::json!({
            "suite": suite.iana_name(),
            "ours_per_s": ours,
            "openssl_per_s": theirs,
        }));
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Established pairs: throughput, memory, allocations.

/// A client and the server endpoint holding its connection, established, after one record each
/// way (so the server no longer keeps its last flight).
pub(crate) struct Established {
    pub endpoint: Endpoint,
    pub client: Connection,
    pub handle: ConnectionHandle,
    pub from: SocketAddr,
}

fn establish(suite: CipherSuite, n: u64) -> anyhow::Result<Established> {
    let (client_config, server_config) = configs(suite);
    let mut endpoint = Endpoint::new(server_config, seed(n))?;
    let from = client_addr(0);
    let (client, handle) = engine_handshake(&mut endpoint, &client_config, from, Instant::ZERO, n)?;
    let mut pair = Established { endpoint, client, handle, from };
    pair.exchange_one_record_each_way()?;
    Ok(pair)
}

impl Established {
    pub(crate) fn exchange_one_record_each_way(&mut self) -> anyhow::Result<()> {
        let now = Instant::ZERO;
        self.client.send(b"ping")?;
        while let Some(mut t) = self.client.poll_transmit(now) {
            self.endpoint.handle_datagram(now, SERVER_ADDR, self.from, &mut t.payload);
        }
        self.endpoint.send(self.handle, b"pong")?;
        while let Some(mut t) = self.endpoint.poll_transmit(now) {
            self.client.handle_datagram(now, SERVER_ADDR, &mut t.payload);
        }
        let mut got_ping = false;
        while let Some((_, event)) = self.endpoint.poll_event() {
            got_ping |= event == Event::ApplicationData(b"ping".to_vec());
        }
        let mut got_pong = false;
        while let Some(event) = self.client.poll_event() {
            got_pong |= event == Event::ApplicationData(b"pong".to_vec());
        }
        if !(got_ping && got_pong) {
            bail!("application data did not pass both ways");
        }
        Ok(())
    }

    /// Opens one datagram at the server, in place, the way the driver does.
    fn server_open(&mut self, datagram: &mut [u8], on_data: &mut dyn FnMut(ConnectionHandle, &[u8])) {
        let incoming = self.endpoint.incoming(datagram);
        self.endpoint.open_in_place(Instant::ZERO, SERVER_ADDR, self.from, incoming, on_data);
    }
}

fn record_throughput(plan: &Plan) -> anyhow::Result<()> {
    println!("\n2. Record protection, one core: MB/s of application data, one record per datagram.");
    println!(
        "   fastshake: seal = Connection::seal_into, open = Connection::open_in_place (in place, no copy)."
    );
    println!("   OpenSSL: seal = SSL_write, open = SSL_read through a memory BIO (one copy of each");
    println!("   datagram into its queue, which OpenSSL's own BIO_s_mem would make too).");
    print!("   {:<34} {:<10}", "suite", "");
    for size in RECORD_SIZES {
        print!(" {:>16}", format!("{size} B seal/open"));
    }
    println!();
    for &suite in PSK_SUITES {
        let mut pair = establish(suite, 7)?;
        let mut anchor = OpensslPair::new(openssl_cipher(suite))?.handshake()?;
        let mut ours_row = String::new();
        let mut theirs_row = String::new();
        for size in RECORD_SIZES {
            let count = records_per_run(&mut pair, size, plan.slice)?;
            let (mut seal, mut open, mut write, mut read) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..plan.runs {
                let (s, o) = throughput_run(&mut pair, size, count)?;
                seal.push(s);
                open.push(o);
                let (w, r) = anchor.throughput(size, count)?;
                write.push(w);
                read.push(r);
            }
            ours_row.push_str(&format!(" {:>16}", format!("{:.0}/{:.0}", median(seal), median(open))));
            theirs_row.push_str(&format!(" {:>16}", format!("{:.0}/{:.0}", median(write), median(read))));
        }
        println!("   {:<34} {:<10}{ours_row}", suite.iana_name(), "fastshake");
        println!("   {:<34} {:<10}{theirs_row}", "", "OpenSSL");
    }
    Ok(())
}

/// Records per timed run so that sealing takes about a quarter of `slice` (ours and OpenSSL's seal
/// and open then take about `slice` together), at most ~50 MB of datagrams.
pub(crate) fn records_per_run(pair: &mut Established, size: usize, slice: Duration) -> anyhow::Result<usize> {
    let data = vec![0x42u8; size];
    let mut out = vec![0u8; MTU.max(size + 64)];
    let probe = std::time::Instant::now();
    let mut probed = 0u64;
    while probe.elapsed() < Duration::from_millis(10) {
        pair.client.seal_into(&data, &mut out)?;
        probed += 1;
    }
    let per_record = probe.elapsed().as_secs_f64() / probed as f64;
    let by_time = (slice.as_secs_f64() / 4.0 / per_record) as usize;
    Ok(by_time.clamp(100, 50_000_000 / (size + 64)))
}

/// Seals `count` records (timed), then opens `count` freshly sealed ones (timed);
/// returns (seal MB/s, open MB/s).
pub(crate) fn throughput_run(
    pair: &mut Established,
    size: usize,
    count: usize,
) -> anyhow::Result<(f64, f64)> {
    let data = vec![0x42u8; size];
    let mut out = vec![0u8; MTU.max(size + 64)];
    let start = std::time::Instant::now();
    for _ in 0..count {
        pair.client.seal_into(&data, &mut out)?;
    }
    let seal_secs = start.elapsed().as_secs_f64();

    // Records for the other way, sealed untimed by the server and opened by the client's
    // connection: the same record work as the client's seal, without the endpoint's routing
    // (section 4 goes through the endpoint).
    let mut sealed = Vec::with_capacity(count);
    for _ in 0..count {
        let len = pair.endpoint.seal_into(pair.handle, &data, &mut out)?;
        sealed.push(out[..len].to_vec());
    }
    let mut opened = 0usize;
    let start = std::time::Instant::now();
    for datagram in &mut sealed {
        pair.client.open_in_place(Instant::ZERO, SERVER_ADDR, datagram, &mut |plain| opened += plain.len());
    }
    let open_secs = start.elapsed().as_secs_f64();
    if opened != size * count {
        bail!("opened {opened} bytes of {} sealed", size * count);
    }
    let megabytes = (size * count) as f64 / 1e6;
    Ok((megabytes / seal_secs, megabytes / open_secs))
}

/// Bytes currently on the heap (through the counting allocator), signed.
pub(crate) fn live_heap() -> i64 {
    let s = GLOBAL.stats();
    // stats_alloc counts a growing realloc in bytes_allocated (a shrinking one in
    // bytes_deallocated) and again in bytes_reallocated: the latter is not added.
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

fn session_memory() -> anyhow::Result<()> {
    println!("\n3. Memory of one established PSK session (counting allocator; after one record each way)");
    println!(
        "   size_of::<Connection>() = {} B, size_of::<Endpoint>() = {} B",
        std::mem::size_of::<Connection>(),
        std::mem::size_of::<Endpoint>()
    );
    let calibration = {
        let before = live_heap();
        let probe = std::hint::black_box(Box::new([0u8; 100]));
        let measured = live_heap() - before;
        drop(probe);
        measured
    };
    // Grown by reallocation, as a session's buffers are: counted once.
    let grown = {
        let before = live_heap();
        let mut probe: Vec<u8> = Vec::with_capacity(1);
        for byte in 0..100u8 {
            probe.push(std::hint::black_box(byte));
        }
        probe.shrink_to_fit();
        let measured = live_heap() - before;
        drop(probe);
        measured
    };
    println!(
        "   (calibration: a Box<[u8; 100]> measures {calibration} B this way, a Vec grown to 100 B {grown} B)"
    );
    println!(
        "   {:<34} {:>14} {:>14} {:>16} {:>16}   target <= {} B per session",
        "suite", "client heap", "client total", "server session", "+ cache entry", TARGET_SESSION_BYTES
    );
    println!(
        "   (server session: the endpoint's heap per connection, tables included, resumption cache off;"
    );
    println!("    cache entry: the extra growth per connection with the session-ID cache on)");
    let rows = PSK_SUITES.iter().map(|&s| (s, None)).chain([(PSK_SUITES[0], Some(CID_LEN))]);
    for (suite, cid) in rows {
        let (client_config, server_config) = with_cid(configs(suite), cid);
        // Client: everything but the client connection is freed before the second reading.
        let before = live_heap();
        let pair = {
            let mut endpoint = Endpoint::new(Arc::clone(&server_config), seed(1))?;
            let from = client_addr(0);
            let (client, handle) = engine_handshake(&mut endpoint, &client_config, from, Instant::ZERO, 1)?;
            let mut pair = Established { endpoint, client, handle, from };
            pair.exchange_one_record_each_way()?;
            pair
        };
        let Established { endpoint, client, .. } = pair;
        drop(endpoint);
        let client_heap = live_heap() - before;
        let client_total = client_heap + std::mem::size_of::<Connection>() as i64;
        drop(client);

        // Server: the session alone (cache off), then the cache's share as the difference.
        let mut without_cache = (*server_config).clone();
        without_cache.session_cache.max_entries = 0;
        let server_session = server_growth_per_session(&client_config, &Arc::new(without_cache))?;
        let cache_entry = server_growth_per_session(&client_config, &server_config)? - server_session;

        let name = match cid {
            Some(len) => format!("{} + CID ({len} B)", suite.iana_name()),
            None => suite.iana_name().to_owned(),
        };
        println!(
            "   {:<34} {:>12} B {:>12} B {:>14} B {:>14} B   client {}, server {}",
            name,
            client_heap,
            client_total,
            server_session,
            cache_entry,
            verdict(client_total <= TARGET_SESSION_BYTES),
            verdict(server_session <= TARGET_SESSION_BYTES)
        );
    }
    Ok(())
}

/// Length of the Connection IDs of the memory rows "with a CID" (each side issues one).
pub(crate) const CID_LEN: u8 = 4;

/// Both configurations with Connection IDs of `cid` bytes issued by each side, or as they are.
pub(crate) fn with_cid(
    (client, server): (Arc<ClientConfig>, Arc<ServerConfig>),
    cid: Option<u8>,
) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let Some(len) = cid else { return (client, server) };
    let (mut client, mut server) = ((*client).clone(), (*server).clone());
    client.mobility.connection_id = Some(len);
    server.mobility.connection_id = Some(len);
    (Arc::new(client), Arc::new(server))
}

/// The server endpoint's heap per established connection (its tables included): what dropping
/// an endpoint of 200 sessions frees beyond what an empty one frees, after one record each way
/// on each and once the handshakes' timers have run out (a 1.3 server reads the client's
/// handshake epoch until then, in case its Finished comes again). Counted as freed, so what the
/// clients keep (their configuration's ticket and key caches) is not the server's.
pub(crate) fn server_growth_per_session(
    client_config: &Arc<ClientConfig>,
    server_config: &Arc<ServerConfig>,
) -> anyhow::Result<i64> {
    const SESSIONS: u16 = 200;
    let endpoint_heap = |endpoint: Endpoint| {
        let before = live_heap();
        drop(endpoint);
        before - live_heap()
    };
    let empty = endpoint_heap(Endpoint::new(Arc::clone(server_config), seed(2))?);
    let mut endpoint = Endpoint::new(Arc::clone(server_config), seed(2))?;
    for port in 0..SESSIONS {
        let from = client_addr(port);
        let (client, handle) =
            engine_handshake(&mut endpoint, client_config, from, Instant::ZERO, u64::from(port))?;
        let mut pair = Established { endpoint, client, handle, from };
        pair.exchange_one_record_each_way()?;
        endpoint = pair.endpoint;
    }
    let settled = Instant::ZERO + server_config.handshake_timeout + std::time::Duration::from_secs(1);
    endpoint.handle_timeout(settled);
    while endpoint.poll_transmit(settled).is_some() {}
    if endpoint.stats().connections_open != u64::from(SESSIONS) {
        bail!("{} of {SESSIONS} sessions left open", endpoint.stats().connections_open);
    }
    Ok((endpoint_heap(endpoint) - empty) / i64::from(SESSIONS))
}

fn allocations_per_record() -> anyhow::Result<()> {
    println!(
        "\n4. Heap allocations per application record after the handshake ({ALLOCATION_RECORDS} records of 100 B)"
    );
    println!(
        "   {:<34} {:>12} {:>12} {:>12} {:>12}   target {}",
        "suite", "client seal", "server open", "server seal", "client open", TARGET_ALLOCATIONS_PER_RECORD
    );
    for &suite in PSK_SUITES {
        let per = record_allocations(&mut establish(suite, 3)?)?;
        let worst = per.iter().copied().fold(0.0, f64::max);
        println!(
            "   {:<34} {:>12.3} {:>12.3} {:>12.3} {:>12.3}   {}",
            suite.iana_name(),
            per[0],
            per[1],
            per[2],
            per[3],
            verdict(worst <= TARGET_ALLOCATIONS_PER_RECORD)
        );
    }
    Ok(())
}

/// Records of 100 B each allocation count is taken over.
pub(crate) const ALLOCATION_RECORDS: usize = 1000;

/// Heap allocations per record of an established pair, the way the drivers move records: the
/// client's seal, the server's open (through the endpoint), the server's seal, the client's open.
pub(crate) fn record_allocations(pair: &mut Established) -> anyhow::Result<[f64; 4]> {
    let data = [0x17u8; 100];
    let mut out = vec![0u8; MTU];
    let mut datagrams: Vec<Vec<u8>> = (0..ALLOCATION_RECORDS).map(|_| vec![0u8; MTU]).collect();

    let client_seal = count_allocations(|| {
        for datagram in datagrams.iter_mut() {
            let len = pair.client.seal_into(&data, &mut out)?;
            datagram[..len].copy_from_slice(&out[..len]);
            datagram.truncate(len);
        }
        Ok(())
    })?;
    let mut opened = 0;
    let server_open = count_allocations(|| {
        for datagram in datagrams.iter_mut() {
            pair.server_open(datagram, &mut |_, _| opened += 1);
        }
        Ok(())
    })?;
    datagrams = (0..ALLOCATION_RECORDS).map(|_| vec![0u8; MTU]).collect();
    let server_seal = count_allocations(|| {
        for datagram in datagrams.iter_mut() {
            let len = pair.endpoint.seal_into(pair.handle, &data, &mut out)?;
            datagram[..len].copy_from_slice(&out[..len]);
            datagram.truncate(len);
        }
        Ok(())
    })?;
    let client_open = count_allocations(|| {
        for datagram in datagrams.iter_mut() {
            pair.client.open_in_place(Instant::ZERO, SERVER_ADDR, datagram, &mut |_| opened += 1);
        }
        Ok(())
    })?;
    if opened != 2 * ALLOCATION_RECORDS {
        bail!("{opened} of {} records opened", 2 * ALLOCATION_RECORDS);
    }
    let per = |n: usize| n as f64 / ALLOCATION_RECORDS as f64;
    Ok([per(client_seal), per(server_open), per(server_seal), per(client_open)])
}

/// Allocations and reallocations made while `f` runs.
fn count_allocations(f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<usize> {
    let before = GLOBAL.stats();
    f()?;
    let after = GLOBAL.stats();
    Ok((after.allocations - before.allocations) + (after.reallocations - before.reallocations))
}

// ---------------------------------------------------------------------------------------------
// Loopback UDP: our client load against `fastshake server` and against `openssl s_server`.

/// Kills and reaps a child process on every path.
pub(crate) struct ChildGuard(pub(crate) Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_udp_port() -> anyhow::Result<u16> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(socket.local_addr()?.port())
}

/// Starts `command`, waits until a line of its output contains `ready`, and keeps draining that
/// output so the child never blocks on a full pipe.
fn start_peer(mut command: Command, from_stderr: bool, ready: &'static str) -> anyhow::Result<ChildGuard> {
    command.stdin(Stdio::piped());
    if from_stderr {
        command.stderr(Stdio::piped()).stdout(Stdio::null());
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::null());
    }
    let mut child = ChildGuard(command.spawn().with_context(|| format!("cannot start {command:?}"))?);
    let output: Box<dyn Read + Send> = if from_stderr {
        Box::new(child.0.stderr.take().context("no stderr pipe")?)
    } else {
        Box::new(child.0.stdout.take().context("no stdout pipe")?)
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            if line.contains(ready) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(5)).with_context(|| format!("{command:?} did not get ready"))?;
    Ok(child)
}

fn loopback_handshakes(plan: &Plan, openssl: &str) -> anyhow::Result<()> {
    println!("\n5. Full PSK handshakes per second over loopback UDP: fastshake client load (sequential,");
    println!("   fresh socket and close_notify each) against `fastshake server` and `openssl s_server`");
    println!("   (separate processes; the anchor is OpenSSL's server under the same client)");
    println!("   (a resent flight costs the 200 ms first retransmission timeout; last column: resent");
    println!("   flights + failed handshakes, all runs, against fastshake / against OpenSSL)");
    println!(
        "   {:<34} {:>16} {:>16} {:>13} {:>12}",
        "suite", "fastshake server", "openssl s_server", "ours/OpenSSL", "resent"
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let exe = crate::fastshake_program()?;
    let key_hex = hex::encode(PSK_KEY);
    let identity = String::from_utf8_lossy(PSK_IDENTITY).into_owned();
    for &suite in PSK_SUITES {
        let client_config = Arc::new(ClientConfig {
            versions: Versions::Dtls12,
            suites: vec![suite],
            // Loopback loses nothing; a short first timeout keeps a rare stall from dominating.
            initial_retransmit: Duration::from_millis(200),
            ..ClientConfig::psk(PSK_IDENTITY, PSK_KEY)
        });

        let port = free_udp_port()?;
        let mut ours = Command::new(&exe);
        ours.args(["server", "--listen", &format!("127.0.0.1:{port}"), "--psk-identity", &identity]).args([
            "--psk",
            &key_hex,
            "--suite",
            suite.iana_name(),
        ]);
        let ours_guard = start_peer(ours, true, "listening on")?;
        let ours_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

        let port = free_udp_port()?;
        let mut theirs = Command::new(openssl);
        theirs
            .args(["s_server", "-dtls1_2", "-nocert", "-psk", &key_hex, "-psk_identity", &identity])
            .args(["-cipher", openssl_cipher(suite), "-accept", &format!("127.0.0.1:{port}")]);
        let theirs_guard = start_peer(theirs, false, "ACCEPT")?;
        let theirs_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

        let servers = [(ours_addr, None), (theirs_addr, None)];
        let rates = loopback_rates(&runtime, servers, &client_config, plan.runs, plan.loopback_slice)?;
        drop((ours_guard, theirs_guard));
        println!("   {:<34} {rates}", suite.iana_name());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_anchor_completes_the_same_psk_handshake_for_both_suites() {
        for &suite in PSK_SUITES {
            let pair = OpensslPair::new(openssl_cipher(suite)).unwrap();
            let session = pair.handshake().unwrap();
            // Like ours: ClientHello, ClientHello with cookie, then the final flight; the server
            // answers with HelloVerifyRequest, its flight, and CCS+Finished.
            let client_datagrams = session.client.get_ref().written;
            let server_datagrams = session.server.get_ref().written;
            assert_eq!(client_datagrams, 3, "the anchor must do the cookie exchange");
            assert!(server_datagrams >= 3, "{server_datagrams}");
            assert_eq!(session.client.ssl().current_cipher().unwrap().name(), openssl_cipher(suite));
        }
    }

    #[test]
    fn openssl_anchor_completes_certificate_handshakes_with_and_without_client_certificates() {
        let pki = generate(3, KeyKind::P256, &[], unix_now(), 1).unwrap();
        for mutual in [false, true] {
            let pair = OpensslPair::with_certificates("ECDHE-ECDSA-AES128-GCM-SHA256", &pki, mutual).unwrap();
            let session = pair.handshake().unwrap();
            // ClientHello twice (cookie), then the final flight: one datagram, or more once the
            // client's certificate chain makes it exceed the MTU.
            let written = session.client.get_ref().written;
            assert!(if mutual { written >= 3 } else { written == 3 }, "{written} datagrams");
            assert_eq!(
                session.client.ssl().current_cipher().unwrap().name(),
                "ECDHE-ECDSA-AES128-GCM-SHA256"
            );
            assert!(session.client.ssl().peer_certificate().is_some());
            assert_eq!(session.server.ssl().peer_certificate().is_some(), mutual);
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}

// ---------------------------------------------------------------------------------------------
// Certificates and resumption.

/// The chains the certificate measurements use, generated once per run.
pub(crate) struct BenchPkis {
    /// P-256, the leaf alone (RFC 7925's IoT profile).
    ecdsa_1: TestPki,
    /// P-256, leaf and two intermediates.
    pub ecdsa_3: TestPki,
    /// RSA-2048, leaf and two intermediates (seed 003's chains).
    rsa_3: TestPki,
}

impl BenchPkis {
    fn generate() -> anyhow::Result<Self> {
        let now = unix_now();
        Ok(BenchPkis {
            ecdsa_1: generate(1, KeyKind::P256, &[], now, 1)?,
            ecdsa_3: generate(3, KeyKind::P256, &[], now, 1)?,
            rsa_3: generate(3, KeyKind::Rsa2048, &[], now, 1)?,
        })
    }
}

/// How a certificate configuration resumes, if it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resume {
    Full,
    BySessionId,
    ByTicket,
}

/// Engine configs with certificates from `pki`: the server sends its chain; with `mutual` it
/// requires the client's. Tickets only for `Resume::ByTicket`. Wall clock pinned at engine time 0.
fn certificate_configs(
    suite: CipherSuite,
    pki: &TestPki,
    mutual: bool,
    resume: Resume,
) -> anyhow::Result<(Arc<ClientConfig>, Arc<ServerConfig>)> {
    let wall_clock = Some(WallClock { at: Instant::ZERO, unix_secs: unix_now() });
    let anchors = Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes())?);
    let client = ClientConfig {
        versions: Versions::Dtls12,
        suites: vec![suite],
        mtu: MTU,
        certified_key: if mutual { Some(Arc::new(pki.client_certified_key()?)) } else { None },
        trust_anchors: Some(Arc::clone(&anchors)),
        server_name: Some("localhost".to_owned()),
        enable_tickets: resume == Resume::ByTicket,
        wall_clock,
        ..ClientConfig::default()
    };
    let server = ServerConfig {
        versions: Versions::Dtls12,
        suites: vec![suite],
        mtu: MTU,
        certified_key: Some(Arc::new(pki.server_certified_key()?)),
        client_auth: if mutual { ClientAuth::Require } else { ClientAuth::None },
        client_trust_anchors: if mutual { Some(anchors) } else { None },
        tickets: (resume == Resume::ByTicket).then(|| TicketKeys::new(1, [0x7e; 16])),
        wall_clock,
        ..ServerConfig::default()
    };
    Ok((Arc::new(client), Arc::new(server)))
}

/// A session to resume from one full handshake with `endpoint`.
fn first_session(
    endpoint: &mut Endpoint,
    config: &Arc<ClientConfig>,
    n: u64,
) -> anyhow::Result<ClientSession> {
    let (_, _, summary) = engine_handshake_with(endpoint, config, client_addr(0), Instant::ZERO, n, None)?;
    summary.session.context("the server issued no session to resume")
}

/// Handshakes per second for `slice`, both sides in this thread: full ones, or ones resuming a
/// session (only the resumed handshakes are timed; each fresh endpoint first makes one full
/// handshake, untimed, to fill its session cache).
fn engine_certificate_rate(
    client_config: &Arc<ClientConfig>,
    server_config: &Arc<ServerConfig>,
    resume: Resume,
    slice: Duration,
) -> anyhow::Result<f64> {
    let start = std::time::Instant::now();
    let mut timed = Duration::ZERO;
    let mut count: u64 = 0;
    while timed < slice && start.elapsed() < slice * 4 {
        let mut endpoint = Endpoint::new(Arc::clone(server_config), seed(count))?;
        let session = match resume {
            Resume::Full => None,
            Resume::BySessionId | Resume::ByTicket => {
                Some(first_session(&mut endpoint, client_config, count)?)
            }
        };
        for port in 1..HANDSHAKES_PER_ENDPOINT {
            let now = Instant::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
            let one = std::time::Instant::now();
            let (client, _, summary) = engine_handshake_with(
                &mut endpoint,
                client_config,
                client_addr(port),
                now,
                count,
                session.clone(),
            )?;
            timed += one.elapsed();
            drop(client);
            let expected = match resume {
                Resume::Full => None,
                Resume::BySessionId => Some(Resumption::SessionId),
                Resume::ByTicket => Some(Resumption::Ticket),
            };
            if summary.resumption != expected {
                bail!("expected resumption {expected:?}, the handshake gave {:?}", summary.resumption);
            }
            count += 1;
            if port % 64 == 0 && timed >= slice {
                break;
            }
        }
    }
    Ok(count as f64 / timed.as_secs_f64())
}

fn certificate_engine_handshakes(plan: &Plan, pkis: &BenchPkis) -> anyhow::Result<()> {
    println!("\n6. Certificate handshakes per second, engine only: client and server in memory, one core");
    println!(
        "   (server chain of 3: leaf + 2 intermediates; the client validates it and the name `localhost`;"
    );
    println!("   no client certificate. OpenSSL: the same chain, verify peer + host name, cookie exchange,");
    println!("   no tickets, no session cache. Resumed: abbreviated handshakes after the cookie exchange;");
    println!("   OpenSSL's in-memory resumption is not measured here: it needs SSL_set_session, which is");
    println!("   `unsafe` in rust-openssl and this crate forbids unsafe code — see section 8 for s_server.)");
    println!("   {:<40} {:>12} {:>12} {:>13}", "handshake", "fastshake", "OpenSSL", "ours/OpenSSL");
    let rows = [
        (
            "full ECDHE-ECDSA P-256",
            CipherSuite::EcdheEcdsaWithAes128GcmSha256,
            &pkis.ecdsa_3,
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
        (
            "full ECDHE-RSA 2048",
            CipherSuite::EcdheRsaWithAes128GcmSha256,
            &pkis.rsa_3,
            "ECDHE-RSA-AES128-GCM-SHA256",
        ),
    ];
    let mut full_ecdsa = (f64::NAN, f64::NAN);
    for (label, suite, pki, cipher) in rows {
        let (client_config, server_config) = certificate_configs(suite, pki, false, Resume::Full)?;
        let anchor = OpensslPair::with_certificates(cipher, pki, false)?;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..plan.certificate_runs {
            ours.push(engine_certificate_rate(&client_config, &server_config, Resume::Full, plan.slice)?);
            theirs.push(anchor.rate(plan.slice)?);
        }
        let (ours, theirs) = (median(ours), median(theirs));
        if suite == CipherSuite::EcdheEcdsaWithAes128GcmSha256 {
            full_ecdsa = (ours, theirs);
        }
        println!("   {:<40} {:>10.0}/s {:>10.0}/s {:>13.2}", label, ours, theirs, ours / theirs);
    }
    let mut resumed_rates = Vec::new();
    for (label, resume) in
        [("resumed by session ID", Resume::BySessionId), ("resumed by ticket", Resume::ByTicket)]
    {
        let (client_config, server_config) =
            certificate_configs(CipherSuite::EcdheEcdsaWithAes128GcmSha256, &pkis.ecdsa_3, false, resume)?;
        let mut ours = Vec::new();
        for _ in 0..plan.certificate_runs {
            ours.push(engine_certificate_rate(&client_config, &server_config, resume, plan.slice)?);
        }
        let ours = median(ours);
        resumed_rates.push(ours);
        println!("   {:<40} {:>10.0}/s {:>12} {:>13}", format!("{label} (ECDHE-ECDSA)"), ours, "n/a", "");
    }
    let (full, openssl_full) = full_ecdsa;
    let slowest_resumed = resumed_rates.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "   target: resumed >= {TARGET_RESUMED_OVER_FULL}x full ECDHE-ECDSA: {:.1}x (slower of ID/ticket) — {}",
        slowest_resumed / full,
        verdict(slowest_resumed >= TARGET_RESUMED_OVER_FULL * full)
    );
    println!(
        "   target: full ECDHE-ECDSA >= OpenSSL's: {:.2}x — {}",
        full / openssl_full,
        verdict(full >= openssl_full)
    );
    Ok(())
}

/// One in-memory handshake of a configuration; the client's summary counts every datagram
/// and byte of it (the client sees every datagram of both directions).
fn handshake_cost(
    suite: CipherSuite,
    pki: Option<&TestPki>,
    mutual: bool,
    resume: Resume,
) -> anyhow::Result<HandshakeSummary> {
    let (client_config, server_config) = match pki {
        Some(pki) => certificate_configs(suite, pki, mutual, resume)?,
        None => configs(suite),
    };
    let mut endpoint = Endpoint::new(server_config, seed(11))?;
    let session = match resume {
        Resume::Full => None,
        Resume::BySessionId | Resume::ByTicket => Some(first_session(&mut endpoint, &client_config, 11)?),
    };
    let (_, _, summary) =
        engine_handshake_with(&mut endpoint, &client_config, client_addr(1), Instant::ZERO, 12, session)?;
    Ok(summary)
}

fn handshake_bytes(pkis: &BenchPkis) -> anyhow::Result<()> {
    const UDP_HEADER: u64 = 8;
    const IPV4_HEADER: u64 = 20;
    const IPV6_HEADER: u64 = 40;
    println!("\n7. Handshake bytes on the wire, both directions, cookie exchange included, MTU {MTU}");
    println!(
        "   (DTLS = UDP payload; UDP adds {UDP_HEADER} B per datagram; IP adds {IPV4_HEADER} B (IPv4, no options) or \
         {IPV6_HEADER} B (IPv6, no extension headers) per datagram; counted from the engine's summary)"
    );
    println!(
        "   {:<52} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "handshake", "datagrams", "DTLS B", "UDP B", "IPv4 B", "IPv6 B"
    );
    // One row a line: label, suite, PKI, mutual authentication, resumption.
    let (ecdsa, rsa) = (CipherSuite::EcdheEcdsaWithAes128Ccm8, CipherSuite::EcdheRsaWithAes128GcmSha256);
    let rows: [(&str, CipherSuite, Option<&TestPki>, bool, Resume); 7] = [
        ("PSK, AES-128-CCM-8", CipherSuite::PskWithAes128Ccm8, None, false, Resume::Full),
        ("ECDHE-ECDSA P-256, 1 certificate", ecdsa, Some(&pkis.ecdsa_1), false, Resume::Full),
        ("ECDHE-ECDSA P-256, 3 certificates", ecdsa, Some(&pkis.ecdsa_3), false, Resume::Full),
        ("ECDHE-ECDSA P-256, 3 certificates, mutual", ecdsa, Some(&pkis.ecdsa_3), true, Resume::Full),
        ("ECDHE-RSA 2048, 3 certificates, mutual", rsa, Some(&pkis.rsa_3), true, Resume::Full),
        ("resumed by session ID (ECDHE-ECDSA)", ecdsa, Some(&pkis.ecdsa_3), false, Resume::BySessionId),
        ("resumed by ticket (ECDHE-ECDSA)", ecdsa, Some(&pkis.ecdsa_3), false, Resume::ByTicket),
    ];
    for (label, suite, pki, mutual, resume) in rows {
        let s = handshake_cost(suite, pki, mutual, resume)?;
        let datagrams = s.datagrams_sent + s.datagrams_received;
        let dtls = s.bytes_sent + s.bytes_received;
        let udp = dtls + UDP_HEADER * datagrams;
        println!(
            "   {:<52} {:>9} {:>9} {:>9} {:>10} {:>10}",
            label,
            datagrams,
            dtls,
            udp,
            udp + IPV4_HEADER * datagrams,
            udp + IPV6_HEADER * datagrams
        );
    }
    Ok(())
}

/// Sequential handshakes over loopback for `slice` (fresh socket and close_notify each): full
/// ones, or offering `session` when given; a handshake that does not resume when it should is an
/// error.
/// Returns (handshakes per second, flights resent plus handshakes that failed).
/// Our server's and OpenSSL's handshake rates on loopback, measured `runs` times, interleaved.
struct LoopbackRates {
    ours: Vec<f64>,
    theirs: Vec<f64>,
    ours_resent: u64,
    theirs_resent: u64,
}

/// Measures `servers` (ours, then OpenSSL's; each with the session a client resumes, if any)
/// `runs` times, each for `slice`.
fn loopback_rates(
    runtime: &tokio::runtime::Runtime,
    servers: [(SocketAddr, Option<&ClientSession>); 2],
    config: &Arc<ClientConfig>,
    runs: usize,
    slice: Duration,
) -> anyhow::Result<LoopbackRates> {
    let mut rates = LoopbackRates { ours: Vec::new(), theirs: Vec::new(), ours_resent: 0, theirs_resent: 0 };
    let [(ours, ours_session), (theirs, theirs_session)] = servers;
    for _ in 0..runs {
        let (rate, resent) = runtime.block_on(loopback_rate(ours, config, ours_session, slice))?;
        rates.ours.push(rate);
        rates.ours_resent += resent;
        let (rate, resent) = runtime
            .block_on(loopback_rate(theirs, config, theirs_session, slice))
            .context("load against openssl s_server")?;
        rates.theirs.push(rate);
        rates.theirs_resent += resent;
    }
    Ok(rates)
}

/// The medians, their ratio and the flights resent, as the loopback tables print them.
impl std::fmt::Display for LoopbackRates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (ours, theirs) = (median(self.ours.clone()), median(self.theirs.clone()));
        let resent = format!("{} / {}", self.ours_resent, self.theirs_resent);
        write!(f, "{ours:>14.0}/s {theirs:>14.0}/s {:>13.2} {resent:>12}", ours / theirs)
    }
}

async fn loopback_rate(
    server: SocketAddr,
    config: &Arc<ClientConfig>,
    session: Option<&ClientSession>,
    slice: Duration,
) -> anyhow::Result<(f64, u64)> {
    let start = std::time::Instant::now();
    let (mut done, mut failed, mut resent) = (0u64, 0u64, 0u64);
    while start.elapsed() < slice {
        let options = ClientOptions { session: session.cloned(), ..ClientOptions::default() };
        let connect = DtlsClient::connect(server, Arc::clone(config), options);
        match tokio::time::timeout(Duration::from_secs(2), connect).await {
            Ok(Ok(client)) => {
                if session.is_some() && client.summary().resumption.is_none() {
                    bail!("a handshake with {server} did not resume");
                }
                resent += u64::from(client.summary().retransmissions);
                client.close().await?;
                done += 1;
            }
            _ => failed += 1,
        }
        if failed > 3 {
            bail!("{failed} handshakes with {server} failed");
        }
    }
    Ok((done as f64 / start.elapsed().as_secs_f64(), resent + failed))
}

/// A session from one full handshake over loopback.
async fn loopback_session(server: SocketAddr, config: &Arc<ClientConfig>) -> anyhow::Result<ClientSession> {
    let client = tokio::time::timeout(
        Duration::from_secs(2),
        DtlsClient::connect(server, Arc::clone(config), ClientOptions::default()),
    )
    .await
    .context("no handshake within 2 s")??;
    let session = client.summary().session.clone().context("the server issued no session")?;
    client.close().await?;
    Ok(session)
}

/// Writes `contents` to a fresh file in a scratch directory (for the servers' PEM arguments).
pub(crate) struct ScratchFiles {
    dir: std::path::PathBuf,
}

impl ScratchFiles {
    pub(crate) fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("fastshake-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(ScratchFiles { dir })
    }

    pub(crate) fn write(&self, name: &str, contents: &str) -> anyhow::Result<String> {
        let path = self.dir.join(name);
        std::fs::write(&path, contents)?;
        Ok(path.to_string_lossy().into_owned())
    }
}

impl Drop for ScratchFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn certificate_loopback_handshakes(plan: &Plan, pkis: &BenchPkis, openssl: &str) -> anyhow::Result<()> {
    println!(
        "\n8. Certificate handshakes per second over loopback UDP: fastshake client load (sequential, fresh"
    );
    println!(
        "   socket and close_notify each) against `fastshake server --cert` and `openssl s_server -cert`"
    );
    println!("   (chain of 3, no client certificate; resumed rows offer the session of one earlier full");
    println!(
        "   handshake with the same server: by ticket, or by session ID with tickets off on both sides)"
    );
    println!(
        "   {:<40} {:>16} {:>16} {:>13} {:>12}",
        "handshake", "fastshake server", "openssl s_server", "ours/OpenSSL", "resent"
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let exe = crate::fastshake_program()?;
    let files = ScratchFiles::new()?;
    let rows = [
        ("full ECDHE-ECDSA P-256", CipherSuite::EcdheEcdsaWithAes128GcmSha256, &pkis.ecdsa_3, Resume::Full),
        ("full ECDHE-RSA 2048", CipherSuite::EcdheRsaWithAes128GcmSha256, &pkis.rsa_3, Resume::Full),
        (
            "resumed by session ID (ECDHE-ECDSA)",
            CipherSuite::EcdheEcdsaWithAes128GcmSha256,
            &pkis.ecdsa_3,
            Resume::BySessionId,
        ),
        (
            "resumed by ticket (ECDHE-ECDSA)",
            CipherSuite::EcdheEcdsaWithAes128GcmSha256,
            &pkis.ecdsa_3,
            Resume::ByTicket,
        ),
    ];
    for (n, (label, suite, pki, resume)) in rows.into_iter().enumerate() {
        let chain = files.write(&format!("{n}-chain.pem"), &pki.server_chain_pem())?;
        let leaf = files.write(&format!("{n}-leaf.pem"), &pki.server.cert.pem)?;
        let intermediates: String = pki.intermediates.iter().rev().map(|c| c.pem.as_str()).collect();
        let intermediates = files.write(&format!("{n}-intermediates.pem"), &intermediates)?;
        let key = files.write(&format!("{n}-key.pem"), &pki.server.key_pem)?;
        let (client_config, _) = certificate_configs(suite, pki, false, resume)?;
        // The driver pins its own wall clock.
        let client_config = Arc::new(ClientConfig {
            wall_clock: None,
            initial_retransmit: Duration::from_millis(200),
            ..(*client_config).clone()
        });

        let port = free_udp_port()?;
        let mut ours = Command::new(&exe);
        ours.args(["server", "--listen", &format!("127.0.0.1:{port}"), "--cert", &chain, "--key", &key])
            .args(["--suite", suite.iana_name()]);
        if resume != Resume::ByTicket {
            ours.arg("--no-tickets");
        }
        let ours_guard = start_peer(ours, true, "listening on")?;
        let ours_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

        let port = free_udp_port()?;
        let mut theirs = Command::new(openssl);
        theirs
            .args(["s_server", "-dtls1_2", "-cert", &leaf, "-cert_chain", &intermediates, "-key", &key])
            .args(["-cipher", certificate_openssl_cipher(suite), "-accept", &format!("127.0.0.1:{port}")]);
        if resume != Resume::ByTicket {
            theirs.arg("-no_ticket");
        }
        let theirs_guard = start_peer(theirs, false, "ACCEPT")?;
        let theirs_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

        let (ours_session, theirs_session) = match resume {
            Resume::Full => (None, None),
            _ => (
                Some(runtime.block_on(loopback_session(ours_addr, &client_config))?),
                Some(
                    runtime
                        .block_on(loopback_session(theirs_addr, &client_config))
                        .context("a session from openssl s_server")?,
                ),
            ),
        };
        let servers = [(ours_addr, ours_session.as_ref()), (theirs_addr, theirs_session.as_ref())];
        let (runs, slice) = (plan.certificate_runs, plan.certificate_loopback_slice);
        let rates = loopback_rates(&runtime, servers, &client_config, runs, slice)?;
        drop((ours_guard, theirs_guard));
        println!("   {label:<40} {rates}");
    }
    Ok(())
}

fn certificate_openssl_cipher(suite: CipherSuite) -> &'static str {
    match suite {
        CipherSuite::EcdheEcdsaWithAes128Ccm8 => "ECDHE-ECDSA-AES128-CCM8",
        CipherSuite::EcdheEcdsaWithAes128GcmSha256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::EcdheRsaWithAes128GcmSha256 => "ECDHE-RSA-AES128-GCM-SHA256",
        _ => "",
    }
}
