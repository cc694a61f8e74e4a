//! Certificate interop with pion/dtls (`interop/pion`, built with Go) as real processes over
//! loopback, mutual authentication both ways, and handshake caching negotiated: pion knows
//! neither RFC 7924's cached_info nor client-certificate caching (0xFFA0), ignores both and gets
//! ordinary full handshakes, with no flight resent on either side.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// The pion server's arguments: require and verify a client certificate.
fn mutual(pki: &Pki) -> Vec<String> {
    vec!["--ca".into(), pki.ca(), "--mutual".into()]
}

/// The pion client's arguments: its chain and key for the server that asks.
fn client_credentials(pki: &Pki) -> Vec<String> {
    vec!["--cert".into(), pki.client_cert(), "--key".into(), pki.client_key()]
}

/// fastshake client (mutual) -> pion server, plain: the suite of the key, data both ways.
fn fastshake_client_with_pion_server(key: &str, suite: &str) {
    let Some(binary) = pion::dtls_peer() else { return };
    let pki = Pki::generate(FASTSHAKE, key, 3);
    let (server, port) = pion::dtls_cert_server(&binary, &pki, &strs(&mutual(&pki)));
    let mut client = FASTSHAKE.client_with(port, &strs(&pki.fastshake_mutual_client_args()));
    client.expect_handshake_without_resend(&[
        &format!("{suite}, full (not resumed), with extended master secret"),
        "peer sent 3 certificate(s)",
    ]);
    let handshake = pion::handshake_line(&server);
    assert!(handshake.contains(suite), "{handshake}");
    client.echo_line("ping from fastshake");
    server.expect_stdout("ping from fastshake\n");
    client.finish(&[&server]);
}

#[test]
fn fastshake_client_with_pion_server_ecdsa_mutual() {
    fastshake_client_with_pion_server("p256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
}

#[test]
fn fastshake_client_with_pion_server_rsa_mutual() {
    fastshake_client_with_pion_server("rsa2048", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
}

/// pion client (mutual) -> fastshake server --client-auth require --echo.
fn pion_client_with_fastshake_server(key: &str, suite: &str) {
    let Some(binary) = pion::dtls_peer() else { return };
    let pki = Pki::generate(FASTSHAKE, key, 3);
    let mut server_args = pki.fastshake_mutual_server_args("require");
    server_args.push("--echo".into());
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let mut client = pion::dtls_cert_client(&binary, port, &pki, &strs(&client_credentials(&pki)));
    let handshake = pion::handshake_line(&client);
    assert!(handshake.contains(suite), "{handshake}");
    server.expect_handshake_without_resend(&[suite, "full (not resumed)", "peer sent 3 certificate(s)"]);
    client.echo_line("ping from pion");
    client.finish(&[&server]);
}

#[test]
fn pion_client_with_fastshake_server_ecdsa_mutual() {
    pion_client_with_fastshake_server("p256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
}

#[test]
fn pion_client_with_fastshake_server_rsa_mutual() {
    pion_client_with_fastshake_server("rsa2048", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
}

/// The fastshake client offers client-certificate caching (empty) in its first handshake and,
/// with the server's objects in its cache file, RFC 7924 fingerprints (and still the empty
/// 0xFFA0, no ticket having been derived) in the second: pion answers neither, two ordinary
/// full handshakes.
#[test]
fn fastshake_client_offering_caching_to_pion_server_gets_ordinary_handshakes() {
    let Some(binary) = pion::dtls_peer() else { return };
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let mut server_args = mutual(&pki);
    server_args.extend(["--sessions".into(), "2".into()]);
    let (server, port) = pion::dtls_cert_server(&binary, &pki, &strs(&server_args));
    let cache = pki.scratch("pion.cache");
    let _ = std::fs::remove_file(&cache);
    let mut args = pki.fastshake_mutual_client_args();
    args.extend(["--cache-file".into(), cache.clone()]);
    for round in ["first", "second"] {
        let mut client = FASTSHAKE.client_with(port, &strs(&args));
        let line =
            client.expect_handshake_without_resend(&["full (not resumed)", "peer sent 3 certificate(s)"]);
        assert!(!line.contains("from cache"), "{round}: {line}");
        client.echo_line(&format!("{round} from fastshake"));
        server.expect_stdout(&format!("{round} from fastshake\n"));
        client.finish(&[]);
        let kept = std::fs::metadata(&cache).map_or(0, |m| m.len());
        assert!(kept > 0, "{round}: the server's objects were kept for the next handshake");
    }
    let served = server.stderr.text().matches("handshake done").count();
    assert_eq!(served, 2, "{}", server.transcript());
}

/// The other direction: a fastshake server with client-certificate caching on (16 entries)
/// answers pion's ClientHellos, which offer neither extension, with ordinary handshakes.
#[test]
fn pion_clients_with_a_caching_fastshake_server_get_ordinary_handshakes() {
    let Some(binary) = pion::dtls_peer() else { return };
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let mut server_args = pki.fastshake_mutual_server_args("require");
    server_args.extend(["--echo".into(), "--client-cache".into(), "16".into()]);
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    for round in 1..=2 {
        let mut client = pion::dtls_cert_client(&binary, port, &pki, &strs(&client_credentials(&pki)));
        pion::handshake_line(&client);
        let done = server.stderr.wait_until(STEP, |text| text.matches("handshake done").count() >= round);
        assert!(done, "{}", server.transcript());
        client.echo_line(&format!("ping {round} from pion"));
        client.finish(&[&server]);
    }
    server.assert_no_resend_in_any_handshake();
    let stderr = server.stderr.text();
    let summaries: Vec<&str> = stderr.lines().filter(|l| l.contains("handshake done")).collect();
    assert_eq!(summaries.len(), 2, "{}", server.transcript());
    for line in summaries {
        assert!(line.contains("full (not resumed)") && line.contains("peer sent 3 certificate(s)"), "{line}");
        assert!(!line.contains("from cache"), "{line}");
    }
}
