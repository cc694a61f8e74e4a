//! Entry points for the fuzz targets (`fuzz/fuzz_targets/sctp_*.rs`) and for the replay of
//! their corpora (`tests/robustness.rs`). Not a stable API.
//!
//! Each function must never panic on any input except through its own round-trip assertion:
//! whatever the codec parses, it encodes back to bytes that parse to the same value.
//!
//! They reach types private to the engine, so they live here. [`association`] opens its
//! association in lock step (every packet handed over at once, no loss): a fixture for the
//! fuzz input, not a test harness; tests that need a network use `fastshake-testkit`'s
//! `sctp::Pair`.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::association::InitParams;
use crate::packet::{
    parse_causes, parse_params, Chunk, ErrorCause, InitView, Packet, Param, ReconfigChunk, ReconfigParam,
};
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
        let scanned = InitParams::scan(&init.params, true, true);
        assert_eq!(view.alt_cookie(), scanned.alt_cookie.as_deref(), "ALT-COOKIE seen alike");
        assert_eq!(InitParams::from_view(&view, true, true), scanned, "parameters seen alike");
        assert_eq!(InitParams::from_view(&view, false, false), InitParams::scan(&init.params, false, false));
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

/// One chunk, and a run of chunks as inside ALT-DATA; the same bytes as a peer's SNAP INIT,
/// which either is refused with its reason or opens an association that sends and takes data.
pub fn chunk(data: &[u8]) {
    if let Ok((c, used)) = Chunk::parse(data) {
        assert!(used <= data.len());
        let bytes = c.to_bytes();
        let (again, _) = Chunk::parse(&bytes).expect("encoded chunk parses");
        assert_eq!(again, c, "chunk round trip");
        assert_eq!(bytes.len(), c.padded_len(), "padded length");
    }
    let _ = Chunk::parse_all(data);
    snap_init(data);
}

fn snap_init(data: &[u8]) {
    let valid = crate::validate_snap_init(data);
    let config = Config { stream_reset: true, partial_reliability: true, ..Config::default() };
    let mut ep = Endpoint::new(Arc::new(config), [0; 32]);
    let now = Instant::from_millis(1);
    let local: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9899));
    let remote: SocketAddr = SocketAddr::from(([127, 0, 0, 2], 9899));
    let ours = ep.snap_init();
    let opened = ep.connect_snap(now, Some(local), remote, 5000, ours, data);
    match (&valid, &opened) {
        (Err(e), Err(crate::Error::Snap(f))) => assert_eq!(e, f, "validation and connect agree"),
        (Err(e), Ok(_)) => panic!("connect_snap took an INIT validation refused: {e}"),
        _ => {}
    }
    let Ok(h) = opened else { return };
    let _ = ep.send(h, crate::Message { stream: 0, unordered: false, ppid: 0, data: data.to_vec() });
    let _ = ep.reset_streams(h, &[0]);
    for step in 1..4 {
        ep.handle_timeout(now + std::time::Duration::from_secs(step));
        while ep.poll_transmit(now).is_some() {}
        while ep.poll_event().is_some() {}
    }
}

/// One parameter, a parameter list, one error cause and a cause list; the same bytes as a
/// RE-CONFIG parameter and as a RE-CONFIG chunk's value.
pub fn param(data: &[u8]) {
    if let Ok((p, used)) = ReconfigParam::parse(data) {
        assert!(used <= data.len());
        let (again, _) = ReconfigParam::parse(&p.to_bytes()).expect("encoded RE-CONFIG parameter parses");
        assert_eq!(again, p, "RE-CONFIG parameter round trip");
    }
    if let Ok(r) = ReconfigChunk::parse_value(data) {
        let chunk = Chunk::Reconfig(r.clone());
        let (again, _) = Chunk::parse(&chunk.to_bytes()).expect("encoded RE-CONFIG parses");
        assert_eq!(again, chunk, "RE-CONFIG round trip");
        let _ = r.is_allowed_combination();
    }
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

/// An established association (cookieless, in memory) fed with packets built from `data`: each
/// record is `[len, flags, chunk bytes...]`, sent to the server (flags bit 0 clear) or the client
/// with the right tags and checksum, so the bytes reach the association's chunk handling.
/// Flags bit 1 advances the clock by 300 ms first; bit 2 sends the peer a message (bit 3: an
/// unordered one); bit 4 has both sides reset their outgoing stream 0 (stream reset is on); bit 5
/// makes both sides' stream 0 `MaxRetransmits(0)`, bit 6 gives it a 100 ms lifetime (partial
/// reliability is on, so the bytes may be FORWARD-TSN chunks the association acts on). The
/// server's buffers are small, so that input reaches its window and cap (and reneging); it never
/// holds more than its cap.
pub fn association(data: &[u8]) {
    const CAP: usize = 6 * 1024;
    let server_addr = SocketAddr::from(([127, 0, 0, 1], 9899));
    let client_addr = SocketAddr::from(([127, 0, 0, 2], 9899));
    let server_config = Config {
        local_port: 5000,
        listen: true,
        cookieless: true,
        receive_window: 4 * 1024,
        max_receive_buffer: CAP,
        stream_reset: true,
        partial_reliability: true,
        ..Config::default()
    };
    let client_config =
        Config { local_port: 5001, stream_reset: true, partial_reliability: true, ..Config::default() };
    let mut server = Endpoint::new(Arc::new(server_config), [1; 32]);
    let mut client = Endpoint::new(Arc::new(client_config), [2; 32]);
    let mut now = Instant::from_millis(1);
    let h = client.connect(now, Some(client_addr), server_addr, 5000, Default::default());
    let exchange = |now: Instant, client: &mut Endpoint, server: &mut Endpoint| {
        for _ in 0..64 {
            let mut moved = false;
            while let Some(t) = client.poll_transmit(now) {
                moved = true;
                server.handle_datagram(now, server_addr, client_addr, &mut t.payload.clone());
            }
            while let Some(t) = server.poll_transmit(now) {
                moved = true;
                client.handle_datagram(now, client_addr, server_addr, &mut t.payload.clone());
            }
            while client.poll_event().is_some() {}
            while server.poll_event().is_some() {}
            if !moved {
                break;
            }
        }
    };
    exchange(now, &mut client, &mut server);
    let Some(info) = client.association(h) else { return };
    let (client_tag, server_tag) = (info.local_tag, info.peer_tag);
    let server_handle = server.associations().first().copied();
    let mut rest = data;
    while let [len, flags, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (body, next) = tail.split_at(n);
        rest = next;
        if flags & 2 != 0 {
            now += std::time::Duration::from_millis(300);
            client.handle_timeout(now);
            server.handle_timeout(now);
        }
        if flags & 4 != 0 {
            let msg = crate::Message { stream: 0, unordered: flags & 8 != 0, ppid: 0, data: body.to_vec() };
            let _ = client.send(h, msg.clone());
            if let Some(sh) = server_handle {
                let _ = server.send(sh, msg);
            }
        }
        if flags & 16 != 0 {
            let _ = client.reset_streams(h, &[0]);
            if let Some(sh) = server_handle {
                let _ = server.reset_streams(sh, &[0]);
            }
        }
        let reliability = match (flags & 32 != 0, flags & 64 != 0) {
            (_, true) => Some(crate::Reliability::Lifetime(std::time::Duration::from_millis(100))),
            (true, false) => Some(crate::Reliability::MaxRetransmits(0)),
            (false, false) => None,
        };
        if let Some(r) = reliability {
            let _ = client.set_stream_reliability(h, 0, r);
            if let Some(sh) = server_handle {
                let _ = server.set_stream_reliability(sh, 0, r);
            }
        }
        let to_server = flags & 1 == 0;
        let (src, dst, tag) = if to_server { (5001, 5000, server_tag) } else { (5000, 5001, client_tag) };
        let mut packet = Vec::with_capacity(12 + body.len());
        packet.extend_from_slice(&u16::to_be_bytes(src));
        packet.extend_from_slice(&u16::to_be_bytes(dst));
        packet.extend_from_slice(&tag.to_be_bytes());
        packet.extend_from_slice(&[0; 4]);
        packet.extend_from_slice(body);
        crate::packet::seal(&mut packet);
        if to_server {
            server.handle_datagram(now, server_addr, client_addr, &mut packet);
        } else {
            client.handle_datagram(now, client_addr, server_addr, &mut packet);
        }
        exchange(now, &mut client, &mut server);
    }
    for _ in 0..4 {
        now += std::time::Duration::from_secs(5);
        client.handle_timeout(now);
        server.handle_timeout(now);
        exchange(now, &mut client, &mut server);
    }
    assert!(server.stats().receive_buffered_peak <= CAP as u64, "receive buffer cap exceeded");
}
