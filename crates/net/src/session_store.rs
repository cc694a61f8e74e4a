//! Where a fleet keeps its session-ID cache: the engine asks for a session by ID and offers the
//! sessions it makes, sealed under the ticket key (`Endpoint::poll_session_lookup`,
//! `Endpoint::poll_shared_session`); the driver does the I/O through a [`SessionStore`]: Redis
//! for the nodes of a fleet, [`MemoryStore`] for the workers of one server.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// A boxed future, so stores can be chosen at run time.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send>>;

/// A key-value store for sealed sessions, shared by every node.
pub trait SessionStore: Send + Sync {
    /// The sealed session named `id`, if the store holds it.
    fn get(&self, id: [u8; 32]) -> StoreFuture<Option<Vec<u8>>>;
    /// Keeps `sealed` under `id` for `ttl`.
    fn put(&self, id: [u8; 32], sealed: Vec<u8>, ttl: Duration) -> StoreFuture<()>;
    /// Names the store in messages.
    fn name(&self) -> String;
}

/// Sessions in this process, shared by the workers of one server: bounded in entries (the oldest
/// goes first), each kept for its TTL as Redis keeps it. Its futures are ready at once.
pub struct MemoryStore {
    max_entries: usize,
    entries: std::sync::Mutex<MemoryEntries>,
}

#[derive(Default)]
struct MemoryEntries {
    by_id: HashMap<[u8; 32], (Vec<u8>, std::time::Instant)>,
    /// Every ID of `by_id` once, oldest first; with one TTL for all, also earliest expiry first.
    order: VecDeque<[u8; 32]>,
}

impl MemoryStore {
    /// A store holding at most `max_entries` sessions (at least one).
    pub fn new(max_entries: usize) -> MemoryStore {
        MemoryStore { max_entries: max_entries.max(1), entries: std::sync::Mutex::default() }
    }

    /// Sessions held now, expired ones not yet pushed out included.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryEntries> {
        // A worker that panicked holding the lock left whole entries behind: keep using them.
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get_now(&self, id: &[u8; 32]) -> Option<Vec<u8>> {
        let entries = self.lock();
        let (sealed, expires) = entries.by_id.get(id)?;
        (std::time::Instant::now() < *expires).then(|| sealed.clone())
    }

    fn put_now(&self, id: [u8; 32], sealed: Vec<u8>, ttl: Duration) {
        let now = std::time::Instant::now();
        let mut entries = self.lock();
        let MemoryEntries { by_id, order } = &mut *entries;
        if let Some(entry) = by_id.get_mut(&id) {
            *entry = (sealed, now + ttl);
            return;
        }
        while let Some(oldest) = order.front() {
            let expired = by_id.get(oldest).is_none_or(|(_, expires)| *expires <= now);
            if !expired && by_id.len() < self.max_entries {
                break;
            }
            by_id.remove(oldest);
            order.pop_front();
        }
        by_id.insert(id, (sealed, now + ttl));
        order.push_back(id);
    }
}

impl SessionStore for MemoryStore {
    fn get(&self, id: [u8; 32]) -> StoreFuture<Option<Vec<u8>>> {
        let found = self.get_now(&id);
        Box::pin(std::future::ready(Ok(found)))
    }

    fn put(&self, id: [u8; 32], sealed: Vec<u8>, ttl: Duration) -> StoreFuture<()> {
        self.put_now(id, sealed, ttl);
        Box::pin(std::future::ready(Ok(())))
    }

    fn name(&self) -> String {
        "the workers' shared memory".to_owned()
    }
}

/// Sessions in Redis: `SET fastshake:session:<hex id> <sealed> EX <ttl>`, `GET` to look up.
pub struct RedisStore {
    client: redis::Client,
    url: String,
    connection: Arc<Mutex<Option<redis::aio::MultiplexedConnection>>>,
}

impl RedisStore {
    /// A store at `url` (`redis://HOST:PORT`); it connects on first use and again after an error.
    pub fn new(url: &str) -> io::Result<RedisStore> {
        let client = redis::Client::open(url).map_err(|_| {
            let why = format!("{url:?} is not a Redis URL (redis://HOST[:PORT][/DB], or rediss:// for TLS)");
            io::Error::new(io::ErrorKind::InvalidInput, why)
        })?;
        Ok(RedisStore { client, url: url.to_owned(), connection: Arc::new(Mutex::new(None)) })
    }

    fn key(id: &[u8; 32]) -> String {
        format!("fastshake:session:{}", hex::encode(id))
    }

    async fn connected(
        client: redis::Client,
        slot: Arc<Mutex<Option<redis::aio::MultiplexedConnection>>>,
    ) -> io::Result<redis::aio::MultiplexedConnection> {
        let mut slot = slot.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let connection = client.get_multiplexed_async_connection().await.map_err(io::Error::other)?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Forgets the connection after an error, so the next call connects afresh.
    async fn reset(slot: &Mutex<Option<redis::aio::MultiplexedConnection>>) {
        *slot.lock().await = None;
    }
}

impl SessionStore for RedisStore {
    fn get(&self, id: [u8; 32]) -> StoreFuture<Option<Vec<u8>>> {
        let (client, slot) = (self.client.clone(), Arc::clone(&self.connection));
        Box::pin(async move {
            let mut connection = Self::connected(client, Arc::clone(&slot)).await?;
            let answer: redis::RedisResult<Option<Vec<u8>>> =
                redis::cmd("GET").arg(Self::key(&id)).query_async(&mut connection).await;
            match answer {
                Ok(value) => Ok(value),
                Err(error) => {
                    Self::reset(&slot).await;
                    Err(io::Error::other(error))
                }
            }
        })
    }

    fn put(&self, id: [u8; 32], sealed: Vec<u8>, ttl: Duration) -> StoreFuture<()> {
        let (client, slot) = (self.client.clone(), Arc::clone(&self.connection));
        Box::pin(async move {
            let mut connection = Self::connected(client, Arc::clone(&slot)).await?;
            let answer: redis::RedisResult<()> = redis::cmd("SET")
                .arg(Self::key(&id))
                .arg(sealed)
                .arg("EX")
                .arg(ttl.as_secs().max(1))
                .query_async(&mut connection)
                .await;
            if let Err(error) = answer {
                Self::reset(&slot).await;
                return Err(io::Error::other(error));
            }
            Ok(())
        })
    }

    fn name(&self) -> String {
        self.url.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_keeps_its_bound_and_its_ttl() {
        let store = MemoryStore::new(2);
        let long = Duration::from_secs(3600);
        store.put_now([1; 32], vec![1], long);
        store.put_now([2; 32], vec![2], long);
        store.put_now([3; 32], vec![3], long);
        assert_eq!(store.len(), 2, "the oldest went");
        assert_eq!(store.get_now(&[1; 32]), None);
        assert_eq!(store.get_now(&[3; 32]), Some(vec![3]));
        // An entry past its TTL is no longer handed out, and is the first to go.
        store.put_now([4; 32], vec![4], Duration::ZERO);
        assert_eq!(store.get_now(&[4; 32]), None);
        store.put_now([5; 32], vec![5], long);
        assert_eq!(store.len(), 1, "the oldest and the expired one went");
        assert_eq!(store.get_now(&[5; 32]), Some(vec![5]));
    }
}
