//! The server's link to the other nodes of its fleet (see [`crate::fleet`]) and between its
//! own workers: CID records passed to the worker or node holding their session, and answers
//! sent back through the node a client reached.

use super::RECEIVE_BUFFER;
use crate::fleet::{CidOwner, Fleet, FrameKind, ReplayWindows};
use crate::mobility::Incoming;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// Most CID records waiting to be passed to the worker that holds their session; beyond it they
/// are dropped, as a full socket buffer would.
pub(super) const FORWARD_QUEUE: usize = 1024;

/// Clients whose answers go back through another node, at most per worker.
pub(super) const MAX_RETURN_PATHS: usize = 65_536;

/// A datagram handed to the worker holding its session, and the node it came through (when
/// another node received it from the client).
pub(super) struct Passed {
    pub(super) incoming: Incoming,
    pub(super) via: Option<u8>,
}

/// What a worker hands the fleet task.
pub(super) enum FleetOut {
    /// A client's CID record for the node holding its session.
    Forward { node: u8, remote: SocketAddr, datagram: Vec<u8> },
    /// An answer to a client that reached us through `node`.
    Answer { node: u8, remote: SocketAddr, datagram: Vec<u8> },
}

/// Sends and receives the frames between this node and the others.
pub(super) async fn run_fleet(
    socket: UdpSocket,
    fleet: Fleet,
    mut outbound: mpsc::Receiver<FleetOut>,
    forward_to: Arc<[mpsc::Sender<Passed>]>,
    answers: mpsc::Sender<(SocketAddr, Vec<u8>)>,
    welcome_addr: SocketAddr,
    cid_len: usize,
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
                        let worker = match crate::fleet::cid_owner(frame.datagram, cid_len, Some(fleet.node), u8::MAX, forward_to.len()) {
                            Some(CidOwner::Worker(w)) => w,
                            _ => continue,
                        };
                        let incoming = Incoming { local: welcome_addr, remote: frame.address, datagram: frame.datagram.to_vec() };
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
