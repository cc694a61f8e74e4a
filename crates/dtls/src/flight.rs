//! The one flight engine: a flight is kept as messages, not datagrams, so every (re)transmission
//! is packed afresh with new record sequence numbers (RFC 6347 §4.2.4); the timer starts at the
//! configured value, doubles on each retransmission and stops at the ceiling.

use crate::config::RetransmitPolicy;
use crate::handshake::{HandshakeHeader, HandshakeType, HANDSHAKE_HEADER_LEN};
use crate::record::{record_len, write_record, ContentType, Protect, RecordLayer};
use crate::rtt::{RttEstimate, RttEstimator};
use fastshake_core::Instant;
use std::time::Duration;

/// One message of a flight.
#[derive(Clone, Debug)]
pub(crate) enum FlightItem {
    Handshake { epoch: u16, msg_type: HandshakeType, message_seq: u16, body: Vec<u8> },
    ChangeCipherSpec,
}

/// The retransmission timer of RFC 6347 §4.2.4.1: how long to wait before resending, doubling
/// on each retransmission up to a ceiling. The deadline itself lives in the connection's timer
/// table.
///
/// With [`RetransmitPolicy::Fixed`] every flight starts at the configured initial value (a
/// backed-off value is kept for one more flight after a lossy one). With
/// [`RetransmitPolicy::Adaptive`] the timer also measures each exchange (our flight until the
/// peer's answering flight is complete) and starts each flight at the estimate
/// ([`RttEstimate::timeout_for`] the expected exchange size), between the floor and the
/// ceiling. Karn's algorithm: a flight we resent gives no sample, unless the answer names the
/// transmission it answers (a HelloVerifyRequest echoes its ClientHello's record number,
/// RFC 6347 §4.2.1); and after a loss the backed-off value stays until a clean sample comes
/// (RFC 6298 §5.7).
///
/// Each flight's exchange is also kept by its place in the handshake (a resent one as an upper
/// bound while no loss is seen), and the same flight of the next handshake with the peer waits
/// that long and a margin, a floor at least: on a duty-cycled link an exchange takes about as
/// long each time, give or take a wake-up period at each rendezvous.
///
/// Once the path shows a loss (an answer names a later transmission than the first, or the
/// peer's record numbers skip some of this exchange), no flight of this handshake, nor of the
/// next with the peer once two were lost, waits longer than the initial value: losses cost less
/// than the estimate's margin. A clean handshake lifts the cap. A loss right after a needless
/// copy of ours caps this handshake only (on a contention MAC the copy, or the answer to it,
/// may have caused it), and one in an exchange we resent on a guess (several times larger than
/// any measured) caps nothing.
///
/// No flight waits less than the path takes to carry its exchange at the pace the peer's
/// flights came at (a copy sent sooner takes the channel from the flight on a slow link). The
/// ceiling rises to twice the longest exchange measured.
#[derive(Clone, Debug)]
pub(crate) struct RetransmitTimer {
    initial: Duration,
    max: Duration,
    current: Duration,
    /// `Some(floor)` under the adaptive policy.
    floor: Option<Duration>,
    /// Whether the flight in flight needed a retransmission (then the next keeps the backed-off value).
    backed_off: bool,
    pub last_sent: Instant,
    rtt: RttEstimator,
    /// The flight in flight: its first transmission, whether it was resent, whether its answer
    /// came (or none is awaited), its bytes, and the peer's bytes received before it.
    first_sent: Instant,
    resent: bool,
    /// The peer's answer showed skipped record numbers: it came only after the peer's own
    /// loss recovery, so its time is the peer's timer, not the path's (Karn's rule, peer side).
    peer_recovered: bool,
    answered: bool,
    flight_bytes: u32,
    received_at_send: u64,
    /// Bytes of the peer's last flight: the guess for the size of its next one.
    peer_flight_bytes: u32,
    /// Epoch-0 record numbers of the flight's last transmissions, for an answer that names one.
    transmissions: Vec<(Instant, std::ops::Range<u64>)>,
    /// The flight's place among ours in this handshake (0 for the first).
    place: usize,
    /// The last datagram from the peer (its number among them, arrival and size) until it is
    /// known to carry part of the peer's flight.
    arriving: Option<(u64, Instant, usize)>,
    /// The last datagram that carried part of the peer's flight: when it came, its number
    /// among the peer's datagrams, and the place of our flight it answered.
    answer_datagram: Option<(Instant, u64, usize)>,
    /// The flight in flight waits a guess ([`Self::waits_a_guess`]).
    guessed: bool,
}

/// Why a flight went out again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Our retransmission timer fired.
    Timer,
    /// The peer resent the flight ours answers: it did not get ours (RFC 6347 §4.2.4).
    PeerRetransmission,
}

/// What a flight waits whose exchange takes about `base`: that and a margin, the longest of a
/// quarter of it, the floor (a wake-up period and a quarter) and one and a half times the
/// variation of the path's exchanges (RTTVAR). Over several hops each rendezvous may shift by a
/// period from one handshake to the next, which the variation shows and one floor does not
/// cover. One and a half is the least multiple that covered every such shift in `lab e2` over
/// 400 seeds; RFC 6298's four would make the first loss of each handshake wait that much
/// longer.
fn with_margin(base: Duration, floor: Duration, variation: Duration) -> Duration {
    let spread = variation.saturating_add(variation / 2);
    base.saturating_add((base / 4).max(floor).max(spread))
}

/// Transmissions of one flight remembered for answers that name their record number.
const MAX_TRANSMISSIONS_KEPT: usize = 8;

/// An exchange larger than the largest measured by more than this share (a quarter) is one of a
/// size not measured.
const UNMEASURED_SIZE_SHARE: u32 = 4;

/// An exchange more than this many times larger than the largest measured: its timer can only
/// guess. A PSK handshake's exchanges stay within twice one another; a certificate flight
/// after a cookie exchange is ten to twenty times larger.
const GUESSED_SIZE_FACTOR: u32 = 4;

impl RetransmitTimer {
    pub fn new(
        initial: Duration,
        max: Duration,
        policy: RetransmitPolicy,
        cached: Option<RttEstimate>,
    ) -> Self {
        let floor = match policy {
            RetransmitPolicy::Fixed => None,
            RetransmitPolicy::Adaptive { floor } => Some(floor.max(Duration::from_millis(1))),
        };
        let initial = initial.max(floor.unwrap_or_default()).max(Duration::from_millis(1));
        RetransmitTimer {
            initial,
            max: max.max(initial),
            current: initial,
            floor,
            backed_off: false,
            last_sent: Instant::ZERO,
            rtt: RttEstimator::seeded(cached.filter(|_| floor.is_some())),
            first_sent: Instant::ZERO,
            resent: false,
            peer_recovered: false,
            answered: true,
            flight_bytes: 0,
            received_at_send: 0,
            peer_flight_bytes: 0,
            transmissions: Vec::new(),
            place: usize::MAX,
            arriving: None,
            answer_datagram: None,
            guessed: false,
        }
    }

    /// Whether the flight's timer can only guess: its exchange is several times larger than
    /// any measured (a certificate flight after a cookie exchange), and none was kept at its
    /// place. On a duty-cycled link such an exchange may take many periods more than the
    /// guess.
    fn waits_a_guess(&self) -> bool {
        let Some(estimate) = self.rtt.estimate().filter(|_| self.floor.is_some()) else { return false };
        let exchange = self.flight_bytes.saturating_add(self.peer_flight_bytes);
        let largest = estimate.largest_exchange;
        largest > 0
            && exchange / GUESSED_SIZE_FACTOR > largest
            && self.rtt.profiled(self.place, self.flight_bytes).is_none()
    }

    /// This exchange lost a datagram. Unless a copy of ours went out on a guess: that guess
    /// may lie far below what the path takes to carry the exchange, and on a contention MAC
    /// the copy, or the peer's answer to it, takes the channel from the answer. The loss then
    /// shows our copy more than the path, so it caps nothing, and the answer's time since our
    /// first transmission is kept as the exchange's upper bound for the next handshake.
    fn on_loss(&mut self) {
        if !(self.resent && self.guessed) {
            self.rtt.on_loss();
        }
    }

    /// What a new flight waits first: the initial value, or the adaptive estimate.
    fn fresh_timeout(&self) -> Duration {
        let (Some(floor), Some(estimate)) = (self.floor, self.rtt.estimate()) else {
            return self.initial;
        };
        let exchange = self.flight_bytes.saturating_add(self.peer_flight_bytes);
        // No round trip sampled yet (only exchanges kept by their place): the initial value.
        let mut timeout = if estimate.samples == 0 { self.initial } else { estimate.timeout_for(exchange) };
        // An exchange clearly larger than any measured (the server's flight after the cookie
        // exchange, a certificate flight): on a duty-cycled link its time follows the frames
        // and the periods they wait for, which a small exchange inside one period (a beacon
        // network's CAP) does not show. Never tighter than the configured initial value there.
        let largest = estimate.largest_exchange;
        if exchange > largest.saturating_add(largest / UNMEASURED_SIZE_SHARE) {
            timeout = timeout.max(self.initial);
        }
        // The exchange this flight starts took this long when last measured (this flight's
        // place in an earlier handshake with the peer): on a link whose schedule repeats, the
        // same exchange takes about as long again, give or take a wake-up period, which the
        // floor stands for. It replaces SRTT + 4·RTTVAR, whose variance on such a link comes
        // from exchanges of other sizes, not from this one. One shorter than the floor caught
        // its wake-ups by luck, and counts as the floor.
        if let Some(last) = self.rtt.profiled(self.place, self.flight_bytes) {
            timeout =
                with_margin(last.max(estimate.smoothed_for(exchange)).max(floor), floor, estimate.variation);
        } else if let Some(smaller) = self.rtt.longest_for_flights_up_to(self.place, self.flight_bytes) {
            // A flight of a size not measured at its place (a resumption's ClientHello with its
            // ticket): on a duty-cycled link a larger flight takes no less than a smaller one,
            // so it waits at least what the longest exchange of a flight no larger, at its
            // place or later, took.
            timeout = timeout.max(with_margin(
                smaller.max(estimate.smoothed_for(exchange)),
                floor,
                estimate.variation,
            ));
        }
        // A path that has lost a datagram: never wait longer than the initial value. Where
        // the round trip varies by whole periods (a missed wake-up on a duty-cycled link),
        // the estimate lies far above most exchanges, and each loss would then cost that
        // long; a copy sent early costs a duplicate at most.
        if self.rtt.loss_seen() {
            timeout = timeout.min(self.initial);
        }
        timeout.max(self.carrying()).clamp(floor, self.ceiling())
    }

    /// The least a flight waits under the adaptive policy, loss or not: the time the path
    /// takes to carry its exchange's bytes at the peer's measured pace, and the floor. A copy
    /// sent sooner goes out while the flight, or its answer, is still on its way, and on a
    /// slow link takes the channel from them.
    fn carrying(&self) -> Duration {
        let (Some(floor), Some(estimate)) = (self.floor, self.rtt.estimate()) else {
            return Duration::ZERO;
        };
        // The peer's answer is as large as the one to this flight last time, or as its last
        // flight.
        let answer = self.rtt.answer_bytes(self.place, self.flight_bytes).unwrap_or(0);
        let exchange = self.flight_bytes.saturating_add(answer.max(self.peer_flight_bytes));
        match estimate.carrying(exchange) {
            d if d.is_zero() => d,
            d => d.saturating_add(floor),
        }
    }

    /// The peer's datagram number `number` (counted by the connection), of `bytes`, came.
    pub fn on_datagram(&mut self, number: u64, now: Instant, bytes: usize) {
        self.arriving = Some((number, now, bytes));
    }

    /// The datagram that came last carries part of the peer's flight (not a copy of what we
    /// had). If the one before it did too, while the same flight of ours waited for its answer,
    /// both are of one flight of the peer's: the second followed the first as fast as the path
    /// carried it, or slower.
    pub fn on_answer_datagram(&mut self) {
        let Some((number, now, bytes)) = self.arriving.take() else { return };
        if self.floor.is_none() {
            return;
        }
        if let Some((at, datagram, place)) = self.answer_datagram {
            if datagram.wrapping_add(1) == number && place == self.place {
                self.rtt.on_paced_datagram(now.saturating_duration_since(at), bytes);
            }
        }
        self.answer_datagram = Some((now, number, self.place));
    }

    /// The most a flight waits: the configured ceiling, or twice the longest exchange measured
    /// if that is longer (RFC 6347 §4.2.4.1 sets no upper bound on the ceiling; one below the
    /// path's round trip would resend every flight before its answer could come).
    fn ceiling(&self) -> Duration {
        match (self.floor, self.rtt.longest()) {
            (Some(_), Some(longest)) => self.max.max(longest.saturating_mul(2)),
            _ => self.max,
        }
    }

    /// A new flight of `flight_bytes` was sent (its epoch-0 record numbers `seqs`) after
    /// `received` bytes had come from the peer in all: the previous flight was answered. When
    /// to resend it if nothing comes back.
    pub fn on_new_flight(
        &mut self,
        now: Instant,
        flight_bytes: u32,
        seqs: std::ops::Range<u64>,
        received: u64,
    ) -> Instant {
        self.on_answer(now, received);
        self.rtt.on_new_exchange();
        self.place = self.place.wrapping_add(1);
        self.flight_bytes = flight_bytes;
        self.guessed = self.waits_a_guess();
        match self.floor {
            // Keep a backed-off value until a flight goes through without loss.
            None if !self.backed_off => self.current = self.initial,
            None => {}
            Some(_) if !self.backed_off => self.current = self.fresh_timeout(),
            // Keep it until a clean sample (RFC 6298 §5.7, RFC 6347 §4.2.4.1), but backed off
            // once, not by every doubling of the lossy flight: the answer that came shows the
            // path works, and on a lossy link (random loss, not congestion) the compounded
            // value would make the next loss wait far longer than the fixed timer would.
            Some(_) => {
                self.current = self.current.min(self.fresh_timeout().saturating_mul(2)).min(self.ceiling())
            }
        }
        if self.floor.is_none() {
            self.backed_off = false;
        }
        self.first_sent = now;
        self.resent = false;
        self.peer_recovered = false;
        self.answered = false;
        self.received_at_send = received;
        self.transmissions.clear();
        self.transmissions.push((now, seqs));
        self.last_sent = now;
        now + self.current
    }

    /// The flight was resent (its epoch-0 record numbers `seqs`) for `cause`: when to resend it
    /// again. Under the adaptive policy a copy sent because the peer resent its flight waits no
    /// longer than the initial value: the peer's copy shows that ours, or the answer to it, was
    /// lost, and the estimate's margin is then what each further loss would cost.
    pub fn on_retransmit(&mut self, now: Instant, seqs: std::ops::Range<u64>, cause: Resend) -> Instant {
        self.current = (self.current * 2).min(self.ceiling());
        if cause == Resend::PeerRetransmission && self.floor.is_some() {
            self.current = self.current.min(self.initial).max(self.carrying());
        }
        self.backed_off = true;
        self.resent = true;
        if self.transmissions.len() >= MAX_TRANSMISSIONS_KEPT {
            self.transmissions.remove(0);
        }
        self.transmissions.push((now, seqs));
        self.last_sent = now;
        now + self.current
    }

    /// The peer's flight answering ours is complete (`received`: the peer's bytes so far):
    /// one sample, unless ours was resent (Karn) or was not waiting for an answer.
    pub fn on_answer(&mut self, now: Instant, received: u64) {
        if self.answered {
            return;
        }
        self.answered = true;
        self.peer_flight_bytes =
            received.saturating_sub(self.received_at_send).min(u64::from(u32::MAX)) as u32;
        let since_first = now.saturating_duration_since(self.first_sent);
        if !self.resent && !self.peer_recovered {
            self.take_sample(since_first);
        } else if !self.rtt.loss_seen() {
            // Karn: a resent flight gives no sample. But while no loss has been seen, the
            // answer most likely answers our first transmission, and the time since it is an
            // upper bound of the exchange: kept for this flight's place only, so the next
            // handshake does not resend it early again, and SRTT stays clean.
            self.rtt.profile(self.place, self.flight_bytes, self.peer_flight_bytes, since_first);
        } else {
            self.rtt.profile_answer(self.place, self.flight_bytes, self.peer_flight_bytes);
        }
    }

    /// Records of the peer went missing (its record numbers skipped some): if that happened
    /// while its answer to our flight was coming, the answer gives no sample. It shows a loss
    /// if it touches this exchange: ours was resent, or part of the answer had come
    /// (`answer_begun`). Otherwise the missing records may be copies of the peer's previous
    /// flight, which we had.
    pub fn on_peer_records_skipped(&mut self, answer_begun: bool) {
        if self.resent || answer_begun {
            self.on_loss();
        }
        if !self.answered {
            self.peer_recovered = true;
        }
    }

    /// An answer that names the transmission it answers by one of its epoch-0 record numbers
    /// (a HelloVerifyRequest): a sample even when the flight was resent.
    pub fn on_echoed_answer(&mut self, now: Instant, record_seq: u64, received: u64) {
        if self.answered {
            return;
        }
        let Some(&(sent, _)) = self.transmissions.iter().find(|(_, seqs)| seqs.contains(&record_seq)) else {
            return;
        };
        // The first answer to come names a later transmission: the first, or its answer, was
        // lost (answers come in the order of what they answer).
        if sent > self.first_sent {
            self.on_loss();
        } else if self.resent {
            self.rtt.on_needless_copy();
        }
        self.answered = true;
        self.peer_flight_bytes =
            received.saturating_sub(self.received_at_send).min(u64::from(u32::MAX)) as u32;
        self.take_sample(now.saturating_duration_since(sent));
    }

    /// A round trip measured outside the flights (the server's cookie exchange), of an exchange
    /// of `exchange_bytes`, of which the peer sent `peer_bytes`.
    pub fn on_outside_sample(&mut self, rtt: Duration, exchange_bytes: u32, peer_bytes: u32) {
        self.peer_flight_bytes = peer_bytes;
        self.rtt.sample(rtt, exchange_bytes);
        if self.floor.is_some() {
            self.backed_off = false;
        }
    }

    fn take_sample(&mut self, rtt: Duration) {
        let exchange = self.flight_bytes.saturating_add(self.peer_flight_bytes);
        self.rtt.sample(rtt, exchange);
        self.rtt.profile(self.place, self.flight_bytes, self.peer_flight_bytes, rtt);
        if self.floor.is_some() {
            self.backed_off = false;
        }
    }

    /// This flight is the handshake's last of ours: no answer is awaited.
    pub fn expect_no_answer(&mut self) {
        self.answered = true;
    }

    #[cfg(test)]
    pub fn current(&self) -> Duration {
        self.current
    }

    /// How long after a transmission of ours a retransmission of the peer's flight says nothing
    /// of it: half the initial value (or of the current one, if shorter), so duplicated
    /// datagrams do not multiply flights; and under the adaptive policy, the measured round
    /// trip, since a copy that arrives sooner was sent before ours could reach the peer. Never
    /// longer than our own timer, which resends by then anyway.
    pub fn answer_window(&self) -> Duration {
        let half = self.current.min(self.initial) / 2;
        match (self.floor, self.rtt.estimate()) {
            (Some(_), Some(e)) => half.max(e.smoothed).min(self.current),
            _ => half,
        }
    }

    /// The round trip measured so far (with the cached estimate it started from).
    pub fn estimate(&self) -> Option<RttEstimate> {
        self.rtt.estimate()
    }

    /// Whether the adaptive policy is on.
    pub fn adaptive(&self) -> bool {
        self.floor.is_some()
    }
}

/// Our current flight: its messages (kept as messages, so a retransmission is packed afresh),
/// its retransmission timer, and how many flights went out and were resent.
pub(crate) struct Flight {
    items: Vec<FlightItem>,
    pub timer: RetransmitTimer,
    /// Resent on our timer (every flight but the handshake's last, which waits for the peer to
    /// show it was lost).
    timed: bool,
    /// Flights sent, first transmissions only.
    pub sent: u32,
    /// Flights resent.
    pub resent: u32,
}

impl Flight {
    pub fn new(timer: RetransmitTimer) -> Self {
        Flight { items: Vec::new(), timer, timed: false, sent: 0, resent: 0 }
    }

    /// Forgets the last flight: the next one is being built.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn push(&mut self, item: FlightItem) {
        self.items.push(item);
    }

    /// The flight went out for the first time (`bytes` in datagrams, epoch-0 record numbers
    /// `seqs`, after `received` bytes from the peer in all); `timed` when our timer resends it.
    /// Returns when it is due again, if timed.
    pub fn on_first_transmission(
        &mut self,
        now: Instant,
        timed: bool,
        bytes: u32,
        seqs: std::ops::Range<u64>,
        received: u64,
    ) -> Option<Instant> {
        self.sent += 1;
        self.timed = timed;
        let due = self.timer.on_new_flight(now, bytes, seqs, received);
        if !timed {
            self.timer.expect_no_answer();
        }
        timed.then_some(due)
    }

    /// The flight went out again, for `cause`. Returns when it is due again, if timed.
    pub fn on_retransmission(
        &mut self,
        now: Instant,
        seqs: std::ops::Range<u64>,
        cause: Resend,
    ) -> Option<Instant> {
        self.resent += 1;
        let due = self.timer.on_retransmit(now, seqs, cause);
        self.timed.then_some(due)
    }

    /// Packs the flight into datagrams of at most `mtu` bytes with fresh record sequence numbers:
    /// epoch 0 from `epoch0_seq`, epoch 1 from the record layer, which starts writing epoch 1 at
    /// the ChangeCipherSpec. Epoch-1 messages are left out while no keys exist.
    pub fn pack(
        &self,
        mtu: usize,
        epoch0_seq: &mut u64,
        layer: &mut RecordLayer,
        peer_cid: &[u8],
    ) -> Vec<Vec<u8>> {
        let mut b = DatagramBuilder::new(mtu);
        for item in &self.items {
            match item {
                FlightItem::Handshake { epoch: 0, msg_type, message_seq, body } => {
                    b.push_handshake(0, *msg_type, *message_seq, body, None, &mut || {
                        *epoch0_seq += 1;
                        *epoch0_seq - 1
                    });
                }
                FlightItem::Handshake { epoch, msg_type, message_seq, body } => {
                    let Some((protect, write_seq)) = layer.writer(peer_cid) else { continue };
                    b.push_handshake(*epoch, *msg_type, *message_seq, body, Some(protect), &mut || {
                        *write_seq += 1;
                        *write_seq - 1
                    });
                }
                FlightItem::ChangeCipherSpec => {
                    let seq = *epoch0_seq;
                    *epoch0_seq += 1;
                    b.push(ContentType::ChangeCipherSpec, 0, seq, None, &[&[1]]);
                    layer.start_writing_epoch_1();
                }
            }
        }
        b.finish()
    }
}

/// Packs records into datagrams no larger than the MTU.
pub(crate) struct DatagramBuilder {
    mtu: usize,
    current: Vec<u8>,
    pub done: Vec<Vec<u8>>,
}

impl DatagramBuilder {
    pub fn new(mtu: usize) -> Self {
        DatagramBuilder { mtu, current: Vec::with_capacity(mtu), done: Vec::new() }
    }

    fn room(&self) -> usize {
        self.mtu.saturating_sub(self.current.len())
    }

    pub fn flush(&mut self) {
        if !self.current.is_empty() {
            let full = std::mem::replace(&mut self.current, Vec::with_capacity(self.mtu));
            self.done.push(full);
        }
    }

    /// Appends one record, starting a new datagram when it does not fit.
    pub fn push(
        &mut self,
        content_type: ContentType,
        epoch: u16,
        seq: u64,
        protect: Option<Protect<'_>>,
        parts: &[&[u8]],
    ) {
        let len = record_len(protect, parts.iter().map(|p| p.len()).sum());
        if len > self.room() {
            self.flush();
        }
        let start = self.current.len();
        self.current.resize(start + len, 0);
        write_record(&mut self.current[start..], content_type, epoch, seq, protect, parts);
    }

    /// Appends a handshake message, fragmented to fit the MTU. `next_seq` hands out record
    /// sequence numbers.
    pub fn push_handshake(
        &mut self,
        epoch: u16,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
        protect: Option<Protect<'_>>,
        next_seq: &mut dyn FnMut() -> u64,
    ) {
        let overhead = record_len(protect, HANDSHAKE_HEADER_LEN);
        // Smallest fragment worth starting in the rest of a datagram.
        const MIN_FRAGMENT: usize = 8;
        let mut offset = 0usize;
        loop {
            let remaining = body.len() - offset;
            let mut room = self.room().saturating_sub(overhead);
            if room < remaining && room < MIN_FRAGMENT {
                self.flush();
                room = self.room().saturating_sub(overhead).max(1);
            }
            let n = remaining.min(room);
            let mut hdr = Vec::with_capacity(HANDSHAKE_HEADER_LEN);
            HandshakeHeader {
                msg_type,
                length: body.len() as u32,
                message_seq,
                fragment_offset: offset as u32,
                fragment_length: n as u32,
            }
            .write(&mut hdr);
            let seq = next_seq();
            self.push(ContentType::Handshake, epoch, seq, protect, &[&hdr, &body[offset..offset + n]]);
            offset += n;
            if offset >= body.len() {
                break;
            }
        }
    }

    pub fn finish(mut self) -> Vec<Vec<u8>> {
        self.flush();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtt::{FlightProfile, ProfiledExchange};

    /// An estimate an earlier handshake left: SRTT `smoothed` and RTTVAR `variation` over
    /// 200-byte exchanges, no loss, and the exchanges of `flights`.
    fn earlier(smoothed: Duration, variation: Duration, flights: FlightProfile) -> RttEstimate {
        RttEstimate {
            smoothed,
            variation,
            exchange_bytes: 200,
            samples: 3,
            largest_exchange: 200,
            loss_seen: false,
            flights,
            pace: Duration::ZERO,
        }
    }

    /// An exchange of a flight of `flight_bytes` kept from an earlier handshake.
    fn kept(took: Duration, flight_bytes: u32) -> ProfiledExchange {
        ProfiledExchange { took, flight_bytes, answer_bytes: 0 }
    }

    #[test]
    fn timer_doubles_to_ceiling_and_resets_after_clean_flight() {
        let mut t = RetransmitTimer::new(
            Duration::from_secs(1),
            Duration::from_secs(3),
            RetransmitPolicy::Fixed,
            None,
        );
        assert_eq!(t.on_new_flight(Instant::ZERO, 100, 0..1, 0), Instant::from_millis(1000));
        assert_eq!(
            t.on_retransmit(Instant::from_millis(1000), 1..2, Resend::Timer),
            Instant::from_millis(3000)
        );
        t.on_retransmit(Instant::from_millis(3000), 2..3, Resend::Timer);
        assert_eq!(t.current(), Duration::from_secs(3), "capped");
        t.on_new_flight(Instant::from_millis(4000), 100, 3..4, 0);
        assert_eq!(t.current(), Duration::from_secs(3), "backed-off value kept after a lossy flight");
        t.on_new_flight(Instant::from_millis(5000), 100, 4..5, 0);
        t.on_new_flight(Instant::from_millis(6000), 100, 5..6, 0);
        assert_eq!(t.current(), Duration::from_secs(1));
    }

    #[test]
    fn adaptive_timer_follows_clean_samples_and_skips_resent_flights() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        // No estimate yet: the initial value.
        assert_eq!(t.on_new_flight(Instant::ZERO, 100, 0..1, 0), Instant::from_millis(1000));
        // Answered (100 bytes) after 200 ms: SRTT 200, RTTVAR 100, the next flight waits 600 ms.
        let at = t.on_new_flight(Instant::from_millis(200), 100, 1..2, 100);
        assert_eq!(at, Instant::from_millis(800));
        // Lost once: doubled, and the late answer gives no sample (Karn).
        assert_eq!(
            t.on_retransmit(Instant::from_millis(800), 2..3, Resend::Timer),
            Instant::from_millis(2000)
        );
        t.on_new_flight(Instant::from_millis(1000), 100, 3..4, 200);
        assert_eq!(t.estimate().unwrap().samples, 1);
        assert_eq!(t.current(), ms(1200), "backed-off value kept until a clean sample");
        // A clean exchange of 200 ms brings it back to the estimate.
        t.on_new_flight(Instant::from_millis(1200), 100, 4..5, 300);
        assert_eq!(t.estimate().unwrap().samples, 2);
        assert_eq!(t.current(), ms(500));
    }

    #[test]
    fn after_a_lossy_flight_the_next_keeps_one_doubling_not_all() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        // 200 ms round trip: the estimate gives 600 ms.
        t.on_new_flight(Instant::from_millis(200), 100, 1..2, 100);
        assert_eq!(t.current(), ms(600));
        // Lost three times: 1.2, 2.4, 4.8 s, each doubling (RFC 6347 §4.2.4.1).
        for (i, at) in [800, 2000, 4400].into_iter().enumerate() {
            t.on_retransmit(Instant::from_millis(at), 2 + i as u64..3 + i as u64, Resend::Timer);
        }
        assert_eq!(t.current(), ms(4800));
        // Answered at last: the next flight stays backed off, but once (1.2 s), not 4.8 s,
        // so its loss is recovered about as fast as a loss on the first flight would be.
        t.on_new_flight(Instant::from_millis(9000), 100, 5..6, 200);
        assert_eq!(t.estimate().unwrap().samples, 1, "Karn: no sample from the resent flight");
        assert_eq!(t.current(), ms(1200));
    }

    #[test]
    fn an_exchange_far_larger_than_measured_waits_at_least_the_initial_value() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let cached = earlier(ms(20), ms(5), Default::default());
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        // A 150-byte flight (with the peer's answer guessed at 0 bytes): the measured size, the estimate.
        t.on_new_flight(Instant::ZERO, 150, 0..1, 0);
        assert_eq!(t.current(), ms(50), "floor: 20 + 20 ms");
        // A 2 kB certificate flight after a 100-byte answer: ten times the bytes measured, a
        // stretched 250 ms would fire while its frames still wait for their periods.
        t.on_new_flight(Instant::from_millis(20), 2000, 1..2, 100);
        assert_eq!(t.current(), ms(2000));
    }

    #[test]
    fn an_exchange_larger_than_the_largest_measured_waits_the_initial_value_until_measured() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, None);
        // A beacon network's server: its 150-byte cookie exchange fit in one active period
        // (14 ms), its 230-byte flight 4 exchange waits for the next one.
        t.on_outside_sample(ms(14), 150, 100);
        t.on_new_flight(Instant::ZERO, 130, 0..1, 0);
        assert_eq!(t.current(), ms(2000), "230 bytes: more than a quarter above 150");
        // Measured (1 s, clean): the next such exchange follows the estimate, not 2 s.
        t.on_new_flight(Instant::from_millis(1000), 130, 1..2, 100);
        assert_eq!(t.estimate().unwrap().largest_exchange, 230);
        assert!(t.current() < ms(2000) && t.current() > ms(1000), "{:?}", t.current());
        // The smoothed size alone (7/8 of it still the cookie exchange's) would have called
        // it unmeasured again.
        assert!(t.estimate().unwrap().exchange_bytes < 200);
    }

    #[test]
    fn an_answer_that_needed_the_peers_loss_recovery_gives_no_sample() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        // The peer's answer skipped record numbers: part of it was lost and resent on the
        // peer's timer, so the 2.2 s are that timer, not the path.
        t.on_peer_records_skipped(true);
        t.on_new_flight(Instant::from_millis(2200), 100, 1..2, 100);
        assert!(t.estimate().is_none(), "no sample from the peer's recovery");
        assert!(t.rtt.loss_seen(), "part of the answer had come: the rest was lost");
        // A gap noticed before our next flight went out says nothing about its answer.
        t.on_new_flight(Instant::from_millis(2400), 100, 2..3, 200);
        assert_eq!(t.estimate().unwrap().smoothed, ms(200));
    }

    #[test]
    fn after_a_loss_no_flight_waits_longer_than_the_initial_value() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, None);
        // A slow path: 1.5 s per exchange, measured clean, gives a 4.5 s timer (1.5 + 4 · 0.75).
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        t.on_new_flight(Instant::from_millis(1500), 100, 1..2, 100);
        assert_eq!(t.current(), ms(4500));
        assert!(!t.estimate().unwrap().loss_seen);
        // The next answer names the resent copy: the first transmission or its answer was lost.
        t.on_retransmit(Instant::from_millis(6000), 2..3, Resend::Timer);
        t.on_echoed_answer(Instant::from_millis(7500), 2, 200);
        assert!(t.rtt.loss_seen());
        assert!(!t.estimate().unwrap().loss_seen, "one loss may be a collision: not carried");
        // From now on each flight waits the initial 2 s at most, and still doubles on loss.
        t.on_new_flight(Instant::from_millis(7500), 100, 3..4, 200);
        assert_eq!(t.current(), ms(2000));
        assert_eq!(
            t.on_retransmit(Instant::from_millis(9500), 4..5, Resend::Timer),
            Instant::from_millis(13_500)
        );
        // The answer to that flight came after the peer's own recovery: a second loss.
        t.on_peer_records_skipped(true);
        assert!(t.estimate().unwrap().loss_seen);
        // The losses travel with the estimate into the next handshake's timer: its first flight
        // would wait what its exchange took and a margin (1.5 s and one and a half RTTVAR,
        // past 2 s), and no more than 2 s.
        let cached = t.estimate();
        let mut next = RetransmitTimer::new(ms(2000), ms(60_000), policy, cached);
        next.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(next.current(), ms(2000));
        // The fixed policy ignores it.
        let mut fixed = RetransmitTimer::new(ms(1000), ms(60_000), RetransmitPolicy::Fixed, cached);
        fixed.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(fixed.current(), ms(1000));
    }

    #[test]
    fn an_answer_to_the_first_transmission_shows_no_loss() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        t.on_retransmit(Instant::from_millis(1000), 1..2, Resend::Timer);
        t.on_echoed_answer(Instant::from_millis(1500), 0, 40);
        assert!(!t.estimate().unwrap().loss_seen, "a spurious resend is no loss");
    }

    #[test]
    fn echoed_answer_measures_the_transmission_it_names() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        t.on_retransmit(Instant::from_millis(1000), 1..2, Resend::Timer);
        // The answer names record 0, sent at 0: a 3 s round trip, not 2 s.
        t.on_echoed_answer(Instant::from_millis(3000), 0, 40);
        assert_eq!(t.estimate().unwrap().smoothed, ms(3000));
        // A record number never sent gives nothing.
        let mut u = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        u.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        u.on_echoed_answer(Instant::from_millis(3000), 7, 40);
        assert!(u.estimate().is_none());
    }

    #[test]
    fn records_skipped_before_the_answer_began_show_no_loss_unless_we_resent() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        // Copies of the peer's previous flight, which we had, may be what went missing.
        t.on_peer_records_skipped(false);
        assert!(!t.rtt.loss_seen());
        // Once our flight was resent, the answer itself may have been lost.
        t.on_retransmit(Instant::from_millis(1000), 1..2, Resend::Timer);
        t.on_peer_records_skipped(false);
        assert!(t.rtt.loss_seen());
    }

    #[test]
    fn a_loss_right_after_a_needless_copy_caps_this_handshake_only() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, None);
        // The ClientHello went out twice, and the answer names the first: the copy was needless.
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        t.on_retransmit(Instant::from_millis(2000), 1..2, Resend::Timer);
        t.on_echoed_answer(Instant::from_millis(2900), 0, 40);
        // The next exchange loses a datagram, which may have met the answer to that copy.
        t.on_new_flight(Instant::from_millis(2900), 100, 2..3, 40);
        t.on_peer_records_skipped(true);
        assert!(t.rtt.loss_seen(), "this handshake is capped from now on");
        assert!(!t.estimate().unwrap().loss_seen, "but the next one does not inherit it");
        // Losses one exchange later owe nothing to the copy: they are kept (two, to be carried).
        t.on_new_flight(Instant::from_millis(9000), 100, 3..4, 200);
        t.on_peer_records_skipped(true);
        assert!(!t.estimate().unwrap().loss_seen, "one loss may be a collision");
        t.on_peer_records_skipped(true);
        assert!(t.estimate().unwrap().loss_seen);
    }

    #[test]
    fn a_loss_after_a_copy_sent_on_a_guess_caps_nothing() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(1000) };
        // A beacon network's server: its cookie exchange (44 + 141 bytes) fit in one active
        // period, then its 2 kB certificate flight takes seconds to carry.
        let first_handshake = |flight_bytes: u32, cached: Option<RttEstimate>| {
            let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, cached);
            t.on_outside_sample(ms(18), 185, 141);
            t.on_new_flight(Instant::ZERO, flight_bytes, 0..2, 141);
            t
        };
        let mut t = first_handshake(2074, None);
        assert!(t.guessed, "ten times the largest exchange measured");
        assert_eq!(t.current(), ms(2000));
        // The guess fires while the flight is still on its way; the copy takes the channel
        // from the client's answer, which comes again later, its first records missing.
        t.on_retransmit(Instant::from_millis(2000), 2..4, Resend::Timer);
        t.on_peer_records_skipped(false);
        assert!(!t.rtt.loss_seen(), "the loss shows our copy, not the path");
        t.on_new_flight(Instant::from_millis(7900), 67, 4..5, 141 + 1880);
        let cached = t.estimate();
        assert!(!cached.unwrap().loss_seen);
        // The next handshake's flight waits at least what the answer took: no copy at 2 s.
        let next = first_handshake(2074, cached);
        assert!(!next.guessed);
        assert!(next.current() >= ms(7900), "{:?}", next.current());
        // A flight of a size measured is no guess: the same loss caps the timer.
        let mut small = first_handshake(200, None);
        assert!(!small.guessed);
        small.on_retransmit(Instant::from_millis(2000), 2..3, Resend::Timer);
        small.on_peer_records_skipped(false);
        assert!(small.rtt.loss_seen());
    }

    #[test]
    fn a_copy_sent_for_the_peers_retransmission_waits_no_longer_than_the_initial_value() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(1250) };
        let mut flights = FlightProfile::default();
        flights[0] = kept(ms(6000), 100);
        let cached = earlier(ms(1000), ms(100), flights);
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        // The exchange took 6 s last time: 7.5 s.
        assert_eq!(t.on_new_flight(Instant::ZERO, 100, 0..1, 0), Instant::from_millis(7500));
        // The peer resent its flight at 2 s: ours or its answer was lost. Not 15 s, but 2.
        let due = t.on_retransmit(Instant::from_millis(2000), 1..2, Resend::PeerRetransmission);
        assert_eq!(due, Instant::from_millis(4000));
        // Our timer then doubles as ever.
        assert_eq!(t.on_retransmit(due, 2..3, Resend::Timer), Instant::from_millis(8000));
        // The fixed policy doubles on either cause (tinyDTLS).
        let mut fixed = RetransmitTimer::new(ms(2000), ms(60_000), RetransmitPolicy::Fixed, None);
        fixed.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        let due = fixed.on_retransmit(Instant::from_millis(1500), 1..2, Resend::PeerRetransmission);
        assert_eq!(due, Instant::from_millis(5500));
    }

    #[test]
    fn a_clean_handshake_clears_the_loss_it_started_with() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let lossy = RttEstimate { loss_seen: true, ..earlier(ms(3000), ms(100), Default::default()) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(lossy));
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(t.current(), ms(2000), "the last handshake lost: capped at the initial value");
        t.on_new_flight(Instant::from_millis(3000), 100, 1..2, 100);
        assert_eq!(t.current(), ms(2000));
        // Nothing lost in this one: the next starts from the estimate again.
        let cached = t.estimate();
        assert!(!cached.unwrap().loss_seen);
        let mut next = RetransmitTimer::new(ms(2000), ms(60_000), policy, cached);
        next.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert!(next.current() > ms(3000), "{:?}", next.current());
    }

    #[test]
    fn a_flight_waits_what_its_exchange_took_last_time_plus_a_period() {
        let ms = Duration::from_millis;
        // The floor is the link's wake-up period and a quarter (1.25 s).
        let policy = RetransmitPolicy::Adaptive { floor: ms(1250) };
        let mut flights = FlightProfile::default();
        flights[1] = kept(ms(8000), 300);
        let cached = RttEstimate { largest_exchange: 300, ..earlier(ms(2000), ms(3000), flights) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        // The first flight was not profiled: SRTT + 4·RTTVAR.
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(t.current(), ms(14_000));
        // The second took 8 s last time: 8 s and a margin, here one and a half RTTVAR (2.25 s
        // after this handshake's first sample), more than a quarter of 8 s.
        t.on_new_flight(Instant::from_millis(2000), 300, 1..2, 100);
        assert_eq!(t.current(), ms(11_375));
        // Where a quarter of the exchange is less than the floor, the floor is the margin.
        let mut flights = FlightProfile::default();
        flights[0] = kept(ms(2000), 100);
        let cached = RttEstimate { smoothed: ms(1000), variation: ms(100), flights, ..cached };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(t.current(), ms(3250));
        // An exchange shorter than the floor caught a wake-up by luck; the next may wait a whole
        // period more each way: it counts as the floor.
        flights[0] = kept(ms(100), 100);
        let cached = RttEstimate { smoothed: ms(100), variation: ms(10), flights, ..cached };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(t.current(), ms(2500));
    }

    #[test]
    fn a_flight_waits_at_least_what_the_path_takes_to_carry_its_exchange() {
        let ms = Duration::from_millis;
        let at = Instant::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(1000) };
        // The last handshake with the peer lost a datagram: no flight waits longer than 2 s.
        let cached = RttEstimate { loss_seen: true, ..earlier(ms(500), ms(100), FlightProfile::default()) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 150, 0..1, 0);
        assert_eq!(t.current(), ms(1000));
        // The answer comes in two 1000-byte datagrams a second apart: the path carries a
        // kilobyte a second at best.
        t.on_datagram(1, at(600), 1000);
        t.on_answer_datagram();
        t.on_datagram(2, at(1600), 1000);
        t.on_answer_datagram();
        assert_eq!(t.estimate().unwrap().pace, ms(1000));
        // A 2000-byte flight, answered with about as much: 4 s to carry, and the floor, past the
        // 2 s the loss allows.
        t.on_new_flight(at(1600), 2000, 1..3, 2000);
        assert_eq!(t.current(), ms(5000));
        // So does a copy sent because the peer resent its flight.
        assert_eq!(t.on_retransmit(at(3000), 3..5, Resend::PeerRetransmission), at(8000));
        // A faster pair lowers the pace; a slower one does not raise it.
        t.on_datagram(3, at(8100), 500);
        t.on_answer_datagram();
        t.on_datagram(4, at(8350), 500);
        t.on_answer_datagram();
        t.on_datagram(5, at(9350), 100);
        t.on_answer_datagram();
        assert_eq!(t.estimate().unwrap().pace, ms(500));
        // Datagrams not in a row (a copy of what we had came between), or of two flights of the
        // peer's (ours went out between), give no sample.
        t.on_datagram(6, at(9380), 1000);
        t.on_datagram(7, at(9400), 1000);
        t.on_answer_datagram();
        t.on_datagram(8, at(9401), 1000);
        t.on_datagram(9, at(9402), 1000);
        t.on_answer_datagram();
        t.on_new_flight(at(9402), 200, 5..6, 4000);
        t.on_datagram(10, at(9403), 1000);
        t.on_answer_datagram();
        assert_eq!(t.estimate().unwrap().pace, ms(500));
        // The pace goes to the next handshake with the peer.
        let next = RetransmitTimer::new(ms(2000), ms(60_000), policy, t.estimate());
        assert_eq!(next.estimate().unwrap().pace, ms(500));
    }

    #[test]
    fn exchanges_that_vary_by_more_than_a_period_widen_the_margin() {
        let ms = Duration::from_millis;
        // X-MAC, check interval 125 ms, four hops: the earlier ClientHello caught every
        // rendezvous (104 ms), later exchanges took 629 and 621 ms.
        let policy = RetransmitPolicy::Adaptive { floor: ms(156) };
        let mut flights = FlightProfile::default();
        flights[0] = kept(ms(104), 79);
        let cached = earlier(ms(450), ms(240), flights);
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 79, 0..1, 0);
        // 450 ms and 360 ms: one floor more (606 ms) would resend before a 624 ms exchange.
        assert_eq!(t.current(), ms(810));
    }

    #[test]
    fn a_flight_of_a_size_not_measured_waits_what_a_smaller_ones_exchange_took() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(1250) };
        // A full handshake's flights: a 79-byte ClientHello answered in 0.4 s (it caught the
        // cells), a 109-byte flight whose exchange took 5 s.
        let mut flights = FlightProfile::default();
        flights[0] = kept(ms(400), 79);
        flights[2] = kept(ms(5000), 109);
        let cached =
            RttEstimate { exchange_bytes: 250, largest_exchange: 320, ..earlier(ms(1500), ms(100), flights) };
        // A resumption's 220-byte ClientHello (its ticket) matches neither: it waits the 5 s
        // and the floor, not SRTT and its margin (1.9 s).
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 220, 0..1, 0);
        assert_eq!(t.current(), ms(6250));
        // A flight smaller than every one kept has no such bound.
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 60, 0..1, 0);
        assert_eq!(t.current(), ms(1900));
    }

    #[test]
    fn a_resent_flight_leaves_its_exchange_as_an_upper_bound_but_no_sample() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(1000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        t.on_new_flight(Instant::from_millis(500), 100, 1..2, 100);
        // The second flight is resent at 1.5 s; its answer comes at 4.5 s, 4 s after it went.
        t.on_retransmit(Instant::from_millis(1500), 2..3, Resend::Timer);
        t.on_new_flight(Instant::from_millis(4500), 100, 3..4, 200);
        let estimate = t.estimate().unwrap();
        assert_eq!(estimate.samples, 1, "Karn: SRTT has the clean exchange only");
        assert_eq!(estimate.smoothed, ms(500));
        assert_eq!(estimate.flights[1].took, ms(4000), "the next handshake waits for it");
        // After a loss was seen, a resent flight's time may hold the loss: nothing is kept.
        t.rtt.on_loss();
        t.on_retransmit(Instant::from_millis(5000), 4..5, Resend::Timer);
        t.on_new_flight(Instant::from_millis(9000), 100, 5..6, 300);
        assert!(t.estimate().unwrap().flights[2].took.is_zero());
    }

    #[test]
    fn the_ceiling_rises_to_twice_the_longest_exchange() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(100) };
        let mut flights = FlightProfile::default();
        // A four-hop TSCH path with 10 s slotframes: 100 s per exchange.
        flights[0] = kept(ms(100_000), 100);
        let cached = earlier(ms(100_000), ms(1000), flights);
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, Some(cached));
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        assert_eq!(t.current(), ms(125_000), "not clamped to 60 s");
        t.on_retransmit(Instant::from_millis(125_000), 1..2, Resend::Timer);
        assert_eq!(t.current(), ms(200_000), "doubled up to 2 · 100 s");
        // Without an estimate the configured ceiling holds.
        let mut t = RetransmitTimer::new(ms(40_000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        t.on_retransmit(Instant::from_millis(40_000), 1..2, Resend::Timer);
        assert_eq!(t.current(), ms(60_000));
    }

    #[test]
    fn a_long_timer_still_answers_the_peers_resent_flight_soon() {
        let ms = Duration::from_millis;
        let policy = RetransmitPolicy::Adaptive { floor: ms(50) };
        let mut t = RetransmitTimer::new(ms(2000), ms(60_000), policy, None);
        t.on_new_flight(Instant::ZERO, 100, 0..1, 0);
        for at in [2000, 6000, 14_000] {
            t.on_retransmit(Instant::from_millis(at), 0..1, Resend::Timer);
        }
        assert_eq!(t.current(), ms(16_000));
        assert_eq!(t.answer_window(), ms(1000), "half the initial value, not 8 s");
    }

    #[test]
    fn handshake_fragments_fit_the_mtu() {
        let body: Vec<u8> = (0..=255).collect();
        let mut b = DatagramBuilder::new(96);
        let mut seq = 0;
        b.push_handshake(0, HandshakeType::ClientKeyExchange, 2, &body, None, &mut || {
            seq += 1;
            seq
        });
        let dgs = b.finish();
        assert!(dgs.len() >= 4);
        let mut got = vec![0u8; body.len()];
        for d in &dgs {
            assert!(d.len() <= 96);
            for rec in crate::record::Records::new(d) {
                let (_, range) = rec.unwrap();
                for f in crate::handshake::parse_fragments(&d[range]) {
                    let (h, data) = f.unwrap();
                    got[h.fragment_offset as usize..][..data.len()].copy_from_slice(data);
                }
            }
        }
        assert_eq!(got, body);
    }
}
