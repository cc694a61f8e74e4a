//! The pion peer's concurrent listener (`pion-peer server-concurrent`, the pion anchor of
//! `fastshake bench load --compare`) serves several of our clients at once.

use fastshake_testkit::peers::dtls::{PSK_HEX, PSK_IDENTITY};
use fastshake_testkit::peers::{announced_port, pion, Fastshake, Peer};
use std::process::Command;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));
const CLIENTS: usize = 4;

#[test]
fn pion_concurrent_server_holds_several_fastshake_sessions_at_once() {
    let Some(binary) = pion::dtls_peer() else { return };
    let mut command = Command::new(&binary);
    command.args(["server-concurrent", "--listen", "127.0.0.1:0", "--psk-identity", PSK_IDENTITY]).args([
        "--psk",
        PSK_HEX,
        "--suite",
        "TLS_PSK_WITH_AES_128_CCM_8",
        "--time-limit",
        "60s",
    ]);
    let server = Peer::spawn("pion-peer server-concurrent", command);
    let port = announced_port(&server, "listening on 127.0.0.1:");

    // Every client completes its handshake while the others' sessions are still open (their
    // standard input is): a one-at-a-time server would hold the second until the first ends.
    let mut clients: Vec<Peer> = (0..CLIENTS).map(|_| FASTSHAKE.client(port, PSK_HEX, &[])).collect();
    for client in &clients {
        client.expect_handshake_without_resend(&["TLS_PSK_WITH_AES_128_CCM_8"]);
    }
    for (n, client) in clients.iter_mut().enumerate() {
        client.echo_line(&format!("hello from client {n}"));
    }
    for client in &mut clients {
        assert!(client.echo_and_close("bye").success(), "{}", client.transcript());
    }
    drop(server);
}
