//! Property tests of the wire codec: every packet the codec can express encodes to bytes that
//! parse back to the same packet, with a valid CRC32c and 4-byte alignment.

use fastshake_sctp::packet::{
    self, Chunk, DataChunk, ErrorCause, ForwardTsnChunk, InitChunk, Packet, Param, SackChunk,
};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn param() -> impl Strategy<Value = Param> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|b| Param::Ipv4Address(b.into())),
        any::<[u8; 16]>().prop_map(|b| Param::Ipv6Address(b.into())),
        bytes(80).prop_map(Param::StateCookie),
        bytes(20).prop_map(Param::UnrecognizedParameter),
        any::<u32>().prop_map(Param::CookiePreservative),
        proptest::collection::vec(any::<u16>(), 0..4).prop_map(Param::SupportedAddressTypes),
        bytes(40).prop_map(Param::AltCookie),
        bytes(60).prop_map(Param::AltData),
        bytes(30).prop_map(Param::AltSack),
        Just(Param::ForwardTsnSupported),
        (any::<u16>(), bytes(30))
            .prop_filter("known types have typed variants", |(t, _)| {
                ![5u16, 6, 7, 8, 9, 12, 0x8008, 0xC000, 0xB007, 0xB008, 0xB009].contains(t)
            })
            .prop_map(|(param_type, value)| Param::Unknown { param_type, value }),
    ]
}

fn cause() -> impl Strategy<Value = ErrorCause> {
    prop_oneof![
        any::<u16>().prop_map(|stream| ErrorCause::InvalidStream { stream }),
        any::<u32>().prop_map(|staleness_us| ErrorCause::StaleCookie { staleness_us }),
        bytes(20).prop_map(ErrorCause::UnrecognizedChunk),
        bytes(20).prop_map(ErrorCause::UnrecognizedParameters),
        any::<u32>().prop_map(|tsn| ErrorCause::NoUserData { tsn }),
        bytes(20).prop_map(ErrorCause::UserAbort),
        bytes(20).prop_map(ErrorCause::ProtocolViolation),
        bytes(20).prop_map(ErrorCause::AltCookieRequired),
        (any::<u16>(), bytes(20))
            .prop_filter("known codes have typed variants", |(c, _)| ![1u16, 3, 6, 8, 9, 12, 13, 0xB007]
                .contains(c))
            .prop_map(|(code, value)| ErrorCause::Other { code, value }),
    ]
}

fn init() -> impl Strategy<Value = InitChunk> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        proptest::collection::vec(param(), 0..6),
    )
        .prop_map(|(initiate_tag, a_rwnd, outbound_streams, inbound_streams, initial_tsn, params)| {
            InitChunk { initiate_tag, a_rwnd, outbound_streams, inbound_streams, initial_tsn, params }
        })
}

fn chunk() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        (
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            any::<[bool; 4]>(),
            proptest::collection::vec(any::<u8>(), 1..100)
        )
            .prop_map(|(tsn, stream, ssn, ppid, f, data)| Chunk::Data(DataChunk {
                tsn,
                stream,
                ssn,
                ppid,
                unordered: f[0],
                beginning: f[1],
                ending: f[2],
                immediate: f[3],
                data
            })),
        init().prop_map(Chunk::Init),
        init().prop_map(Chunk::InitAck),
        (
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(any::<(u16, u16)>(), 0..5),
            proptest::collection::vec(any::<u32>(), 0..5)
        )
            .prop_map(|(cumulative_tsn_ack, a_rwnd, gap_blocks, duplicate_tsns)| Chunk::Sack(
                SackChunk { cumulative_tsn_ack, a_rwnd, gap_blocks, duplicate_tsns }
            )),
        bytes(40).prop_map(Chunk::Heartbeat),
        bytes(40).prop_map(Chunk::HeartbeatAck),
        (any::<bool>(), proptest::collection::vec(cause(), 0..3))
            .prop_map(|(t_bit, causes)| Chunk::Abort { t_bit, causes }),
        any::<u32>().prop_map(|cumulative_tsn_ack| Chunk::Shutdown { cumulative_tsn_ack }),
        Just(Chunk::ShutdownAck),
        proptest::collection::vec(cause(), 0..3).prop_map(|causes| Chunk::Error { causes }),
        bytes(60).prop_map(Chunk::CookieEcho),
        Just(Chunk::CookieAck),
        (any::<u32>(), proptest::collection::vec(any::<(u16, u16)>(), 0..6)).prop_map(
            |(new_cumulative_tsn, streams)| Chunk::ForwardTsn(ForwardTsnChunk {
                new_cumulative_tsn,
                streams
            })
        ),
        any::<bool>().prop_map(|t_bit| Chunk::ShutdownComplete { t_bit }),
        (any::<u8>(), any::<u8>(), bytes(30))
            .prop_filter("known types have typed variants", |(t, _, _)| !matches!(t, 0..=11 | 14 | 130 | 192))
            .prop_map(|(chunk_type, flags, value)| Chunk::Unknown { chunk_type, flags, value }),
    ]
}

proptest! {
    // A fixed seed: the same cases on every run and machine.
    #![proptest_config(ProptestConfig {
        cases: 400,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5c7_0004),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn packets_round_trip(src in any::<u16>(), dst in any::<u16>(), tag in any::<u32>(), chunks in proptest::collection::vec(chunk(), 0..5)) {
        let p = Packet { src_port: src, dst_port: dst, verification_tag: tag, chunks };
        let bytes = p.encode();
        prop_assert_eq!(bytes.len(), p.encoded_len());
        prop_assert_eq!(bytes.len() % 4, 0);
        prop_assert!(packet::checksum_ok(&bytes));
        prop_assert_eq!(Packet::parse(&bytes).unwrap(), p);
    }

    #[test]
    fn truncated_packets_are_errors_not_panics(chunks in proptest::collection::vec(chunk(), 1..4), cut in any::<prop::sample::Index>()) {
        let p = Packet { src_port: 1, dst_port: 2, verification_tag: 3, chunks };
        let bytes = p.encode();
        let cut = cut.index(bytes.len());
        let _ = Packet::parse_unchecked(&bytes[..cut]);
        let _ = Packet::parse(&bytes[..cut]);
    }
}
