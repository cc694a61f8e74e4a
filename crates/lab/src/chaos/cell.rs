//! One cell in the simulator: the network, the server and its clients, the run, the tallies.
//!
//! Topology: clients c0..cN, each on its own access link (the cell's stress, or a TSCH hop) to
//! one router; the router reaches the server over a core link, directly or through a
//! port-restricted NAT. Every client runs its sessions one after another; the server is one
//! `Endpoint`.
//!
//! Burst loss sits on the core link, which every client shares, beside steady cross traffic
//! (100 datagrams/s each way): a Gilbert–Elliott chain moves once per datagram, and on one
//! client's own link its retransmissions (1, 2, 4 s apart) would all fall into one "burst of 4
//! datagrams" lasting a minute. So a burst lasts about 40 ms, and still takes out consecutive
//! datagrams of a flight sent back to back.

use super::grid::{Cell, LinkProfile, Loss, Mode, IP_UDP_HEADERS};
use crate::apps::cross_traffic::CrossTraffic;
use crate::apps::dtls_client::{ClientTally, DtlsClientLoop, SeedTemplate, SessionPlan};
use crate::apps::dtls_server::{DtlsEchoServer, ServerTally};
use crate::pki::{LabPki, WALL_CLOCK};
use fastshake_core::Instant;
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{
    CipherSuite, ClientAuth, ClientConfig, EndpointStats, Mobility, NamedGroup, ServerConfig, TicketKeys,
    Versions,
};
use fastshake_sim::apps::Echo;
use fastshake_sim::dist::Jitter;
use fastshake_sim::link::{LinkConfig, LinkCounters, LinkKind, LossModel, Oversize};
use fastshake_sim::mac::{CellPlacement, MacConfig, TschConfig};
use fastshake_sim::nat::{NatConfig, NatPreset};
use fastshake_sim::{Action, AppId, IfaceId, LinkId, Role, Simulator};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER_PORT: u16 = 5684;
const CLIENT_BASE_PORT: u16 = 20_000;
const PSK_IDENTITY: &[u8] = b"chaos-client";
const PSK_KEY: [u8; 16] = [0x6b; 16];
/// Length of the Connection IDs the server issues; the client asks for none (it never moves
/// the server).
const SERVER_CID_LEN: u8 = 4;
/// The client application's request timer: 1 s, doubling up to 16 s (CoAP's shape, RFC 7252
/// §4.2). One request at a time, so resends never crowd a slow link; the cap keeps a live
/// session from falling silent for the server's idle timeout (300 s) on a lossy one.
const RECORD_RTO: Duration = Duration::from_secs(1);
const MAX_RECORD_RTO: Duration = Duration::from_secs(16);
/// Bytes of each request and echo.
const RECORD_LEN: usize = 32;
/// The 0-RTT allowance of the early-data cells' tickets: room for the one early request.
const EARLY_DATA_ALLOWANCE: u32 = 1024;
/// Cross traffic over the core link of the burst-loss cells: 100 datagrams/s each way.
const CROSS_INTERVAL: Duration = Duration::from_millis(10);
const CROSS_PAYLOAD: usize = 100;
const CROSS_SINK_PORT: u16 = 7;

/// What the run of a cell is asked for.
#[derive(Clone, Debug)]
pub struct CellParams {
    pub seed: u64,
    /// Handshakes per cell (resumed cells: resumptions, each after its full handshake).
    pub handshakes: u32,
    pub clients: u16,
    /// Requests (and echoes) per session.
    pub records: u16,
    /// Capture every datagram into a pcap.
    pub capture: bool,
}

/// What a cell's run produced.
pub struct CellRun {
    pub clients: Vec<ClientTally>,
    pub server: ServerTally,
    pub endpoint: EndpointStats,
    /// The access links and the core link, both directions.
    pub links: LinkCounters,
    /// Moves the driver made (address changes of client interfaces).
    pub moves_made: u32,
    /// Clients still running when the run's time limit came (a stall of the harness itself).
    pub unfinished_clients: u32,
    pub virtual_end: Instant,
    pub events: u64,
    pub wall: Duration,
    pub pcap: Option<Vec<u8>>,
}

/// A run-wide seed mixed with the cell's name and a purpose, so a cell's randomness depends on
/// neither which other cells run nor in what order.
pub fn derive_seed(seed: u64, cell: &str, purpose: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cell.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    splitmix64(splitmix64(seed ^ h) ^ purpose)
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn seed_bytes(x: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut s = x;
    for chunk in out.chunks_mut(8) {
        s = splitmix64(s);
        chunk.copy_from_slice(&s.to_le_bytes());
    }
    out
}

/// The engine configurations of a cell.
pub fn configs(cell: &Cell, pki: &LabPki) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let mut client;
    let mut server;
    match cell.mode {
        Mode::Psk | Mode::Cid | Mode::Psk13 | Mode::Hybrid13 | Mode::Cid13 => {
            client = ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(PSK_IDENTITY, PSK_KEY) };
            client.suites = vec![CipherSuite::PskWithAes128Ccm8];
            server = ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk(PSK_IDENTITY, PSK_KEY) };
            server.suites = vec![CipherSuite::PskWithAes128Ccm8];
        }
        Mode::Ecdsa | Mode::Resumed | Mode::Ecdsa13 | Mode::Resumed13 | Mode::Early13 => {
            client = ClientConfig {
                versions: Versions::Dtls12,
                ..ClientConfig::certificate(pki.anchors.clone(), Some("localhost".into()))
            };
            client.certified_key = Some(pki.client.clone());
            client.wall_clock = Some(WALL_CLOCK);
            client.suites = vec![CipherSuite::EcdheEcdsaWithAes128Ccm8];
            server =
                ServerConfig { versions: Versions::Dtls12, ..ServerConfig::certificate(pki.server.clone()) };
            server.client_auth = ClientAuth::Require;
            server.client_trust_anchors = Some(pki.anchors.clone());
            server.wall_clock = Some(WALL_CLOCK);
            server.suites = vec![CipherSuite::EcdheEcdsaWithAes128Ccm8];
        }
    }
    if cell.mode.resumes() {
        server.tickets = Some(TicketKeys::new(1, [0x7c; 16]));
    }
    if cell.mode == Mode::Early13 {
        client.early_data = true;
        server.max_early_data = EARLY_DATA_ALLOWANCE;
    }
    if cell.mode.is_dtls13() {
        let group = if cell.mode == Mode::Hybrid13 { NamedGroup::X25519MlKem768 } else { NamedGroup::X25519 };
        client.versions = Versions::Dtls13;
        client.suites13 = vec![Suite13::Aes128Ccm8Sha256];
        client.groups = vec![group];
        server.versions = Versions::Dtls13;
        server.suites13 = vec![Suite13::Aes128Ccm8Sha256];
        server.groups = vec![group];
    }
    if cell.mode.moves() {
        let mobility = |cid| Mobility {
            connection_id: Some(cid),
            return_routability_check: true,
            follow_server_port: false,
        };
        client.mobility = mobility(0);
        server.mobility = mobility(SERVER_CID_LEN);
    }
    if let Some(mtu) = cell.link.mtu {
        client.mtu = mtu;
        if !cell.link.client_mtu_only {
            server.mtu = mtu;
        }
    }
    client.handshake_timeout = cell.link.handshake_timeout;
    server.handshake_timeout = cell.link.handshake_timeout;
    (Arc::new(client), Arc::new(server))
}

fn access_link(link: &LinkProfile) -> LinkConfig {
    if link.tsch.is_some() {
        return LinkConfig { kind: LinkKind::Ieee802154 { mac: "tsch".into() }, ..LinkConfig::default() };
    }
    let loss = match link.loss {
        Loss::Bernoulli { p } => LossModel::Bernoulli { p },
        Loss::None | Loss::Burst { .. } => LossModel::None,
    };
    let jitter = match link.jitter_ms {
        j if j > 0.0 => Jitter::Uniform { min_ms: 0.0, max_ms: j },
        _ => Jitter::None,
    };
    LinkConfig {
        delay_ms: link.delay_ms,
        jitter,
        mtu: link.mtu.map(|m| m + IP_UDP_HEADERS),
        oversize: Oversize::Drop,
        loss,
        duplicate: link.duplicate,
        reorder: link.reorder,
        reorder_delay_ms: link.reorder_ms,
        ..LinkConfig::default()
    }
}

fn core_link(link: &LinkProfile) -> LinkConfig {
    let loss = match link.loss {
        Loss::Burst { rate, mean_burst } => {
            let (p_gb, p_bg) = Loss::gilbert_elliott(rate, mean_burst);
            LossModel::GilbertElliott { p_gb, p_bg, loss_good: 0.0, loss_bad: 1.0 }
        }
        Loss::None | Loss::Bernoulli { .. } => LossModel::None,
    };
    LinkConfig { loss, ..LinkConfig::default() }
}

/// Client `i`'s address after its `k`-th move.
fn client_addr(i: u16, k: u32) -> Ipv4Addr {
    let [hi, lo] = i.to_be_bytes();
    if k == 0 {
        return Ipv4Addr::new(10, 1 + hi, lo, 2);
    }
    Ipv4Addr::new(10, 100 + hi + (k / 250) as u8, lo, 2 + (k % 250) as u8)
}

struct Built {
    sim: Simulator,
    server: AppId,
    clients: Vec<(AppId, IfaceId)>,
    access: Vec<LinkId>,
    core: LinkId,
}

fn build(cell: &Cell, params: &CellParams, pki: &LabPki) -> anyhow::Result<Built> {
    let name = cell.name();
    anyhow::ensure!(params.clients > 0 && params.clients <= 1000, "1 to 1000 clients");
    anyhow::ensure!(
        !cell.mode.moves() || params.records >= 2,
        "a session that moves needs 2 requests or more"
    );
    let (client_config, server_config) = configs(cell, pki);
    let mut sim = Simulator::new(derive_seed(params.seed, &name, 0));
    if params.capture {
        sim.enable_capture();
    }
    let router = sim.add_node("router", Role::Router);
    let server = sim.add_node("server", Role::Host);
    let server_iface = sim.add_interface(server, "eth0", SERVER_ADDR)?;
    let core = if cell.link.nat {
        let nat = sim.add_node("nat", Role::Nat(NatConfig::preset(NatPreset::PortRestricted)));
        let r = sim.add_interface(router, "n", Ipv4Addr::new(10, 0, 1, 1))?;
        let inside = sim.add_interface(nat, "in", Ipv4Addr::new(10, 0, 1, 2))?;
        let outside = sim.add_interface(nat, "out", Ipv4Addr::new(10, 0, 0, 1))?;
        sim.set_nat_interfaces(nat, inside, outside);
        sim.connect("inner", r, inside, LinkConfig::default())?;
        sim.connect("core", outside, server_iface, core_link(&cell.link))?
    } else {
        let r = sim.add_interface(router, "s", Ipv4Addr::new(10, 0, 0, 1))?;
        sim.connect("core", r, server_iface, core_link(&cell.link))?
    };
    let mut ends = Vec::new();
    for i in 0..params.clients {
        let node = sim.add_node(&format!("c{i}"), Role::Host);
        let c = sim.add_interface(node, "eth0", client_addr(i, 0))?;
        let [hi, lo] = i.to_be_bytes();
        let r = sim.add_interface(router, &format!("c{i}"), Ipv4Addr::new(10, 1 + hi, lo, 1))?;
        ends.push((node, c, r));
    }
    if let Some(hop) = cell.link.tsch {
        let config = MacConfig::Tsch(TschConfig {
            slotframe: hop.slotframe,
            cells_per_link: hop.cells,
            timeslot_ms: 10.0,
            pdr: hop.pdr,
            ack_pdr: hop.pdr,
            max_frame_retries: 3,
            placement: CellPlacement::Random,
            cells: Vec::new(),
        });
        let members: Vec<_> = std::iter::once(router).chain(ends.iter().map(|e| e.0)).collect();
        let pairs: Vec<_> = ends.iter().map(|e| (router, e.0)).collect();
        let model = fastshake_sim::mac::build(&config, &members, &pairs, sim.rng())?;
        sim.add_mac("tsch", model);
    }
    let access_config = access_link(&cell.link);
    let mut access = Vec::new();
    for (i, &(_, c, r)) in ends.iter().enumerate() {
        access.push(sim.connect(&format!("access{i}"), r, c, access_config.clone())?);
    }

    if matches!(cell.link.loss, Loss::Burst { .. }) {
        let cross = sim.add_node("cross", Role::Host);
        let x = sim.add_interface(cross, "eth0", Ipv4Addr::new(10, 0, 2, 2))?;
        let r = sim.add_interface(router, "x", Ipv4Addr::new(10, 0, 2, 1))?;
        sim.connect("cross", x, r, LinkConfig::default())?;
        let sink = SocketAddr::from((SERVER_ADDR, CROSS_SINK_PORT));
        let traffic = CrossTraffic::new(sink, CROSS_INTERVAL, CROSS_PAYLOAD, Instant::ZERO);
        sim.add_app(cross, "cross", CROSS_SINK_PORT, Box::new(traffic))?;
        sim.add_app(server, "cross-echo", CROSS_SINK_PORT, Box::new(Echo::new()))?;
    }

    let server_seed = seed_bytes(derive_seed(params.seed, &name, 1));
    let server_app = DtlsEchoServer::new(server_config, server_seed, true)?;
    let server_id = sim.add_app(server, "server", SERVER_PORT, Box::new(server_app))?;
    let n = u32::from(params.clients);
    let mut clients = Vec::new();
    for (i, &(node, iface, _)) in ends.iter().enumerate() {
        let i32 = i as u32;
        let sessions = params.handshakes / n + u32::from(i32 < params.handshakes % n);
        let plan = SessionPlan {
            server: SocketAddr::from((SERVER_ADDR, SERVER_PORT)),
            base_port: CLIENT_BASE_PORT,
            sessions,
            resume: cell.mode.resumes(),
            early_data: cell.mode == Mode::Early13,
            records: params.records,
            record_len: RECORD_LEN,
            move_mid_session: cell.mode.moves(),
            close: true,
            record_rto: RECORD_RTO,
            max_record_rto: MAX_RECORD_RTO,
            // As long as a handshake may take: a live session answers well within it.
            stall_after: cell.link.handshake_timeout,
            // Staggered so the clients do not keep step.
            first_start: Instant::from_millis(1 + 37 * u64::from(i32)),
            seeds: SeedTemplate(seed_bytes(derive_seed(params.seed, &name, 2 + u64::from(i32)))),
        };
        let app = DtlsClientLoop::new(client_config.clone(), plan);
        let id = sim.add_app(node, &format!("client{i}"), CLIENT_BASE_PORT, Box::new(app))?;
        clients.push((id, iface));
    }
    Ok(Built { sim, server: server_id, clients, access, core })
}

fn client(sim: &Simulator, id: AppId) -> anyhow::Result<&DtlsClientLoop> {
    sim.app(id)
        .as_any()
        .and_then(|a| a.downcast_ref::<DtlsClientLoop>())
        .ok_or_else(|| anyhow::anyhow!("client app {id} is not where it was put"))
}

/// Runs one cell to the end of every client's sessions.
pub fn run_cell(cell: &Cell, params: &CellParams, pki: &LabPki) -> anyhow::Result<CellRun> {
    let started = std::time::Instant::now();
    let Built { mut sim, server, clients, access, core } = build(cell, params, pki)?;
    // Moves are made between steps, as soon as a client asks: fine steps when clients move.
    let step = if cell.mode.moves() { Duration::from_millis(20) } else { Duration::from_millis(500) };
    // Every session ends by its handshake timeout and its records deadline, so this limit is
    // reached only if the harness itself stalls.
    let per_client =
        params.handshakes.div_ceil(u32::from(params.clients)) * if cell.mode.resumes() { 2 } else { 1 };
    let limit = Instant::ZERO + (cell.link.handshake_timeout * 2 + Duration::from_secs(5)) * (per_client + 1);
    let mut moves_asked_seen = vec![0u32; clients.len()];
    let mut moves = vec![0u32; clients.len()];
    let mut t = Instant::ZERO;
    loop {
        t += step;
        sim.run_until(t);
        let mut all_done = true;
        for (i, &(id, iface)) in clients.iter().enumerate() {
            let c = client(&sim, id)?;
            all_done &= c.done();
            if c.move_wanted() && moves_asked_seen[i] < c.tally.moves_asked {
                moves_asked_seen[i] = c.tally.moves_asked;
                moves[i] += 1;
                sim.schedule(t, Action::SetAddress(iface, client_addr(i as u16, moves[i])));
            }
        }
        if all_done || t >= limit {
            break;
        }
    }
    let end = sim.now();
    // The server's half-open handshakes of failed clients run out.
    sim.run_until(end + cell.link.handshake_timeout + Duration::from_secs(1));
    let mut tallies = Vec::new();
    let mut unfinished = 0;
    for &(id, _) in &clients {
        let c = client(&sim, id)?;
        unfinished += u32::from(!c.done());
        tallies.push(c.tally.clone());
    }
    let s = sim
        .app(server)
        .as_any()
        .and_then(|a| a.downcast_ref::<DtlsEchoServer>())
        .ok_or_else(|| anyhow::anyhow!("the server app is not where it was put"))?;
    let mut counters = LinkCounters::default();
    for &l in access.iter().chain([&core]) {
        for dir in sim.link_counters(l) {
            counters.add(&dir);
        }
    }
    Ok(CellRun {
        clients: tallies,
        server: s.tally.clone(),
        endpoint: s.endpoint().stats(),
        links: counters,
        moves_made: moves.iter().sum(),
        unfinished_clients: unfinished,
        virtual_end: end,
        events: sim.events_processed(),
        wall: started.elapsed(),
        pcap: sim.take_capture(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::grid::grid;

    #[test]
    fn the_1_3_resumption_early_data_and_cid_cells_configure_what_they_test() {
        let pki = LabPki::kept().expect("the kept PKI");
        for cell in grid().into_iter().filter(|c| c.link.name == "clean") {
            let (client, server) = configs(&cell, &pki);
            let v13 = cell.mode.is_dtls13();
            assert_eq!(client.versions == Versions::Dtls13, v13, "{}", cell.name());
            assert_eq!(server.versions == Versions::Dtls13, v13, "{}", cell.name());
            assert_eq!(server.tickets.is_some(), cell.mode.resumes(), "{}", cell.name());
            let early = cell.mode == Mode::Early13;
            assert_eq!((client.early_data, server.max_early_data > 0), (early, early), "{}", cell.name());
            let moves = cell.mode.moves();
            assert_eq!(server.mobility.connection_id.is_some(), moves, "{}", cell.name());
            assert_eq!(client.mobility.return_routability_check, moves, "{}", cell.name());
            if matches!(cell.mode, Mode::Resumed13 | Mode::Early13) {
                assert!(client.certified_key.is_some() && server.client_auth == ClientAuth::Require);
            }
        }
    }
}
