//! Deterministic discrete-event network simulator in virtual time.
#![forbid(unsafe_code)]

pub mod mac;
pub mod radio;
