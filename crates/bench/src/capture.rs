//! UDP datagrams out of a packet capture (`dumpcap -P`: the classic pcap format), and what each
//! one carries on a WebRTC path: STUN, DTLS records or both (RFC 7983's first-byte rule).
//! `bench webrtc` uses it to time a browser's sessions from their first connectivity check and
//! to show their flights, packet by packet.

use std::net::{Ipv4Addr, SocketAddrV4};

use anyhow::{bail, ensure};

/// One UDP datagram of the capture.
#[derive(Clone, Debug, PartialEq)]
pub struct Datagram {
    /// When it was captured, Unix time in milliseconds.
    pub unix_ms: f64,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub payload: Vec<u8>,
}

/// Link types of the pcap header: Ethernet, and Linux cooked capture (`-i any`).
const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_LINUX_SLL: u32 = 113;

/// The IPv4 UDP datagrams of a pcap file; other frames are skipped.
pub fn udp_datagrams(file: &[u8]) -> anyhow::Result<Vec<Datagram>> {
    ensure!(file.len() >= 24, "a pcap file has a 24-byte header, this one is {} bytes", file.len());
    let magic = [file[0], file[1], file[2], file[3]];
    // The magic number, written in the writer's byte order, says that order and the timestamp unit.
    let (little, nanos) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => (true, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (true, true),
        [0xa1, 0xb2, 0xc3, 0xd4] => (false, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (false, true),
        _ => bail!("not a pcap file (pcapng? capture with dumpcap -P)"),
    };
    let u32_at = |at: usize| -> u32 {
        let b = [file[at], file[at + 1], file[at + 2], file[at + 3]];
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let link = u32_at(20);
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= file.len() {
        let (secs, fraction, captured) = (u32_at(at), u32_at(at + 4), u32_at(at + 8) as usize);
        let frame = file.get(at + 16..at + 16 + captured);
        at += 16 + captured;
        // A frame cut short by the end of the file (the capture was stopped mid-write) ends it.
        let Some(frame) = frame else { break };
        let unix_ms = f64::from(secs) * 1e3 + f64::from(fraction) / if nanos { 1e6 } else { 1e3 };
        let ip = match link {
            LINKTYPE_ETHERNET if frame.get(12..14) == Some(&[0x08, 0x00]) => &frame[14..],
            LINKTYPE_LINUX_SLL if frame.get(14..16) == Some(&[0x08, 0x00]) => &frame[16..],
            LINKTYPE_ETHERNET | LINKTYPE_LINUX_SLL => continue,
            other => bail!("pcap link type {other}: only Ethernet and Linux cooked captures are read"),
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

/// A STUN message's class and method (RFC 8489 §5): its type, transaction id and whether it
/// carries USE-CANDIDATE (RFC 8445 §7.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stun {
    pub message_type: u16,
    pub transaction: [u8; 12],
    pub use_candidate: bool,
}

const STUN_MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];
/// Binding request and Binding success response.
pub const BINDING_REQUEST: u16 = 0x0001;
pub const BINDING_SUCCESS: u16 = 0x0101;
const ATTR_USE_CANDIDATE: u16 = 0x0025;

/// The datagram as a STUN message, if it is one.
pub fn stun(payload: &[u8]) -> Option<Stun> {
    if payload.len() < 20 || payload[0] > 3 || payload[4..8] != STUN_MAGIC_COOKIE {
        return None;
    }
    let mut transaction = [0u8; 12];
    transaction.copy_from_slice(&payload[8..20]);
    let length = usize::from(u16::from_be_bytes([payload[2], payload[3]]));
    let mut attributes = payload.get(20..20 + length)?;
    let mut use_candidate = false;
    while attributes.len() >= 4 {
        let kind = u16::from_be_bytes([attributes[0], attributes[1]]);
        let len = usize::from(u16::from_be_bytes([attributes[2], attributes[3]]));
        use_candidate |= kind == ATTR_USE_CANDIDATE;
        attributes = attributes.get(4 + len.div_ceil(4) * 4..).unwrap_or_default();
    }
    Some(Stun { message_type: u16::from_be_bytes([payload[0], payload[1]]), transaction, use_candidate })
}

/// What a datagram carries, in a few letters: `check`, `check+nominate`, `ok` (a Binding
/// success), or its DTLS records joined by `+`: `CH`, `SH`, `HVR` (the plaintext handshake
/// messages that open a flight), `hs` (another plaintext handshake record), `hs*` (an
/// encrypted DTLS 1.2 handshake record, epoch 1: Finished), `CCS`, `alert`, `app` (DTLS 1.2
/// application data: SCTP) and `ct` (a DTLS 1.3 ciphertext record, RFC 9147 §4: handshake or
/// SCTP, which the capture cannot tell apart).
pub fn describe(payload: &[u8]) -> String {
    if let Some(message) = stun(payload) {
        return match (message.message_type, message.use_candidate) {
            (BINDING_REQUEST, false) => "check".into(),
            (BINDING_REQUEST, true) => "check+nominate".into(),
            (BINDING_SUCCESS, _) => "ok".into(),
            (other, _) => format!("stun{other:04x}"),
        };
    }
    let mut records = Vec::new();
    let mut rest = payload;
    while let Some(&first) = rest.first() {
        match first {
            // DTLSPlaintext/DTLSCiphertext of DTLS 1.2 and 1.3's plaintext records: 13-byte header.
            20..=25 if rest.len() >= 13 => {
                let length = usize::from(u16::from_be_bytes([rest[11], rest[12]]));
                let epoch = u16::from_be_bytes([rest[3], rest[4]]);
                records.push(match (first, epoch, rest.get(13)) {
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
                rest = rest.get(13 + length..).unwrap_or_default();
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
        let mut file = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        file.extend([0; 8]);
        file.extend(65_535u32.to_le_bytes());
        file.extend(LINKTYPE_ETHERNET.to_le_bytes());
        for (secs, micros, ip) in frames {
            let mut frame = vec![0u8; 12];
            frame.extend([0x08, 0x00]);
            frame.extend(ip);
            file.extend(secs.to_le_bytes());
            file.extend(micros.to_le_bytes());
            file.extend((frame.len() as u32).to_le_bytes());
            file.extend((frame.len() as u32).to_le_bytes());
            file.extend(frame);
        }
        file
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
        let mut attributes = vec![0x00, 0x06, 0x00, 0x05, b'a', b'b', b':', b'c', b'd', 0, 0, 0];
        if use_candidate {
            attributes.extend([0x00, 0x25, 0x00, 0x00]);
        }
        let mut message = vec![0x00, 0x01];
        message.extend((attributes.len() as u16).to_be_bytes());
        message.extend(STUN_MAGIC_COOKIE);
        message.extend([7u8; 12]);
        message.extend(attributes);
        message
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
        let nominating = stun(&binding_request(true)).unwrap();
        assert_eq!((nominating.message_type, nominating.transaction), (BINDING_REQUEST, [7; 12]));
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
