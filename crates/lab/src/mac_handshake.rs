//! One real DTLS handshake between the ends of a chain of duty-cycled MAC hops (seed 002's
//! setting): the engines' own datagrams, their own retransmission timers, every datagram carried
//! hop by hop through a MAC model of the simulator, the client's radio energy booked on the way.
//!
//! The caller builds both ends, so the same path serves a full handshake, a resumption against
//! the same server, or a series of handshakes (experiments E2 and E3).

use fastshake_dtls::Versions;
use fastshake_dtls::{
    CipherSuite, ClientConfig, ClientSession, Connection, Endpoint, Event, HandshakeSummary, Instant,
    ServerConfig,
};
use fastshake_sim::mac::sixlowpan::UdpDatagram;
use fastshake_sim::mac::{build, FrameKind, MacConfig};
use fastshake_sim::radio::RadioLedger;
use serde::Serialize;
use std::net::SocketAddr;
use std::time::Duration;

/// Bytes of 6LoWPAN header (IPHC with UDP next-header compression) in front of a DTLS datagram
/// between the chain's ends over `hops` hops: what the frames carry instead of 48 bytes of
/// IPv6 and UDP.
pub fn lowpan_header_len(hops: usize) -> usize {
    let datagram = UdpDatagram::between(0, hops, hops, server_addr().port(), Vec::new());
    fastshake_sim::mac::sixlowpan::compressed_header_len(&datagram, 0, 1)
}

/// The client's address, the first node of the chain.
pub fn client_addr() -> SocketAddr {
    SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 2], 5684))
}

/// The server's address, the last node of the chain.
pub fn server_addr() -> SocketAddr {
    SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], 5684))
}

/// tinyDTLS's settings in seed 002: TLS_PSK_WITH_AES_128_CCM_8, a 2 s initial retransmission
/// timeout, and no handshake deadline short enough to cut a slow schedule off.
pub fn tinydtls_psk() -> (ClientConfig, ServerConfig) {
    let (identity, key) = (b"Client_identity".as_slice(), [0x11u8; 16]);
    let mut client = ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(identity, key) };
    client.suites = vec![CipherSuite::PskWithAes128Ccm8];
    client.initial_retransmit = Duration::from_secs(2);
    client.handshake_timeout = Duration::from_secs(3600);
    let mut server = ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk(identity, key) };
    server.suites = vec![CipherSuite::PskWithAes128Ccm8];
    server.initial_retransmit = Duration::from_secs(2);
    server.handshake_timeout = Duration::from_secs(3600);
    (client, server)
}

/// What one handshake over the MAC path cost.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MacHandshake {
    pub completed: bool,
    /// Why the handshake failed, if an end gave up (e.g. its retransmission limit).
    pub failure: Option<String>,
    /// From `start` until both ends reported the session established, seconds.
    pub duration_s: f64,
    /// When both ends were done (or the last instant simulated).
    #[serde(skip)]
    pub end: Option<Instant>,
    pub datagrams: usize,
    pub dtls_bytes: usize,
    /// Data frames put on the air (retries included).
    pub data_frames: usize,
    /// The client's radio energy (all MAC activity of node 0, idle listening included).
    pub client_energy_mj: f64,
    /// Flights the client and the server resent.
    pub client_retransmissions: u32,
    pub server_retransmissions: u32,
    /// Flights resent because a retransmission timer fired although nothing (in either
    /// direction) had been lost since that side last sent: the timer fired while the flight or
    /// its answer was still crossing the schedule.
    pub spurious_retransmissions: u32,
    /// Datagrams the MAC lost for good on some hop (the DTLS timer has to recover them).
    pub lost_datagrams: usize,
    /// Seconds the client's radio was on (transmitting, receiving or listening).
    pub client_radio_on_s: f64,
    /// The client's summary (its `session` resumes later).
    #[serde(skip)]
    pub client_summary: Option<HandshakeSummary>,
    /// The server's summary of the new session (what it took from its caches).
    #[serde(skip)]
    pub server_summary: Option<HandshakeSummary>,
    /// From `start` until the server had the client's first application record (0-RTT early
    /// data, or a record the client sent once the session was up), seconds.
    pub first_data_at_server_s: Option<f64>,
    /// The DTLS 1.3 tickets the client received (they come after the handshake; see
    /// [`Until::Ticket`]).
    #[serde(skip)]
    pub tickets: Vec<ClientSession>,
}

/// When a run over the MAC path ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// Both ends reported the session established.
    Established,
    /// Established, and then the client holds a DTLS 1.3 ticket (a NewSessionTicket follows the
    /// handshake, RFC 8446 §4.6.1) and its ACK has reached the server, for a resumption after
    /// it. The figures are the handshake's.
    Ticket,
}

/// What a run's randomness is drawn from: the network (wake-up phases, cell placements) and the
/// traffic on it (losses, contention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSeeds {
    pub network: u64,
    pub traffic: u64,
}

impl RunSeeds {
    /// Network and traffic from one seed.
    pub fn one(seed: u64) -> Self {
        RunSeeds { network: seed, traffic: seed }
    }
}

/// Runs `client` (created at `start`, addressed to [`server_addr`]) against `server` over `hops`
/// hops of `mac`, schedules and losses drawn from `seed`, for at most an hour of simulated time.
/// The server may already hold sessions; only the new one is waited for.
pub fn run(
    mac: &MacConfig,
    hops: usize,
    seed: u64,
    start: Instant,
    client: &mut Connection,
    server: &mut Endpoint,
) -> anyhow::Result<MacHandshake> {
    run_seeded(mac, hops, RunSeeds::one(seed), start, client, server)
}

/// [`run`] with the network and its traffic drawn from separate seeds: a later handshake of the
/// same client crosses the same network (its phases and cells stay) with other losses.
pub fn run_seeded(
    mac: &MacConfig,
    hops: usize,
    seeds: RunSeeds,
    start: Instant,
    client: &mut Connection,
    server: &mut Endpoint,
) -> anyhow::Result<MacHandshake> {
    run_until(mac, hops, seeds, start, client, server, Until::Established)
}

/// [`run_seeded`], ending as `until` says.
pub fn run_until(
    mac: &MacConfig,
    hops: usize,
    seeds: RunSeeds,
    start: Instant,
    client: &mut Connection,
    server: &mut Endpoint,
    until: Until,
) -> anyhow::Result<MacHandshake> {
    let mut rng = fastshake_sim::mac::sequence::seeded_rng(seeds.network);
    let chain: Vec<usize> = (0..=hops).collect();
    let links: Vec<(usize, usize)> = chain.windows(2).map(|w| (w[0], w[1])).collect();
    let mut mac = build(mac, &chain, &links, &mut rng)?;
    if seeds.traffic != seeds.network {
        rng = fastshake_sim::mac::sequence::seeded_rng(seeds.traffic);
    }
    let mut ledger = RadioLedger::default();
    let (client_addr, server_addr) = (client_addr(), server_addr());
    // Datagrams on their way: (arrival, order, towards the server, DTLS bytes).
    let mut in_flight: Vec<(Instant, usize, bool, Vec<u8>)> = Vec::new();
    let mut order = 0;
    // Which side's timer just fired, when each side last sent (client, server) and when
    // datagrams were lost: a timer retransmission with no loss since that side last sent is
    // spurious.
    let mut timer_fired: [bool; 2] = [false, false];
    let mut last_sent: [Instant; 2] = [start, start];
    let mut losses: Vec<Instant> = Vec::new();
    let mut now = start;
    let limit = start + Duration::from_secs(3600);
    let mut run = MacHandshake::default();
    let (mut client_done, mut server_done) = (None, None);
    let mut new_session = None;
    for _ in 0..100_000 {
        let mut outgoing = Vec::new();
        while let Some(t) = client.poll_transmit(now) {
            outgoing.push((true, t.payload));
        }
        while let Some(t) = server.poll_transmit(now) {
            outgoing.push((false, t.payload));
        }
        for side in 0..2 {
            let sent = outgoing.iter().any(|(to_server, _)| *to_server == (side == 0));
            if sent && timer_fired[side] && !losses.iter().any(|&t| t > last_sent[side] && t <= now) {
                run.spurious_retransmissions += 1;
            }
            if sent {
                last_sent[side] = now;
            }
        }
        timer_fired = [false, false];
        for (to_server, payload) in outgoing {
            run.datagrams += 1;
            run.dtls_bytes += payload.len();
            // On the radio the DTLS datagram travels in UDP over IPv6 between the chain's ends,
            // its headers compressed by 6LoWPAN (link-local over one hop, mesh addresses beyond).
            let (src, dst) = if to_server { (0, hops) } else { (hops, 0) };
            let datagram = UdpDatagram::between(src, dst, hops, server_addr.port(), payload.clone());
            let hop_list: Vec<(usize, usize)> =
                if to_server { links.clone() } else { links.iter().rev().map(|&(a, b)| (b, a)).collect() };
            let mut at = Some(now);
            for (from, to) in hop_list {
                let Some(t) = at else { break };
                let out = mac.send(t, from, to, &datagram, &mut rng, &mut ledger);
                run.data_frames += out.frames.iter().filter(|f| f.kind == FrameKind::Data).count();
                at = out.delivered_at;
                if at.is_none() {
                    losses.push(out.frames.iter().map(|f| f.end).max().unwrap_or(t));
                }
            }
            if let Some(arrival) = at {
                in_flight.push((arrival, order, to_server, payload));
                order += 1;
            } else {
                run.lost_datagrams += 1;
            }
        }
        while let Some(e) = client.poll_event() {
            match e {
                Event::Connected(summary) => {
                    run.client_retransmissions = summary.retransmissions;
                    run.client_summary = Some(summary);
                    client_done = client_done.or(Some(now));
                }
                Event::Failed(err) => {
                    run.failure = Some(format!("client failed: {err}"));
                    run.end = Some(now);
                    return Ok(run);
                }
                Event::SessionTicket(session) => run.tickets.push(session),
                _ => {}
            }
        }
        while let Some((handle, e)) = server.poll_event() {
            // Only the connection this client's handshake made counts: an earlier session from
            // the same address is replaced (and ends) when the new one completes.
            if matches!(e, Event::Accepted) && new_session.is_none() {
                new_session = Some(handle);
            }
            if new_session != Some(handle) {
                continue;
            }
            match e {
                Event::Connected(summary) => {
                    run.server_retransmissions = summary.retransmissions;
                    run.server_summary = Some(summary);
                    server_done = server_done.or(Some(now));
                }
                Event::Failed(err) => {
                    run.failure = Some(format!("server failed: {err}"));
                    run.end = Some(now);
                    return Ok(run);
                }
                Event::ApplicationData(_) if run.first_data_at_server_s.is_none() => {
                    run.first_data_at_server_s = Some((now - start).as_secs_f64());
                }
                _ => {}
            }
        }
        if let (Some(c), Some(s), false) = (client_done, server_done, run.completed) {
            let end: Instant = c.max(s);
            run.completed = true;
            run.duration_s = (end - start).as_secs_f64();
            run.end = Some(end);
            mac.account_idle(start, end, &mut ledger);
            let usage = ledger.usage(0, end);
            run.client_energy_mj = usage.energy_mj;
            run.client_radio_on_s = (usage.tx + usage.rx + usage.listen).as_secs_f64();
        }
        // After a ticket, until the client's ACK of it has arrived (none in flight): the
        // server would resend it into the next handshake otherwise.
        let ticket_settled = !run.tickets.is_empty() && in_flight.is_empty();
        if run.completed && (until == Until::Established || ticket_settled) {
            run.end = Some(run.end.unwrap_or(now).max(now));
            return Ok(run);
        }
        let next_arrival = in_flight.iter().map(|d| (d.0, d.1)).min();
        let next = [next_arrival.map(|a| a.0), client.poll_timeout(), server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { break };
        if next > limit {
            break;
        }
        now = now.max(next);
        if let Some((_, id)) = next_arrival.filter(|a| a.0 <= now) {
            if let Some(pos) = in_flight.iter().position(|d| d.1 == id) {
                let (_, _, to_server, mut bytes) = in_flight.swap_remove(pos);
                if to_server {
                    server.handle_datagram(now, server_addr, client_addr, &mut bytes);
                } else {
                    client.handle_datagram(now, server_addr, &mut bytes);
                }
            }
            continue;
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
            timer_fired[0] = true;
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
            timer_fired[1] = true;
        }
    }
    run.end = Some(now);
    Ok(run)
}
