//! `boringssl-peer` (interop/boringssl): DTLS 1.3 and 1.2 on BoringSSL with certificate
//! compression (RFC 8879), built once per test binary with cargo
//! (`fastshake_interop::build_cargo_peer`; BoringSSL's C library is built once per checkout).
//! When it cannot be fetched or built here the tests say why and pass without running, unless
//! `FASTSHAKE_REQUIRE_BORINGSSL=1` (which `.ci/run` sets) turns that into a failure.
//!
//! Each side prints one line on stderr once its handshake is done:
//! `handshake done: version=DTLSv1.3 suite=TLS_AES_128_GCM_SHA256 group=X25519 compressed=zlib
//! decompressed=none datagrams_out=7`.

use super::pion::available;
use super::{announced_port, scratch_dir, Peer};
use fastshake_interop::{BuildError, CargoPeer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The built `boringssl-peer`, or None (after saying why) when it cannot be built here.
pub fn peer() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        match fastshake_interop::build_cargo_peer(CargoPeer::BoringSsl, &scratch_dir()) {
            Ok(path) => Ok(path),
            Err(BuildError::Unavailable(why)) => Err(why),
            Err(BuildError::Compile(why)) => panic!("{why}"),
        }
    });
    available(built, "FASTSHAKE_REQUIRE_BORINGSSL", "boringssl-peer")
}

/// `boringssl-peer server --listen 127.0.0.1:0 ARGS`, ready; returns it and its port.
pub fn server(binary: &Path, args: &[&str]) -> (Peer, u16) {
    let mut command = Command::new(binary);
    command.args(["server", "--listen", "127.0.0.1:0"]).args(args);
    let peer = Peer::spawn("boringssl-peer server", command);
    let port = announced_port(&peer, "listening on 127.0.0.1:");
    (peer, port)
}

/// `boringssl-peer client --connect 127.0.0.1:PORT ARGS`.
pub fn client(binary: &Path, port: u16, args: &[&str]) -> Peer {
    let mut command = Command::new(binary);
    command.args(["client", "--connect", &format!("127.0.0.1:{port}")]).args(args);
    Peer::spawn("boringssl-peer client", command)
}

/// The line a side prints once its handshake is done.
pub fn handshake_line(peer: &Peer) -> String {
    peer.expect_stderr_line_with(&["handshake done:"])
}
