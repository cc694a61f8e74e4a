//! Two `fastshake server` processes on loopback acting as one fleet: a ticket from node A
//! resumes at node B (across one key rotation, not two), a session ID from node A resumes at
//! node B through a real `redis-server`, a node without Redis still serves full handshakes, and
//! a CID session whose datagrams start arriving at node B goes on at node A without a new
//! handshake, its answers sent back through B.

use fastshake_testkit::peers::dtls::*;
use fastshake_testkit::peers::*;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// A scratch directory of its own, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = scratch_dir().join(format!("fleet-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn keys(args: &[&str]) -> String {
    let out = FASTSHAKE.command().arg("keys").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fastshake keys {args:?}: {text}");
    text
}

fn psk_client_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX].map(String::from).to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `redis-server` on a free loopback port, without persistence; stopped on drop.
fn redis() -> (Peer, u16) {
    let port = free_tcp_port();
    let mut command = tool("redis-server");
    command.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    let server = Peer::spawn("redis-server", command);
    assert!(
        server.stdout.wait_for("Ready to accept connections", STEP),
        "redis-server did not start\n{}",
        server.transcript()
    );
    (server, port)
}

fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until `server` printed `needle` `count` times.
fn wait_count(server: &Peer, needle: &str, count: usize) {
    let seen = server.stderr.wait_until(STEP, |text| text.matches(needle).count() >= count);
    assert!(seen, "{needle:?} not seen {count} time(s)\n{}", server.transcript());
}

#[test]
fn a_ticket_from_node_a_resumes_at_node_b_across_one_rotation_but_not_two() {
    let dir = Scratch::new("tickets");
    let key_file = dir.path("ticket.keys");
    keys(&["ticket", "--out", &key_file]);
    let node = || FASTSHAKE.server(&["--echo", "--ticket-keys", &key_file]);
    let (a, port_a) = node();
    let (b, port_b) = node();
    let first_session = dir.path("first.session");
    let run = |port: u16, label: &str| {
        // Every run starts from the ticket node A gave first (a run writes its new ticket back).
        let file = dir.path("run.session");
        std::fs::copy(&first_session, &file).unwrap();
        FASTSHAKE.echo_run(port, &strs(&psk_client_args(&["--session-file", &file])), label)
    };

    let full =
        FASTSHAKE.echo_run(port_a, &strs(&psk_client_args(&["--session-file", &first_session])), "at A");
    assert!(full.contains("full (not resumed)"), "{full}");
    let at_b = run(port_b, "at B");
    assert!(at_b.contains("resumed by ticket"), "{at_b}");

    keys(&["rotate", &key_file]);
    wait_count(&a, "ticket keys reloaded", 1);
    wait_count(&b, "ticket keys reloaded", 1);
    let after_one = run(port_b, "after one rotation");
    assert!(after_one.contains("resumed by ticket"), "the previous key still opens it: {after_one}");

    keys(&["rotate", &key_file]);
    wait_count(&b, "ticket keys reloaded", 2);
    let after_two = run(port_b, "after two rotations");
    assert!(after_two.contains("full (not resumed)"), "a full handshake, not an error: {after_two}");
    drop(a);
}

/// SIGHUP reads the ticket-key file again even when the poll sees nothing new: the file is
/// replaced by one rotated twice with the old modification time and length. The server then
/// says so (once, with the new current key), a ticket under a key now two rotations old no
/// longer resumes, and one under the new key does.
#[test]
fn sighup_reloads_ticket_keys_the_poll_did_not_notice() {
    let dir = Scratch::new("sighup");
    let key_file = dir.path("ticket.keys");
    keys(&["ticket", "--out", &key_file]);
    // With a previous key already, the file keeps its length through further rotations.
    keys(&["rotate", &key_file]);
    let (server, port) = FASTSHAKE.server(&["--echo", "--ticket-keys", &key_file]);
    let old_session = dir.path("old.session");
    let full = FASTSHAKE.echo_run(port, &strs(&psk_client_args(&["--session-file", &old_session])), "first");
    assert!(full.contains("full (not resumed)"), "{full}");

    let before = std::fs::metadata(&key_file).unwrap();
    let next = dir.path("next.keys");
    std::fs::copy(&key_file, &next).unwrap();
    keys(&["rotate", &next]);
    let said = keys(&["rotate", &next]);
    let current = said.split("current key ").nth(1).and_then(|rest| rest.get(..8)).unwrap().to_owned();
    std::fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    assert_eq!(std::fs::metadata(&next).unwrap().len(), before.len(), "a rotated file keeps its length");
    std::fs::rename(&next, &key_file).unwrap();

    let pid = nix::unistd::Pid::from_raw(server.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    wait_count(&server, &format!("ticket keys reloaded (current key {current} and a previous key)"), 1);

    let run_with = |session: &str, label: &str| {
        FASTSHAKE.echo_run(port, &strs(&psk_client_args(&["--session-file", session])), label)
    };
    let run_session = dir.path("run.session");
    std::fs::copy(&old_session, &run_session).unwrap();
    run_with(&run_session, "old ticket");
    // The server's word: the client cannot tell a ticket from the session ID it also offers
    // (which the worker that made the session still holds).
    wait_count(&server, "handshake done", 2);
    let by_ticket = server.stderr.text().matches("resumed by ticket").count();
    assert_eq!(by_ticket, 0, "the old ticket's key is gone\n{}", server.transcript());
    // That run wrote a ticket sealed under the new key.
    let new = run_with(&run_session, "new ticket");
    assert!(new.contains("resumed by ticket"), "{new}");
    wait_count(&server, "resumed by ticket", 1);
    let reloads = server.stderr.text().matches("ticket keys reloaded").count();
    assert_eq!(reloads, 1, "only SIGHUP reloaded the keys\n{}", server.transcript());
}

#[test]
fn early_data_is_taken_at_the_node_that_issued_the_ticket_only() {
    // Two nodes with the fleet's ticket keys and early data on: each resumes the other's
    // tickets, but takes early data only for its own (it alone remembers what it took), so a
    // ClientHello replayed across the fleet delivers its early data at most once.
    let dir = Scratch::new("early");
    let key_file = dir.path("ticket.keys");
    keys(&["ticket", "--out", &key_file]);
    let node = || FASTSHAKE.server(&["--echo", "--ticket-keys", &key_file, "--early-data"]);
    let ((a, port_a), (b, port_b)) = (node(), node());
    let session = dir.path("client.session");
    let full = FASTSHAKE.echo_run(port_a, &strs(&psk_client_args(&["--session-file", &session])), "at A");
    let args = psk_client_args(&["--session-file", &session, "--early-data"]);
    assert!(full.contains("full (not resumed)"), "{full}");
    // The run at A keeps a new ticket of A's, which the run at B offers.
    for (port, server, summary) in
        [(port_a, &a, "resumed by ticket, 0-RTT accepted"), (port_b, &b, "resumed by ticket, 0-RTT refused")]
    {
        let mut client = FASTSHAKE.client_with(port, &strs(&args));
        client.write_line("early line");
        client.expect_handshake_without_resend(&[summary]);
        client.expect_stdout("early line");
        client.finish(&[]);
        assert_eq!(client.stdout.text().matches("early line").count(), 1, "{}", client.transcript());
        server.expect_stderr("resumed by ticket");
    }
}

#[test]
fn a_session_id_from_node_a_resumes_at_node_b_through_redis() {
    let (_redis, redis_port) = redis();
    let dir = Scratch::new("redis");
    let key_file = dir.path("ticket.keys");
    keys(&["ticket", "--out", &key_file]);
    let url = format!("redis://127.0.0.1:{redis_port}");
    let node = || FASTSHAKE.server(&["--echo", "--ticket-keys", &key_file, "--session-store", &url]);
    let (_a, port_a) = node();
    let (b, port_b) = node();
    let session = dir.path("client.session");
    // No ticket: the client offers the session ID alone (session IDs are DTLS 1.2's).
    let args = psk_client_args(&["--session-file", &session, "--no-tickets", "--dtls", "1.2"]);
    let full = FASTSHAKE.echo_run(port_a, &strs(&args), "at A");
    assert!(full.contains("full (not resumed)"), "{full}");
    // Node A writes the session to Redis as the handshake completes; B finds it there.
    let at_b = FASTSHAKE.echo_run(port_b, &strs(&args), "at B");
    assert!(at_b.contains("resumed by session ID"), "{at_b}");
    b.expect_stderr("resumed by session ID");
    // What Redis holds is sealed: no master secret in the clear, and it expires.
    let keys_out = tool("redis-cli").args(["-p", &redis_port.to_string(), "--scan"]).output().unwrap();
    let stored = String::from_utf8_lossy(&keys_out.stdout).trim().to_owned();
    assert!(stored.starts_with("fastshake:session:"), "{stored:?}");
    let ttl = tool("redis-cli").args(["-p", &redis_port.to_string(), "ttl", &stored]).output().unwrap();
    let ttl: i64 = String::from_utf8_lossy(&ttl.stdout).trim().parse().unwrap();
    assert!(ttl > 0, "a TTL is set: {ttl}");
}

#[test]
fn a_node_without_redis_serves_full_handshakes_and_says_so_once() {
    let dir = Scratch::new("noredis");
    let key_file = dir.path("ticket.keys");
    keys(&["ticket", "--out", &key_file]);
    // Nothing listens on this port.
    let url = format!("redis://127.0.0.1:{}", free_tcp_port());
    let (server, port) = FASTSHAKE.server(&["--echo", "--ticket-keys", &key_file, "--session-store", &url]);
    let session = dir.path("client.session");
    let args = psk_client_args(&["--session-file", &session, "--no-tickets", "--dtls", "1.2"]);
    for label in ["first", "second", "third"] {
        let run = FASTSHAKE.echo_run(port, &strs(&args), label);
        assert!(run.contains("handshake done"), "{run}");
    }
    wait_count(&server, "session store unavailable", 1);
    let said = server.stderr.text().matches("session store unavailable").count();
    assert_eq!(said, 1, "said once\n{}", server.transcript());
}

/// A load balancer in front of two nodes: the client's datagrams go to the current target
/// from one upstream socket; answers are taken from the current target only, as a NAT would.
struct Balancer {
    port: u16,
    target: Arc<AtomicU16>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Balancer {
    fn start(first_target: u16) -> Balancer {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        }
        let port = front.local_addr().unwrap().port();
        let target = Arc::new(AtomicU16::new(first_target));
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<std::sync::Mutex<Option<SocketAddr>>> = Arc::default();
        let (front, back) = (Arc::new(front), Arc::new(back));
        let upstream = {
            let (front, back, target, stop, client) =
                (front.clone(), back.clone(), target.clone(), stop.clone(), client.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = front.recv_from(&mut buf) {
                        *client.lock().unwrap() = Some(from);
                        let to = SocketAddr::from(([127, 0, 0, 1], target.load(Ordering::Relaxed)));
                        let _ = back.send_to(&buf[..n], to);
                    }
                }
            })
        };
        let downstream = {
            let (target, stop) = (target.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = back.recv_from(&mut buf) {
                        let expected = SocketAddr::from(([127, 0, 0, 1], target.load(Ordering::Relaxed)));
                        if let (true, Some(to)) = (from == expected, *client.lock().unwrap()) {
                            let _ = front.send_to(&buf[..n], to);
                        }
                    }
                }
            })
        };
        Balancer { port, target, stop, threads: vec![upstream, downstream] }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn a_cid_session_rehashed_from_node_a_to_node_b_goes_on_without_a_new_handshake() {
    // DTLS 1.3 (both ends' default: the CID in the unified header) and 1.2 (tls12_cid records).
    for dtls in ["both", "1.2"] {
        rehashed_cid_session(dtls);
    }
}

fn rehashed_cid_session(dtls: &str) {
    let dir = Scratch::new(&format!("cid-{dtls}"));
    let (forward_a, forward_b) = (free_udp_port(), free_udp_port());
    let fleet_file = dir.path("fleet.toml");
    std::fs::write(
        &fleet_file,
        format!(
            "key = \"{}\"\n[[node]]\nid = 1\nforward = \"127.0.0.1:{forward_a}\"\n[[node]]\nid = 2\nforward = \"127.0.0.1:{forward_b}\"\n",
            "5a".repeat(32)
        ),
    )
    .unwrap();
    let node = |id: &str| {
        FASTSHAKE.server(&[
            "--echo",
            "--mobility",
            "cid",
            "--node-id",
            id,
            "--fleet",
            &fleet_file,
            "--workers",
            "2",
        ])
    };
    let (a, port_a) = node("1");
    let (b, port_b) = node("2");
    let balancer = Balancer::start(port_a);

    let args = psk_client_args(&["--mobility", "cid", "--dtls", dtls]);
    let mut client = FASTSHAKE.client_with(balancer.port, &strs(&args));
    client.expect_handshake_without_resend(&[if dtls == "1.2" { "TLS_PSK_" } else { "(DTLS 1.3;" }]);
    a.expect_stderr("handshake done");
    client.write_line("one");
    client.expect_stdout("one\n");

    // The balancer re-hashes: from now on the client's datagrams reach node B.
    balancer.target.store(port_b, Ordering::Relaxed);
    for line in ["two", "three", "four"] {
        client.write_line(line);
        client.expect_stdout(&format!("{line}\n"));
    }
    assert_eq!(client.stdout.text(), "one\ntwo\nthree\nfour\n", "each echo once, in order");
    client.finish(&[]);
    assert_eq!(client.stderr.text().matches("handshake done").count(), 1, "{}", client.transcript());
    assert_eq!(a.stderr.text().matches("handshake done").count(), 1, "{}", a.transcript());
    assert!(!b.stderr.text().contains("handshake done"), "node B made no session\n{}", b.transcript());
    drop(balancer);
}
