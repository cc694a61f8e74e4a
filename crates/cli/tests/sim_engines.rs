//! `fastshake sim` with the lab's DTLS and SCTP apps: the summary has a handshakes table
//! (completed/failed, durations, bytes, kinds), `--json` carries the same, and a run that misses
//! one of the file's `[[expect]]` tables fails the command after printing it.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name)
}

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastshake")).arg("sim").args(args).output().expect("run fastshake sim")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "fastshake sim failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn app<'a>(report: &'a Value, name: &str) -> &'a Value {
    let apps = report["apps"].as_array().expect("apps");
    apps.iter().find(|a| a["name"] == name).unwrap_or_else(|| panic!("no app {name}"))
}

#[test]
fn the_summary_has_a_handshakes_table_beside_the_apps() {
    let path = scenario("sctp-zero-rtt.toml");
    let text = stdout(&sim(&[path.to_str().unwrap()]));
    let table = text.split("\nhandshakes").nth(1).expect("a handshakes table");
    let row = table.lines().find(|l| l.starts_with("zero-rtt ")).expect("a row for the zero-RTT client");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["3/3", "0", "0"], "{row}");
    assert!(row.contains("alt-cached+0rtt 2") && row.contains("alt-cookie+0rtt 1"), "{row}");
    assert!(text.contains("expectations: 11 checked, all met"), "{text}");
}

#[test]
fn json_carries_the_handshakes_and_a_seed_fixes_them() {
    let path = scenario("dtls-cid-handover.toml");
    let run =
        || -> Value { serde_json::from_str(&stdout(&sim(&[path.to_str().unwrap(), "--json"]))).unwrap() };
    let report = run();
    let client = &app(&report, "client")["handshakes"];
    assert_eq!(client["planned"], 1);
    assert_eq!(client["completed"], 1, "one handshake across the handover: {client}");
    assert_eq!(client["failed"], 0);
    assert_eq!(client["kinds"]["full"], 1);
    assert!(client["duration_p50_ms"].as_f64().unwrap() > 0.0);
    assert!(client["bytes"].as_u64().unwrap() > 0);
    assert_eq!(app(&report, "client")["replies"], 60, "every record echoed from both addresses");
    assert_eq!(report["nats"][0]["counters"]["mappings_created"], 2, "the client did change address");
    assert_eq!(report["expectations"]["unmet"].as_array().map(Vec::len), Some(0));
    assert_eq!(report, run());
    let ping = serde_json::from_str::<Value>(&stdout(&sim(&[
        scenario("lossy-link.toml").to_str().unwrap(),
        "--json",
    ])))
    .unwrap();
    assert!(app(&ping, "client:ping")["handshakes"].is_null(), "ping has no handshakes");
}

#[test]
fn an_unmet_expectation_fails_the_command() {
    let text = std::fs::read_to_string(scenario("dtls-resumption.toml")).unwrap();
    let wrong = text.replacen("replies = 12", "replies = 13", 1);
    assert_ne!(text, wrong);
    let path = std::env::temp_dir().join(format!("fastshake-sim-expect-{}.toml", std::process::id()));
    std::fs::write(&path, wrong).unwrap();
    let out = sim(&[path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success(), "the command fails");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not met: ecdsa: replies 12, expected 13"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 expectation(s)"));
}

#[test]
fn an_engine_app_with_a_bad_setting_is_refused_by_name() {
    let text = std::fs::read_to_string(scenario("dtls-strategies.toml")).unwrap();
    let wrong = text.replacen("mobility = \"tcs\"", "mobility = \"roaming\"", 1);
    let path = std::env::temp_dir().join(format!("fastshake-sim-bad-{}.toml", std::process::id()));
    std::fs::write(&path, wrong).unwrap();
    let out = sim(&[path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("roaming") && err.contains("ipc"), "{err}");
}
