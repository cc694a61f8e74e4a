//! An SCTP server on two workers (one SO_REUSEPORT socket and one endpoint each) and multihomed
//! clients on 127.0.0.1 and 127.0.0.2: the packets of a client's second path reach the worker
//! holding its association wherever the kernel hashes them, so the association lives on; and an
//! ALT-COOKIE one worker issued opens at the other.

mod common;

use fastshake_net::sctp::{DriverStats, SctpDriver};
use fastshake_net::udp::{BatchIo, PortSharing};
use fastshake_sctp::{
    AssociationHandle, Config, ConnectOptions, EndpointStats, Event, HandshakeKind, HandshakeMode, Message,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(20);
const SECOND: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const SCTP_PORT: u16 = 7;

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

/// What one worker counted.
#[derive(Debug)]
struct Snapshot {
    driver: DriverStats,
    endpoint: EndpointStats,
    cookie_key_epoch: u8,
}

/// The server: its workers run as echo tasks and answer snapshot requests.
struct Server {
    addr: SocketAddr,
    workers: Vec<mpsc::UnboundedSender<oneshot::Sender<Snapshot>>>,
}

impl Server {
    fn start(workers: usize, mode: HandshakeMode) -> Server {
        Server::start_rotating(workers, mode, None)
    }

    /// A server whose cookie key changes every `rotation` (the default when `None`).
    fn start_rotating(workers: usize, mode: HandshakeMode, rotation: Option<Duration>) -> Server {
        let config = Arc::new(Config { local_port: SCTP_PORT, listen: true, mode, ..Config::default() });
        let mut drivers = SctpDriver::bind_workers(
            "127.0.0.1:0".parse().unwrap(),
            config,
            BatchIo::On,
            workers,
            PortSharing::Exclusive,
        )
        .unwrap();
        if let Some(every) = rotation {
            SctpDriver::rotate_cookie_keys(&mut drivers, every);
        }
        assert_eq!(drivers.len(), workers);
        let addr = drivers[0].local_addr();
        let workers = drivers.into_iter().map(|driver| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(echo_worker(driver, rx));
            tx
        });
        Server { addr, workers: workers.collect() }
    }

    async fn snapshots(&self) -> Vec<Snapshot> {
        let mut all = Vec::new();
        for worker in &self.workers {
            let (tx, rx) = oneshot::channel();
            worker.send(tx).unwrap();
            all.push(step("a worker's snapshot", rx).await.unwrap());
        }
        all
    }

    async fn passed_on(&self) -> u64 {
        self.snapshots().await.iter().map(|s| s.driver.passed_on).sum()
    }
}

async fn echo_worker(
    mut driver: SctpDriver,
    mut requests: mpsc::UnboundedReceiver<oneshot::Sender<Snapshot>>,
) {
    loop {
        tokio::select! {
            event = driver.next_event() => {
                let (handle, event) = event.unwrap();
                if let Event::Message(message) = event {
                    driver.send(handle, message).unwrap();
                }
            }
            request = requests.recv() => {
                let Some(reply) = request else { return };
                let _ = reply.send(Snapshot {
                    driver: driver.stats(),
                    endpoint: driver.endpoint().stats(),
                    cookie_key_epoch: driver.endpoint().cookie_key_epoch(),
                });
            }
        }
    }
}

fn message(text: &str) -> Message {
    Message { stream: 0, unordered: false, ppid: 0, data: text.as_bytes().to_vec() }
}

/// Drives `client` until its association `handle` has an event other than an ALT-COOKIE.
async fn client_event(client: &mut SctpDriver, handle: AssociationHandle) -> Event {
    loop {
        let (h, event) = step("a client event", client.next_event()).await.unwrap();
        assert_eq!(h, handle);
        if !matches!(event, Event::AltCookie { .. }) {
            return event;
        }
    }
}

async fn expect_echo(client: &mut SctpDriver, handle: AssociationHandle, text: &str) {
    client.send(handle, message(text)).unwrap();
    match client_event(client, handle).await {
        Event::Message(m) => assert_eq!(m.data, text.as_bytes()),
        other => panic!("expected the echo of {text:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multihomed_peers_second_path_reaches_the_worker_holding_its_association() {
    /// Clients at most; the second path of each lands on the other worker with odds 1/2.
    const CLIENTS: usize = 40;
    let server = Server::start(2, HandshakeMode::Both);
    let mut crossed = 0;
    for attempt in 0..CLIENTS {
        let before = server.passed_on().await;
        let config = Config { local_port: 5000, fetch_path_cookies: false, ..Config::default() };
        let mut client =
            SctpDriver::bind_multihomed("127.0.0.1:0".parse().unwrap(), &[SECOND], config).await.unwrap();
        let handle = client.connect(server.addr, SCTP_PORT, ConnectOptions::default());
        assert!(matches!(client_event(&mut client, handle).await, Event::Connected { .. }));
        // Once the client has sent on the association, the server probes its second address
        // with a HEARTBEAT; the HEARTBEAT-ACK comes from 127.0.0.2, a 4-tuple of its own.
        expect_echo(&mut client, handle, "first").await;
        client.drive_until(tokio::time::Instant::now() + Duration::from_millis(300)).await.unwrap();
        let passed = server.passed_on().await - before;
        // Whichever worker it reached, the association lives on and closes cleanly.
        expect_echo(&mut client, handle, "second").await;
        client.shutdown(handle);
        match client_event(&mut client, handle).await {
            Event::Closed => {}
            other => panic!("attempt {attempt}: expected a graceful close, got {other:?}"),
        }
        if passed > 0 {
            crossed += 1;
            if crossed == 2 {
                break;
            }
        }
    }
    let snapshots = server.snapshots().await;
    println!("{snapshots:?}");
    assert!(crossed > 0, "in {CLIENTS} clients no second path reached the other worker: {snapshots:?}");
    let passed: u64 = snapshots.iter().map(|s| s.driver.passed_on).sum();
    let taken: u64 = snapshots.iter().map(|s| s.driver.taken_over).sum();
    assert_eq!(passed, taken, "every packet passed on reached its worker");
    assert!(
        snapshots.iter().all(|s| s.endpoint.aborts_sent == 0),
        "no worker took a packet for out of the blue: {snapshots:?}"
    );
}

/// Fetches an ALT-COOKIE from `server` with a client of its own.
async fn fetch_alt_cookie(server: &Server) -> Vec<u8> {
    let config = Config { local_port: 5000, ..Config::default() };
    let mut client = SctpDriver::bind("127.0.0.1:0".parse().unwrap(), config).await.unwrap();
    let handle = client.connect(server.addr, SCTP_PORT, ConnectOptions::default());
    let cookie = loop {
        let (h, event) = step("an ALT-COOKIE", client.next_event()).await.unwrap();
        assert_eq!(h, handle);
        if let Event::AltCookie { cookie, .. } = event {
            break cookie;
        }
    };
    client.abort(handle);
    client.flush().await.unwrap();
    cookie
}

/// Opens associations to `server` from `clients` clients (spread over its workers by their
/// source ports) with `cookie` cached; the handshake each took.
async fn open_with_cached_cookie(
    server: &Server,
    cookie: &[u8],
    clients: usize,
) -> Vec<(HandshakeKind, u32)> {
    let mut taken = Vec::new();
    for i in 0..clients {
        let config = Config { local_port: 5000, ..Config::default() };
        let mut client = SctpDriver::bind("127.0.0.1:0".parse().unwrap(), config).await.unwrap();
        let options = ConnectOptions { cached_cookie: Some(cookie.to_vec()), ..ConnectOptions::default() };
        let handle = client.connect(server.addr, SCTP_PORT, options);
        match client_event(&mut client, handle).await {
            Event::Connected { handshake, round_trips, .. } => taken.push((handshake, round_trips)),
            other => panic!("client {i}: expected Connected, got {other:?}"),
        }
        client.abort(handle);
        client.flush().await.unwrap();
    }
    taken
}

/// RFC 4960 §5.1.3 and seed 004 §III-B: the server changes its cookie key on a schedule, which
/// is the ALT-COOKIE's lifetime. Every worker changes to the same key at once: a cookie made
/// after rotations opens at every worker in one round trip, and a cookie from two rotations
/// before opens at none (each of its clients gets a fresh cookie and opens in two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_worker_rotates_to_the_same_cookie_key_and_old_cookies_expire() {
    const CLIENTS: usize = 8;
    // Long enough that the fresh cookie's eight handshakes end well within one period.
    let server = Server::start_rotating(2, HandshakeMode::Both, Some(Duration::from_secs(2)));
    let old = fetch_alt_cookie(&server).await;
    let epoch_then = server.snapshots().await.iter().map(|s| s.cookie_key_epoch).max().unwrap();
    // Wait until every worker is two rotations further (a cookie verifies under the current and
    // the previous key).
    step("two rotations at every worker", async {
        loop {
            let snapshots = server.snapshots().await;
            if snapshots.iter().all(|s| s.cookie_key_epoch.wrapping_sub(epoch_then) >= 2) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let fresh = fetch_alt_cookie(&server).await;
    for (i, taken) in open_with_cached_cookie(&server, &fresh, CLIENTS).await.into_iter().enumerate() {
        assert_eq!(taken, (HandshakeKind::AltCached, 1), "client {i} with the fresh cookie");
    }
    for (i, (kind, round_trips)) in
        open_with_cached_cookie(&server, &old, CLIENTS).await.into_iter().enumerate()
    {
        assert_ne!(kind, HandshakeKind::AltCached, "client {i} with the expired cookie");
        assert_eq!(round_trips, 2, "client {i} with the expired cookie: {kind:?}");
    }
    let snapshots = server.snapshots().await;
    assert!(
        snapshots.iter().all(|s| s.driver.datagrams_in > 0),
        "both workers served clients: {snapshots:?}"
    );
    let bad: u64 = snapshots.iter().map(|s| s.endpoint.bad_cookies).sum();
    assert!(bad >= CLIENTS as u64, "every expired cookie was refused: {snapshots:?}");
}

/// Seed 004 §III-F: an ALT-COOKIE opens an association in one round trip. The workers share one
/// cookie key, so a cookie from one worker opens at every other: clients from many source ports
/// (spread over both workers) all open with a cookie the first client fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alt_cookie_from_one_worker_opens_at_every_worker() {
    const CLIENTS: usize = 16;
    let server = Server::start(2, HandshakeMode::Both);
    let cookie = fetch_alt_cookie(&server).await;
    for (i, taken) in open_with_cached_cookie(&server, &cookie, CLIENTS).await.into_iter().enumerate() {
        assert_eq!(taken, (HandshakeKind::AltCached, 1), "client {i}");
    }
    let snapshots = server.snapshots().await;
    assert!(
        snapshots.iter().all(|s| s.driver.datagrams_in > 0),
        "both workers served clients (all on one has odds 2^-16): {snapshots:?}"
    );
    assert!(snapshots.iter().all(|s| s.endpoint.bad_cookies == 0), "{snapshots:?}");
}
