//! Self-check against usrsctp's `echo_server` (Debian `libusrsctp-examples`) over loopback:
//! `cargo run -p fastshake-sctp --example usrsctp_echo -- [regular|alt|alt0rtt]`.
//! Starts the server with free UDP ports, opens an association, sends one message, expects it
//! back exactly once, shuts down, and stops the server on every path.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use fastshake_sctp::{Config, ConnectOptions, Endpoint, Event, HandshakeMode, Instant, Message};

struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map(|a| a.port()).expect("free port")
}

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_else(|| "regular".into());
    let server_encaps = free_udp_port();
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let local = sock.local_addr().unwrap();
    let _server = KillOnDrop(
        Command::new("/usr/lib/usrsctp/echo_server")
            .arg(server_encaps.to_string())
            .arg(local.port().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start echo_server"),
    );
    std::thread::sleep(Duration::from_millis(300));
    let mode = if variant == "regular" { HandshakeMode::Regular } else { HandshakeMode::Both };
    let config = Config { local_port: 5001, mode, ..Config::default() };
    let mut ep = Endpoint::new(Arc::new(config), [9; 32]);
    let start = StdInstant::now();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let remote: SocketAddr = SocketAddr::from(([127, 0, 0, 1], server_encaps));
    let message = Message { stream: 0, unordered: false, ppid: 0, data: b"hello usrsctp".to_vec() };
    let opts = if variant == "alt0rtt" {
        ConnectOptions { zero_rtt: vec![message.clone()], ..Default::default() }
    } else {
        ConnectOptions::default()
    };
    let h = ep.connect(now(), Some(local), remote, 7, opts);
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut echoes = 0;
    let mut sent_after_connect = variant == "alt0rtt";
    let mut buf = [0u8; 65536];
    while start.elapsed() < Duration::from_secs(10) {
        while let Some(t) = ep.poll_transmit(now()) {
            eprintln!(
                "-> {:?}",
                fastshake_sctp::packet::Packet::parse(&t.payload).map(|p| p
                    .chunks
                    .iter()
                    .map(|c| c.chunk_type())
                    .collect::<Vec<_>>())
            );
            sock.send_to(&t.payload, t.dst).unwrap();
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            eprintln!("<- {:?}", fastshake_sctp::packet::Packet::parse(&buf[..n]).map(|p| p.chunks));
            ep.handle_datagram(now(), local, from, &mut buf[..n]);
        }
        if ep.poll_timeout().is_some_and(|t| t <= now()) {
            ep.handle_timeout(now());
        }
        while let Some((_, e)) = ep.poll_event() {
            println!("event: {e:?}");
            match e {
                Event::Connected { .. } if !sent_after_connect => {
                    sent_after_connect = true;
                    ep.send(h, message.clone()).unwrap();
                }
                Event::Message(m) => {
                    assert_eq!(m.data, message.data);
                    echoes += 1;
                    ep.shutdown(h);
                }
                Event::Closed | Event::Aborted { .. } | Event::Failed(_) => {
                    println!("echoes: {echoes}");
                    std::process::exit(if echoes == 1 { 0 } else { 1 });
                }
                _ => {}
            }
        }
    }
    println!("timeout; echoes: {echoes}");
    std::process::exit(2);
}
