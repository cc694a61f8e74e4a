//! `fastshake demo`: a DTLS server and a client over loopback in one process, and what happened
//! between them — every handshake datagram, the summaries, and application data echoed back.

use anyhow::{bail, Context};
use fastshake_dtls::{CipherSuite, ClientConfig, Psk, ServerConfig, DEFAULT_MTU, MIN_MTU};
use fastshake_net::dtls::{
    describe_datagram, os_seed, summary_line, ClientEvent, ClientOptions, DatagramTrace, Direction,
    DtlsClient, DtlsServer, ServerEvent, ServerOptions,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Like `println!`, but a closed standard output (`fastshake demo | head`) is not a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// How long the demo waits for any one step before it calls the run a failure.
const STEP_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Cipher suite by IANA name.
    #[arg(long, value_name = "IANA_NAME", default_value = "TLS_PSK_WITH_AES_128_CCM_8")]
    suite: String,
    /// Datagram size limit; try 100 to watch handshake messages split into fragments.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MTU)]
    mtu: usize,
    /// Messages the client sends (each one application record); default: three greetings.
    #[arg(long = "message", value_name = "TEXT")]
    messages: Vec<String>,
}

/// One datagram as the demo shows it.
struct Sent {
    at: Instant,
    from_server: bool,
    len: usize,
    records: Vec<String>,
}

type Log = Arc<Mutex<Vec<Sent>>>;

fn tracer(log: &Log, from_server: bool) -> DatagramTrace {
    let log = Arc::clone(log);
    Arc::new(move |direction: Direction, _peer: SocketAddr, datagram: &[u8]| {
        // Each datagram is logged once, by the side that sends it.
        if direction == Direction::Sent {
            let entry = Sent {
                at: Instant::now(),
                from_server,
                len: datagram.len(),
                records: describe_datagram(datagram),
            };
            if let Ok(mut log) = log.lock() {
                log.push(entry);
            }
        }
    })
}

/// Prints and forgets what the log holds.
fn print_log(log: &Log, start: Instant) {
    let entries = match log.lock() {
        Ok(mut log) => std::mem::take(&mut *log),
        Err(_) => return,
    };
    for entry in entries {
        let arrow = if entry.from_server { "server -> client" } else { "client -> server" };
        say!(
            "  {:>8.3} ms  {arrow}  {:>5} B  {}",
            entry.at.duration_since(start).as_secs_f64() * 1e3,
            entry.len,
            entry.records.join(" + ")
        );
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let Some(suite) = CipherSuite::from_iana_name(&args.suite) else {
        let known: Vec<&str> = CipherSuite::ALL.iter().map(|c| c.iana_name()).collect();
        bail!("unknown cipher suite {:?}; known: {}", args.suite, known.join(", "));
    };
    if args.mtu < MIN_MTU {
        bail!("the MTU must be at least {MIN_MTU} bytes");
    }
    let messages = if args.messages.is_empty() {
        vec!["hello, server".to_owned(), "a second record".to_owned(), "and a third".to_owned()]
    } else {
        args.messages
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(demo(suite, args.mtu, messages))
}

async fn demo(suite: CipherSuite, mtu: usize, messages: Vec<String>) -> anyhow::Result<()> {
    let identity = b"demo-client".to_vec();
    let key = os_seed()[..16].to_vec();
    say!("fastshake demo: a DTLS 1.2 server and a client in one process, over loopback UDP.");
    say!(
        "They share a pre-shared key (RFC 4279) named {:?}; this run's key is {} (random).",
        String::from_utf8_lossy(&identity),
        hex::encode(&key)
    );
    say!("Cipher suite {}, datagrams of at most {mtu} bytes.\n", suite.iana_name());

    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let server_config = ServerConfig {
        psks: vec![Psk::new(identity.clone(), key.clone())],
        suites: vec![suite],
        mtu,
        ..ServerConfig::default()
    };
    let server_options = ServerOptions { trace: Some(tracer(&log, true)), ..ServerOptions::default() };
    let server =
        DtlsServer::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), Arc::new(server_config), server_options)
            .await
            .context("cannot start the server")?;
    let server_addr = server.local_addr();
    say!("The server listens on {server_addr} and echoes every record it receives.");

    let (summary_tx, summary_rx) = oneshot::channel();
    let server_task = tokio::spawn(echo_server(server, summary_tx));

    let client_config = ClientConfig {
        psk: Some(Psk::new(identity, key)),
        suites: vec![suite],
        mtu,
        ..ClientConfig::default()
    };
    let client_options = ClientOptions { trace: Some(tracer(&log, false)), ..ClientOptions::default() };
    let start = Instant::now();
    say!("The client connects from a fresh port. The handshake, datagram by datagram:");
    let connect = DtlsClient::connect(server_addr, Arc::new(client_config), client_options);
    let mut client = tokio::time::timeout(STEP_TIMEOUT, connect)
        .await
        .context("the handshake did not finish in time")?
        .context("the handshake failed")?;
    // The server reports its side once its last flight is out.
    let server_summary = tokio::time::timeout(STEP_TIMEOUT, summary_rx).await.ok().and_then(Result::ok);
    print_log(&log, start);
    say!("");
    say!("  HelloVerifyRequest: the server answers the first ClientHello without keeping any state;");
    say!("  only a client that returns the cookie (so owns its address) gets a session.");
    say!("  ChangeCipherSpec switches to epoch 1: from there every record is encrypted and authenticated.\n");
    say!("client: {}", summary_line(client.summary()));
    if let Some(summary) = server_summary {
        say!("server: {}", summary_line(&summary));
    }

    say!("\nApplication data: each message is one encrypted record; the server sends it back.");
    for message in &messages {
        client.send(message.as_bytes().to_vec()).context("the session ended")?;
        let echoed = match tokio::time::timeout(STEP_TIMEOUT, client.recv()).await {
            Ok(Some(ClientEvent::Data(data))) => data,
            Ok(Some(ClientEvent::SendFailed(error))) => bail!("cannot send {message:?}: {error}"),
            Ok(Some(ClientEvent::Failed(error))) => bail!("the session failed: {error}"),
            Ok(Some(ClientEvent::Closed) | None) => bail!("the server closed the session early"),
            // The demo's client and server stay where they are.
            Ok(Some(ClientEvent::PathChanged(_) | ClientEvent::Reconnected(_))) => bail!("unexpected move"),
            // The demo runs DTLS 1.2, whose tickets come in the handshake.
            Ok(Some(ClientEvent::SessionTicket(_))) => bail!("unexpected DTLS 1.3 ticket"),
            Err(_) => bail!("no echo of {message:?} within {STEP_TIMEOUT:?}"),
        };
        say!("  client sent {:?}, got back {:?}:", message, String::from_utf8_lossy(&echoed));
        print_log(&log, start);
    }

    say!("\nThe client closes with a close_notify alert (encrypted, like every record of epoch 1):");
    let traffic = client.close().await.context("closing failed")?;
    // Give the server a moment to read the close_notify before it shuts down.
    let _ = tokio::time::timeout(STEP_TIMEOUT, server_task).await;
    print_log(&log, start);
    say!(
        "\nIn total the client sent {} datagrams / {} B and received {} datagrams / {} B, in {:.1} ms.",
        traffic.datagrams_sent,
        traffic.bytes_sent,
        traffic.datagrams_received,
        traffic.bytes_received,
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

/// Echoes records until the first client closes, then stops the server.
async fn echo_server(
    mut server: DtlsServer,
    summary_tx: oneshot::Sender<fastshake_dtls::HandshakeSummary>,
) -> anyhow::Result<()> {
    let mut summary_tx = Some(summary_tx);
    while let Some(event) = server.next_event().await {
        match event {
            ServerEvent::Connected { summary, .. } => {
                if let Some(tx) = summary_tx.take() {
                    let _ = tx.send(summary);
                }
            }
            ServerEvent::Data { handle, data, .. } => server.send(handle, data)?,
            ServerEvent::Closed { .. } => break,
            ServerEvent::Failed { error, .. } => {
                say!("server: session failed: {error}");
                break;
            }
            // The demo server sets no session slots.
            ServerEvent::Evicted { .. }
            | ServerEvent::Refused { .. }
            | ServerEvent::PathChanged { .. }
            | ServerEvent::OwnSocket { .. }
            | ServerEvent::StaysOnWelcomePort { .. }
            | ServerEvent::TicketKeysReloaded { .. }
            | ServerEvent::TicketKeysUnreadable { .. }
            | ServerEvent::SessionStoreUnavailable { .. } => {}
        }
    }
    server.shutdown().await?;
    Ok(())
}
