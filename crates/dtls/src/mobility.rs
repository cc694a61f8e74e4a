//! Session mobility: the per-session state of Connection IDs (RFC 9146), the return-routability
//! check (RFC 9853), session sockets and port moves. Boxed in the connection and created only
//! when one of them is in use, so a session without mobility pays one pointer.

use fastshake_core::Instant;
use fastshake_core::{TimerKind, TimerTable};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
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

/// RFC 9853 §3 message types.
pub(crate) const RRC_PATH_CHALLENGE: u8 = 0;
pub(crate) const RRC_PATH_RESPONSE: u8 = 1;
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

/// The mobility extensions both sides agreed on in the handshake
/// ([`crate::Connection::negotiated_mobility`]); all false for a session without any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NegotiatedMobility {
    /// Connection IDs (RFC 9146): records carry a CID and the session survives address changes.
    pub connection_id: bool,
    /// The return-routability check (RFC 9853) before data goes to a new address.
    pub return_routability: bool,
    /// `port_move`: the server may move the session to its own port after the handshake.
    pub port_move: bool,
}

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
    /// Bytes of datagrams sent while a new peer address was checked, both to it (within 3x the
    /// bytes received from it) and, as a copy, to the address in use.
    pub bytes_copied_during_checks: u64,
    /// Bytes of datagrams held back while a new peer address was checked, beyond its 3x
    /// allowance; sent to the verified address, or to the old one when the check fails.
    pub bytes_held_by_amplification_limit: u64,
    /// Bytes of held datagrams dropped (the hold is bounded, or the check failed).
    pub bytes_dropped_by_amplification_limit: u64,
    /// Port announcements sent (TCS `move_to`), retransmissions included.
    pub port_announcements_sent: u64,
}

impl MobilityStats {
    /// The counts in `stats`, made zero at first use.
    pub(crate) fn made(stats: &mut Option<Box<MobilityStats>>) -> &mut MobilityStats {
        stats.get_or_insert_with(Default::default)
    }
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
    /// Wait before the next challenge (it doubles, up to the retransmission ceiling).
    pub interval: Duration,
}

/// A port move announced to the client and not yet confirmed.
#[derive(Debug)]
pub(crate) struct PortMove {
    pub local: SocketAddr,
    /// Wait before the announcement after the next one.
    pub interval: Duration,
}

/// The timers of session mobility.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathTimer {
    /// Resend the path_challenge, or give the check up (RFC 9853 §4).
    Challenge,
    /// Resend the port announcement.
    Announce,
}

impl TimerKind for PathTimer {
    const ALL: &'static [Self] = &[PathTimer::Challenge, PathTimer::Announce];
    fn index(self) -> usize {
        self as usize
    }
}

/// What exists only while a path is checked, a port move announced, or a datagram with a
/// destination of its own waits: boxed apart and freed when idle, so a settled session keeps
/// only `PathState`.
#[derive(Default)]
pub(crate) struct Transient {
    /// A new peer address under check.
    pub probe: Option<Probe>,
    /// Server: a move announced and not yet confirmed.
    pub moving: Option<PortMove>,
    /// Datagrams held while `probe` runs, sent to whichever address it leaves in use.
    pub held: VecDeque<Vec<u8>>,
    /// Datagrams with a destination of their own (path challenges and responses).
    pub direct: VecDeque<(SocketAddr, Vec<u8>)>,
    /// When the challenge or the announcement is resent.
    pub timers: TimerTable<PathTimer, 2>,
}

/// Per-session mobility state: what every session with a CID or a path check needs, and the
/// rest boxed apart in [`PathMore`], made only when a session uses it, so that a CID session
/// that stays where it is keeps its two CIDs and a few flags in one allocation.
#[derive(Default)]
pub(crate) struct PathState {
    /// Read through [`PathState::own_cid`] and [`PathState::peer_cid`].
    pub cids: InlineCids,
    /// Both sides agreed on `connection_id`.
    pub cid_negotiated: bool,
    /// Both sides agreed on `rrc`.
    pub rrc: bool,
    /// Both sides agreed on `port_move`.
    pub port_move: bool,
    /// Client: `connection_id` is offered in our ClientHello.
    pub offered_cid: bool,
    pub more: Option<Box<PathMore>>,
}

/// Bytes of the two CIDs kept in [`PathState`] itself: two of 8 bytes (the common lengths, and
/// what a fleet's routing prefix takes) fit, longer ones go to [`PathMore`].
const INLINE_CIDS: usize = 26;

/// The session's two Connection IDs, ours (the peer writes it into records to us; empty: none)
/// then the peer's (we write it into ours; empty: plain records), when they fit here.
#[derive(Default)]
pub(crate) struct InlineCids {
    own_len: u8,
    peer_len: u8,
    bytes: [u8; INLINE_CIDS],
}

/// What only some sessions need: an own socket, path checks, counts of moves, 1.3 CID updates,
/// CIDs too long to keep inline.
#[derive(Default)]
pub(crate) struct PathMore {
    /// Both CIDs, ours first, when together they are longer than [`INLINE_CIDS`]; behind one
    /// pointer more, as sessions with CIDs this long are rare.
    long_cids: Option<Box<Box<[u8]>>>,
    /// Server: the session's own socket (set_local, or the confirmed move_to target).
    pub local: Option<SocketAddr>,
    /// Server with `rrc`: where its path_challenge cookies come from.
    pub cookies: Option<Box<ChallengeCookies>>,
    pub transient: Option<Box<Transient>>,
    /// Made at the first thing counted.
    pub stats: Option<Box<MobilityStats>>,
    /// DTLS 1.3 CID updates (RFC 9147 §9), made at the first NewConnectionId or
    /// RequestConnectionId.
    pub cids13: Option<Box<Cids13>>,
}

impl PathMore {
    /// The state in `more`, made at first use.
    pub fn made(more: &mut Option<Box<PathMore>>) -> &mut PathMore {
        more.get_or_insert_with(Default::default)
    }

    fn is_empty(&self) -> bool {
        self.long_cids.is_none()
            && self.local.is_none()
            && self.cookies.is_none()
            && self.transient.is_none()
            && self.stats.is_none()
            && self.cids13.is_none()
    }
}

/// The secret seed of a server's path_challenge cookies: the n-th cookie is the start of
/// ChaCha20 stream n under it, so no generator state is kept.
pub(crate) struct ChallengeCookies {
    pub seed: [u8; 32],
    pub made: u64,
}

/// CIDs of a DTLS 1.3 session besides the two of the handshake (RFC 9147 §9).
#[derive(Default)]
pub(crate) struct Cids13 {
    /// More CIDs of ours the peer may write besides `PathState::own_cid`.
    pub issued: Vec<Box<[u8]>>,
    /// CIDs of ours replaced by an immediate batch: still read until the peer writes a newer
    /// one, then forgotten.
    pub retiring: Vec<Box<[u8]>>,
    /// The peer's spare CIDs, in the order it gave them (§9: used in that order).
    pub spares: VecDeque<Box<[u8]>>,
    /// Our RequestConnectionId awaits its NewConnectionId (§9: one at a time).
    pub requested: bool,
    /// The peer asked for this many CIDs while a NewConnectionId of ours was unacknowledged
    /// (§9: one at a time): answered once it is.
    pub owed: Option<u8>,
    /// Client: our CIDs are the starts of ChaCha20 streams under this seed, the n-th of
    /// stream n, so no generator state is kept (a server's come from its endpoint).
    pub seed: Option<[u8; 32]>,
    pub made: u64,
}

/// CIDs of ours a 1.3 session keeps routable at once (its own, issued, retiring).
pub(crate) const MAX_OWN_CIDS: usize = 8;
/// Spare CIDs of the peer kept; more are dropped (RFC 9147 §9 allows it).
pub(crate) const MAX_SPARE_CIDS: usize = 4;

impl Cids13 {
    /// The next CID of `len` bytes from the seed.
    pub fn make(&mut self, len: usize) -> Option<Box<[u8]>> {
        let seed = self.seed?;
        let mut cid = vec![0u8; len];
        let mut stream = ChaCha20Rng::from_seed(seed);
        stream.set_stream(self.made);
        stream.fill_bytes(&mut cid);
        self.made += 1;
        Some(cid.into())
    }

    /// How many CIDs of ours the peer may still be given.
    pub fn room(&self) -> usize {
        MAX_OWN_CIDS.saturating_sub(1 + self.issued.len() + self.retiring.len())
    }
}

impl PathState {
    /// The state of a session whose own CID is `own` (the peer's comes with its answer) and, for
    /// a server with `rrc`, where its path_challenge cookies come from.
    pub fn new(own: &[u8], cookies: Option<Box<ChallengeCookies>>) -> PathState {
        let mut path = PathState::default();
        path.set_own_cid(own);
        if cookies.is_some() {
            PathMore::made(&mut path.more).cookies = cookies;
        }
        path
    }

    /// Both CIDs, ours first.
    fn cid_bytes(&self) -> &[u8] {
        let len = usize::from(self.cids.own_len) + usize::from(self.cids.peer_len);
        match self.more.as_deref().and_then(|m| m.long_cids.as_deref()).map(|long| &long[..]) {
            Some(long) => long,
            None => &self.cids.bytes[..len.min(INLINE_CIDS)],
        }
    }

    /// Ours: what the peer writes into records to us.
    pub fn own_cid(&self) -> &[u8] {
        let bytes = self.cid_bytes();
        &bytes[..usize::from(self.cids.own_len).min(bytes.len())]
    }

    /// The peer's: what we write into records to it.
    pub fn peer_cid(&self) -> &[u8] {
        let bytes = self.cid_bytes();
        &bytes[usize::from(self.cids.own_len).min(bytes.len())..]
    }

    fn set_cids(&mut self, own: &[u8], peer: &[u8]) {
        // A CID is at most 255 bytes (RFC 9146 §3, RFC 9147 §9): a longer one never gets here.
        let own = &own[..own.len().min(usize::from(u8::MAX))];
        let peer = &peer[..peer.len().min(usize::from(u8::MAX))];
        let len = own.len() + peer.len();
        if len <= INLINE_CIDS {
            self.cids.bytes[..own.len()].copy_from_slice(own);
            self.cids.bytes[own.len()..len].copy_from_slice(peer);
            if let Some(more) = self.more.as_deref_mut() {
                more.long_cids = None;
            }
        } else {
            PathMore::made(&mut self.more).long_cids = Some(Box::new([own, peer].concat().into()));
        }
        self.cids.own_len = own.len() as u8;
        self.cids.peer_len = peer.len() as u8;
    }

    /// The 1.3 CID update state, made at first use.
    pub fn cids13_made(&mut self) -> &mut Cids13 {
        PathMore::made(&mut self.more).cids13.get_or_insert_with(Default::default)
    }

    pub fn set_own_cid(&mut self, own: &[u8]) {
        let peer = self.peer_cid().to_vec();
        self.set_cids(own, &peer);
    }

    pub fn set_peer_cid(&mut self, peer: &[u8]) {
        let own = self.own_cid().to_vec();
        self.set_cids(&own, peer);
    }

    /// Whether the session may follow its peer to a new address (RFC 9146 §6 needs a CID; a
    /// session with its own socket is found by that socket whatever the source).
    pub fn may_follow_peer(&self) -> bool {
        self.cid_negotiated || self.local().is_some() || self.moving().is_some()
    }

    /// Whether `cid` is one of ours the peer may write (1.3 adds issued and retiring ones).
    pub fn is_own_cid(&self, cid: &[u8]) -> bool {
        *self.own_cid() == *cid
            || self.cids13().is_some_and(|c| c.issued.iter().chain(&c.retiring).any(|own| **own == *cid))
    }

    /// The session's own socket, if it has one.
    pub fn local(&self) -> Option<SocketAddr> {
        self.more.as_deref()?.local
    }

    pub fn cids13(&self) -> Option<&Cids13> {
        self.more.as_deref()?.cids13.as_deref()
    }

    pub fn cids13_mut(&mut self) -> Option<&mut Cids13> {
        self.more.as_deref_mut()?.cids13.as_deref_mut()
    }

    fn transient_ref(&self) -> Option<&Transient> {
        self.more.as_deref()?.transient.as_deref()
    }

    pub fn transient_mut(&mut self) -> Option<&mut Transient> {
        self.more.as_deref_mut()?.transient.as_deref_mut()
    }

    pub fn probe(&self) -> Option<&Probe> {
        self.transient_ref()?.probe.as_ref()
    }

    pub fn moving(&self) -> Option<&PortMove> {
        self.transient_ref()?.moving.as_ref()
    }

    /// The transient state, made when first needed.
    pub fn transient(&mut self) -> &mut Transient {
        PathMore::made(&mut self.more).transient.get_or_insert_with(Default::default)
    }

    /// Frees the transient state once nothing is in it, and what is boxed apart once all of it
    /// is gone.
    pub fn release_idle(&mut self) {
        let Some(more) = self.more.as_deref_mut() else { return };
        let idle = more.transient.as_ref().is_some_and(|t| {
            t.probe.is_none() && t.moving.is_none() && t.held.is_empty() && t.direct.is_empty()
        });
        if idle {
            more.transient = None;
        }
        if more.is_empty() {
            self.more = None;
        }
    }

    /// A fresh unpredictable path_challenge cookie.
    pub fn next_cookie(&mut self) -> [u8; 8] {
        let mut cookie = [0u8; 8];
        if let Some(c) = self.more.as_deref_mut().and_then(|m| m.cookies.as_deref_mut()) {
            let mut stream = ChaCha20Rng::from_seed(c.seed);
            stream.set_stream(c.made);
            stream.fill_bytes(&mut cookie);
            c.made += 1;
        }
        cookie
    }

    /// The counts so far.
    pub fn stats(&self) -> MobilityStats {
        self.more.as_deref().and_then(|m| m.stats.as_deref()).copied().unwrap_or_default()
    }

    /// The counts, to add to.
    pub fn stats_mut(&mut self) -> &mut MobilityStats {
        MobilityStats::made(&mut PathMore::made(&mut self.more).stats)
    }

    /// The earliest timer: a path challenge or a port announcement to resend.
    pub fn deadline(&self) -> Option<Instant> {
        self.transient_ref()?.timers.next()
    }

    /// Whether datagrams with their own destination wait (challenges, responses, copies).
    pub fn has_direct(&self) -> bool {
        self.transient_ref().is_some_and(|t| !t.direct.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_ids_of_any_length_read_back_inline_or_apart() {
        let mut path = PathState::new(&[1; 8], None);
        path.set_peer_cid(&[2; 8]);
        assert_eq!((path.own_cid(), path.peer_cid()), (&[1u8; 8][..], &[2u8; 8][..]));
        assert!(path.more.is_none(), "two 8-byte CIDs are kept inline");
        // The longest CIDs the RFCs allow go apart, and come back.
        path.set_own_cid(&[3; 255]);
        path.set_peer_cid(&[4; 255]);
        assert_eq!((path.own_cid(), path.peer_cid()), (&[3u8; 255][..], &[4u8; 255][..]));
        path.set_own_cid(&[]);
        assert_eq!((path.own_cid(), path.peer_cid()), (&[][..], &[4u8; 255][..]));
        path.set_peer_cid(&[5; 4]);
        assert_eq!((path.own_cid(), path.peer_cid()), (&[][..], &[5u8; 4][..]));
        path.release_idle();
        assert!(path.more.is_none(), "short again: nothing kept apart");
    }
}
