//! The E1 peers on the real-socket driver (`fastshake_net::dtls`): `DtlsServer` with the
//! strategy's mobility mode, `DtlsClient` on one non-connected socket bound to the unspecified
//! address, so the client's routing table picks the interface and the source address of every
//! datagram, as for any application on a multihomed host.
//!
//! The application is the E1 one (one numbered message outstanding, every copy acknowledged,
//! delivered once per client), with the reconnection of standard DTLS left to the driver
//! (`ClientOptions::app_timeout`: after the application timeout it sets up a new session, full or
//! resumed, and sends the unanswered message again on it). The session-keeping strategies resend
//! at the application timeout, and at once when an interface goes down while another is up.

use super::super::{configs_in, Strategy, MESSAGE_LEN};
use super::{parse_iface, read_control_lines, say, Input};
use crate::apps::records::{self, RequestId};
use anyhow::{bail, Context};
use fastshake_dtls::{ClientConfig, ServerConfig, Versions};
use fastshake_net::dtls::{
    ClientEvent, ClientOptions, DtlsClient, DtlsServer, Reconnect, ServerEvent, ServerOptions,
};
use fastshake_net::mobility::MobilityMode;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The driver's mobility mode for a strategy, if the driver runs it.
fn mobility_mode(strategy: Strategy) -> anyhow::Result<MobilityMode> {
    Ok(match strategy {
        Strategy::StandardFull | Strategy::StandardResumed => MobilityMode::Standard,
        Strategy::Cid => MobilityMode::Cid,
        Strategy::Ipc => MobilityMode::Ipc,
        Strategy::Tcs => MobilityMode::Tcs,
        Strategy::Oracle => bail!("the oracle is a simulator device: run it with the application peers"),
    })
}

/// Whether the driver peers can run `strategy`.
pub(super) fn runs(strategy: Strategy) -> bool {
    mobility_mode(strategy).is_ok()
}

/// The simulated E1's engine configurations, with what the driver's mode offers and accepts.
fn driver_configs(
    strategy: Strategy,
    version: Versions,
    mode: MobilityMode,
) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let (client, server) = configs_in(strategy, version);
    let client = ClientConfig { mobility: mode.client_mobility(), ..(*client).clone() };
    let server = ServerConfig { mobility: mode.server_mobility(), ..(*server).clone() };
    (Arc::new(client), Arc::new(server))
}

pub(super) async fn server(
    listen: SocketAddr,
    strategy: Strategy,
    version: Versions,
    messages: u32,
) -> anyhow::Result<()> {
    let mode = mobility_mode(strategy)?;
    let (_, config) = driver_configs(strategy, version, mode);
    let options = ServerOptions { mobility: mode, ..ServerOptions::default() };
    let mut server = DtlsServer::bind(listen, config, options).await.context("starting the DTLS server")?;
    let controller = server.controller();
    let (inputs, mut control) = mpsc::unbounded_channel();
    read_control_lines(inputs);
    let messages = messages as usize;
    let mut identities = HashMap::new();
    let mut delivered_by_client: HashMap<Vec<u8>, Vec<bool>> = HashMap::new();
    let (mut receipts, mut deliveries) = (vec![0u32; messages], vec![0u32; messages]);
    say("ready");
    loop {
        tokio::select! {
            event = server.next_event() => match event {
                Some(ServerEvent::Connected { handle, summary, .. }) => {
                    identities.insert(handle, summary.psk_identity);
                }
                Some(ServerEvent::Data { handle, data, .. }) => {
                    let Some(seq) = records::parse_request(&data).map(|id| u32::from(id.seq)) else { continue };
                    let Some(identity) = identities.get(&handle) else { continue };
                    let Some(count) = receipts.get_mut(seq as usize) else { continue };
                    *count += 1;
                    let seen = delivered_by_client.entry(identity.clone()).or_insert_with(|| vec![false; messages]);
                    if let Some(slot) = seen.get_mut(seq as usize).filter(|s| !**s) {
                        *slot = true;
                        deliveries[seq as usize] += 1;
                    }
                    // Every copy is acknowledged: the first acknowledgement may have been lost.
                    let _ = controller.send(handle, records::echo(request_id(seq), 0, MESSAGE_LEN));
                }
                Some(ServerEvent::Closed { handle, .. }) | Some(ServerEvent::Failed { handle, .. }) => {
                    identities.remove(&handle);
                }
                Some(_) => {}
                None => bail!("the DTLS server stopped"),
            },
            input = control.recv() => match input {
                Some(Input::Control(line)) if line == "stop" => break,
                Some(Input::Control(_)) | Some(Input::Datagram { .. }) => {}
                Some(Input::Hangup) | None => break,
            },
        }
    }
    let result = serde_json::json!({ "receipts": receipts, "deliveries": deliveries });
    say(&format!("result {result}"));
    Ok(())
}

/// What the client application counts.
#[derive(Default)]
struct ClientCounts {
    handshakes: u32,
    resumed_handshakes: u32,
    reconnections: u32,
    outages: u32,
    resends: u32,
    /// The fastest round trip of a message sent once (the path's own round trip).
    fastest_round_trip: Option<Duration>,
}

pub(super) async fn client(
    server: SocketAddr,
    ifaces: &[String],
    strategy: Strategy,
    version: Versions,
    messages: u32,
    app_timeout: Duration,
) -> anyhow::Result<()> {
    let mode = mobility_mode(strategy)?;
    let mut up: HashMap<String, bool> = HashMap::new();
    for text in ifaces {
        up.insert(parse_iface(text)?.0, true);
    }
    let (inputs, mut control) = mpsc::unbounded_channel();
    read_control_lines(inputs);
    say("ready");
    loop {
        match control.recv().await {
            Some(Input::Control(line)) if line == "go" => break,
            Some(Input::Control(_)) | Some(Input::Datagram { .. }) => {}
            Some(Input::Hangup) | None => return Ok(()),
        }
    }
    let started = Instant::now();
    let (config, _) = driver_configs(strategy, version, mode);
    let reconnects = strategy.reconnects();
    let options = ClientOptions {
        app_timeout: reconnects.then_some(app_timeout),
        reconnect: if strategy == Strategy::StandardResumed { Reconnect::Resumed } else { Reconnect::Full },
        ..ClientOptions::default()
    };
    debug_assert!(mode == MobilityMode::Standard || !reconnects);
    let mut counts = ClientCounts::default();
    let connecting = DtlsClient::connect(server, Arc::clone(&config), options);
    tokio::pin!(connecting);
    // Link changes during the first handshake only count; `stop` ends it.
    let connected = loop {
        tokio::select! {
            outcome = &mut connecting => break Some(outcome),
            input = control.recv() => match input {
                Some(Input::Control(line)) => match line.split_whitespace().collect::<Vec<_>>()[..] {
                    ["stop"] => break None,
                    ["down", name] => {
                        up.insert(name.to_owned(), false);
                        counts.outages += 1;
                    }
                    ["up", name] => {
                        up.insert(name.to_owned(), true);
                    }
                    _ => {}
                },
                Some(Input::Datagram { .. }) => {}
                Some(Input::Hangup) | None => break None,
            },
        }
    };
    let mut client = match connected {
        Some(Ok(client)) => client,
        Some(Err(error)) => {
            // Nothing got through (IPC behind a filtering NAT): the run did not finish.
            say(&format!("failed: {error}"));
            let acks = vec![0; messages as usize];
            return report_after_stop(&mut control, &acks, &counts).await;
        }
        None => {
            report(&vec![0; messages as usize], &counts);
            return Ok(());
        }
    };
    say("connected");
    counts.handshakes = 1;
    let mut acks = vec![0u32; messages as usize];
    let mut next_seq = 0u32;
    let mut done = false;
    client.send(records::request(request_id(next_seq), MESSAGE_LEN))?;
    // When the outstanding message first went out; `None` once it went out again.
    let mut sent_once_at = Some(tokio::time::Instant::now());
    // Session-keeping strategies: when the application sends the message again.
    let mut resend_at = (!reconnects).then(|| tokio::time::Instant::now() + app_timeout);
    loop {
        let resend = async {
            match resend_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = client.recv() => match event {
                Some(ClientEvent::Data(data)) => {
                    let Some(seq) = records::parse_echo(&data).map(|(id, _)| u32::from(id.seq)) else { continue };
                    let Some(count) = acks.get_mut(seq as usize) else { continue };
                    *count += 1;
                    if seq != next_seq || *count != 1 || done {
                        continue;
                    }
                    if let Some(at) = sent_once_at {
                        let rtt = at.elapsed();
                        counts.fastest_round_trip = Some(counts.fastest_round_trip.map_or(rtt, |f| f.min(rtt)));
                    }
                    next_seq += 1;
                    if next_seq == messages {
                        done = true;
                        resend_at = None;
                        say(&format!("done {}", started.elapsed().as_nanos()));
                    } else {
                        client.send(records::request(request_id(next_seq), MESSAGE_LEN))?;
                        sent_once_at = Some(tokio::time::Instant::now());
                        resend_at = (!reconnects).then(|| tokio::time::Instant::now() + app_timeout);
                    }
                }
                Some(ClientEvent::Reconnected(summary)) => {
                    counts.handshakes += 1;
                    counts.reconnections += 1;
                    counts.resumed_handshakes += u32::from(summary.resumed);
                    // The driver sent the unanswered message again on the new session.
                    if !done {
                        counts.resends += 1;
                        sent_once_at = None;
                    }
                }
                Some(ClientEvent::PathChanged(_)) | Some(ClientEvent::SendFailed(_)) | Some(ClientEvent::SessionTicket(_)) => {}
                Some(ClientEvent::Closed) => bail!("the server closed the session"),
                Some(ClientEvent::Failed(error)) => bail!("the session failed: {error}"),
                None => bail!("the client driver stopped"),
            },
            () = resend => {
                counts.resends += 1;
                sent_once_at = None;
                client.send(records::request(request_id(next_seq), MESSAGE_LEN))?;
                resend_at = Some(tokio::time::Instant::now() + app_timeout);
            }
            input = control.recv() => match input {
                Some(Input::Control(line)) => {
                    let mut words = line.split_whitespace();
                    match (words.next(), words.next()) {
                        (Some("stop"), _) => break,
                        (Some("down"), Some(name)) => {
                            up.insert(name.to_owned(), false);
                            if !done {
                                counts.outages += 1;
                                // Another interface is up: the routes already lead there.
                                if !reconnects && up.values().any(|u| *u) {
                                    counts.resends += 1;
                                    sent_once_at = None;
                                    client.send(records::request(request_id(next_seq), MESSAGE_LEN))?;
                                    resend_at = Some(tokio::time::Instant::now() + app_timeout);
                                }
                            }
                        }
                        (Some("up"), Some(name)) => {
                            let none_was_up = !up.values().any(|u| *u);
                            up.insert(name.to_owned(), true);
                            // The message went nowhere while every interface was down.
                            if none_was_up && !reconnects && !done {
                                counts.resends += 1;
                                sent_once_at = None;
                                client.send(records::request(request_id(next_seq), MESSAGE_LEN))?;
                                resend_at = Some(tokio::time::Instant::now() + app_timeout);
                            }
                        }
                        _ => {}
                    }
                }
                Some(Input::Datagram { .. }) => {}
                Some(Input::Hangup) | None => break,
            },
        }
    }
    report(&acks, &counts);
    Ok(())
}

fn report(acks: &[u32], counts: &ClientCounts) {
    let result = serde_json::json!({
        "acks": acks,
        "handshakes": counts.handshakes,
        "resumed_handshakes": counts.resumed_handshakes,
        "reconnections": counts.reconnections,
        "outages": counts.outages,
        "resends": counts.resends,
        "fastest_round_trip_ns": counts.fastest_round_trip.map(|d| d.as_nanos() as u64),
    });
    say(&format!("result {result}"));
}

/// Waits for `stop` (or the end of the input), then reports.
async fn report_after_stop(
    control: &mut mpsc::UnboundedReceiver<Input>,
    acks: &[u32],
    counts: &ClientCounts,
) -> anyhow::Result<()> {
    loop {
        match control.recv().await {
            Some(Input::Control(line)) if line == "stop" => break,
            Some(Input::Hangup) | None => break,
            Some(_) => {}
        }
    }
    report(acks, counts);
    Ok(())
}

/// Request `seq` as the simulated E1's client names it (`apps::records`); this client sends each
/// request once per session.
fn request_id(seq: u32) -> RequestId {
    RequestId { seq: seq as u16, attempt: 0 }
}
