//! Session mobility in the connection (RFC 9146 §6, RFC 9853, seed 001's IPC and TCS): a
//! client that follows the server's port, a server that follows a client that moved (after an
//! address check when `rrc` was agreed), and announced port moves. The state is
//! [`crate::mobility::PathState`], boxed and made only for sessions that use it; its resends run
//! on the path's timer table.

use super::VersionState;
use super::{Authenticated, Connection, EndpointEvent, Event, Phase};
use crate::error::Error;
use crate::mobility::PathMore;
use crate::mobility::{
    MobilityStats, PathTimer, PortMove, Probe, AMPLIFICATION_FACTOR, MAX_CHALLENGES, MAX_HELD_DATAGRAMS,
    RRC_PATH_CHALLENGE, RRC_PATH_RESPONSE, RRC_PORT_MOVED,
};
use crate::record::{ContentType, Framing};
use fastshake_core::{Instant, Transmit};
use std::net::SocketAddr;

impl Connection {
    /// Where a datagram came from and what it proved: the client follows the server's port
    /// (IPC: `answered_server_hello`, the datagram carried the ServerHello it waited for), the
    /// server confirms a port move and follows a client that moved.
    pub(super) fn after_datagram(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        len: usize,
        seen: Authenticated,
        answered_server_hello: bool,
    ) {
        if let Some(config) = self.client_config() {
            // IPC: the ServerHello came from the port of the session's own server socket.
            let follow = config.mobility.follow_server_port;
            if follow
                && answered_server_hello
                && !self.is_closed()
                && remote != self.remote
                && remote.ip() == self.remote.ip()
            {
                self.change_remote(remote);
            }
            return;
        }
        if !seen.any {
            return;
        }
        let current = self.remote;
        let established = self.phase == Phase::Established;
        let Some(path) = self.path.as_deref_mut() else { return };
        // TCS: the client's first authenticated record at the announced socket confirms the move.
        if let (Some(local), Some(moving)) = (local, path.moving()) {
            if moving.local == local {
                PathMore::made(&mut path.more).local = Some(local);
                path.transient().moving = None;
                path.transient().timers.stop(PathTimer::Announce);
                path.release_idle();
            }
        }
        let mut cancel_probe = false;
        if let Some(probe) = path.transient_mut().and_then(|t| t.probe.as_mut()) {
            if probe.addr == remote {
                probe.bytes_received += len as u64;
            } else if remote == current && seen.newest {
                // A newer record from the address in use: the peer is still there.
                cancel_probe = true;
            }
        }
        if cancel_probe {
            self.end_probe(now, false);
            return;
        }
        if !established || !seen.newest || remote == current || !path.may_follow_peer() {
            return;
        }
        if !path.rrc {
            self.change_remote(remote);
        } else if path.probe().is_none_or(|p| p.addr != remote) {
            self.start_probe(now, remote, len as u64);
        }
    }

    /// The session sends to `new` from now on.
    fn change_remote(&mut self, new: SocketAddr) {
        let old = std::mem::replace(&mut self.remote, new);
        if let Some(path) = self.path.as_deref_mut() {
            path.stats_mut().path_changes += 1;
        }
        self.push_endpoint_event(EndpointEvent::Moved { from: old, to: new });
        self.push_event(Event::PathChanged(new));
    }

    fn start_probe(&mut self, now: Instant, addr: SocketAddr, bytes_received: u64) {
        let (initial, _) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut() else { return };
        // A new address while another is checked: the newest wins (RFC 9853 §4 leaves nested
        // rebindings to time out); what was held for the old candidate goes to the known address.
        if path.probe().is_some() {
            self.end_probe(now, false);
        }
        let Some(path) = self.path.as_deref_mut() else { return };
        path.transient().probe = Some(Probe {
            addr,
            cookies: Vec::new(),
            bytes_received,
            bytes_sent: 0,
            challenges_sent: 0,
            interval: initial,
        });
        self.send_challenge(now);
    }

    /// Sends a path_challenge to the address under check, within its amplification allowance.
    fn send_challenge(&mut self, now: Instant) {
        let (_, max) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut() else { return };
        let cookie = path.next_cookie();
        let Ok(record) = self.seal_rrc(&[&[RRC_PATH_CHALLENGE], &cookie]) else { return };
        let Some(path) = self.path.as_deref_mut() else { return };
        let transient = path.transient();
        let Some(probe) = transient.probe.as_mut() else { return };
        probe.challenges_sent += 1;
        transient.timers.set(PathTimer::Challenge, now + probe.interval);
        probe.interval = (probe.interval * 2).min(max);
        let len = record.len() as u64;
        if probe.bytes_sent + len <= AMPLIFICATION_FACTOR * probe.bytes_received {
            probe.bytes_sent += len;
            probe.cookies.push(cookie);
            let to = probe.addr;
            transient.direct.push_back((to, record));
            path.stats_mut().path_challenges_sent += 1;
        }
    }

    /// The check of a new address ends: on success the session moves there and what was held
    /// goes out to it; otherwise it stays where it was and the held datagrams go there.
    fn end_probe(&mut self, _now: Instant, validated: bool) {
        let Some(path) = self.path.as_deref_mut() else { return };
        let Some(transient) = path.transient_mut() else { return };
        let Some(probe) = transient.probe.take() else { return };
        transient.timers.stop(PathTimer::Challenge);
        let held = std::mem::take(&mut transient.held);
        path.release_idle();
        if validated {
            self.change_remote(probe.addr);
        }
        // Held datagrams are older than anything queued since: they go first.
        for d in held.into_iter().rev() {
            self.queued.get_or_insert_with(Box::default).outgoing.push_front(d);
        }
    }

    pub(super) fn handle_path_timeout(&mut self, now: Instant) {
        let (_, max) = self.retransmit_bounds();
        loop {
            let Some(transient) = self.path.as_deref_mut().and_then(|p| p.transient_mut()) else {
                return;
            };
            match transient.timers.expire(now) {
                None => return,
                Some(PathTimer::Challenge) => {
                    let Some(path) = self.path.as_deref_mut() else { return };
                    if path.probe().is_some_and(|p| p.challenges_sent < MAX_CHALLENGES) {
                        self.send_challenge(now);
                    } else {
                        path.stats_mut().path_validations_failed += 1;
                        self.end_probe(now, false);
                    }
                }
                Some(PathTimer::Announce) => {
                    let Some(moving) = transient.moving.as_mut() else { continue };
                    let next = now + moving.interval;
                    moving.interval = (moving.interval * 2).min(max);
                    let port = moving.local.port();
                    transient.timers.set(PathTimer::Announce, next);
                    self.announce_port(port);
                }
            }
        }
    }

    /// Queues the protected announcement of our new port (TCS).
    fn announce_port(&mut self, port: u16) {
        if let Ok(record) = self.seal_rrc(&[&[RRC_PORT_MOVED], &port.to_be_bytes()]) {
            self.push_datagram(record);
            if let Some(path) = self.path.as_deref_mut() {
                path.stats_mut().port_announcements_sent += 1;
            }
        }
    }

    /// A return_routability_check message (RFC 9853 §3), or our port announcement.
    pub(super) fn handle_rrc(&mut self, now: Instant, remote: SocketAddr, message: &[u8]) {
        let is_client = self.client_config().is_some();
        let Some(path) = self.path.as_deref_mut() else {
            self.stats.records_dropped += 1;
            return;
        };
        match (message.first().copied(), message.len()) {
            (Some(RRC_PATH_CHALLENGE), 9) if path.rrc => {
                // Answered at once, to where the challenge came from (RFC 9853 §4.4).
                let cookie = &message[1..9];
                if let Ok(record) = self.seal_rrc(&[&[RRC_PATH_RESPONSE], cookie]) {
                    if let Some(path) = self.path.as_deref_mut() {
                        path.transient().direct.push_back((remote, record));
                        path.stats_mut().path_responses_sent += 1;
                    }
                }
            }
            (Some(RRC_PATH_RESPONSE), 9) => {
                let valid = path
                    .probe()
                    .is_some_and(|p| p.addr == remote && p.cookies.iter().any(|c| c[..] == message[1..9]));
                if valid {
                    self.end_probe(now, true);
                }
            }
            (Some(RRC_PORT_MOVED), 3) if path.port_move && is_client => {
                let port = u16::from_be_bytes([message[1], message[2]]);
                let new = SocketAddr::new(self.remote.ip(), port);
                if new != self.remote {
                    self.change_remote(new);
                }
                // Acknowledged from our side to the new port: the server moves once a record
                // of ours authenticates there.
                if let Ok(record) = self.seal_rrc(&[&[RRC_PORT_MOVED], &port.to_be_bytes()]) {
                    self.push_datagram(record);
                }
            }
            // path_drop (we run only the basic check), our own port acknowledgements, and
            // unknown types are ignored (RFC 9853 §3).
            _ => {}
        }
    }

    /// Output of a session with mobility state: datagrams with their own destination first
    /// (path challenges, copies, responses). While a new address is checked, each datagram goes
    /// both to it, within its 3x allowance (RFC 9853), and to the address in use: a real move
    /// costs no round trip, a spoofed one loses nothing (the client drops whichever copy comes
    /// second as a replay). What exceeds the allowance is held (at most `MAX_HELD_DATAGRAMS`,
    /// the oldest dropped first) for whichever address the check leaves in use.
    pub(super) fn poll_transmit_mobile(&mut self) -> Option<Transmit> {
        let src = self.local();
        let path = self.path.as_deref_mut()?;
        let direct = path.transient_mut().and_then(|t| t.direct.pop_front());
        path.release_idle();
        let (dst, payload) = match direct {
            Some(d) => d,
            None => loop {
                let payload = self.queued.as_mut()?.outgoing.pop_front()?;
                // The transient state and the counts are both in what is boxed apart.
                let Some(more) = self.path.as_deref_mut().and_then(|p| p.more.as_deref_mut()) else {
                    break (self.remote, payload);
                };
                let Some(transient) = more.transient.as_deref_mut().filter(|t| t.probe.is_some()) else {
                    break (self.remote, payload);
                };
                if let Some(probe) = transient.probe.as_mut() {
                    let len = payload.len() as u64;
                    if probe.bytes_sent + len <= AMPLIFICATION_FACTOR * probe.bytes_received {
                        probe.bytes_sent += len;
                        let to = probe.addr;
                        transient.direct.push_back((self.remote, payload.clone()));
                        MobilityStats::made(&mut more.stats).bytes_copied_during_checks += len;
                        break (to, payload);
                    }
                }
                MobilityStats::made(&mut more.stats).bytes_held_by_amplification_limit +=
                    payload.len() as u64;
                transient.held.push_back(payload);
                if transient.held.len() > MAX_HELD_DATAGRAMS {
                    if let Some(oldest) = transient.held.pop_front() {
                        MobilityStats::made(&mut more.stats).bytes_dropped_by_amplification_limit +=
                            oldest.len() as u64;
                    }
                }
            },
        };
        self.free_empty_queues();
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += payload.len() as u64;
        Some(Transmit { src, dst, payload })
    }

    /// Server: the session lives on its own socket `local` from now on.
    pub(crate) fn set_local(&mut self, local: SocketAddr) {
        PathMore::made(&mut self.path.get_or_insert_with(Default::default).more).local = Some(local);
    }

    /// Server: announce a move to `local` (TCS); the session moves once a record of the
    /// client authenticates there.
    pub(crate) fn move_to(&mut self, now: Instant, local: SocketAddr) -> Result<(), Error> {
        if !self.is_established() {
            return Err(Error::NotEstablished);
        }
        let (initial, max) = self.retransmit_bounds();
        let Some(path) = self.path.as_deref_mut().filter(|p| p.port_move) else {
            return Err(Error::NotNegotiated("port_move: the client did not offer follow_server_port"));
        };
        let transient = path.transient();
        transient.moving = Some(PortMove { local, interval: (initial * 2).min(max) });
        transient.timers.set(PathTimer::Announce, now + initial);
        self.announce_port(local.port());
        Ok(())
    }

    /// A protected return_routability_check record (RFC 9853 §3) holding `parts`.
    fn seal_rrc(&mut self, parts: &[&[u8]]) -> Result<Vec<u8>, Error> {
        let cid = self.path.as_deref().map_or(&[][..], |p| p.peer_cid());
        match &mut self.version {
            VersionState::Dtls13(v13) => {
                let content_type = ContentType::ReturnRoutabilityCheck as u8;
                v13.write.seal(content_type, cid, parts, Framing::Packed).map(|(record, _, _)| record)
            }
            VersionState::Dtls12(record) => record.seal(ContentType::ReturnRoutabilityCheck, cid, parts),
        }
    }
}
