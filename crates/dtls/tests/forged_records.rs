//! Records that fail authentication during a handshake are dropped silently (RFC 6347
//! §4.1.2.7): forged datagrams from a stranger who knows the 4-tuple do not end a handshake,
//! while a wrong PSK still gets its clear decrypt_error.

use fastshake_dtls::{Event, Instant};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{self, Datagram, Dir};
use std::time::Duration;

/// The records of a datagram, each with its header.
fn records(datagram: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 13 <= datagram.len() {
        let len = u16::from_be_bytes([datagram[pos + 11], datagram[pos + 12]]) as usize;
        out.push(datagram[pos..pos + 13 + len].to_vec());
        pos += 13 + len;
    }
    out
}

fn epoch(record: &[u8]) -> u16 {
    u16::from_be_bytes([record[3], record[4]])
}

/// A datagram a stranger forges: a ChangeCipherSpec, then `n` epoch-1 handshake records of
/// random-looking bytes, shaped like a Finished (and some larger), sequence numbers from `seq`.
fn forged(n: usize, seq: u64) -> Vec<u8> {
    let mut d = vec![20, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 50, 0, 1, 1];
    for i in 0..n {
        let len = if i % 2 == 0 { 40 } else { 120 };
        d.extend_from_slice(&[22, 0xfe, 0xfd, 0, 1]);
        d.extend_from_slice(&(seq + i as u64).to_be_bytes()[2..]);
        d.extend_from_slice(&(len as u16).to_be_bytes());
        d.extend((0..len).map(|b| (b as u8).wrapping_mul(31).wrapping_add(i as u8)));
    }
    d
}

/// A pair whose network loses the `index`-th datagram (and every later one) in `dir`: the test
/// hands those over itself.
fn holding(dir: Dir, index: usize) -> Pair {
    let mut pair = Pair::new(client_config(), server_config());
    pair.filter = net::drop_if(move |d| d.dir == dir && d.index >= index);
    pair
}

fn held(pair: &Pair, dir: Dir, index: usize) -> Vec<Datagram> {
    pair.log.iter().filter(|d| d.dir == dir && d.index >= index).cloned().collect()
}

/// The client's flight 5 (its third datagram on), run up to and held.
fn flight_five(pair: &mut Pair) -> Vec<Datagram> {
    pair.run_for(Duration::from_millis(100));
    let flight = held(pair, Dir::ToServer, 2);
    assert!(!flight.is_empty(), "the client sent flight 5");
    flight
}

fn server_events_since(pair: &Pair, mark: usize) -> Vec<&Event> {
    pair.server_events[mark..].iter().map(|(_, e)| e).collect()
}

#[test]
fn forged_records_before_the_clients_finished_do_not_end_the_handshake() {
    let mut pair = holding(Dir::ToServer, 2);
    let flight5: Vec<Vec<u8>> = flight_five(&mut pair).iter().flat_map(|d| records(&d.payload)).collect();
    let (plain, protected): (Vec<_>, Vec<_>) = flight5.into_iter().partition(|r| epoch(r) == 0);
    assert!(!protected.is_empty(), "the Finished is protected");
    let (ca, sa) = (pair.client_addr, pair.server_addr);
    // A forged datagram before the ClientKeyExchange (nothing can open it yet) ...
    let mark = pair.server_events.len();
    pair.inject(ca, sa, forged(3, 0));
    pair.inject(ca, sa, plain.concat());
    // ... and a burst of them while the server waits for the Finished.
    for k in 0..20 {
        pair.now += Duration::from_millis(10);
        pair.inject(ca, sa, forged(4, 100 + 10 * k));
    }
    let events = server_events_since(&pair, mark);
    assert!(!events.iter().any(|e| matches!(e, Event::Failed(_))), "{events:?}");
    // The real Finished still completes the handshake.
    let mark = pair.server_events.len();
    pair.inject(ca, sa, protected.concat());
    let events = server_events_since(&pair, mark);
    assert!(events.iter().any(|e| matches!(e, Event::Connected(_))), "{events:?}");
    pair.run_for(Duration::from_millis(100));
    assert!(pair.client.is_established());
}

#[test]
fn forged_records_before_the_servers_finished_do_not_end_the_handshake() {
    // The server's flight 6 (its third datagram) is held.
    let mut pair = holding(Dir::ToClient, 2);
    pair.run_for(Duration::from_millis(100));
    let flight6 = held(&pair, Dir::ToClient, 2);
    assert!(!flight6.is_empty(), "the server sent flight 6");
    // The client has sent its Finished and waits for the server's: forgeries come first.
    let (ca, sa) = (pair.client_addr, pair.server_addr);
    for k in 0..20 {
        pair.now += Duration::from_millis(10);
        pair.inject(sa, ca, forged(4, 200 + 10 * k));
    }
    assert!(!pair.client.is_closed(), "{:?}", pair.client_events);
    let mark = pair.client_events.len();
    for d in flight6 {
        pair.inject(sa, ca, d.payload);
    }
    assert!(pair.client.is_established());
    assert!(matches!(pair.client_events.get(mark), Some(Event::Connected(_))), "{:?}", pair.client_events);
}

/// With a wrong PSK the client's Finished never authenticates: once the client has resent its
/// flight and it fails again, the server ends the handshake with decrypt_error (RFC 4279 §2),
/// a clear error instead of a timeout.
#[test]
fn a_wrong_psk_still_fails_with_decrypt_error_after_the_clients_retransmission() {
    let mut cc = client_config();
    cc.psk = Some(fastshake_dtls::Psk::new(PSK_ID, b"not the key".to_vec()));
    let mut pair = Pair::new(cc, server_config());
    assert!(pair.handshake(Duration::from_secs(60)).is_none());
    assert_eq!(pair.server_failure(), Some(psk_mismatch(true)));
    assert_eq!(pair.client_failure(), Some(psk_mismatch(false)));
    // Within a few retransmission periods, not at the handshake timeout.
    assert!(pair.now < Instant::from_millis(1_000) + Duration::from_secs(10), "{:?}", pair.now);
}
