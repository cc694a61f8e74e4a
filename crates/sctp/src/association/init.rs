//! What an INIT or INIT-ACK says (its parameters scanned by RFC 9260 §3.2.1) and the
//! stateless INIT-ACK of the regular handshake, whose state cookie carries everything the
//! association will need. The endpoint uses these before any association exists.

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use fastshake_core::codec::put_u16;
use fastshake_core::CookieMac;

use super::paths::MAX_PATHS;
use crate::cookie::StateCookie;
use crate::packet::{
    Chunk, InitChunk, InitView, Packet, Param, SackChunk, UnknownParamAction, CHUNK_FORWARD_TSN,
    CHUNK_RECONFIG, PARAM_ALT_COOKIE, PARAM_ALT_DATA, PARAM_ALT_SACK, PARAM_COOKIE_PRESERVATIVE,
    PARAM_FORWARD_TSN_SUPPORTED, PARAM_IPV4, PARAM_IPV6, PARAM_STATE_COOKIE, PARAM_SUPPORTED_ADDRESS_TYPES,
    PARAM_SUPPORTED_EXTENSIONS, PARAM_UNRECOGNIZED,
};
use crate::{Config, HandshakeKind, Instant};

/// How the endpoint judged an INIT's ALT-COOKIE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InitVerdict {
    /// Opens an association at once, by this kind of alternative handshake.
    Alt(HandshakeKind),
    /// Goes the regular way (INIT-ACK with state cookie).
    Regular,
}

/// The parameters of an INIT the receiver acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InitParams {
    pub(crate) alt_cookie: Option<Vec<u8>>,
    pub(crate) alt_data: Option<Vec<u8>>,
    pub(crate) alt_sack: Option<Vec<u8>>,
    pub(crate) state_cookie: Option<Vec<u8>>,
    pub(crate) addresses: Vec<IpAddr>,
    /// The chunk types of the sender's Supported Extensions (RFC 5061 §4.2.7).
    pub(crate) extensions: Option<Vec<u8>>,
    /// The sender announced Forward-TSN-Supported (RFC 3758 §3.3.1); only read when we speak
    /// PR-SCTP ourselves, else the parameter is unrecognised.
    pub(crate) forward_tsn: bool,
    /// Parameters to report back as unrecognised (whole TLVs).
    pub(crate) unrecognized: Vec<Vec<u8>>,
}

impl InitParams {
    /// Scans parameters by RFC 9260 §3.2.1; ALT-* are unknown (skipped by their high bits `10`)
    /// when `alt` is off, Forward-TSN-Supported (reported by its high bits `11`) when `pr` is.
    pub(crate) fn scan(params: &[Param], alt: bool, pr: bool) -> InitParams {
        Self::scan_pairs(params.iter().map(|p| (p.param_type(), p.value_bytes())), alt, pr)
    }

    /// The same scan over the raw parameters of a borrowed INIT.
    pub(crate) fn from_view(view: &InitView<'_>, alt: bool, pr: bool) -> InitParams {
        let pairs = view.raw_params().map_while(Result::ok).map(|(t, v)| (t, Cow::Borrowed(v)));
        Self::scan_pairs(pairs, alt, pr)
    }

    /// The one implementation of the scan, over (type, value) pairs.
    fn scan_pairs<'a>(pairs: impl Iterator<Item = (u16, Cow<'a, [u8]>)>, alt: bool, pr: bool) -> InitParams {
        let mut out = InitParams::default();
        for (kind, value) in pairs {
            match kind {
                PARAM_IPV4 => {
                    if let Ok(b) = <[u8; 4]>::try_from(&value[..]) {
                        out.addresses.push(IpAddr::from(b));
                    }
                }
                PARAM_IPV6 => {
                    if let Ok(b) = <[u8; 16]>::try_from(&value[..]) {
                        out.addresses.push(IpAddr::from(b));
                    }
                }
                // A repeated parameter counts once: the first one, as everywhere else.
                PARAM_STATE_COOKIE => {
                    out.state_cookie.get_or_insert_with(|| value.into_owned());
                }
                PARAM_ALT_COOKIE if alt => {
                    out.alt_cookie.get_or_insert_with(|| value.into_owned());
                }
                PARAM_ALT_DATA if alt => {
                    out.alt_data.get_or_insert_with(|| value.into_owned());
                }
                PARAM_ALT_SACK if alt => {
                    out.alt_sack.get_or_insert_with(|| value.into_owned());
                }
                PARAM_SUPPORTED_EXTENSIONS => {
                    out.extensions.get_or_insert_with(|| value.into_owned());
                }
                PARAM_FORWARD_TSN_SUPPORTED if pr => out.forward_tsn = true,
                PARAM_COOKIE_PRESERVATIVE | PARAM_SUPPORTED_ADDRESS_TYPES | PARAM_UNRECOGNIZED => {}
                other => {
                    let action = UnknownParamAction::of(other);
                    if action.reports() && out.unrecognized.len() < 8 {
                        // The TLV as its length field states it, without padding.
                        let mut tlv = Vec::with_capacity(4 + value.len());
                        put_u16(&mut tlv, other);
                        put_u16(&mut tlv, u16::try_from(4 + value.len()).unwrap_or(u16::MAX));
                        tlv.extend_from_slice(&value);
                        out.unrecognized.push(tlv);
                    }
                    if !action.continues() {
                        break;
                    }
                }
            }
        }
        out.addresses.truncate(MAX_PATHS);
        out
    }

    /// Whether the sender announced RE-CONFIG (stream reset) support (RFC 6525 §5.1.1).
    pub(crate) fn reconfig(&self) -> bool {
        self.extensions.as_ref().is_some_and(|types| types.contains(&CHUNK_RECONFIG))
    }

    /// Whether the sender announced PR-SCTP: Forward-TSN-Supported (RFC 3758 §3.3.1), or
    /// FORWARD-TSN among its Supported Extensions (RFC 5061 §4.2.7), as either says it takes
    /// the chunk. Only meaningful when the scan was made with `pr`.
    pub(crate) fn partial_reliability(&self) -> bool {
        self.forward_tsn || self.extensions.as_ref().is_some_and(|types| types.contains(&CHUNK_FORWARD_TSN))
    }
}

/// The Supported Extensions parameter we announce in INIT and INIT-ACK, if any: RE-CONFIG when
/// stream reset is on (RFC 6525 §5.1.1), FORWARD-TSN when partial reliability is (RFC 3758).
/// Nothing else: we speak no other extension (no I-DATA, ASCONF or AUTH), and with both off the
/// INIT stays as it was.
pub(super) fn supported_extensions(config: &Config) -> Option<Param> {
    let mut types = Vec::new();
    if config.stream_reset {
        types.push(CHUNK_RECONFIG);
    }
    if config.partial_reliability {
        types.push(CHUNK_FORWARD_TSN);
    }
    (!types.is_empty()).then_some(Param::SupportedExtensions(types))
}

/// The extension parameters of our INIT and INIT-ACK: Forward-TSN-Supported when partial
/// reliability is on (RFC 3758 §3.3.1), then Supported Extensions; a browser announces both, in
/// this order.
pub(super) fn extension_params(config: &Config) -> impl Iterator<Item = Param> {
    let forward_tsn = config.partial_reliability.then_some(Param::ForwardTsnSupported);
    forward_tsn.into_iter().chain(supported_extensions(config))
}

/// The INIT this endpoint opens an association with, `tag` and `tsn` its Initiate Tag and
/// Initial TSN, before any ALT-* parameter: the regular INIT and SNAP's `a=sctp-init` alike.
///
/// No Supported Address Types: its absence means every type (RFC 9260 §3.3.2.1), and a stack
/// that does not implement it stops at its high bits `00` and drops the INIT (pion/sctp does).
/// The engine has no address family of its own to restrict: a path to a peer address of another
/// family than the primary's is never used anyway.
pub(crate) fn own_init(config: &Config, (tag, tsn): (u32, u32)) -> InitChunk {
    let mut params: Vec<Param> = config.extra_local_addresses.iter().map(|ip| address_param(*ip)).collect();
    params.extend(extension_params(config));
    InitChunk {
        initiate_tag: tag,
        a_rwnd: config.receive_window,
        outbound_streams: config.streams_out,
        inbound_streams: config.streams_in,
        initial_tsn: tsn,
        params,
    }
}

/// The fixed fields of a peer's INIT that an INIT-ACK and a state cookie need.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InitFields {
    pub(crate) initiate_tag: u32,
    pub(crate) a_rwnd: u32,
    pub(crate) outbound_streams: u16,
    pub(crate) inbound_streams: u16,
    pub(crate) initial_tsn: u32,
}

impl From<&InitChunk> for InitFields {
    fn from(i: &InitChunk) -> Self {
        InitFields {
            initiate_tag: i.initiate_tag,
            a_rwnd: i.a_rwnd,
            outbound_streams: i.outbound_streams,
            inbound_streams: i.inbound_streams,
            initial_tsn: i.initial_tsn,
        }
    }
}

impl From<&InitView<'_>> for InitFields {
    fn from(v: &InitView<'_>) -> Self {
        InitFields {
            initiate_tag: v.initiate_tag,
            a_rwnd: v.a_rwnd,
            outbound_streams: v.outbound_streams,
            inbound_streams: v.inbound_streams,
            initial_tsn: v.initial_tsn,
        }
    }
}

pub(super) fn address_param(ip: IpAddr) -> Param {
    match ip {
        IpAddr::V4(v4) => Param::Ipv4Address(v4),
        IpAddr::V6(v6) => Param::Ipv6Address(v6),
    }
}

pub(super) fn parse_alt_sack(raw: &[u8]) -> Option<SackChunk> {
    match Chunk::parse(raw) {
        Ok((Chunk::Sack(s), _)) => Some(s),
        _ => None,
    }
}

/// The stateless INIT-ACK of the regular handshake: everything the association needs travels in
/// the signed state cookie. `ports` are (ours, the peer's), `offer` is the (tag, initial TSN) the
/// cookie opens the association with, `tie_tags` those of an association that exists already.
#[allow(clippy::too_many_arguments)]
pub(crate) fn regular_init_ack(
    config: &Config,
    mac: &CookieMac,
    now: Instant,
    remote: SocketAddr,
    (local_port, remote_port): (u16, u16),
    init: InitFields,
    params: &InitParams,
    (tag, tsn): (u32, u32),
    tie_tags: (u32, u32),
) -> Packet {
    let streams_out = config.streams_out.min(init.inbound_streams).max(1);
    let streams_in = config.streams_in.min(init.outbound_streams).max(1);
    let mut peer_addresses = vec![remote.ip()];
    peer_addresses.extend(params.addresses.iter().copied().filter(|a| *a != remote.ip()));
    let cookie = StateCookie {
        local_tag: tag,
        peer_tag: init.initiate_tag,
        local_initial_tsn: tsn,
        peer_initial_tsn: init.initial_tsn,
        peer_rwnd: init.a_rwnd,
        streams_out,
        streams_in,
        created: now,
        lifetime: config.cookie_lifetime,
        peer_addresses,
        tie_tags,
        reconfig: config.stream_reset && params.reconfig(),
        forward_tsn: config.partial_reliability && params.partial_reliability(),
    };
    let mut ack_params: Vec<Param> =
        config.extra_local_addresses.iter().map(|ip| address_param(*ip)).collect();
    ack_params.extend(extension_params(config));
    ack_params.push(Param::StateCookie(cookie.seal(mac)));
    for u in &params.unrecognized {
        ack_params.push(Param::UnrecognizedParameter(u.clone()));
    }
    let ack = InitChunk {
        initiate_tag: tag,
        a_rwnd: config.receive_window,
        outbound_streams: streams_out,
        inbound_streams: config.streams_in,
        initial_tsn: tsn,
        params: ack_params,
    };
    let mut p = Packet::new(local_port, remote_port, init.initiate_tag);
    p.chunks.push(Chunk::InitAck(ack));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(param_type: u16) -> Param {
        Param::Unknown { param_type, value: vec![1, 2, 3] }
    }

    #[test]
    fn unknown_parameters_are_reported_skipped_or_end_the_scan_by_their_high_bits() {
        let params = vec![
            unknown(0x8001),
            unknown(0xC002),
            Param::AltCookie(vec![9]),
            Param::Ipv4Address([10, 0, 0, 9].into()),
            unknown(0x4003),
            Param::StateCookie(vec![7]),
        ];
        let p = InitParams::scan(&params, true, false);
        assert_eq!(p.alt_cookie, Some(vec![9]));
        assert_eq!(p.addresses, vec![IpAddr::from([10, 0, 0, 9])]);
        assert_eq!(p.state_cookie, None, "01: stop after reporting");
        assert_eq!(p.unrecognized, vec![vec![0xC0, 0x02, 0, 7, 1, 2, 3], vec![0x40, 0x03, 0, 7, 1, 2, 3]]);
        let p = InitParams::scan(&params, false, false);
        assert_eq!(p.alt_cookie, None, "ALT-* are unknown, skipped silently, when the mode is regular");
        assert_eq!(p.unrecognized.len(), 2);
    }

    #[test]
    fn a_browser_init_announces_reconfig_and_reports_forward_tsn_only() {
        // dcSCTP: Supported Extensions (RE-CONFIG, FORWARD-TSN), Forward-TSN-Supported, Zero
        // Checksum Acceptable with EDMID 1.
        let params = vec![
            Param::SupportedExtensions(vec![0x82, 0xC0]),
            Param::Unknown { param_type: 0xC000, value: vec![] },
            Param::Unknown { param_type: 0x8001, value: vec![0, 0, 0, 1] },
        ];
        let p = InitParams::scan(&params, true, false);
        assert!(p.reconfig());
        assert_eq!(p.unrecognized, vec![vec![0xC0, 0x00, 0, 4]], "0xC000 reported, 0x8001 skipped");
        let without = InitParams::scan(&[Param::SupportedExtensions(vec![0xC0, 0x40])], true, false);
        assert!(!without.reconfig());
        assert_eq!(supported_extensions(&Config::default()), None);
        let on = Config { stream_reset: true, ..Config::default() };
        assert_eq!(supported_extensions(&on), Some(Param::SupportedExtensions(vec![0x82])));
        // With PR-SCTP on, the same INIT announces it and nothing is reported back.
        let p = InitParams::scan(&params, true, true);
        assert!(p.forward_tsn && p.partial_reliability());
        assert!(p.unrecognized.is_empty());
        let only_listed = InitParams::scan(&[Param::SupportedExtensions(vec![0xC0])], true, true);
        assert!(only_listed.partial_reliability(), "FORWARD-TSN in Supported Extensions is enough");
        assert!(!InitParams::scan(&[], true, true).partial_reliability());
        let both = Config { stream_reset: true, partial_reliability: true, ..Config::default() };
        assert_eq!(
            extension_params(&both).collect::<Vec<_>>(),
            [Param::ForwardTsnSupported, Param::SupportedExtensions(vec![0x82, 0xC0])]
        );
    }
}
