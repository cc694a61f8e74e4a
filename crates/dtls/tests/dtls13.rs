//! DTLS 1.3 (RFC 9147) on the in-memory pair: the stateless HelloRetryRequest, PSK in both
//! modes, certificates and mutual authentication, a HelloRetryRequest for a group, the refusals,
//! and loss: what an ACK names is not sent again, and a lost last flight is recovered.

use fastshake_dtls::{
    AlertDescription, CipherSuite, ClientAuth, ClientConfig, Error, Event, Instant, NamedGroup, ServerConfig,
    TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Dir, Fate};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const AT_PKI_TIME: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn psk_client() -> ClientConfig {
    ClientConfig { versions: Versions::Dtls13, ..client_config() }
}

fn psk_server() -> ServerConfig {
    ServerConfig { versions: Versions::Dtls13, ..server_config() }
}

fn cert_client() -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls13,
        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        server_name: Some("localhost".into()),
        wall_clock: AT_PKI_TIME,
        ..Default::default()
    }
}

fn cert_server() -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls13,
        certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
        wall_clock: AT_PKI_TIME,
        ..Default::default()
    }
}

/// Data both ways, then both sides still up.
fn data_flows(pair: &mut Pair) {
    pair.exchange_data(3);
    assert!(pair.client.is_established());
}

#[test]
fn a_psk_handshake_with_x25519_after_the_cookie_exchange() {
    let mut pair = Pair::new(psk_client(), psk_server());
    let (c, s) = pair.handshake(MINUTE).expect("connected");
    for summary in [&c, &s] {
        assert_eq!(summary.version, Versions::Dtls13);
        assert_eq!(summary.suite, CipherSuite::Aes128GcmSha256);
        assert_eq!(summary.group, Some(NamedGroup::X25519));
        assert!(summary.hello_retry, "the server asks every new client for a cookie");
        assert_eq!(summary.hello_retry_group, None, "for a cookie alone: the client's share was ours");
        assert_eq!((summary.retransmissions, summary.peer_retransmissions), (0, 0));
    }
    assert_eq!(s.psk_identity, PSK_ID);
    // ClientHello, HelloRetryRequest, ClientHello, the server's flight, the client's Finished,
    // the server's ACK.
    assert_eq!(pair.sent(Dir::ToServer), 2 + 1);
    data_flows(&mut pair);
    assert!(!pair.client.holds_handshake_state(), "the ACK freed the client's handshake state");
    let server = pair.server.connection(pair.server_handle()).expect("the server's session");
    assert!(!server.holds_handshake_state(), "the client's Finished freed the server's");
}

/// A PSK client with groups offers psk_dhe_ke alone: no group in common is no handshake,
/// never a silent fall back to the PSK alone (no forward secrecy).
#[test]
fn no_group_in_common_is_no_handshake_even_with_a_psk() {
    let client = ClientConfig { groups: vec![NamedGroup::X25519], ..psk_client() };
    let server = ServerConfig { groups: vec![NamedGroup::Secp256r1], ..psk_server() };
    let mut pair = Pair::new(client, server);
    assert!(pair.handshake(MINUTE).is_none());
    assert!(pair.server_summary().is_none() && pair.server_failure().is_none(), "no session was made");
}

#[test]
fn a_hello_retry_request_asks_for_the_servers_group() {
    let client = ClientConfig { groups: vec![NamedGroup::X25519, NamedGroup::Secp256r1], ..psk_client() };
    let server = ServerConfig { groups: vec![NamedGroup::Secp256r1], ..psk_server() };
    let mut pair = Pair::new(client, server);
    let (c, s) = pair.handshake(MINUTE).expect("connected");
    assert_eq!((c.group, s.group), (Some(NamedGroup::Secp256r1), Some(NamedGroup::Secp256r1)));
    assert_eq!(
        (c.hello_retry_group, s.hello_retry_group),
        (Some(NamedGroup::Secp256r1), Some(NamedGroup::Secp256r1))
    );
    data_flows(&mut pair);
}

#[test]
fn every_suite_connects() {
    for suite in [
        fastshake_dtls::dtls13::Suite13::Aes128GcmSha256,
        fastshake_dtls::dtls13::Suite13::Chacha20Poly1305Sha256,
        fastshake_dtls::dtls13::Suite13::Aes128CcmSha256,
        fastshake_dtls::dtls13::Suite13::Aes128Ccm8Sha256,
    ] {
        let client = ClientConfig { suites13: vec![suite], ..psk_client() };
        let mut pair = Pair::new(client, psk_server());
        let (c, _) = pair.handshake(MINUTE).unwrap_or_else(|| panic!("{suite}"));
        assert_eq!(c.suite, CipherSuite::from(suite));
        data_flows(&mut pair);
    }
    // SHA-384 needs certificates (an external PSK is bound to SHA-256 here).
    let client =
        ClientConfig { suites13: vec![fastshake_dtls::dtls13::Suite13::Aes256GcmSha384], ..cert_client() };
    let mut pair = Pair::new(client, cert_server());
    let (c, _) = pair.handshake(MINUTE).expect("AES-256-GCM-SHA384");
    assert_eq!(c.suite, CipherSuite::Aes256GcmSha384);
    data_flows(&mut pair);
}

#[test]
fn certificates_with_a_chain_of_three_and_mutual_authentication() {
    let mut pair = Pair::new(cert_client(), cert_server());
    let (c, s) = pair.handshake(MINUTE).expect("server authenticated");
    assert_eq!((c.peer_certificates, s.peer_certificates), (3, 0));
    data_flows(&mut pair);

    let client = ClientConfig {
        certified_key: Some(Arc::new(pki().client_certified_key().unwrap())),
        ..cert_client()
    };
    let server = ServerConfig {
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        ..cert_server()
    };
    let mut pair = Pair::new(client, server);
    let (c, s) = pair.handshake(MINUTE).expect("both authenticated");
    assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3));
    assert!(s.peer_leaf.is_some());
    data_flows(&mut pair);
}

#[test]
fn a_required_client_certificate_that_is_missing_ends_the_handshake() {
    let server = ServerConfig {
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        ..cert_server()
    };
    let mut pair = Pair::new(cert_client(), server);
    pair.run_for(MINUTE);
    assert_eq!(pair.server_failure(), Some(Error::AlertSent(AlertDescription::CertificateRequired)));
    assert_eq!(pair.client_failure(), Some(Error::AlertReceived(AlertDescription::CertificateRequired)));
}

#[test]
fn a_wrong_psk_is_refused_with_decrypt_error() {
    let client =
        ClientConfig { psk: Some(fastshake_dtls::Psk::new(PSK_ID, b"another key".to_vec())), ..psk_client() };
    let mut pair = Pair::new(client, psk_server());
    pair.run_for(MINUTE);
    assert_eq!(pair.client_failure(), Some(psk_mismatch(false)));
    assert_eq!(pair.server_failure(), Some(psk_mismatch(true)));
    assert!(pair.server_summary().is_none());
}

#[test]
fn a_dtls_1_2_client_gets_protocol_version_from_a_1_3_server() {
    let mut pair = Pair::new(client_config(), psk_server());
    pair.run_for(MINUTE);
    let failure = pair.client_failure().expect("refused");
    assert_eq!(
        failure,
        Error::VersionRefused { alert: AlertDescription::ProtocolVersion, offered: Versions::Dtls12 }
    );
    assert!(
        failure.to_string().contains("it speaks no version we offered (we offered DTLS 1.2)"),
        "{failure}"
    );
}

#[test]
fn a_lost_datagram_of_the_servers_flight_is_the_only_one_sent_again() {
    // A small MTU spreads the certificate flight over several datagrams; the second is lost.
    let client = ClientConfig { mtu: 400, ..cert_client() };
    let server = ServerConfig { mtu: 400, ..cert_server() };
    let mut pair = Pair::new(client, server);
    let mut first_flight = 0;
    pair.filter = net::drop_if(move |d| {
        // To the client: the HelloRetryRequest (0), then the server's flight from 1.
        d.dir == Dir::ToClient && d.index == 2 && {
            first_flight += 1;
            first_flight == 1
        }
    });
    let (c, s) = pair.handshake(MINUTE).expect("recovered");
    assert_eq!(s.retransmissions, 1, "{s:?}");
    assert_eq!(c.retransmissions, 0);
    let to_client: Vec<_> = pair.log.iter().filter(|d| d.dir == Dir::ToClient).collect();
    let flight: usize = to_client.iter().skip(1).take_while(|d| d.index <= 6).count();
    assert!(flight >= 4, "the flight took {flight} datagrams");
    // After the ACK of what arrived, the server resends one datagram's worth, not the flight.
    let resent: Vec<_> = to_client
        .iter()
        .filter(|d| d.fate == Fate::Deliver && d.index > 2)
        .filter(|d| d.at > to_client[2].at)
        .collect();
    assert!(!resent.is_empty());
    let resent_bytes: usize = resent.iter().take(1).map(|d| d.payload.len()).sum();
    assert!(resent_bytes <= 400, "{resent_bytes}");
    data_flows(&mut pair);
}

#[test]
fn a_lost_client_finished_is_sent_again_until_acknowledged() {
    let mut pair = Pair::new(psk_client(), psk_server());
    // To the server: ClientHello (0), ClientHello with the cookie (1), Finished (2).
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index == 2);
    let (c, s) = pair.handshake(MINUTE).expect("recovered");
    assert_eq!(c.retransmissions, 0, "counted when the client completed");
    assert_eq!(s.retransmissions, 1, "the server resent its flight first, on its timer");
    pair.run_for(MINUTE);
    assert!(!pair.client.holds_handshake_state(), "acknowledged in the end");
    data_flows(&mut pair);
}

#[test]
fn reordered_and_coalesced_flights_connect() {
    let mut pair = Pair::new(cert_client(), cert_server());
    pair.reorder = true;
    let (c, s) = pair.handshake(MINUTE).expect("reordered");
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0));
    let mut pair = Pair::new(cert_client(), cert_server());
    pair.coalesce = true;
    pair.handshake(MINUTE).expect("coalesced");
    data_flows(&mut pair);
}

/// RFC 9147 §4: a record that ends its datagram may leave out its length. Application records,
/// each a datagram of its own, do: 2 bytes less on every one. Records packed into a flight
/// keep theirs.
#[test]
fn an_application_record_alone_in_its_datagram_leaves_out_its_length() {
    let mut pair = Pair::new(psk_client(), psk_server());
    pair.handshake(MINUTE).expect("connected");
    pair.run_for(MINUTE);
    let mut out = [0u8; 256];
    let n = pair.client.seal_into(b"x", &mut out).expect("sealed");
    // First byte and 16-bit number; "x" and its content type; AES-128-GCM's 16-byte tag.
    assert_eq!(n, 1 + 2 + 2 + 16);
    assert_eq!(out[0] & 0b0010_0100, 0b0010_0000, "a unified header without the L bit");
    let (client, server) = (pair.client_addr, pair.server_addr);
    pair.inject(client, server, out[..n].to_vec());
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_data().last().map(Vec::as_slice), Some(&b"x"[..]));
    pair.client.send(b"sent").unwrap();
    pair.run_for(Duration::from_secs(1));
    let sent = pair.log.iter().rev().find(|d| d.dir == Dir::ToServer).expect("the record sent");
    assert_eq!(sent.payload[0] & 0b100, 0, "send() leaves the length out too");
    data_flows(&mut pair);
}

#[test]
fn a_forged_record_changes_nothing() {
    let mut pair = Pair::new(psk_client(), psk_server());
    pair.handshake(MINUTE).expect("connected");
    let (client, server) = (pair.client_addr, pair.server_addr);
    // A unified header (epoch 3, 16-bit number, length) and garbage.
    let mut forged = vec![0b0010_1111, 0, 9, 0, 24];
    forged.extend_from_slice(&[0x5a; 24]);
    pair.inject(server, client, forged.clone());
    pair.inject(client, server, forged);
    assert!(pair.client.stats().records_dropped >= 1);
    data_flows(&mut pair);
    assert!(pair.client_failure().is_none() && pair.server_failure().is_none());
    assert!(!pair.client_events.iter().any(|e| matches!(e, Event::Closed)));
}

/// The epoch's two low bits of the last protected record `dir` carried.
fn last_epoch_bits(pair: &Pair, dir: Dir) -> u8 {
    let last = pair.log.iter().rev().find(|d| d.dir == dir && d.payload[0] & 0b1110_0000 == 0b0010_0000);
    last.expect("a protected record").payload[0] & 0b11
}

#[test]
fn a_key_update_both_ways_keeps_data_flowing() {
    let mut pair = Pair::new(psk_client(), psk_server());
    pair.handshake(MINUTE).expect("connected");
    pair.run_for(MINUTE);
    data_flows(&mut pair);
    assert_eq!(last_epoch_bits(&pair, Dir::ToServer), 3);
    // The client updates and asks the server to: both write in epoch 4 afterwards.
    let now = pair.now;
    pair.client.update_keys(now, true).expect("1.3 session");
    assert!(pair.client.update_keys(now, false).is_err(), "one update at a time");
    pair.run_for(MINUTE);
    data_flows(&mut pair);
    assert_eq!(last_epoch_bits(&pair, Dir::ToServer), 0, "epoch 4");
    assert_eq!(last_epoch_bits(&pair, Dir::ToClient), 0, "epoch 4");
    // The server updates alone, and again: epoch 6 one way, 4 the other.
    let h = pair.server_handle();
    pair.server.update_keys(h, false).expect("server update");
    pair.run_for(MINUTE);
    pair.server.update_keys(h, false).expect("another");
    pair.run_for(MINUTE);
    data_flows(&mut pair);
    assert_eq!(last_epoch_bits(&pair, Dir::ToClient), 2, "epoch 6");
    assert_eq!(last_epoch_bits(&pair, Dir::ToServer), 0, "epoch 4");
    assert!(pair.client_failure().is_none() && pair.server_failure().is_none());
}

#[test]
fn a_lost_key_update_is_resent_and_no_record_is_lost() {
    let mut pair = Pair::new(psk_client(), psk_server());
    pair.handshake(MINUTE).expect("connected");
    pair.run_for(MINUTE);
    let lost_from = pair.sent(Dir::ToServer);
    pair.filter = net::drop_if(move |d| d.dir == Dir::ToServer && d.index == lost_from);
    let now = pair.now;
    pair.client.update_keys(now, false).expect("update");
    pair.run_for(MINUTE);
    data_flows(&mut pair);
    assert_eq!(last_epoch_bits(&pair, Dir::ToServer), 0, "epoch 4 once the resent update was acknowledged");
    assert_eq!(pair.client.stats().flights_resent, 1);
}

#[test]
fn a_dtls_1_2_session_has_no_key_update() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).expect("connected");
    let now = pair.now;
    assert!(matches!(pair.client.update_keys(now, false), Err(Error::NotNegotiated(_))));
}

#[test]
fn the_post_quantum_hybrid_with_a_two_fragment_client_hello() {
    // The client prefers X25519MLKEM768: its first ClientHello carries no key share, the
    // server's HelloRetryRequest brings the cookie and asks for the hybrid, and the second
    // ClientHello (1.4 kB) comes in two fragments, its cookie in the first.
    let client =
        ClientConfig { groups: vec![NamedGroup::X25519MlKem768, NamedGroup::X25519], ..cert_client() };
    let mut pair = Pair::new(client, cert_server());
    let (c, s) = pair.handshake(MINUTE).expect("connected");
    assert_eq!((c.group, s.group), (Some(NamedGroup::X25519MlKem768), Some(NamedGroup::X25519MlKem768)));
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0));
    let to_server: Vec<usize> =
        pair.log.iter().filter(|d| d.dir == Dir::ToServer).map(|d| d.payload.len()).collect();
    assert!(to_server[0] < 400, "the first ClientHello is small: {to_server:?}");
    assert!(
        to_server[1] == 1200 && to_server[2] > 100,
        "the second fills a datagram and more: {to_server:?}"
    );
    data_flows(&mut pair);
    // A client that sends an x25519 share but supports the hybrid gets it from a server that
    // prefers it (the default) and asks in the HelloRetryRequest it sends anyway.
    let client =
        ClientConfig { groups: vec![NamedGroup::X25519, NamedGroup::X25519MlKem768], ..psk_client() };
    let mut pair = Pair::new(client, psk_server());
    let (c, _) = pair.handshake(MINUTE).expect("connected");
    assert_eq!(c.group, Some(NamedGroup::X25519MlKem768));
    // By default a client offers the elliptic curves only, and gets x25519.
    let mut pair = Pair::new(psk_client(), psk_server());
    let (c, _) = pair.handshake(MINUTE).expect("connected");
    assert_eq!(c.group, Some(NamedGroup::X25519));
}

// ---------------------------------------------------------------- one hello, both versions

fn offering_both(config: ClientConfig) -> ClientConfig {
    ClientConfig { versions: Versions::Both, ..config }
}

/// A client offering both versions connects in 1.3 to a server that speaks it, and in 1.2 to
/// one that speaks only 1.2, with neither side resending anything.
#[test]
fn a_client_offering_both_versions_gets_the_highest_the_server_speaks() {
    for (server_versions, expected) in [
        (Versions::Dtls13, Versions::Dtls13),
        (Versions::Both, Versions::Dtls13),
        (Versions::Dtls12, Versions::Dtls12),
    ] {
        for certificates in [false, true] {
            let (client, server) = if certificates {
                (offering_both(cert_client()), ServerConfig { versions: server_versions, ..cert_server() })
            } else {
                (offering_both(psk_client()), ServerConfig { versions: server_versions, ..psk_server() })
            };
            let mut pair = Pair::new(client, server);
            let what = format!("server {server_versions:?}, certificates {certificates}");
            let (c, s) = pair.handshake(MINUTE).unwrap_or_else(|| panic!("{what}: connected"));
            assert_eq!((c.version, s.version), (expected, expected), "{what}");
            assert_eq!(c.suite.is_tls13(), expected == Versions::Dtls13, "{what}");
            assert_eq!((c.retransmissions, s.retransmissions), (0, 0), "{what}");
            assert!(c.hello_retry || expected == Versions::Dtls12, "{what}");
            data_flows(&mut pair);
        }
    }
}

/// The hybrid group first: the first hello (offering both) carries no key share, the
/// HelloRetryRequest asks for the hybrid, and the second hello still offers DTLS 1.2 as the
/// first did (RFC 8446 §4.1.2).
#[test]
fn a_hello_offering_both_versions_retries_for_the_hybrid_as_the_same_hello() {
    let client = ClientConfig {
        groups: vec![NamedGroup::X25519MlKem768, NamedGroup::X25519],
        ..offering_both(cert_client())
    };
    let mut pair = Pair::new(client, ServerConfig { versions: Versions::Both, ..cert_server() });
    let (c, _) = pair.handshake(MINUTE).expect("connected");
    assert_eq!((c.version, c.group), (Versions::Dtls13, Some(NamedGroup::X25519MlKem768)));
    let hellos: Vec<&[u8]> =
        pair.log.iter().filter(|d| d.dir == Dir::ToServer).take(2).map(|d| &d.payload[..]).collect();
    // supported_versions listing DTLS 1.3 then 1.2, in both hellos.
    let both = [0x00, 0x2b, 0x00, 0x05, 0x04, 0xfe, 0xfc, 0xfe, 0xfd];
    for hello in hellos {
        assert!(hello.windows(both.len()).any(|w| w == both), "supported_versions lists 1.3 and 1.2");
    }
    data_flows(&mut pair);
}

/// Something on the path strips DTLS 1.3 from the hello: the server, which speaks both,
/// answers in 1.2 with the downgrade sentinel, and the client refuses at once (RFC 8446 §4.1.3).
#[test]
fn a_downgrade_to_dtls_1_2_is_caught_by_the_sentinel() {
    let mut pair =
        Pair::new(offering_both(psk_client()), ServerConfig { versions: Versions::Both, ..psk_server() });
    pair.filter = Box::new(|d| {
        if d.dir == Dir::ToServer {
            let versions = [0x00, 0x2b, 0x00, 0x05, 0x04, 0xfe, 0xfc, 0xfe, 0xfd];
            if let Some(at) = d.payload.windows(versions.len()).position(|w| w == versions) {
                // An extension type nobody knows: the server sees a 1.2-only hello.
                d.payload[at..at + 2].copy_from_slice(&[0xfa, 0xfa]);
            }
        }
        Fate::Deliver
    });
    assert!(pair.handshake(MINUTE).is_none());
    assert!(
        matches!(pair.client_failure(), Some(Error::Downgrade { alert: AlertDescription::IllegalParameter })),
        "{:?}",
        pair.client_failure()
    );
    // The same path between a client offering both and a 1.2-only server is no downgrade.
    let mut pair = Pair::new(offering_both(psk_client()), server_config());
    let (c, _) = pair.handshake(MINUTE).expect("connected in 1.2");
    assert_eq!(c.version, Versions::Dtls12);
}

/// A client offering both resumes a 1.2 session with a 1.2 server (its session ID goes in
/// legacy_session_id, RFC 9147 §5.3), and a 1.3 server, which must not echo it, runs 1.3.
#[test]
fn a_client_offering_both_versions_resumes_a_dtls_1_2_session() {
    let server12 = ServerConfig { wall_clock: AT_PKI_TIME, ..server_config() };
    let mut pair = Pair::new(offering_both(psk_client()), server12);
    let (c, _) = pair.handshake(MINUTE).expect("full handshake");
    let session = c.session.clone().expect("a session to resume");
    pair.client_addr.set_port(pair.client_addr.port() + 1);
    pair.resume_client(offering_both(psk_client()), Some(session.clone()), 2);
    pair.server_events.clear();
    let (c, s) = pair.handshake(MINUTE).expect("resumed");
    assert!(c.resumed && s.resumed);
    assert_eq!(c.version, Versions::Dtls12);
    let mut pair =
        Pair::new(offering_both(psk_client()), ServerConfig { versions: Versions::Both, ..psk_server() });
    pair.resume_client(offering_both(psk_client()), Some(session), 3);
    let (c, _) = pair.handshake(MINUTE).expect("connected");
    assert_eq!((c.version, c.resumed), (Versions::Dtls13, false));
}

/// RFC 9147 §5.3: a 1.3 server refuses a 1.3 hello that carries a legacy cookie.
#[test]
fn a_dtls_1_3_hello_with_a_legacy_cookie_is_refused() {
    let mut pair = Pair::new(psk_client(), psk_server());
    pair.filter = Box::new(|d| {
        if d.dir == Dir::ToServer && d.index == 0 {
            // record header 13, handshake header 12, version 2, random 32, session ID length 1.
            let at = 13 + 12 + 2 + 32 + 1;
            if d.payload[at] == 0 {
                d.payload[at] = 1;
                d.payload.insert(at + 1, 0x42);
                // The lengths of the record, the message and its fragment grow by one.
                let grow = |p: &mut Vec<u8>, i: usize, n: usize| {
                    let mut v = 0usize;
                    for b in &p[i..i + n] {
                        v = v << 8 | *b as usize;
                    }
                    v += 1;
                    for k in (0..n).rev() {
                        p[i + k] = v as u8;
                        v >>= 8;
                    }
                };
                grow(&mut d.payload, 11, 2);
                grow(&mut d.payload, 14, 3);
                grow(&mut d.payload, 22, 3);
            }
        }
        Fate::Deliver
    });
    assert!(pair.handshake(MINUTE).is_none());
    assert!(
        matches!(pair.client_failure(), Some(Error::AlertReceived(AlertDescription::IllegalParameter))),
        "{:?}",
        pair.client_failure()
    );
}

/// Any one datagram of the handshake lost, a client offering both versions still connects in
/// the version the server speaks: the hello is resent by the 1.2 timer before the answer, by
/// the 1.3 flight engine after it.
#[test]
fn a_client_offering_both_versions_recovers_any_lost_datagram() {
    for (server_versions, expected) in
        [(Versions::Both, Versions::Dtls13), (Versions::Dtls12, Versions::Dtls12)]
    {
        for lost in 0..6 {
            let server = ServerConfig { versions: server_versions, ..cert_server() };
            let mut pair = Pair::new(offering_both(cert_client()), server);
            pair.filter = net::drop_if(move |d| d.nth == lost);
            let what = format!("server {server_versions:?}, datagram {lost} lost");
            let (c, _) = pair.handshake(MINUTE).unwrap_or_else(|| panic!("{what}: connected"));
            assert_eq!(c.version, expected, "{what}");
            data_flows(&mut pair);
        }
    }
}

/// A PSK client configured with no group offers psk_ke alone: no key share, no
/// supported_groups (RFC 8446 §4.2.9), and the server agrees to it.
#[test]
fn a_psk_client_without_groups_offers_psk_ke_alone() {
    let client = ClientConfig { groups: Vec::new(), ..psk_client() };
    let mut pair = Pair::new(client, psk_server());
    let (c, s) = pair.handshake(MINUTE).expect("psk_ke");
    assert_eq!((c.group, s.group), (None, None));
    let hello = &pair.log[0].payload;
    let has_extension = |code: [u8; 2]| hello.windows(2).skip(13 + 12 + 2 + 32).any(|w| w == code);
    assert!(!has_extension([0x00, 0x33]), "no key_share");
    // psk_key_exchange_modes lists psk_ke (0) alone.
    assert!(hello.windows(5).any(|w| w == [0x00, 0x2d, 0x00, 0x02, 0x01]), "psk_ke alone");
    data_flows(&mut pair);
}

/// At the smallest MTU every datagram of a 1.3 handshake fits, ACKs included (an ACK names as
/// many records as fit), for a client offering both versions and for one offering 1.3 alone.
#[test]
fn every_datagram_fits_the_smallest_mtu() {
    let mtu = fastshake_dtls::MIN_MTU;
    for versions in [Versions::Dtls13, Versions::Both] {
        let client = ClientConfig { mtu, versions, ..psk_client() };
        let server = ServerConfig { mtu, ..psk_server() };
        let mut pair = Pair::new(client, server);
        pair.handshake(MINUTE).expect("connected");
        pair.run_for(Duration::from_secs(1));
        let largest = pair.log.iter().map(|d| d.payload.len()).max().unwrap_or(0);
        assert!(largest <= mtu, "{versions:?}: a datagram of {largest} B over an MTU of {mtu} B");
        assert!(pair.log.len() > 10, "the flights were fragmented");
    }
}

/// RFC 9147 §7: the server acknowledges a Finished the client resends (its first ACK lost), so
/// it reads the client's handshake epoch after the handshake; not forever, though: by its
/// handshake timeout those keys go, and the session keeps one epoch's.
#[test]
fn a_resent_finished_is_acknowledged_until_the_server_handshake_timeout_and_the_session_goes_on() {
    // The client waits longer than the server for its Finished to be acknowledged.
    let client = ClientConfig {
        handshake_timeout: 10 * MINUTE,
        max_retransmit: Duration::from_secs(8),
        ..psk_client()
    };
    // Nor is the session idle while the client resends: it goes on after the test's wait.
    let server = ServerConfig { handshake_timeout: MINUTE, idle_timeout: None, ..psk_server() };
    let mut pair = Pair::new(client, server);
    let start = pair.now;
    let lost_until = start + 5 * MINUTE;
    // The server's datagrams after its flight (HelloRetryRequest 0, flight 1): the ACKs of the
    // client's Finished, lost for five minutes.
    pair.filter = Box::new(move |d| match d.dir {
        Dir::ToClient if d.index >= 2 && d.at < lost_until => Fate::Drop,
        _ => Fate::Deliver,
    });
    pair.handshake(MINUTE).expect("connected");
    pair.run_for(10 * MINUTE);
    let forgotten = start + MINUTE + Duration::from_secs(1);
    let resends = |from: Instant, to: Instant| {
        pair.log
            .iter()
            .filter(|d| d.dir == Dir::ToServer && d.index >= 3 && d.at >= from && d.at < to)
            .count()
    };
    let acks = |from: Instant, to: Instant| {
        pair.log
            .iter()
            .filter(|d| d.dir == Dir::ToClient && d.index >= 2 && d.at >= from && d.at < to)
            .count()
    };
    assert!(resends(start, forgotten) >= 3, "the client resent its Finished: {:?}", pair.log.len());
    // The first ACK answers the Finished itself, each later one a copy.
    assert_eq!(acks(start, forgotten), 1 + resends(start, forgotten), "each copy acknowledged");
    assert!(resends(forgotten, lost_until) >= 3, "the client went on resending");
    assert_eq!(acks(forgotten, start + 11 * MINUTE), 0, "handshake keys kept past the server's timeout");
    assert!(!pair.client.holds_handshake_state(), "the client gave up waiting, its session up");
    data_flows(&mut pair);
}

/// Mutual authentication with chains of three, uncompressed, in datagrams of 99 bytes: each
/// side's certificate flight takes dozens of records, and one ACK names four.
fn mutual_at_mtu_99() -> Pair {
    let client = ClientConfig {
        certified_key: Some(Arc::new(pki().client_certified_key().unwrap())),
        certificate_compression: Arc::new(fastshake_dtls::CertificateCompression::none()),
        mtu: 99,
        ..cert_client()
    };
    let server = ServerConfig {
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        certificate_compression: Arc::new(fastshake_dtls::CertificateCompression::none()),
        mtu: 99,
        ..cert_server()
    };
    Pair::new(client, server)
}

#[test]
fn a_certificate_flight_at_mtu_99_is_acknowledged_whole_and_never_resent() {
    // At MTU 99 one ACK holds four record numbers and the client's flight (certificate,
    // signature, Finished) takes dozens of records: the server's ACKs must name them all, and
    // an ACK naming only the oldest must not have the rest resent while it is on its way.
    let mut pair = mutual_at_mtu_99();
    let (c, s) = pair.handshake(MINUTE).expect("both authenticated");
    assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3));
    let flight = pair.sent(Dir::ToServer);
    assert!(flight > 20, "a flight of {flight} datagrams is not the case this tests");
    pair.run_for(MINUTE);
    assert_eq!(pair.client.stats().flights_resent, 0);
    assert_eq!(pair.sent(Dir::ToServer), flight, "the client sent more after its flight");
    data_flows(&mut pair);
}

#[test]
fn a_lost_ack_among_several_has_the_rest_of_the_flight_resent_once() {
    // The server acknowledges the client's flight of dozens of records at MTU 99 in several
    // ACKs; the first is lost. The next names newer records: the older ones are a gap and are
    // resent, once — the ACKs after it must not have them resent again each.
    let mut pair = mutual_at_mtu_99();
    // The client's last flight is what it sends after the server's flight (dozens of datagrams);
    // the server's first datagram after it is its first ACK of that flight.
    let (mut from_server, mut flight_seen, mut dropped) = (0, false, false);
    pair.filter = Box::new(move |d| {
        match d.dir {
            Dir::ToClient => from_server += 1,
            Dir::ToServer => flight_seen |= from_server >= 10,
        }
        if d.dir == Dir::ToClient && flight_seen && !dropped {
            dropped = true;
            return Fate::Drop;
        }
        Fate::Deliver
    });
    pair.handshake(MINUTE).expect("both authenticated");
    pair.run_for(MINUTE);
    assert_eq!(pair.client.stats().flights_resent, 1);
    data_flows(&mut pair);
}

/// Replaces the x25519 key share in a hello (group 0x001d, a 32-byte key) with `point`; returns
/// whether there was one.
fn replace_x25519_share(payload: &mut [u8], point: &[u8; 32]) -> bool {
    let Some(at) = payload.windows(4).position(|w| w == [0x00, 0x1d, 0x00, 0x20]) else { return false };
    payload[at + 4..at + 36].copy_from_slice(point);
    true
}

/// x25519 points whose every shared secret is all zeros (RFC 7748 §6.1): u = 0 and u = 1.
const SMALL_ORDER_POINTS: [[u8; 32]; 2] = {
    let mut one = [0u8; 32];
    one[0] = 1;
    [[0u8; 32], one]
};

/// An x25519-only handshake in which the second hello `from` one side (the client's ClientHello
/// with the cookie, or the server's ServerHello after its HelloRetryRequest) carries `point` as
/// its key share; the handshake must fail.
fn refused_small_order_share(point: [u8; 32], from: Dir) -> Pair {
    let client = ClientConfig { groups: vec![NamedGroup::X25519], ..cert_client() };
    let mut pair = Pair::new(client, cert_server());
    pair.filter = Box::new(move |d| {
        if d.dir == from && d.index == 1 {
            assert!(replace_x25519_share(&mut d.payload, &point), "no x25519 share in the hello");
        }
        Fate::Deliver
    });
    assert!(pair.handshake(MINUTE).is_none(), "a small-order share was accepted");
    pair
}

/// RFC 8446 §7.4.2 and RFC 8422 §5.11: a client's x25519 share of small order makes the shared
/// secret all zeros, and the server refuses it with illegal_parameter rather than key a session
/// an attacker could predict.
#[test]
fn a_small_order_x25519_share_from_the_client_is_illegal_parameter() {
    for point in SMALL_ORDER_POINTS {
        let pair = refused_small_order_share(point, Dir::ToServer);
        assert_eq!(pair.server_failure(), Some(Error::AlertSent(AlertDescription::IllegalParameter)));
        assert_eq!(pair.client_failure(), Some(Error::AlertReceived(AlertDescription::IllegalParameter)));
    }
}

/// The same from the server's side: a ServerHello with a small-order x25519 share is refused by
/// the client with illegal_parameter.
#[test]
fn a_small_order_x25519_share_from_the_server_is_illegal_parameter() {
    for point in SMALL_ORDER_POINTS {
        let pair = refused_small_order_share(point, Dir::ToClient);
        assert_eq!(pair.client_failure(), Some(Error::AlertSent(AlertDescription::IllegalParameter)));
    }
}
