//! A DTLS server app: one [`Endpoint`] for every client, echoing each request record (`records`)
//! and counting what its sessions did. With [`DtlsEchoServer::with_mobility`] it gives sessions
//! ports of their own as seed 001's IPC and TCS servers do ([`super::session_ports`]).
//!
//! Every copy of a request is echoed (the first echo may have been lost); the application
//! delivers each request number once per session. A request copy that arrives twice is one
//! record the engine delivered twice. A request that arrives before the handshake is over came
//! as DTLS 1.3 0-RTT early data; the first copy of the first request of a session that offered
//! early data is counted by how it came (0-RTT, or after the handshake).

use super::records::{self, RequestId};
use super::session_ports::SessionPorts;
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_dtls::{ConnectionHandle, Endpoint, Error, Event, MobilityMode, ServerConfig};
use fastshake_sim::apps::{App, AppStats, HandshakeStats};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// The record a session that offers early data sends as 0-RTT: its first request's first copy.
const EARLY_RECORD: RequestId = RequestId { seq: 0, attempt: 0 };

/// One session the server ended other than by the client's close_notify.
#[derive(Clone, Debug)]
pub struct ServerFailure {
    /// The client's address when it failed.
    pub peer: Option<SocketAddr>,
    pub at: Instant,
    /// Whether the handshake had completed.
    pub established: bool,
    pub class: String,
}

/// What the server saw, for the report.
#[derive(Clone, Debug, Default)]
pub struct ServerTally {
    /// Handshakes completed, and how many of them resumed.
    pub connected: u32,
    pub resumed: u32,
    /// Flights the server resent, summed over completed handshakes.
    pub flights_resent: u64,
    /// Sessions that failed (idle expiry of established sessions is counted apart).
    pub failures: Vec<ServerFailure>,
    /// Established sessions closed for silence (their close_notify was lost).
    pub idle_expired: u32,
    /// Request records received; distinct request numbers delivered; copies received twice.
    pub requests_received: u64,
    pub requests_delivered: u64,
    pub duplicate_requests: u64,
    pub echoes_sent: u64,
    /// Sessions that followed their client to a new address.
    pub path_changes: u32,
    /// DTLS 1.3 handshakes that offered early data, and those whose early data was taken.
    pub early_offered: u32,
    pub early_accepted: u32,
    /// In those sessions, the first copy of the first request (the early record): delivered
    /// before the handshake was over (as 0-RTT), or after it.
    pub early_delivered_0rtt: u32,
    pub early_delivered_after: u32,
    /// Request records delivered before their session's handshake was over (0-RTT).
    pub requests_before_handshake: u64,
    /// With [`DtlsEchoServer::with_client_ledger`]: copies of each request number received per
    /// client (its PSK identity), across its sessions.
    pub copies_by_client: BTreeMap<Vec<u8>, BTreeMap<u16, u32>>,
}

/// A session as the server application knows it, from `Event::Accepted` on.
#[derive(Default)]
struct Ledger {
    peer: Option<SocketAddr>,
    /// The client's PSK identity, from `Event::Connected` on.
    identity: Option<Vec<u8>>,
    established: bool,
    /// The handshake offered early data.
    early: bool,
    seen: BTreeSet<RequestId>,
    delivered: BTreeSet<u16>,
    next_echo: u32,
}

/// The server app (see the module documentation).
pub struct DtlsEchoServer {
    endpoint: Endpoint,
    /// Echo requests (off: count handshakes only).
    echo: bool,
    /// Count requests per client across sessions (`ServerTally::copies_by_client`).
    client_ledger: bool,
    sessions: BTreeMap<ConnectionHandle, Ledger>,
    /// IPC and TCS: the sessions' own ports.
    ports: Option<SessionPorts>,
    /// The address datagrams arrive at (the host's), for the sessions' own ports.
    ip: IpAddr,
    handshakes: HandshakeStats,
    pub tally: ServerTally,
}

impl DtlsEchoServer {
    /// A server with `config`, its endpoint seeded with `seed`; a configuration that cannot
    /// work is refused.
    pub fn new(config: Arc<ServerConfig>, seed: [u8; 32], echo: bool) -> Result<Self, fastshake_dtls::Error> {
        Ok(DtlsEchoServer {
            endpoint: Endpoint::new(config, seed)?,
            echo,
            client_ledger: false,
            sessions: BTreeMap::new(),
            ports: None,
            ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            handshakes: HandshakeStats::default(),
            tally: ServerTally::default(),
        })
    }

    /// Gives sessions sockets as `mode` says (seed 001): IPC and TCS sessions get ports of their
    /// own from `first_port` on. The engine's `Mobility` comes from `config`
    /// (`mode.server_mobility()`).
    pub fn with_mobility(mut self, mode: MobilityMode, first_port: u16) -> Self {
        self.ports = mode.has_session_sockets().then(|| SessionPorts::new(mode, first_port));
        self
    }

    /// Counts the copies of each request number per client, across its sessions (a client that
    /// reconnects and sends a request again is one client).
    pub fn with_client_ledger(mut self) -> Self {
        self.client_ledger = true;
        self
    }

    /// Why sessions stayed on the welcome port although the mode gives them ports of their own.
    pub fn stayed_on_welcome_port(&self) -> &[String] {
        self.ports.as_ref().map_or(&[], |p| &p.stayed)
    }

    /// The endpoint, to read its counters.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn drain(&mut self, now: Instant) {
        while let Some((handle, event)) = self.endpoint.poll_event() {
            if let Some(ports) = self.ports.as_mut() {
                ports.after_event(&mut self.endpoint, handle, &event, self.ip);
            }
            match event {
                Event::Accepted => {
                    let peer = self.endpoint.connection(handle).map(|c| c.remote());
                    self.sessions.insert(handle, Ledger { peer, ..Ledger::default() });
                }
                Event::Connected(summary) => {
                    let ledger = self.sessions.entry(handle).or_default();
                    ledger.established = true;
                    ledger.identity = Some(summary.psk_identity.clone());
                    if let Some(accepted) = summary.early_data {
                        ledger.early = true;
                        self.tally.early_offered += 1;
                        self.tally.early_accepted += u32::from(accepted);
                        if ledger.seen.contains(&EARLY_RECORD) {
                            self.tally.early_delivered_0rtt += 1;
                        }
                    }
                    self.tally.connected += 1;
                    self.tally.resumed += u32::from(summary.resumed);
                    self.tally.flights_resent += u64::from(summary.retransmissions);
                    let bytes = summary.bytes_sent + summary.bytes_received;
                    let kind = super::dtls_kind(summary.version, summary.resumption);
                    self.handshakes.complete(kind, Some(summary.duration.as_nanos() as u64), bytes);
                }
                Event::ApplicationData(data) => self.on_request(handle, &data),
                Event::PathChanged(peer) => {
                    self.sessions.entry(handle).or_default().peer = Some(peer);
                    self.tally.path_changes += 1;
                }
                Event::Closed | Event::Evicted { .. } => {
                    self.sessions.remove(&handle);
                }
                Event::Refused { .. } | Event::SessionTicket(_) => {}
                Event::Failed(error) => {
                    let ledger = self.sessions.remove(&handle).unwrap_or_default();
                    if matches!(error, Error::IdleTimeout { .. }) && ledger.established {
                        self.tally.idle_expired += 1;
                    } else {
                        if ledger.established {
                            self.handshakes.sessions_failed += 1;
                        } else {
                            self.handshakes.failed += 1;
                        }
                        self.tally.failures.push(ServerFailure {
                            peer: ledger.peer,
                            at: now,
                            established: ledger.established,
                            class: super::error_class(&error),
                        });
                    }
                }
            }
        }
    }

    fn on_request(&mut self, handle: ConnectionHandle, data: &[u8]) {
        let Some(id) = records::parse_request(data) else { return };
        self.tally.requests_received += 1;
        let ledger = self.sessions.entry(handle).or_default();
        let first_copy = ledger.seen.insert(id);
        if !first_copy {
            self.tally.duplicate_requests += 1;
        }
        if !ledger.established {
            self.tally.requests_before_handshake += 1;
        } else if first_copy && ledger.early && id == EARLY_RECORD {
            self.tally.early_delivered_after += 1;
        }
        if ledger.delivered.insert(id.seq) {
            self.tally.requests_delivered += 1;
        }
        if let Some(identity) = ledger.identity.as_ref().filter(|_| self.client_ledger) {
            let copies = self.tally.copies_by_client.entry(identity.clone()).or_default();
            *copies.entry(id.seq).or_default() += 1;
        }
        if self.echo {
            let echo = records::echo(id, ledger.next_echo, data.len());
            ledger.next_echo += 1;
            if self.endpoint.send(handle, &echo).is_ok() {
                self.tally.echoes_sent += 1;
            }
        }
    }
}

impl SansIo for DtlsEchoServer {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        self.ip = local.ip();
        self.endpoint.handle_datagram(now, local, remote, datagram);
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.endpoint.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain(now);
    }
}

impl App for DtlsEchoServer {
    fn poll_bind(&mut self) -> Option<u16> {
        self.ports.as_mut()?.poll_bind()
    }

    fn stats(&self) -> Option<AppStats> {
        Some(AppStats { answered: self.tally.echoes_sent, ..AppStats::default() })
    }

    fn handshakes(&self) -> Option<HandshakeStats> {
        Some(self.handshakes.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
