//! `fastshake server` and `fastshake client` with certificates against each other: chains from
//! `fastshake pki`, mutual authentication, and resumption through `--session-file`.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

const ECDSA_CCM8: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8";
const ECDSA_GCM: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256";
const RSA_GCM: &str = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256";

fn certificate_suite_round_trip(key: &str, suite: &str) {
    let pki = Pki::generate(FASTSHAKE, key, 3);
    let mut server_args = pki.fastshake_server_args();
    server_args.push("--echo".into());
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let mut client_args = pki.fastshake_client_args();
    client_args.extend(["--suite".into(), suite.into()]);
    let stderr = FASTSHAKE.echo_run(port, &strs(&client_args), "over a certificate suite");
    assert!(
        stderr.contains(&format!("handshake done: {suite}, full (not resumed), with extended master secret")),
        "{stderr}"
    );
    assert!(stderr.contains("peer sent 3 certificate(s)"), "leaf and intermediates, no root:\n{stderr}");
    assert!(stderr.contains(", subject \"O=fastshake test PKI, CN=fastshake test server"), "{stderr}");
    server.expect_handshake_without_resend(&[&format!("{suite}, full (not resumed)")]);
}

#[test]
fn ecdhe_ecdsa_ccm8_with_a_three_certificate_chain() {
    certificate_suite_round_trip("p256", ECDSA_CCM8);
}

#[test]
fn ecdhe_ecdsa_gcm_with_a_three_certificate_chain() {
    certificate_suite_round_trip("p256", ECDSA_GCM);
}

#[test]
fn ecdhe_rsa_gcm_with_a_three_certificate_chain() {
    certificate_suite_round_trip("rsa2048", RSA_GCM);
}

/// The versions a client is run with: the default (both offered, 1.3 chosen), and 1.2 alone,
/// with the start of the summary line each gives.
const VERSIONS: [(&[&str], &str); 2] = [
    (&[], "handshake done: TLS_AES_128_GCM_SHA256 (DTLS 1.3;"),
    (&["--dtls", "1.2"], "handshake done: TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8"),
];

/// The server's summary of its `n`th handshake (from 0), once printed.
fn nth_handshake_line(server: &Peer, n: usize) -> String {
    let printed = server
        .stderr
        .wait_until(std::time::Duration::from_secs(10), |text| text.matches("handshake done").count() > n);
    assert!(printed, "{}", server.transcript());
    server.handshake_lines().swap_remove(n)
}

#[test]
fn required_client_certificate_is_validated_and_its_absence_refused() {
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_mutual_server_args("require");
    server_args.push("--echo".into());
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));

    for (n, (version, done)) in VERSIONS.into_iter().enumerate() {
        let mut args = pki.fastshake_mutual_client_args();
        args.extend(version.iter().map(|a| a.to_string()));
        let stderr = FASTSHAKE.echo_run(port, &strs(&args), "with a client certificate");
        assert!(stderr.contains(done), "{stderr}");
        let line = nth_handshake_line(&server, n);
        let client =
            "peer sent 2 certificate(s), subject \"O=fastshake test PKI, CN=fastshake test client p256";
        assert!(line.contains(client) && line.contains("+ 0 resent"), "{line}");

        // Without a certificate the server ends the handshake: handshake_failure in 1.2,
        // certificate_required in 1.3 (RFC 8446 §4.4.2.4).
        let mut args = pki.fastshake_client_args();
        args.extend(["--handshake-timeout".into(), "3".into()]);
        args.extend(version.iter().map(|a| a.to_string()));
        let mut client = FASTSHAKE.client_with(port, &strs(&args));
        let status = client.expect_exit();
        assert!(!status.success(), "{}", client.transcript());
        let alert = if version.is_empty() { "certificate_required" } else { "handshake_failure" };
        assert!(client.stderr.text().contains(alert), "{alert}: {}", client.transcript());
    }
}

#[test]
fn a_returning_client_chain_skips_validation_on_the_server_unless_the_key_cache_is_off() {
    const SKIPPED: &str = "chain validation skipped (key cache)";
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let client_args = pki.fastshake_mutual_client_args();
    for (cache, skipped_the_second_time) in [(None, true), (Some("0"), false)] {
        let mut server_args = pki.fastshake_mutual_server_args("require");
        server_args.push("--echo".into());
        server_args.extend(cache.map(|n| vec!["--key-cache".to_owned(), n.to_owned()]).unwrap_or_default());
        let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
        for run in 0..2 {
            FASTSHAKE.echo_run(port, &strs(&client_args), "again");
            let wait = std::time::Duration::from_secs(10);
            let printed = server.stderr.wait_until(wait, |text| text.matches("handshake done").count() > run);
            assert!(printed, "no summary of handshake {run}\n{}", server.transcript());
        }
        let stderr = server.stderr.text();
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("handshake done")).collect();
        assert_eq!(lines.len(), 2, "{stderr}");
        assert!(!lines[0].contains(SKIPPED), "the first handshake validates: {}", lines[0]);
        assert_eq!(
            lines[1].contains(SKIPPED),
            skipped_the_second_time,
            "--key-cache {cache:?}: {}",
            lines[1]
        );
    }
}

#[test]
fn optional_client_authentication_accepts_a_client_without_a_certificate() {
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_mutual_server_args("optional");
    server_args.push("--echo".into());
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    for (n, (version, done)) in VERSIONS.into_iter().enumerate() {
        let mut args = pki.fastshake_client_args();
        args.extend(version.iter().map(|a| a.to_string()));
        let stderr = FASTSHAKE.echo_run(port, &strs(&args), "no client certificate");
        assert!(stderr.contains(done), "{stderr}");
        let line = nth_handshake_line(&server, n);
        assert!(line.contains("+ 0 resent"), "{line}");
        assert!(!line.contains("peer sent"), "the client sent no certificate: {line}");
    }
}

#[test]
fn a_chain_from_another_root_is_refused_with_unknown_ca() {
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let other = Pki::generate(FASTSHAKE, "p256", 2);
    let (_server, port) = FASTSHAKE.server_with(&strs(&pki.fastshake_server_args()));
    let args = ["--ca".to_owned(), other.ca(), "--handshake-timeout".into(), "3".into()];
    let mut client = FASTSHAKE.client_with(port, &strs(&args));
    assert!(!client.expect_exit().success(), "{}", client.transcript());
    assert!(client.stderr.text().contains("unknown_ca"), "{}", client.transcript());
}

#[test]
fn a_server_name_the_certificate_does_not_carry_is_refused() {
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let (_server, port) = FASTSHAKE.server_with(&strs(&pki.fastshake_server_args()));
    let mut args = pki.fastshake_client_args();
    args.extend([
        "--server-name".into(),
        "not-the-server.example".into(),
        "--handshake-timeout".into(),
        "3".into(),
    ]);
    let mut client = FASTSHAKE.client_with(port, &strs(&args));
    assert!(!client.expect_exit().success(), "{}", client.transcript());
    assert!(client.stderr.text().contains("bad_certificate"), "{}", client.transcript());
    assert!(!client.stderr.text().contains("handshake done"), "{}", client.transcript());
}

#[test]
fn psk_and_certificates_on_one_server() {
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.extend(["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX, "--echo"].map(String::from));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let with_psk = FASTSHAKE.echo_run(port, &psk, "psk client");
    assert!(with_psk.contains("handshake done: TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519"), "{with_psk}");
    let with_psk = FASTSHAKE.echo_run(port, &[&psk[..], &["--dtls", "1.2"]].concat(), "psk client, 1.2");
    assert!(with_psk.contains("handshake done: TLS_PSK_WITH_AES_128_CCM_8"), "{with_psk}");
    for (version, done) in VERSIONS {
        let mut args = pki.fastshake_client_args();
        args.extend(version.iter().map(|a| a.to_string()));
        let with_cert = FASTSHAKE.echo_run(port, &strs(&args), "certificate client");
        assert!(with_cert.contains(done) && with_cert.contains("peer sent 2 certificate(s)"), "{with_cert}");
    }
    server.expect_stderr("listening on 127.0.0.1:");
    assert!(
        server.stderr.text().contains("(DTLS 1.3 and 1.2, PSK and certificates"),
        "{}",
        server.transcript()
    );
}

#[test]
fn missing_credentials_are_refused_up_front() {
    let mut client = FASTSHAKE.client_with(9, &[]);
    assert!(!client.expect_exit().success());
    assert!(client.stderr.text().contains("--ca"), "{}", client.transcript());
    let command = FASTSHAKE.psk_server_command(&["--client-auth", "require"]);
    let mut server = Peer::spawn("fastshake server", command);
    assert!(!server.expect_exit().success());
    assert!(server.stderr.text().contains("needs --ca"), "{}", server.transcript());
}

#[test]
fn a_cache_file_leaves_both_chains_out_of_the_next_handshake_in_either_version() {
    use std::os::unix::fs::PermissionsExt;
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let mut server_args = pki.fastshake_mutual_server_args("require");
    server_args.extend(["--echo".into(), "--client-cache".into(), "16".into()]);
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    // RFC 7924's fingerprint in 1.2; an abbreviated Certificate in 1.3 (seed 003 §IV-D).
    for (version, server_certificate) in [
        ("1.2", "server certificate from cache (RFC 7924)"),
        ("1.3", "server certificate from cache (abbreviated)"),
    ] {
        let cache = pki.scratch(&format!("handshake-{version}.cache"));
        let _ = std::fs::remove_file(&cache);
        let mut args = pki.fastshake_mutual_client_args();
        args.extend(["--cache-file".into(), cache.clone(), "--dtls".into(), version.into()]);

        let first = FASTSHAKE.echo_run(port, &strs(&args), "first, nothing cached");
        assert!(first.contains("full (not resumed)") && !first.contains("from cache"), "{first}");
        let mode = std::fs::metadata(&cache).expect("the cache file was written").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let second = FASTSHAKE.echo_run(port, &strs(&args), "second, from the cache");
        for part in [server_certificate, "client certificate from cache (ticket)"] {
            assert!(second.contains(part), "{version}: {part}: {second}");
        }
        server.expect_handshake_without_resend(&[
            server_certificate,
            "client certificate from cache (ticket)",
            "peer sent 3 certificate(s)",
        ]);

        // A corrupt cache file costs a warning and a full handshake, nothing else.
        std::fs::write(&cache, b"FSHC\x01garbage").unwrap();
        let third = FASTSHAKE.echo_run(port, &strs(&args), "third, corrupt cache");
        assert!(third.contains("ignoring the cache") && !third.contains("from cache ("), "{third}");
    }
}
