//! IEEE 802.15.4 O-QPSK PHY at 2.4 GHz: timing constants and frame air times.

/// One symbol: 62.5 ksymbol/s.
pub const SYMBOL_NS: u64 = 16_000;
/// One byte: 250 kbit/s.
pub const BYTE_NS: u64 = 32_000;
/// Synchronisation header (4-byte preamble, SFD) and PHR in front of every PSDU.
pub const PHY_HEADER_BYTES: usize = 6;
/// aMaxPHYPacketSize: the largest PSDU.
pub const MAX_PSDU: usize = 127;
/// aTurnaroundTime: 12 symbols between receiving and transmitting.
pub const TURNAROUND_NS: u64 = 12 * SYMBOL_NS;
/// aUnitBackoffPeriod: 20 symbols.
pub const BACKOFF_PERIOD_NS: u64 = 20 * SYMBOL_NS;
/// CCA detection time: 8 symbols.
pub const CCA_NS: u64 = 8 * SYMBOL_NS;
/// macAckWaitDuration for the 2.4 GHz PHY: 54 symbols.
pub const ACK_WAIT_NS: u64 = 54 * SYMBOL_NS;
/// aMaxSIFSFrameSize: frames up to this size are followed by a SIFS, longer ones by a LIFS.
pub const MAX_SIFS_FRAME: usize = 18;
/// macSIFSPeriod: 12 symbols.
pub const SIFS_NS: u64 = 12 * SYMBOL_NS;
/// macLIFSPeriod: 40 symbols.
pub const LIFS_NS: u64 = 40 * SYMBOL_NS;
/// aBaseSuperframeDuration: 960 symbols (15.36 ms).
pub const BASE_SUPERFRAME_NS: u64 = 960 * SYMBOL_NS;

/// Time on the air of a PSDU of `psdu_len` bytes, PHY header included.
pub const fn airtime_ns(psdu_len: usize) -> u64 {
    (psdu_len + PHY_HEADER_BYTES) as u64 * BYTE_NS
}

/// The interframe space that must follow a frame of `psdu_len` bytes.
pub const fn ifs_ns(psdu_len: usize) -> u64 {
    if psdu_len > MAX_SIFS_FRAME {
        LIFS_NS
    } else {
        SIFS_NS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_frame_takes_4256_microseconds() {
        assert_eq!(airtime_ns(MAX_PSDU), 4_256_000);
        assert_eq!(BASE_SUPERFRAME_NS, 15_360_000);
    }
}
