//! `bench webrtc`: how long a data channel takes to carry its first byte, browser and servers
//! in one run. Headless Chromium opens sessions one after the other, going round
//! `fastshake webrtc serve` (ICE-lite, the default), `fastshake webrtc serve --ice full` and a
//! pion/webrtc v4 server (the anchor), each timed from the answer applied (when the browser
//! starts its connectivity checks) to the first byte echoed; then `fastshake webrtc connect`
//! opens sessions to our servers with each SCTP setup (regular, seed 004's alternative
//! handshake, SNAP) and DTLS version. Medians, and the ratios to pion's.
//!
//! First on loopback, in a network namespace of its own whose only interface is loopback
//! (`unshare -n`, so root), where the browser reaches nothing else; then, unless
//! `--delay-ms 0`, across the netlab testbed's delay relay ([`crate::webrtc_relay`]), where
//! round trips show: there each session is timed from its first STUN check, in milliseconds
//! and in round trips.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use fastshake_interop::GoPeer;
use serde_json::{json, Value};

use crate::handshake::median;

/// `bench webrtc` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sessions per server and client (at least 20 for the report's medians).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// One-way delay of the relay run, in milliseconds (0: loopback only).
    #[arg(long, value_name = "MS", default_value_t = 25)]
    delay_ms: u64,
    /// Also write the figures as JSON to this file (for the lab report).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `bench webrtc`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let runs = args.runs.max(1);
    let fastshake = crate::fastshake_program()?;
    let browser = fastshake_interop::chromium()
        .context("no chromium on the PATH (apt-get install chromium, or set CHROMIUM)")?;
    let pion = fastshake_interop::build(GoPeer::PionWebrtc, &fastshake_interop::build_dir())
        .map_err(|e| anyhow::anyhow!("pion-webrtc-peer: {e}"))?;
    let version = Command::new(&browser)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    println!("bench webrtc: {runs} sessions per server; browser {}", version.unwrap_or_default());
    let profile = std::env::temp_dir().join(format!("fastshake-bench-webrtc-{}", std::process::id()));
    std::fs::create_dir_all(&profile)?;
    let script = format!(
        r#"set -e
ip link set lo up
"$FASTSHAKE" webrtc serve --http 127.0.0.1:8080 --until-reports 1 >"$PROFILE/fastshake.log" 2>&1 &
ours=$!
"$PION" serve --http 127.0.0.1:8081 >"$PROFILE/pion.log" 2>&1 &
pion=$!
"$FASTSHAKE" webrtc serve --http 127.0.0.1:8083 --ice full >"$PROFILE/full.log" 2>&1 &
full=$!
for port in 8080 8081 8083; do
  for i in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
done
"$BROWSER" --headless --no-sandbox --disable-gpu --no-first-run --use-fake-ui-for-media-stream \
    --allow-loopback-in-peer-connection \
    --user-data-dir="$PROFILE/chromium" \
    "http://127.0.0.1:8080/?report&bench={runs}&servers=/offer,http://127.0.0.1:8083/offer,http://127.0.0.1:8081/offer" >"$PROFILE/chromium.log" 2>&1 &
browser=$!
wait $ours || true
kill $browser 2>/dev/null || true
"$FASTSHAKE" webrtc serve --http 127.0.0.1:8082 >/dev/null 2>&1 &
again=$!
for i in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/8082) 2>/dev/null && break; sleep 0.05; done
for variant in "lite regular 1.3" "lite alt 1.3" "lite snap 1.3" "lite regular 1.2" "full regular 1.3" "full snap 1.3"; do
  set -- $variant
  port=8082; [ "$1" = full ] && port=8083
  for i in $(seq 1 {runs}); do
    "$FASTSHAKE" webrtc connect "http://127.0.0.1:$port/offer" --sctp "$2" --dtls "$3" --messages 1 --size 16 \
      | sed "s|^|connect $variant: |"
  done
done
kill $again 2>/dev/null || true
kill $pion $full 2>/dev/null || true
wait 2>/dev/null || true
cat "$PROFILE/fastshake.log"
"#
    );
    let out = Command::new("timeout")
        .args(["600", "unshare", "-n", "bash", "-c", &script])
        .env("FASTSHAKE", &fastshake)
        .env("PION", &pion)
        .env("BROWSER", &browser)
        .env("PROFILE", &profile)
        .output()
        .context("unshare -n (run as root)")?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = std::fs::remove_dir_all(&profile);
    let Some(report) = stdout.lines().find_map(|l| l.strip_prefix("report: ")) else {
        bail!("the page sent no report:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    };
    let report: Value = serde_json::from_str(report).context("the page's report")?;
    if report["ok"] != true {
        bail!("the browser's sessions failed: {report}");
    }
    let sessions = report["bench"].as_array().context("bench results")?;
    let times = |signal: &str, key: &str| -> Vec<f64> {
        sessions.iter().filter(|s| s["signal"] == signal).filter_map(|s| s[key].as_f64()).collect()
    };
    println!();
    println!(
        "{:<36} {:>6} {:>16} {:>22}",
        "Chromium 156 to", "runs", "first byte (ms)", "with signalling (ms)"
    );
    let ours = median(times("/offer", "setup_ms"));
    let full = median(times("http://127.0.0.1:8083/offer", "setup_ms"));
    let theirs = median(times("http://127.0.0.1:8081/offer", "setup_ms"));
    let mut browser_json = Vec::new();
    for (name, signal) in [
        ("fastshake webrtc serve (ICE-lite)", "/offer"),
        ("fastshake webrtc serve --ice full", "http://127.0.0.1:8083/offer"),
        ("pion/webrtc v4 (anchor)", "http://127.0.0.1:8081/offer"),
    ] {
        let setup = times(signal, "setup_ms");
        let with = times(signal, "with_signalling_ms");
        let (n, first, with) = (setup.len(), median(setup), median(with));
        println!("{:<36} {:>6} {:>16.1} {:>22.1}", name, n, first, with);
        browser_json.push(json!({
            "server": name, "runs": n, "first_byte_ms": first, "with_signalling_ms": with,
            "ratio_to_pion": first / theirs,
        }));
    }
    println!("fastshake / pion: {:.2} (first byte, medians; target at most 0.5)", ours / theirs);
    println!("fastshake --ice full / pion: {:.2} (first byte, medians)", full / theirs);

    // fastshake webrtc connect: "channel open X ms, first echo Y ms".
    let connect = |variant: &str| -> Vec<f64> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("connect {variant}: ")))
            .filter_map(|l| l.split("first echo ").nth(1)?.split(" ms").next()?.parse().ok())
            .collect()
    };
    println!();
    println!(
        "{:<52} {:>6} {:>16}",
        "fastshake webrtc connect to fastshake webrtc serve", "runs", "first byte (ms)"
    );
    let mut connect_json = Vec::new();
    for (name, variant) in [
        ("ICE-lite, SCTP regular, DTLS 1.3", "lite regular 1.3"),
        ("ICE-lite, SCTP alternative (seed 004), DTLS 1.3", "lite alt 1.3"),
        ("ICE-lite, SCTP SNAP, DTLS 1.3", "lite snap 1.3"),
        ("ICE-lite, SCTP regular, DTLS 1.2", "lite regular 1.2"),
        ("ICE full, SCTP regular, DTLS 1.3", "full regular 1.3"),
        ("ICE full, SCTP SNAP, DTLS 1.3", "full snap 1.3"),
    ] {
        let t = connect(variant);
        let (n, first) = (t.len(), median(t));
        println!("{:<52} {:>6} {:>16.1}", name, n, first);
        connect_json.push(json!({ "variant": name, "runs": n, "first_byte_ms": first }));
    }
    println!();
    println!(
        "Times from the answer applied (the first connectivity check) to the first byte echoed, on loopback in a \
         network namespace; medians."
    );

    let relay = match args.delay_ms {
        0 => Value::Null,
        ms => crate::webrtc_relay::run(&fastshake, &browser, &pion, runs, Duration::from_millis(ms))?,
    };
    if let Some(path) = &args.json {
        let json = json!({
            "bench": "webrtc",
            "runs": runs,
            "loopback": { "browser": browser_json, "connect": connect_json },
            "relay": relay,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
