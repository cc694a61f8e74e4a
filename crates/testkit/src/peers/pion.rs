//! The pion peers of `interop/`: `pion-peer` (DTLS on pion/dtls, the Connection ID
//! implementation of RFC 9146 we interoperate with), `pion13-peer` (DTLS 1.3 on pion/dtls v4),
//! `pion-sctp-peer` (pion/sctp over UDP encapsulation) and `pion-webrtc-peer` (data channels on
//! pion/webrtc v4), each built once per test binary with the Go toolchain (`fastshake_interop`).
//! Without Go, or when its modules cannot be downloaded, the tests say why and pass without
//! running, unless `FASTSHAKE_REQUIRE_PION=1` (`FASTSHAKE_REQUIRE_PION13=1`,
//! `FASTSHAKE_REQUIRE_PION_SCTP=1`, `FASTSHAKE_REQUIRE_PION_WEBRTC=1`), which `.ci/run` sets where
//! both are there, turns that into a failure.

use super::dtls::{Pki, PSK_HEX, PSK_IDENTITY};
use super::{announced_port, scratch_dir, Peer};
use fastshake_interop::{BuildError, GoPeer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built `pion-peer` (interop/pion), or None (after saying why) when it cannot be built.
pub fn dtls_peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    available(BUILT.get_or_init(|| go_build(GoPeer::PionDtls)), "FASTSHAKE_REQUIRE_PION", "pion-peer")
}

/// The built `pion13-peer` (interop/pion13), or None (after saying why).
pub fn dtls13_peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| go_build(GoPeer::PionDtls13));
    available(built, "FASTSHAKE_REQUIRE_PION13", "pion13-peer")
}

/// The built `pion-sctp-peer` (interop/pion-sctp), or None (after saying why).
pub fn sctp_peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| go_build(GoPeer::PionSctp));
    available(built, "FASTSHAKE_REQUIRE_PION_SCTP", "pion-sctp-peer")
}

/// The built `pion-webrtc-peer` (interop/pion-webrtc), or None (after saying why).
pub fn webrtc_peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| go_build(GoPeer::PionWebrtc));
    available(built, "FASTSHAKE_REQUIRE_PION_WEBRTC", "pion-webrtc-peer")
}

pub(super) fn available(built: &Result<PathBuf, String>, required_by: &str, name: &str) -> Option<PathBuf> {
    match built {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            let required = std::env::var(required_by).is_ok_and(|v| v == "1");
            assert!(!required, "{required_by}=1 but {name} is not available: {why}");
            eprintln!("skipped: {name} is not available: {why}");
            None
        }
    }
}

/// Builds `peer` into the scratch directory. A missing toolchain or module download failure (no
/// proxy) is a reason to skip; a compile failure is a bug and fails the test.
fn go_build(peer: GoPeer) -> Result<PathBuf, String> {
    match fastshake_interop::build(peer, &scratch_dir()) {
        Ok(path) => Ok(path),
        Err(BuildError::Unavailable(why)) => Err(why),
        Err(BuildError::Compile(why)) => panic!("{why}"),
    }
}

/// `pion-peer server --listen 127.0.0.1:0 ARGS` with the shared PSK, ready; returns it and its port.
pub fn dtls_server(binary: &Path, suite: &str, extra: &[&str]) -> (Peer, u16) {
    let mut command = Command::new(binary);
    command
        .args(["server", "--listen", "127.0.0.1:0", "--psk-identity", PSK_IDENTITY, "--psk", PSK_HEX])
        .args(["--suite", suite])
        .args(extra);
    let peer = Peer::spawn("pion-peer server", command);
    let port = announced_port(&peer, "listening on 127.0.0.1:");
    (peer, port)
}

/// `pion-peer client --connect 127.0.0.1:PORT ARGS` with the shared PSK.
pub fn dtls_client(binary: &Path, port: u16, suite: &str, extra: &[&str]) -> Peer {
    let mut command = Command::new(binary);
    command
        .args(["client", "--connect", &format!("127.0.0.1:{port}"), "--psk-identity", PSK_IDENTITY])
        .args(["--psk", PSK_HEX, "--suite", suite])
        .args(extra);
    Peer::spawn("pion-peer client", command)
}

/// `pion-peer server --listen 127.0.0.1:0 --cert CHAIN --key KEY ARGS`: the certificate suites,
/// ready; returns it and its port.
pub fn dtls_cert_server(binary: &Path, pki: &Pki, extra: &[&str]) -> (Peer, u16) {
    let mut command = Command::new(binary);
    command
        .args(["server", "--listen", "127.0.0.1:0", "--cert", &pki.server_cert(), "--key", &pki.server_key()])
        .args(extra);
    let peer = Peer::spawn("pion-peer server", command);
    let port = announced_port(&peer, "listening on 127.0.0.1:");
    (peer, port)
}

/// `pion-peer client --connect 127.0.0.1:PORT --ca ROOT ARGS`: the certificate suites, the
/// server's chain checked against the test root.
pub fn dtls_cert_client(binary: &Path, port: u16, pki: &Pki, extra: &[&str]) -> Peer {
    let mut command = Command::new(binary);
    command.args(["client", "--connect", &format!("127.0.0.1:{port}"), "--ca", &pki.ca()]).args(extra);
    Peer::spawn("pion-peer client", command)
}

/// `pion13-peer server --listen 127.0.0.1:0 ARGS`, ready; returns it and its port. ARGS carry the
/// credentials (`--psk-identity`/`--psk` or `--cert`/`--key`) and the rest.
pub fn dtls13_server(binary: &Path, args: &[&str]) -> (Peer, u16) {
    let mut command = Command::new(binary);
    command.args(["server", "--listen", "127.0.0.1:0"]).args(args);
    let peer = Peer::spawn("pion13-peer server", command);
    let port = announced_port(&peer, "listening on 127.0.0.1:");
    (peer, port)
}

/// `pion13-peer client --connect 127.0.0.1:PORT ARGS`; ARGS carry the credentials and the rest.
pub fn dtls13_client(binary: &Path, port: u16, args: &[&str]) -> Peer {
    let mut command = Command::new(binary);
    command.args(["client", "--connect", &format!("127.0.0.1:{port}")]).args(args);
    Peer::spawn("pion13-peer client", command)
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
    let stderr = client.stderr.text();
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
pub fn handshake_line(peer: &Peer) -> String {
    peer.expect_stderr_line_with(&["handshake done:"])
}

/// The chunk counts of one direction from pion-sctp-peer's "wire out: INIT 1, ..., DATA resent 0,
/// ..." (or "wire in: ...") line.
pub fn sctp_wire(stderr: &str, direction: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{direction}: ");
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {direction:?} line from pion-sctp-peer in\n{stderr}"));
    line.split(", ")
        .filter_map(|part| {
            let (name, count) = part.rsplit_once(' ')?;
            Some((name.to_string(), count.parse().ok()?))
        })
        .collect()
}
