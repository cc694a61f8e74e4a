//! Bytes of an exchange per layer (DTLS, UDP, IPv4; IEEE 802.15.4 frames over 6LoWPAN), per
//! handshake message, and recounted with TLS 1.2 framing so that they compare with seed 003's
//! TLS figures.
//!
//! TLS framing, as the paper's wolfSSL sends it: every handshake message in a record of its
//! own (5-byte record header, 4-byte handshake header), no HelloVerifyRequest and no cookie (the
//! ClientHello without its cookie field), the same bodies, ciphertexts and alerts. A protected
//! handshake record (Finished) holds one message, so only its handshake header shrinks (12 to
//! 4 bytes inside the ciphertext).

use super::exchange::Datagram;
use fastshake_dtls::wire::{records, RecordView, FRAGMENT_HEADER_LEN, RECORD_HEADER_LEN};
use fastshake_sim::mac::frag::fragment;
use fastshake_sim::mac::sixlowpan::UdpDatagram;
use serde::Serialize;
use std::collections::BTreeMap;

pub const UDP_HEADER: usize = 8;
pub const IPV4_HEADER: usize = 20;
const TLS_RECORD_HEADER: usize = 5;
const TLS_HANDSHAKE_HEADER: usize = 4;
const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const HELLO_VERIFY_REQUEST: u8 = 3;
const CERTIFICATE: u8 = 11;
const CERTIFICATE_REQUEST: u8 = 13;

/// Bytes of one set of datagrams per layer.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Layers {
    pub datagrams: usize,
    /// UDP payloads.
    pub dtls: usize,
    /// UDP headers, and IPv4 headers (the paper's Ethernet testbed; no IP fragmentation, as
    /// every datagram fits the MTU).
    pub udp: usize,
    pub ip: usize,
    /// The same datagrams as IPv6/UDP over one IEEE 802.15.4 hop, 6LoWPAN-compressed and
    /// fragmented by the simulator: frames and their bytes (PSDUs).
    pub frames_802154: usize,
    pub psdu_bytes_802154: usize,
}

impl Layers {
    pub fn of(datagrams: &[Datagram]) -> anyhow::Result<Layers> {
        let mut l = Layers { datagrams: datagrams.len(), ..Layers::default() };
        for (i, d) in datagrams.iter().enumerate() {
            l.dtls += d.payload.len();
            l.udp += UDP_HEADER;
            l.ip += IPV4_HEADER;
            let (from, to) = if d.to_server { (0, 1) } else { (1, 0) };
            let udp = UdpDatagram::between(from, to, 1, 5684, d.payload.clone());
            let (_, stats) = fragment(&udp, from, to, i as u8, i as u16, true)
                .map_err(|e| anyhow::anyhow!("6LoWPAN: {e}"))?;
            l.frames_802154 += stats.frames;
            l.psdu_bytes_802154 += stats.psdu_bytes;
        }
        Ok(l)
    }

    pub fn add(&mut self, o: &Layers) {
        self.datagrams += o.datagrams;
        self.dtls += o.dtls;
        self.udp += o.udp;
        self.ip += o.ip;
        self.frames_802154 += o.frames_802154;
        self.psdu_bytes_802154 += o.psdu_bytes_802154;
    }

    /// DTLS, UDP and IP bytes together.
    pub fn ip_total(&self) -> usize {
        self.dtls + self.udp + self.ip
    }
}

/// A handshake message as a TLS peer would send it: record and handshake header and body.
fn tls_message_len(body: usize) -> usize {
    TLS_RECORD_HEADER + TLS_HANDSHAKE_HEADER + body
}

/// The same datagrams recounted with TLS 1.2 framing, and what the difference is made of.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct TlsRecount {
    pub dtls_bytes: usize,
    pub tls_bytes: usize,
    /// DTLS records (13 B headers) and handshake fragments (12 B headers) counted, and the TLS
    /// records (5 B) and handshake messages (4 B) they become; the cookie exchange excluded.
    pub dtls_records: usize,
    pub dtls_fragments: usize,
    pub tls_records: usize,
    pub tls_messages: usize,
    /// HelloVerifyRequest and cookieless ClientHello records, and the cookie field of the
    /// ClientHello that carried one: bytes TLS never sends.
    pub cookie_exchange: usize,
    /// TLS bytes per flight (consecutive records of one direction), for the TCP estimate.
    pub flights: Vec<usize>,
}

impl TlsRecount {
    /// `dtls_bytes - tls_bytes` from the header and cookie counts alone.
    pub fn explained_difference(&self) -> i64 {
        (self.dtls_records * RECORD_HEADER_LEN
            + self.dtls_fragments * FRAGMENT_HEADER_LEN
            + self.cookie_exchange) as i64
            - (self.tls_records * TLS_RECORD_HEADER + self.tls_messages * TLS_HANDSHAKE_HEADER) as i64
    }
}

/// Sizes of the handshake messages in TLS form (record and handshake header and body), as the
/// paper gives them; 0 where the message was not sent.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Messages {
    pub client_hello: usize,
    pub server_hello: usize,
    pub server_certificate: usize,
    pub client_certificate: usize,
    pub certificate_request: usize,
}

fn parse_all(datagrams: &[Datagram]) -> anyhow::Result<Vec<(bool, Vec<RecordView>, usize)>> {
    datagrams
        .iter()
        .map(|d| {
            let recs = records(&d.payload).map_err(|e| anyhow::anyhow!("an unreadable datagram: {e:?}"))?;
            Ok((d.to_server, recs, d.payload.len()))
        })
        .collect()
}

/// Recounts `datagrams` (a whole exchange, in order) with TLS framing, and the handshake
/// messages' sizes.
pub fn recount(datagrams: &[Datagram]) -> anyhow::Result<(TlsRecount, Messages)> {
    let parsed = parse_all(datagrams)?;
    // The ClientHello TLS would send is the last one (the one with the cookie).
    let last_hello = parsed
        .iter()
        .filter(|(to_server, _, _)| *to_server)
        .flat_map(|(_, recs, _)| recs.iter().flat_map(|r| r.fragments.iter()))
        .filter(|f| f.msg_type == CLIENT_HELLO)
        .map(|f| f.message_seq)
        .max();
    let mut r = TlsRecount::default();
    let mut m = Messages::default();
    // Handshake messages (direction, message_seq): their length, and the fragment bytes seen.
    let mut messages: BTreeMap<(bool, u16), (usize, usize)> = BTreeMap::new();
    let mut flight: Option<(bool, usize)> = None;
    for (to_server, recs, len) in &parsed {
        r.dtls_bytes += len;
        for rec in recs {
            let whole = RECORD_HEADER_LEN + rec.body_len;
            let cookie_part = rec.fragments.iter().any(|f| {
                f.msg_type == HELLO_VERIFY_REQUEST
                    || (f.msg_type == CLIENT_HELLO && Some(f.message_seq) != last_hello)
            });
            if cookie_part {
                anyhow::ensure!(
                    rec.fragments.iter().all(|f| matches!(f.msg_type, HELLO_VERIFY_REQUEST | CLIENT_HELLO)),
                    "a cookie-exchange record carries another message"
                );
                r.cookie_exchange += whole;
                continue;
            }
            r.dtls_records += 1;
            let mut tls = 0;
            if rec.content_type == HANDSHAKE && rec.epoch == 0 {
                for f in &rec.fragments {
                    r.dtls_fragments += 1;
                    messages.entry((*to_server, f.message_seq)).or_insert((f.message_len as usize, 0)).1 +=
                        f.len as usize;
                    if f.offset == 0 {
                        // The whole message, once, in a TLS record of its own.
                        let cookie =
                            if f.msg_type == CLIENT_HELLO { 1 + f.cookie_len.unwrap_or(0) } else { 0 };
                        let size = tls_message_len(f.message_len as usize - cookie);
                        tls += size;
                        r.tls_records += 1;
                        r.tls_messages += 1;
                        r.cookie_exchange += cookie;
                        match (f.msg_type, to_server) {
                            (CLIENT_HELLO, _) => m.client_hello = size,
                            (SERVER_HELLO, _) => m.server_hello = size,
                            (CERTIFICATE, false) => m.server_certificate = size,
                            (CERTIFICATE, true) => m.client_certificate = size,
                            (CERTIFICATE_REQUEST, _) => m.certificate_request = size,
                            _ => {}
                        }
                    }
                }
            } else if rec.content_type == HANDSHAKE {
                // Finished under protection: one message, its header 12 -> 4 bytes.
                r.dtls_fragments += 1;
                r.tls_records += 1;
                r.tls_messages += 1;
                tls += TLS_RECORD_HEADER + rec.body_len - (FRAGMENT_HEADER_LEN - TLS_HANDSHAKE_HEADER);
            } else {
                r.tls_records += 1;
                tls += TLS_RECORD_HEADER + rec.body_len;
            }
            r.tls_bytes += tls;
            match &mut flight {
                Some((dir, bytes)) if *dir == *to_server => *bytes += tls,
                _ => {
                    if let Some((_, bytes)) = flight.take() {
                        r.flights.push(bytes);
                    }
                    flight = Some((*to_server, tls));
                }
            }
        }
    }
    if let Some((_, bytes)) = flight {
        r.flights.push(bytes);
    }
    // Each message sent once, whole: no retransmission or overlap counted twice.
    anyhow::ensure!(
        messages.values().all(|(len, got)| len == got),
        "a handshake message's fragments do not add up to it"
    );
    Ok((r, m))
}

/// A rough TCP/IPv4 estimate of the paper's all-layer totals: every TLS flight in segments of
/// at most `mtu - 52` bytes, each with 20 B IPv4 and 32 B TCP headers (timestamps, as Linux
/// sends them), one bare ACK per flight, and the connection's opening (3 segments of 60, 60 and
/// 52 B) and closing (FIN, FIN, ACK: 3 x 52 B). Ethernet framing is not counted. A model, not
/// a measurement: it shows the share of the total that no caching removes.
pub fn tcp_ip_estimate(flights: &[usize], mtu: usize) -> usize {
    const SEGMENT: usize = 52;
    let mss = mtu.saturating_sub(SEGMENT).max(1);
    let opening = 60 + 60 + 52;
    let closing = 3 * SEGMENT;
    flights.iter().map(|&b| b + b.div_ceil(mss) * SEGMENT + SEGMENT).sum::<usize>() + opening + closing
}
