//! Connection ID (RFC 9146) interop with an independent implementation: `fastshake server|client
//! --mobility cid` against pion/dtls (`interop/pion`, built with Go), as real processes over loopback,
//! for both PSK suites. Evidence of the CID comes from both sides: pion names the CIDs it negotiated and
//! counts the tls12_cid records on its socket (and drops a record without the CID it issued), fastshake
//! traces its datagrams (`-v`). The pion client's move to a new local port mid-session is the
//! real-peer migration test: the fastshake server must follow it by CID, in the same session.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// The fastshake server's `-v` lines that say it sent to / received from 127.0.0.1:`port`.
fn trace_lines(server: &Peer, arrow: &str, port: u16) -> Vec<String> {
    let needle = format!("{arrow} 127.0.0.1:{port} ");
    server.stderr.text().lines().filter(|line| line.contains(&needle)).map(str::to_owned).collect()
}

/// Whether a `-v` trace line names a tls12_cid record. The trace reads record headers without knowing
/// the CID's length, so it may call one "truncated record (type 25)".
fn names_cid_record(line: &str) -> bool {
    line.contains("tls12_cid") || line.contains("type 25")
}

/// The port in "moved from 127.0.0.1:A to 127.0.0.1:B" on the pion client's stderr: B.
fn new_local_port(client: &Peer) -> u16 {
    client.expect_stderr("moved from");
    let stderr = client.stderr.text();
    let line = stderr.lines().find(|line| line.contains("moved from")).expect("the line seen above");
    line.rsplit(':').next().and_then(|port| port.trim().parse().ok()).unwrap_or_else(|| panic!("{line:?}"))
}

/// fastshake server --mobility cid <-> pion client with CID: data both ways in tls12_cid records, then
/// the client moves to a new local port and the same session goes on from there.
fn fastshake_server_follows_pion_client(suite: &str, client_cid: &[&str]) {
    let Some(binary) = pion::dtls_peer() else { return };
    let (server, port) = FASTSHAKE.server(&["--mobility", "cid", "--echo", "-v"]);
    let mut client_args = vec!["--cid", "--move-after", "1"];
    client_args.extend_from_slice(client_cid);
    let mut client = pion::dtls_client(&binary, port, suite, &client_args);

    let handshake = pion::handshake_line(&client);
    assert!(handshake.contains(suite), "{handshake}");
    assert!(!handshake.contains("cid out: none"), "fastshake issued no CID: {handshake}");
    server.expect_handshake_without_resend(&[suite]);

    client.echo_line("before the move");
    client.write_line("after the move");
    let moved_to = new_local_port(&client);
    client.expect_stdout("after the move\n");
    client.finish(&[&server]);

    let counts = pion::record_counts(&client);
    assert_eq!(counts.local_port_changes, 1, "{counts:?}");
    // Every encrypted record of the client carried the CID, and both lines plus the close came back
    // from the server (pion's read of the replies proves they were for this session).
    assert_eq!(counts.sent_plain, 0, "{counts:?}\n{}", client.transcript());
    assert!(counts.sent_cid >= 3, "Finished, two lines, close_notify: {counts:?}");
    if handshake.contains("cid in: none") {
        assert_eq!(counts.received_cid, 0, "no CID was asked for, none may come: {counts:?}");
        assert!(counts.received_plain >= 2, "{counts:?}");
    } else {
        assert_eq!(
            counts.received_plain,
            0,
            "the client asked for a CID: {counts:?}\n{}",
            client.transcript()
        );
        assert!(counts.received_cid >= 2, "{counts:?}");
    }

    // One session, now at the new port: the server received a tls12_cid record from there and answered there.
    let transcript = server.transcript();
    assert_eq!(server.stderr.text().matches("handshake done").count(), 1, "a second handshake\n{transcript}");
    let received = trace_lines(&server, "<-", moved_to);
    assert!(
        received.iter().any(|line| names_cid_record(line)),
        "no tls12_cid from the new port\n{transcript}"
    );
    assert!(!trace_lines(&server, "->", moved_to).is_empty(), "nothing sent to the new port\n{transcript}");
    server.expect_stderr_line_with(&["moved from", &format!("to 127.0.0.1:{moved_to}")]);
}

#[test]
fn fastshake_server_follows_pion_client_by_cid_ccm8() {
    fastshake_server_follows_pion_client(CCM8, &[]);
}

#[test]
fn fastshake_server_follows_pion_client_by_cid_gcm() {
    fastshake_server_follows_pion_client(GCM, &[]);
}

/// The same with a pion client that also asks for a CID in the records it receives: the fastshake
/// server then sends tls12_cid records too, and still follows the move.
#[test]
fn fastshake_server_sends_cid_records_to_pion_client_that_asks_ccm8() {
    fastshake_server_follows_pion_client(CCM8, &["--receive-cid-len", "4"]);
}

#[test]
fn fastshake_server_sends_cid_records_to_pion_client_that_asks_gcm() {
    fastshake_server_follows_pion_client(GCM, &["--receive-cid-len", "4"]);
}

/// pion server with CID <-> fastshake client --mobility cid: data both ways; pion issued a CID and
/// drops every encrypted record without it, so the echo proves our client sent tls12_cid records.
fn fastshake_client_with_pion_server(suite: &str) {
    let Some(binary) = pion::dtls_peer() else { return };
    let (server, port) = pion::dtls_server(&binary, suite, &["--cid"]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--suite", suite, "--mobility", "cid", "-v"]);
    client.expect_handshake_without_resend(&[suite]);
    let handshake = pion::handshake_line(&server);
    assert!(handshake.contains("cid in: 8 bytes"), "{handshake}");

    client.echo_line("ping from fastshake");
    server.expect_stdout("ping from fastshake\n");
    client.finish(&[&server]);
    let sent_cid = client
        .stderr
        .text()
        .lines()
        .filter(|l| l.contains("fastshake client: ->") && names_cid_record(l))
        .count();
    assert!(sent_cid >= 2, "the trace shows {sent_cid} tls12_cid datagrams sent\n{}", client.transcript());
    server.expect_stderr("ended");
}

#[test]
fn fastshake_client_with_pion_server_cid_ccm8() {
    fastshake_client_with_pion_server(CCM8);
}

#[test]
fn fastshake_client_with_pion_server_cid_gcm() {
    fastshake_client_with_pion_server(GCM);
}

/// fastshake client --mobility cid moving to a new local port mid-session (its testing aid
/// --rebind-after) <-> pion server with CID: pion's listener routes the tls12_cid records from the new
/// port to the same session and answers there.
fn pion_server_follows_fastshake_client(suite: &str) {
    let Some(binary) = pion::dtls_peer() else { return };
    let (server, port) = pion::dtls_server(&binary, suite, &["--cid"]);
    let mut client = FASTSHAKE.client(
        port,
        PSK_HEX,
        &["--suite", suite, "--mobility", "cid", "--rebind-after", "1", "-v"],
    );
    client.expect_handshake_without_resend(&[suite]);
    client.echo_line("before the move");
    client.expect_stderr("fastshake client: moved from");
    let stderr = client.stderr.text();
    let moved = stderr.lines().find(|line| line.contains("moved from")).expect("the line seen above");
    let new_address = moved.rsplit(' ').next().expect("an address").to_owned();

    client.echo_line("after the move");
    server.expect_stdout("after the move\n");
    client.finish(&[&server]);
    // The session pion ends is the one of the handshake, now at the client's new address.
    server.expect_stderr_line_with(&["session with", &new_address, "ended"]);
    assert_eq!(server.stderr.text().matches("handshake done").count(), 1, "{}", server.transcript());
}

#[test]
fn pion_server_follows_fastshake_client_by_cid_ccm8() {
    pion_server_follows_fastshake_client(CCM8);
}

#[test]
fn pion_server_follows_fastshake_client_by_cid_gcm() {
    pion_server_follows_fastshake_client(GCM);
}

/// fastshake server --mobility cid <-> pion client without CID: no CID is negotiated, plain records
/// both ways, data still flows.
fn fastshake_server_falls_back_with_pion_client_without_cid(suite: &str) {
    let Some(binary) = pion::dtls_peer() else { return };
    let (server, port) = FASTSHAKE.server(&["--mobility", "cid", "--echo", "-v"]);
    let mut client = pion::dtls_client(&binary, port, suite, &[]);
    let handshake = pion::handshake_line(&client);
    assert!(handshake.contains("cid out: none; cid in: none"), "{handshake}");
    client.echo_line("plain records");
    client.finish(&[&server]);
    let counts = pion::record_counts(&client);
    assert_eq!((counts.sent_cid, counts.received_cid), (0, 0), "{counts:?}");
    assert!(counts.sent_plain >= 2 && counts.received_plain >= 1, "{counts:?}");
    assert!(!server.stderr.text().lines().any(names_cid_record), "{}", server.transcript());
}

#[test]
fn fastshake_server_falls_back_with_pion_client_without_cid_ccm8() {
    fastshake_server_falls_back_with_pion_client_without_cid(CCM8);
}

#[test]
fn fastshake_server_falls_back_with_pion_client_without_cid_gcm() {
    fastshake_server_falls_back_with_pion_client_without_cid(GCM);
}

/// pion server without CID <-> fastshake client --mobility cid: the offer is ignored, plain records.
fn fastshake_client_falls_back_with_pion_server_without_cid(suite: &str) {
    let Some(binary) = pion::dtls_peer() else { return };
    let (server, port) = pion::dtls_server(&binary, suite, &[]);
    let mut client = FASTSHAKE.client(port, PSK_HEX, &["--suite", suite, "--mobility", "cid", "-v"]);
    client.expect_handshake_without_resend(&[suite]);
    let handshake = pion::handshake_line(&server);
    assert!(handshake.contains("cid out: none; cid in: none"), "{handshake}");
    client.echo_line("plain records");
    client.finish(&[&server]);
    assert!(!client.stderr.text().lines().any(names_cid_record), "{}", client.transcript());
    assert!(client.stderr.text().contains("ApplicationData"), "{}", client.transcript());
}

#[test]
fn fastshake_client_falls_back_with_pion_server_without_cid_ccm8() {
    fastshake_client_falls_back_with_pion_server_without_cid(CCM8);
}

#[test]
fn fastshake_client_falls_back_with_pion_server_without_cid_gcm() {
    fastshake_client_falls_back_with_pion_server_without_cid(GCM);
}

/// The harness itself: pion against pion, so a failure above is not the Go program's. The client's
/// move is real (the server follows it by CID, as RFC 9146 lets it), and without CIDs the same move
/// leaves the client's next line unanswered.
#[test]
fn pion_peer_moves_and_pion_server_follows_by_cid() {
    let Some(binary) = pion::dtls_peer() else { return };
    let (server, port) = pion::dtls_server(&binary, CCM8, &["--cid"]);
    let mut client = pion::dtls_client(&binary, port, CCM8, &["--cid", "--move-after", "1"]);
    client.echo_line("one");
    client.write_line("two");
    new_local_port(&client);
    client.expect_stdout("two\n");
    client.finish(&[&server]);
    let counts = pion::record_counts(&client);
    assert_eq!((counts.sent_plain, counts.local_port_changes), (0, 1), "{counts:?}");
}

#[test]
fn pion_peer_without_cid_loses_its_session_when_it_moves() {
    let Some(binary) = pion::dtls_peer() else { return };
    let (_server, port) = pion::dtls_server(&binary, CCM8, &[]);
    let mut client = pion::dtls_client(&binary, port, CCM8, &["--move-after", "1", "--linger", "1s"]);
    client.echo_line("one");
    client.write_line("two");
    new_local_port(&client);
    client.close_stdin();
    client.expect_exit();
    assert!(
        !client.stdout.text().contains("two"),
        "a server without CID answered a moved client\n{}",
        client.transcript()
    );
}

/// `dumpcap` and `tshark` (CI installs tshark; capturing needs root), or why they cannot be used.
fn wire_capture_tools() -> Result<(), String> {
    for tool in ["dumpcap", "tshark"] {
        let found =
            std::process::Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!("{tool} is not installed (Debian tshark)"));
        }
    }
    let uid = std::process::Command::new("id").arg("-u").output().map_err(|e| format!("id -u: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("capturing on lo needs root".to_owned());
    }
    Ok(())
}

/// The CID of every record of every captured datagram, as Wireshark's DTLS dissector reads them:
/// (source port, destination port, CIDs in hex, "" for a record without one).
fn captured_cids(pcap: &std::path::Path, server_port: u16) -> Vec<(u16, u16, String)> {
    let output = std::process::Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-d", &format!("udp.port=={server_port},dtls"), "-T", "fields"])
        .args(["-e", "udp.srcport", "-e", "udp.dstport", "-e", "dtls.record.connection_id"])
        .output()
        .expect("run tshark");
    assert!(output.status.success(), "tshark failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let port =
                |i: usize| fields.get(i).and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
            (port(0), port(1), fields.get(2).unwrap_or(&"").to_string())
        })
        .collect()
}

/// A third witness besides the two peers: on the wire (captured on lo, read by Wireshark's dissector),
/// the pion client's records carry the CID fastshake issued, fastshake's carry the one pion asked for,
/// and after the client's move the same CIDs come and go through its new port.
#[test]
fn capture_shows_the_cids_both_ways_and_across_the_move() {
    let Some(binary) = pion::dtls_peer() else { return };
    if let Err(why) = wire_capture_tools() {
        eprintln!("skipped: {why}");
        return;
    }
    let (server, port) = FASTSHAKE.server(&["--mobility", "cid", "--echo"]);
    let pcap = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cid-interop-{}-{port}.pcap", std::process::id()));
    let mut capture = std::process::Command::new("dumpcap");
    capture.args(["-q", "-i", "lo", "-f", &format!("udp port {port}"), "-a", "duration:30", "-w"]).arg(&pcap);
    let mut capture = Peer::spawn("dumpcap", capture);
    capture.expect_stderr("Capturing on");
    // dumpcap says so before its filter is attached, and the dissector learns the CID lengths
    // from the hellos: under load the first datagrams were missed, so give it a moment.
    std::thread::sleep(std::time::Duration::from_secs(1));

    let mut client =
        pion::dtls_client(&binary, port, CCM8, &["--cid", "--receive-cid-len", "4", "--move-after", "1"]);
    let handshake = pion::handshake_line(&client);
    client.echo_line("before the move");
    client.write_line("after the move");
    let moved_to = new_local_port(&client);
    client.expect_stdout("after the move\n");
    client.finish(&[&server]);
    capture.terminate();
    capture.expect_exit();

    // "cid out: 8 bytes (HEX); cid in: 4 bytes (HEX)"
    let cid_in_line = |label: &str| {
        let after = handshake.split(label).nth(1).unwrap_or_else(|| panic!("{handshake}"));
        after.split(['(', ')']).nth(1).unwrap_or_else(|| panic!("{handshake}")).to_owned()
    };
    let (issued_by_fastshake, asked_by_pion) = (cid_in_line("cid out: "), cid_in_line("cid in: "));
    let datagrams = captured_cids(&pcap, port);
    let _ = std::fs::remove_file(&pcap);
    let shown = format!("{datagrams:#?}\n{}", client.transcript());
    let carrying = |cid: &str, from_port: Option<u16>, to_port: Option<u16>| {
        datagrams
            .iter()
            .filter(|(src, dst, cids)| {
                from_port.is_none_or(|p| p == *src) && to_port.is_none_or(|p| p == *dst) && cids.contains(cid)
            })
            .count()
    };
    assert!(carrying(&issued_by_fastshake, None, Some(port)) >= 3, "to the server\n{shown}");
    assert!(carrying(&asked_by_pion, Some(port), None) >= 3, "to the client\n{shown}");
    assert!(carrying(&issued_by_fastshake, Some(moved_to), Some(port)) >= 1, "from the new port\n{shown}");
    assert!(carrying(&asked_by_pion, Some(port), Some(moved_to)) >= 1, "to the new port\n{shown}");
}
