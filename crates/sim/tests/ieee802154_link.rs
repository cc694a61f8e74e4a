//! IEEE 802.15.4 links delegate to a duty-cycled MAC model: the core schedules delivery when
//! the MAC says, counts its frames, captures them, and reports the radios' energy.

use fastshake_sim::scenario::{ieee802154_chain_toml, tsch_fields, Scenario};
use pcap_file::pcap::PcapReader;

/// sensor —tsch— relay —tsch— root: ping/echo over two TSCH hops.
fn tsch_chain() -> String {
    let radios = ieee802154_chain_toml(&["sensor", "relay", "root"], "radio", &tsch_fields(11, 1));
    format!("seed = 3\nduration_s = 60\n\n{radios}{APPS}")
}

const APPS: &str = r#"
[[app]]
node = "sensor"
kind = "ping"
port = 5000
server = "10.0.1.1:7"
count = 5
interval_ms = 5000
payload = 150

[[app]]
node = "root"
kind = "echo"
port = 7
"#;

#[test]
fn tsch_chain_carries_ping_and_echo_with_frames_and_energy() {
    let scenario = Scenario::from_toml(&tsch_chain()).unwrap();
    let out = scenario.run(None, true, None).unwrap();
    let report = &out.report;
    let ping = &report.apps[0];
    assert_eq!(ping.replies, 5, "{}", report.to_table());
    // Four TSCH hops per round trip, each at least one 10 ms timeslot.
    assert!(ping.rtt_median_ms.unwrap() >= 40.0);
    let hop1_up = &report.links[0].b_to_a; // sensor → relay
    assert_eq!(hop1_up.datagrams_sent, 5);
    // 150 payload bytes and 17 bytes of 6LoWPAN headers (mesh addresses, one IID inline) do
    // not fit one frame's 104 bytes: every datagram is fragmented, FRAG1 and FRAGN.
    assert!(hop1_up.frames >= 2 * hop1_up.datagrams_sent, "{hop1_up:?}");
    assert_eq!(report.radios.len(), 3);
    for radio in &report.radios {
        assert!(radio.energy_mj > 0.0 && radio.tx_ms > 0.0, "{radio:?}");
        let total = radio.tx_ms + radio.rx_ms + radio.listen_ms + radio.sleep_ms;
        assert!((total - 60_000.0).abs() < 1e-3, "{} ms booked for {}", total, radio.node);
    }
    let frames = out.frames_pcap.expect("frames captured");
    let mut reader = PcapReader::new(&frames[..]).unwrap();
    assert_eq!(reader.header().datalink, pcap_file::DataLink::IEEE802_15_4);
    let mut count = 0u64;
    while let Some(p) = reader.next_packet() {
        assert!(p.unwrap().data.len() <= 127);
        count += 1;
    }
    let total_frames: u64 = report.links.iter().map(|l| l.a_to_b.frames + l.b_to_a.frames).sum();
    assert_eq!(count, total_frames);
}

#[test]
fn tsch_runs_are_deterministic() {
    let scenario = Scenario::from_toml(&tsch_chain()).unwrap();
    let a = scenario.run(Some(9), true, None).unwrap();
    let b = scenario.run(Some(9), true, None).unwrap();
    assert_eq!(a.pcap, b.pcap);
    assert_eq!(a.frames_pcap, b.frames_pcap);
}

#[test]
fn scenario_power_profile_scales_energy() {
    let default = Scenario::from_toml(&tsch_chain()).unwrap().run(None, false, None).unwrap().report;
    // The CC2520 currents doubled: the same radio times cost twice the energy.
    let doubled = tsch_chain().replace(
        "duration_s = 60",
        "duration_s = 60\npower = { name = \"2x\", supply_v = 2.8, tx_ma = 51.6, rx_ma = 37.0, \
         listen_ma = 37.0, sleep_ma = 0.00006 }",
    );
    let doubled = Scenario::from_toml(&doubled).unwrap().run(None, false, None).unwrap().report;
    for (a, b) in default.radios.iter().zip(&doubled.radios) {
        assert_eq!(a.tx_ms, b.tx_ms);
        assert!((b.energy_mj / a.energy_mj - 2.0).abs() < 1e-9, "{} vs {}", a.energy_mj, b.energy_mj);
    }
}
