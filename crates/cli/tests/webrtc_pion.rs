//! Interoperability of fastshake's WebRTC data channels with pion/webrtc v4 over loopback, both
//! ways: `fastshake webrtc connect` (our offerer: full ICE, controlling) against pion's answerer,
//! and pion's offerer against `fastshake webrtc serve` (ICE-lite). Signalling is HTTP (`POST
//! /offer`, application/sdp, the answer back with 201, no trickle); every message must come back
//! exactly once and intact. pion/webrtc v4 speaks DTLS 1.2 only, so each session is DTLS 1.2
//! whatever we offer or accept.
//!
//! The Go peer is built from `interop/pion-webrtc`; without Go or the module the tests skip,
//! unless `FASTSHAKE_REQUIRE_PION_WEBRTC=1`. Every address is 127.0.0.1 with port 0, read back
//! from what each side prints; pion gathers loopback host candidates only, no mDNS, no STUN.

use fastshake_testkit::peers::{pion, run, Fastshake, Finished, Peer};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Messages per session, and their size: larger than one SCTP packet, so each is fragmented.
const MESSAGES: &str = "50";
const SIZE: &str = "3000";

/// How long a starting process may take to print its address, and a whole session to run.
const START: Duration = Duration::from_secs(20);
const SESSION: Duration = Duration::from_secs(40);

/// pion/webrtc v4 has no DTLS 1.3 (its tests pin pion/dtls v3).
const PION_DTLS: &str = "DTLS 1.2";

/// The whole lines of `text` (one still being written is left out).
fn whole_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n').filter_map(|line| line.strip_suffix('\n'))
}

/// Waits until `peer` has printed `count` whole lines containing `needle` on standard output;
/// returns them.
fn stdout_lines(peer: &Peer, needle: &str, count: usize) -> Vec<String> {
    let matching = |text: &str| -> Vec<String> {
        whole_lines(text).filter(|line| line.contains(needle)).map(str::to_owned).collect()
    };
    if !peer.stdout.wait_until(START, |text| matching(text).len() >= count) {
        panic!("{} never printed {count} line(s) with {needle:?}\n{}", peer.name, peer.transcript());
    }
    matching(&peer.stdout.text())
}

/// `pion-webrtc-peer serve` on 127.0.0.1, any port, answering with DTLS role `role`; returns it
/// and its offer URL.
fn pion_server(binary: &Path, role: &str) -> (Peer, String) {
    let args = ["serve", "--http", "127.0.0.1:0", "--dtls-role", role];
    let server = Peer::start(binary, &args);
    let line = stdout_lines(&server, "listening http://", 1).remove(0);
    let base = line.trim().trim_start_matches("listening ").to_owned();
    (server, format!("{base}/offer"))
}

/// `fastshake webrtc serve` on 127.0.0.1, any port (HTTP and UDP); returns it and its offer URL.
fn our_server() -> (Peer, String) {
    let server = FASTSHAKE.spawn(&["webrtc", "serve", "--http", "127.0.0.1:0"]);
    // "webrtc: page and signalling at http://127.0.0.1:PORT/ (POST /offer), sessions on udp ..."
    let line = stdout_lines(&server, "webrtc: page and signalling at http://", 1).remove(0);
    let http = line.split("http://").nth(1).and_then(|rest| rest.split('/').next()).expect("an address");
    (server, format!("http://{http}/offer"))
}

/// `fastshake webrtc connect URL --dtls DTLS`, run to its end.
fn our_client(url: &str, dtls: &str) -> Finished {
    let mut command = FASTSHAKE.command();
    command.args(["webrtc", "connect", url, "--dtls", dtls, "--messages", MESSAGES, "--size", SIZE]);
    command.args(["--timeout", "20"]);
    run("fastshake webrtc connect", command, SESSION)
}

/// `pion-webrtc-peer connect URL`, run to its end.
fn pion_client(binary: &Path, url: &str) -> Finished {
    let mut command = Command::new(binary);
    command.args(["connect", url, "--messages", MESSAGES, "--size", SIZE, "--timeout", "20s"]);
    run("pion-webrtc-peer connect", command, SESSION)
}

/// A cipher suite's name without separators or case, so that names written either way compare
/// (both print the IANA name, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, today).
fn suite_key(name: &str) -> String {
    let key: String = name.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_lowercase();
    key.trim_start_matches("tls").to_owned()
}

/// What pion's "dtls connected: DTLS 1.2 SUITE" line says: the version and the suite.
fn pion_dtls(line: &str) -> (&str, &str) {
    let rest = line.split("dtls connected: ").nth(1).unwrap_or_else(|| panic!("not a DTLS line: {line}"));
    rest.rsplit_once(' ').unwrap_or_else(|| panic!("no suite in {line}"))
}

/// Our client against pion's answerer: each session in DTLS 1.2 (also when we offer both
/// versions), every message echoed once, and both sides agree on the suite.
fn our_client_with_pion_server(role: &str) {
    let Some(binary) = pion::webrtc_peer() else { return };
    let (server, url) = pion_server(&binary, role);
    let offered = ["both", "1.2"];
    for (session, dtls) in offered.into_iter().enumerate() {
        let client = our_client(&url, dtls);
        let report = format!("--- ours (--dtls {dtls}):\n{}\n{}", client.text(), server.transcript());
        assert!(client.status.success(), "our client failed: {}\n{report}", client.status);
        let stdout = String::from_utf8_lossy(&client.stdout);
        let ours = stdout.lines().find(|line| line.starts_with("DTLS ")).expect("our DTLS line");
        assert!(ours.starts_with(&format!("{PION_DTLS} ")), "pion answers DTLS 1.2 only\n{report}");
        let summary = format!("{MESSAGES} of {MESSAGES} messages echoed, 0 duplicated or changed");
        assert!(stdout.contains(&summary), "{report}");
        let theirs = stdout_lines(&server, "dtls connected: ", session + 1).remove(session);
        let (version, suite) = pion_dtls(&theirs);
        assert_eq!(version, PION_DTLS, "{report}");
        let our_suite = ours.split_whitespace().nth(2).expect("our suite");
        assert_eq!(suite_key(suite), suite_key(our_suite), "one suite on both sides\n{report}");
    }
    stdout_lines(&server, "channel fastshake opened", offered.len());
}

/// pion answers `a=setup:passive` (it is the DTLS server), which RFC 5763 §5 allows.
#[test]
fn our_client_with_pion_server_as_dtls_server() {
    our_client_with_pion_server("server");
}

/// pion's default answer, `a=setup:active` (RFC 5763 §5 recommends it, browsers answer so too):
/// our offerer, having sent `actpass`, is then the DTLS server.
#[test]
fn our_client_with_pion_server_as_dtls_client() {
    our_client_with_pion_server("auto");
}

/// pion's offerer against our ICE-lite server: DTLS 1.2, every message echoed once, and our
/// server saw the session's handshake and the channel "pion" opened.
#[test]
fn pion_client_with_our_server() {
    let Some(binary) = pion::webrtc_peer() else { return };
    let (server, url) = our_server();
    let client = pion_client(&binary, &url);
    let report = format!("--- pion:\n{}\n{}", client.text(), server.transcript());
    assert!(client.status.success(), "pion's client failed: {}\n{report}", client.status);
    let stdout = String::from_utf8_lossy(&client.stdout);
    let summary = format!("echoed {MESSAGES} of {MESSAGES}, duplicated 0, changed 0");
    assert!(stdout.contains(&summary), "{report}");
    let theirs = stdout.lines().find(|line| line.contains("dtls connected: ")).expect("pion's DTLS line");
    let (version, suite) = pion_dtls(theirs);
    assert_eq!(version, PION_DTLS, "{report}");
    // "session 1: DTLS 1.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 group - in 1.4 ms"
    let ours = stdout_lines(&server, &format!(": {PION_DTLS} "), 1).remove(0);
    let our_suite = ours.split(&format!("{PION_DTLS} ")).nth(1).and_then(|r| r.split(' ').next());
    assert_eq!(suite_key(suite), suite_key(our_suite.expect("our suite")), "{report}");
    let session = ours.split(':').next().expect("session N");
    let opened = stdout_lines(&server, "\"pion\" opened", 1).remove(0);
    assert!(opened.starts_with(&format!("{session}: channel ")), "the same session\n{report}");
}

/// The peer itself, client against server, without fastshake: what the tests above compare
/// against, and the check that the peer builds and runs here.
#[test]
fn pion_client_with_pion_server() {
    let Some(binary) = pion::webrtc_peer() else { return };
    let (server, url) = pion_server(&binary, "auto");
    let client = pion_client(&binary, &url);
    let report = format!("--- pion client:\n{}\n{}", client.text(), server.transcript());
    assert!(client.status.success(), "{report}");
    let summary = format!("echoed {MESSAGES} of {MESSAGES}, duplicated 0, changed 0");
    assert!(String::from_utf8_lossy(&client.stdout).contains(&summary), "{report}");
    let line = stdout_lines(&server, "dtls connected: ", 1).remove(0);
    let (version, _) = pion_dtls(&line);
    assert_eq!(version, PION_DTLS, "{report}");
    stdout_lines(&server, "channel pion opened", 1);
}
