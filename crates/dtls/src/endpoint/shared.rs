//! Sessions shared by a fleet of servers through a store the driver reaches (a session-ID cache
//! in Redis, say). The engine does no I/O: a ClientHello with a fresh cookie and a session ID
//! the local cache lacks becomes a lookup the driver polls; the driver fetches, answers with
//! [`Endpoint::answer_session_lookup`] and hands the same datagram in again. Every session a full
//! handshake makes is offered to the driver sealed under the current ticket key (AES-128-GCM, as
//! a ticket), so the store never holds a master secret in the clear.

use super::Endpoint;
use crate::session::{unix_now, ServerSession, TicketKeys};
use fastshake_core::Instant;
use rand_core::RngCore;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Lookups and exports waiting for the driver at most; beyond it the oldest goes (a lookup
/// dropped is a full handshake, an export dropped a session only this node can resume).
const MAX_WAITING: usize = 1024;
/// Session IDs the store did not have, remembered at most, so that the ClientHello handed in
/// again goes to a full handshake instead of another lookup.
const MAX_MISSES: usize = 4096;
/// How long a miss stands: a client retrying later gets a fresh lookup.
const MISS_LIFETIME: Duration = Duration::from_secs(10);

#[derive(Default)]
pub(super) struct SharedSessions {
    enabled: bool,
    lookups: VecDeque<[u8; 32]>,
    misses: BTreeMap<[u8; 32], Instant>,
    exports: VecDeque<([u8; 32], Vec<u8>)>,
    /// What seals and opens shared sessions when the configuration issues no tickets.
    seal_keys: Option<TicketKeys>,
}

impl SharedSessions {
    /// Whether a ClientHello naming `id` must wait for the store (the local cache lacks it).
    /// Records the lookup when it must.
    pub(super) fn must_look_up(&mut self, id: &[u8], now: Instant, cached: bool) -> bool {
        let Ok(id) = <[u8; 32]>::try_from(id) else { return false };
        if !self.enabled || cached {
            return false;
        }
        if let Some(&when) = self.misses.get(&id) {
            if now.saturating_duration_since(when) < MISS_LIFETIME {
                return false;
            }
            self.misses.remove(&id);
        }
        if !self.lookups.contains(&id) {
            if self.lookups.len() >= MAX_WAITING {
                self.lookups.pop_front();
            }
            self.lookups.push_back(id);
        }
        true
    }

    fn miss(&mut self, id: [u8; 32], now: Instant) {
        if self.misses.len() >= MAX_MISSES {
            self.misses.retain(|_, &mut when| now.saturating_duration_since(when) < MISS_LIFETIME);
            if self.misses.len() >= MAX_MISSES {
                self.misses.pop_first();
            }
        }
        self.misses.insert(id, now);
    }

    /// Seals a session a full handshake made for the store, under the ticket keys or else the
    /// sealing keys (nothing without either).
    pub(super) fn offer(
        &mut self,
        ticket_keys: Option<&TicketKeys>,
        rng: &mut impl RngCore,
        id: [u8; 32],
        session: &ServerSession,
    ) {
        let Some(keys) = ticket_keys.or(self.seal_keys.as_ref()).filter(|_| self.enabled) else { return };
        let mut nonce = [0u8; 12];
        rng.fill_bytes(&mut nonce);
        let Some(sealed) = session.seal(&keys.current, nonce) else { return };
        if self.exports.len() >= MAX_WAITING {
            self.exports.pop_front();
        }
        self.exports.push_back((id, sealed));
    }
}

impl Endpoint {
    /// Shares the session-ID cache with a store the driver reaches: lookups for unknown IDs
    /// ([`Endpoint::poll_session_lookup`]) and sealed new sessions
    /// ([`Endpoint::poll_shared_session`]). Needs ticket keys: they seal what leaves.
    pub fn share_sessions(&mut self) {
        self.shared.enabled = true;
    }

    /// Shares the session-ID cache as [`Endpoint::share_sessions`] does, sealing under `keys`
    /// while the configuration issues no tickets (the workers of one server: the key never
    /// leaves the process).
    pub fn share_sessions_sealed_by(&mut self, keys: TicketKeys) {
        self.shared.enabled = true;
        self.shared.seal_keys = Some(keys);
    }

    /// The keys that seal and open shared sessions: the ticket keys, else the sealing keys.
    fn shared_keys(&self) -> Option<&TicketKeys> {
        self.ticket_keys.as_ref().or(self.shared.seal_keys.as_ref())
    }

    /// A session ID the driver should fetch from the store: the ClientHello that named it was
    /// not processed; hand it in again after [`Endpoint::answer_session_lookup`].
    pub fn poll_session_lookup(&mut self) -> Option<[u8; 32]> {
        self.shared.lookups.pop_front()
    }

    /// The store's answer for `id`: the sealed session, or `None` (absent, unreachable). A
    /// sealed session that does not open under our ticket keys, or has expired, is a miss.
    pub fn answer_session_lookup(&mut self, id: [u8; 32], sealed: Option<&[u8]>) {
        let now = self.clock;
        let opened = match (sealed, self.shared_keys()) {
            (Some(sealed), Some(keys)) => {
                ServerSession::open(keys, sealed, unix_now(self.config.wall_clock, now)).filter(|s| {
                    s.fresh(unix_now(self.config.wall_clock, now), self.config.session_cache.lifetime)
                })
            }
            _ => None,
        };
        match opened {
            Some(session) if self.config.session_cache.max_entries > 0 => {
                self.session_cache.insert(id, session);
            }
            _ => self.shared.miss(id, now),
        }
    }

    /// A session a full handshake made, sealed under the current ticket key, for the store.
    pub fn poll_shared_session(&mut self) -> Option<([u8; 32], Vec<u8>)> {
        self.shared.exports.pop_front()
    }

    /// Replaces the ticket keys wholesale (keys shared by a fleet and loaded from a file); does
    /// nothing when the configuration has tickets disabled.
    pub fn set_ticket_keys(&mut self, keys: crate::session::TicketKeys) {
        if let Some(current) = self.ticket_keys.as_mut() {
            *current = keys;
        }
    }
}
