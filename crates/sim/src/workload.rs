//! Ready-made networks for benchmarks and examples.

use crate::apps::{Echo, Pinger, PingerConfig};
use crate::dist::Jitter;
use crate::link::{LinkConfig, LossModel};
use crate::{Role, Simulator};
use std::net::Ipv4Addr;

/// `clients` pingers (one request of 64 bytes every millisecond each, for `virtual_s`
/// seconds) and one echo server across a lossy 3-hop chain: client — r1 — r2 — r3 — server,
/// every link 2 ms + 0–1 ms uniform jitter, 100 Mbit/s (the shared links run at about 12 %
/// load, so queues stay short), 1 % Bernoulli loss. Up to 250 clients.
pub fn lossy_chain(seed: u64, clients: u8, virtual_s: u64) -> Simulator {
    let mut sim = Simulator::new(seed);
    let link = LinkConfig {
        delay_ms: 2.0,
        jitter: Jitter::Uniform { min_ms: 0.0, max_ms: 1.0 },
        rate_bps: Some(100_000_000),
        loss: LossModel::Bernoulli { p: 0.01 },
        ..LinkConfig::default()
    };
    let ip = |a: u8, b: u8, c: u8| Ipv4Addr::new(10, a, b, c);
    let r1 = sim.add_node("r1", Role::Router);
    let r2 = sim.add_node("r2", Role::Router);
    let r3 = sim.add_node("r3", Role::Router);
    let server = sim.add_node("server", Role::Host);
    // Every address below is distinct and every interface gets one link, so building cannot
    // fail; the `expect`s state that.
    let r1b = sim.add_interface(r1, "b", ip(1, 0, 1)).expect("distinct addresses");
    let r2a = sim.add_interface(r2, "a", ip(1, 0, 2)).expect("distinct addresses");
    let r2b = sim.add_interface(r2, "b", ip(2, 0, 1)).expect("distinct addresses");
    let r3a = sim.add_interface(r3, "a", ip(2, 0, 2)).expect("distinct addresses");
    let r3b = sim.add_interface(r3, "b", ip(3, 0, 1)).expect("distinct addresses");
    let s0 = sim.add_interface(server, "eth0", ip(3, 0, 2)).expect("distinct addresses");
    sim.connect("r1-r2", r1b, r2a, link.clone()).expect("free interfaces");
    sim.connect("r2-r3", r2b, r3a, link.clone()).expect("free interfaces");
    sim.connect("r3-server", r3b, s0, link.clone()).expect("free interfaces");
    sim.add_app(server, "echo", 7, Box::new(Echo::new())).expect("a host");
    for i in 0..clients.min(250) {
        let c = sim.add_node(&format!("c{i}"), Role::Host);
        let c0 = sim.add_interface(c, "eth0", ip(0, i, 2)).expect("distinct addresses");
        let r = sim.add_interface(r1, &format!("c{i}"), ip(0, i, 1)).expect("distinct addresses");
        sim.connect(&format!("c{i}-r1"), c0, r, link.clone()).expect("free interfaces");
        let pinger = Pinger::new(PingerConfig {
            server: std::net::SocketAddr::from((ip(3, 0, 2), 7)),
            count: virtual_s.saturating_mul(1000),
            interval_ms: 1.0,
            payload: 64,
            start_ms: f64::from(i) / f64::from(clients),
            retry_ms: None,
        });
        sim.add_app(c, "ping", 5000, Box::new(pinger)).expect("a host");
    }
    sim
}
