//! Real-socket drivers for the fastshake engines. Sockets and clocks live here, never in an engine.
#![forbid(unsafe_code)]

pub mod delay;
pub mod dtls;
pub mod mobility;
pub mod sctp;
pub mod testbed;
