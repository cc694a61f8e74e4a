//! E1 on real sockets: the simulator's E1 applications, run over UDP in network namespaces.
//!
//! `fastshake lab e1 --real` (or `fastshake netlab e1`, which also takes the knobs the shortened
//! test run needs) builds the testbed of `fastshake_netlab::testbed` for each cell and strategy: a
//! client (one or two interfaces), a router that delays every packet in and out of the client
//! (the userspace relay), optionally NAT, and a server. In the server namespace runs
//! `fastshake netlab e1-peer server`, in the client namespace `fastshake netlab e1-peer client`.
//!
//! Both peers drive the very applications the simulated E1 runs (`apps::mobile_client`, E1's server: the same
//! workload, application timeout, resends and reconnections, the same engine configurations), only
//! over real sockets and the process clock instead of the simulator. So the real and the simulated
//! runs differ in the network alone.
//!
//! The runner here applies the simulated E1's outage schedule to the client's interfaces
//! (`ip link set down/up`, a new address on the interface during each outage) and tells the client
//! peer of each change on its standard input, as an operating system tells an application through
//! netlink; the client binds a socket to each interface's address and replaces it when the address
//! changes. The client reports the time of its last acknowledgement (WCT, from its first
//! ClientHello); both peers report their counters when told to stop.
//!
//! Line protocol (runner → peer on standard input, peer → runner on standard output):
//! - peer: `ready`; runner → client: `go` (the clock starts and the first handshake with it);
//! - runner → client: `down IFACE`, `addr IFACE NEW_ADDRESS`, `up IFACE`;
//! - client: `connected` after its first handshake (or `failed REASON` if it gave up on it),
//!   `done NANOSECONDS` when it holds every acknowledgement;
//! - runner: `stop`; peer: `result JSON`, then it exits.

use super::{
    cell_name, cell_report, compare_with_single_homed_standard, configs_in, first_outage_ms, fmt_opt,
    ideal_bound_ns, mean, mobile_plan, nat_name, outage_schedule, parse_nat, row_figures,
    unavoidable_outages, version_name, Cell, CellReport, E1Server, Params, Row, RunOptions, RunResult,
    Strategy, MAX_MESSAGES, MULTIHOMED_INTERLEAVE_MS, OUTAGE_PERIOD_MS, SERVER_ADDR, SERVER_PORT,
};
use crate::apps::mobile_client::MobileClient;
use crate::runner::{check_interrupt, watch_for_interrupts, LineProcess};
use anyhow::{bail, Context};
use fastshake_core::{SansIo, Transmit};
use fastshake_dtls::Versions;
use fastshake_net::Clock;
use fastshake_netlab::testbed::{ClientIface, Host, NatKind, Testbed, TestbedConfig, TestbedError};
use fastshake_sim::apps::{App, NodeEvent};
use fastshake_sim::nat::NatPreset;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

#[path = "e1_real/driver_peers.rs"]
mod driver_peers;

/// The client's UDP port on every address (the simulated client's too).
const CLIENT_PORT: u16 = 40_001;
/// How long a peer may take to start and print `ready`.
const PEER_START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer may take to print its result after `stop`.
const PEER_RESULT_TIMEOUT: Duration = Duration::from_secs(10);
/// A run whose first handshake has not completed by then is over (it did not finish).
const FIRST_HANDSHAKE_BOUND: Duration = Duration::from_secs(30);
/// Largest datagram a peer reads.
const RECEIVE_BUFFER: usize = 65_536;

/// `fastshake netlab e1`: E1 on real sockets with every knob (`fastshake lab e1 --real` is this
/// with the simulator's fixed outage period). [`Default`]: the paper's workload, one run per cell,
/// every strategy on the simulated E1's applications.
#[derive(Clone, Debug)]
pub struct RealOptions {
    /// Print the figures as JSON.
    pub json: bool,
    /// Messages per run (seed 001: 600).
    pub messages: u32,
    /// Runs per cell (seeds 1..=N; the seed places the first outage as in the simulator).
    pub seeds: u64,
    /// Length of each outage, ms.
    pub outage_ms: u64,
    /// Application timeout, ms (seed 001: 1 s).
    pub app_timeout_ms: u64,
    /// One-way delays on the client's access links, ms.
    pub delays: Vec<u64>,
    /// NAT between router and server: none, port-restricted, symmetric or all (the testbed's
    /// nftables NAT has no full-cone or restricted kind).
    pub nat: String,
    /// Strategies, comma-separated (standard-full, standard-resumed, oracle, cid, ipc, tcs);
    /// default: every one (with `--peers driver`, all but the oracle).
    pub strategies: Vec<String>,
    /// Client interfaces: single, multi or both.
    pub homing: String,
    /// Time between two outages of one interface, ms (the simulated E1: 10 000).
    pub outage_period_ms: u64,
    /// Offset of the second interface's outages, ms; default: half the period (the simulated
    /// E1: 5 000 of 10 000).
    pub interleave_ms: Option<u64>,
    /// First outage, ms after the first ClientHello; default: drawn from the seed in
    /// [1 s, 10 s] as in the simulated E1.
    pub first_outage_ms: Option<u64>,
    /// The peers: `app`, the simulated E1's applications over plain UDP sockets (every strategy,
    /// the oracle included), or `driver`, the E1 application on the real-socket DTLS driver
    /// (its server socket strategies and its reconnection).
    pub peers: String,
    /// The DTLS versions whose rows run, 1.2 (the paper's) first.
    pub versions: Vec<Versions>,
}

impl Default for RealOptions {
    fn default() -> Self {
        let sim = RunOptions::default();
        RealOptions {
            json: false,
            messages: sim.messages,
            seeds: 1,
            outage_ms: sim.outage_ms,
            app_timeout_ms: sim.app_timeout_ms,
            delays: sim.delays,
            nat: sim.nat,
            strategies: Vec::new(),
            homing: "both".into(),
            outage_period_ms: OUTAGE_PERIOD_MS,
            interleave_ms: None,
            first_outage_ms: None,
            peers: "app".into(),
            versions: sim.versions,
        }
    }
}

/// Everything one real E1 run needs to know, shared by every cell.
#[derive(Clone, Debug)]
struct RealPlan {
    params: Params,
    seeds: u64,
    delays: Vec<u64>,
    nats: Vec<Option<NatPreset>>,
    multihomed: Vec<bool>,
    strategies: Vec<Strategy>,
    shape: ScheduleShape,
    json: bool,
    /// The peers run on the DTLS driver instead of the simulated E1's applications.
    driver_peers: bool,
    versions: Vec<Versions>,
}

/// When the outages come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ScheduleShape {
    period_ms: u64,
    interleave_ms: u64,
    /// None: drawn from the seed as in the simulated E1.
    first_outage_ms: Option<u64>,
}

impl ScheduleShape {
    const SIMULATED: ScheduleShape = ScheduleShape {
        period_ms: OUTAGE_PERIOD_MS,
        interleave_ms: MULTIHOMED_INTERLEAVE_MS,
        first_outage_ms: None,
    };

    fn first_ms(&self, seed: u64) -> u64 {
        self.first_outage_ms.unwrap_or_else(|| first_outage_ms(seed))
    }

    /// Outages of each interface, `[start, end)` ms, up to `horizon_ms`: with the simulated shape
    /// the simulated E1's own schedule (each outage shifted by its seeded phase within a round
    /// trip); with another shape every `period_ms` from the first outage, the second interface
    /// `interleave_ms` later.
    fn schedule(&self, seed: u64, cell: &Cell, params: &Params, horizon_ms: u64) -> Vec<Vec<(u64, u64)>> {
        if *self == ScheduleShape::SIMULATED {
            return outage_schedule(seed, cell, params, horizon_ms);
        }
        let interfaces = if cell.multihomed { 2 } else { 1 };
        (0..interfaces)
            .map(|i| {
                let mut start = self.first_ms(seed) + i * self.interleave_ms;
                let mut list = Vec::new();
                while start < horizon_ms {
                    list.push((start, start + params.outage_ms));
                    start += self.period_ms;
                }
                list
            })
            .collect()
    }
}

/// `fastshake lab e1 --real`: the simulated E1's arguments, its outage period, one run per cell.
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    let real = RealOptions {
        json: args.json,
        messages: args.messages,
        // A real run takes the time it measures: one run per cell (seed 1), whatever --seeds says;
        // `fastshake netlab e1 --seeds N` runs more.
        seeds: 1,
        outage_ms: args.outage_ms,
        app_timeout_ms: args.app_timeout_ms,
        delays: args.delays,
        nat: args.nat,
        strategies: Vec::new(),
        homing: "both".into(),
        outage_period_ms: ScheduleShape::SIMULATED.period_ms,
        interleave_ms: Some(ScheduleShape::SIMULATED.interleave_ms),
        first_outage_ms: ScheduleShape::SIMULATED.first_outage_ms,
        peers: "app".into(),
        versions: args.versions,
    };
    anyhow::ensure!(args.jitter_us == 0, "--jitter-us is a simulator knob; the real testbed has no jitter");
    run_real(real)
}

fn strategy_name(strategy: Strategy) -> String {
    serde_json::to_value(strategy).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn parse_strategy(name: &str) -> anyhow::Result<Strategy> {
    Strategy::ALL.into_iter().find(|s| strategy_name(*s) == name).with_context(|| {
        let names: Vec<String> = Strategy::ALL.into_iter().map(strategy_name).collect();
        format!("unknown strategy {name:?}: {}", names.join(", "))
    })
}

fn nat_kind(nat: Option<NatPreset>) -> anyhow::Result<Option<NatKind>> {
    match nat {
        None => Ok(None),
        Some(NatPreset::PortRestricted) => Ok(Some(NatKind::PortRestricted)),
        Some(NatPreset::Symmetric) => Ok(Some(NatKind::Symmetric)),
        Some(other) => bail!(
            "the testbed's NAT (nftables masquerade) is port-restricted or symmetric, not {}",
            nat_name(Some(other))
        ),
    }
}

fn plan(args: RealOptions) -> anyhow::Result<RealPlan> {
    anyhow::ensure!(args.messages > 0, "--messages must be at least 1");
    anyhow::ensure!(args.messages <= MAX_MESSAGES, "--messages must be at most {MAX_MESSAGES}");
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    anyhow::ensure!(!args.delays.is_empty(), "--delays needs at least one delay");
    anyhow::ensure!(args.app_timeout_ms > 0, "--app-timeout-ms must be positive");
    anyhow::ensure!(!args.versions.is_empty(), "--dtls needs a version");
    let multihomed = match args.homing.as_str() {
        "single" => vec![false],
        "multi" => vec![true],
        "both" => vec![false, true],
        other => bail!("unknown --homing {other}: single, multi or both"),
    };
    anyhow::ensure!(args.outage_period_ms > 0, "--outage-period-ms must be positive");
    let interleave_ms = args.interleave_ms.unwrap_or(args.outage_period_ms / 2);
    anyhow::ensure!(interleave_ms < args.outage_period_ms, "--interleave-ms must be shorter than the period");
    // Only as long as the shortest gap between two interfaces' outages: never both down.
    let longest = if multihomed.contains(&true) {
        interleave_ms.min(args.outage_period_ms - interleave_ms)
    } else {
        args.outage_period_ms
    };
    anyhow::ensure!(
        (1..longest).contains(&args.outage_ms),
        "--outage-ms must be at least 1 and shorter than {longest} ms (the period and interleave)"
    );
    let nats: Vec<Option<NatPreset>> = if args.nat == "all" {
        vec![None, Some(NatPreset::PortRestricted), Some(NatPreset::Symmetric)]
    } else {
        parse_nat(&args.nat)?
    };
    for nat in &nats {
        nat_kind(*nat)?;
    }
    let driver_peers = match args.peers.as_str() {
        "app" => false,
        "driver" => true,
        other => bail!("unknown --peers {other}: app or driver"),
    };
    // The application peers run every strategy of the simulated E1; the driver peers what the
    // driver offers.
    let runnable = |s: &Strategy| !driver_peers || driver_peers::runs(*s);
    let strategies = if args.strategies.is_empty() {
        Strategy::ALL.into_iter().filter(runnable).collect()
    } else {
        let mut chosen = Vec::new();
        for name in &args.strategies {
            let strategy = parse_strategy(name)?;
            anyhow::ensure!(
                runnable(&strategy),
                "{} does not run with --peers {}",
                strategy.label(),
                args.peers
            );
            chosen.push(strategy);
        }
        chosen
    };
    Ok(RealPlan {
        params: Params {
            messages: args.messages,
            outage_ms: args.outage_ms,
            app_timeout_ms: args.app_timeout_ms,
            jitter_us: 0,
        },
        seeds: args.seeds,
        delays: args.delays,
        nats,
        multihomed,
        strategies,
        shape: ScheduleShape {
            period_ms: args.outage_period_ms,
            interleave_ms,
            first_outage_ms: args.first_outage_ms,
        },
        json: args.json,
        driver_peers,
        versions: args.versions,
    })
}

/// `fastshake netlab e1`.
/// `fastshake netlab e1`: every cell and strategy on real sockets; needs root.
pub fn run_real(args: RealOptions) -> anyhow::Result<()> {
    let plan = plan(args)?;
    match fastshake_netlab::testbed::require_root() {
        Err(TestbedError::NotRoot) => bail!(
            "E1 on real sockets builds network namespaces (ip netns, veth, nftables) and needs root: \
             run it as root (sudo), or drop --real for the simulator"
        ),
        other => other?,
    }
    let program = std::env::current_exe().context("the path of this fastshake binary")?;
    watch_for_interrupts();
    let mut reports = Vec::new();
    for &nat in &plan.nats {
        for &multihomed in &plan.multihomed {
            for &delay_ms in &plan.delays {
                let cell = Cell { delay_ms, multihomed, nat };
                reports.push(run_cell(&program, cell, &plan)?);
            }
        }
    }
    compare_with_single_homed_standard(&mut reports);
    if plan.json {
        let v = serde_json::json!({
            "experiment": "E1, handover resilience (seed 001, Section IV), real sockets in network namespaces",
            "params": plan.params,
            "seeds": plan.seeds,
            "outage_period_ms": plan.shape.period_ms,
            "multihomed_interleave_ms": plan.shape.interleave_ms,
            "first_outage_ms": plan.shape.first_outage_ms,
            "suite": plan.versions.iter().map(|v| match v {
                Versions::Dtls13 => "TLS_AES_128_CCM_8_SHA256 (DTLS 1.3, psk_ke)",
                _ => "TLS_PSK_WITH_AES_128_CCM_8",
            }).collect::<Vec<_>>(),
            "peers": if plan.driver_peers { "driver" } else { "app" },
            "paper_source": "seed 001, Table I (gains only; Fig. 4 gives no values; no outage length given)",
            "cells": reports,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_table(&reports, &plan);
    }
    Ok(())
}

fn run_cell(program: &Path, cell: Cell, plan: &RealPlan) -> anyhow::Result<CellReport> {
    let params = &plan.params;
    let mut rows = Vec::new();
    let runs = plan.versions.iter().flat_map(|&v| plan.strategies.iter().map(move |&s| (v, s)));
    for (version, strategy) in runs {
        let mut row = Row::in_version(strategy, version);
        for seed in 1..=plan.seeds {
            if !plan.json {
                eprintln!(
                    "  running {} in DTLS {} at {} ms, {}, {}, seed {seed}",
                    strategy_name(strategy),
                    version_name(version),
                    cell.delay_ms,
                    if cell.multihomed { "multihomed" } else { "single-homed" },
                    nat_name(cell.nat)
                );
            }
            row.runs.push(run_one(program, strategy, version, &cell, plan, seed)?);
        }
        if row.runs.iter().any(|r| r.wct_s.is_none()) {
            row.status = Some("some runs did not finish".into());
        } else {
            row.average_runs();
        }
        rows.push(row);
    }
    let ideal_s = mean((1..=plan.seeds).map(|seed| {
        let (schedule, rtt_ns) = schedule_of(plan, &cell, seed);
        ideal_bound_ns(params.messages, rtt_ns, &unavoidable_outages(&schedule)) as f64 / 1e9
    }))
    .unwrap_or(0.0);
    Ok(cell_report(cell, rows, ideal_s))
}

/// The run's outage schedule and its nominal round trip, ns.
fn schedule_of(plan: &RealPlan, cell: &Cell, seed: u64) -> (Vec<Vec<(u64, u64)>>, u64) {
    let rtt_ns = 2 * cell.delay_ms * 1_000_000;
    let schedule = plan.shape.schedule(seed, cell, &plan.params, horizon_ms(plan, cell));
    (schedule, rtt_ns)
}

/// How long a run may last: room for every message, one slow reconnection per outage and a margin
/// (the simulated E1's bound, with the margin in outage periods).
fn horizon_ms(plan: &RealPlan, cell: &Cell) -> u64 {
    u64::from(plan.params.messages) * 2 * cell.delay_ms * 4 + 12 * plan.shape.period_ms
}

/// The client's address on `iface` after its `handover`-th handover: the first host address of the
/// interface's /28 (.2; the gateway is .1) at first, then .3 to .14 in turn, never the first again,
/// so that no session is found again by its old address.
fn handover_address(iface: ClientIface, handover: u32) -> Ipv4Addr {
    let [a, b, c, _] = iface.gateway().octets();
    let host = if handover == 0 { 2 } else { 3 + (handover - 1) % 12 };
    Ipv4Addr::new(a, b, c, host as u8)
}

/// One change of the client's interfaces, at `at_ms` after the first ClientHello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LinkChange {
    Down(ClientIface),
    /// During an outage: the interface's next address.
    Readdress(ClientIface, Ipv4Addr),
    Up(ClientIface),
}

fn link_changes(schedule: &[Vec<(u64, u64)>]) -> Vec<(u64, LinkChange)> {
    let mut changes = Vec::new();
    for (i, outages) in schedule.iter().enumerate() {
        let iface = if i == 0 { ClientIface::Eth0 } else { ClientIface::Eth1 };
        for (k, &(start, end)) in outages.iter().enumerate() {
            let handover = u32::try_from(k + 1).unwrap_or(u32::MAX);
            changes.push((start, LinkChange::Down(iface)));
            changes.push((start, LinkChange::Readdress(iface, handover_address(iface, handover))));
            changes.push((end, LinkChange::Up(iface)));
        }
    }
    // Stable: a Down stays before its Readdress.
    changes.sort_by_key(|(at, _)| *at);
    changes
}

/// Starts `fastshake netlab e1-peer ARGS` in a testbed host; `name` is "server" or "client".
fn start_peer(
    testbed: &Testbed,
    host: Host,
    program: &Path,
    args: &[String],
    name: &'static str,
) -> anyhow::Result<LineProcess> {
    let mut command = testbed.command(host, program);
    command.arg("netlab").arg("e1-peer").args(args);
    LineProcess::start(command, name).with_context(|| format!("in {}", testbed.namespace(host)))
}

/// Waits for a line of `peer` starting with `prefix` and returns the rest.
fn expect_prefixed(peer: &LineProcess, prefix: &str, timeout: Duration) -> anyhow::Result<String> {
    peer.wait_for(prefix, timeout, |line| line.strip_prefix(prefix).map(|rest| rest.trim().to_owned()))
}

/// `stop`, then the peer's result.
fn peer_result(mut peer: LineProcess) -> anyhow::Result<serde_json::Value> {
    peer.tell("stop")?;
    let result = expect_prefixed(&peer, "result", PEER_RESULT_TIMEOUT)?;
    peer.close_and_wait(None);
    serde_json::from_str(&result).with_context(|| format!("the {}'s result", peer.name()))
}

fn u32_list(value: &serde_json::Value, key: &str) -> anyhow::Result<Vec<u32>> {
    let list = value.get(key).and_then(|v| v.as_array()).with_context(|| format!("no {key} in a result"))?;
    list.iter()
        .map(|v| {
            v.as_u64().and_then(|n| u32::try_from(n).ok()).with_context(|| format!("{key}: not a count"))
        })
        .collect()
}

fn u32_field(value: &serde_json::Value, key: &str) -> anyhow::Result<u32> {
    value
        .get(key)
        .and_then(|v| v.as_u64())
        .and_then(|n| u32::try_from(n).ok())
        .with_context(|| format!("no {key} in a result"))
}

/// Runs one strategy in one cell with one seed on a testbed of its own.
fn run_one(
    program: &Path,
    strategy: Strategy,
    version: Versions,
    cell: &Cell,
    plan: &RealPlan,
    seed: u64,
) -> anyhow::Result<RunResult> {
    let params = &plan.params;
    let (schedule, rtt_ns) = schedule_of(plan, cell, seed);
    let ideal_ns = ideal_bound_ns(params.messages, rtt_ns, &unavoidable_outages(&schedule));
    let config = TestbedConfig {
        client_interfaces: if cell.multihomed { 2 } else { 1 },
        nat: nat_kind(cell.nat)?,
        ..TestbedConfig::new(program, Duration::from_millis(cell.delay_ms))
    };
    let testbed = Testbed::create(config).context("building the testbed")?;
    let server_address = SocketAddr::from((testbed.server_address(), SERVER_PORT));
    let mut common = vec![
        "--strategy".to_owned(),
        strategy_name(strategy),
        "--messages".to_owned(),
        params.messages.to_string(),
        "--seed".to_owned(),
        seed.to_string(),
        "--dtls".to_owned(),
        version_name(version).to_owned(),
    ];
    if plan.driver_peers {
        common.push("--driver".to_owned());
    }
    let mut server_args = vec!["server".to_owned(), "--listen".to_owned(), server_address.to_string()];
    server_args.extend(common.iter().cloned());
    let server = start_peer(&testbed, Host::Server, program, &server_args, "E1 server")?;
    expect_prefixed(&server, "ready", PEER_START_TIMEOUT)?;

    let mut client_args = vec![
        "client".to_owned(),
        "--server".to_owned(),
        server_address.to_string(),
        "--app-timeout-ms".to_owned(),
        params.app_timeout_ms.to_string(),
    ];
    client_args.extend(common.iter().cloned());
    for iface in testbed.client_interfaces() {
        let address = testbed.client_address(iface).context("a client interface without an address")?;
        client_args.extend(["--iface".to_owned(), format!("{}={address}", iface.name())]);
    }
    let mut client = start_peer(&testbed, Host::Client, program, &client_args, "E1 client")?;
    expect_prefixed(&client, "ready", PEER_START_TIMEOUT)?;

    client.tell("go")?;
    let started = Instant::now();
    let horizon = started + Duration::from_millis(horizon_ms(plan, cell));
    let mut changes = link_changes(&schedule).into_iter().peekable();
    let mut connected = false;
    let done_ns = loop {
        check_interrupt()?;
        let next_change = changes.peek().map(|(at, _)| started + Duration::from_millis(*at));
        // Wake at least every 100 ms to notice an interrupt.
        let wake = [next_change.unwrap_or(horizon), horizon, Instant::now() + Duration::from_millis(100)]
            .into_iter()
            .min()
            .unwrap_or(horizon);
        match client.next_line(wake)?.as_deref() {
            Some("connected") => connected = true,
            // The first handshake failed for good (a driver peer gives up).
            Some(line) if line.starts_with("failed") => break None,
            Some(line) => {
                if let Some(ns) = line.strip_prefix("done ") {
                    break Some(ns.trim().parse::<u64>().context("the client's done line")?);
                }
            }
            None => {}
        }
        // A handshake that never completes (IPC behind a filtering NAT) ends the run early.
        if Instant::now() >= horizon || (!connected && started.elapsed() >= FIRST_HANDSHAKE_BOUND) {
            break None;
        }
        while let Some(&(at, change)) = changes.peek() {
            if started + Duration::from_millis(at) > Instant::now() {
                break;
            }
            changes.next();
            apply_change(&testbed, &mut client, change)?;
        }
    };
    // Late copies of acknowledgements in flight arrive within one round trip.
    std::thread::sleep(Duration::from_nanos(rtt_ns) + Duration::from_millis(50));
    let client_result = peer_result(client)?;
    let server_result = peer_result(server)?;
    let fastest = client_result.get("fastest_round_trip_ns").and_then(serde_json::Value::as_u64);
    drop(testbed);

    let mut result = RunResult {
        seed,
        first_outage_ms: plan.shape.first_ms(seed),
        wct_s: done_ns.map(|ns| ns as f64 / 1e9),
        ideal_s: ideal_ns as f64 / 1e9,
        handshakes: u32_field(&client_result, "handshakes")?,
        resumed_handshakes: u32_field(&client_result, "resumed_handshakes")?,
        reconnections: u32_field(&client_result, "reconnections")?,
        outages: u32_field(&client_result, "outages")?,
        resends: u32_field(&client_result, "resends")?,
        fastest_round_trip_ms: fastest.map(|ns| ns as f64 / 1e6),
        ideal_at_fastest_round_trip_s: fastest
            .map(|ns| ideal_bound_ns(params.messages, ns, &unavoidable_outages(&schedule)) as f64 / 1e9),
        ..RunResult::default()
    };
    result.tally(
        &u32_list(&client_result, "acks")?,
        &u32_list(&server_result, "receipts")?,
        &u32_list(&server_result, "deliveries")?,
    );
    Ok(result)
}

fn apply_change(testbed: &Testbed, client: &mut LineProcess, change: LinkChange) -> anyhow::Result<()> {
    match change {
        LinkChange::Down(iface) => {
            testbed.set_link(iface, false)?;
            client.tell(&format!("down {}", iface.name()))
        }
        LinkChange::Readdress(iface, address) => {
            testbed.change_address(iface, address)?;
            client.tell(&format!("addr {} {address}", iface.name()))
        }
        LinkChange::Up(iface) => {
            testbed.set_link(iface, true)?;
            client.tell(&format!("up {}", iface.name()))
        }
    }
}

/// How far the row's runs are above the ideal bound at their own fastest round trip, percent (mean).
fn above_ideal_at_fastest_round_trip_pct(row: &Row) -> Option<f64> {
    mean(row.runs.iter().filter_map(|r| {
        let (wct, ideal) = (r.wct_s?, r.ideal_at_fastest_round_trip_s?);
        Some((wct - ideal) / ideal * 100.0)
    }))
}

fn print_table(reports: &[CellReport], plan: &RealPlan) {
    let params = &plan.params;
    println!(
        "E1 on real sockets (network namespaces, delay relay): {} messages, outage {} ms every {} ms, \
         application timeout {} ms, {} run(s) per cell, peers: {}",
        params.messages,
        params.outage_ms,
        plan.shape.period_ms,
        params.app_timeout_ms,
        plan.seeds,
        if plan.driver_peers {
            "the E1 application on the DTLS driver"
        } else {
            "the simulated E1's applications over UDP sockets"
        }
    );
    println!(
        "(each outage is `ip link set down`, a new address, `ip link set up`; the outage length is ours: \
         seed 001 does not give it)"
    );
    for report in reports {
        let c = report.cell;
        println!();
        println!(
            "{}: nominal round trip {:.3} s, ideal bound {:.3} s (analytic); \
             last column: the ideal bound at the run's own fastest round trip (relay and processes included)",
            cell_name(&c),
            report.round_trip_s,
            report.ideal_s
        );
        println!(
            "  {:<48} {:>9} {:>13} {:>15} {:>11} {:>10} {:>8} {:>9} {:>13}",
            "strategy",
            "WCT s",
            "gain vs std %",
            "vs 1-homed std %",
            "vs ideal %",
            "handshakes",
            "outages",
            "RTT ms",
            "vs ideal@RTT %"
        );
        for row in &report.rows {
            if let Some(status) = &row.status {
                println!("  {:<48} {status}", row.label);
                continue;
            }
            println!(
                "  {:<48} {} {} {}",
                row.label,
                row_figures(row),
                fmt_opt(mean(row.runs.iter().filter_map(|r| r.fastest_round_trip_ms)), 9, 2),
                fmt_opt(above_ideal_at_fastest_round_trip_pct(row), 13, 2),
            );
        }
        if let Some(paper) = report.paper_tcs_gain_pct {
            let ours = |strategy| {
                report
                    .rows
                    .iter()
                    .find(|r| r.strategy == strategy)
                    .and_then(|r| r.gain_over_single_homed_standard_full_pct)
            };
            let multi = if c.multihomed { "-multi" } else { "" };
            match ours(Strategy::Tcs) {
                Some(gain) => println!(
                    "  seed 001 Table I: DTLS-TCS{multi} gain over (single-homed) standard DTLS {paper:.2} %; ours {gain:.2} %"
                ),
                None => println!(
                    "  seed 001 Table I: DTLS-TCS{multi} gain over (single-homed) standard DTLS {paper:.2} %; ours: \
                     DTLS-TCS not run, the oracle's gain {} %",
                    fmt_opt(ours(Strategy::Oracle), 0, 2)
                ),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The peers.

/// `fastshake netlab e1-peer`: one side of a real E1 run, started by the runner in a testbed host.
#[derive(Clone, Debug)]
pub enum PeerOptions {
    /// The acknowledging server.
    Server(ServerPeerOptions),
    /// The mobile client.
    Client(ClientPeerOptions),
}

/// `fastshake netlab e1-peer server`.
#[derive(Clone, Debug)]
pub struct ServerPeerOptions {
    /// Address of the welcome socket.
    pub listen: SocketAddr,
    /// The strategy, as `--strategies` names it.
    pub strategy: String,
    pub messages: u32,
    pub seed: u64,
    /// Run on the DTLS driver instead of the simulated E1's application.
    pub driver: bool,
    pub version: Versions,
}

/// `fastshake netlab e1-peer client`.
#[derive(Clone, Debug)]
pub struct ClientPeerOptions {
    /// The server's welcome address.
    pub server: SocketAddr,
    /// Each interface and its address, `eth0=192.0.2.2`.
    pub ifaces: Vec<String>,
    /// The strategy, as `--strategies` names it.
    pub strategy: String,
    pub messages: u32,
    pub app_timeout_ms: u64,
    pub seed: u64,
    /// Run on the DTLS driver instead of the simulated E1's application.
    pub driver: bool,
    pub version: Versions,
}

/// `fastshake netlab e1-peer`: runs one side until the runner says `stop`.
pub fn run_peer(args: PeerOptions) -> anyhow::Result<()> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    let outcome = runtime.block_on(async {
        match args {
            PeerOptions::Server(args) => server_peer(args).await,
            PeerOptions::Client(args) => client_peer(args).await,
        }
    });
    // The standard-input thread may still block in a read: do not wait for it.
    runtime.shutdown_background();
    outcome
}

/// What reaches a peer's loop.
enum Input {
    Datagram {
        local: SocketAddr,
        remote: SocketAddr,
        payload: Vec<u8>,
    },
    Control(String),
    /// Standard input ended: the runner is gone.
    Hangup,
}

fn read_control_lines(inputs: mpsc::UnboundedSender<Input>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if inputs.send(Input::Control(line.trim().to_owned())).is_err() {
                return;
            }
        }
        let _ = inputs.send(Input::Hangup);
    });
}

/// A bound UDP socket and the task that forwards what it receives.
struct BoundSocket {
    socket: Arc<UdpSocket>,
    reader: tokio::task::JoinHandle<()>,
}

impl BoundSocket {
    async fn bind(address: SocketAddr, inputs: &mpsc::UnboundedSender<Input>) -> anyhow::Result<BoundSocket> {
        let socket = Arc::new(UdpSocket::bind(address).await.with_context(|| format!("binding {address}"))?);
        let local = socket.local_addr()?;
        let (reading, inputs) = (Arc::clone(&socket), inputs.clone());
        let reader = tokio::spawn(async move {
            let mut buffer = vec![0u8; RECEIVE_BUFFER];
            loop {
                match reading.recv_from(&mut buffer).await {
                    Ok((length, remote)) => {
                        let payload = buffer.get(..length).unwrap_or_default().to_vec();
                        if inputs.send(Input::Datagram { local, remote, payload }).is_err() {
                            return;
                        }
                    }
                    // ICMP errors of earlier sends and the like: the datagram is lost, nothing more.
                    Err(_) => tokio::task::yield_now().await,
                }
            }
        });
        Ok(BoundSocket { socket, reader })
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn new_server(strategy: Strategy, version: Versions, seed: u64) -> E1Server {
    let (_, server_config) = configs_in(strategy, version);
    E1Server::new(strategy, server_config, seed)
}

async fn server_peer(args: ServerPeerOptions) -> anyhow::Result<()> {
    let strategy = parse_strategy(&args.strategy)?;
    anyhow::ensure!(args.messages > 0, "--messages must be at least 1");
    if args.driver {
        return driver_peers::server(args.listen, strategy, args.version, args.messages).await;
    }
    // The application sees the simulated E1's server address; the sockets have the testbed's.
    let real_ip = args.listen.ip();
    let app_local = |real: SocketAddr| SocketAddr::from((SERVER_ADDR, real.port()));
    let (inputs, mut received) = mpsc::unbounded_channel();
    let welcome = BoundSocket::bind(args.listen, &inputs).await?;
    let welcome_port = welcome.socket.local_addr()?.port();
    // The welcome socket and the session ports, by port.
    let mut sockets: HashMap<u16, BoundSocket> = HashMap::new();
    sockets.insert(welcome_port, welcome);
    read_control_lines(inputs.clone());
    let clock = Clock::new();
    let mut app = new_server(strategy, args.version, args.seed);
    say("ready");
    loop {
        // Session ports first: a TCS client may reach one before the session sends from it.
        while let Some(port) = app.poll_bind() {
            if let std::collections::hash_map::Entry::Vacant(slot) = sockets.entry(port) {
                slot.insert(BoundSocket::bind(SocketAddr::new(real_ip, port), &inputs).await?);
            }
        }
        let now = clock.now();
        while let Some(transmit) = app.poll_transmit(now) {
            let port = transmit.src.map_or(welcome_port, |src| src.port());
            if let std::collections::hash_map::Entry::Vacant(slot) = sockets.entry(port) {
                slot.insert(BoundSocket::bind(SocketAddr::new(real_ip, port), &inputs).await?);
            }
            if let Some(bound) = sockets.get(&port) {
                // A datagram that cannot be sent is lost; the engine's and the application's
                // timers cope.
                let _ = bound.socket.send_to(&transmit.payload, transmit.dst).await;
            }
        }
        let deadline = app.poll_timeout();
        tokio::select! {
            input = received.recv() => match input {
                Some(Input::Datagram { local, remote, mut payload }) => {
                    app.handle_datagram(clock.now(), app_local(local), remote, &mut payload);
                }
                Some(Input::Control(line)) if line == "stop" => break,
                Some(Input::Control(_)) => {}
                Some(Input::Hangup) | None => break,
            },
            _ = clock.sleep_until(deadline), if deadline.is_some() => app.handle_timeout(clock.now()),
        }
    }
    let result = serde_json::json!({
        "receipts": app.receipts(args.messages),
        "deliveries": app.deliveries(args.messages),
    });
    say(&format!("result {result}"));
    Ok(())
}

/// One of the client's interfaces as the peer knows it.
struct PeerIface {
    name: String,
    address: Ipv4Addr,
    /// Bound to `address` while the interface is up.
    socket: Option<BoundSocket>,
}

fn parse_iface(text: &str) -> anyhow::Result<(String, Ipv4Addr)> {
    let (name, address) =
        text.split_once('=').with_context(|| format!("--iface {text}: want NAME=ADDRESS"))?;
    Ok((name.to_owned(), address.parse().with_context(|| format!("--iface {text}: not an IPv4 address"))?))
}

async fn client_peer(args: ClientPeerOptions) -> anyhow::Result<()> {
    let strategy = parse_strategy(&args.strategy)?;
    anyhow::ensure!(args.messages > 0, "--messages must be at least 1");
    if args.driver {
        let app_timeout = Duration::from_millis(args.app_timeout_ms);
        return driver_peers::client(
            args.server,
            &args.ifaces,
            strategy,
            args.version,
            args.messages,
            app_timeout,
        )
        .await;
    }
    let (inputs, mut received) = mpsc::unbounded_channel();
    let mut ifaces = Vec::new();
    for text in &args.ifaces {
        let (name, address) = parse_iface(text)?;
        let socket = BoundSocket::bind(SocketAddr::from((address, CLIENT_PORT)), &inputs).await?;
        ifaces.push(PeerIface { name, address, socket: Some(socket) });
    }
    read_control_lines(inputs.clone());
    say("ready");
    loop {
        match received.recv().await {
            Some(Input::Control(line)) if line == "go" => break,
            Some(Input::Control(_)) | Some(Input::Datagram { .. }) => {}
            Some(Input::Hangup) | None => return Ok(()),
        }
    }

    let clock = Clock::new();
    let (client_config, _) = configs_in(strategy, args.version);
    let params =
        Params { messages: args.messages, outage_ms: 0, app_timeout_ms: args.app_timeout_ms, jitter_us: 0 };
    let mut app = MobileClient::new(client_config, mobile_plan(strategy, args.seed, &params, args.server));
    for iface in &ifaces {
        app.handle_node_event(
            clock.now(),
            &NodeEvent::InterfaceUp { iface: iface.name.clone(), addr: iface.address },
        );
    }
    let (mut reported, mut said_connected) = (false, false);
    loop {
        let now = clock.now();
        while let Some(transmit) = app.poll_transmit(now) {
            send_from_iface(&ifaces, &transmit).await;
        }
        if app.tally.handshakes > 0 && !said_connected {
            say("connected");
            said_connected = true;
        }
        if let (Some(done), false) = (app.tally.done_at, reported) {
            say(&format!("done {}", done.since_origin().as_nanos()));
            reported = true;
        }
        let deadline = app.poll_timeout();
        tokio::select! {
            input = received.recv() => match input {
                Some(Input::Datagram { local, remote, mut payload }) => {
                    app.handle_datagram(clock.now(), local, remote, &mut payload);
                }
                Some(Input::Control(line)) => {
                    if line == "stop" {
                        break;
                    }
                    if let Some(event) = link_event(&mut ifaces, &line, &inputs).await? {
                        app.handle_node_event(clock.now(), &event);
                    }
                }
                Some(Input::Hangup) | None => break,
            },
            _ = clock.sleep_until(deadline), if deadline.is_some() => app.handle_timeout(clock.now()),
        }
    }
    let result = serde_json::json!({
        "acks": app.tally.acks,
        "handshakes": app.tally.handshakes,
        "resumed_handshakes": app.tally.resumed_handshakes,
        "reconnections": app.tally.reconnections,
        "outages": app.tally.outages,
        "resends": app.tally.resends,
        "fastest_round_trip_ns": app.tally.fastest_round_trip.map(|d| d.as_nanos() as u64),
    });
    say(&format!("result {result}"));
    Ok(())
}

/// Sends from the socket of the interface whose address the application chose.
async fn send_from_iface(ifaces: &[PeerIface], transmit: &Transmit) {
    let wanted = transmit.src.map(|src| src.ip());
    let iface = ifaces
        .iter()
        .find(|i| wanted == Some(i.address.into()) && i.socket.is_some())
        .or_else(|| ifaces.iter().find(|i| wanted.is_none() && i.socket.is_some()));
    if let Some(bound) = iface.and_then(|i| i.socket.as_ref()) {
        // A link that is down loses the datagram (the route is unreachable): as on a real network.
        let _ = bound.socket.send_to(&transmit.payload, transmit.dst).await;
    }
}

/// Applies a `down`/`addr`/`up` line to the client's sockets and returns the event for the
/// application.
async fn link_event(
    ifaces: &mut [PeerIface],
    line: &str,
    inputs: &mpsc::UnboundedSender<Input>,
) -> anyhow::Result<Option<NodeEvent>> {
    let mut words = line.split_whitespace();
    let (Some(verb), Some(name)) = (words.next(), words.next()) else { return Ok(None) };
    let Some(iface) = ifaces.iter_mut().find(|i| i.name == name) else { return Ok(None) };
    Ok(match verb {
        "down" => Some(NodeEvent::InterfaceDown { iface: iface.name.clone(), addr: iface.address }),
        "addr" => {
            let new: Ipv4Addr = words.next().context("addr without an address")?.parse()?;
            let old = iface.address;
            iface.address = new;
            // The old address is gone: so is its socket.
            iface.socket = None;
            Some(NodeEvent::AddressChanged { iface: iface.name.clone(), old, new })
        }
        "up" => {
            if iface.socket.is_none() {
                iface.socket =
                    Some(BoundSocket::bind(SocketAddr::from((iface.address, CLIENT_PORT)), inputs).await?);
            }
            Some(NodeEvent::InterfaceUp { iface: iface.name.clone(), addr: iface.address })
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortened_shape_repeats_every_period_and_interleaves_the_second_interface() {
        let params = Params { messages: 60, outage_ms: 300, app_timeout_ms: 1_000, jitter_us: 0 };
        let cell = Cell { delay_ms: 5, multihomed: true, nat: None };
        let shape = ScheduleShape { period_ms: 1_500, interleave_ms: 750, first_outage_ms: Some(200) };
        let schedule = shape.schedule(1, &cell, &params, 4_000);
        assert_eq!(schedule[0], vec![(200, 500), (1_700, 2_000), (3_200, 3_500)]);
        assert_eq!(schedule[1], vec![(950, 1_250), (2_450, 2_750), (3_950, 4_250)]);
        assert!(unavoidable_outages(&schedule).is_empty());
    }

    #[test]
    fn the_simulated_shape_draws_the_first_outage_from_the_seed() {
        let params = Params { messages: 600, outage_ms: 1_000, app_timeout_ms: 1_000, jitter_us: 0 };
        let cell = Cell { delay_ms: 30, multihomed: false, nat: None };
        let firsts: Vec<u64> = (1..=3)
            .map(|seed| ScheduleShape::SIMULATED.schedule(seed, &cell, &params, 90_000)[0][0].0)
            .collect();
        assert_eq!(firsts, (1..=3).map(first_outage_ms).collect::<Vec<_>>());
    }

    #[test]
    fn every_outage_is_down_new_address_up_in_that_order() {
        let schedule = vec![vec![(1_000, 1_300), (3_000, 3_300)], vec![(2_000, 2_300)]];
        let changes = link_changes(&schedule);
        assert_eq!(changes.len(), 9);
        assert_eq!(changes[0], (1_000, LinkChange::Down(ClientIface::Eth0)));
        assert_eq!(
            changes[1],
            (1_000, LinkChange::Readdress(ClientIface::Eth0, Ipv4Addr::new(192, 0, 2, 3)))
        );
        assert_eq!(changes[2], (1_300, LinkChange::Up(ClientIface::Eth0)));
        assert_eq!(changes[3].1, LinkChange::Down(ClientIface::Eth1));
        assert_eq!(
            changes[7],
            (3_000, LinkChange::Readdress(ClientIface::Eth0, Ipv4Addr::new(192, 0, 2, 4)))
        );
    }

    #[test]
    fn handover_addresses_stay_host_addresses_of_the_interface() {
        for iface in [ClientIface::Eth0, ClientIface::Eth1] {
            for handover in 0..40 {
                assert!(iface.is_host_address(handover_address(iface, handover)), "{iface:?} {handover}");
                if handover > 0 {
                    assert_ne!(handover_address(iface, handover), handover_address(iface, 0));
                    assert_ne!(handover_address(iface, handover), handover_address(iface, handover + 1));
                }
            }
        }
    }

    #[test]
    fn strategy_names_round_trip() {
        for strategy in Strategy::ALL {
            assert_eq!(parse_strategy(&strategy_name(strategy)).ok(), Some(strategy));
        }
        assert!(parse_strategy("nonsense").is_err());
    }
}
