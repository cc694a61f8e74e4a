//! IEEE 802.15.4 frames: the data frames that carry 6LoWPAN ([`super::sixlowpan`]), X-MAC
//! strobes, acknowledgements and beacons, as the MAC models put them on the air.
//!
//! Frame format (stated, fixed):
//! - MAC header, 21 bytes: frame control (2), sequence number (1), destination PAN (2),
//!   destination and source EUI-64 addresses (8 + 8), PAN ID compression on, no security.
//!   Node `n` has the EUI-64 [`eui64`]`(n)`.
//! - FCS, 2 bytes (CRC-16/KERMIT as IEEE 802.15.4 §7.2.10 specifies).
//!
//! So 23 bytes of MAC overhead, and at most 104 bytes of MAC payload per 127-byte frame, which
//! [`fragment`] fills with the RFC 6282 compressed IPv6/UDP headers and the payload, cut into
//! RFC 4944 fragments when one frame is not enough.

use super::phy::MAX_PSDU;
use super::sixlowpan::{self, UdpDatagram};
use super::NodeId;
use serde::Serialize;

/// MAC header of a data frame.
pub const DATA_MAC_HEADER: usize = 21;
/// Frame check sequence.
pub const FCS_LEN: usize = 2;
/// MAC payload room in one frame.
pub const MAX_MAC_PAYLOAD: usize = MAX_PSDU - DATA_MAC_HEADER - FCS_LEN;
pub use super::sixlowpan::{eui64, FRAG1_HEADER, FRAGN_HEADER, MAX_DATAGRAM};

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
    /// Bytes of the uncompressed IPv6 datagram (RFC 4944's datagram_size).
    pub datagram_bytes: usize,
    /// UDP payload bytes.
    pub payload_bytes: usize,
    /// 6LoWPAN bytes: compressed IPv6 and UDP headers (RFC 6282) and fragment headers.
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
        self.payload_bytes += other.payload_bytes;
        self.lowpan_header_bytes += other.lowpan_header_bytes;
        self.mac_overhead_bytes += other.mac_overhead_bytes;
        self.psdu_bytes += other.psdu_bytes;
    }
}

/// Why a datagram cannot be fragmented or a frame cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragError {
    /// The uncompressed datagram is larger than the 11-bit datagram_size allows.
    #[error("IPv6 datagram of {0} bytes exceeds the 6LoWPAN limit of 2047")]
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
    /// Fragments disagree with each other or overlap, or headers disagree with the length.
    #[error("inconsistent fragments")]
    Inconsistent,
    /// A MAC header or 6LoWPAN encoding this code does not produce.
    #[error("unsupported encoding: {0}")]
    Unsupported(&'static str),
    /// The UDP checksum of the reassembled datagram does not verify.
    #[error("bad UDP checksum")]
    BadChecksum,
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
fn push_addr(frame: &mut Vec<u8>, eui: &[u8; 8]) {
    let mut a = *eui;
    a.reverse();
    frame.extend_from_slice(&a);
}

/// Frame control of a data frame: type 001, ack request bit 5, PAN ID compression bit 6,
/// destination mode 11, version 0, source mode 11.
fn data_frame_control(ack_request: bool) -> u16 {
    0b001 | (u16::from(ack_request) << 5) | (1 << 6) | (0b11 << 10) | (0b11 << 14)
}

/// MAC header of a data frame (also strobes): type data, PAN ID compression, extended addresses.
fn data_header(frame: &mut Vec<u8>, seq: u8, src: &[u8; 8], dst: &[u8; 8], ack_request: bool) {
    let fc = data_frame_control(ack_request);
    frame.extend_from_slice(&fc.to_le_bytes());
    frame.push(seq);
    frame.extend_from_slice(&PAN_ID.to_le_bytes());
    push_addr(frame, dst);
    push_addr(frame, src);
}

/// The PSDU of a data frame from MAC address `src` to `dst` carrying `payload` (6LoWPAN bytes).
pub fn data_frame(seq: u8, src: &[u8; 8], dst: &[u8; 8], ack_request: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(DATA_MAC_HEADER + payload.len() + FCS_LEN);
    data_header(&mut f, seq, src, dst, ack_request);
    f.extend_from_slice(payload);
    push_fcs(&mut f);
    f
}

/// The PSDUs of `datagram` from `from` to `to`, with MAC sequence numbers from `seq` on and the
/// 6LoWPAN `tag` if it needs fragments.
pub fn fragment(
    datagram: &UdpDatagram,
    from: NodeId,
    to: NodeId,
    seq: u8,
    tag: u16,
    ack_request: bool,
) -> Result<(Vec<Vec<u8>>, FragStats), FragError> {
    let (payloads, lowpan_header_bytes) =
        sixlowpan::encode(datagram, &eui64(from), &eui64(to), tag, MAX_MAC_PAYLOAD)?;
    let mut stats = FragStats {
        frames: payloads.len(),
        datagram_bytes: datagram.ipv6_len(),
        payload_bytes: datagram.payload.len(),
        lowpan_header_bytes,
        ..FragStats::default()
    };
    let mut frames = Vec::with_capacity(payloads.len());
    for (i, payload) in payloads.iter().enumerate() {
        let f = data_frame(seq.wrapping_add(i as u8), &eui64(from), &eui64(to), ack_request, payload);
        stats.mac_overhead_bytes += DATA_MAC_HEADER + FCS_LEN;
        stats.psdu_bytes += f.len();
        frames.push(f);
    }
    Ok((frames, stats))
}

/// A data frame's addresses and MAC payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFrame<'a> {
    /// The transmitter's EUI-64.
    pub src: [u8; 8],
    /// The receiver's EUI-64.
    pub dst: [u8; 8],
    /// The MAC payload (the 6LoWPAN bytes).
    pub payload: &'a [u8],
}

/// Reads a data frame as [`fragment`] builds them (FCS checked); any other frame is refused.
pub fn parse_data_frame(psdu: &[u8]) -> Result<DataFrame<'_>, FragError> {
    let body_len = psdu.len().checked_sub(FCS_LEN).ok_or(FragError::Truncated)?;
    let (body, fcs_bytes) = psdu.split_at(body_len);
    if fcs(body).to_le_bytes() != [fcs_bytes[0], fcs_bytes[1]] {
        return Err(FragError::BadFcs);
    }
    let header = body.get(..DATA_MAC_HEADER).ok_or(FragError::Truncated)?;
    let fc = u16::from_le_bytes([header[0], header[1]]) & !(1 << 5); // any ack request
    if fc != data_frame_control(false) {
        return Err(FragError::Unsupported("MAC frame other than a data frame with EUI-64 addresses"));
    }
    let address = |at: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&header[at..at + 8]);
        a.reverse();
        a
    };
    Ok(DataFrame { dst: address(5), src: address(13), payload: &body[DATA_MAC_HEADER..] })
}

/// An X-MAC strobe (or, from the receiver, early acknowledgement).
pub fn strobe_frame(seq: u8, from: NodeId, to: NodeId) -> Vec<u8> {
    let mut f = Vec::with_capacity(STROBE_PSDU);
    data_header(&mut f, seq, &eui64(from), &eui64(to), false);
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
    push_addr(&mut f, &eui64(from));
    // superframe spec: BO, SO, final CAP slot 15, PAN coordinator, association permit
    let spec: u16 = u16::from(bo & 0xF) | (u16::from(so & 0xF) << 4) | (0xF << 8) | (1 << 15);
    f.extend_from_slice(&spec.to_le_bytes());
    f.push(0); // GTS specification: none
    f.push(0); // pending addresses: none
    push_fcs(&mut f);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mac::sixlowpan::Reassembler;

    #[test]
    fn a_datagram_that_fits_fills_one_frame() {
        // 104 bytes of MAC payload: 9 bytes of IPHC and UDP NHC between neighbours, 95 of payload.
        let d = UdpDatagram::between(1, 2, 1, 5684, vec![7u8; MAX_MAC_PAYLOAD - 9]);
        let (frames, st) = fragment(&d, 1, 2, 9, 0, false).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].len(), MAX_PSDU);
        assert_eq!(st.psdu_bytes, MAX_PSDU);
        assert_eq!(st.lowpan_header_bytes, 9);
        assert_eq!(st.datagram_bytes, 48 + 95);
        let one_more = UdpDatagram::between(1, 2, 1, 5684, vec![7u8; MAX_MAC_PAYLOAD - 8]);
        assert_eq!(fragment(&one_more, 1, 2, 9, 0, false).unwrap().1.frames, 2);
        let frame = parse_data_frame(&frames[0]).unwrap();
        assert_eq!((frame.src, frame.dst), (eui64(1), eui64(2)));
        assert_eq!(Reassembler::new().push(&frames[0]).unwrap().unwrap().datagram, d);
    }

    #[test]
    fn fcs_matches_the_standard_check_value() {
        // CRC-16/KERMIT of "123456789" is 0x2189.
        assert_eq!(fcs(b"123456789"), 0x2189);
        let mut f = strobe_frame(1, 1, 2);
        assert_eq!(f.len(), STROBE_PSDU);
        assert_eq!(ack_frame(3).len(), ACK_PSDU);
        assert_eq!(beacon_frame(0, 1, 6, 2).len(), BEACON_PSDU);
        assert_eq!(parse_data_frame(&ack_frame(3)), Err(FragError::Truncated));
        assert_eq!(parse_data_frame(&f).unwrap().payload, b"", "a strobe is an empty data frame");
        let mut beacon_sized = beacon_frame(0, 1, 6, 2);
        beacon_sized.splice(3..3, [0u8; 8]);
        let body = beacon_sized.len() - 2;
        let c = fcs(&beacon_sized[..body]).to_le_bytes();
        beacon_sized[body..].copy_from_slice(&c);
        assert!(matches!(parse_data_frame(&beacon_sized), Err(FragError::Unsupported(_))));
        f[3] ^= 1;
        assert_eq!(parse_data_frame(&f), Err(FragError::BadFcs));
    }
}
