//! A client whose address disappears mid-session (an interface going down): its sends fail with
//! "network unreachable", the driver holds them and tries again, and once the address is back
//! the record arrives and the session goes on. Runs in a network namespace of its own (the test
//! re-runs itself under `unshare -rn`), where it may add and remove addresses on its loopback.

mod common;

use fastshake_dtls::Versions;
use fastshake_dtls::{ClientConfig, ServerConfig};
use fastshake_net::dtls::{
    ClientEvent, ClientOptions, DatagramTrace, Direction, DtlsClient, DtlsServer, ServerEvent, ServerOptions,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const IN_NAMESPACE: &str = "FASTSHAKE_TEST_IN_NETNS";
const TEST_NAME: &str = "a_send_without_a_route_is_held_and_retried";
/// The client's own address, on the namespace's loopback.
const CLIENT_ADDRESS: &str = "10.9.0.1/32";
const KEY: [u8; 16] = [4; 16];
const STEP: Duration = Duration::from_secs(10);

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

#[test]
fn a_send_without_a_route_is_held_and_retried() {
    if std::env::var_os(IN_NAMESPACE).is_none() {
        let status = Command::new("unshare")
            .arg("-rn")
            .arg(std::env::current_exe().expect("the test binary"))
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(IN_NAMESPACE, "1")
            .status()
            .expect("run unshare (util-linux)");
        assert!(status.success(), "the test failed inside its network namespace");
        return;
    }
    ip(&["link", "set", "lo", "up"]);
    ip(&["addr", "add", CLIENT_ADDRESS, "dev", "lo"]);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(held_and_retried());
}

async fn held_and_retried() {
    let mut server = DtlsServer::bind(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        Arc::new(ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk("id", KEY) }),
        ServerOptions::default(),
    )
    .await
    .unwrap();
    let server_addr = server.local_addr();
    let controller = server.controller();
    tokio::spawn(async move {
        while let Some(event) = server.next_event().await {
            if let ServerEvent::Data { handle, data, .. } = event {
                let _ = controller.send(handle, data);
            }
        }
    });

    // Counts every datagram the client hands to its socket, failed attempts included.
    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&attempts);
    let trace: DatagramTrace = Arc::new(move |direction, _, _| {
        if direction == Direction::Sent {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let options = ClientOptions {
        bind: Some(SocketAddr::from(([10, 9, 0, 1], 0))),
        trace: Some(trace),
        ..ClientOptions::default()
    };
    let config = Arc::new(ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", KEY) });
    let mut client = step("handshake", DtlsClient::connect(server_addr, config, options)).await.unwrap();
    client.send(b"one".to_vec()).unwrap();
    match step("first echo", client.recv()).await {
        Some(ClientEvent::Data(data)) => assert_eq!(data, b"one"),
        other => panic!("expected the echo, got {other:?}"),
    }

    // The address goes: the send fails, is held, and is tried again (a second attempt).
    ip(&["addr", "del", CLIENT_ADDRESS, "dev", "lo"]);
    let before = attempts.load(Ordering::SeqCst);
    client.send(b"two".to_vec()).unwrap();
    let retried = async {
        while attempts.load(Ordering::SeqCst) < before + 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    step("a second attempt", retried).await;
    ip(&["addr", "add", CLIENT_ADDRESS, "dev", "lo"]);
    match step("echo once the address is back", client.recv()).await {
        Some(ClientEvent::Data(data)) => assert_eq!(data, b"two"),
        other => panic!("expected the echo of the held record, got {other:?}"),
    }
    step("close", client.close()).await.unwrap();
}
