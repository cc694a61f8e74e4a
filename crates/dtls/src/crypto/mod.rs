//! Key derivation and record protection, built on ring and RustCrypto: DTLS 1.2's PRF and
//! AEADs, and DTLS 1.3's key schedule and AEADs ([`tls13`]).

mod aead;
mod prf;
pub mod tls13;

pub(crate) use aead::{open_in_place, seal_in_place, DirectionKeys, TrafficKeys};
pub(crate) use prf::{prf_sha256, MasterSecret};
