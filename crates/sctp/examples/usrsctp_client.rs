//! Self-check: usrsctp's example `client` against a fastshake echo server over loopback:
//! `cargo run -p fastshake-sctp --example usrsctp_client -- [regular|both|alt]`.
//! The client sends one line from its standard input; the server echoes it; the example checks
//! the server received it once and the client printed it back.

use std::io::{Read, Write};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use fastshake_sctp::{Config, Endpoint, Event, HandshakeMode, Instant};

struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let mode = match std::env::args().nth(1).as_deref() {
        Some("regular") => HandshakeMode::Regular,
        Some("alt") => HandshakeMode::AltOnly,
        _ => HandshakeMode::Both,
    };
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let local = sock.local_addr().unwrap();
    let client_encaps = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut client = KillOnDrop(
        Command::new("/usr/lib/usrsctp/client")
            .args(["127.0.0.1", "7", "0", &client_encaps.to_string(), &local.port().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start usrsctp client"),
    );
    let config = Config { local_port: 7, mode, listen: true, ..Config::default() };
    let mut ep = Endpoint::new(Arc::new(config), [5; 32]);
    let start = StdInstant::now();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = [0u8; 65536];
    let mut received = 0;
    let mut stdin = client.0.stdin.take();
    while start.elapsed() < Duration::from_secs(8) && received == 0 {
        while let Some(t) = ep.poll_transmit(now()) {
            sock.send_to(&t.payload, t.dst).unwrap();
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            eprintln!(
                "<- {:?}",
                fastshake_sctp::packet::Packet::parse(&buf[..n]).map(|p| p
                    .chunks
                    .iter()
                    .map(|c| c.chunk_type())
                    .collect::<Vec<_>>())
            );
            ep.handle_datagram(now(), local, from, &mut buf[..n]);
        }
        if ep.poll_timeout().is_some_and(|t| t <= now()) {
            ep.handle_timeout(now());
        }
        while let Some((h, e)) = ep.poll_event() {
            println!("server event: {e:?}");
            match e {
                Event::Connected { .. } => {
                    if let Some(mut s) = stdin.take() {
                        s.write_all(b"hello from usrsctp\n").unwrap();
                    }
                }
                Event::Message(m) => {
                    received += 1;
                    ep.send(h, m).unwrap();
                }
                _ => {}
            }
        }
    }
    // Let the echo go out and be printed.
    let until = StdInstant::now() + Duration::from_millis(500);
    while StdInstant::now() < until {
        while let Some(t) = ep.poll_transmit(now()) {
            sock.send_to(&t.payload, t.dst).unwrap();
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            ep.handle_datagram(now(), local, from, &mut buf[..n]);
        }
        if ep.poll_timeout().is_some_and(|t| t <= now()) {
            ep.handle_timeout(now());
        }
    }
    let _ = client.0.kill();
    let mut out = String::new();
    if let Some(mut o) = client.0.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    println!("server received {received}; client printed: {out:?}");
    std::process::exit(if received == 1 && out.contains("hello from usrsctp") { 0 } else { 1 });
}
