//! What an endpoint reads of an incoming datagram before it decides where it goes: the first
//! record's header ([`Incoming`], read once and shared with a driver that routes by Connection
//! ID) and, for a new handshake, where its ClientHello is ([`HelloInfo`]).

use crate::record::{ContentType, RecordHeader};
use fastshake_core::codec::Reader;

/// A datagram for an [`Endpoint`](crate::Endpoint), its first record's header read once
/// ([`Endpoint::incoming`](crate::Endpoint::incoming)): the driver may route it by [`Incoming::connection_id`] (to the worker
/// or node that issued the CID) and then hands the same value to the endpoint, which reads
/// nothing again.
pub struct Incoming<'a> {
    pub(super) bytes: &'a mut [u8],
    pub(super) first: Option<RecordHeader>,
}

impl std::fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming").field("len", &self.bytes.len()).field("first", &self.first).finish()
    }
}

impl<'a> Incoming<'a> {
    /// `bytes` as a receiver of `cid_len`-byte Connection IDs reads them (an endpoint reads its
    /// own with [`crate::Endpoint::incoming`]; a fleet's router, which has no endpoint, with this).
    pub fn new(bytes: &'a mut [u8], cid_len: u8) -> Self {
        let first = RecordHeader::parse(&mut Reader::new(bytes), cid_len).ok();
        Incoming { bytes, first }
    }

    /// The Connection ID of its first record, when that is a `tls12_cid` record (RFC 9146 §4)
    /// with a CID of the length this endpoint issues.
    pub fn connection_id(&self) -> Option<&[u8]> {
        self.first.filter(|h| h.content_type == ContentType::Tls12Cid).map(|h| h.cid(self.bytes))
    }

    /// The datagram's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes
    }

    /// The datagram's length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the datagram is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A ClientHello taken from a datagram.
pub(super) struct HelloInfo {
    pub record_seq: u64,
    pub message_seq: u16,
    pub body: HelloBody,
}

/// Where a ClientHello's body is.
pub(super) enum HelloBody {
    /// In one fragment of the datagram, at this range: not copied, as a flood's hellos all are.
    InDatagram(std::ops::Range<usize>),
    /// Reassembled from fragments.
    Reassembled(Vec<u8>),
}

impl HelloInfo {
    /// The ClientHello's body; `datagram` is the one it was found in.
    pub fn body<'a>(&'a self, datagram: &'a [u8]) -> &'a [u8] {
        match &self.body {
            HelloBody::InDatagram(range) => datagram.get(range.clone()).unwrap_or_default(),
            HelloBody::Reassembled(body) => body,
        }
    }

    /// The same ClientHello with its `body` copied, to keep.
    pub fn kept(&self, body: &[u8]) -> HelloInfo {
        let body = HelloBody::Reassembled(body.to_vec());
        HelloInfo { record_seq: self.record_seq, message_seq: self.message_seq, body }
    }

    /// Bytes of a kept body (none for one still in its datagram).
    pub fn body_len(&self) -> usize {
        match &self.body {
            HelloBody::InDatagram(_) => 0,
            HelloBody::Reassembled(body) => body.len(),
        }
    }
}

/// What a datagram holds as far as new handshakes are concerned.
pub(super) enum HelloScan {
    /// No epoch-0 ClientHello.
    None,
    /// ClientHello fragments, buffered until the rest arrives.
    Partial,
    /// A whole ClientHello.
    Complete(HelloInfo),
}
