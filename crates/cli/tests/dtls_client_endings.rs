//! How `fastshake client` ends when its session cannot go on, real processes on loopback: a
//! server that dies after the handshake (the failed reconnection named, the unanswered records
//! counted, a non-zero exit), a close while a reconnection is under way, and a server that
//! declines the mobility asked for.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;
use std::process::Command;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Quick reconnections: a short app timeout, quick retransmissions.
const QUICK_RECONNECT: [&str; 4] = ["--app-timeout", "300", "--initial-retransmit-ms", "100"];

/// Sends `signal` (STOP, CONT) to `peer`.
fn signal(peer: &Peer, signal: &str) {
    let status = Command::new("kill").args([&format!("-{signal}"), &peer.pid().to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "cannot send SIG{signal} to {}", peer.name);
}

/// Lines of a client's trace (`stderr`) that are ClientHellos it sent.
fn client_hellos_sent(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains(": -> ") && l.contains("ClientHello")).count()
}

#[test]
fn a_client_whose_server_dies_names_the_failed_reconnection_and_fails() {
    for dtls in ["1.2", "1.3"] {
        let (server, port) = FASTSHAKE.server(&["--echo"]);
        let mut client = FASTSHAKE.client(port, PSK_HEX, &[&["--dtls", dtls][..], &QUICK_RECONNECT].concat());
        client.echo_line("a");
        // SIGKILL: no close_notify, the port closes.
        drop(server);
        client.write_line("b");
        client.write_line("c");
        let status = client.expect_exit();
        let stderr = client.stderr.text();
        assert!(!status.success(), "DTLS {dtls}: lines b and c were never answered\n{}", client.transcript());
        for part in [
            "fastshake: error: the session failed: the server stopped answering (nothing for 300 ms after \
             records were sent): reconnecting failed: ",
            &format!("nothing listens at 127.0.0.1:{port}: ICMP port unreachable, 3 times in a row"),
            "; 2 record(s) sent since the server last answered were never answered",
        ] {
            assert!(stderr.contains(part), "DTLS {dtls}: {part:?} missing\n{}", client.transcript());
        }
        assert_eq!(client.stdout.text(), "a\n", "DTLS {dtls}: {}", client.transcript());
    }
}

#[test]
fn a_client_closed_while_reconnecting_to_a_silent_server_says_what_went_unanswered() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let mut client =
        FASTSHAKE.client(port, PSK_HEX, &[&["--dtls", "1.2", "--verbose"][..], &QUICK_RECONNECT].concat());
    client.echo_line("a");
    // Stopped, the server neither answers nor lets the kernel refuse: silence.
    signal(&server, "STOP");
    let hellos = client_hellos_sent(&client.stderr.text());
    client.write_line("b");
    if !client.stderr.wait_until(STEP, |text| client_hellos_sent(text) > hellos) {
        panic!("no reconnection started\n{}", client.transcript());
    }
    client.close_stdin();
    let status = client.expect_exit();
    signal(&server, "CONT");
    assert!(!status.success(), "line b was never answered\n{}", client.transcript());
    let line = client.expect_stderr_line_with(&[
        "fastshake: error: closing the session failed: closed while reconnecting",
    ]);
    assert!(line.contains("the server stopped answering (nothing for 300 ms"), "{line}");
    assert!(line.ends_with("1 record(s) sent since the server last answered were never answered"), "{line}");
}

#[test]
fn a_client_whose_server_declines_its_mobility_is_warned_and_reconnects_after_a_move() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let mut client = FASTSHAKE.client(
        port,
        PSK_HEX,
        &[&["--mobility", "ipc", "--rebind-after", "1"][..], &QUICK_RECONNECT].concat(),
    );
    let warning =
        client.expect_stderr_line_with(&["warning: the server did not agree to port_move (--mobility ipc)"]);
    assert!(warning.contains("this session cannot follow a change of our address"), "{warning}");
    assert!(warning.contains("when records go unanswered for 300 ms (--app-timeout)"), "{warning}");
    client.echo_line("before the move");
    client.expect_stderr("moved from");
    // The standard server knows the session by the old address: only a new session carries it.
    client.echo_line("after the move");
    client.expect_stderr("no answer for the app timeout, reconnected");
    client.finish(&[&server]);
    assert_eq!(client.stdout.text(), "before the move\nafter the move\n", "{}", client.transcript());
    assert!(client.stderr.text().contains("1 reconnection(s)"), "{}", client.transcript());
}

#[test]
fn the_mobility_warning_names_what_was_declined_and_only_then() {
    // A cid server issues no port_move; an ipc server issues no connection IDs.
    for (server_mode, client_mode, declined) in
        [("cid", "tcs", "port_move"), ("ipc", "cid", "connection IDs")]
    {
        let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", server_mode]);
        let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mobility", client_mode, "--app-timeout", "0"]);
        let warning = client.expect_stderr_line_with(&[&format!(
            "warning: the server did not agree to {declined} (--mobility {client_mode})"
        )]);
        assert!(warning.contains("with --app-timeout 0, what is sent after a move is lost"), "{warning}");
        client.echo_line("still served");
        client.finish(&[&server]);
    }
    // Agreed: no warning.
    let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", "ipc"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mobility", "ipc"]);
    client.echo_line("served");
    client.finish(&[&server]);
    assert!(!client.stderr.text().contains("warning"), "{}", client.transcript());
}
