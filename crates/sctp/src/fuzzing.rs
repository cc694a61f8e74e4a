//! Entry points for the fuzz targets (`fuzz/fuzz_targets/sctp_*.rs`) and for the corpus test.
//! Not a stable API.
//!
//! Each function must never panic on any input except through its own round-trip assertion:
//! whatever the codec parses, it encodes back to bytes that parse to the same value.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::association::InitParams;
use crate::packet::{parse_causes, parse_params, Chunk, ErrorCause, InitView, Packet, Param};
use crate::{Config, Endpoint, HandshakeMode, Instant};

/// A whole packet: with and without checksum, then through a listening endpoint of each mode.
pub fn packet(data: &[u8]) {
    let _ = Packet::parse(data);
    if let Ok(p) = Packet::parse_unchecked(data) {
        let again = Packet::parse(&p.encode()).expect("encoded packet parses");
        assert_eq!(again, p, "packet round trip");
    }
    // The same bytes with a correct checksum reach the state machine.
    let mut sealed = data.to_vec();
    crate::packet::seal(&mut sealed);
    // The borrowed INIT view (flood path) and the owned parse agree on what an INIT says.
    if let (Ok(Some((view, _))), Ok(p)) = (InitView::parse(&sealed), Packet::parse(&sealed)) {
        let Some(Chunk::Init(init)) = p.chunks.first() else { panic!("view saw an INIT the parser did not") };
        assert_eq!(view.initiate_tag, init.initiate_tag);
        let scanned = InitParams::scan(&init.params, true);
        assert_eq!(view.alt_cookie(), scanned.alt_cookie.as_deref(), "ALT-COOKIE seen alike");
        assert_eq!(InitParams::from_view(&view, true), scanned, "parameters seen alike");
        assert_eq!(InitParams::from_view(&view, false), InitParams::scan(&init.params, false));
    }
    for mode in [HandshakeMode::Regular, HandshakeMode::Both, HandshakeMode::AltOnly] {
        let config =
            Config { mode, listen: true, cookieless: mode == HandshakeMode::Both, ..Config::default() };
        let mut ep = Endpoint::new(Arc::new(config), [0; 32]);
        let local: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9899));
        let remote: SocketAddr = SocketAddr::from(([127, 0, 0, 2], 9899));
        let now = Instant::from_millis(1);
        ep.handle_datagram(now, local, remote, &mut sealed.clone());
        while ep.poll_transmit(now).is_some() {}
        ep.handle_timeout(Instant::from_millis(10_000));
        while ep.poll_transmit(now).is_some() {}
        while ep.poll_event().is_some() {}
    }
}

/// One chunk, and a run of chunks as inside ALT-DATA.
pub fn chunk(data: &[u8]) {
    if let Ok((c, used)) = Chunk::parse(data) {
        assert!(used <= data.len());
        let bytes = c.to_bytes();
        let (again, _) = Chunk::parse(&bytes).expect("encoded chunk parses");
        assert_eq!(again, c, "chunk round trip");
        assert_eq!(bytes.len(), c.padded_len(), "padded length");
    }
    let _ = Chunk::parse_all(data);
}

/// One parameter, a parameter list, one error cause and a cause list.
pub fn param(data: &[u8]) {
    if let Ok((p, used)) = Param::parse(data) {
        assert!(used <= data.len());
        let (again, _) = Param::parse(&p.to_bytes()).expect("encoded parameter parses");
        assert_eq!(again, p, "parameter round trip");
    }
    let _ = parse_params(data);
    if let Ok((c, _)) = ErrorCause::parse(data) {
        let chunk = Chunk::Error { causes: vec![c.clone()] };
        let (again, _) = Chunk::parse(&chunk.to_bytes()).expect("encoded cause parses");
        assert_eq!(again, chunk, "cause round trip");
    }
    let _ = parse_causes(data);
}
