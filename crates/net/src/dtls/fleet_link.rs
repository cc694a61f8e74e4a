//! The server's link to the other nodes of its fleet (see [`crate::fleet`]) and between its
//! own workers: CID records passed to the worker or node holding their session, and answers
//! sent back through the node a client reached.

use super::RECEIVE_BUFFER;
use crate::fleet::{CidOwner, Fleet, FrameKind, ReplayWindows};
use crate::mobility::Arrived;
use fastshake_dtls::Incoming;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// Most CID records waiting to be passed to the worker that holds their session; beyond it they
/// are dropped, as a full socket buffer would.
pub(super) const FORWARD_QUEUE: usize = 1024;

/// Clients whose answers go back through another node, at most per worker.
const MAX_RETURN_PATHS: usize = 65_536;

/// A datagram handed to the worker holding its session, and the node it came through (when
/// another node received it from the client).
pub(super) struct Passed {
    pub(super) incoming: Arrived,
    pub(super) via: Option<u8>,
}

/// What a worker hands the fleet task.
pub(super) enum FleetOut {
    /// A client's CID record for the node holding its session.
    Forward { node: u8, remote: SocketAddr, datagram: Vec<u8> },
    /// An answer to a client that reached us through `node`.
    Answer { node: u8, remote: SocketAddr, datagram: Vec<u8> },
}

/// Clients that reached this node through another node of the fleet: answers go back through
/// it, as a client (behind a NAT, or a load balancer) takes answers only from the address it
/// sent to.
#[derive(Default)]
pub(super) struct ReturnPaths(HashMap<SocketAddr, u8>);

impl ReturnPaths {
    /// The node `client`'s answers go back through, if it reached us through one.
    pub(super) fn through(&self, client: SocketAddr) -> Option<u8> {
        self.0.get(&client).copied()
    }

    /// A record of `client` came through `node`; beyond [`MAX_RETURN_PATHS`] clients, a new one
    /// is not remembered (its answers go straight to it).
    pub(super) fn arrived_through(&mut self, client: SocketAddr, node: u8) {
        if self.0.len() < MAX_RETURN_PATHS || self.0.contains_key(&client) {
            self.0.insert(client, node);
        }
    }

    /// A record of `client` came straight to us: its answers go straight back.
    pub(super) fn arrived_direct(&mut self, client: SocketAddr) {
        if !self.0.is_empty() {
            self.0.remove(&client);
        }
    }

    /// Forgets every client but the `known` ones.
    pub(super) fn keep_only(&mut self, known: &HashSet<SocketAddr>) {
        self.0.retain(|client, _| known.contains(client));
    }
}

/// Sends and receives the frames between this node and the others.
pub(super) async fn run_fleet(
    socket: UdpSocket,
    fleet: Fleet,
    mut outbound: mpsc::Receiver<FleetOut>,
    forward_to: Arc<[mpsc::Sender<Passed>]>,
    answers: mpsc::Sender<(SocketAddr, Vec<u8>)>,
    welcome_addr: SocketAddr,
    cid_len: u8,
) {
    let mut sequence = crate::fleet::first_sequence();
    let mut replay = ReplayWindows::default();
    let mut buffer = vec![0u8; RECEIVE_BUFFER];
    loop {
        tokio::select! {
            out = outbound.recv() => {
                let Some(out) = out else { return };
                let (kind, node, remote, datagram) = match out {
                    FleetOut::Forward { node, remote, datagram } => (FrameKind::Forward, node, remote, datagram),
                    FleetOut::Answer { node, remote, datagram } => (FrameKind::Answer, node, remote, datagram),
                };
                // A node not in the fleet file: nobody can hold the session, drop it.
                let Some(&to) = fleet.nodes.get(&node) else { continue };
                sequence += 1;
                let frame = crate::fleet::seal_frame(&fleet, kind, sequence, remote, &datagram);
                let _ = socket.send_to(&frame, to).await;
            }
            received = socket.recv_from(&mut buffer) => {
                let Ok((n, _)) = received else { continue };
                let Ok(frame) = crate::fleet::open_frame(&fleet, &buffer[..n]) else { continue };
                if frame.sender == fleet.node || replay.check_and_mark(frame.sender, frame.sequence).is_err() {
                    continue;
                }
                match frame.kind {
                    FrameKind::Forward => {
                        // The worker byte of our CID; a record for no worker of ours is dropped.
                        let mut datagram = frame.datagram.to_vec();
                        let cid = Incoming::new(&mut datagram, cid_len);
                        let worker = match crate::fleet::cid_owner(cid.connection_id(), Some(fleet.node), u8::MAX, forward_to.len()) {
                            Some(CidOwner::Worker(w)) => w,
                            _ => continue,
                        };
                        let incoming = Arrived { local: welcome_addr, remote: frame.address, datagram };
                        let _ = forward_to[worker].try_send(Passed { incoming, via: Some(frame.sender) });
                    }
                    FrameKind::Answer => {
                        let _ = answers.try_send((frame.address, frame.datagram.to_vec()));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_go_back_the_way_the_client_came_for_a_bounded_number_of_clients() {
        let client = |n: u32| SocketAddr::from(([10, 0, (n >> 8) as u8, n as u8], 5684));
        let mut paths = ReturnPaths::default();
        paths.arrived_through(client(1), 7);
        assert_eq!(paths.through(client(1)), Some(7));
        // The client came straight here next: answers go straight back.
        paths.arrived_direct(client(1));
        assert_eq!(paths.through(client(1)), None);
        // Beyond the bound a new client is not remembered, a known one still moves.
        for n in 0..MAX_RETURN_PATHS as u32 {
            paths.arrived_through(client(n), 1);
        }
        let newcomer = SocketAddr::from(([192, 0, 2, 1], 5684));
        paths.arrived_through(newcomer, 2);
        assert_eq!(paths.through(newcomer), None);
        paths.arrived_through(client(3), 2);
        assert_eq!(paths.through(client(3)), Some(2));
        // Clients no session knows any more are forgotten.
        paths.keep_only(&HashSet::from([client(3)]));
        assert_eq!((paths.through(client(3)), paths.through(client(4))), (Some(2), None));
    }
}
