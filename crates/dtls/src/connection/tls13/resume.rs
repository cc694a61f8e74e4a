//! DTLS 1.3 resumption and 0-RTT (RFC 8446 §2.2, §4.2.10, §4.2.11, §4.6.1; RFC 9147 §5.6).
//!
//! After the handshake a server with ticket keys sends a NewSessionTicket in the application
//! epoch, resent until acknowledged like a KeyUpdate. Its ticket is the resumption PSK and what
//! goes with it, sealed under the same [`crate::TicketKeys`] as 1.2 tickets (its own state
//! version), so any node holding the keys resumes it. The client keeps it as a
//! [`ClientSession`] and offers it as the first pre_shared_key identity (an external PSK, if
//! configured, second, so a ticket the server cannot open costs a full handshake, not a
//! failure). With early data on both sides, the client's application records follow the
//! ClientHello in epoch 1; there is no EndOfEarlyData in DTLS 1.3 (RFC 9147 §5.6).

use super::{Abort, Handshake13, Tls13, Transcript13, PREFIX};
use crate::alert::AlertDescription;
use crate::config::{ClientConfig, ServerConfig};
use crate::connection::{Connection, Event, HandshakeSummary, VerifiedHello13};
use crate::crypto::tls13::{KeySchedule, RecordKeys, Suite13, SuiteHash};
use crate::error::Error;
use crate::handshake::{
    binders_block_len, patch_binders, transcript_header, HandshakeType, NewSessionTicket13, OfferedPsks,
};
use crate::record::{epoch, ContentType, Framing, RecordWriter13};
use crate::session::{
    ClientCertificate, ClientSession, ClientTicket13, Resumption, ServerSession13, TicketKeys,
};
use crate::WallClock;
use fastshake_core::Instant;
use rand_core::RngCore;
use std::time::Duration;
use zeroize::Zeroizing;

/// How far apart the client's and our ideas of a ticket's age may be for its early data to be
/// taken (RFC 8446 §8.3): a replayed ClientHello is accepted by this check only within this
/// much of when it was first sent, which bounds how long the replay register keeps it.
pub(crate) const AGE_TOLERANCE_MS: u64 = 10_000;
/// Server: answers to early data held until the handshake completes, at most this many and
/// this many bytes, for one round trip; `send` refuses what is beyond.
const MAX_HELD: usize = 64;
const MAX_HELD_BYTES: usize = 64 * 1024;
/// RFC 8446 §4.6.1: a ticket lives at most seven days.
const MAX_TICKET_LIFETIME_SECS: u64 = 7 * 24 * 3600;

/// Unix milliseconds at `now` (engine milliseconds without a wall clock), for ticket ages.
pub(crate) fn unix_ms(wall_clock: Option<WallClock>, now: Instant) -> u64 {
    match wall_clock {
        Some(w) if now >= w.at => w
            .unix_secs
            .saturating_mul(1000)
            .saturating_add(now.saturating_duration_since(w.at).as_millis() as u64),
        Some(w) => w
            .unix_secs
            .saturating_mul(1000)
            .saturating_sub(w.at.saturating_duration_since(now).as_millis() as u64),
        None => now.as_nanos() / 1_000_000,
    }
}

/// A PSK a client offered, in the order of its ClientHello.
pub(in crate::connection) struct OfferedPsk13 {
    identity: Vec<u8>,
    /// obfuscated_ticket_age (0 for an external PSK, §4.2.11).
    age: u32,
    key: Zeroizing<Vec<u8>>,
    hash: SuiteHash,
    /// A ticket's: its suite (early data goes under it, §4.2.10) and 0-RTT allowance.
    ticket: Option<(Suite13, u32)>,
}

/// Resumption and early data of one 1.3 handshake, either side.
#[derive(Default)]
pub(in crate::connection) struct Resume13 {
    /// Client: the 1.3 session to offer.
    session: Option<ClientSession>,
    /// Client: the PSKs of the last ClientHello.
    offered: Vec<OfferedPsk13>,
    /// Client: the early-data write keys and next record number while 0-RTT may be sent.
    early_write: Option<RecordWriter13>,
    /// Client: bytes the ticket still allows as early data.
    early_room: u32,
    /// Client: data sent as early data (sent again after the handshake if refused).
    early_sent: Vec<Vec<u8>>,
    /// Client: the early-data records as sealed, sent again as they are with our Finished
    /// flight once the server takes early data (see [`Connection::early_copies13`]).
    early_records: Vec<Vec<u8>>,
    /// Client: data given for 0-RTT that could not go as early data: sent after the handshake.
    after_handshake: Vec<Vec<u8>>,
    /// Early data: `None` not offered, `Some(accepted)` once known (client: `Some(false)` from
    /// the offer until EncryptedExtensions accepts it).
    pub early: Option<bool>,
    /// Server: bytes of early data still taken.
    early_budget: u32,
    /// The handshake resumed a ticket's session.
    pub resumed: bool,
    /// Server: the endpoint's ticket keys when the ClientHello arrived (they rotate).
    ticket_keys: Option<TicketKeys>,
    /// Server: the endpoint's early-data register, named in the ticket.
    origin: [u8; 8],
}

/// The PSK a server chose among the client's.
pub(super) struct ChosenPsk13 {
    pub key: Zeroizing<Vec<u8>>,
    pub index: u16,
    /// The external identity (kept by a resumed session: what its keys came from).
    pub identity: Vec<u8>,
    /// The ticket's session, when the PSK is a resumption one.
    pub ticket: Option<ServerSession13>,
}

impl OfferedPsk13 {
    pub(super) fn identity(&self) -> &[u8] {
        &self.identity
    }

    pub(super) fn age(&self) -> u32 {
        self.age
    }

    pub(super) fn binder_len(&self) -> usize {
        self.hash.len()
    }
}

impl Resume13 {
    /// Client: the PSKs of the last ClientHello.
    pub(super) fn offered(&self) -> &[OfferedPsk13] {
        &self.offered
    }

    /// A client offering to resume `session` (a 1.3 one) in a hello that also offers DTLS 1.2:
    /// its PSKs, ready for the first hello.
    pub(in crate::connection) fn offering(
        session: ClientSession,
        now: Instant,
        config: &ClientConfig,
    ) -> Self {
        let mut r = Resume13 { session: Some(session), ..Default::default() };
        r.offer_psks(now, config, None);
        r
    }

    /// The PSKs the next ClientHello offers: the session's ticket (unless expired, or after a
    /// HelloRetryRequest whose transcript hash, `hashing`, is not its suite's, RFC 8446 §4.1.4),
    /// then the external PSK. After a HelloRetryRequest no early data is sent (§4.2.10).
    fn offer_psks(
        &mut self,
        now: Instant,
        config: &ClientConfig,
        hashing: Option<&'static ring::digest::Algorithm>,
    ) {
        let fits = |h: SuiteHash| hashing.is_none_or(|a| a == h.digest_algorithm());
        self.offered.clear();
        if hashing.is_some() {
            self.early_write = None;
        }
        let now_ms = unix_ms(config.wall_clock, now);
        if let Some((session, t)) = self.session.as_ref().and_then(|s| Some((s, s.v13.as_deref()?))) {
            let age_ms = now_ms.saturating_sub(t.received_ms);
            let offered_suite = config.suites13.iter().any(|s| s.hash() == t.suite.hash());
            // RFC 8446 §4.6.1: resumed only towards the server name the ticket came from.
            let same_server = session.server_name == config.server_name;
            let fresh = age_ms < u64::from(session.lifetime_secs) * 1000;
            if fresh && same_server && fits(t.suite.hash()) && offered_suite {
                self.offered.push(OfferedPsk13 {
                    identity: session.ticket.clone().unwrap_or_default(),
                    age: (age_ms as u32).wrapping_add(t.age_add),
                    key: t.psk.clone(),
                    hash: t.suite.hash(),
                    ticket: Some((t.suite, t.max_early_data)),
                });
            }
        }
        if let Some(psk) = config.psk.as_ref().filter(|_| fits(SuiteHash::Sha256)) {
            self.offered.push(OfferedPsk13 {
                identity: psk.identity.clone(),
                age: 0,
                key: Zeroizing::new(psk.key.to_vec()),
                hash: SuiteHash::Sha256,
                ticket: None,
            });
        }
    }
}

/// Client: the external PSK alone, as offered without a session.
pub(super) fn external_offer(config: &ClientConfig) -> Vec<OfferedPsk13> {
    config
        .psk
        .iter()
        .map(|psk| OfferedPsk13 {
            identity: psk.identity.clone(),
            age: 0,
            key: Zeroizing::new(psk.key.to_vec()),
            hash: SuiteHash::Sha256,
            ticket: None,
        })
        .collect()
}

/// Client: writes the binders of `offered` into the encoded ClientHello `body`, each over what
/// `prefix` holds and the ClientHello up to the binders (RFC 8446 §4.2.11.2).
pub(super) fn write_binders(offered: &[OfferedPsk13], prefix: &Transcript13, body: &mut [u8]) {
    if offered.is_empty() {
        return;
    }
    let lens: Vec<usize> = offered.iter().map(|p| p.hash.len()).collect();
    let truncated = body.len() - binders_block_len(&lens);
    let header = transcript_header(HandshakeType::ClientHello, body.len() as u32);
    let binders: Vec<ring::hmac::Tag> = offered
        .iter()
        .map(|p| {
            let mut ctx = match prefix {
                Transcript13::Hashing(ctx) => ctx.clone(),
                Transcript13::Pending(raw) => {
                    let mut ctx = ring::digest::Context::new(p.hash.digest_algorithm());
                    ctx.update(raw);
                    ctx
                }
            };
            ctx.update(&header);
            ctx.update(&body[..truncated]);
            let schedule = KeySchedule::new(p.hash, PREFIX, Some(&p.key));
            schedule.verify_data(&schedule.binder_key(p.ticket.is_none()), ctx.finish().as_ref())
        })
        .collect();
    let refs: Vec<&[u8]> = binders.iter().map(|b| b.as_ref()).collect();
    patch_binders(body, &refs);
}

impl Handshake13 {
    fn resume(&mut self) -> &mut Resume13 {
        self.resume.get_or_insert_with(Default::default)
    }
}

/// `ip` as 16 bytes (an IPv4 address mapped), as tickets keep it.
pub(crate) fn ip_bytes(ip: std::net::IpAddr) -> [u8; 16] {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v6) => v6.octets(),
    }
}

/// Whether `binder` is the one `key` gives over the transcript so far and the ClientHello
/// `body` up to its binders (RFC 8446 §4.2.11.2); compared in constant time.
fn binder_ok(
    transcript: &Transcript13,
    body: &[u8],
    binders_len: usize,
    key: &[u8],
    external: bool,
    hash: SuiteHash,
    binder: &[u8],
) -> bool {
    let Transcript13::Hashing(ctx) = transcript else { return false };
    if ctx.algorithm() != hash.digest_algorithm() || binders_len > body.len() {
        return false;
    }
    let mut partial = ctx.clone();
    partial.update(&transcript_header(HandshakeType::ClientHello, body.len() as u32));
    partial.update(&body[..body.len() - binders_len]);
    let schedule = KeySchedule::new(hash, PREFIX, Some(key));
    let expected = schedule.verify_data(&schedule.binder_key(external), partial.finish().as_ref());
    bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), binder))
}

impl Connection {
    // ------------------------------------------------------------ client

    /// Client: the 1.3 session to offer (a 1.2 one is not offered here).
    pub(super) fn offer_session13(hs: &mut Handshake13, session: Option<ClientSession>) {
        if let Some(session) = session.filter(ClientSession::is_dtls13) {
            hs.resume().session = Some(session);
        }
    }

    /// Client: the PSKs the next ClientHello offers (see [`Resume13::offer_psks`]).
    pub(super) fn client_psks13(now: Instant, hs: &mut Handshake13, config: &ClientConfig) {
        let hashing = match &hs.transcript {
            Transcript13::Hashing(ctx) => Some(ctx.algorithm()),
            Transcript13::Pending(_) => None,
        };
        hs.resume().offer_psks(now, config, hashing);
    }

    /// Client: whether this ClientHello offers early data: asked for, the first ClientHello,
    /// and the ticket offered first allows it.
    pub(super) fn offers_early13(hs: &Handshake13, config: &ClientConfig) -> bool {
        config.early_data
            && matches!(hs.transcript, Transcript13::Pending(_))
            && hs
                .resume
                .as_deref()
                .and_then(|r| r.offered.first())
                .is_some_and(|p| p.ticket.is_some_and(|(_, max)| max > 0))
    }

    /// Client, the first ClientHello `body` offering early data: the early-data write keys,
    /// from the ticket offered first and the whole ClientHello (RFC 8446 §7.1).
    pub(super) fn start_early13(hs: &mut Handshake13, body: &[u8]) {
        let r = hs.resume();
        let Some(first) = r.offered.first() else { return };
        let Some((suite, max)) = first.ticket else { return };
        let mut whole = ring::digest::Context::new(suite.hash().digest_algorithm());
        whole.update(&transcript_header(HandshakeType::ClientHello, body.len() as u32));
        whole.update(body);
        let schedule = KeySchedule::new(suite.hash(), PREFIX, Some(&first.key));
        let secret = schedule.derive(b"c e traffic", whole.finish().as_ref());
        r.early_write =
            Some(RecordWriter13::new(epoch::EARLY_DATA, RecordKeys::from_secret(suite, PREFIX, &secret)));
        r.early_room = max;
        r.early = Some(false);
    }

    /// Client: the key of the PSK the ServerHello selected (a ticket's: the session resumes);
    /// the index must name one offered, of the suite's hash (RFC 8446 §4.2.11).
    pub(super) fn selected_psk13(
        hs: &mut Handshake13,
        suite: Suite13,
        selected: Option<&[u8]>,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, Abort> {
        let Some(data) = selected else {
            if let Some(r) = hs.resume.as_deref_mut() {
                r.early_write = None;
            }
            return Ok(None);
        };
        let index = crate::handshake::selected_identity(data).map_err(Abort::decode)?;
        let r = hs.resume();
        let chosen = r
            .offered
            .get(usize::from(index))
            .filter(|p| p.hash == suite.hash())
            .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
        let (key, resumed) = (chosen.key.clone(), chosen.ticket.is_some());
        if index != 0 {
            r.early_write = None;
        }
        r.resumed = resumed;
        Ok(Some(key))
    }

    /// Client: EncryptedExtensions says whether our early data was accepted (RFC 8446
    /// §4.2.10); accepted early data we did not offer is an error. No more early data either
    /// way: what comes now waits for the handshake.
    pub(super) fn early_answer13(hs: &mut Handshake13, accepted: bool) -> Result<(), Abort> {
        let r = hs.resume();
        let offered = r.early_write.take().is_some() || r.early.is_some();
        if accepted && (!offered || !r.resumed) {
            return Err(Abort::alert(AlertDescription::UnsupportedExtension));
        }
        if r.early.is_some() {
            r.early = Some(accepted);
        }
        Ok(())
    }

    /// Client: the early data refused (or never sent as such) goes out now, in the application
    /// epoch, once: the handshake is over.
    pub(super) fn after_handshake_data13(&mut self, hs: &mut Handshake13, v13: &mut Tls13) {
        let Some(r) = hs.resume.as_deref_mut() else { return };
        let mut out = if r.early == Some(true) { Vec::new() } else { std::mem::take(&mut r.early_sent) };
        out.append(&mut r.after_handshake);
        let cid = self.peer_cid().to_vec();
        let room = self.mtu().saturating_sub(v13.write.sealed_len(cid.len(), 0, Framing::EndsDatagram));
        let max = room.clamp(1, crate::record::MAX_PLAINTEXT);
        for data in out {
            for chunk in data.chunks(max).chain(data.is_empty().then_some(&[][..])) {
                if let Ok((record, _, _)) =
                    v13.write.seal(ContentType::ApplicationData as u8, &cid, &[chunk], Framing::EndsDatagram)
                {
                    self.stats.app_records_sent += 1;
                    self.push_datagram(record);
                }
            }
        }
    }

    /// Client, once the server took our early data: its records, byte for byte, to go in front
    /// of our Finished flight each time it is sent. An early record that overtook its
    /// ClientHello (reordering), or was lost with it, reaches a server that had no session for
    /// it yet and is gone, while the server's acceptance tells the client it arrived and it is
    /// never sent again. The copies arrive in the Finished's datagram, before the Finished,
    /// while the server still reads epoch 1 (RFC 9147 §6.1: DTLS 1.3 has no EndOfEarlyData);
    /// being the same records (epoch 1, same sequence numbers), a copy of one already taken is
    /// dropped by the replay window (§4.5.1), so each is delivered once.
    pub(super) fn early_copies13(hs: &Handshake13) -> Vec<Vec<u8>> {
        match hs.resume.as_deref() {
            Some(r) if r.early == Some(true) => r.early_records.clone(),
            _ => Vec::new(),
        }
    }

    /// Client: what the summary says of resumption and early data.
    pub(super) fn resumption_summary13(hs: &Handshake13, summary: &mut HandshakeSummary) {
        if let Some(r) = hs.resume.as_deref() {
            summary.resumed = r.resumed;
            summary.resumption = r.resumed.then_some(Resumption::Ticket);
            summary.early_data = r.early;
        }
    }

    /// Data for the server before the handshake completes: as 0-RTT early data in epoch 1
    /// when the ClientHello offered it and no answer refused it yet (`Ok(true)`), otherwise
    /// kept and sent once the handshake is over (`Ok(false)`). Refused early data is sent
    /// again then, so the server gets it once either way. Early data, like any record, is not
    /// resent if lost.
    pub(in crate::connection) fn send_early13(&mut self, data: &[u8]) -> Result<bool, Error> {
        let cid = self.peer_cid().to_vec();
        let mtu = self.mtu();
        let Some(v13) = self.version.v13_mut() else { return Err(Error::NotEstablished) };
        let Some(hs) = v13.state.hs.as_mut() else { return Err(Error::NotEstablished) };
        let r = hs.resume();
        let mut records = Vec::new();
        if let Some(writer) = r.early_write.as_mut().filter(|_| data.len() <= r.early_room as usize) {
            // A record per datagram, each within the MTU. Each keeps its length: the client
            // sends it again inside its Finished flight.
            let room = mtu.saturating_sub(writer.sealed_len(cid.len(), 0, Framing::Packed));
            let max = room.clamp(1, crate::record::MAX_PLAINTEXT);
            for chunk in data.chunks(max).chain(data.is_empty().then_some(&[][..])) {
                let content = ContentType::ApplicationData as u8;
                let Ok((record, _, _)) = writer.seal(content, &cid, &[chunk], Framing::Packed) else {
                    records.clear();
                    break;
                };
                records.push(record);
            }
        }
        if records.is_empty() {
            r.after_handshake.push(data.to_vec());
            return Ok(false);
        }
        r.early_room -= data.len() as u32;
        r.early_sent.push(data.to_vec());
        r.early_records.extend(records.iter().cloned());
        for record in records {
            self.stats.app_records_sent += 1;
            self.push_datagram(record);
        }
        Ok(true)
    }

    /// Client: a NewSessionTicket (RFC 8446 §4.6.1) becomes a session to resume, handed out
    /// as [`Event::SessionTicket`]; acknowledged either way.
    pub(super) fn on_new_session_ticket13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &Tls13,
        body: &[u8],
    ) -> Result<(), Abort> {
        let config = self.client_config().cloned().ok_or_else(Abort::unexpected)?;
        let nst = NewSessionTicket13::parse(body).map_err(Abort::decode)?;
        if u64::from(nst.lifetime) > MAX_TICKET_LIFETIME_SECS {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        hs.ack_now = true;
        let Some(secrets) = v13.state.secrets.as_ref() else { return Err(Abort::unexpected()) };
        let Some(resumption) = secrets.resumption() else { return Ok(()) };
        // A lifetime of 0, or a client that takes no tickets: not to be kept.
        if nst.lifetime == 0 || !config.enable_tickets {
            return Ok(());
        }
        let suite = secrets.suite;
        let now_ms = unix_ms(config.wall_clock, now);
        let session = ClientSession {
            suite: crate::suite::CipherSuite::from(suite),
            session_id: Vec::new(),
            ticket: Some(nst.ticket.to_vec()),
            master_secret: [0; 48],
            server_name: config.server_name.clone(),
            created_unix: now_ms / 1000,
            lifetime_secs: nst.lifetime,
            v13: Some(Box::new(ClientTicket13 {
                suite,
                psk: KeySchedule::ticket_psk(suite.hash(), PREFIX, resumption, nst.nonce),
                age_add: nst.age_add,
                max_early_data: nst.max_early_data.unwrap_or(0),
                received_ms: now_ms,
            })),
        };
        self.push_event(Event::SessionTicket(session));
        Ok(())
    }

    // ------------------------------------------------------------ server

    /// Server: keeps the endpoint's ticket keys for this handshake.
    pub(super) fn keep_ticket_keys13(hs: &mut Handshake13, keys: Option<TicketKeys>, origin: [u8; 8]) {
        if keys.is_some() {
            let resume = hs.resume();
            resume.ticket_keys = keys;
            resume.origin = origin;
        }
    }

    /// Server: no ticket for a client that listed no PSK modes (RFC 8446 §4.2.9).
    pub(super) fn issue_no_ticket13(hs: &mut Handshake13) {
        if let Some(resume) = hs.resume.as_deref_mut() {
            resume.ticket_keys = None;
        }
    }

    /// Server: the first of the client's PSKs we know, an external one or a ticket that opens
    /// under our keys, is fresh, is of the suite's hash and that the client-authentication
    /// policy still lets resume; its binder checked (a wrong one is fatal, RFC 8446
    /// §4.2.11.2). A ticket we cannot use is passed over: a full handshake follows.
    pub(super) fn choose_psk13(
        &self,
        now: Instant,
        hs: &Handshake13,
        config: &ServerConfig,
        hello: &VerifiedHello13<'_>,
        hash: SuiteHash,
    ) -> Result<Option<ChosenPsk13>, Abort> {
        let ext = &hello.hello.extensions;
        let Some(data) = ext.pre_shared_key else { return Ok(None) };
        if !ext.pre_shared_key_last {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        let offered = OfferedPsks::parse(data).map_err(Abort::decode)?;
        let keys = hs.resume.as_deref().and_then(|r| r.ticket_keys.as_ref());
        let now_ms = unix_ms(config.wall_clock, now);
        for (index, (identity, _)) in offered.identities.iter().enumerate() {
            let found = match config.find_psk(identity) {
                Some(psk) => Some((Zeroizing::new(psk.key.to_vec()), psk.identity.clone(), None)),
                None => keys
                    .and_then(|k| ServerSession13::open(k, identity, now_ms))
                    .filter(|t| {
                        t.suite.hash() == hash
                            && config.lets_resume_with(t.client_cert.as_ref(), now_ms / 1000)
                    })
                    .map(|t| (t.psk.clone(), t.psk_identity.clone(), Some(t))),
            };
            let Some((key, identity, ticket)) = found else { continue };
            if ext.psk_key_exchange_modes.is_none_or(<[u8]>::is_empty) {
                return Err(Abort::alert(AlertDescription::MissingExtension));
            }
            let binder = offered.binders.get(index).copied().unwrap_or(&[]);
            let external = ticket.is_none();
            if !binder_ok(&hs.transcript, hello.body, offered.binders_len, &key, external, hash, binder) {
                return Err(if external {
                    Abort::psk_mismatch(&identity)
                } else {
                    Abort::alert(AlertDescription::DecryptError)
                });
            }
            return Ok(Some(ChosenPsk13 { key, index: index as u16, identity, ticket }));
        }
        Ok(None)
    }

    /// Server, the ClientHello now in the transcript: whether its early data is taken (RFC
    /// 8446 §4.2.10): the endpoint let it in without a HelloRetryRequest having checked the
    /// ticket's age and the replay register, the first PSK (a ticket of this very suite) was
    /// chosen, and we take early data. If so, the early-data read keys are added.
    pub(super) fn accept_early13(
        &self,
        hs: &mut Handshake13,
        read: &mut crate::record::RecordReader13,
        config: &ServerConfig,
        hello: &VerifiedHello13<'_>,
        chosen: Option<&ChosenPsk13>,
        suite: Suite13,
    ) -> bool {
        hs.resume().resumed = chosen.is_some_and(|c| c.ticket.is_some());
        if hello.hello.extensions.early_data.is_none() {
            // Offered in the first ClientHello, refused by the cookie exchange.
            if hello.state.early_offered {
                hs.resume().early = Some(false);
            }
            return false;
        }
        let ticket = chosen.filter(|c| c.index == 0).and_then(|c| c.ticket.as_ref().map(|t| (c, t)));
        let accepted = hello.state.zero_rtt
            && config.max_early_data > 0
            && ticket.is_some_and(|(_, t)| t.suite == suite && t.max_early_data > 0);
        let r = hs.resume();
        r.early = Some(accepted);
        let Some((chosen, t)) = ticket.filter(|_| accepted) else { return false };
        r.early_budget = config.max_early_data.min(t.max_early_data);
        let th = hs.transcript.current(suite.hash());
        let schedule = KeySchedule::new(suite.hash(), PREFIX, Some(&chosen.key));
        let secret = schedule.derive(b"c e traffic", th.as_ref());
        read.add(epoch::EARLY_DATA, RecordKeys::from_secret(suite, PREFIX, &secret));
        true
    }

    /// Server that took early data, its handshake still running: `data` (an answer to the
    /// early data) is held and sent once the client's Finished is checked, not to a client
    /// not yet authenticated (RFC 8446 §4.4.4 would allow it; we keep it simple).
    pub(in crate::connection) fn hold_for_handshake13(&mut self, data: &[u8]) -> bool {
        if self.server_config().is_none() {
            return false;
        }
        let Some(r) =
            self.version.v13_mut().and_then(|v| v.state.hs.as_mut()).and_then(|hs| hs.resume.as_deref_mut())
        else {
            return false;
        };
        let held: usize = r.after_handshake.iter().map(Vec::len).sum();
        if r.early != Some(true) || r.after_handshake.len() >= MAX_HELD || held + data.len() > MAX_HELD_BYTES
        {
            return false;
        }
        r.after_handshake.push(data.to_vec());
        true
    }

    /// Server: whether an early-data record of `len` bytes is taken (within the budget of
    /// accepted early data); what is beyond it is dropped.
    pub(super) fn take_early13(v13: &mut Tls13, len: usize) -> bool {
        let Some(r) = v13.state.hs.as_mut().and_then(|hs| hs.resume.as_deref_mut()) else { return false };
        if r.early != Some(true) || len > r.early_budget as usize {
            return false;
        }
        r.early_budget -= len as u32;
        true
    }

    /// Server, the client's Finished checked: with ticket keys, a NewSessionTicket in the
    /// application epoch (RFC 8446 §4.6.1), resent until acknowledged; the PSK it stands for
    /// comes from the resumption master secret and the ticket's nonce.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn issue_ticket13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        config: &ServerConfig,
        resumption: &[u8],
        psk_identity: Vec<u8>,
        client_cert: Option<ClientCertificate>,
    ) {
        let Some((keys, origin)) =
            hs.resume.as_deref_mut().and_then(|r| Some((r.ticket_keys.take()?, r.origin)))
        else {
            return;
        };
        let Some(suite) = v13.state.secrets.as_ref().map(|s| s.suite) else { return };
        let mut nonce = [0u8; 8];
        hs.rng.fill_bytes(&mut nonce);
        let mut seal_nonce = [0u8; 12];
        hs.rng.fill_bytes(&mut seal_nonce);
        // What a small message and its answer take on the path (the NewSessionTicket out and a
        // ClientHello back): the shortest round trip this handshake sampled (the cookie
        // exchange's, most often), none if every exchange was resent (Karn).
        let rtt = hs.flight.timer.shortest_sample().unwrap_or(Duration::ZERO);
        let session = ServerSession13 {
            suite,
            psk: KeySchedule::ticket_psk(suite.hash(), PREFIX, resumption, &nonce),
            created_ms: unix_ms(config.wall_clock, now),
            rtt_ms: u32::try_from(rtt.as_millis()).unwrap_or(u32::MAX),
            age_add: hs.rng.next_u32(),
            max_early_data: config.max_early_data,
            client_ip: ip_bytes(self.remote.ip()),
            psk_identity,
            client_cert,
            origin,
        };
        let Some(ticket) = session.seal(&keys.current, seal_nonce) else { return };
        let lifetime = keys.lifetime.as_secs().min(MAX_TICKET_LIFETIME_SECS) as u32;
        let mut body = Vec::with_capacity(32 + ticket.len());
        NewSessionTicket13 {
            lifetime,
            age_add: session.age_add,
            nonce: &nonce,
            ticket: &ticket,
            max_early_data: (config.max_early_data > 0).then_some(config.max_early_data),
        }
        .encode(&mut body);
        hs.begin_flight();
        let epoch = v13.write.epoch().unwrap_or(epoch::APPLICATION);
        hs.push_message(epoch, HandshakeType::NewSessionTicket, body, false);
        let mut record = std::mem::take(&mut v13.write);
        self.send_flight13(now, hs, &mut record, true);
        v13.write = record;
        if let Some(secrets) = v13.state.secrets.as_mut() {
            secrets.next_message_seq = hs.next_message_seq;
        }
    }
}
