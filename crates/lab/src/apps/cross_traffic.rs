//! Open-loop cross traffic: one datagram to a peer every `interval`, for ever.
//!
//! A link's Gilbert–Elliott loss moves once per datagram, so a "burst of 4 datagrams" lasts as
//! long as 4 datagrams take to pass. On a link that carries only a few sessions' retransmissions
//! (1, 2, 4 s apart) that stretches a burst over minutes; steady traffic beside them keeps the
//! chain moving at a known pace, as the other users of a real shared link do. Pointed at the
//! simulator's `Echo` (its requests start with `'Q'`), it loads both directions.

use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_sim::apps::App;
use std::net::SocketAddr;
use std::time::Duration;

pub struct CrossTraffic {
    peer: SocketAddr,
    interval: Duration,
    payload_len: usize,
    next_at: Instant,
    due: bool,
    /// Datagrams sent and received.
    pub sent: u64,
    pub received: u64,
}

impl CrossTraffic {
    /// `payload_len`-byte datagrams to `peer` every `interval` from `start`.
    pub fn new(peer: SocketAddr, interval: Duration, payload_len: usize, start: Instant) -> Self {
        CrossTraffic {
            peer,
            interval,
            payload_len: payload_len.max(9),
            next_at: start,
            due: false,
            sent: 0,
            received: 0,
        }
    }
}

impl SansIo for CrossTraffic {
    fn handle_datagram(
        &mut self,
        _now: Instant,
        _local: SocketAddr,
        _remote: SocketAddr,
        _datagram: &mut [u8],
    ) {
        self.received += 1;
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        if !std::mem::take(&mut self.due) {
            return None;
        }
        let mut payload = vec![0u8; self.payload_len];
        payload[0] = b'Q';
        payload[1..9].copy_from_slice(&self.sent.to_be_bytes());
        self.sent += 1;
        Some(Transmit { src: None, dst: self.peer, payload })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.next_at)
    }

    fn handle_timeout(&mut self, now: Instant) {
        if now >= self.next_at {
            self.due = true;
            self.next_at += self.interval;
        }
    }
}

impl App for CrossTraffic {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
