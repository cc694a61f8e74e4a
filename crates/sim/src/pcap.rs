//! Capture of the simulated traffic in pcap files, readable by Wireshark and tshark.
//!
//! Datagrams: one pcap with link type RAW (101): every record is an IPv4 packet with a UDP
//! header synthesised from the simulated addresses (correct lengths, IP and UDP checksums).
//! A record is written each time a datagram is put on a link, at that virtual time, so a
//! datagram crossing three links appears three times (with the TTL going down and NAT rewrites
//! visible), and a datagram the link then loses still appears once for that link.
//!
//! Frames: where a MAC model splits datagrams into IEEE 802.15.4 frames, those frames go to a
//! second pcap with link type IEEE802_15_4_WITHFCS (195): each record is the PSDU the MAC model
//! built (MAC header, payload, FCS), stamped with the start of each frame on
//! the air; frames that were not received are written too.
//!
//! Timestamps are nanosecond-resolution virtual time since the start of the run (the files
//! therefore start on 1 January 1970). Files are big-endian so the bytes are identical on
//! every machine.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::time::Duration;

/// A pcap being written into memory.
pub struct PcapSink {
    writer: PcapWriter<Vec<u8>>,
    records: u64,
}

impl std::fmt::Debug for PcapSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapSink").field("records", &self.records).finish_non_exhaustive()
    }
}

impl PcapSink {
    /// A capture of raw IPv4 packets.
    pub fn ipv4() -> Self {
        Self::with_link_type(DataLink::RAW)
    }

    /// A capture of IEEE 802.15.4 frames with their FCS.
    pub fn ieee802154() -> Self {
        Self::with_link_type(DataLink::IEEE802_15_4)
    }

    fn with_link_type(datalink: DataLink) -> Self {
        let header = PcapHeader {
            datalink,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Big,
            snaplen: 65535,
            ..PcapHeader::default()
        };
        // Writing into a Vec cannot fail.
        let writer = PcapWriter::with_header(Vec::new(), header).expect("writing to memory");
        PcapSink { writer, records: 0 }
    }

    /// Appends one record at virtual time `at_ns`.
    pub fn record(&mut self, at_ns: u64, data: &[u8]) {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let packet = PcapPacket::new(Duration::from_nanos(at_ns), len, data);
        // Writing into a Vec cannot fail; a record above the snap length is simply skipped.
        if self.writer.write_packet(&packet).is_ok() {
            self.records += 1;
        }
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The whole file.
    pub fn into_bytes(self) -> Vec<u8> {
        self.writer.into_writer()
    }
}
