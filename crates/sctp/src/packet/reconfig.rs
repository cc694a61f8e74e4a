//! The RE-CONFIG chunk (RFC 6525 §3.1) and its parameters (§4): stream resets, the response to
//! them, and the requests for more streams.

use fastshake_core::codec::{put_u16, put_u32, Reader};

use super::param::{put_tlv, read_tlv};
use super::{pad, FieldExt, ParseError};

/// Re-configuration (stream reset, RFC 6525). High bits `10`: a peer that does not know it skips
/// it silently.
pub const CHUNK_RECONFIG: u8 = 130;
/// Outgoing SSN Reset Request (RFC 6525 §4.1).
pub const PARAM_OUTGOING_SSN_RESET: u16 = 13;
/// Incoming SSN Reset Request (§4.2).
pub const PARAM_INCOMING_SSN_RESET: u16 = 14;
/// SSN/TSN Reset Request (§4.3).
pub const PARAM_SSN_TSN_RESET: u16 = 15;
/// Re-configuration Response (§4.4).
pub const PARAM_RECONFIG_RESPONSE: u16 = 16;
/// Add Outgoing Streams Request (§4.5).
pub const PARAM_ADD_OUTGOING_STREAMS: u16 = 17;
/// Add Incoming Streams Request (§4.6).
pub const PARAM_ADD_INCOMING_STREAMS: u16 = 18;

/// Bytes of an Outgoing SSN Reset Request before its stream list.
pub const OUTGOING_SSN_RESET_HEADER_LEN: usize = 16;

/// The Result field of a Re-configuration Response (RFC 6525 §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReconfigResult {
    /// 0: Success - Nothing to do.
    NothingToDo,
    /// 1: Success - Performed.
    Performed,
    /// 2: Denied.
    Denied,
    /// 3: Error - Wrong SSN.
    WrongSsn,
    /// 4: Error - Request already in progress.
    RequestInProgress,
    /// 5: Error - Bad Sequence Number.
    BadSequenceNumber,
    /// 6: In progress.
    InProgress,
    /// A value RFC 6525 does not define.
    Other(u32),
}

impl ReconfigResult {
    /// The result a Result field holds.
    pub fn from_u32(value: u32) -> Self {
        match value {
            0 => ReconfigResult::NothingToDo,
            1 => ReconfigResult::Performed,
            2 => ReconfigResult::Denied,
            3 => ReconfigResult::WrongSsn,
            4 => ReconfigResult::RequestInProgress,
            5 => ReconfigResult::BadSequenceNumber,
            6 => ReconfigResult::InProgress,
            other => ReconfigResult::Other(other),
        }
    }

    /// The value on the wire.
    pub fn to_u32(self) -> u32 {
        match self {
            ReconfigResult::NothingToDo => 0,
            ReconfigResult::Performed => 1,
            ReconfigResult::Denied => 2,
            ReconfigResult::WrongSsn => 3,
            ReconfigResult::RequestInProgress => 4,
            ReconfigResult::BadSequenceNumber => 5,
            ReconfigResult::InProgress => 6,
            ReconfigResult::Other(v) => v,
        }
    }
}

/// One parameter of a RE-CONFIG chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReconfigParam {
    /// Outgoing SSN Reset Request: the sender's streams (all of them when the list is empty)
    /// start again at SSN 0 once everything up to `last_tsn` has arrived.
    OutgoingSsnReset {
        /// Re-configuration Request Sequence Number.
        request_seq: u32,
        /// Re-configuration Response Sequence Number: the request this one answers, or the
        /// sender's next expected request sequence number minus 1.
        response_seq: u32,
        /// Sender's Last Assigned TSN.
        last_tsn: u32,
        /// The streams to reset.
        streams: Vec<u16>,
    },
    /// Incoming SSN Reset Request: asks the receiver to reset its outgoing streams.
    IncomingSsnReset {
        /// Re-configuration Request Sequence Number.
        request_seq: u32,
        /// The streams (all when empty).
        streams: Vec<u16>,
    },
    /// SSN/TSN Reset Request: every stream and the TSNs start over.
    SsnTsnReset {
        /// Re-configuration Request Sequence Number.
        request_seq: u32,
    },
    /// Re-configuration Response.
    Response {
        /// The request answered.
        response_seq: u32,
        /// What became of it.
        result: ReconfigResult,
        /// Sender's and Receiver's Next TSN (answers to an SSN/TSN Reset Request only).
        next_tsns: Option<(u32, u32)>,
    },
    /// Add Outgoing Streams Request.
    AddOutgoingStreams {
        /// Re-configuration Request Sequence Number.
        request_seq: u32,
        /// Number of new streams.
        new_streams: u16,
    },
    /// Add Incoming Streams Request.
    AddIncomingStreams {
        /// Re-configuration Request Sequence Number.
        request_seq: u32,
        /// Number of new streams.
        new_streams: u16,
    },
    /// A parameter type RFC 6525 does not define.
    Unknown {
        /// Parameter type.
        param_type: u16,
        /// Parameter value.
        value: Vec<u8>,
    },
}

/// A stream list filling `r`: an even number of bytes.
fn read_streams(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<u16>, ParseError> {
    if !r.remaining().is_multiple_of(2) {
        return Err(ParseError::BadLength(what));
    }
    let mut streams = Vec::with_capacity(r.remaining() / 2);
    while !r.is_empty() {
        streams.push(r.u16().field(what)?);
    }
    Ok(streams)
}

impl ReconfigParam {
    /// The parameter type.
    pub fn param_type(&self) -> u16 {
        match self {
            ReconfigParam::OutgoingSsnReset { .. } => PARAM_OUTGOING_SSN_RESET,
            ReconfigParam::IncomingSsnReset { .. } => PARAM_INCOMING_SSN_RESET,
            ReconfigParam::SsnTsnReset { .. } => PARAM_SSN_TSN_RESET,
            ReconfigParam::Response { .. } => PARAM_RECONFIG_RESPONSE,
            ReconfigParam::AddOutgoingStreams { .. } => PARAM_ADD_OUTGOING_STREAMS,
            ReconfigParam::AddIncomingStreams { .. } => PARAM_ADD_INCOMING_STREAMS,
            ReconfigParam::Unknown { param_type, .. } => *param_type,
        }
    }

    /// The Re-configuration Request Sequence Number, if this is a request.
    pub fn request_seq(&self) -> Option<u32> {
        match self {
            ReconfigParam::OutgoingSsnReset { request_seq, .. }
            | ReconfigParam::IncomingSsnReset { request_seq, .. }
            | ReconfigParam::SsnTsnReset { request_seq }
            | ReconfigParam::AddOutgoingStreams { request_seq, .. }
            | ReconfigParam::AddIncomingStreams { request_seq, .. } => Some(*request_seq),
            ReconfigParam::Response { .. } | ReconfigParam::Unknown { .. } => None,
        }
    }

    fn decode(param_type: u16, value: &[u8]) -> Result<ReconfigParam, ParseError> {
        let mut r = Reader::new(value);
        let param = match param_type {
            PARAM_OUTGOING_SSN_RESET => {
                const WHAT: &str = "outgoing SSN reset request";
                ReconfigParam::OutgoingSsnReset {
                    request_seq: r.u32().field(WHAT)?,
                    response_seq: r.u32().field(WHAT)?,
                    last_tsn: r.u32().field(WHAT)?,
                    streams: read_streams(&mut r, WHAT)?,
                }
            }
            PARAM_INCOMING_SSN_RESET => {
                const WHAT: &str = "incoming SSN reset request";
                ReconfigParam::IncomingSsnReset {
                    request_seq: r.u32().field(WHAT)?,
                    streams: read_streams(&mut r, WHAT)?,
                }
            }
            PARAM_SSN_TSN_RESET => {
                let request_seq = r.u32().field("SSN/TSN reset request")?;
                r.finish().field("SSN/TSN reset request")?;
                ReconfigParam::SsnTsnReset { request_seq }
            }
            PARAM_RECONFIG_RESPONSE => {
                const WHAT: &str = "re-configuration response";
                let response_seq = r.u32().field(WHAT)?;
                let result = ReconfigResult::from_u32(r.u32().field(WHAT)?);
                // The two TSNs come together or not at all (§4.4).
                let next_tsns = match r.remaining() {
                    0 => None,
                    8 => Some((r.u32().field(WHAT)?, r.u32().field(WHAT)?)),
                    _ => return Err(ParseError::BadLength(WHAT)),
                };
                ReconfigParam::Response { response_seq, result, next_tsns }
            }
            PARAM_ADD_OUTGOING_STREAMS | PARAM_ADD_INCOMING_STREAMS => {
                const WHAT: &str = "add streams request";
                let request_seq = r.u32().field(WHAT)?;
                let new_streams = r.u16().field(WHAT)?;
                r.u16().field(WHAT)?; // reserved
                r.finish().field(WHAT)?;
                if param_type == PARAM_ADD_OUTGOING_STREAMS {
                    ReconfigParam::AddOutgoingStreams { request_seq, new_streams }
                } else {
                    ReconfigParam::AddIncomingStreams { request_seq, new_streams }
                }
            }
            _ => ReconfigParam::Unknown { param_type, value: value.to_vec() },
        };
        Ok(param)
    }

    fn encode_value(&self, out: &mut Vec<u8>) {
        match self {
            ReconfigParam::OutgoingSsnReset { request_seq, response_seq, last_tsn, streams } => {
                put_u32(out, *request_seq);
                put_u32(out, *response_seq);
                put_u32(out, *last_tsn);
                streams.iter().for_each(|s| put_u16(out, *s));
            }
            ReconfigParam::IncomingSsnReset { request_seq, streams } => {
                put_u32(out, *request_seq);
                streams.iter().for_each(|s| put_u16(out, *s));
            }
            ReconfigParam::SsnTsnReset { request_seq } => put_u32(out, *request_seq),
            ReconfigParam::Response { response_seq, result, next_tsns } => {
                put_u32(out, *response_seq);
                put_u32(out, result.to_u32());
                if let Some((sender, receiver)) = next_tsns {
                    put_u32(out, *sender);
                    put_u32(out, *receiver);
                }
            }
            ReconfigParam::AddOutgoingStreams { request_seq, new_streams }
            | ReconfigParam::AddIncomingStreams { request_seq, new_streams } => {
                put_u32(out, *request_seq);
                put_u16(out, *new_streams);
                put_u16(out, 0);
            }
            ReconfigParam::Unknown { value, .. } => out.extend_from_slice(value),
        }
    }

    /// Appends the parameter without its padding (the next parameter, or the chunk, pads).
    fn encode_unpadded(&self, out: &mut Vec<u8>) {
        put_tlv(out, self.param_type(), |out| self.encode_value(out));
    }

    /// Parses one parameter from the front of `buf`; returns it and the bytes it took.
    pub fn parse(buf: &[u8]) -> Result<(ReconfigParam, usize), ParseError> {
        let mut r = Reader::new(buf);
        let (kind, value) = read_tlv(&mut r, "re-configuration parameter")?;
        Ok((Self::decode(kind, value)?, buf.len() - r.remaining()))
    }

    /// The parameter as its own TLV, padded.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_unpadded(&mut out);
        pad(&mut out);
        out
    }
}

/// A RE-CONFIG chunk: one or two parameters in the combinations RFC 6525 §3.1 allows (the
/// codec keeps whatever list arrived; [`ReconfigChunk::is_allowed_combination`] judges it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconfigChunk {
    /// The parameters, in order.
    pub params: Vec<ReconfigParam>,
}

impl ReconfigChunk {
    /// Parses a RE-CONFIG chunk's value (what follows the chunk header).
    pub fn parse_value(value: &[u8]) -> Result<ReconfigChunk, ParseError> {
        let mut r = Reader::new(value);
        let mut params = Vec::new();
        while !r.is_empty() {
            let (kind, value) = read_tlv(&mut r, "re-configuration parameter")?;
            params.push(ReconfigParam::decode(kind, value)?);
        }
        Ok(ReconfigChunk { params })
    }

    /// Encodes the chunk's value; the last parameter's padding is left to the chunk, whose
    /// length does not count it (RFC 9260 §3.2).
    pub fn encode_value(&self, out: &mut Vec<u8>) {
        for p in &self.params {
            pad(out);
            p.encode_unpadded(out);
        }
    }

    /// Whether the parameters are one of the combinations of RFC 6525 §3.1: a single request
    /// or response, Outgoing + Incoming SSN Reset, Response + Outgoing SSN Reset, two
    /// Responses, or Add Outgoing + Add Incoming Streams.
    pub fn is_allowed_combination(&self) -> bool {
        use ReconfigParam as P;
        match self.params.as_slice() {
            [one] => !matches!(one, P::Unknown { .. }),
            [a, b] => matches!(
                (a, b),
                (P::OutgoingSsnReset { .. }, P::IncomingSsnReset { .. })
                    | (P::IncomingSsnReset { .. }, P::OutgoingSsnReset { .. })
                    | (P::Response { .. }, P::OutgoingSsnReset { .. })
                    | (P::OutgoingSsnReset { .. }, P::Response { .. })
                    | (P::Response { .. }, P::Response { .. })
                    | (P::AddOutgoingStreams { .. }, P::AddIncomingStreams { .. })
                    | (P::AddIncomingStreams { .. }, P::AddOutgoingStreams { .. })
            ),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outgoing_request_layout_and_odd_stream_lists() {
        let p = ReconfigParam::OutgoingSsnReset {
            request_seq: 1,
            response_seq: 2,
            last_tsn: 3,
            streams: vec![7],
        };
        // Length 18 (16 + 2·1), padded to 20.
        assert_eq!(
            p.to_bytes(),
            [0, 13, 0, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 7, 0, 0],
            "RFC 6525 §4.1"
        );
        assert_eq!(ReconfigParam::parse(&p.to_bytes()).unwrap(), (p.clone(), 20));
        // A response after it starts on the next 4-byte boundary.
        let chunk = ReconfigChunk {
            params: vec![
                ReconfigParam::Response {
                    response_seq: 9,
                    result: ReconfigResult::Performed,
                    next_tsns: None,
                },
                p,
            ],
        };
        let mut value = Vec::new();
        chunk.encode_value(&mut value);
        assert_eq!(value.len(), 12 + 18);
        assert_eq!(ReconfigChunk::parse_value(&value).unwrap(), chunk);
        assert!(chunk.is_allowed_combination());
    }

    #[test]
    fn fixed_length_parameters_reject_other_lengths() {
        // A response of 12 bytes (one TSN only) and an SSN/TSN request with a stray byte.
        assert_eq!(
            ReconfigParam::parse(&[0, 16, 0, 16, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5]),
            Err(ParseError::BadLength("re-configuration response"))
        );
        assert_eq!(
            ReconfigParam::parse(&[0, 15, 0, 9, 0, 0, 0, 1, 7]),
            Err(ParseError::BadLength("SSN/TSN reset request"))
        );
        assert_eq!(
            ReconfigParam::parse(&[0, 13, 0, 17, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 9]),
            Err(ParseError::BadLength("outgoing SSN reset request"))
        );
        let add = ReconfigParam::AddIncomingStreams { request_seq: 4, new_streams: 2 };
        assert_eq!(add.to_bytes(), [0, 18, 0, 12, 0, 0, 0, 4, 0, 2, 0, 0]);
        assert_eq!(ReconfigResult::from_u32(6), ReconfigResult::InProgress);
        assert_eq!(ReconfigResult::from_u32(99).to_u32(), 99);
    }

    #[test]
    fn combinations_of_section_3_1() {
        use ReconfigParam as P;
        let out = P::OutgoingSsnReset { request_seq: 1, response_seq: 0, last_tsn: 0, streams: vec![] };
        let inc = P::IncomingSsnReset { request_seq: 2, streams: vec![] };
        let tsn = P::SsnTsnReset { request_seq: 3 };
        let allowed = |params: Vec<P>| ReconfigChunk { params }.is_allowed_combination();
        assert!(allowed(vec![tsn.clone()]));
        assert!(allowed(vec![out.clone(), inc.clone()]));
        assert!(!allowed(vec![]));
        assert!(!allowed(vec![out.clone(), out.clone()]));
        assert!(!allowed(vec![tsn, inc.clone()]));
        assert!(!allowed(vec![out.clone(), inc, out]));
    }
}
