//! NAT boxes with the mapping and filtering behaviours of RFC 4787.
//!
//! Mapping (RFC 4787 §4.1) decides when an inside endpoint gets a new outside port:
//! once for all destinations (endpoint-independent), per destination address
//! (address-dependent) or per destination address and port (address-and-port-dependent).
//! Filtering (§5) decides which outside endpoints may send back through a mapping: anyone
//! (endpoint-independent), hosts the inside endpoint has sent to (address-dependent) or
//! exactly the address and port it has sent to (address-and-port-dependent).
//! A mapping expires `timeout` after the last outbound datagram that used it (§4.3: outbound
//! refreshes; inbound refresh is optional and off by default).
//!
//! Not modelled: hairpinning (inside to inside through the outside address), ICMP, port
//! parity and contiguity, and more than one outside address.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};

/// How much of the destination a mapping or a filter depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dependence {
    /// Independent of the remote endpoint.
    EndpointIndependent,
    /// Depends on the remote address.
    AddressDependent,
    /// Depends on the remote address and port.
    AddressAndPortDependent,
}

/// The classic NAT names and the behaviours they stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NatPreset {
    /// Endpoint-independent mapping and filtering.
    FullCone,
    /// Endpoint-independent mapping, address-dependent filtering.
    Restricted,
    /// Endpoint-independent mapping, address-and-port-dependent filtering.
    PortRestricted,
    /// Address-and-port-dependent mapping and filtering.
    Symmetric,
}

impl NatPreset {
    /// (mapping, filtering) of the preset.
    pub fn behaviour(self) -> (Dependence, Dependence) {
        use Dependence::*;
        match self {
            NatPreset::FullCone => (EndpointIndependent, EndpointIndependent),
            NatPreset::Restricted => (EndpointIndependent, AddressDependent),
            NatPreset::PortRestricted => (EndpointIndependent, AddressAndPortDependent),
            NatPreset::Symmetric => (AddressAndPortDependent, AddressAndPortDependent),
        }
    }
}

/// A NAT's behaviour as a scenario writes it: a preset, or mapping and filtering given apart
/// (those override the preset).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatConfig {
    /// Starting point for `mapping` and `filtering`.
    #[serde(default)]
    pub preset: Option<NatPreset>,
    /// Mapping behaviour (default: from the preset, else endpoint-independent).
    #[serde(default)]
    pub mapping: Option<Dependence>,
    /// Filtering behaviour (default: from the preset, else address-and-port-dependent).
    #[serde(default)]
    pub filtering: Option<Dependence>,
    /// Mapping lifetime after the last outbound datagram, seconds (RFC 4787 REQ-5: ≥ 120 s by
    /// default; 120 here).
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Whether inbound datagrams refresh a mapping too.
    #[serde(default)]
    pub refresh_on_inbound: bool,
    /// First outside port handed out when the inside port cannot be kept.
    #[serde(default = "default_port_base")]
    pub port_base: u16,
}

fn default_timeout_s() -> f64 {
    120.0
}

fn default_port_base() -> u16 {
    40000
}

impl NatConfig {
    /// A NAT behaving like `preset`, with the default timeout.
    pub fn preset(preset: NatPreset) -> Self {
        NatConfig {
            preset: Some(preset),
            mapping: None,
            filtering: None,
            timeout_s: default_timeout_s(),
            refresh_on_inbound: false,
            port_base: default_port_base(),
        }
    }

    /// (mapping, filtering) after applying the preset and the overrides.
    pub fn behaviour(&self) -> (Dependence, Dependence) {
        let (m, f) = self
            .preset
            .map(NatPreset::behaviour)
            .unwrap_or((Dependence::EndpointIndependent, Dependence::AddressAndPortDependent));
        (self.mapping.unwrap_or(m), self.filtering.unwrap_or(f))
    }
}

/// What the mapping table is keyed by: the inside endpoint and as much of the remote as the
/// mapping behaviour looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct MappingKey {
    inside: SocketAddrV4,
    remote_ip: Option<Ipv4Addr>,
    remote_port: Option<u16>,
}

#[derive(Clone, Debug)]
struct Mapping {
    key: MappingKey,
    expires_at: u64,
    /// Remote endpoints the inside endpoint has sent to through this mapping.
    contacted: Vec<SocketAddrV4>,
}

/// Counters of a NAT box.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NatCounters {
    /// Outbound datagrams translated.
    pub outbound: u64,
    /// Inbound datagrams translated and let in.
    pub inbound: u64,
    /// Mappings created.
    pub mappings_created: u64,
    /// Mappings found expired.
    pub mappings_expired: u64,
    /// Inbound datagrams dropped by the filter.
    pub filtered: u64,
    /// Inbound datagrams for which no mapping exists.
    pub no_mapping: u64,
    /// Outbound datagrams dropped because no outside port was free.
    pub ports_exhausted: u64,
}

/// The translation state of one NAT box. It only rewrites addresses; the simulator routes.
#[derive(Clone, Debug)]
pub struct Nat {
    mapping: Dependence,
    filtering: Dependence,
    timeout_ns: u64,
    refresh_on_inbound: bool,
    port_base: u16,
    next_port: u16,
    by_key: HashMap<MappingKey, u16>,
    by_port: HashMap<u16, Mapping>,
    counters: NatCounters,
}

impl Nat {
    /// A NAT with `config`'s behaviour and no mappings.
    pub fn new(config: &NatConfig) -> Self {
        let (mapping, filtering) = config.behaviour();
        let port_base = config.port_base.max(1);
        Nat {
            mapping,
            filtering,
            timeout_ns: crate::dist::ms_to_ns(config.timeout_s * 1000.0),
            refresh_on_inbound: config.refresh_on_inbound,
            port_base,
            next_port: port_base,
            by_key: HashMap::new(),
            by_port: HashMap::new(),
            counters: NatCounters::default(),
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> NatCounters {
        self.counters
    }

    /// Live (unexpired at `now`) mappings.
    pub fn live_mappings(&self, now: u64) -> usize {
        self.by_port.values().filter(|m| m.expires_at > now).count()
    }

    fn key_for(&self, inside: SocketAddrV4, remote: SocketAddrV4) -> MappingKey {
        let (remote_ip, remote_port) = match self.mapping {
            Dependence::EndpointIndependent => (None, None),
            Dependence::AddressDependent => (Some(*remote.ip()), None),
            Dependence::AddressAndPortDependent => (Some(*remote.ip()), Some(remote.port())),
        };
        MappingKey { inside, remote_ip, remote_port }
    }

    fn remove_port(&mut self, port: u16) {
        if let Some(m) = self.by_port.remove(&port) {
            self.by_key.remove(&m.key);
        }
    }

    /// A free outside port: the inside port if free (port preservation, RFC 4787 §4.2.1),
    /// otherwise the next free one from `port_base` upward, wrapping.
    fn allocate_port(&mut self, now: u64, preferred: u16) -> Option<u16> {
        let usable = |nat: &mut Nat, port: u16| -> bool {
            if port == 0 {
                return false;
            }
            match nat.by_port.get(&port) {
                None => true,
                Some(m) if m.expires_at <= now => {
                    nat.counters.mappings_expired += 1;
                    nat.remove_port(port);
                    true
                }
                Some(_) => false,
            }
        };
        if usable(self, preferred) {
            return Some(preferred);
        }
        let span = u32::from(u16::MAX - self.port_base) + 1;
        for _ in 0..span {
            let port = self.next_port;
            self.next_port = if port == u16::MAX { self.port_base } else { port + 1 };
            if usable(self, port) {
                return Some(port);
            }
        }
        None
    }

    /// Translates an outbound datagram from `inside` to `remote`; returns the outside port to
    /// use as its source port, or `None` if it must be dropped.
    pub fn outbound(&mut self, now: u64, inside: SocketAddrV4, remote: SocketAddrV4) -> Option<u16> {
        let key = self.key_for(inside, remote);
        let live = match self.by_key.get(&key) {
            Some(&port) => match self.by_port.get(&port) {
                Some(m) if m.expires_at > now => Some(port),
                _ => {
                    self.counters.mappings_expired += 1;
                    self.remove_port(port);
                    None
                }
            },
            None => None,
        };
        let port = match live {
            Some(port) => port,
            None => {
                let Some(port) = self.allocate_port(now, inside.port()) else {
                    self.counters.ports_exhausted += 1;
                    return None;
                };
                self.by_key.insert(key, port);
                self.by_port.insert(port, Mapping { key, expires_at: 0, contacted: Vec::new() });
                self.counters.mappings_created += 1;
                port
            }
        };
        let timeout = self.timeout_ns;
        let m = self.by_port.get_mut(&port)?;
        m.expires_at = now.saturating_add(timeout);
        if !m.contacted.contains(&remote) {
            m.contacted.push(remote);
        }
        self.counters.outbound += 1;
        Some(port)
    }

    /// Translates an inbound datagram from `remote` to outside port `port`; returns the inside
    /// endpoint to deliver it to, or `None` if there is no live mapping or the filter refuses.
    pub fn inbound(&mut self, now: u64, remote: SocketAddrV4, port: u16) -> Option<SocketAddrV4> {
        let expired = match self.by_port.get(&port) {
            None => {
                self.counters.no_mapping += 1;
                return None;
            }
            Some(m) => m.expires_at <= now,
        };
        if expired {
            self.counters.mappings_expired += 1;
            self.counters.no_mapping += 1;
            self.remove_port(port);
            return None;
        }
        let filtering = self.filtering;
        let (refresh, timeout) = (self.refresh_on_inbound, self.timeout_ns);
        let m = self.by_port.get_mut(&port)?;
        let allowed = match filtering {
            Dependence::EndpointIndependent => true,
            Dependence::AddressDependent => m.contacted.iter().any(|c| c.ip() == remote.ip()),
            Dependence::AddressAndPortDependent => m.contacted.contains(&remote),
        };
        if !allowed {
            self.counters.filtered += 1;
            return None;
        }
        if refresh {
            m.expires_at = now.saturating_add(timeout);
        }
        let inside = m.key.inside;
        self.counters.inbound += 1;
        Some(inside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn port_is_preserved_when_free_and_allocated_from_the_base_otherwise() {
        let mut nat = Nat::new(&NatConfig { port_base: 50000, ..NatConfig::preset(NatPreset::FullCone) });
        let server = ep("192.0.2.1:443");
        assert_eq!(nat.outbound(0, ep("10.0.0.2:7000"), server), Some(7000));
        assert_eq!(nat.outbound(0, ep("10.0.0.3:7000"), server), Some(50000), "7000 is taken");
        assert_eq!(nat.inbound(1, server, 50000), Some(ep("10.0.0.3:7000")));
        assert_eq!(nat.inbound(1, server, 7000), Some(ep("10.0.0.2:7000")));
        assert_eq!(nat.live_mappings(1), 2);
    }

    #[test]
    fn expired_port_is_reused() {
        let mut nat = Nat::new(&NatConfig { timeout_s: 1.0, ..NatConfig::preset(NatPreset::FullCone) });
        let server = ep("192.0.2.1:443");
        assert_eq!(nat.outbound(0, ep("10.0.0.2:7000"), server), Some(7000));
        let later = 2_000_000_000;
        assert_eq!(nat.outbound(later, ep("10.0.0.3:7000"), server), Some(7000));
        assert_eq!(nat.inbound(later, server, 7000), Some(ep("10.0.0.3:7000")));
        assert_eq!(nat.counters().mappings_expired, 1);
    }
}
