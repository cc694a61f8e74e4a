//! The flooder: one packet sent over and over from many source ports at a paced rate, bounded in
//! count and time, with every answer counted. Sends go out in `sendmmsg` batches from one source
//! port at a time (nix's safe wrapper), answers come in with `recvmmsg` on a tokio thread, so
//! that the flooder spends far less per datagram than the servers it measures.

use super::servers::{pin_flooder_thread, udp_drops, CpuAccount};
use anyhow::Context;
use nix::sys::socket::{
    recvmmsg, sendmmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
    MultiHeaders, SockaddrIn, SockaddrStorage,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Bounds of one flood: whichever comes first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FloodLimits {
    pub max_packets: u64,
    pub max_time: Duration,
    pub rate_pps: u64,
}

/// What one flood saw.
#[derive(Default, Clone, Debug)]
pub(crate) struct FloodResult {
    pub sent: u64,
    pub sent_bytes: u64,
    pub answers: u64,
    pub answer_bytes: u64,
    /// From the first send to the last send.
    pub send_window: Duration,
    /// From the first answer to the last: the server answers at its own pace, draining its
    /// socket buffer after the sender stopped.
    pub answer_window: Duration,
    /// The size of the largest answer seen.
    pub answer_size: usize,
    /// What the first answer was.
    pub answer_kind: Option<String>,
    /// CPU time the server spent during the flood, where measurable.
    pub server_cpu: Option<Duration>,
    /// CPU time of the flooder's sending and counting threads.
    pub flooder_cpu: Option<Duration>,
    /// Flood datagrams the kernel dropped at the server's full socket buffer.
    pub dropped_at_server: Option<u64>,
    /// Answers the kernel dropped at the flooder's full socket buffers.
    pub dropped_at_flooder: Option<u64>,
}

impl FloodResult {
    pub fn answers_per_second(&self) -> f64 {
        let secs = self.answer_window.as_secs_f64();
        if secs > 0.0 && self.answers > 1 {
            (self.answers - 1) as f64 / secs
        } else {
            0.0
        }
    }
    pub fn offered_per_second(&self) -> f64 {
        let secs = self.send_window.as_secs_f64();
        if secs > 0.0 {
            self.sent as f64 / secs
        } else {
            0.0
        }
    }
    /// Flood datagrams that got no answer (dropped in a full socket buffer, or ignored).
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.answers)
    }
    /// Server CPU per answer: the cost of an answer whatever else runs on the machine.
    pub fn cpu_per_answer(&self) -> Option<Duration> {
        let cpu = self.server_cpu?;
        (self.answers > 0 && !cpu.is_zero()).then(|| cpu.div_f64(self.answers as f64))
    }
    /// Flooder CPU per datagram sent (answers counted included).
    pub fn flooder_cpu_per_datagram(&self) -> Option<Duration> {
        let cpu = self.flooder_cpu?;
        (self.sent > 0).then(|| cpu.div_f64(self.sent as f64))
    }
    /// The share of one core the server used while it answered.
    pub fn server_load(&self) -> Option<f64> {
        let secs = self.answer_window.max(self.send_window).as_secs_f64();
        (secs > 0.0).then(|| self.server_cpu.map(|c| c.as_secs_f64() / secs)).flatten()
    }
    /// The share of one core each flooder thread used on average while sending (two threads).
    pub fn flooder_load(&self) -> Option<f64> {
        let secs = self.send_window.as_secs_f64();
        (secs > 0.0).then(|| self.flooder_cpu.map(|c| c.as_secs_f64() / secs)).flatten()
    }
    pub fn bytes_out_per_byte_in(&self) -> f64 {
        if self.sent_bytes > 0 {
            self.answer_bytes as f64 / self.sent_bytes as f64
        } else {
            0.0
        }
    }
}

/// How a flood is sent.
#[derive(Clone, Copy)]
pub(crate) struct FloodPlan<'a> {
    pub target: SocketAddr,
    pub packet: &'a [u8],
    pub limits: FloodLimits,
    /// Datagrams sent from one source port in a row (one `sendmmsg`), before the next port.
    pub per_source: usize,
    /// Send each port's datagrams in a row as one UDP GSO send (loopback hands the
    /// super-datagram unsplit to a UDP_GRO socket, and segments it for any other), and count
    /// the answers through UDP_GRO on the source sockets.
    pub coalesce: bool,
    /// Names an answer for the report.
    pub describe: fn(&[u8]) -> String,
}

/// Source sockets on 127.0.0.1, one per source port.
pub(crate) fn loopback_sources(count: usize) -> anyhow::Result<Vec<UdpSocket>> {
    (0..count.max(1))
        .map(|_| UdpSocket::bind("127.0.0.1:0").context("binding a flood source socket"))
        .collect()
}

/// Floods `plan.target` from `sources` in turn and counts what comes back to them.
pub(crate) fn flood(sources: Vec<UdpSocket>, plan: FloodPlan<'_>) -> anyhow::Result<FloodResult> {
    let SocketAddr::V4(target) = plan.target else { anyhow::bail!("the flood goes to an IPv4 address") };
    anyhow::ensure!(!sources.is_empty(), "no source socket");
    let source_ports: Vec<u16> =
        sources.iter().map(|s| s.local_addr().map(|a| a.port())).collect::<io::Result<_>>()?;
    let drops_before = (udp_drops(&[target.port()]), udp_drops(&source_ports));
    let mut receivers = Vec::with_capacity(sources.len());
    for socket in &sources {
        // Shared by both clones: a full send buffer must not stop the sender.
        socket.set_nonblocking(true)?;
        if plan.coalesce {
            setsockopt(socket, sockopt::UdpGroSegment, &true).context("UDP_GRO on a flood source")?;
        }
        receivers.push(socket.try_clone()?);
    }
    let sending = Arc::new(AtomicBool::new(true));
    let coalesce = plan.coalesce;
    let counter = {
        let sending = sending.clone();
        thread::Builder::new()
            .name("flood-counter".into())
            .spawn(move || count_answers(receivers, &sending, coalesce))
            .context("starting the answer counter")?
    };
    pin_flooder_thread();
    let sender_cpu = CpuAccount::this_thread();
    let cpu_before = sender_cpu.as_ref().and_then(CpuAccount::read);

    let per_source = plan.per_source.clamp(1, 1024);
    let destination = SockaddrIn::from(target);
    let slices: Vec<[IoSlice<'_>; 1]> = (0..per_source).map(|_| [IoSlice::new(plan.packet)]).collect();
    let destinations: Vec<Option<SockaddrIn>> = vec![Some(destination); per_source];
    let mut headers = MultiHeaders::<SockaddrIn>::preallocate(per_source, None);
    let no_control: [ControlMessage<'_>; 0] = [];
    let burst = plan.packet.repeat(if plan.coalesce { per_source } else { 0 });
    let segment = u16::try_from(plan.packet.len()).context("a flood datagram longer than 64 kB")?;
    let gso = [ControlMessage::UdpGsoSegments(&segment)];
    let limits = plan.limits;
    let start = Instant::now();
    let (mut sent, mut turn) = (0u64, 0usize);
    while sent < limits.max_packets {
        let elapsed = start.elapsed();
        if elapsed >= limits.max_time {
            break;
        }
        let due = ((elapsed.as_secs_f64() * limits.rate_pps as f64) as u64).min(limits.max_packets);
        if due <= sent {
            thread::sleep(Duration::from_micros(100));
            continue;
        }
        let count = usize::try_from(due - sent).unwrap_or(per_source).min(per_source);
        let socket = &sources[turn % sources.len()];
        turn += 1;
        if plan.coalesce {
            let bytes = &burst[..count * plan.packet.len()];
            let control = if count > 1 { &gso[..] } else { &no_control[..] };
            match sendmsg(
                socket.as_raw_fd(),
                &[IoSlice::new(bytes)],
                control,
                MsgFlags::empty(),
                Some(&destination),
            ) {
                Ok(_) => sent += count as u64,
                Err(nix::errno::Errno::EAGAIN) => thread::yield_now(),
                Err(_) => {}
            }
            continue;
        }
        match sendmmsg(
            socket.as_raw_fd(),
            &mut headers,
            &slices[..count],
            &destinations[..count],
            no_control,
            MsgFlags::empty(),
        ) {
            Ok(results) => sent += results.count() as u64,
            // A full send buffer: this port's datagrams wait, the next port goes on.
            Err(nix::errno::Errno::EAGAIN) => thread::yield_now(),
            // An ICMP error of an earlier datagram: nothing was sent this time.
            Err(_) => {}
        }
    }
    let send_window = start.elapsed();
    let cpu_after = sender_cpu.as_ref().and_then(CpuAccount::read);
    sending.store(false, Ordering::Relaxed);
    let answers = counter.join().map_err(|_| anyhow::anyhow!("the answer counter panicked"))??;
    let sender_cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
    let drops_after = (udp_drops(&[target.port()]), udp_drops(&source_ports));
    let growth = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| b.saturating_sub(a));
    Ok(FloodResult {
        sent,
        sent_bytes: sent * plan.packet.len() as u64,
        answers: answers.count,
        answer_bytes: answers.bytes,
        send_window,
        answer_window: answers.window(),
        answer_size: answers.largest,
        answer_kind: answers.first.as_deref().map(plan.describe),
        server_cpu: None,
        flooder_cpu: sender_cpu.zip(answers.cpu).map(|(a, b)| a + b),
        dropped_at_server: growth(drops_before.0, drops_after.0),
        dropped_at_flooder: growth(drops_before.1, drops_after.1),
    })
}

/// Answers counted on every source socket.
#[derive(Default)]
struct Answers {
    count: u64,
    bytes: u64,
    largest: usize,
    first: Option<Vec<u8>>,
    first_at: Option<Instant>,
    last_at: Option<Instant>,
    /// The counting thread's CPU time.
    cpu: Option<Duration>,
}

impl Answers {
    fn window(&self) -> Duration {
        match (self.first_at, self.last_at) {
            (Some(a), Some(b)) => b.saturating_duration_since(a),
            _ => Duration::ZERO,
        }
    }
    fn merge(&mut self, other: Answers) {
        self.count += other.count;
        self.bytes += other.bytes;
        self.largest = self.largest.max(other.largest);
        if self.first.is_none() {
            self.first = other.first;
        }
        self.first_at = [self.first_at, other.first_at].into_iter().flatten().min();
        self.last_at = [self.last_at, other.last_at].into_iter().flatten().max();
    }
}

/// Late answers get this long after the sender stopped and a socket fell quiet.
const LATE_ANSWERS: Duration = Duration::from_millis(200);
/// Answers read per `recvmmsg`.
const RECEIVE_BATCH: usize = 32;
/// Largest answer kept whole (answers are single small datagrams; longer ones are counted by
/// the size the kernel reports).
const ANSWER_SLOT: usize = 2048;

fn count_answers(sockets: Vec<UdpSocket>, sending: &AtomicBool, coalesced: bool) -> anyhow::Result<Answers> {
    pin_flooder_thread();
    let account = CpuAccount::this_thread();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // The receive state (mmsghdr arrays) is not Send: the tasks stay on this thread.
    let local = tokio::task::LocalSet::new();
    let mut total = local.block_on(&runtime, async {
        let stopped = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        for socket in sockets {
            tasks.spawn_local(count_on(tokio::net::UdpSocket::from_std(socket)?, stopped.clone(), coalesced));
        }
        while sending.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stopped.store(true, Ordering::Relaxed);
        let mut total = Answers::default();
        while let Some(done) = tasks.join_next().await {
            total.merge(done??);
        }
        anyhow::Ok(total)
    })?;
    total.cpu = account.as_ref().and_then(CpuAccount::read);
    Ok(total)
}

/// Counts the answers reaching one source socket until the flood has stopped and the socket
/// has been quiet for [`LATE_ANSWERS`]. With `coalesced` (UDP_GRO on the socket) one read may
/// hold several answers of one size, which the kernel's segment size tells apart.
async fn count_on(
    socket: tokio::net::UdpSocket,
    stopped: Arc<AtomicBool>,
    coalesced: bool,
) -> io::Result<Answers> {
    let fd = socket.as_raw_fd();
    let mut slots = vec![[0u8; ANSWER_SLOT]; RECEIVE_BATCH];
    let control = coalesced.then(|| nix::cmsg_space!(i32));
    let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(RECEIVE_BATCH, control.clone());
    let mut answers = Answers::default();
    let mut quiet_since: Option<Instant> = None;
    loop {
        match tokio::time::timeout(Duration::from_millis(20), socket.readable()).await {
            Ok(ready) => ready?,
            Err(_) => {
                if stopped.load(Ordering::Relaxed) {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > LATE_ANSWERS {
                        return Ok(answers);
                    }
                }
                continue;
            }
        }
        if coalesced {
            // recvmmsg leaves each header's control length where the kernel set it (0 after a
            // datagram that came alone): room for the segment size again before every read.
            headers = MultiHeaders::<SockaddrStorage>::preallocate(RECEIVE_BATCH, control.clone());
        }
        let mut sizes = [0usize; RECEIVE_BATCH];
        let mut segments = [1u64; RECEIVE_BATCH];
        let mut totals = [0usize; RECEIVE_BATCH];
        let received = socket.try_io(tokio::io::Interest::READABLE, || {
            let mut iovs: Vec<[IoSliceMut<'_>; 1]> =
                slots.iter_mut().map(|slot| [IoSliceMut::new(slot)]).collect();
            // MSG_TRUNC: the real size of a datagram longer than its slot.
            let results = recvmmsg(fd, &mut headers, iovs.iter_mut(), MsgFlags::MSG_TRUNC, None)
                .map_err(io::Error::from)?;
            let mut count = 0;
            for (((size, n), total), message) in
                sizes.iter_mut().zip(segments.iter_mut()).zip(totals.iter_mut()).zip(results)
            {
                *size = message.bytes;
                *total = message.bytes;
                *n = 1;
                for cmsg in message.cmsgs().into_iter().flatten() {
                    if let ControlMessageOwned::UdpGroSegments(stride) = cmsg {
                        let stride = usize::try_from(stride).unwrap_or(0).max(1);
                        *n = message.bytes.div_ceil(stride) as u64;
                        *size = stride;
                    }
                }
                count += 1;
            }
            Ok(count)
        });
        let count = match received {
            Ok(count) => count,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            // An ICMP error (port unreachable) of an earlier datagram.
            Err(e)
                if matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        quiet_since = None;
        for (((slot, &size), &n), &total) in slots.iter().zip(&sizes).zip(&segments).zip(&totals).take(count)
        {
            answers.count += n;
            answers.bytes += total as u64;
            answers.largest = answers.largest.max(size);
            if answers.first.is_none() {
                answers.first = Some(slot[..size.min(ANSWER_SLOT)].to_vec());
            }
        }
        if count > 0 {
            answers.first_at.get_or_insert(now);
            answers.last_at = Some(now);
        }
    }
}
