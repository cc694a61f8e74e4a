//! STUN against the RFC 5769 test vectors and round trips; the ICE-lite agent against a
//! browser-like controlling agent built here with the STUN builder.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use fastshake_webrtc::ice::{self, Credentials, CredentialsError, IceAgent, IceEvent};
use fastshake_webrtc::stun::{
    self, attr, Class, ErrorCode, IntegrityKey, Message, MessageBuilder, Method, StunError, TransactionId,
};
use fastshake_webrtc::Instant;
use proptest::prelude::*;

fn unhex(text: &str) -> Vec<u8> {
    let digits: String = text.split_whitespace().collect();
    hex::decode(digits).expect("test vector is hex")
}

/// RFC 5769 §2: the password of every vector.
const RFC5769_PASSWORD: &str = "VOkJxbRl1RmTxUk/WvJxBt";
const RFC5769_TRANSACTION: [u8; 12] =
    [0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae];

/// RFC 5769 §2.1, sample request.
const SAMPLE_REQUEST: &str = "
    00 01 00 58  21 12 a4 42  b7 e7 a7 01  bc 34 d6 86  fa 87 df ae
    80 22 00 10  53 54 55 4e  20 74 65 73  74 20 63 6c  69 65 6e 74
    00 24 00 04  6e 00 01 ff
    80 29 00 08  93 2f f9 b1  51 26 3b 36
    00 06 00 09  65 76 74 6a  3a 68 36 76  59 20 20 20
    00 08 00 14  9a ea a7 0c  bf d8 cb 56  78 1e f2 b5  b2 d3 f2 49  c1 b5 71 a2
    80 28 00 04  e5 7a 3b cf";

/// RFC 5769 §2.2, sample IPv4 response.
const SAMPLE_IPV4_RESPONSE: &str = "
    01 01 00 3c  21 12 a4 42  b7 e7 a7 01  bc 34 d6 86  fa 87 df ae
    80 22 00 0b  74 65 73 74  20 76 65 63  74 6f 72 20
    00 20 00 08  00 01 a1 47  e1 12 a6 43
    00 08 00 14  2b 91 f5 99  fd 9e 90 c3  8c 74 89 f9  2a f9 ba 53  f0 6b e7 d7
    80 28 00 04  c0 7d 4c 96";

/// RFC 5769 §2.3, sample IPv6 response.
const SAMPLE_IPV6_RESPONSE: &str = "
    01 01 00 48  21 12 a4 42  b7 e7 a7 01  bc 34 d6 86  fa 87 df ae
    80 22 00 0b  74 65 73 74  20 76 65 63  74 6f 72 20
    00 20 00 14  00 02 a1 47  01 13 a9 fa  a5 d3 f1 79  bc 25 f4 b5  be d2 b9 d9
    00 08 00 14  a3 82 95 4e  4b e6 7b f1  17 84 c9 7c  82 92 c2 75  bf e3 ed 41
    80 28 00 04  c8 fb 0b 4c";

/// Every single-bit flip of a sealed message is caught: it no longer parses, or one of the
/// two seals fails.
fn assert_every_bit_flip_is_caught(bytes: &[u8], key: &IntegrityKey) {
    for index in 0..bytes.len() {
        for bit in 0..8 {
            let mut tampered = bytes.to_vec();
            tampered[index] ^= 1 << bit;
            let caught = match Message::parse(&tampered) {
                Err(_) => true,
                Ok(message) => {
                    message.verify_integrity(key).is_err() || message.verify_fingerprint().is_err()
                }
            };
            assert!(caught, "flipping bit {bit} of byte {index} went unnoticed");
        }
    }
}

#[test]
fn rfc5769_sample_request_parses_and_verifies() {
    let bytes = unhex(SAMPLE_REQUEST);
    let message = Message::parse(&bytes).unwrap();
    assert_eq!(message.class(), Class::Request);
    assert_eq!(message.method(), Method::Binding);
    assert_eq!(message.transaction_id(), TransactionId(RFC5769_TRANSACTION));
    assert_eq!(message.software(), Ok(Some("STUN test client")));
    assert_eq!(message.priority(), Ok(Some(0x6e00_01ff)));
    assert_eq!(message.ice_controlled(), Ok(Some(0x932f_f9b1_5126_3b36)));
    assert_eq!(message.ice_controlling(), Ok(None));
    // Nine bytes of user name; its three padding bytes are spaces, which a receiver ignores.
    assert_eq!(message.username(), Ok(Some("evtj:h6vY")));
    assert!(!message.use_candidate());
    assert_eq!(message.xor_mapped_address(), Ok(None));
    assert_eq!(message.error_code(), Ok(None));
    assert_eq!(message.fingerprint(), Some(0xe57a_3bcf));
    assert_eq!(message.message_integrity().map(<[u8]>::len), Some(20));
    let kinds: Vec<u16> = message.attributes().map(|attribute| attribute.kind).collect();
    assert_eq!(kinds, [attr::SOFTWARE, attr::PRIORITY, attr::ICE_CONTROLLED, attr::USERNAME]);
    assert_eq!(message.unknown_comprehension_required().count(), 0);

    let key = IntegrityKey::short_term(RFC5769_PASSWORD);
    assert_eq!(message.verify_integrity(&key), Ok(()));
    assert_eq!(message.verify_fingerprint(), Ok(()));
    assert_eq!(
        message.verify_integrity(&IntegrityKey::short_term("VOkJxbRl1RmTxUk/WvJxBT")),
        Err(StunError::IntegrityMismatch)
    );
    assert_every_bit_flip_is_caught(&bytes, &key);

    // A byte of SOFTWARE changed: the HMAC fails, and so does the CRC.
    let mut tampered = bytes.clone();
    tampered[24] ^= 0x20;
    let message = Message::parse(&tampered).unwrap();
    assert_eq!(message.verify_integrity(&key), Err(StunError::IntegrityMismatch));
    assert_eq!(message.verify_fingerprint(), Err(StunError::FingerprintMismatch));
    // A byte of the FINGERPRINT value changed: only the CRC fails, MESSAGE-INTEGRITY is before it.
    let mut tampered = bytes.clone();
    *tampered.last_mut().unwrap() ^= 1;
    let message = Message::parse(&tampered).unwrap();
    assert_eq!(message.verify_integrity(&key), Ok(()));
    assert_eq!(message.verify_fingerprint(), Err(StunError::FingerprintMismatch));
}

#[test]
fn rfc5769_ipv4_response_parses_and_verifies() {
    let bytes = unhex(SAMPLE_IPV4_RESPONSE);
    let message = Message::parse(&bytes).unwrap();
    assert_eq!((message.class(), message.method()), (Class::SuccessResponse, Method::Binding));
    assert_eq!(message.transaction_id(), TransactionId(RFC5769_TRANSACTION));
    assert_eq!(message.software(), Ok(Some("test vector")));
    assert_eq!(message.xor_mapped_address(), Ok(Some(SocketAddr::from(([192, 0, 2, 1], 32853)))));
    assert_eq!(message.username(), Ok(None));
    assert_eq!(message.fingerprint(), Some(0xc07d_4c96));
    let key = IntegrityKey::short_term(RFC5769_PASSWORD);
    assert_eq!(message.verify_integrity(&key), Ok(()));
    assert_eq!(message.verify_fingerprint(), Ok(()));
    assert_every_bit_flip_is_caught(&bytes, &key);
}

#[test]
fn rfc5769_ipv6_response_parses_and_verifies() {
    let bytes = unhex(SAMPLE_IPV6_RESPONSE);
    let message = Message::parse(&bytes).unwrap();
    assert_eq!((message.class(), message.method()), (Class::SuccessResponse, Method::Binding));
    assert_eq!(message.transaction_id(), TransactionId(RFC5769_TRANSACTION));
    assert_eq!(message.software(), Ok(Some("test vector")));
    let ip = Ipv6Addr::new(0x2001, 0xdb8, 0x1234, 0x5678, 0x11, 0x2233, 0x4455, 0x6677);
    assert_eq!(message.xor_mapped_address(), Ok(Some(SocketAddr::new(IpAddr::V6(ip), 32853))));
    assert_eq!(message.fingerprint(), Some(0xc8fb_0b4c));
    let key = IntegrityKey::short_term(RFC5769_PASSWORD);
    assert_eq!(message.verify_integrity(&key), Ok(()));
    assert_eq!(message.verify_fingerprint(), Ok(()));
    assert_every_bit_flip_is_caught(&bytes, &key);
}

#[test]
fn the_builder_reproduces_the_rfc5769_xor_mapped_addresses() {
    // The XOR-MAPPED-ADDRESS attributes of §2.2 and §2.3, byte for byte.
    let transaction = TransactionId(RFC5769_TRANSACTION);
    let v4 = MessageBuilder::new(Class::SuccessResponse, Method::Binding, transaction)
        .xor_mapped_address(SocketAddr::from(([192, 0, 2, 1], 32853)))
        .into_bytes()
        .unwrap();
    assert_eq!(v4[20..], unhex("00 20 00 08  00 01 a1 47  e1 12 a6 43"));
    let ip = Ipv6Addr::new(0x2001, 0xdb8, 0x1234, 0x5678, 0x11, 0x2233, 0x4455, 0x6677);
    let v6 = MessageBuilder::new(Class::SuccessResponse, Method::Binding, transaction)
        .xor_mapped_address(SocketAddr::new(IpAddr::V6(ip), 32853))
        .into_bytes()
        .unwrap();
    assert_eq!(
        v6[20..],
        unhex("00 20 00 14  00 02 a1 47  01 13 a9 fa  a5 d3 f1 79  bc 25 f4 b5  be d2 b9 d9")
    );
    assert_eq!(v6[..4], [0x01, 0x01, 0x00, 0x18]);
}

#[test]
fn a_built_message_parses_back_with_every_field() {
    let key = IntegrityKey::short_term("a-password-of-22-chars+");
    let transaction = TransactionId(*b"0123456789ab");
    let address = SocketAddr::from(([203, 0, 113, 7], 4242));
    let bytes = MessageBuilder::new(Class::ErrorResponse, Method::Binding, transaction)
        .software("fastshake")
        .error_code(420, "Unknown Attribute")
        .unknown_attributes(&[0x7777, 0x0003, 0x0004])
        .xor_mapped_address(address)
        .username("user:name")
        .priority(0x7e7f_00ff)
        .use_candidate()
        .ice_controlling(u64::MAX)
        .ice_controlled(1)
        .attribute(0xC057, &[1, 2, 3])
        .message_integrity(&key)
        .fingerprint()
        .into_bytes()
        .unwrap();
    assert_eq!(bytes.len() % 4, 0);
    let message = Message::parse(&bytes).unwrap();
    assert_eq!((message.class(), message.method()), (Class::ErrorResponse, Method::Binding));
    assert_eq!(message.transaction_id(), transaction);
    assert_eq!(message.software(), Ok(Some("fastshake")));
    assert_eq!(message.error_code(), Ok(Some(ErrorCode { code: 420, reason: "Unknown Attribute" })));
    assert_eq!(message.unknown_attributes(), Ok(Some(vec![0x7777, 0x0003, 0x0004])));
    assert_eq!(message.xor_mapped_address(), Ok(Some(address)));
    assert_eq!(message.username(), Ok(Some("user:name")));
    assert_eq!(message.priority(), Ok(Some(0x7e7f_00ff)));
    assert!(message.use_candidate());
    assert_eq!(message.ice_controlling(), Ok(Some(u64::MAX)));
    assert_eq!(message.ice_controlled(), Ok(Some(1)));
    assert_eq!(message.attribute(0xC057), Some(&[1u8, 2, 3][..]));
    assert_eq!(message.verify_integrity(&key), Ok(()));
    assert_eq!(message.verify_fingerprint(), Ok(()));

    let indication =
        MessageBuilder::new(Class::Indication, Method::Other(0x0ABC), transaction).into_bytes().unwrap();
    let message = Message::parse(&indication).unwrap();
    assert_eq!((message.class(), message.method()), (Class::Indication, Method::Other(0x0ABC)));
    assert_eq!(message.verify_integrity(&key), Err(StunError::MissingIntegrity));
    assert_eq!(message.verify_fingerprint(), Err(StunError::MissingFingerprint));
}

#[test]
fn framing_errors_are_named() {
    let good = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([9; 12]))
        .priority(1)
        .fingerprint()
        .into_bytes()
        .unwrap();
    assert!(Message::parse(&good).is_ok());
    assert_eq!(Message::parse(&good[..19]).unwrap_err(), StunError::TooShort);

    let mut leading_bits = good.clone();
    leading_bits[0] |= 0x40;
    assert_eq!(Message::parse(&leading_bits).unwrap_err(), StunError::LeadingBitsNotZero);

    let mut cookie = good.clone();
    cookie[4] = 0x22;
    assert_eq!(Message::parse(&cookie).unwrap_err(), StunError::WrongMagicCookie(0x2212_a442));

    let mut odd_length = good.clone();
    odd_length[3] += 1;
    assert_eq!(Message::parse(&odd_length).unwrap_err(), StunError::LengthNotMultipleOfFour(17));

    assert_eq!(
        Message::parse(&good[..good.len() - 4]).unwrap_err(),
        StunError::LengthMismatch { announced: 16, carried: 12 }
    );
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 4]);
    assert_eq!(
        Message::parse(&longer).unwrap_err(),
        StunError::LengthMismatch { announced: 16, carried: 20 }
    );

    // PRIORITY claims 8 bytes, running into FINGERPRINT's header and past the end.
    let mut overrun = good.clone();
    overrun[23] = 16;
    assert_eq!(Message::parse(&overrun).unwrap_err(), StunError::AttributeOverrun(attr::PRIORITY));

    // An attribute after FINGERPRINT.
    let mut after = good.clone();
    after.extend_from_slice(&[0x80, 0x22, 0x00, 0x00]);
    after[3] += 4;
    assert_eq!(Message::parse(&after).unwrap_err(), StunError::AttributeAfterFingerprint);

    // MESSAGE-INTEGRITY of the wrong size.
    let short_integrity = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([9; 12]))
        .attribute(attr::MESSAGE_INTEGRITY, &[0; 16])
        .into_bytes()
        .unwrap();
    assert_eq!(
        Message::parse(&short_integrity).unwrap_err(),
        StunError::WrongAttributeLength { attribute: attr::MESSAGE_INTEGRITY, length: 16, expected: 20 }
    );

    // The builder refuses what parsing would.
    let built_after = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([9; 12]))
        .fingerprint()
        .priority(1)
        .into_bytes();
    assert_eq!(built_after, Err(StunError::AttributeAfterFingerprint));
    let huge = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([9; 12]))
        .attribute(0x8000, &[0; 40_000])
        .attribute(0x8000, &[0; 40_000])
        .into_bytes();
    assert_eq!(huge, Err(StunError::TooLong));
}

#[test]
fn attributes_after_message_integrity_are_ignored_but_still_framed() {
    let key = IntegrityKey::short_term("a-password-of-22-chars+");
    let sealed = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([1; 12]))
        .username("a:b")
        .message_integrity(&key)
        .attribute(0x0777, b"late")
        .username("c:d")
        .fingerprint()
        .into_bytes()
        .unwrap();
    let message = Message::parse(&sealed).unwrap();
    assert_eq!(message.username(), Ok(Some("a:b")));
    assert_eq!(message.attributes().count(), 1);
    assert_eq!(message.unknown_comprehension_required().count(), 0);
    assert_eq!(message.verify_integrity(&key), Ok(()));
    assert_eq!(message.verify_fingerprint(), Ok(()));
}

#[test]
fn unknown_comprehension_required_attributes_are_reported_and_optional_ones_are_not() {
    let bytes = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([2; 12]))
        .attribute(0x0003, &[0; 4])
        .attribute(0xC057, &[0; 4])
        .username("x:y")
        .attribute(0x7FFF, &[])
        .into_bytes()
        .unwrap();
    let message = Message::parse(&bytes).unwrap();
    assert_eq!(message.unknown_comprehension_required().collect::<Vec<_>>(), [0x0003, 0x7FFF]);
}

#[test]
fn malformed_values_are_errors_not_panics() {
    let bytes = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([3; 12]))
        .attribute(attr::XOR_MAPPED_ADDRESS, &[0, 3, 0, 0, 0, 0, 0, 0])
        .attribute(attr::PRIORITY, &[1, 2, 3])
        .attribute(attr::ERROR_CODE, &[0, 0, 7, 0])
        .attribute(attr::UNKNOWN_ATTRIBUTES, &[1, 2, 3])
        .attribute(attr::USERNAME, &[0xff, 0xfe])
        .into_bytes()
        .unwrap();
    let message = Message::parse(&bytes).unwrap();
    assert_eq!(message.xor_mapped_address(), Err(StunError::MalformedAttribute(attr::XOR_MAPPED_ADDRESS)));
    assert_eq!(
        message.priority(),
        Err(StunError::WrongAttributeLength { attribute: attr::PRIORITY, length: 3, expected: 4 })
    );
    assert_eq!(message.error_code(), Err(StunError::MalformedAttribute(attr::ERROR_CODE)));
    assert_eq!(message.unknown_attributes(), Err(StunError::MalformedAttribute(attr::UNKNOWN_ATTRIBUTES)));
    assert_eq!(message.username(), Err(StunError::MalformedAttribute(attr::USERNAME)));
}

/// A header with a valid cookie and length around arbitrary attribute bytes, so that the
/// generator reaches past the header checks.
fn framed(attributes: &[u8], first_byte: u8) -> Vec<u8> {
    let mut body = attributes.to_vec();
    body.truncate(body.len() / 4 * 4);
    let mut bytes = vec![first_byte & 0x3F, 0x01];
    bytes.extend_from_slice(&(body.len() as u16).to_be_bytes());
    bytes.extend_from_slice(&stun::MAGIC_COOKIE.to_be_bytes());
    bytes.extend_from_slice(&[0x5A; 12]);
    bytes.extend_from_slice(&body);
    bytes
}

proptest! {
    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        stun::fuzz(&bytes);
        ice::fuzz(&bytes);
    }

    #[test]
    fn framed_arbitrary_attributes_parse_and_verify_consistently(
        attributes in proptest::collection::vec(any::<u8>(), 0..160),
        first_byte in any::<u8>(),
    ) {
        let bytes = framed(&attributes, first_byte);
        stun::fuzz(&bytes);
        ice::fuzz(&bytes);
        let key = IntegrityKey::short_term("a-password-of-22-chars+");
        if let Ok(message) = Message::parse(&bytes) {
            // The checks are functions of the bytes: the same answer each time.
            prop_assert_eq!(message.verify_integrity(&key), message.verify_integrity(&key));
            prop_assert_eq!(message.verify_fingerprint(), message.verify_fingerprint());
            let again = Message::parse(message.raw()).unwrap();
            prop_assert!(again.attributes().eq(message.attributes()));
        }
    }

    #[test]
    fn well_framed_attribute_lists_go_through_both_fuzz_bodies(
        attributes in proptest::collection::vec(
            (prop_oneof![
                Just(attr::USERNAME), Just(attr::MESSAGE_INTEGRITY), Just(attr::ERROR_CODE),
                Just(attr::UNKNOWN_ATTRIBUTES), Just(attr::XOR_MAPPED_ADDRESS), Just(attr::PRIORITY),
                Just(attr::USE_CANDIDATE), Just(attr::SOFTWARE), Just(attr::FINGERPRINT),
                Just(attr::ICE_CONTROLLED), Just(attr::ICE_CONTROLLING), any::<u16>(),
             ],
             prop_oneof![proptest::collection::vec(any::<u8>(), 0..24), Just(vec![0; 20]), Just(vec![0; 4])]),
            0..8),
        class in 0u8..4,
    ) {
        // Raw type-length-value triples, padded, so parsing reaches the attribute rules.
        let mut body = Vec::new();
        for (kind, value) in &attributes {
            body.extend_from_slice(&kind.to_be_bytes());
            body.extend_from_slice(&(value.len() as u16).to_be_bytes());
            body.extend_from_slice(value);
            body.resize(body.len().div_ceil(4) * 4, 0);
        }
        let first_byte = [0x00, 0x00, 0x01, 0x01][usize::from(class)];
        let mut bytes = framed(&body, first_byte);
        bytes[1] = [0x01, 0x11, 0x01, 0x11][usize::from(class)];
        stun::fuzz(&bytes);
        ice::fuzz(&bytes);
    }

    #[test]
    fn built_attributes_come_back_unchanged(
        attributes in proptest::collection::vec(
            (any::<u16>().prop_filter("not a seal", |kind| *kind != attr::MESSAGE_INTEGRITY && *kind != attr::FINGERPRINT),
             proptest::collection::vec(any::<u8>(), 0..40)),
            0..8),
        transaction in any::<[u8; 12]>(),
    ) {
        let key = IntegrityKey::short_term("another-password-22-chars");
        let bytes = attributes
            .iter()
            .fold(MessageBuilder::new(Class::Request, Method::Binding, TransactionId(transaction)), |builder, (kind, value)| {
                builder.attribute(*kind, value)
            })
            .message_integrity(&key)
            .fingerprint()
            .into_bytes()
            .unwrap();
        let message = Message::parse(&bytes).unwrap();
        let parsed: Vec<(u16, Vec<u8>)> =
            message.attributes().map(|attribute| (attribute.kind, attribute.value.to_vec())).collect();
        prop_assert_eq!(parsed, attributes);
        prop_assert_eq!(message.verify_integrity(&key), Ok(()));
        prop_assert_eq!(message.verify_fingerprint(), Ok(()));
    }
}

// ---------------------------------------------------------------------------------------------
// ICE-lite agent

const BROWSER_UFRAG: &str = "brWs";
const BROWSER_TIEBREAKER: u64 = 0x1122_3344_5566_7788;

fn server_credentials() -> Credentials {
    let random: [u8; Credentials::RANDOM_LEN] =
        std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
    Credentials::from_random(&random)
}

fn agent() -> IceAgent {
    IceAgent::new(server_credentials(), BROWSER_UFRAG).unwrap()
}

fn browser_address(port: u16) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, 20], port))
}

/// What a browser's check may get wrong, to build the failure cases.
#[derive(Clone, Copy)]
struct Check<'a> {
    transaction: u8,
    username: Option<&'a str>,
    password: Option<&'a str>,
    use_candidate: bool,
    ice_controlled: bool,
    extra: Option<(u16, &'a [u8])>,
}

impl<'a> Check<'a> {
    fn valid(transaction: u8, username: &'a str, password: &'a str) -> Check<'a> {
        Check {
            transaction,
            username: Some(username),
            password: Some(password),
            use_candidate: false,
            ice_controlled: false,
            extra: None,
        }
    }

    /// The request a controlling browser sends (RFC 8445 §7.2.4): USERNAME, PRIORITY,
    /// ICE-CONTROLLING, maybe USE-CANDIDATE, MESSAGE-INTEGRITY, FINGERPRINT.
    fn bytes(self) -> Vec<u8> {
        let mut builder =
            MessageBuilder::new(Class::Request, Method::Binding, TransactionId([self.transaction; 12]));
        if let Some(username) = self.username {
            builder = builder.username(username);
        }
        builder = builder.priority(0x6e7f_1eff).attribute(0xC057, &[0, 1, 0, 10]);
        builder = if self.ice_controlled {
            builder.ice_controlled(BROWSER_TIEBREAKER)
        } else {
            builder.ice_controlling(BROWSER_TIEBREAKER)
        };
        if self.use_candidate {
            builder = builder.use_candidate();
        }
        if let Some((kind, value)) = self.extra {
            builder = builder.attribute(kind, value);
        }
        if let Some(password) = self.password {
            builder = builder.message_integrity(&IntegrityKey::short_term(password));
        }
        builder.fingerprint().into_bytes().unwrap()
    }
}

struct Browser {
    username: String,
    password: String,
}

impl Browser {
    fn for_agent(agent: &IceAgent) -> Browser {
        let local = agent.local_credentials();
        Browser { username: format!("{}:{}", local.ufrag(), BROWSER_UFRAG), password: local.pwd().to_owned() }
    }

    fn check(&self, transaction: u8) -> Check<'_> {
        Check::valid(transaction, &self.username, &self.password)
    }

    fn nominate(&self, transaction: u8) -> Vec<u8> {
        Check { use_candidate: true, ..self.check(transaction) }.bytes()
    }
}

/// Parses a response and checks the parts every answer shares: Binding, the request's
/// transaction id, a correct FINGERPRINT.
fn response(bytes: &[u8], transaction: u8) -> Message<'_> {
    let message = Message::parse(bytes).unwrap();
    assert_eq!(message.method(), Method::Binding);
    assert_eq!(message.transaction_id(), TransactionId([transaction; 12]));
    assert_eq!(message.verify_fingerprint(), Ok(()));
    message
}

fn events(agent: &mut IceAgent) -> Vec<IceEvent> {
    std::iter::from_fn(|| agent.poll_event()).collect()
}

fn at_seconds(seconds: f64) -> Instant {
    Instant::from_nanos((seconds * 1e9) as u64)
}

#[test]
fn generated_credentials_are_ice_chars_of_the_chosen_lengths() {
    let credentials = server_credentials();
    assert_eq!(credentials.ufrag().len(), Credentials::UFRAG_LEN);
    assert_eq!(credentials.pwd().len(), Credentials::PWD_LEN);
    assert!(credentials.ufrag().bytes().chain(credentials.pwd().bytes()).all(ice::is_ice_char));
    assert_eq!(Credentials::new(credentials.ufrag(), credentials.pwd()), Ok(credentials.clone()));
    // The 64 values of the low six bits map to 64 distinct ice-chars.
    let all: [u8; Credentials::RANDOM_LEN] = std::array::from_fn(|i| i as u8);
    let low: [u8; Credentials::RANDOM_LEN] = std::array::from_fn(|i| 32 + i as u8);
    let (a, b) = (Credentials::from_random(&all), Credentials::from_random(&low));
    let distinct: std::collections::HashSet<char> =
        [a.ufrag(), a.pwd(), b.ufrag(), b.pwd()].iter().flat_map(|part| part.chars()).collect();
    assert_eq!(distinct.len(), 64);
    assert!(!format!("{credentials:?}").contains(credentials.pwd()), "Debug must not print the password");

    assert_eq!(Credentials::new("abc", "a".repeat(22).as_str()), Err(CredentialsError::UfragLength(3)));
    assert_eq!(Credentials::new("abcd", "a".repeat(21).as_str()), Err(CredentialsError::PwdLength(21)));
    assert_eq!(Credentials::new("ab:d", "a".repeat(22).as_str()), Err(CredentialsError::NotIceChar));
    assert_eq!(IceAgent::new(server_credentials(), "a b c").unwrap_err(), CredentialsError::NotIceChar);
}

#[test]
fn a_valid_check_gets_a_success_response_that_the_browser_can_verify() {
    for from in [
        browser_address(50_001),
        SocketAddr::from((Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x20), 50_002)),
    ] {
        let mut agent = agent();
        let browser = Browser::for_agent(&agent);
        let reply =
            agent.handle(at_seconds(1.0), from, &browser.check(1).bytes()).expect("a success response");
        let message = response(&reply, 1);
        assert_eq!(message.class(), Class::SuccessResponse);
        assert_eq!(message.xor_mapped_address(), Ok(Some(from)));
        assert_eq!(message.verify_integrity(&IntegrityKey::short_term(&browser.password)), Ok(()));
        assert_eq!(message.username(), Ok(None), "a response carries no USERNAME");

        assert_eq!(events(&mut agent), [IceEvent::CheckSucceeded(from)]);
        assert!(agent.may_receive_from(from));
        assert!(!agent.may_send_to(from), "a lite agent sends only on a nominated pair");
        assert_eq!(agent.selected(), None);
        assert_eq!(agent.poll_timeout(), None);
    }
}

#[test]
fn an_ipv4_peer_seen_through_a_dual_stack_socket_gets_its_ipv4_address_back() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let mapped = SocketAddr::new(IpAddr::V6(Ipv4Addr::new(198, 51, 100, 20).to_ipv6_mapped()), 50_003);
    let reply = agent.handle(at_seconds(1.0), mapped, &browser.check(1).bytes()).unwrap();
    assert_eq!(response(&reply, 1).xor_mapped_address(), Ok(Some(browser_address(50_003))));
    assert!(agent.may_receive_from(mapped));
}

#[test]
fn use_candidate_selects_the_pair_and_allows_sending() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let from = browser_address(50_010);
    let reply = agent.handle(at_seconds(2.0), from, &browser.nominate(4)).unwrap();
    assert_eq!(response(&reply, 4).class(), Class::SuccessResponse);
    assert_eq!(events(&mut agent), [IceEvent::CheckSucceeded(from), IceEvent::Selected(from)]);
    assert_eq!(agent.selected(), Some(from));
    assert!(agent.may_send_to(from));
    assert!(!agent.may_send_to(browser_address(50_011)));
    assert_eq!(agent.poll_timeout(), Some(at_seconds(32.0)));
    // Repeating the nomination changes nothing but the consent deadline.
    agent.handle(at_seconds(5.0), from, &browser.nominate(5)).unwrap();
    assert_eq!(events(&mut agent), []);
    assert_eq!(agent.poll_timeout(), Some(at_seconds(35.0)));
}

#[test]
fn a_wrong_password_gets_401_without_integrity_and_validates_nothing() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let from = browser_address(50_020);
    let check =
        Check { password: Some("wrong-password-but-long-enough"), use_candidate: true, ..browser.check(6) };
    let reply = agent.handle(at_seconds(1.0), from, &check.bytes()).unwrap();
    let message = response(&reply, 6);
    assert_eq!(message.class(), Class::ErrorResponse);
    assert_eq!(message.error_code().unwrap().unwrap().code, 401);
    assert_eq!(message.message_integrity(), None);
    assert_eq!(events(&mut agent), []);
    assert!(!agent.may_receive_from(from));
    assert!(!agent.may_send_to(from));
    assert_eq!(agent.checked_addresses().count(), 0);
}

#[test]
fn a_wrong_ufrag_on_either_side_gets_401() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let ours = agent.local_credentials().ufrag().to_owned();
    let wrong_local = format!("XXXX:{BROWSER_UFRAG}");
    let wrong_remote = format!("{ours}:othr");
    let local_only = ours.clone();
    for username in [wrong_local.as_str(), wrong_remote.as_str(), local_only.as_str()] {
        let check = Check { username: Some(username), ..browser.check(7) };
        let reply = agent.handle(at_seconds(1.0), browser_address(50_030), &check.bytes()).unwrap();
        let message = response(&reply, 7);
        assert_eq!(message.error_code().unwrap().unwrap().code, 401, "USERNAME {username}");
        assert_eq!(message.message_integrity(), None);
    }
    assert_eq!(events(&mut agent), []);
}

#[test]
fn a_check_missing_username_or_integrity_gets_400() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    for check in [Check { password: None, ..browser.check(8) }, Check { username: None, ..browser.check(8) }]
    {
        let reply = agent.handle(at_seconds(1.0), browser_address(50_040), &check.bytes()).unwrap();
        let message = response(&reply, 8);
        assert_eq!(message.class(), Class::ErrorResponse);
        assert_eq!(message.error_code().unwrap().unwrap().code, 400);
        assert_eq!(message.message_integrity(), None);
    }
    assert_eq!(events(&mut agent), []);
}

#[test]
fn an_unknown_comprehension_required_attribute_gets_420_listing_it() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let from = browser_address(50_050);
    let check = Check { extra: Some((0x0777, b"what")), use_candidate: true, ..browser.check(9) };
    let reply = agent.handle(at_seconds(1.0), from, &check.bytes()).unwrap();
    let message = response(&reply, 9);
    assert_eq!(message.class(), Class::ErrorResponse);
    assert_eq!(message.error_code().unwrap().unwrap().code, 420);
    assert_eq!(message.unknown_attributes(), Ok(Some(vec![0x0777])));
    // The request authenticated, so the answer is authenticated too (RFC 8489 §9.1.3).
    assert_eq!(message.verify_integrity(&IntegrityKey::short_term(&browser.password)), Ok(()));
    assert_eq!(events(&mut agent), []);
    assert!(!agent.may_send_to(from));

    // A comprehension-optional unknown attribute is fine.
    let check = Check { extra: Some((0xC0DE, b"fine")), ..browser.check(10) };
    let reply = agent.handle(at_seconds(1.0), from, &check.bytes()).unwrap();
    assert_eq!(response(&reply, 10).class(), Class::SuccessResponse);
}

#[test]
fn ice_controlled_from_the_browser_is_a_role_conflict_487() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let from = browser_address(50_060);
    let check = Check { ice_controlled: true, use_candidate: true, ..browser.check(11) };
    let reply = agent.handle(at_seconds(1.0), from, &check.bytes()).unwrap();
    let message = response(&reply, 11);
    assert_eq!(message.error_code().unwrap().unwrap().code, 487);
    assert_eq!(message.verify_integrity(&IntegrityKey::short_term(&browser.password)), Ok(()));
    assert_eq!(events(&mut agent), []);
    assert!(!agent.may_receive_from(from));
}

#[test]
fn bad_fingerprints_non_stun_responses_and_indications_get_silence() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let from = browser_address(50_070);
    let now = at_seconds(1.0);

    let mut bad_fingerprint = browser.nominate(12);
    *bad_fingerprint.last_mut().unwrap() ^= 0x01;
    assert_eq!(agent.handle(now, from, &bad_fingerprint), None);

    let no_fingerprint = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([13; 12]))
        .username(&browser.username)
        .message_integrity(&IntegrityKey::short_term(&browser.password))
        .into_bytes()
        .unwrap();
    assert_eq!(agent.handle(now, from, &no_fingerprint), None);

    assert_eq!(agent.handle(now, from, &[22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), None);
    assert_eq!(agent.handle(now, from, &[]), None);

    for class in [Class::SuccessResponse, Class::ErrorResponse, Class::Indication] {
        let unasked = MessageBuilder::new(class, Method::Binding, TransactionId([14; 12]))
            .xor_mapped_address(from)
            .fingerprint()
            .into_bytes()
            .unwrap();
        assert_eq!(agent.handle(now, from, &unasked), None);
    }
    // A method other than Binding, even authenticated, is not ICE's.
    let other_method = MessageBuilder::new(Class::Request, Method::Other(0x003), TransactionId([15; 12]))
        .username(&browser.username)
        .ice_controlling(BROWSER_TIEBREAKER)
        .message_integrity(&IntegrityKey::short_term(&browser.password))
        .fingerprint()
        .into_bytes()
        .unwrap();
    assert_eq!(agent.handle(now, from, &other_method), None);

    assert_eq!(events(&mut agent), []);
    assert!(!agent.may_receive_from(from));
}

#[test]
fn consent_expires_30_seconds_after_the_last_check_on_the_selected_pair_and_not_before() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let selected = browser_address(50_080);
    let other = browser_address(50_081);
    agent.handle(at_seconds(10.0), other, &browser.check(1).bytes()).unwrap();
    agent.handle(at_seconds(10.0), selected, &browser.nominate(2)).unwrap();
    events(&mut agent);
    assert_eq!(agent.poll_timeout(), Some(at_seconds(40.0)));

    // Consent checks every 5 s keep it alive; checks from another address do not.
    for (second, transaction) in [(15.0, 3), (20.0, 4)] {
        agent.handle(at_seconds(second), selected, &browser.check(transaction).bytes()).unwrap();
    }
    agent.handle(at_seconds(45.0), other, &browser.check(5).bytes()).unwrap();
    // A Binding indication (keepalive) is unauthenticated and refreshes nothing.
    let keepalive = MessageBuilder::new(Class::Indication, Method::Binding, TransactionId([6; 12]))
        .fingerprint()
        .into_bytes()
        .unwrap();
    assert_eq!(agent.handle(at_seconds(45.0), selected, &keepalive), None);
    assert_eq!(agent.poll_timeout(), Some(at_seconds(50.0)));

    let just_before = Instant::from_nanos(at_seconds(50.0).as_nanos() - 1);
    agent.handle_timeout(just_before);
    assert_eq!(events(&mut agent), []);
    assert!(agent.may_send_to(selected));

    agent.handle_timeout(at_seconds(50.0));
    assert_eq!(events(&mut agent), [IceEvent::ConsentExpired]);
    assert!(agent.is_consent_expired());
    assert!(!agent.may_send_to(selected));
    assert!(!agent.may_receive_from(selected));
    assert_eq!(agent.poll_timeout(), None);

    // Final: reported once, and later checks neither answer nor restore it (RFC 7675 §5.1).
    agent.handle_timeout(at_seconds(90.0));
    assert_eq!(agent.handle(at_seconds(91.0), selected, &browser.nominate(7)), None);
    assert_eq!(events(&mut agent), []);
    assert!(!agent.may_send_to(selected));
}

#[test]
fn a_late_datagram_expires_consent_before_it_is_handled() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let selected = browser_address(50_085);
    agent.handle(at_seconds(0.0), selected, &browser.nominate(1)).unwrap();
    events(&mut agent);
    // The driver missed the deadline; a check arriving after it does not rescue consent.
    assert_eq!(agent.handle(at_seconds(31.0), selected, &browser.check(2).bytes()), None);
    assert_eq!(events(&mut agent), [IceEvent::ConsentExpired]);
}

#[test]
fn no_consent_timer_runs_before_a_nomination() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    agent.handle(at_seconds(0.0), browser_address(50_086), &browser.check(1).bytes()).unwrap();
    assert_eq!(agent.poll_timeout(), None);
    agent.handle_timeout(at_seconds(1000.0));
    assert!(!agent.is_consent_expired());
    assert!(agent.may_receive_from(browser_address(50_086)));
}

#[test]
fn a_second_nomination_moves_the_selection() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let first = browser_address(50_090);
    let second = SocketAddr::from(([203, 0, 113, 90], 3478));
    agent.handle(at_seconds(1.0), first, &browser.nominate(1)).unwrap();
    assert_eq!(events(&mut agent), [IceEvent::CheckSucceeded(first), IceEvent::Selected(first)]);
    agent.handle(at_seconds(2.0), second, &browser.check(2).bytes()).unwrap();
    assert_eq!(agent.selected(), Some(first));
    agent.handle(at_seconds(3.0), second, &browser.nominate(3)).unwrap();
    assert_eq!(events(&mut agent), [IceEvent::CheckSucceeded(second), IceEvent::Selected(second)]);
    assert_eq!(agent.selected(), Some(second));
    assert!(agent.may_send_to(second));
    assert!(!agent.may_send_to(first), "once selected, data goes on the selected pair only");
    assert!(agent.may_receive_from(first));
    assert_eq!(agent.poll_timeout(), Some(at_seconds(33.0)));
}

#[test]
fn more_remote_addresses_than_the_bound_do_not_grow_state() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let selected = browser_address(40_000);
    agent.handle(at_seconds(0.0), selected, &browser.nominate(0)).unwrap();
    let bound = IceAgent::MAX_REMOTE_ADDRESSES;
    for i in 1..=(4 * bound) {
        let now = Instant::from_millis(i as u64);
        let reply = agent.handle(now, browser_address(40_000 + i as u16), &browser.check(i as u8).bytes());
        assert_eq!(response(reply.as_deref().unwrap(), i as u8).class(), Class::SuccessResponse);
        assert!(agent.checked_addresses().count() <= bound);
    }
    assert_eq!(agent.checked_addresses().count(), bound);
    // The selected address survives; the newest ones are kept, the stalest made room.
    assert!(agent.may_send_to(selected) && agent.may_receive_from(selected));
    assert!(agent.may_receive_from(browser_address(40_000 + 4 * bound as u16)));
    assert!(!agent.may_receive_from(browser_address(40_001)));
    let queued = events(&mut agent);
    assert!(queued.len() <= IceAgent::MAX_QUEUED_EVENTS);
    assert_eq!(queued.first(), Some(&IceEvent::CheckSucceeded(selected)));
    assert!(queued.contains(&IceEvent::Selected(selected)));
}

#[test]
fn unpolled_selections_collapse_to_the_latest() {
    let mut agent = agent();
    let browser = Browser::for_agent(&agent);
    let (first, second) = (browser_address(50_095), browser_address(50_096));
    agent.handle(at_seconds(1.0), first, &browser.nominate(1)).unwrap();
    agent.handle(at_seconds(2.0), second, &browser.nominate(2)).unwrap();
    agent.handle(at_seconds(3.0), first, &browser.nominate(3)).unwrap();
    assert_eq!(
        events(&mut agent),
        [IceEvent::CheckSucceeded(first), IceEvent::CheckSucceeded(second), IceEvent::Selected(first)]
    );
    assert_eq!(agent.selected(), Some(first));
}
