//! RFC 7924 cached information over DTLS 1.2 on the in-memory pair: the client keeps the
//! server's Certificate and CertificateRequest per server and offers their fingerprints; the
//! server sends the fingerprint in place of each. Every refusal gets the alert RFC 7924 and
//! RFC 5246 name, and nothing tampered is ever accepted.

mod caching_common;

use caching_common::*;
use fastshake_dtls::{AlertDescription, CachedServer, Error, Event, Mobility, ServerConfig};
use fastshake_testkit::dtls::Pair;
use fastshake_testkit::net::{self, Dir, Fate};
use std::sync::Arc;

/// cached_info, as on the wire.
const EXT_CACHED_INFO: u16 = 25;

fn failure_of_client(pair: &Pair) -> Option<Error> {
    pair.client_events.iter().find_map(|e| match e {
        Event::Failed(e) => Some(e.clone()),
        _ => None,
    })
}

fn run_to_failure(pair: &mut Pair) -> Option<Error> {
    assert!(pair.handshake(MINUTE).is_none(), "the handshake must not complete");
    failure_of_client(pair)
}

#[test]
fn server_objects_are_cached_and_replaced_by_their_fingerprints() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (first, _, entry) = first_handshake(&mut pair);
    assert!(entry.has_certificate() && entry.has_certificate_request() && !entry.has_client_ticket());
    assert_eq!(entry.server_name(), Some("localhost"));

    again(&mut pair, client(pki, true, false), Some(entry.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("handshake with cached objects");
    assert!(c.from_cache.server_certificate && c.from_cache.certificate_request);
    assert!(s.from_cache.server_certificate && s.from_cache.certificate_request);
    assert!(!c.from_cache.client_certificate && !s.from_cache.client_certificate);
    assert_eq!(c.peer_certificates, pki.server_chain().len(), "the cached chain was validated");
    assert_eq!(s.peer_certificates, pki.client_chain().len(), "the client still sent its chain");
    assert_eq!(c.cache_update.as_ref(), Some(&entry), "same objects, kept again");
    pair.exchange_data(2);

    // The same handshake without caching sends the whole chain again.
    again(&mut pair, client(pki, false, false), None, 3);
    let (vanilla, _) = pair.handshake(MINUTE).expect("vanilla handshake");
    assert!(vanilla.cache_update.is_none() && !vanilla.from_cache.any());
    let chain_bytes: usize = pki.server_chain().iter().map(|c| c.len() + 3).sum();
    let saved = handshake_bytes(&vanilla) - handshake_bytes(&c);
    println!(
        "RFC 7924 P-256 x3: vanilla {} B, cached {} B, first (offering nothing) {} B, saved {saved} B",
        handshake_bytes(&vanilla),
        handshake_bytes(&c),
        handshake_bytes(&first)
    );
    // The chain (less its 33-byte fingerprint) and most of the CertificateRequest are gone;
    // the ClientHello grew by the offer (sent twice: before and after the cookie).
    assert!(saved as usize > chain_bytes - 33 - 2 * 74, "saved {saved} of a {chain_bytes}-byte chain");
    // Nothing to offer yet: vanilla bytes, give or take the length of the two ECDSA signatures
    // (DER: a few bytes shorter when an integer has leading zeros).
    assert!(
        handshake_bytes(&first).abs_diff(handshake_bytes(&vanilla)) <= 4,
        "nothing to offer: vanilla bytes"
    );
}

#[test]
fn fingerprints_are_scoped_to_the_server_they_came_from() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    // The same entry, for a client that names another server: never offered.
    let mut other = client(pki, true, false);
    other.server_name = Some("127.0.0.1".into());
    again(&mut pair, other, Some(entry), 2);
    let (c, _) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!c.from_cache.any());
    let hellos: Vec<_> = pair.log.iter().filter(|d| client_hello_has_extension(d, EXT_CACHED_INFO)).collect();
    assert!(hellos.is_empty(), "no fingerprint went to another server");
}

#[test]
fn a_stale_or_tampered_cache_entry_means_a_full_handshake() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    // A certificate body the server never sent: its fingerprint matches nothing.
    let mut cache_bytes = fastshake_dtls::MemoryCacheStore::new();
    use fastshake_dtls::CacheStore;
    cache_bytes.store("s", entry);
    let mut bytes = cache_bytes.to_bytes();
    // The certificate body starts after magic, version, count, key, name and its flag and length.
    let at = 4 + 1 + 2 + 3 + 10 + 1 + 4 + 40;
    bytes[at] ^= 0x40;
    let tampered = fastshake_dtls::MemoryCacheStore::from_bytes(&bytes).unwrap().load("s").unwrap();
    again(&mut pair, client(pki, true, false), Some(tampered), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!c.from_cache.server_certificate && !s.from_cache.server_certificate);
    assert!(c.from_cache.certificate_request, "the request still matched");
    assert!(c.cache_update.unwrap().has_certificate(), "the true chain replaces the stale one");
}

#[test]
fn a_fingerprint_that_does_not_match_the_offer_is_illegal_parameter() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    again(&mut pair, client(pki, true, false), Some(entry), 2);
    // Flip one byte of the 33-byte fingerprint message that replaces the server's Certificate.
    pair.filter = Box::new(|d| {
        if d.dir == Dir::ToClient {
            for (start, len) in handshake_bodies(&d.payload, 11) {
                if len == 33 {
                    d.payload[start + 5] ^= 1;
                }
            }
        }
        Fate::Deliver
    });
    let failure = run_to_failure(&mut pair);
    assert_eq!(failure, Some(Error::AlertSent(AlertDescription::IllegalParameter)));
    assert!(pair.server_summary().is_none(), "never accepted");
}

#[test]
fn a_selection_of_something_never_offered_is_illegal_parameter() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    // Offer only the Certificate; the ServerHello is altered to select the CertificateRequest.
    let mut bytes = {
        use fastshake_dtls::CacheStore;
        let mut store = fastshake_dtls::MemoryCacheStore::new();
        store.store("s", entry);
        store.to_bytes()
    };
    // Rebuild the entry without the request through the format: flag 0, no body.
    let cut_from = bytes.len() - 1 - pki_request_len(&bytes);
    bytes.truncate(cut_from - 5);
    bytes.push(0);
    bytes.push(0);
    let only_certificate = fastshake_dtls::MemoryCacheStore::from_bytes(&bytes).unwrap();
    let only_certificate = {
        use fastshake_dtls::CacheStore;
        only_certificate.load("s").unwrap()
    };
    assert!(only_certificate.has_certificate() && !only_certificate.has_certificate_request());
    again(&mut pair, client(pki, true, false), Some(only_certificate), 2);
    pair.filter = Box::new(|d| {
        if d.dir == Dir::ToClient {
            for (start, len) in handshake_bodies(&d.payload, 2) {
                let body = &d.payload[start..start + len];
                if let Some(at) = extension_at(body, 2 + 32, false, EXT_CACHED_INFO) {
                    // Selection list: length 1, type cert (1) -> cert_req (2).
                    d.payload[start + at + 2] = 2;
                }
            }
        }
        Fate::Deliver
    });
    let failure = run_to_failure(&mut pair);
    assert_eq!(failure, Some(Error::AlertSent(AlertDescription::IllegalParameter)));
}

/// The length of the cached CertificateRequest in a one-entry store's bytes (the body before
/// the empty ticket).
fn pki_request_len(bytes: &[u8]) -> usize {
    // Walk back: ticket length byte (0), then the request body; its 4-byte length precedes it.
    (1..bytes.len() - 5)
        .find(|&n| {
            let at = bytes.len() - 1 - n - 4;
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize == n
                && bytes[at - 1] == 1
        })
        .expect("request body")
}

#[test]
fn a_cached_chain_is_validated_again_expiry_and_anchors() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);

    // The client's clock passed the chain's notAfter: the cached chain is refused as a sent one.
    let mut late = client(pki, true, false);
    late.wall_clock = AFTER_EXPIRY;
    again(&mut pair, late, Some(entry.clone()), 2);
    match run_to_failure(&mut pair) {
        Some(Error::PeerAuthentication { alert, .. }) => {
            assert_eq!(alert, AlertDescription::CertificateExpired)
        }
        other => panic!("{other:?}"),
    }

    // The client no longer trusts the anchor the cached chain led to.
    let mut distrusting = client(pki, true, false);
    distrusting.trust_anchors = Some(anchors(other_p256_pki()));
    again(&mut pair, distrusting, Some(entry), 3);
    match run_to_failure(&mut pair) {
        Some(Error::PeerAuthentication { alert, .. }) => assert_eq!(alert, AlertDescription::UnknownCa),
        other => panic!("{other:?}"),
    }
    assert!(pair.server_summary().is_none());
}

#[test]
fn a_server_with_a_new_chain_gets_a_full_handshake_and_the_new_chain_is_kept() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, false), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    // Same trust anchor, another server chain: a shorter one of the same PKI is not at hand,
    // so the server's answer of cached_info is switched off instead.
    let mut sc = server(pki);
    sc.cached_info = false;
    pair.server = fastshake_dtls::Endpoint::new(Arc::new(sc), [9; 32]).expect("a valid server configuration");
    again(&mut pair, client(pki, true, false), Some(entry.clone()), 2);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!c.from_cache.any() && !s.from_cache.any());
    assert_eq!(c.cache_update, Some(entry));
}

#[test]
fn lost_and_reordered_flights_with_cached_objects() {
    let pki = p256_pki();
    let mut pair = Pair::new(client(pki, true, true), server(pki));
    let (_, _, entry) = first_handshake(&mut pair);
    again(&mut pair, client(pki, true, true), Some(entry), 2);
    pair.reorder = true;
    let mut lost = 0;
    pair.filter = net::drop_if(move |d| {
        // The first flight 4 and the first flight 5 are lost once each.
        let drop = (d.dir == Dir::ToClient && !handshake_bodies(&d.payload, 2).is_empty() && lost == 0)
            || (d.dir == Dir::ToServer && !handshake_bodies(&d.payload, 16).is_empty() && lost == 1);
        if drop {
            lost += 1;
        }
        drop
    });
    let (c, s) = pair.handshake(MINUTE).expect("handshake through loss");
    assert!(c.from_cache.server_certificate && s.from_cache.client_certificate);
    assert!(c.retransmissions >= 1);
    pair.reorder = false;
    pair.exchange_data(2);
}

#[test]
fn caching_with_resumption_and_connection_ids() {
    let pki = p256_pki();
    let mut sc = server(pki);
    sc.tickets = Some(fastshake_dtls::TicketKeys::new(1, [7; 16]));
    sc.mobility = Mobility { connection_id: Some(4), ..Default::default() };
    let mut cc = client(pki, true, true);
    cc.mobility = Mobility { connection_id: Some(0), ..Default::default() };
    let mut pair = Pair::new(cc.clone(), sc.clone());
    let (first, _, entry) = first_handshake(&mut pair);
    let session = first.session.clone().expect("a ticket");

    // Short term: the ticket resumes; the cache entry stays as it was.
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.cached_client(cc.clone(), Some(session), Some(entry.clone()), 2);
    pair.server_events.clear();
    let (c, s) = pair.handshake(MINUTE).expect("resumed");
    assert!(c.resumed && s.resumed && c.cache_update.is_none() && !c.from_cache.any());
    assert!(pair.client.connection_id().is_some());

    // Long term: no session, the cache still works (the ticket's chain went back to the cache).
    again(&mut pair, cc, Some(entry), 3);
    let (c, s) = pair.handshake(MINUTE).expect("full handshake from the cache");
    assert!(!c.resumed && c.from_cache.server_certificate && s.from_cache.client_certificate);
    assert!(pair.client.connection_id().is_some());
    pair.exchange_data(2);
}

#[test]
fn psk_handshakes_are_unaffected() {
    let mut cc = fastshake_testkit::dtls::client_config();
    cc.cached_info = true;
    cc.client_certificate_caching = true;
    let sc: ServerConfig = fastshake_testkit::dtls::server_config();
    let mut pair = Pair::new(cc.clone(), sc);
    let (c, _) = pair.handshake(MINUTE).expect("PSK handshake");
    assert!(c.cache_update.is_none() && !c.from_cache.any());
    let entry = CachedServer::default();
    pair.cached_client(cc, None, Some(entry), 2);
    assert!(!pair.log.iter().any(|d| client_hello_has_extension(d, EXT_CACHED_INFO)));
}
