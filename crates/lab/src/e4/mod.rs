//! E4: handshake caching (seed 003, BiTHaC) over DTLS 1.2, beside the paper's TLS 1.2 figures.
//!
//! Every handshake is our engine's, on a lossless zero-delay path ([`handshake_once`]): vanilla, RFC
//! 7924, BiTHaC, BiTHaC with the validated-key cache, resumption by session ID and by ticket,
//! and BiTHaC with resumption, for the chains of [`Chains`] at MTU 127, 576 and 1500. The bytes
//! are counted per layer and per message and recounted with TLS framing ([`bytes`]); they are
//! deterministic. The CPU time per role is measured (the thread's CPU time in each side's engine
//! calls, medians), so it varies from run to run. [`mac`] runs the same handshakes over a TSCH hop and X-MAC in
//! the simulator, which the paper did not.

pub mod bytes;
pub(crate) mod chains;
pub mod dtls13;
pub(crate) mod exchange;
pub mod mac;

// The chains and the one-handshake exchange are E4's public API, for whoever measures the same
// handshakes (`fastshake bench caching` times them beside OpenSSL):
// - [`chain_set`] makes the certified keys and trust anchors of a [`Chains`] once per process,
//   and [`pems`] writes the same chains as PEM (for another stack);
// - [`configs`] turns a chain set and a [`Config`] (vanilla, RFC 7924, BiTHaC, ...) into the
//   client's and the server's configuration, and [`seed_bytes`] derives the engines' seeds;
// - [`handshake_once`] runs one more handshake against a server endpoint on a lossless path and
//   returns both summaries and each role's CPU time.
pub use chains::{chain_set, pems, ChainPems, ChainSet, Chains};
pub use exchange::{configs, handshake_once, seed_bytes, ClientStart, Config};

use crate::report::results::{print_figures, Figure};
use bytes::{Layers, Messages, TlsRecount};
use fastshake_pki::{ChainUsage, ValidatedKeyCache};
use serde::Serialize;

/// The paper's link MTUs: IEEE 802.15.4, the IPv4 minimum, Ethernet.
pub const MTUS: [usize; 3] = [127, 576, 1500];
/// The paper's processing gain with the cache, RSA and ECC chains (§V-B), percent.
pub const PAPER_CPU_RSA: (f64, f64) = (3.3, 4.9);
pub const PAPER_CPU_ECC: (f64, f64) = (5.5, 8.6);
/// The paper's memory per cache entry (§V-C).
pub const PAPER_ENTRY_RSA: usize = 420;
pub const PAPER_ENTRY_ECC: usize = 241;
/// Seed 003's target here: BiTHaC at most this share of the vanilla bytes (RSA-2048, MTU 1500).
pub const TARGET_BITHAC_SHARE: f64 = 35.0;
/// BiTHaC in DTLS 1.3 leaves at most this share of vanilla (RSA-2048 x3 mutual, MTU 1500); the
/// paper's TLS 1.3 leaves 45.11 %.
pub const TARGET_BITHAC13_SHARE: f64 = 40.0;
/// A figure further than this from the paper's gets a reason.
pub const TOLERANCE_PCT: f64 = 25.0;

/// What `fastshake lab e4` runs and how it prints it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Print JSON instead of tables.
    pub json: bool,
    /// Repetitions of the CPU measurement (medians); 0 skips it.
    pub cpu_runs: usize,
    /// Seeds of the TSCH, X-MAC and beacon runs (means); 0 skips them.
    pub mac_seeds: u64,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub chains: Vec<Chains>,
    /// Chains run for the byte figures only.
    pub byte_only_chains: Vec<Chains>,
    pub mtus: Vec<usize>,
    /// Chains run in DTLS 1.3 too ([`dtls13`]: at its MTUs, with its groups).
    pub dtls13_chains: Vec<Chains>,
    pub cpu_runs: usize,
    pub mac_seeds: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            chains: Chains::ALL.to_vec(),
            byte_only_chains: Chains::OTHER_READING.to_vec(),
            mtus: MTUS.to_vec(),
            dtls13_chains: vec![Chains::Rsa2048, Chains::P256],
            cpu_runs: 15,
            mac_seeds: 3,
        }
    }
}

/// The largest DTLS datagram at a link MTU: IPv4 (20 B) and UDP (8 B) headers off.
pub fn dtls_mtu(link_mtu: usize) -> usize {
    link_mtu - bytes::IPV4_HEADER - bytes::UDP_HEADER
}

/// One configuration, one chain, one MTU.
#[derive(Clone, Debug, Serialize)]
pub struct ByteRow {
    pub chains: Chains,
    pub config: Config,
    pub mtu: usize,
    /// The handshake alone, and the whole exchange (handshake, a message each way, close).
    pub handshake: Layers,
    pub exchange: Layers,
    pub tls_handshake: TlsRecount,
    pub tls_exchange: TlsRecount,
    pub messages: Messages,
    /// TLS over TCP/IPv4 as modelled by [`bytes::tcp_ip_estimate`] (whole exchange).
    pub tcp_ip_estimate: usize,
    /// Shares of the vanilla row's bytes, percent (whole exchange).
    pub dtls_pct: f64,
    pub ip_pct: f64,
    pub tls_pct: f64,
    pub tcp_ip_pct: f64,
    pub frames_pct: f64,
    /// What the measured handshake took from caches.
    pub server_certificate_cached: bool,
    pub certificate_request_cached: bool,
    pub client_certificate_cached: bool,
    pub client_skipped_validation: bool,
    pub server_skipped_validation: bool,
    pub resumed: bool,
}

/// Our figure beside the paper's, and what to make of it.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub figure: String,
    pub paper: String,
    pub ours: String,
    /// Percent from the paper's figure (its nearer end for a range); 0 inside a range.
    pub difference_pct: f64,
    pub verdict: &'static str,
    pub reason: String,
}

fn compare(figure: &str, paper: (f64, f64), ours: f64, unit: &str, reason: &str) -> Comparison {
    let (lo, hi) = paper;
    let nearest = if ours < lo {
        lo
    } else if ours > hi {
        hi
    } else {
        ours
    };
    let difference_pct = if nearest == 0.0 { 0.0 } else { 100.0 * (ours - nearest) / nearest };
    let verdict = if difference_pct == 0.0 {
        "matches"
    } else if difference_pct.abs() <= TOLERANCE_PCT {
        "close"
    } else {
        "differs"
    };
    let fmt = |v: f64| if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.2}") };
    Comparison {
        figure: figure.into(),
        paper: if lo == hi { format!("{}{unit}", fmt(lo)) } else { format!("{}-{}{unit}", fmt(lo), fmt(hi)) },
        ours: format!("{}{unit}", fmt((ours * 100.0).round() / 100.0)),
        difference_pct,
        verdict,
        reason: if verdict == "differs" { reason.into() } else { String::new() },
    }
}

/// CPU time of the handshake per role, medians over runs, MTU 1500.
#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    pub chains: Chains,
    pub config: Config,
    pub runs: usize,
    pub client_us: f64,
    pub server_us: f64,
    pub client_skipped_validation: bool,
    pub server_skipped_validation: bool,
}

/// Memory of one cache entry of each kind, for one chain.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryRow {
    pub chains: Chains,
    /// `ValidatedKeyCache` entry for the server's chain, and for the client's.
    pub key_cache_server_entry: usize,
    pub key_cache_client_entry: usize,
    /// The server's client-certificate cache, per entry (the chain's DER and its record).
    pub client_chain_entry: usize,
    /// The client's `CachedServer` (RFC 7924 Certificate and CertificateRequest, ticket, name).
    pub cached_info_entry: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub chains: Vec<ChainInfo>,
    pub message_len: usize,
    pub bytes: Vec<ByteRow>,
    pub comparisons: Vec<Comparison>,
    pub cpu: Vec<CpuRow>,
    pub memory: Vec<MemoryRow>,
    pub mac: Option<mac::MacSection>,
    /// The same exchange in DTLS 1.3: compression and resumption, per group.
    pub dtls13: Vec<dtls13::Row13>,
    pub target_bithac_share: f64,
    pub bithac_share: Option<f64>,
    pub target_met: Option<bool>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ChainInfo {
    pub chains: Chains,
    pub name: &'static str,
    pub suite: String,
    pub server_chain_der: usize,
    pub client_chain_der: usize,
}

fn pct(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The byte rows of one chain at one MTU, vanilla first.
pub fn byte_rows(chains: Chains, mtu: usize) -> anyhow::Result<Vec<ByteRow>> {
    let set = chain_set(chains)?;
    let mut rows: Vec<ByteRow> = Vec::new();
    for config in Config::ALL {
        let ex = exchange::run(&set, chains, config, dtls_mtu(mtu), 7)?;
        let handshake = Layers::of(&ex.handshake)?;
        let mut whole = handshake;
        whole.add(&Layers::of(&ex.after)?);
        let all: Vec<_> = ex.handshake.iter().chain(&ex.after).cloned().collect();
        let (tls_exchange, messages) = bytes::recount(&all)?;
        let (tls_handshake, _) = bytes::recount(&ex.handshake)?;
        let tcp_ip_estimate = bytes::tcp_ip_estimate(&tls_exchange.flights, mtu);
        let mut row = ByteRow {
            chains,
            config,
            mtu,
            handshake,
            exchange: whole,
            tls_handshake,
            tls_exchange,
            messages,
            tcp_ip_estimate,
            dtls_pct: 100.0,
            ip_pct: 100.0,
            tls_pct: 100.0,
            tcp_ip_pct: 100.0,
            frames_pct: 100.0,
            server_certificate_cached: ex.client.from_cache.server_certificate,
            certificate_request_cached: ex.client.from_cache.certificate_request,
            client_certificate_cached: ex.server.from_cache.client_certificate,
            client_skipped_validation: ex.client.chain_validation_skipped,
            server_skipped_validation: ex.server.chain_validation_skipped,
            resumed: ex.client.resumed && ex.server.resumed,
        };
        if let Some(v) = rows.first() {
            row.dtls_pct = pct(row.exchange.dtls, v.exchange.dtls);
            row.ip_pct = pct(row.exchange.ip_total(), v.exchange.ip_total());
            row.tls_pct = pct(row.tls_exchange.tls_bytes, v.tls_exchange.tls_bytes);
            row.tcp_ip_pct = pct(row.tcp_ip_estimate, v.tcp_ip_estimate);
            row.frames_pct = pct(row.exchange.psdu_bytes_802154, v.exchange.psdu_bytes_802154);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Medians of the handshake's CPU time per role: vanilla, BiTHaC, BiTHaC + key cache.
pub fn cpu_rows(chains: Chains, runs: usize) -> anyhow::Result<Vec<CpuRow>> {
    let set = chain_set(chains)?;
    let configs = [Config::Vanilla, Config::Bithac, Config::BithacKeyCache];
    let mut samples: Vec<(Vec<f64>, Vec<f64>, bool, bool)> = vec![Default::default(); configs.len()];
    // Interleaved, so that machine noise hits every configuration alike.
    for run in 0..runs {
        for (i, &config) in configs.iter().enumerate() {
            let ex = exchange::run(&set, chains, config, dtls_mtu(1500), 100 + run as u64)?;
            samples[i].0.push(ex.client_cpu.as_secs_f64() * 1e6);
            samples[i].1.push(ex.server_cpu.as_secs_f64() * 1e6);
            samples[i].2 = ex.client.chain_validation_skipped;
            samples[i].3 = ex.server.chain_validation_skipped;
        }
    }
    Ok(configs
        .iter()
        .zip(samples)
        .map(|(&config, (c, s, cs, ss))| CpuRow {
            chains,
            config,
            runs,
            client_us: median(c),
            server_us: median(s),
            client_skipped_validation: cs,
            server_skipped_validation: ss,
        })
        .collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Entry sizes of every cache, for one chain.
pub fn memory_row(chains: Chains) -> anyhow::Result<MemoryRow> {
    let set = chain_set(chains)?;
    let now = set.wall_clock.unix_secs;
    let cache = ValidatedKeyCache::new(4);
    cache.verify_server_chain(&set.server.chain, &set.server_anchors, now, Some("localhost"))?;
    cache.verify_client_chain(&set.client.chain, &set.client_anchors, now)?;
    let entry = |usage, name, chain: &[fastshake_pki::CertDer]| {
        cache.peek(usage, name, chain).map(|e| e.approx_size()).ok_or_else(|| anyhow::anyhow!("no entry"))
    };
    let key_cache_server_entry = entry(ChainUsage::ServerAuth, Some("localhost"), &set.server.chain)?;
    let key_cache_client_entry = entry(ChainUsage::ClientAuth, None, &set.client.chain)?;
    let ex = exchange::run(&set, chains, Config::Bithac, dtls_mtu(1500), 9)?;
    let (entries, bytes) = ex.client_chain_cache;
    anyhow::ensure!(entries == 1, "the server cached {entries} client chains after one handshake");
    Ok(MemoryRow {
        chains,
        key_cache_server_entry,
        key_cache_client_entry,
        client_chain_entry: bytes,
        cached_info_entry: ex.cached_server_bytes,
    })
}

fn row(rows: &[ByteRow], chains: Chains, config: Config, mtu: usize) -> Option<&ByteRow> {
    rows.iter().find(|r| r.chains == chains && r.config == config && r.mtu == mtu)
}

/// The paper's all-layer and TLS-layer byte figures beside ours for one reading of its chains:
/// `rsa` (RSA-2048 both sides) and `rsa4096` (the 4096-bit server chain).
fn byte_comparisons(rows: &[ByteRow], rsa: Chains, rsa4096: Chains, out: &mut Vec<Comparison>) {
    let tag = if rsa == Chains::Rsa2048 { "x3" } else { "x2" };
    let mtus: Vec<usize> =
        MTUS.iter().copied().filter(|&m| row(rows, rsa, Config::Vanilla, m).is_some()).collect();
    if mtus.is_empty() {
        return;
    }
    // Smallest and largest of `f` over the MTUs.
    let range = |f: &dyn Fn(&ByteRow, &ByteRow) -> f64, config: Config| {
        let v: Vec<f64> = mtus
            .iter()
            .filter_map(|&m| Some(f(row(rows, rsa, config, m)?, row(rows, rsa, Config::Vanilla, m)?)))
            .collect();
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    };
    let fixed_part = "our BiTHaC handshake is about the paper's size (4096-bit row: 1560 B against 1494 B); what \
                      differs is the vanilla chains: sending three certificates per side, ours carry one more \
                      certificate each than the paper's apparently do (compare the x2 rows)";
    let model = "the TCP/IP part is our model, not a capture (no Ethernet, one ACK per flight)";
    let (lo, hi) = range(&|r, _| r.tcp_ip_estimate as f64, Config::Vanilla);
    for (value, which) in [(lo, "largest MTU"), (hi, "smallest MTU")] {
        out.push(compare(
            &format!("{tag}: vanilla total, all layers, {which} (TLS + TCP/IPv4 model)"),
            (6000.0, 11000.0),
            value,
            " B",
            model,
        ));
    }
    let (lo, hi) = range(&|r, v| 100.0 - pct(r.tcp_ip_estimate, v.tcp_ip_estimate), Config::Rfc7924);
    out.push(compare(
        &format!("{tag}: RFC 7924 saves, all layers, least over MTUs (TCP/IPv4 model)"),
        (27.58, 31.67),
        lo,
        " %",
        fixed_part,
    ));
    out.push(compare(
        &format!("{tag}: RFC 7924 saves, all layers, most over MTUs (TCP/IPv4 model)"),
        (27.58, 31.67),
        hi,
        " %",
        fixed_part,
    ));
    let (lo, _) =
        range(&|r, v| 100.0 - pct(r.tls_exchange.tls_bytes, v.tls_exchange.tls_bytes), Config::Rfc7924);
    out.push(compare(
        &format!("{tag}: RFC 7924 saves, TLS layer only"),
        (27.58, 31.67),
        lo,
        " %",
        "the TLS layer alone, while the paper's share is of all layers: TCP/IP headers and ACKs, which no cache \
         removes, dilute it",
    ));
    let (lo, hi) = range(&|r, _| r.tcp_ip_pct, Config::Bithac);
    out.push(compare(
        &format!("{tag}: BiTHaC leaves of vanilla, all layers, least (TCP/IPv4 model)"),
        (38.86, 43.25),
        lo,
        " %",
        fixed_part,
    ));
    out.push(compare(
        &format!("{tag}: BiTHaC leaves of vanilla, all layers, most (TCP/IPv4 model)"),
        (38.86, 43.25),
        hi,
        " %",
        fixed_part,
    ));
    let (lo, _) = range(&|r, _| r.tls_pct, Config::Bithac);
    out.push(compare(
        &format!("{tag}: BiTHaC leaves of vanilla, TLS layer only"),
        (38.86, 43.25),
        lo,
        " %",
        "the paper's share is of all layers; TCP/IP headers, the TCP handshake and ACKs do not shrink with caching \
         and raise it (the model lines), and our vanilla chains are larger (x3: one more certificate per side)",
    ));
    let (_, hi) = range(&|r, _| r.ip_pct, Config::Bithac);
    out.push(compare(
        &format!("{tag}: BiTHaC leaves of vanilla, DTLS+UDP+IPv4 (cookie exchange included), most"),
        (38.86, 43.25),
        hi,
        " %",
        "DTLS over UDP has no TCP handshake or ACKs to dilute the saving; its larger headers and the cookie \
         exchange are in both numerator and denominator",
    ));
    let (lo, _) = range(&|r, _| r.tcp_ip_pct, Config::SessionId);
    out.push(compare(
        &format!("{tag}: resumption by session ID leaves of vanilla, least (paper: saves up to 80 %)"),
        (20.0, 20.0),
        lo,
        " %",
        "an abbreviated handshake is about the same size in both; our vanilla is larger, so its share is smaller",
    ));
    if let (Some(v), Some(b)) =
        (row(rows, rsa4096, Config::Vanilla, 1500), row(rows, rsa4096, Config::Bithac, 1500))
    {
        out.push(compare(
            &format!("{tag}: RSA-4096 server chain, vanilla, TLS bytes"),
            (5667.0, 5667.0),
            v.tls_exchange.tls_bytes as f64,
            " B",
            "three certificates per side are one more each than the paper's vanilla carries (see the x2 line)",
        ));
        out.push(compare(
            &format!("{tag}: RSA-4096 server chain, BiTHaC, TLS bytes"),
            (1494.0, 1494.0),
            b.tls_exchange.tls_bytes as f64,
            " B",
            "",
        ));
    }
}

/// Our figures beside the paper's.
fn comparisons(rows: &[ByteRow], cpu: &[CpuRow], memory: &[MemoryRow]) -> Vec<Comparison> {
    let mut out = Vec::new();
    byte_comparisons(rows, Chains::Rsa2048, Chains::Rsa4096Server, &mut out);
    byte_comparisons(rows, Chains::Rsa2048Two, Chains::Rsa4096ServerTwo, &mut out);
    let rsa = Chains::Rsa2048;
    if let (Some(v), Some(b), Some(f)) = (
        row(rows, rsa, Config::Vanilla, 1500),
        row(rows, rsa, Config::Bithac, 1500),
        row(rows, rsa, Config::FirstOffer, 1500),
    ) {
        let m = (&v.messages, &b.messages, &f.messages);
        out.push(compare(
            "server Certificate, cached (TLS form)",
            (42.0, 42.0),
            m.1.server_certificate as f64,
            " B",
            "",
        ));
        out.push(compare(
            "client Certificate, cached (TLS form)",
            (9.0, 9.0),
            m.1.client_certificate as f64,
            " B",
            "",
        ));
        out.push(compare(
            "CertificateRequest, vanilla (TLS form)",
            (45.0, 45.0),
            m.0.certificate_request as f64,
            " B",
            "our certificate_authorities names the client chain's root (a DN of some 70 B); the paper's 36-byte body \
             has room for no such name",
        ));
        out.push(compare(
            "CertificateRequest, cached (TLS form)",
            (42.0, 42.0),
            m.1.certificate_request as f64,
            " B",
            "",
        ));
        let hellos = |x: &Messages| (x.client_hello + x.server_hello) as f64;
        out.push(compare("hellos' growth with caching", (111.0, 111.0), hellos(m.1) - hellos(m.0), " B", ""));
        out.push(compare("first handshake's signalling", (8.0, 8.0), hellos(m.2) - hellos(m.0), " B", ""));
    }
    for c in cpu.iter().filter(|c| c.config == Config::BithacKeyCache) {
        let Some(without) = cpu.iter().find(|x| x.chains == c.chains && x.config == Config::Bithac) else {
            continue;
        };
        let paper = if c.chains == Chains::P256 { PAPER_CPU_ECC } else { PAPER_CPU_RSA };
        for (role, with_us, without_us) in
            [("client", c.client_us, without.client_us), ("server", c.server_us, without.server_us)]
        {
            out.push(compare(
                &format!("{}: {role} CPU saved by the key cache (measured)", c.chains.name()),
                paper,
                100.0 * (1.0 - with_us / without_us),
                " %",
                "engine time per handshake on this machine, no network wait: validation (two or three signature \
                 checks and path building) is a far larger share of it than of the paper's end-to-end time on a \
                 1 GHz Pi Zero W; and where the server signs with RSA-4096 the signature dwarfs everything",
            ));
        }
    }
    for m in memory.iter().filter(|m| m.chains != Chains::Rsa4096Server) {
        let paper = if m.chains == Chains::P256 { PAPER_ENTRY_ECC } else { PAPER_ENTRY_RSA };
        let mut c = compare(
            &format!("{}: key-cache entry (server chain)", m.chains.name()),
            (paper as f64, paper as f64),
            m.key_cache_server_entry as f64,
            " B",
            "",
        );
        // The paper's figure is a ceiling to stay under, not a value to match.
        if m.key_cache_server_entry < paper {
            c.verdict = "below (target met)";
        } else {
            c.verdict = "NOT below";
            c.reason = "the entry must stay below the paper's".into();
        }
        out.push(c);
    }
    out
}

/// What the report says of one chain type: its name, suite and the DER bytes each side sends.
fn chain_info(chains: Chains) -> anyhow::Result<ChainInfo> {
    let (server_chain_der, client_chain_der) = chain_set(chains)?.der_bytes();
    Ok(ChainInfo {
        chains,
        name: chains.name(),
        suite: chains.suite().to_string(),
        server_chain_der,
        client_chain_der,
    })
}

/// The whole experiment.
pub fn experiment(options: &Options) -> anyhow::Result<Report> {
    experiment_stepwise(options, |_| {})
}

/// The steps [`experiment_stepwise`] reports: each chain set, and the MAC part if asked.
pub fn steps(options: &Options) -> u64 {
    (options.chains.len()
        + options.byte_only_chains.len()
        + options.dtls13_chains.len()
        + usize::from(options.mac_seeds > 0)) as u64
}

/// [`experiment`], calling `step` as each of its [`steps`] begins.
pub fn experiment_stepwise(options: &Options, mut step: impl FnMut(String)) -> anyhow::Result<Report> {
    let mut infos = Vec::new();
    let mut rows = Vec::new();
    let mut cpu = Vec::new();
    let mut memory = Vec::new();
    for &chains in &options.chains {
        step(format!("{}: bytes per MTU, CPU, cache entries", chains.name()));
        infos.push(chain_info(chains)?);
        for &mtu in &options.mtus {
            rows.extend(byte_rows(chains, mtu)?);
        }
        if options.cpu_runs > 0 {
            cpu.extend(cpu_rows(chains, options.cpu_runs)?);
        }
        memory.push(memory_row(chains)?);
    }
    for &chains in &options.byte_only_chains {
        step(format!("{}: bytes per MTU", chains.name()));
        infos.push(chain_info(chains)?);
        for &mtu in &options.mtus {
            rows.extend(byte_rows(chains, mtu)?);
        }
    }
    let mut rows13 = Vec::new();
    for &chains in &options.dtls13_chains {
        step(format!("{}: DTLS 1.3, compression and resumption", chains.name()));
        for group in dtls13::GROUPS {
            for mtu in dtls13::MTUS {
                rows13.extend(dtls13::rows(chains, group, mtu)?);
            }
        }
    }
    let mac = if options.mac_seeds > 0 {
        step("over TSCH, X-MAC and beacon".into());
        Some(mac::run(&options.chains, options.mac_seeds)?)
    } else {
        None
    };
    let comparisons = comparisons(&rows, &cpu, &memory);
    let bithac_share = row(&rows, Chains::Rsa2048, Config::Bithac, 1500).map(|r| r.ip_pct);
    Ok(Report {
        chains: infos,
        message_len: exchange::MESSAGE_LEN,
        bytes: rows,
        comparisons,
        cpu,
        memory,
        mac,
        dtls13: rows13,
        target_bithac_share: TARGET_BITHAC_SHARE,
        bithac_share,
        target_met: bithac_share.map(|s| s <= TARGET_BITHAC_SHARE),
    })
}

/// The paper's BiTHaC share of vanilla (§V-A, all layers), percent, and its RFC 7924 savings.
pub const PAPER_BITHAC_SHARE: f64 = 38.86;
pub const PAPER_RFC7924_SAVES: (f64, f64) = (27.58, 31.67);

/// The headline figures beside the paper's: the byte shares at MTU 1500 (RSA-2048, three
/// certificates sent per side), the cached message sizes, the key-cache entries and the CPU
/// saving, each from the report's own rows.
pub fn figures(r: &Report) -> Vec<Figure> {
    let mut figures = Vec::new();
    let source = "seed 003 §V (TLS 1.2 over TCP, wolfSSL)";
    let rsa = Chains::Rsa2048;
    let get = |config| row(&r.bytes, rsa, config, 1500);
    if let (Some(v), Some(b), Some(c)) = (get(Config::Vanilla), get(Config::Bithac), get(Config::Rfc7924)) {
        figures.push(
            Figure::simulated("BiTHaC share of vanilla, DTLS+UDP+IPv4, RSA-2048, MTU 1500", "%", b.ip_pct)
                .against(PAPER_BITHAC_SHARE, source)
                .met_if(b.ip_pct <= TARGET_BITHAC_SHARE, format!("≤ {TARGET_BITHAC_SHARE:.0} % of vanilla"))
                .note(
                    "the paper's share is of all layers of a TCP capture (headers and ACKs that caching does not \
                     shrink) and its vanilla chains are one certificate shorter per side; DTLS over UDP has neither",
                ),
        );
        figures.push(
            Figure::simulated(
                "BiTHaC share of vanilla, TLS over TCP/IPv4 model, RSA-2048, MTU 1500",
                "%",
                b.tcp_ip_pct,
            )
            .against(PAPER_BITHAC_SHARE, source)
            .within(TOLERANCE_PCT / 100.0)
            .note("the same exchange recounted with TLS framing over a TCP/IPv4 model (one ACK per flight)"),
        );
        let (lo, hi) = PAPER_RFC7924_SAVES;
        for (name, saved) in [
            ("RFC 7924 saves, DTLS+UDP+IPv4, RSA-2048, MTU 1500", 100.0 - c.ip_pct),
            ("RFC 7924 saves, TLS over TCP/IPv4 model, RSA-2048, MTU 1500", 100.0 - c.tcp_ip_pct),
        ] {
            let inside =
                (lo * (1.0 - TOLERANCE_PCT / 100.0)..=hi * (1.0 + TOLERANCE_PCT / 100.0)).contains(&saved);
            figures.push(
                Figure::simulated(name, "%", saved)
                    .against(lo, format!("{source}: {lo}-{hi} %"))
                    .met_if(inside, format!("within {TOLERANCE_PCT:.0} % of the paper's range"))
                    .note(
                        "only the server's Certificate and CertificateRequest shrink; our chains are larger",
                    ),
            );
        }
        let hellos = |m: &Messages| (m.client_hello + m.server_hello) as f64;
        let mut sizes = vec![
            ("server Certificate, cached (TLS form)", 42.0, b.messages.server_certificate as f64),
            ("client Certificate, cached (TLS form)", 9.0, b.messages.client_certificate as f64),
            ("CertificateRequest, cached (TLS form)", 42.0, b.messages.certificate_request as f64),
            ("hellos' growth with caching", 111.0, hellos(&b.messages) - hellos(&v.messages)),
        ];
        if let Some(f) = get(Config::FirstOffer) {
            sizes.push(("first handshake's signalling", 8.0, hellos(&f.messages) - hellos(&v.messages)));
        }
        for (name, paper, ours) in sizes {
            let mut figure = Figure::simulated(name, "B", ours)
                .against(paper, source)
                .met_if(ours == paper, "the paper's size to the byte");
            if ours != paper {
                figure = figure
                    .note("differs from the paper's; the extensions behind it are not yet accounted for");
            }
            figures.push(figure);
        }
    }
    for m in r.memory.iter().filter(|m| matches!(m.chains, Chains::Rsa2048 | Chains::P256)) {
        let paper = if m.chains == Chains::P256 { PAPER_ENTRY_ECC } else { PAPER_ENTRY_RSA };
        figures.push(
            Figure::simulated(
                format!("{}: key-cache entry (server chain)", m.chains.name()),
                "B",
                m.key_cache_server_entry as f64,
            )
            .against(paper as f64, "seed 003 §V-C")
            .met_if(m.key_cache_server_entry < paper, "below the paper's entry")
            .note("ValidatedKeyCache::approx_size: leaf key, validity window, anchor, map slot"),
        );
    }
    for c in r.cpu.iter().filter(|c| c.config == Config::BithacKeyCache) {
        let Some(without) = r.cpu.iter().find(|x| x.chains == c.chains && x.config == Config::Bithac) else {
            continue;
        };
        let (lo, hi) = if c.chains == Chains::P256 { PAPER_CPU_ECC } else { PAPER_CPU_RSA };
        for (role, with_us, without_us) in
            [("client", c.client_us, without.client_us), ("server", c.server_us, without.server_us)]
        {
            let saved = 100.0 * (1.0 - with_us / without_us);
            figures.push(
                Figure::measured(
                    format!("{}: {role} CPU saved by the key cache", c.chains.name()),
                    "%",
                    Some(saved),
                    c.runs as u32,
                )
                .against(lo, format!("seed 003 §V-B: {lo}-{hi} %"))
                .met_if(saved >= lo, "at least the paper's lower end")
                .note(
                    "engine CPU time per handshake, no network wait: validation is a far larger share of it than of \
                     the paper's end-to-end time on a Pi Zero W",
                ),
            );
        }
    }
    figures.extend(figures13(r));
    figures
}

/// The DTLS 1.3 rows beside seed 003's TLS 1.3 figures (Fig. 5) and the hybrid key share's size.
fn figures13(r: &Report) -> Vec<Figure> {
    use dtls13::{best_compression, find, Variant13};
    use fastshake_dtls::NamedGroup;
    let mut figures = Vec::new();
    let source = "seed 003 Fig. 5 (TLS 1.3 over TCP, wolfSSL, MTU 1500)";
    let rsa = Chains::Rsa2048;
    let x25519 = NamedGroup::X25519;
    if let Some(t) = find(&r.dtls13, rsa, x25519, 1500, Variant13::Ticket) {
        figures.push(
            Figure::simulated("DTLS 1.3 ticket resumption share of vanilla, RSA-2048, MTU 1500", "%", t.ip_pct)
                .against(dtls13::PAPER_TICKET13_SHARE, source)
                .within(TOLERANCE_PCT / 100.0)
                .note(
                    "the paper's share (452 B below BiTHaC's 45.11 %) is of all layers of a TCP capture, which \
                     resumption does not shrink; ours is DTLS+UDP+IPv4 with the cookie exchange, and the resumed \
                     handshake keeps its x25519 key share (psk_dhe_ke)",
                ),
        );
    }
    let bithac = find(&r.dtls13, rsa, x25519, 1500, Variant13::Bithac);
    if let Some(b) = bithac {
        figures.push(
            Figure::simulated("DTLS 1.3 BiTHaC share of vanilla, DTLS+UDP+IPv4, RSA-2048, MTU 1500", "%", b.ip_pct)
                .against(dtls13::PAPER_BITHAC13_SHARE, source)
                .met_if(b.ip_pct <= TARGET_BITHAC13_SHARE, format!("at most {TARGET_BITHAC13_SHARE:.0} % of vanilla"))
                .note(
                    "as in 1.2 (27.0 % against 38.9 %): the paper's share is of a TCP capture, whose TCP handshake, \
                     ACKs and record headers caching cannot shrink, and our chains are one certificate longer per side; \
                     an abbreviated Certificate is 19 B, one zero-length entry per certificate",
                ),
        );
    }
    if let (Some(b), Some(c)) = (bithac, best_compression(&r.dtls13, rsa, x25519, 1500)) {
        figures.push(
            Figure::simulated(
                format!("DTLS 1.3 BiTHaC bytes against the best compression ({}), RSA-2048, MTU 1500", c.variant.name()),
                "%",
                pct(b.exchange.ip_total(), c.exchange.ip_total()),
            )
            .met_if(b.exchange.ip_total() < c.exchange.ip_total(), "BiTHaC smaller than the best compression")
            .note(format!(
                "compression leaves {:.1} % of vanilla: it shrinks the names and structure of a chain, not its keys \
                 and signatures; caching leaves the chains out",
                c.ip_pct
            )),
        );
        let zstd = fastshake_dtls::CompressionAlgorithm::Zstd;
        if let Some(both) = find(&r.dtls13, rsa, x25519, 1500, Variant13::BithacCompressed(zstd)) {
            let added = both.exchange.ip_total() as f64 - b.exchange.ip_total() as f64;
            figures.push(
                Figure::simulated("DTLS 1.3 BiTHaC + zstd beside BiTHaC alone, both chains cached, RSA-2048", "B", added)
                    .note(
                        "with both chains cached nothing is left to compress: the row pays the compress_certificate \
                         offer (in both ClientHellos and the CertificateRequest) and nothing else",
                    ),
            );
        }
        if let (Some(alone), Some(both)) = (
            find(&r.dtls13, rsa, x25519, 1500, Variant13::BithacOtherServer),
            find(&r.dtls13, rsa, x25519, 1500, Variant13::BithacOtherServerCompressed(zstd)),
        ) {
            let zstd_row = find(&r.dtls13, rsa, x25519, 1500, Variant13::Compressed(zstd));
            let smallest = zstd_row
                .map_or(alone.exchange.ip_total(), |z| z.exchange.ip_total().min(alone.exchange.ip_total()));
            figures.push(
                Figure::simulated(
                    "DTLS 1.3 BiTHaC + zstd at another server (client chain not cached there), share of vanilla, RSA-2048",
                    "%",
                    both.ip_pct,
                )
                .met_if(both.exchange.ip_total() < smallest, "BiTHaC + compression smaller than BiTHaC and than compression")
                .note(format!(
                    "where a chain still travels the two combine: the server's chain abbreviated, the client's \
                     compressed; BiTHaC alone leaves {:.1} % there, zstd alone {}",
                    alone.ip_pct,
                    zstd_row.map_or("—".to_string(), |z| format!("{:.1} %", z.ip_pct))
                )),
            );
        }
    }
    if let (Some(b), Some(t)) = (bithac, find(&r.dtls13, rsa, x25519, 1500, Variant13::Ticket)) {
        let below = b.exchange.ip_total() as f64 - t.exchange.ip_total() as f64;
        figures.push(
            Figure::simulated("DTLS 1.3 ticket resumption below BiTHaC, RSA-2048, MTU 1500", "B", below)
                .against(dtls13::PAPER_TICKET13_BELOW_BITHAC, source)
                .note(format!(
                    "resumption saves both CertificateVerify signatures (2 x 256 B of RSA) but, here, the server issues a \
                     fresh single-use ticket after every resumption (a NewSessionTicket and its ACK: {} datagrams \
                     against BiTHaC's {}), and the ClientHello carries the ticket and its binder twice around the cookie \
                     exchange; with P-256 chains BiTHaC is the smaller of the two",
                    t.handshake.datagrams, b.handshake.datagrams
                )),
        );
    }
    for chains in [rsa, Chains::P256] {
        let (Some(v), Some(h)) = (
            find(&r.dtls13, chains, x25519, 1500, Variant13::Vanilla),
            find(&r.dtls13, chains, NamedGroup::X25519MlKem768, 1500, Variant13::Vanilla),
        ) else {
            continue;
        };
        // ML-KEM-768: a 1,184-byte encapsulation key out, a 1,088-byte ciphertext back, each beside
        // the 32 bytes x25519 sends anyway (draft-ietf-tls-ecdhe-mlkem).
        let formula = (1184 + 1088) as f64;
        let added = h.exchange.ip_total() as f64 - v.exchange.ip_total() as f64;
        figures.push(
            Figure::simulated(format!("X25519MLKEM768 adds to a DTLS 1.3 handshake, {}, MTU 1500", chains.name()), "B", added)
                .against(formula, "ML-KEM-768 key and ciphertext sizes (FIPS 203)")
                .note(
                    "the rest is the datagrams and fragment headers the larger flights need; the first ClientHello \
                     carries no share (the server's cookie comes first), so nothing is sent twice",
                ),
        );
    }
    figures
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { json: false, cpu_runs: 15, mac_seeds: 3 }
    }
}

/// `fastshake lab e4`: runs the experiment and prints the tables (or JSON).
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    if cfg!(debug_assertions) && !args.json {
        eprintln!("note: a debug build; the CPU figures are only meaningful from a release build");
    }
    let options = Options { cpu_runs: args.cpu_runs, mac_seeds: args.mac_seeds, ..Options::default() };
    let report = experiment(&options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
        println!();
        print_figures("E4 against seed 003", &figures(&report));
    }
    Ok(())
}

/// Why BiTHaC leaves about 22 % of the vanilla bytes here and 38.9 % in the paper, step by step
/// from our own rows (RSA-2048, MTU 1500).
fn print_why(r: &Report) {
    let get = |chains, config| row(&r.bytes, chains, config, 1500);
    let (Some(v3), Some(b3), Some(b2)) = (
        get(Chains::Rsa2048, Config::Vanilla),
        get(Chains::Rsa2048, Config::Bithac),
        get(Chains::Rsa2048Two, Config::Bithac),
    ) else {
        return;
    };
    println!("  Why BiTHaC leaves ~22 % of vanilla here (the caching_bytes example) and 38.9 % in the paper, MTU 1500:");
    println!(
        "    DTLS bytes, handshake only (the example's count)            {:>5.1} %",
        pct(b3.handshake.dtls, v3.handshake.dtls)
    );
    println!("    + a message each way and close, DTLS bytes                   {:>5.1} %", b3.dtls_pct);
    println!("    + UDP and IPv4 headers                                        {:>5.1} %", b3.ip_pct);
    println!("    TLS framing instead (no cookie exchange, smaller headers)     {:>5.1} %", b3.tls_pct);
    println!("    + TCP/IPv4 by the model (headers, ACKs, open and close)       {:>5.1} %", b3.tcp_ip_pct);
    println!(
        "    the same with two certificates sent per side (x2)             {:>5.1} %   (TLS layer {:.1} %)",
        b2.tcp_ip_pct, b2.tls_pct
    );
    let tls = |chains, config| get(chains, config).map_or(0, |r| r.tls_exchange.tls_bytes);
    println!("    Not the suite: both are ECDHE with AES-GCM (24 B per protected record), and our BiTHaC handshake is");
    println!(
        "    about the paper's size (RSA-4096 server row: {} B against its 1494 B). What differs is (1) the paper's",
        tls(Chains::Rsa4096Server, Config::Bithac)
    );
    println!("    share is of all layers of a TCP capture, which caching does not shrink, and (2) its vanilla is small:");
    println!(
        "    its 4096-bit vanilla, 5667 B, is what two certificates per side give (ours {} B), not three ({} B),",
        tls(Chains::Rsa4096ServerTwo, Config::Vanilla),
        tls(Chains::Rsa4096Server, Config::Vanilla)
    );
    println!("    so its 'chain of three' most likely counts the root it does not send.");
}

fn flag(b: bool, s: &'static str) -> &'static str {
    if b {
        s
    } else {
        ""
    }
}

fn print(r: &Report) {
    println!(
        "E4 / handshake caching (seed 003, BiTHaC) over DTLS 1.2, mutual authentication, each side sending a"
    );
    println!(
        "chain of three (leaf + 2 intermediates, root not sent); a handshake, one {}-byte message each way, close.",
        r.message_len
    );
    println!(
        "Lossless zero-delay path; every byte figure is deterministic (seeded engines, seeded RSA PKIs)."
    );
    for c in &r.chains {
        println!(
            "  {:<40} {}  server chain {} B, client chain {} B of DER",
            c.name, c.suite, c.server_chain_der, c.client_chain_der
        );
    }
    for info in &r.chains {
        for &mtu in &MTUS {
            let rows: Vec<&ByteRow> =
                r.bytes.iter().filter(|b| b.chains == info.chains && b.mtu == mtu).collect();
            if rows.is_empty() {
                continue;
            }
            println!();
            println!(
                "{} at MTU {mtu} (DTLS datagrams up to {} B; IPv4): bytes per layer, whole exchange",
                info.name,
                dtls_mtu(mtu)
            );
            println!(
                "  {:<24} {:>5} {:>7} {:>5} {:>5} {:>7} {:>6} | {:>7} {:>6} | {:>8} {:>6} | {:>6} {:>7} {:>6} | from cache",
                "configuration",
                "dgram",
                "DTLS",
                "UDP",
                "IP",
                "total",
                "of v.",
                "TLS",
                "of v.",
                "TCP/IP~",
                "of v.",
                "15.4fr",
                "PSDU B",
                "of v.",
            );
            for b in rows {
                let e = &b.exchange;
                let cached = [
                    flag(b.server_certificate_cached, "srv-cert "),
                    flag(b.certificate_request_cached, "cert-req "),
                    flag(b.client_certificate_cached, "cli-cert "),
                    flag(b.client_skipped_validation || b.server_skipped_validation, "no-validation "),
                    flag(b.resumed, "resumed"),
                ]
                .concat();
                println!(
                    "  {:<24} {:>5} {:>7} {:>5} {:>5} {:>7} {:>5.1}% | {:>7} {:>5.1}% | {:>8} {:>5.1}% | {:>6} {:>7} {:>5.1}% | {}",
                    b.config.name(),
                    e.datagrams,
                    e.dtls,
                    e.udp,
                    e.ip,
                    e.ip_total(),
                    b.ip_pct,
                    b.tls_exchange.tls_bytes,
                    b.tls_pct,
                    b.tcp_ip_estimate,
                    b.tcp_ip_pct,
                    e.frames_802154,
                    e.psdu_bytes_802154,
                    b.frames_pct,
                    cached
                );
            }
        }
    }
    println!();
    println!(
        "Columns: 'of v.': share of the vanilla row. TLS: the same exchange recounted with TLS 1.2 framing"
    );
    println!("(5-byte records, one per handshake message, 4-byte handshake headers, no HelloVerifyRequest, no cookie).");
    println!("TCP/IP~: that TLS over TCP/IPv4 by a model (segments of MTU-52 B with 52 B of headers, a bare ACK per");
    println!("flight, TCP open and close; no Ethernet), for the paper's all-layer totals. 15.4fr / PSDU B: the same DTLS");
    println!("datagrams as IPv6/UDP over one IEEE 802.15.4 hop, 6LoWPAN-compressed and fragmented (127-byte frames).");

    println!();
    println!("Handshake messages in TLS form (record header + handshake header + body), MTU 1500:");
    println!(
        "  {:<40} {:<24} {:>7} {:>7} {:>8} {:>8} {:>8}",
        "chains", "configuration", "CH", "SH", "srv Cert", "cli Cert", "CertReq"
    );
    for b in r.bytes.iter().filter(|b| b.mtu == 1500) {
        let m = &b.messages;
        println!(
            "  {:<40} {:<24} {:>7} {:>7} {:>8} {:>8} {:>8}",
            b.chains.name(),
            b.config.name(),
            m.client_hello,
            m.server_hello,
            m.server_certificate,
            m.client_certificate,
            m.certificate_request
        );
    }

    println!();
    println!(
        "TLS recount check (whole exchange): DTLS bytes - TLS bytes = 13 x DTLS records + 12 x fragments"
    );
    println!("+ cookie exchange - 5 x TLS records - 4 x TLS messages, for every row:");
    let all_ok = r.bytes.iter().all(|b| {
        b.tls_exchange.dtls_bytes as i64 - b.tls_exchange.tls_bytes as i64
            == b.tls_exchange.explained_difference()
    });
    println!("  {}", if all_ok { "holds for every row" } else { "DOES NOT HOLD for some row" });
    if let Some(v) =
        r.bytes.iter().find(|b| b.chains == Chains::Rsa2048 && b.mtu == 1500 && b.config == Config::Vanilla)
    {
        let t = &v.tls_exchange;
        println!(
            "  e.g. RSA-2048 vanilla, MTU 1500: {} - {} = {} B: {} records, {} fragments, cookie exchange {} B; {} TLS records",
            t.dtls_bytes,
            t.tls_bytes,
            t.dtls_bytes - t.tls_bytes,
            t.dtls_records,
            t.dtls_fragments,
            t.cookie_exchange,
            t.tls_records
        );
    }

    println!();
    println!("Beside the paper (seed 003, TLS 1.2 over TCP, wolfSSL); verdict 'differs' = more than {TOLERANCE_PCT} % off:");
    for c in &r.comparisons {
        println!(
            "  {:<74} paper {:>13}  ours {:>10}  {:>+7.1}%  {}",
            c.figure, c.paper, c.ours, c.difference_pct, c.verdict
        );
        if !c.reason.is_empty() {
            println!("      why: {}", c.reason);
        }
    }
    print_why(r);
    if let (Some(share), true) = (r.bithac_share, r.target_met.is_some()) {
        println!(
            "  Target: BiTHaC at most {:.0} % of vanilla (RSA-2048 x3 mutual, MTU 1500, DTLS+UDP+IP): {:.1} % — {}",
            r.target_bithac_share,
            share,
            if r.target_met == Some(true) { "met" } else { "NOT met" }
        );
    }

    if !r.cpu.is_empty() {
        println!();
        println!(
            "CPU time of the handshake per role (thread CPU time in the engine calls, cookie exchange included), MEASURED:"
        );
        println!("medians of {} runs on this machine, varying from run to run. Paper: whole handshakes 3.3-4.9 % (RSA),", r.cpu[0].runs);
        println!("5.5-8.6 % (ECC) faster with the cache, end to end on a 1 GHz Raspberry Pi Zero W.");
        println!(
            "  {:<40} {:<20} {:>11} {:>11} {:>16}",
            "chains", "configuration", "client µs", "server µs", "validation skipped"
        );
        for c in &r.cpu {
            println!(
                "  {:<40} {:<20} {:>11.0} {:>11.0} {:>16}",
                c.chains.name(),
                c.config.name(),
                c.client_us,
                c.server_us,
                match (c.client_skipped_validation, c.server_skipped_validation) {
                    (true, true) => "both",
                    (true, false) => "client",
                    (false, true) => "server",
                    (false, false) => "-",
                }
            );
        }
    }

    println!();
    println!("Memory per cache entry (bytes):");
    println!(
        "  {:<40} {:>16} {:>16} {:>18} {:>16} {:>6}",
        "chains", "key cache (srv)", "key cache (cli)", "client-chain cache", "cached_info", "paper"
    );
    for m in &r.memory {
        println!(
            "  {:<40} {:>16} {:>16} {:>18} {:>16} {:>6}",
            m.chains.name(),
            m.key_cache_server_entry,
            m.key_cache_client_entry,
            m.client_chain_entry,
            m.cached_info_entry,
            if m.chains == Chains::P256 { PAPER_ENTRY_ECC } else { PAPER_ENTRY_RSA }
        );
    }
    println!("  key cache: ValidatedKeyCache::approx_size (leaf key bits, window, anchor, map slot); client-chain cache:");
    println!("  the server's entry (chain DER and its record); cached_info: the client's CachedServer (the server's");
    println!("  Certificate and CertificateRequest bodies, the ticket, the name). The paper's figure is the key cache's.");
    if let Some(mac) = &r.mac {
        mac::print(mac);
    }
    if !r.dtls13.is_empty() {
        println!();
        dtls13::print(&r.dtls13);
        println!(
            "  CH / SH: the bodies of the ClientHello the handshake went on (with the cookie) and the ServerHello;"
        );
        println!(
            "  srv cert / cli cert: the Certificate (or CompressedCertificate) body each side sent. The"
        );
        println!("  paper's TLS 1.3 figures (Fig. 5) are among the figures below. BiTHaC: both Certificates abbreviated");
        println!("  (seed 003 §IV-D), after a first handshake that filled both caches.");
    }
}
