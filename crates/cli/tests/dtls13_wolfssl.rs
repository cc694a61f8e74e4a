//! DTLS 1.3 interop with wolfSSL (`interop/wolfssl`, a peer program built by the tests; wolfSSL
//! is GPL and stays out of fastshake's own binaries) as real processes over loopback, both
//! directions: an external PSK with (EC)DHE and alone, an ECDSA chain of three with mutual
//! authentication, a HelloRetryRequest for another group, a key update, resumption by ticket,
//! 0-RTT early data, and Connection IDs with a client that moves to a new port; data both ways,
//! no flight resent on either side.
//!
//! Some cases run fastshake with its default `--dtls both` (a client offering 1.3 and 1.2 in one
//! ClientHello, a server answering each client in the highest version it offers), the others
//! with `--dtls 1.3`: wolfSSL gets 1.3 either way.
//!
//! Both servers ask every new client for a cookie (a HelloRetryRequest every time), and both
//! prefer the post-quantum hybrid X25519MLKEM768, which wolfSSL's client offers first.
//!
//! What wolfSSL (5.9.4, vendored by wolfssl-sys 5.3.0) cannot do, or the peer does for it:
//! - It counts only the flights it resent on its timer (`resent=`), not those resent after an ACK.
//! - Its server sends its cookie HelloRetryRequest to a resumption too (no RFC 9147 §5.1 skip),
//!   and a HelloRetryRequest refuses early data (RFC 8446 §4.1.2): 0-RTT to it needs
//!   `--no-hrr-cookie`. Its server takes early data only through `wolfSSL_read_early_data`,
//!   which the peer calls before the handshake with `--early-data`.
//! - It has no `rrc` (RFC 9853): neither side checks a new path, and fastshake's server follows
//!   a wolfSSL client's authenticated CID record from a new address at once (RFC 9146 §6).
//! - It follows a CID record from a new address only on its own socket IO; the peer's IO is its
//!   own (to count datagrams), so the peer does that: a record carrying its CID is let in from
//!   any address, and the session moves there once wolfSSL deprotected application data.

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
        &["TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))"],
    );
    assert!(theirs.contains("group=X25519") && theirs.contains("hrr=true"), "{theirs}");
}

#[test]
fn fastshake_client_psk_alone() {
    if skip() {
        return;
    }
    // A client with groups offers psk_dhe_ke alone; `--groups ""` offers psk_ke.
    let server: Vec<&str> = psk().into_iter().chain(["--psk-ke"]).collect();
    let client: Vec<&str> = psk().into_iter().chain(["--groups", ""]).collect();
    let theirs = fastshake_client(
        "1.3",
        &server,
        &client,
        &["(DTLS 1.3; PSK only, no (EC)DHE; after a cookie exchange (HelloRetryRequest))"],
    );
    assert!(theirs.contains("group=none"), "{theirs}");
}

#[test]
fn fastshake_client_asked_for_secp256r1() {
    if skip() {
        return;
    }
    let server: Vec<&str> = psk().into_iter().chain(["--groups", "secp256r1"]).collect();
    let theirs = fastshake_client(
        "1.3",
        &server,
        &psk(),
        &["(DTLS 1.3; secp256r1; after a HelloRetryRequest for secp256r1)"],
    );
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
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)"],
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
        &[
            "(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)",
            "peer sent 3 certificate(s)",
        ],
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
    let theirs = fastshake_client(
        "1.3",
        &psk(),
        &client,
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)"],
    );
    assert!(theirs.contains("group=X25519MLKEM768"), "{theirs}");
    // wolfSSL's client offers the hybrid first (with an empty key share); fastshake's server
    // asks for it.
    let (theirs, _) = wolfssl_client(
        "1.3",
        &psk(),
        &psk(),
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)"],
        &["post-quantum ping"],
    );
    assert!(theirs.contains("group=X25519MLKEM768"), "{theirs}");
}

/// Two `fastshake client --dtls 1.3 --session-file F` runs against one wolfSSL server with an
/// ECDSA chain: the first is full and keeps wolfSSL's NewSessionTicket (RFC 8446 §4.6.1), the
/// second offers it as a PSK and resumes (psk_dhe_ke, no certificate sent).
#[test]
fn fastshake_client_resumes_a_wolfssl_ticket() {
    if skip() {
        return;
    }
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let (server, port) =
        wolfssl::server(&binary, &["--cert", &pki.server_cert(), "--key", &pki.server_key()]);
    let session = pki.scratch("wolfssl13.session");
    let mut args = pki.fastshake_client_args();
    args.extend(["--dtls", "1.3", "--session-file", &session].map(str::to_owned));
    let (first, _) = FASTSHAKE.resumed_by_session_file(port, &strs(&args), "ticket");
    assert!(first.contains("kept the server's DTLS 1.3 ticket"), "{first}");
    server.expect_stdout("second run\n");
    let theirs = server.handshake_lines();
    assert_eq!(theirs.len(), 2, "{}", server.transcript());
    assert!(theirs[0].contains("resumed=false") && theirs[0].contains("resent=0"), "{theirs:?}");
    assert!(theirs[1].contains("resumed=true") && theirs[1].contains("resent=0"), "{theirs:?}");
}

/// `wolfssl-peer client --resume` against `fastshake server --dtls 1.3`: a full handshake, our
/// NewSessionTicket, close, and a second handshake that offers the ticket; both sides say resumed.
#[test]
fn wolfssl_client_resumes_a_fastshake_ticket() {
    if skip() {
        return;
    }
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.extend(["--dtls", "1.3", "--echo"].map(str::to_owned));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let client_args = ["--ca", &pki.ca(), "--server-name", "localhost", "--resume"].map(str::to_owned);
    let mut client = wolfssl::client(&binary, port, &strs(&client_args));
    client.expect_stderr_line_with(&["handshake done:", "resumed=true"]);
    client.echo_line("ping after resumption");
    client.finish(&[&server]);
    let theirs = client.handshake_lines();
    assert_eq!(theirs.len(), 2, "{}", client.transcript());
    assert!(theirs[0].contains("resumed=false") && theirs[0].contains("resent=0"), "{theirs:?}");
    assert!(theirs[1].contains("resumed=true") && theirs[1].contains("resent=0"), "{theirs:?}");
    server.expect_handshake_without_resend(&["(DTLS 1.3;", "full (not resumed)"]);
    server.expect_handshake_without_resend(&["(DTLS 1.3;", "resumed by ticket"]);
    server.assert_no_resend_in_any_handshake();
}

/// 0-RTT (RFC 8446 §2.3, RFC 9147 §5.6) from fastshake's client: a full run keeps wolfSSL's
/// ticket (which allows early data), the second sends its first line with the ClientHello.
/// wolfSSL's server runs without its cookie exchange: a HelloRetryRequest refuses early data.
#[test]
fn fastshake_client_sends_early_data_to_wolfssl() {
    if skip() {
        return;
    }
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let server_args =
        ["--cert", &pki.server_cert(), "--key", &pki.server_key(), "--early-data", "--no-hrr-cookie"];
    let (server, port) = wolfssl::server(&binary, &server_args);
    let session = pki.scratch("wolfssl13-early.session");
    let mut args = pki.fastshake_client_args();
    args.extend(["--dtls", "1.3", "--session-file", &session].map(str::to_owned));
    let first = FASTSHAKE.echo_run(port, &strs(&args), "first run");
    assert!(first.contains("kept the server's DTLS 1.3 ticket"), "{first}");

    args.push("--early-data".into());
    let mut client = FASTSHAKE.client_with(port, &strs(&args));
    client.write_line("early line to wolfSSL");
    client.expect_handshake_without_resend(&["resumed by ticket, 0-RTT accepted"]);
    client.expect_stdout("early line to wolfSSL\n");
    client.echo_line("then a 1-RTT line");
    client.finish(&[&server]);
    assert_eq!(client.stdout.text().matches("early line to wolfSSL").count(), 1, "{}", client.transcript());
    let theirs = server.handshake_lines();
    assert_eq!(theirs.len(), 2, "{}", server.transcript());
    // wolfSSL took the line (with its newline) as early data.
    let early = "early line to wolfSSL\n".len();
    assert!(theirs[1].contains(&format!("early_data={early}")), "{theirs:?}");
    assert!(theirs[1].contains("resumed=true") && theirs[1].contains("resent=0"), "{theirs:?}");
}

/// 0-RTT from wolfSSL's client: `--resume --early-data` sends its first line as early data in
/// the resumption; fastshake's server skips its cookie exchange for a ticket of its own from the
/// same address (RFC 9147 §5.1) and takes it.
#[test]
fn wolfssl_client_sends_early_data_to_fastshake() {
    if skip() {
        return;
    }
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.extend(["--dtls", "1.3", "--echo", "--early-data", "--groups", "x25519"].map(str::to_owned));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let client_args =
        ["--ca", &pki.ca(), "--server-name", "localhost", "--groups", "x25519", "--resume", "--early-data"]
            .map(str::to_owned);
    let mut client = wolfssl::client(&binary, port, &strs(&client_args));
    client.write_line("early line from wolfSSL");
    let resumed = client.expect_stderr_line_with(&["handshake done:", "resumed=true"]);
    assert!(resumed.contains("early_data=accepted") && resumed.contains("resent=0"), "{resumed}");
    client.expect_stdout("early line from wolfSSL\n");
    client.echo_line("then a 1-RTT line");
    client.finish(&[&server]);
    assert_eq!(client.stdout.text().matches("early line from wolfSSL").count(), 1, "{}", client.transcript());
    server.expect_handshake_without_resend(&["resumed by ticket, 0-RTT accepted"]);
    server.assert_no_resend_in_any_handshake();
}

/// Connection IDs with a move (RFC 9146 §6, RFC 9147 §9): fastshake's client `--mobility cid`
/// moves to a new port after the first echo; wolfSSL's server (`--cid`) takes the next record,
/// which carries its CID, from the new address and answers there, in the same session.
#[test]
fn wolfssl_server_follows_fastshake_client_by_cid() {
    if skip() {
        return;
    }
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let server_args: Vec<&str> = psk().into_iter().chain(["--cid"]).collect();
    let (server, port) = wolfssl::server(&binary, &server_args);
    let client_args: Vec<&str> = ["--dtls", "1.3"]
        .into_iter()
        .chain(psk())
        .chain(["--mobility", "cid", "--rebind-after", "1"])
        .collect();
    let mut client = FASTSHAKE.client_with(port, &client_args);
    client.expect_handshake_without_resend(&["(DTLS 1.3;"]);
    let theirs = wolfssl::handshake_line(&server);
    assert_eq!(field(&theirs, "cid_in=").len(), 16, "wolfSSL issued its 8-byte CID: {theirs}");
    client.echo_line("before the move");
    let moved = client.expect_stderr_line_with(&["fastshake client: moved from"]);
    let new_address = moved.rsplit(' ').next().expect("an address").to_owned();
    client.echo_line("after the move");
    server.expect_stdout("after the move\n");
    server.expect_stderr_line_with(&["moved to", &new_address]);
    client.finish(&[&server]);
    assert_eq!(server.handshake_lines().len(), 1, "{}", server.transcript());
}

/// The reverse: wolfSSL's client (`--cid`) moves to a new port after the first echo; fastshake's
/// server (`--mobility cid`) follows its CID records there. wolfSSL offers no `rrc` (RFC 9853),
/// so the server follows an authenticated, newest record at once, as RFC 9146 §6 allows.
#[test]
fn fastshake_server_follows_wolfssl_client_by_cid() {
    if skip() {
        return;
    }
    let binary = wolfssl::peer().expect("wolfssl-peer");
    let (server, port) = FASTSHAKE.server_with(
        &["--dtls", "1.3", "--echo", "--mobility", "cid"].into_iter().chain(psk()).collect::<Vec<_>>(),
    );
    let client_args: Vec<&str> = psk().into_iter().chain(["--cid", "--rebind-after", "1"]).collect();
    let mut client = wolfssl::client(&binary, port, &client_args);
    let theirs = wolfssl::handshake_line(&client);
    assert_eq!(field(&theirs, "cid_out=").len(), 16, "wolfSSL writes our 8-byte CID: {theirs}");
    server.expect_handshake_without_resend(&["(DTLS 1.3;"]);
    client.echo_line("before the move");
    let moved = client.expect_stderr_line_with(&["wolfssl-peer client: moved to"]);
    let new_address = moved.rsplit(' ').next().expect("an address").to_owned();
    client.echo_line("after the move");
    server.expect_stderr_line_with(&["moved from", &format!("to {new_address}")]);
    client.finish(&[&server]);
    assert_eq!(server.stderr.text().matches("handshake done").count(), 1, "{}", server.transcript());
}

/// The value after `name` in a handshake line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let at = line.find(name).map_or(line.len(), |i| i + name.len());
    line[at..].split_whitespace().next().unwrap_or("")
}
