//! A test PKI: one root, a line of intermediates, and a server and a client leaf, as PEM that
//! OpenSSL, GnuTLS and this crate read directly. Built with rcgen; RSA keys come from the `rsa`
//! crate (rcgen on ring cannot generate them) and are handed to rcgen and ring as PKCS#8.
//!
//! Both leaves hang under the same intermediates, so one `ca.pem` authenticates both sides.
//! Every certificate uses the same key kind and the same validity window.

use std::fmt;
use std::str::FromStr;

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::PrivatePkcs8KeyDer;
use time::OffsetDateTime;
use zeroize::Zeroizing;

use crate::{CertDer, CertifiedKey, PkiError};

/// The key kind of every certificate of a test PKI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// ECDSA on P-256, certificates signed with ecdsa-with-SHA256.
    P256,
    /// RSA 2048-bit, certificates signed with sha256WithRSAEncryption.
    Rsa2048,
    /// RSA 4096-bit (generation takes seconds), sha256WithRSAEncryption.
    Rsa4096,
}

impl KeyKind {
    /// The command-line spelling.
    pub const fn name(self) -> &'static str {
        match self {
            KeyKind::P256 => "p256",
            KeyKind::Rsa2048 => "rsa2048",
            KeyKind::Rsa4096 => "rsa4096",
        }
    }

    fn new_key_pair(self, rng: &mut dyn rand_core::CryptoRngCore) -> Result<KeyPair, PkiError> {
        let rsa_bits = match self {
            KeyKind::P256 => {
                return KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(generate_error)
            }
            KeyKind::Rsa2048 => 2048,
            KeyKind::Rsa4096 => 4096,
        };
        use rsa::pkcs8::EncodePrivateKey;
        let private = rsa::RsaPrivateKey::new(rng, rsa_bits)
            .map_err(|e| PkiError::Generate(format!("RSA-{rsa_bits} key: {e}")))?;
        let pkcs8 =
            private.to_pkcs8_der().map_err(|e| PkiError::Generate(format!("RSA-{rsa_bits} PKCS#8: {e}")))?;
        // `pkcs8` zeroizes its bytes on drop; rcgen keeps its own copy to serialize.
        KeyPair::from_pkcs8_der_and_sign_algo(
            &PrivatePkcs8KeyDer::from(pkcs8.as_bytes()),
            &rcgen::PKCS_RSA_SHA256,
        )
        .map_err(generate_error)
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "p256" => Ok(KeyKind::P256),
            "rsa2048" => Ok(KeyKind::Rsa2048),
            "rsa4096" => Ok(KeyKind::Rsa4096),
            other => Err(format!("unknown key kind {other:?} (p256, rsa2048 or rsa4096)")),
        }
    }
}

/// One generated certificate.
#[derive(Clone, Debug)]
pub struct GeneratedCert {
    /// The subject's common name.
    pub subject: String,
    /// DER.
    pub der: CertDer,
    /// PEM (`BEGIN CERTIFICATE`).
    pub pem: String,
}

/// A generated leaf with its private key.
#[derive(Clone)]
pub struct GeneratedLeaf {
    /// The certificate.
    pub cert: GeneratedCert,
    /// The private key as PKCS#8 PEM (`BEGIN PRIVATE KEY`), zeroized on drop.
    pub key_pem: Zeroizing<String>,
}

impl fmt::Debug for GeneratedLeaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeneratedLeaf").field("cert", &self.cert).finish_non_exhaustive()
    }
}

/// A root, its intermediates and two leaves.
#[derive(Clone, Debug)]
pub struct TestPki {
    /// Key kind of every certificate.
    pub key_kind: KeyKind,
    /// The self-signed root (the trust anchor; never sent).
    pub root: GeneratedCert,
    /// Intermediates from the one the root signed to the one that signs the leaves.
    pub intermediates: Vec<GeneratedCert>,
    /// The server leaf: `serverAuth`, named by the server names.
    pub server: GeneratedLeaf,
    /// The client leaf: `clientAuth`.
    pub client: GeneratedLeaf,
}

impl TestPki {
    /// The chain a Certificate message carries: the leaf, then the intermediates nearest first.
    fn chain_of(&self, leaf: &GeneratedCert) -> Vec<CertDer> {
        std::iter::once(leaf.der.clone())
            .chain(self.intermediates.iter().rev().map(|c| c.der.clone()))
            .collect()
    }

    fn chain_pem_of(&self, leaf: &GeneratedCert) -> String {
        std::iter::once(leaf.pem.as_str())
            .chain(self.intermediates.iter().rev().map(|c| c.pem.as_str()))
            .collect()
    }

    /// The server's chain, leaf first, without the root.
    pub fn server_chain(&self) -> Vec<CertDer> {
        self.chain_of(&self.server.cert)
    }

    /// The client's chain, leaf first, without the root.
    pub fn client_chain(&self) -> Vec<CertDer> {
        self.chain_of(&self.client.cert)
    }

    /// `server.pem`: the server leaf followed by its intermediates.
    pub fn server_chain_pem(&self) -> String {
        self.chain_pem_of(&self.server.cert)
    }

    /// `client.pem`: the client leaf followed by its intermediates.
    pub fn client_chain_pem(&self) -> String {
        self.chain_pem_of(&self.client.cert)
    }

    /// `ca.pem`: the root alone.
    pub fn ca_pem(&self) -> &str {
        &self.root.pem
    }

    /// The server's chain and key, as the engine takes them.
    pub fn server_certified_key(&self) -> Result<CertifiedKey, PkiError> {
        CertifiedKey::from_pem(self.server_chain_pem().as_bytes(), self.server.key_pem.as_bytes())
    }

    /// The client's chain and key, as the engine takes them.
    pub fn client_certified_key(&self) -> Result<CertifiedKey, PkiError> {
        CertifiedKey::from_pem(self.client_chain_pem().as_bytes(), self.client.key_pem.as_bytes())
    }
}

/// A fresh private key without a certificate (for tests that need "another key").
pub struct GeneratedKey {
    /// The private key as PKCS#8 PEM, zeroized on drop.
    pub pkcs8_pem: Zeroizing<String>,
    /// The public key as DER SubjectPublicKeyInfo.
    pub spki_der: Vec<u8>,
}

/// Generates one private key of `kind` (RSA-4096 takes seconds).
pub fn generate_key(kind: KeyKind) -> Result<GeneratedKey, PkiError> {
    let key = kind.new_key_pair(&mut rand_core::OsRng)?;
    Ok(GeneratedKey { pkcs8_pem: Zeroizing::new(key.serialize_pem()), spki_der: key.public_key_der() })
}

/// The names a server certificate carries when none are given.
pub const DEFAULT_SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// Generates a PKI whose leaves are sent with `chain_len` certificates: the leaf and
/// `chain_len - 1` intermediates, under a root (so `chain_len + 1` certificates in a path).
///
/// `server_names` are DNS names or IP addresses (default [`DEFAULT_SERVER_NAMES`]). Every
/// certificate is valid from an hour before `now_unix_secs` (clock skew) for `validity_days`.
pub fn generate(
    chain_len: usize,
    key_kind: KeyKind,
    server_names: &[String],
    now_unix_secs: u64,
    validity_days: u32,
) -> Result<TestPki, PkiError> {
    generate_with_rng(chain_len, key_kind, server_names, now_unix_secs, validity_days, &mut rand_core::OsRng)
}

/// [`generate`] with RSA keys drawn from `rng`: a seeded `rng` gives the same RSA PKI, byte for
/// byte, every time (RSA PKCS#1 v1.5 signatures and the serials, hashed from the keys, are
/// deterministic). P-256 keys and ECDSA signatures still come from ring's own randomness.
pub fn generate_with_rng(
    chain_len: usize,
    key_kind: KeyKind,
    server_names: &[String],
    now_unix_secs: u64,
    validity_days: u32,
    rng: &mut dyn rand_core::CryptoRngCore,
) -> Result<TestPki, PkiError> {
    if chain_len == 0 || chain_len > 16 {
        return Err(PkiError::Generate(format!("chain length {chain_len}: need 1 to 16")));
    }
    if validity_days == 0 {
        return Err(PkiError::Generate("validity of 0 days".into()));
    }
    // A name our own validator would refuse is a mistake, whatever rcgen would encode.
    if let Some(bad) =
        server_names.iter().find(|name| rustls_pki_types::ServerName::try_from(name.as_str()).is_err())
    {
        return Err(PkiError::InvalidServerName(bad.clone()));
    }
    let names: Vec<String> = if server_names.is_empty() {
        DEFAULT_SERVER_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        server_names.to_vec()
    };
    let not_before = unix_to_time(now_unix_secs.saturating_sub(3600))?;
    let not_after = unix_to_time(now_unix_secs.saturating_add(u64::from(validity_days) * 86_400))?;
    let window = |mut params: CertificateParams, cn: &str| {
        params.not_before = not_before;
        params.not_after = not_after;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "fastshake test PKI");
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        params
    };
    let ca_params = |cn: &str, below: usize| {
        let mut params = window(CertificateParams::default(), cn);
        // pathLenConstraint: how many intermediates may still follow this CA.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(below.min(255) as u8));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        params
    };

    let root_key = key_kind.new_key_pair(rng)?;
    // Names unique to this PKI, so two generated PKIs never share an issuer name.
    let pki_id: String = ring::digest::digest(&ring::digest::SHA256, root_key.public_key_raw())
        .as_ref()
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    let root_name = format!("fastshake test root {key_kind} {pki_id}");
    let root_cert = ca_params(&root_name, chain_len - 1).self_signed(&root_key).map_err(generate_error)?;
    let root = generated(&root_name, &root_cert);

    let mut intermediates = Vec::with_capacity(chain_len - 1);
    let mut issuer = (root_cert, root_key);
    for level in 1..chain_len {
        let name = format!("fastshake test intermediate {level} {key_kind} {pki_id}");
        let key = key_kind.new_key_pair(rng)?;
        let cert = ca_params(&name, chain_len - 1 - level)
            .signed_by(&key, &issuer.0, &issuer.1)
            .map_err(generate_error)?;
        intermediates.push(generated(&name, &cert));
        issuer = (cert, key);
    }

    let mut leaf = |cn: &str, sans: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let params =
            CertificateParams::new(sans).map_err(|e| PkiError::Generate(format!("server name: {e}")))?;
        let mut params = window(params, cn);
        // No basicConstraints on a leaf (RFC 5280 §4.2.1.9 allows it): rcgen's explicit form
        // encodes cA FALSE, a DEFAULT value DER forbids, which wolfSSL refuses to parse.
        params.is_ca = IsCa::NoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let key = key_kind.new_key_pair(rng)?;
        let cert = params.signed_by(&key, &issuer.0, &issuer.1).map_err(generate_error)?;
        Ok::<_, PkiError>(GeneratedLeaf {
            cert: generated(cn, &cert),
            key_pem: Zeroizing::new(key.serialize_pem()),
        })
    };
    let server = leaf(
        &format!("fastshake test server {key_kind} {pki_id}"),
        names,
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let client = leaf(
        &format!("fastshake test client {key_kind} {pki_id}"),
        Vec::new(),
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    Ok(TestPki { key_kind, root, intermediates, server, client })
}

fn generated(subject: &str, cert: &Certificate) -> GeneratedCert {
    GeneratedCert { subject: subject.to_owned(), der: cert.der().clone(), pem: cert.pem() }
}

fn unix_to_time(secs: u64) -> Result<OffsetDateTime, PkiError> {
    i64::try_from(secs)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .ok_or_else(|| PkiError::Generate(format!("time {secs} out of range")))
}

fn generate_error(e: rcgen::Error) -> PkiError {
    PkiError::Generate(e.to_string())
}

/// A self-signed ECDSA P-256 certificate and its key, as a WebRTC endpoint makes for each
/// session (RFC 8827 §6.5): the peer trusts it by the fingerprint signalled in SDP, so it names
/// nobody (CN "fastshake") and is valid from a day before `now_unix_secs` for `validity_days`.
/// Returns the certified key and the SHA-256 fingerprint of the certificate's DER.
pub fn self_signed_p256(
    now_unix_secs: u64,
    validity_days: u32,
) -> Result<(CertifiedKey, [u8; 32]), PkiError> {
    let key = KeyKind::P256.new_key_pair(&mut rand_core::OsRng)?;
    let mut params = CertificateParams::default();
    params.not_before = unix_to_time(now_unix_secs.saturating_sub(86_400))?;
    params.not_after = unix_to_time(now_unix_secs.saturating_add(u64::from(validity_days.max(1)) * 86_400))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "fastshake");
    params.distinguished_name = dn;
    let cert = params.self_signed(&key).map_err(generate_error)?;
    let der: CertDer = cert.der().clone();
    let mut fingerprint = [0u8; 32];
    fingerprint.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, &der).as_ref());
    let signing = crate::SigningKey::from_pkcs8_der(&key.serialize_der())?;
    Ok((CertifiedKey::new(vec![der], signing)?, fingerprint))
}
