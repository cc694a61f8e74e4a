//! A record carries at most 2^14 bytes of content, whatever the MTU (RFC 6347 §4.1 with
//! RFC 5246 §6.2.1; RFC 9147 §4 with RFC 8446 §5.1): with MTUs above that, data and handshake
//! flights are cut into records within the limit, and arrive whole, once, in order. Oversized
//! records from a peer are refused as the RFCs say (the authenticated ones, which only the
//! engine's own unit tests can seal, end the session with record_overflow there).

use fastshake_dtls::{
    CertificateCompression, ClientConfig, Error, Event, Instant, ServerConfig, TrustAnchors, Versions,
    WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::Dir;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const MAX_PLAINTEXT: usize = 1 << 14;
/// The user's report: a client at 20,000 bytes, a server at the largest UDP payload over IPv4.
const CLIENT_MTU: usize = 20_000;
const SERVER_MTU: usize = 65_507;
const PKI_TIME: u64 = 1_800_000_000;
const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn psk_pair(versions: Versions) -> Pair {
    Pair::new(
        ClientConfig { versions, mtu: CLIENT_MTU, ..client_config() },
        ServerConfig { versions, mtu: SERVER_MTU, ..server_config() },
    )
}

/// The body length of every record of `datagram`, read here from the RFCs' layouts: the DTLS
/// 1.2 header (RFC 6347 §4.1, length in bytes 11 and 12) or DTLS 1.3's unified header
/// (RFC 9147 §4: `001CSLEE`, no CID in these tests).
fn record_bodies(datagram: &[u8]) -> Vec<usize> {
    let mut bodies = Vec::new();
    let mut at = 0;
    while at < datagram.len() {
        let first = datagram[at];
        if first & 0b1110_0000 == 0b0010_0000 {
            assert_eq!(first & 0b0001_0000, 0, "no CID");
            let mut p = at + 1 + if first & 0b0000_1000 != 0 { 2 } else { 1 };
            let len = if first & 0b0000_0100 != 0 {
                p += 2;
                usize::from(u16::from_be_bytes([datagram[p - 2], datagram[p - 1]]))
            } else {
                datagram.len() - p
            };
            bodies.push(len);
            at = p + len;
        } else {
            let len = usize::from(u16::from_be_bytes([datagram[at + 11], datagram[at + 12]]));
            bodies.push(len);
            at += 13 + len;
        }
    }
    assert_eq!(at, datagram.len(), "records end where the datagram does");
    bodies
}

/// The largest record body `versions` may send with our suites: 2^14 bytes of content, plus an
/// 8-byte explicit nonce and a tag of at most 16 bytes (1.2, RFC 5246 §6.2.3.3), or the content
/// type byte and the tag (1.3, RFC 8446 §5.2).
fn largest_body(versions: Versions) -> usize {
    match versions {
        Versions::Dtls13 => MAX_PLAINTEXT + 1 + 16,
        _ => MAX_PLAINTEXT + 8 + 16,
    }
}

/// Every record on the wire, both ways, within the limit; returns the largest body seen.
fn assert_records_within_limit(pair: &Pair, versions: Versions) -> usize {
    let mut largest = 0;
    for d in &pair.log {
        for body in record_bodies(&d.payload) {
            assert!(
                body <= largest_body(versions),
                "{versions:?}: a record of {body} bytes in datagram {} ({:?}, {} bytes)",
                d.nth,
                d.dir,
                d.payload.len()
            );
            largest = largest.max(body);
        }
    }
    largest
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// The user's report: 70,000 bytes sent at once with MTUs above 2^14 came back as 10,088.
#[test]
fn seventy_thousand_bytes_arrive_whole_once_and_in_order_at_large_mtus() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let mut pair = psk_pair(versions);
        pair.handshake(MINUTE).expect("handshake");
        pair.run_for(Duration::from_secs(1));
        let h = pair.server_handle();
        let dropped = |pair: &Pair| {
            (pair.client.stats().records_dropped, pair.server.connection(h).unwrap().stats().records_dropped)
        };
        let dropped_before = dropped(&pair);
        let (up, down) = (pattern(70_000, 0x11), pattern(70_000, 0x22));
        pair.client.send(&up).unwrap();
        pair.server.send(h, &down).unwrap();
        pair.run_for(Duration::from_secs(1));

        for (got, want, who) in [(pair.server_data(), &up, "server"), (pair.client_data(), &down, "client")] {
            assert_eq!(got.concat(), *want, "{versions:?}: the {who} got every byte once, in order");
            assert_eq!(got.len(), 5, "{versions:?}: 70,000 bytes make five records of at most 2^14");
            assert!(got.iter().all(|r| r.len() <= MAX_PLAINTEXT), "{versions:?}");
        }
        assert_eq!(dropped(&pair), dropped_before, "{versions:?}: no record dropped");
        let largest = assert_records_within_limit(&pair, versions);
        assert!(largest > MAX_PLAINTEXT, "{versions:?}: records were filled to the limit ({largest})");
        assert!(pair.client_failure().is_none() && pair.server_failure().is_none());
    }
}

/// `seal_into` writes at most 2^14 bytes in a record whatever the MTU, and says so.
#[test]
fn seal_into_takes_2_14_bytes_and_refuses_more_at_a_large_mtu() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let mut pair = psk_pair(versions);
        pair.handshake(MINUTE).expect("handshake");
        pair.run_for(Duration::from_secs(1));
        let mut out = vec![0u8; CLIENT_MTU];
        let refused = pair.client.seal_into(&pattern(MAX_PLAINTEXT + 1, 1), &mut out);
        assert_eq!(
            refused,
            Err(Error::RecordTooLarge { len: MAX_PLAINTEXT + 1, max: MAX_PLAINTEXT }),
            "{versions:?}"
        );
        let data = pattern(MAX_PLAINTEXT, 2);
        let n = pair.client.seal_into(&data, &mut out).unwrap();
        let (src, dst) = (pair.client_addr, pair.server_addr);
        pair.inject(src, dst, out[..n].to_vec());
        assert_eq!(pair.server_data(), vec![data], "{versions:?}");
    }
}

/// Records longer than the RFC allows, which no key authenticates here: dropped, counted, and
/// the session goes on (RFC 6347 §4.1.2.7, RFC 9147 §4.5.2).
#[test]
fn unauthenticated_oversized_records_are_dropped_and_counted() {
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let mut pair = psk_pair(versions);
        pair.handshake(MINUTE).expect("handshake");
        pair.run_for(Duration::from_secs(1));
        let before = pair.client.stats().records_dropped;
        // A plaintext handshake record of 2^14 + 1 bytes (RFC 5246 §6.2.1 allows 2^14).
        let mut plain = vec![22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 40];
        plain.extend_from_slice(&((MAX_PLAINTEXT + 1) as u16).to_be_bytes());
        plain.resize(13 + MAX_PLAINTEXT + 1, 0);
        // DTLS 1.3: a unified header (epoch 3, 16-bit number, no length) and 2^14 + 257
        // bytes to the datagram's end (RFC 8446 §5.2 allows 2^14 + 256).
        let mut unified = vec![0b0010_1011, 0, 9];
        unified.resize(3 + MAX_PLAINTEXT + 257, 0x5a);
        let (src, dst) = (pair.server_addr, pair.client_addr);
        pair.inject(src, dst, plain);
        pair.inject(src, dst, unified);
        assert_eq!(pair.client.stats().records_dropped, before + 2, "{versions:?}");
        assert!(pair.client.is_established() && pair.client_failure().is_none(), "{versions:?}");
        pair.exchange_data(2);
    }
}

/// A DTLS 1.3 flight packs its messages into shared records while the datagram has room: with
/// a certificate of almost 2^14 bytes and an MTU that holds the whole flight, the record is cut
/// at 2^14 bytes, and the handshake completes. (A DTLS 1.2 record holds one fragment; the
/// fragmenter's cut for messages over 2^14 bytes is unit-tested in `flight.rs`, and such a
/// message's handshake below.)
#[test]
fn a_flight_over_2_14_bytes_goes_in_records_within_the_limit() {
    fn pki() -> &'static TestPki {
        static PKI: OnceLock<TestPki> = OnceLock::new();
        PKI.get_or_init(|| {
            let mut names = vec!["localhost".to_owned()];
            names.extend((0..375).map(|i| format!("host-{i:03}.a-rather-long-subdomain.example")));
            generate(1, KeyKind::P256, &names, PKI_TIME, 2).unwrap()
        })
    }
    {
        let versions = Versions::Dtls13;
        let client = ClientConfig {
            versions,
            trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
            server_name: Some("localhost".into()),
            wall_clock: AT_PKI_TIME,
            mtu: SERVER_MTU,
            // Uncompressed (RFC 8879 would shrink the names' repetition), so the flight is long.
            certificate_compression: Arc::new(CertificateCompression::new(&[])),
            ..Default::default()
        };
        let server = ServerConfig {
            versions,
            certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
            wall_clock: AT_PKI_TIME,
            mtu: SERVER_MTU,
            ..Default::default()
        };
        let mut pair = Pair::new(client, server);
        let (c, s) = pair
            .handshake(MINUTE)
            .unwrap_or_else(|| panic!("{versions:?}: {:?} {:?}", pair.client_events, pair.server_events));
        assert_eq!((c.retransmissions, s.retransmissions), (0, 0), "{versions:?}");
        assert_eq!(c.peer_certificates, 1);
        let flight =
            pair.log.iter().filter(|d| d.dir == Dir::ToClient).max_by_key(|d| d.payload.len()).unwrap();
        let bodies = record_bodies(&flight.payload);
        // ServerHello, then the encrypted messages: more than one record can hold.
        assert!(bodies[1..].iter().sum::<usize>() > largest_body(versions), "{versions:?}: {bodies:?}");
        assert_records_within_limit(&pair, versions);
        pair.exchange_data(1);
        assert!(pair.client_events.iter().all(|e| !matches!(e, Event::Failed(_))));
    }
}

/// A certificate chain longer than 16 KiB (a leaf with many names; chains of a few RSA-4096
/// certificates are as long) completes at the default MTU in both versions: a side that takes
/// its peer's chain reassembles handshake messages up to 64 KiB, and the Certificate message
/// here is about twice the 16 KiB other messages get.
#[test]
fn a_certificate_message_over_16_kib_is_taken_in_both_versions() {
    fn pki() -> &'static TestPki {
        static PKI: OnceLock<TestPki> = OnceLock::new();
        PKI.get_or_init(|| {
            let mut names = vec!["localhost".to_owned()];
            names.extend((0..700).map(|i| format!("host-{i:03}.a-rather-long-subdomain.example")));
            generate(1, KeyKind::P256, &names, PKI_TIME, 2).unwrap()
        })
    }
    let leaf_len = pki().server_chain()[0].len();
    assert!(leaf_len > 24 * 1024, "a leaf of {leaf_len} bytes");
    for versions in [Versions::Dtls12, Versions::Dtls13] {
        let client = ClientConfig {
            versions,
            trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
            server_name: Some("localhost".into()),
            wall_clock: AT_PKI_TIME,
            certificate_compression: Arc::new(CertificateCompression::new(&[])),
            ..Default::default()
        };
        let server = ServerConfig {
            versions,
            certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
            wall_clock: AT_PKI_TIME,
            ..Default::default()
        };
        let mut pair = Pair::new(client, server);
        let (c, _) = pair
            .handshake(MINUTE)
            .unwrap_or_else(|| panic!("{versions:?}: {:?} {:?}", pair.client_events, pair.server_events));
        assert_eq!(c.peer_certificates, 1, "{versions:?}");
        assert_eq!(c.retransmissions, 0, "{versions:?}: nothing dropped for want of room");
    }
}
