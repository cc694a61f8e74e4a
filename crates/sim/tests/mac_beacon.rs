//! IEEE 802.15.4 beacon-enabled mode: frames only inside the CAP, ACKs and retries, CCA.

use fastshake_core::Instant;
use fastshake_sim::mac::beacon::BeaconMac;
use fastshake_sim::mac::{BeaconConfig, FrameKind, MacModel};
use fastshake_sim::radio::RadioLedger;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn config(bo: u8, so: u8, pdr: f64) -> BeaconConfig {
    BeaconConfig {
        beacon_order: bo,
        superframe_order: so,
        pdr,
        ack_pdr: 1.0,
        max_frame_retries: 3,
        max_csma_backoffs: 4,
        min_be: 3,
        max_be: 5,
    }
}

#[test]
fn every_frame_is_on_the_air_inside_a_cap() {
    // SO = 0: a 15.36 ms CAP holds about two full-size frames with their ACKs, so a 1000-byte
    // datagram (11 fragments) must spread over several superframes.
    let mut checked = 0;
    for seed in 0..200u64 {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut mac = BeaconMac::new(&config(4, 0, 1.0), &[0, 1, 2], &[(0, 1), (1, 2)], &mut rng).unwrap();
        let mut ledger = RadioLedger::default();
        let mut t = Instant::from_nanos(rng.next_u64() % 1_000_000_000);
        for (from, to) in [(2, 1), (1, 0), (0, 1), (1, 2)] {
            let out = mac.send(t, from, to, &udp(from, to, vec![7u8; 1000]), &mut rng, &mut ledger);
            // FRAG1 (88 payload bytes behind 9 of headers), 9 FRAGNs of 96, one of 48.
            assert_eq!(out.fragments.frames, 11);
            let coord = mac.coordinator_of(from, to).unwrap();
            assert_eq!(coord, from.min(to), "the first of each listed pair coordinates");
            for f in &out.frames {
                let (start, end) = mac.cap_after(coord, f.start.as_nanos()).unwrap();
                assert!(
                    f.start.as_nanos() >= start && f.end.as_nanos() <= end,
                    "{:?} frame {:?}..{:?} outside CAP {start}..{end}",
                    f.kind,
                    f.start,
                    f.end
                );
                checked += 1;
            }
            let done = out.delivered_at.expect("PDR 1 delivers");
            assert!(done > t);
            let superframes = (done - t).as_nanos() as u64 / mac.beacon_interval_ns();
            assert!(superframes >= 4, "11 frames need several CAPs, took {superframes} BIs");
            t = done;
        }
    }
    assert!(checked > 10_000);
}

#[test]
fn lost_frames_are_retried_after_the_ack_timeout() {
    let mut delivered = 0;
    let mut attempts = 0;
    let runs = 2000;
    for seed in 0..runs {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut mac = BeaconMac::new(&config(6, 2, 0.6), &[0, 1], &[(0, 1)], &mut rng).unwrap();
        let out =
            mac.send(Instant::ZERO, 1, 0, &udp(1, 0, vec![1u8; 50]), &mut rng, &mut RadioLedger::default());
        let data: Vec<_> = out.frames.iter().filter(|f| f.kind == FrameKind::Data).collect();
        attempts += data.len();
        assert!(data.len() <= 4, "first try and at most macMaxFrameRetries = 3 retries");
        if out.delivered_at.is_some() {
            delivered += 1;
            assert!(data.last().unwrap().received);
        } else {
            assert_eq!(data.len(), 4);
            assert!(data.iter().all(|f| !f.received));
        }
        for w in data.windows(2) {
            assert!(w[1].start.as_nanos() >= w[0].end.as_nanos() + 864_000, "retry after macAckWaitDuration");
        }
    }
    // Lost for good only if 4 tries fail: 0.4^4 = 2.6 %.
    let loss = 1.0 - delivered as f64 / runs as f64;
    assert!((loss - 0.0256).abs() < 0.012, "loss {loss}");
    let per_datagram = attempts as f64 / runs as f64;
    let expected = (1.0 - 0.4f64.powi(4)) / 0.6; // truncated geometric mean
    assert!((per_datagram - expected).abs() < 0.08, "tries per datagram {per_datagram} vs {expected}");
}

#[test]
fn clear_channel_assessment_defers_to_frames_already_on_the_air() {
    for seed in 0..200 {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut mac = BeaconMac::new(&config(5, 3, 1.0), &[0, 1, 2], &[(0, 1), (0, 2)], &mut rng).unwrap();
        let mut ledger = RadioLedger::default();
        let a = mac.send(Instant::ZERO, 1, 0, &udp(1, 0, vec![1u8; 300]), &mut rng, &mut ledger);
        let b = mac.send(Instant::ZERO, 2, 0, &udp(2, 0, vec![2u8; 300]), &mut rng, &mut ledger);
        assert!(a.delivered_at.is_some());
        for fa in &a.frames {
            for fb in b.frames.iter().filter(|f| f.kind == FrameKind::Data) {
                assert!(fb.start >= fa.end || fb.end <= fa.start, "seed {seed}: data frame collides");
            }
        }
    }
}

#[test]
fn invalid_orders_are_rejected() {
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    assert!(BeaconMac::new(&config(3, 4, 1.0), &[0], &[], &mut rng).is_err());
    assert!(BeaconMac::new(&config(15, 4, 1.0), &[0], &[], &mut rng).is_err());
    assert!(BeaconMac::new(&config(6, 2, 1.5), &[0], &[], &mut rng).is_err());
}

/// A UDP datagram between neighbours `from` and `to` (link-local, port 5684) with `payload`.
fn udp(from: usize, to: usize, payload: Vec<u8>) -> fastshake_sim::mac::sixlowpan::UdpDatagram {
    fastshake_sim::mac::sixlowpan::UdpDatagram::between(from, to, 1, 5684, payload)
}
