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

    /// A record with a CID, opened by hand from its wire bytes with the additional data spelled
    /// out as RFC 9146 §5.3 lists it, so the layout and the AAD do not depend on the code that
    /// wrote them.
    #[test]
    fn connection_id_record_matches_rfc9146_layout_and_additional_data() {
        use ccm::aead::generic_array::GenericArray;
        use ccm::aead::{AeadInPlace, KeyInit};
        let keys = DirectionKeys { key: [7; 16], salt: [1, 2, 3, 4] };
        let cid = [0xc1, 0xd2, 0xe3];
        let protect = Protect { cipher: RecordCipher::Aes128Ccm8, keys: &keys, cid: &cid };
        let content = b"hello";
        let mut out = vec![0u8; record_len(Some(protect), content.len())];
        write_record(&mut out, ContentType::ApplicationData, 1, 0x0102_0304_0506, Some(protect), &[content]);
        // Header: tls12_cid, version, epoch 1, sequence number, CID, length.
        assert_eq!(out[0], 25);
        assert_eq!(&out[1..3], &[0xfe, 0xfd]);
        assert_eq!(&out[3..11], &[0, 1, 1, 2, 3, 4, 5, 6]);
        assert_eq!(&out[11..14], &cid);
        let length = u16::from_be_bytes([out[14], out[15]]) as usize;
        assert_eq!(length, out.len() - 16);
        // Body: 8-byte explicit nonce, then DTLSInnerPlaintext (content + real type) and the tag.
        let explicit = &out[16..24];
        let inner_len = length - 8 - 8;
        assert_eq!(inner_len, content.len() + 1);
        let mut aad = vec![0xff; 8];
        aad.extend_from_slice(&[25, cid.len() as u8, 25, 0xfe, 0xfd]);
        aad.extend_from_slice(&out[3..11]);
        aad.extend_from_slice(&cid);
        aad.extend_from_slice(&(inner_len as u16).to_be_bytes());
        let mut nonce = keys.salt.to_vec();
        nonce.extend_from_slice(explicit);
        let mut body = out[24..24 + inner_len].to_vec();
        let tag = out[24 + inner_len..].to_vec();
        let aead = ccm::Ccm::<aes::Aes128, ccm::consts::U8, ccm::consts::U12>::new(GenericArray::from_slice(
            &keys.key,
        ));
        aead.decrypt_in_place_detached(
            GenericArray::from_slice(&nonce),
            &aad,
            &mut body,
            GenericArray::from_slice(&tag),
        )
        .expect("authenticates under the RFC 9146 additional data");
        assert_eq!(&body[..content.len()], content);
        assert_eq!(body[content.len()], ContentType::ApplicationData as u8);
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
