//! The credential flags every DTLS command takes (`fastshake server`, `fastshake client`,
//! `fastshake bench load`): one definition, so they parse the same everywhere.

use anyhow::Context;
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{CertifiedKey, CipherSuite, Psk, TrustAnchors, MIN_MTU};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `--psk-identity/--psk`, `--cert/--key`, `--ca` and `--suite`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CredentialArgs {
    /// PSK identity (RFC 4279), sent in the clear; needs --psk.
    #[arg(long, value_name = "ID", requires = "psk")]
    pub psk_identity: Option<String>,
    /// Pre-shared key in hex (e.g. 00112233445566778899aabbccddeeff); needs --psk-identity.
    #[arg(long, value_name = "HEX", value_parser = parse_hex_key, requires = "psk_identity")]
    pub psk: Option<HexKey>,
    /// Our certificate chain, PEM: the leaf first, then its intermediates (never the root).
    /// Server: enables the ECDHE certificate suites. Client: sent when the server asks.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The private key of --cert, PKCS#8 PEM.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Trust anchors (root certificates), PEM. Client: the server's chain must lead to one
    /// (enables the certificate suites). Server: the clients' chains must (with --client-auth).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Cipher suite by IANA name; repeat to allow several (default: every suite the given
    /// credentials allow, PSK first). The suites given also pick the DTLS version when --dtls
    /// is left out: only 1.2 suites, 1.2; only 1.3 suites, 1.3. DTLS 1.2:
    /// TLS_PSK_WITH_AES_128_CCM_8, TLS_PSK_WITH_AES_128_GCM_SHA256,
    /// TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    /// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256. DTLS 1.3: TLS_AES_128_GCM_SHA256,
    /// TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_CCM_SHA256,
    /// TLS_AES_128_CCM_8_SHA256.
    #[arg(long = "suite", value_name = "IANA_NAME", value_parser = parse_suite)]
    pub suites: Vec<CipherSuite>,
}

/// The shortest PSK taken without a warning: 128 bits (RFC 9257 §6).
pub const MIN_PSK_BYTES: usize = 16;

/// A key given in hex on the command line (a newtype so clap takes it as one value, not many).
#[derive(Clone, Debug)]
pub struct HexKey(pub Vec<u8>);

fn parse_hex_key(s: &str) -> Result<HexKey, String> {
    let key = hex::decode(s.trim_start_matches("0x")).map_err(|e| format!("not a hex key: {e}"))?;
    if key.is_empty() {
        return Err("the key is empty".to_owned());
    }
    Ok(HexKey(key))
}

fn parse_suite(s: &str) -> Result<CipherSuite, String> {
    CipherSuite::from_iana_name(s).ok_or_else(|| {
        let known: Vec<&str> =
            CipherSuite::ALL.iter().chain(CipherSuite::TLS13).map(|c| c.iana_name()).collect();
        format!("unknown cipher suite; known: {}", known.join(", "))
    })
}

/// `--mtu`: a UDP payload size the engines accept.
pub fn parse_mtu(s: &str) -> Result<usize, String> {
    let mtu: usize = s.parse().map_err(|e| format!("{e}"))?;
    if !(MIN_MTU..=65_507).contains(&mtu) {
        return Err(format!("the MTU must be between {MIN_MTU} and 65507 bytes"));
    }
    Ok(mtu)
}

fn read_file(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read the {what} {}", path.display()))
}

impl CredentialArgs {
    /// `--psk-identity` with `--psk`.
    pub fn psk(&self) -> Option<Psk> {
        match (&self.psk_identity, &self.psk) {
            (Some(identity), Some(key)) => Some(Psk::new(identity.as_bytes(), key.0.clone())),
            _ => None,
        }
    }

    /// A warning for a `--psk` shorter than 16 bytes: RFC 9257 §6 wants an external PSK of at
    /// least 128 bits, drawn from as much entropy, and a shorter one can be guessed off-line
    /// from one recorded handshake.
    pub fn weak_psk_warning(&self) -> Option<String> {
        let key = self.psk.as_ref()?;
        (key.0.len() < MIN_PSK_BYTES).then(|| {
            format!(
                "warning: the --psk is {} byte(s) ({} bits); RFC 9257 wants at least {MIN_PSK_BYTES} random \
                 bytes (128 bits), and a shorter key can be guessed from one recorded handshake",
                key.0.len(),
                key.0.len() * 8
            )
        })
    }

    /// `--cert` and `--key`, read and checked to belong together.
    pub fn certified_key(&self) -> anyhow::Result<Option<Arc<CertifiedKey>>> {
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Ok(None);
        };
        let chain_pem = read_file(cert, "certificate chain")?;
        let key_pem = read_file(key, "private key")?;
        let certified = CertifiedKey::from_pem(&chain_pem, &key_pem).with_context(|| {
            format!("cannot use the certificate {} with the key {}", cert.display(), key.display())
        })?;
        Ok(Some(Arc::new(certified)))
    }

    /// `--ca`, read.
    pub fn trust_anchors(&self) -> anyhow::Result<Option<Arc<TrustAnchors>>> {
        let Some(ca) = &self.ca else {
            return Ok(None);
        };
        let pem = read_file(ca, "trust anchors")?;
        let anchors = TrustAnchors::from_pem(&pem)
            .with_context(|| format!("no usable root certificate in {}", ca.display()))?;
        Ok(Some(Arc::new(anchors)))
    }

    /// The DTLS 1.2 `--suite`s given, or every 1.2 suite.
    pub fn suites(&self) -> Vec<CipherSuite> {
        let given: Vec<CipherSuite> = self.suites.iter().copied().filter(|s| !s.is_tls13()).collect();
        if given.is_empty() {
            CipherSuite::ALL.to_vec()
        } else {
            given
        }
    }

    /// The DTLS 1.3 `--suite`s given, or every 1.3 suite.
    pub fn suites13(&self) -> Vec<Suite13> {
        let given: Vec<Suite13> = self.suites.iter().filter_map(|s| s.tls13()).collect();
        if given.is_empty() {
            Suite13::ALL.to_vec()
        } else {
            given
        }
    }

    /// The first `--suite` given of DTLS 1.2 and the first of DTLS 1.3, by IANA name.
    pub fn suites_given(&self) -> (Option<&'static str>, Option<&'static str>) {
        let first = |tls13: bool| self.suites.iter().find(|s| s.is_tls13() == tls13).map(|s| s.iana_name());
        (first(false), first(true))
    }

    /// What a banner says the side authenticates with.
    pub fn credentials(&self, certificate: bool) -> &'static str {
        match (self.psk.is_some(), certificate) {
            (true, true) => "PSK and certificates",
            (true, false) => "PSK",
            (false, _) => "certificates",
        }
    }
}

/// The host part of `host:port` or `[v6]:port`, as the name the server certificate must carry.
pub fn host_of(connect: &str) -> Option<String> {
    let host = match connect.strip_prefix('[') {
        Some(rest) => rest.split(']').next()?,
        None => connect.rsplit_once(':').map_or(connect, |(host, _)| host),
    };
    (!host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_server_name_is_the_host_of_connect() {
        assert_eq!(host_of("localhost:4433").as_deref(), Some("localhost"));
        assert_eq!(host_of("127.0.0.1:4433").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_of("[::1]:4433").as_deref(), Some("::1"));
        assert_eq!(host_of(":4433"), None);
    }
}
