//! The DTLS 1.3 server (RFC 8446 §4 as RFC 9147 §5 changes it). The endpoint answered the first
//! ClientHello with a HelloRetryRequest and kept nothing; a session starts from the second,
//! whose cookie carries the first one's hash, and answers it with its whole flight at once:
//!
//! ```text
//! ClientHello (cookie) ──► ServerHello, EncryptedExtensions, [CertificateRequest],
//!                          [Certificate, CertificateVerify], Finished
//!                      ◄── [Certificate, CertificateVerify], Finished ──► ACK
//! ```

use super::cached::{self, ServerCaching13};
use super::{Abort, Handshake13, Step13, Tls13, Transcript13, PREFIX};
use crate::alert::AlertDescription;
use crate::config::ServerConfig;
use crate::connection::handshake::{answer_share, sign, SCHEMES};
use crate::connection::VersionState;
use crate::connection::{Connection, EndpointEvent, Event, Phase, ServerRole};
use crate::crypto::tls13::{KeySchedule, RecordKeys, Suite13};
use crate::endpoint::{hello_retry_request, CookieState};
use crate::error::Mismatch;
use crate::handshake::{
    certificate_verify_message, client_shares, encode_abbreviated_certificate13, encode_certificate13,
    encode_encrypted_extensions, encode_signed, parse_certificate13, parse_certificate_verify,
    psk_modes_allow, u16_list, CertificateRequest13, ClientHello, HandshakeType, NamedGroup, OutExtensions,
    ServerHello, DTLS_1_3, PSK_DHE_KE, PSK_KE,
};
use crate::record::{epoch, MAX_SEQ};
use fastshake_core::Instant;
use fastshake_pki::{CertDer, PeerPublicKey, SignatureScheme};
use rand_core::{RngCore, SeedableRng};
use std::sync::Arc;
use zeroize::Zeroizing;

/// A 1.3 ClientHello whose cookie the endpoint verified.
pub(crate) struct VerifiedHello13<'a> {
    pub record_seq: u64,
    pub message_seq: u16,
    pub body: &'a [u8],
    pub hello: &'a ClientHello<'a>,
    pub datagram_len: usize,
    /// What the cookie carried.
    pub state: CookieState,
    /// The endpoint's ticket keys (they rotate): tickets are opened and sealed with them.
    pub ticket_keys: Option<crate::session::TicketKeys>,
    /// The endpoint's early-data register, named in the tickets it issues.
    pub early_origin: [u8; 8],
    /// The CID the endpoint issues to this session (empty: none).
    pub issued_cid: Vec<u8>,
    /// Adaptive policy: the round trip the endpoint last measured to this client.
    pub cached_rtt: Option<crate::rtt::RttEstimate>,
    /// Adaptive policy: the cookie exchange's round trip (the cookie's age) and the bytes of
    /// the HelloRetryRequest it came in.
    pub cookie_rtt: Option<(std::time::Duration, u32)>,
    /// The client chain its client-certificate ticket names, taken out of the endpoint's cache
    /// (a ticket opens its entry once), with the ticket.
    pub client_chain: Option<([u8; crate::cache::CLIENT_TICKET_LEN], crate::cache::CachedClientChain)>,
}

/// Where a 1.3 server's handshake is: the message each state awaits is in its name.
#[allow(clippy::enum_variant_names)]
pub(in crate::connection) enum ServerStep13 {
    /// The client's certificate (asked for) comes first.
    ExpectCertificate(AwaitClient),
    ExpectCertificateVerify(AwaitClient, PeerPublicKey),
    ExpectFinished(AwaitClient),
}

/// Our flight is out: what the client's answer is checked with.
pub(in crate::connection) struct AwaitClient {
    suite: Suite13,
    schedule: KeySchedule,
    client_hs: Zeroizing<Vec<u8>>,
    group: Option<NamedGroup>,
    /// The group our HelloRetryRequest asked a key share for, if it did.
    retry_group: Option<NamedGroup>,
    psk_identity: Option<Vec<u8>>,
    client_certificates: usize,
    client_leaf: Option<CertDer>,
    /// The client's chain was found in the validated-key cache: its path validation was skipped.
    client_validation_skipped: bool,
    /// What a ticket keeps of the client's chain: the one validated now or, resumed, the
    /// ticket's.
    client_cert: Option<crate::session::ClientCertificate>,
    /// Handshake caching (seed 003 §IV-D) as selected on the ClientHello.
    caching: ServerCaching13,
    /// The application traffic secrets (ours to write, the client's to read), kept for key
    /// updates once the session is up.
    secrets: super::AppSecrets,
}

impl Connection {
    /// A DTLS 1.3 server session from a ClientHello that returned a valid cookie.
    pub(crate) fn server13(
        role: &ServerRole,
        now: Instant,
        remote: std::net::SocketAddr,
        rng_seed: [u8; 32],
        mut hello: VerifiedHello13<'_>,
    ) -> Connection {
        let config = &role.config;
        let mut conn = Connection::bare(Arc::clone(&role.shared), remote);
        conn.started_from_hello(&hello.hello.random, hello.message_seq);
        conn.stats.datagrams_received = 1;
        conn.stats.bytes_received = hello.datagram_len as u64;
        let timer = crate::timer::RetransmitTimer::for_returned_cookie(
            config,
            hello.cached_rtt,
            hello.cookie_rtt,
            (hello.record_seq, hello.message_seq, hello.datagram_len),
        );
        let rng = rand_chacha::ChaCha20Rng::from_seed(rng_seed);
        let mut hs = Handshake13::new(now, rng, timer, config.handshake_timeout);
        if config.client_auth != crate::ClientAuth::None {
            hs.reassembler.set_budget(crate::handshake::PEER_CHAIN_BUDGET);
        }
        // No hash of a first ClientHello: the endpoint let this one in without a
        // HelloRetryRequest (a resumption with early data, see `endpoint::early13`).
        hs.hello_retry = !hello.state.hello_hash.is_empty();
        Self::keep_ticket_keys13(&mut hs, hello.ticket_keys.clone(), hello.early_origin);
        hs.epoch0_write_seq = if hello.record_seq < MAX_SEQ / 2 { hello.record_seq + 1 } else { 0 };
        // Our messages continue the numbering the HelloRetryRequest began (RFC 9147 §5.2).
        hs.next_message_seq = hello.message_seq;
        hs.reassembler.reset(hello.message_seq.wrapping_add(1));
        let mut v13 = Tls13::new(None);
        let client_chain = hello.client_chain.take();
        match conn.server_answer13(now, &mut hs, &mut v13, config, &hello, client_chain) {
            Ok(step) => {
                hs.step = Some(step);
                conn.suite = Some(hello.state.suite.into());
                v13.state.hs = Some(hs);
                conn.version = VersionState::Dtls13(v13);
            }
            Err(abort) => {
                v13.discard_keys();
                v13.state.hs = Some(hs);
                conn.v13_fail(&mut v13, abort);
                conn.version = VersionState::Dtls13(v13);
            }
        }
        conn
    }

    /// The server's flight in answer to the verified ClientHello.
    fn server_answer13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        config: &ServerConfig,
        hello: &VerifiedHello13<'_>,
        client_chain: Option<([u8; crate::cache::CLIENT_TICKET_LEN], crate::cache::CachedClientChain)>,
    ) -> Result<Step13, Abort> {
        let ch = hello.hello;
        let ext = &ch.extensions;
        let suite = hello.state.suite;
        let hash = suite.hash();
        if !ch.suites().any(|s| s == suite.id()) || !ch.session_id.is_empty() && ch.session_id.len() > 32 {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        // The transcript: the first ClientHello's hash, the HelloRetryRequest, this ClientHello
        // (or this ClientHello alone, let in without a HelloRetryRequest).
        let mut ctx = ring::digest::Context::new(hash.digest_algorithm());
        if hs.hello_retry {
            let cookie = ext.cookie13.ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
            let hrr = hello_retry_request(&[], &hello.state, cookie);
            ctx.update(&crate::handshake::message_hash_prefix(hash.len() as u8));
            ctx.update(&hello.state.hello_hash);
            hs.transcript = Transcript13::Hashing(ctx);
            hs.transcript.add(HandshakeType::ServerHello, &hrr);
        } else {
            hs.transcript = Transcript13::Hashing(ctx);
        }
        // An external PSK the client named or a ticket of ours, its binder checked (RFC 8446
        // §4.2.11.2).
        let modes = ext.psk_key_exchange_modes.unwrap_or(&[]);
        let chosen = self.choose_psk13(now, hs, config, hello, hash)?;
        if modes.is_empty() {
            Self::issue_no_ticket13(hs);
        }
        let psk = chosen.as_ref().map(|c| (&c.key[..], c.index));
        hs.transcript.add(HandshakeType::ClientHello, hello.body);
        let early = self.accept_early13(hs, &mut v13.state.read, config, hello, chosen.as_ref(), suite);
        if psk.is_none() && config.certified_key.is_none() {
            // Unknown PSK identities get unknown_psk_identity (RFC 8446 §6.2); no PSK at all, as
            // no common parameters, handshake_failure (§4.1.1).
            let psk_offered = ext.pre_shared_key.is_some();
            return Err(Abort::no_match_alert(
                if psk_offered {
                    AlertDescription::UnknownPskIdentity
                } else {
                    AlertDescription::HandshakeFailure
                },
                Mismatch::Credentials { psk_offered },
            ));
        }
        // The key exchange: the group the cookie names (or ours first of the client's shares),
        // unless a PSK in psk_ke mode needs none.
        let shares = ext.key_share.map(client_shares).transpose().map_err(Abort::decode)?.unwrap_or_default();
        let supported: Vec<u16> = ext.supported_groups.map(|g| u16_list(g).collect()).unwrap_or_default();
        let share = match hello.state.group {
            Some(g) => shares.iter().find(|s| s.group == g.code()).copied().map(|s| (g, s)),
            None => config.groups.iter().find_map(|g| {
                shares.iter().find(|s| s.group == g.code() && supported.contains(&s.group)).map(|s| (*g, *s))
            }),
        };
        let dhe = psk.is_none() || psk_modes_allow(modes, PSK_DHE_KE);
        let (shared, server_share, group) = match (share, dhe) {
            (Some((group, entry)), true) => {
                let (shared, public) = answer_share(group, entry.key_exchange, &mut hs.rng)?;
                (Some(shared), Some((group.code(), public)), Some(group))
            }
            (None, true) if psk.is_some() && psk_modes_allow(modes, PSK_KE) => (None, None, None),
            (_, false) if psk_modes_allow(modes, PSK_KE) => (None, None, None),
            (None, true) => {
                let ours: Vec<u16> = config.groups.iter().map(|g| g.code()).collect();
                if supported.iter().any(|g| ours.contains(g)) {
                    // A group in common, but not the share asked for (RFC 8446 §4.2.8).
                    return Err(Abort::alert(AlertDescription::IllegalParameter));
                }
                // No group in common, and psk_ke not possible (RFC 8446 §4.1.1).
                return Err(Abort::no_match(Mismatch::Group { offered: supported, ours }));
            }
            _ => return Err(Abort::alert(AlertDescription::HandshakeFailure)),
        };
        let mut random = [0u8; 32];
        hs.rng.fill_bytes(&mut random);
        let mobility = self.negotiate_mobility13(config, ch, &hello.issued_cid, &mut hs.rng);
        let sh_ext = OutExtensions {
            connection_id: mobility.connection_id.as_deref(),
            rrc: mobility.rrc,
            port_move: mobility.port_move,
            selected_version: Some(DTLS_1_3),
            server_share: server_share.as_ref().map(|(g, k)| (*g, &k[..])),
            selected_identity: psk.map(|(_, i)| i),
            ..Default::default()
        };
        let mut server_hello = Vec::with_capacity(128);
        ServerHello::encode13(&mut server_hello, &random, &[], suite.id(), &sh_ext);
        hs.begin_flight();
        hs.push_message(0, HandshakeType::ServerHello, server_hello, true);
        let mut schedule = KeySchedule::new(hash, PREFIX, psk.map(|(key, _)| key));
        schedule.into_handshake(shared.as_deref().map(|s| &s[..]));
        let th = hs.transcript.current(hash);
        let client_hs = schedule.derive(b"c hs traffic", th.as_ref());
        let server_hs = schedule.derive(b"s hs traffic", th.as_ref());
        hs.set_handshake_write(RecordKeys::from_secret(suite, PREFIX, &server_hs));
        v13.state.read.add(epoch::HANDSHAKE, RecordKeys::from_secret(suite, PREFIX, &client_hs));
        let ask_certificate = psk.is_none() && config.client_auth != crate::session::ClientAuth::None;
        // Handshake caching in certificate handshakes; a PSK handshake puts back the client
        // chain its ticket took out, for the next certificate handshake.
        let chain: Vec<&[u8]> =
            config.certified_key.iter().flat_map(|c| c.chain.iter().map(|d| d.as_ref())).collect();
        let caching = match client_chain {
            Some((ticket, chain)) if psk.is_some() => {
                self.push_endpoint_event(EndpointEvent::ClientChain { ticket, chain });
                ServerCaching13::default()
            }
            _ if psk.is_some() => ServerCaching13::default(),
            taken => ServerCaching13::select(config, now, ch, &chain, ask_certificate, taken)?,
        };
        let (cached_info, client_cert_cache) = caching.answers();
        let srtp = crate::connection::server::srtp_answer(config, &ch.extensions);
        let mut encrypted = Vec::new();
        encode_encrypted_extensions(
            &mut encrypted,
            &OutExtensions {
                early_data: early,
                cached_info: cached_info.as_deref(),
                client_cert_cache: client_cert_cache.as_deref(),
                use_srtp: srtp.as_ref().map(std::slice::from_ref),
                ..Default::default()
            },
        );
        hs.push_message(epoch::HANDSHAKE, HandshakeType::EncryptedExtensions, encrypted, true);
        if psk.is_none() {
            if ask_certificate {
                let mut request = Vec::new();
                CertificateRequest13::encode(
                    &mut request,
                    &[],
                    &SCHEMES,
                    config.certificate_compression.algorithms(),
                );
                hs.push_message(epoch::HANDSHAKE, HandshakeType::CertificateRequest, request, true);
            }
            let certified = config.certified_key.as_ref().ok_or_else(Abort::unexpected)?;
            let mut certificate = Vec::new();
            if caching.used.server_certificate {
                // The client holds the chain: an abbreviated Certificate, too short to compress.
                encode_abbreviated_certificate13(&mut certificate, &[], chain.len());
                hs.push_message(epoch::HANDSHAKE, HandshakeType::Certificate, certificate, true);
            } else {
                encode_certificate13(&mut certificate, &[], &chain);
                hs.push_certificate(
                    &config.certificate_compression,
                    ext.compress_certificate,
                    certificate,
                    false,
                );
            }
            let offered: Vec<u16> =
                ext.signature_algorithms.map(|s| u16_list(s).collect()).unwrap_or_default();
            let scheme = certified
                .key
                .algorithm()
                .schemes()
                .iter()
                .copied()
                .find(|s| *s != SignatureScheme::RsaPkcs1Sha256 && offered.contains(&s.code()))
                .ok_or(Abort::alert(AlertDescription::HandshakeFailure))?;
            let signed = certificate_verify_message(true, hs.transcript.current(hash).as_ref());
            let signature = sign(&certified.key, scheme, &signed, &mut hs.rng)?;
            let mut verify = Vec::new();
            encode_signed(&mut verify, scheme.code(), &signature);
            hs.push_message(epoch::HANDSHAKE, HandshakeType::CertificateVerify, verify, true);
        }
        let finished = schedule.verify_data(&server_hs, hs.transcript.current(hash).as_ref());
        hs.push_message(epoch::HANDSHAKE, HandshakeType::Finished, finished.as_ref().to_vec(), true);
        schedule.into_master();
        let th_server_finished = hs.transcript.current(hash);
        let client_ap = schedule.derive(b"c ap traffic", th_server_finished.as_ref());
        let server_ap = schedule.derive(b"s ap traffic", th_server_finished.as_ref());
        v13.state.read.add(epoch::APPLICATION, RecordKeys::from_secret(suite, PREFIX, &client_ap));
        self.send_flight13(now, hs, &mut v13.write, true);
        v13.write.set(epoch::APPLICATION, RecordKeys::from_secret(suite, PREFIX, &server_ap));
        let wait = AwaitClient {
            suite,
            schedule,
            client_hs,
            group,
            retry_group: hello.state.group,
            psk_identity: chosen.as_ref().map(|c| c.identity.clone()),
            client_certificates: 0,
            client_leaf: None,
            client_validation_skipped: false,
            client_cert: chosen.as_ref().and_then(|c| c.ticket.as_ref()).and_then(|t| t.client_cert),
            caching,
            secrets: super::AppSecrets::new(suite, &server_ap, &client_ap, None),
        };
        Ok(Step13::Server(Box::new(if ask_certificate {
            ServerStep13::ExpectCertificate(wait)
        } else {
            ServerStep13::ExpectFinished(wait)
        })))
    }

    /// One message of the client's last flight.
    pub(in crate::connection) fn server_step13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        step: ServerStep13,
        msg_type: HandshakeType,
        body: &[u8],
    ) -> Result<Step13, Abort> {
        let config = self.server_config().cloned().ok_or_else(Abort::unexpected)?;
        let next = match (step, msg_type) {
            (ServerStep13::ExpectCertificate(w), HandshakeType::Certificate) => {
                let next = Self::client_chain13(now, &config, w, body)?;
                hs.transcript.add(msg_type, body);
                next
            }
            (ServerStep13::ExpectCertificate(w), HandshakeType::CompressedCertificate) => {
                // The transcript takes the message as it came (RFC 8879 §4).
                let certificate = hs.decompress_certificate(&config.certificate_compression, body)?;
                let next = Self::client_chain13(now, &config, w, &certificate)?;
                hs.transcript.add(msg_type, body);
                next
            }
            (ServerStep13::ExpectCertificateVerify(w, key), HandshakeType::CertificateVerify) => {
                let (scheme, signature) = parse_certificate_verify(body).map_err(Abort::decode)?;
                let scheme = SignatureScheme::from_code(scheme)
                    .filter(|s| SCHEMES.contains(&s.code()) && *s != SignatureScheme::RsaPkcs1Sha256)
                    .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                let signed =
                    certificate_verify_message(false, hs.transcript.current(w.suite.hash()).as_ref());
                fastshake_pki::verify_signature(&key, scheme, &signed, signature).map_err(Abort::peer)?;
                hs.transcript.add(msg_type, body);
                ServerStep13::ExpectFinished(w)
            }
            (ServerStep13::ExpectFinished(w), HandshakeType::Finished) => {
                let expected =
                    w.schedule.verify_data(&w.client_hs, hs.transcript.current(w.suite.hash()).as_ref());
                if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), body)) {
                    return Err(Abort::alert(AlertDescription::DecryptError));
                }
                hs.transcript.add(msg_type, body);
                return Ok(self.server_complete13(now, hs, v13, w));
            }
            _ => return Err(Abort::unexpected()),
        };
        Ok(Step13::Server(Box::new(next)))
    }

    /// The client's chain from the body of its Certificate, validated: what comes next.
    fn client_chain13(
        now: Instant,
        config: &ServerConfig,
        mut w: AwaitClient,
        body: &[u8],
    ) -> Result<ServerStep13, Abort> {
        let cached = w.caching.cached_client_chain(body)?;
        let certs: Vec<&[u8]> = match &cached {
            Some(chain) => chain.iter().map(|c| c.as_ref()).collect(),
            None => parse_certificate13(body).map_err(Abort::decode)?.1,
        };
        if certs.is_empty() {
            if config.client_auth == crate::session::ClientAuth::Require {
                return Err(Abort::alert(AlertDescription::CertificateRequired));
            }
            return Ok(ServerStep13::ExpectFinished(w));
        }
        let anchors = config.client_trust_anchors.as_ref().ok_or_else(Abort::unexpected)?;
        let (chain, verified, validation) =
            crate::connection::handshake::validate_client_chain(config, anchors, now, &certs)?;
        w.client_certificates = chain.len();
        w.client_validation_skipped = validation == fastshake_pki::Validation::Cached;
        let client_cert =
            crate::session::ClientCertificate { anchor: verified.anchor, not_after: verified.not_after_unix };
        w.client_cert = Some(client_cert);
        w.client_leaf = chain.first().cloned();
        if w.caching.client_cert_caching {
            w.caching.chain = Some(crate::cache::CachedClientChain { chain, verified: client_cert });
        }
        Ok(ServerStep13::ExpectCertificateVerify(w, verified.key))
    }

    /// The client's Finished checked: the session is up; the ACK tells the client its flight
    /// arrived (§5.8.1: nothing else would).
    fn server_complete13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        mut w: AwaitClient,
    ) -> Step13 {
        w.secrets.next_message_seq = hs.next_message_seq;
        w.secrets.peer_next_message_seq = hs.reassembler.next_seq();
        let resumption = w.schedule.derive(b"res master", hs.transcript.current(w.suite.hash()).as_ref());
        v13.state.secrets = Some(w.secrets);
        // The client stops resending its Finished by its handshake timeout at the latest.
        v13.state.handshake_keys_until = now + self.handshake_timeout();
        hs.flight.timer.on_answer(now, self.stats.bytes_received);
        hs.timers.stop(super::Timer13::Retransmit);
        hs.begin_flight();
        self.send_ack13(hs, &mut v13.write, true);
        // Acknowledged: a resent Finished is named by its own new record numbers (RFC 9147 §7).
        hs.received.clear();
        if let Some(config) = self.server_config().cloned() {
            let identity = w.psk_identity.clone().unwrap_or_default();
            self.issue_ticket13(now, hs, v13, &config, &resumption, identity, w.client_cert);
        }
        // The client's chain goes into the cache under the ticket both sides now derive.
        if let Some(chain) = w.caching.chain.take() {
            let ticket = cached::client_ticket13(w.suite.hash(), &resumption);
            self.push_endpoint_event(EndpointEvent::ClientChain { ticket, chain });
        }
        // Nothing of ours awaits an acknowledgement: the handshake state goes with this datagram.
        hs.post_handshake = true;
        self.phase = Phase::Established;
        let rtt = hs.flight.timer.estimate();
        self.push_endpoint_event(EndpointEvent::Established { rtt });
        let mut summary = self.summary13(now, hs, w.suite, w.group, None);
        summary.hello_retry_group = w.retry_group;
        Self::resumption_summary13(hs, &mut summary);
        summary.peer_certificates = w.client_certificates;
        summary.peer_leaf = w.client_leaf;
        summary.chain_validation_skipped = w.client_validation_skipped;
        summary.psk_identity = w.psk_identity.unwrap_or_default();
        summary.from_cache = w.caching.used;
        self.push_connected(summary);
        for data in std::mem::take(&mut hs.early_data) {
            self.stats.app_records_received += 1;
            self.push_event(Event::ApplicationData(data));
        }
        // Answers to early data, held until now.
        self.after_handshake_data13(hs, v13);
        Step13::Complete
    }
}
