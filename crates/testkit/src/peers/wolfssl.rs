//! `wolfssl-peer` (interop/wolfssl): DTLS 1.3 and 1.2 on wolfSSL, built once per test binary with
//! cargo (`fastshake_interop::build_wolfssl`; the C library is built once per checkout). When
//! wolfSSL cannot be fetched or built here the tests say why and pass without running, unless
//! `FASTSHAKE_REQUIRE_WOLFSSL=1` (which `.ci/run` sets) turns that into a failure.
//!
//! Each side prints one line on stderr once its handshake is done:
//! `wolfssl-peer server: handshake done: version=DTLSv1.3 suite=TLS_AES_128_GCM_SHA256 group=X25519
//! hrr=true resumed=false resent=0` (with `cid_out=HEX cid_in=HEX` after `--cid`).

use super::pion::available;
use super::{announced_port, scratch_dir, Peer};
use fastshake_interop::BuildError;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built `wolfssl-peer`, or None (after saying why) when it cannot be built here.
pub fn peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| match fastshake_interop::build_wolfssl(&scratch_dir()) {
        Ok(path) => Ok(path),
        Err(BuildError::Unavailable(why)) => Err(why),
        Err(BuildError::Compile(why)) => panic!("{why}"),
    });
    available(built, "FASTSHAKE_REQUIRE_WOLFSSL", "wolfssl-peer")
}

/// `wolfssl-peer server --listen 127.0.0.1:0 ARGS` (credentials among ARGS), ready; returns it and
/// its port.
pub fn server(binary: &Path, args: &[&str]) -> (Peer, u16) {
    let mut command = Command::new(binary);
    command.args(["server", "--listen", "127.0.0.1:0"]).args(args);
    let peer = Peer::spawn("wolfssl-peer server", command);
    let port = announced_port(&peer, "listening on 127.0.0.1:");
    (peer, port)
}

/// `wolfssl-peer client --connect 127.0.0.1:PORT ARGS` (credentials among ARGS).
pub fn client(binary: &Path, port: u16, args: &[&str]) -> Peer {
    let mut command = Command::new(binary);
    command.args(["client", "--connect", &format!("127.0.0.1:{port}")]).args(args);
    Peer::spawn("wolfssl-peer client", command)
}

/// The line a side prints once its handshake is done.
pub fn handshake_line(peer: &Peer) -> String {
    peer.expect_stderr_line_with(&["handshake done:"])
}
