//! The adaptive retransmission timer against its two targets, checked over the rows measured:
//! on a clean link (PDR 100 %) no spurious resend on any MAC, and on a lossy one (X-MAC at
//! PDR 90 %) no slower than tinyDTLS's fixed 2 s. A row counts as slower only when its mean
//! exceeds the fixed timer's by more than the 95 % margin of the difference; rows slower within
//! it are listed, so a reader sees where the two timers are level.

use super::energy::ClientEnergy;
use super::handshake::{BothTimers, Mean};
use super::{beacon, tsch, variants, xmac};
use serde::Serialize;

/// How a target fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Outcome {
    Met,
    /// Some rows miss it by less than their 95 % margin (the lossy target only).
    MetWithinNoise,
    NotMet,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Met => "met",
            Outcome::MetWithinNoise => "met within noise",
            Outcome::NotMet => "not met",
        }
    }
}

/// One group of clean-link rows (a MAC's grid, or the variants).
#[derive(Clone, Debug, Serialize)]
pub struct CleanLinks {
    pub group: &'static str,
    pub rows: usize,
    /// Rows where the adaptive timer resent spuriously: the row and its spurious resends per
    /// handshake.
    pub spurious: Vec<(String, f64)>,
    /// The fixed timer's spurious resends per handshake, summed over the same rows.
    pub fixed_spurious_sum: f64,
    pub outcome: Outcome,
}

/// A lossy row whose adaptive mean is above the fixed timer's.
#[derive(Clone, Debug, Serialize)]
pub struct SlowerRow {
    pub row: String,
    pub adaptive_s: f64,
    pub fixed_s: f64,
    /// The 95 % margin of the difference of the two means.
    pub margin_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LossyLinks {
    pub rows: usize,
    pub faster: usize,
    /// Slower by less than the margin.
    pub slower_within_noise: Vec<SlowerRow>,
    /// Slower by more.
    pub slower: Vec<SlowerRow>,
    /// Sums over the rows of the mean duration and of the client's energy (radio and MCU).
    pub adaptive_s: f64,
    pub fixed_s: f64,
    pub adaptive_mj: f64,
    pub fixed_mj: f64,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, Serialize)]
pub struct Section {
    pub seeds: u64,
    pub clean: Vec<CleanLinks>,
    pub lossy: LossyLinks,
}

/// Whether the adaptive mean `a` is above the fixed `f`, and by more than the 95 % margin of
/// the difference (the half-widths combined as for independent means).
fn compare(row: String, a: &Mean, f: &Mean) -> Option<(SlowerRow, bool)> {
    let margin_s = a.duration_ci95_s.hypot(f.duration_ci95_s);
    let beyond = a.duration_s > f.duration_s + margin_s;
    (a.duration_s > f.duration_s)
        .then_some((SlowerRow { row, adaptive_s: a.duration_s, fixed_s: f.duration_s, margin_s }, beyond))
}

fn clean_links<'a>(group: &'static str, rows: impl Iterator<Item = (String, &'a BothTimers)>) -> CleanLinks {
    let (mut count, mut spurious, mut fixed_spurious_sum) = (0, Vec::new(), 0.0);
    for (row, both) in rows {
        let a = &both.adaptive;
        count += 1;
        fixed_spurious_sum += both.fixed.spurious_retransmissions;
        if a.spurious_retransmissions > 0.0 {
            spurious.push((row, a.spurious_retransmissions));
        }
    }
    let outcome = if spurious.is_empty() { Outcome::Met } else { Outcome::NotMet };
    CleanLinks { group, rows: count, spurious, fixed_spurious_sum, outcome }
}

/// Checks both targets over the rows of the sections.
pub fn check(
    xmac: &xmac::Section,
    beacon: &beacon::Section,
    tsch: &tsch::Section,
    variants: &variants::Section,
) -> Section {
    let xmac_clean = xmac.rows.iter().filter(|row| row.pdr == 1.0);
    let clean = vec![
        clean_links(
            "X-MAC",
            xmac_clean
                .clone()
                .map(|row| (format!("CI {} ms H {}", row.check_interval_ms, row.hops), &row.handshake)),
        ),
        clean_links(
            "X-MAC 1.3",
            xmac_clean
                .map(|row| (format!("1.3 CI {} ms H {}", row.check_interval_ms, row.hops), &row.handshake13)),
        ),
        clean_links(
            "beacon",
            beacon.rows.iter().map(|row| {
                (
                    format!("BO {} SO {} H {}", row.beacon_order, row.superframe_order, row.hops),
                    &row.handshake,
                )
            }),
        ),
        clean_links(
            "beacon 1.3",
            beacon.rows.iter().map(|row| {
                (
                    format!("1.3 BO {} SO {} H {}", row.beacon_order, row.superframe_order, row.hops),
                    &row.handshake13,
                )
            }),
        ),
        clean_links(
            "TSCH",
            tsch.real.iter().map(|row| (format!("L {} C {} H {}", row.l, row.c, row.h), &row.handshake)),
        ),
        clean_links(
            "TSCH 1.3",
            tsch.real
                .iter()
                .map(|row| (format!("1.3 L {} C {} H {}", row.l, row.c, row.h), &row.handshake13)),
        ),
        clean_links(
            "variants",
            variants
                .rows
                .iter()
                .map(|row| (format!("{} H {} {}", row.link, row.hops, row.variant), &row.handshake)),
        ),
    ];
    let mut lossy = LossyLinks {
        rows: 0,
        faster: 0,
        slower_within_noise: Vec::new(),
        slower: Vec::new(),
        adaptive_s: 0.0,
        fixed_s: 0.0,
        adaptive_mj: 0.0,
        fixed_mj: 0.0,
        outcome: Outcome::Met,
    };
    let lossy_rows = xmac.rows.iter().filter(|row| row.pdr < 1.0).flat_map(|row| {
        let name = format!("CI {} ms H {}", row.check_interval_ms, row.hops);
        [(name.clone(), &row.handshake), (format!("1.3 {name}"), &row.handshake13)]
    });
    for (name, both) in lossy_rows {
        let (a, f) = (&both.adaptive, &both.fixed);
        lossy.rows += 1;
        lossy.adaptive_s += a.duration_s;
        lossy.fixed_s += f.duration_s;
        let energy =
            |m: &super::handshake::Mean| ClientEnergy::new(m.radio_mj, m.radio_on_s, m.duration_s).total_mj();
        lossy.adaptive_mj += energy(a);
        lossy.fixed_mj += energy(f);
        match compare(name, a, f) {
            None => lossy.faster += 1,
            Some((slower, true)) => lossy.slower.push(slower),
            Some((slower, false)) => lossy.slower_within_noise.push(slower),
        }
    }
    lossy.outcome = if !lossy.slower.is_empty() || lossy.adaptive_s > lossy.fixed_s {
        Outcome::NotMet
    } else if !lossy.slower_within_noise.is_empty() {
        Outcome::MetWithinNoise
    } else {
        Outcome::Met
    };
    Section { seeds: xmac.seeds, clean, lossy }
}

pub fn print(s: &Section) {
    println!(
        "The adaptive timer against its targets (a returning client against the fixed 2 s, {} seeds per row)",
        s.seeds
    );
    println!("  PDR 100 %: no spurious resend on any MAC");
    for g in &s.clean {
        let found = if g.spurious.is_empty() {
            "none".to_string()
        } else {
            let rows: Vec<String> = g.spurious.iter().map(|(row, n)| format!("{row}: {n:.2}")).collect();
            format!("{} per handshake", rows.join("; "))
        };
        println!(
            "    {:<9} {:>3} rows: {found} (fixed 2 s: {:.2} per handshake, summed over the rows)  -> {}",
            g.group,
            g.rows,
            g.fixed_spurious_sum,
            g.outcome.label().to_uppercase()
        );
    }
    let l = &s.lossy;
    println!("  PDR 90 %, X-MAC (DTLS 1.2 and 1.3 PSK rows): no slower than the fixed 2 s");
    println!(
        "    {} rows: {} faster, {} slower within the 95 % margin of the difference, {} slower beyond it  -> {}",
        l.rows,
        l.faster,
        l.slower_within_noise.len(),
        l.slower.len(),
        l.outcome.label().to_uppercase()
    );
    println!(
        "    sum over the rows: {:.1} s against {:.1} s; client energy {:.0} mJ against {:.0} mJ",
        l.adaptive_s, l.fixed_s, l.adaptive_mj, l.fixed_mj
    );
    for (what, rows) in [("slower within the margin", &l.slower_within_noise), ("slower", &l.slower)] {
        for row in rows.iter() {
            println!(
                "    {what}: {}: {:.2} s against {:.2} s (margin {:.2} s)",
                row.row, row.adaptive_s, row.fixed_s, row.margin_s
            );
        }
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(duration_s: f64, duration_ci95_s: f64) -> Mean {
        Mean { duration_s, duration_ci95_s, ..Mean::default() }
    }

    #[test]
    fn a_row_is_slower_only_beyond_the_margin_of_the_difference() {
        assert!(compare("r".into(), &mean(5.0, 0.3), &mean(6.0, 0.3)).is_none(), "faster");
        // Margin: hypot(0.3, 0.4) = 0.5.
        let (row, beyond) = compare("r".into(), &mean(6.4, 0.3), &mean(6.0, 0.4)).unwrap();
        assert!(!beyond && (row.margin_s - 0.5).abs() < 1e-9);
        let (_, beyond) = compare("r".into(), &mean(6.6, 0.3), &mean(6.0, 0.4)).unwrap();
        assert!(beyond);
    }
}
