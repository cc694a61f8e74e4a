//! The Go peers of `interop/`, built with the Go toolchain for whoever needs them: the interop
//! tests (through `fastshake-testkit`) and `fastshake bench load --compare` alike, so that the
//! benchmarks need no test crate.
//!
//! - [`GoPeer::PionDtls`]: `pion-peer` (interop/pion), DTLS 1.2 on pion/dtls;
//! - [`GoPeer::PionDtls13`]: `pion13-peer` (interop/pion13), DTLS 1.3 on pion/dtls v4;
//! - [`GoPeer::PionSctp`]: `pion-sctp-peer` (interop/pion-sctp), pion/sctp over UDP encapsulation;
//! - [`GoPeer::PionWebrtc`]: `pion-webrtc-peer` (interop/pion-webrtc), data channels on
//!   pion/webrtc v4, as an HTTP-signalled echo server or as a client.
//!
//! [`build`] says why a peer cannot be had: no Go, or its modules cannot be downloaded (no
//! proxy), which a caller may skip over; a compile failure is a bug in the peer's source.
//!
//! [`build_cargo_peer`] builds the Rust peers with cargo: `wolfssl-peer` (interop/wolfssl), DTLS
//! 1.3 on wolfSSL, and `boringssl-peer` (interop/boringssl), DTLS 1.3 on BoringSSL with
//! certificate compression. Each is a workspace of its own, which nothing here links against
//! (wolfSSL is GPL); they only run.
#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A peer program of `interop/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoPeer {
    /// `pion-peer`: DTLS on pion/dtls (the Connection ID implementation of RFC 9146 we
    /// interoperate with).
    PionDtls,
    /// `pion13-peer`: DTLS 1.3 (RFC 9147) on pion/dtls v4, with DTLS 1.2 on request.
    PionDtls13,
    /// `pion-sctp-peer`: pion/sctp over UDP encapsulation (RFC 6951).
    PionSctp,
    /// `pion-webrtc-peer`: WebRTC data channels on pion/webrtc v4 (ICE, DTLS 1.2, SCTP, DCEP).
    PionWebrtc,
}

impl GoPeer {
    /// The folder of its source under `interop/`.
    pub fn source(self) -> &'static str {
        match self {
            GoPeer::PionDtls => "pion",
            GoPeer::PionDtls13 => "pion13",
            GoPeer::PionSctp => "pion-sctp",
            GoPeer::PionWebrtc => "pion-webrtc",
        }
    }

    /// The name of the built program.
    pub fn binary(self) -> &'static str {
        match self {
            GoPeer::PionDtls => "pion-peer",
            GoPeer::PionDtls13 => "pion13-peer",
            GoPeer::PionSctp => "pion-sctp-peer",
            GoPeer::PionWebrtc => "pion-webrtc-peer",
        }
    }
}

/// Why a peer was not built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// No toolchain, or what it needs could not be downloaded or built (Go modules, wolfSSL's C
    /// library): the peer cannot be had here.
    Unavailable(String),
    /// The peer's own source does not compile.
    Compile(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Unavailable(why) | BuildError::Compile(why) => f.write_str(why),
        }
    }
}

/// The headless browser the WebRTC and report tests and `bench webrtc` drive: `$CHROMIUM`, or
/// Debian's `chromium` (or `chromium-browser`) on the PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
            .find(|p| p.exists())
    })
}

/// `<target>/testkit`: the folder beside the running executable's profile folder (tests run from
/// `<target>/<profile>/deps/`), so that concurrent checkouts never share a build. Created.
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the running executable's path");
    let profile = exe.parent().and_then(Path::parent).unwrap_or_else(|| Path::new("."));
    let dir = profile.join("testkit");
    std::fs::create_dir_all(&dir).expect("create the build folder");
    dir
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

/// Builds `peer` into `out_dir`; the path of the program.
pub fn build(peer: GoPeer, out_dir: &Path) -> Result<PathBuf, BuildError> {
    let unavailable = BuildError::Unavailable;
    let go =
        go_tool().ok_or_else(|| unavailable("no `go` on the PATH nor at /usr/local/go/bin/go".into()))?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop").join(peer.source());
    let go_command = || {
        let mut command = Command::new(&go);
        // go.sum is committed: modules are checked against it; no VCS stamping (worktrees).
        command.current_dir(&source).env("GOFLAGS", "-mod=mod -buildvcs=false");
        command
    };
    let cannot_run = |e: std::io::Error| unavailable(format!("cannot run {}: {e}", go.display()));
    let download = go_command().args(["mod", "download"]).output().map_err(cannot_run)?;
    if !download.status.success() {
        let stderr = String::from_utf8_lossy(&download.stderr);
        return Err(unavailable(format!("go mod download failed: {stderr}")));
    }
    let out = out_dir.join(peer.binary());
    let built = go_command().args(["build", "-o"]).arg(&out).arg(".").output().map_err(cannot_run)?;
    if !built.status.success() {
        let stderr = String::from_utf8_lossy(&built.stderr);
        return Err(BuildError::Compile(format!("go build of {} failed:\n{stderr}", source.display())));
    }
    Ok(out)
}

/// The repository's root (this crate is `crates/interop`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A peer of `interop/` written in Rust around a C library, a cargo workspace of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CargoPeer {
    /// `wolfssl-peer`: DTLS 1.3 and 1.2 on wolfSSL (GPL: nothing here links against it).
    WolfSsl,
    /// `boringssl-peer`: DTLS 1.3 and 1.2 on BoringSSL, with certificate compression (RFC 8879).
    BoringSsl,
}

impl CargoPeer {
    /// The folder of its source under `interop/`, and of its build under `target/interop-*`.
    pub fn source(self) -> &'static str {
        match self {
            CargoPeer::WolfSsl => "wolfssl",
            CargoPeer::BoringSsl => "boringssl",
        }
    }

    /// The name of the built program.
    pub fn binary(self) -> &'static str {
        match self {
            CargoPeer::WolfSsl => "wolfssl-peer",
            CargoPeer::BoringSsl => "boringssl-peer",
        }
    }
}

/// Builds `wolfssl-peer` (interop/wolfssl); see [`build_cargo_peer`].
pub fn build_wolfssl(scratch: &Path) -> Result<PathBuf, BuildError> {
    build_cargo_peer(CargoPeer::WolfSsl, scratch)
}

/// Builds `peer` with `cargo build --release`; the path of the program.
///
/// Its target folder is `<repo>/target/interop-<source>` whatever `scratch` is, so that the C
/// library (wolfSSL's configure and make, BoringSSL's CMake: minutes) is built once for every
/// test binary and run; cargo's lock serialises concurrent builds. `scratch` receives the
/// build's output, `<source>-build.log`.
pub fn build_cargo_peer(peer: CargoPeer, scratch: &Path) -> Result<PathBuf, BuildError> {
    let unavailable = BuildError::Unavailable;
    let source = repo_root().join("interop").join(peer.source());
    let target = repo_root().join(format!("target/interop-{}", peer.source()));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Run from the peer's folder, so that cargo reads its .cargo/config.toml (wolfSSL's defines).
    let built = Command::new(&cargo)
        .current_dir(&source)
        .args(["build", "--release", "--locked", "--manifest-path", "Cargo.toml"])
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .output()
        .map_err(|e| unavailable(format!("cannot run {}: {e}", Path::new(&cargo).display())))?;
    let stderr = String::from_utf8_lossy(&built.stderr);
    let log = scratch.join(format!("{}-build.log", peer.source()));
    // The log is a convenience: failing to write it changes nothing.
    let _ = std::fs::write(&log, stderr.as_bytes());
    if !built.status.success() {
        // Only errors in our own crate are ours; the rest (the registry, the C library's build,
        // bindgen's libclang) is the machine's.
        let why = format!("cargo build of {} failed (log: {}):\n{stderr}", source.display(), log.display());
        let ours = stderr.contains(&format!("could not compile `{}`", peer.binary()));
        return Err(if ours { BuildError::Compile(why) } else { unavailable(why) });
    }
    Ok(target.join("release").join(peer.binary()))
}
