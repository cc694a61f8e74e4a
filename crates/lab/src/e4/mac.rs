//! What the paper did not do: the same handshakes over one TSCH hop (seed 002's L = 101, C = 1),
//! one X-MAC hop (check interval 500 ms) and one beacon-enabled 802.15.4 hop (BO 6, SO 2: a
//! 61 ms CAP every 983 ms, as in E2's variants), through the shared handshake-over-MAC path of
//! [`crate::mac_handshake`]: frames, seconds and the client's radio energy, and what caching
//! saves of them. Both ends use a 600 s first timeout, so no timer fires on these lossless hops
//! (an RSA flight takes a minute to cross TSCH one cell per slotframe) and the figures are the
//! handshake's own; datagrams up to the engine's default 1200 bytes, fragmented by 6LoWPAN.
//! DTLS 1.3 rows follow the 1.2 ones: vanilla, the best compression of these chains (Zstandard),
//! BiTHaC, ticket resumption, and vanilla and BiTHaC with the X25519MLKEM768 hybrid
//! ([`super::dtls13`]).

use super::chains::{chain_set, Chains};
use super::dtls13::{configure13, Variant13};
use super::exchange::{prepare, seed_bytes, Config};
use crate::mac_handshake::{self, MacHandshake};
use fastshake_dtls::{CompressionAlgorithm, Connection, Instant, NamedGroup, DEFAULT_MTU};
use fastshake_sim::mac::MacConfig;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// The configurations run over the MACs.
pub const CONFIGS: [Config; 5] =
    [Config::Vanilla, Config::Rfc7924, Config::Bithac, Config::Ticket, Config::BithacResumption];

/// The DTLS 1.3 handshakes run over the MACs, after the 1.2 ones.
pub const VARIANTS13: [(Variant13, NamedGroup); 6] = [
    (Variant13::Vanilla, NamedGroup::X25519),
    (Variant13::Compressed(CompressionAlgorithm::Zstd), NamedGroup::X25519),
    (Variant13::Bithac, NamedGroup::X25519),
    (Variant13::Ticket, NamedGroup::X25519),
    (Variant13::Vanilla, NamedGroup::X25519MlKem768),
    (Variant13::Bithac, NamedGroup::X25519MlKem768),
];

/// What one MAC row runs: a 1.2 configuration, or a 1.3 variant with its group.
#[derive(Clone, Copy, Debug)]
enum Handshake {
    Dtls12(Config),
    Dtls13(Variant13, NamedGroup),
}

impl Handshake {
    /// The 1.2 configuration the row starts from (a 1.3 row's: vanilla, or the ticket's).
    fn config(self) -> Config {
        match self {
            Handshake::Dtls12(config) => config,
            Handshake::Dtls13(variant, _) => variant.config(),
        }
    }

    fn version(self) -> &'static str {
        match self {
            Handshake::Dtls12(_) => "1.2",
            Handshake::Dtls13(..) => "1.3",
        }
    }

    fn name(self) -> String {
        match self {
            Handshake::Dtls12(config) => config.name().to_string(),
            Handshake::Dtls13(variant, group) => format!("1.3 {} {}", variant.name(), group.name()),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct MacRow {
    pub mac: &'static str,
    pub chains: Chains,
    /// The DTLS version, "1.2" or "1.3".
    pub version: &'static str,
    /// The 1.2 configuration, or the 1.3 row's base (vanilla or ticket).
    pub config: Config,
    /// What ran, as the tables name it.
    pub handshake: String,
    pub seeds: u64,
    pub completed: u64,
    /// Means over the completed seeds.
    pub duration_s: f64,
    pub data_frames: f64,
    pub dtls_bytes: f64,
    pub client_energy_mj: f64,
    /// Flights resent by either side, summed over seeds (0 expected: no loss, patient timer).
    pub retransmissions: u64,
    /// Saved of the vanilla row's seconds and client energy (the 1.3 x25519 vanilla row's for a
    /// 1.3 row), percent.
    pub saved_s_pct: f64,
    pub saved_mj_pct: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MacSection {
    pub initial_retransmit_s: f64,
    pub rows: Vec<MacRow>,
}

fn macs() -> [(&'static str, MacConfig); 3] {
    [
        ("TSCH L=101 C=1", crate::e3::tsch::tsch()),
        ("X-MAC CI 500 ms", crate::e2::xmac::config(500.0, 1.0, true)),
        ("beacon BO 6 SO 2", crate::e2::beacon::config(6, 2)),
    ]
}

const PATIENT: Duration = Duration::from_secs(600);

fn one(mac: &MacConfig, chains: Chains, handshake: Handshake, seed: u64) -> anyhow::Result<MacHandshake> {
    let set = chain_set(chains)?;
    let prepared = prepare(&set, chains, handshake.config(), DEFAULT_MTU, seed, |c, s| {
        c.initial_retransmit = PATIENT;
        s.initial_retransmit = PATIENT;
        if let Handshake::Dtls13(variant, group) = handshake {
            configure13(c, s, variant, group);
        }
    })?;
    let mut server = prepared.server;
    let start = Instant::from_millis(10_000);
    let mut client = Connection::client_with_cache(
        Arc::new(prepared.client_config),
        start,
        mac_handshake::server_addr(),
        seed_bytes(seed, 3),
        prepared.session,
        prepared.cached,
    );
    mac_handshake::run(mac, 1, seed, start, &mut client, &mut server)
}

/// Every chain and configuration over both MACs, means over `seeds` seeds.
pub fn run(chains: &[Chains], seeds: u64) -> anyhow::Result<MacSection> {
    let mut rows = Vec::new();
    for (mac_name, mac) in macs() {
        for &c in chains {
            let handshakes = CONFIGS
                .iter()
                .map(|&config| Handshake::Dtls12(config))
                .chain(VARIANTS13.iter().map(|&(variant, group)| Handshake::Dtls13(variant, group)));
            let mut vanilla: [Option<(f64, f64)>; 2] = [None, None];
            for handshake in handshakes {
                let version = handshake.version();
                let mut row = MacRow {
                    mac: mac_name,
                    chains: c,
                    version,
                    config: handshake.config(),
                    handshake: handshake.name(),
                    seeds,
                    completed: 0,
                    duration_s: 0.0,
                    data_frames: 0.0,
                    dtls_bytes: 0.0,
                    client_energy_mj: 0.0,
                    retransmissions: 0,
                    saved_s_pct: 0.0,
                    saved_mj_pct: 0.0,
                };
                for seed in 0..seeds {
                    let h = one(&mac, c, handshake, seed)?;
                    if h.completed {
                        row.completed += 1;
                        row.duration_s += h.duration_s;
                        row.data_frames += h.data_frames as f64;
                        row.dtls_bytes += h.dtls_bytes as f64;
                        row.client_energy_mj += h.client_energy_mj;
                        row.retransmissions += u64::from(h.client_retransmissions + h.server_retransmissions);
                    }
                }
                let n = row.completed.max(1) as f64;
                row.duration_s /= n;
                row.data_frames /= n;
                row.dtls_bytes /= n;
                row.client_energy_mj /= n;
                let base = &mut vanilla[usize::from(version == "1.3")];
                let (s, mj) = *base.get_or_insert((row.duration_s, row.client_energy_mj));
                row.saved_s_pct = 100.0 * (1.0 - row.duration_s / s);
                row.saved_mj_pct = 100.0 * (1.0 - row.client_energy_mj / mj);
                rows.push(row);
            }
        }
    }
    Ok(MacSection { initial_retransmit_s: PATIENT.as_secs_f64(), rows })
}

pub fn print(s: &MacSection) {
    println!();
    println!(
        "Not in the paper: the handshake alone over one simulated hop (6LoWPAN, 127-byte frames), first timeout {} s",
        s.initial_retransmit_s
    );
    println!("(none fires on these lossless hops); means over seeds; 'saved' of the vanilla row's seconds / client energy");
    println!("(a 1.3 row's: of the 1.3 x25519 vanilla row's):");
    println!(
        "  {:<16} {:<40} {:<36} {:>5} {:>9} {:>8} {:>8} {:>9} {:>13} {:>7}",
        "MAC",
        "chains",
        "configuration",
        "done",
        "seconds",
        "frames",
        "DTLS B",
        "client mJ",
        "saved s/mJ",
        "resent"
    );
    for r in &s.rows {
        println!(
            "  {:<16} {:<40} {:<36} {:>2}/{:<2} {:>9.2} {:>8.1} {:>8.0} {:>9.2} {:>5.0}%/{:>4.0}% {:>7}",
            r.mac,
            r.chains.name(),
            r.handshake,
            r.completed,
            r.seeds,
            r.duration_s,
            r.data_frames,
            r.dtls_bytes,
            r.client_energy_mj,
            r.saved_s_pct,
            r.saved_mj_pct,
            r.retransmissions
        );
    }
}
