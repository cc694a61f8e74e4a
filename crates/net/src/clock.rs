//! The one clock of the drivers: the process's monotonic time (tokio's, so a test that pauses
//! tokio's time pauses the engines too) mapped onto engine time, counted from the clock's origin.

use std::time::Duration;

use fastshake_core::Instant;
use fastshake_dtls::WallClock;

/// The furthest a timer is set: "never" from an engine (`None` or a deadline centuries away)
/// becomes a day, after which the driver simply asks the engine again.
const FURTHEST_TIMER: Duration = Duration::from_secs(86_400);

/// Maps tokio's monotonic clock onto the engine's [`Instant`].
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: tokio::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Clock { origin: tokio::time::Instant::now() }
    }

    /// The current engine time.
    pub fn now(&self) -> Instant {
        self.to_engine(tokio::time::Instant::now())
    }

    /// `t` on the engine's time line (the origin if `t` is earlier).
    pub fn to_engine(&self, t: tokio::time::Instant) -> Instant {
        let nanos = t.saturating_duration_since(self.origin).as_nanos();
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Engine time `t` on tokio's time line, at most `FURTHEST_TIMER` from now so tokio's
    /// timer wheel never overflows.
    pub fn to_tokio(&self, t: Instant) -> tokio::time::Instant {
        let latest = tokio::time::Instant::now() + FURTHEST_TIMER;
        self.origin.checked_add(t.since_origin()).map_or(latest, |at| at.min(latest))
    }

    /// A timer for an engine's next deadline (`None`: no deadline, a day from now).
    pub fn sleep_until(&self, deadline: Option<Instant>) -> tokio::time::Sleep {
        let at = match deadline {
            Some(t) => self.to_tokio(t),
            None => tokio::time::Instant::now() + FURTHEST_TIMER,
        };
        tokio::time::sleep_until(at)
    }

    /// Whether an engine's deadline has come. A driver then calls `handle_timeout` at once
    /// rather than through a timer: tokio's timer wheel counts whole milliseconds, so work an
    /// engine leaves due now (a packet to pack, an ACK to send) would wait for its next tick.
    pub fn is_due(&self, deadline: Option<Instant>) -> bool {
        deadline.is_some_and(|t| t <= self.now())
    }

    /// Pins Unix time (the system clock, now) to engine time, for certificate validity and
    /// session lifetimes.
    pub fn wall_clock(&self) -> WallClock {
        let unix_secs =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        WallClock { at: self.now(), unix_secs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_deadline_is_due_once_it_has_come_and_never_without_one() {
        let clock = Clock::new();
        let now = clock.now();
        assert!(clock.is_due(Some(now)));
        assert!(clock.is_due(Some(Instant::ZERO)));
        assert!(!clock.is_due(Some(now + Duration::from_secs(3600))));
        assert!(!clock.is_due(None));
    }

    #[tokio::test]
    async fn engine_time_round_trips_and_never_is_capped() {
        let clock = Clock::new();
        let t = clock.now() + Duration::from_millis(250);
        assert_eq!(clock.to_engine(clock.to_tokio(t)), t);
        let never = clock.to_tokio(Instant::MAX);
        assert!(never <= tokio::time::Instant::now() + FURTHEST_TIMER);
    }
}
