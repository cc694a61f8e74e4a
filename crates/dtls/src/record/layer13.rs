//! The DTLS 1.3 record state of one session (RFC 9147 §4): the epoch and sequence number we
//! write, the keys of the epochs we may still read (handshake, application, the next key
//! update) each with its own replay window (§4.5.1), and the sealing and opening of a record
//! with the unified header: AEAD over DTLSInnerPlaintext with the header as additional data
//! (§4), then record number encryption (§4.2.3).

use super::ack::RecordNumber;
use super::header::{MAX_PLAINTEXT, MAX_SEQ};
use super::replay::ReplayWindow;
use super::unified::{SeqBits, UnifiedHeader, SAMPLE_LEN};
use crate::crypto::tls13::RecordKeys;
use crate::error::Error;
use fastshake_core::codec::Reader;
use std::ops::Range;

/// Epochs a peer may still send in at once: the handshake's, the application's, and one key
/// update ahead (§4.2.1 asks receivers to keep the old epoch's keys a while).
const READ_EPOCHS: usize = 3;

/// Whether a record's header carries its length (RFC 9147 §4, the L bit): a record that ends
/// its datagram extends to the datagram's end and needs none, 2 bytes saved on every record
/// sent alone (application data, ACKs, alerts); records packed together carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Other records may follow it in the datagram.
    Packed,
    /// The last (or only) record of its datagram.
    EndsDatagram,
}

/// The 1.3 epochs with fixed meanings (RFC 9147 §6.1).
pub(crate) mod epoch {
    /// 0-RTT application data under client_early_traffic_secret.
    pub const EARLY_DATA: u64 = 1;
    /// The encrypted handshake messages.
    pub const HANDSHAKE: u64 = 2;
    /// The first application traffic keys; key updates count up from here.
    pub const APPLICATION: u64 = 3;
}

struct ReadEpoch {
    epoch: u64,
    keys: RecordKeys,
    window: ReplayWindow,
    /// Records that failed authentication under these keys (§4.5.3's integrity limit).
    failures: u64,
}

/// A record that authenticated.
#[derive(Debug)]
pub(crate) struct Opened13 {
    /// The real content type, from DTLSInnerPlaintext.
    pub content_type: u8,
    pub epoch: u64,
    pub seq: u64,
    /// The content, within the record.
    pub plaintext: Range<usize>,
    /// Newer than every record received before: the highest number of the highest epoch the
    /// peer has used (RFC 9146 §6: only such a record may move a session).
    pub newest: bool,
}

/// Why a 1.3 record was not opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unopened13 {
    /// No keys for its epoch (yet, or any more).
    NoKeys,
    /// Already received, or too old for the window.
    Replayed,
    /// The AEAD did not authenticate it, or its ciphertext is too short to hold a tag.
    Unauthenticated,
    /// It authenticated but holds no content type (all zeros, §4).
    NoContentType,
    /// So many forgeries under one key that the session must end (§4.5.3).
    IntegrityLimit,
    /// It authenticated but its DTLSInnerPlaintext exceeds 2^14 + 1 bytes: the peer broke the
    /// protocol, record_overflow (RFC 8446 §5.2, §5.4).
    Overflow,
}

/// The sending half of a DTLS 1.3 session's records: the epoch we write in, its keys and the
/// next record number. Apart from the reading half because every record sealed needs it and
/// it is small: a connection keeps it inline, the rest of its 1.3 state boxed.
#[derive(Default)]
pub(crate) struct RecordWriter13 {
    keys: Option<RecordKeys>,
    epoch: u64,
    seq: u64,
}

/// The receiving half: the keys of the epochs we may still read, each with its replay window.
/// An established session reads one epoch, held inline, so that it costs no allocation of its
/// own; the epochs below it (the handshake's for a while, the one before a key update) are a
/// slice of exactly those held, behind one pointer more, so that a session that holds none
/// pays for one pointer only.
#[derive(Default)]
pub(crate) struct RecordReader13 {
    /// The highest epoch held.
    newest: Option<ReadEpoch>,
    /// The others, lowest first; `None` when there are none.
    older: Option<Box<Box<[ReadEpoch]>>>,
}

impl RecordWriter13 {
    /// Writes records of `epoch` with `keys`, numbered from 0.
    pub fn new(epoch: u64, keys: RecordKeys) -> Self {
        RecordWriter13 { keys: Some(keys), epoch, seq: 0 }
    }

    /// Our records are written in `epoch` with `keys` from now on, numbered from 0.
    pub fn set(&mut self, epoch: u64, keys: RecordKeys) {
        self.keys = Some(keys);
        self.epoch = epoch;
        self.seq = 0;
    }

    pub fn discard_keys(&mut self) {
        self.keys = None;
    }

    /// The epoch we write in (`None` before any keys).
    pub fn epoch(&self) -> Option<u64> {
        self.keys.as_ref().map(|_| self.epoch)
    }

    /// Bytes of a record around `plaintext_len` bytes of content, with `cid_len` bytes of CID.
    pub fn sealed_len(&self, cid_len: usize, plaintext_len: usize, framing: Framing) -> usize {
        match &self.keys {
            Some(keys) => sealed_len_with(keys, cid_len, plaintext_len, framing),
            // The header; content, type, padding; a 16-byte tag.
            None => header_len(cid_len, framing) + inner_len(plaintext_len, 16) + 16,
        }
    }

    /// One record of `content_type` holding `parts`, towards a peer that wants `cid` in it.
    /// Returns its record number.
    pub fn seal(
        &mut self,
        content_type: u8,
        cid: &[u8],
        parts: &[&[u8]],
        framing: Framing,
    ) -> Result<(Vec<u8>, u64, u64), Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut out = vec![0u8; self.sealed_len(cid.len(), len, framing)];
        let (epoch, seq) = self.seal_into(content_type, cid, parts, framing, &mut out)?;
        Ok((out, epoch, seq))
    }

    /// Like [`Self::seal`], into `out` of exactly [`Self::sealed_len`] bytes; allocates nothing.
    /// More than 2^14 bytes of content is refused (RFC 8446 §5.1, RFC 9147 §4).
    pub fn seal_into(
        &mut self,
        content_type: u8,
        cid: &[u8],
        parts: &[&[u8]],
        framing: Framing,
        out: &mut [u8],
    ) -> Result<(u64, u64), Error> {
        let keys = self.keys.as_ref().ok_or(Error::NotEstablished)?;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > MAX_PLAINTEXT {
            return Err(Error::RecordTooLarge { len, max: MAX_PLAINTEXT });
        }
        if self.seq > MAX_SEQ {
            return Err(Error::Closed);
        }
        let number = RecordNumber { epoch: self.epoch, seq: self.seq };
        self.seq += 1;
        seal_record(keys, number, content_type, cid, parts, framing, out)?;
        Ok((number.epoch, number.seq))
    }
}

#[cfg(test)]
impl RecordWriter13 {
    /// Seals `content` whatever its length, as a peer that breaks RFC 8446 §5.1 would, numbered
    /// `ahead` after the next record number (which is not taken).
    pub fn seal_unchecked(&self, ahead: u64, content_type: u8, content: &[u8], framing: Framing) -> Vec<u8> {
        let keys = self.keys.as_ref().expect("keys");
        let mut out = vec![0u8; sealed_len_with(keys, 0, content.len(), framing)];
        let number = RecordNumber { epoch: self.epoch, seq: self.seq + ahead };
        seal_record(keys, number, content_type, &[], &[content], framing, &mut out).expect("sealed");
        out
    }
}

impl RecordReader13 {
    /// The peer's records of `epoch` can be read with `keys`; the oldest epochs are forgotten
    /// when more than [`READ_EPOCHS`] would be kept, or ones four or more below the highest.
    pub fn add(&mut self, epoch: u64, keys: RecordKeys) {
        let mut epochs = self.take_all();
        epochs.retain(|e| e.epoch != epoch);
        epochs.push(ReadEpoch { epoch, keys, window: ReplayWindow::default(), failures: 0 });
        epochs.sort_by_key(|e| e.epoch);
        // At most READ_EPOCHS, spanning fewer than four, so that a record's two epoch bits
        // name one of them alone.
        while epochs.len() > READ_EPOCHS || epochs.last().is_some_and(|last| last.epoch - epochs[0].epoch > 3)
        {
            epochs.remove(0);
        }
        self.put_all(epochs);
    }

    /// Forgets the read keys of epochs below `epoch` (the handshake's, once it is over).
    pub fn drop_below(&mut self, epoch: u64) {
        let mut epochs = self.take_all();
        epochs.retain(|e| e.epoch >= epoch);
        self.put_all(epochs);
    }

    pub fn discard_keys(&mut self) {
        *self = RecordReader13::default();
    }

    /// The highest epoch we can read.
    pub fn epoch(&self) -> Option<u64> {
        self.newest.as_ref().map(|e| e.epoch)
    }

    /// Every epoch held, lowest first.
    fn iter(&self) -> impl Iterator<Item = &ReadEpoch> {
        self.older.iter().flat_map(|older| older.iter()).chain(&self.newest)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut ReadEpoch> {
        self.older.iter_mut().flat_map(|older| older.iter_mut()).chain(&mut self.newest)
    }

    fn take_all(&mut self) -> Vec<ReadEpoch> {
        let mut epochs = self.older.take().map(|older| older.into_vec()).unwrap_or_default();
        epochs.extend(self.newest.take());
        epochs
    }

    /// Holds `epochs` (sorted): the highest inline, the rest apart.
    fn put_all(&mut self, mut epochs: Vec<ReadEpoch>) {
        self.newest = epochs.pop();
        if !epochs.is_empty() {
            self.older = Some(Box::new(epochs.into_boxed_slice()));
        }
    }

    /// Opens the record at the start of `data` (a unified header; `own_cid_len` is the length
    /// of the CIDs we issued) in place. Returns how many bytes of `data` the record took (the
    /// caller moves past them whatever happens) and the outcome.
    pub fn open(&mut self, data: &mut [u8], own_cid_len: u8) -> (usize, Result<Opened13, Unopened13>) {
        let mut r = Reader::new(data);
        let Ok(header) = UnifiedHeader::parse(&mut r, own_cid_len) else {
            return (data.len(), Err(Unopened13::Unauthenticated));
        };
        let header_len = header.header_len();
        let end = header_len + header.length as usize;
        let record = &mut data[..end];
        // The two bits name one of the epochs held, as no two of them end in the same bits
        // (`add`): a server's early data (epoch 1) beside epoch 3, a Finished resent in epoch 2
        // after the client's first key update, records of the epoch before the last update
        // (RFC 9147 §4.2.1, §4.2.2).
        let bits = u64::from(header.epoch_bits);
        let Some(read) = self.iter_mut().find(|e| e.epoch & 0b11 == bits) else {
            return (end, Err(Unopened13::NoKeys));
        };
        let epoch_number = read.epoch;
        let tag_len = read.keys.suite().tag_len();
        let Some(sequence_key) = read.keys.sequence_key() else { return (end, Err(Unopened13::NoKeys)) };
        // Longer than 2^14 + 256 bytes: refused by `UnifiedHeader::parse`.
        if header.length as usize <= tag_len {
            return (end, Err(Unopened13::Unauthenticated));
        }
        // The header with its number decrypted is the additional data (§4).
        if !sequence_key.apply(&header, record) {
            return (end, Err(Unopened13::Unauthenticated));
        }
        let plain_header = match UnifiedHeader::parse(&mut Reader::new(record), own_cid_len) {
            Ok(h) => h,
            Err(_) => return (end, Err(Unopened13::Unauthenticated)),
        };
        let expected = read.window.highest().map_or(0, |h| h + 1);
        let seq = plain_header.full_seq(expected);
        if !read.window.is_fresh(seq) {
            return (end, Err(Unopened13::Replayed));
        }
        let (aad, sealed) = record.split_at_mut(header_len);
        let opened = read.keys.open(seq, aad, sealed);
        let Ok(n) = opened else {
            read.failures += 1;
            if read.failures >= read.keys.suite().integrity_limit() {
                return (end, Err(Unopened13::IntegrityLimit));
            }
            return (end, Err(Unopened13::Unauthenticated));
        };
        let newest = read.window.highest().is_none_or(|h| seq > h);
        read.window.mark(seq);
        let newest =
            newest && self.iter().filter(|e| e.epoch > epoch_number).all(|e| e.window.highest().is_none());
        // Content, type and padding: at most 2^14 + 1 bytes (RFC 8446 §5.4).
        if n > MAX_PLAINTEXT + 1 {
            return (end, Err(Unopened13::Overflow));
        }
        let plain = &record[header_len..header_len + n];
        // DTLSInnerPlaintext: content, type, zeros (§4, RFC 8446 §5.2).
        match plain.iter().rposition(|&b| b != 0) {
            Some(at) => (
                end,
                Ok(Opened13 {
                    content_type: plain[at],
                    epoch: epoch_number,
                    seq,
                    plaintext: header_len..header_len + at,
                    newest,
                }),
            ),
            None => (end, Err(Unopened13::NoContentType)),
        }
    }
}

/// Bytes of a record sealed with `keys` around `plaintext_len` bytes, with `cid_len` bytes of
/// CID.
fn sealed_len_with(keys: &RecordKeys, cid_len: usize, plaintext_len: usize, framing: Framing) -> usize {
    let tag = keys.suite().tag_len();
    header_len(cid_len, framing) + inner_len(plaintext_len, tag) + tag
}

/// The unified header we write: first byte, CID, 16-bit sequence number, the length if carried.
fn header_len(cid_len: usize, framing: Framing) -> usize {
    1 + cid_len + 2 + if framing == Framing::Packed { 2 } else { 0 }
}

/// Seals one record numbered `number` into `out` (exactly [`sealed_len_with`] bytes): the
/// unified header with a 16-bit number and, `Packed`, the length; DTLSInnerPlaintext (content,
/// type, padding), the AEAD with the header as additional data, then record number encryption.
/// No allocation.
fn seal_record(
    keys: &RecordKeys,
    number: RecordNumber,
    content_type: u8,
    cid: &[u8],
    parts: &[&[u8]],
    framing: Framing,
    out: &mut [u8],
) -> Result<(), Error> {
    let RecordNumber { epoch, seq } = number;
    let tag_len = keys.suite().tag_len();
    let content_len: usize = parts.iter().map(|p| p.len()).sum();
    let inner = inner_len(content_len, tag_len);
    let length = u16::try_from(inner + tag_len)
        .map_err(|_| Error::TooLarge { len: content_len, mtu: usize::from(u16::MAX) })?;
    let with_length = framing == Framing::Packed;
    let header = UnifiedHeader::new(epoch, seq, SeqBits::Sixteen, cid.len() as u8, with_length, length);
    let header_len = header.header_len();
    debug_assert_eq!(out.len(), header_len + inner + tag_len);
    header.write_into(out, cid);
    let mut pos = header_len;
    for p in parts {
        out[pos..pos + p.len()].copy_from_slice(p);
        pos += p.len();
    }
    out[pos] = content_type;
    out[pos + 1..header_len + inner].fill(0);
    let (aad, rest) = out.split_at_mut(header_len);
    let (payload, tag) = rest.split_at_mut(inner);
    keys.seal(seq, aad, payload, tag);
    let sequence_key = keys.sequence_key().ok_or(Error::NotEstablished)?;
    sequence_key.apply(&header, out);
    Ok(())
}

/// Bytes of DTLSInnerPlaintext for `content_len` bytes of content: the content, its type, and
/// zeros until the ciphertext is long enough for record number encryption to sample (§4.2.3; a
/// CCM_8 record of a short ACK would be shorter).
fn inner_len(content_len: usize, tag_len: usize) -> usize {
    (content_len + 1).max(SAMPLE_LEN.saturating_sub(tag_len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::tls13::{LabelPrefix, Suite13};

    fn pair(suite: Suite13) -> (RecordWriter13, RecordReader13) {
        let secret = [9u8; 48];
        let keys = || RecordKeys::from_secret(suite, LabelPrefix::Dtls13, &secret[..suite.hash().len()]);
        let mut a = RecordWriter13::default();
        let mut b = RecordReader13::default();
        a.set(epoch::HANDSHAKE, keys());
        b.add(epoch::HANDSHAKE, keys());
        (a, b)
    }

    #[test]
    fn records_open_once_in_any_order_for_every_suite() {
        for suite in Suite13::ALL {
            let (mut a, mut b) = pair(suite);
            let records: Vec<Vec<u8>> =
                (0..5).map(|i| a.seal(22, &[], &[b"flight ", &[i]], Framing::Packed).unwrap().0).collect();
            for i in [3usize, 0, 4, 1, 2] {
                let mut rec = records[i].clone();
                let (used, opened) = b.open(&mut rec, 0);
                assert_eq!(used, rec.len());
                let opened = opened.unwrap_or_else(|e| panic!("{suite}: record {i}: {e:?}"));
                assert_eq!((opened.content_type, opened.epoch, opened.seq), (22, 2, i as u64));
                assert_eq!(&rec[opened.plaintext], &[b"flight ".as_slice(), &[i as u8]].concat()[..]);
                let mut again = records[i].clone();
                assert_eq!(b.open(&mut again, 0).1.unwrap_err(), Unopened13::Replayed, "{suite}");
            }
        }
    }

    #[test]
    fn the_number_on_the_wire_is_encrypted_and_a_change_is_refused() {
        let (mut a, mut b) = pair(Suite13::Aes128GcmSha256);
        let numbers: Vec<[u8; 2]> = (0..4)
            .map(|_| {
                let (r, _, _) = a.seal(23, &[], &[b"x"], Framing::Packed).unwrap();
                [r[1], r[2]]
            })
            .collect();
        assert!(
            numbers.iter().any(|n| *n != [0, 0] && *n != [0, 1]),
            "plain numbers on the wire: {numbers:?}"
        );
        let (mut rec, _, _) = a.seal(23, &[], &[b"data"], Framing::Packed).unwrap();
        let last = rec.len() - 1;
        rec[last] ^= 1;
        assert_eq!(b.open(&mut rec, 0).1.unwrap_err(), Unopened13::Unauthenticated);
    }

    #[test]
    fn a_record_that_ends_its_datagram_carries_no_length_and_opens() {
        for suite in Suite13::ALL {
            let (mut a, mut b) = pair(suite);
            let (packed, _, _) = a.seal(23, &[], &[b"payload"], Framing::Packed).unwrap();
            let (mut alone, _, _) = a.seal(23, &[], &[b"payload"], Framing::EndsDatagram).unwrap();
            assert_eq!(alone.len() + 2, packed.len(), "{suite}");
            assert_eq!(alone[0] & 0b100, 0, "{suite}: the L bit is clear");
            assert_eq!(a.sealed_len(0, 7, Framing::EndsDatagram), alone.len());
            let (used, opened) = b.open(&mut alone, 0);
            assert_eq!(used, alone.len());
            let opened = opened.unwrap_or_else(|e| panic!("{suite}: {e:?}"));
            assert_eq!(&alone[opened.plaintext], b"payload");
            // A byte more at the end is part of the record: it no longer authenticates.
            let (mut longer, _, _) = a.seal(23, &[], &[b"payload"], Framing::EndsDatagram).unwrap();
            longer.push(0);
            assert_eq!(b.open(&mut longer, 0).1.unwrap_err(), Unopened13::Unauthenticated, "{suite}");
        }
    }

    /// RFC 8446 §5.1: at most 2^14 bytes of content are sealed. §5.2, §5.4: a record that
    /// authenticates with more than 2^14 + 1 bytes of DTLSInnerPlaintext is record_overflow; one
    /// over 2^14 + 256 bytes on the wire is not even read (RFC 9147 §4.5.2).
    #[test]
    fn records_over_the_rfc_limits_are_neither_sealed_nor_taken() {
        for suite in Suite13::ALL {
            let (mut a, mut b) = pair(suite);
            let max = vec![0x61; MAX_PLAINTEXT];
            let (mut rec, _, _) = a.seal(23, &[], &[&max], Framing::EndsDatagram).unwrap();
            assert_eq!(b.open(&mut rec, 0).1.unwrap().plaintext.len(), MAX_PLAINTEXT, "{suite}");
            let refused = a.seal(23, &[], &[&max, b"x"], Framing::Packed).map(|_| ());
            assert_eq!(refused, Err(Error::RecordTooLarge { len: MAX_PLAINTEXT + 1, max: MAX_PLAINTEXT }));
            let mut rec = a.seal_unchecked(0, 23, &[0x61; MAX_PLAINTEXT + 1], Framing::EndsDatagram);
            assert_eq!(b.open(&mut rec, 0).1.unwrap_err(), Unopened13::Overflow, "{suite}");
            // Content, type and tag: 2^14 + 256 bytes on the wire, the most the RFC allows.
            let tag = suite.tag_len();
            let mut rec = a.seal_unchecked(1, 23, &vec![0x61; MAX_PLAINTEXT + 255 - tag], Framing::Packed);
            assert_eq!(b.open(&mut rec, 0).1.unwrap_err(), Unopened13::Overflow, "{suite}");
            let mut rec = a.seal_unchecked(2, 23, &vec![0x61; MAX_PLAINTEXT + 256 - tag], Framing::Packed);
            assert_eq!(b.open(&mut rec, 0).1.unwrap_err(), Unopened13::Unauthenticated, "{suite}");
        }
    }

    #[test]
    fn a_tiny_ccm8_record_is_padded_to_be_sampled() {
        let (mut a, mut b) = pair(Suite13::Aes128Ccm8Sha256);
        let (mut rec, _, _) = a.seal(26, &[], &[], Framing::Packed).unwrap();
        assert!(rec.len() >= 5 + SAMPLE_LEN);
        let opened = b.open(&mut rec, 0).1.unwrap();
        assert_eq!(opened.content_type, 26);
        assert!(opened.plaintext.is_empty());
    }

    #[test]
    fn a_connection_id_is_carried_and_unknown_epochs_are_not_read() {
        let (mut a, mut b) = pair(Suite13::Aes128GcmSha256);
        let (mut rec, _, _) = a.seal(23, &[7, 7, 7, 7], &[b"cid"], Framing::Packed).unwrap();
        assert_eq!(rec[0] & 0b0001_0000, 0b0001_0000);
        assert_eq!(&rec[1..5], &[7, 7, 7, 7]);
        assert!(b.open(&mut rec.clone(), 0).1.is_err(), "a CID of a length we never issued");
        assert!(b.open(&mut rec, 4).1.is_ok());
        a.set(
            epoch::APPLICATION,
            RecordKeys::from_secret(Suite13::Aes128GcmSha256, LabelPrefix::Dtls13, &[1; 32]),
        );
        let (mut rec, _, _) = a.seal(23, &[], &[b"later"], Framing::Packed).unwrap();
        assert_eq!(b.open(&mut rec, 0).1.unwrap_err(), Unopened13::NoKeys);
    }

    #[test]
    fn the_highest_three_epochs_are_read_and_an_established_reader_holds_one_inline() {
        let suite = Suite13::Aes128GcmSha256;
        let keys = |n: u8| RecordKeys::from_secret(suite, LabelPrefix::Dtls13, &[n; 32]);
        let mut reader = RecordReader13::default();
        // Added out of order, and one more than are kept: epoch 2 goes.
        for epoch in [3, 2, 5, 4] {
            reader.add(epoch, keys(epoch as u8));
        }
        assert_eq!(reader.iter().map(|e| e.epoch).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(reader.epoch(), Some(5));
        // Epoch 3's two bits are 7's too: the epoch held is the one they name.
        for epoch in [2u64, 3, 4, 5] {
            let mut writer = RecordWriter13::new(epoch, keys(epoch as u8));
            let (mut rec, _, _) = writer.seal(23, &[], &[b"x"], Framing::Packed).unwrap();
            let opened = reader.open(&mut rec, 0).1;
            assert_eq!(opened.is_ok(), epoch != 2, "epoch {epoch}: {opened:?}");
        }
        // Epochs four or more below the highest are not kept: 1 and 5 end in the same bits.
        let mut early = RecordReader13::default();
        for epoch in [1, 3, 4, 5] {
            early.add(epoch, keys(epoch as u8));
        }
        assert_eq!(early.iter().map(|e| e.epoch).collect::<Vec<_>>(), [3, 4, 5]);
        let mut spread = RecordReader13::default();
        spread.add(1, keys(1));
        spread.add(5, keys(5));
        assert_eq!(spread.iter().map(|e| e.epoch).collect::<Vec<_>>(), [5]);
        reader.drop_below(5);
        assert!(reader.older.is_none(), "one epoch: nothing apart");
        assert_eq!(reader.iter().map(|e| e.epoch).collect::<Vec<_>>(), [5]);
        reader.discard_keys();
        assert_eq!(reader.epoch(), None);
    }
}
