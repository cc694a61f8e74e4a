//! IEEE 802.15.4 beacon-enabled mode with simplified slotted CSMA-CA.
//!
//! Nodes form a cluster tree: in every radio link one end is the coordinator (the parent). A
//! coordinator sends a beacon every BI = 15.36 ms · 2^BO, at a phase drawn at random; the
//! contention access period follows the beacon and lasts until SD = 15.36 ms · 2^SO after it (no
//! GTS, so the CAP is the whole active period). A relay's own active period is placed clear of its
//! parent's (when BO > SO), as a cluster tree requires. Both ends of a link talk in the coordinator's CAP
//! and keep their radio on during it; outside it they sleep. Beacons are always received.
//!
//! Slotted CSMA-CA, simplified: backoff periods (20 symbols) aligned to the beacon; a random delay
//! of 0..2^BE − 1 backoff periods counted down only inside CAPs; then two CCAs (CW = 2) on
//! consecutive backoff boundaries; the frame follows. If what remains of the CAP cannot hold the
//! two CCAs, the frame, the turnaround, the ACK and the interframe space, the attempt moves to the
//! next CAP with a fresh random delay. A CCA finds the channel busy if a frame booked earlier on
//! the same coordinator's PAN would overlap the transaction (outcomes are computed eagerly, so an
//! earlier booking may lie ahead; its sender would have sensed this one and deferred, so no two
//! transactions on a PAN overlap); then NB and BE grow and after macMaxCSMABackoffs the frame
//! fails. PANs of different coordinators do not interfere. Every data frame asks for a link-layer ACK; without one the sender retries
//! after macAckWaitDuration, up to macMaxFrameRetries times.

use super::frag::{self, FragStats, ACK_PSDU, BEACON_PSDU};
use super::phy::{
    airtime_ns, ifs_ns, ACK_WAIT_NS, BACKOFF_PERIOD_NS, BASE_SUPERFRAME_NS, CCA_NS, TURNAROUND_NS,
};
use super::{
    below, bernoulli, book, BeaconConfig, FrameKind, FrameOnAir, Hop, MacConfigError, MacModel, MacOutcome,
    NodeId,
};
use crate::radio::{RadioLedger, RadioState};
use fastshake_core::Instant;
use rand_core::RngCore;
use std::collections::{BTreeMap, BTreeSet};

const BP: u64 = BACKOFF_PERIOD_NS;

#[derive(Clone, Debug, Default)]
struct NodeState {
    free_at: u64,
    seq: u8,
    tag: u16,
}

#[derive(Clone, Debug, Default)]
struct Coordinator {
    phase_ns: u64,
    placed: bool,
    children: BTreeSet<NodeId>,
    /// Frames on the air on this PAN: (start, end), pruned as time passes.
    on_air: Vec<(u64, u64)>,
    beacon_seq: u8,
}

/// The beacon-enabled model.
#[derive(Clone, Debug)]
pub struct BeaconMac {
    config: BeaconConfig,
    bi_ns: u64,
    sd_ns: u64,
    cap_offset_ns: u64,
    parent_of_pair: BTreeMap<(NodeId, NodeId), NodeId>,
    coordinators: BTreeMap<NodeId, Coordinator>,
    nodes: BTreeMap<NodeId, NodeState>,
}

impl BeaconMac {
    /// A beacon-enabled MAC; in each pair of `links` the first node coordinates the second.
    pub fn new(
        config: &BeaconConfig,
        nodes: &[NodeId],
        links: &[(NodeId, NodeId)],
        rng: &mut dyn RngCore,
    ) -> Result<Self, MacConfigError> {
        if config.beacon_order > 14 {
            return Err(super::invalid("beacon_order", "must be in 0..=14"));
        }
        if config.superframe_order > config.beacon_order {
            return Err(super::invalid("superframe_order", "must not exceed beacon_order"));
        }
        if config.min_be > config.max_be || config.max_be > 8 {
            return Err(super::invalid("min_be", "need min_be <= max_be <= 8"));
        }
        super::check_delivery_ratios(config.pdr, config.ack_pdr)?;
        let bi_ns = BASE_SUPERFRAME_NS << config.beacon_order;
        let sd_ns = BASE_SUPERFRAME_NS << config.superframe_order;
        let beacon_end = airtime_ns(BEACON_PSDU) + ifs_ns(BEACON_PSDU);
        let cap_offset_ns = beacon_end.div_ceil(BP) * BP;
        let mut mac = BeaconMac {
            config: config.clone(),
            bi_ns,
            sd_ns,
            cap_offset_ns,
            parent_of_pair: BTreeMap::new(),
            coordinators: BTreeMap::new(),
            nodes: BTreeMap::new(),
        };
        for &n in nodes {
            mac.nodes.entry(n).or_default();
        }
        for &(parent, child) in links {
            mac.attach(parent, child);
        }
        mac.place_phases(rng);
        Ok(mac)
    }

    /// The beacon interval.
    pub fn beacon_interval_ns(&self) -> u64 {
        self.bi_ns
    }

    /// The active period (CAP) after each beacon.
    pub fn superframe_duration_ns(&self) -> u64 {
        self.sd_ns
    }

    /// The coordinator whose CAP carries the frames between `a` and `b`.
    pub fn coordinator_of(&self, a: NodeId, b: NodeId) -> Option<NodeId> {
        self.parent_of_pair.get(&(a.min(b), a.max(b))).copied()
    }

    /// The CAP `[start, end)` of `coordinator` that ends after `t` (ns), if the coordinator exists.
    pub fn cap_after(&self, coordinator: NodeId, t: u64) -> Option<(u64, u64)> {
        let c = self.coordinators.get(&coordinator)?;
        let mut k = self.superframe_index(c.phase_ns, t);
        loop {
            let (start, end) = self.cap(c.phase_ns, k);
            if end > t {
                return Some((start, end));
            }
            k += 1;
        }
    }

    fn attach(&mut self, parent: NodeId, child: NodeId) {
        let key = (parent.min(child), parent.max(child));
        if self.parent_of_pair.contains_key(&key) {
            return;
        }
        self.parent_of_pair.insert(key, parent);
        self.coordinators.entry(parent).or_default().children.insert(child);
        self.nodes.entry(parent).or_default();
        self.nodes.entry(child).or_default();
    }

    /// Draws a beacon phase for every coordinator that has none yet, in id order. As a cluster
    /// tree needs, a coordinator's active period is kept clear of its parent's and of its
    /// coordinator children's (when BI leaves room: BO > SO), so that a relay never owes its own
    /// beacon while it talks in its parent's CAP.
    fn place_phases(&mut self, rng: &mut dyn rand_core::RngCore) {
        let symbols = self.bi_ns / super::phy::SYMBOL_NS;
        let unplaced: Vec<NodeId> =
            self.coordinators.iter().filter(|(_, c)| !c.placed).map(|(&id, _)| id).collect();
        for id in unplaced {
            let related: Vec<u64> = self
                .coordinators
                .iter()
                .filter(|&(&other, c)| {
                    c.placed && (c.children.contains(&id) || self.coordinators[&id].children.contains(&other))
                })
                .map(|(_, c)| c.phase_ns)
                .collect();
            let mut phase = 0;
            for _ in 0..64 {
                phase = below(rng, symbols) * super::phy::SYMBOL_NS;
                let clear = related.iter().all(|&other| {
                    let d = (phase + self.bi_ns - other) % self.bi_ns;
                    d >= self.sd_ns && d <= self.bi_ns - self.sd_ns
                });
                if clear {
                    break;
                }
            }
            if let Some(c) = self.coordinators.get_mut(&id) {
                c.phase_ns = phase;
                c.placed = true;
            }
        }
    }

    fn superframe_index(&self, phase: u64, t: u64) -> u64 {
        t.saturating_sub(phase) / self.bi_ns
    }

    fn cap(&self, phase: u64, k: u64) -> (u64, u64) {
        let b = phase + k * self.bi_ns;
        (b + self.cap_offset_ns, b + self.sd_ns)
    }

    /// The first backoff boundary at or after `t` that lies inside a CAP.
    fn normalize(&self, phase: u64, t: u64) -> u64 {
        let mut k = self.superframe_index(phase, t);
        loop {
            let (start, end) = self.cap(phase, k);
            let p = if t <= start { start } else { start + (t - start).div_ceil(BP) * BP };
            if p < end {
                return p;
            }
            k += 1;
        }
    }

    fn cap_end(&self, phase: u64, pos: u64) -> u64 {
        self.cap(phase, self.superframe_index(phase, pos)).1
    }

    /// Slotted CSMA-CA from `t`: the start of the transmission, or None on channel access failure.
    fn csma(
        &self,
        coord: &Coordinator,
        t: u64,
        psdu_len: usize,
        rng: &mut dyn rand_core::RngCore,
    ) -> Option<u64> {
        let phase = coord.phase_ns;
        let transaction =
            2 * BP + airtime_ns(psdu_len) + TURNAROUND_NS + airtime_ns(ACK_PSDU) + ifs_ns(psdu_len);
        let mut nb = 0u8;
        let mut be = self.config.min_be;
        let mut pos = self.normalize(phase, t);
        loop {
            // Random delay, counted down only inside CAPs.
            let mut delay = below(rng, 1u64 << be);
            loop {
                let left = (self.cap_end(phase, pos) - pos) / BP;
                if delay < left {
                    pos += delay * BP;
                    break;
                }
                delay -= left;
                pos = self.normalize(phase, self.cap_end(phase, pos));
            }
            if pos + transaction > self.cap_end(phase, pos) {
                pos = self.normalize(phase, self.cap_end(phase, pos));
                continue;
            }
            // Outcomes are computed eagerly, so frames booked earlier may still lie ahead: one that
            // would overlap this transaction counts as sensed (its sender would have deferred).
            let busy = coord.on_air.iter().any(|&(s, e)| s < pos + transaction && e > pos);
            if !busy {
                return Some(pos + 2 * BP);
            }
            nb += 1;
            be = (be + 1).min(self.config.max_be);
            if nb > self.config.max_csma_backoffs {
                return None;
            }
            pos = self.normalize(phase, pos + BP);
        }
    }
}

impl MacModel for BeaconMac {
    fn carry(&mut self, hop: Hop<'_>, rng: &mut dyn RngCore, ledger: &mut RadioLedger) -> MacOutcome {
        let Hop { now, from, to, datagram } = hop;
        if self.coordinator_of(from, to).is_none() {
            // A pair nobody declared: the receiver coordinates.
            self.attach(to, from);
            self.place_phases(rng);
        }
        let coord_id = self.coordinator_of(from, to).unwrap_or(to);
        let now_ns = now.as_nanos();
        if let Some(c) = self.coordinators.get_mut(&coord_id) {
            c.on_air.retain(|&(_, e)| e > now_ns);
        }
        let st = self.nodes.entry(from).or_default();
        let (seq, tag) = (st.seq, st.tag);
        let Ok((psdus, stats)) = frag::fragment(datagram, from, to, seq, tag, true) else {
            return super::refused(FragStats::default());
        };
        st.seq = seq.wrapping_add(psdus.len() as u8);
        if psdus.len() > 1 {
            st.tag = tag.wrapping_add(1);
        }
        let mut t = now_ns.max(st.free_at);
        let mut frames = Vec::new();
        let mut delivered_at = Some(0u64);
        for psdu in psdus {
            let air = airtime_ns(psdu.len());
            let dsn = psdu.get(2).copied().unwrap_or(0);
            let mut frame_delivered = None;
            let mut retries = 0u8;
            // Ends on an ACK, on too many retries, or on channel access failure.
            while let Some(tx) =
                self.coordinators.get(&coord_id).and_then(|c| self.csma(c, t, psdu.len(), rng))
            {
                book(ledger, from, RadioState::Listen, tx - 2 * BP, tx - 2 * BP + CCA_NS);
                book(ledger, from, RadioState::Listen, tx - BP, tx - BP + CCA_NS);
                let received = bernoulli(rng, self.config.pdr);
                frames.push(FrameOnAir {
                    start: Instant::from_nanos(tx),
                    end: Instant::from_nanos(tx + air),
                    from,
                    to,
                    kind: FrameKind::Data,
                    bytes: psdu.clone(),
                    received,
                });
                book(ledger, from, RadioState::Tx, tx, tx + air);
                book(ledger, to, RadioState::Rx, tx, tx + air);
                let mut on_air_end = tx + air;
                let mut acked = false;
                if received {
                    frame_delivered.get_or_insert(tx + air);
                    let a = tx + air + TURNAROUND_NS;
                    let a_end = a + airtime_ns(ACK_PSDU);
                    acked = bernoulli(rng, self.config.ack_pdr);
                    frames.push(FrameOnAir {
                        start: Instant::from_nanos(a),
                        end: Instant::from_nanos(a_end),
                        from: to,
                        to: from,
                        kind: FrameKind::Ack,
                        bytes: frag::ack_frame(dsn),
                        received: acked,
                    });
                    book(ledger, to, RadioState::Tx, a, a_end);
                    book(ledger, from, if acked { RadioState::Rx } else { RadioState::Listen }, a, a_end);
                    on_air_end = a_end;
                }
                if let Some(c) = self.coordinators.get_mut(&coord_id) {
                    c.on_air.push((tx, on_air_end));
                }
                if acked {
                    t = on_air_end + ifs_ns(psdu.len());
                    break;
                }
                book(ledger, from, RadioState::Listen, tx + air, tx + air + ACK_WAIT_NS);
                t = tx + air + ACK_WAIT_NS;
                retries += 1;
                if retries > self.config.max_frame_retries {
                    break;
                }
            }
            match (frame_delivered, delivered_at) {
                (Some(at), Some(prev)) => delivered_at = Some(prev.max(at)),
                _ => {
                    delivered_at = None;
                    break;
                }
            }
        }
        self.nodes.entry(from).or_default().free_at = t;
        MacOutcome { delivered_at: delivered_at.map(Instant::from_nanos), frames, fragments: stats }
    }

    fn account_idle(&mut self, from_t: Instant, to_t: Instant, ledger: &mut RadioLedger) {
        let (from_t, to_t) = (from_t.as_nanos(), to_t.as_nanos());
        for n in self.nodes.keys() {
            ledger.register(*n);
        }
        let beacon_air = airtime_ns(BEACON_PSDU);
        for (&id, c) in &self.coordinators {
            let (phase, bi) = (c.phase_ns, self.bi_ns);
            super::for_each_occurrence(phase, bi, beacon_air, from_t, to_t, |s, e| {
                book(ledger, id, RadioState::Tx, s, e);
                for &child in &c.children {
                    book(ledger, child, RadioState::Rx, s, e);
                }
            });
            super::for_each_occurrence(phase, bi, self.sd_ns, from_t, to_t, |s, e| {
                book(ledger, id, RadioState::Listen, s, e);
                for &child in &c.children {
                    book(ledger, child, RadioState::Listen, s, e);
                }
            });
        }
    }
}

impl BeaconMac {
    /// The beacons `coordinator` sends from `from_t` to `to_t`, as frames on the air.
    pub fn beacons(&mut self, coordinator: NodeId, from_t: Instant, to_t: Instant) -> Vec<FrameOnAir> {
        let (bi, air) = (self.bi_ns, airtime_ns(BEACON_PSDU));
        let (bo, so) = (self.config.beacon_order, self.config.superframe_order);
        let Some(c) = self.coordinators.get_mut(&coordinator) else { return Vec::new() };
        let k = from_t.as_nanos().saturating_sub(c.phase_ns).div_ceil(bi);
        let mut b = c.phase_ns + k * bi;
        let mut out = Vec::new();
        while b < to_t.as_nanos() {
            out.push(FrameOnAir {
                start: Instant::from_nanos(b),
                end: Instant::from_nanos(b + air),
                from: coordinator,
                to: coordinator,
                kind: FrameKind::Beacon,
                bytes: frag::beacon_frame(c.beacon_seq, coordinator, bo, so),
                received: true,
            });
            c.beacon_seq = c.beacon_seq.wrapping_add(1);
            b += bi;
        }
        out
    }
}
