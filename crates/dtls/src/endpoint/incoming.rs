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
    /// A DTLS 1.3 unified header whose C bit is set: the length of its CID (the receiver's,
    /// as the header has no length byte, RFC 9147 §4).
    pub(super) cid13: Option<u8>,
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
        let cid13 = cid13_len(bytes, cid_len);
        let first = match cid13 {
            Some(_) => None,
            None => RecordHeader::parse(&mut Reader::new(bytes), cid_len).ok(),
        };
        Incoming { bytes, first, cid13 }
    }

    /// The Connection ID of its first record, when that is a `tls12_cid` record (RFC 9146 §4)
    /// or a DTLS 1.3 record with the C bit (RFC 9147 §4), with a CID of the length this
    /// endpoint issues.
    pub fn connection_id(&self) -> Option<&[u8]> {
        if let Some(n) = self.cid13 {
            return self.bytes.get(1..1 + usize::from(n));
        }
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

/// The CID length of a datagram that starts with a DTLS 1.3 unified header carrying a CID and
/// is long enough to hold one of `cid_len` bytes; `None` otherwise (also when we issue none,
/// so such a record reaches no session by CID).
fn cid13_len(bytes: &[u8], cid_len: u8) -> Option<u8> {
    let first = *bytes.first()?;
    let with_cid = crate::record::unified::is_unified(first) && first & crate::record::unified::CID_BIT != 0;
    (with_cid && cid_len > 0 && bytes.len() > usize::from(cid_len)).then_some(cid_len)
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
    /// Copied out of its datagram, to keep.
    Reassembled(Vec<u8>),
    /// Reassembled from fragments (RFC 6347 §4.2.3), `earlier` counting the datagrams before
    /// the one that completed it which carried some.
    Fragmented { body: Vec<u8>, earlier: EarlierDatagrams },
}

/// Datagrams that carried fragments of a ClientHello before the one that completed it, and
/// their bytes (UDP payload): the session made from it counts them as received, duplicates
/// too, as it counts every datagram passed in. Saturating: a partial hello is bounded in
/// bytes, not in the copies of its fragments that come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct EarlierDatagrams {
    pub datagrams: u32,
    pub bytes: u32,
}

impl EarlierDatagrams {
    /// One more datagram of `len` bytes.
    pub fn add(&mut self, len: usize) {
        self.datagrams = self.datagrams.saturating_add(1);
        self.bytes = self.bytes.saturating_add(u32::try_from(len).unwrap_or(u32::MAX));
    }
}

impl HelloInfo {
    /// The ClientHello's body; `datagram` is the one it was found in.
    pub fn body<'a>(&'a self, datagram: &'a [u8]) -> &'a [u8] {
        match &self.body {
            HelloBody::InDatagram(range) => datagram.get(range.clone()).unwrap_or_default(),
            HelloBody::Reassembled(body) | HelloBody::Fragmented { body, .. } => body,
        }
    }

    /// The datagrams before the one that completed it which carried fragments of it.
    pub fn earlier(&self) -> EarlierDatagrams {
        match &self.body {
            HelloBody::Fragmented { earlier, .. } => *earlier,
            HelloBody::InDatagram(_) | HelloBody::Reassembled(_) => EarlierDatagrams::default(),
        }
    }

    /// The same ClientHello with its `body` copied, to keep (with its earlier datagrams).
    pub fn kept(&self, body: &[u8]) -> HelloInfo {
        let body = match self.earlier() {
            earlier if earlier == EarlierDatagrams::default() => HelloBody::Reassembled(body.to_vec()),
            earlier => HelloBody::Fragmented { body: body.to_vec(), earlier },
        };
        HelloInfo { record_seq: self.record_seq, message_seq: self.message_seq, body }
    }

    /// Bytes of a kept body (none for one still in its datagram).
    pub fn body_len(&self) -> usize {
        match &self.body {
            HelloBody::InDatagram(_) => 0,
            HelloBody::Reassembled(body) | HelloBody::Fragmented { body, .. } => body.len(),
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
