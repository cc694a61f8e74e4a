//! The data path of one association: the send queue (TSN assignment, fragmentation, SACK
//! processing, retransmission marks) and the receive queue (duplicate detection, gap tracking,
//! reassembly, ordered and unordered delivery).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::packet::{DataChunk, ForwardTsnChunk, SackChunk};
use crate::{Instant, Message, Reliability};

/// TSNs further than this beyond the cumulative TSN are dropped: gap ack block offsets are 16-bit.
const MAX_TSN_AHEAD: u64 = 65_535;
/// Bytes the next in-order chunk may take beyond the advertised window, so that a message larger
/// than the window still completes (as large as the largest message the sender side queues);
/// past it even that chunk is dropped, or a peer that never finishes a message, or never sends
/// the stream sequence number the others wait for, would make us buffer without bound.
pub(crate) const MAX_BEYOND_WINDOW: usize = 4 * 1024 * 1024;
/// At most this many gap blocks and duplicate TSNs go into one SACK.
const MAX_GAP_BLOCKS: usize = 64;
const MAX_DUP_TSNS: usize = 32;
/// Gap blocks of one incoming SACK that are looked at.
const MAX_GAP_BLOCKS_PROCESSED: usize = 256;

/// `a` is before `b` in serial number arithmetic (RFC 1982, 32 bits).
pub(crate) fn tsn_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < (1 << 31)
}

/// `a` is before `b` in 16-bit serial number arithmetic.
fn ssn_lt(a: u16, b: u16) -> bool {
    a != b && b.wrapping_sub(a) < (1 << 15)
}

/// One DATA chunk the peer has not acknowledged yet.
#[derive(Clone, Debug)]
pub(crate) struct SentChunk {
    pub(crate) chunk: DataChunk,
    /// Transmissions so far (0: never sent).
    pub(crate) transmissions: u32,
    pub(crate) sent_at: Option<Instant>,
    /// Reported received in a gap ack block of the latest SACK.
    pub(crate) gap_acked: bool,
    /// Waiting to be sent again.
    pub(crate) needs_retransmit: bool,
    pub(crate) miss_indications: u32,
    pub(crate) fast_retransmitted: bool,
    /// Counted in the flight size.
    pub(crate) in_flight: bool,
    /// The stream's reliability when the message was queued (RFC 3758 TR6: it never changes).
    pub(crate) reliability: Reliability,
    /// When a [`Reliability::Lifetime`] ends: set by the first call with the time after queueing.
    pub(crate) expires: Option<Instant>,
    /// Given up on (RFC 3758 §3.4): never sent again, not outstanding (§3.5 A2), and skipped by
    /// a FORWARD-TSN once every TSN before it is acknowledged.
    pub(crate) abandoned: bool,
}

impl SentChunk {
    pub(crate) fn wire_len(&self) -> usize {
        crate::packet::DATA_CHUNK_HEADER_LEN + self.chunk.data.len()
    }
}

/// What one SACK did to the send queue.
#[derive(Debug, Default)]
pub(crate) struct SackOutcome {
    /// The cumulative TSN moved forward.
    pub(crate) cum_advanced: bool,
    /// Bytes newly acknowledged (cumulatively or in gaps).
    pub(crate) bytes_acked: usize,
    pub(crate) rtt_sample: Option<Duration>,
    /// Chunks that reached three miss indications.
    pub(crate) fast_retransmit: bool,
}

/// Outgoing DATA, from user message to acknowledgement.
#[derive(Debug)]
pub(crate) struct SendQueue {
    /// TSN of the next new chunk.
    pub(crate) next_tsn: u32,
    /// Highest TSN the peer acknowledged cumulatively.
    pub(crate) cum_ack: u32,
    /// Unacknowledged chunks, TSN cum_ack+1 onwards, in order (sent or not).
    pub(crate) chunks: VecDeque<SentChunk>,
    ssn_out: Vec<u16>,
    /// TSN and send time of the chunk timed for an RTT measurement (Karn's rule).
    rtt_probe: Option<(u32, Instant)>,
    pub(crate) queued_bytes: usize,
    /// Streams whose messages are not [`Reliability::Reliable`].
    reliability: BTreeMap<u16, Reliability>,
}

impl SendQueue {
    pub(crate) fn new(initial_tsn: u32, streams: u16) -> Self {
        SendQueue {
            next_tsn: initial_tsn,
            cum_ack: initial_tsn.wrapping_sub(1),
            chunks: VecDeque::new(),
            ssn_out: vec![0; usize::from(streams)],
            rtt_probe: None,
            queued_bytes: 0,
            reliability: BTreeMap::new(),
        }
    }

    /// The reliability of messages queued on `stream` from now on.
    pub(crate) fn set_reliability(&mut self, stream: u16, reliability: Reliability) {
        if reliability == Reliability::Reliable {
            self.reliability.remove(&stream);
        } else {
            self.reliability.insert(stream, reliability);
        }
    }

    pub(crate) fn set_streams(&mut self, streams: u16) {
        self.ssn_out.resize(usize::from(streams), 0);
    }

    /// The next message on each of `streams` goes with SSN 0 (a stream reset was performed,
    /// RFC 6525 §5.1.2).
    pub(crate) fn reset_ssns(&mut self, streams: &[u16]) {
        for s in streams {
            if let Some(ssn) = self.ssn_out.get_mut(usize::from(*s)) {
                *ssn = 0;
            }
        }
    }

    /// The TSN the last queued chunk took (the Sender's Last Assigned TSN, RFC 6525 §4.1).
    pub(crate) fn last_assigned_tsn(&self) -> u32 {
        self.next_tsn.wrapping_sub(1)
    }

    /// Whether a chunk on one of `streams` has never been sent (nor abandoned).
    pub(crate) fn has_unsent_on(&self, streams: &BTreeSet<u16>) -> bool {
        self.chunks.iter().any(|c| c.transmissions == 0 && !c.abandoned && streams.contains(&c.chunk.stream))
    }

    /// Splits `msg` into DATA chunks of at most `max_fragment` bytes of user data and queues them.
    pub(crate) fn push_message(&mut self, msg: &Message, max_fragment: usize) {
        let ssn = if msg.unordered {
            0
        } else {
            match self.ssn_out.get_mut(usize::from(msg.stream)) {
                Some(s) => {
                    let v = *s;
                    *s = s.wrapping_add(1);
                    v
                }
                None => 0,
            }
        };
        let reliability = self.reliability.get(&msg.stream).copied().unwrap_or_default();
        let max_fragment = max_fragment.max(1);
        let pieces: Vec<&[u8]> = msg.data.chunks(max_fragment).collect();
        let last = pieces.len().saturating_sub(1);
        for (i, piece) in pieces.into_iter().enumerate() {
            let chunk = DataChunk {
                tsn: self.next_tsn,
                stream: msg.stream,
                ssn,
                ppid: msg.ppid,
                unordered: msg.unordered,
                beginning: i == 0,
                ending: i == last,
                immediate: false,
                data: piece.to_vec(),
            };
            self.next_tsn = self.next_tsn.wrapping_add(1);
            self.queued_bytes += chunk.data.len();
            self.chunks.push_back(SentChunk {
                chunk,
                transmissions: 0,
                sent_at: None,
                gap_acked: false,
                needs_retransmit: false,
                miss_indications: 0,
                fast_retransmitted: false,
                in_flight: false,
                reliability,
                expires: None,
                abandoned: false,
            });
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Bytes sent and neither acknowledged nor marked for retransmission.
    pub(crate) fn flight_size(&self) -> usize {
        self.chunks.iter().filter(|c| c.in_flight).map(SentChunk::wire_len).sum()
    }

    pub(crate) fn has_unacked_sent(&self) -> bool {
        self.chunks.iter().any(|c| c.in_flight)
    }

    /// Records a (re)transmission of the chunk at `idx`.
    pub(crate) fn mark_sent(&mut self, idx: usize, now: Instant) {
        let Some(c) = self.chunks.get_mut(idx) else { return };
        if c.transmissions > 0 && self.rtt_probe.is_some_and(|(tsn, _)| tsn == c.chunk.tsn) {
            self.rtt_probe = None;
        }
        c.transmissions += 1;
        c.sent_at = Some(now);
        c.needs_retransmit = false;
        c.in_flight = true;
        if c.transmissions == 1 && self.rtt_probe.is_none() {
            self.rtt_probe = Some((c.chunk.tsn, now));
        }
    }

    /// Marks every sent, unacknowledged chunk for retransmission (T3-rtx expiry, or data of an
    /// INIT the peer did not take). Returns how many were marked.
    pub(crate) fn mark_all_for_retransmit(&mut self) -> usize {
        let mut n = 0;
        for c in self.chunks.iter_mut() {
            if c.transmissions > 0 && !c.gap_acked && !c.needs_retransmit && !c.abandoned {
                c.needs_retransmit = true;
                c.in_flight = false;
                n += 1;
            }
        }
        self.rtt_probe = None;
        n
    }

    /// Applies a SACK (RFC 9260 §6.2.1, §7.2.4).
    pub(crate) fn on_sack(&mut self, sack: &SackChunk, now: Instant) -> SackOutcome {
        let mut out = SackOutcome::default();
        let cum = sack.cumulative_tsn_ack;
        // A SACK older than what we know, or acknowledging what we never sent, is ignored.
        if tsn_lt(cum, self.cum_ack) || !tsn_lt(cum, self.next_tsn) {
            return out;
        }
        // Nor one acknowledging a chunk never sent (queued ones are a suffix, sent in TSN
        // order): taken in part it would leave `cum_ack` behind the queue's front, and gap
        // blocks, counted from `cum_ack`, would then mark the wrong chunks.
        // Abandoned chunks never sent do not count: a FORWARD-TSN moved the peer past them.
        let first_unsent = self.chunks.iter().find(|c| c.transmissions == 0 && !c.abandoned);
        if first_unsent.is_some_and(|c| !tsn_lt(cum, c.chunk.tsn)) {
            return out;
        }
        while let Some(front) = self.chunks.front() {
            if tsn_lt(cum, front.chunk.tsn) {
                break;
            }
            let Some(c) = self.chunks.pop_front() else { break };
            // Abandoned data is credited to nothing (RFC 3758 §3.5 A2).
            if !c.gap_acked && !c.abandoned {
                out.bytes_acked += c.wire_len();
            }
            self.queued_bytes = self.queued_bytes.saturating_sub(c.chunk.data.len());
            self.take_rtt_sample(&c, now, &mut out);
        }
        if cum != self.cum_ack {
            out.cum_advanced = true;
            self.cum_ack = cum;
        }
        // Gap blocks: offsets from the cumulative TSN; index = offset - 1 now that the front is cum+1.
        let mut acked_in_gaps = vec![false; self.chunks.len()];
        let mut highest_gap_idx: Option<usize> = None;
        // Bounded work per SACK whatever the peer writes into it.
        for &(start, end) in sack.gap_blocks.iter().take(MAX_GAP_BLOCKS_PROCESSED) {
            if start == 0 || end < start {
                continue;
            }
            let first = usize::from(start) - 1;
            let last = (usize::from(end) - 1).min(self.chunks.len().saturating_sub(1));
            if first >= self.chunks.len() {
                continue;
            }
            for flag in &mut acked_in_gaps[first..=last] {
                *flag = true;
            }
            highest_gap_idx = Some(highest_gap_idx.map_or(last, |h: usize| h.max(last)));
        }
        for (i, c) in self.chunks.iter_mut().enumerate() {
            let acked = acked_in_gaps[i] && c.transmissions > 0;
            if acked && !c.gap_acked {
                if !c.abandoned {
                    out.bytes_acked += c.wire_len();
                }
                c.in_flight = false;
                c.needs_retransmit = false;
                if let Some((tsn, at)) = self.rtt_probe {
                    if tsn == c.chunk.tsn && c.transmissions == 1 {
                        out.rtt_sample = Some(now - at);
                        self.rtt_probe = None;
                    }
                }
            } else if !acked && c.gap_acked {
                // Reneged: the peer dropped it; it is outstanding again until T3 says otherwise.
                c.in_flight = c.transmissions > 0 && !c.needs_retransmit && !c.abandoned;
            }
            c.gap_acked = acked;
        }
        // Miss indications for chunks below the highest gap-acknowledged TSN.
        if let Some(h) = highest_gap_idx {
            for c in self.chunks.iter_mut().take(h) {
                if c.gap_acked || c.transmissions == 0 || c.needs_retransmit || c.abandoned {
                    continue;
                }
                c.miss_indications += 1;
                if c.miss_indications >= 3 && !c.fast_retransmitted {
                    c.fast_retransmitted = true;
                    c.needs_retransmit = true;
                    c.in_flight = false;
                    out.fast_retransmit = true;
                }
            }
        }
        out
    }

    /// The chunks of the message the chunk at `idx` belongs to, as indices (first, last): its
    /// fragments were queued together, B bit first, E bit last; those already acknowledged
    /// cumulatively are gone from the front.
    fn message_bounds(&self, idx: usize) -> (usize, usize) {
        let mut first = idx;
        while first > 0 && !self.chunks[first].chunk.beginning {
            first -= 1;
        }
        let mut last = idx;
        while last + 1 < self.chunks.len() && !self.chunks[last].chunk.ending {
            last += 1;
        }
        (first, last)
    }

    /// Abandons the messages whose reliability ran out (RFC 3758 §3.5, §4.1): a chunk that would
    /// be sent again after `MaxRetransmits(n)` retransmissions, or sent at all past its lifetime.
    /// The whole message goes (A3). A message none of which was sent is dropped instead, and the
    /// messages queued after it take its TSNs and SSN, as if TSNs were assigned only when sent
    /// (TR3); `renumber` false forbids that (our TSNs are pinned). Returns how many messages went.
    pub(crate) fn abandon_due(&mut self, now: Instant, renumber: bool) -> u64 {
        let mut abandoned = 0;
        let mut i = 0;
        while i < self.chunks.len() {
            let c = &mut self.chunks[i];
            if let (Reliability::Lifetime(lifetime), None) = (c.reliability, c.expires) {
                c.expires = Some(now + lifetime);
            }
            let spent = match c.reliability {
                Reliability::Reliable => false,
                Reliability::MaxRetransmits(n) => c.transmissions > n,
                Reliability::Lifetime(_) => c.expires.is_some_and(|e| now > e),
            };
            if c.abandoned || !(c.transmissions == 0 || c.needs_retransmit) || !spent {
                i += 1;
                continue;
            }
            abandoned += 1;
            let (first, last) = self.message_bounds(i);
            if renumber && self.chunks.range(first..=last).all(|c| c.transmissions == 0) {
                self.drop_unsent(first, last);
                i = first;
                continue;
            }
            for c in self.chunks.range_mut(first..=last) {
                c.abandoned = true;
                c.needs_retransmit = false;
                c.in_flight = false;
                if self.rtt_probe.is_some_and(|(tsn, _)| tsn == c.chunk.tsn) {
                    self.rtt_probe = None;
                }
            }
            i = last + 1;
        }
        abandoned
    }

    /// Removes the never-sent message at `first..=last`. Only unsent chunks follow it (chunks go
    /// out in TSN order), so those take its TSNs, and the later messages of its stream its SSN.
    fn drop_unsent(&mut self, first: usize, last: usize) {
        let removed: Vec<SentChunk> = self.chunks.drain(first..=last).collect();
        let Some(head) = removed.first().map(|c| c.chunk.clone()) else { return };
        let n = removed.len() as u32;
        self.queued_bytes =
            self.queued_bytes.saturating_sub(removed.iter().map(|c| c.chunk.data.len()).sum());
        let ordered = !head.unordered;
        for c in self.chunks.range_mut(first..) {
            c.chunk.tsn = c.chunk.tsn.wrapping_sub(n);
            if ordered && !c.chunk.unordered && c.chunk.stream == head.stream {
                c.chunk.ssn = c.chunk.ssn.wrapping_sub(1);
            }
        }
        self.next_tsn = self.next_tsn.wrapping_sub(n);
        if ordered {
            if let Some(ssn) = self.ssn_out.get_mut(usize::from(head.stream)) {
                *ssn = ssn.wrapping_sub(1);
            }
        }
    }

    /// Whether abandoned chunks wait at the front: the Advanced.Peer.Ack.Point is ahead of the
    /// cumulative TSN ack and the peer is owed a FORWARD-TSN (RFC 3758 §3.5 C2, C3).
    pub(crate) fn forward_tsn_owed(&self) -> bool {
        self.chunks.front().is_some_and(|c| c.abandoned)
    }

    /// The FORWARD-TSN for the abandoned chunks at the front (RFC 3758 §3.5 C2-C4): the
    /// Advanced.Peer.Ack.Point and, for each stream with ordered abandoned messages, the highest
    /// SSN among them; at most `max_streams` streams, the point lowered to what fits (C4).
    pub(crate) fn forward_tsn(&self, max_streams: usize) -> Option<ForwardTsnChunk> {
        let mut point = self.cum_ack;
        let mut streams: BTreeMap<u16, u16> = BTreeMap::new();
        for c in self.chunks.iter().take_while(|c| c.abandoned) {
            if !c.chunk.unordered {
                if streams.len() >= max_streams && !streams.contains_key(&c.chunk.stream) {
                    break;
                }
                // Later TSNs of a stream carry later SSNs: the last one is the highest.
                streams.insert(c.chunk.stream, c.chunk.ssn);
            }
            point = c.chunk.tsn;
        }
        (point != self.cum_ack)
            .then(|| ForwardTsnChunk { new_cumulative_tsn: point, streams: streams.into_iter().collect() })
    }

    fn take_rtt_sample(&mut self, c: &SentChunk, now: Instant, out: &mut SackOutcome) {
        if let Some((tsn, at)) = self.rtt_probe {
            if tsn == c.chunk.tsn {
                if c.transmissions == 1 {
                    out.rtt_sample = Some(now - at);
                }
                self.rtt_probe = None;
            }
        }
    }
}

/// What became of one received DATA chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataVerdict {
    /// New and kept.
    New,
    /// Already received.
    Duplicate,
    /// No room (window or TSN range): not acknowledged, the peer sends it again.
    Dropped,
}

/// What became of a FORWARD-TSN (RFC 3758 §3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ForwardVerdict {
    /// The cumulative TSN moved.
    Moved,
    /// At or behind the cumulative TSN: out of date, nothing changes.
    Stale,
    /// Further ahead than we take DATA: nothing the peer can have sent, ignored.
    TooFar,
}

/// The receive buffer memory of all associations of one endpoint, against its cap
/// ([`crate::Config::max_receive_buffer`]). Each association's queue holds a clone; a queue
/// gives back what it holds when it is dropped, so a closed association leaks nothing.
#[derive(Clone, Debug)]
pub(crate) struct RecvBudget {
    used: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    limit: usize,
}

impl RecvBudget {
    pub(crate) fn new(limit: usize) -> Self {
        RecvBudget { used: Arc::default(), peak: Arc::default(), limit }
    }

    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Out-of-order data may fill three quarters; the last quarter is for data in order, which
    /// fills the holes that keep the rest buffered (without it a full buffer could never drain).
    fn limit_for(&self, in_order: bool) -> usize {
        if in_order {
            self.limit
        } else {
            self.limit - self.limit / 4
        }
    }

    fn fits(&self, len: usize, in_order: bool) -> bool {
        self.used().saturating_add(len) <= self.limit_for(in_order)
    }

    /// What a new association may still be offered, as the endpoint's share of its window.
    fn room(&self) -> usize {
        self.limit_for(false).saturating_sub(self.used())
    }

    fn hold(&self, len: usize) {
        let now = self.used.fetch_add(len, Ordering::Relaxed) + len;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn release(&self, len: usize) {
        self.used.fetch_sub(len, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct StreamIn {
    next_ssn: u16,
    /// Complete messages waiting for an earlier one, with the TSNs they came in.
    waiting: BTreeMap<u16, (Message, (u64, u64))>,
    /// Complete messages sent after the peer reset the stream, while the reset waits for the
    /// data before it: they are numbered from SSN 0 again, and wait for the reset.
    after_reset: BTreeMap<u16, (Message, (u64, u64))>,
}

/// A reset of incoming streams the peer asked for before all its data before it arrived
/// (RFC 6525 §5.2.2 E2, "deferred reset processing").
#[derive(Debug)]
struct DeferredReset {
    /// The peer's last TSN before the reset (unwrapped): the reset is done once the cumulative
    /// TSN reaches it.
    last_tsn: u64,
    /// The streams, in the order the request listed them.
    streams: Vec<u16>,
    /// The same, to look up.
    set: BTreeSet<u16>,
}

/// What the receive queue hands to the user, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// A complete message.
    Message(Message),
    /// The incoming SSNs of these streams were reset: messages before it were numbered the
    /// old way, messages after it from 0.
    StreamsReset(Vec<u16>),
}

/// Incoming DATA, from TSN to delivered message.
#[derive(Debug)]
pub(crate) struct ReceiveQueue {
    /// Cumulative TSN received, unwrapped to 64 bits.
    cum_tsn: u64,
    above: BTreeSet<u64>,
    dups: Vec<u32>,
    fragments: BTreeMap<u64, DataChunk>,
    streams: Vec<StreamIn>,
    /// Bytes held in `fragments` and the streams' `waiting`; always also held in `budget`.
    buffered: usize,
    window: usize,
    budget: RecvBudget,
    /// Complete messages ready for the user, in delivery order.
    pub(crate) ready: VecDeque<Message>,
    /// Stream resets done, each with the length `ready` had then: its place among the messages.
    resets: Vec<(usize, Vec<u16>)>,
    /// A reset of incoming streams waiting for the peer's data before it.
    deferred: Option<DeferredReset>,
}

impl Drop for ReceiveQueue {
    fn drop(&mut self) {
        self.budget.release(self.buffered);
    }
}

impl ReceiveQueue {
    pub(crate) fn new(peer_initial_tsn: u32, streams: u16, window: u32, budget: RecvBudget) -> Self {
        // Offset by 2^32 so the unwrapped value never goes below zero.
        let cum_tsn = (1u64 << 32) + u64::from(peer_initial_tsn.wrapping_sub(1));
        ReceiveQueue {
            cum_tsn,
            above: BTreeSet::new(),
            dups: Vec::new(),
            fragments: BTreeMap::new(),
            streams: (0..streams).map(|_| StreamIn::default()).collect(),
            buffered: 0,
            window: window as usize,
            budget,
            ready: VecDeque::new(),
            resets: Vec::new(),
            deferred: None,
        }
    }

    fn hold(&mut self, len: usize) {
        self.buffered += len;
        self.budget.hold(len);
    }

    fn release(&mut self, len: usize) {
        let len = len.min(self.buffered);
        self.buffered -= len;
        self.budget.release(len);
    }

    fn unwrap_tsn(&self, tsn: u32) -> u64 {
        let diff = tsn.wrapping_sub(self.cum_tsn as u32) as i32;
        (self.cum_tsn as i64 + i64::from(diff)) as u64
    }

    pub(crate) fn cumulative_tsn(&self) -> u32 {
        self.cum_tsn as u32
    }

    /// Whether anything arrived out of order (a SACK should go at once).
    pub(crate) fn has_gaps(&self) -> bool {
        !self.above.is_empty()
    }

    pub(crate) fn has_dups(&self) -> bool {
        !self.dups.is_empty()
    }

    /// The window to advertise: what is left of ours, and no more than the endpoint has left.
    pub(crate) fn a_rwnd(&self) -> u32 {
        let left = self.window.saturating_sub(self.buffered).min(self.budget.room());
        u32::try_from(left).unwrap_or(u32::MAX)
    }

    /// Whether a chunk of `len` bytes at `tsn` may be taken (RFC 9260 §6.2: what does not fit
    /// is dropped unacknowledged and the sender sends it again).
    fn room_for(&self, tsn: u64, chunk: &DataChunk) -> bool {
        let in_order = tsn == self.cum_tsn + 1;
        if in_order && chunk.beginning && chunk.ending && self.deliverable(chunk) {
            // Delivered at once, held nowhere: a buffer filled by others never blocks it.
            return true;
        }
        let len = chunk.data.len();
        let wanted = self.buffered + len;
        // The next in-order chunk may go beyond the window (up to a hard limit), so that a
        // message larger than the window still completes.
        let own = wanted <= self.window || (in_order && wanted <= self.window + MAX_BEYOND_WINDOW);
        own && self.budget.fits(len, in_order)
    }

    /// Whether a whole message in `chunk` would be delivered now rather than wait for its turn.
    fn deliverable(&self, chunk: &DataChunk) -> bool {
        chunk.unordered
            || self.streams.get(usize::from(chunk.stream)).is_some_and(|s| s.next_ssn == chunk.ssn)
    }

    /// Takes a DATA chunk. `keep_data` false records the TSN but drops the data (invalid stream).
    pub(crate) fn on_data(&mut self, chunk: DataChunk, keep_data: bool) -> DataVerdict {
        let tsn = self.unwrap_tsn(chunk.tsn);
        if tsn <= self.cum_tsn || self.above.contains(&tsn) {
            if self.dups.len() < MAX_DUP_TSNS {
                self.dups.push(chunk.tsn);
            }
            return DataVerdict::Duplicate;
        }
        if tsn > self.cum_tsn + MAX_TSN_AHEAD {
            return DataVerdict::Dropped;
        }
        if keep_data && !self.room_for(tsn, &chunk) && !self.renege_for(tsn, &chunk) {
            return DataVerdict::Dropped;
        }
        self.above.insert(tsn);
        while self.above.remove(&(self.cum_tsn + 1)) {
            self.cum_tsn += 1;
        }
        if keep_data {
            self.accept(tsn, chunk);
        }
        // Everything up to the peer's last TSN before a pending reset is here and delivered:
        // the reset is done now (RFC 6525 §5.2.2 E3, E4).
        if self.deferred.as_ref().is_some_and(|d| self.cum_tsn >= d.last_tsn) {
            if let Some(d) = self.deferred.take() {
                self.perform_reset(d.streams);
            }
        }
        DataVerdict::New
    }

    /// A FORWARD-TSN (RFC 3758 §3.6): the cumulative TSN moves to `new_cumulative_tsn` and on
    /// over what arrived after it; partial messages at or below it are dropped; on each listed
    /// stream the messages up to the SSN that were waiting for an abandoned one are delivered
    /// and the next expected SSN goes past it. Pairs for streams we do not have, or for SSNs
    /// already passed, change nothing. A new point further ahead than DATA is taken is ignored
    /// like such DATA: no sender can have abandoned what we would not take.
    pub(crate) fn on_forward_tsn(
        &mut self,
        new_cumulative_tsn: u32,
        streams: &[(u16, u16)],
    ) -> ForwardVerdict {
        let point = self.unwrap_tsn(new_cumulative_tsn);
        if point <= self.cum_tsn {
            return ForwardVerdict::Stale;
        }
        if point > self.cum_tsn + MAX_TSN_AHEAD {
            return ForwardVerdict::TooFar;
        }
        let kept = self.fragments.split_off(&(point + 1));
        let dropped = std::mem::replace(&mut self.fragments, kept);
        self.release(dropped.values().map(|c| c.data.len()).sum());
        self.above = self.above.split_off(&(point + 1));
        self.cum_tsn = point;
        while self.above.remove(&(self.cum_tsn + 1)) {
            self.cum_tsn += 1;
        }
        // One skip per stream, the latest SSN listed for it: bounded work whatever the list.
        let mut skips: BTreeMap<u16, u16> = BTreeMap::new();
        for &(stream, ssn) in streams {
            if usize::from(stream) >= self.streams.len() {
                continue;
            }
            let entry = skips.entry(stream).or_insert(ssn);
            if ssn_lt(*entry, ssn) {
                *entry = ssn;
            }
        }
        for (stream, ssn) in skips {
            self.skip_ssns(stream, ssn);
        }
        // The point may have reached the peer's last TSN before a reset it asked for.
        if self.deferred.as_ref().is_some_and(|d| self.cum_tsn >= d.last_tsn) {
            if let Some(d) = self.deferred.take() {
                self.perform_reset(d.streams);
            }
        }
        ForwardVerdict::Moved
    }

    /// Ordered messages on `stream` up to `ssn` were abandoned by the sender: those of them
    /// that arrived whole are delivered in order, and delivery goes on after `ssn`.
    fn skip_ssns(&mut self, stream: u16, ssn: u16) {
        let Some(s) = self.streams.get_mut(usize::from(stream)) else { return };
        if ssn_lt(ssn, s.next_ssn) {
            return;
        }
        let start = s.next_ssn;
        let mut due: Vec<u16> =
            s.waiting.keys().copied().filter(|k| !ssn_lt(*k, start) && !ssn_lt(ssn, *k)).collect();
        due.sort_by_key(|k| k.wrapping_sub(start));
        let mut freed = 0;
        for k in due {
            if let Some((m, _)) = s.waiting.remove(&k) {
                freed += m.data.len();
                self.ready.push_back(m);
            }
        }
        s.next_ssn = ssn.wrapping_add(1);
        while let Some((m, _)) = s.waiting.remove(&s.next_ssn) {
            freed += m.data.len();
            s.next_ssn = s.next_ssn.wrapping_add(1);
            self.ready.push_back(m);
        }
        self.release(freed);
    }

    /// Resets the incoming SSNs of `streams` to 0 (RFC 6525 §5.2.2) once every TSN up to the
    /// peer's `last_tsn` has arrived: now if it has (returns true), else when it does (returns
    /// false; ordered messages after `last_tsn` on those streams wait for it). A reset already
    /// waiting is merged into this one: the peer asked again, or for more streams, and neither
    /// request is done before the data of both is here.
    pub(crate) fn reset_streams(&mut self, last_tsn: u32, streams: &[u16]) -> bool {
        let mut last = self.unwrap_tsn(last_tsn);
        let mut list: Vec<u16> = Vec::with_capacity(streams.len());
        let mut set = BTreeSet::new();
        if let Some(d) = self.deferred.take() {
            last = last.max(d.last_tsn);
            list = d.streams;
            set = d.set;
        }
        for s in streams {
            if set.insert(*s) {
                list.push(*s);
            }
        }
        if self.cum_tsn >= last {
            self.perform_reset(list);
            return true;
        }
        self.deferred = Some(DeferredReset { last_tsn: last, streams: list, set });
        false
    }

    /// Whether a reset of incoming streams waits for the peer's data.
    pub(crate) fn reset_pending(&self) -> bool {
        self.deferred.is_some()
    }

    /// Whether an ordered message on `stream` starting at `first_tsn` was sent after the reset
    /// that waits for the data before it.
    fn after_pending_reset(&self, stream: u16, first_tsn: u64) -> bool {
        self.deferred.as_ref().is_some_and(|d| first_tsn > d.last_tsn && d.set.contains(&stream))
    }

    fn perform_reset(&mut self, streams: Vec<u16>) {
        let mut freed = 0;
        self.resets.push((self.ready.len(), streams.clone()));
        for s in streams {
            let Some(stream) = self.streams.get_mut(usize::from(s)) else { continue };
            // Messages still waiting for an earlier SSN never get it: the peer's data before
            // the reset has all arrived.
            freed += stream.waiting.values().map(|(m, _)| m.data.len()).sum::<usize>();
            stream.waiting = std::mem::take(&mut stream.after_reset);
            stream.next_ssn = 0;
            while let Some((m, _)) = stream.waiting.remove(&stream.next_ssn) {
                freed += m.data.len();
                stream.next_ssn = stream.next_ssn.wrapping_add(1);
                self.ready.push_back(m);
            }
        }
        self.release(freed);
    }

    /// Everything ready for the user, in order: messages and the stream resets between them.
    pub(crate) fn take_deliveries(&mut self) -> Vec<Delivery> {
        let mut out = Vec::with_capacity(self.ready.len() + self.resets.len());
        let mut resets = std::mem::take(&mut self.resets).into_iter().peekable();
        for (i, msg) in self.ready.drain(..).enumerate() {
            while let Some((_, streams)) = resets.next_if(|(at, _)| *at <= i) {
                out.push(Delivery::StreamsReset(streams));
            }
            out.push(Delivery::Message(msg));
        }
        out.extend(resets.map(|(_, streams)| Delivery::StreamsReset(streams)));
        out
    }

    /// RFC 9260 §6.2: with no room left, a chunk below the highest TSN held for reordering takes
    /// its place. The held data is dropped although gap-acknowledged (reneged): the sender keeps
    /// it until it is acknowledged cumulatively and sends it again. Without this, buffers full
    /// of data waiting behind holes could never take the chunks that fill the holes. Returns
    /// whether `chunk` fits now.
    fn renege_for(&mut self, tsn: u64, chunk: &DataChunk) -> bool {
        loop {
            let fragment = self.fragments.keys().next_back().copied().filter(|t| *t > tsn);
            // Held messages: waiting for an earlier SSN, or for a stream reset (`true`).
            let message = self
                .streams
                .iter()
                .enumerate()
                .flat_map(|(i, s)| {
                    let waiting = s.waiting.iter().map(move |(ssn, (_, tsns))| (*tsns, i, *ssn, false));
                    waiting.chain(s.after_reset.iter().map(move |(ssn, (_, tsns))| (*tsns, i, *ssn, true)))
                })
                .filter(|((first, _), ..)| *first > tsn)
                .max();
            match (fragment, message) {
                (Some(t), m) if m.is_none_or(|((_, last), ..)| t > last) => {
                    if let Some(c) = self.fragments.remove(&t) {
                        self.release(c.data.len());
                    }
                    self.above.remove(&t);
                }
                (_, Some(((first, last), stream, ssn, after_reset))) => {
                    let s = &mut self.streams[stream];
                    let held = if after_reset { &mut s.after_reset } else { &mut s.waiting };
                    if let Some((m, _)) = held.remove(&ssn) {
                        self.release(m.data.len());
                    }
                    for t in first..=last {
                        self.above.remove(&t);
                    }
                }
                _ => return false,
            }
            if self.room_for(tsn, chunk) {
                return true;
            }
        }
    }

    fn accept(&mut self, tsn: u64, chunk: DataChunk) {
        if chunk.beginning && chunk.ending {
            let msg = Message {
                stream: chunk.stream,
                unordered: chunk.unordered,
                ppid: chunk.ppid,
                data: chunk.data,
            };
            self.complete(msg, chunk.ssn, (tsn, tsn));
            return;
        }
        self.hold(chunk.data.len());
        self.fragments.insert(tsn, chunk);
        self.try_reassemble(tsn);
    }

    fn try_reassemble(&mut self, tsn: u64) {
        let mut start = tsn;
        loop {
            match self.fragments.get(&start) {
                Some(c) if c.beginning => break,
                Some(_) if self.fragments.contains_key(&(start - 1)) => start -= 1,
                _ => return,
            }
        }
        let mut end = tsn;
        loop {
            match self.fragments.get(&end) {
                Some(c) if c.ending => break,
                Some(_) if self.fragments.contains_key(&(end + 1)) => end += 1,
                _ => return,
            }
        }
        let mut data = Vec::new();
        let mut head: Option<DataChunk> = None;
        for t in start..=end {
            if let Some(c) = self.fragments.remove(&t) {
                self.release(c.data.len());
                data.extend_from_slice(&c.data);
                if head.is_none() {
                    head = Some(c);
                }
            }
        }
        if let Some(h) = head {
            let msg = Message { stream: h.stream, unordered: h.unordered, ppid: h.ppid, data };
            self.complete(msg, h.ssn, (start, end));
        }
    }

    fn complete(&mut self, msg: Message, ssn: u16, tsns: (u64, u64)) {
        if msg.unordered {
            self.ready.push_back(msg);
            return;
        }
        if self.after_pending_reset(msg.stream, tsns.0) {
            // RFC 6525 §5.2.2 E2: held until the reset, whose SSNs it already counts in.
            let Some(stream) = self.streams.get_mut(usize::from(msg.stream)) else { return };
            if let std::collections::btree_map::Entry::Vacant(e) = stream.after_reset.entry(ssn) {
                let held = msg.data.len();
                e.insert((msg, tsns));
                self.hold(held);
            }
            return;
        }
        let Some(stream) = self.streams.get_mut(usize::from(msg.stream)) else { return };
        let mut freed = 0;
        let mut held = 0;
        if ssn == stream.next_ssn {
            stream.next_ssn = stream.next_ssn.wrapping_add(1);
            self.ready.push_back(msg);
            while let Some((next, _)) = stream.waiting.remove(&stream.next_ssn) {
                freed += next.data.len();
                stream.next_ssn = stream.next_ssn.wrapping_add(1);
                self.ready.push_back(next);
            }
        } else if ssn_lt(stream.next_ssn, ssn) && !stream.waiting.contains_key(&ssn) {
            held = msg.data.len();
            stream.waiting.insert(ssn, (msg, tsns));
        }
        self.release(freed);
        self.hold(held);
    }

    /// The SACK describing what has arrived; clears the duplicate list.
    pub(crate) fn make_sack(&mut self) -> SackChunk {
        let mut gap_blocks = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        for &t in &self.above {
            run = match run {
                Some((s, e)) if t == e + 1 => Some((s, t)),
                Some((s, e)) => {
                    gap_blocks.push(((s - self.cum_tsn) as u16, (e - self.cum_tsn) as u16));
                    Some((t, t))
                }
                None => Some((t, t)),
            };
            if gap_blocks.len() >= MAX_GAP_BLOCKS {
                run = None;
                break;
            }
        }
        if let Some((s, e)) = run {
            gap_blocks.push(((s - self.cum_tsn) as u16, (e - self.cum_tsn) as u16));
        }
        SackChunk {
            cumulative_tsn_ack: self.cumulative_tsn(),
            a_rwnd: self.a_rwnd(),
            gap_blocks,
            duplicate_tsns: std::mem::take(&mut self.dups),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(tsn: u32, stream: u16, ssn: u16, b: bool, e: bool, payload: &[u8]) -> DataChunk {
        DataChunk {
            tsn,
            stream,
            ssn,
            ppid: 0,
            unordered: false,
            beginning: b,
            ending: e,
            immediate: false,
            data: payload.to_vec(),
        }
    }

    #[test]
    fn reassembles_out_of_order_fragments_across_tsn_wrap() {
        let mut q = ReceiveQueue::new(u32::MAX - 1, 2, 10_000, RecvBudget::new(1 << 20));
        assert_eq!(q.on_data(data(0, 0, 0, false, true, b"c"), true), DataVerdict::New);
        assert_eq!(q.on_data(data(u32::MAX - 1, 0, 0, true, false, b"a"), true), DataVerdict::New);
        assert!(q.ready.is_empty());
        let sack = q.make_sack();
        assert_eq!(sack.cumulative_tsn_ack, u32::MAX - 1);
        assert_eq!(sack.gap_blocks, vec![(2, 2)]);
        assert_eq!(q.on_data(data(u32::MAX, 0, 0, false, false, b"b"), true), DataVerdict::New);
        assert_eq!(q.ready.pop_front().unwrap().data, b"abc");
        assert_eq!(q.on_data(data(u32::MAX, 0, 0, false, false, b"b"), true), DataVerdict::Duplicate);
        assert_eq!(q.make_sack().duplicate_tsns, vec![u32::MAX]);
        assert_eq!(q.cumulative_tsn(), 0);
    }

    #[test]
    fn ordered_waits_unordered_does_not() {
        let mut q = ReceiveQueue::new(10, 1, 10_000, RecvBudget::new(1 << 20));
        q.on_data(data(11, 0, 1, true, true, b"second"), true);
        let mut u = data(12, 0, 0, true, true, b"unordered");
        u.unordered = true;
        q.on_data(u, true);
        assert_eq!(q.ready.pop_front().unwrap().data, b"unordered");
        assert!(q.ready.is_empty());
        q.on_data(data(10, 0, 0, true, true, b"first"), true);
        assert_eq!(q.ready.pop_front().unwrap().data, b"first");
        assert_eq!(q.ready.pop_front().unwrap().data, b"second");
    }

    #[test]
    fn a_lower_chunk_takes_the_place_of_the_highest_held() {
        // Room for three 1000-byte fragments of one message (TSN 10..=14); 12..=14 arrive first.
        let budget = RecvBudget::new(1 << 20);
        let mut q = ReceiveQueue::new(10, 1, 3000, budget.clone());
        for tsn in 12..=14 {
            let last = tsn == 14;
            assert_eq!(q.on_data(data(tsn, 0, 0, false, last, &[7; 1000]), true), DataVerdict::New);
        }
        assert_eq!(q.make_sack().gap_blocks, vec![(3, 5)]);
        // TSN 11 is below the highest held: 14 is reneged to make room (RFC 9260 §6.2).
        assert_eq!(q.on_data(data(11, 0, 0, false, false, &[7; 1000]), true), DataVerdict::New);
        let sack = q.make_sack();
        assert_eq!((sack.cumulative_tsn_ack, sack.gap_blocks), (9, vec![(2, 4)]));
        assert_eq!(budget.used(), 3000);
        // The hole at the cumulative TSN, then 14 again from the sender: the message completes
        // and everything held is given back.
        assert_eq!(q.on_data(data(10, 0, 0, true, false, &[7; 1000]), true), DataVerdict::New);
        assert_eq!(q.on_data(data(14, 0, 0, false, true, &[7; 1000]), true), DataVerdict::New);
        assert_eq!(q.ready.pop_front().unwrap().data.len(), 5000);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_dropped_queue_gives_its_buffer_back() {
        let budget = RecvBudget::new(1 << 20);
        let mut q = ReceiveQueue::new(10, 1, 10_000, budget.clone());
        q.on_data(data(12, 0, 0, true, false, &[1; 700]), true);
        assert_eq!(budget.used(), 700);
        drop(q);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn sack_acknowledging_an_unsent_chunk_changes_nothing() {
        let mut s = SendQueue::new(100, 1);
        for i in 0..4u8 {
            s.push_message(&Message { stream: 0, unordered: false, ppid: 0, data: vec![i; 10] }, 1000);
        }
        let t = Instant::ZERO;
        s.mark_sent(0, t);
        s.mark_sent(1, t);
        let sack = |cum, gap_blocks| SackChunk {
            cumulative_tsn_ack: cum,
            a_rwnd: 1000,
            gap_blocks,
            duplicate_tsns: vec![],
        };
        // TSN 102 was never sent: the whole SACK is a lie.
        let out = s.on_sack(&sack(102, vec![]), t);
        assert!(!out.cum_advanced && out.bytes_acked == 0);
        assert_eq!((s.cum_ack, s.chunks.len()), (99, 4));
        // A true SACK afterwards: 100 acknowledged, 101 in a gap block (offset 2 from 99).
        s.mark_sent(2, t);
        let out = s.on_sack(&sack(99, vec![(2, 2)]), t);
        assert!(!out.cum_advanced);
        let gap_acked: Vec<u32> = s.chunks.iter().filter(|c| c.gap_acked).map(|c| c.chunk.tsn).collect();
        assert_eq!(gap_acked, vec![101]);
    }

    #[test]
    fn sack_gaps_trigger_fast_retransmit_after_three_misses() {
        let mut s = SendQueue::new(100, 1);
        for i in 0..5u8 {
            s.push_message(&Message { stream: 0, unordered: false, ppid: 0, data: vec![i; 10] }, 1000);
        }
        let t = Instant::ZERO;
        for i in 0..5 {
            s.mark_sent(i, t);
        }
        // TSN 100 lost; 101, 102, 103 reported one by one.
        for (n, end) in [(1, 1u16), (2, 2), (3, 3)] {
            let out = s.on_sack(
                &SackChunk {
                    cumulative_tsn_ack: 99,
                    a_rwnd: 1000,
                    gap_blocks: vec![(2, end + 1)],
                    duplicate_tsns: vec![],
                },
                t,
            );
            assert_eq!(out.fast_retransmit, n == 3, "miss {n}");
        }
        assert!(s.chunks[0].needs_retransmit);
        let out = s.on_sack(
            &SackChunk { cumulative_tsn_ack: 104, a_rwnd: 1000, gap_blocks: vec![], duplicate_tsns: vec![] },
            t,
        );
        assert!(out.cum_advanced);
        assert!(s.is_empty());
    }
}
