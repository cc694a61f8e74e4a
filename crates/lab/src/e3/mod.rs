//! E3: session slots on a constrained server (seed 002, Section IV).
//!
//! Part 1 checks the Engset model against the real engine: N clients, R slots, `refuse` when
//! full, time and call congestion from independent replications (one per seed, 95 % Student-t
//! confidence intervals) beside the formulas. Part 2 runs the same workload under `refuse`,
//! `lru` and `idlest` and prices what an eviction costs the evicted client: the handshakes,
//! bytes, and, over one TSCH hop, seconds and radio energy, with a full handshake or a ticket.
//! The clients and the server run in a deterministic event loop of its own over simulated time,
//! not the simulator's world (see [`workload`] for why, and how a slot is counted); the TSCH
//! prices come from the shared handshake-over-MAC path ([`tsch`]).

pub mod engset;
pub mod tsch;
pub mod workload;

use crate::report::results::{print_figures, Figure};
use engset::{call_congestion, time_congestion, Estimate};
use fastshake_dtls::WhenFull;
use serde::Serialize;
use workload::{replicate, Outcome, Reconnect, Workload};

/// Seed 002's example: R = 3 slots (a 16 kB WiSMote), N = 5 clients, ρ = 0.5.
pub const PAPER_POINT: (usize, usize, f64) = (3, 5, 0.5);
/// Seed 002's 17 % is the Engset time congestion at [`PAPER_POINT`]; the call congestion there is 0.100.
pub const PAPER_TIME: f64 = 0.1724;
pub const PAPER_CALL: f64 = 0.100;

/// What `fastshake lab e3` runs and how it prints it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Print JSON instead of tables.
    pub json: bool,
    /// One independent replication per seed (the confidence intervals need at least 2).
    pub seeds: Vec<u64>,
    /// Requests per replication and grid point (sets the simulated time).
    pub requests: u64,
    /// Seeds of the TSCH handshake prices.
    pub tsch_seeds: u64,
    /// Threads running replications side by side.
    pub threads: Option<usize>,
}

/// Where a formula's value lies against the simulated interval.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Inside,
    Outside,
    /// Fewer than 5 events expected over all replications: no interval to speak of.
    Rare,
}

impl Verdict {
    fn of(estimate: &Estimate, formula: f64, expected_events: f64) -> Verdict {
        if expected_events < 5.0 {
            Verdict::Rare
        } else if estimate.contains(formula) {
            Verdict::Inside
        } else {
            Verdict::Outside
        }
    }

    fn label(self) -> &'static str {
        match self {
            Verdict::Inside => "inside",
            Verdict::Outside => "OUTSIDE",
            Verdict::Rare => "rare",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct GridRow {
    pub slots: usize,
    pub clients: usize,
    pub rho: f64,
    pub simulated_s_per_replication: f64,
    pub requests: u64,
    pub refused: u64,
    pub engset_time: f64,
    pub time: Estimate,
    pub time_verdict: Verdict,
    pub engset_call: f64,
    pub call: Estimate,
    pub call_verdict: Verdict,
    /// Sessions that failed other than by refusal (none expected on a lossless link).
    pub other_failures: u64,
    pub max_open: usize,
}

/// One grid point of part 1.
pub fn grid_row(
    slots: usize,
    clients: usize,
    rho: f64,
    requests: u64,
    seeds: &[u64],
    threads: usize,
) -> GridRow {
    let workload = Workload::engset(clients, slots, rho, requests);
    let outcomes = replicate(&workload, seeds, threads);
    let (time, call) = workload::congestion(&outcomes);
    let total = |f: fn(&Outcome) -> u64| outcomes.iter().map(f).sum::<u64>();
    let (engset_time, engset_call) =
        (time_congestion(clients, slots, rho), call_congestion(clients, slots, rho));
    let all_requests = total(|o| o.requests);
    GridRow {
        slots,
        clients,
        rho,
        simulated_s_per_replication: workload.measured.as_secs_f64(),
        requests: all_requests,
        refused: total(|o| o.refused),
        engset_time,
        time,
        time_verdict: Verdict::of(&time, engset_time, engset_time * all_requests as f64),
        engset_call,
        call,
        call_verdict: Verdict::of(&call, engset_call, engset_call * all_requests as f64),
        other_failures: total(|o| o.other_failures),
        max_open: outcomes.iter().map(|o| o.max_open).max().unwrap_or(0),
    }
}

/// The grid: seed 002's point first, then R ∈ {1, 3, 8}, N ∈ {5, 10, 20}, ρ ∈ {0.1, 0.5, 1}
/// (R < N), and R = N.
pub fn grid() -> Vec<(usize, usize, f64)> {
    let mut points = vec![PAPER_POINT];
    for slots in [1, 3, 8] {
        for clients in [5, 10, 20] {
            for rho in [0.1, 0.5, 1.0] {
                if slots < clients && (slots, clients, rho) != PAPER_POINT {
                    points.push((slots, clients, rho));
                }
            }
        }
    }
    points.push((5, 5, 1.0));
    points
}

#[derive(Clone, Debug, Serialize)]
pub struct EvictionRow {
    pub when_full: String,
    pub reconnect: Reconnect,
    pub requests: u64,
    pub call: Estimate,
    pub evictions: u64,
    pub evictions_per_100_requests: f64,
    /// Per evicted session.
    pub extra_handshakes: f64,
    pub extra_resumed: f64,
    pub extra_refused: f64,
    pub extra_bytes: f64,
    pub extra_tsch_s: f64,
    pub extra_tsch_client_mj: f64,
    /// Victims.
    pub victim_mean_age_s: f64,
    pub victim_mean_idle_s: f64,
    pub victim_mean_silent_s: f64,
    pub victim_talker_share: f64,
    pub victim_active_share: f64,
    pub victim_most_silent_share: f64,
    pub victim_least_recently_used_share: f64,
    pub refused_while_established: u64,
    pub other_failures: u64,
    /// Mean bytes of a request's own (full) handshake, for comparison.
    pub request_handshake_bytes: f64,
}

fn reconnect_name(reconnect: Reconnect) -> &'static str {
    match reconnect {
        Reconnect::Full => "full",
        Reconnect::Ticket => "ticket",
    }
}

fn policy_name(policy: WhenFull) -> &'static str {
    match policy {
        WhenFull::Refuse => "refuse",
        WhenFull::Lru => "lru",
        WhenFull::Idlest => "idlest",
    }
}

/// Part 2 at one workload, one policy and one way of reconnecting.
pub fn eviction_row(
    base: &Workload,
    when_full: WhenFull,
    reconnect: Reconnect,
    prices: &tsch::TschCosts,
    seeds: &[u64],
    threads: usize,
) -> EvictionRow {
    let workload = Workload { when_full, reconnect, ..base.clone() };
    let outcomes = replicate(&workload, seeds, threads);
    let (_, call) = workload::congestion(&outcomes);
    let total = |f: fn(&Outcome) -> u64| outcomes.iter().map(f).sum::<u64>();
    let requests = total(|o| o.requests);
    let evictions = total(|o| o.victims.count);
    let per = |x: f64| if evictions == 0 { 0.0 } else { x / evictions as f64 };
    let completed = total(|o| o.reconnects_completed);
    let resumed = total(|o| o.reconnects_resumed);
    let full = completed - resumed;
    let sum_f = |f: fn(&Outcome) -> f64| outcomes.iter().map(f).sum::<f64>();
    EvictionRow {
        when_full: policy_name(when_full).into(),
        reconnect,
        requests,
        call,
        evictions,
        evictions_per_100_requests: 100.0 * evictions as f64 / requests.max(1) as f64,
        extra_handshakes: per(total(|o| o.reconnects) as f64),
        extra_resumed: per(resumed as f64),
        extra_refused: per(total(|o| o.reconnects_refused) as f64),
        extra_bytes: per(total(|o| o.reconnect_bytes) as f64),
        extra_tsch_s: per(
            full as f64 * prices.full.duration_s + resumed as f64 * prices.abbreviated.duration_s
        ),
        extra_tsch_client_mj: per(
            full as f64 * prices.full.client_energy_mj + resumed as f64 * prices.abbreviated.client_energy_mj
        ),
        victim_mean_age_s: per(sum_f(|o| o.victims.age_s)),
        victim_mean_idle_s: per(sum_f(|o| o.victims.idle_s)),
        victim_mean_silent_s: per(sum_f(|o| o.victims.silent_s)),
        victim_talker_share: per(total(|o| o.victims.talkers) as f64),
        victim_active_share: per(total(|o| o.victims.active) as f64),
        victim_most_silent_share: per(total(|o| o.victims.most_silent) as f64),
        victim_least_recently_used_share: per(total(|o| o.victims.least_recently_used) as f64),
        refused_while_established: total(|o| o.refused_while_established),
        other_failures: total(|o| o.other_failures),
        request_handshake_bytes: total(|o| o.request_handshake_bytes) as f64
            / total(|o| o.sessions).max(1) as f64,
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct EvictionPart {
    pub slots: usize,
    pub clients: usize,
    pub rho: f64,
    pub mean_hold_s: f64,
    pub record_interval_s: f64,
    pub reconnect_after_s: f64,
    pub rows: Vec<EvictionRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub seeds: Vec<u64>,
    pub requests_per_replication: u64,
    pub mean_hold_s: f64,
    pub one_way_delay_ms: f64,
    pub paper: PaperAnchor,
    pub grid: Vec<GridRow>,
    pub tsch: tsch::TschCosts,
    /// The same with a 60 s first timeout: no retransmission fires on a lossless hop.
    pub tsch_patient_timer: tsch::TschCosts,
    pub eviction: Vec<EvictionPart>,
    /// An ECDHE-ECDSA client's way back over the same hop, 2 s timer, and 60 s.
    pub tsch_certificates: tsch::CertCosts,
    pub tsch_certificates_patient_timer: tsch::CertCosts,
}

#[derive(Clone, Debug, Serialize)]
pub struct PaperAnchor {
    pub slots: usize,
    pub clients: usize,
    pub rho: f64,
    pub time_congestion: f64,
    pub call_congestion: f64,
}

/// What to run: the library entry's knobs (`lab e3` and `lab all` set them differently).
#[derive(Clone, Debug)]
pub struct Options {
    /// One independent replication per seed.
    pub seeds: Vec<u64>,
    pub requests: u64,
    /// Seeds of the TSCH handshake prices.
    pub tsch_seeds: Vec<u64>,
    pub threads: usize,
    /// The (R, N, ρ) points of part 1.
    pub grid: Vec<(usize, usize, f64)>,
    /// The workloads of part 2 (eviction); none leaves part 2 out.
    pub eviction_points: Vec<(usize, usize, f64)>,
}

/// Runs both parts: every figure `lab e3` prints, as data.
pub fn experiment(options: &Options) -> anyhow::Result<Report> {
    experiment_stepwise(options, |_| {})
}

/// The steps [`experiment_stepwise`] reports: each grid point, the four TSCH measurements, each
/// eviction row.
pub fn steps(options: &Options) -> u64 {
    (options.grid.len() + 4 + options.eviction_points.len() * 5) as u64
}

/// [`experiment`], calling `step` as each of its [`steps`] begins.
pub fn experiment_stepwise(options: &Options, mut step: impl FnMut(String)) -> anyhow::Result<Report> {
    anyhow::ensure!(options.seeds.len() >= 2, "at least 2 seeds for a confidence interval");
    anyhow::ensure!(
        options.requests > 0 && !options.tsch_seeds.is_empty(),
        "requests and TSCH seeds must be positive"
    );
    let (seeds, threads) = (&options.seeds, options.threads.max(1));
    let grid: Vec<GridRow> = options
        .grid
        .iter()
        .map(|&(r, n, rho)| {
            step(format!("Engset grid: R = {r}, N = {n}, ρ = {rho}"));
            grid_row(r, n, rho, options.requests, seeds, threads)
        })
        .collect();
    let tsch_seeds = &options.tsch_seeds;
    step("TSCH price of a PSK handshake".into());
    let prices = tsch::measure(tsch_seeds, None)?;
    step("TSCH price, patient timer".into());
    let patient = tsch::measure(tsch_seeds, Some(std::time::Duration::from_secs(60)))?;
    step("TSCH price of a certificate handshake".into());
    let certificates = tsch::measure_certificates(tsch_seeds, None)?;
    step("TSCH price of a certificate handshake, patient timer".into());
    let certificates_patient =
        tsch::measure_certificates(tsch_seeds, Some(std::time::Duration::from_secs(60)))?;
    let mut eviction = Vec::new();
    for &(slots, clients, rho) in &options.eviction_points {
        let base = Workload::eviction(clients, slots, rho, options.requests, WhenFull::Refuse);
        let mut rows = Vec::new();
        for policy in [WhenFull::Refuse, WhenFull::Lru, WhenFull::Idlest] {
            for reconnect in [Reconnect::Full, Reconnect::Ticket] {
                if policy == WhenFull::Refuse && reconnect == Reconnect::Ticket {
                    continue; // nobody is evicted
                }
                step(format!("eviction at R = {slots}, N = {clients}: {policy:?}, {reconnect:?}"));
                rows.push(eviction_row(&base, policy, reconnect, &prices, seeds, threads));
            }
        }
        eviction.push(EvictionPart {
            slots,
            clients,
            rho,
            mean_hold_s: base.mean_hold.as_secs_f64(),
            record_interval_s: base.record_interval.map_or(0.0, |d| d.as_secs_f64()),
            reconnect_after_s: base.reconnect_after.as_secs_f64(),
            rows,
        });
    }
    let sample = Workload::engset(1, 1, 1.0, 1);
    Ok(Report {
        seeds: seeds.clone(),
        requests_per_replication: options.requests,
        mean_hold_s: sample.mean_hold.as_secs_f64(),
        one_way_delay_ms: sample.one_way_delay.as_secs_f64() * 1e3,
        paper: PaperAnchor {
            slots: PAPER_POINT.0,
            clients: PAPER_POINT.1,
            rho: PAPER_POINT.2,
            time_congestion: PAPER_TIME,
            call_congestion: PAPER_CALL,
        },
        grid,
        tsch: prices,
        tsch_patient_timer: patient,
        eviction,
        tsch_certificates: certificates,
        tsch_certificates_patient_timer: certificates_patient,
    })
}

/// The headline figures beside the paper's: seed 002's R = 3, N = 5, ρ = 0.5 from the grid, and
/// what a TSCH handshake costs beside Table I's 5.15 s.
pub fn figures(r: &Report) -> Vec<Figure> {
    let mut figures = Vec::new();
    if let Some(g) = r.grid.iter().find(|g| (g.slots, g.clients, g.rho) == PAPER_POINT) {
        let replications = r.seeds.len();
        for (name, paper, formula, sim, verdict) in [
            ("time congestion, R = 3, N = 5, ρ = 0.5", PAPER_TIME, g.engset_time, g.time, g.time_verdict),
            ("call congestion, R = 3, N = 5, ρ = 0.5", PAPER_CALL, g.engset_call, g.call, g.call_verdict),
        ] {
            figures.push(
                Figure::simulated(name, "share", sim.mean)
                    .against(paper, "seed 002 §IV (Engset)")
                    .met_if(verdict != Verdict::Outside, "paper's value inside our 95 % interval")
                    .note(format!(
                        "{replications} replications against the real Endpoint, ±{:.4} (95 %); the formula gives {formula:.4}; {}",
                        sim.half_width,
                        match verdict {
                            Verdict::Inside => "the model holds for the engine's slots",
                            Verdict::Outside => "outside the interval: more replications or a bias in how a slot is held",
                            Verdict::Rare => "too few events for a verdict",
                        }
                    )),
            );
        }
    }
    let p = &r.tsch_patient_timer.full;
    figures.push(
        Figure::simulated("full PSK handshake over one TSCH hop (L = 101, C = 1, 60 s timer)", "s", p.duration_s)
            .against(5.15, "seed 002 Table I (10 frames assumed)")
            .within(crate::e2::claims::TOLERANCE)
            .note(format!(
                "{:.1} frames on the air against the paper's 10; each waits for its link's one cell per slotframe as \
                 the engines hand it over, where Eq. (1) counts 1 + L/(C+1) slots a frame",
                p.data_frames
            )),
    );
    figures
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { json: false, seeds: (1..=10).collect(), requests: 3000, tsch_seeds: 20, threads: None }
    }
}

/// `fastshake lab e3`: runs the grid and the eviction points and prints the tables (or JSON).
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    let options = Options {
        seeds: args.seeds.clone(),
        requests: args.requests,
        tsch_seeds: (0..args.tsch_seeds).collect(),
        threads: args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        grid: grid(),
        eviction_points: vec![PAPER_POINT, (3, 10, 1.0)],
    };
    anyhow::ensure!(args.seeds.len() >= 2, "--seeds needs at least 2 seeds for a confidence interval");
    anyhow::ensure!(args.requests > 0 && args.tsch_seeds > 0, "--requests and --tsch-seeds must be positive");
    let report = experiment(&options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_grid(&report);
        print_eviction(&report);
        println!();
        print_figures("E3 against seed 002", &figures(&report));
    }
    Ok(())
}

fn print_grid(r: &Report) {
    println!(
        "E3 / session slots: N clients, R slots, `refuse` when full, against the real DTLS Endpoint (PSK)"
    );
    println!(
        "Engset: time congestion = C(N,R)ρ^R / Σ_(i≤R) C(N,i)ρ^i; call congestion = the same with N−1 for N."
    );
    println!(
        "Anchor, seed 002 Section IV: R = 3, N = 5, ρ = 0.5 gives time {PAPER_TIME:.4} (the paper's \"about 17 %\"), call {PAPER_CALL:.3}."
    );
    println!(
        "Simulated: mean holding 1/µ = {} s, one-way delay {} ms; slot held from the cookie-verified ClientHello to the",
        r.mean_hold_s, r.one_way_delay_ms
    );
    println!(
        "close_notify's arrival (server's own count); ~{} requests per replication, {} independent replications",
        r.requests_per_replication,
        r.seeds.len()
    );
    println!(
        "(seeds {:?}), 95 % Student-t confidence intervals. 'rare': < 5 events expected, no verdict.",
        r.seeds
    );
    println!();
    println!(
        "{:>2} {:>3} {:>4} {:>8} | {:>7} {:>17} {:>7} | {:>7} {:>17} {:>7} | {:>6}",
        "R", "N", "ρ", "requests", "Engset", "time sim ± 95%", "", "Engset", "call sim ± 95%", "", "failed"
    );
    for g in &r.grid {
        let anchor =
            if (g.slots, g.clients, g.rho) == PAPER_POINT { "  <- paper 0.1724 / 0.100" } else { "" };
        println!(
            "{:>2} {:>3} {:>4.1} {:>8} | {:>7.4} {:>9.4} ± {:<6.4} {:>7} | {:>7.4} {:>9.4} ± {:<6.4} {:>7} | {:>6}{}",
            g.slots,
            g.clients,
            g.rho,
            g.requests,
            g.engset_time,
            g.time.mean,
            g.time.half_width,
            g.time_verdict.label(),
            g.engset_call,
            g.call.mean,
            g.call.half_width,
            g.call_verdict.label(),
            g.other_failures,
            anchor
        );
    }
    let outside = r
        .grid
        .iter()
        .flat_map(|g| [g.time_verdict, g.call_verdict])
        .filter(|v| *v == Verdict::Outside)
        .count();
    let judged =
        r.grid.iter().flat_map(|g| [g.time_verdict, g.call_verdict]).filter(|v| *v != Verdict::Rare).count();
    println!(
        "{outside} of {judged} judged figures outside their 95 % interval (about 5 % expected by chance alone)."
    );
}

/// What a ticket or a client-certificate cache gives back to an evicted certificate client.
fn print_certificates(c: &tsch::CertCosts, patient: &tsch::CertCosts, seeds: usize) {
    println!(
        "How much a ticket or a client-certificate cache gives back: ECDHE-ECDSA, P-256, mutual authentication, each side"
    );
    println!(
        "sending a chain of {} (leaf + {} intermediates), over the same hop with the PSK rows' timer (tinyDTLS's fixed {} s),",
        c.chain_len,
        c.chain_len.saturating_sub(1),
        c.initial_retransmit_s
    );
    println!("evicted a minute after a first handshake that offered every cache; mean of {seeds} seeds; 'saved': of the full");
    println!("ECDHE handshake's seconds / client energy / bytes; 'cached': server took the client chain / client took the");
    println!(
        "server's Certificate from cache; 'no valid.': client / server skipped validating the peer's chain:"
    );
    print_certificate_rows(c);
    println!(
        "  With a {} s first timeout (nothing fires on this lossless hop):",
        patient.initial_retransmit_s
    );
    print_certificate_rows(patient);
    if let (Some(a), Some(b)) = (c.row(tsch::CertReturn::Full), patient.row(tsch::CertReturn::Full)) {
        if a.cost.datagrams > b.cost.datagrams {
            println!(
                "  Under the 2 s timer the full ECDHE handshake sends {:.1} datagrams where {:.1} suffice: its certificate flights",
                a.cost.datagrams, b.cost.datagrams
            );
            println!("  take longer than the timer to cross one cell per slotframe, and each timeout resends them whole.");
        }
    }
    if let (Some(full), Some(bithac)) =
        (patient.row(tsch::CertReturn::Full), patient.row(tsch::CertReturn::Bithac))
    {
        println!(
            "  (anchor: seed 003, TLS 1.2 over TCP, RSA-2048 chains: BiTHaC leaves 38.86-43.25 % of the vanilla bytes; here {:.1} %",
            100.0 * bithac.cost.dtls_bytes / full.cost.dtls_bytes.max(1.0)
        );
        println!("  with the 60 s timer, P-256 chains, DTLS records and a NewSessionTicket in both; the gap is not yet explained.)");
    }
    println!("  The key cache spares only computation (path building and certificate signatures), which this simulation");
    println!("  does not time: on the air 'BiTHaC+keys' is BiTHaC, its gain is the 'no valid.' column.");
}

fn print_certificate_rows(c: &tsch::CertCosts) {
    let full = c.row(tsch::CertReturn::Full).map(|r| r.cost.clone()).unwrap_or_default();
    for row in &c.rows {
        let h = &row.cost;
        let saved = |part: f64, whole: f64| if whole > 0.0 { 100.0 * (1.0 - part / whole) } else { 0.0 };
        println!(
            "  {:<12} {:>7.3} s {:>7.2} mJ {:>6.0} B {:>4.1} datagrams {:>5.1} frames  saved {:>3.0}%/{:>3.0}%/{:>3.0}%  cached {}/{}  no valid. {}/{}  ({}/{} done, {} resumed)",
            row.kind.name(),
            h.duration_s,
            h.client_energy_mj,
            h.dtls_bytes,
            h.datagrams,
            h.data_frames,
            saved(h.duration_s, full.duration_s),
            saved(h.client_energy_mj, full.client_energy_mj),
            saved(h.dtls_bytes, full.dtls_bytes),
            row.client_chain_from_cache,
            row.server_chain_from_cache,
            row.client_skipped_validation,
            row.server_skipped_validation,
            h.completed,
            h.seeds,
            h.resumed,
        );
    }
}

fn print_eviction(r: &Report) {
    let t = &r.tsch;
    println!();
    println!(
        "Handshake prices over one TSCH hop (L = {}, C = {}, 10 ms slots, PDR 1; tinyDTLS's PSK settings), mean of {} seeds:",
        t.slotframe, t.cells, t.full.seeds
    );
    println!(
        "  full PSK     {:>7.3} s {:>7.2} mJ {:>6.0} B {:>4.1} datagrams {:>4.1} frames ({}/{} done)",
        t.full.duration_s,
        t.full.client_energy_mj,
        t.full.dtls_bytes,
        t.full.datagrams,
        t.full.data_frames,
        t.full.completed,
        t.full.seeds
    );
    println!(
        "  ticket       {:>7.3} s {:>7.2} mJ {:>6.0} B {:>4.1} datagrams {:>4.1} frames ({}/{} resumed)",
        t.abbreviated.duration_s,
        t.abbreviated.client_energy_mj,
        t.abbreviated.dtls_bytes,
        t.abbreviated.datagrams,
        t.abbreviated.data_frames,
        t.abbreviated.resumed,
        t.abbreviated.seeds
    );
    println!("  (anchor: seed 002 Table I, L = 101, C = 1: 5.15 s for its assumed 10-frame handshake)");
    let p = &r.tsch_patient_timer;
    if t.full.datagrams > p.full.datagrams {
        println!(
            "  {:.1} datagrams where a clean PSK handshake has {:.0}: the fixed 2 s timer fires while a flight waits for its",
            t.full.datagrams, p.full.datagrams
        );
        println!("  cell.");
    }
    println!("  With a {} s first timeout (nothing fires on this lossless hop):", p.initial_retransmit_s);
    println!(
        "  full PSK     {:>7.3} s {:>7.2} mJ {:>6.0} B {:>4.1} datagrams {:>4.1} frames",
        p.full.duration_s, p.full.client_energy_mj, p.full.dtls_bytes, p.full.datagrams, p.full.data_frames
    );
    println!(
        "  ticket       {:>7.3} s {:>7.2} mJ {:>6.0} B {:>4.1} datagrams {:>4.1} frames ({}/{} resumed)",
        p.abbreviated.duration_s,
        p.abbreviated.client_energy_mj,
        p.abbreviated.dtls_bytes,
        p.abbreviated.datagrams,
        p.abbreviated.data_frames,
        p.abbreviated.resumed,
        p.abbreviated.seeds
    );
    if p.full.duration_s > 5.15 {
        println!(
            "  Still above 5.15 s: {:.1} frames against the paper's 10, and a frame waits for its link's one cell per",
            p.full.data_frames
        );
        println!("  slotframe as the engines send them (the paper: 1 + L/(C+1) slots a frame); E2 compares these in full.");
    }
    println!("  The eviction costs below use the 2 s timer (tinyDTLS's setting).");
    let (ticket_b, full_b) = (p.abbreviated.dtls_bytes, p.full.dtls_bytes);
    if p.abbreviated.duration_s >= p.full.duration_s {
        println!(
            "  A ticket does not pay here: with PSK the full handshake has no certificate or key exchange to skip, while"
        );
        println!(
            "  the ticket rides in both ClientHellos (cookie exchange) and comes back renewed in NewSessionTicket:"
        );
        println!(
            "  {ticket_b:.0} B against {full_b:.0} B (60 s timer), so more 127-byte frames, each waiting for the hop's next cell."
        );
    } else {
        println!("  The ticket saves {:.0} % of the seconds and {:.0} % of the client's energy of a full handshake ({ticket_b:.0} B against {full_b:.0} B).",
            100.0 * (1.0 - p.abbreviated.duration_s / p.full.duration_s),
            100.0 * (1.0 - p.abbreviated.client_energy_mj / p.full.client_energy_mj));
    }
    print_certificates(&r.tsch_certificates, &r.tsch_certificates_patient_timer, t.full.seeds);
    for part in &r.eviction {
        println!();
        println!(
            "What eviction costs the evicted: R = {}, N = {}, ρ = {} (Engset time {:.4}, call {:.4}{}); half the clients",
            part.slots,
            part.clients,
            part.rho,
            time_congestion(part.clients, part.slots, part.rho),
            call_congestion(part.clients, part.slots, part.rho),
            if (part.slots, part.clients, part.rho) == PAPER_POINT { "; paper 0.1724 / 0.100" } else { "" }
        );
        println!(
            "send a request every {} s (mean), half only listen to notifications as often; an evicted client that still",
            part.record_interval_s
        );
        println!(
            "wants its session reconnects after Exp(mean {} s). Costs per evicted session; TSCH s / mJ = its reconnect",
            part.reconnect_after_s
        );
        println!("handshakes priced as above.");
        println!(
            "{:<7} {:<7} {:>8} {:>16} {:>6} {:>7} | {:>6} {:>6} {:>7} {:>7} {:>7} {:>9} | {:>9}",
            "policy",
            "reconn.",
            "requests",
            "call ± 95%",
            "evict.",
            "/100req",
            "extra",
            "resum.",
            "bytes",
            "TSCH s",
            "mJ",
            "saved s/mJ",
            "ref.w/est"
        );
        for row in &part.rows {
            let full = part
                .rows
                .iter()
                .find(|f| f.when_full == row.when_full && f.reconnect == Reconnect::Full)
                .filter(|_| row.reconnect == Reconnect::Ticket);
            let saved = full.filter(|f| f.extra_tsch_s > 0.0).map_or("-".to_string(), |f| {
                format!("{:.0}%/{:.0}%", 100.0 * (1.0 - row.extra_tsch_s / f.extra_tsch_s), {
                    100.0 * (1.0 - row.extra_tsch_client_mj / f.extra_tsch_client_mj)
                })
            });
            println!(
                "{:<7} {:<7} {:>8} {:>8.4} ± {:<6.4} {:>6} {:>7.2} | {:>6.2} {:>6.2} {:>7.0} {:>7.2} {:>7.2} {:>10} | {:>9}",
                row.when_full,
                reconnect_name(row.reconnect),
                row.requests,
                row.call.mean,
                row.call.half_width,
                row.evictions,
                row.evictions_per_100_requests,
                row.extra_handshakes,
                row.extra_resumed,
                row.extra_bytes,
                row.extra_tsch_s,
                row.extra_tsch_client_mj,
                saved,
                if row.when_full == "refuse" {
                    "n/a".to_string()
                } else {
                    row.refused_while_established.to_string()
                }
            );
        }
        println!("Which sessions each policy evicts (means over victims):");
        println!(
            "{:<7} {:<7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>11} {:>9}",
            "policy", "reconn.", "age s", "idle s", "silent", "talker", "active", "most silent", "LRU"
        );
        for row in part.rows.iter().filter(|r| r.evictions > 0) {
            println!(
                "{:<7} {:<7} {:>7.1} {:>7.1} {:>7.1} {:>6.0}% {:>6.0}% {:>10.0}% {:>8.0}%",
                row.when_full,
                reconnect_name(row.reconnect),
                row.victim_mean_age_s,
                row.victim_mean_idle_s,
                row.victim_mean_silent_s,
                100.0 * row.victim_talker_share,
                100.0 * row.victim_active_share,
                100.0 * row.victim_most_silent_share,
                100.0 * row.victim_least_recently_used_share
            );
        }
    }
    println!();
    println!("'most silent' / 'LRU': the victim had been silent the longest / had the oldest application record of the");
    println!("established sessions (client-side view, within 15 ms). 'ref.w/est': refusals while an established session");
    println!("could have been evicted (must be 0 under lru and idlest; under refuse every refusal is one).");
    println!("'/100req': evictions per 100 requests. Whenever more clients want a session than there are slots, lru and");
    println!("idlest make them take turns: each evicted client comes back and evicts another, so a session lives for the");
    println!("'age' column rather than its holding time, and the evictions per request grow with the excess demand;");
    println!("refuse turns the newcomer away instead and the holders keep their sessions (the Engset call congestion).");
    println!("'extra': reconnect handshakes per eviction; 'resum.': those resumed by ticket; 'saved': share of the TSCH");
    println!("seconds / energy of a full reconnect that the ticket gives back; 'active': the victim had an application");
    println!("record within the last mean record interval; 'talker': the victim sends requests (others only listen);");
    println!("'age': since its handshake; 'idle': since its last application record either way; 'silent': since it last");
    println!("sent anything (what the server heard). LRU counts the server's notifications as use, the idlest policy does not.");
}
