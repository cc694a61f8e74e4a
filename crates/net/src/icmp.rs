//! ICMP "port unreachable" for what a client sent: nothing listens at the peer's address.
//!
//! Linux tells an unconnected UDP socket of ICMP errors only when asked (IP_RECVERR,
//! IPV6_RECVERR); it then queues each error with the destination of the datagram that caused it,
//! and the socket polls as errored until the queue is read (`MSG_ERRQUEUE`). A client asks, says so
//! at the first refusal, and gives up after [`REFUSALS_TO_GIVE_UP`] in a row. An ICMP message is
//! easy to forge, so one counts only if it follows a datagram sent since the last one counted,
//! and an answer from the peer starts the count again: a handshake that gets answers is never
//! ended by refusals.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, SockaddrStorage};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Refusals in a row, each after a datagram of its own, after which a client gives up.
pub const REFUSALS_TO_GIVE_UP: u32 = 3;

/// The kernel reported an ICMP port unreachable for a datagram sent to `destination`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Where the refused datagram went.
    pub destination: SocketAddr,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nothing listens at {}: ICMP port unreachable", self.destination)
    }
}

/// Called at each refusal that counts, with how many there have been in a row.
pub type RefusalHook = std::sync::Arc<dyn Fn(Refusal, u32) + Send + Sync>;

/// Asks the kernel to queue ICMP errors for what `socket` sends.
pub(crate) fn report_refusals(socket: &impl AsFd, destination: SocketAddr) -> io::Result<()> {
    let set = match destination {
        SocketAddr::V4(_) => socket::setsockopt(socket, socket::sockopt::Ipv4RecvErr, &true),
        SocketAddr::V6(_) => socket::setsockopt(socket, socket::sockopt::Ipv6RecvErr, &true),
    };
    set.map_err(io::Error::from)
}

/// Reads every ICMP error `socket` has queued and hands each port unreachable to `each`; other
/// errors (host or network unreachable, a local error) are left to the timers. Leaves the
/// socket's error readiness cleared.
pub(crate) fn take_refusals(socket: &UdpSocket, mut each: impl FnMut(Refusal)) -> io::Result<()> {
    loop {
        match socket.try_io(Interest::ERROR, || next_error(socket)) {
            Ok(Some(refusal)) => each(refusal),
            Ok(None) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(error) => return Err(error),
        }
    }
}

/// One entry of the error queue: `Some` for a port unreachable; `WouldBlock` once it is empty.
fn next_error(socket: &UdpSocket) -> io::Result<Option<Refusal>> {
    // The quoted datagram is not needed: the destination says whose port refused.
    let mut quoted = [0u8; 64];
    let mut iov = [IoSliceMut::new(&mut quoted)];
    let mut control = [0u8; 128];
    let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
    let message =
        socket::recvmsg::<SockaddrStorage>(socket.as_raw_fd(), &mut iov, Some(&mut control), flags)?;
    let destination = message.address.as_ref().and_then(socket_addr);
    let refused = message.cmsgs().map_err(io::Error::from)?.any(|cmsg| {
        let errno = match cmsg {
            ControlMessageOwned::Ipv4RecvErr(error, _) | ControlMessageOwned::Ipv6RecvErr(error, _) => {
                error.ee_errno
            }
            _ => return false,
        };
        errno == nix::errno::Errno::ECONNREFUSED as u32
    });
    Ok(destination.filter(|_| refused).map(|destination| Refusal { destination }))
}

fn socket_addr(storage: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = storage.as_sockaddr_in() {
        return Some(SocketAddr::from(std::net::SocketAddrV4::from(*v4)));
    }
    storage.as_sockaddr_in6().map(|v6| SocketAddr::from(std::net::SocketAddrV6::from(*v6)))
}

/// The refusals of what a client sends to its peer, counted in a row.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RefusalsInARow {
    in_a_row: u32,
    /// A datagram went to the peer since the last refusal counted.
    sent_since: bool,
}

impl RefusalsInARow {
    /// A datagram went to the peer.
    pub fn sent(&mut self) {
        self.sent_since = true;
    }

    /// The peer answered: whatever refused before, something listens now.
    pub fn answered(&mut self) {
        self.in_a_row = 0;
    }

    /// A refusal arrived; returns the count if it counts (it follows a datagram of its own).
    pub fn refused(&mut self) -> Option<u32> {
        if !std::mem::take(&mut self.sent_since) {
            return None;
        }
        self.in_a_row += 1;
        Some(self.in_a_row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_after_a_datagram_of_its_own_counts_and_an_answer_starts_again() {
        let mut count = RefusalsInARow::default();
        assert_eq!(count.refused(), None, "nothing sent: a forged message");
        count.sent();
        assert_eq!(count.refused(), Some(1));
        assert_eq!(count.refused(), None, "a second message for the same datagram");
        count.sent();
        count.sent();
        assert_eq!(count.refused(), Some(2));
        count.answered();
        count.sent();
        assert_eq!(count.refused(), Some(1));
    }

    #[tokio::test]
    async fn a_closed_port_on_loopback_is_reported_with_its_address() {
        for (bind, closed) in [("127.0.0.1:0", "127.0.0.1"), ("[::1]:0", "::1")] {
            let Ok(socket) = UdpSocket::bind(bind).await else { continue };
            // A port nobody holds: bind one and let it go.
            let closed = std::net::UdpSocket::bind((closed, 0)).unwrap().local_addr().unwrap();
            report_refusals(&socket, closed).unwrap();
            socket.send_to(b"anyone?", closed).await.unwrap();
            let ready = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                socket.ready(Interest::READABLE | Interest::ERROR),
            )
            .await
            .expect("the kernel reports the refusal")
            .unwrap();
            assert!(ready.is_error());
            let mut refusals = Vec::new();
            take_refusals(&socket, |r| refusals.push(r)).unwrap();
            assert_eq!(refusals, [Refusal { destination: closed }]);
            assert_eq!(
                refusals[0].to_string(),
                format!("nothing listens at {closed}: ICMP port unreachable")
            );
            // Read: the socket no longer polls as errored.
            let again =
                tokio::time::timeout(std::time::Duration::from_millis(100), socket.ready(Interest::ERROR))
                    .await;
            assert!(again.is_err(), "the error queue was emptied");
        }
    }
}
