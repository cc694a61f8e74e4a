//! `fastshake bench sim [--quick] [--json]`: what the simulator costs on one core.
//!
//! 1. Events per second. Workload (`fastshake_sim::workload::lossy_chain`): 16 clients ping
//!    one echo server across a lossy 3-hop chain (client — r1 — r2 — r3 — server; 1 % Bernoulli
//!    loss and 0–1 ms uniform jitter on every link, 100 Mbit/s), each client sending a 64-byte
//!    request every millisecond. An event is one datagram arrival at a link's far end, one app
//!    timer or one scheduled action. The figure is the median over the repetitions, printed
//!    beside the simulator's target (≥ 2 million events/s).
//! 2. Wall time of 1,000 sequential DTLS 1.2 PSK handshakes (TLS_PSK_WITH_AES_128_CCM_8, the
//!    DTLS engine of this project) between two nodes one TSCH hop apart (L = 101, C = 1,
//!    10 ms slots, PDR 1), driven through the simulator core like any other app. Beside it, the
//!    virtual time per handshake and seed 002's analytic figure for that link under its
//!    assumption of 10 frames per handshake (Table I: 5.15 s).

use fastshake_core::Instant;
use fastshake_dtls::Versions;
use fastshake_dtls::{CipherSuite, ClientConfig, ServerConfig};
use fastshake_lab::apps::dtls_client::{DtlsClientLoop, SeedTemplate, SessionPlan};
use fastshake_lab::apps::dtls_server::DtlsEchoServer;
use fastshake_sim::apps::App;
use fastshake_sim::scenario::{ieee802154_chain_toml, tsch_fields, Scenario, ScenarioError};
use fastshake_sim::workload::lossy_chain;
use std::sync::Arc;
use std::time::Duration;

const TARGET_EVENTS_PER_S: f64 = 2_000_000.0;
/// Seed 002, Table I, L = 101, C = 1, 10 frames per handshake.
const PAPER_TSCH_L101_C1_S: f64 = 5.15;

#[derive(clap::Args)]
pub struct Args {
    /// A shorter run (fewer virtual seconds, repetitions and handshakes).
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

const CLIENTS: u8 = 16;

struct EventsFigure {
    virtual_s: u64,
    reps: usize,
    events: u64,
    rates: Vec<f64>,
}

fn events_per_second(quick: bool) -> EventsFigure {
    let (virtual_s, reps) = if quick { (2, 3) } else { (10, 5) };
    let mut rates = Vec::with_capacity(reps);
    let mut events = 0;
    for rep in 0..reps {
        let mut sim = lossy_chain(rep as u64 + 1, CLIENTS, virtual_s);
        let started = std::time::Instant::now();
        sim.run_until(Instant::from_millis(virtual_s * 1000 + 100));
        let wall = started.elapsed().as_secs_f64();
        events = sim.events_processed();
        rates.push(events as f64 / wall);
    }
    rates.sort_by(f64::total_cmp);
    EventsFigure { virtual_s, reps, events, rates }
}

/// The apps of the TSCH pair: the sensor's handshakes and the parent's server.
const TSCH_PAIR_APPS: &str = r#"
[[app]]
node = "sensor"
kind = "dtls-psk-loop"
port = 20000

[[app]]
node = "parent"
kind = "dtls-psk-server"
port = 5684
"#;

struct HandshakeFigure {
    target: u32,
    completed: u32,
    failed: u32,
    server_connected: u32,
    wall: Duration,
    virtual_total: Duration,
    mean_handshake: Duration,
    frames_per_handshake: f64,
    events: u64,
}

fn tsch_handshakes(target: u32) -> anyhow::Result<HandshakeFigure> {
    let (psk_id, psk) = (b"Client_identity".as_slice(), [0x11u8; 16]);
    let mut client = ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(psk_id, psk) };
    client.suites = vec![CipherSuite::PskWithAes128Ccm8];
    // tinyDTLS's retransmission timeout, as in seed 002; no give-up inside the run.
    client.initial_retransmit = Duration::from_secs(2);
    client.handshake_timeout = Duration::from_secs(3600);
    let mut server = ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk(psk_id, psk) };
    server.suites = vec![CipherSuite::PskWithAes128Ccm8];
    server.initial_retransmit = Duration::from_secs(2);
    server.handshake_timeout = Duration::from_secs(3600);
    server.max_connections = target as usize + 16;
    let (client, server) = (Arc::new(client), Arc::new(server));

    let scenario = Scenario::from_toml(&format!(
        "seed = 1\nduration_s = 100000\n\n{}{TSCH_PAIR_APPS}",
        // A sensor and its parent one TSCH hop apart: seed 002's Table I link, L = 101, C = 1.
        ieee802154_chain_toml(&["sensor", "parent"], "tsch", &tsch_fields(101, 1))
    ))?;
    let mut built = scenario.build_with(None, &mut |spec, _sim| {
        let app: Box<dyn App> = match spec.kind.as_str() {
            // Handshakes only, one after the other from fresh ports, each dropped once it completes.
            "dtls-psk-loop" => Box::new(DtlsClientLoop::new(
                client.clone(),
                SessionPlan {
                    server: "10.0.0.1:5684".parse().map_err(|e| ScenarioError::Format(format!("{e}")))?,
                    base_port: spec.port,
                    sessions: target,
                    resume: false,
                    early_data: false,
                    records: 0,
                    record_len: 0,
                    move_mid_session: false,
                    close: false,
                    record_rto: Duration::from_secs(1),
                    max_record_rto: Duration::from_secs(1),
                    stall_after: Duration::from_secs(3600),
                    first_start: Instant::from_millis(1),
                    seeds: SeedTemplate([1; 32]),
                },
            )),
            "dtls-psk-server" => {
                let mut seed = [2; 32];
                seed[..8].fill(0);
                let server = DtlsEchoServer::new(server.clone(), seed, false)
                    .map_err(|e| ScenarioError::Format(format!("the PSK server: {e}")))?;
                Box::new(server)
            }
            _ => return Ok(None),
        };
        Ok(Some(app))
    })?;
    let sim = &mut built.sim;
    let started = std::time::Instant::now();
    sim.run_to_completion(built.duration);
    let wall = started.elapsed();
    let client_app = sim.app(0).as_any().and_then(|a| a.downcast_ref::<DtlsClientLoop>());
    let server_app = sim.app(1).as_any().and_then(|a| a.downcast_ref::<DtlsEchoServer>());
    let (Some(client_app), Some(server_app)) = (client_app, server_app) else {
        anyhow::bail!("the handshake apps are not where they were put");
    };
    let (client_tally, server_tally) = (&client_app.tally, &server_app.tally);
    let completed = client_tally.samples.len() as u32;
    let mean_handshake = if completed == 0 {
        Duration::ZERO
    } else {
        client_tally.samples.iter().map(|s| s.duration).sum::<Duration>() / completed
    };
    let hop = sim.link("hop").map(|l| sim.link_counters(l)).unwrap_or_default();
    let frames = hop[0].frames + hop[1].frames;
    Ok(HandshakeFigure {
        target,
        completed,
        failed: client_tally.failures.len() as u32,
        server_connected: server_tally.connected,
        wall,
        virtual_total: client_tally.last_done_at.since_origin(),
        mean_handshake,
        frames_per_handshake: frames as f64 / f64::from(completed.max(1)),
        events: sim.events_processed(),
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let ev = events_per_second(args.quick);
    let median = ev.rates[ev.rates.len() / 2];
    let hs = tsch_handshakes(if args.quick { 100 } else { 1000 })?;
    let per_wall_s = f64::from(hs.completed) / hs.wall.as_secs_f64().max(1e-9);
    if args.json {
        let v = serde_json::json!({
            "events": {
                "workload": format!("{CLIENTS} pingers, 1 kHz each, lossy 3-hop chain, {} virtual s", ev.virtual_s),
                "events_per_run": ev.events,
                "repetitions": ev.reps,
                "median_events_per_s": median,
                "min_events_per_s": ev.rates[0],
                "max_events_per_s": ev.rates[ev.rates.len() - 1],
                "target_events_per_s": TARGET_EVENTS_PER_S,
                "ratio_to_target": median / TARGET_EVENTS_PER_S,
            },
            "tsch_psk_handshakes": {
                "link": "one TSCH hop, L = 101, C = 1, 10 ms slots, PDR 1",
                "suite": "TLS_PSK_WITH_AES_128_CCM_8",
                "handshakes_asked": hs.target,
                "completed_client": hs.completed,
                "completed_server": hs.server_connected,
                "failed": hs.failed,
                "wall_s": hs.wall.as_secs_f64(),
                "handshakes_per_wall_s": per_wall_s,
                "virtual_s_total": hs.virtual_total.as_secs_f64(),
                "virtual_s_per_handshake": hs.mean_handshake.as_secs_f64(),
                "paper_analytic_s_per_handshake_10_frames": PAPER_TSCH_L101_C1_S,
                "frames_per_handshake": hs.frames_per_handshake,
                "events": hs.events,
            },
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "bench sim: {CLIENTS} pingers at 1 kHz over a lossy 3-hop chain, {} s virtual, {} runs",
        ev.virtual_s, ev.reps
    );
    println!("  events per run      {}", ev.events);
    println!(
        "  events/s (median)   {:>12.0}   target {:>12.0}   ratio {:.2}",
        median,
        TARGET_EVENTS_PER_S,
        median / TARGET_EVENTS_PER_S
    );
    println!("  events/s (min..max) {:>12.0} .. {:.0}", ev.rates[0], ev.rates[ev.rates.len() - 1]);
    println!();
    println!("{} DTLS PSK handshakes (AES-128-CCM-8) over one TSCH hop (L = 101, C = 1, PDR 1):", hs.target);
    println!(
        "  completed           {} (server saw {}), failed {}",
        hs.completed, hs.server_connected, hs.failed
    );
    println!(
        "  wall time           {:.3} s   ({:.0} handshakes per wall second)",
        hs.wall.as_secs_f64(),
        per_wall_s
    );
    println!(
        "  virtual time        {:.1} s in all; {:.3} s per handshake   seed 002 analytic (10 frames): {:.2} s",
        hs.virtual_total.as_secs_f64(),
        hs.mean_handshake.as_secs_f64(),
        PAPER_TSCH_L101_C1_S
    );
    println!("  frames on the air   {:.1} per handshake (data and link-layer ACKs)", hs.frames_per_handshake);
    if cfg!(debug_assertions) {
        println!("  (debug build: run with --release for meaningful wall-clock figures)");
    }
    Ok(())
}
