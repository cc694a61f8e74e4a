//! Reading the JSON reports of `fastshake lab e1`.

use super::{run, Fastshake};
use serde_json::Value;
use std::time::Duration;

/// Runs `fastshake lab e1 --json --messages N ARGS` (at most ten minutes) and parses its report.
pub fn e1(fastshake: Fastshake, messages: u64, args: &[&str]) -> Value {
    let mut command = fastshake.command();
    command.args(["lab", "e1", "--json", "--messages", &messages.to_string()]).args(args);
    let done = run("fastshake lab e1", command, Duration::from_secs(600));
    assert!(done.status.success(), "lab e1 failed: {}", done.stderr);
    serde_json::from_slice(&done.stdout).expect("lab e1 prints JSON")
}

/// (cell, row) pairs of a report.
pub fn rows(report: &Value) -> Vec<(&Value, &Value)> {
    let cells = report["cells"].as_array().expect("cells");
    cells
        .iter()
        .flat_map(|cell| cell["rows"].as_array().expect("rows").iter().map(move |row| (cell, row)))
        .collect()
}

pub fn runs(row: &Value) -> &Vec<Value> {
    row["runs"].as_array().expect("runs")
}

pub fn num(run: &Value, key: &str) -> u64 {
    run[key].as_u64().unwrap_or_else(|| panic!("{key} in {run}"))
}

pub fn strategy(row: &Value) -> &str {
    row["strategy"].as_str().expect("strategy")
}
