//! `fastshake bench ARGS...` runs `fastshake-bench ARGS...`: the benchmarks link OpenSSL (their
//! anchor) and a counting allocator, which the binary users run must not. It is found beside this
//! binary (cargo builds both into one target directory), else on the PATH.

use anyhow::Context;
use std::ffi::OsString;
use std::process::Command;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// What fastshake-bench takes: handshake, sctp, sim, with their options (`fastshake bench --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let name = format!("fastshake-bench{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe().ok().map(|me| me.with_file_name(&name)).filter(|p| p.exists());
    let program = beside.map_or_else(|| name.clone().into(), |p| p.into_os_string());
    let status = Command::new(&program).args(&args.args).status().with_context(|| {
        format!(
            "cannot run {}: build it with `cargo build --release -p fastshake-bench` (it sits beside fastshake)",
            program.to_string_lossy()
        )
    })?;
    anyhow::ensure!(status.success(), "fastshake-bench ended with {status}");
    Ok(())
}
