//! The papers' experiments as a library, our figures beside theirs (`fastshake lab`): one module
//! per experiment, numbered E1 to E6 as in the report, and [`apps`], the applications that run the
//! DTLS and SCTP engines inside the simulator (the experiments' and any scenario file's).
//!
//! Each experiment's `run` takes a plain options struct (`e1::RunOptions`, ...); the command
//! line that fills them is the `fastshake` binary's.
#![forbid(unsafe_code)]

pub mod apps;
pub mod chaos;
pub mod chaos_real;
pub mod e1;
pub mod e2;
pub mod e3;
pub mod e4;
pub mod mac_handshake;
pub mod pki;
pub mod report;
mod runner;
