//! DTLS 1.3 interop with wolfSSL (`interop/wolfssl`, a peer program built by the tests; wolfSSL
//! is GPL and stays out of fastshake's own binaries) as real processes over loopback, both
//! directions: an external PSK with (EC)DHE and alone, an ECDSA chain of three with mutual
//! authentication, a HelloRetryRequest for another group, and a key update; data both ways, no
//! flight resent on either side.
//!
//! Some cases run fastshake with its default `--dtls both` (a client offering 1.3 and 1.2 in one
//! ClientHello, a server answering each client in the highest version it offers), the others
//! with `--dtls 1.3`: wolfSSL gets 1.3 either way.
//!
//! Both servers ask every new client for a cookie (a HelloRetryRequest every time), and both
//! prefer the post-quantum hybrid X25519MLKEM768, which wolfSSL's client offers first. What the
//! peer cannot tell: wolfSSL counts only the flights it resent on its timer (`resent=`), not
//! those resent after an ACK.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

fn psk() -> [&'static str; 4] {
    ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX]
}

/// `fastshake client --dtls 1.3 CLIENT_ARGS` against `wolfssl-peer server SERVER_ARGS`.
fn fastshake_client(dtls: &str, server_args: &[&str], client_args: &[&str], parts: &[&str]) -> String {
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let (server, port) = wolfssl::server(&binary, server_args);
    let mut args = vec!["--dtls", dtls];
    args.extend_from_slice(client_args);
    let mut client = FASTSHAKE.client_with(port, &args);
    client.expect_handshake_without_resend(parts);
    let theirs = wolfssl::handshake_line(&server);
    assert!(theirs.contains("version=DTLSv1.3") && theirs.contains("resent=0"), "{theirs}");
    client.echo_line("ping to wolfSSL");
    server.expect_stdout("ping to wolfSSL\n");
    client.finish(&[&server]);
    theirs
}

/// `wolfssl-peer client CLIENT_ARGS` against `fastshake server --dtls 1.3 --echo SERVER_ARGS`.
fn wolfssl_client(
    dtls: &str,
    server_args: &[&str],
    client_args: &[&str],
    parts: &[&str],
    lines: &[&str],
) -> (String, Peer) {
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let mut args = vec!["--dtls", dtls, "--echo"];
    args.extend_from_slice(server_args);
    let (server, port) = FASTSHAKE.server_with(&args);
    let mut client = wolfssl::client(&binary, port, client_args);
    let theirs = wolfssl::handshake_line(&client);
    assert!(theirs.contains("version=DTLSv1.3") && theirs.contains("resent=0"), "{theirs}");
    server.expect_handshake_without_resend(parts);
    for line in lines {
        client.echo_line(line);
    }
    client.finish(&[&server]);
    (theirs, client)
}

fn skip() -> bool {
    wolfssl::peer().is_none()
}

#[test]
fn fastshake_client_psk_with_x25519() {
    if skip() {
        return;
    }
    let theirs = fastshake_client(
        "both",
        &psk(),
        &psk(),
        &["TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519; after a HelloRetryRequest)"],
    );
    assert!(theirs.contains("group=X25519") && theirs.contains("hrr=true"), "{theirs}");
}

#[test]
fn fastshake_client_psk_alone() {
    if skip() {
        return;
    }
    let server: Vec<&str> = psk().into_iter().chain(["--psk-ke"]).collect();
    let theirs = fastshake_client("1.3", &server, &psk(), &["(DTLS 1.3; after a HelloRetryRequest)"]);
    assert!(theirs.contains("group=none"), "{theirs}");
}

#[test]
fn fastshake_client_asked_for_secp256r1() {
    if skip() {
        return;
    }
    let server: Vec<&str> = psk().into_iter().chain(["--groups", "secp256r1"]).collect();
    let theirs =
        fastshake_client("1.3", &server, &psk(), &["(DTLS 1.3; secp256r1; after a HelloRetryRequest)"]);
    assert!(theirs.contains("group=SECP256R1"), "{theirs}");
}

#[test]
fn fastshake_client_with_a_chain_of_three_and_mutual_authentication() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let server = ["--cert", &pki.server_cert(), "--key", &pki.server_key(), "--ca", &pki.ca(), "--mutual"]
        .map(str::to_owned);
    let client = [
        "--ca",
        &pki.ca(),
        "--server-name",
        "localhost",
        "--cert",
        &pki.client_cert(),
        "--key",
        &pki.client_key(),
    ]
    .map(str::to_owned);
    fastshake_client("1.3", &strs(&server), &strs(&client), &["(DTLS 1.3;", "peer sent 3 certificate(s)"]);
}

#[test]
fn wolfssl_client_psk_then_a_key_update() {
    if skip() {
        return;
    }
    let client: Vec<&str> = psk().into_iter().chain(["--key-update"]).collect();
    let (_, client) = wolfssl_client(
        "both",
        &psk(),
        &client,
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest)"],
        &["before the key update"],
    );
    // wolfSSL updated its keys after the first echo and sent its next line under them.
    client.expect_stderr("key update sent");
    client.expect_stdout("after key update");
}

#[test]
fn wolfssl_client_with_a_chain_of_three_and_mutual_authentication() {
    if skip() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let server = pki.fastshake_mutual_server_args("require");
    let client = [
        "--ca",
        &pki.ca(),
        "--server-name",
        "localhost",
        "--cert",
        &pki.client_cert(),
        "--key",
        &pki.client_key(),
    ]
    .map(str::to_owned);
    wolfssl_client(
        "1.3",
        &strs(&server),
        &strs(&client),
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest)", "peer sent 3 certificate(s)"],
        &["ping from wolfSSL"],
    );
}

#[test]
fn post_quantum_hybrid_both_ways() {
    if skip() {
        return;
    }
    // wolfSSL's server takes only an unfragmented first ClientHello: fastshake's client sends
    // it without the hybrid's share, and the second (two fragments) with the cookie first.
    let client: Vec<&str> = psk().into_iter().chain(["--groups", "x25519mlkem768,x25519"]).collect();
    let theirs =
        fastshake_client("1.3", &psk(), &client, &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest)"]);
    assert!(theirs.contains("group=X25519MLKEM768"), "{theirs}");
    // wolfSSL's client offers the hybrid first (with an empty key share); fastshake's server
    // asks for it.
    let (theirs, _) = wolfssl_client(
        "1.3",
        &psk(),
        &psk(),
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest)"],
        &["post-quantum ping"],
    );
    assert!(theirs.contains("group=X25519MLKEM768"), "{theirs}");
}
