//! `fastshake demo`: a DTLS server and a client over loopback in one process, and what happened
//! between them — every handshake datagram, the summaries, and application data echoed back.
//! `--dtls 1.3` shows a DTLS 1.3 handshake (RFC 9147) the same way.

use anyhow::{bail, Context};
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{CipherSuite, ClientConfig, NamedGroup, Psk, Role, ServerConfig, Versions, DEFAULT_MTU};
use fastshake_net::credentials::parse_mtu;
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
    /// The protocol version: 1.2 (RFC 6347) or 1.3 (RFC 9147).
    #[arg(long, value_name = "VERSION", value_enum, default_value_t = DemoVersion::V1_2)]
    dtls: DemoVersion,
    /// Cipher suite by IANA name (default: TLS_PSK_WITH_AES_128_CCM_8 with --dtls 1.2,
    /// TLS_AES_128_GCM_SHA256 with --dtls 1.3).
    #[arg(long, value_name = "IANA_NAME")]
    suite: Option<String>,
    /// With --dtls 1.3: the key-exchange groups the client offers, most preferred first, of
    /// x25519mlkem768, x25519, secp256r1 (default: x25519,secp256r1); the server takes any,
    /// the post-quantum hybrid first. `--groups ""`: none, the PSK alone (psk_ke).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    groups: Option<Vec<String>>,
    /// Datagram size limit; try 100 to watch handshake messages split into fragments.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MTU, value_parser = parse_mtu)]
    mtu: usize,
    /// Messages the client sends (each one application record); default: three greetings.
    #[arg(long = "message", value_name = "TEXT")]
    messages: Vec<String>,
}

/// `--dtls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum DemoVersion {
    #[value(name = "1.2")]
    V1_2,
    #[value(name = "1.3")]
    V1_3,
}

/// What the demo runs.
struct Setup {
    version: Versions,
    /// The suite (1.2), or the 1.3 suite and the client's groups.
    suite: CipherSuite,
    dtls13: Option<(Suite13, Vec<NamedGroup>)>,
    mtu: usize,
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

/// Prints and forgets what the log holds; `inside` names what a datagram's encrypted records
/// hold, when the demo can tell (see [`inside_handshake13`]).
fn print_log(log: &Log, start: Instant, inside: fn(bool, &[String]) -> Option<&'static str>) {
    let entries = match log.lock() {
        Ok(mut log) => std::mem::take(&mut *log),
        Err(_) => return,
    };
    for entry in entries {
        let arrow = if entry.from_server { "server -> client" } else { "client -> server" };
        let inside = inside(entry.from_server, &entry.records).map(|what| format!("  [{what}]"));
        say!(
            "  {:>8.3} ms  {arrow}  {:>5} B  {}{}",
            entry.at.duration_since(start).as_secs_f64() * 1e3,
            entry.len,
            entry.records.join(" + "),
            inside.unwrap_or_default()
        );
    }
}

fn nothing_inside(_: bool, _: &[String]) -> Option<&'static str> {
    None
}

/// What a DTLS 1.3 PSK handshake puts in a datagram's encrypted records, by who sent it and
/// their epoch (RFC 9147 §5 and §6.1): the server's flight under the handshake keys (epoch 2),
/// the client's Finished under the same keys, and the server's ACK of it (§7) under the
/// application keys (epoch 3), the only epoch-3 record the server sends before any data. The
/// wire does not show it and the demo holds no keys: this is the protocol's word, which the
/// handshake completing on both sides confirms.
fn inside_handshake13(from_server: bool, records: &[String]) -> Option<&'static str> {
    let epoch = |e: &str| records.iter().any(|r| r.starts_with(&format!("encrypted record (epoch {e},")));
    match (from_server, epoch("2"), epoch("3")) {
        (true, true, false) => Some("encrypted flight: EncryptedExtensions, Finished"),
        (false, true, false) => Some("encrypted: Finished"),
        (true, false, true) => Some("encrypted: ACK"),
        _ => None,
    }
}

/// Waits until the log holds a datagram that `done` accepts, or `STEP_TIMEOUT` passes.
async fn wait_for(log: &Log, done: impl Fn(&Sent) -> bool) {
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        if log.lock().is_ok_and(|log| log.iter().any(&done)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let setup = match args.dtls {
        DemoVersion::V1_2 => {
            if args.groups.is_some() {
                bail!("--groups chooses DTLS 1.3 key exchanges: add --dtls 1.3");
            }
            let name = args.suite.as_deref().unwrap_or("TLS_PSK_WITH_AES_128_CCM_8");
            let suite = CipherSuite::from_iana_name(name).filter(|s| !s.is_tls13());
            let Some(suite) = suite else {
                let known: Vec<&str> =
                    CipherSuite::ALL.iter().filter(|c| !c.is_tls13()).map(|c| c.iana_name()).collect();
                bail!("unknown cipher suite {name:?} for DTLS 1.2; known: {}", known.join(", "));
            };
            Setup { version: Versions::Dtls12, suite, dtls13: None, mtu: args.mtu }
        }
        DemoVersion::V1_3 => {
            let name = args.suite.as_deref().unwrap_or("TLS_AES_128_GCM_SHA256");
            // An external PSK is bound to SHA-256 here, as in the engine.
            let Some(suite13) = Suite13::from_iana_name(name).filter(|s| *s != Suite13::Aes256GcmSha384)
            else {
                let known: Vec<&str> = Suite13::ALL
                    .iter()
                    .filter(|s| **s != Suite13::Aes256GcmSha384)
                    .map(|s| s.iana_name())
                    .collect();
                bail!("unknown cipher suite {name:?} for DTLS 1.3 with a PSK; known: {}", known.join(", "));
            };
            let groups = match &args.groups {
                None => NamedGroup::ALL.to_vec(),
                Some(names) => names
                    .iter()
                    .filter(|n| !n.trim().is_empty())
                    .map(|n| {
                        NamedGroup::WITH_HYBRID
                            .into_iter()
                            .find(|g| g.name().eq_ignore_ascii_case(n.trim()))
                            .ok_or_else(|| {
                                anyhow::anyhow!("unknown group {n:?}: x25519mlkem768, x25519 or secp256r1")
                            })
                    })
                    .collect::<anyhow::Result<_>>()?,
            };
            Setup {
                version: Versions::Dtls13,
                suite: CipherSuite::from(suite13),
                dtls13: Some((suite13, groups)),
                mtu: args.mtu,
            }
        }
    };
    let messages = if args.messages.is_empty() {
        vec!["hello, server".to_owned(), "a second record".to_owned(), "and a third".to_owned()]
    } else {
        args.messages
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(demo(setup, messages))
}

async fn demo(setup: Setup, messages: Vec<String>) -> anyhow::Result<()> {
    let Setup { version, suite, ref dtls13, mtu } = setup;
    let identity = b"demo-client".to_vec();
    let key = os_seed()[..16].to_vec();
    say!("fastshake demo: a {} server and a client in one process, over loopback UDP.", version.name());
    let psk_rfc = if dtls13.is_some() { "RFC 8446 §2.2, an external PSK" } else { "RFC 4279" };
    say!(
        "They share a pre-shared key ({psk_rfc}) named {:?}; this run's key is {} (random).",
        String::from_utf8_lossy(&identity),
        hex::encode(&key)
    );
    say!("Cipher suite {}, datagrams of at most {mtu} bytes.", suite.iana_name());
    if let Some((_, groups)) = dtls13 {
        match groups.first() {
            Some(first) => {
                let names: Vec<&str> = groups.iter().map(|g| g.name()).collect();
                // A hybrid share would make the first ClientHello two fragments (see the client).
                let share = if first.is_hybrid() {
                    format!(
                        "its key share for {} (1,216 bytes) in its second ClientHello, which the \
                         HelloRetryRequest that brings the cookie asks for",
                        first.name()
                    )
                } else {
                    format!("a key share for {}", first.name())
                };
                say!("The client offers the groups {} and sends {share} (psk_dhe_ke).", names.join(", "));
            }
            None => say!("The client offers no group: the PSK alone keys the session (psk_ke)."),
        }
    }
    say!("");

    // A DTLS 1.3 side still lists a 1.2 suite its credentials serve; it never offers it.
    let (suites, versions, suites13) = match dtls13 {
        Some((suite13, _)) => (vec![CipherSuite::PskWithAes128Ccm8], version, vec![*suite13]),
        None => (vec![suite], version, Suite13::ALL.to_vec()),
    };
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let server_config = ServerConfig {
        psks: vec![Psk::new(identity.clone(), key.clone())],
        suites: suites.clone(),
        mtu,
        versions,
        suites13: suites13.clone(),
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
        suites,
        mtu,
        versions,
        suites13,
        groups: dtls13.as_ref().map_or_else(|| NamedGroup::ALL.to_vec(), |(_, groups)| groups.clone()),
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
    let inside = if dtls13.is_some() {
        // The server's ACK of the client's Finished may leave after both sides report.
        wait_for(&log, |d| {
            d.from_server && d.records.iter().any(|r| r.starts_with("encrypted record (epoch 3"))
        })
        .await;
        inside_handshake13
    } else {
        nothing_inside
    };
    print_log(&log, start, inside);
    say!("");
    if dtls13.is_some() {
        say!(
            "  HelloRetryRequest: the server answers the first ClientHello with a cookie and keeps no state"
        );
        say!("  (RFC 9147 §5.1); only a client that sends the cookie back (so owns its address) gets a session.");
        say!("  From the ServerHello on, every record has the unified header (RFC 9147 §4): encrypted, content");
        say!("  type included, showing only its epoch's low bits: 2 under the handshake keys, 3 under the");
        say!("  application keys. The names in [brackets] are what RFC 9147 puts in such a record at that point");
        say!("  of a PSK handshake, not read from the wire (the demo holds no keys); both sides completing the");
        say!("  handshake confirms them. The ACK tells the client its Finished arrived (RFC 9147 §7).\n");
    } else {
        say!("  HelloVerifyRequest: the server answers the first ClientHello without keeping any state;");
        say!("  only a client that returns the cookie (so owns its address) gets a session.");
        say!("  ChangeCipherSpec switches to epoch 1: from there every record is encrypted and authenticated.\n");
    }
    say!("client: {}", summary_line(client.summary(), Role::Client));
    if let Some(summary) = server_summary {
        say!("server: {}", summary_line(&summary, Role::Server));
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
        print_log(&log, start, nothing_inside);
    }

    if dtls13.is_some() {
        say!("\nThe client closes with a close_notify alert (encrypted, like every record after the ServerHello):");
    } else {
        say!("\nThe client closes with a close_notify alert (encrypted, like every record of epoch 1):");
    }
    let traffic = client.close().await.context("closing failed")?;
    // Give the server a moment to read the close_notify before it shuts down.
    let _ = tokio::time::timeout(STEP_TIMEOUT, server_task).await;
    print_log(&log, start, nothing_inside);
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
            | ServerEvent::HelloRefused { .. }
            | ServerEvent::RefusalsNotShown { .. }
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
