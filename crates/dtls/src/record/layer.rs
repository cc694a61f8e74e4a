//! The record state of one session: the epoch and sequence numbers we write, the replay window
//! of what we read, and the epoch-1 keys once derived. Renegotiation is refused, so there are two
//! epochs: 0 (plain) and 1 (protected).

use super::header::{ContentType, RecordHeader, MAX_PLAINTEXT, MAX_SEQ};
use super::protection::{record_len, write_record, Keys, Protect};
use super::replay::ReplayWindow;
use crate::crypto::open_in_place;
use crate::error::Error;
use crate::suite::RecordCipher;
use std::ops::Range;

/// Epochs and sequence numbers (RFC 6347 §4.1), the replay window (§4.1.2.6) and epoch-1 keys.
#[derive(Default)]
pub(crate) struct RecordLayer {
    keys: Option<Keys>,
    /// Epoch our records are written in (1 once our ChangeCipherSpec went out). One byte, as
    /// renegotiation is refused: it keeps an established session within its size.
    write_epoch: u8,
    /// Next record sequence number in epoch 1.
    write_seq: u64,
    read_window: ReplayWindow,
}

/// A protected record that authenticated.
pub(crate) struct Opened {
    /// The real content type (inside DTLSInnerPlaintext for `tls12_cid`).
    pub content_type: ContentType,
    /// The plaintext, within the record's body.
    pub plaintext: Range<usize>,
    /// Newer than every record received before (RFC 9146 §6: only such a record may move a session).
    pub newest: bool,
}

/// Why a protected record was not opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unopened {
    /// Epoch-1 keys do not exist yet (the record overtook the key exchange).
    NoKeys,
    /// A sequence number already received, or too old for the window.
    Replayed,
    /// The AEAD did not authenticate it (a forgery, damage, or keys that differ).
    Unauthenticated,
    /// It authenticated (so it came from the peer, `newest` as for [`Opened`]), but its
    /// DTLSInnerPlaintext holds no valid content type (RFC 9146 §4).
    BadInnerType { newest: bool },
    /// It authenticated but holds more than 2^14 bytes (RFC 5246 §6.2.1): the peer broke the
    /// protocol, record_overflow (RFC 5246 §7.2.2).
    Overflow,
}

impl RecordLayer {
    /// Epoch 1 can be read, and written once our ChangeCipherSpec went out.
    pub fn install(&mut self, keys: Keys) {
        self.keys = Some(keys);
    }

    pub fn has_keys(&self) -> bool {
        self.keys.is_some()
    }

    /// Forgets the keys (the session failed).
    pub fn discard_keys(&mut self) {
        self.keys = None;
    }

    /// Our ChangeCipherSpec went out: what we write from now on is protected.
    pub fn start_writing_epoch_1(&mut self) {
        self.write_epoch = 1;
    }

    pub fn write_epoch(&self) -> u16 {
        u16::from(self.write_epoch)
    }

    /// Whether some record of the peer's epoch 1 authenticated.
    pub fn read_any(&self) -> bool {
        self.read_window.highest().is_some()
    }

    /// Protection for an epoch-1 write towards a peer that wants `peer_cid` in its records.
    pub fn protect<'a>(&'a self, peer_cid: &'a [u8]) -> Option<Protect<'a>> {
        self.keys.as_ref().map(|k| Protect { cipher: k.cipher, keys: &k.write, cid: peer_cid })
    }

    /// The next epoch-1 sequence number, without taking it.
    #[cfg(test)]
    pub fn peek_write_seq(&self) -> u64 {
        self.write_seq
    }

    /// Protection for epoch-1 writes and the sequence number counter, for packing a flight.
    pub fn writer<'a>(&'a mut self, peer_cid: &'a [u8]) -> Option<(Protect<'a>, &'a mut u64)> {
        let keys = self.keys.as_ref()?;
        Some((Protect { cipher: keys.cipher, keys: &keys.write, cid: peer_cid }, &mut self.write_seq))
    }

    /// Hands out the next epoch-1 sequence number; an exhausted epoch ends the session, as
    /// renegotiation is refused.
    pub fn next_write_seq(&mut self) -> Result<u64, Error> {
        if self.write_seq > MAX_SEQ {
            return Err(Error::Closed);
        }
        self.write_seq += 1;
        Ok(self.write_seq - 1)
    }

    /// Bytes of an epoch-1 record around `plaintext_len` bytes (header and AEAD overhead
    /// without a plaintext when no keys exist).
    pub fn protected_len(&self, peer_cid: &[u8], plaintext_len: usize) -> usize {
        record_len(self.protect(peer_cid), plaintext_len)
    }

    /// One protected epoch-1 record of `content_type` holding `parts`.
    pub fn seal(
        &mut self,
        content_type: ContentType,
        peer_cid: &[u8],
        parts: &[&[u8]],
    ) -> Result<Vec<u8>, Error> {
        let plain_len = parts.iter().map(|p| p.len()).sum();
        if self.keys.is_none() {
            return Err(Error::NotEstablished);
        }
        check_len(plain_len)?;
        let mut out = vec![0u8; self.protected_len(peer_cid, plain_len)];
        let seq = self.next_write_seq()?;
        write_record(&mut out, content_type, 1, seq, self.protect(peer_cid), parts);
        Ok(out)
    }

    /// One protected epoch-1 record of `content_type` holding `data`, written into `out`
    /// (exactly as long as the record); allocates nothing.
    pub fn seal_into(
        &mut self,
        content_type: ContentType,
        peer_cid: &[u8],
        data: &[u8],
        out: &mut [u8],
    ) -> Result<(), Error> {
        if self.keys.is_none() {
            return Err(Error::NotEstablished);
        }
        check_len(data.len())?;
        let seq = self.next_write_seq()?;
        write_record(out, content_type, 1, seq, self.protect(peer_cid), &[data]);
        Ok(())
    }

    /// Opens a protected record in place: replay check, AEAD with the RFC 9146 additional data
    /// when the record carries our `own_cid`, then the window is moved.
    pub fn open(
        &mut self,
        header: &RecordHeader,
        own_cid: &[u8],
        body: &mut [u8],
    ) -> Result<Opened, Unopened> {
        let Some(keys) = &self.keys else { return Err(Unopened::NoKeys) };
        if !self.read_window.is_fresh(header.seq) || body.len() < RecordCipher::EXPLICIT_NONCE_LEN {
            return Err(Unopened::Replayed);
        }
        let cid = if header.cid_len == 0 { &[][..] } else { own_cid };
        let (explicit, sealed) = body.split_at_mut(RecordCipher::EXPLICIT_NONCE_LEN);
        let mut explicit_nonce = [0u8; 8];
        explicit_nonce.copy_from_slice(explicit);
        let n = open_in_place(
            keys.cipher,
            &keys.read,
            explicit_nonce,
            header.epoch_seq(),
            header.content_type as u8,
            header.version,
            cid,
            sealed,
        )
        .map_err(|_| Unopened::Unauthenticated)?;
        let newest = self.read_window.highest().is_none_or(|h| header.seq > h);
        self.read_window.mark(header.seq);
        let start = RecordCipher::EXPLICIT_NONCE_LEN;
        let plain = &body[start..start + n];
        if header.content_type != ContentType::Tls12Cid {
            if n > MAX_PLAINTEXT {
                return Err(Unopened::Overflow);
            }
            return Ok(Opened { content_type: header.content_type, plaintext: start..start + n, newest });
        }
        // DTLSInnerPlaintext: content, real type, zero padding (RFC 9146 §4).
        let inner = plain
            .iter()
            .rposition(|&b| b != 0)
            .and_then(|at| ContentType::from_u8(plain[at]).map(|t| (at, t)));
        match inner {
            Some((at, _)) if at > MAX_PLAINTEXT => Err(Unopened::Overflow),
            Some((at, content_type)) => Ok(Opened { content_type, plaintext: start..start + at, newest }),
            None => Err(Unopened::BadInnerType { newest }),
        }
    }
}

/// A record holds at most 2^14 bytes of content (RFC 5246 §6.2.1, RFC 6347 §4.1).
fn check_len(len: usize) -> Result<(), Error> {
    if len > MAX_PLAINTEXT {
        return Err(Error::RecordTooLarge { len, max: MAX_PLAINTEXT });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::DirectionKeys;
    use fastshake_core::codec::Reader;

    fn layer() -> RecordLayer {
        let keys = || DirectionKeys { key: [7; 16], salt: [1, 2, 3, 4] };
        let mut layer = RecordLayer::default();
        layer.install(Keys { cipher: RecordCipher::Aes128Gcm, read: keys(), write: keys() });
        layer
    }

    /// `len` bytes of data sealed as a peer that ignores the limit would.
    fn peer_record(layer: &RecordLayer, cid: &[u8], seq: u64, len: usize) -> Vec<u8> {
        let protect = layer.protect(cid);
        let mut out = vec![0u8; record_len(protect, len)];
        write_record(&mut out, ContentType::ApplicationData, 1, seq, protect, &[&vec![0x61; len]]);
        out
    }

    /// The content length of `record` opened, with CIDs of `cid.len()` bytes.
    fn open(layer: &mut RecordLayer, cid: &[u8], mut record: Vec<u8>) -> Result<usize, Unopened> {
        let header = RecordHeader::parse(&mut Reader::new(&record), cid.len() as u8).unwrap();
        let body = &mut record[header.len()..];
        layer.open(&header, cid, body).map(|o| o.plaintext.len())
    }

    #[test]
    fn no_record_over_2_14_bytes_is_sealed_or_taken() {
        let mut layer = layer();
        let max = vec![0u8; MAX_PLAINTEXT];
        let record = layer.seal(ContentType::ApplicationData, &[], &[&max]).unwrap();
        assert_eq!(open(&mut layer, &[], record), Ok(MAX_PLAINTEXT));
        let too_long = Err(Error::RecordTooLarge { len: MAX_PLAINTEXT + 1, max: MAX_PLAINTEXT });
        assert_eq!(layer.seal(ContentType::ApplicationData, &[], &[&max, b"x"]).map(|_| ()), too_long);
        let mut out = vec![0u8; layer.protected_len(&[], MAX_PLAINTEXT + 1)];
        let sealed = layer.seal_into(ContentType::ApplicationData, &[], &[0; MAX_PLAINTEXT + 1], &mut out);
        assert_eq!(sealed, too_long);
        // The peer's: authenticated, then refused, with and without a CID (whose inner type
        // byte is not content, RFC 9146 §4).
        let record = peer_record(&layer, &[], 100, MAX_PLAINTEXT + 1);
        assert_eq!(open(&mut layer, &[], record), Err(Unopened::Overflow));
        let cid = [9, 9, 9];
        let record = peer_record(&layer, &cid, 101, MAX_PLAINTEXT);
        assert_eq!(open(&mut layer, &cid, record), Ok(MAX_PLAINTEXT));
        let record = peer_record(&layer, &cid, 102, MAX_PLAINTEXT + 1);
        assert_eq!(open(&mut layer, &cid, record), Err(Unopened::Overflow));
    }
}
