//! A fixed table of named deadlines: one slot per kind of timer, so "the next deadline" is a
//! minimum over a few slots and each timer is set, moved and stopped by its name.

use crate::Instant;

/// A kind of timer: an index into the table.
pub trait TimerKind: Copy + 'static {
    /// Every kind, in the order they are checked when several expire at once.
    const ALL: &'static [Self];
    /// The kind's slot in the table (0, 1, ...).
    fn index(self) -> usize;
}

/// Deadlines for the timers of kind `T`, at most `N` of them.
#[derive(Clone, Debug)]
pub struct TimerTable<T: TimerKind, const N: usize> {
    deadlines: [Option<Instant>; N],
    _kind: std::marker::PhantomData<T>,
}

impl<T: TimerKind, const N: usize> Default for TimerTable<T, N> {
    fn default() -> Self {
        TimerTable { deadlines: [None; N], _kind: std::marker::PhantomData }
    }
}

impl<T: TimerKind, const N: usize> TimerTable<T, N> {
    /// Sets (or moves) `timer` to fire at `at`.
    pub fn set(&mut self, timer: T, at: Instant) {
        self.deadlines[timer.index()] = Some(at);
    }

    /// Stops `timer`.
    pub fn stop(&mut self, timer: T) {
        self.deadlines[timer.index()] = None;
    }

    /// When `timer` fires, if it is set.
    pub fn get(&self, timer: T) -> Option<Instant> {
        self.deadlines[timer.index()]
    }

    /// Whether `timer` is set.
    pub fn is_set(&self, timer: T) -> bool {
        self.get(timer).is_some()
    }

    /// The earliest deadline of all.
    pub fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// The first timer (in [`TimerKind::ALL`] order) due at `now`, stopped as it is returned.
    pub fn expire(&mut self, now: Instant) -> Option<T> {
        let due = T::ALL.iter().copied().find(|t| self.get(*t).is_some_and(|d| d <= now))?;
        self.stop(due);
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Kind {
        A,
        B,
    }

    impl TimerKind for Kind {
        const ALL: &'static [Self] = &[Kind::A, Kind::B];
        fn index(self) -> usize {
            self as usize
        }
    }

    #[test]
    fn next_is_the_earliest_and_expire_stops_what_it_returns() {
        let mut t = TimerTable::<Kind, 2>::default();
        assert_eq!(t.next(), None);
        t.set(Kind::B, Instant::from_millis(5));
        t.set(Kind::A, Instant::from_millis(9));
        assert_eq!(t.next(), Some(Instant::from_millis(5)));
        assert_eq!(t.expire(Instant::from_millis(4)), None);
        assert_eq!(t.expire(Instant::from_millis(9)), Some(Kind::A), "in ALL order when both are due");
        assert_eq!(t.expire(Instant::from_millis(9)), Some(Kind::B));
        assert_eq!(t.expire(Instant::from_millis(9)), None);
        t.set(Kind::A, Instant::from_millis(1));
        t.stop(Kind::A);
        assert!(!t.is_set(Kind::A));
    }
}
