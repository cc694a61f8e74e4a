//! The servers a flood measures besides ours: a bare UDP echo (single datagrams, and batched
//! through the drivers' own quinn-udp socket), usrsctp's echo server, OpenSSL's `DTLSv1_listen`
//! loop; and where the kernel accounts each one's CPU time.

use anyhow::Context;
use fastshake_net::udp::{BatchIo, DatagramSocket, SendQueue};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Which core the servers and which the flooder run on, once chosen (`None`: wherever the
/// scheduler puts them).
static PINNING: OnceLock<Option<Pinning>> = OnceLock::new();

#[derive(Clone, Copy, Debug)]
pub(crate) struct Pinning {
    pub server: usize,
    pub flooder: usize,
}

/// Gives the servers one core and the flooder another, when this process may use two: each
/// side then has a core of its own and neither waits for the other's time slice.
pub(crate) fn pin_to_separate_cores() -> Option<Pinning> {
    *PINNING.get_or_init(|| {
        let allowed = sched_getaffinity(Pid::from_raw(0)).ok()?;
        let mut cores = (0..CpuSet::count()).filter(|&c| allowed.is_set(c).unwrap_or(false));
        let (flooder, server) = (cores.next()?, cores.next()?);
        Some(Pinning { server, flooder })
    })
}

fn pin_this_thread(core: usize) {
    let mut set = CpuSet::new();
    if set.set(core).is_ok() {
        // Unpinned if refused: the figures stay valid, only noisier.
        let _ = sched_setaffinity(Pid::from_raw(0), &set);
    }
}

/// Puts the calling thread on the flooder's core, if cores were assigned.
pub(crate) fn pin_flooder_thread() {
    if let Some(Some(p)) = PINNING.get() {
        pin_this_thread(p.flooder);
    }
}

fn pin_server_thread() {
    if let Some(Some(p)) = PINNING.get() {
        pin_this_thread(p.server);
    }
}

/// `program` as a server process: under `taskset` on the servers' core if cores were assigned
/// (every thread the program starts stays there).
pub(crate) fn server_command(program: &Path) -> Command {
    match PINNING.get() {
        Some(Some(p)) => {
            let mut command = Command::new("taskset");
            command.args(["-c", &p.server.to_string()]).arg(program);
            command
        }
        _ => Command::new(program),
    }
}

/// Where the kernel accounts a server's CPU time.
#[derive(Clone, Debug)]
pub(crate) enum CpuAccount {
    /// One thread: `/proc/PID/task/TID`.
    Thread(PathBuf),
    /// Every thread of a process.
    Process(u32),
}

impl CpuAccount {
    /// The calling thread ("/proc/thread-self" links to "PID/task/TID").
    pub fn this_thread() -> Option<CpuAccount> {
        std::fs::read_link("/proc/thread-self").ok().map(|p| CpuAccount::Thread(Path::new("/proc").join(p)))
    }

    /// CPU time so far: nanoseconds from `schedstat` where the kernel keeps it, else the
    /// user + system ticks of `stat`.
    pub fn read(&self) -> Option<Duration> {
        match self {
            CpuAccount::Thread(dir) => task_cpu(dir),
            CpuAccount::Process(pid) => {
                let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
                let mut total = Duration::ZERO;
                for task in tasks.flatten() {
                    total += task_cpu(&task.path()).unwrap_or_default();
                }
                Some(total)
            }
        }
    }
}

fn task_cpu(dir: &Path) -> Option<Duration> {
    let precise = std::fs::read_to_string(dir.join("schedstat")).ok().and_then(|s| parse_schedstat(&s));
    precise.or_else(|| std::fs::read_to_string(dir.join("stat")).ok().and_then(|s| parse_stat_cpu(&s)))
}

/// The first field of `/proc/.../schedstat`: nanoseconds spent on a CPU.
pub(crate) fn parse_schedstat(text: &str) -> Option<Duration> {
    text.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// User + system time of `/proc/.../stat`, in USER_HZ ticks (100 per second on Linux).
pub(crate) fn parse_stat_cpu(text: &str) -> Option<Duration> {
    // The command name in parentheses may hold spaces; the fields after it are fixed.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 10))
}

/// Datagrams the kernel dropped at the full receive buffers of the IPv4 UDP sockets bound to
/// `ports` (the last column of `/proc/net/udp`).
pub(crate) fn udp_drops(ports: &[u16]) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    Some(parse_udp_drops(&table, ports))
}

pub(crate) fn parse_udp_drops(table: &str, ports: &[u16]) -> u64 {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (_, port) = fields.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let drops: u64 = fields.last()?.parse().ok()?;
            ports.contains(&port).then_some(drops)
        })
        .sum()
}

/// A UDP server on its own thread that stops when dropped.
pub(crate) struct ServerThread {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
    /// The thread's CPU account, if known.
    pub cpu: Option<CpuAccount>,
}

impl ServerThread {
    /// Runs `answer(local, from, datagram, reply)` for every datagram, one `recv_from` each;
    /// `reply` collects the answers, each sent with one `send_to`.
    pub fn spawn<F>(mut answer: F) -> anyhow::Result<ServerThread>
    where
        F: FnMut(SocketAddr, SocketAddr, &mut [u8], &mut Vec<(SocketAddr, Vec<u8>)>) + Send + 'static,
    {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        let addr = socket.local_addr()?;
        ServerThread::start(addr, move |stop| {
            let mut buf = vec![0u8; 65536];
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    answer(addr, from, &mut buf[..n], &mut out);
                    for (dst, payload) in out.drain(..) {
                        let _ = socket.send_to(&payload, dst);
                    }
                }
            }
        })
    }

    fn start(
        addr: SocketAddr,
        body: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> anyhow::Result<ServerThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let (account_tx, account_rx) = std::sync::mpsc::channel();
        let handle = {
            let stop = stop.clone();
            thread::spawn(move || {
                pin_server_thread();
                let _ = account_tx.send(CpuAccount::this_thread());
                body(&stop);
            })
        };
        let cpu = account_rx.recv_timeout(Duration::from_secs(1)).ok().flatten();
        Ok(ServerThread { addr, stop, handle: Some(handle), cpu })
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The syscall floor: every datagram sent straight back, no parsing, one `recv_from` and one
/// `send_to` per datagram.
pub(crate) fn bare_echo_server() -> anyhow::Result<ServerThread> {
    ServerThread::spawn(|_local, from, datagram, out| out.push((from, datagram.to_vec())))
}

/// The batched floor: every datagram sent straight back through the drivers' own socket
/// (quinn-udp: recvmmsg and GRO in, GSO runs out), on a current-thread tokio runtime.
pub(crate) fn batched_echo_server() -> anyhow::Result<ServerThread> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut socket = runtime
        .block_on(DatagramSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0)), BatchIo::On))
        .context("binding the batched echo")?;
    anyhow::ensure!(socket.is_batched(), "quinn-udp could not set up batched I/O on loopback");
    let addr = socket.local_addr()?;
    ServerThread::start(addr, move |stop| {
        runtime.block_on(async {
            let mut queue = SendQueue::default();
            // What one receive brought, end to end, and where each datagram goes back to: the
            // socket is busy receiving while they arrive, so they join the queue after.
            let mut staged: Vec<u8> = Vec::with_capacity(1 << 16);
            let mut echoes: Vec<(SocketAddr, usize)> = Vec::with_capacity(64);
            while !stop.load(Ordering::Relaxed) {
                if tokio::time::timeout(Duration::from_millis(20), socket.readable()).await.is_err() {
                    continue;
                }
                staged.clear();
                echoes.clear();
                let _ = socket.try_recv(|from, datagram| {
                    staged.extend_from_slice(datagram);
                    echoes.push((from, datagram.len()));
                });
                let mut at = 0;
                for &(to, len) in &echoes {
                    queue.push(&socket, to, &staged[at..at + len]);
                    at += len;
                }
                let _ = queue.flush(&socket).await;
            }
        })
    })
}

/// A child process killed and reaped on every path.
pub(crate) struct ChildGuard(pub Child);

impl ChildGuard {
    pub fn cpu(&self) -> CpuAccount {
        CpuAccount::Process(self.0.id())
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A UDP port free on loopback at the time of the call.
pub(crate) fn free_udp_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `command` (its output discarded) and waits until it has bound 127.0.0.1:`port`.
pub(crate) fn start_bound_process(mut command: Command, what: &str, port: u16) -> anyhow::Result<ChildGuard> {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let mut guard = ChildGuard(child);
    let deadline = Instant::now() + Duration::from_secs(5);
    while UdpSocket::bind(("127.0.0.1", port)).is_ok() {
        if let Some(status) = guard.0.try_wait()? {
            anyhow::bail!("{what} ended with {status} before binding 127.0.0.1:{port}");
        }
        if Instant::now() > deadline {
            anyhow::bail!("{what} did not bind 127.0.0.1:{port}");
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(guard)
}

/// usrsctp's echo server on `encaps_port`, listening on SCTP port 7, answering to
/// `peer_encaps_port`.
pub(crate) fn start_usrsctp_echo(
    binary: &Path,
    encaps_port: u16,
    peer_encaps_port: u16,
) -> anyhow::Result<ChildGuard> {
    let mut command = server_command(binary);
    command.arg(encaps_port.to_string()).arg(peer_encaps_port.to_string());
    let guard = start_bound_process(command, &binary.display().to_string(), encaps_port)?;
    // usrsctp binds its UDP socket inside usrsctp_init, before its SCTP socket listens.
    thread::sleep(Duration::from_millis(300));
    Ok(guard)
}

/// The OpenSSL anchor: a real `DTLSv1_listen` loop with a cookie callback (HMAC-SHA256 of the
/// client's address, as RFC 6347 §4.2.1 suggests), compiled here against the system's libssl
/// because the openssl crate does not expose `DTLSv1_listen`.
const DTLS_LISTEN_C: &str = include_str!("dtls_listen.c");

/// A scratch directory removed when dropped.
pub(crate) struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(name: &str) -> anyhow::Result<ScratchDir> {
        let dir = std::env::temp_dir().join(format!("fastshake-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles the `DTLSv1_listen` loop with `cc` into `dir`; returns the program.
pub(crate) fn build_dtls_listen(dir: &Path) -> anyhow::Result<PathBuf> {
    let source = dir.join("dtls_listen.c");
    let program = dir.join("dtls_listen");
    std::fs::write(&source, DTLS_LISTEN_C)?;
    let output = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&program)
        .arg(&source)
        .args(["-lssl", "-lcrypto"])
        .output()
        .context("running cc (Debian gcc, libssl-dev)")?;
    anyhow::ensure!(
        output.status.success(),
        "cc could not build the DTLSv1_listen loop: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(program)
}

/// The compiled `DTLSv1_listen` loop on 127.0.0.1:`port`.
pub(crate) fn start_dtls_listen(program: &Path, port: u16) -> anyhow::Result<ChildGuard> {
    let mut command = server_command(program);
    command.arg(port.to_string());
    start_bound_process(command, "the OpenSSL DTLSv1_listen loop", port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_parses_from_schedstat_and_stat() {
        assert_eq!(parse_schedstat("155997 3470923 2\n"), Some(Duration::from_nanos(155_997)));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        // A command name with spaces and a ')' of its own; utime 7, stime 5 ticks.
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 10 0 0";
        assert_eq!(parse_stat_cpu(stat), Some(Duration::from_millis(120)));
        assert_eq!(parse_stat_cpu("42 (short) S 1"), None);
    }

    #[test]
    fn drops_are_summed_over_the_sockets_of_the_ports_asked_for() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  1: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 1 2 0000000000000000 17
  2: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 2 2 0000000000000000 3
  3: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 3 2 0000000000000000 99
  garbage line
";
        assert_eq!(parse_udp_drops(table, &[8080]), 20);
        assert_eq!(parse_udp_drops(table, &[8080, 53]), 119);
        assert_eq!(parse_udp_drops(table, &[1]), 0);
    }

    #[test]
    fn this_threads_cpu_account_is_readable() {
        let account = CpuAccount::this_thread().expect("Linux has /proc/thread-self");
        assert!(account.read().is_some());
        assert!(CpuAccount::Process(std::process::id()).read().is_some());
    }
}
