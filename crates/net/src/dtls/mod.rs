//! DTLS 1.2 over tokio UDP sockets.
//!
//! The driver owns what a sans-IO engine must not: the socket, the clock (the process's monotonic
//! clock mapped onto [`fastshake_core::Instant`] from a base taken at start) and the OS randomness
//! that seeds each engine. Handshakes, timers, records and alerts all happen in `fastshake_dtls`.
//!
//! Each side runs as one tokio task that talks to its owner over channels: [`DtlsClient`] wraps one
//! [`Connection`](fastshake_dtls::Connection), [`DtlsServer`] wraps one
//! [`Endpoint`](fastshake_dtls::Endpoint) per worker, serving many clients. Inside a task every
//! await that can be interrupted (socket receive, timer, command) is cancel-safe, and datagrams are
//! flushed outside `select!`, so no datagram is lost to a cancelled future.
//!
//! Moving clients (seed 001): a server gives its sessions sockets as its [`MobilityMode`] says
//! (see [`crate::mobility`]) and reports moves ([`ServerEvent::PathChanged`]). A client's socket
//! is never connected, so it follows the server to a session port and sends from whatever address
//! the routing table gives it; a send that finds no route is held and tried again. A standard
//! client can instead set up a new session when the server goes silent
//! ([`ClientOptions::app_timeout`]), resending what went unanswered.
//!
//! One concern per file:
//! - `client`: [`DtlsClient`], its options and events, and the client task;
//! - `server`: [`DtlsServer`] (binding the workers and starting the tasks around them),
//!   [`ServerController`], [`ServerOptions`], [`ServerEvent`], [`ServerStats`];
//! - `worker`: one worker's loop: receive, flush, the engine's events, commands and timers;
//! - `fleet_link`: CID records passed between workers and fleet nodes, and the return paths of
//!   answers through the node a client reached;
//! - `ticket_keys`: ticket keys rotated once for every worker, or reloaded from a fleet's file;
//! - `store_link`: a worker's lookups in and puts to the shared session-ID cache;
//! - `summary`: the handshake summary line and [`Traffic`];
//! - `trace`: the trace hook and [`describe_datagram`], which `-v` traces print;
//! - `error`, `seeds`: [`DriverError`], and the OS randomness handed to the engines.
//!
//! What a worker does with its sessions' sockets (IPC, TCS) is [`crate::mobility`]'s part.
#![forbid(unsafe_code)]

mod client;
mod error;
mod fleet_link;
mod seeds;
mod server;
mod store_link;
mod summary;
mod ticket_keys;
mod trace;
mod worker;

pub use crate::mobility::MobilityMode;
pub use client::{ClientEvent, ClientOptions, DtlsClient, Reconnect};
pub use error::DriverError;
pub use seeds::{os_seed, os_ticket_key, os_ticket_keys};
pub use server::{
    DtlsServer, RecordHandler, Replies, ServerController, ServerEvent, ServerOptions, ServerStats,
    SessionHandle, WorkerStats, DEFAULT_COOKIE_ROTATION, DEFAULT_TICKET_ROTATION, MAX_WORKERS,
};
pub use store_link::STORE_TIMEOUT;
pub use summary::{cache_text, resumption_text, summary_line, Traffic};
pub use trace::{describe_datagram, DatagramTrace, Direction};

use std::io;

/// Largest UDP payload we accept; bigger datagrams cannot arrive over UDP/IPv4 anyway.
const RECEIVE_BUFFER: usize = 65_536;

fn is_icmp_error(error: &io::Error) -> bool {
    // An ICMP "port unreachable" from an earlier datagram surfaces on a later receive; it says
    // nothing the retransmission timer does not already handle.
    matches!(error.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset)
}

#[cfg(test)]
mod testing {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::time::Duration;

    pub(super) fn loopback() -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
    }

    pub(super) fn step<T>(
        what: &str,
        f: impl std::future::Future<Output = T>,
    ) -> impl std::future::Future<Output = T> {
        let what = what.to_owned();
        async move {
            tokio::time::timeout(Duration::from_secs(10), f)
                .await
                .unwrap_or_else(|_| panic!("{what} did not happen within 10 s"))
        }
    }
}
