//! A client that sends the cookie of an earlier exchange in its first ClientHello skips the
//! HelloVerifyRequest round trip with a server that issues reusable cookies; a server that does
//! not, or a stale or foreign cookie, costs the usual cookie exchange and nothing more.

use fastshake_dtls::{ClientConfig, ServerConfig};
use fastshake_testkit::dtls::*;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn reusable_server() -> ServerConfig {
    ServerConfig { reusable_cookies: true, ..server_config() }
}

/// A full handshake from a fresh client at the same address with `config`; returns the client's
/// summary and the HelloVerifyRequests the server sent for it.
fn next_handshake(
    pair: &mut Pair,
    config: ClientConfig,
    seed: u8,
) -> (fastshake_dtls::HandshakeSummary, u64) {
    let before = pair.server.stats().hello_verify_sent;
    pair.new_client(config, seed);
    pair.server_events.clear();
    let (client, _) = pair.handshake(MINUTE).expect("handshake");
    (client, pair.server.stats().hello_verify_sent - before)
}

#[test]
fn a_cached_cookie_skips_the_hello_verify_request() {
    let mut pair = Pair::new(client_config(), reusable_server());
    let (first, _) = pair.handshake(MINUTE).expect("first handshake");
    assert_eq!(pair.server.stats().hello_verify_sent, 1);
    let cookie = first.cookie.clone().expect("the first handshake's cookie is reported");

    let config = ClientConfig { cookie: Some(cookie.clone()), ..client_config() };
    let (second, hello_verify) = next_handshake(&mut pair, config, 2);
    assert_eq!(hello_verify, 0, "the cached cookie admits the new ClientHello");
    assert!(!second.resumed, "a full handshake, not a resumption");
    assert_eq!(second.flights_sent, first.flights_sent - 1, "no second ClientHello flight");
    assert!(second.datagrams_received < first.datagrams_received);
    assert_eq!(second.cookie, Some(cookie), "the same cookie admitted it");
}

#[test]
fn without_reusable_cookies_the_server_asks_again() {
    let mut pair = Pair::new(client_config(), server_config());
    let (first, _) = pair.handshake(MINUTE).expect("first handshake");
    let config = ClientConfig { cookie: first.cookie.clone(), ..client_config() };
    let (second, hello_verify) = next_handshake(&mut pair, config, 2);
    assert_eq!(hello_verify, 1, "a cookie bound to the earlier ClientHello does not verify");
    assert_eq!(second.flights_sent, first.flights_sent);
    assert_ne!(second.cookie, first.cookie);
}

#[test]
fn a_foreign_or_stale_cookie_costs_one_cookie_exchange() {
    let server = ServerConfig { cookie_lifetime: Some(Duration::from_secs(10)), ..reusable_server() };
    let mut pair = Pair::new(client_config(), server);
    let (first, _) = pair.handshake(MINUTE).expect("first handshake");
    let cookie = first.cookie.clone().expect("cookie");

    // Another address: the cookie is bound to the one it was issued to.
    pair.client_addr.set_port(pair.client_addr.port() + 1);
    let config = ClientConfig { cookie: Some(cookie.clone()), ..client_config() };
    let (_, hello_verify) = next_handshake(&mut pair, config.clone(), 2);
    assert_eq!(hello_verify, 1);

    // Back at the first address, after the cookie's lifetime.
    pair.client_addr.set_port(pair.client_addr.port() - 1);
    pair.elapse(Duration::from_secs(30));
    let (late, hello_verify) = next_handshake(&mut pair, config, 3);
    assert_eq!(hello_verify, 1, "an expired cookie is asked again");
    assert_ne!(late.cookie, Some(cookie));

    // A forged cookie of the right length.
    let forged = ClientConfig { cookie: Some(vec![0x42; 16]), ..client_config() };
    let (_, hello_verify) = next_handshake(&mut pair, forged, 4);
    assert_eq!(hello_verify, 1);
}

#[test]
fn an_oversized_cookie_is_a_configuration_error() {
    let config = ClientConfig { cookie: Some(vec![0; 256]), ..client_config() };
    assert!(config.validate().is_err());
}
