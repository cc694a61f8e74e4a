//! Resumption state: what a client keeps to resume (RFC 5246 §7.3, RFC 5077), the server's
//! bounded session cache, ticket keys, and the client-authentication policy.

use crate::codec::{put_u16, put_u8, put_vec16, put_vec8, Reader};
use crate::error::Error;
use crate::suite::CipherSuite;
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

    #[allow(dead_code)] // used by ticket sealing
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

    #[allow(dead_code)] // used by ticket opening
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
            .finish()
    }
}

/// Serialization format version of [`ClientSession::to_bytes`].
const SESSION_FORMAT: u8 = 1;

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

    /// A self-contained byte string (holds the master secret).
    pub fn to_bytes(&self) -> Vec<u8> {
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

    /// Reads [`ClientSession::to_bytes`] output.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let bad = |_| Error::BadSession("truncated or malformed session bytes");
        let mut r = Reader::new(bytes);
        if r.u8().map_err(bad)? != SESSION_FORMAT {
            return Err(Error::BadSession("unknown session format version"));
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
        let name = r.vec8().map_err(bad)?;
        let server_name = if name.is_empty() {
            None
        } else {
            Some(String::from_utf8(name.to_vec()).map_err(|_| Error::BadSession("server name not UTF-8"))?)
        };
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
        })
    }
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
    fn rotation_keeps_the_previous_key() {
        let mut keys = TicketKeys::new(1, [1; 16]);
        keys.rotate(TicketKey::new(2, [2; 16]));
        assert!(keys.find(1).is_some() && keys.find(2).is_some());
        keys.rotate(TicketKey::new(3, [3; 16]));
        assert!(keys.find(1).is_none() && keys.find(2).is_some() && keys.find(3).is_some());
    }
}
