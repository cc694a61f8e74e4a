//! Sans-IO DTLS 1.2 (RFC 6347) with pre-shared keys (RFC 4279) and ECDHE with X.509
//! certificates (RFC 8422), extended master secret (RFC 7627), resumption by session ID and
//! ticket (RFC 5077), Connection IDs (RFC 9146) and the return-routability check (RFC 9853),
//! stateless cookies and one flight engine for retransmission; and DTLS 1.3 (RFC 9147) beside it
//! ([`dtls13`]).
//!
//! Versions ([`Versions`], `versions` in [`ClientConfig`] and [`ServerConfig`]): by default
//! ([`Versions::Both`]) a client offers DTLS 1.3 and 1.2 in one ClientHello and a server answers
//! each client in the highest version both speak (RFC 9147 §5.3; a 1.2 answer to a client that
//! offered 1.3 carries RFC 8446 §4.1.3's downgrade sentinel, which the client checks).
//! [`Versions::Dtls12`] speaks DTLS 1.2 alone, byte for byte as a 1.2-only peer (what reproducing
//! the DTLS 1.2 papers needs); [`Versions::Dtls13`] speaks 1.3 alone. What follows describes
//! the DTLS 1.2 handshake unless it names 1.3.
//!
//! - [`Connection`]: one session, client or server. Datagrams and time go in
//!   ([`Connection::handle_datagram`], [`Connection::handle_timeout`]); datagrams, the next
//!   deadline and events come out ([`Connection::poll_transmit`], [`Connection::poll_timeout`],
//!   [`Connection::poll_event`]).
//! - [`Endpoint`]: the server side. It answers ClientHellos statelessly with a
//!   HelloVerifyRequest (a [`fastshake_core::CookieMac`] over the client's address and port and
//!   the ClientHello's version, random, session_id, cipher_suites and compression_methods), or
//!   in DTLS 1.3 with a HelloRetryRequest whose cookie carries the ClientHello's hash, and
//!   creates a [`Connection`] only once a client returns a valid cookie.
//!
//! Randomness is a seed the caller passes in, so every run is reproducible.
//!
//! # Example
//! A PSK handshake and one record each way, driven by hand: the caller carries every datagram
//! and owns the clock (a driver does the same with sockets and timers).
//! ```
//! use fastshake_dtls::{ClientConfig, Connection, Endpoint, Event, Instant, ServerConfig};
//! use std::sync::Arc;
//!
//! let key = b"0123456789abcdef".to_vec();
//! let (client_addr, server_addr) = ("192.0.2.1:5684".parse().unwrap(), "192.0.2.2:5684".parse().unwrap());
//! let mut server = Endpoint::new(Arc::new(ServerConfig::psk("sensor-7", key.clone())), [1; 32])
//!     .expect("a valid server configuration");
//! let now = Instant::ZERO;
//! let mut client = Connection::client(Arc::new(ClientConfig::psk("sensor-7", key)), now, server_addr, [2; 32]);
//!
//! // Carry datagrams both ways until neither side has any left (a lossless, instant path).
//! loop {
//!     let mut moved = false;
//!     while let Some(mut t) = client.poll_transmit(now) {
//!         server.handle_datagram(now, server_addr, client_addr, &mut t.payload);
//!         moved = true;
//!     }
//!     while let Some(mut t) = server.poll_transmit(now) {
//!         client.handle_datagram(now, client_addr, &mut t.payload);
//!         moved = true;
//!     }
//!     if !moved {
//!         break;
//!     }
//! }
//! assert!(client.is_established());
//!
//! // Application data, sealed into and opened in the caller's buffers: no allocation.
//! let mut buf = [0u8; 256];
//! let len = client.seal_into(b"temperature 21.5", &mut buf).unwrap();
//! let incoming = server.incoming(&mut buf[..len]);
//! let mut got = Vec::new();
//! server.open_in_place(now, server_addr, client_addr, incoming, &mut |_, data| got.extend_from_slice(data));
//! assert_eq!(got, b"temperature 21.5");
//!
//! // The server's events say what happened, in order.
//! let h = server.handle_for(client_addr).unwrap();
//! assert!(std::iter::from_fn(|| server.poll_event()).any(|(from, e)| from == h && matches!(e, Event::Connected(_))));
//! server.send(h, b"ok").unwrap();
//! while let Some(mut t) = server.poll_transmit(now) {
//!     client.handle_datagram(now, client_addr, &mut t.payload);
//! }
//! assert!(std::iter::from_fn(|| client.poll_event()).any(|e| e == Event::ApplicationData(b"ok".to_vec())));
//! ```
//!
//! # Behaviour worth knowing
//! - Suites: `TLS_PSK_WITH_AES_128_CCM_8`, `TLS_PSK_WITH_AES_128_GCM_SHA256`,
//!   `TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8`, `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256` and
//!   `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`. A client offers PSK suites only with a PSK and
//!   certificate suites only with trust anchors; a server serves a suite only with what it needs
//!   (a PSK, an ECDSA P-256 key or an RSA key). The extended master secret is always offered and
//!   used when the peer supports it; without it the handshake falls back to the RFC 5246 master
//!   secret unless `require_extended_master_secret` is set ([`HandshakeSummary::extended_master_secret`]
//!   says which), and such a session is never resumed.
//! - Certificates (via `fastshake-pki`): groups x25519 and secp256r1 (uncompressed points),
//!   schemes `ecdsa_secp256r1_sha256`, `rsa_pss_rsae_sha256`, `rsa_pkcs1_sha256`. The leaf and
//!   intermediates are sent, never the root. The peer's chain is validated against the trust
//!   anchors at the Unix time the caller's [`WallClock`] anchor gives (no OS clock is read), the
//!   server name checked when the client names one. Client authentication follows
//!   [`ClientAuth`]. Refusals send the RFC 5246 alert ([`Error::PeerAuthentication`] says which
//!   and why): unknown_ca, certificate_expired, bad_certificate (wrong name), decrypt_error (a
//!   ServerKeyExchange or CertificateVerify signature that does not verify), handshake_failure
//!   (a required client certificate missing). Ephemeral keys and ECDSA nonces come from the
//!   seeded RNG; RSA signing uses ring's own randomness (see `fastshake-pki`).
//! - Resumption: by session ID (the [`Endpoint`]'s cache, bounded by
//!   [`SessionCacheConfig`], least recently used out first) and by RFC 5077 ticket (session state
//!   sealed with AES-128-GCM under [`TicketKeys`]: current and previous key, the key id in the
//!   ticket; [`Endpoint::rotate_ticket_key`]). The client passes a [`ClientSession`] to
//!   [`Connection::client_with_session`] and gets the next one in [`HandshakeSummary::session`].
//!   An unknown, forged or expired ticket or session ID leads to a full handshake, never an error.
//!   A session resumes only while it would still pass the server's client-authentication policy
//!   (a certificate now required, its chain's trust anchor still trusted, the chain unexpired);
//!   otherwise the server runs a full handshake, which enforces the policy.
//!   In the abbreviated handshake the server sends ServerHello, a renewed NewSessionTicket (with
//!   tickets), ChangeCipherSpec and Finished; the client's ChangeCipherSpec and Finished are its
//!   last flight, kept until the server's first record shows it arrived.
//! - Renegotiation is refused: the client sends the empty-renegotiation-info SCSV, the server
//!   echoes an empty `renegotiation_info`; a HelloRequest or a ClientHello inside an established
//!   session gets a `no_renegotiation` warning and the session goes on.
//! - Records that fail authentication are dropped silently (RFC 6347 §4.1.2.7), during the
//!   handshake too, so a forged datagram cannot end one. While no record of the peer has
//!   authenticated, its protected handshake records failing both before and after it visibly
//!   resent its flight (at least half a retransmission period apart, in different datagrams)
//!   means the keys differ (a wrong PSK): the handshake fails with `decrypt_error` (RFC 4279 §2)
//!   within a retransmission period or two instead of at the timeout. An unknown identity gets
//!   `unknown_psk_identity`. Application records that authenticate before the peer's Finished
//!   (sent right behind it and reordered, or the Finished lost) are kept, at most 4, and
//!   delivered after [`Event::Connected`] once the Finished verifies.
//! - Late and duplicated flights (RFC 6347 §4.2.2): a handshake message below the next expected
//!   message_seq is discarded, and one of the peer's previous flight makes us resend our last
//!   flight; a HelloVerifyRequest answering an earlier ClientHello than our latest is ignored
//!   (its cookie would restart a handshake whose ServerHello is already on its way), and a
//!   ClientHello with the random of a half-open session but a higher message_seq is a new
//!   handshake. No copy of anything ends a handshake.
//! - What we accept is bounded by the RFC, not by our MTU: datagrams of any size, records up to
//!   2^14 + 2048 bytes, protected records of any size beside a Finished. A handshake record cut
//!   off at the end of a datagram (OpenSSL 3.0 flushes its 4 KiB write buffer mid-record when the
//!   path MTU is large) is kept, at most 8 KiB of it, and completed by the start of the peer's
//!   next datagram when that reads as whole records only once the rest is taken off.
//! - Retransmission: whole flights are resent, packed afresh with new record sequence numbers,
//!   on a timer that starts at `initial_retransmit` (or, under `RetransmitPolicy::Adaptive`, at
//!   what the round trips measured to the peer predict, RFC 6298 style, never below a floor,
//!   and, once the path has shown a loss, never above `initial_retransmit`:
//!   [`RttEstimate`], [`RttCache`]), doubles, and stops at `max_retransmit`; the
//!   handshake fails after `handshake_timeout`. The server's last flight is not timed: it is
//!   resent when the client's retransmitted Finished shows it was lost, and kept until the
//!   client's first protected record (or the handshake timeout) proves it arrived.
//! - Small MTUs: handshake messages are fragmented to the configured MTU (at least
//!   [`MIN_MTU`]); the endpoint also reassembles fragmented ClientHellos of up to 8 KiB (a DTLS
//!   1.3 client offering a post-quantum key share sends 1.5 kB) in a table bounded to 64 entries,
//!   128 KiB and two per client address, shared fairly by IP address when full (clients behind
//!   one NAT share an IP; a host flooding first fragments evicts its own), each dropped after 10 s
//!   without a new fragment, and answers them with a HelloVerifyRequest. Cookies stay valid for at
//!   least the handshake timeout (a client resends its ClientHello with the cookie until then).
//!   A server of DTLS 1.2 alone ([`Versions::Dtls12`]) gives a client that also offers DTLS 1.3
//!   DTLS 1.2 (its `supported_versions` and `key_share` are ignored, RFC 8446 §4.2.1).
//!   A 127-byte IEEE 802.15.4 frame less 23 bytes of MAC header and FCS and 8 bytes of
//!   6LoWPAN-compressed IPv6/UDP header leaves an MTU of 96 bytes; the tests run at 96 and 64.
//! - A new ClientHello from the address of an existing session (RFC 6347 §4.2.8) is answered
//!   with a HelloVerifyRequest and leaves the session alone; once it returns a valid cookie, the
//!   old session ends with [`Error::Superseded`] and the new handshake proceeds.
//! - Connection ID (RFC 9146, [`Mobility::connection_id`]): extension `connection_id` (54) with
//!   `opaque cid<0..255>` in both hellos. A server issues random CIDs unique in its
//!   [`Endpoint`] and finds a `tls12_cid` record's session by its CID before anything else.
//!   Records of epoch 1 (Finished included) towards a peer that asked for a non-empty CID are
//!   `tls12_cid` (25) records: the CID after the sequence number, the ciphertext of
//!   DTLSInnerPlaintext (content, real type, no padding sent, zero padding accepted), and the
//!   §5.3 additional data: 8 x 0xff, 25, cid_length, 25, version, epoch, sequence number, cid,
//!   length of DTLSInnerPlaintext. Epoch-0 records never carry a CID; plain epoch-1 records are
//!   still read. [`Connection::connection_id`] says what was agreed.
//! - Following the client (RFC 9146 §6): a session with a CID or its own socket (below) moves to
//!   a new client address when a record from there authenticates and is newer than every
//!   record received before; a replayed or reordered record changes nothing. A record that an
//!   on-path attacker withholds and later sends from elsewhere does move a session without
//!   `rrc` (RFC 9146 §6 names this limit); with `rrc` the new address must answer first. Standard sessions
//!   never move (a record from another address is dropped, as before). The endpoint's address
//!   index follows, and [`Event::PathChanged`] says where the session sends now.
//! - Return-routability check (RFC 9853, [`Mobility::return_routability_check`]): extension
//!   `rrc` (61, empty), content type `return_routability_check` (27) carrying a message type
//!   and an 8-byte cookie: path_challenge (0), path_response (1), path_drop (2, ignored: only
//!   the basic check is run); unknown types are ignored. With `rrc` a new client address gets
//!   a protected path_challenge (a fresh random cookie each time) before the session moves;
//!   it is resent on the retransmission timer (initial, doubling, capped) up to 4 times, and at
//!   most 3x the bytes received from that address are sent to it (challenges beyond that are
//!   skipped). While the check runs, each datagram goes to the new address within that
//!   allowance and, as a copy, to the address in use, so a real move costs no round trip and
//!   a spoofed one loses nothing (the client drops the second copy as a replay); what exceeds
//!   the allowance is held, at most 8 (the oldest dropped, counted in [`MobilityStats`]). On
//!   the matching path_response from that address the session moves and the held datagrams go
//!   there; if the check fails, or a newer record arrives from the address in use, the session
//!   stays and they go to the old address. A client answers each path_challenge at once, to
//!   the address it came from.
//! - Session sockets (seed 001 IPC): [`Event::Accepted`] comes when a connection is created;
//!   [`Endpoint::set_local`] then gives it its own socket: every datagram of it not yet handed
//!   out leaves with `Transmit::src` = that socket, and every datagram arriving there goes to it
//!   whatever its source ([`Endpoint::handle_for_local`]). A client with
//!   [`Mobility::follow_server_port`] takes the port its ServerHello came from (same IP) as the
//!   server's.
//! - Port moves (seed 001 TCS, [`Endpoint::move_to`]): both sides must agree on `port_move`,
//!   extension 0xFF00 (empty), the first value of the "Reserved for Private Use" range
//!   0xFF00-0xFFFF of the TLS ExtensionType registry (RFC 8446 §11), so it cannot collide with
//!   an assigned extension and a peer without it ignores it. The announcement is a protected
//!   `return_routability_check` record of message type 254 (`port_moved`, then the uint16
//!   port): RFC 9853 reserves 254-255 of its RRC Message Types registry for private use, and
//!   the record is then protected, sequenced and replay-checked like any other, which a new
//!   content type would not give for free. It is resent on the retransmission timer (initial,
//!   doubling, capped, until it is confirmed or the session ends); the client switches its
//!   remote port, raises [`Event::PathChanged`] and acknowledges with the same message to
//!   the new port. The session keeps sending from where it did until a record of the client
//!   authenticates at the new socket, then sends from there.
//! - Session slots (seed 002, [`ServerConfig::max_sessions`]): at most R connections, a slot
//!   taken when a ClientHello with a valid cookie makes one (handshakes in progress hold one).
//!   With all taken, [`WhenFull`] refuses the client with a fatal internal_error alert in epoch 0
//!   (no state kept; a fastshake client fails with [`Error::NoSessionSlot`]) or closes the
//!   least recently used or idlest established session with close_notify
//!   ([`Event::Evicted`]). Off by default.
//! - Footprint: an established session is a [`Connection`] of 216 bytes with nothing on the
//!   heap (client); the handshake-only state and the output queues are boxed and freed when
//!   empty; a server session costs about 400 bytes with its share of the [`Endpoint`]'s tables
//!   (the `footprint` example measures both), and no timer entry: idle expiry is one scan.
//!   Mobility state is boxed and made only for sessions that use it.
//!   Keys are kept raw and the AES key schedule is expanded per record.
//!   [`Connection::seal_into`] and [`Connection::open_in_place`] allocate nothing.
//!
//! # Extension points
//! Suites are rows of a `SuiteParams` table naming a `KeyExchange` (PSK, ECDHE-ECDSA, ECDHE-RSA) and a record cipher; extensions are parsed into one struct with
//! unknown ones skipped; the handshake state enum has one variant per awaited message, so the
//! certificate, resumption and Connection ID work adds variants and table rows rather than
//! reshaping the engine.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod alert;
mod cache;
mod clock;
mod config;
mod connection;
mod crypto;
mod endpoint;
mod error;
mod flight;
mod handshake;
mod mobility;
mod record;
mod rtt;
mod session;
mod strategy;
mod suite;
mod timer;
pub mod wire;

#[doc(hidden)]
pub mod fuzzing;

pub use alert::{AlertDescription, AlertLevel};
pub use cache::{
    CacheStore, CacheUse, CachedServer, ClientCertCacheConfig, MemoryCacheStore, SharedClientCertCache,
    CLIENT_TICKET_LEN,
};
pub use config::{
    AddressValidation, ClientConfig, Mobility, Psk, RetransmitPolicy, ServerConfig, Versions, WallClock,
    WhenFull, DEFAULT_COOKIE_LIFETIME, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_HANDSHAKES, DEFAULT_MTU, MIN_MTU,
};
pub use connection::{Connection, Event, HandshakeSummary, Role, Stats};
pub use endpoint::{
    ConnectionHandle, EarlyDataRegister, Endpoint, EndpointStats, HelloRefusal, Incoming, MAX_QUEUED_REFUSALS,
};
pub use error::{Error, Mismatch};
pub use fastshake_core::{Instant, Transmit};
pub use fastshake_pki::{CertifiedKey, TrustAnchors, ValidatedKeyCache};
pub use handshake::{CertificateCompression, CompressionAlgorithm, NamedGroup};
pub use mobility::{MobilityStats, NegotiatedMobility};
/// DTLS 1.3 (RFC 9147), the pieces built so far, public for drivers and tools that read 1.3
/// datagrams: the unified record header, sequence numbers and epochs widened from the bits
/// sent, record number encryption, a traffic secret's record keys, and the ACK message.
pub mod dtls13 {
    pub use crate::crypto::tls13::{expand_label, KeySchedule, LabelPrefix, Suite13, SuiteHash, TrafficKeys};
    pub use crate::record::ack::{write_ack, Ack, RecordNumber, CONTENT_ACK, MAX_ACKED};
    pub use crate::record::unified::{
        ends_datagram, is_unified, widen, SeqBits, SequenceCipher, SequenceKey, UnifiedHeader, SAMPLE_LEN,
    };
}
pub use rtt::{RttCache, RttEstimate, DEFAULT_RTT_CACHE_ENTRIES};
pub use session::{ClientAuth, ClientSession, Resumption, SessionCacheConfig, TicketKey, TicketKeys};
pub use strategy::{MobilityMode, SocketAction, SERVER_CID_LENGTH};
pub use suite::CipherSuite;
