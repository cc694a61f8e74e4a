//! Handshake caching in DTLS 1.3 (seed 003 §IV-D): the server's selection, which travels in
//! EncryptedExtensions; abbreviated Certificates on both sides; the client-certificate ticket
//! both derive from the key schedule. What is hashed and cached, and the abbreviated form, are
//! documented with the wire forms in `handshake::cached`; the agreement, the offer and the
//! client's cache entry are 1.2's (`connection::client`), so one cache entry serves both.

use super::{Abort, PREFIX};
use crate::alert::AlertDescription;
use crate::cache::{CacheUse, CachedClientChain, CLIENT_TICKET_LEN};
use crate::clock::unix_now;
use crate::config::{ClientConfig, ServerConfig};
use crate::connection::client::{agreed_caching, caching_offer, Caching};
use crate::connection::server::{select_cached, usable_client_chain};
use crate::crypto::tls13::{expand_label, SuiteHash};
use crate::handshake::{
    encode_abbreviated_certificate13, encode_cached_info_selection, encode_certificate13,
    encode_client_cert_answer, parse_abbreviated_certificate13, parse_certificate, parse_certificate13,
    static_certificate, CachedObjectType, ClientHello, Extensions,
};
use fastshake_core::Instant;
use fastshake_pki::CertDer;

/// Label of the client-certificate ticket's derivation from the resumption master secret.
const TICKET_LABEL: &[u8] = b"cc ticket";

/// The client-certificate ticket of a 1.3 handshake: HKDF-Expand-Label(resumption_master_secret,
/// "cc ticket", "", 8), known to the two ends only and fresh for every handshake.
pub(super) fn client_ticket13(hash: SuiteHash, resumption: &[u8]) -> [u8; CLIENT_TICKET_LEN] {
    let mut ticket = [0u8; CLIENT_TICKET_LEN];
    expand_label(hash, PREFIX, resumption, TICKET_LABEL, &[], &mut ticket);
    ticket
}

/// Client: what the EncryptedExtensions agreed of our caching offer. Answers we did not ask for
/// are unsupported_extension (RFC 8446 §4.2); a selection 1.3 never makes (the
/// CertificateRequest), or any in a PSK handshake (no certificates), is illegal_parameter.
pub(super) fn agree13(
    config: &ClientConfig,
    offered: Option<crate::cache::CachedServer>,
    ee: &Extensions<'_>,
    psk: bool,
) -> Result<Caching, Abort> {
    let (info, cert) = caching_offer(config, offered.as_ref(), true);
    if (ee.cached_info.is_some() && info.is_none()) || (ee.client_cert_cache.is_some() && cert.is_none()) {
        return Err(Abort::alert(AlertDescription::UnsupportedExtension));
    }
    let caching = agreed_caching(config, offered, ee)?;
    if caching.certificate_request_selected
        || (psk && (caching.certificate_selected || caching.client_cert_supported))
    {
        return Err(Abort::alert(AlertDescription::IllegalParameter));
    }
    Ok(caching)
}

/// Client: the server's certificates from its Certificate body, the cached chain when the
/// server selected it and abbreviated the message (it may still send the whole chain). An
/// abbreviated Certificate whose count is not the cached chain's is illegal_parameter.
pub(super) fn server_certificates<'a>(
    caching: &'a mut Caching,
    body: &'a [u8],
) -> Result<Vec<&'a [u8]>, Abort> {
    let cached = caching
        .offered
        .as_ref()
        .and_then(|c| c.certificate.as_deref())
        .filter(|_| caching.certificate_selected);
    if let (Some(cached), Ok((_context, count))) = (cached, parse_abbreviated_certificate13(body)) {
        let certs = parse_certificate(cached).map_err(Abort::decode)?;
        if certs.len() != count {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        caching.used.server_certificate = true;
        return Ok(certs);
    }
    let (_context, certs) = parse_certificate13(body).map_err(Abort::decode)?;
    Ok(certs)
}

/// Client: our Certificate body in answer to a CertificateRequest with `context`, abbreviated
/// when the server holds our chain under the ticket we offered; and whether it is.
pub(super) fn client_certificate13(
    caching: &mut Caching,
    context: &[u8],
    chain: &[&[u8]],
) -> (Vec<u8>, bool) {
    caching.sent_chain = !chain.is_empty();
    let mut body = Vec::new();
    if caching.ticket_selected && caching.sent_chain {
        caching.used.client_certificate = true;
        encode_abbreviated_certificate13(&mut body, context, chain.len());
        return (body, true);
    }
    encode_certificate13(&mut body, context, chain);
    (body, false)
}

/// Server: what caching comes to in a certificate handshake, selected on the ClientHello.
#[derive(Default)]
pub(super) struct ServerCaching13 {
    /// The client offered client-certificate caching and we keep chains: its chain goes into
    /// the cache under the ticket the handshake derives.
    pub client_cert_caching: bool,
    /// The chain the client's ticket named, for its abbreviated Certificate.
    pub cached_chain: Option<CachedClientChain>,
    /// The client's chain (sent or cached) and what it was validated to, for the cache.
    pub chain: Option<CachedClientChain>,
    /// `server_certificate`: our Certificate goes abbreviated (the client holds the chain its
    /// fingerprint names); `client_certificate`: the client's came so.
    pub used: CacheUse,
}

impl ServerCaching13 {
    /// The selection for a ClientHello. `chain`: the certificates we send; `taken`: the chain
    /// the endpoint took out of its cache for the client's ticket.
    pub fn select(
        config: &ServerConfig,
        now: Instant,
        ch: &ClientHello<'_>,
        chain: &[&[u8]],
        ask_certificate: bool,
        taken: Option<([u8; CLIENT_TICKET_LEN], CachedClientChain)>,
    ) -> Result<Self, Abort> {
        let ext = &ch.extensions;
        let certificate_selected = match (config.cached_info, ext.cached_info) {
            (true, Some(data)) => {
                select_cached(data, &static_certificate(chain), &[])?.contains(&CachedObjectType::Certificate)
            }
            _ => false,
        };
        let client_cert_caching =
            ask_certificate && config.client_cert_cache.max_entries > 0 && ext.client_cert_cache.is_some();
        let cached_chain = match ext.client_cert_cache {
            Some(data) if client_cert_caching => {
                usable_client_chain(config, unix_now(config.wall_clock, now), data, taken)?
            }
            _ => None,
        };
        let used = CacheUse { server_certificate: certificate_selected, ..Default::default() };
        Ok(ServerCaching13 { client_cert_caching, cached_chain, chain: None, used })
    }

    /// The EncryptedExtensions' bodies of `cached_info` (the selection) and client-certificate
    /// caching (the answer), when there is something to say.
    pub fn answers(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let info = self.used.server_certificate.then(|| {
            let mut body = Vec::with_capacity(3);
            encode_cached_info_selection(&mut body, &[CachedObjectType::Certificate]);
            body
        });
        let cert = self.client_cert_caching.then(|| {
            let mut body = Vec::with_capacity(1);
            encode_client_cert_answer(&mut body, self.cached_chain.is_some());
            body
        });
        (info, cert)
    }

    /// The cached chain the client's Certificate stands for, when we selected it and the
    /// client abbreviated the message; `None`: the body carries the chain (the client may send
    /// it whole even when we hold it).
    pub fn cached_client_chain(&mut self, body: &[u8]) -> Result<Option<Vec<CertDer>>, Abort> {
        let Some(cached) = self.cached_chain.take() else { return Ok(None) };
        let Ok((_context, count)) = parse_abbreviated_certificate13(body) else { return Ok(None) };
        if cached.chain.len() != count {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        self.used.client_certificate = true;
        Ok(Some(cached.chain))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CachedServer;
    use crate::handshake::encode_certificate;

    const CERTS: [&[u8]; 3] = [&[0x30, 1, 1], &[0x30, 1, 2], &[0x30, 1, 3]];

    /// A client with trust anchors and a certificate, both kinds of caching on.
    fn client_config() -> ClientConfig {
        use std::sync::Arc;
        let pki = fastshake_pki::generate::generate(
            1,
            fastshake_pki::generate::KeyKind::P256,
            &[],
            1_800_000_000,
            2,
        )
        .expect("a test PKI");
        ClientConfig {
            trust_anchors: Some(Arc::new(crate::TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap())),
            certified_key: Some(Arc::new(pki.client_certified_key().unwrap())),
            cached_info: true,
            client_certificate_caching: true,
            ..Default::default()
        }
    }

    fn entry(ticket: bool) -> CachedServer {
        let mut certificate = Vec::new();
        encode_certificate(&mut certificate, &CERTS);
        CachedServer {
            server_name: None,
            certificate: Some(certificate),
            certificate_request: None,
            client_ticket: ticket.then(|| vec![1; CLIENT_TICKET_LEN]),
        }
    }

    fn alert<T>(result: Result<T, Abort>) -> Option<AlertDescription> {
        result.err().and_then(|a| a.alert)
    }

    #[test]
    fn a_server_answers_only_what_was_offered_and_never_selects_a_certificate_request() {
        let config = client_config();
        let selected = |ty: u8| [0u8, 1, ty];
        let certificate = selected(1);
        let request = selected(2);
        let ee = |info: Option<&'static [u8]>, cert: Option<&'static [u8]>| Extensions {
            cached_info: info,
            client_cert_cache: cert,
            ..Default::default()
        };
        let certificate: &'static [u8] = Box::leak(Box::new(certificate));
        let request: &'static [u8] = Box::leak(Box::new(request));
        // Nothing cached, nothing offered: any caching answer is unsupported_extension.
        let no_cert = ClientConfig { certified_key: None, ..config.clone() };
        assert_eq!(
            alert(agree13(&no_cert, None, &ee(Some(certificate), None), false)),
            Some(AlertDescription::UnsupportedExtension)
        );
        assert_eq!(
            alert(agree13(&no_cert, None, &ee(None, Some(&[])), false)),
            Some(AlertDescription::UnsupportedExtension)
        );
        assert_eq!(
            alert(agree13(&config, Some(entry(false)), &ee(Some(request), None), false)),
            Some(AlertDescription::IllegalParameter),
            "never offered"
        );
        // The CertificateRequest is never selected in 1.3, even when its fingerprint was offered.
        let mut with_request = entry(false);
        with_request.certificate_request = Some(vec![0, 0]);
        assert_eq!(
            alert(agree13(&config, Some(with_request), &ee(Some(request), None), false)),
            Some(AlertDescription::IllegalParameter)
        );
        // A ticket selected that was never offered, and caching in a PSK handshake.
        assert_eq!(
            alert(agree13(&config, Some(entry(false)), &ee(None, Some(&[1])), false)),
            Some(AlertDescription::IllegalParameter)
        );
        assert_eq!(
            alert(agree13(&config, Some(entry(false)), &ee(Some(certificate), None), true)),
            Some(AlertDescription::IllegalParameter)
        );
        // What was offered is agreed.
        let agreed =
            agree13(&config, Some(entry(true)), &ee(Some(certificate), Some(&[1])), false).ok().unwrap();
        assert!(agreed.certificate_selected && agreed.ticket_selected);
    }

    #[test]
    fn an_abbreviated_certificate_must_count_the_cached_chain() {
        let mut caching =
            Caching { offered: Some(entry(false)), certificate_selected: true, ..Default::default() };
        let mut two = Vec::new();
        encode_abbreviated_certificate13(&mut two, &[], 2);
        assert_eq!(alert(server_certificates(&mut caching, &two)), Some(AlertDescription::IllegalParameter));
        let mut three = Vec::new();
        encode_abbreviated_certificate13(&mut three, &[], 3);
        assert_eq!(server_certificates(&mut caching, &three).ok().unwrap(), CERTS.to_vec());
        assert!(caching.used.server_certificate);
        // Not selected: an abbreviated Certificate is a malformed one.
        let mut unselected = Caching { offered: Some(entry(false)), ..Default::default() };
        assert_eq!(alert(server_certificates(&mut unselected, &three)), Some(AlertDescription::DecodeError));

        let chain = CachedClientChain {
            chain: CERTS.iter().map(|c| CertDer::from(c.to_vec())).collect(),
            verified: crate::session::ClientCertificate {
                anchor: fastshake_pki::AnchorId([0; 32]),
                not_after: 1,
            },
        };
        let mut server = ServerCaching13 { cached_chain: Some(chain.clone()), ..Default::default() };
        assert_eq!(alert(server.cached_client_chain(&two)), Some(AlertDescription::IllegalParameter));
        let mut server = ServerCaching13 { cached_chain: Some(chain.clone()), ..Default::default() };
        assert_eq!(server.cached_client_chain(&three).ok().unwrap(), Some(chain.chain));
        assert!(server.used.client_certificate);
        let mut nothing = ServerCaching13::default();
        assert_eq!(nothing.cached_client_chain(&three).ok().unwrap(), None, "then read as a whole chain");
    }

    #[test]
    fn tickets_differ_per_handshake_and_suite_hash() {
        let a = client_ticket13(SuiteHash::Sha256, &[1; 32]);
        let b = client_ticket13(SuiteHash::Sha256, &[2; 32]);
        let c = client_ticket13(SuiteHash::Sha384, &[1; 48]);
        assert!(a != b && a != c);
    }
}
