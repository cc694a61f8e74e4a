//! Where a fleet keeps its session-ID cache: the engine asks for a session by ID and offers the
//! sessions it makes, sealed under the ticket key (`Endpoint::poll_session_lookup`,
//! `Endpoint::poll_shared_session`); the driver does the I/O through a [`SessionStore`].

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

/// Sessions in Redis: `SET fastshake:session:<hex id> <sealed> EX <ttl>`, `GET` to look up.
pub struct RedisStore {
    client: redis::Client,
    url: String,
    connection: Arc<Mutex<Option<redis::aio::MultiplexedConnection>>>,
}

impl RedisStore {
    /// A store at `url` (`redis://HOST:PORT`); it connects on first use and again after an error.
    pub fn new(url: &str) -> io::Result<RedisStore> {
        let client = redis::Client::open(url).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
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
