//! The lab's fixed test PKI: the certificates of the chaos soak's ECDHE-ECDSA cells and of the
//! `dtls-*` scenario apps with a certificate suite.
//!
//! A PKI made by `fastshake_pki::generate` (`fastshake pki --chain-len 3 --key p256`) draws its
//! keys and signatures from the OS, and a few bytes of DER length differ from one PKI to the
//! next: enough to move a flight across a 96-byte datagram boundary and change every later
//! random draw of a run. So the lab uses one such PKI, generated once and kept beside this
//! file, and validates it at a fixed date; the soak's `--fresh-pki` makes a new one instead (the
//! run is then no longer reproducible).

use fastshake_dtls::{CertifiedKey, Instant, TrustAnchors, WallClock};
use fastshake_pki::generate::{generate, KeyKind};
use std::sync::Arc;

/// Unix time the kept PKI was made at; its certificates are valid for ten years from then.
const MADE_AT: u64 = 1_795_482_613;

/// The engine's wall clock in every cell: a day after the PKI was made.
pub const WALL_CLOCK: WallClock = WallClock { at: Instant::ZERO, unix_secs: MADE_AT + 86_400 };

/// The server and client chains (leaf and two intermediates each) and the root both trust.
pub struct LabPki {
    pub server: Arc<CertifiedKey>,
    pub client: Arc<CertifiedKey>,
    pub anchors: Arc<TrustAnchors>,
}

impl LabPki {
    /// The kept PKI.
    pub fn kept() -> anyhow::Result<LabPki> {
        let (ca, server, client) = kept_pem();
        Self::from_pem(ca, server.0, server.1, client.0, client.1)
    }

    /// A new PKI of the same shape, valid at [`WALL_CLOCK`].
    pub fn fresh() -> anyhow::Result<LabPki> {
        let pki = generate(3, KeyKind::P256, &[], MADE_AT, 3650)?;
        Self::from_pem(
            pki.ca_pem(),
            &pki.server_chain_pem(),
            &pki.server.key_pem,
            &pki.client_chain_pem(),
            &pki.client.key_pem,
        )
    }

    fn from_pem(
        ca: &str,
        server: &str,
        server_key: &str,
        client: &str,
        client_key: &str,
    ) -> anyhow::Result<LabPki> {
        let server = CertifiedKey::from_pem(server.as_bytes(), server_key.as_bytes())?;
        let client = CertifiedKey::from_pem(client.as_bytes(), client_key.as_bytes())?;
        anyhow::ensure!(
            server.chain.len() == 3 && client.chain.len() == 3,
            "the lab's chains are 3 certificates long"
        );
        Ok(LabPki {
            server: Arc::new(server),
            client: Arc::new(client),
            anchors: Arc::new(TrustAnchors::from_pem(ca.as_bytes())?),
        })
    }
}

/// The kept PKI as PEM: the root, the server's chain and key, the client's chain and key.
pub fn kept_pem() -> (&'static str, (&'static str, &'static str), (&'static str, &'static str)) {
    (
        include_str!("pki/ca.pem"),
        (include_str!("pki/server.pem"), include_str!("pki/server.key")),
        (include_str!("pki/client.pem"), include_str!("pki/client.key")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_pki_sends_three_certificates_per_side() {
        let pki = LabPki::kept().unwrap();
        assert_eq!(pki.server.chain.len(), 3);
        assert_eq!(pki.client.chain.len(), 3);
    }
}
