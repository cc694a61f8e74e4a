//! X.509 for fastshake: certified keys that sign, handshake signature verification, chain
//! validation against trust anchors, and (feature `generate`) a test PKI.
//!
//! Sans-IO like the engines: bytes in (PEM or DER), results out; the caller passes the time a
//! chain is validated at. What the DTLS engine calls:
//! - [`CertifiedKey`] (our chain and [`SigningKey`]) and [`SigningKey::sign`] for
//!   ServerKeyExchange and CertificateVerify;
//! - [`TrustAnchors`], [`verify_server_chain`], [`verify_client_chain`] for the peer's
//!   Certificate message, returning the leaf's [`PeerPublicKey`];
//! - [`verify_signature`] for the peer's handshake signatures;
//! - [`PkiError::alert_code`] for the fatal alert to send when any of these refuse.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod chain;
pub mod error;
#[cfg(feature = "generate")]
pub mod generate;
mod key;
mod public_key;
mod scheme;

pub use chain::{verify_client_chain, verify_server_chain, TrustAnchors};
pub use error::{alert, PkiError};
pub use key::{certificates_from_pem, CertifiedKey, SigningKey};
pub use public_key::{verify_signature, PeerPublicKey};
pub use scheme::{KeyAlgorithm, SignatureScheme};

/// One DER-encoded X.509 certificate.
pub type CertDer = rustls_pki_types::CertificateDer<'static>;

/// The path validator and key types this crate is built on, for callers that need them directly.
pub use rustls_pki_types as pki_types;
