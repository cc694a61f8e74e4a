//! The benchmarks' headline figures beside their anchors, measured in the same run by
//! `fastshake-bench` (a subprocess: see [`super::run_bench`]). One row of `BENCHES` per
//! benchmark: `handshake` (OpenSSL in memory), `flood` (the bare UDP echo and OpenSSL's
//! `DTLSv1_listen`), `load --compare` (openssl s_server, pion when built) and `caching`
//! (OpenSSL's full handshake of the same chains); E5 runs `sctp` itself.

use super::super::progress::Step;
use super::super::registry::{About, Context, Experiment};
use super::super::results::{Figure, Section, Table};
use serde_json::Value;

pub struct Benchmarks;

/// A benchmark: its arguments (quick, full) and how its JSON becomes figures.
struct Bench {
    name: &'static str,
    quick: &'static [&'static str],
    full: &'static [&'static str],
    figures: fn(&Value) -> Vec<Figure>,
}

const BENCHES: &[Bench] = &[
    Bench {
        name: "handshake",
        quick: &["handshake", "--quick"],
        full: &["handshake"],
        figures: handshake_figures,
    },
    Bench { name: "flood", quick: &["flood", "--quick"], full: &["flood"], figures: flood_figures },
    Bench {
        name: "load",
        quick: &["load", "--compare", "--quick"],
        full: &["load", "--compare"],
        figures: load_figures,
    },
    Bench { name: "caching", quick: &["caching", "--quick"], full: &["caching"], figures: caching_figures },
];

fn rows(v: &Value, key: &str) -> Vec<Value> {
    v.get(key).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn text<'a>(row: &'a Value, key: &str) -> &'a str {
    row.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The DTLS ClientHello flood: rows in the order the benchmark floods them (the floors, ours
/// single and batched, OpenSSL's `DTLSv1_listen`).
fn flood_figures(v: &Value) -> Vec<Figure> {
    let rounds = v.get("rounds").and_then(Value::as_u64).unwrap_or(0) as u32;
    let dtls = rows(v, "dtls");
    let find = |prefix: &str| dtls.iter().find(|r| text(r, "label").starts_with(prefix));
    let rate = |r: Option<&Value>| r.and_then(|r| super::number(r, "median_answers_per_s"));
    let cpu = |r: Option<&Value>| r.and_then(|r| super::number(r, "median_cpu_us_per_answer"));
    let floor = find("bare UDP echo, single");
    let single = find("fastshake server --batch off");
    let batched = find("fastshake server --batch on");
    let openssl = find("OpenSSL DTLSv1_listen");
    let note = "loopback, 2 cores shared by the flooder and the server; rounds interleaved across servers";
    let mut figures = vec![
        Figure::measured(
            "ClientHello flood: HelloVerifyRequests/s, single-datagram I/O",
            "1/s",
            rate(single),
            rounds,
        )
        .against(rate(floor).unwrap_or(f64::NAN), "bare UDP echo, single-datagram, same run")
        .at_least(0.9)
        .note(note),
        Figure::measured(
            "ClientHello flood: HelloVerifyRequests/s, batched I/O",
            "1/s",
            rate(batched),
            rounds,
        )
        .against(rate(floor).unwrap_or(f64::NAN), "bare UDP echo, single-datagram, same run")
        .at_least(2.0)
        .note("batching (recvmmsg/sendmmsg, GRO/GSO) against the floor of one datagram per system call"),
        Figure::measured(
            "ClientHello flood: HelloVerifyRequests/s, batched, beside OpenSSL",
            "1/s",
            rate(batched),
            rounds,
        )
        .against(rate(openssl).unwrap_or(f64::NAN), "OpenSSL DTLSv1_listen loop, same run")
        .at_least(1.0)
        .note(note),
    ];
    if let (Some(ours), Some(theirs)) = (cpu(single), cpu(openssl)) {
        figures.push(
            Figure::measured(
                "server CPU per HelloVerifyRequest, single-datagram I/O",
                "µs",
                Some(ours),
                rounds,
            )
            .against(theirs, "OpenSSL DTLSv1_listen loop, same run")
            .met_if(ours <= theirs, "≤ OpenSSL's")
            .note("schedstat CPU of every server thread over the flood, per answer: steadier than rates"),
        );
    }
    figures
}

/// `bench load --compare`: server CPU per handshake beside openssl s_server, handshakes/s beside
/// pion, two workers beside one.
fn load_figures(v: &Value) -> Vec<Figure> {
    let runs = v.get("runs").and_then(Value::as_u64).unwrap_or(0) as u32;
    let all = rows(v, "rows");
    let row = |server: &str, workers: u64, kind: &str| {
        all.iter().find(|r| {
            text(r, "server").starts_with(server)
                && r.get("workers").and_then(Value::as_u64) == Some(workers)
                && text(r, "kind").starts_with(kind)
        })
    };
    let cpu = |r: Option<&Value>| r.and_then(|r| super::number(r, "server_cpu_us_per_handshake"));
    let rate = |r: Option<&Value>| r.and_then(|r| super::number(r, "handshakes_per_s"));
    let mut figures = Vec::new();
    // Kinds as `bench load` labels them; the ECDSA rows name the ECDHE group every server used.
    for (kind, label, target_key) in [
        ("PSK", "full PSK", "target_psk_cpu_over_openssl"),
        ("ECDSA, ECDHE x25519", "full ECDHE-ECDSA (x25519)", "target_ecdsa_cpu_over_openssl"),
        ("ECDSA, ECDHE P-256", "full ECDHE-ECDSA (P-256 ECDHE)", "target_ecdsa_cpu_over_openssl"),
    ] {
        let target = super::number(v, target_key).unwrap_or(f64::NAN);
        let ours = cpu(row("fastshake", 1, kind));
        let theirs = cpu(row("openssl", 1, kind)).unwrap_or(f64::NAN);
        let f = Figure::measured(
            format!("server CPU per {label} handshake, loopback load, 1 worker"),
            "µs",
            ours,
            runs,
        )
        .against(theirs, "openssl s_server, same load and run");
        let met = f.ratio.is_some_and(|r| r <= target);
        figures.push(f.met_if(met, format!("≤ {target:.2}× OpenSSL's")).note(
            "utime+stime of the server process over the run per completed handshake; fresh source port per handshake",
        ));
    }
    let x25519 = "ECDSA, ECDHE x25519";
    if let (Some(ours), Some(pion)) = (rate(row("fastshake", 1, x25519)), rate(row("pion", 1, x25519))) {
        figures.push(
            Figure::measured(
                "ECDHE-ECDSA (x25519) handshakes/s under load, 1 worker",
                "1/s",
                Some(ours),
                runs,
            )
            .against(pion, "pion/dtls, same load and run")
            .at_least(1.0)
            .note("both serve many handshakes at once; the generator shares the cores"),
        );
    }
    let target = super::number(v, "target_two_workers_over_one").unwrap_or(f64::NAN);
    let one = rate(row("fastshake", 1, "PSK"));
    if let Some(two) = rate(row("fastshake", 2, "PSK")) {
        figures.push(
            Figure::measured("PSK handshakes/s, 2 workers", "1/s", Some(two), runs)
                .against(one.unwrap_or(f64::NAN), "1 worker, same run")
                .at_least(target)
                .note("2 cores here, one shared with the load generator: the second worker gets half a core"),
        );
    }
    figures
}

/// `bench caching`: full mutual handshakes per second beside OpenSSL's full handshake of the
/// same chains, vanilla and with BiTHaC and the key cache.
fn caching_figures(v: &Value) -> Vec<Figure> {
    let runs = v.get("runs").and_then(Value::as_u64).unwrap_or(0) as u32;
    let all = rows(v, "rows");
    let mut figures = Vec::new();
    let chains: Vec<&str> = {
        let mut c: Vec<&str> = all.iter().map(|r| text(r, "chains")).collect();
        c.dedup();
        c
    };
    for chain in chains {
        let of = |config: &str| {
            all.iter().find(|r| text(r, "chains") == chain && text(r, "configuration") == config)
        };
        let rate = |r: Option<&Value>| r.and_then(|r| super::number(r, "handshakes_per_s"));
        let openssl = of("vanilla").and_then(|r| super::number(r, "openssl_handshakes_per_s"));
        let vanilla = rate(of("vanilla"));
        let cached = all
            .iter()
            .filter(|r| text(r, "chains") == chain)
            .rfind(|r| text(r, "configuration") != "vanilla");
        figures.push(
            Figure::measured(format!("full mutual handshakes/s, vanilla, {chain}"), "1/s", vanilla, runs)
                .against(openssl.unwrap_or(f64::NAN), "OpenSSL full handshake, same chains and run")
                .at_least(1.0)
                .note("both sides in memory on one core, interleaved with OpenSSL's runs"),
        );
        if let Some(cached) = cached {
            let ours = rate(Some(cached));
            figures.push(
                Figure::measured(
                    format!("full mutual handshakes/s, {}, {chain}", text(cached, "configuration")),
                    "1/s",
                    ours,
                    runs,
                )
                .against(vanilla.unwrap_or(f64::NAN), "our vanilla handshake, same run")
                .at_least(1.0)
                .note("seed 003 Fig. 6: 3.3–8.6 % faster with the cache on a Raspberry Pi Zero W; here the skipped chain validations weigh more on a fast CPU"),
            );
        }
    }
    figures
}

fn handshake_figures(v: &Value) -> Vec<Figure> {
    let runs = v.get("runs").and_then(Value::as_u64).unwrap_or(0) as u32;
    let anchor = v.get("anchor").and_then(Value::as_str).unwrap_or("OpenSSL").to_string();
    let target = super::number(v, "target_handshakes_per_s").unwrap_or(0.0);
    let rows = v.get("engine_handshakes").and_then(Value::as_array).cloned().unwrap_or_default();
    rows.iter()
        .map(|row| {
            let suite = row.get("suite").and_then(Value::as_str).unwrap_or("?");
            let ours = super::number(row, "ours_per_s");
            let theirs = super::number(row, "openssl_per_s").unwrap_or(f64::NAN);
            let f = Figure::measured(format!("full PSK handshakes per second, engine only, {suite}"), "1/s", ours, runs)
                .against(theirs, format!("{anchor}, same run"));
            let met = ours.is_some_and(|o| o >= target);
            f.met_if(met, format!("≥ {target:.0}/s (the benchmark's target)")).note(
                "client and server in memory on one core, interleaved runs with OpenSSL's so machine noise hits both alike",
            )
        })
        .collect()
}

impl Experiment for Benchmarks {
    fn about(&self) -> About {
        About::new("BENCH", "benchmarks' headline figures beside their anchors", (110, 300))
    }

    fn run(&self, ctx: &Context, step: &Step) -> anyhow::Result<Section> {
        let mut section = super::super::blank(
            self,
            "anchors measured in the same run on this machine (OpenSSL through the openssl crate)",
        );
        section.paper_method =
            "No paper: each benchmark names an anchor — another implementation doing the same \
            work on the same machine in the same run — and a target."
                .into();
        section.our_setup =
            "fastshake-bench, run as a subprocess (it links OpenSSL and a counting allocator, the \
            fastshake binary neither); its full tables are in the bench-*.txt files beside this page."
                .into();
        if let Some(skipped) = super::without_bench(ctx) {
            section.status = skipped;
            return Ok(section);
        }
        let mut logs = Table::new("Benchmark outputs", &["benchmark", "command", "state", "tables"]);
        let mut failed = Vec::new();
        step.steps(BENCHES.len() as u64);
        for bench in BENCHES {
            let args = if ctx.quick { bench.quick } else { bench.full };
            step.begin(format!("fastshake-bench {}", args.join(" ")));
            // One benchmark that cannot run here (no C compiler for the DTLSv1_listen anchor, say)
            // leaves the others' figures standing.
            let state = match super::run_bench(ctx, bench.name, args) {
                Ok(json) => {
                    section.figures.extend((bench.figures)(&json));
                    "ran".to_string()
                }
                Err(e) => {
                    failed.push(bench.name);
                    format!("failed: {e:#}")
                }
            };
            logs.row([
                bench.name.to_string(),
                format!("fastshake-bench {}", args.join(" ")),
                state,
                format!("bench-{}.txt", bench.name),
            ]);
        }
        section.tables.push(logs);
        anyhow::ensure!(
            failed.len() < BENCHES.len(),
            "every benchmark failed ({}): see the bench-*.txt files",
            failed.join(", ")
        );
        section.meaning =
            "Timed figures vary with the machine's other load; the anchor ran interleaved with ours, \
            so the ratio is the steadier figure, and CPU per operation steadier than rates."
                .to_string();
        if !failed.is_empty() {
            section.meaning +=
                &format!(" Not measured here: {} (the table above says why).", failed.join(", "));
        }
        Ok(section)
    }
}
