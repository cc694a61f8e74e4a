//! IEEE 802.15.4e TSCH with dedicated cells.
//!
//! Time is cut into timeslots (10 ms by default); L slots form a slotframe that repeats. Each
//! directed link (a → b) owns C dedicated cells: slot offsets in 0..L, drawn at random (seed 002's
//! assumption), spread evenly, or given. Channel hopping is not modelled (a dedicated cell never
//! collides), nor are enhanced beacons and keep-alives.
//!
//! A frame handed over at `t` goes out in the first cell of its link that starts at or after `t`
//! in which neither end is already busy (one radio per node). Inside the slot the default
//! 802.15.4e timeslot template applies: the frame starts at TsTxOffset, the receiver has listened
//! since TsRxOffset, the ACK follows TsTxAckDelay after the frame. A frame counts as delivered at
//! the end of its slot, when the receiver hands it up. With PDR P the frame is received with
//! probability P; without an ACK the sender retries in the link's next cell, up to
//! macMaxFrameRetries times. The fragments of one datagram go in consecutive cells of the link;
//! if one fragment fails for good, the rest of the datagram is dropped.

use super::frag::{self, FragStats, ACK_PSDU};
use super::phy::airtime_ns;
use super::{
    below, bernoulli, book, CellPlacement, FrameKind, FrameOnAir, Hop, MacConfigError, MacModel, MacOutcome,
};
use super::{NodeId, TschConfig};
use crate::radio::{RadioLedger, RadioState};
use fastshake_core::Instant;
use rand_core::RngCore;
use std::collections::{BTreeMap, BTreeSet};

/// TsRxOffset of the default timeslot template: the receiver turns on 1120 µs into the slot.
pub const RX_OFFSET_NS: u64 = 1_120_000;
/// TsTxOffset: the frame starts 2120 µs into the slot.
pub const TX_OFFSET_NS: u64 = 2_120_000;
/// TsRxWait: how long an idle receiver listens for a frame that does not come.
pub const RX_WAIT_NS: u64 = 2_200_000;
/// TsTxAckDelay: from the end of the frame to the start of the ACK.
pub const TX_ACK_DELAY_NS: u64 = 1_000_000;
/// TsRxAckDelay: the sender turns on to wait for the ACK this long after its frame.
pub const RX_ACK_DELAY_NS: u64 = 800_000;
/// TsAckWait: how long the sender listens for an ACK that does not come.
pub const ACK_WAIT_NS: u64 = 400_000;

#[derive(Clone, Debug)]
struct LinkSchedule {
    /// Sorted, distinct slot offsets.
    cells: Vec<u32>,
    /// The link's queue is busy until this time.
    free_at: u64,
}

#[derive(Clone, Debug, Default)]
struct NodeState {
    /// Absolute slot numbers in which the radio is already committed.
    busy_slots: BTreeSet<u64>,
    seq: u8,
    tag: u16,
}

/// The TSCH model.
#[derive(Clone, Debug)]
pub struct TschMac {
    config: TschConfig,
    slot_ns: u64,
    links: BTreeMap<(NodeId, NodeId), LinkSchedule>,
    nodes: BTreeMap<NodeId, NodeState>,
}

impl TschMac {
    /// A TSCH MAC over `nodes` with cells for both directions of every pair in `links`.
    pub fn new(
        config: &TschConfig,
        nodes: &[NodeId],
        links: &[(NodeId, NodeId)],
        rng: &mut dyn RngCore,
    ) -> Result<Self, MacConfigError> {
        // macSlotframeSize is a 16-bit field.
        if config.slotframe == 0 || config.slotframe > u32::from(u16::MAX) {
            return Err(super::invalid("slotframe", "must be in 1..=65535"));
        }
        if config.cells_per_link == 0 || config.cells_per_link > config.slotframe {
            return Err(super::invalid("cells_per_link", format!("must be in 1..={}", config.slotframe)));
        }
        super::check_delivery_ratios(config.pdr, config.ack_pdr)?;
        let min_slot =
            TX_OFFSET_NS + airtime_ns(super::phy::MAX_PSDU) + TX_ACK_DELAY_NS + airtime_ns(ACK_PSDU);
        let slot_ns = super::millis_to_ns("timeslot_ms", config.timeslot_ms)?;
        if slot_ns < min_slot || slot_ns > 1_000_000_000 {
            return Err(super::invalid(
                "timeslot_ms",
                format!("must fit a frame and its ACK ({min_slot} ns) and be at most 1 s"),
            ));
        }
        for given in &config.cells {
            if given.slots.is_empty() || given.slots.iter().any(|&s| s >= config.slotframe) {
                return Err(super::invalid(
                    "cells",
                    format!("slots of {}->{} must be in 0..L", given.from, given.to),
                ));
            }
        }
        let mut mac =
            TschMac { config: config.clone(), slot_ns, links: BTreeMap::new(), nodes: BTreeMap::new() };
        for &n in nodes {
            mac.nodes.entry(n).or_default();
        }
        for &(a, b) in links {
            mac.schedule(a, b, rng);
            mac.schedule(b, a, rng);
        }
        Ok(mac)
    }

    /// Timeslot length.
    pub fn slot_ns(&self) -> u64 {
        self.slot_ns
    }

    /// The slot offsets of the directed link `from → to`, if it has been scheduled.
    pub fn cells(&self, from: NodeId, to: NodeId) -> Option<&[u32]> {
        self.links.get(&(from, to)).map(|l| l.cells.as_slice())
    }

    /// Schedules the directed link if it has no cells yet.
    fn schedule(&mut self, from: NodeId, to: NodeId, rng: &mut dyn rand_core::RngCore) {
        if self.links.contains_key(&(from, to)) {
            return;
        }
        let l = self.config.slotframe;
        let c = self.config.cells_per_link;
        let given = self.config.cells.iter().find(|g| g.from == from && g.to == to);
        let mut cells: Vec<u32> = match (given, self.config.placement) {
            (Some(g), _) => g.slots.clone(),
            (None, CellPlacement::Random) => distinct_offsets(l, c, rng),
            (None, CellPlacement::Even) => {
                let rotation = below(rng, u64::from(l)) as u32;
                (0..c).map(|i| ((u64::from(i) * u64::from(l) / u64::from(c)) as u32 + rotation) % l).collect()
            }
        };
        cells.sort_unstable();
        cells.dedup();
        self.links.insert((from, to), LinkSchedule { cells, free_at: 0 });
        self.nodes.entry(from).or_default();
        self.nodes.entry(to).or_default();
    }

    /// The first slot at or after `first_slot` that is a cell of `cells` and free at both ends.
    fn next_usable_slot(&self, cells: &[u32], from: NodeId, to: NodeId, first_slot: u64) -> u64 {
        let l = u64::from(self.config.slotframe);
        let busy = |n: NodeId, s: u64| self.nodes.get(&n).is_some_and(|st| st.busy_slots.contains(&s));
        let mut m = first_slot;
        loop {
            let base = m - m % l;
            let off = m % l;
            let candidate = match cells.iter().find(|&&c| u64::from(c) >= off) {
                Some(&c) => base + u64::from(c),
                None => base + l + u64::from(cells[0]),
            };
            if !busy(from, candidate) && !busy(to, candidate) {
                return candidate;
            }
            m = candidate + 1;
        }
    }

    fn node(&mut self, n: NodeId) -> &mut NodeState {
        self.nodes.entry(n).or_default()
    }
}

/// `count` distinct offsets in 0..l, uniformly at random.
fn distinct_offsets(l: u32, count: u32, rng: &mut dyn rand_core::RngCore) -> Vec<u32> {
    if u64::from(count) * 2 <= u64::from(l) {
        let mut chosen = BTreeSet::new();
        while chosen.len() < count as usize {
            chosen.insert(below(rng, u64::from(l)) as u32);
        }
        chosen.into_iter().collect()
    } else {
        let mut all: Vec<u32> = (0..l).collect();
        for i in 0..count as usize {
            let j = i + below(rng, (all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count as usize);
        all
    }
}

impl MacModel for TschMac {
    fn carry(&mut self, hop: Hop<'_>, rng: &mut dyn RngCore, ledger: &mut RadioLedger) -> MacOutcome {
        let Hop { now, from, to, datagram } = hop;
        self.schedule(from, to, rng);
        let slot_ns = self.slot_ns;
        // Slots before `now` can no longer be used by anyone: forget them.
        let now_slot = now.as_nanos() / slot_ns;
        for st in self.nodes.values_mut() {
            st.busy_slots = st.busy_slots.split_off(&now_slot);
        }
        let (seq, tag) = {
            let st = self.node(from);
            (st.seq, st.tag)
        };
        let Ok((psdus, stats)) = frag::fragment(datagram, from, to, seq, tag, true) else {
            return super::refused(FragStats::default());
        };
        {
            let st = self.node(from);
            st.seq = st.seq.wrapping_add(psdus.len() as u8);
            if psdus.len() > 1 {
                st.tag = st.tag.wrapping_add(1);
            }
        }
        let cells = match self.links.get(&(from, to)) {
            Some(l) => l.cells.clone(),
            None => return MacOutcome::default(),
        };
        let mut t = now.as_nanos().max(self.links.get(&(from, to)).map_or(0, |l| l.free_at));
        let mut frames = Vec::new();
        let mut delivered_at = Some(0u64);
        for psdu in psdus {
            let air = airtime_ns(psdu.len());
            let dsn = psdu.get(2).copied().unwrap_or(0);
            let mut frame_delivered = None;
            let mut attempts = 0u32;
            loop {
                let slot = self.next_usable_slot(&cells, from, to, t.div_ceil(slot_ns));
                self.node(from).busy_slots.insert(slot);
                self.node(to).busy_slots.insert(slot);
                let slot_start = slot.saturating_mul(slot_ns);
                let slot_end = slot_start.saturating_add(slot_ns);
                let tx_start = slot_start + TX_OFFSET_NS;
                let tx_end = tx_start + air;
                let received = bernoulli(rng, self.config.pdr);
                frames.push(FrameOnAir {
                    start: Instant::from_nanos(tx_start),
                    end: Instant::from_nanos(tx_end),
                    from,
                    to,
                    kind: FrameKind::Data,
                    bytes: psdu.clone(),
                    received,
                });
                book(ledger, from, RadioState::Tx, tx_start, tx_end);
                book(ledger, to, RadioState::Listen, slot_start + RX_OFFSET_NS, tx_start);
                book(ledger, to, RadioState::Rx, tx_start, tx_end);
                let mut acked = false;
                if received {
                    frame_delivered.get_or_insert(slot_end);
                    let ack_start = tx_end + TX_ACK_DELAY_NS;
                    let ack_end = ack_start + airtime_ns(ACK_PSDU);
                    acked = bernoulli(rng, self.config.ack_pdr);
                    frames.push(FrameOnAir {
                        start: Instant::from_nanos(ack_start),
                        end: Instant::from_nanos(ack_end),
                        from: to,
                        to: from,
                        kind: FrameKind::Ack,
                        bytes: frag::ack_frame(dsn),
                        received: acked,
                    });
                    book(ledger, to, RadioState::Tx, ack_start, ack_end);
                    book(ledger, from, RadioState::Listen, tx_end + RX_ACK_DELAY_NS, ack_start);
                    let state = if acked { RadioState::Rx } else { RadioState::Listen };
                    book(ledger, from, state, ack_start, ack_end);
                } else {
                    let wait = tx_end + RX_ACK_DELAY_NS;
                    book(ledger, from, RadioState::Listen, wait, wait + ACK_WAIT_NS);
                }
                t = slot_end;
                if acked {
                    break;
                }
                attempts += 1;
                if attempts > u32::from(self.config.max_frame_retries) {
                    break;
                }
            }
            match (frame_delivered, delivered_at) {
                (Some(at), Some(prev)) => delivered_at = Some(prev.max(at)),
                _ => {
                    // A fragment is lost for good: the sender drops the rest of the datagram.
                    delivered_at = None;
                    break;
                }
            }
        }
        if let Some(link) = self.links.get_mut(&(from, to)) {
            link.free_at = t;
        }
        MacOutcome { delivered_at: delivered_at.map(Instant::from_nanos), frames, fragments: stats }
    }

    fn account_idle(&mut self, from_t: Instant, to_t: Instant, ledger: &mut RadioLedger) {
        let slot_ns = self.slot_ns;
        let l = u64::from(self.config.slotframe);
        let (from_t, to_t) = (from_t.as_nanos(), to_t.as_nanos());
        for n in self.nodes.keys() {
            ledger.register(*n);
        }
        for (&(_, to), link) in &self.links {
            for &c in &link.cells {
                let phase = u64::from(c) * slot_ns + RX_OFFSET_NS;
                super::for_each_occurrence(phase, l * slot_ns, RX_WAIT_NS, from_t, to_t, |s, e| {
                    book(ledger, to, RadioState::Listen, s, e)
                });
            }
        }
    }
}
