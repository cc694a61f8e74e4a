//! DTLS in STUN (draft-hancke-webrtc-sped, "SPED"; Chromium's `WebRTC-IceHandshakeDtls`), the
//! answering side's bookkeeping, sans-IO.
//!
//! The offerer embeds its DTLS datagrams in its Binding requests (META-DTLS-IN-STUN) and lists
//! the CRC-32s of ours it received (META-DTLS-IN-STUN-ACK). The answerer feeds the embedded
//! datagram to DTLS before it answers, so the success response can already carry the first
//! datagram of its flight: the DTLS handshake starts with ICE's first round trip instead of after
//! it. [`Sped`] holds what that takes: our datagrams not acknowledged yet, the CRCs of the
//! peer's datagrams we received, and whether the exchange is on. It moves no bytes itself.
//!
//! Chromium decides "the peer speaks SPED" from the first response to an embedding check: one
//! with neither attribute switches it off, and its DTLS timer then resends the ClientHello in
//! plain, later than it would have gone without the feature. So while the exchange is on, every
//! response carries the ACK attribute, empty if need be. Once our DTLS is connected and nothing
//! of ours is unacknowledged, one response with the ACK and no data ends the exchange (the
//! draft's closing handshake; Chromium moves from PENDING to COMPLETE on it), and nothing more
//! is added.

use std::collections::VecDeque;

use crate::stun::{self, attr, MAX_DTLS_IN_STUN_ACKS};

/// The largest success response we build with a datagram in it: a UDP payload on an Ethernet
/// link (1500 − 20 − 8). Our DTLS MTU is 1200, so every handshake datagram fits beside the
/// other attributes; the limit only guards the arithmetic.
pub const MAX_RESPONSE_LEN: usize = 1472;

/// Where the exchange stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpedState {
    /// Not (yet) in use: switched off by configuration, or no check with the attributes came.
    Off,
    /// An authenticated check carried the attributes: responses carry ours.
    On,
    /// Our DTLS is connected and the closing ACK went out: nothing is added any more.
    Complete,
}

/// How much went through STUN, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpedStats {
    /// DTLS datagrams of the peer's taken from its checks (or its responses to ours) and fed
    /// to DTLS; copies of one already taken are not counted.
    pub received_embedded: u32,
    /// DTLS datagrams of ours put in our responses.
    pub sent_embedded: u32,
}

/// The answering side's SPED state (see the module documentation).
#[derive(Clone, Debug)]
pub struct Sped {
    enabled: bool,
    state: SpedState,
    /// Our datagrams of the current flight not acknowledged yet, with their CRC-32s.
    pending: Vec<(u32, Vec<u8>)>,
    /// The pending datagram the next response carries (round robin, as Chromium does).
    next: usize,
    /// CRC-32s of the peer's DTLS datagrams received lately, newest last, at most
    /// [`MAX_DTLS_IN_STUN_ACKS`].
    received: VecDeque<u32>,
    dtls_connected: bool,
    /// DTLS 1.2: the server's last flight (ChangeCipherSpec, Finished) comes out of the input that
    /// connects it, so it is captured even though the handshake is complete here.
    capture_last_flight: bool,
    stats: SpedStats,
}

/// Whether `datagram` can be DTLS: a record header's worth of bytes and a first byte in
/// 20–63 (RFC 7983 §7; Chromium's `IsDtlsPacket`).
fn looks_like_dtls(datagram: &[u8]) -> bool {
    datagram.len() >= 13 && (20..=63).contains(&datagram[0])
}

impl Sped {
    /// Unused until a check carries the attributes; never used if `enabled` is false.
    pub fn new(enabled: bool) -> Sped {
        Sped {
            enabled,
            state: SpedState::Off,
            pending: Vec::new(),
            next: 0,
            received: VecDeque::with_capacity(MAX_DTLS_IN_STUN_ACKS),
            dtls_connected: false,
            capture_last_flight: false,
            stats: SpedStats::default(),
        }
    }

    /// Whether the configuration allows the exchange.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Where the exchange stands.
    pub fn state(&self) -> SpedState {
        self.state
    }

    /// What went through STUN so far.
    pub fn stats(&self) -> SpedStats {
        self.stats
    }

    /// Our datagrams not acknowledged yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// An authenticated Binding request (or, in full mode, a success response to one of our
    /// checks) carried META-DTLS-IN-STUN (`data`) and/or META-DTLS-IN-STUN-ACK (`acks`; an empty
    /// list counts). Call it only after MESSAGE-INTEGRITY verified: the datagram returned is to
    /// be fed to DTLS as if it had come from the message's source address, before a response
    /// is built.
    ///
    /// Returns `None` when there is nothing to feed: the exchange is off or over, the value is
    /// not DTLS (dropped, as Chromium does), or it is a byte-identical copy of a datagram we
    /// took lately. The offerer re-embeds its pending datagrams unchanged until they are acked,
    /// and sends them in plain as well; DTLS already has them, and fed again they would only
    /// draw a reply (an ACK record, a resent flight) that displaces our flight here.
    pub fn on_request<'a>(&mut self, data: Option<&'a [u8]>, acks: Option<&[u32]>) -> Option<&'a [u8]> {
        if !self.enabled || self.state == SpedState::Complete || (data.is_none() && acks.is_none()) {
            return None;
        }
        self.state = SpedState::On;
        if let Some(acks) = acks {
            self.pending.retain(|(crc, _)| !acks.contains(crc));
        }
        // An empty value is "nothing to send" (the draft's closing handshake), not a datagram.
        let datagram = data.filter(|d| looks_like_dtls(d))?;
        if !self.record(datagram) {
            return None;
        }
        self.stats.received_embedded = self.stats.received_embedded.saturating_add(1);
        Some(datagram)
    }

    /// A DTLS datagram of the peer's arrived in plain: it is acknowledged too, since the peer
    /// cannot tell which of its copies came through (the draft; Chromium's `ReportDtlsPacket`).
    /// Call it before DTLS sees the datagram, which it may decrypt in place. Returns false for
    /// a byte-identical copy of one taken lately, which DTLS need not see again (see
    /// [`Self::on_request`]).
    pub fn on_plain_dtls(&mut self, datagram: &[u8]) -> bool {
        self.state != SpedState::On || self.record(datagram)
    }

    /// Adds the datagram's CRC to those acked; false if it is there already.
    fn record(&mut self, datagram: &[u8]) -> bool {
        let crc = stun::dtls_datagram_crc(datagram);
        if self.received.contains(&crc) {
            return false;
        }
        if self.received.len() >= MAX_DTLS_IN_STUN_ACKS {
            self.received.pop_front();
        }
        self.received.push_back(crc);
        true
    }

    /// Whether [`Self::capture`] would keep anything now (so the caller need not copy).
    pub fn wants_flight(&self) -> bool {
        self.state == SpedState::On && (!self.dtls_connected || self.capture_last_flight)
    }

    /// The datagrams our DTLS wrote in reply to one input (a datagram or a timeout): a new
    /// flight, or a retransmission with new record numbers, replaces what was pending (as
    /// Chromium's capture does). Application data (content type 23) is never kept: only the
    /// handshake rides in STUN.
    pub fn capture<'d>(&mut self, datagrams: impl IntoIterator<Item = &'d [u8]>) {
        if !self.wants_flight() {
            return;
        }
        let flight: Vec<(u32, Vec<u8>)> = datagrams
            .into_iter()
            .filter(|d| d.first() != Some(&23))
            .map(|d| (stun::dtls_datagram_crc(d), d.to_vec()))
            .collect();
        if flight.is_empty() {
            return;
        }
        self.capture_last_flight = false;
        self.pending = flight;
        self.next = 0;
    }

    /// Our DTLS handshake completed. Under DTLS 1.3 the client's Finished proved it has our
    /// whole flight, so nothing stays pending; under 1.2 our last flight is still to come.
    pub fn dtls_connected(&mut self, dtls12: bool) {
        if self.dtls_connected {
            return;
        }
        self.dtls_connected = true;
        self.capture_last_flight = dtls12;
        if !dtls12 {
            self.pending.clear();
        }
    }

    /// Application data came from the peer: it has our whole handshake, and the exchange has
    /// nothing left to carry (Chromium ends it on the same evidence).
    pub fn peer_application_data(&mut self) {
        self.capture_last_flight = false;
        self.pending.clear();
    }

    /// The attributes a success response to a check with the attributes carries, in order,
    /// given `room` bytes between XOR-MAPPED-ADDRESS and MESSAGE-INTEGRITY: the ACK (always,
    /// possibly empty, while on), then our next pending datagram if it fits. Once DTLS is
    /// connected and nothing is pending, the ACK alone, once, and the exchange is complete.
    pub fn response_attributes(&mut self, room: usize) -> Vec<(u16, Vec<u8>)> {
        if self.state != SpedState::On {
            return Vec::new();
        }
        let ack = self.ack_value();
        let ack_len = stun::attribute_wire_len(ack.len());
        if ack_len > room {
            return Vec::new();
        }
        let mut attributes = vec![(attr::META_DTLS_IN_STUN_ACK, ack)];
        if self.pending.is_empty() {
            if self.dtls_connected && !self.capture_last_flight {
                self.state = SpedState::Complete;
            }
            return attributes;
        }
        let index = self.next % self.pending.len();
        let datagram = &self.pending[index].1;
        if ack_len + stun::attribute_wire_len(datagram.len()) <= room {
            attributes.push((attr::META_DTLS_IN_STUN, datagram.clone()));
            self.next = index + 1;
            self.stats.sent_embedded = self.stats.sent_embedded.saturating_add(1);
        }
        attributes
    }

    /// The attributes our own Binding requests carry (full mode): the ACK while on, so that a
    /// peer still deciding whether we speak SPED does not take a bare check of ours as "no"
    /// (Chromium switches the feature off on one).
    pub fn request_attributes(&self) -> Vec<(u16, Vec<u8>)> {
        match self.state {
            SpedState::On => vec![(attr::META_DTLS_IN_STUN_ACK, self.ack_value())],
            _ => Vec::new(),
        }
    }

    fn ack_value(&self) -> Vec<u8> {
        self.received.iter().flat_map(|crc| crc.to_be_bytes()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dtls(tag: u8, len: usize) -> Vec<u8> {
        let mut d = vec![tag; len];
        d[0] = 22;
        d
    }

    fn acks_of(attributes: &[(u16, Vec<u8>)]) -> Option<Vec<u32>> {
        attributes
            .iter()
            .find(|(kind, _)| *kind == attr::META_DTLS_IN_STUN_ACK)
            .map(|(_, v)| v.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    fn data_of(attributes: &[(u16, Vec<u8>)]) -> Option<Vec<u8>> {
        attributes.iter().find(|(kind, _)| *kind == attr::META_DTLS_IN_STUN).map(|(_, v)| v.clone())
    }

    #[test]
    fn without_the_attributes_or_when_disabled_nothing_is_added() {
        let mut sped = Sped::new(true);
        assert_eq!(sped.on_request(None, None), None);
        assert_eq!(sped.state(), SpedState::Off);
        assert!(sped.response_attributes(MAX_RESPONSE_LEN).is_empty());
        let hello = dtls(1, 200);
        let mut off = Sped::new(false);
        assert_eq!(off.on_request(Some(&hello), Some(&[])), None);
        assert_eq!(off.state(), SpedState::Off);
        off.capture([&hello[..]]);
        assert!(off.response_attributes(MAX_RESPONSE_LEN).is_empty() && off.request_attributes().is_empty());
    }

    #[test]
    fn an_empty_ack_turns_it_on_and_every_response_carries_an_ack() {
        let mut sped = Sped::new(true);
        assert_eq!(sped.on_request(None, Some(&[])), None);
        assert_eq!(sped.state(), SpedState::On);
        let attributes = sped.response_attributes(MAX_RESPONSE_LEN);
        assert_eq!(acks_of(&attributes), Some(vec![]), "present though empty");
        assert_eq!(data_of(&attributes), None);
        assert_eq!(acks_of(&sped.request_attributes()), Some(vec![]));
    }

    #[test]
    fn embedded_and_plain_datagrams_are_acked_newest_four_without_duplicates() {
        let mut sped = Sped::new(true);
        let hello = dtls(1, 216);
        assert_eq!(sped.on_request(Some(&hello), Some(&[])), Some(&hello[..]));
        assert_eq!(sped.on_request(Some(&hello), None), None, "an identical copy is not fed again");
        assert!(!sped.on_plain_dtls(&hello), "nor in plain");
        let crc = stun::dtls_datagram_crc(&hello);
        assert_eq!(acks_of(&sped.response_attributes(MAX_RESPONSE_LEN)), Some(vec![crc]), "once");
        let later: Vec<Vec<u8>> = (2..6).map(|i| dtls(i, 100)).collect();
        assert!(later.iter().all(|d| sped.on_plain_dtls(d)));
        let expected: Vec<u32> = later.iter().map(|d| stun::dtls_datagram_crc(d)).collect();
        assert_eq!(acks_of(&sped.response_attributes(MAX_RESPONSE_LEN)), Some(expected));
        assert_eq!(sped.stats().received_embedded, 1, "the copy is not counted");
    }

    #[test]
    fn what_is_not_dtls_is_dropped_but_still_turns_it_on() {
        let mut sped = Sped::new(true);
        for junk in [&[][..], &[22; 12][..], &[0x80; 40][..], &[19; 40][..]] {
            assert_eq!(sped.on_request(Some(junk), None), None);
        }
        assert_eq!(sped.state(), SpedState::On);
        assert_eq!(acks_of(&sped.response_attributes(MAX_RESPONSE_LEN)), Some(vec![]));
    }

    #[test]
    fn pending_datagrams_ride_round_robin_until_acked_and_a_new_flight_replaces_them() {
        let mut sped = Sped::new(true);
        sped.on_request(None, Some(&[]));
        let flight = [dtls(1, 1200), dtls(2, 300)];
        sped.capture(flight.iter().map(Vec::as_slice));
        let order: Vec<Option<Vec<u8>>> =
            (0..3).map(|_| data_of(&sped.response_attributes(MAX_RESPONSE_LEN))).collect();
        assert_eq!(order, [Some(flight[0].clone()), Some(flight[1].clone()), Some(flight[0].clone())]);
        sped.on_request(None, Some(&[stun::dtls_datagram_crc(&flight[0]), 7]));
        assert_eq!(sped.pending(), 1);
        assert_eq!(data_of(&sped.response_attributes(MAX_RESPONSE_LEN)), Some(flight[1].clone()));
        let again = dtls(3, 500);
        sped.capture([&again[..], &[23, 0xfe, 0xfd][..]]);
        assert_eq!(sped.pending(), 1, "application data is not kept");
        assert_eq!(data_of(&sped.response_attributes(MAX_RESPONSE_LEN)), Some(again));
        assert_eq!(sped.stats().sent_embedded, 5);
    }

    #[test]
    fn a_datagram_that_does_not_fit_leaves_the_ack_alone() {
        let mut sped = Sped::new(true);
        sped.on_request(None, Some(&[]));
        sped.capture([&dtls(1, 1200)[..]]);
        let attributes = sped.response_attributes(1000);
        assert_eq!((acks_of(&attributes), data_of(&attributes)), (Some(vec![]), None));
        assert!(sped.response_attributes(2).is_empty(), "not even the ACK fits");
    }

    #[test]
    fn once_connected_and_acked_one_bare_ack_completes_it() {
        for dtls12 in [false, true] {
            let mut sped = Sped::new(true);
            let hello = dtls(1, 216);
            sped.on_request(Some(&hello), Some(&[]));
            let flight = dtls(2, 900);
            sped.capture([&flight[..]]);
            sped.dtls_connected(dtls12);
            let last = dtls(3, 60);
            if dtls12 {
                // The last flight of 1.2 comes out of the input that connected us.
                sped.capture([&last[..]]);
                assert_eq!(data_of(&sped.response_attributes(MAX_RESPONSE_LEN)), Some(last.clone()));
                sped.on_request(None, Some(&[stun::dtls_datagram_crc(&last)]));
            }
            sped.capture([&dtls(4, 60)[..]]);
            assert_eq!(sped.pending(), 0, "{dtls12}: nothing is captured after the handshake");
            let closing = sped.response_attributes(MAX_RESPONSE_LEN);
            assert_eq!(data_of(&closing), None);
            assert!(acks_of(&closing).is_some(), "{dtls12}: the closing ACK");
            assert_eq!(sped.state(), SpedState::Complete);
            assert!(sped.response_attributes(MAX_RESPONSE_LEN).is_empty());
            assert_eq!(sped.on_request(Some(&hello), Some(&[])), None, "{dtls12}: over");
            assert!(sped.request_attributes().is_empty());
        }
    }

    #[test]
    fn application_data_from_the_peer_drops_what_is_pending() {
        let mut sped = Sped::new(true);
        sped.on_request(None, Some(&[]));
        sped.capture([&dtls(1, 100)[..]]);
        sped.dtls_connected(true);
        sped.peer_application_data();
        assert_eq!(data_of(&sped.response_attributes(MAX_RESPONSE_LEN)), None);
        assert_eq!(sped.state(), SpedState::Complete);
    }
}
