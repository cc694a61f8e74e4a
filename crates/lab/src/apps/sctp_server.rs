//! An SCTP server app (over UDP encapsulation, RFC 6951): one listening [`Endpoint`] that
//! echoes every message on the stream it came on, and counts the handshakes that opened its
//! associations by kind.
//!
//! A server holds no state before a handshake completes (the state cookie, the ALT-COOKIE), so
//! it cannot time one: its handshakes have no durations, and a handshake it never saw complete
//! is not a failure it can tell.

use super::sctp_client::sctp_kind;
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_sctp::{AssociationHandle, Endpoint, Event, Message};
use fastshake_sim::apps::{App, AppStats, HandshakeStats};
use std::collections::BTreeSet;
use std::net::SocketAddr;

/// The server app (see the module documentation).
pub struct SctpEchoServer {
    endpoint: Endpoint,
    echo: bool,
    /// Associations open, to tell a failure after the handshake from one before.
    open: BTreeSet<AssociationHandle>,
    handshakes: HandshakeStats,
    /// Messages received, and echoed.
    pub messages: u64,
    pub echoed: u64,
}

impl SctpEchoServer {
    /// A server around `endpoint` (its config listening), echoing messages when `echo`.
    pub fn new(endpoint: Endpoint, echo: bool) -> Self {
        SctpEchoServer {
            endpoint,
            echo,
            open: BTreeSet::new(),
            handshakes: HandshakeStats::default(),
            messages: 0,
            echoed: 0,
        }
    }

    /// The endpoint, to read its counters.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn drain(&mut self) {
        while let Some((handle, event)) = self.endpoint.poll_event() {
            match event {
                Event::Connected { handshake, zero_rtt_accepted, .. } => {
                    self.open.insert(handle);
                    let bytes =
                        self.endpoint.association(handle).map_or(0, |a| a.stats.bytes_in + a.stats.bytes_out);
                    self.handshakes.complete(&sctp_kind(handshake, zero_rtt_accepted), None, bytes);
                }
                Event::Message(m) => {
                    self.messages += 1;
                    if self.echo {
                        let answer = Message { unordered: false, ..m };
                        if self.endpoint.send(handle, answer).is_ok() {
                            self.echoed += 1;
                        }
                    }
                }
                Event::Closed => {
                    self.open.remove(&handle);
                }
                Event::Aborted { .. } | Event::Failed(_) => {
                    if self.open.remove(&handle) {
                        self.handshakes.sessions_failed += 1;
                    } else {
                        self.handshakes.failed += 1;
                    }
                }
                // The lab's applications use no stream reset (RFC 6525).
                Event::AltCookie { .. }
                | Event::IncomingStreamsReset { .. }
                | Event::OutgoingStreamsReset { .. } => {}
            }
        }
    }
}

impl SansIo for SctpEchoServer {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        self.endpoint.handle_datagram(now, local, remote, datagram);
        self.drain();
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.endpoint.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain();
    }
}

impl App for SctpEchoServer {
    fn stats(&self) -> Option<AppStats> {
        Some(AppStats { answered: self.echoed, ..AppStats::default() })
    }

    fn handshakes(&self) -> Option<HandshakeStats> {
        Some(self.handshakes.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
