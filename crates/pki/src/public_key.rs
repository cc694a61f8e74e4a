//! A peer's certified public key, and handshake signature verification with aws-lc-rs.

use aws_lc_rs::signature::{self, UnparsedPublicKey};
use spki::der::Decode;
use spki::ObjectIdentifier;

use crate::{CertDer, KeyAlgorithm, PkiError, SignatureScheme};

const OID_EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const OID_SECP256R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const OID_RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// A public key taken from a certificate (normally the peer's validated leaf), ready to verify
/// ServerKeyExchange and CertificateVerify signatures.
#[derive(Clone, PartialEq, Eq)]
pub struct PeerPublicKey {
    algorithm: KeyAlgorithm,
    /// The subjectPublicKey bits: an uncompressed P-256 point or a PKCS#1 RSAPublicKey, as the verifier wants.
    key: Vec<u8>,
    spki_der: Vec<u8>,
}

impl PeerPublicKey {
    /// Parses a DER SubjectPublicKeyInfo (with its outer SEQUENCE); P-256 and RSA keys only.
    pub fn from_spki_der(spki_der: &[u8]) -> Result<Self, PkiError> {
        let info = spki::SubjectPublicKeyInfoRef::from_der(spki_der)
            .map_err(|e| PkiError::MalformedCertificate(format!("subjectPublicKeyInfo: {e}")))?;
        let key = info
            .subject_public_key
            .as_bytes()
            .ok_or_else(|| PkiError::MalformedCertificate("public key bit string not byte aligned".into()))?;
        let algorithm = match info.algorithm.oid {
            OID_EC_PUBLIC_KEY => {
                let curve = info
                    .algorithm
                    .parameters_oid()
                    .map_err(|_| PkiError::UnsupportedCertificate("EC key without a named curve".into()))?;
                if curve != OID_SECP256R1 {
                    return Err(PkiError::UnsupportedCertificate(format!("EC curve {curve}")));
                }
                // The verifier takes uncompressed points only; the curve check itself happens when verifying.
                if key.len() != 65 || key.first() != Some(&0x04) {
                    return Err(PkiError::UnsupportedCertificate(
                        "P-256 key not an uncompressed point".into(),
                    ));
                }
                KeyAlgorithm::EcdsaP256
            }
            OID_RSA_ENCRYPTION => {
                // The verifier takes 2048- to 8192-bit moduli only: refuse others here, as a certificate
                // we do not support, rather than later as a signature that does not verify.
                let bits = rsa_modulus_bits(key).ok_or_else(|| {
                    PkiError::MalformedCertificate("RSA public key is not an RSAPublicKey".into())
                })?;
                if !(2048..=8192).contains(&bits) {
                    return Err(PkiError::UnsupportedCertificate(format!("RSA key of {bits} bits")));
                }
                KeyAlgorithm::Rsa
            }
            other => return Err(PkiError::UnsupportedCertificate(format!("public key algorithm {other}"))),
        };
        Ok(PeerPublicKey { algorithm, key: key.to_vec(), spki_der: spki_der.to_vec() })
    }

    /// Rebuilds a key from its algorithm and subjectPublicKey bits (what the validated-key cache
    /// keeps): the SubjectPublicKeyInfo is re-encoded in DER with the parameters RFC 5480 (named
    /// curve) and RFC 3279 (NULL for rsaEncryption) prescribe, then parsed as any other.
    pub(crate) fn from_key_bits(algorithm: KeyAlgorithm, key_bits: &[u8]) -> Result<Self, PkiError> {
        use spki::der::asn1::{AnyRef, BitStringRef};
        use spki::der::Encode;
        let (oid, parameters) = match algorithm {
            KeyAlgorithm::EcdsaP256 => (OID_EC_PUBLIC_KEY, AnyRef::from(&OID_SECP256R1)),
            KeyAlgorithm::Rsa => (OID_RSA_ENCRYPTION, AnyRef::NULL),
        };
        let malformed = |e: spki::der::Error| PkiError::MalformedCertificate(format!("cached key: {e}"));
        let info = spki::SubjectPublicKeyInfoRef {
            algorithm: spki::AlgorithmIdentifierRef { oid, parameters: Some(parameters) },
            subject_public_key: BitStringRef::from_bytes(key_bits).map_err(malformed)?,
        };
        Self::from_spki_der(&info.to_der().map_err(malformed)?)
    }

    /// The public key of a certificate, without validating the certificate.
    pub fn from_certificate(cert: &CertDer) -> Result<Self, PkiError> {
        let parsed = webpki::EndEntityCert::try_from(cert)
            .map_err(|e| PkiError::MalformedCertificate(e.to_string()))?;
        Self::from_spki_der(parsed.subject_public_key_info().as_ref())
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// The schemes this key verifies, in our order of preference.
    pub fn schemes(&self) -> &'static [SignatureScheme] {
        self.algorithm.schemes()
    }

    /// The DER SubjectPublicKeyInfo (what a cache of peer keys would store).
    pub fn spki_der(&self) -> &[u8] {
        &self.spki_der
    }

    /// Verifies a handshake signature. A scheme that does not fit the key is `illegal_parameter`,
    /// a signature that does not verify is `decrypt_error`.
    pub fn verify(&self, scheme: SignatureScheme, message: &[u8], signature: &[u8]) -> Result<(), PkiError> {
        if !self.algorithm.makes(scheme) {
            return Err(PkiError::PeerSchemeMismatch { scheme, key: self.algorithm });
        }
        let algorithm: &dyn signature::VerificationAlgorithm = match scheme {
            SignatureScheme::EcdsaSecp256r1Sha256 => &signature::ECDSA_P256_SHA256_ASN1,
            SignatureScheme::RsaPssRsaeSha256 => &signature::RSA_PSS_2048_8192_SHA256,
            SignatureScheme::RsaPkcs1Sha256 => &signature::RSA_PKCS1_2048_8192_SHA256,
        };
        UnparsedPublicKey::new(algorithm, &self.key)
            .verify(message, signature)
            .map_err(|_| PkiError::BadSignature(scheme))
    }

    /// The subjectPublicKey bits, to compare with a private key's public half.
    pub(crate) fn key_bytes(&self) -> &[u8] {
        &self.key
    }
}

impl std::fmt::Debug for PeerPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerPublicKey")
            .field("algorithm", &self.algorithm)
            .field("spki_len", &self.spki_der.len())
            .finish()
    }
}

/// Bits of the modulus of a DER `RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }`.
fn rsa_modulus_bits(der: &[u8]) -> Option<usize> {
    use spki::der::asn1::UintRef;
    use spki::der::{Reader, SliceReader};
    let mut reader = SliceReader::new(der).ok()?;
    let bits = reader
        .sequence(|seq| {
            let modulus = UintRef::decode(seq)?;
            UintRef::decode(seq)?;
            let bytes = modulus.as_bytes();
            let top = bytes.first().copied().unwrap_or(0);
            Ok((bytes.len() * 8).saturating_sub(top.leading_zeros() as usize))
        })
        .ok()?;
    reader.finish(()).ok()?;
    Some(bits)
}

/// Verifies a handshake signature (ServerKeyExchange, CertificateVerify) made by `key`'s owner.
pub fn verify_signature(
    key: &PeerPublicKey,
    scheme: SignatureScheme,
    message: &[u8],
    signature: &[u8],
) -> Result<(), PkiError> {
    key.verify(scheme, message, signature)
}
