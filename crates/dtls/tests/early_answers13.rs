//! DTLS 1.3 0-RTT seen from the server: the answers to early data and to the records after the
//! handshake reach the client in the order the server sent them, when the server answers
//! records as a worker does (opened in place, answered by `seal_into` where it can, by `send`
//! where it cannot, the sealed answers sent before the engine's queue); and the server's
//! summary says whether it took the early data the client offered.

use fastshake_dtls::{
    AddressValidation, ClientConfig, ClientSession, ConnectionHandle, Endpoint, Event, HandshakeSummary,
    Instant, ServerConfig, TicketKeys, TrustAnchors, Versions, WallClock,
};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use fastshake_testkit::dtls::*;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const PKI_TIME: u64 = 1_800_000_000;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_TIME + 60 });

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| generate(1, KeyKind::P256, &[], PKI_TIME, 2).unwrap())
}

fn early_client() -> ClientConfig {
    ClientConfig {
        versions: Versions::Dtls13,
        trust_anchors: Some(Arc::new(TrustAnchors::from_pem(pki().ca_pem().as_bytes()).unwrap())),
        server_name: Some("localhost".into()),
        wall_clock: CLOCK,
        early_data: true,
        ..Default::default()
    }
}

/// A server issuing tickets under `keys`; it takes early data when `max_early_data` is not 0.
fn server(keys: TicketKeys, max_early_data: u32) -> ServerConfig {
    ServerConfig {
        versions: Versions::Dtls13,
        certified_key: Some(Arc::new(pki().server_certified_key().unwrap())),
        tickets: Some(keys),
        wall_clock: CLOCK,
        max_early_data,
        ..Default::default()
    }
}

fn keys() -> TicketKeys {
    TicketKeys::new(1, [7; 16])
}

/// A full handshake, then the ticket that follows it.
fn ticket(pair: &mut Pair) -> ClientSession {
    pair.handshake(MINUTE).expect("full handshake");
    pair.run_for(Duration::from_secs(5));
    let tickets: Vec<ClientSession> = pair
        .client_events
        .iter()
        .filter_map(|e| match e {
            Event::SessionTicket(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(tickets.len(), 1, "one NewSessionTicket");
    tickets[0].clone()
}

/// A new client on a fresh port (same IP) offering `session`, events cleared.
fn reconnect(pair: &mut Pair, config: ClientConfig, session: ClientSession, seed: u8) {
    let port = pair.client_addr.port() + 1;
    pair.client_addr.set_port(port);
    pair.resume_client(config, Some(session), seed);
    pair.server_events.clear();
}

/// What the server answers to `record`.
fn answer(record: &[u8]) -> Vec<u8> {
    [b"answer to ", record].concat()
}

/// One batch of datagrams at a server worker: each opened in place and its records answered,
/// then the answers sealed straight into datagrams where the engine allows it (queued by
/// `send` where not), and sent ahead of the engine's own queue, as the worker's flush does.
fn worker_batch(
    server: &mut Endpoint,
    now: Instant,
    (local, remote): (SocketAddr, SocketAddr),
    batch: Vec<Vec<u8>>,
    events: &mut Vec<Event>,
) -> Vec<Vec<u8>> {
    let mut replies: Vec<(ConnectionHandle, Vec<u8>)> = Vec::new();
    for mut datagram in batch {
        let incoming = server.incoming(&mut datagram);
        server
            .open_in_place(now, local, remote, incoming, &mut |h, record| replies.push((h, answer(record))));
    }
    events.extend(std::iter::from_fn(|| server.poll_event()).map(|(_, e)| e));
    let mut out = Vec::new();
    let mut buf = [0u8; 1500];
    for (h, data) in replies {
        match server.seal_into(h, &data, &mut buf) {
            Ok(len) => out.push(buf[..len].to_vec()),
            Err(_) => server.send(h, &data).expect("queued"),
        }
    }
    out.extend(std::iter::from_fn(|| server.poll_transmit(now)).map(|t| t.payload));
    out
}

/// The client's datagrams so far.
fn client_datagrams(pair: &mut Pair) -> Vec<Vec<u8>> {
    let now = pair.now;
    std::iter::from_fn(|| pair.client.poll_transmit(now)).map(|t| t.payload).collect()
}

/// The client takes `datagrams` in order; returns its events.
fn to_client(pair: &mut Pair, datagrams: Vec<Vec<u8>>) -> Vec<Event> {
    let (now, server) = (pair.now, pair.server_addr);
    for mut d in datagrams {
        pair.client.handle_datagram(now, server, &mut d);
    }
    std::iter::from_fn(|| pair.client.poll_event()).collect()
}

fn data(events: &[Event]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ApplicationData(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

fn connected(events: &[Event]) -> Option<HandshakeSummary> {
    events.iter().find_map(|e| match e {
        Event::Connected(s) => Some(s.clone()),
        _ => None,
    })
}

#[test]
fn the_answer_to_early_data_reaches_the_client_before_the_answer_to_a_later_record() {
    let mut pair = Pair::new(early_client(), server(keys(), 4096));
    let session = ticket(&mut pair);
    reconnect(&mut pair, early_client(), session, 2);
    let path = (pair.server_addr, pair.client_addr);
    assert_eq!(pair.client.send_early_data(b"early"), Ok(true), "sent as 0-RTT");
    // The ClientHello and the early record arrive in one batch: the answer to the early record
    // waits for the client's Finished (the session is not up yet).
    let hello = client_datagrams(&mut pair);
    assert_eq!(hello.len(), 2, "the ClientHello, then the early record");
    let mut server_events = Vec::new();
    let flight = worker_batch(&mut pair.server, pair.now, path, hello, &mut server_events);
    assert_eq!(data(&server_events), Vec::<Vec<u8>>::new(), "the record went to the handler");
    let client_events = to_client(&mut pair, flight);
    let summary = connected(&client_events).expect("the client's side is done");
    assert_eq!(summary.early_data, Some(true), "the server took the early data");
    // The client sends a record right after its Finished; both arrive in one batch.
    pair.client.send(b"later").expect("established");
    let finished = client_datagrams(&mut pair);
    let answers = worker_batch(&mut pair.server, pair.now, path, finished, &mut server_events);
    let summary = connected(&server_events).expect("the server's side is done");
    assert_eq!(summary.early_data, Some(true));
    let got = data(&to_client(&mut pair, answers));
    assert_eq!(got, vec![answer(b"early"), answer(b"later")], "in the order the server sent them, once each");
}

#[test]
fn a_server_records_the_early_data_it_took_and_the_early_data_it_refused() {
    // Taken.
    let mut pair = Pair::new(early_client(), server(keys(), 4096));
    let session = ticket(&mut pair);
    reconnect(&mut pair, early_client(), session.clone(), 2);
    assert_eq!(pair.client.send_early_data(b"early"), Ok(true));
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(c.resumed && s.resumed);
    assert_eq!((c.early_data, s.early_data), (Some(true), Some(true)));

    // Refused by a server of the same ticket keys that takes no early data, answering the
    // first ClientHello (its transport proved the address): it resumes the session all the
    // same, and the client sends the data again after the handshake.
    let refusing = ServerConfig { address_validation: AddressValidation::Transport, ..server(keys(), 0) };
    pair.server = Endpoint::new(Arc::new(refusing), [9; 32]).expect("a valid configuration");
    reconnect(&mut pair, early_client(), session.clone(), 3);
    assert_eq!(pair.client.send_early_data(b"early"), Ok(true));
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(c.resumed && s.resumed && !c.hello_retry);
    assert_eq!((c.early_data, s.early_data), (Some(false), Some(false)), "refused, and both sides say so");
    pair.run_for(Duration::from_secs(1));
    assert_eq!(pair.server_data(), vec![b"early".to_vec()], "after the handshake, once");

    // Refused by the cookie exchange of a server that takes no early data: the second
    // ClientHello drops the offer (RFC 8446 §4.1.2), the cookie remembers it.
    pair.server = Endpoint::new(Arc::new(server(keys(), 0)), [10; 32]).expect("a valid configuration");
    reconnect(&mut pair, early_client(), session.clone(), 4);
    assert_eq!(pair.client.send_early_data(b"early"), Ok(true));
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(c.resumed && s.resumed && c.hello_retry && s.hello_retry);
    assert_eq!((c.early_data, s.early_data), (Some(false), Some(false)), "refused, and both sides say so");

    // Refused by a server whose keys cannot open the ticket: a full handshake.
    let other = TicketKeys::new(2, [8; 16]);
    pair.server = Endpoint::new(Arc::new(server(other, 4096)), [11; 32]).expect("a valid configuration");
    reconnect(&mut pair, early_client(), session, 5);
    assert_eq!(pair.client.send_early_data(b"early"), Ok(true));
    let (c, s) = pair.handshake(MINUTE).expect("full handshake");
    assert!(!c.resumed && !s.resumed);
    assert_eq!((c.early_data, s.early_data), (Some(false), Some(false)), "refused, and both sides say so");

    // Nothing offered: nothing to say.
    let quiet = || ClientConfig { early_data: false, ..early_client() };
    let mut pair = Pair::new(quiet(), server(keys(), 4096));
    let session = ticket(&mut pair);
    reconnect(&mut pair, quiet(), session, 2);
    let (c, s) = pair.handshake(MINUTE).expect("resumed handshake");
    assert!(c.resumed && s.resumed);
    assert_eq!((c.early_data, s.early_data), (None, None));
}

#[test]
fn a_server_holds_many_answers_to_early_data_and_refuses_beyond_its_bound() {
    let mut pair = Pair::new(early_client(), server(keys(), 4096));
    let session = ticket(&mut pair);
    reconnect(&mut pair, early_client(), session, 2);
    let path = (pair.server_addr, pair.client_addr);
    assert_eq!(pair.client.send_early_data(b"early"), Ok(true));
    let hello = client_datagrams(&mut pair);
    let mut server_events = Vec::new();
    let mut replies: Vec<(ConnectionHandle, Vec<u8>)> = Vec::new();
    for mut datagram in hello {
        let incoming = pair.server.incoming(&mut datagram);
        pair.server.open_in_place(pair.now, path.0, path.1, incoming, &mut |h, record| {
            replies.push((h, record.to_vec()));
        });
    }
    server_events.extend(std::iter::from_fn(|| pair.server.poll_event()).map(|(_, e)| e));
    let (h, _) = replies.first().cloned().expect("the early record reached the handler");
    // Answers while the client's Finished is still to come: held, up to the bound.
    let mut held = 0;
    while pair.server.send(h, format!("answer {held}").as_bytes()).is_ok() {
        held += 1;
        assert!(held <= 64, "held without bound");
    }
    assert_eq!(held, 64, "as many as the bound holds (far more than one record each way)");
    let flight: Vec<Vec<u8>> =
        std::iter::from_fn(|| pair.server.poll_transmit(pair.now)).map(|t| t.payload).collect();
    to_client(&mut pair, flight);
    let finished = client_datagrams(&mut pair);
    let answers = worker_batch(&mut pair.server, pair.now, path, finished, &mut server_events);
    pair.run_for(Duration::from_secs(1));
    let mut got = data(&to_client(&mut pair, answers));
    got.extend(pair.client_data());
    let want: Vec<Vec<u8>> = (0..64).map(|n| format!("answer {n}").into_bytes()).collect();
    assert_eq!(got, want, "every held answer, in order, once");
}
