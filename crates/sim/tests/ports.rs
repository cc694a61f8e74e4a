//! The ports an app receives on: its bound port, any it has sent from, and any it asks for with
//! `App::poll_bind` before sending from it (a server opening a socket for one session).

mod common;

use common::*;
use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_sim::apps::{App, NodeEvent};
use fastshake_sim::link::LinkConfig;
use fastshake_sim::{Role, Simulator};
use std::net::SocketAddr;

/// An app that asks for `ports` and otherwise is `inner`.
struct Binding {
    inner: Box<dyn App>,
    ports: Vec<u16>,
}

impl SansIo for Binding {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        self.inner.handle_datagram(now, local, remote, datagram)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.inner.poll_transmit(now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now)
    }
}

impl App for Binding {
    fn handle_node_event(&mut self, now: Instant, event: &NodeEvent) {
        self.inner.handle_node_event(now, event)
    }
    fn poll_bind(&mut self) -> Option<u16> {
        self.ports.pop()
    }
}

/// client 10.0.0.2 — server 10.0.0.3 on one link; returns (sim, client node, server node).
fn pair() -> (Simulator, usize, usize) {
    let mut sim = Simulator::new(1);
    let c = sim.add_node("client", Role::Host);
    let s = sim.add_node("server", Role::Host);
    let c0 = sim.add_interface(c, "eth0", "10.0.0.2".parse().unwrap()).unwrap();
    let s0 = sim.add_interface(s, "eth0", "10.0.0.3".parse().unwrap()).unwrap();
    sim.connect("wire", c0, s0, LinkConfig { delay_ms: 1.0, ..LinkConfig::default() }).unwrap();
    (sim, c, s)
}

#[test]
fn a_port_asked_for_receives_before_the_app_sends_from_it() {
    for asks in [false, true] {
        let (mut sim, c, s) = pair();
        let (client, _) = Scripted::new(vec![(10 * MS, tx(None, "10.0.0.3:7000", b"to the new port"))]);
        sim.add_app(c, "client", 9, client).unwrap();
        let (sink, server) = Scripted::sink();
        let ports = if asks { vec![7000] } else { Vec::new() };
        sim.add_app(s, "server", 9, Box::new(Binding { inner: sink, ports })).unwrap();
        sim.run_until(Instant::from_millis(100));
        let received = &server.borrow().received;
        if asks {
            assert_eq!(received.len(), 1);
            assert_eq!(received[0].local, "10.0.0.3:7000".parse().unwrap());
            assert_eq!(sim.counters().dropped_no_listener, 0);
        } else {
            assert!(received.is_empty(), "nobody listens on 7000");
            assert_eq!(sim.counters().dropped_no_listener, 1);
        }
    }
}

#[test]
fn a_port_another_app_holds_is_not_given() {
    let (mut sim, c, s) = pair();
    let (client, _) = Scripted::new(vec![(10 * MS, tx(None, "10.0.0.3:7000", b"to 7000"))]);
    sim.add_app(c, "client", 9, client).unwrap();
    let (sink, first) = Scripted::sink();
    sim.add_app(s, "first", 9, Box::new(Binding { inner: sink, ports: vec![7000] })).unwrap();
    let (sink, second) = Scripted::sink();
    sim.add_app(s, "second", 10, Box::new(Binding { inner: sink, ports: vec![7000] })).unwrap();
    sim.run_until(Instant::from_millis(100));
    assert_eq!(first.borrow().received.len(), 1);
    assert!(second.borrow().received.is_empty());
}
