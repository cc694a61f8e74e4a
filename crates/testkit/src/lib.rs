//! What the tests of the fastshake workspace share, and nothing a user of the engines needs
//! (a dev-dependency only):
//!
//! - [`dtls::Pair`]: a DTLS client `Connection` and server `Endpoint` joined by an in-memory
//!   network on virtual time, and [`sctp::Pair`], the same for two SCTP endpoints. Both speak
//!   the vocabulary of [`net`]: every datagram passes a [`net::Filter`] that decides its
//!   [`net::Fate`] (delivered, lost, copied, late) and lands in a log.
//! - [`mutation`]: deterministic mutations of a fuzz target's seeds, for replaying corpora in
//!   `cargo test`.
//! - [`peers`]: real processes (`fastshake` itself, OpenSSL, GnuTLS, usrsctp, pion) for the
//!   command-line interop tests, each killed and reaped when its guard drops, every wait bounded.
//!
//! The engines' own unit tests cannot use this crate: a dev-dependency on it would link a
//! second copy of the engine, whose types differ from the ones under test.

#![forbid(unsafe_code)]

pub mod dtls;
pub mod mutation;
pub mod net;
pub mod peers;
pub mod sctp;
