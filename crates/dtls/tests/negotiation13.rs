//! DTLS 1.3 negotiation on the in-memory pair: what a client with groups offers for its PSK
//! (psk_dhe_ke alone), what happens when nothing is in common (a stateless refusal that names
//! what did not match, kept for `Endpoint::poll_refusal`, and a client error naming what we
//! offered), a 1.3-only client meeting a 1.2-only server, and the configurations refused up
//! front.

use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{
    AlertDescription, CipherSuite, ClientConfig, Connection, Endpoint, Error, HelloRefusal, Instant,
    Mismatch, NamedGroup, ServerConfig, TrustAnchors, Versions, WallClock, MAX_QUEUED_REFUSALS,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn psk_client() -> ClientConfig {
    ClientConfig { versions: Versions::Dtls13, ..client_config() }
}

fn psk_server() -> ServerConfig {
    ServerConfig { versions: Versions::Dtls13, ..server_config() }
}

fn cert_client() -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls13,
        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        server_name: Some("localhost".into()),
        wall_clock: AT_PKI_TIME,
        ..Default::default()
    }
}

fn cert_server() -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls13,
        certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
        wall_clock: AT_PKI_TIME,
        ..Default::default()
    }
}

fn codes(groups: &[NamedGroup]) -> Vec<u16> {
    groups.iter().map(|g| g.code()).collect()
}

/// Every refusal the server kept, in order.
fn refusals(pair: &mut Pair) -> Vec<HelloRefusal> {
    std::iter::from_fn(|| pair.server.poll_refusal()).collect()
}

/// No group in common: the server refuses the first ClientHello at once (no HelloRetryRequest
/// that could lead nowhere, no session), names both lists, and the client names its groups.
fn refused_for_groups(client: ClientConfig, server: ServerConfig) {
    let offered = codes(&client.groups);
    let ours = codes(&server.groups);
    let mut pair = Pair::new(client, server);
    assert!(pair.handshake(MINUTE).is_none(), "no handshake without a common group");
    assert!(pair.server_summary().is_none() && pair.server_failure().is_none(), "no session was made");
    assert_eq!(pair.server.stats().connections_accepted, 0);
    assert_eq!(pair.server.stats().hello_verify_sent, 0, "no HelloRetryRequest");
    let refused = refusals(&mut pair);
    let reason = Mismatch::Group { offered: offered.clone(), ours };
    assert_eq!(
        refused,
        [HelloRefusal { remote: pair.client_addr, reason, alert: AlertDescription::HandshakeFailure }]
    );
    let failure = pair.client_failure().expect("the client failed");
    match &failure {
        Error::HelloRefused { alert: AlertDescription::HandshakeFailure, offered_groups, .. } => {
            assert_eq!(*offered_groups, offered, "{failure}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pair.client_data(), Vec::<Vec<u8>>::new());
}

#[test]
fn psk_sides_with_disjoint_groups_fail_on_both_sides_naming_the_groups() {
    let client = ClientConfig { groups: vec![NamedGroup::X25519], ..psk_client() };
    let server = ServerConfig { groups: vec![NamedGroup::Secp256r1], ..psk_server() };
    refused_for_groups(client.clone(), server.clone());
    let mut pair = Pair::new(client, server);
    pair.run_for(MINUTE);
    assert_eq!(
        refusals(&mut pair)[0].reason.to_string(),
        "no common group: the client offered x25519; we support secp256r1"
    );
    assert_eq!(
        pair.client_failure().expect("failed").to_string(),
        "the server refused our ClientHello with alert handshake_failure (we offered \
         TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_CCM_SHA256, \
         TLS_AES_128_CCM_8_SHA256; groups x25519)"
    );
}

#[test]
fn a_hybrid_first_client_without_a_share_is_refused_for_its_groups_not_its_hello() {
    // The first ClientHello holds the hybrid's share back (its size): the refusal still names
    // the groups, where the client used to abort with illegal_parameter.
    let client = ClientConfig { groups: vec![NamedGroup::X25519MlKem768], ..psk_client() };
    let server = ServerConfig { groups: vec![NamedGroup::Secp256r1], ..psk_server() };
    refused_for_groups(client, server);
    let client = ClientConfig { groups: vec![NamedGroup::X25519], ..cert_client() };
    let server = ServerConfig { groups: vec![NamedGroup::X25519MlKem768], ..cert_server() };
    refused_for_groups(client, server);
}

#[test]
fn a_psk_client_without_groups_completes_in_psk_ke_and_says_so() {
    let client = ClientConfig { groups: Vec::new(), ..psk_client() };
    let server = ServerConfig { groups: vec![NamedGroup::Secp256r1], ..psk_server() };
    let mut pair = Pair::new(client, server);
    let (c, s) = pair.handshake(MINUTE).expect("psk_ke");
    for summary in [&c, &s] {
        assert_eq!(summary.group, None);
        assert!(summary.hello_retry, "the cookie exchange");
        assert_eq!(summary.hello_retry_group, None);
    }
    pair.exchange_data(2);
    assert!(refusals(&mut pair).is_empty());
}

#[test]
fn a_psk_client_with_groups_offers_psk_dhe_ke_alone() {
    let mut pair = Pair::new(psk_client(), psk_server());
    pair.handshake(MINUTE).expect("connected");
    // psk_key_exchange_modes (45): one mode, psk_dhe_ke (1).
    let hello = &pair.log[0].payload;
    assert!(hello.windows(6).any(|w| w == [0x00, 0x2d, 0x00, 0x02, 0x01, 0x01]), "{hello:02x?}");
}

#[test]
fn the_refusal_queue_names_version_suite_and_group() {
    // A client offering DTLS 1.2 alone.
    let mut pair = Pair::new(client_config(), psk_server());
    pair.run_for(MINUTE);
    let refused = refusals(&mut pair);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].alert, AlertDescription::ProtocolVersion);
    assert_eq!(refused[0].reason, Mismatch::Versions { offered: vec![0xfefd], ours: vec![0xfefc] });
    assert_eq!(
        refused[0].reason.to_string(),
        "no common version: the client offered DTLS 1.2; this server speaks DTLS 1.3"
    );

    // No suite in common.
    let client = ClientConfig { suites13: vec![Suite13::Chacha20Poly1305Sha256], ..psk_client() };
    let server = ServerConfig { suites13: vec![Suite13::Aes128GcmSha256], ..psk_server() };
    let mut pair = Pair::new(client, server);
    pair.run_for(MINUTE);
    let refused = refusals(&mut pair);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].alert, AlertDescription::HandshakeFailure);
    assert_eq!(
        refused[0].reason,
        Mismatch::CipherSuite {
            // With the renegotiation SCSV a fastshake hello always carries (RFC 5746 §3.3).
            offered: vec![Suite13::Chacha20Poly1305Sha256.id(), 0x00ff],
            served: vec![CipherSuite::Aes128GcmSha256],
        }
    );
    assert_eq!(
        refused[0].reason.to_string(),
        "no common cipher suite: the client offered TLS_CHACHA20_POLY1305_SHA256, \
         TLS_EMPTY_RENEGOTIATION_INFO_SCSV; this server serves TLS_AES_128_GCM_SHA256"
    );
    assert!(pair.client_failure().is_some_and(|e| e.alert() == Some(AlertDescription::HandshakeFailure)));

    // No group in common.
    let client = ClientConfig { groups: vec![NamedGroup::Secp256r1], ..psk_client() };
    let server =
        ServerConfig { groups: vec![NamedGroup::X25519MlKem768, NamedGroup::X25519], ..psk_server() };
    let mut pair = Pair::new(client, server);
    pair.run_for(MINUTE);
    let refused = refusals(&mut pair);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        refused[0].reason.to_string(),
        "no common group: the client offered secp256r1; we support x25519mlkem768, x25519"
    );
}

#[test]
fn a_flood_of_refused_hellos_is_counted_beyond_the_queue() {
    let now = Instant::from_millis(1_000);
    let server_addr: SocketAddr = "198.51.100.1:5684".parse().unwrap();
    let mut server = Endpoint::new(Arc::new(psk_server()), [7; 32]).unwrap();
    let mut client = Connection::client(Arc::new(client_config()), now, server_addr, [1; 32]);
    let hello = client.poll_transmit(now).expect("a ClientHello").payload;
    let floods = MAX_QUEUED_REFUSALS + 6;
    for port in 0..floods {
        let remote = SocketAddr::from(([192, 0, 2, 1], 10_000 + port as u16));
        server.handle_datagram(now, server_addr, remote, &mut hello.clone());
    }
    assert_eq!(server.stats().refusals_dropped, 6);
    let kept: Vec<HelloRefusal> = std::iter::from_fn(|| server.poll_refusal()).collect();
    assert_eq!(kept.len(), MAX_QUEUED_REFUSALS);
    assert_eq!(kept[0].remote.port(), 10_000, "oldest first");
    // Each was answered with its alert all the same.
    assert_eq!(std::iter::from_fn(|| server.poll_transmit(now)).count(), floods);
}

#[test]
fn a_dtls_1_3_client_told_by_a_hello_verify_request_that_the_server_speaks_1_2() {
    let mut pair = Pair::new(psk_client(), server_config());
    assert!(pair.handshake(MINUTE).is_none());
    let failure = pair.client_failure().expect("the client failed");
    assert_eq!(
        failure,
        Error::ServerSpeaksDtls12 { message: "HelloVerifyRequest", alert: AlertDescription::ProtocolVersion }
    );
    assert_eq!(
        failure.to_string(),
        "the server answered in DTLS 1.2 (HelloVerifyRequest); this client offers only DTLS 1.3 \
         (protocol_version sent)"
    );
}

#[test]
fn a_psk_alone_with_only_sha_384_suites_is_refused_up_front() {
    let sha384 = vec![Suite13::Aes256GcmSha384];
    let why = "TLS_AES_256_GCM_SHA384 hashes with SHA-384, but an external PSK is used with SHA-256 (RFC \
               8446 §4.2.11); add a SHA-256 suite or";
    let client = ClientConfig { suites13: sha384.clone(), ..psk_client() };
    let refused = client.validate().expect_err("a PSK client with SHA-384 alone").to_string();
    assert!(refused.contains(why) && refused.ends_with("trust anchors for a certificate"), "{refused}");
    let server = ServerConfig { suites13: sha384.clone(), ..psk_server() };
    let refused = server.validate().expect_err("a PSK server with SHA-384 alone").to_string();
    assert!(refused.contains(why) && refused.ends_with("a certificate"), "{refused}");
    assert!(Endpoint::new(Arc::new(server), [0; 32]).is_err());
    // With a SHA-256 suite beside it, or with certificates, SHA-384 is fine.
    let both = vec![Suite13::Aes256GcmSha384, Suite13::Aes128GcmSha256];
    assert!(ClientConfig { suites13: both.clone(), ..psk_client() }.validate().is_ok());
    assert!(ServerConfig { suites13: both, ..psk_server() }.validate().is_ok());
    assert!(ClientConfig { suites13: sha384.clone(), ..cert_client() }.validate().is_ok());
    assert!(ServerConfig { suites13: sha384.clone(), ..cert_server() }.validate().is_ok());
    // A 1.2-only configuration has no 1.3 suites to judge.
    assert!(ClientConfig { suites13: sha384, ..client_config() }.validate().is_ok());
}
