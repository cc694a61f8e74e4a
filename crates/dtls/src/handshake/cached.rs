//! Wire forms of handshake caching: RFC 7924's `cached_info` extension and the fingerprint that
//! replaces a cached message, and seed 003's client-certificate caching extension (BiTHaC).
//!
//! # What a fingerprint hashes
//!
//! RFC 7924 §5 hashes "the Certificate message" (or CertificateRequest) with SHA-256 and excludes
//! the record layer, but leaves open whether the handshake header is part of the input. In DTLS
//! that header (RFC 6347 §4.2.2) carries message_seq and the fragment fields, which change from
//! one handshake to the next, so a fingerprint over it could never match twice. We hash the
//! message **body** only: the `Certificate` structure of RFC 5246 §7.4.2 (the 3-byte length of
//! `certificate_list`, then each 3-byte length and DER certificate) or the `CertificateRequest`
//! structure of §7.4.4, exactly as the server sent it; no TLS 4-byte or DTLS 12-byte header.
//!
//! # Transcript
//!
//! The Finished hashes and the CertificateVerify signature cover the messages as they were on
//! the wire (RFC 7924 §4: a replaced message is the fingerprint message), never the cached
//! originals. The server's ServerKeyExchange signature still binds its key to the handshake,
//! and the client still validates the cached chain before it trusts that key.
//!
//! # Client-certificate caching (private-use extension 0xFFA0)
//!
//! ClientHello: empty (support, nothing cached) or `opaque ticket<1..255>`. ServerHello: empty
//! (supported, nothing selected) or one byte `1` (the ticket's chain is selected). With a
//! selection the client's Certificate message has an empty body (zero bytes, not an empty
//! `certificate_list`); its CertificateVerify proves possession of the cached chain's key.

use fastshake_core::codec::{put_u16, put_u8, put_vec8, DecodeError, Reader};

/// RFC 7924 `cached_info`.
pub const EXT_CACHED_INFO: u16 = 25;
/// Client-certificate caching (seed 003 §IV-B), in the private-use range.
pub const EXT_CLIENT_CERT_CACHE: u16 = 0xFFA0;
/// SHA-256, the only fingerprint RFC 7924 §5 defines.
pub const FINGERPRINT_LEN: usize = 32;
/// The one selection value of the client-certificate extension in a ServerHello.
const CLIENT_CERT_SELECTED: u8 = 1;
/// Objects offered in one ClientHello at most (a client caches one of each type per server;
/// the limit only bounds a hostile peer's list).
const MAX_OFFERED: usize = 16;

/// RFC 7924 §3 CachedInformationType.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachedObjectType {
    Certificate = 1,
    CertificateRequest = 2,
}

impl CachedObjectType {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(CachedObjectType::Certificate),
            2 => Some(CachedObjectType::CertificateRequest),
            _ => None,
        }
    }
}

/// SHA-256 over a message body (see the module documentation for why the body only).
pub fn fingerprint(body: &[u8]) -> [u8; FINGERPRINT_LEN] {
    let mut out = [0u8; FINGERPRINT_LEN];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, body).as_ref());
    out
}

/// Constant-time comparison of two fingerprints.
pub fn fingerprints_equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

/// The ClientHello's `cached_info` body: `CachedObject cached_info<1..2^16-1>`.
pub fn encode_cached_info_offer(out: &mut Vec<u8>, objects: &[(CachedObjectType, &[u8])]) {
    let mut list = Vec::with_capacity(objects.len() * (2 + FINGERPRINT_LEN));
    for (ty, hash) in objects {
        put_u8(&mut list, *ty as u8);
        put_vec8(&mut list, hash);
    }
    put_u16(out, list.len() as u16);
    out.extend_from_slice(&list);
}

/// Reads a ClientHello's `cached_info`: the offered objects. Types we do not know are skipped
/// (RFC 7924 §3 lets the registry grow); hash values must be 1 to 255 bytes.
pub fn parse_cached_info_offer(data: &[u8]) -> Result<Vec<(u8, &[u8])>, DecodeError> {
    let mut r = Reader::new(data);
    let mut list = Reader::new(r.vec16()?);
    r.finish()?;
    if list.is_empty() {
        return Err(DecodeError::Invalid("empty cached_info"));
    }
    let mut objects = Vec::new();
    while !list.is_empty() {
        let ty = list.u8()?;
        let hash = list.vec8()?;
        if hash.is_empty() {
            return Err(DecodeError::Invalid("empty hash_value"));
        }
        if objects.len() == MAX_OFFERED {
            return Err(DecodeError::Invalid("too many cached objects"));
        }
        objects.push((ty, hash));
    }
    Ok(objects)
}

/// The ServerHello's `cached_info` body: the selected types (RFC 7924 §3, `case server`).
pub fn encode_cached_info_selection(out: &mut Vec<u8>, types: &[CachedObjectType]) {
    put_u16(out, types.len() as u16);
    for ty in types {
        put_u8(out, *ty as u8);
    }
}

/// Reads a ServerHello's `cached_info`: the selected types, each once. A type we never defined
/// is `None` in the list, for the caller to refuse as never offered.
pub fn parse_cached_info_selection(data: &[u8]) -> Result<Vec<Option<CachedObjectType>>, DecodeError> {
    let mut r = Reader::new(data);
    let list = r.vec16()?;
    r.finish()?;
    if list.is_empty() {
        return Err(DecodeError::Invalid("empty cached_info"));
    }
    let mut types: Vec<Option<CachedObjectType>> = Vec::with_capacity(list.len());
    for &b in list {
        let ty = CachedObjectType::from_u8(b);
        if ty.is_some() && types.contains(&ty) {
            return Err(DecodeError::Invalid("type selected twice"));
        }
        types.push(ty);
    }
    Ok(types)
}

/// The message that replaces a cached one (RFC 7924 §4.1, §4.2): `opaque hash_value<1..255>`.
pub fn encode_fingerprint_message(out: &mut Vec<u8>, hash: &[u8]) {
    put_vec8(out, hash);
}

pub fn parse_fingerprint_message(body: &[u8]) -> Result<&[u8], DecodeError> {
    let mut r = Reader::new(body);
    let hash = r.vec8()?;
    r.finish()?;
    if hash.is_empty() {
        return Err(DecodeError::Invalid("empty hash_value"));
    }
    Ok(hash)
}

/// The ClientHello's client-certificate caching body: empty, or one ticket.
pub fn encode_client_cert_offer(out: &mut Vec<u8>, ticket: Option<&[u8]>) {
    if let Some(ticket) = ticket {
        put_vec8(out, ticket);
    }
}

/// Reads it: `None` for the empty (support only) form.
pub fn parse_client_cert_offer(data: &[u8]) -> Result<Option<&[u8]>, DecodeError> {
    if data.is_empty() {
        return Ok(None);
    }
    let mut r = Reader::new(data);
    let ticket = r.vec8()?;
    r.finish()?;
    if ticket.is_empty() {
        return Err(DecodeError::Invalid("empty ticket"));
    }
    Ok(Some(ticket))
}

/// The ServerHello's body: empty, or the selection.
pub fn encode_client_cert_answer(out: &mut Vec<u8>, selected: bool) {
    if selected {
        put_u8(out, CLIENT_CERT_SELECTED);
    }
}

/// Reads it: whether the offered ticket was selected.
pub fn parse_client_cert_answer(data: &[u8]) -> Result<bool, DecodeError> {
    match data {
        [] => Ok(false),
        [CLIENT_CERT_SELECTED] => Ok(true),
        _ => Err(DecodeError::Invalid("client-certificate caching answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offer_and_selection_round_trip_and_truncation() {
        let a = [1u8; 32];
        let b = [2u8; 32];
        let mut offer = Vec::new();
        encode_cached_info_offer(
            &mut offer,
            &[(CachedObjectType::Certificate, &a), (CachedObjectType::CertificateRequest, &b)],
        );
        assert_eq!(offer.len(), 2 + 2 * 34);
        let parsed = parse_cached_info_offer(&offer).unwrap();
        assert_eq!(parsed, vec![(1, &a[..]), (2, &b[..])]);
        for cut in 0..offer.len() {
            assert!(parse_cached_info_offer(&offer[..cut]).is_err(), "cut at {cut}");
        }
        let mut sel = Vec::new();
        encode_cached_info_selection(&mut sel, &[CachedObjectType::Certificate]);
        assert_eq!(parse_cached_info_selection(&sel).unwrap(), vec![Some(CachedObjectType::Certificate)]);
        assert!(parse_cached_info_selection(&[0, 2, 1, 1]).is_err(), "duplicate");
        assert_eq!(parse_cached_info_selection(&[0, 1, 9]).unwrap(), vec![None]);
        assert!(parse_cached_info_selection(&[0, 0]).is_err());
    }

    #[test]
    fn fingerprint_message_and_ticket_forms() {
        let mut m = Vec::new();
        encode_fingerprint_message(&mut m, &[7; 32]);
        assert_eq!(m.len(), 33);
        assert_eq!(parse_fingerprint_message(&m).unwrap(), &[7; 32]);
        assert!(parse_fingerprint_message(&[0]).is_err());
        assert!(parse_fingerprint_message(&m[..20]).is_err());
        let mut t = Vec::new();
        encode_client_cert_offer(&mut t, Some(&[5; 8]));
        assert_eq!(parse_client_cert_offer(&t).unwrap(), Some(&[5u8; 8][..]));
        assert_eq!(parse_client_cert_offer(&[]).unwrap(), None);
        assert!(parse_client_cert_offer(&[0]).is_err());
        assert!(parse_client_cert_answer(&[]).is_ok_and(|s| !s));
        assert!(parse_client_cert_answer(&[1]).unwrap());
        assert!(parse_client_cert_answer(&[2]).is_err());
        assert!(fingerprints_equal(&[1; 32], &[1; 32]) && !fingerprints_equal(&[1; 32], &[1; 31]));
    }
}
