//! Bounds-checked reading and big-endian writing of wire fields.
//!
//! Every read returns [`DecodeError`] instead of panicking, so no parser can be made to index
//! out of bounds by a peer.

/// A wire structure could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended inside a field.
    Truncated,
    /// A field holds a value the protocol forbids.
    Invalid(&'static str),
    /// Bytes were left over after the structure.
    TrailingBytes,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("it ends inside a field"),
            DecodeError::Invalid(what) => f.write_str(what),
            DecodeError::TrailingBytes => f.write_str("bytes are left over after it"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A cursor over untrusted bytes.
///
/// Its reads are `#[inline]`: the engines' parsers call them once per field, from other
/// crates, where a call that is not inlined costs more than the read (an INIT flood answer
/// is a few hundred instructions).
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte was read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// Every byte not read yet.
    #[inline]
    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A big-endian 16-bit integer.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian 24-bit integer.
    #[inline]
    pub fn u24(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(3)?;
        Ok(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    /// A big-endian 32-bit integer.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// A big-endian 48-bit integer.
    #[inline]
    pub fn u48(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(6)?;
        Ok(u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]]))
    }

    /// A big-endian 64-bit integer.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Skips up to `n` bytes, fewer if the input ends first. For padding that aligns a
    /// structure but that the sender may leave off at the very end (SCTP's chunks and
    /// parameters, RFC 9260 §3.2), so a missing final pad is not an error.
    #[inline]
    pub fn skip_padding(&mut self, n: usize) {
        self.pos += n.min(self.remaining());
    }

    /// The next `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A vector with a one-byte length prefix.
    #[inline]
    pub fn vec8(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u8()? as usize;
        self.take(n)
    }

    /// A vector with a two-byte length prefix.
    #[inline]
    pub fn vec16(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u16()? as usize;
        self.take(n)
    }

    /// Fails unless every byte was consumed.
    #[inline]
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes)
        }
    }
}

/// Appends one byte.
#[inline]
pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

/// Appends a big-endian 16-bit integer.
#[inline]
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a big-endian 32-bit integer.
#[inline]
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a big-endian 64-bit integer.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends the low 24 bits of `v`, big-endian.
#[inline]
pub fn put_u24(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes()[1..]);
}

/// A vector with a one-byte length prefix; `data` must be shorter than 256 bytes.
#[inline]
pub fn put_vec8(out: &mut Vec<u8>, data: &[u8]) {
    debug_assert!(data.len() <= u8::MAX as usize);
    out.push(data.len() as u8);
    out.extend_from_slice(data);
}

/// A vector with a two-byte length prefix; `data` must be shorter than 64 KiB.
#[inline]
pub fn put_vec16(out: &mut Vec<u8>, data: &[u8]) {
    debug_assert!(data.len() <= u16::MAX as usize);
    put_u16(out, data.len() as u16);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(0x0203));
        assert_eq!(r.u48(), Err(DecodeError::Truncated));
        assert_eq!(r.u24(), Ok(0x040506));
        assert_eq!(r.clone().u32(), Err(DecodeError::Truncated));
        assert_eq!(r.finish(), Err(DecodeError::TrailingBytes));
        assert_eq!(r.vec8(), Err(DecodeError::Truncated));
        let mut r = Reader::new(&[2, 9, 9]);
        assert_eq!(r.vec8(), Ok(&[9u8, 9][..]));
        assert!(r.finish().is_ok());
        assert_eq!(Reader::new(&[]).take(usize::MAX), Err(DecodeError::Truncated));
        let mut r = Reader::new(&[0, 0, 0, 0, 0, 0, 1, 2, 9]);
        assert_eq!(r.u64(), Ok(0x0102));
        assert_eq!(r.clone().u64(), Err(DecodeError::Truncated));
    }

    #[test]
    fn padding_skip_tolerates_a_missing_final_pad() {
        let mut r = Reader::new(&[1, 0, 0, 0, 2, 0]);
        assert_eq!(r.u8(), Ok(1));
        r.skip_padding(3);
        assert_eq!(r.u8(), Ok(2));
        r.skip_padding(3);
        assert!(r.is_empty(), "one pad byte of three was there");
        r.skip_padding(usize::MAX);
        assert!(r.finish().is_ok());
    }

    #[test]
    fn writes_big_endian() {
        let mut v = Vec::new();
        put_u16(&mut v, 0x0102);
        put_u24(&mut v, 0x030405);
        put_vec8(&mut v, &[0xff]);
        assert_eq!(v, [1, 2, 3, 4, 5, 1, 0xff]);
        let mut v = Vec::new();
        put_u32(&mut v, 0x0102_0304);
        put_u64(&mut v, 0x0506_0708_090a_0b0c);
        assert_eq!(v, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    }
}
