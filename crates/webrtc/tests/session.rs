//! Whole data-channel sessions in memory: our offerer ([`Client`]) against our answerer
//! ([`Server`]) through ICE, DTLS (both versions), SCTP and DCEP, on a network with a fixed
//! delay and a virtual clock, lossless unless a test makes it lose datagrams to the server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fastshake_core::{Instant, Transmit};
use fastshake_dtls::{NamedGroup, Versions, WallClock};
use fastshake_pki::generate::self_signed_p256;
use fastshake_webrtc::client::{Client, ClientConfig, Nomination, SctpSetup};
use fastshake_webrtc::dcep::ChannelType;
use fastshake_webrtc::ice::{Credentials, IceMode};
use fastshake_webrtc::peer::PeerEvent;
use fastshake_webrtc::server::{Server, ServerConfig, SessionId, ANSWER_RANDOM_LEN};
use fastshake_webrtc::stun::{Class, Message};

const UNIX: u64 = 1_800_000_000;
const ONE_WAY: Duration = Duration::from_millis(5);

fn clock() -> WallClock {
    WallClock { at: Instant::ZERO, unix_secs: UNIX }
}

struct Net {
    now: Instant,
    client: Client,
    server: Server,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    wire: VecDeque<(Instant, Transmit, bool)>,
    client_events: Vec<PeerEvent>,
    /// When each of `client_events` was taken.
    client_event_times: Vec<Instant>,
    server_events: Vec<(SessionId, PeerEvent)>,
    echo: bool,
    /// Every datagram put on the wire: when, whether to the server, and its bytes.
    sent: Vec<(Instant, bool, Vec<u8>)>,
    /// Every nth datagram to the server is lost (counted from when it was set).
    lose_every: Option<(usize, usize)>,
}

fn server(versions: Versions) -> Server {
    server_in(versions, IceMode::Lite)
}

fn server_in(versions: Versions, ice_mode: IceMode) -> Server {
    let (key, fingerprint) = self_signed_p256(UNIX, 30).unwrap();
    Server::new(ServerConfig {
        certified_key: Arc::new(key),
        fingerprint,
        addresses: vec!["127.0.0.1:40000".parse().unwrap()],
        versions,
        groups: NamedGroup::WITH_HYBRID.to_vec(),
        wall_clock: clock(),
        max_sessions: 4,
        ice_mode,
        dtls_in_stun: ServerConfig::DTLS_IN_STUN_DEFAULT,
    })
}

fn client_config(versions: Versions, groups: &[NamedGroup]) -> ClientConfig {
    let (key, fingerprint) = self_signed_p256(UNIX, 30).unwrap();
    ClientConfig {
        credentials: Credentials::from_random(&[3; Credentials::RANDOM_LEN]),
        certified_key: Arc::new(key),
        fingerprint,
        versions,
        groups: groups.to_vec(),
        wall_clock: clock(),
        tiebreaker: 42,
        nomination: Nomination::Aggressive,
        sctp_setup: SctpSetup::Regular,
    }
}

impl Net {
    /// A session: the client's offer answered by the server, checks started.
    fn new(server: Server, client: ClientConfig) -> Net {
        let client_addr: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let server_addr = server.config().addresses[0];
        let mut net = Net {
            now: Instant::from_millis(1_000),
            client: Client::new(client, client_addr, [7; 32]),
            server,
            client_addr,
            server_addr,
            wire: VecDeque::new(),
            client_events: Vec::new(),
            client_event_times: Vec::new(),
            server_events: Vec::new(),
            echo: true,
            sent: Vec::new(),
            lose_every: None,
        };
        let offer = net.client.offer(1);
        let (_, answer) = net.server.answer(&offer, server_addr, &[9; ANSWER_RANDOM_LEN]).expect("answer");
        net.client.accept_answer(net.now, &answer).expect("the answer is taken");
        net.collect();
        net
    }

    fn collect(&mut self) {
        while let Some(t) = self.client.poll_transmit() {
            self.sent.push((self.now, true, t.payload.clone()));
            if let Some((n, count)) = self.lose_every.as_mut() {
                *count += 1;
                if count.is_multiple_of(*n) {
                    continue;
                }
            }
            self.wire.push_back((self.now + ONE_WAY, t, true));
        }
        while let Some((id, e)) = self.server.poll_event() {
            if let (true, PeerEvent::Message { stream, data, binary }) = (self.echo, &e) {
                self.server.send(self.now, id, *stream, data, *binary).expect("echo");
            }
            self.server_events.push((id, e));
        }
        while let Some(t) = self.server.poll_transmit() {
            self.sent.push((self.now, false, t.payload.clone()));
            self.wire.push_back((self.now + ONE_WAY, t, false));
        }
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
            self.client_event_times.push(self.now);
        }
    }

    /// Runs until `done` holds or `limit` of virtual time passed.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Net) -> bool) -> bool {
        let end = self.now + limit;
        while !done(self) {
            let next_wire = self.wire.front().map(|(t, _, _)| *t);
            let next = [next_wire, self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|t| *t <= end) else { return false };
            self.now = self.now.max(next);
            if next_wire == Some(next) {
                let (_, mut t, to_server) = self.wire.pop_front().unwrap();
                if to_server {
                    self.server.handle_datagram(self.now, self.client_addr, &mut t.payload);
                } else {
                    self.client.handle_datagram(self.now, self.server_addr, &mut t.payload);
                }
            } else {
                self.client.handle_timeout(self.now);
                self.server.handle_timeout(self.now);
            }
            self.collect();
        }
        true
    }

    fn channel_acked(&self) -> Option<u16> {
        self.client_events.iter().find_map(|e| match e {
            PeerEvent::ChannelAcked { stream } => Some(*stream),
            _ => None,
        })
    }

    fn echoes(&self) -> Vec<Vec<u8>> {
        self.client_events
            .iter()
            .filter_map(|e| match e {
                PeerEvent::Message { data, .. } => Some(data.clone()),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn a_session_opens_and_echoes_every_message_once_in_either_version() {
    for (versions, group) in [(Versions::Dtls13, Some(NamedGroup::X25519MlKem768)), (Versions::Dtls12, None)]
    {
        let groups = [NamedGroup::X25519MlKem768, NamedGroup::X25519];
        let mut net = Net::new(server(Versions::Both), client_config(versions, &groups));
        net.client
            .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
            .expect("a channel opens after the answer");
        assert!(
            net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()),
            "{versions:?}: channel open"
        );
        let stream = net.channel_acked().unwrap();
        assert_eq!(stream % 2, 0, "the DTLS client opens even stream ids (RFC 8832 §6)");
        let sent: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 100 + usize::from(i) * 700]).collect();
        for m in &sent {
            net.client.send(net.now, stream, m, true).unwrap();
        }
        assert!(
            net.run_until(Duration::from_secs(5), |n| n.echoes().len() == sent.len()),
            "{versions:?}: echoes"
        );
        assert_eq!(net.echoes(), sent, "{versions:?}: every message once, in order, intact");

        let summary = net
            .client_events
            .iter()
            .find_map(|e| match e {
                PeerEvent::DtlsConnected(s) => Some(s.clone()),
                _ => None,
            })
            .expect("DTLS connected");
        assert_eq!(summary.version, versions);
        assert_eq!(summary.group, group, "{versions:?}: the hybrid group when 1.3");
        assert!(!summary.hello_retry, "ICE proved the address: no cookie round trip: {summary:?}");
        assert_eq!(summary.retransmissions, 0, "{versions:?}: nothing resent on a lossless path");
        let opened = net
            .server_events
            .iter()
            .any(|(_, e)| matches!(e, PeerEvent::ChannelOpened { label, .. } if label == "echo"));
        assert!(opened, "the server saw the channel");
    }
}

#[test]
fn a_certificate_other_than_the_offer_names_ends_the_session_with_a_fatal_alert() {
    // The offer names one certificate, the DTLS handshake shows another.
    let mut config = client_config(Versions::Both, &[NamedGroup::X25519]);
    let (_, other_fingerprint) = self_signed_p256(UNIX, 30).unwrap();
    config.fingerprint = other_fingerprint;
    let mut net = Net::new(server(Versions::Both), config);
    net.client
        .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    net.run_until(Duration::from_secs(5), |n| n.client.is_closed());
    let server_closed = net.server_events.iter().find_map(|(_, e)| match e {
        PeerEvent::Closed(why) => Some(why.clone()),
        _ => None,
    });
    let why = server_closed.expect("the server ends the session");
    assert!(why.contains("bad_certificate") || why.contains("fingerprint"), "{why}");
    assert!(net.client.is_closed(), "the client learns of it from the alert: {:?}", net.client_events);
    assert!(net.echoes().is_empty() && net.channel_acked().is_none(), "no channel, no data");
    assert!(net.server.is_empty(), "the session is gone");
}

#[test]
fn dtls_from_an_address_no_check_vouched_for_is_dropped() {
    let mut net = Net::new(server(Versions::Both), client_config(Versions::Dtls13, &[NamedGroup::X25519]));
    // A ClientHello-looking record from a stranger, before and after the session is up.
    let stranger: SocketAddr = "127.0.0.1:50001".parse().unwrap();
    let mut record = vec![22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0];
    net.server.handle_datagram(net.now, stranger, &mut record);
    assert!(net.server.poll_transmit().is_none(), "no answer to an unchecked address");
    net.client
        .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()));
    let mut record = vec![23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9, 0, 4, 1, 2, 3, 4];
    net.server.handle_datagram(net.now, stranger, &mut record);
    assert!(net.server.poll_transmit().is_none());
    net.client.send(net.now, net.channel_acked().unwrap(), b"still here", false).unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.echoes().len() == 1), "the session goes on");
}

#[test]
fn offers_the_server_cannot_answer_are_refused_with_the_reason() {
    let mut s = server(Versions::Both);
    let local = s.config().addresses[0];
    let err = s.answer("v=0\r\n", local, &[1; ANSWER_RANDOM_LEN]).unwrap_err().to_string();
    assert!(err.contains("offer"), "{err}");
    let offer =
        Client::new(client_config(Versions::Both, &[]), "127.0.0.1:1".parse().unwrap(), [1; 32]).offer(1);
    for i in 0..4u8 {
        s.answer(&offer, local, &[i; ANSWER_RANDOM_LEN]).expect("room for four");
    }
    let err = s.answer(&offer, local, &[9; ANSWER_RANDOM_LEN]).unwrap_err().to_string();
    assert!(err.contains("no room"), "{err}");
}

#[test]
fn a_channel_closed_by_either_side_is_reset_both_ways_and_its_id_opens_again() {
    let mut net = Net::new(server(Versions::Both), client_config(Versions::Dtls13, &[NamedGroup::X25519]));
    net.client
        .open_channel(net.now, "first", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()));
    let stream = net.channel_acked().unwrap();
    net.client.send(net.now, stream, b"before the close", false).unwrap();
    net.client.close_channel(net.now, stream).unwrap();
    let closed = |n: &Net| n.client_events.iter().any(|e| matches!(e, PeerEvent::ChannelClosed { .. }));
    let server_closed =
        |n: &Net| n.server_events.iter().any(|(_, e)| matches!(e, PeerEvent::ChannelClosed { .. }));
    assert!(
        net.run_until(Duration::from_secs(5), |n| closed(n) && server_closed(n)),
        "{:?}",
        net.client_events
    );
    assert_eq!(net.echoes(), [b"before the close".to_vec()], "what was sent before the reset arrives first");
    assert!(
        net.server_events
            .iter()
            .any(|(_, e)| matches!(e, PeerEvent::ChannelClosed { label, .. } if label == "first")),
        "the server closed its side too"
    );
    assert!(net.client.channels().get(stream).is_none(), "the id is free");

    // The same id again, then closed from the server's side.
    net.client_events.clear();
    net.client
        .open_channel(net.now, "second", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()));
    assert_eq!(net.channel_acked(), Some(stream), "the freed id is taken again");
    let (session, _) = net.server_events[0].clone();
    net.server_events.clear();
    net.server.close_channel(net.now, session, stream).unwrap();
    net.collect();
    assert!(
        net.run_until(Duration::from_secs(5), |n| closed(n) && server_closed(n)),
        "{:?}",
        net.client_events
    );
    net.client.send(net.now, stream, b"x", false).expect_err("a closed channel takes no message");
}

#[test]
fn between_fastshake_peers_the_alternative_handshake_opens_sctp_with_the_channel_in_the_init() {
    let mut config = client_config(Versions::Dtls13, &[NamedGroup::X25519]);
    config.sctp_setup = SctpSetup::Alternative;
    let mut net = Net::new(server(Versions::Both), config);
    net.client
        .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()));
    let opened = net.server_events.iter().find_map(|(_, e)| match e {
        PeerEvent::SctpConnected { handshake, zero_rtt } => Some((*handshake, *zero_rtt)),
        _ => None,
    });
    assert_eq!(
        opened,
        Some((fastshake_sctp::HandshakeKind::Cookieless, 1)),
        "DTLS proved the peer: the INIT opened the association and carried the OPEN"
    );
    let stream = net.channel_acked().unwrap();
    net.client.send(net.now, stream, b"ping", true).unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.echoes().len() == 1));
}

impl Net {
    /// When the first datagram from the server (`to_server` false) or the client matching
    /// `what` was sent.
    fn first_sent(&self, to_server: bool, what: impl Fn(&[u8]) -> bool) -> Option<Instant> {
        self.sent.iter().find(|(_, to, bytes)| *to == to_server && what(bytes)).map(|(at, _, _)| *at)
    }
}

/// A DTLS record (RFC 7983: first byte 20 to 63).
fn is_dtls(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|b| (20..=63).contains(b))
}

/// A STUN Binding request, and whether it carries USE-CANDIDATE.
fn stun_request(bytes: &[u8]) -> Option<bool> {
    let message = Message::parse(bytes).ok()?;
    (message.class() == Class::Request).then(|| message.use_candidate())
}

#[test]
fn a_full_mode_server_checks_back_and_the_session_opens_in_either_version() {
    for versions in [Versions::Dtls13, Versions::Dtls12] {
        let groups = [NamedGroup::X25519MlKem768, NamedGroup::X25519];
        let mut net = Net::new(server_in(Versions::Both, IceMode::Full), client_config(versions, &groups));
        net.client
            .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
            .expect("a channel opens after the answer");
        assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()), "{versions:?}");
        let stream = net.channel_acked().unwrap();
        net.client.send(net.now, stream, b"full", true).unwrap();
        assert!(net.run_until(Duration::from_secs(5), |n| n.echoes().len() == 1), "{versions:?}");
        // The server sent its own (triggered) check, without USE-CANDIDATE: it is controlled.
        let check = net
            .sent
            .iter()
            .find_map(|(_, to_server, bytes)| (!to_server).then(|| stun_request(bytes)).flatten());
        assert_eq!(check, Some(false), "{versions:?}: a triggered check from the server");
        let selected = net.server_events.iter().any(|(_, e)| matches!(e, PeerEvent::Selected(_)));
        assert!(selected, "{versions:?}: the client's nomination selected the pair");
    }
    // A lite server sends no check at all, and the answer says a=ice-lite.
    let mut net = Net::new(server(Versions::Both), client_config(Versions::Dtls13, &[NamedGroup::X25519]));
    net.client
        .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()));
    assert!(net.sent.iter().all(|(_, to_server, bytes)| *to_server || stun_request(bytes).is_none()));
}

#[test]
fn a_full_mode_server_answers_the_client_hello_before_the_nomination_and_a_lite_one_after() {
    // The client nominates 50 ms after its first check succeeded, as Chromium does (48 ms).
    let delay = Duration::from_millis(50);
    let mut first_flight = Vec::new();
    for mode in [IceMode::Full, IceMode::Lite] {
        let mut config = client_config(Versions::Dtls13, &[NamedGroup::X25519]);
        config.nomination = Nomination::Regular { delay };
        let mut net = Net::new(server_in(Versions::Both, mode), config);
        let start = net.now;
        net.client
            .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
            .expect("a channel opens after the answer");
        let up = |n: &Net| n.channel_acked().is_some() && n.client.selected().is_some();
        assert!(net.run_until(Duration::from_secs(5), up), "{mode:?}");
        let nomination = net.first_sent(true, |b| stun_request(b) == Some(true)).expect("a nominating check");
        let server_dtls = net.first_sent(false, is_dtls).expect("the server's first flight");
        let client_hello = net.first_sent(true, is_dtls).expect("a ClientHello");
        assert!(client_hello < nomination, "{mode:?}: the client starts DTLS on the valid pair (§12.1)");
        match mode {
            IceMode::Full => {
                assert!(
                    server_dtls < nomination,
                    "full: the flight goes to a valid, not yet selected pair (§12.1): {server_dtls:?} {nomination:?}"
                );
                assert_eq!(
                    server_dtls.saturating_duration_since(client_hello),
                    ONE_WAY,
                    "full: answered as soon as the ClientHello arrived"
                );
            }
            IceMode::Lite => assert!(
                server_dtls > nomination,
                "lite: the flight waits for the nomination (§12.1.1): {server_dtls:?} {nomination:?}"
            ),
        }
        first_flight.push(server_dtls.saturating_duration_since(start));
        let stream = net.channel_acked().unwrap();
        net.client.send(net.now, stream, b"after", true).unwrap();
        assert!(net.run_until(Duration::from_secs(5), |n| n.echoes().len() == 1), "{mode:?}");
    }
    assert!(
        first_flight[1] >= first_flight[0] + delay - ONE_WAY * 2,
        "the full server's first flight leaves about the nomination delay sooner: {first_flight:?}"
    );
}

#[test]
fn with_snap_the_association_opens_from_the_two_inits_in_sdp_and_no_handshake_packet_goes() {
    let mut config = client_config(Versions::Dtls13, &[NamedGroup::X25519]);
    config.sctp_setup = SctpSetup::Snap;
    let mut net = Net::new(server(Versions::Both), config);
    net.client
        .open_channel(net.now, "echo", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.channel_acked().is_some()));
    let opened_by = |e: &PeerEvent| match e {
        PeerEvent::SctpConnected { handshake, .. } => Some(*handshake),
        _ => None,
    };
    let kinds: Vec<_> = net
        .server_events
        .iter()
        .filter_map(|(_, e)| opened_by(e))
        .chain(net.client_events.iter().filter_map(opened_by))
        .collect();
    assert_eq!(kinds, [fastshake_sctp::HandshakeKind::Snap; 2], "both sides opened by SNAP");
    let stream = net.channel_acked().unwrap();
    net.client.send(net.now, stream, b"ping", true).unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.echoes().len() == 1));
}

impl Net {
    /// The streams of the channels the client opened and the server acknowledged.
    fn acked_streams(&self) -> Vec<u16> {
        self.client_events
            .iter()
            .filter_map(|e| match e {
                PeerEvent::ChannelAcked { stream } => Some(*stream),
                _ => None,
            })
            .collect()
    }

    /// The first bytes of the messages the server received on `stream`, in order.
    fn received_on(&self, stream: u16) -> Vec<u8> {
        self.server_events
            .iter()
            .filter_map(|(_, e)| match e {
                PeerEvent::Message { stream: s, data, .. } if *s == stream => Some(data[0]),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn over_a_lossy_wire_an_unreliable_channel_loses_messages_without_stalling_and_a_reliable_one_none() {
    let mut net = Net::new(server(Versions::Both), client_config(Versions::Dtls13, &[NamedGroup::X25519]));
    net.echo = false;
    let unreliable = ChannelType::PartialReliableRexmit { ordered: true, max_retransmits: 0 };
    net.client.open_channel(net.now, "unreliable", unreliable).expect("a channel opens after the answer");
    net.client
        .open_channel(net.now, "reliable", ChannelType::Reliable { ordered: true })
        .expect("a channel opens after the answer");
    assert!(net.run_until(Duration::from_secs(5), |n| n.acked_streams().len() == 2), "both channels open");
    let (lossy, safe) = (net.acked_streams()[0], net.acked_streams()[1]);
    let opened = net.server_events.iter().any(|(_, e)| {
        matches!(e, PeerEvent::ChannelOpened { stream, channel_type, .. } if *stream == lossy && *channel_type == unreliable)
    });
    assert!(opened, "the server knows the channel's type from the OPEN");
    // Every third datagram to the server is lost: messages of 1000 bytes, one per packet, go
    // alternately on each channel.
    net.lose_every = Some((3, 0));
    for i in 0..30u8 {
        let mut data = vec![0x5A; 1000];
        data[0] = i;
        net.client.send(net.now, lossy, &data, true).unwrap();
        net.client.send(net.now, safe, &data, true).unwrap();
    }
    let all: Vec<u8> = (0..30).collect();
    assert!(
        net.run_until(Duration::from_secs(60), |n| n.received_on(safe) == all),
        "the reliable channel gets everything: {:?}",
        net.received_on(safe)
    );
    // What is still on its way lands: messages held behind an abandoned one wait for a
    // FORWARD-TSN, and a lost FORWARD-TSN goes again on T3-rtx, whose timeout doubles.
    net.run_until(Duration::from_secs(120), |_| false);
    let got = net.received_on(lossy);
    assert!(!got.is_empty() && got.len() < all.len(), "the unreliable channel lost messages: {got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, none twice: {got:?}");
    // Nothing waits for what was lost: the next message on it arrives at once.
    net.lose_every = None;
    net.client.send(net.now, lossy, &[200; 10], true).unwrap();
    assert!(net.run_until(Duration::from_secs(1), |n| n.received_on(lossy).last() == Some(&200)));
    assert_eq!(net.received_on(lossy).len(), got.len() + 1);
}

/// Round trips from the client's DTLS completion to the echo of a message it sent right after
/// opening its channel (before the association existed).
fn round_trips_after_dtls(setup: SctpSetup, versions: Versions) -> f64 {
    let mut config = client_config(versions, &[NamedGroup::X25519]);
    config.sctp_setup = setup;
    let mut net = Net::new(server(Versions::Both), config);
    let stream = net.client.open_channel(net.now, "first", ChannelType::RELIABLE).expect("open");
    net.client.send(net.now, stream, b"first byte", true).expect("a message may follow the OPEN at once");
    assert!(net.run_until(Duration::from_secs(5), |n| !n.echoes().is_empty()), "{setup:?}: echoed");
    let at = |f: &dyn Fn(&PeerEvent) -> bool| {
        net.client_events.iter().position(f).map(|i| net.client_event_times[i]).expect("event")
    };
    let dtls = at(&|e| matches!(e, PeerEvent::DtlsConnected(_)));
    let echo = at(&|e| matches!(e, PeerEvent::Message { .. }));
    assert_eq!(net.echoes(), vec![b"first byte".to_vec()], "{setup:?}: once");
    (echo - dtls).as_secs_f64() / (2.0 * ONE_WAY.as_secs_f64())
}

#[test]
fn the_first_message_rides_with_the_sctp_handshake_so_it_costs_no_round_trip_of_its_own() {
    // Seed 004's alternative handshake and SNAP: the INIT (or the first DATA) carries the OPEN
    // and the message; the echo is one round trip after DTLS.
    for versions in [Versions::Dtls13, Versions::Dtls12] {
        for setup in [SctpSetup::Alternative, SctpSetup::Snap] {
            assert_eq!(round_trips_after_dtls(setup, versions), 1.0, "{setup:?} {versions:?}");
        }
        // RFC 9260: INIT and INIT-ACK, then the COOKIE-ECHO carries the OPEN and the message
        // (RFC 9260 §5.1, RFC 8831 §6.6): two round trips, not four.
        assert_eq!(round_trips_after_dtls(SctpSetup::Regular, versions), 2.0, "regular {versions:?}");
    }
}
