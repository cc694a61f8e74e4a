//! The record header (RFC 6347 §4.1, RFC 9146 §4) and the content types.

use fastshake_core::codec::{DecodeError, Reader};

/// Bytes of a DTLS 1.2 record header.
pub const HEADER_LEN: usize = 13;
/// DTLS 1.2 on the wire.
pub const DTLS_1_2: u16 = 0xFEFD;
/// DTLS 1.0 on the wire (HelloVerifyRequest and some ClientHello records use it).
pub const DTLS_1_0: u16 = 0xFEFF;
/// Where a `tls12_cid` record's Connection ID starts: after the type, version, epoch and
/// sequence number (RFC 9146 §4).
const CID_OFFSET: usize = 11;
/// Largest sequence number in an epoch.
pub const MAX_SEQ: u64 = (1 << 48) - 1;
/// Most bytes of content a record carries, whatever the MTU (RFC 5246 §6.2.1, RFC 8446 §5.1;
/// RFC 6347 §4.1 and RFC 9147 §4 keep it). A DTLS 1.3 record adds its content type: at most
/// `MAX_PLAINTEXT + 1` bytes of DTLSInnerPlaintext (RFC 8446 §5.4).
pub const MAX_PLAINTEXT: usize = 1 << 14;
/// Largest protected fragment RFC 5246 §6.2.3 allows.
pub const MAX_CIPHERTEXT: usize = MAX_PLAINTEXT + 2048;
/// Largest DTLS 1.3 record body (ciphertext with its tag) RFC 8446 §5.2 allows.
pub const MAX_CIPHERTEXT13: usize = MAX_PLAINTEXT + 256;

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

    /// The Connection ID of this header's record (empty for any record but `tls12_cid`):
    /// `record` starts with the header.
    pub fn cid<'a>(&self, record: &'a [u8]) -> &'a [u8] {
        record.get(CID_OFFSET..CID_OFFSET + self.cid_len as usize).unwrap_or_default()
    }

    /// Writes the header into `out` (`self.len()` bytes), with `cid` (of `cid_len` bytes).
    pub fn write(&self, out: &mut [u8], cid: &[u8]) {
        out[0] = self.content_type as u8;
        out[1..3].copy_from_slice(&self.version.to_be_bytes());
        out[3..CID_OFFSET].copy_from_slice(&self.epoch_seq().to_be_bytes());
        let cid_end = CID_OFFSET + cid.len();
        out[CID_OFFSET..cid_end].copy_from_slice(cid);
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
