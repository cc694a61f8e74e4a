//! STUN messages (RFC 8489): a borrowed parser and a builder.
//!
//! [`Message::parse`] checks the framing of a datagram and keeps its exact bytes, so that
//! MESSAGE-INTEGRITY (§14.5) and FINGERPRINT (§14.7) are verified against what was received, not
//! against a re-encoding. [`MessageBuilder`] writes a message and seals it with both, patching
//! the header length each time as those sections require.
//!
//! The attribute accessors cover what ICE (RFC 8445 §7.1, §16.1) and its error answers need.
//! Only short-term credentials (§9.1) are supported: ICE uses nothing else.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use fastshake_core::codec::{put_u16, put_u32, put_u64, Reader};
use ring::hmac;

/// The fixed value of bytes 4–7 of every STUN message (RFC 8489 §5).
pub const MAGIC_COOKIE: u32 = 0x2112_A442;
/// Bytes of the message header (RFC 8489 §5).
pub const HEADER_LEN: usize = 20;
/// Bytes of a MESSAGE-INTEGRITY value: an HMAC-SHA1 tag (RFC 8489 §14.5).
pub const INTEGRITY_LEN: usize = 20;
/// Bytes of a FINGERPRINT value (RFC 8489 §14.7).
pub const FINGERPRINT_LEN: usize = 4;
/// CRC-32s a META-DTLS-IN-STUN-ACK lists at most (draft-hancke-webrtc-sped; Chromium's
/// `kMaxAckSize`).
pub const MAX_DTLS_IN_STUN_ACKS: usize = 4;
/// Bytes of a type-length attribute header (RFC 8489 §14).
pub const ATTRIBUTE_HEADER_LEN: usize = 4;
/// XORed into the CRC-32 so that a FINGERPRINT never equals the CRC an application protocol
/// sharing the port might carry at the same place (RFC 8489 §14.7).
const FINGERPRINT_XOR: u32 = 0x5354_554E;
/// The largest attribute section the 16-bit length field can announce, kept a multiple of 4.
const MAX_BODY_LEN: usize = 0xFFFC;

/// Attribute types (RFC 8489 §18.3, RFC 8445 §16.1).
///
/// Types below 0x8000 are comprehension-required: a receiver that does not understand one must
/// fail a request with 420 (RFC 8489 §14).
pub mod attr {
    /// The user name of the short-term credential, for ICE "RECEIVER-UFRAG:SENDER-UFRAG".
    pub const USERNAME: u16 = 0x0006;
    /// HMAC-SHA1 over the message before it (RFC 8489 §14.5).
    pub const MESSAGE_INTEGRITY: u16 = 0x0008;
    /// Error class and number with a reason phrase (RFC 8489 §14.8).
    pub const ERROR_CODE: u16 = 0x0009;
    /// The comprehension-required types a 420 answer did not understand (RFC 8489 §14.9).
    pub const UNKNOWN_ATTRIBUTES: u16 = 0x000A;
    /// The requester's transport address, XORed with the cookie and transaction id (§14.2).
    pub const XOR_MAPPED_ADDRESS: u16 = 0x0020;
    /// The priority a peer-reflexive candidate would have (RFC 8445 §7.1.1).
    pub const PRIORITY: u16 = 0x0024;
    /// The controlling agent nominates the pair of this check (RFC 8445 §7.1.2).
    pub const USE_CANDIDATE: u16 = 0x0025;
    /// The sender's software, for diagnostics (RFC 8489 §14.14).
    pub const SOFTWARE: u16 = 0x8022;
    /// CRC-32 of the message before it, XOR 0x5354554E (RFC 8489 §14.7).
    pub const FINGERPRINT: u16 = 0x8028;
    /// The sender believes it is controlled; carries its tiebreaker (RFC 8445 §7.1.3).
    pub const ICE_CONTROLLED: u16 = 0x8029;
    /// The sender believes it is controlling; carries its tiebreaker (RFC 8445 §7.1.3).
    pub const ICE_CONTROLLING: u16 = 0x802A;
    /// One whole DTLS datagram carried in a Binding request or success response
    /// (draft-hancke-webrtc-sped, Chromium's `WebRTC-IceHandshakeDtls`). Comprehension-optional,
    /// so a peer that does not know it ignores it.
    pub const META_DTLS_IN_STUN: u16 = 0xC070;
    /// 0 to 4 big-endian CRC-32s of DTLS datagrams received, embedded or plain
    /// (draft-hancke-webrtc-sped). Comprehension-optional.
    pub const META_DTLS_IN_STUN_ACK: u16 = 0xC071;

    /// The comprehension-required types this module decodes; any other type below 0x8000 is
    /// reported by [`super::Message::unknown_comprehension_required`].
    pub const UNDERSTOOD: [u16; 7] = [
        USERNAME,
        MESSAGE_INTEGRITY,
        ERROR_CODE,
        UNKNOWN_ATTRIBUTES,
        XOR_MAPPED_ADDRESS,
        PRIORITY,
        USE_CANDIDATE,
    ];
}

/// What went wrong with a STUN message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StunError {
    /// Fewer bytes than a header.
    #[error("shorter than the 20-byte STUN header")]
    TooShort,
    /// The two most significant bits are not zero, so this is not STUN (RFC 8489 §5).
    #[error("the first two bits are not zero")]
    LeadingBitsNotZero,
    /// Bytes 4–7 are not the magic cookie.
    #[error("magic cookie {0:#010x} is not 0x2112a442")]
    WrongMagicCookie(u32),
    /// The header length is not a multiple of 4 (RFC 8489 §5).
    #[error("message length {0} is not a multiple of 4")]
    LengthNotMultipleOfFour(usize),
    /// The header length disagrees with the datagram.
    #[error("the header announces {announced} bytes of attributes, the datagram carries {carried}")]
    LengthMismatch {
        /// Attribute bytes the header announces.
        announced: usize,
        /// Attribute bytes after the header in the datagram.
        carried: usize,
    },
    /// An attribute (with its padding) runs past the end of the message.
    #[error("attribute {0:#06x} overruns the message")]
    AttributeOverrun(u16),
    /// A fixed-size attribute has another size.
    #[error("attribute {attribute:#06x} is {length} bytes long, not {expected}")]
    WrongAttributeLength {
        /// The attribute type.
        attribute: u16,
        /// Its length field.
        length: usize,
        /// The length the RFC fixes.
        expected: usize,
    },
    /// Something follows FINGERPRINT, which must be last (RFC 8489 §14.7).
    #[error("an attribute follows FINGERPRINT")]
    AttributeAfterFingerprint,
    /// An attribute's value does not decode.
    #[error("attribute {0:#06x} is malformed")]
    MalformedAttribute(u16),
    /// MESSAGE-INTEGRITY was asked for but is absent.
    #[error("no MESSAGE-INTEGRITY")]
    MissingIntegrity,
    /// MESSAGE-INTEGRITY does not verify under the key.
    #[error("MESSAGE-INTEGRITY does not verify")]
    IntegrityMismatch,
    /// FINGERPRINT was asked for but is absent.
    #[error("no FINGERPRINT")]
    MissingFingerprint,
    /// FINGERPRINT does not match the message.
    #[error("FINGERPRINT does not match")]
    FingerprintMismatch,
    /// A built message would not fit the 16-bit length field.
    #[error("the message exceeds the 16-bit length field")]
    TooLong,
}

/// The class of a message: the two C bits of the message type (RFC 8489 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// 0b00: expects a response.
    Request,
    /// 0b01: expects none.
    Indication,
    /// 0b10.
    SuccessResponse,
    /// 0b11.
    ErrorResponse,
}

impl Class {
    fn bits(self) -> u16 {
        match self {
            Class::Request => 0b00,
            Class::Indication => 0b01,
            Class::SuccessResponse => 0b10,
            Class::ErrorResponse => 0b11,
        }
    }

    fn from_bits(bits: u16) -> Class {
        match bits & 0b11 {
            0b00 => Class::Request,
            0b01 => Class::Indication,
            0b10 => Class::SuccessResponse,
            _ => Class::ErrorResponse,
        }
    }
}

/// The method of a message: the 12 M bits of the message type (RFC 8489 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Binding, 0x001: the only method ICE uses (RFC 8445 §7).
    Binding,
    /// Any other method, as its 12-bit number (never 0x001).
    Other(u16),
}

impl Method {
    /// The 12-bit method number.
    pub fn number(self) -> u16 {
        match self {
            Method::Binding => 0x001,
            Method::Other(number) => number & 0x0FFF,
        }
    }

    /// The method with this 12-bit number (higher bits are ignored).
    pub fn from_number(number: u16) -> Method {
        match number & 0x0FFF {
            0x001 => Method::Binding,
            other => Method::Other(other),
        }
    }
}

/// The 14-bit message type: method bits M11–M0 with the class bits C1 and C0 interleaved at
/// bits 8 and 4 (RFC 8489 §5, figure 3).
fn message_type(class: Class, method: Method) -> u16 {
    let m = method.number();
    let c = class.bits();
    (m & 0x000F) | ((m & 0x0070) << 1) | ((m & 0x0F80) << 2) | ((c & 0b01) << 4) | ((c & 0b10) << 7)
}

fn split_message_type(message_type: u16) -> (Class, Method) {
    let t = message_type & 0x3FFF;
    let method = (t & 0x000F) | ((t & 0x00E0) >> 1) | ((t & 0x3E00) >> 2);
    let class = ((t >> 4) & 0b01) | ((t >> 7) & 0b10);
    (Class::from_bits(class), Method::from_number(method))
}

/// The 96-bit transaction id that pairs a response with its request (RFC 8489 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransactionId(pub [u8; 12]);

/// One attribute as it appears on the wire, padding excluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attribute<'a> {
    /// The attribute type.
    pub kind: u16,
    /// The value, without the padding to 4 bytes.
    pub value: &'a [u8],
}

impl Attribute<'_> {
    /// Whether a receiver that does not understand this type must reject the request (types
    /// 0x0000–0x7FFF, RFC 8489 §14).
    pub fn is_comprehension_required(&self) -> bool {
        self.kind < 0x8000
    }
}

/// An ERROR-CODE value (RFC 8489 §14.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode<'a> {
    /// The code, 300 to 699: class × 100 + number.
    pub code: u16,
    /// The reason phrase.
    pub reason: &'a str,
}

/// Error codes used by ICE answers (RFC 8489 §14.8, RFC 8445 §16.2).
pub mod error_code {
    /// The request was malformed (for ICE: no USERNAME or no MESSAGE-INTEGRITY).
    pub const BAD_REQUEST: u16 = 400;
    /// The request did not authenticate.
    pub const UNAUTHENTICATED: u16 = 401;
    /// The request carried comprehension-required attributes the server does not understand.
    pub const UNKNOWN_ATTRIBUTE: u16 = 420;
    /// Both ICE agents claim the same role (RFC 8445 §7.3.1.1).
    pub const ROLE_CONFLICT: u16 = 487;
}

/// The key of the short-term credential mechanism (RFC 8489 §9.1.1) for MESSAGE-INTEGRITY.
#[derive(Clone, Debug)]
pub struct IntegrityKey(hmac::Key);

impl IntegrityKey {
    /// The key for `password`. RFC 8489 §9.1.1 makes the key the password after the
    /// OpaqueString profile (RFC 8265); ICE passwords are ice-chars (letters, digits, '+', '/',
    /// RFC 8839 §5.4), which that profile leaves as they are, so the key is the password's bytes
    /// and no SASLprep/PRECIS processing is done here.
    pub fn short_term(password: &str) -> IntegrityKey {
        IntegrityKey(hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, password.as_bytes()))
    }
}

/// A parsed STUN message borrowing the datagram it came from.
///
/// Parsing checks only the framing. Attribute values are decoded by the accessors, which see
/// the first occurrence of a type (RFC 8489 §14) among the attributes before MESSAGE-INTEGRITY:
/// those after it, except FINGERPRINT, are ignored as §14.5 requires.
#[derive(Clone, Debug)]
pub struct Message<'a> {
    raw: &'a [u8],
    class: Class,
    method: Method,
    transaction_id: TransactionId,
    /// Where the attributes that count end: at MESSAGE-INTEGRITY, else at FINGERPRINT, else at
    /// the end of the message.
    body_end: usize,
    /// Offset of the MESSAGE-INTEGRITY attribute header.
    integrity_at: Option<usize>,
    /// Offset of the FINGERPRINT attribute header.
    fingerprint_at: Option<usize>,
}

/// Bytes an attribute with a `value_len`-byte value takes on the wire: header, value, padding
/// (RFC 8489 §14).
pub fn attribute_wire_len(value_len: usize) -> usize {
    ATTRIBUTE_HEADER_LEN + padded(value_len)
}

/// Bytes of an attribute value with its padding to a multiple of 4 (RFC 8489 §14).
fn padded(len: usize) -> usize {
    len.div_ceil(4) * 4
}

impl<'a> Message<'a> {
    /// Parses `datagram`, which must hold exactly one STUN message.
    ///
    /// Rejects (RFC 8489 §5, §6.3, §14): a datagram shorter than a header, non-zero leading bits,
    /// a wrong magic cookie, a length that is not a multiple of 4 or does not match the datagram,
    /// an attribute overrunning the message, a MESSAGE-INTEGRITY or FINGERPRINT of the wrong
    /// size, and anything after FINGERPRINT.
    pub fn parse(datagram: &'a [u8]) -> Result<Message<'a>, StunError> {
        let mut header = Reader::new(datagram);
        let message_type = header.u16().map_err(|_| StunError::TooShort)?;
        let length = usize::from(header.u16().map_err(|_| StunError::TooShort)?);
        let cookie = header.u32().map_err(|_| StunError::TooShort)?;
        let transaction_id = TransactionId(header.array().map_err(|_| StunError::TooShort)?);
        if message_type & 0xC000 != 0 {
            return Err(StunError::LeadingBitsNotZero);
        }
        if cookie != MAGIC_COOKIE {
            return Err(StunError::WrongMagicCookie(cookie));
        }
        if length % 4 != 0 {
            return Err(StunError::LengthNotMultipleOfFour(length));
        }
        let carried = header.remaining();
        if length != carried {
            return Err(StunError::LengthMismatch { announced: length, carried });
        }

        let mut attributes = header;
        let mut at = HEADER_LEN;
        let mut integrity_at = None;
        let mut fingerprint_at = None;
        while !attributes.is_empty() {
            if fingerprint_at.is_some() {
                return Err(StunError::AttributeAfterFingerprint);
            }
            // The remaining length is a non-zero multiple of 4, so a whole header is there.
            let kind = attributes.u16().map_err(|_| StunError::AttributeOverrun(0))?;
            let len = usize::from(attributes.u16().map_err(|_| StunError::AttributeOverrun(kind))?);
            attributes.take(padded(len)).map_err(|_| StunError::AttributeOverrun(kind))?;
            match kind {
                attr::MESSAGE_INTEGRITY if integrity_at.is_none() => {
                    if len != INTEGRITY_LEN {
                        return Err(StunError::WrongAttributeLength {
                            attribute: kind,
                            length: len,
                            expected: INTEGRITY_LEN,
                        });
                    }
                    integrity_at = Some(at);
                }
                attr::FINGERPRINT => {
                    if len != FINGERPRINT_LEN {
                        return Err(StunError::WrongAttributeLength {
                            attribute: kind,
                            length: len,
                            expected: FINGERPRINT_LEN,
                        });
                    }
                    fingerprint_at = Some(at);
                }
                _ => {}
            }
            at += ATTRIBUTE_HEADER_LEN + padded(len);
        }
        let body_end = integrity_at.or(fingerprint_at).unwrap_or(datagram.len());
        let (class, method) = split_message_type(message_type);
        Ok(Message { raw: datagram, class, method, transaction_id, body_end, integrity_at, fingerprint_at })
    }

    /// The exact bytes the message was parsed from.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The message class.
    pub fn class(&self) -> Class {
        self.class
    }

    /// The message method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The transaction id.
    pub fn transaction_id(&self) -> TransactionId {
        self.transaction_id
    }

    /// The attributes before MESSAGE-INTEGRITY (or before FINGERPRINT when there is no
    /// MESSAGE-INTEGRITY), in order: the ones a receiver acts on.
    pub fn attributes(&self) -> Attributes<'a> {
        Attributes { reader: Reader::new(self.raw.get(HEADER_LEN..self.body_end).unwrap_or_default()) }
    }

    /// The value of the first attribute of type `kind`, if any.
    pub fn attribute(&self, kind: u16) -> Option<&'a [u8]> {
        self.attributes().find(|attribute| attribute.kind == kind).map(|attribute| attribute.value)
    }

    /// The comprehension-required attribute types this module does not understand, in order of
    /// appearance (RFC 8489 §6.3.1: a server answers such a request with 420 listing them).
    pub fn unknown_comprehension_required(&self) -> impl Iterator<Item = u16> + 'a {
        self.attributes()
            .filter(|attribute| {
                attribute.is_comprehension_required() && !attr::UNDERSTOOD.contains(&attribute.kind)
            })
            .map(|attribute| attribute.kind)
    }

    /// USERNAME, as UTF-8 (RFC 8489 §14.3).
    pub fn username(&self) -> Result<Option<&'a str>, StunError> {
        self.text(attr::USERNAME)
    }

    /// SOFTWARE, as UTF-8 (RFC 8489 §14.14).
    pub fn software(&self) -> Result<Option<&'a str>, StunError> {
        self.text(attr::SOFTWARE)
    }

    /// ERROR-CODE (RFC 8489 §14.8): class 3–6 and number 0–99, then the reason phrase.
    pub fn error_code(&self) -> Result<Option<ErrorCode<'a>>, StunError> {
        let Some(value) = self.attribute(attr::ERROR_CODE) else { return Ok(None) };
        let malformed = StunError::MalformedAttribute(attr::ERROR_CODE);
        let mut reader = Reader::new(value);
        // 21 reserved bits, then a 3-bit class and an 8-bit number.
        let _reserved = reader.u16().map_err(|_| malformed)?;
        let class = u16::from(reader.u8().map_err(|_| malformed)? & 0b111);
        let number = u16::from(reader.u8().map_err(|_| malformed)?);
        if !(3..=6).contains(&class) || number > 99 {
            return Err(malformed);
        }
        let reason = std::str::from_utf8(reader.rest()).map_err(|_| malformed)?;
        Ok(Some(ErrorCode { code: class * 100 + number, reason }))
    }

    /// UNKNOWN-ATTRIBUTES: a list of 16-bit types (RFC 8489 §14.9).
    pub fn unknown_attributes(&self) -> Result<Option<Vec<u16>>, StunError> {
        let Some(value) = self.attribute(attr::UNKNOWN_ATTRIBUTES) else { return Ok(None) };
        if value.len() % 2 != 0 {
            return Err(StunError::MalformedAttribute(attr::UNKNOWN_ATTRIBUTES));
        }
        Ok(Some(value.chunks_exact(2).map(|pair| u16::from_be_bytes([pair[0], pair[1]])).collect()))
    }

    /// XOR-MAPPED-ADDRESS (RFC 8489 §14.2): the port XORed with the cookie's top 16 bits, an
    /// IPv4 address with the cookie, an IPv6 address with the cookie and the transaction id.
    pub fn xor_mapped_address(&self) -> Result<Option<SocketAddr>, StunError> {
        let Some(value) = self.attribute(attr::XOR_MAPPED_ADDRESS) else { return Ok(None) };
        let malformed = StunError::MalformedAttribute(attr::XOR_MAPPED_ADDRESS);
        let mut reader = Reader::new(value);
        let _reserved = reader.u8().map_err(|_| malformed)?;
        let family = reader.u8().map_err(|_| malformed)?;
        let port = reader.u16().map_err(|_| malformed)? ^ (MAGIC_COOKIE >> 16) as u16;
        let mask = xor_mask(self.transaction_id);
        let ip = match family {
            0x01 => {
                let mut octets: [u8; 4] = reader.array().map_err(|_| malformed)?;
                octets.iter_mut().zip(mask).for_each(|(octet, m)| *octet ^= m);
                IpAddr::V4(Ipv4Addr::from(octets))
            }
            0x02 => {
                let mut octets: [u8; 16] = reader.array().map_err(|_| malformed)?;
                octets.iter_mut().zip(mask).for_each(|(octet, m)| *octet ^= m);
                IpAddr::V6(Ipv6Addr::from(octets))
            }
            _ => return Err(malformed),
        };
        reader.finish().map_err(|_| malformed)?;
        Ok(Some(SocketAddr::new(ip, port)))
    }

    /// PRIORITY (RFC 8445 §7.1.1).
    pub fn priority(&self) -> Result<Option<u32>, StunError> {
        self.fixed(attr::PRIORITY).map(|value| value.map(u32::from_be_bytes))
    }

    /// Whether USE-CANDIDATE is present (RFC 8445 §7.1.2); it has no value.
    pub fn use_candidate(&self) -> bool {
        self.attribute(attr::USE_CANDIDATE).is_some()
    }

    /// META-DTLS-IN-STUN: the embedded DTLS datagram, if present (draft-hancke-webrtc-sped).
    /// The value is taken as it is: whether it is DTLS is the caller's question.
    pub fn dtls_in_stun(&self) -> Option<&'a [u8]> {
        self.attribute(attr::META_DTLS_IN_STUN)
    }

    /// META-DTLS-IN-STUN-ACK: the CRC-32s it lists, if present (possibly none). A value that
    /// is not a multiple of 4 bytes or lists more than [`MAX_DTLS_IN_STUN_ACKS`] is malformed:
    /// the draft and pion discard one over 16 bytes, and Chromium sends at most 4.
    pub fn dtls_in_stun_ack(&self) -> Result<Option<Vec<u32>>, StunError> {
        let Some(value) = self.attribute(attr::META_DTLS_IN_STUN_ACK) else { return Ok(None) };
        if value.len() % 4 != 0 || value.len() > 4 * MAX_DTLS_IN_STUN_ACKS {
            return Err(StunError::MalformedAttribute(attr::META_DTLS_IN_STUN_ACK));
        }
        Ok(Some(
            value.chunks_exact(4).map(|crc| u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]])).collect(),
        ))
    }

    /// The tiebreaker of ICE-CONTROLLED (RFC 8445 §7.1.3).
    pub fn ice_controlled(&self) -> Result<Option<u64>, StunError> {
        self.fixed(attr::ICE_CONTROLLED).map(|value| value.map(u64::from_be_bytes))
    }

    /// The tiebreaker of ICE-CONTROLLING (RFC 8445 §7.1.3).
    pub fn ice_controlling(&self) -> Result<Option<u64>, StunError> {
        self.fixed(attr::ICE_CONTROLLING).map(|value| value.map(u64::from_be_bytes))
    }

    /// The MESSAGE-INTEGRITY tag, if present.
    pub fn message_integrity(&self) -> Option<&'a [u8]> {
        let start = self.integrity_at? + ATTRIBUTE_HEADER_LEN;
        self.raw.get(start..start + INTEGRITY_LEN)
    }

    /// The FINGERPRINT value, if present.
    pub fn fingerprint(&self) -> Option<u32> {
        let start = self.fingerprint_at? + ATTRIBUTE_HEADER_LEN;
        let bytes = self.raw.get(start..start + FINGERPRINT_LEN)?;
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    }

    /// Verifies MESSAGE-INTEGRITY under `key`, in constant time (`ring::hmac::verify`).
    ///
    /// The HMAC covers the message up to MESSAGE-INTEGRITY with the header length set as if
    /// MESSAGE-INTEGRITY were the last attribute (RFC 8489 §14.5).
    pub fn verify_integrity(&self, key: &IntegrityKey) -> Result<(), StunError> {
        let at = self.integrity_at.ok_or(StunError::MissingIntegrity)?;
        let tag = self.message_integrity().ok_or(StunError::MissingIntegrity)?;
        let covered = self.with_length_ending_after(at, INTEGRITY_LEN)?;
        hmac::verify(&key.0, &covered, tag).map_err(|_| StunError::IntegrityMismatch)
    }

    /// Verifies FINGERPRINT: CRC-32 of the message before it, with the header length set to end
    /// after it, XOR 0x5354554E (RFC 8489 §14.7).
    pub fn verify_fingerprint(&self) -> Result<(), StunError> {
        let at = self.fingerprint_at.ok_or(StunError::MissingFingerprint)?;
        let received = self.fingerprint().ok_or(StunError::MissingFingerprint)?;
        let covered = self.with_length_ending_after(at, FINGERPRINT_LEN)?;
        if fingerprint_of(&covered) == received {
            Ok(())
        } else {
            Err(StunError::FingerprintMismatch)
        }
    }

    /// A copy of the message up to the attribute at `at`, its header length patched to end
    /// after that attribute's `value_len`-byte value.
    fn with_length_ending_after(&self, at: usize, value_len: usize) -> Result<Vec<u8>, StunError> {
        let mut covered = self.raw.get(..at).ok_or(StunError::TooShort)?.to_vec();
        let length = u16::try_from(at + ATTRIBUTE_HEADER_LEN + value_len - HEADER_LEN)
            .map_err(|_| StunError::TooLong)?;
        set_length_field(&mut covered, length);
        Ok(covered)
    }

    fn text(&self, kind: u16) -> Result<Option<&'a str>, StunError> {
        self.attribute(kind)
            .map(|value| std::str::from_utf8(value).map_err(|_| StunError::MalformedAttribute(kind)))
            .transpose()
    }

    fn fixed<const N: usize>(&self, kind: u16) -> Result<Option<[u8; N]>, StunError> {
        self.attribute(kind)
            .map(|value| {
                value.try_into().map_err(|_| StunError::WrongAttributeLength {
                    attribute: kind,
                    length: value.len(),
                    expected: N,
                })
            })
            .transpose()
    }
}

/// The attributes of a [`Message`] that count; see [`Message::attributes`].
#[derive(Clone, Debug)]
pub struct Attributes<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for Attributes<'a> {
    type Item = Attribute<'a>;

    fn next(&mut self) -> Option<Attribute<'a>> {
        // Parsing checked the framing, so these reads fail only at the end.
        let kind = self.reader.u16().ok()?;
        let len = usize::from(self.reader.u16().ok()?);
        let value = self.reader.take(len).ok()?;
        self.reader.skip_padding(padded(len) - len);
        Some(Attribute { kind, value })
    }
}

/// The cookie followed by the transaction id: XOR-MAPPED-ADDRESS's mask (RFC 8489 §14.2).
fn xor_mask(transaction_id: TransactionId) -> [u8; 16] {
    let mut mask = [0u8; 16];
    mask[..4].copy_from_slice(&MAGIC_COOKIE.to_be_bytes());
    mask[4..].copy_from_slice(&transaction_id.0);
    mask
}

/// The CRC-32 that META-DTLS-IN-STUN-ACK lists for a DTLS datagram: the IEEE CRC of RFC 1952
/// over the whole datagram, i.e. FINGERPRINT's without the XOR (draft-hancke-webrtc-sped).
pub fn dtls_datagram_crc(datagram: &[u8]) -> u32 {
    crc32fast::hash(datagram)
}

fn fingerprint_of(covered: &[u8]) -> u32 {
    crc32fast::hash(covered) ^ FINGERPRINT_XOR
}

/// Writes the header's length field; `message` holds at least the header.
fn set_length_field(message: &mut [u8], length: u16) {
    if let Some(field) = message.get_mut(2..4) {
        field.copy_from_slice(&length.to_be_bytes());
    }
}

/// Writes a STUN message: header, attributes in the order added, then optionally
/// MESSAGE-INTEGRITY and FINGERPRINT, which must come last and in that order.
///
/// Methods take and return the builder so a message reads as one chain; [`Self::into_bytes`]
/// reports a message that does not fit the length field or adds attributes after FINGERPRINT.
#[derive(Clone, Debug)]
pub struct MessageBuilder {
    bytes: Vec<u8>,
    transaction_id: TransactionId,
    error: Option<StunError>,
    fingerprinted: bool,
}

impl MessageBuilder {
    /// A message of `class` and `method` with no attributes yet.
    pub fn new(class: Class, method: Method, transaction_id: TransactionId) -> MessageBuilder {
        let mut bytes = Vec::with_capacity(128);
        put_u16(&mut bytes, message_type(class, method));
        put_u16(&mut bytes, 0);
        put_u32(&mut bytes, MAGIC_COOKIE);
        bytes.extend_from_slice(&transaction_id.0);
        MessageBuilder { bytes, transaction_id, error: None, fingerprinted: false }
    }

    /// Appends an attribute of any type, zero-padded to 4 bytes.
    pub fn attribute(mut self, kind: u16, value: &[u8]) -> MessageBuilder {
        if self.fingerprinted {
            self.error.get_or_insert(StunError::AttributeAfterFingerprint);
        }
        let Ok(len) = u16::try_from(value.len()) else {
            self.error.get_or_insert(StunError::TooLong);
            return self;
        };
        put_u16(&mut self.bytes, kind);
        put_u16(&mut self.bytes, len);
        self.bytes.extend_from_slice(value);
        self.bytes.resize(self.bytes.len() + padded(value.len()) - value.len(), 0);
        if self.bytes.len() - HEADER_LEN > MAX_BODY_LEN {
            self.error.get_or_insert(StunError::TooLong);
        }
        self
    }

    /// USERNAME.
    pub fn username(self, username: &str) -> MessageBuilder {
        self.attribute(attr::USERNAME, username.as_bytes())
    }

    /// SOFTWARE.
    pub fn software(self, software: &str) -> MessageBuilder {
        self.attribute(attr::SOFTWARE, software.as_bytes())
    }

    /// ERROR-CODE with `code` (300–699; class = code / 100, number = code % 100) and `reason`.
    pub fn error_code(self, code: u16, reason: &str) -> MessageBuilder {
        let mut value = Vec::with_capacity(4 + reason.len());
        put_u16(&mut value, 0);
        value.push((code / 100 % 8) as u8);
        value.push((code % 100) as u8);
        value.extend_from_slice(reason.as_bytes());
        self.attribute(attr::ERROR_CODE, &value)
    }

    /// UNKNOWN-ATTRIBUTES listing `kinds`.
    pub fn unknown_attributes(self, kinds: &[u16]) -> MessageBuilder {
        let mut value = Vec::with_capacity(2 * kinds.len());
        kinds.iter().for_each(|&kind| put_u16(&mut value, kind));
        self.attribute(attr::UNKNOWN_ATTRIBUTES, &value)
    }

    /// XOR-MAPPED-ADDRESS carrying `address` (RFC 8489 §14.2).
    pub fn xor_mapped_address(self, address: SocketAddr) -> MessageBuilder {
        let mask = xor_mask(self.transaction_id);
        let mut value = Vec::with_capacity(20);
        value.push(0);
        match address.ip() {
            IpAddr::V4(ip) => {
                value.push(0x01);
                put_u16(&mut value, address.port() ^ (MAGIC_COOKIE >> 16) as u16);
                value.extend(ip.octets().iter().zip(mask).map(|(octet, m)| octet ^ m));
            }
            IpAddr::V6(ip) => {
                value.push(0x02);
                put_u16(&mut value, address.port() ^ (MAGIC_COOKIE >> 16) as u16);
                value.extend(ip.octets().iter().zip(mask).map(|(octet, m)| octet ^ m));
            }
        }
        self.attribute(attr::XOR_MAPPED_ADDRESS, &value)
    }

    /// PRIORITY.
    pub fn priority(self, priority: u32) -> MessageBuilder {
        self.attribute(attr::PRIORITY, &priority.to_be_bytes())
    }

    /// USE-CANDIDATE.
    pub fn use_candidate(self) -> MessageBuilder {
        self.attribute(attr::USE_CANDIDATE, &[])
    }

    /// ICE-CONTROLLED with the sender's tiebreaker.
    pub fn ice_controlled(self, tiebreaker: u64) -> MessageBuilder {
        let mut value = Vec::with_capacity(8);
        put_u64(&mut value, tiebreaker);
        self.attribute(attr::ICE_CONTROLLED, &value)
    }

    /// ICE-CONTROLLING with the sender's tiebreaker.
    pub fn ice_controlling(self, tiebreaker: u64) -> MessageBuilder {
        let mut value = Vec::with_capacity(8);
        put_u64(&mut value, tiebreaker);
        self.attribute(attr::ICE_CONTROLLING, &value)
    }

    /// META-DTLS-IN-STUN carrying one DTLS datagram (draft-hancke-webrtc-sped).
    pub fn dtls_in_stun(self, datagram: &[u8]) -> MessageBuilder {
        self.attribute(attr::META_DTLS_IN_STUN, datagram)
    }

    /// META-DTLS-IN-STUN-ACK listing `crcs`, which may be empty: an empty list says "I speak
    /// SPED" before anything is to be acknowledged (draft-hancke-webrtc-sped). Only the last
    /// [`MAX_DTLS_IN_STUN_ACKS`] are written.
    pub fn dtls_in_stun_ack(self, crcs: &[u32]) -> MessageBuilder {
        let crcs = &crcs[crcs.len().saturating_sub(MAX_DTLS_IN_STUN_ACKS)..];
        let value: Vec<u8> = crcs.iter().flat_map(|crc| crc.to_be_bytes()).collect();
        self.attribute(attr::META_DTLS_IN_STUN_ACK, &value)
    }

    /// Appends MESSAGE-INTEGRITY under `key`: HMAC-SHA1 over the message so far with the
    /// header length already counting this attribute (RFC 8489 §14.5).
    pub fn message_integrity(mut self, key: &IntegrityKey) -> MessageBuilder {
        self.patch_length(ATTRIBUTE_HEADER_LEN + INTEGRITY_LEN);
        let tag = hmac::sign(&key.0, &self.bytes);
        self.attribute(attr::MESSAGE_INTEGRITY, tag.as_ref())
    }

    /// Appends FINGERPRINT over the message so far, with the header length already counting
    /// this attribute (RFC 8489 §14.7). Nothing may be added after it.
    pub fn fingerprint(mut self) -> MessageBuilder {
        self.patch_length(ATTRIBUTE_HEADER_LEN + FINGERPRINT_LEN);
        let crc = fingerprint_of(&self.bytes);
        let sealed = self.attribute(attr::FINGERPRINT, &crc.to_be_bytes());
        MessageBuilder { fingerprinted: true, ..sealed }
    }

    /// The finished message.
    pub fn into_bytes(mut self) -> Result<Vec<u8>, StunError> {
        self.patch_length(0);
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.bytes),
        }
    }

    /// Sets the header length to the attributes so far plus `more` bytes.
    fn patch_length(&mut self, more: usize) {
        let body = self.bytes.len() - HEADER_LEN + more;
        match u16::try_from(body) {
            Ok(length) if body <= MAX_BODY_LEN => set_length_field(&mut self.bytes, length),
            _ => {
                self.error.get_or_insert(StunError::TooLong);
            }
        }
    }
}

/// The fuzz target's body: parses `data`, runs every accessor and both checks, then rebuilds
/// the message from its parsed fields, seals it, and parses that again. Panics only if the
/// rebuilt message parses differently or fails its own seals.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let key = IntegrityKey::short_term("fuzzing-password-0123456789");
    let Ok(message) = Message::parse(data) else { return };
    let accessors = (
        message.username(),
        message.software(),
        message.error_code(),
        message.unknown_attributes(),
        message.xor_mapped_address(),
        message.priority(),
        message.use_candidate(),
        message.ice_controlled(),
        message.ice_controlling(),
        message.dtls_in_stun(),
        message.dtls_in_stun_ack(),
    );
    let _ = (
        message.message_integrity(),
        message.fingerprint(),
        message.unknown_comprehension_required().count(),
    );
    let _ = (message.verify_integrity(&key), message.verify_fingerprint());

    let rebuilt = message
        .attributes()
        .fold(
            MessageBuilder::new(message.class(), message.method(), message.transaction_id()),
            |builder, attribute| builder.attribute(attribute.kind, attribute.value),
        )
        .message_integrity(&key)
        .fingerprint()
        .into_bytes();
    // Only a message already near 64 KiB can fail to take the two seals.
    let Ok(rebuilt) = rebuilt else { return };
    let again = Message::parse(&rebuilt).expect("a built message parses");
    assert_eq!(
        (again.class(), again.method(), again.transaction_id()),
        (message.class(), message.method(), message.transaction_id())
    );
    assert!(again.attributes().eq(message.attributes()), "attributes changed in the round trip");
    let accessors_again = (
        again.username(),
        again.software(),
        again.error_code(),
        again.unknown_attributes(),
        again.xor_mapped_address(),
        again.priority(),
        again.use_candidate(),
        again.ice_controlled(),
        again.ice_controlling(),
        again.dtls_in_stun(),
        again.dtls_in_stun_ack(),
    );
    assert_eq!(accessors_again, accessors);
    assert!(again.unknown_comprehension_required().eq(message.unknown_comprehension_required()));
    assert_eq!(again.verify_integrity(&key), Ok(()));
    assert_eq!(again.verify_fingerprint(), Ok(()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_bits_interleave_with_the_method_as_figure_3_draws_them() {
        // Binding: request 0x0001, indication 0x0011, success 0x0101, error 0x0111 (§5, §18.2).
        assert_eq!(message_type(Class::Request, Method::Binding), 0x0001);
        assert_eq!(message_type(Class::Indication, Method::Binding), 0x0011);
        assert_eq!(message_type(Class::SuccessResponse, Method::Binding), 0x0101);
        assert_eq!(message_type(Class::ErrorResponse, Method::Binding), 0x0111);
        // All twelve method bits set, class 0b11: every bit of the 14-bit type is set.
        assert_eq!(message_type(Class::ErrorResponse, Method::Other(0x0FFF)), 0x3FFF);
        // Method bits alone leave the C0 (bit 4) and C1 (bit 8) positions clear.
        assert_eq!(message_type(Class::Request, Method::Other(0x0FFF)), 0x3EEF);
        for number in [0x000, 0x001, 0x002, 0x07F, 0x080, 0xABC, 0xFFF] {
            for class in [Class::Request, Class::Indication, Class::SuccessResponse, Class::ErrorResponse] {
                let method = Method::from_number(number);
                assert_eq!(split_message_type(message_type(class, method)), (class, method));
            }
        }
    }

    #[test]
    fn padding_rounds_up_to_four() {
        assert_eq!([0, 1, 2, 3, 4, 5, 8, 9].map(padded), [0, 4, 4, 4, 4, 8, 8, 12]);
    }

    /// Chromium 156's first check with `WebRTC-IceHandshakeDtls` on and PQC off, keyed with the
    /// answer's `a=ice-pwd:srvpasswordsrvpassword12` (/work/notes/dtls_in_stun.md §1.6).
    const CHROMIUM_SPED_CHECK: &str = "000101302112a4422f577a513942694b64674c390006000d73727675667261673a4d77397a000000c0570004000003e7802a0008d40c5e759d1aafe2002400046e001effc0710000c07000d816feff000000000000000000cb010000bf00000000000000bffefd52d2b12bec20b389efcae7495c65b40b3c88900499b50cfe4552cb7b5c42da980000001c130113021303c02bc02fcca9cca8c009c013c00ac014009c002f003501000079002d00020101000b00020100002b000504fefcfefdff01000100000e0009000600010008000700003300260024001d00208040210f182fe9a3203bd9ce9f929ad02930afc5ff0c9d5e193ca2eeba77d00c000a00080006001d0017001800170000000d0014001204030804040105030805050108060601020100080014062c933baf37e7d67a8b4344f9c36568363327c78028000471b2a7f1";

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn chromiums_first_sped_check_verifies_and_carries_an_empty_ack_and_its_client_hello() {
        let bytes = unhex(CHROMIUM_SPED_CHECK);
        let check = Message::parse(&bytes).unwrap();
        assert_eq!((check.class(), check.method()), (Class::Request, Method::Binding));
        assert_eq!(check.username(), Ok(Some("srvufrag:Mw9z")));
        assert_eq!(check.verify_integrity(&IntegrityKey::short_term("srvpasswordsrvpassword12")), Ok(()));
        assert_eq!(check.verify_fingerprint(), Ok(()));
        assert_eq!(check.fingerprint(), Some(0x71b2_a7f1));
        // Comprehension-optional: nothing a 420 would list.
        assert_eq!(check.unknown_comprehension_required().count(), 0);
        assert_eq!(check.dtls_in_stun_ack(), Ok(Some(vec![])), "present and empty: 'I speak SPED'");
        let hello = check.dtls_in_stun().expect("the ClientHello rides the check");
        assert_eq!(hello.len(), 216);
        assert_eq!((hello[0], &hello[1..3]), (22, &[0xfe, 0xff][..]), "a DTLS handshake record");
        assert_eq!(hello[13], 1, "a ClientHello");
        assert_eq!(dtls_datagram_crc(hello), 0x399e_425c);
    }

    #[test]
    fn dtls_in_stun_attributes_round_trip_padded_and_before_the_seals() {
        let key = IntegrityKey::short_term("a-password-of-22-chars");
        for len in [0usize, 13, 563, 900, 1200] {
            let datagram: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for acks in [&[][..], &[1][..], &[1, 2, 3, 4][..]] {
                let bytes =
                    MessageBuilder::new(Class::SuccessResponse, Method::Binding, TransactionId([5; 12]))
                        .dtls_in_stun_ack(acks)
                        .dtls_in_stun(&datagram)
                        .message_integrity(&key)
                        .fingerprint()
                        .into_bytes()
                        .unwrap();
                let message = Message::parse(&bytes).unwrap();
                assert_eq!(message.dtls_in_stun_ack(), Ok(Some(acks.to_vec())));
                assert_eq!(message.dtls_in_stun(), Some(&datagram[..]));
                assert_eq!(message.verify_integrity(&key), Ok(()));
                assert_eq!(message.verify_fingerprint(), Ok(()));
            }
        }
        // Only the newest four are written.
        let bytes = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([5; 12]))
            .dtls_in_stun_ack(&[1, 2, 3, 4, 5, 6])
            .into_bytes()
            .unwrap();
        assert_eq!(Message::parse(&bytes).unwrap().dtls_in_stun_ack(), Ok(Some(vec![3, 4, 5, 6])));
        // Absent: neither.
        let bare = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([5; 12]))
            .into_bytes()
            .unwrap();
        let bare = Message::parse(&bare).unwrap();
        assert_eq!((bare.dtls_in_stun(), bare.dtls_in_stun_ack()), (None, Ok(None)));
    }

    #[test]
    fn malformed_or_overlong_ack_lists_are_refused() {
        for value in [&[0u8; 3][..], &[0; 5][..], &[0; 20][..], &[0; 400][..]] {
            let bytes = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([5; 12]))
                .attribute(attr::META_DTLS_IN_STUN_ACK, value)
                .into_bytes()
                .unwrap();
            assert_eq!(
                Message::parse(&bytes).unwrap().dtls_in_stun_ack(),
                Err(StunError::MalformedAttribute(attr::META_DTLS_IN_STUN_ACK)),
                "{} bytes",
                value.len()
            );
        }
    }
}
