//! The DTLS drivers with moving clients, on loopback, in one process: a client moves its socket
//! mid-session ([`DtlsClient::rebind`]) and the session goes on (IPC, TCS, CID) or is replaced
//! after the app timeout (standard DTLS).

mod common;

use common::loopback;
use fastshake_dtls::Versions;
use fastshake_dtls::{ClientConfig, ServerConfig};
use fastshake_net::dtls::{
    ClientEvent, ClientOptions, DtlsClient, DtlsServer, MobilityMode, ServerEvent, ServerOptions,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const KEY: [u8; 16] = [3; 16];

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

/// What the echo server saw.
#[derive(Debug, Default)]
struct ServerLog {
    handshakes: usize,
    path_changes: Vec<(Option<SocketAddr>, SocketAddr)>,
    own_sockets: Vec<SocketAddr>,
}

/// An echo server in `mode` that serves until its first session closes, then reports.
async fn echo_server(mode: MobilityMode) -> (SocketAddr, tokio::task::JoinHandle<ServerLog>) {
    let config = Arc::new(ServerConfig {
        versions: Versions::Dtls12,
        mobility: mode.server_mobility(),
        ..ServerConfig::psk("id", KEY)
    });
    let options = ServerOptions { mobility: mode, ..ServerOptions::default() };
    let mut server = DtlsServer::bind(loopback(), config, options).await.unwrap();
    let addr = server.local_addr();
    let task = tokio::spawn(async move {
        let mut log = ServerLog::default();
        while let Some(event) = server.next_event().await {
            match event {
                ServerEvent::Connected { .. } => log.handshakes += 1,
                ServerEvent::Data { handle, data, .. } => server.send(handle, data).unwrap(),
                ServerEvent::PathChanged { from, to, .. } => log.path_changes.push((from, to)),
                ServerEvent::OwnSocket { local, .. } => log.own_sockets.push(local),
                ServerEvent::Closed { .. } => break,
                ServerEvent::Failed { .. }
                | ServerEvent::StaysOnWelcomePort { .. }
                | ServerEvent::Evicted { .. }
                | ServerEvent::Refused { .. }
                | ServerEvent::HelloRefused { .. }
                | ServerEvent::RefusalsNotShown { .. }
                | ServerEvent::TicketKeysReloaded { .. }
                | ServerEvent::TicketKeysUnreadable { .. }
                | ServerEvent::SessionStoreUnavailable { .. } => {}
            }
        }
        step("server shutdown", server.shutdown()).await.unwrap();
        log
    });
    (addr, task)
}

async fn expect_echo(client: &mut DtlsClient, message: &[u8]) {
    common::expect_echo(client, message, STEP, true).await
}

#[tokio::test]
async fn standard_client_reconnects_after_moving_and_resends() {
    let (addr, server) = echo_server(MobilityMode::Standard).await;
    let options = ClientOptions { app_timeout: Some(Duration::from_millis(200)), ..ClientOptions::default() };
    let config = Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", KEY) });
    let mut client = step("handshake", DtlsClient::connect(addr, config, options)).await.unwrap();
    client.send(b"before".to_vec()).unwrap();
    expect_echo(&mut client, b"before").await;
    let old = client.local_addr();
    let new = step("rebind", client.rebind(loopback())).await.unwrap();
    assert_ne!(old, new);
    // The server does not know the new address: the record goes unanswered until the client
    // reconnects and resends it.
    client.send(b"after".to_vec()).unwrap();
    match step("reconnection", client.recv()).await {
        Some(ClientEvent::Reconnected(summary)) => assert!(summary.resumed, "{summary:?}"),
        other => panic!("expected a reconnection, got {other:?}"),
    }
    expect_echo(&mut client, b"after").await;
    assert_eq!(client.reconnections(), 1);
    let traffic = step("close", client.close()).await.unwrap();
    assert!(traffic.datagrams_sent >= 6, "both sessions count: {traffic:?}");
    let log = step("server end", server).await.unwrap();
    assert_eq!(log.handshakes, 2, "{log:?}");
    assert!(log.path_changes.is_empty(), "{log:?}");
}

/// A client in `mode` moves mid-session; the session goes on without a new handshake.
async fn session_survives_a_move(mode: MobilityMode, move_to: SocketAddr) {
    let (addr, server) = echo_server(mode).await;
    let config = Arc::new(ClientConfig {
        versions: Versions::Dtls12,
        mobility: mode.client_mobility(),
        ..ClientConfig::psk("id", KEY)
    });
    let mut client =
        step("handshake", DtlsClient::connect(addr, config, ClientOptions::default())).await.unwrap();
    client.send(b"before".to_vec()).unwrap();
    expect_echo(&mut client, b"before").await;
    let old = client.local_addr();
    let new = step("rebind", client.rebind(move_to)).await.unwrap();
    for i in 0..3 {
        let message = format!("after {i}").into_bytes();
        client.send(message.clone()).unwrap();
        expect_echo(&mut client, &message).await;
    }
    assert_eq!(client.reconnections(), 0);
    step("close", client.close()).await.unwrap();
    let log = step("server end", server).await.unwrap();
    assert_eq!(log.handshakes, 1, "{mode}: {log:?}");
    assert_eq!(log.path_changes, vec![(Some(old), new)], "{mode}: {log:?}");
    if mode.has_session_sockets() {
        assert_eq!(log.own_sockets.len(), 1, "{mode}: {log:?}");
        assert_ne!(log.own_sockets[0], addr, "{mode}: {log:?}");
    }
}

#[tokio::test]
async fn ipc_session_follows_a_client_to_a_new_port() {
    session_survives_a_move(MobilityMode::Ipc, loopback()).await;
}

#[tokio::test]
async fn tcs_session_follows_a_client_to_a_new_port() {
    session_survives_a_move(MobilityMode::Tcs, loopback()).await;
}

#[tokio::test]
async fn cid_session_follows_a_client_to_a_new_address() {
    session_survives_a_move(MobilityMode::Cid, SocketAddr::from(([127, 0, 0, 2], 0))).await;
}

/// A UDP relay between clients and `server` that can be cut: while cut it drops everything and
/// counts what it dropped.
struct Relay {
    addr: SocketAddr,
    cut: Arc<std::sync::atomic::AtomicBool>,
    dropped: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(server: SocketAddr) -> Relay {
        use std::sync::atomic::Ordering::Relaxed;
        let facing_clients = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
        let facing_server = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
        let addr = facing_clients.local_addr().unwrap();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (is_cut, drops) = (Arc::clone(&cut), Arc::clone(&dropped));
        let task = tokio::spawn(async move {
            let mut client = None;
            let (mut up, mut down) = (vec![0u8; 65_536], vec![0u8; 65_536]);
            loop {
                tokio::select! {
                    Ok((len, from)) = facing_clients.recv_from(&mut up) => {
                        client = Some(from);
                        if is_cut.load(Relaxed) {
                            drops.fetch_add(1, Relaxed);
                        } else {
                            let _ = facing_server.send_to(&up[..len], server).await;
                        }
                    }
                    Ok(len) = facing_server.recv(&mut down) => {
                        match client {
                            Some(to) if !is_cut.load(Relaxed) => {
                                let _ = facing_clients.send_to(&down[..len], to).await;
                            }
                            _ => {
                                drops.fetch_add(1, Relaxed);
                            }
                        }
                    }
                }
            }
        });
        Relay { addr, cut, dropped, task }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::Relaxed);
    }

    fn dropped(&self) -> usize {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn a_reconnection_that_gets_no_answer_is_started_again() {
    let (server, server_log) = echo_server(MobilityMode::Standard).await;
    let relay = Relay::start(server).await;
    let config = Arc::new(ClientConfig {
        versions: Versions::Dtls12,
        initial_retransmit: Duration::from_millis(20),
        handshake_timeout: Duration::from_millis(150),
        ..ClientConfig::psk("id", KEY)
    });
    let options = ClientOptions { app_timeout: Some(Duration::from_millis(100)), ..ClientOptions::default() };
    let mut client = step("handshake", DtlsClient::connect(relay.addr, config, options)).await.unwrap();
    client.send(b"before the cut".to_vec()).unwrap();
    expect_echo(&mut client, b"before the cut").await;
    relay.set_cut(true);
    client.send(b"across the cut".to_vec()).unwrap();
    // One reconnection attempt sends at most a few ClientHellos (20, 40, 80 ms apart within
    // 150 ms); many more dropped datagrams mean it was started again after giving up.
    let several_attempts = async {
        while relay.dropped() < 12 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    step("reconnection attempts", several_attempts).await;
    relay.set_cut(false);
    match step("reconnection", client.recv()).await {
        Some(ClientEvent::Reconnected(_)) => {}
        other => panic!("expected a reconnection once the path is back, got {other:?}"),
    }
    expect_echo(&mut client, b"across the cut").await;
    step("close", client.close()).await.unwrap();
    let log = step("server end", server_log).await.unwrap();
    assert_eq!(log.handshakes, 2, "{log:?}");
}

#[tokio::test]
async fn a_client_takes_datagrams_from_its_server_only() {
    let (server, server_log) = echo_server(MobilityMode::Standard).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let trace: fastshake_net::dtls::DatagramTrace = Arc::new(move |direction, peer, _| {
        if direction == fastshake_net::dtls::Direction::Received {
            log.lock().unwrap().push(peer);
        }
    });
    let options = ClientOptions { trace: Some(trace), ..ClientOptions::default() };
    let config = Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", KEY) });
    let mut client = step("handshake", DtlsClient::connect(server, config, options)).await.unwrap();
    // Another host, and another port of the server's host (a standard client does not follow
    // the server anywhere), send to the client.
    let other_host = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
    let other_port = std::net::UdpSocket::bind(loopback()).unwrap();
    for stranger in [&other_host, &other_port] {
        stranger.send_to(b"not from the server", client.local_addr()).unwrap();
    }
    client.send(b"ping".to_vec()).unwrap();
    expect_echo(&mut client, b"ping").await;
    step("close", client.close()).await.unwrap();
    step("server end", server_log).await.unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 3, "the handshake and the echo: {seen:?}");
    assert!(seen.iter().all(|peer| *peer == server), "only the server's datagrams are read: {seen:?}");
}
