//! DTLS 1.3 0-RTT at the endpoint: which resumption ClientHello skips the cookie exchange, and
//! the register that takes each ClientHello's early data once.
//!
//! The server answers every first ClientHello with a HelloRetryRequest and a cookie, and a
//! HelloRetryRequest refuses early data (RFC 8446 §4.1.2). RFC 9147 §5.1 lets a server skip the
//! cookie exchange "when a session is resumed ... and the IP address matches one associated
//! with the PSK". So a ClientHello that offers early data skips it when its first PSK is a
//! ticket of ours, issued to this IP address (tickets keep it), of the suite we choose, with a
//! key share we take, while we accept early data. The binder is checked by the session as for
//! any PSK (a wrong one is fatal); nothing is sent before that that a cookie would have
//! prevented, and the answer is no larger than what a cookie exchange sends, so an attacker
//! replaying a captured ClientHello gains no amplification.
//!
//! Early data is taken only when the ticket's age as the client states it is within
//! [`AGE_TOLERANCE_MS`] of ours less the round trip the ticket's own handshake measured (RFC
//! 8446 §8.3: the ticket's way out and the ClientHello's way back, seconds on a duty-cycled
//! link, are in our age and not in the client's), the ticket was issued under this endpoint's
//! [`EarlyDataRegister`], and the register has not seen the ClientHello (RFC 8446 §8.2). The
//! workers of one server share one register; the nodes of a fleet, which share ticket keys, each
//! have their own, so a ClientHello replayed to another node resumes there without its early
//! data: taken at most once across the fleet.

use super::Endpoint;
use crate::connection::tls13_resume::{ip_bytes, unix_ms, AGE_TOLERANCE_MS};
use crate::crypto::tls13::Suite13;
use crate::endpoint::CookieState;
use crate::handshake::{client_shares, u16_list, ClientHello, OfferedPsks};
use crate::session::ServerSession13;
use fastshake_core::Instant;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

/// ClientHellos whose early data was taken, kept this long: a copy passes the age check only
/// within [`AGE_TOLERANCE_MS`] either side of the original's age, so within twice that after
/// the original was taken; later it is refused by the age check, with no entry needed. A
/// second more covers endpoints sharing the register whose clocks began apart.
const KEEP: Duration = Duration::from_millis(2 * AGE_TOLERANCE_MS + 1000);
/// Entries at most (24 bytes each, twice: about 3 MB). A full register refuses early data (the
/// handshakes go on without it) rather than forget an entry a replay could then pass.
const MAX_ENTRIES: usize = 65_536;

/// Where early data is taken at most once: the tickets issued under it (they carry its random
/// `origin`) and the ClientHellos whose early data it took. An endpoint has one of its own;
/// the workers of one server share one ([`Endpoint::share_early_data_register`]). A ticket
/// from elsewhere, another node of a fleet or this server before a restart (whose register
/// forgot what it took), resumes without early data.
pub struct EarlyDataRegister {
    origin: [u8; 8],
    taken: Mutex<ReplayRegister>,
}

impl EarlyDataRegister {
    /// An empty register; `origin` should be random, so no other register has it.
    pub fn new(origin: [u8; 8]) -> EarlyDataRegister {
        EarlyDataRegister { origin, taken: Mutex::default() }
    }

    /// What the tickets issued under this register carry.
    pub(crate) fn origin(&self) -> [u8; 8] {
        self.origin
    }

    /// Whether `binder`'s ClientHello is new (and now recorded).
    fn admit(&self, binder: &[u8], now: Instant) -> bool {
        // A thread that panicked holding the lock left whole entries: keep using them.
        self.taken.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).admit(binder, now)
    }
}

/// The ClientHellos (by their first binder, a MAC over the ClientHello under the ticket's PSK)
/// whose early data was taken within [`KEEP`].
#[derive(Default)]
struct ReplayRegister {
    seen: BTreeMap<[u8; 16], Instant>,
    by_expiry: BTreeSet<(Instant, [u8; 16])>,
}

impl ReplayRegister {
    /// Whether `binder`'s ClientHello is new (and now recorded).
    pub fn admit(&mut self, binder: &[u8], now: Instant) -> bool {
        while let Some(&(at, key)) = self.by_expiry.first() {
            if at > now {
                break;
            }
            self.by_expiry.pop_first();
            self.seen.remove(&key);
        }
        let Some(key) = binder.get(..16).and_then(|k| <[u8; 16]>::try_from(k).ok()) else { return false };
        if self.seen.contains_key(&key) || self.seen.len() >= MAX_ENTRIES {
            return false;
        }
        self.seen.insert(key, now + KEEP);
        self.by_expiry.insert((now + KEEP, key));
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }
}

impl Endpoint {
    /// A ClientHello without a valid cookie that may go on without one (see the module
    /// comment): the state a cookie would have carried (no first ClientHello), and whether its
    /// early data may be taken.
    pub(super) fn zero_rtt_hello13(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        ch: &ClientHello<'_>,
        suite: Suite13,
    ) -> Option<CookieState> {
        let ext = &ch.extensions;
        if self.role.config.max_early_data == 0 || ext.early_data.is_none() {
            return None;
        }
        let keys = self.ticket_keys.as_ref()?;
        let offered = OfferedPsks::parse(ext.pre_shared_key?).ok()?;
        let (identity, obfuscated_age) = *offered.identities.first()?;
        let now_ms = unix_ms(self.role.config.wall_clock, now);
        let ticket = ServerSession13::open(keys, identity, now_ms)?;
        let elsewhere = ticket.origin != self.replay13.origin();
        if elsewhere
            || ticket.client_ip != ip_bytes(remote.ip())
            || ticket.suite != suite
            || ticket.max_early_data == 0
        {
            return None;
        }
        let supported: Vec<u16> = ext.supported_groups.map(|g| u16_list(g).collect()).unwrap_or_default();
        let shares = ext.key_share.and_then(|d| client_shares(d).ok()).unwrap_or_default();
        let share_taken = self
            .role
            .config
            .groups
            .iter()
            .any(|g| shares.iter().any(|s| s.group == g.code() && supported.contains(&s.group)));
        if !share_taken {
            return None;
        }
        // RFC 8446 §4.2.11.1 and §8.3: the age the client states, against ours less the round
        // trip (the ticket's way out and this ClientHello's way back), which the client's
        // age cannot include. On a duty-cycled link that is seconds.
        let client_age = u64::from(obfuscated_age.wrapping_sub(ticket.age_add));
        let our_age = now_ms.saturating_sub(ticket.created_ms).saturating_sub(u64::from(ticket.rtt_ms));
        let in_window = client_age.abs_diff(our_age) <= AGE_TOLERANCE_MS;
        let binder = offered.binders.first().copied().unwrap_or(&[]);
        let zero_rtt = in_window && self.replay13.admit(binder, now);
        Some(CookieState { suite, group: None, hello_hash: Vec::new(), zero_rtt, early_offered: false })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_hello_is_admitted_once_within_the_window_and_the_register_is_bounded() {
        let mut r = ReplayRegister::default();
        let t0 = Instant::ZERO;
        assert!(r.admit(&[1; 32], t0));
        assert!(!r.admit(&[1; 32], t0 + Duration::from_secs(1)), "a replay");
        assert!(r.admit(&[2; 32], t0 + Duration::from_secs(1)));
        assert!(!r.admit(&[3; 8], t0), "too short to be a binder");
        // After KEEP the entry goes (the age check refuses such a late copy).
        assert!(r.admit(&[1; 32], t0 + KEEP + Duration::from_secs(1)));
        assert_eq!(r.len(), 1, "the expired entries were dropped");
        let mut full = ReplayRegister::default();
        for i in 0..MAX_ENTRIES as u32 {
            let mut key = [0u8; 32];
            key[..4].copy_from_slice(&i.to_be_bytes());
            assert!(full.admit(&key, t0));
        }
        assert!(!full.admit(&[0xff; 32], t0), "full: refused, nothing forgotten");
    }
}
