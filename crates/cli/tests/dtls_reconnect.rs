//! An OpenSSL client that vanishes (no close_notify) and reconnects from the same address and
//! port: the fastshake server keeps the old session until the new handshake completes
//! (RFC 6347 §4.2.8), then replaces it, and the new session carries data.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

fn openssl_client_bound_to(server_port: u16, local_port: u16) -> Peer {
    let bind = format!("127.0.0.1:{local_port}");
    let psk = ["-psk", PSK_HEX, "-psk_identity", PSK_IDENTITY, "-cipher", openssl_cipher(CCM8)];
    openssl_s_client(server_port, &[&["-quiet", "-bind", &bind][..], &psk].concat())
}

#[test]
fn openssl_client_reconnecting_from_the_same_port_replaces_its_session() {
    let (server, port) = FASTSHAKE.server(&["--echo"]);
    let local_port = free_udp_port();
    let mut first = openssl_client_bound_to(port, local_port);
    first.echo_line("from the first session");
    // The client dies without close_notify: the server still holds its session.
    drop(first);
    let mut second = openssl_client_bound_to(port, local_port);
    second.echo_line("from the second session");
    server.expect_stderr_line_with(&[
        &format!("127.0.0.1:{local_port}"),
        "new handshake from the same address",
    ]);
    assert_eq!(server.stderr.text().matches("handshake done").count(), 2, "{}", server.transcript());
}
