//! `fastshake server`, `client` and `demo` against each other: data, summaries, failures.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

#[test]
fn client_and_server_exchange_data_and_print_summaries() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    // Both ends by default speak both versions, so they agree on 1.3 with a PSK and an
    // ephemeral x25519 share (psk_dhe_ke), after the stateless cookie exchange.
    let mut client = FASTSHAKE.client(port, PSK_HEX, &[]);
    let done = "TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest)), full (not resumed)";
    client.expect_handshake_without_resend(&[done]);
    server.expect_handshake_without_resend(&[done]);

    for line in ["first line", "second line", "third line"] {
        client.write_line(line);
    }
    client.expect_stdout("first line\nsecond line\nthird line\n");
    client.finish(&[]);
    server.expect_stderr("closed by the peer (close_notify)");
    let stderr = client.stderr.text();
    assert!(stderr.contains("datagrams"), "{stderr}");
}

#[test]
fn server_without_echo_prints_what_each_client_sends() {
    let (server, port) = FASTSHAKE.server(&[]);
    let mut first = FASTSHAKE.client(port, PSK_HEX, &["--suite", GCM]);
    let mut second = FASTSHAKE.client(port, PSK_HEX, &["--suite", CCM8]);
    first.write_line("from the first client");
    second.write_line("from the second client");
    server.expect_stdout("from the first client\n");
    server.expect_stdout("from the second client\n");
    server.expect_handshake_without_resend(&[GCM]);
    server.expect_handshake_without_resend(&[CCM8]);
    for client in [&mut first, &mut second] {
        client.finish(&[]);
    }
}

#[test]
fn smallest_mtu_fragments_every_flight_and_still_connects() {
    // 64 B, the smallest MTU the engine accepts: well inside a 127-byte IEEE 802.15.4 frame.
    // Every flight, ClientHello included, must be split; the identity hint makes the server's
    // flight larger still.
    let (_server, port) =
        FASTSHAKE.server(&["--echo", "--mtu", "64", "--hint", "a-rather-long-identity-hint"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mtu", "64", "--verbose"]);
    client.write_and_see("small datagrams");
    client.finish(&[]);
    let trace = client.stderr.text();
    assert!(
        trace.contains("ClientHello (no cookie) [fragment 0.."),
        "a 64-byte MTU must split even the ClientHello:\n{trace}"
    );
    assert!(trace.contains("<- 127.0.0.1:") && trace.contains("[fragment"), "{trace}");
    // Every datagram either way, as the client's trace shows it ("-> ADDR N B: ..."), fits the MTU.
    for line in trace.lines().filter(|l| l.contains(" -> ") || l.contains(" <- ")) {
        let size: usize = line
            .split(" B: ")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unparsable trace line {line:?}"));
        assert!(size <= 64, "datagram of {size} B over a 64-byte MTU: {line}");
    }
}

/// Runs a client with `psk_hex` / `identity` against a fastshake server and returns its stderr
/// after checking that it failed.
fn failing_client(identity: &str, psk_hex: &str) -> String {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let mut command = FASTSHAKE.command();
    command.args(["client", "--connect", &format!("127.0.0.1:{port}"), "--psk-identity", identity]).args([
        "--psk",
        psk_hex,
        "--initial-retransmit-ms",
        "100",
        "--handshake-timeout",
        "3",
    ]);
    let mut client = Peer::spawn("fastshake client", command);
    let status = client.expect_exit();
    assert!(!status.success(), "{}", client.transcript());
    let stderr = client.stderr.text();
    assert!(!stderr.contains("handshake done"), "{stderr}");
    // The server names the failed session by its address and goes on serving.
    server.expect_stderr_line_with(&["fastshake server: 127.0.0.1:", ": session failed: "]);
    stderr
}

#[test]
fn wrong_key_fails_with_the_alert_named() {
    let stderr = failing_client(PSK_IDENTITY, WRONG_PSK_HEX);
    // The server could not verify the client's proof of the key (RFC 4279 §2 in 1.2, the PSK
    // binder in 1.3): decrypt_error, named as a PSK mismatch.
    let named = "the two sides hold different keys for PSK identity";
    assert!(stderr.contains(named) && stderr.contains("(decrypt_error received)"), "{stderr}");
}

#[test]
fn unknown_identity_fails_with_the_alert_named() {
    let stderr = failing_client("somebody-else", PSK_HEX);
    assert!(stderr.contains("alert unknown_psk_identity"), "{stderr}");
}

#[test]
fn silent_server_means_no_answer_after_retransmissions() {
    // A socket that receives and never answers.
    let silent = std::net::UdpSocket::bind(("127.0.0.1", 0)).unwrap();
    let port = silent.local_addr().unwrap().port();
    let mut client =
        FASTSHAKE.client(port, PSK_HEX, &["--initial-retransmit-ms", "100", "--handshake-timeout", "1"]);
    let status = client.expect_exit();
    assert!(!status.success(), "{}", client.transcript());
    let stderr = client.stderr.text();
    assert!(stderr.contains("no answer after"), "{stderr}");
    assert!(stderr.contains("retransmissions"), "{stderr}");
    // The client really did retransmit: more than one ClientHello reached the socket.
    silent.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    let mut received = 0;
    while silent.recv(&mut buf).is_ok() {
        received += 1;
    }
    assert!(received >= 2, "only {received} datagram(s) reached the silent server");
}

#[test]
fn bad_hex_key_is_a_usage_error() {
    let output = FASTSHAKE
        .command()
        .args(["client", "--connect", "127.0.0.1:9", "--psk-identity", "x", "--psk", "not-hex"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "clap exits with 2 on usage errors");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--psk"), "{stderr}");
    let output = FASTSHAKE.psk_server_command(&["--suite", "TLS_NULL"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown cipher suite"));
}

#[test]
fn demo_shows_the_handshake_and_the_echo() {
    let mut demo = Peer::spawn("fastshake demo", {
        let mut command = FASTSHAKE.command();
        command.args(["demo", "--mtu", "120"]);
        command
    });
    let status = demo.expect_exit();
    assert!(status.success(), "{}", demo.transcript());
    let out = demo.stdout.text();
    for expected in [
        "ClientHello (no cookie)",
        "HelloVerifyRequest (cookie",
        "ServerHelloDone",
        "ClientKeyExchange",
        "Finished (encrypted)",
        "client: handshake done",
        "server: handshake done",
        "got back \"hello, server\"",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in\n{out}");
    }
}

#[test]
fn a_line_longer_than_the_mtu_travels_in_several_records() {
    let (_server, port) = FASTSHAKE.server(&["--echo"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mtu", "500"]);
    let long_line: String = (0..3000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    client.write_line(&long_line);
    client.expect_stdout(&format!("{long_line}\n"));
    client.finish(&[]);
    assert_eq!(client.stdout.text(), format!("{long_line}\n"), "nothing lost, altered or repeated");
}

#[test]
fn server_stopped_by_sigterm_closes_its_sessions_with_close_notify() {
    let (mut server, port) = FASTSHAKE.server(&["--echo"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &[]);
    client.write_and_see("before the stop");
    server.terminate();
    // The client learns of the end from the close_notify, although its input is still open.
    let status = client.expect_exit();
    assert!(status.success(), "{}", client.transcript());
    assert!(client.stderr.text().contains("closed by the server (close_notify)"), "{}", client.transcript());
    assert!(server.expect_exit().success(), "{}", server.transcript());
    server.expect_stderr("shutting down, closing every session");
}

#[test]
fn a_server_rotating_its_cookie_key_every_second_still_admits_clients() {
    let (_server, port) = FASTSHAKE.server(&["--echo", "--cookie-rotation", "1"]);
    // Two rotations: a cookie key made after the server started, at every worker.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let mut client = FASTSHAKE.client(port, PSK_HEX, &[]);
    client.expect_handshake_without_resend(&["full (not resumed)"]);
    client.write_line("after two rotations");
    client.expect_stdout("after two rotations\n");
    client.finish(&[]);
}
