//! User data (RFC 9260 §6): the send and receive queues, TSN bookkeeping, SACKs and the
//! delayed SACK, and the packing of control chunks, a SACK and DATA into packets.

use fastshake_core::Instant;

use super::congestion::Acked;
use super::timer::Timer;
use super::Association;
use crate::packet::{Chunk, DataChunk, ErrorCause, ForwardTsnChunk, Packet, SackChunk, COMMON_HEADER_LEN};
use crate::queue::{DataVerdict, ReceiveQueue, RecvBudget, SendQueue};
use crate::{AssociationState, Config, Error, Message, Reliability};

/// Most bytes of user data queued per association and not yet acknowledged.
const MAX_SEND_BUFFER: usize = crate::queue::MAX_BEYOND_WINDOW;

/// The data both ways and their acknowledgements.
#[derive(Debug)]
pub(super) struct DataState {
    pub(super) send: SendQueue,
    /// The peer's data; made when the peer's initial TSN is known.
    pub(super) recv: Option<ReceiveQueue>,
    /// The endpoint's receive buffer cap, shared by all its associations.
    budget: RecvBudget,
    /// Negotiated outbound and inbound streams.
    pub(super) streams_out: u16,
    pub(super) streams_in: u16,
    /// A SACK goes in the next packet.
    pub(super) sack_now: bool,
    /// Packets with DATA received since the last SACK (every second one is acknowledged at
    /// once, §6.2).
    pub(super) packets_since_sack: u32,
    /// Both sides announced PR-SCTP (RFC 3758 §3.3): streams' reliability is honoured and
    /// FORWARD-TSN goes both ways.
    pub(super) partial_reliability: bool,
    /// A FORWARD-TSN goes in the next packet if abandoned chunks wait at the front (after a
    /// SACK, a T3-rtx expiry or an abandonment: RFC 3758 §3.5 C3, A5).
    forward_tsn_due: bool,
}

impl DataState {
    pub(super) fn new(initial_tsn: u32, config: &Config, budget: RecvBudget) -> DataState {
        DataState {
            send: SendQueue::new(initial_tsn, config.streams_out),
            recv: None,
            budget,
            streams_out: config.streams_out,
            streams_in: config.streams_in,
            sack_now: false,
            packets_since_sack: 0,
            partial_reliability: false,
            forward_tsn_due: false,
        }
    }

    /// The receive queue for a peer whose first TSN is `peer_initial_tsn`.
    pub(super) fn open_receive(&mut self, peer_initial_tsn: u32, window: u32) {
        self.recv = Some(ReceiveQueue::new(peer_initial_tsn, self.streams_in, window, self.budget.clone()));
    }

    /// The cumulative TSN we acknowledge (for SHUTDOWN).
    pub(super) fn cumulative_tsn(&self) -> u32 {
        self.recv.as_ref().map_or(0, ReceiveQueue::cumulative_tsn)
    }

    /// A SACK went (or an INIT-ACK carrying an ALT-SACK): nothing is owed until more DATA.
    fn sack_sent(&mut self) {
        self.sack_now = false;
        self.packets_since_sack = 0;
    }
}

impl Association {
    pub(super) fn max_fragment(&self) -> usize {
        self.mtu() - COMMON_HEADER_LEN - crate::packet::DATA_CHUNK_HEADER_LEN
    }

    /// Forgets the SACK owed: one went, inside an INIT-ACK's ALT-SACK or bundled.
    pub(super) fn sack_sent(&mut self) {
        self.data.sack_sent();
        self.timers.stop(Timer::DelayedSack);
    }

    /// One DATA chunk for the receive queue; complete messages become events.
    pub(super) fn on_data_chunk(&mut self, d: DataChunk) {
        let Some(recv) = self.data.recv.as_mut() else { return };
        let valid_stream = d.stream < self.data.streams_in;
        let stream = d.stream;
        match recv.on_data(d, valid_stream) {
            DataVerdict::New => {
                if !valid_stream {
                    self.control
                        .push_back(Chunk::Error { causes: vec![ErrorCause::InvalidStream { stream }] });
                }
            }
            DataVerdict::Duplicate => self.stats.duplicate_tsns += 1,
            DataVerdict::Dropped => {
                // RFC 9260 §6.2: a dropped chunk is answered by a SACK at once.
                self.stats.data_dropped += 1;
                self.data.sack_now = true;
            }
        }
        self.deliver_ready();
    }

    /// A FORWARD-TSN from a peer that announced PR-SCTP (RFC 3758 §3.6). Whatever it said
    /// (moved, out of date, beyond what we take), a SACK goes at once: it tells the sender where
    /// our cumulative TSN is, and a stale one may mean our last SACK was lost.
    pub(super) fn on_forward_tsn(&mut self, forward: &ForwardTsnChunk) {
        let Some(recv) = self.data.recv.as_mut() else { return };
        self.stats.forward_tsns_in += 1;
        recv.on_forward_tsn(forward.new_cumulative_tsn, &forward.streams);
        self.data.sack_now = true;
        self.deliver_ready();
    }

    /// Messages queued on `stream` from now on have `reliability`; without PR-SCTP on both
    /// sides it is kept but every message is reliable (RFC 8831 §6.1).
    pub(crate) fn set_stream_reliability(
        &mut self,
        stream: u16,
        reliability: Reliability,
    ) -> Result<(), Error> {
        if stream >= self.data.streams_out {
            return Err(Error::InvalidStream(stream));
        }
        self.data.send.set_reliability(stream, reliability);
        Ok(())
    }

    /// A packet carried DATA: acknowledge it at once or arm the delayed SACK (RFC 9260 §6.2).
    pub(super) fn on_data_packet(&mut self, now: Instant, immediate: bool) {
        self.data.packets_since_sack += 1;
        let recv_irregular = self.data.recv.as_ref().is_some_and(|r| r.has_gaps() || r.has_dups());
        if immediate
            || recv_irregular
            || self.data.packets_since_sack >= 2
            || self.state != AssociationState::Established
        {
            self.data.sack_now = true;
        } else if !self.timers.is_set(Timer::DelayedSack) {
            self.timers.set(Timer::DelayedSack, now + self.config.sack_delay);
        }
        self.on_data_while_shutting_down(now);
    }

    pub(super) fn on_sack(&mut self, now: Instant, sack: &SackChunk) {
        if matches!(self.state, AssociationState::CookieWait | AssociationState::Closed) {
            return;
        }
        self.apply_sack(now, sack, true);
    }

    /// Applies an acknowledgement to the send queue, the RTO, congestion control and T3-rtx;
    /// `congestion` is false for an ALT-SACK or a SHUTDOWN's cumulative TSN.
    pub(super) fn apply_sack(&mut self, now: Instant, sack: &SackChunk, congestion: bool) {
        let flight_before = self.data.send.flight_size();
        let out = self.data.send.on_sack(sack, now);
        if let Some(r) = out.rtt_sample {
            self.paths.rto.sample(r);
        }
        if out.cum_advanced {
            self.paths.peer_reachable();
        }
        let mtu = self.mtu();
        self.congestion.peer_rwnd = sack.a_rwnd;
        let acked = Acked {
            bytes: out.bytes_acked,
            cum_advanced: out.cum_advanced,
            cum_ack: self.data.send.cum_ack,
            flight_before,
        };
        self.congestion.on_ack(acked, mtu, congestion);
        if out.fast_retransmit {
            self.stats.fast_retransmits += 1;
            self.congestion.on_fast_retransmit(self.data.send.next_tsn.wrapping_sub(1), mtu);
        }
        // RFC 3758 §3.5 C3: the peer is still short of the Advanced.Peer.Ack.Point.
        let forward_tsn_owed = self.data.partial_reliability && self.data.send.forward_tsn_owed();
        self.data.forward_tsn_due |= forward_tsn_owed;
        if !self.data.send.has_unacked_sent() && !forward_tsn_owed {
            self.timers.stop(Timer::T3Rtx);
        } else if out.cum_advanced {
            self.timers.set(Timer::T3Rtx, now + self.paths.rto());
        }
        self.check_shutdown_progress(now);
    }

    /// T3-rtx expired: everything outstanding goes again, cwnd falls to one MTU, the RTO
    /// doubles (RFC 9260 §6.3.3, §7.2.3). Returns false when the association failed.
    pub(super) fn on_t3_expiry(&mut self) -> bool {
        self.stats.t3_expiries += 1;
        if self.paths.count_error(self.config.max_retransmits) {
            self.fail(Error::RetransmitLimit);
            return false;
        }
        self.paths.rto.back_off();
        self.congestion.on_retransmit_timeout(self.mtu());
        self.data.send.mark_all_for_retransmit();
        self.paths.count_primary_error(self.config.path_max_retransmits);
        // RFC 3758 §3.5 A5: a lost FORWARD-TSN goes again.
        self.data.forward_tsn_due = self.data.partial_reliability;
        true
    }

    /// Partial reliability before a flush: abandons the messages whose reliability ran out and
    /// queues the FORWARD-TSN owed (RFC 3758 §3.5); returns whether one was queued.
    fn abandon_and_forward(&mut self, now: Instant) -> bool {
        if !self.data.partial_reliability {
            return false;
        }
        // A stream reset request in flight named our last TSN: unsent TSNs stay assigned.
        let renumber = !self.reconfig.request_in_flight();
        let abandoned = self.data.send.abandon_due(now, renumber);
        if abandoned > 0 {
            self.stats.abandoned_messages += abandoned;
            self.data.forward_tsn_due = true;
        }
        if !std::mem::take(&mut self.data.forward_tsn_due) {
            return false;
        }
        let max_streams = (self.mtu() - COMMON_HEADER_LEN - 8) / 4;
        let Some(forward) = self.data.send.forward_tsn(max_streams) else { return false };
        self.stats.forward_tsns_out += 1;
        self.control.push_back(Chunk::ForwardTsn(forward));
        true
    }

    /// Queues a message; it goes out at the next [`Association::run_pending`], which has the time.
    pub(crate) fn send_message(&mut self, msg: Message) -> Result<(), Error> {
        use AssociationState::*;
        if !matches!(self.state, CookieWait | CookieEchoed | Established) {
            return Err(Error::Closing);
        }
        if msg.stream >= self.data.streams_out {
            return Err(Error::InvalidStream(msg.stream));
        }
        if self.reconfig.is_paused(msg.stream) {
            // RFC 6525 §5.1.2 A1: nothing new on a stream until its reset is answered.
            return Err(Error::StreamResetPending(msg.stream));
        }
        if msg.data.is_empty() {
            return Err(Error::EmptyMessage);
        }
        if self.data.send.queued_bytes + msg.data.len() > MAX_SEND_BUFFER {
            return Err(Error::SendBufferFull);
        }
        let max_fragment = self.max_fragment();
        self.data.send.push_message(&msg, max_fragment);
        self.stats.messages_out += 1;
        self.user_pending = true;
        Ok(())
    }

    /// Packs control chunks, a SACK, retransmissions and new DATA into MTU-sized packets.
    pub(crate) fn flush(&mut self, now: Instant) {
        use AssociationState::*;
        if matches!(self.state, Closed | CookieWait | CookieEchoed) {
            return;
        }
        let mtu = self.mtu();
        let data_allowed = matches!(self.state, Established | ShutdownPending | ShutdownReceived);
        // RFC 3758 §3.5 C5: a FORWARD-TSN sent keeps T3-rtx running.
        let sent_forward_tsn = data_allowed && self.abandon_and_forward(now);
        let mut first_packet = true;
        // The SACK owed, made once: it goes in the first packet that has room for it.
        let mut sack: Option<Chunk> = None;
        loop {
            // A stream reset request goes once the data queued on its streams went (RFC 6525).
            self.start_stream_reset(now);
            let mut chunks: Vec<Chunk> = Vec::new();
            let mut size = COMMON_HEADER_LEN;
            let send = &self.data.send;
            let has_new_data = data_allowed
                && send.chunks.iter().any(|c| !c.abandoned && (c.needs_retransmit || c.transmissions == 0));
            if sack.is_none() && (self.data.sack_now || (self.data.packets_since_sack > 0 && has_new_data)) {
                sack = self.data.recv.as_mut().map(|r| Chunk::Sack(r.make_sack()));
                self.sack_sent();
            }
            let sack_len = sack.as_ref().map_or(0, Chunk::padded_len);
            while let Some(c) = self.control.front() {
                let len = c.padded_len();
                if size + len + sack_len > mtu && !chunks.is_empty() {
                    break;
                }
                size += len;
                if let Some(c) = self.control.pop_front() {
                    chunks.push(c);
                }
            }
            if let Some(s) = sack.take_if(|s| chunks.is_empty() || size + s.padded_len() <= mtu) {
                size += s.padded_len();
                chunks.push(s);
            }
            let mut sent_data = false;
            if data_allowed {
                let mut flight = self.data.send.flight_size();
                let window = self.congestion.window(flight, mtu);
                for idx in 0..self.data.send.chunks.len() {
                    let c = &self.data.send.chunks[idx];
                    let retransmit = c.needs_retransmit;
                    if c.abandoned || (!retransmit && c.transmissions > 0) {
                        continue;
                    }
                    let len = c.wire_len();
                    let padded_len = (len + 3) & !3;
                    if size + padded_len > mtu {
                        break;
                    }
                    // Retransmissions may go in the first packet whatever the window (§7.2.4).
                    let allowed = flight == 0 || flight + len <= window || (retransmit && first_packet);
                    if !allowed {
                        break;
                    }
                    size += padded_len;
                    flight += len;
                    chunks.push(Chunk::Data(c.chunk.clone()));
                    if retransmit {
                        self.stats.retransmitted_chunks += 1;
                    }
                    self.data.send.mark_sent(idx, now);
                    sent_data = true;
                }
            }
            if chunks.is_empty() {
                break;
            }
            if sent_data && !self.timers.is_set(Timer::T3Rtx) {
                self.timers.set(Timer::T3Rtx, now + self.paths.rto());
            }
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks = chunks;
            self.emit_packet(self.paths.primary_index(), p);
            first_packet = false;
        }
        if sent_forward_tsn && !self.timers.is_set(Timer::T3Rtx) {
            self.timers.set(Timer::T3Rtx, now + self.paths.rto());
        }
    }
}
