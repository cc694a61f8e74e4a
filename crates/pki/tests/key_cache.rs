//! The validated-key cache: hits skip validation, and nothing that full validation would refuse
//! (a time outside the window, an anchor no longer trusted, another name, another usage, a
//! changed byte) is ever answered from it.

use std::sync::{Arc, OnceLock};

use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_pki::{
    ChainDigest, ChainUsage, KeyAlgorithm, PkiError, TrustAnchors, ValidatedKeyCache, Validation,
};

/// When the test PKIs are made; their certificates run from an hour before for two days.
const MADE: u64 = 1_800_000_000;
const NOW: u64 = MADE + 60;
const NOT_BEFORE: u64 = MADE - 3600;
const NOT_AFTER: u64 = MADE + 2 * 86_400;

fn p256() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], MADE, 2).unwrap())
}

fn rsa() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::Rsa2048, &[], MADE, 2).unwrap())
}

fn other() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(1, KeyKind::P256, &[], MADE, 2).unwrap())
}

fn anchors(pki: &TestPki) -> TrustAnchors {
    TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap()
}

fn how(
    cache: &ValidatedKeyCache,
    pki: &TestPki,
    anchors: &TrustAnchors,
    now: u64,
    name: Option<&str>,
) -> Result<Validation, PkiError> {
    cache.verify_server_chain(&pki.server_chain(), anchors, now, name).map(|(_, how)| how)
}

#[test]
fn the_same_chain_again_is_a_hit_with_the_same_key_anchor_and_window() {
    for pki in [p256(), rsa()] {
        let cache = ValidatedKeyCache::new(8);
        let anchors = anchors(pki);
        let chain = pki.server_chain();
        let (full, first) = cache.verify_server_chain(&chain, &anchors, NOW, Some("localhost")).unwrap();
        let (cached, second) = cache.verify_server_chain(&chain, &anchors, NOW, Some("localhost")).unwrap();
        assert_eq!((first, second), (Validation::Full, Validation::Cached));
        assert_eq!(cached.key, full.key, "{:?}", pki.key_kind);
        assert_eq!(cached.key.spki_der(), full.key.spki_der(), "the rebuilt SPKI is the leaf's own");
        assert_eq!(cached.anchor, full.anchor);
        assert_eq!(cached.not_after_unix, full.not_after_unix);
        let entry = cache.peek(ChainUsage::ServerAuth, Some("localhost"), &chain).unwrap();
        assert_eq!((entry.not_before_unix(), entry.not_after_unix()), (NOT_BEFORE, NOT_AFTER));
        assert_eq!(entry.usage(), ChainUsage::ServerAuth);
        assert_eq!(entry.anchor(), full.anchor);
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (1, 1));
    }
}

#[test]
fn another_chain_is_a_miss() {
    let cache = ValidatedKeyCache::new(8);
    assert_eq!(how(&cache, p256(), &anchors(p256()), NOW, Some("localhost")), Ok(Validation::Full));
    assert_eq!(how(&cache, other(), &anchors(other()), NOW, Some("localhost")), Ok(Validation::Full));
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.stats().hits, 0);
}

#[test]
fn the_time_window_is_checked_again_at_every_hit() {
    let cache = ValidatedKeyCache::new(8);
    let anchors = anchors(p256());
    let name = Some("localhost");
    assert_eq!(how(&cache, p256(), &anchors, NOW, name), Ok(Validation::Full));
    // Both ends of the window are inside it, as in webpki.
    assert_eq!(how(&cache, p256(), &anchors, NOT_AFTER, name), Ok(Validation::Cached));
    assert_eq!(how(&cache, p256(), &anchors, NOT_BEFORE, name), Ok(Validation::Cached));
    let expired = how(&cache, p256(), &anchors, NOT_AFTER + 1, name);
    assert!(matches!(expired, Err(PkiError::Expired { .. })), "{expired:?}");
    assert!(cache.is_empty(), "the stale entry is gone");
    assert_eq!(how(&cache, p256(), &anchors, NOW, name), Ok(Validation::Full));
    let early = how(&cache, p256(), &anchors, NOT_BEFORE - 1, name);
    assert!(matches!(early, Err(PkiError::NotYetValid { .. })), "{early:?}");
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.invalidated), (2, 2));
}

#[test]
fn an_anchor_no_longer_trusted_invalidates_the_entry() {
    let cache = ValidatedKeyCache::new(8);
    let name = Some("localhost");
    assert_eq!(how(&cache, p256(), &anchors(p256()), NOW, name), Ok(Validation::Full));
    // Adding an anchor keeps the one the chain led to: still a hit.
    let both = TrustAnchors::from_pem(format!("{}{}", p256().ca_pem(), other().ca_pem()).as_bytes()).unwrap();
    assert_eq!(how(&cache, p256(), &both, NOW, name), Ok(Validation::Cached));
    // Anchors without it: the entry goes, and full validation refuses the chain.
    let refused = how(&cache, p256(), &anchors(other()), NOW, name);
    assert_eq!(refused, Err(PkiError::UnknownCa));
    assert_eq!(cache.stats().invalidated, 1);
    assert!(cache.is_empty());
    assert_eq!(how(&cache, p256(), &anchors(p256()), NOW, name), Ok(Validation::Full));
    assert_eq!(cache.stats().hits, 1);
}

#[test]
fn another_server_name_never_hits() {
    let cache = ValidatedKeyCache::new(8);
    let anchors = anchors(p256());
    assert_eq!(how(&cache, p256(), &anchors, NOW, Some("localhost")), Ok(Validation::Full));
    // The leaf names both: each name gets its own full validation and entry.
    assert_eq!(how(&cache, p256(), &anchors, NOW, Some("127.0.0.1")), Ok(Validation::Full));
    assert_eq!(how(&cache, p256(), &anchors, NOW, None), Ok(Validation::Full));
    let wrong = how(&cache, p256(), &anchors, NOW, Some("example.com"));
    assert!(matches!(wrong, Err(PkiError::NameMismatch(_))), "{wrong:?}");
    assert_eq!(how(&cache, p256(), &anchors, NOW, Some("localhost")), Ok(Validation::Cached));
    assert_eq!(how(&cache, p256(), &anchors, NOW, Some("127.0.0.1")), Ok(Validation::Cached));
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.stats().hits, 2);
}

#[test]
fn a_chain_validated_for_one_usage_never_answers_for_the_other() {
    let cache = ValidatedKeyCache::new(8);
    let anchors = anchors(p256());
    assert_eq!(how(&cache, p256(), &anchors, NOW, None), Ok(Validation::Full));
    // The server leaf carries serverAuth only.
    let as_client = cache.verify_client_chain(&p256().server_chain(), &anchors, NOW);
    assert!(matches!(as_client, Err(PkiError::WrongKeyUsage { .. })), "{as_client:?}");
    let client_chain = p256().client_chain();
    let first = cache.verify_client_chain(&client_chain, &anchors, NOW).unwrap().1;
    let second = cache.verify_client_chain(&client_chain, &anchors, NOW).unwrap().1;
    assert_eq!((first, second), (Validation::Full, Validation::Cached));
    let as_server = cache.verify_server_chain(&client_chain, &anchors, NOW, None);
    assert!(matches!(as_server, Err(PkiError::WrongKeyUsage { .. })), "{as_server:?}");
    assert_eq!(cache.stats().hits, 1);
}

#[test]
fn a_changed_byte_is_another_chain_and_full_validation_refuses_it() {
    let cache = ValidatedKeyCache::new(8);
    let anchors = anchors(p256());
    let chain = p256().server_chain();
    cache.verify_server_chain(&chain, &anchors, NOW, None).unwrap();
    for cert in 0..chain.len() {
        let mut tampered = chain.clone();
        let mut der = tampered[cert].to_vec();
        *der.last_mut().unwrap() ^= 1; // the last byte of the certificate's signature
        tampered[cert] = der.into();
        assert_ne!(
            ChainDigest::new(ChainUsage::ServerAuth, None, &tampered),
            ChainDigest::new(ChainUsage::ServerAuth, None, &chain)
        );
        let refused = cache.verify_server_chain(&tampered, &anchors, NOW, None);
        assert!(refused.is_err(), "certificate {cert}: {refused:?}");
    }
    assert_eq!(cache.stats().hits, 0);
    assert_eq!(cache.len(), 1);
}

#[test]
fn the_digest_prefixes_every_certificate_with_its_length() {
    // Moving a byte from one certificate to the next changes the digest.
    let a: Vec<fastshake_pki::CertDer> = vec![vec![1, 2, 3].into(), vec![4].into()];
    let b: Vec<fastshake_pki::CertDer> = vec![vec![1, 2].into(), vec![3, 4].into()];
    assert_ne!(
        ChainDigest::new(ChainUsage::ServerAuth, None, &a),
        ChainDigest::new(ChainUsage::ServerAuth, None, &b)
    );
    // The same bytes as a name or as a certificate are different inputs too.
    let empty: Vec<fastshake_pki::CertDer> = Vec::new();
    assert_ne!(
        ChainDigest::new(ChainUsage::ServerAuth, Some(""), &empty),
        ChainDigest::new(ChainUsage::ServerAuth, None, &empty)
    );
}

#[test]
fn the_cache_stays_within_its_bound_under_many_chains() {
    let pkis: Vec<TestPki> = (0..10).map(|_| generate(1, KeyKind::P256, &[], MADE, 2).unwrap()).collect();
    let cache = ValidatedKeyCache::new(4);
    for pki in &pkis {
        assert_eq!(how(&cache, pki, &anchors(pki), NOW, None), Ok(Validation::Full));
        assert!(cache.len() <= 4);
    }
    assert_eq!(cache.len(), 4);
    assert_eq!(cache.stats().evictions, 6);
    // The last four are kept, the first six are not.
    for (i, pki) in pkis.iter().enumerate().rev() {
        let kept = cache.peek(ChainUsage::ServerAuth, None, &pki.server_chain()).is_some();
        assert_eq!(kept, i >= 6, "chain {i}");
    }
}

#[test]
fn the_entry_least_recently_used_is_evicted_first() {
    let pkis: Vec<TestPki> = (0..3).map(|_| generate(1, KeyKind::P256, &[], MADE, 2).unwrap()).collect();
    let [a, b, c] = [&pkis[0], &pkis[1], &pkis[2]];
    let cache = ValidatedKeyCache::new(2);
    let run = |pki: &TestPki| how(&cache, pki, &anchors(pki), NOW, None).unwrap();
    assert_eq!(run(a), Validation::Full);
    assert_eq!(run(b), Validation::Full);
    assert_eq!(run(a), Validation::Cached); // b is now the least recently used
    assert_eq!(run(c), Validation::Full); // evicts b
    assert_eq!(run(a), Validation::Cached);
    assert_eq!(run(b), Validation::Full); // evicts c
    assert_eq!(run(a), Validation::Cached);
    assert_eq!(run(b), Validation::Cached);
    assert_eq!(run(c), Validation::Full);
    assert_eq!(cache.stats().evictions, 3);
}

#[test]
fn a_cache_of_zero_entries_keeps_nothing() {
    let cache = ValidatedKeyCache::new(0);
    for _ in 0..2 {
        assert_eq!(how(&cache, p256(), &anchors(p256()), NOW, None), Ok(Validation::Full));
    }
    assert!(cache.is_empty());
}

#[test]
fn an_entry_is_smaller_than_the_papers() {
    // Seed 003 §V-C: 241 B per ECC entry, 420 B per RSA entry.
    for (pki, algorithm, key_bits, paper) in
        [(p256(), KeyAlgorithm::EcdsaP256, 65, 241), (rsa(), KeyAlgorithm::Rsa, 270, 420)]
    {
        let cache = ValidatedKeyCache::new(1);
        how(&cache, pki, &anchors(pki), NOW, None).unwrap();
        let entry = cache.peek(ChainUsage::ServerAuth, None, &pki.server_chain()).unwrap();
        assert_eq!(entry.algorithm(), algorithm);
        let fixed = std::mem::size_of::<ChainDigest>() + std::mem::size_of::<fastshake_pki::ValidatedKey>();
        assert_eq!(entry.approx_size(), fixed + key_bits);
        assert!(entry.approx_size() < paper, "{algorithm:?}: {} B", entry.approx_size());
    }
}

#[test]
fn one_cache_serves_many_threads() {
    let cache = Arc::new(ValidatedKeyCache::new(8));
    let anchors = Arc::new(anchors(p256()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (cache, anchors) = (Arc::clone(&cache), Arc::clone(&anchors));
            std::thread::spawn(move || {
                for _ in 0..5 {
                    cache.verify_server_chain(&p256().server_chain(), &anchors, NOW, None).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let stats = cache.stats();
    assert_eq!(stats.hits + stats.misses, 20);
    assert!(stats.hits >= 16, "at most one miss per thread: {stats:?}");
    assert_eq!(cache.len(), 1);
}
