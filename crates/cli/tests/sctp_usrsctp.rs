//! Interoperability of `fastshake sctp` with usrsctp's example programs (Debian
//! `libusrsctp-examples`), over UDP encapsulation on loopback.
//!
//! usrsctp's `echo_server LOCAL_ENCAPS REMOTE_ENCAPS` listens on SCTP port 7 and echoes every
//! message; `client ADDR PORT LOCAL_PORT LOCAL_ENCAPS REMOTE_ENCAPS` sends its standard input line
//! by line and writes what arrives to standard output. Every process is killed when its guard
//! drops, and every wait has a timeout.
//!
//! Without the examples installed these tests fail with a hint, unless
//! `FASTSHAKE_SKIP_USRSCTP=1` says to skip them.

use fastshake_sctp::packet::{Chunk, DataChunk, Packet, Param};
use fastshake_testkit::peers::sctp::{
    assert_alt_only_answers, assert_served_regular_client, client_inits, count_lines, resent, Relay, Resent,
};
use fastshake_testkit::peers::{free_udp_port, Fastshake, Peer};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

const USRSCTP_DIR: &str = "/usr/lib/usrsctp";
/// usrsctp's echo server listens on the echo port.
const ECHO_SCTP_PORT: &str = "7";

/// The path of a usrsctp example, or `None` when the tests are to be skipped.
fn usrsctp_program(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(USRSCTP_DIR).join(name);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("FASTSHAKE_SKIP_USRSCTP").is_ok_and(|v| v == "1") {
        eprintln!("skipping: {} not installed", path.display());
        return None;
    }
    panic!(
        "{} is missing: install it with `apt-get install -y libusrsctp-examples`, \
         or set FASTSHAKE_SKIP_USRSCTP=1 to skip the usrsctp interop tests",
        path.display()
    );
}

/// Runs `program` with line-buffered standard output where `stdbuf` exists, so what it prints
/// can be read while it runs (usrsctp's examples use printf).
fn spawn_line_buffered(program: &PathBuf, args: &[String]) -> Peer {
    let stdbuf = PathBuf::from("/usr/bin/stdbuf");
    if stdbuf.exists() {
        let mut all = vec!["-oL".to_string(), program.display().to_string()];
        all.extend_from_slice(args);
        Peer::start(stdbuf, &all)
    } else {
        Peer::start(program, args)
    }
}

/// Waits until something is bound to UDP `port` on every IPv4 address (usrsctp binds its
/// encapsulation socket inside `usrsctp_init`).
fn wait_until_bound(port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if UdpSocket::bind(("127.0.0.1", port)).is_err() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

/// usrsctp's echo server on a fresh UDP port, answering to `peer_port`; returns it and its port.
fn start_usrsctp_echo_server(their_port: u16, peer_port: u16) -> Option<Peer> {
    let program = usrsctp_program("echo_server")?;
    let server = spawn_line_buffered(&program, &[their_port.to_string(), peer_port.to_string()]);
    assert!(
        wait_until_bound(their_port, Duration::from_secs(5)),
        "echo_server did not bind\n{}",
        server.transcript()
    );
    // The UDP port is bound inside `usrsctp_init`, a moment before the echo server's SCTP socket
    // listens; an INIT in between goes unanswered and our client resends it a second later,
    // which the no-resend assertion would take for our stall. The program prints nothing when
    // it listens, so give it that moment.
    thread::sleep(Duration::from_millis(300));
    Some(server)
}

/// usrsctp's client towards SCTP port 7 over UDP encapsulation to `peer_port`, from a fresh UDP
/// port.
fn start_usrsctp_client(program: &Path, peer_port: u16) -> Peer {
    let their_port = free_udp_port().to_string();
    Peer::start(program, &["127.0.0.1", ECHO_SCTP_PORT, "0", &their_port, &peer_port.to_string()])
}

/// The lengths of the complete messages usrsctp's echo server reports.
fn received_lengths(stdout: &str) -> Vec<usize> {
    stdout
        .lines()
        .filter(|l| l.contains("complete 1"))
        .filter_map(|l| l.strip_prefix("Msg of length ")?.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Runs our client against usrsctp's echo server with `extra` arguments and checks that the
/// payload comes back exactly once and that usrsctp received it exactly once.
fn our_client_against_usrsctp_echo(
    extra: &[&str],
    payload: &[u8],
    prepare: impl FnOnce(u16),
) -> (Peer, Peer, Vec<(bool, Vec<u8>)>) {
    // Everything passes a recording relay, so the tests can check what went on the wire.
    let relay = Relay::start();
    let Some(server) = start_usrsctp_echo_server(relay.server_port, relay.port) else {
        panic!("skipped") // unreachable unless skipping; callers check first
    };
    prepare(relay.port);
    let mut client = FASTSHAKE.sctp_echo_client(relay.port, ECHO_SCTP_PORT, payload, extra);
    let status = client.wait_timeout(Duration::from_secs(30));
    let report = format!("{}\n{}", client.transcript(), server.transcript());
    assert!(status.is_some_and(|s| s.success()), "client failed: {status:?}\n{report}");
    assert_eq!(client.stdout.bytes(), payload, "echo must come back exactly once\n{report}");
    // usrsctp prints one line per message it received (and echoed).
    assert!(
        server.stdout.wait_for("Msg of length", Duration::from_secs(2)),
        "usrsctp saw no message\n{report}"
    );
    assert_eq!(
        received_lengths(&server.stdout.text()).iter().sum::<usize>(),
        payload.len(),
        "usrsctp must receive every byte exactly once\n{report}"
    );
    assert!(client.stderr.text().contains("closed gracefully"), "no graceful close\n{report}");
    // Nothing went twice on loopback but a zero-RTT message usrsctp did not take (by design).
    let zero_rtt = u64::from(extra.contains(&"--zero-rtt"));
    let expected = Resent { data: zero_rtt, ..Resent::default() };
    assert_eq!(resent(&client.stderr.text(), "sctp client:"), expected, "resent on loopback\n{report}");
    let wire = relay.datagrams();
    (client, server, wire)
}

/// The payloads of the regular DATA chunks the client sent.
fn client_data(wire: &[(bool, Vec<u8>)]) -> Vec<DataChunk> {
    wire.iter()
        .filter(|(from_client, _)| *from_client)
        .filter_map(|(_, d)| Packet::parse(d).ok())
        .flat_map(|p| p.chunks)
        .filter_map(|c| match c {
            Chunk::Data(d) => Some(d),
            _ => None,
        })
        .collect()
}

/// Checks that the client's first INIT carried `alt_cookie` and the payload in ALT-DATA, that
/// usrsctp answered with an INIT-ACK (it skipped both parameters), and that the payload went
/// again as a regular DATA chunk.
fn assert_alt_on_the_wire(wire: &[(bool, Vec<u8>)], alt_cookie: &[u8], payload: &[u8]) {
    let inits = client_inits(wire);
    let first = inits.first().expect("the client sent an INIT");
    let cookie = first.params.iter().find_map(|p| match p {
        Param::AltCookie(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(cookie.as_deref(), Some(alt_cookie), "ALT-COOKIE in the INIT: {:?}", first.params);
    let alt_data = first.params.iter().find_map(|p| match p {
        Param::AltData(d) => Some(d.clone()),
        _ => None,
    });
    let alt_data = alt_data.expect("ALT-DATA in the INIT");
    assert!(
        alt_data.windows(payload.len()).any(|w| w == payload),
        "the zero-RTT message travels inside ALT-DATA"
    );
    let init_ack_from_usrsctp = wire
        .iter()
        .filter(|(from_client, _)| !*from_client)
        .filter_map(|(_, d)| Packet::parse(d).ok())
        .any(|p| p.chunks.iter().any(|c| matches!(c, Chunk::InitAck(_))));
    assert!(init_ack_from_usrsctp, "usrsctp answered the INIT with an INIT-ACK");
    let resent: Vec<_> = client_data(wire).into_iter().filter(|d| d.data == payload).collect();
    assert!(!resent.is_empty(), "the zero-RTT message was sent again as regular DATA");
    let tsns: std::collections::BTreeSet<u32> = resent.iter().map(|d| d.tsn).collect();
    assert_eq!(tsns.len(), 1, "one TSN for the message (copies only as retransmissions)");
}

#[test]
fn regular_client_with_usrsctp_echo_server() {
    if usrsctp_program("echo_server").is_none() {
        return;
    }
    let payload = b"hello usrsctp, from the regular handshake\n";
    let (client, _server, wire) = our_client_against_usrsctp_echo(&["--mode", "regular"], payload, |_| {});
    assert!(client.stderr.text().contains("regular handshake"), "{}", client.transcript());
    let inits = client_inits(&wire);
    assert!(
        inits.iter().all(|i| !i.params.iter().any(Param::is_alt)),
        "a regular-mode client sends no ALT-* parameter"
    );
}

/// Messages larger than the path MTU go out in fragments; usrsctp reassembles them, echoes them
/// fragmented in turn, and we reassemble the echo.
#[test]
fn fragmented_messages_with_usrsctp_echo_server() {
    if usrsctp_program("echo_server").is_none() {
        return;
    }
    let payload: Vec<u8> = (0..9000u32).map(|i| b'A' + (i % 23) as u8).collect();
    let (client, server, wire) =
        our_client_against_usrsctp_echo(&["--mode", "regular", "--message-bytes", "4000"], &payload, |_| {});
    let lengths = received_lengths(&server.stdout.text());
    assert!(
        lengths.iter().any(|&n| n > 1200),
        "a message above the MTU went through: {lengths:?}\n{}",
        client.transcript()
    );
    let data = client_data(&wire);
    assert!(data.iter().any(|d| d.beginning && !d.ending), "sent in fragments");
}

/// usrsctp does not know ALT-COOKIE or ALT-DATA: it skips both (their type's high bits are 10),
/// answers with a regular INIT-ACK, and the zero-RTT message goes again as DATA — delivered and
/// echoed once.
#[test]
fn alt_client_with_zero_rtt_falls_back_with_usrsctp_echo_server() {
    if usrsctp_program("echo_server").is_none() {
        return;
    }
    let payload = b"zero-RTT data that usrsctp must see exactly once\n";
    let (client, _server, wire) =
        our_client_against_usrsctp_echo(&["--mode", "both", "--zero-rtt"], payload, |_| {});
    assert_alt_on_the_wire(&wire, &[], payload);
    let stderr = client.stderr.text();
    assert!(stderr.contains("regular handshake"), "fallback to the regular handshake\n{stderr}");
    assert!(stderr.contains("0 zero-RTT message(s) accepted"), "usrsctp sends no ALT-SACK\n{stderr}");
}

/// The same with a non-empty ALT-COOKIE (a cached cookie usrsctp cannot know) in the INIT.
#[test]
fn alt_client_with_cached_cookie_and_zero_rtt_falls_back_with_usrsctp_echo_server() {
    if usrsctp_program("echo_server").is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fastshake-sctp-usrsctp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cache = dir.join("cookies");
    let cache_arg = cache.display().to_string();
    let payload = b"zero-RTT data beside a cached ALT-COOKIE\n";
    let (client, _server, wire) = our_client_against_usrsctp_echo(
        &["--mode", "both", "--zero-rtt", "--cookie-cache", &cache_arg],
        payload,
        |server_port| {
            // A cookie from "an earlier run": 16 bytes, as our servers hand out.
            let line = format!("127.0.0.1 127.0.0.1:{server_port} {}\n", "ab".repeat(16));
            std::fs::write(&cache, line).expect("writing the cookie cache");
        },
    );
    let stderr = client.stderr.text();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(stderr.contains("cached ALT-COOKIE offered"), "the cached cookie must be offered\n{stderr}");
    assert_alt_on_the_wire(&wire, &[0xab; 16], payload);
    assert!(stderr.contains("regular handshake"), "fallback to the regular handshake\n{stderr}");
}

/// usrsctp's client opens an association to our server, sends a line, reads our echo, and shuts
/// down gracefully.
#[test]
fn usrsctp_client_with_our_echo_server() {
    let Some(program) = usrsctp_program("client") else { return };
    let (mut server, our_port) =
        FASTSHAKE.sctp_server(ECHO_SCTP_PORT, &["--mode", "both", "--echo", "--exit-after", "1"]);

    let mut client = start_usrsctp_client(&program, our_port);
    let lines = ["hello fastshake, from usrsctp\n", "a second line\n", "and a third\n"];
    let line = lines.concat();
    for l in lines {
        client.write(l.as_bytes());
    }
    let echoed = client.stdout.wait_for(lines[2], Duration::from_secs(15));
    assert!(echoed, "no echo from our server\n{}\n{}", client.transcript(), server.transcript());
    // End of input: usrsctp's client shuts the association down and exits when it is closed.
    client.close_stdin();
    let status = client.wait_timeout(Duration::from_secs(15));
    assert!(
        status.is_some(),
        "usrsctp client did not finish\n{}\n{}",
        client.transcript(),
        server.transcript()
    );
    let report = assert_served_regular_client(&mut server, &client, "usrsctp", &line);
    for l in lines {
        assert_eq!(count_lines(&client.stdout.text(), l.trim_end()), 1, "each echo arrives once\n{report}");
    }
}

/// Our alternative-only server facing a client that does not know the extension (usrsctp): every
/// INIT gets a small ERROR with an ALT-COOKIE, never an INIT-ACK with a state cookie, so the
/// server cannot be used for amplification; no association opens.
#[test]
fn alt_only_server_answers_usrsctp_client_without_amplification() {
    let Some(program) = usrsctp_program("client") else { return };
    let (server, port) = FASTSHAKE.sctp_server(ECHO_SCTP_PORT, &["--mode", "alt"]);
    let relay = Relay::to(port);
    let mut client = start_usrsctp_client(&program, relay.port);
    client.write(b"never delivered\n");
    // usrsctp retransmits its INIT after 1 s (RTO.Initial): wait for the second one.
    let wire = relay.wait_for_client_inits(2, Duration::from_secs(10));
    drop(client);
    let report = server.transcript();
    assert_alt_only_answers(&wire, "usrsctp", (11, 10), &report);
    assert!(!server.stderr.text().contains("opened by"), "no association opens\n{report}");
}
