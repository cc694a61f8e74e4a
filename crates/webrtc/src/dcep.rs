//! The Data Channel Establishment Protocol (RFC 8832) and the payload protocol identifiers of
//! WebRTC data channels (RFC 8831 §8).
//!
//! A data channel is a pair of SCTP streams with the same id. The side that opens it sends a
//! DATA_CHANNEL_OPEN on the stream; the other answers DATA_CHANNEL_ACK on its stream of the
//! same id. [`Channels`] is the table of one association's channels: it picks stream ids,
//! turns what SCTP delivers into [`ChannelEvent`]s and builds the [`Outgoing`] messages the
//! caller hands to SCTP. It does no I/O: resetting a stream to close a channel (RFC 8831
//! §6.7) is the SCTP layer's job.

use fastshake_core::codec::{put_u16, put_u32, put_u8, DecodeError, Reader};
use std::collections::BTreeMap;

/// Most channels one table holds, whoever opened them. Each channel keeps its label and
/// protocol, so an unbounded table would let a peer make the server hold as much memory as it
/// likes; 1024 is far above what one page opens (browsers allow up to 65534).
pub const MAX_CHANNELS: usize = 1024;
/// Most bytes of labels and protocols one table holds, all channels together (one OPEN can
/// carry 128 KiB of them).
pub const MAX_NAME_BYTES: usize = 1024 * 1024;
/// The highest stream id a channel can have: an association has at most 65535 streams each way
/// (RFC 8831 §6.2 asks for that many), numbered 0 to 65534.
pub const MAX_STREAM: u16 = 65534;

/// DATA_CHANNEL_OPEN message type (RFC 8832 §5.1).
const OPEN: u8 = 0x03;
/// DATA_CHANNEL_ACK message type (RFC 8832 §5.2).
const ACK: u8 = 0x02;

/// Channel priorities of RFC 8832 §5.1 (the W3C priorities).
pub mod priority {
    /// "below normal".
    pub const BELOW_NORMAL: u16 = 128;
    /// "normal".
    pub const NORMAL: u16 = 256;
    /// "high".
    pub const HIGH: u16 = 512;
    /// "extra high".
    pub const EXTRA_HIGH: u16 = 1024;
}

/// SCTP payload protocol identifiers of WebRTC (RFC 8831 §8, RFC 8832 §8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ppid {
    /// 50: a DCEP message.
    Dcep,
    /// 51: a UTF-8 string message.
    String,
    /// 52: part of a binary message; deprecated (RFC 8831 §6.6).
    BinaryPartial,
    /// 53: a binary message.
    Binary,
    /// 54: part of a string message; deprecated (RFC 8831 §6.6).
    StringPartial,
    /// 56: an empty string message, sent as one zero byte.
    StringEmpty,
    /// 57: an empty binary message, sent as one zero byte.
    BinaryEmpty,
}

impl Ppid {
    /// The identifier on the wire.
    pub const fn value(self) -> u32 {
        match self {
            Ppid::Dcep => 50,
            Ppid::String => 51,
            Ppid::BinaryPartial => 52,
            Ppid::Binary => 53,
            Ppid::StringPartial => 54,
            Ppid::StringEmpty => 56,
            Ppid::BinaryEmpty => 57,
        }
    }

    /// The identifier for a wire value, if WebRTC defines it.
    pub fn from_value(value: u32) -> Option<Ppid> {
        Some(match value {
            50 => Ppid::Dcep,
            51 => Ppid::String,
            52 => Ppid::BinaryPartial,
            53 => Ppid::Binary,
            54 => Ppid::StringPartial,
            56 => Ppid::StringEmpty,
            57 => Ppid::BinaryEmpty,
            _ => return None,
        })
    }
}

/// How SCTP is to deliver a message (RFC 8831 §6.4, with the partial reliability of
/// RFC 3758).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Retransmitted until acknowledged.
    Reliable,
    /// Abandoned after this many retransmissions.
    MaxRetransmits(u32),
    /// Abandoned when it would be sent or sent again this many milliseconds after it was
    /// queued.
    MaxLifetimeMs(u32),
}

/// The channel type of DATA_CHANNEL_OPEN (RFC 8832 §5.1): reliability and ordering. The wire
/// codes are 0x00/0x80 reliable, 0x01/0x81 limited retransmissions, 0x02/0x82 limited
/// lifetime; the high bit marks unordered delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelType {
    /// DATA_CHANNEL_RELIABLE (0x00) or DATA_CHANNEL_RELIABLE_UNORDERED (0x80).
    Reliable {
        /// In order within the channel.
        ordered: bool,
    },
    /// DATA_CHANNEL_PARTIAL_RELIABLE_REXMIT (0x01) or its unordered form (0x81).
    PartialReliableRexmit {
        /// In order within the channel.
        ordered: bool,
        /// Retransmissions before a message is abandoned.
        max_retransmits: u32,
    },
    /// DATA_CHANNEL_PARTIAL_RELIABLE_TIMED (0x02) or its unordered form (0x82).
    PartialReliableTimed {
        /// In order within the channel.
        ordered: bool,
        /// Milliseconds before a message is abandoned.
        lifetime_ms: u32,
    },
}

/// As RFC 8832 §5.1 names the channel types, e.g. "reliable, ordered", "partially reliable
/// (3 retransmissions), unordered".
impl std::fmt::Display for ChannelType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ordered = match *self {
            ChannelType::Reliable { ordered } => {
                f.write_str("reliable")?;
                ordered
            }
            ChannelType::PartialReliableRexmit { ordered, max_retransmits } => {
                write!(f, "partially reliable ({max_retransmits} retransmissions)")?;
                ordered
            }
            ChannelType::PartialReliableTimed { ordered, lifetime_ms } => {
                write!(f, "partially reliable ({lifetime_ms} ms lifetime)")?;
                ordered
            }
        };
        f.write_str(if ordered { ", ordered" } else { ", unordered" })
    }
}

impl ChannelType {
    /// What a browser opens by default: reliable and ordered.
    pub const RELIABLE: ChannelType = ChannelType::Reliable { ordered: true };

    /// The channel type byte.
    pub fn code(self) -> u8 {
        let (base, ordered) = match self {
            ChannelType::Reliable { ordered } => (0x00, ordered),
            ChannelType::PartialReliableRexmit { ordered, .. } => (0x01, ordered),
            ChannelType::PartialReliableTimed { ordered, .. } => (0x02, ordered),
        };
        if ordered {
            base
        } else {
            base | 0x80
        }
    }

    /// The reliability parameter: 0 for reliable channels (RFC 8832 §5.1 has the sender set
    /// it so), the retransmission count or the lifetime otherwise.
    pub fn reliability_parameter(self) -> u32 {
        match self {
            ChannelType::Reliable { .. } => 0,
            ChannelType::PartialReliableRexmit { max_retransmits, .. } => max_retransmits,
            ChannelType::PartialReliableTimed { lifetime_ms, .. } => lifetime_ms,
        }
    }

    /// The channel type for a type byte and reliability parameter. The parameter of a
    /// reliable channel is ignored, as RFC 8832 §5.1 has the receiver do.
    pub fn from_wire(code: u8, parameter: u32) -> Result<ChannelType, MessageError> {
        let ordered = code & 0x80 == 0;
        Ok(match code & 0x7f {
            0x00 => ChannelType::Reliable { ordered },
            0x01 => ChannelType::PartialReliableRexmit { ordered, max_retransmits: parameter },
            0x02 => ChannelType::PartialReliableTimed { ordered, lifetime_ms: parameter },
            _ => return Err(MessageError::UnknownChannelType(code)),
        })
    }

    /// Whether messages are delivered in order.
    pub fn ordered(self) -> bool {
        self.code() & 0x80 == 0
    }

    /// How SCTP is to send the channel's messages.
    pub fn reliability(self) -> Reliability {
        match self {
            ChannelType::Reliable { .. } => Reliability::Reliable,
            ChannelType::PartialReliableRexmit { max_retransmits, .. } => {
                Reliability::MaxRetransmits(max_retransmits)
            }
            ChannelType::PartialReliableTimed { lifetime_ms, .. } => Reliability::MaxLifetimeMs(lifetime_ms),
        }
    }
}

/// A DATA_CHANNEL_OPEN (RFC 8832 §5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Open {
    /// Reliability and ordering.
    pub channel_type: ChannelType,
    /// The priority (see [`priority`]).
    pub priority: u16,
    /// The channel's name, UTF-8, at most 65535 bytes; may be empty.
    pub label: String,
    /// The subprotocol (an IANA WebSocket subprotocol name), UTF-8, at most 65535 bytes;
    /// may be empty.
    pub protocol: String,
}

/// A DCEP message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DcepMessage {
    /// DATA_CHANNEL_OPEN.
    Open(Open),
    /// DATA_CHANNEL_ACK.
    Ack,
}

impl DcepMessage {
    /// Parses one message (the whole payload of an SCTP message with PPID 50).
    pub fn parse(data: &[u8]) -> Result<DcepMessage, MessageError> {
        let mut r = Reader::new(data);
        match r.u8().map_err(|_| MessageError::Empty)? {
            OPEN => {
                // RFC 8832 §5.1: type, channel type, priority, reliability parameter, label
                // length, protocol length, label, protocol.
                let code = r.u8()?;
                let priority = r.u16()?;
                let parameter = r.u32()?;
                let label_len = usize::from(r.u16()?);
                let protocol_len = usize::from(r.u16()?);
                let label = r.take(label_len)?;
                let protocol = r.take(protocol_len)?;
                r.finish()?;
                let channel_type = ChannelType::from_wire(code, parameter)?;
                let label =
                    std::str::from_utf8(label).map_err(|_| MessageError::InvalidUtf8 { field: "label" })?;
                let protocol = std::str::from_utf8(protocol)
                    .map_err(|_| MessageError::InvalidUtf8 { field: "protocol" })?;
                Ok(DcepMessage::Open(Open {
                    channel_type,
                    priority,
                    label: label.to_owned(),
                    protocol: protocol.to_owned(),
                }))
            }
            // RFC 8832 §5.2: the type byte alone. pion/datachannel sends it padded to 4 bytes
            // (0x02 0x00 0x00 0x00), and libwebrtc reads only the type, so whatever follows the
            // type is ignored: refusing it would leave every channel opened to pion unacked.
            ACK => Ok(DcepMessage::Ack),
            other => Err(MessageError::UnknownType(other)),
        }
    }

    /// Encodes the message; fails if a label or protocol is longer than 65535 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, DcepError> {
        match self {
            DcepMessage::Ack => Ok(vec![ACK]),
            DcepMessage::Open(open) => {
                let label_len = name_len("label", &open.label)?;
                let protocol_len = name_len("protocol", &open.protocol)?;
                let mut out = Vec::with_capacity(12 + open.label.len() + open.protocol.len());
                put_u8(&mut out, OPEN);
                put_u8(&mut out, open.channel_type.code());
                put_u16(&mut out, open.priority);
                put_u32(&mut out, open.channel_type.reliability_parameter());
                put_u16(&mut out, label_len);
                put_u16(&mut out, protocol_len);
                out.extend_from_slice(open.label.as_bytes());
                out.extend_from_slice(open.protocol.as_bytes());
                Ok(out)
            }
        }
    }
}

fn name_len(field: &'static str, name: &str) -> Result<u16, DcepError> {
    u16::try_from(name.len()).map_err(|_| DcepError::NameTooLong { field, len: name.len() })
}

/// Why a DCEP message could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// No bytes at all.
    #[error("empty DCEP message")]
    Empty,
    /// The message ends inside a field or inside the label or protocol.
    #[error("DCEP message truncated")]
    Truncated,
    /// Bytes follow the message.
    #[error("bytes after the end of the DCEP message")]
    TrailingBytes,
    /// A field holds a forbidden value.
    #[error("invalid DCEP field: {0}")]
    Invalid(&'static str),
    /// Neither OPEN (0x03) nor ACK (0x02).
    #[error("unknown DCEP message type {0:#04x}")]
    UnknownType(u8),
    /// Not one of the six channel types of RFC 8832 §5.1.
    #[error("unknown channel type {0:#04x}")]
    UnknownChannelType(u8),
    /// The label or the protocol is not UTF-8 (RFC 8832 §5.1 requires it).
    #[error("the {field} is not valid UTF-8")]
    InvalidUtf8 {
        /// `label` or `protocol`.
        field: &'static str,
    },
}

impl From<DecodeError> for MessageError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::Truncated => MessageError::Truncated,
            DecodeError::TrailingBytes => MessageError::TrailingBytes,
            DecodeError::Invalid(what) => MessageError::Invalid(what),
        }
    }
}

/// Why the channel table refused a message or an operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DcepError {
    /// A DCEP message that cannot be read on a stream without a channel: a broken OPEN, which
    /// RFC 8832 §6 has us refuse by closing the channel (reset the stream), with no ACK.
    #[error("stream {stream}: unreadable DCEP message where an OPEN was expected: {error}")]
    BadOpen {
        /// The stream.
        stream: u16,
        /// What is wrong with the message.
        error: MessageError,
    },
    /// A DCEP message that cannot be read on a channel's stream; dropped.
    #[error("stream {stream}: unreadable DCEP message: {error}")]
    Malformed {
        /// The stream.
        stream: u16,
        /// What is wrong with the message.
        error: MessageError,
    },
    /// An OPEN on a stream id of our parity: only we may open those (RFC 8832 §6: the DTLS
    /// client uses even ids, the server odd ones). Refused by closing it.
    #[error("stream {stream}: the peer opened a channel on a stream id of our parity")]
    WrongParity {
        /// The stream.
        stream: u16,
    },
    /// An OPEN on a stream whose channel is open: RFC 8832 §6 has us close that channel.
    #[error("stream {stream}: DATA_CHANNEL_OPEN on a stream already in use; the channel is now closing")]
    StreamInUse {
        /// The stream.
        stream: u16,
    },
    /// An OPEN on stream 65535, past [`MAX_STREAM`]. Refused by closing it.
    #[error("stream 65535 cannot carry a data channel")]
    ReservedStream,
    /// An OPEN past [`MAX_CHANNELS`] or [`MAX_NAME_BYTES`]. Refused by closing it.
    #[error("stream {stream}: channel refused, the table holds its maximum ({MAX_CHANNELS} channels, {MAX_NAME_BYTES} bytes of labels and protocols)")]
    TableFull {
        /// The stream.
        stream: u16,
    },
    /// User data or an ACK on a stream without a channel: no OPEN came before it. Dropped.
    #[error("stream {stream}: no data channel on this stream")]
    UnknownStream {
        /// The stream.
        stream: u16,
    },
    /// An ACK for a channel the peer opened, or a second ACK. Dropped.
    #[error("stream {stream}: DATA_CHANNEL_ACK that answers no OPEN of ours")]
    UnexpectedAck {
        /// The stream.
        stream: u16,
    },
    /// PPID 52 or 54: fragments of a message split by the deprecated PPID-based scheme
    /// (RFC 8831 §6.6). Refused rather than delivered as if whole, which would hand the
    /// application a piece of a message as a message.
    #[error("stream {stream}: deprecated partial-message PPID {ppid}")]
    DeprecatedPpid {
        /// The stream.
        stream: u16,
        /// 52 or 54.
        ppid: u32,
    },
    /// A PPID that WebRTC does not define.
    #[error("stream {stream}: PPID {ppid} is not a WebRTC payload protocol identifier")]
    UnknownPpid {
        /// The stream.
        stream: u16,
        /// The PPID.
        ppid: u32,
    },
    /// We cannot open another channel: the table is full or no stream id of our parity is
    /// free.
    #[error("no free stream for a new channel ({MAX_CHANNELS} channels at most)")]
    NoFreeStream,
    /// A label or protocol longer than a DATA_CHANNEL_OPEN can carry.
    #[error("the {field} is {len} bytes, more than the 65535 a DATA_CHANNEL_OPEN carries")]
    NameTooLong {
        /// `label` or `protocol`.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// Sending on a channel we are closing.
    #[error("stream {stream}: the channel is closing")]
    Closing {
        /// The stream.
        stream: u16,
    },
    /// A negotiated channel on stream 65535 or on a stream in use.
    #[error("stream {stream}: not free for a negotiated channel")]
    StreamTaken {
        /// The stream.
        stream: u16,
    },
}

impl DcepError {
    /// The stream to reset, when RFC 8832 §6 says the answer to this error is closing the
    /// channel (RFC 8831 §6.7: a channel is closed by resetting its stream). After the
    /// reset completes, call [`Channels::reset`].
    pub fn stream_to_reset(&self) -> Option<u16> {
        match *self {
            DcepError::BadOpen { stream, .. }
            | DcepError::WrongParity { stream }
            | DcepError::StreamInUse { stream }
            | DcepError::TableFull { stream } => Some(stream),
            _ => None,
        }
    }
}

/// A message for the SCTP layer to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The stream.
    pub stream: u16,
    /// The payload protocol identifier.
    pub ppid: u32,
    /// Delivered outside the stream's order.
    pub unordered: bool,
    /// Retransmission policy.
    pub reliability: Reliability,
    /// The payload.
    pub data: Vec<u8>,
}

impl Outgoing {
    /// A DCEP message: ordered and reliable whatever the channel (RFC 8832 §6).
    fn dcep(stream: u16, data: Vec<u8>) -> Outgoing {
        Outgoing {
            stream,
            ppid: Ppid::Dcep.value(),
            unordered: false,
            reliability: Reliability::Reliable,
            data,
        }
    }
}

/// Our DTLS role, which decides the parity of the stream ids we open (RFC 8832 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DtlsRole {
    /// DTLS client (`a=setup:active`): even stream ids.
    Client,
    /// DTLS server (`a=setup:passive`, what our SDP answer says): odd stream ids.
    Server,
}

impl DtlsRole {
    /// The parity (0 even, 1 odd) of the stream ids this role opens.
    pub fn parity(self) -> u16 {
        match self {
            DtlsRole::Client => 0,
            DtlsRole::Server => 1,
        }
    }
}

/// Where a channel stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelState {
    /// We sent the OPEN and have heard nothing on the stream yet.
    Opening,
    /// Usable both ways.
    Open,
    /// We closed it (or refused a second OPEN on it); waiting for the stream reset.
    Closing,
}

/// One data channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channel {
    /// Its label.
    pub label: String,
    /// Its subprotocol.
    pub protocol: String,
    /// Reliability and ordering.
    pub channel_type: ChannelType,
    /// Its priority.
    pub priority: u16,
    /// Whether we sent the OPEN (or registered it as negotiated).
    pub opened_locally: bool,
    /// Where it stands.
    pub state: ChannelState,
    /// Whether the peer's ACK came.
    acked: bool,
}

/// Something the peer did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelEvent {
    /// The peer opened a channel. Send `ack` (RFC 8832 §6: a DATA_CHANNEL_ACK on our stream
    /// of the same id); the channel is usable at once, before the ACK leaves.
    Opened {
        /// The stream.
        stream: u16,
        /// The label.
        label: String,
        /// The subprotocol.
        protocol: String,
        /// Reliability and ordering.
        channel_type: ChannelType,
        /// The priority.
        priority: u16,
        /// The DATA_CHANNEL_ACK to send.
        ack: Outgoing,
    },
    /// The peer acknowledged a channel we opened.
    Acked {
        /// The stream.
        stream: u16,
    },
    /// A message arrived.
    Message {
        /// The stream.
        stream: u16,
        /// The payload; empty for PPIDs 56 and 57, whatever the byte that carried them
        /// (RFC 8831 §6.6). String payloads are not checked for UTF-8.
        data: Vec<u8>,
        /// PPID 53/57 (binary) rather than 51/56 (string).
        binary: bool,
    },
}

/// The data channels of one association.
#[derive(Clone, Debug)]
pub struct Channels {
    role: DtlsRole,
    channels: BTreeMap<u16, Channel>,
    name_bytes: usize,
}

impl Channels {
    /// An empty table for the side with DTLS role `role`.
    pub fn new(role: DtlsRole) -> Channels {
        Channels { role, channels: BTreeMap::new(), name_bytes: 0 }
    }

    /// Our DTLS role.
    pub fn role(&self) -> DtlsRole {
        self.role
    }

    /// The channel on `stream`.
    pub fn get(&self, stream: u16) -> Option<&Channel> {
        self.channels.get(&stream)
    }

    /// The channels, by stream id.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &Channel)> {
        self.channels.iter().map(|(s, c)| (*s, c))
    }

    /// How many channels the table holds.
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    /// Whether the table holds none.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// Opens a channel on the lowest free stream id of our parity and returns the stream and
    /// the DATA_CHANNEL_OPEN to send. Messages may be sent on it at once ([`Channels::send`]).
    pub fn open(
        &mut self,
        label: &str,
        protocol: &str,
        channel_type: ChannelType,
        priority: u16,
    ) -> Result<(u16, Outgoing), DcepError> {
        let open = DcepMessage::Open(Open {
            channel_type,
            priority,
            label: label.to_owned(),
            protocol: protocol.to_owned(),
        });
        let data = open.encode()?;
        if !self.has_room(label.len() + protocol.len()) {
            return Err(DcepError::NoFreeStream);
        }
        let stream = (0..=MAX_STREAM / 2)
            .map(|n| n * 2 + self.role.parity())
            .find(|s| *s <= MAX_STREAM && !self.channels.contains_key(s))
            .ok_or(DcepError::NoFreeStream)?;
        self.insert(stream, label, protocol, channel_type, priority, true, ChannelState::Opening);
        Ok((stream, Outgoing::dcep(stream, data)))
    }

    /// Registers a channel negotiated out of band (W3C `negotiated: true`): both sides know
    /// its stream, so no DCEP message is sent and it is open at once.
    pub fn add_negotiated(
        &mut self,
        stream: u16,
        label: &str,
        protocol: &str,
        channel_type: ChannelType,
        priority: u16,
    ) -> Result<(), DcepError> {
        if stream > MAX_STREAM || self.channels.contains_key(&stream) {
            return Err(DcepError::StreamTaken { stream });
        }
        if !self.has_room(label.len() + protocol.len()) {
            return Err(DcepError::NoFreeStream);
        }
        self.insert(stream, label, protocol, channel_type, priority, true, ChannelState::Open);
        if let Some(channel) = self.channels.get_mut(&stream) {
            channel.acked = true;
        }
        Ok(())
    }

    /// Handles one message SCTP delivered on `stream` with payload protocol `ppid`.
    ///
    /// - An OPEN on a free stream of the peer's parity opens the channel:
    ///   [`ChannelEvent::Opened`], which carries the ACK to send. Anything else RFC 8832 §6
    ///   refuses — an OPEN on our parity or on a stream in use, or one that cannot be read —
    ///   is an error whose [`DcepError::stream_to_reset`] names the stream to reset.
    /// - An ACK for an OPEN of ours: [`ChannelEvent::Acked`].
    /// - User data (PPID 51, 53, 56, 57) on a channel: [`ChannelEvent::Message`]. On a channel
    ///   we opened it also stands for the ACK, as the peer only sends after reading our OPEN.
    pub fn handle(&mut self, stream: u16, ppid: u32, data: &[u8]) -> Result<Option<ChannelEvent>, DcepError> {
        match Ppid::from_value(ppid) {
            Some(Ppid::Dcep) => match DcepMessage::parse(data) {
                Ok(DcepMessage::Open(open)) => self.on_open(stream, open).map(Some),
                Ok(DcepMessage::Ack) => self.on_ack(stream).map(Some),
                Err(error) if self.channels.contains_key(&stream) => {
                    Err(DcepError::Malformed { stream, error })
                }
                Err(error) => Err(DcepError::BadOpen { stream, error }),
            },
            Some(Ppid::String) => self.on_data(stream, data.to_vec(), false).map(Some),
            Some(Ppid::Binary) => self.on_data(stream, data.to_vec(), true).map(Some),
            // RFC 8831 §6.6: the byte carrying an empty message is ignored.
            Some(Ppid::StringEmpty) => self.on_data(stream, Vec::new(), false).map(Some),
            Some(Ppid::BinaryEmpty) => self.on_data(stream, Vec::new(), true).map(Some),
            Some(Ppid::StringPartial | Ppid::BinaryPartial) => {
                Err(DcepError::DeprecatedPpid { stream, ppid })
            }
            None => Err(DcepError::UnknownPpid { stream, ppid }),
        }
    }

    /// A user message for the channel on `stream`. An empty message goes as one zero byte
    /// with PPID 56 or 57, since SCTP cannot carry an empty one (RFC 8831 §6.6). On a channel
    /// we opened that the peer has not answered yet, messages go ordered even if the channel
    /// is unordered, so that none overtakes the OPEN (RFC 8832 §6).
    pub fn send(&self, stream: u16, data: &[u8], binary: bool) -> Result<Outgoing, DcepError> {
        let channel = self.channels.get(&stream).ok_or(DcepError::UnknownStream { stream })?;
        let (ppid, data) = match (data.is_empty(), binary) {
            (true, false) => (Ppid::StringEmpty, vec![0]),
            (true, true) => (Ppid::BinaryEmpty, vec![0]),
            (false, false) => (Ppid::String, data.to_vec()),
            (false, true) => (Ppid::Binary, data.to_vec()),
        };
        let unordered = match channel.state {
            ChannelState::Closing => return Err(DcepError::Closing { stream }),
            ChannelState::Opening => false,
            ChannelState::Open => !channel.channel_type.ordered(),
        };
        Ok(Outgoing {
            stream,
            ppid: ppid.value(),
            unordered,
            reliability: channel.channel_type.reliability(),
            data,
        })
    }

    /// Marks the channel on `stream` as closing. The caller resets the stream in SCTP
    /// (RFC 8831 §6.7) and calls [`Channels::reset`] when that is done; messages that still
    /// arrive meanwhile are delivered.
    pub fn close(&mut self, stream: u16) -> Result<(), DcepError> {
        let channel = self.channels.get_mut(&stream).ok_or(DcepError::UnknownStream { stream })?;
        channel.state = ChannelState::Closing;
        Ok(())
    }

    /// Forgets the channel on `stream` once its stream was reset (by either side), so that
    /// the id can be used again. Returns the channel, if there was one.
    pub fn reset(&mut self, stream: u16) -> Option<Channel> {
        let channel = self.channels.remove(&stream)?;
        self.name_bytes -= channel.label.len() + channel.protocol.len();
        Some(channel)
    }

    fn has_room(&self, name_bytes: usize) -> bool {
        self.channels.len() < MAX_CHANNELS && self.name_bytes + name_bytes <= MAX_NAME_BYTES
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        stream: u16,
        label: &str,
        protocol: &str,
        channel_type: ChannelType,
        priority: u16,
        opened_locally: bool,
        state: ChannelState,
    ) {
        self.name_bytes += label.len() + protocol.len();
        self.channels.insert(
            stream,
            Channel {
                label: label.to_owned(),
                protocol: protocol.to_owned(),
                channel_type,
                priority,
                opened_locally,
                state,
                acked: false,
            },
        );
    }

    fn on_open(&mut self, stream: u16, open: Open) -> Result<ChannelEvent, DcepError> {
        if stream > MAX_STREAM {
            return Err(DcepError::ReservedStream);
        }
        if stream % 2 == self.role.parity() {
            return Err(DcepError::WrongParity { stream });
        }
        if let Some(channel) = self.channels.get_mut(&stream) {
            // RFC 8832 §6: an OPEN on a used stream closes the channel, and is not acked.
            channel.state = ChannelState::Closing;
            return Err(DcepError::StreamInUse { stream });
        }
        if !self.has_room(open.label.len() + open.protocol.len()) {
            return Err(DcepError::TableFull { stream });
        }
        self.insert(
            stream,
            &open.label,
            &open.protocol,
            open.channel_type,
            open.priority,
            false,
            ChannelState::Open,
        );
        Ok(ChannelEvent::Opened {
            stream,
            label: open.label,
            protocol: open.protocol,
            channel_type: open.channel_type,
            priority: open.priority,
            ack: Outgoing::dcep(stream, vec![ACK]),
        })
    }

    fn on_ack(&mut self, stream: u16) -> Result<ChannelEvent, DcepError> {
        let channel = self.channels.get_mut(&stream).ok_or(DcepError::UnknownStream { stream })?;
        if !channel.opened_locally || channel.acked {
            return Err(DcepError::UnexpectedAck { stream });
        }
        channel.acked = true;
        if channel.state == ChannelState::Opening {
            channel.state = ChannelState::Open;
        }
        Ok(ChannelEvent::Acked { stream })
    }

    fn on_data(&mut self, stream: u16, data: Vec<u8>, binary: bool) -> Result<ChannelEvent, DcepError> {
        let channel = self.channels.get_mut(&stream).ok_or(DcepError::UnknownStream { stream })?;
        // The peer read our OPEN before sending this, so unordered sending is safe from now
        // on even if the ACK is still under way (RFC 8832 §6 only orders messages until then).
        if channel.state == ChannelState::Opening {
            channel.state = ChannelState::Open;
        }
        Ok(ChannelEvent::Message { stream, data, binary })
    }
}

/// The fuzz target's body: `data` as a DCEP message, which when it parses must encode and
/// parse back to itself; then `data` as a run of SCTP messages for a channel table, each
/// `[stream, ppid - 50, length, payload...]`, with our own opens and sends in between.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    if let Ok(message) = DcepMessage::parse(data) {
        let bytes = message.encode().expect("a parsed message fits its length fields");
        assert_eq!(DcepMessage::parse(&bytes), Ok(message));
    }
    let mut table = Channels::new(if data.first().is_some_and(|b| b & 1 == 1) {
        DtlsRole::Server
    } else {
        DtlsRole::Client
    });
    let mut rest = data;
    while let [stream, ppid, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (payload, next) = tail.split_at(len);
        rest = next;
        let stream = u16::from(*stream);
        match table.handle(stream, 50 + u32::from(*ppid % 10), payload) {
            Ok(Some(ChannelEvent::Opened { ack, .. })) => assert_eq!(ack.data, [ACK]),
            Ok(_) => {}
            Err(e) => {
                if let Some(s) = e.stream_to_reset() {
                    table.reset(s);
                }
            }
        }
        match *ppid % 7 {
            0 => {
                let _ = table.open("f", "", ChannelType::RELIABLE, priority::NORMAL);
            }
            1 => {
                if let Ok(out) = table.send(stream, payload, payload.len() % 2 == 1) {
                    assert!(!out.data.is_empty());
                }
            }
            2 => {
                let _ = table.close(stream);
            }
            _ => {}
        }
        assert!(table.len() <= MAX_CHANNELS);
    }
}
