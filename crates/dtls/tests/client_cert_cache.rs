//! Client-certificate caching (seed 003 §IV-B, extension 0xFFA0) on the in-memory pair: the
//! server keeps the client's validated chain under a ticket both sides derive after each
//! handshake; the client then sends an empty Certificate and still signs its
//! CertificateVerify. Unknown, stale, replayed or foreign tickets never get accepted.

mod caching_common;

use caching_common::*;
use fastshake_dtls::{
    AlertDescription, CacheStore, CachedServer, CertifiedKey, ClientCertCacheConfig, Error, Event,
    MemoryCacheStore, TrustAnchors,
};
use fastshake_testkit::dtls::Pair;
use fastshake_testkit::net::{self, Dir};
use std::sync::Arc;

/// Client-certificate caching, as on the wire.
const EXT_CLIENT_CERT_CACHE: u16 = 0xFFA0;

fn server_failure(pair: &Pair) -> Option<Error> {
    pair.server_events.iter().find_map(|(_, e)| match e {
        Event::Failed(e) => Some(e.clone()),
        _ => None,
    })
}

/// `entry` with its ticket replaced, through the store's byte format (the ticket is its last
/// 8 bytes).
fn with_ticket(entry: &CachedServer, ticket: [u8; 8]) -> CachedServer {
    let mut store = MemoryCacheStore::new();
    store.store("s", entry.clone());
    let mut bytes = store.to_bytes();
    let n = bytes.len();
    bytes[n - 8..].copy_from_slice(&ticket);
    MemoryCacheStore::from_bytes(&bytes).unwrap().load("s").unwrap()
}

#[test]
fn the_client_chain_is_cached_and_an_empty_certificate_stands_for_it() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, false, true), server(pki));
    let (first, _, entry) = first_handshake(&mut pair);
    assert!(entry.has_client_ticket() && !entry.has_certificate());
    assert_eq!(pair.server.client_cert_cache_size().0, 1);
    // The first handshake pays only the signalling: an empty extension each way (4 + 4 bytes,
    // the ClientHello twice around the cookie exchange).
    assert!(pair.log.iter().any(|d| client_hello_has_extension(d, EXT_CLIENT_CERT_CACHE)));

    again(&mut pair, client(pki, false, true), Some(entry.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("handshake with the cached chain");
    assert!(c.from_cache.client_certificate && s.from_cache.client_certificate);
    assert_eq!(s.peer_certificates, pki.client_chain().len(), "the server knows the whole chain");
    assert_eq!(s.peer_leaf.as_ref(), pki.client_chain().first());
    let next = c.cache_update.clone().expect("a new ticket");
    assert!(next.has_client_ticket() && next != entry, "a fresh ticket every handshake");
    assert_eq!(pair.server.client_cert_cache_size().0, 1, "the old ticket's entry was consumed");
    pair.exchange_data(2);

    // The same handshake without caching: the client's chain goes again.
    again(&mut pair, client(pki, false, false), None, 3);
    let (vanilla, _) = pair.handshake(MINUTE).expect("vanilla");
    let chain_bytes: usize = pki.client_chain().iter().map(|c| c.len() + 3).sum();
    let saved = vanilla.bytes_sent as i64 - c.bytes_sent as i64;
    println!(
        "client-certificate caching P-256 x3: client sent {} B vanilla, {} B cached, first {} B (saved {saved} B)",
        vanilla.bytes_sent, c.bytes_sent, first.bytes_sent
    );
    assert!(saved as usize > chain_bytes - 2 * 13, "saved {saved} of a {chain_bytes}-byte chain");

    // The new ticket works in turn.
    again(&mut pair, client(pki, false, true), Some(next), 4);
    let (c, _) = pair.handshake(MINUTE).expect("third");
    assert!(c.from_cache.client_certificate);
}

#[test]
fn unknown_and_replayed_tickets_get_an_ordinary_full_handshake() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, false, true), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);

    // A ticket the server never derived.
    again(&mut pair, client(pki, false, true), Some(with_ticket(&entry, [0x5a; 8])), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!c.from_cache.any() && !s.from_cache.any());
    assert_eq!(s.peer_certificates, pki.client_chain().len());

    // The real ticket, used once...
    again(&mut pair, client(pki, false, true), Some(entry.clone()), 3);
    let (c, _) = pair.handshake(MINUTE).expect("cached");
    assert!(c.from_cache.client_certificate);
    // ...and replayed: it opened its entry once, so the chain is sent in full.
    again(&mut pair, client(pki, false, true), Some(entry), 4);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake after a replay");
    assert!(!c.from_cache.client_certificate && !s.from_cache.client_certificate);
}

#[test]
fn another_clients_ticket_is_never_accepted() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, false, true), server(pki));
    let (_, _, stolen) = first_handshake(&mut pair);
    // An attacker saw the ticket in the victim's ClientHello and has a key of its own: the
    // server selects the victim's chain, and the CertificateVerify fails under its key.
    let mut attacker = client(pki, false, true);
    let own = other_p256_pki().client_certified_key().unwrap();
    attacker.certified_key = Some(Arc::new(CertifiedKey { chain: pki.client_chain(), key: own.key }));
    again(&mut pair, attacker, Some(stolen), 2);
    assert!(pair.handshake(MINUTE).is_none(), "never accepted");
    assert_eq!(server_failure(&pair).and_then(|e| e.alert()), Some(AlertDescription::DecryptError));
    assert!(pair.server_summary().is_none());
}

#[test]
fn a_chain_that_expired_in_the_cache_is_not_selected() {
    let pki = p256_pki();
    // Three days on the server's clock: the cached chain is stale (not selected), and the
    // chain then sent in full fails validation with certificate_expired. The client's wall
    // clock is pinned so that it still accepts the server's chain.
    let mut pair = Pair::new(client(pki, false, true), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    pair.elapse(std::time::Duration::from_secs(3 * 86_400));
    let mut cc = client(pki, false, true);
    cc.wall_clock = Some(fastshake_dtls::WallClock { at: pair.now, unix_secs: PKI_TIME + 120 });
    again(&mut pair, cc, Some(entry), 2);
    assert!(pair.handshake(MINUTE).is_none(), "never accepted");
    let failure = server_failure(&pair).expect("the server refuses");
    assert_eq!(failure.alert(), Some(AlertDescription::CertificateExpired), "{failure:?}");
    assert!(
        pair.log.iter().any(|d| d.dir == Dir::ToServer && handshake_bodies(&d.payload, 11).iter().any(|&(_, l)| l > 100)),
        "the stale entry was not selected: the chain went in full"
    );
}

#[test]
fn the_server_cache_stays_bounded_under_many_tickets() {
    let pki = p256_pki();
    let mut sc = server(pki);
    sc.client_cert_cache = ClientCertCacheConfig { max_entries: 4, max_bytes: 64 * 1024 };
    let mut pair = Pair::new(client(pki, false, true), sc);
    first_handshake(&mut pair);
    // Distinct clients (seeds), each its own ticket: at most 4 chains are kept.
    for seed in 2..14u8 {
        again(&mut pair, client(pki, false, true), None, seed);
        pair.handshake(MINUTE).expect("full handshake");
        let (entries, bytes) = pair.server.client_cert_cache_size();
        assert!(entries <= 4 && bytes <= 64 * 1024, "{entries} entries, {bytes} bytes");
    }
    // Thousands of distinct unknown tickets: each is a miss, none adds anything.
    let before = pair.server.client_cert_cache_size();
    let accepted = pair.server.stats().connections_accepted;
    let entry = pair.client_summary().unwrap().cache_update.unwrap();
    for i in 0..2000u32 {
        let mut ticket = [0u8; 8];
        ticket[..4].copy_from_slice(&i.to_be_bytes());
        again(&mut pair, client(pki, false, true), Some(with_ticket(&entry, ticket)), (i % 200) as u8);
        // Up to the ClientHello with the cookie (30 ms): the ticket was looked up and missed.
        pair.run_for(std::time::Duration::from_millis(35));
        if i % 500 == 0 {
            assert_eq!(pair.server.client_cert_cache_size().0, before.0);
        }
    }
    assert!(pair.server.client_cert_cache_size().0 <= 4);
    assert!(pair.server.stats().connections_accepted >= accepted + 2000, "every ticket was looked up");
}

#[test]
fn zero_entries_turn_client_certificate_caching_off() {
    let pki = p256_pki();
    let mut sc = server(pki);
    sc.client_cert_cache.max_entries = 0;
    let mut pair = Pair::new(client(pki, false, true), sc);
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    assert!(!c.cache_update.unwrap().has_client_ticket(), "the server did not answer");
    let answered = pair.log.iter().any(|d| {
        d.dir == Dir::ToClient
            && handshake_bodies(&d.payload, 2).iter().any(|&(start, len)| {
                extension_at(&d.payload[start..start + len], 2 + 32, false, EXT_CLIENT_CERT_CACHE).is_some()
            })
    });
    assert!(!answered);
}

#[test]
fn a_server_that_no_longer_trusts_the_anchor_refuses_the_chain() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, false, true), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    // A new endpoint whose client anchors changed: the cache went with the old one, so the
    // ticket misses, and the chain sent in full is unknown_ca.
    let mut sc = server(pki);
    sc.client_trust_anchors =
        Some(Arc::new(TrustAnchors::from_pem(other_p256_pki().ca_pem().as_bytes()).unwrap()));
    pair.server = fastshake_dtls::Endpoint::new(Arc::new(sc), [8; 32]).expect("a valid server configuration");
    again(&mut pair, client(pki, false, true), Some(entry), 2);
    assert!(pair.handshake(MINUTE).is_none());
    assert_eq!(server_failure(&pair).and_then(|e| e.alert()), Some(AlertDescription::UnknownCa));
}

#[test]
fn lost_and_duplicated_flights_with_the_cached_chain() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, false, true), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    again(&mut pair, client(pki, false, true), Some(entry), 2);
    let mut dropped = false;
    pair.filter = Box::new(move |d| {
        // Flight 5 (with the empty Certificate) is lost once; everything else is duplicated.
        if d.dir == Dir::ToServer && !handshake_bodies(&d.payload, 16).is_empty() && !dropped {
            dropped = true;
            return net::Fate::Drop;
        }
        net::Fate::Duplicate
    });
    let (c, s) = pair.handshake(MINUTE).expect("handshake through loss");
    assert!(c.from_cache.client_certificate && s.from_cache.client_certificate);
    assert!(c.retransmissions >= 1);
}
