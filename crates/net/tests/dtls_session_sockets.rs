//! Session sockets (IPC, TCS) close with their sessions: after close_notify and after idle
//! expiry the server process has no more file descriptors than before. The tests count the
//! process's descriptors, so they take turns.

mod common;

use common::loopback;
use fastshake_dtls::Versions;
use fastshake_dtls::{ClientConfig, ServerConfig};
use fastshake_net::dtls::{
    ClientEvent, ClientOptions, DtlsClient, DtlsServer, MobilityMode, ServerEvent, ServerOptions,
};
use std::sync::Arc;
use std::time::Duration;

const KEY: [u8; 16] = [3; 16];

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

/// Held by each test while it counts descriptors.
static COUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `test` alone: its runtime (which has descriptors of its own) starts after the turn is
/// taken.
fn counting_alone(test: impl std::future::Future<Output = ()>) {
    let _turn = COUNTING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(test);
}

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

async fn expect_echo(client: &mut DtlsClient, message: &[u8]) {
    common::expect_echo(client, message, STEP, false).await
}

/// Number of file descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("list /proc/self/fd").count()
}

#[test]
fn session_sockets_close_with_their_sessions() {
    counting_alone(sessions_closing());
}

async fn sessions_closing() {
    const CLIENTS: usize = 3;
    for mode in [MobilityMode::Ipc, MobilityMode::Tcs] {
        let config = Arc::new(ServerConfig {
            versions: Versions::Dtls12,
            mobility: mode.server_mobility(),
            ..ServerConfig::psk("id", KEY)
        });
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
            let config = Arc::new(ClientConfig {
                versions: Versions::Dtls12,
                mobility: mode.client_mobility(),
                ..ClientConfig::psk("id", KEY)
            });
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

#[test]
fn an_idle_session_gives_its_socket_back() {
    counting_alone(idle_session());
}

async fn idle_session() {
    let mode = MobilityMode::Ipc;
    let config = Arc::new(ServerConfig {
        versions: Versions::Dtls12,
        mobility: mode.server_mobility(),
        idle_timeout: Some(Duration::from_millis(200)),
        ..ServerConfig::psk("id", KEY)
    });
    let options = ServerOptions { mobility: mode, ..ServerOptions::default() };
    let mut server = DtlsServer::bind(loopback(), config, options).await.unwrap();
    let addr = server.local_addr();
    let before = open_fds();
    let config = Arc::new(ClientConfig {
        versions: Versions::Dtls12,
        mobility: mode.client_mobility(),
        ..ClientConfig::psk("id", KEY)
    });
    let mut client =
        step("handshake", DtlsClient::connect(addr, config, ClientOptions::default())).await.unwrap();
    let own_socket = loop {
        match step("server events", server.next_event()).await {
            Some(ServerEvent::OwnSocket { local, .. }) => break local,
            Some(_) => {}
            None => panic!("the server stopped"),
        }
    };
    assert!(open_fds() >= before + 2, "the client's socket and the session's");
    // One record shows the server its last flight arrived (until then it keeps the session for
    // the handshake timeout, however idle: the client may be resending its Finished).
    client.send(b"once".to_vec()).unwrap();
    // Then the client stays silent: the server expires the session and tells it so.
    loop {
        match step("expiry", client.recv()).await {
            Some(ClientEvent::Closed) => break,
            Some(ClientEvent::PathChanged(_)) => {}
            other => panic!("expected close_notify from the server, got {other:?}"),
        }
    }
    loop {
        match step("server events", server.next_event()).await {
            Some(ServerEvent::Failed { .. }) => break,
            Some(_) => {}
            None => panic!("the server stopped"),
        }
    }
    let _ = step("client end", client.close()).await;
    let drained = async {
        while open_fds() > before {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    step("the expired session's socket closing", drained).await;
    assert!(std::net::UdpSocket::bind(own_socket).is_ok(), "{own_socket} is free again");
    step("shutdown", server.shutdown()).await.unwrap();
}
