//! The endpoint's indexes of its sessions, at 16 bytes an entry: every session has one by peer
//! address, and one more by Connection ID when it has CIDs, so their entries are most of what
//! a session costs beyond its own state.
//!
//! - [`AddrIndex`]: a keyed hash of the address (SipHash-1-3 under a key drawn from the
//!   endpoint's seed) to the session, checked on every lookup against the address the session
//!   itself holds. An address whose hash another session's address already has (for a 64-bit
//!   keyed hash, not in practice, and nothing a peer can aim for without the key) goes to a
//!   second table keyed by the whole address, so the index is exact either way.
//! - [`CidIndex`]: the CID itself as the key when it is shorter than 8 bytes (with its length,
//!   so the key is exact), else its last 8 bytes, which are random: the endpoint issues no CID
//!   whose key another one has, and checks longer CIDs against the session's own.

use super::{ConnectionHandle, Slot};
use siphasher::sip::SipHasher13;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

/// What the indexes check their answers against: the sessions themselves.
pub(super) trait Sessions {
    /// The address of session `h`, if it is still there.
    fn remote_of(&self, h: ConnectionHandle) -> Option<SocketAddr>;
    /// Whether session `h` is still there and `cid` is one of its own CIDs.
    fn owns_cid(&self, h: ConnectionHandle, cid: &[u8]) -> bool;
}

impl Sessions for BTreeMap<ConnectionHandle, Box<Slot>> {
    fn remote_of(&self, h: ConnectionHandle) -> Option<SocketAddr> {
        self.get(&h).map(|slot| slot.conn.remote())
    }

    fn owns_cid(&self, h: ConnectionHandle, cid: &[u8]) -> bool {
        self.get(&h).is_some_and(|slot| slot.conn.owns_connection_id(cid))
    }
}

pub(super) struct AddrIndex {
    key: (u64, u64),
    /// All ones; fewer bits in tests, to make hashes collide.
    mask: u64,
    hashed: BTreeMap<u64, ConnectionHandle>,
    /// Addresses whose hash was taken when they were indexed.
    spill: BTreeMap<SocketAddr, ConnectionHandle>,
}

impl AddrIndex {
    /// An empty index hashing under the SipHash key (`k0`, `k1`).
    pub fn new(k0: u64, k1: u64) -> AddrIndex {
        AddrIndex { key: (k0, k1), mask: u64::MAX, hashed: BTreeMap::new(), spill: BTreeMap::new() }
    }

    fn hash(&self, addr: &SocketAddr) -> u64 {
        let mut hasher = SipHasher13::new_with_keys(self.key.0, self.key.1);
        addr.hash(&mut hasher);
        hasher.finish() & self.mask
    }

    /// The session indexed at `addr`.
    pub fn get(&self, addr: &SocketAddr, sessions: &impl Sessions) -> Option<ConnectionHandle> {
        let hashed = self.hashed.get(&self.hash(addr)).copied();
        if let Some(h) = hashed.filter(|&h| sessions.remote_of(h) == Some(*addr)) {
            return Some(h);
        }
        self.spill.get(addr).copied()
    }

    /// Indexes session `h` (already in `sessions`) at `addr`; returns the session indexed there
    /// before, if any.
    pub fn insert(
        &mut self,
        addr: SocketAddr,
        h: ConnectionHandle,
        sessions: &impl Sessions,
    ) -> Option<ConnectionHandle> {
        let spilled = self.spill.remove(&addr);
        let key = self.hash(&addr);
        match self.hashed.get(&key).copied() {
            // Another live session's address has this hash: this one goes beside it.
            Some(other) if sessions.remote_of(other).is_some_and(|a| a != addr && self.hash(&a) == key) => {
                self.spill.insert(addr, h);
                spilled
            }
            // Free, or this address's own entry, or one left by a session that is gone.
            previous => {
                self.hashed.insert(key, h);
                previous.filter(|&p| sessions.remote_of(p) == Some(addr)).or(spilled)
            }
        }
    }

    /// Forgets session `h` at `addr`; false when `addr` did not index `h`.
    pub fn remove(&mut self, addr: &SocketAddr, h: ConnectionHandle) -> bool {
        let key = self.hash(addr);
        if self.hashed.get(&key) == Some(&h) {
            self.hashed.remove(&key);
            return true;
        }
        if self.spill.get(addr) == Some(&h) {
            self.spill.remove(addr);
            return true;
        }
        false
    }
}

/// Sessions by the CIDs the endpoint issued them (RFC 9146; RFC 9147 §9).
#[derive(Default)]
pub(super) struct CidIndex {
    keys: BTreeMap<u64, ConnectionHandle>,
}

impl CidIndex {
    fn key(cid: &[u8]) -> u64 {
        let tail = &cid[cid.len().saturating_sub(8)..];
        let mut bytes = [0u8; 8];
        bytes[8 - tail.len()..].copy_from_slice(tail);
        if cid.len() < 8 {
            // At most 7 bytes of CID: its length in the top byte keeps [0, 1] from [1].
            bytes[0] = cid.len() as u8;
        }
        u64::from_be_bytes(bytes)
    }

    /// The session `cid` routes to.
    pub fn get(&self, cid: &[u8], sessions: &impl Sessions) -> Option<ConnectionHandle> {
        let h = self.keys.get(&Self::key(cid)).copied()?;
        // Shorter CIDs are their key; a longer one must be the session's own.
        (cid.len() < 8 || sessions.owns_cid(h, cid)).then_some(h)
    }

    /// Whether a CID with the key of `cid` is taken (a new CID must not be).
    pub fn is_taken(&self, cid: &[u8]) -> bool {
        self.keys.contains_key(&Self::key(cid))
    }

    pub fn insert(&mut self, cid: &[u8], h: ConnectionHandle) {
        self.keys.insert(Self::key(cid), h);
    }

    /// Forgets `cid` if it routes to `h`.
    pub fn remove(&mut self, cid: &[u8], h: ConnectionHandle) {
        let key = Self::key(cid);
        if self.keys.get(&key) == Some(&h) {
            self.keys.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = BTreeMap<ConnectionHandle, SocketAddr>;

    /// Sessions with addresses only (they own no CIDs).
    impl Sessions for Table {
        fn remote_of(&self, h: ConnectionHandle) -> Option<SocketAddr> {
            self.get(&h).copied()
        }

        fn owns_cid(&self, _: ConnectionHandle, _: &[u8]) -> bool {
            false
        }
    }

    /// Sessions by the CIDs they own.
    type Owners = BTreeMap<ConnectionHandle, Vec<Vec<u8>>>;

    impl Sessions for Owners {
        fn remote_of(&self, _: ConnectionHandle) -> Option<SocketAddr> {
            None
        }

        fn owns_cid(&self, h: ConnectionHandle, cid: &[u8]) -> bool {
            self.get(&h).is_some_and(|own| own.iter().any(|c| c[..] == *cid))
        }
    }

    fn addr(n: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, (n % 7) as u8], 4000 + n))
    }

    /// With two bits of hash, most addresses collide: every session is still found at its own
    /// address and nowhere else, through moves and removals, as a plain map would find it.
    #[test]
    fn colliding_hashes_still_index_exactly() {
        let mut index = AddrIndex::new(7, 8);
        index.mask = 0b11;
        let mut sessions = Table::new();
        let mut model: BTreeMap<SocketAddr, ConnectionHandle> = BTreeMap::new();
        for n in 0..40u16 {
            let h = ConnectionHandle(u64::from(n));
            sessions.insert(h, addr(n));
            assert_eq!(index.insert(addr(n), h, &sessions), None);
            model.insert(addr(n), h);
        }
        assert!(!index.spill.is_empty(), "the test makes hashes collide");
        // Moves: every third session to a new address.
        for n in (0..40u16).step_by(3) {
            let h = ConnectionHandle(u64::from(n));
            assert!(index.remove(&addr(n), h));
            let to = addr(n + 100);
            sessions.insert(h, to);
            assert_eq!(index.insert(to, h, &sessions), None);
            model.remove(&addr(n));
            model.insert(to, h);
        }
        // Removals: every fourth session goes.
        for n in (0..40u16).step_by(4) {
            let h = ConnectionHandle(u64::from(n));
            let at = sessions.remove(&h).unwrap();
            assert!(index.remove(&at, h));
            assert!(!index.remove(&at, h), "removed once");
            model.remove(&at);
        }
        for n in 0..140u16 {
            assert_eq!(index.get(&addr(n), &sessions), model.get(&addr(n)).copied(), "address {}", addr(n));
        }
        // A new session at an indexed address replaces the one there, as a map insert does.
        let (&at, &old) = model.iter().next().unwrap();
        let new = ConnectionHandle(1000);
        sessions.insert(new, at);
        assert_eq!(index.insert(at, new, &sessions), Some(old));
        assert_eq!(index.get(&at, &sessions), Some(new));
    }

    /// An entry left by a session that is gone is neither an answer nor in the way.
    #[test]
    fn a_stale_entry_is_no_answer() {
        let mut index = AddrIndex::new(1, 2);
        let mut sessions = Table::new();
        let (a, h) = (addr(1), ConnectionHandle(1));
        sessions.insert(h, a);
        index.insert(a, h, &sessions);
        sessions.remove(&h);
        assert_eq!(index.get(&a, &sessions), None);
        let next = ConnectionHandle(2);
        sessions.insert(next, a);
        assert_eq!(index.insert(a, next, &sessions), None);
        assert_eq!(index.get(&a, &sessions), Some(next));
    }

    /// Short CIDs of different lengths never share a key; a long CID that shares its last 8
    /// bytes with a session's own is no answer, nor is one of a session that is gone.
    #[test]
    fn cid_keys_are_exact() {
        let mut index = CidIndex::default();
        let long = vec![9, 9, 0, 0, 0, 0, 0, 0, 0, 2];
        let gone = vec![5, 5, 0, 0, 0, 0, 0, 0, 0, 3];
        let mut owners: Owners =
            [(ConnectionHandle(1), vec![vec![1]]), (ConnectionHandle(2), vec![long.clone()])].into();
        index.insert(&[1], ConnectionHandle(1));
        index.insert(&long, ConnectionHandle(2));
        index.insert(&gone, ConnectionHandle(3));
        assert_eq!(index.get(&[1], &owners), Some(ConnectionHandle(1)));
        assert_eq!(index.get(&[0, 1], &owners), None, "another length, another key");
        assert_eq!(index.get(&long, &owners), Some(ConnectionHandle(2)));
        // The same last 8 bytes as session 2's CID: its key is taken, but it routes nowhere.
        let forged = [7, 7, 0, 0, 0, 0, 0, 0, 0, 2];
        assert!(index.is_taken(&forged));
        assert_eq!(index.get(&forged, &owners), None);
        assert_eq!(index.get(&gone, &owners), None, "session 3 is gone");
        index.remove(&long, ConnectionHandle(1));
        assert_eq!(index.get(&long, &owners), Some(ConnectionHandle(2)), "removed only for its own session");
        index.remove(&long, ConnectionHandle(2));
        owners.remove(&ConnectionHandle(2));
        assert_eq!(index.get(&long, &owners), None);
        assert!(!index.is_taken(&long));
    }
}
