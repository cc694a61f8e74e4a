//! Interfaces going down and up, address changes, multihomed hosts, and what apps are told.

mod common;

use common::*;
use fastshake_core::Instant;
use fastshake_sim::apps::{NodeEvent, Pinger, PingerConfig};
use fastshake_sim::link::LinkConfig;
use fastshake_sim::{Action, Role, Simulator};

/// client 10.0.0.2 — router — server 192.0.2.10, links of `delay_ms`.
fn chain(delay_ms: f64) -> (Simulator, usize, usize, usize) {
    let mut sim = Simulator::new(1);
    let c = sim.add_node("client", Role::Host);
    let r = sim.add_node("router", Role::Router);
    let s = sim.add_node("server", Role::Host);
    let c0 = sim.add_interface(c, "eth0", "10.0.0.2".parse().unwrap()).unwrap();
    let r0 = sim.add_interface(r, "lan", "10.0.0.1".parse().unwrap()).unwrap();
    let r1 = sim.add_interface(r, "wan", "192.0.2.1".parse().unwrap()).unwrap();
    let s0 = sim.add_interface(s, "eth0", "192.0.2.10".parse().unwrap()).unwrap();
    let wire = LinkConfig { delay_ms, ..LinkConfig::default() };
    sim.connect("access", c0, r0, wire.clone()).unwrap();
    sim.connect("core", r1, s0, wire).unwrap();
    (sim, c, s, c0)
}

/// A client with two interfaces, wlan0 10.0.0.2 and lte0 10.1.0.2, each on its own link to a
/// router, and the router's core link to a server 192.0.2.10; every link `wire`.
struct Multihomed {
    sim: Simulator,
    c: usize,
    s: usize,
    /// The client's wlan0 interface.
    wlan: usize,
    wlan_link: usize,
    lte_link: usize,
}

fn multihomed(seed: u64, wire: LinkConfig) -> Multihomed {
    let mut sim = Simulator::new(seed);
    let c = sim.add_node("client", Role::Host);
    let r = sim.add_node("router", Role::Router);
    let s = sim.add_node("server", Role::Host);
    let wlan = sim.add_interface(c, "wlan0", "10.0.0.2".parse().unwrap()).unwrap();
    let lte = sim.add_interface(c, "lte0", "10.1.0.2".parse().unwrap()).unwrap();
    let r0 = sim.add_interface(r, "wlan", "10.0.0.1".parse().unwrap()).unwrap();
    let r1 = sim.add_interface(r, "lte", "10.1.0.1".parse().unwrap()).unwrap();
    let r2 = sim.add_interface(r, "core", "192.0.2.1".parse().unwrap()).unwrap();
    let s0 = sim.add_interface(s, "eth0", "192.0.2.10".parse().unwrap()).unwrap();
    let wlan_link = sim.connect("wlan", wlan, r0, wire.clone()).unwrap();
    let lte_link = sim.connect("lte", lte, r1, wire.clone()).unwrap();
    sim.connect("core", r2, s0, wire).unwrap();
    Multihomed { sim, c, s, wlan, wlan_link, lte_link }
}

fn payloads(log: &SharedLog) -> Vec<Vec<u8>> {
    log.borrow().received.iter().map(|r| r.payload.clone()).collect()
}

#[test]
fn down_interface_neither_sends_nor_receives() {
    let (mut sim, c, s, c0) = chain(1.0);
    let (app, client) = Scripted::new(vec![
        (50 * MS, tx(None, "192.0.2.10:9", b"before")),
        (150 * MS, tx(None, "192.0.2.10:9", b"while down")),
        (350 * MS, tx(None, "192.0.2.10:9", b"after")),
    ]);
    sim.add_app(c, "client", 9, app).unwrap();
    let (app, server) = Scripted::new(vec![
        (200 * MS, tx(None, "10.0.0.2:9", b"to a down interface")),
        (400 * MS, tx(None, "10.0.0.2:9", b"back up")),
    ]);
    sim.add_app(s, "server", 9, app).unwrap();
    sim.schedule(Instant::from_millis(100), Action::InterfaceDown(c0));
    sim.schedule(Instant::from_millis(300), Action::InterfaceUp(c0));
    sim.run_until(Instant::from_millis(1_000));

    assert_eq!(payloads(&server), vec![b"before".to_vec(), b"after".to_vec()]);
    assert_eq!(payloads(&client), vec![b"back up".to_vec()]);
    assert_eq!(sim.counters().dropped_iface_down_tx, 1);
    let access = sim.link("access").unwrap();
    assert_eq!(sim.link_counters(access)[1].dropped_down, 1, "router → client arrived at a down interface");
    let events: Vec<NodeEvent> = client.borrow().events.iter().map(|(_, e)| e.clone()).collect();
    let addr = "10.0.0.2".parse().unwrap();
    assert_eq!(
        events,
        vec![
            NodeEvent::InterfaceUp { iface: "eth0".into(), addr },
            NodeEvent::InterfaceDown { iface: "eth0".into(), addr },
            NodeEvent::InterfaceUp { iface: "eth0".into(), addr },
        ]
    );
    let times: Vec<u64> = client.borrow().events.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, vec![0, 100 * MS, 300 * MS]);
}

#[test]
fn datagram_in_flight_is_lost_when_the_interface_goes_down() {
    let (mut sim, c, s, c0) = chain(50.0);
    let (app, client) = Scripted::sink();
    sim.add_app(c, "client", 9, app).unwrap();
    let (app, _) = Scripted::new(vec![(0, tx(None, "10.0.0.2:9", b"in flight"))]);
    sim.add_app(s, "server", 9, app).unwrap();
    // Arrives at 100 ms; the interface is down from 60 ms to 200 ms.
    sim.schedule(Instant::from_millis(60), Action::InterfaceDown(c0));
    sim.schedule(Instant::from_millis(200), Action::InterfaceUp(c0));
    sim.run_until(Instant::from_millis(1_000));
    assert!(client.borrow().received.is_empty());
}

#[test]
fn address_change_moves_traffic_to_the_new_address() {
    let (mut sim, c, s, c0) = chain(1.0);
    let (app, client) = Scripted::new(vec![(200 * MS, tx(None, "192.0.2.10:9", b"from new"))]);
    sim.add_app(c, "client", 9, app).unwrap();
    let (app, server) = Scripted::new(vec![
        (150 * MS, tx(None, "10.0.0.2:9", b"to old")),
        (250 * MS, tx(None, "10.0.0.99:9", b"to new")),
    ]);
    sim.add_app(s, "server", 9, app).unwrap();
    sim.schedule(Instant::from_millis(100), Action::SetAddress(c0, "10.0.0.99".parse().unwrap()));
    sim.run_until(Instant::from_millis(1_000));

    assert_eq!(sim.iface_addr(c0), "10.0.0.99".parse::<std::net::Ipv4Addr>().unwrap());
    assert_eq!(payloads(&client), vec![b"to new".to_vec()], "the old address is gone");
    assert_eq!(sim.counters().dropped_no_route, 1);
    let server = server.borrow();
    assert_eq!(server.received.len(), 1);
    assert_eq!(server.received[0].remote, addr("10.0.0.99:9"), "the client now sends from its new address");
    let changed = client.borrow().events.iter().any(|(t, e)| {
        *t == 100 * MS
            && *e
                == NodeEvent::AddressChanged {
                    iface: "eth0".into(),
                    old: "10.0.0.2".parse().unwrap(),
                    new: "10.0.0.99".parse().unwrap(),
                }
    });
    assert!(changed);
}

#[test]
fn explicit_source_picks_the_interface_and_unknown_source_is_refused() {
    let Multihomed { mut sim, c, s, .. } = multihomed(1, LinkConfig::default());
    let (app, _) = Scripted::new(vec![
        (0, tx(Some("10.1.0.2:0"), "192.0.2.10:9", b"lte, bound port")),
        (MS, tx(Some("10.0.0.2:4000"), "192.0.2.10:9", b"wlan, port 4000")),
        (2 * MS, tx(Some("10.9.9.9:0"), "192.0.2.10:9", b"not mine")),
    ]);
    sim.add_app(c, "client", 9, app).unwrap();
    let (app, server) =
        Scripted::new(vec![(10 * MS, tx(None, "10.0.0.2:4000", b"to the port it sent from"))]);
    sim.add_app(s, "server", 9, app).unwrap();
    // A second app cannot bind the same port on the same host.
    assert!(sim.add_app(c, "again", 9, Scripted::sink().0).is_err());
    sim.run_until(Instant::from_millis(100));
    let remotes: Vec<_> = server.borrow().received.iter().map(|r| r.remote).collect();
    assert_eq!(remotes, vec![addr("10.1.0.2:9"), addr("10.0.0.2:4000")]);
    assert_eq!(sim.counters().dropped_bad_address, 1);
    assert_eq!(sim.link_counters(sim.link("lte").unwrap())[0].datagrams_sent, 1);
    assert_eq!(sim.link_counters(sim.link("wlan").unwrap())[0].datagrams_sent, 1);
    assert_eq!(sim.counters().app_datagrams_received, 3, "2 at the server, 1 back at the client's port 4000");
}

#[test]
fn multihomed_pinger_moves_to_the_interface_that_is_up() {
    let Multihomed { mut sim, c, s, wlan, wlan_link, lte_link } =
        multihomed(3, LinkConfig { delay_ms: 10.0, ..LinkConfig::default() });
    let pinger = Pinger::new(PingerConfig {
        server: addr("192.0.2.10:7"),
        count: 50,
        interval_ms: 50.0,
        payload: 32,
        start_ms: 0.0,
        retry_ms: Some(200.0),
    });
    let ping = sim.add_app(c, "ping", 5000, Box::new(pinger)).unwrap();
    sim.add_app(s, "echo", 7, Box::new(fastshake_sim::apps::Echo::new())).unwrap();
    sim.schedule(Instant::from_millis(1_000), Action::InterfaceDown(wlan));
    sim.schedule(Instant::from_millis(2_000), Action::InterfaceUp(wlan));
    sim.run_until(Instant::from_millis(20_000));
    let stats = sim.app_stats(ping).unwrap();
    assert_eq!(stats.replies, 50, "every request answered despite the outage");
    let pinger = sim.app(ping).as_any().and_then(|a| a.downcast_ref::<Pinger>()).unwrap();
    assert_eq!(pinger.config().count, 50);
    assert!(stats.completed_at_ns.is_some());
    let lte_sent = sim.link_counters(lte_link)[0].datagrams_sent;
    let wlan_sent = sim.link_counters(wlan_link)[0].datagrams_sent;
    assert!(lte_sent > 0, "requests went over LTE while WLAN was down");
    assert!(wlan_sent > lte_sent, "WLAN again once it came back");
    // Two 10 ms links each way: every answered request took exactly 40 ms from its last send.
    assert!(stats.rtts_ns.iter().all(|&rtt| rtt == 40 * MS));
    assert!(stats.retransmissions >= 1, "the request in flight when WLAN went down was sent again");
}

#[test]
fn address_change_onto_an_address_in_use_is_refused_and_counted() {
    let (mut sim, c, _s, c0) = chain(1.0);
    let (app, client) = Scripted::sink();
    sim.add_app(c, "client", 9, app).unwrap();
    sim.schedule(Instant::from_millis(1), Action::SetAddress(c0, "192.0.2.10".parse().unwrap()));
    sim.run_until(Instant::from_millis(10));
    assert_eq!(sim.iface_addr(c0), "10.0.0.2".parse::<std::net::Ipv4Addr>().unwrap());
    assert_eq!(sim.counters().address_conflicts, 1);
    assert_eq!(client.borrow().events.len(), 1, "only the start-up InterfaceUp");
}

#[test]
fn an_app_added_between_runs_learns_its_interfaces_and_runs() {
    let (mut sim, c, s, _) = chain(1.0);
    let (app, server) = Scripted::sink();
    sim.add_app(s, "server", 9, app).unwrap();
    sim.run_until(Instant::from_millis(100));
    let (app, client) = Scripted::new(vec![(150 * MS, tx(None, "192.0.2.10:9", b"late starter"))]);
    sim.add_app(c, "client", 9, app).unwrap();
    sim.run_until(Instant::from_millis(300));
    assert_eq!(client.borrow().events.len(), 1);
    assert_eq!(client.borrow().events[0].0, 100 * MS, "told at the start of the next run");
    assert_eq!(payloads(&server), vec![b"late starter".to_vec()]);
}
