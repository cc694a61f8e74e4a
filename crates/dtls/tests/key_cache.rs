//! The validated-key cache (seed 003 §IV-C) in both roles, on the in-memory pair: a second
//! handshake with mutual authentication skips chain validation on both sides, in DTLS 1.2 and
//! 1.3, and neither a changed set of trust anchors nor a tampered chain is ever answered from the
//! cache.

use fastshake_dtls::{
    AlertDescription, CertifiedKey, CipherSuite, ClientAuth, ClientConfig, Error, Instant, ServerConfig,
    TrustAnchors, ValidatedKeyCache, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::Pair;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn other_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(1, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn anchors(pki: &TestPki) -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())
}

/// Both caches, shared by every connection of a test as an application would share them.
struct Caches {
    client: Arc<ValidatedKeyCache>,
    server: Arc<ValidatedKeyCache>,
}

impl Caches {
    fn new() -> Caches {
        Caches { client: Arc::new(ValidatedKeyCache::new(8)), server: Arc::new(ValidatedKeyCache::new(8)) }
    }

    /// A DTLS 1.2 client (the 1.3 test sets its version over it).
    fn client(&self) -> ClientConfig {
        ClientConfig {
            versions: Versions::Dtls12,
            suites: vec![CipherSuite::EcdheEcdsaWithAes128GcmSha256],
            trust_anchors: Some(anchors(pki())),
            server_name: Some("localhost".into()),
            certified_key: Some(Arc::new(pki().client_certified_key().unwrap())),
            key_cache: Some(Arc::clone(&self.client)),
            wall_clock: AT_PKI_TIME,
            ..Default::default()
        }
    }

    /// A DTLS 1.2 server (the 1.3 test sets its version over it).
    fn server(&self) -> ServerConfig {
        ServerConfig {
            versions: Versions::Dtls12,
            certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
            client_auth: ClientAuth::Require,
            client_trust_anchors: Some(anchors(pki())),
            key_cache: Some(Arc::clone(&self.server)),
            wall_clock: AT_PKI_TIME,
            ..Default::default()
        }
    }

    /// A first mutual handshake, which fills both caches.
    fn filled() -> Caches {
        let caches = Caches::new();
        let mut pair = Pair::new(caches.client(), caches.server());
        let (c, s) = pair.handshake(MINUTE).expect("first handshake");
        assert!(!c.chain_validation_skipped && !s.chain_validation_skipped, "nothing cached yet");
        assert_eq!((caches.client.len(), caches.server.len()), (1, 1));
        caches
    }
}

/// Runs a handshake that must fail; returns (client failure, server failure).
fn refused(cc: ClientConfig, sc: ServerConfig) -> (Option<Error>, Option<Error>) {
    let mut pair = Pair::new(cc, sc);
    assert!(pair.handshake(Duration::from_secs(5)).is_none(), "the handshake must fail");
    let limit = pair.now + Duration::from_millis(100);
    while pair.step(limit) {}
    (pair.client_failure(), pair.server_failure())
}

/// A chain whose `index`th certificate has the last byte of its signature changed.
fn tampered(key: CertifiedKey, index: usize) -> Arc<CertifiedKey> {
    let mut chain = key.chain;
    let mut der = chain[index].to_vec();
    *der.last_mut().unwrap() ^= 0x01;
    chain[index] = der.into();
    Arc::new(CertifiedKey { chain, key: key.key })
}

#[test]
fn a_second_mutual_handshake_skips_chain_validation_on_both_sides() {
    let caches = Caches::filled();
    for round in 0..2 {
        let mut pair = Pair::new(caches.client(), caches.server());
        let (c, s) = pair.handshake(MINUTE).expect("handshake with cached keys");
        assert!(c.chain_validation_skipped && s.chain_validation_skipped, "round {round}");
        assert!(!c.resumed && !s.resumed, "a full handshake, not a resumption");
        assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3));
        assert_eq!(c.peer_leaf.as_ref(), pki().server_chain().first());
        pair.exchange_data(2);
    }
    assert_eq!((caches.client.stats().hits, caches.server.stats().hits), (2, 2));
}

#[test]
fn a_second_dtls13_mutual_handshake_skips_chain_validation_on_both_sides() {
    let caches = Caches::new();
    let (mut cc, mut sc) = (caches.client(), caches.server());
    cc.versions = Versions::Dtls13;
    sc.versions = Versions::Dtls13;
    for round in 0..3 {
        let (c, s) = Pair::new(cc.clone(), sc.clone()).handshake(MINUTE).expect("1.3 handshake");
        assert_eq!((c.version, s.version), (Versions::Dtls13, Versions::Dtls13));
        let skipped = round > 0;
        assert_eq!(
            (c.chain_validation_skipped, s.chain_validation_skipped),
            (skipped, skipped),
            "round {round}"
        );
        assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3));
    }
    assert_eq!((caches.client.stats().hits, caches.server.stats().hits), (2, 2));
}

#[test]
fn without_a_cache_nothing_is_skipped() {
    let caches = Caches::new();
    let (mut cc, mut sc) = (caches.client(), caches.server());
    cc.key_cache = None;
    sc.key_cache = None;
    for _ in 0..2 {
        let (c, s) = Pair::new(cc.clone(), sc.clone()).handshake(MINUTE).expect("handshake");
        assert!(!c.chain_validation_skipped && !s.chain_validation_skipped);
    }
}

#[test]
fn changed_trust_anchors_never_hit() {
    let caches = Caches::filled();
    // The client no longer trusts the server's root.
    let mut cc = caches.client();
    cc.trust_anchors = Some(anchors(other_pki()));
    let (client, server) = refused(cc, caches.server());
    let client = client.expect("the client fails");
    assert!(
        matches!(client, Error::PeerAuthentication { alert: AlertDescription::UnknownCa, .. }),
        "{client:?}"
    );
    assert_eq!(server, Some(Error::AlertReceived(AlertDescription::UnknownCa)));
    // The server no longer trusts the client's root.
    let mut sc = caches.server();
    sc.client_trust_anchors = Some(anchors(other_pki()));
    let (client, server) = refused(caches.client(), sc);
    assert_eq!(server.expect("the server fails").alert(), Some(AlertDescription::UnknownCa));
    assert_eq!(client, Some(Error::AlertReceived(AlertDescription::UnknownCa)));
    for cache in [&caches.client, &caches.server] {
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.invalidated), (0, 1), "{stats:?}");
    }
}

#[test]
fn a_tampered_chain_never_hits() {
    let caches = Caches::filled();
    for index in 0..3 {
        // The server presents its chain with one certificate changed.
        let mut sc = caches.server();
        sc.certified_key = Some(tampered(pki().server_certified_key().unwrap(), index));
        let hits_before = caches.client.stats().hits;
        let (client, _) = refused(caches.client(), sc);
        let client = client.expect("the client fails");
        assert_eq!(client.alert(), Some(AlertDescription::BadCertificate), "server certificate {index}");
        assert_eq!(caches.client.stats().hits, hits_before, "server certificate {index}");
        // The client presents its chain with one certificate changed (and validates the
        // server's genuine chain from its cache on the way).
        let mut cc = caches.client();
        cc.certified_key = Some(tampered(pki().client_certified_key().unwrap(), index));
        let (_, server) = refused(cc, caches.server());
        let server = server.expect("the server fails");
        assert_eq!(server.alert(), Some(AlertDescription::BadCertificate), "client certificate {index}");
        assert_eq!(caches.server.stats().hits, 0, "client certificate {index}");
    }
    // The genuine chains still hit afterwards.
    let (c, s) = Pair::new(caches.client(), caches.server()).handshake(MINUTE).expect("handshake");
    assert!(c.chain_validation_skipped && s.chain_validation_skipped);
}
