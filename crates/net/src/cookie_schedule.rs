//! The cookie keys of one server's workers over time (DTLS HelloVerifyRequest cookies, SCTP
//! state cookies and ALT-COOKIEs): one key per period, drawn from the operating system's
//! randomness when it first falls due and shared, so that every worker goes through the same
//! keys in the same order and a cookie one worker made opens at every other. Each worker applies
//! the keys that fell due before its engine sees the next datagram, and wakes for the next one;
//! no task and no message is needed.

use rand_core::{OsRng, RngCore};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use zeroize::Zeroize;

/// Keys a schedule remembers: a worker further behind than this (stalled for so many periods)
/// skips the keys it missed.
const KEYS_KEPT: usize = 8;

/// One server's cookie keys, one per period from when the schedule began.
pub(crate) struct CookieSchedule {
    every: Duration,
    start: Instant,
    /// The rotation number of the oldest key kept, and the keys from it on.
    keys: Mutex<(u64, VecDeque<[u8; 16]>)>,
}

impl CookieSchedule {
    /// A new key every `every` (at least a millisecond), from now on.
    pub fn starting_now(every: Duration) -> Arc<Self> {
        let every = every.max(Duration::from_millis(1));
        Arc::new(CookieSchedule { every, start: Instant::now(), keys: Mutex::new((1, VecDeque::new())) })
    }

    /// When rotation `n` (from 1) falls due (none: beyond any clock).
    fn due_at(&self, n: u64) -> Option<Instant> {
        let periods = u32::try_from(n).unwrap_or(u32::MAX);
        self.start.checked_add(self.every.saturating_mul(periods))
    }

    /// Rotations due by now.
    fn due(&self) -> u64 {
        let elapsed = Instant::now().saturating_duration_since(self.start);
        (elapsed.as_nanos() / self.every.as_nanos()) as u64
    }

    /// The key of rotation `n`, unless it is older than the keys kept.
    fn key(&self, n: u64) -> Option<[u8; 16]> {
        let mut keys = self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (first, kept) = &mut *keys;
        while *first + kept.len() as u64 <= n {
            let mut key = [0u8; 16];
            OsRng.fill_bytes(&mut key);
            kept.push_back(key);
            if kept.len() > KEYS_KEPT {
                if let Some(mut old) = kept.pop_front() {
                    old.zeroize();
                }
                *first += 1;
            }
        }
        let index = n.checked_sub(*first)?;
        kept.get(index as usize).copied()
    }
}

impl Drop for CookieSchedule {
    fn drop(&mut self) {
        let keys = self.keys.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        keys.1.iter_mut().for_each(|key| key.zeroize());
    }
}

/// One worker's place in its server's schedule.
pub(crate) struct CookieRotation {
    schedule: Arc<CookieSchedule>,
    /// Rotations applied to this worker's engine.
    applied: u64,
}

impl CookieRotation {
    pub fn following(schedule: &Arc<CookieSchedule>) -> Self {
        CookieRotation { schedule: Arc::clone(schedule), applied: 0 }
    }

    /// Hands `rotate` the keys that fell due since the last call, in order; whether any did.
    pub fn apply_due(&mut self, mut rotate: impl FnMut([u8; 16])) -> bool {
        let due = self.schedule.due();
        let rotated = self.applied < due;
        while self.applied < due {
            self.applied += 1;
            if let Some(key) = self.schedule.key(self.applied) {
                rotate(key);
            }
        }
        rotated
    }

    /// When the next key falls due (none: beyond any clock).
    pub fn next_due(&self) -> Option<Instant> {
        self.schedule.due_at(self.applied + 1)
    }
}
