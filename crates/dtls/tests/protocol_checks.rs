//! Protocol details checked on the wire: ServerKeyExchange only with a hint, the
//! HelloVerifyRequest's version, the extended master secret, RFC 5746 checks, refusals that name
//! what did not match, and a non-default initial retransmission timer.
use fastshake_dtls::{AlertDescription, Connection, Error, Instant, Mismatch, Versions};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Dir};
use std::sync::Arc;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const SERVER_KEY_EXCHANGE: u8 = 12;
const HELLO_VERIFY_REQUEST: u8 = 3;
const EXT_EXTENDED_MASTER_SECRET: [u8; 2] = [0x00, 0x17];
const EXT_RENEGOTIATION_INFO: [u8; 2] = [0xff, 0x01];
const EXT_SUPPORTED_GROUPS: [u8; 2] = [0x00, 0x0a];
const EXT_SIGNATURE_ALGORITHMS: [u8; 2] = [0x00, 0x0d];

/// (epoch, handshake message type, message body when the fragment is whole) of every
/// plaintext handshake fragment in a datagram.
fn handshake_fragments(datagram: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 13 <= datagram.len() {
        let (content_type, epoch) =
            (datagram[pos], u16::from_be_bytes([datagram[pos + 3], datagram[pos + 4]]));
        let len = u16::from_be_bytes([datagram[pos + 11], datagram[pos + 12]]) as usize;
        let body = &datagram[pos + 13..pos + 13 + len];
        if content_type == 22 && epoch == 0 {
            let mut at = 0;
            while at + 12 <= body.len() {
                let frag_len = u32::from_be_bytes([0, body[at + 9], body[at + 10], body[at + 11]]) as usize;
                out.push((body[at], body[at + 12..at + 12 + frag_len].to_vec()));
                at += 12 + frag_len;
            }
        }
        pos += 13 + len;
    }
    out
}

fn messages(pair: &Pair, dir: Dir) -> Vec<(u8, Vec<u8>)> {
    pair.log.iter().filter(|d| d.dir == dir).flat_map(|d| handshake_fragments(&d.payload)).collect()
}

/// The extensions of a ClientHello or ServerHello body, as (type, data).
fn extensions(body: &[u8], is_client_hello: bool) -> Vec<([u8; 2], Vec<u8>)> {
    let mut at = 2 + 32;
    at += 1 + body[at] as usize; // session_id
    if is_client_hello {
        at += 1 + body[at] as usize; // cookie
        at += 2 + u16::from_be_bytes([body[at], body[at + 1]]) as usize; // suites
        at += 1 + body[at] as usize; // compression methods
    } else {
        at += 2 + 1; // suite, compression method
    }
    let mut out = Vec::new();
    let end = at + 2 + u16::from_be_bytes([body[at], body[at + 1]]) as usize;
    at += 2;
    while at + 4 <= end {
        let len = u16::from_be_bytes([body[at + 2], body[at + 3]]) as usize;
        out.push(([body[at], body[at + 1]], body[at + 4..at + 4 + len].to_vec()));
        at += 4 + len;
    }
    out
}

/// Rebuilds a datagram holding one whole ClientHello with `edit` applied to its extensions.
fn edit_client_hello(datagram: &[u8], edit: impl FnOnce(&mut Vec<([u8; 2], Vec<u8>)>)) -> Vec<u8> {
    let body = &datagram[13 + 12..];
    let mut ext = extensions(body, true);
    edit(&mut ext);
    let mut at = 2 + 32;
    at += 1 + body[at] as usize;
    at += 1 + body[at] as usize;
    at += 2 + u16::from_be_bytes([body[at], body[at + 1]]) as usize;
    at += 1 + body[at] as usize;
    let mut new_body = body[..at].to_vec();
    let ext_bytes: Vec<u8> = ext
        .iter()
        .flat_map(|(t, d)| {
            [t[0], t[1]].into_iter().chain((d.len() as u16).to_be_bytes()).chain(d.iter().copied())
        })
        .collect();
    new_body.extend_from_slice(&(ext_bytes.len() as u16).to_be_bytes());
    new_body.extend(ext_bytes);
    let len = (new_body.len() as u32).to_be_bytes();
    let mut out = datagram[..13 + 12].to_vec();
    out[11..13].copy_from_slice(&((12 + new_body.len()) as u16).to_be_bytes());
    out[13 + 1..13 + 4].copy_from_slice(&len[1..]); // length
    out[13 + 9..13 + 12].copy_from_slice(&len[1..]); // fragment_length
    out.extend(new_body);
    out
}

#[test]
fn server_key_exchange_only_when_a_hint_is_configured() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).expect("handshake without hint");
    assert!(!messages(&pair, Dir::ToClient).iter().any(|(t, _)| *t == SERVER_KEY_EXCHANGE));

    let mut config = server_config();
    config.psk_identity_hint = Some(b"hint".to_vec());
    let mut pair = Pair::new(client_config(), config);
    pair.handshake(MINUTE).expect("handshake with hint");
    let ske: Vec<_> =
        messages(&pair, Dir::ToClient).into_iter().filter(|(t, _)| *t == SERVER_KEY_EXCHANGE).collect();
    assert_eq!(ske.len(), 1);
    assert_eq!(ske[0].1, [0, 4, b'h', b'i', b'n', b't'], "RFC 4279: the hint, length-prefixed");
}

#[test]
fn hello_verify_request_says_dtls_1_0_and_is_smaller_than_the_hello() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).expect("handshake");
    let hvr_datagram = &pair.log.iter().find(|d| d.dir == Dir::ToClient).unwrap().payload;
    let (t, body) = &handshake_fragments(hvr_datagram)[0];
    assert_eq!(*t, HELLO_VERIFY_REQUEST);
    // RFC 6347 §4.2.1: server_version 0xFEFF (DTLS 1.0) whatever version is negotiated.
    assert_eq!(body[..2], [0xfe, 0xff]);
    let first_hello = &pair.log.iter().find(|d| d.dir == Dir::ToServer).unwrap().payload;
    assert!(hvr_datagram.len() <= first_hello.len(), "no amplification before the cookie");
}

#[test]
fn server_echoes_extended_master_secret_and_renegotiation_info() {
    let mut pair = Pair::new(client_config(), server_config());
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    assert!(c.extended_master_secret && s.extended_master_secret);
    let server_hello =
        messages(&pair, Dir::ToClient).into_iter().find(|(t, _)| *t == 2).expect("ServerHello").1;
    let ext = extensions(&server_hello, false);
    assert!(ext.contains(&(EXT_EXTENDED_MASTER_SECRET, vec![])), "RFC 7627 echo");
    assert!(ext.contains(&(EXT_RENEGOTIATION_INFO, vec![0])), "RFC 5746 §3.6: an empty renegotiation_info");
}

/// Runs the cookie exchange, then hands the server the cookie ClientHello edited by `edit`
/// (the original is lost on the way).
fn server_answer_to_edited_hello(
    server_config: fastshake_dtls::ServerConfig,
    edit: impl FnOnce(&mut Vec<([u8; 2], Vec<u8>)>),
) -> Pair {
    answer_to_edited_hello(client_config(), server_config, |datagram| edit_client_hello(datagram, edit))
}

/// [`server_answer_to_edited_hello`] for any client, with any edit of the whole datagram.
fn answer_to_edited_hello(
    client_config: fastshake_dtls::ClientConfig,
    server_config: fastshake_dtls::ServerConfig,
    edit: impl FnOnce(&[u8]) -> Vec<u8>,
) -> Pair {
    let mut pair = Pair::new(client_config, server_config);
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index == 1);
    pair.run_for(Duration::from_millis(100));
    let cookie_hello =
        pair.log.iter().filter(|d| d.dir == Dir::ToServer).nth(1).expect("cookie hello").payload.clone();
    assert_eq!(pair.server.stats().connections_open, 0);
    let mut edited = edit(&cookie_hello);
    let (sa, ca) = (pair.server_addr, pair.client_addr);
    pair.server.handle_datagram(pair.now, sa, ca, &mut edited);
    while let Some((h, e)) = pair.server.poll_event() {
        pair.server_events.push((h, e));
    }
    pair
}

#[test]
fn server_refuses_a_non_empty_renegotiation_info_in_an_initial_hello() {
    let pair =
        server_answer_to_edited_hello(server_config(), |ext| ext.push((EXT_RENEGOTIATION_INFO, vec![1, 5])));
    assert_eq!(
        pair.server_failure(),
        Some(Error::NoMatch { alert: AlertDescription::HandshakeFailure, mismatch: Mismatch::Renegotiation })
    );
    // Control: the same edit path with an empty renegotiation_info is accepted.
    let pair =
        server_answer_to_edited_hello(server_config(), |ext| ext.push((EXT_RENEGOTIATION_INFO, vec![0])));
    assert_eq!(pair.server_failure(), None);
    assert_eq!(pair.server.stats().connections_open, 1);
}

#[test]
fn server_requiring_the_extended_master_secret_refuses_a_hello_without_it() {
    let mut config = server_config();
    config.require_extended_master_secret = true;
    let pair =
        server_answer_to_edited_hello(config, |ext| ext.retain(|(t, _)| *t != EXT_EXTENDED_MASTER_SECRET));
    let refused = pair.server_failure().expect("refused");
    assert_eq!(
        refused,
        Error::NoMatch {
            alert: AlertDescription::HandshakeFailure,
            mismatch: Mismatch::ExtendedMasterSecret
        }
    );
    assert!(refused.to_string().contains("extended master secret"), "{refused}");
    let mut config = server_config();
    config.require_extended_master_secret = true;
    let pair = server_answer_to_edited_hello(config, |_| {});
    assert_eq!(pair.server_failure(), None, "the unedited hello is accepted");
}

#[test]
fn non_default_initial_retransmit_timer_is_used_and_doubles() {
    let mut config = client_config();
    config.initial_retransmit = Duration::from_secs(2);
    let start = Instant::from_millis(1_000);
    let server: std::net::SocketAddr = "198.51.100.1:5684".parse().unwrap();
    let mut client = Connection::client(Arc::new(config), start, server, [1; 32]);
    assert!(client.poll_transmit(start).is_some());
    assert_eq!(client.poll_timeout(), Some(start + Duration::from_secs(2)));
    client.handle_timeout(start + Duration::from_secs(2));
    assert!(client.poll_transmit(start).is_some(), "the ClientHello is resent after 2 s");
    assert_eq!(client.poll_timeout(), Some(start + Duration::from_secs(2 + 4)), "then the timer doubles");

    let mut config = server_config();
    config.initial_retransmit = Duration::from_secs(2);
    let mut pair = Pair::new(client_config(), config);
    // Flight 4 is lost: the server resends it 2 s after sending it.
    pair.filter = net::drop_if(|d| d.dir == Dir::ToClient && d.index == 1);
    pair.step(pair.now + MINUTE);
    pair.step(pair.now + MINUTE);
    pair.step(pair.now + MINUTE);
    let flight4_sent = pair.now;
    assert_eq!(pair.sent(Dir::ToClient), 2);
    assert_eq!(pair.server.poll_timeout(), Some(flight4_sent + Duration::from_secs(2)));
    pair.handshake(MINUTE).expect("completes after the resend");
}

/// A server with a P-256 certificate and a client that trusts it (certificate suites only).
fn certificate_pair_configs() -> (fastshake_dtls::ClientConfig, fastshake_dtls::ServerConfig) {
    use fastshake_pki::generate::{generate, KeyKind};
    const PKI_TIME: u64 = 1_800_000_000;
    let pki = generate(1, KeyKind::P256, &[], PKI_TIME, 2).unwrap();
    let wall_clock = Some(fastshake_dtls::WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });
    let anchors = Arc::new(fastshake_dtls::TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap());
    let client = fastshake_dtls::ClientConfig {
        versions: Versions::Dtls12,
        trust_anchors: Some(anchors),
        server_name: Some("localhost".into()),
        wall_clock,
        ..Default::default()
    };
    let server = fastshake_dtls::ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(Arc::new(pki.server_certified_key().unwrap())),
        wall_clock,
        ..Default::default()
    };
    (client, server)
}

/// The list extension `ext` replaced by one holding only `code`.
fn offer_only(ext: &mut [([u8; 2], Vec<u8>)], kind: [u8; 2], code: u16) {
    let entry = ext.iter_mut().find(|(t, _)| *t == kind).expect("the client offers the extension");
    entry.1 = [2u16.to_be_bytes(), code.to_be_bytes()].concat();
}

fn assert_refused_for(pair: &Pair, expected: Mismatch, words: &str) {
    let refused = pair.server_failure().expect("the server refused");
    assert_eq!(refused, Error::NoMatch { alert: AlertDescription::HandshakeFailure, mismatch: expected });
    assert!(refused.to_string().contains(words), "{refused}");
}

#[test]
fn a_server_names_the_group_it_found_no_match_for() {
    let (client, server) = certificate_pair_configs();
    // secp384r1 (24) only: a group we do not implement.
    let pair = answer_to_edited_hello(client, server, |hello| {
        edit_client_hello(hello, |ext| offer_only(ext, EXT_SUPPORTED_GROUPS, 24))
    });
    assert_refused_for(
        &pair,
        Mismatch::Group { offered: vec![24], ours: vec![29, 23] },
        "no common group: the client offered 0x0018; we support x25519, secp256r1",
    );
}

#[test]
fn a_server_names_the_signature_schemes_it_found_no_match_for() {
    let (client, server) = certificate_pair_configs();
    // rsa_pss_rsae_sha512 only, which a P-256 key cannot make.
    let pair = answer_to_edited_hello(client, server, |hello| {
        edit_client_hello(hello, |ext| offer_only(ext, EXT_SIGNATURE_ALGORITHMS, 0x0806))
    });
    assert_refused_for(
        &pair,
        Mismatch::SignatureScheme { offered: vec![0x0806], ours: vec![0x0403] },
        "no common signature scheme: the client offered 0x0806; our key signs with ecdsa_secp256r1_sha256",
    );
}

#[test]
fn a_server_names_the_version_it_found_no_match_for() {
    // Every ClientHello says client_version DTLS 1.0 (0xFEFF), after the record and handshake
    // headers; the cookie covers the version, so both hellos must say it.
    let mut pair = Pair::new(client_config(), server_config());
    pair.filter = Box::new(|d| {
        if d.dir == Dir::ToServer && d.payload.get(13) == Some(&1) {
            d.payload[13 + 12..13 + 14].copy_from_slice(&[0xfe, 0xff]);
        }
        net::Fate::Deliver
    });
    assert!(pair.handshake(MINUTE).is_none());
    let refused = pair.server_failure().expect("the server refused");
    assert_eq!(
        refused,
        Error::NoMatch {
            alert: AlertDescription::ProtocolVersion,
            mismatch: Mismatch::Version { offered: 0xfeff },
        }
    );
    assert!(refused.to_string().contains("no common version"), "{refused}");
}

#[test]
fn a_certificate_client_against_a_psk_server_is_told_what_it_offered() {
    let (client, _) = certificate_pair_configs();
    let mut pair = Pair::new(client, server_config());
    assert!(pair.handshake(MINUTE).is_none());
    let server = pair.server_failure().expect("the server refused").to_string();
    assert!(server.contains("no common cipher suite: the client offered TLS_ECDHE_ECDSA_"), "{server}");
    assert!(server.contains("this server serves TLS_PSK_WITH_AES_128_CCM_8"), "{server}");
    let client = pair.client_failure().expect("the client failed");
    assert_eq!(client.alert(), Some(AlertDescription::HandshakeFailure));
    let client = client.to_string();
    assert!(client.contains("the server refused our ClientHello with alert handshake_failure"), "{client}");
    assert!(client.contains("we offered TLS_ECDHE_ECDSA_"), "{client}");
}
