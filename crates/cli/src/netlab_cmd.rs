//! `fastshake netlab`: the network-namespace testbed of the real-socket experiments.
//!
//! A client (eth0, optionally eth1), a router and a server, each in its own network namespace;
//! every packet in and out of the client is delayed by `fastshake netlab relay` in the router.
//! Needs root. The UDP echo tools run inside the namespaces to measure the testbed.

use crate::lab_cmd;
use anyhow::{bail, Context};
use fastshake_netlab::relay::{run_relay, RelayConfig};
use fastshake_netlab::testbed::{
    remove_stale_namespaces, ClientIface, Host, NatKind, Testbed, TestbedConfig,
};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = "Test hosts in network namespaces, for the real-socket experiments (needs root).\n\n\
  client eth0 192.0.2.2/28 ── router ── server eth0 203.0.113.2/24\n\
  client eth1 198.51.100.2/28 ─┘ (with --interfaces 2)\n\n\
Every packet in and out of the client is held by `fastshake netlab relay` in the router for the \
delay (the kernel has no netem). With --nat the router masquerades towards the server.\n\n\
  fastshake netlab up --delay-ms 30 --interfaces 2 --nat port-restricted   # until Ctrl-C\n\
  ip netns exec <client namespace> <command>                              # run a command in a host\n\
  fastshake netlab down                                                   # remove leftovers\n\
  fastshake netlab rtt --delays 5,30,100 --count 50                       # measure the relay")]
pub struct NetlabArgs {
    #[command(subcommand)]
    command: NetlabCommand,
}

#[derive(clap::Subcommand)]
enum NetlabCommand {
    /// Run the delay relay on an existing TUN device (the testbed starts it in the router).
    Relay(RelayArgs),
    /// Build a testbed, print its hosts, keep it until Ctrl-C, then remove it.
    Up(UpArgs),
    /// Remove testbed namespaces (fs-*) left by processes that no longer run (--all: every one).
    Down(DownArgs),
    /// UDP echo server: answers every datagram, prints `peer ADDR` for each new source address.
    UdpEcho(UdpEchoArgs),
    /// UDP echo client: sends numbered probes, prints each round-trip time and a summary.
    UdpPing(UdpPingArgs),
    /// Measure round-trip times through the relay for several delays, and setup/teardown times.
    Rtt(RttArgs),
    /// E1 on real sockets with every knob (`fastshake lab e1 --real` with the outage period,
    /// first outage, homing and strategies to choose).
    E1(lab_cmd::e1::RealArgs),
    /// One side of a real E1 run (started by `fastshake netlab e1` in a testbed host).
    E1Peer(lab_cmd::e1::PeerArgs),
    /// E6, the chaos soak on real sockets, with every knob (`fastshake lab chaos-real` with the
    /// waves, records, reordering, idle timeout and server log to choose).
    Chaos(lab_cmd::chaos_real::Knobs),
    /// The load of a real chaos soak (started by `fastshake netlab chaos` in the client host).
    #[command(hide = true)]
    ChaosPeer(lab_cmd::chaos_real::PeerArgs),
}

#[derive(clap::Args)]
struct RelayArgs {
    /// TUN device to attach to.
    #[arg(long)]
    tun: String,
    /// Delay applied to every packet, in milliseconds.
    #[arg(long, required_unless_present = "delay_us")]
    delay_ms: Option<u64>,
    /// The delay in microseconds instead, for delays that are not whole milliseconds.
    #[arg(long, conflicts_with = "delay_ms")]
    delay_us: Option<u64>,
    /// Probability of dropping a packet (seeded Bernoulli trials).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Seed of the loss, duplication and reordering trials.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Probability of sending a packet twice (seeded Bernoulli trials).
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// How long after the original the copy leaves, in microseconds (0: right behind it).
    #[arg(long, default_value_t = 0)]
    duplicate_delay_us: u64,
    /// Probability of holding a packet back by --reorder-delay-us more, so later ones overtake it.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// The extra delay of a reordered packet, in microseconds.
    #[arg(long, default_value_t = 0)]
    reorder_delay_us: u64,
    /// Most packets held at once; beyond it packets are dropped and counted.
    #[arg(long, default_value_t = RelayConfig::DEFAULT_QUEUE_LIMIT)]
    queue: usize,
    /// Stop when standard input closes (set by the testbed, so the relay ends with it).
    #[arg(long)]
    stop_when_stdin_closes: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum NatArg {
    /// nftables masquerade: endpoint-independent mapping while the port is free,
    /// address-and-port-dependent filtering (RFC 4787).
    PortRestricted,
    /// masquerade fully-random: address-and-port-dependent mapping and filtering.
    Symmetric,
}

impl From<NatArg> for NatKind {
    fn from(nat: NatArg) -> NatKind {
        match nat {
            NatArg::PortRestricted => NatKind::PortRestricted,
            NatArg::Symmetric => NatKind::Symmetric,
        }
    }
}

#[derive(clap::Args)]
struct UpArgs {
    /// Delay of every packet in and out of the client, each way, in milliseconds.
    #[arg(long, default_value_t = 30)]
    delay_ms: u64,
    /// Client interfaces: 1 (eth0) or 2 (eth0, eth1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    interfaces: u8,
    /// NAT on the router towards the server.
    #[arg(long, num_args = 0..=1, default_missing_value = "port-restricted")]
    nat: Option<NatArg>,
    /// Relay packet loss probability.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Relay duplication probability (the copy right behind the original).
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Relay reordering probability: a packet held back by --reorder-delay-ms more.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// The extra delay of a reordered packet, ms.
    #[arg(long, default_value_t = 10)]
    reorder_delay_ms: u64,
    /// Leave after this many seconds instead of waiting for Ctrl-C.
    #[arg(long)]
    seconds: Option<u64>,
}

#[derive(clap::Args)]
struct DownArgs {
    /// Remove every fs-* namespace, also those of running testbeds.
    #[arg(long)]
    all: bool,
}

#[derive(clap::Args)]
struct UdpEchoArgs {
    /// Address to listen on.
    #[arg(long)]
    bind: SocketAddr,
    /// Stop after this long (bounded by design).
    #[arg(long, default_value_t = 60_000)]
    duration_ms: u64,
    /// Answer from another socket bound to this port (what an IPC server does after the
    /// cookie exchange), instead of from the listening one.
    #[arg(long)]
    reply_from_port: Option<u16>,
}

#[derive(clap::Args)]
struct UdpPingArgs {
    /// Echo server address.
    #[arg(long)]
    to: SocketAddr,
    /// Local address (0.0.0.0:0 lets the routes choose the interface and source).
    #[arg(long, default_value = "0.0.0.0:0")]
    bind: SocketAddr,
    /// Probes to send.
    #[arg(long, default_value_t = 10)]
    count: u32,
    /// Pause between one probe's answer (or timeout) and the next probe.
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
    /// How long to wait for each answer.
    #[arg(long, default_value_t = 1_000)]
    timeout_ms: u64,
}

#[derive(clap::Args)]
struct RttArgs {
    /// Delays to measure, in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "5,30,100")]
    delays: Vec<u64>,
    /// Echoes per delay.
    #[arg(long, default_value_t = 50)]
    count: u32,
}

pub fn run(args: NetlabArgs) -> anyhow::Result<()> {
    match args.command {
        NetlabCommand::Relay(args) => relay(args),
        NetlabCommand::Up(args) => up(args),
        NetlabCommand::Down(args) => down(args),
        NetlabCommand::UdpEcho(args) => udp_echo(args),
        NetlabCommand::UdpPing(args) => udp_ping(args),
        NetlabCommand::Rtt(args) => rtt(args),
        NetlabCommand::E1(args) => fastshake_lab::e1::real::run_real(args.into()),
        NetlabCommand::E1Peer(args) => fastshake_lab::e1::real::run_peer(args.into()),
        NetlabCommand::Chaos(args) => fastshake_lab::chaos_real::run_netlab(args.into()),
        NetlabCommand::ChaosPeer(args) => fastshake_lab::chaos_real::run_peer(args.into()),
    }
}

fn relay(args: RelayArgs) -> anyhow::Result<()> {
    for (name, p) in [("--loss", args.loss), ("--duplicate", args.duplicate), ("--reorder", args.reorder)] {
        if !(0.0..=1.0).contains(&p) {
            bail!("{name} {p} is outside [0, 1]");
        }
    }
    let delay = match (args.delay_ms, args.delay_us) {
        (_, Some(us)) => Duration::from_micros(us),
        (Some(ms), None) => Duration::from_millis(ms),
        (None, None) => bail!("--delay-ms or --delay-us is needed"),
    };
    let config = RelayConfig {
        loss: args.loss,
        seed: args.seed,
        duplicate: args.duplicate,
        duplicate_delay: Duration::from_micros(args.duplicate_delay_us),
        reorder: args.reorder,
        reorder_delay: Duration::from_micros(args.reorder_delay_us),
        queue_limit: args.queue,
        stop_when_stdin_closes: args.stop_when_stdin_closes,
        ..RelayConfig::new(args.tun, delay)
    };
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    let outcome = runtime.block_on(run_relay(&config));
    // A read of standard input may still block a runtime thread: do not wait for it.
    runtime.shutdown_background();
    println!("{}", outcome?);
    Ok(())
}

fn testbed_config(delay_ms: u64, interfaces: u8, nat: Option<NatKind>) -> anyhow::Result<TestbedConfig> {
    let program = std::env::current_exe().context("the path of this fastshake binary")?;
    Ok(TestbedConfig {
        client_interfaces: interfaces,
        nat,
        ..TestbedConfig::new(program, Duration::from_millis(delay_ms))
    })
}

fn up(args: UpArgs) -> anyhow::Result<()> {
    let mut config = testbed_config(args.delay_ms, args.interfaces, args.nat.map(NatKind::from))?;
    config.loss = args.loss;
    config.duplicate = args.duplicate;
    config.reorder = args.reorder;
    config.reorder_delay = Duration::from_millis(args.reorder_delay_ms);
    let testbed = Testbed::create(config)?;
    println!(
        "testbed up in {:.0} ms: delay {} ms each way, NAT {}",
        testbed.creation_time().as_secs_f64() * 1e3,
        args.delay_ms,
        match args.nat {
            None => "none",
            Some(NatArg::PortRestricted) => "port-restricted (masquerade)",
            Some(NatArg::Symmetric) => "symmetric (masquerade fully-random)",
        }
    );
    for iface in testbed.client_interfaces() {
        if let Some(address) = testbed.client_address(iface) {
            println!("  client {:<6} {address}  (gateway {})", iface.name(), iface.gateway());
        }
    }
    println!("  server eth0   {}", testbed.server_address());
    println!("  router        {} towards the server", testbed.router_server_side_address());
    for (host, label) in [(Host::Client, "client"), (Host::Router, "router"), (Host::Server, "server")] {
        println!("  run in the {label}: ip netns exec {} <command>", testbed.namespace(host));
    }
    let client = testbed.namespace(Host::Client);
    println!("  outage of eth0: ip -n {client} link set eth0 down");
    println!(
        "  back up:        ip -n {client} link set eth0 up && ip -n {client} route replace default via {} dev eth0 metric 100",
        ClientIface::Eth0.gateway()
    );
    let _ = std::io::stdout().flush();

    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    runtime.block_on(async {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let limit = async {
            match args.seconds {
                Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
            _ = limit => {}
        }
        anyhow::Ok(())
    })?;
    if let Ok(counters) = testbed.relay_counters() {
        println!("{counters}");
    }
    let teardown = testbed.teardown();
    println!("testbed removed in {:.0} ms", teardown.as_secs_f64() * 1e3);
    Ok(())
}

fn down(args: DownArgs) -> anyhow::Result<()> {
    let removed = remove_stale_namespaces(args.all)?;
    if removed.is_empty() {
        println!("no testbed namespace to remove");
    }
    for name in removed {
        println!("removed {name}");
    }
    Ok(())
}

fn udp_echo(args: UdpEchoArgs) -> anyhow::Result<()> {
    let socket = UdpSocket::bind(args.bind).with_context(|| format!("binding {}", args.bind))?;
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    let reply_socket = match args.reply_from_port {
        Some(port) => {
            let address = SocketAddr::new(args.bind.ip(), port);
            Some(UdpSocket::bind(address).with_context(|| format!("binding {address}"))?)
        }
        None => None,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening {}", socket.local_addr()?)?;
    out.flush()?;
    let deadline = Instant::now() + Duration::from_millis(args.duration_ms);
    let mut peers = HashSet::new();
    let mut buffer = vec![0u8; 65_535];
    while Instant::now() < deadline {
        let (length, peer) = match socket.recv_from(&mut buffer) {
            Ok(received) => received,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                continue
            }
            Err(e) => return Err(e.into()),
        };
        if peers.insert(peer) {
            writeln!(out, "peer {peer}")?;
            out.flush()?;
        }
        let payload = buffer.get(..length).unwrap_or_default();
        // An unreachable peer (its link is down) is not an error of the echo server.
        let _ = reply_socket.as_ref().unwrap_or(&socket).send_to(payload, peer);
    }
    Ok(())
}

/// What `udp-ping` measured.
struct PingSummary {
    sent: u32,
    rtts: Vec<Duration>,
}

impl PingSummary {
    fn median(&self) -> Option<Duration> {
        let mut sorted = self.rtts.clone();
        sorted.sort();
        sorted.get(sorted.len() / 2).copied()
    }
}

fn ping(args: &UdpPingArgs, out: &mut impl Write) -> anyhow::Result<PingSummary> {
    let socket = UdpSocket::bind(args.bind).with_context(|| format!("binding {}", args.bind))?;
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let mut summary = PingSummary { sent: 0, rtts: Vec::new() };
    let mut buffer = [0u8; 64];
    for sequence in 0..args.count {
        let probe = sequence.to_be_bytes();
        let sent_at = Instant::now();
        summary.sent += 1;
        match socket.send_to(&probe, args.to) {
            Err(e) => writeln!(out, "echo seq={sequence} lost send_error={:?}", e.kind())?,
            Ok(_) => {
                let mut answered = None;
                loop {
                    let left = timeout.saturating_sub(sent_at.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    socket.set_read_timeout(Some(left))?;
                    match socket.recv_from(&mut buffer) {
                        // Late answers to earlier probes are skipped.
                        Ok((length, _)) if buffer.get(..length) == Some(&probe[..]) => {
                            answered = Some(sent_at.elapsed());
                            break;
                        }
                        Ok(_) => continue,
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) =>
                        {
                            break
                        }
                        // ICMP errors (unreachable) surface here: the probe is lost.
                        Err(_) => {
                            std::thread::sleep(left.min(Duration::from_millis(10)));
                            continue;
                        }
                    }
                }
                match answered {
                    Some(rtt) => {
                        writeln!(out, "echo seq={sequence} rtt_us={}", rtt.as_micros())?;
                        summary.rtts.push(rtt);
                    }
                    None => writeln!(out, "echo seq={sequence} lost timeout")?,
                }
            }
        }
        out.flush()?;
        std::thread::sleep(Duration::from_millis(args.interval_ms));
    }
    Ok(summary)
}

fn udp_ping(args: UdpPingArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let summary = ping(&args, &mut out)?;
    writeln!(
        out,
        "ping sent={} received={} median_us={}",
        summary.sent,
        summary.rtts.len(),
        summary.median().map_or(0, |m| m.as_micros())
    )?;
    Ok(())
}

/// Runs `fastshake netlab <args>` in `host` and returns its standard output lines as they come.
fn spawn_tool(
    testbed: &Testbed,
    host: Host,
    args: &[String],
) -> anyhow::Result<(fastshake_netlab::testbed::HostProcess, std::sync::mpsc::Receiver<String>)> {
    let program = std::env::current_exe()?;
    let mut full = vec!["netlab".to_string()];
    full.extend_from_slice(args);
    let mut process = testbed.exec_in(host, program, full)?;
    let stdout = process.child().stdout.take().context("tool output")?;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    Ok((process, receiver))
}

fn rtt(args: RttArgs) -> anyhow::Result<()> {
    println!("delay_ms  echoes  received  min_ms  median_ms  max_ms  overhead_ms(median-2*delay)  setup_ms  teardown_ms");
    for delay_ms in args.delays {
        let testbed = Testbed::create(testbed_config(delay_ms, 1, None)?)?;
        let server = format!("{}:7000", testbed.server_address());
        let (_echo, echo_lines) =
            spawn_tool(&testbed, Host::Server, &["udp-echo".into(), "--bind".into(), server.clone()])?;
        echo_lines.recv_timeout(Duration::from_secs(5)).context("the echo server did not start")?;
        let bind = format!("{}:0", testbed.client_address(ClientIface::Eth0).context("eth0")?);
        let (mut client, client_lines) = spawn_tool(
            &testbed,
            Host::Client,
            &[
                "udp-ping".into(),
                "--to".into(),
                server,
                "--bind".into(),
                bind,
                "--count".into(),
                args.count.to_string(),
                "--timeout-ms".into(),
                (4 * delay_ms + 1_000).to_string(),
            ],
        )?;
        let _ = client.child().wait();
        let mut rtts: Vec<f64> = client_lines
            .try_iter()
            .filter_map(|line| {
                line.split_whitespace()
                    .find_map(|field| field.strip_prefix("rtt_us="))
                    .and_then(|value| value.parse::<f64>().ok())
            })
            .map(|us| us / 1e3)
            .collect();
        rtts.sort_by(f64::total_cmp);
        let setup = testbed.creation_time();
        let teardown = testbed.teardown();
        let (Some(min), Some(max)) = (rtts.first().copied(), rtts.last().copied()) else {
            println!("{delay_ms:>8}  {:>6}  {:>8}  (no echo came back)", args.count, 0);
            continue;
        };
        let median = rtts.get(rtts.len() / 2).copied().unwrap_or(min);
        println!(
            "{delay_ms:>8}  {:>6}  {:>8}  {min:>6.2}  {median:>9.2}  {max:>6.2}  {:>27.2}  {:>8.0}  {:>11.0}",
            args.count,
            rtts.len(),
            median - 2.0 * delay_ms as f64,
            setup.as_secs_f64() * 1e3,
            teardown.as_secs_f64() * 1e3,
        );
    }
    Ok(())
}
