//! The event queue: a binary heap ordered by time, ties broken by insertion order, so two
//! runs with the same seed process the same events in the same order.
//!
//! The heap holds small keys (time, sequence number, slot); the events themselves wait in a
//! slab of reusable slots, so sifting moves 24 bytes instead of whole events with their
//! datagrams.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry {
    at: u64,
    seq: u64,
    slot: u32,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so the max-heap pops the earliest (then first-inserted) entry.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.cmp(&self.at).then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Events of type `E` due at virtual times in nanoseconds.
pub(crate) struct EventQueue<E> {
    heap: BinaryHeap<Entry>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    next_seq: u64,
}

impl<E> EventQueue<E> {
    pub(crate) fn new() -> Self {
        EventQueue { heap: BinaryHeap::new(), slots: Vec::new(), free: Vec::new(), next_seq: 0 }
    }

    pub(crate) fn push(&mut self, at: u64, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                // More than 2^32 pending events would exhaust memory long before this wraps.
                let slot = u32::try_from(self.slots.len()).expect("fewer than 2^32 pending events");
                self.slots.push(Some(event));
                slot
            }
        };
        self.heap.push(Entry { at, seq, slot });
    }

    /// When the earliest event is due.
    pub(crate) fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.at)
    }

    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        let entry = self.heap.pop()?;
        let event = self.slots.get_mut(entry.slot as usize)?.take()?;
        self.free.push(entry.slot);
        Some((entry.at, event))
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(5, 'a');
        q.push(1, 'b');
        q.push(5, 'c');
        q.push(1, 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
    }
}
