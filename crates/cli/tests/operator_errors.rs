//! What an operator meets first, tried as a new user would with real processes on loopback: a
//! second server on a taken address, a client sent to a port where nothing listens, a refusal
//! that names what did not match, and weak settings.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Long enough for any refusal here; a handshake into silence takes a minute.
const QUICK: Duration = Duration::from_secs(20);

fn fastshake(args: &[&str]) -> std::process::Command {
    let mut command = FASTSHAKE.command();
    command.args(args);
    command
}

/// A run that must fail at once; returns its standard error.
fn fails(name: &str, args: &[&str]) -> String {
    let finished = run(name, fastshake(args), QUICK);
    assert!(!finished.status.success(), "{name} must fail:\n{}", finished.text());
    finished.stderr
}

#[test]
fn a_second_dtls_server_on_a_taken_address_is_refused_unless_both_share_on_purpose() {
    // Two workers: their sockets share the port with SO_REUSEPORT, which once let any other
    // process join unasked.
    let (first, port) = FASTSHAKE.server(&["--echo", "--workers", "2"]);
    let addr = format!("127.0.0.1:{port}");
    let stderr = fails(
        "second server",
        &["server", "--listen", &addr, "--psk-identity", "other", "--psk", WRONG_PSK_HEX, "--workers", "2"],
    );
    assert!(stderr.contains(&format!("cannot listen on {addr}: address already in use")), "{stderr}");
    assert!(stderr.contains("--reuse-port"), "says how to share on purpose: {stderr}");
    // Every client still meets the first server, with its key.
    for n in 0..4 {
        FASTSHAKE.echo_run(port, &["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX], &format!("client {n}"));
    }
    // Nor may one that asks to share join it: the first did not ask.
    let stderr = fails(
        "sharing server",
        &["server", "--listen", &addr, "--psk-identity", "other", "--psk", WRONG_PSK_HEX, "--reuse-port"],
    );
    assert!(
        stderr
            .contains(&format!("cannot listen on {addr}: address already in use: a server that did not ask")),
        "{stderr}"
    );
    FASTSHAKE.echo_run(port, &["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX], "client after the sharer");
    drop(first);

    // Asked for by both, the port is shared.
    let (sharing, port) = FASTSHAKE.server(&["--echo", "--reuse-port"]);
    let addr = format!("127.0.0.1:{port}");
    let mut second = Peer::spawn(
        "second server",
        fastshake(&[
            "server",
            "--listen",
            &addr,
            "--psk-identity",
            PSK_IDENTITY,
            "--psk",
            PSK_HEX,
            "--reuse-port",
        ]),
    );
    second.expect_stderr(&format!("listening on {addr}"));
    assert!(!second.exited() && !sharing.stderr.text().contains("error"), "{}", second.transcript());
}

#[test]
fn a_second_sctp_server_on_a_taken_address_is_refused() {
    let (first, port) = FASTSHAKE.sctp_server("5060", &["--echo", "--workers", "2"]);
    let addr = format!("127.0.0.1:{port}");
    let stderr = fails("second sctp server", &["sctp", "server", "--listen", &addr, "--port", "5060"]);
    assert!(stderr.contains(&format!("cannot listen on {addr}: address already in use")), "{stderr}");
    assert!(first.stderr.text().contains("listening on"), "{}", first.transcript());
}

/// A UDP port on loopback where nothing listens: bound to find it, then let go.
fn closed_port() -> String {
    format!("127.0.0.1:{}", free_udp_port())
}

#[test]
fn a_dtls_client_says_at_once_that_nothing_listens_and_gives_up_after_three_refusals() {
    let closed = closed_port();
    let stderr = fails(
        "fastshake client",
        &["client", "--connect", &closed, "--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX],
    );
    let refused = format!("nothing listens at {closed}: ICMP port unreachable");
    assert!(stderr.contains(&format!("{refused} (1 of 3 in a row before giving up)")), "{stderr}");
    assert!(stderr.contains(&format!("{refused}, 3 times in a row")), "{stderr}");
    assert!(!stderr.contains("no answer after"), "{stderr}");
}

#[test]
fn an_sctp_client_says_at_once_that_nothing_listens() {
    let closed = closed_port();
    let stderr = fails("sctp client", &["sctp", "client", "--connect", &closed, "--port", "5060"]);
    let refused = format!("nothing listens at {closed}: ICMP port unreachable");
    assert!(stderr.contains(&format!("{refused} (1 of 3 in a row before giving up)")), "{stderr}");
    assert!(stderr.contains(&format!("{refused}, 3 times in a row")), "{stderr}");
}

#[test]
fn a_certificate_client_against_a_psk_server_is_told_why_on_both_sides() {
    let pki = Pki::generate(FASTSHAKE, "p256", 1);
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let ca = pki.ca();
    let connect = format!("127.0.0.1:{port}");
    let client = ["client", "--connect", &connect, "--ca", &ca, "--handshake-timeout", "5"];

    // DTLS 1.2: no suite in common.
    let stderr = fails("fastshake client", &[&client[..], &["--dtls", "1.2"]].concat());
    assert!(
        stderr.contains(
            "the server refused our ClientHello with alert handshake_failure (we offered TLS_ECDHE_"
        ),
        "{stderr}"
    );
    // The server, which decided, names both sides' suites.
    let line = server.expect_stderr_line_with(&["no common cipher suite"]);
    assert!(line.contains("the client offered TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8"), "{line}");
    assert!(
        line.contains("this server serves TLS_PSK_WITH_AES_128_CCM_8, TLS_PSK_WITH_AES_128_GCM_SHA256"),
        "{line}"
    );
    assert!(line.contains("(handshake_failure sent)"), "the alert on the wire is the RFC's: {line}");
    assert!(line.starts_with("fastshake server: 127.0.0.1:"), "the line names the client: {line}");

    // Both versions offered, so DTLS 1.3: the suites match, the credentials do not.
    let stderr = fails("fastshake client", &client);
    assert!(
        stderr.contains("the server refused our ClientHello with alert handshake_failure (we offered TLS_AES_128_GCM_SHA256"),
        "{stderr}"
    );
    let line = server.expect_stderr_line_with(&["nothing to authenticate with"]);
    assert!(
        line.contains(
            "handshake refused (handshake_failure sent): nothing to authenticate with: the client offered no PSK \
             and this server has no certificate"
        ),
        "{line}"
    );
}

#[test]
fn a_wrong_psk_is_named_on_both_sides_in_both_versions() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let connect = format!("127.0.0.1:{port}");
    let wrong = "00112233445566778899aabbccddee00";
    for (n, dtls) in ["1.3", "1.2"].into_iter().enumerate() {
        let args =
            ["client", "--connect", &connect, "--psk-identity", PSK_IDENTITY, "--psk", wrong, "--dtls", dtls];
        let stderr = fails("fastshake client", &args);
        let ours = format!(
            "the server could not verify our proof of the pre-shared key: the two sides hold different keys \
             for PSK identity \"{PSK_IDENTITY}\", or the handshake was altered on the way (decrypt_error received)"
        );
        assert!(stderr.contains(&ours), "DTLS {dtls}: {stderr}");
        let theirs = format!(
            "the peer's proof of the pre-shared key did not verify: the two sides hold different keys for PSK \
             identity \"{PSK_IDENTITY}\", or the handshake was altered on the way (decrypt_error sent)"
        );
        let seen = server.stderr.wait_until(QUICK, |text| text.matches(&theirs).count() > n);
        assert!(seen, "DTLS {dtls}: {}", server.transcript());
    }
}

#[test]
fn a_short_psk_is_warned_about_and_zero_workers_refused() {
    let (server, _) = FASTSHAKE.server_with(&["--psk-identity", "short", "--psk", "00"]);
    let warning = "warning: the --psk is 1 byte(s) (8 bits); RFC 9257 wants at least 16 random bytes";
    server.expect_stderr(warning);
    // A 16-byte key passes in silence.
    let (server, _) = FASTSHAKE.server(&[]);
    assert!(!server.stderr.text().contains("warning"), "{}", server.transcript());

    let psk = ["--psk-identity", "a", "--psk", PSK_HEX];
    let dtls = [&["server", "--listen", "127.0.0.1:0", "--workers", "0"][..], &psk].concat();
    let sctp = ["sctp", "server", "--listen", "127.0.0.1:0", "--port", "5060", "--workers", "0"];
    for args in [&dtls[..], &sctp[..]] {
        let stderr = fails("zero workers", args);
        assert!(stderr.contains("invalid value '0' for '--workers <N>'"), "{stderr}");
    }
}

/// A flag that works in one DTLS version alone is refused beside another `--dtls`, with the
/// reason and the way out; left to the default (both), it picks its version.
#[test]
fn a_flag_of_one_dtls_version_is_refused_with_another() {
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let client = |extra: &[&'static str]| [&["client", "--connect", "127.0.0.1:9"][..], &psk, extra].concat();
    let server = |extra: &[&'static str]| [&["server", "--listen", "127.0.0.1:0"][..], &psk, extra].concat();
    let cases: [(Vec<&str>, &str); 8] = [
        (
            client(&["--dtls", "1.2", "--groups", "x25519"]),
            "--groups chooses DTLS 1.3 key exchanges and this run speaks DTLS 1.2 only",
        ),
        (
            server(&["--suite", "TLS_PSK_WITH_AES_128_CCM_8", "--cert-compression", "zlib"]),
            "--cert-compression is DTLS 1.3's (RFC 8879) and this run speaks DTLS 1.2 only",
        ),
        (server(&["--dtls", "1.3", "--hint", "h"]), "--hint is DTLS 1.2's"),
        (
            client(&["--dtls", "1.2", "--early-data", "--session-file", "never-written"]),
            "--early-data works in DTLS 1.3 only: use --dtls 1.3 or leave --dtls out",
        ),
        (
            server(&["--dtls", "1.2", "--early-data"]),
            "--early-data works in DTLS 1.3 only and this run speaks DTLS 1.2 only (by --dtls or --suite)",
        ),
        (
            client(&["--dtls", "1.3", "--suite", "TLS_PSK_WITH_AES_128_CCM_8"]),
            "--suite TLS_PSK_WITH_AES_128_CCM_8 is a DTLS 1.2 suite and this run speaks DTLS 1.3 only",
        ),
        (
            server(&["--early-data", "--suite", "TLS_PSK_WITH_AES_128_CCM_8"]),
            "--early-data works in DTLS 1.3 only and this run speaks DTLS 1.2 only (by --dtls or --suite)",
        ),
        (
            client(&["--dtls", "both", "--suite", "TLS_AES_128_CCM_8_SHA256"]),
            "--dtls both needs a --suite of each version or none, and no DTLS 1.2 suite was given: add one or use --dtls 1.3",
        ),
    ];
    for (args, reason) in cases {
        let stderr = fails(&args.join(" "), &args);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

/// Client settings that could only fail later (after the handshake, or silently) are refused
/// before it, with the reason.
#[test]
fn client_settings_that_cannot_work_are_refused_before_the_handshake() {
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let client = |extra: &[&'static str]| [&["client", "--connect", "127.0.0.1:9"][..], &psk, extra].concat();
    let cases: [(Vec<&str>, &str); 3] = [
        // 0-RTT needs the ticket a session file keeps.
        (client(&["--early-data"]), "--session-file <FILE>"),
        (
            client(&["--session-file", "/nonexistent-directory/session"]),
            "cannot keep the session in /nonexistent-directory/session: /nonexistent-directory is not a directory",
        ),
        (client(&["--groups", "x25519,secp256r1,x25519"]), "--groups names x25519 twice"),
    ];
    for (args, reason) in cases {
        let stderr = fails(&args.join(" "), &args);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

/// Client and server left to their defaults agree on DTLS 1.3, also with --cache-file
/// (handshake caching works in both); with only DTLS 1.2 suites the client offers 1.2 alone,
/// and only 1.3 suites get the suite asked for.
#[test]
fn a_default_server_speaks_dtls13_and_a_1_2_suite_picks_dtls12() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let default = FASTSHAKE.echo_run(port, &psk, "both versions");
    assert!(default.contains("handshake done: TLS_AES_128_GCM_SHA256 (DTLS 1.3;"), "{default}");
    let suite12 = [&psk[..], &["--suite", "TLS_PSK_WITH_AES_128_GCM_SHA256"]].concat();
    let suite12 = FASTSHAKE.echo_run(port, &suite12, "a 1.2 suite");
    assert!(suite12.contains("handshake done: TLS_PSK_WITH_AES_128_GCM_SHA256, full"), "{suite12}");
    let suite13 = [&psk[..], &["--suite", "TLS_AES_128_CCM_8_SHA256"]].concat();
    let suite13 = FASTSHAKE.echo_run(port, &suite13, "a 1.3 suite");
    assert!(suite13.contains("handshake done: TLS_AES_128_CCM_8_SHA256 (DTLS 1.3;"), "{suite13}");
    let cache = scratch_dir().join(format!("default-versions-{}.cache", std::process::id()));
    let cache = cache.to_str().unwrap();
    let cached = FASTSHAKE.echo_run(port, &[&psk[..], &["--cache-file", cache]].concat(), "cache file");
    assert!(cached.contains("handshake done: TLS_AES_128_GCM_SHA256 (DTLS 1.3;"), "{cached}");
    drop(server);
}

/// DTLS 1.3, no key-exchange group in common: the server refuses the first ClientHello (no
/// session, no PSK-only fall back) and logs why; the client names the groups it offered.
#[test]
fn a_dtls13_group_mismatch_is_named_on_both_sides() {
    let (server, port) = FASTSHAKE.server(&["--dtls", "1.3", "--groups", "secp256r1"]);
    let connect = format!("127.0.0.1:{port}");
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let client = ["client", "--connect", &connect, "--dtls", "1.3", "--groups", "x25519mlkem768"];
    let stderr = fails("fastshake client", &[&client[..], &psk[..]].concat());
    assert!(
        stderr.contains("the server refused our ClientHello with alert handshake_failure (we offered TLS_AES_128_GCM_SHA256"),
        "{stderr}"
    );
    assert!(stderr.contains("; groups x25519mlkem768)"), "{stderr}");
    let line = server.expect_stderr_line_with(&["refused:"]);
    assert!(line.starts_with("fastshake server: 127.0.0.1:"), "the line names the client: {line}");
    assert!(
        line.ends_with(
            "refused: no common group: the client offered x25519mlkem768; we support secp256r1 \
             (sent handshake_failure)"
        ),
        "{line}"
    );
    assert!(!server.stderr.text().contains("handshake done"), "{}", server.transcript());
}
