//! Handshake bytes at the DTLS layer (UDP payloads, both directions) for mutual
//! authentication with a chain of three RSA-2048 certificates on each side (seed 003's setup)
//! at MTU 1500: vanilla, RFC 7924 (the client has the server's objects cached) and BiTHaC
//! (RFC 7924 plus client-certificate caching), each a full DTLS 1.2 handshake on the in-memory
//! pair.
//!
//! `cargo run --release -p fastshake-dtls --example caching_bytes`

use fastshake_dtls::{
    CachedServer, ClientAuth, ClientConfig, Instant, ServerConfig, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind};
use fastshake_testkit::dtls::Pair;
use std::sync::Arc;
use std::time::Duration;

const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn main() {
    let pki = generate(3, KeyKind::Rsa2048, &[], PKI_TIME, 30).expect("test PKI");
    let anchors = Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).expect("anchors"));
    let client = |cached_info: bool, client_certificate_caching: bool| ClientConfig {
        versions: Versions::Dtls12,
        trust_anchors: Some(anchors.clone()),
        server_name: Some("localhost".into()),
        wall_clock: CLOCK,
        certified_key: Some(Arc::new(pki.client_certified_key().expect("client key"))),
        mtu: 1500,
        cached_info,
        client_certificate_caching,
        ..Default::default()
    };
    let server = ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(Arc::new(pki.server_certified_key().expect("server key"))),
        wall_clock: CLOCK,
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(anchors.clone()),
        mtu: 1500,
        ..Default::default()
    };
    let chain = |c: Vec<fastshake_pki::CertDer>| c.iter().map(|c| c.len()).sum::<usize>();
    println!(
        "setup: mutual authentication, RSA-2048 chains of 3 sent by each side (server {} B, client {} B of DER), MTU 1500",
        chain(pki.server_chain()),
        chain(pki.client_chain())
    );
    let mut pair = Pair::new(client(true, true), server);
    let (first, _) = pair.handshake(Duration::from_secs(60)).expect("first handshake");
    let entry: CachedServer = first.cache_update.clone().expect("cache entry");
    let mut rows = Vec::new();
    rows.push((
        "first (caching offered, nothing cached)",
        first.bytes_sent,
        first.bytes_received,
        first.from_cache,
    ));
    let configs = [
        ("vanilla", client(false, false), None),
        ("RFC 7924", client(true, false), Some(entry.clone())),
        ("BiTHaC (RFC 7924 + client certificate)", client(true, true), Some(entry)),
    ];
    for (seed, (name, config, cached)) in configs.into_iter().enumerate() {
        let port = pair.client_addr.port() + 1;
        pair.client_addr.set_port(port);
        pair.cached_client(config, None, cached, seed as u8 + 2);
        let (c, _) = pair.handshake(Duration::from_secs(60)).expect("handshake");
        assert_eq!(c.retransmissions, 0);
        rows.push((name, c.bytes_sent, c.bytes_received, c.from_cache));
    }
    let vanilla = rows[1].1 + rows[1].2;
    println!("{:<42} {:>8} {:>8} {:>8} {:>9}", "configuration", "C->S B", "S->C B", "total B", "of vanilla");
    for (name, sent, received, from_cache) in &rows {
        let total = sent + received;
        println!(
            "{name:<42} {sent:>8} {received:>8} {total:>8} {:>8.1}%  {from_cache:?}",
            100.0 * total as f64 / vanilla as f64
        );
    }
    println!("anchor (seed 003, TLS 1.2 over TCP): BiTHaC leaves 38.86-43.25 % of the vanilla bytes; target here <= 35 %");
}
