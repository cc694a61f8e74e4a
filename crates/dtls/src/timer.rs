//! The handshake's retransmission timer (RFC 6347 §4.2.4.1, RFC 9147 §5.8): how long a flight
//! waits before it is sent again. The deadline itself lives in the connection's timer table.
//!
//! [`RetransmitTimer`] follows one *exchange* at a time: a flight of ours, from its first
//! transmission until the peer's answering flight is complete. It is told what happens in
//! terms both DTLS versions share: our flight went out (its record numbers and bytes), it went
//! out again because our timer fired or because the peer resent its own flight ([`Resend`]),
//! the answer came (or an answer named the record it answers), the peer's records went
//! missing, a peer datagram came. From these it measures the path into an [`RttEstimate`]
//! (Karn's rule: a resent flight's answer is no sample unless it names the transmission it
//! answers) and asks its policy how long to wait:
//!
//! - [`Fixed`]: `initial_retransmit`, doubling on each copy up to `max_retransmit`; a flight
//!   after a resent one keeps the backed-off value once (tinyDTLS, RFC 6347).
//! - [`Adaptive`]: one formula over named inputs,
//!
//!   ```text
//!   first wait = min(ceiling, max(lower, min(cap, expected)))
//!   ```
//!
//!   | input | what it is | from |
//!   | --- | --- | --- |
//!   | `expected` | what the exchange should take and a margin: the exchange this flight started last time (RFC 9147 §5.8.2), or SRTT + 4·RTTVAR (RFC 6298 §2), stretched to the exchange's bytes | [`Adaptive::expected`] |
//!   | `lower` | the floor (on a duty-cycled link a wake-up period and a quarter) plus the time the path takes to carry the exchange's bytes at the pace the peer's datagrams came | `--rto-floor`, the pace measured |
//!   | `cap` | the initial value once the path loses datagrams, none otherwise: no worse than the fixed timer on a lossy path | `--initial-retransmit-ms`, the losses seen |
//!   | `ceiling` | `max_retransmit`, or twice the longest exchange measured if longer | the configuration, the estimate |
//!
//!   Each copy doubles the wait up to the ceiling (RFC 6298 §5.5); one sent because the peer
//!   resent its flight waits no longer than the initial value (the peer's copy already shows a
//!   loss), but not below `lower`. The backed-off value stays until a clean sample
//!   (RFC 6298 §5.7, RFC 9147 §5.8.2), but no more than twice the fresh value.
//!
//! The estimate goes to the per-peer [`crate::RttCache`], and the next handshake with the peer
//! starts from it.
//!
//! DTLS 1.3 drives the same calls, record by record: every (re)transmission of a flight, or of
//! the part of it not acknowledged (RFC 9147 §5.8.1), is [`RetransmitTimer::on_sent`] or
//! [`RetransmitTimer::on_resent`] with its record numbers; an ACK (§7) names records, so it is
//! [`RetransmitTimer::on_acknowledged`] — a sample even after a copy, since record numbers are
//! never reused, as the HelloVerifyRequest's echo is in 1.2; an ACK of the whole flight, or the
//! peer's next flight, is [`RetransmitTimer::on_answer`]; a gap in the peer's record numbers is
//! [`RetransmitTimer::on_peer_records_skipped`]. The last flight, acknowledged in 1.3, is timed
//! like the others rather than left to the peer's retransmission.

use crate::config::RetransmitPolicy;
use crate::rtt::{Blame, KeptFor, Losses, RttEstimate, Smoothed};
use fastshake_core::Instant;
use std::ops::Range;
use std::time::Duration;

/// Why a flight went out again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Our retransmission timer fired.
    Timer,
    /// The peer resent the flight ours answers: it did not get ours (RFC 6347 §4.2.4,
    /// RFC 9147 §5.8.1).
    PeerRetransmission,
}

/// Transmissions of one flight remembered for answers that name their record number.
const MAX_TRANSMISSIONS_KEPT: usize = 8;

/// The exchange in flight.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    /// Our flight's place among ours in this handshake (0 for the first).
    place: usize,
    /// Our flight's bytes.
    bytes: u32,
    /// The peer's last flight's bytes: the guess for its answer.
    answer_guess: u32,
    first_sent: Instant,
    /// The peer's bytes received in all when our flight first went out.
    received_at_send: u64,
    /// Copies sent after the first transmission.
    copies: u32,
    basis: Basis,
    answer: Answer,
    /// The last transmissions and their epoch-0 record numbers, for an answer that names one.
    transmissions: Vec<(Instant, Range<u64>)>,
}

impl Exchange {
    /// Bytes of the exchange: our flight and the answer we expect.
    fn bytes(&self) -> u32 {
        self.bytes.saturating_add(self.answer_guess)
    }
}

/// What the flight's wait rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Basis {
    Measured,
    /// A guess: the exchange is larger than any measured by more than [`GUESS_FACTOR`] and
    /// none was kept for this flight. A copy may then go out while the flight is still being
    /// carried, and a loss after it shows the copy more than the path.
    Guess,
}

/// A flight this many times larger than the largest exchange measured carries certificates
/// the measured exchanges did not: a PSK handshake's exchanges stay within twice one another,
/// a certificate flight after a cookie exchange is ten to twenty times larger.
const GUESS_FACTOR: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Awaited,
    /// Awaited, but it comes only after the peer's own loss recovery: its time is the peer's
    /// timer, not the path's (Karn's rule on the peer's side).
    AwaitedAfterPeerRecovery,
    /// Come, or none is awaited.
    Done,
}

/// The retransmission timer of one handshake (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct RetransmitTimer {
    policy: Policy,
    path: RttEstimate,
    exchange: Exchange,
    /// What the flight in flight waits before its next copy.
    current: Duration,
    pub last_sent: Instant,
    /// The place of the last exchange whose copy of ours proved needless.
    needless_copy: Option<usize>,
    /// The peer's last datagram (its number among them, arrival, size) until it is known to
    /// carry part of the peer's flight.
    arriving: Option<(u64, Instant, usize)>,
    /// Bytes of the peer's latest datagram.
    last_datagram: usize,
    /// The shortest round trip sampled in this handshake.
    shortest: Option<Duration>,
    /// The last datagram that carried part of the peer's flight: when it came, its number, and
    /// the place of our flight it answered.
    answer_datagram: Option<(Instant, u64, usize)>,
}

impl RetransmitTimer {
    pub fn new(
        initial: Duration,
        max: Duration,
        policy: RetransmitPolicy,
        cached: Option<RttEstimate>,
    ) -> Self {
        let policy = match policy {
            RetransmitPolicy::Fixed => Policy::Fixed(Fixed::new(initial, max)),
            RetransmitPolicy::Adaptive { floor } => Policy::Adaptive(Adaptive::new(initial, max, floor)),
        };
        let path = cached.filter(|_| matches!(policy, Policy::Adaptive(_))).unwrap_or_default();
        RetransmitTimer {
            current: policy.wait_ref().initial(),
            policy,
            path,
            exchange: Exchange {
                place: usize::MAX,
                bytes: 0,
                answer_guess: 0,
                first_sent: Instant::ZERO,
                received_at_send: 0,
                copies: 0,
                basis: Basis::Measured,
                answer: Answer::Done,
                transmissions: Vec::new(),
            },
            last_sent: Instant::ZERO,
            needless_copy: None,
            arriving: None,
            last_datagram: 0,
            shortest: None,
            answer_datagram: None,
        }
    }

    /// A stateless server's timer for the session a ClientHello that returned a cookie makes:
    /// from the estimate cached for the client, and the cookie exchange's round trip (`cookie`:
    /// the cookie's age and the bytes of the request it came in) as a sample, unless the
    /// ClientHello numbered past its message_seq comes after records the client resent (RFC
    /// 6347 §4.2.2, RFC 9147 §5.1): then the age includes the client's timer, not the path
    /// (Karn's rule on the client's side).
    pub fn for_returned_cookie(
        config: &crate::config::ServerConfig,
        cached: Option<RttEstimate>,
        cookie: Option<(Duration, u32)>,
        hello: (u64, u16, usize),
    ) -> RetransmitTimer {
        let (record_seq, message_seq, hello_bytes) = hello;
        let mut timer =
            RetransmitTimer::new(config.initial_retransmit, config.max_retransmit, config.retransmit, cached);
        if let Some((rtt, request_bytes)) = cookie.filter(|_| record_seq == u64::from(message_seq)) {
            let hello_bytes = hello_bytes.min(u32::MAX as usize) as u32;
            timer.on_outside_sample(rtt, request_bytes.saturating_add(hello_bytes), hello_bytes);
        }
        timer
    }

    /// A new flight of `bytes` went out (its epoch-0 record numbers `records`) after `received`
    /// bytes had come from the peer in all: the previous flight was answered. Returns when to
    /// resend it if nothing comes back.
    pub fn on_sent(&mut self, now: Instant, bytes: u32, records: Range<u64>, received: u64) -> Instant {
        self.on_answer(now, received);
        let last_resent = self.exchange.copies > 0;
        let e = &mut self.exchange;
        e.place = e.place.wrapping_add(1);
        e.bytes = bytes;
        e.basis = self.path.basis(e);
        e.first_sent = now;
        e.received_at_send = received;
        e.copies = 0;
        e.answer = Answer::Awaited;
        e.transmissions.clear();
        e.transmissions.push((now, records));
        self.current = self.policy.wait().first(&self.path, &self.exchange, self.current, last_resent);
        self.last_sent = now;
        now + self.current
    }

    /// The flight went out again for `cause` (its epoch-0 record numbers `records`): when to
    /// resend it again.
    pub fn on_resent(&mut self, now: Instant, records: Range<u64>, cause: Resend) -> Instant {
        self.current = self.policy.wait().again(&self.path, &self.exchange, self.current, cause);
        let e = &mut self.exchange;
        e.copies += 1;
        if e.transmissions.len() >= MAX_TRANSMISSIONS_KEPT {
            e.transmissions.remove(0);
        }
        e.transmissions.push((now, records));
        self.last_sent = now;
        now + self.current
    }

    /// The peer's flight answering ours is complete (`received`: the peer's bytes so far): one
    /// sample, unless ours was resent or the answer needed the peer's recovery (Karn).
    pub fn on_answer(&mut self, now: Instant, received: u64) {
        let e = &mut self.exchange;
        if e.answer == Answer::Done {
            return;
        }
        let clean = e.answer == Answer::Awaited && e.copies == 0;
        e.answer = Answer::Done;
        e.answer_guess = received.saturating_sub(e.received_at_send).min(u64::from(u32::MAX)) as u32;
        let took = now.saturating_duration_since(e.first_sent);
        if clean {
            self.sample(took);
        } else {
            // While the path has shown no loss, the answer most likely answers our first
            // transmission: the time since it is kept as this flight's upper bound, so the
            // next handshake does not resend it early again; SRTT stays clean.
            let bound = (self.path.losses == Losses::None).then_some(took);
            self.path.kept.record(e.place, e.bytes, e.answer_guess, bound);
        }
    }

    /// An answer names the transmission it answers by one of its epoch-0 record numbers (a
    /// HelloVerifyRequest, RFC 6347 §4.2.1; an ACK in DTLS 1.3): a sample even after copies.
    /// False when no transmission of the flight has that number (the answer is then no
    /// sample of this kind).
    pub fn on_acknowledged(&mut self, now: Instant, record: u64, received: u64) -> bool {
        let e = &self.exchange;
        if e.answer == Answer::Done {
            return true;
        }
        let Some(&(sent, _)) = e.transmissions.iter().find(|(_, records)| records.contains(&record)) else {
            return false;
        };
        // Answers come in the order of what they answer: one naming a later transmission shows
        // the first, or its answer, lost; one naming the first shows our copies needless.
        if sent > e.first_sent {
            self.on_loss();
        } else if e.copies > 0 {
            self.needless_copy = Some(e.place);
        }
        let e = &mut self.exchange;
        e.answer = Answer::Done;
        e.answer_guess = received.saturating_sub(e.received_at_send).min(u64::from(u32::MAX)) as u32;
        self.sample(now.saturating_duration_since(sent));
        true
    }

    /// Records of the peer went missing (its record numbers skipped some): a loss if it
    /// touches this exchange (ours was resent, or part of the answer had come,
    /// `answer_begun`; otherwise they may be copies of the peer's previous flight, which we
    /// had), and the answer gives no sample.
    pub fn on_peer_records_skipped(&mut self, answer_begun: bool) {
        if self.exchange.copies > 0 || answer_begun {
            self.on_loss();
        }
        if self.exchange.answer != Answer::Done {
            self.exchange.answer = Answer::AwaitedAfterPeerRecovery;
        }
    }

    /// A round trip measured outside the flights (the server's cookie exchange), of an exchange
    /// of `bytes`, of which the peer sent `peer_bytes`.
    pub fn on_outside_sample(&mut self, rtt: Duration, bytes: u32, peer_bytes: u32) {
        self.shortest = Some(self.shortest.map_or(rtt, |s| s.min(rtt)));
        self.exchange.answer_guess = peer_bytes;
        self.path.smoothed = Some(Smoothed::sample(self.path.smoothed, rtt, bytes));
        self.policy.wait().on_clean_sample();
    }

    /// The peer's datagram number `number` (counted by the connection), of `bytes`, came.
    pub fn on_datagram(&mut self, number: u64, now: Instant, bytes: usize) {
        self.arriving = Some((number, now, bytes));
        self.last_datagram = bytes;
    }

    /// The datagram that came last carries part of the peer's flight. If the one before it did
    /// too, while the same flight of ours waited, both are of one flight of the peer's: the
    /// second followed the first as fast as the path carried it, or slower.
    pub fn on_answer_datagram(&mut self) {
        let Some((number, now, bytes)) = self.arriving.take() else { return };
        let place = self.exchange.place;
        if let Some((at, datagram, at_place)) = self.answer_datagram {
            if datagram.wrapping_add(1) == number && at_place == place {
                self.path.pace.measure(now.saturating_duration_since(at), bytes);
            }
        }
        self.answer_datagram = Some((now, number, place));
    }

    /// How long to wait, after part of the peer's flight came, for the rest before
    /// acknowledging that part (RFC 9147 §7.1 leaves "immediately" to the implementation and
    /// suggests a quarter of the retransmission timer): `quarter` under the fixed policy. Under
    /// the adaptive one, also no less than the floor and the time the path takes to carry the
    /// rest, at the pace the peer's datagrams came, and a quarter more: on a duty-cycled link
    /// the rest of a flight comes seconds after its first datagram, and an ACK sent before it
    /// has the peer resend what is on its way. The rest is what the messages begun still lack
    /// (`missing`), or a datagram as large as the one that just came if more: a flight spread
    /// over datagrams fills all but its last.
    pub fn ack_delay(&self, quarter: Duration, missing: u32) -> Duration {
        match &self.policy {
            Policy::Fixed(_) => quarter,
            Policy::Adaptive(a) => {
                let rest = missing.max(self.last_datagram.min(u32::MAX as usize) as u32);
                let rest = a.floor.saturating_add(self.path.pace.carrying(rest));
                (self.current / 4).max(rest.saturating_add(rest / 4))
            }
        }
    }

    /// What the flight out waits before its next copy.
    pub fn wait(&self) -> Duration {
        self.current
    }

    /// This flight is the handshake's last of ours: no answer is awaited.
    pub fn expect_no_answer(&mut self) {
        self.exchange.answer = Answer::Done;
    }

    /// How long after a transmission of ours a retransmission of the peer's flight says nothing
    /// of it: the copy may have crossed ours, or the network duplicated a datagram.
    pub fn answer_window(&self) -> Duration {
        self.policy.wait_ref().answer_window(&self.path, self.current)
    }

    /// What was measured of the path (with the cached estimate it started from), as the next
    /// handshake with the peer would start from it.
    pub fn estimate(&self) -> Option<RttEstimate> {
        self.path.carried()
    }

    /// Whether the adaptive policy is on.
    pub fn adaptive(&self) -> bool {
        matches!(self.policy, Policy::Adaptive(_))
    }

    #[cfg(test)]
    pub fn current(&self) -> Duration {
        self.current
    }

    /// The shortest round trip sampled in this handshake (of its smallest exchange, most
    /// likely): what a small message and its answer take on the path.
    pub fn shortest_sample(&self) -> Option<Duration> {
        self.shortest
    }

    fn sample(&mut self, rtt: Duration) {
        self.shortest = Some(self.shortest.map_or(rtt, |s| s.min(rtt)));
        let e = &self.exchange;
        self.path.smoothed = Some(Smoothed::sample(self.path.smoothed, rtt, e.bytes()));
        self.path.kept.record(e.place, e.bytes, e.answer_guess, Some(rtt));
        self.policy.wait().on_clean_sample();
    }

    /// This exchange lost a datagram. A copy of ours sent on a guess caps nothing (it may have
    /// taken the channel from the answer); one shortly after a needless copy caps this
    /// handshake only.
    fn on_loss(&mut self) {
        let e = &self.exchange;
        if e.copies > 0 && e.basis == Basis::Guess {
            return;
        }
        let after_needless_copy = self.needless_copy.is_some_and(|p| e.place <= p.saturating_add(1));
        self.path.losses.record(if after_needless_copy { Blame::OurCopy } else { Blame::Path });
    }
}

impl RttEstimate {
    fn basis(&self, e: &Exchange) -> Basis {
        let largest = self.smoothed.map_or(0, |s| s.largest);
        let unmeasured = largest > 0 && e.bytes() / GUESS_FACTOR > largest;
        match self.kept.lookup(e.place, e.bytes) {
            KeptFor::This(_) => Basis::Measured,
            _ if unmeasured => Basis::Guess,
            _ => Basis::Measured,
        }
    }

    /// The longest exchange measured: SRTT, or a kept one if longer.
    fn longest(&self) -> Option<Duration> {
        self.smoothed.map(|s| s.srtt).max(self.kept.longest())
    }
}

/// How long flights wait: what the two policies decide differently.
trait Wait {
    fn initial(&self) -> Duration;
    /// What a new flight waits first; `current` is what the last one waited at the end, and
    /// `last_resent` whether it was resent.
    fn first(
        &mut self,
        path: &RttEstimate,
        flight: &Exchange,
        current: Duration,
        last_resent: bool,
    ) -> Duration;
    /// What the flight waits after a copy sent for `cause`.
    fn again(&mut self, path: &RttEstimate, flight: &Exchange, current: Duration, cause: Resend) -> Duration;
    /// An exchange was measured without a copy.
    fn on_clean_sample(&mut self) {}
    fn answer_window(&self, path: &RttEstimate, current: Duration) -> Duration;
}

#[derive(Clone, Debug)]
enum Policy {
    Fixed(Fixed),
    Adaptive(Adaptive),
}

impl Policy {
    fn wait(&mut self) -> &mut dyn Wait {
        match self {
            Policy::Fixed(p) => p,
            Policy::Adaptive(p) => p,
        }
    }

    fn wait_ref(&self) -> &dyn Wait {
        match self {
            Policy::Fixed(p) => p,
            Policy::Adaptive(p) => p,
        }
    }
}

/// RFC 6347's timer: the configured initial value, doubling on each copy up to the ceiling.
#[derive(Clone, Debug)]
pub(crate) struct Fixed {
    initial: Duration,
    max: Duration,
}

impl Fixed {
    fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        Fixed { initial, max: max.max(initial) }
    }
}

impl Wait for Fixed {
    fn initial(&self) -> Duration {
        self.initial
    }

    /// A flight after a resent one keeps the backed-off value, once.
    fn first(&mut self, _: &RttEstimate, _: &Exchange, current: Duration, last_resent: bool) -> Duration {
        if last_resent {
            current
        } else {
            self.initial
        }
    }

    fn again(&mut self, _: &RttEstimate, _: &Exchange, current: Duration, _: Resend) -> Duration {
        current.saturating_mul(2).min(self.max)
    }

    /// Half the initial value (or of the current one, if shorter), so duplicated datagrams do
    /// not multiply flights.
    fn answer_window(&self, _: &RttEstimate, current: Duration) -> Duration {
        current.min(self.initial) / 2
    }
}

/// The timer that follows the measured path (see the module documentation for its formula).
#[derive(Clone, Debug)]
pub(crate) struct Adaptive {
    initial: Duration,
    max: Duration,
    floor: Duration,
    /// A copy went out since the last clean sample: the backed-off value stays.
    backed_off: bool,
}

impl Adaptive {
    fn new(initial: Duration, max: Duration, floor: Duration) -> Self {
        let floor = floor.max(Duration::from_millis(1));
        let initial = initial.max(floor);
        Adaptive { initial, max: max.max(initial), floor, backed_off: false }
    }

    /// `expected`: what the exchange should take, with its margin.
    ///
    /// - The exchange this flight started last time, kept by its place (RFC 9147 §5.8.2 times
    ///   a flight from "the measured round trip time for that message"), or SRTT if longer,
    ///   and at least the floor (one shorter caught its wake-ups by luck). Its margin: a
    ///   quarter of it, the floor (the next exchange may catch each rendezvous a wake-up
    ///   period later) or one and a half RTTVAR (over several hops each rendezvous may shift
    ///   by a period, which the variation shows and one floor does not cover), the longest;
    ///   with no clean sample, RTTVAR is half the exchange (RFC 6298 §2.2). It replaces
    ///   SRTT + 4·RTTVAR, whose variance comes from exchanges of other sizes.
    /// - Otherwise RFC 6298's SRTT + 4·RTTVAR, with at least a quarter of SRTT as margin in
    ///   place of the clock granularity (on a steady link RTTVAR decays to zero, and a timer at
    ///   exactly the round trip races the answer), or the initial value before any sample;
    ///   and at least what a smaller flight's kept exchange predicts (on a duty-cycled link a
    ///   larger flight takes no less), and the initial value for an exchange larger by more
    ///   than a quarter than any measured (the frames and periods it waits for show in no
    ///   sample).
    ///
    /// SRTT and the margin are stretched to the exchange's bytes when it is larger than those
    /// measured ([`Smoothed::stretch`]).
    fn expected(&self, path: &RttEstimate, flight: &Exchange) -> Duration {
        let bytes = flight.bytes();
        let srtt = path.smoothed.map_or(Duration::ZERO, |s| s.stretch(s.srtt, bytes));
        let rttvar = path.variation();
        let kept = |took: Duration| {
            let base = took.max(srtt);
            // No clean sample gave a variation (the earlier exchanges were all resent): RFC 6298
            // §2.2's first measurement, RTTVAR = R/2.
            let rttvar = if path.smoothed.is_none() { base / 2 } else { rttvar };
            base.saturating_add((base / 4).max(self.floor).max(rttvar.saturating_add(rttvar / 2)))
        };
        let rfc6298 = path.smoothed.map_or(self.initial, |s| {
            s.stretch(s.srtt.saturating_add(s.rttvar.saturating_mul(4).max(s.srtt / 4)), bytes)
        });
        let largest = path.smoothed.map_or(0, |s| s.largest);
        let unmeasured = bytes > largest.saturating_add(largest / 4);
        let not_kept = match path.kept.lookup(flight.place, flight.bytes) {
            KeptFor::This(took) => return kept(took.max(self.floor)),
            KeptFor::Smaller(took) => rfc6298.max(kept(took)),
            KeptFor::Nothing => rfc6298,
        };
        if unmeasured {
            not_kept.max(self.initial)
        } else {
            not_kept
        }
    }

    /// `lower`: no flight waits less than the path takes to carry its exchange at the pace the
    /// peer's datagrams came, and the floor. A copy sent sooner goes out while the flight, or
    /// its answer, is still on its way, and on a slow link takes the channel from them.
    fn lower(&self, path: &RttEstimate, flight: &Exchange) -> Duration {
        // The answer is as large as the one to this flight last time, or as the peer's last flight.
        let answer = path.kept.answer(flight.place, flight.bytes).unwrap_or(0).max(flight.answer_guess);
        self.floor.saturating_add(path.pace.carrying(flight.bytes.saturating_add(answer)))
    }

    /// `cap`: once the path has lost a datagram (in this handshake, or twice in the last one),
    /// no flight waits longer than the initial value. Where the round trip varies by whole
    /// periods, the estimate lies far above most exchanges and each loss would cost that long;
    /// a copy sent early costs a duplicate at most.
    fn cap(&self, path: &RttEstimate) -> Duration {
        if path.losses == Losses::None {
            Duration::MAX
        } else {
            self.initial
        }
    }

    /// `ceiling`: the configured one, or twice the longest exchange measured if longer
    /// (RFC 6347 §4.2.4.1 sets no upper bound on it; one below the round trip would resend
    /// every flight before its answer could come).
    fn ceiling(&self, path: &RttEstimate) -> Duration {
        path.longest().map_or(self.max, |longest| self.max.max(longest.saturating_mul(2)))
    }

    fn fresh(&self, path: &RttEstimate, flight: &Exchange) -> Duration {
        let expected = self.expected(path, flight).min(self.cap(path));
        expected.max(self.lower(path, flight)).min(self.ceiling(path))
    }
}

impl Wait for Adaptive {
    fn initial(&self) -> Duration {
        self.initial
    }

    /// The fresh value, or while backed off, the backed-off one, but no more than twice the
    /// fresh: the answer that came shows the path works, and on a lossy link (random loss, not
    /// congestion) a compounded value would make the next loss wait far longer than the fixed
    /// timer would.
    fn first(&mut self, path: &RttEstimate, flight: &Exchange, current: Duration, _: bool) -> Duration {
        let fresh = self.fresh(path, flight);
        if self.backed_off {
            current.min(fresh.saturating_mul(2)).min(self.ceiling(path))
        } else {
            fresh
        }
    }

    fn again(&mut self, path: &RttEstimate, flight: &Exchange, current: Duration, cause: Resend) -> Duration {
        self.backed_off = true;
        let doubled = current.saturating_mul(2).min(self.ceiling(path));
        match cause {
            Resend::Timer => doubled,
            Resend::PeerRetransmission => doubled.min(self.initial).max(self.lower(path, flight)),
        }
    }

    fn on_clean_sample(&mut self) {
        self.backed_off = false;
    }

    /// Half the initial value (or of the current one) as under the fixed policy, or SRTT if
    /// longer: a copy that arrives sooner was sent before ours could reach the peer. Never
    /// longer than our own timer, which resends by then anyway.
    fn answer_window(&self, path: &RttEstimate, current: Duration) -> Duration {
        (current.min(self.initial) / 2).max(path.smoothed()).min(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn adaptive(floor_ms: u64, initial_ms: u64, cached: Option<RttEstimate>) -> RetransmitTimer {
        let policy = RetransmitPolicy::Adaptive { floor: ms(floor_ms) };
        RetransmitTimer::new(ms(initial_ms), ms(60_000), policy, cached)
    }

    fn fixed(initial_ms: u64, max_ms: u64) -> RetransmitTimer {
        RetransmitTimer::new(ms(initial_ms), ms(max_ms), RetransmitPolicy::Fixed, None)
    }

    /// An estimate an earlier handshake left: SRTT and RTTVAR over 200-byte exchanges, no loss,
    /// and the exchanges `kept` (place, took in ms, bytes of our flight).
    fn earlier(srtt_ms: u64, rttvar_ms: u64, kept: &[(usize, u64, u32)]) -> RttEstimate {
        let smoothed =
            Smoothed { srtt: ms(srtt_ms), rttvar: ms(rttvar_ms), samples: 3, bytes: 200, largest: 200 };
        let mut e = RttEstimate { smoothed: Some(smoothed), ..Default::default() };
        for &(place, took, bytes) in kept {
            e.kept.record(place, bytes, 0, Some(ms(took)));
        }
        e
    }

    /// Whether this handshake is capped by a loss.
    fn capped(t: &RetransmitTimer) -> bool {
        t.path.losses != Losses::None
    }

    fn lossy(t: &RetransmitTimer) -> bool {
        t.estimate().unwrap().lossy()
    }

    #[test]
    fn fixed_timer_doubles_to_ceiling_and_resets_after_clean_flight() {
        let mut t = fixed(1000, 3000);
        assert_eq!(t.on_sent(at(0), 100, 0..1, 0), at(1000));
        assert_eq!(t.on_resent(at(1000), 1..2, Resend::Timer), at(3000));
        t.on_resent(at(3000), 2..3, Resend::Timer);
        assert_eq!(t.current(), ms(3000), "capped");
        t.on_sent(at(4000), 100, 3..4, 0);
        assert_eq!(t.current(), ms(3000), "backed-off value kept after a lossy flight");
        t.on_sent(at(5000), 100, 4..5, 0);
        t.on_sent(at(6000), 100, 5..6, 0);
        assert_eq!(t.current(), ms(1000));
        // It doubles on either cause (tinyDTLS).
        let mut t = fixed(2000, 60_000);
        t.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(t.on_resent(at(1500), 1..2, Resend::PeerRetransmission), at(5500));
    }

    #[test]
    fn adaptive_timer_follows_clean_samples_and_skips_resent_flights() {
        let mut t = adaptive(50, 1000, None);
        // No estimate yet: the initial value.
        assert_eq!(t.on_sent(at(0), 100, 0..1, 0), at(1000));
        // Answered (100 bytes) after 200 ms: SRTT 200, RTTVAR 100, the next flight waits 600 ms.
        assert_eq!(t.on_sent(at(200), 100, 1..2, 100), at(800));
        // Lost once: doubled, and the late answer gives no sample (Karn).
        assert_eq!(t.on_resent(at(800), 2..3, Resend::Timer), at(2000));
        t.on_sent(at(1000), 100, 3..4, 200);
        assert_eq!(t.estimate().unwrap().samples(), 1);
        assert_eq!(t.current(), ms(1200), "backed-off value kept until a clean sample");
        // A clean exchange of 200 ms brings it back to the estimate.
        t.on_sent(at(1200), 100, 4..5, 300);
        assert_eq!(t.estimate().unwrap().samples(), 2);
        assert_eq!(t.current(), ms(500));
    }

    #[test]
    fn after_a_lossy_flight_the_next_keeps_one_doubling_not_all() {
        let mut t = adaptive(50, 1000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        t.on_sent(at(200), 100, 1..2, 100);
        assert_eq!(t.current(), ms(600));
        // Lost three times: 1.2, 2.4, 4.8 s, each doubling (RFC 6347 §4.2.4.1).
        for (i, when) in [800, 2000, 4400].into_iter().enumerate() {
            t.on_resent(at(when), 2 + i as u64..3 + i as u64, Resend::Timer);
        }
        assert_eq!(t.current(), ms(4800));
        // Answered at last: the next flight stays backed off, but once (1.2 s), not 4.8 s.
        t.on_sent(at(9000), 100, 5..6, 200);
        assert_eq!(t.estimate().unwrap().samples(), 1, "Karn: no sample from the resent flight");
        assert_eq!(t.current(), ms(1200));
    }

    #[test]
    fn an_exchange_far_larger_than_measured_waits_at_least_the_initial_value() {
        let mut t = adaptive(50, 2000, Some(earlier(20, 5, &[])));
        // A 150-byte flight (the answer guessed at 0 bytes): the measured size, the estimate.
        t.on_sent(at(0), 150, 0..1, 0);
        assert_eq!(t.current(), ms(50), "floor: 20 + 20 ms");
        // A 2 kB certificate flight after a 100-byte answer: a stretched 250 ms would fire
        // while its frames still wait for their periods.
        t.on_sent(at(20), 2000, 1..2, 100);
        assert_eq!(t.current(), ms(2000));
    }

    #[test]
    fn an_exchange_larger_than_the_largest_measured_waits_the_initial_value_until_measured() {
        let mut t = adaptive(50, 2000, None);
        // A beacon network's server: its 150-byte cookie exchange fit in one active period
        // (14 ms), its 230-byte flight 4 exchange waits for the next one.
        t.on_outside_sample(ms(14), 150, 100);
        t.on_sent(at(0), 130, 0..1, 0);
        assert_eq!(t.current(), ms(2000), "230 bytes: more than a quarter above 150");
        // Measured (1 s, clean): the next such exchange follows the estimate, not 2 s.
        t.on_sent(at(1000), 130, 1..2, 100);
        let s = t.estimate().unwrap().smoothed.unwrap();
        assert_eq!(s.largest, 230);
        assert!(t.current() < ms(2000) && t.current() > ms(1000), "{:?}", t.current());
        // The smoothed size alone would have called it unmeasured again.
        assert!(s.bytes < 200);
    }

    #[test]
    fn an_answer_that_needed_the_peers_loss_recovery_gives_no_sample() {
        let mut t = adaptive(50, 1000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        // Part of the answer was lost and resent on the peer's timer: 2.2 s are that timer.
        t.on_peer_records_skipped(true);
        t.on_sent(at(2200), 100, 1..2, 100);
        assert!(t.estimate().is_none(), "no sample from the peer's recovery");
        assert!(capped(&t), "part of the answer had come: the rest was lost");
        // A gap noticed before our next flight went out says nothing about its answer.
        t.on_sent(at(2400), 100, 2..3, 200);
        assert_eq!(t.estimate().unwrap().smoothed(), ms(200));
    }

    #[test]
    fn after_a_loss_no_flight_waits_longer_than_the_initial_value() {
        let mut t = adaptive(50, 2000, None);
        // 1.5 s per exchange, measured clean: 1.5 + 4 · 0.75 = 4.5 s.
        t.on_sent(at(0), 100, 0..1, 0);
        t.on_sent(at(1500), 100, 1..2, 100);
        assert_eq!(t.current(), ms(4500));
        // The next answer names the resent copy: the first transmission or its answer was lost.
        t.on_resent(at(6000), 2..3, Resend::Timer);
        t.on_acknowledged(at(7500), 2, 200);
        assert!(capped(&t));
        assert!(!lossy(&t), "one loss may be a collision: not carried");
        // From now on each flight waits the initial 2 s at most, and still doubles on loss.
        t.on_sent(at(7500), 100, 3..4, 200);
        assert_eq!(t.current(), ms(2000));
        assert_eq!(t.on_resent(at(9500), 4..5, Resend::Timer), at(13_500));
        // The answer to that flight came after the peer's own recovery: a second loss.
        t.on_peer_records_skipped(true);
        assert!(lossy(&t));
        // The losses reach the next handshake, whose first flight would wait past 2 s.
        let mut next = adaptive(50, 2000, t.estimate());
        next.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(next.current(), ms(2000));
        // The fixed policy ignores the cache.
        let mut fixed = RetransmitTimer::new(ms(1000), ms(60_000), RetransmitPolicy::Fixed, t.estimate());
        fixed.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(fixed.current(), ms(1000));
    }

    #[test]
    fn an_acknowledgement_measures_the_transmission_it_names() {
        let mut t = adaptive(50, 1000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        t.on_resent(at(1000), 1..2, Resend::Timer);
        // It names record 0, sent at 0: a 3 s round trip, not 2 s, and no loss.
        t.on_acknowledged(at(3000), 0, 40);
        assert_eq!(t.estimate().unwrap().smoothed(), ms(3000));
        assert!(!capped(&t), "a spurious resend is no loss");
        // A record number never sent gives nothing.
        let mut u = adaptive(50, 1000, None);
        u.on_sent(at(0), 100, 0..1, 0);
        u.on_acknowledged(at(3000), 7, 40);
        assert!(u.estimate().is_none());
    }

    #[test]
    fn records_skipped_before_the_answer_began_show_no_loss_unless_we_resent() {
        let mut t = adaptive(50, 1000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        // Copies of the peer's previous flight, which we had, may be what went missing.
        t.on_peer_records_skipped(false);
        assert!(!capped(&t));
        // Once our flight was resent, the answer itself may have been lost.
        t.on_resent(at(1000), 1..2, Resend::Timer);
        t.on_peer_records_skipped(false);
        assert!(capped(&t));
    }

    #[test]
    fn a_loss_right_after_a_needless_copy_caps_this_handshake_only() {
        let mut t = adaptive(50, 2000, None);
        // The ClientHello went out twice, and the answer names the first: the copy was needless.
        t.on_sent(at(0), 100, 0..1, 0);
        t.on_resent(at(2000), 1..2, Resend::Timer);
        t.on_acknowledged(at(2900), 0, 40);
        // The next exchange loses a datagram, which may have met the answer to that copy.
        t.on_sent(at(2900), 100, 2..3, 40);
        t.on_peer_records_skipped(true);
        assert!(capped(&t), "this handshake is capped from now on");
        assert!(!lossy(&t), "but the next one does not inherit it");
        // Losses one exchange later owe nothing to the copy: two are carried.
        t.on_sent(at(9000), 100, 3..4, 200);
        t.on_peer_records_skipped(true);
        assert!(!lossy(&t), "one loss may be a collision");
        t.on_peer_records_skipped(true);
        assert!(lossy(&t));
    }

    #[test]
    fn a_loss_after_a_copy_sent_on_a_guess_caps_nothing() {
        // A beacon network's server: its cookie exchange (44 + 141 bytes) fit in one active
        // period, then its 2 kB certificate flight takes seconds to carry.
        let first_handshake = |flight_bytes: u32, cached: Option<RttEstimate>| {
            let mut t = adaptive(1000, 2000, cached);
            t.on_outside_sample(ms(18), 185, 141);
            t.on_sent(at(0), flight_bytes, 0..2, 141);
            t
        };
        let guess = |t: &RetransmitTimer| t.exchange.basis == Basis::Guess;
        let mut t = first_handshake(2074, None);
        assert!(guess(&t), "ten times the largest exchange measured");
        assert_eq!(t.current(), ms(2000));
        // The guess fires while the flight is still on its way; the copy takes the channel
        // from the client's answer, which comes again later, its first records missing.
        t.on_resent(at(2000), 2..4, Resend::Timer);
        t.on_peer_records_skipped(false);
        assert!(!capped(&t), "the loss shows our copy, not the path");
        t.on_sent(at(7900), 67, 4..5, 141 + 1880);
        assert!(!lossy(&t));
        // The next handshake's flight waits at least what the answer took: no copy at 2 s.
        let next = first_handshake(2074, t.estimate());
        assert!(!guess(&next));
        assert!(next.current() >= ms(7900), "{:?}", next.current());
        // A flight of a size measured is no guess: the same loss caps the timer.
        let mut small = first_handshake(200, None);
        assert!(!guess(&small));
        small.on_resent(at(2000), 2..3, Resend::Timer);
        small.on_peer_records_skipped(false);
        assert!(capped(&small));
    }

    #[test]
    fn a_copy_sent_for_the_peers_retransmission_waits_no_longer_than_the_initial_value() {
        let mut t = adaptive(1250, 2000, Some(earlier(1000, 100, &[(0, 6000, 100)])));
        // The exchange took 6 s last time: 7.5 s.
        assert_eq!(t.on_sent(at(0), 100, 0..1, 0), at(7500));
        // The peer resent its flight at 2 s: ours or its answer was lost. Not 15 s, but 2.
        let due = t.on_resent(at(2000), 1..2, Resend::PeerRetransmission);
        assert_eq!(due, at(4000));
        // Our timer then doubles as ever.
        assert_eq!(t.on_resent(due, 2..3, Resend::Timer), at(8000));
    }

    #[test]
    fn a_clean_handshake_clears_the_loss_it_started_with() {
        let lossy_path = RttEstimate { losses: Losses::Seen { counted: 0 }, ..earlier(3000, 100, &[]) };
        let mut t = adaptive(50, 2000, Some(lossy_path));
        t.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(t.current(), ms(2000), "the last handshake lost: capped at the initial value");
        t.on_sent(at(3000), 100, 1..2, 100);
        assert_eq!(t.current(), ms(2000));
        // Nothing lost in this one: the next starts from the estimate again.
        assert!(!lossy(&t));
        let mut next = adaptive(50, 2000, t.estimate());
        next.on_sent(at(0), 100, 0..1, 0);
        assert!(next.current() > ms(3000), "{:?}", next.current());
    }

    #[test]
    fn a_flight_waits_what_its_exchange_took_last_time_plus_a_period() {
        // The floor is the link's wake-up period and a quarter (1.25 s).
        let cached = RttEstimate {
            smoothed: Some(Smoothed { largest: 300, ..earlier(2000, 3000, &[]).smoothed.unwrap() }),
            ..earlier(2000, 3000, &[(1, 8000, 300)])
        };
        let mut t = adaptive(1250, 2000, Some(cached));
        // The first flight was not kept: SRTT + 4·RTTVAR.
        t.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(t.current(), ms(14_000));
        // The second took 8 s last time: 8 s and a margin, here one and a half RTTVAR (2.25 s
        // after this handshake's first sample), more than a quarter of 8 s.
        t.on_sent(at(2000), 300, 1..2, 100);
        assert_eq!(t.current(), ms(11_375));
        // Where a quarter of the exchange is less than the floor, the floor is the margin.
        let mut t = adaptive(1250, 2000, Some(earlier(1000, 100, &[(0, 2000, 100)])));
        t.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(t.current(), ms(3250));
        // An exchange shorter than the floor caught a wake-up by luck; the next may wait a whole
        // period more each way: it counts as the floor.
        let mut t = adaptive(1250, 2000, Some(earlier(100, 10, &[(0, 100, 100)])));
        t.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(t.current(), ms(2500));
    }

    #[test]
    fn a_flight_waits_at_least_what_the_path_takes_to_carry_its_exchange() {
        // The last handshake with the peer lost: no flight waits longer than 2 s.
        let cached = RttEstimate { losses: Losses::Seen { counted: 0 }, ..earlier(500, 100, &[]) };
        let mut t = adaptive(1000, 2000, Some(cached));
        t.on_sent(at(0), 150, 0..1, 0);
        assert_eq!(t.current(), ms(1000));
        // The answer comes in two 1000-byte datagrams a second apart: a kilobyte a second.
        let pace = |t: &RetransmitTimer| t.estimate().unwrap().pace.per_kb();
        t.on_datagram(1, at(600), 1000);
        t.on_answer_datagram();
        t.on_datagram(2, at(1600), 1000);
        t.on_answer_datagram();
        assert_eq!(pace(&t), Some(ms(1000)));
        // A 2000-byte flight, answered with about as much: 4 s to carry, and the floor, past the
        // 2 s the loss allows; so does a copy sent because the peer resent its flight.
        t.on_sent(at(1600), 2000, 1..3, 2000);
        assert_eq!(t.current(), ms(5000));
        assert_eq!(t.on_resent(at(3000), 3..5, Resend::PeerRetransmission), at(8000));
        // A faster pair lowers the pace; a slower one does not raise it.
        for (n, when, bytes) in [(3, 8100, 500), (4, 8350, 500), (5, 9350, 100)] {
            t.on_datagram(n, at(when), bytes);
            t.on_answer_datagram();
        }
        assert_eq!(pace(&t), Some(ms(500)));
        // Datagrams not in a row (a copy of what we had came between), or of two flights of the
        // peer's (ours went out between), give no sample.
        t.on_datagram(6, at(9380), 1000);
        t.on_datagram(7, at(9400), 1000);
        t.on_answer_datagram();
        t.on_datagram(8, at(9401), 1000);
        t.on_datagram(9, at(9402), 1000);
        t.on_answer_datagram();
        t.on_sent(at(9402), 200, 5..6, 4000);
        t.on_datagram(10, at(9403), 1000);
        t.on_answer_datagram();
        assert_eq!(pace(&t), Some(ms(500)));
        // The pace goes to the next handshake with the peer.
        assert_eq!(pace(&adaptive(1000, 2000, t.estimate())), Some(ms(500)));
    }

    #[test]
    fn exchanges_that_vary_by_more_than_a_period_widen_the_margin() {
        // X-MAC, check interval 125 ms, four hops: the earlier ClientHello caught every
        // rendezvous (104 ms), later exchanges took 629 and 621 ms.
        let mut t = adaptive(156, 2000, Some(earlier(450, 240, &[(0, 104, 79)])));
        t.on_sent(at(0), 79, 0..1, 0);
        // 450 ms and 360 ms: one floor more (606 ms) would resend before a 624 ms exchange.
        assert_eq!(t.current(), ms(810));
    }

    #[test]
    fn an_exchange_kept_without_any_clean_sample_waits_rfc_6298s_first_variation() {
        // X-MAC, check interval 500 ms, three hops: the server's earlier flight was resent (no
        // clean sample, so no variation), and its exchange took 2.99 s. The next one may catch
        // its rendezvous a second later: RTTVAR = R/2 (RFC 6298 §2.2) leaves 0.75 R of margin,
        // where a quarter (3.74 s) would resend before a 3.99 s exchange.
        let mut cached = earlier(0, 0, &[(0, 2990, 1302)]);
        cached.smoothed = None;
        let mut t = adaptive(625, 2000, Some(cached));
        t.on_sent(at(0), 1302, 0..2, 0);
        assert_eq!(t.current(), Duration::from_micros(5_232_500));
    }

    #[test]
    fn a_flight_of_a_size_not_measured_waits_what_a_smaller_ones_exchange_took() {
        // A full handshake's flights: a 79-byte ClientHello answered in 0.4 s (it caught the
        // cells), a 109-byte flight whose exchange took 5 s.
        let mut cached = earlier(1500, 100, &[(0, 400, 79), (2, 5000, 109)]);
        cached.smoothed = cached.smoothed.map(|s| Smoothed { bytes: 250, largest: 320, ..s });
        // A resumption's 220-byte ClientHello (its ticket) matches neither: it waits the 5 s
        // and the floor, not SRTT and its margin (1.9 s).
        let mut t = adaptive(1250, 2000, Some(cached));
        t.on_sent(at(0), 220, 0..1, 0);
        assert_eq!(t.current(), ms(6250));
        // A flight smaller than every one kept has no such bound.
        let mut t = adaptive(1250, 2000, Some(cached));
        t.on_sent(at(0), 60, 0..1, 0);
        assert_eq!(t.current(), ms(1900));
    }

    #[test]
    fn a_resent_flight_leaves_its_exchange_as_an_upper_bound_but_no_sample() {
        let mut t = adaptive(50, 1000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        t.on_sent(at(500), 100, 1..2, 100);
        // The second flight is resent at 1.5 s; its answer comes at 4.5 s, 4 s after it went.
        t.on_resent(at(1500), 2..3, Resend::Timer);
        t.on_sent(at(4500), 100, 3..4, 200);
        let estimate = t.estimate().unwrap();
        assert_eq!(estimate.samples(), 1, "Karn: SRTT has the clean exchange only");
        assert_eq!(estimate.smoothed(), ms(500));
        assert_eq!(estimate.kept.lookup(1, 100), KeptFor::This(ms(4000)), "the next handshake waits for it");
        // After a loss was seen, a resent flight's time may hold the loss: nothing is kept.
        t.path.losses.record(Blame::Path);
        t.on_resent(at(5000), 4..5, Resend::Timer);
        t.on_sent(at(9000), 100, 5..6, 300);
        assert_eq!(t.estimate().unwrap().kept.lookup(2, 100), KeptFor::Nothing);
    }

    #[test]
    fn the_ceiling_rises_to_twice_the_longest_exchange() {
        // A four-hop TSCH path with 10 s slotframes: 100 s per exchange.
        let mut t = adaptive(100, 2000, Some(earlier(100_000, 1000, &[(0, 100_000, 100)])));
        t.on_sent(at(0), 100, 0..1, 0);
        assert_eq!(t.current(), ms(125_000), "not clamped to 60 s");
        t.on_resent(at(125_000), 1..2, Resend::Timer);
        assert_eq!(t.current(), ms(200_000), "doubled up to 2 · 100 s");
        // Without an estimate the configured ceiling holds.
        let mut t = adaptive(100, 40_000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        t.on_resent(at(40_000), 1..2, Resend::Timer);
        assert_eq!(t.current(), ms(60_000));
    }

    #[test]
    fn a_long_timer_still_answers_the_peers_resent_flight_soon() {
        let mut t = adaptive(50, 2000, None);
        t.on_sent(at(0), 100, 0..1, 0);
        for when in [2000, 6000, 14_000] {
            t.on_resent(at(when), 0..1, Resend::Timer);
        }
        assert_eq!(t.current(), ms(16_000));
        assert_eq!(t.answer_window(), ms(1000), "half the initial value, not 8 s");
    }
}
