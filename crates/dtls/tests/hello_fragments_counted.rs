//! A server session made from a ClientHello the endpoint reassembled from fragments counts
//! every datagram that carried a fragment of it (`Stats`, `HandshakeSummary`): what the
//! client sent after the cookie exchange, in both versions. The first ClientHello and the
//! HelloVerifyRequest / HelloRetryRequest (RFC 6347 §4.2.1, RFC 9147 §5.1) came before the
//! session and are not counted.

use fastshake_dtls::{ClientConfig, NamedGroup, ServerConfig, Versions, MIN_MTU};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{Datagram, Dir, Fate};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn psk13_client() -> ClientConfig {
    ClientConfig { versions: Versions::Dtls13, ..client_config() }
}

fn psk13_server() -> ServerConfig {
    ServerConfig { versions: Versions::Dtls13, ..server_config() }
}

/// How many times the network handed `d` over.
fn copies(d: &Datagram) -> u64 {
    match d.fate {
        Fate::Drop => 0,
        Fate::Deliver | Fate::Late(_) => 1,
        Fate::Duplicate | Fate::DuplicateLate(_) => 2,
    }
}

/// The client's datagrams sent after the server's first answer (the cookie exchange's
/// request), as the server received them: datagrams and bytes. Also how many datagrams the
/// second ClientHello took (those the client sent before the server answered it).
fn after_cookie_exchange(pair: &Pair) -> (u64, u64, usize) {
    let first_answer = pair.log.iter().find(|d| d.dir == Dir::ToClient).expect("a cookie exchange").nth;
    let after: Vec<&Datagram> =
        pair.log.iter().filter(|d| d.dir == Dir::ToServer && d.nth > first_answer).collect();
    let datagrams = after.iter().map(|d| copies(d)).sum();
    let bytes = after.iter().map(|d| copies(d) * d.payload.len() as u64).sum();
    // The server's next answer comes after the first datagram of the second ClientHello (a
    // copy of the first one's answer may come before).
    let hello_starts = after.first().expect("a second ClientHello").nth;
    let flight = pair
        .log
        .iter()
        .find(|d| d.dir == Dir::ToClient && d.nth > hello_starts)
        .expect("the server's flight");
    let hello = after.iter().filter(|d| d.nth < flight.nth).count();
    (datagrams, bytes, hello)
}

/// Runs the handshake with every datagram delivered once, checks the second ClientHello took
/// at least `min_hello` datagrams, and that the server's summary counts all the client sent
/// after the cookie exchange.
fn check_counted(mut pair: Pair, min_hello: usize) {
    let (_, s) = pair.handshake(MINUTE).expect("connected");
    assert!(pair.take_in_flight().iter().all(|d| d.dir == Dir::ToClient), "all the client sent arrived");
    let (datagrams, bytes, hello) = after_cookie_exchange(&pair);
    assert!(hello >= min_hello, "the second ClientHello came in {hello} datagrams");
    assert_eq!((s.datagrams_received, s.bytes_received), (datagrams, bytes));
    let stats = pair.server.connection(pair.server_handle()).expect("the session").stats();
    assert_eq!((stats.datagrams_received, stats.bytes_received), (datagrams, bytes));
}

#[test]
fn a_hybrid_hello_in_two_datagrams_is_counted_whole() {
    let client = ClientConfig { groups: vec![NamedGroup::X25519MlKem768], ..psk13_client() };
    let pair = Pair::new(client, psk13_server());
    check_counted(pair, 2);
}

#[test]
fn a_hybrid_hello_at_a_small_mtu_is_counted_whole() {
    let client = ClientConfig { groups: vec![NamedGroup::X25519MlKem768], mtu: 300, ..psk13_client() };
    let pair = Pair::new(client, ServerConfig { mtu: 300, ..psk13_server() });
    check_counted(pair, 5);
}

#[test]
fn a_dtls_1_2_hello_at_the_smallest_mtu_is_counted_whole() {
    let client = ClientConfig { mtu: MIN_MTU, ..client_config() };
    let pair = Pair::new(client, ServerConfig { mtu: MIN_MTU, ..server_config() });
    check_counted(pair, 2);
}

/// Every datagram arrives twice: the copies of the hello's fragments count as the copies of
/// later datagrams do (every datagram passed in), none twice.
#[test]
fn duplicated_fragments_count_as_duplicated_datagrams_do() {
    for (client, server, min_hello) in [
        (ClientConfig { groups: vec![NamedGroup::X25519MlKem768], ..psk13_client() }, psk13_server(), 2),
        (
            ClientConfig { mtu: MIN_MTU, ..client_config() },
            ServerConfig { mtu: MIN_MTU, ..server_config() },
            2,
        ),
    ] {
        let version = client.versions;
        let mut pair = Pair::new(client, server);
        pair.filter = Box::new(|_| Fate::Duplicate);
        pair.handshake(MINUTE).expect("connected");
        assert!(pair.take_in_flight().iter().all(|d| d.dir == Dir::ToClient), "all the client sent arrived");
        let (datagrams, bytes, hello) = after_cookie_exchange(&pair);
        assert!(hello >= min_hello, "{version:?}: the second ClientHello came in {hello} datagrams");
        let stats = pair.server.connection(pair.server_handle()).expect("the session").stats();
        assert_eq!((stats.datagrams_received, stats.bytes_received), (datagrams, bytes), "{version:?}");
    }
}

/// A datagram carrying several fragments of the hello (one record each) counts once.
#[test]
fn a_datagram_with_several_fragments_counts_once() {
    let client = ClientConfig { groups: vec![NamedGroup::X25519MlKem768], mtu: 300, ..psk13_client() };
    let mut pair = Pair::new(client, ServerConfig { mtu: 300, ..psk13_server() });
    let limit = pair.now + MINUTE;
    while pair.sent(Dir::ToServer) < 2 {
        assert!(pair.step(limit), "the client answers the HelloRetryRequest");
    }
    let hello = pair.take_in_flight();
    assert!(hello.len() >= 5 && hello.iter().all(|d| d.dir == Dir::ToServer), "the second ClientHello");
    let (last, rest) = hello.split_last().unwrap();
    let merged: Vec<u8> = rest.iter().flat_map(|d| d.payload.iter().copied()).collect();
    let hello_bytes = (merged.len() + last.payload.len()) as u64;
    let (src, dst) = (last.src, last.dst);
    pair.inject(src, dst, merged);
    pair.inject(src, dst, last.payload.clone());
    let answered = pair.log.len();
    let (_, s) = pair.handshake(MINUTE).expect("connected");
    let after: Vec<&Datagram> = pair.log[answered..].iter().filter(|d| d.dir == Dir::ToServer).collect();
    let bytes: u64 = after.iter().map(|d| d.payload.len() as u64).sum();
    assert_eq!((s.datagrams_received, s.bytes_received), (2 + after.len() as u64, hello_bytes + bytes));
}
