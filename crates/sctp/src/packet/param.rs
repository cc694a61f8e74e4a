//! INIT/INIT-ACK parameters (RFC 9260 §3.3.2, RFC 5061 §4.2.7) and error causes (§3.3.10).

use std::net::{Ipv4Addr, Ipv6Addr};

use fastshake_core::codec::{put_u16, put_u32, Reader};

use super::{pad, padded, FieldExt, ParseError};

/// IPv4 address parameter.
pub const PARAM_IPV4: u16 = 5;
/// IPv6 address parameter.
pub const PARAM_IPV6: u16 = 6;
/// State cookie.
pub const PARAM_STATE_COOKIE: u16 = 7;
/// Unrecognized parameter (in INIT-ACK).
pub const PARAM_UNRECOGNIZED: u16 = 8;
/// Cookie preservative.
pub const PARAM_COOKIE_PRESERVATIVE: u16 = 9;
/// Supported address types.
pub const PARAM_SUPPORTED_ADDRESS_TYPES: u16 = 12;
/// Supported Extensions (RFC 5061 §4.2.7): the chunk types of the extensions the sender
/// speaks. High bits `10`: skipped silently by a peer that does not know it.
pub const PARAM_SUPPORTED_EXTENSIONS: u16 = 0x8008;
/// Forward-TSN-Supported (RFC 3758 §3.3.1): the sender speaks PR-SCTP. Empty. High bits `11`:
/// a peer without PR-SCTP reports it back as unrecognised.
pub const PARAM_FORWARD_TSN_SUPPORTED: u16 = 0xC000;
/// ALT-COOKIE (seed 004). High bits `10`: skip silently if unknown.
pub const PARAM_ALT_COOKIE: u16 = 0xB007;
/// ALT-DATA: DATA chunks inside an INIT. High bits `10`.
pub const PARAM_ALT_DATA: u16 = 0xB008;
/// ALT-SACK: a SACK chunk inside an INIT-ACK. High bits `10`.
pub const PARAM_ALT_SACK: u16 = 0xB009;

/// Invalid Stream Identifier.
pub const CAUSE_INVALID_STREAM: u16 = 1;
/// Stale Cookie Error.
pub const CAUSE_STALE_COOKIE: u16 = 3;
/// Unrecognized Chunk Type.
pub const CAUSE_UNRECOGNIZED_CHUNK: u16 = 6;
/// Unrecognized Parameters.
pub const CAUSE_UNRECOGNIZED_PARAMS: u16 = 8;
/// No User Data.
pub const CAUSE_NO_USER_DATA: u16 = 9;
/// User-Initiated Abort.
pub const CAUSE_USER_ABORT: u16 = 12;
/// Protocol Violation.
pub const CAUSE_PROTOCOL_VIOLATION: u16 = 13;
/// ALT-COOKIE required (seed 004): carries a fresh cookie.
pub const CAUSE_ALT_COOKIE_REQUIRED: u16 = 0xB007;

/// What to do with a parameter of an unknown type, from its two high bits (RFC 9260 §3.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownParamAction {
    /// 00: stop processing parameters of this chunk.
    Stop,
    /// 01: stop and report it.
    StopAndReport,
    /// 10: skip it and go on.
    Skip,
    /// 11: skip, go on and report it.
    SkipAndReport,
}

impl UnknownParamAction {
    /// The action the high bits of `param_type` ask for.
    pub fn of(param_type: u16) -> Self {
        match param_type >> 14 {
            0 => UnknownParamAction::Stop,
            1 => UnknownParamAction::StopAndReport,
            2 => UnknownParamAction::Skip,
            _ => UnknownParamAction::SkipAndReport,
        }
    }

    /// Whether the peer is told about the parameter.
    pub fn reports(self) -> bool {
        matches!(self, UnknownParamAction::StopAndReport | UnknownParamAction::SkipAndReport)
    }

    /// Whether parameters after it are still processed.
    pub fn continues(self) -> bool {
        matches!(self, UnknownParamAction::Skip | UnknownParamAction::SkipAndReport)
    }
}

/// One INIT/INIT-ACK parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// An IPv4 address of the sender.
    Ipv4Address(Ipv4Addr),
    /// An IPv6 address of the sender.
    Ipv6Address(Ipv6Addr),
    /// The state cookie (INIT-ACK).
    StateCookie(Vec<u8>),
    /// A parameter of the INIT the sender did not recognise (the whole TLV, INIT-ACK).
    UnrecognizedParameter(Vec<u8>),
    /// Cookie preservative: suggested lifetime increment in milliseconds.
    CookiePreservative(u32),
    /// Supported address types.
    SupportedAddressTypes(Vec<u16>),
    /// Supported Extensions: one chunk type per byte.
    SupportedExtensions(Vec<u8>),
    /// Forward-TSN-Supported (RFC 3758 §3.3.1). One with a value is kept as
    /// [`Param::Unknown`]: the parameter has none.
    ForwardTsnSupported,
    /// ALT-COOKIE, possibly empty.
    AltCookie(Vec<u8>),
    /// ALT-DATA: encoded DATA chunks.
    AltData(Vec<u8>),
    /// ALT-SACK: an encoded SACK chunk.
    AltSack(Vec<u8>),
    /// A parameter type this codec does not implement.
    Unknown {
        /// Parameter type.
        param_type: u16,
        /// Parameter value.
        value: Vec<u8>,
    },
}

impl Param {
    /// The parameter type.
    pub fn param_type(&self) -> u16 {
        match self {
            Param::Ipv4Address(_) => PARAM_IPV4,
            Param::Ipv6Address(_) => PARAM_IPV6,
            Param::StateCookie(_) => PARAM_STATE_COOKIE,
            Param::UnrecognizedParameter(_) => PARAM_UNRECOGNIZED,
            Param::CookiePreservative(_) => PARAM_COOKIE_PRESERVATIVE,
            Param::SupportedAddressTypes(_) => PARAM_SUPPORTED_ADDRESS_TYPES,
            Param::SupportedExtensions(_) => PARAM_SUPPORTED_EXTENSIONS,
            Param::ForwardTsnSupported => PARAM_FORWARD_TSN_SUPPORTED,
            Param::AltCookie(_) => PARAM_ALT_COOKIE,
            Param::AltData(_) => PARAM_ALT_DATA,
            Param::AltSack(_) => PARAM_ALT_SACK,
            Param::Unknown { param_type, .. } => *param_type,
        }
    }

    /// Whether this parameter belongs to the alternative handshake.
    pub fn is_alt(&self) -> bool {
        matches!(self, Param::AltCookie(_) | Param::AltData(_) | Param::AltSack(_))
    }

    fn decode(param_type: u16, value: &[u8]) -> Result<Param, ParseError> {
        let mut r = Reader::new(value);
        Ok(match param_type {
            PARAM_IPV4 => {
                let b: [u8; 4] = value.try_into().map_err(|_| ParseError::BadLength("IPv4 address"))?;
                Param::Ipv4Address(Ipv4Addr::from(b))
            }
            PARAM_IPV6 => {
                let b: [u8; 16] = value.try_into().map_err(|_| ParseError::BadLength("IPv6 address"))?;
                Param::Ipv6Address(Ipv6Addr::from(b))
            }
            PARAM_STATE_COOKIE => Param::StateCookie(value.to_vec()),
            PARAM_UNRECOGNIZED => Param::UnrecognizedParameter(value.to_vec()),
            PARAM_COOKIE_PRESERVATIVE => Param::CookiePreservative(r.u32().field("cookie preservative")?),
            PARAM_SUPPORTED_ADDRESS_TYPES => {
                let mut types = Vec::new();
                while r.remaining() >= 2 {
                    types.push(r.u16().field("supported address types")?);
                }
                Param::SupportedAddressTypes(types)
            }
            PARAM_SUPPORTED_EXTENSIONS => Param::SupportedExtensions(value.to_vec()),
            PARAM_FORWARD_TSN_SUPPORTED if value.is_empty() => Param::ForwardTsnSupported,
            PARAM_ALT_COOKIE => Param::AltCookie(value.to_vec()),
            PARAM_ALT_DATA => Param::AltData(value.to_vec()),
            PARAM_ALT_SACK => Param::AltSack(value.to_vec()),
            _ => Param::Unknown { param_type, value: value.to_vec() },
        })
    }

    /// The value as it travels (without type, length and padding).
    pub fn value_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        match self {
            Param::StateCookie(v)
            | Param::UnrecognizedParameter(v)
            | Param::SupportedExtensions(v)
            | Param::AltCookie(v)
            | Param::AltData(v)
            | Param::AltSack(v)
            | Param::Unknown { value: v, .. } => Cow::Borrowed(v),
            other => {
                let mut out = Vec::new();
                other.encode_value(&mut out);
                Cow::Owned(out)
            }
        }
    }

    fn encode_value(&self, out: &mut Vec<u8>) {
        match self {
            Param::Ipv4Address(a) => out.extend_from_slice(&a.octets()),
            Param::Ipv6Address(a) => out.extend_from_slice(&a.octets()),
            Param::CookiePreservative(ms) => put_u32(out, *ms),
            Param::ForwardTsnSupported => {}
            Param::SupportedAddressTypes(types) => {
                for t in types {
                    put_u16(out, *t);
                }
            }
            Param::StateCookie(v)
            | Param::UnrecognizedParameter(v)
            | Param::SupportedExtensions(v)
            | Param::AltCookie(v)
            | Param::AltData(v)
            | Param::AltSack(v)
            | Param::Unknown { value: v, .. } => out.extend_from_slice(v),
        }
    }

    /// Appends the parameter, padded to four bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        pad(out);
        put_tlv(out, self.param_type(), |out| self.encode_value(out));
        pad(out);
    }

    /// Parses one parameter from the front of `buf`; returns it and the bytes it took.
    pub fn parse(buf: &[u8]) -> Result<(Param, usize), ParseError> {
        let mut r = Reader::new(buf);
        let p = read_param(&mut r)?;
        Ok((p, buf.len() - r.remaining()))
    }

    /// The parameter as its own TLV (for an Unrecognized Parameter report).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// One type-length-value (a parameter or an error cause): its type and its value, the padding
/// after it skipped.
/// Appends a type-length-value parameter (RFC 9260 §3.2.1) whose value `value` writes, its
/// length patched in afterwards; no padding (the caller pads where the next one starts).
pub(super) fn put_tlv(out: &mut Vec<u8>, kind: u16, value: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    put_u16(out, kind);
    out.extend_from_slice(&[0, 0]);
    value(out);
    let length = u16::try_from(out.len() - start).unwrap_or(u16::MAX);
    out[start + 2..start + 4].copy_from_slice(&length.to_be_bytes());
}

pub(super) fn read_tlv<'a>(r: &mut Reader<'a>, what: &'static str) -> Result<(u16, &'a [u8]), ParseError> {
    let [t0, t1, l0, l1] = r.array().field(what)?;
    let (kind, length) = (u16::from_be_bytes([t0, t1]), usize::from(u16::from_be_bytes([l0, l1])));
    if length < 4 {
        return Err(ParseError::BadLength(what));
    }
    let value = r.take(length - 4).field(what)?;
    r.skip_padding(padded(length) - length);
    Ok((kind, value))
}

fn read_param(r: &mut Reader<'_>) -> Result<Param, ParseError> {
    let (kind, value) = read_tlv(r, "parameter")?;
    Param::decode(kind, value)
}

/// Parses the parameters filling `buf`.
pub fn parse_params(buf: &[u8]) -> Result<Vec<Param>, ParseError> {
    let mut r = Reader::new(buf);
    let mut params = Vec::new();
    while !r.is_empty() {
        params.push(read_param(&mut r)?);
    }
    Ok(params)
}

/// Encodes parameters; the last one's padding is left to the chunk, whose length does not
/// count it (RFC 9260 §3.2).
pub(crate) fn encode_params(params: &[Param], out: &mut Vec<u8>) {
    for p in params {
        // Align first: the previous TLV was cut back to its unpadded length.
        pad(out);
        let start = out.len();
        p.encode(out);
        trim_to_length_field(out, start);
    }
}

/// Cuts `out` back to the end of the TLV starting at `start` (dropping its padding); the
/// next TLV's encoding pads again first.
fn trim_to_length_field(out: &mut Vec<u8>, start: usize) {
    let length = u16::from_be_bytes([out[start + 2], out[start + 3]]);
    out.truncate(start + usize::from(length));
}

/// One error cause of an ERROR or ABORT chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorCause {
    /// Invalid Stream Identifier.
    InvalidStream {
        /// The stream.
        stream: u16,
    },
    /// Stale Cookie Error.
    StaleCookie {
        /// How late the cookie was, in microseconds.
        staleness_us: u32,
    },
    /// Unrecognized Chunk Type: the chunk as received.
    UnrecognizedChunk(Vec<u8>),
    /// Unrecognized Parameters: the parameters as received.
    UnrecognizedParameters(Vec<u8>),
    /// No User Data.
    NoUserData {
        /// TSN of the empty DATA chunk.
        tsn: u32,
    },
    /// User-Initiated Abort with the upper layer's reason.
    UserAbort(Vec<u8>),
    /// Protocol Violation with a description.
    ProtocolViolation(Vec<u8>),
    /// ALT-COOKIE required, carrying the cookie to put into the next INIT.
    AltCookieRequired(Vec<u8>),
    /// Any other cause.
    Other {
        /// Cause code.
        code: u16,
        /// Cause-specific information.
        value: Vec<u8>,
    },
}

impl ErrorCause {
    /// The cause code.
    pub fn code(&self) -> u16 {
        match self {
            ErrorCause::InvalidStream { .. } => CAUSE_INVALID_STREAM,
            ErrorCause::StaleCookie { .. } => CAUSE_STALE_COOKIE,
            ErrorCause::UnrecognizedChunk(_) => CAUSE_UNRECOGNIZED_CHUNK,
            ErrorCause::UnrecognizedParameters(_) => CAUSE_UNRECOGNIZED_PARAMS,
            ErrorCause::NoUserData { .. } => CAUSE_NO_USER_DATA,
            ErrorCause::UserAbort(_) => CAUSE_USER_ABORT,
            ErrorCause::ProtocolViolation(_) => CAUSE_PROTOCOL_VIOLATION,
            ErrorCause::AltCookieRequired(_) => CAUSE_ALT_COOKIE_REQUIRED,
            ErrorCause::Other { code, .. } => *code,
        }
    }

    fn decode(code: u16, value: &[u8]) -> Result<ErrorCause, ParseError> {
        let mut r = Reader::new(value);
        Ok(match code {
            CAUSE_INVALID_STREAM => {
                ErrorCause::InvalidStream { stream: r.u16().field("invalid stream cause")? }
            }
            CAUSE_STALE_COOKIE => {
                ErrorCause::StaleCookie { staleness_us: r.u32().field("stale cookie cause")? }
            }
            CAUSE_UNRECOGNIZED_CHUNK => ErrorCause::UnrecognizedChunk(value.to_vec()),
            CAUSE_UNRECOGNIZED_PARAMS => ErrorCause::UnrecognizedParameters(value.to_vec()),
            CAUSE_NO_USER_DATA => ErrorCause::NoUserData { tsn: r.u32().field("no user data cause")? },
            CAUSE_USER_ABORT => ErrorCause::UserAbort(value.to_vec()),
            CAUSE_PROTOCOL_VIOLATION => ErrorCause::ProtocolViolation(value.to_vec()),
            CAUSE_ALT_COOKIE_REQUIRED => ErrorCause::AltCookieRequired(value.to_vec()),
            _ => ErrorCause::Other { code, value: value.to_vec() },
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        pad(out);
        let start = out.len();
        put_u16(out, self.code());
        out.extend_from_slice(&[0, 0]);
        match self {
            ErrorCause::InvalidStream { stream } => {
                put_u16(out, *stream);
                out.extend_from_slice(&[0, 0]);
            }
            ErrorCause::StaleCookie { staleness_us } => put_u32(out, *staleness_us),
            ErrorCause::NoUserData { tsn } => put_u32(out, *tsn),
            ErrorCause::UnrecognizedChunk(v)
            | ErrorCause::UnrecognizedParameters(v)
            | ErrorCause::UserAbort(v)
            | ErrorCause::ProtocolViolation(v)
            | ErrorCause::AltCookieRequired(v)
            | ErrorCause::Other { value: v, .. } => out.extend_from_slice(v),
        }
        let length = u16::try_from(out.len() - start).unwrap_or(u16::MAX);
        out[start + 2..start + 4].copy_from_slice(&length.to_be_bytes());
        pad(out);
    }

    /// Parses one cause from the front of `buf`.
    pub fn parse(buf: &[u8]) -> Result<(ErrorCause, usize), ParseError> {
        let mut r = Reader::new(buf);
        let (code, value) = read_tlv(&mut r, "error cause")?;
        Ok((ErrorCause::decode(code, value)?, buf.len() - r.remaining()))
    }

    /// A readable description, for [`crate::Event::Aborted`].
    pub fn describe(&self) -> String {
        match self {
            ErrorCause::InvalidStream { stream } => format!("invalid stream identifier {stream}"),
            ErrorCause::StaleCookie { staleness_us } => format!("stale cookie ({staleness_us} us)"),
            ErrorCause::UnrecognizedChunk(_) => "unrecognized chunk type".into(),
            ErrorCause::UnrecognizedParameters(_) => "unrecognized parameters".into(),
            ErrorCause::NoUserData { tsn } => format!("no user data (TSN {tsn})"),
            ErrorCause::UserAbort(v) => format!("user abort: {}", String::from_utf8_lossy(v)),
            ErrorCause::ProtocolViolation(v) => format!("protocol violation: {}", String::from_utf8_lossy(v)),
            ErrorCause::AltCookieRequired(_) => "ALT-COOKIE required".into(),
            ErrorCause::Other { code, .. } => format!("error cause {code}"),
        }
    }
}

/// Parses the error causes filling `buf`.
pub fn parse_causes(buf: &[u8]) -> Result<Vec<ErrorCause>, ParseError> {
    let mut r = Reader::new(buf);
    let mut causes = Vec::new();
    while !r.is_empty() {
        let (code, value) = read_tlv(&mut r, "error cause")?;
        causes.push(ErrorCause::decode(code, value)?);
    }
    Ok(causes)
}

pub(crate) fn encode_causes(causes: &[ErrorCause], out: &mut Vec<u8>) {
    for c in causes {
        pad(out);
        let start = out.len();
        c.encode(out);
        trim_to_length_field(out, start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_length_parameters_and_causes_round_trip() {
        let params = vec![
            Param::Unknown { param_type: 0, value: vec![1, 2, 3, 4, 5, 6, 7] },
            Param::Unknown { param_type: 0x800, value: vec![9; 5] },
            Param::AltCookie(vec![]),
            Param::StateCookie(vec![3; 3]),
        ];
        let mut out = Vec::new();
        encode_params(&params, &mut out);
        assert_eq!(parse_params(&out).unwrap(), params);
        let causes = vec![ErrorCause::UserAbort(b"odd".to_vec()), ErrorCause::AltCookieRequired(vec![1; 17])];
        let mut out = Vec::new();
        encode_causes(&causes, &mut out);
        assert_eq!(parse_causes(&out).unwrap(), causes);
    }
}
