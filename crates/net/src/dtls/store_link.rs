//! A worker's link to the session-ID cache shared by its server or fleet (see
//! [`crate::session_store`]): lookups for the engine's ClientHellos, and puts of new sessions.

use crate::session_store::SessionStore;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a session-store lookup may take before the handshake goes on without it.
pub const STORE_TIMEOUT: Duration = Duration::from_millis(300);
/// After a store error, lookups are skipped (full handshakes) for this long.
pub(super) const STORE_BACKOFF: Duration = Duration::from_secs(5);
/// Store lookups and writes under way at most per worker; beyond it a lookup is a miss.
pub(super) const STORE_IN_FLIGHT: usize = 256;

/// A session-store lookup that came back (its ClientHello waits in the engine).
pub(super) struct LookupDone {
    pub(super) id: [u8; 32],
    pub(super) answer: io::Result<Option<Vec<u8>>>,
}

/// A worker's link to the session store.
pub(super) struct StoreLink {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) done: mpsc::Sender<LookupDone>,
    pub(super) failures: mpsc::Sender<String>,
    pub(super) in_flight: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) ttl: Duration,
    /// Lookups are skipped until then after an error.
    pub(super) down_until: Option<tokio::time::Instant>,
}

impl StoreLink {
    pub(super) fn busy(&self) -> bool {
        self.in_flight.load(std::sync::atomic::Ordering::Relaxed) >= STORE_IN_FLIGHT
            || self.down_until.is_some_and(|t| tokio::time::Instant::now() < t)
    }

    /// Asks the store for `id`: its answer when it has one at once (the workers' store in this
    /// process), else `None` and the answer comes back as a [`LookupDone`].
    pub(super) fn look_up(&self, id: [u8; 32]) -> Option<io::Result<Option<Vec<u8>>>> {
        let mut lookup = self.store.get(id);
        if let Some(answer) = ready_now(&mut lookup) {
            return Some(answer);
        }
        let (done, in_flight) = (self.done.clone(), Arc::clone(&self.in_flight));
        in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            let answer = match tokio::time::timeout(STORE_TIMEOUT, lookup).await {
                Ok(answer) => answer,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
            };
            in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            let _ = done.send(LookupDone { id, answer }).await;
        });
        None
    }

    pub(super) fn put(&self, id: [u8; 32], sealed: Vec<u8>) {
        if self.in_flight.load(std::sync::atomic::Ordering::Relaxed) >= STORE_IN_FLIGHT {
            return;
        }
        let mut put = self.store.put(id, sealed, self.ttl);
        if let Some(result) = ready_now(&mut put) {
            if let Err(error) = result {
                let _ = self.failures.try_send(error.to_string());
            }
            return;
        }
        let (failures, in_flight) = (self.failures.clone(), Arc::clone(&self.in_flight));
        in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            let result = match tokio::time::timeout(STORE_TIMEOUT, put).await {
                Ok(result) => result,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
            };
            in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(error) = result {
                let _ = failures.try_send(error.to_string());
            }
        });
    }
}

/// Polls a store's future once: a store in this process answers without a task of its own.
fn ready_now<T>(future: &mut crate::session_store::StoreFuture<T>) -> Option<io::Result<T>> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(result) => Some(result),
        std::task::Poll::Pending => None,
    }
}
