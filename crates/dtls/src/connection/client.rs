//! The client's handshake (RFC 6347 §4.2.4 flights 1, 3, 5; RFC 5246 §7.3 for the abbreviated
//! one): one state per awaited message, each carrying what the next step needs, and the client's
//! flights, each built in one place.

use super::handshake::{agree, ephemeral, sign, Abort, Handshake, SCHEMES};
use super::tls13::resume::Resume13;
use super::tls13::{client_hello13, ExpectServerHello13, HelloParts, Legacy12, Transcript13};
use super::Step;
use super::{Connection, Finished};
use crate::alert::AlertDescription;
use crate::cache::{derive_client_ticket, CacheUse, CachedServer};
use crate::clock::unix_now;
use crate::config::{ClientConfig, RetransmitPolicy};
use crate::crypto::MasterSecret;
use crate::error::Mismatch;
use crate::handshake::{
    encode_cached_info_offer, encode_certificate, encode_client_cert_offer, encode_psk_identity,
    encode_signed, fingerprint, fingerprints_equal, parse_cached_info_selection, parse_certificate,
    parse_client_cert_answer, parse_fingerprint_message, parse_new_session_ticket, parse_psk_identity,
    psk_premaster, CachedObjectType, CertificateRequest, ClientHello, EcdheServerKeyExchange, Extensions,
    HandshakeType, HelloVerifyRequest, NamedGroup, OutExtensions, ServerHello, CERT_TYPE_ECDSA_SIGN,
    CERT_TYPE_RSA_SIGN, MAX_COOKIE_LEN,
};
use crate::record::DTLS_1_2;
use crate::session::{ClientSession, Resumption};
use crate::suite::CipherSuite;
use crate::timer::RetransmitTimer;
use fastshake_core::Instant;
use fastshake_pki::{CertDer, KeyAlgorithm, PeerPublicKey, SignatureScheme, Validation};
use rand_core::RngCore;

/// How long a client offers a session resumed by ID (the server decides; this bounds our side).
const DEFAULT_SESSION_LIFETIME_SECS: u32 = 2 * 3600;

/// The client's handshake steps, each named for the message it awaits (rustls's `Expect*`).
#[allow(clippy::enum_variant_names)]
pub(super) enum ClientStep {
    ExpectServerHello(ExpectServerHello),
    ExpectCertificate(ExpectCertificate),
    ExpectServerKeyExchange(ExpectServerKeyExchange),
    ExpectServerHelloDone(ExpectServerHelloDone),
    ExpectServerFinished(ExpectServerFinished),
}

/// Flight 1 or 3 sent; a HelloVerifyRequest (once more with a cookie) or the ServerHello comes.
pub(super) struct ExpectServerHello {
    /// The last ClientHello sent and its message_seq: the transcript starts with the one the
    /// ServerHello answers (RFC 6347 §4.2.6), so it is hashed only then.
    hello: Vec<u8>,
    pub hello_seq: u16,
    cookie: Vec<u8>,
    offer: Option<Offer>,
    /// What the cache holds for this server, offered when the configuration says so.
    pub cached: Option<CachedServer>,
    /// The hello offers DTLS 1.3 too: what that offer needs if the server takes it ...
    pub offer13: Option<Box<ExpectServerHello13>>,
    /// ... and the 1.3 session it offers to resume, with its PSKs.
    pub resume13: Option<Box<Resume13>>,
}

/// A session offered for resumption.
pub(super) struct Offer {
    session: ClientSession,
    /// The session ID sent: the session's, or a random one beside a ticket (RFC 5077 §3.4: it
    /// tells us when the server accepts the ticket).
    session_id: Vec<u8>,
}

/// What the ServerHello of a full handshake said of the session it makes.
struct NewSession {
    session_id: Vec<u8>,
    /// A NewSessionTicket comes before the server's Finished (RFC 5077 §3.3).
    ticket_expected: bool,
    caching: Caching,
}

/// Handshake caching as the server agreed it (in its ServerHello, or in DTLS 1.3 its
/// EncryptedExtensions), and what this handshake learnt to cache.
#[derive(Default)]
pub(super) struct Caching {
    /// The entry the offer came from.
    pub offered: Option<CachedServer>,
    /// The server replaces its Certificate / CertificateRequest by a fingerprint (RFC 7924), or
    /// in 1.3 its Certificate by an abbreviated one.
    pub certificate_selected: bool,
    pub certificate_request_selected: bool,
    /// The server answered client-certificate caching; `ticket_selected`: it has our chain.
    pub client_cert_supported: bool,
    pub ticket_selected: bool,
    /// This handshake's server objects (bodies; in 1.3 the Certificate's static part), kept
    /// for the next one.
    pub certificate: Option<Vec<u8>>,
    pub certificate_request: Option<Vec<u8>>,
    /// We authenticated with our chain (sent or cached): a new ticket names it.
    pub sent_chain: bool,
    pub used: CacheUse,
}

/// The server's validated chain.
struct ServerChain {
    key: PeerPublicKey,
    certificates: usize,
    leaf: Option<CertDer>,
}

/// A certificate suite was agreed: the server's Certificate comes.
pub(super) struct ExpectCertificate {
    suite: CipherSuite,
    session: NewSession,
}

/// The server's chain validated: its signed ServerKeyExchange comes.
pub(super) struct ExpectServerKeyExchange {
    suite: CipherSuite,
    session: NewSession,
    server: ServerChain,
}

/// The key exchange as the server's flight 4 set it up.
enum KeyExchange {
    Psk,
    Ecdhe {
        server: ServerChain,
        group: NamedGroup,
        public: Vec<u8>,
        /// The server asked for our certificate.
        request: Option<CertificateRequest>,
    },
}

/// The rest of flight 4 (CertificateRequest, PSK identity hint) and its ServerHelloDone come.
pub(super) struct ExpectServerHelloDone {
    suite: CipherSuite,
    session: NewSession,
    kx: KeyExchange,
}

/// Flight 5 sent (or, resuming, the ServerHello agreed): the server's Finished comes, after a
/// NewSessionTicket when one was announced.
pub(super) struct ExpectServerFinished {
    suite: CipherSuite,
    master: MasterSecret,
    resumed: Option<(Resumption, ClientSession)>,
    /// Full handshake: the new session's ID, and the server's chain for a certificate suite.
    session_id: Vec<u8>,
    server: Option<ServerChain>,
    ticket_expected: bool,
    /// The ticket received, with its lifetime hint.
    ticket: Option<(u32, Vec<u8>)>,
    caching: Caching,
}

impl Connection {
    /// The handshake state of a new client, before its first ClientHello: the client random,
    /// then (when resuming by ticket) a random session ID, drawn in that order from the seed.
    pub(super) fn client_handshake(
        config: &ClientConfig,
        now: Instant,
        remote: std::net::SocketAddr,
        rng_seed: [u8; 32],
        session: Option<ClientSession>,
        cached: Option<CachedServer>,
    ) -> Box<Handshake> {
        // The round trip last measured to this server starts the adaptive timer.
        let last_rtt = match config.retransmit {
            RetransmitPolicy::Adaptive { .. } => config.rtt_cache.get(remote.ip()),
            RetransmitPolicy::Fixed => None,
        };
        let timer = RetransmitTimer::new(
            config.initial_retransmit,
            config.max_retransmit,
            config.retransmit,
            last_rtt,
        );
        let mut hs = Handshake::new(now, rng_seed, timer, config.handshake_timeout);
        if config.trust_anchors.is_some() {
            hs.reassembler.set_budget(crate::handshake::PEER_CHAIN_BUDGET);
        }
        hs.rng.fill_bytes(&mut hs.client_random);
        if config.trust_anchors.is_some() && config.certified_key.is_some() {
            hs.transcript.keep_raw();
        }
        let now_unix = unix_now(config.wall_clock, now);
        // Offer only what can work: a suite still configured, not expired by our clock, made
        // for the same server name.
        let usable = session.filter(|s| {
            config.offered_suites().any(|o| o == s.suite)
                && (config.wall_clock.is_none() || now_unix < s.expires_unix())
                && s.server_name == config.server_name
                && (s.ticket.is_some() || !s.session_id.is_empty())
        });
        let offer = usable.map(|session| {
            let mut session_id = session.session_id.clone();
            if session_id.is_empty() {
                let mut id = [0u8; 32];
                hs.rng.fill_bytes(&mut id);
                session_id = id.to_vec();
            }
            Offer { session, session_id }
        });
        let cached = scoped_cache(config, cached);
        hs.step = Some(Step::Client(ClientStep::ExpectServerHello(ExpectServerHello {
            hello: Vec::new(),
            hello_seq: 0,
            // A cookie from an earlier exchange saves the HelloVerifyRequest round trip.
            // (A 1.2 server's cookie: a 1.3 server refuses a hello that offers both with one,
            // RFC 9147 §5.3.)
            cookie: match config.versions {
                crate::config::Versions::Both => Vec::new(),
                _ => config.cookie.clone().unwrap_or_default(),
            },
            offer,
            cached,
            offer13: None,
            resume13: None,
        })));
        hs
    }

    /// Flight 1 (or 3, with the cookie): the ClientHello.
    pub(super) fn send_client_hello(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        state: &mut ExpectServerHello,
    ) {
        let Some(config) = self.client_config().cloned() else { return };
        let own_cid = self.path.as_deref().filter(|p| p.offered_cid).map(|p| p.own_cid());
        let suites: Vec<u16> = config.offered_suites().map(|s| s.id()).collect();
        let certificates = config.trust_anchors.is_some();
        // The hybrid is DTLS 1.3's alone.
        let groups: Vec<u16> = config.groups.iter().filter(|g| !g.is_hybrid()).map(|g| g.code()).collect();
        // RFC 6066 §3: server_name carries DNS names only, never address literals.
        let server_name = config
            .server_name
            .as_deref()
            .filter(|n| n.parse::<std::net::IpAddr>().is_err())
            .map(str::as_bytes);
        let session_ticket = match state.offer.as_ref().and_then(|o| o.session.ticket.as_deref()) {
            Some(ticket) => Some(ticket),
            None => config.enable_tickets.then_some(&[][..]),
        };
        let (cached_info, client_cert_cache) = caching_offer(&config, state.cached.as_ref(), true);
        let ext = OutExtensions {
            extended_master_secret: true,
            server_name: if certificates { server_name } else { None },
            ecc: certificates.then_some((&groups[..], &SCHEMES[..])),
            session_ticket,
            connection_id: own_cid,
            rrc: config.mobility.return_routability_check,
            port_move: config.mobility.follow_server_port,
            cached_info: cached_info.as_deref(),
            client_cert_cache: client_cert_cache.as_deref(),
            use_srtp: (!config.srtp_profiles.is_empty()).then_some(&config.srtp_profiles[..]),
            ..Default::default()
        };
        let session_id = state.offer.as_ref().map_or(&[][..], |o| o.session_id.as_slice());
        let mut body = Vec::with_capacity(160);
        let legacy = state.offer13.is_some().then(|| Legacy12 {
            suites: suites.clone(),
            session_id: session_id.to_vec(),
            session_ticket: ext.session_ticket.map(<[u8]>::to_vec),
            connection_id: ext.connection_id.map(<[u8]>::to_vec),
            rrc: ext.rrc,
            port_move: ext.port_move,
            cached_info: ext.cached_info.map(<[u8]>::to_vec),
            client_cert_cache: ext.client_cert_cache.map(<[u8]>::to_vec),
        });
        match (legacy, state.offer13.as_deref_mut()) {
            // Offering DTLS 1.3 too: the hello the 1.3 handshake writes, with this 1.2 part.
            (Some(legacy), Some(offer13)) => {
                offer13.legacy = Some(Box::new(legacy));
                let prefix = Transcript13::Pending(Vec::new());
                let parts = HelloParts {
                    legacy_cookie: &state.cookie,
                    resume: state.resume13.as_deref(),
                    ..HelloParts::new(&prefix)
                };
                body = client_hello13(&config, offer13, parts);
                offer13.hello.clone_from(&body);
            }
            _ => ClientHello::encode_with(
                &mut body,
                &hs.client_random,
                session_id,
                &state.cookie,
                &suites,
                &ext,
            ),
        }
        hs.cookie.clone_from(&state.cookie);
        hs.flight.clear();
        state.hello_seq = hs.next_message_seq;
        state.hello = body.clone();
        hs.push_message(0, HandshakeType::ClientHello, body, false);
        // The server mirrors our message_seq in its answer.
        hs.reassembler.reset(state.hello_seq);
        self.send_new_flight(now, hs, true);
    }

    /// A HelloVerifyRequest, handled statelessly (it is not part of the transcript).
    pub(super) fn client_on_hello_verify(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        message_seq: u16,
        body: &[u8],
    ) -> Result<(), Abort> {
        let hvr = HelloVerifyRequest::parse(body).map_err(Abort::decode)?;
        if hvr.cookie.len() > MAX_COOKIE_LEN {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        let Some(Step::Client(ClientStep::ExpectServerHello(mut state))) = hs.step.take() else {
            return Ok(());
        };
        if message_seq == state.hello_seq {
            // It echoes the record number of the ClientHello it answers (RFC 6347 §4.2.1): a
            // round trip even when that ClientHello was resent.
            let _ = hs.flight.timer.on_acknowledged(now, hs.record_seq_in, self.stats.bytes_received);
        }
        // The server answers each ClientHello with its message_seq (RFC 6347 §4.2.2): a lower
        // one answers a ClientHello we already replaced. Taking its cookie would restart the
        // handshake under a ServerHello already on its way, which then looks out of order.
        if message_seq != state.hello_seq {
            self.stats.records_dropped += 1;
        } else if state.cookie != hvr.cookie {
            state.cookie = hvr.cookie.to_vec();
            self.send_client_hello(now, hs, &mut state);
            // The HelloVerifyRequest's record number echoed ours (RFC 6347 §4.2.1), so the
            // server's own count starts with its next flight, at most one past the ClientHello
            // it answers: a first record numbered beyond that follows records that went missing.
            hs.peer_next_seq[0] = Some(hs.epoch0_write_seq);
        }
        // (The same cookie again answers a ClientHello we already resent with it.)
        hs.step = Some(Step::Client(ClientStep::ExpectServerHello(state)));
        Ok(())
    }

    /// One whole handshake message of the server, in order.
    pub(super) fn client_on_message(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        step: ClientStep,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
    ) -> Result<Step, Abort> {
        let config = self.client_config().cloned().ok_or_else(Abort::unexpected)?;
        let next = match (step, msg_type) {
            (ClientStep::ExpectServerHello(s), HandshakeType::ServerHello) => {
                self.client_on_server_hello(hs, &config, s, message_seq, body)?
            }
            (ClientStep::ExpectCertificate(mut s), HandshakeType::Certificate) => {
                // RFC 7924 §4.1: a selected Certificate comes as the fingerprint we offered.
                let cached = match (s.session.caching.certificate_selected, &s.session.caching.offered) {
                    (true, Some(CachedServer { certificate: Some(cached), .. })) => {
                        let hash = parse_fingerprint_message(body).map_err(Abort::decode)?;
                        if !fingerprints_equal(hash, &fingerprint(cached)) {
                            return Err(Abort::alert(AlertDescription::IllegalParameter));
                        }
                        s.session.caching.used.server_certificate = true;
                        Some(cached.clone())
                    }
                    _ => None,
                };
                let chain_body = cached.as_deref().unwrap_or(body);
                let certs = parse_certificate(chain_body).map_err(Abort::decode)?;
                let anchors = config.trust_anchors.as_ref().ok_or_else(Abort::unexpected)?;
                let (chain, verified, validation) =
                    super::handshake::validate_server_chain(&config, anchors, now, &certs)?;
                hs.chain_validation_skipped = validation == Validation::Cached;
                let key = verified.key;
                if super::handshake::suite_key_algorithm(s.suite) != Some(key.algorithm()) {
                    return Err(Abort::alert(AlertDescription::UnsupportedCertificate));
                }
                if config.cached_info {
                    s.session.caching.certificate = Some(chain_body.to_vec());
                }
                // The transcript hashes the message as it was on the wire (RFC 7924 §4).
                hs.transcript.add(msg_type, message_seq, body);
                let server = ServerChain { key, certificates: chain.len(), leaf: chain.into_iter().next() };
                ClientStep::ExpectServerKeyExchange(ExpectServerKeyExchange {
                    suite: s.suite,
                    session: s.session,
                    server,
                })
            }
            (ClientStep::ExpectServerKeyExchange(s), HandshakeType::ServerKeyExchange) => {
                let ske = EcdheServerKeyExchange::parse(body).map_err(Abort::decode)?;
                let group = NamedGroup::from_code(ske.group)
                    .filter(|g| config.groups.contains(g) && !g.is_hybrid())
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                if ske.public.len() != group.public_len() {
                    return Err(Abort::alert(AlertDescription::IllegalParameter));
                }
                let scheme = SignatureScheme::from_code(ske.scheme)
                    .filter(|s| SCHEMES.contains(&s.code()))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let mut signed = Vec::with_capacity(64 + ske.params.len());
                signed.extend_from_slice(&hs.client_random);
                signed.extend_from_slice(&hs.server_random);
                signed.extend_from_slice(ske.params);
                fastshake_pki::verify_signature(&s.server.key, scheme, &signed, ske.signature)
                    .map_err(Abort::peer)?;
                let public = ske.public.to_vec();
                hs.transcript.add(msg_type, message_seq, body);
                ClientStep::ExpectServerHelloDone(ExpectServerHelloDone {
                    suite: s.suite,
                    session: s.session,
                    kx: KeyExchange::Ecdhe { server: s.server, group, public, request: None },
                })
            }
            (
                ClientStep::ExpectServerHelloDone(ExpectServerHelloDone {
                    suite,
                    mut session,
                    kx: KeyExchange::Ecdhe { server, group, public, request: None },
                }),
                HandshakeType::CertificateRequest,
            ) => {
                let caching = &mut session.caching;
                let cached = match (caching.certificate_request_selected, &caching.offered) {
                    (true, Some(CachedServer { certificate_request: Some(cached), .. })) => {
                        let hash = parse_fingerprint_message(body).map_err(Abort::decode)?;
                        if !fingerprints_equal(hash, &fingerprint(cached)) {
                            return Err(Abort::alert(AlertDescription::IllegalParameter));
                        }
                        caching.used.certificate_request = true;
                        Some(cached.clone())
                    }
                    _ => None,
                };
                let request_body = cached.as_deref().unwrap_or(body);
                let request = CertificateRequest::parse(request_body).map_err(Abort::decode)?;
                if config.cached_info {
                    caching.certificate_request = Some(request_body.to_vec());
                }
                hs.transcript.add(msg_type, message_seq, body);
                let kx = KeyExchange::Ecdhe { server, group, public, request: Some(request) };
                ClientStep::ExpectServerHelloDone(ExpectServerHelloDone { suite, session, kx })
            }
            (
                ClientStep::ExpectServerHelloDone(s @ ExpectServerHelloDone { kx: KeyExchange::Psk, .. }),
                HandshakeType::ServerKeyExchange,
            ) => {
                // The identity hint is informational: the client has one configured key.
                parse_psk_identity(body).map_err(Abort::decode)?;
                hs.transcript.add(msg_type, message_seq, body);
                ClientStep::ExpectServerHelloDone(s)
            }
            (ClientStep::ExpectServerHelloDone(s), HandshakeType::ServerHelloDone) => {
                if !body.is_empty() {
                    return Err(Abort::alert(AlertDescription::DecodeError));
                }
                hs.transcript.add(msg_type, message_seq, body);
                hs.peer_prev_flight_last = Some(message_seq);
                self.client_send_key_exchange(now, hs, &config, s)?
            }
            (
                ClientStep::ExpectServerFinished(
                    mut s @ ExpectServerFinished { ticket_expected: true, ticket: None, .. },
                ),
                HandshakeType::NewSessionTicket,
            ) => {
                let (hint, ticket) = parse_new_session_ticket(body).map_err(Abort::decode)?;
                let ticket = ticket.to_vec();
                hs.transcript.add(msg_type, message_seq, body);
                // An empty ticket means "none this time" (RFC 5077 §3.3).
                s.ticket = (!ticket.is_empty()).then_some((hint, ticket));
                s.ticket_expected = false;
                ClientStep::ExpectServerFinished(s)
            }
            (ClientStep::ExpectServerFinished(s), HandshakeType::Finished) => {
                hs.check_peer_finished(&s.master, body, false)?;
                if s.resumed.is_some() {
                    // Abbreviated handshake: our ChangeCipherSpec and Finished close it.
                    hs.transcript.add(msg_type, message_seq, body);
                    hs.peer_prev_flight_last = Some(message_seq);
                    hs.flight.clear();
                    hs.push_change_cipher_spec_and_finished(&s.master, true, false);
                    self.send_new_flight(now, hs, false);
                }
                return Ok(self.client_complete(now, hs, &config, s));
            }
            _ => return Err(Abort::unexpected()),
        };
        Ok(Step::Client(next))
    }

    fn client_on_server_hello(
        &mut self,
        hs: &mut Handshake,
        config: &ClientConfig,
        state: ExpectServerHello,
        message_seq: u16,
        body: &[u8],
    ) -> Result<ClientStep, Abort> {
        let sh = ServerHello::parse(body).map_err(Abort::decode)?;
        if sh.version != DTLS_1_2 {
            return Err(Abort::alert(AlertDescription::ProtocolVersion));
        }
        // A server that speaks 1.3 but answers our offer of 1.3 in 1.2 says so in its random
        // (RFC 8446 §4.1.3): something between us took 1.3 out of the hello.
        if state.offer13.is_some() && sh.random[24..] == crate::handshake::DOWNGRADE_TLS12 {
            let alert = AlertDescription::IllegalParameter;
            return Err(Abort { alert: Some(alert), error: crate::Error::Downgrade { alert } });
        }
        let suite = CipherSuite::from_id(sh.cipher_suite)
            .filter(|s| config.offered_suites().any(|o| o == *s))
            .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
        if sh.compression_method != 0 {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        // A 1.2 ServerHello answers none of the TLS 1.3 extensions we may have offered.
        if sh.extensions.unknown.or(sh.extensions.tls13_extension()).is_some() {
            return Err(Abort::alert(AlertDescription::UnsupportedExtension));
        }
        // Caching extensions only as answers to ours (RFC 5246 §7.4.1.4).
        let (offered_info, offered_cert) = caching_offer(config, state.cached.as_ref(), true);
        if (sh.extensions.cached_info.is_some() && offered_info.is_none())
            || (sh.extensions.client_cert_cache.is_some() && offered_cert.is_none())
        {
            return Err(Abort::alert(AlertDescription::UnsupportedExtension));
        }
        check_srtp_answer(config, &sh.extensions)?;
        // Mobility extensions only as answers to ours (RFC 5246 §7.4.1.4).
        let offered = &config.mobility;
        if (sh.extensions.connection_id.is_some() && offered.connection_id.is_none())
            || (sh.extensions.rrc && !offered.return_routability_check)
            || (sh.extensions.port_move && !offered.follow_server_port)
        {
            return Err(Abort::alert(AlertDescription::UnsupportedExtension));
        }
        if let Some(path) = self.path.as_deref_mut() {
            path.cid_negotiated = sh.extensions.connection_id.is_some();
            path.set_peer_cid(sh.extensions.connection_id.unwrap_or_default());
            if !path.cid_negotiated {
                path.set_own_cid(&[]);
            }
            path.rrc = sh.extensions.rrc;
            path.port_move = sh.extensions.port_move;
        }
        if sh.extensions.renegotiation_info.is_some_and(|r| !r.is_empty()) {
            return Err(Abort::no_match(Mismatch::Renegotiation));
        }
        if !sh.extensions.extended_master_secret && config.require_extended_master_secret {
            return Err(Abort::no_match(Mismatch::ExtendedMasterSecret));
        }
        hs.extended_master_secret = sh.extensions.extended_master_secret;
        hs.server_random = sh.random;
        hs.transcript.add(HandshakeType::ClientHello, state.hello_seq, &state.hello);
        hs.transcript.add(HandshakeType::ServerHello, message_seq, body);
        self.suite = Some(suite);
        let ticket_expected = sh.extensions.session_ticket.is_some();
        let resumed =
            state.offer.filter(|o| !sh.session_id.is_empty() && sh.session_id == o.session_id.as_slice());
        if let Some(offer) = resumed {
            // RFC 7627 §5.3: a session made with the extended master secret resumes only with it.
            if offer.session.suite != suite {
                return Err(Abort::alert(AlertDescription::IllegalParameter));
            }
            if !sh.extensions.extended_master_secret {
                return Err(Abort::no_match(Mismatch::ExtendedMasterSecret));
            }
            let resumption =
                if offer.session.ticket.is_some() { Resumption::Ticket } else { Resumption::SessionId };
            if suite.is_psk() {
                hs.psk_identity = config.psk.as_ref().map(|p| p.identity.clone()).unwrap_or_default();
            }
            let master = MasterSecret(offer.session.master_secret);
            self.version.install12(hs.keys(suite, &master, true));
            return Ok(ClientStep::ExpectServerFinished(ExpectServerFinished {
                suite,
                master,
                resumed: Some((resumption, offer.session)),
                session_id: sh.session_id.to_vec(),
                server: None,
                ticket_expected,
                ticket: None,
                caching: Caching::default(),
            }));
        }
        let caching = agreed_caching(config, state.cached, &sh.extensions)?;
        let session = NewSession { session_id: sh.session_id.to_vec(), ticket_expected, caching };
        Ok(if suite.is_psk() {
            ClientStep::ExpectServerHelloDone(ExpectServerHelloDone { suite, session, kx: KeyExchange::Psk })
        } else {
            ClientStep::ExpectCertificate(ExpectCertificate { suite, session })
        })
    }

    /// Flight 5: [Certificate], ClientKeyExchange, [CertificateVerify], ChangeCipherSpec, Finished.
    fn client_send_key_exchange(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        config: &ClientConfig,
        state: ExpectServerHelloDone,
    ) -> Result<ClientStep, Abort> {
        let ExpectServerHelloDone { suite, mut session, kx } = state;
        hs.flight.clear();
        // Certificate suites: our certificate (when asked) goes before ClientKeyExchange, and
        // CertificateVerify after it; the scheme is the first of our key's the server accepts.
        let mut verify_with: Option<(SignatureScheme, &fastshake_pki::CertifiedKey)> = None;
        let (premaster, server) = match kx {
            KeyExchange::Psk => {
                let psk = config.psk.as_ref().ok_or_else(Abort::unexpected)?;
                let mut cke = Vec::with_capacity(2 + psk.identity.len());
                encode_psk_identity(&mut cke, &psk.identity);
                hs.push_message(0, HandshakeType::ClientKeyExchange, cke, true);
                hs.psk_identity = psk.identity.clone();
                (psk_premaster(&psk.key), None)
            }
            KeyExchange::Ecdhe { server, group, public: peer_public, request } => {
                if let Some(request) = &request {
                    verify_with = config.certified_key.as_deref().and_then(|ck| {
                        let kind = match ck.key.algorithm() {
                            KeyAlgorithm::EcdsaP256 => CERT_TYPE_ECDSA_SIGN,
                            KeyAlgorithm::Rsa => CERT_TYPE_RSA_SIGN,
                        };
                        if !request.certificate_types.contains(&kind) {
                            return None;
                        }
                        let scheme = ck.key.schemes().iter().find(|s| request.schemes.contains(&s.code()))?;
                        Some((*scheme, ck))
                    });
                    let chain: Vec<&[u8]> = verify_with
                        .map(|(_, ck)| ck.chain.iter().map(|c| c.as_ref()).collect())
                        .unwrap_or_default();
                    let caching = &mut session.caching;
                    caching.sent_chain = verify_with.is_some();
                    let mut body = Vec::with_capacity(3 + chain.iter().map(|c| 3 + c.len()).sum::<usize>());
                    if caching.ticket_selected && caching.sent_chain {
                        // The server has our chain: an empty body (seed 003 §IV-B); the
                        // CertificateVerify below still proves we hold its key.
                        caching.used.client_certificate = true;
                    } else {
                        encode_certificate(&mut body, &chain);
                    }
                    hs.push_message(0, HandshakeType::Certificate, body, true);
                }
                let (private, public) = ephemeral(group, &mut hs.rng);
                let mut cke = Vec::with_capacity(1 + public.len());
                fastshake_core::codec::put_vec8(&mut cke, &public);
                hs.push_message(0, HandshakeType::ClientKeyExchange, cke, true);
                (agree(private, group, &peer_public)?, Some(server))
            }
        };
        let master = hs.derive_master(&premaster);
        if let Some((scheme, ck)) = verify_with {
            let raw = hs.transcript.take_raw().ok_or_else(Abort::unexpected)?;
            let signature = sign(&ck.key, scheme, &raw, &mut hs.rng)?;
            let mut body = Vec::with_capacity(4 + signature.len());
            encode_signed(&mut body, scheme.code(), &signature);
            hs.push_message(0, HandshakeType::CertificateVerify, body, true);
        }
        self.version.install12(hs.keys(suite, &master, true));
        hs.push_change_cipher_spec_and_finished(&master, true, true);
        self.send_new_flight(now, hs, true);
        Ok(ClientStep::ExpectServerFinished(ExpectServerFinished {
            suite,
            master,
            resumed: None,
            session_id: session.session_id,
            server,
            ticket_expected: session.ticket_expected,
            ticket: None,
            caching: session.caching,
        }))
    }

    /// The server's Finished verified: the session to keep for resumption, and the summary.
    fn client_complete(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        config: &ClientConfig,
        s: ExpectServerFinished,
    ) -> Step {
        let created_unix = unix_now(config.wall_clock, now);
        let session = if !hs.extended_master_secret {
            None
        } else if let Some((_, mut offered)) = s.resumed.clone() {
            if let Some((hint, ticket)) = s.ticket {
                offered.ticket = Some(ticket);
                offered.lifetime_secs = hint;
                offered.created_unix = created_unix;
            }
            Some(offered)
        } else if s.session_id.is_empty() && s.ticket.is_none() {
            None
        } else {
            let (lifetime_secs, ticket) = match s.ticket {
                Some((hint, ticket)) => (hint, Some(ticket)),
                None => (DEFAULT_SESSION_LIFETIME_SECS, None),
            };
            Some(ClientSession {
                suite: s.suite,
                session_id: s.session_id,
                ticket,
                master_secret: s.master.0,
                server_name: config.server_name.clone(),
                created_unix,
                lifetime_secs,
                v13: None,
            })
        };
        let cache_update = (s.resumed.is_none() && s.server.is_some())
            .then(|| {
                cache_update(config, &s.caching, || {
                    derive_client_ticket(&s.master.0, &hs.client_random, &hs.server_random)
                })
            })
            .flatten();
        let (peer_certificates, peer_leaf) = s.server.map_or((0, None), |c| (c.certificates, c.leaf));
        let finished = Finished {
            suite: s.suite,
            resumption: s.resumed.map(|(r, _)| r),
            session,
            peer_certificates,
            peer_leaf,
            cache_entry: None,
            from_cache: s.caching.used,
            cache_update,
            client_chain_entry: None,
        };
        self.complete_handshake(now, hs, finished)
    }
}

impl ExpectServerHello {
    /// Whether a client still waits for the ServerHello (a client following the server's port
    /// takes the port the ServerHello comes from).
    pub(super) fn is_current(step: &Option<Step>) -> bool {
        matches!(step, Some(Step::Client(ClientStep::ExpectServerHello(_))))
    }
}

/// The entry to offer of what the cache holds: scoped per server, so an entry made under
/// another name is never offered (tracking), and none when caching is off.
pub(super) fn scoped_cache(config: &ClientConfig, cached: Option<CachedServer>) -> Option<CachedServer> {
    cached.filter(|c| {
        (config.cached_info || config.client_certificate_caching) && c.server_name == config.server_name
    })
}

/// The bodies of our caching extensions, when offered: `cached_info` with the fingerprints of
/// the server objects cached (RFC 7924 needs at least one; the CertificateRequest's only when
/// `request`, as 1.3 never caches it), and client-certificate caching with our ticket or
/// empty, when we have a certificate to send.
pub(super) fn caching_offer(
    config: &ClientConfig,
    cached: Option<&CachedServer>,
    request: bool,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let certificates = config.trust_anchors.is_some();
    let info = cached.filter(|_| config.cached_info && certificates).and_then(|c| {
        let mut objects = Vec::with_capacity(2);
        let hashes: Vec<(CachedObjectType, [u8; 32])> = [
            (CachedObjectType::Certificate, &c.certificate),
            (CachedObjectType::CertificateRequest, if request { &c.certificate_request } else { &None }),
        ]
        .into_iter()
        .filter_map(|(ty, body)| body.as_deref().map(|b| (ty, fingerprint(b))))
        .collect();
        objects.extend(hashes.iter().map(|(ty, h)| (*ty, &h[..])));
        (!objects.is_empty()).then(|| {
            let mut body = Vec::with_capacity(2 + 34 * objects.len());
            encode_cached_info_offer(&mut body, &objects);
            body
        })
    });
    let cert =
        (config.client_certificate_caching && certificates && config.certified_key.is_some()).then(|| {
            let mut body = Vec::new();
            encode_client_cert_offer(&mut body, cached.and_then(|c| c.client_ticket.as_deref()));
            body
        });
    (info, cert)
}

/// What the server's answer to a full handshake (a 1.2 ServerHello's extensions, a 1.3
/// EncryptedExtensions) selected of our caching offer. A selection of something never offered
/// is illegal_parameter; a malformed answer decode_error.
pub(super) fn agreed_caching(
    config: &ClientConfig,
    cached: Option<CachedServer>,
    answer: &Extensions<'_>,
) -> Result<Caching, Abort> {
    let mut caching = Caching::default();
    let offered = cached.as_ref();
    if let Some(data) = answer.cached_info {
        for ty in parse_cached_info_selection(data).map_err(Abort::decode)? {
            let was_offered = match ty {
                Some(CachedObjectType::Certificate) => offered.is_some_and(|c| c.certificate.is_some()),
                Some(CachedObjectType::CertificateRequest) => {
                    offered.is_some_and(|c| c.certificate_request.is_some())
                }
                None => false,
            };
            if !was_offered {
                return Err(Abort::alert(AlertDescription::IllegalParameter));
            }
            match ty {
                Some(CachedObjectType::Certificate) => caching.certificate_selected = true,
                _ => caching.certificate_request_selected = true,
            }
        }
    }
    if let Some(data) = answer.client_cert_cache {
        caching.client_cert_supported = true;
        caching.ticket_selected = parse_client_cert_answer(data).map_err(Abort::decode)?;
        if caching.ticket_selected && offered.is_none_or(|c| c.client_ticket.is_none()) {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
    }
    caching.offered = cached.filter(|_| config.cached_info || config.client_certificate_caching);
    Ok(caching)
}

/// The entry to keep for this server after a full certificate handshake: the server objects
/// (received or reused) and, when the server supports client-certificate caching and we
/// authenticated with our chain, the ticket both sides now derive (`ticket`, by the version's
/// key schedule).
pub(super) fn cache_update(
    config: &ClientConfig,
    caching: &Caching,
    ticket: impl FnOnce() -> [u8; crate::cache::CLIENT_TICKET_LEN],
) -> Option<CachedServer> {
    if !config.cached_info && !config.client_certificate_caching {
        return None;
    }
    let client_ticket =
        (config.client_certificate_caching && caching.client_cert_supported && caching.sent_chain)
            .then(|| ticket().to_vec());
    Some(CachedServer {
        server_name: config.server_name.clone(),
        certificate: caching.certificate.clone(),
        certificate_request: caching.certificate_request.clone(),
        client_ticket,
    })
}

/// A server's use_srtp answers ours with one of the profiles we offered (RFC 5764 §4.1.1):
/// in a 1.2 ServerHello or a 1.3 EncryptedExtensions.
pub(super) fn check_srtp_answer(
    config: &ClientConfig,
    ext: &crate::handshake::Extensions<'_>,
) -> Result<(), Abort> {
    let Some(data) = ext.use_srtp else { return Ok(()) };
    if config.srtp_profiles.is_empty() {
        return Err(Abort::alert(AlertDescription::UnsupportedExtension));
    }
    let answer = crate::handshake::srtp_profiles(data).map_err(Abort::decode)?;
    match answer[..] {
        [profile] if config.srtp_profiles.contains(&profile) => Ok(()),
        _ => Err(Abort::alert(AlertDescription::IllegalParameter)),
    }
}
