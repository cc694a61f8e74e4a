//! E1 on real sockets, shortened: `fastshake netlab e1` (what `fastshake lab e1 --real` runs) with
//! 60 messages, a 5 ms delay and an outage of 300 ms every 1.5 s, in network namespaces, in DTLS
//! 1.2 and 1.3.
//!
//! Each run builds its own testbed (client, router with the delay relay, server) and removes it.
//! The tests assert what must hold whatever the timing: every message acknowledged, delivered
//! exactly once, at least one outage inside the run; the strategies that keep their session do
//! so with their one handshake, standard DTLS reconnects. Without root or network namespaces the
//! tests print why and pass as skipped.

use fastshake_testkit::peers::{netlab_unavailable, run, Fastshake};
use serde_json::Value;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));
const MESSAGES: u64 = 60;

macro_rules! skip_unless_netns {
    ($test:expr) => {
        if let Some(reason) = netlab_unavailable() {
            println!("skipped {}: {reason}", $test);
            return;
        }
    };
}

/// Runs the shortened E1 with `extra` arguments and returns its JSON report.
fn run_e1(extra: &[&str]) -> Value {
    let messages = MESSAGES.to_string();
    let mut args = vec![
        "netlab",
        "e1",
        "--json",
        "--messages",
        &messages,
        "--delays",
        "5",
        "--outage-period-ms",
        "1500",
        "--outage-ms",
        "300",
        "--first-outage-ms",
        "200",
    ];
    args.extend_from_slice(extra);
    let mut command = FASTSHAKE.command();
    command.args(&args);
    let out = run("fastshake netlab e1", command, Duration::from_secs(600));
    assert!(out.status.success(), "fastshake {} failed: {}", args.join(" "), out.stderr);
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

fn rows(report: &Value) -> Vec<&Value> {
    report["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .flat_map(|cell| cell["rows"].as_array().expect("rows").iter())
        .collect()
}

fn strategy(row: &Value) -> &str {
    row["strategy"].as_str().expect("a strategy name")
}

/// The strategies of the rows in DTLS `version`.
fn strategies_in<'a>(rows: &[&'a Value], version: &str) -> Vec<&'a str> {
    rows.iter().filter(|row| row["version"] == version).map(|row| strategy(row)).collect()
}

fn keeps_its_session(strategy: &str) -> bool {
    !strategy.starts_with("standard")
}

/// Every run of the row finished with every message acknowledged and delivered exactly once, and
/// lived through an outage; a session-keeping strategy never handshook again, standard DTLS did.
fn assert_sound(row: &Value) {
    let name = strategy(row);
    assert!(row["status"].is_null(), "{name}: {}", row["status"]);
    let runs = row["runs"].as_array().expect("runs");
    assert!(!runs.is_empty(), "{name}: no run");
    for run in runs {
        assert!(run["wct_s"].as_f64().is_some_and(|wct| wct > 0.0), "{name} did not finish: {run}");
        assert_eq!(run["acknowledged"], MESSAGES, "{name}: {run}");
        assert_eq!(run["delivered_once"], MESSAGES, "{name}: {run}");
        assert_eq!(run["delivered_more_than_once"], 0, "{name}: {run}");
        assert!(run["outages"].as_u64().is_some_and(|n| n >= 1), "{name}: no outage inside the run: {run}");
        let handshakes = run["handshakes"].as_u64().expect("handshakes");
        let reconnections = run["reconnections"].as_u64().expect("reconnections");
        if keeps_its_session(name) {
            assert_eq!((handshakes, reconnections), (1, 0), "{name} handshook again: {run}");
        } else {
            assert!(reconnections >= 1, "{name} lived through the outage without reconnecting: {run}");
            assert_eq!(handshakes, reconnections + 1, "{name}: {run}");
        }
    }
}

fn runs(row: &Value) -> &Vec<Value> {
    row["runs"].as_array().expect("runs")
}

#[test]
fn every_strategy_single_homed_delivers_every_message_once() {
    skip_unless_netns!("every_strategy_single_homed_delivers_every_message_once");
    let report = run_e1(&["--homing", "single", "--dtls", "both"]);
    let rows = rows(&report);
    for version in ["1.2", "1.3"] {
        let names = strategies_in(&rows, version);
        for expected in ["standard-full", "standard-resumed", "oracle", "cid", "ipc", "tcs"] {
            assert!(names.contains(&expected), "no {expected} row in DTLS {version}: {names:?}");
        }
    }
    for row in rows {
        assert_sound(row);
        if strategy(row) == "standard-resumed" {
            for run in runs(row) {
                assert_eq!(
                    run["resumed_handshakes"], run["reconnections"],
                    "every reconnection resumed: {run}"
                );
            }
        }
    }
}

#[test]
fn every_strategy_on_the_dtls_driver_delivers_every_message_once() {
    skip_unless_netns!("every_strategy_on_the_dtls_driver_delivers_every_message_once");
    let report = run_e1(&["--homing", "single", "--peers", "driver", "--dtls", "both"]);
    let rows = rows(&report);
    for version in ["1.2", "1.3"] {
        let names = strategies_in(&rows, version);
        for expected in ["standard-full", "standard-resumed", "cid", "ipc", "tcs"] {
            assert!(names.contains(&expected), "no {expected} row in DTLS {version}: {names:?}");
        }
    }
    for row in rows {
        assert_sound(row);
        if strategy(row) == "standard-resumed" {
            for run in runs(row) {
                assert_eq!(
                    run["resumed_handshakes"], run["reconnections"],
                    "every reconnection resumed: {run}"
                );
            }
        }
    }
}

#[test]
fn multihomed_client_keeps_its_session_across_interleaved_outages() {
    skip_unless_netns!("multihomed_client_keeps_its_session_across_interleaved_outages");
    let report = run_e1(&["--homing", "multi", "--strategies", "standard-full,tcs", "--dtls", "both"]);
    let rows = rows(&report);
    assert_eq!(rows.len(), 4, "two strategies in two versions");
    for row in &rows {
        assert_sound(row);
    }
}

/// Seed 001's argument for TCS, on real sockets: behind a port-restricted NAT (nftables
/// masquerade), IPC's ServerHello from a new port is filtered out and its handshake never
/// completes, while TCS, which answers from the welcome port and moves later, goes through.
#[test]
fn ipc_fails_behind_a_port_restricted_nat_while_tcs_succeeds() {
    skip_unless_netns!("ipc_fails_behind_a_port_restricted_nat_while_tcs_succeeds");
    assert_ipc_filtered_tcs_through(&[]);
}

/// The same with the DTLS driver's server sockets (IPC's own socket, TCS's temporary connected
/// socket on the welcome port).
#[test]
fn on_the_dtls_driver_ipc_fails_behind_a_port_restricted_nat_while_tcs_succeeds() {
    skip_unless_netns!("on_the_dtls_driver_ipc_fails_behind_a_port_restricted_nat_while_tcs_succeeds");
    assert_ipc_filtered_tcs_through(&["--peers", "driver"]);
}

fn assert_ipc_filtered_tcs_through(extra: &[&str]) {
    // DTLS 1.2 alone: a run whose handshake never completes lasts its whole 30 s bound.
    let mut args =
        vec!["--homing", "single", "--nat", "port-restricted", "--strategies", "ipc,tcs", "--dtls", "1.2"];
    args.extend_from_slice(extra);
    let report = run_e1(&args);
    let rows = rows(&report);
    let ipc = rows.iter().find(|row| strategy(row) == "ipc").expect("an ipc row");
    for run in runs(ipc) {
        assert!(run["wct_s"].is_null(), "IPC finished behind the NAT: {run}");
        assert_eq!(run["handshakes"], 0, "IPC completed a handshake behind the NAT: {run}");
        assert_eq!(run["delivered_once"], 0, "{run}");
    }
    let tcs = rows.iter().find(|row| strategy(row) == "tcs").expect("a tcs row");
    assert_sound(tcs);
}
