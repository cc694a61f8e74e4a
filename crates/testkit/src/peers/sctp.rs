//! For the SCTP interop tests: a recording UDP relay between a client and a server process,
//! and the counts `fastshake sctp` prints of what it sent again.

use super::{announced_port, free_udp_port, Fastshake, Peer};
use fastshake_sctp::packet::{Chunk, ErrorCause, InitChunk, Packet};
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
    /// The server's port: one it already listens on, or one chosen free for a server started
    /// after the relay (a peer that must be told its port).
    pub server_port: u16,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Relayed>>>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Relay {
    /// Relays between whoever sends first (the client) and a server that is to listen on
    /// `server_port` on 127.0.0.1, a port chosen free now.
    pub fn start() -> Relay {
        Relay::to_lossy(free_udp_port(), 0)
    }

    /// Relays between whoever sends first (the client) and a server that already listens on
    /// `server_port` on 127.0.0.1.
    pub fn to(server_port: u16) -> Relay {
        Relay::to_lossy(server_port, 0)
    }

    /// Like [`Relay::to`], but drops every `drop_every`-th datagram (0: none), in either
    /// direction: a deterministic lossy path.
    pub fn to_lossy(server_port: u16, drop_every: usize) -> Relay {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("binding the relay");
        socket.set_read_timeout(Some(Duration::from_millis(20))).expect("read timeout");
        let port = socket.local_addr().expect("relay address").port();
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

    /// Waits up to `timeout` until the client has sent `count` INITs (retransmissions
    /// included); returns the datagrams passed on by then.
    pub fn wait_for_client_inits(&self, count: usize, timeout: Duration) -> Vec<Relayed> {
        let deadline = std::time::Instant::now() + timeout;
        while client_inits(&self.datagrams()).len() < count && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        self.datagrams()
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

impl Fastshake {
    /// `fastshake sctp server` for SCTP port `sctp_port` with `extra` arguments, on a UDP port
    /// of 127.0.0.1 it chooses itself (so no other process can take it between a probe and the
    /// bind); returned with that port once it listens.
    pub fn sctp_server(self, sctp_port: &str, extra: &[&str]) -> (Peer, u16) {
        let mut args = vec!["sctp", "server", "--listen", "127.0.0.1:0", "--port", sctp_port];
        args.extend_from_slice(extra);
        let server = self.spawn(&args);
        let port = announced_port(&server, "listening on 127.0.0.1:");
        (server, port)
    }

    /// `fastshake sctp client` to UDP 127.0.0.1:`udp_port` and SCTP port `sctp_port` with
    /// `extra` arguments, that sends `payload`, ends its input and expects as many bytes back.
    pub fn sctp_echo_client(self, udp_port: u16, sctp_port: &str, payload: &[u8], extra: &[&str]) -> Peer {
        let connect = format!("127.0.0.1:{udp_port}");
        let expect = payload.len().to_string();
        let mut args = vec!["sctp", "client", "--connect", &connect, "--port", sctp_port];
        // Any free port: the cookie cache then keys by the IP address alone.
        args.extend(["--local", "127.0.0.1:0", "--expect-bytes", &expect, "--timeout-s", "20"]);
        args.extend_from_slice(extra);
        let mut client = self.spawn(&args);
        client.write(payload);
        client.close_stdin();
        client
    }
}

/// The client's INITs among the datagrams a [`Relay`] passed on.
pub fn client_inits(wire: &[Relayed]) -> Vec<InitChunk> {
    wire.iter()
        .filter(|(from_client, _)| *from_client)
        .filter_map(|(_, d)| Packet::parse(d).ok())
        .flat_map(|p| p.chunks)
        .filter_map(|c| match c {
            Chunk::Init(init) => Some(init),
            _ => None,
        })
        .collect()
}

/// An alternative-only server facing a client that does not know the extension, seen on the
/// `wire`: the client sent INITs and retransmitted, and every answer is a lone ERROR with a
/// non-empty ALT-COOKIE, never an INIT-ACK, and at most `num`/`den` times the client's smallest
/// INIT, so the server cannot be used for amplification. `client` names the peer in messages.
pub fn assert_alt_only_answers(wire: &[Relayed], client: &str, (num, den): (usize, usize), report: &str) {
    let inits: Vec<usize> = wire
        .iter()
        .filter(|(from_client, d)| {
            *from_client && Packet::parse(d).is_ok_and(|p| matches!(p.chunks[..], [Chunk::Init(_)]))
        })
        .map(|(_, d)| d.len())
        .collect();
    assert!(inits.len() >= 2, "{client} sent INITs and retransmitted: {inits:?}\n{report}");
    let smallest_init = inits.iter().copied().min().unwrap_or(0);
    let answers: Vec<&Vec<u8>> =
        wire.iter().filter(|(from_client, _)| !*from_client).map(|(_, d)| d).collect();
    assert!(!answers.is_empty(), "the server answered\n{report}");
    eprintln!(
        "{client} INIT sizes {inits:?}; our answers {:?}",
        answers.iter().map(|a| a.len()).collect::<Vec<_>>()
    );
    for answer in answers {
        let packet = Packet::parse(answer).expect("our answers parse");
        let alt_cookie_error = matches!(
            packet.chunks.as_slice(),
            [Chunk::Error { causes }] if matches!(causes.as_slice(), [ErrorCause::AltCookieRequired(c)] if !c.is_empty())
        );
        assert!(alt_cookie_error, "only ERROR with an ALT-COOKIE, never an INIT-ACK: {packet:?}");
        assert!(
            answer.len() * den <= smallest_init * num,
            "answer {} B, at most {num}/{den} of {client}'s INIT of {smallest_init} B",
            answer.len()
        );
    }
}

/// Our echo server (`--exit-after 1`) once `peer`, a client that knows only the regular
/// handshake, has sent `received` and closed: the server exits cleanly, printed what it received
/// once and in order, opened the association by the regular handshake, closed it gracefully
/// and sent nothing again. Returns the report (both transcripts) for further checks.
pub fn assert_served_regular_client(server: &mut Peer, client: &Peer, peer: &str, received: &str) -> String {
    let server_status = server.wait_timeout(Duration::from_secs(10));
    let report = format!("{}\n{}", client.transcript(), server.transcript());
    assert!(server_status.is_some_and(|s| s.success()), "our server did not exit cleanly\n{report}");
    assert_eq!(server.stdout.text(), received, "our server got every line exactly once, in order\n{report}");
    let stderr = server.stderr.text();
    assert!(
        stderr.contains("opened by the regular handshake"),
        "{peer} speaks the regular handshake\n{report}"
    );
    assert!(stderr.contains("closed gracefully"), "graceful shutdown\n{report}");
    // The one association, labelled by the worker that holds it.
    assert_eq!(resent(&stderr, "sctp server: association "), Resent::default(), "nothing resent\n{report}");
    report
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
