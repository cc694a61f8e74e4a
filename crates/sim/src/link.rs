//! Point-to-point links: delay, jitter, rate with a FIFO queue per direction, MTU, loss,
//! duplication and reordering, with counters per direction and per layer.
//!
//! A link decides a datagram's fate eagerly when it is put on the link: the queue and the
//! serialisation give its departure time, the loss model whether it arrives, the delay and
//! jitter when. The simulator then schedules one arrival event per copy that survives.

use crate::dist::{chance, ms_to_ns, Jitter};
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Loss on one direction of a link, drawn per frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossModel {
    /// Nothing is lost.
    #[default]
    None,
    /// Each frame is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Two-state Markov chain (Gilbert–Elliott): the state moves before each frame, then the
    /// frame is lost with the state's loss probability. Stationary loss rate:
    /// `(p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)`.
    GilbertElliott {
        /// Probability of moving from the good to the bad state.
        p_gb: f64,
        /// Probability of moving from the bad to the good state.
        p_bg: f64,
        /// Loss probability in the good state.
        #[serde(default)]
        loss_good: f64,
        /// Loss probability in the bad state.
        #[serde(default = "one")]
        loss_bad: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl LossModel {
    /// The long-run share of frames lost.
    pub fn stationary_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p.clamp(0.0, 1.0),
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                if p_gb + p_bg <= 0.0 {
                    loss_good
                } else {
                    (p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)
                }
            }
        }
    }
}

/// What a link does with a datagram larger than its MTU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Oversize {
    /// Drop it (counted as an MTU drop).
    #[default]
    Drop,
    /// Split it into link-layer frames of at most `mtu` bytes of the IP packet each; the
    /// datagram arrives only if every frame does, when the last one does.
    Fragment,
}

/// How the two ends of a link reach each other.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum LinkKind {
    /// A wire (or any link fully described by the delay, rate, loss fields).
    #[default]
    Wired,
    /// An IEEE 802.15.4 hop whose channel access is decided by a duty-cycled MAC model; the
    /// delay, rate and loss fields of the link are then ignored.
    Ieee802154 {
        /// Name of the MAC instance (a `[[mac]]` table of the scenario) this hop belongs to.
        mac: String,
    },
}

/// The parameters of one link (both directions alike).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Fixed one-way propagation delay, milliseconds.
    pub delay_ms: f64,
    /// Random extra delay per datagram copy.
    pub jitter: Jitter,
    /// Line rate in bits per second; `None` means serialisation takes no time.
    pub rate_bps: Option<u64>,
    /// Most datagrams waiting or in serialisation per direction; more are dropped at the tail.
    pub queue_packets: Option<usize>,
    /// Largest IP packet (or, when fragmenting, largest slice of one per frame), bytes.
    pub mtu: Option<usize>,
    /// What happens to datagrams above the MTU.
    pub oversize: Oversize,
    /// Link-layer header bytes added to every frame (counted on the wire and in serialisation).
    pub frame_header: usize,
    /// Loss per frame.
    pub loss: LossModel,
    /// Probability that a datagram arrives twice (the copy gets its own jitter).
    pub duplicate: f64,
    /// Probability that a datagram is held back by `reorder_delay_ms`, so later ones overtake it.
    pub reorder: f64,
    /// Hold-back for reordered datagrams, milliseconds.
    pub reorder_delay_ms: f64,
    /// Wire or duty-cycled radio.
    pub kind: LinkKind,
}

/// Counters of one direction of a link, per layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounters {
    /// Datagrams offered to the link.
    pub datagrams_offered: u64,
    /// Datagrams put on the wire (not dropped by the queue or the MTU).
    pub datagrams_sent: u64,
    /// Datagram copies that reached the far end of the wire.
    pub datagrams_delivered: u64,
    /// UDP payload bytes put on the wire.
    pub payload_bytes: u64,
    /// IP bytes (IPv4 + UDP headers + payload) put on the wire.
    pub ip_bytes: u64,
    /// Link-layer frames put on the air or wire.
    pub frames: u64,
    /// Link-layer bytes (frames with their headers) put on the air or wire.
    pub frame_bytes: u64,
    /// Datagrams lost by the loss model (or the MAC).
    pub dropped_loss: u64,
    /// Datagrams dropped because the queue was full.
    pub dropped_queue: u64,
    /// Datagrams dropped for exceeding the MTU.
    pub dropped_mtu: u64,
    /// Datagrams that arrived at an interface that was down.
    pub dropped_down: u64,
    /// Datagrams a MAC delivered whose frames did not rebuild them (6LoWPAN decoding failed).
    pub dropped_undecodable: u64,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Datagrams held back for reordering.
    pub reordered: u64,
}

impl LinkCounters {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &LinkCounters) {
        self.datagrams_offered += other.datagrams_offered;
        self.datagrams_sent += other.datagrams_sent;
        self.datagrams_delivered += other.datagrams_delivered;
        self.payload_bytes += other.payload_bytes;
        self.ip_bytes += other.ip_bytes;
        self.frames += other.frames;
        self.frame_bytes += other.frame_bytes;
        self.dropped_loss += other.dropped_loss;
        self.dropped_queue += other.dropped_queue;
        self.dropped_mtu += other.dropped_mtu;
        self.dropped_down += other.dropped_down;
        self.dropped_undecodable += other.dropped_undecodable;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
    }

    /// All drops together.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_queue
            + self.dropped_mtu
            + self.dropped_down
            + self.dropped_undecodable
    }
}

/// The state of one direction of a link.
#[derive(Clone, Debug, Default)]
pub(crate) struct Direction {
    /// When the transmitter is free again.
    busy_until: u64,
    /// Departure (end of serialisation) times of datagrams not yet gone, oldest first.
    in_queue: VecDeque<u64>,
    /// Gilbert–Elliott: currently in the bad state.
    bad_state: bool,
    pub(crate) counters: LinkCounters,
}

/// Where the copies of one datagram go: at most two arrival times (original and duplicate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fate {
    /// Whether the datagram went on the wire (it was not dropped by the MTU or the queue).
    pub on_wire: bool,
    pub arrivals: [Option<u64>; 2],
}

/// Nanoseconds to serialise `bytes` at `rate_bps`, rounded up.
pub fn serialisation_ns(bytes: usize, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return 0;
    }
    let bits = bytes as u128 * 8 * 1_000_000_000;
    let ns = bits.div_ceil(rate_bps as u128);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

impl Direction {
    fn frame_lost(&mut self, loss: &LossModel, rng: &mut dyn RngCore) -> bool {
        match *loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => chance(rng, p),
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                let flip = if self.bad_state { p_bg } else { p_gb };
                if chance(rng, flip) {
                    self.bad_state = !self.bad_state;
                }
                chance(rng, if self.bad_state { loss_bad } else { loss_good })
            }
        }
    }

    /// Puts a datagram of `ip_len` IP bytes (`payload_len` of UDP payload) on this direction at
    /// `now` and decides its fate. Random draws, in order: loss per frame, duplication,
    /// reordering, jitter per copy.
    pub(crate) fn transmit(
        &mut self,
        now: u64,
        ip_len: usize,
        payload_len: usize,
        config: &LinkConfig,
        rng: &mut dyn RngCore,
    ) -> Fate {
        let c = &mut self.counters;
        c.datagrams_offered += 1;
        let frame_count = match config.mtu {
            Some(mtu) if ip_len > mtu => match config.oversize {
                Oversize::Drop => {
                    c.dropped_mtu += 1;
                    return Fate::default();
                }
                // An MTU of zero cannot carry anything.
                Oversize::Fragment if mtu == 0 => {
                    c.dropped_mtu += 1;
                    return Fate::default();
                }
                Oversize::Fragment => ip_len.div_ceil(mtu),
            },
            _ => 1,
        };
        while self.in_queue.front().is_some_and(|&t| t <= now) {
            self.in_queue.pop_front();
        }
        if config.queue_packets.is_some_and(|limit| self.in_queue.len() >= limit) {
            c.dropped_queue += 1;
            return Fate::default();
        }
        let wire_bytes = ip_len + frame_count * config.frame_header;
        c.datagrams_sent += 1;
        c.payload_bytes += payload_len as u64;
        c.ip_bytes += ip_len as u64;
        c.frames += frame_count as u64;
        c.frame_bytes += wire_bytes as u64;
        let start = self.busy_until.max(now);
        let departure = start.saturating_add(serialisation_ns(wire_bytes, config.rate_bps.unwrap_or(0)));
        self.busy_until = departure;
        self.in_queue.push_back(departure);

        let mut lost = false;
        for _ in 0..frame_count {
            // Every frame is drawn so the Gilbert–Elliott chain advances once per frame.
            lost |= self.frame_lost(&config.loss, rng);
        }
        if lost {
            self.counters.dropped_loss += 1;
            return Fate { on_wire: true, arrivals: [None; 2] };
        }
        let copies = if chance(rng, config.duplicate) {
            self.counters.duplicated += 1;
            2
        } else {
            1
        };
        let held_back = if chance(rng, config.reorder) {
            self.counters.reordered += 1;
            ms_to_ns(config.reorder_delay_ms)
        } else {
            0
        };
        let base = departure.saturating_add(ms_to_ns(config.delay_ms)).saturating_add(held_back);
        let mut fate = Fate { on_wire: true, arrivals: [None; 2] };
        for slot in fate.arrivals.iter_mut().take(copies) {
            *slot = Some(base.saturating_add(config.jitter.sample_ns(rng)));
        }
        fate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_is_bits_over_rate() {
        assert_eq!(serialisation_ns(125, 1_000_000), 1_000_000);
        assert_eq!(serialisation_ns(1, 3), 2_666_666_667);
        assert_eq!(serialisation_ns(100, 0), 0);
    }

    #[test]
    fn stationary_loss_of_gilbert_elliott() {
        let ge = LossModel::GilbertElliott { p_gb: 0.1, p_bg: 0.3, loss_good: 0.0, loss_bad: 1.0 };
        assert!((ge.stationary_loss() - 0.25).abs() < 1e-12);
    }
}
