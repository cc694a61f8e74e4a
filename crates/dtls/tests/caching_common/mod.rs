//! What the caching tests share: test PKIs, mutually authenticated configurations with caching
//! offered, and a look into plaintext handshake datagrams.

#![allow(dead_code)] // each test file uses its part

use fastshake_dtls::{
    CachedServer, ClientAuth, ClientConfig, HandshakeSummary, Instant, ServerConfig, TrustAnchors, Versions,
    WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::Pair;
use fastshake_testkit::net::{Datagram, Dir};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub const MINUTE: Duration = Duration::from_secs(60);
/// The Unix time the test PKIs are made at.
pub const PKI_TIME: u64 = 1_800_000_000;
/// A minute after the PKI was made.
pub const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });
/// Three days later: the two-day certificates have expired.
pub const AFTER_EXPIRY: Option<WallClock> =
    Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 3 * 86_400 });

/// Three P-256 certificates sent by each side (leaf and two intermediates).
pub fn p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

pub fn other_p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

pub fn anchors(pki: &TestPki) -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())
}

/// A client with a certificate, offering RFC 7924 and/or client-certificate caching.
pub fn client(pki: &TestPki, cached_info: bool, client_certificate_caching: bool) -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls12,
        trust_anchors: Some(anchors(pki)),
        server_name: Some("localhost".into()),
        wall_clock: AT_PKI_TIME,
        certified_key: Some(Arc::new(pki.client_certified_key().unwrap())),
        cached_info,
        client_certificate_caching,
        ..Default::default()
    }
}

/// A server requiring client certificates (caching answered by default).
pub fn server(pki: &TestPki) -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(Arc::new(pki.server_certified_key().unwrap())),
        wall_clock: AT_PKI_TIME,
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(anchors(pki)),
        ..Default::default()
    }
}

/// A first full handshake; returns its summaries and the entry the client keeps.
pub fn first_handshake(pair: &mut Pair) -> (HandshakeSummary, HandshakeSummary, CachedServer) {
    let (c, s) = pair.handshake(MINUTE).expect("first full handshake");
    assert!(!c.from_cache.any() && !s.from_cache.any(), "nothing cached yet");
    let entry = c.cache_update.clone().expect("the client keeps what it learnt");
    (c, s, entry)
}

/// The next handshake from a new client port (so a new server session), offering `cached`.
pub fn again(pair: &mut Pair, config: ClientConfig, cached: Option<CachedServer>, seed: u8) {
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.cached_client(config, None, cached, seed);
    pair.server_events.clear();
}

/// Bytes of the handshake both ways at the DTLS layer (UDP payloads), from the client's summary.
pub fn handshake_bytes(c: &HandshakeSummary) -> u64 {
    c.bytes_sent + c.bytes_received
}

/// Offsets of every plaintext (epoch 0) handshake message of `msg_type` in a datagram: the
/// start of its body. Whole, unfragmented messages only.
pub fn handshake_bodies(payload: &[u8], msg_type: u8) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut pos = 0;
    while pos + 13 <= payload.len() {
        let epoch = u16::from_be_bytes([payload[pos + 3], payload[pos + 4]]);
        let len = u16::from_be_bytes([payload[pos + 11], payload[pos + 12]]) as usize;
        let body = pos + 13;
        if payload[pos] == 22 && epoch == 0 && body + 12 <= payload.len() && payload[body] == msg_type {
            let m_len =
                u32::from_be_bytes([0, payload[body + 1], payload[body + 2], payload[body + 3]]) as usize;
            found.push((body + 12, m_len));
        }
        pos = body + len;
    }
    found
}

/// Whether a datagram from the client carries a ClientHello with extension `ext`.
pub fn client_hello_has_extension(d: &Datagram, ext: u16) -> bool {
    d.dir == Dir::ToServer
        && handshake_bodies(&d.payload, 1).iter().any(|&(start, len)| {
            let body = &d.payload[start..start + len];
            extension_at(body, 2 + 32, true, ext).is_some()
        })
}

/// The offset in a hello body of extension `ext`'s data. `client`: skip cookie, suites and
/// compression of a ClientHello; else the suite and compression of a ServerHello.
pub fn extension_at(body: &[u8], mut pos: usize, client: bool, ext: u16) -> Option<usize> {
    let vec8 = |p: usize| -> Option<usize> { Some(p + 1 + *body.get(p)? as usize) };
    pos = vec8(pos)?; // session_id
    if client {
        pos = vec8(pos)?; // cookie
        pos += 2 + u16::from_be_bytes([*body.get(pos)?, *body.get(pos + 1)?]) as usize;
        pos = vec8(pos)?;
    } else {
        pos += 3;
    }
    pos += 2; // extensions length
    while pos + 4 <= body.len() {
        let ty = u16::from_be_bytes([body[pos], body[pos + 1]]);
        let len = u16::from_be_bytes([body[pos + 2], body[pos + 3]]) as usize;
        if ty == ext {
            return Some(pos + 4);
        }
        pos += 4 + len;
    }
    None
}
