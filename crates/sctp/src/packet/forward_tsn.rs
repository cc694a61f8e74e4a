//! The FORWARD-TSN chunk (RFC 3758 §3.2): partial reliability's way of telling the receiver to
//! move its cumulative TSN past data the sender abandoned.

use fastshake_core::codec::{put_u16, put_u32, Reader};

use super::{FieldExt, ParseError};

/// Forward Cumulative TSN (RFC 3758). High bits `11`: a peer that does not know it skips it and
/// reports it.
pub const CHUNK_FORWARD_TSN: u8 = 192;

/// A FORWARD-TSN chunk: the new cumulative TSN and, for each ordered stream whose messages were
/// abandoned, the highest stream sequence number skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardTsnChunk {
    /// The TSN the receiver takes as received cumulatively.
    pub new_cumulative_tsn: u32,
    /// (stream, SSN) pairs: the largest SSN skipped on each stream (ordered messages only).
    pub streams: Vec<(u16, u16)>,
}

impl ForwardTsnChunk {
    /// Parses a FORWARD-TSN chunk's value (what follows the chunk header): the new cumulative
    /// TSN, then whole 4-byte (stream, SSN) pairs.
    pub fn parse_value(value: &[u8]) -> Result<ForwardTsnChunk, ParseError> {
        let mut r = Reader::new(value);
        let new_cumulative_tsn = r.u32().field("FORWARD-TSN")?;
        if !r.remaining().is_multiple_of(4) {
            return Err(ParseError::BadLength("FORWARD-TSN"));
        }
        let mut streams = Vec::with_capacity(r.remaining() / 4);
        while !r.is_empty() {
            streams.push((r.u16().field("FORWARD-TSN")?, r.u16().field("FORWARD-TSN")?));
        }
        Ok(ForwardTsnChunk { new_cumulative_tsn, streams })
    }

    /// Encodes the chunk's value.
    pub fn encode_value(&self, out: &mut Vec<u8>) {
        put_u32(out, self.new_cumulative_tsn);
        for (stream, ssn) in &self.streams {
            put_u16(out, *stream);
            put_u16(out, *ssn);
        }
    }

    /// Bytes of the whole chunk (a multiple of four, so no padding).
    pub fn chunk_len(&self) -> usize {
        8 + 4 * self.streams.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Chunk;

    #[test]
    fn layout_and_odd_lengths() {
        let f = ForwardTsnChunk { new_cumulative_tsn: 0x0102_0304, streams: vec![(5, 6), (7, 0xFFFF)] };
        let bytes = Chunk::ForwardTsn(f.clone()).to_bytes();
        assert_eq!(bytes, [192, 0, 0, 16, 1, 2, 3, 4, 0, 5, 0, 6, 0, 7, 0xFF, 0xFF], "RFC 3758 §3.2");
        assert_eq!(Chunk::parse(&bytes), Ok((Chunk::ForwardTsn(f.clone()), 16)));
        assert_eq!(Chunk::ForwardTsn(f.clone()).padded_len(), f.chunk_len());
        // A half pair, or no TSN at all: not a FORWARD-TSN we can read, kept as an unknown chunk.
        for value in [&[1, 2, 3, 4, 0, 5][..], &[1, 2]] {
            assert!(ForwardTsnChunk::parse_value(value).is_err());
            let mut raw = vec![192, 0, 0, 4 + value.len() as u8];
            raw.extend_from_slice(value);
            let (chunk, _) = Chunk::parse(&raw).unwrap();
            assert!(matches!(chunk, Chunk::Unknown { chunk_type: CHUNK_FORWARD_TSN, .. }), "{chunk:?}");
        }
    }
}
