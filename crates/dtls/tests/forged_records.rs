//! Records that fail authentication during a handshake are dropped silently (RFC 6347
//! §4.1.2.7): forged datagrams from a stranger who knows the 4-tuple do not end a handshake,
//! while a wrong PSK still gets its clear decrypt_error.

mod common;

use common::*;
use fastshake_dtls::{AlertDescription, Connection, Endpoint, Error, Event, Instant};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const SERVER: &str = "198.51.100.1:5684";
const CLIENT: &str = "192.0.2.1:40000";

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

struct Handshake {
    now: Instant,
    client: Connection,
    server: Endpoint,
    sa: SocketAddr,
    ca: SocketAddr,
}

impl Handshake {
    fn new() -> Handshake {
        let now = Instant::from_millis(1_000);
        let sa: SocketAddr = SERVER.parse().unwrap();
        Handshake {
            now,
            client: Connection::client(Arc::new(client_config()), now, sa, [1; 32]),
            server: Endpoint::new(Arc::new(server_config()), [2; 32]),
            sa,
            ca: CLIENT.parse().unwrap(),
        }
    }

    fn deliver_to_server(&mut self, d: &[u8]) {
        self.server.handle_datagram(self.now, self.sa, self.ca, &mut d.to_vec());
    }

    fn deliver_to_client(&mut self, d: &[u8]) {
        self.client.handle_datagram(self.now, self.sa, &mut d.to_vec());
    }

    fn client_output(&mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.client.poll_transmit(self.now)).map(|t| t.payload).collect()
    }

    fn server_output(&mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.server.poll_transmit(self.now)).map(|t| t.payload).collect()
    }

    /// Runs the handshake up to the client's flight 5, which is returned unsent.
    fn run_to_flight_five(&mut self) -> Vec<Vec<u8>> {
        for d in self.client_output() {
            self.deliver_to_server(&d);
        }
        for d in self.server_output() {
            self.deliver_to_client(&d); // HelloVerifyRequest
        }
        for d in self.client_output() {
            self.deliver_to_server(&d); // ClientHello with the cookie
        }
        for d in self.server_output() {
            self.deliver_to_client(&d); // flight 4
        }
        self.client_output()
    }

    fn server_events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.server.poll_event()).map(|(_, e)| e).collect()
    }
}

#[test]
fn forged_records_before_the_clients_finished_do_not_end_the_handshake() {
    let mut hs = Handshake::new();
    let flight5: Vec<Vec<u8>> = hs.run_to_flight_five().iter().flat_map(|d| records(d)).collect();
    let (plain, protected): (Vec<_>, Vec<_>) = flight5.into_iter().partition(|r| epoch(r) == 0);
    assert!(!protected.is_empty(), "the Finished is protected");
    // A forged datagram before the ClientKeyExchange (nothing can open it yet) ...
    hs.deliver_to_server(&forged(3, 0));
    hs.deliver_to_server(&plain.concat());
    // ... and a burst of them while the server waits for the Finished.
    for k in 0..20 {
        hs.now += Duration::from_millis(10);
        hs.deliver_to_server(&forged(4, 100 + 10 * k));
    }
    let events = hs.server_events();
    assert!(!events.iter().any(|e| matches!(e, Event::Failed(_))), "{events:?}");
    // The real Finished still completes the handshake.
    hs.deliver_to_server(&protected.concat());
    let events = hs.server_events();
    assert!(events.iter().any(|e| matches!(e, Event::Connected(_))), "{events:?}");
    for d in hs.server_output() {
        hs.deliver_to_client(&d);
    }
    assert!(hs.client.is_established());
}

#[test]
fn forged_records_before_the_servers_finished_do_not_end_the_handshake() {
    let mut hs = Handshake::new();
    for d in hs.run_to_flight_five() {
        hs.deliver_to_server(&d);
    }
    let flight6 = hs.server_output();
    // The client has sent its Finished and waits for the server's: forgeries come first.
    for k in 0..20 {
        hs.now += Duration::from_millis(10);
        hs.deliver_to_client(&forged(4, 200 + 10 * k));
    }
    assert!(!hs.client.is_closed(), "{:?}", hs.client.poll_event());
    for d in flight6 {
        hs.deliver_to_client(&d);
    }
    assert!(hs.client.is_established());
    assert!(matches!(hs.client.poll_event(), Some(Event::Connected(_))));
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
    assert_eq!(pair.server_failure(), Some(Error::AlertSent(AlertDescription::DecryptError)));
    assert_eq!(pair.client_failure(), Some(Error::AlertReceived(AlertDescription::DecryptError)));
    // Within a few retransmission periods, not at the handshake timeout.
    assert!(pair.now < Instant::from_millis(1_000) + Duration::from_secs(10), "{:?}", pair.now);
}
