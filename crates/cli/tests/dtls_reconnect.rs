//! An OpenSSL client that vanishes (no close_notify) and reconnects from the same address and
//! port: the fastshake server keeps the old session until the new handshake completes
//! (RFC 6347 §4.2.8), then replaces it, and the new session carries data.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

fn openssl_client_bound_to(server_port: u16, local_port: u16) -> Peer {
    let mut command = tool("openssl");
    command
        .args(["s_client", "-dtls1_2", "-quiet", "-psk", PSK_HEX, "-psk_identity", PSK_IDENTITY])
        .args(["-cipher", openssl_cipher(CCM8)])
        .args(["-connect", &format!("127.0.0.1:{server_port}"), "-bind", &format!("127.0.0.1:{local_port}")]);
    Peer::spawn("openssl s_client", command)
}

#[test]
fn openssl_client_reconnecting_from_the_same_port_replaces_its_session() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let local_port = free_udp_port();
    let mut first = openssl_client_bound_to(port, local_port);
    first.write_line("from the first session");
    first.expect_stdout("from the first session\n");
    // The client dies without close_notify: the server still holds its session.
    drop(first);
    let mut second = openssl_client_bound_to(port, local_port);
    second.write_line("from the second session");
    second.expect_stdout("from the second session\n");
    server.expect_stderr_line_with(&[
        &format!("127.0.0.1:{local_port}"),
        "new handshake from the same address",
    ]);
    assert_eq!(server.stderr.text().matches("handshake done").count(), 2, "{}", server.transcript());
}
