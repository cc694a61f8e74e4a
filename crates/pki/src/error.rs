//! One error type for everything the crate refuses, each mapped to the TLS alert the engine sends.

use crate::scheme::{KeyAlgorithm, SignatureScheme};

/// TLS alert descriptions (RFC 5246 §7.2.2) that [`PkiError::alert_code`] returns.
pub mod alert {
    /// No acceptable certificate (RFC 5246 §7.4.6: a required client certificate is missing).
    pub const HANDSHAKE_FAILURE: u8 = 40;
    /// A certificate was corrupt, carried a bad signature or the wrong name.
    pub const BAD_CERTIFICATE: u8 = 42;
    /// A certificate of an unsupported type, key or usage.
    pub const UNSUPPORTED_CERTIFICATE: u8 = 43;
    /// A certificate has expired or is not yet valid.
    pub const CERTIFICATE_EXPIRED: u8 = 45;
    /// Some other issue with the certificate made it unacceptable.
    pub const CERTIFICATE_UNKNOWN: u8 = 46;
    /// A field was out of range or inconsistent (a scheme that does not fit the peer's key).
    pub const ILLEGAL_PARAMETER: u8 = 47;
    /// No trust anchor issued the chain.
    pub const UNKNOWN_CA: u8 = 48;
    /// A handshake signature did not verify.
    pub const DECRYPT_ERROR: u8 = 51;
    /// Our own configuration is unusable (bad PEM, key, name): not the peer's fault.
    pub const INTERNAL_ERROR: u8 = 80;
}

/// Why a certificate, key or signature was refused.
///
/// Variants above the "peer" line come from our own configuration; the others from what the peer
/// sent, and [`PkiError::alert_code`] names the fatal alert RFC 5246 prescribes for them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PkiError {
    // --- our own configuration ---
    /// PEM text that does not decode.
    #[error("invalid PEM: {0}")]
    Pem(String),
    /// The PEM input holds no `CERTIFICATE` section.
    #[error("no certificate in the PEM input")]
    NoCertificate,
    /// The PEM input holds no PKCS#8 (`PRIVATE KEY`) section.
    #[error("no PKCS#8 private key (\"BEGIN PRIVATE KEY\") in the PEM input")]
    NoPrivateKey,
    /// A PKCS#8 key that is neither P-256 ECDSA nor RSA of 2048 to 4096 bits.
    #[error("unsupported private key (need P-256 ECDSA or RSA 2048..4096 in PKCS#8): {0}")]
    UnsupportedPrivateKey(String),
    /// The private key is not the one certified by the leaf certificate.
    #[error("the private key does not match the leaf certificate's public key")]
    KeyMismatch,
    /// A trust anchor certificate that cannot be used.
    #[error("unusable trust anchor: {0}")]
    BadTrustAnchor(String),
    /// A server name that is neither a DNS name nor an IP address.
    #[error("invalid server name {0:?}: neither a DNS name nor an IP address")]
    InvalidServerName(String),
    /// We were asked to sign with a scheme our key cannot make.
    #[error("cannot sign {scheme} with a {key} key")]
    SchemeNotForOurKey {
        /// The requested scheme.
        scheme: SignatureScheme,
        /// Our key.
        key: KeyAlgorithm,
    },
    /// The crypto library refused to sign.
    #[error("signing failed")]
    SigningFailed,
    /// The test PKI generator failed.
    #[error("test PKI generation failed: {0}")]
    Generate(String),

    // --- what the peer sent ---
    /// The peer sent no certificate.
    #[error("the peer sent no certificate")]
    NoPeerCertificate,
    /// The chain does not lead to any configured trust anchor.
    #[error("certificate chain issued by an unknown CA")]
    UnknownCa,
    /// A certificate in the chain expired before `now`.
    #[error("certificate expired on {} (checked at {})", utc(*not_after), utc(*now))]
    Expired {
        /// The time the check was made for (unix seconds).
        now: u64,
        /// The certificate's notAfter (unix seconds).
        not_after: u64,
    },
    /// A certificate in the chain is not valid yet at `now`.
    #[error("certificate not valid before {} (checked at {})", utc(*not_before), utc(*now))]
    NotYetValid {
        /// The time the check was made for (unix seconds).
        now: u64,
        /// The certificate's notBefore (unix seconds).
        not_before: u64,
    },
    /// The leaf does not name the server we meant to reach.
    #[error("certificate is not valid for the name {0:?}")]
    NameMismatch(String),
    /// A certificate's signature does not verify under its issuer's key.
    #[error("bad signature on a certificate of the chain")]
    BadCertificateSignature,
    /// The leaf's SHA-256 fingerprint is not the one signalled for the peer (RFC 8122).
    #[error("the certificate's SHA-256 fingerprint is not the one signalled for the peer")]
    FingerprintMismatch,
    /// A certificate that does not parse as X.509 DER.
    #[error("malformed certificate: {0}")]
    MalformedCertificate(String),
    /// The leaf's (extended) key usage does not allow the role it is used for.
    #[error("the certificate's key usage does not allow {required}")]
    WrongKeyUsage {
        /// `serverAuth`, `clientAuth` (extended key usage) or `digitalSignature` (key usage).
        required: &'static str,
    },
    /// A certificate of a kind we do not accept (its key, signature algorithm or a critical extension).
    #[error("unsupported certificate: {0}")]
    UnsupportedCertificate(String),
    /// Any other reason the path validator refused the chain.
    #[error("certificate refused: {0}")]
    CertificateUnknown(String),
    /// The peer signed with a scheme its certified key cannot make.
    #[error("the peer used {scheme} with a {key} key")]
    PeerSchemeMismatch {
        /// The scheme the peer announced.
        scheme: SignatureScheme,
        /// The peer's certified key.
        key: KeyAlgorithm,
    },
    /// A handshake signature (ServerKeyExchange, CertificateVerify) that does not verify.
    #[error("handshake signature does not verify ({0})")]
    BadSignature(SignatureScheme),
}

impl PkiError {
    /// The fatal TLS alert (RFC 5246 §7.2.2) the engine sends for this error.
    pub fn alert_code(&self) -> u8 {
        use alert::*;
        match self {
            PkiError::Pem(_)
            | PkiError::NoCertificate
            | PkiError::NoPrivateKey
            | PkiError::UnsupportedPrivateKey(_)
            | PkiError::KeyMismatch
            | PkiError::BadTrustAnchor(_)
            | PkiError::InvalidServerName(_)
            | PkiError::SchemeNotForOurKey { .. }
            | PkiError::SigningFailed
            | PkiError::Generate(_) => INTERNAL_ERROR,
            PkiError::NoPeerCertificate => HANDSHAKE_FAILURE,
            PkiError::UnknownCa => UNKNOWN_CA,
            PkiError::Expired { .. } | PkiError::NotYetValid { .. } => CERTIFICATE_EXPIRED,
            PkiError::NameMismatch(_)
            | PkiError::BadCertificateSignature
            | PkiError::MalformedCertificate(_)
            | PkiError::FingerprintMismatch => BAD_CERTIFICATE,
            PkiError::WrongKeyUsage { .. } | PkiError::UnsupportedCertificate(_) => UNSUPPORTED_CERTIFICATE,
            PkiError::CertificateUnknown(_) => CERTIFICATE_UNKNOWN,
            PkiError::PeerSchemeMismatch { .. } => ILLEGAL_PARAMETER,
            PkiError::BadSignature(_) => DECRYPT_ERROR,
        }
    }

    /// The alert's name as RFC 5246 spells it, for messages and logs.
    pub fn alert_name(&self) -> &'static str {
        match self.alert_code() {
            alert::HANDSHAKE_FAILURE => "handshake_failure",
            alert::BAD_CERTIFICATE => "bad_certificate",
            alert::UNSUPPORTED_CERTIFICATE => "unsupported_certificate",
            alert::CERTIFICATE_EXPIRED => "certificate_expired",
            alert::CERTIFICATE_UNKNOWN => "certificate_unknown",
            alert::ILLEGAL_PARAMETER => "illegal_parameter",
            alert::UNKNOWN_CA => "unknown_ca",
            alert::DECRYPT_ERROR => "decrypt_error",
            _ => "internal_error",
        }
    }
}

/// Unix seconds as a UTC date ("Fri, 01 Jan 2021 00:00:00 GMT"); as seconds beyond the years
/// such a date can name (X.509 dates end with 9999).
fn utc(unix_secs: u64) -> String {
    const END_OF_9999: u64 = 253_402_300_799;
    if unix_secs > END_OF_9999 {
        return format!("{unix_secs} s after 1970");
    }
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_errors_give_dates() {
        let expired = PkiError::Expired { now: 1_796_034_364, not_after: 1_609_459_200 };
        assert_eq!(
            expired.to_string(),
            "certificate expired on Fri, 01 Jan 2021 00:00:00 GMT (checked at Mon, 30 Nov 2026 10:26:04 GMT)"
        );
        assert!(utc(u64::MAX).ends_with("s after 1970"), "no panic past the year 9999");
    }
}
