//! Certificate path validation with rustls-webpki: trust anchors, time, extended key usage, names.

use std::time::Duration;

use rustls_pki_types::{ServerName, SignatureVerificationAlgorithm, TrustAnchor, UnixTime};
use webpki::{EndEntityCert, KeyUsage};

use crate::key::certificates_from_pem;
use crate::{CertDer, PeerPublicKey, PkiError};

/// Algorithms accepted for the signatures *on certificates* of a chain (the handshake's own
/// signature schemes are [`crate::SignatureScheme`]).
static CERT_SIGNATURE_ALGORITHMS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::aws_lc_rs::ECDSA_P256_SHA256,
    webpki::aws_lc_rs::ECDSA_P256_SHA384,
    webpki::aws_lc_rs::ECDSA_P384_SHA256,
    webpki::aws_lc_rs::ECDSA_P384_SHA384,
    webpki::aws_lc_rs::ED25519,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA384,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA512,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
];

/// The roots a peer's chain must lead to.
#[derive(Debug, Clone)]
pub struct TrustAnchors {
    anchors: Vec<TrustAnchor<'static>>,
    /// Each anchor's subject as a DER `Name` (with its SEQUENCE header), for CertificateRequest.
    subjects: Vec<Vec<u8>>,
    /// Each anchor's [`AnchorId`], in the order of `anchors`.
    ids: Vec<AnchorId>,
    /// SHA-256 fingerprints of the only leaves accepted, whatever their issuer: set by
    /// [`TrustAnchors::pinned_sha256`], and then `anchors` is empty.
    pinned: Vec<[u8; 32]>,
}

/// Names a trust anchor: SHA-256 over its subject and its public key (as webpki keeps them),
/// so a session can later ask whether the anchor that validated its peer is still trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AnchorId(pub [u8; 32]);

impl AnchorId {
    fn of(anchor: &TrustAnchor<'_>) -> AnchorId {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        let subject: &[u8] = anchor.subject.as_ref();
        let spki: &[u8] = anchor.subject_public_key_info.as_ref();
        ctx.update(&(subject.len() as u32).to_be_bytes());
        ctx.update(subject);
        ctx.update(spki);
        let mut id = [0u8; 32];
        id.copy_from_slice(ctx.finish().as_ref());
        AnchorId(id)
    }
}

/// What validating a peer's chain established.
#[derive(Clone, Debug)]
pub struct VerifiedChain {
    /// The leaf's public key, for the handshake signatures.
    pub key: PeerPublicKey,
    /// The trust anchor the path led to.
    pub anchor: AnchorId,
    /// The earliest notAfter of the certificates sent (Unix seconds): the chain is valid until then.
    pub not_after_unix: u64,
}

impl TrustAnchors {
    /// Every `CERTIFICATE` in PEM text becomes a trust anchor; at least one is required.
    pub fn from_pem(ca_pem: &[u8]) -> Result<Self, PkiError> {
        Self::from_der(&certificates_from_pem(ca_pem)?)
    }

    /// Trust anchors from DER certificates.
    pub fn from_der(certs: &[CertDer]) -> Result<Self, PkiError> {
        if certs.is_empty() {
            return Err(PkiError::NoCertificate);
        }
        let anchors = certs
            .iter()
            .map(|cert| {
                webpki::anchor_from_trusted_cert(cert)
                    .map(|anchor| anchor.to_owned())
                    .map_err(|e| PkiError::BadTrustAnchor(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let subjects = certs
            .iter()
            .map(|cert| subject_name_der(cert).map_err(PkiError::BadTrustAnchor))
            .collect::<Result<Vec<_>, _>>()?;
        let ids = anchors.iter().map(AnchorId::of).collect();
        Ok(TrustAnchors { anchors, subjects, ids, pinned: Vec::new() })
    }

    /// Trust by fingerprint instead of by path, as WebRTC does (RFC 8122 §5, RFC 8827 §6.5):
    /// a peer is accepted when the SHA-256 of its leaf certificate's DER is one of
    /// `fingerprints`, which came over an authenticated signalling channel. Nothing else of the
    /// chain is checked (such certificates are self-signed and carry no names), but the leaf
    /// must still parse and hold a key the handshake can verify. At least one is required.
    pub fn pinned_sha256(fingerprints: impl IntoIterator<Item = [u8; 32]>) -> Result<Self, PkiError> {
        let pinned: Vec<[u8; 32]> = fingerprints.into_iter().collect();
        if pinned.is_empty() {
            return Err(PkiError::NoCertificate);
        }
        let ids = pinned.iter().map(|fp| AnchorId(*fp)).collect();
        Ok(TrustAnchors { anchors: Vec::new(), subjects: Vec::new(), ids, pinned })
    }

    /// Whether these trust leaves by fingerprint ([`TrustAnchors::pinned_sha256`]).
    pub fn is_pinned(&self) -> bool {
        !self.pinned.is_empty()
    }

    /// Whether the anchor `id` names is one of these.
    pub fn contains(&self, id: &AnchorId) -> bool {
        self.ids.contains(id)
    }

    /// The anchors' subject names as DER `DistinguishedName`s: the `certificate_authorities` a
    /// server lists in CertificateRequest (RFC 5246 §7.4.4) so a client picks a chain it trusts.
    pub fn subject_names(&self) -> impl Iterator<Item = &[u8]> {
        self.subjects.iter().map(Vec::as_slice)
    }

    /// How many anchors (or pinned fingerprints) there are.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Never true for anchors built by this type's constructors.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Validates a server's chain (leaf first) at `now_unix_secs`: path to an anchor, validity times,
/// `serverAuth` extended key usage and `digitalSignature` key usage when the leaf has those
/// extensions, and — when the client names the server — that the leaf is valid for that DNS name
/// or IP address (subjectAltName only, as RFC 6125 wants). Returns the leaf's key and what the
/// validation established.
pub fn verify_server_chain(
    chain: &[CertDer],
    anchors: &TrustAnchors,
    now_unix_secs: u64,
    server_name: Option<&str>,
) -> Result<VerifiedChain, PkiError> {
    // Parse the name first: a bad name is our configuration error, whatever the peer sent.
    let name = server_name
        .map(|name| ServerName::try_from(name).map_err(|_| PkiError::InvalidServerName(name.to_owned())))
        .transpose()?;
    let (leaf, verified) =
        verify_chain(chain, anchors, now_unix_secs, KeyUsage::server_auth(), "serverAuth")?;
    // A pinned leaf is the peer itself: its fingerprint, not a name, identifies it.
    if let (Some(name), Some(given), false) = (name, server_name, anchors.is_pinned()) {
        leaf.verify_is_valid_for_subject_name(&name)
            .map_err(|e| map_webpki_error(e, now_unix_secs, "serverAuth", Some(given)))?;
    }
    Ok(verified)
}

/// Validates a client's chain (leaf first) at `now_unix_secs`: path to an anchor, validity times,
/// `clientAuth` extended key usage and `digitalSignature` key usage when the leaf has those
/// extensions. Returns the leaf's key and what the validation established.
pub fn verify_client_chain(
    chain: &[CertDer],
    anchors: &TrustAnchors,
    now_unix_secs: u64,
) -> Result<VerifiedChain, PkiError> {
    verify_chain(chain, anchors, now_unix_secs, KeyUsage::client_auth(), "clientAuth").map(|(_, v)| v)
}

fn verify_chain<'a>(
    chain: &'a [CertDer],
    anchors: &TrustAnchors,
    now_unix_secs: u64,
    usage: KeyUsage,
    usage_name: &'static str,
) -> Result<(EndEntityCert<'a>, VerifiedChain), PkiError> {
    let (leaf_der, intermediates) = chain.split_first().ok_or(PkiError::NoPeerCertificate)?;
    let map = |e| map_webpki_error(e, now_unix_secs, usage_name, None);
    let leaf = EndEntityCert::try_from(leaf_der).map_err(map)?;
    // Refuse a leaf key the handshake cannot use before spending time on the path.
    let public_key = PeerPublicKey::from_spki_der(leaf.subject_public_key_info().as_ref())?;
    if anchors.is_pinned() {
        let digest = ring::digest::digest(&ring::digest::SHA256, leaf_der);
        let fingerprint: [u8; 32] = digest.as_ref().try_into().map_err(|_| PkiError::FingerprintMismatch)?;
        if !anchors.pinned.contains(&fingerprint) {
            return Err(PkiError::FingerprintMismatch);
        }
        let not_after_unix = not_after_unix(leaf_der)?;
        return Ok((leaf, VerifiedChain { key: public_key, anchor: AnchorId(fingerprint), not_after_unix }));
    }
    let time = UnixTime::since_unix_epoch(Duration::from_secs(now_unix_secs));
    let path = leaf
        .verify_for_usage(CERT_SIGNATURE_ALGORITHMS, &anchors.anchors, intermediates, time, usage, None, None)
        .map_err(map)?;
    let anchor = AnchorId::of(path.anchor());
    check_leaf_key_usage(leaf_der)?;
    let not_after_unix =
        chain.iter().map(not_after_unix).try_fold(u64::MAX, |earliest, t| t.map(|t| earliest.min(t)))?;
    Ok((leaf, VerifiedChain { key: public_key, anchor, not_after_unix }))
}

/// A certificate's notAfter in Unix seconds.
fn not_after_unix(cert: &CertDer) -> Result<u64, PkiError> {
    validity_unix(cert).map(|(_, not_after)| not_after)
}

/// A certificate's notBefore and notAfter in Unix seconds.
fn validity_unix(cert: &CertDer) -> Result<(u64, u64), PkiError> {
    use x509_cert::der::Decode;
    let cert =
        x509_cert::Certificate::from_der(cert).map_err(|e| PkiError::MalformedCertificate(e.to_string()))?;
    let validity = cert.tbs_certificate.validity;
    Ok((validity.not_before.to_unix_duration().as_secs(), validity.not_after.to_unix_duration().as_secs()))
}

/// The tightest window over every certificate sent (the latest notBefore, the earliest
/// notAfter): a chain that validated once stays valid at any time inside it, as far as times go.
pub(crate) fn validity_window(chain: &[CertDer]) -> Result<(u64, u64), PkiError> {
    chain.iter().map(validity_unix).try_fold((0, u64::MAX), |(latest_start, earliest_end), window| {
        window.map(|(start, end)| (latest_start.max(start), earliest_end.min(end)))
    })
}

/// A certificate's subject for display, its attributes in order as `O=..., CN=...` (RFC 4514
/// notation per attribute); `None` if the certificate cannot be read.
pub fn subject_text(cert: &[u8]) -> Option<String> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(cert).ok()?;
    let parts: Vec<String> = cert
        .tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter().map(|atv| atv.to_string()))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn subject_name_der(cert: &CertDer) -> Result<Vec<u8>, String> {
    use x509_cert::der::{Decode, Encode};
    let cert = x509_cert::Certificate::from_der(cert).map_err(|e| e.to_string())?;
    cert.tbs_certificate.subject.to_der().map_err(|e| e.to_string())
}

/// id-ce-keyUsage (RFC 5280 §4.2.1.3).
const ID_CE_KEY_USAGE: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("2.5.29.15");

/// Every certificate suite signs with the leaf's key (ServerKeyExchange, CertificateVerify), so a
/// leaf that restricts its key usage (RFC 5280 §4.2.1.3) must allow `digitalSignature`.
/// webpki checks extended key usage only; this reads the keyUsage extension of the validated leaf.
fn check_leaf_key_usage(leaf_der: &[u8]) -> Result<(), PkiError> {
    use x509_cert::der::Decode;
    use x509_cert::ext::pkix::KeyUsage as KeyUsageExt;

    let cert = x509_cert::Certificate::from_der(leaf_der)
        .map_err(|e| PkiError::MalformedCertificate(e.to_string()))?;
    let extensions = cert.tbs_certificate.extensions.unwrap_or_default();
    for extension in extensions.iter().filter(|ext| ext.extn_id == ID_CE_KEY_USAGE) {
        let usage = KeyUsageExt::from_der(extension.extn_value.as_bytes())
            .map_err(|e| PkiError::MalformedCertificate(format!("keyUsage: {e}")))?;
        if !usage.digital_signature() {
            return Err(PkiError::WrongKeyUsage { required: "digitalSignature" });
        }
    }
    Ok(())
}

#[allow(deprecated)] // the deprecated variants are matched so older spellings map the same way
fn map_webpki_error(
    error: webpki::Error,
    now: u64,
    usage_name: &'static str,
    name: Option<&str>,
) -> PkiError {
    use webpki::Error as E;
    match error {
        E::UnknownIssuer => PkiError::UnknownCa,
        E::CertExpired { not_after, .. } => PkiError::Expired { now, not_after: not_after.as_secs() },
        E::CertNotValidYet { not_before, .. } => {
            PkiError::NotYetValid { now, not_before: not_before.as_secs() }
        }
        E::CertNotValidForName(_) => PkiError::NameMismatch(name.unwrap_or_default().to_owned()),
        E::InvalidSignatureForPublicKey => PkiError::BadCertificateSignature,
        E::RequiredEkuNotFound | E::RequiredEkuNotFoundContext(_) | E::EmptyEkuExtension => {
            PkiError::WrongKeyUsage { required: usage_name }
        }
        E::BadDer
        | E::BadDerTime
        | E::TrailingData(_)
        | E::MalformedExtensions
        | E::ExtensionValueInvalid
        | E::InvalidCertValidity
        | E::InvalidSerialNumber
        | E::MalformedDnsIdentifier
        | E::MalformedNameConstraint
        | E::UnsupportedCertVersion => PkiError::MalformedCertificate(error.to_string()),
        E::UnsupportedSignatureAlgorithm
        | E::UnsupportedSignatureAlgorithmContext(_)
        | E::UnsupportedSignatureAlgorithmForPublicKey
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext(_)
        | E::SignatureAlgorithmMismatch
        | E::UnsupportedCriticalExtension
        | E::UnsupportedNameType
        | E::CaUsedAsEndEntity => PkiError::UnsupportedCertificate(error.to_string()),
        other => PkiError::CertificateUnknown(other.to_string()),
    }
}
