//! What one handshake costs over one TSCH hop (seed 002's setting, L = 101, C = 1): a full PSK
//! handshake, and the abbreviated one that resumes it by ticket against the same `Endpoint`
//! (so the ticket key is the same), both over the shared path of [`crate::mac_handshake`].

use crate::mac_handshake::{self, MacHandshake};
use fastshake_dtls::{Connection, Endpoint, Instant, TicketKeys, WallClock};
use fastshake_sim::mac::{CellPlacement, MacConfig, TschConfig};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

pub const SLOTFRAME: u32 = 101;
pub const CELLS: u32 = 1;

/// Means over seeds of one kind of handshake.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HandshakeCost {
    pub seeds: usize,
    pub completed: usize,
    pub resumed: usize,
    pub duration_s: f64,
    pub dtls_bytes: f64,
    pub datagrams: f64,
    /// 802.15.4 data frames on the air (6LoWPAN frames and fragments, retries included).
    pub data_frames: f64,
    pub client_energy_mj: f64,
}

impl HandshakeCost {
    fn add(&mut self, run: &MacHandshake, resumed: bool) {
        self.seeds += 1;
        if run.completed {
            self.completed += 1;
            self.resumed += usize::from(resumed);
            self.duration_s += run.duration_s;
            self.dtls_bytes += run.dtls_bytes as f64;
            self.datagrams += run.datagrams as f64;
            self.data_frames += run.data_frames as f64;
            self.client_energy_mj += run.client_energy_mj;
        }
    }

    fn finish(&mut self) {
        let n = self.completed.max(1) as f64;
        self.duration_s /= n;
        self.dtls_bytes /= n;
        self.datagrams /= n;
        self.data_frames /= n;
        self.client_energy_mj /= n;
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TschCosts {
    pub slotframe: u32,
    pub cells: u32,
    /// The first retransmission timeout of both ends.
    pub initial_retransmit_s: f64,
    pub full: HandshakeCost,
    pub abbreviated: HandshakeCost,
}

pub fn tsch() -> MacConfig {
    MacConfig::Tsch(TschConfig {
        slotframe: SLOTFRAME,
        cells_per_link: CELLS,
        timeslot_ms: 10.0,
        pdr: 1.0,
        ack_pdr: 1.0,
        max_frame_retries: u8::MAX,
        placement: CellPlacement::Random,
        cells: Vec::new(),
    })
}

/// A full handshake and its resumption, per seed, over one hop; means over `seeds`. Both ends
/// have tinyDTLS's settings, with `initial_retransmit` in place of its 2 s when given.
pub fn measure(seeds: &[u64], initial_retransmit: Option<Duration>) -> anyhow::Result<TschCosts> {
    let mac = tsch();
    let mut costs = TschCosts { slotframe: SLOTFRAME, cells: CELLS, ..TschCosts::default() };
    for &seed in seeds {
        let (mut client_config, mut server_config) = mac_handshake::tinydtls_psk();
        if let Some(timeout) = initial_retransmit {
            client_config.initial_retransmit = timeout;
            server_config.initial_retransmit = timeout;
        }
        costs.initial_retransmit_s = client_config.initial_retransmit.as_secs_f64();
        server_config.tickets = Some(TicketKeys::new(1, [0x5a; 16]));
        server_config.wall_clock = Some(WallClock { at: Instant::ZERO, unix_secs: 1_800_000_000 });
        let client_config = Arc::new(client_config);
        let engine_seed = |salt: u8| {
            let mut s = [salt; 32];
            s[..8].copy_from_slice(&seed.to_le_bytes());
            s
        };
        let mut server = Endpoint::new(Arc::new(server_config), engine_seed(2))?;
        let start = Instant::from_millis(1);
        let mut client =
            Connection::client(client_config.clone(), start, mac_handshake::server_addr(), engine_seed(1));
        let full = mac_handshake::run(&mac, 1, seed, start, &mut client, &mut server)?;
        costs.full.add(&full, false);
        let session = full.client_summary.as_ref().and_then(|s| s.session.clone());
        anyhow::ensure!(session.is_some(), "the server issued no ticket");
        // Evicted: the server closes the session (its close_notify is not carried, the
        // client is gone), and the client comes back a minute later with its ticket.
        drop(client);
        if let Some(h) = server.handle_for(mac_handshake::client_addr()) {
            server.close(h);
        }
        let closed_at = full.end.unwrap_or(start);
        while server.poll_transmit(closed_at).is_some() {}
        while server.poll_event().is_some() {}
        let again = full.end.unwrap_or(start) + Duration::from_secs(60);
        let mut resumed_client = Connection::client_with_session(
            client_config,
            again,
            mac_handshake::server_addr(),
            engine_seed(3),
            session,
        );
        let abbreviated =
            mac_handshake::run(&mac, 1, seed.wrapping_add(1 << 32), again, &mut resumed_client, &mut server)?;
        let resumed = abbreviated.client_summary.as_ref().is_some_and(|s| s.resumed);
        costs.abbreviated.add(&abbreviated, resumed);
    }
    costs.full.finish();
    costs.abbreviated.finish();
    Ok(costs)
}

/// How an evicted ECDHE-ECDSA client comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CertReturn {
    /// A full handshake, nothing kept: both chains go again.
    Full,
    /// An abbreviated handshake resuming the evicted session by its RFC 5077 ticket.
    Ticket,
    /// A full handshake with RFC 7924 fingerprints for the server's Certificate and
    /// CertificateRequest and a client-certificate ticket (seed 003) for the client's chain.
    Bithac,
    /// BiTHaC, both ends also keeping validated keys (seed 003 §IV-C), so neither revalidates
    /// the other's chain.
    BithacKeyCache,
}

impl CertReturn {
    pub const ALL: [CertReturn; 4] =
        [CertReturn::Full, CertReturn::Ticket, CertReturn::Bithac, CertReturn::BithacKeyCache];

    pub fn name(self) -> &'static str {
        match self {
            CertReturn::Full => "full ECDHE",
            CertReturn::Ticket => "ticket",
            CertReturn::Bithac => "BiTHaC",
            CertReturn::BithacKeyCache => "BiTHaC+keys",
        }
    }
}

/// One way back, means over seeds, and what the caches gave.
#[derive(Clone, Debug, Serialize)]
pub struct CertCost {
    pub kind: CertReturn,
    pub cost: HandshakeCost,
    /// Handshakes in which the server took the client's chain from its cache (ticket), and the
    /// client the server's Certificate from its RFC 7924 cache.
    pub client_chain_from_cache: usize,
    pub server_chain_from_cache: usize,
    /// Handshakes in which the client, and the server, skipped validating the peer's chain.
    pub client_skipped_validation: usize,
    pub server_skipped_validation: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CertCosts {
    pub initial_retransmit_s: f64,
    /// Certificates in each side's chain (leaf and intermediates; the root is not sent).
    pub chain_len: usize,
    pub rows: Vec<CertCost>,
}

impl CertCosts {
    pub fn row(&self, kind: CertReturn) -> Option<&CertCost> {
        self.rows.iter().find(|r| r.kind == kind)
    }
}

/// What an evicted ECDHE-ECDSA client (P-256, mutual authentication, the lab's kept PKI) pays to
/// come back over the same hop, per way back: a first handshake offering every cache, not
/// measured, then the eviction and the measured return a minute later. Each way back gets a
/// server of its own (a client-certificate ticket opens its entry once). The timer is the PSK
/// rows': tinyDTLS's fixed one, starting at 2 s or at `initial_retransmit`.
pub fn measure_certificates(
    seeds: &[u64],
    initial_retransmit: Option<Duration>,
) -> anyhow::Result<CertCosts> {
    use crate::e2::handshake::{configs, Timer, Variant};
    use fastshake_pki::ValidatedKeyCache;
    let mac = tsch();
    let pki = crate::pki::LabPki::kept()?;
    let mut costs = CertCosts { chain_len: pki.client.chain.len(), ..CertCosts::default() };
    for kind in CertReturn::ALL {
        let mut row = CertCost {
            kind,
            cost: HandshakeCost::default(),
            client_chain_from_cache: 0,
            server_chain_from_cache: 0,
            client_skipped_validation: 0,
            server_skipped_validation: 0,
        };
        for &seed in seeds {
            let (mut client_config, mut server_config) = configs(Variant::Bithac, Timer::Fixed2s, &pki);
            if let Some(timeout) = initial_retransmit {
                client_config.initial_retransmit = timeout;
                server_config.initial_retransmit = timeout;
            }
            costs.initial_retransmit_s = client_config.initial_retransmit.as_secs_f64();
            server_config.tickets = Some(TicketKeys::new(1, [0x5a; 16]));
            if kind == CertReturn::BithacKeyCache {
                client_config.key_cache = Some(Arc::new(ValidatedKeyCache::new(16)));
                server_config.key_cache = Some(Arc::new(ValidatedKeyCache::new(16)));
            }
            let engine_seed = |salt: u8| {
                let mut s = [salt; 32];
                s[..8].copy_from_slice(&seed.to_le_bytes());
                s
            };
            let mut server = Endpoint::new(Arc::new(server_config), engine_seed(2))?;
            let start = Instant::from_millis(1);
            let first_config = Arc::new(client_config.clone());
            let mut client =
                Connection::client(first_config, start, mac_handshake::server_addr(), engine_seed(1));
            let first = mac_handshake::run(&mac, 1, seed, start, &mut client, &mut server)?;
            anyhow::ensure!(
                first.completed,
                "the first ECDHE-ECDSA handshake did not complete: {:?}",
                first.failure
            );
            let summary = first.client_summary.clone();
            let session = summary.as_ref().and_then(|s| s.session.clone());
            let entry = summary.and_then(|s| s.cache_update);
            anyhow::ensure!(session.is_some() && entry.is_some(), "no ticket or nothing to cache");
            // Evicted as in the PSK rows: the server closes, the client comes back a minute later.
            drop(client);
            if let Some(h) = server.handle_for(mac_handshake::client_addr()) {
                server.close(h);
            }
            let closed_at = first.end.unwrap_or(start);
            while server.poll_transmit(closed_at).is_some() {}
            while server.poll_event().is_some() {}
            let again = closed_at + Duration::from_secs(60);
            let (session, entry) = match kind {
                CertReturn::Full => {
                    client_config.cached_info = false;
                    client_config.client_certificate_caching = false;
                    (None, None)
                }
                CertReturn::Ticket => {
                    // The ticket alone: no caching extensions either.
                    client_config.cached_info = false;
                    client_config.client_certificate_caching = false;
                    (session, None)
                }
                CertReturn::Bithac | CertReturn::BithacKeyCache => (None, entry),
            };
            let mut back = Connection::client_with_cache(
                Arc::new(client_config),
                again,
                mac_handshake::server_addr(),
                engine_seed(3),
                session,
                entry,
            );
            let run = mac_handshake::run(&mac, 1, seed.wrapping_add(1 << 32), again, &mut back, &mut server)?;
            let (client, server) = (run.client_summary.as_ref(), run.server_summary.as_ref());
            let count = |f: &dyn Fn(&fastshake_dtls::HandshakeSummary) -> bool,
                         s: Option<&fastshake_dtls::HandshakeSummary>| {
                usize::from(run.completed && s.is_some_and(f))
            };
            row.client_chain_from_cache += count(&|s| s.from_cache.client_certificate, server);
            row.server_chain_from_cache += count(&|s| s.from_cache.server_certificate, client);
            row.client_skipped_validation += count(&|s| s.chain_validation_skipped, client);
            row.server_skipped_validation += count(&|s| s.chain_validation_skipped, server);
            row.cost.add(&run, client.is_some_and(|s| s.resumed));
        }
        row.cost.finish();
        costs.rows.push(row);
    }
    Ok(costs)
}
