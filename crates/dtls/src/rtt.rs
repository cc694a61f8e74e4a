//! Round trips to a peer, for the adaptive handshake timer
//! ([`crate::RetransmitPolicy::Adaptive`]): the estimator (RFC 6298 §2, with a margin for
//! steady links and an allowance for flight size) and the bounded per-peer cache that carries
//! an estimate from one handshake to the next, like TCP's metrics cache.
//!
//! A round trip here is an *exchange*: from the first transmission of one of our flights until
//! the peer's answering flight is complete. On a duty-cycled link that time grows with the
//! frames both flights take, so each sample is kept with the bytes of the exchange it measured
//! (our flight and the peer's answer), and an estimate is stretched for a larger exchange,
//! never shrunk for a smaller one: on a link where size does not matter (the Internet) a larger
//! timer only costs loss recovery time, while a shrunk one would fire spuriously. Beside the
//! smoothed estimate, each of our flights' exchanges is kept by its place in the handshake and
//! the size of our flight (the [`FlightProfile`]): the next handshake's same flight takes
//! about as long again on a link whose schedule repeats.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

/// What is known of the round trip to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttEstimate {
    /// SRTT of RFC 6298.
    pub smoothed: Duration,
    /// RTTVAR of RFC 6298.
    pub variation: Duration,
    /// Smoothed bytes of the exchanges measured (our flight and the peer's answer): the size the
    /// estimate stands for.
    pub exchange_bytes: u32,
    /// Samples behind the estimate (in this handshake, plus those of the cached estimate it
    /// started from).
    pub samples: u32,
    /// Bytes of the largest exchange measured: beyond it the estimate is a guess.
    pub largest_exchange: u32,
    /// Whether the handshake lost datagrams (an answer named a later transmission than our
    /// first, or the peer's record numbers skipped records of an exchange): then no flight of
    /// the next handshake with the peer waits longer than the initial value before it is sent
    /// again (within a handshake, its first loss caps it at once). Set when it lost two: one
    /// may be a copy's collision on a contention MAC. A clean handshake clears it.
    pub loss_seen: bool,
    /// The exchange each of our flights started, by its place in the handshake, took when last
    /// measured (zero: not measured).
    pub flights: FlightProfile,
    /// The least time a kilobyte of the peer's flights took to follow the datagram before it
    /// (zero: never seen): a lower bound on how long the path takes to carry a flight, which
    /// no timer goes below.
    pub pace: Duration,
}

/// Flights of ours remembered by their place in a handshake.
pub const PROFILE_FLIGHTS: usize = 4;

/// What each of our flights' exchanges took, by the flight's place in the handshake.
pub type FlightProfile = [ProfiledExchange; PROFILE_FLIGHTS];

/// One exchange of a [`FlightProfile`]: what it took (zero: not measured) and the bytes of our
/// flight that started it, so that a flight of another handshake at the same place (a
/// resumption's ClientHello with its ticket, or one with a cached cookie, after a full
/// handshake's) does not take its time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfiledExchange {
    /// From our flight's first transmission to the answer (zero: not measured).
    pub took: Duration,
    /// Bytes of our flight that started it.
    pub flight_bytes: u32,
    /// Bytes of the peer's answering flight (zero: not seen), kept even when the exchange's
    /// time was not.
    pub answer_bytes: u32,
}

impl ProfiledExchange {
    /// Whether a flight of `flight_bytes` is the one measured: within a sixteenth of its size
    /// (a cookie or a ticket more is another flight).
    fn matches(&self, flight_bytes: u32) -> bool {
        !self.took.is_zero() && self.same_flight(flight_bytes)
    }

    fn same_flight(&self, flight_bytes: u32) -> bool {
        let (a, b) = (self.flight_bytes, flight_bytes);
        a.abs_diff(b) <= a.max(b) / 16
    }
}

impl RttEstimate {
    /// The retransmission timeout for an exchange of `exchange_bytes`: SRTT + 4·RTTVAR
    /// (RFC 6298 §2.3), with at least a quarter of SRTT as margin (in place of the clock
    /// granularity G: on a link of steady delay RTTVAR decays towards zero, and a timer armed at
    /// exactly the round trip races the answer), stretched by how much larger the exchange is
    /// than those measured. Not clamped: the timer applies its floor and ceiling.
    pub fn timeout_for(&self, exchange_bytes: u32) -> Duration {
        let margin = (self.variation.saturating_mul(4)).max(self.smoothed / 4);
        self.stretched(self.smoothed.saturating_add(margin), exchange_bytes)
    }

    /// The least time the path takes to carry `bytes`, from the pace of the peer's flights
    /// (zero: no pace measured).
    pub fn carrying(&self, bytes: u32) -> Duration {
        scaled(self.pace, f64::from(bytes) / 1000.0)
    }

    /// SRTT stretched like [`Self::timeout_for`] for an exchange of `exchange_bytes`.
    pub fn smoothed_for(&self, exchange_bytes: u32) -> Duration {
        self.stretched(self.smoothed, exchange_bytes)
    }

    fn stretched(&self, base: Duration, exchange_bytes: u32) -> Duration {
        if exchange_bytes > self.exchange_bytes && self.exchange_bytes > 0 {
            scaled(base, f64::from(exchange_bytes) / f64::from(self.exchange_bytes))
        } else {
            base
        }
    }
}

/// `d` times `factor`, saturating (`Duration::mul_f64` panics past its range).
fn scaled(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// Losses a handshake must see before the next one with the peer starts capped at the initial
/// value. On a contention MAC one lost datagram may be a copy's collision, or the peer's answer
/// meeting it on a busy channel (at PDR 100 % collisions are the only losses), and capping
/// the next handshake then makes every flight whose exchange takes longer than the initial
/// value resend needlessly; two show a lossy path. A loss in the handshake itself caps it at
/// once.
pub(crate) const LOSSES_CARRIED: u32 = 2;

/// RFC 6298 §2 smoothing of round-trip samples.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RttEstimator {
    estimate: Option<RttEstimate>,
    /// A loss was seen in this handshake or the one before with the peer (kept apart so one
    /// seen before the first sample is not forgotten): it caps the timer.
    loss_seen: bool,
    /// Losses seen in this handshake that the next one with the peer hears of (from
    /// [`LOSSES_CARRIED`] on, it starts capped).
    losses_kept: u32,
    /// Exchanges (this one and the next) in which a loss may be our own doing: a copy of ours
    /// went out that the peer did not need, and on a contention MAC it, or the peer's answer to
    /// it, competes for the channel with the flight that follows.
    after_needless_copy: u8,
    profile: FlightProfile,
    /// The pace carried from the last handshake, and the least measured in this one.
    pace_carried: Duration,
    pace: Option<Duration>,
}

impl RttEstimator {
    /// Starts from an estimate cached by an earlier handshake with the same peer.
    pub fn seeded(estimate: Option<RttEstimate>) -> Self {
        RttEstimator {
            estimate: estimate.filter(|e| e.samples > 0),
            loss_seen: estimate.is_some_and(|e| e.loss_seen),
            losses_kept: 0,
            after_needless_copy: 0,
            profile: estimate.map(|e| e.flights).unwrap_or_default(),
            pace_carried: estimate.map(|e| e.pace).unwrap_or_default(),
            pace: None,
        }
    }

    /// A datagram of `bytes` of the peer's flight came `gap` after the one before it of the
    /// same flight: the path carried it in no more than that. The least such time per byte is
    /// kept (a gap also holds the peer's pauses and the link's waits, never less than the
    /// carrying), so one long gap does not raise it.
    pub fn on_paced_datagram(&mut self, gap: Duration, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let per_kb = scaled(gap, 1000.0 / bytes as f64);
        self.pace = Some(self.pace.map_or(per_kb, |p| p.min(per_kb)));
    }

    /// The pace of this handshake, or the one carried from the last.
    pub fn pace(&self) -> Duration {
        self.pace.unwrap_or(self.pace_carried)
    }

    /// The path lost a datagram: the timer is capped from now on, and in the next handshake
    /// with the peer once this one has lost [`LOSSES_CARRIED`], unless the loss came right
    /// after a needless copy of ours (then it shows what our copy did to the path more than
    /// what the path does).
    pub fn on_loss(&mut self) {
        self.loss_seen = true;
        if self.after_needless_copy == 0 {
            self.losses_kept = self.losses_kept.saturating_add(1);
        }
    }

    /// The peer answered the first transmission of a flight we had resent: the copy was not
    /// needed. A loss in this exchange or the next may be its doing.
    pub fn on_needless_copy(&mut self) {
        self.after_needless_copy = 2;
    }

    /// Our next flight begins a new exchange.
    pub fn on_new_exchange(&mut self) {
        self.after_needless_copy = self.after_needless_copy.saturating_sub(1);
    }

    pub fn loss_seen(&self) -> bool {
        self.loss_seen
    }

    /// The longest exchange measured: SRTT, or an exchange of the profile if longer.
    pub fn longest(&self) -> Option<Duration> {
        let profiled = self.profile.iter().map(|p| p.took).max().filter(|d| !d.is_zero());
        match (self.estimate.map(|e| e.smoothed), profiled) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// What the exchange of our flight at `place`, of `flight_bytes`, took when last measured:
    /// at that place, or else at a later one, as an earlier handshake measured it (a
    /// ClientHello with a cached cookie is the one that came second after a cookie exchange).
    pub fn profiled(&self, place: usize, flight_bytes: u32) -> Option<Duration> {
        let mut candidates = self.profile.iter().skip(place);
        candidates.find(|p| p.matches(flight_bytes)).map(|p| p.took)
    }

    /// The longest exchange kept for a flight of ours of at most `flight_bytes`, at `place` or
    /// later.
    pub fn longest_for_flights_up_to(&self, place: usize, flight_bytes: u32) -> Option<Duration> {
        let later = self.profile.iter().skip(place);
        let kept = later.filter(|p| !p.took.is_zero() && p.flight_bytes <= flight_bytes);
        kept.map(|p| p.took).max()
    }

    /// The exchange of our flight at `place`, of `flight_bytes`, took `rtt`; the peer answered
    /// with `answer_bytes`.
    pub fn profile(&mut self, place: usize, flight_bytes: u32, answer_bytes: u32, rtt: Duration) {
        if let Some(slot) = self.profile.get_mut(place) {
            let took = rtt.max(Duration::from_micros(1));
            *slot = ProfiledExchange { took, flight_bytes, answer_bytes };
        }
    }

    /// The peer answered our flight at `place`, of `flight_bytes`, with `answer_bytes`, in a
    /// time not measured (the flight was resent, or the answer recovered from a loss).
    pub fn profile_answer(&mut self, place: usize, flight_bytes: u32, answer_bytes: u32) {
        if let Some(slot) = self.profile.get_mut(place) {
            if !slot.same_flight(flight_bytes) {
                *slot = ProfiledExchange { flight_bytes, ..ProfiledExchange::default() };
            }
            slot.answer_bytes = answer_bytes;
        }
    }

    /// The bytes with which the peer last answered our flight at `place`, of `flight_bytes`.
    pub fn answer_bytes(&self, place: usize, flight_bytes: u32) -> Option<u32> {
        let slot = self.profile.get(place)?;
        (slot.same_flight(flight_bytes) && slot.answer_bytes > 0).then_some(slot.answer_bytes)
    }

    /// One measured exchange of `exchange_bytes` that took `rtt` (RFC 6298 §2.2 and §2.3,
    /// α = 1/8, β = 1/4; the exchange size smoothed like SRTT).
    pub fn sample(&mut self, rtt: Duration, exchange_bytes: u32) {
        self.estimate = Some(match self.estimate {
            None => RttEstimate {
                smoothed: rtt,
                variation: rtt / 2,
                exchange_bytes,
                samples: 1,
                largest_exchange: exchange_bytes,
                loss_seen: self.loss_seen,
                flights: self.profile,
                pace: self.pace(),
            },
            Some(e) => RttEstimate {
                variation: e.variation * 3 / 4 + e.smoothed.abs_diff(rtt) / 4,
                smoothed: e.smoothed * 7 / 8 + rtt / 8,
                exchange_bytes: ((u64::from(e.exchange_bytes) * 7 + u64::from(exchange_bytes)) / 8) as u32,
                samples: e.samples.saturating_add(1),
                largest_exchange: e.largest_exchange.max(exchange_bytes),
                loss_seen: self.loss_seen,
                flights: self.profile,
                pace: self.pace(),
            },
        });
    }

    /// The estimate, or when no round trip was sampled but exchanges were kept by their place
    /// (every flight resent), one of no samples that carries them to the next handshake. Its
    /// loss flag is the one carried to the next handshake.
    pub fn estimate(&self) -> Option<RttEstimate> {
        let loss_seen = self.losses_kept >= LOSSES_CARRIED;
        let (flights, pace) = (self.profile, self.pace());
        if let Some(e) = self.estimate {
            return Some(RttEstimate { loss_seen, flights, pace, ..e });
        }
        let profiled = self.profile.iter().any(|p| !p.took.is_zero());
        profiled.then_some(RttEstimate {
            smoothed: Duration::ZERO,
            variation: Duration::ZERO,
            exchange_bytes: 0,
            samples: 0,
            largest_exchange: 0,
            loss_seen,
            flights,
            pace,
        })
    }
}

/// Peers remembered at most by default.
pub const DEFAULT_RTT_CACHE_ENTRIES: usize = 256;

/// The round trips last measured to peers, by IP address (the path's delay belongs to the host,
/// not the port, as in TCP's metrics cache), bounded in entries; when full, the entry used least
/// recently goes. Shared between connections (a client keeps one behind an `Arc` in its
/// [`crate::ClientConfig`]; an [`crate::Endpoint`] keeps one for its clients), so it locks.
pub struct RttCache {
    capacity: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    /// Each entry with the tick of its last use.
    entries: BTreeMap<IpAddr, (RttEstimate, u64)>,
    tick: u64,
}

impl RttCache {
    /// A cache of at most `capacity` peers (at least 1).
    pub fn new(capacity: usize) -> Self {
        RttCache { capacity: capacity.max(1), inner: Mutex::new(CacheInner::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // A panic elsewhere while holding the lock leaves a consistent map: keep using it.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The estimate last stored for `peer`, marking it used.
    pub fn get(&self, peer: IpAddr) -> Option<RttEstimate> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (estimate, used) = inner.entries.get_mut(&peer)?;
        *used = tick;
        Some(*estimate)
    }

    /// Stores `estimate` for `peer`, replacing what was there; evicts the least recently used
    /// entry when full.
    pub fn insert(&self, peer: IpAddr, estimate: RttEstimate) {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.entries.contains_key(&peer) && inner.entries.len() >= self.capacity {
            let oldest = inner.entries.iter().min_by_key(|(_, (_, used))| *used).map(|(ip, _)| *ip);
            if let Some(ip) = oldest {
                inner.entries.remove(&ip);
            }
        }
        inner.entries.insert(peer, (estimate, tick));
    }

    /// Peers remembered now.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no peer is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most peers remembered.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl Default for RttCache {
    fn default() -> Self {
        RttCache::new(DEFAULT_RTT_CACHE_ENTRIES)
    }
}

impl std::fmt::Debug for RttCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RttCache").field("entries", &self.len()).field("capacity", &self.capacity).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn follows_rfc_6298_and_stretches_for_larger_exchanges_only() {
        let mut e = RttEstimator::default();
        e.sample(MS(200), 100);
        let est = e.estimate().unwrap();
        // SRTT = 200, RTTVAR = 100: 200 + 400.
        assert_eq!(est.timeout_for(100), MS(600));
        assert_eq!(est.timeout_for(50), MS(600), "never shrunk for a smaller exchange");
        assert_eq!(est.timeout_for(300), MS(1800), "three times the bytes, three times the time");
        e.sample(MS(200), 100);
        // RTTVAR = 75, SRTT = 200.
        assert_eq!(e.estimate().unwrap().timeout_for(100), MS(500));
        for _ in 0..40 {
            e.sample(MS(200), 100);
        }
        // RTTVAR decays towards 0; the margin stays a quarter of SRTT.
        assert_eq!(e.estimate().unwrap().timeout_for(100), MS(250));
    }

    #[test]
    fn cache_is_bounded_and_evicts_least_recently_used() {
        let cache = RttCache::new(2);
        let est = |ms| RttEstimate {
            smoothed: MS(ms),
            variation: MS(1),
            exchange_bytes: 1,
            samples: 1,
            largest_exchange: 1,
            loss_seen: false,
            flights: FlightProfile::default(),
            pace: Duration::ZERO,
        };
        let ip = |n: u8| IpAddr::from([10, 0, 0, n]);
        cache.insert(ip(1), est(1));
        cache.insert(ip(2), est(2));
        assert_eq!(cache.get(ip(1)).unwrap().smoothed, MS(1));
        cache.insert(ip(3), est(3));
        assert_eq!(cache.len(), 2);
        assert!(cache.get(ip(2)).is_none(), "least recently used went");
        assert_eq!(cache.get(ip(1)).unwrap().smoothed, MS(1));
        assert_eq!(cache.get(ip(3)).unwrap().smoothed, MS(3));
    }
}
