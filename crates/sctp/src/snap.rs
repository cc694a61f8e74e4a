//! SNAP, the SCTP Negotiation Acceleration Protocol (draft-hancke-tsvwg-snap-00): each side's INIT
//! chunk travels out of band, base64 in the SDP's `a=sctp-init` attribute, and each side opens the
//! association ESTABLISHED from the two INITs. No INIT, INIT-ACK, COOKIE-ECHO or COOKIE-ACK goes on
//! the wire: the first packet carries data.
//!
//! SNAP has no client and no server. Each side makes its INIT
//! ([`Endpoint::snap_init`](crate::Endpoint::snap_init)), hands its bytes to the peer, and once it
//! holds the peer's and the transport below is up calls
//! [`Endpoint::connect_snap`](crate::Endpoint::connect_snap); offerer and answerer, DTLS client and
//! DTLS server do the same, in any order. The two associations mirror each other: each side's
//! verification tag is the other's Initiate Tag, and each side's TSNs start at its own Initial TSN.
//!
//! What the draft asks, by section, and what the engine does:
//! - "Generating the Initial SDP Offer", "Generating the SDP Answer": the INIT is the one the
//!   endpoint would send over the network (streams, a_rwnd, extra local addresses, Supported
//!   Extensions with RE-CONFIG when [`Config::stream_reset`](crate::Config::stream_reset) is on
//!   and FORWARD-TSN with Forward-TSN-Supported when
//!   [`Config::partial_reliability`](crate::Config::partial_reliability) is),
//!   as a bare chunk as long as its length field says (unpadded, as browsers write it). It has no
//!   ALT-COOKIE: there is no cookie exchange left to shorten.
//! - "Answerer Processing of the SDP Offer", "Offerer Processing of the SDP Answer": the SCTP
//!   implementation validates the peer's INIT, and an invalid one is an error
//!   ([`validate_snap_init`], [`SnapError`]).
//! - "Modifying the Session": an `a=sctp-init` cannot be added to an existing association, so
//!   [`Endpoint::connect_snap`](crate::Endpoint::connect_snap) to a peer address and port that has
//!   one fails ([`SnapError::AssociationExists`]).
//! - "SCTP considerations": making our INIT and checking the peer's change no state and start no
//!   timer (no COOKIE-WAIT, no T1-init); the association is ESTABLISHED when
//!   [`Endpoint::connect_snap`](crate::Endpoint::connect_snap) is called, which the caller does
//!   once the DTLS handshake finished. Steps A-E of RFC 9260 §5.1 are skipped.
//!
//! The draft says nothing of a peer that sends an INIT on the wire all the same. The association
//! answers it as the engine answers one on any established association. With the peer's Initiate
//! Tag unchanged (the INIT it signalled, sent after all) the INIT-ACK repeats our SNAP Initiate Tag
//! and Initial TSN, as for a lost INIT-ACK, and the COOKIE-ECHO gets a COOKIE-ACK that leaves the
//! association as it was (RFC 9260 §5.2.4 case D): a peer that falls back to the four-way handshake
//! joins the same association. With another tag it is a restart (§5.2.2): the INIT-ACK carries a
//! fresh tag and the tie-tags, and its COOKIE-ECHO replaces the association (§5.2.4 case A).
//!
//! Unrecognised parameters of the peer's INIT are not reported: there is no INIT-ACK to carry them,
//! and the peer reads our INIT as we read its own. PR-SCTP (RFC 3758) is in use when both INITs
//! announce it (a browser's does), as the four-way handshake would settle it.

use std::net::SocketAddr;

use crate::association::MIN_INITIAL_RWND;
use crate::packet::{Chunk, InitChunk, ParseError, CHUNK_INIT};

/// Most bytes of a peer's SNAP INIT read: far above any real one (a browser's is 30 bytes;
/// ours 20, 25 with Supported Extensions, 30 with PR-SCTP too, and 8 or 20 more per extra
/// local address).
pub const MAX_SNAP_INIT_LEN: usize = 2048;

/// Our INIT for SNAP, made by [`Endpoint::snap_init`](crate::Endpoint::snap_init): its
/// [`SnapInit::bytes`] go to the peer out of band (the SDP's `a=sctp-init`, base64), and the value
/// itself, with the peer's INIT, to [`Endpoint::connect_snap`](crate::Endpoint::connect_snap) of
/// the same endpoint. It opens one association: `connect_snap` takes it by value and it is not
/// `Clone` (keep the bytes, which later offers and answers repeat, draft "Modifying the Session").
#[derive(Debug, PartialEq, Eq)]
pub struct SnapInit {
    init: InitChunk,
    bytes: Vec<u8>,
}

impl SnapInit {
    pub(crate) fn new(init: InitChunk) -> SnapInit {
        let bytes = Chunk::Init(init.clone()).to_unpadded_bytes();
        SnapInit { init, bytes }
    }

    /// The INIT chunk as it goes to the peer: chunk header, fixed fields and parameters, without
    /// padding after the last one.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The INIT chunk.
    pub fn chunk(&self) -> &InitChunk {
        &self.init
    }

    /// Our Initiate Tag: the verification tag of every packet the peer sends us.
    pub fn initiate_tag(&self) -> u32 {
        self.init.initiate_tag
    }

    /// Our Initial TSN: the TSN of our first DATA chunk.
    pub fn initial_tsn(&self) -> u32 {
        self.init.initial_tsn
    }
}

/// Why a SNAP association was not opened: mostly, what is wrong with the peer's INIT.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapError {
    /// The peer's INIT is longer than [`MAX_SNAP_INIT_LEN`].
    #[error("peer INIT is {0} bytes long, more than the {MAX_SNAP_INIT_LEN} read")]
    TooLong(usize),
    /// The bytes hold a chunk of another type than INIT (1).
    #[error("peer INIT is a chunk of type {0}, not an INIT (1)")]
    NotInit(u8),
    /// The bytes do not parse as a chunk: a truncated chunk, a bad chunk or parameter length.
    #[error("peer INIT is malformed: {0}")]
    Malformed(ParseError),
    /// Bytes follow the chunk and its padding.
    #[error("peer INIT is followed by {0} more bytes")]
    TrailingBytes(usize),
    /// The Initiate Tag is 0 (RFC 9260 §3.3.2: it must not be).
    #[error("peer INIT has Initiate Tag 0")]
    ZeroInitiateTag,
    /// The Number of Outbound Streams is 0 (RFC 9260 §3.3.2: it must not be).
    #[error("peer INIT announces 0 outbound streams")]
    ZeroOutboundStreams,
    /// The Number of Inbound Streams is 0 (RFC 9260 §3.3.2: it must not be).
    #[error("peer INIT announces 0 inbound streams")]
    ZeroInboundStreams,
    /// The a_rwnd is below the 1500 bytes RFC 9260 §6 asks of an initial window.
    #[error("peer INIT advertises a receiver window of {0} bytes, less than the minimum 1500")]
    WindowTooSmall(u32),
    /// The peer's Initiate Tag is ours: our own INIT was given as the peer's, or the peer drew
    /// the same tag, and each side would take the other's packets for its own.
    #[error("peer INIT has our own Initiate Tag (our INIT given as the peer's?)")]
    OwnInitiateTag,
    /// Our [`SnapInit`] is not what this endpoint's configuration makes: another endpoint made it.
    #[error("our SNAP INIT was made by an endpoint with another configuration")]
    ForeignInit,
    /// The endpoint has an association with this peer address and port already (draft
    /// "Modifying the Session": an `a=sctp-init` is not added to an existing association).
    #[error("an association with {0} port {1} exists already")]
    AssociationExists(SocketAddr, u16),
}

/// Checks a peer's SNAP INIT (the bytes of its `a=sctp-init`) as
/// [`Endpoint::connect_snap`](crate::Endpoint::connect_snap) will: one INIT chunk, nothing after it
/// but padding, well-formed parameters, an Initiate Tag and stream counts other than 0, a_rwnd at
/// least 1500. For the SDP layer, which the draft asks to refuse an invalid INIT when it gets the
/// offer or answer, before any association.
pub fn validate_snap_init(peer_init: &[u8]) -> Result<(), SnapError> {
    parse_peer_init(peer_init).map(|_| ())
}

/// The peer's SNAP INIT, parsed and checked; see [`validate_snap_init`].
pub(crate) fn parse_peer_init(bytes: &[u8]) -> Result<InitChunk, SnapError> {
    if bytes.len() > MAX_SNAP_INIT_LEN {
        return Err(SnapError::TooLong(bytes.len()));
    }
    // The type first: "not an INIT" says more than whatever its value fails on as an INIT.
    if let Some(&chunk_type) = bytes.first().filter(|t| **t != CHUNK_INIT) {
        return Err(SnapError::NotInit(chunk_type));
    }
    let (chunk, used) = Chunk::parse(bytes).map_err(SnapError::Malformed)?;
    if used < bytes.len() {
        return Err(SnapError::TrailingBytes(bytes.len() - used));
    }
    let Chunk::Init(init) = chunk else { return Err(SnapError::NotInit(chunk.chunk_type())) };
    // RFC 9260 §3.3.2: a zero tag or stream count makes the INIT invalid.
    if init.initiate_tag == 0 {
        return Err(SnapError::ZeroInitiateTag);
    }
    if init.outbound_streams == 0 {
        return Err(SnapError::ZeroOutboundStreams);
    }
    if init.inbound_streams == 0 {
        return Err(SnapError::ZeroInboundStreams);
    }
    if init.a_rwnd < MIN_INITIAL_RWND {
        return Err(SnapError::WindowTooSmall(init.a_rwnd));
    }
    Ok(init)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Param;

    fn init(params: Vec<Param>) -> InitChunk {
        InitChunk {
            initiate_tag: 7,
            a_rwnd: 1500,
            outbound_streams: 1,
            inbound_streams: 1,
            initial_tsn: 9,
            params,
        }
    }

    #[test]
    fn our_init_goes_unpadded_and_reads_back() {
        let ours = SnapInit::new(init(vec![Param::SupportedExtensions(vec![0x82])]));
        assert_eq!(ours.bytes().len(), 25, "20 fixed bytes and a 5-byte parameter, no padding");
        assert_eq!(&ours.bytes()[..4], &[1, 0, 0, 25]);
        assert_eq!(parse_peer_init(ours.bytes()), Ok(ours.chunk().clone()));
        // The padded form (as inside a packet) is the same INIT.
        let padded = Chunk::Init(ours.chunk().clone()).to_bytes();
        assert_eq!(padded.len(), 28);
        assert_eq!(parse_peer_init(&padded), Ok(ours.chunk().clone()));
    }

    #[test]
    fn the_type_is_judged_before_the_value() {
        assert_eq!(parse_peer_init(&[2, 0, 0, 4]), Err(SnapError::NotInit(2)));
        assert_eq!(parse_peer_init(&[]), Err(SnapError::Malformed(ParseError::Truncated("chunk header"))));
        assert_eq!(
            parse_peer_init(&[1, 0, 0, 8, 0, 0, 0, 1]),
            Err(SnapError::Malformed(ParseError::Truncated("INIT")))
        );
    }
}
