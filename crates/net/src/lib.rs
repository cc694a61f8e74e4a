//! Real-socket drivers for the fastshake engines: DTLS and SCTP over tokio UDP sockets, with the
//! server socket strategies of seed 001. Sockets, clocks and OS randomness live here, never in an
//! engine.
#![forbid(unsafe_code)]

pub mod cache_file;
pub mod clock;
mod cookie_schedule;
#[cfg(feature = "cli")]
pub mod credentials;
pub mod dtls;
pub mod fleet;
pub mod icmp;
mod listen;
pub mod mobility;
pub mod sctp;
pub mod session_store;
pub mod udp;
pub mod webrtc;

pub use clock::Clock;
