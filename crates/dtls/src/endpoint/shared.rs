//! Sessions shared by a fleet of servers through a store the driver reaches (a session-ID cache
//! in Redis, say). The engine does no I/O: a ClientHello with a fresh cookie and a session ID
//! the local cache lacks becomes a lookup the driver polls, and waits in the engine; the driver
//! fetches and answers with [`Endpoint::answer_session_lookup`], and the ClientHello goes on
//! with what the store had. Every session a full handshake makes is offered to the driver sealed
//! under the current ticket key (AES-128-GCM, as a ticket), so the store never holds a master
//! secret in the clear.

use super::incoming::HelloInfo;
use super::Endpoint;
use crate::clock::unix_now;
use crate::session::{ServerSession, TicketKeys};
use fastshake_core::Instant;
use rand_core::RngCore;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// Lookups and exports waiting for the driver at most; beyond it the oldest goes (a lookup
/// dropped is a full handshake, an export dropped a session only this node can resume).
const MAX_WAITING: usize = 1024;
/// Session IDs the store did not have, remembered at most, so that the waiting ClientHello, and
/// the copies its client resends, go to a full handshake instead of another lookup.
const MAX_MISSES: usize = 4096;
/// How long a miss stands: a client retrying later gets a fresh lookup.
const MISS_LIFETIME: Duration = Duration::from_secs(10);
/// Bytes of the ClientHellos waiting for the store, all together; beyond it the oldest goes (its
/// client's retransmission finds the session the answer brought).
const MAX_WAITING_HELLO_BYTES: usize = 256 * 1024;

/// A ClientHello (its cookie verified) waiting for the store's answer on the session it names.
pub(super) struct WaitingHello {
    pub id: [u8; 32],
    pub from: SocketAddr,
    pub hello: HelloInfo,
    /// The bytes of the datagram(s) it came in (what the anti-amplification budget counts).
    pub datagram_len: usize,
}

#[derive(Default)]
pub(super) struct SharedSessions {
    enabled: bool,
    lookups: VecDeque<[u8; 32]>,
    /// The latest ClientHello for each lookup, oldest first.
    waiting: VecDeque<WaitingHello>,
    waiting_bytes: usize,
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
                // No answer will come for a lookup never polled: its hellos go with it.
                if let Some(dropped) = self.lookups.pop_front() {
                    self.take_waiting(dropped);
                }
            }
            self.lookups.push_back(id);
        }
        true
    }

    /// Keeps `hello` until the store answers for its session (replacing an earlier copy from
    /// the same client), within [`MAX_WAITING`] hellos and [`MAX_WAITING_HELLO_BYTES`].
    pub(super) fn wait(&mut self, hello: WaitingHello) {
        self.waiting.retain(|w| {
            let same = w.id == hello.id && w.from == hello.from;
            if same {
                self.waiting_bytes -= w.hello.body_len();
            }
            !same
        });
        self.waiting_bytes += hello.hello.body_len();
        self.waiting.push_back(hello);
        while self.waiting.len() > MAX_WAITING || self.waiting_bytes > MAX_WAITING_HELLO_BYTES {
            let Some(old) = self.waiting.pop_front() else { break };
            self.waiting_bytes -= old.hello.body_len();
        }
    }

    /// The ClientHellos waiting for the answer on `id`.
    fn take_waiting(&mut self, id: [u8; 32]) -> VecDeque<WaitingHello> {
        let (taken, kept) = std::mem::take(&mut self.waiting).into_iter().partition(|w| w.id == id);
        self.waiting = kept;
        self.waiting_bytes = self.waiting.iter().map(|w| w.hello.body_len()).sum();
        taken
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

    /// A session ID the driver should fetch from the store: the ClientHello that named it waits
    /// in the engine until [`Endpoint::answer_session_lookup`].
    pub fn poll_session_lookup(&mut self) -> Option<[u8; 32]> {
        self.shared.lookups.pop_front()
    }

    /// The store's answer for `id`: the sealed session, or `None` (absent, unreachable). A
    /// sealed session that does not open under our ticket keys, or has expired, is a miss. The
    /// ClientHellos that waited for it go on now: resumed with the session, or a full handshake.
    pub fn answer_session_lookup(&mut self, now: Instant, id: [u8; 32], sealed: Option<&[u8]>) {
        self.clock = self.clock.max(now);
        let now = self.clock;
        let opened = match (sealed, self.shared_keys()) {
            (Some(sealed), Some(keys)) => {
                ServerSession::open(keys, sealed, unix_now(self.role.config.wall_clock, now)).filter(|s| {
                    s.fresh(
                        unix_now(self.role.config.wall_clock, now),
                        self.role.config.session_cache.lifetime,
                    )
                })
            }
            _ => None,
        };
        match opened {
            Some(session) if self.role.config.session_cache.max_entries > 0 => {
                self.session_cache.insert(id, session);
            }
            _ => self.shared.miss(id, now),
        }
        for waiting in self.shared.take_waiting(id) {
            // Kept as bytes while it waited; parsed again now that it goes on.
            let body = waiting.hello.body(&[]);
            if let Ok(ch) = crate::handshake::ClientHello::parse(body) {
                self.new_client_hello(now, waiting.from, &waiting.hello, &ch, body, waiting.datagram_len);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::incoming::HelloBody;

    fn waiting(id: u8, port: u16, len: usize) -> WaitingHello {
        let body = HelloBody::Reassembled(vec![id; len]);
        let hello = HelloInfo { record_seq: 1, message_seq: 1, body };
        WaitingHello {
            id: [id; 32],
            from: SocketAddr::from(([192, 0, 2, 1], port)),
            hello,
            datagram_len: len,
        }
    }

    #[test]
    fn waiting_hellos_are_bounded_and_one_per_client_and_session() {
        let mut shared = SharedSessions::default();
        shared.wait(waiting(1, 1000, 300));
        shared.wait(waiting(1, 1000, 200));
        shared.wait(waiting(1, 1001, 100));
        assert_eq!(shared.waiting.len(), 2, "a client's resent hello replaces its first");
        assert_eq!(shared.waiting_bytes, 300);
        // Hellos of 8 kB from many clients: the oldest go once their bytes pass the bound.
        for port in 0..100 {
            shared.wait(waiting(2, port, 8 * 1024));
        }
        assert!(shared.waiting_bytes <= MAX_WAITING_HELLO_BYTES, "{}", shared.waiting_bytes);
        assert_eq!(shared.waiting.len(), MAX_WAITING_HELLO_BYTES / (8 * 1024));
        assert!(shared.take_waiting([1; 32]).is_empty(), "the oldest went first");
        let taken = shared.take_waiting([2; 32]);
        assert_eq!(taken.len(), MAX_WAITING_HELLO_BYTES / (8 * 1024));
        assert_eq!((shared.waiting.len(), shared.waiting_bytes), (0, 0));
    }

    #[test]
    fn a_lookup_dropped_before_the_driver_polled_it_takes_its_hello_along() {
        let mut shared = SharedSessions { enabled: true, ..SharedSessions::default() };
        let id = |n: usize| {
            let mut id = [0u8; 32];
            id[..8].copy_from_slice(&(n as u64).to_be_bytes());
            id
        };
        assert!(shared.must_look_up(&id(0), Instant::ZERO, false));
        shared.wait(WaitingHello { id: id(0), ..waiting(0, 1000, 100) });
        for n in 1..=MAX_WAITING {
            assert!(shared.must_look_up(&id(n), Instant::ZERO, false));
        }
        assert!(!shared.lookups.contains(&id(0)), "the oldest lookup went");
        assert!(shared.waiting.is_empty() && shared.waiting_bytes == 0, "and its hello with it");
    }
}
