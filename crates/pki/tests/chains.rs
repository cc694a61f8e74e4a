//! Chain validation of generated PKIs: the right usage and names pass; every kind of wrong chain
//! is refused with the error and the TLS alert RFC 5246 names.

use std::sync::OnceLock;

use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_pki::{
    alert, verify_client_chain, verify_server_chain, CertDer, KeyAlgorithm, PkiError, TrustAnchors,
};

/// The time the test PKIs are generated at (2026-09-16), and their validity.
const NOW: u64 = 1_789_000_000;
const DAYS: u32 = 30;

fn p256() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], NOW, DAYS).expect("generate p256"))
}

fn rsa2048() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::Rsa2048, &[], NOW, DAYS).expect("generate rsa2048"))
}

/// A second, unrelated PKI: its root must not vouch for the first one's chains.
fn other_p256() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(1, KeyKind::P256, &[], NOW, DAYS).expect("generate other"))
}

fn anchors(pki: &TestPki) -> TrustAnchors {
    TrustAnchors::from_pem(pki.ca_pem().as_bytes()).expect("root is a trust anchor")
}

fn assert_refused(result: Result<impl std::fmt::Debug, PkiError>, alert_code: u8) -> PkiError {
    let error = result.expect_err("chain must be refused");
    assert_eq!(error.alert_code(), alert_code, "alert for {error:?} ({error})");
    assert!(!error.to_string().is_empty());
    error
}

#[test]
fn generated_pki_has_the_requested_shape() {
    let pki = p256();
    assert_eq!(pki.intermediates.len(), 2);
    assert_eq!(pki.server_chain().len(), 3, "leaf + 2 intermediates, no root");
    assert_eq!(pki.client_chain().len(), 3);
    assert!(!pki.server_chain().contains(&pki.root.der), "the root is never sent");
    // The PEM chain holds the same certificates in the same order as the DER chain.
    let from_pem = fastshake_pki::certificates_from_pem(pki.server_chain_pem().as_bytes()).unwrap();
    assert_eq!(from_pem, pki.server_chain());
    assert_eq!(rsa2048().server_chain().len(), 2);
}

#[test]
fn server_chain_validates_for_its_names() {
    for pki in [p256(), rsa2048()] {
        let anchors = anchors(pki);
        for name in [None, Some("localhost"), Some("127.0.0.1")] {
            let key = verify_server_chain(&pki.server_chain(), &anchors, NOW, name)
                .unwrap_or_else(|e| panic!("{} server chain for {name:?}: {e}", pki.key_kind))
                .key;
            let expected = match pki.key_kind {
                KeyKind::P256 => KeyAlgorithm::EcdsaP256,
                _ => KeyAlgorithm::Rsa,
            };
            assert_eq!(key.algorithm(), expected);
        }
    }
}

#[test]
fn client_chain_validates_for_client_auth() {
    for pki in [p256(), rsa2048()] {
        let verified = verify_client_chain(&pki.client_chain(), &anchors(pki), NOW).expect("client chain");
        let key = verified.key;
        // The anchor is the one the chain was issued under, and the chain is valid until the
        // earliest notAfter of its certificates.
        assert!(anchors(pki).contains(&verified.anchor));
        assert!(!anchors(other_p256()).contains(&verified.anchor));
        assert!(verified.not_after_unix > NOW);
        assert!(verify_client_chain(&pki.client_chain(), &anchors(pki), verified.not_after_unix + 1).is_err());
        // The key returned is the client leaf's, not the server's.
        let client_key = pki.client_certified_key().unwrap();
        let leaf_key = fastshake_pki::PeerPublicKey::from_certificate(client_key.leaf().unwrap());
        assert_eq!(key, leaf_key.unwrap());
    }
}

#[test]
fn chosen_server_names_are_certified_and_others_are_not() {
    let names = vec!["dtls.example".to_string(), "::1".to_string()];
    let pki = generate(1, KeyKind::P256, &names, NOW, DAYS).unwrap();
    let anchors = anchors(&pki);
    for good in ["dtls.example", "::1"] {
        verify_server_chain(&pki.server_chain(), &anchors, NOW, Some(good)).expect(good);
    }
    let error = verify_server_chain(&pki.server_chain(), &anchors, NOW, Some("localhost"));
    assert_refused(error, alert::BAD_CERTIFICATE);
}

#[test]
fn wrong_name_is_bad_certificate() {
    let pki = p256();
    for wrong in ["example.com", "127.0.0.2", "local.host"] {
        let error = verify_server_chain(&pki.server_chain(), &anchors(pki), NOW, Some(wrong));
        let error = assert_refused(error, alert::BAD_CERTIFICATE);
        assert_eq!(error, PkiError::NameMismatch(wrong.to_string()));
        assert!(error.to_string().contains(wrong), "{error}");
    }
}

#[test]
fn unknown_ca_is_refused() {
    let error = verify_server_chain(&p256().server_chain(), &anchors(other_p256()), NOW, None);
    assert_eq!(assert_refused(error, alert::UNKNOWN_CA), PkiError::UnknownCa);
    let error = verify_client_chain(&p256().client_chain(), &anchors(other_p256()), NOW);
    assert_eq!(assert_refused(error, alert::UNKNOWN_CA), PkiError::UnknownCa);
}

#[test]
fn missing_intermediate_is_unknown_ca() {
    let mut chain = p256().server_chain();
    chain.remove(1);
    let error = verify_server_chain(&chain, &anchors(p256()), NOW, None);
    assert_eq!(assert_refused(error, alert::UNKNOWN_CA), PkiError::UnknownCa);
}

#[test]
fn expired_chain_is_certificate_expired() {
    let after = NOW + u64::from(DAYS) * 86_400 + 1;
    let error = verify_server_chain(&p256().server_chain(), &anchors(p256()), after, None);
    match assert_refused(error, alert::CERTIFICATE_EXPIRED) {
        PkiError::Expired { now, not_after } => {
            assert_eq!(now, after);
            assert_eq!(not_after, NOW + u64::from(DAYS) * 86_400);
        }
        other => panic!("expected Expired, got {other:?}"),
    }
    let error = verify_client_chain(&rsa2048().client_chain(), &anchors(rsa2048()), after);
    assert_refused(error, alert::CERTIFICATE_EXPIRED);
}

#[test]
fn not_yet_valid_chain_is_certificate_expired() {
    // Generated certificates start an hour before NOW.
    let before = NOW - 3601;
    let error = verify_server_chain(&p256().server_chain(), &anchors(p256()), before, None);
    match assert_refused(error, alert::CERTIFICATE_EXPIRED) {
        PkiError::NotYetValid { now, not_before } => {
            assert_eq!(now, before);
            assert_eq!(not_before, NOW - 3600);
        }
        other => panic!("expected NotYetValid, got {other:?}"),
    }
    // One second later it is valid.
    verify_server_chain(&p256().server_chain(), &anchors(p256()), before + 1, None).unwrap();
}

#[test]
fn client_certificate_used_as_server_is_unsupported_certificate() {
    for pki in [p256(), rsa2048()] {
        let error = verify_server_chain(&pki.client_chain(), &anchors(pki), NOW, None);
        let error = assert_refused(error, alert::UNSUPPORTED_CERTIFICATE);
        assert_eq!(error, PkiError::WrongKeyUsage { required: "serverAuth" });
        let error = verify_client_chain(&pki.server_chain(), &anchors(pki), NOW);
        let error = assert_refused(error, alert::UNSUPPORTED_CERTIFICATE);
        assert_eq!(error, PkiError::WrongKeyUsage { required: "clientAuth" });
    }
}

fn flipped(cert: &CertDer, index_from_end: usize) -> CertDer {
    let mut bytes = cert.to_vec();
    let index = bytes.len() - index_from_end;
    bytes[index] ^= 0x01;
    CertDer::from(bytes)
}

#[test]
fn tampered_leaf_is_bad_certificate() {
    for pki in [p256(), rsa2048()] {
        let mut chain = pki.server_chain();
        // The last byte is inside the issuer's signature.
        chain[0] = flipped(&chain[0], 1);
        let error = verify_server_chain(&chain, &anchors(pki), NOW, None);
        assert_eq!(assert_refused(error, alert::BAD_CERTIFICATE), PkiError::BadCertificateSignature);

        // A byte of the signed part: the last byte of the leaf's own public key.
        let mut chain = pki.client_chain();
        let spki = fastshake_pki::PeerPublicKey::from_certificate(&chain[0]).unwrap();
        let spki = spki.spki_der().to_vec();
        let at = chain[0].windows(spki.len()).position(|w| w == spki.as_slice()).unwrap();
        chain[0] = flipped(&chain[0], chain[0].len() - (at + spki.len() - 1));
        let error = verify_client_chain(&chain, &anchors(pki), NOW);
        assert_eq!(assert_refused(error, alert::BAD_CERTIFICATE), PkiError::BadCertificateSignature);
    }
}

#[test]
fn tampered_intermediate_is_refused() {
    let mut chain = p256().server_chain();
    chain[1] = flipped(&chain[1], 1);
    let error = verify_server_chain(&chain, &anchors(p256()), NOW, None).expect_err("tampered");
    // webpki reports the most relevant failure of the paths it tried.
    assert!(matches!(error, PkiError::BadCertificateSignature | PkiError::UnknownCa), "{error:?}");
}

#[test]
fn empty_chain_is_handshake_failure() {
    let error = verify_client_chain(&[], &anchors(p256()), NOW);
    assert_eq!(assert_refused(error, alert::HANDSHAKE_FAILURE), PkiError::NoPeerCertificate);
}

#[test]
fn garbage_leaf_is_bad_certificate() {
    let chain = vec![CertDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00])];
    let error = verify_server_chain(&chain, &anchors(p256()), NOW, None);
    assert!(matches!(assert_refused(error, alert::BAD_CERTIFICATE), PkiError::MalformedCertificate(_)));
}

#[test]
fn invalid_server_name_is_our_error() {
    let error = verify_server_chain(&p256().server_chain(), &anchors(p256()), NOW, Some("a b"));
    assert_eq!(assert_refused(error, alert::INTERNAL_ERROR), PkiError::InvalidServerName("a b".into()));
}

#[test]
fn trust_anchors_from_pem_take_every_certificate() {
    let both = format!("{}{}", p256().ca_pem(), other_p256().ca_pem());
    let anchors = TrustAnchors::from_pem(both.as_bytes()).unwrap();
    assert_eq!(anchors.len(), 2);
    verify_server_chain(&p256().server_chain(), &anchors, NOW, Some("localhost")).unwrap();
    verify_server_chain(&other_p256().server_chain(), &anchors, NOW, Some("localhost")).unwrap();
    assert_eq!(TrustAnchors::from_pem(b"no pem here").unwrap_err(), PkiError::NoCertificate);
}

/// A root and a leaf made directly with rcgen, for leaves the generator never makes.
fn custom_leaf(
    key_usages: Vec<rcgen::KeyUsagePurpose>,
    eku: Vec<rcgen::ExtendedKeyUsagePurpose>,
) -> (TrustAnchors, Vec<CertDer>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let root_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut root = CertificateParams::new(Vec::<String>::new()).unwrap();
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root = root.self_signed(&root_key).unwrap();
    let leaf_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.key_usages = key_usages;
    leaf.extended_key_usages = eku;
    let leaf = leaf.signed_by(&leaf_key, &root, &root_key).unwrap();
    (TrustAnchors::from_der(&[root.der().clone()]).unwrap(), vec![leaf.der().clone()])
}

#[test]
fn leaf_whose_key_usage_forbids_signatures_is_unsupported_certificate() {
    use rcgen::{ExtendedKeyUsagePurpose as Eku, KeyUsagePurpose as Ku};
    // The key may only encipher: it cannot sign ServerKeyExchange or CertificateVerify.
    let (anchors, chain) = custom_leaf(vec![Ku::KeyEncipherment], vec![Eku::ServerAuth]);
    let error = verify_server_chain(&chain, &anchors, NOW, Some("localhost"));
    let error = assert_refused(error, alert::UNSUPPORTED_CERTIFICATE);
    assert_eq!(error, PkiError::WrongKeyUsage { required: "digitalSignature" });
    // With digitalSignature, or with no keyUsage/EKU extension at all, the leaf is accepted.
    let (anchors, chain) =
        custom_leaf(vec![Ku::DigitalSignature, Ku::KeyEncipherment], vec![Eku::ServerAuth]);
    verify_server_chain(&chain, &anchors, NOW, Some("localhost")).unwrap();
    let (anchors, chain) = custom_leaf(Vec::new(), Vec::new());
    verify_server_chain(&chain, &anchors, NOW, Some("localhost")).unwrap();
    verify_client_chain(&chain, &anchors, NOW).unwrap();
}

#[test]
fn anchors_list_their_subject_names_for_certificate_request() {
    let both = format!("{}{}", p256().ca_pem(), rsa2048().ca_pem());
    let anchors = TrustAnchors::from_pem(both.as_bytes()).unwrap();
    let names: Vec<&[u8]> = anchors.subject_names().collect();
    assert_eq!(names.len(), 2);
    for (name, pki) in names.iter().zip([p256(), rsa2048()]) {
        // A DER SEQUENCE whose length covers the rest exactly (short or 0x81 long form).
        assert_eq!(name[0], 0x30);
        let (header, body) =
            if name[1] < 0x80 { (2, usize::from(name[1])) } else { (3, usize::from(name[2])) };
        assert_eq!(header + body, name.len());
        // It is the root's subject, which (self-signed) also appears as its issuer: twice in the DER.
        let count = pki.root.der.windows(name.len()).filter(|w| w == name).count();
        assert_eq!(count, 2, "subject and issuer of the root");
    }
    assert_eq!(KeyAlgorithm::EcdsaP256.client_certificate_type(), 64);
    assert_eq!(KeyAlgorithm::Rsa.client_certificate_type(), 1);
}

#[test]
fn subjects_read_in_order_for_display() {
    let chain = p256().server_chain();
    let subject = fastshake_pki::subject_text(&chain[0]).expect("a subject");
    assert!(subject.starts_with("O=fastshake test PKI, CN=fastshake test server p256"), "{subject}");
    assert_eq!(fastshake_pki::subject_text(b"not a certificate"), None);
}
