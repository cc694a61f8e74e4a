//! Unix time without a clock: the driver pins one instant to its Unix time, and the engine
//! counts from there.

use fastshake_core::Instant;

/// Anchors engine time to Unix time: at engine instant `at` it was `unix_secs`.
///
/// Certificates are validated at, and tickets expire by, Unix time; the engine's
/// [`crate::Instant`] is monotonic and may be virtual, and an engine reads no clock. So the
/// caller (the driver, which owns the clock) pins one pair, and the engine computes
/// `unix_secs + (now - at)` for any later `now`. Simulations and tests pin a fixed date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    /// An engine instant.
    pub at: Instant,
    /// Unix seconds at `at`.
    pub unix_secs: u64,
}

impl WallClock {
    /// Unix seconds at engine time `now`.
    pub fn unix_at(&self, now: Instant) -> u64 {
        if now >= self.at {
            self.unix_secs.saturating_add(now.saturating_duration_since(self.at).as_secs())
        } else {
            self.unix_secs.saturating_sub(self.at.saturating_duration_since(now).as_secs())
        }
    }
}

/// Unix seconds from `wall_clock` at `now`, or engine seconds when there is none.
pub(crate) fn unix_now(wall_clock: Option<WallClock>, now: Instant) -> u64 {
    wall_clock.map_or(now.as_nanos() / 1_000_000_000, |w| w.unix_at(now))
}
