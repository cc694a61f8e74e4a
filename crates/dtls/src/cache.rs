//! Handshake caching (seed 003, BiTHaC) above the wire forms of `handshake::cached`: what a
//! client keeps per server ([`CachedServer`]: the server's Certificate and CertificateRequest
//! for RFC 7924, the client-certificate ticket), the stores that keep those entries
//! ([`CacheStore`], [`MemoryCacheStore`], and the versioned byte format a file store writes),
//! the server's bounded cache of client chains, and the ticket derivation both sides share.
//!
//! Every handshake stays a full one: fresh ECDHE keys, and both sides still sign. Caching only
//! leaves out messages the peer already has.

use crate::crypto::prf_sha256;
use crate::session::ClientCertificate;
use fastshake_core::codec::{put_u16, put_u8, put_vec16, put_vec8, DecodeError, Reader};
use fastshake_pki::CertDer;
use std::collections::BTreeMap;

/// Length of a client-certificate ticket. The ticket names a cache entry and proves nothing
/// (the CertificateVerify does), so 8 bytes suffice to keep collisions and guesses away.
pub const CLIENT_TICKET_LEN: usize = 8;
/// Label of the ticket derivation (RFC 5246 §5 PRF).
const TICKET_LABEL: &[u8] = b"fastshake client certificate ticket";
/// Largest cached message kept or read back (a Certificate of 16 large certificates fits).
const MAX_CACHED_MESSAGE: usize = 64 * 1024;

/// What the handshake took from a cache, for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUse {
    /// The server sent the fingerprint of its Certificate in place of the chain (RFC 7924).
    pub server_certificate: bool,
    /// The server sent the fingerprint of its CertificateRequest (RFC 7924).
    pub certificate_request: bool,
    /// The client sent an empty Certificate; the server used the chain it cached (ticket).
    pub client_certificate: bool,
}

impl CacheUse {
    /// Whether anything came from a cache.
    pub fn any(&self) -> bool {
        self.server_certificate || self.certificate_request || self.client_certificate
    }
}

/// What a client keeps about one server between handshakes: never offered to another server
/// (seed 003 §VI: unscoped fingerprints would let servers track the client).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CachedServer {
    /// The server name the objects came with (`ClientConfig::server_name`).
    pub(crate) server_name: Option<String>,
    /// The server's Certificate message body.
    pub(crate) certificate: Option<Vec<u8>>,
    /// The server's CertificateRequest message body.
    pub(crate) certificate_request: Option<Vec<u8>>,
    /// The ticket naming our chain in the server's cache.
    pub(crate) client_ticket: Option<Vec<u8>>,
}

impl std::fmt::Debug for CachedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedServer")
            .field("server_name", &self.server_name)
            .field("certificate_len", &self.certificate.as_ref().map(Vec::len))
            .field("certificate_request_len", &self.certificate_request.as_ref().map(Vec::len))
            .field("client_ticket", &self.client_ticket.is_some())
            .finish()
    }
}

impl CachedServer {
    /// The server name the entry belongs to.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// Whether the server's Certificate is cached.
    pub fn has_certificate(&self) -> bool {
        self.certificate.is_some()
    }

    /// Whether the server's CertificateRequest is cached.
    pub fn has_certificate_request(&self) -> bool {
        self.certificate_request.is_some()
    }

    /// Whether a client-certificate ticket is kept.
    pub fn has_client_ticket(&self) -> bool {
        self.client_ticket.is_some()
    }

    /// Bytes the entry holds.
    pub fn memory(&self) -> usize {
        [&self.certificate, &self.certificate_request, &self.client_ticket]
            .iter()
            .map(|v| v.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
            + self.server_name.as_ref().map_or(0, String::len)
    }

    fn write(&self, out: &mut Vec<u8>) {
        put_vec8(out, self.server_name.as_deref().unwrap_or("").as_bytes());
        for field in [&self.certificate, &self.certificate_request] {
            match field {
                Some(v) => {
                    put_u8(out, 1);
                    out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                    out.extend_from_slice(v);
                }
                None => put_u8(out, 0),
            }
        }
        put_vec8(out, self.client_ticket.as_deref().unwrap_or(&[]));
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let name = r.vec8()?;
        let server_name = match name {
            [] => None,
            n => Some(String::from_utf8(n.to_vec()).map_err(|_| DecodeError::Invalid("server name"))?),
        };
        let mut objects = [None, None];
        for slot in &mut objects {
            *slot = match r.u8()? {
                0 => None,
                1 => {
                    let len = u32::from_be_bytes(r.array::<4>()?) as usize;
                    if len == 0 || len > MAX_CACHED_MESSAGE {
                        return Err(DecodeError::Invalid("cached message length"));
                    }
                    Some(r.take(len)?.to_vec())
                }
                _ => return Err(DecodeError::Invalid("presence flag")),
            };
        }
        let ticket = r.vec8()?;
        if !ticket.is_empty() && ticket.len() != CLIENT_TICKET_LEN {
            return Err(DecodeError::Invalid("ticket length"));
        }
        let [certificate, certificate_request] = objects;
        Ok(CachedServer {
            server_name,
            certificate,
            certificate_request,
            client_ticket: (!ticket.is_empty()).then(|| ticket.to_vec()),
        })
    }
}

/// Where a client keeps its [`CachedServer`] entries, one per server. The key names the server
/// as the caller reaches it (name and address), so entries never cross servers.
pub trait CacheStore {
    /// The entry kept for `server`, if any.
    fn load(&self, server: &str) -> Option<CachedServer>;
    /// Keeps `entry` for `server`, replacing the old one.
    fn store(&mut self, server: &str, entry: CachedServer);
}

/// A [`CacheStore`] in memory, with the byte format a file store writes
/// ([`MemoryCacheStore::to_bytes`], [`MemoryCacheStore::from_bytes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryCacheStore {
    entries: BTreeMap<String, CachedServer>,
}

/// Magic and version of the byte format: "FSHC", then version 1.
const STORE_MAGIC: &[u8; 4] = b"FSHC";
const STORE_VERSION: u8 = 1;
/// Servers kept in one store at most (bounds a file, and what a corrupt one can ask for).
const MAX_STORE_ENTRIES: usize = 4096;

impl MemoryCacheStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Servers with an entry.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no server has an entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The whole store: magic, version, entry count, then each server key and entry.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.entries.values().map(|e| e.memory() + 32).sum::<usize>());
        out.extend_from_slice(STORE_MAGIC);
        put_u8(&mut out, STORE_VERSION);
        put_u16(&mut out, self.entries.len().min(MAX_STORE_ENTRIES) as u16);
        for (server, entry) in self.entries.iter().take(MAX_STORE_ENTRIES) {
            put_vec16(&mut out, server.as_bytes());
            entry.write(&mut out);
        }
        out
    }

    /// Reads [`MemoryCacheStore::to_bytes`] output; any flaw is an error (the caller starts
    /// empty), never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        if &r.array::<4>()? != STORE_MAGIC {
            return Err(DecodeError::Invalid("not a fastshake cache"));
        }
        if r.u8()? != STORE_VERSION {
            return Err(DecodeError::Invalid("unknown cache format version"));
        }
        let count = r.u16()? as usize;
        if count > MAX_STORE_ENTRIES {
            return Err(DecodeError::Invalid("too many entries"));
        }
        let mut entries = BTreeMap::new();
        for _ in 0..count {
            let server =
                String::from_utf8(r.vec16()?.to_vec()).map_err(|_| DecodeError::Invalid("server key"))?;
            let entry = CachedServer::read(&mut r)?;
            if entries.insert(server, entry).is_some() {
                return Err(DecodeError::Invalid("server listed twice"));
            }
        }
        r.finish()?;
        Ok(MemoryCacheStore { entries })
    }
}

impl CacheStore for MemoryCacheStore {
    fn load(&self, server: &str) -> Option<CachedServer> {
        self.entries.get(server).cloned()
    }

    fn store(&mut self, server: &str, entry: CachedServer) {
        if self.entries.len() >= MAX_STORE_ENTRIES && !self.entries.contains_key(server) {
            // Full: the first key in order goes (a store is per client, so this is rare).
            self.entries.pop_first();
        }
        self.entries.insert(server.to_owned(), entry);
    }
}

/// The ticket both sides derive after a handshake in which the client sent (or reused) its
/// chain: PRF(master_secret, label, client_random + server_random). Fresh for every handshake
/// (the randoms), never on the wire before the next ClientHello, unrelated to earlier ones
/// without the master secret.
pub(crate) fn derive_client_ticket(
    master: &[u8; 48],
    client_random: &[u8; 32],
    server_random: &[u8; 32],
) -> [u8; CLIENT_TICKET_LEN] {
    let mut out = [0u8; CLIENT_TICKET_LEN];
    prf_sha256(master, TICKET_LABEL, &[client_random, server_random], &mut out);
    out
}

/// Bounds of the server's cache of client chains (client-certificate caching).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientCertCacheConfig {
    /// Chains kept at most; 0 turns client-certificate caching off.
    pub max_entries: usize,
    /// Bytes of certificates kept at most, over all entries.
    pub max_bytes: usize,
}

impl Default for ClientCertCacheConfig {
    fn default() -> Self {
        ClientCertCacheConfig { max_entries: 1000, max_bytes: 4 * 1024 * 1024 }
    }
}

/// A client's chain as the server validated it, kept under a ticket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CachedClientChain {
    pub chain: Vec<CertDer>,
    pub verified: ClientCertificate,
}

impl CachedClientChain {
    fn bytes(&self) -> usize {
        self.chain.iter().map(|c| c.len()).sum::<usize>() + std::mem::size_of::<Self>()
    }
}

/// The server's cache of client chains: bounded in entries and bytes, least recently used out
/// first; each ticket opens its entry once (taking it out), and the handshake that used it
/// files the chain again under the next ticket. Ordered maps: no hash seeds, reproducible order.
pub(crate) struct ClientCertCache {
    config: ClientCertCacheConfig,
    entries: BTreeMap<[u8; CLIENT_TICKET_LEN], (CachedClientChain, u64)>,
    by_use: BTreeMap<u64, [u8; CLIENT_TICKET_LEN]>,
    bytes: usize,
    tick: u64,
}

impl ClientCertCache {
    pub fn new(config: ClientCertCacheConfig) -> Self {
        ClientCertCache { config, entries: BTreeMap::new(), by_use: BTreeMap::new(), bytes: 0, tick: 0 }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn insert(&mut self, ticket: [u8; CLIENT_TICKET_LEN], entry: CachedClientChain) {
        let size = entry.bytes();
        if self.config.max_entries == 0 || size > self.config.max_bytes {
            return;
        }
        self.take(&ticket);
        while self.entries.len() >= self.config.max_entries || self.bytes + size > self.config.max_bytes {
            let Some((_, oldest)) = self.by_use.pop_first() else { break };
            if let Some((old, _)) = self.entries.remove(&oldest) {
                self.bytes -= old.bytes();
            }
        }
        self.tick += 1;
        self.by_use.insert(self.tick, ticket);
        self.bytes += size;
        self.entries.insert(ticket, (entry, self.tick));
    }

    /// Takes the entry a ticket names out of the cache (a ticket opens its entry once).
    pub fn take(&mut self, ticket: &[u8]) -> Option<CachedClientChain> {
        let ticket: [u8; CLIENT_TICKET_LEN] = ticket.try_into().ok()?;
        let (entry, tick) = self.entries.remove(&ticket)?;
        self.by_use.remove(&tick);
        self.bytes -= entry.bytes();
        Some(entry)
    }
}

/// The client-certificate cache of an endpoint, which other endpoints may share
/// ([`crate::Endpoint::share_client_cert_cache`]): the workers of one server share one, so a
/// client's ticket opens at whichever worker it meets, as it would at a single one.
#[derive(Clone)]
pub struct SharedClientCertCache(std::sync::Arc<std::sync::Mutex<ClientCertCache>>);

impl SharedClientCertCache {
    /// An empty cache within `config`'s bounds.
    pub fn new(config: ClientCertCacheConfig) -> Self {
        SharedClientCertCache(std::sync::Arc::new(std::sync::Mutex::new(ClientCertCache::new(config))))
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, ClientCertCache> {
        // An endpoint that panicked holding the lock left whole entries behind: keep using them.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for SharedClientCertCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cache = self.lock();
        write!(f, "SharedClientCertCache({} chain(s), {} B)", cache.len(), cache.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: usize) -> CachedClientChain {
        CachedClientChain {
            chain: vec![CertDer::from(vec![7u8; n])],
            verified: ClientCertificate { anchor: fastshake_pki::AnchorId([1; 32]), not_after: 10 },
        }
    }

    #[test]
    fn client_chain_cache_is_bounded_lru_and_single_use() {
        let mut cache = ClientCertCache::new(ClientCertCacheConfig { max_entries: 2, max_bytes: 1 << 20 });
        cache.insert([1; 8], chain(100));
        cache.insert([2; 8], chain(100));
        cache.insert([3; 8], chain(100));
        assert_eq!(cache.len(), 2);
        assert!(cache.take(&[1; 8]).is_none(), "least recently used went first");
        assert!(cache.take(&[2; 8]).is_some());
        assert!(cache.take(&[2; 8]).is_none(), "a ticket opens its entry once");
        assert!(cache.take(&[3; 7]).is_none());
        let one = chain(1000).bytes();
        let mut small = ClientCertCache::new(ClientCertCacheConfig { max_entries: 100, max_bytes: 2 * one });
        for i in 0..10u8 {
            small.insert([i; 8], chain(1000));
            assert!(small.bytes() <= 2 * one);
        }
        assert_eq!(small.len(), 2);
        let mut off = ClientCertCache::new(ClientCertCacheConfig { max_entries: 0, max_bytes: 1 << 20 });
        off.insert([1; 8], chain(10));
        assert_eq!(off.len(), 0);
    }

    #[test]
    fn tickets_differ_per_handshake() {
        let a = derive_client_ticket(&[1; 48], &[2; 32], &[3; 32]);
        let b = derive_client_ticket(&[1; 48], &[2; 32], &[4; 32]);
        let c = derive_client_ticket(&[9; 48], &[2; 32], &[3; 32]);
        assert!(a != b && a != c && b != c);
    }

    #[test]
    fn store_bytes_round_trip_and_reject_garbage() {
        let mut store = MemoryCacheStore::new();
        store.store(
            "localhost@127.0.0.1:4433",
            CachedServer {
                server_name: Some("localhost".into()),
                certificate: Some(vec![1; 300]),
                certificate_request: Some(vec![2; 40]),
                client_ticket: Some(vec![3; 8]),
            },
        );
        store.store("other", CachedServer::default());
        let bytes = store.to_bytes();
        assert_eq!(MemoryCacheStore::from_bytes(&bytes).unwrap(), store);
        for cut in 0..bytes.len() {
            assert!(MemoryCacheStore::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(MemoryCacheStore::from_bytes(&longer).is_err());
        let mut version = bytes;
        version[4] = 9;
        assert!(MemoryCacheStore::from_bytes(&version).is_err());
    }
}
