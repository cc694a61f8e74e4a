//! Duty-cycled MAC models on IEEE 802.15.4 frames: X-MAC preamble sampling, the beacon-enabled
//! mode with slotted CSMA-CA, and TSCH.
//!
//! A [`MacModel`] carries one UDP datagram over one hop. It compresses and splits the datagram
//! into 127-byte frames ([`sixlowpan`], [`frag`]), places every frame on the air by its channel-access rules and books the radio time
//! of both ends into a [`RadioLedger`]. Outcomes are computed eagerly, when the datagram is handed
//! over: the model keeps per-node "radio busy until" state, so a second datagram queues behind the
//! first. That is exact for the sequential flights of a handshake; simultaneous senders on the
//! same channel do not collide (the beacon mode's CCA does see frames already booked on its PAN).
//! Callers hand datagrams over in event order (nondecreasing `now`).
//!
//! - [`xmac`]: preamble sampling, no ACK for data (seed 002, Section III-A).
//! - [`beacon`]: IEEE 802.15.4 beacon-enabled mode, slotted CSMA-CA in the CAP (Section III-B).
//! - [`tsch`]: IEEE 802.15.4e TSCH with dedicated cells (Section III-C, Eq. (1) and (2)).
//! - [`sequence`]: datagrams one after another along a chain, averaged over seeds.

use crate::radio::{RadioLedger, RadioState};
use fastshake_core::Instant;
use serde::{Deserialize, Serialize};

pub mod beacon;
pub mod frag;
pub mod phy;
pub mod sequence;
pub mod sixlowpan;
pub mod tsch;
pub mod xmac;

/// A node of the simulated network, as the MAC models see it.
pub type NodeId = usize;

/// One duty-cycled MAC shared by a set of nodes.
pub trait MacModel {
    /// A UDP datagram leaves `from` toward neighbour `to` over this MAC hop at `now`. Compresses
    /// and fragments it into 127-byte frames (6LoWPAN), schedules them by the channel access rules,
    /// returns when the datagram is complete at `to` (None if any frame is lost for good) and
    /// every frame put on the air; books radio time.
    fn send(
        &mut self,
        now: Instant,
        from: NodeId,
        to: NodeId,
        datagram: &sixlowpan::UdpDatagram,
        rng: &mut dyn rand_core::RngCore,
        ledger: &mut RadioLedger,
    ) -> MacOutcome {
        if now.as_nanos() >= HORIZON_NS {
            return refused(frag::FragStats::default());
        }
        self.carry(Hop { now, from, to, datagram }, rng, ledger)
    }

    /// [`MacModel::send`] before [`HORIZON_NS`]: the model's own channel access.
    fn carry(
        &mut self,
        hop: Hop<'_>,
        rng: &mut dyn rand_core::RngCore,
        ledger: &mut RadioLedger,
    ) -> MacOutcome;

    /// Idle listening / beacon costs from `from_t` to `to_t` for every node on this MAC.
    fn account_idle(&mut self, from_t: Instant, to_t: Instant, ledger: &mut RadioLedger);
}

/// One datagram handed to a MAC: when, between which neighbours.
#[derive(Clone, Copy, Debug)]
pub struct Hop<'a> {
    pub now: Instant,
    pub from: NodeId,
    pub to: NodeId,
    pub datagram: &'a sixlowpan::UdpDatagram,
}

/// What became of one datagram on one hop.
#[derive(Clone, Debug, Default)]
pub struct MacOutcome {
    /// When the last fragment arrived at the receiver; `None` if a frame was lost for good (or
    /// the datagram cannot be fragmented at all).
    pub delivered_at: Option<Instant>,
    /// Every frame put on the air for this datagram, in time order.
    pub frames: Vec<FrameOnAir>,
    /// How the datagram was split, bytes per layer.
    pub fragments: frag::FragStats,
}

/// One IEEE 802.15.4 frame on the air.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameOnAir {
    /// First bit of the PHY preamble.
    pub start: Instant,
    /// Last bit of the frame.
    pub end: Instant,
    /// Transmitting node.
    pub from: NodeId,
    /// Addressed node (the coordinator's children for a beacon).
    pub to: NodeId,
    /// What the frame is for.
    pub kind: FrameKind,
    /// The PSDU: MAC header, MAC payload and FCS (pcap LINKTYPE_IEEE802_15_4_WITHFCS = 195).
    pub bytes: Vec<u8>,
    /// Whether `to` received it intact.
    pub received: bool,
}

/// The role of a frame on the air.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameKind {
    /// A 6LoWPAN (fragment of a) datagram.
    Data,
    /// An X-MAC strobe carrying the receiver address.
    Strobe,
    /// An acknowledgement (link-layer ACK, or X-MAC early acknowledgement of a strobe).
    Ack,
    /// An IEEE 802.15.4 beacon.
    Beacon,
}

/// A MAC for a scenario, as written in TOML: `kind = "xmac" | "beacon" | "tsch"` and that kind's
/// parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum MacConfig {
    /// X-MAC preamble sampling.
    #[serde(rename = "xmac")]
    XMac(XMacConfig),
    /// IEEE 802.15.4 beacon-enabled mode.
    Beacon(BeaconConfig),
    /// IEEE 802.15.4e TSCH.
    Tsch(TschConfig),
}

/// X-MAC preamble sampling parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XMacConfig {
    /// Check interval CI: every node samples the channel once per CI, at its own phase.
    pub check_interval_ms: f64,
    /// Probability that any one frame (strobe, early ack, data) arrives intact.
    #[serde(default = "one")]
    pub pdr: f64,
    /// How long a sender strobes before giving up; default 3 CI plus two strobe periods.
    #[serde(default)]
    pub max_strobe_ms: Option<f64>,
    /// Once a sender has reached a neighbour, it remembers when that neighbour wakes and starts
    /// its next strobe train just before (Contiki's X-MAC "encounter optimization"). Saves the
    /// sender's energy; the wait for the wake-up stays.
    #[serde(default)]
    pub phase_lock: bool,
}

/// IEEE 802.15.4 beacon-enabled mode parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeaconConfig {
    /// BO: beacon interval BI = 15.36 ms · 2^BO (BO = 6 gives 983 ms).
    pub beacon_order: u8,
    /// SO: active period (the CAP, no GTS) = 15.36 ms · 2^SO (SO = 2 gives 61.4 ms).
    pub superframe_order: u8,
    /// Probability that a data frame arrives intact.
    #[serde(default = "one")]
    pub pdr: f64,
    /// Probability that a link-layer ACK arrives intact.
    #[serde(default = "one")]
    pub ack_pdr: f64,
    /// macMaxFrameRetries.
    #[serde(default = "default_max_frame_retries")]
    pub max_frame_retries: u8,
    /// macMaxCSMABackoffs.
    #[serde(default = "default_max_csma_backoffs")]
    pub max_csma_backoffs: u8,
    /// macMinBE.
    #[serde(default = "default_min_be")]
    pub min_be: u8,
    /// macMaxBE.
    #[serde(default = "default_max_be")]
    pub max_be: u8,
}

/// IEEE 802.15.4e TSCH parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TschConfig {
    /// L: timeslots per slotframe.
    pub slotframe: u32,
    /// C: dedicated cells per link and direction.
    pub cells_per_link: u32,
    /// Timeslot length.
    #[serde(default = "default_timeslot_ms")]
    pub timeslot_ms: f64,
    /// P: probability that a data frame arrives intact.
    #[serde(default = "one")]
    pub pdr: f64,
    /// Probability that a link-layer ACK arrives intact.
    #[serde(default = "one")]
    pub ack_pdr: f64,
    /// macMaxFrameRetries.
    #[serde(default = "default_max_frame_retries")]
    pub max_frame_retries: u8,
    /// How the C cells of a link are placed when not given.
    #[serde(default)]
    pub placement: CellPlacement,
    /// Cells given explicitly for some directed links; others follow `placement`.
    #[serde(default)]
    pub cells: Vec<GivenCells>,
}

/// How TSCH cells are placed over the slotframe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellPlacement {
    /// C distinct slot offsets drawn uniformly at random per directed link (seed 002's
    /// assumption behind D = (1 + L/(C+1)) / P).
    #[default]
    Random,
    /// C offsets spaced L/C apart, at a random rotation per directed link.
    Even,
}

/// Cells scheduled for one directed link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GivenCells {
    /// Transmitter.
    pub from: NodeId,
    /// Receiver.
    pub to: NodeId,
    /// Slot offsets in 0..L.
    pub slots: Vec<u32>,
}

fn one() -> f64 {
    1.0
}
fn default_max_frame_retries() -> u8 {
    3
}
fn default_max_csma_backoffs() -> u8 {
    4
}
fn default_min_be() -> u8 {
    3
}
fn default_max_be() -> u8 {
    5
}
fn default_timeslot_ms() -> f64 {
    10.0
}

/// A MAC configuration that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MacConfigError {
    /// A parameter is out of its range.
    #[error("invalid MAC parameter {name}: {reason}")]
    Invalid {
        /// The parameter.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Builds the model for `config` over `nodes`. `links` lists the radio neighbours, each pair once;
/// in beacon mode the first node of a pair is the coordinator (parent) of the second. Sends between
/// nodes not listed still work (their state is created on first use). Random phases and cell
/// placements are drawn from `rng`.
pub fn build(
    config: &MacConfig,
    nodes: &[NodeId],
    links: &[(NodeId, NodeId)],
    rng: &mut dyn rand_core::RngCore,
) -> Result<Box<dyn MacModel>, MacConfigError> {
    Ok(match config {
        MacConfig::XMac(c) => {
            let mut all: Vec<NodeId> = nodes.to_vec();
            all.extend(links.iter().flat_map(|&(a, b)| [a, b]));
            Box::new(xmac::XMac::new(c, &all, rng)?)
        }
        MacConfig::Beacon(c) => Box::new(beacon::BeaconMac::new(c, nodes, links, rng)?),
        MacConfig::Tsch(c) => Box::new(tsch::TschMac::new(c, nodes, links, rng)?),
    })
}

/// Calls `f(start, end)` for every occurrence `[phase + k·period, + len)` that overlaps
/// `[from, to)`, clipped to it, so that consecutive windows of time are accounted exactly once.
pub(crate) fn for_each_occurrence(
    phase: u64,
    period: u64,
    len: u64,
    from: u64,
    to: u64,
    mut f: impl FnMut(u64, u64),
) {
    if period == 0 || to <= from {
        return;
    }
    // First occurrence that ends after `from`.
    let k = (from + 1).saturating_sub(phase.saturating_add(len)).div_ceil(period);
    let mut start = phase.saturating_add(k.saturating_mul(period));
    while start < to {
        let end = start.saturating_add(len);
        if end > from {
            f(start.max(from), end.min(to));
        }
        start = start.saturating_add(period);
    }
}

/// A uniform draw in [0, 1).
pub(crate) fn unit_f64(rng: &mut dyn rand_core::RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform draw in 0..n (0 if n is 0), without modulo bias.
pub(crate) fn below(rng: &mut dyn rand_core::RngCore, n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let zone = u64::MAX - (u64::MAX - n + 1) % n;
    loop {
        let x = rng.next_u64();
        if x <= zone {
            return x % n;
        }
    }
}

/// True with probability `p`; draws nothing when the outcome is certain.
pub(crate) fn bernoulli(rng: &mut dyn rand_core::RngCore, p: f64) -> bool {
    if p >= 1.0 {
        true
    } else if p <= 0.0 {
        false
    } else {
        unit_f64(rng) < p
    }
}

/// A parameter out of its range.
pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> MacConfigError {
    MacConfigError::Invalid { name, reason: reason.into() }
}

/// The delivery ratios of a MAC that acknowledges its frames: data (`pdr`) and ACK (`ack_pdr`).
pub(crate) fn check_delivery_ratios(pdr: f64, ack_pdr: f64) -> Result<(), MacConfigError> {
    check_probability("pdr", pdr)?;
    check_probability("ack_pdr", ack_pdr)
}

pub(crate) fn check_probability(name: &'static str, p: f64) -> Result<(), MacConfigError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(MacConfigError::Invalid { name, reason: format!("{p} is not a probability") })
    }
}

/// Datagrams handed over later than this (about 146 years of virtual time) are not carried:
/// every schedule computed from a time below it stays far from `u64` overflow.
pub const HORIZON_NS: u64 = 1 << 62;

/// The outcome for a datagram a model refuses to carry (past the horizon, too large).
pub(crate) fn refused(fragments: frag::FragStats) -> MacOutcome {
    MacOutcome { delivered_at: None, frames: Vec::new(), fragments }
}

/// Books `[start, end)` ns of `node`'s radio in `state`; the models keep times as plain ns.
pub(crate) fn book(ledger: &mut RadioLedger, node: NodeId, state: RadioState, start: u64, end: u64) {
    ledger.book(node, state, Instant::from_nanos(start), Instant::from_nanos(end));
}

/// Durations in a MAC configuration: positive and at most one hour.
pub(crate) fn millis_to_ns(name: &'static str, ms: f64) -> Result<u64, MacConfigError> {
    if ms.is_finite() && ms > 0.0 && ms <= 3_600_000.0 {
        Ok((ms * 1e6).round() as u64)
    } else {
        Err(MacConfigError::Invalid { name, reason: format!("{ms} ms is not in (0, 1 h]") })
    }
}
