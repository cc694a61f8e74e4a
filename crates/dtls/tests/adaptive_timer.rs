//! The adaptive retransmission timer (`RetransmitPolicy::Adaptive`) on the in-memory pair with a
//! fixed one-way delay, on simulated time: it never arms below its floor, doubles on loss up to
//! the ceiling, learns a slow link's round trip from the cookie exchange (client: the echoed
//! record number; server: the dated cookie) so nothing is resent spuriously afterwards, starts
//! the next handshake from the per-peer cache, and the caches stay bounded and per peer.

use fastshake_dtls::{
    CipherSuite, ClientConfig, Instant, RetransmitPolicy, RttCache, ServerConfig, TrustAnchors, Versions,
    WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Dir};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn adaptive(floor: Duration) -> RetransmitPolicy {
    RetransmitPolicy::Adaptive { floor }
}

fn p256_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(2, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Psk,
    EcdheEcdsa,
}

fn configs(kind: Kind, policy: RetransmitPolicy) -> (ClientConfig, ServerConfig) {
    let (mut client, mut server) = match kind {
        Kind::Psk => (client_config(), server_config()),
        Kind::EcdheEcdsa => {
            let pki = p256_pki();
            let anchors = Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).unwrap());
            let client = ClientConfig {
                versions: Versions::Dtls12,
                suites: vec![CipherSuite::EcdheEcdsaWithAes128GcmSha256],
                wall_clock: CLOCK,
                ..ClientConfig::certificate(anchors, Some("localhost".into()))
            };
            let server = ServerConfig {
                versions: Versions::Dtls12,
                wall_clock: CLOCK,
                ..ServerConfig::certificate(Arc::new(pki.server_certified_key().unwrap()))
            };
            (client, server)
        }
    };
    client.retransmit = policy;
    server.retransmit = policy;
    client.handshake_timeout = 10 * MINUTE;
    server.handshake_timeout = 10 * MINUTE;
    (client, server)
}

/// Steps the pair until both ends are connected, noting every retransmission deadline as it is
/// armed: (when, how far ahead) for the client and for the server's connection.
fn handshake_noting_timers(pair: &mut Pair, max: Duration) -> (Vec<Duration>, Vec<Duration>) {
    let limit = pair.now + max;
    let (mut client_timers, mut server_timers) = (Vec::new(), Vec::new());
    let (mut last_client, mut last_server) = (None, None);
    loop {
        pair.collect();
        let note = |deadline: Option<Instant>, last: &mut Option<Instant>, out: &mut Vec<Duration>, now| {
            if let Some(d) = deadline.filter(|d| Some(*d) != *last) {
                out.push(d.saturating_duration_since(now));
            }
            *last = deadline;
        };
        if !pair.client.is_established() {
            note(pair.client.poll_timeout(), &mut last_client, &mut client_timers, pair.now);
        }
        let server_handshaking = pair
            .server
            .handles()
            .any(|h| pair.server.connection(h).is_some_and(|c| !c.is_established() && !c.is_closed()));
        if server_handshaking {
            note(pair.server.poll_timeout(), &mut last_server, &mut server_timers, pair.now);
        }
        if pair.client_summary().is_some() && pair.server_summary().is_some() {
            return (client_timers, server_timers);
        }
        assert!(pair.step(limit), "handshake did not complete");
    }
}

#[test]
fn timers_never_go_below_the_floor_on_a_fast_link() {
    let floor = ms(100);
    let (client, server) = configs(Kind::Psk, adaptive(floor));
    let mut pair = Pair::new(client, server);
    pair.delay = Duration::from_micros(500);
    let (client_timers, server_timers) = handshake_noting_timers(&mut pair, MINUTE);
    // The handshake timeout's deadline is a minute ahead; the rest are retransmission timers.
    let retransmit: Vec<Duration> =
        client_timers.iter().chain(&server_timers).copied().filter(|t| *t < ms(30_000)).collect();
    assert!(retransmit.len() >= 3, "client flights 1, 3, 5 and server flight 4 were timed: {retransmit:?}");
    assert!(retransmit.iter().all(|t| *t >= floor), "armed below the floor: {retransmit:?}");
    // A 1 ms round trip predicts far less than the floor: once measured, timers sit on it.
    assert!(retransmit.iter().filter(|t| **t == floor).count() >= 2, "timers did not adapt: {retransmit:?}");
    let (c, s) = (pair.client_summary().unwrap(), pair.server_summary().unwrap());
    assert_eq!((c.retransmissions, s.retransmissions), (0, 0));
    assert_eq!(c.rtt.unwrap().smoothed(), ms(1));
    assert_eq!(s.rtt.unwrap().smoothed(), ms(1));
}

/// The instants at which the datagrams of `dir` matching `pick` were sent.
fn sent_at(pair: &Pair, dir: Dir, pick: impl Fn(&[u8]) -> bool) -> Vec<Instant> {
    pair.log.iter().filter(|d| d.dir == dir && pick(&d.payload)).map(|d| d.at).collect()
}

fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1].saturating_duration_since(w[0])).collect()
}

fn assert_doubling(gaps: &[Duration], max: Duration) {
    assert!(gaps.len() >= 5, "too few retransmissions: {gaps:?}");
    assert!(gaps[0] < max, "the first timer was not the estimate: {gaps:?}");
    for w in gaps.windows(2) {
        assert_eq!(w[1], (w[0] * 2).min(max), "each loss doubles the timer up to the ceiling: {gaps:?}");
    }
    assert_eq!(*gaps.last().unwrap(), max, "the ceiling was reached: {gaps:?}");
}

#[test]
fn the_timer_doubles_on_each_loss_up_to_the_ceiling() {
    let max = ms(2_000);
    // The client: its ClientHello with the cookie (its second datagram on) never gets an answer.
    let (mut client, server) = configs(Kind::Psk, adaptive(ms(50)));
    client.max_retransmit = max;
    let mut pair = Pair::new(client, server);
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index >= 1);
    pair.run_for(20 * Duration::from_secs(1));
    let hellos = sent_at(&pair, Dir::ToServer, |_| true);
    assert_doubling(&gaps(&hellos[1..]), max);

    // The server: its flight 4 never gets an answer.
    let (client, mut server) = configs(Kind::Psk, adaptive(ms(50)));
    server.max_retransmit = max;
    let mut pair = Pair::new(client, server);
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index >= 2);
    pair.run_for(20 * Duration::from_secs(1));
    // Flight 4 transmissions: every server datagram after the HelloVerifyRequest.
    let flights = sent_at(&pair, Dir::ToClient, |_| true);
    assert_doubling(&gaps(&flights[1..]), max);
}

/// Client retransmissions that happened before the HelloVerifyRequest arrived: the ClientHellos
/// sent before it, less the first.
fn resent_before_cookie(pair: &Pair) -> u32 {
    let hvr_arrival =
        pair.log.iter().find(|d| d.dir == Dir::ToClient).expect("a HelloVerifyRequest").at + pair.delay;
    let hellos = pair.log.iter().filter(|d| d.dir == Dir::ToServer && d.at < hvr_arrival).count();
    hellos as u32 - 1
}

fn slow_link(kind: Kind, policy: RetransmitPolicy) -> (Pair, ClientConfig) {
    let (client, server) = configs(kind, policy);
    let mut pair = Pair::new(client.clone(), server);
    pair.delay = ms(1_500);
    (pair, client)
}

/// A second handshake to the same server: the first client closes, a new one (same
/// configuration, so the same RTT cache) connects from the same address.
fn second_handshake(pair: &mut Pair, client: ClientConfig) -> (u32, u32) {
    pair.client.close();
    pair.run_for(Duration::from_secs(10));
    pair.server_events.clear();
    pair.new_client(client, 7);
    let (c, s) = pair.handshake(10 * MINUTE).expect("second handshake");
    (c.retransmissions, s.retransmissions)
}

#[test]
fn a_slow_link_is_learned_from_the_cookie_exchange_and_cached_for_the_next_handshake() {
    for kind in [Kind::Psk, Kind::EcdheEcdsa] {
        let (mut pair, client) = slow_link(kind, adaptive(ms(100)));
        let (c, s) = pair.handshake(10 * MINUTE).expect("handshake");
        // The first ClientHello waits the initial 1 s, shorter than the 3 s round trip; after the
        // cookie exchange neither side resends anything.
        let early = resent_before_cookie(&pair);
        assert!(early >= 1, "{kind:?}: the 1 s initial timer should fire on a 3 s round trip");
        assert_eq!(c.retransmissions, early, "{kind:?}: client resent after the cookie exchange");
        assert_eq!(c.rtt.unwrap().smoothed(), ms(3_000), "{kind:?}");
        // The ClientHello with the cookie came after resent ones, so the server cannot tell
        // whether it is itself a resent copy (its age then the client's timer): no sample
        // from it, flight 4 waits the initial 1 s and is resent; its answer is not sampled
        // either (Karn). Nothing is cached on the server.
        assert!(s.retransmissions >= 1, "{kind:?}: the server had no round trip for flight 4");
        let server_ip = pair.server_addr.ip();
        assert_eq!(client.rtt_cache.get(server_ip).unwrap().smoothed(), ms(3_000));
        // The client's cache primed, its first ClientHello waits the round trip: the cookie
        // comes back in a first transmission, the server learns the 3 s from it, and the next
        // handshake resends nothing at all.
        assert_eq!(second_handshake(&mut pair, client), (0, 0), "{kind:?}: second handshake");
        assert_eq!(pair.server.rtt_cache().get(pair.client_addr.ip()).unwrap().smoothed(), ms(3_000));
    }
}

#[test]
fn the_fixed_timer_resends_on_the_same_slow_link() {
    for kind in [Kind::Psk, Kind::EcdheEcdsa] {
        let (mut pair, client) = slow_link(kind, RetransmitPolicy::Fixed);
        let (c, s) = pair.handshake(10 * MINUTE).expect("handshake");
        let early = resent_before_cookie(&pair);
        assert!(
            c.retransmissions > early || s.retransmissions > 0,
            "{kind:?}: a 1 s timer on a 3 s round trip resends after the cookie exchange"
        );
        let (c2, s2) = second_handshake(&mut pair, client);
        assert!(c2 + s2 > 0, "{kind:?}: nothing is learned without the adaptive policy");
    }
}

fn ip(a: u8, b: u8) -> IpAddr {
    IpAddr::from([198, 51, a, b])
}

#[test]
fn rtt_caches_are_bounded_and_per_peer() {
    const PEERS: u8 = 10;
    const CAPACITY: usize = 4;
    // A client talking to 10 servers, each 10 ms further away, keeps only the last 4. (Not on
    // the pair's default server address, which each new pair's first client looks up.)
    let cache = Arc::new(RttCache::new(CAPACITY));
    for i in 1..=PEERS {
        let (mut client, server) = configs(Kind::Psk, adaptive(ms(10)));
        client.rtt_cache = cache.clone();
        let mut pair = Pair::new(client.clone(), server);
        pair.server_addr = SocketAddr::new(ip(200, i), 5684);
        pair.delay = ms(10 * u64::from(i));
        pair.new_client(client, i);
        pair.handshake(MINUTE).expect("handshake");
    }
    assert_eq!(cache.len(), CAPACITY);
    for i in 1..=PEERS {
        let got = cache.get(ip(200, i)).map(|e| e.smoothed());
        let want = (i > PEERS - CAPACITY as u8).then(|| ms(20 * u64::from(i)));
        assert_eq!(got, want, "server {i}");
    }

    // A server with clients at 10 addresses, each 10 ms further away, keeps only the last 4.
    let (client, mut server) = configs(Kind::Psk, adaptive(ms(10)));
    server.rtt_cache_entries = CAPACITY;
    let mut pair = Pair::new(client.clone(), server);
    for i in 1..=PEERS {
        pair.client_addr = SocketAddr::new(IpAddr::from([192, 0, 2, i]), 5684);
        pair.server_events.clear();
        pair.delay = ms(10 * u64::from(i));
        pair.new_client(client.clone(), i);
        pair.handshake(MINUTE).expect("handshake");
    }
    let server_cache = pair.server.rtt_cache();
    assert_eq!(server_cache.len(), CAPACITY);
    for i in 1..=PEERS {
        let got = server_cache.get(IpAddr::from([192, 0, 2, i])).map(|e| e.smoothed());
        let want = (i > PEERS - CAPACITY as u8).then(|| ms(20 * u64::from(i)));
        assert_eq!(got, want, "client {i}");
    }
}

#[test]
fn the_fixed_policy_keeps_no_cache_and_its_cookie_is_as_long_as_the_dated_one() {
    let (client, server) = configs(Kind::Psk, RetransmitPolicy::Fixed);
    let mut pair = Pair::new(client.clone(), server);
    let (c, s) = pair.handshake(MINUTE).expect("handshake");
    // Measured all the same, for the summary.
    assert_eq!(c.rtt.unwrap().smoothed(), ms(20));
    assert_eq!(s.rtt.unwrap().smoothed(), ms(20));
    assert!(client.rtt_cache.is_empty());
    assert!(pair.server.rtt_cache().is_empty());
    // HelloVerifyRequest: 13-byte record header, 12-byte handshake header, version, cookie
    // length and a 16-byte cookie, under either policy: the adaptive one's carries its issue
    // time in place of tag bytes, so the ClientHello returning it is no larger (on an
    // 802.15.4 hop four bytes more can cost a frame).
    let hvr = &pair.log.iter().find(|d| d.dir == Dir::ToClient).unwrap().payload;
    assert_eq!(hvr.len(), 13 + 12 + 3 + 16);
    let (client, server) = configs(Kind::Psk, adaptive(ms(10)));
    let mut pair = Pair::new(client, server);
    let (_, s) = pair.handshake(MINUTE).expect("handshake");
    let hvr = &pair.log.iter().find(|d| d.dir == Dir::ToClient).unwrap().payload;
    assert_eq!(hvr.len(), 13 + 12 + 3 + 16);
    // The server learned the round trip from the cookie's age alone.
    assert_eq!(s.rtt.unwrap().smoothed(), ms(20));
    assert_eq!(s.rtt.unwrap().samples(), 2, "the cookie exchange and flight 4");
}

/// Client retransmission timers armed in one handshake over a 600 ms round trip (the estimate
/// then says 1.8 s, above the 1 s initial value), the first ClientHello dropped or not.
fn client_timers_on_a_600_ms_link(drop_first_hello: bool) -> Vec<Duration> {
    let (mut client, server) = configs(Kind::Psk, adaptive(ms(50)));
    client.initial_retransmit = Duration::from_secs(1);
    let mut pair = Pair::new(client, server);
    pair.delay = ms(300);
    if drop_first_hello {
        pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index == 0);
    }
    let (client_timers, _) = handshake_noting_timers(&mut pair, MINUTE);
    client_timers.into_iter().filter(|t| *t < ms(30_000)).collect()
}

#[test]
fn after_a_loss_the_timer_waits_no_longer_than_the_initial_value() {
    // Clean: after the cookie exchange the client's flights wait SRTT + 4 RTTVAR, over 1 s.
    let clean = client_timers_on_a_600_ms_link(false);
    assert!(clean[1..].iter().all(|t| *t > Duration::from_secs(1)), "{clean:?}");
    // The first ClientHello lost: the HelloVerifyRequest names the resent one, so the path
    // loses, and no later flight waits longer than the initial 1 s.
    let lossy = client_timers_on_a_600_ms_link(true);
    assert!(lossy.len() > clean.len(), "the lost ClientHello was resent: {lossy:?}");
    let after_cookie = &lossy[lossy.len() - (clean.len() - 1)..];
    assert!(after_cookie.iter().all(|t| *t <= Duration::from_secs(1)), "{lossy:?}");
    assert!(after_cookie.iter().all(|t| *t >= ms(50)), "never below the floor: {lossy:?}");
}

/// Whether the client's estimate after one handshake over a 600 ms round trip shows a loss,
/// the server's datagrams picked by `lost` dropped.
fn client_saw_loss(lost: impl FnMut(&net::Datagram) -> bool + 'static) -> bool {
    let (mut client, server) = configs(Kind::Psk, adaptive(ms(50)));
    client.initial_retransmit = Duration::from_secs(1);
    let mut pair = Pair::new(client, server);
    pair.delay = ms(300);
    pair.filter = net::drop_if(lost);
    let (c, _) = pair.handshake(MINUTE).expect("handshake");
    c.rtt.expect("measured").lossy()
}

#[test]
fn lost_server_flights_show_losses_to_the_client() {
    assert!(!client_saw_loss(|_| false), "nothing lost, no loss");
    // The server's first flight after the cookie exchange: the client resends its ClientHello,
    // and the server's second transmission comes under later record numbers than the one the
    // server's count starts with (one past the ClientHello it answers). One loss caps this
    // handshake but is not carried to the next: on a contention MAC it may be a collision.
    let flight_4 = |d: &net::Datagram| d.dir == Dir::ToClient && d.index == 1;
    assert!(!client_saw_loss(flight_4), "one loss is not carried");
    // The server's last flight lost as well (after flight 4's copy): a second loss, carried.
    let flights_4_and_6 = |d: &net::Datagram| d.dir == Dir::ToClient && (d.index == 1 || d.index == 3);
    assert!(client_saw_loss(flights_4_and_6), "flights 4 and 6 lost");
}
