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

use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_dtls::{CipherSuite, ClientConfig, Connection, Endpoint, Event, ServerConfig};
use fastshake_sim::apps::{App, NodeEvent};
use fastshake_sim::scenario::{Scenario, ScenarioError};
use fastshake_sim::workload::lossy_chain;
use std::net::{Ipv4Addr, SocketAddr};
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

/// Seed bytes for session `index` of a run.
fn seed_bytes(salt: u8, index: u64) -> [u8; 32] {
    let mut seed = [salt; 32];
    seed[..8].copy_from_slice(&index.to_le_bytes());
    seed
}

/// A DTLS client that runs `target` full PSK handshakes one after the other, each from a
/// fresh UDP port (so the server sees a new peer every time).
struct HandshakeLoop {
    config: Arc<ClientConfig>,
    server: SocketAddr,
    local_ip: Option<Ipv4Addr>,
    base_port: u16,
    target: u32,
    started: u32,
    completed: u32,
    failed: u32,
    conn: Option<Connection>,
    next_start_at: Option<Instant>,
    /// Virtual duration of each completed handshake, from its ClientHello.
    durations: Vec<Duration>,
    /// When the last handshake ended (the run goes on until the server's timers run out).
    last_done_at: Instant,
}

impl HandshakeLoop {
    fn port(&self) -> u16 {
        self.base_port.wrapping_add(self.started as u16)
    }

    fn drain(&mut self, now: Instant) {
        let Some(conn) = &mut self.conn else { return };
        let mut finished = false;
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected(summary) => {
                    self.completed += 1;
                    self.durations.push(summary.duration);
                    finished = true;
                }
                Event::Failed(_) => {
                    self.failed += 1;
                    finished = true;
                }
                _ => {}
            }
        }
        if finished {
            self.last_done_at = now;
            self.conn = None;
            if self.started < self.target {
                self.next_start_at = Some(now);
            }
        }
    }
}

impl SansIo for HandshakeLoop {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        // Datagrams for an earlier session's port are stale.
        if local.port() != self.port() {
            return;
        }
        if let Some(conn) = &mut self.conn {
            SansIo::handle_datagram(conn, now, local, remote, datagram);
        }
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let src = self.local_ip.map(|ip| SocketAddr::from((ip, self.port())));
        let transmit = self.conn.as_mut()?.poll_transmit(now)?;
        Some(Transmit { src, ..transmit })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let conn = self.conn.as_ref().and_then(|c| c.poll_timeout());
        match (conn, self.next_start_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.next_start_at.is_some_and(|t| t <= now) {
            self.next_start_at = None;
            self.started += 1;
            let seed = seed_bytes(1, u64::from(self.started));
            self.conn = Some(Connection::client(self.config.clone(), now, self.server, seed));
        } else if let Some(conn) = &mut self.conn {
            conn.handle_timeout(now);
        }
        self.drain(now);
    }
}

impl App for HandshakeLoop {
    fn handle_node_event(&mut self, _now: Instant, event: &NodeEvent) {
        if let NodeEvent::InterfaceUp { addr, .. } | NodeEvent::AddressChanged { new: addr, .. } = event {
            self.local_ip = Some(*addr);
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// A DTLS server endpoint that counts completed handshakes.
struct CountingServer {
    endpoint: Endpoint,
    connected: u32,
}

impl CountingServer {
    fn drain(&mut self) {
        while let Some((_, event)) = self.endpoint.poll_event() {
            if let Event::Connected(_) = event {
                self.connected += 1;
            }
        }
    }
}

impl SansIo for CountingServer {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        self.endpoint.handle_datagram(now, local, remote, datagram);
        self.drain();
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.endpoint.poll_transmit(now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain();
    }
}

impl App for CountingServer {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

const TSCH_PAIR: &str = r#"
# A sensor and its parent one TSCH hop apart: seed 002's Table I link, L = 101, C = 1.
seed = 1
duration_s = 100000

[[node]]
name = "sensor"
interfaces = [{ name = "wpan0", addr = "10.0.0.2" }]

[[node]]
name = "parent"
interfaces = [{ name = "wpan0", addr = "10.0.0.1" }]

[[mac]]
name = "tsch"
kind = "tsch"
slotframe = 101
cells_per_link = 1

[[link]]
name = "hop"
a = "parent.wpan0"
b = "sensor.wpan0"
kind = { type = "ieee802154", mac = "tsch" }

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
    let mut client = ClientConfig::psk(psk_id, psk);
    client.suites = vec![CipherSuite::PskWithAes128Ccm8];
    // tinyDTLS's retransmission timeout, as in seed 002; no give-up inside the run.
    client.initial_retransmit = Duration::from_secs(2);
    client.handshake_timeout = Duration::from_secs(3600);
    let mut server = ServerConfig::psk(psk_id, psk);
    server.suites = vec![CipherSuite::PskWithAes128Ccm8];
    server.initial_retransmit = Duration::from_secs(2);
    server.handshake_timeout = Duration::from_secs(3600);
    server.max_connections = target as usize + 16;
    let (client, server) = (Arc::new(client), Arc::new(server));

    let scenario = Scenario::from_toml(TSCH_PAIR)?;
    let mut built = scenario.build_with(None, &mut |spec, _sim| {
        let app: Box<dyn App> = match spec.kind.as_str() {
            "dtls-psk-loop" => Box::new(HandshakeLoop {
                config: client.clone(),
                server: "10.0.0.1:5684".parse().map_err(|e| ScenarioError::Format(format!("{e}")))?,
                local_ip: None,
                base_port: spec.port,
                target,
                started: 0,
                completed: 0,
                failed: 0,
                conn: None,
                next_start_at: Some(Instant::from_millis(1)),
                durations: Vec::with_capacity(target as usize),
                last_done_at: Instant::ZERO,
            }),
            "dtls-psk-server" => Box::new(CountingServer {
                endpoint: Endpoint::new(server.clone(), seed_bytes(2, 0)),
                connected: 0,
            }),
            _ => return Ok(None),
        };
        Ok(Some(app))
    })?;
    let sim = &mut built.sim;
    let started = std::time::Instant::now();
    sim.run_to_completion(built.duration);
    let wall = started.elapsed();
    let client_app = sim.app(0).as_any().and_then(|a| a.downcast_ref::<HandshakeLoop>());
    let server_app = sim.app(1).as_any().and_then(|a| a.downcast_ref::<CountingServer>());
    let (Some(client_app), Some(server_app)) = (client_app, server_app) else {
        anyhow::bail!("the handshake apps are not where they were put");
    };
    let completed = client_app.completed;
    let mean_handshake = if completed == 0 {
        Duration::ZERO
    } else {
        client_app.durations.iter().sum::<Duration>() / completed
    };
    let hop = sim.link("hop").map(|l| sim.link_counters(l)).unwrap_or_default();
    let frames = hop[0].frames + hop[1].frames;
    Ok(HandshakeFigure {
        target,
        completed,
        failed: client_app.failed,
        server_connected: server_app.connected,
        wall,
        virtual_total: client_app.last_done_at.since_origin(),
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
