//! Our real DTLS handshake (1.2, and 1.3) over a chain of MAC hops, in the variants E2 compares,
//! with the retransmission timer as one parameter; means over seeds.

use crate::mac_handshake::{self, MacHandshake, RunSeeds, Until};
use crate::pki::{LabPki, WALL_CLOCK};
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::Versions;
use fastshake_dtls::{
    CipherSuite, ClientAuth, ClientConfig, Connection, Endpoint, Instant, Mobility, NamedGroup,
    RetransmitPolicy, ServerConfig, TicketKeys,
};
use fastshake_sim::mac::MacConfig;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// What is measured: one handshake, after whatever the variant needs first (an earlier
/// handshake to resume, or to learn a cookie from), which is not measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Variant {
    /// TLS_PSK_WITH_AES_128_CCM_8, tinyDTLS's settings (seed 002's runs).
    Psk,
    /// TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8, both sides authenticated by a chain of three P-256
    /// certificates (leaf and two intermediates sent), the lab's kept PKI.
    EcdheEcdsa,
    /// PSK, abbreviated handshake resuming the session of an earlier one by its RFC 5077 ticket.
    Resumption,
    /// PSK with a Connection ID (RFC 9146): the server issues a 4-byte CID.
    Cid,
    /// PSK, full handshake, the client sending the cookie an earlier exchange gave it in its
    /// first ClientHello, so the HelloVerifyRequest round trip is skipped.
    CachedCookie,
    /// ECDHE-ECDSA as above, full handshake, after an earlier one whose objects the client
    /// cached: the server sends the RFC 7924 fingerprints of its Certificate and
    /// CertificateRequest, the client an empty Certificate under its client-certificate ticket
    /// (seed 003's BiTHaC).
    Bithac,
    /// DTLS 1.3 (RFC 9147), external PSK alone (psk_ke), TLS_AES_128_CCM_8_SHA256 (the IoT
    /// profile's suite), with the stateless HelloRetryRequest and its cookie.
    Psk13,
    /// DTLS 1.3, external PSK with an x25519 key share (psk_dhe_ke): forward secrecy.
    PskDhe13,
    /// DTLS 1.3, external PSK with an X25519MLKEM768 key share (the post-quantum hybrid: 1,216
    /// bytes more from the client, 1,088 from the server).
    PskHybrid13,
    /// DTLS 1.3, ECDHE (x25519) with the chains of [`Variant::EcdheEcdsa`], both authenticated.
    EcdheEcdsa13,
    /// DTLS 1.3, the session of an earlier ECDHE-ECDSA handshake resumed by its ticket
    /// (psk_dhe_ke, no certificates), skipping the cookie exchange as RFC 9147 §5.1 allows.
    Resumption13,
    /// [`Variant::Resumption13`] with 32 bytes of 0-RTT early data beside the ClientHello.
    EarlyData13,
}

impl Variant {
    pub const ALL: [Variant; 12] = [
        Variant::Psk,
        Variant::EcdheEcdsa,
        Variant::Bithac,
        Variant::Resumption,
        Variant::Cid,
        Variant::CachedCookie,
        Variant::Psk13,
        Variant::PskDhe13,
        Variant::PskHybrid13,
        Variant::EcdheEcdsa13,
        Variant::Resumption13,
        Variant::EarlyData13,
    ];

    /// Whether the variant speaks DTLS 1.3.
    pub fn is_dtls13(self) -> bool {
        matches!(
            self,
            Variant::Psk13
                | Variant::PskDhe13
                | Variant::PskHybrid13
                | Variant::EcdheEcdsa13
                | Variant::Resumption13
                | Variant::EarlyData13
        )
    }

    /// Whether the measured handshake follows an earlier one (not measured) whose session,
    /// cookie or cache entry it uses.
    fn reuses_earlier(self) -> bool {
        matches!(
            self,
            Variant::Resumption
                | Variant::CachedCookie
                | Variant::Bithac
                | Variant::Resumption13
                | Variant::EarlyData13
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::Psk => "PSK",
            Variant::EcdheEcdsa => "ECDHE-ECDSA",
            Variant::Resumption => "PSK resumed (ticket)",
            Variant::Cid => "PSK + CID",
            Variant::CachedCookie => "PSK, cached cookie",
            Variant::Bithac => "cached info + client-cert cache (BiTHaC)",
            Variant::Psk13 => "1.3 PSK (psk_ke)",
            Variant::PskDhe13 => "1.3 PSK + x25519 (psk_dhe_ke)",
            Variant::PskHybrid13 => "1.3 PSK + X25519MLKEM768",
            Variant::EcdheEcdsa13 => "1.3 ECDHE-ECDSA",
            Variant::Resumption13 => "1.3 ECDHE-ECDSA resumed (ticket)",
            Variant::EarlyData13 => "1.3 resumed + 32 B of 0-RTT data",
        }
    }
}

/// The DTLS retransmission timer of both ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    /// tinyDTLS's: 2 s, doubling on each timeout (seed 002).
    Fixed2s,
    /// From the measured round trip, never below `floor_ms`, doubling on loss.
    Adaptive { floor_ms: u64 },
}

/// The adaptive timer's floor over the link's wake-up period: a quarter more than one period.
pub const FLOOR_PERIODS: f64 = 1.25;

impl Timer {
    /// The adaptive timer `lab e2` uses on `mac`: never below [`FLOOR_PERIODS`] of its wake-up
    /// period. The MAC knows that period (its check interval, beacon interval or slotframe) and
    /// hands it to DTLS as configuration: whether an answer comes within the current wake-up
    /// or the next is decided by the schedule, which no round trip measured earlier shows.
    pub fn adaptive_for(mac: &MacConfig) -> Timer {
        Timer::Adaptive {
            floor_ms: (wake_up_period(mac).as_secs_f64() * 1000.0 * FLOOR_PERIODS).round() as u64,
        }
    }

    pub fn name(self) -> String {
        match self {
            Timer::Fixed2s => "fixed 2 s".to_string(),
            Timer::Adaptive { .. } => adaptive_timer_name(),
        }
    }
}

/// The adaptive timer of `lab e2` as the tables name it (its floor differs by MAC).
pub fn adaptive_timer_name() -> String {
    format!("adaptive, floor {FLOOR_PERIODS} wake-up periods")
}

/// How long a frame may wait for the receiver on `mac`: X-MAC's check interval, the beacon
/// interval, one slotframe.
pub fn wake_up_period(mac: &MacConfig) -> Duration {
    let ms = match mac {
        MacConfig::XMac(x) => x.check_interval_ms,
        MacConfig::Beacon(b) => super::beacon::order_ms(b.beacon_order),
        MacConfig::Tsch(t) => f64::from(t.slotframe) * t.timeslot_ms,
    };
    Duration::from_secs_f64(ms / 1000.0)
}

/// Both ends start from tinyDTLS's 2 s; the adaptive policy then follows the measured round trip.
fn apply_timer(timer: Timer, client: &mut ClientConfig, server: &mut ServerConfig) {
    client.initial_retransmit = Duration::from_secs(2);
    server.initial_retransmit = Duration::from_secs(2);
    let policy = match timer {
        Timer::Fixed2s => RetransmitPolicy::Fixed,
        Timer::Adaptive { floor_ms } => RetransmitPolicy::Adaptive { floor: Duration::from_millis(floor_ms) },
    };
    client.retransmit = policy;
    server.retransmit = policy;
}

/// The two ends' configurations for `variant`.
pub fn configs(variant: Variant, timer: Timer, pki: &LabPki) -> (ClientConfig, ServerConfig) {
    let (mut client, mut server) = match variant {
        Variant::EcdheEcdsa
        | Variant::Bithac
        | Variant::EcdheEcdsa13
        | Variant::Resumption13
        | Variant::EarlyData13 => {
            let mut client = ClientConfig {
                versions: Versions::Dtls12,
                ..ClientConfig::certificate(pki.anchors.clone(), Some("localhost".into()))
            };
            client.certified_key = Some(pki.client.clone());
            client.wall_clock = Some(WALL_CLOCK);
            client.suites = vec![CipherSuite::EcdheEcdsaWithAes128Ccm8];
            let mut server =
                ServerConfig { versions: Versions::Dtls12, ..ServerConfig::certificate(pki.server.clone()) };
            server.client_auth = ClientAuth::Require;
            server.client_trust_anchors = Some(pki.anchors.clone());
            server.wall_clock = Some(WALL_CLOCK);
            server.suites = vec![CipherSuite::EcdheEcdsaWithAes128Ccm8];
            (client, server)
        }
        _ => mac_handshake::tinydtls_psk(),
    };
    client.handshake_timeout = Duration::from_secs(3600);
    server.handshake_timeout = Duration::from_secs(3600);
    match variant {
        Variant::Resumption => server.tickets = Some(TicketKeys::new(1, [0x7c; 16])),
        Variant::CachedCookie => server.reusable_cookies = true,
        Variant::Bithac => {
            client.cached_info = true;
            client.client_certificate_caching = true;
        }
        Variant::Cid => {
            client.mobility = Mobility { connection_id: Some(0), ..Mobility::default() };
            server.mobility = Mobility { connection_id: Some(4), ..Mobility::default() };
        }
        Variant::Resumption13 => server.tickets = Some(TicketKeys::new(1, [0x7c; 16])),
        Variant::EarlyData13 => {
            server.tickets = Some(TicketKeys::new(1, [0x7c; 16]));
            server.max_early_data = 1024;
            client.early_data = true;
        }
        _ => {}
    }
    if variant.is_dtls13() {
        let groups = match variant {
            Variant::Psk13 => vec![],
            Variant::PskHybrid13 => vec![NamedGroup::X25519MlKem768],
            _ => vec![NamedGroup::X25519],
        };
        client.versions = Versions::Dtls13;
        server.versions = Versions::Dtls13;
        client.suites13 = vec![Suite13::Aes128Ccm8Sha256];
        server.suites13 = vec![Suite13::Aes128Ccm8Sha256];
        client.groups = groups.clone();
        server.groups = groups;
    }
    apply_timer(timer, &mut client, &mut server);
    (client, server)
}

fn seed_bytes(seed: u64, salt: u8) -> [u8; 32] {
    let mut s = [salt; 32];
    s[..8].copy_from_slice(&seed.to_le_bytes());
    s
}

/// Whether the client has talked to this server before the measured handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Contact {
    /// A fresh client and server: nothing cached, the first flight waits the initial 2 s.
    First,
    /// A full handshake (not measured) came first, so both ends' round-trip caches hold the
    /// path's estimate, as for any client that talks to its server again (like TCP's metrics
    /// cache). Only the adaptive timer uses it; resumption and a cached cookie always have one.
    Returning,
}

/// One measured handshake of `variant` over `hops` hops of `mac`, after an earlier one if
/// `contact` says so.
pub fn measure_contact(
    mac: &MacConfig,
    hops: usize,
    variant: Variant,
    timer: Timer,
    contact: Contact,
    seed: u64,
    pki: &LabPki,
) -> anyhow::Result<MacHandshake> {
    let (client_config, server_config) = configs(variant, timer, pki);
    let client_config = Arc::new(client_config);
    let mut server = Endpoint::new(Arc::new(server_config), seed_bytes(seed, 2))?;
    let mut start = Instant::ZERO + NETWORK_RUNNING_AT;
    let server_addr = mac_handshake::server_addr();
    // A 1.3 session is resumed from the ticket that follows a handshake, and its early data
    // is taken only while the ticket's age as the client counts it agrees with the server's
    // (RFC 8446 §8.3). A first contact on a slow link can flood the MAC queues with copies
    // (its timers know nothing of the path yet) and hold the ticket back behind them; a
    // returning client's handshake issues the ticket.
    let fill_first = !variant.reuses_earlier() || (variant.is_dtls13() && contact == Contact::Returning);
    if fill_first {
        if contact == Contact::Returning {
            // The earlier handshake fills both round-trip caches; its session is replaced. One
            // that gave up (lossy links) still leaves what it measured. It crosses the same
            // network (phases, cells) with its own losses.
            let mut first =
                Connection::client(client_config.clone(), start, server_addr, seed_bytes(seed, 4));
            let seeds = RunSeeds { network: seed, traffic: seed ^ 0x5eed };
            let earlier = mac_handshake::run_seeded(mac, hops, seeds, start, &mut first, &mut server)?;
            start = later_start(earlier.end.unwrap_or(start), seed);
        }
        if !variant.reuses_earlier() {
            let mut client = Connection::client(client_config, start, server_addr, seed_bytes(seed, 1));
            return mac_handshake::run(mac, hops, seed, start, &mut client, &mut server);
        }
    }
    // A first handshake, not measured, on the same network, gives the session (the cookie, the
    // cache entry) to reuse.
    let mut first = Connection::client(client_config.clone(), start, server_addr, seed_bytes(seed, 1));
    let seeds = RunSeeds { network: seed, traffic: seed ^ 0x5eed };
    // A 1.3 ticket comes after the handshake.
    let until = if variant.is_dtls13() { Until::Ticket } else { Until::Established };
    let earlier = mac_handshake::run_until(mac, hops, seeds, start, &mut first, &mut server, until)?;
    anyhow::ensure!(earlier.completed, "the handshake before the measured one did not complete");
    let summary = earlier.client_summary.clone();
    // The measured one starts after the first ended, on the same server.
    let start = later_start(earlier.end.unwrap_or(start), seed);
    let mut client = match variant {
        Variant::Resumption => {
            let session = summary.and_then(|s| s.session);
            anyhow::ensure!(session.is_some(), "the server issued no session to resume");
            Connection::client_with_session(client_config, start, server_addr, seed_bytes(seed, 3), session)
        }
        Variant::Resumption13 | Variant::EarlyData13 => {
            let session = earlier.tickets.last().cloned();
            anyhow::ensure!(session.is_some(), "the server issued no ticket to resume");
            let mut client = Connection::client_with_session(
                client_config,
                start,
                server_addr,
                seed_bytes(seed, 3),
                session,
            );
            if variant == Variant::EarlyData13 {
                // Whether the server takes it shows in the summaries: 0-RTT needs the ticket's
                // age to agree with the server's (RFC 8446 §8.3).
                client.send_early_data(&[0x2a; EARLY_DATA_LEN])?;
            }
            client
        }
        Variant::Bithac => {
            let entry = summary.and_then(|s| s.cache_update);
            anyhow::ensure!(entry.is_some(), "the first handshake left nothing to cache");
            Connection::client_with_cache(client_config, start, server_addr, seed_bytes(seed, 3), None, entry)
        }
        _ => {
            let cookie = cached_cookie(summary.as_ref());
            let mut config = (*client_config).clone();
            apply_cookie(&mut config, cookie);
            Connection::client(Arc::new(config), start, server_addr, seed_bytes(seed, 3))
        }
    };
    mac_handshake::run(mac, hops, seed, start, &mut client, &mut server)
}

/// Bytes of application data [`Variant::EarlyData13`] sends as 0-RTT (a CoAP request's size).
pub const EARLY_DATA_LEN: usize = 32;

/// When a client's first handshake starts: a minute into the simulated time, once every
/// schedule of the grid has run for several periods. The MAC models start each schedule at time
/// zero; a beacon network's first beacon comes at its drawn phase, and a handshake started before
/// it would wait for it, where a network already running would offer the CAP it is in.
const NETWORK_RUNNING_AT: Duration = Duration::from_secs(60);

/// When the measured handshake starts after an earlier one of the same client that ended at
/// `earlier_end`: a second later and a pause drawn from `seed`, up to a minute, so that it meets
/// the MAC's schedule at any phase, as a first contact does. A fixed second would start it at
/// the phase where the earlier one ended: on a beacon network of BI ≈ 1 s inside the CAP that
/// just carried the earlier handshake's last frame.
fn later_start(earlier_end: Instant, seed: u64) -> Instant {
    let mut rng = ChaCha20Rng::from_seed(seed_bytes(seed, 5));
    let pause = Duration::from_micros(rng.next_u64() % MAX_PAUSE_BETWEEN_HANDSHAKES.as_micros() as u64);
    earlier_end + Duration::from_secs(1) + pause
}

/// The longest pause [`later_start`] draws: longer than any period of the grid (X-MAC's 4 s
/// check interval, BO 8's 3.9 s beacon interval, a 1001-slot TSCH slotframe's 10 s).
const MAX_PAUSE_BETWEEN_HANDSHAKES: Duration = Duration::from_secs(60);

/// The cookie the server gave in an earlier exchange.
fn cached_cookie(summary: Option<&fastshake_dtls::HandshakeSummary>) -> Option<Vec<u8>> {
    summary.and_then(|s| s.cookie.clone())
}

fn apply_cookie(config: &mut ClientConfig, cookie: Option<Vec<u8>>) {
    config.cookie = cookie;
}

/// Means of [`measure_contact`] over seeds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Mean {
    pub seeds: u64,
    pub completed: u64,
    pub duration_s: f64,
    /// Half-width of the 95 % confidence interval of the mean duration.
    pub duration_ci95_s: f64,
    pub datagrams: f64,
    pub dtls_bytes: f64,
    pub data_frames: f64,
    pub lost_datagrams: f64,
    /// Flights resent by either side, and of those the spurious ones.
    pub retransmissions: f64,
    pub spurious_retransmissions: f64,
    /// The client's radio energy (CC2520 at 2.8 V), mJ.
    pub radio_mj: f64,
    /// Seconds the client's radio was on.
    pub radio_on_s: f64,
    /// Completed handshakes in which the server took the client's chain from its cache (seed
    /// 003's ticket), and in which the client took the server's Certificate from its RFC 7924
    /// cache.
    pub client_chain_from_cache: u64,
    pub server_chain_from_cache: u64,
    /// Completed handshakes whose 0-RTT early data the server took.
    pub early_data_accepted: u64,
    /// Mean seconds from the start until the server had the client's first application record,
    /// over the completed handshakes in which it came before the end (0-RTT data).
    pub first_data_at_server_s: Option<f64>,
}

impl Mean {
    pub fn over(runs: &[MacHandshake]) -> Mean {
        let done: Vec<&MacHandshake> = runs.iter().filter(|r| r.completed).collect();
        let n = done.len().max(1) as f64;
        let mean = |f: &dyn Fn(&MacHandshake) -> f64| done.iter().map(|r| f(r)).sum::<f64>() / n;
        let duration_s = mean(&|r| r.duration_s);
        let var = if done.len() > 1 {
            done.iter().map(|r| (r.duration_s - duration_s).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Mean {
            seeds: runs.len() as u64,
            completed: done.len() as u64,
            duration_s,
            duration_ci95_s: 1.96 * (var / n).sqrt(),
            datagrams: mean(&|r| r.datagrams as f64),
            dtls_bytes: mean(&|r| r.dtls_bytes as f64),
            data_frames: mean(&|r| r.data_frames as f64),
            lost_datagrams: mean(&|r| r.lost_datagrams as f64),
            retransmissions: mean(&|r| f64::from(r.client_retransmissions + r.server_retransmissions)),
            spurious_retransmissions: mean(&|r| f64::from(r.spurious_retransmissions)),
            radio_mj: mean(&|r| r.client_energy_mj),
            radio_on_s: mean(&|r| r.client_radio_on_s),
            client_chain_from_cache: done
                .iter()
                .filter(|r| r.server_summary.as_ref().is_some_and(|s| s.from_cache.client_certificate))
                .count() as u64,
            server_chain_from_cache: done
                .iter()
                .filter(|r| r.client_summary.as_ref().is_some_and(|s| s.from_cache.server_certificate))
                .count() as u64,
            early_data_accepted: done
                .iter()
                .filter(|r| r.server_summary.as_ref().is_some_and(|s| s.early_data == Some(true)))
                .count() as u64,
            first_data_at_server_s: {
                let at: Vec<f64> = done.iter().filter_map(|r| r.first_data_at_server_s).collect();
                (!at.is_empty()).then(|| at.iter().sum::<f64>() / at.len() as f64)
            },
        }
    }

    /// Whether every seed completed.
    pub fn all_completed(&self) -> bool {
        self.completed == self.seeds
    }
}

/// [`measure_contact`] over `seeds` at first contact, averaged.
pub fn mean(
    mac: &MacConfig,
    hops: usize,
    variant: Variant,
    timer: Timer,
    seeds: Range<u64>,
    pki: &LabPki,
) -> anyhow::Result<Mean> {
    mean_contact(mac, hops, variant, timer, Contact::First, seeds, pki)
}

/// [`measure_contact`] over `seeds`, averaged.
pub fn mean_contact(
    mac: &MacConfig,
    hops: usize,
    variant: Variant,
    timer: Timer,
    contact: Contact,
    seeds: Range<u64>,
    pki: &LabPki,
) -> anyhow::Result<Mean> {
    let runs = seeds
        .map(|seed| measure_contact(mac, hops, variant, timer, contact, seed, pki))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Mean::over(&runs))
}

/// The same configuration with both timers: the adaptive one (the headline) and the fixed 2 s
/// of tinyDTLS.
#[derive(Clone, Debug, Serialize)]
pub struct BothTimers {
    /// The adaptive timer of the row (its floor follows the MAC).
    pub adaptive_timer: Timer,
    /// Adaptive, a returning client ([`Contact::Returning`]): the first flight's timer from the
    /// round trip cached by the earlier handshake.
    pub adaptive: Mean,
    /// Adaptive, first contact ([`Contact::First`]): nothing cached, the first flight waits 2 s.
    pub adaptive_first_contact: Mean,
    /// The fixed 2 s timer, first contact (it keeps nothing from an earlier handshake).
    pub fixed: Mean,
}

impl BothTimers {
    /// The row's headline figure: the adaptive timer's, a returning client.
    pub fn main(&self) -> &Mean {
        &self.adaptive
    }

    /// The adaptive timer at first contact, "seconds/spurious resends", for a table cell.
    pub fn first_contact_cell(&self) -> String {
        let m = &self.adaptive_first_contact;
        format!("{:.2}/{:.2}", m.duration_s, m.spurious_retransmissions)
    }

    /// The timer of [`Self::main`].
    pub fn main_timer(&self) -> Timer {
        self.adaptive_timer
    }
}

/// What the adaptive columns of the tables are.
pub const ADAPTIVE_LEGEND: &str = "'adapt' = a returning client: an earlier handshake (not measured) over the same \
network filled both ends' round-trip caches, so each flight waits what its exchange took then and a margin (like \
TCP's metrics cache), never less than the floor: the MAC's wake-up period (check interval, beacon interval, \
slotframe) and a quarter, nor than the link takes to carry the exchange at the pace the peer's datagrams came; \
'1st s/sp' = the same adaptive timer at first contact (nothing cached, the first flight waits 2 s or the \
floor if longer): seconds / spurious resends. 'fixed' is always first contact (it keeps nothing).";

pub fn both_timers(
    mac: &MacConfig,
    hops: usize,
    variant: Variant,
    seeds: Range<u64>,
    pki: &LabPki,
) -> anyhow::Result<BothTimers> {
    let fixed = mean(mac, hops, variant, Timer::Fixed2s, seeds.clone(), pki)?;
    let adaptive_timer = Timer::adaptive_for(mac);
    let adaptive = mean_contact(mac, hops, variant, adaptive_timer, Contact::Returning, seeds.clone(), pki)?;
    let adaptive_first_contact =
        mean_contact(mac, hops, variant, adaptive_timer, Contact::First, seeds, pki)?;
    Ok(BothTimers { adaptive_timer, adaptive, adaptive_first_contact, fixed })
}

/// The header of a DTLS 1.3 grid table, after the row's own columns (`keys`).
pub fn print13_header(keys: &str) {
    println!(
        "{keys} | {:>8} {:>8} {:>6} {:>8} | {:>7} {:>7} {:>7} | {:>8} {:>8}",
        "fixed s", "adapt s", "spur.", "adapt sp", "datagr.", "frames", "DTLS B", "adapt mJ", "vs 1.2 %"
    );
}

/// One row of a DTLS 1.3 grid table: `keys` (the row's own columns), the 1.3 handshake under
/// both timers, and how much longer than the 1.2 one (adaptive timer both) it took.
pub fn print13_row(keys: &str, hs13: &BothTimers, hs12: &BothTimers) {
    let (f, a) = (&hs13.fixed, &hs13.adaptive);
    let energy = super::energy::ClientEnergy::new(a.radio_mj, a.radio_on_s, a.duration_s).total_mj();
    println!(
        "{keys} | {:>8.2} {:>8.2} {:>6.2} {:>8.2} | {:>7.1} {:>7.1} {:>7.0} | {:>8.2} {:>+8.0}",
        f.duration_s,
        a.duration_s,
        f.spurious_retransmissions,
        a.spurious_retransmissions,
        f.datagrams,
        f.data_frames,
        f.dtls_bytes,
        energy,
        (a.duration_s / hs12.adaptive.duration_s - 1.0) * 100.0,
    );
}
