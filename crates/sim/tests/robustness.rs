//! Careless or hostile parameters never panic the simulator; counters add up; running in
//! chunks gives the same run as running at once.

mod common;

use common::*;
use fastshake_core::{Instant, Transmit};
use fastshake_sim::dist::Jitter;
use fastshake_sim::link::{LinkConfig, LossModel, Oversize};
use fastshake_sim::scenario::ScenarioFile;
use fastshake_sim::{Role, Simulator};
use proptest::prelude::*;

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-1.0),
        0.0..2.0f64,
        0.0..1e3f64,
        Just(1e300),
    ]
}

fn any_link() -> impl Strategy<Value = LinkConfig> {
    (
        (any_f64(), any_f64(), any_f64(), 0u8..4),
        (proptest::option::of(0u64..10_000_000_000), proptest::option::of(0usize..5)),
        (proptest::option::of(0usize..2000), any::<bool>(), 0usize..100),
        (any_f64(), any_f64(), any_f64(), any_f64()),
    )
        .prop_map(
            |((delay, a, b, jitter_kind), (rate, queue), (mtu, frag, header), (p, q, dup, reorder))| {
                LinkConfig {
                    delay_ms: delay,
                    jitter: match jitter_kind {
                        0 => Jitter::None,
                        1 => Jitter::Uniform { min_ms: a, max_ms: b },
                        2 => Jitter::Normal { mean_ms: a, sd_ms: b, max_ms: Some(b) },
                        _ => Jitter::Exponential { mean_ms: a, max_ms: None },
                    },
                    rate_bps: rate,
                    queue_packets: queue,
                    mtu,
                    oversize: if frag { Oversize::Fragment } else { Oversize::Drop },
                    frame_header: header,
                    loss: if p.is_nan() {
                        LossModel::Bernoulli { p: q }
                    } else {
                        LossModel::GilbertElliott { p_gb: p, p_bg: q, loss_good: dup, loss_bad: reorder }
                    },
                    duplicate: dup,
                    reorder,
                    reorder_delay_ms: a,
                    kind: Default::default(),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn any_link_parameters_run_without_panicking_and_counters_add_up(
        config in any_link(),
        sizes in proptest::collection::vec(0usize..3000, 1..20),
        seed in any::<u64>(),
    ) {
        let mut sim = Simulator::new(seed);
        let s = sim.add_node("s", Role::Host);
        let r = sim.add_node("r", Role::Host);
        let s0 = sim.add_interface(s, "eth0", "10.0.0.1".parse().unwrap()).unwrap();
        let r0 = sim.add_interface(r, "eth0", "10.0.0.2".parse().unwrap()).unwrap();
        let link = sim.connect("l", s0, r0, config).unwrap();
        let plan = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as u64 * MS, Transmit { src: None, dst: addr("10.0.0.2:9"), payload: vec![1; n] }))
            .collect();
        let (app, _) = Scripted::new(plan);
        sim.add_app(s, "s", 9, app).unwrap();
        let (app, log) = Scripted::sink();
        sim.add_app(r, "r", 9, app).unwrap();
        sim.run_until(Instant::MAX);
        let c = sim.link_counters(link)[0];
        prop_assert_eq!(c.datagrams_offered, sizes.len() as u64);
        prop_assert_eq!(c.datagrams_offered, c.datagrams_sent + c.dropped_mtu + c.dropped_queue);
        prop_assert_eq!(
            c.datagrams_delivered + c.dropped_down,
            c.datagrams_sent - c.dropped_loss + c.duplicated
        );
        prop_assert_eq!(log.borrow().received.len() as u64, c.datagrams_delivered);
    }

    #[test]
    fn arbitrary_text_never_panics_the_scenario_loader(text in "\\PC{0,400}") {
        if let Ok(file) = ScenarioFile::parse(&text) {
            let _ = file.runs();
        }
    }
}

const CHAIN: &str = r#"
seed = 5
duration_s = 60

[[node]]
name = "client"
interfaces = [{ name = "eth0", addr = "10.0.0.2" }]

[[node]]
name = "router"
role = "router"
interfaces = [{ name = "a", addr = "10.0.0.1" }, { name = "b", addr = "10.0.1.1" }]

[[node]]
name = "server"
interfaces = [{ name = "eth0", addr = "10.0.1.2" }]

[[link]]
name = "access"
a = "client.eth0"
b = "router.a"
delay_ms = 3
jitter = { dist = "normal", mean_ms = 1, sd_ms = 1, max_ms = 5 }
loss = { model = "gilbert_elliott", p_gb = 0.05, p_bg = 0.3 }
duplicate = 0.02
reorder = 0.05
reorder_delay_ms = 4

[[link]]
name = "core"
a = "router.b"
b = "server.eth0"
delay_ms = 7
rate_bps = 1_000_000
queue_packets = 4

[[app]]
node = "client"
kind = "ping"
port = 5000
server = "10.0.1.2:7"
count = 300
interval_ms = 20
retry_ms = 100

[[app]]
node = "server"
kind = "echo"
port = 7

[[event]]
at_s = 2
every_s = 5
action = "down"
iface = "client.eth0"

[[event]]
at_s = 3
every_s = 5
action = "up"
iface = "client.eth0"
"#;

#[test]
fn running_in_chunks_equals_running_at_once() {
    let scenario = fastshake_sim::scenario::Scenario::from_toml(CHAIN).unwrap();
    let mut once = scenario.build(None).unwrap();
    once.sim.enable_capture();
    once.sim.run_until(once.duration);
    let mut chunked = scenario.build(None).unwrap();
    chunked.sim.enable_capture();
    let mut t = 0;
    while t < 60_000 {
        t += 333;
        chunked.sim.run_until(Instant::from_millis(t.min(60_000)));
    }
    assert_eq!(once.sim.events_processed(), chunked.sim.events_processed());
    let (a, b) = (once.sim.take_capture().unwrap(), chunked.sim.take_capture().unwrap());
    assert!(a.len() > 10_000, "the scenario did produce traffic");
    assert_eq!(a, b);
    let stats = once.sim.app_stats(0).unwrap();
    assert_eq!(stats.replies, 300, "stop-and-wait recovers every loss and outage");
    assert!(stats.retransmissions > 0);
}

/// An app whose deadline never moves: always "now" after the first timeout.
struct Stuck;

impl fastshake_core::SansIo for Stuck {
    fn handle_datagram(
        &mut self,
        _: Instant,
        _: std::net::SocketAddr,
        _: std::net::SocketAddr,
        _: &mut [u8],
    ) {
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<Transmit> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(Instant::from_millis(5))
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

#[test]
fn an_app_that_never_moves_its_deadline_does_not_stop_time() {
    let mut sim = Simulator::new(1);
    let h = sim.add_node("h", Role::Host);
    sim.add_interface(h, "eth0", "10.0.0.1".parse().unwrap()).unwrap();
    sim.add_app(h, "stuck", 1, Box::new(fastshake_sim::apps::Plain(Stuck))).unwrap();
    sim.run_until(Instant::from_millis(10));
    assert_eq!(sim.now(), Instant::from_millis(10));
    assert_eq!(sim.counters().timers_abandoned, 1);
    assert_eq!(sim.events_processed(), u64::from(fastshake_sim::MAX_TIMEOUTS_PER_INSTANT));
}
