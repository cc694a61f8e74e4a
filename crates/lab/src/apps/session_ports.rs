//! The server socket strategies of seed 001 inside the simulator: what
//! [`MobilityMode::socket_action`] decides for a session, carried out on simulated ports.
//!
//! The real driver (`fastshake_net`) opens sockets; a simulated host opens a port by asking for
//! it through [`fastshake_sim::apps::App::poll_bind`]. A temporary connected socket (TCS's
//! handshake) needs nothing here: the simulator hands the app every datagram of its welcome
//! port and the endpoint tells the clients apart by address.

use fastshake_dtls::{ConnectionHandle, Endpoint, Event, MobilityMode, SocketAction};
use std::net::{IpAddr, SocketAddr};

/// The session ports of one simulated DTLS server.
#[derive(Debug)]
pub struct SessionPorts {
    mode: MobilityMode,
    first_port: u16,
    next_port: u16,
    /// Ports given to sessions that the simulator has not opened yet.
    to_open: Vec<u16>,
    /// Sessions given a port of their own (IPC) or moved to one (TCS).
    pub own_ports: u32,
    /// Why sessions stayed on the welcome port, in order (a client without `port_move`, a move
    /// the engine refused).
    pub stayed: Vec<String>,
}

impl SessionPorts {
    /// Ports for a server in `mode`; sessions get `first_port`, the next one, and so on
    /// (wrapping back to `first_port`).
    pub fn new(mode: MobilityMode, first_port: u16) -> SessionPorts {
        SessionPorts {
            mode,
            first_port,
            next_port: first_port,
            to_open: Vec::new(),
            own_ports: 0,
            stayed: Vec::new(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> MobilityMode {
        self.mode
    }

    /// Before the application sees `event` of session `handle`: gives the session the port the
    /// mode asks for, on `ip` (the server's address). The port is opened at once: a TCS client
    /// sends there before the session sends from it.
    pub fn after_event(
        &mut self,
        endpoint: &mut Endpoint,
        handle: ConnectionHandle,
        event: &Event,
        ip: IpAddr,
    ) {
        let Some(action) = endpoint.connection(handle).and_then(|c| self.mode.socket_action(event, c)) else {
            return;
        };
        match action {
            // IPC: the ServerHello already leaves from the session's own port.
            SocketAction::OpenOwn => {
                let local = self.open(ip);
                endpoint.set_local(handle, local);
                self.own_ports += 1;
            }
            // TCS's connected socket: nothing to open in the simulator.
            SocketAction::OpenTemporary { .. } => {}
            // TCS: announced by the engine until the client uses it.
            SocketAction::MoveToOwn => {
                let local = self.open(ip);
                match endpoint.move_to(handle, local) {
                    Ok(()) => self.own_ports += 1,
                    Err(e) => self.stayed.push(format!("the engine refused the move: {e}")),
                }
            }
            SocketAction::StayOnWelcomePort(reason) => self.stayed.push(reason.to_owned()),
        }
    }

    fn open(&mut self, ip: IpAddr) -> SocketAddr {
        let port = self.next_port;
        self.next_port = self.next_port.wrapping_add(1).max(self.first_port);
        self.to_open.push(port);
        SocketAddr::new(ip, port)
    }

    /// A port to open before the next datagram goes out (see `App::poll_bind`).
    pub fn poll_bind(&mut self) -> Option<u16> {
        self.to_open.pop()
    }
}
