//! Any valid configuration and any sequence of sends: no panic, causality, frame sizes, and the
//! radio books add up.

use fastshake_core::Instant;
use fastshake_sim::mac::phy::MAX_PSDU;
use fastshake_sim::mac::{build, BeaconConfig, CellPlacement, MacConfig, TschConfig, XMacConfig, HORIZON_NS};
use fastshake_sim::radio::RadioLedger;
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn any_config() -> impl Strategy<Value = MacConfig> {
    let pdr = prop_oneof![Just(1.0), Just(0.0), 0.0f64..=1.0];
    prop_oneof![
        (5.0f64..2000.0, pdr.clone(), any::<bool>()).prop_map(|(ci, pdr, phase_lock)| {
            MacConfig::XMac(XMacConfig { check_interval_ms: ci, pdr, max_strobe_ms: None, phase_lock })
        }),
        (0u8..=8, 0u8..=8, pdr.clone(), pdr.clone(), 0u8..=7, 0u8..=5, 0u8..=3).prop_map(
            |(bo, so, pdr, ack_pdr, retries, backoffs, min_be)| {
                MacConfig::Beacon(BeaconConfig {
                    beacon_order: bo.max(so),
                    superframe_order: so,
                    pdr,
                    ack_pdr,
                    max_frame_retries: retries,
                    max_csma_backoffs: backoffs,
                    min_be,
                    max_be: 5,
                })
            }
        ),
        (1u32..300, 1u32..8, pdr.clone(), pdr, 0u8..=7, any::<bool>()).prop_map(
            |(l, c, pdr, ack_pdr, retries, even)| {
                MacConfig::Tsch(TschConfig {
                    slotframe: l,
                    cells_per_link: c.min(l),
                    timeslot_ms: 10.0,
                    pdr,
                    ack_pdr,
                    max_frame_retries: retries,
                    placement: if even { CellPlacement::Even } else { CellPlacement::Random },
                    cells: Vec::new(),
                })
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn sends_never_panic_and_stay_causal(
        config in any_config(),
        seed in any::<u64>(),
        sends in proptest::collection::vec((0u64..5_000_000_000, 0usize..4, 0usize..4, 0usize..2100), 1..12),
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut mac = build(&config, &[0, 1, 2], &[(0, 1), (1, 2)], &mut rng).unwrap();
        let mut ledger = RadioLedger::default();
        let mut now = 0u64;
        let mut last = Instant::ZERO;
        for (gap, from, to, len) in sends {
            now += gap;
            let t = Instant::from_nanos(now);
            let out = mac.send(t, from, to, &udp(from, to, vec![0xAB; len]), &mut rng, &mut ledger);
            // 6LoWPAN's 11-bit datagram_size counts the uncompressed IPv6 datagram: 48 header
            // bytes and at most 1999 of payload.
            if len > fastshake_sim::mac::sixlowpan::MAX_PAYLOAD {
                prop_assert!(out.delivered_at.is_none() && out.frames.is_empty());
            }
            if let Some(d) = out.delivered_at {
                prop_assert!(d > t);
            }
            for f in &out.frames {
                prop_assert!(f.start >= t && f.end > f.start);
                prop_assert!(f.bytes.len() <= MAX_PSDU);
                last = last.max(f.end);
            }
        }
        let end = last.max(Instant::from_nanos(now)) + std::time::Duration::from_secs(1);
        mac.account_idle(Instant::ZERO, end, &mut ledger);
        for n in ledger.nodes() {
            prop_assert_eq!(ledger.usage(n, end).total(), end - Instant::ZERO);
        }
        // Past the horizon nothing is carried, and nothing panics.
        let out = mac.send(Instant::from_nanos(HORIZON_NS), 0, 1, &udp(0, 1, vec![1; 10]), &mut rng, &mut ledger);
        prop_assert!(out.delivered_at.is_none());
    }
}

#[test]
fn out_of_range_configs_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    let tsch = |l, c, slot| {
        MacConfig::Tsch(TschConfig {
            slotframe: l,
            cells_per_link: c,
            timeslot_ms: slot,
            pdr: 1.0,
            ack_pdr: 1.0,
            max_frame_retries: 3,
            placement: CellPlacement::Random,
            cells: Vec::new(),
        })
    };
    for bad in [
        tsch(0, 1, 10.0),
        tsch(70_000, 1, 10.0),
        tsch(10, 11, 10.0),
        tsch(10, 0, 10.0),
        tsch(10, 1, 5.0),
        tsch(10, 1, f64::NAN),
    ] {
        assert!(build(&bad, &[0, 1], &[(0, 1)], &mut rng).is_err(), "{bad:?}");
    }
    for ci in [0.0, -1.0, 2.0, f64::INFINITY, 4e6] {
        let bad = MacConfig::XMac(XMacConfig {
            check_interval_ms: ci,
            pdr: 1.0,
            max_strobe_ms: None,
            phase_lock: false,
        });
        assert!(build(&bad, &[0, 1], &[(0, 1)], &mut rng).is_err(), "CI {ci}");
    }
    let toml_err =
        toml::from_str::<MacConfig>("kind = \"tsch\"\nslotframe = 101\ncells_per_link = 1\nbogus = 1\n");
    assert!(toml_err.is_err(), "unknown fields are reported");
    let ok: MacConfig = toml::from_str("kind = \"xmac\"\ncheck_interval_ms = 125\n").unwrap();
    assert_eq!(
        ok,
        MacConfig::XMac(XMacConfig {
            check_interval_ms: 125.0,
            pdr: 1.0,
            max_strobe_ms: None,
            phase_lock: false
        })
    );
}

proptest! {
    #[test]
    fn reassembly_of_arbitrary_frames_never_panics(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..140), 0..5),
    ) {
        let mut reassembler = fastshake_sim::mac::sixlowpan::Reassembler::new();
        for f in &frames {
            let _ = reassembler.push(f);
        }
        prop_assert!(reassembler.pending() <= fastshake_sim::mac::sixlowpan::MAX_PARTIAL);
    }

    #[test]
    fn fragments_round_trip(
        len in 0usize..=fastshake_sim::mac::sixlowpan::MAX_PAYLOAD,
        from in 0usize..1000,
        to in 0usize..1000,
        hops in 1usize..4,
        ports in any::<(u16, u16)>(),
        hop_limit in any::<u8>(),
        tag in any::<u16>(),
    ) {
        use fastshake_sim::mac::sixlowpan::{Reassembler, UdpDatagram};
        let mut d = UdpDatagram::between(from, to, hops, ports.0, (0..len).map(|i| (i * 7) as u8).collect());
        d.dst.set_port(ports.1);
        d.hop_limit = hop_limit;
        let (frames, stats) = fastshake_sim::mac::frag::fragment(&d, from, to, 0, tag, false).unwrap();
        prop_assert!(frames.iter().all(|f| f.len() <= MAX_PSDU));
        prop_assert_eq!(stats.frames, frames.len());
        prop_assert_eq!(stats.psdu_bytes, stats.payload_bytes + stats.lowpan_header_bytes + stats.mac_overhead_bytes);
        let mut reassembler = Reassembler::new();
        let mut got = None;
        for f in &frames {
            got = reassembler.push(f).unwrap();
        }
        prop_assert_eq!(got.map(|r| r.datagram), Some(d));
    }
}

/// A UDP datagram between neighbours `from` and `to` (link-local, port 5684) with `payload`.
fn udp(from: usize, to: usize, payload: Vec<u8>) -> fastshake_sim::mac::sixlowpan::UdpDatagram {
    fastshake_sim::mac::sixlowpan::UdpDatagram::between(from, to, 1, 5684, payload)
}
