//! In-memory handshakes on virtual time: loss, reordering, duplication, small MTU, wrong keys,
//! cookie rotation, a new handshake on an existing 4-tuple, and application data both ways.

use fastshake_dtls::{AlertDescription, CipherSuite, Error, Event, Mismatch};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Dir, Fate};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

#[test]
fn plain_handshake_both_suites_and_data() {
    for &suite in CipherSuite::ALL.iter().filter(|s| s.is_psk()) {
        let mut cc = client_config();
        cc.suites = vec![suite];
        let mut pair = Pair::new(cc, server_config());
        let (c, s) = pair.handshake(MINUTE).expect("handshake completes");
        assert_eq!((c.suite, s.suite), (suite, suite));
        assert!(c.extended_master_secret && s.extended_master_secret);
        // Client: ClientHello, ClientHello with cookie, ClientKeyExchange+CCS+Finished.
        assert_eq!((c.flights_sent, c.retransmissions), (3, 0));
        // Server: ServerHello..ServerHelloDone, CCS+Finished (the HelloVerifyRequest is stateless).
        assert_eq!((s.flights_sent, s.retransmissions), (2, 0));
        assert_eq!(s.psk_identity, PSK_ID);
        // Three round trips of 10 ms each way.
        assert_eq!(c.duration, Duration::from_millis(60));
        assert_eq!(pair.server.stats().hello_verify_sent, 1);
        pair.exchange_data(20);
        assert!(pair.client.is_established());
        let h = pair.server_handle();
        assert!(
            !pair.server.connection(h).unwrap().holds_handshake_state(),
            "server frees handshake state once the client sent protected data"
        );
    }
}

#[test]
fn each_flight_lost_once() {
    // Datagram indices per direction with the default MTU: to the server 0 = ClientHello,
    // 1 = ClientHello with cookie, 2 = flight 5; to the client 0 = HelloVerifyRequest,
    // 1 = flight 4, 2 = flight 6.
    for (dir, index) in [
        (Dir::ToServer, 0),
        (Dir::ToServer, 1),
        (Dir::ToServer, 2),
        (Dir::ToClient, 0),
        (Dir::ToClient, 1),
        (Dir::ToClient, 2),
    ] {
        let mut pair = Pair::new(client_config(), server_config());
        pair.filter = net::drop_if(move |d| d.dir == dir && d.index == index);
        let (c, s) = pair.handshake(MINUTE).unwrap_or_else(|| panic!("completes with {dir:?} #{index} lost"));
        assert_eq!(c.flights_sent, 3, "{dir:?} #{index}");
        assert_eq!(s.flights_sent, 2, "{dir:?} #{index}");
        let total = c.retransmissions + s.retransmissions;
        assert!((1..=2).contains(&total), "{dir:?} #{index}: {total} retransmissions");
        // One lost flight costs one initial timeout (1 s) of waiting.
        assert!(
            c.duration >= Duration::from_secs(1) && c.duration < Duration::from_secs(2),
            "{:?}",
            c.duration
        );
        pair.run_for(Duration::from_secs(3));
        pair.exchange_data(5);
    }
}

#[test]
fn flight_lost_several_times_backs_off() {
    // Flight 5 (third datagram to the server) and its first two retransmissions are lost.
    let mut pair = Pair::new(client_config(), server_config());
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && (2..5).contains(&d.index));
    let (c, _s) = pair.handshake(MINUTE).expect("completes");
    assert_eq!(c.retransmissions, 3);
    // Timer 1 s, then 2 s, then 4 s: the fourth copy leaves 7 s after the first.
    assert!(c.duration >= Duration::from_secs(7) && c.duration < Duration::from_secs(8), "{:?}", c.duration);
    assert_eq!(pair.client.stats().flights_resent, 3);
    pair.exchange_data(3);
}

#[test]
fn server_last_flight_lost_is_resent_on_client_retransmission() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.filter = net::drop_if(|d| d.dir == Dir::ToClient && (d.index == 2 || d.index == 3));
    let (c, s) = pair.handshake(MINUTE).expect("completes");
    assert_eq!(c.retransmissions, 2);
    let server_conn = pair.server.connection(pair.server_handle()).unwrap();
    assert_eq!(server_conn.stats().flights_resent, 2, "flight 6 resent once per client retransmission");
    assert_eq!(s.flights_sent, 2);
}

#[test]
fn handshake_times_out_without_answer() {
    let mut cc = client_config();
    cc.handshake_timeout = Duration::from_secs(60);
    let mut pair = Pair::new(cc, server_config());
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer);
    assert!(pair.handshake(Duration::from_secs(120)).is_none());
    // Timer 1, 2, 4, 8, 16, 32 s: resends at 1, 3, 7, 15, 31 s; the next would be at 63 s > 60 s.
    assert_eq!(pair.client_failure(), Some(Error::HandshakeTimeout { retransmissions: 5 }));
    assert!(pair.client.is_closed());
    assert!(pair.client_failure().unwrap().to_string().contains("after 5 retransmissions"));
}

#[test]
fn reordered_fragments_at_smallest_mtu() {
    // IEEE 802.15.4: a 127-byte frame less 23 bytes of MAC header and FCS (64-bit addresses)
    // less 8 bytes of 6LoWPAN IPHC and compressed UDP header leaves 96 bytes of UDP payload.
    const MTU_802154: usize = 96;
    // MIN_MTU (64) also fragments the ClientHello itself, which the endpoint reassembles.
    for (mtu, reorder) in [
        (MTU_802154, false),
        (MTU_802154, true),
        (fastshake_dtls::MIN_MTU, false),
        (fastshake_dtls::MIN_MTU, true),
    ] {
        let mut cc = client_config();
        let long_id = vec![b'i'; 150];
        cc.psk = Some(fastshake_dtls::Psk::new(long_id.clone(), PSK_KEY));
        cc.mtu = mtu;
        let mut sc = server_config();
        sc.psks.push(fastshake_dtls::Psk::new(long_id, PSK_KEY));
        sc.psk_identity_hint = Some(vec![b'h'; 120]);
        sc.mtu = mtu;
        let mut pair = Pair::new(cc, sc);
        pair.reorder = reorder;
        let (c, s) = pair.handshake(MINUTE).expect("completes at the smallest MTU");
        assert_eq!(c.retransmissions + s.retransmissions, 0, "reorder={reorder}");
        pair.client.send(&[0xab; 300]).unwrap();
        pair.run_for(Duration::from_secs(1));
        assert_eq!(pair.server_data().concat(), vec![0xab; 300]);
        assert!(pair.log.iter().all(|d| d.payload.len() <= mtu), "every datagram fits the MTU {mtu}");
        assert!(pair.log.len() > 10, "the flights were fragmented");
    }
}

#[test]
fn duplicated_datagrams() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.filter = Box::new(|_| Fate::Duplicate);
    let (c, s) = pair.handshake(MINUTE).expect("completes");
    assert_eq!((c.flights_sent, s.flights_sent), (3, 2));
    // Duplicates arrive together, so they never look like a lost flight.
    assert_eq!(c.retransmissions + s.retransmissions, 0);
    pair.exchange_data(10);
}

#[test]
fn random_loss_and_duplication_never_loses_the_handshake() {
    for seed in 0..30u64 {
        let mut state = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
        // 30 % loss: allow more than the default minute, so bad luck with the doubling timer
        // (five losses of one flight in a row) does not end the run.
        let mut cc = client_config();
        cc.handshake_timeout = Duration::from_secs(300);
        let mut sc = server_config();
        sc.handshake_timeout = Duration::from_secs(300);
        let mut pair = Pair::with_seed(cc, sc, seed as u8);
        pair.filter = Box::new(move |_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 10 {
                0..=2 => Fate::Drop,
                3 => Fate::Duplicate,
                _ => Fate::Deliver,
            }
        });
        pair.handshake(Duration::from_secs(400)).unwrap_or_else(|| {
            panic!(
                "seed {seed}: {:?} {:?} {:?} {:?}",
                pair.client_failure(),
                pair.server_failure(),
                pair.client.stats(),
                pair.server.stats()
            )
        });
    }
}

#[test]
fn wrong_psk_fails_with_decrypt_error_on_both_sides() {
    let mut cc = client_config();
    cc.psk = Some(fastshake_dtls::Psk::new(PSK_ID, b"wrong key".to_vec()));
    let mut pair = Pair::new(cc, server_config());
    assert!(pair.handshake(MINUTE).is_none());
    assert_eq!(pair.server_failure(), Some(psk_mismatch(true)));
    assert_eq!(pair.client_failure(), Some(psk_mismatch(false)));
}

#[test]
fn unknown_identity_fails_with_unknown_psk_identity() {
    let mut cc = client_config();
    cc.psk = Some(fastshake_dtls::Psk::new(b"nobody".to_vec(), PSK_KEY));
    let mut pair = Pair::new(cc, server_config());
    assert!(pair.handshake(MINUTE).is_none());
    assert_eq!(pair.server_failure(), Some(Error::AlertSent(AlertDescription::UnknownPskIdentity)));
    assert_eq!(pair.client_failure(), Some(Error::AlertReceived(AlertDescription::UnknownPskIdentity)));
    assert!(pair.client_failure().unwrap().to_string().contains("unknown_psk_identity"));
}

#[test]
fn no_common_suite_fails_with_handshake_failure() {
    let mut cc = client_config();
    cc.suites = vec![CipherSuite::PskWithAes128Ccm8];
    let mut sc = server_config();
    sc.suites = vec![CipherSuite::PskWithAes128GcmSha256];
    let mut pair = Pair::new(cc, sc);
    assert!(pair.handshake(MINUTE).is_none());
    // The server, which decided, names both sides' suites; the alert on the wire is the RFC's.
    let server = pair.server_failure().expect("the server refused");
    assert_eq!(server.alert(), Some(AlertDescription::HandshakeFailure));
    assert!(
        matches!(&server, Error::NoMatch { mismatch: Mismatch::CipherSuite { offered, served }, .. }
            if offered.contains(&CipherSuite::PskWithAes128Ccm8.id())
                && served == &[CipherSuite::PskWithAes128GcmSha256]),
        "{server:?}"
    );
    assert!(
        server.to_string().contains(
            "no common cipher suite: the client offered TLS_PSK_WITH_AES_128_CCM_8, \
             TLS_EMPTY_RENEGOTIATION_INFO_SCSV; this server serves TLS_PSK_WITH_AES_128_GCM_SHA256"
        ),
        "{server}"
    );
    // The client learns the alert before any ServerHello, and says what it offered.
    assert_eq!(
        pair.client_failure(),
        Some(Error::HelloRefused {
            alert: AlertDescription::HandshakeFailure,
            offered_suites: vec![CipherSuite::PskWithAes128Ccm8.id()],
            offered_groups: Vec::new(),
        })
    );
}

#[test]
fn cookie_rotation_mid_handshake_still_completes() {
    // One rotation between HelloVerifyRequest and the second ClientHello: the previous key verifies.
    let mut pair = Pair::new(client_config(), server_config());
    pair.step(pair.now + MINUTE); // ClientHello out
    pair.step(pair.now + MINUTE); // HelloVerifyRequest out
    assert_eq!(pair.server.stats().hello_verify_sent, 1);
    pair.server.rotate_cookie_key([42; 16]);
    pair.handshake(MINUTE).expect("completes after one rotation");
    assert_eq!(pair.server.stats().cookies_rejected, 0);

    // Two rotations: the cookie is refused, a new HelloVerifyRequest goes out, and the client
    // retries with the new cookie.
    let mut pair = Pair::new(client_config(), server_config());
    pair.step(pair.now + MINUTE);
    pair.step(pair.now + MINUTE);
    pair.server.rotate_cookie_key([1; 16]);
    pair.server.rotate_cookie_key([2; 16]);
    let (c, _) = pair.handshake(MINUTE).expect("completes after a second cookie exchange");
    assert_eq!(pair.server.stats().cookies_rejected, 1);
    assert_eq!(pair.server.stats().hello_verify_sent, 2);
    assert_eq!(c.flights_sent, 4);
}

#[test]
fn new_client_hello_on_existing_tuple_replaces_session_after_cookie() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).expect("first session");
    pair.exchange_data(2);
    let old = pair.server_handle();
    // A replayed copy of the first ClientHello with cookie does not disturb the session.
    let first_cookie_hello =
        pair.log.iter().filter(|d| d.dir == Dir::ToServer).nth(1).unwrap().payload.clone();
    let server_addr = pair.server_addr;
    pair.server.handle_datagram(pair.now, server_addr, pair.client_addr, &mut first_cookie_hello.clone());
    assert_eq!(pair.server.handle_for(pair.client_addr), Some(old));
    assert!(pair.server.connection(old).unwrap().is_established());

    // The client restarts from the same address and port.
    pair.new_client(client_config(), 9);
    let before = pair.server_events.len();
    pair.handshake(MINUTE).expect("new session on the same 4-tuple");
    let new = pair.server_handle();
    assert_ne!(new, old);
    assert!(pair.server_events[before..].contains(&(old, Event::Failed(Error::Superseded))));
    assert_eq!(pair.server.stats().connections_replaced, 1);
    assert_eq!(pair.server.stats().connections_open, 1);
    pair.exchange_data(3);
}

#[test]
fn close_notify_closes_both_sides() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).unwrap();
    let h = pair.server_handle();
    pair.client.close();
    assert!(pair.client.is_closed());
    assert_eq!(pair.client.send(b"late"), Err(Error::Closed));
    pair.run_for(Duration::from_secs(1));
    assert!(pair.server_events.contains(&(h, Event::Closed)));
    assert!(pair.server.connection(h).is_none(), "closed connections leave the table");
}

#[test]
fn send_before_handshake_is_refused() {
    let mut pair = Pair::new(client_config(), server_config());
    assert_eq!(pair.client.send(b"early"), Err(Error::NotEstablished));
    let mut out = [0u8; 100];
    assert_eq!(pair.client.seal_into(b"early", &mut out), Err(Error::NotEstablished));
}

#[test]
fn seal_into_and_open_in_place_round_trip() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).unwrap();
    pair.run_for(Duration::from_millis(100));
    let h = pair.server_handle();
    let mut buf = [0u8; 1500];
    let mut got = Vec::new();
    for i in 0..50u8 {
        let n = pair.client.seal_into(&[i; 100], &mut buf).unwrap();
        assert_eq!(n, 13 + 8 + 100 + 8, "CCM-8: header, explicit nonce, data, 8-byte tag");
        let (ca, sa) = (pair.client_addr, pair.server_addr);
        let incoming = pair.server.incoming(&mut buf[..n]);
        pair.server.open_in_place(pair.now, sa, ca, incoming, &mut |hh, d| got.push((hh, d.to_vec())));
        // A replay of the same datagram is dropped.
        let mut replay = buf;
        let before = got.len();
        let mut sink = Vec::new();
        let incoming = pair.server.incoming(&mut replay[..n]);
        pair.server.open_in_place(pair.now, sa, ca, incoming, &mut |_, d| sink.push(d.to_vec()));
        assert!(sink.is_empty());
        assert_eq!(got.len(), before);
    }
    assert_eq!(got.len(), 50);
    assert!(got.iter().enumerate().all(|(i, (hh, d))| *hh == h && d == &vec![i as u8; 100]));
    assert_eq!(pair.client.seal_into(&[0; 100], &mut buf[..50]), Err(Error::BufferTooSmall { needed: 129 }));
    assert!(matches!(pair.client.seal_into(&[0; 2000], &mut buf), Err(Error::TooLarge { .. })));
}

#[test]
fn connection_table_is_bounded() {
    let mut sc = server_config();
    sc.max_connections = 1;
    let mut pair = Pair::new(client_config(), sc);
    pair.handshake(MINUTE).unwrap();
    // A second client from another port cannot get a connection.
    let mut other = Pair::new(client_config(), server_config());
    other.client_addr = "192.0.2.1:9999".parse().unwrap();
    std::mem::swap(&mut other.server, &mut pair.server);
    assert!(other.handshake(Duration::from_secs(3)).is_none());
    assert!(other.server.stats().connections_refused >= 1);
    assert_eq!(other.server.stats().connections_open, 1);
}

#[test]
fn invalid_configurations_fail_clearly() {
    let mut cc = client_config();
    cc.psk = None;
    let mut pair = Pair::new(cc, server_config());
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.client_failure(), Some(Error::Config("a client needs a PSK or trust anchors")));
    assert!(pair.client.poll_transmit(pair.now).is_none(), "nothing is sent");

    let mut sc = server_config();
    sc.psks.clear();
    let refused = fastshake_dtls::Endpoint::new(std::sync::Arc::new(sc), [0; 32]).err();
    assert_eq!(refused, Some(Error::Config("a server needs a PSK or a certified key")));
    let mut cc = client_config();
    cc.mtu = 20;
    assert!(cc.validate().is_err());
}

#[test]
fn cookie_is_bound_to_the_client_address() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).unwrap();
    // The ClientHello with its cookie, replayed from another address, gets a fresh
    // HelloVerifyRequest and no state.
    let with_cookie = pair.log.iter().filter(|d| d.dir == Dir::ToServer).nth(1).unwrap().payload.clone();
    let stranger: std::net::SocketAddr = "203.0.113.9:5684".parse().unwrap();
    let before = pair.server.stats();
    let sa = pair.server_addr;
    pair.server.handle_datagram(pair.now, sa, stranger, &mut with_cookie.clone());
    let after = pair.server.stats();
    assert_eq!(after.cookies_rejected, before.cookies_rejected + 1);
    assert_eq!(after.hello_verify_sent, before.hello_verify_sent + 1);
    assert_eq!(after.connections_open, before.connections_open);
    let hvr = pair.server.poll_transmit(pair.now).expect("HelloVerifyRequest");
    assert_eq!(hvr.dst, stranger);
    // RFC 6347 §4.2.1: the HelloVerifyRequest carries the ClientHello's record sequence number.
    assert_eq!(hvr.payload[5..11], with_cookie[5..11]);
}

#[test]
fn new_client_hello_replaces_a_session_still_in_handshake() {
    let mut pair = Pair::new(client_config(), server_config());
    // Lose the server's flight 4 for good: the first session stays mid-handshake.
    pair.filter = net::drop_if(|d| d.dir == Dir::ToClient && d.index >= 1);
    pair.run_for(Duration::from_millis(500));
    let old = pair.server_handle();
    assert!(!pair.server.connection(old).unwrap().is_established());
    pair.filter = net::deliver_all();
    pair.new_client(client_config(), 33);
    pair.handshake(MINUTE).expect("the restarted client connects");
    assert_ne!(pair.server_handle(), old);
    assert!(pair.server_events.contains(&(old, Event::Failed(Error::Superseded))));
    pair.exchange_data(2);
}
