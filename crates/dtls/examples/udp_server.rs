//! A minimal blocking echo server over std UdpSocket, for manual interop checks:
//! `cargo run -p fastshake-dtls --example udp_server -- 127.0.0.1:4433 IDENTITY HEXKEY [SECONDS]`
//! echoes every application record back and prints events.

use fastshake_dtls::{Endpoint, Event, Instant, ServerConfig};
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let listen = args.get(1).map_or("127.0.0.1:4433", |s| s.as_str());
    let identity = args.get(2).map_or("Client_identity", |s| s.as_str());
    let key = hex_decode(args.get(3).map_or("00112233", |s| s.as_str()));
    let seconds: u64 = args.get(4).map_or(10, |s| s.parse().expect("seconds"));
    let mut config = ServerConfig::psk(identity.as_bytes(), key);
    config.psk_identity_hint = Some(b"fastshake hint".to_vec());
    let socket = UdpSocket::bind(listen).expect("bind");
    let local = socket.local_addr().expect("local address");
    let origin = std::time::Instant::now();
    let now = || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&(origin.elapsed().as_nanos() as u64).to_le_bytes());
    let mut endpoint = Endpoint::new(Arc::new(config), seed).expect("a valid server configuration");
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    let mut buf = [0u8; 2048];
    while std::time::Instant::now() < deadline {
        while let Some((h, e)) = endpoint.poll_event() {
            eprintln!("{h:?}: {e:?}");
            if let Event::ApplicationData(d) = e {
                println!("{}", String::from_utf8_lossy(&d).trim_end());
                endpoint.send(h, &d).ok();
            }
        }
        while let Some(t) = endpoint.poll_transmit(now()) {
            socket.send_to(&t.payload, t.dst).expect("send");
        }
        socket.set_read_timeout(Some(Duration::from_millis(100))).ok();
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => endpoint.handle_datagram(now(), local, from, &mut buf[..n]),
            Err(_) => endpoint.handle_timeout(now()),
        }
    }
    eprintln!("endpoint stats: {:?}", endpoint.stats());
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex key")).collect()
}
