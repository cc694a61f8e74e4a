//! Scenarios in TOML: a topology, links, NATs, MACs, applications, timed events, a duration
//! and a seed, optionally swept over one parameter; and the summary of a run.
//!
//! ```toml
//! seed = 1
//! duration_s = 30
//!
//! [[node]]
//! name = "client"                      # role = "host" (default) | "router" | "nat"
//! interfaces = [{ name = "eth0", addr = "10.0.0.2" }]
//!
//! [[node]]
//! name = "nat"
//! role = "nat"
//! nat = { preset = "port-restricted", timeout_s = 30 }   # or mapping = / filtering =
//! inside = "in"                        # names of the inside and outside interfaces
//! outside = "out"
//! interfaces = [{ name = "in", addr = "10.0.0.1" }, { name = "out", addr = "198.51.100.1" }]
//!
//! [[link]]
//! name = "access"
//! a = "client.eth0"
//! b = "nat.in"
//! delay_ms = 5                         # and jitter, rate_bps, queue_packets, mtu, oversize,
//! loss = { model = "bernoulli", p = 0.01 }   # frame_header, duplicate, reorder, kind
//!
//! # power = { name = "x", supply_v = 3.0, tx_ma = 17.4, rx_ma = 18.8, listen_ma = 18.8, sleep_ma = 0.001 }
//!
//! [[mac]]                              # a duty-cycled MAC shared by 802.15.4 links
//! name = "radio"
//! kind = "tsch"                        # and that kind's parameters (see `mac::MacConfig`)
//! slotframe = 101
//! cells_per_link = 1
//! # a link then says: kind = { type = "ieee802154", mac = "radio" }
//!
//! [[app]]
//! node = "client"
//! kind = "ping"                        # or "echo" (optional reply_port); the engine apps
//! port = 5000                          # (dtls-*, sctp-*) come from fastshake-lab's factory
//! server = "192.0.2.10:7"              # and count, interval_ms, payload, start_ms, retry_ms
//!
//! [[expect]]                           # checked after each run (see `ExpectSpec`)
//! app = "client:ping"
//! replies = 10
//!
//! [[event]]
//! at_s = 10                            # every_s / until_s repeat the event
//! action = "down"                      # "down" | "up" | "address" (with addr = "...")
//! iface = "client.eth0"
//!
//! [sweep]                              # one run per value
//! param = "link.access.loss.p"         # path; arrays of tables are indexed by `name`
//! values = [0.0, 0.05, 0.1]
//! ```

use crate::apps::{App, AppStats, Echo, EchoConfig, HandshakeStats, Pinger, PingerConfig};
use crate::link::{LinkConfig, LinkCounters, LinkKind};
use crate::mac::MacConfig;
use crate::nat::{NatConfig, NatCounters};
use crate::{Action, BuildError, NetCounters, Role, Simulator};
use fastshake_core::Instant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// Why a scenario cannot be loaded or built.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The TOML does not parse or does not fit the format.
    #[error("scenario format: {0}")]
    Format(String),
    /// A name refers to nothing.
    #[error("unknown {kind} `{name}`")]
    Unknown {
        /// What was looked for.
        kind: &'static str,
        /// The name given.
        name: String,
    },
    /// The topology is inconsistent.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A sweep parameter path does not lead anywhere.
    #[error("sweep parameter `{0}` does not name a field of the scenario")]
    BadSweepPath(String),
    /// A MAC configuration was refused.
    #[error("MAC `{0}`: {1}")]
    Mac(String, String),
}

fn format_err(e: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::Format(e.to_string())
}

/// A scenario file: the base scenario and its sweep, if any.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    table: toml::Table,
    sweep: Option<Sweep>,
}

/// One parameter and the values it takes, one run each.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Dotted path into the scenario; array-of-table entries are picked by their `name`
    /// (e.g. `link.access.delay_ms`).
    pub param: String,
    /// The values.
    pub values: Vec<toml::Value>,
}

/// The scenario as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free-form name for reports.
    #[serde(default)]
    pub name: Option<String>,
    /// Seed of the run's RNG.
    #[serde(default)]
    pub seed: u64,
    /// How long to simulate, seconds of virtual time.
    pub duration_s: f64,
    /// Radio power profile for the duty-cycled MACs (default: CC2520 at 2.8 V).
    #[serde(default)]
    pub power: Option<crate::radio::PowerProfile>,
    /// Nodes.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// Links.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkSpec>,
    /// Duty-cycled MAC instances.
    #[serde(default, rename = "mac")]
    pub macs: Vec<MacSpec>,
    /// Applications.
    #[serde(default, rename = "app")]
    pub apps: Vec<AppSpec>,
    /// Timed changes.
    #[serde(default, rename = "event")]
    pub events: Vec<EventSpec>,
    /// What every run must show.
    #[serde(default, rename = "expect")]
    pub expects: Vec<ExpectSpec>,
    /// The sweep as written; [`ScenarioFile::runs`] applies it.
    #[serde(default)]
    pub sweep: Option<Sweep>,
}

/// A node.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub role: RoleSpec,
    /// Its interfaces.
    #[serde(default)]
    pub interfaces: Vec<IfaceSpec>,
    /// NAT behaviour (role = "nat").
    #[serde(default)]
    pub nat: Option<NatConfig>,
    /// Name of the inside interface (role = "nat"; default "inside").
    #[serde(default)]
    pub inside: Option<String>,
    /// Name of the outside interface (role = "nat"; default "outside").
    #[serde(default)]
    pub outside: Option<String>,
}

/// Role of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleSpec {
    /// Runs apps.
    #[default]
    Host,
    /// Forwards.
    Router,
    /// Translates.
    Nat,
}

/// An interface.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfaceSpec {
    /// Name, unique on its node.
    pub name: String,
    /// IPv4 address.
    pub addr: Ipv4Addr,
    /// Whether it is up at the start (default true); an `up` event brings it up later.
    #[serde(default = "yes")]
    pub up: bool,
}

fn yes() -> bool {
    true
}

/// A link: `name`, `a`, `b` and the fields of [`LinkConfig`].
#[derive(Clone, Debug, Deserialize)]
pub struct LinkSpec {
    /// Unique name.
    pub name: String,
    /// `node.iface` of one end.
    pub a: String,
    /// `node.iface` of the other end.
    pub b: String,
    #[serde(flatten)]
    rest: toml::Table,
}

/// A MAC instance: `name` and the fields of [`MacConfig`].
#[derive(Clone, Debug, Deserialize)]
pub struct MacSpec {
    /// Unique name, used by links of kind `ieee802154`.
    pub name: String,
    #[serde(flatten)]
    rest: toml::Table,
}

/// An application: `node`, `kind`, `port`, optional `name`, and the kind's settings.
#[derive(Clone, Debug, Deserialize)]
pub struct AppSpec {
    /// Host it runs on.
    pub node: String,
    /// `ping`, `echo`, or a kind an [`AppFactory`] knows.
    pub kind: String,
    /// UDP port it is bound to.
    pub port: u16,
    /// Name for reports (default `node:kind`).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(flatten)]
    rest: toml::Table,
}

impl AppSpec {
    /// The kind's own settings (every key but `node`, `kind`, `port`, `name`).
    pub fn settings(&self) -> &toml::Table {
        &self.rest
    }

    /// The settings as the kind's configuration type.
    pub fn settings_as<T: for<'de> Deserialize<'de>>(&self) -> Result<T, ScenarioError> {
        sub_config(&self.rest, &format!("app on `{}`", self.node))
    }
}

/// What a run must show for one app (`[[expect]]`); only the figures given are checked.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    /// The app's name in the report (its `name`, or `node:kind`).
    pub app: String,
    /// Handshakes completed.
    #[serde(default)]
    pub handshakes: Option<u64>,
    /// Handshakes completed by kind (the kinds named; e.g. `{ resumed = 2 }`).
    #[serde(default)]
    pub kinds: BTreeMap<String, u64>,
    /// Distinct requests answered (a client's records or messages echoed).
    #[serde(default)]
    pub replies: Option<u64>,
    /// Requests answered (a server's echoes).
    #[serde(default)]
    pub answered: Option<u64>,
}

/// Makes apps of kinds the simulator does not know; see [`Scenario::build_with`].
pub type AppFactory<'a> =
    dyn FnMut(&AppSpec, &mut Simulator) -> Result<Option<Box<dyn App>>, ScenarioError> + 'a;

/// Most events one `[[event]]` table may expand to with `every_s`.
pub const MAX_REPETITIONS: u64 = 1_000_000;

/// A timed change to an interface.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// When, seconds.
    pub at_s: f64,
    /// Repeat every so many seconds (with `until_s`).
    #[serde(default)]
    pub every_s: Option<f64>,
    /// Last time a repetition may happen, seconds (default: the duration).
    #[serde(default)]
    pub until_s: Option<f64>,
    /// What happens.
    pub action: ActionSpec,
    /// `node.iface`.
    pub iface: String,
    /// New address (action = "address").
    #[serde(default)]
    pub addr: Option<Ipv4Addr>,
}

/// What an event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionSpec {
    /// Interface down.
    Down,
    /// Interface up.
    Up,
    /// Address change.
    Address,
}

fn seconds_to_instant(s: f64) -> Instant {
    Instant::from_nanos(crate::dist::ms_to_ns(s * 1000.0))
}

fn sub_config<T: for<'de> Deserialize<'de>>(rest: &toml::Table, what: &str) -> Result<T, ScenarioError> {
    T::deserialize(toml::Value::Table(rest.clone()))
        .map_err(|e| ScenarioError::Format(format!("{what}: {}", e.to_string().trim())))
}

/// The apps and names a built scenario reports on.
#[derive(Debug)]
pub struct Built {
    /// The network, ready to run.
    pub sim: Simulator,
    /// How long to run it.
    pub duration: Instant,
    /// App kinds, in app order.
    app_kinds: Vec<String>,
}

impl Scenario {
    /// Parses one scenario (a sweep table, if any, is ignored).
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        toml::from_str(text).map_err(format_err)
    }

    /// The network this scenario describes, with `seed` (or the scenario's own), running only
    /// the built-in apps.
    pub fn build(&self, seed: Option<u64>) -> Result<Built, ScenarioError> {
        self.build_with(seed, &mut |_, _| Ok(None))
    }

    /// Like [`Scenario::build`], but `factory` is asked first for every app: it returns
    /// `Some(app)` for kinds it knows (e.g. a DTLS client or server from a crate the simulator
    /// does not depend on), `None` to fall back to the built-in `ping` and `echo`. It gets the
    /// app's spec and the simulator, whose RNG it may draw seeds from.
    pub fn build_with(
        &self,
        seed: Option<u64>,
        factory: &mut AppFactory<'_>,
    ) -> Result<Built, ScenarioError> {
        let mut sim = Simulator::new(seed.unwrap_or(self.seed));
        if let Some(profile) = &self.power {
            sim.set_power_profile(profile.clone());
        }
        for node in &self.nodes {
            if sim.node(&node.name).is_some() {
                return Err(ScenarioError::Format(format!("node `{}` defined twice", node.name)));
            }
            let role = match node.role {
                RoleSpec::Host => Role::Host,
                RoleSpec::Router => Role::Router,
                RoleSpec::Nat => Role::Nat(node.nat.clone().ok_or_else(|| {
                    ScenarioError::Format(format!("NAT node `{}` needs a `nat` table", node.name))
                })?),
            };
            let id = sim.add_node(&node.name, role);
            for iface in &node.interfaces {
                if sim.iface(&format!("{}.{}", node.name, iface.name)).is_some() {
                    return Err(ScenarioError::Format(format!(
                        "interface `{}.{}` defined twice",
                        node.name, iface.name
                    )));
                }
                let i = sim.add_interface(id, &iface.name, iface.addr)?;
                if !iface.up {
                    sim.set_initially_down(i);
                }
            }
            if node.role == RoleSpec::Nat {
                let lookup = |which: &Option<String>, default: &str| {
                    let name = format!("{}.{}", node.name, which.as_deref().unwrap_or(default));
                    sim.iface(&name).ok_or(ScenarioError::Unknown { kind: "interface", name })
                };
                let (inside, outside) = (lookup(&node.inside, "inside")?, lookup(&node.outside, "outside")?);
                sim.set_nat_interfaces(id, inside, outside);
            }
        }
        let iface = |sim: &Simulator, name: &str| {
            sim.iface(name).ok_or_else(|| ScenarioError::Unknown { kind: "interface", name: name.to_owned() })
        };
        let mut links = Vec::with_capacity(self.links.len());
        for spec in &self.links {
            let config: LinkConfig = sub_config(&spec.rest, &format!("link `{}`", spec.name))?;
            links.push((spec, iface(&sim, &spec.a)?, iface(&sim, &spec.b)?, config));
        }
        for mac in &self.macs {
            let config: MacConfig = sub_config(&mac.rest, &format!("mac `{}`", mac.name))?;
            let mut pairs = Vec::new();
            let mut members = Vec::new();
            for (_, a, b, link) in &links {
                if matches!(&link.kind, LinkKind::Ieee802154 { mac: m } if *m == mac.name) {
                    let (na, nb) = (sim.iface_node(*a), sim.iface_node(*b));
                    pairs.push((na, nb));
                    for n in [na, nb] {
                        if !members.contains(&n) {
                            members.push(n);
                        }
                    }
                }
            }
            let model = crate::mac::build(&config, &members, &pairs, sim.rng())
                .map_err(|e| ScenarioError::Mac(mac.name.clone(), e.to_string()))?;
            sim.add_mac(&mac.name, model);
        }
        for (spec, a, b, config) in links {
            sim.connect(&spec.name, a, b, config)?;
        }
        let mut app_kinds = Vec::new();
        for spec in &self.apps {
            let node = sim
                .node(&spec.node)
                .ok_or_else(|| ScenarioError::Unknown { kind: "node", name: spec.node.clone() })?;
            let app: Box<dyn App> = match factory(spec, &mut sim)? {
                Some(app) => app,
                None => match spec.kind.as_str() {
                    "ping" => Box::new(Pinger::new(spec.settings_as::<PingerConfig>()?)),
                    "echo" => Box::new(Echo::with_config(spec.settings_as::<EchoConfig>()?)),
                    other => return Err(ScenarioError::Unknown { kind: "app kind", name: other.to_owned() }),
                },
            };
            let name = spec.name.clone().unwrap_or_else(|| format!("{}:{}", spec.node, spec.kind));
            sim.add_app(node, &name, spec.port, app)?;
            app_kinds.push(spec.kind.clone());
        }
        let (_, _, app_names) = sim.names();
        if let Some(e) = self.expects.iter().find(|e| !app_names.contains(&e.app.as_str())) {
            return Err(ScenarioError::Unknown { kind: "app (in [[expect]])", name: e.app.clone() });
        }
        let duration = seconds_to_instant(self.duration_s);
        for event in &self.events {
            let target = iface(&sim, &event.iface)?;
            let action = match event.action {
                ActionSpec::Down => Action::InterfaceDown(target),
                ActionSpec::Up => Action::InterfaceUp(target),
                ActionSpec::Address => {
                    let addr = event.addr.ok_or_else(|| {
                        ScenarioError::Format(format!("address event on `{}` needs `addr`", event.iface))
                    })?;
                    let taken_by = self.nodes.iter().flat_map(|n| {
                        n.interfaces
                            .iter()
                            .filter(|i| i.addr == addr)
                            .map(move |i| format!("{}.{}", n.name, i.name))
                    });
                    if let Some(other) = taken_by.into_iter().find(|name| *name != event.iface) {
                        return Err(ScenarioError::Format(format!(
                            "address event on `{}`: {addr} belongs to `{other}`",
                            event.iface
                        )));
                    }
                    Action::SetAddress(target, addr)
                }
            };
            let until = event.until_s.unwrap_or(self.duration_s);
            let repetitions = match event.every_s {
                Some(every) if every > 0.0 && until >= event.at_s => ((until - event.at_s) / every).floor(),
                _ => 0.0,
            };
            // NaN (from an infinite duration) fails this check too.
            if repetitions.partial_cmp(&(MAX_REPETITIONS as f64)) != Some(std::cmp::Ordering::Less) {
                return Err(ScenarioError::Format(format!(
                    "event on `{}` repeats more than {MAX_REPETITIONS} times",
                    event.iface
                )));
            }
            for k in 0..=(repetitions as u64) {
                let every = event.every_s.unwrap_or(0.0);
                sim.schedule(seconds_to_instant(event.at_s + k as f64 * every), action.clone());
            }
        }
        Ok(Built { sim, duration, app_kinds })
    }
}

impl ScenarioFile {
    /// Parses a scenario file and checks that its base scenario is well-formed.
    pub fn parse(text: &str) -> Result<ScenarioFile, ScenarioError> {
        let mut table: toml::Table = text.parse().map_err(format_err)?;
        let sweep = match table.remove("sweep") {
            Some(v) => Some(Sweep::deserialize(v).map_err(|e| format_err(format!("sweep: {e}")))?),
            None => None,
        };
        let file = ScenarioFile { table, sweep };
        file.base()?;
        Ok(file)
    }

    /// The sweep, if any.
    pub fn sweep(&self) -> Option<&Sweep> {
        self.sweep.as_ref()
    }

    /// The scenario without the sweep applied.
    pub fn base(&self) -> Result<Scenario, ScenarioError> {
        Scenario::deserialize(toml::Value::Table(self.table.clone())).map_err(format_err)
    }

    /// One scenario per sweep value (or just the base one), with a label for the value.
    pub fn runs(&self) -> Result<Vec<(Option<String>, Scenario)>, ScenarioError> {
        let Some(sweep) = &self.sweep else {
            return Ok(vec![(None, self.base()?)]);
        };
        let path: Vec<&str> = sweep.param.split('.').collect();
        let mut out = Vec::with_capacity(sweep.values.len());
        for value in &sweep.values {
            let mut table = self.table.clone();
            if !set_path(&mut table, &path, value.clone()) {
                return Err(ScenarioError::BadSweepPath(sweep.param.clone()));
            }
            let scenario = Scenario::deserialize(toml::Value::Table(table)).map_err(format_err)?;
            out.push((Some(format!("{}={}", sweep.param, value)), scenario));
        }
        Ok(out)
    }
}

/// Sets `path` in `table` to `value`, creating missing tables at the end of the path.
/// A segment that names an array of tables picks the entry whose `name` is the next segment.
fn set_path(table: &mut toml::Table, path: &[&str], value: toml::Value) -> bool {
    let Some((first, rest)) = path.split_first() else { return false };
    if rest.is_empty() {
        table.insert((*first).to_owned(), value);
        return true;
    }
    match table.entry((*first).to_owned()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
        toml::Value::Table(inner) => set_path(inner, rest, value),
        toml::Value::Array(items) => {
            let Some((name, rest)) = rest.split_first() else { return false };
            let entry = items.iter_mut().find_map(|item| match item {
                toml::Value::Table(t) if t.get("name").and_then(|n| n.as_str()) == Some(*name) => Some(t),
                _ => None,
            });
            match entry {
                Some(t) => set_path(t, rest, value),
                None => false,
            }
        }
        _ => false,
    }
}

/// One link's figures.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    /// Link name.
    pub name: String,
    /// `node.iface` of end a.
    pub a: String,
    /// `node.iface` of end b.
    pub b: String,
    /// Direction a → b.
    pub a_to_b: LinkCounters,
    /// Direction b → a.
    pub b_to_a: LinkCounters,
}

/// One app's figures.
#[derive(Clone, Debug, Serialize)]
pub struct AppReport {
    /// App name.
    pub name: String,
    /// App kind.
    pub kind: String,
    /// Requests sent (retransmissions included).
    pub requests: u64,
    /// Requests sent again.
    pub retransmissions: u64,
    /// Distinct requests answered.
    pub replies: u64,
    /// Datagrams answered (servers).
    pub answered: u64,
    /// Median round trip, milliseconds.
    pub rtt_median_ms: Option<f64>,
    /// 95th percentile round trip, milliseconds.
    pub rtt_p95_ms: Option<f64>,
    /// When every request had been answered, seconds.
    pub completed_at_s: Option<f64>,
    /// Its handshakes, for an app that runs a protocol with handshakes.
    pub handshakes: Option<HandshakeReport>,
}

/// One app's handshakes (see [`HandshakeStats`]).
#[derive(Clone, Debug, Serialize)]
pub struct HandshakeReport {
    /// Handshakes the app meant to run (clients).
    pub planned: Option<u64>,
    /// Completed.
    pub completed: u64,
    /// Ended before completing.
    pub failed: u64,
    /// Completed, then failed (stalled, aborted).
    pub sessions_failed: u64,
    /// Completed, by kind.
    pub kinds: BTreeMap<String, u64>,
    /// Median duration of the timed ones, milliseconds.
    pub duration_p50_ms: Option<f64>,
    /// Longest duration, milliseconds.
    pub duration_max_ms: Option<f64>,
    /// UDP payload bytes both ways during the completed handshakes.
    pub bytes: u64,
    /// `bytes` per completed handshake.
    pub bytes_per_handshake: Option<f64>,
}

/// The `[[expect]]` tables checked against one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExpectationsReport {
    /// Figures checked.
    pub checked: usize,
    /// Those that did not match, one line each.
    pub unmet: Vec<String>,
}

/// One NAT's figures.
#[derive(Clone, Debug, Serialize)]
pub struct NatReport {
    /// Node name.
    pub name: String,
    /// Its counters.
    pub counters: NatCounters,
}

/// One radio's figures.
#[derive(Clone, Debug, Serialize)]
pub struct RadioReport {
    /// Node name.
    pub node: String,
    /// Time transmitting, ms.
    pub tx_ms: f64,
    /// Time receiving, ms.
    pub rx_ms: f64,
    /// Time listening idle, ms.
    pub listen_ms: f64,
    /// Time asleep, ms.
    pub sleep_ms: f64,
    /// Energy, mJ.
    pub energy_mj: f64,
}

/// The summary of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: Option<String>,
    /// The sweep value of this run.
    pub sweep: Option<String>,
    /// Seed used.
    pub seed: u64,
    /// Virtual time simulated, seconds.
    pub simulated_s: f64,
    /// Events processed.
    pub events: u64,
    /// Per link.
    pub links: Vec<LinkReport>,
    /// Per app.
    pub apps: Vec<AppReport>,
    /// Per NAT.
    pub nats: Vec<NatReport>,
    /// Per radio (nodes on a duty-cycled MAC).
    pub radios: Vec<RadioReport>,
    /// Network-wide drops.
    pub network: NetCounters,
    /// The scenario's `[[expect]]` tables, checked (absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expectations: Option<ExpectationsReport>,
}

/// What a run leaves behind.
#[derive(Debug)]
pub struct RunOutput {
    /// The summary.
    pub report: Report,
    /// The datagram pcap, if capture was asked for.
    pub pcap: Option<Vec<u8>>,
    /// The IEEE 802.15.4 frame pcap, if capture was asked for and frames were seen.
    pub frames_pcap: Option<Vec<u8>>,
}

/// Quantile `q` of sorted values (nearest rank).
fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1] as f64 / 1e6)
}

impl Scenario {
    /// Builds and runs the scenario for its duration, with the built-in apps only.
    pub fn run(
        &self,
        seed: Option<u64>,
        capture: bool,
        label: Option<String>,
    ) -> Result<RunOutput, ScenarioError> {
        self.run_with(seed, capture, label, &mut |_, _| Ok(None))
    }

    /// Like [`Scenario::run`], with `factory` asked for every app first (see
    /// [`Scenario::build_with`]); the `[[expect]]` tables are checked into the report.
    pub fn run_with(
        &self,
        seed: Option<u64>,
        capture: bool,
        label: Option<String>,
        factory: &mut AppFactory<'_>,
    ) -> Result<RunOutput, ScenarioError> {
        let mut built = self.build_with(seed, factory)?;
        if capture {
            built.sim.enable_capture();
        }
        built.sim.run_until(built.duration);
        let mut report = built.report(self.name.clone(), seed.unwrap_or(self.seed), label);
        if !self.expects.is_empty() {
            report.expectations = Some(report.check(&self.expects));
        }
        let pcap = built.sim.take_capture();
        let frames_pcap = built.sim.take_frame_capture();
        Ok(RunOutput { report, pcap, frames_pcap })
    }
}

impl Built {
    /// The summary of the network as it stands.
    pub fn report(&self, scenario: Option<String>, seed: u64, sweep: Option<String>) -> Report {
        let sim = &self.sim;
        let (node_names, link_names, app_names) = sim.names();
        let links = (0..link_names.len())
            .map(|l| {
                let [a, b] = sim.link_ends(l);
                let [ab, ba] = sim.link_counters(l);
                LinkReport {
                    name: link_names[l].to_owned(),
                    a: sim.iface_name(a).to_owned(),
                    b: sim.iface_name(b).to_owned(),
                    a_to_b: ab,
                    b_to_a: ba,
                }
            })
            .collect();
        let apps = (0..app_names.len())
            .map(|a| {
                let stats = sim.app_stats(a).unwrap_or_default();
                let kind = self.app_kinds.get(a).map_or("app", |k| k.as_str());
                let mut report = app_report(app_names[a], kind, &stats);
                report.handshakes = sim.app_handshakes(a).as_ref().map(handshake_report);
                report
            })
            .collect();
        let nats = (0..node_names.len())
            .filter_map(|n| {
                sim.nat_counters(n).map(|counters| NatReport { name: node_names[n].to_owned(), counters })
            })
            .collect();
        let ledger = sim.radio_ledger();
        let mut radio_nodes: Vec<_> = ledger.nodes().collect();
        radio_nodes.sort_unstable();
        let radios = radio_nodes
            .into_iter()
            .map(|n| {
                let u = ledger.usage(n, sim.now());
                RadioReport {
                    node: node_names.get(n).map_or_else(|| format!("#{n}"), |s| (*s).to_owned()),
                    tx_ms: u.tx.as_secs_f64() * 1e3,
                    rx_ms: u.rx.as_secs_f64() * 1e3,
                    listen_ms: u.listen.as_secs_f64() * 1e3,
                    sleep_ms: u.sleep.as_secs_f64() * 1e3,
                    energy_mj: u.energy_mj,
                }
            })
            .collect();
        Report {
            scenario,
            sweep,
            seed,
            simulated_s: sim.now().as_nanos() as f64 / 1e9,
            events: sim.events_processed(),
            links,
            apps,
            nats,
            radios,
            network: sim.counters(),
            expectations: None,
        }
    }
}

fn handshake_report(stats: &HandshakeStats) -> HandshakeReport {
    let mut durations = stats.durations_ns.clone();
    durations.sort_unstable();
    HandshakeReport {
        planned: stats.planned,
        completed: stats.completed,
        failed: stats.failed,
        sessions_failed: stats.sessions_failed,
        kinds: stats.kinds.clone(),
        duration_p50_ms: quantile(&durations, 0.5),
        duration_max_ms: durations.last().map(|&d| d as f64 / 1e6),
        bytes: stats.bytes,
        bytes_per_handshake: (stats.completed > 0).then(|| stats.bytes as f64 / stats.completed as f64),
    }
}

fn app_report(name: &str, kind: &str, stats: &AppStats) -> AppReport {
    let mut rtts = stats.rtts_ns.clone();
    rtts.sort_unstable();
    AppReport {
        name: name.to_owned(),
        kind: kind.to_owned(),
        requests: stats.requests_sent,
        retransmissions: stats.retransmissions,
        replies: stats.replies,
        answered: stats.answered,
        rtt_median_ms: quantile(&rtts, 0.5),
        rtt_p95_ms: quantile(&rtts, 0.95),
        completed_at_s: stats.completed_at_ns.map(|t| t as f64 / 1e9),
        handshakes: None,
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"))
}

impl Report {
    /// Checks `expects` against this run: one line per figure that does not match.
    pub fn check(&self, expects: &[ExpectSpec]) -> ExpectationsReport {
        let mut out = ExpectationsReport::default();
        for e in expects {
            let app = self.apps.iter().find(|a| a.name == e.app);
            let hs = app.and_then(|a| a.handshakes.as_ref());
            let mut figures: Vec<(String, Option<u64>, u64)> = Vec::new();
            if let Some(n) = e.handshakes {
                figures.push(("handshakes completed".into(), hs.map(|h| h.completed), n));
            }
            for (kind, &n) in &e.kinds {
                let got = hs.map(|h| h.kinds.get(kind).copied().unwrap_or(0));
                figures.push((format!("{kind} handshakes"), got, n));
            }
            if let Some(n) = e.replies {
                figures.push(("replies".into(), app.map(|a| a.replies), n));
            }
            if let Some(n) = e.answered {
                figures.push(("answered".into(), app.map(|a| a.answered), n));
            }
            for (what, got, want) in figures {
                out.checked += 1;
                if got != Some(want) {
                    let got = got.map_or_else(|| "none".to_owned(), |g| g.to_string());
                    out.unmet.push(format!("{}: {what} {got}, expected {want}", e.app));
                }
            }
        }
        out
    }

    /// The summary as aligned text tables.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "scenario {}{}  seed {}  simulated {:.3} s  events {}",
            self.scenario.as_deref().unwrap_or("-"),
            self.sweep.as_deref().map(|v| format!(" [{v}]")).unwrap_or_default(),
            self.seed,
            self.simulated_s,
            self.events
        );
        let _ = writeln!(
            s,
            "\n{:<16} {:<5} {:>9} {:>11} {:>7} {:>9} {:>6} {:>6} {:>5} {:>5} {:>5}",
            "link",
            "dir",
            "datagrams",
            "ip bytes",
            "frames",
            "delivered",
            "loss",
            "queue",
            "mtu",
            "down",
            "dup"
        );
        for l in &self.links {
            for (dir, c) in [("a->b", &l.a_to_b), ("b->a", &l.b_to_a)] {
                let _ = writeln!(
                    s,
                    "{:<16} {:<5} {:>9} {:>11} {:>7} {:>9} {:>6} {:>6} {:>5} {:>5} {:>5}",
                    l.name,
                    dir,
                    c.datagrams_sent,
                    c.ip_bytes,
                    c.frames,
                    c.datagrams_delivered,
                    c.dropped_loss,
                    c.dropped_queue,
                    c.dropped_mtu,
                    c.dropped_down,
                    c.duplicated
                );
            }
        }
        if !self.apps.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<20} {:<11} {:>8} {:>7} {:>8} {:>8} {:>12} {:>12} {:>10}",
                "app",
                "kind",
                "requests",
                "retries",
                "replies",
                "answered",
                "rtt med ms",
                "rtt p95 ms",
                "done at s"
            );
            for a in &self.apps {
                let _ = writeln!(
                    s,
                    "{:<20} {:<11} {:>8} {:>7} {:>8} {:>8} {:>12} {:>12} {:>10}",
                    a.name,
                    a.kind,
                    a.requests,
                    a.retransmissions,
                    a.replies,
                    a.answered,
                    opt_ms(a.rtt_median_ms),
                    opt_ms(a.rtt_p95_ms),
                    a.completed_at_s.map_or_else(|| "-".to_owned(), |t| format!("{t:.3}"))
                );
            }
        }
        let with_handshakes: Vec<_> =
            self.apps.iter().filter_map(|a| a.handshakes.as_ref().map(|h| (a, h))).collect();
        if !with_handshakes.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<20} {:>9} {:>6} {:>6} {:>10} {:>10} {:>9} {:>8}  kinds",
                "handshakes", "done", "failed", "later", "p50 ms", "max ms", "bytes", "B/hs"
            );
            for (a, h) in with_handshakes {
                let done = match h.planned {
                    Some(p) => format!("{}/{p}", h.completed),
                    None => h.completed.to_string(),
                };
                let kinds: Vec<String> = h.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
                let _ = writeln!(
                    s,
                    "{:<20} {:>9} {:>6} {:>6} {:>10} {:>10} {:>9} {:>8}  {}",
                    a.name,
                    done,
                    h.failed,
                    h.sessions_failed,
                    opt_ms(h.duration_p50_ms),
                    opt_ms(h.duration_max_ms),
                    h.bytes,
                    h.bytes_per_handshake.map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
                    kinds.join(", ")
                );
            }
        }
        if !self.nats.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<16} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8}",
                "nat", "out", "in", "mappings", "expired", "no mapping", "filtered"
            );
            for n in &self.nats {
                let c = &n.counters;
                let _ = writeln!(
                    s,
                    "{:<16} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8}",
                    n.name,
                    c.outbound,
                    c.inbound,
                    c.mappings_created,
                    c.mappings_expired,
                    c.no_mapping,
                    c.filtered
                );
            }
        }
        if !self.radios.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<16} {:>10} {:>10} {:>12} {:>12} {:>10}",
                "radio", "tx ms", "rx ms", "listen ms", "sleep ms", "energy mJ"
            );
            for r in &self.radios {
                let _ = writeln!(
                    s,
                    "{:<16} {:>10.3} {:>10.3} {:>12.3} {:>12.3} {:>10.3}",
                    r.node, r.tx_ms, r.rx_ms, r.listen_ms, r.sleep_ms, r.energy_mj
                );
            }
        }
        let n = &self.network;
        let _ = writeln!(
            s,
            "\nnetwork: sent {} received {}  drops: iface down tx {} rx {}, no route {}, ttl {}, \
             no listener {}, not local {}, nat {}, bad address {}",
            n.app_datagrams_sent,
            n.app_datagrams_received,
            n.dropped_iface_down_tx,
            n.dropped_iface_down_rx,
            n.dropped_no_route,
            n.dropped_ttl,
            n.dropped_no_listener,
            n.dropped_not_local,
            n.dropped_nat,
            n.dropped_bad_address
        );
        if let Some(e) = &self.expectations {
            if e.unmet.is_empty() {
                let _ = writeln!(s, "expectations: {} checked, all met", e.checked);
            } else {
                let _ = writeln!(s, "expectations: {} of {} not met", e.unmet.len(), e.checked);
                for line in &e.unmet {
                    let _ = writeln!(s, "  not met: {line}");
                }
            }
        }
        if n.address_conflicts > 0 {
            let _ = writeln!(s, "warning: {} address changes refused (address in use)", n.address_conflicts);
        }
        if n.timers_abandoned > 0 {
            let _ = writeln!(
                s,
                "warning: {} app timers abandoned (an app kept asking for the same instant)",
                n.timers_abandoned
            );
        }
        s
    }
}

/// The parameters of a TSCH `[[mac]]` table with `slotframe` timeslots (L) and `cells_per_link`
/// dedicated cells (C), for [`ieee802154_chain_toml`].
pub fn tsch_fields(slotframe: u32, cells_per_link: u32) -> String {
    format!("kind = \"tsch\"\nslotframe = {slotframe}\ncells_per_link = {cells_per_link}")
}

/// The `[[node]]`, `[[mac]]` and `[[link]]` tables of a chain of radios, for a scenario file
/// that tests and benchmarks write: `names` from the leaf (a sensor) to the root, each hop an
/// IEEE 802.15.4 link of one MAC named `mac`, whose parameters (`kind = "tsch"` and the rest)
/// are `mac_fields`. Hop `k` (from 0) is 10.0.`k`.0/24, the child `.2` and the parent `.1`, the
/// parent first in its link (the coordinator, in beacon mode); the nodes in the middle are
/// routers with interfaces `down` and `up`, the ends have `wpan0`. The links are `hop` (one
/// hop) or `hop1`, `hop2`, .... Put `seed` and `duration_s` before it, `[[app]]` tables after.
pub fn ieee802154_chain_toml(names: &[&str], mac: &str, mac_fields: &str) -> String {
    use std::fmt::Write as _;
    let last = names.len().saturating_sub(1);
    let mut text = String::new();
    for (i, name) in names.iter().enumerate() {
        let up = (i < last).then(|| format!("10.0.{i}.2"));
        let down = i.checked_sub(1).map(|k| format!("10.0.{k}.1"));
        let _ = writeln!(text, "[[node]]\nname = \"{name}\"");
        match (down, up) {
            (Some(down), Some(up)) => {
                let _ = writeln!(text, "role = \"router\"");
                let _ = writeln!(
                    text,
                    "interfaces = [{{ name = \"down\", addr = \"{down}\" }}, {{ name = \"up\", addr = \"{up}\" }}]"
                );
            }
            (Some(addr), None) | (None, Some(addr)) => {
                let _ = writeln!(text, "interfaces = [{{ name = \"wpan0\", addr = \"{addr}\" }}]");
            }
            (None, None) => {}
        }
        text.push('\n');
    }
    let _ = writeln!(text, "[[mac]]\nname = \"{mac}\"\n{}\n", mac_fields.trim());
    let end = |i: usize, towards_root: bool| match (i, towards_root) {
        (0, _) => "wpan0",
        (i, _) if i == last => "wpan0",
        (_, true) => "up",
        (_, false) => "down",
    };
    for k in 0..last {
        let link = if last == 1 { "hop".to_owned() } else { format!("hop{}", k + 1) };
        let (parent, child) = (names[k + 1], names[k]);
        let _ = writeln!(
            text,
            "[[link]]\nname = \"{link}\"\na = \"{parent}.{}\"\nb = \"{child}.{}\"\n\
             kind = {{ type = \"ieee802154\", mac = \"{mac}\" }}\n",
            end(k + 1, false),
            end(k, true)
        );
    }
    text
}
