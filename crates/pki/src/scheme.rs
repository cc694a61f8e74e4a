//! TLS signature schemes and the key algorithms that make them.

use std::fmt;

/// The signature schemes of the certificate suites, with their TLS code points
/// (`SignatureAndHashAlgorithm` in TLS 1.2, RFC 8446 §4.2.3 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignatureScheme {
    /// `ecdsa_secp256r1_sha256` (0x0403): DER-encoded ECDSA-Sig-Value, as TLS 1.2 carries it.
    EcdsaSecp256r1Sha256,
    /// `rsa_pss_rsae_sha256` (0x0804): RSASSA-PSS, MGF1-SHA-256, 32-byte salt, rsaEncryption key.
    RsaPssRsaeSha256,
    /// `rsa_pkcs1_sha256` (0x0401): RSASSA-PKCS1-v1_5 with SHA-256.
    RsaPkcs1Sha256,
}

impl SignatureScheme {
    /// Every scheme, in our order of preference.
    pub const ALL: [SignatureScheme; 3] = [
        SignatureScheme::EcdsaSecp256r1Sha256,
        SignatureScheme::RsaPssRsaeSha256,
        SignatureScheme::RsaPkcs1Sha256,
    ];

    /// The TLS code point.
    pub const fn code(self) -> u16 {
        match self {
            SignatureScheme::EcdsaSecp256r1Sha256 => 0x0403,
            SignatureScheme::RsaPssRsaeSha256 => 0x0804,
            SignatureScheme::RsaPkcs1Sha256 => 0x0401,
        }
    }

    /// The scheme for a TLS code point, if it is one we implement.
    pub const fn from_code(code: u16) -> Option<Self> {
        match code {
            0x0403 => Some(SignatureScheme::EcdsaSecp256r1Sha256),
            0x0804 => Some(SignatureScheme::RsaPssRsaeSha256),
            0x0401 => Some(SignatureScheme::RsaPkcs1Sha256),
            _ => None,
        }
    }

    /// The IANA name.
    pub const fn name(self) -> &'static str {
        match self {
            SignatureScheme::EcdsaSecp256r1Sha256 => "ecdsa_secp256r1_sha256",
            SignatureScheme::RsaPssRsaeSha256 => "rsa_pss_rsae_sha256",
            SignatureScheme::RsaPkcs1Sha256 => "rsa_pkcs1_sha256",
        }
    }

    /// The key algorithm that makes this scheme.
    pub const fn key_algorithm(self) -> KeyAlgorithm {
        match self {
            SignatureScheme::EcdsaSecp256r1Sha256 => KeyAlgorithm::EcdsaP256,
            SignatureScheme::RsaPssRsaeSha256 | SignatureScheme::RsaPkcs1Sha256 => KeyAlgorithm::Rsa,
        }
    }
}

impl fmt::Display for SignatureScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (0x{:04x})", self.name(), self.code())
    }
}

/// The kind of a certified public/private key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyAlgorithm {
    /// ECDSA on secp256r1.
    EcdsaP256,
    /// RSA with an rsaEncryption key (any modulus ring accepts: 2048 to 8192 bits to verify).
    Rsa,
}

impl KeyAlgorithm {
    /// The schemes a key of this kind makes, in our order of preference.
    pub const fn schemes(self) -> &'static [SignatureScheme] {
        match self {
            KeyAlgorithm::EcdsaP256 => &[SignatureScheme::EcdsaSecp256r1Sha256],
            // PSS first: TLS 1.3 only knows it, and OpenSSL prefers it for TLS 1.2 too.
            KeyAlgorithm::Rsa => &[SignatureScheme::RsaPssRsaeSha256, SignatureScheme::RsaPkcs1Sha256],
        }
    }

    /// The TLS `ClientCertificateType` (RFC 5246 §7.4.4, RFC 4492 §5.5) a CertificateRequest
    /// lists for certificates with keys of this kind: `rsa_sign` (1) or `ecdsa_sign` (64).
    pub const fn client_certificate_type(self) -> u8 {
        match self {
            KeyAlgorithm::EcdsaP256 => 64,
            KeyAlgorithm::Rsa => 1,
        }
    }

    /// Whether a key of this kind makes `scheme`.
    pub fn makes(self, scheme: SignatureScheme) -> bool {
        scheme.key_algorithm() == self
    }
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyAlgorithm::EcdsaP256 => "P-256 ECDSA",
            KeyAlgorithm::Rsa => "RSA",
        })
    }
}
