//! The server endpoint under pressure: stale cookies, replacement handshakes, half-open floods,
//! idle sessions and the memory a peer can pin before it authenticates.
mod common;
use common::*;
use fastshake_dtls::{CipherSuite, Error, Event};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn exchange_data(pair: &mut Pair, n: usize) {
    let h = pair.server_handle();
    let before_c = pair.client_data().len();
    let before_s = pair.server_data().len();
    for i in 0..n {
        pair.client.send(format!("client record {i}").as_bytes()).unwrap();
        pair.server.send(h, format!("server record {i}").as_bytes()).unwrap();
    }
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_data().len() - before_s, n, "server received every client record");
    assert_eq!(pair.client_data().len() - before_c, n, "client received every server record");
}

/// The second datagram the client sent: its ClientHello with the cookie.
fn cookie_hello(pair: &Pair) -> Vec<u8> {
    pair.log.iter().filter(|(d, _)| *d == Dir::ToServer).nth(1).expect("ClientHello with cookie").1.clone()
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
    pair.client_events.clear();
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
    exchange_data(&mut pair, 3);

    // The handshake the replay started never completes; it times out and the session stays.
    pair.run_for(2 * MINUTE);
    assert_eq!(pair.server.handle_for(ca), Some(live));
    assert_eq!(pair.server.stats().connections_open, 1);
    assert_eq!(pair.server.stats().replacements_abandoned, 1);
    assert_eq!(pair.server.stats().connections_replaced, 1);
    exchange_data(&mut pair, 2);
}

#[test]
fn cookie_older_than_its_lifetime_is_refused() {
    let mut pair = Pair::new(client_config(), server_config());
    pair.server.set_cookie_lifetime(Duration::from_secs(10));
    pair.handshake(MINUTE).expect("session 1");
    let stale_hello = cookie_hello(&pair);
    pair.new_client(client_config(), 9);
    pair.client_events.clear();
    pair.handshake(MINUTE).expect("session 2");
    let live = pair.server_handle();
    let (sa, ca) = (pair.server_addr, pair.client_addr);

    // Past the lifetime, session 1's cookie earns a new HelloVerifyRequest and no state.
    pair.run_for(Duration::from_secs(1));
    pair.now = pair.now + Duration::from_secs(10);
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
    let mut pair = Pair::new(client_config(), server_config());
    pair.server.set_cookie_lifetime(Duration::from_secs(10));
    // ClientHello out, HelloVerifyRequest back, then the cookie ClientHello is held for 4.9 s.
    pair.filter = Box::new(|d, i, _| if d == Dir::ToServer && i == 1 { Fate::Drop } else { Fate::Deliver });
    pair.run_for(Duration::from_millis(100));
    let held = cookie_hello(&pair);
    pair.now = pair.now + Duration::from_millis(4_900);
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
    pair.client_events.clear();
    assert!(pair.handshake(MINUTE).is_none() || pair.client_summary().is_none());
    assert!(!superseded(&pair, live));
    assert!(pair.server.connection(live).unwrap().is_established());
    assert_eq!(pair.server.handle_for(pair.client_addr), Some(live));
}
