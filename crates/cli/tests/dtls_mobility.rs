//! A client that moves mid-session (a handover on loopback: its socket moves to a new port or to
//! 127.0.0.2), against `fastshake server --mobility MODE --echo`, real processes on loopback.
//! With ipc, tcs and cid the session goes on (one handshake, the server reports the move); with
//! standard DTLS the client reconnects after its app timeout and resends what went unanswered.
//! Every line comes back exactly once in each case.

#[path = "support/dtls_peers.rs"]
mod peers;

use peers::*;

/// Lines sent before and after the move.
const BEFORE_MOVE: usize = 3;
const AFTER_MOVE: usize = 4;

fn line(i: usize) -> String {
    format!("message {i} of the moving client")
}

/// Runs one client through a move; returns the server and the client, both done.
fn move_mid_session(mode: &str, rebind_to: Option<&str>, extra_client: &[&str]) -> (Peer, Peer) {
    let (server, port) = fastshake_server(&["--echo", "--mobility", mode]);
    let after = BEFORE_MOVE.to_string();
    let mut client_args = vec!["--mobility", mode, "--rebind-after", &after];
    if let Some(to) = rebind_to {
        client_args.extend(["--rebind-to", to]);
    }
    client_args.extend_from_slice(extra_client);
    let mut client = fastshake_client(port, PSK_HEX, &client_args);
    client.expect_stderr("handshake done");
    for i in 1..=BEFORE_MOVE {
        client.write_line(&line(i));
    }
    client.expect_stdout(&format!("{}\n", line(BEFORE_MOVE)));
    // The client moves when the last echo of the first batch arrives.
    client.expect_stderr("moved from");
    for i in BEFORE_MOVE + 1..=BEFORE_MOVE + AFTER_MOVE {
        client.write_line(&line(i));
    }
    client.expect_stdout(&format!("{}\n", line(BEFORE_MOVE + AFTER_MOVE)));
    client.close_stdin();
    let status = client.expect_exit();
    assert!(status.success(), "client failed\n{}\n{}", client.transcript(), server.transcript());
    (server, client)
}

/// Every line came back exactly once.
fn assert_each_line_echoed_once(client: &Peer, server: &Peer) {
    let stdout = client.stdout();
    for i in 1..=BEFORE_MOVE + AFTER_MOVE {
        let copies = stdout.lines().filter(|l| *l == line(i)).count();
        assert_eq!(
            copies,
            1,
            "line {i} echoed {copies} times\n{}\n{}",
            client.transcript(),
            server.transcript()
        );
    }
}

/// The session survived the move: one handshake, the server saw the client move, the client
/// never reconnected.
fn assert_same_session(server: &Peer, client: &Peer) {
    let both = format!("{}\n{}", client.transcript(), server.transcript());
    assert_eq!(server.stderr().matches("handshake done").count(), 1, "{both}");
    assert_eq!(client.stderr().matches("handshake done").count(), 1, "{both}");
    server.expect_stderr_line_with(&["client", "moved from", "to 127.0.0."]);
    assert!(client.stderr().contains("0 reconnection(s)"), "{both}");
}

#[test]
fn standard_dtls_reconnects_after_the_app_timeout_and_resends() {
    let (server, client) = move_mid_session("standard", None, &["--app-timeout", "300"]);
    assert_each_line_echoed_once(&client, &server);
    let both = format!("{}\n{}", client.transcript(), server.transcript());
    assert_eq!(client.stderr().matches("reconnected").count(), 1, "{both}");
    assert!(client.stderr().contains("1 reconnection(s)"), "{both}");
    // The second handshake resumed the first session.
    assert_eq!(server.stderr().matches("handshake done").count(), 2, "{both}");
    assert_eq!(server.stderr().matches("resumed by").count(), 1, "{both}");
    assert!(!server.stderr().contains("moved from"), "a standard session never moves\n{both}");
}

#[test]
fn standard_dtls_can_reconnect_with_a_full_handshake() {
    let (server, client) =
        move_mid_session("standard", None, &["--app-timeout", "300", "--reconnect", "full"]);
    assert_each_line_echoed_once(&client, &server);
    let both = format!("{}\n{}", client.transcript(), server.transcript());
    assert_eq!(server.stderr().matches("handshake done").count(), 2, "{both}");
    assert!(!server.stderr().contains("resumed by"), "{both}");
}
