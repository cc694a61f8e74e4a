//! DTLS as WebRTC runs it (RFC 8827 §6.5, RFC 8842): both peers hold self-signed certificates
//! and trust each other by the SHA-256 fingerprints their SDP carried, and the server answers
//! the first ClientHello at once because ICE already proved the client's address.

use fastshake_dtls::{
    AddressValidation, AlertDescription, CertificateCompression, ClientAuth, ClientConfig, Error, Event,
    ServerConfig, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::self_signed_p256;
use fastshake_testkit::dtls::Pair;
use fastshake_testkit::net::Dir;
use std::sync::Arc;
use std::time::Duration;

const NOW: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: fastshake_dtls::Instant::ZERO, unix_secs: NOW });

struct Peers {
    client: ClientConfig,
    server: ServerConfig,
}

/// A browser-like client and a data-channel server, each pinning the other's fingerprint.
fn peers(versions: Versions) -> Peers {
    let (client_key, client_fp) = self_signed_p256(NOW, 30).unwrap();
    let (server_key, server_fp) = self_signed_p256(NOW, 30).unwrap();
    peers_pinning(versions, (client_key, client_fp), (server_key, server_fp), client_fp, server_fp)
}

fn peers_pinning(
    versions: Versions,
    client: (fastshake_dtls::CertifiedKey, [u8; 32]),
    server: (fastshake_dtls::CertifiedKey, [u8; 32]),
    server_pins: [u8; 32],
    client_pins: [u8; 32],
) -> Peers {
    Peers {
        client: ClientConfig {
            versions,
            trust_anchors: Some(Arc::new(TrustAnchors::pinned_sha256([client_pins]).unwrap())),
            certified_key: Some(Arc::new(client.0)),
            wall_clock: CLOCK,
            certificate_compression: Arc::new(CertificateCompression::none()),
            ..Default::default()
        },
        server: ServerConfig {
            versions: Versions::Both,
            certified_key: Some(Arc::new(server.0)),
            client_auth: ClientAuth::Require,
            client_trust_anchors: Some(Arc::new(TrustAnchors::pinned_sha256([server_pins]).unwrap())),
            wall_clock: CLOCK,
            address_validation: AddressValidation::Transport,
            ..Default::default()
        },
    }
}

#[test]
fn pinned_self_signed_peers_complete_both_versions_without_a_cookie_round_trip() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let p = peers(versions);
        let mut pair = Pair::new(p.client, p.server);
        let (c, s) = pair.handshake(Duration::from_secs(10)).expect("handshake");
        assert_eq!(c.version, versions);
        assert!(!c.hello_retry, "{versions:?}: no HelloRetryRequest");
        assert_eq!(pair.server.stats().hello_verify_sent, 0, "{versions:?}: no cookie exchange");
        assert!(c.peer_leaf.is_some() && s.peer_leaf.is_some(), "{versions:?}: both sides authenticated");
        assert_eq!(c.retransmissions + s.retransmissions, 0, "{versions:?}: nothing resent");
        // The client's flights: 1.3 sends ClientHello and then its Finished flight; 1.2
        // ClientHello and then its second flight.
        assert_eq!(c.flights_sent, 2, "{versions:?}: one round trip less than with a cookie");
        pair.exchange_data(3);
        assert_eq!(pair.server_data().len(), 3);
        assert!(pair.sent(Dir::ToServer) > 0);
    }
}

#[test]
fn a_certificate_other_than_the_signalled_one_is_refused_with_bad_certificate() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        // The server pins a fingerprint the client's certificate does not have.
        let client = self_signed_p256(NOW, 30).unwrap();
        let server = self_signed_p256(NOW, 30).unwrap();
        let (_, stranger) = self_signed_p256(NOW, 30).unwrap();
        let server_fp = server.1;
        let p = peers_pinning(versions, client, server, stranger, server_fp);
        let mut pair = Pair::new(p.client, p.server);
        assert!(pair.handshake(Duration::from_secs(10)).is_none(), "{versions:?}: refused");
        let refused = pair.server_events.iter().find_map(|(_, e)| match e {
            Event::Failed(Error::PeerAuthentication { alert, reason }) => Some((*alert, reason.clone())),
            _ => None,
        });
        let (alert, reason) = refused.expect("the server says why");
        assert_eq!(alert, AlertDescription::BadCertificate, "{versions:?}: {reason}");
        assert!(reason.contains("fingerprint"), "{versions:?}: {reason}");
        // A 1.3 client counts itself connected once it sent its Finished (RFC 8446 §4.4.4) and
        // learns of the refusal from the alert; a 1.2 client never connects.
        let connected = pair.client_events.iter().any(|e| matches!(e, Event::Connected(_)));
        assert_eq!(connected, versions == Versions::Dtls13, "{versions:?}: {:?}", pair.client_events);
        assert!(
            matches!(pair.client_events.last(), Some(Event::Failed(_))),
            "{versions:?}: the client ends failed: {:?}",
            pair.client_events
        );

        // The client pins a fingerprint the server's certificate does not have.
        let client = self_signed_p256(NOW, 30).unwrap();
        let server = self_signed_p256(NOW, 30).unwrap();
        let client_fp = client.1;
        let p = peers_pinning(versions, client, server, client_fp, stranger);
        let mut pair = Pair::new(p.client, p.server);
        assert!(pair.handshake(Duration::from_secs(10)).is_none(), "{versions:?}: refused");
        let failed = pair.client_events.iter().find_map(|e| match e {
            Event::Failed(Error::PeerAuthentication { alert, .. }) => Some(*alert),
            _ => None,
        });
        assert_eq!(failed, Some(AlertDescription::BadCertificate), "{versions:?}");
    }
}

/// SRTP_AEAD_AES_128_GCM and SRTP_AES128_CM_HMAC_SHA1_80 (RFC 7714, RFC 5764 §4.1.2).
const AEAD_AES_128_GCM: u16 = 0x0007;
const AES128_CM_SHA1_80: u16 = 0x0001;

#[test]
fn use_srtp_is_agreed_on_the_servers_first_profile_the_client_offers_in_either_version() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let mut p = peers(versions);
        p.client.srtp_profiles = vec![AEAD_AES_128_GCM, AES128_CM_SHA1_80];
        p.server.srtp_profiles = vec![AES128_CM_SHA1_80, AEAD_AES_128_GCM];
        let mut pair = Pair::new(p.client, p.server);
        pair.handshake(Duration::from_secs(10)).expect("handshake with use_srtp");
        if versions == Versions::Dtls12 {
            // The 1.2 ServerHello travels in clear: use_srtp (14) naming one profile, no MKI.
            let answer = [0x00, 0x0e, 0x00, 0x05, 0x00, 0x02, 0x00, 0x01, 0x00];
            let server_hello = pair.log.iter().find(|d| d.dir == Dir::ToClient).expect("a server flight");
            assert!(server_hello.payload.windows(answer.len()).any(|w| w == answer), "{versions:?}");
        }
    }
}

#[test]
fn a_server_without_srtp_profiles_leaves_the_offer_unanswered() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let mut p = peers(versions);
        p.client.srtp_profiles = vec![AEAD_AES_128_GCM];
        let mut pair = Pair::new(p.client, p.server);
        pair.handshake(Duration::from_secs(10)).expect("handshake");
        if versions == Versions::Dtls12 {
            let server_hello = pair.log.iter().find(|d| d.dir == Dir::ToClient).expect("a server flight");
            let answer = [0x00, 0x0e, 0x00, 0x05, 0x00, 0x02];
            assert!(!server_hello.payload.windows(answer.len()).any(|w| w == answer), "no use_srtp answered");
        }
    }
}
