//! The peer's addresses and fault management (RFC 9260 §8): which paths exist and are
//! confirmed, the primary path, HEARTBEATs, the path and association error counters, and the
//! retransmission timeout (§6.3).
//!
//! The RTO is measured on the primary path and used for every timer of the association (one
//! estimator, as the crate documents): data goes only on the primary path, and HEARTBEATs on
//! the others only confirm them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use fastshake_core::codec::{put_u64, put_u8, Reader};
use rand_core::RngCore;

use super::timer::Timer;
use super::Association;
use crate::packet::{Chunk, Packet};
use crate::rto::RtoEstimator;
use crate::{AssociationState, Error, Instant, Transmit};

/// Most peer addresses (paths) kept per association.
pub(crate) const MAX_PATHS: usize = 8;
/// Bytes of our Heartbeat Info: path index, nonce, time sent.
const HEARTBEAT_INFO_LEN: usize = 17;

/// Which paths a round of HEARTBEATs goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Probe {
    /// Peer addresses not confirmed yet, at once.
    Unconfirmed,
    /// Every path, after HB.interval.
    All,
}

/// One (local, remote) address pair the association can use.
#[derive(Clone, Debug)]
pub(crate) struct Path {
    /// Peer UDP address; the port is the peer's encapsulation port, learnt from its packets.
    pub(crate) remote: SocketAddr,
    pub(crate) local: Option<SocketAddr>,
    confirmed: bool,
    /// The nonce and send time of the HEARTBEAT not answered yet.
    heartbeat: Option<(u64, Instant)>,
    /// Consecutive T3-rtx expiries while this was the primary path.
    errors: u32,
}

impl Path {
    /// A confirmed path: the address the association was opened with.
    pub(crate) fn new(remote: SocketAddr, local: Option<SocketAddr>) -> Path {
        Path { remote, local, confirmed: true, heartbeat: None, errors: 0 }
    }
}

/// The paths of one association and what is known of them.
#[derive(Debug)]
pub(super) struct Paths {
    list: Vec<Path>,
    primary: usize,
    pub(super) rto: RtoEstimator,
    /// Consecutive T3-rtx expiries and unanswered HEARTBEATs on the association
    /// (Association.Max.Retrans, §8.1).
    errors: u32,
    /// After an alternative opening the server probes other paths only once the client has
    /// sent a packet on the association (seed 004 §III-F). The idle HEARTBEAT on the primary
    /// path still goes after HB.interval, long after any INIT-ACK arrived: an association the
    /// client never took up ends (ABORT or Association.Max.Retrans) instead of living forever.
    pub(super) heartbeats_allowed: bool,
}

impl Paths {
    pub(super) fn new(first: Path, rto: RtoEstimator) -> Paths {
        Paths { list: vec![first], primary: 0, rto, errors: 0, heartbeats_allowed: true }
    }

    pub(super) fn primary_index(&self) -> usize {
        self.primary
    }

    pub(super) fn primary(&self) -> &Path {
        &self.list[self.primary]
    }

    pub(super) fn get(&self, index: usize) -> Option<&Path> {
        self.list.get(index)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Path> {
        self.list.iter()
    }

    pub(super) fn rto(&self) -> Duration {
        self.rto.rto()
    }

    /// The DATA or HEARTBEAT went unanswered once more; whether Association.Max.Retrans is
    /// now exceeded.
    pub(super) fn count_error(&mut self, max_retransmits: u32) -> bool {
        self.errors += 1;
        self.errors > max_retransmits
    }

    /// The peer answered: the association error counter starts over.
    pub(super) fn peer_reachable(&mut self) {
        self.errors = 0;
    }

    /// Adds peer addresses from an INIT, INIT-ACK or state cookie as unconfirmed paths on the
    /// primary's port, up to [`MAX_PATHS`].
    pub(super) fn add_peer_addresses(&mut self, ips: &[IpAddr]) {
        let port = self.primary().remote.port();
        for ip in ips {
            if self.list.len() >= MAX_PATHS {
                break;
            }
            // Only addresses the primary path's socket can reach: same family, and loopback
            // only with loopback (address scoping, RFC 9260 §5.1.2).
            let primary_ip = self.primary().remote.ip();
            let same_scope =
                ip.is_ipv4() == primary_ip.is_ipv4() && ip.is_loopback() == primary_ip.is_loopback();
            if !same_scope || ip.is_unspecified() || self.list.iter().any(|p| p.remote.ip() == *ip) {
                continue;
            }
            self.list.push(Path {
                remote: SocketAddr::new(*ip, port),
                local: self.primary().local,
                confirmed: false,
                heartbeat: None,
                errors: 0,
            });
        }
    }

    /// Learns the peer's encapsulation port and new source addresses of known peer IPs
    /// (RFC 6951 §5.5): the answer goes where the peer sent from. Returns the path's index.
    pub(super) fn learn(&mut self, local: SocketAddr, remote: SocketAddr) -> usize {
        if let Some(i) = self.list.iter().position(|p| p.remote == remote) {
            if self.list[i].local.is_none() {
                self.list[i].local = Some(local);
            }
            return i;
        }
        if let Some(i) = self.list.iter().position(|p| p.remote.ip() == remote.ip()) {
            self.list[i].remote = remote;
            return i;
        }
        self.primary
    }

    /// A T3-rtx expiry on the primary path; past Path.Max.Retrans the next confirmed path
    /// takes over (RFC 9260 §8.2, §6.4.1).
    pub(super) fn count_primary_error(&mut self, path_max_retransmits: u32) {
        let primary = self.primary;
        self.list[primary].errors += 1;
        if self.list[primary].errors <= path_max_retransmits {
            return;
        }
        let n = self.list.len();
        if let Some(next) = (1..n).map(|i| (primary + i) % n).find(|&i| self.list[i].confirmed) {
            self.list[primary].errors = 0;
            self.primary = next;
        }
    }

    /// A HEARTBEAT-ACK: confirms its path if it carries the nonce we sent there, and measures
    /// the RTT on the primary path.
    fn on_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        if info.len() != HEARTBEAT_INFO_LEN {
            return;
        }
        let mut r = Reader::new(info);
        let (Ok(idx), Ok(nonce)) = (r.u8(), r.u64()) else { return };
        let idx = usize::from(idx);
        let primary = self.primary;
        let Some(path) = self.list.get_mut(idx) else { return };
        if let Some((expected, sent)) = path.heartbeat {
            if expected == nonce {
                path.heartbeat = None;
                path.confirmed = true;
                path.errors = 0;
                if idx == primary {
                    self.rto.sample(now - sent);
                }
                self.errors = 0;
            }
        }
    }

    fn has_unprobed(&self) -> bool {
        self.list.iter().any(|p| !p.confirmed && p.heartbeat.is_none())
    }
}

impl Association {
    /// Probes unconfirmed peer addresses now, or arms the idle HEARTBEAT.
    pub(super) fn schedule_heartbeat(&mut self, now: Instant) {
        if self.state != AssociationState::Established {
            return;
        }
        if self.paths.heartbeats_allowed && self.paths.has_unprobed() {
            self.send_heartbeats(now, Probe::Unconfirmed);
        } else if !self.timers.is_set(Timer::Heartbeat) {
            self.timers.set(Timer::Heartbeat, now + self.config.heartbeat_interval + self.paths.rto());
        }
    }

    /// A round of HEARTBEATs; an unanswered HEARTBEAT on the primary path counts against
    /// Association.Max.Retrans (RFC 9260 §8.3).
    pub(super) fn send_heartbeats(&mut self, now: Instant, probe: Probe) {
        if self.state != AssociationState::Established {
            return;
        }
        if probe == Probe::All
            && self.paths.primary().heartbeat.is_some()
            && self.paths.count_error(self.config.max_retransmits)
        {
            self.fail(Error::RetransmitLimit);
            return;
        }
        for idx in 0..self.paths.list.len() {
            let confirmed = self.paths.list[idx].confirmed;
            if probe == Probe::Unconfirmed && confirmed {
                continue;
            }
            // Held back: the other paths are probed only once the client has spoken.
            if !self.paths.heartbeats_allowed && !confirmed {
                continue;
            }
            let nonce = self.rng.next_u64();
            let mut info = Vec::with_capacity(HEARTBEAT_INFO_LEN);
            put_u8(&mut info, idx as u8);
            put_u64(&mut info, nonce);
            put_u64(&mut info, now.as_nanos());
            self.paths.list[idx].heartbeat = Some((nonce, now));
            let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
            p.chunks.push(Chunk::Heartbeat(info));
            self.emit_packet(idx, p);
        }
        self.timers.set(Timer::Heartbeat, now + self.config.heartbeat_interval + self.paths.rto());
    }

    /// A HEARTBEAT goes back to where it came from, from the address it reached (RFC 9260 §8.3).
    pub(super) fn answer_heartbeat(&mut self, local: SocketAddr, path: usize, info: Vec<u8>) {
        let mut p = Packet::new(self.local_port, self.remote_port, self.peer_tag);
        p.chunks.push(Chunk::HeartbeatAck(info));
        let payload = p.encode();
        self.stats.packets_out += 1;
        self.stats.bytes_out += payload.len() as u64;
        let dst = self.paths.list[path].remote;
        self.out.push_back(Transmit { src: Some(local), dst, payload });
    }

    pub(super) fn on_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        self.paths.on_heartbeat_ack(now, info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn paths() -> Paths {
        let rto = Duration::from_secs(1);
        Paths::new(Path::new(addr("10.0.0.1:9899"), None), RtoEstimator::new(rto, rto, rto * 60))
    }

    #[test]
    fn peer_addresses_of_another_scope_or_family_are_not_paths() {
        let mut p = paths();
        let ips: Vec<IpAddr> = ["10.0.0.1", "127.0.0.1", "::1", "0.0.0.0", "10.0.1.1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        p.add_peer_addresses(&ips);
        let remotes: Vec<SocketAddr> = p.iter().map(|p| p.remote).collect();
        assert_eq!(remotes, [addr("10.0.0.1:9899"), addr("10.0.1.1:9899")]);
        let many: Vec<IpAddr> = (2..40).map(|i| IpAddr::from([10, 0, 2, i])).collect();
        p.add_peer_addresses(&many);
        assert_eq!(p.iter().count(), MAX_PATHS);
    }

    #[test]
    fn primary_moves_to_a_confirmed_path_past_path_max_retrans() {
        let mut p = paths();
        p.add_peer_addresses(&["10.0.1.1".parse().unwrap()]);
        p.count_primary_error(1);
        p.count_primary_error(1);
        assert_eq!(p.primary_index(), 0, "the other path is not confirmed");
        p.list[1].heartbeat = Some((7, Instant::from_millis(5)));
        let mut info = vec![1];
        info.extend_from_slice(&7u64.to_be_bytes());
        info.extend_from_slice(&[0; 8]);
        p.on_heartbeat_ack(Instant::from_millis(25), &info);
        assert!(p.list[1].confirmed);
        assert_eq!(p.rto.srtt(), None, "only the primary path's round trips are measured");
        p.count_primary_error(1);
        assert_eq!(p.primary_index(), 1);
    }

    #[test]
    fn new_source_port_of_a_known_address_is_learnt() {
        let mut p = paths();
        let local = addr("10.0.0.2:9899");
        assert_eq!(p.learn(local, addr("10.0.0.1:40000")), 0);
        assert_eq!(p.primary().remote, addr("10.0.0.1:40000"));
        assert_eq!(p.learn(local, addr("10.9.9.9:9899")), 0, "unknown address: the primary");
    }
}
