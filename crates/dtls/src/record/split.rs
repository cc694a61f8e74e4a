//! One datagram split into its records, once: the endpoint routes on the split and the
//! connection consumes it (RFC 6347 §4.1.1: several records per datagram, never one record across
//! datagrams — except where a peer breaks that rule, see [`SplitRecord`]).

use super::header::{ContentType, RecordHeader};
use fastshake_core::codec::{DecodeError, Reader};
use std::ops::Range;

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

    /// The records after the first, whose header `first` was read already.
    pub(crate) fn after(datagram: &'a [u8], first: &RecordHeader, cid_len: u8) -> Self {
        let pos = (first.len() + first.length as usize).min(datagram.len());
        Records { datagram, pos, cid_len }
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

/// Bytes kept of a record split across datagrams (the start that came in the first one).
const MAX_SPLIT_RECORD_KEPT: usize = 8192;

/// The start of a record the peer split across datagrams, kept for its next datagram.
///
/// RFC 6347 §4.1.1 wants every record inside one datagram, but a sender that writes a flight
/// through a fixed-size buffer (OpenSSL 3.0 flushes its 4 KiB write buffer mid-record when the
/// path MTU is large, as on loopback) sends the rest at the start of its next datagram. Keeping
/// the start until then completes the flight on first arrival instead of after both sides'
/// retransmission timers.
pub(crate) struct SplitRecord {
    /// Header and the part of the body that came.
    bytes: Vec<u8>,
    /// Length of the whole record, header included (at most 13 + 255 + 2^14 + 2048 bytes).
    len: usize,
}

impl SplitRecord {
    /// The start of a handshake record (the only kind worth waiting for) cut off at the end of a
    /// datagram: `rest` is everything from its header on.
    pub fn keep(header: &RecordHeader, rest: &[u8]) -> Option<SplitRecord> {
        let handshake = matches!(header.content_type, ContentType::Handshake | ContentType::Tls12Cid);
        (handshake && rest.len() <= MAX_SPLIT_RECORD_KEPT)
            .then(|| SplitRecord { bytes: rest.to_vec(), len: header.len() + header.length as usize })
    }

    /// How many leading bytes of `datagram` complete the record: only when the datagram does not
    /// read as whole records by itself and does once those bytes are taken off, so an ordinary
    /// datagram is never taken apart.
    pub fn continuation_len(&self, datagram: &[u8], cid_len: u8) -> Option<usize> {
        let need = self.len.checked_sub(self.bytes.len())?;
        let whole = |d: &[u8]| Records::with_cid(d, cid_len).all(|r| r.is_ok());
        (need > 0 && datagram.len() >= need && !whole(datagram) && whole(&datagram[need..])).then_some(need)
    }

    /// The whole record, its start followed by `rest`.
    pub fn complete(self, rest: &[u8]) -> Vec<u8> {
        let mut record = self.bytes;
        record.extend_from_slice(rest);
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{DTLS_1_2, HEADER_LEN};

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

    fn plain_record(content_type: ContentType, seq: u64, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN + body.len()];
        crate::record::write_record(&mut out, content_type, 0, seq, None, &[body]);
        out
    }

    #[test]
    fn a_split_record_takes_only_a_real_continuation() {
        let record = plain_record(ContentType::Handshake, 7, &[0xab; 300]);
        let split = SplitRecord { bytes: record[..100].to_vec(), len: record.len() };
        let ccs = plain_record(ContentType::ChangeCipherSpec, 8, &[1]);
        // The rest, then whole records: a continuation.
        let rest = [&record[100..], &ccs[..]].concat();
        assert_eq!(split.continuation_len(&rest, 0), Some(record.len() - 100));
        // The rest alone: a continuation too.
        assert_eq!(split.continuation_len(&record[100..], 0), Some(record.len() - 100));
        // A datagram that reads as whole records by itself is never taken apart.
        let whole = [&ccs[..], &plain_record(ContentType::Alert, 9, &[1, 0])[..]].concat();
        assert_eq!(split.continuation_len(&whole, 0), None);
        // Too short, or bytes after the rest that are not records: not a continuation.
        assert_eq!(split.continuation_len(&record[100..150], 0), None);
        let garbage = [&record[100..], &[0x99; 7][..]].concat();
        assert_eq!(split.continuation_len(&garbage, 0), None);
        assert_eq!(split.complete(&record[100..]), record);
    }
}
