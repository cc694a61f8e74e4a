//! The SCTP wire codec: common header with CRC32c, chunks, parameters and error causes, the
//! RE-CONFIG chunk's parameters (RFC 6525) and the FORWARD-TSN chunk (RFC 3758).
//!
//! Every parser is bounds-checked and returns a typed [`ParseError`]; nothing here panics on
//! untrusted input. Chunk and parameter types the codec does not know are kept as `Unknown`
//! with their raw bytes so the caller can act on their two high bits (RFC 9260 §3.2, §3.2.1).

mod chunk;
mod forward_tsn;
mod param;
mod reconfig;
mod view;

pub use chunk::{
    Chunk, DataChunk, InitChunk, SackChunk, UnknownChunkAction, CHUNK_ABORT, CHUNK_COOKIE_ACK,
    CHUNK_COOKIE_ECHO, CHUNK_DATA, CHUNK_ERROR, CHUNK_HEARTBEAT, CHUNK_HEARTBEAT_ACK, CHUNK_INIT,
    CHUNK_INIT_ACK, CHUNK_SACK, CHUNK_SHUTDOWN, CHUNK_SHUTDOWN_ACK, CHUNK_SHUTDOWN_COMPLETE,
    DATA_CHUNK_HEADER_LEN,
};
pub use forward_tsn::{ForwardTsnChunk, CHUNK_FORWARD_TSN};
pub use param::{
    parse_causes, parse_params, ErrorCause, Param, UnknownParamAction, CAUSE_ALT_COOKIE_REQUIRED,
    CAUSE_INVALID_STREAM, CAUSE_NO_USER_DATA, CAUSE_PROTOCOL_VIOLATION, CAUSE_STALE_COOKIE,
    CAUSE_UNRECOGNIZED_CHUNK, CAUSE_UNRECOGNIZED_PARAMS, CAUSE_USER_ABORT, PARAM_ALT_COOKIE, PARAM_ALT_DATA,
    PARAM_ALT_SACK, PARAM_COOKIE_PRESERVATIVE, PARAM_FORWARD_TSN_SUPPORTED, PARAM_IPV4, PARAM_IPV6,
    PARAM_STATE_COOKIE, PARAM_SUPPORTED_ADDRESS_TYPES, PARAM_SUPPORTED_EXTENSIONS, PARAM_UNRECOGNIZED,
};

pub use reconfig::{
    ReconfigChunk, ReconfigParam, ReconfigResult, CHUNK_RECONFIG, OUTGOING_SSN_RESET_HEADER_LEN,
    PARAM_ADD_INCOMING_STREAMS, PARAM_ADD_OUTGOING_STREAMS, PARAM_INCOMING_SSN_RESET,
    PARAM_OUTGOING_SSN_RESET, PARAM_RECONFIG_RESPONSE, PARAM_SSN_TSN_RESET,
};
pub use view::{InitView, RawParams};

use fastshake_core::codec::{put_u16, put_u32, DecodeError, Reader};

/// Bytes of the SCTP common header.
pub const COMMON_HEADER_LEN: usize = 12;

/// Why a packet, chunk, parameter or cause could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Fewer bytes than the fixed part of the structure needs.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// A length field smaller than its header or larger than the bytes left.
    #[error("bad length in {0}")]
    BadLength(&'static str),
    /// The CRC32c does not match.
    #[error("bad checksum")]
    BadChecksum,
    /// A field holds a value the protocol forbids.
    #[error("invalid {0}")]
    Invalid(&'static str),
}

impl ParseError {
    /// The core codec's error, named after the structure (`what`) that was being read.
    fn in_field(error: DecodeError, what: &'static str) -> ParseError {
        match error {
            DecodeError::Truncated => ParseError::Truncated(what),
            DecodeError::TrailingBytes => ParseError::BadLength(what),
            DecodeError::Invalid(why) => ParseError::Invalid(why),
        }
    }
}

/// Names the structure a read of the core [`Reader`] belongs to, so that a parse error says
/// where the packet went wrong ("truncated SACK", "truncated heartbeat info").
pub(crate) trait FieldExt<T> {
    /// The result, its error named after `what`.
    fn field(self, what: &'static str) -> Result<T, ParseError>;
}

impl<T> FieldExt<T> for Result<T, DecodeError> {
    fn field(self, what: &'static str) -> Result<T, ParseError> {
        self.map_err(|e| ParseError::in_field(e, what))
    }
}

/// The 12-byte SCTP common header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommonHeader {
    /// Sender's SCTP port.
    pub src_port: u16,
    /// Receiver's SCTP port.
    pub dst_port: u16,
    /// Verification tag.
    pub verification_tag: u32,
}

/// One SCTP packet: the common header and its chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Sender's SCTP port.
    pub src_port: u16,
    /// Receiver's SCTP port.
    pub dst_port: u16,
    /// Verification tag.
    pub verification_tag: u32,
    /// The chunks, in order.
    pub chunks: Vec<Chunk>,
}

/// The CRC32c of `packet` with its checksum field taken as zero (RFC 9260 Appendix A).
pub fn checksum(packet: &[u8]) -> u32 {
    let head = packet.get(..8).unwrap_or(packet);
    let crc = crc32c::crc32c_append(crc32c::crc32c(head), &[0u8; 4]);
    match packet.get(COMMON_HEADER_LEN..) {
        Some(rest) => crc32c::crc32c_append(crc, rest),
        None => crc,
    }
}

/// Writes the CRC32c into an encoded packet's checksum field (little-endian, as the CRC's
/// reflected bit order puts it on the wire).
pub fn seal(packet: &mut [u8]) {
    let crc = checksum(packet);
    if let Some(field) = packet.get_mut(8..12) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
}

/// The common header of `buf`, checksum not verified.
pub fn peek_header(buf: &[u8]) -> Result<CommonHeader, ParseError> {
    let mut r = Reader::new(buf);
    let src_port = r.u16().field("common header")?;
    let dst_port = r.u16().field("common header")?;
    let verification_tag = r.u32().field("common header")?;
    r.u32().field("common header")?;
    Ok(CommonHeader { src_port, dst_port, verification_tag })
}

/// Whether the checksum field of `buf` matches its contents.
pub fn checksum_ok(buf: &[u8]) -> bool {
    match buf.get(8..12) {
        Some(field) => field == checksum(buf).to_le_bytes(),
        None => false,
    }
}

impl Packet {
    /// Parses a packet and verifies its checksum.
    pub fn parse(buf: &[u8]) -> Result<Packet, ParseError> {
        if buf.len() < COMMON_HEADER_LEN {
            return Err(ParseError::Truncated("common header"));
        }
        if !checksum_ok(buf) {
            return Err(ParseError::BadChecksum);
        }
        Self::parse_unchecked(buf)
    }

    /// Parses a packet without looking at its checksum.
    pub fn parse_unchecked(buf: &[u8]) -> Result<Packet, ParseError> {
        let header = peek_header(buf)?;
        let mut r = Reader::new(buf.get(COMMON_HEADER_LEN..).unwrap_or(&[]));
        let mut chunks = Vec::new();
        while !r.is_empty() {
            chunks.push(Chunk::read(&mut r)?);
        }
        Ok(Packet {
            src_port: header.src_port,
            dst_port: header.dst_port,
            verification_tag: header.verification_tag,
            chunks,
        })
    }

    /// A packet with no chunks yet.
    pub fn new(src_port: u16, dst_port: u16, verification_tag: u32) -> Packet {
        Packet { src_port, dst_port, verification_tag, chunks: Vec::new() }
    }

    /// Bytes of the encoded packet.
    pub fn encoded_len(&self) -> usize {
        COMMON_HEADER_LEN + self.chunks.iter().map(Chunk::padded_len).sum::<usize>()
    }

    /// Encodes the packet with its checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        put_u16(&mut out, self.src_port);
        put_u16(&mut out, self.dst_port);
        put_u32(&mut out, self.verification_tag);
        out.extend_from_slice(&[0; 4]);
        for chunk in &self.chunks {
            chunk.encode(&mut out);
        }
        seal(&mut out);
        out
    }
}

fn header_into(out: &mut Vec<u8>, src_port: u16, dst_port: u16, verification_tag: u32) {
    put_u16(out, src_port);
    put_u16(out, dst_port);
    put_u32(out, verification_tag);
    out.extend_from_slice(&[0; 4]);
}

/// A packet of one ERROR chunk with one "ALT-COOKIE required" cause, written straight into one
/// buffer: the answer to an INIT flood, byte for byte what [`Packet::encode`] writes.
pub fn encode_alt_cookie_error(
    src_port: u16,
    dst_port: u16,
    verification_tag: u32,
    cookie: &[u8],
) -> Vec<u8> {
    let cause_len = 4 + cookie.len();
    let mut out = Vec::with_capacity(COMMON_HEADER_LEN + 4 + padded(cause_len));
    header_into(&mut out, src_port, dst_port, verification_tag);
    out.push(CHUNK_ERROR);
    out.push(0);
    put_u16(&mut out, u16::try_from(4 + cause_len).unwrap_or(u16::MAX));
    put_u16(&mut out, CAUSE_ALT_COOKIE_REQUIRED);
    put_u16(&mut out, u16::try_from(cause_len).unwrap_or(u16::MAX));
    out.extend_from_slice(cookie);
    pad(&mut out);
    seal(&mut out);
    out
}

/// A packet of one ABORT chunk without causes (16 bytes), as [`Packet::encode`] writes it.
pub fn encode_bare_abort(src_port: u16, dst_port: u16, verification_tag: u32, t_bit: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMMON_HEADER_LEN + 4);
    header_into(&mut out, src_port, dst_port, verification_tag);
    out.extend_from_slice(&[CHUNK_ABORT, u8::from(t_bit), 0, 4]);
    seal(&mut out);
    out
}

/// Rounds `n` up to a multiple of four.
pub(crate) fn padded(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// Appends zero bytes until `out` is a multiple of four long.
pub(crate) fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_answers_match_the_generic_encoder() {
        let cookie = [7u8; fastshake_core::COOKIE_LEN];
        let mut p = Packet::new(5000, 5001, 0xdead_beef);
        p.chunks.push(Chunk::Error { causes: vec![ErrorCause::AltCookieRequired(cookie.to_vec())] });
        let fast = encode_alt_cookie_error(5000, 5001, 0xdead_beef, &cookie);
        assert_eq!(fast, p.encode());
        assert_eq!(fast.len(), 36);
        for t_bit in [false, true] {
            let mut p = Packet::new(1, 2, 3);
            p.chunks.push(Chunk::Abort { t_bit, causes: vec![] });
            assert_eq!(encode_bare_abort(1, 2, 3, t_bit), p.encode());
        }
    }

    #[test]
    fn parse_errors_name_the_structure() {
        // A SACK chunk whose value stops inside its fixed fields.
        assert_eq!(Chunk::parse(&[3, 0, 0, 8, 0, 0, 0, 1]), Err(ParseError::Truncated("SACK")));
        // A chunk length past the end of the packet.
        assert_eq!(Chunk::parse(&[0, 0, 0, 40, 1]), Err(ParseError::Truncated("chunk value")));
        assert_eq!(Chunk::parse(&[0, 0, 0, 3]), Err(ParseError::BadLength("chunk")));
        assert_eq!(peek_header(&[0; 11]), Err(ParseError::Truncated("common header")));
        // The last chunk's padding may be missing; a chunk of 5 bytes ends the packet.
        let (c, used) = Chunk::parse(&[64, 0, 0, 5, 7]).unwrap();
        assert_eq!((c, used), (Chunk::Unknown { chunk_type: 64, flags: 0, value: vec![7] }, 5));
    }

    #[test]
    fn checksum_is_crc32c_little_endian() {
        // RFC 3720 B.4 test vector: 32 bytes of zeros give 0x8A9136AA.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8A91_36AA);
        let mut p = Packet::new(1, 2, 3);
        p.chunks.push(Chunk::CookieAck);
        let bytes = p.encode();
        assert!(checksum_ok(&bytes));
        let mut zeroed = bytes.clone();
        zeroed[8..12].copy_from_slice(&[0; 4]);
        assert_eq!(bytes[8..12], crc32c::crc32c(&zeroed).to_le_bytes());
        assert_eq!(Packet::parse(&bytes).unwrap(), p);
        let mut bad = bytes;
        bad[13] ^= 1;
        assert_eq!(Packet::parse(&bad), Err(ParseError::BadChecksum));
    }
}
