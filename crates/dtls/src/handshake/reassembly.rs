//! Reassembly of handshake messages from fragments that arrive out of order, twice or
//! overlapping (RFC 6347 §4.2.3), into a bounded buffer, delivered strictly in message_seq order.

use super::{HandshakeHeader, HandshakeType, MAX_MESSAGE_LEN};

/// How many messages beyond the next expected one may be buffered.
const MAX_AHEAD: u16 = 8;
/// Bytes a peer may make one connection hold in incomplete messages, across all of them,
/// unless [`Reassembler::with_budget`] says otherwise. Buffers are sized from the length a
/// fragment *claims*, before anything is authenticated, so this is what an unauthenticated
/// peer can pin. PSK handshake messages are a few hundred bytes and certificate chains a few
/// KiB; a longer message is refused and the handshake times out.
pub const DEFAULT_REASSEMBLY_BUDGET: usize = 16 * 1024;
/// The budget of a side that takes a certificate chain from its peer (a client with trust
/// anchors; a server that asks for client certificates): a chain of a few RSA-4096
/// certificates runs past 16 KiB. The peer is one this side chose, or one whose address the
/// cookie proved.
pub const PEER_CHAIN_BUDGET: usize = 64 * 1024;
/// Disjoint byte ranges one incomplete message may have. A peer sending in order (or the
/// reverse) keeps one or two; a fragment that would open one more is dropped and comes back
/// with the peer's retransmitted flight, so a flood of tiny disjoint fragments costs the server
/// a bounded amount of work per fragment.
const MAX_RANGES: usize = 32;

/// One handshake fragment as received.
#[derive(Clone, Copy, Debug)]
pub struct Fragment<'a> {
    pub header: HandshakeHeader,
    pub data: &'a [u8],
}

/// What became of a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// Part of a message already delivered: a retransmission by the peer.
    Old,
    /// Buffered (possibly completing a message).
    Accepted,
    /// Too far ahead, too large, or inconsistent with earlier fragments.
    Dropped,
}

#[derive(Debug)]
struct Slot {
    seq: u16,
    msg_type: HandshakeType,
    body: Vec<u8>,
    /// Received byte ranges, sorted and merged.
    have: Vec<(u32, u32)>,
}

impl Slot {
    fn complete(&self) -> bool {
        self.body.is_empty() || self.have.first() == Some(&(0, self.body.len() as u32))
    }

    /// Copies a fragment in and records its range; false (nothing recorded) when it would open
    /// more than [`MAX_RANGES`] disjoint ranges. `have` stays sorted and merged, in place.
    fn add(&mut self, start: u32, data: &[u8]) -> bool {
        let end = start + data.len() as u32;
        if start == end {
            return true;
        }
        // The first range that ends at or after `start` (touching ranges merge too) ...
        let first = self.have.partition_point(|&(_, e)| e < start);
        // ... and the ranges from it on that start at or before `end` all merge with the fragment.
        let after = first + self.have[first..].iter().take_while(|&&(s, _)| s <= end).count();
        if first == after {
            if self.have.len() >= MAX_RANGES {
                return false;
            }
            self.have.insert(first, (start, end));
        } else {
            let merged = (self.have[first].0.min(start), self.have[after - 1].1.max(end));
            self.have[first] = merged;
            self.have.drain(first + 1..after);
        }
        self.body[start as usize..end as usize].copy_from_slice(data);
        true
    }
}

/// Buffers fragments and hands out whole messages in order.
#[derive(Debug)]
pub struct Reassembler {
    next_seq: u16,
    slots: Vec<Slot>,
    buffered: usize,
    budget: usize,
}

impl Reassembler {
    pub fn new(next_seq: u16) -> Self {
        Self::with_budget(next_seq, DEFAULT_REASSEMBLY_BUDGET)
    }

    /// A reassembler that buffers at most `budget` bytes of incomplete messages (at most
    /// [`MAX_MESSAGE_LEN`] for one message), e.g. sized from the largest message a
    /// configuration can legitimately receive.
    pub fn with_budget(next_seq: u16, budget: usize) -> Self {
        Reassembler { next_seq, slots: Vec::new(), buffered: 0, budget }
    }

    /// Sets how many bytes of incomplete messages it buffers at most.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    /// The message_seq of the next message to deliver.
    pub fn next_seq(&self) -> u16 {
        self.next_seq
    }

    /// Whether fragments of messages not yet complete are held.
    pub fn holds_fragments(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Bytes the messages begun but incomplete still lack.
    pub fn missing_bytes(&self) -> u32 {
        let missing = |slot: &Slot| {
            let have: u32 = slot.have.iter().map(|(s, e)| e - s).sum();
            (slot.body.len() as u32).saturating_sub(have)
        };
        self.slots.iter().map(missing).sum()
    }

    /// Forgets everything and expects `next_seq` next.
    pub fn reset(&mut self, next_seq: u16) {
        self.next_seq = next_seq;
        self.slots.clear();
        self.buffered = 0;
    }

    pub fn insert(&mut self, f: &Fragment<'_>) -> Insert {
        let h = &f.header;
        if h.message_seq < self.next_seq {
            return Insert::Old;
        }
        if h.message_seq - self.next_seq >= MAX_AHEAD || h.length > MAX_MESSAGE_LEN {
            return Insert::Dropped;
        }
        debug_assert_eq!(f.data.len() as u32, h.fragment_length);
        let idx = match self.slots.iter().position(|s| s.seq == h.message_seq) {
            Some(i) => {
                let s = &self.slots[i];
                if s.msg_type != h.msg_type || s.body.len() != h.length as usize {
                    return Insert::Dropped;
                }
                i
            }
            None => {
                if self.buffered + h.length as usize > self.budget {
                    return Insert::Dropped;
                }
                self.buffered += h.length as usize;
                self.slots.push(Slot {
                    seq: h.message_seq,
                    msg_type: h.msg_type,
                    body: vec![0; h.length as usize],
                    have: Vec::new(),
                });
                self.slots.len() - 1
            }
        };
        if self.slots[idx].add(h.fragment_offset, f.data) {
            Insert::Accepted
        } else {
            Insert::Dropped
        }
    }

    /// The next message in order, if complete.
    pub fn pop(&mut self) -> Option<(HandshakeType, u16, Vec<u8>)> {
        let i = self.slots.iter().position(|s| s.seq == self.next_seq && s.complete())?;
        let slot = self.slots.swap_remove(i);
        self.buffered -= slot.body.len();
        self.next_seq = self.next_seq.wrapping_add(1);
        Some((slot.msg_type, slot.seq, slot.body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(seq: u16, len: u32, off: u32, data: &[u8]) -> Fragment<'_> {
        Fragment {
            header: HandshakeHeader {
                msg_type: HandshakeType::ClientKeyExchange,
                length: len,
                message_seq: seq,
                fragment_offset: off,
                fragment_length: data.len() as u32,
            },
            data,
        }
    }

    #[test]
    fn out_of_order_duplicate_and_overlapping_fragments() {
        let msg: Vec<u8> = (0..100u8).collect();
        let mut r = Reassembler::new(2);
        assert_eq!(r.insert(&frag(2, 100, 60, &msg[60..])), Insert::Accepted);
        assert_eq!(r.insert(&frag(2, 100, 60, &msg[60..])), Insert::Accepted);
        assert!(r.pop().is_none());
        assert_eq!(r.insert(&frag(2, 100, 10, &msg[10..70])), Insert::Accepted);
        assert!(r.pop().is_none());
        // The next message completes first but must wait for seq 2.
        assert_eq!(r.insert(&frag(3, 3, 0, &[1, 2, 3])), Insert::Accepted);
        assert!(r.pop().is_none());
        assert_eq!(r.insert(&frag(2, 100, 0, &msg[0..20])), Insert::Accepted);
        let (_, seq, body) = r.pop().unwrap();
        assert_eq!((seq, &body[..]), (2, &msg[..]));
        assert_eq!(r.pop().unwrap().2, [1, 2, 3]);
        assert_eq!(r.insert(&frag(2, 100, 0, &msg[..10])), Insert::Old);
        assert_eq!(r.next_seq(), 4);
    }

    #[test]
    fn claimed_lengths_beyond_the_budget_are_refused() {
        let mut r = Reassembler::new(0);
        assert_eq!(r.insert(&frag(0, DEFAULT_REASSEMBLY_BUDGET as u32 + 1, 0, &[0])), Insert::Dropped);
        assert_eq!(r.insert(&frag(0, 10_000, 0, &[0])), Insert::Accepted);
        assert_eq!(r.insert(&frag(1, 10_000, 0, &[0])), Insert::Dropped, "over the budget across messages");
        assert_eq!(r.insert(&frag(1, 6_000, 0, &[0])), Insert::Accepted);
        let mut small = Reassembler::with_budget(0, 100);
        assert_eq!(small.insert(&frag(0, 101, 0, &[0])), Insert::Dropped);
        assert_eq!(small.insert(&frag(0, 100, 0, &[0])), Insert::Accepted);
    }

    #[test]
    fn ranges_merge_in_place_and_are_capped() {
        let msg: Vec<u8> = (0..=255u8).collect();
        let mut r = Reassembler::new(0);
        // Every other byte: disjoint ranges up to the cap, then refused.
        for k in 0..MAX_RANGES as u32 {
            assert_eq!(r.insert(&frag(0, 256, 2 * k, &msg[2 * k as usize..][..1])), Insert::Accepted);
        }
        assert_eq!(r.slots[0].have.len(), MAX_RANGES);
        let next = 2 * MAX_RANGES as u32;
        assert_eq!(r.insert(&frag(0, 256, next, &[0])), Insert::Dropped, "one range too many");
        // A fragment bridging several ranges merges them into one, with the one it touches.
        assert_eq!(r.insert(&frag(0, 256, 0, &msg[..20])), Insert::Accepted);
        assert_eq!(r.slots[0].have.len(), MAX_RANGES - 10);
        assert_eq!(r.slots[0].have[0], (0, 21));
        // The rest, in reverse order, completes the message with the right bytes.
        for start in (20usize..256).rev().step_by(7) {
            let s = start.saturating_sub(6).max(20);
            assert_eq!(r.insert(&frag(0, 256, s as u32, &msg[s..=start])), Insert::Accepted);
        }
        let (_, _, body) = r.pop().expect("complete");
        assert_eq!(body, msg);
    }

    #[test]
    fn bounded() {
        let mut r = Reassembler::new(0);
        assert_eq!(r.insert(&frag(MAX_AHEAD, 1, 0, &[0])), Insert::Dropped);
        assert_eq!(r.insert(&frag(0, MAX_MESSAGE_LEN + 1, 0, &[0])), Insert::Dropped);
        assert_eq!(r.insert(&frag(0, 10, 0, &[0])), Insert::Accepted);
        assert_eq!(r.insert(&frag(0, 11, 0, &[0])), Insert::Dropped, "length changed");
        let mut empty = Reassembler::new(0);
        assert_eq!(empty.insert(&frag(0, 0, 0, &[])), Insert::Accepted);
        assert!(empty.pop().is_some(), "zero-length messages complete at once");
    }
}
