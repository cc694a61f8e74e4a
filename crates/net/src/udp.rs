//! The one datagram socket of the drivers' listening side: a tokio UDP socket that reads and
//! writes in batches through quinn-udp (recvmmsg, UDP GRO on receive; UDP GSO on send: one
//! system call for several equal-sized datagrams to one peer) where the kernel has them, and one
//! datagram per system call otherwise or when batching is off.
//!
//! Several of them can listen on one address ([`DatagramSocket::bind_listeners`], SO_REUSEPORT):
//! the kernel then spreads datagrams over them by a hash of the 4-tuple, one socket per worker.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::str::FromStr;
use tokio::io::Interest;
use tokio::net::UdpSocket;

pub use crate::listen::PortSharing;

/// Whether a socket reads and writes datagrams in batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchIo {
    /// recvmmsg / GRO / GSO where the kernel has them (quinn-udp), else one datagram per call.
    #[default]
    On,
    /// One datagram per system call (`recvfrom` / `sendto`), for comparison.
    Off,
}

impl fmt::Display for BatchIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BatchIo::On => "on",
            BatchIo::Off => "off",
        })
    }
}

impl FromStr for BatchIo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(BatchIo::On),
            "off" => Ok(BatchIo::Off),
            other => Err(format!("unknown batching '{other}' (known: on, off)")),
        }
    }
}

/// Largest UDP payload (a GRO buffer holds several datagrams of one peer up to this).
const SLOT_BYTES: usize = 65_536;

/// Most datagrams one receive call hands over in single-datagram mode, so a busy socket still
/// lets its worker flush and run timers.
const SINGLE_READS_PER_WAKE: usize = 32;

/// A listening UDP socket with batched I/O where available.
pub struct DatagramSocket {
    io: UdpSocket,
    /// quinn-udp's per-socket state (offload support found when it was set up); `None`: one
    /// datagram per system call.
    batch: Option<quinn_udp::UdpSocketState>,
    slots: Vec<Vec<u8>>,
    meta: Vec<quinn_udp::RecvMeta>,
    /// A listener's mark on an address its server holds alone (see [`PortSharing`]).
    claim: Option<std::sync::Arc<crate::listen::ExclusiveClaim>>,
}

impl fmt::Debug for DatagramSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatagramSocket")
            .field("local", &self.io.local_addr().ok())
            .field("batched", &self.is_batched())
            .finish()
    }
}

impl DatagramSocket {
    /// Wraps a bound tokio socket. With [`BatchIo::On`], a socket quinn-udp cannot set up falls
    /// back to single-datagram I/O.
    pub fn new(io: UdpSocket, mode: BatchIo) -> DatagramSocket {
        let batch = match mode {
            BatchIo::On => quinn_udp::UdpSocketState::new((&io).into()).ok(),
            BatchIo::Off => None,
        };
        let slot_count = if batch.is_some() { quinn_udp::BATCH_SIZE } else { 1 };
        DatagramSocket {
            io,
            batch,
            slots: vec![vec![0u8; SLOT_BYTES]; slot_count],
            meta: vec![quinn_udp::RecvMeta::default(); slot_count],
            claim: None,
        }
    }

    /// The `count` listening sockets of one server's workers on `addr` (port 0: one free port
    /// for all): they share it with SO_REUSEPORT, and so may later sockets of this process (TCS
    /// temporary sockets). Another process listening there makes it fail with `AddrInUse`,
    /// unless `sharing` allows it (see [`PortSharing`]). Needs a tokio runtime.
    pub fn bind_listeners(
        addr: SocketAddr,
        count: usize,
        sharing: PortSharing,
        mode: BatchIo,
    ) -> io::Result<Vec<DatagramSocket>> {
        let listeners = crate::listen::bind_reusable(addr, count, sharing)?;
        listeners
            .sockets
            .into_iter()
            .map(|socket| {
                let mut socket = DatagramSocket::new(UdpSocket::from_std(socket.into())?, mode);
                socket.claim.clone_from(&listeners.claim);
                Ok(socket)
            })
            .collect()
    }

    /// Binds `addr` alone. Needs a tokio runtime.
    pub async fn bind(addr: SocketAddr, mode: BatchIo) -> io::Result<DatagramSocket> {
        Ok(DatagramSocket::new(UdpSocket::bind(addr).await?, mode))
    }

    /// Whether reads and writes go through quinn-udp's batched path.
    pub fn is_batched(&self) -> bool {
        self.batch.is_some()
    }

    /// How many equal-sized datagrams one send can carry (1 without GSO).
    pub fn max_send_segments(&self) -> usize {
        self.batch.as_ref().map_or(1, |state| state.max_gso_segments())
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Resolves once datagrams may be waiting. Cancel-safe: nothing is read.
    pub async fn readable(&self) -> io::Result<()> {
        self.io.readable().await
    }

    /// [`DatagramSocket::readable`] as a poll, to wait on several sockets at once.
    pub fn poll_readable(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        self.io.poll_recv_ready(cx)
    }

    /// Asks the kernel to report ICMP errors of what this socket sends (see [`crate::icmp`]).
    pub(crate) fn report_refusals(&self, destination: SocketAddr) -> io::Result<()> {
        crate::icmp::report_refusals(&self.io, destination)
    }

    /// Resolves once the socket has ICMP errors queued. Cancel-safe.
    pub(crate) async fn errored(&self) -> io::Result<()> {
        self.io.ready(Interest::ERROR).await.map(|_| ())
    }

    /// Reads the queued ICMP errors, handing each port unreachable to `each`.
    pub(crate) fn take_refusals(&self, each: impl FnMut(crate::icmp::Refusal)) -> io::Result<()> {
        crate::icmp::take_refusals(&self.io, each)
    }

    /// Reads what is waiting without blocking (one batch, or up to a few single datagrams) and
    /// hands each datagram to `each` with its source. Returns how many there were (0: none).
    pub fn try_recv(&mut self, mut each: impl FnMut(SocketAddr, &mut [u8])) -> io::Result<usize> {
        let DatagramSocket { io, batch, slots, meta, .. } = self;
        let io: &UdpSocket = io;
        match batch {
            Some(state) => {
                let filled = {
                    // On the stack: a receive allocates nothing.
                    let mut each = slots.iter_mut();
                    let mut bufs: [IoSliceMut<'_>; quinn_udp::BATCH_SIZE] = std::array::from_fn(|_| {
                        IoSliceMut::new(each.next().map_or(&mut [][..], |s| &mut s[..]))
                    });
                    match io.try_io(Interest::READABLE, || state.recv(io.into(), &mut bufs, meta)) {
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                        Err(e) => return Err(e),
                    }
                };
                let mut count = 0;
                for (slot, m) in slots.iter_mut().zip(meta.iter()).take(filled) {
                    // With GRO one buffer holds several datagrams of one peer, `stride` apart.
                    let stride = m.stride.max(1);
                    for datagram in slot[..m.len].chunks_mut(stride) {
                        each(m.addr, datagram);
                        count += 1;
                    }
                }
                Ok(count)
            }
            None => {
                let mut count = 0;
                while count < SINGLE_READS_PER_WAKE {
                    match io.try_recv_from(&mut slots[0]) {
                        Ok((len, from)) => {
                            each(from, &mut slots[0][..len]);
                            count += 1;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if count > 0 && is_icmp_error(&e) => break,
                        Err(e) => return Err(e),
                    }
                }
                Ok(count)
            }
        }
    }

    /// Sends one datagram to `dst`.
    pub async fn send_to(&self, payload: &[u8], dst: SocketAddr) -> io::Result<()> {
        loop {
            match self.try_send_segments(payload, payload.len().max(1), dst) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.io.writable().await?,
                other => return other,
            }
        }
    }

    /// Sends `payload`, the datagrams of `segment` bytes each (the last may be shorter) laid end
    /// to end, to `dst` without blocking: one system call with GSO, else one per datagram.
    /// `WouldBlock` means nothing was sent.
    fn try_send_segments(&self, payload: &[u8], segment: usize, dst: SocketAddr) -> io::Result<()> {
        match &self.batch {
            Some(state) if payload.len() <= segment || state.max_gso_segments() > 1 => {
                let transmit = quinn_udp::Transmit {
                    destination: dst,
                    ecn: None,
                    contents: payload,
                    segment_size: (payload.len() > segment).then_some(segment),
                    src_ip: None,
                };
                self.io.try_io(Interest::WRITABLE, || state.try_send((&self.io).into(), &transmit))
            }
            _ => {
                // A run longer than a datagram forms only with GSO (`SendQueue::push`); should the
                // kernel have refused GSO since, its datagrams go one by one, and a full buffer
                // past the first loses the rest, as on any UDP path.
                let mut datagrams = payload.chunks(segment.max(1));
                if let Some(first) = datagrams.next() {
                    self.io.try_send_to(first, dst)?;
                }
                for datagram in datagrams {
                    let _ = self.io.try_send_to(datagram, dst);
                }
                Ok(())
            }
        }
    }
}

/// An ICMP error of an earlier send that surfaces on a later receive: nothing to act on.
pub(crate) fn is_icmp_error(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset)
}

/// Datagrams waiting to go out from one socket, sent with as few system calls as the socket
/// allows: consecutive datagrams to one peer of one size (the last of a run may be shorter)
/// become one GSO send. Sent runs give their buffers back for the next ones, so a steady flow of
/// datagrams allocates nothing.
#[derive(Default)]
pub struct SendQueue {
    runs: std::collections::VecDeque<Run>,
    /// Emptied buffers of sent runs, kept for new runs.
    spare: Vec<Vec<u8>>,
}

struct Run {
    dst: SocketAddr,
    segment: usize,
    bytes: Vec<u8>,
    /// The last datagram was shorter than `segment`: nothing more can join.
    closed: bool,
}

/// Spare buffers kept at most (each up to a GSO run, 64 KiB).
const MAX_SPARE_BUFFERS: usize = 16;

impl SendQueue {
    /// Queues one datagram, joining the previous run when GSO could carry both together.
    pub fn push(&mut self, socket: &DatagramSocket, dst: SocketAddr, payload: &[u8]) {
        if !self.join(socket, dst, payload) {
            let mut bytes = self.spare.pop().unwrap_or_default();
            bytes.extend_from_slice(payload);
            self.start_run(dst, bytes);
        }
    }

    /// [`SendQueue::push`] for a datagram the caller owns: a datagram that starts a run
    /// becomes that run's buffer, without a copy.
    pub fn push_owned(&mut self, socket: &DatagramSocket, dst: SocketAddr, payload: Vec<u8>) {
        if !self.join(socket, dst, &payload) {
            self.start_run(dst, payload);
        }
    }

    /// Queues one datagram of at most `max_len` bytes that `write` puts straight into the
    /// queue's buffer (returning its length, or an error that queues nothing): no copy, and no
    /// allocation once buffers are recycled. `write` may be called a second time, with a larger
    /// buffer, when it failed in the room left behind the previous datagram of a GSO run.
    pub fn push_with<E>(
        &mut self,
        socket: &DatagramSocket,
        dst: SocketAddr,
        max_len: usize,
        mut write: impl FnMut(&mut [u8]) -> Result<usize, E>,
    ) -> Result<(), E> {
        let max_segments = socket.max_send_segments();
        let joinable = self.runs.back().is_some_and(|run| {
            max_segments > 1
                && !run.closed
                && run.dst == dst
                && run.bytes.len() / run.segment < max_segments
                && run.bytes.len() + run.segment <= SLOT_BYTES
        });
        if joinable {
            let run = self.runs.back_mut().expect("checked above");
            let start = run.bytes.len();
            run.bytes.resize(start + run.segment, 0);
            match write(&mut run.bytes[start..]) {
                Ok(len) => {
                    run.bytes.truncate(start + len);
                    run.closed = len < run.segment;
                    return Ok(());
                }
                Err(_) => {
                    // Longer than the run's datagrams: it starts a run of its own.
                    run.bytes.truncate(start);
                    run.closed = true;
                }
            }
        }
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.resize(max_len, 0);
        match write(&mut bytes) {
            Ok(len) => {
                bytes.truncate(len);
                self.start_run(dst, bytes);
                Ok(())
            }
            Err(e) => {
                self.recycle(bytes);
                Err(e)
            }
        }
    }

    /// Appends `payload` to the last run if GSO can carry both together.
    fn join(&mut self, socket: &DatagramSocket, dst: SocketAddr, payload: &[u8]) -> bool {
        let max_segments = socket.max_send_segments();
        let Some(run) = self.runs.back_mut() else { return false };
        let joins = max_segments > 1
            && !run.closed
            && run.dst == dst
            && payload.len() <= run.segment
            && run.bytes.len() / run.segment < max_segments
            && run.bytes.len() + payload.len() <= SLOT_BYTES;
        if joins {
            run.bytes.extend_from_slice(payload);
            run.closed = payload.len() < run.segment;
        }
        joins
    }

    fn start_run(&mut self, dst: SocketAddr, bytes: Vec<u8>) {
        self.runs.push_back(Run { dst, segment: bytes.len().max(1), bytes, closed: false });
    }

    fn recycle(&mut self, mut bytes: Vec<u8>) {
        if self.spare.len() < MAX_SPARE_BUFFERS && bytes.capacity() <= SLOT_BYTES {
            bytes.clear();
            self.spare.push(bytes);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Sends everything queued; returns how many datagrams the kernel refused. A datagram that
    /// cannot be sent is a lost datagram (the engines' timers cope), as on any UDP path.
    /// Cancel-safe: a run leaves the queue only once sent (or refused).
    pub async fn flush(&mut self, socket: &DatagramSocket) -> io::Result<u64> {
        let mut refused = 0;
        while let Some(run) = self.runs.front() {
            match socket.try_send_segments(&run.bytes, run.segment, run.dst) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    socket.io.writable().await?;
                    continue;
                }
                Ok(()) => {}
                Err(_) => refused += run.bytes.len().div_ceil(run.segment) as u64,
            }
            if let Some(run) = self.runs.pop_front() {
                self.recycle(run.bytes);
            }
        }
        Ok(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    async fn receive_all(socket: &mut DatagramSocket, want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
        let mut got = Vec::new();
        while got.len() < want {
            tokio::time::timeout(std::time::Duration::from_secs(10), socket.readable())
                .await
                .expect("datagrams arrive")
                .unwrap();
            socket.try_recv(|from, d| got.push((from, d.to_vec()))).unwrap();
        }
        got
    }

    #[tokio::test]
    async fn both_modes_carry_every_datagram_in_order_with_its_source() {
        for mode in [BatchIo::On, BatchIo::Off] {
            let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let mut server = DatagramSocket::bind(loopback, mode).await.unwrap();
            assert_eq!(server.is_batched(), mode == BatchIo::On, "quinn-udp sets up on Linux loopback");
            let client = DatagramSocket::bind(loopback, mode).await.unwrap();
            let to = server.local_addr().unwrap();
            // Three of one size then a shorter one: one GSO run where the kernel has GSO.
            let mut queue = SendQueue::default();
            let datagrams: Vec<Vec<u8>> =
                vec![vec![1; 300], vec![2; 300], vec![3; 300], vec![4; 120], vec![5; 300]];
            for d in &datagrams {
                queue.push(&client, to, d);
            }
            let runs = queue.runs.len();
            if client.max_send_segments() > 1 {
                assert_eq!(runs, 2, "the short datagram ends the first run");
            } else {
                assert_eq!(runs, datagrams.len());
            }
            assert_eq!(queue.flush(&client).await.unwrap(), 0);
            let got = receive_all(&mut server, datagrams.len()).await;
            let from = client.local_addr().unwrap();
            assert!(got.iter().all(|(src, _)| *src == from));
            assert_eq!(got.into_iter().map(|(_, d)| d).collect::<Vec<_>>(), datagrams, "{mode}");
        }
    }

    #[tokio::test]
    async fn listeners_of_one_server_share_one_port() {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let sockets =
            DatagramSocket::bind_listeners(loopback, 2, PortSharing::Exclusive, BatchIo::On).unwrap();
        let addr = sockets[0].local_addr().unwrap();
        assert_eq!(sockets[1].local_addr().unwrap(), addr);
    }

    #[tokio::test]
    async fn datagrams_written_in_place_join_runs_and_reuse_buffers() {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let mut server = DatagramSocket::bind(loopback, BatchIo::On).await.unwrap();
        let client = DatagramSocket::bind(loopback, BatchIo::On).await.unwrap();
        let to = server.local_addr().unwrap();
        let mut queue = SendQueue::default();
        let fill = |byte: u8, len: usize| {
            move |buf: &mut [u8]| -> Result<usize, ()> {
                buf[..len].fill(byte);
                Ok(len)
            }
        };
        for round in 0..3u8 {
            queue.push_with(&client, to, 1500, fill(round, 200)).unwrap();
            queue.push_with(&client, to, 1500, fill(round + 10, 200)).unwrap();
            assert_eq!(
                queue.push_with(&client, to, 1500, |_| Err::<usize, ()>(())),
                Err(()),
                "queues nothing"
            );
            queue.push_with(&client, to, 1500, fill(round + 20, 50)).unwrap();
            assert_eq!(queue.flush(&client).await.unwrap(), 0);
            let got = receive_all(&mut server, 3).await;
            let got: Vec<Vec<u8>> = got.into_iter().map(|(_, d)| d).collect();
            assert_eq!(got, [vec![round; 200], vec![round + 10; 200], vec![round + 20; 50]]);
            assert!(!queue.spare.is_empty(), "sent buffers are kept for the next datagrams");
        }
    }

    #[test]
    fn modes_parse_from_their_names() {
        for mode in [BatchIo::On, BatchIo::Off] {
            assert_eq!(mode.to_string().parse::<BatchIo>(), Ok(mode));
        }
        assert!("maybe".parse::<BatchIo>().is_err());
    }
}
