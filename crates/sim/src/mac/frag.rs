//! 6LoWPAN-like fragmentation of datagrams into IEEE 802.15.4 frames (RFC 4944 framing).
//!
//! Frame format (stated, fixed):
//! - MAC header, 21 bytes: frame control (2), sequence number (1), destination PAN (2),
//!   destination and source EUI-64 addresses (8 + 8), PAN ID compression on, no security.
//!   Node `n` has the EUI-64 `02:00:00:00:nn:nn:nn:nn` (its id, big-endian, in the low 4 bytes).
//! - FCS, 2 bytes (CRC-16/KERMIT as IEEE 802.15.4 §7.2.10 specifies).
//!
//! So 23 bytes of MAC overhead, and at most 104 bytes of MAC payload per 127-byte frame.
//! The datagram travels verbatim behind the 6LoWPAN header: no IPHC header compression is
//! assumed, so the figures are an upper bound on what a compressing stack sends. The dispatch
//! always says IPv6 (6LoWPAN has none for IPv4), so Wireshark flags the simulator's IPv4
//! datagrams as "bogus IPv6 version" inside otherwise well-formed frames; sizes are unaffected.
//! - A datagram of up to 103 bytes goes in one frame, behind the 1-byte uncompressed IPv6
//!   dispatch (0x41).
//! - A larger one is split: FRAG1 header (4 bytes: `11000`, datagram_size, datagram_tag), the
//!   dispatch byte, then 96 bytes; each FRAGN (5 bytes: `11100`, size, tag, datagram_offset in
//!   8-byte units) carries 96 bytes, the last one the rest (up to 99). Offsets and
//!   `datagram_size` count datagram bytes, as in RFC 4944 §5.3.
//! - datagram_size is 11 bits: datagrams over 2047 bytes cannot be sent.

use super::phy::MAX_PSDU;
use super::NodeId;
use serde::Serialize;

/// MAC header of a data frame.
pub const DATA_MAC_HEADER: usize = 21;
/// Frame check sequence.
pub const FCS_LEN: usize = 2;
/// MAC payload room in one frame.
pub const MAX_MAC_PAYLOAD: usize = MAX_PSDU - DATA_MAC_HEADER - FCS_LEN;
/// Uncompressed IPv6 dispatch (RFC 4944 §5.1).
pub const DISPATCH_IPV6: u8 = 0x41;
/// FRAG1 header length.
pub const FRAG1_HEADER: usize = 4;
/// FRAGN header length.
pub const FRAGN_HEADER: usize = 5;
/// Largest datagram the 11-bit datagram_size can describe.
pub const MAX_DATAGRAM: usize = 2047;
/// Largest datagram sent unfragmented.
pub const MAX_UNFRAGMENTED: usize = MAX_MAC_PAYLOAD - 1;
/// Datagram bytes per FRAG1 and per non-final FRAGN (a multiple of 8).
pub const FRAGMENT_CHUNK: usize = (MAX_MAC_PAYLOAD - FRAGN_HEADER) / 8 * 8;

/// PSDU of an X-MAC strobe or early acknowledgement: a data-type MAC header with both EUI-64
/// addresses (the receiver's is what a sampling node checks), no payload, FCS.
pub const STROBE_PSDU: usize = DATA_MAC_HEADER + FCS_LEN;
/// PSDU of an immediate acknowledgement: frame control, sequence number, FCS.
pub const ACK_PSDU: usize = 5;
/// PSDU of a beacon: frame control, sequence, source PAN, source EUI-64, superframe
/// specification (2), GTS (1), pending addresses (1), FCS.
pub const BEACON_PSDU: usize = 2 + 1 + 2 + 8 + 2 + 1 + 1 + FCS_LEN;

const PAN_ID: u16 = 0xFA57;

/// Frames and bytes per layer for one datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FragStats {
    /// Frames the datagram needs.
    pub frames: usize,
    /// Datagram (network-layer) bytes.
    pub datagram_bytes: usize,
    /// 6LoWPAN dispatch and fragment header bytes.
    pub lowpan_header_bytes: usize,
    /// MAC header and FCS bytes.
    pub mac_overhead_bytes: usize,
    /// Sum of the PSDUs.
    pub psdu_bytes: usize,
}

impl FragStats {
    /// Adds another datagram's figures.
    pub fn add(&mut self, other: &FragStats) {
        self.frames += other.frames;
        self.datagram_bytes += other.datagram_bytes;
        self.lowpan_header_bytes += other.lowpan_header_bytes;
        self.mac_overhead_bytes += other.mac_overhead_bytes;
        self.psdu_bytes += other.psdu_bytes;
    }
}

/// Why a datagram cannot be fragmented or a frame cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragError {
    /// The datagram is larger than the 11-bit datagram_size allows.
    #[error("datagram of {0} bytes exceeds the 6LoWPAN limit of 2047")]
    TooLarge(usize),
    /// The frame is shorter than its headers.
    #[error("frame truncated")]
    Truncated,
    /// The frame check sequence does not match.
    #[error("bad FCS")]
    BadFcs,
    /// The MAC payload starts with a dispatch this code does not produce.
    #[error("unknown 6LoWPAN dispatch 0x{0:02x}")]
    UnknownDispatch(u8),
    /// Fragments disagree with each other or overlap.
    #[error("inconsistent fragments")]
    Inconsistent,
}

/// The EUI-64 of a node.
pub fn eui64(node: NodeId) -> [u8; 8] {
    let low = (node as u64 & 0xFFFF_FFFF) as u32;
    let mut a = [0x02, 0, 0, 0, 0, 0, 0, 0];
    a[4..].copy_from_slice(&low.to_be_bytes());
    a
}

/// CRC-16/KERMIT (the IEEE 802.15.4 FCS): polynomial x^16 + x^12 + x^5 + 1, reflected, zero init.
pub fn fcs(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x8408 } else { crc >> 1 };
        }
    }
    crc
}

fn push_fcs(frame: &mut Vec<u8>) {
    let c = fcs(frame);
    frame.extend_from_slice(&c.to_le_bytes());
}

/// Little-endian EUI-64 as it goes on the air.
fn push_addr(frame: &mut Vec<u8>, node: NodeId) {
    let mut a = eui64(node);
    a.reverse();
    frame.extend_from_slice(&a);
}

/// MAC header of a data frame (also strobes): type data, PAN ID compression, extended addresses.
fn data_header(frame: &mut Vec<u8>, seq: u8, from: NodeId, to: NodeId, ack_request: bool) {
    // frame type 001, ack request bit 5, PAN ID compression bit 6, dst mode 11, version 0, src mode 11
    let mut fc: u16 = 0b001 | (1 << 6) | (0b11 << 10) | (0b11 << 14);
    if ack_request {
        fc |= 1 << 5;
    }
    frame.extend_from_slice(&fc.to_le_bytes());
    frame.push(seq);
    frame.extend_from_slice(&PAN_ID.to_le_bytes());
    push_addr(frame, to);
    push_addr(frame, from);
}

/// The PSDUs of `datagram` from `from` to `to`, with MAC sequence numbers from `seq` on and the
/// 6LoWPAN `tag` if it needs fragments.
pub fn fragment(
    datagram: &[u8],
    from: NodeId,
    to: NodeId,
    seq: u8,
    tag: u16,
    ack_request: bool,
) -> Result<(Vec<Vec<u8>>, FragStats), FragError> {
    let len = datagram.len();
    if len > MAX_DATAGRAM {
        return Err(FragError::TooLarge(len));
    }
    let mut frames = Vec::new();
    let mut stats = FragStats { datagram_bytes: len, ..FragStats::default() };
    let mut seq = seq;
    let new_frame = |seq: &mut u8| {
        let mut f = Vec::with_capacity(MAX_PSDU);
        data_header(&mut f, *seq, from, to, ack_request);
        *seq = seq.wrapping_add(1);
        f
    };
    if len <= MAX_UNFRAGMENTED {
        let mut f = new_frame(&mut seq);
        f.push(DISPATCH_IPV6);
        f.extend_from_slice(datagram);
        stats.lowpan_header_bytes += 1;
        frames.push(f);
    } else {
        let size = len as u16; // <= 2047
        let mut offset = 0usize;
        while offset < len {
            let mut f = new_frame(&mut seq);
            let chunk = if offset == 0 {
                f.extend_from_slice(&(0xC000 | size).to_be_bytes());
                f.extend_from_slice(&tag.to_be_bytes());
                f.push(DISPATCH_IPV6);
                stats.lowpan_header_bytes += FRAG1_HEADER + 1;
                FRAGMENT_CHUNK
            } else {
                f.extend_from_slice(&(0xE000 | size).to_be_bytes());
                f.extend_from_slice(&tag.to_be_bytes());
                f.push((offset / 8) as u8); // offset <= 2047 so offset/8 < 256
                stats.lowpan_header_bytes += FRAGN_HEADER;
                let room = MAX_MAC_PAYLOAD - FRAGN_HEADER;
                if len - offset <= room {
                    room
                } else {
                    FRAGMENT_CHUNK
                }
            };
            let end = (offset + chunk).min(len);
            f.extend_from_slice(&datagram[offset..end]);
            offset = end;
            frames.push(f);
        }
    }
    for f in &mut frames {
        push_fcs(f);
        stats.mac_overhead_bytes += DATA_MAC_HEADER + FCS_LEN;
        stats.psdu_bytes += f.len();
    }
    stats.frames = frames.len();
    Ok((frames, stats))
}

/// An X-MAC strobe (or, from the receiver, early acknowledgement).
pub fn strobe_frame(seq: u8, from: NodeId, to: NodeId) -> Vec<u8> {
    let mut f = Vec::with_capacity(STROBE_PSDU);
    data_header(&mut f, seq, from, to, false);
    push_fcs(&mut f);
    f
}

/// An immediate acknowledgement of the frame with sequence number `seq`.
pub fn ack_frame(seq: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0x00, seq];
    push_fcs(&mut f);
    f
}

/// A beacon from coordinator `from` with beacon order `bo` and superframe order `so`.
pub fn beacon_frame(seq: u8, from: NodeId, bo: u8, so: u8) -> Vec<u8> {
    // frame type beacon (000), src mode extended, no dst
    let fc: u16 = 0b11 << 14;
    let mut f = Vec::with_capacity(BEACON_PSDU);
    f.extend_from_slice(&fc.to_le_bytes());
    f.push(seq);
    f.extend_from_slice(&PAN_ID.to_le_bytes());
    push_addr(&mut f, from);
    // superframe spec: BO, SO, final CAP slot 15, PAN coordinator, association permit
    let spec: u16 = u16::from(bo & 0xF) | (u16::from(so & 0xF) << 4) | (0xF << 8) | (1 << 15);
    f.extend_from_slice(&spec.to_le_bytes());
    f.push(0); // GTS specification: none
    f.push(0); // pending addresses: none
    push_fcs(&mut f);
    f
}

/// Rebuilds a datagram from the PSDUs `fragment` produced (checks FCS and headers). Used to
/// check the framing; the models count frames, they do not reassemble.
pub fn reassemble(frames: &[Vec<u8>]) -> Result<Vec<u8>, FragError> {
    let mut out: Vec<u8> = Vec::new();
    let mut expected_size: Option<usize> = None;
    for frame in frames {
        let body_len = frame.len().checked_sub(FCS_LEN).ok_or(FragError::Truncated)?;
        let (body, fcs_bytes) = frame.split_at(body_len);
        if fcs(body).to_le_bytes() != [fcs_bytes[0], fcs_bytes[1]] {
            return Err(FragError::BadFcs);
        }
        let payload = body.get(DATA_MAC_HEADER..).ok_or(FragError::Truncated)?;
        let first = *payload.first().ok_or(FragError::Truncated)?;
        match first {
            DISPATCH_IPV6 if frames.len() == 1 => return Ok(payload[1..].to_vec()),
            b if b & 0xF8 == 0xC0 => {
                let h = payload.get(..FRAG1_HEADER + 1).ok_or(FragError::Truncated)?;
                if h[4] != DISPATCH_IPV6 || !out.is_empty() {
                    return Err(FragError::Inconsistent);
                }
                expected_size = Some(usize::from(u16::from_be_bytes([h[0], h[1]]) & 0x07FF));
                out.extend_from_slice(&payload[FRAG1_HEADER + 1..]);
            }
            b if b & 0xF8 == 0xE0 => {
                let h = payload.get(..FRAGN_HEADER).ok_or(FragError::Truncated)?;
                let size = usize::from(u16::from_be_bytes([h[0], h[1]]) & 0x07FF);
                if Some(size) != expected_size || usize::from(h[4]) * 8 != out.len() {
                    return Err(FragError::Inconsistent);
                }
                out.extend_from_slice(&payload[FRAGN_HEADER..]);
            }
            other => return Err(FragError::UnknownDispatch(other)),
        }
    }
    match expected_size {
        Some(size) if size == out.len() => Ok(out),
        _ => Err(FragError::Inconsistent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_datagram_is_one_frame() {
        let d = vec![7u8; MAX_UNFRAGMENTED];
        let (frames, st) = fragment(&d, 1, 2, 9, 0, false).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].len(), MAX_PSDU);
        assert_eq!(st.psdu_bytes, MAX_PSDU);
        assert_eq!(st.lowpan_header_bytes, 1);
        assert_eq!(reassemble(&frames).unwrap(), d);
    }

    #[test]
    fn large_datagram_round_trips_through_frag1_and_fragn() {
        for len in [MAX_UNFRAGMENTED + 1, 200, 291, 292, 1280, MAX_DATAGRAM] {
            let d: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let (frames, st) = fragment(&d, 3, 4, 250, 0xBEEF, true).unwrap();
            assert!(frames.iter().all(|f| f.len() <= MAX_PSDU), "len {len}");
            assert_eq!(st.frames, frames.len());
            assert_eq!(st.psdu_bytes, frames.iter().map(Vec::len).sum::<usize>());
            assert_eq!(st.psdu_bytes, st.datagram_bytes + st.lowpan_header_bytes + st.mac_overhead_bytes);
            assert_eq!(reassemble(&frames).unwrap(), d, "len {len}");
        }
        assert_eq!(fragment(&[0; 2048], 1, 2, 0, 0, false), Err(FragError::TooLarge(2048)));
    }

    #[test]
    fn fcs_matches_the_standard_check_value() {
        // CRC-16/KERMIT of "123456789" is 0x2189.
        assert_eq!(fcs(b"123456789"), 0x2189);
        let mut f = strobe_frame(1, 1, 2);
        assert_eq!(f.len(), STROBE_PSDU);
        assert_eq!(ack_frame(3).len(), ACK_PSDU);
        assert_eq!(beacon_frame(0, 1, 6, 2).len(), BEACON_PSDU);
        f[3] ^= 1;
        assert_eq!(reassemble(&[f]), Err(FragError::BadFcs));
    }
}
