//! E6 on real sockets, shortened: `fastshake netlab chaos` (what `fastshake lab chaos-real` runs)
//! with fewer clients and two short waves, in network namespaces.
//!
//! The product server (`fastshake server --echo --mobility cid`, PSK and an ECDSA chain of three on
//! one port, DTLS 1.2 and 1.3) and one load process of concurrent clients (both versions), through the delay relay with loss,
//! duplication and reordering. The test asserts what must hold whatever the timing: every
//! handshake completes, every record is echoed, none twice, every client that moved kept its
//! session, the server reports no failure, and its memory after the clients are gone is within the
//! report's tolerance of the warm baseline. It never asserts a time. Without root or network
//! namespaces it prints why and passes as skipped.

use fastshake_testkit::peers::{netlab_unavailable, run, Fastshake};
use serde_json::Value;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

fn count(value: &Value, key: &str) -> u64 {
    value[key].as_u64().unwrap_or_else(|| panic!("no count {key} in {value}"))
}

fn row<'a>(report: &'a Value, kind: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|row| row["kind"] == kind)
        .unwrap_or_else(|| panic!("no row {kind}"))
}

#[test]
fn every_handshake_completes_and_every_record_arrives_once_through_a_lossy_duplicating_path() {
    if let Some(reason) = netlab_unavailable() {
        println!("skipped every_handshake_completes_and_every_record_arrives_once_through_a_lossy_duplicating_path: {reason}");
        return;
    }
    // The idle timeout is longer than the gaps of a client's handshake retransmissions that a few
    // losses in a row make (1, 2, 4 s): a shorter one meets the engine defect the soak reported
    // (the idle sweep ends a handshake the client has not finished). The pause outlasts it, so
    // sessions whose close_notify was lost are gone before the memory is read.
    let args = [
        "netlab",
        "chaos",
        "--json",
        "--duration",
        "10",
        "--clients",
        "12",
        "--waves",
        "2",
        "--loss",
        "0.05",
        "--duplicate",
        "0.05",
        "--reorder",
        "0.05",
        "--delay-ms",
        "20",
        "--idle-timeout-s",
        "5",
        "--pause-s",
        "6.5",
        "--move-every",
        "3",
    ];
    let mut command = FASTSHAKE.command();
    command.args(args);
    let out = run("fastshake netlab chaos", command, Duration::from_secs(600));
    assert!(out.status.success(), "fastshake {} failed: {}", args.join(" "), out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    println!("{}", serde_json::to_string_pretty(&report["rows"]).unwrap_or_default());
    println!("{}", serde_json::to_string_pretty(&report["memory"]).unwrap_or_default());

    let all = row(&report, "all");
    assert!(count(all, "clients") >= 24, "too few clients ran: {all}");
    assert_eq!(count(all, "handshakes_failed"), 0, "failures: {}", report["failure_samples"]);
    assert_eq!(count(all, "duplicates"), 0, "a record was delivered twice: {all}");
    assert_eq!(count(all, "lost"), 0, "a record was lost after every resend: {all}");
    assert_eq!(count(all, "session_failures"), 0, "failures: {}", report["failure_samples"]);
    assert_eq!(count(all, "echoed"), count(all, "records"), "{all}");
    // Every kind ran: both PSK suites, both ECDSA suites, DTLS 1.3 with PSK and certificates,
    // resumption both ways, moves.
    for kind in [
        "PSK CCM_8",
        "PSK GCM",
        "ECDSA CCM_8",
        "ECDSA GCM",
        "1.3 PSK CCM_8",
        "1.3 ECDSA GCM",
        "resumed by ticket",
        "resumed by session ID",
    ] {
        assert!(
            count(row(&report, kind), "handshakes_ok") > 0,
            "no {kind} handshake: {}",
            row(&report, kind)
        );
    }
    let moves = &report["moves"];
    assert!(count(moves, "moved") > 0, "no client moved: {moves}");
    assert_eq!(count(moves, "moved"), count(moves, "planned"), "{moves}");
    assert_eq!(
        count(moves, "kept_session"),
        count(moves, "moved"),
        "a moved client lost its session: {moves}"
    );
    assert_eq!(count(&report["server"], "other_failures"), 0, "server: {}", report["server"]);
    assert_eq!(report["resumption_declined"], 0, "{report}");
    // The path really was spoiled.
    let relay = &report["relay"];
    for key in ["dropped_loss", "duplicated", "reordered"] {
        assert!(count(relay, key) > 0, "the relay never did {key}: {relay}");
    }
    // Memory: after the second wave and its pause, within the report's tolerance of the baseline
    // read after the first: 1 MiB of allocator slack plus 512 B per full handshake for the
    // session-ID cache. A server that kept every session it served (tens of KiB each with its
    // buffers and flights, over a hundred sessions a wave) would exceed it.
    let memory = &report["memory"];
    assert!(count(memory, "baseline_kib") > 0, "{memory}");
    let growth = memory["growth_kib"].as_i64().expect("growth");
    assert!(
        growth <= count(memory, "tolerance_kib") as i64,
        "the server's memory grew by {growth} KiB from the warm baseline: {memory}"
    );
    assert_eq!(memory["flat"], true, "{memory}");
    assert_eq!(report["verdict"]["met"], true, "{}", report["verdict"]);
}
