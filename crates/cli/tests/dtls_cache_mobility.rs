//! Handshake caching (seed 003) with seed 001's TCS strategy over real sockets on loopback: a
//! mutually authenticated client with `--cache-file` runs a session that moves to the server's
//! own port (TCS) and then hands over to 127.0.0.2, the session following it; the client's next
//! handshake, from there, takes the server's Certificate and CertificateRequest from its cache
//! (RFC 7924) and sends an empty Certificate under its ticket.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

const FROM_CACHE: [&str; 3] = [
    "server certificate from cache (RFC 7924)",
    "certificate request from cache (RFC 7924)",
    "client certificate from cache (ticket)",
];

/// The port after `prefix` in the first line that has it.
fn port_after(text: &str, prefix: &str) -> Option<u16> {
    let at = text.find(prefix)? + prefix.len();
    let digits: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[test]
fn a_caching_tcs_client_that_handed_over_takes_its_next_handshake_from_the_cache() {
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let mut server_args = pki.fastshake_mutual_server_args("require");
    server_args.extend(["--echo", "--mobility", "tcs", "--client-cache", "16"].map(String::from));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let cache = pki.scratch("tcs.cache");
    let _ = std::fs::remove_file(&cache);
    let mut args = pki.fastshake_mutual_client_args();
    // DTLS 1.2, where the CertificateRequest is cached too (1.3's caching over sockets is
    // tested in dtls_cert_cli).
    args.extend(["--dtls", "1.2", "--mobility", "tcs", "--cache-file", &cache].map(String::from));

    // The first session: a full handshake on the welcome port, the move to the session's own
    // port, then the handover to 127.0.0.2 after the first echo; the session follows.
    let mut first_args = args.clone();
    first_args.extend(["--rebind-after", "1", "--rebind-to", "127.0.0.2:0"].map(String::from));
    let mut client = FASTSHAKE.client_with(port, &strs(&first_args));
    let line = client.expect_handshake_without_resend(&["full (not resumed)", "peer sent 3 certificate(s)"]);
    assert!(!line.contains("from cache"), "{line}");
    println!("first:  {line}");
    client.echo_line("before the handover");
    client.expect_stderr("moved from");
    client.echo_line("after the handover");
    client.finish(&[&server]);
    let both = format!("{}\n{}", client.transcript(), server.transcript());
    let own = port_after(&server.stderr.text(), "own socket 127.0.0.1:").unwrap_or_else(|| panic!("{both}"));
    assert_ne!(own, port, "TCS gave the session a port of its own\n{both}");
    server.expect_stderr_line_with(&["moved from 127.0.0.1:", "to 127.0.0.2:"]);
    assert_eq!(server.stderr.text().matches("handshake done").count(), 1, "one session so far\n{both}");
    assert!(std::fs::metadata(&cache).is_ok_and(|m| m.len() > 0), "the cache was written\n{both}");

    // The next handshake, from where the client now is: everything it cached is used.
    let mut second_args = args;
    second_args.extend(["--bind", "127.0.0.2:0"].map(String::from));
    let mut client = FASTSHAKE.client_with(port, &strs(&second_args));
    let mut parts = vec!["full (not resumed)"];
    parts.extend(FROM_CACHE);
    let line = client.expect_handshake_without_resend(&parts);
    println!("second: {line}");
    client.echo_line("with the cached chains");
    client.finish(&[&server]);
    let done = server.stderr.wait_until(STEP, |t| t.matches("handshake done").count() == 2);
    assert!(done, "{}", server.transcript());
    let stderr = server.stderr.text();
    let second = stderr.lines().filter(|l| l.contains("handshake done")).nth(1).expect("seen above");
    assert!(second.contains("fastshake server: 127.0.0.2:"), "{second}");
    assert!(second.contains("client certificate from cache (ticket)"), "{second}");
    server.assert_no_resend_in_any_handshake();
}
