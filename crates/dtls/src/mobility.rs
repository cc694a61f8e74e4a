//! Session mobility: the per-session state of Connection IDs (RFC 9146), the return-routability
//! check (RFC 9853), session sockets and port moves. Boxed in the connection and created only
//! when one of them is in use, so a session without mobility pays one pointer.

use fastshake_core::Instant;
use rand_chacha::ChaCha20Rng;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// `connection_id` extension (RFC 9146 §3).
pub(crate) const EXT_CONNECTION_ID: u16 = 54;
/// `rrc` extension (RFC 9853 §2; IANA TLS ExtensionType 61).
pub(crate) const EXT_RRC: u16 = 61;
/// `port_move`: fastshake's own extension, from the "Reserved for Private Use" range
/// 0xFF00-0xFFFF of the TLS ExtensionType registry (RFC 8446 §11). Empty in both hellos.
pub(crate) const EXT_PORT_MOVE: u16 = 0xFF00;

/// Record content type `tls12_cid` (RFC 9146 §4).
pub(crate) const CONTENT_TLS12_CID: u8 = 25;
/// Record content type `return_routability_check` (RFC 9853 §3; IANA TLS ContentType 27).
pub(crate) const CONTENT_RRC: u8 = 27;

/// RFC 9853 §3 message types.
pub(crate) const RRC_PATH_CHALLENGE: u8 = 0;
pub(crate) const RRC_PATH_RESPONSE: u8 = 1;
pub(crate) const RRC_PATH_DROP: u8 = 2;
/// fastshake's port announcement (`port_moved`, followed by the new uint16 port), a
/// return_routability_check message of type 254, from the "Reserved for Private Use" values
/// 254-255 of the RRC Message Types registry RFC 9853 creates. Sent only when both sides
/// negotiated `port_move`.
pub(crate) const RRC_PORT_MOVED: u8 = 254;

/// Path challenges sent for one new address before giving up on it.
pub(crate) const MAX_CHALLENGES: u32 = 4;
/// Datagrams held while a new peer address is checked; older ones are dropped first.
pub(crate) const MAX_HELD_DATAGRAMS: usize = 8;
/// RFC 9853: at most this many times the bytes received from an unverified address are sent to it.
pub(crate) const AMPLIFICATION_FACTOR: u64 = 3;

/// Counters of session mobility ([`crate::Connection::mobility_stats`]); all zero for a session
/// without it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MobilityStats {
    /// path_challenge messages sent (RFC 9853), retransmissions included.
    pub path_challenges_sent: u64,
    /// path_response messages sent in answer to the peer's challenges.
    pub path_responses_sent: u64,
    /// Address checks that failed (no matching path_response in time).
    pub path_validations_failed: u64,
    /// Times the session started sending to a new peer address (`Event::PathChanged`).
    pub path_changes: u64,
    /// Bytes of datagrams held back while a new peer address was checked (only path challenges
    /// go to it, within 3x the bytes received from it); sent to the verified address, or to the
    /// old one when the check fails.
    pub bytes_held_by_amplification_limit: u64,
    /// Bytes of held datagrams dropped (the hold is bounded, or the check failed).
    pub bytes_dropped_by_amplification_limit: u64,
    /// Port announcements sent (TCS `move_to`), retransmissions included.
    pub port_announcements_sent: u64,
}

/// A new peer address being checked (RFC 9853 §4 "basic" check).
#[derive(Debug)]
pub(crate) struct Probe {
    pub addr: SocketAddr,
    /// Cookies of the challenges sent (each challenge carries fresh random data).
    pub cookies: Vec<[u8; 8]>,
    /// Bytes received from `addr` (authenticated or not: every datagram that reached us).
    pub bytes_received: u64,
    /// Bytes sent to `addr` so far.
    pub bytes_sent: u64,
    pub challenges_sent: u32,
    pub deadline: Instant,
    pub interval: Duration,
}

/// A port move announced to the client and not yet confirmed.
#[derive(Debug)]
pub(crate) struct PortMove {
    pub local: SocketAddr,
    pub deadline: Instant,
    pub interval: Duration,
}

/// Per-session mobility state.
#[derive(Default)]
pub(crate) struct PathState {
    /// CID we write into records we send (the peer's choice); empty: plain records.
    pub peer_cid: Vec<u8>,
    /// CID the peer writes into records to us (our choice); empty: none.
    pub own_cid: Vec<u8>,
    /// Both sides agreed on `connection_id`.
    pub cid_negotiated: bool,
    /// Both sides agreed on `rrc`.
    pub rrc: bool,
    /// Both sides agreed on `port_move`.
    pub port_move: bool,
    /// Client offered / server saw: the extensions of our hello, before the peer's answer.
    pub offered_cid: bool,
    /// Server: the session's own socket (set_local, or the confirmed move_to target).
    pub local: Option<SocketAddr>,
    /// Server: a move announced and not yet confirmed.
    pub moving: Option<PortMove>,
    /// A new peer address under check.
    pub probe: Option<Probe>,
    /// Datagrams for `probe.addr` over its amplification allowance, sent once it is verified.
    pub held: VecDeque<Vec<u8>>,
    /// Datagrams with a destination of their own (path challenges and responses).
    pub direct: VecDeque<(SocketAddr, Vec<u8>)>,
    /// The peer address before the last change, until the endpoint moved its index.
    pub moved_from: Option<SocketAddr>,
    /// Randomness for path_challenge cookies (server with `rrc`).
    pub rng: Option<ChaCha20Rng>,
    pub stats: MobilityStats,
}

impl PathState {
    /// Whether the session may follow its peer to a new address (RFC 9146 §6 needs a CID; a
    /// session with its own socket is found by that socket whatever the source).
    pub fn may_follow_peer(&self) -> bool {
        self.cid_negotiated || self.local.is_some() || self.moving.is_some()
    }

    /// The earliest timer: a path challenge or a port announcement to resend.
    pub fn deadline(&self) -> Option<Instant> {
        let probe = self.probe.as_ref().map(|p| p.deadline);
        let moving = self.moving.as_ref().map(|m| m.deadline);
        [probe, moving].into_iter().flatten().min()
    }
}
