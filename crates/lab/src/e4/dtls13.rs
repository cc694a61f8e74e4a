//! E4 in DTLS 1.3: the same mutually authenticated exchange as the 1.2 rows (a handshake, a
//! message each way, close), in 1.3 with certificate compression (RFC 8879) and ticket
//! resumption, with an x25519 key share and with the X25519MLKEM768 hybrid, beside seed 003's
//! TLS 1.3 figures (Fig. 5).
//!
//! Both sides offer compression for the other's chain (the server in its CertificateRequest), so
//! both chains go compressed. Every 1.3 handshake begins with the stateless HelloRetryRequest
//! and its cookie, as the 1.2 rows count the HelloVerifyRequest. Handshake caching (BiTHaC, seed
//! 003 §IV-D) runs after a first handshake that filled both caches: both Certificates go
//! abbreviated. With compression offered too, nothing is left to compress once both chains are
//! cached, so that row pays only the offer; compression earns its keep where a chain still
//! travels: the "other server" rows meet a server of the same service (same chain) whose
//! client-chain cache never saw this client, so the client's chain goes in full or compressed
//! beside an abbreviated server chain.

use super::bytes::Layers;
use super::chains::{chain_set, Chains};
use super::exchange::{self, Config};
use super::{dtls_mtu, pct};
use anyhow::Context;
use fastshake_dtls::{wire, CertificateCompression, CompressionAlgorithm, NamedGroup, Versions};
use serde::Serialize;
use std::sync::Arc;

/// What the measured 1.3 handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant13 {
    /// Full handshake, chains as they are.
    Vanilla,
    /// Full handshake, both chains compressed with this algorithm.
    Compressed(CompressionAlgorithm),
    /// Resumed with the ticket of an earlier handshake (psk_dhe_ke: a key share still).
    Ticket,
    /// Full handshake, both chains cached (seed 003 §IV-D): abbreviated Certificates.
    Bithac,
    /// The same, compression (this algorithm) offered on both sides too.
    BithacCompressed(CompressionAlgorithm),
    /// The client offers its session ticket and its caches; the server resumes.
    BithacTicket,
    /// BiTHaC at another server of the same service: only the server's chain is cached.
    BithacOtherServer,
    /// The same, compression (this algorithm) offered: the client's chain goes compressed.
    BithacOtherServerCompressed(CompressionAlgorithm),
}

impl Variant13 {
    pub const ALL: [Variant13; 10] = [
        Variant13::Vanilla,
        Variant13::Compressed(CompressionAlgorithm::Zlib),
        Variant13::Compressed(CompressionAlgorithm::Brotli),
        Variant13::Compressed(CompressionAlgorithm::Zstd),
        Variant13::Bithac,
        Variant13::BithacCompressed(CompressionAlgorithm::Zstd),
        Variant13::BithacOtherServer,
        Variant13::BithacOtherServerCompressed(CompressionAlgorithm::Zstd),
        Variant13::Ticket,
        Variant13::BithacTicket,
    ];

    /// The compression both sides offer: the variant's algorithm, if any.
    pub fn algorithms(self) -> Vec<CompressionAlgorithm> {
        match self {
            Variant13::Compressed(a)
            | Variant13::BithacCompressed(a)
            | Variant13::BithacOtherServerCompressed(a) => vec![a],
            _ => Vec::new(),
        }
    }

    /// The 1.2 configuration the variant's caches and sessions come from.
    pub fn config(self) -> Config {
        match self {
            Variant13::Vanilla | Variant13::Compressed(_) => Config::Vanilla,
            Variant13::Bithac | Variant13::BithacCompressed(_) => Config::Bithac,
            Variant13::Ticket => Config::Ticket,
            Variant13::BithacTicket => Config::BithacResumption,
            Variant13::BithacOtherServer | Variant13::BithacOtherServerCompressed(_) => {
                Config::BithacOtherServer
            }
        }
    }

    /// Whether the server's chain, and the client's, are left out (abbreviated Certificates).
    pub fn cached_chains(self) -> (bool, bool) {
        match self {
            Variant13::Bithac | Variant13::BithacCompressed(_) => (true, true),
            Variant13::BithacOtherServer | Variant13::BithacOtherServerCompressed(_) => (true, false),
            _ => (false, false),
        }
    }

    /// Whether both chains are left out.
    pub fn cached(self) -> bool {
        self.cached_chains() == (true, true)
    }

    /// Whether the handshake resumes.
    pub fn resumes(self) -> bool {
        matches!(self, Variant13::Ticket | Variant13::BithacTicket)
    }

    pub fn name(self) -> String {
        match self {
            Variant13::Vanilla => "vanilla".into(),
            Variant13::Compressed(a) => format!("RFC 8879 {a}"),
            Variant13::Ticket => "resumed (ticket)".into(),
            Variant13::Bithac => "BiTHaC".into(),
            Variant13::BithacCompressed(a) => format!("BiTHaC + {a}"),
            Variant13::BithacTicket => "BiTHaC + ticket".into(),
            Variant13::BithacOtherServer => "BiTHaC, other server".into(),
            Variant13::BithacOtherServerCompressed(a) => format!("BiTHaC + {a}, other srv"),
        }
    }

    /// A short name for plots.
    pub fn short(self) -> String {
        match self {
            Variant13::Vanilla => "vanilla".into(),
            Variant13::Compressed(a) => a.name().into(),
            Variant13::Ticket => "ticket".into(),
            Variant13::Bithac => "BiTHaC".into(),
            Variant13::BithacCompressed(a) => format!("BiTHaC+{}", a.name()),
            Variant13::BithacTicket => "BiTHaC+ticket".into(),
            Variant13::BithacOtherServer => "BiTHaC elsewhere".into(),
            Variant13::BithacOtherServerCompressed(a) => format!("BiTHaC+{} elsewhere", a.name()),
        }
    }
}

impl Serialize for Variant13 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// The key exchanges of the rows: the curve every 1.3 stack offers, and the hybrid Chromium
/// offers in every hello (1,216 bytes of key share each way more).
pub const GROUPS: [NamedGroup; 2] = [NamedGroup::X25519, NamedGroup::X25519MlKem768];
/// The MTUs of the 1.3 rows: Ethernet (seed 003's Fig. 5) and IEEE 802.15.4.
pub const MTUS: [usize; 2] = [1500, 127];

/// One 1.3 row.
#[derive(Clone, Debug, Serialize)]
pub struct Row13 {
    pub chains: Chains,
    pub group: &'static str,
    pub variant: Variant13,
    pub mtu: usize,
    pub handshake: Layers,
    pub exchange: Layers,
    /// Shares of the vanilla row's bytes (same chains, group and MTU; whole exchange), percent.
    pub dtls_pct: f64,
    pub ip_pct: f64,
    pub frames_pct: f64,
    /// The ClientHello the handshake went on (the second, with the cookie; or the only one) and
    /// the ServerHello, bodies as sent in plaintext, bytes.
    pub client_hello: usize,
    pub server_hello: usize,
    /// The server's and the client's Certificate bodies as sent (compressed or not), bytes.
    pub server_certificate: usize,
    pub client_certificate: usize,
    pub resumed: bool,
}

/// Both configurations of a 1.2 row made those of `variant` in DTLS 1.3 with `group`: both sides
/// offer (and use) only the variant's compression algorithm, if any.
pub(crate) fn configure13(
    client: &mut fastshake_dtls::ClientConfig,
    server: &mut fastshake_dtls::ServerConfig,
    variant: Variant13,
    group: NamedGroup,
) {
    let algorithms = variant.algorithms();
    client.versions = Versions::Dtls13;
    server.versions = Versions::Dtls13;
    client.groups = vec![group];
    server.groups = vec![group];
    client.certificate_compression = Arc::new(CertificateCompression::new(&algorithms));
    server.certificate_compression = Arc::new(CertificateCompression::new(&algorithms));
}

/// The body a chain goes in, as the engine writes it: the Certificate, the
/// CompressedCertificate of `algorithm`, or (`cached`) the abbreviated Certificate.
fn sent_body(
    chain: &[fastshake_pki::CertDer],
    algorithm: Option<CompressionAlgorithm>,
    cached: bool,
) -> usize {
    if cached {
        return wire::abbreviated_certificate13(chain.len()).len();
    }
    let certs: Vec<&[u8]> = chain.iter().map(|c| c.as_ref()).collect();
    let body = wire::certificate13(&certs);
    match algorithm {
        Some(a) => CertificateCompression::new(&[a]).compressed_message(a, &body).len(),
        None => body.len(),
    }
}

/// The bodies of the last ClientHello and the last ServerHello of a 1.3 handshake (the
/// HelloRetryRequest comes first), from the plaintext records that carry them: RFC 9147 §4's
/// DTLSPlaintext (13-byte header) before the first record with the unified header.
fn hellos(datagrams: &[exchange::Datagram]) -> anyhow::Result<(usize, usize)> {
    const HANDSHAKE: u8 = 22;
    let (mut client_hello, mut server_hello) = (0, 0);
    for d in datagrams {
        let mut rest = &d.payload[..];
        // A unified-header record (protected) is no DTLSPlaintext header: nothing plaintext follows.
        while let Ok(head) = wire::record_head(rest) {
            let body =
                rest.get(head.header_len()..head.record_len()).context("a truncated plaintext record")?;
            if head.content_type == HANDSHAKE && head.epoch == 0 {
                let f =
                    wire::fragment_head(body).map_err(|e| anyhow::anyhow!("a handshake fragment: {e:?}"))?;
                match (f.msg_type, f.offset, d.to_server) {
                    (1, 0, true) => client_hello = f.message_len as usize,
                    (2, 0, false) => server_hello = f.message_len as usize,
                    _ => {}
                }
            }
            rest = &rest[head.record_len()..];
        }
    }
    anyhow::ensure!(client_hello > 0 && server_hello > 0, "no ClientHello or ServerHello in the handshake");
    Ok((client_hello, server_hello))
}

/// The 1.3 rows of one chain set, group and MTU, vanilla first.
pub fn rows(chains: Chains, group: NamedGroup, mtu: usize) -> anyhow::Result<Vec<Row13>> {
    let set = chain_set(chains)?;
    let mut rows: Vec<Row13> = Vec::new();
    for variant in Variant13::ALL {
        let config = variant.config();
        let adjust = |client: &mut fastshake_dtls::ClientConfig,
                      server: &mut fastshake_dtls::ServerConfig| {
            configure13(client, server, variant, group)
        };
        let ex = exchange::run_adjusted(&set, chains, config, dtls_mtu(mtu), 7, adjust)?;
        anyhow::ensure!(ex.client.version == Versions::Dtls13, "{}: not DTLS 1.3", variant.name());
        let resumed = ex.client.resumed && ex.server.resumed;
        anyhow::ensure!(resumed == variant.resumes(), "{}: resumed={resumed}", variant.name());
        let used = ex.client.from_cache;
        let (server_cached, client_cached) = variant.cached_chains();
        anyhow::ensure!(
            (used.server_certificate, used.client_certificate) == (server_cached, client_cached)
                && ex.server.from_cache.client_certificate == client_cached,
            "{}: from the caches {used:?}",
            variant.name()
        );
        let algorithm = variant.algorithms().first().copied();
        let (server_compressed, client_compressed) =
            (ex.client.certificate_compression_received, ex.client.certificate_compression_sent);
        anyhow::ensure!(
            resumed
                || (server_compressed == algorithm.filter(|_| !server_cached)
                    && client_compressed == algorithm.filter(|_| !client_cached)),
            "{}: the chains came {server_compressed:?} and went {client_compressed:?}",
            variant.name()
        );
        let (client_hello, server_hello) = hellos(&ex.handshake)?;
        let handshake = Layers::of(&ex.handshake)?;
        let mut whole = handshake;
        whole.add(&Layers::of(&ex.after)?);
        let (server_certificate, client_certificate) = if resumed {
            (0, 0)
        } else {
            (
                sent_body(&set.server.chain, server_compressed, server_cached),
                sent_body(&set.client.chain, client_compressed, client_cached),
            )
        };
        let mut row = Row13 {
            chains,
            group: group.name(),
            variant,
            mtu,
            handshake,
            exchange: whole,
            dtls_pct: 100.0,
            ip_pct: 100.0,
            frames_pct: 100.0,
            client_hello,
            server_hello,
            server_certificate,
            client_certificate,
            resumed,
        };
        if let Some(v) = rows.first() {
            row.dtls_pct = pct(row.exchange.dtls, v.exchange.dtls);
            row.ip_pct = pct(row.exchange.ip_total(), v.exchange.ip_total());
            row.frames_pct = pct(row.exchange.psdu_bytes_802154, v.exchange.psdu_bytes_802154);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Seed 003, Fig. 5 (TLS 1.3 over TCP, MTU 1500, all layers): BiTHaC saves 54.89 % (more than
/// 3.3 kB) of vanilla, and ticket resumption 452 B more, 16.58 % of BiTHaC's bytes. So BiTHaC
/// leaves 45.11 % of vanilla (2,726 B of about 6,043 B) and resumption 37.63 % (2,274 B).
pub const PAPER_BITHAC13_SHARE: f64 = 45.11;
pub const PAPER_TICKET13_SHARE: f64 = 45.11 * (1.0 - 0.1658);
pub const PAPER_TICKET13_BELOW_BITHAC: f64 = 452.0;

/// The row of `variant` over `chains` at `mtu` with `group`, as the report and the figures find it.
pub fn find(
    rows: &[Row13],
    chains: Chains,
    group: NamedGroup,
    mtu: usize,
    variant: Variant13,
) -> Option<&Row13> {
    rows.iter()
        .find(|r| r.chains == chains && r.group == group.name() && r.mtu == mtu && r.variant == variant)
}

/// The best compression's row of `chains` at `mtu` with `group`: the fewest bytes.
pub fn best_compression(rows: &[Row13], chains: Chains, group: NamedGroup, mtu: usize) -> Option<&Row13> {
    rows.iter()
        .filter(|r| r.chains == chains && r.group == group.name() && r.mtu == mtu)
        .filter(|r| matches!(r.variant, Variant13::Compressed(_)))
        .min_by_key(|r| r.exchange.ip_total())
}

/// The 1.3 table.
pub fn print(rows: &[Row13]) {
    println!(
        "DTLS 1.3 (RFC 9147): the same exchange, mutual authentication, TLS_AES_128_GCM_SHA256, the cookie \
         exchange included"
    );
    println!(
        "{:<40} {:<15} {:>5} {:<18} {:>4} {:>7} {:>9} {:>8} {:>7} {:>8} {:>6} {:>6} {:>9} {:>9}",
        "chains",
        "group",
        "MTU",
        "handshake",
        "dgr",
        "DTLS B",
        "+UDP/IP B",
        "% vanil",
        "frames",
        "% frames",
        "CH",
        "SH",
        "srv cert",
        "cli cert"
    );
    for r in rows {
        println!(
            "{:<40} {:<15} {:>5} {:<18} {:>4} {:>7} {:>9} {:>7.1}% {:>7} {:>7.1}% {:>6} {:>6} {:>9} {:>9}",
            r.chains.name(),
            r.group,
            r.mtu,
            r.variant.name(),
            r.exchange.datagrams,
            r.exchange.dtls,
            r.exchange.ip_total(),
            r.ip_pct,
            r.exchange.frames_802154,
            r.frames_pct,
            r.client_hello,
            r.server_hello,
            r.server_certificate,
            r.client_certificate,
        );
    }
}
