//! 6LoWPAN: a UDP datagram over IPv6 in IEEE 802.15.4 frames, with RFC 6282 header compression
//! (IPHC and the UDP next-header compression) and RFC 4944 fragmentation; the receiving side
//! ([`Reassembler`]) decompresses and reassembles.
//!
//! What the sender puts in the frames:
//! - IPHC: traffic class and flow label elided (zero), next header compressed (UDP NHC), hop
//!   limit compressed when it is 1, 64 or 255. Addresses are compressed against the two
//!   prefixes every node knows: the link-local `fe80::/64` (stateless) and the mesh prefix
//!   [`MESH_PREFIX`] `fd00::/64` as context 0 (stateful, RFC 6282 §3.1.1). The interface
//!   identifier is elided when it is the one derived from the frame's MAC address (RFC 4944 §6),
//!   carried in 16 bits when it has the `0000:00ff:fe00:XXXX` form, in 64 bits otherwise; any
//!   other address goes inline in full.
//! - UDP NHC (RFC 6282 §4.3): ports in 4, 3 or 1 bytes as the `0xF0xx` / `0xF0Bx` ranges allow;
//!   the length elided (the receiver knows it from the frame or from `datagram_size`); the
//!   checksum always carried (the RFC allows eliding it only with an upper-layer check).
//! - A datagram whose compressed form fits one frame goes alone; a larger one is cut into FRAG1
//!   and FRAGN fragments (RFC 4944 §5.3). `datagram_size` and `datagram_offset` count the
//!   *uncompressed* IPv6 datagram (40 + 8 + payload bytes); the FRAG1 carries the compressed
//!   headers and as many payload bytes as keep the next offset a multiple of 8.
//!
//! Addresses: node `n`'s MAC address is [`eui64`]`(n)`, its interface identifier that EUI-64
//! with the universal/local bit inverted, so `fe80::IID` is its link-local address and
//! `fd00::IID` its mesh address ([`node_address`]). Two neighbours talking over one hop use
//! link-local addresses and both are fully elided; datagrams that cross several hops use the
//! mesh addresses, elided only on the hop where they are the frame's own MAC address.

use super::frag::{self, FragError};
use super::NodeId;
use crate::packet::internet_checksum;
use std::net::{Ipv6Addr, SocketAddrV6};

/// Bytes of an IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// Bytes of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// The prefix of context 0: every node's mesh address is in it (Contiki-NG's default `fd00::`).
pub const MESH_PREFIX: [u8; 8] = [0xfd, 0, 0, 0, 0, 0, 0, 0];
/// The link-local prefix, compressed without a context.
pub const LINK_LOCAL_PREFIX: [u8; 8] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0];
/// FRAG1 header: dispatch `11000` and datagram_size (2 bytes), datagram_tag (2).
pub const FRAG1_HEADER: usize = 4;
/// FRAGN header: FRAG1's fields and datagram_offset in 8-byte units (1).
pub const FRAGN_HEADER: usize = 5;
/// Largest uncompressed IPv6 datagram the 11-bit datagram_size can describe.
pub const MAX_DATAGRAM: usize = 2047;
/// Largest UDP payload 6LoWPAN can carry (the rest of [`MAX_DATAGRAM`] is the headers).
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - IPV6_HEADER_LEN - UDP_HEADER_LEN;
/// Hop limit the sender puts on a datagram unless told otherwise (compressed to 2 bits).
pub const DEFAULT_HOP_LIMIT: u8 = 64;
/// Datagrams a [`Reassembler`] keeps incomplete at once; a new one evicts the oldest.
pub const MAX_PARTIAL: usize = 8;

// Dispatch patterns (RFC 4944 §5.1, RFC 6282 §3.1 and §4.3), high bits of the first byte.
const DISPATCH_IPHC: u8 = 0b0110_0000;
const DISPATCH_FRAG1: u8 = 0b1100_0000;
const DISPATCH_FRAGN: u8 = 0b1110_0000;
const NHC_UDP: u8 = 0b1111_0000;
const NEXT_HEADER_UDP: u8 = 17;

/// A UDP datagram over IPv6, as the MAC models carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpDatagram {
    /// Source address and port.
    pub src: SocketAddrV6,
    /// Destination address and port.
    pub dst: SocketAddrV6,
    /// IPv6 hop limit.
    pub hop_limit: u8,
    /// The UDP payload.
    pub payload: Vec<u8>,
}

/// Which of a node's two addresses a datagram uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `fe80::IID`: between neighbours, over one hop.
    LinkLocal,
    /// `fd00::IID`: across the mesh, over any number of hops.
    Mesh,
}

/// The EUI-64 of a node: `02:00:5e:fa:nn:nn:nn:nn`, its id (big-endian) in the low 4 bytes.
/// Bytes 2–3 are non-zero so that no node's interface identifier is all zeros (RFC 4291 §2.6.1
/// reserves that one for the subnet-router anycast address).
pub fn eui64(node: NodeId) -> [u8; 8] {
    let low = (node as u64 & 0xFFFF_FFFF) as u32;
    let mut a = [0x02, 0x00, 0x5e, 0xfa, 0, 0, 0, 0];
    a[4..].copy_from_slice(&low.to_be_bytes());
    a
}

/// The interface identifier derived from an EUI-64 (RFC 4944 §6: the U/L bit inverted).
pub fn iid_from_eui64(eui: &[u8; 8]) -> [u8; 8] {
    let mut iid = *eui;
    iid[0] ^= 0x02;
    iid
}

/// Node `node`'s address in `scope`.
pub fn node_address(node: NodeId, scope: Scope) -> Ipv6Addr {
    let prefix = match scope {
        Scope::LinkLocal => LINK_LOCAL_PREFIX,
        Scope::Mesh => MESH_PREFIX,
    };
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&prefix);
    a[8..].copy_from_slice(&iid_from_eui64(&eui64(node)));
    Ipv6Addr::from(a)
}

impl UdpDatagram {
    /// A datagram from node `from` to node `to` on `port` at both ends: link-local when the two
    /// are neighbours (`hops == 1`), mesh addresses otherwise.
    pub fn between(from: NodeId, to: NodeId, hops: usize, port: u16, payload: Vec<u8>) -> Self {
        let scope = if hops == 1 { Scope::LinkLocal } else { Scope::Mesh };
        UdpDatagram {
            src: SocketAddrV6::new(node_address(from, scope), port, 0, 0),
            dst: SocketAddrV6::new(node_address(to, scope), port, 0, 0),
            hop_limit: DEFAULT_HOP_LIMIT,
            payload,
        }
    }

    /// Bytes of the uncompressed IPv6 datagram (what RFC 4944's datagram_size counts).
    pub fn ipv6_len(&self) -> usize {
        IPV6_HEADER_LEN + UDP_HEADER_LEN + self.payload.len()
    }

    /// The UDP checksum over the IPv6 pseudo-header (RFC 8200 §8.1); never zero.
    pub fn udp_checksum(&self) -> u16 {
        let udp_len = UDP_HEADER_LEN + self.payload.len();
        let header = udp_header(self.src.port(), self.dst.port(), udp_len, 0);
        let sum = internet_checksum(&[
            &pseudo_header(self.src.ip(), self.dst.ip(), udp_len),
            &header,
            &self.payload,
        ]);
        if sum == 0 {
            0xffff
        } else {
            sum
        }
    }

    /// The IPv6 and UDP headers and payload as they would travel uncompressed.
    pub fn encode_ipv6(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.ipv6_len());
        out.extend_from_slice(&self.uncompressed_headers(self.udp_checksum()));
        out.extend_from_slice(&self.payload);
        out
    }

    fn uncompressed_headers(&self, checksum: u16) -> [u8; IPV6_HEADER_LEN + UDP_HEADER_LEN] {
        let udp_len = UDP_HEADER_LEN + self.payload.len();
        let mut h = [0u8; IPV6_HEADER_LEN + UDP_HEADER_LEN];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        h[6] = NEXT_HEADER_UDP;
        h[7] = self.hop_limit;
        h[8..24].copy_from_slice(&self.src.ip().octets());
        h[24..40].copy_from_slice(&self.dst.ip().octets());
        h[40..].copy_from_slice(&udp_header(self.src.port(), self.dst.port(), udp_len, checksum));
        h
    }
}

fn udp_header(src_port: u16, dst_port: u16, udp_len: usize, checksum: u16) -> [u8; UDP_HEADER_LEN] {
    let mut h = [0u8; UDP_HEADER_LEN];
    h[0..2].copy_from_slice(&src_port.to_be_bytes());
    h[2..4].copy_from_slice(&dst_port.to_be_bytes());
    h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    h[6..8].copy_from_slice(&checksum.to_be_bytes());
    h
}

fn pseudo_header(src: &Ipv6Addr, dst: &Ipv6Addr, udp_len: usize) -> [u8; 40] {
    let mut p = [0u8; 40];
    p[0..16].copy_from_slice(&src.octets());
    p[16..32].copy_from_slice(&dst.octets());
    p[32..36].copy_from_slice(&(udp_len as u32).to_be_bytes());
    p[39] = NEXT_HEADER_UDP;
    p
}

/// Address mode bits (SAM/DAM) and context flag for `addr` sent in a frame from/to `mac`, and
/// the bytes carried inline.
fn compress_address(addr: &Ipv6Addr, mac: &[u8; 8]) -> (bool, u8, Vec<u8>) {
    let octets = addr.octets();
    let context = if octets[..8] == LINK_LOCAL_PREFIX {
        false
    } else if octets[..8] == MESH_PREFIX {
        true
    } else {
        return (false, 0b00, octets.to_vec());
    };
    let iid = &octets[8..];
    if iid == iid_from_eui64(mac) {
        (context, 0b11, Vec::new())
    } else if iid[..6] == [0, 0, 0, 0xff, 0xfe, 0] {
        (context, 0b10, iid[6..].to_vec())
    } else {
        (context, 0b01, iid.to_vec())
    }
}

/// The IPHC and UDP NHC headers (checksum included) of `datagram` in a frame from MAC address
/// `mac_src` to `mac_dst`.
pub fn compress_headers(datagram: &UdpDatagram, mac_src: &[u8; 8], mac_dst: &[u8; 8]) -> Vec<u8> {
    let (hlim_bits, hlim_inline) = match datagram.hop_limit {
        1 => (0b01, None),
        64 => (0b10, None),
        255 => (0b11, None),
        h => (0b00, Some(h)),
    };
    // 011, TF = 11 (elided), NH = 1 (NHC), HLIM
    let first = DISPATCH_IPHC | (0b11 << 3) | (1 << 2) | hlim_bits;
    let (sac, sam, src_inline) = compress_address(datagram.src.ip(), mac_src);
    let (dac, dam, dst_inline) = compress_address(datagram.dst.ip(), mac_dst);
    // CID = 0 (context 0 only), M = 0
    let second = (u8::from(sac) << 6) | (sam << 4) | (u8::from(dac) << 2) | dam;
    let mut out = vec![first, second];
    out.extend(hlim_inline);
    out.extend_from_slice(&src_inline);
    out.extend_from_slice(&dst_inline);
    let (src_port, dst_port) = (datagram.src.port(), datagram.dst.port());
    if src_port & 0xFFF0 == 0xF0B0 && dst_port & 0xFFF0 == 0xF0B0 {
        out.push(NHC_UDP | 0b11);
        out.push(((src_port & 0xF) << 4) as u8 | (dst_port & 0xF) as u8);
    } else if dst_port & 0xFF00 == 0xF000 {
        out.push(NHC_UDP | 0b01);
        out.extend_from_slice(&src_port.to_be_bytes());
        out.push(dst_port as u8);
    } else if src_port & 0xFF00 == 0xF000 {
        out.push(NHC_UDP | 0b10);
        out.push(src_port as u8);
        out.extend_from_slice(&dst_port.to_be_bytes());
    } else {
        out.push(NHC_UDP);
        out.extend_from_slice(&src_port.to_be_bytes());
        out.extend_from_slice(&dst_port.to_be_bytes());
    }
    out.extend_from_slice(&datagram.udp_checksum().to_be_bytes());
    out
}

/// Bytes of the compressed IPv6 and UDP headers of `datagram` on the hop `from` → `to`
/// (without fragment headers): what a 6LoWPAN stack sends instead of the 48 uncompressed ones.
pub fn compressed_header_len(datagram: &UdpDatagram, from: NodeId, to: NodeId) -> usize {
    compress_headers(datagram, &eui64(from), &eui64(to)).len()
}

/// The 6LoWPAN part (MAC payload) of each frame carrying `datagram` from `mac_src` to `mac_dst`,
/// fitting `room` bytes each, fragmented with `tag` when one frame is not enough. Also returns
/// the 6LoWPAN header bytes (IPHC, NHC, fragment headers) of all frames together.
pub fn encode(
    datagram: &UdpDatagram,
    mac_src: &[u8; 8],
    mac_dst: &[u8; 8],
    tag: u16,
    room: usize,
) -> Result<(Vec<Vec<u8>>, usize), FragError> {
    let size = datagram.ipv6_len();
    if size > MAX_DATAGRAM {
        return Err(FragError::TooLarge(size));
    }
    let headers = compress_headers(datagram, mac_src, mac_dst);
    let payload = &datagram.payload;
    if headers.len() + payload.len() <= room {
        let mut f = headers.clone();
        f.extend_from_slice(payload);
        return Ok((vec![f], headers.len()));
    }
    // FRAG1: the compressed headers and a multiple of 8 payload bytes, so that the next
    // fragment starts at an 8-byte boundary of the uncompressed datagram (48 is one).
    let first_chunk = room.saturating_sub(FRAG1_HEADER + headers.len()) / 8 * 8;
    if first_chunk == 0 {
        return Err(FragError::TooLarge(size));
    }
    let size_field = size as u16; // <= 2047
    let mut frames = Vec::new();
    let mut f = Vec::with_capacity(room);
    f.extend_from_slice(&(u16::from(DISPATCH_FRAG1) << 8 | size_field).to_be_bytes());
    f.extend_from_slice(&tag.to_be_bytes());
    f.extend_from_slice(&headers);
    f.extend_from_slice(&payload[..first_chunk]);
    frames.push(f);
    let mut lowpan_bytes = FRAG1_HEADER + headers.len();
    let later_room = room - FRAGN_HEADER;
    let mut sent = first_chunk;
    while sent < payload.len() {
        let left = payload.len() - sent;
        let chunk = if left <= later_room { left } else { later_room / 8 * 8 };
        let offset = IPV6_HEADER_LEN + UDP_HEADER_LEN + sent;
        let mut f = Vec::with_capacity(room);
        f.extend_from_slice(&(u16::from(DISPATCH_FRAGN) << 8 | size_field).to_be_bytes());
        f.extend_from_slice(&tag.to_be_bytes());
        f.push((offset / 8) as u8); // offset < 2047, a multiple of 8
        f.extend_from_slice(&payload[sent..sent + chunk]);
        frames.push(f);
        lowpan_bytes += FRAGN_HEADER;
        sent += chunk;
    }
    Ok((frames, lowpan_bytes))
}

/// Reads the next `n` bytes of `bytes` from `*at`.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], FragError> {
    let end = at.checked_add(n).ok_or(FragError::Truncated)?;
    let s = bytes.get(*at..end).ok_or(FragError::Truncated)?;
    *at = end;
    Ok(s)
}

fn decompress_address(
    context: bool,
    mode: u8,
    bytes: &[u8],
    at: &mut usize,
    mac: &[u8; 8],
) -> Result<Ipv6Addr, FragError> {
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(if context { &MESH_PREFIX } else { &LINK_LOCAL_PREFIX });
    match (context, mode) {
        (false, 0b00) => a.copy_from_slice(take(bytes, at, 16)?),
        // SAC = 1, SAM = 00 is the unspecified address; as a destination it is reserved.
        (true, 0b00) => return Err(FragError::Unsupported("unspecified or reserved address mode")),
        (_, 0b01) => a[8..].copy_from_slice(take(bytes, at, 8)?),
        (_, 0b10) => {
            a[8..14].copy_from_slice(&[0, 0, 0, 0xff, 0xfe, 0]);
            a[14..].copy_from_slice(take(bytes, at, 2)?);
        }
        _ => a[8..].copy_from_slice(&iid_from_eui64(mac)),
    }
    Ok(Ipv6Addr::from(a))
}

/// The headers a compressed datagram starts with, decompressed.
struct Headers {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    src_port: u16,
    dst_port: u16,
    checksum: u16,
}

impl Headers {
    /// The 48 uncompressed header bytes of an IPv6 datagram of `size` bytes.
    fn uncompressed(&self, size: usize) -> [u8; IPV6_HEADER_LEN + UDP_HEADER_LEN] {
        let d = UdpDatagram {
            src: SocketAddrV6::new(self.src, self.src_port, 0, 0),
            dst: SocketAddrV6::new(self.dst, self.dst_port, 0, 0),
            hop_limit: self.hop_limit,
            payload: Vec::new(),
        };
        let mut h = d.uncompressed_headers(self.checksum);
        let udp_len = (size.saturating_sub(IPV6_HEADER_LEN) as u16).to_be_bytes();
        h[4..6].copy_from_slice(&udp_len);
        h[44..46].copy_from_slice(&udp_len);
        h
    }
}

/// Decompresses the IPHC and UDP NHC headers at the start of `bytes` (a frame from `mac_src`
/// to `mac_dst`); returns them and how many bytes they took. Only what [`compress_headers`]
/// produces is accepted: other IPHC forms are refused, never guessed.
fn decompress_headers(
    bytes: &[u8],
    mac_src: &[u8; 8],
    mac_dst: &[u8; 8],
) -> Result<(Headers, usize), FragError> {
    let mut at = 0;
    let iphc = take(bytes, &mut at, 2)?;
    let (first, second) = (iphc[0], iphc[1]);
    if first & 0b1110_0000 != DISPATCH_IPHC {
        return Err(FragError::UnknownDispatch(first));
    }
    if (first >> 3) & 0b11 != 0b11 {
        return Err(FragError::Unsupported("traffic class or flow label inline"));
    }
    if first & 0b100 == 0 {
        return Err(FragError::Unsupported("next header inline"));
    }
    if second & 0x80 != 0 {
        return Err(FragError::Unsupported("context identifier extension"));
    }
    if second & 0x08 != 0 {
        return Err(FragError::Unsupported("multicast destination"));
    }
    let hop_limit = match first & 0b11 {
        0b01 => 1,
        0b10 => 64,
        0b11 => 255,
        _ => take(bytes, &mut at, 1)?[0],
    };
    let src = decompress_address(second & 0x40 != 0, (second >> 4) & 0b11, bytes, &mut at, mac_src)?;
    let dst = decompress_address(second & 0x04 != 0, second & 0b11, bytes, &mut at, mac_dst)?;
    let nhc = take(bytes, &mut at, 1)?[0];
    if nhc & 0b1111_1000 != NHC_UDP {
        return Err(FragError::Unsupported("next header other than UDP"));
    }
    if nhc & 0b100 != 0 {
        return Err(FragError::Unsupported("UDP checksum elided"));
    }
    let port16 = |s: &[u8]| u16::from_be_bytes([s[0], s[1]]);
    let (src_port, dst_port) = match nhc & 0b11 {
        0b00 => {
            let p = take(bytes, &mut at, 4)?;
            (port16(&p[..2]), port16(&p[2..]))
        }
        0b01 => {
            let p = take(bytes, &mut at, 3)?;
            (port16(&p[..2]), 0xF000 | u16::from(p[2]))
        }
        0b10 => {
            let p = take(bytes, &mut at, 3)?;
            (0xF000 | u16::from(p[0]), port16(&p[1..]))
        }
        _ => {
            let p = take(bytes, &mut at, 1)?[0];
            (0xF0B0 | u16::from(p >> 4), 0xF0B0 | u16::from(p & 0xF))
        }
    };
    let checksum = port16(take(bytes, &mut at, 2)?);
    Ok((Headers { src, dst, hop_limit, src_port, dst_port, checksum }, at))
}

/// Checks a whole uncompressed IPv6/UDP datagram (lengths, next header, UDP checksum).
fn parse_uncompressed(image: &[u8]) -> Result<UdpDatagram, FragError> {
    let header = image.get(..IPV6_HEADER_LEN + UDP_HEADER_LEN).ok_or(FragError::Truncated)?;
    let udp_len = image.len() - IPV6_HEADER_LEN;
    let field = |i: usize| usize::from(u16::from_be_bytes([header[i], header[i + 1]]));
    if header[0] >> 4 != 6 || header[6] != NEXT_HEADER_UDP || field(4) != udp_len || field(44) != udp_len {
        return Err(FragError::Inconsistent);
    }
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&header[8..24]);
    let src = Ipv6Addr::from(octets);
    octets.copy_from_slice(&header[24..40]);
    let dst = Ipv6Addr::from(octets);
    let sum = internet_checksum(&[&pseudo_header(&src, &dst, udp_len), &image[IPV6_HEADER_LEN..]]);
    // A zero checksum field is not allowed in IPv6 (RFC 8200 §8.1).
    if sum != 0 || field(46) == 0 {
        return Err(FragError::BadChecksum);
    }
    Ok(UdpDatagram {
        src: SocketAddrV6::new(src, field(40) as u16, 0, 0),
        dst: SocketAddrV6::new(dst, field(42) as u16, 0, 0),
        hop_limit: header[7],
        payload: image[IPV6_HEADER_LEN + UDP_HEADER_LEN..].to_vec(),
    })
}

/// A datagram the [`Reassembler`] completed, with the MAC addresses of the frames that brought it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The transmitter's EUI-64.
    pub mac_src: [u8; 8],
    /// The receiver's EUI-64.
    pub mac_dst: [u8; 8],
    /// The datagram, checksum verified.
    pub datagram: UdpDatagram,
}

/// RFC 4944 §5.3: fragments belong together when these match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FragmentKey {
    mac_src: [u8; 8],
    mac_dst: [u8; 8],
    size: u16,
    tag: u16,
}

#[derive(Debug)]
struct Partial {
    key: FragmentKey,
    /// The uncompressed datagram being filled in.
    image: Vec<u8>,
    /// Byte ranges of `image` received so far (each fragment's, as it came).
    ranges: Vec<(usize, usize)>,
    filled: usize,
}

/// The receiving side of 6LoWPAN: frames in, whole datagrams out. Keeps at most
/// [`MAX_PARTIAL`] incomplete datagrams, each at most [`MAX_DATAGRAM`] bytes.
#[derive(Debug, Default)]
pub struct Reassembler {
    partial: Vec<Partial>,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Incomplete datagrams held.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Takes one PSDU (MAC header, payload, FCS). Returns the datagram it completes, if any.
    /// A fragment that overlaps a different one of the same datagram discards that datagram
    /// (RFC 4944 §5.3); an exact repeat (a MAC retry whose ACK was lost) is ignored.
    pub fn push(&mut self, psdu: &[u8]) -> Result<Option<Received>, FragError> {
        let frame = frag::parse_data_frame(psdu)?;
        let (mac_src, mac_dst, payload) = (frame.src, frame.dst, frame.payload);
        let first = *payload.first().ok_or(FragError::Truncated)?;
        let mut at = 0;
        match first & 0b1111_1000 {
            DISPATCH_FRAG1 | DISPATCH_FRAGN => {
                let is_first = first & 0b1111_1000 == DISPATCH_FRAG1;
                let h = take(payload, &mut at, if is_first { FRAG1_HEADER } else { FRAGN_HEADER })?;
                let size = u16::from_be_bytes([h[0], h[1]]) & 0x07FF;
                let tag = u16::from_be_bytes([h[2], h[3]]);
                let key = FragmentKey { mac_src, mac_dst, size, tag };
                let size = usize::from(size);
                if size < IPV6_HEADER_LEN + UDP_HEADER_LEN {
                    return Err(FragError::Inconsistent);
                }
                let (start, bytes) = if is_first {
                    let (headers, used) = decompress_headers(&payload[at..], &mac_src, &mac_dst)?;
                    let mut bytes = headers.uncompressed(size).to_vec();
                    bytes.extend_from_slice(&payload[at + used..]);
                    (0, bytes)
                } else {
                    (usize::from(h[4]) * 8, payload[at..].to_vec())
                };
                self.insert(key, start, &bytes)
            }
            b if b & 0b1110_0000 == DISPATCH_IPHC => {
                let (headers, used) = decompress_headers(payload, &mac_src, &mac_dst)?;
                let rest = &payload[used..];
                let size = IPV6_HEADER_LEN + UDP_HEADER_LEN + rest.len();
                let mut image = headers.uncompressed(size).to_vec();
                image.extend_from_slice(rest);
                let datagram = parse_uncompressed(&image)?;
                Ok(Some(Received { mac_src, mac_dst, datagram }))
            }
            _ => Err(FragError::UnknownDispatch(first)),
        }
    }

    fn insert(
        &mut self,
        key: FragmentKey,
        start: usize,
        bytes: &[u8],
    ) -> Result<Option<Received>, FragError> {
        let size = usize::from(key.size);
        let end = start + bytes.len();
        if bytes.is_empty() || end > size {
            return Err(FragError::Inconsistent);
        }
        let index = match self.partial.iter().position(|p| p.key == key) {
            Some(i) => i,
            None => {
                if self.partial.len() >= MAX_PARTIAL {
                    self.partial.remove(0);
                }
                self.partial.push(Partial { key, image: vec![0; size], ranges: Vec::new(), filled: 0 });
                self.partial.len() - 1
            }
        };
        let p = &mut self.partial[index];
        if p.ranges.contains(&(start, end)) {
            return Ok(None);
        }
        if p.ranges.iter().any(|&(s, e)| s < end && start < e) {
            self.partial.remove(index);
            return Err(FragError::Inconsistent);
        }
        p.image[start..end].copy_from_slice(bytes);
        p.ranges.push((start, end));
        p.filled += bytes.len();
        if p.filled < size {
            return Ok(None);
        }
        let done = self.partial.remove(index);
        let datagram = parse_uncompressed(&done.image)?;
        Ok(Some(Received { mac_src: key.mac_src, mac_dst: key.mac_dst, datagram }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(hops: usize, port: u16, len: usize) -> UdpDatagram {
        UdpDatagram::between(3, 4, hops, port, (0..len).map(|i| (i * 7) as u8).collect())
    }

    #[test]
    fn node_addresses_derive_from_the_eui64() {
        assert_eq!(node_address(3, Scope::LinkLocal), "fe80::5efa:0:3".parse::<Ipv6Addr>().unwrap());
        assert_eq!(node_address(0, Scope::Mesh), "fd00::5efa:0:0".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn neighbours_send_two_bytes_of_iphc_and_seven_of_udp() {
        let d = datagram(1, 5684, 10);
        let h = compress_headers(&d, &eui64(3), &eui64(4));
        // IPHC 011 11 1 10 | 0 0 11 0 0 11: both addresses elided, hop limit 64.
        assert_eq!(h[..2], [0x7E, 0x33]);
        // UDP NHC with both ports inline, then the checksum.
        assert_eq!(h[2], 0xF0);
        assert_eq!(h.len(), 9);
        assert_eq!(u16::from_be_bytes([h[7], h[8]]), d.udp_checksum());
        // Ports in 0xF0B0..0xF0BF go in one byte.
        assert_eq!(compress_headers(&datagram(1, 0xF0B1, 10), &eui64(3), &eui64(4)).len(), 6);
    }

    #[test]
    fn mesh_addresses_use_context_zero() {
        let d = datagram(2, 5684, 10);
        // On the first hop the source is the frame's own MAC address; the destination is not.
        let first_hop = compress_headers(&d, &eui64(3), &eui64(9));
        assert_eq!(first_hop[1], 0b0111_0101, "SAC=1 SAM=11, DAC=1 DAM=01");
        assert_eq!(first_hop.len(), 2 + 8 + 7);
        // A relay's hop carries both identifiers.
        assert_eq!(compressed_header_len(&d, 9, 10), 2 + 16 + 7);
    }

    #[test]
    fn checksum_verifies_over_the_uncompressed_datagram() {
        let bytes = datagram(2, 5684, 33).encode_ipv6();
        assert_eq!(parse_uncompressed(&bytes).unwrap(), datagram(2, 5684, 33));
        let mut bad = bytes.clone();
        bad[60] ^= 1;
        assert_eq!(parse_uncompressed(&bad), Err(FragError::BadChecksum));
    }

    #[test]
    fn every_size_round_trips_through_frames_and_the_reassembler() {
        for hops in [1, 2] {
            for len in (0..=MAX_PAYLOAD).step_by(7).chain([95, 96, 97, MAX_PAYLOAD]) {
                let d = datagram(hops, 5684, len);
                let (frames, stats) = frag::fragment(&d, 3, 4, 0, 0x1234, false).unwrap();
                assert_eq!(
                    stats.psdu_bytes,
                    stats.payload_bytes + stats.lowpan_header_bytes + stats.mac_overhead_bytes
                );
                let mut r = Reassembler::new();
                let mut got = None;
                for f in &frames {
                    assert!(got.is_none(), "completed before the last fragment");
                    got = r.push(f).unwrap();
                }
                let got = got.expect("complete");
                assert_eq!((got.mac_src, got.mac_dst), (eui64(3), eui64(4)));
                assert_eq!(got.datagram, d, "len {len}");
                assert_eq!(r.pending(), 0);
            }
        }
    }

    #[test]
    fn offsets_count_the_uncompressed_datagram() {
        let d = datagram(1, 5684, 300);
        let (frames, _) = frag::fragment(&d, 3, 4, 0, 7, false).unwrap();
        let payloads: Vec<&[u8]> = frames.iter().map(|f| &f[frag::DATA_MAC_HEADER..f.len() - 2]).collect();
        // FRAG1: size 348 (40 + 8 + 300), tag 7, 9 header bytes, then 88 payload bytes.
        assert_eq!(payloads[0][..4], [0xC1, 0x5C, 0, 7]);
        assert_eq!(payloads[0].len(), 4 + 9 + 88);
        // The first FRAGN starts at 48 + 88 = 136 bytes, offset 17.
        assert_eq!(payloads[1][..5], [0xE1, 0x5C, 0, 7, 17]);
        assert_eq!(payloads[1].len(), 5 + 96);
        assert_eq!(payloads[2][4], 29);
        assert_eq!(payloads[3][4], 41);
        assert_eq!(payloads[3].len(), 5 + 300 - 88 - 2 * 96);
    }

    #[test]
    fn repeats_are_ignored_and_overlaps_discard_the_datagram() {
        let d = datagram(1, 5684, 400);
        let (frames, _) = frag::fragment(&d, 3, 4, 0, 1, false).unwrap();
        let mut r = Reassembler::new();
        assert_eq!(r.push(&frames[0]), Ok(None));
        assert_eq!(r.push(&frames[0]), Ok(None), "a MAC retry");
        assert_eq!(r.push(&frames[1]), Ok(None));
        // Another datagram with the same tag and size whose FRAGN claims another offset.
        let mut overlapping = frames[2].clone();
        overlapping[frag::DATA_MAC_HEADER + 4] -= 1;
        let body = overlapping.len() - 2;
        let fcs = frag::fcs(&overlapping[..body]).to_le_bytes();
        overlapping[body..].copy_from_slice(&fcs);
        assert_eq!(r.push(&overlapping), Err(FragError::Inconsistent));
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn too_many_partial_datagrams_evict_the_oldest() {
        let mut r = Reassembler::new();
        let mut firsts = Vec::new();
        for tag in 0..=MAX_PARTIAL as u16 {
            let (frames, _) = frag::fragment(&datagram(1, 5684, 200), 3, 4, 0, tag, false).unwrap();
            assert_eq!(r.push(&frames[0]), Ok(None));
            firsts.push(frames);
        }
        assert_eq!(r.pending(), MAX_PARTIAL);
        // Tag 0 was evicted: its remaining fragments do not complete it.
        assert_eq!(r.push(&firsts[0][1]), Ok(None));
        assert_eq!(r.push(&firsts[0][2]), Ok(None));
        // The newest completes.
        let last = &firsts[MAX_PARTIAL];
        assert_eq!(r.push(&last[1]), Ok(None));
        assert!(r.push(&last[2]).unwrap().is_some());
    }

    #[test]
    fn datagrams_beyond_the_11_bit_size_are_refused() {
        let d = datagram(1, 5684, MAX_PAYLOAD + 1);
        assert_eq!(frag::fragment(&d, 3, 4, 0, 0, false), Err(FragError::TooLarge(MAX_DATAGRAM + 1)));
    }
}
