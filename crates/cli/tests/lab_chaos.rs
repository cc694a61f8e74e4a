//! `fastshake lab chaos --json`: a short E6 soak. Every handshake completes and every record
//! arrives exactly once in a subset of the cells (every mode, every stress dimension), with
//! fewer handshakes per cell than the full run; and a seed fixes every figure.

use fastshake_testkit::peers::{run, Fastshake};
use serde_json::Value;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// Every mode, and between them every stress: 3 s delay, Bernoulli and burst loss, duplication
/// and reordering, MTU 96 and 9,000, TSCH, and both "worst" cells (the certificate modes over
/// the lossy TSCH hop are left to the full run: a few thousand virtual seconds each).
const CELLS: &str = "psk/delay-3s,psk/worst-tsch,ecdsa/loss-30,ecdsa/mtu-96,resumed/burst-30,resumed/jumbo,\
                     resumed/tsch,cid/dup-reorder,cid/worst-wan";

fn lab_chaos(args: &[&str]) -> Value {
    let mut command = FASTSHAKE.command();
    command.args(["lab", "chaos", "--json"]).args(args);
    let out = run("fastshake lab chaos", command, Duration::from_secs(600));
    assert!(out.status.success(), "lab chaos failed: {}", out.stderr);
    serde_json::from_slice(&out.stdout).expect("lab chaos prints JSON")
}

fn cells(report: &Value) -> &Vec<Value> {
    report["cells"].as_array().expect("cells")
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut v = v;
    for key in path {
        v = &v[*key];
    }
    v.as_u64().unwrap_or_else(|| panic!("{} is not a count", path.join(".")))
}

#[test]
fn every_handshake_completes_and_every_record_arrives_exactly_once() {
    let report = lab_chaos(&["--only", CELLS, "--handshakes", "200", "--seed", "7"]);
    assert_eq!(cells(&report).len(), CELLS.split(',').count());
    let mut missed = Vec::new();
    for cell in cells(&report) {
        let name = cell["cell"].as_str().expect("a cell name");
        let started = num(cell, &["handshakes", "started"]);
        let completed = num(cell, &["handshakes", "completed"]);
        let failed = num(cell, &["handshakes", "failed"]) + num(cell, &["records", "sessions_failed"]);
        let twice = num(cell, &["records", "delivered_twice"]);
        let lost = num(cell, &["records", "lost"]);
        if failed > 0 || twice > 0 || lost > 0 || completed != started || cell["target_met"] != true {
            missed.push(format!(
                "{name}: {completed} of {started} completed, {failed} failed ({}), {lost} records lost, {twice} delivered \
                 twice; first: {}",
                cell["failures"], cell["failures_listed"][0]
            ));
        }
        // The stress was there, so passing says something.
        let network = &cell["network"];
        match cell["link"]["name"].as_str().expect("a link name") {
            "loss-30" | "burst-30" | "worst-wan" => {
                assert!(num(network, &["lost"]) > 0, "{name}: nothing lost")
            }
            "dup-reorder" => {
                assert!(
                    num(network, &["duplicated"]) > 0 && num(network, &["reordered"]) > 0,
                    "{name}: no dup/reorder"
                )
            }
            _ => {}
        }
        match cell["mode"].as_str().expect("a mode") {
            "resumed" => {
                let declined = num(cell, &["handshakes", "resumptions_declined"]);
                let resumed = num(cell, &["handshakes", "resumed"]);
                if declined > 0 || resumed == 0 {
                    missed.push(format!(
                        "{name}: {resumed} resumed, {declined} answered with a full handshake"
                    ));
                }
            }
            "cid" => {
                let made = num(&cell["moves"], &["made"]);
                let server_completed = num(cell, &["handshakes", "server_completed"]);
                if made != completed || server_completed != completed {
                    missed.push(format!(
                        "{name}: {completed} sessions, {made} moved, {server_completed} handshakes at the server (one \
                         move per session and no new handshake expected)"
                    ));
                }
            }
            _ => {}
        }
    }
    assert!(missed.is_empty(), "target not met in {} cell(s):\n{}", missed.len(), missed.join("\n"));
    assert_eq!(report["totals"]["target_met"], true);
}

/// The report without what differs between runs of a seed (wall-clock time).
fn figures(report: &Value) -> Value {
    let mut report = report.clone();
    report["totals"]["wall_s"] = Value::Null;
    for cell in report["cells"].as_array_mut().expect("cells") {
        cell["wall_s"] = Value::Null;
    }
    report
}

#[test]
fn a_seed_fixes_every_figure() {
    let args = ["--only", "cid/dup-reorder,ecdsa/burst-30", "--handshakes", "16", "--clients", "4"];
    let run = |seed: &str| figures(&lab_chaos(&[&args[..], &["--seed", seed]].concat()));
    let first = run("3");
    assert_eq!(first, run("3"), "the same seed gives the same figures");
    assert_ne!(first["cells"], run("4")["cells"], "another seed gives other figures");
}

/// DTLS 1.3 over the hostile links: PSK, ECDHE-ECDSA with chains of 3 (mutual), the
/// post-quantum hybrid (a 1.4 kB second ClientHello, 15 fragments at MTU 96), resumption by
/// NewSessionTicket, 0-RTT early data and CID with a move mid-session; between them every
/// stress and both "worst" links, each of the last three over the worst WAN and, between them,
/// every stress alone.
const CELLS_13: &str = "psk13/worst-wan,psk13/worst-tsch,ecdsa13/loss-30,ecdsa13/mtu-96,ecdsa13/dup-reorder,\
                        ecdsa13/worst-wan,ecdsa13/worst-tsch,hybrid13/burst-30,hybrid13/delay-3s,hybrid13/worst-wan,\
                        resumed13/loss-30,resumed13/tsch,resumed13/worst-wan,early13/dup-reorder,early13/mtu-96,\
                        early13/burst-30,early13/worst-wan,cid13/delay-3s,cid13/jumbo,cid13/worst-wan";

#[test]
fn dtls_1_3_handshakes_complete_and_records_arrive_exactly_once() {
    let report = lab_chaos(&["--only", CELLS_13, "--handshakes", "100", "--seed", "7"]);
    assert_eq!(cells(&report).len(), CELLS_13.split(',').count());
    for cell in cells(&report) {
        let name = cell["cell"].as_str().expect("a cell name");
        let started = num(cell, &["handshakes", "started"]);
        let completed = num(cell, &["handshakes", "completed"]);
        let failed = num(cell, &["handshakes", "failed"]) + num(cell, &["records", "sessions_failed"]);
        let (twice, lost) = (num(cell, &["records", "delivered_twice"]), num(cell, &["records", "lost"]));
        assert!(
            failed == 0 && twice == 0 && lost == 0 && completed == started && cell["target_met"] == true,
            "{name}: {completed} of {started} completed, {failed} failed, {lost} lost, {twice} twice: {}",
            cell["failures_listed"][0]
        );
        let network = &cell["network"];
        match cell["link"]["name"].as_str().expect("a link name") {
            "loss-30" | "burst-30" | "worst-wan" => {
                assert!(num(network, &["lost"]) > 0, "{name}: nothing lost")
            }
            "dup-reorder" => assert!(
                num(network, &["duplicated"]) > 0 && num(network, &["reordered"]) > 0,
                "{name}: no dup/reorder"
            ),
            _ => {}
        }
        let mode = cell["mode"].as_str().expect("a mode");
        if mode == "resumed13" || mode == "early13" {
            // Each full handshake is followed by a resumption by its ticket, none answered with
            // a full handshake.
            let resumed = num(cell, &["handshakes", "resumed"]);
            assert_eq!(resumed * 2, started, "{name}: {resumed} resumed of {started} handshakes");
            assert_eq!(num(cell, &["handshakes", "resumptions_declined"]), 0, "{name}");
            assert!(
                num(cell, &["handshakes", "tickets_received"]) >= resumed,
                "{name}: a ticket per full session"
            );
        }
        if mode == "early13" {
            // Every resumption sent its first request as 0-RTT; the server took it or refused
            // it, and the early record arrived at most once — always, where nothing was lost.
            let early = &cell["early"];
            let resumed = num(cell, &["handshakes", "resumed"]);
            let (sent, accepted, refused) =
                (num(early, &["sent"]), num(early, &["accepted"]), num(early, &["refused"]));
            assert_eq!((sent, accepted + refused), (resumed, resumed), "{name}: {early}");
            let delivered = num(early, &["delivered_0rtt"]) + num(early, &["delivered_after_handshake"]);
            assert!(delivered <= sent, "{name}: {early}");
            assert!(num(early, &["delivered_0rtt"]) <= num(early, &["server_accepted"]), "{name}: {early}");
            if num(network, &["lost"]) == 0 {
                assert_eq!(delivered, sent, "{name}: nothing lost, every early record arrives: {early}");
            }
        }
        if mode == "cid13" {
            let made = num(&cell["moves"], &["made"]);
            let server_completed = num(cell, &["handshakes", "server_completed"]);
            assert!(
                made == completed && server_completed == completed,
                "{name}: {completed} sessions, {made} moved, {server_completed} handshakes at the server (one move per \
                 session and no new handshake expected)"
            );
        }
    }
}
