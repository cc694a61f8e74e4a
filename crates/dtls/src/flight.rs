//! The one flight engine: a flight is kept as messages, not datagrams, so every (re)transmission
//! is packed afresh with new record sequence numbers (RFC 6347 §4.2.4); the timer starts at the
//! configured value, doubles on each retransmission and stops at the ceiling.

use crate::crypto::{seal_in_place, DirectionKeys};
use crate::handshake::{HandshakeHeader, HandshakeType, HANDSHAKE_HEADER_LEN};
use crate::record::{ContentType, RecordHeader, DTLS_1_2, HEADER_LEN};
use crate::suite::RecordCipher;
use fastshake_core::Instant;
use std::time::Duration;

/// One message of a flight.
#[derive(Clone, Debug)]
pub(crate) enum FlightItem {
    Handshake { epoch: u16, msg_type: HandshakeType, message_seq: u16, body: Vec<u8> },
    ChangeCipherSpec,
}

/// The retransmission timer of RFC 6347 §4.2.4.1.
#[derive(Clone, Debug)]
pub(crate) struct RetransmitTimer {
    initial: Duration,
    max: Duration,
    current: Duration,
    deadline: Option<Instant>,
    /// Whether the flight in flight needed a retransmission (then the next keeps the backed-off value).
    backed_off: bool,
    pub last_sent: Instant,
}

impl RetransmitTimer {
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        RetransmitTimer {
            initial,
            max: max.max(initial),
            current: initial,
            deadline: None,
            backed_off: false,
            last_sent: Instant::ZERO,
        }
    }

    /// A new flight was sent; `timed` when it is resent on the timer (not the last flight).
    pub fn on_new_flight(&mut self, now: Instant, timed: bool) {
        // Keep a backed-off value until a flight goes through without loss.
        if !self.backed_off {
            self.current = self.initial;
        }
        self.backed_off = false;
        self.last_sent = now;
        self.deadline = if timed { Some(now + self.current) } else { None };
    }

    /// The flight was resent (timer or peer retransmission).
    pub fn on_retransmit(&mut self, now: Instant) {
        self.current = (self.current * 2).min(self.max);
        self.backed_off = true;
        self.last_sent = now;
        if self.deadline.is_some() {
            self.deadline = Some(now + self.current);
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn current(&self) -> Duration {
        self.current
    }

    pub fn stop(&mut self) {
        self.deadline = None;
    }
}

/// Record protection for one write epoch.
#[derive(Clone, Copy)]
pub(crate) struct Protect<'a> {
    pub cipher: RecordCipher,
    pub keys: &'a DirectionKeys,
    /// The peer's Connection ID (RFC 9146); empty: records without one.
    pub cid: &'a [u8],
}

/// Bytes a record around `plaintext_len` bytes takes on the wire (with a CID: the CID in the
/// header and the real content type after the plaintext).
pub(crate) fn record_len(protect: Option<Protect<'_>>, plaintext_len: usize) -> usize {
    let cid = protect.map_or(0, |p| if p.cid.is_empty() { 0 } else { p.cid.len() + 1 });
    HEADER_LEN + protect.map_or(0, |p| p.cipher.overhead()) + plaintext_len + cid
}

/// Writes one record into `out` (exactly `record_len` bytes long): header, then the
/// plaintext (concatenation of `parts`), protected when `protect` is given.
pub(crate) fn write_record(
    out: &mut [u8],
    content_type: ContentType,
    epoch: u16,
    seq: u64,
    protect: Option<Protect<'_>>,
    parts: &[&[u8]],
) {
    let cid = protect.map_or(&[][..], |p| p.cid);
    // RFC 9146 §4: a record with a CID carries tls12_cid outside and DTLSInnerPlaintext
    // (content, real type, no padding) inside.
    let (outer_type, inner_type_len) =
        if cid.is_empty() { (content_type as u8, 0) } else { (ContentType::Tls12Cid as u8, 1) };
    let plain_len: usize = parts.iter().map(|p| p.len()).sum::<usize>() + inner_type_len;
    let header_len = HEADER_LEN + cid.len();
    let length = out.len() - header_len;
    let header = RecordHeader {
        content_type: if cid.is_empty() { content_type } else { ContentType::Tls12Cid },
        version: DTLS_1_2,
        epoch,
        seq,
        length: length as u16,
        cid_len: cid.len() as u8,
    };
    header.write(&mut out[..header_len], cid);
    let start = match protect {
        Some(_) => {
            out[header_len..header_len + 8].copy_from_slice(&header.epoch_seq().to_be_bytes());
            header_len + 8
        }
        None => header_len,
    };
    let mut pos = start;
    for p in parts {
        out[pos..pos + p.len()].copy_from_slice(p);
        pos += p.len();
    }
    if inner_type_len == 1 {
        out[pos] = content_type as u8;
    }
    if let Some(p) = protect {
        let (payload, tag) = out[start..].split_at_mut(plain_len);
        seal_in_place(p.cipher, p.keys, header.epoch_seq(), outer_type, DTLS_1_2, cid, payload, tag);
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

    /// Appends a handshake message, fragmented to fit the MTU. `next_seq` hands out record
    /// sequence numbers.
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
            let n = remaining.min(room);
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
    fn timer_doubles_to_ceiling_and_resets_after_clean_flight() {
        let mut t = RetransmitTimer::new(Duration::from_secs(1), Duration::from_secs(3));
        t.on_new_flight(Instant::ZERO, true);
        assert_eq!(t.deadline(), Some(Instant::from_millis(1000)));
        t.on_retransmit(Instant::from_millis(1000));
        assert_eq!(t.deadline(), Some(Instant::from_millis(3000)));
        t.on_retransmit(Instant::from_millis(3000));
        assert_eq!(t.current(), Duration::from_secs(3), "capped");
        t.on_new_flight(Instant::from_millis(4000), true);
        assert_eq!(t.current(), Duration::from_secs(3), "backed-off value kept after a lossy flight");
        t.on_new_flight(Instant::from_millis(5000), false);
        assert_eq!(t.deadline(), None);
        t.on_new_flight(Instant::from_millis(6000), true);
        assert_eq!(t.current(), Duration::from_secs(1));
    }

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
}
