//! Prints full and resumed handshakes per second, engine only (client and server in memory,
//! one thread, no loss): PSK, ECDHE-ECDSA (P-256 chain of 1) and ECDHE-RSA (RSA-2048 chain of
//! 1), then resumption by session ID and by ticket, with the bytes each handshake put on the wire.
//! Prints only; the benchmark of record is `fastshake bench`.
//! `cargo run --release -p fastshake-dtls --example handshake_rate [RUNS]`.

use fastshake_dtls::{
    ClientConfig, ClientSession, Connection, Endpoint, Event, HandshakeSummary, Instant, ServerConfig,
    SessionCacheConfig, TicketKeys, TrustAnchors, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind};
use std::net::SocketAddr;
use std::sync::Arc;

const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, (port >> 8) as u8, port as u8], port))
}

/// One handshake of a new client with `server`; the client's summary.
fn connect(
    cfg: &Arc<ClientConfig>,
    server: &mut Endpoint,
    seed: u64,
    session: Option<ClientSession>,
) -> HandshakeSummary {
    let (from, to) = (addr(3), addr(5684));
    let now = Instant::from_millis(1);
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&seed.to_le_bytes());
    let mut client = Connection::client_with_session(cfg.clone(), now, to, s, session);
    let mut summary = None;
    for _ in 0..8 {
        while let Some(t) = client.poll_transmit(now) {
            server.handle_datagram(now, to, from, &mut t.payload.clone());
        }
        while let Some(t) = server.poll_transmit(now) {
            client.handle_datagram(now, to, &mut t.payload.clone());
        }
        while server.poll_event().is_some() {}
        while let Some(e) = client.poll_event() {
            if let Event::Connected(s) = e {
                summary = Some(s);
            }
        }
        if summary.is_some() {
            break;
        }
    }
    // Let the server see the client's last flight (abbreviated handshake), then close.
    while let Some(t) = client.poll_transmit(now) {
        server.handle_datagram(now, to, from, &mut t.payload.clone());
    }
    if let Some(h) = server.handle_for(from) {
        server.close(h);
    }
    while server.poll_transmit(now).is_some() {}
    while server.poll_event().is_some() {}
    summary.expect("handshake completes")
}

fn rate(
    name: &str,
    runs: u64,
    cfg: &Arc<ClientConfig>,
    server: &mut Endpoint,
    session: Option<ClientSession>,
) {
    let start = std::time::Instant::now();
    let mut last = None;
    for i in 0..runs {
        last = Some(connect(cfg, server, i, session.clone()));
    }
    let secs = start.elapsed().as_secs_f64();
    let s = last.expect("at least one run");
    assert_eq!(s.resumption.is_some(), session.is_some(), "{name}: resumed as intended");
    println!(
        "{name:<44} {:>8.0} handshakes/s   client sent {:>5} B in {} datagrams, received {:>5} B in {}",
        runs as f64 / secs,
        s.bytes_sent,
        s.datagrams_sent,
        s.bytes_received,
        s.datagrams_received
    );
}

fn main() {
    let runs: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    println!("engine only, one thread, {runs} runs per row (client + server work)");
    let psk_client = Arc::new(ClientConfig::psk(b"id".to_vec(), vec![0x11; 16]));
    let mut psk_server = Endpoint::new(Arc::new(ServerConfig::psk(b"id".to_vec(), vec![0x11; 16])), [6; 32])
        .expect("a valid server configuration");
    rate("PSK-AES128-CCM8 full", runs, &psk_client, &mut psk_server, None);

    for (kind, label) in
        [(KeyKind::P256, "ECDHE-ECDSA-AES128-CCM8"), (KeyKind::Rsa2048, "ECDHE-RSA-AES128-GCM")]
    {
        let pki = generate(1, kind, &[], PKI_TIME, 2).expect("test PKI");
        let cc = Arc::new(ClientConfig {
            trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())),
            server_name: Some("localhost".into()),
            wall_clock: CLOCK,
            ..Default::default()
        });
        let base = ServerConfig {
            certified_key: Some(Arc::new(pki.server_certified_key().unwrap())),
            wall_clock: CLOCK,
            ..Default::default()
        };
        let mut server =
            Endpoint::new(Arc::new(base.clone()), [7; 32]).expect("a valid server configuration");
        rate(&format!("{label} full (chain of 1)"), runs, &cc, &mut server, None);

        let by_id = ServerConfig { tickets: None, ..base.clone() };
        let mut server = Endpoint::new(Arc::new(by_id), [8; 32]).expect("a valid server configuration");
        let session = connect(&cc, &mut server, 1, None).session;
        rate(&format!("{label} resumed by session ID"), runs * 4, &cc, &mut server, session);

        let by_ticket = ServerConfig {
            tickets: Some(TicketKeys::new(1, [9; 16])),
            session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
            ..base
        };
        let mut server = Endpoint::new(Arc::new(by_ticket), [9; 32]).expect("a valid server configuration");
        let session = connect(&cc, &mut server, 1, None).session;
        rate(&format!("{label} resumed by ticket"), runs * 4, &cc, &mut server, session);
    }
}
