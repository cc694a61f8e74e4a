//! Seed 002 Section III-C: TSCH, Eq. (1)/(2) and Tables I/II beside the simulator (10 one-frame
//! datagrams, as the paper assumes), the beacon settings the paper calls equivalent, and our
//! real handshake on the same schedules.
//!
//! The 10-frame rows send 10 one-frame datagrams, alternately client → server and back, through
//! a TSCH model with C random dedicated cells per link and direction, fresh for every seed. As in
//! the paper's analysis, each datagram is handed to the MAC at a uniformly random instant of the
//! slotframe after the previous one arrived, and the figure is the sum of the 10 hand-over-to-
//! arrival latencies. Relays forward as soon as a frame arrives.

use super::beacon;
use super::claims;
use super::handshake::{self, BothTimers, Variant};
use super::Options;
use crate::pki::LabPki;
use fastshake_sim::mac::sequence::{sweep, SequencePlan, SweepStats};
use fastshake_sim::mac::{CellPlacement, MacConfig, TschConfig};
use serde::Serialize;

/// Frames per handshake assumed by the paper.
pub const FRAMES: usize = 10;
/// A datagram that fits one 127-byte frame on every hop, a relay's included (there 6LoWPAN
/// carries both addresses inline: 25 bytes of IPHC and UDP NHC), as the paper's one frame per
/// message assumes.
const DATAGRAM_LEN: usize = 64;
pub const TIMESLOT_MS: f64 = 10.0;

/// (table, L, C, H, seconds) from seed 002, Tables I and II.
pub const PAPER: [(&str, u32, u32, usize, f64); 12] = [
    ("I", 101, 1, 1, 5.15),
    ("I", 101, 2, 1, 3.467),
    ("I", 101, 3, 1, 2.625),
    ("I", 1001, 1, 1, 50.15),
    ("I", 1001, 2, 1, 33.467),
    ("I", 1001, 3, 1, 25.125),
    ("II", 101, 1, 2, 10.3),
    ("II", 101, 1, 3, 15.45),
    ("II", 101, 1, 4, 20.6),
    ("II", 1001, 1, 2, 100.3),
    ("II", 1001, 1, 3, 150.45),
    ("II", 1001, 1, 4, 200.6),
];

/// Beacon settings seed 002 (Section III-C) calls roughly equivalent to L = 101 and C = 1, 2, 3:
/// [BI 983 ms, CAP 61.4 ms], [491.5, 30.7], [491.5, 61.4], i.e. (BO, SO) = (6, 2), (5, 1), (5, 2).
pub const BEACON_EQUIVALENTS: [(u32, u8, u8); 3] = [(1, 6, 2), (2, 5, 1), (3, 5, 2)];

/// One row of Tables I/II (or Eq. (1) with P < 1) beside the 10-frame simulation.
#[derive(Clone, Debug, Serialize)]
pub struct TableRow {
    pub table: &'static str,
    pub l: u32,
    pub c: u32,
    pub h: usize,
    pub pdr: f64,
    /// The paper's figure (Tables I/II), or Eq. (1)/(2) where the paper gives no table entry.
    pub paper_s: f64,
    pub paper_is_table: bool,
    pub simulated: SweepStats,
    pub diff_percent: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BeaconRow {
    pub tsch_c: u32,
    pub beacon_order: u8,
    pub superframe_order: u8,
    pub bi_ms: f64,
    pub cap_ms: f64,
    pub tsch_paper_s: f64,
    /// 10 datagrams, each handed over at a random instant of the BI after the previous arrived.
    pub simulated_random_arrival: SweepStats,
    /// 10 datagrams, each handed over as soon as the previous one arrived.
    pub simulated_back_to_back: SweepStats,
    /// Our real handshake on the beacon setting (one hop).
    pub real: BothTimers,
}

/// Our handshake on a Table I/II schedule.
#[derive(Clone, Debug, Serialize)]
pub struct RealRow {
    pub l: u32,
    pub c: u32,
    pub h: usize,
    pub paper_s: f64,
    pub handshake: BothTimers,
    /// The same in DTLS 1.3 (PSK, psk_ke).
    pub handshake13: BothTimers,
    /// Eq. (2) with the frames of our clean handshake (no resend) in place of the paper's 10.
    pub formula_with_our_frames_s: f64,
    pub diff_percent: f64,
    /// Where ours and the paper's differ by more than 25 %: why.
    pub why: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Section {
    pub frames_per_handshake: usize,
    pub timeslot_ms: f64,
    pub table_seeds: u64,
    pub rows: Vec<TableRow>,
    pub beacon_equivalents: Vec<BeaconRow>,
    pub real_seeds: u64,
    pub real: Vec<RealRow>,
}

/// Eq. (1)/(2) for `frames` link-layer frames, seconds.
pub fn formula_s(frames: f64, l: u32, c: u32, h: usize, pdr: f64) -> f64 {
    frames * h as f64 * (1.0 + f64::from(l) / f64::from(c + 1)) / pdr * TIMESLOT_MS / 1000.0
}

pub fn config(l: u32, c: u32, pdr: f64) -> MacConfig {
    MacConfig::Tsch(TschConfig {
        slotframe: l,
        cells_per_link: c,
        timeslot_ms: TIMESLOT_MS,
        pdr,
        ack_pdr: 1.0,
        // The paper's 1/P assumes every frame gets through eventually.
        max_frame_retries: u8::MAX,
        placement: CellPlacement::Random,
        cells: Vec::new(),
    })
}

fn plan(h: usize, spread_ns: u64) -> SequencePlan {
    SequencePlan {
        arrival_spread_ns: spread_ns,
        ..SequencePlan::flights((0..=h).collect(), FRAMES, DATAGRAM_LEN)
    }
}

fn table_row(
    table: &'static str,
    l: u32,
    c: u32,
    h: usize,
    pdr: f64,
    paper: Option<f64>,
    seeds: std::ops::Range<u64>,
) -> anyhow::Result<TableRow> {
    let spread = (f64::from(l) * TIMESLOT_MS * 1e6) as u64;
    let simulated = sweep(&config(l, c, pdr), &plan(h, spread), seeds)?;
    let paper_s = paper.unwrap_or_else(|| formula_s(FRAMES as f64, l, c, h, pdr));
    let diff_percent = claims::diff(simulated.mean_latency_s, paper_s) * 100.0;
    Ok(TableRow { table, l, c, h, pdr, paper_s, paper_is_table: paper.is_some(), simulated, diff_percent })
}

pub fn run(options: &Options, pki: &LabPki) -> anyhow::Result<Section> {
    let table_seeds = options.seeds * 10;
    let table_range = options.seeds_from_first(table_seeds);
    let mut rows = Vec::new();
    for (table, l, c, h, seconds) in PAPER {
        if options.hops(&[h]).is_empty() {
            continue;
        }
        rows.push(table_row(table, l, c, h, 1.0, Some(seconds), table_range.clone())?);
    }
    // Beyond the tables: Eq. (1) with P < 1.
    for pdr in [0.9, 0.7] {
        rows.push(table_row("Eq.1", 101, 1, 1, pdr, None, table_range.clone())?);
    }
    let mut beacon_equivalents = Vec::new();
    for (c, bo, so) in BEACON_EQUIVALENTS {
        let mac = beacon::config(bo, so);
        let bi_ns = (beacon::order_ms(bo) * 1e6) as u64;
        let seeds = options.seeds_from_first(table_seeds.min(500));
        beacon_equivalents.push(BeaconRow {
            tsch_c: c,
            beacon_order: bo,
            superframe_order: so,
            bi_ms: beacon::order_ms(bo),
            cap_ms: beacon::order_ms(so),
            tsch_paper_s: formula_s(FRAMES as f64, 101, c, 1, 1.0),
            simulated_random_arrival: sweep(&mac, &plan(1, bi_ns), seeds.clone())?,
            simulated_back_to_back: sweep(&mac, &plan(1, 0), seeds)?,
            real: handshake::both_timers(&mac, 1, Variant::Psk, options.seed_range(), pki)?,
        });
    }
    // Frames per hop of a clean handshake: one on a schedule fast enough that no timer fires.
    let clean = handshake::mean(
        &config(11, 3, 1.0),
        1,
        Variant::Psk,
        handshake::Timer::Fixed2s,
        options.seeds_from_first(1),
        pki,
    )?;
    let mut real = Vec::new();
    for (_, l, c, h, paper_s) in PAPER {
        if options.hops(&[h]).is_empty() || (l > 101 && options.quick) {
            continue;
        }
        let handshake =
            handshake::both_timers(&config(l, c, 1.0), h, Variant::Psk, options.seed_range(), pki)?;
        let handshake13 =
            handshake::both_timers(&config(l, c, 1.0), h, Variant::Psk13, options.seed_range(), pki)?;
        let m = handshake.main();
        let frames_per_hop = m.data_frames / h as f64;
        let formula_with_our_frames_s = formula_s(clean.data_frames, l, c, h, 1.0);
        let diff = claims::diff(m.duration_s, paper_s);
        let why = if diff.abs() <= claims::TOLERANCE {
            String::new()
        } else {
            let mut why = format!(
                "a clean handshake of ours is {:.0} frames ({:.0} datagrams, {:.0} DTLS bytes, each behind {} bytes of \
                 6LoWPAN IPHC), not 10: Eq. (2) with {:.0} frames gives {formula_with_our_frames_s:.2} s; \
                 we put {frames_per_hop:.1} frames per hop on the air",
                clean.data_frames,
                clean.datagrams,
                clean.dtls_bytes,
                crate::mac_handshake::lowpan_header_len(1),
                clean.data_frames
            );
            if m.spurious_retransmissions > 0.0 {
                why.push_str(&format!(
                    "; the {} fired {:.2} times per handshake while a flight was still crossing the schedule",
                    handshake.main_timer().name(),
                    m.spurious_retransmissions
                ));
            }
            why.push_str(
                "; the fragments of one datagram go in the link's next cells (L/C slots apart), not each at a fresh random instant",
            );
            why
        };
        real.push(RealRow {
            l,
            c,
            h,
            paper_s,
            handshake,
            handshake13,
            formula_with_our_frames_s,
            diff_percent: diff * 100.0,
            why,
        });
    }
    Ok(Section {
        frames_per_handshake: FRAMES,
        timeslot_ms: TIMESLOT_MS,
        table_seeds,
        rows,
        beacon_equivalents,
        real_seeds: options.seeds,
        real,
    })
}

pub fn print(s: &Section) {
    println!(
        "== TSCH (seed 002 Section III-C): {} link-layer frames per handshake, {} ms timeslots, mean over {} seeds",
        s.frames_per_handshake, s.timeslot_ms, s.table_seeds
    );
    println!("paper: Tables I and II; 'Eq.1' rows: its Eq. (1), no table entry");
    println!(
        "{:<5} {:>5} {:>2} {:>2} {:>5} {:>10} {:>13} {:>8} {:>7} {:>10}",
        "table", "L", "C", "H", "P", "paper s", "simulated s", "±95% s", "diff %", "radio mJ"
    );
    for row in &s.rows {
        println!(
            "{:<5} {:>5} {:>2} {:>2} {:>5.2} {:>10.3} {:>13.3} {:>8.3} {:>+7.2} {:>10.2}",
            row.table,
            row.l,
            row.c,
            row.h,
            row.pdr,
            row.paper_s,
            row.simulated.mean_latency_s,
            row.simulated.ci95_s,
            row.diff_percent,
            row.simulated.client_energy_mj
        );
    }
    println!(
        "Eq.1 rows with P < 1 differ by design: a retry in a dedicated cell waits for the link's next cell"
    );
    println!(
        "(L/C slots later on average), where Eq. (1) charges it like a fresh arrival, 1 + L/(C+1) slots."
    );
    println!();
    println!("Beacon settings the paper calls roughly equivalent to L = 101 (one hop; 10 datagrams 'random' = handed");
    println!("over at a random instant of the BI like the TSCH rows, 'b2b' = back to back; 'real' = our handshake):");
    println!(
        "{:>6} {:>3} {:>3} {:>7} {:>7} {:>11} {:>9} {:>7} {:>8} {:>8}",
        "TSCH C", "BO", "SO", "BI ms", "CAP ms", "TSCH pap s", "random s", "b2b s", "real s", "real ad s"
    );
    for b in &s.beacon_equivalents {
        println!(
            "{:>6} {:>3} {:>3} {:>7.1} {:>7.1} {:>11.3} {:>9.3} {:>7.3} {:>8.3} {:>8.3}",
            b.tsch_c,
            b.beacon_order,
            b.superframe_order,
            b.bi_ms,
            b.cap_ms,
            b.tsch_paper_s,
            b.simulated_random_arrival.mean_latency_s,
            b.simulated_back_to_back.mean_latency_s,
            b.real.fixed.duration_s,
            b.real.adaptive.duration_s,
        );
    }
    println!();
    println!(
        "Our PSK handshake on the Table I/II schedules (P = 1), mean over {} seeds; 'ours' uses {}:",
        s.real_seeds,
        s.real.first().map_or("-".to_string(), |r| r.handshake.main_timer().name())
    );
    println!("{}", handshake::ADAPTIVE_LEGEND);
    println!(
        "{:>5} {:>2} {:>2} | {:>8} {:>8} {:>7} | {:>8} {:>6} {:>8} {:>6} {:>11} | {:>7} {:>8} {:>9} {:>8}",
        "L",
        "C",
        "H",
        "paper s",
        "ours s",
        "diff %",
        "fixed s",
        "spur.",
        "adapt s",
        "spur.",
        "1st s/sp",
        "datagr.",
        "frames/H",
        "Eq2 ours",
        "radio mJ"
    );
    for r in &s.real {
        let f = &r.handshake.fixed;
        let a = &r.handshake.adaptive;
        let m = r.handshake.main();
        println!(
            "{:>5} {:>2} {:>2} | {:>8.3} {:>8.3} {:>+7.1} | {:>8.3} {:>6.2} {:>8.3} {:>6.2} {:>11} | {:>7.1} {:>8.1} {:>9.2} {:>8.2}",
            r.l,
            r.c,
            r.h,
            r.paper_s,
            m.duration_s,
            r.diff_percent,
            f.duration_s,
            f.spurious_retransmissions,
            a.duration_s,
            a.spurious_retransmissions,
            r.handshake.first_contact_cell(),
            m.datagrams,
            m.data_frames / r.h as f64,
            r.formula_with_our_frames_s,
            m.radio_mj,
        );
    }
    let incomplete: u64 = s.real.iter().map(|r| r.handshake.fixed.seeds - r.handshake.fixed.completed).sum();
    println!("handshakes that failed (an end gave up) or did not complete within an hour: {incomplete}");
    for r in r_with_why(&s.real) {
        println!("  L={} C={} H={}: {}", r.l, r.c, r.h, r.why);
    }
    println!();
    println!(
        "The same schedules in DTLS 1.3 (PSK, psk_ke, TLS_AES_128_CCM_8_SHA256), beside the 1.2 rows above:"
    );
    handshake::print13_header("    L  C  H");
    for r in &s.real {
        handshake::print13_row(&format!("{:>5} {:>2} {:>2}", r.l, r.c, r.h), &r.handshake13, &r.handshake);
    }
    println!();
}

fn r_with_why(rows: &[RealRow]) -> impl Iterator<Item = &RealRow> {
    rows.iter().filter(|r| !r.why.is_empty())
}
