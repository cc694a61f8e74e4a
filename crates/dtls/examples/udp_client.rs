//! A minimal blocking client over std UdpSocket, for manual interop checks:
//! `cargo run -p fastshake-dtls --example udp_client -- 127.0.0.1:4433 IDENTITY HEXKEY [SUITE|-] [MTU] [1.2|1.3]`
//! sends "hello from fastshake", prints what comes back, then closes. Without a version it
//! offers DTLS 1.3 and 1.2, the library's default.

use fastshake_dtls::{CipherSuite, ClientConfig, Connection, Event, Instant};
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let remote = args.get(1).map_or("127.0.0.1:4433", |s| s.as_str()).parse().expect("address");
    let identity = args.get(2).map_or("Client_identity", |s| s.as_str());
    let key = hex_decode(args.get(3).map_or("00112233", |s| s.as_str()));
    let mut config = ClientConfig::psk(identity.as_bytes(), key);
    if let Some(s) = args.get(4).filter(|s| *s != "-") {
        config.suites = vec![CipherSuite::from_iana_name(s).expect("suite name")];
    }
    if let Some(m) = args.get(5) {
        config.mtu = m.parse().expect("mtu");
    }
    match args.get(6).map(String::as_str) {
        Some("1.2") => config.versions = fastshake_dtls::Versions::Dtls12,
        Some("1.3") => config.versions = fastshake_dtls::Versions::Dtls13,
        _ => {}
    }
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let origin = std::time::Instant::now();
    let now = || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(origin.elapsed().as_nanos() as u64 ^ 0x5eed).to_le_bytes());
    let mut conn = Connection::client(Arc::new(config), now(), remote, seed);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut sent = false;
    let mut buf = [0u8; 2048];
    while std::time::Instant::now() < deadline {
        while let Some(t) = conn.poll_transmit(now()) {
            socket.send_to(&t.payload, t.dst).expect("send");
        }
        while let Some(e) = conn.poll_event() {
            eprintln!("event: {e:?}");
            if let Event::Connected(_) = e {
                if !sent {
                    conn.send(b"hello from fastshake\n").expect("send data");
                    sent = true;
                }
            }
        }
        while let Some(t) = conn.poll_transmit(now()) {
            socket.send_to(&t.payload, t.dst).expect("send");
        }
        if conn.is_closed() {
            break;
        }
        let wait = conn.poll_timeout().map_or(Duration::from_millis(200), |t| {
            Duration::from_nanos(t.as_nanos().saturating_sub(now().as_nanos())).max(Duration::from_millis(1))
        });
        socket.set_read_timeout(Some(wait.min(Duration::from_millis(500)))).ok();
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => conn.handle_datagram(now(), from, &mut buf[..n]),
            Err(_) => conn.handle_timeout(now()),
        }
    }
    conn.close();
    while let Some(t) = conn.poll_transmit(now()) {
        socket.send_to(&t.payload, t.dst).ok();
    }
    eprintln!("stats: {:?}", conn.stats());
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex key")).collect()
}
