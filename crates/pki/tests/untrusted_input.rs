//! Malformed PEM and DER never panic: every parser answers with a typed error.

use std::sync::OnceLock;

use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_pki::{
    verify_client_chain, verify_server_chain, verify_signature, CertDer, CertifiedKey, PeerPublicKey,
    SignatureScheme, SigningKey, TrustAnchors,
};
use proptest::prelude::*;

const NOW: u64 = 1_789_000_000;

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::P256, &[], NOW, 1).expect("generate"))
}

fn anchors() -> &'static TrustAnchors {
    static ANCHORS: OnceLock<TrustAnchors> = OnceLock::new();
    ANCHORS.get_or_init(|| TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())
}

/// Random bytes wrapped as PEM sections, so the DER parsers behind the PEM decoder get them.
fn as_pem(label: &str, bytes: &[u8]) -> String {
    use std::fmt::Write;
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = format!("-----BEGIN {label}-----\n");
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            let c = if i <= chunk.len() { B64[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' };
            text.push(c);
        }
    }
    let _ = writeln!(text, "\n-----END {label}-----");
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = TrustAnchors::from_pem(&bytes);
        let _ = CertifiedKey::from_pem(&bytes, &bytes);
        let _ = SigningKey::from_pkcs8_pem(&bytes);
        let _ = SigningKey::from_pkcs8_der(&bytes);
        let _ = PeerPublicKey::from_spki_der(&bytes);
        let cert = CertDer::from(bytes.clone());
        let _ = PeerPublicKey::from_certificate(&cert);
        let _ = TrustAnchors::from_der(std::slice::from_ref(&cert));
        prop_assert!(verify_server_chain(std::slice::from_ref(&cert), anchors(), NOW, Some("localhost")).is_err());
        prop_assert!(verify_client_chain(&[cert.clone(), cert], anchors(), NOW).is_err());
        // Random bytes as PEM bodies reach the DER parsers.
        prop_assert!(TrustAnchors::from_pem(as_pem("CERTIFICATE", &bytes).as_bytes()).is_err());
        prop_assert!(SigningKey::from_pkcs8_pem(as_pem("PRIVATE KEY", &bytes).as_bytes()).is_err());
    }

    #[test]
    fn random_signatures_never_verify(sig in proptest::collection::vec(any::<u8>(), 0..600)) {
        let key = PeerPublicKey::from_certificate(&pki().server_chain()[0]).unwrap();
        for scheme in SignatureScheme::ALL {
            prop_assert!(verify_signature(&key, scheme, b"message", &sig).is_err());
        }
    }

    /// One flipped bit anywhere in the leaf is refused (never accepted, never a panic): every
    /// byte is either signed by the issuer, the signature itself, or structure the parser checks.
    #[test]
    fn any_flipped_bit_in_the_leaf_is_refused(index in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut chain = pki().server_chain();
        let mut leaf = chain[0].to_vec();
        let at = index.index(leaf.len());
        leaf[at] ^= 1 << bit;
        chain[0] = CertDer::from(leaf);
        prop_assert!(verify_server_chain(&chain, anchors(), NOW, None).is_err());
    }

    /// Truncated PEM and DER of real certificates and keys.
    #[test]
    fn truncations_never_panic(cut in 0usize..2000) {
        let chain_pem = pki().server_chain_pem();
        let key_pem = pki().server.key_pem.as_bytes();
        let _ = CertifiedKey::from_pem(&chain_pem.as_bytes()[..cut.min(chain_pem.len())], key_pem);
        let _ = SigningKey::from_pkcs8_pem(&key_pem[..cut.min(key_pem.len())]);
        let mut chain = pki().server_chain();
        let leaf = chain[0].to_vec();
        chain[0] = CertDer::from(leaf[..cut.min(leaf.len())].to_vec());
        let result = verify_server_chain(&chain, anchors(), NOW, None);
        prop_assert_eq!(result.is_ok(), cut >= leaf.len());
    }
}
