//! UDP datagrams out of a packet capture (`dumpcap -P`: the classic pcap format), and what each
//! one carries on a WebRTC path: STUN, DTLS records or both (RFC 7983's first-byte rule).
//! `bench webrtc` uses it to time a browser's sessions from their first connectivity check and
//! to show their flights, packet by packet.

use std::net::{Ipv4Addr, SocketAddrV4};

use anyhow::{bail, Context};
use fastshake_dtls::wire;
use fastshake_webrtc::stun;
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;

/// One UDP datagram of the capture.
#[derive(Clone, Debug, PartialEq)]
pub struct Datagram {
    /// When it was captured, Unix time in milliseconds.
    pub unix_ms: f64,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub payload: Vec<u8>,
}

/// The IPv4 UDP datagrams of a classic pcap file; other frames are skipped, and a frame cut
/// short by the end of the file (the capture was stopped mid-write) ends it.
pub fn udp_datagrams(file: &[u8]) -> anyhow::Result<Vec<Datagram>> {
    let mut reader = PcapReader::new(file).context("not a pcap file (pcapng? capture with dumpcap -P)")?;
    let link = reader.header().datalink;
    let mut out = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let Ok(packet) = packet else { break };
        let frame = &packet.data;
        let unix_ms = packet.timestamp.as_secs_f64() * 1e3;
        let ip = match link {
            DataLink::ETHERNET if frame.get(12..14) == Some(&[0x08, 0x00]) => &frame[14..],
            DataLink::LINUX_SLL if frame.get(14..16) == Some(&[0x08, 0x00]) => &frame[16..],
            DataLink::ETHERNET | DataLink::LINUX_SLL => continue,
            other => bail!("pcap link type {other:?}: only Ethernet and Linux cooked captures are read"),
        };
        if let Some(datagram) = ipv4_udp(ip, unix_ms) {
            out.push(datagram);
        }
    }
    Ok(out)
}

/// An IPv4 packet's UDP datagram, if it is an unfragmented one.
fn ipv4_udp(ip: &[u8], unix_ms: f64) -> Option<Datagram> {
    let header = usize::from(ip.first()? & 0x0f) * 4;
    let fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x3fff;
    if ip[0] >> 4 != 4 || ip.get(9) != Some(&17) || fragment != 0 || header < 20 {
        return None;
    }
    let address =
        |at: usize| Some(Ipv4Addr::new(*ip.get(at)?, *ip.get(at + 1)?, *ip.get(at + 2)?, *ip.get(at + 3)?));
    let udp = ip.get(header..)?;
    let port = |at: usize| Some(u16::from_be_bytes([*udp.get(at)?, *udp.get(at + 1)?]));
    let length = usize::from(port(4)?);
    let payload = udp.get(8..length.max(8))?.to_vec();
    Some(Datagram {
        unix_ms,
        src: SocketAddrV4::new(address(12)?, port(0)?),
        dst: SocketAddrV4::new(address(16)?, port(2)?),
        payload,
    })
}

/// The datagram as a Binding request or success response (what ICE sends): its transaction
/// and whether it nominates (RFC 8445 §7.1.2).
pub fn binding(payload: &[u8]) -> Option<Binding> {
    let message = stun::Message::parse(payload).ok()?;
    if message.method() != stun::Method::Binding {
        return None;
    }
    let transaction = message.transaction_id();
    match message.class() {
        stun::Class::Request => Some(Binding::Check { transaction, nominates: message.use_candidate() }),
        stun::Class::SuccessResponse => Some(Binding::Success { transaction }),
        _ => None,
    }
}

/// A Binding request or its success response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Check { transaction: stun::TransactionId, nominates: bool },
    Success { transaction: stun::TransactionId },
}

/// What a datagram carries, in a few letters: `check`, `check+nominate`, `ok` (a Binding
/// success), or its DTLS records joined by `+`: `CH`, `SH`, `HVR` (the plaintext handshake
/// messages that open a flight), `hs` (another plaintext handshake record), `hs*` (an
/// encrypted DTLS 1.2 handshake record, epoch 1: Finished), `CCS`, `alert`, `app` (DTLS 1.2
/// application data: SCTP) and `ct` (a DTLS 1.3 ciphertext record, RFC 9147 §4: handshake or
/// SCTP, which the capture cannot tell apart).
pub fn describe(payload: &[u8]) -> String {
    match binding(payload) {
        Some(Binding::Check { nominates: false, .. }) => return "check".into(),
        Some(Binding::Check { nominates: true, .. }) => return "check+nominate".into(),
        Some(Binding::Success { .. }) => return "ok".into(),
        None if stun::Message::parse(payload).is_ok() => return "stun".into(),
        None => {}
    }
    let mut records = Vec::new();
    let mut rest = payload;
    while let Some(&first) = rest.first() {
        match first {
            // DTLSPlaintext/DTLSCiphertext of DTLS 1.2 and 1.3's plaintext records: 13-byte header.
            20..=25 if wire::record_head(rest).is_ok() => {
                let Ok(head) = wire::record_head(rest) else { break };
                records.push(match (first, head.epoch, rest.get(head.header_len())) {
                    (22, 0, Some(1)) => "CH",
                    (22, 0, Some(2)) => "SH",
                    (22, 0, Some(3)) => "HVR",
                    (22, 0, _) => "hs",
                    (22, _, _) => "hs*",
                    (20, _, _) => "CCS",
                    (21, _, _) => "alert",
                    (23, _, _) => "app",
                    _ => "?",
                });
                rest = rest.get(head.record_len()..).unwrap_or_default();
            }
            // RFC 9147 §4: 001CSLEE; with L the record has a 2-byte length, else it runs to the
            // end of the datagram. C adds a connection id, of a length this capture cannot know:
            // WebRTC negotiates none.
            0x20..=0x3f => {
                records.push("ct");
                let header =
                    1 + if first & 0x08 != 0 { 2 } else { 1 } + if first & 0x04 != 0 { 2 } else { 0 };
                if first & 0x04 == 0 || rest.len() < header {
                    break;
                }
                let length = usize::from(u16::from_be_bytes([rest[header - 2], rest[header - 1]]));
                rest = rest.get(header + length..).unwrap_or_default();
            }
            _ => {
                records.push("?");
                break;
            }
        }
    }
    records.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic little-endian microsecond pcap with one Ethernet frame per (seconds,
    /// microseconds, IPv4 packet).
    fn pcap(frames: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
        use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
        let header = PcapHeader { datalink: DataLink::ETHERNET, ..PcapHeader::default() };
        let mut writer = PcapWriter::with_header(Vec::new(), header).unwrap();
        for (secs, micros, ip) in frames {
            let mut frame = vec![0u8; 12];
            frame.extend([0x08, 0x00]);
            frame.extend(ip);
            let at = std::time::Duration::new(u64::from(*secs), micros * 1_000);
            writer.write_packet(&PcapPacket::new(at, frame.len() as u32, &frame)).unwrap();
        }
        writer.into_writer()
    }

    fn ipv4_udp_packet(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
        let total = 20 + 8 + payload.len();
        let mut ip = vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0];
        ip.extend(src.ip().octets());
        ip.extend(dst.ip().octets());
        ip.extend(src.port().to_be_bytes());
        ip.extend(dst.port().to_be_bytes());
        ip.extend(((8 + payload.len()) as u16).to_be_bytes());
        ip.extend([0, 0]);
        ip.extend(payload);
        ip
    }

    fn binding_request(use_candidate: bool) -> Vec<u8> {
        let check = stun::MessageBuilder::new(
            stun::Class::Request,
            stun::Method::Binding,
            stun::TransactionId([7; 12]),
        )
        .username("ab:cd");
        let check = if use_candidate { check.use_candidate() } else { check };
        check.fingerprint().into_bytes().unwrap()
    }

    #[test]
    fn reads_the_udp_datagrams_of_a_pcap_file() {
        let client: SocketAddrV4 = "192.0.2.2:5000".parse().unwrap();
        let server: SocketAddrV4 = "203.0.113.2:6000".parse().unwrap();
        let mut tcp = ipv4_udp_packet(client, server, b"x");
        tcp[9] = 6;
        let file = pcap(&[
            (1_700_000_000, 250, ipv4_udp_packet(client, server, &binding_request(false))),
            (1_700_000_000, 500, tcp),
            (1_700_000_001, 1_000, ipv4_udp_packet(server, client, b"\x17\xfe\xfd")),
        ]);
        let datagrams = udp_datagrams(&file).unwrap();
        assert_eq!(datagrams.len(), 2);
        assert_eq!((datagrams[0].src, datagrams[0].dst), (client, server));
        assert_eq!(datagrams[0].unix_ms, 1_700_000_000_000.25);
        assert_eq!(datagrams[1].unix_ms, 1_700_000_001_001.0);
        assert_eq!(datagrams[1].payload, b"\x17\xfe\xfd");
        // Cut short inside the last frame: the frames before it still count.
        assert_eq!(udp_datagrams(&file[..file.len() - 2]).unwrap().len(), 1);
        assert!(udp_datagrams(b"\x0a\x0d\x0d\x0a and more than twenty-four bytes").is_err());
    }

    #[test]
    fn tells_checks_nominations_and_dtls_records_apart() {
        assert_eq!(describe(&binding_request(false)), "check");
        assert_eq!(describe(&binding_request(true)), "check+nominate");
        let nominating = binding(&binding_request(true)).unwrap();
        assert_eq!(nominating, Binding::Check { transaction: stun::TransactionId([7; 12]), nominates: true });
        // A ClientHello record, then a DTLS 1.3 ciphertext record with a length and one without.
        let mut datagram = vec![22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0];
        datagram.extend([0x2c, 0, 0, 0, 3, 9, 9, 9]);
        datagram.extend([0x28, 0, 5, 5]);
        assert_eq!(describe(&datagram), "CH+ct+ct");
        // A DTLS 1.2 Finished (epoch 1), change cipher spec, application data.
        let mut finished = vec![20, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1];
        finished.extend([22, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0x55]);
        finished.extend([23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(describe(&finished), "CCS+hs*+app");
    }
}
