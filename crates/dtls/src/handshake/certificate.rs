//! Bodies of the certificate-suite messages: Certificate, ServerKeyExchange and
//! ClientKeyExchange for ECDHE (RFC 8422 §5.4, §5.7), CertificateRequest and CertificateVerify
//! (RFC 5246 §7.4.4, §7.4.8), NewSessionTicket (RFC 5077 §3.3).

use fastshake_core::codec::{put_u16, put_u8, put_vec16, put_vec8, DecodeError, Reader};

/// Named groups (RFC 8422 §5.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedGroup {
    /// secp256r1 (23), ECDH on the NIST P-256 curve.
    Secp256r1,
    /// x25519 (29), ECDH on Curve25519 (RFC 7748).
    X25519,
    /// X25519MLKEM768 (0x11EC, draft-ietf-tls-ecdhe-mlkem): ML-KEM-768 (FIPS 203) and x25519
    /// together, post-quantum as long as either holds. DTLS 1.3 only.
    X25519MlKem768,
}

impl NamedGroup {
    /// The elliptic-curve groups, in our order of preference: what a client offers by default
    /// (one key share of 32 bytes rather than 1,216) and all DTLS 1.2 knows.
    pub const ALL: [NamedGroup; 2] = [NamedGroup::X25519, NamedGroup::Secp256r1];

    /// Every group, the post-quantum hybrid first: what a DTLS 1.3 server accepts by default.
    pub const WITH_HYBRID: [NamedGroup; 3] =
        [NamedGroup::X25519MlKem768, NamedGroup::X25519, NamedGroup::Secp256r1];

    /// Whether it is the post-quantum hybrid (DTLS 1.3 only).
    pub fn is_hybrid(self) -> bool {
        self == NamedGroup::X25519MlKem768
    }

    /// The TLS code point.
    pub fn code(self) -> u16 {
        match self {
            NamedGroup::Secp256r1 => 23,
            NamedGroup::X25519 => 29,
            NamedGroup::X25519MlKem768 => 0x11EC,
        }
    }

    /// The group for a code point, if it is one we implement.
    pub fn from_code(code: u16) -> Option<Self> {
        match code {
            23 => Some(NamedGroup::Secp256r1),
            29 => Some(NamedGroup::X25519),
            0x11EC => Some(NamedGroup::X25519MlKem768),
            _ => None,
        }
    }

    /// The IANA name.
    pub fn name(self) -> &'static str {
        match self {
            NamedGroup::Secp256r1 => "secp256r1",
            NamedGroup::X25519 => "x25519",
            NamedGroup::X25519MlKem768 => "x25519mlkem768",
        }
    }

    /// Length of a public key on the wire (uncompressed point for P-256; for the hybrid the
    /// client's share: ML-KEM-768's encapsulation key and an x25519 key).
    pub fn public_len(self) -> usize {
        match self {
            NamedGroup::Secp256r1 => 65,
            NamedGroup::X25519 => 32,
            NamedGroup::X25519MlKem768 => MLKEM768_ENCAPSULATION_KEY_LEN + 32,
        }
    }
}

/// Bytes of an ML-KEM-768 encapsulation key and ciphertext (FIPS 203 §8, Table 3).
pub const MLKEM768_ENCAPSULATION_KEY_LEN: usize = 1184;
pub const MLKEM768_CIPHERTEXT_LEN: usize = 1088;

/// `named_curve` in ECParameters.curve_type (RFC 8422 §5.4).
const CURVE_TYPE_NAMED: u8 = 3;
/// Largest certificate chain accepted, in certificates.
pub const MAX_CHAIN_CERTS: usize = 16;

/// Certificate: a chain of DER certificates, leaf first.
pub fn encode_certificate(out: &mut Vec<u8>, chain: &[&[u8]]) {
    let total: usize = chain.iter().map(|c| 3 + c.len()).sum();
    put_u24_len(out, total);
    for cert in chain {
        put_u24_len(out, cert.len());
        out.extend_from_slice(cert);
    }
}

fn put_u24_len(out: &mut Vec<u8>, len: usize) {
    let len = len as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
}

fn vec24<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let len = r.u24()?;
    r.take(len as usize)
}

/// Parses Certificate into the DER certificates it holds (possibly none).
pub fn parse_certificate(body: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    let mut r = Reader::new(body);
    let mut list = Reader::new(vec24(&mut r)?);
    r.finish()?;
    let mut certs = Vec::new();
    while !list.is_empty() {
        let cert = vec24(&mut list)?;
        if cert.is_empty() {
            return Err(DecodeError::Invalid("empty certificate"));
        }
        if certs.len() == MAX_CHAIN_CERTS {
            return Err(DecodeError::Invalid("certificate chain too long"));
        }
        certs.push(cert);
    }
    Ok(certs)
}

/// The ECDHE parameters of ServerKeyExchange: what the signature covers after the randoms.
pub fn encode_ecdhe_params(out: &mut Vec<u8>, group: NamedGroup, public: &[u8]) {
    put_u8(out, CURVE_TYPE_NAMED);
    put_u16(out, group.code());
    put_vec8(out, public);
}

/// ServerKeyExchange of an ECDHE suite.
pub struct EcdheServerKeyExchange<'a> {
    /// The group code as sent (may be one we do not know: the caller refuses it).
    pub group: u16,
    pub public: &'a [u8],
    /// The bytes the signature covers after client_random and server_random.
    pub params: &'a [u8],
    pub scheme: u16,
    pub signature: &'a [u8],
}

impl<'a> EcdheServerKeyExchange<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        if r.u8()? != CURVE_TYPE_NAMED {
            return Err(DecodeError::Invalid("curve type"));
        }
        let group = r.u16()?;
        let public = r.vec8()?;
        let params_len = body.len() - r.remaining();
        let params = body.get(..params_len).ok_or(DecodeError::Invalid("params"))?;
        let scheme = r.u16()?;
        let signature = r.vec16()?;
        r.finish()?;
        Ok(EcdheServerKeyExchange { group, public, params, scheme, signature })
    }
}

/// ClientKeyExchange of an ECDHE suite: the client's public key.
pub fn parse_ecdhe_client_key_exchange(body: &[u8]) -> Result<&[u8], DecodeError> {
    let mut r = Reader::new(body);
    let public = r.vec8()?;
    r.finish()?;
    Ok(public)
}

/// `digitally-signed` (RFC 5246 §4.7): scheme then signature.
pub fn encode_signed(out: &mut Vec<u8>, scheme: u16, signature: &[u8]) {
    put_u16(out, scheme);
    put_vec16(out, signature);
}

/// CertificateVerify: the scheme and signature.
pub fn parse_certificate_verify(body: &[u8]) -> Result<(u16, &[u8]), DecodeError> {
    let mut r = Reader::new(body);
    let scheme = r.u16()?;
    let signature = r.vec16()?;
    r.finish()?;
    Ok((scheme, signature))
}

/// ClientCertificateType values (RFC 5246 §7.4.4, RFC 8422 §5.5).
pub const CERT_TYPE_RSA_SIGN: u8 = 1;
pub const CERT_TYPE_ECDSA_SIGN: u8 = 64;

/// CertificateRequest.
pub struct CertificateRequest {
    pub certificate_types: Vec<u8>,
    pub schemes: Vec<u16>,
}

impl CertificateRequest {
    pub fn encode<'n>(out: &mut Vec<u8>, schemes: &[u16], authorities: impl Iterator<Item = &'n [u8]>) {
        put_vec8(out, &[CERT_TYPE_ECDSA_SIGN, CERT_TYPE_RSA_SIGN]);
        let mut list = Vec::with_capacity(2 * schemes.len());
        for s in schemes {
            put_u16(&mut list, *s);
        }
        put_vec16(out, &list);
        let mut names = Vec::new();
        for name in authorities {
            // A name too long for the wire is left out rather than truncated.
            if name.len() <= u16::MAX as usize && names.len() + 2 + name.len() <= u16::MAX as usize {
                put_vec16(&mut names, name);
            }
        }
        put_vec16(out, &names);
    }

    pub fn parse(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let certificate_types = r.vec8()?.to_vec();
        let list = r.vec16()?;
        if list.len() % 2 != 0 {
            return Err(DecodeError::Invalid("supported_signature_algorithms"));
        }
        let schemes = list.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
        let mut names = Reader::new(r.vec16()?);
        while !names.is_empty() {
            names.vec16()?;
        }
        r.finish()?;
        Ok(CertificateRequest { certificate_types, schemes })
    }
}

/// NewSessionTicket (RFC 5077 §3.3).
pub fn encode_new_session_ticket(out: &mut Vec<u8>, lifetime_hint: u32, ticket: &[u8]) {
    out.extend_from_slice(&lifetime_hint.to_be_bytes());
    put_vec16(out, ticket);
}

pub fn parse_new_session_ticket(body: &[u8]) -> Result<(u32, &[u8]), DecodeError> {
    let mut r = Reader::new(body);
    let hint = u32::from_be_bytes(r.array::<4>()?);
    let ticket = r.vec16()?;
    r.finish()?;
    Ok((hint, ticket))
}

/// Pairs of bytes as u16 code points.
pub fn u16_list(raw: &[u8]) -> impl Iterator<Item = u16> + '_ {
    raw.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_round_trip_and_truncation() {
        let mut b = Vec::new();
        encode_certificate(&mut b, &[b"leaf", b"intermediate"]);
        assert_eq!(parse_certificate(&b).unwrap(), vec![&b"leaf"[..], &b"intermediate"[..]]);
        for cut in 0..b.len() {
            assert!(parse_certificate(&b[..cut]).is_err());
        }
        let mut empty = Vec::new();
        encode_certificate(&mut empty, &[]);
        assert!(parse_certificate(&empty).unwrap().is_empty());
    }

    #[test]
    fn server_key_exchange_round_trip() {
        let mut b = Vec::new();
        encode_ecdhe_params(&mut b, NamedGroup::X25519, &[5; 32]);
        let params_len = b.len();
        encode_signed(&mut b, 0x0403, &[9; 70]);
        let ske = EcdheServerKeyExchange::parse(&b).unwrap();
        assert_eq!((ske.group, ske.public, ske.scheme), (29, &[5u8; 32][..], 0x0403));
        assert_eq!(ske.params.len(), params_len);
        assert_eq!(ske.signature.len(), 70);
        for cut in 0..b.len() {
            assert!(EcdheServerKeyExchange::parse(&b[..cut]).is_err());
        }
    }

    #[test]
    fn certificate_request_round_trip() {
        let mut b = Vec::new();
        CertificateRequest::encode(&mut b, &[0x0403, 0x0401], [&b"dn"[..]].into_iter());
        let cr = CertificateRequest::parse(&b).unwrap();
        assert_eq!(cr.schemes, [0x0403, 0x0401]);
        assert_eq!(cr.certificate_types, [CERT_TYPE_ECDSA_SIGN, CERT_TYPE_RSA_SIGN]);
        for cut in 0..b.len() {
            assert!(CertificateRequest::parse(&b[..cut]).is_err());
        }
    }
}
