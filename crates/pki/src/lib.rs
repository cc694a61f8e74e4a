//! X.509 for fastshake: certified keys that sign, handshake signature verification, chain
//! validation against trust anchors, and (feature `generate`) a test PKI.
//!
//! Sans-IO like the engines: bytes in (PEM or DER), results out; the caller passes the time a
//! chain is validated at. What the DTLS engine calls:
//! - [`CertifiedKey`] (our chain and [`SigningKey`]) and [`SigningKey::sign`] for
//!   ServerKeyExchange and CertificateVerify;
//! - [`TrustAnchors`], [`verify_server_chain`], [`verify_client_chain`] for the peer's
//!   Certificate message, returning the leaf's [`PeerPublicKey`] in a [`VerifiedChain`] with
//!   the anchor it led to and how long it is valid;
//! - [`ValidatedKeyCache`] (seed 003 §IV-C) in front of those two, so a chain seen before skips
//!   validation but for its time window and anchor;
//! - [`verify_signature`] for the peer's handshake signatures;
//! - [`PkiError::alert_code`] for the fatal alert to send when any of these refuse.
//!
//! | refusal | [`PkiError`] | alert (RFC 5246 §7.2.2) |
//! | --- | --- | --- |
//! | no certificate from the peer | `NoPeerCertificate` | handshake_failure (40) |
//! | wrong name, bad signature on a certificate, malformed DER | `NameMismatch`, `BadCertificateSignature`, `MalformedCertificate` | bad_certificate (42) |
//! | (extended) key usage, key type, critical extension | `WrongKeyUsage`, `UnsupportedCertificate` | unsupported_certificate (43) |
//! | expired or not yet valid at the time passed in | `Expired`, `NotYetValid` | certificate_expired (45) |
//! | other path-validation refusals | `CertificateUnknown` | certificate_unknown (46) |
//! | a signature scheme that does not fit the peer's key | `PeerSchemeMismatch` | illegal_parameter (47) |
//! | chain not issued by a trust anchor | `UnknownCa` | unknown_ca (48) |
//! | ServerKeyExchange / CertificateVerify signature does not verify | `BadSignature` | decrypt_error (51) |
//! | our own PEM, key, name or signing failed | the rest | internal_error (80) |
//!
//! Signing randomness: ECDSA signs with RFC 6979 nonces hedged by the caller's (seeded) RNG, so
//! seeded runs reproduce their signatures; an ECDSA signature's DER length varies (at most 72
//! bytes). RSA signs with ring, whose PSS salts come from the OS (see [`SigningKey::sign`]);
//! PKCS#1 v1.5 signatures take no randomness.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod chain;
pub mod error;
#[cfg(feature = "generate")]
pub mod generate;
mod key;
mod key_cache;
mod public_key;
mod scheme;

pub use chain::{
    subject_text, verify_client_chain, verify_server_chain, AnchorId, TrustAnchors, VerifiedChain,
};
pub use error::{alert, PkiError};
pub use key::{certificates_from_pem, CertifiedKey, RngCompat, SigningKey};
pub use key_cache::{
    verify_client_chain_cached, verify_server_chain_cached, ChainDigest, ChainUsage, KeyCacheStats,
    ValidatedKey, ValidatedKeyCache, Validation,
};
pub use public_key::{verify_signature, PeerPublicKey};
pub use scheme::{KeyAlgorithm, SignatureScheme};

/// One DER-encoded X.509 certificate.
pub type CertDer = rustls_pki_types::CertificateDer<'static>;

/// The path validator and key types this crate is built on, for callers that need them directly.
pub use rustls_pki_types as pki_types;
