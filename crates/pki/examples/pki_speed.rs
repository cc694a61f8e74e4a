//! Costs a certificate handshake pays in this crate, per operation: signing (ServerKeyExchange,
//! CertificateVerify), verifying a handshake signature, and validating a peer chain of three
//! certificates. Prints medians of five bounded batches beside `openssl speed` on the same machine
//! in the same run (the anchor, when openssl is installed); asserts nothing.
//!
//! `cargo run --release -p fastshake-pki --example pki_speed --features generate` (the dev profile
//! keeps debug assertions in ring and roughly halves its rates).

use std::time::Instant;

use fastshake_pki::generate::{generate, KeyKind};
use fastshake_pki::{verify_server_chain, verify_signature, TrustAnchors};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const NOW: u64 = 1_789_000_000;
const BATCHES: usize = 5;

/// Median operations per second of `BATCHES` batches of `per_batch` calls.
fn rate(per_batch: u32, mut op: impl FnMut()) -> f64 {
    let mut rates: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                op();
            }
            f64::from(per_batch) / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[BATCHES / 2]
}

fn main() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut results = Vec::new();
    let message = [0x5a_u8; 200]; // about the size of a ServerKeyExchange's signed content
    println!("{:<10} {:<24} {:>12} {:>12} {:>16}", "key", "scheme", "sign/s", "verify/s", "chain(3) check/s");
    for (kind, per_batch) in [(KeyKind::P256, 400), (KeyKind::Rsa2048, 60)] {
        let pki = generate(3, kind, &[], NOW, 30).expect("generate");
        let ours = pki.server_certified_key().expect("key");
        let anchors = TrustAnchors::from_pem(pki.ca_pem().as_bytes()).expect("anchors");
        let chain = pki.server_chain();
        let peer = verify_server_chain(&chain, &anchors, NOW, Some("localhost")).expect("chain").key;
        let chain_rate = rate(per_batch, || {
            verify_server_chain(&chain, &anchors, NOW, Some("localhost")).expect("chain");
        });
        for &scheme in ours.key.schemes() {
            let signature = ours.key.sign(scheme, &message, &mut rng).expect("sign");
            let sign_rate = rate(per_batch, || {
                ours.key.sign(scheme, &message, &mut rng).expect("sign");
            });
            let verify_rate = rate(per_batch * 4, || {
                verify_signature(&peer, scheme, &message, &signature).expect("verify");
            });
            results.push((kind.name(), sign_rate, verify_rate));
            println!(
                "{:<10} {:<24} {:>12.0} {:>12.0} {:>16.0}",
                kind.name(),
                scheme.name(),
                sign_rate,
                verify_rate,
                chain_rate
            );
        }
    }
    println!("(one core, ring via rustls-webpki; chain = leaf + 2 intermediates to a root, name checked)");
    print_openssl_anchor(&results);
}

/// `openssl speed` for the same key kinds: sign/s and verify/s, and our ratio to it.
fn print_openssl_anchor(ours: &[(&str, f64, f64)]) {
    let output = std::process::Command::new("timeout")
        .args(["60", "openssl", "speed", "-seconds", "1", "ecdsap256", "rsa2048"])
        .stderr(std::process::Stdio::null())
        .output();
    let Ok(output) = output else {
        println!("anchor: openssl speed not available");
        return;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let last_two = |line: &str| {
        let numbers: Vec<f64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        match numbers.as_slice() {
            [.., sign, verify] => Some((*sign, *verify)),
            _ => None,
        }
    };
    for (kind, marker) in [("p256", "ecdsa (nistp256)"), ("rsa2048", "rsa 2048 bits")] {
        let Some((sign, verify)) = text.lines().find(|l| l.contains(marker)).and_then(last_two) else {
            println!("anchor: no openssl speed line for {kind}");
            continue;
        };
        for (_, our_sign, our_verify) in ours.iter().filter(|(k, _, _)| *k == kind) {
            println!(
                "anchor openssl speed {kind}: sign/s {sign:.0} (ours {:.2}x), verify/s {verify:.0} (ours {:.2}x)",
                our_sign / sign,
                our_verify / verify
            );
        }
    }
}
