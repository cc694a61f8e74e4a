//! The network-namespace testbed on real sockets: a UDP echo from the client namespace to the
//! server namespace through the delay relay in the router. Needs root; without it every test
//! fails with a message saying so (nothing is skipped).

use fastshake_netlab::testbed::{
    testbed_namespaces, ClientIface, Host, HostProcess, LinkEvent, NatKind, OutagePlan, Testbed,
    TestbedConfig, TestbedError,
};
use fastshake_testkit::peers::run;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::mpsc::Receiver;
use std::time::Duration;

const FASTSHAKE: &str = env!("CARGO_BIN_EXE_fastshake");
const ECHO_PORT: u16 = 7000;

fn build_testbed(delay_ms: u64, client_interfaces: u8, nat: Option<NatKind>) -> Testbed {
    let config = TestbedConfig {
        client_interfaces,
        nat,
        ..TestbedConfig::new(FASTSHAKE, Duration::from_millis(delay_ms))
    };
    match Testbed::create(config) {
        Ok(testbed) => testbed,
        Err(TestbedError::NotRoot) => {
            panic!("the netlab tests build network namespaces and need root: run `cargo test` as root")
        }
        Err(e) => panic!("creating the testbed: {e}"),
    }
}

/// A `fastshake netlab` tool running in a host, and its output lines.
struct Tool {
    process: HostProcess,
    lines: Receiver<String>,
}

impl Tool {
    fn start(testbed: &Testbed, host: Host, args: &[&str]) -> Tool {
        let mut full = vec!["netlab"];
        full.extend_from_slice(args);
        let mut process = testbed.exec_in(host, FASTSHAKE, &full).expect("start a netlab tool");
        let stdout = process.child().stdout.take().expect("piped output");
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Tool { process, lines }
    }

    fn next_line(&self) -> String {
        self.lines.recv_timeout(Duration::from_secs(10)).expect("a line from the tool within 10 s")
    }

    /// Waits for the tool to exit by itself, then returns everything it printed.
    fn finish(mut self) -> Vec<String> {
        let status = self.process.child().wait().expect("wait for the tool");
        assert!(status.success(), "tool failed: {status}");
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            lines.push(line);
        }
        lines
    }
}

/// The echo server in the server namespace, bounded to 60 s.
fn start_echo(testbed: &Testbed) -> Tool {
    start_echo_on(testbed, ECHO_PORT, &[])
}

fn start_echo_on(testbed: &Testbed, port: u16, extra: &[&str]) -> Tool {
    let bind = format!("{}:{port}", testbed.server_address());
    let mut args = vec!["udp-echo", "--bind", &bind];
    args.extend_from_slice(extra);
    let echo = Tool::start(testbed, Host::Server, &args);
    let first = echo.next_line();
    assert!(first.starts_with("listening"), "echo server said {first:?}");
    echo
}

/// The source addresses the echo server has seen so far.
fn peers_seen(echo: &Tool) -> Vec<SocketAddr> {
    echo.lines.try_iter().filter_map(|line| line.strip_prefix("peer ")?.parse().ok()).collect()
}

/// Round-trip time of each probe, `None` for a lost one.
fn ping_args(testbed: &Testbed, bind: &str, count: u32, timeout_ms: u64) -> Vec<String> {
    ping_args_to(testbed, ECHO_PORT, bind, count, timeout_ms)
}

fn ping_args_to(testbed: &Testbed, port: u16, bind: &str, count: u32, timeout_ms: u64) -> Vec<String> {
    vec![
        "udp-ping".into(),
        "--to".into(),
        format!("{}:{port}", testbed.server_address()),
        "--bind".into(),
        bind.into(),
        "--count".into(),
        count.to_string(),
        "--timeout-ms".into(),
        timeout_ms.to_string(),
    ]
}

fn rtts_of(lines: &[String]) -> Vec<Option<Duration>> {
    lines
        .iter()
        .filter(|line| line.starts_with("echo seq="))
        .map(|line| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix("rtt_us="))
                .and_then(|us| us.parse().ok())
                .map(Duration::from_micros)
        })
        .collect()
}

fn ping(testbed: &Testbed, bind: &str, count: u32, timeout_ms: u64) -> Vec<Option<Duration>> {
    ping_to(testbed, ECHO_PORT, bind, count, timeout_ms)
}

fn ping_to(testbed: &Testbed, port: u16, bind: &str, count: u32, timeout_ms: u64) -> Vec<Option<Duration>> {
    let args = ping_args_to(testbed, port, bind, count, timeout_ms);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rtts = rtts_of(&Tool::start(testbed, Host::Client, &args).finish());
    assert_eq!(rtts.len(), count as usize, "one line per probe");
    rtts
}

fn bind_on(testbed: &Testbed, iface: ClientIface) -> String {
    format!("{}:0", testbed.client_address(iface).expect("the client has this interface"))
}

fn answered(rtts: &[Option<Duration>]) -> usize {
    rtts.iter().flatten().count()
}

fn median(rtts: &[Option<Duration>]) -> Duration {
    let mut sorted: Vec<Duration> = rtts.iter().flatten().copied().collect();
    sorted.sort();
    sorted[sorted.len() / 2]
}

#[test]
fn echo_through_the_relay_takes_at_least_two_delays_and_is_counted() {
    let delay = Duration::from_millis(30);
    let mut testbed = build_testbed(30, 1, None);
    let _echo = start_echo(&testbed);
    let rtts = ping(&testbed, &bind_on(&testbed, ClientIface::Eth0), 10, 1_000);
    assert_eq!(answered(&rtts), 10, "every probe answered: {rtts:?}");
    for rtt in rtts.iter().flatten() {
        assert!(*rtt >= 2 * delay, "round trip {rtt:?} shorter than twice the delay {delay:?}");
    }
    println!(
        "delay 30 ms: median RTT {:?} over 10 echoes, testbed created in {:?}",
        median(&rtts),
        testbed.creation_time()
    );

    let counters = testbed.relay_counters().expect("relay counters");
    println!("{counters}");
    // Each echo crosses the relay twice: probe and answer.
    assert!(counters.received >= 20 && counters.forwarded >= 20, "{counters}");
    assert_eq!(counters.dropped_queue_full + counters.dropped_loss + counters.write_errors, 0);

    // Without the relay nothing passes the router: the traffic really goes through it.
    let last = testbed.stop_relay().expect("relay stops and reports");
    assert!(last.forwarded >= counters.forwarded);
    let rtts = ping(&testbed, &bind_on(&testbed, ClientIface::Eth0), 2, 300);
    assert_eq!(answered(&rtts), 0, "answers without a relay: {rtts:?}");
}

#[test]
fn an_interface_taken_down_loses_the_echo_until_it_is_up_again() {
    let testbed = build_testbed(5, 1, None);
    let _echo = start_echo(&testbed);
    let bind = bind_on(&testbed, ClientIface::Eth0);
    assert_eq!(answered(&ping(&testbed, &bind, 3, 1_000)), 3);

    testbed.set_link(ClientIface::Eth0, false).expect("eth0 down");
    let during = ping(&testbed, &bind, 3, 300);
    assert_eq!(answered(&during), 0, "answers while eth0 is down: {during:?}");
    let unbound = ping(&testbed, "0.0.0.0:0", 2, 300);
    assert_eq!(answered(&unbound), 0, "a single-homed client has no other way out");

    testbed.set_link(ClientIface::Eth0, true).expect("eth0 up");
    assert_eq!(answered(&ping(&testbed, &bind, 3, 1_000)), 3, "echo works again after up");
}

#[test]
fn multihomed_traffic_from_eth1_flows_while_eth0_is_down() {
    let testbed = build_testbed(5, 2, None);
    let echo = start_echo(&testbed);
    let eth0 = bind_on(&testbed, ClientIface::Eth0);
    let eth1 = bind_on(&testbed, ClientIface::Eth1);
    assert_eq!(answered(&ping(&testbed, &eth0, 2, 1_000)), 2);
    assert_eq!(answered(&ping(&testbed, &eth1, 2, 1_000)), 2);

    testbed.set_link(ClientIface::Eth0, false).expect("eth0 down");
    assert_eq!(answered(&ping(&testbed, &eth0, 2, 300)), 0, "eth0 is down");
    assert_eq!(answered(&ping(&testbed, &eth1, 3, 1_000)), 3, "eth1 still flows");
    // A socket bound to no address follows the routes to eth1.
    let _ = peers_seen(&echo);
    assert_eq!(answered(&ping(&testbed, "0.0.0.0:0", 3, 1_000)), 3);
    let eth1_address = testbed.client_address(ClientIface::Eth1).unwrap();
    let peers = peers_seen(&echo);
    assert!(
        !peers.is_empty() && peers.iter().all(|peer| peer.ip() == eth1_address),
        "the unbound socket should leave by eth1: {peers:?}"
    );

    testbed.set_link(ClientIface::Eth0, true).expect("eth0 up");
    assert_eq!(answered(&ping(&testbed, &eth0, 2, 1_000)), 2, "eth0 back");
}

#[test]
fn behind_nat_the_server_sees_the_router_address() {
    for nat in [NatKind::PortRestricted, NatKind::Symmetric] {
        let testbed = build_testbed(5, 1, Some(nat));
        let echo = start_echo(&testbed);
        let rtts = ping(&testbed, &bind_on(&testbed, ClientIface::Eth0), 3, 1_000);
        assert_eq!(answered(&rtts), 3, "{nat:?}: replies come back through the NAT");
        let peers = peers_seen(&echo);
        let router = testbed.router_server_side_address();
        assert!(
            !peers.is_empty() && peers.iter().all(|peer| peer.ip() == router),
            "{nat:?}: the server saw {peers:?}, not the router {router}"
        );
    }
    // Without NAT the server sees the client itself.
    let testbed = build_testbed(5, 1, None);
    let echo = start_echo(&testbed);
    assert_eq!(answered(&ping(&testbed, &bind_on(&testbed, ClientIface::Eth0), 2, 1_000)), 2);
    let client = testbed.client_address(ClientIface::Eth0).unwrap();
    assert!(peers_seen(&echo).iter().all(|peer| peer.ip() == client));
}

#[test]
fn nat_mappings_are_endpoint_independent_when_port_restricted_and_not_when_symmetric() {
    let server_ports = [7000, 7001, 7002];
    let client_port = 40_000;
    for nat in [NatKind::PortRestricted, NatKind::Symmetric] {
        let testbed = build_testbed(5, 1, Some(nat));
        let echoes: Vec<Tool> = server_ports.iter().map(|port| start_echo_on(&testbed, *port, &[])).collect();
        let eth0 = testbed.client_address(ClientIface::Eth0).unwrap();
        let bind = format!("{eth0}:{client_port}");
        for port in server_ports {
            assert_eq!(answered(&ping_to(&testbed, port, &bind, 1, 1_000)), 1, "{nat:?} to {port}");
        }
        let mapped: Vec<u16> = echoes.iter().flat_map(peers_seen).map(|peer| peer.port()).collect();
        assert_eq!(mapped.len(), server_ports.len(), "{nat:?}: one source per server port");
        match nat {
            // Conntrack keeps a free source port: one mapping, seen by every destination.
            NatKind::PortRestricted => {
                assert!(mapped.iter().all(|port| *port == client_port), "{mapped:?}")
            }
            // fully-random: a new random port per destination (all three equal by chance: ~1e-9).
            NatKind::Symmetric => assert!(
                mapped.windows(2).any(|pair| pair[0] != pair[1]),
                "symmetric NAT kept one mapping: {mapped:?}"
            ),
        }
    }
}

#[test]
fn a_port_restricted_nat_filters_answers_from_another_server_port() {
    for nat in [None, Some(NatKind::PortRestricted)] {
        let testbed = build_testbed(5, 1, nat);
        // The server answers from port 7001 what was sent to 7000 (as an IPC server does).
        let _echo = start_echo_on(&testbed, ECHO_PORT, &["--reply-from-port", "7001"]);
        let rtts = ping(&testbed, &bind_on(&testbed, ClientIface::Eth0), 3, 500);
        match nat {
            None => assert_eq!(answered(&rtts), 3, "without NAT every answer arrives: {rtts:?}"),
            Some(_) => assert_eq!(answered(&rtts), 0, "the NAT let through {rtts:?}"),
        }
    }
}

#[test]
fn relay_loss_drops_a_seeded_share_of_packets() {
    // Not a whole number of milliseconds: the relay is given microseconds.
    let delay = Duration::from_micros(1_500);
    let config = TestbedConfig { loss: 0.5, loss_seed: 42, ..TestbedConfig::new(FASTSHAKE, delay) };
    let testbed = Testbed::create(config).expect("testbed with loss");
    let _echo = start_echo(&testbed);
    let rtts = ping(&testbed, &bind_on(&testbed, ClientIface::Eth0), 20, 200);
    let counters = testbed.relay_counters().expect("counters");
    println!("loss 0.5: {} of 20 echoes answered; {counters}", answered(&rtts));
    assert!(counters.dropped_loss > 0, "{counters}");
    assert!(answered(&rtts) < 20);
    for rtt in rtts.iter().flatten() {
        assert!(*rtt >= 2 * delay, "round trip {rtt:?} under twice the delay {delay:?}");
    }
    assert_eq!(
        counters.received,
        counters.forwarded + counters.dropped_loss,
        "every packet is either forwarded or lost: {counters}"
    );
}

#[test]
fn netlab_up_prints_the_hosts_and_removes_them_when_it_ends() {
    let mut command = Command::new(FASTSHAKE);
    command.args(["netlab", "up", "--delay-ms", "5", "--interfaces", "2", "--nat", "--seconds", "1"]);
    let output = run("fastshake netlab up", command, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", output.stderr);
    for expected in ["192.0.2.2", "198.51.100.2", "203.0.113.2", "ip netns exec fs-", "testbed removed"] {
        assert!(stdout.contains(expected), "`{expected}` missing from:\n{stdout}");
    }
    let names: Vec<&str> = stdout.split_whitespace().filter(|word| word.starts_with("fs-")).collect();
    assert!(!names.is_empty());
    let remaining = testbed_namespaces().unwrap();
    assert!(names.iter().all(|name| !remaining.iter().any(|r| r == name)), "{remaining:?}");
}

#[test]
fn an_address_change_is_seen_by_the_server_as_a_new_source() {
    let testbed = build_testbed(5, 1, None);
    let echo = start_echo(&testbed);
    let old = testbed.client_address(ClientIface::Eth0).unwrap();
    let new = Ipv4Addr::new(192, 0, 2, 3);

    // One socket, not bound to an address, sending before and after the change.
    let args = ping_args(&testbed, "0.0.0.0:0", 40, 500);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let client = Tool::start(&testbed, Host::Client, &args);
    let mut before = Vec::new();
    while before.iter().filter(|line: &&String| line.contains("rtt_us=")).count() < 3 {
        before.push(client.next_line());
    }
    testbed.change_address(ClientIface::Eth0, new).expect("change the address");
    assert_eq!(testbed.client_address(ClientIface::Eth0), Some(new));
    let after = client.finish();
    let after_rtts = rtts_of(&after);
    assert!(
        after_rtts.iter().rev().take(5).all(Option::is_some),
        "echoes answered after the change: {after:?}"
    );

    let peers = peers_seen(&echo);
    let old_peer = peers.iter().find(|peer| peer.ip() == old).expect("the old source seen");
    let new_peer = peers.iter().find(|peer| peer.ip() == new).expect("the new source seen");
    assert_eq!(old_peer.port(), new_peer.port(), "same socket, new address");
}

#[test]
fn an_address_changed_during_an_outage_is_used_once_the_link_is_up() {
    let testbed = build_testbed(5, 1, None);
    let echo = start_echo(&testbed);
    let new = Ipv4Addr::new(192, 0, 2, 4);
    testbed.set_link(ClientIface::Eth0, false).expect("eth0 down");
    assert_eq!(testbed.client_link_up(ClientIface::Eth0), Some(false));
    testbed.change_address(ClientIface::Eth0, new).expect("change the address while down");
    testbed.set_link(ClientIface::Eth0, true).expect("eth0 up");
    assert_eq!(answered(&ping(&testbed, &format!("{new}:0"), 2, 1_000)), 2);
    assert_eq!(answered(&ping(&testbed, "0.0.0.0:0", 2, 1_000)), 2);
    let peers = peers_seen(&echo);
    assert!(!peers.is_empty() && peers.iter().all(|peer| peer.ip() == new), "{peers:?}");
    assert!(testbed.change_address(ClientIface::Eth0, Ipv4Addr::new(192, 0, 2, 1)).is_err(), "the gateway");
    assert!(testbed.change_address(ClientIface::Eth1, Ipv4Addr::new(198, 51, 100, 5)).is_err(), "no eth1");
}

#[test]
fn outage_schedule_interleaves_the_interfaces_and_stops_by_itself() {
    let testbed = build_testbed(5, 2, None);
    let plan = OutagePlan {
        period: Duration::from_millis(400),
        outage: Duration::from_millis(100),
        first_outage_after: Duration::from_millis(50),
        cycles: 2,
    };
    let events: Vec<(ClientIface, bool)> = testbed
        .schedule_outages(plan)
        .expect("schedule")
        .wait()
        .expect("schedule ran")
        .iter()
        .map(|LinkEvent { iface, up, .. }| (*iface, *up))
        .collect();
    use ClientIface::{Eth0, Eth1};
    let one_cycle = [(Eth0, false), (Eth0, true), (Eth1, false), (Eth1, true)];
    assert_eq!(events, [one_cycle, one_cycle].concat());

    // Both interfaces are up and routed again afterwards.
    let _echo = start_echo(&testbed);
    for iface in [Eth0, Eth1] {
        assert_eq!(answered(&ping(&testbed, &bind_on(&testbed, iface), 2, 1_000)), 2, "{iface:?}");
    }
    // An outage as long as half the period would leave the client with no interface.
    let overlapping = OutagePlan { outage: Duration::from_millis(200), ..plan };
    assert!(testbed.schedule_outages(overlapping).is_err());
}

#[test]
fn dropping_the_testbed_removes_its_namespaces_and_stale_ones_go_too() {
    // A namespace of a process that cannot exist: what a killed earlier run leaves.
    let stale = "fs-4294967295-0-client";
    let added = Command::new("ip").args(["netns", "add", stale]).status().expect("ip netns add");
    assert!(added.success());

    let testbed = build_testbed(5, 2, Some(NatKind::PortRestricted));
    let names: Vec<String> = [Host::Client, Host::Router, Host::Server]
        .iter()
        .map(|host| testbed.namespace(*host).to_string())
        .collect();
    let existing = testbed_namespaces().expect("list namespaces");
    assert!(!existing.iter().any(|name| name == stale), "the stale namespace was removed");
    for name in &names {
        assert!(name.starts_with("fs-"));
        assert!(existing.contains(name), "{name} exists while the testbed lives");
    }
    let teardown = testbed.teardown();
    println!("teardown took {teardown:?}");
    let remaining = testbed_namespaces().expect("list namespaces");
    for name in &names {
        assert!(!remaining.contains(name), "{name} left after teardown");
    }

    {
        let dropped = build_testbed(5, 1, None);
        let name = dropped.namespace(Host::Router).to_string();
        drop(dropped);
        assert!(!testbed_namespaces().unwrap().contains(&name), "{name} left after Drop");
    }
}
