//! WebRTC data channels, sans-IO, on the project's DTLS and SCTP engines.
//!
//! - [`stun`]: STUN messages (RFC 8489) with MESSAGE-INTEGRITY and FINGERPRINT;
//! - [`ice`]: the answerer's ICE agent, lite (RFC 8445 §2.5) or full and controlled, with
//!   consent freshness (RFC 7675);
//! - [`demux`]: which protocol a datagram on the shared socket belongs to (RFC 7983);
//! - [`sdp`]: the data-channel subset of SDP offer/answer (RFC 8866, RFC 8841, JSEP);
//! - [`dcep`]: the Data Channel Establishment Protocol (RFC 8832);
//! - [`sped`]: DTLS in STUN (draft-hancke-webrtc-sped), the answerer's bookkeeping;
//! - [`peer`]: one session as the answerer runs it, ICE, DTLS, SCTP and DCEP together;
//! - [`server`]: many sessions on one socket, each made from a browser's offer;
//! - [`client`]: the offering side, for fastshake to fastshake and tests.
//!
//! Like the engines, nothing here opens a socket, reads a clock or draws OS randomness: time
//! comes in as [`Instant`], randomness as bytes the caller supplies.
#![forbid(unsafe_code)]

pub use fastshake_core::Instant;

mod channels;
pub mod client;
pub mod dcep;
pub mod demux;
mod dtls_side;
pub mod ice;
pub mod peer;
pub mod sdp;
pub mod server;
pub mod sped;
pub mod stun;
