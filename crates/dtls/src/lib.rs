//! Sans-IO DTLS 1.2 (RFC 6347) with pre-shared keys (RFC 4279), extended master secret
//! (RFC 7627), stateless cookies and one flight engine for retransmission.
//!
//! - [`Connection`]: one session, client or server. Datagrams and time go in
//!   ([`Connection::handle_datagram`], [`Connection::handle_timeout`]); datagrams, the next
//!   deadline and events come out ([`Connection::poll_transmit`], [`Connection::poll_timeout`],
//!   [`Connection::poll_event`]).
//! - [`Endpoint`]: the server side. It answers ClientHellos statelessly with a
//!   HelloVerifyRequest and creates a [`Connection`] only once a client returns a valid cookie.
//!
//! Randomness is a seed the caller passes in, so every run is reproducible.
#![forbid(unsafe_code)]

mod alert;
mod codec;
mod config;
mod connection;
mod crypto;
mod endpoint;
mod error;
mod flight;
mod handshake;
mod record;
mod state;
mod suite;

#[doc(hidden)]
pub mod fuzzing;

pub use alert::{AlertDescription, AlertLevel};
pub use config::{ClientConfig, Psk, ServerConfig, DEFAULT_MTU, MIN_MTU};
pub use connection::{Connection, Event, HandshakeSummary, Role, Stats};
pub use endpoint::{ConnectionHandle, Endpoint, EndpointStats};
pub use error::Error;
pub use fastshake_core::{Instant, Transmit};
pub use suite::CipherSuite;
