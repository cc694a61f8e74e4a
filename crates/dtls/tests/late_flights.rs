//! Late and duplicated flights (RFC 6347 §4.2.2, §4.2.4): when the round trip is longer than
//! the retransmission timer, copies of every earlier flight keep arriving after each side has
//! moved on. A message_seq below the next expected one is discarded, a retransmitted previous
//! flight of the peer makes us resend our last one, and no copy ever ends a handshake.

use fastshake_dtls::{
    CertifiedKey, ClientAuth, ClientConfig, ClientSession, Event, HandshakeSummary, Instant, ServerConfig,
    SessionCacheConfig, TicketKeys, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{Dir, Fate, Filter};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });
const SECOND: Duration = Duration::from_secs(1);

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(3, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn anchors() -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())
}

/// How the two sides are configured, one per handshake kind the engine has.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Psk,
    /// ECDHE-ECDSA, a chain of three (root not sent), mutual authentication.
    EcdsaMutual,
    ResumedByTicket,
    ResumedBySessionId,
}

const MODES: [Mode; 4] = [Mode::Psk, Mode::EcdsaMutual, Mode::ResumedByTicket, Mode::ResumedBySessionId];

fn configs(mode: Mode) -> (ClientConfig, ServerConfig) {
    let timers = |c: &mut ClientConfig| {
        c.wall_clock = CLOCK;
        // Long enough for a handshake whose round trip is several retransmission periods.
        c.handshake_timeout = Duration::from_secs(600);
    };
    match mode {
        Mode::Psk | Mode::ResumedByTicket | Mode::ResumedBySessionId => {
            let mut c = client_config();
            timers(&mut c);
            let mut s = server_config();
            s.wall_clock = CLOCK;
            s.handshake_timeout = Duration::from_secs(600);
            if matches!(mode, Mode::ResumedByTicket) {
                s.tickets = Some(TicketKeys::new(1, [9; 16]));
                s.session_cache = SessionCacheConfig { max_entries: 0, ..Default::default() };
            }
            (c, s)
        }
        // DTLS 1.2, like the PSK modes: the flights and message_seq rules here are RFC 6347's.
        Mode::EcdsaMutual => {
            let mut c = ClientConfig {
                versions: Versions::Dtls12,
                trust_anchors: Some(anchors()),
                server_name: Some("localhost".into()),
                certified_key: Some(Arc::new(pki().client_certified_key().unwrap())),
                ..Default::default()
            };
            timers(&mut c);
            let s = ServerConfig {
                versions: Versions::Dtls12,
                certified_key: Some(Arc::new(pki().server_certified_key().unwrap()) as Arc<CertifiedKey>),
                client_auth: ClientAuth::Require,
                client_trust_anchors: Some(anchors()),
                wall_clock: CLOCK,
                handshake_timeout: Duration::from_secs(600),
                ..Default::default()
            };
            (c, s)
        }
    }
}

/// Every datagram arrives on time after `delay`, and a copy of it arrives again up to `late_max`
/// later (the copy of a retransmission overtaking nothing, the copy of an old flight arriving
/// after the peer moved on).
fn late_copies(seed: u64, late_max: Duration) -> Filter {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Box::new(move |_| {
        let extra = Duration::from_millis(rng.next_u64() % late_max.as_millis().max(1) as u64);
        Fate::DuplicateLate(extra)
    })
}

fn resumes(mode: Mode) -> bool {
    matches!(mode, Mode::ResumedByTicket | Mode::ResumedBySessionId)
}

/// A pair whose client offers the session of a full handshake it just made with the same
/// server, from a new port.
fn resuming_pair(c: ClientConfig, s: ServerConfig, seed: u8) -> Pair {
    let mut pair = Pair::with_seed(c.clone(), s, seed);
    let (full, _) = pair.handshake(Duration::from_secs(60)).expect("full handshake");
    let session: Option<ClientSession> = full.session;
    assert!(session.is_some(), "the server issued a session");
    pair.client_addr.set_port(pair.client_addr.port() + 1);
    pair.resume_client(c, session, seed);
    pair.server_events.clear();
    pair
}

/// Runs one handshake of `mode` with one-way delay `delay` (round trip against the 1 s initial
/// retransmission timer) and late copies of everything; then three records each way, each of
/// which must arrive exactly once.
fn handshake_with_late_copies(
    mode: Mode,
    delay: Duration,
    seed: u64,
) -> (HandshakeSummary, HandshakeSummary) {
    let (c, s) = configs(mode);
    let mut pair =
        if resumes(mode) { resuming_pair(c, s, seed as u8) } else { Pair::with_seed(c, s, seed as u8) };
    pair.delay = delay;
    pair.filter = late_copies(seed, 4 * delay + 3 * SECOND);
    let result = pair.handshake(Duration::from_secs(600));
    let Some((c, s)) = result else {
        panic!(
            "{mode:?}, delay {delay:?}, seed {seed}: client {:?} / server {:?}",
            pair.client_events, pair.server_events
        )
    };
    if resumes(mode) {
        assert!(c.resumed && s.resumed, "{mode:?}: resumed on both sides");
    }
    // Records both ways: each exactly once, whatever copies the network makes.
    let h = pair.server.handle_for(pair.client_addr).expect("server session");
    for i in 0..3 {
        pair.client.send(format!("c{i}").as_bytes()).unwrap();
        pair.server.send(h, format!("s{i}").as_bytes()).unwrap();
    }
    pair.run_for(4 * delay + 10 * SECOND);
    let want = |side: &str| (0..3).map(|i| format!("{side}{i}").into_bytes()).collect::<Vec<_>>();
    assert_eq!(pair.server_data(), want("c"), "{mode:?}: client records at the server, once each");
    assert_eq!(pair.client_data(), want("s"), "{mode:?}: server records at the client, once each");
    assert!(pair.client_failure().is_none() && pair.server_failure().is_none());
    (c, s)
}

#[test]
fn every_mode_completes_when_late_copies_of_every_flight_arrive() {
    for mode in MODES {
        // Round trips of 0.4 s (within the timer), 3 s and 8 s (beyond it, so both sides
        // retransmit before any answer can come and old flights keep arriving).
        for (delay_ms, seed) in [(200u64, 1u64), (1_500, 2), (4_000, 3)] {
            let (c, s) = handshake_with_late_copies(mode, Duration::from_millis(delay_ms), seed);
            if delay_ms >= 1_500 {
                assert!(c.retransmissions + s.retransmissions > 0, "{mode:?}: the timers fired");
            }
        }
    }
}

/// The failure `fastshake bench sim` showed over a TSCH hop: the round trip is longer than the
/// retransmission timer, so the server answers two copies of the first ClientHello with two
/// HelloVerifyRequests, with different cookies once the cookie's time slot changes between
/// them. The second one is an answer to a ClientHello the client has already replaced; taking
/// its cookie restarted the handshake, and the ServerHello already on its way then looked out
/// of order (unexpected_message).
#[test]
fn a_late_hello_verify_request_with_a_newer_cookie_does_not_restart_the_client() {
    let (mut c, mut s) = configs(Mode::Psk);
    c.initial_retransmit = SECOND;
    // Cookies are bound to 3 s slots (a lifetime of 6 s): the first ClientHello reaches the
    // server at 2.5 s and its retransmission at 3.5 s, on either side of a slot boundary, so the
    // two HelloVerifyRequests carry different cookies; each cookie stays valid for a round trip.
    s.cookie_lifetime = Some(6 * SECOND);
    let mut pair = Pair::new(c, s);
    pair.delay = Duration::from_millis(1_500);
    let (c, s) = pair
        .handshake(Duration::from_secs(120))
        .unwrap_or_else(|| panic!("client {:?} / server {:?}", pair.client_events, pair.server_events));
    assert_eq!(c.suite, s.suite);
    assert!(pair.server.stats().hello_verify_sent >= 2, "both copies of the first ClientHello were answered");
    assert!(pair.client_failure().is_none());
}

/// A client that did restart on a late HelloVerifyRequest (as some implementations do) sends
/// its ClientHello again with a higher message_seq and a valid cookie. That is a new handshake
/// replacing the half-open one (RFC 6347 §4.2.8), not a message out of place in it.
#[test]
fn a_client_hello_with_a_higher_message_seq_starts_the_handshake_over() {
    let (c, s) = configs(Mode::Psk);
    let mut pair = Pair::new(c, s);
    // ClientHello, HelloVerifyRequest, ClientHello with the cookie (message_seq 1).
    let now = pair.now;
    let server_addr = pair.server_addr;
    let from = pair.client_addr;
    let hello = pair.client.poll_transmit(now).unwrap().payload;
    pair.server.handle_datagram(now, server_addr, from, &mut hello.clone());
    let mut hvr = pair.server.poll_transmit(now).unwrap().payload;
    pair.client.handle_datagram(now, server_addr, &mut hvr);
    let with_cookie = pair.client.poll_transmit(now).unwrap().payload;
    pair.server.handle_datagram(now, server_addr, from, &mut with_cookie.clone());
    while pair.server.poll_transmit(now).is_some() {}
    assert_eq!(pair.server.stats().connections_accepted, 1);
    // The same ClientHello with message_seq 2 (record header 13 bytes, then msg_type, length,
    // message_seq): its cookie is still valid.
    let mut restarted = with_cookie.clone();
    restarted[13 + 4..13 + 6].copy_from_slice(&2u16.to_be_bytes());
    pair.server.handle_datagram(now, server_addr, from, &mut restarted);
    let answer = pair.server.poll_transmit(now).expect("a ServerHello").payload;
    assert_eq!(answer[13], 2, "ServerHello");
    assert_eq!(&answer[13 + 4..13 + 6], &2u16.to_be_bytes(), "answering message_seq 2");
    assert_eq!(pair.server.stats().connections_accepted, 2, "a new handshake replaced the half-open one");
    while let Some((_, e)) = pair.server.poll_event() {
        assert!(!matches!(e, Event::Failed(fastshake_dtls::Error::AlertSent(_))), "{e:?}");
    }
}

/// A late copy of the server's first flight reaches a client that already completed (full
/// handshake) or that keeps its last flight (abbreviated): it is discarded, or makes the client
/// resend that last flight, and never ends the session.
#[test]
fn old_flights_after_completion_change_nothing() {
    for mode in [Mode::Psk, Mode::ResumedByTicket] {
        let (c, s) = configs(mode);
        let mut pair = if resumes(mode) { resuming_pair(c, s, 5) } else { Pair::new(c, s) };
        // Keep every datagram the server sends during the handshake, then replay them all.
        let kept = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let sink = kept.clone();
        pair.filter = Box::new(move |d| {
            if d.dir == Dir::ToClient {
                sink.borrow_mut().push(d.payload.clone());
            }
            Fate::Deliver
        });
        pair.handshake(Duration::from_secs(60)).expect("handshake");
        pair.run_for(SECOND);
        for d in kept.borrow().iter() {
            let server_addr = pair.server_addr;
            pair.client.handle_datagram(pair.now, server_addr, &mut d.clone());
        }
        pair.run_for(SECOND);
        assert!(pair.client.is_established(), "{mode:?}: {:?}", pair.client_events);
        assert!(pair.client_failure().is_none() && pair.server_failure().is_none(), "{mode:?}");
        let h = pair.server_handle();
        pair.client.send(b"still here").unwrap();
        pair.server.send(h, b"so am I").unwrap();
        pair.run_for(SECOND);
        assert!(pair.server_data().contains(&b"still here".to_vec()), "{mode:?}");
        assert!(pair.client_data().contains(&b"so am I".to_vec()), "{mode:?}");
    }
}
