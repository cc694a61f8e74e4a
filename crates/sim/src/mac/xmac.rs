//! X-MAC preamble sampling.
//!
//! Every node samples the channel once per check interval CI, at its own phase (drawn at random),
//! keeping its receiver on for a window long enough to hear one whole strobe. A sender repeats
//! short strobes carrying the receiver's address, each followed by a gap in which it listens for
//! an early acknowledgement. The receiver that hears a strobe addressed to it answers with the
//! early acknowledgement and stays awake; the sender then sends the datagram's frames back to
//! back. As in seed 002 there is no link-layer ACK for data: a lost data frame loses the
//! datagram (the fragments cannot be reassembled), and recovery is left to the upper layer. Lost
//! strobes and lost early acknowledgements are recovered implicitly, by the next strobe or the
//! next channel check, until the sender has strobed for `max_strobe_ms` and gives up. The
//! default, three check intervals plus two strobe periods, stands for a strobe train of one CI
//! restarted up to twice when no early ack came (as a CSMA layer above X-MAC does on "no ACK").
//!
//! Every frame (strobe, early acknowledgement, data) arrives with probability `pdr`, as with
//! Cooja's UDG radio model in seed 002. A node does not sample the channel while its radio is
//! busy sending or receiving.

use super::frag::{self, FragStats, STROBE_PSDU};
use super::phy::{airtime_ns, LIFS_NS, TURNAROUND_NS};
use super::{
    below, bernoulli, book, FrameKind, FrameOnAir, Hop, MacConfigError, MacModel, MacOutcome, NodeId,
    XMacConfig,
};
use crate::radio::{RadioLedger, RadioState};
use fastshake_core::Instant;
use rand_core::RngCore;
use std::collections::{BTreeMap, BTreeSet};

/// Air time of a strobe (and of an early acknowledgement).
pub const STROBE_AIR_NS: u64 = airtime_ns(STROBE_PSDU);
/// One strobe, the turnaround, the early-ack slot and the turnaround back.
pub const STROBE_PERIOD_NS: u64 = STROBE_AIR_NS + TURNAROUND_NS + STROBE_AIR_NS + TURNAROUND_NS;
/// A channel check: long enough that one whole strobe of a train falls inside it.
pub const CHECK_WINDOW_NS: u64 = STROBE_PERIOD_NS + STROBE_AIR_NS;
/// Gap between the data frames of one datagram.
pub const DATA_GAP_NS: u64 = LIFS_NS;

#[derive(Clone, Debug, Default)]
struct NodeState {
    phase_ns: u64,
    free_at: u64,
    seq: u8,
    tag: u16,
}

/// The X-MAC model.
#[derive(Clone, Debug)]
pub struct XMac {
    ci_ns: u64,
    pdr: f64,
    max_strobe_ns: u64,
    phase_lock: bool,
    /// (sender, receiver) pairs whose receiver's wake-up phase the sender has learned.
    encounters: BTreeSet<(NodeId, NodeId)>,
    nodes: BTreeMap<NodeId, NodeState>,
}

impl XMac {
    /// An X-MAC over `nodes`, each with a random check phase.
    pub fn new(
        config: &XMacConfig,
        nodes: &[NodeId],
        rng: &mut dyn rand_core::RngCore,
    ) -> Result<Self, MacConfigError> {
        let ci_ns = super::millis_to_ns("check_interval_ms", config.check_interval_ms)?;
        if ci_ns <= CHECK_WINDOW_NS {
            return Err(MacConfigError::Invalid {
                name: "check_interval_ms",
                reason: format!("must exceed the channel check window of {CHECK_WINDOW_NS} ns"),
            });
        }
        super::check_probability("pdr", config.pdr)?;
        let max_strobe_ns = match config.max_strobe_ms {
            Some(ms) => super::millis_to_ns("max_strobe_ms", ms)?,
            None => 3 * ci_ns + 2 * STROBE_PERIOD_NS,
        };
        let mut mac = XMac {
            ci_ns,
            pdr: config.pdr,
            max_strobe_ns,
            phase_lock: config.phase_lock,
            encounters: BTreeSet::new(),
            nodes: BTreeMap::new(),
        };
        for &n in nodes {
            mac.node(n, rng);
        }
        Ok(mac)
    }

    /// The check interval.
    pub fn check_interval_ns(&self) -> u64 {
        self.ci_ns
    }

    /// When `node` samples the channel: at phase + k · CI.
    pub fn phase_ns(&self, node: NodeId) -> Option<u64> {
        self.nodes.get(&node).map(|s| s.phase_ns)
    }

    fn node(&mut self, n: NodeId, rng: &mut dyn rand_core::RngCore) -> &mut NodeState {
        let ci = self.ci_ns;
        self.nodes.entry(n).or_insert_with(|| NodeState { phase_ns: below(rng, ci), ..NodeState::default() })
    }
}

impl MacModel for XMac {
    fn carry(&mut self, hop: Hop<'_>, rng: &mut dyn RngCore, ledger: &mut RadioLedger) -> MacOutcome {
        let Hop { now, from, to, datagram } = hop;
        let rx_phase = self.node(to, rng).phase_ns;
        let rx_free = self.node(to, rng).free_at;
        let (seq, tag, tx_free) = {
            let st = self.node(from, rng);
            (st.seq, st.tag, st.free_at)
        };
        let Ok((psdus, stats)) = frag::fragment(datagram, from, to, seq, tag, false) else {
            return super::refused(FragStats::default());
        };
        let strobe_seq = seq.wrapping_add(psdus.len() as u8);
        {
            let st = self.node(from, rng);
            st.seq = strobe_seq.wrapping_add(1);
            if psdus.len() > 1 {
                st.tag = st.tag.wrapping_add(1);
            }
        }
        let ci = self.ci_ns;
        let mut t0 = now.as_nanos().max(tx_free);
        if self.phase_lock && self.encounters.contains(&(from, to)) {
            // Sleep until one strobe period before the receiver's next wake-up that can still
            // hear a strobe sent from t0.
            let earliest = (t0 + STROBE_AIR_NS).saturating_sub(CHECK_WINDOW_NS) + 1;
            let wake = rx_phase + earliest.saturating_sub(rx_phase).div_ceil(ci) * ci;
            t0 = t0.max(wake.saturating_sub(STROBE_PERIOD_NS));
        }
        let limit = t0.saturating_add(self.max_strobe_ns);
        let strobe_at = |j: u64| t0 + j * STROBE_PERIOD_NS;
        let mut frames = Vec::new();
        let strobe = frag::strobe_frame(strobe_seq, from, to);
        let early_ack = frag::strobe_frame(strobe_seq, to, from);

        // Find the strobe the receiver hears: the first wake whose window overlaps the train.
        let first_wake = {
            let earliest = t0.saturating_sub(CHECK_WINDOW_NS) + 1;
            let k = earliest.saturating_sub(rx_phase).div_ceil(ci);
            rx_phase + k * ci
        };
        let mut heard: Option<(u64, u64)> = None; // (strobe index, wake time)
        let mut wake = first_wake;
        'wakes: while wake < limit {
            if wake >= rx_free {
                let mut j = wake.saturating_sub(t0).div_ceil(STROBE_PERIOD_NS);
                while strobe_at(j) + STROBE_AIR_NS <= (wake + CHECK_WINDOW_NS).min(limit) {
                    if bernoulli(rng, self.pdr) {
                        heard = Some((j, wake));
                        break 'wakes;
                    }
                    j += 1;
                }
            }
            wake += ci;
        }

        // Strobe until an early acknowledgement arrives (the receiver stays awake once it has
        // heard one strobe), or the strobing time runs out.
        let mut acked_after: Option<u64> = None; // index of the strobe whose early ack arrived
        let mut heard_strobes: Vec<u64> = Vec::new();
        if let Some((mut j, _)) = heard {
            'strobes: loop {
                heard_strobes.push(j);
                if bernoulli(rng, self.pdr) {
                    acked_after = Some(j);
                    break;
                }
                // Early ack lost: the sender strobes on while it has time left.
                loop {
                    j += 1;
                    if strobe_at(j) + STROBE_AIR_NS > limit {
                        break 'strobes;
                    }
                    if bernoulli(rng, self.pdr) {
                        break;
                    }
                }
            }
        }
        let last_strobe = match acked_after {
            Some(j) => j,
            None => (limit.saturating_sub(t0 + STROBE_AIR_NS)) / STROBE_PERIOD_NS,
        };
        for j in 0..=last_strobe {
            let s = strobe_at(j);
            let received = heard_strobes.contains(&j);
            frames.push(FrameOnAir {
                start: Instant::from_nanos(s),
                end: Instant::from_nanos(s + STROBE_AIR_NS),
                from,
                to,
                kind: FrameKind::Strobe,
                bytes: strobe.clone(),
                received,
            });
            book(ledger, from, RadioState::Tx, s, s + STROBE_AIR_NS);
            if received {
                let a = s + STROBE_AIR_NS + TURNAROUND_NS;
                let got = acked_after == Some(j);
                frames.push(FrameOnAir {
                    start: Instant::from_nanos(a),
                    end: Instant::from_nanos(a + STROBE_AIR_NS),
                    from: to,
                    to: from,
                    kind: FrameKind::Ack,
                    bytes: early_ack.clone(),
                    received: got,
                });
                book(ledger, to, RadioState::Rx, s, s + STROBE_AIR_NS);
                book(ledger, to, RadioState::Tx, a, a + STROBE_AIR_NS);
                if got {
                    book(ledger, from, RadioState::Rx, a, a + STROBE_AIR_NS);
                }
            }
        }
        let strobe_end = strobe_at(last_strobe) + STROBE_PERIOD_NS;
        book(ledger, from, RadioState::Listen, t0, strobe_end);

        let Some(j) = acked_after else {
            self.node(from, rng).free_at = strobe_end;
            if let Some((_, wake)) = heard {
                // Heard a strobe but never got its ack through: awake until the sender stops.
                book(ledger, to, RadioState::Listen, wake, strobe_end);
                self.node(to, rng).free_at = strobe_end;
            }
            return MacOutcome { delivered_at: None, frames, fragments: stats };
        };
        let (_, wake) = heard.unwrap_or((j, t0));
        self.encounters.insert((from, to));
        let mut t = strobe_at(j) + STROBE_PERIOD_NS;
        let mut all_received = true;
        for psdu in psdus {
            let end = t + airtime_ns(psdu.len());
            let received = bernoulli(rng, self.pdr);
            all_received &= received;
            book(ledger, from, RadioState::Tx, t, end);
            book(ledger, to, RadioState::Rx, t, end);
            frames.push(FrameOnAir {
                start: Instant::from_nanos(t),
                end: Instant::from_nanos(end),
                from,
                to,
                kind: FrameKind::Data,
                bytes: psdu,
                received,
            });
            t = end + DATA_GAP_NS;
        }
        let done = t - DATA_GAP_NS;
        book(ledger, to, RadioState::Listen, wake.min(done), done);
        self.node(from, rng).free_at = done;
        self.node(to, rng).free_at = done;
        frames.sort_by_key(|f| f.start);
        MacOutcome {
            delivered_at: all_received.then_some(Instant::from_nanos(done)),
            frames,
            fragments: stats,
        }
    }

    fn account_idle(&mut self, from_t: Instant, to_t: Instant, ledger: &mut RadioLedger) {
        let (from_t, to_t) = (from_t.as_nanos(), to_t.as_nanos());
        for (&n, st) in &self.nodes {
            ledger.register(n);
            super::for_each_occurrence(st.phase_ns, self.ci_ns, CHECK_WINDOW_NS, from_t, to_t, |s, e| {
                book(ledger, n, RadioState::Listen, s, e)
            });
        }
    }
}
