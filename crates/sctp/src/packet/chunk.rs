//! Chunks (RFC 9260 §3.3).

use super::forward_tsn::{ForwardTsnChunk, CHUNK_FORWARD_TSN};
use super::param::{encode_causes, encode_params, parse_causes, parse_params, ErrorCause, Param};
use super::reconfig::{ReconfigChunk, CHUNK_RECONFIG};
use super::{pad, padded, FieldExt, ParseError};
use fastshake_core::codec::{put_u16, put_u32, Reader};

/// Payload data.
pub const CHUNK_DATA: u8 = 0;
/// Initiation.
pub const CHUNK_INIT: u8 = 1;
/// Initiation acknowledgement.
pub const CHUNK_INIT_ACK: u8 = 2;
/// Selective acknowledgement.
pub const CHUNK_SACK: u8 = 3;
/// Heartbeat request.
pub const CHUNK_HEARTBEAT: u8 = 4;
/// Heartbeat acknowledgement.
pub const CHUNK_HEARTBEAT_ACK: u8 = 5;
/// Abort.
pub const CHUNK_ABORT: u8 = 6;
/// Shutdown.
pub const CHUNK_SHUTDOWN: u8 = 7;
/// Shutdown acknowledgement.
pub const CHUNK_SHUTDOWN_ACK: u8 = 8;
/// Operation error.
pub const CHUNK_ERROR: u8 = 9;
/// State cookie echo.
pub const CHUNK_COOKIE_ECHO: u8 = 10;
/// Cookie acknowledgement.
pub const CHUNK_COOKIE_ACK: u8 = 11;
/// Shutdown complete.
pub const CHUNK_SHUTDOWN_COMPLETE: u8 = 14;

/// Bytes of a DATA chunk before its user data.
pub const DATA_CHUNK_HEADER_LEN: usize = 16;

const FLAG_T: u8 = 0x01;
const FLAG_E: u8 = 0x01;
const FLAG_B: u8 = 0x02;
const FLAG_U: u8 = 0x04;
const FLAG_I: u8 = 0x08;

/// A DATA chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataChunk {
    /// Transmission sequence number.
    pub tsn: u32,
    /// Stream identifier.
    pub stream: u16,
    /// Stream sequence number (ignored for unordered data).
    pub ssn: u16,
    /// Payload protocol identifier.
    pub ppid: u32,
    /// U bit.
    pub unordered: bool,
    /// B bit: first fragment of a user message.
    pub beginning: bool,
    /// E bit: last fragment.
    pub ending: bool,
    /// I bit: the receiver should SACK at once.
    pub immediate: bool,
    /// User data (never empty on the wire).
    pub data: Vec<u8>,
}

/// An INIT or INIT-ACK chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitChunk {
    /// Initiate tag: the verification tag the peer puts on packets to us.
    pub initiate_tag: u32,
    /// Advertised receiver window credit.
    pub a_rwnd: u32,
    /// Number of outbound streams.
    pub outbound_streams: u16,
    /// Number of inbound streams.
    pub inbound_streams: u16,
    /// Initial TSN.
    pub initial_tsn: u32,
    /// Optional and variable-length parameters.
    pub params: Vec<Param>,
}

impl InitChunk {
    /// The first ALT-COOKIE parameter, if any.
    pub fn alt_cookie(&self) -> Option<&[u8]> {
        self.params.iter().find_map(|p| match p {
            Param::AltCookie(c) => Some(c.as_slice()),
            _ => None,
        })
    }

    /// The state cookie, if any.
    pub fn state_cookie(&self) -> Option<&[u8]> {
        self.params.iter().find_map(|p| match p {
            Param::StateCookie(c) => Some(c.as_slice()),
            _ => None,
        })
    }
}

/// A SACK chunk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SackChunk {
    /// Cumulative TSN acknowledged.
    pub cumulative_tsn_ack: u32,
    /// Advertised receiver window credit.
    pub a_rwnd: u32,
    /// Gap ack blocks as (start, end) offsets from the cumulative TSN.
    pub gap_blocks: Vec<(u16, u16)>,
    /// TSNs received more than once since the last SACK.
    pub duplicate_tsns: Vec<u32>,
}

impl SackChunk {
    fn read(r: &mut Reader<'_>) -> Result<SackChunk, ParseError> {
        let cumulative_tsn_ack = r.u32().field("SACK")?;
        let a_rwnd = r.u32().field("SACK")?;
        let gaps = r.u16().field("SACK")?;
        let dups = r.u16().field("SACK")?;
        if r.remaining() < usize::from(gaps) * 4 + usize::from(dups) * 4 {
            return Err(ParseError::BadLength("SACK"));
        }
        let mut gap_blocks = Vec::with_capacity(gaps.into());
        for _ in 0..gaps {
            gap_blocks.push((r.u16().field("SACK")?, r.u16().field("SACK")?));
        }
        let mut duplicate_tsns = Vec::with_capacity(dups.into());
        for _ in 0..dups {
            duplicate_tsns.push(r.u32().field("SACK")?);
        }
        Ok(SackChunk { cumulative_tsn_ack, a_rwnd, gap_blocks, duplicate_tsns })
    }

    /// Parses a SACK chunk's value (what follows the chunk header).
    pub fn parse_value(value: &[u8]) -> Result<SackChunk, ParseError> {
        Self::read(&mut Reader::new(value))
    }

    /// Encodes the SACK chunk's value.
    pub fn encode_value(&self, out: &mut Vec<u8>) {
        let gaps = self.gap_blocks.len().min(usize::from(u16::MAX));
        let dups = self.duplicate_tsns.len().min(usize::from(u16::MAX));
        put_u32(out, self.cumulative_tsn_ack);
        put_u32(out, self.a_rwnd);
        put_u16(out, gaps as u16);
        put_u16(out, dups as u16);
        for (s, e) in &self.gap_blocks[..gaps] {
            put_u16(out, *s);
            put_u16(out, *e);
        }
        for d in &self.duplicate_tsns[..dups] {
            put_u32(out, *d);
        }
    }
}

/// What to do with a chunk of an unknown type, from its two high bits (RFC 9260 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownChunkAction {
    /// 00: stop processing the packet, discard it.
    Stop,
    /// 01: stop, discard and report in an ERROR "Unrecognized Chunk Type".
    StopAndReport,
    /// 10: skip the chunk and go on.
    Skip,
    /// 11: skip, go on and report.
    SkipAndReport,
}

impl UnknownChunkAction {
    /// The action the high bits of `chunk_type` ask for.
    pub fn of(chunk_type: u8) -> Self {
        match chunk_type >> 6 {
            0 => UnknownChunkAction::Stop,
            1 => UnknownChunkAction::StopAndReport,
            2 => UnknownChunkAction::Skip,
            _ => UnknownChunkAction::SkipAndReport,
        }
    }
}

/// One chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chunk {
    /// DATA.
    Data(DataChunk),
    /// INIT.
    Init(InitChunk),
    /// INIT-ACK.
    InitAck(InitChunk),
    /// SACK.
    Sack(SackChunk),
    /// HEARTBEAT; the value of its Heartbeat Info parameter.
    Heartbeat(Vec<u8>),
    /// HEARTBEAT-ACK; the reflected Heartbeat Info.
    HeartbeatAck(Vec<u8>),
    /// ABORT.
    Abort {
        /// T bit: the verification tag is the sender's own (reflected) tag.
        t_bit: bool,
        /// Error causes.
        causes: Vec<ErrorCause>,
    },
    /// SHUTDOWN.
    Shutdown {
        /// Cumulative TSN acknowledged.
        cumulative_tsn_ack: u32,
    },
    /// SHUTDOWN-ACK.
    ShutdownAck,
    /// ERROR.
    Error {
        /// Error causes.
        causes: Vec<ErrorCause>,
    },
    /// COOKIE-ECHO.
    CookieEcho(Vec<u8>),
    /// COOKIE-ACK.
    CookieAck,
    /// SHUTDOWN-COMPLETE.
    ShutdownComplete {
        /// T bit, as for ABORT.
        t_bit: bool,
    },
    /// RE-CONFIG (RFC 6525). One whose parameters do not parse is kept as [`Chunk::Unknown`]:
    /// its type's high bits (`10`) then say to skip it, and the rest of its packet still counts.
    Reconfig(ReconfigChunk),
    /// FORWARD-TSN (RFC 3758). One whose value does not parse (a half pair) is kept as
    /// [`Chunk::Unknown`], as for RE-CONFIG.
    ForwardTsn(ForwardTsnChunk),
    /// A chunk type this codec does not implement.
    Unknown {
        /// Chunk type.
        chunk_type: u8,
        /// Chunk flags.
        flags: u8,
        /// Chunk value.
        value: Vec<u8>,
    },
}

impl Chunk {
    /// The chunk type byte.
    pub fn chunk_type(&self) -> u8 {
        match self {
            Chunk::Data(_) => CHUNK_DATA,
            Chunk::Init(_) => CHUNK_INIT,
            Chunk::InitAck(_) => CHUNK_INIT_ACK,
            Chunk::Sack(_) => CHUNK_SACK,
            Chunk::Heartbeat(_) => CHUNK_HEARTBEAT,
            Chunk::HeartbeatAck(_) => CHUNK_HEARTBEAT_ACK,
            Chunk::Abort { .. } => CHUNK_ABORT,
            Chunk::Shutdown { .. } => CHUNK_SHUTDOWN,
            Chunk::ShutdownAck => CHUNK_SHUTDOWN_ACK,
            Chunk::Error { .. } => CHUNK_ERROR,
            Chunk::CookieEcho(_) => CHUNK_COOKIE_ECHO,
            Chunk::CookieAck => CHUNK_COOKIE_ACK,
            Chunk::ShutdownComplete { .. } => CHUNK_SHUTDOWN_COMPLETE,
            Chunk::Reconfig(_) => CHUNK_RECONFIG,
            Chunk::ForwardTsn(_) => CHUNK_FORWARD_TSN,
            Chunk::Unknown { chunk_type, .. } => *chunk_type,
        }
    }

    /// Parses one chunk from the front of `buf`; returns it and the bytes it took (padding
    /// included).
    pub fn parse(buf: &[u8]) -> Result<(Chunk, usize), ParseError> {
        let mut r = Reader::new(buf);
        let chunk = Self::read(&mut r)?;
        Ok((chunk, buf.len() - r.remaining()))
    }

    /// Parses a run of chunks filling `buf` (as inside ALT-DATA).
    pub fn parse_all(buf: &[u8]) -> Result<Vec<Chunk>, ParseError> {
        let mut r = Reader::new(buf);
        let mut chunks = Vec::new();
        while !r.is_empty() {
            chunks.push(Self::read(&mut r)?);
        }
        Ok(chunks)
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Chunk, ParseError> {
        let [chunk_type, flags, l0, l1] = r.array().field("chunk header")?;
        let length = usize::from(u16::from_be_bytes([l0, l1]));
        if length < 4 {
            return Err(ParseError::BadLength("chunk"));
        }
        let value = r.take(length - 4).field("chunk value")?;
        r.skip_padding(padded(length) - length);
        Self::decode(chunk_type, flags, value)
    }

    fn decode(chunk_type: u8, flags: u8, value: &[u8]) -> Result<Chunk, ParseError> {
        let mut r = Reader::new(value);
        let chunk = match chunk_type {
            CHUNK_DATA => {
                let tsn = r.u32().field("DATA")?;
                let stream = r.u16().field("DATA")?;
                let ssn = r.u16().field("DATA")?;
                let ppid = r.u32().field("DATA")?;
                let data = r.rest();
                if data.is_empty() {
                    return Err(ParseError::Invalid("DATA without user data"));
                }
                Chunk::Data(DataChunk {
                    tsn,
                    stream,
                    ssn,
                    ppid,
                    unordered: flags & FLAG_U != 0,
                    beginning: flags & FLAG_B != 0,
                    ending: flags & FLAG_E != 0,
                    immediate: flags & FLAG_I != 0,
                    data: data.to_vec(),
                })
            }
            CHUNK_INIT | CHUNK_INIT_ACK => {
                let init = InitChunk {
                    initiate_tag: r.u32().field("INIT")?,
                    a_rwnd: r.u32().field("INIT")?,
                    outbound_streams: r.u16().field("INIT")?,
                    inbound_streams: r.u16().field("INIT")?,
                    initial_tsn: r.u32().field("INIT")?,
                    params: parse_params(r.rest())?,
                };
                if chunk_type == CHUNK_INIT {
                    Chunk::Init(init)
                } else {
                    Chunk::InitAck(init)
                }
            }
            CHUNK_SACK => Chunk::Sack(SackChunk::read(&mut r)?),
            CHUNK_HEARTBEAT | CHUNK_HEARTBEAT_ACK => {
                // One Heartbeat Info parameter (type 1).
                let param_type = r.u16().field("heartbeat info")?;
                let length = usize::from(r.u16().field("heartbeat info")?);
                if param_type != 1 {
                    return Err(ParseError::Invalid("heartbeat info type"));
                }
                if length < 4 {
                    return Err(ParseError::BadLength("heartbeat info"));
                }
                let info = r.take(length - 4).field("heartbeat info")?.to_vec();
                if chunk_type == CHUNK_HEARTBEAT {
                    Chunk::Heartbeat(info)
                } else {
                    Chunk::HeartbeatAck(info)
                }
            }
            CHUNK_ABORT => Chunk::Abort { t_bit: flags & FLAG_T != 0, causes: parse_causes(r.rest())? },
            CHUNK_SHUTDOWN => Chunk::Shutdown { cumulative_tsn_ack: r.u32().field("SHUTDOWN")? },
            CHUNK_SHUTDOWN_ACK => Chunk::ShutdownAck,
            CHUNK_ERROR => Chunk::Error { causes: parse_causes(r.rest())? },
            CHUNK_COOKIE_ECHO => Chunk::CookieEcho(r.rest().to_vec()),
            CHUNK_COOKIE_ACK => Chunk::CookieAck,
            CHUNK_SHUTDOWN_COMPLETE => Chunk::ShutdownComplete { t_bit: flags & FLAG_T != 0 },
            CHUNK_RECONFIG => match ReconfigChunk::parse_value(value) {
                Ok(reconfig) => Chunk::Reconfig(reconfig),
                Err(_) => Chunk::Unknown { chunk_type, flags, value: value.to_vec() },
            },
            CHUNK_FORWARD_TSN => match ForwardTsnChunk::parse_value(value) {
                Ok(forward) => Chunk::ForwardTsn(forward),
                Err(_) => Chunk::Unknown { chunk_type, flags, value: value.to_vec() },
            },
            _ => Chunk::Unknown { chunk_type, flags, value: value.to_vec() },
        };
        Ok(chunk)
    }

    fn flags(&self) -> u8 {
        match self {
            Chunk::Data(d) => {
                (if d.unordered { FLAG_U } else { 0 })
                    | (if d.beginning { FLAG_B } else { 0 })
                    | (if d.ending { FLAG_E } else { 0 })
                    | (if d.immediate { FLAG_I } else { 0 })
            }
            Chunk::Abort { t_bit, .. } | Chunk::ShutdownComplete { t_bit } => u8::from(*t_bit),
            Chunk::Unknown { flags, .. } => *flags,
            _ => 0,
        }
    }

    fn encode_value(&self, out: &mut Vec<u8>) {
        match self {
            Chunk::Data(d) => {
                put_u32(out, d.tsn);
                put_u16(out, d.stream);
                put_u16(out, d.ssn);
                put_u32(out, d.ppid);
                out.extend_from_slice(&d.data);
            }
            Chunk::Init(i) | Chunk::InitAck(i) => {
                put_u32(out, i.initiate_tag);
                put_u32(out, i.a_rwnd);
                put_u16(out, i.outbound_streams);
                put_u16(out, i.inbound_streams);
                put_u32(out, i.initial_tsn);
                encode_params(&i.params, out);
            }
            Chunk::Sack(s) => s.encode_value(out),
            Chunk::Heartbeat(info) | Chunk::HeartbeatAck(info) => {
                put_u16(out, 1u16);
                put_u16(out, clamp_len(info.len() + 4));
                out.extend_from_slice(info);
            }
            Chunk::Abort { causes, .. } | Chunk::Error { causes } => encode_causes(causes, out),
            Chunk::Shutdown { cumulative_tsn_ack } => put_u32(out, *cumulative_tsn_ack),
            Chunk::CookieEcho(cookie) => out.extend_from_slice(cookie),
            Chunk::Reconfig(r) => r.encode_value(out),
            Chunk::ForwardTsn(f) => f.encode_value(out),
            Chunk::Unknown { value, .. } => out.extend_from_slice(value),
            Chunk::ShutdownAck | Chunk::CookieAck | Chunk::ShutdownComplete { .. } => {}
        }
    }

    /// Appends the chunk, padded to four bytes, to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(self.chunk_type());
        out.push(self.flags());
        out.extend_from_slice(&[0, 0]);
        self.encode_value(out);
        let length = clamp_len(out.len() - start);
        out[start + 2..start + 4].copy_from_slice(&length.to_be_bytes());
        pad(out);
    }

    /// The chunk encoded on its own.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// The chunk encoded on its own and without the padding after its last byte, as long as its
    /// length field says: the form of a chunk outside a packet (SNAP's `a=sctp-init`, which
    /// browsers write unpadded). [`Chunk::parse`] reads it back.
    pub fn to_unpadded_bytes(&self) -> Vec<u8> {
        let mut out = self.to_bytes();
        let length = out.get(2..4).map_or(out.len(), |l| usize::from(u16::from_be_bytes([l[0], l[1]])));
        out.truncate(length);
        out
    }

    /// Bytes the chunk takes on the wire, padding included.
    pub fn padded_len(&self) -> usize {
        match self {
            Chunk::Data(d) => padded(DATA_CHUNK_HEADER_LEN + d.data.len()),
            Chunk::CookieAck | Chunk::ShutdownAck | Chunk::ShutdownComplete { .. } => 4,
            Chunk::Shutdown { .. } => 8,
            Chunk::Sack(s) => 16 + 4 * s.gap_blocks.len() + 4 * s.duplicate_tsns.len(),
            Chunk::ForwardTsn(f) => f.chunk_len(),
            _ => self.to_bytes().len(),
        }
    }
}

/// Lengths are 16-bit on the wire; callers keep chunks below 64 KiB, this keeps a bug from
/// wrapping silently.
fn clamp_len(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}
