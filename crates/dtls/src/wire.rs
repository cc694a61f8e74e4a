//! A datagram's records and handshake fragments as the engine's own parsers read them, for tools
//! that count bytes per message and per header (`fastshake lab e4`). Reads only what is in the
//! clear: a protected record is one opaque body.

use crate::handshake::{parse_fragments, ClientHello, HANDSHAKE_HEADER_LEN};
use crate::record::{ContentType, Records, HEADER_LEN};
use fastshake_core::codec::DecodeError;

/// Bytes of a DTLS 1.2 record header (RFC 6347 §4.1).
pub const RECORD_HEADER_LEN: usize = HEADER_LEN;
/// Bytes of a DTLS handshake header (RFC 6347 §4.2.2).
pub const FRAGMENT_HEADER_LEN: usize = HANDSHAKE_HEADER_LEN;

/// One record of a datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView {
    /// The content type on the wire (20 change_cipher_spec, 21 alert, 22 handshake, 23 data).
    pub content_type: u8,
    /// The record's epoch (0 plaintext, 1 after ChangeCipherSpec).
    pub epoch: u16,
    /// Bytes after the header (ciphertext with nonce and tag in epoch 1).
    pub body_len: usize,
    /// The handshake fragments of a plaintext handshake record (empty otherwise).
    pub fragments: Vec<FragmentView>,
}

/// One handshake fragment of a plaintext record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentView {
    /// The handshake message type (RFC 5246 §7.4).
    pub msg_type: u8,
    /// The message's sequence number in the handshake (RFC 6347 §4.2.2).
    pub message_seq: u16,
    /// The whole message's body length.
    pub message_len: u32,
    /// Where this fragment starts in the message body.
    pub offset: u32,
    /// Bytes of the message body this fragment carries.
    pub len: u32,
    /// A ClientHello's cookie length, read from the first fragment when it holds the field.
    pub cookie_len: Option<usize>,
}

/// The records of `datagram` (no Connection IDs), or the first decoding error.
pub fn records(datagram: &[u8]) -> Result<Vec<RecordView>, DecodeError> {
    let mut out = Vec::new();
    for rec in Records::new(datagram) {
        let (header, range) = rec?;
        let body = datagram.get(range).ok_or(DecodeError::Truncated)?;
        let mut fragments = Vec::new();
        if header.content_type == ContentType::Handshake && header.epoch == 0 {
            for f in parse_fragments(body) {
                let (h, data) = f?;
                let cookie_len =
                    (h.msg_type as u8 == 1 && h.fragment_offset == 0).then(|| cookie_len(data)).flatten();
                fragments.push(FragmentView {
                    msg_type: h.msg_type as u8,
                    message_seq: h.message_seq,
                    message_len: h.length,
                    offset: h.fragment_offset,
                    len: h.fragment_length,
                    cookie_len,
                });
            }
        }
        out.push(RecordView {
            content_type: header.content_type as u8,
            epoch: header.epoch,
            body_len: body.len(),
            fragments,
        });
    }
    Ok(out)
}

/// The cookie length of a ClientHello (whole, or a first fragment long enough to reach it).
fn cookie_len(start: &[u8]) -> Option<usize> {
    if let Ok(hello) = ClientHello::parse(start) {
        return Some(hello.cookie.len());
    }
    // version, random, session_id<0..32>, cookie<0..255>
    let sid = *start.get(34)? as usize;
    start.get(35 + sid).map(|&c| c as usize)
}
