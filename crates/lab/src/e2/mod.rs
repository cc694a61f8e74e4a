//! E2: the whole of seed 002's Section III (M. Vučinić et al., "DTLS Performance in Duty-Cycled
//! Networks", PIMRC 2015) with our real DTLS 1.2 handshake bytes, each figure beside the
//! paper's, and the same questions asked of DTLS 1.3.
//!
//! - [`xmac`]: preamble sampling (III-A, Fig. 2), CI 125 ms-4 s, PDR 100 %/90 %, 1-4 hops, the
//!   1.2 PSK handshake and the 1.3 one;
//! - [`beacon`]: beacon-enabled IEEE 802.15.4 (III-B, Fig. 3), a BI x CAP grid, 1-4 hops;
//! - [`tsch`]: TSCH (III-C), Eq. (1)/(2) and Tables I/II, the beacon equivalents, our handshake;
//! - [`overhead`]: the AES-CCM-8 record overhead, from our records;
//! - [`variants`]: ECDHE-ECDSA, resumption, CID and a cached cookie on the same links, and in
//!   DTLS 1.3 PSK alone and with x25519, the X25519MLKEM768 hybrid on 127-byte frames,
//!   ECDHE-ECDSA, resumption and 0-RTT;
//! - [`timer_targets`]: the adaptive timer's two targets, checked over all of the above.
//!
//! Every real-handshake figure is measured with two retransmission timers ([`handshake::Timer`]):
//! tinyDTLS's fixed 2 s (the paper's) and the adaptive one, with the count of spurious
//! retransmissions. The paper's statements are checked one by one
//! ([`claims`]); where ours differ by more than 25 %, the output says why.

pub mod beacon;
pub mod claims;
pub mod energy;
pub mod handshake;
pub mod overhead;
pub(crate) mod plot;
pub mod timer_targets;
pub mod tsch;
pub mod variants;
pub mod xmac;

use crate::pki::LabPki;
use crate::report::results::{print_figures, Figure};
use serde::Serialize;
use std::path::PathBuf;

/// What `fastshake lab e2` runs and how it prints it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Print JSON instead of tables.
    pub json: bool,
    /// Seeds (MAC phases, cell placements, losses, DTLS randoms) per real-handshake configuration;
    /// the 10-frame TSCH tables use ten times as many.
    pub seeds: u64,
    /// Longest chain, in hops (the paper: 4).
    pub max_hops: usize,
    /// Write SVG plots beside the paper's figures into this directory.
    pub plot: Option<PathBuf>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { json: false, seeds: 100, max_hops: 4, plot: None }
    }
}

/// What to run: the library entry's knobs.
#[derive(Clone, Debug)]
pub struct Options {
    pub seeds: u64,
    /// The first seed: each real-handshake configuration runs `first_seed..first_seed + seeds`
    /// (the 10-frame TSCH tables ten times as many from the same start).
    pub first_seed: u64,
    pub max_hops: usize,
    /// Leave out the slowest rows (our handshake on L = 1001).
    pub quick: bool,
}

impl Options {
    /// The hop counts of `all` (ascending) up to `max_hops`.
    pub fn hops<'a>(&self, all: &'a [usize]) -> &'a [usize] {
        let n = all.iter().take_while(|&&h| h <= self.max_hops).count();
        &all[..n]
    }

    /// The seeds of one real-handshake configuration.
    pub fn seed_range(&self) -> std::ops::Range<u64> {
        self.first_seed..self.first_seed.saturating_add(self.seeds)
    }

    /// `count` seeds from the first (the TSCH tables and sweeps run more than the handshakes).
    pub fn seeds_from_first(&self, count: u64) -> std::ops::Range<u64> {
        self.first_seed..self.first_seed.saturating_add(count)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub paper: &'static str,
    /// The timer of the headline figures.
    pub timer: String,
    pub xmac: xmac::Section,
    pub beacon: beacon::Section,
    pub tsch: tsch::Section,
    pub overhead: overhead::Section,
    pub variants: variants::Section,
    pub timer_targets: timer_targets::Section,
}

/// Runs the whole experiment.
pub fn experiment(options: &Options) -> anyhow::Result<Report> {
    anyhow::ensure!(options.seeds > 0, "at least one seed");
    anyhow::ensure!(options.max_hops > 0, "at least one hop");
    let pki = LabPki::kept()?;
    let (xmac, beacon, tsch) =
        (xmac::run(options, &pki)?, beacon::run(options, &pki)?, tsch::run(options, &pki)?);
    let variants = variants::run(options, &pki)?;
    Ok(Report {
        paper:
            "seed 002: M. Vucinic et al., DTLS Performance in Duty-Cycled Networks, PIMRC 2015, Section III",
        timer: handshake::adaptive_timer_name(),
        timer_targets: timer_targets::check(&xmac, &beacon, &tsch, &variants),
        xmac,
        beacon,
        tsch,
        overhead: overhead::run(&pki)?,
        variants,
    })
}

/// The headline figures beside the paper's (the claims and tables hold the rest).
pub fn figures(r: &Report) -> Vec<Figure> {
    let mut figures = Vec::new();
    let one_hop_500 =
        r.xmac.rows.iter().find(|row| row.check_interval_ms == 500.0 && row.pdr == 1.0 && row.hops == 1);
    if let Some(row) = one_hop_500 {
        figures.push(
            Figure::simulated("X-MAC client energy, CI 500 ms, PDR 100 %, 1 hop, fixed 2 s timer", "mJ", row.energy_fixed.total_mj())
                .against(xmac::PAPER_MJ_AT_500, "seed 002 §III-A")
                .within(claims::TOLERANCE)
                .note(format!(
                    "radio from the simulated CC2520 plus an MCU share (energy.rs); our handshake {:.0} B in {:.1} datagrams, {:.2} s",
                    row.handshake.fixed.dtls_bytes, row.handshake.fixed.datagrams, row.handshake.fixed.duration_s
                )),
        );
    }
    if let Some(row) =
        r.tsch.rows.iter().find(|row| row.paper_is_table && row.l == 101 && row.c == 1 && row.h == 1)
    {
        figures.push(
            Figure::simulated("TSCH, 10 frames as the paper assumed, L = 101, C = 1, 1 hop", "s", row.simulated.mean_latency_s)
                .against(row.paper_s, "seed 002 Table I")
                .within(claims::TOLERANCE)
                .note("the simulator's TSCH model against Eq. (1): the model is checked before our handshake is put on it"),
        );
    }
    if let Some(row) = r.tsch.real.iter().find(|row| row.l == 101 && row.c == 1 && row.h == 1) {
        let m = row.handshake.main();
        figures.push(
            Figure::simulated(
                format!(
                    "TSCH, our PSK handshake, L = 101, C = 1, 1 hop ({})",
                    row.handshake.main_timer().name()
                ),
                "s",
                m.duration_s,
            )
            .against(row.paper_s, "seed 002 Table I")
            .within(claims::TOLERANCE)
            .note(if row.why.is_empty() {
                format!("{:.1} frames on the air against the paper's 10", m.data_frames)
            } else {
                row.why.clone()
            }),
        );
    }
    if let Some(row) = r.overhead.rows.iter().find(|row| row.cid == 0) {
        figures.push(
            Figure::simulated("AES-CCM-8 record overhead per datagram", "B", row.overhead as f64)
                .against(overhead::PAPER_BYTES as f64, "seed 002 §III-A")
                .within(0.0)
                .note(format!(
                    "{} B header, {} B explicit nonce, {} B tag, taken apart from our records",
                    row.header, row.explicit_nonce, row.tag
                )),
        );
    }
    figures
}

/// `fastshake lab e2`: runs the experiment and prints the tables (or JSON), plots if asked.
pub fn run(args: RunOptions) -> anyhow::Result<()> {
    let options = Options { seeds: args.seeds, first_seed: 0, max_hops: args.max_hops, quick: false };
    let report = experiment(&options)?;
    if let Some(dir) = &args.plot {
        plot::all(&report, dir)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("E2: {}", report.paper);
    println!(
        "Our DTLS 1.2 handshake (TLS_PSK_WITH_AES_128_CCM_8 unless said otherwise) through the simulator's MAC models,"
    );
    println!(
        "every datagram in UDP/IPv6 behind 6LoWPAN IPHC + UDP NHC ({} bytes over one hop, {} beyond), in 127-byte frames (RFC 4944).",
        crate::mac_handshake::lowpan_header_len(1),
        crate::mac_handshake::lowpan_header_len(2)
    );
    println!();
    xmac::print(&report.xmac);
    beacon::print(&report.beacon);
    tsch::print(&report.tsch);
    overhead::print(&report.overhead);
    variants::print(&report.variants);
    timer_targets::print(&report.timer_targets);
    print_figures("E2 against seed 002", &figures(&report));
    if let Some(dir) = &args.plot {
        println!("plots written to {}", dir.display());
    }
    Ok(())
}
