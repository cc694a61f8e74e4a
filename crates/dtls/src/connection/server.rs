//! The server's handshake (RFC 6347 §4.2.4 flights 4 and 6; RFC 5246 §7.3 for the abbreviated
//! one), from the ClientHello whose cookie the endpoint verified: one state per awaited message,
//! each carrying what the next step needs, and the server's flights, each built in one place.

use super::handshake::{
    agree, ephemeral, lifetime_hint, sign, suite_key_algorithm, Abort, EcdheSecret, Handshake, SCHEMES,
};
use super::{Connection, Finished, Step};
use crate::alert::AlertDescription;
use crate::cache::{derive_client_ticket, CacheUse, CachedClientChain, CLIENT_TICKET_LEN};
use crate::clock::unix_now;
use crate::config::ServerConfig;
use crate::crypto::MasterSecret;
use crate::error::{Error, Mismatch};
use crate::handshake::{
    encode_cached_info_selection, encode_certificate, encode_client_cert_answer, encode_ecdhe_params,
    encode_fingerprint_message, encode_new_session_ticket, encode_psk_identity, encode_signed, fingerprint,
    fingerprints_equal, parse_cached_info_offer, parse_certificate, parse_certificate_verify,
    parse_client_cert_offer, parse_ecdhe_client_key_exchange, parse_psk_identity, psk_premaster, u16_list,
    CachedObjectType, CertificateRequest, ClientHello, HandshakeType, NamedGroup, OutExtensions, ServerHello,
    SCSV_EMPTY_RENEGOTIATION_INFO,
};
use crate::mobility::{ChallengeCookies, PathState};
use crate::record::{DTLS_1_2, MAX_SEQ};
use crate::rtt::RttEstimate;
use crate::session::{ClientAuth, ClientCertificate, Resumption, ServerSession, TicketKeys, TICKET_LEN};
use crate::suite::CipherSuite;
use crate::timer::RetransmitTimer;
use fastshake_core::Instant;
use fastshake_pki::{CertDer, PeerPublicKey, PkiError, SignatureScheme, Validation};
use rand_core::RngCore;
use std::time::Duration;

/// The ClientHello a server connection starts from, as the endpoint verified it.
pub(crate) struct VerifiedHello<'a> {
    /// Record sequence number of the ClientHello (our epoch-0 numbering continues from it, as
    /// the stateless HelloVerifyRequest reused it).
    pub record_seq: u64,
    pub message_seq: u16,
    /// The whole ClientHello body (for the transcript) ...
    pub body: &'a [u8],
    /// ... and the ClientHello the endpoint parsed from it.
    pub hello: &'a ClientHello<'a>,
    /// Size of the datagram(s) it came in, for the counters.
    pub datagram_len: usize,
    /// The cached session its session ID names, if any is fresh.
    pub cached: Option<ServerSession>,
    /// The endpoint's ticket keys now.
    pub ticket_keys: Option<TicketKeys>,
    /// The Connection ID the endpoint issues to this session if the client offers
    /// `connection_id` (unique in the endpoint; empty: none).
    pub issued_cid: Vec<u8>,
    /// Adaptive policy: the round trip the endpoint last measured to this client.
    pub cached_rtt: Option<RttEstimate>,
    /// Adaptive policy: the cookie exchange's round trip (the cookie's age) and the bytes of
    /// the HelloVerifyRequest it came in.
    pub cookie_rtt: Option<(Duration, u32)>,
    /// The client chain its client-certificate ticket names, taken out of the endpoint's cache
    /// (a ticket opens its entry once), with the ticket.
    pub client_chain: Option<([u8; CLIENT_TICKET_LEN], CachedClientChain)>,
}

/// The server's handshake steps, each named for the message it awaits (rustls's `Expect*`).
#[allow(clippy::enum_variant_names)]
pub(super) enum ServerStep {
    ExpectClientCertificate(ExpectClientCertificate),
    ExpectClientKeyExchange(ExpectClientKeyExchange),
    ExpectCertificateVerify(ExpectCertificateVerify),
    ExpectClientFinished(ExpectClientFinished),
}

/// What a full handshake promised the client about the session it makes.
struct NewSession {
    /// Our session ID for it (empty: the session is not cached).
    session_id: Vec<u8>,
    /// A NewSessionTicket goes before our Finished (RFC 5077 §3.3), sealed under these keys.
    ticket: Option<TicketKeys>,
    /// The client offered client-certificate caching and we cache chains.
    client_cert_caching: bool,
    /// The cached chain we selected: an empty Certificate stands for it.
    cached_chain: Option<CachedClientChain>,
    used: CacheUse,
}

/// The client's validated chain.
struct ClientChain {
    key: PeerPublicKey,
    certificates: usize,
    leaf: Option<CertDer>,
    verified: ClientCertificate,
    /// The whole chain, kept only for client-certificate caching.
    chain: Vec<CertDer>,
}

/// Flight 4 asked for a certificate: the client's Certificate comes.
pub(super) struct ExpectClientCertificate {
    suite: CipherSuite,
    session: NewSession,
    group: NamedGroup,
    secret: EcdheSecret,
}

/// Our ephemeral key, or a PSK suite.
enum KeyExchange {
    Psk,
    Ecdhe { group: NamedGroup, secret: EcdheSecret },
}

/// The client's ClientKeyExchange comes.
pub(super) struct ExpectClientKeyExchange {
    suite: CipherSuite,
    session: NewSession,
    kx: KeyExchange,
    client: Option<ClientChain>,
}

/// The client sent a certificate: its CertificateVerify comes.
pub(super) struct ExpectCertificateVerify {
    suite: CipherSuite,
    session: NewSession,
    master: MasterSecret,
    client: ClientChain,
}

/// The client's Finished comes; in a full handshake our flight 6 then answers it.
pub(super) struct ExpectClientFinished {
    suite: CipherSuite,
    master: MasterSecret,
    mode: Mode,
}

// One per handshake, in its box: the size of the larger variant costs nothing per record.
#[allow(clippy::large_enum_variant)]
enum Mode {
    Full {
        session: NewSession,
        client: Option<ClientChain>,
    },
    /// Resumed; a client chain taken from the cache goes back under its ticket.
    Abbreviated(Resumption, Option<([u8; CLIENT_TICKET_LEN], CachedClientChain)>),
}

impl Connection {
    /// The handshake of a server connection from a ClientHello whose cookie the endpoint verified:
    /// its flight 4 (or, resuming, its abbreviated flight) is queued.
    pub(crate) fn server(
        role: &super::ServerRole,
        now: Instant,
        remote: std::net::SocketAddr,
        rng_seed: [u8; 32],
        mut hello: VerifiedHello<'_>,
    ) -> Connection {
        let config = &role.config;
        let timer = RetransmitTimer::for_returned_cookie(
            config,
            hello.cached_rtt,
            hello.cookie_rtt,
            (hello.record_seq, hello.message_seq, hello.datagram_len),
        );
        let mut hs = Handshake::new(now, rng_seed, timer, config.handshake_timeout);
        if config.client_auth != crate::ClientAuth::None {
            hs.reassembler.set_budget(crate::handshake::PEER_CHAIN_BUDGET);
        }
        // Mobility state is made only when the server offers some; dropped again once the
        // ClientHello shows the client negotiated none of it.
        let issued_cid = std::mem::take(&mut hello.issued_cid);
        let path = config.mobility.any().then(|| {
            let mut seed = [0u8; 32];
            hs.rng.fill_bytes(&mut seed);
            let cookies = config
                .mobility
                .return_routability_check
                .then(|| Box::new(ChallengeCookies { seed, made: 0 }));
            Box::new(PathState::new(&issued_cid, cookies))
        });
        // Continue after the peer's number; a hostile number near the 48-bit limit restarts at 0.
        hs.epoch0_write_seq = if hello.record_seq < MAX_SEQ / 2 { hello.record_seq + 1 } else { 0 };
        hs.peer_next_seq[0] = Some(hello.record_seq.saturating_add(1));
        let mut conn = Connection::bare(std::sync::Arc::clone(&role.shared), remote);
        conn.path = path;
        conn.stats.datagrams_received = 1;
        conn.stats.bytes_received = hello.datagram_len as u64;
        if let Err(abort) = conn.server_start(now, &mut hs, config, hello) {
            conn.hs = Some(hs);
            conn.fail(abort);
            return conn;
        }
        conn.hs = Some(hs);
        conn
    }

    /// Answers the ClientHello: flight 4 of a full handshake, or the abbreviated flight.
    fn server_start(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        config: &ServerConfig,
        hello: VerifiedHello<'_>,
    ) -> Result<(), Abort> {
        let VerifiedHello { message_seq, body, hello: ch, cached, ticket_keys, client_chain, .. } = hello;
        // DTLS versions count down: 0xFEFD (1.2) is below 0xFEFF (1.0).
        if ch.version > DTLS_1_2 {
            let alert = AlertDescription::ProtocolVersion;
            let mismatch = Mismatch::Version { offered: ch.version };
            return Err(Abort { alert: Some(alert), error: Error::NoMatch { alert, mismatch } });
        }
        let served = config.suites.iter().copied().filter(|s| config.can_serve(*s));
        let suite = served.clone().find(|s| ch.suites().any(|id| id == s.id())).ok_or_else(|| {
            Abort::no_match(Mismatch::CipherSuite {
                offered: ch.suites().collect(),
                served: served.collect(),
            })
        })?;
        if !ch.compression_methods.contains(&0) {
            return Err(Abort::no_match(Mismatch::Compression));
        }
        // RFC 5746 §3.6: an initial handshake carries an empty renegotiation_info or the SCSV.
        if ch.extensions.renegotiation_info.is_some_and(|r| !r.is_empty()) {
            return Err(Abort::no_match(Mismatch::Renegotiation));
        }
        let secure_renegotiation = ch.extensions.renegotiation_info.is_some()
            || ch.suites().any(|id| id == SCSV_EMPTY_RENEGOTIATION_INFO);
        let ems = ch.extensions.extended_master_secret;
        if !ems && config.require_extended_master_secret {
            return Err(Abort::no_match(Mismatch::ExtendedMasterSecret));
        }
        // Resumption, only with the extended master secret: a ticket first, then the cached
        // session ID. Anything unknown, forged or expired leads to a full handshake.
        let now_unix = unix_now(config.wall_clock, now);
        let issue_ticket = ems && ch.extensions.session_ticket.is_some() && ticket_keys.is_some();
        if ems {
            let by_ticket = match (ch.extensions.session_ticket, ticket_keys.as_ref()) {
                (Some(t), Some(keys)) if !t.is_empty() => ServerSession::open(keys, t, now_unix),
                _ => None,
            };
            let candidate = match by_ticket {
                Some(s) => Some((Resumption::Ticket, s)),
                None => cached.map(|s| (Resumption::SessionId, s)),
            };
            let usable = candidate.filter(|(_, s)| {
                config.suites.contains(&s.suite)
                    && config.can_serve(s.suite)
                    && ch.suites().any(|id| id == s.suite.id())
                    && config.lets_resume(s, now_unix)
            });
            if let Some((kind, session)) = usable {
                let ticket_keys = ticket_keys.filter(|_| issue_ticket);
                return self.server_resume(
                    now,
                    hs,
                    config,
                    ch,
                    (message_seq, body),
                    (kind, session, client_chain),
                    secure_renegotiation,
                    ticket_keys,
                );
            }
        }
        // Certificate suites: the group and signature scheme both sides support.
        let ecdhe = match (suite_key_algorithm(suite), config.certified_key.as_ref()) {
            (None, _) => None,
            (Some(_), None) => return Err(Abort::alert(AlertDescription::InternalError)),
            (Some(_), Some(ck)) => {
                let group = match ch.extensions.supported_groups {
                    Some(list) => NamedGroup::ALL
                        .into_iter()
                        .find(|g| u16_list(list).any(|c| c == g.code()))
                        .ok_or_else(|| {
                            Abort::no_match(Mismatch::Group {
                                offered: u16_list(list).collect(),
                                ours: NamedGroup::ALL.map(NamedGroup::code).to_vec(),
                            })
                        })?,
                    // RFC 8422 §4: without the extension any curve will do.
                    None => NamedGroup::Secp256r1,
                };
                let scheme = match ch.extensions.signature_algorithms {
                    Some(list) => {
                        *ck.key.schemes().iter().find(|s| u16_list(list).any(|c| c == s.code())).ok_or_else(
                            || {
                                Abort::no_match(Mismatch::SignatureScheme {
                                    offered: u16_list(list).collect(),
                                    ours: ck.key.schemes().iter().map(|s| s.code()).collect(),
                                })
                            },
                        )?
                    }
                    // RFC 5246 §7.4.1.4.1 would mean SHA-1, which we do not sign with.
                    None => *ck.key.schemes().last().ok_or(Abort::alert(AlertDescription::InternalError))?,
                };
                Some((ck.clone(), group, scheme))
            }
        };
        self.started_from_hello(&ch.random, message_seq);
        self.suite = Some(suite);
        let request_certificate = ecdhe.is_some() && config.client_auth != ClientAuth::None;
        if request_certificate {
            hs.transcript.keep_raw();
        }
        self.server_hello_common(hs, config, ch, message_seq, body, ems);
        // A new session ID when the cache will keep the session (only sessions with the
        // extended master secret are ever resumed).
        let mut session_id = Vec::new();
        if ems && config.session_cache.max_entries > 0 {
            let mut id = [0u8; 32];
            hs.rng.fill_bytes(&mut id);
            session_id = id.to_vec();
        }
        // Caching (certificate suites only): RFC 7924's objects the client has, and the
        // client's chain its ticket names.
        let mut certificate = Vec::new();
        let mut certificate_request = Vec::new();
        if let Some((ck, _, _)) = &ecdhe {
            let chain: Vec<&[u8]> = ck.chain.iter().map(|c| c.as_ref()).collect();
            certificate.reserve(3 + chain.iter().map(|c| 3 + c.len()).sum::<usize>());
            encode_certificate(&mut certificate, &chain);
            if request_certificate {
                let anchors = config
                    .client_trust_anchors
                    .as_ref()
                    .ok_or(Abort::alert(AlertDescription::InternalError))?;
                CertificateRequest::encode(&mut certificate_request, &SCHEMES, anchors.subject_names());
            }
        }
        let selected = match (ecdhe.is_some() && config.cached_info, ch.extensions.cached_info) {
            (true, Some(data)) => select_cached(data, &certificate, &certificate_request)?,
            _ => Vec::new(),
        };
        let mut cached_info = Vec::new();
        if !selected.is_empty() {
            encode_cached_info_selection(&mut cached_info, &selected);
        }
        let client_cert_caching = request_certificate
            && config.client_cert_cache.max_entries > 0
            && ch.extensions.client_cert_cache.is_some();
        let cached_chain = match ch.extensions.client_cert_cache {
            Some(data) if client_cert_caching => usable_client_chain(config, now_unix, data, client_chain)?,
            _ => None,
        };
        let mut client_cert_answer = Vec::new();
        encode_client_cert_answer(&mut client_cert_answer, cached_chain.is_some());
        let path = self.path.as_deref();
        let srtp = srtp_answer(config, &ch.extensions);
        let ext = OutExtensions {
            extended_master_secret: ems,
            renegotiation_info: secure_renegotiation,
            point_formats: ecdhe.is_some() && ch.extensions.ec_point_formats.is_some(),
            session_ticket: issue_ticket.then_some(&[][..]),
            connection_id: path.filter(|p| p.cid_negotiated).map(|p| p.own_cid()),
            rrc: path.is_some_and(|p| p.rrc),
            port_move: path.is_some_and(|p| p.port_move),
            cached_info: (!selected.is_empty()).then_some(&cached_info[..]),
            client_cert_cache: client_cert_caching.then_some(&client_cert_answer[..]),
            use_srtp: srtp.as_ref().map(std::slice::from_ref),
            ..Default::default()
        };
        let mut sh = Vec::with_capacity(64);
        ServerHello::encode_with(&mut sh, &hs.server_random, &session_id, suite.id(), &ext);
        hs.push_message(0, HandshakeType::ServerHello, sh, true);
        let mut used = CacheUse::default();
        // RFC 7924 §4: a selected message is replaced by its fingerprint, and the transcript
        // hashes the replacement as sent.
        let replace = |ty: CachedObjectType, body: Vec<u8>, used: &mut bool| {
            if selected.contains(&ty) {
                *used = true;
                let mut m = Vec::with_capacity(33);
                encode_fingerprint_message(&mut m, &fingerprint(&body));
                m
            } else {
                body
            }
        };
        let certificate = replace(CachedObjectType::Certificate, certificate, &mut used.server_certificate);
        let certificate_request =
            replace(CachedObjectType::CertificateRequest, certificate_request, &mut used.certificate_request);
        let session = NewSession {
            session_id,
            ticket: ticket_keys.filter(|_| issue_ticket),
            client_cert_caching,
            cached_chain,
            used,
        };
        let step = match ecdhe {
            Some((ck, group, scheme)) => {
                hs.push_message(0, HandshakeType::Certificate, certificate, true);
                let (secret, public) = ephemeral(group, &mut hs.rng);
                let mut ske = Vec::with_capacity(80 + ck.key.max_signature_len());
                encode_ecdhe_params(&mut ske, group, &public);
                let mut signed = Vec::with_capacity(64 + ske.len());
                signed.extend_from_slice(&hs.client_random);
                signed.extend_from_slice(&hs.server_random);
                signed.extend_from_slice(&ske);
                let signature = sign(&ck.key, scheme, &signed, &mut hs.rng)?;
                encode_signed(&mut ske, scheme.code(), &signature);
                hs.push_message(0, HandshakeType::ServerKeyExchange, ske, true);
                if request_certificate {
                    hs.push_message(0, HandshakeType::CertificateRequest, certificate_request, true);
                    ServerStep::ExpectClientCertificate(ExpectClientCertificate {
                        suite,
                        session,
                        group,
                        secret,
                    })
                } else {
                    let kx = KeyExchange::Ecdhe { group, secret };
                    ServerStep::ExpectClientKeyExchange(ExpectClientKeyExchange {
                        suite,
                        session,
                        kx,
                        client: None,
                    })
                }
            }
            None => {
                if let Some(hint) = &config.psk_identity_hint {
                    let mut ske = Vec::with_capacity(2 + hint.len());
                    encode_psk_identity(&mut ske, hint);
                    hs.push_message(0, HandshakeType::ServerKeyExchange, ske, true);
                }
                let kx = KeyExchange::Psk;
                ServerStep::ExpectClientKeyExchange(ExpectClientKeyExchange {
                    suite,
                    session,
                    kx,
                    client: None,
                })
            }
        };
        hs.push_message(0, HandshakeType::ServerHelloDone, Vec::new(), true);
        self.send_new_flight(now, hs, true);
        hs.step = Some(Step::Server(step));
        Ok(())
    }

    /// What every ServerHello starts from: the randoms, the ClientHello in the transcript,
    /// our numbering mirroring the client's, and the mobility both sides agree on.
    fn server_hello_common(
        &mut self,
        hs: &mut Handshake,
        config: &ServerConfig,
        ch: &ClientHello<'_>,
        message_seq: u16,
        body: &[u8],
        ems: bool,
    ) {
        hs.client_random = ch.random;
        hs.rng.fill_bytes(&mut hs.server_random);
        if config.versions.dtls13() {
            // RFC 8446 §4.1.3: a server that speaks 1.3 and negotiates 1.2 says so in the last
            // bytes of its random, which a 1.3 client checks (the random is signed or MACed).
            hs.server_random[24..].copy_from_slice(&crate::handshake::DOWNGRADE_TLS12);
        }
        hs.extended_master_secret = ems;
        hs.transcript.add(HandshakeType::ClientHello, message_seq, body);
        hs.reassembler.reset(message_seq.wrapping_add(1));
        hs.peer_prev_flight_last = Some(message_seq);
        // Our numbering mirrors the client's: ServerHello carries the ClientHello's message_seq.
        hs.next_message_seq = message_seq;
        negotiate_mobility(&mut self.path, config, ch);
    }

    /// The abbreviated handshake (RFC 5246 §7.3): ServerHello echoing the session ID, a
    /// renewed ticket when tickets are in use, then ChangeCipherSpec and Finished at once.
    #[allow(clippy::too_many_arguments)]
    fn server_resume(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        config: &ServerConfig,
        ch: &ClientHello<'_>,
        (message_seq, body): (u16, &[u8]),
        (kind, session, client_chain): (
            Resumption,
            ServerSession,
            Option<([u8; CLIENT_TICKET_LEN], CachedClientChain)>,
        ),
        secure_renegotiation: bool,
        ticket_keys: Option<TicketKeys>,
    ) -> Result<(), Abort> {
        self.started_from_hello(&ch.random, message_seq);
        let suite = session.suite;
        self.suite = Some(suite);
        hs.psk_identity = session.psk_identity.clone();
        self.server_hello_common(hs, config, ch, message_seq, body, true);
        let path = self.path.as_deref();
        let srtp = srtp_answer(config, &ch.extensions);
        let ext = OutExtensions {
            extended_master_secret: true,
            renegotiation_info: secure_renegotiation,
            session_ticket: ticket_keys.is_some().then_some(&[][..]),
            connection_id: path.filter(|p| p.cid_negotiated).map(|p| p.own_cid()),
            rrc: path.is_some_and(|p| p.rrc),
            port_move: path.is_some_and(|p| p.port_move),
            use_srtp: srtp.as_ref().map(std::slice::from_ref),
            ..Default::default()
        };
        let mut sh = Vec::with_capacity(96);
        ServerHello::encode_with(&mut sh, &hs.server_random, ch.session_id, suite.id(), &ext);
        hs.push_message(0, HandshakeType::ServerHello, sh, true);
        if let Some(keys) = &ticket_keys {
            // The renewed ticket seals the resumed session itself: its creation time carries over.
            let mut nonce = [0u8; 12];
            hs.rng.fill_bytes(&mut nonce);
            let (ticket, lifetime) =
                session.seal(&keys.current, nonce).map(|t| (t, keys.lifetime)).unwrap_or_default();
            let mut nst = Vec::with_capacity(8 + ticket.len());
            encode_new_session_ticket(&mut nst, lifetime_hint(lifetime), &ticket);
            hs.push_message(0, HandshakeType::NewSessionTicket, nst, true);
        }
        let master = MasterSecret(session.master_secret);
        self.version.install12(hs.keys(suite, &master, false));
        hs.push_change_cipher_spec_and_finished(&master, false, true);
        self.send_new_flight(now, hs, true);
        hs.step = Some(Step::Server(ServerStep::ExpectClientFinished(ExpectClientFinished {
            suite,
            master,
            mode: Mode::Abbreviated(kind, client_chain),
        })));
        Ok(())
    }

    /// One whole handshake message of the client, in order.
    pub(super) fn server_on_message(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        step: ServerStep,
        msg_type: HandshakeType,
        message_seq: u16,
        body: &[u8],
    ) -> Result<Step, Abort> {
        let Some(config) = self.server_config().cloned() else { return Err(Abort::unexpected()) };
        let next = match (step, msg_type) {
            (ServerStep::ExpectClientCertificate(mut s), HandshakeType::Certificate) => {
                // Seed 003 §IV-B: an empty body stands for the chain its ticket selected.
                let reused = match s.session.cached_chain.take() {
                    Some(entry) if body.is_empty() => Some(entry.chain),
                    _ => None,
                };
                s.session.used.client_certificate = reused.is_some();
                let certs: Vec<&[u8]> = match &reused {
                    Some(chain) => chain.iter().map(|c| c.as_ref()).collect(),
                    None => parse_certificate(body).map_err(Abort::decode)?,
                };
                let client = if certs.is_empty() {
                    if config.client_auth == ClientAuth::Require {
                        return Err(Abort::peer(PkiError::NoPeerCertificate));
                    }
                    None
                } else {
                    let anchors = config
                        .client_trust_anchors
                        .as_ref()
                        .ok_or(Abort::alert(AlertDescription::InternalError))?;
                    let (chain, verified, validation) =
                        super::handshake::validate_client_chain(&config, anchors, now, &certs)?;
                    hs.chain_validation_skipped = validation == Validation::Cached;
                    let kept = if s.session.client_cert_caching { chain.clone() } else { Vec::new() };
                    Some(ClientChain {
                        key: verified.key,
                        certificates: chain.len(),
                        leaf: chain.into_iter().next(),
                        verified: ClientCertificate {
                            anchor: verified.anchor,
                            not_after: verified.not_after_unix,
                        },
                        chain: kept,
                    })
                };
                hs.transcript.add(msg_type, message_seq, body);
                let kx = KeyExchange::Ecdhe { group: s.group, secret: s.secret };
                ServerStep::ExpectClientKeyExchange(ExpectClientKeyExchange {
                    suite: s.suite,
                    session: s.session,
                    kx,
                    client,
                })
            }
            (ServerStep::ExpectClientCertificate(s), HandshakeType::ClientKeyExchange) => {
                // No Certificate at all (RFC 5246 wants an empty one): the same as an empty one.
                if config.client_auth == ClientAuth::Require {
                    return Err(Abort::peer(PkiError::NoPeerCertificate));
                }
                let kx = KeyExchange::Ecdhe { group: s.group, secret: s.secret };
                let state = ExpectClientKeyExchange { suite: s.suite, session: s.session, kx, client: None };
                self.server_on_key_exchange(hs, &config, state, message_seq, body)?
            }
            (ServerStep::ExpectClientKeyExchange(s), HandshakeType::ClientKeyExchange) => {
                self.server_on_key_exchange(hs, &config, s, message_seq, body)?
            }
            (ServerStep::ExpectCertificateVerify(s), HandshakeType::CertificateVerify) => {
                let (code, signature) = parse_certificate_verify(body).map_err(Abort::decode)?;
                let scheme = SignatureScheme::from_code(code)
                    .filter(|s| SCHEMES.contains(&s.code()))
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let raw = hs.transcript.take_raw().ok_or(Abort::alert(AlertDescription::InternalError))?;
                fastshake_pki::verify_signature(&s.client.key, scheme, &raw, signature)
                    .map_err(Abort::peer)?;
                hs.transcript.add(msg_type, message_seq, body);
                ServerStep::ExpectClientFinished(ExpectClientFinished {
                    suite: s.suite,
                    master: s.master,
                    mode: Mode::Full { session: s.session, client: Some(s.client) },
                })
            }
            (ServerStep::ExpectClientFinished(s), HandshakeType::Finished) => {
                hs.check_peer_finished(&s.master, body, true)?;
                return Ok(self.server_on_finished(now, hs, &config, s, message_seq, body));
            }
            _ => return Err(Abort::unexpected()),
        };
        Ok(Step::Server(next))
    }

    /// The ClientKeyExchange: the premaster secret, the master secret, the epoch-1 keys.
    fn server_on_key_exchange(
        &mut self,
        hs: &mut Handshake,
        config: &ServerConfig,
        s: ExpectClientKeyExchange,
        message_seq: u16,
        body: &[u8],
    ) -> Result<ServerStep, Abort> {
        let premaster = match s.kx {
            KeyExchange::Ecdhe { group, secret } => {
                let public = parse_ecdhe_client_key_exchange(body).map_err(Abort::decode)?;
                agree(secret, group, public)?
            }
            KeyExchange::Psk => {
                let identity = parse_psk_identity(body).map_err(Abort::decode)?;
                let psk =
                    config.find_psk(identity).ok_or(Abort::alert(AlertDescription::UnknownPskIdentity))?;
                hs.psk_identity = identity.to_vec();
                psk_premaster(&psk.key)
            }
        };
        hs.transcript.add(HandshakeType::ClientKeyExchange, message_seq, body);
        let master = hs.derive_master(&premaster);
        self.version.install12(hs.keys(s.suite, &master, false));
        Ok(match s.client {
            Some(client) => ServerStep::ExpectCertificateVerify(ExpectCertificateVerify {
                suite: s.suite,
                session: s.session,
                master,
                client,
            }),
            None => ServerStep::ExpectClientFinished(ExpectClientFinished {
                suite: s.suite,
                master,
                mode: Mode::Full { session: s.session, client: None },
            }),
        })
    }

    /// The client's Finished verified: an abbreviated handshake is done; a full one answers with
    /// flight 6 ([NewSessionTicket], ChangeCipherSpec, Finished), the last flight, which is not
    /// timed: it is resent when the client's retransmitted Finished shows it was lost.
    fn server_on_finished(
        &mut self,
        now: Instant,
        hs: &mut Handshake,
        config: &ServerConfig,
        s: ExpectClientFinished,
        message_seq: u16,
        body: &[u8],
    ) -> Step {
        let (session, client) = match s.mode {
            Mode::Abbreviated(resumption, client_chain_entry) => {
                let finished = Finished {
                    suite: s.suite,
                    resumption: Some(resumption),
                    session: None,
                    peer_certificates: 0,
                    peer_leaf: None,
                    cache_entry: None,
                    from_cache: CacheUse::default(),
                    cache_update: None,
                    client_chain_entry,
                };
                return self.complete_handshake(now, hs, finished);
            }
            Mode::Full { session, client } => (session, client),
        };
        hs.transcript.add(HandshakeType::Finished, message_seq, body);
        hs.peer_prev_flight_last = Some(message_seq);
        hs.flight.clear();
        let mut nonce = [0u8; 12];
        hs.rng.fill_bytes(&mut nonce);
        let resumable = ServerSession {
            suite: s.suite,
            master_secret: s.master.0,
            created: unix_now(config.wall_clock, now),
            psk_identity: hs.psk_identity.clone(),
            client_cert: client.as_ref().map(|c| c.verified),
        };
        let cache_entry =
            <[u8; 32]>::try_from(session.session_id.as_slice()).ok().map(|id| (id, resumable.clone()));
        if let Some(keys) = &session.ticket {
            let (ticket, lifetime) =
                resumable.seal(&keys.current, nonce).map(|t| (t, keys.lifetime)).unwrap_or_default();
            let mut nst = Vec::with_capacity(8 + TICKET_LEN);
            encode_new_session_ticket(&mut nst, lifetime_hint(lifetime), &ticket);
            hs.push_message(0, HandshakeType::NewSessionTicket, nst, true);
        }
        hs.push_change_cipher_spec_and_finished(&s.master, false, false);
        self.send_new_flight(now, hs, false);
        // The chain the client authenticated with, under the ticket both sides now derive.
        let client_chain_entry =
            client.as_ref().filter(|c| session.client_cert_caching && !c.chain.is_empty()).map(|c| {
                let ticket = derive_client_ticket(&s.master.0, &hs.client_random, &hs.server_random);
                (ticket, CachedClientChain { chain: c.chain.clone(), verified: c.verified })
            });
        let (peer_certificates, peer_leaf) = client.map_or((0, None), |c| (c.certificates, c.leaf));
        let finished = Finished {
            suite: s.suite,
            resumption: None,
            session: None,
            peer_certificates,
            peer_leaf,
            cache_entry,
            from_cache: session.used,
            cache_update: None,
            client_chain_entry,
        };
        self.complete_handshake(now, hs, finished)
    }
}

/// Server: what the client's hello and our configuration agree on; the mobility state goes
/// when nothing is (a session without mobility keeps only an empty pointer).
pub(super) fn negotiate_mobility(
    path: &mut Option<Box<PathState>>,
    config: &ServerConfig,
    ch: &ClientHello<'_>,
) {
    let Some(p) = path.as_deref_mut() else { return };
    let offered = &ch.extensions;
    p.cid_negotiated = config.mobility.connection_id.is_some() && offered.connection_id.is_some();
    p.set_peer_cid(offered.connection_id.filter(|_| p.cid_negotiated).unwrap_or_default());
    if !p.cid_negotiated {
        p.set_own_cid(&[]);
    }
    p.rrc = config.mobility.return_routability_check && offered.rrc;
    p.port_move = config.mobility.follow_server_port && offered.port_move;
    if let Some(more) = p.more.as_deref_mut().filter(|_| !p.rrc) {
        more.cookies = None;
        p.release_idle();
    }
    if !p.cid_negotiated && !p.rrc && !p.port_move && p.local().is_none() {
        *path = None;
    }
}

/// The client chain the endpoint took out of its cache for the ticket a ClientHello offers
/// (`offer`: the extension's body), if it is still good: the ticket matches, the chain has not
/// expired and its anchor is still trusted. Otherwise an ordinary full handshake follows.
pub(super) fn usable_client_chain(
    config: &ServerConfig,
    now_unix: u64,
    offer: &[u8],
    taken: Option<([u8; CLIENT_TICKET_LEN], CachedClientChain)>,
) -> Result<Option<CachedClientChain>, Abort> {
    let offered = parse_client_cert_offer(offer).map_err(Abort::decode)?;
    Ok(taken
        .filter(|(ticket, _)| offered.is_some_and(|t| fingerprints_equal(t, ticket)))
        .map(|(_, entry)| entry)
        .filter(|entry| {
            now_unix < entry.verified.not_after
                && config.client_trust_anchors.as_ref().is_some_and(|a| a.contains(&entry.verified.anchor))
        }))
}

/// RFC 7924 §4: the objects of the client's `cached_info` whose fingerprint matches ours
/// (compared in constant time); types we do not know, and other hash lengths, are passed over.
pub(super) fn select_cached(
    data: &[u8],
    certificate: &[u8],
    certificate_request: &[u8],
) -> Result<Vec<CachedObjectType>, Abort> {
    let offered = parse_cached_info_offer(data).map_err(Abort::decode)?;
    let mut selected = Vec::with_capacity(2);
    for (ty, body) in [
        (CachedObjectType::Certificate, certificate),
        (CachedObjectType::CertificateRequest, certificate_request),
    ] {
        if body.is_empty() || !offered.iter().any(|(t, _)| *t == ty as u8) {
            continue;
        }
        let ours = fingerprint(body);
        if offered.iter().any(|(t, hash)| *t == ty as u8 && fingerprints_equal(hash, &ours)) {
            selected.push(ty);
        }
    }
    Ok(selected)
}

/// The use_srtp profile to answer a client's offer with (RFC 5764 §4.1.1): the first of ours
/// the client lists, none if we accept none of them or it offered none.
pub(super) fn srtp_answer(config: &ServerConfig, ext: &crate::handshake::Extensions<'_>) -> Option<u16> {
    let offered = crate::handshake::srtp_profiles(ext.use_srtp?).ok()?;
    config.srtp_profiles.iter().copied().find(|p| offered.contains(p))
}
