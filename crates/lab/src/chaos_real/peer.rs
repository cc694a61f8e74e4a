//! The load of the real-socket chaos soak: `fastshake netlab chaos-peer`, started by the runner in
//! the client namespace.
//!
//! It keeps `--clients` slots busy, each running one client after another on the real-socket DTLS
//! driver (`fastshake_net::dtls::DtlsClient`, its own UDP socket per client): handshake (the suite,
//! CID, tickets and resumption as [`ClientPlan`] says), `--records` sequence-numbered records with
//! their echoes checked, close_notify, and the next client. The server is the product binary
//! (`fastshake server --echo`), so every record comes back as it went.
//!
//! DTLS is unreliable, so a record unanswered for `--request-timeout-ms` is sent again; each
//! transmission is tagged `(seq, attempt)`, and an echo whose `(seq, attempt)` arrived before is a
//! record delivered twice by an engine (the relay's copies of a datagram must die in the DTLS
//! replay window, RFC 6347 §4.1.2.6), counted as a duplicate. A moving client rebinds its socket to
//! another address of the client host halfway through its records (a CID session, RFC 9146: the
//! server must follow it without a new handshake).
//!
//! Line protocol (runner → peer on standard input, peer → runner on standard output):
//! - peer: `ready`;
//! - runner: `wave SECONDS`: clients start for that long, then the running ones finish; the peer
//!   prints `client JSON` for each client as it ends, then `wave-done JSON`;
//! - runner: `stop` (or the end of standard input): the peer exits.

use super::{ClientOutcome, WaveDone};
use anyhow::Context as _;
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::Versions;
use fastshake_dtls::{CipherSuite, ClientConfig, ClientSession, Psk, Resumption, TrustAnchors};
use fastshake_net::dtls::{
    describe_datagram, ClientEvent, ClientOptions, DatagramTrace, Direction, DtlsClient,
};
use fastshake_net::mobility::MobilityMode;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long a client may take to send close_notify and end.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

/// `fastshake netlab chaos-peer`: the load of a real chaos soak (started by `fastshake netlab chaos`).
#[derive(Clone, Debug)]
pub struct PeerOptions {
    /// The server's address.
    pub server: SocketAddr,
    pub psk_identity: String,
    /// The PSK, hex.
    pub psk: String,
    /// Trust anchors for the server's certificate chain, PEM.
    pub ca: PathBuf,
    /// The name the server's certificate carries.
    pub server_name: String,
    /// The address every client binds first (port 0).
    pub stay: IpAddr,
    /// Addresses a moving client moves to, in turn.
    pub move_to: Vec<IpAddr>,
    /// Clients at once.
    pub clients: u32,
    /// Records each client sends.
    pub records: u32,
    /// Records outstanding at once per client.
    pub window: u32,
    /// A record unanswered this long is sent again.
    pub request_timeout_ms: u64,
    /// A record unanswered this long after its first transmission counts as lost.
    pub give_up_ms: u64,
    /// One client in this many moves (0: none).
    pub move_every: u32,
    /// Every this many-th client of a slot resumes the session of the one before (0: none).
    pub resume_every: u32,
    /// Trace every client's datagrams, and print the trace of each client that failed, lost a
    /// record or saw one twice on standard error.
    pub trace_failures: bool,
}

/// What one kind of client speaks: a DTLS 1.2 suite, or DTLS 1.3 with PSK or certificates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dtls12(CipherSuite),
    /// External PSK (psk_dhe_ke with x25519), TLS_AES_128_CCM_8_SHA256.
    Dtls13Psk,
    /// The server's ECDSA chain, x25519, TLS_AES_128_GCM_SHA256.
    Dtls13Ecdsa,
}

/// The kinds of client the soak mixes, one each (the server speaks them all on one port).
const KINDS: [Kind; 6] = [
    Kind::Dtls12(CipherSuite::PskWithAes128Ccm8),
    Kind::Dtls12(CipherSuite::PskWithAes128GcmSha256),
    Kind::Dtls12(CipherSuite::EcdheEcdsaWithAes128Ccm8),
    Kind::Dtls12(CipherSuite::EcdheEcdsaWithAes128GcmSha256),
    Kind::Dtls13Psk,
    Kind::Dtls13Ecdsa,
];

impl Kind {
    /// As the report names it.
    fn label(self) -> &'static str {
        match self {
            Kind::Dtls12(suite) => suite_label(suite),
            Kind::Dtls13Psk => "1.3 PSK CCM_8",
            Kind::Dtls13Ecdsa => "1.3 ECDSA GCM",
        }
    }
}

/// The kinds' labels, in [`KINDS`] order: the report's rows.
pub(super) fn kind_labels() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.label()).collect()
}

/// What one client does, from its number alone (so a run's mix depends on the slot count only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ClientPlan {
    /// Index into [`KINDS`].
    pub suite: usize,
    /// Offers a connection ID (RFC 9146) and return routability checks (RFC 9853).
    pub cid: bool,
    /// Offers session tickets (RFC 5077); without them a session resumes by its ID.
    pub tickets: bool,
    /// Rebinds to another address halfway through its records.
    pub moves: bool,
    /// Resumes the session of the slot's previous client (with that client's suite and tickets).
    pub resumes: bool,
}

impl ClientPlan {
    /// Client `generation` of slot `slot` out of `slots`: its number `k = generation * slots +
    /// slot` cycles through the kinds (1.2 suites, 1.3 PSK and certificates); CID alternates over blocks of four and tickets over blocks
    /// of eight shifted every 32, so that every suite meets every combination, moving or not; one
    /// in `move_every` moves, spread over the suites; every `resume_every`-th client of a slot
    /// resumes.
    pub fn for_client(slot: u32, generation: u64, slots: u32, move_every: u32, resume_every: u32) -> Self {
        let k = generation * u64::from(slots) + u64::from(slot);
        let moves = move_every > 0 && (k / 4 + k).is_multiple_of(u64::from(move_every));
        ClientPlan {
            suite: (k % KINDS.len() as u64) as usize,
            cid: moves || (k / 4).is_multiple_of(2),
            tickets: (k / 8 + k / 32).is_multiple_of(2),
            moves,
            resumes: resume_every > 0 && generation % u64::from(resume_every) == u64::from(resume_every) - 1,
        }
    }
}

/// What a slot keeps from one client to the next.
#[derive(Default)]
struct SlotState {
    generation: u64,
    /// The last session the slot's clients got, with the suite index and tickets flag it was made with.
    session: Option<(ClientSession, usize, bool)>,
}

/// What every client shares.
struct Shared {
    args: PeerOptions,
    /// By suite index, CID and tickets.
    configs: BTreeMap<(usize, bool, bool), Arc<ClientConfig>>,
    request_timeout: Duration,
}

impl Shared {
    fn new(args: PeerOptions) -> anyhow::Result<Shared> {
        let key = hex::decode(&args.psk).context("--psk is not hex")?;
        let pem = std::fs::read(&args.ca).with_context(|| format!("reading {}", args.ca.display()))?;
        let anchors = Arc::new(TrustAnchors::from_pem(&pem).context("no trust anchor in --ca")?);
        let mut configs = BTreeMap::new();
        for (index, kind) in KINDS.into_iter().enumerate() {
            for cid in [false, true] {
                for tickets in [false, true] {
                    let mode = if cid { MobilityMode::Cid } else { MobilityMode::Standard };
                    let base = ClientConfig {
                        psk: Some(Psk::new(args.psk_identity.as_bytes(), key.clone())),
                        trust_anchors: Some(Arc::clone(&anchors)),
                        server_name: Some(args.server_name.clone()),
                        enable_tickets: tickets,
                        mobility: mode.client_mobility(),
                        ..ClientConfig::default()
                    };
                    let config = match kind {
                        Kind::Dtls12(suite) => {
                            ClientConfig { versions: Versions::Dtls12, suites: vec![suite], ..base }
                        }
                        Kind::Dtls13Psk => ClientConfig {
                            versions: Versions::Dtls13,
                            trust_anchors: None,
                            suites13: vec![Suite13::Aes128Ccm8Sha256],
                            ..base
                        },
                        Kind::Dtls13Ecdsa => ClientConfig {
                            versions: Versions::Dtls13,
                            psk: None,
                            suites13: vec![Suite13::Aes128GcmSha256],
                            ..base
                        },
                    };
                    configs.insert((index, cid, tickets), Arc::new(config));
                }
            }
        }
        let request_timeout = Duration::from_millis(args.request_timeout_ms.max(1));
        Ok(Shared { args, configs, request_timeout })
    }

    fn config(&self, suite: usize, cid: bool, tickets: bool) -> anyhow::Result<Arc<ClientConfig>> {
        self.configs.get(&(suite, cid, tickets)).cloned().context("no such client configuration")
    }
}

/// A suite as the report names it.
pub(super) fn suite_label(suite: CipherSuite) -> &'static str {
    match suite {
        CipherSuite::PskWithAes128Ccm8 => "PSK CCM_8",
        CipherSuite::PskWithAes128GcmSha256 => "PSK GCM",
        CipherSuite::EcdheEcdsaWithAes128Ccm8 => "ECDSA CCM_8",
        CipherSuite::EcdheEcdsaWithAes128GcmSha256 => "ECDSA GCM",
        _ => "other",
    }
}

enum Input {
    Line(String),
    Hangup,
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub fn run_peer(args: PeerOptions) -> anyhow::Result<()> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    let outcome = runtime.block_on(peer(args));
    // The standard-input thread may still block in a read: do not wait for it.
    runtime.shutdown_background();
    outcome
}

async fn peer(args: PeerOptions) -> anyhow::Result<()> {
    anyhow::ensure!(args.clients > 0 && args.records > 0 && args.window > 0);
    let context = Arc::new(Shared::new(args)?);
    let (inputs, mut control) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if inputs.send(Input::Line(line.trim().to_owned())).is_err() {
                return;
            }
        }
        let _ = inputs.send(Input::Hangup);
    });
    let mut slots: Vec<SlotState> = (0..context.args.clients).map(|_| SlotState::default()).collect();
    say("ready");
    while let Some(Input::Line(line)) = control.recv().await {
        let mut words = line.split_whitespace();
        match (words.next(), words.next().and_then(|s| s.parse::<f64>().ok())) {
            (Some("wave"), Some(seconds)) => {
                let length = Duration::try_from_secs_f64(seconds).context("wave length")?;
                match wave(&context, &mut slots, length, &mut control).await {
                    Some(done) => say(&format!("wave-done {}", serde_json::to_string(&done)?)),
                    // Told to stop, or the runner is gone.
                    None => break,
                }
            }
            (Some("stop"), _) => break,
            _ => {}
        }
    }
    Ok(())
}

/// One wave: every slot starts clients until `length` has passed; returns once the last client
/// has ended, or `None` if the runner stopped the peer meanwhile.
async fn wave(
    context: &Arc<Shared>,
    slots: &mut Vec<SlotState>,
    length: Duration,
    control: &mut mpsc::UnboundedReceiver<Input>,
) -> Option<WaveDone> {
    let started = Instant::now();
    let deadline = started + length;
    let mut tasks = JoinSet::new();
    for (slot, state) in std::mem::take(slots).into_iter().enumerate() {
        let context = Arc::clone(context);
        tasks.spawn(run_slot(context, slot as u32, state, deadline));
    }
    let mut returned: Vec<(u32, SlotState)> = Vec::new();
    let mut clients = 0u64;
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(Ok((slot, state, count))) => {
                    returned.push((slot, state));
                    clients += count;
                }
                // A slot task panicked: its clients are reported already; the slot starts afresh.
                Some(Err(_)) => {}
                None => break,
            },
            input = control.recv() => match input {
                Some(Input::Line(line)) if line == "stop" => return None,
                Some(Input::Line(_)) => {}
                Some(Input::Hangup) | None => return None,
            },
        }
    }
    returned.sort_by_key(|(slot, _)| *slot);
    let mut by_slot = returned.into_iter().peekable();
    for slot in 0..context.args.clients {
        match by_slot.peek() {
            Some((s, _)) if *s == slot => {
                if let Some((_, state)) = by_slot.next() {
                    slots.push(state);
                }
            }
            _ => slots.push(SlotState::default()),
        }
    }
    Some(WaveDone { clients, seconds: started.elapsed().as_secs_f64() })
}

/// One slot: clients one after another until `deadline`; each prints its outcome as it ends.
async fn run_slot(
    context: Arc<Shared>,
    slot: u32,
    mut state: SlotState,
    deadline: Instant,
) -> (u32, SlotState, u64) {
    let mut count = 0;
    while Instant::now() < deadline {
        let args = &context.args;
        let plan =
            ClientPlan::for_client(slot, state.generation, args.clients, args.move_every, args.resume_every);
        let id = state.generation * u64::from(args.clients) + u64::from(slot);
        state.generation += 1;
        let outcome = run_client(&context, id, plan, &mut state).await;
        count += 1;
        match serde_json::to_string(&outcome) {
            Ok(json) => say(&format!("client {json}")),
            Err(error) => say(&format!("client-error {error}")),
        }
    }
    (slot, state, count)
}

/// The request for transmission `attempt` of record `seq`: its tags first, then padding so records
/// differ in size (tens to hundreds of bytes).
fn request(id: u64, seq: u32, attempt: u32) -> Vec<u8> {
    let mut text = format!("{id} {seq} {attempt} ").into_bytes();
    let padding = 16 + (seq as usize * 37 + attempt as usize * 11) % 480;
    text.resize(text.len() + padding, b'.');
    text
}

/// The tags of an echo.
fn parse_echo(data: &[u8]) -> Option<(u64, u32, u32)> {
    let text = std::str::from_utf8(data.get(..data.len().min(64))?).ok()?;
    let mut words = text.split(' ');
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

async fn run_client(context: &Shared, id: u64, plan: ClientPlan, slot: &mut SlotState) -> ClientOutcome {
    let args = &context.args;
    // A resuming client takes the session with the suite and tickets it was made with.
    let resumed_from = if plan.resumes { slot.session.clone() } else { None };
    let (suite, tickets, session) = match resumed_from {
        Some((session, suite, tickets)) => (suite, tickets, Some(session)),
        None => (plan.suite, plan.tickets, None),
    };
    let mut outcome = ClientOutcome {
        id,
        suite: KINDS[suite].label().to_owned(),
        cid: plan.cid,
        tickets,
        resumption_offered: session.is_some(),
        moves: plan.moves && !args.move_to.is_empty(),
        ..ClientOutcome::default()
    };
    let config = match context.config(suite, plan.cid, tickets) {
        Ok(config) => config,
        Err(error) => {
            outcome.handshake_error = Some(error.to_string());
            return outcome;
        }
    };
    let tracer = args.trace_failures.then(Tracer::default);
    let mut options = ClientOptions {
        bind: Some(SocketAddr::new(args.stay, 0)),
        session,
        trace: tracer.as_ref().map(Tracer::trace),
        ..ClientOptions::default()
    };
    if let Some(tracer) = &tracer {
        // The trace names the local port, so the server's trace can be matched with it; another
        // client may take the port between the probe and the bind, then it binds any.
        if let Ok(probe) = std::net::UdpSocket::bind(SocketAddr::new(args.stay, 0)) {
            options.bind = probe.local_addr().ok();
        }
        tracer.note(&format!("client {id} {plan:?}, suite {}, bound to {:?}", outcome.suite, options.bind));
    }
    let started = Instant::now();
    let mut client = match DtlsClient::connect(args.server, Arc::clone(&config), options.clone()).await {
        Ok(client) => client,
        Err(fastshake_net::dtls::DriverError::Io(error))
            if error.kind() == std::io::ErrorKind::AddrInUse && tracer.is_some() =>
        {
            options.bind = Some(SocketAddr::new(args.stay, 0));
            match DtlsClient::connect(args.server, config, options).await {
                Ok(client) => client,
                Err(error) => return handshake_failed(outcome, started, error, tracer.as_ref()),
            }
        }
        Err(error) => return handshake_failed(outcome, started, error, tracer.as_ref()),
    };
    if let Some(tracer) = &tracer {
        tracer.note(&format!("client {id}: handshake done, local {}", client.local_addr()));
    }
    outcome.handshake_ms = Some(started.elapsed().as_secs_f64() * 1e3);
    let summary = client.summary();
    outcome.handshake_ok = true;
    outcome.flights_resent = summary.retransmissions;
    outcome.peer_resent = summary.peer_retransmissions;
    outcome.resumed = match summary.resumption {
        Some(Resumption::Ticket) => Some("ticket".to_owned()),
        Some(Resumption::SessionId) => Some("session ID".to_owned()),
        None if summary.resumed => Some("resumed".to_owned()),
        None => None,
    };
    if let Some(session) = summary.session.clone() {
        slot.session = Some((session, suite, tickets));
    }
    // A DTLS 1.3 ticket comes after the handshake, during the exchange.
    if let Some(ticket) = exchange(context, id, &mut client, &mut outcome).await {
        slot.session = Some((ticket, suite, tickets));
    }
    outcome.reconnections = client.reconnections();
    outcome.closed_cleanly = matches!(tokio::time::timeout(CLOSE_BOUND, client.close()).await, Ok(Ok(_)));
    if let Some(tracer) = &tracer {
        if outcome.session_error.is_some()
            || outcome.lost > 0
            || outcome.duplicates > 0
            || outcome.foreign > 0
        {
            tracer.dump(&format!("client {id} {outcome:?}"));
        }
    }
    outcome
}

fn handshake_failed(
    mut outcome: ClientOutcome,
    started: Instant,
    error: fastshake_net::dtls::DriverError,
    tracer: Option<&Tracer>,
) -> ClientOutcome {
    outcome.handshake_error = Some(error.to_string());
    outcome.handshake_ms = Some(started.elapsed().as_secs_f64() * 1e3);
    if let Some(tracer) = tracer {
        tracer.dump(&format!("client {} handshake failed: {error}", outcome.id));
    }
    outcome
}

/// Most trace lines a client keeps (the first ones: a handshake that fails is at the start).
const TRACE_LINES: usize = 2_000;

/// One client's datagrams, described with the Unix time (ms) so they can be matched with the
/// server's trace.
#[derive(Clone, Default)]
struct Tracer {
    lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Tracer {
    fn note(&self, text: &str) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() < TRACE_LINES {
            lines.push(format!("{} {text}", unix_ms()));
        }
    }

    fn trace(&self) -> DatagramTrace {
        let tracer = self.clone();
        Arc::new(move |direction: Direction, peer: SocketAddr, datagram: &[u8]| {
            let arrow = match direction {
                Direction::Sent => "->",
                Direction::Received => "<-",
            };
            tracer.note(&format!(
                "{arrow} {peer} {} B: {}",
                datagram.len(),
                describe_datagram(datagram).join(", ")
            ));
        })
    }

    fn dump(&self, headline: &str) {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "chaos-peer trace: {headline}");
        for line in lines.iter() {
            let _ = writeln!(err, "chaos-peer trace:   {line}");
        }
    }
}

/// Unix time in ms with three decimals, as the runner stamps the server's trace.
pub(super) fn unix_ms() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:03}", now.as_secs(), now.subsec_millis())
}

/// A record in flight.
struct Pending {
    attempt: u32,
    first_sent: Instant,
    due: Instant,
}

/// How long to wait for the echo of transmission `attempt`: the request timeout, then twice and
/// four times as long (a session held up by a lost handshake flight need not be flooded).
fn wait_after(timeout: Duration, attempt: u32) -> Duration {
    timeout * (1u32 << attempt.min(2))
}

/// Sends the client's records and checks their echoes, moving halfway if the plan says so.
/// Sends the client's records and checks their echoes; the last DTLS 1.3 ticket it was given.
async fn exchange(
    context: &Shared,
    id: u64,
    client: &mut DtlsClient,
    outcome: &mut ClientOutcome,
) -> Option<ClientSession> {
    let mut ticket = None;
    let args = &context.args;
    let timeout = context.request_timeout;
    let give_up = Duration::from_millis(args.give_up_ms);
    let mut pending: BTreeMap<u32, Pending> = BTreeMap::new();
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    let mut next_seq = 0u32;
    let mut finished = 0u32;
    loop {
        while pending.len() < args.window as usize && next_seq < args.records {
            if client.send(request(id, next_seq, 0)).is_err() {
                outcome.session_error = Some("the client driver stopped".into());
                return ticket;
            }
            let now = Instant::now();
            pending.insert(next_seq, Pending { attempt: 0, first_sent: now, due: now + timeout });
            outcome.records += 1;
            outcome.transmissions += 1;
            next_seq += 1;
        }
        if pending.is_empty() && next_seq == args.records {
            return ticket;
        }
        if outcome.moves && !outcome.moved && finished >= args.records / 2 {
            let to = args.move_to[(id as usize / 4) % args.move_to.len()];
            match client.rebind(SocketAddr::new(to, 0)).await {
                Ok(_) => outcome.moved = true,
                Err(error) => {
                    outcome.session_error = Some(format!("moving to {to}: {error}"));
                    return ticket;
                }
            }
        }
        let next_due = pending.values().map(|p| p.due).min().unwrap_or_else(|| Instant::now() + timeout);
        tokio::select! {
            event = client.recv() => match event {
                Some(ClientEvent::Data(data)) => {
                    let Some((echo_id, seq, attempt)) = parse_echo(&data) else {
                        outcome.foreign += 1;
                        continue;
                    };
                    if echo_id != id {
                        outcome.foreign += 1;
                    } else if !seen.insert((seq, attempt)) {
                        outcome.duplicates += 1;
                    } else if let Some(answered) = pending.remove(&seq) {
                        let waited = answered.first_sent.elapsed().as_secs_f64() * 1e3;
                        outcome.slowest_echo_ms = outcome.slowest_echo_ms.max(waited);
                        outcome.echoed += 1;
                        finished += 1;
                        if outcome.moved {
                            outcome.echoed_after_move += 1;
                        }
                    } else {
                        // An earlier attempt's echo after a later one's, or after the record was given up.
                        outcome.late_echoes += 1;
                    }
                }
                Some(ClientEvent::SendFailed(_)) => outcome.send_failures += 1,
                Some(ClientEvent::PathChanged(_)) | Some(ClientEvent::Reconnected(_)) => outcome.unexpected_events += 1,
                Some(ClientEvent::SessionTicket(session)) => ticket = Some(session),
                Some(ClientEvent::Closed) => {
                    outcome.session_error = Some("closed by the server".into());
                    return ticket;
                }
                Some(ClientEvent::Failed(error)) => {
                    outcome.session_error = Some(error.to_string());
                    return ticket;
                }
                None => {
                    outcome.session_error = Some("the client driver stopped".into());
                    return ticket;
                }
            },
            () = tokio::time::sleep_until(next_due) => {
                let now = Instant::now();
                let due: Vec<u32> = pending.iter().filter(|(_, p)| p.due <= now).map(|(seq, _)| *seq).collect();
                for seq in due {
                    let Some(entry) = pending.get_mut(&seq) else { continue };
                    if now >= entry.first_sent + give_up {
                        pending.remove(&seq);
                        outcome.lost += 1;
                        finished += 1;
                        continue;
                    }
                    entry.attempt += 1;
                    entry.due = now + wait_after(timeout, entry.attempt);
                    outcome.most_attempts = outcome.most_attempts.max(entry.attempt + 1);
                    outcome.transmissions += 1;
                    if client.send(request(id, seq, entry.attempt)).is_err() {
                        outcome.session_error = Some("the client driver stopped".into());
                        return ticket;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_carry_their_tags() {
        let data = request(1234, 17, 3);
        assert_eq!(parse_echo(&data), Some((1234, 17, 3)));
        assert!(data.len() > 16);
        assert_ne!(request(1, 0, 0).len(), request(1, 1, 0).len());
        assert_eq!(parse_echo(b"garbage"), None);
    }

    #[test]
    fn resends_back_off_to_four_times_the_request_timeout() {
        let t = Duration::from_millis(100);
        let waits: Vec<u128> = (0..5).map(|a| wait_after(t, a).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 400, 400, 400]);
    }

    #[test]
    fn the_mix_covers_every_suite_with_and_without_cid_tickets_and_moves() {
        let mut seen = HashSet::new();
        let mut moves = 0;
        let mut resumes = 0;
        let slots = 50;
        for generation in 0..8 {
            for slot in 0..slots {
                let plan = ClientPlan::for_client(slot, generation, slots, 4, 3);
                if plan.moves {
                    assert!(plan.cid, "a moving client needs a CID");
                    seen.insert((plan.suite + 10, true, plan.tickets));
                    moves += 1;
                } else {
                    seen.insert((plan.suite, plan.cid, plan.tickets));
                }
                resumes += u32::from(plan.resumes);
            }
        }
        for suite in 0..KINDS.len() {
            for cid in [false, true] {
                for tickets in [false, true] {
                    assert!(
                        seen.contains(&(suite, cid, tickets)),
                        "suite {suite} cid {cid} tickets {tickets}"
                    );
                }
            }
            for tickets in [false, true] {
                assert!(
                    seen.contains(&(suite + 10, true, tickets)),
                    "no move with suite {suite}, tickets {tickets}"
                );
            }
        }
        assert_eq!(moves, 400 / 4);
        // Generations 2 and 5 of every slot.
        assert_eq!(resumes, 2 * slots);
        assert!(!ClientPlan::for_client(0, 0, slots, 0, 0).moves);
    }
}
