//! The simulator: nodes, interfaces, links, NATs and applications, driven by one event queue
//! in virtual time and one seeded RNG.
//!
//! Determinism: every random choice is drawn from one `ChaCha20Rng` in the order events are
//! processed, and events due at the same nanosecond run in the order they were scheduled, so
//! the same seed gives the same run, byte for byte.
//!
//! Forwarding model: a host sends out of the interface its app chose as source (or its first
//! interface that is up); routers and NATs forward by destination address along static
//! shortest-hop routes computed from the topology. Hosts do not forward. Each address belongs
//! to exactly one interface of the whole network.

use crate::apps::{App, AppStats, HandshakeStats, NodeEvent};
use crate::event::EventQueue;
use crate::link::{Direction, LinkConfig, LinkCounters, LinkKind};
use crate::mac::sixlowpan::{node_address, Reassembler, Scope, UdpDatagram};
use crate::mac::{FrameKind, MacModel};
use crate::nat::{Nat, NatConfig, NatCounters};
use crate::packet::{Packet, DEFAULT_TTL};
use crate::pcap::PcapSink;
use crate::radio::RadioLedger;
use fastshake_core::{Instant, Transmit};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Index of a node.
pub type NodeId = usize;
/// Index of an interface (across all nodes).
pub type IfaceId = usize;
/// Index of a link.
pub type LinkId = usize;
/// Index of an application.
pub type AppId = usize;
/// Index of a MAC instance shared by the IEEE 802.15.4 hops that use it.
pub type MacId = usize;

/// What a node does with datagrams.
#[derive(Debug)]
pub enum Role {
    /// Runs applications; never forwards.
    Host,
    /// Forwards by destination address.
    Router,
    /// Translates between an inside and an outside interface (see [`crate::nat`]).
    Nat(NatConfig),
}

enum NodeKind {
    Host,
    Router,
    Nat { nat: Box<Nat>, inside: Option<IfaceId>, outside: Option<IfaceId> },
}

struct Node {
    name: String,
    kind: NodeKind,
    ifaces: Vec<IfaceId>,
    apps: Vec<AppId>,
}

struct Interface {
    /// `node.iface`
    name: String,
    short: String,
    node: NodeId,
    addr: Ipv4Addr,
    up: bool,
    link: Option<(LinkId, usize)>,
}

struct Link {
    name: String,
    ends: [IfaceId; 2],
    config: LinkConfig,
    dirs: [Direction; 2],
    mac: Option<MacId>,
}

struct AppSlot {
    name: String,
    node: NodeId,
    port: u16,
    /// Every port the app receives on: its bound port, any it has sent from or asked for.
    ports: Vec<u16>,
    app: Box<dyn App>,
    /// The deadline for which a timer event is queued.
    armed: Option<u64>,
    /// When `handle_timeout` was last called, and how many times in a row at that instant.
    last_timeout_at: u64,
    timeouts_at_that_instant: u32,
}

/// After this many `handle_timeout` calls at one instant, an app that still asks for that
/// instant gets no timer until a datagram or an interface event reaches it: an app that never
/// moves its deadline forward must not stop virtual time (counted in
/// [`NetCounters::timers_abandoned`]).
pub const MAX_TIMEOUTS_PER_INSTANT: u32 = 1000;

struct MacSlot {
    name: String,
    model: Box<dyn MacModel>,
}

/// A change to the network at a scheduled time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The interface stops sending and receiving.
    InterfaceDown(IfaceId),
    /// The interface works again.
    InterfaceUp(IfaceId),
    /// The interface gets a new address.
    SetAddress(IfaceId, Ipv4Addr),
}

enum Event {
    Arrive { link: LinkId, to_side: usize, packet: Packet },
    AppTimer { app: AppId },
    Action(Action),
}

/// Network-wide counters of datagrams that no link accounts for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NetCounters {
    /// Datagrams the apps asked to send.
    pub app_datagrams_sent: u64,
    /// Datagrams handed to apps.
    pub app_datagrams_received: u64,
    /// Sends from an interface that was down.
    pub dropped_iface_down_tx: u64,
    /// Arrivals for an address whose interface is down.
    pub dropped_iface_down_rx: u64,
    /// Sends with a source address the host does not have, or an IPv6 address.
    pub dropped_bad_address: u64,
    /// Datagrams no route leads to (unknown destination, interface without link).
    pub dropped_no_route: u64,
    /// Datagrams whose TTL ran out.
    pub dropped_ttl: u64,
    /// Datagrams to a host port no app listens on.
    pub dropped_no_listener: u64,
    /// Datagrams that reached a node that is not their destination and does not forward.
    pub dropped_not_local: u64,
    /// Datagrams a NAT refused (no mapping, filtered, no port).
    pub dropped_nat: u64,
    /// Address changes refused because another interface had the address.
    pub address_conflicts: u64,
    /// App timers not armed because the app kept asking for the instant it had just been
    /// served (see [`MAX_TIMEOUTS_PER_INSTANT`]); non-zero means an app bug.
    pub timers_abandoned: u64,
}

/// The simulated network.
pub struct Simulator {
    now: u64,
    queue: EventQueue<Event>,
    rng: ChaCha20Rng,
    nodes: Vec<Node>,
    ifaces: Vec<Interface>,
    links: Vec<Link>,
    apps: Vec<AppSlot>,
    macs: Vec<MacSlot>,
    ledger: RadioLedger,
    idle_accounted_until: u64,
    addr_owner: HashMap<Ipv4Addr, IfaceId>,
    /// `routes[node][dst_iface]`: the interface of `node` to forward through.
    routes: Vec<Vec<Option<IfaceId>>>,
    routes_ready: bool,
    started: bool,
    /// Apps before this index have been told about their interfaces.
    introduced_apps: usize,
    next_ip_id: u16,
    events: u64,
    counters: NetCounters,
    capture: Option<PcapSink>,
    frame_capture: Option<PcapSink>,
    /// Apps whose transmits and timers must be looked at after the current event.
    to_service: VecDeque<AppId>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("now", &Instant::from_nanos(self.now))
            .field("nodes", &self.nodes.len())
            .field("links", &self.links.len())
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

/// A topology error found while building.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    /// Two interfaces were given the same address.
    #[error("address {0} is used by two interfaces")]
    DuplicateAddress(Ipv4Addr),
    /// An interface was connected to two links.
    #[error("interface {0} is already attached to a link")]
    InterfaceBusy(String),
    /// A link connects a node to itself.
    #[error("link {0} connects a node to itself")]
    SelfLoop(String),
    /// A link names a MAC that does not exist.
    #[error("link {0} names an unknown MAC instance")]
    UnknownMac(String),
    /// An app was placed on a node that is not a host.
    #[error("node {0} is not a host and cannot run applications")]
    NotAHost(String),
    /// Two apps on one node bound the same port.
    #[error("port {1} on node {0} is already bound")]
    PortInUse(String, u16),
}

impl Simulator {
    /// An empty network whose randomness comes from `seed`.
    pub fn new(seed: u64) -> Self {
        Self::from_rng(ChaCha20Rng::seed_from_u64(seed))
    }

    /// An empty network whose randomness comes from a 32-byte seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self::from_rng(ChaCha20Rng::from_seed(seed))
    }

    fn from_rng(rng: ChaCha20Rng) -> Self {
        Simulator {
            now: 0,
            queue: EventQueue::new(),
            rng,
            nodes: Vec::new(),
            ifaces: Vec::new(),
            links: Vec::new(),
            apps: Vec::new(),
            macs: Vec::new(),
            ledger: RadioLedger::new(crate::radio::PowerProfile::cc2520()),
            idle_accounted_until: 0,
            addr_owner: HashMap::new(),
            routes: Vec::new(),
            routes_ready: false,
            started: false,
            introduced_apps: 0,
            next_ip_id: 0,
            events: 0,
            counters: NetCounters::default(),
            capture: None,
            frame_capture: None,
            to_service: VecDeque::new(),
        }
    }

    // ----- building -----

    /// Adds a node.
    pub fn add_node(&mut self, name: &str, role: Role) -> NodeId {
        let kind = match role {
            Role::Host => NodeKind::Host,
            Role::Router => NodeKind::Router,
            Role::Nat(config) => {
                NodeKind::Nat { nat: Box::new(Nat::new(&config)), inside: None, outside: None }
            }
        };
        self.nodes.push(Node { name: name.to_owned(), kind, ifaces: Vec::new(), apps: Vec::new() });
        self.routes_ready = false;
        self.nodes.len() - 1
    }

    /// Adds an interface with address `addr` to `node`. It starts up.
    pub fn add_interface(&mut self, node: NodeId, name: &str, addr: Ipv4Addr) -> Result<IfaceId, BuildError> {
        if self.addr_owner.contains_key(&addr) {
            return Err(BuildError::DuplicateAddress(addr));
        }
        let id = self.ifaces.len();
        let full = format!("{}.{}", self.nodes[node].name, name);
        self.ifaces.push(Interface { name: full, short: name.to_owned(), node, addr, up: true, link: None });
        self.nodes[node].ifaces.push(id);
        self.addr_owner.insert(addr, id);
        self.routes_ready = false;
        Ok(id)
    }

    /// Books radio energy under `profile` instead of the default CC2520 (before the first run).
    pub fn set_power_profile(&mut self, profile: crate::radio::PowerProfile) {
        if !self.started {
            self.ledger = RadioLedger::new(profile);
        }
    }

    /// Marks an interface as down from the start (before the first run; apps are then not
    /// told it is up until an [`Action::InterfaceUp`]).
    pub fn set_initially_down(&mut self, iface: IfaceId) {
        if !self.started {
            self.ifaces[iface].up = false;
        }
    }

    /// Makes `inside` the inside and `outside` the outside interface of NAT node `node`.
    /// Datagrams arriving on any other interface of the NAT are treated as from outside.
    pub fn set_nat_interfaces(&mut self, node: NodeId, inside_iface: IfaceId, outside_iface: IfaceId) {
        if let NodeKind::Nat { inside, outside, .. } = &mut self.nodes[node].kind {
            *inside = Some(inside_iface);
            *outside = Some(outside_iface);
        }
    }

    /// Adds a MAC instance that IEEE 802.15.4 links can share.
    pub fn add_mac(&mut self, name: &str, model: Box<dyn MacModel>) -> MacId {
        self.macs.push(MacSlot { name: name.to_owned(), model });
        self.macs.len() - 1
    }

    /// Connects two interfaces with a link.
    pub fn connect(
        &mut self,
        name: &str,
        a: IfaceId,
        b: IfaceId,
        config: LinkConfig,
    ) -> Result<LinkId, BuildError> {
        for &end in &[a, b] {
            if self.ifaces[end].link.is_some() {
                return Err(BuildError::InterfaceBusy(self.ifaces[end].name.clone()));
            }
        }
        if self.ifaces[a].node == self.ifaces[b].node {
            return Err(BuildError::SelfLoop(name.to_owned()));
        }
        let mac = match &config.kind {
            LinkKind::Wired => None,
            LinkKind::Ieee802154 { mac } => Some(
                self.macs
                    .iter()
                    .position(|m| &m.name == mac)
                    .ok_or_else(|| BuildError::UnknownMac(name.to_owned()))?,
            ),
        };
        let id = self.links.len();
        self.links.push(Link {
            name: name.to_owned(),
            ends: [a, b],
            config,
            dirs: [Direction::default(), Direction::default()],
            mac,
        });
        self.ifaces[a].link = Some((id, 0));
        self.ifaces[b].link = Some((id, 1));
        self.routes_ready = false;
        Ok(id)
    }

    /// Runs `app` on host `node`, receiving on UDP `port` (and on any port it later sends from
    /// or asks for with [`App::poll_bind`]).
    pub fn add_app(
        &mut self,
        node: NodeId,
        name: &str,
        port: u16,
        app: Box<dyn App>,
    ) -> Result<AppId, BuildError> {
        if !matches!(self.nodes[node].kind, NodeKind::Host) {
            return Err(BuildError::NotAHost(self.nodes[node].name.clone()));
        }
        if self.port_owner(node, port).is_some() {
            return Err(BuildError::PortInUse(self.nodes[node].name.clone(), port));
        }
        let id = self.apps.len();
        self.apps.push(AppSlot {
            name: name.to_owned(),
            node,
            port,
            ports: vec![port],
            app,
            armed: None,
            last_timeout_at: 0,
            timeouts_at_that_instant: 0,
        });
        self.nodes[node].apps.push(id);
        Ok(id)
    }

    /// Schedules `action` at `at`.
    pub fn schedule(&mut self, at: Instant, action: Action) {
        self.queue.push(at.as_nanos(), Event::Action(action));
    }

    /// Starts capturing every datagram on every link (and every MAC frame) into pcaps.
    pub fn enable_capture(&mut self) {
        self.capture.get_or_insert_with(PcapSink::ipv4);
        self.frame_capture.get_or_insert_with(PcapSink::ieee802154);
    }

    /// The datagram capture (RAW IPv4 pcap), if enabled; capture stops.
    pub fn take_capture(&mut self) -> Option<Vec<u8>> {
        self.capture.take().map(PcapSink::into_bytes)
    }

    /// The frame capture (IEEE 802.15.4 pcap), if enabled and any frame was captured;
    /// capture stops.
    pub fn take_frame_capture(&mut self) -> Option<Vec<u8>> {
        self.frame_capture.take().filter(|c| c.records() > 0).map(PcapSink::into_bytes)
    }

    // ----- looking up -----

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.events
    }

    /// Events waiting in the queue.
    pub fn events_pending(&self) -> usize {
        self.queue.len()
    }

    /// Network-wide counters.
    pub fn counters(&self) -> NetCounters {
        self.counters
    }

    /// Node by name.
    pub fn node(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Interface by `node.iface` name.
    pub fn iface(&self, full_name: &str) -> Option<IfaceId> {
        self.ifaces.iter().position(|i| i.name == full_name)
    }

    /// Link by name.
    pub fn link(&self, name: &str) -> Option<LinkId> {
        self.links.iter().position(|l| l.name == name)
    }

    /// Current address of an interface.
    pub fn iface_addr(&self, iface: IfaceId) -> Ipv4Addr {
        self.ifaces[iface].addr
    }

    /// Whether an interface is up.
    pub fn iface_up(&self, iface: IfaceId) -> bool {
        self.ifaces[iface].up
    }

    /// Counters of a link: `[a → b, b → a]`.
    pub fn link_counters(&self, link: LinkId) -> [LinkCounters; 2] {
        let l = &self.links[link];
        [l.dirs[0].counters, l.dirs[1].counters]
    }

    /// Counters of a NAT node.
    pub fn nat_counters(&self, node: NodeId) -> Option<NatCounters> {
        match &self.nodes[node].kind {
            NodeKind::Nat { nat, .. } => Some(nat.counters()),
            _ => None,
        }
    }

    /// An app, to read its state after a run (see [`App::as_any`]).
    pub fn app(&self, app: AppId) -> &dyn App {
        self.apps[app].app.as_ref()
    }

    /// The figures an app reports.
    pub fn app_stats(&self, app: AppId) -> Option<AppStats> {
        self.apps[app].app.stats()
    }

    /// The handshakes an app reports, if it has any.
    pub fn app_handshakes(&self, app: AppId) -> Option<HandshakeStats> {
        self.apps[app].app.handshakes()
    }

    /// The radio ledger of the MAC models (idle time booked up to the last run's end).
    pub fn radio_ledger(&self) -> &RadioLedger {
        &self.ledger
    }

    /// Names of all nodes, links, apps (index order), for reports.
    pub fn names(&self) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        (
            self.nodes.iter().map(|n| n.name.as_str()).collect(),
            self.links.iter().map(|l| l.name.as_str()).collect(),
            self.apps.iter().map(|a| a.name.as_str()).collect(),
        )
    }

    /// The node an app runs on.
    pub fn app_node(&self, app: AppId) -> NodeId {
        self.apps[app].node
    }

    /// Interfaces at the two ends of a link.
    pub fn link_ends(&self, link: LinkId) -> [IfaceId; 2] {
        self.links[link].ends
    }

    /// The node an interface belongs to.
    pub fn iface_node(&self, iface: IfaceId) -> NodeId {
        self.ifaces[iface].node
    }

    /// The run's RNG, for models built before the run (draws shift every later draw, so
    /// build in a fixed order).
    pub fn rng(&mut self) -> &mut dyn rand_core::RngCore {
        &mut self.rng
    }

    /// `node.iface` name of an interface.
    pub fn iface_name(&self, iface: IfaceId) -> &str {
        &self.ifaces[iface].name
    }

    // ----- running -----

    /// Processes every event due up to and including `until`, then sets the clock to `until`.
    pub fn run_until(&mut self, until: Instant) {
        self.start();
        self.dispatch_through(until.as_nanos());
        self.now = self.now.max(until.as_nanos());
        self.account_idle();
    }

    /// Processes events until none is left or `limit` is reached; returns the time reached.
    pub fn run_to_completion(&mut self, limit: Instant) -> Instant {
        self.start();
        self.dispatch_through(limit.as_nanos());
        self.account_idle();
        self.now()
    }

    /// Dispatches queued events in time order while they are due at or before `until` (ns).
    fn dispatch_through(&mut self, until: u64) {
        while let Some(at) = self.queue.peek_time() {
            if at > until {
                break;
            }
            let Some((at, event)) = self.queue.pop() else { break };
            self.now = self.now.max(at);
            self.events += 1;
            self.dispatch(event);
            self.service_pending();
        }
    }

    fn account_idle(&mut self) {
        if self.now > self.idle_accounted_until {
            let (from, to) = (Instant::from_nanos(self.idle_accounted_until), Instant::from_nanos(self.now));
            for mac in &mut self.macs {
                mac.model.account_idle(from, to, &mut self.ledger);
            }
            self.idle_accounted_until = self.now;
        }
    }

    fn start(&mut self) {
        if !self.routes_ready {
            self.compute_routes();
        }
        self.started = true;
        let now = self.now();
        // Apps added since the last run (all of them on the first) learn their interfaces.
        for app in self.introduced_apps..self.apps.len() {
            let node = self.apps[app].node;
            let ifaces = self.nodes[node].ifaces.clone();
            for iface in ifaces {
                let i = &self.ifaces[iface];
                if i.up {
                    let event = NodeEvent::InterfaceUp { iface: i.short.clone(), addr: i.addr };
                    self.apps[app].app.handle_node_event(now, &event);
                }
            }
            self.to_service.push_back(app);
        }
        self.introduced_apps = self.apps.len();
        self.service_pending();
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Arrive { link, to_side, packet } => self.arrive(link, to_side, packet),
            Event::AppTimer { app } => {
                let slot = &mut self.apps[app];
                let due = slot.app.poll_timeout().map(Instant::as_nanos);
                if slot.armed.is_some_and(|armed| armed <= self.now) {
                    slot.armed = None;
                }
                if due.is_some_and(|d| d <= self.now) {
                    if slot.last_timeout_at == self.now {
                        slot.timeouts_at_that_instant = slot.timeouts_at_that_instant.saturating_add(1);
                    } else {
                        slot.last_timeout_at = self.now;
                        slot.timeouts_at_that_instant = 1;
                    }
                    slot.app.handle_timeout(Instant::from_nanos(self.now));
                }
                self.to_service.push_back(app);
            }
            Event::Action(action) => self.apply(action),
        }
    }

    fn apply(&mut self, action: Action) {
        let now = self.now();
        let (iface, event) = match action {
            Action::InterfaceDown(i) => {
                if !self.ifaces[i].up {
                    return;
                }
                self.ifaces[i].up = false;
                (
                    i,
                    NodeEvent::InterfaceDown {
                        iface: self.ifaces[i].short.clone(),
                        addr: self.ifaces[i].addr,
                    },
                )
            }
            Action::InterfaceUp(i) => {
                if self.ifaces[i].up {
                    return;
                }
                self.ifaces[i].up = true;
                (i, NodeEvent::InterfaceUp { iface: self.ifaces[i].short.clone(), addr: self.ifaces[i].addr })
            }
            Action::SetAddress(i, new) => {
                let old = self.ifaces[i].addr;
                if old == new {
                    return;
                }
                if self.addr_owner.contains_key(&new) {
                    // Addresses stay unique: the change is refused and counted.
                    self.counters.address_conflicts += 1;
                    return;
                }
                self.addr_owner.remove(&old);
                self.addr_owner.insert(new, i);
                self.ifaces[i].addr = new;
                (i, NodeEvent::AddressChanged { iface: self.ifaces[i].short.clone(), old, new })
            }
        };
        let node = self.ifaces[iface].node;
        for k in 0..self.nodes[node].apps.len() {
            let app = self.nodes[node].apps[k];
            self.apps[app].app.handle_node_event(now, &event);
            self.to_service.push_back(app);
        }
    }

    /// Sends what the apps touched by the last event want to send and arms their timers.
    fn service_pending(&mut self) {
        while let Some(app) = self.to_service.pop_front() {
            let now = self.now();
            while let Some(port) = self.apps[app].app.poll_bind() {
                self.bind_port(app, port);
            }
            while let Some(transmit) = self.apps[app].app.poll_transmit(now) {
                self.send_from_app(app, transmit);
            }
            let slot = &mut self.apps[app];
            if let Some(due) = slot.app.poll_timeout() {
                let spinning = slot.last_timeout_at == self.now
                    && slot.timeouts_at_that_instant >= MAX_TIMEOUTS_PER_INSTANT;
                if spinning && due.as_nanos() <= self.now {
                    // Served again only when a datagram or interface event touches it.
                    self.counters.timers_abandoned += 1;
                    slot.armed = None;
                    continue;
                }
                let due = due.as_nanos().max(self.now);
                if slot.armed != Some(due) {
                    slot.armed = Some(due);
                    self.queue.push(due, Event::AppTimer { app });
                }
            }
        }
    }

    fn send_from_app(&mut self, app: AppId, transmit: Transmit) {
        self.counters.app_datagrams_sent += 1;
        let node = self.apps[app].node;
        let SocketAddr::V4(dst) = transmit.dst else {
            self.counters.dropped_bad_address += 1;
            return;
        };
        let iface = match transmit.src {
            Some(SocketAddr::V4(src)) => {
                let found =
                    self.nodes[node].ifaces.iter().copied().find(|&i| self.ifaces[i].addr == *src.ip());
                found.map(|i| (i, src.port()))
            }
            Some(SocketAddr::V6(_)) => None,
            None => {
                let ifaces = &self.nodes[node].ifaces;
                let first_up = ifaces.iter().copied().find(|&i| self.ifaces[i].up);
                first_up.or(ifaces.first().copied()).map(|i| (i, 0))
            }
        };
        let Some((iface, port)) = iface else {
            self.counters.dropped_bad_address += 1;
            return;
        };
        let port = if port == 0 { self.apps[app].port } else { port };
        self.bind_port(app, port);
        if !self.ifaces[iface].up {
            self.counters.dropped_iface_down_tx += 1;
            return;
        }
        let packet = Packet {
            src: SocketAddrV4::new(self.ifaces[iface].addr, port),
            dst,
            ttl: DEFAULT_TTL,
            ip_id: self.next_ip_id,
            payload: transmit.payload,
        };
        self.next_ip_id = self.next_ip_id.wrapping_add(1);
        self.transmit_on(iface, packet);
    }

    /// `app` receives on `port` from now on, unless another app of its host does.
    fn bind_port(&mut self, app: AppId, port: u16) {
        if self.port_owner(self.apps[app].node, port).is_none() {
            self.apps[app].ports.push(port);
        }
    }

    fn port_owner(&self, node: NodeId, port: u16) -> Option<AppId> {
        self.nodes[node].apps.iter().copied().find(|&a| self.apps[a].ports.contains(&port))
    }

    /// Puts `packet` on the link of `iface` (which must be up).
    fn transmit_on(&mut self, iface: IfaceId, packet: Packet) {
        let Some((link_id, side)) = self.ifaces[iface].link else {
            self.counters.dropped_no_route += 1;
            return;
        };
        let to_side = 1 - side;
        let link = &mut self.links[link_id];
        if let Some(mac) = link.mac {
            let from_node = self.ifaces[iface].node;
            let to_node = self.ifaces[link.ends[to_side]].node;
            self.transmit_mac(mac, link_id, side, from_node, to_node, packet);
            return;
        }
        let fate = link.dirs[side].transmit(
            self.now,
            packet.ip_len(),
            packet.payload.len(),
            &link.config,
            &mut self.rng,
        );
        if !fate.on_wire {
            return;
        }
        if let Some(capture) = &mut self.capture {
            capture.record(self.now, &packet.encode_ipv4());
        }
        match fate.arrivals {
            [Some(first), Some(second)] => {
                self.queue.push(first, Event::Arrive { link: link_id, to_side, packet: packet.clone() });
                self.queue.push(second, Event::Arrive { link: link_id, to_side, packet });
            }
            [Some(at), None] | [None, Some(at)] => {
                self.queue.push(at, Event::Arrive { link: link_id, to_side, packet });
            }
            [None, None] => {}
        }
    }

    /// What `packet` is on an IEEE 802.15.4 hop from `from` to `to`: a UDP datagram over IPv6
    /// (the simulator's IPv4 addresses stay its identity everywhere else). An IPv4 address that
    /// belongs to an interface of node `n` becomes `n`'s link-local address `fe80::IID(n)` when
    /// the datagram goes from one end of this hop to the other, and `n`'s mesh address
    /// `fd00::IID(n)` when it crosses more hops (IID from `n`'s EUI-64, `mac::sixlowpan`). An
    /// address no node owns is embedded in the RFC 6052 well-known prefix, `64:ff9b::a.b.c.d`.
    fn lowpan_datagram(&self, packet: &Packet, from: NodeId, to: NodeId) -> UdpDatagram {
        let owner = |ip: &Ipv4Addr| self.addr_owner.get(ip).map(|&i| self.ifaces[i].node);
        let (src_node, dst_node) = (owner(packet.src.ip()), owner(packet.dst.ip()));
        let scope =
            if src_node == Some(from) && dst_node == Some(to) { Scope::LinkLocal } else { Scope::Mesh };
        let address = |ip: &Ipv4Addr, node: Option<NodeId>| match node {
            Some(n) => node_address(n, scope),
            None => {
                let [a, b, c, d] = ip.octets();
                Ipv6Addr::new(
                    0x64,
                    0xff9b,
                    0,
                    0,
                    0,
                    0,
                    u16::from_be_bytes([a, b]),
                    u16::from_be_bytes([c, d]),
                )
            }
        };
        UdpDatagram {
            src: SocketAddrV6::new(address(packet.src.ip(), src_node), packet.src.port(), 0, 0),
            dst: SocketAddrV6::new(address(packet.dst.ip(), dst_node), packet.dst.port(), 0, 0),
            hop_limit: packet.ttl,
            payload: packet.payload.clone(),
        }
    }

    fn transmit_mac(
        &mut self,
        mac: MacId,
        link_id: LinkId,
        side: usize,
        from: NodeId,
        to: NodeId,
        mut packet: Packet,
    ) {
        let datagram = self.lowpan_datagram(&packet, from, to);
        let now = self.now();
        let outcome = self.macs[mac].model.send(now, from, to, &datagram, &mut self.rng, &mut self.ledger);
        let counters = &mut self.links[link_id].dirs[side].counters;
        counters.datagrams_offered += 1;
        counters.datagrams_sent += 1;
        counters.payload_bytes += packet.payload.len() as u64;
        counters.ip_bytes += packet.ip_len() as u64;
        for frame in &outcome.frames {
            counters.frames += 1;
            counters.frame_bytes += frame.bytes.len() as u64;
        }
        if let Some(capture) = &mut self.capture {
            capture.record(self.now, &packet.encode_ipv4());
        }
        if let Some(capture) = &mut self.frame_capture {
            for frame in &outcome.frames {
                capture.record(frame.start.as_nanos(), &frame.bytes);
            }
        }
        let Some(at) = outcome.delivered_at else {
            self.links[link_id].dirs[side].counters.dropped_loss += 1;
            return;
        };
        // The receiver gets what its 6LoWPAN layer rebuilds from the data frames it received
        // (retries included), so the datagram delivered is the one the frames carry.
        let mut reassembler = Reassembler::new();
        let rebuilt = outcome
            .frames
            .iter()
            .filter(|f| f.kind == FrameKind::Data && f.received && f.to == to)
            .find_map(|f| reassembler.push(&f.bytes).ok().flatten());
        match rebuilt {
            Some(r) if r.datagram == datagram => {
                packet.payload = r.datagram.payload;
                let at = at.as_nanos().max(self.now);
                self.queue.push(at, Event::Arrive { link: link_id, to_side: 1 - side, packet });
            }
            _ => self.links[link_id].dirs[side].counters.dropped_undecodable += 1,
        }
    }

    fn arrive(&mut self, link_id: LinkId, to_side: usize, packet: Packet) {
        let in_iface = self.links[link_id].ends[to_side];
        if !self.ifaces[in_iface].up {
            self.links[link_id].dirs[1 - to_side].counters.dropped_down += 1;
            return;
        }
        self.links[link_id].dirs[1 - to_side].counters.datagrams_delivered += 1;
        let node = self.ifaces[in_iface].node;
        match self.nodes[node].kind {
            NodeKind::Host => self.deliver_local(node, packet),
            NodeKind::Router => self.forward(node, packet),
            NodeKind::Nat { inside, outside, .. } => {
                self.nat_forward(node, in_iface, inside, outside, packet)
            }
        }
    }

    fn deliver_local(&mut self, node: NodeId, mut packet: Packet) {
        let Some(&iface) = self.addr_owner.get(packet.dst.ip()) else {
            self.counters.dropped_not_local += 1;
            return;
        };
        if self.ifaces[iface].node != node {
            self.counters.dropped_not_local += 1;
            return;
        }
        if !self.ifaces[iface].up {
            self.counters.dropped_iface_down_rx += 1;
            return;
        }
        let Some(app) = self.port_owner(node, packet.dst.port()) else {
            self.counters.dropped_no_listener += 1;
            return;
        };
        self.counters.app_datagrams_received += 1;
        let now = self.now();
        self.apps[app].app.handle_datagram(
            now,
            SocketAddr::V4(packet.dst),
            SocketAddr::V4(packet.src),
            &mut packet.payload,
        );
        self.to_service.push_back(app);
    }

    /// Router forwarding by destination address.
    fn forward(&mut self, node: NodeId, mut packet: Packet) {
        let Some(&dst_iface) = self.addr_owner.get(packet.dst.ip()) else {
            self.counters.dropped_no_route += 1;
            return;
        };
        if self.ifaces[dst_iface].node == node {
            // Routers run no apps.
            self.counters.dropped_no_listener += 1;
            return;
        }
        if packet.ttl <= 1 {
            self.counters.dropped_ttl += 1;
            return;
        }
        packet.ttl -= 1;
        let Some(out) = self.routes[node][dst_iface] else {
            self.counters.dropped_no_route += 1;
            return;
        };
        if !self.ifaces[out].up {
            self.counters.dropped_iface_down_tx += 1;
            return;
        }
        self.transmit_on(out, packet);
    }

    fn nat_forward(
        &mut self,
        node: NodeId,
        in_iface: IfaceId,
        inside: Option<IfaceId>,
        outside: Option<IfaceId>,
        mut packet: Packet,
    ) {
        let now = self.now;
        let NodeKind::Nat { nat, .. } = &mut self.nodes[node].kind else { return };
        if Some(in_iface) == inside {
            let Some(outside) = outside else {
                self.counters.dropped_nat += 1;
                return;
            };
            let Some(port) = nat.outbound(now, packet.src, packet.dst) else {
                self.counters.dropped_nat += 1;
                return;
            };
            packet.src = SocketAddrV4::new(self.ifaces[outside].addr, port);
            self.forward(node, packet);
        } else {
            let outside_addr = outside.map(|o| self.ifaces[o].addr);
            if outside_addr != Some(*packet.dst.ip()) {
                // Not addressed to the NAT: it does not route into its inside network.
                self.counters.dropped_nat += 1;
                return;
            }
            let Some(inside_ep) = nat.inbound(now, packet.src, packet.dst.port()) else {
                self.counters.dropped_nat += 1;
                return;
            };
            packet.dst = inside_ep;
            self.forward(node, packet);
        }
    }

    /// Static shortest-hop routes: for every destination interface, a breadth-first search
    /// from the node facing it, extended only through nodes that forward.
    fn compute_routes(&mut self) {
        let n = self.nodes.len();
        let m = self.ifaces.len();
        let mut routes = vec![vec![None; m]; n];
        let forwards = |kind: &NodeKind| !matches!(kind, NodeKind::Host);
        for (dst, dst_iface) in self.ifaces.iter().enumerate() {
            let Some((link, side)) = dst_iface.link else { continue };
            let facing_iface = self.links[link].ends[1 - side];
            let facing = self.ifaces[facing_iface].node;
            let mut seen = vec![false; n];
            seen[dst_iface.node] = true;
            seen[facing] = true;
            routes[facing][dst] = Some(facing_iface);
            let mut frontier = VecDeque::from([facing]);
            while let Some(u) = frontier.pop_front() {
                if !forwards(&self.nodes[u].kind) {
                    continue;
                }
                for &i in &self.nodes[u].ifaces {
                    let Some((l, s)) = self.ifaces[i].link else { continue };
                    let j = self.links[l].ends[1 - s];
                    let v = self.ifaces[j].node;
                    if !seen[v] {
                        seen[v] = true;
                        routes[v][dst] = Some(j);
                        frontier.push_back(v);
                    }
                }
            }
        }
        self.routes = routes;
        self.routes_ready = true;
    }
}
