//! Seed 002 Section III-A, "Packet overhead": AES-CCM-8 adds 29 bytes to each datagram (13 of
//! record header, an 8-byte explicit nonce and an 8-byte tag), 22.8 % of a 127-byte frame.
//! Measured here from the application records our engine emits after a real handshake, each
//! record taken apart field by field.

use super::handshake::{self, Timer, Variant};
use crate::mac_handshake;
use crate::pki::LabPki;
use fastshake_dtls::{Connection, Endpoint, Instant};
use fastshake_sim::mac::frag::{DATA_MAC_HEADER, FCS_LEN};
use fastshake_sim::mac::phy::MAX_PSDU;
use serde::Serialize;
use std::sync::Arc;

/// Seed 002: bytes per datagram and their share of a 127-byte frame.
pub const PAPER_BYTES: usize = 29;
pub const PAPER_SHARE: f64 = 0.228;

/// Application payload sizes sealed.
const PAYLOADS: [usize; 3] = [1, 16, 64];

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub variant: &'static str,
    pub suite: String,
    pub payload: usize,
    pub datagram: usize,
    /// Type, version, epoch and sequence number, length (and the CID, when there is one).
    pub header: usize,
    pub cid: usize,
    /// The explicit nonce (RFC 6655: the record's epoch and sequence number, sent again).
    pub explicit_nonce: usize,
    /// The `tls12_cid` inner content type byte (RFC 9146), 0 without a CID.
    pub inner_type: usize,
    pub tag: usize,
    pub overhead: usize,
    /// `overhead` over a 127-byte frame.
    pub share_of_frame: f64,
    /// The explicit nonce equals the header's epoch and sequence number.
    pub nonce_is_sequence: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Section {
    pub rows: Vec<Row>,
    /// Application bytes one 127-byte frame can carry behind the MAC header, FCS, the 6LoWPAN
    /// compressed IPv6/UDP header (one hop), and the CCM-8 record.
    pub app_bytes_per_frame: usize,
    pub ip_udp_header: usize,
}

/// Takes one protected record apart (RFC 6347 §4.1; RFC 9146 §4 with `cid_len`).
fn dissect(variant: Variant, suite: String, payload: usize, d: &[u8], cid_len: usize) -> anyhow::Result<Row> {
    let header = 13 + cid_len;
    anyhow::ensure!(d.len() >= header + 16, "record of {} bytes too short", d.len());
    let length = usize::from(u16::from_be_bytes([d[header - 2], d[header - 1]]));
    anyhow::ensure!(length == d.len() - header, "one record per datagram: length {length} of {}", d.len());
    let explicit_nonce = 8;
    let nonce_is_sequence = d[header..header + 8] == d[3..11];
    let inner_type = usize::from(cid_len > 0);
    let tag = length - explicit_nonce - payload - inner_type;
    let overhead = d.len() - payload;
    Ok(Row {
        variant: variant.name(),
        suite,
        payload,
        datagram: d.len(),
        header: 13,
        cid: cid_len,
        explicit_nonce,
        inner_type,
        tag,
        overhead,
        share_of_frame: overhead as f64 / MAX_PSDU as f64,
        nonce_is_sequence,
    })
}

pub fn run(pki: &LabPki) -> anyhow::Result<Section> {
    let mut rows = Vec::new();
    // A fast schedule: only the records matter here.
    let mac = super::tsch::config(11, 3, 1.0);
    for variant in [Variant::Psk, Variant::EcdheEcdsa, Variant::Cid] {
        let (client_config, server_config) = handshake::configs(variant, Timer::Fixed2s, pki);
        let start = Instant::from_millis(1);
        let mut client =
            Connection::client(Arc::new(client_config), start, mac_handshake::server_addr(), [7; 32]);
        let mut server = Endpoint::new(Arc::new(server_config), [8; 32])?;
        let run = mac_handshake::run(&mac, 1, 1, start, &mut client, &mut server)?;
        anyhow::ensure!(run.completed, "{} handshake did not complete", variant.name());
        let suite = client.suite().map_or("?".to_string(), |s| format!("{s:?}"));
        let now = run.end.unwrap_or(start);
        // The client's own CID is empty (it offers length 0); records to the server carry the
        // server's, which is the peer CID.
        let peer_cid = if variant == Variant::Cid { 4 } else { 0 };
        for payload in PAYLOADS {
            client.send(&vec![0xab; payload])?;
            let datagram = client.poll_transmit(now).ok_or_else(|| anyhow::anyhow!("no record sent"))?;
            rows.push(dissect(variant, suite.clone(), payload, &datagram.payload, peer_cid)?);
        }
    }
    let ip_udp_header = mac_handshake::lowpan_header_len(1);
    let app_bytes_per_frame =
        (MAX_PSDU - DATA_MAC_HEADER - FCS_LEN - ip_udp_header).saturating_sub(PAPER_BYTES);
    Ok(Section { rows, app_bytes_per_frame, ip_udp_header })
}

pub fn print(s: &Section) {
    println!("== Record overhead of AES-CCM-8 (seed 002 Section III-A: {PAPER_BYTES} B per datagram, {:.1} % of a 127-byte frame)", PAPER_SHARE * 100.0);
    println!("measured on the application records our engine emits after a real handshake:");
    println!(
        "{:<12} {:<28} {:>7} {:>8} {:>6} {:>4} {:>6} {:>5} {:>4} {:>9} {:>8} {:>9}",
        "variant",
        "suite",
        "payload",
        "datagram",
        "header",
        "CID",
        "nonce",
        "inner",
        "tag",
        "overhead",
        "% frame",
        "nonce=seq"
    );
    for r in &s.rows {
        println!(
            "{:<12} {:<28} {:>7} {:>8} {:>6} {:>4} {:>6} {:>5} {:>4} {:>9} {:>8.1} {:>9}",
            r.variant,
            r.suite,
            r.payload,
            r.datagram,
            r.header,
            r.cid,
            r.explicit_nonce,
            r.inner_type,
            r.tag,
            r.overhead,
            r.share_of_frame * 100.0,
            r.nonce_is_sequence
        );
    }
    println!(
        "A 127-byte frame keeps {} application bytes behind MAC header ({DATA_MAC_HEADER}) + FCS ({FCS_LEN}) + 6LoWPAN IPHC/UDP NHC, one hop ({}) + record ({PAPER_BYTES}).",
        s.app_bytes_per_frame, s.ip_udp_header
    );
    println!();
}
