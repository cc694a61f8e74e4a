//! A borrowed, allocation-free view of a packet that holds one INIT chunk: the stateless
//! answers to an INIT flood (ABORT, ERROR with an ALT-COOKIE) are decided from it without
//! building the owned [`super::Packet`].

use super::param::{read_tlv, UnknownParamAction, PARAM_ALT_COOKIE};
use super::{
    checksum_ok, padded, peek_header, CommonHeader, FieldExt, ParseError, CHUNK_INIT, COMMON_HEADER_LEN,
};
use crate::packet::{
    PARAM_ALT_DATA, PARAM_ALT_SACK, PARAM_COOKIE_PRESERVATIVE, PARAM_IPV4, PARAM_IPV6, PARAM_STATE_COOKIE,
    PARAM_SUPPORTED_ADDRESS_TYPES, PARAM_SUPPORTED_EXTENSIONS, PARAM_UNRECOGNIZED,
};
use fastshake_core::codec::Reader;

/// The fixed fields of an INIT and its raw parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitView<'a> {
    /// The common header.
    pub header: CommonHeader,
    /// Initiate tag.
    pub initiate_tag: u32,
    /// Advertised receiver window credit.
    pub a_rwnd: u32,
    /// Outbound streams.
    pub outbound_streams: u16,
    /// Inbound streams.
    pub inbound_streams: u16,
    /// Initial TSN.
    pub initial_tsn: u32,
    params: &'a [u8],
}

impl<'a> InitView<'a> {
    /// `Ok(Some(view))` if `buf` is a packet (checksum verified) whose first chunk is an INIT
    /// with well-formed parameters; `Ok(None)` if the first chunk is something else.
    /// `alone` tells whether the INIT is the only chunk, as RFC 9260 §6.10 requires.
    pub fn parse(buf: &'a [u8]) -> Result<Option<(InitView<'a>, bool)>, ParseError> {
        let header = peek_header(buf)?;
        let body = buf.get(COMMON_HEADER_LEN..).unwrap_or(&[]);
        if body.first() != Some(&CHUNK_INIT) {
            return Ok(None);
        }
        if !checksum_ok(buf) {
            return Err(ParseError::BadChecksum);
        }
        let mut r = Reader::new(body);
        r.u8().field("chunk header")?;
        r.u8().field("chunk header")?;
        let length = usize::from(r.u16().field("chunk header")?);
        if length < 20 {
            return Err(ParseError::BadLength("INIT"));
        }
        let value = r.take(length - 4).field("INIT")?;
        r.skip_padding(padded(length) - length);
        let alone = r.is_empty();
        let mut v = Reader::new(value);
        let initiate_tag = v.u32().field("INIT")?;
        let a_rwnd = v.u32().field("INIT")?;
        let outbound_streams = v.u16().field("INIT")?;
        let inbound_streams = v.u16().field("INIT")?;
        let initial_tsn = v.u32().field("INIT")?;
        let params = v.rest();
        let view =
            InitView { header, initiate_tag, a_rwnd, outbound_streams, inbound_streams, initial_tsn, params };
        for p in view.raw_params() {
            p?;
        }
        Ok(Some((view, alone)))
    }

    /// The parameters as (type, value), in order, bounds-checked.
    pub fn raw_params(&self) -> RawParams<'a> {
        RawParams { r: Reader::new(self.params), failed: false }
    }

    /// The ALT-COOKIE as an endpoint that knows the parameter reads it: parameters are walked
    /// in order and an unknown one whose high bits say "stop" ends the walk (RFC 9260 §3.2.1).
    pub fn alt_cookie(&self) -> Option<&'a [u8]> {
        for p in self.raw_params() {
            let Ok((kind, value)) = p else { return None };
            match kind {
                PARAM_ALT_COOKIE => return Some(value),
                PARAM_IPV4
                | PARAM_IPV6
                | PARAM_STATE_COOKIE
                | PARAM_UNRECOGNIZED
                | PARAM_COOKIE_PRESERVATIVE
                | PARAM_SUPPORTED_ADDRESS_TYPES
                | PARAM_SUPPORTED_EXTENSIONS
                | PARAM_ALT_DATA
                | PARAM_ALT_SACK => {}
                other if !UnknownParamAction::of(other).continues() => return None,
                _ => {}
            }
        }
        None
    }
}

/// Iterator over raw parameters; stops after the first error.
#[derive(Debug)]
pub struct RawParams<'a> {
    r: Reader<'a>,
    failed: bool,
}

impl<'a> Iterator for RawParams<'a> {
    type Item = Result<(u16, &'a [u8]), ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let item = read_tlv(&mut self.r, "parameter");
        self.failed = item.is_err();
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Chunk, InitChunk, Packet, Param};

    fn init_with(params: Vec<Param>) -> Vec<u8> {
        let mut p = Packet::new(1, 2, 0);
        p.chunks.push(Chunk::Init(InitChunk {
            initiate_tag: 42,
            a_rwnd: 1000,
            outbound_streams: 1,
            inbound_streams: 1,
            initial_tsn: 7,
            params,
        }));
        p.encode()
    }

    #[test]
    fn finds_alt_cookie_and_obeys_stop_bits() {
        let raw = init_with(vec![
            Param::Unknown { param_type: 0x8123, value: vec![1] },
            Param::AltCookie(vec![9; 17]),
        ]);
        let (view, alone) = InitView::parse(&raw).unwrap().unwrap();
        assert!(alone);
        assert_eq!(view.initiate_tag, 42);
        assert_eq!(view.alt_cookie(), Some(&[9u8; 17][..]), "10: skip and go on");
        let raw =
            init_with(vec![Param::Unknown { param_type: 0x0123, value: vec![] }, Param::AltCookie(vec![])]);
        let (view, _) = InitView::parse(&raw).unwrap().unwrap();
        assert_eq!(view.alt_cookie(), None, "00: stop before the ALT-COOKIE");
        let mut bad = init_with(vec![Param::AltCookie(vec![])]);
        bad[20] ^= 1;
        assert_eq!(InitView::parse(&bad), Err(ParseError::BadChecksum));
        let mut sack = Packet::new(1, 2, 3);
        sack.chunks.push(Chunk::CookieAck);
        assert_eq!(InitView::parse(&sack.encode()), Ok(None));
    }
}
