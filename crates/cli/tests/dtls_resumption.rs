//! Resumption at the command line: two `fastshake client` runs with one `--session-file`
//! against `fastshake server`, by ticket and by session ID.

#[path = "support/dtls_peers.rs"]
mod peers;
#[path = "support/dtls_pki.rs"]
mod pki;

use peers::*;
use pki::*;

/// One client run: a line out, its echo back, a clean exit; returns the client's stderr.
fn echo_run(port: u16, args: &[&str], line: &str) -> String {
    let mut client = fastshake_client_with(port, args);
    client.expect_stderr("handshake done");
    client.write_line(line);
    client.expect_stdout(line);
    client.close_stdin();
    assert!(client.expect_exit().success(), "{}", client.transcript());
    client.stderr()
}

/// Two client runs with one `--session-file`: the first is full and writes the file, the
/// second resumes `by` ("ticket" or "session ID").
fn two_runs_resume(server_extra: &[&str], client_extra: &[&str], by: &str) {
    let pki = Pki::generate("p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.push("--echo".into());
    server_args.extend(server_extra.iter().map(|s| s.to_string()));
    let (server, port) = fastshake_server_with(&strs(&server_args));
    let session_file = pki.scratch("client.session");
    let mut client_args = pki.fastshake_client_args();
    client_args.extend(["--session-file".into(), session_file.clone()]);
    client_args.extend(client_extra.iter().map(|s| s.to_string()));

    let first = echo_run(port, &strs(&client_args), "first run");
    assert!(first.contains("full (not resumed)"), "{first}");
    assert!(std::path::Path::new(&session_file).exists(), "the session file was not written:\n{first}");
    let second = echo_run(port, &strs(&client_args), "second run");
    assert!(second.contains(&format!("resumed by {by}")), "{second}");
    server.expect_stderr(&format!("resumed by {by}"));
}

#[test]
fn second_client_run_resumes_by_ticket() {
    two_runs_resume(&[], &[], "ticket");
}

#[test]
fn second_client_run_resumes_by_session_id_without_tickets() {
    two_runs_resume(&["--no-tickets"], &[], "session ID");
}

#[test]
fn a_client_that_asks_for_no_ticket_resumes_by_session_id() {
    two_runs_resume(&[], &["--no-tickets"], "session ID");
}
