//! DTLS 1.3 interop with pion/dtls v4 (`interop/pion13`, built with Go) as real processes over
//! loopback, both directions: an external PSK (psk_dhe_ke), an ECDSA chain of three, mutual
//! authentication, a HelloRetryRequest that asks for another group, a key update asked of both
//! sides, resumption by ticket, and Connection IDs with a client that moves; data both ways, no
//! flight resent on either side. Some cases run fastshake with its default `--dtls both` (one
//! ClientHello offering 1.3 and 1.2; a server answering each client in the highest version it
//! offers), the others with `--dtls 1.3`: pion gets 1.3 either way.
//!
//! Both servers answer every first ClientHello with a HelloRetryRequest carrying a cookie (their
//! address check), so every handshake here has one. What pion v4.0.1 cannot do in 1.3 (see
//! `interop/pion13/main.go`): the CCM suites. What the peer does not wire in yet, though pion
//! v4.0.1 has it: early data
//!   (`WithMaxEarlyDataSize`, only on its `DetachedConn`), and a client's own move
//!   (`Conn.AddPath`), so the moves here are fastshake's client's.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Runs the fastshake client with `client_args` against a pion 1.3 server started with
/// `server_args`; checks both summaries and an echo, and returns both handshake lines.
fn fastshake_client_with_pion13(
    dtls: &str,
    server_args: &[&str],
    client_args: &[&str],
    parts: &[&str],
) -> (String, String) {
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let (server, port) = pion::dtls13_server(&binary, server_args);
    let mut args = vec!["--dtls", dtls];
    args.extend_from_slice(client_args);
    let mut client = FASTSHAKE.client_with(port, &args);
    let ours = client.expect_handshake_without_resend(parts);
    let theirs = pion::handshake_line(&server);
    assert!(theirs.contains("version=DTLS1.3") && theirs.contains("resent=0"), "{theirs}");
    client.echo_line("ping over DTLS 1.3");
    server.expect_stdout("ping over DTLS 1.3\n");
    client.finish(&[&server]);
    (ours, theirs)
}

fn skip_without_pion() -> bool {
    pion::dtls13_peer().is_none()
}

#[test]
fn psk_with_x25519() {
    if skip_without_pion() {
        return;
    }
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let (ours, theirs) = fastshake_client_with_pion13(
        "both",
        &psk,
        &psk,
        &["TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))"],
    );
    assert!(theirs.contains("psk=psk_dhe_ke") && theirs.contains("group=x25519"), "{theirs}\n{ours}");
}

#[test]
fn ecdsa_chain_of_three() {
    if skip_without_pion() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let server = ["--cert", &pki.server_cert(), "--key", &pki.server_key()].map(str::to_owned);
    let client = ["--ca", &pki.ca(), "--server-name", "localhost"].map(str::to_owned);
    let (_, theirs) = fastshake_client_with_pion13(
        "1.3",
        &strs(&server),
        &strs(&client),
        &["(DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))", "peer sent 3 certificate(s)"],
    );
    assert!(theirs.contains("psk=none"), "{theirs}");
}

#[test]
fn mutual_authentication() {
    if skip_without_pion() {
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
    let (_, theirs) = fastshake_client_with_pion13(
        "1.3",
        &strs(&server),
        &strs(&client),
        &["(DTLS 1.3;", "peer sent 3 certificate(s)"],
    );
    assert!(theirs.contains("peer_certs=3"), "pion validated our chain of three: {theirs}");
}

#[test]
fn hello_retry_request_for_another_group() {
    if skip_without_pion() {
        return;
    }
    // fastshake sends one key share, for x25519; a server that takes only secp256r1 asks again.
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let server: Vec<&str> = psk.iter().copied().chain(["--groups", "secp256r1"]).collect();
    let (_, theirs) = fastshake_client_with_pion13(
        "1.3",
        &server,
        &psk,
        &["(DTLS 1.3; secp256r1; after a HelloRetryRequest for secp256r1)"],
    );
    assert!(theirs.contains("group=secp256r1"), "{theirs}");
}

#[test]
fn a_wrong_psk_fails_with_a_reason() {
    if skip_without_pion() {
        return;
    }
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let (_server, port) = pion::dtls13_server(&binary, &["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX]);
    let mut client = FASTSHAKE.client_with(
        port,
        &[
            "--dtls",
            "1.3",
            "--psk-identity",
            PSK_IDENTITY,
            "--psk",
            WRONG_PSK_HEX,
            "--handshake-timeout",
            "5",
        ],
    );
    let status = client.expect_exit();
    assert!(!status.success());
    let stderr = client.stderr.text();
    assert!(stderr.contains("DTLS handshake with") && stderr.contains("decrypt_error"), "{stderr}");
    assert!(!stderr.contains("handshake done"), "{stderr}");
}

/// pion's 1.3 client against `fastshake server --dtls 1.3 --echo ARGS`: both summaries, an echo.
fn pion13_client_with_fastshake(
    dtls: &str,
    server_args: &[&str],
    client_args: &[&str],
    parts: &[&str],
) -> String {
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let mut args = vec!["--dtls", dtls, "--echo"];
    args.extend_from_slice(server_args);
    let (server, port) = FASTSHAKE.server_with(&args);
    let mut client = pion::dtls13_client(&binary, port, client_args);
    let theirs = pion::handshake_line(&client);
    assert!(theirs.contains("version=DTLS1.3") && theirs.contains("resent=0"), "{theirs}");
    server.expect_handshake_without_resend(parts);
    client.echo_line("ping from pion over DTLS 1.3");
    client.finish(&[&server]);
    theirs
}

#[test]
fn pion_client_with_psk() {
    if skip_without_pion() {
        return;
    }
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let server: Vec<&str> = psk.iter().copied().chain(["--groups", "x25519"]).collect();
    let theirs = pion13_client_with_fastshake(
        "both",
        &server,
        &psk,
        &["(DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))"],
    );
    assert!(theirs.contains("psk=psk_dhe_ke") && theirs.contains("hrr=1"), "{theirs}");
}

#[test]
fn pion_client_with_certificates_and_mutual_authentication() {
    if skip_without_pion() {
        return;
    }
    let pki = Pki::generate(FASTSHAKE, "p256", 3);
    let server = pki.fastshake_mutual_server_args("require");
    let client =
        ["--ca", &pki.ca(), "--cert", &pki.client_cert(), "--key", &pki.client_key()].map(str::to_owned);
    let theirs = pion13_client_with_fastshake(
        "1.3",
        &strs(&server),
        &strs(&client),
        &[
            "(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)",
            "peer sent 3 certificate(s)",
        ],
    );
    assert!(theirs.contains("peer_certs=3"), "pion validated our chain of three: {theirs}");
}

#[test]
fn pion_client_asked_for_secp256r1() {
    if skip_without_pion() {
        return;
    }
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let server: Vec<&str> = psk.iter().copied().chain(["--groups", "secp256r1"]).collect();
    let client: Vec<&str> = psk.iter().copied().chain(["--groups", "x25519,secp256r1"]).collect();
    let theirs = pion13_client_with_fastshake(
        "1.3",
        &server,
        &client,
        &["(DTLS 1.3; secp256r1; after a HelloRetryRequest for secp256r1)"],
    );
    assert!(theirs.contains("group=secp256r1"), "{theirs}");
}

#[test]
fn post_quantum_hybrid_both_ways() {
    if skip_without_pion() {
        return;
    }
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    // fastshake's client prefers the hybrid: a small first ClientHello, a two-fragment second.
    let client: Vec<&str> = psk.iter().copied().chain(["--groups", "x25519mlkem768,x25519"]).collect();
    let (_, theirs) = fastshake_client_with_pion13(
        "both",
        &psk,
        &client,
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)"],
    );
    assert!(theirs.contains("group=x25519mlkem768"), "{theirs}");
    // pion's client sends x25519 first; fastshake's server prefers the hybrid and asks for it.
    let theirs = pion13_client_with_fastshake(
        "both",
        &psk,
        &psk,
        &["(DTLS 1.3; x25519mlkem768; after a HelloRetryRequest for x25519mlkem768)"],
    );
    assert!(theirs.contains("group=x25519mlkem768"), "{theirs}");
}

/// Connection IDs in 1.3 (RFC 9147 §4, §9) both ways: pion's client `--cid` against
/// `fastshake server --mobility cid` (8-byte CIDs of ours in pion's records, none in ours), and
/// `fastshake client --mobility cid` against pion's server `--cid` (its 8-byte CID in our
/// records). The echo shows each side read the other's unified headers with the C bit.
#[test]
fn connection_ids_both_ways() {
    if skip_without_pion() {
        return;
    }
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let server: Vec<&str> = psk.iter().copied().chain(["--mobility", "cid", "--groups", "x25519"]).collect();
    let client: Vec<&str> = psk.iter().copied().chain(["--cid"]).collect();
    let theirs = pion13_client_with_fastshake(
        "1.3",
        &server,
        &client,
        &["(DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))"],
    );
    let cid_out = field(&theirs, "cid_out=");
    assert_eq!(cid_out.len(), 16, "pion writes our 8-byte CID: {theirs}");
    assert_eq!(field(&theirs, "cid_in="), "none", "{theirs}");

    let server: Vec<&str> = psk.iter().copied().chain(["--cid"]).collect();
    let client: Vec<&str> = psk.iter().copied().chain(["--mobility", "cid"]).collect();
    let (_, theirs) = fastshake_client_with_pion13(
        "1.3",
        &server,
        &client,
        &["TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))"],
    );
    assert_eq!(field(&theirs, "cid_in=").len(), 16, "pion issued an 8-byte CID we wrote: {theirs}");
    assert_eq!(field(&theirs, "cid_out="), "none", "{theirs}");
}

/// The value after `name` in a handshake line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let at = line.find(name).map_or(line.len(), |i| i + name.len());
    line[at..].split_whitespace().next().unwrap_or("")
}

/// KeyUpdate (RFC 9147 §8): pion's client updates its sending keys and asks for ours too
/// (update_requested); it waits for our ACK and our KeyUpdate, then both ways run on epoch 4.
/// The echo after it shows each side reads the other's new keys.
#[test]
fn pion_client_updates_keys_and_asks_for_ours() {
    if skip_without_pion() {
        return;
    }
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let client: Vec<&str> = psk.iter().copied().chain(["--key-update"]).collect();
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let (server, port) =
        FASTSHAKE.server_with(&["--dtls", "1.3", "--echo"].into_iter().chain(psk).collect::<Vec<_>>());
    let mut client = pion::dtls13_client(&binary, port, &client);
    let theirs = pion::handshake_line(&client);
    assert!(theirs.contains("version=DTLS1.3") && theirs.contains("resent=0"), "{theirs}");
    server.expect_handshake_without_resend(&["(DTLS 1.3;"]);
    // Epoch 3 carries the first application traffic keys; one update each way makes it 4.
    let updated = client.expect_stderr_line_with(&["key update done"]);
    assert!(updated.contains("write epoch 4, read epoch 4"), "{updated}");
    client.echo_line("after both key updates");
    client.finish(&[&server]);
}

/// Connection IDs with a move: fastshake's client `--mobility cid` (connection_id and `rrc` in
/// its ClientHello) moves to a new port after the first echo; pion's server routes the record
/// carrying its CID from the new address to the session (its listener routes by CID) and
/// answers there: with `--cid-moves rrc` after RFC 9853's return routability check (`rrc` in
/// both hellos, the new path answering pion's path_challenge), with `unsafe` at once.
#[test]
fn pion_server_follows_fastshake_client_by_cid() {
    if skip_without_pion() {
        return;
    }
    for moves in ["rrc", "unsafe"] {
        pion_server_follows_a_move(moves);
    }
}

fn pion_server_follows_a_move(moves: &str) {
    let psk = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX];
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let server: Vec<&str> = psk.iter().copied().chain(["--cid", "--cid-moves", moves]).collect();
    let (server, port) = pion::dtls13_server(&binary, &server);
    let client: Vec<&str> = ["--dtls", "1.3"]
        .into_iter()
        .chain(psk)
        .chain(["--mobility", "cid", "--rebind-after", "1"])
        .collect();
    let mut client = FASTSHAKE.client_with(port, &client);
    client.expect_handshake_without_resend(&["(DTLS 1.3;"]);
    client.echo_line("before the move");
    let moved = client.expect_stderr_line_with(&["fastshake client: moved from"]);
    let new_address = moved.rsplit(' ').next().expect("an address").to_owned();
    if moves == "rrc" {
        // The first record from the new address starts pion's check (path_challenge, answered
        // by path_response); pion answers it on the path it still trusts, the old one, which
        // the client has left. Lines sent once the path is checked come back.
        client.write_line("starts the path check");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    client.echo_line("after the move");
    server.expect_stdout("after the move\n");
    client.finish(&[&server]);
    // The session pion ends is the one of the handshake, now at the client's new address.
    server.expect_stderr_line_with(&["session with", &new_address, "ended"]);
    assert_eq!(server.stderr.text().matches("handshake done").count(), 1, "{}", server.transcript());
}

/// Resumption by ticket (RFC 8446 §2.2) with pion's server (`--tickets`, an ECDSA chain): two
/// `fastshake client --session-file F` runs, the first full and keeping pion's
/// NewSessionTicket, the second resuming with it; pion's second handshake chose the ticket's PSK
/// (there is no external one).
#[test]
fn fastshake_client_resumes_a_pion_ticket() {
    if skip_without_pion() {
        return;
    }
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let (server, port) = pion::dtls13_server(
        &binary,
        &["--cert", &pki.server_cert(), "--key", &pki.server_key(), "--tickets"],
    );
    let session = pki.scratch("pion13.session");
    let mut args = pki.fastshake_client_args();
    args.extend(["--dtls", "1.3", "--session-file", &session].map(str::to_owned));
    let (first, _) = FASTSHAKE.resumed_by_session_file(port, &strs(&args), "ticket");
    assert!(first.contains("kept the server's DTLS 1.3 ticket"), "{first}");
    server.expect_stdout("second run\n");
    let theirs = server.handshake_lines();
    assert_eq!(theirs.len(), 2, "{}", server.transcript());
    assert!(theirs[0].contains("psk=none") && theirs[0].contains("resent=0"), "{theirs:?}");
    assert!(theirs[1].contains("psk=psk_dhe_ke") && theirs[1].contains("resent=0"), "{theirs:?}");
}

/// Resumption by ticket (RFC 8446 §2.2): pion's client `--resume` keeps our NewSessionTicket,
/// closes, and resumes with it; with certificates only, its psk_dhe_ke is the ticket's.
#[test]
fn pion_client_resumes_a_fastshake_ticket() {
    if skip_without_pion() {
        return;
    }
    let binary = pion::dtls13_peer().expect("pion13-peer");
    let pki = Pki::generate(FASTSHAKE, "p256", 2);
    let mut server_args = pki.fastshake_server_args();
    server_args.extend(["--dtls", "1.3", "--echo"].map(str::to_owned));
    let (server, port) = FASTSHAKE.server_with(&strs(&server_args));
    let mut client = pion::dtls13_client(&binary, port, &["--ca", &pki.ca(), "--resume"]);
    client.expect_stderr("kept a ticket of");
    client.expect_stderr_line_with(&["handshake done:", "psk=psk_dhe_ke"]);
    client.echo_line("ping after resumption");
    client.finish(&[&server]);
    let theirs = client.handshake_lines();
    assert_eq!(theirs.len(), 2, "{}", client.transcript());
    assert!(theirs[0].contains("psk=none") && theirs[0].contains("resent=0"), "{theirs:?}");
    assert!(theirs[1].contains("psk=psk_dhe_ke") && theirs[1].contains("resent=0"), "{theirs:?}");
    server.expect_handshake_without_resend(&["(DTLS 1.3;", "full (not resumed)"]);
    server.expect_handshake_without_resend(&["(DTLS 1.3;", "resumed by ticket"]);
    server.assert_no_resend_in_any_handshake();
}
