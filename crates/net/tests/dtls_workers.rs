//! A DTLS server on several workers (one SO_REUSEPORT socket and one endpoint each), with batched
//! and single-datagram I/O, on loopback: many clients at once all complete and echo, a CID
//! client whose datagrams start arriving at another worker keeps its session, a session one
//! worker made resumes at another, by session ID and by a ticket from before a key rotation, and
//! the workers' cookie keys change on the server's schedule.

mod common;

use common::loopback;
use fastshake_dtls::Versions;
use fastshake_dtls::{ClientConfig, Resumption, ServerConfig};
use fastshake_net::dtls::{
    os_ticket_keys, ClientOptions, DtlsClient, DtlsServer, MobilityMode, ServerController, ServerEvent,
    ServerOptions,
};
use fastshake_net::udp::BatchIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const KEY: [u8; 16] = [0x5a; 16];

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(20);

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

/// What the echo server saw, in order.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Connected,
    Data(Vec<u8>),
    Moved,
}

/// An echo server with `workers` workers in `mode`; what it sees goes to the returned channel.
async fn echo_server(
    mode: MobilityMode,
    workers: usize,
    batch: BatchIo,
) -> (SocketAddr, ServerController, mpsc::UnboundedReceiver<Seen>, tokio::task::JoinHandle<DtlsServer>) {
    let config = Arc::new(ServerConfig {
        versions: Versions::Dtls12,
        mobility: mode.server_mobility(),
        ..ServerConfig::psk("id", KEY)
    });
    let options = ServerOptions { mobility: mode, workers, batch, ..ServerOptions::default() };
    let mut server = DtlsServer::bind(loopback(), config, options).await.unwrap();
    assert_eq!(server.workers(), workers);
    let (addr, controller) = (server.local_addr(), server.controller());
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Some(event) = server.next_event().await {
            match event {
                ServerEvent::Connected { .. } => {
                    let _ = seen_tx.send(Seen::Connected);
                }
                ServerEvent::Data { handle, data, .. } => {
                    server.send(handle, data.clone()).unwrap();
                    let _ = seen_tx.send(Seen::Data(data));
                }
                ServerEvent::PathChanged { .. } => {
                    let _ = seen_tx.send(Seen::Moved);
                }
                ServerEvent::Failed { error, .. } => panic!("a session failed: {error}"),
                _ => {}
            }
            if seen_tx.is_closed() {
                break;
            }
        }
        server
    });
    (addr, controller, seen, task)
}

async fn expect_echo(client: &mut DtlsClient, message: &[u8]) {
    common::expect_echo(client, message, STEP, false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_at_once_all_complete_and_echo_on_two_workers() {
    const CLIENTS: usize = 64;
    for batch in [BatchIo::On, BatchIo::Off] {
        let (addr, controller, mut seen, _server) = echo_server(MobilityMode::Standard, 2, batch).await;
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                tokio::spawn(async move {
                    let config =
                        Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", KEY) });
                    let mut client =
                        DtlsClient::connect(addr, config, ClientOptions::default()).await.unwrap();
                    let message = format!("client {i}").into_bytes();
                    client.send(message.clone()).unwrap();
                    expect_echo(&mut client, &message).await;
                    client.close().await.unwrap();
                })
            })
            .collect();
        for client in clients {
            step("a client's handshake and echo", client).await.expect("a client task panicked");
        }
        let mut connected = 0;
        while let Ok(event) = seen.try_recv() {
            connected += usize::from(event == Seen::Connected);
        }
        assert_eq!(connected, CLIENTS, "batch {batch}");
        let stats = step("stats", controller.stats()).await.unwrap();
        println!("batch {batch}: {}", stats.summary_line());
        assert_eq!(stats.connections_accepted(), CLIENTS as u64, "{stats:?}");
        // 64 source ports over 2 sockets by the kernel's 4-tuple hash: both get some (all on
        // one has odds of 2^-63).
        assert!(stats.workers.iter().all(|w| w.endpoint.connections_accepted > 0), "{stats:?}");
        assert!(stats.workers.iter().all(|w| w.batched == (batch == BatchIo::On)), "{stats:?}");
        assert_eq!(stats.passed_on(), 0, "standard sessions stay on their 4-tuple's worker");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cid_client_that_moves_to_another_workers_socket_keeps_its_session() {
    /// Moves at most; each lands on the other worker with odds 1/2.
    const MOVES: usize = 40;
    for batch in [BatchIo::On, BatchIo::Off] {
        let (addr, controller, mut seen, _server) = echo_server(MobilityMode::Cid, 2, batch).await;
        let config = Arc::new(ClientConfig {
            versions: Versions::Dtls12,
            mobility: MobilityMode::Cid.client_mobility(),
            ..ClientConfig::psk("id", KEY)
        });
        let mut client =
            step("handshake", DtlsClient::connect(addr, config, ClientOptions::default())).await.unwrap();
        let mut sent = vec![b"before".to_vec()];
        client.send(sent[0].clone()).unwrap();
        expect_echo(&mut client, &sent[0]).await;
        let mut moves = 0;
        let mut crossed_at = None;
        while moves < MOVES && crossed_at.is_none_or(|at| moves < at + 2) {
            step("rebind", client.rebind(loopback())).await.unwrap();
            moves += 1;
            // Several records after each move, each echoed before the next.
            for r in 0..3 {
                let message = format!("after move {moves}, record {r}").into_bytes();
                client.send(message.clone()).unwrap();
                expect_echo(&mut client, &message).await;
                sent.push(message);
            }
            let stats = step("stats", controller.stats()).await.unwrap();
            if crossed_at.is_none() && stats.passed_on() > 0 {
                crossed_at = Some(moves);
            }
        }
        let stats = step("stats", controller.stats()).await.unwrap();
        println!("batch {batch}: {moves} moves: {}", stats.summary_line());
        assert!(
            stats.passed_on() > 0,
            "in {MOVES} moves the client never reached the other worker: {stats:?}"
        );
        assert_eq!(stats.connections_accepted(), 1, "no new handshake: {stats:?}");
        assert_eq!(client.reconnections(), 0);
        step("close", client.close()).await.unwrap();
        // The server saw one handshake, then every record once and in order, and each move.
        let mut data = Vec::new();
        let (mut connected, mut moved) = (0, 0);
        while let Some(event) = step("server events", seen.recv()).await {
            match event {
                Seen::Connected => connected += 1,
                Seen::Data(d) => data.push(d),
                Seen::Moved => moved += 1,
            }
            if data.len() == sent.len() && moved == moves {
                break;
            }
        }
        assert_eq!(connected, 1);
        assert_eq!(moved, moves, "one path change per move");
        assert_eq!(data, sent, "every record once, in order (batch {batch})");
    }
}

/// The worker and the resumption of the server's next completed handshake.
async fn next_handshake(server: &mut DtlsServer) -> (usize, Option<Resumption>) {
    loop {
        match step("a handshake at the server", server.next_event()).await {
            Some(ServerEvent::Connected { handle, summary, .. }) => {
                return (handle.worker(), summary.resumption)
            }
            Some(ServerEvent::Failed { error, .. }) => panic!("a session failed: {error}"),
            Some(_) => {}
            None => panic!("the server stopped"),
        }
    }
}

/// The workers share one session-ID cache and one set of ticket keys: a client offering the
/// session of its first handshake from new source ports (the kernel spreads them over both
/// workers) resumes at whichever worker it meets, by session ID, and by a ticket issued before
/// the ticket key rotated. Two rotations later the ticket is refused everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_at_another_worker_by_id_and_by_ticket_across_a_rotation() {
    /// Resumptions at most; each meets the other worker with odds 1/2.
    const ATTEMPTS: usize = 40;
    for tickets in [false, true] {
        let config = Arc::new(ServerConfig {
            versions: Versions::Dtls12,
            tickets: tickets.then(os_ticket_keys),
            ..ServerConfig::psk("id", KEY)
        });
        let options = ServerOptions { workers: 2, ..ServerOptions::default() };
        let mut server = DtlsServer::bind(loopback(), config, options).await.unwrap();
        let (addr, controller) = (server.local_addr(), server.controller());
        let client_config = Arc::new(ClientConfig {
            versions: Versions::Dtls12,
            enable_tickets: tickets,
            ..ClientConfig::psk("id", KEY)
        });
        let connect = |session| {
            let options = ClientOptions { session, ..ClientOptions::default() };
            DtlsClient::connect(addr, Arc::clone(&client_config), options)
        };
        let first = step("full handshake", connect(None)).await.unwrap();
        let (first_worker, resumption) = next_handshake(&mut server).await;
        assert_eq!(resumption, None);
        let session = first.summary().session.clone().expect("the server issued a session");
        assert_eq!(session.has_ticket(), tickets);
        step("first close", first.close()).await.unwrap();
        if tickets {
            server.rotate_ticket_key();
            // Each worker takes the new keys before the answer to this.
            step("stats", controller.stats()).await.unwrap();
        }

        let expected = if tickets { Resumption::Ticket } else { Resumption::SessionId };
        let mut elsewhere = 0;
        for _ in 0..ATTEMPTS {
            let client = step("resumed handshake", connect(Some(session.clone()))).await.unwrap();
            assert_eq!(client.summary().resumption, Some(expected), "tickets {tickets}");
            let (worker, resumption) = next_handshake(&mut server).await;
            assert_eq!(resumption, Some(expected));
            step("close", client.close()).await.unwrap();
            if worker != first_worker {
                elsewhere += 1;
                if elsewhere == 3 {
                    break;
                }
            }
        }
        let stats = step("stats", controller.stats()).await.unwrap();
        println!("tickets {tickets}: {}", stats.summary_line());
        assert!(elsewhere > 0, "in {ATTEMPTS} resumptions none met the other worker: {stats:?}");
        // The server's own counts: both workers served handshakes.
        assert!(stats.workers.iter().all(|w| w.endpoint.connections_accepted > 0), "{stats:?}");
        if !tickets {
            let hits: u64 = stats.workers.iter().map(|w| w.store_hits).sum();
            assert!(hits > 0, "the other worker found the session in the shared cache: {stats:?}");
        } else {
            // Two rotations after it was issued, the ticket's key is gone at every worker.
            server.rotate_ticket_key();
            server.rotate_ticket_key();
            step("stats", controller.stats()).await.unwrap();
            for _ in 0..4 {
                let client = step("full handshake", connect(Some(session.clone()))).await.unwrap();
                // The server refuses the ticket (the session ID it also carries may still resume
                // where it is cached; the client cannot tell the two apart).
                let (_, resumption) = next_handshake(&mut server).await;
                assert_ne!(resumption, Some(Resumption::Ticket), "a ticket two rotations old");
                step("close", client.close()).await.unwrap();
            }
        }
        step("shutdown", server.shutdown()).await.unwrap();
    }
}

/// Every worker replaces its cookie key on the server's schedule: a ClientHello that returns a
/// cookie at once is answered with the ServerHello, one that returns it after two rotations is
/// asked for a new cookie (a HelloVerifyRequest).
#[tokio::test]
async fn a_cookie_from_before_two_key_rotations_is_asked_for_again() {
    const SERVER_HELLO: u8 = 2;
    const HELLO_VERIFY_REQUEST: u8 = 3;
    // Long enough that the first ClientHello's two sends never straddle two rotations.
    let rotation = Duration::from_secs(1);
    let config = Arc::new(ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk("id", KEY) });
    let options = ServerOptions { workers: 2, cookie_rotation: rotation, ..ServerOptions::default() };
    let server = DtlsServer::bind(loopback(), config, options).await.unwrap();
    for (wait, answer) in
        [(Duration::ZERO, SERVER_HELLO), (rotation * 2 + rotation / 2, HELLO_VERIFY_REQUEST)]
    {
        let (client, with_cookie) = hello_with_cookie(server.local_addr()).await;
        tokio::time::sleep(wait).await;
        assert_eq!(answer_to(&client, &with_cookie).await, answer, "after {wait:?}");
    }
}

/// A socket and the ClientHello (from a client engine) that returns the cookie the server at
/// `server` gave it.
async fn hello_with_cookie(server: SocketAddr) -> (tokio::net::UdpSocket, Vec<u8>) {
    use fastshake_dtls::{Connection, Instant};
    let socket = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
    socket.connect(server).await.unwrap();
    let config = Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", KEY) });
    let mut client = Connection::client(config, Instant::ZERO, server, [1; 32]);
    let hello = client.poll_transmit(Instant::ZERO).expect("a ClientHello").payload;
    socket.send(&hello).await.unwrap();
    let mut verify = vec![0u8; 2048];
    let n = step("the HelloVerifyRequest", socket.recv(&mut verify)).await.unwrap();
    client.handle_datagram(Instant::ZERO, server, &mut verify[..n]);
    let with_cookie = client.poll_transmit(Instant::ZERO).expect("the ClientHello with the cookie").payload;
    (socket, with_cookie)
}

/// The type of the first handshake message the server answers `datagram` with.
async fn answer_to(socket: &tokio::net::UdpSocket, datagram: &[u8]) -> u8 {
    socket.send(datagram).await.unwrap();
    let mut answer = vec![0u8; 2048];
    let n = step("an answer", socket.recv(&mut answer)).await.unwrap();
    assert!(n > 13, "a handshake record");
    answer[13]
}
