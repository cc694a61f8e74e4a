//! Handshake messages (RFC 5246 §7.4, RFC 6347 §4.3.2) and their fragmentation.

mod cached;
mod certificate;
mod compression;
mod messages;
mod reassembly;
mod tls13;

pub(crate) use cached::*;
pub use certificate::NamedGroup;
pub(crate) use certificate::*;
pub(crate) use compression::{
    choose as choose_compression, encode_compress_certificate, parse_compress_certificate,
    CompressedCertificate, EXT_COMPRESS_CERTIFICATE,
};
pub use compression::{CertificateCompression, CompressionAlgorithm};
pub(crate) use messages::*;
pub(crate) use reassembly::{Fragment, Insert, Reassembler, PEER_CHAIN_BUDGET};
pub(crate) use tls13::*;

use fastshake_core::codec::{put_u16, put_u24, put_u8, DecodeError, Reader};

/// Bytes of a DTLS handshake header.
pub const HANDSHAKE_HEADER_LEN: usize = 12;
/// Largest handshake message accepted. PSK messages are tiny; certificate chains will need more.
pub const MAX_MESSAGE_LEN: u32 = 64 * 1024;

/// Defines [`HandshakeType`] from one list of names and codes: the enum, its reading from the
/// wire and its names for traces.
macro_rules! handshake_types {
    ($($variant:ident = $code:literal,)*) => {
        /// Handshake message types (RFC 5246 §7.4, RFC 6347 §4.2.1, RFC 5077 §3.3, RFC 8446 §4,
        /// RFC 9147 §5 and §9).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum HandshakeType {
            $($variant = $code,)*
        }

        impl HandshakeType {
            /// The type a code on the wire names, if we know it.
            pub fn from_u8(v: u8) -> Option<Self> {
                match v {
                    $($code => Some(HandshakeType::$variant),)*
                    _ => None,
                }
            }

            /// The message's name in the RFCs, for traces.
            pub fn name(self) -> &'static str {
                match self {
                    $(HandshakeType::$variant => stringify!($variant),)*
                }
            }
        }
    };
}

handshake_types! {
    HelloRequest = 0,
    ClientHello = 1,
    ServerHello = 2,
    HelloVerifyRequest = 3,
    NewSessionTicket = 4,
    // DTLS 1.3 (RFC 8446 §4, RFC 9147 §5 and §9); no EndOfEarlyData (RFC 9147 §5.6).
    EncryptedExtensions = 8,
    RequestConnectionId = 9,
    NewConnectionId = 10,
    Certificate = 11,
    ServerKeyExchange = 12,
    CertificateRequest = 13,
    ServerHelloDone = 14,
    CertificateVerify = 15,
    ClientKeyExchange = 16,
    Finished = 20,
    KeyUpdate = 24,
    // RFC 8879 §4.
    CompressedCertificate = 25,
    MessageHash = 254,
}

/// The DTLS handshake header of one fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandshakeHeader {
    pub msg_type: HandshakeType,
    pub length: u32,
    pub message_seq: u16,
    pub fragment_offset: u32,
    pub fragment_length: u32,
}

impl HandshakeHeader {
    pub fn parse(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let msg_type = HandshakeType::from_u8(r.u8()?).ok_or(DecodeError::Invalid("handshake type"))?;
        let length = r.u24()?;
        let message_seq = r.u16()?;
        let fragment_offset = r.u24()?;
        let fragment_length = r.u24()?;
        if !matches!(fragment_offset.checked_add(fragment_length), Some(end) if end <= length) {
            return Err(DecodeError::Invalid("fragment beyond message"));
        }
        Ok(HandshakeHeader { msg_type, length, message_seq, fragment_offset, fragment_length })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        put_u8(out, self.msg_type as u8);
        put_u24(out, self.length);
        put_u16(out, self.message_seq);
        put_u24(out, self.fragment_offset);
        put_u24(out, self.fragment_length);
    }

    /// The header as hashed into the transcript: the whole message as one fragment.
    pub fn unfragmented(
        msg_type: HandshakeType,
        message_seq: u16,
        length: u32,
    ) -> [u8; HANDSHAKE_HEADER_LEN] {
        let mut v = Vec::with_capacity(HANDSHAKE_HEADER_LEN);
        HandshakeHeader { msg_type, length, message_seq, fragment_offset: 0, fragment_length: length }
            .write(&mut v);
        let mut out = [0u8; HANDSHAKE_HEADER_LEN];
        out.copy_from_slice(&v);
        out
    }
}

/// Splits one handshake record body into fragments.
pub fn parse_fragments(body: &[u8]) -> impl Iterator<Item = Result<(HandshakeHeader, &[u8]), DecodeError>> {
    fragment_ranges(body).map(|item| item.map(|(h, range)| (h, &body[range])))
}

/// Splits one handshake record body into fragments, each with the range of its data in `body`.
pub fn fragment_ranges(
    body: &[u8],
) -> impl Iterator<Item = Result<(HandshakeHeader, std::ops::Range<usize>), DecodeError>> + '_ {
    let mut r = Reader::new(body);
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || r.is_empty() {
            return None;
        }
        let item = HandshakeHeader::parse(&mut r).and_then(|h| {
            let start = body.len() - r.remaining();
            r.take(h.fragment_length as usize)?;
            Ok((h, start..start + h.fragment_length as usize))
        });
        failed = item.is_err();
        Some(item)
    })
}
