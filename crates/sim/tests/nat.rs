//! RFC 4787 mapping and filtering of each NAT type, and mapping timeouts.
//!
//! Topology: client 10.0.0.2 — NAT (10.0.0.1 | 198.51.100.1) — router — server A 192.0.2.10
//!                                                                  └— server B 192.0.2.20
//! Server A listens on ports 4433 and 5000; server B on 4433.

mod common;

use common::*;
use fastshake_core::Instant;
use fastshake_sim::link::LinkConfig;
use fastshake_sim::nat::{Dependence, NatConfig, NatPreset};
use fastshake_sim::{Action, Role, Simulator};

struct Net {
    sim: Simulator,
    client: SharedLog,
    a4433: SharedLog,
    a5000: SharedLog,
    b4433: SharedLog,
    nat: usize,
}

const MAPPED: &str = "198.51.100.1:7000"; // port preserved by the NAT on first use

/// Builds the network; the client sends `client_plan`; each server sends its own plan.
fn net(
    nat: NatConfig,
    client_plan: Vec<(u64, fastshake_core::Transmit)>,
    a4433_plan: Vec<(u64, fastshake_core::Transmit)>,
    a5000_plan: Vec<(u64, fastshake_core::Transmit)>,
    b4433_plan: Vec<(u64, fastshake_core::Transmit)>,
) -> Net {
    net_with(nat, client_plan, a4433_plan, a5000_plan, b4433_plan, |_| {})
}

/// As [`net`], with `setup` applied (events scheduled) before the run.
fn net_with(
    nat: NatConfig,
    client_plan: Vec<(u64, fastshake_core::Transmit)>,
    a4433_plan: Vec<(u64, fastshake_core::Transmit)>,
    a5000_plan: Vec<(u64, fastshake_core::Transmit)>,
    b4433_plan: Vec<(u64, fastshake_core::Transmit)>,
    setup: impl FnOnce(&mut Simulator),
) -> Net {
    let mut sim = Simulator::new(1);
    let c = sim.add_node("client", Role::Host);
    let n = sim.add_node("nat", Role::Nat(nat));
    let r = sim.add_node("router", Role::Router);
    let a = sim.add_node("a", Role::Host);
    let b = sim.add_node("b", Role::Host);
    let c0 = sim.add_interface(c, "eth0", "10.0.0.2".parse().unwrap()).unwrap();
    let n_in = sim.add_interface(n, "inside", "10.0.0.1".parse().unwrap()).unwrap();
    let n_out = sim.add_interface(n, "outside", "198.51.100.1".parse().unwrap()).unwrap();
    sim.set_nat_interfaces(n, n_in, n_out);
    let r0 = sim.add_interface(r, "wan", "198.51.100.2".parse().unwrap()).unwrap();
    let r1 = sim.add_interface(r, "a", "192.0.2.1".parse().unwrap()).unwrap();
    let r2 = sim.add_interface(r, "b", "192.0.2.2".parse().unwrap()).unwrap();
    let a0 = sim.add_interface(a, "eth0", "192.0.2.10".parse().unwrap()).unwrap();
    let b0 = sim.add_interface(b, "eth0", "192.0.2.20".parse().unwrap()).unwrap();
    let wire = LinkConfig { delay_ms: 1.0, ..LinkConfig::default() };
    sim.connect("lan", c0, n_in, wire.clone()).unwrap();
    sim.connect("wan", n_out, r0, wire.clone()).unwrap();
    sim.connect("ra", r1, a0, wire.clone()).unwrap();
    sim.connect("rb", r2, b0, wire).unwrap();
    let (app, client) = Scripted::new(client_plan);
    sim.add_app(c, "client", 7000, app).unwrap();
    let (app, a4433) = Scripted::new(a4433_plan);
    sim.add_app(a, "a4433", 4433, app).unwrap();
    let (app, a5000) = Scripted::new(a5000_plan);
    sim.add_app(a, "a5000", 5000, app).unwrap();
    let (app, b4433) = Scripted::new(b4433_plan);
    sim.add_app(b, "b4433", 4433, app).unwrap();
    setup(&mut sim);
    sim.run_until(Instant::from_millis(5_000));
    Net { sim, client, a4433, a5000, b4433, nat: n }
}

/// The client talks to A:4433 at 0 ms; at 100 ms A:4433, A:5000 and B:4433 each send to the
/// client's mapped address. Returns which of the three replies got through.
fn filtering_of(preset: NatPreset) -> (bool, bool, bool, Net) {
    let net = net(
        NatConfig::preset(preset),
        vec![(0, tx(None, "192.0.2.10:4433", b"hello"))],
        vec![(100 * MS, tx(None, MAPPED, b"from a:4433"))],
        vec![(100 * MS, tx(None, MAPPED, b"from a:5000"))],
        vec![(100 * MS, tx(None, MAPPED, b"from b:4433"))],
    );
    {
        let seen = net.a4433.borrow();
        assert_eq!(seen.received.len(), 1, "the request crossed the NAT");
        assert_eq!(seen.received[0].remote, addr(MAPPED), "translated source, port preserved");
    }
    let got = |what: &[u8]| net.client.borrow().received.iter().any(|r| r.payload == what);
    let verdict = (got(b"from a:4433"), got(b"from a:5000"), got(b"from b:4433"));
    (verdict.0, verdict.1, verdict.2, net)
}

#[test]
fn full_cone_lets_anyone_in() {
    let (a, a_other_port, b, _) = filtering_of(NatPreset::FullCone);
    assert!(a && a_other_port && b);
}

#[test]
fn restricted_filters_by_address() {
    let (a, a_other_port, b, net) = filtering_of(NatPreset::Restricted);
    assert!(a && a_other_port, "the contacted host may answer from any port");
    assert!(!b, "a host never contacted is filtered");
    assert_eq!(net.sim.nat_counters(net.nat).unwrap().filtered, 1);
}

#[test]
fn port_restricted_drops_reply_from_a_server_port_never_contacted() {
    // Seed 001's IPC failure: the server answers from a fresh per-session port.
    let (a, a_other_port, b, net) = filtering_of(NatPreset::PortRestricted);
    assert!(a, "the contacted address and port may answer");
    assert!(!a_other_port, "same server, other port: filtered");
    assert!(!b);
    assert_eq!(net.sim.nat_counters(net.nat).unwrap().filtered, 2);
    let received = &net.client.borrow().received;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].remote, addr("192.0.2.10:4433"));
    assert_eq!(received[0].local, addr("10.0.0.2:7000"), "translated back to the inside endpoint");
}

#[test]
fn symmetric_filters_like_port_restricted() {
    let (a, a_other_port, b, _) = filtering_of(NatPreset::Symmetric);
    assert!(a && !a_other_port && !b);
}

/// The client sends from one port to A:4433, A:5000 and B:4433; returns the outside source each
/// server saw.
fn mappings_of(mapping: Dependence) -> (std::net::SocketAddr, std::net::SocketAddr, std::net::SocketAddr) {
    let config = NatConfig { mapping: Some(mapping), ..NatConfig::preset(NatPreset::FullCone) };
    let net = net(
        config,
        vec![
            (0, tx(None, "192.0.2.10:4433", b"1")),
            (MS, tx(None, "192.0.2.10:5000", b"2")),
            (2 * MS, tx(None, "192.0.2.20:4433", b"3")),
        ],
        vec![],
        vec![],
        vec![],
    );
    let seen = |log: &SharedLog| log.borrow().received[0].remote;
    (seen(&net.a4433), seen(&net.a5000), seen(&net.b4433))
}

#[test]
fn endpoint_independent_mapping_reuses_one_port() {
    let (a, a2, b) = mappings_of(Dependence::EndpointIndependent);
    assert_eq!(a, addr(MAPPED));
    assert_eq!(a, a2);
    assert_eq!(a, b);
}

#[test]
fn address_dependent_mapping_is_per_remote_host() {
    let (a, a2, b) = mappings_of(Dependence::AddressDependent);
    assert_eq!(a, a2, "same remote host, same mapping");
    assert_ne!(a, b, "other remote host, new mapping");
}

#[test]
fn address_and_port_dependent_mapping_is_per_remote_endpoint() {
    let (a, a2, b) = mappings_of(Dependence::AddressAndPortDependent);
    assert_ne!(a, a2);
    assert_ne!(a, b);
    assert_ne!(a2, b);
    assert_eq!(a.ip(), b.ip());
}

#[test]
fn mapping_expires_without_outbound_traffic_and_is_refreshed_by_it() {
    let timeout = NatConfig { timeout_s: 1.0, ..NatConfig::preset(NatPreset::FullCone) };
    // No refresh: the reply 1.5 s after the only outbound datagram finds no mapping.
    let net1 = net(
        timeout.clone(),
        vec![(0, tx(None, "192.0.2.10:4433", b"hi"))],
        vec![(1_500 * MS, tx(None, MAPPED, b"late"))],
        vec![],
        vec![],
    );
    assert!(net1.client.borrow().received.is_empty());
    assert_eq!(net1.sim.nat_counters(net1.nat).unwrap().mappings_expired, 1);
    // Outbound keep-alive at 800 ms refreshes the mapping until 1.8 s.
    let net2 = net(
        timeout,
        vec![(0, tx(None, "192.0.2.10:4433", b"hi")), (800 * MS, tx(None, "192.0.2.10:4433", b"ka"))],
        vec![(1_500 * MS, tx(None, MAPPED, b"late"))],
        vec![],
        vec![],
    );
    assert_eq!(net2.client.borrow().received.len(), 1);
}

#[test]
fn unsolicited_inbound_finds_no_mapping() {
    let net = net(
        NatConfig::preset(NatPreset::FullCone),
        vec![],
        vec![(0, tx(None, MAPPED, b"knock"))],
        vec![],
        vec![],
    );
    assert!(net.client.borrow().received.is_empty());
    assert_eq!(net.sim.nat_counters(net.nat).unwrap().no_mapping, 1);
}

#[test]
fn client_address_change_behind_the_nat_gets_a_new_mapping() {
    // Seed 001's handover behind a NAT: the server sees the client come back from another
    // outside port, and answers to the old mapping reach nobody.
    let net = net_with(
        NatConfig::preset(NatPreset::PortRestricted),
        vec![(0, tx(None, "192.0.2.10:4433", b"before")), (200 * MS, tx(None, "192.0.2.10:4433", b"after"))],
        vec![
            (300 * MS, tx(None, MAPPED, b"to the old mapping")),
            (300 * MS, tx(None, "198.51.100.1:40000", b"to the new mapping")),
        ],
        vec![],
        vec![],
        |sim| {
            let eth0 = sim.iface("client.eth0").unwrap();
            sim.schedule(Instant::from_millis(100), Action::SetAddress(eth0, "10.0.0.3".parse().unwrap()));
        },
    );
    let remotes: Vec<_> = net.a4433.borrow().received.iter().map(|r| r.remote).collect();
    assert_eq!(remotes, vec![addr(MAPPED), addr("198.51.100.1:40000")], "new inside address, new mapping");
    let got: Vec<_> = net.client.borrow().received.iter().map(|r| (r.local, r.payload.clone())).collect();
    assert_eq!(got, vec![(addr("10.0.0.3:7000"), b"to the new mapping".to_vec())]);
    assert_eq!(net.sim.nat_counters(net.nat).unwrap().mappings_created, 2);
    assert_eq!(net.sim.counters().dropped_no_route, 1, "the old inside address is gone");
}
