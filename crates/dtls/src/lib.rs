//! Sans-IO DTLS 1.2 (RFC 6347) with pre-shared keys (RFC 4279), extended master secret
//! (RFC 7627), stateless cookies and one flight engine for retransmission.
//!
//! - [`Connection`]: one session, client or server. Datagrams and time go in
//!   ([`Connection::handle_datagram`], [`Connection::handle_timeout`]); datagrams, the next
//!   deadline and events come out ([`Connection::poll_transmit`], [`Connection::poll_timeout`],
//!   [`Connection::poll_event`]).
//! - [`Endpoint`]: the server side. It answers ClientHellos statelessly with a
//!   HelloVerifyRequest (a [`fastshake_core::CookieMac`] over the client's address and port and
//!   the ClientHello's version, random, session_id, cipher_suites and compression_methods) and
//!   creates a [`Connection`] only once a client returns a valid cookie.
//!
//! Randomness is a seed the caller passes in, so every run is reproducible.
//!
//! # Behaviour worth knowing
//! - Suites: `TLS_PSK_WITH_AES_128_CCM_8` and `TLS_PSK_WITH_AES_128_GCM_SHA256`. The extended
//!   master secret is always offered and used when the peer supports it; without it the
//!   handshake falls back to the RFC 5246 master secret unless
//!   `require_extended_master_secret` is set ([`HandshakeSummary::extended_master_secret`]
//!   says which).
//! - Renegotiation is refused: the client sends the empty-renegotiation-info SCSV, the server
//!   echoes an empty `renegotiation_info`; a HelloRequest or a ClientHello inside an established
//!   session gets a `no_renegotiation` warning and the session goes on.
//! - Records that fail authentication in an established session are dropped silently
//!   (RFC 6347 §4.1.2.7). While waiting for the peer's Finished, a protected handshake record
//!   that fails means the keys differ (a wrong PSK): the session fails with `decrypt_error`
//!   (RFC 4279 §2) instead of retransmitting until the timeout. An unknown identity gets
//!   `unknown_psk_identity`.
//! - Retransmission: whole flights are resent, packed afresh with new record sequence numbers,
//!   on a timer that starts at `initial_retransmit`, doubles, and stops at `max_retransmit`; the
//!   handshake fails after `handshake_timeout`. The server's last flight is not timed: it is
//!   resent when the client's retransmitted Finished shows it was lost, and kept until the
//!   client's first protected record (or the handshake timeout) proves it arrived.
//! - Small MTUs: handshake messages are fragmented to the configured MTU (at least
//!   [`MIN_MTU`]); the endpoint also reassembles fragmented ClientHellos in a 16-entry table.
//!   A 127-byte IEEE 802.15.4 frame less 23 bytes of MAC header and FCS and 8 bytes of
//!   6LoWPAN-compressed IPv6/UDP header leaves an MTU of 96 bytes; the tests run at 96 and 64.
//! - A new ClientHello from the address of an existing session (RFC 6347 §4.2.8) is answered
//!   with a HelloVerifyRequest and leaves the session alone; once it returns a valid cookie, the
//!   old session ends with [`Error::Superseded`] and the new handshake proceeds.
//! - Footprint: an established session is a [`Connection`] of 272 bytes with nothing on the
//!   heap (client); the handshake-only state is boxed and freed when the handshake completes.
//!   Keys are kept raw and the AES key schedule is expanded per record.
//!   [`Connection::seal_into`] and [`Connection::open_in_place`] allocate nothing.
//!
//! # Extension points
//! Suites are rows of a `SuiteParams` table naming a `KeyExchange` (PSK today; ECDHE with
//! certificates adds variants) and a record cipher; extensions are parsed into one struct with
//! unknown ones skipped; the handshake state enum has one variant per awaited message, so the
//! certificate, resumption and Connection ID work adds variants and table rows rather than
//! reshaping the engine.
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
mod session;
mod state;
mod suite;

#[doc(hidden)]
pub mod fuzzing;

pub use alert::{AlertDescription, AlertLevel};
pub use config::{ClientConfig, Psk, ServerConfig, WallClock, DEFAULT_MTU, MIN_MTU};
pub use connection::{Connection, Event, HandshakeSummary, Role, Stats};
pub use endpoint::{ConnectionHandle, Endpoint, EndpointStats};
pub use error::Error;
pub use fastshake_core::{Instant, Transmit};
pub use fastshake_pki::{CertifiedKey, TrustAnchors};
pub use session::{ClientAuth, ClientSession, Resumption, SessionCacheConfig, TicketKey, TicketKeys};
pub use suite::CipherSuite;
