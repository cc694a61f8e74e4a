//! Link model: delay, rate, jitter, MTU, loss models, duplication, reordering, multi-hop delay.

mod common;

use common::*;
use fastshake_core::Instant;
use fastshake_sim::dist::Jitter;
use fastshake_sim::link::{serialisation_ns, LinkConfig, LinkCounters, LossModel, Oversize};
use fastshake_sim::{Role, Simulator};

/// sender 10.0.0.1 —link— receiver 10.0.0.2; the sender sends `n` datagrams of `payload`
/// bytes every `gap_ns` from t = 0.
fn one_link(config: LinkConfig, n: u64, gap_ns: u64, payload: usize, seed: u64) -> (Simulator, SharedLog) {
    let mut sim = Simulator::new(seed);
    let s = sim.add_node("s", Role::Host);
    let r = sim.add_node("r", Role::Host);
    let s0 = sim.add_interface(s, "eth0", "10.0.0.1".parse().unwrap()).unwrap();
    let r0 = sim.add_interface(r, "eth0", "10.0.0.2".parse().unwrap()).unwrap();
    sim.connect("l", s0, r0, config).unwrap();
    let plan = (0..n)
        .map(|i| {
            let mut p = vec![0u8; payload.max(8)];
            p[..8].copy_from_slice(&i.to_be_bytes());
            (i * gap_ns, fastshake_core::Transmit { src: None, dst: addr("10.0.0.2:9"), payload: p })
        })
        .collect();
    let (app, _) = Scripted::new(plan);
    sim.add_app(s, "s", 9, app).unwrap();
    let (app, log) = Scripted::sink();
    sim.add_app(r, "r", 9, app).unwrap();
    sim.run_to_completion(Instant::from_millis(10_000_000));
    (sim, log)
}

fn forward(sim: &Simulator) -> LinkCounters {
    sim.link_counters(0)[0]
}

#[test]
fn delay_plus_serialisation_is_exact() {
    let config = LinkConfig { delay_ms: 10.0, rate_bps: Some(1_000_000), ..LinkConfig::default() };
    let (_, log) = one_link(config, 2, 0, 97, 1);
    let log = log.borrow();
    // 97 + 28 = 125 bytes = 1000 bits = 1 ms at 1 Mbit/s.
    assert_eq!(serialisation_ns(125, 1_000_000), MS);
    assert_eq!(log.received[0].at, MS + 10 * MS);
    // Sent at the same instant: the second waits in the FIFO behind the first.
    assert_eq!(log.received[1].at, 2 * MS + 10 * MS);
}

#[test]
fn queue_limit_drops_at_the_tail() {
    let config = LinkConfig { rate_bps: Some(1_000_000), queue_packets: Some(3), ..LinkConfig::default() };
    let (sim, log) = one_link(config, 5, 0, 97, 1);
    assert_eq!(log.borrow().received.len(), 3);
    assert_eq!(forward(&sim).dropped_queue, 2);
}

#[test]
fn uniform_jitter_stays_in_range_with_the_right_mean() {
    let jitter = Jitter::Uniform { min_ms: 0.0, max_ms: 4.0 };
    let config = LinkConfig { delay_ms: 5.0, jitter, ..LinkConfig::default() };
    let n = 4000;
    let (_, log) = one_link(config, n, 10 * MS, 16, 7);
    let log = log.borrow();
    assert_eq!(log.received.len() as u64, n);
    let mut sum = 0.0;
    for r in &log.received {
        let seq = u64::from_be_bytes(r.payload[..8].try_into().unwrap());
        let delay = r.at - seq * 10 * MS;
        assert!((5 * MS..=9 * MS).contains(&delay), "delay {delay} outside [5, 9] ms");
        sum += delay as f64;
    }
    let mean_ms = sum / n as f64 / 1e6;
    // Mean 7 ms; standard error of the mean 4/sqrt(12)/sqrt(4000) ≈ 0.018 ms.
    assert!((mean_ms - 7.0).abs() < 0.1, "mean delay {mean_ms} ms");
}

#[test]
fn exponential_jitter_mean_and_clip() {
    let jitter = Jitter::Exponential { mean_ms: 2.0, max_ms: Some(20.0) };
    let config = LinkConfig { delay_ms: 1.0, jitter, ..LinkConfig::default() };
    let n = 4000;
    let (_, log) = one_link(config, n, 50 * MS, 16, 3);
    let log = log.borrow();
    let mut sum = 0.0;
    for r in &log.received {
        let seq = u64::from_be_bytes(r.payload[..8].try_into().unwrap());
        let extra = r.at - seq * 50 * MS - MS;
        assert!(extra <= 20 * MS);
        sum += extra as f64;
    }
    let mean_ms = sum / n as f64 / 1e6;
    // Standard error 2/sqrt(4000) ≈ 0.032 ms; clipping at 10 means removes ~1e-4 of the mass.
    assert!((mean_ms - 2.0).abs() < 0.15, "mean jitter {mean_ms} ms");
}

#[test]
fn bernoulli_loss_rate_within_tolerance() {
    let p = 0.1;
    let n = 20_000;
    let config = LinkConfig { loss: LossModel::Bernoulli { p }, ..LinkConfig::default() };
    let (sim, log) = one_link(config, n, MS, 16, 11);
    let lost = forward(&sim).dropped_loss;
    assert_eq!(lost + log.borrow().received.len() as u64, n);
    let rate = lost as f64 / n as f64;
    let sigma = (p * (1.0 - p) / n as f64).sqrt();
    assert!((rate - p).abs() < 4.0 * sigma, "loss rate {rate}, expected {p} ± {}", 4.0 * sigma);
}

#[test]
fn gilbert_elliott_stationary_loss_and_bursts() {
    let model = LossModel::GilbertElliott { p_gb: 0.02, p_bg: 0.2, loss_good: 0.0, loss_bad: 1.0 };
    let expected = model.stationary_loss(); // 0.02 / 0.22 ≈ 0.0909
    let n = 50_000u64;
    let config = LinkConfig { loss: model, ..LinkConfig::default() };
    let (sim, log) = one_link(config, n, MS, 16, 5);
    let lost = forward(&sim).dropped_loss;
    let rate = lost as f64 / n as f64;
    // Bursts make the variance larger than binomial: variance inflation
    // (1 + λ)/(1 − λ) with λ = 1 − p_gb − p_bg = 0.78, about 8.1.
    let sigma = (expected * (1.0 - expected) / n as f64 * 8.1).sqrt();
    assert!((rate - expected).abs() < 4.0 * sigma, "loss rate {rate}, expected {expected}");
    // Mean burst length of losses: 1 / p_bg = 5 datagrams.
    let mut got = vec![false; n as usize];
    for r in &log.borrow().received {
        got[u64::from_be_bytes(r.payload[..8].try_into().unwrap()) as usize] = true;
    }
    let bursts = got.windows(2).filter(|w| w[0] && !w[1]).count() + usize::from(!got[0]);
    let mean_burst = lost as f64 / bursts as f64;
    assert!((mean_burst - 5.0).abs() < 0.5, "mean loss burst {mean_burst}");
}

#[test]
fn mtu_drops_or_fragments() {
    let drop = LinkConfig { mtu: Some(100), ..LinkConfig::default() };
    let (sim, log) = one_link(drop, 1, 0, 200, 1);
    assert!(log.borrow().received.is_empty());
    assert_eq!(forward(&sim).dropped_mtu, 1);

    let frag = LinkConfig {
        mtu: Some(100),
        oversize: Oversize::Fragment,
        frame_header: 10,
        rate_bps: Some(8_000_000), // 1 byte per µs
        ..LinkConfig::default()
    };
    let (sim, log) = one_link(frag, 1, 0, 200, 1);
    let c = forward(&sim);
    assert_eq!(log.borrow().received.len(), 1);
    assert_eq!((c.payload_bytes, c.ip_bytes), (200, 228));
    assert_eq!(c.frames, 3, "228 IP bytes in frames of 100");
    assert_eq!(c.frame_bytes, 228 + 3 * 10);
    assert_eq!(log.borrow().received[0].at, 258 * 1_000, "all frames serialised before arrival");
}

#[test]
fn duplication_and_reordering() {
    let dup = LinkConfig { duplicate: 1.0, ..LinkConfig::default() };
    let (sim, log) = one_link(dup, 10, MS, 16, 1);
    assert_eq!(log.borrow().received.len(), 20);
    assert_eq!(forward(&sim).duplicated, 10);

    // Every other datagram held back 1.5 gaps: later ones overtake it.
    let reorder = LinkConfig { reorder: 0.5, reorder_delay_ms: 1.5, ..LinkConfig::default() };
    let (sim, log) = one_link(reorder, 200, MS, 16, 2);
    let seqs: Vec<u64> = log
        .borrow()
        .received
        .iter()
        .map(|r| u64::from_be_bytes(r.payload[..8].try_into().unwrap()))
        .collect();
    assert_eq!(seqs.len(), 200);
    let inversions = seqs.windows(2).filter(|w| w[0] > w[1]).count();
    let held = forward(&sim).reordered;
    assert!(held > 50 && held < 150, "held back {held} of 200");
    assert!(inversions > 0, "some datagram must arrive out of order");
}

#[test]
fn multi_hop_delay_adds_up() {
    // client — r1 — r2 — r3 — server, every link 7 ms and 1 Mbit/s; TTL goes down per router.
    for hops in 1..=4usize {
        let mut sim = Simulator::new(1);
        let mut prev = sim.add_node("client", Role::Host);
        let mut prev_if = sim.add_interface(prev, "eth0", "10.0.0.1".parse().unwrap()).unwrap();
        for h in 0..hops {
            let last = h + 1 == hops;
            let node = sim.add_node(&format!("n{h}"), if last { Role::Host } else { Role::Router });
            let a = sim.add_interface(node, "up", format!("10.0.{}.2", h).parse().unwrap()).unwrap();
            sim.connect(
                &format!("l{h}"),
                prev_if,
                a,
                LinkConfig { delay_ms: 7.0, rate_bps: Some(1_000_000), ..LinkConfig::default() },
            )
            .unwrap();
            if !last {
                prev_if =
                    sim.add_interface(node, "down", format!("10.0.{}.1", h + 1).parse().unwrap()).unwrap();
            }
            prev = node;
        }
        let server_addr = format!("10.0.{}.2:9", hops - 1);
        let (app, _) = Scripted::new(vec![(0, tx(None, &server_addr, &[0u8; 97]))]);
        sim.add_app(sim.node("client").unwrap(), "c", 9, app).unwrap();
        let (app, log) = Scripted::sink();
        sim.add_app(prev, "s", 9, app).unwrap();
        sim.run_to_completion(Instant::from_millis(1_000));
        let log = log.borrow();
        assert_eq!(log.received.len(), 1, "{hops} hops");
        // Store-and-forward: each hop adds 1 ms serialisation (125 bytes) and 7 ms delay.
        assert_eq!(log.received[0].at, hops as u64 * 8 * MS, "{hops} hops");
    }
}

#[test]
fn normal_jitter_is_clipped_with_the_right_mean() {
    let jitter = Jitter::Normal { mean_ms: 5.0, sd_ms: 1.0, max_ms: Some(8.0) };
    let config = LinkConfig { jitter, ..LinkConfig::default() };
    let n = 4000;
    let (_, log) = one_link(config, n, 20 * MS, 16, 21);
    let log = log.borrow();
    let mut sum = 0.0;
    for r in &log.received {
        let seq = u64::from_be_bytes(r.payload[..8].try_into().unwrap());
        let extra = r.at - seq * 20 * MS;
        assert!(extra <= 8 * MS, "clipped at 8 ms");
        sum += extra as f64;
    }
    let mean_ms = sum / n as f64 / 1e6;
    // Standard error 1/sqrt(4000) ≈ 0.016 ms; the clip at 3 sd moves the mean by ~0.004 ms.
    assert!((mean_ms - 5.0).abs() < 0.08, "mean jitter {mean_ms} ms");
}
