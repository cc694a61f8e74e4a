//! The DTLS 1.2 record layer (RFC 6347 §4.1): header, epochs, 48-bit sequence numbers, the
//! anti-replay window, and several records per datagram (never one record across datagrams).

use crate::codec::{DecodeError, Reader};
use std::ops::Range;

/// Bytes of a DTLS 1.2 record header.
pub const HEADER_LEN: usize = 13;
/// DTLS 1.2 on the wire.
pub const DTLS_1_2: u16 = 0xFEFD;
/// DTLS 1.0 on the wire (HelloVerifyRequest and some ClientHello records use it).
pub const DTLS_1_0: u16 = 0xFEFF;
/// Largest sequence number in an epoch.
pub const MAX_SEQ: u64 = (1 << 48) - 1;
/// Largest protected fragment RFC 5246 §6.2.3 allows.
pub const MAX_CIPHERTEXT: usize = (1 << 14) + 2048;

/// Record content types (RFC 5246 §6.2.1, `tls12_cid` of RFC 9146, `return_routability_check`
/// of RFC 9853).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType {
    ChangeCipherSpec = 20,
    Alert = 21,
    Handshake = 22,
    ApplicationData = 23,
    /// Outer type of a record with a Connection ID; the real type is inside the ciphertext.
    Tls12Cid = 25,
    ReturnRoutabilityCheck = 27,
}

impl ContentType {
    /// The type of a record on the wire (`tls12_cid` is read only where a CID is expected).
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            20 => Some(ContentType::ChangeCipherSpec),
            21 => Some(ContentType::Alert),
            22 => Some(ContentType::Handshake),
            23 => Some(ContentType::ApplicationData),
            27 => Some(ContentType::ReturnRoutabilityCheck),
            _ => None,
        }
    }
}

/// A parsed record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub content_type: ContentType,
    pub version: u16,
    pub epoch: u16,
    pub seq: u64,
    pub length: u16,
    /// Bytes of Connection ID after the sequence number (`tls12_cid` records only).
    pub cid_len: u8,
}

impl RecordHeader {
    /// The 64-bit value used as explicit nonce and in the additional data.
    pub fn epoch_seq(&self) -> u64 {
        ((self.epoch as u64) << 48) | self.seq
    }

    /// Bytes of the header on the wire (13, plus the CID of a `tls12_cid` record).
    pub fn len(&self) -> usize {
        HEADER_LEN + self.cid_len as usize
    }

    /// Writes the header into `out` (`self.len()` bytes), with `cid` (of `cid_len` bytes).
    pub fn write(&self, out: &mut [u8], cid: &[u8]) {
        out[0] = self.content_type as u8;
        out[1..3].copy_from_slice(&self.version.to_be_bytes());
        out[3..11].copy_from_slice(&self.epoch_seq().to_be_bytes());
        let cid_end = 11 + cid.len();
        out[11..cid_end].copy_from_slice(cid);
        out[cid_end..cid_end + 2].copy_from_slice(&self.length.to_be_bytes());
    }

    /// Parses a header; a `tls12_cid` record is read only when `cid_len` (the length of the
    /// CIDs we issue) is not zero, and its CID is then `cid_len` bytes.
    pub fn parse(r: &mut Reader<'_>, cid_len: u8) -> Result<Self, DecodeError> {
        let type_byte = r.u8()?;
        let content_type = match ContentType::from_u8(type_byte) {
            Some(t) => t,
            None if type_byte == ContentType::Tls12Cid as u8 && cid_len > 0 => ContentType::Tls12Cid,
            None => return Err(DecodeError::Invalid("content type")),
        };
        let version = r.u16()?;
        if version != DTLS_1_2 && version != DTLS_1_0 {
            return Err(DecodeError::Invalid("record version"));
        }
        let epoch = r.u16()?;
        let seq = r.u48()?;
        let cid_len = if content_type == ContentType::Tls12Cid {
            r.take(cid_len as usize)?;
            cid_len
        } else {
            0
        };
        let length = r.u16()?;
        if length as usize > MAX_CIPHERTEXT {
            return Err(DecodeError::Invalid("record length"));
        }
        Ok(RecordHeader { content_type, version, epoch, seq, length, cid_len })
    }
}

/// Walks the records of one datagram, yielding each header and the range of its body.
pub struct Records<'a> {
    datagram: &'a [u8],
    pos: usize,
    cid_len: u8,
}

impl<'a> Records<'a> {
    /// Records without Connection IDs (a `tls12_cid` record is malformed).
    pub fn new(datagram: &'a [u8]) -> Self {
        Records { datagram, pos: 0, cid_len: 0 }
    }

    /// Records of a receiver that issues `cid_len`-byte CIDs.
    pub fn with_cid(datagram: &'a [u8], cid_len: u8) -> Self {
        Records { datagram, pos: 0, cid_len }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<(RecordHeader, Range<usize>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.datagram.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let mut r = Reader::new(rest);
        let parsed = RecordHeader::parse(&mut r, self.cid_len).and_then(|h| {
            r.take(h.length as usize)?;
            Ok(h)
        });
        match parsed {
            Ok(h) => {
                let start = self.pos + h.len();
                let end = start + h.length as usize;
                self.pos = end;
                Some(Ok((h, start..end)))
            }
            Err(e) => {
                // A malformed header leaves no way to find the next record: drop the rest.
                self.pos = self.datagram.len();
                Some(Err(e))
            }
        }
    }
}

/// The 64-record sliding anti-replay window of RFC 6347 §4.1.2.6.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    /// Highest sequence number accepted, plus one (0: none yet).
    next: u64,
    /// Bit i set: `next - 1 - i` was accepted.
    bits: u64,
}

impl ReplayWindow {
    /// Whether `seq` is new and inside the window. Check before decrypting, mark after.
    pub fn is_fresh(&self, seq: u64) -> bool {
        if seq >= self.next {
            return true;
        }
        let age = self.next - 1 - seq;
        age < 64 && self.bits & (1 << age) == 0
    }

    /// Records `seq` as received (after it authenticated).
    pub fn mark(&mut self, seq: u64) {
        if seq >= self.next {
            let shift = seq + 1 - self.next;
            self.bits = if shift >= 64 { 0 } else { self.bits << shift };
            self.bits |= 1;
            self.next = seq + 1;
        } else {
            let age = self.next - 1 - seq;
            if age < 64 {
                self.bits |= 1 << age;
            }
        }
    }

    /// Highest sequence number accepted so far (RFC 9146 §6: only a newer record may move a session).
    pub fn highest(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_window_slides() {
        let mut w = ReplayWindow::default();
        assert!(w.is_fresh(0));
        w.mark(0);
        assert!(!w.is_fresh(0));
        w.mark(5);
        assert!(w.is_fresh(3));
        w.mark(3);
        assert!(!w.is_fresh(3) && !w.is_fresh(5) && w.is_fresh(4));
        w.mark(100);
        assert!(!w.is_fresh(36), "outside the window");
        assert!(w.is_fresh(37) && !w.is_fresh(100) && w.is_fresh(101));
        w.mark(1000);
        assert!(!w.is_fresh(100) && w.is_fresh(999));
        assert_eq!(w.highest(), Some(1000));
    }

    #[test]
    fn records_split_and_reject_bad_headers() {
        let mut d = Vec::new();
        for (i, body) in [&b"ab"[..], &b"cde"[..]].iter().enumerate() {
            let mut h = [0u8; HEADER_LEN];
            RecordHeader {
                content_type: ContentType::Handshake,
                version: DTLS_1_2,
                epoch: 0,
                seq: i as u64,
                length: body.len() as u16,
                cid_len: 0,
            }
            .write(&mut h, &[]);
            d.extend_from_slice(&h);
            d.extend_from_slice(body);
        }
        let recs: Vec<_> = Records::new(&d).collect();
        assert_eq!(recs.len(), 2);
        let (h, range) = recs[1].clone().unwrap();
        assert_eq!((h.seq, &d[range]), (1, &b"cde"[..]));
        // Truncated second record: an error and nothing after it.
        let recs: Vec<_> = Records::new(&d[..d.len() - 1]).collect();
        assert!(recs[0].is_ok() && recs[1].is_err() && recs.len() == 2);
        assert!(Records::new(&[99; 20]).next().unwrap().is_err());
    }
}
