//! The certificate chains E4 runs: seed 003's three RSA-2048 certificates per side, three P-256,
//! and a 4096-bit RSA server chain. Each is made once per process and kept (RSA-4096 generation
//! takes seconds); the RSA PKIs come from seeded generators, so every run sends the same bytes.

use crate::pki::{LabPki, WALL_CLOCK};
use fastshake_dtls::{CertifiedKey, CipherSuite, TrustAnchors, WallClock};
use fastshake_pki::generate::{generate_with_rng, KeyKind, TestPki};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::sync::{Arc, OnceLock};

/// Which chains both sides send (leaf and two intermediates; the root is never sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Chains {
    /// Seed 003's setup: three RSA-2048 certificates on each side, mutual authentication.
    Rsa2048,
    /// Three P-256 certificates on each side (the lab's kept PKI).
    P256,
    /// Seed 003's "4096-bit RSA certificate chain for the server"; the client keeps RSA-2048.
    Rsa4096Server,
    /// The other reading of the paper's "chain of three ... root not transmitted": root,
    /// intermediate and leaf, so two certificates sent per side. RSA-2048 both.
    Rsa2048Two,
    /// The same reading with the RSA-4096 server chain.
    Rsa4096ServerTwo,
}

impl Chains {
    pub const ALL: [Chains; 3] = [Chains::Rsa2048, Chains::P256, Chains::Rsa4096Server];
    /// Two certificates sent per side: for the byte figures only.
    pub const OTHER_READING: [Chains; 2] = [Chains::Rsa2048Two, Chains::Rsa4096ServerTwo];

    pub fn name(self) -> &'static str {
        match self {
            Chains::Rsa2048 => "RSA-2048 x3 both",
            Chains::P256 => "P-256 x3 both",
            Chains::Rsa4096Server => "RSA-4096 x3 server, RSA-2048 x3 client",
            Chains::Rsa2048Two => "RSA-2048 x2 both",
            Chains::Rsa4096ServerTwo => "RSA-4096 x2 server, RSA-2048 x2 client",
        }
    }

    /// An AES-GCM suite: the same 24 bytes per protected record as the paper's
    /// ECDHE-RSA-AES256-GCM-SHA384.
    pub fn suite(self) -> CipherSuite {
        match self {
            Chains::P256 => CipherSuite::EcdheEcdsaWithAes128GcmSha256,
            _ => CipherSuite::EcdheRsaWithAes128GcmSha256,
        }
    }
}

/// Keys, chains and anchors of one row.
pub struct ChainSet {
    pub server: Arc<CertifiedKey>,
    pub client: Arc<CertifiedKey>,
    /// What the client trusts (the server chain's root), and the server (the client's).
    pub server_anchors: Arc<TrustAnchors>,
    pub client_anchors: Arc<TrustAnchors>,
    pub wall_clock: WallClock,
}

impl ChainSet {
    /// DER bytes of the server's and the client's chain as sent.
    pub fn der_bytes(&self) -> (usize, usize) {
        let sum = |k: &CertifiedKey| k.chain.iter().map(|c| c.len()).sum::<usize>();
        (sum(&self.server), sum(&self.client))
    }
}

/// Generated at the kept PKI's date, so [`WALL_CLOCK`] fits every chain.
const MADE_AT: u64 = WALL_CLOCK.unix_secs - 86_400;

fn rsa_pki(kind: KeyKind, sent: usize, seed: u64) -> Result<TestPki, String> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    generate_with_rng(sent, kind, &[], MADE_AT, 3650, &mut rng).map_err(|e| e.to_string())
}

/// The RSA PKI of `bits` sending `sent` certificates per chain, made once per process.
fn rsa(bits: usize, sent: usize) -> anyhow::Result<&'static TestPki> {
    type Kept = OnceLock<Result<TestPki, String>>;
    static KEPT: [Kept; 4] = [Kept::new(), Kept::new(), Kept::new(), Kept::new()];
    let (slot, kind) = match (bits, sent) {
        (2048, 3) => (0, KeyKind::Rsa2048),
        (4096, 3) => (1, KeyKind::Rsa4096),
        (2048, 2) => (2, KeyKind::Rsa2048),
        (4096, 2) => (3, KeyKind::Rsa4096),
        _ => anyhow::bail!("no RSA-{bits} PKI sending {sent}"),
    };
    KEPT[slot]
        .get_or_init(|| rsa_pki(kind, sent, (bits * 10 + sent) as u64))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn build(chains: Chains) -> anyhow::Result<ChainSet> {
    let anchors = |pki: &TestPki| TrustAnchors::from_pem(pki.ca_pem().as_bytes()).map(Arc::new);
    Ok(match chains {
        Chains::P256 => {
            let pki = LabPki::kept()?;
            ChainSet {
                server: pki.server,
                client: pki.client,
                server_anchors: pki.anchors.clone(),
                client_anchors: pki.anchors,
                wall_clock: WALL_CLOCK,
            }
        }
        Chains::Rsa2048 | Chains::Rsa2048Two => {
            let pki = rsa(2048, if chains == Chains::Rsa2048 { 3 } else { 2 })?;
            ChainSet {
                server: Arc::new(pki.server_certified_key()?),
                client: Arc::new(pki.client_certified_key()?),
                server_anchors: anchors(pki)?,
                client_anchors: anchors(pki)?,
                wall_clock: WALL_CLOCK,
            }
        }
        Chains::Rsa4096Server | Chains::Rsa4096ServerTwo => {
            let sent = if chains == Chains::Rsa4096Server { 3 } else { 2 };
            let (server_pki, client_pki) = (rsa(4096, sent)?, rsa(2048, sent)?);
            ChainSet {
                server: Arc::new(server_pki.server_certified_key()?),
                client: Arc::new(client_pki.client_certified_key()?),
                server_anchors: anchors(server_pki)?,
                client_anchors: anchors(client_pki)?,
                wall_clock: WALL_CLOCK,
            }
        }
    })
}

/// The chains of `chains`, made on first use.
pub fn chain_set(chains: Chains) -> anyhow::Result<ChainSet> {
    build(chains)
}

/// A row's chains as PEM, for other stacks (the OpenSSL anchor of `fastshake bench caching`).
pub struct ChainPems {
    pub server_chain: String,
    pub server_key: String,
    /// The root the client trusts (the server chain's).
    pub server_root: String,
    pub client_chain: String,
    pub client_key: String,
    pub client_root: String,
}

/// The PEM of the chains of `chains`.
pub fn pems(chains: Chains) -> anyhow::Result<ChainPems> {
    let of = |server: &TestPki, client: &TestPki| ChainPems {
        server_chain: server.server_chain_pem(),
        server_key: server.server.key_pem.to_string(),
        server_root: server.ca_pem().to_string(),
        client_chain: client.client_chain_pem(),
        client_key: client.client.key_pem.to_string(),
        client_root: client.ca_pem().to_string(),
    };
    Ok(match chains {
        Chains::P256 => {
            let (ca, server, client) = crate::pki::kept_pem();
            ChainPems {
                server_chain: server.0.into(),
                server_key: server.1.into(),
                server_root: ca.into(),
                client_chain: client.0.into(),
                client_key: client.1.into(),
                client_root: ca.into(),
            }
        }
        Chains::Rsa2048 => of(rsa(2048, 3)?, rsa(2048, 3)?),
        Chains::Rsa2048Two => of(rsa(2048, 2)?, rsa(2048, 2)?),
        Chains::Rsa4096Server => of(rsa(4096, 3)?, rsa(2048, 3)?),
        Chains::Rsa4096ServerTwo => of(rsa(4096, 2)?, rsa(2048, 2)?),
    })
}
