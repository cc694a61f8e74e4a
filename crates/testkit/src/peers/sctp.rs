//! For the SCTP interop tests: a recording UDP relay between a client and a server process,
//! and the counts `fastshake sctp` prints of what it sent again.

use super::free_udp_port;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A datagram the relay passed on: (from the client, payload).
pub type Relayed = (bool, Vec<u8>);

/// A UDP relay on loopback between one client and one server that records what passes, so a
/// test can look at the packets on the wire. Stops (and joins its thread) when dropped.
pub struct Relay {
    /// The relay's own port: the client connects here.
    pub port: u16,
    /// The server's port, chosen free while the relay's port is held, so the two never clash.
    pub server_port: u16,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Relayed>>>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Relay {
    /// Relays between whoever sends first (the client) and the server that is to listen on
    /// `server_port` on 127.0.0.1.
    pub fn start() -> Relay {
        Relay::start_lossy(0)
    }

    /// Like [`Relay::start`], but drops every `drop_every`-th datagram (0: none), in either
    /// direction: a deterministic lossy path.
    pub fn start_lossy(drop_every: usize) -> Relay {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("binding the relay");
        socket.set_read_timeout(Some(Duration::from_millis(20))).expect("read timeout");
        let port = socket.local_addr().expect("relay address").port();
        let server_port = free_udp_port();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let handle = {
            let (stop, log) = (stop.clone(), log.clone());
            thread::spawn(move || {
                let server = SocketAddr::from(([127, 0, 0, 1], server_port));
                let mut client = None;
                let mut buf = [0u8; 65536];
                let mut seen = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                    // usrsctp answers from an IPv6 socket: compare ports only.
                    let from_server = from.port() == server_port;
                    let to = if from_server {
                        match client {
                            Some(c) => c,
                            None => continue,
                        }
                    } else {
                        client = Some(from);
                        server
                    };
                    seen += 1;
                    if drop_every > 0 && seen.is_multiple_of(drop_every) {
                        continue;
                    }
                    log.lock().expect("relay log").push((!from_server, buf[..n].to_vec()));
                    let _ = socket.send_to(&buf[..n], to);
                }
            })
        };
        Relay { port, server_port, stop, log, handle: Some(handle) }
    }

    /// Datagrams passed on so far: (from the client, payload).
    pub fn datagrams(&self) -> Vec<Relayed> {
        self.log.lock().expect("relay log").clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// What an association of `fastshake sctp` sent again, from its "resent:" summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resent {
    /// INIT and COOKIE-ECHO sent again (T1).
    pub handshake: u64,
    /// DATA chunks sent again (T3-rtx, fast retransmit, zero-RTT data the peer did not take).
    pub data: u64,
    /// SHUTDOWN and SHUTDOWN-ACK sent again (T2).
    pub shutdown: u64,
    /// T3-rtx expiries.
    pub t3: u64,
    /// Fast retransmits.
    pub fast: u64,
}

/// Reads "PREFIX resent: A INIT/COOKIE-ECHO, B DATA chunk(s), C SHUTDOWN/SHUTDOWN-ACK; D T3-rtx
/// expiries, E fast retransmits" from `stderr`.
pub fn resent(stderr: &str, prefix: &str) -> Resent {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(prefix) && l.contains("resent:"))
        .unwrap_or_else(|| panic!("no {prefix:?} resent line in\n{stderr}"));
    let numbers: Vec<u64> = line
        .split_once("resent:")
        .map(|(_, rest)| rest.split_whitespace().filter_map(|w| w.parse().ok()).collect())
        .unwrap_or_default();
    let [handshake, data, shutdown, t3, fast] = numbers[..] else {
        panic!("cannot read the resent counts in {line:?}");
    };
    Resent { handshake, data, shutdown, t3, fast }
}

/// Lines of `text` containing `needle`.
pub fn count_lines(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}
