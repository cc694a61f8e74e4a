//! Bodies of the handshake messages of a PSK handshake, with an extension codec that skips
//! unknown extensions (so later extensions slot in as new fields).

use fastshake_core::codec::{put_u16, put_u32, put_u8, put_vec16, put_vec8, DecodeError, Reader};

pub const EXT_EXTENDED_MASTER_SECRET: u16 = 0x0017;
pub const EXT_RENEGOTIATION_INFO: u16 = 0xff01;
pub const EXT_SERVER_NAME: u16 = 0x0000;
pub const EXT_SUPPORTED_GROUPS: u16 = 0x000a;
pub const EXT_EC_POINT_FORMATS: u16 = 0x000b;
pub const EXT_SIGNATURE_ALGORITHMS: u16 = 0x000d;
pub const EXT_SESSION_TICKET: u16 = 0x0023;
// TLS 1.3 extensions (RFC 8446 §4.2); signature_algorithms_cert (50) is skipped as unknown.
pub const EXT_PRE_SHARED_KEY: u16 = 0x0029;
pub const EXT_EARLY_DATA: u16 = 0x002a;
pub const EXT_SUPPORTED_VERSIONS: u16 = 0x002b;
pub const EXT_COOKIE: u16 = 0x002c;
pub const EXT_PSK_KEY_EXCHANGE_MODES: u16 = 0x002d;
pub const EXT_KEY_SHARE: u16 = 0x0033;
/// use_srtp (RFC 5764 §4.1.1).
pub const EXT_USE_SRTP: u16 = 0x000e;
/// ECPointFormat `uncompressed` (RFC 8422 §5.1.2).
const POINT_FORMAT_UNCOMPRESSED: u8 = 0;
/// NameType `host_name` (RFC 6066 §3).
const NAME_TYPE_HOST: u8 = 0;
/// TLS_EMPTY_RENEGOTIATION_INFO_SCSV (RFC 5746 §3.3).
pub const SCSV_EMPTY_RENEGOTIATION_INFO: u16 = 0x00ff;
pub const MAX_COOKIE_LEN: usize = 255;

/// The extensions this engine understands; others are skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extensions<'a> {
    pub extended_master_secret: bool,
    pub renegotiation_info: Option<&'a [u8]>,
    /// server_name: the host name (ClientHello), or present and empty (ServerHello).
    pub server_name: Option<&'a [u8]>,
    /// supported_groups: raw pairs of bytes.
    pub supported_groups: Option<&'a [u8]>,
    /// ec_point_formats offered include `uncompressed`.
    pub ec_point_formats: Option<bool>,
    /// signature_algorithms: raw pairs of bytes.
    pub signature_algorithms: Option<&'a [u8]>,
    /// session_ticket: the ticket (ClientHello; may be empty) or empty (ServerHello).
    pub session_ticket: Option<&'a [u8]>,
    /// connection_id (RFC 9146): the CID the sender wants in records sent to it (may be empty).
    pub connection_id: Option<&'a [u8]>,
    /// rrc (RFC 9853), always empty.
    pub rrc: bool,
    /// port_move (fastshake, private use), always empty.
    pub port_move: bool,
    /// cached_info (RFC 7924): the raw body, read by the role that knows its form.
    pub cached_info: Option<&'a [u8]>,
    /// Client-certificate caching (seed 003): the raw body.
    pub client_cert_cache: Option<&'a [u8]>,
    /// supported_versions (RFC 8446 §4.2.1): the raw body, a list in a ClientHello and one
    /// version in a ServerHello (`offered_versions`, `selected_version`).
    pub supported_versions: Option<&'a [u8]>,
    /// key_share (RFC 8446 §4.2.8): the raw body, whose form depends on the message
    /// (`client_shares`, `server_share`, `hrr_selected_group`).
    pub key_share: Option<&'a [u8]>,
    /// cookie (RFC 8446 §4.2.2): the cookie itself, never empty.
    pub cookie13: Option<&'a [u8]>,
    /// psk_key_exchange_modes (RFC 8446 §4.2.9): the modes, at least one.
    pub psk_key_exchange_modes: Option<&'a [u8]>,
    /// pre_shared_key (RFC 8446 §4.2.11): the raw body (`OfferedPsks`, `selected_identity`).
    pub pre_shared_key: Option<&'a [u8]>,
    /// pre_shared_key was the block's last extension, as a ClientHello's MUST be (RFC 8446
    /// §4.2.11): the binders hash everything before them.
    pub pre_shared_key_last: bool,
    /// early_data (RFC 8446 §4.2.10): the raw body, empty except in NewSessionTicket.
    pub early_data: Option<&'a [u8]>,
    /// compress_certificate (RFC 8879 §3): the algorithms, raw pairs of bytes.
    pub compress_certificate: Option<&'a [u8]>,
    /// use_srtp (RFC 5764 §4.1.1): the protection profiles, read with `srtp_profiles`.
    pub use_srtp: Option<&'a [u8]>,
    /// The first extension of a type this engine does not read (for "did the server send
    /// something we never offered").
    pub unknown: Option<u16>,
}

/// Extension types a hello's duplicate check keeps on the stack; a hello with more (none real has
/// half as many) is checked on the heap.
const INLINE_EXTENSION_TYPES: usize = 64;

/// The extension types of one block seen so far, to refuse a second of any type (RFC 5246
/// §7.4.1.4): without allocating for any real hello.
struct SeenTypes {
    inline: [u16; INLINE_EXTENSION_TYPES],
    len: usize,
    more: std::collections::BTreeSet<u16>,
}

impl SeenTypes {
    fn new() -> Self {
        SeenTypes { inline: [0; INLINE_EXTENSION_TYPES], len: 0, more: std::collections::BTreeSet::new() }
    }

    /// Notes `ty`; false if it was seen before.
    fn insert(&mut self, ty: u16) -> bool {
        if self.inline[..self.len].contains(&ty) {
            return false;
        }
        if self.len < INLINE_EXTENSION_TYPES {
            self.inline[self.len] = ty;
            self.len += 1;
            return true;
        }
        self.more.insert(ty)
    }
}

impl<'a> Extensions<'a> {
    /// Parses an optional extensions block (absent when the message ends first).
    pub fn parse(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let mut ext = Extensions::default();
        if r.is_empty() {
            return Ok(ext);
        }
        let mut block = Reader::new(r.vec16()?);
        let mut seen = SeenTypes::new();
        while !block.is_empty() {
            let ty = block.u16()?;
            let data = block.vec16()?;
            if !seen.insert(ty) {
                return Err(DecodeError::Invalid("duplicate extension"));
            }
            match ty {
                EXT_EXTENDED_MASTER_SECRET => {
                    if !data.is_empty() {
                        return Err(DecodeError::Invalid("extended_master_secret not empty"));
                    }
                    ext.extended_master_secret = true;
                }
                EXT_RENEGOTIATION_INFO => {
                    let mut d = Reader::new(data);
                    let inner = d.vec8()?;
                    d.finish()?;
                    ext.renegotiation_info = Some(inner);
                }
                EXT_SERVER_NAME => {
                    ext.server_name = Some(parse_server_name(data)?);
                }
                EXT_SUPPORTED_GROUPS => {
                    let mut d = Reader::new(data);
                    let list = d.vec16()?;
                    d.finish()?;
                    if list.len() % 2 != 0 {
                        return Err(DecodeError::Invalid("supported_groups"));
                    }
                    ext.supported_groups = Some(list);
                }
                EXT_EC_POINT_FORMATS => {
                    let mut d = Reader::new(data);
                    let list = d.vec8()?;
                    d.finish()?;
                    ext.ec_point_formats = Some(list.contains(&POINT_FORMAT_UNCOMPRESSED));
                }
                EXT_SIGNATURE_ALGORITHMS => {
                    let mut d = Reader::new(data);
                    let list = d.vec16()?;
                    d.finish()?;
                    if list.len() % 2 != 0 {
                        return Err(DecodeError::Invalid("signature_algorithms"));
                    }
                    ext.signature_algorithms = Some(list);
                }
                EXT_SESSION_TICKET => ext.session_ticket = Some(data),
                crate::mobility::EXT_CONNECTION_ID => {
                    let mut d = Reader::new(data);
                    let cid = d.vec8()?;
                    d.finish()?;
                    ext.connection_id = Some(cid);
                }
                crate::mobility::EXT_RRC | crate::mobility::EXT_PORT_MOVE => {
                    if !data.is_empty() {
                        return Err(DecodeError::Invalid("rrc / port_move not empty"));
                    }
                    if ty == crate::mobility::EXT_RRC {
                        ext.rrc = true;
                    } else {
                        ext.port_move = true;
                    }
                }
                super::EXT_CACHED_INFO => ext.cached_info = Some(data),
                super::EXT_CLIENT_CERT_CACHE => ext.client_cert_cache = Some(data),
                EXT_SUPPORTED_VERSIONS => ext.supported_versions = Some(data),
                EXT_KEY_SHARE => ext.key_share = Some(data),
                EXT_COOKIE => {
                    let mut d = Reader::new(data);
                    let cookie = d.vec16()?;
                    d.finish()?;
                    if cookie.is_empty() {
                        return Err(DecodeError::Invalid("empty cookie"));
                    }
                    ext.cookie13 = Some(cookie);
                }
                EXT_PSK_KEY_EXCHANGE_MODES => {
                    let mut d = Reader::new(data);
                    let modes = d.vec8()?;
                    d.finish()?;
                    if modes.is_empty() {
                        return Err(DecodeError::Invalid("psk_key_exchange_modes empty"));
                    }
                    ext.psk_key_exchange_modes = Some(modes);
                }
                EXT_PRE_SHARED_KEY => {
                    ext.pre_shared_key = Some(data);
                    ext.pre_shared_key_last = block.is_empty();
                }
                EXT_EARLY_DATA => ext.early_data = Some(data),
                EXT_USE_SRTP => {
                    srtp_profiles(data)?;
                    ext.use_srtp = Some(data);
                }
                super::EXT_COMPRESS_CERTIFICATE => {
                    ext.compress_certificate = Some(super::parse_compress_certificate(data)?);
                }
                other => {
                    ext.unknown.get_or_insert(other);
                }
            }
        }
        Ok(ext)
    }

    /// The type of a TLS 1.3 extension present (the first in the order of RFC 8446 §4.2), for
    /// a DTLS 1.2 ServerHello, where any of them is one we never asked for.
    pub fn tls13_extension(&self) -> Option<u16> {
        [
            (EXT_PRE_SHARED_KEY, self.pre_shared_key.is_some()),
            (EXT_EARLY_DATA, self.early_data.is_some()),
            (EXT_SUPPORTED_VERSIONS, self.supported_versions.is_some()),
            (EXT_COOKIE, self.cookie13.is_some()),
            (EXT_PSK_KEY_EXCHANGE_MODES, self.psk_key_exchange_modes.is_some()),
            (EXT_KEY_SHARE, self.key_share.is_some()),
        ]
        .into_iter()
        .find_map(|(ty, present)| present.then_some(ty))
    }
}

/// The host name of a ClientHello's server_name, or empty (a ServerHello's acknowledgement).
fn parse_server_name(data: &[u8]) -> Result<&[u8], DecodeError> {
    if data.is_empty() {
        return Ok(data);
    }
    let mut d = Reader::new(data);
    let mut list = Reader::new(d.vec16()?);
    d.finish()?;
    let mut host = None;
    while !list.is_empty() {
        let name_type = list.u8()?;
        let name = list.vec16()?;
        if name_type == NAME_TYPE_HOST {
            if host.is_some() {
                return Err(DecodeError::Invalid("two host names"));
            }
            host = Some(name);
        }
    }
    host.ok_or(DecodeError::Invalid("server_name without host_name"))
}

/// Extensions to write in a hello.
#[derive(Clone, Copy, Debug, Default)]
pub struct OutExtensions<'a> {
    pub extended_master_secret: bool,
    pub renegotiation_info: bool,
    /// ClientHello: the host name; ServerHello: `Some(b"")` acknowledges the client's.
    pub server_name: Option<&'a [u8]>,
    /// ClientHello of certificate suites: supported_groups, ec_point_formats, signature_algorithms.
    pub ecc: Option<(&'a [u16], &'a [u16])>,
    /// ServerHello: ec_point_formats (answering the client's).
    pub point_formats: bool,
    /// session_ticket with this content (a ticket or empty).
    pub session_ticket: Option<&'a [u8]>,
    /// connection_id with this CID (may be empty).
    pub connection_id: Option<&'a [u8]>,
    pub rrc: bool,
    pub port_move: bool,
    /// cached_info with this (encoded) body.
    pub cached_info: Option<&'a [u8]>,
    /// Client-certificate caching with this (encoded, possibly empty) body.
    pub client_cert_cache: Option<&'a [u8]>,
    /// ClientHello: supported_versions listing these (RFC 8446 §4.2.1).
    pub supported_versions: Option<&'a [u16]>,
    /// ServerHello and HelloRetryRequest: supported_versions naming this one.
    pub selected_version: Option<u16>,
    /// supported_groups alone, when `ecc` is None (a 1.3 hello needs no point formats).
    pub supported_groups: Option<&'a [u16]>,
    /// signature_algorithms alone, when `ecc` is None (1.3 hellos, CertificateRequest).
    pub signature_algorithms: Option<&'a [u16]>,
    /// ClientHello: key_share with these (group, key_exchange) entries, possibly none.
    pub key_shares: Option<&'a [(u16, &'a [u8])]>,
    /// ServerHello: key_share with this one entry.
    pub server_share: Option<(u16, &'a [u8])>,
    /// HelloRetryRequest: key_share naming the group the client must use.
    pub hrr_group: Option<u16>,
    /// cookie (RFC 8446 §4.2.2) with this content (not empty).
    pub cookie13: Option<&'a [u8]>,
    /// psk_key_exchange_modes with these modes.
    pub psk_key_exchange_modes: Option<&'a [u8]>,
    /// An empty early_data (ClientHello, EncryptedExtensions).
    pub early_data: bool,
    /// compress_certificate listing these (ClientHello, CertificateRequest of TLS 1.3).
    pub compress_certificate: Option<&'a [super::CompressionAlgorithm]>,
    /// ClientHello: pre_shared_key offering these identities, written last.
    pub psk_offer: Option<PskOffer<'a>>,
    /// ServerHello: pre_shared_key selecting this identity, written last.
    pub selected_identity: Option<u16>,
    /// use_srtp with these protection profiles and no MKI (one in a server's answer).
    pub use_srtp: Option<&'a [u16]>,
}

/// The protection profiles of a use_srtp body (RFC 5764 §4.1.1: `SRTPProtectionProfile
/// SRTPProtectionProfiles<2..2^16-1>; opaque srtp_mki<0..255>`); the MKI is ignored, as no
/// SRTP runs here.
pub fn srtp_profiles(data: &[u8]) -> Result<Vec<u16>, DecodeError> {
    let mut r = Reader::new(data);
    let list = r.vec16()?;
    let _mki = r.vec8()?;
    r.finish()?;
    if list.is_empty() || list.len() % 2 != 0 {
        return Err(DecodeError::Invalid("use_srtp profile list"));
    }
    Ok(list.chunks_exact(2).map(|p| u16::from_be_bytes([p[0], p[1]])).collect())
}

/// The PSKs a ClientHello offers (RFC 8446 §4.2.11). Binders cannot be computed before the
/// rest of the hello is written, so zeros of their lengths stand in for them until
/// `patch_binders` writes them.
#[derive(Clone, Copy, Debug, Default)]
pub struct PskOffer<'a> {
    /// (identity, obfuscated_ticket_age) pairs.
    pub identities: &'a [(&'a [u8], u32)],
    /// The length of each identity's binder (its PRF's hash length).
    pub binder_lens: &'a [usize],
}

fn put_u16_list(out: &mut Vec<u8>, list: &[u16]) {
    put_u16(out, (list.len() * 2) as u16);
    for v in list {
        put_u16(out, *v);
    }
}

/// Writes the extensions block, or nothing when it would be empty (a DTLS 1.2 hello without
/// extensions leaves the block out).
fn put_extensions(out: &mut Vec<u8>, e: &OutExtensions<'_>) {
    let block = extension_block(e);
    if !block.is_empty() {
        put_vec16(out, &block);
    }
}

/// Writes the extensions block even when empty, for the messages where it is mandatory
/// (EncryptedExtensions, CertificateRequest of TLS 1.3).
pub(super) fn put_extensions_always(out: &mut Vec<u8>, e: &OutExtensions<'_>) {
    put_vec16(out, &extension_block(e));
}

/// One extension whose body is a list of 16-bit values with a two-byte length.
fn put_u16_list_extension(block: &mut Vec<u8>, ty: u16, list: &[u16]) {
    put_u16(block, ty);
    put_u16(block, (list.len() * 2 + 2) as u16);
    put_u16_list(block, list);
}

/// The extensions without the block's length.
fn extension_block(e: &OutExtensions<'_>) -> Vec<u8> {
    let mut block = Vec::with_capacity(64);
    // The DTLS 1.3 cookie first: a server that reads the first fragment of a ClientHello too
    // large for one datagram (a post-quantum key share) statelessly finds it there.
    if let Some(cookie) = e.cookie13 {
        put_u16(&mut block, EXT_COOKIE);
        put_u16(&mut block, (cookie.len() + 2) as u16);
        put_vec16(&mut block, cookie);
    }
    if let Some(name) = e.server_name {
        put_u16(&mut block, EXT_SERVER_NAME);
        if name.is_empty() {
            put_u16(&mut block, 0);
        } else {
            put_u16(&mut block, (name.len() + 5) as u16);
            put_u16(&mut block, (name.len() + 3) as u16);
            put_u8(&mut block, NAME_TYPE_HOST);
            put_vec16(&mut block, name);
        }
    }
    if let Some((groups, schemes)) = e.ecc {
        put_u16(&mut block, EXT_SUPPORTED_GROUPS);
        put_u16(&mut block, (groups.len() * 2 + 2) as u16);
        put_u16_list(&mut block, groups);
        put_u16(&mut block, EXT_EC_POINT_FORMATS);
        put_vec16(&mut block, &[1, POINT_FORMAT_UNCOMPRESSED]);
        put_u16(&mut block, EXT_SIGNATURE_ALGORITHMS);
        put_u16(&mut block, (schemes.len() * 2 + 2) as u16);
        put_u16_list(&mut block, schemes);
    } else if e.point_formats {
        put_u16(&mut block, EXT_EC_POINT_FORMATS);
        put_vec16(&mut block, &[1, POINT_FORMAT_UNCOMPRESSED]);
    }
    if let Some(ticket) = e.session_ticket {
        put_u16(&mut block, EXT_SESSION_TICKET);
        put_vec16(&mut block, ticket);
    }
    if e.renegotiation_info {
        put_u16(&mut block, EXT_RENEGOTIATION_INFO);
        put_vec16(&mut block, &[0]);
    }
    if e.extended_master_secret {
        put_u16(&mut block, EXT_EXTENDED_MASTER_SECRET);
        put_u16(&mut block, 0);
    }
    if let Some(profiles) = e.use_srtp {
        put_u16(&mut block, EXT_USE_SRTP);
        put_u16(&mut block, (profiles.len() * 2 + 3) as u16);
        put_u16_list(&mut block, profiles);
        put_u8(&mut block, 0);
    }
    if let Some(cid) = e.connection_id {
        put_u16(&mut block, crate::mobility::EXT_CONNECTION_ID);
        put_u16(&mut block, cid.len() as u16 + 1);
        put_vec8(&mut block, cid);
    }
    if e.rrc {
        put_u16(&mut block, crate::mobility::EXT_RRC);
        put_u16(&mut block, 0);
    }
    if e.port_move {
        put_u16(&mut block, crate::mobility::EXT_PORT_MOVE);
        put_u16(&mut block, 0);
    }
    if let Some(body) = e.cached_info {
        put_u16(&mut block, super::EXT_CACHED_INFO);
        put_vec16(&mut block, body);
    }
    if let Some(body) = e.client_cert_cache {
        put_u16(&mut block, super::EXT_CLIENT_CERT_CACHE);
        put_vec16(&mut block, body);
    }
    put_tls13_extensions(&mut block, e);
    block
}

/// The TLS 1.3 extensions (RFC 8446 §4.2), pre_shared_key last as §4.2.11 requires.
fn put_tls13_extensions(block: &mut Vec<u8>, e: &OutExtensions<'_>) {
    if let Some(algorithms) = e.compress_certificate.filter(|a| !a.is_empty()) {
        let mut body = Vec::with_capacity(1 + 2 * algorithms.len());
        super::encode_compress_certificate(&mut body, algorithms);
        put_u16(block, super::EXT_COMPRESS_CERTIFICATE);
        put_vec16(block, &body);
    }
    if let Some(versions) = e.supported_versions {
        put_u16(block, EXT_SUPPORTED_VERSIONS);
        put_u16(block, (versions.len() * 2 + 1) as u16);
        put_u8(block, (versions.len() * 2) as u8);
        for v in versions {
            put_u16(block, *v);
        }
    }
    if let Some(v) = e.selected_version {
        put_u16(block, EXT_SUPPORTED_VERSIONS);
        put_vec16(block, &v.to_be_bytes());
    }
    // With `ecc` these were written above, beside ec_point_formats.
    if e.ecc.is_none() {
        if let Some(groups) = e.supported_groups {
            put_u16_list_extension(block, EXT_SUPPORTED_GROUPS, groups);
        }
        if let Some(schemes) = e.signature_algorithms {
            put_u16_list_extension(block, EXT_SIGNATURE_ALGORITHMS, schemes);
        }
    }
    if let Some(shares) = e.key_shares {
        let list_len: usize = shares.iter().map(|(_, k)| 4 + k.len()).sum();
        put_u16(block, EXT_KEY_SHARE);
        put_u16(block, (list_len + 2) as u16);
        put_u16(block, list_len as u16);
        for (group, key_exchange) in shares {
            put_u16(block, *group);
            put_vec16(block, key_exchange);
        }
    }
    if let Some((group, key_exchange)) = e.server_share {
        put_u16(block, EXT_KEY_SHARE);
        put_u16(block, (key_exchange.len() + 4) as u16);
        put_u16(block, group);
        put_vec16(block, key_exchange);
    }
    if let Some(group) = e.hrr_group {
        put_u16(block, EXT_KEY_SHARE);
        put_vec16(block, &group.to_be_bytes());
    }
    if let Some(modes) = e.psk_key_exchange_modes {
        put_u16(block, EXT_PSK_KEY_EXCHANGE_MODES);
        put_u16(block, (modes.len() + 1) as u16);
        put_vec8(block, modes);
    }
    if e.early_data {
        put_u16(block, EXT_EARLY_DATA);
        put_u16(block, 0);
    }
    if let Some(offer) = e.psk_offer {
        let identities_len: usize = offer.identities.iter().map(|(id, _)| 2 + id.len() + 4).sum();
        let binders_len = super::binders_block_len(offer.binder_lens);
        put_u16(block, EXT_PRE_SHARED_KEY);
        put_u16(block, (2 + identities_len + binders_len) as u16);
        put_u16(block, identities_len as u16);
        for (identity, age) in offer.identities {
            put_vec16(block, identity);
            put_u32(block, *age);
        }
        put_u16(block, (binders_len - 2) as u16);
        for len in offer.binder_lens {
            put_u8(block, *len as u8);
            block.resize(block.len() + len, 0);
        }
    }
    if let Some(index) = e.selected_identity {
        put_u16(block, EXT_PRE_SHARED_KEY);
        put_vec16(block, &index.to_be_bytes());
    }
}

/// The fields both hellos open with: version, random and a session_id of at most 32 bytes.
fn hello_prefix<'a>(r: &mut Reader<'a>) -> Result<(u16, [u8; 32], &'a [u8]), DecodeError> {
    let version = r.u16()?;
    let random = r.array::<32>()?;
    let session_id = r.vec8()?;
    if session_id.len() > 32 {
        return Err(DecodeError::Invalid("session_id too long"));
    }
    Ok((version, random, session_id))
}

/// ClientHello (RFC 6347 §4.2.1), borrowed from the message body.
#[derive(Clone, Debug)]
pub struct ClientHello<'a> {
    pub version: u16,
    pub random: [u8; 32],
    pub session_id: &'a [u8],
    pub cookie: &'a [u8],
    /// Raw `cipher_suites` list (pairs of bytes).
    pub cipher_suites: &'a [u8],
    pub compression_methods: &'a [u8],
    pub extensions: Extensions<'a>,
}

impl<'a> ClientHello<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let (version, random, session_id) = hello_prefix(&mut r)?;
        let cookie = r.vec8()?;
        let cipher_suites = r.vec16()?;
        if cipher_suites.is_empty() || cipher_suites.len() % 2 != 0 {
            return Err(DecodeError::Invalid("cipher_suites"));
        }
        let compression_methods = r.vec8()?;
        if compression_methods.is_empty() {
            return Err(DecodeError::Invalid("compression_methods"));
        }
        let extensions = Extensions::parse(&mut r)?;
        r.finish()?;
        Ok(ClientHello {
            version,
            random,
            session_id,
            cookie,
            cipher_suites,
            compression_methods,
            extensions,
        })
    }

    pub fn suites(&self) -> impl Iterator<Item = u16> + '_ {
        self.cipher_suites.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]))
    }

    /// The cookie MAC covers the client's address and the fields RFC 6347 §4.2.1 names:
    /// version, random, session_id, cipher_suites and compression_methods.
    pub fn cookie_inputs<'b>(&'b self, version_bytes: &'b [u8; 2], addr: &'b [u8]) -> [&'b [u8]; 6] {
        [addr, version_bytes, &self.random, self.session_id, self.cipher_suites, self.compression_methods]
    }

    #[cfg(test)]
    pub fn encode(
        out: &mut Vec<u8>,
        random: &[u8; 32],
        cookie: &[u8],
        suites: &[u16],
        extended_master_secret: bool,
    ) {
        let ext = OutExtensions { extended_master_secret, ..Default::default() };
        Self::encode_with(out, random, &[], cookie, suites, &ext)
    }

    pub fn encode_with(
        out: &mut Vec<u8>,
        random: &[u8; 32],
        session_id: &[u8],
        cookie: &[u8],
        suites: &[u16],
        ext: &OutExtensions<'_>,
    ) {
        put_u16(out, crate::record::DTLS_1_2);
        out.extend_from_slice(random);
        put_vec8(out, session_id);
        put_vec8(out, cookie);
        put_u16(out, (suites.len() as u16 + 1) * 2);
        for s in suites {
            put_u16(out, *s);
        }
        // The SCSV stands in for an empty renegotiation_info extension at two bytes less.
        put_u16(out, SCSV_EMPTY_RENEGOTIATION_INFO);
        put_vec8(out, &[0]);
        put_extensions(out, ext);
    }
}

/// HelloVerifyRequest (RFC 6347 §4.2.1).
pub struct HelloVerifyRequest<'a> {
    pub cookie: &'a [u8],
}

impl<'a> HelloVerifyRequest<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        // server_version: DTLS 1.0 or 1.2 (RFC 6347 §4.2.1), whatever is negotiated; not checked.
        r.u16()?;
        let cookie = r.vec8()?;
        r.finish()?;
        Ok(HelloVerifyRequest { cookie })
    }

    pub fn encode(out: &mut Vec<u8>, cookie: &[u8]) {
        // RFC 6347 §4.2.1: DTLS 1.2 servers SHOULD put DTLS 1.0 here whatever they will negotiate.
        put_u16(out, crate::record::DTLS_1_0);
        put_vec8(out, cookie);
    }
}

/// ServerHello.
pub struct ServerHello<'a> {
    pub version: u16,
    pub random: [u8; 32],
    pub session_id: &'a [u8],
    pub cipher_suite: u16,
    pub compression_method: u8,
    pub extensions: Extensions<'a>,
}

impl<'a> ServerHello<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let (version, random, session_id) = hello_prefix(&mut r)?;
        let cipher_suite = r.u16()?;
        let compression_method = r.u8()?;
        let extensions = Extensions::parse(&mut r)?;
        r.finish()?;
        Ok(ServerHello { version, random, session_id, cipher_suite, compression_method, extensions })
    }

    #[cfg(test)]
    pub fn encode(
        out: &mut Vec<u8>,
        random: &[u8; 32],
        suite: u16,
        extended_master_secret: bool,
        renegotiation_info: bool,
    ) {
        let ext = OutExtensions { extended_master_secret, renegotiation_info, ..Default::default() };
        Self::encode_with(out, random, &[], suite, &ext)
    }

    pub fn encode_with(
        out: &mut Vec<u8>,
        random: &[u8; 32],
        session_id: &[u8],
        suite: u16,
        ext: &OutExtensions<'_>,
    ) {
        put_u16(out, crate::record::DTLS_1_2);
        out.extend_from_slice(random);
        put_vec8(out, session_id);
        put_u16(out, suite);
        put_u8(out, 0);
        put_extensions(out, ext);
    }
}

/// A body that is one opaque vector with a two-byte length: ServerKeyExchange
/// (`psk_identity_hint`) and ClientKeyExchange (`psk_identity`) of RFC 4279 §2.
pub fn parse_psk_identity(body: &[u8]) -> Result<&[u8], DecodeError> {
    let mut r = Reader::new(body);
    let v = r.vec16()?;
    r.finish()?;
    Ok(v)
}

pub fn encode_psk_identity(out: &mut Vec<u8>, identity: &[u8]) {
    put_vec16(out, identity);
}

/// Finished: 12 bytes of verify_data.
pub fn parse_finished(body: &[u8]) -> Result<[u8; 12], DecodeError> {
    let mut r = Reader::new(body);
    let v = r.array::<12>()?;
    r.finish()?;
    Ok(v)
}

/// The PSK premaster secret (RFC 4279 §2): N zero bytes as other_secret, then the key.
pub fn psk_premaster(key: &[u8]) -> zeroize::Zeroizing<Vec<u8>> {
    let mut out = zeroize::Zeroizing::new(Vec::with_capacity(4 + 2 * key.len()));
    put_u16(&mut out, key.len() as u16);
    out.resize(2 + key.len(), 0);
    put_vec16(&mut out, key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_hello_round_trip() {
        let mut b = Vec::new();
        ClientHello::encode(&mut b, &[7; 32], &[1, 2, 3], &[0xC0A8, 0x00A8], true);
        let ch = ClientHello::parse(&b).unwrap();
        assert_eq!(ch.version, 0xfefd);
        assert_eq!(ch.cookie, &[1, 2, 3]);
        assert_eq!(ch.suites().collect::<Vec<_>>(), [0xC0A8, 0x00A8, 0x00ff]);
        assert!(ch.extensions.extended_master_secret);
        for cut in 0..b.len() {
            // Without its extensions block (6 bytes) a ClientHello is still well formed.
            if cut != b.len() - 6 {
                assert!(ClientHello::parse(&b[..cut]).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn server_hello_round_trip_and_unknown_extensions_skipped() {
        let mut b = Vec::new();
        ServerHello::encode(&mut b, &[1; 32], 0xC0A8, true, true);
        let sh = ServerHello::parse(&b).unwrap();
        assert_eq!(sh.cipher_suite, 0xC0A8);
        assert!(sh.extensions.extended_master_secret);
        assert_eq!(sh.extensions.renegotiation_info, Some(&[][..]));
        // Append an unknown extension.
        let mut r = Reader::new(&[0x12, 0x34, 0x00, 0x01, 0xaa]);
        let mut block = vec![0, 5];
        block.extend_from_slice(r.rest());
        let e = Extensions::parse(&mut Reader::new(&block)).unwrap();
        assert_eq!(e.unknown, Some(0x1234));
        let dup = [0, 8, 0, 0x17, 0, 0, 0, 0x17, 0, 0];
        assert!(Extensions::parse(&mut Reader::new(&dup)).is_err());
        // Past the types kept on the stack, a duplicate is still refused.
        let many: Vec<u8> = (0..200u16).flat_map(|t| [(0x3000 + t).to_be_bytes(), [0, 0]].concat()).collect();
        for last in [0x3000u16 + 199, 0x3000 + 3, 0x3000 + 100] {
            let mut block = many.clone();
            block.extend_from_slice(&[(last >> 8) as u8, last as u8, 0, 0]);
            let block = [(block.len() as u16).to_be_bytes().to_vec(), block].concat();
            assert!(Extensions::parse(&mut Reader::new(&block)).is_err(), "{last:#x} twice");
        }
        let block = [(many.len() as u16).to_be_bytes().to_vec(), many].concat();
        assert_eq!(Extensions::parse(&mut Reader::new(&block)).unwrap().unknown, Some(0x3000));
    }

    #[test]
    fn certificate_extensions_round_trip() {
        let mut b = Vec::new();
        let ext = OutExtensions {
            extended_master_secret: true,
            server_name: Some(b"localhost"),
            ecc: Some((&[29, 23], &[0x0403, 0x0804])),
            session_ticket: Some(&[1, 2, 3]),
            ..Default::default()
        };
        ClientHello::encode_with(&mut b, &[7; 32], &[4; 32], &[], &[0xC0AE], &ext);
        let ch = ClientHello::parse(&b).unwrap();
        assert_eq!(ch.session_id, &[4; 32]);
        let e = &ch.extensions;
        assert_eq!(e.server_name, Some(&b"localhost"[..]));
        assert_eq!(e.supported_groups, Some(&[0, 29, 0, 23][..]));
        assert_eq!(e.ec_point_formats, Some(true));
        assert_eq!(e.signature_algorithms, Some(&[4, 3, 8, 4][..]));
        assert_eq!(e.session_ticket, Some(&[1, 2, 3][..]));
        assert!(e.extended_master_secret && e.unknown.is_none());
        for cut in 0..b.len() {
            let _ = ClientHello::parse(&b[..cut]);
        }
    }

    #[test]
    fn psk_premaster_layout() {
        assert_eq!(&psk_premaster(&[0xaa, 0xbb])[..], &[0, 2, 0, 0, 0, 2, 0xaa, 0xbb]);
    }
}
