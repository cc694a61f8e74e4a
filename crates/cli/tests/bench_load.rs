//! `fastshake bench load --connect` against a `fastshake server` the test starts: the count asked
//! is the count done, with no failure, and the figures it promises are printed.

use fastshake_testkit::peers::dtls::{PSK_HEX, PSK_IDENTITY};
use fastshake_testkit::peers::{run, Fastshake};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// `fastshake bench` runs `fastshake-bench` from beside `fastshake`. `cargo test --workspace`
/// builds it there; a test of this package alone builds it first.
fn ensure_bench_binary() {
    let fastshake = PathBuf::from(FASTSHAKE.path());
    let bench = fastshake.with_file_name(format!("fastshake-bench{}", std::env::consts::EXE_SUFFIX));
    if bench.exists() {
        return;
    }
    let profile_dir = fastshake.parent().expect("the profile directory");
    let target_dir = profile_dir.parent().expect("the target directory");
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "-p", "fastshake-bench"]).env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo build -p fastshake-bench");
    assert!(status.success(), "cargo build -p fastshake-bench failed");
}

fn load(port: u16, server_pid: u32, extra: &[&str]) -> String {
    ensure_bench_binary();
    let mut command = FASTSHAKE.command();
    command
        .args(["bench", "load", "--connect", &format!("127.0.0.1:{port}")])
        .args(["--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX, "--server-pid", &server_pid.to_string()])
        .args(["--concurrency", "4", "--duration", "120"])
        .args(extra);
    let finished = run("fastshake bench load", command, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&finished.stdout).into_owned();
    assert!(finished.status.success(), "bench load failed:\n{stdout}\n{}", finished.stderr);
    stdout
}

fn line_value<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(label))
        .unwrap_or_else(|| panic!("no line {label:?} in:\n{stdout}"))
        .trim()
}

#[test]
fn bench_load_completes_the_count_asked_without_failure() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--quiet"]);
    let stdout = load(port, server.pid(), &["--handshakes", "24", "--records", "2", "--record-size", "48"]);
    assert_eq!(line_value(&stdout, "completed handshakes:"), "24", "{stdout}");
    assert_eq!(line_value(&stdout, "failed handshakes:"), "0", "{stdout}");
    assert_eq!(line_value(&stdout, "records echoed:"), "48", "{stdout}");
    assert!(line_value(&stdout, "handshake latency:").contains("p99"), "{stdout}");
    assert!(line_value(&stdout, "server CPU:").contains("per handshake"), "{stdout}");
}

#[test]
fn bench_load_resumes_every_handshake_it_is_asked_to() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--quiet"]);
    // A handshake that does not resume counts as failed ("the server did not resume").
    let stdout = load(port, server.pid(), &["--handshakes", "12", "--resume"]);
    assert_eq!(line_value(&stdout, "completed handshakes:"), "12", "{stdout}");
    assert_eq!(line_value(&stdout, "failed handshakes:"), "0", "{stdout}");
}

#[test]
fn bench_load_counts_handshakes_that_fail_and_says_why() {
    let (server, port) = FASTSHAKE.server(&["--echo", "--quiet"]);
    ensure_bench_binary();
    let mut command = FASTSHAKE.command();
    command
        .args(["bench", "load", "--connect", &format!("127.0.0.1:{port}")])
        .args(["--psk-identity", PSK_IDENTITY, "--psk", "ffeeddccbbaa99887766554433221100"])
        .args(["--handshakes", "3", "--concurrency", "1", "--server-pid", &server.pid().to_string()]);
    let finished = run("fastshake bench load", command, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&finished.stdout).into_owned();
    assert_eq!(line_value(&stdout, "completed handshakes:"), "0", "{stdout}");
    assert_eq!(line_value(&stdout, "failed handshakes:"), "3", "{stdout}");
    assert!(stdout.contains("3 x "), "the reason is counted:\n{stdout}");
}
