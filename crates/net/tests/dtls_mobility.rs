//! The DTLS drivers with moving clients, on loopback, in one process: a client moves its socket
//! mid-session ([`DtlsClient::rebind`]) and the session goes on (IPC, TCS, CID) or is replaced
//! after the app timeout (standard DTLS); session sockets close with their sessions.

use fastshake_dtls::{ClientConfig, ServerConfig};
use fastshake_net::dtls::{
    ClientEvent, ClientOptions, DtlsClient, DtlsServer, MobilityMode, ServerEvent, ServerOptions,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

const KEY: [u8; 16] = [3; 16];

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f).await.unwrap_or_else(|_| panic!("{what} did not happen within {STEP:?}"))
}

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
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
    let config = Arc::new(ServerConfig { mobility: mode.server_mobility(), ..ServerConfig::psk("id", KEY) });
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
                ServerEvent::Failed { .. } | ServerEvent::StaysOnWelcomePort { .. } => {}
            }
        }
        step("server shutdown", server.shutdown()).await.unwrap();
        log
    });
    (addr, task)
}

async fn expect_echo(client: &mut DtlsClient, message: &[u8]) {
    loop {
        match step("echo", client.recv()).await {
            Some(ClientEvent::Data(data)) => {
                assert_eq!(data, message);
                return;
            }
            Some(ClientEvent::PathChanged(_) | ClientEvent::Reconnected(_)) => {}
            other => panic!("expected the echo of {message:?}, got {other:?}"),
        }
    }
}

/// Number of file descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("list /proc/self/fd").count()
}

#[tokio::test]
async fn standard_client_reconnects_after_moving_and_resends() {
    let (addr, server) = echo_server(MobilityMode::Standard).await;
    let options = ClientOptions { app_timeout: Some(Duration::from_millis(200)), ..ClientOptions::default() };
    let config = Arc::new(ClientConfig::psk("id", KEY));
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

#[tokio::test]
async fn session_sockets_close_with_their_sessions() {
    const CLIENTS: usize = 3;
    for mode in [MobilityMode::Ipc, MobilityMode::Tcs] {
        let config =
            Arc::new(ServerConfig { mobility: mode.server_mobility(), ..ServerConfig::psk("id", KEY) });
        let options = ServerOptions { mobility: mode, ..ServerOptions::default() };
        let mut server = DtlsServer::bind(loopback(), config, options).await.unwrap();
        let addr = server.local_addr();
        let controller = server.controller();
        let echo = tokio::spawn(async move {
            let mut closed = 0;
            while let Some(event) = server.next_event().await {
                match event {
                    ServerEvent::Data { handle, data, .. } => controller.send(handle, data).unwrap(),
                    ServerEvent::Closed { .. } => closed += 1,
                    _ => {}
                }
                if closed == CLIENTS {
                    break;
                }
            }
            server
        });
        let before = open_fds();
        let mut clients = Vec::new();
        for i in 0..CLIENTS {
            let config =
                Arc::new(ClientConfig { mobility: mode.client_mobility(), ..ClientConfig::psk("id", KEY) });
            let mut client =
                step("handshake", DtlsClient::connect(addr, config, ClientOptions::default())).await.unwrap();
            let message = format!("client {i}").into_bytes();
            client.send(message.clone()).unwrap();
            expect_echo(&mut client, &message).await;
            clients.push(client);
        }
        // Each client has its socket, and each session one on the server.
        let during = open_fds();
        assert!(
            during >= before + 2 * CLIENTS,
            "{mode}: {before} fds before, {during} with {CLIENTS} sessions"
        );
        for client in clients {
            step("close", client.close()).await.unwrap();
        }
        let server = step("every session closed", echo).await.unwrap();
        let drained = async {
            while open_fds() > before {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        step(&format!("{mode}: the session sockets closing"), drained).await;
        step("shutdown", server.shutdown()).await.unwrap();
    }
}

/// A client in `mode` moves mid-session; the session goes on without a new handshake.
async fn session_survives_a_move(mode: MobilityMode, move_to: SocketAddr) {
    let (addr, server) = echo_server(mode).await;
    let config = Arc::new(ClientConfig { mobility: mode.client_mobility(), ..ClientConfig::psk("id", KEY) });
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
