//! Handshake signatures: every scheme signs and verifies for every key kind; a changed message,
//! another key or a scheme that does not fit the key is refused with the alert RFC 5246 names.

use std::sync::OnceLock;

use fastshake_pki::generate::{generate, generate_key, KeyKind, TestPki};
use fastshake_pki::{
    alert, verify_server_chain, verify_signature, CertifiedKey, KeyAlgorithm, PeerPublicKey, PkiError,
    SignatureScheme, SigningKey, TrustAnchors,
};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const NOW: u64 = 1_789_000_000;
const MESSAGE: &[u8] = b"client_random || server_random || ServerECDHParams";

fn pki(kind: KeyKind) -> &'static TestPki {
    static P256: OnceLock<TestPki> = OnceLock::new();
    static RSA2048: OnceLock<TestPki> = OnceLock::new();
    let cell = match kind {
        KeyKind::P256 => &P256,
        KeyKind::Rsa2048 => &RSA2048,
        KeyKind::Rsa4096 => unreachable!("RSA-4096 uses a lone key: its PKI takes seconds per key"),
    };
    cell.get_or_init(|| generate(1, kind, &[], NOW, 1).expect("generate"))
}

/// The signing key and the verifying key as the engine gets them: from PEM files and from the
/// validated peer chain.
fn key_pair(kind: KeyKind) -> (SigningKey, PeerPublicKey) {
    if kind == KeyKind::Rsa4096 {
        static KEY: OnceLock<fastshake_pki::generate::GeneratedKey> = OnceLock::new();
        let key = KEY.get_or_init(|| generate_key(KeyKind::Rsa4096).expect("RSA-4096 key"));
        let signing = SigningKey::from_pkcs8_pem(key.pkcs8_pem.as_bytes()).unwrap();
        return (signing, PeerPublicKey::from_spki_der(&key.spki_der).unwrap());
    }
    let pki = pki(kind);
    let ours = pki.server_certified_key().expect("server key");
    let anchors = TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap();
    let theirs = verify_server_chain(&ours.chain, &anchors, NOW, Some("localhost")).unwrap().key;
    (ours.key, theirs)
}

const KINDS: [KeyKind; 3] = [KeyKind::P256, KeyKind::Rsa2048, KeyKind::Rsa4096];

#[test]
fn every_scheme_round_trips_for_every_key_kind() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for kind in KINDS {
        let (signing, public) = key_pair(kind);
        assert_eq!(signing.algorithm(), public.algorithm());
        assert_eq!(signing.schemes(), public.schemes());
        let expected_bits = match kind {
            KeyKind::P256 => 256,
            KeyKind::Rsa2048 => 2048,
            KeyKind::Rsa4096 => 4096,
        };
        assert_eq!(signing.bits(), expected_bits);
        for &scheme in signing.schemes() {
            let signature = signing.sign(scheme, MESSAGE, &mut rng).expect("sign");
            assert!(signature.len() <= signing.max_signature_len());
            verify_signature(&public, scheme, MESSAGE, &signature)
                .unwrap_or_else(|e| panic!("{kind} {scheme}: {e}"));
            let mut changed = MESSAGE.to_vec();
            changed[0] ^= 0x80;
            let error = verify_signature(&public, scheme, &changed, &signature).unwrap_err();
            assert_eq!(error, PkiError::BadSignature(scheme));
            assert_eq!(error.alert_code(), alert::DECRYPT_ERROR);
        }
    }
}

#[test]
fn ecdsa_signatures_are_der_and_rsa_signatures_fill_the_modulus() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (p256, _) = key_pair(KeyKind::P256);
    let signature = p256.sign(SignatureScheme::EcdsaSecp256r1Sha256, MESSAGE, &mut rng).unwrap();
    // ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } (TLS 1.2 carries DER, not r||s).
    // Each INTEGER holds at most 32 bytes plus a sign byte, so at most 2 + 2 * (2 + 33) = 72.
    assert!(signature.len() <= 72, "{}", signature.len());
    assert_eq!(signature[0], 0x30);
    assert_eq!(usize::from(signature[1]) + 2, signature.len());
    assert_eq!(signature[2], 0x02, "r is an INTEGER");
    let r_len = usize::from(signature[3]);
    assert!((1..=33).contains(&r_len));
    assert_eq!(signature[4 + r_len], 0x02, "s is an INTEGER");
    let s_len = usize::from(signature[5 + r_len]);
    assert!((1..=33).contains(&s_len));
    assert_eq!(6 + r_len + s_len, signature.len(), "nothing after s");
    let (rsa, _) = key_pair(KeyKind::Rsa2048);
    for scheme in [SignatureScheme::RsaPssRsaeSha256, SignatureScheme::RsaPkcs1Sha256] {
        assert_eq!(rsa.sign(scheme, MESSAGE, &mut rng).unwrap().len(), 256);
    }
    // PKCS#1 v1.5 is deterministic, PSS is salted.
    let mut pkcs1 = |m| rsa.sign(SignatureScheme::RsaPkcs1Sha256, m, &mut rng).unwrap();
    assert_eq!(pkcs1(MESSAGE), pkcs1(MESSAGE));
    let mut pss = |m| rsa.sign(SignatureScheme::RsaPssRsaeSha256, m, &mut rng).unwrap();
    assert_ne!(pss(MESSAGE), pss(MESSAGE));
}

#[test]
fn signature_by_another_key_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for kind in [KeyKind::P256, KeyKind::Rsa2048] {
        let pki = pki(kind);
        let (_, server_public) = key_pair(kind);
        // The client's key is certified by the same CA, but it is not the server's key.
        let client = pki.client_certified_key().unwrap();
        for &scheme in client.key.schemes() {
            let signature = client.key.sign(scheme, MESSAGE, &mut rng).unwrap();
            let error = verify_signature(&server_public, scheme, MESSAGE, &signature).unwrap_err();
            assert_eq!(error.alert_code(), alert::DECRYPT_ERROR, "{kind} {scheme}");
        }
    }
}

#[test]
fn scheme_that_does_not_fit_the_key_is_refused_on_both_sides() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (p256, p256_public) = key_pair(KeyKind::P256);
    let (rsa, rsa_public) = key_pair(KeyKind::Rsa2048);
    let ecdsa = SignatureScheme::EcdsaSecp256r1Sha256;
    let pss = SignatureScheme::RsaPssRsaeSha256;
    let error = p256.sign(pss, MESSAGE, &mut rng).unwrap_err();
    assert_eq!(error, PkiError::SchemeNotForOurKey { scheme: pss, key: KeyAlgorithm::EcdsaP256 });
    assert_eq!(error.alert_code(), alert::INTERNAL_ERROR);
    assert!(rsa.sign(ecdsa, MESSAGE, &mut rng).is_err());

    let rsa_signature = rsa.sign(pss, MESSAGE, &mut rng).unwrap();
    let error = verify_signature(&p256_public, pss, MESSAGE, &rsa_signature).unwrap_err();
    assert_eq!(error, PkiError::PeerSchemeMismatch { scheme: pss, key: KeyAlgorithm::EcdsaP256 });
    assert_eq!(error.alert_code(), alert::ILLEGAL_PARAMETER);
    let ec_signature = p256.sign(ecdsa, MESSAGE, &mut rng).unwrap();
    let error = verify_signature(&rsa_public, ecdsa, MESSAGE, &ec_signature).unwrap_err();
    assert_eq!(error.alert_code(), alert::ILLEGAL_PARAMETER);
    // PSS and PKCS#1 signatures are not interchangeable.
    let pkcs1 = SignatureScheme::RsaPkcs1Sha256;
    let error = verify_signature(&rsa_public, pkcs1, MESSAGE, &rsa_signature).unwrap_err();
    assert_eq!(error, PkiError::BadSignature(pkcs1));
}

#[test]
fn scheme_code_points_are_the_tls_ones() {
    let expected = [
        (SignatureScheme::EcdsaSecp256r1Sha256, 0x0403),
        (SignatureScheme::RsaPssRsaeSha256, 0x0804),
        (SignatureScheme::RsaPkcs1Sha256, 0x0401),
    ];
    for (scheme, code) in expected {
        assert_eq!(scheme.code(), code);
        assert_eq!(SignatureScheme::from_code(code), Some(scheme));
        assert!(scheme.to_string().contains(scheme.name()));
    }
    assert_eq!(SignatureScheme::ALL.len(), expected.len());
    // Schemes we do not implement (ecdsa_secp384r1_sha384, rsa_pss_rsae_sha384, ed25519).
    for code in [0x0503, 0x0805, 0x0807, 0x0000, 0xffff] {
        assert_eq!(SignatureScheme::from_code(code), None);
    }
}

#[test]
fn key_that_does_not_match_the_leaf_is_refused() {
    let p256 = pki(KeyKind::P256);
    // The client's key with the server's chain.
    let error = CertifiedKey::from_pem(p256.server_chain_pem().as_bytes(), p256.client.key_pem.as_bytes())
        .unwrap_err();
    assert_eq!(error, PkiError::KeyMismatch);
    // An RSA key with an ECDSA chain.
    let rsa = pki(KeyKind::Rsa2048);
    let error = CertifiedKey::from_pem(p256.server_chain_pem().as_bytes(), rsa.server.key_pem.as_bytes())
        .unwrap_err();
    assert_eq!(error, PkiError::KeyMismatch);
    // The right pair reads, and carries the chain without the root.
    let ok =
        CertifiedKey::from_pem(p256.server_chain_pem().as_bytes(), p256.server.key_pem.as_bytes()).unwrap();
    assert_eq!(ok.chain, p256.server_chain());
    assert_eq!(ok.chain_der_len(), ok.chain.iter().map(|c| c.len()).sum::<usize>());
}

#[test]
fn pem_without_the_expected_sections_is_a_typed_error() {
    let p256 = pki(KeyKind::P256);
    // A certificate where a key is expected, and a key where a certificate is expected.
    assert_eq!(SigningKey::from_pkcs8_pem(p256.ca_pem().as_bytes()).unwrap_err(), PkiError::NoPrivateKey);
    let error = CertifiedKey::from_pem(p256.server.key_pem.as_bytes(), p256.server.key_pem.as_bytes());
    assert_eq!(error.unwrap_err(), PkiError::NoCertificate);
    let truncated = &p256.ca_pem()[..p256.ca_pem().len() / 2];
    assert!(matches!(TrustAnchors::from_pem(truncated.as_bytes()), Err(PkiError::Pem(_))));
    // A key in a format other than PKCS#8 is named as such.
    let sec1 = "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n";
    assert_eq!(SigningKey::from_pkcs8_pem(sec1.as_bytes()).unwrap_err(), PkiError::NoPrivateKey);
}

#[test]
fn signing_key_debug_never_shows_the_key() {
    let (key, _) = key_pair(KeyKind::P256);
    let shown = format!("{key:?}");
    assert_eq!(shown, "SigningKey(P-256 ECDSA, 256 bits)");
}

#[test]
fn rsa_keys_outside_what_ring_verifies_are_unsupported_certificates() {
    use rsa::pkcs8::EncodePublicKey;
    let small = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 1024).unwrap();
    let spki = small.to_public_key().to_public_key_der().unwrap();
    let error = PeerPublicKey::from_spki_der(spki.as_bytes()).unwrap_err();
    assert_eq!(error, PkiError::UnsupportedCertificate("RSA key of 1024 bits".into()));
    assert_eq!(error.alert_code(), alert::UNSUPPORTED_CERTIFICATE);
    // 2048 and 4096 bits are read as RSA.
    for kind in [KeyKind::Rsa2048, KeyKind::Rsa4096] {
        assert_eq!(key_pair(kind).1.algorithm(), KeyAlgorithm::Rsa);
    }
}

#[test]
fn ecdsa_signatures_are_reproducible_from_the_seed() {
    let (p256, _) = key_pair(KeyKind::P256);
    let scheme = SignatureScheme::EcdsaSecp256r1Sha256;
    let sign_with = |seed| p256.sign(scheme, MESSAGE, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    assert_eq!(sign_with(1), sign_with(1), "same seed, same signature");
    assert_ne!(sign_with(1), sign_with(2), "the RNG hedges the RFC 6979 nonce");
}

/// RSA takes no randomness from the caller: PKCS#1 v1.5 takes none at all (ring's private-key
/// operation is constant-time without blinding), so seeded runs reproduce it; a PSS salt comes
/// from ring's own OS randomness, so two PSS signatures differ whatever the seed.
#[test]
fn rsa_pkcs1_signatures_are_reproducible_and_pss_ones_are_salted() {
    let (rsa, public) = key_pair(KeyKind::Rsa2048);
    let sign_with = |scheme, seed| rsa.sign(scheme, MESSAGE, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    let pkcs1 = SignatureScheme::RsaPkcs1Sha256;
    assert_eq!(sign_with(pkcs1, 1), sign_with(pkcs1, 2), "no randomness at all");
    let pss = SignatureScheme::RsaPssRsaeSha256;
    let (a, b) = (sign_with(pss, 1), sign_with(pss, 1));
    assert_ne!(a, b, "a fresh salt each time");
    for signature in [a, b] {
        verify_signature(&public, pss, MESSAGE, &signature).unwrap();
    }
}
