//! Session slots (`ServerConfig::max_sessions`, seed 002): a server whose memory fits R sessions
//! holds at most R connections, and a client that proved its address while all R are taken is
//! refused at once or given the slot of the session `WhenFull` picks.

use super::{Activity, ConnectionHandle, Endpoint};
use crate::alert::{AlertDescription, AlertLevel};
use crate::config::WhenFull;
use crate::connection::{Event, Received};
use crate::record::{write_record, ContentType, HEADER_LEN};
use fastshake_core::{Instant, Transmit};
use std::net::SocketAddr;

impl Activity {
    /// What a datagram of the established session showed at `now`.
    pub(super) fn note(&mut self, now: Instant, received: Received) {
        if received.authentic {
            self.last = now;
        }
        if received.app_data {
            self.last_used = now;
        }
    }
}

impl Endpoint {
    /// Makes room for a connection from `remote`, whose cookie-verified ClientHello came in
    /// record `record_seq`, that replaces `replaced` connections at once (their slots become
    /// its). False when it is refused: the alert is queued and no state kept.
    pub(super) fn admit(&mut self, remote: SocketAddr, record_seq: u64, replaced: usize) -> bool {
        let Some(max) = self.role.config.max_sessions else { return true };
        let policy = self.role.config.when_full;
        while self.connections.len().saturating_sub(replaced) >= max {
            match self.slot_victim(policy) {
                Some(victim) => self.evict_for(victim, policy, remote),
                None => {
                    self.refuse(remote, record_seq);
                    return false;
                }
            }
        }
        true
    }

    /// The established session `policy` gives up, if any; on a tie the oldest connection.
    /// Handshakes in progress are never chosen: they end within the handshake timeout.
    fn slot_victim(&self, policy: WhenFull) -> Option<ConnectionHandle> {
        self.connections
            .iter()
            .filter_map(|(&h, slot)| {
                let activity = slot.established_activity()?;
                match policy {
                    WhenFull::Refuse => None,
                    WhenFull::Lru => Some((activity.last_used, h)),
                    WhenFull::Idlest => Some((activity.last, h)),
                }
            })
            .min()
            .map(|(_, h)| h)
    }

    /// Closes session `h` with close_notify to make room for `newcomer`.
    fn evict_for(&mut self, h: ConnectionHandle, policy: WhenFull, newcomer: SocketAddr) {
        let Some(slot) = self.connections.get_mut(&h) else { return };
        slot.conn.close();
        self.stats.sessions_evicted += 1;
        self.events.push_back((h, Event::Evicted { policy, newcomer }));
        // Takes the closed connection out of every table; its close_notify goes out without it.
        self.after(h);
    }

    /// Answers a ClientHello with a fatal internal_error alert (see `WhenFull::Refuse` for the
    /// choice), so the client stops retransmitting.
    fn refuse(&mut self, remote: SocketAddr, record_seq: u64) {
        let body = [AlertLevel::Fatal.to_u8(), AlertDescription::InternalError.code()];
        let mut out = vec![0u8; HEADER_LEN + body.len()];
        // Epoch 0, the ClientHello's record sequence number: stateless, like a
        // HelloVerifyRequest (RFC 6347 §4.2.1).
        write_record(&mut out, ContentType::Alert, 0, record_seq, None, &[&body]);
        self.push_stateless(Transmit { src: None, dst: remote, payload: out });
        self.stats.slot_refusals += 1;
        let h = ConnectionHandle(self.next_id);
        self.next_id += 1;
        self.events.push_back((h, Event::Refused { remote }));
    }
}
