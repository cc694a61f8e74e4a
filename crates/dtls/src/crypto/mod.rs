//! Key derivation and record protection, built on ring and RustCrypto.

mod aead;
mod prf;

pub(crate) use aead::{open_in_place, seal_in_place, DirectionKeys, TrafficKeys};
pub(crate) use prf::{prf_sha256, MasterSecret};
