//! One module per experiment: each turns its experiment's report (the same one its own `lab`
//! command prints) into a [`Section`](super::results::Section), with plots and a capture.

pub mod bench;
pub mod e1;
pub mod e2;
pub mod e3;
pub mod e4;
pub mod e5;

use super::registry::Context;
use super::results::Capture;
use fastshake_sim::scenario::ScenarioFile;

/// Runs a scenario file (scenarios/ of the repository, compiled in) with capture on, at the
/// run's seed, and writes its datagram pcap (and the 802.15.4 frames, if any) into the output.
pub fn capture_scenario(ctx: &Context, toml: &str, file: &str, what: &str) -> anyhow::Result<Capture> {
    let scenario = ScenarioFile::parse(toml)?.base()?;
    let out = scenario.run_with(Some(ctx.seed), true, None, &mut crate::apps::scenario::engine_apps)?;
    let bytes = out.pcap.ok_or_else(|| anyhow::anyhow!("the scenario captured nothing"))?;
    std::fs::write(ctx.path(file), bytes)?;
    let mut what = what.to_string();
    if let Some(frames) = out.frames_pcap {
        let frames_file = file.replace(".pcap", "-frames.pcap");
        std::fs::write(ctx.path(&frames_file), frames)?;
        what.push_str(&format!("; its IEEE 802.15.4 frames in {frames_file}"));
    }
    Ok(Capture { file: file.into(), what })
}

/// `n` seeds from the run's seed: replications of one run never share a seed.
pub fn seeds_from(ctx: &Context, n: u64) -> Vec<u64> {
    (0..n).map(|i| ctx.seed.wrapping_mul(1000).wrapping_add(i)).collect()
}

/// Runs `fastshake-bench ARGS --json DIR/bench-NAME.json` with its tables into
/// DIR/bench-NAME.txt, and reads the JSON. The benchmarks stay in their own binary: they link
/// OpenSSL and a counting allocator, which the `fastshake` binary must not.
pub fn run_bench(ctx: &Context, name: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let bench = ctx.bench.as_ref().ok_or_else(|| anyhow::anyhow!("no fastshake-bench"))?;
    let (json, log) = (ctx.path(&format!("bench-{name}.json")), ctx.path(&format!("bench-{name}.txt")));
    let out = std::fs::File::create(&log)?;
    let status = std::process::Command::new(bench)
        .args(args)
        .arg("--json")
        .arg(&json)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()?;
    anyhow::ensure!(
        status.success(),
        "fastshake-bench {} ended with {status} (see {})",
        args.join(" "),
        log.display()
    );
    Ok(serde_json::from_slice(&std::fs::read(&json)?)?)
}

/// A number out of a benchmark's JSON.
pub fn number(v: &serde_json::Value, key: &str) -> Option<f64> {
    v.get(key).and_then(serde_json::Value::as_f64)
}
