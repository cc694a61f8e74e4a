//! Resumption at the command line: two `fastshake client` runs with one `--session-file`
//! against `fastshake server`, by ticket (DTLS 1.3 and 1.2) and by session ID (1.2).

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Two client runs with one `--session-file`: the first is full and writes the file, the
/// second resumes `by` ("ticket" or "session ID").
fn two_runs_resume(server_extra: &[&str], client_extra: &[&str], by: &str) {
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.push("--echo".into());
    server_args.extend(server_extra.iter().map(|s| s.to_string()));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let session_file = pki.scratch("client.session");
    let mut client_args = pki.fastshake_client_args();
    client_args.extend(["--session-file".into(), session_file.clone()]);
    client_args.extend(client_extra.iter().map(|s| s.to_string()));

    let (first, _) = FASTSHAKE.resumed_by_session_file(port, &strs(&client_args), by);
    assert!(std::path::Path::new(&session_file).exists(), "the session file was not written:\n{first}");
    server.expect_stderr(&format!("resumed by {by}"));
    // The file still holds a resumable session (a new ticket replaced the old one).
    let third = FASTSHAKE.echo_run(port, &strs(&client_args), "third run");
    assert!(third.contains(&format!("resumed by {by}")), "{third}");
}

#[test]
fn a_corrupt_session_file_costs_a_full_handshake_not_an_error() {
    let pki = Pki::generate(FASTSHAKE, "p256", 1);
    let mut server_args = pki.fastshake_server_args();
    server_args.push("--echo".into());
    let (_server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let session_file = pki.scratch("corrupt.session");
    std::fs::write(&session_file, b"not a session").unwrap();
    let mut client_args = pki.fastshake_client_args();
    client_args.extend(["--session-file".into(), session_file]);
    let first = FASTSHAKE.echo_run(port, &strs(&client_args), "after a corrupt file");
    assert!(first.contains("ignoring the session in"), "{first}");
    assert!(first.contains("full (not resumed)"), "{first}");
    let second = FASTSHAKE.echo_run(port, &strs(&client_args), "after the rewrite");
    assert!(second.contains("resumed by ticket"), "{second}");
}

#[test]
fn second_client_run_resumes_by_ticket() {
    two_runs_resume(&[], &[], "ticket");
    two_runs_resume(&[], &["--dtls", "1.2"], "ticket");
}

#[test]
fn second_client_run_resumes_by_session_id_without_tickets() {
    // Session IDs are DTLS 1.2's; DTLS 1.3 resumes by ticket only (RFC 8446 §2.2).
    two_runs_resume(&["--no-tickets"], &["--dtls", "1.2"], "session ID");
}

#[test]
fn a_client_that_asks_for_no_ticket_resumes_by_session_id() {
    two_runs_resume(&[], &["--no-tickets", "--dtls", "1.2"], "session ID");
}

// ---------------------------------------------------------------------------------------------
// DTLS 1.3: the ticket comes after the handshake; 0-RTT early data.

/// One `fastshake client --dtls 1.3 --early-data` run: the line is written before the
/// handshake (it goes as early data or, refused, after it); returns stderr and how many times
/// the echo came back.
fn early_run(port: u16, args: &[&str], line: &str, summary: &[&str]) -> (String, usize) {
    let mut client = FASTSHAKE.client_with(port, args);
    client.write_line(line);
    client.expect_handshake_without_resend(summary);
    client.expect_stdout(line);
    client.finish(&[]);
    let echoes = client.stdout.text().matches(line).count();
    (client.stderr.text(), echoes)
}

#[test]
fn a_session_file_resumes_dtls13_and_sends_the_first_line_as_early_data() {
    // The server with its default versions; the client offers 1.3 and 1.2 and the server
    // picks 1.3; --early-data alone makes the client offer 1.3 only.
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.extend(["--echo", "--early-data"].map(String::from));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let session_file = pki.scratch("client13.session");
    let mut client_args = pki.fastshake_client_args();
    client_args.extend(["--session-file".into(), session_file.clone()]);
    let both = [&client_args[..], &["--dtls".into(), "both".into()]].concat();

    let first = FASTSHAKE.echo_run(port, &strs(&both), "first run");
    assert!(first.contains("(DTLS 1.3;") && first.contains("full (not resumed)"), "{first}");
    assert!(first.contains("kept the server's DTLS 1.3 ticket"), "{first}");
    let second = FASTSHAKE.echo_run(port, &strs(&both), "second run");
    assert!(second.contains("resumed by ticket"), "{second}");
    assert!(!second.contains("0-RTT"), "no early data without --early-data: {second}");
    server.expect_stderr("resumed by ticket");

    client_args.push("--early-data".into());
    let (third, echoes) =
        early_run(port, &strs(&client_args), "early line", &["resumed by ticket, 0-RTT accepted"]);
    assert_eq!(echoes, 1, "{third}");
    server.expect_stderr("0-RTT accepted");

    // A server that takes no early data (and, new, cannot open the ticket): the line is refused
    // as early data and sent after the full handshake, once.
    let mut plain_args = pki.fastshake_server_args();
    plain_args.push("--echo".into());
    let (_plain, plain_port) = FASTSHAKE.server_with(&strs(&plain_args));
    let (fourth, echoes) = early_run(plain_port, &strs(&client_args), "refused line", &["0-RTT refused"]);
    assert!(fourth.contains("full (not resumed)"), "{fourth}");
    assert_eq!(echoes, 1, "{fourth}");
}

#[test]
fn every_worker_takes_the_early_data_of_tickets_any_worker_issued() {
    // Each run's new port lands on either worker (SO_REUSEPORT), the one that issued its
    // ticket or the other: the workers share one early-data register, so every run's line goes
    // as 0-RTT, and once.
    let pki = Pki::generate(FASTSHAKE, "p256", 1);
    let mut server_args = pki.fastshake_server_args();
    server_args.extend(["--echo", "--early-data", "--workers", "2"].map(String::from));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let session_file = pki.scratch("workers13.session");
    let mut client_args = pki.fastshake_client_args();
    client_args.extend(["--session-file".into(), session_file]);
    let first = FASTSHAKE.echo_run(port, &strs(&client_args), "first run");
    assert!(first.contains("kept the server's DTLS 1.3 ticket"), "{first}");
    client_args.push("--early-data".into());
    for run in 0..6 {
        let line = format!("early line {run}");
        let (stderr, echoes) =
            early_run(port, &strs(&client_args), &line, &["resumed by ticket, 0-RTT accepted"]);
        assert_eq!(echoes, 1, "{stderr}");
    }
    let accepted = server.stderr.text().matches("0-RTT accepted").count();
    assert_eq!(accepted, 6, "{}", server.transcript());
}

// ---------------------------------------------------------------------------------------------
// Resumption with OpenSSL and GnuTLS, as real processes.

/// `openssl s_client` to our server: one line echoed, then close; `session` is `-sess_out FILE`
/// or `-sess_in FILE` (and `-no_ticket` when asked). Returns s_client's output.
fn openssl_s_client_run(pki: &Pki, port: u16, session: &[&str], line: &str) -> String {
    let ca = pki.ca();
    let mut args = vec!["-CAfile", &ca, "-verify_return_error"];
    args.extend_from_slice(session);
    let mut client = openssl_s_client(port, &args);
    client.expect_stdout("Verify return code: 0 (ok)");
    client.echo_and_close(line);
    client.stdout.text()
}

/// openssl s_client twice against `fastshake server --echo`: `-sess_out`, then `-sess_in`.
fn openssl_s_client_resumes_against_server(server_extra: &[&str], client_extra: &[&str], by: &str) {
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let mut server_args = pki.fastshake_server_args();
    server_args.push("--echo".into());
    server_args.extend(server_extra.iter().map(|s| s.to_string()));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let session_file = pki.scratch("openssl.session");

    let mut first_args = vec!["-sess_out", &session_file];
    first_args.extend_from_slice(client_extra);
    let first = openssl_s_client_run(&pki, port, &first_args, "first connection");
    assert!(first.contains("New, TLSv1.2"), "{first}");
    server.expect_stderr("full (not resumed)");

    let mut second_args = vec!["-sess_in", &session_file];
    second_args.extend_from_slice(client_extra);
    let second = openssl_s_client_run(&pki, port, &second_args, "resumed connection");
    assert!(second.contains("Reused, TLSv1.2"), "{second}");
    server.expect_stderr(&format!("resumed by {by}"));
}

#[test]
fn openssl_s_client_resumes_by_session_id_with_no_ticket() {
    openssl_s_client_resumes_against_server(&[], &["-no_ticket"], "session ID");
}

#[test]
fn openssl_s_client_resumes_by_ticket() {
    openssl_s_client_resumes_against_server(&[], &[], "ticket");
}

/// Two `fastshake client` runs with one `--session-file` against `openssl s_server`.
fn client_resumes_against_openssl_s_server(server_extra: &[&str], by: &str) {
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let intermediates = pki.server_intermediates();
    let (cert, key) = (pki.server_cert(), pki.server_key());
    let mut server_args = vec!["-cert", &cert, "-cert_chain", &intermediates, "-key", &key];
    server_args.extend_from_slice(server_extra);
    let (mut server, port) = openssl_s_server_with(&server_args);
    let session_file = pki.scratch("client.session");
    let mut args = pki.fastshake_client_args();
    args.extend(["--session-file".into(), session_file]);

    for (run, expected) in
        [("first", "full (not resumed)".to_owned()), ("second", format!("resumed by {by}"))]
    {
        let mut client = FASTSHAKE.client_with(port, &strs(&args));
        client.expect_handshake_without_resend(&["", &expected]);
        client.write_line(&format!("{run} run to openssl"));
        server.expect_stdout(&format!("{run} run to openssl"));
        server.write_line(&format!("{run} reply from openssl"));
        client.expect_stdout(&format!("{run} reply from openssl"));
        client.finish(&[]);
    }
    let server_text = server.stdout.text();
    assert!(server_text.contains("Reused session-id"), "s_server saw no resumption:\n{server_text}");
}

#[test]
fn fastshake_client_resumes_against_openssl_s_server_by_ticket() {
    client_resumes_against_openssl_s_server(&[], "ticket");
}

#[test]
fn fastshake_client_resumes_against_openssl_s_server_by_session_id() {
    client_resumes_against_openssl_s_server(&["-no_ticket"], "session ID");
}

/// gnutls-cli -r: a full handshake, then a resumed one, against `fastshake server --echo`.
fn gnutls_cli_resumes_against_server(server_extra: &[&str], by: &str) {
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let mut server_args = pki.fastshake_server_args();
    server_args.push("--echo".into());
    server_args.extend(server_extra.iter().map(|s| s.to_string()));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let mut client =
        gnutls_cli(port, &["-r", "--x509cafile", &pki.ca(), "--priority=NORMAL:-VERS-ALL:+VERS-DTLS1.2"]);
    client.expect_stdout("This is a resumed session");
    server.expect_stderr(&format!("resumed by {by}"));
    client.echo_and_close("ping over the resumed session");
}

#[test]
fn gnutls_cli_resumes_by_ticket() {
    gnutls_cli_resumes_against_server(&[], "ticket");
}

#[test]
fn gnutls_cli_resumes_by_session_id_without_tickets() {
    gnutls_cli_resumes_against_server(&["--no-tickets"], "session ID");
}

/// Two `fastshake client` runs with one `--session-file` against `gnutls-serv --echo`.
#[test]
fn fastshake_client_resumes_against_gnutls_serv() {
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let (_server, port) = gnutls_serv_echo(&[
        "--x509certfile",
        &pki.server_cert(),
        "--x509keyfile",
        &pki.server_key(),
        "--priority=NORMAL:-VERS-ALL:+VERS-DTLS1.2",
    ]);
    let session_file = pki.scratch("client.session");
    let mut args = pki.fastshake_client_args();
    args.extend(["--session-file".into(), session_file]);
    let first = FASTSHAKE.echo_run(port, &strs(&args), "first run to gnutls");
    assert!(first.contains("full (not resumed)"), "{first}");
    let second = FASTSHAKE.echo_run(port, &strs(&args), "second run to gnutls");
    assert!(second.contains("resumed by ticket"), "{second}");
}
