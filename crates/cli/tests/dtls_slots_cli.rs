//! `fastshake server --max-sessions R --when-full POLICY` (seed 002 session slots) against
//! `fastshake client`: a client beyond the slots is refused at once, or a session makes room.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

// Slots are per worker; --max-sessions without --workers runs one, so that R is the server's limit.

#[test]
fn full_server_refuses_a_second_client_which_names_the_reason() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--max-sessions", "1", "--when-full", "refuse"]);
    let mut first = FASTSHAKE.client(port, PSK_HEX, &[]);
    first.expect_handshake_without_resend(&[]);

    let mut second = FASTSHAKE.client(port, PSK_HEX, &[]);
    let status = second.expect_exit();
    assert!(!status.success(), "{}", second.transcript());
    let stderr = second.stderr.text();
    assert!(stderr.contains("no free session slot on the server"), "{stderr}");
    assert!(stderr.contains("internal_error"), "the alert is named: {stderr}");
    server.expect_stderr_line_with(&["fastshake server: 127.0.0.1:", "refused, no free session slot"]);

    // The first session goes on.
    first.write_and_see("still served");
    first.finish(&[&server]);
}

#[test]
fn lru_server_closes_the_first_session_to_make_room_for_the_second() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--max-sessions", "1", "--when-full", "lru"]);
    let mut first = FASTSHAKE.client(port, PSK_HEX, &[]);
    first.expect_handshake_without_resend(&[]);

    let mut second = FASTSHAKE.client(port, PSK_HEX, &[]);
    second.expect_handshake_without_resend(&[]);
    server.expect_stderr_line_with(&["evicted (lru) to make room for 127.0.0.1:"]);
    // The first client is told, and ends cleanly.
    first.expect_stderr("closed by the server (close_notify)");
    let status = first.expect_exit();
    assert!(status.success(), "{}", first.transcript());

    second.write_and_see("in the freed slot");
    second.finish(&[&server]);
}
