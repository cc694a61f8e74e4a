//! Certificate suites on the in-memory pair: every suite, mutual authentication, and each
//! refusal with the alert RFC 5246 names.

use fastshake_dtls::{
    AlertDescription, CertifiedKey, CipherSuite, ClientAuth, ClientConfig, Error, Event, Instant, NamedGroup,
    ServerConfig, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Dir, Fate};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
/// The Unix time the test PKIs are made at and, unless a test says otherwise, validated at.
const PKI_TIME: u64 = 1_800_000_000;

/// The pair's clock starts at 1 s: a minute after the PKI was made.
const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });
/// Three days later: the two-day certificates have expired.
const AFTER_EXPIRY: Option<WallClock> =
    Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 3 * 86_400 });

fn p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn other_p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(1, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn rsa_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::Rsa2048, &[], PKI_TIME, 2).unwrap())
}

fn anchors(pki: &TestPki) -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())
}

fn cert_client(pki: &TestPki) -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls12,
        trust_anchors: Some(anchors(pki)),
        server_name: Some("localhost".into()),
        wall_clock: AT_PKI_TIME,
        ..Default::default()
    }
}

fn cert_server(pki: &TestPki) -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(Arc::new(pki.server_certified_key().unwrap())),
        wall_clock: AT_PKI_TIME,
        ..Default::default()
    }
}

fn client_key(pki: &TestPki) -> Arc<CertifiedKey> {
    Arc::new(pki.client_certified_key().unwrap())
}

#[test]
fn every_certificate_suite_completes_and_carries_data() {
    let cases = [
        (CipherSuite::EcdheEcdsaWithAes128Ccm8, p256_pki()),
        (CipherSuite::EcdheEcdsaWithAes128GcmSha256, p256_pki()),
        (CipherSuite::EcdheRsaWithAes128GcmSha256, rsa_pki()),
    ];
    for (suite, pki) in cases {
        let mut cc = cert_client(pki);
        cc.suites = vec![suite];
        let mut pair = Pair::new(cc, cert_server(pki));
        let (c, s) = pair.handshake(MINUTE).unwrap_or_else(|| panic!("{suite}: {:?}", pair.client_events));
        assert_eq!((c.suite, s.suite), (suite, suite));
        assert!(c.extended_master_secret && s.extended_master_secret);
        assert_eq!(c.peer_certificates, pki.server_chain().len(), "leaf and intermediates, never the root");
        assert_eq!(s.peer_certificates, 0);
        pair.exchange_data(3);
    }
}

/// The named curve of every ServerKeyExchange the server sent (RFC 8422 §5.4: curve_type 3,
/// then the group), read from plaintext epoch-0 records.
fn server_key_exchange_groups(pair: &Pair) -> Vec<u16> {
    let mut groups = Vec::new();
    for d in pair.log.iter().filter(|d| d.dir == Dir::ToClient) {
        let mut rest = &d.payload[..];
        while rest.len() >= 13 {
            let len = usize::from(u16::from_be_bytes([rest[11], rest[12]]));
            let Some(body) = rest.get(13..13 + len) else { break };
            // Handshake record of epoch 0, a ServerKeyExchange fragment from offset 0.
            if rest[0] == 22
                && rest[3..5] == [0, 0]
                && body.len() >= 15
                && body[0] == 12
                && body[6..9] == [0; 3]
            {
                assert_eq!(body[12], 3, "named_curve");
                groups.push(u16::from_be_bytes([body[13], body[14]]));
            }
            rest = &rest[13 + len..];
        }
    }
    groups
}

#[test]
fn the_client_offer_decides_the_ecdhe_group() {
    let cases: [(&[NamedGroup], u16); 3] = [
        (&NamedGroup::ALL, 29),
        (&[NamedGroup::Secp256r1], 23),
        (&[NamedGroup::Secp256r1, NamedGroup::X25519], 29),
    ];
    for (offer, expected) in cases {
        let mut cc = cert_client(p256_pki());
        cc.groups = offer.to_vec();
        let mut pair = Pair::new(cc, cert_server(p256_pki()));
        pair.handshake(MINUTE).unwrap_or_else(|| panic!("{offer:?}: {:?}", pair.client_events));
        assert_eq!(server_key_exchange_groups(&pair), vec![expected], "{offer:?}");
        pair.exchange_data(2);
    }
    // A certificate client must offer some group.
    let mut cc = cert_client(p256_pki());
    cc.groups.clear();
    assert!(matches!(cc.validate(), Err(Error::Config(_))));
}

#[test]
fn the_server_picks_the_suite_its_key_can_serve() {
    // The client offers everything; an RSA server can only serve ECDHE-RSA.
    let mut pair = Pair::new(cert_client(rsa_pki()), cert_server(rsa_pki()));
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    assert_eq!(c.suite, CipherSuite::EcdheRsaWithAes128GcmSha256);
}

#[test]
fn psk_and_certificates_side_by_side() {
    // A client with both offers PSK first (default order); a certificate-only server answers ECDHE.
    let mut cc = cert_client(p256_pki());
    cc.psk = client_config().psk;
    let mut pair = Pair::new(cc.clone(), cert_server(p256_pki()));
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    assert_eq!(c.suite, CipherSuite::EcdheEcdsaWithAes128Ccm8);
    let mut pair = Pair::new(cc, server_config());
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    assert!(c.suite.is_psk());
}

#[test]
fn mutual_authentication_under_each_policy() {
    let pki = p256_pki();
    for policy in [ClientAuth::Optional, ClientAuth::Require] {
        let mut sc = cert_server(pki);
        sc.client_auth = policy;
        sc.client_trust_anchors = Some(anchors(pki));
        let mut cc = cert_client(pki);
        cc.certified_key = Some(client_key(pki));
        let mut pair = Pair::new(cc, sc);
        let (_, s) = pair.handshake(MINUTE).expect("mutual handshake");
        assert_eq!(s.peer_certificates, pki.client_chain().len(), "{policy:?}");
        pair.exchange_data(2);
    }
    // RSA client keys sign CertificateVerify too.
    let pki = rsa_pki();
    let mut sc = cert_server(pki);
    sc.client_auth = ClientAuth::Require;
    sc.client_trust_anchors = Some(anchors(pki));
    let mut cc = cert_client(pki);
    cc.certified_key = Some(client_key(pki));
    let (_, s) = Pair::new(cc, sc).handshake(MINUTE).expect("RSA mutual handshake");
    assert_eq!(s.peer_certificates, 2);
}

#[test]
fn optional_client_auth_accepts_a_client_without_a_certificate() {
    let pki = p256_pki();
    let mut sc = cert_server(pki);
    sc.client_auth = ClientAuth::Optional;
    sc.client_trust_anchors = Some(anchors(pki));
    let (_, s) = Pair::new(cert_client(pki), sc).handshake(MINUTE).expect("handshake");
    assert_eq!(s.peer_certificates, 0);
}

/// Runs a handshake that must fail; returns (client failure, server failure).
fn refused(cc: ClientConfig, sc: ServerConfig) -> (Option<Error>, Option<Error>) {
    let mut pair = Pair::new(cc, sc);
    assert!(pair.handshake(Duration::from_secs(5)).is_none(), "the handshake must fail");
    // Let the alert reach the other side.
    let limit = pair.now + Duration::from_millis(100);
    while pair.step(limit) {}
    let client = pair.client_events.iter().find_map(|e| match e {
        Event::Failed(e) => Some(e.clone()),
        _ => None,
    });
    let server = pair.server_events.iter().find_map(|(_, e)| match e {
        Event::Failed(e) => Some(e.clone()),
        _ => None,
    });
    (client, server)
}

fn assert_client_refused(cc: ClientConfig, sc: ServerConfig, alert: AlertDescription) {
    let (client, server) = refused(cc, sc);
    let client = client.expect("the client fails");
    assert!(matches!(client, Error::PeerAuthentication { alert: a, .. } if a == alert), "{client:?}");
    assert!(!client.to_string().is_empty());
    assert_eq!(server, Some(Error::AlertReceived(alert)));
}

fn assert_server_refused(cc: ClientConfig, sc: ServerConfig, alert: AlertDescription) {
    let (client, server) = refused(cc, sc);
    let server = server.expect("the server fails");
    assert_eq!(server.alert(), Some(alert), "{server:?}");
    assert_eq!(client, Some(Error::AlertReceived(alert)));
}

#[test]
fn unknown_ca_is_refused_with_unknown_ca() {
    let cc = cert_client(other_p256_pki());
    assert_client_refused(cc, cert_server(p256_pki()), AlertDescription::UnknownCa);
}

#[test]
fn expired_leaf_is_refused_with_certificate_expired() {
    let mut cc = cert_client(p256_pki());
    cc.wall_clock = AFTER_EXPIRY;
    assert_client_refused(cc, cert_server(p256_pki()), AlertDescription::CertificateExpired);
}

#[test]
fn wrong_server_name_is_refused_with_bad_certificate() {
    let mut cc = cert_client(p256_pki());
    cc.server_name = Some("not-the-server.example".into());
    assert_client_refused(cc, cert_server(p256_pki()), AlertDescription::BadCertificate);
}

#[test]
fn an_address_name_is_checked_against_the_certificate() {
    let mut cc = cert_client(p256_pki());
    cc.server_name = Some("127.0.0.1".into());
    assert!(Pair::new(cc, cert_server(p256_pki())).handshake(MINUTE).is_some());
    let mut cc = cert_client(p256_pki());
    cc.server_name = Some("127.0.0.2".into());
    assert_client_refused(cc, cert_server(p256_pki()), AlertDescription::BadCertificate);
}

#[test]
fn server_key_exchange_signed_with_the_wrong_key_is_decrypt_error() {
    // The server presents its chain but signs with a different P-256 key.
    let pki = p256_pki();
    let wrong = other_p256_pki().server_certified_key().unwrap();
    let forged = CertifiedKey { chain: pki.server_chain(), key: wrong.key };
    let mut sc = cert_server(pki);
    sc.certified_key = Some(Arc::new(forged));
    assert_client_refused(cert_client(pki), sc, AlertDescription::DecryptError);
}

#[test]
fn certificate_verify_with_the_wrong_key_is_decrypt_error() {
    let pki = p256_pki();
    let wrong = other_p256_pki().client_certified_key().unwrap();
    let forged = CertifiedKey { chain: pki.client_chain(), key: wrong.key };
    let mut sc = cert_server(pki);
    sc.client_auth = ClientAuth::Require;
    sc.client_trust_anchors = Some(anchors(pki));
    let mut cc = cert_client(pki);
    cc.certified_key = Some(Arc::new(forged));
    assert_server_refused(cc, sc, AlertDescription::DecryptError);
}

#[test]
fn required_client_certificate_missing_is_handshake_failure() {
    let pki = p256_pki();
    let mut sc = cert_server(pki);
    sc.client_auth = ClientAuth::Require;
    sc.client_trust_anchors = Some(anchors(pki));
    assert_server_refused(cert_client(pki), sc, AlertDescription::HandshakeFailure);
}

#[test]
fn client_certificate_from_an_unknown_ca_is_unknown_ca() {
    let pki = p256_pki();
    let mut sc = cert_server(pki);
    sc.client_auth = ClientAuth::Require;
    sc.client_trust_anchors = Some(anchors(pki));
    let mut cc = cert_client(pki);
    cc.certified_key = Some(client_key(other_p256_pki()));
    assert_server_refused(cc, sc, AlertDescription::UnknownCa);
}

#[test]
fn certificate_handshake_survives_loss_and_a_small_mtu() {
    let pki = p256_pki();
    let mut cc = cert_client(pki);
    cc.mtu = 200;
    let mut sc = cert_server(pki);
    sc.mtu = 200;
    sc.client_auth = ClientAuth::Require;
    sc.client_trust_anchors = Some(anchors(pki));
    cc.certified_key = Some(client_key(pki));
    let mut pair = Pair::new(cc, sc);
    // Lose the first datagram of every flight once in each direction.
    pair.filter = net::drop_if(|d| d.index % 5 == 2);
    let (c, s) = pair.handshake(MINUTE).expect("handshake despite loss");
    assert!(c.retransmissions + s.retransmissions > 0);
    assert_eq!(s.peer_certificates, 3);
}

#[test]
fn the_iot_profile_connects_at_a_96_byte_mtu() {
    // RFC 7925: ECDHE-ECDSA with AES-128-CCM-8 over 802.15.4 frames (96 bytes of UDP payload).
    let pki = p256_pki();
    let mut cc = cert_client(pki);
    cc.mtu = 96;
    cc.suites = vec![CipherSuite::EcdheEcdsaWithAes128Ccm8];
    cc.certified_key = Some(client_key(pki));
    let mut sc = cert_server(pki);
    sc.mtu = 96;
    sc.client_auth = ClientAuth::Require;
    sc.client_trust_anchors = Some(anchors(pki));
    let mut pair = Pair::new(cc, sc);
    pair.filter = Box::new(|d| {
        assert!(d.payload.len() <= 96, "a {}-byte datagram", d.payload.len());
        Fate::Deliver
    });
    let (c, s) = pair.handshake(MINUTE).expect("handshake at MTU 96");
    assert_eq!((c.suite, s.peer_certificates), (CipherSuite::EcdheEcdsaWithAes128Ccm8, 3));
    pair.exchange_data(2);
}

/// Runs a mutual certificate handshake, corrupting byte `pos` of datagram `target` (counted over
/// both directions); returns whether both sides ended established.
fn corrupted_handshake(target: usize, pos: usize) -> bool {
    let pki = p256_pki();
    let mut cc = cert_client(pki);
    cc.certified_key = Some(client_key(pki));
    cc.mtu = 300;
    let mut sc = cert_server(pki);
    sc.client_auth = ClientAuth::Optional;
    sc.client_trust_anchors = Some(anchors(pki));
    sc.tickets = Some(fastshake_dtls::TicketKeys::new(1, [5; 16]));
    let mut pair = Pair::new(cc, sc);
    pair.filter = Box::new(move |d| {
        if d.nth == target && pos < d.payload.len() {
            d.payload[pos] ^= 0x5a;
        }
        Fate::Deliver
    });
    pair.handshake(Duration::from_secs(20)).is_some()
}

#[test]
fn corrupted_handshake_datagrams_never_panic() {
    assert!(corrupted_handshake(usize::MAX, 0), "the uncorrupted handshake completes");
    // Every datagram of the handshake, corrupted at spread-out positions (headers, lengths,
    // certificates, keys, signatures, Finished): no panic, whether the handshake then fails with
    // an alert or recovers by retransmission.
    for target in 0..12 {
        for pos in [0, 3, 11, 13, 14, 20, 25, 30, 45, 60, 99, 150, 220, 290] {
            let _ = corrupted_handshake(target, pos);
        }
    }
}
