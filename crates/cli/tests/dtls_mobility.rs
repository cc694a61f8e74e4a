//! A client that moves mid-session (a handover on loopback: its socket moves to a new port or to
//! 127.0.0.2), against `fastshake server --mobility MODE --echo`, real processes on loopback.
//! With ipc, tcs and cid the session goes on (one handshake, the server reports the move; ipc
//! and tcs in DTLS 1.3 and 1.2); with
//! standard DTLS the client reconnects after its app timeout and resends what went unanswered.
//! Every line comes back exactly once in each case.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Lines sent before and after the move.
const BEFORE_MOVE: usize = 3;
const AFTER_MOVE: usize = 4;

fn line(i: usize) -> String {
    format!("message {i} of the moving client")
}

/// Runs one client through a move; returns the server and the client, both done.
fn move_mid_session(mode: &str, rebind_to: Option<&str>, extra_client: &[&str]) -> (Peer, Peer) {
    let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", mode, "--workers", "2"]);
    let after = BEFORE_MOVE.to_string();
    let mut client_args = vec!["--mobility", mode, "--rebind-after", &after];
    if let Some(to) = rebind_to {
        client_args.extend(["--rebind-to", to]);
    }
    client_args.extend_from_slice(extra_client);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &client_args);
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
    client.finish(&[&server]);
    (server, client)
}

/// Every line came back exactly once.
fn assert_each_line_echoed_once(client: &Peer, server: &Peer) {
    let stdout = client.stdout.text();
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
    assert_eq!(server.stderr.text().matches("handshake done").count(), 1, "{both}");
    assert_eq!(client.stderr.text().matches("handshake done").count(), 1, "{both}");
    server.expect_stderr_line_with(&["client", "moved from", "to 127.0.0."]);
    assert!(client.stderr.text().contains("0 reconnection(s)"), "{both}");
}

#[test]
fn standard_dtls_reconnects_after_the_app_timeout_and_resends() {
    let (server, client) = move_mid_session("standard", None, &["--app-timeout", "300"]);
    assert_each_line_echoed_once(&client, &server);
    let both = format!("{}\n{}", client.transcript(), server.transcript());
    assert_eq!(client.stderr.text().matches("reconnected").count(), 1, "{both}");
    assert!(client.stderr.text().contains("1 reconnection(s)"), "{both}");
    // The second handshake resumed the first session.
    assert_eq!(server.stderr.text().matches("handshake done").count(), 2, "{both}");
    assert_eq!(server.stderr.text().matches("resumed by").count(), 1, "{both}");
    assert!(!server.stderr.text().contains("moved from"), "a standard session never moves\n{both}");
}

#[test]
fn standard_dtls_can_reconnect_with_a_full_handshake() {
    let (server, client) =
        move_mid_session("standard", None, &["--app-timeout", "300", "--reconnect", "full"]);
    assert_each_line_echoed_once(&client, &server);
    let both = format!("{}\n{}", client.transcript(), server.transcript());
    assert_eq!(server.stderr.text().matches("handshake done").count(), 2, "{both}");
    assert!(!server.stderr.text().contains("resumed by"), "{both}");
}

/// The port in `text` right after `prefix` (e.g. "127.0.0.1:").
fn port_after(text: &str, prefix: &str) -> Option<u16> {
    let rest = text.split(prefix).nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The port the client's trace shows a datagram naming `what` came from.
fn port_of_received(client: &Peer, what: &str) -> Option<u16> {
    client
        .stderr
        .text()
        .lines()
        .find(|l| l.contains("<- 127.0.0.1:") && l.contains(what))
        .and_then(|l| port_after(l, "<- 127.0.0.1:"))
}

/// The versions the session-socket modes run in: DTLS 1.3 (both ends' default) and 1.2, with
/// what the client's trace calls an application record in each.
const VERSIONS: [(&str, &str); 2] = [("both", "encrypted record (epoch 3"), ("1.2", "ApplicationData")];

#[test]
fn ipc_session_survives_a_move_and_answers_from_its_own_port() {
    for (dtls, _) in VERSIONS {
        let (server, client) = move_mid_session("ipc", None, &["--verbose", "--dtls", dtls]);
        assert_each_line_echoed_once(&client, &server);
        assert_same_session(&server, &client);
        let both = format!("{}\n{}", client.transcript(), server.transcript());
        let welcome =
            port_after(&server.stderr.text(), "listening on 127.0.0.1:").expect("the server's port");
        let own =
            port_after(&server.stderr.text(), "own socket 127.0.0.1:").unwrap_or_else(|| panic!("{both}"));
        assert_ne!(own, welcome, "{both}");
        // Already the ServerHello comes from the session's own port, and the client follows it
        // there (in 1.3 after the welcome port's stateless HelloRetryRequest).
        assert_eq!(port_of_received(&client, "ServerHello"), Some(own), "{both}");
        assert!(client.stderr.text().contains(&format!("following the server to 127.0.0.1:{own}")), "{both}");
    }
}

#[test]
fn tcs_session_moves_to_its_own_port_after_the_handshake_and_survives_a_move() {
    for (dtls, data) in VERSIONS {
        let (server, client) = move_mid_session("tcs", None, &["--verbose", "--dtls", dtls]);
        assert_each_line_echoed_once(&client, &server);
        assert_same_session(&server, &client);
        let both = format!("{}\n{}", client.transcript(), server.transcript());
        let welcome =
            port_after(&server.stderr.text(), "listening on 127.0.0.1:").expect("the server's port");
        // The handshake runs on the welcome port; the data then comes from the session's port.
        assert_eq!(port_of_received(&client, "ServerHello"), Some(welcome), "{both}");
        let own =
            port_after(&server.stderr.text(), "own socket 127.0.0.1:").unwrap_or_else(|| panic!("{both}"));
        assert_ne!(own, welcome, "{both}");
        let stderr = client.stderr.text();
        let last_data = stderr
            .lines()
            .rev()
            .find(|l| l.contains("<- 127.0.0.1:") && l.contains(data))
            .and_then(|l| port_after(l, "<- 127.0.0.1:"));
        assert_eq!(last_data, Some(own), "{both}");
    }
}

#[test]
fn cid_session_survives_a_move_to_another_address() {
    let (server, client) = move_mid_session("cid", Some("127.0.0.2:0"), &[]);
    assert_each_line_echoed_once(&client, &server);
    assert_same_session(&server, &client);
    server.expect_stderr_line_with(&["moved from 127.0.0.1:", "to 127.0.0.2:"]);
}

#[test]
fn a_tcs_client_that_does_not_offer_port_move_stays_on_the_welcome_port() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", "tcs"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mobility", "standard"]);
    client.echo_line("hello");
    server.expect_stderr_line_with(&["client", "stays on the welcome port"]);
    client.finish(&[]);
}

#[test]
fn an_ipc_server_serves_a_client_without_port_move_on_the_welcome_port() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", "ipc"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mobility", "standard"]);
    client.echo_line("hello");
    server.expect_stderr_line_with(&["client", "stays on the welcome port", "port_move"]);
    client.finish(&[]);
}

/// The UDP sockets of this host as `ss -uanH` lists them: (state, local, peer).
fn udp_sockets() -> Vec<(String, String, String)> {
    let output = std::process::Command::new("ss").args(["-uanH"]).output().expect("run ss (iproute2)");
    assert!(output.status.success(), "ss failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [state, _, _, local, peer, ..] => {
                    Some((state.to_string(), local.to_string(), peer.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

/// Waits (bounded) until `holds` is true of the host's UDP sockets.
fn wait_for_sockets(what: &str, holds: impl Fn(&[(String, String, String)]) -> bool) {
    let deadline = std::time::Instant::now() + STEP;
    while std::time::Instant::now() < deadline {
        if holds(&udp_sockets()) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("never saw {what}: {:?}", udp_sockets());
}

/// The client port the server's handshake line names.
fn client_port(server: &Peer) -> u16 {
    server
        .stderr
        .text()
        .lines()
        .find(|l| l.contains(": handshake done"))
        .and_then(|l| port_after(l, "fastshake server: 127.0.0.1:"))
        .unwrap_or_else(|| panic!("no handshake line\n{}", server.transcript()))
}

#[test]
fn a_tcs_handshake_runs_on_a_socket_connected_to_the_client_that_closes_with_the_session() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", "tcs"]);
    // A standard client stays on its temporary socket for the whole session.
    let mut client = FASTSHAKE.client(port, PSK_HEX, &[]);
    client.echo_line("hello");
    server.expect_stderr("handshake done");
    let (welcome, peer) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{}", client_port(&server)));
    let connected = |s: &[(String, String, String)]| s.iter().any(|(_, l, p)| *l == welcome && *p == peer);
    wait_for_sockets("the temporary socket connected to the client", connected);
    client.finish(&[]);
    server.expect_stderr("closed by the peer");
    wait_for_sockets("the temporary socket closed", |s| !connected(s));
    // The welcome socket stays.
    assert!(udp_sockets().iter().any(|(_, l, p)| *l == welcome && p.ends_with(":*")));
}

#[test]
fn session_ports_close_with_their_sessions() {
    for mode in ["ipc", "tcs"] {
        let (server, port) = FASTSHAKE.server(&["--echo", "--mobility", mode]);
        let mut client = FASTSHAKE.client(port, PSK_HEX, &["--mobility", mode]);
        client.echo_line("hello");
        // The server reports its own socket once the session sends from it. In DTLS 1.3 the
        // client's first line can reach the server with its Finished, before a TCS server
        // announces its port: a line after the client followed is answered from there.
        client.expect_stderr("following the server to");
        client.echo_line("from the session's port");
        server.expect_stderr("own socket 127.0.0.1:");
        let own = port_after(&server.stderr.text(), "own socket 127.0.0.1:").expect("the session's port");
        let own_local = format!("127.0.0.1:{own}");
        let welcome = format!("127.0.0.1:{port}");
        let has_own = |s: &[(String, String, String)]| s.iter().any(|(_, l, _)| *l == own_local);
        wait_for_sockets("the session's own socket", has_own);
        if mode == "tcs" {
            // Once the client uses the new port, the temporary socket has gone.
            let temporary = |s: &[(String, String, String)]| {
                s.iter().any(|(_, l, p)| *l == welcome && !p.ends_with(":*"))
            };
            wait_for_sockets("the temporary socket gone after the move", |s| !temporary(s));
        }
        client.close_stdin();
        assert!(client.expect_exit().success(), "{mode}: {}", client.transcript());
        server.expect_stderr("closed by the peer");
        wait_for_sockets("the session's socket closed", |s| !has_own(s));
    }
}
