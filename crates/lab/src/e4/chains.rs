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
}

impl Chains {
    pub const ALL: [Chains; 3] = [Chains::Rsa2048, Chains::P256, Chains::Rsa4096Server];

    pub fn name(self) -> &'static str {
        match self {
            Chains::Rsa2048 => "RSA-2048 x3 both",
            Chains::P256 => "P-256 x3 both",
            Chains::Rsa4096Server => "RSA-4096 x3 server, RSA-2048 x3 client",
        }
    }

    /// An AES-GCM suite: the same 24 bytes per protected record as the paper's
    /// ECDHE-RSA-AES256-GCM-SHA384.
    pub fn suite(self) -> CipherSuite {
        match self {
            Chains::P256 => CipherSuite::EcdheEcdsaWithAes128GcmSha256,
            Chains::Rsa2048 | Chains::Rsa4096Server => CipherSuite::EcdheRsaWithAes128GcmSha256,
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

fn rsa_pki(kind: KeyKind, seed: u64) -> Result<TestPki, String> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    generate_with_rng(3, kind, &[], MADE_AT, 3650, &mut rng).map_err(|e| e.to_string())
}

fn rsa2048() -> Result<&'static TestPki, String> {
    static PKI: OnceLock<Result<TestPki, String>> = OnceLock::new();
    PKI.get_or_init(|| rsa_pki(KeyKind::Rsa2048, 2048)).as_ref().map_err(Clone::clone)
}

fn rsa4096() -> Result<&'static TestPki, String> {
    static PKI: OnceLock<Result<TestPki, String>> = OnceLock::new();
    PKI.get_or_init(|| rsa_pki(KeyKind::Rsa4096, 4096)).as_ref().map_err(Clone::clone)
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
        Chains::Rsa2048 => {
            let pki = rsa2048().map_err(anyhow::Error::msg)?;
            ChainSet {
                server: Arc::new(pki.server_certified_key()?),
                client: Arc::new(pki.client_certified_key()?),
                server_anchors: anchors(pki)?,
                client_anchors: anchors(pki)?,
                wall_clock: WALL_CLOCK,
            }
        }
        Chains::Rsa4096Server => {
            let (server_pki, client_pki) =
                (rsa4096().map_err(anyhow::Error::msg)?, rsa2048().map_err(anyhow::Error::msg)?);
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
