//! One module per experiment: each turns its experiment's report (the same one its own `lab`
//! command prints) into a [`Section`](super::results::Section), with plots and a capture.

pub mod bench;
pub mod e1;
pub mod e2;
pub mod e3;
pub mod e4;
pub mod e5;
pub mod e6;

use super::progress::Step;
use super::registry::Context;
use super::results::{Capture, Status};
use fastshake_sim::scenario::ScenarioFile;

/// Why a section that runs `fastshake-bench` is skipped, if it is: the binary is not beside
/// `fastshake`.
pub fn without_bench(ctx: &Context) -> Option<Status> {
    ctx.bench.is_none().then(|| Status::Skipped {
        reason: "no fastshake-bench beside fastshake (cargo build --release -p fastshake -p fastshake-bench)"
            .into(),
    })
}

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

/// Why a real-socket part did not give figures: not asked or not possible here (skipped), or it
/// ran and failed.
pub enum NotRun {
    Skipped(String),
    Failed(String),
}

impl NotRun {
    /// A one-row table saying so, in the section of the part.
    pub fn table(&self, title: &str) -> super::results::Table {
        let (state, why) = match self {
            NotRun::Skipped(why) => ("skipped", why),
            NotRun::Failed(why) => ("failed", why),
        };
        let mut t = super::results::Table::new(title, &["state", "why"]);
        t.row([state.to_string(), why.clone()]);
        t
    }
}

/// Runs `fastshake netlab COMMAND --json ARGS` (a real-socket run in network namespaces) when
/// `--real` asked for it and we are root, with its standard error in DIR/NAME.txt; returns its
/// JSON. The child is this very binary, so the namespaces' peers are the product's code.
pub fn run_real(
    ctx: &Context,
    name: &str,
    command: &str,
    args: &[&str],
    step: &Step,
) -> Result<serde_json::Value, NotRun> {
    if !ctx.real {
        return Err(NotRun::Skipped("not asked: `fastshake lab all --real` (as root) runs it".into()));
    }
    match fastshake_netlab::testbed::require_root() {
        Ok(()) => {}
        Err(fastshake_netlab::testbed::TestbedError::NotRoot) => {
            return Err(NotRun::Skipped(
                "needs root (it builds network namespaces, veth and a TUN relay)".into(),
            ))
        }
        Err(e) => return Err(NotRun::Skipped(format!("no testbed here: {e}"))),
    }
    let failed = |e: String| NotRun::Failed(e);
    let me = std::env::current_exe().map_err(|e| failed(format!("the path of this binary: {e}")))?;
    let log = ctx.path(&format!("{name}.txt"));
    step.running(format!("real sockets: fastshake netlab {command} {}", args.join(" ")));
    let err = std::fs::File::create(&log).map_err(|e| failed(format!("{}: {e}", log.display())))?;
    let out = std::process::Command::new(me)
        .args(["netlab", command, "--json"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(err)
        .output()
        .map_err(|e| failed(format!("starting fastshake netlab {command}: {e}")))?;
    if !out.status.success() {
        return Err(failed(format!(
            "fastshake netlab {command} {} ended with {} (see {})",
            args.join(" "),
            out.status,
            log.display()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text.find('{').map_or("", |at| &text[at..]);
    serde_json::from_str(json).map_err(|e| failed(format!("fastshake netlab {command}'s JSON: {e}")))
}
