//! E2: the whole of seed 002's Section III (M. Vučinić et al., "DTLS Performance in Duty-Cycled
//! Networks", PIMRC 2015) with our real DTLS 1.2 handshake bytes, each figure beside the
//! paper's.
//!
//! - [`xmac`]: preamble sampling (III-A, Fig. 2), CI 125 ms-4 s, PDR 100 %/90 %, 1-4 hops;
//! - [`beacon`]: beacon-enabled IEEE 802.15.4 (III-B, Fig. 3), a BI x CAP grid, 1-4 hops;
//! - [`tsch`]: TSCH (III-C), Eq. (1)/(2) and Tables I/II, the beacon equivalents, our handshake;
//! - [`overhead`]: the AES-CCM-8 record overhead, from our records;
//! - [`variants`]: ECDHE-ECDSA, resumption, CID and a cached cookie on the same links.
//!
//! Every real-handshake figure is measured with two retransmission timers ([`handshake::Timer`]):
//! tinyDTLS's fixed 2 s (the paper's) and an adaptive one (when the engine has it), with the
//! count of spurious retransmissions. The paper's statements are checked one by one
//! ([`claims`]); where ours differ by more than 25 %, the output says why.

pub mod beacon;
pub mod claims;
pub mod energy;
pub mod handshake;
pub mod overhead;
mod plot;
pub mod tsch;
pub mod variants;
pub mod xmac;

use crate::pki::LabPki;
use serde::Serialize;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Seeds (MAC phases, cell placements, losses, DTLS randoms) per real-handshake configuration;
    /// the 10-frame TSCH tables use ten times as many.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// Longest chain, in hops (the paper: 4).
    #[arg(long, default_value_t = 4)]
    max_hops: usize,
    /// Write SVG plots beside the paper's figures into this directory.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// What to run: the library entry's knobs.
#[derive(Clone, Debug)]
pub struct Options {
    pub seeds: u64,
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
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub paper: &'static str,
    /// The timer of the headline figures.
    pub timer: String,
    pub adaptive_timer_available: bool,
    pub xmac: xmac::Section,
    pub beacon: beacon::Section,
    pub tsch: tsch::Section,
    pub overhead: overhead::Section,
    pub variants: variants::Section,
}

/// Runs the whole experiment.
pub fn experiment(options: &Options) -> anyhow::Result<Report> {
    anyhow::ensure!(options.seeds > 0, "at least one seed");
    anyhow::ensure!(options.max_hops > 0, "at least one hop");
    let pki = LabPki::kept()?;
    let available = handshake::Timer::ADAPTIVE.available();
    Ok(Report {
        paper:
            "seed 002: M. Vucinic et al., DTLS Performance in Duty-Cycled Networks, PIMRC 2015, Section III",
        timer: if available { handshake::Timer::ADAPTIVE } else { handshake::Timer::Fixed2s }.name(),
        adaptive_timer_available: available,
        xmac: xmac::run(options, &pki)?,
        beacon: beacon::run(options, &pki)?,
        tsch: tsch::run(options, &pki)?,
        overhead: overhead::run(&pki)?,
        variants: variants::run(options, &pki)?,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = Options { seeds: args.seeds, max_hops: args.max_hops, quick: false };
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
    if !report.adaptive_timer_available {
        println!("This build's DTLS engine has no adaptive retransmission timer yet: every figure uses the fixed 2 s timer.");
    }
    println!();
    xmac::print(&report.xmac);
    beacon::print(&report.beacon);
    tsch::print(&report.tsch);
    overhead::print(&report.overhead);
    variants::print(&report.variants);
    if let Some(dir) = &args.plot {
        println!("plots written to {}", dir.display());
    }
    Ok(())
}
