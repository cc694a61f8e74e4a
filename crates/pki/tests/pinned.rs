//! Trust by fingerprint (RFC 8122, RFC 8827 §6.5): the leaf whose SHA-256 was signalled is
//! accepted whatever issued it, any other is refused with bad_certificate.

use fastshake_pki::generate::self_signed_p256;
use fastshake_pki::{verify_client_chain, verify_server_chain, PkiError, TrustAnchors};

const NOW: u64 = 1_800_000_000;

#[test]
fn a_pinned_self_signed_leaf_is_accepted_and_any_other_refused() {
    let (ours, fingerprint) = self_signed_p256(NOW, 30).unwrap();
    let (other, other_fingerprint) = self_signed_p256(NOW, 30).unwrap();
    assert_ne!(fingerprint, other_fingerprint);
    let chain = vec![ours.leaf().unwrap().clone()];
    let digest = ring::digest::digest(&ring::digest::SHA256, chain[0].as_ref());
    assert_eq!(digest.as_ref(), &fingerprint[..], "the fingerprint returned is the leaf's SHA-256");

    let pinned = TrustAnchors::pinned_sha256([fingerprint]).unwrap();
    assert!(pinned.is_pinned());
    let verified = verify_client_chain(&chain, &pinned, NOW).unwrap();
    assert!(pinned.contains(&verified.anchor), "the anchor a pinned leaf names is its fingerprint");
    // A name is not checked: the fingerprint identifies the peer.
    verify_server_chain(&chain, &pinned, NOW, Some("example.com")).unwrap();

    let foreign = vec![other.leaf().unwrap().clone()];
    let err = verify_client_chain(&foreign, &pinned, NOW).unwrap_err();
    assert_eq!(err, PkiError::FingerprintMismatch);
    assert_eq!(err.alert_name(), "bad_certificate");
    assert_eq!(verify_client_chain(&[], &pinned, NOW).unwrap_err(), PkiError::NoPeerCertificate);
    assert!(TrustAnchors::pinned_sha256([]).is_err(), "nothing pinned trusts nobody: refused");
}

#[test]
fn a_self_signed_leaf_is_no_trust_anchor_for_a_path_validator_that_pins_nothing() {
    let (ours, _) = self_signed_p256(NOW, 30).unwrap();
    let pki =
        fastshake_pki::generate::generate(1, fastshake_pki::generate::KeyKind::P256, &[], NOW, 30).unwrap();
    let anchors = TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap();
    assert!(!anchors.is_pinned());
    let chain = vec![ours.leaf().unwrap().clone()];
    assert_eq!(verify_client_chain(&chain, &anchors, NOW).unwrap_err(), PkiError::UnknownCa);
}
