//! The server endpoint under pressure: stale cookies, replacement handshakes, half-open floods,
//! idle sessions and the memory a peer can pin before it authenticates.
use fastshake_dtls::{CipherSuite, Error, Event};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Dir, Fate};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

/// The second datagram the client sent: its ClientHello with the cookie.
fn cookie_hello(pair: &Pair) -> Vec<u8> {
    pair.log
        .iter()
        .filter(|d| d.dir == Dir::ToServer)
        .nth(1)
        .expect("ClientHello with cookie")
        .payload
        .clone()
}

fn superseded(pair: &Pair, h: fastshake_dtls::ConnectionHandle) -> bool {
    pair.server_events.contains(&(h, Event::Failed(Error::Superseded)))
}

#[test]
fn replayed_cookie_hello_of_an_earlier_session_leaves_the_live_session_alone() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.handshake(MINUTE).expect("session 1");
    let stale_hello = cookie_hello(&pair);
    // The client restarts on the same port: session 2 replaces session 1.
    pair.new_client(client_config(), 9);
    pair.handshake(MINUTE).expect("session 2");
    pair.run_for(Duration::from_secs(1));
    let live = pair.server_handle();
    assert_eq!(pair.server.stats().connections_replaced, 1);

    // A late duplicate (or a replay) of session 1's ClientHello, cookie still within its lifetime.
    let (sa, ca) = (pair.server_addr, pair.client_addr);
    pair.server.handle_datagram(pair.now, sa, ca, &mut stale_hello.clone());
    pair.run_for(Duration::from_secs(1));
    assert!(!superseded(&pair, live), "a replayed hello must not end the live session");
    assert_eq!(pair.server.handle_for(ca), Some(live));
    assert!(pair.server.connection(live).unwrap().is_established());
    pair.exchange_data(3);

    // The handshake the replay started never completes; it times out and the session stays.
    pair.run_for(2 * MINUTE);
    assert_eq!(pair.server.handle_for(ca), Some(live));
    assert_eq!(pair.server.stats().connections_open, 1);
    assert_eq!(pair.server.stats().replacements_abandoned, 1);
    assert_eq!(pair.server.stats().connections_replaced, 1);
    pair.exchange_data(2);
}

#[test]
fn cookie_older_than_its_lifetime_is_refused() {
    let server = ServerConfig { cookie_lifetime: Some(Duration::from_secs(10)), ..server_config() };
    let mut pair = Pair::new(client_config(), server);
    pair.handshake(MINUTE).expect("session 1");
    let stale_hello = cookie_hello(&pair);
    pair.new_client(client_config(), 9);
    pair.handshake(MINUTE).expect("session 2");
    let live = pair.server_handle();
    let (sa, ca) = (pair.server_addr, pair.client_addr);

    // Past the lifetime, session 1's cookie earns a new HelloVerifyRequest and no state.
    pair.run_for(Duration::from_secs(1));
    pair.now += Duration::from_secs(10);
    let before = pair.server.stats();
    pair.server.handle_datagram(pair.now, sa, ca, &mut stale_hello.clone());
    let after = pair.server.stats();
    assert_eq!(after.connections_accepted, before.connections_accepted, "no connection from a stale cookie");
    assert_eq!(after.cookies_rejected, before.cookies_rejected + 1);
    assert_eq!(after.hello_verify_sent, before.hello_verify_sent + 1);
    let hvr = pair.server.poll_transmit(pair.now).expect("HelloVerifyRequest");
    assert_eq!((hvr.dst, hvr.payload[13]), (ca, 3), "a HelloVerifyRequest to the sender");
    assert_eq!(pair.server.handle_for(ca), Some(live));
}

#[test]
fn fresh_cookie_is_accepted_for_half_its_lifetime() {
    let server = ServerConfig { cookie_lifetime: Some(Duration::from_secs(10)), ..server_config() };
    let mut pair = Pair::new(client_config(), server);
    // ClientHello out, HelloVerifyRequest back, then the cookie ClientHello is held for 4.9 s.
    pair.filter = net::drop_if(|d| d.dir == Dir::ToServer && d.index == 1);
    pair.run_for(Duration::from_millis(100));
    let held = cookie_hello(&pair);
    pair.now += Duration::from_millis(4_900);
    let (sa, ca) = (pair.server_addr, pair.client_addr);
    pair.server.handle_datagram(pair.now, sa, ca, &mut held.clone());
    assert_eq!(pair.server.stats().connections_accepted, 1);
}

#[test]
fn unacceptable_new_hello_on_the_address_of_a_session_keeps_it() {
    let mut sc = server_config();
    sc.suites = vec![CipherSuite::PskWithAes128Ccm8];
    let mut pair = Pair::new(client_config(), sc);
    pair.handshake(MINUTE).expect("session 1");
    let live = pair.server_handle();
    // The client restarts on the same port offering only a suite the server does not have.
    let mut cc = client_config();
    cc.suites = vec![CipherSuite::PskWithAes128GcmSha256];
    pair.new_client(cc, 9);
    assert!(pair.handshake(MINUTE).is_none() || pair.client_summary().is_none());
    assert!(!superseded(&pair, live));
    assert!(pair.server.connection(live).unwrap().is_established());
    assert_eq!(pair.server.handle_for(pair.client_addr), Some(live));
}

// ------------------------------------------------------------------ half-open and idle limits

use fastshake_dtls::{Connection, ConnectionHandle, Endpoint, Instant, ServerConfig};
use std::net::SocketAddr;
use std::sync::Arc;

const SERVER: &str = "198.51.100.1:5684";

fn addr(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

fn endpoint(config: ServerConfig) -> Endpoint {
    Endpoint::new(Arc::new(config), [7; 32]).expect("a valid server configuration")
}

/// Server output for `to` (the rest is dropped: other peers are not listening).
fn server_output_for(server: &mut Endpoint, now: Instant, to: SocketAddr) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(t) = server.poll_transmit(now) {
        if t.dst == to {
            out.push(t.payload);
        }
    }
    out
}

/// A client that completes the cookie exchange from `from` and then goes silent.
fn half_open(server: &mut Endpoint, now: Instant, from: SocketAddr, seed: u8) -> Connection {
    let sa: SocketAddr = SERVER.parse().unwrap();
    let mut client = Connection::client(Arc::new(client_config()), now, sa, [seed; 32]);
    for _ in 0..2 {
        while let Some(t) = client.poll_transmit(now) {
            server.handle_datagram(now, sa, from, &mut t.payload.clone());
        }
        for mut d in server_output_for(server, now, from) {
            if d.get(13) == Some(&3) {
                // Only the HelloVerifyRequest reaches the client.
                client.handle_datagram(now, sa, &mut d);
            }
        }
    }
    client
}

/// Runs `client` against `server` with no loss until it is established (or gives up).
fn finish(server: &mut Endpoint, now: Instant, from: SocketAddr, client: &mut Connection) -> bool {
    let sa: SocketAddr = SERVER.parse().unwrap();
    for _ in 0..10 {
        while let Some(t) = client.poll_transmit(now) {
            server.handle_datagram(now, sa, from, &mut t.payload.clone());
        }
        for mut d in server_output_for(server, now, from) {
            client.handle_datagram(now, sa, &mut d);
        }
        if client.is_established() {
            return true;
        }
    }
    false
}

fn connect(server: &mut Endpoint, now: Instant, from: SocketAddr, seed: u8) -> ConnectionHandle {
    let sa: SocketAddr = SERVER.parse().unwrap();
    let mut client = Connection::client(Arc::new(client_config()), now, sa, [seed; 32]);
    assert!(finish(server, now, from, &mut client), "client from {from} connects");
    server.handle_for(from).expect("server side of the session")
}

#[test]
fn half_open_flood_evicts_the_oldest_handshake_never_an_established_session() {
    let mut config = server_config();
    config.max_connections = 6;
    config.max_handshakes = 3;
    let mut server = endpoint(config);
    let now = Instant::from_millis(1_000);
    let established: Vec<_> =
        (0..2).map(|i| connect(&mut server, now, addr("192.0.2.1", 1000 + i), i as u8)).collect();
    for i in 0..20u16 {
        half_open(&mut server, now, addr("203.0.113.9", 2000 + i), 50 + i as u8);
    }
    let stats = server.stats();
    assert_eq!(stats.connections_open, 2 + 3, "two sessions and the three newest handshakes");
    assert_eq!(stats.handshakes_evicted, 17);
    assert_eq!(stats.connections_refused, 0);
    for h in &established {
        assert!(server.connection(*h).is_some_and(|c| c.is_established()), "established sessions survive");
    }
    // A new client still gets in.
    let h = connect(&mut server, now, addr("192.0.2.2", 3000), 99);
    assert!(server.connection(h).unwrap().is_established());

    // A table full of established sessions refuses a new handshake rather than evict one.
    for i in 0..3u16 {
        connect(&mut server, now, addr("192.0.2.3", 4000 + i), 120 + i as u8);
    }
    assert_eq!(server.stats().connections_open, 6);
    let refused_before = server.stats().connections_refused;
    half_open(&mut server, now, addr("203.0.113.9", 5000), 200);
    assert_eq!(server.stats().connections_refused, refused_before + 1);
    assert_eq!(server.handles().filter(|h| server.connection(*h).unwrap().is_established()).count(), 6);
}

#[test]
fn one_host_flooding_handshakes_cannot_evict_another_hosts_handshake() {
    let config = ServerConfig { max_handshakes: 8, max_handshakes_per_ip: Some(2), ..server_config() };
    let mut server = endpoint(config);
    let now = Instant::from_millis(1_000);
    let honest_addr = addr("192.0.2.7", 6000);
    let mut honest = half_open(&mut server, now, honest_addr, 1);
    // The flood arrives while the honest client's flight is on its way.
    for i in 0..50u16 {
        half_open(&mut server, now, addr("203.0.113.9", 2000 + i), (10 + i) as u8);
    }
    assert_eq!(server.stats().connections_open, 1 + 2, "the flooding host holds two slots");
    assert!(server.handle_for(honest_addr).is_some(), "the honest handshake was not evicted");
    // Re-sending the cookie ClientHello gets flight 4 again from the same connection.
    assert!(
        finish(&mut server, now, honest_addr, &mut honest) || {
            // The flight the client missed is resent on its retransmission timer.
            let later = now + Duration::from_secs(2);
            honest.handle_timeout(later);
            server.handle_timeout(later);
            finish(&mut server, later, honest_addr, &mut honest)
        }
    );
}

#[test]
fn stuck_half_open_handshake_is_removed_by_the_handshake_timeout() {
    let config = server_config();
    let timeout = config.handshake_timeout;
    let mut server = endpoint(config);
    let now = Instant::from_millis(1_000);
    half_open(&mut server, now, addr("203.0.113.9", 2000), 3);
    assert_eq!(server.stats().connections_open, 1);
    let end = now + timeout + Duration::from_secs(1);
    while let Some(t) = server.poll_timeout().filter(|t| *t <= end) {
        server.handle_timeout(t);
    }
    assert_eq!(server.stats().connections_open, 0);
    assert!(server.poll_timeout().is_none());
}

#[test]
fn silent_established_session_expires_after_the_idle_timeout() {
    let server = ServerConfig { idle_timeout: Some(Duration::from_secs(30)), ..server_config() };
    let mut pair = Pair::new(client_config(), server);
    pair.handshake(MINUTE).expect("session");
    pair.run_for(Duration::from_secs(1));
    let h = pair.server_handle();
    // Traffic keeps it alive; garbage that fails authentication does not.
    for _ in 0..3 {
        pair.now += Duration::from_secs(20);
        pair.exchange_data(1);
    }
    assert!(pair.server.connection(h).is_some_and(|c| c.is_established()));
    let (sa, ca) = (pair.server_addr, pair.client_addr);
    let mut garbage = vec![23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 99, 0, 24];
    garbage.extend_from_slice(&[0x55; 24]);
    let last_data = pair.now;
    pair.now += Duration::from_secs(20);
    pair.server.handle_datagram(pair.now, sa, ca, &mut garbage);
    pair.run_for(MINUTE);
    assert!(pair.now <= last_data + Duration::from_secs(31), "closed 30 s after the last data");
    assert!(pair.server.connection(h).is_none(), "the silent session is gone");
    let expired = Event::Failed(Error::IdleTimeout { idle: Duration::from_secs(30) });
    assert!(pair.server_events.contains(&(h, expired)), "{:?}", pair.server_events);
    assert_eq!(pair.server.stats().sessions_expired, 1);
    assert!(pair.client.is_closed(), "the client got a close_notify");
}

#[test]
fn without_idle_timeout_sessions_stay() {
    let server = ServerConfig { idle_timeout: None, ..server_config() };
    let mut pair = Pair::new(client_config(), server);
    pair.handshake(MINUTE).expect("session");
    pair.run_for(Duration::from_secs(1));
    pair.now += Duration::from_secs(86_400);
    pair.server.handle_timeout(pair.now);
    assert_eq!(pair.server.stats().connections_open, 1);
    assert!(pair.server.poll_timeout().is_none());
}

/// The engine takes its randomness from the seed alone: std's `HashMap`/`HashSet` seed their
/// hasher from the OS (`RandomState`), so none may appear in the engine's sources.
#[test]
fn engine_uses_no_os_seeded_hasher() {
    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    sources(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    assert!(files.len() > 10);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for banned in ["HashMap", "HashSet", "RandomState"] {
            assert!(!text.contains(banned), "{} uses {banned}", file.display());
        }
    }
}

/// 16,000 one-byte fragments at disjoint offsets of one claimed message (400 datagrams of 40):
/// the work per fragment stays bounded. Prints the time taken; asserts only behaviour.
#[test]
fn flood_of_disjoint_fragments_into_a_half_open_connection() {
    fn fragment(length: u32, offset: u32) -> Vec<u8> {
        let mut v = vec![16]; // ClientKeyExchange
        v.extend_from_slice(&length.to_be_bytes()[1..]);
        v.extend_from_slice(&2u16.to_be_bytes());
        v.extend_from_slice(&offset.to_be_bytes()[1..]);
        v.extend_from_slice(&1u32.to_be_bytes()[1..]);
        v.push(0);
        v
    }
    let mut server = endpoint(server_config());
    let now = Instant::from_millis(1_000);
    let from = addr("203.0.113.9", 2000);
    half_open(&mut server, now, from, 5);
    let sa: SocketAddr = SERVER.parse().unwrap();
    let claimed = 16 * 1024 - 1;
    let started = std::time::Instant::now();
    for r in 0..400u32 {
        let mut body = Vec::new();
        for k in 0..40u32 {
            body.extend(fragment(claimed, (2 * (r * 40 + k)) % (claimed - 1)));
        }
        let mut record = vec![22, 0xfe, 0xfd, 0, 0];
        record.extend_from_slice(&(1000 + r as u64).to_be_bytes()[2..]);
        record.extend_from_slice(&(body.len() as u16).to_be_bytes());
        record.extend(body);
        server.handle_datagram(now, sa, from, &mut record);
    }
    println!("16000 disjoint fragments in 400 datagrams: {:?}", started.elapsed());
    assert_eq!(server.stats().connections_open, 1);
    assert!(server.handle_for(from).is_some_and(|h| !server.connection(h).unwrap().is_established()));
}

/// The ClientHello of a client at the smallest MTU, one datagram per fragment.
fn fragmented_hello(now: Instant, seed: u8) -> Vec<Vec<u8>> {
    let sa: SocketAddr = SERVER.parse().unwrap();
    let mut config = client_config();
    config.mtu = fastshake_dtls::MIN_MTU;
    let mut client = Connection::client(Arc::new(config), now, sa, [seed; 32]);
    std::iter::from_fn(|| client.poll_transmit(now).map(|t| t.payload)).collect()
}

fn hello_verify_requests_to(server: &mut Endpoint, now: Instant, to: SocketAddr) -> usize {
    server_output_for(server, now, to).iter().filter(|d| d.get(13) == Some(&3)).count()
}

#[test]
fn flood_of_first_fragments_does_not_starve_a_small_mtu_client() {
    let mut server = endpoint(server_config());
    let now = Instant::from_millis(1_000);
    let sa: SocketAddr = SERVER.parse().unwrap();
    let honest = addr("192.0.2.50", 7000);
    let hello = fragmented_hello(now, 1);
    assert!(hello.len() >= 2, "the ClientHello is fragmented at the smallest MTU");
    let (first, rest) = hello.split_first().unwrap();
    server.handle_datagram(now, sa, honest, &mut first.clone());
    // Between the honest client's fragments: first fragments from 500 ports of one host.
    let flood = fragmented_hello(now, 2);
    for port in 0..500u16 {
        server.handle_datagram(now, sa, addr("203.0.113.9", 10_000 + port), &mut flood[0].clone());
    }
    for d in rest {
        server.handle_datagram(now, sa, honest, &mut d.clone());
    }
    assert_eq!(hello_verify_requests_to(&mut server, now, honest), 1, "the honest client gets its cookie");
    // The flood evicted its own entries: all but the table's 64 were dropped.
    assert!(server.stats().partial_hellos_dropped >= 500 - 64);
}

/// Fragments of one ClientHello may be a slotframe or more apart on a duty-cycled link, or a
/// backed-off retransmission apart on a lossy one, so a partial hello waits while fragments
/// keep coming; one idle for longer than 64 seconds goes.
#[test]
fn partial_hello_idle_for_a_minute_is_dropped() {
    let mut server = endpoint(server_config());
    let now = Instant::from_millis(1_000);
    let sa: SocketAddr = SERVER.parse().unwrap();
    let slow = addr("192.0.2.49", 7000);
    let hello = fragmented_hello(now, 3);
    assert!(hello.len() >= 2);
    // One fragment every 50 seconds: slow, never idle for 64.
    let mut t = now;
    for d in &hello {
        server.handle_datagram(t, sa, slow, &mut d.clone());
        // Another host starts a hello meanwhile, which sweeps stale entries.
        server.handle_datagram(t, sa, addr("192.0.2.60", 7000), &mut fragmented_hello(t, 4)[0].clone());
        t += Duration::from_secs(50);
    }
    assert_eq!(hello_verify_requests_to(&mut server, t, slow), 1, "the slow client gets its cookie");

    let client = addr("192.0.2.50", 7000);
    let hello = fragmented_hello(now, 1);
    server.handle_datagram(now, sa, client, &mut hello[0].clone());
    // Another host starts a ClientHello 65 seconds later: the stale entry goes.
    let later = now + Duration::from_secs(65);
    let dropped = server.stats().partial_hellos_dropped;
    server.handle_datagram(later, sa, addr("192.0.2.51", 7000), &mut fragmented_hello(later, 2)[0].clone());
    assert!(server.stats().partial_hellos_dropped > dropped);
    for d in &hello[1..] {
        server.handle_datagram(later, sa, client, &mut d.clone());
    }
    assert_eq!(hello_verify_requests_to(&mut server, later, client), 0, "the stale fragments were forgotten");
}

/// Application data does not refile the idle timer (the data path stays off the timer tree);
/// the timer is moved when it fires and finds the session was active.
#[test]
fn data_does_not_move_the_idle_timer_until_it_fires() {
    let server = ServerConfig { idle_timeout: Some(Duration::from_secs(30)), ..server_config() };
    let mut pair = Pair::new(client_config(), server);
    pair.handshake(MINUTE).expect("session");
    pair.run_for(Duration::from_secs(1));
    let armed = pair.server.poll_timeout().expect("idle timer");
    pair.now += Duration::from_secs(10);
    pair.exchange_data(3);
    assert_eq!(pair.server.poll_timeout(), Some(armed));
    let active_at = pair.now;
    pair.now = armed;
    pair.server.handle_timeout(pair.now);
    assert!(pair.server.connection(pair.server_handle()).is_some_and(|c| c.is_established()));
    let rearmed = pair.server.poll_timeout().expect("idle timer refiled");
    assert!(rearmed > armed && rearmed <= active_at + Duration::from_secs(30));
}

/// The server completes a full handshake on the client's Finished and keeps its last flight
/// until the client shows it arrived. When that flight is lost, the client resends its own on a
/// doubling timer (1 s, 2 s, 4 s, ...) whose gaps outgrow any idle limit: the idle sweep must not
/// close the session meanwhile (it answered the client's next retransmission with close_notify,
/// and the client's handshake failed with "the session is closed").
#[test]
fn the_idle_timeout_does_not_end_a_handshake_the_client_has_not_finished() {
    let server = ServerConfig { idle_timeout: Some(Duration::from_millis(1_500)), ..server_config() };
    let mut pair = Pair::new(client_config(), server);
    // The server's ChangeCipherSpec + Finished (its only epoch-1 flight) is lost twice.
    let mut dropped = 0;
    pair.filter = Box::new(move |d| {
        let has_ccs = d.payload.first() == Some(&20) || d.payload.windows(3).any(|w| w == [20, 0xfe, 0xfd]);
        if d.dir == Dir::ToClient && has_ccs && dropped < 2 {
            dropped += 1;
            return Fate::Drop;
        }
        Fate::Deliver
    });
    let done = pair.handshake(MINUTE);
    assert!(done.is_some(), "client: {:?}", pair.client_events);
    assert!(pair.client.is_established());
    assert!(pair.client_failure().is_none() && pair.server_failure().is_none());
    assert!(pair.server_summary().is_some());
    let (c, _) = done.unwrap();
    assert!(c.retransmissions >= 2, "the client resent its flight: {c:?}");
    // Once the last flight is no longer kept (the handshake timeout, as the client sends
    // nothing), the idle limit applies as usual.
    pair.run_for(MINUTE + Duration::from_secs(5));
    assert_eq!(pair.server.stats().sessions_expired, 1);
}
