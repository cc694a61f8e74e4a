//! How a server gives its sessions sockets so that clients can move (seed 001, Sections II–IV),
//! decided once, sans-IO: the driver (real sockets, or the simulator's) asks
//! [`MobilityMode::socket_action`] after each event of a session and carries the answer out.
//!
//! - [`MobilityMode::Standard`]: one welcome socket; sessions are keyed by the client's address,
//!   so a client that moves has to set up a new session.
//! - [`MobilityMode::Ipc`] (Implicit Port Communication, seed 001 §III-A): once a client has
//!   returned a valid cookie, its session gets a socket of its own on a new port; the ServerHello
//!   already comes from there, and every later datagram of the session arrives there, whatever
//!   its source.
//! - [`MobilityMode::Tcs`] (Temporary Connected Socket, seed 001 §III-B): the handshake runs over
//!   a socket bound to the welcome port and connected to the client (the kernel hands it that
//!   client's datagrams); once the session is established the server announces a port of its own
//!   in a protected record and drops the temporary socket when the client has used the new port.
//! - [`MobilityMode::Cid`]: one socket for all; records carry a connection ID (RFC 9146).

use crate::config::Mobility;
use crate::connection::{Connection, Event};
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

/// Length of the connection IDs a CID server issues. 8 bytes (64 random bits): an off-path
/// attacker cannot guess a live one, and random IDs do not collide for any session count a server
/// holds; the cost is 8 bytes in each record the client sends (RFC 9146 allows 0 to 255).
pub const SERVER_CID_LENGTH: u8 = 8;

/// How a server gives sessions their sockets, and what a client offers so it can move.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MobilityMode {
    /// Plain DTLS 1.2: one socket, sessions keyed by the client's address.
    #[default]
    Standard,
    /// Implicit Port Communication: a socket per session from the ServerHello on.
    Ipc,
    /// Temporary connected socket for the handshake, then a port of the session's own.
    Tcs,
    /// Connection IDs (RFC 9146) on one socket.
    Cid,
}

/// What the driver does with a session's sockets after one of its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SocketAction {
    /// IPC, on acceptance: open a socket of the session's own on a new port of the welcome IP and
    /// give it with `Endpoint::set_local` before the next `poll_transmit`, so the ServerHello
    /// already leaves from there.
    OpenOwn,
    /// TCS, on acceptance: open a socket on the welcome port connected to `client` for the rest of
    /// the handshake.
    OpenTemporary {
        /// The client's address.
        client: SocketAddr,
    },
    /// TCS, once established: open a port of the session's own and announce it with
    /// `Endpoint::move_to`; the temporary socket goes once the session sends from the new port.
    MoveToOwn,
    /// The session stays on the welcome socket, for this reason.
    StayOnWelcomePort(&'static str),
}

impl MobilityMode {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [MobilityMode; 4] =
        [MobilityMode::Standard, MobilityMode::Ipc, MobilityMode::Tcs, MobilityMode::Cid];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            MobilityMode::Standard => "standard",
            MobilityMode::Ipc => "ipc",
            MobilityMode::Tcs => "tcs",
            MobilityMode::Cid => "cid",
        }
    }

    /// What a server in this mode accepts: a client's new address is checked with return
    /// routability (RFC 9853) whenever the client offers it; IPC and TCS accept `port_move`
    /// (TCS needs it to announce the session's port); CID issues [`SERVER_CID_LENGTH`]-byte IDs.
    pub fn server_mobility(self) -> Mobility {
        match self {
            MobilityMode::Standard => Mobility::default(),
            MobilityMode::Ipc | MobilityMode::Tcs => {
                Mobility { return_routability_check: true, follow_server_port: true, ..Mobility::default() }
            }
            MobilityMode::Cid => Mobility {
                connection_id: Some(SERVER_CID_LENGTH),
                return_routability_check: true,
                ..Mobility::default()
            },
        }
    }

    /// What a client in this mode offers: to follow the server to the session's port (IPC, TCS)
    /// or a connection ID from the server while sending none itself (CID), each with return
    /// routability checks. Standard DTLS offers nothing (the handshake is byte for byte as before).
    pub fn client_mobility(self) -> Mobility {
        match self {
            MobilityMode::Standard => Mobility::default(),
            MobilityMode::Ipc | MobilityMode::Tcs => {
                Mobility { return_routability_check: true, follow_server_port: true, ..Mobility::default() }
            }
            MobilityMode::Cid => {
                Mobility { connection_id: Some(0), return_routability_check: true, ..Mobility::default() }
            }
        }
    }

    /// Whether a server in this mode gives sessions sockets of their own.
    pub fn has_session_sockets(self) -> bool {
        matches!(self, MobilityMode::Ipc | MobilityMode::Tcs)
    }

    /// What the driver does with session `conn`'s sockets after `event`, if anything. A client
    /// that did not offer `port_move` cannot follow the ServerHello to another port (any standard
    /// DTLS client): under IPC it is served from the welcome socket like a standard one, and under
    /// TCS it is never moved.
    pub fn socket_action(self, event: &Event, conn: &Connection) -> Option<SocketAction> {
        let can_follow = conn.negotiated_mobility().port_move;
        match (self, event) {
            (MobilityMode::Ipc, Event::Accepted) if !can_follow => {
                Some(SocketAction::StayOnWelcomePort("the client did not offer port_move"))
            }
            (MobilityMode::Ipc, Event::Accepted) => Some(SocketAction::OpenOwn),
            (MobilityMode::Tcs, Event::Accepted) => {
                Some(SocketAction::OpenTemporary { client: conn.remote() })
            }
            (MobilityMode::Tcs, Event::Connected(_)) if !can_follow => {
                Some(SocketAction::StayOnWelcomePort("the client did not offer port_move"))
            }
            (MobilityMode::Tcs, Event::Connected(_)) => Some(SocketAction::MoveToOwn),
            _ => None,
        }
    }
}

impl fmt::Display for MobilityMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MobilityMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MobilityMode::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            let known: Vec<&str> = MobilityMode::ALL.iter().map(|m| m.name()).collect();
            format!("unknown mobility mode {s:?}; known: {}", known.join(", "))
        })
    }
}
