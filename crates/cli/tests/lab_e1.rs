//! `fastshake lab e1 --json`: the handover experiment in the simulator, checked for behaviour
//! (every message acknowledged and delivered once, one new session per handover for standard
//! DTLS and none for the others, the ideal bound never beaten, runs reproducible by seed). The
//! session-keeping strategies behind NATs: `lab_e1_mobility.rs`.

use fastshake_testkit::peers::lab::{self, num, rows, runs, strategy};
use fastshake_testkit::peers::Fastshake;
use serde_json::Value;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

fn lab_e1(args: &[&str]) -> Value {
    lab::e1(FASTSHAKE, 60, args)
}

/// Every message of every run of `strategies` is acknowledged and reaches the server's
/// application exactly once, although outages lose copies and the client sends again.
fn assert_exactly_once(report: &Value, strategies: &[&str]) {
    let mut outages = 0;
    let mut copies_beyond_first = 0;
    for (cell, row) in rows(report) {
        if !strategies.contains(&strategy(row)) {
            continue;
        }
        assert!(!runs(row).is_empty(), "{} ran in {}", strategy(row), cell["cell"]);
        for run in runs(row) {
            assert!(run["wct_s"].as_f64().is_some(), "run finished: {run}");
            assert_eq!(num(run, "acknowledged"), 60, "every message acknowledged: {run}");
            assert_eq!(num(run, "delivered_once"), 60, "{}: each delivered once: {run}", strategy(row));
            assert_eq!(num(run, "delivered_more_than_once"), 0);
            outages += num(run, "outages");
            copies_beyond_first += num(run, "server_copies_beyond_first");
        }
    }
    // The runs did cross outages, and some message reached the server twice (its first
    // acknowledgement lost), so delivering once was not a matter of luck.
    assert!(outages > 0);
    assert!(copies_beyond_first > 0);
}

#[test]
fn every_message_is_acknowledged_and_delivered_once_across_outages() {
    let report = lab_e1(&["--delays", "30,100", "--seeds", "3"]);
    assert_exactly_once(&report, &["standard-full", "oracle"]);
}

/// Resumed reconnection, when the engine resumes: the server must know the resumed session's
/// client (its PSK identity) to keep delivering each message once across sessions.
#[test]
fn resumed_reconnection_delivers_each_message_once() {
    let report = lab_e1(&["--delays", "30,100", "--seeds", "3"]);
    let resumed = rows(&report).into_iter().find(|(_, row)| strategy(row) == "standard-resumed");
    let (_, row) = resumed.expect("a resumed row");
    if row["status"].is_null() {
        assert_exactly_once(&report, &["standard-resumed"]);
    }
}

#[test]
fn standard_dtls_sets_up_one_new_session_per_handover() {
    let report = lab_e1(&["--delays", "100", "--seeds", "3"]);
    let mut outages = 0;
    for (cell, row) in rows(&report) {
        if cell["cell"]["multihomed"].as_bool() != Some(false) {
            continue;
        }
        for run in runs(row) {
            let (handshakes, broken) = (num(run, "handshakes"), num(run, "reconnections"));
            match strategy(row) {
                "standard-full" | "standard-resumed" => {
                    // Each outage is a handover to a new address that the session cannot follow.
                    assert_eq!(handshakes, num(run, "outages") + 1, "{run}");
                    assert_eq!(broken, num(run, "outages"), "{run}");
                    outages += num(run, "outages");
                }
                "oracle" | "cid" | "ipc" | "tcs" => {
                    assert_eq!(handshakes, 1, "{}: the session follows the client: {run}", strategy(row));
                    assert_eq!(broken, 0);
                }
                other => panic!("unexpected runs for {other}"),
            }
        }
    }
    // 60 round trips of 200 ms outlast the first outage (at most 10 s in).
    assert!(outages >= 3);
}

#[test]
fn resumed_reconnections_resume_when_the_engine_can() {
    let report = lab_e1(&["--delays", "100", "--seeds", "2"]);
    for (_, row) in rows(&report) {
        if strategy(row) != "standard-resumed" {
            continue;
        }
        match row["status"].as_str() {
            // Without resumption in the engine the row says so and carries no figures.
            Some(status) => {
                assert!(status.contains("does not resume"), "{status}");
                assert!(runs(row).is_empty() && row["mean_wct_s"].is_null());
            }
            None => {
                for run in runs(row) {
                    assert_eq!(num(run, "resumed_handshakes"), num(run, "reconnections"), "{run}");
                }
            }
        }
    }
}

#[test]
fn no_run_beats_the_ideal_bound() {
    let report = lab_e1(&["--delays", "5,30,100", "--seeds", "3", "--outage-ms", "1500"]);
    let mut checked = 0;
    for (_, row) in rows(&report) {
        for run in runs(row) {
            let wct = run["wct_s"].as_f64().expect("finished");
            let ideal = run["ideal_s"].as_f64().expect("ideal");
            assert!(wct >= ideal, "{} beat the ideal bound: {run}", strategy(row));
            checked += 1;
        }
    }
    assert!(checked >= 3 * 2 * 3 * 2);
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    let args = ["--delays", "30,100", "--seeds", "2", "--nat", "port-restricted"];
    assert_eq!(lab_e1(&args), lab_e1(&args));
}
