//! `fastshake bench caching`: full DTLS handshakes per second with handshake caching (seed 003) —
//! vanilla, BiTHaC (RFC 7924 and the client-certificate ticket), BiTHaC with the validated-key
//! cache — for chains of three RSA-2048 and three P-256 certificates on both sides and a 4096-bit
//! RSA server chain, mutual authentication, and the CPU time per handshake of each role; beside
//! OpenSSL's full handshake of the same chains, measured in the same run. Both sides in memory,
//! one core. Prints medians; asserts nothing.

use crate::handshake::median;
use crate::openssl_anchor::{OpensslPair, PemChain, MTU};
use anyhow::bail;
use fastshake_dtls::{CachedServer, Endpoint};
use fastshake_lab::e4::{
    chain_set, configs, handshake_once, pems, seed_bytes, ChainSet, Chains, ClientStart, Config,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Handshakes per server endpoint before a fresh one (keeps its tables small).
const HANDSHAKES_PER_ENDPOINT: u64 = 500;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    repetitions: crate::Repetitions,
    /// Also write every row (handshakes/s, CPU per role, OpenSSL's rate) as JSON to this file
    /// (what `fastshake lab all` reads).
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

fn openssl_cipher(chains: Chains) -> &'static str {
    match chains {
        Chains::P256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        _ => "ECDHE-RSA-AES128-GCM-SHA256",
    }
}

/// One timed run of `config`: handshakes per second, and the mean CPU time per handshake of the
/// client and of the server (µs; the thread's CPU time in each side's engine calls).
fn engine_run(
    set: &ChainSet,
    chains: Chains,
    config: Config,
    slice: Duration,
    run: u64,
) -> anyhow::Result<(f64, f64, f64)> {
    let (client_config, server_config) = configs(set, chains, config, MTU);
    let server_config = Arc::new(server_config);
    let start = Instant::now();
    let (mut count, mut cpu) = (0u64, [Duration::ZERO; 2]);
    while start.elapsed() < slice {
        let mut server = Endpoint::new(Arc::clone(&server_config), seed_bytes(run, 2))?;
        // The first handshake fills the caches (not counted); each later one takes the ticket
        // the one before it left.
        let mut cached: Option<CachedServer> = None;
        for n in 0..=HANDSHAKES_PER_ENDPOINT {
            let client_start = ClientStart {
                port: 1024 + n as u16,
                seed: run << 32 | n,
                session: None,
                cached: cached.take(),
            };
            let (client, server_summary, spent) =
                handshake_once(&mut server, client_config.clone(), client_start)?;
            if n > 0 {
                let expected = config != Config::Vanilla;
                if client.from_cache.server_certificate != expected
                    || server_summary.from_cache.client_certificate != expected
                {
                    bail!("{}: the caches were not used as configured", config.name());
                }
                count += 1;
                cpu[0] += spent[0];
                cpu[1] += spent[1];
            }
            cached = client.cache_update;
            if n % 16 == 0 && start.elapsed() >= slice {
                break;
            }
        }
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / count.max(1) as f64;
    Ok((count as f64 / start.elapsed().as_secs_f64(), per(cpu[0]), per(cpu[1])))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let runs = args.repetitions.runs_or(1, 5);
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let slice = if args.repetitions.quick { Duration::from_millis(300) } else { Duration::from_millis(1000) };
    println!("fastshake bench caching — handshake caching (seed 003) beside {}", openssl::version::version());
    if cfg!(debug_assertions) {
        println!(
            "WARNING: debug build; run `cargo run --release -p fastshake-bench -- caching` for real figures."
        );
    }
    println!(
        "Full DTLS 1.2 handshakes (cookie exchange, ECDHE, mutual authentication, then close), both sides in memory,"
    );
    println!(
        "one core; median of {runs} runs of {} ms. CPU: thread CPU time per handshake in each side's engine calls.",
        slice.as_millis()
    );
    println!(
        "OpenSSL: the same chains, full handshake, verify peer + host name, cookie exchange, no tickets."
    );
    println!(
        "hs/s is wall-clock (both stacks alike, interleaved): on a shared machine it understates; the CPU columns do not."
    );
    println!(
        "  {:<40} {:<20} {:>10} {:>11} {:>11} {:>12} {:>10}",
        "chains", "configuration", "hs/s", "client µs", "server µs", "OpenSSL hs/s", "ours/OSSL"
    );
    let mut rows = Vec::new();
    for chains in Chains::ALL {
        let set = chain_set(chains)?;
        let pem = pems(chains)?;
        let server =
            PemChain { chain: &pem.server_chain, key: pem.server_key.as_bytes(), root: &pem.server_root };
        let client =
            PemChain { chain: &pem.client_chain, key: pem.client_key.as_bytes(), root: &pem.client_root };
        let anchor = OpensslPair::with_chains(openssl_cipher(chains), &server, Some(&client))?;
        anchor.handshake()?;
        let configs = [Config::Vanilla, Config::Bithac, Config::BithacKeyCache];
        let mut ours: Vec<[Vec<f64>; 3]> = vec![Default::default(); configs.len()];
        let mut theirs = Vec::new();
        // Interleaved so that machine noise hits all alike.
        for run in 0..runs {
            for (i, &config) in configs.iter().enumerate() {
                let (rate, client_us, server_us) = engine_run(&set, chains, config, slice, run as u64)?;
                ours[i][0].push(rate);
                ours[i][1].push(client_us);
                ours[i][2].push(server_us);
            }
            theirs.push(anchor.rate(slice)?);
        }
        let theirs = median(theirs);
        for (config, [rate, client_us, server_us]) in configs.iter().zip(ours) {
            let rate = median(rate);
            let (client_us, server_us) = (median(client_us), median(server_us));
            rows.push(serde_json::json!({
                "chains": chains.name(),
                "configuration": config.name(),
                "handshakes_per_s": rate,
                "client_cpu_us": client_us,
                "server_cpu_us": server_us,
                "openssl_handshakes_per_s": theirs,
            }));
            println!(
                "  {:<40} {:<20} {:>10.0} {:>11.0} {:>11.0} {:>12.0} {:>10.2}",
                chains.name(),
                config.name(),
                rate,
                client_us,
                server_us,
                theirs,
                rate / theirs
            );
        }
    }
    println!("  BiTHaC rows: every handshake is a full one (fresh ECDHE, both sides sign); the server's Certificate");
    println!("  and CertificateRequest come from the client's RFC 7924 cache, the client's chain from the server's");
    println!("  ticket cache; '+ key cache' also skips both chain validations. OpenSSL has neither: its row is the");
    println!("  vanilla anchor. Anchor (paper, seed 003 Fig. 6): 3.3-4.9 % (RSA) and 5.5-8.6 % (ECC) faster");
    println!("  handshakes with the cache, end to end on a 1 GHz Raspberry Pi Zero W.");
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "bench": "caching",
            "quick": args.repetitions.quick,
            "runs": runs,
            "anchor": openssl::version::version(),
            "rows": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
    }
    Ok(())
}
