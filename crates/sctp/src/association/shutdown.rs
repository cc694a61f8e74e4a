//! The graceful shutdown (RFC 9260 §9.2): SHUTDOWN once our data is acknowledged,
//! SHUTDOWN-ACK once the peer's is, SHUTDOWN-COMPLETE; T2-shutdown retransmits, the
//! T5-shutdown-guard bounds the whole.

use fastshake_core::Instant;

use super::timer::Timer;
use super::Association;
use crate::packet::{Chunk, Packet, SackChunk};
use crate::queue::tsn_lt;
use crate::{AssociationState, Error, Event};

impl Association {
    /// The user asked for a shutdown.
    pub(crate) fn shutdown(&mut self) {
        match self.state {
            AssociationState::Established => {
                self.state = AssociationState::ShutdownPending;
                self.user_pending = true;
            }
            AssociationState::CookieWait | AssociationState::CookieEchoed => {
                self.abort("shutdown before open")
            }
            _ => {}
        }
    }

    /// Sends SHUTDOWN or SHUTDOWN-ACK once nothing of ours is outstanding.
    pub(super) fn check_shutdown_progress(&mut self, now: Instant) {
        if !self.data.send.is_empty() {
            return;
        }
        match self.state {
            AssociationState::ShutdownPending => {
                let cum = self.data.cumulative_tsn();
                self.control.push_back(Chunk::Shutdown { cumulative_tsn_ack: cum });
                self.state = AssociationState::ShutdownSent;
                self.timers.set(Timer::T2Shutdown, now + self.paths.rto());
                self.timers.stop(Timer::T3Rtx);
                let guard = self.config.shutdown_guard.unwrap_or(self.config.rto_max.saturating_mul(5));
                self.timers.set(Timer::ShutdownGuard, now + guard);
            }
            AssociationState::ShutdownReceived => {
                self.control.push_back(Chunk::ShutdownAck);
                self.state = AssociationState::ShutdownAckSent;
                self.timers.set(Timer::T2Shutdown, now + self.paths.rto());
                self.timers.stop(Timer::T3Rtx);
            }
            _ => {}
        }
    }

    pub(super) fn on_shutdown(&mut self, now: Instant, cum_ack: u32) {
        use AssociationState::*;
        match self.state {
            Established | ShutdownPending | ShutdownReceived => {
                // Its cumulative TSN acknowledges our data like a SACK without gap blocks.
                let sack = SackChunk {
                    cumulative_tsn_ack: cum_ack,
                    a_rwnd: self.congestion.peer_rwnd,
                    ..Default::default()
                };
                if !tsn_lt(cum_ack, self.data.send.cum_ack) {
                    self.apply_sack(now, &sack, false);
                }
                self.state = ShutdownReceived;
                self.check_shutdown_progress(now);
            }
            ShutdownSent => {
                // Both sides shut down at once (RFC 9260 §9.2).
                self.control.push_back(Chunk::ShutdownAck);
                self.state = ShutdownAckSent;
                self.timers.set(Timer::T2Shutdown, now + self.paths.rto());
            }
            _ => {}
        }
    }

    pub(super) fn on_shutdown_ack(&mut self) {
        if matches!(self.state, AssociationState::ShutdownSent | AssociationState::ShutdownAckSent) {
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks.push(Chunk::ShutdownComplete { t_bit: false });
            self.emit_packet(self.paths.primary_index(), p);
            self.close(Event::Closed);
        }
    }

    pub(super) fn on_shutdown_complete(&mut self) {
        if self.state == AssociationState::ShutdownAckSent {
            self.close(Event::Closed);
        }
    }

    /// DATA while our SHUTDOWN is out: answer with SHUTDOWN again and restart T2 (RFC 9260 §9.2).
    pub(super) fn on_data_while_shutting_down(&mut self, now: Instant) {
        if self.state == AssociationState::ShutdownSent {
            let cum = self.data.cumulative_tsn();
            self.control.push_back(Chunk::Shutdown { cumulative_tsn_ack: cum });
            self.timers.set(Timer::T2Shutdown, now + self.paths.rto());
        }
    }

    /// T2-shutdown expired: the SHUTDOWN or SHUTDOWN-ACK goes again. Returns false when the
    /// association failed.
    pub(super) fn on_t2_expiry(&mut self, now: Instant) -> bool {
        self.t2_retransmits += 1;
        if self.t2_retransmits > self.config.max_retransmits {
            self.fail(Error::RetransmitLimit);
            return false;
        }
        self.paths.rto.back_off();
        match self.state {
            AssociationState::ShutdownSent => {
                let cum = self.data.cumulative_tsn();
                self.control.push_back(Chunk::Shutdown { cumulative_tsn_ack: cum });
                self.stats.shutdown_retransmits += 1;
            }
            AssociationState::ShutdownAckSent => {
                self.control.push_back(Chunk::ShutdownAck);
                self.stats.shutdown_retransmits += 1;
            }
            _ => {}
        }
        self.timers.set(Timer::T2Shutdown, now + self.paths.rto());
        true
    }

    /// T5-shutdown-guard expired: a shutdown the peer keeps from completing (it never answers,
    /// or keeps T2 restarting with DATA) ends with an ABORT (RFC 9260 §9.2).
    pub(super) fn on_shutdown_guard_expiry(&mut self) {
        self.send_abort(None);
        self.close(Event::Aborted { reason: "shutdown guard timer (T5) expired".into() });
    }
}
