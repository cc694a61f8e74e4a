//! What handshakes learn of the path to a peer ([`RttEstimate`]) and the bounded per-peer cache
//! that carries it from one handshake to the next ([`RttCache`]), like TCP's metrics cache. The
//! retransmission timer ([`crate::timer`]) records into it and reads it; the formula that reads
//! it, and why each part is kept, is documented there.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

/// What handshakes measured of the path to a peer: the round trip of its exchanges (a flight of
/// ours until the peer's answering flight is complete) smoothed as RFC 6298 does, each of our
/// flights' last exchange by its place in the handshake, the pace of the peer's datagrams, and
/// whether the path loses. A handshake under the adaptive policy starts from the one cached for
/// its peer; the handshake summary reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimate {
    pub(crate) smoothed: Option<Smoothed>,
    pub(crate) kept: KeptExchanges,
    pub(crate) pace: Pace,
    pub(crate) losses: Losses,
}

impl RttEstimate {
    /// SRTT of RFC 6298 (zero when no round trip was sampled, only exchanges resent).
    pub fn smoothed(&self) -> Duration {
        self.smoothed.map_or(Duration::ZERO, |s| s.srtt)
    }

    /// RTTVAR of RFC 6298.
    pub fn variation(&self) -> Duration {
        self.smoothed.map_or(Duration::ZERO, |s| s.rttvar)
    }

    /// Round trips sampled, in this handshake and in those whose estimate it started from.
    pub fn samples(&self) -> u32 {
        self.smoothed.map_or(0, |s| s.samples)
    }

    /// Whether the path lost enough that the next handshake with the peer starts capped at the
    /// initial timer value.
    pub fn lossy(&self) -> bool {
        self.losses != Losses::None
    }

    /// What the next handshake with the peer starts from; `None` when nothing was measured.
    pub(crate) fn carried(&self) -> Option<RttEstimate> {
        let measured = self.smoothed.is_some() || self.kept.longest().is_some();
        let losses = match self.losses {
            Losses::Seen { counted } if counted >= LOSSES_CARRIED => Losses::Seen { counted: 0 },
            _ => Losses::None,
        };
        let pace = self.pace.per_kb().map_or(Pace::Unknown, Pace::Carried);
        measured.then_some(RttEstimate { losses, pace, ..*self })
    }
}

/// RFC 6298 §2 state over exchange round trips, with the sizes the samples stood for: on a
/// duty-cycled link an exchange takes longer the more frames it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Smoothed {
    pub srtt: Duration,
    pub rttvar: Duration,
    pub samples: u32,
    /// Exchange bytes smoothed like SRTT: the size SRTT stands for.
    pub bytes: u32,
    /// The largest exchange sampled: past it the estimate extrapolates.
    pub largest: u32,
}

impl Smoothed {
    /// RFC 6298 §2.2 and §2.3, α = 1/8, β = 1/4; the size smoothed like SRTT.
    pub fn sample(last: Option<Smoothed>, rtt: Duration, bytes: u32) -> Smoothed {
        let Some(s) = last else {
            return Smoothed { srtt: rtt, rttvar: rtt / 2, samples: 1, bytes, largest: bytes };
        };
        Smoothed {
            rttvar: s.rttvar * 3 / 4 + s.srtt.abs_diff(rtt) / 4,
            srtt: s.srtt * 7 / 8 + rtt / 8,
            samples: s.samples.saturating_add(1),
            bytes: ((u64::from(s.bytes) * 7 + u64::from(bytes)) / 8) as u32,
            largest: s.largest.max(bytes),
        }
    }

    /// `d` for an exchange of `bytes`: stretched in proportion when larger than those sampled,
    /// never shrunk (where size does not matter a longer timer costs recovery time only, a
    /// shorter one fires spuriously).
    pub fn stretch(&self, d: Duration, bytes: u32) -> Duration {
        if bytes > self.bytes && self.bytes > 0 {
            scaled(d, f64::from(bytes) / f64::from(self.bytes))
        } else {
            d
        }
    }
}

/// `d` times `factor`, saturating (`Duration::mul_f64` panics past its range).
pub(crate) fn scaled(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// Places of our flights remembered: a full handshake's client sends three timed flights, its
/// server two, and a resumed one fewer.
const PLACES: usize = 4;

/// Our flights' last exchanges by their place in the handshake: RFC 9147 §5.8.2's "measured
/// round trip time for that message", carried to the next handshake, where the same flight
/// takes about as long again on a link whose schedule repeats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeptExchanges([Kept; PLACES]);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Kept {
    /// What the exchange took (`None`: not measured).
    took: Option<Duration>,
    /// Bytes of our flight that started it.
    flight: u32,
    /// Bytes of the peer's answer (0: not seen), kept even when the time was not.
    answer: u32,
}

impl Kept {
    /// Whether a flight of `bytes` is this one: within a sixteenth of its size. A flight varies
    /// by a few bytes (an ECDSA signature's DER length); a cookie or a ticket more (16 bytes
    /// and up, over a sixteenth of a 79-byte ClientHello) makes another flight.
    fn same_flight(&self, bytes: u32) -> bool {
        self.flight.abs_diff(bytes) <= self.flight.max(bytes) / 16
    }
}

/// What was kept for a flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeptFor {
    /// This flight's exchange (at its place, or at a later one as an earlier handshake
    /// measured it: a ClientHello with a cached cookie is the one that came second).
    This(Duration),
    /// None of this flight, but the longest exchange of a flight no larger, at its place or later.
    Smaller(Duration),
    Nothing,
}

impl KeptExchanges {
    pub fn lookup(&self, place: usize, bytes: u32) -> KeptFor {
        let later = || self.0.iter().skip(place).filter(|k| k.took.is_some());
        if let Some(d) = later().find(|k| k.same_flight(bytes)).and_then(|k| k.took) {
            return KeptFor::This(d);
        }
        later()
            .filter(|k| k.flight <= bytes)
            .filter_map(|k| k.took)
            .max()
            .map_or(KeptFor::Nothing, KeptFor::Smaller)
    }

    pub fn longest(&self) -> Option<Duration> {
        self.0.iter().filter_map(|k| k.took).max()
    }

    /// The bytes with which the peer last answered our flight at `place`, of `bytes`.
    pub fn answer(&self, place: usize, bytes: u32) -> Option<u32> {
        let k = self.0.get(place)?;
        (k.same_flight(bytes) && k.answer > 0).then_some(k.answer)
    }

    /// Our flight at `place`, of `bytes`, was answered with `answer` bytes after `took` (`None`:
    /// not measured; an earlier time of the same flight stays).
    pub fn record(&mut self, place: usize, bytes: u32, answer: u32, took: Option<Duration>) {
        let Some(k) = self.0.get_mut(place) else { return };
        if took.is_some() || !k.same_flight(bytes) {
            *k = Kept { took, flight: bytes, answer: 0 };
        }
        k.answer = answer;
    }
}

/// The least time a kilobyte of the peer's flights took to follow the datagram before it: a
/// lower bound on how long the path takes to carry a flight (a gap also holds the peer's pauses
/// and the link's waits, never less than the carrying, so one long gap does not raise it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Pace {
    #[default]
    Unknown,
    /// From the last handshake with the peer, until this one measures its own.
    Carried(Duration),
    Measured(Duration),
}

impl Pace {
    pub fn per_kb(self) -> Option<Duration> {
        match self {
            Pace::Unknown => None,
            Pace::Carried(d) | Pace::Measured(d) => Some(d),
        }
    }

    /// A datagram of `bytes` came `gap` after the one before it of the same flight.
    pub fn measure(&mut self, gap: Duration, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let per_kb = scaled(gap, 1000.0 / bytes as f64);
        *self = Pace::Measured(match *self {
            Pace::Measured(d) => d.min(per_kb),
            _ => per_kb,
        });
    }

    /// The least the path takes to carry `bytes` (zero when no pace was measured).
    pub fn carrying(self, bytes: u32) -> Duration {
        self.per_kb().map_or(Duration::ZERO, |d| scaled(d, f64::from(bytes) / 1000.0))
    }
}

/// Losses a handshake must count before the next one with the peer starts capped. At PDR 100 %
/// a contention MAC loses datagrams only to collisions, and each copy we send collides at most
/// once (with the datagram it meets); two losses show a path that loses on its own.
const LOSSES_CARRIED: u8 = 2;

/// What the path showed of loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Losses {
    /// None in this handshake, nor enough in the last one with the peer.
    #[default]
    None,
    /// Seen in this handshake, or carried from the last: the timer is capped. `counted` are
    /// this handshake's losses that show the path, not a copy of ours; from
    /// [`LOSSES_CARRIED`] on they reach the next handshake.
    Seen { counted: u8 },
}

/// Whose doing a loss may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blame {
    Path,
    /// A needless copy of ours went out in this exchange or the one before: on a contention
    /// MAC it, or the peer's answer to it, competes with the flight that follows.
    OurCopy,
}

impl Losses {
    pub fn record(&mut self, blame: Blame) {
        let counted = match *self {
            Losses::None => 0,
            Losses::Seen { counted } => counted,
        };
        let more = u8::from(blame == Blame::Path);
        *self = Losses::Seen { counted: counted.saturating_add(more) };
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
    fn smoothing_follows_rfc_6298_and_stretches_for_larger_exchanges_only() {
        let s = Smoothed::sample(None, MS(200), 100);
        assert_eq!((s.srtt, s.rttvar), (MS(200), MS(100)));
        assert_eq!(s.stretch(MS(600), 50), MS(600), "never shrunk for a smaller exchange");
        assert_eq!(s.stretch(MS(600), 300), MS(1800), "three times the bytes, three times the time");
        let s = Smoothed::sample(Some(s), MS(100), 200);
        assert_eq!(
            (s.srtt, s.rttvar, s.samples, s.bytes, s.largest),
            (MS(187) + MS(1) / 2, MS(100), 2, 112, 200)
        );
    }

    #[test]
    fn a_kept_exchange_is_found_by_its_flight_or_bounds_a_larger_one() {
        let mut kept = KeptExchanges::default();
        kept.record(0, 79, 44, Some(MS(400)));
        kept.record(2, 109, 60, Some(MS(5000)));
        assert_eq!(kept.lookup(0, 80), KeptFor::This(MS(400)), "within a sixteenth");
        assert_eq!(kept.lookup(0, 109), KeptFor::This(MS(5000)), "at a later place");
        assert_eq!(kept.lookup(0, 220), KeptFor::Smaller(MS(5000)));
        assert_eq!(kept.lookup(0, 60), KeptFor::Nothing);
        // An answer whose time was not measured keeps the time of the same flight.
        kept.record(0, 79, 50, None);
        assert_eq!((kept.lookup(0, 79), kept.answer(0, 79)), (KeptFor::This(MS(400)), Some(50)));
        kept.record(0, 95, 50, None);
        assert_eq!(kept.lookup(0, 95), KeptFor::Nothing, "another flight: its time is gone");
    }

    #[test]
    fn two_losses_of_the_path_reach_the_next_handshake_and_a_clean_one_clears_them() {
        let mut e = RttEstimate { smoothed: Some(Smoothed::sample(None, MS(1), 1)), ..Default::default() };
        e.losses.record(Blame::OurCopy);
        e.losses.record(Blame::Path);
        assert!(e.lossy() && !e.carried().unwrap().lossy(), "one loss of the path is not carried");
        e.losses.record(Blame::Path);
        let next = e.carried().unwrap();
        assert_eq!(next.losses, Losses::Seen { counted: 0 }, "capped from the start, counting anew");
        assert!(!next.carried().unwrap().lossy(), "a clean handshake lifts the cap");
    }

    #[test]
    fn cache_is_bounded_and_evicts_least_recently_used() {
        let cache = RttCache::new(2);
        let est =
            |ms| RttEstimate { smoothed: Some(Smoothed::sample(None, MS(ms), 1)), ..Default::default() };
        let ip = |n: u8| IpAddr::from([10, 0, 0, n]);
        cache.insert(ip(1), est(1));
        cache.insert(ip(2), est(2));
        assert_eq!(cache.get(ip(1)).unwrap().smoothed(), MS(1));
        cache.insert(ip(3), est(3));
        assert_eq!(cache.len(), 2);
        assert!(cache.get(ip(2)).is_none(), "least recently used went");
        assert_eq!(cache.get(ip(1)).unwrap().smoothed(), MS(1));
        assert_eq!(cache.get(ip(3)).unwrap().smoothed(), MS(3));
    }
}
