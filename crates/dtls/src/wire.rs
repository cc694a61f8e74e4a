//! A datagram's records and handshake fragments as the engine's own parsers read them, for tools
//! that count bytes per message and per header (`fastshake lab e4`). Reads only what is in the
//! clear: a protected record is one opaque body.
//!
//! Besides [`records`], which reads a whole datagram or fails, the pieces one at a time for
//! tools that describe whatever arrives, malformed or not (`fastshake_net::dtls::describe_datagram`):
//! [`record_head`] and [`cid_record_head`] for a record header, [`fragment_head`] for a
//! handshake header, and the few fields worth naming ([`handshake_name`],
//! [`client_hello_cookie_len`], [`hello_verify_cookie_len`], [`alert`]).

use crate::alert::{AlertDescription, AlertLevel};
use crate::handshake::{
    parse_fragments, ClientHello, HandshakeHeader, HandshakeType, HelloVerifyRequest, HANDSHAKE_HEADER_LEN,
};
use crate::record::{ContentType, RecordHeader, Records, HEADER_LEN};
use fastshake_core::codec::{DecodeError, Reader};

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
                let cookie_len = (h.msg_type as u8 == 1 && h.fragment_offset == 0)
                    .then(|| client_hello_cookie_len(data))
                    .flatten();
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
pub fn client_hello_cookie_len(start: &[u8]) -> Option<usize> {
    if let Ok(hello) = ClientHello::parse(start) {
        return Some(hello.cookie.len());
    }
    // version, random, session_id<0..32>, cookie<0..255>
    let sid = *start.get(34)? as usize;
    start.get(35 + sid).map(|&c| c as usize)
}

/// The cookie length of a HelloVerifyRequest (RFC 6347 §4.2.1: version, cookie<0..255>), whole
/// or a first fragment long enough to reach it.
pub fn hello_verify_cookie_len(start: &[u8]) -> Option<usize> {
    if let Ok(verify) = HelloVerifyRequest::parse(start) {
        return Some(verify.cookie.len());
    }
    let mut r = Reader::new(start);
    r.u16().ok()?;
    r.u8().ok().map(usize::from)
}

/// The name of a handshake message type (RFC 5246 §7.4, RFC 5077 §3.3, RFC 6347 §4.2.1), `None`
/// for a type the engine does not read.
pub fn handshake_name(msg_type: u8) -> Option<&'static str> {
    HandshakeType::from_u8(msg_type).map(HandshakeType::name)
}

/// The header of one record, read where a record starts; its body may be cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHead {
    /// The content type on the wire (25 for `tls12_cid`, whose real type is encrypted).
    pub content_type: u8,
    /// The record's epoch (0 plaintext, 1 after ChangeCipherSpec).
    pub epoch: u16,
    /// Bytes of Connection ID in the header (`tls12_cid` records only, else 0).
    pub cid_len: usize,
    /// The body length the header states (ciphertext with nonce and tag in epoch 1).
    pub body_len: usize,
}

impl RecordHead {
    fn from_header(header: &RecordHeader) -> RecordHead {
        RecordHead {
            content_type: header.content_type as u8,
            epoch: header.epoch,
            cid_len: usize::from(header.cid_len),
            body_len: usize::from(header.length),
        }
    }

    /// Bytes of the header: [`RECORD_HEADER_LEN`] and the CID.
    pub fn header_len(&self) -> usize {
        RECORD_HEADER_LEN + self.cid_len
    }

    /// Bytes of the whole record, header and body.
    pub fn record_len(&self) -> usize {
        self.header_len() + self.body_len
    }
}

/// The header of the record at the start of `bytes` as the engine reads it without Connection
/// IDs (a known content type, DTLS 1.0 or 1.2, a length RFC 5246 allows), whether or not its
/// body follows; a `tls12_cid` record is [`cid_record_head`]'s.
pub fn record_head(bytes: &[u8]) -> Result<RecordHead, DecodeError> {
    RecordHeader::parse(&mut Reader::new(bytes), 0).map(|header| RecordHead::from_header(&header))
}

/// The header of the `tls12_cid` record (RFC 9146 §4) at the start of `bytes`, whole. Its CID
/// sits between the sequence number and the length, and only the record's receiver knows how
/// long it is; this takes the shortest CID (1 to 255 bytes) with which the engine reads the
/// header and the record ends where `bytes` do or where another record's header (with no CID
/// or one as long, perhaps cut short) starts. `None` when `bytes` do not start with such a
/// record.
pub fn cid_record_head(bytes: &[u8]) -> Option<RecordHead> {
    if bytes.first() != Some(&(ContentType::Tls12Cid as u8)) {
        return None;
    }
    (1..=u8::MAX).find_map(|cid_len| {
        let header = RecordHeader::parse(&mut Reader::new(bytes), cid_len).ok()?;
        let head = RecordHead::from_header(&header);
        let next = bytes.get(head.record_len()..)?;
        // A header cut short counts once it shows its content type and version.
        let next_is_record = || match RecordHeader::parse(&mut Reader::new(next), cid_len) {
            Ok(_) => true,
            Err(DecodeError::Truncated) => next.len() >= 3,
            Err(_) => false,
        };
        (next.is_empty() || next_is_record()).then_some(head)
    })
}

/// The handshake header (RFC 6347 §4.2.2) at the start of `bytes`, a plaintext handshake
/// record's body or what follows a fragment in it, as the engine reads it (a known type, the
/// fragment inside its message), whether or not the fragment's data follows. A ClientHello's
/// `cookie_len` is read from as much of its first fragment as there is.
pub fn fragment_head(bytes: &[u8]) -> Result<FragmentView, DecodeError> {
    let h = HandshakeHeader::parse(&mut Reader::new(bytes))?;
    let data = bytes.get(HANDSHAKE_HEADER_LEN..).unwrap_or_default();
    let data = data.get(..h.fragment_length as usize).unwrap_or(data);
    let first_of_hello = h.msg_type == HandshakeType::ClientHello && h.fragment_offset == 0;
    Ok(FragmentView {
        msg_type: h.msg_type as u8,
        message_seq: h.message_seq,
        message_len: h.length,
        offset: h.fragment_offset,
        len: h.fragment_length,
        cookie_len: first_of_hello.then(|| client_hello_cookie_len(data)).flatten(),
    })
}

/// A DTLS 1.3 Certificate body (RFC 8446 §4.4.2) for `chain` as the engine sends it in a
/// handshake: no request context, no entry extensions.
pub fn certificate13(chain: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + chain.iter().map(|c| 5 + c.len()).sum::<usize>());
    crate::handshake::encode_certificate13(&mut body, &[], chain);
    body
}

/// The abbreviated DTLS 1.3 Certificate body (handshake caching, seed 003 §IV-D) that stands for
/// a cached chain of `count` certificates, as the engine sends it.
pub fn abbreviated_certificate13(count: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + 5 * count);
    crate::handshake::encode_abbreviated_certificate13(&mut body, &[], count);
    body
}

/// The level and description of a plaintext alert record's body (RFC 5246 §7.2): two bytes, a
/// level of warning or fatal, as the engine takes an alert (it drops any other).
pub fn alert(body: &[u8]) -> Result<(AlertLevel, AlertDescription), DecodeError> {
    let mut r = Reader::new(body);
    let (level, code) = (r.u8()?, r.u8()?);
    r.finish()?;
    let level = AlertLevel::from_u8(level).ok_or(DecodeError::Invalid("alert level"))?;
    Ok((level, AlertDescription::from_code(code)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::DTLS_1_2;
    use proptest::prelude::*;

    #[test]
    fn certificate13_bodies_are_the_engines() {
        let chain: [&[u8]; 2] = [&[0x30, 1, 1], &[0x30, 2, 2, 2]];
        let body = certificate13(&chain);
        assert_eq!(crate::handshake::parse_certificate13(&body).unwrap(), (&[][..], chain.to_vec()));
        let abbreviated = abbreviated_certificate13(3);
        assert_eq!(abbreviated.len(), 19, "context, list length, three empty entries");
        assert_eq!(crate::handshake::parse_abbreviated_certificate13(&abbreviated).unwrap(), (&[][..], 3));
    }

    /// A record as the engine writes its header, with `cid` when it is a `tls12_cid` record.
    fn record(content_type: ContentType, epoch: u16, cid: &[u8], body: &[u8]) -> Vec<u8> {
        let header = RecordHeader {
            content_type,
            version: DTLS_1_2,
            epoch,
            seq: 9,
            length: body.len() as u16,
            cid_len: cid.len() as u8,
        };
        let mut out = vec![0; header.len()];
        header.write(&mut out, cid);
        out.extend_from_slice(body);
        out
    }

    /// A handshake fragment as the engine writes its header.
    fn fragment(msg_type: HandshakeType, length: u32, offset: u32, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        HandshakeHeader {
            msg_type,
            length,
            message_seq: 0,
            fragment_offset: offset,
            fragment_length: data.len() as u32,
        }
        .write(&mut out);
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn a_record_head_is_read_whether_or_not_its_body_follows() {
        let ccs = record(ContentType::ChangeCipherSpec, 0, &[], &[1]);
        let head = record_head(&ccs).unwrap();
        assert_eq!(head, RecordHead { content_type: 20, epoch: 0, cid_len: 0, body_len: 1 });
        assert_eq!((head.header_len(), head.record_len()), (RECORD_HEADER_LEN, ccs.len()));
        let data = record(ContentType::ApplicationData, 1, &[], &[0; 30]);
        assert_eq!(record_head(&data[..20]).map(|h| (h.epoch, h.body_len)), Ok((1, 30)));
        assert_eq!(record_head(&data[..12]), Err(DecodeError::Truncated));
        let mut unknown = ccs.clone();
        unknown[0] = 24;
        assert!(record_head(&unknown).is_err());
        // Without a CID length a tls12_cid record is not one (as `Records::new` reads it).
        let cid = record(ContentType::Tls12Cid, 1, &[1, 2, 3, 4], &[0; 30]);
        assert!(record_head(&cid).is_err());
    }

    #[test]
    fn finds_the_length_of_a_tls12_cid_record_behind_its_cid() {
        for cid_len in [1usize, 4, 8, 20, 255] {
            let cid: Vec<u8> = (0..cid_len).map(|i| 0x80 | i as u8).collect();
            let alone = record(ContentType::Tls12Cid, 1, &cid, &[0xa5; 30]);
            let head = cid_record_head(&alone).expect("a tls12_cid record");
            assert_eq!((head.content_type, head.cid_len, head.body_len), (25, cid_len, 30));
            assert_eq!(head.record_len(), alone.len());
            // Followed by another record, with or without a CID.
            for next in [record(ContentType::Alert, 1, &[], &[0; 26]), alone.clone()] {
                let two = [&alone[..], &next[..]].concat();
                assert_eq!(cid_record_head(&two), Some(head), "CID of {cid_len} B");
            }
            // Followed by a record cut short, even inside its header: found all the same.
            let cut = record(ContentType::ApplicationData, 1, &[], &[0; 26]);
            for len in 3..cut.len() {
                let two = [&alone[..], &cut[..len]].concat();
                assert_eq!(cid_record_head(&two), Some(head), "CID of {cid_len} B, then {len} B");
            }
            // Cut short, or followed by bytes that are no record: no length fits.
            assert_eq!(cid_record_head(&alone[..alone.len() - 1]), None);
            assert_eq!(cid_record_head(&[&alone[..], &[0x99; 20][..]].concat()), None);
        }
        assert_eq!(cid_record_head(&record(ContentType::Handshake, 0, &[], &[0; 12])), None);
        assert_eq!(cid_record_head(&[25]), None);
    }

    #[test]
    fn a_fragment_head_names_the_message_and_its_cookie() {
        let mut hello = vec![0xfe, 0xfd];
        hello.extend_from_slice(&[7; 32]);
        hello.extend_from_slice(&[2, 0xaa, 0xbb]); // session id
        hello.extend_from_slice(&[3, 1, 2, 3]); // cookie
        let whole = fragment(HandshakeType::ClientHello, hello.len() as u32, 0, &hello);
        let head = fragment_head(&whole).unwrap();
        assert_eq!(
            (head.msg_type, head.offset, head.len, head.cookie_len),
            (1, 0, hello.len() as u32, Some(3))
        );
        // The data cut off: the header still reads, the cookie only while it is there.
        assert_eq!(fragment_head(&whole[..HANDSHAKE_HEADER_LEN + 38]).map(|h| h.cookie_len), Ok(Some(3)));
        assert_eq!(fragment_head(&whole[..HANDSHAKE_HEADER_LEN + 37]).map(|h| h.cookie_len), Ok(None));
        assert_eq!(fragment_head(&whole[..11]), Err(DecodeError::Truncated));
        // A later fragment has no cookie; a fragment beyond its message or an unknown type is
        // no fragment.
        let later = fragment(HandshakeType::ClientHello, 100, 40, &[0; 20]);
        assert_eq!(fragment_head(&later).map(|h| (h.offset, h.cookie_len)), Ok((40, None)));
        assert!(fragment_head(&fragment(HandshakeType::Certificate, 10, 5, &[0; 20])).is_err());
        let mut unknown = later;
        unknown[0] = 99;
        assert!(fragment_head(&unknown).is_err());
    }

    #[test]
    fn names_the_fields_worth_naming() {
        for code in 0..=u8::MAX {
            let name = HandshakeType::from_u8(code).map(HandshakeType::name);
            assert_eq!(handshake_name(code), name);
        }
        assert_eq!(
            (handshake_name(1), handshake_name(20), handshake_name(5)),
            (Some("ClientHello"), Some("Finished"), None)
        );
        let mut verify = Vec::new();
        HelloVerifyRequest::encode(&mut verify, &[9; 32]);
        assert_eq!(hello_verify_cookie_len(&verify), Some(32));
        assert_eq!(hello_verify_cookie_len(&verify[..5]), Some(32));
        assert_eq!(hello_verify_cookie_len(&verify[..2]), None);
        assert_eq!(client_hello_cookie_len(&[0; 35]), None);
        assert_eq!(alert(&[2, 40]), Ok((AlertLevel::Fatal, AlertDescription::HandshakeFailure)));
        assert_eq!(alert(&[1, 0]), Ok((AlertLevel::Warning, AlertDescription::CloseNotify)));
        assert_eq!(alert(&[2]), Err(DecodeError::Truncated));
        assert_eq!(alert(&[2, 40, 0]), Err(DecodeError::TrailingBytes));
        assert!(alert(&[7, 40]).is_err());
    }

    proptest! {
        /// Whatever the bytes, every reader answers without panicking, and what it reads lies
        /// inside them as it says.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), cid in any::<bool>()) {
            let mut bytes = bytes;
            if cid && !bytes.is_empty() {
                bytes[0] = ContentType::Tls12Cid as u8;
            }
            let _ = records(&bytes);
            if let Ok(head) = record_head(&bytes) {
                prop_assert!(head.header_len() <= bytes.len() && head.cid_len == 0);
            }
            if let Some(head) = cid_record_head(&bytes) {
                prop_assert!(head.record_len() <= bytes.len() && (1..=255).contains(&head.cid_len));
            }
            if let Ok(f) = fragment_head(&bytes) {
                prop_assert!(f.offset + f.len <= f.message_len && handshake_name(f.msg_type).is_some());
            }
            let _ = (client_hello_cookie_len(&bytes), hello_verify_cookie_len(&bytes), alert(&bytes));
        }
    }
}
