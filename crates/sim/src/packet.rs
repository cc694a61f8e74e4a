//! The datagrams moving through the simulated network and their IPv4/UDP wire image.
//!
//! Inside the simulator a datagram is its addresses plus the UDP payload; the IPv4 and UDP
//! headers are only synthesised when bytes are needed (pcap records, a MAC model that must
//! fragment the whole IP packet), so forwarding moves a `Vec` and copies nothing.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Bytes of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Bytes of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// The TTL a host puts on the datagrams it sends.
pub const DEFAULT_TTL: u8 = 64;

/// A UDP datagram in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Source address and port (rewritten by NATs).
    pub src: SocketAddrV4,
    /// Destination address and port (rewritten by NATs).
    pub dst: SocketAddrV4,
    /// Hops left; routers drop the datagram when it reaches zero.
    pub ttl: u8,
    /// IPv4 identification, unique per datagram sent by the simulator (wraps).
    pub ip_id: u16,
    /// The UDP payload.
    pub payload: Vec<u8>,
}

impl Packet {
    /// Length of the whole IP packet.
    pub fn ip_len(&self) -> usize {
        IPV4_HEADER_LEN + UDP_HEADER_LEN + self.payload.len()
    }

    /// The IPv4 + UDP packet as it would travel on a wire, with correct lengths and checksums.
    /// Lengths beyond 65535 (not representable in IPv4) are written modulo 2^16.
    pub fn encode_ipv4(&self) -> Vec<u8> {
        let total = self.ip_len();
        let udp_len = UDP_HEADER_LEN + self.payload.len();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&[0x45, 0x00]);
        out.extend_from_slice(&(total as u16).to_be_bytes());
        out.extend_from_slice(&self.ip_id.to_be_bytes());
        out.extend_from_slice(&[0x40, 0x00]); // don't fragment, offset 0
        out.extend_from_slice(&[self.ttl, 17, 0, 0]); // TTL, UDP, checksum placeholder
        out.extend_from_slice(&self.src.ip().octets());
        out.extend_from_slice(&self.dst.ip().octets());
        let ip_sum = internet_checksum(&[&out[..IPV4_HEADER_LEN]]);
        out[10..12].copy_from_slice(&ip_sum.to_be_bytes());

        let mut udp = [0u8; UDP_HEADER_LEN];
        udp[0..2].copy_from_slice(&self.src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst.port().to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let pseudo = pseudo_header(*self.src.ip(), *self.dst.ip(), udp_len as u16);
        let mut udp_sum = internet_checksum(&[&pseudo, &udp, &self.payload]);
        if udp_sum == 0 {
            udp_sum = 0xffff; // zero means "no checksum" in UDP over IPv4
        }
        udp[6..8].copy_from_slice(&udp_sum.to_be_bytes());
        out.extend_from_slice(&udp);
        out.extend_from_slice(&self.payload);
        out
    }
}

fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, udp_len: u16) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[0..4].copy_from_slice(&src.octets());
    p[4..8].copy_from_slice(&dst.octets());
    p[9] = 17;
    p[10..12].copy_from_slice(&udp_len.to_be_bytes());
    p
}

/// RFC 1071 ones'-complement sum over the concatenation of `parts`.
pub fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    let mut odd: Option<u8> = None;
    for part in parts {
        for &byte in part.iter() {
            match odd.take() {
                Some(high) => sum += u64::from(u16::from_be_bytes([high, byte])),
                None => odd = Some(byte),
            }
        }
    }
    if let Some(high) = odd {
        sum += u64::from(u16::from_be_bytes([high, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checksums_verify() {
        let p = Packet {
            src: "10.0.0.1:1000".parse().unwrap(),
            dst: "192.0.2.7:7".parse().unwrap(),
            ttl: 64,
            ip_id: 3,
            payload: b"hello".to_vec(),
        };
        let bytes = p.encode_ipv4();
        assert_eq!(bytes.len(), 33);
        assert_eq!(u16::from_be_bytes([bytes[2], bytes[3]]), 33);
        assert_eq!(internet_checksum(&[&bytes[..20]]), 0, "IP header sums to zero");
        let pseudo = pseudo_header(*p.src.ip(), *p.dst.ip(), 13);
        assert_eq!(internet_checksum(&[&pseudo, &bytes[20..]]), 0, "UDP checksum verifies");
    }
}
