//! Handshake caching in DTLS 1.3 (seed 003 §IV-D) on the in-memory pair: the server's chain
//! cached by the client (its fingerprint in the ClientHello, the selection in
//! EncryptedExtensions, an abbreviated Certificate in place of the chain), the client's chain
//! cached by the server under a ticket from the 1.3 key schedule, one cache entry for both
//! versions, and every tampered, stale, replayed or foreign ticket or fingerprint falling back
//! to a full handshake or failing with the right alert. The refusals of a server that selects
//! what was never offered, or abbreviates wrongly, are tested beside the code that reads them
//! (`connection::tls13::cached`), since 1.3 encrypts them.

mod caching_common;

use caching_common::*;
use fastshake_dtls::{
    AlertDescription, CacheStore, CachedServer, CertificateCompression, CertifiedKey, ClientConfig,
    ClientSession, CompressionAlgorithm, Error, Event, MemoryCacheStore, ServerConfig, Versions,
};
use fastshake_testkit::dtls::Pair;
use fastshake_testkit::net::{self, Dir};
use std::sync::Arc;
use std::time::Duration;

/// A 1.3 client with both kinds of caching offered (compression off unless asked: the bytes
/// below compare the two).
fn client13(cached_info: bool, client_caching: bool) -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls13,
        certificate_compression: Arc::new(CertificateCompression::none()),
        ..client(p256_pki(), cached_info, client_caching)
    }
}

fn server13() -> ServerConfig {
    ServerConfig {
        versions: Versions::Both,
        certificate_compression: Arc::new(CertificateCompression::none()),
        ..server(p256_pki())
    }
}

fn compressed(mut config: ClientConfig) -> ClientConfig {
    config.certificate_compression = Arc::new(CertificateCompression::new(&[CompressionAlgorithm::Zstd]));
    config
}

/// A first 1.3 handshake with caching offered: the entry the client keeps.
fn first13(pair: &mut Pair) -> CachedServer {
    let (c, _, entry) = first_handshake(pair);
    assert_eq!(c.version, Versions::Dtls13);
    assert!(entry.has_certificate() && entry.has_client_ticket() && !entry.has_certificate_request());
    entry
}

/// `entry` with its ticket replaced, through the store's byte format (the ticket is its last
/// 8 bytes).
fn with_ticket(entry: &CachedServer, ticket: [u8; 8]) -> CachedServer {
    edit(entry, |bytes| {
        let n = bytes.len();
        bytes[n - 8..].copy_from_slice(&ticket);
    })
}

/// `entry` with one byte of the cached server chain changed (the fingerprint no longer matches).
fn with_other_chain(entry: &CachedServer) -> CachedServer {
    let leaf = p256_pki().server_certified_key().unwrap().chain[0].clone();
    edit(entry, |bytes| {
        let at = bytes.windows(leaf.len()).position(|w| w == leaf.as_ref()).expect("the leaf is cached");
        bytes[at + leaf.len() - 1] ^= 1;
    })
}

fn edit(entry: &CachedServer, change: impl FnOnce(&mut Vec<u8>)) -> CachedServer {
    let mut store = MemoryCacheStore::new();
    store.store("s", entry.clone());
    let mut bytes = store.to_bytes();
    change(&mut bytes);
    MemoryCacheStore::from_bytes(&bytes).unwrap().load("s").unwrap()
}

fn server_failure(pair: &Pair) -> Option<Error> {
    pair.server_events.iter().find_map(|(_, e)| match e {
        Event::Failed(e) => Some(e.clone()),
        _ => None,
    })
}

#[test]
fn both_chains_are_cached_and_abbreviated_certificates_stand_for_them() {
    let pki = p256_pki();
    let mut pair = Pair::new(client13(true, true), server13());
    let entry = first13(&mut pair);
    assert_eq!(pair.server.client_cert_cache_size().0, 1);

    again(&mut pair, client13(true, true), Some(entry.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("handshake with both chains cached");
    assert_eq!(c.version, Versions::Dtls13);
    assert!(c.from_cache.server_certificate && c.from_cache.client_certificate, "{:?}", c.from_cache);
    assert!(s.from_cache.server_certificate && s.from_cache.client_certificate, "{:?}", s.from_cache);
    assert!(!c.from_cache.certificate_request, "1.3 never caches the CertificateRequest");
    assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3), "each side knows the whole chain");
    assert_eq!(c.peer_leaf.as_ref(), pki.server_chain().first());
    assert_eq!(s.peer_leaf.as_ref(), pki.client_chain().first());
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0));
    let next = c.cache_update.clone().expect("a new entry");
    assert!(next.has_client_ticket() && next != entry, "a fresh ticket every handshake");
    assert_eq!(pair.server.client_cert_cache_size().0, 1, "the old ticket's entry was consumed");
    pair.exchange_data(2);
    let bithac = handshake_bytes(&c);

    // The new ticket works in turn.
    again(&mut pair, client13(true, true), Some(next), 3);
    let (c, _) = pair.handshake(MINUTE).expect("third");
    assert!(c.from_cache.server_certificate && c.from_cache.client_certificate);

    // Against the same handshake without caching, and with the best compression here.
    again(&mut pair, client13(false, false), None, 4);
    let (vanilla, _) = pair.handshake(MINUTE).expect("vanilla");
    pair.server = fastshake_dtls::Endpoint::new(
        Arc::new(ServerConfig {
            certificate_compression: Arc::new(CertificateCompression::all()),
            ..server13()
        }),
        [5; 32],
    )
    .unwrap();
    again(&mut pair, compressed(client13(false, false)), None, 5);
    let (zstd, _) = pair.handshake(MINUTE).expect("compressed");
    assert!(zstd.certificate_compression_received.is_some() && zstd.certificate_compression_sent.is_some());
    let (vanilla, zstd) = (handshake_bytes(&vanilla), handshake_bytes(&zstd));
    println!(
        "DTLS 1.3 P-256 x3 mutual: vanilla {vanilla} B, zstd {zstd} B, caching {bithac} B ({:.1} % of vanilla)",
        100.0 * bithac as f64 / vanilla as f64
    );
    let chains: usize = [pki.server_chain(), pki.client_chain()].iter().flatten().map(|c| c.len()).sum();
    assert!(vanilla - bithac > chains as u64 - 100, "both chains left the wire: saved {}", vanilla - bithac);
    assert!(bithac < zstd, "caching beats compression on the same chains");
}

#[test]
fn caching_combines_with_compression_where_a_chain_still_travels() {
    // The first contact compresses both chains; the next one abbreviates both; a client whose
    // chain the server lost sends it compressed beside an abbreviated server chain.
    let mut pair = Pair::new(
        compressed(client13(true, true)),
        ServerConfig { certificate_compression: Arc::new(CertificateCompression::all()), ..server13() },
    );
    let (first, _) = pair.handshake(MINUTE).expect("first");
    assert!(first.certificate_compression_sent.is_some() && first.certificate_compression_received.is_some());
    let entry = first.cache_update.clone().unwrap();
    again(&mut pair, compressed(client13(true, true)), Some(with_ticket(&entry, [7; 8])), 2);
    let (c, s) = pair.handshake(MINUTE).expect("server chain cached, client chain compressed");
    assert!(c.from_cache.server_certificate && !c.from_cache.client_certificate);
    assert!(c.certificate_compression_sent.is_some(), "the client's chain went compressed");
    assert!(c.certificate_compression_received.is_none(), "an abbreviated Certificate is not compressed");
    assert_eq!(s.peer_certificates, 3);
    again(&mut pair, compressed(client13(true, true)), c.cache_update.clone(), 3);
    let (c, _) = pair.handshake(MINUTE).expect("both cached");
    assert!(c.from_cache.server_certificate && c.from_cache.client_certificate);
    assert!(c.certificate_compression_sent.is_none() && c.certificate_compression_received.is_none());
}

#[test]
fn one_cache_entry_serves_both_versions() {
    // Learnt in 1.2, used in 1.3: the fingerprint names the same static chain, and the
    // server's cache holds the chain under the 1.2 ticket.
    let mut pair = Pair::new(client(p256_pki(), true, true), server13());
    let (c12, _, entry) = first_handshake(&mut pair);
    assert_eq!(c12.version, Versions::Dtls12);
    again(&mut pair, client13(true, true), Some(entry), 2);
    let (c, s) = pair.handshake(MINUTE).expect("1.3 from a 1.2 entry");
    assert_eq!(c.version, Versions::Dtls13);
    assert!(c.from_cache.server_certificate && s.from_cache.client_certificate);

    // Learnt in 1.3, used in 1.2 (the CertificateRequest is not cached by 1.3, so 1.2 sends it).
    again(&mut pair, client(p256_pki(), true, true), c.cache_update.clone(), 3);
    let (c, s) = pair.handshake(MINUTE).expect("1.2 from a 1.3 entry");
    assert_eq!(c.version, Versions::Dtls12);
    assert!(c.from_cache.server_certificate && s.from_cache.client_certificate);
    assert!(!c.from_cache.certificate_request);

    // A client offering both versions, answered in 1.3, offers the same entry.
    let both = ClientConfig { versions: Versions::Both, ..client13(true, true) };
    again(&mut pair, both, c.cache_update.clone(), 4);
    let (c, s) = pair.handshake(MINUTE).expect("both versions offered");
    assert_eq!(c.version, Versions::Dtls13);
    assert!(c.from_cache.server_certificate && c.from_cache.client_certificate);
    assert!(s.from_cache.server_certificate && s.from_cache.client_certificate);
    pair.exchange_data(2);
}

#[test]
fn unknown_replayed_and_tampered_entries_get_an_ordinary_full_handshake() {
    let mut pair = Pair::new(client13(true, true), server13());
    let entry = first13(&mut pair);

    // A ticket the server never derived, and a fingerprint of a chain the server does not send.
    again(&mut pair, client13(true, true), Some(with_other_chain(&with_ticket(&entry, [0x5a; 8]))), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!c.from_cache.any() && !s.from_cache.any());
    assert_eq!((c.peer_certificates, s.peer_certificates), (3, 3));
    assert_eq!(c.cache_update.as_ref().map(CachedServer::has_certificate), Some(true));

    // The real ticket, used once...
    again(&mut pair, client13(true, true), Some(entry.clone()), 3);
    let (c, _) = pair.handshake(MINUTE).expect("cached");
    assert!(c.from_cache.client_certificate);
    // ...and replayed: it opened its entry once, so the chain is sent in full.
    again(&mut pair, client13(true, true), Some(entry), 4);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake after a replay");
    assert!(!c.from_cache.client_certificate && !s.from_cache.client_certificate);
    assert!(c.from_cache.server_certificate, "the fingerprint still matches");
}

#[test]
fn another_clients_ticket_is_never_accepted() {
    let mut pair = Pair::new(client13(true, true), server13());
    let stolen = first13(&mut pair);
    // An attacker replays the victim's ticket with a key of its own: the server selects the
    // victim's chain, and the CertificateVerify fails under the victim's key.
    let mut attacker = client13(true, true);
    let own = other_p256_pki().client_certified_key().unwrap();
    attacker.certified_key = Some(Arc::new(CertifiedKey { chain: p256_pki().client_chain(), key: own.key }));
    again(&mut pair, attacker, Some(stolen), 2);
    assert!(pair.handshake(MINUTE).is_none(), "never accepted");
    assert_eq!(server_failure(&pair).and_then(|e| e.alert()), Some(AlertDescription::DecryptError));
    assert!(pair.server_summary().is_none());
}

#[test]
fn cached_chains_are_validated_again() {
    let mut pair = Pair::new(client13(true, true), server13());
    let entry = first13(&mut pair);

    // The server's clock is three days on: the cached client chain is stale (not selected),
    // and the chain then sent in full fails with certificate_expired.
    pair.elapse(Duration::from_secs(3 * 86_400));
    let mut cc = client13(true, true);
    cc.wall_clock = Some(fastshake_dtls::WallClock { at: pair.now, unix_secs: PKI_TIME + 120 });
    again(&mut pair, cc, Some(entry.clone()), 2);
    assert!(pair.handshake(MINUTE).is_none(), "never accepted");
    let failure = server_failure(&pair).expect("the server refuses");
    assert_eq!(failure.alert(), Some(AlertDescription::CertificateExpired), "{failure:?}");

    // A client that no longer trusts the anchor of the server chain it cached: unknown_ca, as
    // for a chain sent in full.
    let mut pair = Pair::new(client13(true, true), server13());
    let entry = first13(&mut pair);
    let mut distrusting = client13(true, true);
    distrusting.trust_anchors = Some(anchors(other_p256_pki()));
    again(&mut pair, distrusting, Some(entry), 3);
    assert!(pair.handshake(MINUTE).is_none());
    match pair.client_failure() {
        Some(Error::PeerAuthentication { alert, .. }) => assert_eq!(alert, AlertDescription::UnknownCa),
        other => panic!("{other:?}"),
    }
    assert!(pair.server_summary().is_none());
}

#[test]
fn a_resumed_handshake_leaves_the_cached_chain_for_the_next_full_one() {
    let keys = fastshake_dtls::TicketKeys::new(1, [7; 16]);
    let server = ServerConfig { tickets: Some(keys), ..server13() };
    let mut pair = Pair::new(ClientConfig { enable_tickets: true, ..client13(true, true) }, server);
    let entry = first13(&mut pair);
    pair.run_for(Duration::from_secs(5));
    let session: ClientSession = pair
        .client_events
        .iter()
        .find_map(|e| match e {
            Event::SessionTicket(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a 1.3 ticket");
    // Resumed: a PSK handshake, no certificates; the chain goes back under its ticket.
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.cached_client(client13(true, true), Some(session), Some(entry.clone()), 2);
    pair.server_events.clear();
    let (c, s) = pair.handshake(MINUTE).expect("resumed");
    assert!(c.resumed && s.resumed && !c.from_cache.any());
    assert!(c.cache_update.is_none(), "the entry stays as it was");
    assert_eq!(pair.server.client_cert_cache_size().0, 1);
    again(&mut pair, client13(true, true), Some(entry), 3);
    let (c, s) = pair.handshake(MINUTE).expect("full, cached");
    assert!(!c.resumed && c.from_cache.client_certificate && s.from_cache.client_certificate);
}

#[test]
fn lost_and_duplicated_flights_with_both_chains_cached() {
    let mut pair = Pair::new(client13(true, true), server13());
    let entry = first13(&mut pair);
    again(&mut pair, client13(true, true), Some(entry), 2);
    let (mut server_flight, mut client_flight) = (false, false);
    pair.filter = Box::new(move |d| {
        // The server's flight (its first datagram longer than the HelloRetryRequest) and the
        // client's last flight (its first protected datagram longer than an ACK) are each lost
        // once; everything else is duplicated.
        let protected = d.payload[0] & 0xe0 == 0x20;
        if d.dir == Dir::ToClient && d.payload.len() > 200 && !server_flight {
            server_flight = true;
            return net::Fate::Drop;
        }
        if d.dir == Dir::ToServer && protected && d.payload.len() > 100 && !client_flight {
            client_flight = true;
            return net::Fate::Drop;
        }
        net::Fate::Duplicate
    });
    let (c, s) = pair.handshake(MINUTE).expect("handshake through loss");
    assert!(c.from_cache.server_certificate && c.from_cache.client_certificate);
    assert!(s.from_cache.server_certificate && s.from_cache.client_certificate);
    assert!(c.retransmissions >= 1 && s.retransmissions >= 1, "{} {}", c.retransmissions, s.retransmissions);
    pair.filter = Box::new(|_| net::Fate::Deliver);
    pair.exchange_data(2);
}
