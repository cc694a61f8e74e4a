//! The answerer's ICE agent for a data-channel server, ICE-lite (RFC 8445 §2.5, §6.2, §7.3,
//! §7.3.2, §8.2) or full and controlled (§6.1, §7.2, §7.3.1.4, §7.3.1.5, §12.1).
//!
//! The browser offers and is a full agent, so it is controlling and we are controlled (RFC 8445
//! §6.1.1); we gather host candidates only. In [`IceMode::Lite`] we answer with `a=ice-lite`
//! and send no checks: the agent answers the browser's Binding requests, learns from them which
//! remote addresses work and which one the browser nominates, and infers the browser's consent
//! from the checks it keeps sending (RFC 7675). In [`IceMode::Full`] it also sends a triggered
//! check back to every address the browser checks from, so that a pair becomes valid for us too
//! and data may flow on it before the browser nominates (§12.1), and it keeps its own consent
//! with consent checks (RFC 7675 §5.1). Everything is sans-IO: datagrams and [`Instant`]s in,
//! responses, checks and events out; randomness comes from the caller.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use fastshake_core::Instant;
use ring::hmac;

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

/// Which kind of ICE agent answers (RFC 8445 §2.5): what the answer announces (`a=ice-lite`
/// or not, RFC 8839 §5.3) and what the agent does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IceMode {
    /// ICE-lite: answers checks and sends none; our data waits for the browser's nomination
    /// (RFC 8445 §12.1.1). What the project's answers have always been, so the default.
    #[default]
    Lite,
    /// Full and controlled: also checks every address the browser checks from (triggered
    /// checks, RFC 8445 §7.3.1.4), and may send data on a pair as soon as that check succeeded,
    /// before the browser nominates (§12.1). With Chromium, which nominates one ping interval
    /// (about 48 ms) after its first check succeeds, data starts that much sooner.
    Full,
}

/// What only a full agent needs (see [`IceAgent::full`]): the browser's password, which keys
/// the checks we send (RFC 8445 §7.2.2), and the caller's randomness for our tiebreaker (§7.1.3)
/// and the checks' transaction ids (RFC 8489 §5 wants them cryptographically random).
///
/// [`fmt::Debug`] prints neither the password nor the key.
#[derive(Clone)]
pub struct FullConfig {
    remote_pwd: String,
    tiebreaker: u64,
    /// Keys HMAC-SHA256 as a pseudo-random function: tiebreaker, transaction ids, jitter.
    prf: hmac::Key,
}

impl FullConfig {
    /// Random bytes [`FullConfig::new`] takes.
    pub const RANDOM_LEN: usize = 32;

    /// The full agent's parameters: `remote_pwd` is the offer's `a=ice-pwd`, checked against
    /// RFC 8839 §5.4; `random` must come from a cryptographically secure source. It keys
    /// HMAC-SHA256, whose outputs under distinct labels give the tiebreaker and every
    /// transaction id, so none can be predicted from another.
    pub fn new(remote_pwd: &str, random: &[u8; Self::RANDOM_LEN]) -> Result<FullConfig, CredentialsError> {
        validate_pwd(remote_pwd)?;
        let prf = hmac::Key::new(hmac::HMAC_SHA256, random);
        let tag = hmac::sign(&prf, b"fastshake ice tiebreaker");
        let mut tiebreaker = [0u8; 8];
        tiebreaker.copy_from_slice(&tag.as_ref()[..8]);
        Ok(FullConfig { remote_pwd: remote_pwd.to_owned(), tiebreaker: u64::from_be_bytes(tiebreaker), prf })
    }

    /// Our tiebreaker, sent in ICE-CONTROLLED (RFC 8445 §7.1.3).
    pub fn tiebreaker(&self) -> u64 {
        self.tiebreaker
    }
}

impl fmt::Debug for FullConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FullConfig").field("tiebreaker", &self.tiebreaker).finish_non_exhaustive()
    }
}

/// What the agent learned; see [`IceAgent::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IceEvent {
    /// A first authenticated check from this address was answered with success. The browser
    /// now holds a valid pair towards it (RFC 8445 §7.2.5.3.2) and may send DTLS on it (§12.1),
    /// so [`IceAgent::may_receive_from`] accepts it. A lite agent's sending waits for
    /// nomination; a full one's for [`IceEvent::PairValid`].
    CheckSucceeded(SocketAddr),
    /// Full mode: our own check to this address succeeded, so the pair is valid for us too
    /// (RFC 8445 §7.2.5.3.2) and, until a pair is selected, data may be sent to it (§12.1).
    PairValid(SocketAddr),
    /// The browser nominated the pair to this address, which is now the selected pair and the
    /// only address DTLS may be sent to (RFC 8445 §7.3.2, §8.2, §12.1). In full mode a pair is
    /// selected once it is both nominated and valid (§7.3.1.5), whichever came last.
    Selected(SocketAddr),
    /// Consent to send on the selected pair expired ([`IceAgent::CONSENT_TIMEOUT`]): nothing
    /// may be sent any more (RFC 7675 §5.1).
    ConsentExpired,
}

/// Full mode: the state of our check of the pair towards one remote address (RFC 8445 §6.1.2.6,
/// with "Frozen" left out: every pair has its own foundation, so none waits for another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PairCheck {
    /// Lite mode: we never check.
    NotChecked,
    /// In the triggered-check queue (§7.3.1.4).
    Waiting,
    /// Sent `sent` times under `transaction`; the next retransmission (or, after the last, the
    /// failure) is due at `next` (RFC 8489 §6.2.1).
    InProgress { transaction: TransactionId, sent: u32, next: Instant },
    /// Answered with an authenticated success response: the pair is valid (§7.2.5.3.2).
    /// `last_response` is the latest such response, a check's or a consent check's.
    Succeeded { valid_since: Instant, last_response: Instant },
    /// Timed out or refused (§7.2.5.2.4); a new check from the browser re-triggers it
    /// (§7.3.1.4).
    Failed,
}

/// A remote address that passed an authenticated check.
#[derive(Clone, Copy, Debug)]
struct CheckedAddress {
    address: SocketAddr,
    last_check: Instant,
    ours: PairCheck,
}

/// What only a full agent holds.
struct FullState {
    /// The browser's password: keys our checks, and verifies the responses to them (RFC 8445
    /// §7.2.2, RFC 8489 §9.1.4).
    remote_key: IntegrityKey,
    /// "THEIR-UFRAG:OUR-UFRAG", the USERNAME of our checks (RFC 8445 §7.2.2).
    username: String,
    tiebreaker: u64,
    prf: hmac::Key,
    prf_counter: u64,
    /// Addresses whose triggered check waits, first in first out (RFC 8445 §7.3.1.4).
    triggered: VecDeque<SocketAddr>,
    /// When the next new check may go: one each Ta (RFC 8445 §6.1.4.2, §14.2).
    next_check: Instant,
    /// The address the browser nominated last while its pair was not valid yet; selected once
    /// our check on it succeeds (§7.3.1.5).
    pending_nomination: Option<SocketAddr>,
    /// When the next consent check goes to the selected pair (RFC 7675 §5.1).
    next_consent: Option<Instant>,
    /// Transaction ids of the consent checks sent lately, oldest first.
    consent_transactions: VecDeque<TransactionId>,
    /// Checks to send, oldest first; encoded when polled, so they carry the attributes set
    /// by then.
    transmits: VecDeque<(SocketAddr, TransactionId)>,
    /// Extra attributes for our checks, before MESSAGE-INTEGRITY (DTLS in STUN's ACK).
    request_attributes: Vec<(u16, Vec<u8>)>,
}

impl FullState {
    /// The next output of the pseudo-random function, under `label`.
    fn random(&mut self, label: &[u8]) -> [u8; 32] {
        self.prf_counter += 1;
        let mut input = Vec::with_capacity(label.len() + 8);
        input.extend_from_slice(label);
        input.extend_from_slice(&self.prf_counter.to_be_bytes());
        let mut output = [0u8; 32];
        output.copy_from_slice(hmac::sign(&self.prf, &input).as_ref());
        output
    }

    fn next_transaction(&mut self) -> TransactionId {
        let mut id = [0u8; 12];
        id.copy_from_slice(&self.random(b"fastshake ice transaction")[..12]);
        TransactionId(id)
    }

    /// The next consent interval: 5 s times a factor drawn from 0.8 to 1.2 (RFC 7675 §5.1).
    fn consent_interval(&mut self) -> Duration {
        let draw = self.random(b"fastshake ice consent");
        let per_mille = 800 + u64::from(u16::from_be_bytes([draw[0], draw[1]])) % 401;
        IceAgent::CONSENT_INTERVAL * per_mille as u32 / 1000
    }

    /// Our Binding request (RFC 8445 §7.2.4): USERNAME, PRIORITY, ICE-CONTROLLED,
    /// MESSAGE-INTEGRITY under the browser's password, FINGERPRINT (§7.2.2). No USE-CANDIDATE:
    /// only the controlling agent nominates (§7.1.2).
    fn request(&self, transaction: TransactionId) -> Option<Vec<u8>> {
        let builder = MessageBuilder::new(Class::Request, Method::Binding, transaction)
            .username(&self.username)
            // The priority our peer-reflexive candidate would have (§7.1.1): type preference
            // 110 (§5.1.2.2), the local preference of our first host candidate, component 1.
            .priority(crate::sdp::candidate_priority(110, 65535, 1))
            .ice_controlled(self.tiebreaker);
        self.request_attributes
            .iter()
            .fold(builder, |builder, (kind, value)| builder.attribute(*kind, value))
            .message_integrity(&self.remote_key)
            .fingerprint()
            .into_bytes()
            .ok()
    }

    fn queue(&mut self, to: SocketAddr, transaction: TransactionId) {
        if self.transmits.len() >= IceAgent::MAX_QUEUED_TRANSMITS {
            // Not polled: this one is lost, as on the network; the timer sends it again.
            return;
        }
        self.transmits.push_back((to, transaction));
    }
}

/// The controlled side of one ICE session (one data stream, one component: data channels are
/// bundled and RTCP-muxed), ICE-lite or full ([`IceMode`]).
///
/// # When DTLS may flow
///
/// *Receiving*: the browser, a full agent, may send data on any of its valid pairs before it
/// selects one (RFC 8445 §12.1), and a pair becomes valid for it when our success response
/// arrives (§7.2.5.3.2). So its ClientHello can come from any address we answered with
/// success; [`Self::may_receive_from`] accepts exactly those, in either mode.
///
/// *Sending, lite*: "A lite implementation MUST NOT send data until it has a valid list that
/// contains a candidate pair for each component" (RFC 8445 §12.1.1), and a lite agent's valid
/// list gains a pair only when it accepts a Binding request with USE-CANDIDATE, which also sets
/// the pair's nominated flag (§7.3.2). A lite agent sends no checks, so it never builds valid
/// pairs the way a full agent does (§7.2.5.3.2), and "send on any valid pair before selection"
/// (§12.1) gives it nothing earlier. The earliest moment is therefore the accepted nomination:
/// once [`Self::handle`] has returned the response to that check, [`Self::may_send_to`] holds
/// for its address and the answer to a ClientHello received before may go out.
///
/// *Sending, full*: an authenticated check from an address we have not checked makes that
/// address a peer-reflexive remote candidate (§7.3.1.3) and triggers our own check of the pair
/// (§7.3.1.4), sent at once and then paced one new check per Ta (§14.2). When its success
/// response arrives, from that address, with our transaction id and MESSAGE-INTEGRITY under the
/// browser's password, the pair is valid (§7.2.5.3.2) and a full agent "MAY send data on any
/// valid pair before selection" (§12.1): [`Self::may_send_to`] holds for it at once. A
/// nomination (USE-CANDIDATE) selects its pair when that pair is valid, or as soon as it
/// becomes valid (§7.3.1.5).
///
/// In both modes, once a pair is selected only it may carry data (§12.1).
///
/// # Checks we send (full mode)
///
/// Retransmitted as RFC 8489 §6.2.1 does, with [`Self::CHECK_RTO`] rather than §14.3's 500 ms
/// floor (the browser has just shown the path works; its own checks come every 48 ms): sent
/// at most [`Self::MAX_CHECK_SENDS`] times, each wait twice the last, and failed 16 RTOs
/// (Rm) after the last. Responses that do not authenticate under the browser's password are
/// discarded as never received (RFC 8489 §9.1.4), and so are responses from an address other
/// than the check's (§7.2.5.2.1 would fail the pair at once; ignoring them ends the same way
/// if the path is really not symmetric, and an injected datagram cannot fail a pair). An
/// authenticated error response fails the pair (§7.2.5.2.4). For 487 (Role Conflict) §7.2.5.1
/// would have us switch to controlling; we stay controlled, since the offerer is the
/// controlling agent (§6.1.1) and this agent cannot nominate, so the pair just fails. A new
/// check from the browser on a failed pair triggers ours again (§7.3.1.4); one on a pair whose
/// check is in progress leaves that transaction running rather than cancelling it for a new
/// one (§7.3.1.4): its retransmissions already cover the same ground.
///
/// # Consent
///
/// *Lite*: "An ICE-lite agent does not generate consent checks and will only respond to any
/// checks that it receives" (RFC 7675 §1). The browser keeps consent to send to us by checking
/// the selected pair every 4–6 s (§5.1); each authenticated check from the selected address
/// shows that the browser is there, still uses that pair, and knows our password. When none has
/// come for 30 s, the browser's own consent has expired (its checks went unanswered for 30 s)
/// or it is gone, so we stop sending too, as §5.1 requires of a sender whose consent expired.
///
/// *Full*: a full agent obtains consent itself (RFC 7675 §5.1), so the browser's checks no
/// longer count: we send a consent check (a Binding request as above, with a fresh transaction
/// id each time) to the selected pair every [`Self::CONSENT_INTERVAL`], jittered by ±20 %, and
/// consent expires 30 s after the last authenticated success response from the selected
/// address (to a check or a consent check; the one that validated the pair starts the clock).
/// Each consent check is sent once: about six go out before expiry, which is the
/// retransmission. Before selection, the validation that just happened is the consent ICE
/// obtained (RFC 7675 §5.1); the timer runs on the selected pair.
///
/// Either way, consent lost is final for these credentials (§5.1, last paragraph):
/// [`IceEvent::ConsentExpired`] comes once, and afterwards the agent answers nothing, sends
/// nothing and allows nothing; an ICE restart means new credentials and a new agent. Binding
/// indications do not refresh consent: they carry no authentication (RFC 8445 §11), so anyone
/// could forge them.
///
/// # Bounded state
///
/// At most [`Self::MAX_REMOTE_ADDRESSES`] remote addresses are remembered, and only addresses
/// that authenticated with our password enter; past the bound the one checked least recently
/// (never the selected one) makes room, and its check with it. The event queue, the queue of
/// checks to send and the consent transactions remembered are bounded too.
pub struct IceAgent {
    local: Credentials,
    key: IntegrityKey,
    /// "OUR-UFRAG:THEIR-UFRAG", the USERNAME of every check the browser sends (RFC 8445 §7.2.2).
    expected_username: String,
    checked: Vec<CheckedAddress>,
    selected: Option<SocketAddr>,
    consent_deadline: Option<Instant>,
    consent_expired: bool,
    events: VecDeque<IceEvent>,
    /// `None` in lite mode.
    full: Option<FullState>,
}

impl fmt::Debug for IceAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IceAgent")
            .field("mode", &self.mode())
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

impl IceAgent {
    /// Remote addresses remembered at most. A browser checks from one address per candidate it
    /// gathered (host addresses per interface and family, server-reflexive, relayed per TURN
    /// server) paired with our few host candidates: a handful in practice. Sixteen leaves room
    /// for multi-homed hosts while a peer that knows the password cannot grow our memory.
    pub const MAX_REMOTE_ADDRESSES: usize = 16;
    /// RFC 7675 §5.1's consent expiry.
    pub const CONSENT_TIMEOUT: Duration = Duration::from_secs(30);
    /// Full mode: the basic period of our consent checks (RFC 7675 §5.1), jittered ±20 %.
    pub const CONSENT_INTERVAL: Duration = Duration::from_secs(5);
    /// Full mode: the first retransmission timeout of a check, doubled after each send (RFC
    /// 8489 §6.2.1; see the type's documentation for why not §14.3's 500 ms).
    pub const CHECK_RTO: Duration = Duration::from_millis(100);
    /// Full mode: sends of one check at most (RFC 8489 §6.2.1's Rc).
    pub const MAX_CHECK_SENDS: u32 = 7;
    /// Full mode: the pacing of new checks, Ta (RFC 8445 §14.2's default).
    pub const TA: Duration = Duration::from_millis(50);
    /// Events kept for [`Self::poll_event`] at most; past it, [`IceEvent::CheckSucceeded`] and
    /// [`IceEvent::PairValid`] notices are dropped (the state behind them stays queryable).
    pub const MAX_QUEUED_EVENTS: usize = 2 * Self::MAX_REMOTE_ADDRESSES;
    /// Full mode: checks kept for [`Self::poll_transmit`] at most; past it a check is dropped
    /// as a lost datagram would be, and its timer sends it again.
    pub const MAX_QUEUED_TRANSMITS: usize = 2 * Self::MAX_REMOTE_ADDRESSES;
    /// UNKNOWN-ATTRIBUTES lists at most this many types, so a 420 stays smaller than the
    /// request it answers.
    const MAX_UNKNOWN_LISTED: usize = 16;
    /// RFC 8489 §6.2.1's Rm: after the last send, wait this many RTOs before failing.
    const LAST_WAIT_RTOS: u32 = 16;
    /// Consent transactions remembered: those of the last 30 s, at 4 s apart at the least.
    const MAX_CONSENT_TRANSACTIONS: usize = 8;

    /// An ICE-lite agent answering checks for `local`, from the peer whose offer gave
    /// `remote_ufrag`.
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
    pub fn new(local: Credentials, remote_ufrag: &str) -> Result<IceAgent, CredentialsError> {
        validate_ufrag(remote_ufrag)?;
        let key = IntegrityKey::short_term(local.pwd());
        let expected_username = format!("{}:{}", local.ufrag(), remote_ufrag);
        Ok(IceAgent {
            local,
            key,
            expected_username,
            checked: Vec::with_capacity(Self::MAX_REMOTE_ADDRESSES),
            selected: None,
            consent_deadline: None,
            consent_expired: false,
            events: VecDeque::new(),
            full: None,
        })
    }

    /// A full, controlled agent ([`IceMode::Full`]): as [`Self::new`], and it checks back every
    /// address the browser checks from, with `config`'s password, tiebreaker and randomness.
    pub fn full(
        local: Credentials,
        remote_ufrag: &str,
        config: FullConfig,
    ) -> Result<IceAgent, CredentialsError> {
        let mut agent = IceAgent::new(local, remote_ufrag)?;
        let username = format!("{}:{}", remote_ufrag, agent.local.ufrag());
        agent.full = Some(FullState {
            remote_key: IntegrityKey::short_term(&config.remote_pwd),
            username,
            tiebreaker: config.tiebreaker,
            prf: config.prf,
            prf_counter: 0,
            triggered: VecDeque::new(),
            next_check: Instant::ZERO,
            pending_nomination: None,
            next_consent: None,
            consent_transactions: VecDeque::new(),
            transmits: VecDeque::new(),
            request_attributes: Vec::new(),
        });
        Ok(agent)
    }

    /// Lite or full.
    pub fn mode(&self) -> IceMode {
        if self.full.is_some() {
            IceMode::Full
        } else {
            IceMode::Lite
        }
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
    ///   USE-CANDIDATE it also nominates `from` (§7.3.2, §8.2; in full mode §7.3.1.5). In full
    ///   mode a first such request from `from` also queues our triggered check to it
    ///   (§7.3.1.4), for [`Self::poll_transmit`], to be sent after this response.
    /// - No USERNAME or no MESSAGE-INTEGRITY: 400. Another USERNAME or a MESSAGE-INTEGRITY that
    ///   does not verify: 401. Both without MESSAGE-INTEGRITY (RFC 8489 §9.1.3).
    /// - Authenticated but with comprehension-required attributes we do not understand: 420
    ///   with UNKNOWN-ATTRIBUTES (RFC 8489 §6.3.1).
    /// - Authenticated but with ICE-CONTROLLED: 487, keeping our controlled role (RFC 8445
    ///   §7.3.1.1).
    /// - Full mode, a Binding response to one of our checks: processed as the type's
    ///   documentation says; no answer.
    /// - Not STUN, a missing or wrong FINGERPRINT (RFC 8489 §7.3, RFC 8445 §7.3 requires it),
    ///   other responses (a lite agent sends no requests), other methods, and Binding
    ///   indications (keepalives, RFC 8445 §11): no answer and no change.
    ///
    /// After consent expired nothing is answered.
    pub fn handle(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
        let message = Message::parse(datagram).ok()?;
        self.handle_message(now, from, &message)
    }

    /// [`IceAgent::handle`] for a datagram the caller already parsed (a server that routed it
    /// by its USERNAME), so that it is decoded once.
    pub fn handle_message(
        &mut self,
        now: Instant,
        from: SocketAddr,
        message: &Message<'_>,
    ) -> Option<Vec<u8>> {
        self.handle_message_with(now, from, message, Vec::new)
    }

    /// [`IceAgent::handle_message`], and a success response also carries the attributes
    /// `extra` returns, between XOR-MAPPED-ADDRESS and MESSAGE-INTEGRITY. `extra` runs only for
    /// a request that authenticated and succeeds, after the check was recorded (so
    /// [`Self::may_receive_from`] holds for `from`), and before the response is encoded: DTLS
    /// in STUN feeds the check's embedded datagram to DTLS there (draft-hancke-webrtc-sped).
    /// In full mode it also runs, its result unused, for a success response to one of our
    /// checks once that response authenticated (the browser's response may carry DTLS too).
    pub fn handle_message_with(
        &mut self,
        now: Instant,
        from: SocketAddr,
        message: &Message<'_>,
        extra: impl FnOnce() -> Vec<(u16, Vec<u8>)>,
    ) -> Option<Vec<u8>> {
        // A deadline that passed before this datagram counts first, whatever the driver's timer.
        self.handle_timeout(now);
        if self.consent_expired {
            return None;
        }
        message.verify_fingerprint().ok()?;
        if message.method() != Method::Binding {
            return None;
        }
        match message.class() {
            Class::Request => {}
            Class::SuccessResponse | Class::ErrorResponse => {
                if self.handle_response(now, from, message) {
                    // Nothing answers a response; `extra` only sees that it authenticated.
                    let _ = extra();
                }
                return None;
            }
            Class::Indication => return None,
        }
        let answer = self.judge(message);
        let extra = match answer {
            Answer::Success => {
                self.record_check(now, from, message.use_candidate());
                extra()
            }
            _ => Vec::new(),
        };
        let response = self.encode(message, from, answer, &extra);
        // Full mode: a check just triggered goes now, after this response.
        self.send_checks(now);
        response
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
    /// ever take the second branch: any check with ICE-CONTROLLED gets 487. A full agent here
    /// answers the same way whatever the tiebreakers: it cannot nominate, so it stays
    /// controlled, and the 487 tells the peer to take the controlling role (§7.2.5.1), which
    /// the offerer should have anyway (§6.1.1). ICE-CONTROLLING is no conflict.
    fn role_conflict(request: &Message<'_>) -> bool {
        request.attribute(attr::ICE_CONTROLLED).is_some()
    }

    fn encode(
        &self,
        request: &Message<'_>,
        from: SocketAddr,
        answer: Answer,
        extra: &[(u16, Vec<u8>)],
    ) -> Option<Vec<u8>> {
        let transaction_id: TransactionId = request.transaction_id();
        let message = match answer {
            Answer::Success => extra
                .iter()
                .fold(
                    MessageBuilder::new(Class::SuccessResponse, Method::Binding, transaction_id)
                        // A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d; the peer
                        // sent from, and expects to see, the IPv4 address.
                        .xor_mapped_address(SocketAddr::new(from.ip().to_canonical(), from.port())),
                    |builder, (kind, value)| builder.attribute(*kind, value),
                )
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
        let index = match self.checked.iter().position(|checked| checked.address == from) {
            Some(index) => {
                self.checked[index].last_check = now;
                index
            }
            None => {
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
                    let evicted = self.checked.swap_remove(stalest).address;
                    if let Some(full) = self.full.as_mut() {
                        full.triggered.retain(|&address| address != evicted);
                        if full.pending_nomination == Some(evicted) {
                            full.pending_nomination = None;
                        }
                    }
                }
                // Full mode: a new address is a peer-reflexive remote candidate (§7.3.1.3) whose
                // pair gets a triggered check (§7.3.1.4).
                let ours = match self.full.as_mut() {
                    Some(full) => {
                        full.triggered.push_back(from);
                        PairCheck::Waiting
                    }
                    None => PairCheck::NotChecked,
                };
                self.checked.push(CheckedAddress { address: from, last_check: now, ours });
                self.push_event(IceEvent::CheckSucceeded(from));
                self.checked.len() - 1
            }
        };
        if self.full.is_none() {
            // Regular nomination (RFC 8445 §8.1.1): the browser nominates one pair; if it later
            // nominates another (after a network change, or an RFC 5245 agent's aggressive
            // nomination), the choice is the controlling agent's (§8.1) and we follow the
            // latest, which is a pair the browser has just validated and uses.
            if nominates && self.selected != Some(from) {
                self.selected = Some(from);
                self.push_event(IceEvent::Selected(from));
            }
            if self.selected == Some(from) {
                self.consent_deadline = Some(now + Self::CONSENT_TIMEOUT);
            }
            return;
        }
        let entry = &mut self.checked[index];
        // A pair whose check failed gets a new one (§7.3.1.4).
        let retrigger = entry.ours == PairCheck::Failed;
        if retrigger {
            entry.ours = PairCheck::Waiting;
        }
        let valid = match entry.ours {
            PairCheck::Succeeded { last_response, .. } => Some(last_response),
            _ => None,
        };
        if let Some(full) = self.full.as_mut() {
            if retrigger {
                full.triggered.push_back(from);
            }
            // §7.3.1.5: a nomination sets the pair's nominated flag once the pair is valid; the
            // latest nomination is the one that counts, as in lite mode.
            if nominates {
                full.pending_nomination = if valid.is_some() { None } else { Some(from) };
            }
        }
        if let (true, Some(last_response)) = (nominates, valid) {
            self.select(now, from, last_response);
        }
    }

    /// Full mode: `address`, valid and nominated, becomes the selected pair; consent runs from
    /// the last success response it gave.
    fn select(&mut self, now: Instant, address: SocketAddr, last_response: Instant) {
        if self.selected != Some(address) {
            self.selected = Some(address);
            self.push_event(IceEvent::Selected(address));
            if let Some(full) = self.full.as_mut() {
                full.next_consent = Some(now + full.consent_interval());
            }
        }
        self.consent_deadline = Some(last_response + Self::CONSENT_TIMEOUT);
    }

    /// Full mode: a Binding response that may answer one of our checks or consent checks;
    /// true if it was a success response to one of them that authenticated.
    fn handle_response(&mut self, now: Instant, from: SocketAddr, response: &Message<'_>) -> bool {
        let Some(full) = self.full.as_mut() else { return false };
        let transaction = response.transaction_id();
        let check = self.checked.iter().position(|checked| {
            checked.address == from
                && matches!(checked.ours, PairCheck::InProgress { transaction: sent, .. } if sent == transaction)
        });
        let consent = self.selected == Some(from) && full.consent_transactions.contains(&transaction);
        if check.is_none() && !consent {
            return false;
        }
        // The browser answers with the password of the request, its own (RFC 8445 §7.2.2, RFC
        // 8489 §9.1.3); a response that does not verify is discarded as never received (RFC
        // 8489 §9.1.4).
        if response.verify_integrity(&full.remote_key).is_err() {
            return false;
        }
        let success = response.class() == Class::SuccessResponse;
        let Some(index) = check else {
            // A consent check answered (RFC 7675 §5.1); a refusal just does not refresh consent.
            full.consent_transactions.retain(|&sent| sent != transaction);
            if success {
                if let Some(entry) = self.checked.iter_mut().find(|checked| checked.address == from) {
                    if let PairCheck::Succeeded { last_response, .. } = &mut entry.ours {
                        *last_response = now;
                    }
                }
                self.consent_deadline = Some(now + Self::CONSENT_TIMEOUT);
            }
            return success;
        };
        if !success {
            // §7.2.5.2.4; 487 included, see the type's documentation.
            self.checked[index].ours = PairCheck::Failed;
            return false;
        }
        // XOR-MAPPED-ADDRESS may name a peer-reflexive candidate of ours (§7.2.5.3.1); we send
        // from the one socket whatever it says, so the pair is the same for us.
        self.checked[index].ours = PairCheck::Succeeded { valid_since: now, last_response: now };
        let nominated = full.pending_nomination == Some(from);
        if nominated {
            full.pending_nomination = None;
        }
        self.push_event(IceEvent::PairValid(from));
        if nominated {
            self.select(now, from, now);
        } else if self.selected == Some(from) {
            self.consent_deadline = Some(now + Self::CONSENT_TIMEOUT);
        }
        true
    }

    /// Full mode: retransmissions due, the next triggered check if Ta allows, and a consent
    /// check if one is due.
    fn send_checks(&mut self, now: Instant) {
        let Some(full) = self.full.as_mut() else { return };
        if self.consent_expired {
            return;
        }
        // Retransmissions, and failure after the last (RFC 8489 §6.2.1).
        for entry in &mut self.checked {
            let PairCheck::InProgress { transaction, sent, next } = entry.ours else { continue };
            if next > now {
                continue;
            }
            if sent >= Self::MAX_CHECK_SENDS {
                entry.ours = PairCheck::Failed;
                continue;
            }
            let sent = sent + 1;
            let wait = if sent == Self::MAX_CHECK_SENDS {
                Self::CHECK_RTO * Self::LAST_WAIT_RTOS
            } else {
                Self::CHECK_RTO * (1 << (sent - 1))
            };
            entry.ours = PairCheck::InProgress { transaction, sent, next: now + wait };
            full.queue(entry.address, transaction);
        }
        // A new check, one each Ta (RFC 8445 §6.1.4.2, §14.2).
        if full.next_check <= now {
            while let Some(address) = full.triggered.pop_front() {
                let Some(entry) = self.checked.iter_mut().find(|checked| checked.address == address) else {
                    continue;
                };
                if entry.ours != PairCheck::Waiting {
                    continue;
                }
                let transaction = full.next_transaction();
                entry.ours = PairCheck::InProgress { transaction, sent: 1, next: now + Self::CHECK_RTO };
                full.queue(address, transaction);
                full.next_check = now + Self::TA;
                break;
            }
        }
        // Consent (RFC 7675 §5.1): a fresh transaction each time, sent once.
        if let (Some(selected), Some(due)) = (self.selected, full.next_consent) {
            if due <= now {
                let transaction = full.next_transaction();
                if full.consent_transactions.len() >= Self::MAX_CONSENT_TRANSACTIONS {
                    full.consent_transactions.pop_front();
                }
                full.consent_transactions.push_back(transaction);
                full.queue(selected, transaction);
                let interval = full.consent_interval();
                full.next_consent = Some(now + interval);
            }
        }
    }

    fn push_event(&mut self, event: IceEvent) {
        match event {
            // Only the latest selection matters to a caller that has not polled yet.
            IceEvent::Selected(_) => self.events.retain(|queued| !matches!(queued, IceEvent::Selected(_))),
            IceEvent::CheckSucceeded(_) | IceEvent::PairValid(_)
                if self.events.len() >= Self::MAX_QUEUED_EVENTS =>
            {
                return
            }
            _ => {}
        }
        self.events.push_back(event);
    }

    /// The next event, oldest first. A [`IceEvent::Selected`] not yet polled is replaced by a
    /// later one: only the current selection matters.
    pub fn poll_event(&mut self) -> Option<IceEvent> {
        self.events.pop_front()
    }

    /// Full mode: the next check to send, as (destination, datagram), oldest first; always
    /// `None` in lite mode. Sent from the socket the browser's checks arrive on.
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        let full = self.full.as_mut()?;
        while let Some((to, transaction)) = full.transmits.pop_front() {
            // Only attributes near 64 KiB could fail to encode; such a check is lost.
            if let Some(request) = full.request(transaction) {
                return Some((to, request));
            }
        }
        None
    }

    /// Full mode: attributes our checks carry from now on, before MESSAGE-INTEGRITY (DTLS in
    /// STUN's ACK while that exchange is on); ignored in lite mode, which sends no checks.
    pub fn set_request_attributes(&mut self, attributes: Vec<(u16, Vec<u8>)>) {
        if let Some(full) = self.full.as_mut() {
            full.request_attributes = attributes;
        }
    }

    /// When [`Self::handle_timeout`] must be called: the consent deadline of the selected pair
    /// and, in full mode, the next retransmission, paced check or consent check.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.consent_expired {
            return None;
        }
        let Some(full) = self.full.as_ref() else { return self.consent_deadline };
        let retransmissions = self.checked.iter().filter_map(|checked| match checked.ours {
            PairCheck::InProgress { next, .. } => Some(next),
            _ => None,
        });
        let paced = (!full.triggered.is_empty()).then_some(full.next_check);
        let consent = self.selected.and(full.next_consent);
        retransmissions.chain([self.consent_deadline, paced, consent].into_iter().flatten()).min()
    }

    /// Expires consent if its deadline has passed at `now`; in full mode, also sends the checks
    /// that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.consent_expired {
            return;
        }
        if self.consent_deadline.is_some_and(|deadline| now >= deadline) {
            self.consent_expired = true;
            self.events.push_back(IceEvent::ConsentExpired);
            if let Some(full) = self.full.as_mut() {
                full.transmits.clear();
            }
            return;
        }
        self.send_checks(now);
    }

    /// The selected pair's remote address: the one the browser nominated last (in full mode,
    /// once our check on it succeeded).
    pub fn selected(&self) -> Option<SocketAddr> {
        self.selected
    }

    /// Whether DTLS may be sent to `address` now (consent not expired, and):
    /// - lite: it is the selected pair's (nominated) address, no earlier (RFC 8445 §12.1.1
    ///   with §7.3.2, as the type's documentation explains);
    /// - full: it is the selected pair's address, or, before any selection, that of a valid
    ///   pair (§12.1).
    pub fn may_send_to(&self, address: SocketAddr) -> bool {
        if self.consent_expired {
            return false;
        }
        match self.selected {
            Some(selected) => selected == address,
            None => self.is_valid(address),
        }
    }

    /// Full mode: whether our check of the pair to `address` succeeded (RFC 8445 §7.2.5.3.2);
    /// never in lite mode.
    pub fn is_valid(&self, address: SocketAddr) -> bool {
        self.checked
            .iter()
            .any(|checked| checked.address == address && matches!(checked.ours, PairCheck::Succeeded { .. }))
    }

    /// Full mode: the remote address of the pair that became valid first among those
    /// remembered; `None` in lite mode or before any did.
    pub fn first_valid(&self) -> Option<SocketAddr> {
        self.checked
            .iter()
            .filter_map(|checked| match checked.ours {
                PairCheck::Succeeded { valid_since, .. } => Some((valid_since, checked.address)),
                _ => None,
            })
            .min_by_key(|(valid_since, _)| *valid_since)
            .map(|(_, address)| address)
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

/// The fuzz target's body: `data` as a datagram to a fresh lite agent and a fresh full agent
/// with fixed credentials; then, if it parses as STUN, its attributes under the agent's USERNAME
/// and resealed with its password (so the steps past authentication run too), and for the full
/// agent its attributes once more as the answer to the check that triggered, sealed with the
/// browser's password (so the response steps run); then the timers. Must not panic.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let local = Credentials::from_random(&[7; Credentials::RANDOM_LEN]);
    let key = IntegrityKey::short_term(local.pwd());
    let username = format!("{}:fuzzRemote", local.ufrag());
    let remote_pwd = "fuzzRemotePassword0123456789";
    let remote_key = IntegrityKey::short_term(remote_pwd);
    let Ok(lite) = IceAgent::new(local.clone(), "fuzzRemote") else { return };
    let Ok(config) = FullConfig::new(remote_pwd, &[9; FullConfig::RANDOM_LEN]) else { return };
    let Ok(full) = IceAgent::full(local, "fuzzRemote", config) else { return };
    let from = SocketAddr::from(([192, 0, 2, 1], 50_000));
    let now = Instant::from_millis(1);
    for mut agent in [lite, full] {
        let _ = agent.handle(now, from, data);
        if let Ok(message) = Message::parse(data) {
            let reseal = |transaction_id: TransactionId, username: Option<&str>, key: &IntegrityKey| {
                let builder = MessageBuilder::new(message.class(), message.method(), transaction_id);
                let builder = match username {
                    Some(username) => builder.username(username),
                    None => builder,
                };
                message
                    .attributes()
                    .filter(|attribute| attribute.kind != attr::USERNAME)
                    .fold(builder, |builder, attribute| builder.attribute(attribute.kind, attribute.value))
                    .message_integrity(key)
                    .fingerprint()
                    .into_bytes()
            };
            if let Ok(resealed) = reseal(message.transaction_id(), Some(&username), &key) {
                let _ = agent.handle(now, from, &resealed);
            }
            let check = agent.poll_transmit();
            let pending =
                check.as_ref().and_then(|(_, check)| Some(Message::parse(check).ok()?.transaction_id()));
            if let Some(transaction_id) = pending {
                if let Ok(answer) = reseal(transaction_id, None, &remote_key) {
                    let _ = agent.handle(now, from, &answer);
                }
            }
        }
        while agent.poll_event().is_some() {}
        while agent.poll_transmit().is_some() {}
        let _ = (
            agent.may_send_to(from),
            agent.may_receive_from(from),
            agent.poll_timeout(),
            agent.first_valid(),
        );
        for later in [Duration::from_millis(150), Duration::from_secs(8), IceAgent::CONSENT_TIMEOUT] {
            agent.handle_timeout(now + later);
            while agent.poll_transmit().is_some() {}
        }
        let _ = agent.poll_event();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BROWSER_UFRAG: &str = "brWs";
    const BROWSER_PWD: &str = "browserPasswordBrowserPw";

    fn full_config() -> FullConfig {
        FullConfig::new(BROWSER_PWD, &[5; FullConfig::RANDOM_LEN]).unwrap()
    }

    fn full_agent() -> IceAgent {
        IceAgent::full(Credentials::from_random(&[3; Credentials::RANDOM_LEN]), BROWSER_UFRAG, full_config())
            .unwrap()
    }

    fn lite_agent() -> IceAgent {
        IceAgent::new(Credentials::from_random(&[3; Credentials::RANDOM_LEN]), BROWSER_UFRAG).unwrap()
    }

    fn address(port: u16) -> SocketAddr {
        SocketAddr::from(([198, 51, 100, 7], port))
    }

    fn at(millis: u64) -> Instant {
        Instant::from_millis(1_000 + millis)
    }

    /// A controlling browser's check to `agent` (RFC 8445 §7.2.4).
    fn browser_check(agent: &IceAgent, transaction: u8, nominate: bool) -> Vec<u8> {
        let local = agent.local_credentials();
        let builder = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([transaction; 12]))
            .username(&format!("{}:{BROWSER_UFRAG}", local.ufrag()))
            .priority(0x6e7f_1eff)
            .ice_controlling(0x1122_3344_5566_7788);
        let builder = if nominate { builder.use_candidate() } else { builder };
        builder.message_integrity(&IntegrityKey::short_term(local.pwd())).fingerprint().into_bytes().unwrap()
    }

    /// The browser's answer to one of our checks, keyed with `password` (its own if right).
    fn browser_answer(check: &[u8], to: SocketAddr, class: Class, password: &str) -> Vec<u8> {
        let transaction = Message::parse(check).unwrap().transaction_id();
        let builder = MessageBuilder::new(class, Method::Binding, transaction);
        let builder = match class {
            Class::ErrorResponse => builder.error_code(error_code::ROLE_CONFLICT, "Role Conflict"),
            _ => builder.xor_mapped_address(to),
        };
        builder.message_integrity(&IntegrityKey::short_term(password)).fingerprint().into_bytes().unwrap()
    }

    fn transmits(agent: &mut IceAgent) -> Vec<(SocketAddr, Vec<u8>)> {
        std::iter::from_fn(|| agent.poll_transmit()).collect()
    }

    fn events(agent: &mut IceAgent) -> Vec<IceEvent> {
        std::iter::from_fn(|| agent.poll_event()).collect()
    }

    fn transaction_of(datagram: &[u8]) -> TransactionId {
        Message::parse(datagram).unwrap().transaction_id()
    }

    /// The browser checks from `from` at `now`; returns our triggered check, sent at once.
    fn triggered(agent: &mut IceAgent, now: Instant, from: SocketAddr, transaction: u8) -> Vec<u8> {
        assert!(agent.handle(now, from, &browser_check(agent, transaction, false)).is_some());
        let mut sent = transmits(agent);
        assert_eq!(sent.len(), 1, "one triggered check");
        let (to, check) = sent.remove(0);
        assert_eq!(to, from);
        check
    }

    #[test]
    fn the_first_authenticated_check_from_an_address_triggers_ours_to_it() {
        let mut agent = full_agent();
        assert_eq!(agent.mode(), IceMode::Full);
        let from = address(50_000);
        let response = agent.handle(at(0), from, &browser_check(&agent, 1, false)).expect("answered");
        assert_eq!(Message::parse(&response).unwrap().class(), Class::SuccessResponse);
        let sent = transmits(&mut agent);
        assert_eq!(sent.len(), 1);
        let (to, check) = &sent[0];
        assert_eq!(*to, from, "to the browser's address: a peer-reflexive candidate (§7.3.1.3)");
        let check = Message::parse(check).unwrap();
        assert_eq!((check.class(), check.method()), (Class::Request, Method::Binding));
        let ours = agent.local_credentials().ufrag().to_owned();
        assert_eq!(check.username(), Ok(Some(format!("{BROWSER_UFRAG}:{ours}").as_str())), "§7.2.2");
        assert_eq!(check.priority(), Ok(Some(crate::sdp::candidate_priority(110, 65535, 1))), "§7.1.1");
        assert_eq!(check.ice_controlled(), Ok(Some(full_config().tiebreaker())), "§7.1.3");
        assert_eq!(check.ice_controlling(), Ok(None));
        assert!(!check.use_candidate(), "only the controlling agent nominates");
        assert_eq!(
            check.verify_integrity(&IntegrityKey::short_term(BROWSER_PWD)),
            Ok(()),
            "keyed by their pwd"
        );
        let own_pwd = agent.local_credentials().pwd().to_owned();
        assert!(check.verify_integrity(&IntegrityKey::short_term(&own_pwd)).is_err());
        assert_eq!(check.verify_fingerprint(), Ok(()));
        assert!(!agent.may_send_to(from), "not valid before our check is answered");

        // The same address again: the check is in progress, nothing new.
        assert!(agent.handle(at(10), from, &browser_check(&agent, 2, false)).is_some());
        assert!(transmits(&mut agent).is_empty());
        // A check that does not authenticate triggers nothing.
        let stranger = address(50_001);
        let mut forged = browser_check(&agent, 3, false);
        forged[30] ^= 1;
        let _ = agent.handle(at(20), stranger, &forged);
        assert!(transmits(&mut agent).is_empty());
        // A lite agent never checks.
        let mut lite = lite_agent();
        assert_eq!(lite.mode(), IceMode::Lite);
        assert!(lite.handle(at(0), from, &browser_check(&lite, 1, false)).is_some());
        assert!(lite.poll_transmit().is_none() && lite.poll_timeout().is_none());
    }

    #[test]
    fn a_check_is_retransmitted_with_doubling_waits_then_fails_and_a_new_request_retriggers_it() {
        let mut agent = full_agent();
        let from = address(50_000);
        let first = triggered(&mut agent, at(0), from, 1);
        let mut sends = vec![0];
        while let Some(deadline) = agent.poll_timeout() {
            agent.handle_timeout(deadline);
            for (to, again) in transmits(&mut agent) {
                assert_eq!(to, from);
                assert_eq!(again, first, "a retransmission is the same request (RFC 8489 §6.2.1)");
                sends.push(deadline.saturating_duration_since(at(0)).as_millis());
            }
        }
        assert_eq!(sends, [0, 100, 300, 700, 1500, 3100, 6300], "Rc = 7, RTO 100 ms doubling");
        assert!(!agent.may_send_to(from));
        // Failed (after Rm × RTO more): the browser's next check triggers a new transaction.
        let again = triggered(&mut agent, at(8_000), from, 2);
        assert_ne!(transaction_of(&again), transaction_of(&first));
    }

    #[test]
    fn a_success_response_validates_the_pair_and_allows_sending_before_nomination() {
        let mut agent = full_agent();
        let from = address(50_000);
        let check = triggered(&mut agent, at(0), from, 1);
        assert_eq!(events(&mut agent), [IceEvent::CheckSucceeded(from)]);
        assert_eq!(
            agent.handle(at(2), from, &browser_answer(&check, from, Class::SuccessResponse, BROWSER_PWD)),
            None
        );
        assert_eq!(events(&mut agent), [IceEvent::PairValid(from)]);
        assert!(agent.is_valid(from) && agent.may_send_to(from), "§12.1: any valid pair before selection");
        assert_eq!(agent.selected(), None, "not nominated yet");
        assert_eq!(agent.first_valid(), Some(from));
        assert_eq!(agent.poll_timeout(), None, "no retransmission left, no consent timer before selection");
        assert!(!agent.may_send_to(address(50_001)));
        // A lite agent may not send before nomination, whatever it answered.
        let mut lite = lite_agent();
        assert!(lite.handle(at(0), from, &browser_check(&lite, 1, false)).is_some());
        assert!(!lite.may_send_to(from));
    }

    #[test]
    fn responses_with_the_wrong_integrity_transaction_or_address_are_ignored() {
        let mut agent = full_agent();
        let from = address(50_000);
        let check = triggered(&mut agent, at(0), from, 1);
        let ours = agent.local_credentials().pwd().to_owned();
        let answer = browser_answer(&check, from, Class::SuccessResponse, BROWSER_PWD);
        let mut other_transaction = answer.clone();
        other_transaction[8] ^= 1;
        let unsealed = MessageBuilder::new(Class::SuccessResponse, Method::Binding, transaction_of(&check))
            .xor_mapped_address(from)
            .fingerprint()
            .into_bytes()
            .unwrap();
        for (what, datagram, source) in [
            (
                "keyed with our own password",
                browser_answer(&check, from, Class::SuccessResponse, &ours),
                from,
            ),
            (
                "keyed with another password",
                browser_answer(&check, from, Class::SuccessResponse, "x".repeat(22).as_str()),
                from,
            ),
            ("without MESSAGE-INTEGRITY", unsealed, from),
            ("another transaction", other_transaction, from),
            ("from another address", answer.clone(), address(50_001)),
            (
                "an error response with the wrong key",
                browser_answer(&check, from, Class::ErrorResponse, &ours),
                from,
            ),
        ] {
            assert_eq!(agent.handle(at(5), source, &datagram), None, "{what}");
            assert!(!agent.is_valid(from) && !agent.may_send_to(from), "{what}");
            assert!(events(&mut agent).iter().all(|e| matches!(e, IceEvent::CheckSucceeded(_))), "{what}");
        }
        assert_eq!(agent.poll_timeout(), Some(at(100)), "still retransmitting");
        assert_eq!(agent.handle(at(6), from, &answer), None);
        assert!(agent.may_send_to(from), "the right answer still validates");
    }

    #[test]
    fn a_nomination_selects_its_pair_once_valid_and_then_only_it_may_carry_data() {
        // Nominated before our check succeeded: selected when it does (§7.3.1.5).
        let mut agent = full_agent();
        let (first, second) = (address(50_000), address(50_001));
        assert!(agent.handle(at(0), first, &browser_check(&agent, 1, true)).is_some());
        let check = transmits(&mut agent).remove(0).1;
        assert_eq!(agent.selected(), None, "a nomination of a pair not yet valid waits");
        agent.handle(at(3), first, &browser_answer(&check, first, Class::SuccessResponse, BROWSER_PWD));
        assert_eq!(
            events(&mut agent),
            [IceEvent::CheckSucceeded(first), IceEvent::PairValid(first), IceEvent::Selected(first)]
        );

        // Valid first, nominated later (regular nomination, as Chromium does): selected at once.
        let mut agent = full_agent();
        let check = triggered(&mut agent, at(0), first, 1);
        agent.handle(at(3), first, &browser_answer(&check, first, Class::SuccessResponse, BROWSER_PWD));
        let check = triggered(&mut agent, at(60), second, 2);
        agent.handle(at(63), second, &browser_answer(&check, second, Class::SuccessResponse, BROWSER_PWD));
        assert!(agent.may_send_to(first) && agent.may_send_to(second), "two valid pairs, none selected");
        let _ = events(&mut agent);
        assert!(agent.handle(at(80), second, &browser_check(&agent, 3, true)).is_some());
        assert_eq!(events(&mut agent), [IceEvent::Selected(second)]);
        assert!(agent.may_send_to(second) && !agent.may_send_to(first), "§12.1: only the selected pair");
    }

    #[test]
    fn a_role_conflict_fails_the_pair_and_the_next_request_checks_again() {
        let mut agent = full_agent();
        let from = address(50_000);
        let check = triggered(&mut agent, at(0), from, 1);
        agent.handle(at(3), from, &browser_answer(&check, from, Class::ErrorResponse, BROWSER_PWD));
        assert!(!agent.may_send_to(from));
        assert_eq!(agent.poll_timeout(), None, "failed: no more retransmissions");
        // Ta after the first check (RFC 8445 §14.2), a new one goes.
        let again = triggered(&mut agent, at(60), from, 2);
        assert_ne!(transaction_of(&again), transaction_of(&check));
    }

    #[test]
    fn new_checks_are_paced_one_per_ta() {
        let mut agent = full_agent();
        let (first, second) = (address(50_000), address(50_001));
        assert!(agent.handle(at(0), first, &browser_check(&agent, 1, false)).is_some());
        assert!(agent.handle(at(0), second, &browser_check(&agent, 2, false)).is_some());
        let sent: Vec<SocketAddr> = transmits(&mut agent).into_iter().map(|(to, _)| to).collect();
        assert_eq!(sent, [first]);
        assert_eq!(agent.poll_timeout(), Some(at(50)), "Ta = 50 ms (RFC 8445 §14.2)");
        agent.handle_timeout(at(50));
        let sent: Vec<SocketAddr> = transmits(&mut agent).into_iter().map(|(to, _)| to).collect();
        assert_eq!(sent, [second]);
    }

    #[test]
    fn full_mode_keeps_consent_with_its_own_checks_and_loses_it_without_answers() {
        let mut agent = full_agent();
        let from = address(50_000);
        assert!(agent.handle(at(0), from, &browser_check(&agent, 1, true)).is_some());
        let check = transmits(&mut agent).remove(0).1;
        agent.handle(at(2), from, &browser_answer(&check, from, Class::SuccessResponse, BROWSER_PWD));
        assert_eq!(agent.selected(), Some(from));
        // The first consent check comes 4 to 6 s later (RFC 7675 §5.1), a fresh transaction.
        let due = agent.poll_timeout().unwrap();
        let after = due.saturating_duration_since(at(2));
        assert!((Duration::from_secs(4)..=Duration::from_secs(6)).contains(&after), "{after:?}");
        agent.handle_timeout(due);
        let (to, consent) = transmits(&mut agent).remove(0);
        assert_eq!(to, from);
        assert_ne!(transaction_of(&consent), transaction_of(&check));
        assert!(!Message::parse(&consent).unwrap().use_candidate());
        // Answered: consent runs 30 s from the answer.
        let answered = due + Duration::from_millis(2);
        agent.handle(answered, from, &browser_answer(&consent, from, Class::SuccessResponse, BROWSER_PWD));
        // From now on nothing is answered, while the browser keeps checking: that does not count.
        let mut now = answered;
        let mut consent_checks = 0;
        while !agent.is_consent_expired() {
            now += Duration::from_secs(1);
            let _ = agent.handle(now, from, &browser_check(&agent, 9, false));
            consent_checks += transmits(&mut agent).len();
        }
        assert_eq!(now, answered + IceAgent::CONSENT_TIMEOUT, "30 s after the last answer");
        assert!((5..=8).contains(&consent_checks), "one every 4-6 s: {consent_checks}");
        assert_eq!(events(&mut agent).last(), Some(&IceEvent::ConsentExpired));
        assert!(!agent.may_send_to(from) && agent.poll_timeout().is_none());
        assert!(agent.handle(now, from, &browser_check(&agent, 10, false)).is_none());
        assert!(agent.poll_transmit().is_none());
    }

    #[test]
    fn full_mode_state_stays_bounded() {
        let mut agent = full_agent();
        for port in 0..100u16 {
            let _ = agent.handle(
                at(u64::from(port)),
                address(40_000 + port),
                &browser_check(&agent, port as u8, false),
            );
        }
        assert!(agent.checked_addresses().count() <= IceAgent::MAX_REMOTE_ADDRESSES);
        assert!(transmits(&mut agent).len() <= IceAgent::MAX_QUEUED_TRANSMITS);
        assert!(events(&mut agent).len() <= IceAgent::MAX_QUEUED_EVENTS);
        let full = agent.full.as_ref().unwrap();
        assert!(full.triggered.len() <= IceAgent::MAX_REMOTE_ADDRESSES);
    }

    #[test]
    fn the_full_config_checks_the_password_and_keeps_it_out_of_debug() {
        assert_eq!(FullConfig::new("short", &[0; 32]).unwrap_err(), CredentialsError::PwdLength(5));
        let config = full_config();
        assert!(!format!("{config:?}").contains(BROWSER_PWD));
        assert_ne!(config.tiebreaker(), FullConfig::new(BROWSER_PWD, &[6; 32]).unwrap().tiebreaker());
    }
}
