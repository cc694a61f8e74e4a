//! `fastshake webrtc connect` against `fastshake webrtc serve` over loopback: a session in
//! each DTLS version with every message echoed once, and clear refusals.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    url: String,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastshake"))
        .args(["webrtc", "serve", "--http", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("fastshake webrtc serve");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first =
        lines.recv_timeout(std::time::Duration::from_secs(20)).expect("the server says where it listens");
    let http = first.split("http://").nth(1).and_then(|r| r.split('/').next()).expect(&first).to_owned();
    Server { child, url: format!("http://{http}/offer"), lines }
}

fn connect(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fastshake"))
        .args(["webrtc", "connect", url])
        .args(args)
        .output()
        .expect("fastshake webrtc connect");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn fastshake_opens_a_channel_to_fastshake_in_either_version_and_every_message_comes_back_once() {
    let server = serve(&[]);
    for (dtls, want) in [("1.3", "DTLS 1.3"), ("1.2", "DTLS 1.2")] {
        let (ok, stdout, stderr) =
            connect(&server.url, &["--dtls", dtls, "--messages", "30", "--size", "3000"]);
        assert!(ok, "{stdout}\n{stderr}");
        assert!(stdout.contains(want), "{stdout}");
        assert!(
            stdout.contains("30 of 30 messages echoed, 0 duplicated or changed; channel closed"),
            "{stdout}"
        );
        assert!(!stdout.contains("HelloRetryRequest"), "ICE proved the address: {stdout}");
    }
    let (_, stdout, _) = connect(&server.url, &["--messages", "1"]);
    assert!(
        stdout.contains("DTLS 1.3") && stdout.contains("x25519mlkem768"),
        "the hybrid by default: {stdout}"
    );
    // Seed 004's alternative handshake inside DTLS: the channel's OPEN and messages ride in the INIT.
    let (ok, stdout, stderr) = connect(&server.url, &["--messages", "5", "--sctp", "alt"]);
    assert!(ok && stdout.contains("5 of 5 messages echoed"), "{stdout}{stderr}");
    // SNAP: the INITs ride in the offer and the answer.
    let (ok, stdout, stderr) = connect(&server.url, &["--messages", "5", "--sctp", "snap"]);
    assert!(ok && stdout.contains("5 of 5 messages echoed"), "{stdout}{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let seen: Vec<String> = server.lines.try_iter().collect();
    assert!(seen.iter().filter(|l| l.contains("opened")).count() >= 4, "{seen:?}");
    assert!(
        // The channel's OPEN and its five messages, which follow the OPEN at once (RFC 8831 §6.6).
        seen.iter().any(|l| l.contains("SCTP open (Cookieless handshake, 6 messages in the INIT)")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|l| l.contains("SCTP open (Regular handshake")), "{seen:?}");
    assert!(seen.iter().any(|l| l.contains("SCTP open (Snap handshake")), "{seen:?}");
}

#[test]
fn refusals_say_why() {
    let server = serve(&["--max-sessions", "0"]);
    let (ok, _, stderr) = connect("ftp://example", &[]);
    assert!(!ok && stderr.contains("http://HOST"), "{stderr}");
    // Nothing listens on the discard port of loopback.
    let (ok, _, stderr) = connect("http://127.0.0.1:9/offer", &[]);
    assert!(!ok && stderr.contains("127.0.0.1:9"), "{stderr}");
    // No session may be held: the offer is refused with the reason.
    let (ok, _, stderr) = connect(&server.url, &["--messages", "1"]);
    assert!(!ok && stderr.contains("no room"), "{stderr}");
}

#[test]
fn fastshake_opens_a_channel_to_a_full_ice_server() {
    // --ice full: the server checks back (RFC 8445 §7.3.1.4) and sends on the valid pair.
    let server = serve(&["--ice", "full", "--verbose"]);
    let (ok, stdout, stderr) = connect(&server.url, &["--messages", "10"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("10 of 10 messages echoed, 0 duplicated or changed; channel closed"), "{stdout}");
    // SNAP: the INITs ride in the offer and the answer.
    let (ok, stdout, stderr) = connect(&server.url, &["--messages", "5", "--sctp", "snap"]);
    assert!(ok && stdout.contains("5 of 5 messages echoed"), "{stdout}{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let seen: Vec<String> = server.lines.try_iter().collect();
    assert!(seen.iter().any(|l| l.contains("Selected(")), "our nomination selected the pair: {seen:?}");
}
