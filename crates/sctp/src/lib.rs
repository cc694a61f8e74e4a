//! Sans-IO SCTP (RFC 9260 subset) over UDP encapsulation (RFC 6951), with the alternative
//! handshake of seed 004: ALT-COOKIE, cookieless opening, ALT-DATA/ALT-SACK zero-RTT data,
//! fallback to and from the regular four-way handshake, an alternative-only server mode,
//! multihoming path cookies and INIT collision handling; and SNAP (draft-hancke-tsvwg-snap),
//! which opens an association from two INITs exchanged out of band.
//!
//! The [`Endpoint`] owns every association of one local SCTP port, demultiplexes incoming UDP
//! payloads (one SCTP packet each) and answers stateless packets (ABORT to a port without
//! listener, INIT-ACK with a state cookie, ERROR with an ALT-COOKIE) without allocating state.
//! Time comes in as [`Instant`], randomness as a seed, datagrams as byte slices; datagrams,
//! deadlines and [`Event`]s go out.
//!
//! Code points (see `DESIGN.md`): ALT-COOKIE parameter 0xB007, ALT-DATA 0xB008, ALT-SACK 0xB009,
//! error cause "ALT-COOKIE required" 0xB007. Their two high bits are `10`: a peer that does not
//! know them skips the parameter silently and goes on with the INIT (RFC 9260 §3.2.1). usrsctp
//! 0.9.5 does exactly that: it answers an INIT carrying ALT-COOKIE and ALT-DATA with a regular
//! INIT-ACK, reports neither parameter, and gets the zero-RTT data again as DATA behind the
//! COOKIE-ECHO (`examples/usrsctp_echo.rs`).
//!
//! # Decisions
//!
//! - **ALT-COOKIE**: the project's [`fastshake_core::CookieMac`] (SipHash-2-4-128) over a label
//!   and the client's IP address, as in seed 004 §III-B — not its UDP port, which a NAT may
//!   change between associations. 16 bytes: key epoch and 120-bit tag. It lives as long as its
//!   key: cookies verify under the current and the previous key ([`Endpoint::rotate_cookie_key`]).
//!   The ERROR that carries it is 36 bytes on the wire (12 common header, 4 chunk header, 4 cause
//!   header, 16 cookie, no padding; the paper's is 40 B): 1.0× the smallest INIT that announces
//!   ALT-COOKIE (36 bytes, ours), 0.32× a 112-byte INIT announcing many extensions.
//! - The ERROR answering an INIT carries the INIT's Initiate Tag as verification tag, as an
//!   ABORT answering an INIT does (RFC 9260 §8.4 rule 3): the client matches it to its INIT.
//! - An INIT to a port without listener gets ABORT with the INIT's Initiate Tag and the T bit
//!   clear (§8.4 rule 3); other out-of-the-blue packets get ABORT with their own tag and the T
//!   bit set (rule 8); ABORT, ERROR, COOKIE-ACK and SHUTDOWN-COMPLETE are never answered.
//! - **State cookie**: tags, initial TSNs, peer window, negotiated streams, creation time and
//!   lifetime, peer addresses, signed with the same MAC. Expired: "Stale Cookie" ERROR.
//! - **ALT-DATA** holds whole DATA chunks (TSNs from the INIT's initial TSN on); **ALT-SACK**
//!   holds one whole SACK chunk. The server adds ALT-SACK only when it took DATA out of
//!   ALT-DATA; whatever it does not acknowledge there is sent again as DATA and duplicate TSNs
//!   are never delivered twice (a repeated INIT after a lost INIT-ACK included).
//! - **Seed 004 §IV**: I-DATA and AUTH are not implemented. We never announce I-DATA, so
//!   ALT-DATA carries DATA; I-DATA chunks inside an incoming ALT-DATA are ignored, as the paper
//!   asks of a server without I-DATA, and the client sends the data again. Without AUTH there
//!   is no ALT-DATA/AUTH conflict.
//! - **Multihoming**: peer addresses from INIT/INIT-ACK become paths when they share the
//!   primary's family and loopback scope (RFC 9260 §5.1.2), are confirmed with HEARTBEATs, and
//!   a server opened by the alternative handshake holds HEARTBEATs back until the client's
//!   first packet on the association (§III-F). A client fetches ALT-COOKIEs for its
//!   [`Config::extra_local_addresses`] with INITs over those paths ([`Event::AltCookie`] with
//!   `local` set). One RTO per association; data goes on the primary path, which moves to
//!   another confirmed path after [`Config::path_max_retransmits`] T3-rtx expiries on it.
//! - **INIT collision** under the alternative handshake: an INIT accepted while our own INIT is
//!   outstanding opens the association and the INIT-ACK repeats our INIT's tag and TSN
//!   (§III-G); the regular collision follows RFC 9260 §5.2.1 and §5.2.4.
//! - [`Endpoint::send`] and [`Endpoint::shutdown`] take no time argument: their work runs at
//!   the next [`Endpoint::poll_transmit`] or [`Endpoint::handle_timeout`].
//! - Congestion control is RFC 9260 §7.2 (slow start, congestion avoidance, halving on fast
//!   retransmit, one MTU after T3-rtx).
//! - **What a peer can make us hold or send is bounded.** A shutdown we start ends within the
//!   T5-shutdown-guard ([`Config::shutdown_guard`], RFC 9260 §9.2). The reassembly and ordering
//!   buffers of all associations share [`Config::max_receive_buffer`]: out-of-order DATA may
//!   fill three quarters, DATA in order all of it, a whole message delivered at once always
//!   passes; what does not fit is dropped unacknowledged, or takes the place of the highest TSN
//!   held (reneging it, §6.2), and the advertised windows shrink with what is left. Messages
//!   reassembled at the same time must fit in it together (there is no partial delivery).
//!   Answers to out-of-the-blue packets share one token bucket ([`Config::ootb_answers`], §8.4).
//! - **What we send is what RFC 9260 stacks all take.** The INIT carries no Supported Address
//!   Types (its absence means every type, §3.3.2.1): pion/sctp does not implement it and, its
//!   high bits being `00`, drops an INIT carrying it. Nor would it tell a peer anything: the
//!   engine has no address family of its own (the driver's sockets have), and a peer address of
//!   another family than the primary path's is never used anyway. A multihomed INIT lists its
//!   addresses (IPv4/IPv6 Address parameters), which pion/sctp does not implement either: it
//!   drops that INIT, so a multihomed client cannot open an association with pion/sctp.
//!   Everything else we send (INIT-ACK, ALT-* parameters with high bits `10`, HEARTBEAT, ERROR
//!   causes) it takes.
//! - **Stream reset** (RFC 6525, [`Config::stream_reset`]): the Outgoing SSN Reset Request both
//!   ways, one request in flight at a time, retransmitted on the RTO against
//!   Association.Max.Retrans; a stream being reset takes no new message until the answer. The
//!   peer's other requests (Incoming SSN Reset, SSN/TSN Reset, Add Streams) are parsed and
//!   answered "Denied". Of a browser's INIT we read the Supported Extensions (0x8008) for
//!   RE-CONFIG (0x82) and FORWARD-TSN (0xC0) and leave I-DATA (0x40) unused, never announcing
//!   it; Zero Checksum Acceptable (0x8001, RFC 9653, high bits `10`) is skipped, so every packet
//!   carries its CRC32c.
//! - **Partial reliability** (PR-SCTP, RFC 3758, [`Config::partial_reliability`]): INIT and
//!   INIT-ACK carry Forward-TSN-Supported (0xC000) and list FORWARD-TSN (0xC0) in Supported
//!   Extensions; it is in use when the peer announced either too. Off, 0xC000 from a peer is
//!   reported back as unrecognised, which tells it we have no PR-SCTP (§3.3.1). Each outgoing
//!   stream has a [`Reliability`] ([`Endpoint::set_stream_reliability`]), taken by each message
//!   when it is queued. A message whose retransmissions or lifetime ran out is abandoned whole
//!   (§3.5 A3), leaves the flight size, and a FORWARD-TSN moves the peer past it, sent with the
//!   next packet after a SACK or a T3-rtx expiry and again until acknowledged. A message whose
//!   lifetime ran out before any of it was sent is dropped and its TSNs and SSN go to the
//!   messages after it (the effect of TR3's late TSN assignment), except while a stream reset
//!   request, which names our last TSN, is in flight. Lifetimes count from the first call that
//!   brings the time after [`Endpoint::send`]. An incoming FORWARD-TSN moves our cumulative TSN
//!   (at most as far ahead as we take DATA), drops the fragments below it, skips the listed SSNs
//!   and is answered by a SACK at once (§3.6).
//! - **SNAP** (draft-hancke-tsvwg-snap, [`Endpoint::snap_init`], [`Endpoint::connect_snap`]):
//!   each side's INIT travels in the SDP (`a=sctp-init`) and both open the association
//!   ESTABLISHED, with no handshake on the wire. Symmetric: no client, no server. The peer's
//!   INIT is validated ([`SnapError`]). An INIT that arrives on the wire all the same is
//!   answered as on any established association: with the peer's tag unchanged it joins the
//!   same association (RFC 9260 §5.2.4 case D), with another it restarts it (§5.2.2). The
//!   [`snap`] module lists the draft's rules.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod association;
mod cookie;
mod endpoint;
#[doc(hidden)]
pub mod fuzzing;
pub mod packet;
mod queue;
mod rto;
pub mod snap;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub use cookie::ALT_COOKIE_LEN;
pub use endpoint::Endpoint;
pub use fastshake_core::{Instant, Transmit};
pub use snap::{validate_snap_init, SnapError, SnapInit, MAX_SNAP_INIT_LEN};

/// The default UDP port of SCTP over UDP (RFC 6951).
pub const UDP_ENCAPSULATION_PORT: u16 = 9899;

/// Which handshakes an endpoint offers and accepts (the paper's sysctl values 0, 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandshakeMode {
    /// RFC 9260 only (paper's 0): ALT-* parameters are skipped as unknown.
    Regular,
    /// Both (paper's 1): a client announces ALT-COOKIE, a server answers ALT-COOKIE INITs the
    /// alternative way and all other INITs the regular way.
    Both,
    /// Alternative only (paper's 2): a server answers every INIT without a valid ALT-COOKIE with
    /// an ERROR carrying a cookie and never sends an INIT-ACK with a state cookie. A client in
    /// this mode behaves like `Both`.
    AltOnly,
}

impl HandshakeMode {
    /// Whether this mode speaks the alternative handshake at all.
    pub fn alt_enabled(self) -> bool {
        !matches!(self, HandshakeMode::Regular)
    }
}

/// Endpoint settings, shared by every association of the endpoint.
#[derive(Clone, Debug)]
pub struct Config {
    /// The local SCTP port (in the SCTP common header, not the UDP port).
    pub local_port: u16,
    /// Which handshakes are offered and accepted.
    pub mode: HandshakeMode,
    /// Server: an INIT with an empty ALT-COOKIE opens the association at once (protected
    /// environments only, e.g. SCTP inside DTLS). Nothing then proves the source address: a
    /// spoofed INIT opens an association, or restarts an existing one at that address and port.
    pub cookieless: bool,
    /// Accept associations (server role). An INIT to an endpoint that does not listen gets ABORT.
    pub listen: bool,
    /// Largest SCTP packet (common header and chunks) the endpoint sends.
    pub mtu: usize,
    /// Outbound streams requested.
    pub streams_out: u16,
    /// Inbound streams accepted.
    pub streams_in: u16,
    /// RTO.Initial (RFC 9260 §16: 1 s).
    pub rto_initial: Duration,
    /// RTO.Min.
    pub rto_min: Duration,
    /// RTO.Max.
    pub rto_max: Duration,
    /// Max.Init.Retransmits: INIT and COOKIE-ECHO retransmissions before giving up.
    pub max_init_retransmits: u32,
    /// Association.Max.Retrans: consecutive T3/heartbeat expiries before the association fails.
    pub max_retransmits: u32,
    /// Path.Max.Retrans: T3 expiries on the primary path after which data moves to another
    /// confirmed path of a multihomed peer.
    pub path_max_retransmits: u32,
    /// Valid.Cookie.Life of the regular state cookie.
    pub cookie_lifetime: Duration,
    /// Most associations held at once; INITs beyond it are answered with ABORT.
    pub max_associations: usize,
    /// Most associations accepted (server role) from one peer IP address, so that one host
    /// cannot take every slot of `max_associations`.
    pub max_associations_per_ip: usize,
    /// Advertised receiver window (bytes of reassembly and ordering buffer).
    pub receive_window: u32,
    /// Delay before a SACK is sent when only one packet is unacknowledged (RFC 9260: 200 ms).
    pub sack_delay: Duration,
    /// HB.interval: idle time before a path is probed with HEARTBEAT.
    pub heartbeat_interval: Duration,
    /// Server: accept DATA carried in an INIT's ALT-DATA parameter.
    pub accept_alt_data: bool,
    /// Further local addresses announced in INIT/INIT-ACK (multihoming). The address a packet
    /// arrives on is always a path; these are announced so the peer may use them too.
    pub extra_local_addresses: Vec<IpAddr>,
    /// Client: after an alternative handshake, fetch ALT-COOKIEs for the other paths by sending
    /// INITs over them (paper §III-F). Each cookie is reported as [`Event::AltCookie`].
    pub fetch_path_cookies: bool,
    /// T5-shutdown-guard: how long a shutdown we started may take before the association is
    /// aborted (RFC 9260 §9.2); `None` is the RFC's 5 × `rto_max`.
    pub shutdown_guard: Option<Duration>,
    /// Most bytes held in the reassembly and ordering buffers of all associations together.
    /// DATA that would go beyond it is dropped unacknowledged (the peer sends it again) and the
    /// advertised windows shrink with what is left (RFC 9260 §6.2). Out-of-order DATA may take
    /// three quarters of it; the rest is kept for DATA that arrives in order, which is what lets
    /// buffered data drain.
    pub max_receive_buffer: usize,
    /// Token bucket for the answers to out-of-the-blue packets (ABORT, SHUTDOWN-COMPLETE; RFC
    /// 9260 §8.4), so that a flood to a port without listener is not answered packet for packet;
    /// `None`: every such packet is answered.
    pub ootb_answers: Option<RateLimit>,
    /// Stream reset (RFC 6525, as WebRTC data channels close channels, RFC 8831 §6.7): INIT and
    /// INIT-ACK announce RE-CONFIG in a Supported Extensions parameter (RFC 5061 §4.2.7), the
    /// peer's requests are answered, and [`Endpoint::reset_streams`] works with a peer that
    /// announced it too. Off: no INIT or INIT-ACK changes by a byte, and a RE-CONFIG chunk is
    /// an unknown chunk (its high bits `10`: skipped silently).
    pub stream_reset: bool,
    /// Partial reliability (PR-SCTP, RFC 3758): INIT and INIT-ACK announce Forward-TSN-Supported
    /// and FORWARD-TSN in Supported Extensions, and with a peer that announced it too the
    /// [`Reliability`] of each outgoing stream ([`Endpoint::set_stream_reliability`]) is honoured
    /// and the peer's FORWARD-TSN chunks are taken. Off: no INIT or INIT-ACK changes by a byte,
    /// every message is reliable, and a FORWARD-TSN is an unknown chunk.
    pub partial_reliability: bool,
}

/// How long SCTP keeps trying to deliver a message (RFC 3758 §4, as WebRTC data channels ask
/// of it: RFC 8831 §6.1). Anything but `Reliable` needs partial reliability on both sides
/// ([`Config::partial_reliability`]); without it every message is reliable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Sent again until acknowledged.
    #[default]
    Reliable,
    /// Abandoned when it would be sent for the (n+1)th time: `MaxRetransmits(0)` is sent once.
    MaxRetransmits(u32),
    /// Abandoned when it would be sent or sent again this long after it was queued ("timed
    /// reliability", RFC 3758 §4.1).
    Lifetime(Duration),
}

/// A token bucket on the caller's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Tokens added per second.
    pub per_second: u32,
    /// Most tokens held, the largest burst.
    pub burst: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            local_port: 5000,
            mode: HandshakeMode::Both,
            cookieless: false,
            listen: false,
            mtu: 1200,
            streams_out: 16,
            streams_in: 16,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(60),
            max_init_retransmits: 8,
            max_retransmits: 10,
            path_max_retransmits: 5,
            cookie_lifetime: Duration::from_secs(60),
            max_associations: 1024,
            max_associations_per_ip: 128,
            receive_window: 256 * 1024,
            sack_delay: Duration::from_millis(200),
            heartbeat_interval: Duration::from_secs(30),
            accept_alt_data: true,
            extra_local_addresses: Vec::new(),
            fetch_path_cookies: true,
            shutdown_guard: None,
            max_receive_buffer: 64 * 1024 * 1024,
            // About what a host answers with ICMP errors (Linux: 1000/s, burst 50): enough for
            // every stale packet after a restart, nothing to reflect a flood with.
            ootb_answers: Some(RateLimit { per_second: 200, burst: 50 }),
            stream_reset: false,
            partial_reliability: false,
        }
    }
}

/// Identifies one association of an [`Endpoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AssociationHandle(pub u64);

/// Options for one outgoing association.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// Messages sent in the INIT's ALT-DATA parameter when the alternative handshake is on and
    /// they fit the MTU; otherwise (and whenever the server does not acknowledge them in an
    /// ALT-SACK) they go as regular DATA after the handshake. Never delivered twice.
    pub zero_rtt: Vec<Message>,
    /// An ALT-COOKIE from an earlier [`Event::AltCookie`] for this (local, server) pair.
    pub cached_cookie: Option<Vec<u8>>,
}

/// One user message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Stream identifier.
    pub stream: u16,
    /// Delivered as soon as complete, outside the stream's order.
    pub unordered: bool,
    /// Payload protocol identifier, opaque to SCTP.
    pub ppid: u32,
    /// The payload.
    pub data: Vec<u8>,
}

/// Which handshake opened an association.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandshakeKind {
    /// INIT, INIT-ACK with state cookie, COOKIE-ECHO, COOKIE-ACK.
    Regular,
    /// INIT, ERROR with ALT-COOKIE, INIT with the cookie, INIT-ACK.
    AltCookie,
    /// INIT with a cached ALT-COOKIE, INIT-ACK: one round trip.
    AltCached,
    /// INIT with an empty ALT-COOKIE accepted by a cookieless server, INIT-ACK.
    Cookieless,
    /// SNAP (draft-hancke-tsvwg-snap): both INITs went out of band ([`Endpoint::connect_snap`]);
    /// nothing of the handshake went on the wire.
    Snap,
}

/// Something that happened on an association.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The association is open.
    Connected {
        /// The handshake that opened it.
        handshake: HandshakeKind,
        /// Request/response exchanges this side took to open it, retransmissions not counted
        /// (client: regular 2, alt with cookie exchange 2, cached or cookieless 1; server:
        /// regular 1, alt 0; SNAP: 0 on both sides).
        round_trips: u32,
        /// Client: zero-RTT messages the server acknowledged in its ALT-SACK. Server: zero-RTT
        /// messages taken from the INIT's ALT-DATA.
        zero_rtt_accepted: usize,
    },
    /// A complete user message arrived.
    Message(Message),
    /// A server handed out an ALT-COOKIE for the path (`local`, `server`); cache it and pass it
    /// back through [`ConnectOptions::cached_cookie`].
    AltCookie {
        /// The server's UDP address.
        server: SocketAddr,
        /// The local address the cookie is valid from (`None` if the caller did not say).
        local: Option<SocketAddr>,
        /// The cookie.
        cookie: Vec<u8>,
    },
    /// The association was shut down gracefully.
    Closed,
    /// The peer (or the local user) aborted the association.
    Aborted {
        /// Why, as far as the ABORT told.
        reason: String,
    },
    /// The association failed (no answer, too many retransmissions, ...).
    Failed(Error),
    /// The peer reset its outgoing streams (RFC 6525 §5.2.2): our incoming streams with these
    /// numbers start again at stream sequence number 0, every message sent before the reset
    /// having been delivered first. For a WebRTC data channel, the remote closed the channel
    /// on each stream (RFC 8831 §6.7).
    IncomingStreamsReset {
        /// The streams, in the order the peer listed them (every incoming stream when it
        /// listed none).
        streams: Vec<u16>,
    },
    /// Our [`Endpoint::reset_streams`] request was answered (RFC 6525 §5.1.2). The streams
    /// accept messages again.
    OutgoingStreamsReset {
        /// The streams the request carried.
        streams: Vec<u16>,
        /// The peer performed the reset: their next message goes with stream sequence number
        /// 0. Otherwise it refused ("Denied" or an error result) and the numbering goes on.
        performed: bool,
    },
}

/// What can go wrong with an association or a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No association has this handle (never had, or it is gone).
    #[error("unknown association")]
    UnknownAssociation,
    /// The stream is not below the negotiated number of outbound streams.
    #[error("invalid stream {0}")]
    InvalidStream(u16),
    /// The association is shutting down or closed; no new data is accepted.
    #[error("association is closing")]
    Closing,
    /// SCTP carries no empty user messages.
    #[error("empty message")]
    EmptyMessage,
    /// The send queue is full.
    #[error("send buffer full")]
    SendBufferFull,
    /// INIT or COOKIE-ECHO went unanswered `max_init_retransmits` times.
    #[error("handshake timed out")]
    HandshakeTimeout,
    /// DATA or HEARTBEAT went unanswered `max_retransmits` times.
    #[error("peer unreachable: retransmission limit reached")]
    RetransmitLimit,
    /// The endpoint holds `max_associations` associations already.
    #[error("too many associations")]
    TooManyAssociations,
    /// The stream is being reset ([`Endpoint::reset_streams`]): it takes no message until the
    /// peer answered ([`Event::OutgoingStreamsReset`]).
    #[error("stream {0} is being reset")]
    StreamResetPending(u16),
    /// Stream reset is not negotiated on the association: [`Config::stream_reset`] is off, the
    /// peer did not announce RE-CONFIG in its INIT or INIT-ACK, or the association is not open
    /// yet (RFC 6525 §5.1.1).
    #[error("stream reset not negotiated with the peer")]
    StreamResetUnsupported,
    /// The peer answered with an ERROR the association cannot continue after.
    #[error("peer error: {0}")]
    PeerError(String),
    /// [`Endpoint::connect_snap`] opened nothing: the peer's INIT is invalid, or the call is.
    #[error("SNAP: {0}")]
    Snap(#[from] SnapError),
}

/// Where an association is in its life (RFC 9260 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AssociationState {
    /// INIT sent, waiting for INIT-ACK (or ERROR with an ALT-COOKIE).
    CookieWait,
    /// COOKIE-ECHO sent, waiting for COOKIE-ACK.
    CookieEchoed,
    /// Open.
    Established,
    /// The user asked for shutdown; outstanding data is still being acknowledged.
    ShutdownPending,
    /// SHUTDOWN sent.
    ShutdownSent,
    /// SHUTDOWN received; outstanding data is still being acknowledged.
    ShutdownReceived,
    /// SHUTDOWN-ACK sent.
    ShutdownAckSent,
    /// Gone (closed, aborted or failed).
    Closed,
}

/// Counters of one association.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AssociationStats {
    /// SCTP packets sent / received on this association.
    pub packets_out: u64,
    /// See `packets_out`.
    pub packets_in: u64,
    /// SCTP bytes (common header included) sent / received.
    pub bytes_out: u64,
    /// See `bytes_out`.
    pub bytes_in: u64,
    /// DATA chunks sent again (T3-rtx, fast retransmit, zero-RTT data not acknowledged).
    pub retransmitted_chunks: u64,
    /// Fast retransmit events.
    pub fast_retransmits: u64,
    /// T3-rtx expiries.
    pub t3_expiries: u64,
    /// Duplicate TSNs received.
    pub duplicate_tsns: u64,
    /// User messages delivered / sent.
    pub messages_in: u64,
    /// See `messages_in`.
    pub messages_out: u64,
    /// INIT and COOKIE-ECHO sent again because T1 expired.
    pub handshake_retransmits: u64,
    /// SHUTDOWN and SHUTDOWN-ACK sent again because T2 expired.
    pub shutdown_retransmits: u64,
    /// DATA chunks dropped unacknowledged: no room (window or endpoint cap), or a TSN too far
    /// ahead of the cumulative one. The peer sends them again.
    pub data_dropped: u64,
    /// Messages abandoned by partial reliability (RFC 3758): after a transmission, or before
    /// any (their lifetime ran out while queued).
    pub abandoned_messages: u64,
    /// FORWARD-TSN chunks sent / received.
    pub forward_tsns_out: u64,
    /// See `forward_tsns_out`.
    pub forward_tsns_in: u64,
}

/// A snapshot of one association.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssociationInfo {
    /// State.
    pub state: AssociationState,
    /// Which handshake opened it (`None` while still opening).
    pub handshake: Option<HandshakeKind>,
    /// Whether this side initiated it (both sides of a SNAP association did).
    pub is_client: bool,
    /// Primary peer address (UDP, with the peer's encapsulation port).
    pub remote: SocketAddr,
    /// All peer addresses known (multihoming).
    pub remote_addresses: Vec<SocketAddr>,
    /// Peer's SCTP port.
    pub remote_port: u16,
    /// Our verification tag (the peer's Initiate Tag in the other direction).
    pub local_tag: u32,
    /// The peer's verification tag.
    pub peer_tag: u32,
    /// Negotiated outbound / inbound streams.
    pub streams_out: u16,
    /// See `streams_out`.
    pub streams_in: u16,
    /// Both sides announced partial reliability (RFC 3758): stream [`Reliability`] is honoured.
    pub partial_reliability: bool,
    /// Bytes of DATA sent and neither acknowledged, marked for retransmission nor abandoned
    /// (the flight size of RFC 9260 §6.1).
    pub flight_size: usize,
    /// Smoothed RTT, once measured.
    pub srtt: Option<std::time::Duration>,
    /// Current retransmission timeout.
    pub rto: std::time::Duration,
    /// Counters.
    pub stats: AssociationStats,
}

/// Counters of the endpoint as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams received / sent.
    pub datagrams_in: u64,
    /// See `datagrams_in`.
    pub datagrams_out: u64,
    /// Bytes received / sent (UDP payloads).
    pub bytes_in: u64,
    /// See `bytes_in`.
    pub bytes_out: u64,
    /// Datagrams dropped as malformed (bad checksum, truncated, ...).
    pub malformed: u64,
    /// INIT chunks received.
    pub inits_received: u64,
    /// INIT-ACKs sent (with a state cookie or alternative).
    pub init_acks_sent: u64,
    /// ERROR chunks with an ALT-COOKIE sent.
    pub alt_cookie_errors_sent: u64,
    /// ABORTs sent.
    pub aborts_sent: u64,
    /// Associations opened (either role).
    pub associations_opened: u64,
    /// State cookies or ALT-COOKIEs that failed verification.
    pub bad_cookies: u64,
    /// Answers to out-of-the-blue packets not sent because of [`Config::ootb_answers`].
    pub ootb_answers_suppressed: u64,
    /// Bytes held now in the reassembly and ordering buffers of all associations.
    pub receive_buffered: u64,
    /// The most `receive_buffered` has been.
    pub receive_buffered_peak: u64,
}
