//! `pion-peer` (interop/pion): a DTLS peer on pion/dtls, built once per test binary with the Go
//! toolchain. Without Go, or when its modules cannot be downloaded, the tests say why and pass without
//! running, unless `FASTSHAKE_REQUIRE_PION=1` (CI sets it where it installs Go) turns that into a failure.
#![allow(dead_code)]

use super::peers::{Peer, PSK_HEX, PSK_IDENTITY};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built `pion-peer`, or why there is none.
pub fn pion_peer_binary() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            let required = std::env::var("FASTSHAKE_REQUIRE_PION").is_ok_and(|v| v == "1");
            assert!(!required, "FASTSHAKE_REQUIRE_PION=1 but pion-peer is not available: {why}");
            eprintln!("skipped: pion-peer is not available: {why}");
            None
        }
    }
}

/// `go` on the PATH, else where the Go tarball installs it.
fn go_tool() -> Option<PathBuf> {
    let on_path = Command::new("go").arg("version").output().is_ok_and(|out| out.status.success());
    if on_path {
        return Some(PathBuf::from("go"));
    }
    let tarball = Path::new("/usr/local/go/bin/go");
    tarball.exists().then(|| tarball.to_path_buf())
}

fn go_command(go: &Path, source: &Path) -> Command {
    let mut command = Command::new(go);
    // go.sum is committed: modules are checked against it; no VCS stamping (the tree may be a worktree).
    command.current_dir(source).env("GOFLAGS", "-mod=mod -buildvcs=false");
    command
}

fn build() -> Result<PathBuf, String> {
    let go = go_tool().ok_or("no `go` on the PATH nor at /usr/local/go/bin/go")?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/pion");
    // A download failure (no registry) is a reason to skip; a compile failure below is a bug.
    let download = go_command(&go, &source)
        .args(["mod", "download"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", go.display()))?;
    if !download.status.success() {
        return Err(format!("go mod download failed: {}", String::from_utf8_lossy(&download.stderr)));
    }
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pion-peer");
    let built = go_command(&go, &source)
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", go.display()))?;
    assert!(
        built.status.success(),
        "go build of interop/pion failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    Ok(binary)
}

/// `pion-peer server --listen 127.0.0.1:0 ARGS` with the shared PSK, ready; returns it and its port.
pub fn pion_server(binary: &Path, suite: &str, extra: &[&str]) -> (Peer, u16) {
    let mut command = Command::new(binary);
    command
        .args(["server", "--listen", "127.0.0.1:0", "--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX])
        .args(["--suite", suite])
        .args(extra);
    let peer = Peer::spawn("pion-peer server", command);
    peer.expect_stderr("listening on 127.0.0.1:");
    let port = peer
        .stderr()
        .split("listening on 127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no port in pion-peer's banner\n{}", peer.transcript()));
    (peer, port)
}

/// `pion-peer client --connect 127.0.0.1:PORT ARGS` with the shared PSK.
pub fn pion_client(binary: &Path, port: u16, suite: &str, extra: &[&str]) -> Peer {
    let mut command = Command::new(binary);
    command
        .args(["client", "--connect", &format!("127.0.0.1:{port}"), "--psk-identity", PSK_IDENTITY])
        .args(["--psk", PSK_HEX, "--suite", suite])
        .args(extra);
    Peer::spawn("pion-peer client", command)
}

/// The encrypted records the pion client counted on its socket, by kind, from its closing line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordCounts {
    pub sent_cid: u64,
    pub sent_plain: u64,
    pub received_cid: u64,
    pub received_plain: u64,
    pub local_port_changes: u64,
}

/// Reads "encrypted records sent: A tls12_cid, B plain; received: C tls12_cid, D plain; local port
/// changes: E" from the pion client's stderr.
pub fn record_counts(client: &Peer) -> RecordCounts {
    let stderr = client.stderr();
    let line = stderr
        .lines()
        .find(|line| line.contains("encrypted records sent:"))
        .unwrap_or_else(|| panic!("no record counts from the pion client\n{}", client.transcript()));
    let numbers: Vec<u64> =
        line.split_whitespace().filter_map(|word| word.trim_end_matches([',', ';']).parse().ok()).collect();
    let [sent_cid, sent_plain, received_cid, received_plain, local_port_changes] = numbers[..] else {
        panic!("cannot read the record counts in {line:?}");
    };
    RecordCounts { sent_cid, sent_plain, received_cid, received_plain, local_port_changes }
}

/// The line pion prints when its handshake is done: "... cid out: X; cid in: Y".
pub fn pion_handshake_line(peer: &Peer) -> String {
    peer.expect_stderr("handshake done:");
    let stderr = peer.stderr();
    stderr
        .lines()
        .find(|line| line.contains("handshake done:"))
        .map(str::to_owned)
        .expect("the line seen above")
}
