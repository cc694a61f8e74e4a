//! The DTLS 1.3 rows of `fastshake bench handshake`: engine-only 1.3 handshakes per second
//! beside wolfSSL's DTLS 1.3 in memory (measured by `interop/wolfssl`'s peer program, built
//! here, in the same run), the bytes a handshake puts on the wire in 1.2 and in 1.3, the
//! memory of an established 1.3 session, and record protection in every 1.3 suite beside
//! wolfSSL's.

use crate::handshake::{
    client_addr, engine_handshake, engine_handshake_with, live_heap, median, record_allocations,
    records_per_run, seed, server_growth_per_session, throughput_run, unix_now, verdict, with_cid, BenchPkis,
    Established, ALLOCATION_RECORDS, CID_LEN, HANDSHAKES_PER_ENDPOINT, RECORD_SIZES,
    TARGET_ALLOCATIONS_PER_RECORD,
};
use anyhow::Context as _;
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{
    CipherSuite, ClientConfig, Connection, Endpoint, Instant, NamedGroup, ServerConfig, TrustAnchors,
    Versions, WallClock,
};
use fastshake_pki::generate::TestPki;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// An ECDHE-ECDSA 1.3 handshake at least this many times wolfSSL's rate.
const TARGET_OVER_WOLFSSL: f64 = 2.0;
/// An established session at most this many bytes.
const TARGET_SESSION_BYTES: i64 = 400;

const IDENTITY: &[u8] = b"bench";
const KEY: [u8; 16] =
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff];

/// One kind of 1.3 handshake measured.
#[derive(Clone, Copy)]
enum Kind {
    /// External PSK with x25519 (psk_dhe_ke).
    PskX25519,
    /// External PSK with X25519MLKEM768.
    PskHybrid,
    /// ECDHE-ECDSA with x25519, the server's chain of three.
    EcdsaChain3,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::PskX25519 => "PSK + x25519 (psk_dhe_ke)",
            Kind::PskHybrid => "PSK + X25519MLKEM768",
            Kind::EcdsaChain3 => "ECDHE-ECDSA, chain of 3, x25519",
        }
    }

    /// The 1.3 configurations of both sides.
    fn configs(self, pki: &TestPki) -> anyhow::Result<(Arc<ClientConfig>, Arc<ServerConfig>)> {
        let group = match self {
            Kind::PskHybrid => NamedGroup::X25519MlKem768,
            _ => NamedGroup::X25519,
        };
        let suites13 = vec![Suite13::Aes128GcmSha256];
        let (client, server) = match self {
            Kind::PskX25519 | Kind::PskHybrid => (
                ClientConfig {
                    psk: Some(fastshake_dtls::Psk::new(IDENTITY, KEY.to_vec())),
                    ..Default::default()
                },
                ServerConfig::psk(IDENTITY, KEY.to_vec()),
            ),
            Kind::EcdsaChain3 => {
                let wall_clock = Some(WallClock { at: Instant::ZERO, unix_secs: unix_now() });
                (
                    ClientConfig {
                        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes())?)),
                        server_name: Some("localhost".to_owned()),
                        wall_clock,
                        ..Default::default()
                    },
                    ServerConfig {
                        certified_key: Some(Arc::new(pki.server_certified_key()?)),
                        wall_clock,
                        ..Default::default()
                    },
                )
            }
        };
        // The handshake wolfSSL runs: wolfssl-sys's wolfSSL has no certificate compression
        // (RFC 8879), so neither side offers it here.
        let none = Arc::new(fastshake_dtls::CertificateCompression::none());
        let client = ClientConfig {
            versions: Versions::Dtls13,
            groups: vec![group],
            suites13: suites13.clone(),
            certificate_compression: none.clone(),
            ..client
        };
        let server = ServerConfig {
            versions: Versions::Dtls13,
            groups: vec![group],
            suites13,
            certificate_compression: none,
            ..server
        };
        Ok((Arc::new(client), Arc::new(server)))
    }

    /// wolfssl-peer bench's arguments for the same handshake.
    fn wolfssl_args(self, pki_dir: &std::path::Path) -> Vec<String> {
        let mut args: Vec<String> = vec!["--suite".into(), wolfssl_suite(Suite13::Aes128GcmSha256).into()];
        match self {
            Kind::PskX25519 => args.extend(["--psk", "--groups", "x25519"].map(String::from)),
            Kind::PskHybrid => args.extend(["--psk", "--groups", "x25519mlkem768"].map(String::from)),
            Kind::EcdsaChain3 => {
                let file = |name: &str| pki_dir.join(name).display().to_string();
                args.extend([
                    "--cert".into(),
                    file("server.pem"),
                    "--key".into(),
                    file("server.key"),
                    "--ca".into(),
                    file("ca.pem"),
                    "--groups".into(),
                    "x25519".into(),
                ]);
            }
        }
        args
    }
}

/// Handshakes per second for `slice`, both sides in this thread, a new endpoint every
/// [`HANDSHAKES_PER_ENDPOINT`].
fn engine_rate(
    client: &Arc<ClientConfig>,
    server: &Arc<ServerConfig>,
    slice: Duration,
) -> anyhow::Result<f64> {
    let start = std::time::Instant::now();
    let mut count: u64 = 0;
    while start.elapsed() < slice {
        let mut endpoint = Endpoint::new(Arc::clone(server), seed(count))?;
        for port in 0..HANDSHAKES_PER_ENDPOINT {
            let now = Instant::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
            let (connection, _) = engine_handshake(&mut endpoint, client, client_addr(port), now, count)?;
            drop(connection);
            count += 1;
            if port % 32 == 0 && start.elapsed() >= slice {
                break;
            }
        }
    }
    Ok(count as f64 / start.elapsed().as_secs_f64())
}

/// wolfSSL's handshakes per second and CPU milliseconds per handshake, from one run of
/// `wolfssl-peer bench`.
fn wolfssl_rate(binary: &std::path::Path, args: &[String], handshakes: u32) -> anyhow::Result<(f64, f64)> {
    let mut command = Command::new(binary);
    command.args(["bench", "--handshakes", &handshakes.to_string()]).args(args);
    let [rate, cpu] = wolfssl_bench(command, ["handshakes/s: ", "CPU ms per handshake: "])?;
    Ok((rate, cpu))
}

/// Runs `wolfssl-peer bench` and reads the number after each of `fields` in what it printed.
fn wolfssl_bench(mut command: Command, fields: [&str; 2]) -> anyhow::Result<[f64; 2]> {
    let out = command.output().context("running wolfssl-peer bench")?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "wolfssl-peer bench failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |prefix: &str| -> anyhow::Result<f64> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .with_context(|| format!("no {prefix:?} in {text}"))?;
        let number = line.split_whitespace().next().unwrap_or("");
        number.parse().with_context(|| format!("{prefix} {number:?}"))
    };
    Ok([field(fields[0])?, field(fields[1])?])
}

pub(crate) fn run(runs: usize, slice: Duration, pkis: &BenchPkis) -> anyhow::Result<()> {
    println!("\nDTLS 1.3 (RFC 9147). Median of {runs} run(s); in-memory runs of {} ms.", slice.as_millis());
    let pki_dir = std::env::temp_dir().join(format!("fastshake-bench13-{}", std::process::id()));
    std::fs::create_dir_all(&pki_dir)?;
    std::fs::write(pki_dir.join("server.pem"), pkis.ecdsa_3.server_chain_pem())?;
    std::fs::write(pki_dir.join("server.key"), pkis.ecdsa_3.server.key_pem.as_bytes())?;
    std::fs::write(pki_dir.join("ca.pem"), pkis.ecdsa_3.ca_pem())?;
    let wolfssl = fastshake_interop::build_wolfssl(&std::env::temp_dir());
    println!("\n7. Full DTLS 1.3 handshakes per second, engine only: client and server in memory, one core,");
    println!(
        "   each with the stateless HelloRetryRequest (cookie), TLS_AES_128_GCM_SHA256; beside wolfSSL's"
    );
    println!("   DTLS 1.3 the same way (interop/wolfssl's `wolfssl-peer bench`: both sides in one process,");
    println!("   in-memory queues; its CPU time includes making its session objects)");
    println!(
        "   {:<34} {:>12} {:>12} {:>12} {:>13} {:>14}",
        "handshake", "fastshake", "ms CPU each", "wolfSSL", "ms CPU each", "ours/wolfSSL"
    );
    for kind in [Kind::PskX25519, Kind::PskHybrid, Kind::EcdsaChain3] {
        let (client, server) = kind.configs(&pkis.ecdsa_3)?;
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let mut their_cpu = Vec::new();
        for _ in 0..runs {
            ours.push(engine_rate(&client, &server, slice)?);
            if let Ok(binary) = &wolfssl {
                let (rate, cpu) = wolfssl_rate(binary, &kind.wolfssl_args(&pki_dir), 300)?;
                theirs.push(rate);
                their_cpu.push(cpu);
            }
        }
        let ours = median(ours);
        let (anchor, verdict_text) = match &wolfssl {
            Ok(_) => {
                let (theirs, cpu) = (median(theirs), median(their_cpu));
                let met = match kind {
                    Kind::EcdsaChain3 => format!(
                        "  target {TARGET_OVER_WOLFSSL:.0}x: {}",
                        verdict(ours / theirs >= TARGET_OVER_WOLFSSL)
                    ),
                    _ => String::new(),
                };
                (format!("{theirs:>10.0}/s {cpu:>13.3} {:>14.2}", ours / theirs), met)
            }
            Err(why) => (
                format!("(wolfSSL unavailable: {})", why.to_string().lines().next().unwrap_or("")),
                String::new(),
            ),
        };
        // One thread does both sides: its wall time per handshake is its CPU time.
        println!("   {:<34} {:>10.0}/s {:>12.3} {anchor}{verdict_text}", kind.name(), ours, 1000.0 / ours);
    }
    let _ = std::fs::remove_dir_all(&pki_dir);
    handshake_bytes(pkis)?;
    session_memory13(pkis)?;
    record_throughput13(runs, slice, pkis, wolfssl.as_deref().ok())
}

/// An established 1.3 pair in `suite`, after one record each way: an external PSK for the
/// SHA-256 suites, certificates for SHA-384 (our external PSKs are bound to SHA-256).
fn establish13(suite: Suite13, pkis: &BenchPkis) -> anyhow::Result<Established> {
    let kind = match suite.hash() {
        fastshake_dtls::dtls13::SuiteHash::Sha256 => Kind::PskX25519,
        _ => Kind::EcdsaChain3,
    };
    let (client, server) = kind.configs(&pkis.ecdsa_3)?;
    let client = Arc::new(ClientConfig { suites13: vec![suite], ..(*client).clone() });
    let server = Arc::new(ServerConfig { suites13: vec![suite], ..(*server).clone() });
    let mut endpoint = Endpoint::new(server, seed(11))?;
    let from = client_addr(0);
    let (client, handle) = engine_handshake(&mut endpoint, &client, from, Instant::ZERO, 11)?;
    let mut pair = Established { endpoint, client, handle, from };
    pair.exchange_one_record_each_way()?;
    Ok(pair)
}

/// wolfSSL's name of a 1.3 suite.
fn wolfssl_suite(suite: Suite13) -> &'static str {
    match suite {
        Suite13::Aes128GcmSha256 => "TLS13-AES128-GCM-SHA256",
        Suite13::Aes256GcmSha384 => "TLS13-AES256-GCM-SHA384",
        Suite13::Chacha20Poly1305Sha256 => "TLS13-CHACHA20-POLY1305-SHA256",
        Suite13::Aes128CcmSha256 => "TLS13-AES128-CCM-SHA256",
        Suite13::Aes128Ccm8Sha256 => "TLS13-AES128-CCM-8-SHA256",
    }
}

/// wolfSSL's seal and open MB/s for `count` records of `size` bytes in `suite`, from one run of
/// `wolfssl-peer bench --records` (a PSK handshake first; the records do not depend on it).
fn wolfssl_records(
    binary: &std::path::Path,
    suite: Suite13,
    size: usize,
    count: usize,
) -> anyhow::Result<(f64, f64)> {
    let mut command = Command::new(binary);
    command
        .args(["bench", "--handshakes", "1", "--psk", "--groups", "x25519", "--suite", wolfssl_suite(suite)])
        .args(["--records", &count.to_string(), "--record-bytes", &size.to_string()]);
    let [seal, open] = wolfssl_bench(command, ["seal MB/s: ", "open MB/s: "])?;
    Ok((seal, open))
}

fn record_throughput13(
    runs: usize,
    slice: Duration,
    pkis: &BenchPkis,
    wolfssl: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    println!(
        "\n10. DTLS 1.3 record protection, one core: MB/s of application data, one record per datagram,"
    );
    println!("    and heap allocations per record ({ALLOCATION_RECORDS} records of 100 B each: client seal, server open,");
    println!("    server seal, client open). fastshake: seal = Connection::seal_into, open =");
    println!("    Connection::open_in_place (in place, no copy). wolfSSL: wolfSSL_write, then wolfSSL_read,");
    println!("    through in-memory queues (one copy of each datagram), its 1.3 in the same suite.");
    print!("   {:<34} {:<10}", "suite", "");
    for size in RECORD_SIZES {
        print!(" {:>16}", format!("{size} B seal/open"));
    }
    println!("   allocations per record, target {TARGET_ALLOCATIONS_PER_RECORD}");
    for suite in Suite13::ALL {
        let mut pair = establish13(suite, pkis)?;
        let mut ours_row = String::new();
        let mut theirs_row = String::new();
        for size in RECORD_SIZES {
            let count = records_per_run(&mut pair, size, slice)?;
            let (mut seal, mut open, mut their_seal, mut their_open) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..runs {
                let (s, o) = throughput_run(&mut pair, size, count)?;
                seal.push(s);
                open.push(o);
                if let Some(binary) = wolfssl {
                    let (s, o) = wolfssl_records(binary, suite, size, count)?;
                    their_seal.push(s);
                    their_open.push(o);
                }
            }
            ours_row.push_str(&format!(" {:>16}", format!("{:.0}/{:.0}", median(seal), median(open))));
            let theirs = match wolfssl {
                Some(_) => format!("{:.0}/{:.0}", median(their_seal), median(their_open)),
                None => "n/a".to_owned(),
            };
            theirs_row.push_str(&format!(" {theirs:>16}"));
        }
        // A fresh pair: the throughput runs sealed far more of the client's records than its
        // server opened, and a 1.3 receiver rebuilds a record's number from its low 16 bits
        // (RFC 9147 §4.2.2), so it could no longer place the client's next ones.
        let per = record_allocations(&mut establish13(suite, pkis)?)?;
        let worst = per.iter().copied().fold(0.0, f64::max);
        let allocations = format!(
            "{:.3} {:.3} {:.3} {:.3} {}",
            per[0],
            per[1],
            per[2],
            per[3],
            verdict(worst <= TARGET_ALLOCATIONS_PER_RECORD)
        );
        println!("   {:<34} {:<10}{ours_row}   {allocations}", suite.iana_name(), "fastshake");
        println!("   {:<34} {:<10}{theirs_row}", "", "wolfSSL");
    }
    Ok(())
}

/// Bytes a handshake puts on the wire (both directions, UDP payload) from the client's summary.
fn bytes_of(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>) -> anyhow::Result<(u64, u64, u64)> {
    let mut endpoint = Endpoint::new(Arc::clone(server), seed(7))?;
    let (_, _, summary) =
        engine_handshake_with(&mut endpoint, client, client_addr(1), Instant::ZERO, 7, None)?;
    Ok((summary.bytes_sent + summary.bytes_received, summary.datagrams_sent, summary.datagrams_received))
}

fn handshake_bytes(pkis: &BenchPkis) -> anyhow::Result<()> {
    println!("\n8. Bytes on the wire per full handshake, DTLS 1.2 beside DTLS 1.3 (both directions, UDP");
    println!(
        "   payload, the cookie exchange included: HelloVerifyRequest in 1.2, HelloRetryRequest in 1.3)"
    );
    println!("   {:<46} {:>10} {:>12}", "handshake", "bytes", "datagrams");
    let psk12 = |suite| {
        (
            Arc::new(ClientConfig {
                versions: Versions::Dtls12,
                suites: vec![suite],
                ..ClientConfig::psk(IDENTITY, KEY.to_vec())
            }),
            Arc::new(ServerConfig {
                versions: Versions::Dtls12,
                suites: vec![suite],
                ..ServerConfig::psk(IDENTITY, KEY.to_vec())
            }),
        )
    };
    let psk13 = |suite: Suite13, groups: Vec<NamedGroup>| {
        (
            Arc::new(ClientConfig {
                versions: Versions::Dtls13,
                suites13: vec![suite],
                groups: groups.clone(),
                ..ClientConfig::psk(IDENTITY, KEY.to_vec())
            }),
            Arc::new(ServerConfig {
                versions: Versions::Dtls13,
                suites13: vec![suite],
                groups,
                ..ServerConfig::psk(IDENTITY, KEY.to_vec())
            }),
        )
    };
    let mut rows: Vec<(String, (u64, u64, u64))> = Vec::new();
    let (c, s) = psk12(CipherSuite::PskWithAes128Ccm8);
    let psk12_ccm8 = bytes_of(&c, &s)?;
    rows.push(("1.2 PSK, TLS_PSK_WITH_AES_128_CCM_8".into(), psk12_ccm8));
    let (c, s) = psk13(Suite13::Aes128Ccm8Sha256, vec![]);
    let psk13_ke = bytes_of(&c, &s)?;
    rows.push(("1.3 PSK alone (psk_ke), TLS_AES_128_CCM_8_SHA256".into(), psk13_ke));
    let (c, s) = psk13(Suite13::Aes128Ccm8Sha256, vec![NamedGroup::X25519]);
    rows.push(("1.3 PSK + x25519, TLS_AES_128_CCM_8_SHA256".into(), bytes_of(&c, &s)?));
    let (c, s) = psk13(Suite13::Aes128GcmSha256, vec![NamedGroup::X25519MlKem768]);
    rows.push(("1.3 PSK + X25519MLKEM768, AES_128_GCM".into(), bytes_of(&c, &s)?));
    let wall_clock = Some(WallClock { at: Instant::ZERO, unix_secs: unix_now() });
    let anchors = Arc::new(TrustAnchors::from_pem(pkis.ecdsa_3.ca_pem().as_bytes())?);
    let certified = Arc::new(pkis.ecdsa_3.server_certified_key()?);
    let cert_client = ClientConfig {
        trust_anchors: Some(anchors),
        server_name: Some("localhost".into()),
        wall_clock,
        enable_tickets: false,
        ..Default::default()
    };
    let cert_server = ServerConfig { certified_key: Some(certified), wall_clock, ..Default::default() };
    let c = Arc::new(ClientConfig {
        versions: Versions::Dtls12,
        suites: vec![CipherSuite::EcdheEcdsaWithAes128GcmSha256],
        ..cert_client.clone()
    });
    let s = Arc::new(ServerConfig {
        versions: Versions::Dtls12,
        suites: vec![CipherSuite::EcdheEcdsaWithAes128GcmSha256],
        ..cert_server.clone()
    });
    rows.push(("1.2 ECDHE-ECDSA chain of 3, AES_128_GCM".into(), bytes_of(&c, &s)?));
    let c = Arc::new(ClientConfig {
        versions: Versions::Dtls13,
        suites13: vec![Suite13::Aes128GcmSha256],
        groups: vec![NamedGroup::X25519],
        ..cert_client
    });
    let s = Arc::new(ServerConfig {
        versions: Versions::Dtls13,
        suites13: vec![Suite13::Aes128GcmSha256],
        ..cert_server
    });
    rows.push(("1.3 ECDHE-ECDSA chain of 3, x25519, AES_128_GCM".into(), bytes_of(&c, &s)?));
    for (name, (bytes, sent, received)) in &rows {
        println!("   {name:<46} {bytes:>8} B {:>6} + {:<4}", sent, received);
    }
    println!(
        "   target: a 1.3 PSK handshake with its cookie exchange no more bytes than 1.2's: psk_ke {} B vs {} B: {}",
        psk13_ke.0,
        psk12_ccm8.0,
        verdict(psk13_ke.0 <= psk12_ccm8.0)
    );
    let (hash, tag) = (32, 8);
    println!(
        "   anchor: the fewest bytes RFC 8446/9147 allow this psk_ke handshake (its required fields only, one \
         suite, a {}-byte identity): {} B with a stateless cookie (the first ClientHello's hash and a 16-byte \
         tag), {} B even with an empty one",
        IDENTITY.len(),
        psk_ke_floor(IDENTITY.len(), hash, tag, hash + 16),
        psk_ke_floor(IDENTITY.len(), hash, tag, 0)
    );
    Ok(())
}

/// The fewest bytes a DTLS 1.3 psk_ke handshake with a HelloRetryRequest can take: the fields
/// RFC 8446 and RFC 9147 require and nothing else, for an identity of `identity` bytes, a hash of
/// `hash` bytes (the binder and the Finished), an AEAD tag of `tag` bytes and a cookie of `cookie`.
fn psk_ke_floor(identity: usize, hash: usize, tag: usize, cookie: usize) -> usize {
    // The DTLSPlaintext header, and the DTLS handshake message header.
    const RECORD: usize = 13;
    const MESSAGE: usize = 12;
    // legacy_version, random, empty legacy_session_id and legacy_cookie, one suite, null
    // compression, extensions length.
    let hello_body = 2 + 32 + 1 + 1 + (2 + 2) + (1 + 1) + 2;
    let supported_versions = 4 + 1 + 2;
    let psk_modes = 4 + 1 + 1;
    // One identity (length, bytes, obfuscated_ticket_age) and one binder.
    let pre_shared_key = 4 + 2 + (2 + identity + 4) + 2 + (1 + hash);
    let client_hello = RECORD + MESSAGE + hello_body + supported_versions + psk_modes + pre_shared_key;
    let cookie_extension = 4 + 2 + cookie;
    // legacy_version, random, empty session id echo, suite, compression, extensions length.
    let server_hello_body = 2 + 32 + 1 + 2 + 1 + 2;
    let retry_request = RECORD + MESSAGE + server_hello_body + (4 + 2) + cookie_extension;
    let server_hello = RECORD + MESSAGE + server_hello_body + (4 + 2) + (4 + 2);
    // The shortest unified header (first byte, 8-bit sequence number, no length), the content
    // type inside, the tag.
    let protected = |plaintext: usize| 2 + plaintext + 1 + tag;
    let encrypted_extensions = MESSAGE + 2;
    let finished = MESSAGE + hash;
    2 * client_hello
        + cookie_extension
        + retry_request
        + server_hello
        + protected(encrypted_extensions + finished)
        + protected(finished)
}

fn session_memory13(pkis: &BenchPkis) -> anyhow::Result<()> {
    println!(
        "\n9. Memory of one established DTLS 1.3 session (counting allocator; after one record each way)"
    );
    println!(
        "   {:<34} {:>14} {:>16}   target <= {TARGET_SESSION_BYTES} B",
        "handshake", "client total", "server session"
    );
    let rows = [(Kind::PskX25519, None), (Kind::PskX25519, Some(CID_LEN)), (Kind::EcdsaChain3, None)];
    for (kind, cid) in rows {
        let (client_config, server_config) = with_cid(kind.configs(&pkis.ecdsa_3)?, cid);
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
        let client_total = live_heap() - before + std::mem::size_of::<Connection>() as i64;
        let still_handshaking = client.holds_handshake_state();
        drop(client);
        let server_session = server_growth_per_session(&client_config, &server_config)?;
        let name = match cid {
            Some(len) => format!("{} + CID ({len} B)", kind.name()),
            None => kind.name().to_owned(),
        };
        println!(
            "   {:<34} {:>12} B {:>14} B   client {}, server {}{}",
            name,
            client_total,
            server_session,
            verdict(client_total <= TARGET_SESSION_BYTES),
            verdict(server_session <= TARGET_SESSION_BYTES),
            if still_handshaking { " (client still held its handshake state)" } else { "" }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor counts only the fields the RFCs require, so the engine, which sends those and
    /// a few more bytes (a longer cookie, record lengths), can never come in below it: a floor
    /// above the measured handshake would mean the formula counts a byte that is not required.
    #[test]
    fn the_psk_ke_floor_is_at_most_what_the_engine_sends() {
        let suite = Suite13::Aes128Ccm8Sha256;
        let client = Arc::new(ClientConfig {
            versions: Versions::Dtls13,
            suites13: vec![suite],
            groups: vec![],
            ..ClientConfig::psk(IDENTITY, KEY.to_vec())
        });
        let server = Arc::new(ServerConfig {
            versions: Versions::Dtls13,
            suites13: vec![suite],
            groups: vec![],
            ..ServerConfig::psk(IDENTITY, KEY.to_vec())
        });
        let (bytes, _, _) = bytes_of(&client, &server).unwrap();
        let floor = psk_ke_floor(IDENTITY.len(), 32, 8, 32 + 16);
        assert!(floor as u64 <= bytes, "a floor of {floor} B above the {bytes} B measured");
        // The identity goes in both ClientHellos; the cookie in the HelloRetryRequest and the
        // second ClientHello.
        assert_eq!(psk_ke_floor(6, 32, 8, 48) - psk_ke_floor(5, 32, 8, 48), 2);
        assert_eq!(psk_ke_floor(5, 32, 8, 49) - psk_ke_floor(5, 32, 8, 48), 2);
    }
}
