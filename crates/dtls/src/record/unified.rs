//! The DTLS 1.3 record header (RFC 9147 §4): the unified header that every protected record
//! carries, its sequence number and epoch widened back from the low bits sent (§4.2.2), record
//! number encryption (§4.2.3). The keys come from [`crate::crypto::tls13`].
//!
//! ```text
//!  0 1 2 3 4 5 6 7
//! +-+-+-+-+-+-+-+-+
//! |0|0|1|C|S|L|E E|   C: a Connection ID follows; S: the sequence number has 16 bits (else 8);
//! +-+-+-+-+-+-+-+-+   L: a 16-bit length follows (else the record runs to the datagram's end);
//! | Connection ID |   E: the epoch's two low bits
//! | (if C)        |
//! | 8 or 16 bit   |
//! | sequence no.  |
//! | length (if L) |
//! +-+-+-+-+-+-+-+-+
//! ```
//!
//! DTLS 1.3 sends its unprotected records (epoch 0) with the DTLS 1.2 header (RFC 6347 §4.1),
//! whose first byte is a content type from 20 to 27, so the first
//! byte tells the two forms apart: `001x_xxxx` ([`is_unified`]) is this one.

use super::header::{MAX_CIPHERTEXT13, MAX_SEQ};
use fastshake_core::codec::{DecodeError, Reader};
use ring::aead::quic::{HeaderProtectionKey, AES_128, AES_256, CHACHA20};

const FIXED_MASK: u8 = 0b1110_0000;
const FIXED_BITS: u8 = 0b0010_0000;
/// The C bit: a Connection ID follows the first byte.
pub const CID_BIT: u8 = 0b0001_0000;
const SEQ16_BIT: u8 = 0b0000_1000;
const LENGTH_BIT: u8 = 0b0000_0100;
const EPOCH_BITS: u8 = 0b0000_0011;

/// Bytes of ciphertext that record number encryption samples (§4.2.3): a record whose
/// ciphertext is shorter cannot be opened.
pub const SAMPLE_LEN: usize = 16;

/// Whether a record starting with `first` has the unified header.
pub fn is_unified(first: u8) -> bool {
    first & FIXED_MASK == FIXED_BITS
}

/// Whether a record starting with `first` is a unified-header record without its length (the L
/// bit clear): it extends to the end of its datagram (§4), so no record follows it.
pub fn ends_datagram(first: u8) -> bool {
    is_unified(first) && first & LENGTH_BIT == 0
}

/// How many low bits of the sequence number a record carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqBits {
    /// 8 bits: the smallest header, for a sender that keeps fewer than 2^7 records in flight.
    Eight,
    /// 16 bits (what RFC 9147 §4 recommends unless the header must be small).
    Sixteen,
}

impl SeqBits {
    fn bytes(self) -> usize {
        match self {
            SeqBits::Eight => 1,
            SeqBits::Sixteen => 2,
        }
    }

    fn width(self) -> u32 {
        8 * self.bytes() as u32
    }
}

/// A parsed unified header. The sequence number bits are as they stand in the buffer: still
/// encrypted on a record from the wire until [`SequenceKey::apply`] has run over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnifiedHeader {
    /// The epoch's two low bits.
    pub epoch_bits: u8,
    /// Bytes of Connection ID after the first byte (0 without one).
    pub cid_len: u8,
    /// The width of the sequence number field.
    pub seq_bits: SeqBits,
    /// The sequence number field's value.
    pub seq: u16,
    /// Whether the header carries the record's length.
    pub has_length: bool,
    /// Bytes of the encrypted record after the header.
    pub length: u16,
}

impl UnifiedHeader {
    /// A header for a record of epoch `epoch` and sequence number `seq` with `length` bytes of
    /// ciphertext; `cid_len` bytes of Connection ID will follow the first byte.
    pub fn new(epoch: u64, seq: u64, seq_bits: SeqBits, cid_len: u8, has_length: bool, length: u16) -> Self {
        let mask = (1u64 << seq_bits.width()) - 1;
        UnifiedHeader {
            epoch_bits: (epoch & u64::from(EPOCH_BITS)) as u8,
            cid_len,
            seq_bits,
            seq: (seq & mask) as u16,
            has_length,
            length,
        }
    }

    /// Reads a header whose record ends where `r` ends (the rest of the datagram).
    /// `cid_len` is the length of the Connection IDs we issued (0: none): a record that says it
    /// carries one when we issued none cannot be read, since only the receiver knows the length.
    pub fn parse(r: &mut Reader<'_>, cid_len: u8) -> Result<Self, DecodeError> {
        let first = r.u8()?;
        if !is_unified(first) {
            return Err(DecodeError::Invalid("unified header"));
        }
        let cid_len = match (first & CID_BIT != 0, cid_len) {
            (false, _) => 0,
            (true, 0) => return Err(DecodeError::Invalid("connection ID we did not issue")),
            (true, n) => {
                r.take(n as usize)?;
                n
            }
        };
        let seq_bits = if first & SEQ16_BIT != 0 { SeqBits::Sixteen } else { SeqBits::Eight };
        let seq = match seq_bits {
            SeqBits::Eight => u16::from(r.u8()?),
            SeqBits::Sixteen => r.u16()?,
        };
        let has_length = first & LENGTH_BIT != 0;
        let length = if has_length {
            let length = r.u16()?;
            if length as usize > r.remaining() {
                return Err(DecodeError::Truncated);
            }
            length
        } else {
            u16::try_from(r.remaining()).map_err(|_| DecodeError::Invalid("record length"))?
        };
        // RFC 8446 §5.2: at most 2^14 + 256 bytes; DTLS drops a longer one (RFC 9147 §4.5.2).
        if length as usize > MAX_CIPHERTEXT13 {
            return Err(DecodeError::Invalid("record length"));
        }
        Ok(UnifiedHeader { epoch_bits: first & EPOCH_BITS, cid_len, seq_bits, seq, has_length, length })
    }

    /// Bytes of the header on the wire.
    pub fn header_len(&self) -> usize {
        1 + self.cid_len as usize + self.seq_bits.bytes() + if self.has_length { 2 } else { 0 }
    }

    /// Where the sequence number field starts in the header.
    pub fn seq_offset(&self) -> usize {
        1 + self.cid_len as usize
    }

    /// Appends the header to `out`, with `cid` (of `cid_len` bytes).
    pub fn write(&self, out: &mut Vec<u8>, cid: &[u8]) {
        let start = out.len();
        out.resize(start + self.header_len(), 0);
        self.write_into(&mut out[start..], cid);
    }

    /// Writes the header into the first [`Self::header_len`] bytes of `out`, allocating
    /// nothing (the sealing of every record goes through here).
    pub fn write_into(&self, out: &mut [u8], cid: &[u8]) {
        debug_assert_eq!(cid.len(), self.cid_len as usize);
        let mut first = FIXED_BITS | self.epoch_bits;
        if self.cid_len > 0 {
            first |= CID_BIT;
        }
        if self.seq_bits == SeqBits::Sixteen {
            first |= SEQ16_BIT;
        }
        if self.has_length {
            first |= LENGTH_BIT;
        }
        out[0] = first;
        let mut at = 1 + cid.len();
        out[1..at].copy_from_slice(cid);
        match self.seq_bits {
            SeqBits::Eight => out[at] = self.seq as u8,
            SeqBits::Sixteen => out[at..at + 2].copy_from_slice(&self.seq.to_be_bytes()),
        }
        at += self.seq_bits.bytes();
        if self.has_length {
            out[at..at + 2].copy_from_slice(&self.length.to_be_bytes());
        }
    }

    /// The full sequence number this header's (decrypted) bits stand for, given the next one
    /// expected in its epoch (§4.2.2).
    pub fn full_seq(&self, expected: u64) -> u64 {
        widen(expected, u64::from(self.seq), self.seq_bits.width(), MAX_SEQ)
    }
}

/// The value no greater than `max` whose low `width` bits are `bits` and which lies closest to
/// `expected`; a tie goes to the higher one. The same arithmetic as QUIC's packet numbers
/// (RFC 9000 Appendix A.3), which RFC 9147 §4.2.2 asks for in words.
pub fn widen(expected: u64, bits: u64, width: u32, max: u64) -> u64 {
    let window = 1u64 << width;
    let half = window / 2;
    let candidate = (expected & !(window - 1)) | (bits & (window - 1));
    if candidate.saturating_add(half) <= expected && candidate <= max.saturating_sub(window) {
        candidate + window
    } else if candidate > expected.saturating_add(half) && candidate >= window {
        candidate - window
    } else {
        candidate
    }
}

/// The cipher that masks sequence numbers, the one the suite's AEAD is built on (§4.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCipher {
    /// AES-128 (TLS_AES_128_GCM_SHA256 and the CCM suites).
    Aes128,
    /// AES-256 (TLS_AES_256_GCM_SHA384).
    Aes256,
    /// ChaCha20 (TLS_CHACHA20_POLY1305_SHA256).
    ChaCha20,
}

/// One direction's record number encryption key (`sn_key`, §4.2.3).
///
/// The mask is the one QUIC's header protection computes (RFC 9001 §5.4.3 and §5.4.4): AES-ECB
/// of the first 16 bytes of ciphertext, or the ChaCha20 block with those bytes as counter and
/// nonce. ring provides it as a vetted primitive, so this module only places it.
pub struct SequenceKey(HeaderProtectionKey);

impl SequenceKey {
    /// A key of `key` bytes (16 for AES-128, 32 for AES-256 and ChaCha20).
    pub fn new(cipher: SequenceCipher, key: &[u8]) -> Option<Self> {
        let algorithm = match cipher {
            SequenceCipher::Aes128 => &AES_128,
            SequenceCipher::Aes256 => &AES_256,
            SequenceCipher::ChaCha20 => &CHACHA20,
        };
        HeaderProtectionKey::new(algorithm, key).ok().map(SequenceKey)
    }

    /// The mask for a record whose ciphertext starts with `ciphertext` (`None` when it has
    /// fewer than [`SAMPLE_LEN`] bytes: such a record is dropped as if it failed to open).
    pub fn mask(&self, ciphertext: &[u8]) -> Option<[u8; 2]> {
        let sample = ciphertext.get(..SAMPLE_LEN)?;
        let mask = self.0.new_mask(sample).ok()?;
        Some([mask[0], mask[1]])
    }

    /// Encrypts or decrypts (the same XOR) the sequence number of the record that starts
    /// `record` with header `header`. Returns false, changing nothing, when the record's
    /// ciphertext is too short to sample.
    pub fn apply(&self, header: &UnifiedHeader, record: &mut [u8]) -> bool {
        let at = header.seq_offset();
        let Some(mask) = record.get(header.header_len()..).and_then(|ciphertext| self.mask(ciphertext))
        else {
            return false;
        };
        for (i, m) in mask.iter().take(header.seq_bits.bytes()).enumerate() {
            record[at + i] ^= m;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::tls13::{LabelPrefix, SuiteHash, TrafficKeys};
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn the_first_byte_tells_a_unified_header_from_a_dtls_1_2_one() {
        for content_type in 20..=27u8 {
            assert!(!is_unified(content_type), "content type {content_type}");
        }
        assert!((0x20..=0x3f).all(is_unified));
        assert!(!is_unified(0x40) && !is_unified(0x00) && !is_unified(0xff));
    }

    #[test]
    fn the_smallest_header_is_two_bytes() {
        let h = UnifiedHeader::new(3, 0x1234, SeqBits::Eight, 0, false, 20);
        let mut out = Vec::new();
        h.write(&mut out, &[]);
        assert_eq!(out, [0b0010_0011, 0x34]);
        let mut record = out.clone();
        record.extend_from_slice(&[0u8; 20]);
        let parsed = UnifiedHeader::parse(&mut Reader::new(&record), 0).unwrap();
        assert_eq!(parsed, h);
        assert_eq!(parsed.full_seq(0x1230), 0x1234);
    }

    #[test]
    fn a_connection_id_we_did_not_issue_cannot_be_read() {
        let record = [0b0011_1100, 1, 2, 3, 4, 0, 2, 0, 0];
        assert!(UnifiedHeader::parse(&mut Reader::new(&record), 0).is_err());
        let h = UnifiedHeader::parse(&mut Reader::new(&record[..]), 2).unwrap();
        assert_eq!((h.cid_len, h.seq, h.has_length), (2, 0x0304, true));
    }

    #[test]
    fn a_length_beyond_the_datagram_or_the_rfc_is_refused() {
        // L set, 16-bit sequence number, length 3 with 2 bytes left.
        assert!(UnifiedHeader::parse(&mut Reader::new(&[0x2c, 0, 1, 0, 3, 9, 9]), 0).is_err());
        // Without L the record is the rest of the datagram, at most 2^14 + 256 bytes (§4).
        let mut big = vec![0x20u8, 0];
        big.resize(2 + (1 << 14) + 256 + 1, 0);
        assert!(UnifiedHeader::parse(&mut Reader::new(&big), 0).is_err());
        big.truncate(2 + (1 << 14) + 256);
        assert!(UnifiedHeader::parse(&mut Reader::new(&big), 0).is_ok());
    }

    #[test]
    fn widening_picks_the_closest_value() {
        // RFC 9000 Appendix A.3's example: 16 bits 0x9b32 when 0xa82f30eb is expected.
        assert_eq!(widen(0xa82f30eb, 0x9b32, 16, MAX_SEQ), 0xa82f9b32);
        // Just past a wrap of the low bits, in both directions.
        assert_eq!(widen(0x1_00, 0xff, 8, MAX_SEQ), 0xff);
        assert_eq!(widen(0xfe, 0x01, 8, MAX_SEQ), 0x1_01);
        // Near zero nothing goes below zero, near the top nothing above the largest number.
        assert_eq!(widen(0, 0xff, 8, MAX_SEQ), 0xff);
        assert_eq!(widen(MAX_SEQ, 0x00, 8, MAX_SEQ), MAX_SEQ - 0xff);
        // Half a window away either side: the higher.
        assert_eq!(widen(0x1_00, 0x80, 8, MAX_SEQ), 0x1_80);
    }

    #[test]
    fn the_masks_are_the_vetted_ones() {
        // RFC 9001 Appendix A.2 (AES-128) and A.5 (ChaCha20): the same functions as §4.2.3.
        let aes =
            SequenceKey::new(SequenceCipher::Aes128, &unhex("9f50449e04a0e810283a1e9933adedd2")).unwrap();
        assert_eq!(aes.mask(&unhex("d1b1c98dd7689fb8ec11d242b123dc9b")), Some([0x43, 0x7b]));
        let chacha = SequenceKey::new(
            SequenceCipher::ChaCha20,
            &unhex("25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4"),
        )
        .unwrap();
        assert_eq!(chacha.mask(&unhex("5e5cd55c41f69080575d7999c25a5bfb")), Some([0xae, 0xfe]));
        // A second implementation for AES: the aes crate's block cipher gives the same bytes.
        use aes::cipher::{BlockEncrypt, KeyInit};
        let key = [7u8; 16];
        let mut block = aes::Block::clone_from_slice(&[0x5a; 16]);
        aes::Aes128::new(&key.into()).encrypt_block(&mut block);
        let ours = SequenceKey::new(SequenceCipher::Aes128, &key).unwrap();
        assert_eq!(ours.mask(&[0x5a; 16]), Some([block[0], block[1]]));
        assert!(SequenceKey::new(SequenceCipher::Aes256, &key).is_none(), "a 16-byte AES-256 key");
    }

    #[test]
    fn a_record_too_short_to_sample_is_left_alone() {
        let key = SequenceKey::new(SequenceCipher::Aes128, &[1; 16]).unwrap();
        let h = UnifiedHeader::new(3, 9, SeqBits::Sixteen, 0, false, 15);
        let mut record = Vec::new();
        h.write(&mut record, &[]);
        record.extend_from_slice(&[0u8; 15]);
        let before = record.clone();
        assert!(!key.apply(&h, &mut record));
        assert_eq!(record, before);
    }

    #[test]
    fn traffic_keys_follow_rfc_8448_with_tls_labels_and_differ_with_dtls_ones() {
        // RFC 8448 §3: the server's handshake traffic secret and its key and IV, and the
        // client's application traffic secret and its key and IV (TLS_AES_128_GCM_SHA256).
        let server_hs = unhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38");
        let keys = TrafficKeys::derive(SuiteHash::Sha256, LabelPrefix::Tls13, &server_hs, 16);
        assert_eq!(&keys.key[..], &unhex("3fce516009c21727d0f2e4e86ee403bc")[..]);
        assert_eq!(&keys.iv[..], &unhex("5d313eb2671276ee13000b30")[..]);
        let client_ap = unhex("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5");
        let keys = TrafficKeys::derive(SuiteHash::Sha256, LabelPrefix::Tls13, &client_ap, 16);
        assert_eq!(&keys.key[..], &unhex("17422dda596ed5d9acd890e3c63f5051")[..]);
        assert_eq!(&keys.iv[..], &unhex("5b78923dee08579033e523d9")[..]);
        // The same secret under DTLS 1.3's labels gives other keys, and the sequence number key
        // is none of them.
        let dtls = TrafficKeys::derive(SuiteHash::Sha256, LabelPrefix::Dtls13, &client_ap, 16);
        assert_ne!(&dtls.key[..], &keys.key[..]);
        assert_ne!(dtls.iv, keys.iv);
        assert_ne!(&dtls.sn_key[..], &dtls.key[..]);
        assert!(SequenceKey::new(SequenceCipher::Aes128, &dtls.sn_key).is_some());
    }

    proptest! {
        #[test]
        fn a_header_reads_back_as_written_and_its_number_decrypts(
            epoch in 0u64..1 << 20,
            seq in 0u64..=MAX_SEQ,
            sixteen in any::<bool>(),
            cid in proptest::collection::vec(any::<u8>(), 0..=20),
            has_length in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 16..64),
        ) {
            let seq_bits = if sixteen { SeqBits::Sixteen } else { SeqBits::Eight };
            let cid_len = cid.len() as u8;
            let h = UnifiedHeader::new(epoch, seq, seq_bits, cid_len, has_length, body.len() as u16);
            let mut record = Vec::new();
            h.write(&mut record, &cid);
            prop_assert_eq!(record.len(), h.header_len());
            record.extend_from_slice(&body);
            let key = SequenceKey::new(SequenceCipher::Aes128, &[3; 16]).unwrap();
            prop_assert!(key.apply(&h, &mut record));
            let mut r = Reader::new(&record);
            let mut parsed = UnifiedHeader::parse(&mut r, cid_len.max(1)).unwrap();
            prop_assert_eq!(&record[1..1 + cid.len()], &cid[..]);
            prop_assert!(key.apply(&parsed, &mut record));
            parsed.seq = UnifiedHeader::parse(&mut Reader::new(&record), cid_len.max(1)).unwrap().seq;
            prop_assert_eq!(parsed, h);
            // The receiver expects a number near the sender's and widens the bits back to it.
            let width = if sixteen { 16 } else { 8 };
            let near = seq.saturating_sub((1 << (width - 1)) - 1);
            prop_assert_eq!(parsed.full_seq(near), seq);
            prop_assert_eq!(u64::from(parsed.epoch_bits), epoch & 0b11);
        }
    }
}
