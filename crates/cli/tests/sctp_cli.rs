//! `fastshake sctp server|client` against each other on loopback: every handshake variant,
//! the cookie cache, zero-RTT data, and the failure exits.

use fastshake_testkit::peers::sctp::Relay;
use fastshake_testkit::peers::{free_udp_port, Fastshake, Peer};
use std::path::PathBuf;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

const SCTP_PORT: &str = "5060";

struct Server {
    proc: Peer,
    addr: String,
}

fn start_server(extra: &[&str]) -> Server {
    let mut args = vec!["--echo"];
    args.extend_from_slice(extra);
    let (proc, port) = FASTSHAKE.sctp_server(SCTP_PORT, &args);
    Server { proc, addr: format!("127.0.0.1:{port}") }
}

/// A cookie cache file in a directory of its own, removed when dropped.
struct CookieCache {
    dir: PathBuf,
}

impl CookieCache {
    fn new(name: &str) -> CookieCache {
        let dir = std::env::temp_dir().join(format!("fastshake-sctp-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        CookieCache { dir }
    }

    /// The file's path, for `--cookie-cache`.
    fn arg(&self) -> String {
        self.dir.join("cookies").display().to_string()
    }

    fn read(&self) -> String {
        std::fs::read_to_string(self.dir.join("cookies")).expect("the cookie cache was written")
    }
}

impl Drop for CookieCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a client to completion with `stdin`; returns it after exit.
fn run_client(server: &Server, extra: &[&str], stdin: &[u8]) -> Peer {
    let mut args: Vec<String> =
        ["sctp", "client", "--connect", &server.addr, "--port", SCTP_PORT, "--timeout-s", "20"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut client = FASTSHAKE.spawn(&args);
    client.write(stdin);
    client.close_stdin();
    let status = client.wait_timeout(Duration::from_secs(30));
    assert!(status.is_some(), "client hung\n{}\n{}", client.transcript(), server.proc.transcript());
    client
}

fn succeeded(client: &mut Peer) -> bool {
    client.wait_timeout(Duration::from_secs(1)).is_some_and(|s| s.success())
}

/// Runs an echo exchange and checks data both ways; returns the client's stderr.
fn echo_exchange(server: &Server, extra: &[&str], payload: &[u8]) -> String {
    let mut args = vec!["--expect-bytes"];
    let len = payload.len().to_string();
    args.push(&len);
    args.extend_from_slice(extra);
    let mut client = run_client(server, &args, payload);
    let report = format!("{}\n{}", client.transcript(), server.proc.transcript());
    assert!(succeeded(&mut client), "client failed\n{report}");
    assert_eq!(client.stdout.bytes(), payload, "echo comes back exactly once\n{report}");
    assert!(client.stderr.text().contains("closed gracefully"), "{report}");
    client.stderr.text()
}

#[test]
fn regular_handshake_echo() {
    let server = start_server(&["--mode", "both"]);
    let stderr = echo_exchange(&server, &["--mode", "regular"], b"regular hello\n");
    assert!(stderr.contains("regular handshake, 2 round trip(s)"), "{stderr}");
    assert!(server.proc.stderr.wait_for("opened by the regular handshake", Duration::from_secs(5)));
    assert!(server.proc.stdout.wait_for("regular hello", Duration::from_secs(5)));
}

#[test]
fn alternative_handshake_then_cached_cookie_with_zero_rtt() {
    let server = start_server(&["--mode", "alt"]);
    let cache = CookieCache::new("alt");
    let cache_arg = cache.arg();
    let local = format!("127.0.0.1:{}", free_udp_port());

    let first = echo_exchange(
        &server,
        &["--mode", "both", "--cookie-cache", &cache_arg, "--local", &local],
        b"first\n",
    );
    assert!(first.contains("alt-cookie handshake, 2 round trip(s)"), "{first}");
    let cached = cache.read();
    assert!(cached.contains(&server.addr), "cache keyed by server: {cached}");

    let second = echo_exchange(
        &server,
        &["--mode", "both", "--zero-rtt", "--cookie-cache", &cache_arg, "--local", &local],
        b"second, in the INIT\n",
    );
    assert!(second.contains("alt-cached handshake, 1 round trip(s)"), "{second}");
    assert!(second.contains("1 zero-RTT message(s) accepted"), "{second}");
    assert!(second.contains("cached ALT-COOKIE offered"), "{second}");
}

/// The ALT-COOKIE proves the client's IP address, not its port: a client on a fresh ephemeral
/// port each run still opens in one round trip with the cached cookie.
#[test]
fn cached_cookie_works_from_an_ephemeral_port() {
    let server = start_server(&["--mode", "both"]);
    let cache = CookieCache::new("eph");
    let cache_arg = cache.arg();
    let first = echo_exchange(&server, &["--mode", "both", "--cookie-cache", &cache_arg], b"one\n");
    assert!(first.contains("alt-cookie handshake"), "{first}");
    let second = echo_exchange(&server, &["--mode", "both", "--cookie-cache", &cache_arg], b"two\n");
    assert!(second.contains("alt-cached handshake, 1 round trip(s)"), "{second}");
}

/// Seed 004 §III-F: a multihomed client fetches an ALT-COOKIE for its other address by an INIT
/// over that path after the handshake; a later client on that address opens in one round trip.
#[test]
fn multihomed_client_caches_a_cookie_for_its_second_address() {
    // Default workers: a second path is another 4-tuple, passed to the association's worker,
    // and the cookie it fetches opens at every worker.
    let server = start_server(&["--mode", "both"]);
    let cache = CookieCache::new("mh");
    let cache_arg = cache.arg();
    // No --expect-bytes: the client lingers, time for the second path's answer.
    let mut client = run_client(
        &server,
        &["--local", "127.0.0.1:0", "--extra-local", "127.0.0.2", "--cookie-cache", &cache_arg],
        b"from a multihomed client\n",
    );
    let report = format!("{}\n{}", client.transcript(), server.proc.transcript());
    assert!(succeeded(&mut client), "{report}");
    let cached = cache.read();
    assert!(cached.lines().any(|l| l.starts_with("127.0.0.1 ")), "primary path cookie: {cached}\n{report}");
    assert!(cached.lines().any(|l| l.starts_with("127.0.0.2 ")), "second path cookie: {cached}\n{report}");

    let second = echo_exchange(
        &server,
        &["--local", "127.0.0.2:0", "--cookie-cache", &cache_arg],
        b"from the second address\n",
    );
    assert!(second.contains("alt-cached handshake, 1 round trip(s)"), "{second}");
}

#[test]
fn cookieless_server_opens_in_one_round_trip() {
    let server = start_server(&["--mode", "both", "--cookieless"]);
    let stderr = echo_exchange(&server, &["--mode", "both", "--zero-rtt"], b"cookieless zero-RTT\n");
    assert!(stderr.contains("cookieless handshake, 1 round trip(s)"), "{stderr}");
    assert!(stderr.contains("1 zero-RTT message(s) accepted"), "{stderr}");
}

#[test]
fn several_messages_each_way() {
    let server = start_server(&["--mode", "both"]);
    // Larger than one read of standard input: several messages, echoed in order.
    let payload: Vec<u8> = (0..5000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let stderr = echo_exchange(&server, &["--mode", "both"], &payload);
    assert!(stderr.contains("alt-cookie handshake"), "{stderr}");
}

#[test]
fn abort_from_a_port_without_listener_fails_clearly() {
    let server = start_server(&["--mode", "both"]);
    let mut args: Vec<String> =
        ["sctp", "client", "--connect", &server.addr, "--port", "5999", "--timeout-s", "20"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(["--mode".to_string(), "regular".to_string()]);
    let mut client = FASTSHAKE.spawn(&args);
    client.write(b"nobody listens on that port\n");
    client.close_stdin();
    let status = client.wait_timeout(Duration::from_secs(30));
    let report = format!("{}\n{}", client.transcript(), server.proc.transcript());
    assert!(status.is_some_and(|s| !s.success()), "must fail\n{report}");
    assert!(client.stderr.text().contains("association aborted by"), "says why\n{report}");
}

#[test]
fn no_answer_fails_after_init_retransmissions() {
    // A socket that takes every packet and answers none (a closed port would refuse them).
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let silent = socket.local_addr().unwrap().to_string();
    let mut client = FASTSHAKE.spawn(&[
        "sctp".into(),
        "client".into(),
        "--connect".into(),
        silent,
        "--port".into(),
        SCTP_PORT.into(),
        "--max-init-retransmits".into(),
        "1".into(),
        "--rto-initial-ms".into(),
        "100".into(),
    ]);
    client.close_stdin();
    let status = client.wait_timeout(Duration::from_secs(30));
    assert!(status.is_some_and(|s| !s.success()), "must fail\n{}", client.transcript());
    let stderr = client.stderr.text();
    assert!(stderr.contains("handshake timed out"), "{stderr}");
    assert!(stderr.contains("after 1 INIT retransmission(s)"), "{stderr}");
}

/// More than the engine's 4 MiB send buffer: the client pauses standard input and the server holds
/// its echoes while a send buffer is full, and every byte comes back, in order.
#[test]
fn large_transfer_beyond_the_send_buffer() {
    let server = start_server(&["--mode", "both"]);
    let payload: Vec<u8> = (0..5_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let stderr = echo_exchange(&server, &["--message-bytes", "65536"], &payload);
    assert!(stderr.contains("sent 5000000 byte(s)"), "{stderr}");
}

/// Every 7th datagram lost, either way: retransmissions through the real sockets and timers bring
/// every byte, in order, exactly once.
#[test]
fn lossy_path_delivers_everything_once() {
    let (proc, port) = FASTSHAKE.sctp_server(SCTP_PORT, &["--echo"]);
    let relay = Relay::to_lossy(port, 7);
    let server = Server { proc, addr: format!("127.0.0.1:{}", relay.port) };
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(40_503) >> 7) as u8).collect();
    let stderr = echo_exchange(&server, &["--message-bytes", "3000", "--rto-initial-ms", "200"], &payload);
    assert!(stderr.contains("received 300000 byte(s)"), "{stderr}");
}

/// Two workers (one SO_REUSEPORT socket and one endpoint each), batching on and off: clients on
/// fresh ports land on either worker, and every association opens and echoes; the summary line
/// adds up over the workers.
#[test]
fn two_workers_serve_every_association() {
    const CLIENTS: usize = 8;
    for batch in ["on", "off"] {
        let exit_after = CLIENTS.to_string();
        let server = start_server(&["--workers", "2", "--batch", batch, "--exit-after", &exit_after]);
        for i in 0..CLIENTS {
            let mode = if i % 2 == 0 { "regular" } else { "alt" };
            echo_exchange(&server, &["--mode", mode], format!("client {i}\n").as_bytes());
        }
        let summary = format!(
            "2 worker(s) ({} with batched I/O): {CLIENTS} ended association(s)",
            if batch == "on" { 2 } else { 0 }
        );
        assert!(
            server.proc.stderr.wait_for(&summary, Duration::from_secs(10)),
            "{}",
            server.proc.transcript()
        );
        println!("batch {batch}: {}", server.proc.stderr.text().lines().last().unwrap_or_default());
    }
}
