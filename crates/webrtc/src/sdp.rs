//! The data-channel subset of SDP offer/answer: what a server needs from a browser's offer, and
//! the ICE-lite answer it writes back.
//!
//! - syntax: RFC 8866 (`<type>=<value>` lines; CRLF or a bare LF read, CRLF written);
//! - offer/answer: JSEP (RFC 8829) and BUNDLE (RFC 8843);
//! - ICE: RFC 8839 (`ice-ufrag`, `ice-pwd`, `ice-options`, `ice-lite`, `candidate`) and
//!   RFC 8840 (`end-of-candidates`);
//! - DTLS: RFC 8122 (`fingerprint`) and RFC 8842 (`setup`, `tls-id`);
//! - SCTP over DTLS: RFC 8841 (`m=application 9 UDP/DTLS/SCTP webrtc-datachannel`,
//!   `sctp-port`, `max-message-size`);
//! - SNAP (draft-hancke-tsvwg-snap): `a=sctp-init:<base64>`, the SCTP INIT chunk carried in
//!   the SDP so that the SCTP handshake can be skipped.
//!
//! [`Offer::parse`] reads any description (a browser's offer, or our own answer back);
//! [`Answer::to_sdp`] writes the answer. Parsing untrusted input is bounded: at most
//! [`MAX_SDP_LEN`] bytes, [`MAX_LINES`] lines, [`MAX_MEDIA_SECTIONS`] media sections, and per
//! level [`MAX_FINGERPRINTS`] fingerprints, [`MAX_CANDIDATES`] candidates, [`MAX_ICE_OPTIONS`]
//! ICE options and [`MAX_GROUPS`] groups. Unknown attributes are skipped, not stored.

use std::fmt::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use subtle::ConstantTimeEq;

/// Largest description accepted, in bytes. Chromium's offer with one audio, one video and one
/// data section is 6.3 KB; this leaves room for many more media sections.
pub const MAX_SDP_LEN: usize = 128 * 1024;
/// Most lines accepted (Chromium's audio, video and data offer has 177).
pub const MAX_LINES: usize = 4096;
/// Most `m=` sections accepted.
pub const MAX_MEDIA_SECTIONS: usize = 64;
/// Most `a=fingerprint` lines at one level (session, or one media section).
pub const MAX_FINGERPRINTS: usize = 8;
/// Most `a=candidate` lines in one media section.
pub const MAX_CANDIDATES: usize = 64;
/// Most ICE option tags at one level.
pub const MAX_ICE_OPTIONS: usize = 16;
/// Most `a=group` lines.
pub const MAX_GROUPS: usize = 16;
/// Largest decoded `a=sctp-init` accepted; a longer one is ignored like a badly encoded one.
/// An INIT chunk with every extension a browser announces is well under 100 bytes.
pub const MAX_SCTP_INIT_LEN: usize = 2048;
/// The SCTP port when the section has no `a=sctp-port`, and the one we answer with.
pub const DEFAULT_SCTP_PORT: u16 = 5000;
/// The peer's message size limit when the section has no `a=max-message-size` (RFC 8841 §6).
pub const DEFAULT_MAX_MESSAGE_SIZE: u64 = 64 * 1024;

/// Longest fingerprint in bytes (SHA-512).
const MAX_FINGERPRINT_LEN: usize = 64;
/// Longest mid, hash function name or ICE option we store.
const MAX_TOKEN_LEN: usize = 256;
/// The media section proto of SCTP over DTLS over UDP (RFC 8841 §4.2).
const DATA_PROTO: &str = "UDP/DTLS/SCTP";
/// The fmt of a WebRTC data-channel section (RFC 8841 §4.3).
const DATA_FMT: &str = "webrtc-datachannel";

/// Why a description was refused. Line numbers count from 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SdpError {
    /// Longer than [`MAX_SDP_LEN`].
    #[error("the SDP is {len} bytes, more than the {max} accepted")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More than [`MAX_LINES`] lines.
    #[error("the SDP has more than {max} lines")]
    TooManyLines {
        /// The limit.
        max: usize,
    },
    /// More than [`MAX_MEDIA_SECTIONS`] media sections.
    #[error("line {line}: more than {max} media sections")]
    TooManyMediaSections {
        /// The `m=` line over the limit.
        line: usize,
        /// The limit.
        max: usize,
    },
    /// A bounded list grew past its bound.
    #[error("line {line}: more than {max} {what}")]
    TooMany {
        /// The line over the limit.
        line: usize,
        /// What was counted.
        what: &'static str,
        /// The limit.
        max: usize,
    },
    /// A NUL byte, or a carriage return not ending the line (RFC 8866 §5 forbids both).
    #[error("line {line}: NUL byte or carriage return inside the line")]
    ForbiddenCharacter {
        /// The line.
        line: usize,
    },
    /// A line that does not have the syntax its type requires.
    #[error("line {line}: {reason}")]
    Malformed {
        /// The line.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A type letter RFC 8866 does not define; §5 says to ignore such a description whole.
    #[error("line {line}: unknown line type '{letter}'")]
    UnknownLineType {
        /// The line.
        line: usize,
        /// Its type letter.
        letter: char,
    },
    /// A required line is absent.
    #[error("the SDP has no {0}= line")]
    MissingLine(char),
    /// An attribute that may appear once per level appears twice.
    #[error("line {line}: a second a={attribute} at the same level")]
    Duplicate {
        /// The second occurrence.
        line: usize,
        /// The attribute.
        attribute: &'static str,
    },
    /// Two media sections share a mid (RFC 5888 §4 requires them unique).
    #[error("line {line}: mid {mid} is already used by another media section")]
    DuplicateMid {
        /// The second occurrence.
        line: usize,
        /// The mid.
        mid: String,
    },
    /// An `a=fingerprint` line that cannot be read.
    #[error("line {line}: bad a=fingerprint: {reason}")]
    BadFingerprint {
        /// The line.
        line: usize,
        /// What is wrong with it.
        reason: FingerprintError,
    },
    /// An `a=candidate` line that cannot be read.
    #[error("line {line}: bad a=candidate: {reason}")]
    BadCandidate {
        /// The line.
        line: usize,
        /// What is wrong with it.
        reason: CandidateError,
    },
    /// No `m=application <port> UDP/DTLS/SCTP webrtc-datachannel` section with a non-zero
    /// port (or `a=bundle-only`). The legacy `DTLS/SCTP 5000` form (before RFC 8841) is not
    /// accepted.
    #[error("no data-channel section (m=application <port> UDP/DTLS/SCTP webrtc-datachannel) among the {sections} media sections")]
    NoDataSection {
        /// How many media sections the description had.
        sections: usize,
    },
    /// The data section has no ICE username fragment at any level.
    #[error("the data-channel section (media section {section}) has no a=ice-ufrag, neither its own nor at session level")]
    MissingIceUfrag {
        /// The data section's position among the media sections, from 1.
        section: usize,
    },
    /// The data section has no ICE password at any level.
    #[error("the data-channel section (media section {section}) has no a=ice-pwd, neither its own nor at session level")]
    MissingIcePwd {
        /// The data section's position among the media sections, from 1.
        section: usize,
    },
    /// The data section has no certificate fingerprint at any level, so DTLS cannot be
    /// authenticated (RFC 8122 §5).
    #[error("the data-channel section (media section {section}) has no a=fingerprint, neither its own nor at session level")]
    MissingFingerprint {
        /// The data section's position among the media sections, from 1.
        section: usize,
    },
    /// The offer's `a=setup` leaves us no DTLS server role: an offerer that is `passive` (or
    /// `holdconn`) must be answered `active`, and we only answer `passive`.
    #[error("the offer has a=setup:{}, but we answer only a=setup:passive (DTLS server)", .0.as_str())]
    SetupConflict(Setup),
    /// A value of the [`Answer`] that SDP cannot carry.
    #[error("the answer's {what} is not valid: {reason}")]
    BadAnswer {
        /// The field.
        what: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The DTLS role attribute `a=setup` (RFC 4145 §4, RFC 8842 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Setup {
    /// Will initiate the DTLS handshake (DTLS client).
    Active,
    /// Will wait for the handshake (DTLS server).
    Passive,
    /// Either; what an offerer must say (RFC 8842 §5.2).
    ActPass,
    /// Neither, for now.
    HoldConn,
}

impl Setup {
    /// Reads an attribute value (case-insensitive).
    pub fn parse(value: &str) -> Option<Setup> {
        [Setup::Active, Setup::Passive, Setup::ActPass, Setup::HoldConn]
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(value))
    }

    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            Setup::Active => "active",
            Setup::Passive => "passive",
            Setup::ActPass => "actpass",
            Setup::HoldConn => "holdconn",
        }
    }
}

/// A fingerprint hash function (RFC 8122 §5; the names of the IANA "Hash Function Textual
/// Names" registry). Names compare without case and are kept in lower case.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HashFunction {
    /// `sha-1`.
    Sha1,
    /// `sha-224`.
    Sha224,
    /// `sha-256`: the one browsers use and the one we verify.
    Sha256,
    /// `sha-384`.
    Sha384,
    /// `sha-512`.
    Sha512,
    /// `md5`.
    Md5,
    /// `md2`.
    Md2,
    /// Any other token, lower-cased.
    Other(String),
}

impl HashFunction {
    /// The hash function a name denotes; `None` unless the name is an SDP token of at most 32
    /// characters.
    pub fn from_name(name: &str) -> Option<HashFunction> {
        if name.is_empty() || name.len() > 32 || !name.bytes().all(is_token_char) {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        Some(match lower.as_str() {
            "sha-1" => HashFunction::Sha1,
            "sha-224" => HashFunction::Sha224,
            "sha-256" => HashFunction::Sha256,
            "sha-384" => HashFunction::Sha384,
            "sha-512" => HashFunction::Sha512,
            "md5" => HashFunction::Md5,
            "md2" => HashFunction::Md2,
            _ => HashFunction::Other(lower),
        })
    }

    /// The textual name.
    pub fn name(&self) -> &str {
        match self {
            HashFunction::Sha1 => "sha-1",
            HashFunction::Sha224 => "sha-224",
            HashFunction::Sha256 => "sha-256",
            HashFunction::Sha384 => "sha-384",
            HashFunction::Sha512 => "sha-512",
            HashFunction::Md5 => "md5",
            HashFunction::Md2 => "md2",
            HashFunction::Other(name) => name,
        }
    }

    /// The digest length in bytes, for the functions we know.
    pub fn digest_len(&self) -> Option<usize> {
        match self {
            HashFunction::Sha1 => Some(20),
            HashFunction::Sha224 => Some(28),
            HashFunction::Sha256 => Some(32),
            HashFunction::Sha384 => Some(48),
            HashFunction::Sha512 => Some(64),
            HashFunction::Md5 | HashFunction::Md2 => Some(16),
            HashFunction::Other(_) => None,
        }
    }
}

/// Why a fingerprint value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FingerprintError {
    /// Not `<hash function> <bytes>`.
    #[error("expected \"<hash function> <hex bytes>\" separated by one space")]
    Shape,
    /// The hash function is not a token of at most 32 characters.
    #[error("the hash function name is not an SDP token of at most 32 characters")]
    BadHashName,
    /// A byte is not two hex digits.
    #[error("byte {index} is not two hex digits (bytes are separated by ':')")]
    BadHex {
        /// Which byte, from 0.
        index: usize,
    },
    /// The length does not match the hash function's digest.
    #[error("{got} bytes given where the hash function has {expected}")]
    WrongLength {
        /// The digest length.
        expected: usize,
        /// The bytes given.
        got: usize,
    },
    /// More bytes than any supported digest.
    #[error("more than 64 bytes")]
    TooLong,
}

/// A certificate fingerprint, the value of `a=fingerprint` (RFC 8122 §5).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// The hash function.
    pub algorithm: HashFunction,
    /// The digest.
    pub bytes: Vec<u8>,
}

impl Fingerprint {
    /// A SHA-256 fingerprint of a digest computed elsewhere.
    pub fn sha256(digest: [u8; 32]) -> Fingerprint {
        Fingerprint { algorithm: HashFunction::Sha256, bytes: digest.to_vec() }
    }

    /// The SHA-256 fingerprint of a DER certificate: what we put in our answer.
    pub fn of_certificate(der: &[u8]) -> Fingerprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        Fingerprint { algorithm: HashFunction::Sha256, bytes: digest.as_ref().to_vec() }
    }

    /// Reads an attribute value, `sha-256 AB:CD:…`. Hex digits of either case are read.
    pub fn parse(value: &str) -> Result<Fingerprint, FingerprintError> {
        let (name, hex) = value.split_once(' ').ok_or(FingerprintError::Shape)?;
        let algorithm = HashFunction::from_name(name).ok_or(FingerprintError::BadHashName)?;
        if hex.is_empty() {
            return Err(FingerprintError::Shape);
        }
        let mut bytes = Vec::with_capacity(32);
        for (index, pair) in hex.split(':').enumerate() {
            if index == MAX_FINGERPRINT_LEN {
                return Err(FingerprintError::TooLong);
            }
            match pair.as_bytes() {
                [hi, lo] => match (hex_value(*hi), hex_value(*lo)) {
                    (Some(hi), Some(lo)) => bytes.push(hi << 4 | lo),
                    _ => return Err(FingerprintError::BadHex { index }),
                },
                _ => return Err(FingerprintError::BadHex { index }),
            }
        }
        if let Some(expected) = algorithm.digest_len() {
            if bytes.len() != expected {
                return Err(FingerprintError::WrongLength { expected, got: bytes.len() });
            }
        }
        Ok(Fingerprint { algorithm, bytes })
    }

    /// Whether `der` (the certificate the peer presented in DTLS) has this fingerprint.
    /// Only SHA-256, SHA-384 and SHA-512 are computed; any other function never matches
    /// (SHA-1 and MD5 are too weak to authenticate a peer, RFC 8122 §5).
    pub fn matches_certificate(&self, der: &[u8]) -> bool {
        let algorithm = match self.algorithm {
            HashFunction::Sha256 => &ring::digest::SHA256,
            HashFunction::Sha384 => &ring::digest::SHA384,
            HashFunction::Sha512 => &ring::digest::SHA512,
            _ => return false,
        };
        let digest = ring::digest::digest(algorithm, der);
        digest.as_ref().len() == self.bytes.len() && bool::from(digest.as_ref().ct_eq(&self.bytes))
    }
}

/// The attribute value: hash function in lower case, bytes in upper-case hex joined by colons
/// (RFC 8122 §5).
impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.algorithm.name())?;
        for (i, b) in self.bytes.iter().enumerate() {
            write!(f, "{}{b:02X}", if i == 0 { ' ' } else { ':' })?;
        }
        Ok(())
    }
}

/// The address of an ICE candidate: an IP address, or a hostname such as the mDNS
/// `<uuid>.local` names browsers use to hide local addresses.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CandidateAddress {
    /// A literal IPv4 or IPv6 address.
    Ip(IpAddr),
    /// A hostname (RFC 8839 §5.1 allows an FQDN).
    Hostname(String),
}

impl fmt::Display for CandidateAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CandidateAddress::Ip(ip) => ip.fmt(f),
            CandidateAddress::Hostname(name) => f.write_str(name),
        }
    }
}

/// The candidate type (RFC 8445 §5.1.1, RFC 8839 §5.1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CandidateType {
    /// `host`.
    Host,
    /// `srflx`.
    ServerReflexive,
    /// `prflx`.
    PeerReflexive,
    /// `relay`.
    Relay,
    /// Another token.
    Other(String),
}

impl CandidateType {
    fn parse(token: &str) -> CandidateType {
        match token {
            "host" => CandidateType::Host,
            "srflx" => CandidateType::ServerReflexive,
            "prflx" => CandidateType::PeerReflexive,
            "relay" => CandidateType::Relay,
            other => CandidateType::Other(other.to_owned()),
        }
    }

    /// The token.
    pub fn as_str(&self) -> &str {
        match self {
            CandidateType::Host => "host",
            CandidateType::ServerReflexive => "srflx",
            CandidateType::PeerReflexive => "prflx",
            CandidateType::Relay => "relay",
            CandidateType::Other(token) => token,
        }
    }
}

/// Why an `a=candidate` value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct CandidateError {
    /// What is wrong.
    pub reason: &'static str,
}

fn candidate_error(reason: &'static str) -> CandidateError {
    CandidateError { reason }
}

/// An ICE candidate, the value of `a=candidate` (RFC 8839 §5.1). Extensions other than
/// `raddr`/`rport` (Chromium's `generation`, `network-cost`, `ufrag`…) are read and dropped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// 1 to 32 ice-chars; equal for candidates of the same type, base and server.
    pub foundation: String,
    /// 1 to 256; 1 is RTP, and the only component of a data channel.
    pub component: u16,
    /// `UDP` (any case), or another transport token such as `tcp`.
    pub transport: String,
    /// 1 to 2^31 − 1 (RFC 8445 §5.1.2.1).
    pub priority: u32,
    /// The address.
    pub address: CandidateAddress,
    /// The port.
    pub port: u16,
    /// The type.
    pub kind: CandidateType,
    /// `raddr`, for reflexive and relayed candidates.
    pub related_address: Option<CandidateAddress>,
    /// `rport`.
    pub related_port: Option<u16>,
}

impl Candidate {
    /// Reads an attribute value (what follows `a=candidate:`).
    pub fn parse(value: &str) -> Result<Candidate, CandidateError> {
        let mut it = value.split(' ');
        let mut next = |what: &'static str| it.next().filter(|t| !t.is_empty()).ok_or(candidate_error(what));
        let foundation = next("no foundation")?;
        if foundation.len() > 32 || !foundation.bytes().all(is_ice_char) {
            return Err(candidate_error("the foundation is not 1 to 32 ice-chars"));
        }
        let component = parse_number(next("no component id")?, 3)
            .filter(|c| (1..=256).contains(c))
            .ok_or(candidate_error("the component id is not a number from 1 to 256"))?;
        let transport = next("no transport")?;
        if transport.len() > 32 || !transport.bytes().all(is_token_char) {
            return Err(candidate_error("the transport is not a token"));
        }
        let priority = parse_number(next("no priority")?, 10)
            .filter(|p| (1..=(1 << 31) - 1).contains(p))
            .ok_or(candidate_error("the priority is not a number from 1 to 2^31-1"))?;
        let address = parse_candidate_address(next("no address")?)?;
        let port = parse_port(next("no port")?)
            .ok_or(candidate_error("the port is not a number from 0 to 65535"))?;
        if next("no \"typ\"")? != "typ" {
            return Err(candidate_error("\"typ\" expected after the port"));
        }
        let kind = next("no candidate type")?;
        if kind.len() > 32 || !kind.bytes().all(is_token_char) {
            return Err(candidate_error("the candidate type is not a token"));
        }
        let mut candidate = Candidate {
            foundation: foundation.to_owned(),
            component: component as u16,
            transport: transport.to_owned(),
            priority: priority as u32,
            address,
            port,
            kind: CandidateType::parse(kind),
            related_address: None,
            related_port: None,
        };
        // Extensions come in name/value pairs (RFC 8839 §5.1 cand-extension).
        while let Some(name) = it.next() {
            let value =
                it.next().filter(|v| !v.is_empty()).ok_or(candidate_error("an extension without a value"))?;
            match name {
                "raddr" => candidate.related_address = Some(parse_candidate_address(value)?),
                "rport" => {
                    candidate.related_port = Some(
                        parse_port(value).ok_or(candidate_error("rport is not a number from 0 to 65535"))?,
                    )
                }
                _ if name.is_empty() || !name.bytes().all(is_token_char) => {
                    return Err(candidate_error("an extension name is not a token"))
                }
                _ => {}
            }
        }
        Ok(candidate)
    }

    /// Whether the transport is UDP (the name compares without case: RFC 8839 writes `UDP`,
    /// browsers `udp`).
    pub fn is_udp(&self) -> bool {
        self.transport.eq_ignore_ascii_case("UDP")
    }

    /// A host candidate for one of our UDP addresses, component 1, with the priority of
    /// RFC 8445 §5.1.2.1 for type preference 126 and the given local preference.
    pub fn host(foundation: u32, address: SocketAddr, local_preference: u16) -> Candidate {
        Candidate {
            foundation: foundation.to_string(),
            component: 1,
            transport: "UDP".to_owned(),
            priority: candidate_priority(126, local_preference, 1),
            address: CandidateAddress::Ip(address.ip()),
            port: address.port(),
            kind: CandidateType::Host,
            related_address: None,
            related_port: None,
        }
    }
}

/// The attribute value, without `candidate:`.
impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} typ {}",
            self.foundation,
            self.component,
            self.transport,
            self.priority,
            self.address,
            self.port,
            self.kind.as_str()
        )?;
        if let Some(address) = &self.related_address {
            write!(f, " raddr {address}")?;
        }
        if let Some(port) = self.related_port {
            write!(f, " rport {port}")?;
        }
        Ok(())
    }
}

/// A candidate priority, RFC 8445 §5.1.2.1:
/// `2^24 × type preference + 2^8 × local preference + (256 − component)`.
/// The type preference is capped at 126 (host), the component taken from 1 to 256.
pub fn candidate_priority(type_preference: u8, local_preference: u16, component: u16) -> u32 {
    let component = u32::from(component.clamp(1, 256));
    (u32::from(type_preference.min(126)) << 24) + (u32::from(local_preference) << 8) + (256 - component)
}

/// ICE, DTLS and candidate attributes, as written at one level (session or media section).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportAttributes {
    /// `a=ice-ufrag`.
    pub ice_ufrag: Option<String>,
    /// `a=ice-pwd`.
    pub ice_pwd: Option<String>,
    /// `a=ice-options` tags, e.g. `trickle`.
    pub ice_options: Vec<String>,
    /// Every `a=fingerprint`.
    pub fingerprints: Vec<Fingerprint>,
    /// `a=setup`.
    pub setup: Option<Setup>,
    /// `a=end-of-candidates` (RFC 8840 §8.2).
    pub end_of_candidates: bool,
}

/// One `m=` section, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaSection {
    /// `audio`, `video`, `application`…
    pub media: String,
    /// The port; 0 for a rejected or bundle-only section.
    pub port: u16,
    /// E.g. `UDP/DTLS/SCTP` or `UDP/TLS/RTP/SAVPF`.
    pub proto: String,
    /// The format list, tokens separated by single spaces.
    pub fmt: String,
    /// `a=mid` (RFC 5888).
    pub mid: Option<String>,
    /// `a=bundle-only` (RFC 8843 §6).
    pub bundle_only: bool,
    /// The section's own ICE and DTLS attributes.
    pub transport: TransportAttributes,
    /// `a=tls-id` (RFC 8842 §4).
    pub tls_id: Option<String>,
    /// `a=sctp-port`, as written.
    pub sctp_port: Option<u16>,
    /// `a=max-message-size`, as written.
    pub max_message_size: Option<u64>,
    /// `a=sctp-init`, decoded; `None` also when it was not valid base64 or longer than
    /// [`MAX_SCTP_INIT_LEN`] (the SNAP draft's "Answerer Processing of the SDP Offer" says to
    /// ignore such a line silently).
    pub sctp_init: Option<Vec<u8>>,
    /// `a=candidate` lines.
    pub candidates: Vec<Candidate>,
}

impl MediaSection {
    /// Whether this is an RFC 8841 data-channel section.
    pub fn is_data_channel(&self) -> bool {
        self.media == "application"
            && self.proto.eq_ignore_ascii_case(DATA_PROTO)
            && self.fmt.split(' ').any(|f| f == DATA_FMT)
    }
}

/// The data-channel section's values, each resolved across levels: the section's own
/// attribute, else that of the section carrying its BUNDLE group's tag (RFC 8843 §7.2.1, for
/// `bundle-only` sections), else the session-level one; SCTP values take their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSection {
    /// Its index in [`Offer::media`].
    pub index: usize,
    /// Its mid.
    pub mid: Option<String>,
    /// The peer's ICE username fragment.
    pub ice_ufrag: String,
    /// The peer's ICE password.
    pub ice_pwd: String,
    /// The peer's ICE options.
    pub ice_options: Vec<String>,
    /// Every fingerprint of the peer's certificate, whatever the hash function.
    pub fingerprints: Vec<Fingerprint>,
    /// The peer's DTLS role attribute.
    pub setup: Option<Setup>,
    /// The peer's DTLS association id.
    pub tls_id: Option<String>,
    /// The peer's SCTP port ([`DEFAULT_SCTP_PORT`] when absent).
    pub sctp_port: u16,
    /// The largest message the peer accepts: [`DEFAULT_MAX_MESSAGE_SIZE`] when absent, 0 for
    /// no limit (RFC 8841 §6).
    pub max_message_size: u64,
    /// The peer's SCTP INIT chunk (SNAP).
    pub sctp_init: Option<Vec<u8>>,
    /// The peer's candidates.
    pub candidates: Vec<Candidate>,
    /// Whether the peer said it has no more candidates.
    pub end_of_candidates: bool,
}

impl DataSection {
    /// The SHA-256 fingerprints.
    pub fn sha256_fingerprints(&self) -> impl Iterator<Item = &Fingerprint> {
        self.fingerprints.iter().filter(|f| f.algorithm == HashFunction::Sha256)
    }

    /// Whether `der`, the certificate the peer presented in its DTLS handshake, has one of the
    /// offer's SHA-256 fingerprints. Fingerprints of other functions are not consulted.
    pub fn certificate_matches(&self, der: &[u8]) -> bool {
        self.sha256_fingerprints().any(|f| f.matches_certificate(der))
    }

    /// The peer's message size limit, `None` when it has none.
    pub fn max_message_limit(&self) -> Option<u64> {
        (self.max_message_size != 0).then_some(self.max_message_size)
    }

    /// Whether the peer trickles candidates (`a=ice-options:trickle`, RFC 8840).
    pub fn trickle(&self) -> bool {
        self.ice_options.iter().any(|o| o == "trickle")
    }
}

/// A parsed description: in practice a browser's offer, but any description in the subset
/// parses, our own answers included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// Session-level attributes.
    pub session: TransportAttributes,
    /// `a=ice-lite` at session level (RFC 8839 §5.3).
    pub ice_lite: bool,
    /// The mids of each `a=group:BUNDLE`.
    pub bundle_groups: Vec<Vec<String>>,
    /// Every media section, in order.
    pub media: Vec<MediaSection>,
    /// The data-channel section, resolved.
    pub data: DataSection,
}

impl Offer {
    /// Parses a description and resolves its data-channel section.
    pub fn parse(sdp: &str) -> Result<Offer, SdpError> {
        if sdp.len() > MAX_SDP_LEN {
            return Err(SdpError::TooLarge { len: sdp.len(), max: MAX_SDP_LEN });
        }
        let mut p = Parser::default();
        for (i, raw) in sdp.split('\n').enumerate() {
            let line = i + 1;
            if line > MAX_LINES {
                return Err(SdpError::TooManyLines { max: MAX_LINES });
            }
            // RFC 8866 §5: records end in CRLF, but a bare LF should be accepted too.
            let text = raw.strip_suffix('\r').unwrap_or(raw);
            if text.is_empty() {
                continue;
            }
            if text.bytes().any(|b| b == b'\r' || b == 0) {
                return Err(SdpError::ForbiddenCharacter { line });
            }
            p.line(line, text)?;
        }
        p.finish()
    }
}

/// Parser state: what was seen so far.
#[derive(Default)]
struct Parser {
    /// Non-blank lines read.
    count: usize,
    seen_t: bool,
    session: TransportAttributes,
    ice_lite: bool,
    groups: usize,
    bundle_groups: Vec<Vec<String>>,
    media: Vec<MediaSection>,
}

impl Parser {
    fn line(&mut self, line: usize, text: &str) -> Result<(), SdpError> {
        let bytes = text.as_bytes();
        if bytes.len() < 2 || bytes[1] != b'=' || !bytes[0].is_ascii_lowercase() {
            return Err(SdpError::Malformed { line, reason: "a line must be <lower-case letter>=<value>" });
        }
        let kind = bytes[0] as char;
        let value = &text[2..];
        // RFC 8866 §5: the description starts with v=, o= and s=, in that order.
        let expected = match self.count {
            0 => Some('v'),
            1 => Some('o'),
            2 => Some('s'),
            _ => None,
        };
        self.count += 1;
        if let Some(expected) = expected {
            if kind != expected {
                return Err(SdpError::Malformed {
                    line,
                    reason: "the description must begin with a v=, an o= and an s= line (RFC 8866 §5)",
                });
            }
        } else if matches!(kind, 'v' | 'o' | 's') {
            return Err(SdpError::Malformed { line, reason: "a second v=, o= or s= line" });
        }
        match kind {
            'v' if value != "0" => {
                Err(SdpError::Malformed { line, reason: "only SDP version 0 exists (v=0)" })
            }
            'v' | 's' => Ok(()),
            'o' => check_origin(line, value),
            't' => {
                if !self.media.is_empty() {
                    return Err(SdpError::Malformed { line, reason: "t= inside a media section" });
                }
                let mut it = value.split(' ');
                match (
                    it.next().and_then(|v| parse_number(v, 20)),
                    it.next().and_then(|v| parse_number(v, 20)),
                ) {
                    (Some(_), Some(_)) if it.next().is_none() => {
                        self.seen_t = true;
                        Ok(())
                    }
                    _ => Err(SdpError::Malformed { line, reason: "t= must hold two decimal times" }),
                }
            }
            'm' => self.media_line(line, value),
            'a' => self.attribute(line, value),
            // Lines we have no use for (RFC 8866 §5.4 to §5.12).
            'i' | 'u' | 'e' | 'p' | 'c' | 'b' | 'r' | 'z' | 'k' => Ok(()),
            letter => Err(SdpError::UnknownLineType { line, letter }),
        }
    }

    fn media_line(&mut self, line: usize, value: &str) -> Result<(), SdpError> {
        if !self.seen_t {
            return Err(SdpError::MissingLine('t'));
        }
        if self.media.len() == MAX_MEDIA_SECTIONS {
            return Err(SdpError::TooManyMediaSections { line, max: MAX_MEDIA_SECTIONS });
        }
        const SHAPE: &str = "m= must be <media> <port> <proto> <fmt> ...";
        let mut it = value.split(' ');
        let media = it.next().filter(|t| is_token(t)).ok_or(SdpError::Malformed { line, reason: SHAPE })?;
        let port_field = it.next().ok_or(SdpError::Malformed { line, reason: SHAPE })?;
        // RFC 8866 §5.14: <port>[/<number of ports>]; only the port matters here.
        let port = parse_port(port_field.split('/').next().unwrap_or(""))
            .ok_or(SdpError::Malformed { line, reason: "the m= port is not a number from 0 to 65535" })?;
        let proto = it.next().filter(|t| !t.is_empty()).ok_or(SdpError::Malformed { line, reason: SHAPE })?;
        if proto.len() > MAX_TOKEN_LEN || !proto.split('/').all(is_token) {
            return Err(SdpError::Malformed { line, reason: "the m= proto is not tokens separated by '/'" });
        }
        let mut fmt = String::new();
        for f in it {
            if !is_token(f) {
                return Err(SdpError::Malformed { line, reason: "an m= format is not a token" });
            }
            if !fmt.is_empty() {
                fmt.push(' ');
            }
            fmt.push_str(f);
        }
        if fmt.is_empty() {
            return Err(SdpError::Malformed { line, reason: SHAPE });
        }
        self.media.push(MediaSection {
            media: media.to_owned(),
            port,
            proto: proto.to_owned(),
            fmt,
            mid: None,
            bundle_only: false,
            transport: TransportAttributes::default(),
            tls_id: None,
            sctp_port: None,
            max_message_size: None,
            sctp_init: None,
            candidates: Vec::new(),
        });
        Ok(())
    }

    fn transport(&mut self) -> &mut TransportAttributes {
        match self.media.last_mut() {
            Some(m) => &mut m.transport,
            None => &mut self.session,
        }
    }

    fn attribute(&mut self, line: usize, value: &str) -> Result<(), SdpError> {
        let (name, arg) = match value.split_once(':') {
            Some((name, arg)) => (name, Some(arg)),
            None => (value, None),
        };
        let arg =
            || arg.ok_or(SdpError::Malformed { line, reason: "this attribute needs a value after ':'" });
        match name {
            "ice-ufrag" => {
                // RFC 8839 §5.4: 4 to 256 ice-chars.
                let v = ice_credential(
                    line,
                    arg()?,
                    4,
                    "a=ice-ufrag must be 4 to 256 ice-chars (A-Z a-z 0-9 + /)",
                )?;
                set_once(&mut self.transport().ice_ufrag, v, line, "ice-ufrag")
            }
            "ice-pwd" => {
                let v = ice_credential(
                    line,
                    arg()?,
                    22,
                    "a=ice-pwd must be 22 to 256 ice-chars (A-Z a-z 0-9 + /)",
                )?;
                set_once(&mut self.transport().ice_pwd, v, line, "ice-pwd")
            }
            "ice-options" => {
                let value = arg()?;
                let options = &mut self.transport().ice_options;
                for tag in value.split(' ') {
                    if tag.is_empty() || tag.len() > MAX_TOKEN_LEN || !tag.bytes().all(is_ice_char) {
                        return Err(SdpError::Malformed { line, reason: "an ICE option is not 1*ice-char" });
                    }
                    if options.len() == MAX_ICE_OPTIONS {
                        return Err(SdpError::TooMany { line, what: "ICE options", max: MAX_ICE_OPTIONS });
                    }
                    options.push(tag.to_owned());
                }
                Ok(())
            }
            "ice-lite" => {
                self.ice_lite |= self.media.is_empty(); // a session-level attribute
                Ok(())
            }
            "fingerprint" => {
                let fingerprint =
                    Fingerprint::parse(arg()?).map_err(|reason| SdpError::BadFingerprint { line, reason })?;
                let list = &mut self.transport().fingerprints;
                if list.len() == MAX_FINGERPRINTS {
                    return Err(SdpError::TooMany { line, what: "fingerprints", max: MAX_FINGERPRINTS });
                }
                list.push(fingerprint);
                Ok(())
            }
            "setup" => {
                let setup = Setup::parse(arg()?).ok_or(SdpError::Malformed {
                    line,
                    reason: "a=setup must be active, passive, actpass or holdconn",
                })?;
                set_once(&mut self.transport().setup, setup, line, "setup")
            }
            "end-of-candidates" => {
                self.transport().end_of_candidates = true;
                Ok(())
            }
            "group" if self.media.is_empty() => self.group(line, arg()?),
            _ => match self.media.split_last_mut() {
                Some((section, others)) => media_attribute(line, name, &arg, section, others),
                // The rest are media-level attributes: at session level they mean nothing.
                None => Ok(()),
            },
        }
    }

    /// `a=group:<semantics> <mid> ...` (RFC 5888 §5); only BUNDLE groups are kept.
    fn group(&mut self, line: usize, value: &str) -> Result<(), SdpError> {
        if self.groups == MAX_GROUPS {
            return Err(SdpError::TooMany { line, what: "groups", max: MAX_GROUPS });
        }
        self.groups += 1;
        let mut it = value.split(' ');
        let semantics = it.next().unwrap_or("");
        if !is_token(semantics) {
            return Err(SdpError::Malformed { line, reason: "a=group semantics is not a token" });
        }
        let mut mids = Vec::new();
        for mid in it {
            if !is_token(mid) {
                return Err(SdpError::Malformed { line, reason: "a mid in a=group is not a token" });
            }
            if mids.len() == MAX_MEDIA_SECTIONS {
                return Err(SdpError::TooMany { line, what: "mids in a group", max: MAX_MEDIA_SECTIONS });
            }
            mids.push(mid.to_owned());
        }
        if semantics == "BUNDLE" {
            self.bundle_groups.push(mids);
        }
        Ok(())
    }

    fn finish(self) -> Result<Offer, SdpError> {
        for (n, letter) in ['v', 'o', 's'].into_iter().enumerate() {
            if self.count <= n {
                return Err(SdpError::MissingLine(letter));
            }
        }
        if !self.seen_t {
            return Err(SdpError::MissingLine('t'));
        }
        let data = resolve(&self.session, &self.bundle_groups, &self.media)?;
        Ok(Offer {
            session: self.session,
            ice_lite: self.ice_lite,
            bundle_groups: self.bundle_groups,
            media: self.media,
            data,
        })
    }
}

/// A media-level attribute (RFC 8839 §5.1, RFC 8841 §5–6, RFC 8842 §4, RFC 5888 §4, RFC 8843
/// §6, SNAP) of `section`; `others` are the sections before it.
fn media_attribute<'a>(
    line: usize,
    name: &str,
    arg: &dyn Fn() -> Result<&'a str, SdpError>,
    section: &mut MediaSection,
    others: &[MediaSection],
) -> Result<(), SdpError> {
    match name {
        "mid" => {
            let v = arg()?;
            if !is_token(v) {
                return Err(SdpError::Malformed {
                    line,
                    reason: "a=mid is not a token of at most 256 characters",
                });
            }
            if others.iter().any(|m| m.mid.as_deref() == Some(v)) {
                return Err(SdpError::DuplicateMid { line, mid: v.to_owned() });
            }
            set_once(&mut section.mid, v.to_owned(), line, "mid")
        }
        "bundle-only" => {
            section.bundle_only = true;
            Ok(())
        }
        "tls-id" => {
            let v = arg()?;
            // RFC 8842 §4: 20 to 255 of ALPHA / DIGIT / "+" / "/" / "-" / "_".
            if !(20..=255).contains(&v.len())
                || !v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'))
            {
                return Err(SdpError::Malformed {
                    line,
                    reason: "a=tls-id must be 20 to 255 of A-Z a-z 0-9 + / - _",
                });
            }
            set_once(&mut section.tls_id, v.to_owned(), line, "tls-id")
        }
        "sctp-port" => {
            let port = parse_port(arg()?)
                .filter(|p| *p != 0)
                .ok_or(SdpError::Malformed { line, reason: "a=sctp-port is not a number from 1 to 65535" })?;
            set_once(&mut section.sctp_port, port, line, "sctp-port")
        }
        "max-message-size" => {
            let size = parse_number(arg()?, 20).ok_or(SdpError::Malformed {
                line,
                reason: "a=max-message-size is not a decimal number below 2^64",
            })?;
            set_once(&mut section.max_message_size, size, line, "max-message-size")
        }
        "sctp-init" => {
            let v = arg()?;
            if section.sctp_init.is_some() {
                return Err(SdpError::Duplicate { line, attribute: "sctp-init" });
            }
            // SNAP, "Answerer Processing of the SDP Offer": a value that is not base64 is
            // ignored silently, not an error.
            section.sctp_init = base64_decode(v, MAX_SCTP_INIT_LEN);
            Ok(())
        }
        "candidate" => {
            let candidate =
                Candidate::parse(arg()?).map_err(|reason| SdpError::BadCandidate { line, reason })?;
            if section.candidates.len() == MAX_CANDIDATES {
                return Err(SdpError::TooMany { line, what: "candidates", max: MAX_CANDIDATES });
            }
            section.candidates.push(candidate);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Picks the first usable data-channel section and resolves its values across levels.
fn resolve(
    session: &TransportAttributes,
    groups: &[Vec<String>],
    media: &[MediaSection],
) -> Result<DataSection, SdpError> {
    let index = media
        .iter()
        .position(|m| m.is_data_channel() && (m.port != 0 || m.bundle_only))
        .ok_or(SdpError::NoDataSection { sections: media.len() })?;
    let data = &media[index];
    // RFC 8843 §7.2.1: a bundled section's transport is that of the group's tag, the first
    // mid of the group. Browsers repeat the attributes in every section; a bundle-only
    // section need not.
    let tag = data.mid.as_deref().and_then(|mid| {
        let group = groups.iter().find(|g| g.iter().any(|m| m == mid))?;
        let tag = group.first()?;
        media.iter().find(|m| m.mid.as_deref() == Some(tag.as_str()))
    });
    let levels: Vec<&TransportAttributes> =
        [Some(&data.transport), tag.map(|t| &t.transport), Some(session)].into_iter().flatten().collect();
    let section = index + 1;
    let ice_ufrag =
        levels.iter().find_map(|l| l.ice_ufrag.clone()).ok_or(SdpError::MissingIceUfrag { section })?;
    let ice_pwd = levels.iter().find_map(|l| l.ice_pwd.clone()).ok_or(SdpError::MissingIcePwd { section })?;
    // Media-level fingerprints and options replace session-level ones (RFC 8122 §5).
    let fingerprints = levels
        .iter()
        .map(|l| &l.fingerprints)
        .find(|f| !f.is_empty())
        .cloned()
        .ok_or(SdpError::MissingFingerprint { section })?;
    let ice_options =
        levels.iter().map(|l| &l.ice_options).find(|o| !o.is_empty()).cloned().unwrap_or_default();
    let setup = levels.iter().find_map(|l| l.setup);
    let candidates = match (&data.candidates, tag) {
        (own, Some(tag)) if own.is_empty() => tag.candidates.clone(),
        (own, _) => own.clone(),
    };
    Ok(DataSection {
        index,
        mid: data.mid.clone(),
        ice_ufrag,
        ice_pwd,
        ice_options,
        fingerprints,
        setup,
        tls_id: data.tls_id.clone().or_else(|| tag.and_then(|t| t.tls_id.clone())),
        sctp_port: data.sctp_port.unwrap_or(DEFAULT_SCTP_PORT),
        max_message_size: data.max_message_size.unwrap_or(DEFAULT_MAX_MESSAGE_SIZE),
        sctp_init: data.sctp_init.clone(),
        candidates,
        end_of_candidates: levels.iter().any(|l| l.end_of_candidates),
    })
}

/// What we put in an answer. [`Answer::to_sdp`] writes it against the offer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// A random number from the caller; written modulo 2^62 − 1 (RFC 8829 §5.2.1 wants the
    /// initial sess-id below that, so it can be incremented as a signed 64-bit integer).
    pub session_id: u64,
    /// Whether we are an ICE-lite agent: `a=ice-lite` at session level (RFC 8839 §5.3). A full
    /// agent leaves it out, and the browser then expects and answers our checks.
    pub ice_lite: bool,
    /// Our ICE username fragment: 4 to 256 ice-chars (RFC 8839 §5.4).
    pub ice_ufrag: String,
    /// Our ICE password: 22 to 256 ice-chars.
    pub ice_pwd: String,
    /// Our ICE options; none written when empty (an ICE-lite agent that lists all its
    /// candidates and `a=end-of-candidates` needs none).
    pub ice_options: Vec<String>,
    /// The fingerprint of our DTLS certificate.
    pub fingerprint: Fingerprint,
    /// The largest message we accept (0 for no limit).
    pub max_message_size: u64,
    /// Our SCTP INIT chunk, for SNAP. Written only if the offer carried a valid one (SNAP,
    /// "Generating the SDP Answer").
    pub sctp_init: Option<Vec<u8>>,
    /// Our UDP addresses, most preferred first; each becomes a host candidate.
    pub addresses: Vec<SocketAddr>,
}

impl Answer {
    /// Writes the answer to `offer` (RFC 8829 §5.3.1), CRLF line ends: session lines (with
    /// `a=ice-lite` if [`Answer::ice_lite`]), then every offered media section in the offer's
    /// order. The data
    /// section is accepted with our transport; every other one is rejected with port 0 and
    /// only its mid.
    ///
    /// We answer `a=setup:passive` and so are the DTLS server: RFC 8842 §5.3 lets the answerer
    /// of `actpass` (or of `active`, or of an offer without `a=setup`, which RFC 4145 §4 reads
    /// as `active`) choose `passive`. An offer that is itself `passive` or `holdconn` is
    /// refused.
    pub fn to_sdp(&self, offer: &Offer) -> Result<String, SdpError> {
        self.check()?;
        if let Some(setup @ (Setup::Passive | Setup::HoldConn)) = offer.data.setup {
            return Err(SdpError::SetupConflict(setup));
        }
        let data = &offer.data;
        let mut out = String::with_capacity(768 + 96 * self.addresses.len() + 64 * offer.media.len());
        // RFC 8829 §5.2.1: username "-", and a non-meaningful address so that none leaks.
        push_line(&mut out, format_args!("v=0"));
        push_line(&mut out, format_args!("o=- {} 1 IN IP4 0.0.0.0", self.session_id % ((1 << 62) - 1)));
        push_line(&mut out, format_args!("s=-"));
        push_line(&mut out, format_args!("t=0 0"));
        if self.ice_lite {
            push_line(&mut out, format_args!("a=ice-lite"));
        }
        // RFC 8843 §7.3: the answer's group holds the accepted mids of an offered group.
        if let Some(mid) = &data.mid {
            if offer.bundle_groups.iter().any(|g| g.contains(mid)) {
                push_line(&mut out, format_args!("a=group:BUNDLE {mid}"));
            }
        }
        for (i, m) in offer.media.iter().enumerate() {
            if i != data.index {
                // RFC 8829 §5.3.1: a rejected section keeps media, proto and formats with port
                // 0. RFC 8866 §5.7 wants a c= line in every section when the session has none.
                push_line(&mut out, format_args!("m={} 0 {} {}", m.media, m.proto, m.fmt));
                push_line(&mut out, format_args!("c=IN IP4 0.0.0.0"));
                if let Some(mid) = &m.mid {
                    push_line(&mut out, format_args!("a=mid:{mid}"));
                }
                continue;
            }
            // RFC 8839 §4.2.1: the default candidate goes in m= and c= (our first); with
            // none, the placeholders port 9 and 0.0.0.0 of RFC 8829 §5.2.1.
            let (port, ip) = match self.addresses.first() {
                Some(a) => (a.port(), a.ip()),
                None => (9, IpAddr::from([0, 0, 0, 0])),
            };
            push_line(&mut out, format_args!("m=application {port} {DATA_PROTO} {DATA_FMT}"));
            let family = if ip.is_ipv4() { "IP4" } else { "IP6" };
            push_line(&mut out, format_args!("c=IN {family} {ip}"));
            push_line(&mut out, format_args!("a=ice-ufrag:{}", self.ice_ufrag));
            push_line(&mut out, format_args!("a=ice-pwd:{}", self.ice_pwd));
            if !self.ice_options.is_empty() {
                push_line(&mut out, format_args!("a=ice-options:{}", self.ice_options.join(" ")));
            }
            push_line(&mut out, format_args!("a=fingerprint:{}", self.fingerprint));
            push_line(&mut out, format_args!("a=setup:{}", Setup::Passive.as_str()));
            if let Some(mid) = &data.mid {
                push_line(&mut out, format_args!("a=mid:{mid}"));
            }
            push_line(&mut out, format_args!("a=sctp-port:{DEFAULT_SCTP_PORT}"));
            push_line(&mut out, format_args!("a=max-message-size:{}", self.max_message_size));
            if let (Some(ours), Some(_)) = (&self.sctp_init, &data.sctp_init) {
                push_line(&mut out, format_args!("a=sctp-init:{}", base64_encode(ours)));
            }
            // RFC 8445 §5.1.2.1: the local preference must differ between candidates of one
            // component; the first address gets 65535, the RFC's value for a single address.
            for (n, address) in self.addresses.iter().enumerate() {
                let candidate = Candidate::host(n as u32 + 1, *address, 65535 - n as u16);
                push_line(&mut out, format_args!("a=candidate:{candidate}"));
            }
            push_line(&mut out, format_args!("a=end-of-candidates"));
        }
        Ok(out)
    }

    /// Refuses values that SDP cannot carry, or that would inject lines.
    fn check(&self) -> Result<(), SdpError> {
        let bad = |what, reason| Err(SdpError::BadAnswer { what, reason });
        if !(4..=256).contains(&self.ice_ufrag.len()) || !self.ice_ufrag.bytes().all(is_ice_char) {
            return bad("ice_ufrag", "not 4 to 256 ice-chars (A-Z a-z 0-9 + /)");
        }
        if !(22..=256).contains(&self.ice_pwd.len()) || !self.ice_pwd.bytes().all(is_ice_char) {
            return bad("ice_pwd", "not 22 to 256 ice-chars (A-Z a-z 0-9 + /)");
        }
        if self.ice_options.iter().any(|o| o.is_empty() || !o.bytes().all(is_ice_char)) {
            return bad("ice_options", "an option is not 1*ice-char");
        }
        if HashFunction::from_name(self.fingerprint.algorithm.name()).as_ref()
            != Some(&self.fingerprint.algorithm)
            || self.fingerprint.bytes.is_empty()
            || self.fingerprint.bytes.len() > MAX_FINGERPRINT_LEN
            || self.fingerprint.algorithm.digest_len().is_some_and(|n| n != self.fingerprint.bytes.len())
        {
            return bad("fingerprint", "not a lower-case hash function token with a digest of its length");
        }
        if self.sctp_init.as_ref().is_some_and(|i| i.is_empty() || i.len() > MAX_SCTP_INIT_LEN) {
            return bad("sctp_init", "empty, or longer than MAX_SCTP_INIT_LEN");
        }
        if self.addresses.len() > MAX_CANDIDATES {
            return bad("addresses", "more than MAX_CANDIDATES");
        }
        if self.addresses.iter().any(|a| a.port() == 0) {
            return bad("addresses", "port 0");
        }
        Ok(())
    }
}

/// Appends one line and its CRLF.
fn push_line(out: &mut String, args: fmt::Arguments<'_>) {
    let _ = out.write_fmt(args); // writing to a String cannot fail
    out.push_str("\r\n");
}

/// RFC 8866 §5.2: `<username> <sess-id> <sess-version> <nettype> <addrtype> <address>`.
fn check_origin(line: usize, value: &str) -> Result<(), SdpError> {
    let fields: Vec<&str> = value.splitn(7, ' ').collect();
    match fields[..] {
        [user, id, version, net, addr_type, addr]
            if !user.is_empty()
                && parse_number(id, 20).is_some()
                && parse_number(version, 20).is_some()
                && is_token(net)
                && is_token(addr_type)
                && !addr.is_empty() =>
        {
            Ok(())
        }
        _ => Err(SdpError::Malformed {
            line,
            reason: "o= must be <username> <sess-id> <sess-version> <nettype> <addrtype> <address>",
        }),
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, line: usize, attribute: &'static str) -> Result<(), SdpError> {
    if slot.is_some() {
        return Err(SdpError::Duplicate { line, attribute });
    }
    *slot = Some(value);
    Ok(())
}

fn ice_credential(line: usize, value: &str, min: usize, reason: &'static str) -> Result<String, SdpError> {
    if (min..=256).contains(&value.len()) && value.bytes().all(is_ice_char) {
        Ok(value.to_owned())
    } else {
        Err(SdpError::Malformed { line, reason })
    }
}

fn parse_candidate_address(text: &str) -> Result<CandidateAddress, CandidateError> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(CandidateAddress::Ip(ip));
    }
    // RFC 8866 §9 FQDN: letters, digits, '-' and '.'; mDNS names are <uuid>.local.
    if (1..=253).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Ok(CandidateAddress::Hostname(text.to_owned()));
    }
    Err(candidate_error("the address is neither an IP address nor a hostname"))
}

/// A decimal number of at most `max_digits` digits, nothing else (no sign, no space).
fn parse_number(text: &str, max_digits: usize) -> Option<u64> {
    if text.is_empty() || text.len() > max_digits || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.bytes().try_fold(0u64, |n, d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

fn parse_port(text: &str) -> Option<u16> {
    parse_number(text, 5).and_then(|p| u16::try_from(p).ok())
}

/// RFC 8866 §9 token-char.
fn is_token_char(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x27 | 0x2A..=0x2B | 0x2D..=0x2E | 0x30..=0x39 | 0x41..=0x5A | 0x5E..=0x7E)
}

fn is_token(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_TOKEN_LEN && text.bytes().all(is_token_char)
}

/// RFC 8839 §5.1 ice-char.
fn is_ice_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 with padding (RFC 4648 §4), the `base64` of RFC 8866 §9.
pub(crate) fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= chunk.len() { BASE64[(n >> shift) as usize & 63] as char } else { '=' });
        }
    }
    out
}

/// Decodes padded base64; `None` if it is not, is empty, or decodes to more than `max` bytes.
fn base64_decode(text: &str, max: usize) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) || bytes.len() / 4 * 3 > max + 2 {
        return None;
    }
    let value = |c: u8| BASE64.iter().position(|&b| b == c).map(|v| v as u32);
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let last = bytes.len() / 4 - 1;
    for (i, quad) in bytes.chunks_exact(4).enumerate() {
        // Padding only at the very end: "xx==" or "xxx=".
        let pad = match quad {
            [_, _, b'=', b'='] if i == last => 2,
            [_, _, _, b'='] if i == last => 1,
            _ => 0,
        };
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = n << 6 | value(c)?;
        }
        n <<= 6 * pad as u32;
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    (out.len() <= max).then_some(out)
}

/// The fuzz target's body: `data` (lossily UTF-8) as a description; when it parses, an answer
/// is written against it and must parse back with the same transport values; and the text
/// after the first space as a fingerprint, which must format and parse back unchanged.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(offer) = Offer::parse(&text) {
        let answer = Answer {
            session_id: 7,
            // Both kinds of answer, by a bit the fuzzer controls.
            ice_lite: data.len().is_multiple_of(2),
            ice_ufrag: "fuzz".to_owned(),
            ice_pwd: "fuzzfuzzfuzzfuzzfuzzfuzz".to_owned(),
            ice_options: Vec::new(),
            fingerprint: Fingerprint::sha256([0xAB; 32]),
            max_message_size: 262_144,
            sctp_init: Some(vec![1, 0, 0, 4]),
            addresses: vec![
                SocketAddr::from(([192, 0, 2, 1], 4000)),
                "[2001:db8::1]:4001".parse().expect("literal"),
            ],
        };
        // An offer near MAX_SDP_LEN can give a longer answer, which may not parse back.
        if let Some(sdp) = answer.to_sdp(&offer).ok().filter(|s| s.len() <= MAX_SDP_LEN) {
            let back = Offer::parse(&sdp).expect("our answer parses");
            assert_eq!(back.media.len(), offer.media.len());
            assert_eq!(back.data.index, offer.data.index);
            assert_eq!(back.data.ice_ufrag, answer.ice_ufrag);
            assert_eq!(back.ice_lite, answer.ice_lite);
            assert_eq!(back.data.fingerprints, vec![answer.fingerprint.clone()]);
            assert_eq!(back.data.setup, Some(Setup::Passive));
            assert_eq!(back.data.sctp_init.is_some(), offer.data.sctp_init.is_some());
            assert_eq!(back.data.candidates.len(), 2);
        }
    }
    if let Some((_, rest)) = text.split_once(' ') {
        if let Ok(f) = Fingerprint::parse(rest) {
            assert_eq!(Fingerprint::parse(&f.to_string()), Ok(f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_rejects() {
        for len in 0..40 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 5) as u8).collect();
            let text = base64_encode(&data);
            assert_eq!(text.len() % 4, 0);
            if len > 0 {
                assert_eq!(base64_decode(&text, 64), Some(data));
            }
        }
        assert_eq!(base64_encode(b"CookieMonster"), "Q29va2llTW9uc3Rlcg==");
        assert_eq!(base64_decode("Q29va2llTW9uc3Rlcg==", 64).as_deref(), Some(&b"CookieMonster"[..]));
        for bad in ["", "Q", "Q29", "Q2=v", "Q29va2llTW9uc3Rlcg=", "Q29v=2ll", "Q29!", "Q===", "=AAA"] {
            assert_eq!(base64_decode(bad, 64), None, "{bad}");
        }
        assert_eq!(base64_decode("AAAA", 2), None, "over the limit");
        assert_eq!(base64_decode("AAA=", 2), Some(vec![0, 0]));
    }

    #[test]
    fn numbers_are_plain_decimal() {
        assert_eq!(parse_number("0", 5), Some(0));
        assert_eq!(parse_number("65535", 5), Some(65535));
        assert_eq!(parse_port("65536"), None);
        assert_eq!(parse_number("18446744073709551615", 20), Some(u64::MAX));
        assert_eq!(parse_number("18446744073709551616", 20), None);
        for bad in ["", "+1", "-1", " 1", "1 ", "0x10", "١"] {
            assert_eq!(parse_number(bad, 20), None, "{bad}");
        }
    }

    #[test]
    fn priority_formula() {
        // RFC 8445 §5.1.2.1 with the RFC's recommended host values.
        assert_eq!(candidate_priority(126, 65535, 1), 2_130_706_431);
        // Chromium's host candidates: local preference 30 and 40 (0x1E, 0x28).
        assert_eq!(candidate_priority(126, 0x1E, 1), 2_113_937_151);
        assert_eq!(candidate_priority(126, 0x28, 1), 2_113_939_711);
        assert_eq!(candidate_priority(255, 65535, 0), 2_130_706_431);
    }
}
