//! Datagrams sent one after another along a chain of MAC hops: the flights of a handshake as
//! seed 002's analysis sees them, driven straight through a [`MacModel`].

use super::sixlowpan::UdpDatagram;
use super::{below, MacModel, NodeId};
use crate::radio::RadioLedger;
use fastshake_core::Instant;
use std::time::Duration;

/// How the datagrams of a sequence are sent.
#[derive(Clone, Debug)]
pub struct SequencePlan {
    /// The chain of nodes, end to end (H hops = H + 1 nodes).
    pub chain: Vec<NodeId>,
    /// How many datagrams.
    pub datagrams: usize,
    /// Bytes of each datagram: the UDP payload (a DTLS datagram, say), to which 6LoWPAN adds
    /// its compressed IPv6 and UDP headers between the chain's ends
    /// ([`UdpDatagram::between`], port [`SEQUENCE_PORT`]).
    pub datagram_len: usize,
    /// Each datagram is handed to the first hop a uniformly random time in [0, this) after the
    /// previous one arrived (seed 002: the instant a frame is selected for transmission is
    /// uniform over the slotframe). Zero sends each one as soon as the previous one arrived.
    pub arrival_spread_ns: u64,
    /// Alternate the direction (client → server, server → client, ...) as handshake flights do.
    pub alternate: bool,
    /// If set, a datagram lost on the way is sent again this long after its last hand-over, as
    /// a DTLS retransmission timer does (tinyDTLS: 2 s), up to [`MAX_ATTEMPTS`] times in all.
    pub retransmit_timeout_ns: Option<u64>,
}

impl SequencePlan {
    /// `datagrams` of `datagram_len` bytes along `chain`, alternating direction as handshake
    /// flights do, each handed over as soon as the previous one arrived, none sent again.
    pub fn flights(chain: Vec<NodeId>, datagrams: usize, datagram_len: usize) -> SequencePlan {
        SequencePlan {
            chain,
            datagrams,
            datagram_len,
            arrival_spread_ns: 0,
            alternate: true,
            retransmit_timeout_ns: None,
        }
    }

    /// The same, a lost datagram sent again `timeout_ns` after its last hand-over.
    pub fn resent_after(self, timeout_ns: u64) -> SequencePlan {
        SequencePlan { retransmit_timeout_ns: Some(timeout_ns), ..self }
    }
}

/// The UDP port at both ends of a sequence (CoAPS, RFC 7252).
pub const SEQUENCE_PORT: u16 = 5684;

/// Attempts per datagram when retransmitting.
pub const MAX_ATTEMPTS: u32 = 8;

/// What a sequence cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SequenceReport {
    /// Sum over datagrams of the time from hand-over to arrival at the far end of the chain.
    pub latency: Duration,
    /// From the first hand-over to the last arrival (includes the random arrival spreads).
    pub elapsed: Duration,
    /// Datagrams that arrived.
    pub delivered: usize,
    /// Datagrams lost for good.
    pub lost: usize,
    /// Datagrams sent again after a loss.
    pub retransmissions: usize,
    /// Frames put on the air, all kinds.
    pub frames_on_air: usize,
    /// Data frames put on the air (first transmissions and retries).
    pub data_frames_on_air: usize,
}

/// Sends `plan.datagrams` datagrams one after another through `mac`, starting at `start`.
pub fn send_sequence(
    mac: &mut dyn MacModel,
    plan: &SequencePlan,
    start: Instant,
    rng: &mut dyn rand_core::RngCore,
    ledger: &mut RadioLedger,
) -> SequenceReport {
    let mut report = SequenceReport::default();
    let (first, last) = match (plan.chain.first(), plan.chain.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => return report,
    };
    let hop_count = plan.chain.len() - 1;
    let payload = vec![0x17u8; plan.datagram_len];
    let there = UdpDatagram::between(first, last, hop_count, SEQUENCE_PORT, payload.clone());
    let back = UdpDatagram::between(last, first, hop_count, SEQUENCE_PORT, payload);
    let mut t = start;
    let mut first_handover = None;
    for i in 0..plan.datagrams {
        let first_try = t + Duration::from_nanos(below(rng, plan.arrival_spread_ns));
        first_handover.get_or_insert(first_try);
        let forward = !plan.alternate || i % 2 == 0;
        let hops: Vec<(NodeId, NodeId)> = if forward {
            plan.chain.windows(2).map(|w| (w[0], w[1])).collect()
        } else {
            plan.chain.windows(2).rev().map(|w| (w[1], w[0])).collect()
        };
        let mut handover = first_try;
        let mut attempts = 1;
        loop {
            let mut at = handover;
            let mut arrived = true;
            for &(from, to) in &hops {
                let datagram = if forward { &there } else { &back };
                let outcome = mac.send(at, from, to, datagram, rng, ledger);
                report.frames_on_air += outcome.frames.len();
                report.data_frames_on_air +=
                    outcome.frames.iter().filter(|f| f.kind == super::FrameKind::Data).count();
                let last_on_air = outcome.frames.iter().map(|f| f.end).max().unwrap_or(at);
                match outcome.delivered_at {
                    Some(d) => at = d,
                    None => {
                        arrived = false;
                        at = last_on_air;
                        break;
                    }
                }
            }
            if arrived {
                report.delivered += 1;
                report.latency += at - first_try;
                t = at;
                break;
            }
            match plan.retransmit_timeout_ns {
                Some(timeout) if attempts < MAX_ATTEMPTS => {
                    attempts += 1;
                    report.retransmissions += 1;
                    handover += Duration::from_nanos(timeout);
                }
                _ => {
                    report.lost += 1;
                    t = at;
                    break;
                }
            }
        }
    }
    report.elapsed = t - first_handover.unwrap_or(start);
    report
}

/// Means over many seeds of [`send_sequence`] on fresh models (new phases and cell placements
/// per seed).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SweepStats {
    /// Seeds run.
    pub seeds: u64,
    /// Mean of the summed per-datagram latency, seconds.
    pub mean_latency_s: f64,
    /// Half-width of the 95 % confidence interval of that mean, seconds.
    pub ci95_s: f64,
    /// Mean time from the first hand-over to the last arrival, seconds.
    pub mean_elapsed_s: f64,
    /// Share of datagrams that arrived.
    pub delivered_ratio: f64,
    /// Retransmissions per sequence.
    pub retransmissions: f64,
    /// Data frames on the air per datagram and hop.
    pub data_frames_per_datagram_hop: f64,
    /// Mean radio energy of the first node of the chain (the client) over the sequence, idle
    /// listening included, mJ.
    pub client_energy_mj: f64,
}

/// Runs `plan` through a model built from `config` over the plan's chain, once per seed in
/// `seeds`, and averages.
pub fn sweep(
    config: &super::MacConfig,
    plan: &SequencePlan,
    seeds: std::ops::Range<u64>,
) -> Result<SweepStats, super::MacConfigError> {
    use rand_chacha::rand_core::SeedableRng;
    let links: Vec<(NodeId, NodeId)> = plan.chain.windows(2).map(|w| (w[0], w[1])).collect();
    let client = plan.chain.first().copied().unwrap_or_default();
    let hops = links.len().max(1) as f64;
    let (mut sum, mut sum_sq, mut elapsed, mut delivered, mut total, mut data, mut energy) =
        (0.0, 0.0, 0.0, 0usize, 0usize, 0usize, 0.0);
    let mut retransmissions = 0usize;
    let n = seeds.end.saturating_sub(seeds.start);
    for seed in seeds {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let mut mac = super::build(config, &plan.chain, &links, &mut rng)?;
        let mut ledger = RadioLedger::default();
        let r = send_sequence(mac.as_mut(), plan, Instant::ZERO, &mut rng, &mut ledger);
        let end = Instant::ZERO + r.elapsed + Duration::from_nanos(plan.arrival_spread_ns);
        mac.account_idle(Instant::ZERO, end, &mut ledger);
        let x = r.latency.as_secs_f64();
        sum += x;
        sum_sq += x * x;
        elapsed += r.elapsed.as_secs_f64();
        delivered += r.delivered;
        retransmissions += r.retransmissions;
        total += r.delivered + r.lost;
        data += r.data_frames_on_air;
        energy += ledger.usage(client, end).energy_mj;
    }
    if n == 0 {
        return Ok(SweepStats::default());
    }
    let nf = n as f64;
    let mean = sum / nf;
    let var = if n > 1 { (sum_sq - nf * mean * mean).max(0.0) / (nf - 1.0) } else { 0.0 };
    Ok(SweepStats {
        seeds: n,
        mean_latency_s: mean,
        ci95_s: 1.96 * (var / nf).sqrt(),
        mean_elapsed_s: elapsed / nf,
        delivered_ratio: if total == 0 { 0.0 } else { delivered as f64 / total as f64 },
        retransmissions: retransmissions as f64 / nf,
        data_frames_per_datagram_hop: if total == 0 { 0.0 } else { data as f64 / (total as f64 * hops) },
        client_energy_mj: energy / nf,
    })
}

/// The simulator's generator for `seed` (ChaCha20), for callers that drive models themselves.
pub fn seeded_rng(seed: u64) -> rand_chacha::ChaCha20Rng {
    use rand_chacha::rand_core::SeedableRng;
    rand_chacha::ChaCha20Rng::seed_from_u64(seed)
}
