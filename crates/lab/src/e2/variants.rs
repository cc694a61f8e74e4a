//! Variants seed 002 did not run, on its links: ECDHE-ECDSA beside PSK, resumption by ticket,
//! a Connection ID, a cached cookie, and ECDHE-ECDSA with RFC 7924 cached information and
//! client-certificate caching (seed 003's BiTHaC); and the same questions in DTLS 1.3: PSK
//! alone and with (EC)DHE, the post-quantum hybrid key share on 127-byte frames, ECDHE-ECDSA,
//! resumption and 0-RTT.

use super::energy::ClientEnergy;
use super::handshake::{self, BothTimers, Variant};
use super::{beacon, tsch, xmac, Options};
use crate::pki::LabPki;
use fastshake_sim::mac::MacConfig;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub link: String,
    pub hops: usize,
    pub variant: &'static str,
    pub handshake: BothTimers,
    /// The headline timer's client energy (radio + MCU as in [`super::energy`]).
    pub energy: ClientEnergy,
    /// Duration against PSK on the same link and timer, percent.
    pub duration_vs_psk_percent: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Section {
    pub seeds: u64,
    pub rows: Vec<Row>,
}

pub fn links() -> Vec<(String, MacConfig, usize)> {
    vec![
        ("X-MAC CI 500 ms".to_string(), xmac::config(500.0, 1.0, true), 1),
        ("X-MAC CI 500 ms".to_string(), xmac::config(500.0, 1.0, true), 3),
        ("beacon BO 6 SO 2".to_string(), beacon::config(6, 2), 1),
        ("TSCH L 101 C 1".to_string(), tsch::config(101, 1, 1.0), 1),
        ("TSCH L 101 C 1".to_string(), tsch::config(101, 1, 1.0), 3),
    ]
}

pub fn run(options: &Options, pki: &LabPki) -> anyhow::Result<Section> {
    let mut rows = Vec::new();
    for (link, mac, hops) in links() {
        if options.hops(&[hops]).is_empty() {
            continue;
        }
        let mut psk_duration = None;
        for variant in Variant::ALL {
            // BiTHaC beside ECDHE-ECDSA on one hop of X-MAC and of TSCH.
            if variant == Variant::Bithac && (hops != 1 || link.starts_with("beacon")) {
                continue;
            }
            let hs = handshake::both_timers(&mac, hops, variant, options.seed_range(), pki)?;
            let m = hs.main();
            let base = *psk_duration.get_or_insert(m.duration_s);
            rows.push(Row {
                link: link.clone(),
                hops,
                variant: variant.name(),
                energy: ClientEnergy::new(m.radio_mj, m.radio_on_s, m.duration_s),
                duration_vs_psk_percent: (m.duration_s / base - 1.0) * 100.0,
                handshake: hs,
            });
        }
    }
    Ok(Section { seeds: options.seeds, rows })
}

pub fn print(s: &Section) {
    let timer = s.rows.first().map_or("-".to_string(), |r| r.handshake.main_timer().name());
    println!(
        "== Variants the paper did not run, on its links (PDR 100 %), mean over {} seeds, {timer}",
        s.seeds
    );
    println!(
        "ECDHE-ECDSA: both sides send a 3-certificate P-256 chain (leaf + 2 intermediates). Resumption: abbreviated\n\
         handshake with the ticket of an earlier one. CID: the server issues a 4-byte Connection ID. Cached cookie:\n\
         the client sends the cookie of an earlier exchange in its first ClientHello (no HelloVerifyRequest).\n\
         BiTHaC: ECDHE-ECDSA full handshake after an earlier one the client cached: RFC 7924 fingerprints stand for\n\
         the server's Certificate and CertificateRequest, a client-certificate ticket (seed 003) for the client's chain.\n\
         1.3 rows: DTLS 1.3 (RFC 9147) with TLS_AES_128_CCM_8_SHA256, the stateless HelloRetryRequest and its cookie in\n\
         every full handshake, the server's ACK of the client's Finished, and a NewSessionTicket where the server issues\n\
         tickets (both counted); ECDHE-ECDSA with the same chains and x25519. A resumed 1.3 handshake sends no\n\
         certificate; with 0-RTT it also skips the cookie exchange (RFC 9147 §5.1: a ticket issued to the client's address)."
    );
    println!(
        "{:<17} {:>2} {:<40} | {:>8} {:>7} {:>6} {:>7} {:>7} {:>7} | {:>8} {:>7} {:>6} {:>8}",
        "link",
        "H",
        "variant",
        "s",
        "vs PSK",
        "spur.",
        "datagr",
        "DTLS B",
        "frames",
        "radio mJ",
        "MCU mJ",
        "done",
        "fixed s"
    );
    for r in &s.rows {
        let m = r.handshake.main();
        println!(
            "{:<17} {:>2} {:<40} | {:>8.3} {:>+6.0}% {:>6.2} {:>7.1} {:>7.0} {:>7.1} | {:>8.2} {:>7.2} {:>3}/{:<3} {:>8.3}",
            r.link,
            r.hops,
            r.variant,
            m.duration_s,
            r.duration_vs_psk_percent,
            m.spurious_retransmissions,
            m.datagrams,
            m.dtls_bytes,
            m.data_frames,
            r.energy.radio_mj,
            r.energy.mcu_mj,
            m.completed,
            m.seeds,
            r.handshake.fixed.duration_s,
        );
    }
    for r in
        s.rows.iter().filter(|r| r.handshake.main().early_data_accepted > 0 || r.variant.contains("0-RTT"))
    {
        let m = r.handshake.main();
        let at = m.first_data_at_server_s.map_or("-".to_string(), |s| format!("{s:.3} s"));
        println!(
            "  0-RTT, {} {} hops: the server took the early data in {}/{} handshakes; it had the data {at} after the start, \
             the handshake took {:.3} s",
            r.link, r.hops, m.early_data_accepted, m.completed, m.duration_s
        );
    }
    println!();
}
