//! Test hosts in network namespaces (client with two interfaces, router, server) for real-socket experiments.
//!
//! ```text
//!  client ns                 router ns                          server ns
//!  eth0 192.0.2.2/28 ─veth─ rc0 192.0.2.1/28
//!  eth1 198.51.100.2/28 ─── rc1 198.51.100.1/28     rs0 203.0.113.1/24 ─veth─ eth0 203.0.113.2/24
//!                            fsdelay (TUN) ⇄ `fastshake netlab relay`
//! ```
//!
//! The kernel has no netem, so the delay is ours: in the router, every packet that arrives on
//! rc0, rc1 or rs0 is routed (policy rule `iif … lookup 100`, table 100 `default dev fsdelay`)
//! into a TUN device; the relay holds it for the delay and writes it back, and the kernel forwards
//! it from the TUN by the main table. Addresses and ports are untouched, so every packet in and
//! out of the client is delayed once, and a client's address change is seen by the server as on
//! a real network.
//!
//! NAT ([`NatKind`]) is nftables masquerade on rs0. A packet crosses the router's conntrack twice
//! (before and after the relay), so the second crossing, and the server's replies, are tracked in
//! conntrack zone 1: otherwise the first crossing would settle the NAT binding before the packet
//! reaches rs0 and masquerade would never apply.
//!
//! Every namespace is named `fs-<pid>-<sequence>-<role>`, unique per process and testbed, and is
//! removed when the [`Testbed`] is dropped; namespaces left by a process that no longer exists
//! (a killed earlier run) are removed when the next testbed is created.

use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::relay::{RelayCounters, COUNTERS_PREFIX, READY_PREFIX};

/// Name of the relay's TUN device inside the router namespace.
pub const RELAY_TUN: &str = "fsdelay";
/// Prefix of every namespace a testbed creates.
pub const NAMESPACE_PREFIX: &str = "fs-";
/// The router's address on the server side: what the server sees behind NAT.
pub const ROUTER_SERVER_SIDE: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
/// The server's address.
pub const SERVER_ADDRESS: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 2);
const SERVER_PREFIX_LEN: u8 = 24;
const CLIENT_PREFIX_LEN: u8 = 28;
/// Policy routing table of the router that leads into the relay.
const RELAY_TABLE: u32 = 100;
/// How long the relay may take to attach to its TUN device.
const RELAY_START_TIMEOUT: Duration = Duration::from_secs(10);
const RELAY_ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the relay may take to exit after SIGTERM before it is killed.
const RELAY_EXIT_GRACE: Duration = Duration::from_secs(1);

static TESTBED_SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// Network address translation on the router's server-facing side (nftables masquerade).
///
/// Behaviour in RFC 4787 terms, as Linux conntrack gives it:
/// - [`NatKind::PortRestricted`]: `masquerade`. Endpoint-independent mapping as long as the
///   client's source port is free on the router's address (conntrack keeps the port when it can),
///   address-and-port-dependent filtering (only the remote address and port a mapping was created
///   towards can send through it): a "port-restricted cone" NAT in RFC 3489 words. A server that
///   answers from a new port is filtered out.
/// - [`NatKind::Symmetric`]: `masquerade random-fully`. Address-and-port-dependent mapping (every
///   new destination gets a new random port) and address-and-port-dependent filtering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatKind {
    PortRestricted,
    Symmetric,
}

impl NatKind {
    fn masquerade_statement(self) -> &'static str {
        match self {
            NatKind::PortRestricted => "masquerade",
            NatKind::Symmetric => "masquerade fully-random",
        }
    }
}

/// One of the client's network interfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientIface {
    Eth0,
    Eth1,
}

impl ClientIface {
    pub fn name(self) -> &'static str {
        match self {
            ClientIface::Eth0 => "eth0",
            ClientIface::Eth1 => "eth1",
        }
    }

    fn router_side_name(self) -> &'static str {
        match self {
            ClientIface::Eth0 => "rc0",
            ClientIface::Eth1 => "rc1",
        }
    }

    /// The router's address on this interface's link (the client's gateway).
    pub fn gateway(self) -> Ipv4Addr {
        match self {
            ClientIface::Eth0 => Ipv4Addr::new(192, 0, 2, 1),
            ClientIface::Eth1 => Ipv4Addr::new(198, 51, 100, 1),
        }
    }

    fn initial_address(self) -> Ipv4Addr {
        match self {
            ClientIface::Eth0 => Ipv4Addr::new(192, 0, 2, 2),
            ClientIface::Eth1 => Ipv4Addr::new(198, 51, 100, 2),
        }
    }

    /// The client's policy table for sockets bound to this interface's address.
    fn table(self) -> u32 {
        match self {
            ClientIface::Eth0 => 10,
            ClientIface::Eth1 => 11,
        }
    }

    /// Metric of this interface's default route in the main table: eth0 preferred.
    fn metric(self) -> u32 {
        match self {
            ClientIface::Eth0 => 100,
            ClientIface::Eth1 => 200,
        }
    }

    /// Whether `address` is a usable host address on this interface's /28 (not network,
    /// gateway or broadcast).
    pub fn is_host_address(self, address: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - CLIENT_PREFIX_LEN);
        let network = u32::from(self.gateway()) & mask;
        let value = u32::from(address);
        let host = value & !mask;
        value & mask == network && address != self.gateway() && host != 0 && host != !mask
    }
}

/// The three hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    Client,
    Router,
    Server,
}

/// What to build.
#[derive(Clone, Debug)]
pub struct TestbedConfig {
    /// Added to every packet in and out of the client, each way.
    pub delay: Duration,
    /// 1 (eth0) or 2 (eth0 and eth1).
    pub client_interfaces: u8,
    /// NAT on the router's server-facing side, or none.
    pub nat: Option<NatKind>,
    /// The `fastshake` binary that runs the relay (`fastshake netlab relay`); in tests
    /// `env!("CARGO_BIN_EXE_fastshake")`.
    pub relay_program: PathBuf,
    /// Packet loss probability of the relay (seeded Bernoulli), 0 for none.
    pub loss: f64,
    /// Seed of every trial of the relay: loss, duplication, reordering.
    pub loss_seed: u64,
    /// Probability that the relay sends a packet twice, 0 for never.
    pub duplicate: f64,
    /// How long after the original the copy leaves (zero: right behind it).
    pub duplicate_delay: Duration,
    /// Probability that the relay holds a packet back by `reorder_delay` more, 0 for never.
    pub reorder: f64,
    pub reorder_delay: Duration,
}

impl TestbedConfig {
    pub fn new(relay_program: impl Into<PathBuf>, delay: Duration) -> Self {
        TestbedConfig {
            delay,
            client_interfaces: 1,
            nat: None,
            relay_program: relay_program.into(),
            loss: 0.0,
            loss_seed: 0,
            duplicate: 0.0,
            duplicate_delay: Duration::ZERO,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error("the network testbed needs root (ip netns, veth, nftables); run the tests as root")]
    NotRoot,
    #[error("invalid testbed setting: {0}")]
    Invalid(String),
    #[error("`{command}` failed ({status}): {stderr}")]
    Command { command: String, status: String, stderr: String },
    #[error("delay relay: {0}")]
    Relay(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

pub type Result<T, E = TestbedError> = std::result::Result<T, E>;

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> TestbedError {
    let context = context.into();
    move |source| TestbedError::Io { context, source }
}

/// Runs `program args`, with `input` on its standard input, and fails on a non-zero exit.
fn run_command(program: &str, args: &[&str], input: Option<&str>) -> Result<String> {
    let command_line = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_error(format!("starting `{command_line}`")))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(input.as_bytes()).map_err(io_error(format!("writing to `{command_line}`")))?;
    }
    let output = child.wait_with_output().map_err(io_error(format!("waiting for `{command_line}`")))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let shown = match input {
            Some(input) => format!("{command_line} <<< {:?}", input),
            None => command_line,
        };
        Err(TestbedError::Command {
            command: shown,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// `ip -n NAMESPACE -batch -` with one command a line.
fn ip_batch(namespace: &str, lines: &[String]) -> Result<()> {
    let script = lines.join("\n") + "\n";
    run_command("ip", &["-n", namespace, "-batch", "-"], Some(&script)).map(drop)
}

/// Sets `key=value` sysctls of a namespace through /proc/sys, which shows the network settings
/// of the namespace of the process reading it (no procps needed).
fn sysctl(namespace: &str, settings: &[&str]) -> Result<()> {
    let mut script = String::new();
    for setting in settings {
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| TestbedError::Invalid(format!("sysctl {setting:?} has no value")))?;
        script.push_str(&format!("echo {value} > /proc/sys/{} && ", key.replace('.', "/")));
    }
    script.push_str("true");
    run_command("ip", &["netns", "exec", namespace, "sh", "-c", &script], None).map(drop)
}

/// Fails with [`TestbedError::NotRoot`] unless this process runs as root.
pub fn require_root() -> Result<()> {
    let uid = run_command("id", &["-u"], None)?;
    if uid.trim() == "0" {
        Ok(())
    } else {
        Err(TestbedError::NotRoot)
    }
}

fn list_namespaces() -> Result<Vec<String>> {
    let listing = run_command("ip", &["netns", "list"], None)?;
    Ok(listing.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect())
}

/// The testbed namespaces that exist now (`fs-*`).
pub fn testbed_namespaces() -> Result<Vec<String>> {
    Ok(list_namespaces()?.into_iter().filter(|name| name.starts_with(NAMESPACE_PREFIX)).collect())
}

fn owner_pid(namespace: &str) -> Option<u32> {
    namespace.strip_prefix(NAMESPACE_PREFIX)?.split('-').next()?.parse().ok()
}

/// Removes testbed namespaces whose creating process is gone (or every one with `all`); returns
/// the names removed.
pub fn remove_stale_namespaces(all: bool) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in testbed_namespaces()? {
        let stale = match owner_pid(&name) {
            Some(pid) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            None => true,
        };
        if all || stale {
            delete_namespace(&name);
            removed.push(name);
        }
    }
    Ok(removed)
}

fn delete_namespace(name: &str) {
    // The TUN device goes first so nothing is left if a process still holds the namespace.
    let _ = run_command("ip", &["-n", name, "link", "del", RELAY_TUN], None);
    let _ = run_command("ip", &["netns", "del", name], None);
}

/// One client interface as the testbed last set it.
#[derive(Clone, Copy, Debug)]
struct LinkState {
    iface: ClientIface,
    address: Ipv4Addr,
    up: bool,
}

/// The client's interfaces: their current addresses and whether they are up, and the routes to
/// put back after each change (bringing a link down flushes its routes). The lock is held while
/// the commands run, so an outage schedule and an address change do not interleave.
#[derive(Debug)]
struct ClientLinks {
    namespace: String,
    links: Mutex<Vec<LinkState>>,
}

impl ClientLinks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<LinkState>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn address(&self, iface: ClientIface) -> Option<Ipv4Addr> {
        self.lock().iter().find(|link| link.iface == iface).map(|link| link.address)
    }

    fn is_up(&self, iface: ClientIface) -> Option<bool> {
        self.lock().iter().find(|link| link.iface == iface).map(|link| link.up)
    }

    fn interfaces(&self) -> Vec<ClientIface> {
        self.lock().iter().map(|link| link.iface).collect()
    }

    /// Default route in the main table (by metric) and in the interface's own table, for sockets
    /// bound to its address. The own table ends in `unreachable`, so such a socket's traffic is
    /// lost while its interface is down instead of leaking out of the other one.
    fn route_lines(iface: ClientIface, address: Ipv4Addr) -> Vec<String> {
        let (name, gateway, table) = (iface.name(), iface.gateway(), iface.table());
        vec![
            format!("route replace default via {gateway} dev {name} metric {}", iface.metric()),
            format!("route replace default via {gateway} dev {name} src {address} table {table}"),
        ]
    }

    fn set_link(&self, iface: ClientIface, up: bool) -> Result<()> {
        let mut links = self.lock();
        let link = links
            .iter_mut()
            .find(|link| link.iface == iface)
            .ok_or_else(|| TestbedError::Invalid(format!("the client has no {}", iface.name())))?;
        let name = iface.name();
        if up {
            let mut lines = vec![format!("link set {name} up")];
            lines.extend(Self::route_lines(iface, link.address));
            ip_batch(&self.namespace, &lines)?;
        } else {
            ip_batch(&self.namespace, &[format!("link set {name} down")])?;
        }
        link.up = up;
        Ok(())
    }

    fn change_address(&self, iface: ClientIface, new_address: Ipv4Addr) -> Result<()> {
        if !iface.is_host_address(new_address) {
            return Err(TestbedError::Invalid(format!(
                "{new_address} is not a host address of {}'s /{CLIENT_PREFIX_LEN}",
                iface.name()
            )));
        }
        let mut links = self.lock();
        let link = links
            .iter_mut()
            .find(|link| link.iface == iface)
            .ok_or_else(|| TestbedError::Invalid(format!("the client has no {}", iface.name())))?;
        let (old, name, table) = (link.address, iface.name(), iface.table());
        let mut lines = vec![
            format!("address del {old}/{CLIENT_PREFIX_LEN} dev {name}"),
            format!("address add {new_address}/{CLIENT_PREFIX_LEN} dev {name}"),
            format!("rule del from {old} table {table}"),
            format!("rule add from {new_address} table {table} pref 1000"),
        ];
        // A link that is down has no routes; they come back with the new address when it is up.
        if link.up {
            lines.extend(Self::route_lines(iface, new_address));
        }
        ip_batch(&self.namespace, &lines)?;
        link.address = new_address;
        Ok(())
    }

    /// A further address on `iface` beside its own, with the interface's policy rule, so that
    /// sockets bound to it leave by that interface; it stays until the testbed is removed.
    fn add_address(&self, iface: ClientIface, address: Ipv4Addr) -> Result<()> {
        if !iface.is_host_address(address) {
            return Err(TestbedError::Invalid(format!(
                "{address} is not a host address of {}'s /{CLIENT_PREFIX_LEN}",
                iface.name()
            )));
        }
        let links = self.lock();
        let link = links
            .iter()
            .find(|link| link.iface == iface)
            .ok_or_else(|| TestbedError::Invalid(format!("the client has no {}", iface.name())))?;
        if link.address == address {
            return Err(TestbedError::Invalid(format!("{address} is already {}'s address", iface.name())));
        }
        let lines = vec![
            format!("address add {address}/{CLIENT_PREFIX_LEN} dev {}", iface.name()),
            format!("rule add from {address} table {} pref 1000", iface.table()),
        ];
        ip_batch(&self.namespace, &lines)
    }
}

/// The relay child process and the lines it prints.
struct RelayProcess {
    child: Child,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
}

impl RelayProcess {
    fn spawn_reader(stdout: ChildStdout) -> (Receiver<String>, JoinHandle<()>) {
        let (sender, receiver) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        (receiver, reader)
    }

    fn signal(&self, name: &str) -> Result<()> {
        // The shell's own kill: no procps needed.
        let script = format!("kill -s {name} {}", self.child.id());
        run_command("sh", &["-c", &script], None).map(drop)
    }

    /// Waits for the next line that starts with `prefix`.
    fn wait_line(&self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(TestbedError::Relay(format!("no `{prefix}` line within {timeout:?}")))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TestbedError::Relay(format!("exited before printing `{prefix}`")))
                }
            }
        }
    }

    fn counters(&self) -> Result<RelayCounters> {
        self.signal("USR1")?;
        let line = self.wait_line(COUNTERS_PREFIX, RELAY_ANSWER_TIMEOUT)?;
        line.parse().map_err(|e| TestbedError::Relay(format!("{e}")))
    }

    /// SIGTERM, then the final counters; SIGKILL if it does not stop in time.
    fn stop(mut self) -> Result<RelayCounters> {
        let result = self
            .signal("TERM")
            .and_then(|()| self.wait_line(COUNTERS_PREFIX, RELAY_ANSWER_TIMEOUT))
            .and_then(|line| line.parse().map_err(|e| TestbedError::Relay(format!("{e}"))));
        let exited_by_itself = self.reap();
        let counters = result?;
        if exited_by_itself {
            Ok(counters)
        } else {
            Err(TestbedError::Relay(format!("still running {RELAY_EXIT_GRACE:?} after SIGTERM; killed")))
        }
    }

    /// Waits for the relay to exit, kills it after a grace period; true if it exited by itself.
    fn reap(&mut self) -> bool {
        let deadline = Instant::now() + RELAY_EXIT_GRACE;
        let mut exited = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        exited
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.signal("TERM");
        }
        self.reap();
    }
}

/// A process started in a testbed namespace; killed when dropped.
pub struct HostProcess {
    child: Child,
}

impl HostProcess {
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three network namespaces (client, router, server) joined by veths, with the delay relay in the
/// router. Dropping it stops the relay and removes the namespaces.
pub struct Testbed {
    config: TestbedConfig,
    client: String,
    router: String,
    server: String,
    links: Arc<ClientLinks>,
    relay: Option<RelayProcess>,
    created_in: Duration,
}

impl Testbed {
    /// Builds the testbed and starts the relay; everything created so far is removed if a step fails.
    pub fn create(config: TestbedConfig) -> Result<Testbed> {
        let started = Instant::now();
        if !(1..=2).contains(&config.client_interfaces) {
            return Err(TestbedError::Invalid(format!(
                "client_interfaces must be 1 or 2, not {}",
                config.client_interfaces
            )));
        }
        for (name, p) in [("loss", config.loss), ("duplicate", config.duplicate), ("reorder", config.reorder)]
        {
            if !(0.0..=1.0).contains(&p) {
                return Err(TestbedError::Invalid(format!("{name} {p} is outside [0, 1]")));
            }
        }
        require_root()?;
        remove_stale_namespaces(false)?;

        let sequence = TESTBED_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let base = format!("{NAMESPACE_PREFIX}{}-{sequence}", std::process::id());
        let interfaces: Vec<ClientIface> = [ClientIface::Eth0, ClientIface::Eth1]
            .into_iter()
            .take(usize::from(config.client_interfaces))
            .collect();
        let mut testbed = Testbed {
            client: format!("{base}-client"),
            router: format!("{base}-router"),
            server: format!("{base}-server"),
            links: Arc::new(ClientLinks {
                namespace: format!("{base}-client"),
                links: Mutex::new(
                    interfaces
                        .iter()
                        .map(|i| LinkState { iface: *i, address: i.initial_address(), up: true })
                        .collect(),
                ),
            }),
            config,
            relay: None,
            created_in: Duration::ZERO,
        };
        // On error `testbed` is dropped here, which removes whatever was built.
        testbed.build(&interfaces)?;
        testbed.start_relay()?;
        testbed.created_in = started.elapsed();
        Ok(testbed)
    }

    fn build(&self, interfaces: &[ClientIface]) -> Result<()> {
        let (client, router, server) = (&self.client, &self.router, &self.server);
        for namespace in [client, router, server] {
            run_command("ip", &["netns", "add", namespace], None)?;
            // IPv6 off: no router solicitations or DAD through the relay, only the test's traffic.
            sysctl(namespace, &["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])?;
        }

        let mut client_lines = vec!["link set lo up".to_string()];
        let mut router_lines = vec!["link set lo up".to_string()];
        for iface in interfaces {
            let (name, peer) = (iface.name(), iface.router_side_name());
            let address = iface.initial_address();
            client_lines.extend([
                format!("link add {name} type veth peer name {peer} netns {router}"),
                format!("address add {address}/{CLIENT_PREFIX_LEN} dev {name}"),
                format!("link set {name} up"),
                format!("rule add from {address} table {} pref 1000", iface.table()),
                format!("route add unreachable default metric 4000 table {}", iface.table()),
            ]);
            client_lines.extend(ClientLinks::route_lines(*iface, address));
        }
        ip_batch(client, &client_lines)?;

        let server_lines = vec![
            "link set lo up".to_string(),
            format!("link add eth0 type veth peer name rs0 netns {router}"),
            format!("address add {SERVER_ADDRESS}/{SERVER_PREFIX_LEN} dev eth0"),
            "link set eth0 up".to_string(),
            format!("route add default via {ROUTER_SERVER_SIDE}"),
        ];
        ip_batch(server, &server_lines)?;

        sysctl(
            router,
            &["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"],
        )?;
        let mut relay_interfaces = vec!["rs0"];
        for iface in interfaces {
            let peer = iface.router_side_name();
            router_lines.extend([
                format!("address add {}/{CLIENT_PREFIX_LEN} dev {peer}", iface.gateway()),
                format!("link set {peer} up"),
            ]);
            relay_interfaces.push(peer);
        }
        router_lines.extend([
            format!("address add {ROUTER_SERVER_SIDE}/{SERVER_PREFIX_LEN} dev rs0"),
            "link set rs0 up".to_string(),
            format!("tuntap add dev {RELAY_TUN} mode tun"),
            format!("link set {RELAY_TUN} up"),
            format!("route add default dev {RELAY_TUN} table {RELAY_TABLE}"),
        ]);
        for name in &relay_interfaces {
            router_lines.push(format!("rule add iif {name} lookup {RELAY_TABLE} pref 100"));
        }
        ip_batch(router, &router_lines)?;

        if let Some(nat) = self.config.nat {
            // Zone 1: the second crossing of client→server packets (from the TUN) and everything
            // from the server, so masquerade binds on rs0 and replies find that binding.
            let ruleset = format!(
                "table ip fastshake_nat {{\n\
                 \tchain zone {{ type filter hook prerouting priority raw; \
                 iifname \"rs0\" ct zone set 1; \
                 iifname \"{RELAY_TUN}\" ip daddr {SERVER_ADDRESS}/{SERVER_PREFIX_LEN} ct zone set 1; }}\n\
                 \tchain postrouting {{ type nat hook postrouting priority srcnat; \
                 oifname \"rs0\" {}; }}\n\
                 }}\n",
                nat.masquerade_statement()
            );
            run_command("ip", &["netns", "exec", router, "nft", "-f", "-"], Some(&ruleset))?;
        }
        Ok(())
    }

    fn start_relay(&mut self) -> Result<()> {
        let delay = self.config.delay;
        let (delay_option, delay_value) = if delay.as_micros() == delay.as_millis() * 1_000 {
            ("--delay-ms", delay.as_millis().to_string())
        } else {
            ("--delay-us", delay.as_micros().to_string())
        };
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.router]).arg(&self.config.relay_program).args([
            "netlab",
            "relay",
            "--tun",
            RELAY_TUN,
            delay_option,
            &delay_value,
            "--stop-when-stdin-closes",
        ]);
        let config = &self.config;
        if config.loss > 0.0 || config.duplicate > 0.0 || config.reorder > 0.0 {
            command.args(["--seed", &config.loss_seed.to_string()]);
        }
        if config.loss > 0.0 {
            command.args(["--loss", &config.loss.to_string()]);
        }
        if config.duplicate > 0.0 {
            command
                .args(["--duplicate", &config.duplicate.to_string()])
                .args(["--duplicate-delay-us", &config.duplicate_delay.as_micros().to_string()]);
        }
        if config.reorder > 0.0 {
            command
                .args(["--reorder", &config.reorder.to_string()])
                .args(["--reorder-delay-us", &config.reorder_delay.as_micros().to_string()]);
        }
        // The relay's standard input stays open while this process lives (the pipe is kept in
        // `child`): if this process is killed, the relay reads the end of its input and stops.
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io_error(format!("starting the relay {}", self.config.relay_program.display())))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TestbedError::Relay("no standard output".into()));
        };
        let (lines, reader) = RelayProcess::spawn_reader(stdout);
        let relay = RelayProcess { child, lines, reader: Some(reader) };
        relay.wait_line(READY_PREFIX, RELAY_START_TIMEOUT)?;
        self.relay = Some(relay);
        Ok(())
    }

    /// The namespace name of a host.
    pub fn namespace(&self, host: Host) -> &str {
        match host {
            Host::Client => &self.client,
            Host::Router => &self.router,
            Host::Server => &self.server,
        }
    }

    pub fn config(&self) -> &TestbedConfig {
        &self.config
    }

    /// How long [`Testbed::create`] took.
    pub fn creation_time(&self) -> Duration {
        self.created_in
    }

    /// The client's interfaces.
    pub fn client_interfaces(&self) -> Vec<ClientIface> {
        self.links.interfaces()
    }

    /// The client's current address on `iface`, if it has that interface.
    pub fn client_address(&self, iface: ClientIface) -> Option<Ipv4Addr> {
        self.links.address(iface)
    }

    pub fn server_address(&self) -> Ipv4Addr {
        SERVER_ADDRESS
    }

    /// The router's address towards the server: the source the server sees behind NAT.
    pub fn router_server_side_address(&self) -> Ipv4Addr {
        ROUTER_SERVER_SIDE
    }

    /// A command that runs `program` in the namespace of `host` (through `ip netns exec`).
    pub fn command(&self, host: Host, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", self.namespace(host)]).arg(program);
        command
    }

    /// Starts `program args` in the namespace of `host`, standard output piped; the process is
    /// killed when the returned guard is dropped.
    pub fn exec_in<I, S>(&self, host: Host, program: impl AsRef<OsStr>, args: I) -> Result<HostProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let child = self
            .command(host, program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io_error(format!("starting a process in {}", self.namespace(host))))?;
        Ok(HostProcess { child })
    }

    /// Whether the client's `iface` is up, if it has that interface.
    pub fn client_link_up(&self, iface: ClientIface) -> Option<bool> {
        self.links.is_up(iface)
    }

    /// Takes a client interface down (an outage) or brings it back up with its routes.
    pub fn set_link(&self, iface: ClientIface, up: bool) -> Result<()> {
        self.links.set_link(iface, up)
    }

    /// Moves the client's `iface` to another host address of the same /28.
    pub fn change_address(&self, iface: ClientIface, new_address: Ipv4Addr) -> Result<()> {
        self.links.change_address(iface, new_address)
    }

    /// Gives the client's `iface` a second host address of its /28 (the first stays), for
    /// clients that move between addresses of one interface.
    pub fn add_client_address(&self, iface: ClientIface, address: Ipv4Addr) -> Result<()> {
        self.links.add_address(iface, address)
    }

    /// The relay's counters so far.
    pub fn relay_counters(&self) -> Result<RelayCounters> {
        self.relay.as_ref().ok_or_else(|| TestbedError::Relay("not running".into()))?.counters()
    }

    /// Stops the relay and returns its final counters (the network stops forwarding).
    pub fn stop_relay(&mut self) -> Result<RelayCounters> {
        self.relay.take().ok_or_else(|| TestbedError::Relay("not running".into()))?.stop()
    }

    /// Starts the scheduled outages of [`OutagePlan`] on a thread of their own.
    pub fn schedule_outages(&self, plan: OutagePlan) -> Result<OutageSchedule> {
        OutageSchedule::start(Arc::clone(&self.links), plan)
    }

    /// Tears everything down now and reports how long it took (dropping does the same).
    pub fn teardown(mut self) -> Duration {
        let started = Instant::now();
        self.remove();
        started.elapsed()
    }

    fn remove(&mut self) {
        drop(self.relay.take());
        for namespace in [&self.client, &self.router, &self.server] {
            delete_namespace(namespace);
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Periodic outages of the client's interfaces.
///
/// Every `period` each interface goes down for `outage`: eth0 first at `first_outage_after`, and
/// with two interfaces eth1 half a period later, so they are never down together (as in seed
/// 001's multihomed runs: every 10 s, interleaved by 5 s). Bounded by `cycles`.
#[derive(Clone, Copy, Debug)]
pub struct OutagePlan {
    pub period: Duration,
    pub outage: Duration,
    pub first_outage_after: Duration,
    pub cycles: u32,
}

/// One link change the schedule made, at `at` since it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkEvent {
    pub at: Duration,
    pub iface: ClientIface,
    pub up: bool,
}

/// The running outage schedule: stops by itself after its cycles, or early when stopped or
/// dropped; every interface is up again when it ends.
pub struct OutageSchedule {
    stop: Option<mpsc::Sender<()>>,
    worker: Option<JoinHandle<Result<Vec<LinkEvent>>>>,
}

impl OutageSchedule {
    fn start(links: Arc<ClientLinks>, plan: OutagePlan) -> Result<OutageSchedule> {
        let interfaces = links.interfaces();
        let stagger = plan.period / 2;
        let longest = if interfaces.len() > 1 { stagger } else { plan.period };
        if plan.outage.is_zero() || plan.outage >= longest {
            return Err(TestbedError::Invalid(format!(
                "an outage of {:?} does not fit a period of {:?} with {} interface(s)",
                plan.outage,
                plan.period,
                interfaces.len()
            )));
        }
        let mut events = Vec::new();
        for cycle in 0..plan.cycles {
            for (position, iface) in interfaces.iter().enumerate() {
                let down_at = plan.first_outage_after
                    + plan.period * cycle
                    + stagger * u32::try_from(position).unwrap_or(0);
                events.push((down_at, *iface, false));
                events.push((down_at + plan.outage, *iface, true));
            }
        }
        events.sort_by_key(|(at, _, _)| *at);

        let (stop, stopped) = mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let started = Instant::now();
            let mut log = Vec::with_capacity(events.len());
            let mut outcome = Ok(());
            for (at, iface, up) in events {
                let wait = at.saturating_sub(started.elapsed());
                match stopped.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // Stopped or dropped: end early.
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                }
                if let Err(e) = links.set_link(iface, up) {
                    outcome = Err(e);
                    break;
                }
                log.push(LinkEvent { at: started.elapsed(), iface, up });
            }
            for iface in interfaces {
                let _ = links.set_link(iface, true);
            }
            outcome.map(|()| log)
        });
        Ok(OutageSchedule { stop: Some(stop), worker: Some(worker) })
    }

    /// Waits until the schedule has run all its cycles; returns the link changes it made.
    pub fn wait(mut self) -> Result<Vec<LinkEvent>> {
        self.join()
    }

    /// Ends the schedule now (interfaces back up); returns the link changes it made.
    pub fn stop(mut self) -> Result<Vec<LinkEvent>> {
        drop(self.stop.take());
        self.join()
    }

    fn join(&mut self) -> Result<Vec<LinkEvent>> {
        match self.worker.take() {
            Some(worker) => worker
                .join()
                .unwrap_or_else(|_| Err(TestbedError::Invalid("the outage thread panicked".into()))),
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for OutageSchedule {
    fn drop(&mut self) {
        drop(self.stop.take());
        let _ = self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_addresses_of_a_client_interface() {
        assert!(ClientIface::Eth0.is_host_address(Ipv4Addr::new(192, 0, 2, 3)));
        assert!(ClientIface::Eth0.is_host_address(Ipv4Addr::new(192, 0, 2, 14)));
        assert!(!ClientIface::Eth0.is_host_address(Ipv4Addr::new(192, 0, 2, 1)));
        assert!(!ClientIface::Eth0.is_host_address(Ipv4Addr::new(192, 0, 2, 15)));
        assert!(!ClientIface::Eth0.is_host_address(Ipv4Addr::new(192, 0, 2, 16)));
        assert!(!ClientIface::Eth0.is_host_address(Ipv4Addr::new(192, 0, 2, 0)));
        assert!(ClientIface::Eth1.is_host_address(Ipv4Addr::new(198, 51, 100, 9)));
        assert!(!ClientIface::Eth1.is_host_address(Ipv4Addr::new(192, 0, 2, 9)));
    }

    #[test]
    fn owner_pid_of_a_namespace_name() {
        assert_eq!(owner_pid("fs-1234-0-client"), Some(1234));
        assert_eq!(owner_pid("fs-x-0-client"), None);
        assert_eq!(owner_pid("other"), None);
    }
}
