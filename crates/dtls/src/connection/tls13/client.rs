//! The DTLS 1.3 client (RFC 8446 §4 as RFC 9147 §5 changes it): one typed state per awaited
//! message, each carrying what the next step needs.
//!
//! ```text
//! ClientHello ──► ServerHello ─► EncryptedExtensions ─► [CertificateRequest] ─► Certificate
//!   ▲   │              (HelloRetryRequest: a second ClientHello)     ─► CertificateVerify ─► Finished
//!   └───┘                                        (with a PSK: EncryptedExtensions ─► Finished)
//! ```

use super::cached;
use super::{Abort, Handshake13, Step13, Tls13, Transcript13, PREFIX};
use crate::alert::AlertDescription;
use crate::config::ClientConfig;
use crate::connection::client::{cache_update, caching_offer, Caching};
use crate::connection::handshake::{agree, ephemeral, EcdheSecret, SCHEMES};
use crate::connection::VersionState;
use crate::connection::{Connection, Phase};
use crate::crypto::tls13::{KeySchedule, RecordKeys, Suite13};
use crate::handshake::{
    certificate_verify_message, hrr_selected_group, is_hello_retry_request, parse_certificate_verify,
    parse_encrypted_extensions, selected_version, server_share, static_certificate, ClientHello,
    HandshakeType, NamedGroup, OutExtensions, PskOffer, ServerHello, DTLS_1_3, PSK_DHE_KE, PSK_KE,
};
use crate::record::{epoch, RecordWriter13, DTLS_1_2};
use fastshake_core::Instant;
use fastshake_pki::{CertDer, PeerPublicKey, SignatureScheme};
use rand_core::RngCore;
use std::sync::Arc;
use zeroize::Zeroizing;

/// Where a 1.3 client's handshake is: the message each state awaits is in its name.
#[allow(clippy::enum_variant_names)]
pub(in crate::connection) enum ClientStep13 {
    ExpectServerHello(ExpectServerHello13),
    ExpectEncryptedExtensions(Keyed),
    ExpectCertificate(Keyed),
    ExpectCertificateVerify(Keyed, ServerChain13),
    ExpectFinished(Keyed, Option<ServerChain13>),
}

/// The ClientHello sent: the secrets of its key shares and what the answer is checked against.
pub(in crate::connection) struct ExpectServerHello13 {
    random: [u8; 32],
    shares: Vec<(NamedGroup, EcdheSecret)>,
    /// The key shares as sent (a HelloRetryRequest that asks only for a cookie gets them again).
    sent_shares: Vec<(u16, Vec<u8>)>,
    /// The body of the ClientHello, for the transcript once the suite's hash is known.
    pub(in crate::connection) hello: Vec<u8>,
    /// A HelloRetryRequest came already (a second one is an error, RFC 8446 §4.1.4).
    retried: bool,
    /// The group whose key share the HelloRetryRequest asked for, if it did.
    retry_group: Option<NamedGroup>,
    /// The hello offers DTLS 1.2 too: its 1.2 part, kept so that a second hello is the same
    /// hello (RFC 8446 §4.1.2).
    pub(in crate::connection) legacy: Option<Box<Legacy12>>,
    /// What the cache holds for this server (already scoped to it), offered for caching.
    pub(in crate::connection) cached: Option<crate::cache::CachedServer>,
}

/// What a ClientHello offering DTLS 1.3 and 1.2 carries for DTLS 1.2 alone: its suites, the
/// session it offers to resume and its extensions (a 1.3 server ignores them).
#[derive(Default)]
pub(in crate::connection) struct Legacy12 {
    pub suites: Vec<u16>,
    /// RFC 9147 §5.3: a session ID from a 1.2 server may be offered in legacy_session_id.
    pub session_id: Vec<u8>,
    pub session_ticket: Option<Vec<u8>>,
    pub connection_id: Option<Vec<u8>>,
    pub rrc: bool,
    pub port_move: bool,
    pub cached_info: Option<Vec<u8>>,
    pub client_cert_cache: Option<Vec<u8>>,
}

impl ExpectServerHello13 {
    /// The offer of a first ClientHello: one key share, of the group we prefer; a server that
    /// prefers another asks for it. A hybrid's share (1,216 bytes) would make the first
    /// ClientHello two fragments, which a server that keeps no state before the cookie may not
    /// reassemble: that one goes with no share, and the HelloRetryRequest that brings the
    /// cookie asks for it (RFC 8446 §4.1.4), at no extra round trip.
    pub(in crate::connection) fn new(
        config: &ClientConfig,
        random: [u8; 32],
        rng: &mut rand_chacha::ChaCha20Rng,
    ) -> Self {
        // No group (a PSK client that wants psk_ke alone): no key share at all.
        let (shares, sent_shares) = match config.groups.first().copied() {
            None => (Vec::new(), Vec::new()),
            Some(group) if group.is_hybrid() && config.cookie.is_none() && !config.address_proven => {
                (Vec::new(), Vec::new())
            }
            Some(group) => {
                let (secret, public) = ephemeral(group, rng);
                (vec![(group, secret)], vec![(group.code(), public)])
            }
        };
        ExpectServerHello13 {
            random,
            shares,
            sent_shares,
            hello: Vec::new(),
            retried: false,
            retry_group: None,
            legacy: None,
            cached: None,
        }
    }
}

/// The handshake keys exist: what the rest of the server's flight is checked with.
pub(in crate::connection) struct Keyed {
    suite: Suite13,
    schedule: KeySchedule,
    client_hs: Zeroizing<Vec<u8>>,
    server_hs: Zeroizing<Vec<u8>>,
    group: Option<NamedGroup>,
    /// The group a HelloRetryRequest asked a key share for, if one did.
    retry_group: Option<NamedGroup>,
    psk: bool,
    /// The server asked for our certificate with this context ...
    certificate_request: Option<Vec<u8>>,
    /// ... these signature schemes, and these compression algorithms (RFC 8879).
    request_schemes: Vec<u16>,
    request_compression: Option<Vec<u8>>,
    /// Handshake caching: the entry offered, then what the EncryptedExtensions agreed.
    caching: Caching,
}

/// The server's validated chain.
pub(in crate::connection) struct ServerChain13 {
    key: PeerPublicKey,
    certificates: usize,
    leaf: Option<CertDer>,
    /// The chain was found in the validated-key cache, so its path validation was skipped.
    validation_skipped: bool,
}

impl Connection {
    /// A DTLS 1.3 client session: its first ClientHello is queued.
    pub(in crate::connection) fn start_client13(
        &mut self,
        now: Instant,
        config: &Arc<ClientConfig>,
        rng_seed: [u8; 32],
        session: Option<crate::session::ClientSession>,
        cached: Option<crate::cache::CachedServer>,
    ) {
        use rand_core::SeedableRng;
        let last_rtt = match config.retransmit {
            crate::config::RetransmitPolicy::Adaptive { .. } => config.rtt_cache.get(self.remote.ip()),
            crate::config::RetransmitPolicy::Fixed => None,
        };
        let timer = crate::timer::RetransmitTimer::new(
            config.initial_retransmit,
            config.max_retransmit,
            config.retransmit,
            last_rtt,
        );
        let rng = rand_chacha::ChaCha20Rng::from_seed(rng_seed);
        let mut hs = Handshake13::new(now, rng, timer, config.handshake_timeout);
        if config.trust_anchors.is_some() {
            hs.reassembler.set_budget(crate::handshake::PEER_CHAIN_BUDGET);
        }
        Self::offer_session13(&mut hs, session);
        let mut random = [0u8; 32];
        hs.rng.fill_bytes(&mut random);
        self.hello_id = crate::connection::hello_id(&random);
        let mut state = ExpectServerHello13::new(config, random, &mut hs.rng);
        state.cached = crate::connection::client::scoped_cache(config, cached);
        let mut record = RecordWriter13::default();
        self.send_client_hello13(now, &mut hs, &mut record, config, &mut state);
        hs.step = Some(Step13::Client(Box::new(ClientStep13::ExpectServerHello(state))));
        let mut v13 = Tls13::new(Some(hs));
        v13.write = record;
        self.version = VersionState::Dtls13(v13);
    }

    /// The suites a 1.3 client offers: with a PSK only those of its hash (SHA-256).
    pub(in crate::connection) fn suites13(config: &ClientConfig) -> Vec<Suite13> {
        config
            .suites13
            .iter()
            .copied()
            .filter(|s| config.psk.is_none() || s.hash() == crate::crypto::tls13::SuiteHash::Sha256)
            .collect()
    }

    fn send_client_hello13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        record: &mut RecordWriter13,
        config: &ClientConfig,
        state: &mut ExpectServerHello13,
    ) {
        // PSKs: a 1.3 session's ticket, then the external PSK (RFC 8446 §4.2.11).
        Self::client_psks13(now, hs, config);
        let early = Self::offers_early13(hs, config);
        let mobility = self.offer_mobility13(config, &mut hs.rng);
        let offer = hs.resume.as_deref();
        let parts = HelloParts {
            cookie13: hs.cookie.as_deref(),
            resume: offer,
            early,
            mobility,
            ..HelloParts::new(&hs.transcript)
        };
        let body = client_hello13(config, state, parts);
        if early {
            Self::start_early13(hs, &body);
        }
        state.hello = body.clone();
        hs.begin_flight();
        hs.push_message(0, HandshakeType::ClientHello, body, false);
        self.send_flight13(now, hs, record, true);
    }

    /// One message of the server's flight.
    pub(in crate::connection) fn client_step13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        step: ClientStep13,
        msg_type: HandshakeType,
        body: &[u8],
    ) -> Result<Step13, Abort> {
        let config = self.client_config().cloned().ok_or_else(Abort::unexpected)?;
        let next = match (step, msg_type) {
            (ClientStep13::ExpectServerHello(state), HandshakeType::ServerHello) => {
                // A HelloRetryRequest carries the record number of the ClientHello it answers
                // (RFC 9147 §5.1), and a fastshake server numbers its ServerHello one past it:
                // the answer names which transmission of ours arrived, a sample even after
                // copies and a loss seen when it was not the first. Another server's numbering
                // names none of ours, and the answer is timed as any other.
                let received = self.stats.bytes_received;
                let retry = ServerHello::parse(body).is_ok_and(|sh| is_hello_retry_request(&sh.random));
                let named = hs.plaintext_record.map(|seq| if retry { seq } else { seq.saturating_sub(1) });
                if !named.is_some_and(|seq| hs.flight.timer.on_acknowledged(now, seq, received)) {
                    hs.flight.timer.on_answer(now, received);
                }
                return self.client_on_server_hello13(now, hs, v13, &config, state, body);
            }
            // A 1.2 server's answer to a hello offering 1.3 alone: no version in common (RFC 8446
            // §4.2.1).
            (ClientStep13::ExpectServerHello(_), HandshakeType::HelloVerifyRequest)
                if config.versions == crate::config::Versions::Dtls13 =>
            {
                return Err(Self::answered_in_dtls12("HelloVerifyRequest"));
            }
            (ClientStep13::ExpectEncryptedExtensions(mut k), HandshakeType::EncryptedExtensions) => {
                let ext = parse_encrypted_extensions(body).map_err(Abort::decode)?;
                // Only what a ClientHello may be answered with here (RFC 8446 §4.3.1).
                if ext.supported_versions.is_some() || ext.key_share.is_some() || ext.pre_shared_key.is_some()
                {
                    return Err(Abort::alert(AlertDescription::IllegalParameter));
                }
                Self::early_answer13(hs, ext.early_data.is_some())?;
                self.accept_encrypted_extensions13(&ext)?;
                crate::connection::client::check_srtp_answer(&config, &ext)?;
                k.caching = cached::agree13(&config, k.caching.offered.take(), &ext, k.psk)?;
                hs.transcript.add(msg_type, body);
                if k.psk {
                    ClientStep13::ExpectFinished(k, None)
                } else {
                    ClientStep13::ExpectCertificate(k)
                }
            }
            (ClientStep13::ExpectCertificate(mut k), HandshakeType::CertificateRequest) => {
                let request = crate::handshake::CertificateRequest13::parse(body).map_err(Abort::decode)?;
                k.certificate_request = Some(request.context.to_vec());
                k.request_compression = request.extensions.compress_certificate.map(<[u8]>::to_vec);
                k.request_schemes = request
                    .extensions
                    .signature_algorithms
                    .map(|s| crate::handshake::u16_list(s).collect())
                    .unwrap_or_default();
                hs.transcript.add(msg_type, body);
                ClientStep13::ExpectCertificate(k)
            }
            (ClientStep13::ExpectCertificate(mut k), HandshakeType::Certificate) => {
                let server = Self::server_chain13(now, &config, &mut k.caching, body)?;
                hs.transcript.add(msg_type, body);
                ClientStep13::ExpectCertificateVerify(k, server)
            }
            (ClientStep13::ExpectCertificate(mut k), HandshakeType::CompressedCertificate) => {
                // The transcript takes the message as it came (RFC 8879 §4).
                let certificate = hs.decompress_certificate(&config.certificate_compression, body)?;
                let server = Self::server_chain13(now, &config, &mut k.caching, &certificate)?;
                hs.transcript.add(msg_type, body);
                ClientStep13::ExpectCertificateVerify(k, server)
            }
            (ClientStep13::ExpectCertificateVerify(k, server), HandshakeType::CertificateVerify) => {
                let (scheme, signature) = parse_certificate_verify(body).map_err(Abort::decode)?;
                let scheme = SignatureScheme::from_code(scheme)
                    .filter(|s| SCHEMES.contains(&s.code()) && *s != SignatureScheme::RsaPkcs1Sha256)
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let signed = certificate_verify_message(true, hs.transcript.current(k.suite.hash()).as_ref());
                fastshake_pki::verify_signature(&server.key, scheme, &signed, signature)
                    .map_err(Abort::peer)?;
                hs.transcript.add(msg_type, body);
                ClientStep13::ExpectFinished(k, Some(server))
            }
            (ClientStep13::ExpectFinished(k, server), HandshakeType::Finished) => {
                let expected =
                    k.schedule.verify_data(&k.server_hs, hs.transcript.current(k.suite.hash()).as_ref());
                if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), body)) {
                    return Err(Abort::alert(AlertDescription::DecryptError));
                }
                hs.transcript.add(msg_type, body);
                return self.client_finish13(now, hs, v13, &config, k, server);
            }
            _ => return Err(Abort::unexpected()),
        };
        Ok(Step13::Client(Box::new(next)))
    }

    /// The server's chain from the body of its Certificate (or from the cache, when the server
    /// abbreviated it), validated; its static part is kept for the next handshake.
    fn server_chain13(
        now: Instant,
        config: &ClientConfig,
        caching: &mut Caching,
        body: &[u8],
    ) -> Result<ServerChain13, Abort> {
        let certs = cached::server_certificates(caching, body)?;
        let anchors = config.trust_anchors.as_ref().ok_or_else(Abort::unexpected)?;
        let (chain, verified, validation) =
            crate::connection::handshake::validate_server_chain(config, anchors, now, &certs)?;
        let static_form = config.cached_info.then(|| static_certificate(&certs));
        caching.certificate = static_form;
        Ok(ServerChain13 {
            key: verified.key,
            certificates: chain.len(),
            leaf: chain.into_iter().next(),
            validation_skipped: validation == fastshake_pki::Validation::Cached,
        })
    }

    fn client_on_server_hello13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        config: &ClientConfig,
        mut state: ExpectServerHello13,
        body: &[u8],
    ) -> Result<Step13, Abort> {
        let sh = ServerHello::parse(body).map_err(Abort::decode)?;
        let version =
            sh.extensions.supported_versions.map(selected_version).transpose().map_err(Abort::decode)?;
        if version.is_none()
            && sh.version == DTLS_1_2
            && !is_hello_retry_request(&sh.random)
            && config.versions == crate::config::Versions::Dtls13
        {
            return Err(Self::answered_in_dtls12("ServerHello"));
        }
        if version != Some(DTLS_1_3) || sh.version != DTLS_1_2 || sh.compression_method != 0 {
            return Err(Abort::alert(AlertDescription::ProtocolVersion));
        }
        let suite = Suite13::from_id(sh.cipher_suite)
            .filter(|s| Self::suites13(config).contains(s))
            .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
        if is_hello_retry_request(&sh.random) {
            if state.retried {
                return Err(Abort::alert(AlertDescription::UnexpectedMessage));
            }
            state.retried = true;
            hs.hello_retry = true;
            // ClientHello1 becomes its hash; the HelloRetryRequest joins the transcript.
            hs.transcript = Transcript13::Pending(Vec::new());
            hs.transcript.add(HandshakeType::ClientHello, &state.hello);
            hs.transcript.start_hashing(suite.hash());
            hs.transcript.replace_with_message_hash(suite.hash());
            hs.transcript.add(HandshakeType::ServerHello, body);
            hs.cookie = sh.extensions.cookie13.map(<[u8]>::to_vec);
            if let Some(data) = sh.extensions.key_share {
                let code = hrr_selected_group(data).map_err(Abort::decode)?;
                let group = NamedGroup::from_code(code)
                    .filter(|g| config.groups.contains(g) && !state.shares.iter().any(|(h, _)| h == g))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let (secret, public) = ephemeral(group, &mut hs.rng);
                state.shares = vec![(group, secret)];
                state.sent_shares = vec![(code, public)];
                state.retry_group = Some(group);
            } else if hs.cookie.is_none() {
                // A HelloRetryRequest that changes nothing (RFC 8446 §4.1.4).
                return Err(Abort::alert(AlertDescription::IllegalParameter));
            } else if let (true, Some(&group)) = (state.shares.is_empty(), config.groups.first()) {
                // A cookie alone (legal, §4.1.4) for a hello whose share we held back for its
                // size: we offer psk_dhe_ke only, which needs a share (§4.2.9), so the held-back
                // one goes now rather than a hello that can only be refused.
                let (secret, public) = ephemeral(group, &mut hs.rng);
                state.shares = vec![(group, secret)];
                state.sent_shares = vec![(group.code(), public)];
            }
            // Otherwise the same shares again: only the address was asked for (§4.1.2).
            let mut record = std::mem::take(&mut v13.write);
            self.send_client_hello13(now, hs, &mut record, config, &mut state);
            v13.write = record;
            // The ClientHello joins the transcript (it was sent in a fresh flight, unhashed).
            hs.transcript.add(HandshakeType::ClientHello, &state.hello.clone());
            return Ok(Step13::Client(Box::new(ClientStep13::ExpectServerHello(state))));
        }
        // RFC 9147 §5.3: no session ID echo in DTLS 1.3.
        if !sh.session_id.is_empty() {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        self.accept_server_hello13(config, &sh.extensions, &mut hs.rng)?;
        let psk = Self::selected_psk13(hs, suite, sh.extensions.pre_shared_key)?;
        let (shared, group) = match sh.extensions.key_share {
            Some(data) => {
                let entry = server_share(data).map_err(Abort::decode)?;
                let at = state
                    .shares
                    .iter()
                    .position(|(g, _)| g.code() == entry.group)
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let (group, secret) = state.shares.swap_remove(at);
                (Some(agree(secret, group, entry.key_exchange)?), Some(group))
            }
            // psk_ke, offered only without groups (RFC 8446 §4.2.9: the server picks a mode we
            // listed).
            None if psk.is_some() && config.groups.is_empty() => (None, None),
            None => return Err(Abort::alert(AlertDescription::MissingExtension)),
        };
        if psk.is_none() && config.trust_anchors.is_none() {
            return Err(Abort::alert(AlertDescription::HandshakeFailure));
        }
        self.suite = Some(suite.into());
        if !hs.hello_retry {
            hs.transcript = Transcript13::Pending(Vec::new());
            hs.transcript.add(HandshakeType::ClientHello, &state.hello);
        }
        hs.transcript.start_hashing(suite.hash());
        hs.transcript.add(HandshakeType::ServerHello, body);
        let mut schedule = KeySchedule::new(suite.hash(), PREFIX, psk.as_deref().map(|k| &k[..]));
        schedule.into_handshake(shared.as_deref().map(|s| &s[..]));
        let th = hs.transcript.current(suite.hash());
        let client_hs = schedule.derive(b"c hs traffic", th.as_ref());
        let server_hs = schedule.derive(b"s hs traffic", th.as_ref());
        v13.state.read.add(epoch::HANDSHAKE, RecordKeys::from_secret(suite, PREFIX, &server_hs));
        hs.set_handshake_write(RecordKeys::from_secret(suite, PREFIX, &client_hs));
        Ok(Step13::Client(Box::new(ClientStep13::ExpectEncryptedExtensions(Keyed {
            suite,
            schedule,
            client_hs,
            server_hs,
            group,
            retry_group: state.retry_group,
            psk: psk.is_some(),
            certificate_request: None,
            request_schemes: Vec::new(),
            request_compression: None,
            caching: Caching { offered: state.cached.take(), ..Default::default() },
        }))))
    }

    /// The server's Finished checked: our Finished (and certificate, when asked) goes out in
    /// the handshake epoch, and from now on we write in the application epoch.
    fn client_finish13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        config: &ClientConfig,
        mut k: Keyed,
        server: Option<ServerChain13>,
    ) -> Result<Step13, Abort> {
        let hash = k.suite.hash();
        k.schedule.into_master();
        let th_server_finished = hs.transcript.current(hash);
        let client_ap = k.schedule.derive(b"c ap traffic", th_server_finished.as_ref());
        let server_ap = k.schedule.derive(b"s ap traffic", th_server_finished.as_ref());
        hs.begin_flight();
        if let Some(context) = k.certificate_request.take() {
            // No client certificate configured: an empty Certificate (RFC 8446 §4.4.2). A
            // chain the server holds: an abbreviated one, too short to compress.
            let chain: Vec<&[u8]> = config
                .certified_key
                .as_ref()
                .map(|c| c.chain.iter().map(|d| d.as_ref()).collect())
                .unwrap_or_default();
            let (certificate, abbreviated) = cached::client_certificate13(&mut k.caching, &context, &chain);
            let compression = k.request_compression.take();
            hs.push_certificate(
                &config.certificate_compression,
                compression.as_deref(),
                certificate,
                chain.is_empty() || abbreviated,
            );
            if let Some(certified) = config.certified_key.as_ref() {
                // RFC 8446 §4.4.3: RSA signs with PSS in 1.3, never PKCS#1 v1.5.
                let scheme = certified
                    .key
                    .algorithm()
                    .schemes()
                    .iter()
                    .copied()
                    .find(|s| *s != SignatureScheme::RsaPkcs1Sha256 && k.request_schemes.contains(&s.code()))
                    .ok_or(Abort::alert(AlertDescription::HandshakeFailure))?;
                let signed = certificate_verify_message(false, hs.transcript.current(hash).as_ref());
                let signature =
                    crate::connection::handshake::sign(&certified.key, scheme, &signed, &mut hs.rng)?;
                let mut verify = Vec::new();
                crate::handshake::encode_signed(&mut verify, scheme.code(), &signature);
                hs.push_message(epoch::HANDSHAKE, HandshakeType::CertificateVerify, verify, true);
            }
        }
        let finished = k.schedule.verify_data(&k.client_hs, hs.transcript.current(hash).as_ref());
        hs.push_message(epoch::HANDSHAKE, HandshakeType::Finished, finished.as_ref().to_vec(), true);
        v13.state.read.add(epoch::APPLICATION, RecordKeys::from_secret(k.suite, PREFIX, &server_ap));
        let mut record = std::mem::take(&mut v13.write);
        // The Finished goes in the handshake epoch, resent until the server acknowledges it
        // (§5.8.1: the client's last flight is acknowledged, not answered), for a whole
        // handshake timeout from now: the server has no session until it arrives.
        self.send_flight13(now, hs, &mut record, true);
        hs.timers.set(super::Timer13::GiveUp, now + self.handshake_timeout());
        record.set(epoch::APPLICATION, RecordKeys::from_secret(k.suite, PREFIX, &client_ap));
        v13.write = record;
        // Through our Finished (RFC 8446 §7.1): the server's tickets derive from it.
        let resumption = k.schedule.derive(b"res master", hs.transcript.current(hash).as_ref());
        // A certificate handshake: the entry to keep for this server, with the ticket that now
        // names our chain in its cache.
        let cache_update = server
            .as_ref()
            .and_then(|_| cache_update(config, &k.caching, || cached::client_ticket13(hash, &resumption)));
        let mut secrets = super::AppSecrets::new(k.suite, &client_ap, &server_ap, Some(&resumption));
        secrets.next_message_seq = hs.next_message_seq;
        secrets.peer_next_message_seq = hs.reassembler.next_seq();
        v13.state.secrets = Some(secrets);
        hs.received.clear();
        self.phase = Phase::Established;
        // Kept again, fuller, once the server acknowledges our Finished.
        self.keep_rtt(&hs.flight.timer);
        let mut summary = self.summary13(now, hs, k.suite, k.group, server);
        summary.hello_retry_group = k.retry_group;
        Self::resumption_summary13(hs, &mut summary);
        summary.from_cache = k.caching.used;
        summary.cache_update = cache_update;
        self.push_connected(summary);
        self.after_handshake_data13(hs, v13);
        Ok(Step13::Complete)
    }

    /// A 1.2 server answered a hello offering 1.3 alone with `message`: protocol_version.
    fn answered_in_dtls12(message: &'static str) -> Abort {
        let alert = AlertDescription::ProtocolVersion;
        Abort { alert: Some(alert), error: crate::error::Error::ServerSpeaksDtls12 { message, alert } }
    }

    pub(super) fn summary13(
        &self,
        now: Instant,
        hs: &Handshake13,
        suite: Suite13,
        group: Option<NamedGroup>,
        server: Option<ServerChain13>,
    ) -> crate::connection::HandshakeSummary {
        let queued = self.queued.iter().flat_map(|q| q.outgoing.iter());
        let (queued_datagrams, queued_bytes) = queued.fold((0, 0), |(n, b), d| (n + 1, b + d.len() as u64));
        crate::connection::HandshakeSummary {
            version: crate::config::Versions::Dtls13,
            suite: crate::suite::CipherSuite::from(suite),
            group,
            hello_retry: hs.hello_retry,
            hello_retry_group: None,
            mobility: Default::default(),
            resumed: false,
            resumption: None,
            session: None,
            peer_certificates: server.as_ref().map_or(0, |s| s.certificates),
            chain_validation_skipped: server.as_ref().is_some_and(|s| s.validation_skipped),
            peer_leaf: server.and_then(|s| s.leaf),
            certificate_compression_sent: hs.compression_sent,
            certificate_compression_received: hs.compression_received,
            duration: now.saturating_duration_since(hs.started),
            flights_sent: hs.flight.flights,
            retransmissions: hs.flight.resent,
            peer_retransmissions: hs.peer_retransmissions,
            rtt: hs.flight.timer.estimate(),
            extended_master_secret: true,
            psk_identity: self
                .client_config()
                .and_then(|c| c.psk.as_ref())
                .map(|p| p.identity.clone())
                .unwrap_or_default(),
            datagrams_sent: self.stats.datagrams_sent + queued_datagrams,
            datagrams_received: self.stats.datagrams_received,
            bytes_sent: self.stats.bytes_sent + queued_bytes,
            bytes_received: self.stats.bytes_received,
            from_cache: Default::default(),
            cache_update: None,
            cookie: hs.cookie.clone(),
            early_data: None,
        }
    }
}

/// What a ClientHello carries besides the configuration and the offer's key shares.
pub(in crate::connection) struct HelloParts<'a> {
    /// A 1.3 server's cookie (RFC 8446 §4.2.2).
    pub cookie13: Option<&'a [u8]>,
    /// A 1.2 server's HelloVerifyRequest cookie, when the hello offers both versions.
    pub legacy_cookie: &'a [u8],
    /// The transcript before this hello, which the PSK binders cover.
    pub prefix: &'a Transcript13,
    /// The session's ticket and the external PSK to offer.
    pub resume: Option<&'a super::resume::Resume13>,
    /// Early data follows the hello (RFC 8446 §4.2.10).
    pub early: bool,
    /// The mobility extensions to offer.
    pub mobility: MobilityOffer13,
}

/// What a 1.3 ClientHello offers for moves: a connection_id (RFC 9146 §3), `rrc` (RFC 9853)
/// and `port_move` (the session's own server port, as in DTLS 1.2).
#[derive(Default)]
pub(in crate::connection) struct MobilityOffer13 {
    pub connection_id: Option<Vec<u8>>,
    pub rrc: bool,
    pub port_move: bool,
}

impl<'a> HelloParts<'a> {
    /// No cookie, no session, no early data, no CID.
    pub fn new(prefix: &'a Transcript13) -> Self {
        HelloParts {
            cookie13: None,
            legacy_cookie: &[],
            prefix,
            resume: None,
            early: false,
            mobility: MobilityOffer13::default(),
        }
    }
}

/// The body of a ClientHello offering DTLS 1.3 (and 1.2 with `state.legacy`), its PSK binder
/// written: it covers what `prefix` holds and the hello up to the binders (RFC 8446 §4.2.11.2).
/// `legacy_cookie` answers a 1.2 server's HelloVerifyRequest; a 1.3 server's cookie is `cookie13`.
/// `mobility`: the CID, `rrc` and `port_move` a hello offering 1.3 alone carries (one offering 1.2 too
/// carries the 1.2 ones, the same extensions, RFC 9146 §3).
pub(in crate::connection) fn client_hello13(
    config: &ClientConfig,
    state: &ExpectServerHello13,
    parts: HelloParts<'_>,
) -> Vec<u8> {
    let HelloParts { cookie13, legacy_cookie, prefix, resume, early, mobility } = parts;
    let legacy = state.legacy.as_deref();
    let mut suites: Vec<u16> = Connection::suites13(config).iter().map(|s| s.id()).collect();
    suites.extend(legacy.iter().flat_map(|l| l.suites.iter().copied()));
    let groups: Vec<u16> = config.groups.iter().map(|g| g.code()).collect();
    let key_shares: Vec<(u16, &[u8])> = state.sent_shares.iter().map(|(g, k)| (*g, &k[..])).collect();
    let certificates = config.trust_anchors.is_some();
    // Caching: a hello offering 1.2 too carries the 1.2 offer, which a 1.3 server reads alike.
    let (cached_info, client_cert_cache) = match legacy {
        Some(l) => (l.cached_info.clone(), l.client_cert_cache.clone()),
        None => caching_offer(config, state.cached.as_ref(), false),
    };
    let server_name =
        config.server_name.as_deref().filter(|n| n.parse::<std::net::IpAddr>().is_err()).map(str::as_bytes);
    // The PSKs: a session's ticket and the external PSK as `resume` holds them, else the
    // external PSK alone.
    let external;
    let offered = match resume {
        Some(r) => r.offered(),
        None => {
            external = super::resume::external_offer(config);
            &external[..]
        }
    };
    let identities: Vec<(&[u8], u32)> = offered.iter().map(|p| (p.identity(), p.age())).collect();
    let binder_lens: Vec<usize> = offered.iter().map(|p| p.binder_len()).collect();
    // With groups psk_dhe_ke alone, as OpenSSL and rustls offer: the PSK never keys a session
    // without forward secrecy unasked. Without groups only psk_ke can work (RFC 8446 §4.2.9),
    // and key_share and supported_groups say nothing.
    let modes: &[u8] = if groups.is_empty() { &[PSK_KE] } else { &[PSK_DHE_KE] };
    let versions: &[u16] = if legacy.is_some() { &[DTLS_1_3, DTLS_1_2] } else { &[DTLS_1_3] };
    // A 1.2 server reads supported_groups and signature_algorithms beside ec_point_formats
    // (RFC 8422 §5.1); a 1.3 hello needs no point formats.
    let ecc = (legacy.is_some() && certificates).then_some((&groups[..], &SCHEMES[..]));
    let ext = OutExtensions {
        server_name: if certificates { server_name } else { None },
        extended_master_secret: legacy.is_some(),
        ecc,
        session_ticket: legacy.and_then(|l| l.session_ticket.as_deref()),
        connection_id: legacy.and_then(|l| l.connection_id.as_deref()).or(mobility.connection_id.as_deref()),
        rrc: legacy.is_some_and(|l| l.rrc) || mobility.rrc,
        port_move: legacy.is_some_and(|l| l.port_move) || mobility.port_move,
        cached_info: cached_info.as_deref(),
        client_cert_cache: client_cert_cache.as_deref(),
        supported_versions: Some(versions),
        supported_groups: (ecc.is_none() && !groups.is_empty()).then_some(&groups[..]),
        signature_algorithms: (ecc.is_none() && certificates).then_some(&SCHEMES[..]),
        compress_certificate: certificates.then_some(config.certificate_compression.algorithms()),
        key_shares: (!groups.is_empty()).then_some(&key_shares[..]),
        cookie13,
        // Also without a PSK to offer: the modes are those of the tickets the client takes, and
        // a server sends none for modes not advertised (RFC 8446 §4.2.9), so a client that
        // takes no tickets and offers no PSK lists none.
        psk_key_exchange_modes: (config.enable_tickets || !identities.is_empty()).then_some(modes),
        psk_offer: (!identities.is_empty())
            .then_some(PskOffer { identities: &identities, binder_lens: &binder_lens }),
        early_data: early,
        use_srtp: (!config.srtp_profiles.is_empty()).then_some(&config.srtp_profiles[..]),
        ..Default::default()
    };
    let session_id = legacy.map_or(&[][..], |l| &l.session_id[..]);
    let mut body = Vec::with_capacity(256);
    ClientHello::encode_with(&mut body, &state.random, session_id, legacy_cookie, &suites, &ext);
    // The binders cover what `prefix` holds and the hello up to them (RFC 8446 §4.2.11.2).
    super::resume::write_binders(offered, prefix, &mut body);
    body
}
