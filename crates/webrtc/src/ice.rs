//! An ICE-lite agent (RFC 8445 §2.5, §6.2, §7.3, §7.3.2, §8.2) for a data-channel server.
//!
//! The browser offers and is a full agent, so it is controlling; we answer with `a=ice-lite`,
//! host candidates only, and are controlled (RFC 8445 §6.1.1). A lite agent sends no checks: it
//! answers the browser's Binding requests, learns from them which remote addresses work and which
//! one the browser nominates, and infers the browser's consent from the checks it keeps sending
//! (RFC 7675). Everything is sans-IO: datagrams and [`Instant`]s in, responses and events out.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use fastshake_core::Instant;

use crate::stun::{attr, error_code, Class, IntegrityKey, Message, MessageBuilder, Method, TransactionId};

/// The 64 ice-chars: ALPHA / DIGIT / "+" / "/" (RFC 8839 §5.4).
const ICE_CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Whether `byte` is an ice-char (RFC 8839 §5.4).
pub fn is_ice_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'+' || byte == b'/'
}

/// A username fragment or password that RFC 8839 §5.4 does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// ice-ufrag is 4 to 256 ice-chars.
    #[error("a ufrag of {0} characters is outside 4..=256")]
    UfragLength(usize),
    /// ice-pwd is 22 to 256 ice-chars.
    #[error("a password of {0} characters is outside 22..=256")]
    PwdLength(usize),
    /// Only ice-chars are allowed (so no ':' can split a USERNAME wrongly).
    #[error("a character that is not an ice-char")]
    NotIceChar,
}

fn check_ice_chars(text: &str) -> Result<(), CredentialsError> {
    if text.bytes().all(is_ice_char) {
        Ok(())
    } else {
        Err(CredentialsError::NotIceChar)
    }
}

/// Checks a ufrag against RFC 8839 §5.4: 4 to 256 ice-chars.
pub fn validate_ufrag(ufrag: &str) -> Result<(), CredentialsError> {
    if !(4..=256).contains(&ufrag.len()) {
        return Err(CredentialsError::UfragLength(ufrag.len()));
    }
    check_ice_chars(ufrag)
}

/// Checks a password against RFC 8839 §5.4: 22 to 256 ice-chars.
pub fn validate_pwd(pwd: &str) -> Result<(), CredentialsError> {
    if !(22..=256).contains(&pwd.len()) {
        return Err(CredentialsError::PwdLength(pwd.len()));
    }
    check_ice_chars(pwd)
}

/// Our ICE username fragment and password, for the answer's `a=ice-ufrag` and `a=ice-pwd`.
///
/// The password keys MESSAGE-INTEGRITY; [`fmt::Debug`] does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    ufrag: String,
    pwd: String,
}

impl Credentials {
    /// Characters of a generated ufrag: 48 random bits, over the 24 RFC 8445 §5.3 asks for.
    pub const UFRAG_LEN: usize = 8;
    /// Characters of a generated password: 144 random bits, over the 128 RFC 8445 §5.3 asks for.
    pub const PWD_LEN: usize = 24;
    /// Random bytes [`Credentials::from_random`] takes: one per character.
    pub const RANDOM_LEN: usize = Self::UFRAG_LEN + Self::PWD_LEN;

    /// Credentials drawn from `random`, which must come from a cryptographically secure source.
    /// Each byte gives one ice-char from its low 6 bits (64 ice-chars, so the draw is uniform).
    pub fn from_random(random: &[u8; Self::RANDOM_LEN]) -> Credentials {
        let to_ice_chars = |bytes: &[u8]| -> String {
            bytes.iter().map(|&byte| char::from(ICE_CHARS[usize::from(byte & 0x3F)])).collect()
        };
        let (ufrag, pwd) = random.split_at(Self::UFRAG_LEN);
        Credentials { ufrag: to_ice_chars(ufrag), pwd: to_ice_chars(pwd) }
    }

    /// Credentials from given strings, checked against RFC 8839 §5.4.
    pub fn new(ufrag: &str, pwd: &str) -> Result<Credentials, CredentialsError> {
        validate_ufrag(ufrag)?;
        validate_pwd(pwd)?;
        Ok(Credentials { ufrag: ufrag.to_owned(), pwd: pwd.to_owned() })
    }

    /// The username fragment.
    pub fn ufrag(&self) -> &str {
        &self.ufrag
    }

    /// The password.
    pub fn pwd(&self) -> &str {
        &self.pwd
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").field("ufrag", &self.ufrag).finish_non_exhaustive()
    }
}

/// What the agent learned; see [`IceLiteAgent::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IceEvent {
    /// A first authenticated check from this address was answered with success. The browser
    /// now holds a valid pair towards it (RFC 8445 §7.2.5.3.2) and may send DTLS on it (§12.1),
    /// so [`IceLiteAgent::may_receive_from`] accepts it; sending to it waits for nomination.
    CheckSucceeded(SocketAddr),
    /// The browser nominated the pair to this address, which is now the selected pair and the
    /// only address DTLS may be sent to (RFC 8445 §7.3.2, §8.2, §12.1).
    Selected(SocketAddr),
    /// No authenticated check came from the selected address for
    /// [`IceLiteAgent::CONSENT_TIMEOUT`]: nothing may be sent any more (RFC 7675 §5.1).
    ConsentExpired,
}

/// A remote address that passed an authenticated check.
#[derive(Clone, Copy, Debug)]
struct CheckedAddress {
    address: SocketAddr,
    last_check: Instant,
}

/// The ICE-lite, controlled side of one ICE session (one data stream, one component: data
/// channels are bundled and RTCP-muxed).
///
/// # When DTLS may flow
///
/// *Receiving*: the browser, a full agent, may send data on any of its valid pairs before it
/// selects one (RFC 8445 §12.1), and a pair becomes valid for it when our success response
/// arrives (§7.2.5.3.2). So its ClientHello can come from any address we answered with
/// success; [`Self::may_receive_from`] accepts exactly those.
///
/// *Sending*: "A lite implementation MUST NOT send data until it has a valid list that contains
/// a candidate pair for each component" (RFC 8445 §12.1.1), and a lite agent's valid list gains
/// a pair only when it accepts a Binding request with USE-CANDIDATE, which also sets the
/// pair's nominated flag (§7.3.2). A lite agent sends no checks, so it never builds valid pairs
/// the way a full agent does (§7.2.5.3.2), and "send on any valid pair before selection"
/// (§12.1) gives it nothing earlier. The earliest moment is therefore the accepted nomination:
/// once [`Self::handle`] has returned the response to that check, [`Self::may_send_to`] holds
/// for its address and the answer to a ClientHello received before may go out. From then on
/// only the selected pair may carry data (§12.1).
///
/// # Consent
///
/// "An ICE-lite agent does not generate consent checks and will only respond to any checks
/// that it receives" (RFC 7675 §1). The browser keeps consent to send to us by checking the
/// selected pair every 4–6 s (§5.1); each authenticated check from the selected address shows
/// that the browser is there, still uses that pair, and knows our password. When none has come
/// for 30 s, the browser's own consent has expired (its checks went unanswered for 30 s) or it
/// is gone, so we stop sending too, as §5.1 requires of a sender whose consent expired. Consent
/// lost is final for these credentials (§5.1, last paragraph): [`IceEvent::ConsentExpired`]
/// comes once, and afterwards the agent answers nothing and allows nothing; an ICE restart means
/// new credentials and a new agent. Binding indications do not refresh consent: they carry no
/// authentication (RFC 8445 §11), so anyone could forge them.
///
/// # Bounded state
///
/// At most [`Self::MAX_REMOTE_ADDRESSES`] remote addresses are remembered, and only addresses
/// that authenticated with our password enter; past the bound the one checked least recently
/// (never the selected one) makes room. The event queue is bounded too.
pub struct IceLiteAgent {
    local: Credentials,
    key: IntegrityKey,
    /// "OUR-UFRAG:THEIR-UFRAG", the USERNAME of every check the browser sends (RFC 8445 §7.2.2).
    expected_username: String,
    checked: Vec<CheckedAddress>,
    selected: Option<SocketAddr>,
    consent_deadline: Option<Instant>,
    consent_expired: bool,
    events: VecDeque<IceEvent>,
}

impl fmt::Debug for IceLiteAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IceLiteAgent")
            .field("local", &self.local)
            .field("checked", &self.checked)
            .field("selected", &self.selected)
            .field("consent_deadline", &self.consent_deadline)
            .field("consent_expired", &self.consent_expired)
            .finish_non_exhaustive()
    }
}

/// What a Binding request gets, before it is encoded.
enum Answer {
    Success,
    /// 400, 401: the request did not authenticate, so the answer carries no MESSAGE-INTEGRITY
    /// (RFC 8489 §9.1.3).
    Unauthenticated(u16, &'static str),
    /// 420, 487: the request authenticated, so the answer carries MESSAGE-INTEGRITY under our
    /// password (RFC 8489 §9.1.3).
    Authenticated {
        code: u16,
        reason: &'static str,
        unknown: Vec<u16>,
    },
}

impl IceLiteAgent {
    /// Remote addresses remembered at most. A browser checks from one address per candidate it
    /// gathered (host addresses per interface and family, server-reflexive, relayed per TURN
    /// server) paired with our few host candidates: a handful in practice. Sixteen leaves room
    /// for multi-homed hosts while a peer that knows the password cannot grow our memory.
    pub const MAX_REMOTE_ADDRESSES: usize = 16;
    /// RFC 7675 §5.1's consent expiry.
    pub const CONSENT_TIMEOUT: Duration = Duration::from_secs(30);
    /// Events kept for [`Self::poll_event`] at most; past it, [`IceEvent::CheckSucceeded`]
    /// notices are dropped (the state behind them stays queryable).
    pub const MAX_QUEUED_EVENTS: usize = 2 * Self::MAX_REMOTE_ADDRESSES;
    /// UNKNOWN-ATTRIBUTES lists at most this many types, so a 420 stays smaller than the
    /// request it answers.
    const MAX_UNKNOWN_LISTED: usize = 16;

    /// An agent answering checks for `local`, from the peer whose offer gave `remote_ufrag`.
    ///
    /// The remote password is not taken: it keys only requests the peer *receives* (RFC 8445
    /// §7.2.2), and a lite agent sends none (§2.5), neither checks nor consent checks (RFC 7675
    /// §1); responses are keyed with our own password (RFC 8489 §9.1.3). Holding a secret that
    /// is never used only adds to what a memory leak could reveal.
    ///
    /// The remote ufrag is checked in every USERNAME. RFC 8445 §7.3 requires only the part
    /// before the colon to match, because a full agent may see checks before the answer tells it
    /// the peer's ufrag; an answerer knows it from the offer before any check, and a check
    /// naming another remote ufrag belongs to another session (a forked or restarted one), whose
    /// checks must not validate or nominate pairs here.
    pub fn new(local: Credentials, remote_ufrag: &str) -> Result<IceLiteAgent, CredentialsError> {
        validate_ufrag(remote_ufrag)?;
        let key = IntegrityKey::short_term(local.pwd());
        let expected_username = format!("{}:{}", local.ufrag(), remote_ufrag);
        Ok(IceLiteAgent {
            local,
            key,
            expected_username,
            checked: Vec::with_capacity(Self::MAX_REMOTE_ADDRESSES),
            selected: None,
            consent_deadline: None,
            consent_expired: false,
            events: VecDeque::new(),
        })
    }

    /// Our credentials, for the answer.
    pub fn local_credentials(&self) -> &Credentials {
        &self.local
    }

    /// Handles a STUN datagram from `from` and returns the response to send back to `from`.
    ///
    /// - A Binding request with USERNAME "OUR-UFRAG:THEIR-UFRAG", MESSAGE-INTEGRITY under our
    ///   password and a correct FINGERPRINT gets a success response with XOR-MAPPED-ADDRESS =
    ///   `from`, MESSAGE-INTEGRITY and FINGERPRINT (RFC 8445 §7.3, RFC 8489 §9.1.3); with
    ///   USE-CANDIDATE it also nominates and selects `from` (§7.3.2, §8.2).
    /// - No USERNAME or no MESSAGE-INTEGRITY: 400. Another USERNAME or a MESSAGE-INTEGRITY that
    ///   does not verify: 401. Both without MESSAGE-INTEGRITY (RFC 8489 §9.1.3).
    /// - Authenticated but with comprehension-required attributes we do not understand: 420
    ///   with UNKNOWN-ATTRIBUTES (RFC 8489 §6.3.1).
    /// - Authenticated but with ICE-CONTROLLED: 487 (see [`Self::role_conflict`]).
    /// - Not STUN, a missing or wrong FINGERPRINT (RFC 8489 §7.3, RFC 8445 §7.3 requires it),
    ///   responses (we send no requests), other methods, and Binding indications (keepalives,
    ///   RFC 8445 §11): no answer and no change.
    ///
    /// After consent expired nothing is answered.
    pub fn handle(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
        // A deadline that passed before this datagram counts first, whatever the driver's timer.
        self.handle_timeout(now);
        if self.consent_expired {
            return None;
        }
        let request = Message::parse(datagram).ok()?;
        request.verify_fingerprint().ok()?;
        if request.class() != Class::Request || request.method() != Method::Binding {
            return None;
        }
        let answer = self.judge(&request);
        if let Answer::Success = answer {
            self.record_check(now, from, request.use_candidate());
        }
        self.encode(&request, from, answer)
    }

    /// The checks of RFC 8489 §9.1.3 in its order, then §6.3.1's, then ICE's.
    fn judge(&self, request: &Message<'_>) -> Answer {
        let Some(username) = request.attribute(attr::USERNAME) else {
            return Answer::Unauthenticated(error_code::BAD_REQUEST, "Bad Request");
        };
        if request.message_integrity().is_none() {
            return Answer::Unauthenticated(error_code::BAD_REQUEST, "Bad Request");
        }
        if username != self.expected_username.as_bytes() || request.verify_integrity(&self.key).is_err() {
            return Answer::Unauthenticated(error_code::UNAUTHENTICATED, "Unauthenticated");
        }
        let mut unknown = Vec::new();
        for kind in request.unknown_comprehension_required() {
            if !unknown.contains(&kind) && unknown.len() < Self::MAX_UNKNOWN_LISTED {
                unknown.push(kind);
            }
        }
        if !unknown.is_empty() {
            return Answer::Authenticated {
                code: error_code::UNKNOWN_ATTRIBUTE,
                reason: "Unknown Attribute",
                unknown,
            };
        }
        if Self::role_conflict(request) {
            return Answer::Authenticated {
                code: error_code::ROLE_CONFLICT,
                reason: "Role Conflict",
                unknown,
            };
        }
        Answer::Success
    }

    /// Whether a check conflicts with our controlled role (RFC 8445 §7.3.1.1).
    ///
    /// The rule that applies is "agent in the controlled role, ICE-CONTROLLED present": with a
    /// tiebreaker at least the peer's we would switch to controlling, otherwise answer 487 and
    /// keep our role. A lite agent facing a full one MUST be controlled (§6.1.1), so it can only
    /// ever take the second branch: any check with ICE-CONTROLLED gets 487. ICE-CONTROLLING is
    /// no conflict.
    fn role_conflict(request: &Message<'_>) -> bool {
        request.attribute(attr::ICE_CONTROLLED).is_some()
    }

    fn encode(&self, request: &Message<'_>, from: SocketAddr, answer: Answer) -> Option<Vec<u8>> {
        let transaction_id: TransactionId = request.transaction_id();
        let message = match answer {
            Answer::Success => MessageBuilder::new(Class::SuccessResponse, Method::Binding, transaction_id)
                // A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d; the peer sent
                // from, and expects to see, the IPv4 address.
                .xor_mapped_address(SocketAddr::new(from.ip().to_canonical(), from.port()))
                .message_integrity(&self.key),
            Answer::Unauthenticated(code, reason) => {
                MessageBuilder::new(Class::ErrorResponse, Method::Binding, transaction_id)
                    .error_code(code, reason)
            }
            Answer::Authenticated { code, reason, unknown } => {
                let builder = MessageBuilder::new(Class::ErrorResponse, Method::Binding, transaction_id)
                    .error_code(code, reason);
                let builder = if unknown.is_empty() { builder } else { builder.unknown_attributes(&unknown) };
                builder.message_integrity(&self.key)
            }
        };
        message.fingerprint().into_bytes().ok()
    }

    /// Records a check that got a success response.
    fn record_check(&mut self, now: Instant, from: SocketAddr, nominates: bool) {
        if let Some(known) = self.checked.iter_mut().find(|checked| checked.address == from) {
            known.last_check = now;
        } else {
            if self.checked.len() >= Self::MAX_REMOTE_ADDRESSES {
                let selected = self.selected;
                let stalest = self
                    .checked
                    .iter()
                    .enumerate()
                    .filter(|(_, checked)| Some(checked.address) != selected)
                    .min_by_key(|(_, checked)| checked.last_check)
                    .map(|(index, _)| index);
                let Some(stalest) = stalest else { return };
                self.checked.swap_remove(stalest);
            }
            self.checked.push(CheckedAddress { address: from, last_check: now });
            self.push_event(IceEvent::CheckSucceeded(from));
        }
        // Regular nomination (RFC 8445 §8.1.1): the browser nominates one pair; if it later
        // nominates another (after a network change, or an RFC 5245 agent's aggressive
        // nomination), the choice is the controlling agent's (§8.1) and we follow the latest,
        // which is a pair the browser has just validated and uses.
        if nominates && self.selected != Some(from) {
            self.selected = Some(from);
            self.push_event(IceEvent::Selected(from));
        }
        if self.selected == Some(from) {
            self.consent_deadline = Some(now + Self::CONSENT_TIMEOUT);
        }
    }

    fn push_event(&mut self, event: IceEvent) {
        match event {
            // Only the latest selection matters to a caller that has not polled yet.
            IceEvent::Selected(_) => self.events.retain(|queued| !matches!(queued, IceEvent::Selected(_))),
            IceEvent::CheckSucceeded(_) if self.events.len() >= Self::MAX_QUEUED_EVENTS => return,
            _ => {}
        }
        self.events.push_back(event);
    }

    /// The next event, oldest first. A [`IceEvent::Selected`] not yet polled is replaced by a
    /// later one: only the current selection matters.
    pub fn poll_event(&mut self) -> Option<IceEvent> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] must be called: the consent deadline of the selected pair.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.consent_expired {
            None
        } else {
            self.consent_deadline
        }
    }

    /// Expires consent if its deadline has passed at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.consent_expired {
            return;
        }
        if self.consent_deadline.is_some_and(|deadline| now >= deadline) {
            self.consent_expired = true;
            self.events.push_back(IceEvent::ConsentExpired);
        }
    }

    /// The selected pair's remote address: the one the browser nominated last.
    pub fn selected(&self) -> Option<SocketAddr> {
        self.selected
    }

    /// Whether DTLS may be sent to `address` now: it is the selected pair's (nominated) address
    /// and consent has not expired. No earlier for a lite agent: RFC 8445 §12.1.1 with §7.3.2,
    /// as the type's documentation explains.
    pub fn may_send_to(&self, address: SocketAddr) -> bool {
        !self.consent_expired && self.selected == Some(address)
    }

    /// Whether DTLS from `address` may be accepted now: it passed an authenticated check (so the
    /// browser may send on it, RFC 8445 §12.1) and consent has not expired.
    pub fn may_receive_from(&self, address: SocketAddr) -> bool {
        !self.consent_expired && self.checked.iter().any(|checked| checked.address == address)
    }

    /// Whether consent expired; the agent is then finished.
    pub fn is_consent_expired(&self) -> bool {
        self.consent_expired
    }

    /// The remote addresses that passed an authenticated check and are remembered.
    pub fn checked_addresses(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.checked.iter().map(|checked| checked.address)
    }
}

/// The fuzz target's body: `data` as a datagram to a fresh agent with fixed credentials, then,
/// if it parses as STUN, its attributes under the agent's USERNAME and resealed with its
/// password (so the steps past authentication run too), then the consent timer. Must not panic.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let local = Credentials::from_random(&[7; Credentials::RANDOM_LEN]);
    let key = IntegrityKey::short_term(local.pwd());
    let username = format!("{}:fuzzRemote", local.ufrag());
    let Ok(mut agent) = IceLiteAgent::new(local, "fuzzRemote") else { return };
    let from = SocketAddr::from(([192, 0, 2, 1], 50_000));
    let now = Instant::from_millis(1);
    let _ = agent.handle(now, from, data);
    if let Ok(message) = Message::parse(data) {
        let resealed = message
            .attributes()
            .filter(|attribute| attribute.kind != attr::USERNAME)
            .fold(
                MessageBuilder::new(message.class(), message.method(), message.transaction_id())
                    .username(&username),
                |builder, attribute| builder.attribute(attribute.kind, attribute.value),
            )
            .message_integrity(&key)
            .fingerprint()
            .into_bytes();
        if let Ok(resealed) = resealed {
            let _ = agent.handle(now, from, &resealed);
        }
    }
    while agent.poll_event().is_some() {}
    let _ = (agent.may_send_to(from), agent.may_receive_from(from), agent.poll_timeout());
    agent.handle_timeout(now + IceLiteAgent::CONSENT_TIMEOUT);
    let _ = agent.poll_event();
}
