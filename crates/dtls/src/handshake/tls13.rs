//! Bodies of the DTLS 1.3 handshake messages (RFC 8446 §4, as RFC 9147 §5 and §9 adapt them)
//! and the typed readings of the TLS 1.3 extensions, whose raw bodies [`Extensions`] keeps
//! because their form depends on the message that carries them.

// The 1.3 state machines that call the encoders are being written; until then only the tests
// and the fuzzing entry points reach some of them.

use super::messages::{put_extensions_always, EXT_EARLY_DATA};
use super::{u16_list, Extensions, HandshakeType, OutExtensions, ServerHello, MAX_CHAIN_CERTS};
use fastshake_core::codec::{put_u16, put_u24, put_u32, put_u8, put_vec16, put_vec8, DecodeError, Reader};

/// DTLS 1.3's version number (RFC 9147 §5.3), only ever in supported_versions.
pub const DTLS_1_3: u16 = 0xfefc;

/// The random of a HelloRetryRequest: SHA-256 of "HelloRetryRequest" (RFC 8446 §4.1.3).
pub const HELLO_RETRY_REQUEST_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2,
    0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// A ServerHello with this random is a HelloRetryRequest (RFC 8446 §4.1.3).
pub fn is_hello_retry_request(random: &[u8; 32]) -> bool {
    *random == HELLO_RETRY_REQUEST_RANDOM
}

/// The last 8 bytes of a TLS 1.3 server's random when it negotiates (D)TLS 1.2 (RFC 8446
/// §4.1.3): a 1.3 client that sees them knows an attacker removed 1.3 from its offer.
pub const DOWNGRADE_TLS12: [u8; 8] = [0x44, 0x4f, 0x57, 0x4e, 0x47, 0x52, 0x44, 0x01];

/// PskKeyExchangeMode (RFC 8446 §4.2.9): resumption without a fresh (EC)DHE.
pub const PSK_KE: u8 = 0;
/// PskKeyExchangeMode: resumption with a fresh (EC)DHE, which keeps forward secrecy.
pub const PSK_DHE_KE: u8 = 1;

/// ConnectionIdUsage (RFC 9147 §9): use the new CIDs at once.
pub const CID_IMMEDIATE: u8 = 0;
/// ConnectionIdUsage: keep them as spares.
pub const CID_SPARE: u8 = 1;

/// A list of 16-bit code points as sent, pairs of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U16List<'a>(&'a [u8]);

impl<'a> U16List<'a> {
    pub fn iter(&self) -> impl Iterator<Item = u16> + 'a {
        u16_list(self.0)
    }

    pub fn contains(&self, v: u16) -> bool {
        self.iter().any(|x| x == v)
    }
}

/// A ClientHello's supported_versions: `ProtocolVersion versions<2..254>` (RFC 8446 §4.2.1).
pub fn offered_versions(data: &[u8]) -> Result<U16List<'_>, DecodeError> {
    let mut r = Reader::new(data);
    let list = r.vec8()?;
    r.finish()?;
    if list.len() < 2 || list.len() > 254 || list.len() % 2 != 0 {
        return Err(DecodeError::Invalid("supported_versions"));
    }
    Ok(U16List(list))
}

/// A ServerHello's or HelloRetryRequest's supported_versions: `selected_version`.
pub fn selected_version(data: &[u8]) -> Result<u16, DecodeError> {
    exactly_u16(data)
}

fn exactly_u16(data: &[u8]) -> Result<u16, DecodeError> {
    let mut r = Reader::new(data);
    let v = r.u16()?;
    r.finish()?;
    Ok(v)
}

/// One KeyShareEntry (RFC 8446 §4.2.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyShareEntry<'a> {
    pub group: u16,
    pub key_exchange: &'a [u8],
}

impl<'a> KeyShareEntry<'a> {
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let group = r.u16()?;
        let key_exchange = r.vec16()?;
        // `opaque key_exchange<1..2^16-1>`.
        if key_exchange.is_empty() {
            return Err(DecodeError::Invalid("empty key_exchange"));
        }
        Ok(KeyShareEntry { group, key_exchange })
    }
}

/// A ClientHello's key_share: `KeyShareEntry client_shares<0..2^16-1>`, possibly empty (the
/// client then waits for a HelloRetryRequest to name a group).
pub fn client_shares(data: &[u8]) -> Result<Vec<KeyShareEntry<'_>>, DecodeError> {
    let mut r = Reader::new(data);
    let mut list = Reader::new(r.vec16()?);
    r.finish()?;
    let mut shares = Vec::new();
    while !list.is_empty() {
        shares.push(KeyShareEntry::read(&mut list)?);
    }
    // RFC 8446 §4.2.8: clients MUST NOT offer two shares of one group. Sorted, so that a list
    // of thousands of tiny shares costs no more than sorting it.
    let mut groups: Vec<u16> = shares.iter().map(|s| s.group).collect();
    groups.sort_unstable();
    if groups.windows(2).any(|w| w[0] == w[1]) {
        return Err(DecodeError::Invalid("two key shares of one group"));
    }
    Ok(shares)
}

/// A ServerHello's key_share: one KeyShareEntry.
pub fn server_share(data: &[u8]) -> Result<KeyShareEntry<'_>, DecodeError> {
    let mut r = Reader::new(data);
    let share = KeyShareEntry::read(&mut r)?;
    r.finish()?;
    Ok(share)
}

/// A HelloRetryRequest's key_share: `NamedGroup selected_group`.
pub fn hrr_selected_group(data: &[u8]) -> Result<u16, DecodeError> {
    exactly_u16(data)
}

/// A ClientHello's pre_shared_key (RFC 8446 §4.2.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfferedPsks<'a> {
    /// (identity, obfuscated_ticket_age) pairs.
    pub identities: Vec<(&'a [u8], u32)>,
    /// One binder per identity, in the same order.
    pub binders: Vec<&'a [u8]>,
    /// How many bytes the binders list (with its length) takes at the end of the extension,
    /// and so of the ClientHello body, pre_shared_key being last: the binders are computed
    /// over `body[..body.len() - binders_len]` (RFC 8446 §4.2.11.2).
    pub binders_len: usize,
}

impl<'a> OfferedPsks<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data);
        let mut ids = Reader::new(r.vec16()?);
        let binders_raw = r.vec16()?;
        r.finish()?;
        let mut identities = Vec::new();
        while !ids.is_empty() {
            // `opaque identity<1..2^16-1>; uint32 obfuscated_ticket_age`.
            let identity = ids.vec16()?;
            if identity.is_empty() {
                return Err(DecodeError::Invalid("empty PSK identity"));
            }
            identities.push((identity, ids.u32()?));
        }
        if identities.is_empty() {
            return Err(DecodeError::Invalid("no PSK identity"));
        }
        let mut list = Reader::new(binders_raw);
        let mut binders = Vec::with_capacity(identities.len());
        while !list.is_empty() {
            // `opaque PskBinderEntry<32..255>`.
            let binder = list.vec8()?;
            if binder.len() < 32 {
                return Err(DecodeError::Invalid("PSK binder too short"));
            }
            binders.push(binder);
        }
        if binders.len() != identities.len() {
            return Err(DecodeError::Invalid("PSK binders and identities differ in number"));
        }
        Ok(OfferedPsks { identities, binders, binders_len: 2 + binders_raw.len() })
    }
}

/// A ServerHello's pre_shared_key: `uint16 selected_identity`.
pub fn selected_identity(data: &[u8]) -> Result<u16, DecodeError> {
    exactly_u16(data)
}

/// Bytes the binders list of these binder lengths takes, with its two-byte length.
pub fn binders_block_len(binder_lens: &[usize]) -> usize {
    2 + binder_lens.iter().map(|len| 1 + len).sum::<usize>()
}

/// Writes the binders into the placeholders a [`super::PskOffer`] left at the end of an encoded
/// ClientHello body; each binder must have its placeholder's length.
pub fn patch_binders(hello_body: &mut [u8], binders: &[&[u8]]) {
    let block_len = binders_block_len(&binders.iter().map(|b| b.len()).collect::<Vec<_>>());
    let mut at = hello_body.len() - block_len;
    debug_assert_eq!(
        usize::from(u16::from_be_bytes([hello_body[at], hello_body[at + 1]])),
        block_len - 2,
        "the binders list written has these binders' lengths"
    );
    at += 2;
    for binder in binders {
        debug_assert_eq!(usize::from(hello_body[at]), binder.len(), "a binder of its placeholder's length");
        hello_body[at + 1..at + 1 + binder.len()].copy_from_slice(binder);
        at += 1 + binder.len();
    }
}

/// Whether psk_key_exchange_modes allows `mode`.
pub fn psk_modes_allow(modes: &[u8], mode: u8) -> bool {
    modes.contains(&mode)
}

impl ServerHello<'_> {
    /// A DTLS 1.3 ServerHello or HelloRetryRequest (`random` then being
    /// `HELLO_RETRY_REQUEST_RANDOM`): legacy_version DTLS 1.2 (RFC 9147 §5.3), the version
    /// itself in supported_versions, compression 0. The session ID echo is empty in DTLS 1.3,
    /// which has no middlebox compatibility mode.
    pub fn encode13(
        out: &mut Vec<u8>,
        random: &[u8; 32],
        session_id_echo: &[u8],
        suite: u16,
        ext: &OutExtensions<'_>,
    ) {
        Self::encode_with(out, random, session_id_echo, suite, ext)
    }
}

/// EncryptedExtensions (RFC 8446 §4.3.1): an extensions block, written even when empty.
pub fn encode_encrypted_extensions(out: &mut Vec<u8>, ext: &OutExtensions<'_>) {
    put_extensions_always(out, ext);
}

pub fn parse_encrypted_extensions(body: &[u8]) -> Result<Extensions<'_>, DecodeError> {
    let mut r = Reader::new(body);
    let ext = mandatory_extensions(&mut r)?;
    r.finish()?;
    Ok(ext)
}

/// An extensions block that must be there (`Extension extensions<0..2^16-1>`), unlike a
/// hello's, which may be left out.
fn mandatory_extensions<'a>(r: &mut Reader<'a>) -> Result<Extensions<'a>, DecodeError> {
    if r.is_empty() {
        return Err(DecodeError::Truncated);
    }
    Extensions::parse(r)
}

/// CertificateRequest of TLS 1.3 (RFC 8446 §4.3.2).
#[derive(Clone, Debug)]
pub struct CertificateRequest13<'a> {
    /// certificate_request_context, echoed in the client's Certificate.
    pub context: &'a [u8],
    /// Its extensions: signature_algorithms at least.
    pub extensions: Extensions<'a>,
}

impl<'a> CertificateRequest13<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let context = r.vec8()?;
        let extensions = mandatory_extensions(&mut r)?;
        r.finish()?;
        // RFC 8446 §4.3.2: "The "signature_algorithms" extension MUST be specified".
        if extensions.signature_algorithms.is_none() {
            return Err(DecodeError::Invalid("CertificateRequest without signature_algorithms"));
        }
        Ok(CertificateRequest13 { context, extensions })
    }

    /// `compression`: the RFC 8879 algorithms we take the client's chain in (none: no extension).
    pub fn encode(
        out: &mut Vec<u8>,
        context: &[u8],
        schemes: &[u16],
        compression: &[super::CompressionAlgorithm],
    ) {
        put_vec8(out, context);
        let ext = OutExtensions {
            signature_algorithms: Some(schemes),
            compress_certificate: Some(compression),
            ..Default::default()
        };
        put_extensions_always(out, &ext);
    }
}

/// Certificate of TLS 1.3 (RFC 8446 §4.4.2): the context, then each DER certificate as a
/// CertificateEntry with no extensions.
pub fn encode_certificate13(out: &mut Vec<u8>, context: &[u8], chain: &[&[u8]]) {
    put_vec8(out, context);
    let total: usize = chain.iter().map(|c| 3 + c.len() + 2).sum();
    put_u24(out, total as u32);
    for cert in chain {
        put_u24(out, cert.len() as u32);
        out.extend_from_slice(cert);
        put_u16(out, 0);
    }
}

/// The context and the DER certificates (possibly none) of a TLS 1.3 Certificate. Entry
/// extensions (OCSP status, SCTs) are checked for form and ignored: we never ask for them.
pub fn parse_certificate13(body: &[u8]) -> Result<(&[u8], Vec<&[u8]>), DecodeError> {
    let mut r = Reader::new(body);
    let context = r.vec8()?;
    let list_len = r.u24()?;
    let mut list = Reader::new(r.take(list_len as usize)?);
    r.finish()?;
    let mut certs = Vec::new();
    while !list.is_empty() {
        let len = list.u24()?;
        let cert = list.take(len as usize)?;
        // `opaque cert_data<1..2^24-1>`.
        if cert.is_empty() {
            return Err(DecodeError::Invalid("empty certificate"));
        }
        let mut ext = Reader::new(list.vec16()?);
        while !ext.is_empty() {
            ext.u16()?;
            ext.vec16()?;
        }
        if certs.len() == MAX_CHAIN_CERTS {
            return Err(DecodeError::Invalid("certificate chain too long"));
        }
        certs.push(cert);
    }
    Ok((context, certs))
}

/// What a TLS 1.3 CertificateVerify signs (RFC 8446 §4.4.3, unchanged by RFC 9147): 64 spaces,
/// the context string, a zero byte and the transcript hash. The padding and strings keep a
/// signature from being replayed as one of an earlier version or of the other role.
pub fn certificate_verify_message(server: bool, transcript_hash: &[u8]) -> Vec<u8> {
    let context: &[u8] =
        if server { b"TLS 1.3, server CertificateVerify" } else { b"TLS 1.3, client CertificateVerify" };
    let mut m = Vec::with_capacity(64 + context.len() + 1 + transcript_hash.len());
    m.resize(64, 0x20);
    m.extend_from_slice(context);
    m.push(0);
    m.extend_from_slice(transcript_hash);
    m
}

/// NewSessionTicket of TLS 1.3 (RFC 8446 §4.6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewSessionTicket13<'a> {
    /// ticket_lifetime, seconds.
    pub lifetime: u32,
    /// ticket_age_add, hiding the ticket's age on the wire.
    pub age_add: u32,
    pub nonce: &'a [u8],
    pub ticket: &'a [u8],
    /// early_data's max_early_data_size, if the ticket allows early data.
    pub max_early_data: Option<u32>,
}

impl<'a> NewSessionTicket13<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let lifetime = r.u32()?;
        let age_add = r.u32()?;
        let nonce = r.vec8()?;
        let ticket = r.vec16()?;
        // `opaque ticket<1..2^16-1>`.
        if ticket.is_empty() {
            return Err(DecodeError::Invalid("empty ticket"));
        }
        let extensions = mandatory_extensions(&mut r)?;
        r.finish()?;
        let max_early_data = extensions
            .early_data
            .map(|d| {
                let mut d = Reader::new(d);
                let max = d.u32()?;
                d.finish()?;
                Ok(max)
            })
            .transpose()?;
        Ok(NewSessionTicket13 { lifetime, age_add, nonce, ticket, max_early_data })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.lifetime);
        put_u32(out, self.age_add);
        put_vec8(out, self.nonce);
        put_vec16(out, self.ticket);
        match self.max_early_data {
            Some(max) => {
                put_u16(out, 8);
                put_u16(out, EXT_EARLY_DATA);
                put_vec16(out, &max.to_be_bytes());
            }
            None => put_u16(out, 0),
        }
    }
}

/// KeyUpdate (RFC 8446 §4.6.3): whether the peer asks for our update in return.
pub fn parse_key_update(body: &[u8]) -> Result<bool, DecodeError> {
    let mut r = Reader::new(body);
    let request = r.u8()?;
    r.finish()?;
    match request {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::Invalid("KeyUpdateRequest")),
    }
}

pub fn encode_key_update(out: &mut Vec<u8>, update_requested: bool) {
    put_u8(out, u8::from(update_requested));
}

/// NewConnectionId (RFC 9147 §9): the CIDs (each possibly empty) and their usage
/// ([`CID_IMMEDIATE`] or [`CID_SPARE`]).
pub fn parse_new_connection_id(body: &[u8]) -> Result<(Vec<&[u8]>, u8), DecodeError> {
    let mut r = Reader::new(body);
    let mut list = Reader::new(r.vec16()?);
    let usage = r.u8()?;
    r.finish()?;
    if usage != CID_IMMEDIATE && usage != CID_SPARE {
        return Err(DecodeError::Invalid("ConnectionIdUsage"));
    }
    let mut cids = Vec::new();
    while !list.is_empty() {
        cids.push(list.vec8()?);
    }
    Ok((cids, usage))
}

// Sent by the 1.3 tickets and CID updates still to come; the corpus and tests write it now.
#[cfg_attr(not(test), allow(dead_code))]
pub fn encode_new_connection_id(out: &mut Vec<u8>, cids: &[&[u8]], usage: u8) {
    let total: usize = cids.iter().map(|c| 1 + c.len()).sum();
    put_u16(out, total as u16);
    for cid in cids {
        put_vec8(out, cid);
    }
    put_u8(out, usage);
}

/// RequestConnectionId (RFC 9147 §9): how many CIDs the peer asks for.
pub fn parse_request_connection_id(body: &[u8]) -> Result<u8, DecodeError> {
    let mut r = Reader::new(body);
    let n = r.u8()?;
    r.finish()?;
    Ok(n)
}

// Sent by the 1.3 tickets and CID updates still to come; the corpus and tests write it now.
#[cfg_attr(not(test), allow(dead_code))]
pub fn encode_request_connection_id(out: &mut Vec<u8>, num_cids: u8) {
    put_u8(out, num_cids);
}

/// The header a DTLS 1.3 message is hashed into the transcript with (RFC 9147 §5.2): TLS 1.3's
/// type and 24-bit length, without message_seq and the fragment fields, so the transcript does
/// not depend on how the message was fragmented or renumbered.
pub fn transcript_header(msg_type: HandshakeType, length: u32) -> [u8; 4] {
    let l = length.to_be_bytes();
    [msg_type as u8, l[1], l[2], l[3]]
}

/// The header of the `message_hash` message that replaces ClientHello1 in the transcript after
/// a HelloRetryRequest (RFC 8446 §4.4.1); the hash of ClientHello1 follows it.
pub fn message_hash_prefix(hash_len: u8) -> [u8; 4] {
    [HandshakeType::MessageHash as u8, 0, 0, hash_len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::{
        ClientHello, PskOffer, ServerHello, EXT_COOKIE, EXT_PRE_SHARED_KEY, EXT_PSK_KEY_EXCHANGE_MODES,
        EXT_SUPPORTED_VERSIONS,
    };

    /// Every proper prefix of `b` fails to parse.
    fn every_cut_fails<'a, T>(b: &'a [u8], parse: impl Fn(&'a [u8]) -> Result<T, DecodeError>) {
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut} of {}", b.len());
        }
    }

    #[test]
    fn hello_retry_request_random_is_sha256_of_its_name() {
        let digest = ring::digest::digest(&ring::digest::SHA256, b"HelloRetryRequest");
        assert_eq!(digest.as_ref(), HELLO_RETRY_REQUEST_RANDOM);
        assert!(is_hello_retry_request(&HELLO_RETRY_REQUEST_RANDOM));
        assert!(!is_hello_retry_request(&[0; 32]));
        assert_eq!(&DOWNGRADE_TLS12[..7], b"DOWNGRD");
    }

    #[test]
    fn supported_versions_forms() {
        let v = offered_versions(&[4, 0xfe, 0xfc, 0xfe, 0xfd]).unwrap();
        assert_eq!(v.iter().collect::<Vec<_>>(), [DTLS_1_3, 0xfefd]);
        assert!(v.contains(DTLS_1_3) && !v.contains(0xfeff));
        every_cut_fails(&[4, 0xfe, 0xfc, 0xfe, 0xfd], offered_versions);
        assert!(offered_versions(&[0]).is_err(), "empty");
        assert!(offered_versions(&[3, 0xfe, 0xfc, 0xfe]).is_err(), "odd");
        assert!(offered_versions(&[2, 0xfe, 0xfc, 0]).is_err(), "trailing");
        let mut long = vec![0xff];
        long.extend_from_slice(&[0xfe; 255]);
        assert!(offered_versions(&long).is_err(), "255 bytes");
        let mut longest = vec![254];
        longest.extend_from_slice(&[0xfe; 254]);
        assert_eq!(offered_versions(&longest).unwrap().iter().count(), 127);
        assert_eq!(selected_version(&[0xfe, 0xfc]), Ok(DTLS_1_3));
        every_cut_fails(&[0xfe, 0xfc], selected_version);
        assert!(selected_version(&[0xfe, 0xfc, 0]).is_err());
    }

    fn hello_extensions(body: &[u8]) -> Extensions<'_> {
        ClientHello::parse(body).unwrap().extensions
    }

    #[test]
    fn key_share_forms() {
        let x = [9u8; 32];
        let p = [4u8; 65];
        let shares = [(29, &x[..]), (23, &p[..])];
        let mut b = Vec::new();
        let ext = OutExtensions { key_shares: Some(&shares), ..Default::default() };
        ClientHello::encode_with(&mut b, &[1; 32], &[], &[], &[0x1301], &ext);
        let data = hello_extensions(&b).key_share.unwrap();
        let parsed = client_shares(data).unwrap();
        assert_eq!(
            parsed,
            [KeyShareEntry { group: 29, key_exchange: &x }, KeyShareEntry { group: 23, key_exchange: &p }]
        );
        every_cut_fails(data, client_shares);
        // Empty list: the client waits for a HelloRetryRequest.
        assert_eq!(client_shares(&[0, 0]), Ok(vec![]));
        // Two shares of one group.
        assert!(client_shares(&[0, 10, 0, 29, 0, 1, 7, 0, 29, 0, 1, 8]).is_err());
        // An empty key_exchange.
        assert!(client_shares(&[0, 4, 0, 29, 0, 0]).is_err());

        let mut b = Vec::new();
        let ext = OutExtensions { server_share: Some((29, &x)), ..Default::default() };
        ServerHello::encode13(&mut b, &[2; 32], &[], 0x1301, &ext);
        let data = ServerHello::parse(&b).unwrap().extensions.key_share.unwrap();
        assert_eq!(server_share(data), Ok(KeyShareEntry { group: 29, key_exchange: &x }));
        every_cut_fails(data, server_share);
        assert!(server_share(&[0, 29, 0, 0]).is_err());

        let mut b = Vec::new();
        let ext = OutExtensions { hrr_group: Some(23), ..Default::default() };
        ServerHello::encode13(&mut b, &HELLO_RETRY_REQUEST_RANDOM, &[], 0x1301, &ext);
        let sh = ServerHello::parse(&b).unwrap();
        assert!(is_hello_retry_request(&sh.random));
        let data = sh.extensions.key_share.unwrap();
        assert_eq!(hrr_selected_group(data), Ok(23));
        every_cut_fails(data, hrr_selected_group);
        assert!(hrr_selected_group(&[0, 23, 0]).is_err());
    }

    #[test]
    fn client_hello_with_every_tls13_extension() {
        let x = [9u8; 32];
        let shares = [(29, &x[..])];
        let ids: [(&[u8], u32); 2] = [(b"ticket one", 7), (b"ticket two", 0xdead_beef)];
        let ext = OutExtensions {
            extended_master_secret: true,
            supported_versions: Some(&[DTLS_1_3, 0xfefd]),
            supported_groups: Some(&[29, 23]),
            signature_algorithms: Some(&[0x0403, 0x0804]),
            key_shares: Some(&shares),
            cookie13: Some(b"a cookie"),
            psk_key_exchange_modes: Some(&[PSK_DHE_KE]),
            early_data: true,
            psk_offer: Some(PskOffer { identities: &ids, binder_lens: &[32, 48] }),
            ..Default::default()
        };
        let mut b = Vec::new();
        ClientHello::encode_with(&mut b, &[3; 32], &[], &[], &[0x1301, 0x1302], &ext);
        let ch = ClientHello::parse(&b).unwrap();
        assert_eq!(ch.version, 0xfefd);
        assert!(ch.session_id.is_empty() && ch.cookie.is_empty());
        assert_eq!(ch.compression_methods, [0]);
        let e = &ch.extensions;
        assert!(e.extended_master_secret && e.unknown.is_none());
        assert_eq!(
            offered_versions(e.supported_versions.unwrap()).unwrap().iter().collect::<Vec<_>>(),
            [DTLS_1_3, 0xfefd]
        );
        assert_eq!(e.supported_groups, Some(&[0, 29, 0, 23][..]));
        assert_eq!(e.ec_point_formats, None, "no point formats in a hello without `ecc`");
        assert_eq!(e.signature_algorithms, Some(&[4, 3, 8, 4][..]));
        assert_eq!(client_shares(e.key_share.unwrap()).unwrap().len(), 1);
        assert_eq!(e.cookie13, Some(&b"a cookie"[..]));
        assert!(psk_modes_allow(e.psk_key_exchange_modes.unwrap(), PSK_DHE_KE));
        assert!(!psk_modes_allow(e.psk_key_exchange_modes.unwrap(), PSK_KE));
        assert_eq!(e.early_data, Some(&[][..]));
        assert!(e.pre_shared_key_last);
        assert_eq!(e.tls13_extension(), Some(EXT_PRE_SHARED_KEY));
        let offered = OfferedPsks::parse(e.pre_shared_key.unwrap()).unwrap();
        assert_eq!(offered.identities, ids);
        assert_eq!(offered.binders, [&[0u8; 32][..], &[0u8; 48][..]]);
        assert_eq!(offered.binders_len, binders_block_len(&[32, 48]));
        for cut in 0..b.len() {
            let _ = ClientHello::parse(&b[..cut]);
        }
        // With `ecc`, the lone supported_groups and signature_algorithms are not written twice.
        let both = OutExtensions { ecc: Some((&[29], &[0x0403])), ..ext };
        let mut b = Vec::new();
        ClientHello::encode_with(&mut b, &[3; 32], &[], &[], &[0x1301], &both);
        let e = hello_extensions(&b);
        assert_eq!((e.supported_groups, e.ec_point_formats), (Some(&[0, 29][..]), Some(true)));
    }

    #[test]
    fn pre_shared_key_not_last_is_flagged() {
        let mut b = Vec::new();
        let ext = OutExtensions { selected_identity: Some(1), ..Default::default() };
        ServerHello::encode13(&mut b, &[2; 32], &[], 0x1301, &ext);
        let e = ServerHello::parse(&b).unwrap().extensions;
        assert!(e.pre_shared_key_last);
        assert_eq!(selected_identity(e.pre_shared_key.unwrap()), Ok(1));
        every_cut_fails(&[0, 1], selected_identity);
        assert!(selected_identity(&[0, 1, 0]).is_err());
        // pre_shared_key, then extended_master_secret.
        let block = [0, 10, 0, 0x29, 0, 2, 0, 1, 0, 0x17, 0, 0];
        let e = Extensions::parse(&mut Reader::new(&block)).unwrap();
        assert!(e.pre_shared_key.is_some() && !e.pre_shared_key_last);
    }

    #[test]
    fn binders_patched_in_place() {
        let ids: [(&[u8], u32); 2] = [(b"id-a", 1), (b"id-b", 2)];
        let ext = OutExtensions {
            supported_versions: Some(&[DTLS_1_3]),
            psk_key_exchange_modes: Some(&[PSK_KE, PSK_DHE_KE]),
            psk_offer: Some(PskOffer { identities: &ids, binder_lens: &[32, 48] }),
            ..Default::default()
        };
        let mut b = Vec::new();
        ClientHello::encode_with(&mut b, &[3; 32], &[], &[], &[0x1301], &ext);
        let binders_len = binders_block_len(&[32, 48]);
        assert_eq!(binders_len, 2 + 33 + 49);
        let truncated_len = b.len() - binders_len;
        // The truncated ClientHello ends just before the binders list's length.
        assert_eq!(&b[truncated_len..truncated_len + 3], [0, 33 + 49, 32]);
        let (one, two) = ([0xaa; 32], [0xbb; 48]);
        patch_binders(&mut b, &[&one, &two]);
        let ch = ClientHello::parse(&b).unwrap();
        let offered = OfferedPsks::parse(ch.extensions.pre_shared_key.unwrap()).unwrap();
        assert_eq!(offered.binders, [&one[..], &two[..]]);
        assert_eq!(offered.binders_len, binders_len);
        assert_eq!(b.len() - offered.binders_len, truncated_len);
    }

    #[test]
    fn offered_psks_errors() {
        let mut ok = Vec::new();
        put_vec16(&mut ok, &[0, 2, b'i', b'd', 0, 0, 0, 5]);
        let mut binders = vec![32];
        binders.extend_from_slice(&[1; 32]);
        put_vec16(&mut ok, &binders);
        let offered = OfferedPsks::parse(&ok).unwrap();
        assert_eq!(offered.identities, [(&b"id"[..], 5)]);
        assert_eq!(offered.binders_len, 35);
        every_cut_fails(&ok, OfferedPsks::parse);
        let with = |ids: &[u8], binders: &[u8]| {
            let mut d = Vec::new();
            put_vec16(&mut d, ids);
            put_vec16(&mut d, binders);
            OfferedPsks::parse(&d).map(|_| ())
        };
        assert!(with(&[], &binders).is_err(), "no identity");
        assert!(with(&[0, 0, 0, 0, 0, 5], &binders).is_err(), "empty identity");
        let short = [&[31u8][..], &[1; 31]].concat();
        assert!(with(&[0, 1, b'i', 0, 0, 0, 5], &short).is_err(), "binder of 31 bytes");
        let two = [&binders[..], &binders[..]].concat();
        assert!(with(&[0, 1, b'i', 0, 0, 0, 5], &two).is_err(), "two binders for one identity");
        assert!(with(&[0, 1, b'i', 0, 0, 0, 5], &[]).is_err(), "no binder");
        let mut trailing = ok.clone();
        trailing.push(0);
        assert!(OfferedPsks::parse(&trailing).is_err());
    }

    #[test]
    fn extension_bodies_checked_at_parse() {
        let parse = |ty: u16, data: &[u8]| {
            let mut block = Vec::new();
            put_u16(&mut block, ty);
            put_vec16(&mut block, data);
            let mut all = Vec::new();
            put_vec16(&mut all, &block);
            Extensions::parse(&mut Reader::new(&all))
                .map(|e| (e.cookie13.is_some(), e.psk_key_exchange_modes.map(<[u8]>::to_vec)))
        };
        assert_eq!(parse(EXT_COOKIE, &[0, 1, 7]), Ok((true, None)));
        assert!(parse(EXT_COOKIE, &[0, 0]).is_err(), "empty cookie");
        assert!(parse(EXT_COOKIE, &[0, 1, 7, 0]).is_err(), "trailing");
        assert!(parse(EXT_COOKIE, &[0, 2, 7]).is_err(), "truncated");
        assert_eq!(parse(EXT_PSK_KEY_EXCHANGE_MODES, &[1, 1]), Ok((false, Some(vec![1]))));
        assert!(parse(EXT_PSK_KEY_EXCHANGE_MODES, &[0]).is_err(), "no mode");
        assert!(parse(EXT_PSK_KEY_EXCHANGE_MODES, &[1, 1, 0]).is_err(), "trailing");
    }

    #[test]
    fn server_hello_13_layout() {
        let ext = OutExtensions {
            selected_version: Some(DTLS_1_3),
            server_share: Some((29, &[5; 32])),
            ..Default::default()
        };
        let mut b = Vec::new();
        ServerHello::encode13(&mut b, &[2; 32], &[], 0x1301, &ext);
        // legacy_version DTLS 1.2, random, empty session ID echo, suite, compression 0.
        assert_eq!(b[..2], [0xfe, 0xfd]);
        assert_eq!(b[34..38], [0, 0x13, 0x01, 0]);
        let sh = ServerHello::parse(&b).unwrap();
        assert_eq!((sh.version, sh.cipher_suite, sh.compression_method), (0xfefd, 0x1301, 0));
        assert!(sh.session_id.is_empty());
        assert_eq!(selected_version(sh.extensions.supported_versions.unwrap()), Ok(DTLS_1_3));
        assert_eq!(sh.extensions.tls13_extension(), Some(EXT_SUPPORTED_VERSIONS));
        every_cut_fails(&b, |b| {
            ServerHello::parse(b).and_then(|sh| server_share(sh.extensions.key_share.unwrap_or(&[])))
        });
    }

    #[test]
    fn encrypted_extensions_round_trip() {
        let mut b = Vec::new();
        encode_encrypted_extensions(&mut b, &OutExtensions::default());
        assert_eq!(b, [0, 0], "the block is mandatory");
        assert_eq!(parse_encrypted_extensions(&b), Ok(Extensions::default()));
        assert!(parse_encrypted_extensions(&[]).is_err());
        assert!(parse_encrypted_extensions(&[0, 0, 0]).is_err());
        let mut b = Vec::new();
        let ext = OutExtensions { server_name: Some(b""), early_data: true, ..Default::default() };
        encode_encrypted_extensions(&mut b, &ext);
        let e = parse_encrypted_extensions(&b).unwrap();
        assert_eq!((e.server_name, e.early_data), (Some(&[][..]), Some(&[][..])));
        every_cut_fails(&b, parse_encrypted_extensions);
    }

    #[test]
    fn certificate_request_13_round_trip() {
        let mut b = Vec::new();
        CertificateRequest13::encode(&mut b, b"ctx", &[0x0403, 0x0804], &[]);
        let cr = CertificateRequest13::parse(&b).unwrap();
        assert_eq!(cr.context, b"ctx");
        assert_eq!(
            u16_list(cr.extensions.signature_algorithms.unwrap()).collect::<Vec<_>>(),
            [0x0403, 0x0804]
        );
        every_cut_fails(&b, CertificateRequest13::parse);
        // signature_algorithms is mandatory.
        assert!(CertificateRequest13::parse(&[0, 0, 0]).is_err());
        assert!(CertificateRequest13::parse(&[0, 0, 4, 0, 0x17, 0, 0]).is_err());
    }

    #[test]
    fn certificate_13_round_trip() {
        let mut b = Vec::new();
        encode_certificate13(&mut b, &[], &[b"leaf", b"intermediate"]);
        let (context, certs) = parse_certificate13(&b).unwrap();
        assert!(context.is_empty());
        assert_eq!(certs, [&b"leaf"[..], &b"intermediate"[..]]);
        every_cut_fails(&b, parse_certificate13);
        let mut b = Vec::new();
        encode_certificate13(&mut b, b"req", &[]);
        assert_eq!(parse_certificate13(&b), Ok((&b"req"[..], vec![])));
        // An entry with an extension (status_request), read past.
        let entry = [0, 0, 1, 0xc0, 0, 6, 0, 5, 0, 2, 1, 2];
        let mut b = vec![0, 0, 0, entry.len() as u8];
        b.extend_from_slice(&entry);
        assert_eq!(parse_certificate13(&b), Ok((&[][..], vec![&[0xc0u8][..]])));
        // An extension that overruns its block.
        let bad = [0, 0, 0, 10, 0, 0, 1, 0xc0, 0, 4, 0, 5, 0, 2];
        assert!(parse_certificate13(&bad).is_err());
        // An empty cert_data.
        assert!(parse_certificate13(&[0, 0, 0, 5, 0, 0, 0, 0, 0]).is_err());
        let chain: Vec<&[u8]> = vec![b"c"; MAX_CHAIN_CERTS + 1];
        let mut b = Vec::new();
        encode_certificate13(&mut b, &[], &chain);
        assert!(parse_certificate13(&b).is_err(), "too many certificates");
    }

    #[test]
    fn certificate_verify_content() {
        let m = certificate_verify_message(true, &[0xab; 32]);
        assert_eq!(m.len(), 64 + 33 + 1 + 32);
        assert!(m[..64].iter().all(|&b| b == 0x20));
        assert_eq!(&m[64..97], b"TLS 1.3, server CertificateVerify");
        assert_eq!(m[97], 0);
        assert_eq!(m[98..], [0xab; 32]);
        assert_eq!(&certificate_verify_message(false, &[])[64..], b"TLS 1.3, client CertificateVerify\0");
    }

    #[test]
    fn new_session_ticket_13_round_trip() {
        for max_early_data in [None, Some(16384)] {
            let t = NewSessionTicket13 {
                lifetime: 7200,
                age_add: 0x0102_0304,
                nonce: &[0],
                ticket: b"tkt",
                max_early_data,
            };
            let mut b = Vec::new();
            t.encode(&mut b);
            assert_eq!(NewSessionTicket13::parse(&b), Ok(t));
            every_cut_fails(&b, NewSessionTicket13::parse);
        }
        let t =
            NewSessionTicket13 { lifetime: 1, age_add: 2, nonce: &[], ticket: b"t", max_early_data: None };
        let mut b = Vec::new();
        t.encode(&mut b);
        assert_eq!(NewSessionTicket13::parse(&b), Ok(t));
        // An empty ticket.
        assert!(NewSessionTicket13::parse(&[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0]).is_err());
        // early_data of three bytes.
        let mut b = vec![0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 1, b't'];
        b.extend_from_slice(&[0, 7, 0, 0x2a, 0, 3, 0, 0, 1]);
        assert!(NewSessionTicket13::parse(&b).is_err());
    }

    #[test]
    fn key_update_round_trip() {
        for requested in [false, true] {
            let mut b = Vec::new();
            encode_key_update(&mut b, requested);
            assert_eq!(parse_key_update(&b), Ok(requested));
        }
        assert!(parse_key_update(&[]).is_err());
        assert!(parse_key_update(&[2]).is_err());
        assert!(parse_key_update(&[0, 0]).is_err());
    }

    #[test]
    fn connection_id_messages_round_trip() {
        for usage in [CID_IMMEDIATE, CID_SPARE] {
            let mut b = Vec::new();
            encode_new_connection_id(&mut b, &[b"abcd", b"", b"efgh"], usage);
            assert_eq!(parse_new_connection_id(&b), Ok((vec![&b"abcd"[..], &[][..], &b"efgh"[..]], usage)));
            every_cut_fails(&b, parse_new_connection_id);
        }
        let mut b = Vec::new();
        encode_new_connection_id(&mut b, &[], CID_IMMEDIATE);
        assert_eq!(parse_new_connection_id(&b), Ok((vec![], CID_IMMEDIATE)));
        assert!(parse_new_connection_id(&[0, 0, 2]).is_err(), "unknown usage");
        assert!(parse_new_connection_id(&[0, 2, 5, 1, 0]).is_err(), "CID overruns its list");
        let mut b = Vec::new();
        encode_request_connection_id(&mut b, 3);
        assert_eq!(parse_request_connection_id(&b), Ok(3));
        assert!(parse_request_connection_id(&[]).is_err());
        assert!(parse_request_connection_id(&[1, 2]).is_err());
    }

    #[test]
    fn transcript_headers() {
        assert_eq!(transcript_header(HandshakeType::ClientHello, 0x012345), [1, 0x01, 0x23, 0x45]);
        assert_eq!(transcript_header(HandshakeType::EncryptedExtensions, 2), [8, 0, 0, 2]);
        assert_eq!(message_hash_prefix(32), [254, 0, 0, 32]);
        assert_eq!(HandshakeType::from_u8(254), Some(HandshakeType::MessageHash));
        assert_eq!(HandshakeType::from_u8(5), None, "no EndOfEarlyData in DTLS 1.3");
    }

    /// The seed corpus of the `dtls_handshake13` fuzz target is one valid message of each kind,
    /// its type byte first, as the codecs write them now; with `FASTSHAKE_WRITE_CORPUS=1` the
    /// test writes the files instead of comparing them.
    #[test]
    fn the_handshake13_seed_corpus_is_what_the_codecs_write() {
        let mut seeds: Vec<(&str, HandshakeType, Vec<u8>)> = Vec::new();
        let x = [9u8; 32];
        let shares = [(29, &x[..])];
        let ids: [(&[u8], u32); 1] = [(b"ticket", 0x0102_0304)];
        let mut b = Vec::new();
        let ext = OutExtensions {
            server_name: Some(b"example.net"),
            supported_versions: Some(&[DTLS_1_3, 0xfefd]),
            supported_groups: Some(&[29, 23]),
            signature_algorithms: Some(&[0x0403, 0x0804]),
            key_shares: Some(&shares),
            cookie13: Some(b"cookie"),
            psk_key_exchange_modes: Some(&[PSK_DHE_KE]),
            early_data: true,
            psk_offer: Some(PskOffer { identities: &ids, binder_lens: &[32] }),
            ..Default::default()
        };
        ClientHello::encode_with(&mut b, &[1; 32], &[], &[], &[0x1301, 0x1302], &ext);
        patch_binders(&mut b, &[&[0x5a; 32]]);
        seeds.push(("client_hello_psk_dhe", HandshakeType::ClientHello, b));
        let mut b = Vec::new();
        let ext = OutExtensions {
            selected_version: Some(DTLS_1_3),
            server_share: Some((29, &x)),
            selected_identity: Some(0),
            ..Default::default()
        };
        ServerHello::encode13(&mut b, &[2; 32], &[], 0x1301, &ext);
        seeds.push(("server_hello", HandshakeType::ServerHello, b));
        let mut b = Vec::new();
        let ext = OutExtensions {
            selected_version: Some(DTLS_1_3),
            hrr_group: Some(23),
            cookie13: Some(b"stateless cookie"),
            ..Default::default()
        };
        ServerHello::encode13(&mut b, &HELLO_RETRY_REQUEST_RANDOM, &[], 0x1301, &ext);
        seeds.push(("hello_retry_request", HandshakeType::ServerHello, b));
        let mut b = Vec::new();
        let ext = OutExtensions { server_name: Some(b""), early_data: true, ..Default::default() };
        encode_encrypted_extensions(&mut b, &ext);
        seeds.push(("encrypted_extensions", HandshakeType::EncryptedExtensions, b));
        let mut b = Vec::new();
        CertificateRequest13::encode(&mut b, b"", &[0x0403, 0x0804, 0x0401], &[]);
        seeds.push(("certificate_request", HandshakeType::CertificateRequest, b));
        let mut b = Vec::new();
        encode_certificate13(&mut b, &[], &[&[0x30, 0x03, 0x02, 0x01, 0x01], &[0x30, 0x00]]);
        seeds.push(("certificate", HandshakeType::Certificate, b));
        let mut b = Vec::new();
        crate::handshake::encode_signed(&mut b, 0x0403, &[0x30; 70]);
        seeds.push(("certificate_verify", HandshakeType::CertificateVerify, b));
        let mut b = Vec::new();
        NewSessionTicket13 {
            lifetime: 3600,
            age_add: 7,
            nonce: &[0],
            ticket: &[0xee; 40],
            max_early_data: Some(1024),
        }
        .encode(&mut b);
        seeds.push(("new_session_ticket", HandshakeType::NewSessionTicket, b));
        let mut b = Vec::new();
        encode_key_update(&mut b, true);
        seeds.push(("key_update", HandshakeType::KeyUpdate, b));
        let mut b = Vec::new();
        encode_new_connection_id(&mut b, &[&[1, 2, 3, 4], &[5, 6, 7, 8]], CID_SPARE);
        seeds.push(("new_connection_id", HandshakeType::NewConnectionId, b));
        let mut b = Vec::new();
        encode_request_connection_id(&mut b, 2);
        seeds.push(("request_connection_id", HandshakeType::RequestConnectionId, b));
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/dtls_handshake13");
        let write = std::env::var("FASTSHAKE_WRITE_CORPUS").is_ok_and(|v| v == "1");
        for (name, msg_type, body) in seeds {
            let mut seed = vec![msg_type as u8];
            seed.extend_from_slice(&body);
            if write {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(name), seed).unwrap();
            } else {
                let kept = std::fs::read(dir.join(name)).unwrap_or_default();
                assert!(
                    kept == seed,
                    "{name}: the corpus file differs (FASTSHAKE_WRITE_CORPUS=1 rewrites it)"
                );
            }
        }
    }
}
