//! Entry points for the fuzz targets (`fuzz/fuzz_targets/dtls_*.rs`) and for the replay of
//! their corpora (`tests/fuzz_corpus.rs`). Not a stable API.
//!
//! The parser entry points reach types private to the engine, so they live here, and the
//! session target with them: per input it needs an established session fast and the same one
//! every time (its seed corpus is that session's own records, written by
//! `examples/capture_corpus.rs`). [`established_pair`] is that fixture, which the engine's unit
//! tests share: a PSK handshake in lock step, with no clock, no loss and no addresses that
//! move. It is not a test harness; tests that need a network use `fastshake-testkit`'s
//! `dtls::Pair` (unit tests cannot: a dev-dependency on it would link a second copy of this
//! crate, whose types differ from the ones under test).

use crate::config::{ClientConfig, Mobility, ServerConfig};
use crate::connection::Connection;
use crate::endpoint::Endpoint;
use crate::handshake::{
    parse_certificate, parse_certificate_verify, parse_ecdhe_client_key_exchange, parse_finished,
    parse_fragments, parse_new_session_ticket, parse_psk_identity, CertificateRequest, ClientHello,
    EcdheServerKeyExchange, Extensions, Fragment, HandshakeType, HelloVerifyRequest, Reassembler,
    ServerHello,
};
use crate::record::{ContentType, Records, ReplayWindow};
use crate::session::{ClientSession, ServerSession, TicketKeys};
use fastshake_core::codec::Reader;
use fastshake_core::Instant;
use std::net::SocketAddr;
use std::sync::Arc;

const PSK_ID: &[u8] = b"fuzz";
const PSK_KEY: &[u8] = b"fuzz key 0123456";

pub(crate) fn client_addr() -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 1], 5684))
}

pub(crate) fn server_addr() -> SocketAddr {
    SocketAddr::from(([198, 51, 100, 1], 5684))
}

fn parse_message(msg_type: HandshakeType, body: &[u8]) {
    match msg_type {
        HandshakeType::ClientHello => {
            if let Ok(ch) = ClientHello::parse(body) {
                let _ = ch.suites().count();
                ch.extensions
                    .cached_info
                    .into_iter()
                    .chain(ch.extensions.client_cert_cache)
                    .for_each(caching);
                client_hello13(body, &ch.extensions);
            }
        }
        HandshakeType::ServerHello => {
            if let Ok(sh) = ServerHello::parse(body) {
                sh.extensions
                    .cached_info
                    .into_iter()
                    .chain(sh.extensions.client_cert_cache)
                    .for_each(caching);
                server_hello13(&sh.extensions);
            }
        }
        HandshakeType::HelloVerifyRequest => {
            let _ = HelloVerifyRequest::parse(body);
        }
        HandshakeType::ServerKeyExchange | HandshakeType::ClientKeyExchange => {
            let _ = parse_psk_identity(body);
            let _ = EcdheServerKeyExchange::parse(body);
            let _ = parse_ecdhe_client_key_exchange(body);
        }
        HandshakeType::Certificate => {
            let _ = parse_certificate(body);
        }
        HandshakeType::CertificateRequest => {
            let _ = CertificateRequest::parse(body);
        }
        HandshakeType::CertificateVerify => {
            let _ = parse_certificate_verify(body);
        }
        HandshakeType::NewSessionTicket => {
            if let Ok((_, ticket)) = parse_new_session_ticket(body) {
                // A ticket from the network opened by a server, and session bytes read back.
                let _ = ServerSession::open(&TicketKeys::new(0, [0; 16]), ticket, 1);
                let _ = ClientSession::from_bytes(ticket);
            }
        }
        HandshakeType::Finished => {
            let _ = parse_finished(body);
        }
        _ => {}
    }
    parse_message13(msg_type, body);
}

/// The DTLS 1.3 readings of a message type the two versions share, and the 1.3-only ones.
fn parse_message13(msg_type: HandshakeType, body: &[u8]) {
    use crate::handshake::{
        parse_certificate13, parse_encrypted_extensions, parse_key_update, parse_new_connection_id,
        parse_request_connection_id, CertificateRequest13, NewSessionTicket13,
    };
    match msg_type {
        HandshakeType::EncryptedExtensions => {
            let _ = parse_encrypted_extensions(body);
        }
        HandshakeType::CertificateRequest => {
            let _ = CertificateRequest13::parse(body);
        }
        HandshakeType::Certificate => {
            let _ = parse_certificate13(body);
            // Or abbreviated (handshake caching, seed 003 §IV-D): what parses writes back.
            if let Ok((context, count)) = crate::handshake::parse_abbreviated_certificate13(body) {
                let mut again = Vec::new();
                crate::handshake::encode_abbreviated_certificate13(&mut again, context, count);
                assert_eq!(crate::handshake::parse_abbreviated_certificate13(&again), Ok((context, count)));
            }
        }
        HandshakeType::CompressedCertificate => {
            // Decompressed within its bounds, then read as the Certificate it carries.
            let Ok(message) = crate::handshake::CompressedCertificate::parse(body) else { return };
            let Some(algorithm) = crate::handshake::CompressionAlgorithm::from_code(message.algorithm) else {
                return;
            };
            if let Ok(certificate) =
                algorithm.decompress(message.compressed, message.uncompressed_length as usize)
            {
                assert_eq!(certificate.len(), message.uncompressed_length as usize);
                let _ = parse_certificate13(&certificate);
            }
        }
        HandshakeType::NewSessionTicket => {
            let _ = NewSessionTicket13::parse(body);
        }
        HandshakeType::KeyUpdate => {
            let _ = parse_key_update(body);
        }
        HandshakeType::NewConnectionId => {
            let _ = parse_new_connection_id(body);
        }
        HandshakeType::RequestConnectionId => {
            let _ = parse_request_connection_id(body);
        }
        _ => {}
    }
}

/// A ClientHello's TLS 1.3 extensions read as their types; when pre_shared_key is last, its
/// binders must be the body's last bytes, as the binder computation takes them to be.
fn client_hello13(body: &[u8], ext: &Extensions<'_>) {
    use crate::handshake::{client_shares, offered_versions, psk_modes_allow, OfferedPsks, PSK_DHE_KE};
    if let Some(v) = ext.supported_versions.and_then(|d| offered_versions(d).ok()) {
        let _ = v.iter().count();
    }
    if let Some(d) = ext.key_share {
        let _ = client_shares(d);
    }
    if let Some(modes) = ext.psk_key_exchange_modes {
        let _ = psk_modes_allow(modes, PSK_DHE_KE);
    }
    if let Some(Ok(psks)) = ext.pre_shared_key.map(OfferedPsks::parse) {
        if ext.pre_shared_key_last {
            // The truncated ClientHello (RFC 8446 §4.2.11.2) ends at the binders list's length.
            let tail = &body[body.len() - psks.binders_len..];
            assert_eq!(usize::from(u16::from_be_bytes([tail[0], tail[1]])), psks.binders_len - 2);
        }
    }
}

/// A ServerHello's (or HelloRetryRequest's) TLS 1.3 extensions read as their types.
fn server_hello13(ext: &Extensions<'_>) {
    use crate::handshake::{hrr_selected_group, selected_identity, selected_version, server_share};
    if let Some(d) = ext.supported_versions {
        let _ = selected_version(d);
    }
    if let Some(d) = ext.key_share {
        let _ = server_share(d);
        let _ = hrr_selected_group(d);
    }
    if let Some(d) = ext.pre_shared_key {
        let _ = selected_identity(d);
    }
}

/// DTLS 1.3 handshake messages: the first byte picks the type (any code, known or not), the
/// rest is the body, read by every 1.3 parser of that type.
pub fn handshake13_message(data: &[u8]) {
    let Some((&t, body)) = data.split_first() else { return };
    let Some(msg_type) = HandshakeType::from_u8(t) else { return };
    match msg_type {
        HandshakeType::ClientHello => {
            if let Ok(ch) = ClientHello::parse(body) {
                client_hello13(body, &ch.extensions);
            }
        }
        HandshakeType::ServerHello => {
            if let Ok(sh) = ServerHello::parse(body) {
                let _ = crate::handshake::is_hello_retry_request(&sh.random);
                server_hello13(&sh.extensions);
            }
        }
        HandshakeType::CertificateVerify => {
            let _ = parse_certificate_verify(body);
        }
        _ => parse_message13(msg_type, body),
    }
}

/// Record layer: split a datagram into records, run the replay window, and parse every
/// handshake record's fragments and messages.
pub fn record_layer(data: &[u8]) {
    let _ = crate::wire::records(data);
    // The endpoint's first look at a datagram: a tls12_cid or 1.3 unified header's CID.
    let mut routed = data.to_vec();
    let _ = crate::endpoint::Incoming::new(&mut routed, 4).connection_id().map(<[u8]>::len);
    // The same bytes as records of a receiver issuing 4-byte Connection IDs (RFC 9146).
    for rec in Records::with_cid(data, 4) {
        let Ok((header, range)) = rec else { break };
        let _ = (header.len(), data.get(range));
    }
    unified_records(data);
    let mut window = ReplayWindow::default();
    for rec in Records::new(data) {
        let Ok((header, range)) = rec else { break };
        if window.is_fresh(header.seq) {
            window.mark(header.seq);
        }
        if header.content_type == ContentType::Handshake {
            if let Some(body) = data.get(range) {
                handshake_record(body);
            }
        }
    }
}

/// The same bytes as DTLS 1.3 records (RFC 9147 §4), with and without Connection IDs: each
/// header read, its sequence number decrypted and widened, the next record after its length.
fn unified_records(data: &[u8]) {
    use crate::record::unified::{SequenceCipher, SequenceKey, UnifiedHeader};
    let key = SequenceKey::new(SequenceCipher::Aes128, &[0x42; 16]).expect("a 16-byte AES-128 key");
    for cid_len in [0, 4] {
        let mut datagram = data.to_vec();
        let mut at = 0;
        while at < datagram.len() {
            let Ok(header) = UnifiedHeader::parse(&mut Reader::new(&datagram[at..]), cid_len) else { break };
            let end = at + header.header_len() + header.length as usize;
            if key.apply(&header, &mut datagram[at..end]) {
                let _ = header.full_seq(u64::from(header.seq) << 8);
            }
            // Inside, after decryption, an ACK is one of the messages a 1.3 record carries.
            if let Ok(ack) = crate::record::ack::Ack::parse(&datagram[at + header.header_len()..end]) {
                let _ = ack.numbers().count();
            }
            at = end;
        }
    }
}

/// Handshake layer: fragments of one record body through the reassembler, then every
/// completed message through its parser.
pub fn handshake_record(body: &[u8]) {
    let mut reassembler = Reassembler::new(0);
    for f in parse_fragments(body) {
        let Ok((header, data)) = f else { break };
        reassembler.insert(&Fragment { header, data });
        while let Some((msg_type, _, msg)) = reassembler.pop() {
            parse_message(msg_type, &msg);
        }
    }
    // The raw body read as each message type too, so parsers see arbitrary bytes directly.
    let mut r = Reader::new(body);
    if let Ok(t) = r.u8() {
        if let Some(msg_type) = HandshakeType::from_u8(t) {
            parse_message(msg_type, r.rest());
        }
    }
}

/// A listening endpoint given `data` as one datagram from a new client, then a real client
/// handshake through it: the endpoint must neither panic nor refuse the honest client.
pub fn endpoint_datagram(data: &[u8]) {
    let config = Arc::new(ServerConfig::psk(PSK_ID, PSK_KEY));
    let mut endpoint = Endpoint::new(config, [3; 32]).expect("a valid server configuration");
    let now = Instant::from_millis(1);
    let mut d = data.to_vec();
    endpoint.handle_datagram(now, server_addr(), client_addr(), &mut d);
    while endpoint.poll_transmit(now).is_some() {}
    endpoint.handle_timeout(Instant::from_millis(100_000));
    while endpoint.poll_transmit(now).is_some() {}
    while endpoint.poll_event().is_some() {}
    endpoint13_datagram(data);
}

/// `data` at an endpoint holding an established DTLS 1.3 session with Connection IDs: a
/// unified header with the C bit gets the session's CID spliced in, so the input reaches the
/// session's CID check and record layer rather than only the endpoint's routing (RFC 9147 §4).
/// From a stranger or from the client, nothing may move the session or stop it carrying data.
fn endpoint13_datagram(data: &[u8]) {
    let (mut client, mut server, _) = established_pair13_with(cid_mobility(3), cid_mobility(4));
    let h = server.handle_for(client_addr()).expect("the 1.3 fixture connects");
    assert!(client.connection_id().is_some(), "the 1.3 fixture negotiates CIDs");
    let now = Instant::from_millis(2);
    let mut d = data.to_vec();
    let with_cid = d
        .first()
        .is_some_and(|&b| crate::record::unified::is_unified(b) && b & crate::record::unified::CID_BIT != 0);
    if let (true, Some(cid)) = (with_cid && d.len() > 4, server.connection(h).and_then(|c| c.connection_id()))
    {
        d[1..1 + cid.len()].copy_from_slice(cid);
    }
    let stranger = SocketAddr::from(([203, 0, 113, 66], 666));
    for from in [stranger, client_addr()] {
        let mut input = d.clone();
        server.handle_datagram(now, server_addr(), from, &mut input);
    }
    debug_assert!(server.handle_for(stranger).is_none(), "unauthenticated input moved a session");
    while server.poll_transmit(now).is_some() {}
    while server.poll_event().is_some() {}
    let mut out = [0u8; 256];
    let sealed = client.seal_into(b"still alive", &mut out);
    debug_assert!(sealed.is_ok(), "the client's session is up");
    if let Ok(n) = sealed {
        let mut got = false;
        let incoming = server.incoming(&mut out[..n]);
        debug_assert!(incoming.connection_id().is_some(), "a 1.3 record routed by its CID");
        server.open_in_place(now, server_addr(), client_addr(), incoming, &mut |_, p| {
            got = p == b"still alive";
        });
        debug_assert!(got, "session survives arbitrary input");
    }
}

/// Connection IDs of `n` bytes and address checks.
fn cid_mobility(n: u8) -> Mobility {
    Mobility { connection_id: Some(n), return_routability_check: true, follow_server_port: false }
}

/// A client and a server endpoint after a DTLS 1.2 PSK handshake in lock step (every datagram handed over
/// at once, no clock), and one application record each way; returns them and every datagram
/// (`true`: client to server).
pub fn established_pair() -> (Connection, Endpoint, Vec<(bool, Vec<u8>)>) {
    established_pair_with(Mobility::default(), Mobility::default())
}

/// Like [`established_pair`] (DTLS 1.2), with session mobility configured on each side.
pub fn established_pair_with(
    client_mobility: Mobility,
    server_mobility: Mobility,
) -> (Connection, Endpoint, Vec<(bool, Vec<u8>)>) {
    let versions = crate::config::Versions::Dtls12;
    established(
        ClientConfig { versions, mobility: client_mobility, ..ClientConfig::psk(PSK_ID, PSK_KEY) },
        ServerConfig { versions, mobility: server_mobility, ..ServerConfig::psk(PSK_ID, PSK_KEY) },
    )
}

/// Like [`established_pair_with`], in DTLS 1.3 (the stateless HelloRetryRequest included).
pub fn established_pair13_with(
    client_mobility: Mobility,
    server_mobility: Mobility,
) -> (Connection, Endpoint, Vec<(bool, Vec<u8>)>) {
    let versions = crate::config::Versions::Dtls13;
    established(
        ClientConfig { versions, mobility: client_mobility, ..ClientConfig::psk(PSK_ID, PSK_KEY) },
        ServerConfig { versions, mobility: server_mobility, ..ServerConfig::psk(PSK_ID, PSK_KEY) },
    )
}

fn established(
    client_config: ClientConfig,
    server_config: ServerConfig,
) -> (Connection, Endpoint, Vec<(bool, Vec<u8>)>) {
    let (client_config, server_config) = (Arc::new(client_config), Arc::new(server_config));
    let now = Instant::from_millis(1);
    let mut client = Connection::client(client_config, now, server_addr(), [1; 32]);
    let mut server = Endpoint::new(server_config, [2; 32]).expect("a valid server configuration");
    let mut log = Vec::new();
    let mut sent_data = false;
    for _ in 0..20 {
        while let Some(t) = client.poll_transmit(now) {
            let mut d = t.payload;
            log.push((true, d.clone()));
            server.handle_datagram(now, server_addr(), client_addr(), &mut d);
        }
        while let Some(t) = server.poll_transmit(now) {
            let mut d = t.payload;
            log.push((false, d.clone()));
            client.handle_datagram(now, server_addr(), &mut d);
        }
        while server.poll_event().is_some() {}
        while client.poll_event().is_some() {}
        if client.is_established() && !sent_data {
            sent_data = true;
            let _ = client.send(b"fuzz data from the client");
            if let Some(h) = server.handle_for(client_addr()) {
                let _ = server.send(h, b"fuzz data from the server");
            }
        }
    }
    (client, server, log)
}

/// `data` as a datagram to both sides of an established session: no panic, and the session
/// still carries data afterwards (checked with a debug assertion so fuzzers see it).
pub fn established_session(data: &[u8]) {
    session_input(data, Mobility::default(), Mobility::default());
    // Connection IDs both ways (so both sides parse tls12_cid records) and address checks.
    let cid =
        |n| Mobility { connection_id: Some(n), return_routability_check: true, follow_server_port: true };
    session_input(data, cid(3), cid(4));
}

fn session_input(data: &[u8], client_mobility: Mobility, server_mobility: Mobility) {
    let (mut client, mut server, _) = established_pair_with(client_mobility, server_mobility);
    let now = Instant::from_millis(2);
    // The same bytes from an address the session never used: nothing there authenticates, so
    // the session must not move.
    let stranger = SocketAddr::from(([203, 0, 113, 66], 666));
    let mut d = data.to_vec();
    server.handle_datagram(now, server_addr(), stranger, &mut d);
    debug_assert!(server.handle_for(stranger).is_none(), "unauthenticated input moved a session");
    let mut d = data.to_vec();
    client.handle_datagram(now, server_addr(), &mut d);
    let mut d = data.to_vec();
    server.handle_datagram(now, server_addr(), client_addr(), &mut d);
    while client.poll_transmit(now).is_some() {}
    while server.poll_transmit(now).is_some() {}
    let mut out = [0u8; 256];
    if let Ok(n) = client.seal_into(b"still alive", &mut out) {
        let mut got = false;
        let incoming = server.incoming(&mut out[..n]);
        server.open_in_place(now, server_addr(), client_addr(), incoming, &mut |_, p| {
            got = p == b"still alive";
        });
        debug_assert!(got, "session survives arbitrary input");
    }
}

/// `data` as a datagram to a client waiting for the server's first answer.
pub fn client_datagram(data: &[u8]) {
    let config = Arc::new(ClientConfig::psk(PSK_ID, PSK_KEY));
    let now = Instant::from_millis(1);
    let mut client = Connection::client(config, now, server_addr(), [5; 32]);
    while client.poll_transmit(now).is_some() {}
    let mut d = data.to_vec();
    client.handle_datagram(now, server_addr(), &mut d);
    while client.poll_transmit(now).is_some() {}
    while client.poll_event().is_some() {}
}

/// Handshake caching: the extension bodies of both roles (RFC 7924 `cached_info`,
/// client-certificate caching), the fingerprint message, and a client cache store read back
/// (a corrupt cache file must only mean an empty cache). What parses must round-trip.
pub fn caching(data: &[u8]) {
    use crate::handshake::{
        parse_cached_info_offer, parse_cached_info_selection, parse_client_cert_answer,
        parse_client_cert_offer, parse_fingerprint_message,
    };
    let _ = parse_cached_info_offer(data);
    let _ = parse_cached_info_selection(data);
    let _ = parse_fingerprint_message(data);
    let _ = parse_client_cert_offer(data);
    let _ = parse_client_cert_answer(data);
    if let Ok(store) = crate::cache::MemoryCacheStore::from_bytes(data) {
        let again = crate::cache::MemoryCacheStore::from_bytes(&store.to_bytes());
        assert_eq!(again.as_ref(), Ok(&store), "a store read back writes the same store");
    }
}
