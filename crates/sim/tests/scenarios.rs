//! The example scenarios load, run, and show what their comments say; runs are deterministic.

use fastshake_sim::apps::HandshakeStats;
use fastshake_sim::scenario::{Report, Scenario, ScenarioFile};
use pcap_file::pcap::PcapReader;
use std::net::SocketAddr;
use std::path::PathBuf;

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn load(name: &str) -> ScenarioFile {
    let text = std::fs::read_to_string(scenarios_dir().join(name)).unwrap();
    ScenarioFile::parse(&text).unwrap()
}

fn run(name: &str) -> Report {
    let (_, scenario) = load(name).runs().unwrap().remove(0);
    scenario.run(None, false, None).unwrap().report
}

#[test]
fn every_example_scenario_loads_and_runs() {
    let mut seen = 0;
    for entry in std::fs::read_dir(scenarios_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with('#'), "{} starts with a comment describing it", path.display());
        let file = ScenarioFile::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let base = file.base().unwrap();
        if !base.apps.iter().all(|a| a.kind == "ping" || a.kind == "echo") {
            // Engine apps come from fastshake-lab, whose tests run these files.
            let err = base.build(None).unwrap_err().to_string();
            assert!(err.contains("unknown app kind"), "{}: {err}", path.display());
            continue;
        }
        for (label, scenario) in file.runs().unwrap() {
            let out = scenario.run(None, false, label).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(out.report.events > 0, "{}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 4);
}

#[test]
fn port_restricted_nat_scenario_filters_the_ipc_replies() {
    let report = run("nat-port-restricted.toml");
    let app = |name: &str| report.apps.iter().find(|a| a.name == name).unwrap().clone();
    assert_eq!(app("ping-welcome").replies, 20);
    assert_eq!(app("ping-ipc").replies, 0);
    assert_eq!(app("ipc").answered, 20, "the server did answer");
    assert_eq!(report.nats[0].counters.filtered, 20);
    // RTT: 2 · (2 + 15 + 1) ms.
    assert_eq!(app("ping-welcome").rtt_median_ms, Some(36.0));

    let text = std::fs::read_to_string(scenarios_dir().join("nat-port-restricted.toml")).unwrap();
    let full_cone = text.replace("preset = \"port-restricted\"", "preset = \"full-cone\"");
    let report = Scenario::from_toml(&full_cone).unwrap().run(None, false, None).unwrap().report;
    assert!(report.apps.iter().filter(|a| a.kind == "ping").all(|a| a.replies == 20));
}

#[test]
fn multihop_scenario_round_trip_matches_the_arithmetic_in_its_comment() {
    let report = run("multihop-chain.toml");
    let ping = &report.apps[0];
    assert_eq!(ping.rtt_median_ms, Some(106.816));
    assert!(ping.replies >= 80 && ping.replies < 100, "about 8 % of round trips lose a frame");
    let hop1 = &report.links[0].a_to_b;
    assert_eq!(hop1.frames, 2 * hop1.datagrams_sent);
}

#[test]
fn handover_scenario_completes_every_request() {
    let report = run("handover.toml");
    let ping = &report.apps[0];
    assert_eq!(ping.replies, 600);
    assert!(ping.completed_at_s.is_some());
    assert!(report.links.iter().find(|l| l.name == "lte").unwrap().a_to_b.datagrams_sent > 0);
}

#[test]
fn sweep_gives_one_run_per_value_and_more_loss_means_more_retries() {
    let runs = load("loss-sweep.toml").runs().unwrap();
    assert_eq!(runs.len(), 4);
    let retries: Vec<u64> = runs
        .into_iter()
        .map(|(label, s)| s.run(None, false, label).unwrap().report.apps[0].retransmissions)
        .collect();
    assert_eq!(retries[0], 0);
    assert!(retries[3] > retries[1], "{retries:?}");
}

fn lossy_pcap(seed: u64) -> Vec<u8> {
    let (_, scenario) = load("lossy-link.toml").runs().unwrap().remove(0);
    scenario.run(Some(seed), true, None).unwrap().pcap.unwrap()
}

#[test]
fn same_seed_same_pcap_bytes_other_seed_other_bytes() {
    let a = lossy_pcap(42);
    let b = lossy_pcap(42);
    let c = lossy_pcap(43);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn pcap_records_are_ipv4_udp_with_consistent_lengths() {
    let bytes = lossy_pcap(1);
    let mut reader = PcapReader::new(&bytes[..]).unwrap();
    assert_eq!(reader.header().datalink, pcap_file::DataLink::RAW);
    let mut records = 0;
    let mut last = std::time::Duration::ZERO;
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap();
        let d = &packet.data;
        assert_eq!(d[0], 0x45);
        assert_eq!(u16::from_be_bytes([d[2], d[3]]) as usize, d.len(), "IP total length");
        assert_eq!(d[9], 17, "UDP");
        assert_eq!(u16::from_be_bytes([d[24], d[25]]) as usize, d.len() - 20, "UDP length");
        assert!(packet.timestamp >= last, "records in time order");
        last = packet.timestamp;
        records += 1;
    }
    // 200 requests; replies only for the requests that arrived.
    assert!(records > 300 && records <= 400, "{records} records");
}

const TWO_HOSTS: &str = r#"
seed = 1
duration_s = 5

[[node]]
name = "client"
interfaces = [{ name = "eth0", addr = "10.0.0.2", up = false }]

[[node]]
name = "server"
interfaces = [{ name = "eth0", addr = "10.0.0.1" }]

[[link]]
name = "wire"
a = "client.eth0"
b = "server.eth0"
delay_ms = 1

[[app]]
node = "client"
kind = "ping"
port = 5000
server = "10.0.0.1:7"
count = 10
interval_ms = 100

[[app]]
node = "server"
kind = "custom-echo"
port = 7

[[event]]
at_s = 0.45
action = "up"
iface = "client.eth0"
"#;

#[test]
fn factory_supplies_unknown_app_kinds_and_interfaces_can_start_down() {
    let scenario = Scenario::from_toml(TWO_HOSTS).unwrap();
    assert!(scenario.build(None).is_err(), "the simulator alone does not know custom-echo");
    let mut asked = Vec::new();
    let mut built = scenario
        .build_with(None, &mut |spec, _sim| {
            asked.push(spec.kind.clone());
            Ok((spec.kind == "custom-echo")
                .then(|| Box::new(fastshake_sim::apps::Echo::new()) as Box<dyn fastshake_sim::apps::App>))
        })
        .unwrap();
    assert_eq!(asked, vec!["ping".to_string(), "custom-echo".to_string()]);
    built.sim.run_until(built.duration);
    let report = built.report(None, 1, None);
    // Requests at 0..400 ms leave a down interface; from 500 ms on they get through.
    assert_eq!(report.network.dropped_iface_down_tx, 5);
    assert_eq!(report.apps[0].replies, 5);
}

#[test]
fn runaway_repetition_is_refused() {
    let text =
        TWO_HOSTS.replace("at_s = 0.45", "at_s = 0.45\nevery_s = 0.000000001").replace("custom-echo", "echo");
    let err = Scenario::from_toml(&text).unwrap().build(None).unwrap_err();
    assert!(err.to_string().contains("repeats more than"), "{err}");
}

#[test]
fn unknown_fields_and_names_are_reported() {
    let typo = TWO_HOSTS.replace("delay_ms = 1", "delay_msec = 1");
    let err = Scenario::from_toml(&typo).unwrap().build(None).unwrap_err();
    assert!(err.to_string().contains("delay_msec"), "{err}");
    let dangling = TWO_HOSTS.replace("b = \"server.eth0\"", "b = \"server.eth9\"");
    let err = Scenario::from_toml(&dangling).unwrap().build(None).unwrap_err();
    assert!(err.to_string().contains("server.eth9"), "{err}");
    let bad_sweep = format!("{TWO_HOSTS}\n[sweep]\nparam = \"link.nope.delay_ms\"\nvalues = [1]\n");
    assert!(ScenarioFile::parse(&bad_sweep).unwrap().runs().is_err());
}

#[test]
fn address_event_onto_another_interfaces_address_is_refused() {
    let text = format!(
        "{}\n[[event]]\nat_s = 1\naction = \"address\"\niface = \"client.eth0\"\naddr = \"10.0.0.1\"\n",
        TWO_HOSTS.replace("custom-echo", "echo")
    );
    let err = Scenario::from_toml(&text).unwrap().build(None).unwrap_err();
    assert!(err.to_string().contains("belongs to `server.eth0`"), "{err}");
}

/// An app with handshakes, as a protocol app reports them: two of kind `quick` (10 and 30 ms,
/// 100 bytes each), one of kind `slow` untimed, one failed.
struct Handshaking;

impl fastshake_core::SansIo for Handshaking {
    fn handle_datagram(&mut self, _: fastshake_core::Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {}
    fn poll_transmit(&mut self, _: fastshake_core::Instant) -> Option<fastshake_core::Transmit> {
        None
    }
    fn poll_timeout(&self) -> Option<fastshake_core::Instant> {
        None
    }
    fn handle_timeout(&mut self, _: fastshake_core::Instant) {}
}

impl fastshake_sim::apps::App for Handshaking {
    fn handshakes(&self) -> Option<HandshakeStats> {
        let mut stats = HandshakeStats { planned: Some(4), failed: 1, ..HandshakeStats::default() };
        stats.complete("quick", Some(30_000_000), 100);
        stats.complete("quick", Some(10_000_000), 100);
        stats.complete("slow", None, 400);
        Some(stats)
    }
}

fn with_handshaking_app(expect: &str) -> Result<Report, fastshake_sim::scenario::ScenarioError> {
    let text = format!("{}\n{expect}", TWO_HOSTS.replace("custom-echo", "handshaking"));
    let scenario = Scenario::from_toml(&text)?;
    let out = scenario.run_with(None, false, None, &mut |spec, _sim| {
        Ok((spec.kind == "handshaking").then(|| Box::new(Handshaking) as Box<dyn fastshake_sim::apps::App>))
    })?;
    Ok(out.report)
}

#[test]
fn apps_with_handshakes_get_a_section_of_the_report_and_expectations_are_checked() {
    let expect =
        "[[expect]]\napp = \"server:handshaking\"\nhandshakes = 3\nkinds = { quick = 2, slow = 1 }\n\n\
                  [[expect]]\napp = \"client:ping\"\nreplies = 0\n"; // nothing answers the pings
    let report = with_handshaking_app(expect).unwrap();
    assert!(report.apps[0].handshakes.is_none(), "ping has none");
    let hs = report.apps[1].handshakes.as_ref().expect("the section");
    assert_eq!((hs.planned, hs.completed, hs.failed), (Some(4), 3, 1));
    assert_eq!((hs.duration_p50_ms, hs.duration_max_ms), (Some(10.0), Some(30.0)), "the timed ones");
    assert_eq!((hs.bytes, hs.bytes_per_handshake), (600, Some(200.0)));
    let e = report.expectations.as_ref().expect("checked");
    assert_eq!((e.checked, e.unmet.len()), (4, 0), "{:?}", e.unmet);
    let table = report.to_table();
    let row =
        table.lines().find(|l| l.starts_with("server:handshaking") && l.contains("3/4")).expect("a row");
    assert!(row.contains("quick 2, slow 1"), "{row}");
    assert!(table.contains("expectations: 4 checked, all met"));

    let report = with_handshaking_app(
        "[[expect]]\napp = \"server:handshaking\"\nkinds = { slow = 2 }\nanswered = 1\n",
    )
    .unwrap();
    let e = report.expectations.unwrap();
    assert_eq!(
        e.unmet,
        ["server:handshaking: slow handshakes 1, expected 2", "server:handshaking: answered 0, expected 1"]
    );
    let err = with_handshaking_app("[[expect]]\napp = \"nobody\"\nreplies = 1\n").unwrap_err();
    assert!(err.to_string().contains("nobody"), "{err}");
}
