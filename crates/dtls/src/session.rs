//! Resumption state: what a client keeps to resume (RFC 5246 §7.3, RFC 5077), the server's
//! bounded session cache, ticket keys, and the client-authentication policy.

use crate::error::Error;
use crate::suite::CipherSuite;
use fastshake_core::codec::{put_u16, put_u8, put_vec16, put_vec8, Reader};
use std::time::Duration;
use zeroize::Zeroize;

/// How a handshake resumed an earlier session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumption {
    /// The server found the session ID in its cache.
    SessionId,
    /// The server accepted the client's ticket (RFC 5077).
    Ticket,
}

impl Resumption {
    /// `"session-id"` or `"ticket"`.
    pub fn name(self) -> &'static str {
        match self {
            Resumption::SessionId => "session-id",
            Resumption::Ticket => "ticket",
        }
    }
}

/// Whether a server asks clients for certificates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No CertificateRequest.
    #[default]
    None,
    /// CertificateRequest sent; a client without a certificate is accepted.
    Optional,
    /// CertificateRequest sent; a client without a certificate gets handshake_failure.
    Require,
}

/// Bounds of the server's session-ID cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionCacheConfig {
    /// Sessions kept at most; the least recently used goes first. 0 disables the cache (and
    /// session IDs are then not issued).
    pub max_entries: usize,
    /// How long a session can be resumed after the full handshake that made it.
    pub lifetime: Duration,
}

impl Default for SessionCacheConfig {
    fn default() -> Self {
        SessionCacheConfig { max_entries: 10_000, lifetime: Duration::from_secs(2 * 3600) }
    }
}

/// One ticket-protection key: a 4-byte id carried in the ticket and an AES-128-GCM key.
#[derive(Clone, PartialEq, Eq)]
pub struct TicketKey {
    /// Names the key in the tickets it seals.
    pub id: u32,
    key: [u8; 16],
}

impl TicketKey {
    /// A key named `id`; `key` should be fresh random bytes.
    pub fn new(id: u32, key: [u8; 16]) -> Self {
        TicketKey { id, key }
    }

    /// The AES key, for a driver that writes keys shared by a fleet to a file.
    pub fn secret(&self) -> &[u8; 16] {
        &self.key
    }

    pub(crate) fn key(&self) -> &[u8; 16] {
        &self.key
    }
}

impl Drop for TicketKey {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TicketKey(id {:#010x})", self.id)
    }
}

/// The ticket keys of a server: new tickets are sealed under `current`; tickets of `previous`
/// still open, so a rotation does not throw away the tickets clients hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TicketKeys {
    /// Seals new tickets.
    pub current: TicketKey,
    /// Opens tickets sealed before the last rotation.
    pub previous: Option<TicketKey>,
    /// Lifetime of a ticket, sent as the hint in NewSessionTicket.
    pub lifetime: Duration,
}

impl TicketKeys {
    /// One current key, no previous one, tickets valid for 2 hours.
    pub fn new(id: u32, key: [u8; 16]) -> Self {
        TicketKeys {
            current: TicketKey::new(id, key),
            previous: None,
            lifetime: Duration::from_secs(2 * 3600),
        }
    }

    /// Makes `next` current; the current key becomes the previous one (the older one is dropped).
    pub fn rotate(&mut self, next: TicketKey) {
        let old = std::mem::replace(&mut self.current, next);
        self.previous = Some(old);
    }

    pub(crate) fn find(&self, id: u32) -> Option<&TicketKey> {
        std::iter::once(&self.current).chain(self.previous.as_ref()).find(|k| k.id == id)
    }
}

/// What a client keeps to resume a session: the suite, master secret (extended, RFC 7627) and
/// the session ID and/or ticket the server gave. Serialize it with [`ClientSession::to_bytes`]
/// to keep it across runs (the bytes hold the master secret: store them like a key).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSession {
    pub(crate) suite: CipherSuite,
    pub(crate) session_id: Vec<u8>,
    pub(crate) ticket: Option<Vec<u8>>,
    pub(crate) master_secret: [u8; 48],
    pub(crate) server_name: Option<String>,
    /// Unix seconds when the session was made (from the configured wall clock).
    pub(crate) created_unix: u64,
    /// Seconds the session may be resumed (the ticket's lifetime hint, or a default for IDs).
    pub(crate) lifetime_secs: u32,
    /// A DTLS 1.3 ticket's resumption PSK and what goes with it (`ticket` holds the ticket;
    /// `master_secret` and `session_id` are unused then).
    pub(crate) v13: Option<Box<ClientTicket13>>,
}

/// What a DTLS 1.3 client keeps of a NewSessionTicket (RFC 8446 §4.6.1).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientTicket13 {
    pub suite: crate::crypto::tls13::Suite13,
    /// The resumption PSK, from resumption_master_secret and the ticket's nonce.
    pub psk: zeroize::Zeroizing<Vec<u8>>,
    /// ticket_age_add, to obfuscate the age we send (§4.2.11.1).
    pub age_add: u32,
    /// max_early_data_size the ticket allows (0: no 0-RTT).
    pub max_early_data: u32,
    /// Unix milliseconds when the ticket arrived, for its age.
    pub received_ms: u64,
}

impl Drop for ClientSession {
    fn drop(&mut self) {
        self.master_secret.zeroize();
    }
}

impl std::fmt::Debug for ClientSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("suite", &self.suite)
            .field("session_id_len", &self.session_id.len())
            .field("ticket_len", &self.ticket.as_ref().map(|t| t.len()))
            .field("server_name", &self.server_name)
            .field("created_unix", &self.created_unix)
            .field("lifetime_secs", &self.lifetime_secs)
            .field("dtls13", &self.v13.as_ref().map(|t| t.suite))
            .finish()
    }
}

/// Serialization format version of [`ClientSession::to_bytes`] for a DTLS 1.2 session
/// (unchanged, so files written before DTLS 1.3 tickets still read).
const SESSION_FORMAT: u8 = 1;
/// The format of a DTLS 1.3 session (a ticket and its resumption PSK).
const SESSION_FORMAT_13: u8 = 2;

impl ClientSession {
    /// The suite of the session.
    pub fn suite(&self) -> CipherSuite {
        self.suite
    }

    /// Whether the session carries a ticket (else it resumes by session ID).
    pub fn has_ticket(&self) -> bool {
        self.ticket.is_some()
    }

    /// The session ID the server assigned (may be empty with a ticket).
    pub fn session_id(&self) -> &[u8] {
        &self.session_id
    }

    /// The server name the session was made with.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// Unix seconds after which the session is not offered any more.
    pub fn expires_unix(&self) -> u64 {
        self.created_unix.saturating_add(u64::from(self.lifetime_secs))
    }

    /// Whether this is a DTLS 1.3 session (resumed with a pre_shared_key, RFC 8446 §2.2).
    pub fn is_dtls13(&self) -> bool {
        self.v13.is_some()
    }

    /// DTLS 1.3: whether the ticket allows 0-RTT early data, and how much (RFC 8446 §4.6.1).
    pub fn max_early_data(&self) -> u32 {
        self.v13.as_ref().map_or(0, |t| t.max_early_data)
    }

    /// A self-contained byte string (holds the master secret).
    pub fn to_bytes(&self) -> Vec<u8> {
        if let Some(t) = &self.v13 {
            return self.to_bytes13(t);
        }
        let mut out = Vec::with_capacity(128 + self.ticket.as_ref().map_or(0, |t| t.len()));
        put_u8(&mut out, SESSION_FORMAT);
        put_u16(&mut out, self.suite.id());
        put_vec8(&mut out, &self.session_id);
        match &self.ticket {
            Some(t) => {
                put_u8(&mut out, 1);
                put_vec16(&mut out, t);
            }
            None => put_u8(&mut out, 0),
        }
        out.extend_from_slice(&self.master_secret);
        put_vec8(&mut out, self.server_name.as_deref().unwrap_or("").as_bytes());
        out.extend_from_slice(&self.created_unix.to_be_bytes());
        out.extend_from_slice(&self.lifetime_secs.to_be_bytes());
        out
    }

    /// `2, suite, ticket, psk, age_add, max_early_data, received_ms, server name, created,
    /// lifetime`.
    fn to_bytes13(&self, t: &ClientTicket13) -> Vec<u8> {
        let ticket = self.ticket.as_deref().unwrap_or(&[]);
        let mut out = Vec::with_capacity(96 + ticket.len());
        put_u8(&mut out, SESSION_FORMAT_13);
        put_u16(&mut out, t.suite.id());
        put_vec16(&mut out, ticket);
        put_vec8(&mut out, &t.psk);
        out.extend_from_slice(&t.age_add.to_be_bytes());
        out.extend_from_slice(&t.max_early_data.to_be_bytes());
        out.extend_from_slice(&t.received_ms.to_be_bytes());
        put_vec8(&mut out, self.server_name.as_deref().unwrap_or("").as_bytes());
        out.extend_from_slice(&self.created_unix.to_be_bytes());
        out.extend_from_slice(&self.lifetime_secs.to_be_bytes());
        out
    }

    fn from_bytes13(r: &mut Reader<'_>) -> Result<Self, Error> {
        let bad = |_| Error::BadSession("truncated or malformed session bytes");
        let suite = crate::crypto::tls13::Suite13::from_id(r.u16().map_err(bad)?)
            .ok_or(Error::BadSession("session names an unknown suite"))?;
        let ticket = r.vec16().map_err(bad)?.to_vec();
        let psk = zeroize::Zeroizing::new(r.vec8().map_err(bad)?.to_vec());
        if ticket.is_empty() || psk.len() != suite.hash().len() {
            return Err(Error::BadSession("malformed DTLS 1.3 ticket"));
        }
        let age_add = u32::from_be_bytes(r.array::<4>().map_err(bad)?);
        let max_early_data = u32::from_be_bytes(r.array::<4>().map_err(bad)?);
        let received_ms = u64::from_be_bytes(r.array::<8>().map_err(bad)?);
        let server_name = read_name(r)?;
        let created_unix = u64::from_be_bytes(r.array::<8>().map_err(bad)?);
        let lifetime_secs = u32::from_be_bytes(r.array::<4>().map_err(bad)?);
        r.finish().map_err(bad)?;
        Ok(ClientSession {
            suite: CipherSuite::from(suite),
            session_id: Vec::new(),
            ticket: Some(ticket),
            master_secret: [0; 48],
            server_name,
            created_unix,
            lifetime_secs,
            v13: Some(Box::new(ClientTicket13 { suite, psk, age_add, max_early_data, received_ms })),
        })
    }

    /// Reads [`ClientSession::to_bytes`] output (either format).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let bad = |_| Error::BadSession("truncated or malformed session bytes");
        let mut r = Reader::new(bytes);
        match r.u8().map_err(bad)? {
            SESSION_FORMAT => {}
            SESSION_FORMAT_13 => return Self::from_bytes13(&mut r),
            _ => return Err(Error::BadSession("unknown session format version")),
        }
        let suite = CipherSuite::from_id(r.u16().map_err(bad)?)
            .ok_or(Error::BadSession("session names an unknown suite"))?;
        let session_id = r.vec8().map_err(bad)?.to_vec();
        if session_id.len() > 32 {
            return Err(Error::BadSession("session ID longer than 32 bytes"));
        }
        let ticket = match r.u8().map_err(bad)? {
            0 => None,
            1 => Some(r.vec16().map_err(bad)?.to_vec()),
            _ => return Err(Error::BadSession("bad ticket flag")),
        };
        let master_secret = r.array::<48>().map_err(bad)?;
        let server_name = read_name(&mut r)?;
        let created_unix = u64::from_be_bytes(r.array::<8>().map_err(bad)?);
        let lifetime_secs = u32::from_be_bytes(r.array::<4>().map_err(bad)?);
        r.finish().map_err(bad)?;
        Ok(ClientSession {
            suite,
            session_id,
            ticket,
            master_secret,
            server_name,
            created_unix,
            lifetime_secs,
            v13: None,
        })
    }
}

fn read_name(r: &mut Reader<'_>) -> Result<Option<String>, Error> {
    let name = r.vec8().map_err(|_| Error::BadSession("truncated or malformed session bytes"))?;
    if name.is_empty() {
        return Ok(None);
    }
    String::from_utf8(name.to_vec()).map(Some).map_err(|_| Error::BadSession("server name not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_bytes_round_trip_and_reject_garbage() {
        let s = ClientSession {
            suite: CipherSuite::PskWithAes128Ccm8,
            session_id: vec![7; 32],
            ticket: Some(vec![1, 2, 3]),
            master_secret: [9; 48],
            server_name: Some("localhost".into()),
            created_unix: 1_800_000_000,
            lifetime_secs: 7200,
            v13: None,
        };
        let bytes = s.to_bytes();
        assert_eq!(ClientSession::from_bytes(&bytes).unwrap(), s);
        for n in 0..bytes.len() {
            assert!(ClientSession::from_bytes(&bytes[..n]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ClientSession::from_bytes(&longer).is_err());
    }

    #[test]
    fn a_dtls13_session_round_trips_in_format_2_and_format_1_still_reads() {
        let s = ClientSession {
            suite: CipherSuite::from(crate::crypto::tls13::Suite13::Aes256GcmSha384),
            session_id: Vec::new(),
            ticket: Some(vec![5; 90]),
            master_secret: [0; 48],
            server_name: Some("localhost".into()),
            created_unix: 1_800_000_000,
            lifetime_secs: 7200,
            v13: Some(Box::new(ClientTicket13 {
                suite: crate::crypto::tls13::Suite13::Aes256GcmSha384,
                psk: zeroize::Zeroizing::new(vec![3; 48]),
                age_add: 0xdead_beef,
                max_early_data: 16384,
                received_ms: 1_800_000_000_123,
            })),
        };
        let bytes = s.to_bytes();
        assert_eq!(bytes[0], SESSION_FORMAT_13);
        let back = ClientSession::from_bytes(&bytes).unwrap();
        assert_eq!(back, s);
        assert!(back.is_dtls13() && back.max_early_data() == 16384);
        for n in 0..bytes.len() {
            assert!(ClientSession::from_bytes(&bytes[..n]).is_err());
        }
        let mut wrong_psk = bytes.clone();
        // The PSK's length follows format, suite and the ticket: a SHA-384 suite needs 48.
        wrong_psk[1 + 2 + 2 + 90] = 32;
        assert!(ClientSession::from_bytes(&wrong_psk).is_err());
        // A file of the first format (a 1.2 session) reads as before; an unknown one is refused.
        let old: &[u8] = &[
            1, 0xc0, 0xa8, 0, 0, // format 1, suite, no session ID, no ticket
        ];
        let mut old = old.to_vec();
        old.extend_from_slice(&[9; 48]);
        old.push(0);
        old.extend_from_slice(&1_800_000_000u64.to_be_bytes());
        old.extend_from_slice(&7200u32.to_be_bytes());
        let read = ClientSession::from_bytes(&old).unwrap();
        assert!(!read.is_dtls13() && read.master_secret == [9; 48]);
        assert_eq!(read.to_bytes(), old, "1.2 sessions are written as before");
        let mut unknown = old.clone();
        unknown[0] = 3;
        assert!(ClientSession::from_bytes(&unknown).is_err());
    }

    #[test]
    fn rotation_keeps_the_previous_key() {
        let mut keys = TicketKeys::new(1, [1; 16]);
        keys.rotate(TicketKey::new(2, [2; 16]));
        assert!(keys.find(1).is_some() && keys.find(2).is_some());
        keys.rotate(TicketKey::new(3, [3; 16]));
        assert!(keys.find(1).is_none() && keys.find(2).is_some() && keys.find(3).is_some());
    }
}

/// What the server needs to resume a session: kept in the cache or sealed in a ticket.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ServerSession {
    pub suite: CipherSuite,
    pub master_secret: [u8; 48],
    /// Unix seconds (or engine seconds without a wall clock) when the full handshake completed.
    pub created: u64,
    /// The PSK identity the session was made with (empty for certificate suites), so a resumed
    /// session reports the identity its keys came from.
    pub psk_identity: Vec<u8>,
    /// The client's validated certificate chain, when it sent one: resuming is a way around
    /// client authentication, so it is allowed only while the chain would still pass.
    pub client_cert: Option<ClientCertificate>,
}

/// What the full handshake established about a client's certificate chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientCertificate {
    /// The trust anchor the chain led to.
    pub anchor: fastshake_pki::AnchorId,
    /// The chain's earliest notAfter, Unix seconds.
    pub not_after: u64,
}

impl Drop for ServerSession {
    fn drop(&mut self) {
        self.master_secret.zeroize();
    }
}

/// Plaintext layout version of a sealed ticket.
const TICKET_STATE_VERSION: u8 = 2;
/// Version, suite, master secret, creation time, identity length, client-certificate flag.
const TICKET_STATE_FIXED: usize = 1 + 2 + 48 + 8 + 2 + 1;
/// The client certificate's trust anchor and notAfter, when it sent one.
const TICKET_CLIENT_CERT_LEN: usize = 32 + 8;
const TICKET_NONCE_LEN: usize = 12;
/// Key id, nonce and GCM tag around the sealed state.
const TICKET_OVERHEAD: usize = 4 + TICKET_NONCE_LEN + 16;
/// Longest PSK identity kept in a ticket; sessions with longer ones get no ticket.
const MAX_TICKET_IDENTITY: usize = 256;
/// Size of a ticket for a session without a PSK identity.
pub(crate) const TICKET_LEN: usize = TICKET_OVERHEAD + TICKET_STATE_FIXED;

impl ServerSession {
    /// Seals the session under `key` (AES-128-GCM; the key id is the additional data).
    pub fn seal(&self, key: &TicketKey, nonce: [u8; TICKET_NONCE_LEN]) -> Option<Vec<u8>> {
        if self.psk_identity.len() > MAX_TICKET_IDENTITY {
            return None;
        }
        let mut state =
            zeroize::Zeroizing::new(Vec::with_capacity(TICKET_STATE_FIXED + self.psk_identity.len() + 16));
        state.push(TICKET_STATE_VERSION);
        state.extend_from_slice(&self.suite.id().to_be_bytes());
        state.extend_from_slice(&self.master_secret);
        state.extend_from_slice(&self.created.to_be_bytes());
        put_vec16(&mut state, &self.psk_identity);
        match &self.client_cert {
            Some(cert) => {
                state.push(1);
                state.extend_from_slice(&cert.anchor.0);
                state.extend_from_slice(&cert.not_after.to_be_bytes());
            }
            None => state.push(0),
        }
        seal_state(key, nonce, state)
    }

    /// Opens a ticket sealed under one of `keys`; `None` for an unknown key, a forgery or
    /// garbage (the tag check is constant time), or a session older than `lifetime` at `now`.
    pub fn open(keys: &TicketKeys, ticket: &[u8], now: u64) -> Option<ServerSession> {
        if ticket.len() < TICKET_LEN
            || ticket.len() > TICKET_LEN + MAX_TICKET_IDENTITY + TICKET_CLIENT_CERT_LEN
        {
            return None;
        }
        let buf = open_state(keys, ticket)?;
        let mut r = Reader::new(&buf);
        if r.u8().ok()? != TICKET_STATE_VERSION {
            return None;
        }
        let suite = CipherSuite::from_id(r.u16().ok()?)?;
        let master_secret = r.array::<48>().ok()?;
        let created = u64::from_be_bytes(r.array::<8>().ok()?);
        let psk_identity = r.vec16().ok()?.to_vec();
        let client_cert = match r.u8().ok()? {
            0 => None,
            1 => Some(ClientCertificate {
                anchor: fastshake_pki::AnchorId(r.array::<32>().ok()?),
                not_after: u64::from_be_bytes(r.array::<8>().ok()?),
            }),
            _ => return None,
        };
        r.finish().ok()?;
        let session = ServerSession { suite, master_secret, created, psk_identity, client_cert };
        session.fresh(now, keys.lifetime).then_some(session)
    }

    /// Whether the session may still be resumed at `now` (not expired, not from the future).
    pub fn fresh(&self, now: u64, lifetime: Duration) -> bool {
        now >= self.created && now - self.created < lifetime.as_secs()
    }
}

/// `key id, nonce, AES-128-GCM(state)` with the key id as additional data: the one sealing of
/// tickets (1.2 and 1.3 states differ in their first byte).
fn seal_state(
    key: &TicketKey,
    nonce: [u8; TICKET_NONCE_LEN],
    mut state: zeroize::Zeroizing<Vec<u8>>,
) -> Option<Vec<u8>> {
    use ring::aead;
    let sealing = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, key.key()).ok()?);
    let id = key.id.to_be_bytes();
    sealing
        .seal_in_place_append_tag(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::from(id), &mut *state)
        .ok()?;
    let mut ticket = Vec::with_capacity(TICKET_OVERHEAD - 16 + state.len());
    ticket.extend_from_slice(&id);
    ticket.extend_from_slice(&nonce);
    ticket.extend_from_slice(&state);
    Some(ticket)
}

/// The plaintext state of a ticket sealed under one of `keys` (the tag check is constant time).
fn open_state(keys: &TicketKeys, ticket: &[u8]) -> Option<zeroize::Zeroizing<Vec<u8>>> {
    use ring::aead;
    if ticket.len() < TICKET_OVERHEAD {
        return None;
    }
    let (id, rest) = ticket.split_at(4);
    let (nonce, sealed) = rest.split_at(TICKET_NONCE_LEN);
    let key = keys.find(u32::from_be_bytes(id.try_into().ok()?))?;
    let opening = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, key.key()).ok()?);
    let mut buf = zeroize::Zeroizing::new(sealed.to_vec());
    let nonce = aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
    let len = opening.open_in_place(nonce, aead::Aad::from(id), &mut buf[..]).ok()?.len();
    buf.truncate(len);
    Some(buf)
}

/// Plaintext layout version of a sealed DTLS 1.3 ticket (a 1.2 ticket's is
/// [`TICKET_STATE_VERSION`]; neither opens as the other).
const TICKET_STATE_VERSION_13: u8 = 5;
/// Longest 1.3 ticket opened: the fixed part, a SHA-384 PSK, identity and client certificate.
const MAX_TICKET13_LEN: usize = TICKET_OVERHEAD + 64 + 48 + MAX_TICKET_IDENTITY + TICKET_CLIENT_CERT_LEN;

/// What a DTLS 1.3 server needs to resume: sealed in the NewSessionTicket's ticket under the
/// same [`TicketKeys`] as 1.2 tickets, so any node of a fleet with the keys resumes it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ServerSession13 {
    pub suite: crate::crypto::tls13::Suite13,
    /// The resumption PSK (RFC 8446 §4.6.1).
    pub psk: zeroize::Zeroizing<Vec<u8>>,
    /// Unix milliseconds when the ticket was issued (its age, §4.2.11.1, counts from here).
    pub created_ms: u64,
    /// The shortest round trip the handshake that issued it sampled, milliseconds: the client's idea
    /// of the ticket's age starts when the ticket arrives and its ClientHello takes a while
    /// to come back, so ours runs ahead of it by about this much (RFC 8446 §8.3).
    pub rtt_ms: u32,
    pub age_add: u32,
    /// max_early_data_size the ticket allowed (0: none).
    pub max_early_data: u32,
    /// The client's IP as 16 bytes (IPv4 mapped): the address a ticket stands in for when the
    /// server skips the cookie exchange (RFC 9147 §5.1).
    pub client_ip: [u8; 16],
    /// The external PSK identity the session was made with (empty with certificates).
    pub psk_identity: Vec<u8>,
    /// The client's validated chain, re-checked against the policy on resumption.
    pub client_cert: Option<ClientCertificate>,
    /// The early-data register of the server that issued the ticket: only it may take the
    /// ticket's early data (RFC 8446 §8), so a fleet sharing ticket keys takes it once.
    pub origin: [u8; 8],
}

impl ServerSession13 {
    /// `5, suite, psk, created_ms, rtt_ms, age_add, max_early_data, client_ip, origin, identity,
    /// cert`.
    pub fn seal(&self, key: &TicketKey, nonce: [u8; TICKET_NONCE_LEN]) -> Option<Vec<u8>> {
        if self.psk_identity.len() > MAX_TICKET_IDENTITY {
            return None;
        }
        let mut state = zeroize::Zeroizing::new(Vec::with_capacity(128 + self.psk_identity.len()));
        state.push(TICKET_STATE_VERSION_13);
        state.extend_from_slice(&self.suite.id().to_be_bytes());
        put_vec8(&mut state, &self.psk);
        state.extend_from_slice(&self.created_ms.to_be_bytes());
        state.extend_from_slice(&self.rtt_ms.to_be_bytes());
        state.extend_from_slice(&self.age_add.to_be_bytes());
        state.extend_from_slice(&self.max_early_data.to_be_bytes());
        state.extend_from_slice(&self.client_ip);
        state.extend_from_slice(&self.origin);
        put_vec16(&mut state, &self.psk_identity);
        match &self.client_cert {
            Some(cert) => {
                state.push(1);
                state.extend_from_slice(&cert.anchor.0);
                state.extend_from_slice(&cert.not_after.to_be_bytes());
            }
            None => state.push(0),
        }
        seal_state(key, nonce, state)
    }

    /// Opens a 1.3 ticket sealed under one of `keys`; `None` for an unknown key, a forgery, a
    /// 1.2 ticket or garbage, or a ticket older than the keys' lifetime at `now_ms` (one issued
    /// up to [`CLOCK_SKEW_MS`] in the future, by a fleet node whose clock is ahead, counts as
    /// new).
    pub fn open(keys: &TicketKeys, ticket: &[u8], now_ms: u64) -> Option<ServerSession13> {
        if ticket.len() > MAX_TICKET13_LEN {
            return None;
        }
        let buf = open_state(keys, ticket)?;
        let mut r = Reader::new(&buf);
        if r.u8().ok()? != TICKET_STATE_VERSION_13 {
            return None;
        }
        let suite = crate::crypto::tls13::Suite13::from_id(r.u16().ok()?)?;
        let psk = zeroize::Zeroizing::new(r.vec8().ok()?.to_vec());
        if psk.len() != suite.hash().len() {
            return None;
        }
        let created_ms = u64::from_be_bytes(r.array::<8>().ok()?);
        let rtt_ms = u32::from_be_bytes(r.array::<4>().ok()?);
        let age_add = u32::from_be_bytes(r.array::<4>().ok()?);
        let max_early_data = u32::from_be_bytes(r.array::<4>().ok()?);
        let client_ip = r.array::<16>().ok()?;
        let origin = r.array::<8>().ok()?;
        let psk_identity = r.vec16().ok()?.to_vec();
        let client_cert = match r.u8().ok()? {
            0 => None,
            1 => Some(ClientCertificate {
                anchor: fastshake_pki::AnchorId(r.array::<32>().ok()?),
                not_after: u64::from_be_bytes(r.array::<8>().ok()?),
            }),
            _ => return None,
        };
        r.finish().ok()?;
        let lifetime_ms = keys.lifetime.as_millis().min(u128::from(u64::MAX)) as u64;
        let fresh = now_ms.saturating_add(CLOCK_SKEW_MS) >= created_ms
            && now_ms.saturating_sub(created_ms) < lifetime_ms;
        fresh.then_some(ServerSession13 {
            suite,
            psk,
            created_ms,
            rtt_ms,
            age_add,
            max_early_data,
            client_ip,
            psk_identity,
            client_cert,
            origin,
        })
    }
}

/// How far ahead of ours a fleet node's clock may be for its tickets to count as issued now.
pub(crate) const CLOCK_SKEW_MS: u64 = 10_000;

/// The server's session-ID cache: bounded in entries and lifetime, least recently used out first.
/// Ordered maps, so no hash seeds and a reproducible eviction order.
pub(crate) struct SessionCache {
    config: SessionCacheConfig,
    entries: std::collections::BTreeMap<[u8; 32], (ServerSession, u64)>,
    /// Last-use tick to session ID, oldest first.
    by_use: std::collections::BTreeMap<u64, [u8; 32]>,
    tick: u64,
}

impl SessionCache {
    pub fn new(config: SessionCacheConfig) -> Self {
        SessionCache { config, entries: Default::default(), by_use: Default::default(), tick: 0 }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn insert(&mut self, id: [u8; 32], session: ServerSession) {
        if self.config.max_entries == 0 {
            return;
        }
        self.remove(&id);
        while self.entries.len() >= self.config.max_entries {
            let Some((_, oldest)) = self.by_use.pop_first() else { break };
            self.entries.remove(&oldest);
        }
        self.tick += 1;
        self.by_use.insert(self.tick, id);
        self.entries.insert(id, (session, self.tick));
    }

    /// Whether a session named `id` is held (fresh or not).
    pub fn contains(&self, id: &[u8]) -> bool {
        <[u8; 32]>::try_from(id).is_ok_and(|id| self.entries.contains_key(&id))
    }

    fn remove(&mut self, id: &[u8; 32]) {
        if let Some((_, tick)) = self.entries.remove(id) {
            self.by_use.remove(&tick);
        }
    }

    /// The session named `id` if it is still fresh at `now` (and marks it used); an expired
    /// one is removed.
    pub fn get(&mut self, id: &[u8], now: u64) -> Option<ServerSession> {
        let id: [u8; 32] = id.try_into().ok()?;
        let (session, tick) = self.entries.get(&id)?;
        if !session.fresh(now, self.config.lifetime) {
            self.remove(&id);
            return None;
        }
        let (session, old_tick) = (session.clone(), *tick);
        self.by_use.remove(&old_tick);
        self.tick += 1;
        self.by_use.insert(self.tick, id);
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.1 = self.tick;
        }
        Some(session)
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;

    fn session(created: u64) -> ServerSession {
        ServerSession {
            suite: CipherSuite::PskWithAes128Ccm8,
            master_secret: [3; 48],
            created,
            psk_identity: vec![],
            client_cert: None,
        }
    }

    #[test]
    fn tickets_open_under_current_and_previous_keys_only() {
        let mut keys = TicketKeys::new(1, [1; 16]);
        let t1 = session(100).seal(&keys.current, [0; 12]).unwrap();
        assert_eq!(t1.len(), TICKET_LEN);
        assert!(ServerSession::open(&keys, &t1, 200).is_some());
        keys.rotate(TicketKey::new(2, [2; 16]));
        assert!(ServerSession::open(&keys, &t1, 200).is_some(), "previous key still opens");
        keys.rotate(TicketKey::new(3, [3; 16]));
        assert!(ServerSession::open(&keys, &t1, 200).is_none(), "two rotations later it does not");
        let t3 = session(100).seal(&keys.current, [1; 12]).unwrap();
        for i in 0..t3.len() {
            let mut forged = t3.clone();
            forged[i] ^= 1;
            assert!(ServerSession::open(&keys, &forged, 200).is_none(), "byte {i}");
        }
        assert!(ServerSession::open(&keys, &t3, 100 + 7200).is_none(), "expired");
        assert!(ServerSession::open(&keys, &t3, 99).is_none(), "from the future");
        let mut named = session(100);
        named.psk_identity = b"device-7".to_vec();
        let t = named.seal(&keys.current, [2; 12]).unwrap();
        assert_eq!(ServerSession::open(&keys, &t, 200).unwrap().psk_identity, b"device-7");
        named.psk_identity = vec![1; MAX_TICKET_IDENTITY + 1];
        assert!(named.seal(&keys.current, [3; 12]).is_none(), "identity too long for a ticket");
    }

    fn session13(created_ms: u64) -> ServerSession13 {
        ServerSession13 {
            suite: crate::crypto::tls13::Suite13::Aes128GcmSha256,
            psk: zeroize::Zeroizing::new(vec![4; 32]),
            created_ms,
            rtt_ms: 1_500,
            age_add: 77,
            max_early_data: 1024,
            client_ip: [1; 16],
            psk_identity: b"device-7".to_vec(),
            client_cert: Some(ClientCertificate { anchor: fastshake_pki::AnchorId([2; 32]), not_after: 9 }),
            origin: [5; 8],
        }
    }

    #[test]
    fn dtls13_tickets_share_the_sealing_but_not_the_state() {
        let mut keys = TicketKeys::new(1, [1; 16]);
        let t = session13(100_000).seal(&keys.current, [0; 12]).unwrap();
        let opened = ServerSession13::open(&keys, &t, 200_000).expect("opens");
        assert!(opened == session13(100_000));
        // Neither kind opens as the other.
        assert!(ServerSession::open(&keys, &t, 200).is_none());
        let t12 = session(100).seal(&keys.current, [1; 12]).unwrap();
        assert!(ServerSession13::open(&keys, &t12, 200_000).is_none());
        for i in 0..t.len() {
            let mut forged = t.clone();
            forged[i] ^= 1;
            assert!(ServerSession13::open(&keys, &forged, 200_000).is_none(), "byte {i}");
        }
        // Lifetime (2 h by default) and a clock ahead by at most CLOCK_SKEW_MS.
        assert!(ServerSession13::open(&keys, &t, 100_000 + 7200 * 1000).is_none(), "expired");
        assert!(ServerSession13::open(&keys, &t, 100_000 - CLOCK_SKEW_MS).is_some());
        assert!(ServerSession13::open(&keys, &t, 100_000 - CLOCK_SKEW_MS - 1).is_none(), "from the future");
        keys.rotate(TicketKey::new(2, [2; 16]));
        assert!(ServerSession13::open(&keys, &t, 200_000).is_some(), "previous key");
        keys.rotate(TicketKey::new(3, [3; 16]));
        assert!(ServerSession13::open(&keys, &t, 200_000).is_none(), "two rotations");
    }

    #[test]
    fn cache_is_bounded_lru_and_expires() {
        let mut cache =
            SessionCache::new(SessionCacheConfig { max_entries: 2, lifetime: Duration::from_secs(10) });
        cache.insert([1; 32], session(0));
        cache.insert([2; 32], session(0));
        assert!(cache.get(&[1; 32], 1).is_some()); // 2 is now the least recently used
        cache.insert([3; 32], session(0));
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&[2; 32], 1).is_none());
        assert!(cache.get(&[1; 32], 1).is_some() && cache.get(&[3; 32], 1).is_some());
        assert!(cache.get(&[1; 32], 10).is_none(), "expired");
        assert_eq!(cache.len(), 1);
        assert!(cache.get(&[9; 5], 1).is_none());
    }
}
