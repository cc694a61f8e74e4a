//! Every timer of an association, one slot each in its [`TimerTable`]: the next deadline is the
//! table's, and each expiry is handled by its name.

use fastshake_core::{TimerKind, TimerTable};

/// The timers of RFC 9260 (§5.1 T1, §6.3 T3-rtx, §9.2 T2 and T5, §6.2 delayed SACK, §8.3
/// heartbeat) and RFC 6525's Re-configuration Timer (§5.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// T5-shutdown-guard: a shutdown we started ends by then, with an ABORT if it must.
    ShutdownGuard,
    /// T1-init: the INIT goes again.
    T1Init,
    /// T1-cookie: the COOKIE-ECHO goes again.
    T1Cookie,
    /// T3-rtx: outstanding DATA goes again.
    T3Rtx,
    /// T2-shutdown: the SHUTDOWN or SHUTDOWN-ACK goes again.
    T2Shutdown,
    /// The SACK held back for a second packet of DATA.
    DelayedSack,
    /// HEARTBEAT to the peer's addresses.
    Heartbeat,
    /// The Re-configuration Timer: our stream reset request goes again.
    Reconfig,
}

impl TimerKind for Timer {
    /// Timers due at once are handled in this order: the guard first, since it ends the
    /// association whatever else is due.
    const ALL: &'static [Self] = &[
        Timer::ShutdownGuard,
        Timer::T1Init,
        Timer::T1Cookie,
        Timer::T3Rtx,
        Timer::T2Shutdown,
        Timer::DelayedSack,
        Timer::Heartbeat,
        Timer::Reconfig,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// The deadlines of one association.
pub(super) type Timers = TimerTable<Timer, 8>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_slot() {
        for (i, t) in Timer::ALL.iter().enumerate() {
            assert_eq!(t.index(), i);
        }
        assert_eq!(Timer::ALL.len(), 8, "the table's size");
    }
}
