//! The validated-key cache (seed 003 §IV-C): once a peer's chain validated, later handshakes
//! that present the same chain skip path building and the certificates' signatures, and re-check
//! only what can change: the time, and whether the anchor the chain led to is still trusted.
//!
//! An entry keeps what a later handshake needs and nothing else: the leaf's subjectPublicKey
//! bits and algorithm, the tightest validity window over the chain sent (latest notBefore,
//! earliest notAfter), the [`AnchorId`] of the trust anchor the path ended at, and the usage
//! checked. The entries are keyed by a [`ChainDigest`], which also binds the server name checked,
//! so a chain validated for one name can never answer for another.
//!
//! One cache serves many connections (a `Mutex` inside; share it by `Arc`). It holds at most
//! `max_entries` and evicts the entry least recently used. Eviction scans the entries: O(n) on an
//! insert into a full cache, which always follows a full validation that costs far more (a few
//! microseconds for a thousand entries against tens to hundreds for the signatures), and it keeps
//! an entry free of list links.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::chain::validity_window;
use crate::{verify_client_chain, verify_server_chain};
use crate::{AnchorId, CertDer, KeyAlgorithm, PeerPublicKey, PkiError, TrustAnchors, VerifiedChain};

/// The extended key usage a chain was validated for (RFC 5280 §4.2.1.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainUsage {
    /// `id-kp-serverAuth`: a server's chain, validated by a client.
    ServerAuth,
    /// `id-kp-clientAuth`: a client's chain, validated by a server.
    ClientAuth,
}

impl ChainUsage {
    /// The byte that stands for this usage in a [`ChainDigest`].
    pub const fn code(self) -> u8 {
        match self {
            ChainUsage::ServerAuth => 1,
            ChainUsage::ClientAuth => 2,
        }
    }
}

/// How a chain was found valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    /// Full path validation: signatures, times, usage, names.
    Full,
    /// A validated-key cache entry: times and anchor re-checked, the rest skipped.
    Cached,
}

/// The key of a cache entry: SHA-256 over, in this order,
/// 1. the usage, one byte ([`ChainUsage::code`]: 1 serverAuth, 2 clientAuth);
/// 2. the server name checked: the byte 0 when none was, else the byte 1, the name's length as a
///    big-endian `u32` and the name's bytes as configured (no case folding: another spelling
///    is another key, so at worst a miss);
/// 3. every certificate as sent, leaf first: its DER length as a big-endian `u32`, then the DER.
///
/// Every field has its length or a tag before it, so two different inputs never give the same
/// bytes to hash; the full 32-byte digest is the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChainDigest(pub [u8; 32]);

impl ChainDigest {
    /// The digest of `chain` presented for `usage` (and, for a server, `server_name`).
    pub fn new(usage: ChainUsage, server_name: Option<&str>, chain: &[CertDer]) -> ChainDigest {
        // A DTLS Certificate message carries 24-bit lengths: a u32 always holds one.
        let length = |len: usize| u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&[usage.code()]);
        match server_name {
            None => ctx.update(&[0]),
            Some(name) => {
                ctx.update(&[1]);
                ctx.update(&length(name.len()));
                ctx.update(name.as_bytes());
            }
        }
        for cert in chain {
            ctx.update(&length(cert.len()));
            ctx.update(cert);
        }
        let mut digest = [0u8; 32];
        digest.copy_from_slice(ctx.finish().as_ref());
        ChainDigest(digest)
    }
}

/// One entry: what a later handshake with the same chain needs.
#[derive(Clone, Debug)]
pub struct ValidatedKey {
    /// The leaf's subjectPublicKey bits: an uncompressed P-256 point (65 B) or a PKCS#1
    /// RSAPublicKey (270 B for 2048 bits). The SubjectPublicKeyInfo around them is rebuilt on a hit.
    key_bits: Box<[u8]>,
    not_before: u64,
    not_after: u64,
    /// Value of the cache's use counter when last used: the smallest is evicted first.
    last_used: u64,
    anchor: AnchorId,
    algorithm: KeyAlgorithm,
    usage: ChainUsage,
}

impl ValidatedKey {
    /// The leaf key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// The latest notBefore over the chain (Unix seconds).
    pub fn not_before_unix(&self) -> u64 {
        self.not_before
    }

    /// The earliest notAfter over the chain (Unix seconds).
    pub fn not_after_unix(&self) -> u64 {
        self.not_after
    }

    /// The trust anchor the chain led to.
    pub fn anchor(&self) -> AnchorId {
        self.anchor
    }

    /// The usage the chain was validated for.
    pub fn usage(&self) -> ChainUsage {
        self.usage
    }

    /// Bytes this entry takes: its slot in the map (the 32-byte key and this struct) and the key
    /// bits on the heap. Not counted: the map's spare slots and control bytes (about one byte
    /// and an eighth of a slot per entry, see [`ValidatedKeyCache::approx_size`]) and the
    /// allocator's rounding of the key bits.
    pub fn approx_size(&self) -> usize {
        std::mem::size_of::<(ChainDigest, ValidatedKey)>() + self.key_bits.len()
    }

    /// Whether this entry may stand for a full validation at `now` under `anchors`.
    fn still_valid(&self, usage: ChainUsage, anchors: &TrustAnchors, now_unix_secs: u64) -> bool {
        // The same comparisons webpki makes: valid from notBefore to notAfter, both included.
        self.usage == usage
            && self.not_before <= now_unix_secs
            && now_unix_secs <= self.not_after
            && anchors.contains(&self.anchor)
    }
}

/// Counters of a [`ValidatedKeyCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCacheStats {
    /// Lookups answered from an entry (validation skipped).
    pub hits: u64,
    /// Lookups that went to full validation (no entry, or one no longer valid).
    pub misses: u64,
    /// Entries dropped because the time was outside their window or their anchor was no longer
    /// trusted (each also counts as a miss).
    pub invalidated: u64,
    /// Entries evicted to make room, least recently used first.
    pub evictions: u64,
}

/// A bounded, least-recently-used cache of validated peer keys, shared by many connections.
#[derive(Debug)]
pub struct ValidatedKeyCache {
    max_entries: usize,
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    entries: HashMap<ChainDigest, ValidatedKey>,
    /// Counts uses; an entry records the count when it was last used.
    uses: u64,
    stats: KeyCacheStats,
}

impl ValidatedKeyCache {
    /// A cache of at most `max_entries` entries (0 keeps nothing: every lookup misses).
    pub fn new(max_entries: usize) -> ValidatedKeyCache {
        ValidatedKeyCache { max_entries, state: Mutex::default() }
    }

    /// Validates a server's chain as [`verify_server_chain`] does, unless an entry for the same
    /// chain and name is still valid at `now_unix_secs` under `anchors`. A full validation that
    /// succeeds is kept.
    pub fn verify_server_chain(
        &self,
        chain: &[CertDer],
        anchors: &TrustAnchors,
        now_unix_secs: u64,
        server_name: Option<&str>,
    ) -> Result<(VerifiedChain, Validation), PkiError> {
        let digest = ChainDigest::new(ChainUsage::ServerAuth, server_name, chain);
        if let Some(verified) = self.lookup(&digest, ChainUsage::ServerAuth, anchors, now_unix_secs) {
            return Ok((verified, Validation::Cached));
        }
        let verified = verify_server_chain(chain, anchors, now_unix_secs, server_name)?;
        self.insert(digest, ChainUsage::ServerAuth, chain, &verified);
        Ok((verified, Validation::Full))
    }

    /// Validates a client's chain as [`verify_client_chain`] does, unless an entry for the same
    /// chain is still valid at `now_unix_secs` under `anchors`. A full validation that succeeds
    /// is kept.
    pub fn verify_client_chain(
        &self,
        chain: &[CertDer],
        anchors: &TrustAnchors,
        now_unix_secs: u64,
    ) -> Result<(VerifiedChain, Validation), PkiError> {
        let digest = ChainDigest::new(ChainUsage::ClientAuth, None, chain);
        if let Some(verified) = self.lookup(&digest, ChainUsage::ClientAuth, anchors, now_unix_secs) {
            return Ok((verified, Validation::Cached));
        }
        let verified = verify_client_chain(chain, anchors, now_unix_secs)?;
        self.insert(digest, ChainUsage::ClientAuth, chain, &verified);
        Ok((verified, Validation::Full))
    }

    /// A copy of the entry for `chain`, if there is one, without using it (no LRU update, no
    /// re-check).
    pub fn peek(
        &self,
        usage: ChainUsage,
        server_name: Option<&str>,
        chain: &[CertDer],
    ) -> Option<ValidatedKey> {
        let digest = ChainDigest::new(usage, server_name, chain);
        self.state().entries.get(&digest).cloned()
    }

    /// The most entries kept.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Entries kept now.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every entry (the counters stay).
    pub fn clear(&self) {
        self.state().entries.clear();
    }

    /// The counters so far.
    pub fn stats(&self) -> KeyCacheStats {
        self.state().stats
    }

    /// Bytes the whole cache takes: this struct, every slot the map has allocated (used or not)
    /// with its control byte, and the entries' key bits.
    pub fn approx_size(&self) -> usize {
        let state = self.state();
        let slot = std::mem::size_of::<(ChainDigest, ValidatedKey)>() + 1;
        let heap: usize = state.entries.values().map(|entry| entry.key_bits.len()).sum();
        std::mem::size_of::<Self>() + state.entries.capacity() * slot + heap
    }

    fn state(&self) -> MutexGuard<'_, CacheState> {
        // The lock guards no invariant a panic elsewhere could break halfway: keep serving.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The entry for `digest`, if it may stand for a full validation now; one that may not is
    /// dropped (a later full validation puts it back if it passes).
    fn lookup(
        &self,
        digest: &ChainDigest,
        usage: ChainUsage,
        anchors: &TrustAnchors,
        now_unix_secs: u64,
    ) -> Option<VerifiedChain> {
        let mut state = self.state();
        let CacheState { entries, uses, stats } = &mut *state;
        let Some(entry) = entries.get_mut(digest) else {
            stats.misses += 1;
            return None;
        };
        let key = entry
            .still_valid(usage, anchors, now_unix_secs)
            .then(|| PeerPublicKey::from_key_bits(entry.algorithm, &entry.key_bits).ok())
            .flatten();
        let Some(key) = key else {
            entries.remove(digest);
            stats.invalidated += 1;
            stats.misses += 1;
            return None;
        };
        *uses += 1;
        entry.last_used = *uses;
        stats.hits += 1;
        Some(VerifiedChain { key, anchor: entry.anchor, not_after_unix: entry.not_after })
    }

    fn insert(&self, digest: ChainDigest, usage: ChainUsage, chain: &[CertDer], verified: &VerifiedChain) {
        if self.max_entries == 0 {
            return;
        }
        // Every certificate parsed during validation; should one not, keep nothing.
        let Ok((not_before, not_after)) = validity_window(chain) else { return };
        let mut state = self.state();
        let CacheState { entries, uses, stats } = &mut *state;
        if !entries.contains_key(&digest) && entries.len() >= self.max_entries {
            let oldest = entries.iter().min_by_key(|(_, entry)| entry.last_used).map(|(digest, _)| *digest);
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
                stats.evictions += 1;
            }
        }
        *uses += 1;
        let entry = ValidatedKey {
            key_bits: verified.key.key_bytes().into(),
            not_before,
            not_after,
            last_used: *uses,
            anchor: verified.anchor,
            algorithm: verified.key.algorithm(),
            usage,
        };
        entries.insert(digest, entry);
    }
}

/// [`verify_server_chain`] through `cache` when there is one.
pub fn verify_server_chain_cached(
    cache: Option<&ValidatedKeyCache>,
    chain: &[CertDer],
    anchors: &TrustAnchors,
    now_unix_secs: u64,
    server_name: Option<&str>,
) -> Result<(VerifiedChain, Validation), PkiError> {
    match cache {
        Some(cache) => cache.verify_server_chain(chain, anchors, now_unix_secs, server_name),
        None => {
            verify_server_chain(chain, anchors, now_unix_secs, server_name).map(|v| (v, Validation::Full))
        }
    }
}

/// [`verify_client_chain`] through `cache` when there is one.
pub fn verify_client_chain_cached(
    cache: Option<&ValidatedKeyCache>,
    chain: &[CertDer],
    anchors: &TrustAnchors,
    now_unix_secs: u64,
) -> Result<(VerifiedChain, Validation), PkiError> {
    match cache {
        Some(cache) => cache.verify_client_chain(chain, anchors, now_unix_secs),
        None => verify_client_chain(chain, anchors, now_unix_secs).map(|v| (v, Validation::Full)),
    }
}
