//! How a client session ends when the server goes away, or when the mobility it offered was not
//! agreed, on loopback in one process: a reconnection refused by a vanished server fails the
//! session and counts what went unanswered; a close during a reconnection says what it leaves
//! behind; a session whose server declined the mobility offered reconnects after a move as a
//! standard one does, and one that agreed it never reconnects on silence.

mod common;

use common::{expect_echo, loopback};
use fastshake_dtls::{ClientConfig, ServerConfig, Versions};
use fastshake_net::dtls::{
    ClientEvent, ClientOptions, DriverError, DtlsClient, DtlsServer, MobilityMode, ServerEvent, ServerOptions,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const KEY: [u8; 16] = [5; 16];

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

/// Short, so a reconnection starts soon after a record goes unanswered.
const APP_TIMEOUT: Duration = Duration::from_millis(100);

/// DTLS 1.2's handshake content type: a ClientHello's record starts with it.
const HANDSHAKE: u8 = 22;

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

/// An echo server in `mode`; each record received is also handed to the returned channel.
async fn echo_server(mode: MobilityMode, echo: bool) -> (SocketAddr, mpsc::UnboundedReceiver<Vec<u8>>) {
    let config = Arc::new(ServerConfig {
        versions: Versions::Dtls12,
        mobility: mode.server_mobility(),
        ..ServerConfig::psk("id", KEY)
    });
    let options = ServerOptions { mobility: mode, ..ServerOptions::default() };
    let mut server = DtlsServer::bind(loopback(), config, options).await.expect("bind the server");
    let addr = server.local_addr();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(event) = server.next_event().await {
            if let ServerEvent::Data { handle, data, .. } = event {
                let _ = seen_tx.send(data.clone());
                if echo {
                    let _ = server.send(handle, data);
                }
            }
        }
    });
    (addr, seen)
}

fn client_config(mode: MobilityMode) -> Arc<ClientConfig> {
    Arc::new(ClientConfig {
        versions: Versions::Dtls12,
        mobility: mode.client_mobility(),
        initial_retransmit: Duration::from_millis(20),
        max_retransmit: Duration::from_millis(40),
        ..ClientConfig::psk("id", KEY)
    })
}

fn reconnecting_options() -> ClientOptions {
    ClientOptions { app_timeout: Some(APP_TIMEOUT), ..ClientOptions::default() }
}

/// A UDP relay between the client and the server: it forwards, goes silent (drops everything,
/// counting what the client sent), or is stopped (its port closed: nothing listens there).
struct Relay {
    addr: SocketAddr,
    silent: Arc<AtomicBool>,
    /// Handshake records from the client dropped while silent.
    dropped_handshakes: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(server: SocketAddr) -> Relay {
        let facing_client = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
        let facing_server = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
        let addr = facing_client.local_addr().unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let dropped_handshakes = Arc::new(AtomicUsize::new(0));
        let (is_silent, dropped) = (Arc::clone(&silent), Arc::clone(&dropped_handshakes));
        let task = tokio::spawn(async move {
            let mut client = None;
            let (mut up, mut down) = (vec![0u8; 65_536], vec![0u8; 65_536]);
            loop {
                tokio::select! {
                    Ok((len, from)) = facing_client.recv_from(&mut up) => {
                        client = Some(from);
                        if !is_silent.load(SeqCst) {
                            let _ = facing_server.send_to(&up[..len], server).await;
                        } else if up[0] == HANDSHAKE {
                            dropped.fetch_add(1, SeqCst);
                        }
                    }
                    Ok(len) = facing_server.recv(&mut down) => {
                        if let (Some(to), false) = (client, is_silent.load(SeqCst)) {
                            let _ = facing_client.send_to(&down[..len], to).await;
                        }
                    }
                }
            }
        });
        Relay { addr, silent, dropped_handshakes, task }
    }

    fn go_silent(&self) {
        self.silent.store(true, SeqCst);
    }

    /// Closes the relay's sockets: what the client sends then is refused (ICMP port unreachable).
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

async fn next_event(client: &mut DtlsClient, what: &str) -> Option<ClientEvent> {
    step(what, client.recv()).await
}

#[tokio::test]
async fn a_reconnection_refused_by_a_vanished_server_fails_the_session_and_counts_the_unanswered() {
    let (server, _seen) = echo_server(MobilityMode::Standard, true).await;
    let relay = Relay::start(server).await;
    let gone = relay.addr;
    let config = client_config(MobilityMode::Standard);
    let mut client =
        step("handshake", DtlsClient::connect(gone, config, reconnecting_options())).await.unwrap();
    client.send(b"answered".to_vec()).unwrap();
    expect_echo(&mut client, b"answered", STEP, false).await;

    relay.stop().await;
    client.send(b"one".to_vec()).unwrap();
    client.send(b"two".to_vec()).unwrap();
    let failure = match next_event(&mut client, "the failed reconnection").await {
        Some(ClientEvent::Failed(error)) => error,
        other => panic!("expected the session to fail, got {other:?}"),
    };
    match &failure {
        DriverError::ReconnectFailed { cause, unanswered, silent_for } => {
            assert_eq!(*unanswered, 2, "{failure}");
            assert_eq!(*silent_for, Some(APP_TIMEOUT), "{failure}");
            match &**cause {
                DriverError::Refused { refusal, in_a_row, .. } => {
                    assert_eq!(refusal.destination, gone, "{failure}");
                    assert_eq!(*in_a_row, fastshake_net::icmp::REFUSALS_TO_GIVE_UP, "{failure}");
                }
                other => panic!("expected the refusals to end the reconnection, got {other}"),
            }
        }
        other => panic!("expected a failed reconnection, got {other}"),
    }
    let text = failure.to_string();
    for part in [
        "the server stopped answering (nothing for 100 ms after records were sent): reconnecting failed: ",
        &format!("nothing listens at {gone}: ICMP port unreachable, 3 times in a row"),
        "; 2 record(s) sent since the server last answered were never answered",
    ] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    // Every later call says the same.
    let later = client.send(b"three".to_vec()).expect_err("the session has failed");
    assert_eq!(later.to_string(), text);
    assert!(next_event(&mut client, "the end of the events").await.is_none());
    let closed = step("close", client.close()).await.expect_err("the session has failed");
    assert_eq!(closed.to_string(), text);
}

#[tokio::test]
async fn a_close_during_a_reconnection_says_what_went_unanswered() {
    let (server, _seen) = echo_server(MobilityMode::Standard, true).await;
    let relay = Relay::start(server).await;
    let config = client_config(MobilityMode::Standard);
    let mut client =
        step("handshake", DtlsClient::connect(relay.addr, config, reconnecting_options())).await.unwrap();
    client.send(b"answered".to_vec()).unwrap();
    expect_echo(&mut client, b"answered", STEP, false).await;

    relay.go_silent();
    client.send(b"lost".to_vec()).unwrap();
    // The reconnection's ClientHello reached the silent relay: the handshake is under way.
    step("a reconnection's ClientHello", async {
        while relay.dropped_handshakes.load(SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let error = step("close", client.close()).await.expect_err("records went unanswered");
    match &error {
        DriverError::ClosedReconnecting { unanswered, flights, silent_for, .. } => {
            assert_eq!(*unanswered, 1, "{error}");
            assert!(*flights >= 1, "{error}");
            assert_eq!(*silent_for, Some(APP_TIMEOUT), "{error}");
        }
        other => panic!("expected a close during the reconnection, got {other}"),
    }
    let text = error.to_string();
    assert!(text.starts_with("closed while reconnecting: the server stopped answering"), "{text}");
    assert!(text.ends_with("1 record(s) sent since the server last answered were never answered"), "{text}");
}

#[tokio::test]
async fn records_sent_during_an_asked_for_reconnection_are_sent_on_the_new_session() {
    // No app timeout: nothing is kept for a resend, but a record handed over while the new
    // session's handshake runs must still reach the server.
    let (server, _seen) = echo_server(MobilityMode::Standard, true).await;
    let config = client_config(MobilityMode::Standard);
    let mut client =
        step("handshake", DtlsClient::connect(server, config, ClientOptions::default())).await.unwrap();
    client.reconnect(true).unwrap();
    client.send(b"during the reconnection".to_vec()).unwrap();
    match next_event(&mut client, "the reconnection").await {
        Some(ClientEvent::Reconnected(_)) => {}
        other => panic!("expected the reconnection, got {other:?}"),
    }
    expect_echo(&mut client, b"during the reconnection", STEP, false).await;
    step("close", client.close()).await.unwrap();
}

#[tokio::test]
async fn a_client_whose_server_declined_port_move_reconnects_after_a_move() {
    let (server, _seen) = echo_server(MobilityMode::Standard, true).await;
    let config = client_config(MobilityMode::Ipc);
    let mut client =
        step("handshake", DtlsClient::connect(server, config, reconnecting_options())).await.unwrap();
    assert!(!client.summary().mobility.port_move, "a standard server agrees to nothing");
    client.send(b"before".to_vec()).unwrap();
    expect_echo(&mut client, b"before", STEP, false).await;
    step("rebind", client.rebind(loopback())).await.unwrap();
    // The server does not know the new address: only a new session carries the record.
    client.send(b"after".to_vec()).unwrap();
    match next_event(&mut client, "the reconnection").await {
        Some(ClientEvent::Reconnected(_)) => {}
        other => panic!("expected a reconnection after the app timeout, got {other:?}"),
    }
    expect_echo(&mut client, b"after", STEP, false).await;
    assert_eq!(client.reconnections(), 1);
    step("close", client.close()).await.unwrap();
}

#[tokio::test]
async fn a_session_that_agreed_port_move_never_reconnects_on_silence() {
    // The server answers nothing: an app timeout that applied would replace the session.
    let (server, mut seen) = echo_server(MobilityMode::Ipc, false).await;
    let config = client_config(MobilityMode::Ipc);
    let options = ClientOptions { app_timeout: Some(Duration::from_millis(5)), ..ClientOptions::default() };
    let mut client = step("handshake", DtlsClient::connect(server, config, options)).await.unwrap();
    assert!(client.summary().mobility.port_move, "an ipc server agrees to port_move");
    client.send(b"unanswered".to_vec()).unwrap();
    assert_eq!(step("the record at the server", seen.recv()).await.as_deref(), Some(&b"unanswered"[..]));
    // Many app timeouts long: time enough for a reconnection that was going to happen. Only the
    // move to the session's own port (during the handshake) may be told.
    let watch = async {
        loop {
            match client.recv().await {
                Some(ClientEvent::PathChanged(_)) => {}
                other => return other,
            }
        }
    };
    let quiet = tokio::time::timeout(Duration::from_millis(200), watch).await;
    assert!(quiet.is_err(), "nothing happens to a session that survives moves: {quiet:?}");
    assert_eq!(client.reconnections(), 0);
    step("close", client.close()).await.unwrap();
}
