//! X-MAC preamble sampling: per-hop wait against CI/2, strobes, no data ACK, losses.

use fastshake_core::Instant;
use fastshake_sim::mac::frag::eui64;
use fastshake_sim::mac::phy::airtime_ns;
use fastshake_sim::mac::sequence::{send_sequence, SequencePlan};
use fastshake_sim::mac::xmac::{XMac, STROBE_PERIOD_NS};
use fastshake_sim::mac::{FrameKind, MacModel, XMacConfig};
use fastshake_sim::radio::RadioLedger;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn config(ci_ms: f64, pdr: f64) -> XMacConfig {
    XMacConfig { check_interval_ms: ci_ms, pdr, max_strobe_ms: None, phase_lock: false }
}

/// Mean latency of one-hop sends at random instants, over fresh phases; and the loss ratio.
fn one_hop(ci_ms: f64, pdr: f64, len: usize, runs: u64) -> (f64, f64, u64) {
    let mut sum = 0.0;
    let mut lost = 0;
    let mut data_frames = 0;
    for seed in 0..runs {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut mac = XMac::new(&config(ci_ms, pdr), &[0, 1], &mut rng).unwrap();
        let now = Instant::from_nanos(10_000_000_000 + rng.next_u64() % 1_000_000_000);
        let mut ledger = RadioLedger::default();
        let out = mac.send(now, 0, 1, &udp(0, 1, vec![0u8; len]), &mut rng, &mut ledger);
        data_frames = out.fragments.frames as u64;
        match out.delivered_at {
            Some(t) => sum += (t - now).as_secs_f64(),
            None => lost += 1,
        }
    }
    let delivered = (runs - lost) as f64;
    (sum / delivered, lost as f64 / runs as f64, data_frames)
}

#[test]
fn mean_per_hop_wait_is_half_the_check_interval_plus_the_transfer() {
    for ci_ms in [125.0, 500.0] {
        let (mean, lost, _) = one_hop(ci_ms, 1.0, 60, 20_000);
        assert_eq!(lost, 0.0);
        // Transfer: one strobe/early-ack exchange, then the data frame (60 + 1 + 23 bytes).
        let transfer = (STROBE_PERIOD_NS + airtime_ns(60 + 1 + 23)) as f64 / 1e9;
        let expected = ci_ms / 2000.0 + transfer;
        // The strobe train samples the wake-up at strobe-period granularity: allow one period,
        // plus sampling noise (the wait is uniform over CI).
        let tol = STROBE_PERIOD_NS as f64 / 1e9 + 4.0 * (ci_ms / 1000.0) / 12f64.sqrt() / 20_000f64.sqrt();
        assert!(
            (mean - expected).abs() < tol,
            "CI {ci_ms} ms: mean {mean:.5} s, expected {expected:.5} ± {tol:.5}"
        );
    }
}

#[test]
fn chains_add_half_a_check_interval_per_hop() {
    let ci_ns = 250_000_000u64;
    let runs = 3000;
    let mut total = 0.0;
    for seed in 0..runs {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let chain: Vec<usize> = (0..=3).collect();
        let mut mac = XMac::new(&config(250.0, 1.0), &chain, &mut rng).unwrap();
        let plan = SequencePlan {
            chain,
            datagrams: 1,
            datagram_len: 60,
            arrival_spread_ns: ci_ns,
            alternate: false,
            retransmit_timeout_ns: None,
        };
        let r = send_sequence(&mut mac, &plan, Instant::ZERO, &mut rng, &mut RadioLedger::default());
        assert_eq!(r.delivered, 1);
        total += r.latency.as_secs_f64();
    }
    let mean = total / runs as f64;
    let per_hop = 0.125 + (STROBE_PERIOD_NS + airtime_ns(84)) as f64 / 1e9;
    assert!((mean / (3.0 * per_hop) - 1.0).abs() < 0.03, "3 hops: {mean:.4} s vs {:.4} s", 3.0 * per_hop);
}

#[test]
fn strobes_carry_the_receiver_and_data_gets_no_ack() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut mac = XMac::new(&config(125.0, 1.0), &[4, 9], &mut rng).unwrap();
    let mut ledger = RadioLedger::default();
    let out = mac.send(Instant::from_millis(1000), 4, 9, &udp(4, 9, vec![0u8; 400]), &mut rng, &mut ledger);
    assert!(out.delivered_at.is_some());
    let mut receiver = eui64(9);
    receiver.reverse();
    let strobes: Vec<_> = out.frames.iter().filter(|f| f.kind == FrameKind::Strobe).collect();
    assert!(!strobes.is_empty());
    assert!(strobes.iter().all(|f| f.bytes[5..13] == receiver && f.to == 9));
    assert_eq!(strobes.iter().filter(|f| f.received).count(), 1, "one strobe heard, then early ack");
    let first_data = out.frames.iter().position(|f| f.kind == FrameKind::Data).unwrap();
    assert_eq!(out.frames[first_data - 1].kind, FrameKind::Ack, "early ack right before the data");
    assert!(out.frames[first_data..].iter().all(|f| f.kind == FrameKind::Data), "no ACK for data frames");
    assert_eq!(out.frames.len() - first_data, out.fragments.frames);
    // 400 payload bytes: FRAG1 with 88, three FRAGNs of 96, one of 24.
    assert_eq!(out.fragments.frames, 5);
}

#[test]
fn lost_data_frames_lose_the_datagram_and_lost_strobes_only_delay() {
    // PDR 0.9 on every frame: a one-frame datagram is lost when its data frame is (10 %);
    // strobes and early acks lost are made up by the next ones.
    let runs = 20_000;
    let (mean_lossy, lost, frames) = one_hop(125.0, 0.9, 60, runs);
    assert_eq!(frames, 1);
    let sd = (0.1 * 0.9 / runs as f64).sqrt();
    assert!((lost - 0.1).abs() < 5.0 * sd + 0.005, "loss ratio {lost}");
    let (mean_clean, _, _) = one_hop(125.0, 1.0, 60, runs);
    assert!(mean_lossy > mean_clean, "lost strobes delay: {mean_lossy} vs {mean_clean}");
    // Three fragments: the datagram survives only if all three do.
    let (_, lost3, frames3) = one_hop(125.0, 0.9, 250, runs);
    assert_eq!(frames3, 3);
    let expected = 1.0 - 0.9f64.powi(3);
    assert!((lost3 - expected).abs() < 0.02, "3-fragment loss {lost3} vs {expected}");
}

#[test]
fn a_receiver_that_never_hears_makes_the_sender_give_up() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut mac = XMac::new(&config(100.0, 0.0), &[0, 1], &mut rng).unwrap();
    let mut ledger = RadioLedger::default();
    let out = mac.send(Instant::ZERO, 0, 1, &udp(0, 1, vec![0u8; 10]), &mut rng, &mut ledger);
    assert_eq!(out.delivered_at, None);
    assert!(out.frames.iter().all(|f| f.kind == FrameKind::Strobe && !f.received));
    let span = out.frames.last().unwrap().end - out.frames[0].start;
    assert!(span.as_nanos() as u64 <= 300_000_000 + 2 * STROBE_PERIOD_NS, "strobing bounded by max_strobe");
    assert!(span.as_nanos() as u64 >= 300_000_000, "strobing covers three check intervals");
}

#[test]
fn phase_lock_shortens_strobe_trains_but_not_the_wait() {
    let runs = 400;
    let (mut strobes_plain, mut strobes_locked, mut wait_plain, mut wait_locked) = (0, 0, 0.0, 0.0);
    for seed in 0..runs {
        for lock in [false, true] {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let cfg = XMacConfig { phase_lock: lock, ..config(500.0, 1.0) };
            let mut mac = XMac::new(&cfg, &[0, 1], &mut rng).unwrap();
            let mut ledger = RadioLedger::default();
            // The first exchange teaches node 0 when node 1 wakes.
            let first = mac.send(Instant::ZERO, 0, 1, &udp(0, 1, vec![0u8; 40]), &mut rng, &mut ledger);
            let t =
                first.delivered_at.unwrap() + std::time::Duration::from_nanos(rng.next_u64() % 500_000_000);
            let second = mac.send(t, 0, 1, &udp(0, 1, vec![0u8; 40]), &mut rng, &mut ledger);
            let strobes = second.frames.iter().filter(|f| f.kind == FrameKind::Strobe).count();
            let wait = (second.delivered_at.unwrap() - t).as_secs_f64();
            if lock {
                strobes_locked += strobes;
                wait_locked += wait;
            } else {
                strobes_plain += strobes;
                wait_plain += wait;
            }
        }
    }
    let per = |n: usize| n as f64 / runs as f64;
    assert!(per(strobes_locked) <= 2.0, "locked trains: {} strobes", per(strobes_locked));
    assert!(per(strobes_plain) > 50.0, "plain trains cover CI/2 on average: {}", per(strobes_plain));
    let (wp, wl) = (wait_plain / runs as f64, wait_locked / runs as f64);
    assert!((wp - wl).abs() < 0.01, "same wait for the wake-up: {wp} vs {wl}");
}

#[test]
fn lost_datagrams_are_resent_after_the_timeout() {
    let mut resent = 0;
    for seed in 0..200 {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut mac = XMac::new(&config(125.0, 0.8), &[0, 1], &mut rng).unwrap();
        let plan = SequencePlan::flights(vec![0, 1], 10, 60).resent_after(2_000_000_000);
        let r = send_sequence(&mut mac, &plan, Instant::ZERO, &mut rng, &mut RadioLedger::default());
        assert_eq!(r.delivered + r.lost, 10);
        assert!(r.latency.as_secs_f64() >= 2.0 * r.retransmissions as f64, "each resend waits the timeout");
        resent += r.retransmissions;
    }
    // About one datagram in five is lost per try (data frame, or strobing gives up).
    let per_datagram = resent as f64 / 2000.0;
    assert!((0.2..0.35).contains(&per_datagram), "resent per datagram {per_datagram}");
}

/// A UDP datagram between neighbours `from` and `to` (link-local, port 5684) with `payload`.
fn udp(from: usize, to: usize, payload: Vec<u8>) -> fastshake_sim::mac::sixlowpan::UdpDatagram {
    fastshake_sim::mac::sixlowpan::UdpDatagram::between(from, to, 1, 5684, payload)
}
