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
        let mut server = Endpoint::new(Arc::new(server_config), engine_seed(2));
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
