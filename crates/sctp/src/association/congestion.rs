//! Congestion control (RFC 9260 §7.2): slow start and congestion avoidance, one reduction per
//! window in Fast Recovery, one MTU after T3-rtx; with the peer's receiver window, what may be
//! in flight.

use crate::queue::tsn_lt;

/// The congestion state of one association (one destination: data goes on the primary path).
#[derive(Clone, Debug)]
pub(super) struct Congestion {
    cwnd: usize,
    ssthresh: usize,
    partial_bytes_acked: usize,
    /// While in Fast Recovery: the TSN whose acknowledgement ends it.
    fast_recovery_exit: Option<u32>,
    /// The peer's latest advertised receiver window.
    pub(super) peer_rwnd: u32,
}

/// What one SACK acknowledged, as congestion control sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Acked {
    /// Bytes newly acknowledged (cumulatively or in gap blocks).
    pub(super) bytes: usize,
    /// Whether the cumulative TSN moved.
    pub(super) cum_advanced: bool,
    /// The cumulative TSN after the SACK.
    pub(super) cum_ack: u32,
    /// Bytes in flight before the SACK.
    pub(super) flight_before: usize,
}

impl Congestion {
    /// The initial window: min(4·MTU, max(2·MTU, 4404)) (§7.2.1).
    pub(super) fn new(mtu: usize) -> Congestion {
        Congestion {
            cwnd: (4 * mtu).min((2 * mtu).max(4404)),
            ssthresh: usize::MAX,
            partial_bytes_acked: 0,
            fast_recovery_exit: None,
            peer_rwnd: 0,
        }
    }

    /// The peer's initial window, from its INIT, INIT-ACK or our state cookie: also the initial
    /// ssthresh (§7.2.1).
    pub(super) fn set_peer_window(&mut self, a_rwnd: u32) {
        self.peer_rwnd = a_rwnd;
        self.ssthresh = a_rwnd as usize;
    }

    /// Bytes that may be in flight: the smaller of cwnd and the peer's window, and one MTU
    /// whatever the window when nothing is in flight (§6.1 rule A, zero window probe).
    pub(super) fn window(&self, flight: usize, mtu: usize) -> usize {
        self.cwnd.min((self.peer_rwnd as usize).max(if flight == 0 { mtu } else { 0 }))
    }

    /// A SACK arrived; `grow` is false for acknowledgements that are not SACKs of DATA we sent
    /// after the handshake (an ALT-SACK, the cumulative TSN of a SHUTDOWN).
    pub(super) fn on_ack(&mut self, acked: Acked, mtu: usize, grow: bool) {
        let in_fast_recovery = self.fast_recovery_exit.is_some();
        if let Some(exit) = self.fast_recovery_exit {
            if !tsn_lt(acked.cum_ack, exit) {
                self.fast_recovery_exit = None;
            }
        }
        // cwnd grows only when the cumulative ack moves and not during Fast Recovery (§7.2.1, §7.2.4).
        if !(grow && acked.bytes > 0 && acked.cum_advanced && !in_fast_recovery) {
            return;
        }
        let full_window_used = acked.flight_before >= self.cwnd.saturating_sub(mtu);
        if self.cwnd <= self.ssthresh {
            if full_window_used {
                self.cwnd += acked.bytes.min(mtu);
            }
        } else {
            self.partial_bytes_acked += acked.bytes;
            if self.partial_bytes_acked >= self.cwnd && full_window_used {
                self.partial_bytes_acked -= self.cwnd;
                self.cwnd += mtu;
            }
        }
    }

    /// Fast retransmit: one reduction per window. Fast Recovery lasts until `highest_sent`, the
    /// highest TSN sent now, is acknowledged (§7.2.4).
    pub(super) fn on_fast_retransmit(&mut self, highest_sent: u32, mtu: usize) {
        if self.fast_recovery_exit.is_none() {
            self.ssthresh = (self.cwnd / 2).max(4 * mtu);
            self.cwnd = self.ssthresh;
            self.partial_bytes_acked = 0;
            self.fast_recovery_exit = Some(highest_sent);
        }
    }

    /// T3-rtx expired: back to one MTU (§7.2.3).
    pub(super) fn on_retransmit_timeout(&mut self, mtu: usize) {
        self.ssthresh = (self.cwnd / 2).max(4 * mtu);
        self.cwnd = mtu;
        self.partial_bytes_acked = 0;
        self.fast_recovery_exit = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: usize = 1200;

    fn acked(bytes: usize, cum_ack: u32, flight_before: usize) -> Acked {
        Acked { bytes, cum_advanced: true, cum_ack, flight_before }
    }

    #[test]
    fn slow_start_then_congestion_avoidance() {
        let mut c = Congestion::new(MTU);
        assert_eq!(c.cwnd, 4404);
        c.set_peer_window(6000);
        c.on_ack(acked(1000, 1, 4000), MTU, true);
        assert_eq!(c.cwnd, 5404, "slow start: the bytes acked, at most one MTU");
        c.on_ack(acked(1000, 2, 1000), MTU, true);
        assert_eq!(c.cwnd, 5404, "no growth while the window was not used");
        c.on_ack(acked(5000, 3, 5000), MTU, false);
        assert_eq!(c.cwnd, 5404, "no growth from an ALT-SACK or a SHUTDOWN");
        c.on_ack(acked(2000, 4, 5000), MTU, true);
        assert_eq!(c.cwnd, 6604);
        c.on_ack(acked(4000, 5, 6000), MTU, true);
        c.on_ack(acked(4000, 6, 6000), MTU, true);
        assert_eq!(c.cwnd, 6604 + MTU, "congestion avoidance: one MTU per window acked");
    }

    #[test]
    fn one_reduction_per_window_and_one_mtu_after_t3() {
        let mut c = Congestion::new(MTU);
        c.set_peer_window(1 << 20);
        c.cwnd = 20_000;
        c.on_fast_retransmit(100, MTU);
        assert_eq!((c.cwnd, c.ssthresh), (10_000, 10_000));
        c.on_fast_retransmit(120, MTU);
        assert_eq!(c.cwnd, 10_000, "still in Fast Recovery");
        c.on_ack(acked(1000, 99, 10_000), MTU, true);
        assert_eq!(c.cwnd, 10_000, "no growth in Fast Recovery");
        c.on_ack(acked(1000, 100, 10_000), MTU, true);
        c.on_fast_retransmit(130, MTU);
        assert_eq!(c.cwnd, 5_000, "a new window, a new reduction");
        c.on_retransmit_timeout(MTU);
        assert_eq!((c.cwnd, c.ssthresh), (MTU, 4 * MTU));
        assert_eq!(c.window(0, MTU), MTU);
        c.peer_rwnd = 0;
        assert_eq!(c.window(0, MTU), MTU, "a zero window still lets one packet probe it");
        assert_eq!(c.window(1, MTU), 0);
    }
}
