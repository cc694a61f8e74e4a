//! DTLS 1.3 certificate compression (RFC 8879) on the in-memory pair: both chains of a mutually
//! authenticated handshake compressed with each algorithm, the sender's preference, either side
//! declining, and the bytes saved. The refusals of hostile CompressedCertificate messages are
//! tested beside the code that reads them (`connection::tls13`), and the bounded decoders in
//! `handshake::compression`.

use fastshake_dtls::{
    CertificateCompression, ClientAuth, ClientConfig, CompressionAlgorithm, HandshakeSummary, Instant,
    ServerConfig, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use CompressionAlgorithm::{Brotli, Zlib, Zstd};

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn anchors() -> Option<Arc<TrustAnchors>> {
    Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap()))
}

fn client(algorithms: &[CompressionAlgorithm]) -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls13,
        trust_anchors: anchors(),
        server_name: Some("localhost".into()),
        wall_clock: AT_PKI_TIME,
        certified_key: Some(Arc::new(pki().client_certified_key().unwrap())),
        certificate_compression: Arc::new(CertificateCompression::new(algorithms)),
        ..Default::default()
    }
}

fn server(algorithms: &[CompressionAlgorithm]) -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls13,
        certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
        wall_clock: AT_PKI_TIME,
        client_auth: ClientAuth::Require,
        client_trust_anchors: anchors(),
        certificate_compression: Arc::new(CertificateCompression::new(algorithms)),
        ..Default::default()
    }
}

/// A mutually authenticated handshake, data both ways; both summaries.
fn connect(client: ClientConfig, server: ServerConfig) -> (HandshakeSummary, HandshakeSummary) {
    let mut pair = Pair::new(client, server);
    let (c, s) = pair.handshake(MINUTE).expect("both authenticated");
    assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3));
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0));
    pair.exchange_data(3);
    (c, s)
}

#[test]
fn both_chains_go_compressed_with_each_algorithm_and_cost_fewer_bytes() {
    let (plain_c, plain_s) = connect(client(&[]), server(&[]));
    assert_eq!(plain_c.certificate_compression_received, None);
    assert_eq!(plain_s.certificate_compression_received, None);
    for algorithm in CompressionAlgorithm::ALL {
        let (c, s) = connect(client(&[algorithm]), server(&[algorithm]));
        assert_eq!(c.certificate_compression_received, Some(algorithm));
        assert_eq!(s.certificate_compression_sent, Some(algorithm));
        // The server lists the algorithm in its CertificateRequest: the client's chain too.
        assert_eq!(c.certificate_compression_sent, Some(algorithm));
        assert_eq!(s.certificate_compression_received, Some(algorithm));
        assert!(c.bytes_received < plain_c.bytes_received, "{algorithm}: {} B", c.bytes_received);
        assert!(c.bytes_sent < plain_c.bytes_sent, "{algorithm}: {} B", c.bytes_sent);
    }
}

#[test]
fn the_sender_picks_its_first_choice_among_those_listed() {
    let (c, s) = connect(client(&[Zlib, Zstd]), server(&[Brotli, Zstd, Zlib]));
    assert_eq!(c.certificate_compression_received, Some(Zstd));
    // The client's own order decides for its chain.
    assert_eq!(s.certificate_compression_received, Some(Zlib));
}

#[test]
fn a_side_that_declines_gets_and_sends_chains_as_they_are() {
    let (c, s) = connect(client(&[]), server(&[Brotli]));
    assert_eq!((c.certificate_compression_received, c.certificate_compression_sent), (None, None));
    assert_eq!((s.certificate_compression_received, s.certificate_compression_sent), (None, None));
    let (c, s) = connect(client(&[Brotli]), server(&[]));
    assert_eq!((c.certificate_compression_received, c.certificate_compression_sent), (None, None));
    assert_eq!((s.certificate_compression_received, s.certificate_compression_sent), (None, None));
    // No algorithm in common.
    let (c, _) = connect(client(&[Zlib]), server(&[Zstd]));
    assert_eq!((c.certificate_compression_received, c.certificate_compression_sent), (None, None));
}

#[test]
fn a_dtls_1_2_handshake_is_untouched() {
    let client = ClientConfig { versions: Versions::Both, ..client(&CompressionAlgorithm::ALL) };
    let server = ServerConfig { versions: Versions::Dtls12, ..server(&CompressionAlgorithm::ALL) };
    let (c, s) = connect(client, server);
    assert_eq!(c.version, Versions::Dtls12);
    assert_eq!((c.certificate_compression_received, s.certificate_compression_received), (None, None));
}
