//! Interop of `fastshake client` / `fastshake server` with OpenSSL 3 and GnuTLS, as real
//! processes over loopback, for both PSK suites, with data checked both ways.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// fastshake client -> openssl s_server: a line each way through the peers' stdin/stdout.
fn client_against_openssl_s_server(suite: &str) {
    let (mut server, port) = openssl_s_server(suite, PSK_HEX);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--suite", suite]);
    client.expect_handshake_without_resend(&[&format!(
        "{suite}, full (not resumed), with extended master secret"
    )]);

    hello_both_ways(&mut client, &mut server, "openssl");

    client.finish(&[]);
    // s_server reports the close_notify it got.
    server.expect_stdout("DONE");
}

#[test]
fn fastshake_client_with_openssl_s_server_ccm8() {
    client_against_openssl_s_server(CCM8);
}

#[test]
fn fastshake_client_with_openssl_s_server_gcm() {
    client_against_openssl_s_server(GCM);
}

/// openssl s_client -> fastshake server --echo: what s_client sends comes back to it.
fn openssl_s_client_against_server(suite: &str) {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let mut client = openssl_psk_s_client(port, suite);
    server.expect_handshake_without_resend(&[&format!(
        "{suite}, full (not resumed), with extended master secret"
    )]);

    client.echo_and_close("ping from openssl s_client");
    server.expect_stderr("closed by the peer (close_notify)");
}

#[test]
fn openssl_s_client_with_fastshake_server_ccm8() {
    openssl_s_client_against_server(CCM8);
}

#[test]
fn openssl_s_client_with_fastshake_server_gcm() {
    openssl_s_client_against_server(GCM);
}

/// openssl s_client -> fastshake server without --echo: the server prints what it receives.
#[test]
fn fastshake_server_prints_what_openssl_s_client_sends() {
    let (server, port) = FASTSHAKE.server(&[]);
    let mut client = openssl_psk_s_client(port, CCM8);
    server.expect_handshake_without_resend(&[]);
    client.write_line("printed by the server");
    server.expect_stdout("printed by the server\n");
}

/// gnutls-cli -> fastshake server --echo.
fn gnutls_cli_against_server(suite: &str) {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let priority = format!("--priority={}", gnutls_priority(suite));
    let mut client = gnutls_cli(port, &["--pskusername", PSK_IDENTITY, "--pskkey", PSK_HEX, &priority]);
    server.expect_handshake_without_resend(&[&format!(
        "{suite}, full (not resumed), with extended master secret"
    )]);

    client.echo_and_close("ping from gnutls-cli");
    server.expect_stderr("closed by the peer (close_notify)");
}

#[test]
fn gnutls_cli_with_fastshake_server_ccm8() {
    gnutls_cli_against_server(CCM8);
}

#[test]
fn gnutls_cli_with_fastshake_server_gcm() {
    gnutls_cli_against_server(GCM);
}

/// fastshake client -> gnutls-serv --echo.
fn client_against_gnutls_serv(suite: &str) {
    let dir = std::env::temp_dir().join(format!("fastshake-dtls-interop-{}-{suite}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let passwd = dir.join("psk.passwd");
    std::fs::write(&passwd, format!("{PSK_IDENTITY}:{PSK_HEX}\n")).unwrap();
    let passwd = passwd.to_str().expect("a UTF-8 temporary path");
    let (server, port) =
        gnutls_serv_echo(&["--pskpasswd", passwd, &format!("--priority={}", gnutls_priority(suite))]);

    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--suite", suite]);
    client.expect_handshake_without_resend(&[&format!(
        "{suite}, full (not resumed), with extended master secret"
    )]);
    client.write_and_see("ping from fastshake");
    client.finish(&[]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fastshake_client_with_gnutls_serv_ccm8() {
    client_against_gnutls_serv(CCM8);
}

#[test]
fn fastshake_client_with_gnutls_serv_gcm() {
    client_against_gnutls_serv(GCM);
}

/// A wrong key against OpenSSL: the client fails, non-zero, with a message.
#[test]
fn wrong_key_against_openssl_s_server_fails_cleanly() {
    let (_server, port) = openssl_s_server(CCM8, PSK_HEX);
    let mut client = FASTSHAKE.client(
        port,
        WRONG_PSK_HEX,
        &["--suite", CCM8, "--initial-retransmit-ms", "100", "--handshake-timeout", "2"],
    );
    let status = client.expect_exit();
    assert!(!status.success(), "a wrong key must fail\n{}", client.transcript());
    // OpenSSL discards a Finished it cannot authenticate without an alert (DTLS drops invalid
    // records, RFC 6347 §4.1.2.7), so all the client can report is the silence that follows.
    let stderr = client.stderr.text();
    assert!(stderr.contains("DTLS handshake with 127.0.0.1:"), "{stderr}");
    assert!(stderr.contains("no answer after"), "{stderr}");
    assert!(!stderr.contains("handshake done"), "{stderr}");
}
