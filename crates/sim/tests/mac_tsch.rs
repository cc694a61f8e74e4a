//! TSCH held to seed 002's analysis: D = (1 + L/(C+1)) / P slots per hop and frame.

use fastshake_core::Instant;
use fastshake_sim::mac::sequence::{send_sequence, SequencePlan};
use fastshake_sim::mac::tsch::TschMac;
use fastshake_sim::mac::{CellPlacement, MacModel, TschConfig};
use fastshake_sim::radio::RadioLedger;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

const SLOT_S: f64 = 0.010;

fn config(l: u32, c: u32, pdr: f64) -> TschConfig {
    TschConfig {
        slotframe: l,
        cells_per_link: c,
        timeslot_ms: 10.0,
        pdr,
        ack_pdr: 1.0,
        max_frame_retries: 255,
        placement: CellPlacement::Random,
        cells: Vec::new(),
    }
}

/// Mean over `seeds` schedules of the summed latency of 10 one-frame datagrams over `hops` hops.
fn mean_handshake_s(l: u32, c: u32, hops: usize, pdr: f64, seeds: u64) -> (f64, f64) {
    let mut total = 0.0;
    let mut data_frames = 0usize;
    for seed in 0..seeds {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let chain: Vec<usize> = (0..=hops).collect();
        let links: Vec<(usize, usize)> = chain.windows(2).map(|w| (w[0], w[1])).collect();
        let mut mac = TschMac::new(&config(l, c, pdr), &chain, &links, &mut rng).unwrap();
        let slotframe_ns = u64::from(l) * mac.slot_ns();
        let plan = SequencePlan {
            chain,
            datagrams: 10,
            // 64 payload bytes fit one frame on every hop: a relay's hop carries both 8-byte
            // interface identifiers, 25 bytes of IPHC and UDP NHC (80 bytes would need 105).
            datagram_len: 64,
            arrival_spread_ns: slotframe_ns,
            alternate: true,
            retransmit_timeout_ns: None,
        };
        let mut ledger = RadioLedger::default();
        let r = send_sequence(&mut mac, &plan, Instant::ZERO, &mut rng, &mut ledger);
        assert_eq!(r.delivered, 10);
        total += r.latency.as_secs_f64();
        data_frames += r.data_frames_on_air;
    }
    (total / seeds as f64, data_frames as f64 / (seeds as f64 * 10.0 * hops as f64))
}

fn analytic_s(l: u32, c: u32, hops: usize, pdr: f64) -> f64 {
    10.0 * hops as f64 * (1.0 + f64::from(l) / f64::from(c + 1)) / pdr * SLOT_S
}

fn assert_within(sim: f64, paper: f64, tol: f64, what: &str) {
    let diff = (sim - paper) / paper;
    assert!(diff.abs() <= tol, "{what}: simulated {sim:.3} s vs paper {paper:.3} s ({:+.2} %)", diff * 100.0);
}

#[test]
fn table_one_single_hop_within_two_percent() {
    // Seed 002, Table I (10 frames, 10 ms slots, P = 1).
    let paper = [
        (101, 1, 5.15),
        (101, 2, 3.467),
        (101, 3, 2.625),
        (1001, 1, 50.15),
        (1001, 2, 33.467),
        (1001, 3, 25.125),
    ];
    for (l, c, seconds) in paper {
        assert!((analytic_s(l, c, 1, 1.0) - seconds).abs() < 0.001, "formula reproduces the table");
        let (sim, frames_per_hop) = mean_handshake_s(l, c, 1, 1.0, 3000);
        assert_eq!(frames_per_hop, 1.0, "PDR 1 needs no retry");
        assert_within(sim, seconds, 0.02, &format!("L={l} C={c}"));
    }
}

#[test]
fn table_two_multi_hop_within_two_percent() {
    // Seed 002, Table II (C = 1).
    let paper = [
        (101, 2, 10.3),
        (101, 3, 15.45),
        (101, 4, 20.6),
        (1001, 2, 100.3),
        (1001, 3, 150.45),
        (1001, 4, 200.6),
    ];
    for (l, h, seconds) in paper {
        let (sim, _) = mean_handshake_s(l, 1, h, 1.0, 2000);
        assert_within(sim, seconds, 0.02, &format!("L={l} H={h}"));
    }
}

#[test]
fn lower_pdr_multiplies_transmissions_by_one_over_p() {
    // One hop, L = 101, C = 1, P = 0.5 and unlimited retries: 1/P transmissions per frame.
    // A retry waits for the link's next cell, a whole slotframe later, so the expected delay is
    // 1 + L/2 + (1/P - 1) L slots per frame, more than the paper's (1 + L/2) / P, which treats a
    // retry like a fresh arrival.
    let (l, p) = (101u32, 0.5);
    let (sim, tx_per_frame) = mean_handshake_s(l, 1, 1, p, 3000);
    assert!((tx_per_frame - 1.0 / p).abs() < 0.05, "transmissions per frame {tx_per_frame}");
    let exact = 10.0 * (1.0 + f64::from(l) / 2.0 + (1.0 / p - 1.0) * f64::from(l)) * SLOT_S;
    assert_within(sim, exact, 0.03, "P = 0.5");
    let (ideal, _) = mean_handshake_s(l, 1, 1, 1.0, 3000);
    assert!(sim > ideal / p, "retries in dedicated cells cost at least the paper's 1/P factor");
}

#[test]
fn limited_retries_lose_frames_and_given_cells_are_used() {
    let mut cfg = config(11, 1, 0.0);
    cfg.max_frame_retries = 3;
    cfg.cells = vec![fastshake_sim::mac::GivenCells { from: 0, to: 1, slots: vec![4] }];
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut mac = TschMac::new(&cfg, &[0, 1], &[(0, 1)], &mut rng).unwrap();
    assert_eq!(mac.cells(0, 1), Some(&[4u32][..]));
    let mut ledger = RadioLedger::default();
    let out = mac.send(Instant::ZERO, 0, 1, &udp(0, 1, vec![0u8; 50]), &mut rng, &mut ledger);
    assert_eq!(out.delivered_at, None);
    assert_eq!(out.frames.len(), 4, "first try and three retries");
    for (i, f) in out.frames.iter().enumerate() {
        let slot = f.start.as_nanos() / 10_000_000;
        assert_eq!(slot, 4 + 11 * i as u64, "every attempt in the given cell");
        assert!(!f.received);
    }
}

#[test]
fn fragments_use_consecutive_cells() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let cfg = TschConfig { placement: CellPlacement::Even, ..config(20, 2, 1.0) };
    let mut mac = TschMac::new(&cfg, &[0, 1], &[(0, 1)], &mut rng).unwrap();
    let cells = mac.cells(0, 1).unwrap().to_vec();
    assert_eq!((cells[1] + 20 - cells[0]) % 20, 10, "even placement");
    let mut ledger = RadioLedger::default();
    let out = mac.send(Instant::ZERO, 0, 1, &udp(0, 1, vec![1u8; 300]), &mut rng, &mut ledger);
    // 300 payload bytes: FRAG1 with 9 header bytes and 88 payload bytes, FRAGNs of 96, 96, 20.
    assert_eq!(out.fragments.frames, 4);
    let data: Vec<_> = out.frames.iter().filter(|f| f.kind == fastshake_sim::mac::FrameKind::Data).collect();
    assert_eq!(data.len(), 4);
    for w in data.windows(2) {
        let gap = (w[1].start.as_nanos() - w[0].start.as_nanos()) / 10_000_000;
        assert_eq!(gap, 10, "next fragment in the next cell, half a slotframe later");
    }
    let last_slot_end = (data[3].start.as_nanos() / 10_000_000 + 1) * 10_000_000;
    assert_eq!(out.delivered_at, Some(Instant::from_nanos(last_slot_end)));
}

/// A UDP datagram between neighbours `from` and `to` (link-local, port 5684) with `payload`.
fn udp(from: usize, to: usize, payload: Vec<u8>) -> fastshake_sim::mac::sixlowpan::UdpDatagram {
    fastshake_sim::mac::sixlowpan::UdpDatagram::between(from, to, 1, 5684, payload)
}
