//! Radio accounting: per node, tx + rx + listen + sleep equals the time observed; tx equals the
//! air time of the frames the node sent; idle listening matches each MAC's schedule; same seed,
//! same outcome.

use fastshake_core::Instant;
use fastshake_sim::mac::frag::BEACON_PSDU;
use fastshake_sim::mac::phy::{airtime_ns, BASE_SUPERFRAME_NS};
use fastshake_sim::mac::sequence::{send_sequence, SequencePlan};
use fastshake_sim::mac::tsch::{TschMac, RX_WAIT_NS};
use fastshake_sim::mac::xmac::{XMac, CHECK_WINDOW_NS};
use fastshake_sim::mac::{
    build, BeaconConfig, CellPlacement, FrameOnAir, MacConfig, MacModel, TschConfig, XMacConfig,
};
use fastshake_sim::radio::{PowerProfile, RadioLedger};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::time::Duration;

fn configs() -> Vec<MacConfig> {
    vec![
        MacConfig::XMac(XMacConfig {
            check_interval_ms: 125.0,
            pdr: 0.9,
            max_strobe_ms: None,
            phase_lock: false,
        }),
        MacConfig::Beacon(BeaconConfig {
            beacon_order: 6,
            superframe_order: 2,
            pdr: 0.9,
            ack_pdr: 0.95,
            max_frame_retries: 3,
            max_csma_backoffs: 4,
            min_be: 3,
            max_be: 5,
        }),
        MacConfig::Tsch(TschConfig {
            slotframe: 101,
            cells_per_link: 2,
            timeslot_ms: 10.0,
            pdr: 0.9,
            ack_pdr: 0.95,
            max_frame_retries: 3,
            placement: CellPlacement::Random,
            cells: Vec::new(),
        }),
    ]
}

/// Runs a 3-hop exchange of 10 datagrams (some fragmented) and returns the frames on the air,
/// the ledger after idle accounting and the end of the observation.
fn run(config: &MacConfig, seed: u64) -> (Vec<FrameOnAir>, RadioLedger, Instant) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let chain = vec![0, 1, 2, 3];
    let links = [(3, 2), (2, 1), (1, 0)];
    let mut mac = build(config, &chain, &links, &mut rng).unwrap();
    let mut ledger = RadioLedger::new(PowerProfile::cc2520());
    let mut frames = Vec::new();
    let mut t = Instant::from_millis(50);
    for i in 0..10usize {
        let (from, to) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
        let hops: Vec<(usize, usize)> =
            if from == 0 { vec![(0, 1), (1, 2), (2, 3)] } else { vec![(3, 2), (2, 1), (1, 0)] };
        let _ = to;
        let len = if i % 3 == 0 { 250 } else { 90 };
        for (a, b) in hops {
            let out = mac.send(t, a, b, &udp(a, b, vec![i as u8; len]), &mut rng, &mut ledger);
            t = out.frames.iter().map(|f| f.end).max().unwrap_or(t).max(out.delivered_at.unwrap_or(t));
            frames.extend(out.frames);
            if out.delivered_at.is_none() {
                break;
            }
        }
    }
    let end = t + Duration::from_secs(2);
    mac.account_idle(Instant::ZERO, end, &mut ledger);
    (frames, ledger, end)
}

#[test]
fn times_add_up_and_tx_is_the_air_time_sent() {
    for config in configs() {
        for seed in 0..20 {
            let (frames, ledger, end) = run(&config, seed);
            assert_eq!(ledger.nodes().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
            for node in 0..4 {
                let u = ledger.usage(node, end);
                assert_eq!(
                    u.total(),
                    end - Instant::ZERO,
                    "{config:?} node {node}: tx+rx+listen+sleep = elapsed"
                );
                let sent: u64 = frames
                    .iter()
                    .filter(|f| f.from == node)
                    .map(|f| (f.end - f.start).as_nanos() as u64)
                    .sum();
                let tx = u.tx.as_nanos() as u64;
                match &config {
                    MacConfig::Beacon(b) if node > 0 => {
                        // Coordinators 1, 2, 3 also send a beacon every BI (phase in 0..BI).
                        let bi = BASE_SUPERFRAME_NS << b.beacon_order;
                        let beacons = end.as_nanos().div_ceil(bi);
                        let air = airtime_ns(BEACON_PSDU);
                        assert!(tx <= sent + beacons * air, "{config:?} node {node}: beacons");
                        assert!(tx >= sent + (beacons - 1) * air, "{config:?} node {node}: beacons");
                    }
                    _ => assert_eq!(tx, sent, "{config:?} node {node}: tx time = air time sent"),
                }
                assert!(u.rx > Duration::ZERO && u.listen > Duration::ZERO && u.sleep > u.listen);
                let p = ledger.profile();
                let energy = p.supply_v
                    * (p.tx_ma * u.tx.as_secs_f64()
                        + p.rx_ma * u.rx.as_secs_f64()
                        + p.listen_ma * u.listen.as_secs_f64()
                        + p.sleep_ma * u.sleep.as_secs_f64());
                assert!((u.energy_mj - energy).abs() < 1e-9);
            }
        }
    }
}

#[test]
fn same_seed_same_frames_and_energy() {
    for config in configs() {
        let (a, la, ea) = run(&config, 42);
        let (b, lb, eb) = run(&config, 42);
        assert_eq!(a, b);
        assert_eq!(ea, eb);
        for n in 0..4 {
            assert_eq!(la.usage(n, ea), lb.usage(n, eb));
        }
        let (c, _, _) = run(&config, 43);
        assert_ne!(a, c, "another seed, other phases");
    }
}

#[test]
fn idle_listening_follows_the_schedule() {
    // X-MAC: an idle node listens one check window per check interval.
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let cfg = XMacConfig { check_interval_ms: 100.0, pdr: 1.0, max_strobe_ms: None, phase_lock: false };
    let mut mac = XMac::new(&cfg, &[0], &mut rng).unwrap();
    let mut ledger = RadioLedger::default();
    let end = Instant::from_millis(10_000);
    mac.account_idle(Instant::ZERO, end, &mut ledger);
    let u = ledger.usage(0, end);
    let phase = mac.phase_ns(0).unwrap();
    let checks = (10_000_000_000 - phase).div_ceil(100_000_000);
    assert!(checks == 100 || checks == 99);
    let expected = checks * CHECK_WINDOW_NS;
    // The last window may be cut at the end of the observation.
    assert!(
        u.listen.as_nanos() as u64 <= expected && u.listen.as_nanos() as u64 + CHECK_WINDOW_NS >= expected
    );
    assert_eq!(u.tx + u.rx, Duration::ZERO);

    // TSCH: a receiver listens TsRxWait in each of its idle cells.
    let cfg = TschConfig {
        slotframe: 50,
        cells_per_link: 3,
        timeslot_ms: 10.0,
        pdr: 1.0,
        ack_pdr: 1.0,
        max_frame_retries: 3,
        placement: CellPlacement::Even,
        cells: Vec::new(),
    };
    let mut mac = TschMac::new(&cfg, &[0, 1], &[(0, 1)], &mut rng).unwrap();
    let mut ledger = RadioLedger::default();
    let end = Instant::from_millis(100 * 500); // 100 slotframes
    mac.account_idle(Instant::ZERO, end, &mut ledger);
    for node in [0, 1] {
        assert_eq!(ledger.usage(node, end).listen.as_nanos() as u64, 100 * 3 * RX_WAIT_NS);
    }

    // A short exchange on top does not double count: radio-on time grows by less than the
    // exchange's own bookings.
    let plan = SequencePlan::flights(vec![0, 1], 2, 50);
    let mut ledger2 = RadioLedger::default();
    let _ = send_sequence(&mut mac, &plan, Instant::ZERO, &mut rng, &mut ledger2);
    mac.account_idle(Instant::ZERO, end, &mut ledger2);
    for node in [0, 1] {
        let idle = ledger.usage(node, end);
        let busy = ledger2.usage(node, end);
        assert!(busy.tx > Duration::ZERO);
        let on_idle = idle.listen;
        let on_busy = busy.tx + busy.rx + busy.listen;
        assert!(on_busy > on_idle - Duration::from_nanos(2 * RX_WAIT_NS));
        assert!(on_busy < on_idle + Duration::from_millis(20), "two frames and acks add little radio time");
    }
}

#[test]
fn idle_accounting_in_chunks_equals_one_call() {
    for config in configs() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut mac = build(&config, &[0, 1, 2], &[(1, 0), (1, 2)], &mut rng).unwrap();
        let end = Instant::from_millis(7_777);
        let mut whole = RadioLedger::default();
        mac.account_idle(Instant::ZERO, end, &mut whole);
        let mut chunked = RadioLedger::default();
        let mut t = Instant::ZERO;
        let mut step = 1u64;
        while t < end {
            // Irregular chunks that cut through check windows, CAPs and timeslots.
            let next = (t + Duration::from_micros(step * 3_001)).min(end);
            mac.account_idle(t, next, &mut chunked);
            t = next;
            step = step * 7 % 1_000 + 1;
        }
        for n in 0..3 {
            assert_eq!(whole.usage(n, end), chunked.usage(n, end), "{config:?} node {n}");
            assert!(whole.usage(n, end).listen > Duration::ZERO);
        }
    }
}

/// A UDP datagram between neighbours `from` and `to` (link-local, port 5684) with `payload`.
fn udp(from: usize, to: usize, payload: Vec<u8>) -> fastshake_sim::mac::sixlowpan::UdpDatagram {
    fastshake_sim::mac::sixlowpan::UdpDatagram::between(from, to, 1, 5684, payload)
}
