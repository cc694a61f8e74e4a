//! What we accept is bounded by the RFC, not by our own MTU: large datagrams, a record the peer
//! split across two datagrams, protected records of any size next to a Finished, and large
//! fragmented ClientHellos (a DTLS 1.3 client offering a post-quantum key share).

use fastshake_dtls::{
    CipherSuite, ClientAuth, ClientConfig, Endpoint, Event, Instant, ServerConfig, SessionCacheConfig,
    TicketKeys, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{Dir, Fate};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn rsa_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::Rsa2048, &[], PKI_TIME, 2).unwrap())
}

fn anchors() -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(rsa_pki().ca_pem().as_bytes()).unwrap())
}

/// ECDHE-RSA with a chain of three 2048-bit RSA certificates on each side, mutual
/// authentication: the handshake of the OpenSSL `s_client` report, whose client flight is 4 kB.
fn rsa_mutual(client_mtu: usize) -> (ClientConfig, ServerConfig) {
    let c = ClientConfig {
        versions: Versions::Dtls12,
        trust_anchors: Some(anchors()),
        server_name: Some("localhost".into()),
        certified_key: Some(Arc::new(rsa_pki().client_certified_key().unwrap())),
        wall_clock: CLOCK,
        mtu: client_mtu,
        ..Default::default()
    };
    let s = ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(Arc::new(rsa_pki().server_certified_key().unwrap())),
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(anchors()),
        wall_clock: CLOCK,
        ..Default::default()
    };
    (c, s)
}

#[test]
fn a_whole_flight_in_one_large_datagram_is_taken_on_first_arrival() {
    let (c, s) = rsa_mutual(u16::MAX as usize);
    let mut pair = Pair::new(c, s);
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0));
    let largest = pair.log.iter().filter(|d| d.dir == Dir::ToServer).map(|d| d.payload.len()).max().unwrap();
    assert!(largest > 3_000, "the client's certificate flight went as one datagram of {largest} bytes");
}

/// OpenSSL 3.0 writes a flight through a 4 KiB buffer and, when the path MTU is large (loopback),
/// flushes it mid-record: the first datagram ends inside a record and the next one starts with
/// the rest (RFC 6347 §4.1.1 forbids it, yet `openssl s_client` does it to every server). Kept
/// until the rest comes, the record completes the flight at once; dropped, it cost both sides a
/// retransmission timeout (1 s) on every handshake.
#[test]
fn a_record_split_across_two_datagrams_completes_the_flight_at_once() {
    let (c, s) = rsa_mutual(u16::MAX as usize);
    let mut pair = Pair::new(c, s);
    pair.split_over = Some(2_048);
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    let split = pair.log.iter().filter(|d| d.dir == Dir::ToServer && d.payload.len() == 2_048).count();
    assert!(split >= 1, "the client's flight was split mid-record");
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0), "no flight was resent");
    assert!(pair.server_failure().is_none());
}

/// When the rest of a split record is lost, the start kept is dropped with the next datagram
/// and the retransmitted flight (split again) completes the handshake.
#[test]
fn a_split_record_whose_rest_is_lost_completes_on_the_retransmission() {
    let (c, s) = rsa_mutual(u16::MAX as usize);
    let mut pair = Pair::new(c, s);
    let mut seen = 0;
    pair.split_over = Some(2_048);
    pair.filter = Box::new(move |d| {
        if d.dir == Dir::ToServer && d.payload.len() > 1_000 {
            seen += 1;
            // The rest of the first split flight is lost.
            if seen == 2 {
                return Fate::Drop;
            }
        }
        Fate::Deliver
    });
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    assert!(c.retransmissions + s.retransmissions > 0);
    assert!(pair.server_failure().is_none() && pair.client_failure().is_none());
}

/// In an abbreviated handshake the client's Finished is the last message, and its first
/// application record may share the datagram. A record of any size up to the RFC's limit is taken
/// with it (a half-open server once dropped the whole datagram when a protected record in it was
/// larger than a Finished, losing the Finished and the data).
#[test]
fn a_large_record_beside_the_clients_finished_is_taken_with_it() {
    let server_config = ServerConfig {
        tickets: Some(TicketKeys::new(1, [3; 16])),
        session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
        wall_clock: CLOCK,
        ..server_config()
    };
    let client_config = ClientConfig { wall_clock: CLOCK, mtu: u16::MAX as usize, ..client_config() };
    let mut pair = Pair::new(client_config.clone(), server_config);
    // Each burst leaves as one datagram, as a sender that writes a flight and its first data
    // together does.
    pair.coalesce = true;
    let (first, _) = pair.handshake(MINUTE).expect("first handshake");
    assert!(first.session.is_some(), "first handshake: {:?}", pair.client_events);

    let big = vec![0x5a; 15_000];
    pair.client_addr.set_port(pair.client_addr.port() + 1);
    pair.resume_client(client_config, first.session, 3);
    pair.server_events.clear();
    let payload = big.clone();
    pair.on_client_event = Box::new(move |client, e| {
        if matches!(e, Event::Connected(_)) {
            client.send(&payload).unwrap();
        }
    });
    let (_, resumed) = pair.handshake(MINUTE).expect("the server completed the abbreviated handshake");
    assert!(resumed.resumed && resumed.retransmissions == 0);
    assert_eq!(pair.server_data(), vec![big], "the 15 kB record came with the Finished, once");
}

/// A ClientHello of a DTLS 1.3 client that also offers DTLS 1.2: `supported_versions` (43),
/// key shares (51) for a hybrid post-quantum group (X25519MLKEM768: 1,216 bytes), x25519 and
/// secp256r1, and a few more extensions: about 1.4 kB, close to the 1,542 bytes of pion/dtls's
/// development branch.
fn dtls13_style_hello(cookie: &[u8]) -> Vec<u8> {
    let mut body = vec![0xfe, 0xfd]; // legacy_version: DTLS 1.2
    body.extend_from_slice(&[0x42; 32]); // random
    body.push(0); // legacy_session_id
    body.push(cookie.len() as u8);
    body.extend_from_slice(cookie);
    let suites: [u16; 4] = [0x1301, 0x1302, CipherSuite::PskWithAes128Ccm8.id(), 0x00ff];
    body.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend_from_slice(&s.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]); // compression: null
    let mut ext = Vec::new();
    let mut put = |ty: u16, data: &[u8]| {
        ext.extend_from_slice(&ty.to_be_bytes());
        ext.extend_from_slice(&(data.len() as u16).to_be_bytes());
        ext.extend_from_slice(data);
    };
    put(43, &[4, 0xfe, 0xfc, 0xfe, 0xfd]); // supported_versions: DTLS 1.3, DTLS 1.2
    put(10, &[0, 6, 0x11, 0xec, 0x00, 0x1d, 0x00, 0x17]); // groups: X25519MLKEM768, x25519, secp256r1
    put(13, &[0, 4, 0x04, 0x03, 0x08, 0x04]); // signature_algorithms
    put(45, &[1, 1]); // psk_key_exchange_modes: psk_dhe_ke
                      // key_share: X25519MLKEM768 (1,216 bytes), x25519 (32) and secp256r1 (65).
    let mut shares = Vec::new();
    for (group, len) in [(0x11ecu16, 1_216usize), (0x001d, 32), (0x0017, 65)] {
        shares.extend_from_slice(&group.to_be_bytes());
        shares.extend_from_slice(&(len as u16).to_be_bytes());
        shares.extend(std::iter::repeat_n(0x33u8, len));
    }
    let mut share = (shares.len() as u16).to_be_bytes().to_vec();
    share.extend(shares);
    put(51, &share);
    put(0x0017, &[]); // extended_master_secret
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend(ext);
    body
}

/// The hello in fragments of at most `max` bytes, one record per datagram (record sequence
/// numbers from `first_seq`).
fn fragmented(body: &[u8], message_seq: u16, max: usize, first_seq: u64) -> Vec<Vec<u8>> {
    body.chunks(max)
        .enumerate()
        .map(|(i, chunk)| {
            let offset = (i * max) as u32;
            let mut hs = vec![1u8]; // client_hello
            hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
            hs.extend_from_slice(&message_seq.to_be_bytes());
            hs.extend_from_slice(&offset.to_be_bytes()[1..]);
            hs.extend_from_slice(&(chunk.len() as u32).to_be_bytes()[1..]);
            hs.extend_from_slice(chunk);
            let mut record = vec![22, 0xfe, 0xfd, 0, 0];
            record.extend_from_slice(&(first_seq + i as u64).to_be_bytes()[2..]);
            record.extend_from_slice(&(hs.len() as u16).to_be_bytes());
            record.extend(hs);
            record
        })
        .collect()
}

#[test]
fn a_large_fragmented_client_hello_offering_dtls_1_3_gets_a_cookie_then_dtls_1_2() {
    let mut server = Endpoint::new(Arc::new(server_config()), [4; 32]).expect("a valid server configuration");
    let now = Instant::from_millis(1_000);
    let (local, from): (SocketAddr, SocketAddr) =
        ("198.51.100.1:5684".parse().unwrap(), "192.0.2.7:40000".parse().unwrap());
    let hello = dtls13_style_hello(&[]);
    assert!(hello.len() > 1_400, "{} bytes", hello.len());
    for mut d in fragmented(&hello, 0, 600, 0) {
        server.handle_datagram(now, local, from, &mut d);
    }
    let hvr = server.poll_transmit(now).expect("a HelloVerifyRequest, not silence").payload;
    assert_eq!(hvr[13], 3, "hello_verify_request");
    let cookie = &hvr[13 + 12 + 3..];
    assert_eq!(cookie.len(), hvr[13 + 12 + 2] as usize);

    let hello = dtls13_style_hello(cookie);
    for mut d in fragmented(&hello, 1, 600, 10) {
        server.handle_datagram(now, local, from, &mut d);
    }
    let flight = server.poll_transmit(now).expect("the server's flight").payload;
    assert_eq!(flight[13], 2, "server_hello");
    let server_hello = &flight[13 + 12..];
    assert_eq!(&server_hello[..2], &[0xfe, 0xfd], "DTLS 1.2");
    // RFC 8446 §4.2.1: a DTLS 1.2 server ignores supported_versions and key_share, and never
    // sends them back.
    let suite_at = 2 + 32 + 1 + server_hello[2 + 32] as usize;
    assert_eq!(&server_hello[suite_at..suite_at + 2], &CipherSuite::PskWithAes128Ccm8.id().to_be_bytes());
    let ext = &server_hello[suite_at + 3 + 2..];
    let mut at = 0;
    while at + 4 <= ext.len() {
        let ty = u16::from_be_bytes([ext[at], ext[at + 1]]);
        assert!(ty != 43 && ty != 51, "extension {ty} in a DTLS 1.2 ServerHello");
        at += 4 + u16::from_be_bytes([ext[at + 2], ext[at + 3]]) as usize;
    }
    assert_eq!(server.stats().connections_accepted, 1);
}

/// The memory partial ClientHellos may hold stays bounded however many large ones start.
#[test]
fn partial_client_hellos_are_bounded_in_total() {
    let mut server = Endpoint::new(Arc::new(server_config()), [4; 32]).expect("a valid server configuration");
    let now = Instant::from_millis(1_000);
    let local: SocketAddr = "198.51.100.1:5684".parse().unwrap();
    let hello = dtls13_style_hello(&[]);
    // First fragments of 8 kB-claiming hellos from 1,000 hosts.
    let mut big = vec![0u8; 8 * 1024];
    big[..hello.len()].copy_from_slice(&hello);
    let first = fragmented(&big, 0, 600, 0).remove(0);
    for i in 0..1_000u32 {
        let from = SocketAddr::from(([10, (i >> 8) as u8, i as u8, 1], 4000));
        server.handle_datagram(now, local, from, &mut first.clone());
    }
    // 128 KiB hold 16 of them: the rest were evicted, oldest first.
    assert!(server.stats().partial_hellos_dropped >= 1_000 - 16);
    // An honest client still gets through.
    let honest: SocketAddr = "192.0.2.9:4000".parse().unwrap();
    for mut d in fragmented(&hello, 0, 600, 0) {
        server.handle_datagram(now, local, honest, &mut d);
    }
    let answered = std::iter::from_fn(|| server.poll_transmit(now)).any(|t| t.dst == honest);
    assert!(answered, "the honest client got its HelloVerifyRequest");
}
