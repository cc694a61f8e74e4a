//! Time to first byte of a WebRTC data channel over the simulator's 2 Mbit/s link (seed 004's
//! path), per setup: ICE-lite or full, DTLS 1.2 or 1.3 (with or without the post-quantum
//! hybrid share), SCTP regular, seed 004's alternative handshake inside DTLS, or SNAP.
//!
//! Our offerer (`fastshake_webrtc::client::Client`) and answerer (`server::Server`) run as
//! simulator apps on two hosts joined by one wired link; the offer and answer are exchanged out
//! of band before the clock starts, as signalling is. The clock starts when the offerer takes
//! the answer (its first connectivity check leaves then) and stops when the first byte it sent
//! on its channel comes back echoed. Virtual time: serialisation and delay are modelled, CPU is
//! not, so the figures count round trips and bytes, not processors.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_dtls::{NamedGroup, Versions, WallClock};
use fastshake_pki::generate::self_signed_p256;
use fastshake_sim::apps::App;
use fastshake_sim::link::LinkConfig;
use fastshake_sim::{Role, Simulator};
use fastshake_webrtc::client::{Client, ClientConfig, Nomination, SctpSetup};
use fastshake_webrtc::dcep::ChannelType;
use fastshake_webrtc::ice::{Credentials, IceMode};
use fastshake_webrtc::peer::PeerEvent;
use fastshake_webrtc::server::{Server, ServerConfig, ANSWER_RANDOM_LEN};

/// The paper's link rate.
const RATE_BPS: u64 = 2_000_000;
const UNIX: u64 = 1_800_000_000;
const REQUEST: &[u8] = b"the first message of a data channel";
/// Chromium nominates one check interval after its first check succeeded (RFC 8445 regular
/// nomination), about 48 ms on this machine's Chromium 156.
const BROWSER_NOMINATION_DELAY: Duration = Duration::from_millis(48);
const CLIENT: &str = "10.0.0.1:50000";
const SERVER: &str = "10.0.0.2:3478";

/// One way of opening a data channel.
#[derive(Clone, Copy)]
struct Setup {
    label: &'static str,
    ice: IceMode,
    nomination: Nomination,
    versions: Versions,
    hybrid: bool,
    sctp: SctpSetup,
}

const fn setup(
    label: &'static str,
    ice: IceMode,
    nomination: Nomination,
    versions: Versions,
    hybrid: bool,
    sctp: SctpSetup,
) -> Setup {
    Setup { label, ice, nomination, versions, hybrid, sctp }
}

const AGGRESSIVE: Nomination = Nomination::Aggressive;
const BROWSER: Nomination = Nomination::Regular { delay: BROWSER_NOMINATION_DELAY };

const SETUPS: [Setup; 9] = [
    setup(
        "lite, 1.3 hybrid, SCTP regular",
        IceMode::Lite,
        AGGRESSIVE,
        Versions::Dtls13,
        true,
        SctpSetup::Regular,
    ),
    setup(
        "lite, 1.3 hybrid, SCTP alternative",
        IceMode::Lite,
        AGGRESSIVE,
        Versions::Dtls13,
        true,
        SctpSetup::Alternative,
    ),
    setup("lite, 1.3 hybrid, SNAP", IceMode::Lite, AGGRESSIVE, Versions::Dtls13, true, SctpSetup::Snap),
    setup("lite, 1.3 x25519, SNAP", IceMode::Lite, AGGRESSIVE, Versions::Dtls13, false, SctpSetup::Snap),
    setup("lite, 1.2, SCTP regular", IceMode::Lite, AGGRESSIVE, Versions::Dtls12, false, SctpSetup::Regular),
    setup("lite, 1.2, SNAP", IceMode::Lite, AGGRESSIVE, Versions::Dtls12, false, SctpSetup::Snap),
    setup(
        "browser-like nomination, lite, 1.3 hybrid, SNAP",
        IceMode::Lite,
        BROWSER,
        Versions::Dtls13,
        true,
        SctpSetup::Snap,
    ),
    setup(
        "browser-like nomination, full, 1.3 hybrid, SNAP",
        IceMode::Full,
        BROWSER,
        Versions::Dtls13,
        true,
        SctpSetup::Snap,
    ),
    setup(
        "browser-like nomination, full, 1.3 hybrid, SCTP regular",
        IceMode::Full,
        BROWSER,
        Versions::Dtls13,
        true,
        SctpSetup::Regular,
    ),
];

/// What one session measured.
#[derive(Clone, Debug, Default)]
struct Outcome {
    ttfb: Option<Duration>,
    /// Datagrams and UDP payload bytes each way until the echo arrived.
    to_server: (usize, usize),
    to_client: (usize, usize),
    dtls: Option<String>,
    sctp: Option<String>,
    failed: Option<String>,
}

impl Outcome {
    /// Counts a datagram `way` (to the server or to the client) until the echo arrived.
    fn count(&mut self, way: fn(&mut Outcome) -> &mut (usize, usize), t: &Transmit) {
        if self.ttfb.is_none() {
            let (datagrams, bytes) = way(self);
            *datagrams += 1;
            *bytes += t.payload.len();
        }
    }
}

/// The offerer: takes the answer at `start`, opens one reliable channel, sends on it once
/// acknowledged, and times the echo.
struct Offerer {
    client: Client,
    answer: Option<String>,
    start: Instant,
    outcome: Rc<RefCell<Outcome>>,
}

impl Offerer {
    fn after_engine(&mut self, now: Instant) {
        while let Some(event) = self.client.poll_event() {
            let mut outcome = self.outcome.borrow_mut();
            match event {
                PeerEvent::DtlsConnected(summary) => {
                    let group = summary.group.map(|g| format!(" {g:?}")).unwrap_or_default();
                    outcome.dtls = Some(format!("{:?}{group}", summary.version));
                }
                PeerEvent::SctpConnected { handshake, .. } => outcome.sctp = Some(format!("{handshake:?}")),
                PeerEvent::Message { data, .. } if data == REQUEST && outcome.ttfb.is_none() => {
                    outcome.ttfb = Some(now - self.start);
                }
                PeerEvent::Closed(why) => outcome.failed = Some(why),
                _ => {}
            }
        }
    }
}

impl SansIo for Offerer {
    fn handle_datagram(&mut self, now: Instant, _local: SocketAddr, remote: SocketAddr, d: &mut [u8]) {
        self.client.handle_datagram(now, remote, d);
        self.after_engine(now);
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        let t = self.client.poll_transmit()?;
        self.outcome.borrow_mut().count(|o| &mut o.to_server, &t);
        Some(t)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let start = self.answer.as_ref().map(|_| self.start);
        [start, self.client.poll_timeout()].into_iter().flatten().min()
    }
    fn handle_timeout(&mut self, now: Instant) {
        if let Some(answer) = self.answer.take() {
            if let Err(e) = self.client.accept_answer(now, &answer) {
                self.outcome.borrow_mut().failed = Some(format!("answer: {e}"));
            }
            // The message follows the OPEN at once (RFC 8831 §6.6), riding with the SCTP handshake.
            let sent = self
                .client
                .open_channel(now, "first-byte", ChannelType::RELIABLE)
                .and_then(|stream| self.client.send(now, stream, REQUEST, true));
            if let Err(e) = sent {
                self.outcome.borrow_mut().failed = Some(format!("open and send: {e}"));
            }
        } else {
            self.client.handle_timeout(now);
        }
        self.after_engine(now);
    }
}

impl App for Offerer {}

/// The answerer: echoes every message.
struct Answerer {
    server: Server,
    outcome: Rc<RefCell<Outcome>>,
}

impl Answerer {
    fn after_engine(&mut self, now: Instant) {
        while let Some((id, event)) = self.server.poll_event() {
            if let PeerEvent::Message { stream, data, binary } = event {
                let _ = self.server.send(now, id, stream, &data, binary);
            }
        }
    }
}

impl SansIo for Answerer {
    fn handle_datagram(&mut self, now: Instant, _local: SocketAddr, remote: SocketAddr, d: &mut [u8]) {
        self.server.handle_datagram(now, remote, d);
        self.after_engine(now);
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        let t = self.server.poll_transmit()?;
        self.outcome.borrow_mut().count(|o| &mut o.to_client, &t);
        Some(t)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.server.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.server.handle_timeout(now);
        self.after_engine(now);
    }
}

impl App for Answerer {}

fn measure(setup: Setup, delay: Duration) -> anyhow::Result<Outcome> {
    let clock = WallClock { at: Instant::ZERO, unix_secs: UNIX };
    let client_addr: SocketAddr = CLIENT.parse()?;
    let server_addr: SocketAddr = SERVER.parse()?;
    let groups = if setup.hybrid {
        NamedGroup::WITH_HYBRID.to_vec()
    } else {
        vec![NamedGroup::X25519, NamedGroup::Secp256r1]
    };
    let (server_key, server_fingerprint) = self_signed_p256(UNIX, 30)?;
    let mut server = Server::new(ServerConfig {
        certified_key: Arc::new(server_key),
        fingerprint: server_fingerprint,
        addresses: vec![server_addr],
        versions: Versions::Both,
        groups: NamedGroup::WITH_HYBRID.to_vec(),
        wall_clock: clock,
        max_sessions: 1,
        ice_mode: setup.ice,
        dtls_in_stun: ServerConfig::DTLS_IN_STUN_DEFAULT,
    });
    let (client_key, client_fingerprint) = self_signed_p256(UNIX, 30)?;
    let mut client = Client::new(
        ClientConfig {
            credentials: Credentials::from_random(&[3; Credentials::RANDOM_LEN]),
            certified_key: Arc::new(client_key),
            fingerprint: client_fingerprint,
            versions: setup.versions,
            groups,
            wall_clock: clock,
            tiebreaker: 42,
            nomination: setup.nomination,
            sctp_setup: setup.sctp,
        },
        client_addr,
        [7; 32],
    );
    let offer = client.offer(1);
    let (_, answer) = server.answer(&offer, server_addr, &[9; ANSWER_RANDOM_LEN])?;

    let mut sim = Simulator::new(2018);
    let c = sim.add_node("client", Role::Host);
    let s = sim.add_node("server", Role::Host);
    let c0 = sim.add_interface(c, "eth0", "10.0.0.1".parse()?)?;
    let s0 = sim.add_interface(s, "eth0", "10.0.0.2".parse()?)?;
    let link =
        LinkConfig { delay_ms: delay.as_secs_f64() * 1e3, rate_bps: Some(RATE_BPS), ..LinkConfig::default() };
    sim.connect("path", c0, s0, link)?;
    let outcome = Rc::new(RefCell::new(Outcome::default()));
    sim.add_app(
        s,
        "webrtc-server",
        server_addr.port(),
        Box::new(Answerer { server, outcome: outcome.clone() }),
    )?;
    let start = Instant::from_millis(10);
    let offerer = Offerer { client, answer: Some(answer), start, outcome: outcome.clone() };
    sim.add_app(c, "webrtc-client", client_addr.port(), Box::new(offerer))?;
    // In steps, so a session stops being simulated once it measured (consent checks go on).
    let mut until = start;
    while outcome.borrow().ttfb.is_none()
        && outcome.borrow().failed.is_none()
        && until < start + Duration::from_secs(30)
    {
        until += Duration::from_millis(50);
        sim.run_until(until);
    }
    let result = outcome.borrow().clone();
    Ok(result)
}

/// Runs every setup at every delay; prints a table and returns its rows.
pub fn run(delays_ms: &[u64]) -> anyhow::Result<serde_json::Value> {
    println!(
        "== WebRTC data channel, first check to first byte echoed: {} Mbit/s each way, fastshake offerer and answerer in fastshake-sim ==",
        RATE_BPS / 1_000_000
    );
    println!(
        "{:<56} {:>8} {:>9} {:>6} {:>12} {:>12}  DTLS / SCTP",
        "setup", "delay ms", "TTFB ms", "RTTs", "to server", "to client"
    );
    let mut rows = Vec::new();
    for &delay_ms in delays_ms {
        let delay = Duration::from_millis(delay_ms);
        let rtt = 2.0 * delay.as_secs_f64();
        for setup in SETUPS {
            let outcome = match measure(setup, delay) {
                Ok(o) => o,
                Err(e) => Outcome { failed: Some(format!("{e:#}")), ..Outcome::default() },
            };
            let ttfb_ms = outcome.ttfb.map(|t| t.as_secs_f64() * 1e3);
            let round_trips = outcome.ttfb.map(|t| t.as_secs_f64() / rtt);
            match (ttfb_ms, round_trips) {
                (Some(ms), Some(rtts)) => println!(
                    "{:<56} {:>8} {:>9.1} {:>6.2} {:>5} dg {:>5} B {:>3} dg {:>6} B  {} / {}",
                    setup.label,
                    delay_ms,
                    ms,
                    rtts,
                    outcome.to_server.0,
                    outcome.to_server.1,
                    outcome.to_client.0,
                    outcome.to_client.1,
                    outcome.dtls.as_deref().unwrap_or("?"),
                    outcome.sctp.as_deref().unwrap_or("?"),
                ),
                _ => println!(
                    "{:<56} {:>8}  no first byte: {}",
                    setup.label,
                    delay_ms,
                    outcome.failed.as_deref().unwrap_or("nothing within 30 s")
                ),
            }
            rows.push(serde_json::json!({
                "setup": setup.label,
                "delay_ms": delay_ms,
                "ttfb_ms": ttfb_ms,
                "round_trips": round_trips,
                "datagrams_to_server": outcome.to_server.0,
                "bytes_to_server": outcome.to_server.1,
                "datagrams_to_client": outcome.to_client.0,
                "bytes_to_client": outcome.to_client.1,
                "dtls": outcome.dtls,
                "sctp": outcome.sctp,
                "error": outcome.failed,
            }));
        }
    }
    println!(
        "RTTs = TTFB / (2 x delay). The offerer sends right behind its channel's OPEN (RFC 8831 §6.6); \"browser-like\" nominates {} ms after its first check succeeds, as Chromium does.",
        BROWSER_NOMINATION_DELAY.as_millis()
    );
    Ok(serde_json::json!({ "rate_bps": RATE_BPS, "rows": rows }))
}
