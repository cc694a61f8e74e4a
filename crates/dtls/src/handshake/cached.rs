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
//!
//! # DTLS 1.3 (seed 003 §IV-D)
//!
//! RFC 7924 does not carry over unchanged: a 1.3 Certificate has a request context and
//! per-certificate extensions (OCSP status, SCTs) that may change from one handshake to the
//! next, so a fingerprint of the message as sent could stop matching with nothing changed in
//! the chain. What is hashed and cached in 1.3:
//!
//! - **The server's Certificate** is reduced, once its chain is validated, to its static part:
//!   the 1.2 `Certificate` body above built from the `cert_data` fields in order (no context,
//!   no extensions). Its SHA-256 is the fingerprint, so the same value names the same chain in
//!   both versions and one cache entry serves both.
//! - **The CertificateRequest is not cached in 1.3.** Its context belongs to one request, and
//!   what remains (its extensions) is about as long as the 33-byte fingerprint message that
//!   would replace it. A 1.3 server never selects it; selecting it is illegal_parameter.
//! - **The client's chain** is cached by the server under a ticket, as in 1.2.
//!
//! The signalling moves out of the ServerHello into EncryptedExtensions: `cached_info` with the
//! selection and the client-certificate answer, both encrypted, so an observer cannot tell
//! whether a cache was used. A ClientHello carries the same two extensions in both versions.
//!
//! **Abbreviated Certificate.** In place of a cached chain a 1.3 Certificate carries the
//! request context, then one `CertificateEntry` per cached certificate whose `cert_data` has
//! zero length (below RFC 8446's `<1..2^24-1>`, which is why it is sent only when negotiated),
//! each followed by its non-static extensions as they would otherwise be sent. The count must
//! match the cached chain. The transcript, CertificateVerify and Finished cover the abbreviated
//! message as sent; the fingerprint or ticket in the ClientHello, which they also cover, binds
//! the chain, and the cached chain is validated again before its key is trusted.
//!
//! **The 1.3 client-certificate ticket** is HKDF-Expand-Label(resumption_master_secret,
//! "cc ticket", "", 8) (RFC 8446 §7.1): fresh for every handshake, known to the two ends only,
//! and sent once, in clear, in the next ClientHello. The chain it names went encrypted, so the
//! ticket links nothing an observer saw.

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

/// A 1.3 Certificate body reduced to its static part (see the module documentation): the 1.2
/// `Certificate` body of the same `cert_data` fields, which is what a 1.3 fingerprint hashes.
pub fn static_certificate(chain: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + chain.iter().map(|c| 3 + c.len()).sum::<usize>());
    super::encode_certificate(&mut out, chain);
    out
}

/// An abbreviated 1.3 Certificate for a cached chain of `count` certificates: the context, then
/// each entry with zero-length `cert_data` and no extensions (we send none).
pub fn encode_abbreviated_certificate13(out: &mut Vec<u8>, context: &[u8], count: usize) {
    put_vec8(out, context);
    let list = count * (3 + 2);
    out.extend_from_slice(&(list as u32).to_be_bytes()[1..]);
    for _ in 0..count {
        out.extend_from_slice(&[0, 0, 0]);
        put_u16(out, 0);
    }
}

/// Reads an abbreviated 1.3 Certificate: its context and how many entries stand for cached
/// certificates. Every `cert_data` must be empty and there must be at least one; entry
/// extensions are checked for form. A full Certificate is not abbreviated (an error here).
pub fn parse_abbreviated_certificate13(body: &[u8]) -> Result<(&[u8], usize), DecodeError> {
    let mut r = Reader::new(body);
    let context = r.vec8()?;
    let list_len = r.u24()?;
    let mut list = Reader::new(r.take(list_len as usize)?);
    r.finish()?;
    let mut count = 0;
    while !list.is_empty() {
        if list.u24()? != 0 {
            return Err(DecodeError::Invalid("certificate in an abbreviated Certificate"));
        }
        let mut ext = Reader::new(list.vec16()?);
        while !ext.is_empty() {
            ext.u16()?;
            ext.vec16()?;
        }
        if count == super::MAX_CHAIN_CERTS {
            return Err(DecodeError::Invalid("certificate chain too long"));
        }
        count += 1;
    }
    if count == 0 {
        return Err(DecodeError::Invalid("empty abbreviated Certificate"));
    }
    Ok((context, count))
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

    #[test]
    fn abbreviated_certificate13_round_trips_and_refuses_certificates() {
        let mut m = Vec::new();
        encode_abbreviated_certificate13(&mut m, &[9], 3);
        assert_eq!(m.len(), 2 + 3 + 3 * 5, "context, list length, three empty entries");
        assert_eq!(parse_abbreviated_certificate13(&m).unwrap(), (&[9u8][..], 3));
        for cut in 0..m.len() {
            assert!(parse_abbreviated_certificate13(&m[..cut]).is_err(), "cut at {cut}");
        }
        let mut none = Vec::new();
        encode_abbreviated_certificate13(&mut none, &[], 0);
        assert!(parse_abbreviated_certificate13(&none).is_err(), "no entry");
        let der: &[u8] = &[0x30, 0x03, 1, 2, 3];
        let mut full = Vec::new();
        crate::handshake::encode_certificate13(&mut full, &[], &[der]);
        assert!(parse_abbreviated_certificate13(&full).is_err(), "a full Certificate is not abbreviated");
        // Entry extensions (say a status_request answer) are carried and skipped.
        let with_ext = [0u8, 0, 0, 11, 0, 0, 0, 0, 6, 0, 5, 0, 2, 1, 0];
        assert_eq!(parse_abbreviated_certificate13(&with_ext).unwrap(), (&[][..], 1));
        assert_eq!(static_certificate(&[der]), [0, 0, 8, 0, 0, 5, 0x30, 0x03, 1, 2, 3]);
    }
}
