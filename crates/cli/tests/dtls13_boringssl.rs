//! DTLS 1.3 certificate compression (RFC 8879) against BoringSSL (`interop/boringssl`, a peer
//! program built by the tests), as real processes over loopback: a chain of three ECDSA
//! certificates compressed with zlib, Brotli and Zstandard in both directions, the sender's
//! preference order, and each side declining; data both ways, no flight resent.
//!
//! What BoringSSL does not do: it compresses only a server's chain. Its server never lists
//! algorithms in a CertificateRequest and its client never compresses its own certificate, so a
//! client chain goes uncompressed whichever side fastshake takes (fastshake's own client
//! certificate compression is tested in memory, fastshake against fastshake).

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));
const ALGORITHMS: [&str; 3] = ["zlib", "brotli", "zstd"];

fn skip() -> bool {
    boringssl::peer().is_none()
}

/// The bytes a summary line says were received during the handshake.
fn bytes_received(summary: &str) -> u64 {
    let (_, after) = summary.split_once("received ").expect("received ... in the summary");
    let (_, bytes) = after.split_once(" / ").expect("datagrams / bytes");
    bytes.split(' ').next().and_then(|b| b.parse().ok()).expect("a byte count")
}

/// `fastshake client --dtls 1.3 CLIENT_ARGS` with a client certificate against `boringssl-peer
/// server --mutual SERVER_ARGS`; both handshake lines.
fn fastshake_client(pki: &Pki, server_args: &[&str], client_args: &[&str]) -> (String, String) {
    let binary = boringssl::peer().expect("boringssl-peer");
    let mut server =
        vec!["--cert", &pki.server_cert(), "--key", &pki.server_key(), "--ca", &pki.ca(), "--mutual"]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
    server.extend(server_args.iter().map(|s| s.to_string()));
    let (server, port) = boringssl::server(&binary, &strs(&server));
    let mut args = vec![
        "--dtls".to_owned(),
        "1.3".to_owned(),
        "--ca".to_owned(),
        pki.ca(),
        "--server-name".to_owned(),
        "localhost".to_owned(),
        "--cert".to_owned(),
        pki.client_cert(),
        "--key".to_owned(),
        pki.client_key(),
    ];
    args.extend(client_args.iter().map(|s| s.to_string()));
    let mut client = FASTSHAKE.client_with(port, &strs(&args));
    let ours = client.expect_handshake_without_resend(&["(DTLS 1.3;", "peer sent 3 certificate(s)"]);
    let theirs = boringssl::handshake_line(&server);
    assert!(theirs.contains("version=DTLSv1.3"), "{theirs}");
    client.echo_line("ping to BoringSSL");
    server.expect_stdout("ping to BoringSSL\n");
    client.finish(&[&server]);
    (ours, theirs)
}

/// `boringssl-peer client CLIENT_ARGS` against `fastshake server --dtls 1.3 --echo SERVER_ARGS`;
/// both handshake lines.
fn boringssl_client(pki: &Pki, server_args: &[&str], client_args: &[&str]) -> (String, String) {
    let binary = boringssl::peer().expect("boringssl-peer");
    let mut args = vec!["--dtls", "1.3", "--echo"];
    let (cert, key) = (pki.server_cert(), pki.server_key());
    args.extend(["--cert", &cert, "--key", &key]);
    args.extend_from_slice(server_args);
    let (server, port) = FASTSHAKE.server_with(&args);
    let ca = pki.ca();
    let mut client_all = vec!["--ca", &ca, "--server-name", "localhost"];
    client_all.extend_from_slice(client_args);
    let mut client = boringssl::client(&binary, port, &client_all);
    let theirs = boringssl::handshake_line(&client);
    assert!(theirs.contains("version=DTLSv1.3"), "{theirs}");
    let ours = server.expect_handshake_without_resend(&["(DTLS 1.3;"]);
    client.echo_line("ping to fastshake");
    client.finish(&[&server]);
    (ours, theirs)
}

#[test]
fn fastshake_client_takes_a_chain_compressed_with_each_algorithm() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let (plain, theirs) = fastshake_client(&pki, &["--compress", "none"], &[]);
    assert!(theirs.contains("compressed=none"), "{theirs}");
    assert!(!plain.contains("-compressed"), "{plain}");
    for algorithm in ALGORITHMS {
        let (ours, theirs) = fastshake_client(&pki, &["--compress", algorithm], &[]);
        assert!(ours.contains(&format!("peer's certificate came {algorithm}-compressed")), "{ours}");
        assert!(theirs.contains(&format!("compressed={algorithm}")), "{theirs}");
        // BoringSSL never compresses a client's chain (module comment).
        assert!(!ours.contains("our certificate sent"), "{ours}");
        assert!(
            bytes_received(&ours) < bytes_received(&plain),
            "{algorithm}: {} B received, {} B uncompressed",
            bytes_received(&ours),
            bytes_received(&plain)
        );
    }
}

#[test]
fn fastshake_client_declining_gets_the_chain_uncompressed() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let (ours, theirs) = fastshake_client(&pki, &[], &["--cert-compression", "none"]);
    assert!(theirs.contains("compressed=none"), "{theirs}");
    assert!(!ours.contains("-compressed"), "{ours}");
    // Offering only what the server lacks comes to the same.
    let (ours, theirs) =
        fastshake_client(&pki, &["--compress", "zlib"], &["--cert-compression", "brotli,zstd"]);
    assert!(theirs.contains("compressed=none"), "{theirs}");
    assert!(!ours.contains("-compressed"), "{ours}");
}

#[test]
fn boringssl_client_takes_a_chain_compressed_with_each_algorithm() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    for algorithm in ALGORITHMS {
        let (ours, theirs) = boringssl_client(&pki, &[], &["--compress", algorithm]);
        assert!(ours.contains(&format!("our certificate sent {algorithm}-compressed")), "{ours}");
        assert!(theirs.contains(&format!("decompressed={algorithm}")), "{theirs}");
        // Both prefer the post-quantum hybrid.
        assert!(
            ours.contains("x25519mlkem768") && theirs.contains("group=X25519MLKEM768"),
            "{ours}\n{theirs}"
        );
    }
}

#[test]
fn fastshake_server_compresses_with_its_own_first_choice() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    // The client lists zlib, brotli, zstd; the server prefers zstd, then zlib.
    let (ours, theirs) =
        boringssl_client(&pki, &["--cert-compression", "zstd,zlib"], &["--compress", "zlib,brotli,zstd"]);
    assert!(ours.contains("our certificate sent zstd-compressed"), "{ours}");
    assert!(theirs.contains("decompressed=zstd"), "{theirs}");
    // A server that declines sends the chain as it is.
    let (ours, theirs) = boringssl_client(&pki, &["--cert-compression", "none"], &[]);
    assert!(!ours.contains("-compressed"), "{ours}");
    assert!(theirs.contains("decompressed=none"), "{theirs}");
}

/// Handshake caching in 1.3 is negotiated: a fastshake client with a cache file offers its
/// fingerprint and client-certificate caching to BoringSSL, which knows neither and runs
/// ordinary handshakes; the chain still comes compressed.
#[test]
fn fastshake_client_offering_caching_gets_ordinary_handshakes_from_boringssl() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let cache = pki.scratch("boringssl.cache");
    let _ = std::fs::remove_file(&cache);
    for round in ["first", "second"] {
        let (ours, theirs) = fastshake_client(&pki, &["--compress", "zstd"], &["--cache-file", &cache]);
        assert!(!ours.contains("from cache"), "{round}: {ours}");
        assert!(ours.contains("peer's certificate came zstd-compressed"), "{round}: {ours}");
        assert!(theirs.contains("compressed=zstd"), "{round}: {theirs}");
        assert!(std::fs::metadata(&cache).is_ok_and(|m| m.len() > 0), "{round}: the chain was kept");
    }
}
