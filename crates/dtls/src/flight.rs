//! The one flight engine: a flight is kept as messages, not datagrams, so every (re)transmission
//! is packed afresh with new record sequence numbers (RFC 6347 §4.2.4); its retransmission timer
//! ([`crate::timer`]) says when.

use crate::handshake::{HandshakeHeader, HandshakeType, HANDSHAKE_HEADER_LEN};
use crate::record::{record_len, write_record, ContentType, Protect, RecordLayer, MAX_PLAINTEXT};
pub(crate) use crate::timer::Resend;
use crate::timer::RetransmitTimer;
use fastshake_core::Instant;

/// One message of a flight.
#[derive(Clone, Debug)]
pub(crate) enum FlightItem {
    Handshake { epoch: u16, msg_type: HandshakeType, message_seq: u16, body: Vec<u8> },
    ChangeCipherSpec,
}

/// Our current flight: its messages (kept as messages, so a retransmission is packed afresh),
/// its retransmission timer, and how many flights went out and were resent.
pub(crate) struct Flight {
    items: Vec<FlightItem>,
    pub timer: RetransmitTimer,
    /// Resent on our timer (every flight but the handshake's last, which waits for the peer to
    /// show it was lost).
    timed: bool,
    /// Flights sent, first transmissions only.
    pub sent: u32,
    /// Flights resent.
    pub resent: u32,
}

impl Flight {
    pub fn new(timer: RetransmitTimer) -> Self {
        Flight { items: Vec::new(), timer, timed: false, sent: 0, resent: 0 }
    }

    /// Forgets the last flight: the next one is being built.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn push(&mut self, item: FlightItem) {
        self.items.push(item);
    }

    /// The flight went out for the first time (`bytes` in datagrams, epoch-0 record numbers
    /// `seqs`, after `received` bytes from the peer in all); `timed` when our timer resends it.
    /// Returns when it is due again, if timed.
    pub fn on_first_transmission(
        &mut self,
        now: Instant,
        timed: bool,
        bytes: u32,
        seqs: std::ops::Range<u64>,
        received: u64,
    ) -> Option<Instant> {
        self.sent += 1;
        self.timed = timed;
        let due = self.timer.on_sent(now, bytes, seqs, received);
        if !timed {
            self.timer.expect_no_answer();
        }
        timed.then_some(due)
    }

    /// The flight went out again, for `cause`. Returns when it is due again, if timed.
    pub fn on_retransmission(
        &mut self,
        now: Instant,
        seqs: std::ops::Range<u64>,
        cause: Resend,
    ) -> Option<Instant> {
        self.resent += 1;
        let due = self.timer.on_resent(now, seqs, cause);
        self.timed.then_some(due)
    }

    /// Packs the flight into datagrams of at most `mtu` bytes with fresh record sequence numbers:
    /// epoch 0 from `epoch0_seq`, epoch 1 from the record layer, which starts writing epoch 1 at
    /// the ChangeCipherSpec. Epoch-1 messages are left out while no keys exist.
    pub fn pack(
        &self,
        mtu: usize,
        epoch0_seq: &mut u64,
        layer: &mut RecordLayer,
        peer_cid: &[u8],
    ) -> Vec<Vec<u8>> {
        let mut b = DatagramBuilder::new(mtu);
        for item in &self.items {
            match item {
                FlightItem::Handshake { epoch: 0, msg_type, message_seq, body } => {
                    b.push_handshake(0, *msg_type, *message_seq, body, None, &mut || {
                        *epoch0_seq += 1;
                        *epoch0_seq - 1
                    });
                }
                FlightItem::Handshake { epoch, msg_type, message_seq, body } => {
                    let Some((protect, write_seq)) = layer.writer(peer_cid) else { continue };
                    b.push_handshake(*epoch, *msg_type, *message_seq, body, Some(protect), &mut || {
                        *write_seq += 1;
                        *write_seq - 1
                    });
                }
                FlightItem::ChangeCipherSpec => {
                    let seq = *epoch0_seq;
                    *epoch0_seq += 1;
                    b.push(ContentType::ChangeCipherSpec, 0, seq, None, &[&[1]]);
                    layer.start_writing_epoch_1();
                }
            }
        }
        b.finish()
    }
}

/// Packs records into datagrams no larger than the MTU.
pub(crate) struct DatagramBuilder {
    mtu: usize,
    current: Vec<u8>,
    pub done: Vec<Vec<u8>>,
}

impl DatagramBuilder {
    pub fn new(mtu: usize) -> Self {
        DatagramBuilder { mtu, current: Vec::with_capacity(mtu), done: Vec::new() }
    }

    fn room(&self) -> usize {
        self.mtu.saturating_sub(self.current.len())
    }

    pub fn flush(&mut self) {
        if !self.current.is_empty() {
            let full = std::mem::replace(&mut self.current, Vec::with_capacity(self.mtu));
            self.done.push(full);
        }
    }

    /// Appends one record, starting a new datagram when it does not fit.
    pub fn push(
        &mut self,
        content_type: ContentType,
        epoch: u16,
        seq: u64,
        protect: Option<Protect<'_>>,
        parts: &[&[u8]],
    ) {
        let len = record_len(protect, parts.iter().map(|p| p.len()).sum());
        if len > self.room() {
            self.flush();
        }
        let start = self.current.len();
        self.current.resize(start + len, 0);
        write_record(&mut self.current[start..], content_type, epoch, seq, protect, parts);
    }

    /// Appends a handshake message, fragmented to fit the MTU and records of at most 2^14 bytes
    /// (RFC 6347 §4.1, RFC 5246 §6.2.1). `next_seq` hands out record sequence numbers.
    pub fn push_handshake(
        &mut self,
        epoch: u16,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
        protect: Option<Protect<'_>>,
        next_seq: &mut dyn FnMut() -> u64,
    ) {
        let overhead = record_len(protect, HANDSHAKE_HEADER_LEN);
        // Smallest fragment worth starting in the rest of a datagram.
        const MIN_FRAGMENT: usize = 8;
        let mut offset = 0usize;
        loop {
            let remaining = body.len() - offset;
            let mut room = self.room().saturating_sub(overhead);
            if room < remaining && room < MIN_FRAGMENT {
                self.flush();
                room = self.room().saturating_sub(overhead).max(1);
            }
            let n = remaining.min(room).min(MAX_PLAINTEXT - HANDSHAKE_HEADER_LEN);
            let mut hdr = Vec::with_capacity(HANDSHAKE_HEADER_LEN);
            HandshakeHeader {
                msg_type,
                length: body.len() as u32,
                message_seq,
                fragment_offset: offset as u32,
                fragment_length: n as u32,
            }
            .write(&mut hdr);
            let seq = next_seq();
            self.push(ContentType::Handshake, epoch, seq, protect, &[&hdr, &body[offset..offset + n]]);
            offset += n;
            if offset >= body.len() {
                break;
            }
        }
    }

    pub fn finish(mut self) -> Vec<Vec<u8>> {
        self.flush();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_fragments_fit_the_mtu() {
        let body: Vec<u8> = (0..=255).collect();
        let mut b = DatagramBuilder::new(96);
        let mut seq = 0;
        b.push_handshake(0, HandshakeType::ClientKeyExchange, 2, &body, None, &mut || {
            seq += 1;
            seq
        });
        let dgs = b.finish();
        assert!(dgs.len() >= 4);
        let mut got = vec![0u8; body.len()];
        for d in &dgs {
            assert!(d.len() <= 96);
            for rec in crate::record::Records::new(d) {
                let (_, range) = rec.unwrap();
                for f in crate::handshake::parse_fragments(&d[range]) {
                    let (h, data) = f.unwrap();
                    got[h.fragment_offset as usize..][..data.len()].copy_from_slice(data);
                }
            }
        }
        assert_eq!(got, body);
    }

    /// However large the MTU, no record holds more than 2^14 bytes (RFC 6347 §4.1); records
    /// still share a datagram while it has room.
    #[test]
    fn handshake_fragments_stay_within_a_record_at_a_huge_mtu() {
        let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut b = DatagramBuilder::new(65_507);
        let mut seq = 0;
        b.push_handshake(0, HandshakeType::Certificate, 2, &body, None, &mut || {
            seq += 1;
            seq
        });
        let dgs = b.finish();
        assert_eq!(dgs.len(), 1, "40 kB fit one datagram of 65,507 bytes");
        let mut got = vec![0u8; body.len()];
        let mut records = 0;
        for rec in crate::record::Records::new(&dgs[0]) {
            let (_, range) = rec.unwrap();
            assert!(range.len() <= 1 << 14, "a record of {} bytes", range.len());
            records += 1;
            for f in crate::handshake::parse_fragments(&dgs[0][range]) {
                let (h, data) = f.unwrap();
                got[h.fragment_offset as usize..][..data.len()].copy_from_slice(data);
            }
        }
        assert_eq!(records, 3);
        assert_eq!(got, body);
    }
}
