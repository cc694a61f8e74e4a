//! TLS certificate compression (RFC 8879) for DTLS 1.3: the `compress_certificate` extension,
//! the CompressedCertificate message, and compression with a bound on what a peer's input may
//! make us allocate.
//!
//! A sender compresses the body of its 1.3 Certificate message (request context included) with
//! an algorithm the receiver listed; the CompressedCertificate goes into the transcript as sent
//! (RFC 8879 §4), so both sides hash the compressed form. DTLS 1.2 has no standard form.

use super::MAX_MESSAGE_LEN;
use fastshake_core::codec::{put_u16, put_u24, put_u8, DecodeError, Reader};
use std::io::Read;
use std::sync::Mutex;

/// `compress_certificate` (RFC 8879 §3).
pub const EXT_COMPRESS_CERTIFICATE: u16 = 27;

/// A certificate compression algorithm (RFC 8879 §7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressionAlgorithm {
    /// zlib (RFC 1950), code 1.
    Zlib,
    /// Brotli (RFC 7932), code 2.
    Brotli,
    /// Zstandard (RFC 8878), code 3.
    Zstd,
}

impl CompressionAlgorithm {
    /// Every algorithm, smallest output first on typical chains.
    pub const ALL: [CompressionAlgorithm; 3] =
        [CompressionAlgorithm::Brotli, CompressionAlgorithm::Zstd, CompressionAlgorithm::Zlib];

    /// Its code point on the wire.
    pub fn code(self) -> u16 {
        match self {
            CompressionAlgorithm::Zlib => 1,
            CompressionAlgorithm::Brotli => 2,
            CompressionAlgorithm::Zstd => 3,
        }
    }

    /// The algorithm a code point names, if we implement it.
    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.code() == code)
    }

    /// Its name in the IANA registry, as the CLI takes it.
    pub fn name(self) -> &'static str {
        match self {
            CompressionAlgorithm::Zlib => "zlib",
            CompressionAlgorithm::Brotli => "brotli",
            CompressionAlgorithm::Zstd => "zstd",
        }
    }

    /// `input` compressed with the strongest setting: a chain is compressed once and sent many
    /// times (see [`CertificateCompression`]).
    pub fn compress(self, input: &[u8]) -> Vec<u8> {
        use std::io::Write;
        match self {
            CompressionAlgorithm::Zlib => {
                let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
                // Writing to a Vec cannot fail.
                let _ = encoder.write_all(input);
                encoder.finish().unwrap_or_default()
            }
            CompressionAlgorithm::Brotli => {
                let mut out = Vec::new();
                let params = brotli::enc::BrotliEncoderParams {
                    quality: 11,
                    lgwin: BROTLI_WINDOW_BITS,
                    size_hint: input.len(),
                    ..Default::default()
                };
                let _ = brotli::BrotliCompress(&mut &input[..], &mut out, &params);
                out
            }
            CompressionAlgorithm::Zstd => zstd::bulk::compress(input, 19).unwrap_or_default(),
        }
    }

    /// `data` decompressed, which must come to exactly `expected` bytes, at most 64 KiB (the
    /// largest handshake message taken): nothing a peer sends makes us write more than that or
    /// hold a decoder window larger than 128 KiB (a bomb fails, RFC 8879 §4: `bad_certificate`).
    pub fn decompress(self, data: &[u8], expected: usize) -> Result<Vec<u8>, DecompressError> {
        if expected == 0 || expected > MAX_MESSAGE_LEN as usize {
            return Err(DecompressError::Length);
        }
        let mut out = Vec::with_capacity(expected);
        let limit = expected as u64 + 1;
        match self {
            CompressionAlgorithm::Zlib => {
                let mut decoder = flate2::read::ZlibDecoder::new(data);
                (&mut decoder).take(limit).read_to_end(&mut out).map_err(|_| DecompressError::Corrupt)?;
                if decoder.total_in() != data.len() as u64 {
                    return Err(DecompressError::Corrupt);
                }
            }
            CompressionAlgorithm::Brotli => {
                let budget = std::rc::Rc::new(std::cell::Cell::new(MAX_WINDOW + BROTLI_SLACK));
                let decoder = brotli_decompressor::reader::DecompressorCustomAlloc::new(
                    data,
                    alloc_stdlib::heap_alloc::WrapBox::<u8>::from(vec![0u8; 4096]),
                    BudgetAlloc { budget },
                    alloc_stdlib::StandardAlloc::default(),
                    alloc_stdlib::StandardAlloc::default(),
                );
                decoder.take(limit).read_to_end(&mut out).map_err(|_| DecompressError::Corrupt)?;
            }
            CompressionAlgorithm::Zstd => {
                let mut decoder = zstd::bulk::Decompressor::new().map_err(|_| DecompressError::Corrupt)?;
                decoder
                    .set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(MAX_WINDOW.ilog2()))
                    .map_err(|_| DecompressError::Corrupt)?;
                // Fails rather than write past the capacity.
                out = decoder.decompress(data, expected).map_err(|_| DecompressError::Corrupt)?;
            }
        }
        if out.len() != expected {
            return Err(DecompressError::Length);
        }
        Ok(out)
    }
}

impl std::fmt::Display for CompressionAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CompressionAlgorithm {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown certificate compression {s:?} (zlib, brotli, zstd)"))
    }
}

/// Why a CompressedCertificate was refused; each is `bad_certificate` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecompressError {
    /// Not a valid stream of its algorithm, or one needing a larger window than we allow.
    Corrupt,
    /// Not the length it announced, or an announced length beyond what we accept.
    Length,
}

/// Largest decoder window a peer's stream may ask of us: a Certificate message is at most
/// [`MAX_MESSAGE_LEN`], so an honest stream needs no more.
pub const MAX_WINDOW: usize = 2 * MAX_MESSAGE_LEN as usize;
/// What a Brotli decoder adds to its ring buffer (write-ahead slack and the longest dictionary
/// word), and the small buffers it also takes from the same allocator.
const BROTLI_SLACK: usize = 4096;
/// The window our Brotli streams declare: any chain we accept fits in it whole.
const BROTLI_WINDOW_BITS: i32 = 17;

/// The Brotli decoder's byte allocator, failing (an empty block, which the decoder reports as an
/// error) once the stream asked for more than its budget: a stream may declare a 16 MiB window
/// (RFC 7932 §9.1) in a few bytes.
struct BudgetAlloc {
    budget: std::rc::Rc<std::cell::Cell<usize>>,
}

impl alloc_no_stdlib::Allocator<u8> for BudgetAlloc {
    type AllocatedMemory = alloc_stdlib::heap_alloc::WrapBox<u8>;

    fn alloc_cell(&mut self, len: usize) -> Self::AllocatedMemory {
        let left = self.budget.get();
        if len > left {
            return alloc_stdlib::heap_alloc::WrapBox::default();
        }
        self.budget.set(left - len);
        vec![0u8; len].into()
    }

    fn free_cell(&mut self, data: Self::AllocatedMemory) {
        use alloc_no_stdlib::SliceWrapper;
        self.budget.set(self.budget.get() + data.slice().len());
    }
}

/// The algorithms of a `compress_certificate` extension (RFC 8879 §3), unknown ones included
/// (they are ignored by whoever reads the list).
pub fn parse_compress_certificate(data: &[u8]) -> Result<&[u8], DecodeError> {
    let mut r = Reader::new(data);
    let list = r.vec8()?;
    r.finish()?;
    if list.len() < 2 || list.len() % 2 != 0 {
        return Err(DecodeError::Invalid("compress_certificate"));
    }
    Ok(list)
}

/// The body of a `compress_certificate` extension listing `algorithms`.
pub fn encode_compress_certificate(out: &mut Vec<u8>, algorithms: &[CompressionAlgorithm]) {
    put_u8(out, (algorithms.len() * 2) as u8);
    for a in algorithms {
        put_u16(out, a.code());
    }
}

/// Our first algorithm the peer's list (raw pairs of bytes) names: the one our chain is
/// compressed with.
pub fn choose(ours: &[CompressionAlgorithm], theirs: &[u8]) -> Option<CompressionAlgorithm> {
    ours.iter()
        .copied()
        .find(|a| theirs.chunks_exact(2).any(|c| u16::from_be_bytes([c[0], c[1]]) == a.code()))
}

/// A CompressedCertificate message (RFC 8879 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressedCertificate<'a> {
    pub algorithm: u16,
    pub uncompressed_length: u32,
    pub compressed: &'a [u8],
}

impl<'a> CompressedCertificate<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let algorithm = r.u16()?;
        let uncompressed_length = r.u24()?;
        let len = r.u24()? as usize;
        let compressed = r.take(len)?;
        r.finish()?;
        if compressed.is_empty() {
            return Err(DecodeError::Invalid("empty compressed_certificate_message"));
        }
        Ok(CompressedCertificate { algorithm, uncompressed_length, compressed })
    }

    pub fn encode(
        out: &mut Vec<u8>,
        algorithm: CompressionAlgorithm,
        uncompressed_length: usize,
        compressed: &[u8],
    ) {
        put_u16(out, algorithm.code());
        put_u24(out, uncompressed_length as u32);
        put_u24(out, compressed.len() as u32);
        out.extend_from_slice(compressed);
    }
}

/// RFC 8879 for one side: the algorithms we take a peer's chain in and compress ours with, most
/// preferred first, and our chains already compressed. Compressing at the strongest setting
/// costs more than a handshake's signature; a server sends the same chain every time, so it is
/// compressed once per algorithm. Clones of a configuration share it.
#[derive(Debug, Default)]
pub struct CertificateCompression {
    algorithms: Vec<CompressionAlgorithm>,
    /// The most recent last.
    made: Mutex<Vec<Compressed>>,
}

/// A Certificate body compressed with one algorithm into a CompressedCertificate body.
#[derive(Debug)]
struct Compressed {
    algorithm: CompressionAlgorithm,
    certificate: Vec<u8>,
    message: Vec<u8>,
}

/// Compressed chains kept: one per algorithm for a server's chain, and a few client ones.
const MADE_KEPT: usize = 8;

impl CertificateCompression {
    /// Offer and use `algorithms`, most preferred first (none: RFC 8879 off).
    pub fn new(algorithms: &[CompressionAlgorithm]) -> Self {
        let mut list = Vec::new();
        for a in algorithms {
            if !list.contains(a) {
                list.push(*a);
            }
        }
        CertificateCompression { algorithms: list, made: Mutex::new(Vec::new()) }
    }

    /// Every algorithm, Brotli first.
    pub fn all() -> Self {
        Self::new(&CompressionAlgorithm::ALL)
    }

    /// Off: no extension offered, a peer's CompressedCertificate refused.
    pub fn none() -> Self {
        Self::new(&[])
    }

    /// The algorithms, most preferred first.
    pub fn algorithms(&self) -> &[CompressionAlgorithm] {
        &self.algorithms
    }

    /// No algorithm: RFC 8879 is not used.
    pub fn is_off(&self) -> bool {
        self.algorithms.is_empty()
    }

    /// The body of a CompressedCertificate carrying the Certificate body `certificate`.
    pub fn compressed_message(&self, algorithm: CompressionAlgorithm, certificate: &[u8]) -> Vec<u8> {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = made.iter().find(|m| m.algorithm == algorithm && m.certificate == certificate) {
            return done.message.clone();
        }
        let compressed = algorithm.compress(certificate);
        let mut message = Vec::with_capacity(compressed.len() + 8);
        CompressedCertificate::encode(&mut message, algorithm, certificate.len(), &compressed);
        if made.len() == MADE_KEPT {
            made.remove(0);
        }
        made.push(Compressed { algorithm, certificate: certificate.to_vec(), message: message.clone() });
        message
    }
}

impl Clone for CertificateCompression {
    fn clone(&self) -> Self {
        Self::new(&self.algorithms)
    }
}

impl PartialEq for CertificateCompression {
    fn eq(&self, other: &Self) -> bool {
        self.algorithms == other.algorithms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_like() -> Vec<u8> {
        // Certificate-like: repeated structure with some entropy.
        let mut body = vec![0u8, 0, 0x0c, 0];
        for i in 0..3u8 {
            body.extend_from_slice(&[0, 2, 0x80]);
            for j in 0..640u32 {
                body.push(((j * 31 + i as u32 * 7) % 251) as u8 ^ if j % 16 == 0 { 0x55 } else { 0 });
            }
            body.extend_from_slice(&[0, 0]);
        }
        body
    }

    #[test]
    fn every_algorithm_round_trips_and_shrinks_a_chain() {
        let body = chain_like();
        for a in CompressionAlgorithm::ALL {
            let c = a.compress(&body);
            assert!(c.len() < body.len(), "{a}: {} of {}", c.len(), body.len());
            assert_eq!(a.decompress(&c, body.len()).unwrap(), body, "{a}");
        }
    }

    #[test]
    fn a_wrong_length_or_a_broken_stream_is_refused() {
        let body = chain_like();
        for a in CompressionAlgorithm::ALL {
            let c = a.compress(&body);
            assert!(a.decompress(&c, body.len() - 1).is_err(), "{a} shorter");
            assert!(a.decompress(&c, body.len() + 1).is_err(), "{a} longer");
            assert_eq!(a.decompress(&c, 0), Err(DecompressError::Length), "{a} zero");
            let mut broken = c.clone();
            broken.truncate(c.len() / 2);
            assert!(a.decompress(&broken, body.len()).is_err(), "{a} truncated");
            assert!(a.decompress(&[0xff; 40], body.len()).is_err(), "{a} garbage");
        }
    }

    #[test]
    fn a_bomb_is_refused_without_writing_past_the_bound() {
        // 4 MiB of zeros in a few kB of each format, announced as a small chain.
        let zeros = vec![0u8; 4 << 20];
        for a in CompressionAlgorithm::ALL {
            let bomb = match a {
                CompressionAlgorithm::Brotli => {
                    let mut out = Vec::new();
                    let params =
                        brotli::enc::BrotliEncoderParams { quality: 1, lgwin: 24, ..Default::default() };
                    brotli::BrotliCompress(&mut &zeros[..], &mut out, &params).unwrap();
                    out
                }
                _ => a.compress(&zeros[..1 << 20]),
            };
            assert!(bomb.len() < 64 * 1024, "{a}: {}", bomb.len());
            assert!(a.decompress(&bomb, 4000).is_err(), "{a}");
            assert_eq!(a.decompress(&bomb, (MAX_MESSAGE_LEN + 1) as usize), Err(DecompressError::Length));
        }
    }

    #[test]
    fn a_brotli_stream_asking_for_a_16_mib_window_is_refused() {
        // Two metablocks (the first not last) at lgwin 24: the decoder would need the whole
        // window, beyond the budget, before writing anything.
        let mut input = vec![7u8; 3000];
        input.extend((0..3000u32).map(|i| (i % 253) as u8));
        let mut out = Vec::new();
        let params = brotli::enc::BrotliEncoderParams { quality: 2, lgwin: 24, ..Default::default() };
        {
            let mut w = brotli::CompressorWriter::with_params(&mut out, 4096, &params);
            use std::io::Write;
            w.write_all(&input[..3000]).unwrap();
            w.flush().unwrap();
            w.write_all(&input[3000..]).unwrap();
        }
        assert_eq!(CompressionAlgorithm::Brotli.decompress(&out, input.len()), Err(DecompressError::Corrupt));
    }

    #[test]
    fn the_message_and_the_extension_parse_back() {
        let mut ext = Vec::new();
        encode_compress_certificate(&mut ext, &CompressionAlgorithm::ALL);
        let list = parse_compress_certificate(&ext).unwrap();
        assert_eq!(choose(&[CompressionAlgorithm::Zlib], list), Some(CompressionAlgorithm::Zlib));
        assert_eq!(choose(&[], list), None);
        assert!(parse_compress_certificate(&[0]).is_err());
        assert!(parse_compress_certificate(&[3, 0, 1, 0]).is_err());
        let compression = CertificateCompression::all();
        let body = chain_like();
        let message = compression.compressed_message(CompressionAlgorithm::Zstd, &body);
        assert_eq!(compression.compressed_message(CompressionAlgorithm::Zstd, &body), message);
        let parsed = CompressedCertificate::parse(&message).unwrap();
        assert_eq!(parsed.algorithm, 3);
        assert_eq!(parsed.uncompressed_length as usize, body.len());
        assert!(CompressedCertificate::parse(&[0, 1, 0, 0, 4, 0, 0, 0]).is_err());
    }
}
