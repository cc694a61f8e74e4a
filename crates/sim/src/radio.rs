//! Radio on-time and energy accounting per node.
//!
//! MAC models book intervals in which a node's radio transmits, receives a frame or listens to an
//! idle channel. Intervals may overlap (a channel check that falls inside a strobe train, a guard
//! time around a reception); when the ledger is read, each instant counts once, in the most
//! expensive state booked for it (tx > rx > listen), and every instant not booked is sleep. So for
//! every node tx + rx + listen + sleep equals the time observed, by construction, and no activity
//! is counted twice.

use crate::mac::NodeId;
use fastshake_core::Instant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a radio is doing during a booked interval; unbooked time is sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RadioState {
    /// Receiver on, no frame arriving (idle listening, channel checks, guard times, CCA).
    Listen,
    /// Receiving a frame.
    Rx,
    /// Transmitting a frame.
    Tx,
}

/// Supply voltage and current draw per radio state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerProfile {
    /// A name for reports.
    pub name: String,
    /// Supply voltage in volts.
    pub supply_v: f64,
    /// Current while transmitting, mA.
    pub tx_ma: f64,
    /// Current while receiving a frame, mA.
    pub rx_ma: f64,
    /// Current while listening to an idle channel, mA.
    pub listen_ma: f64,
    /// Current while asleep, mA.
    pub sleep_ma: f64,
}

impl PowerProfile {
    /// The TI CC2520 at 2.8 V (the WiSMote radio of seed 002's X-MAC runs). Currents from the
    /// CC2520 datasheet (TI SWRS068, December 2007, "Key features" and electrical
    /// characteristics): RX 18.5 mA (the receiver draws the same whether a frame arrives or the
    /// channel is idle, so listen = rx), TX 25.8 mA at 0 dBm output power, LPM2 (power down,
    /// register contents kept) 0.03 µA as sleep.
    pub fn cc2520() -> Self {
        PowerProfile {
            name: "CC2520 @ 2.8 V, 0 dBm".to_string(),
            supply_v: 2.8,
            tx_ma: 25.8,
            rx_ma: 18.5,
            listen_ma: 18.5,
            sleep_ma: 0.000_03,
        }
    }

    /// Energy in millijoules of the given times.
    pub fn energy_mj(&self, tx: Duration, rx: Duration, listen: Duration, sleep: Duration) -> f64 {
        // mA · V · s = mJ
        self.supply_v
            * (self.tx_ma * tx.as_secs_f64()
                + self.rx_ma * rx.as_secs_f64()
                + self.listen_ma * listen.as_secs_f64()
                + self.sleep_ma * sleep.as_secs_f64())
    }
}

impl Default for PowerProfile {
    fn default() -> Self {
        PowerProfile::cc2520()
    }
}

/// Radio time and energy of one node over an observation window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RadioUsage {
    /// Time transmitting.
    pub tx: Duration,
    /// Time receiving frames.
    pub rx: Duration,
    /// Time listening to an idle channel.
    pub listen: Duration,
    /// Time asleep.
    pub sleep: Duration,
    /// Energy of the radio in mJ under the ledger's profile.
    pub energy_mj: f64,
}

impl RadioUsage {
    /// tx + rx + listen + sleep: the observation window.
    pub fn total(&self) -> Duration {
        self.tx + self.rx + self.listen + self.sleep
    }

    /// Share of the window with the radio on.
    pub fn duty_cycle(&self) -> f64 {
        let total = self.total().as_secs_f64();
        if total == 0.0 {
            0.0
        } else {
            (self.tx + self.rx + self.listen).as_secs_f64() / total
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Booking {
    start: u64,
    end: u64,
    state: RadioState,
}

/// Per-node radio bookings and the power profile that prices them.
#[derive(Clone, Debug)]
pub struct RadioLedger {
    profile: PowerProfile,
    origin: Instant,
    bookings: BTreeMap<NodeId, Vec<Booking>>,
}

impl Default for RadioLedger {
    fn default() -> Self {
        RadioLedger::new(PowerProfile::default())
    }
}

impl RadioLedger {
    /// An empty ledger observing from time zero.
    pub fn new(profile: PowerProfile) -> Self {
        RadioLedger::with_origin(profile, Instant::ZERO)
    }

    /// An empty ledger observing from `origin`; bookings before it are clipped.
    pub fn with_origin(profile: PowerProfile, origin: Instant) -> Self {
        RadioLedger { profile, origin, bookings: BTreeMap::new() }
    }

    /// The power profile.
    pub fn profile(&self) -> &PowerProfile {
        &self.profile
    }

    /// Start of the observation window.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Makes `node` known (it sleeps all the time unless something is booked).
    pub fn register(&mut self, node: NodeId) {
        self.bookings.entry(node).or_default();
    }

    /// `node`'s radio is in `state` from `start` to `end`.
    pub fn book(&mut self, node: NodeId, state: RadioState, start: Instant, end: Instant) {
        let start = start.max(self.origin).as_nanos();
        let end = end.as_nanos();
        let list = self.bookings.entry(node).or_default();
        if end > start {
            list.push(Booking { start, end, state });
        }
    }

    /// The nodes with bookings (or registered), in id order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.bookings.keys().copied()
    }

    /// Time per state and energy of `node` from the origin to `until`.
    pub fn usage(&self, node: NodeId, until: Instant) -> RadioUsage {
        let origin = self.origin.as_nanos();
        let until = until.as_nanos().max(origin);
        let mut on = [0u64; 3];
        if let Some(list) = self.bookings.get(&node) {
            on = resolve(list, until);
        }
        let [listen, rx, tx] = on.map(Duration::from_nanos);
        let window = Duration::from_nanos(until - origin);
        let sleep = window.saturating_sub(tx + rx + listen);
        let energy_mj = self.profile.energy_mj(tx, rx, listen, sleep);
        RadioUsage { tx, rx, listen, sleep, energy_mj }
    }

    /// Sum of the energy of every node up to `until`, mJ.
    pub fn total_energy_mj(&self, until: Instant) -> f64 {
        self.nodes().map(|n| self.usage(n, until).energy_mj).sum()
    }
}

/// Nanoseconds in [Listen, Rx, Tx] of the union of `list` clipped at `until`, each instant in its
/// most expensive state.
fn resolve(list: &[Booking], until: u64) -> [u64; 3] {
    // Sweep over boundaries with a count of open bookings per state.
    let mut edges: Vec<(u64, usize, i32)> = Vec::with_capacity(list.len() * 2);
    for b in list {
        let end = b.end.min(until);
        if end > b.start {
            let idx = b.state as usize;
            edges.push((b.start, idx, 1));
            edges.push((end, idx, -1));
        }
    }
    edges.sort_unstable();
    let mut open = [0i32; 3];
    let mut totals = [0u64; 3];
    let mut last = 0u64;
    for (t, idx, delta) in edges {
        if let Some(top) = (0..3).rev().find(|&i| open[i] > 0) {
            totals[top] += t - last;
        }
        open[idx] += delta;
        last = t;
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_bookings_count_once_in_the_costliest_state() {
        let mut l = RadioLedger::default();
        let ms = Instant::from_millis;
        l.book(1, RadioState::Listen, ms(0), ms(10));
        l.book(1, RadioState::Tx, ms(5), ms(7));
        l.book(1, RadioState::Rx, ms(6), ms(12));
        let u = l.usage(1, ms(20));
        assert_eq!(u.tx, Duration::from_millis(2));
        assert_eq!(u.rx, Duration::from_millis(5));
        assert_eq!(u.listen, Duration::from_millis(5));
        assert_eq!(u.sleep, Duration::from_millis(8));
        assert_eq!(u.total(), Duration::from_millis(20));
        let expected = 2.8 * (25.8 * 0.002 + 18.5 * 0.010 + 0.000_03 * 0.008);
        assert!((u.energy_mj - expected).abs() < 1e-9);
    }

    #[test]
    fn bookings_are_clipped_to_the_window() {
        let mut l = RadioLedger::with_origin(PowerProfile::cc2520(), Instant::from_millis(10));
        l.book(3, RadioState::Tx, Instant::from_millis(5), Instant::from_millis(15));
        let u = l.usage(3, Instant::from_millis(12));
        assert_eq!(u.tx, Duration::from_millis(2));
        assert_eq!(u.total(), Duration::from_millis(2));
        assert_eq!(l.usage(9, Instant::from_millis(12)).sleep, Duration::from_millis(2));
    }
}
