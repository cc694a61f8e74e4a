//! DTLS in STUN (draft-hancke-webrtc-sped) against our answerer, in memory: a minimal offerer
//! that behaves as Chromium with `WebRTC-IceHandshakeDtls` (its DTLS client starts before ICE,
//! its datagrams ride its checks round robin, it acks what it got, it falls back when the
//! answerer's response carries neither attribute), on a lossless network with a fixed delay
//! and a virtual clock.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fastshake_core::{Instant, Transmit};
use fastshake_dtls as dtls;
use fastshake_dtls::{NamedGroup, Versions, WallClock};
use fastshake_pki::generate::self_signed_p256;
use fastshake_webrtc::ice::{Credentials, IceMode};
use fastshake_webrtc::peer::PeerEvent;
use fastshake_webrtc::sdp::{Fingerprint, Offer};
use fastshake_webrtc::server::{Server, ServerConfig, SessionId, ANSWER_RANDOM_LEN};
use fastshake_webrtc::sped::SpedState;
use fastshake_webrtc::stun::{
    attr, dtls_datagram_crc, Class, IntegrityKey, Message, MessageBuilder, Method, TransactionId,
};

const UNIX: u64 = 1_800_000_000;
const ONE_WAY: Duration = Duration::from_millis(20);
const RTT: Duration = Duration::from_millis(40);
/// Chromium's pace of checks on a pair not yet writable (about 48 ms).
const CHECK_INTERVAL: Duration = Duration::from_millis(50);
const CHECKS: u32 = 8;

fn clock() -> WallClock {
    WallClock { at: Instant::ZERO, unix_secs: UNIX }
}

fn server(ice_mode: IceMode, dtls_in_stun: bool) -> Server {
    let (key, fingerprint) = self_signed_p256(UNIX, 30).unwrap();
    Server::new(ServerConfig {
        certified_key: Arc::new(key),
        fingerprint,
        addresses: vec!["127.0.0.1:40000".parse().unwrap()],
        versions: Versions::Both,
        groups: NamedGroup::WITH_HYBRID.to_vec(),
        wall_clock: clock(),
        max_sessions: 4,
        ice_mode,
        dtls_in_stun,
    })
}

/// A response's META-DTLS-IN-STUN-ACK list and META-DTLS-IN-STUN datagram, as they came.
type SpedAttributes = (Option<Vec<u32>>, Option<Vec<u8>>);

/// What the offerer does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// No DTLS in STUN: the ClientHello leaves once ICE is writable, in plain.
    Plain,
    /// Embeds and acks, as Chromium with the trial.
    Sped,
}

/// The offerer's SPED state, Chromium's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Tentative,
    Confirmed,
    Complete,
    Off,
}

struct Offerer {
    mode: Mode,
    phase: Phase,
    credentials: Credentials,
    fingerprint: [u8; 32],
    dtls_config: Arc<dtls::ClientConfig>,
    dtls: Option<dtls::Connection>,
    connected: Option<Instant>,
    server_key: Option<IntegrityKey>,
    username: String,
    writable: bool,
    nominated: bool,
    checks_sent: u32,
    next_check: Instant,
    /// What the check of each transaction embedded: its CRC (for the implicit ack).
    embedded: HashMap<TransactionId, Option<u32>>,
    pending: Vec<(u32, Vec<u8>)>,
    next: usize,
    received: Vec<u32>,
    out: VecDeque<Vec<u8>>,
    /// Every response: (ACK list, DATA) as they came.
    responses: Vec<SpedAttributes>,
    /// The ACK list of every check the (full) server sent.
    server_checks: Vec<Option<Vec<u32>>>,
    /// Sends what is unacked in plain once writable (Chromium's FlushPendingDtlsPacket).
    flush: bool,
}

impl Offerer {
    fn new(mode: Mode, versions: Versions, groups: &[NamedGroup]) -> Offerer {
        let (key, fingerprint) = self_signed_p256(UNIX, 30).unwrap();
        let dtls_config = dtls::ClientConfig {
            versions,
            groups: groups.to_vec(),
            certified_key: Some(Arc::new(key)),
            wall_clock: Some(clock()),
            address_proven: true,
            suites: vec![dtls::CipherSuite::EcdheEcdsaWithAes128GcmSha256],
            srtp_profiles: fastshake_webrtc::peer::SRTP_PROFILES.to_vec(),
            ..Default::default()
        };
        Offerer {
            mode,
            phase: Phase::Tentative,
            credentials: Credentials::from_random(&[3; Credentials::RANDOM_LEN]),
            fingerprint,
            dtls_config: Arc::new(dtls_config),
            dtls: None,
            connected: None,
            server_key: None,
            username: String::new(),
            writable: false,
            nominated: false,
            checks_sent: 0,
            next_check: Instant::ZERO,
            embedded: HashMap::new(),
            pending: Vec::new(),
            next: 0,
            received: Vec::new(),
            out: VecDeque::new(),
            responses: Vec::new(),
            server_checks: Vec::new(),
            flush: true,
        }
    }

    fn offer(&self, options: &str) -> String {
        let mut lines = vec![
            "v=0".to_string(),
            "o=- 1 1 IN IP4 0.0.0.0".into(),
            "s=-".into(),
            "t=0 0".into(),
            "a=group:BUNDLE 0".into(),
            "m=application 9 UDP/DTLS/SCTP webrtc-datachannel".into(),
            "c=IN IP4 0.0.0.0".into(),
            format!("a=ice-ufrag:{}", self.credentials.ufrag()),
            format!("a=ice-pwd:{}", self.credentials.pwd()),
        ];
        if !options.is_empty() {
            lines.push(format!("a=ice-options:{options}"));
        }
        lines.extend([
            format!("a=fingerprint:{}", Fingerprint::sha256(self.fingerprint)),
            "a=setup:actpass".into(),
            "a=mid:0".into(),
            "a=sctp-port:5000".into(),
        ]);
        lines.join("\r\n") + "\r\n"
    }

    fn sped_on(&self) -> bool {
        self.mode == Mode::Sped && matches!(self.phase, Phase::Tentative | Phase::Confirmed)
    }

    fn accept_answer(&mut self, now: Instant, answer: &str, trust: [u8; 32]) {
        let answer = Offer::parse(answer).unwrap();
        self.server_key = Some(IntegrityKey::short_term(&answer.data.ice_pwd));
        self.username = format!("{}:{}", answer.data.ice_ufrag, self.credentials.ufrag());
        let mut config = (*self.dtls_config).clone();
        config.trust_anchors = Some(Arc::new(dtls::TrustAnchors::pinned_sha256([trust]).unwrap()));
        self.dtls_config = Arc::new(config);
        self.next_check = now;
        // With DTLS in STUN the handshake starts before ICE (Chromium's StartSSL before
        // writable), so the ClientHello can ride the first check.
        if self.mode == Mode::Sped {
            self.start_dtls(now);
        }
    }

    fn start_dtls(&mut self, now: Instant) {
        let server: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        self.dtls = Some(dtls::Connection::client(self.dtls_config.clone(), now, server, [5; 32]));
        self.pump(now);
    }

    fn pump(&mut self, now: Instant) {
        let Some(dtls) = self.dtls.as_mut() else { return };
        while let Some(event) = dtls.poll_event() {
            if let dtls::Event::Connected(_) = event {
                self.connected.get_or_insert(now);
            }
        }
        let mut flight = Vec::new();
        while let Some(t) = dtls.poll_transmit(now) {
            flight.push(t.payload);
        }
        if flight.is_empty() {
            return;
        }
        if self.sped_on() && self.connected.is_none() {
            self.pending = flight.iter().map(|d| (dtls_datagram_crc(d), d.clone())).collect();
            self.next = 0;
        }
        // Not writable yet: dropped, as Chromium's ICE transport drops them; they ride checks.
        if self.writable {
            self.out.extend(flight);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let check = (self.server_key.is_some() && self.checks_sent < CHECKS).then_some(self.next_check);
        let dtls = self.dtls.as_ref().and_then(dtls::Connection::poll_timeout);
        [check, dtls].into_iter().flatten().min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(dtls) = self.dtls.as_mut() {
            dtls.handle_timeout(now);
        }
        self.pump(now);
        if self.server_key.is_some() && self.checks_sent < CHECKS && self.next_check <= now {
            self.send_check();
            self.next_check = now + CHECK_INTERVAL;
        }
    }

    fn send_check(&mut self) {
        self.checks_sent += 1;
        let transaction = TransactionId([self.checks_sent as u8; 12]);
        let builder = MessageBuilder::new(Class::Request, Method::Binding, transaction)
            .username(&self.username)
            .priority(1_853_824_767)
            .ice_controlling(42);
        // Regular nomination: once a check succeeded, the next ones nominate.
        let mut builder = if self.writable { builder.use_candidate() } else { builder };
        let mut embedded = None;
        if self.sped_on() {
            builder = builder.dtls_in_stun_ack(&self.received);
            if !self.pending.is_empty() {
                let (crc, datagram) = &self.pending[self.next % self.pending.len()];
                self.next += 1;
                embedded = Some(*crc);
                builder = builder.dtls_in_stun(datagram);
            }
        }
        self.embedded.insert(transaction, embedded);
        let key = self.server_key.as_ref().unwrap();
        self.out.push_back(builder.message_integrity(key).fingerprint().into_bytes().unwrap());
    }

    /// A full server's check: answered, with our ACK while on, as Chromium does.
    fn answer_check(&mut self, request: &Message<'_>) {
        let key = IntegrityKey::short_term(self.credentials.pwd());
        request.verify_integrity(&key).expect("the server keys its checks with our password");
        self.server_checks.push(request.dtls_in_stun_ack().unwrap());
        let from: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let builder = MessageBuilder::new(Class::SuccessResponse, Method::Binding, request.transaction_id())
            .xor_mapped_address(from);
        let mut builder = builder;
        if self.sped_on() {
            // Chromium's responses carry its ACK and its next pending datagram too, and it
            // takes the ACK of a request.
            if let Ok(Some(acks)) = request.dtls_in_stun_ack() {
                self.pending.retain(|(crc, _)| !acks.contains(crc));
            }
            builder = builder.dtls_in_stun_ack(&self.received);
            if !self.pending.is_empty() {
                let (_, datagram) = &self.pending[self.next % self.pending.len()];
                self.next += 1;
                builder = builder.dtls_in_stun(datagram);
            }
        }
        self.out.push_back(builder.message_integrity(&key).fingerprint().into_bytes().unwrap());
    }

    fn handle_datagram(&mut self, now: Instant, datagram: &mut [u8]) {
        if datagram.first().is_some_and(|b| (20..=63).contains(b)) {
            if self.sped_on() {
                self.received.push(dtls_datagram_crc(datagram));
            }
            let from = "127.0.0.1:40000".parse().unwrap();
            if let Some(dtls) = self.dtls.as_mut() {
                dtls.handle_datagram(now, from, datagram);
            }
            self.pump(now);
            return;
        }
        let message = Message::parse(datagram).unwrap();
        if message.class() == Class::Request {
            self.answer_check(&message);
            return;
        }
        assert_eq!(message.class(), Class::SuccessResponse, "the server answers every check with success");
        message.verify_integrity(self.server_key.as_ref().unwrap()).unwrap();
        message.verify_fingerprint().unwrap();
        let acks = message.dtls_in_stun_ack().expect("a well-formed ACK");
        let data = message.dtls_in_stun().map(<[u8]>::to_vec);
        self.responses.push((acks.clone(), data.clone()));
        if message.use_candidate() {
            unreachable!("responses carry no USE-CANDIDATE");
        }
        let embedded = self.embedded.get(&message.transaction_id()).copied().flatten();
        if self.writable {
            self.nominated = true;
        }
        if self.sped_on() {
            match (&acks, &data) {
                // Chromium: neither attribute from the peer: it does not speak SPED.
                (None, None) if self.phase == Phase::Tentative => {
                    self.phase = Phase::Off;
                    self.pending.clear();
                }
                (Some(_), None) if self.connected.is_some() => self.phase = Phase::Complete,
                _ => self.phase = Phase::Confirmed,
            }
            if let Some(acks) = &acks {
                // A response with an ACK also acks what its request embedded (implicit ack).
                self.pending.retain(|(crc, _)| !acks.contains(crc) && Some(*crc) != embedded);
            }
            if let Some(mut data) = data {
                self.received.push(dtls_datagram_crc(&data));
                let from = "127.0.0.1:40000".parse().unwrap();
                if let Some(dtls) = self.dtls.as_mut() {
                    dtls.handle_datagram(now, from, &mut data);
                }
            }
            let keep = self.received.len().saturating_sub(4);
            self.received.drain(..keep);
        }
        if !self.writable {
            self.writable = true;
            match self.dtls {
                None => self.start_dtls(now),
                // Chromium's FlushPendingDtlsPacket: what is unacked goes in plain once.
                Some(_) if self.flush => self.out.extend(self.pending.iter().map(|(_, d)| d.clone())),
                Some(_) => {}
            }
        }
        self.pump(now);
    }
}

struct Net {
    now: Instant,
    start: Instant,
    offerer: Offerer,
    server: Server,
    client_addr: SocketAddr,
    wire: VecDeque<(Instant, Vec<u8>, bool)>,
    server_events: Vec<(SessionId, PeerEvent)>,
    /// Every datagram: when sent, whether to the server, its bytes.
    sent: Vec<(Instant, bool, Vec<u8>)>,
    session: SessionId,
}

impl Net {
    fn new(offerer: Offerer, mut server: Server, options: &str) -> (Net, String) {
        let now = Instant::from_millis(1_000);
        let server_addr = server.config().addresses[0];
        let trust = server.config().fingerprint;
        let (session, answer) =
            server.answer(&offerer.offer(options), server_addr, &[9; ANSWER_RANDOM_LEN]).expect("answer");
        let mut net = Net {
            now,
            start: now,
            offerer,
            server,
            client_addr: "127.0.0.1:50000".parse().unwrap(),
            wire: VecDeque::new(),
            server_events: Vec::new(),
            sent: Vec::new(),
            session,
        };
        net.offerer.accept_answer(now, &answer, trust);
        net.offerer.handle_timeout(now);
        net.collect();
        (net, answer)
    }

    fn collect(&mut self) {
        while let Some(payload) = self.offerer.out.pop_front() {
            self.sent.push((self.now, true, payload.clone()));
            self.wire.push_back((self.now + ONE_WAY, payload, true));
        }
        while let Some(Transmit { payload, .. }) = self.server.poll_transmit() {
            self.sent.push((self.now, false, payload.clone()));
            self.wire.push_back((self.now + ONE_WAY, payload, false));
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
    }

    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Net) -> bool) -> bool {
        let end = self.now + limit;
        while !done(self) {
            let next_wire = self.wire.front().map(|(t, _, _)| *t);
            let next = [next_wire, self.offerer.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|t| *t <= end) else { return false };
            self.now = self.now.max(next);
            if next_wire == Some(next) {
                let (_, mut payload, to_server) = self.wire.pop_front().unwrap();
                if to_server {
                    self.server.handle_datagram(self.now, self.client_addr, &mut payload);
                } else {
                    self.offerer.handle_datagram(self.now, &mut payload);
                }
            } else {
                self.offerer.handle_timeout(self.now);
                self.server.handle_timeout(self.now);
            }
            self.collect();
        }
        true
    }

    fn server_connected(&self) -> bool {
        self.server_events.iter().any(|(_, e)| matches!(e, PeerEvent::DtlsConnected(_)))
    }

    fn in_stun(&self) -> Option<(u32, u32)> {
        self.server_events.iter().find_map(|(_, e)| match e {
            PeerEvent::DtlsInStun { received, sent } => Some((*received, *sent)),
            _ => None,
        })
    }

    /// Runs the handshake and a while after it; returns when the offerer connected.
    fn handshake(&mut self) -> Duration {
        let both = |n: &Net| n.offerer.connected.is_some() && n.server_connected();
        assert!(self.run_until(Duration::from_secs(5), both), "the handshake completes");
        // Let the remaining checks go, so the closing exchange runs.
        self.run_until(Duration::from_secs(2), |n| n.offerer.checks_sent >= CHECKS && n.wire.is_empty());
        self.offerer.connected.unwrap().saturating_duration_since(self.start)
    }

    fn sped_state(&self) -> SpedState {
        self.server.session(self.session).unwrap().dtls_in_stun().0
    }
}

fn is_handshake_record(datagram: &[u8], handshake_type: u8) -> bool {
    datagram.len() > 13 && datagram[0] == 22 && datagram[13] == handshake_type
}

#[test]
fn the_answer_echoes_the_sped_ice_options_of_the_offer_and_only_those() {
    let offerer = Offerer::new(Mode::Plain, Versions::Dtls13, &[NamedGroup::X25519]);
    let options_of = |answer: &str| Offer::parse(answer).unwrap().data.ice_options;
    for (offered, on, echoed) in [
        ("trickle sped googspedv1", true, vec!["sped", "googspedv1"]),
        ("googspedv1", true, vec!["googspedv1"]),
        ("trickle sped googspedv1", false, vec![]),
        ("trickle", true, vec![]),
        ("", true, vec![]),
    ] {
        let mut s = server(IceMode::Lite, on);
        let local = s.config().addresses[0];
        let (_, answer) = s.answer(&offerer.offer(offered), local, &[9; ANSWER_RANDOM_LEN]).unwrap();
        assert_eq!(options_of(&answer), echoed, "{offered:?}, enabled {on}");
        assert_eq!(answer.contains("a=ice-options"), !echoed.is_empty(), "{answer}");
    }
}

#[test]
fn the_server_flight_rides_the_response_to_the_check_that_carried_the_client_hello() {
    for (versions, mode) in [(Versions::Dtls13, IceMode::Lite), (Versions::Dtls13, IceMode::Full)] {
        let offerer = Offerer::new(Mode::Sped, versions, &[NamedGroup::X25519]);
        let (mut net, _) = Net::new(offerer, server(mode, true), "trickle sped googspedv1");
        let connected = net.handshake();
        let label = format!("{versions:?} {mode:?}");

        // Check 1 carried the whole ClientHello; its response acks it and carries the flight.
        let hello = net.sent.iter().find_map(|(_, to_server, bytes)| {
            let m = Message::parse(bytes).ok().filter(|_| *to_server)?;
            m.dtls_in_stun().map(<[u8]>::to_vec)
        });
        let hello = hello.expect("an embedded ClientHello");
        assert!(is_handshake_record(&hello, 1), "{label}");
        let (acks, data) = net.offerer.responses[0].clone();
        assert_eq!(acks, Some(vec![dtls_datagram_crc(&hello)]), "{label}: the ClientHello acked");
        let flight = data.expect("our flight rides the first response");
        assert!(is_handshake_record(&flight, 2), "{label}: a ServerHello");
        // One round trip: the check and its response carried the whole 1.3 handshake but the
        // client's Finished.
        assert_eq!(connected, RTT, "{label}: the client connected when the first response came");
        assert_eq!(net.in_stun(), Some((1, 1)), "{label}: the server reports the handshake went in STUN");

        // The offerer acked our flight, so nothing more rode; the closing ACK came once, then
        // the responses carry nothing.
        let tail: Vec<_> = net.offerer.responses[1..].to_vec();
        assert!(tail.iter().all(|(_, data)| data.is_none()), "{label}: acked, so not sent again: {tail:?}");
        let closing = tail.iter().position(|(acks, _)| acks.is_some()).expect("a closing ACK");
        assert!(tail[closing + 1..].iter().all(|(acks, _)| acks.is_none()), "{label}: {tail:?}");
        assert_eq!(net.sped_state(), SpedState::Complete, "{label}");
        assert_eq!(net.offerer.phase, Phase::Complete, "{label}");
        if mode == IceMode::Full {
            // Our own checks carry the ACK while on, so the offerer never reads a bare check
            // as "no SPED here" (Chromium switches off on one).
            let first = net.offerer.server_checks.first().expect("a triggered check");
            assert!(first.is_some(), "{label}: {:?}", net.offerer.server_checks);
        }
    }
}

#[test]
fn dtls_in_stun_saves_a_round_trip_in_either_version_against_a_lite_server() {
    for versions in [Versions::Dtls13, Versions::Dtls12] {
        let mut took = Vec::new();
        for mode in [Mode::Plain, Mode::Sped] {
            let offerer = Offerer::new(mode, versions, &[NamedGroup::X25519]);
            let (mut net, _) = Net::new(offerer, server(IceMode::Lite, true), "trickle sped googspedv1");
            took.push(net.handshake());
            let summary = net
                .server_events
                .iter()
                .find_map(|(_, e)| match e {
                    PeerEvent::DtlsConnected(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap();
            assert_eq!(summary.version, versions);
            assert_eq!(net.in_stun().is_some(), mode == Mode::Sped, "{versions:?} {mode:?}");
        }
        // Virtual time in round trips of the fixed-delay network, not a wall-clock measure.
        assert!(took[1] + RTT <= took[0], "{versions:?}: plain {:?}, in STUN {:?}", took[0], took[1]);
    }
}

#[test]
fn a_two_datagram_client_hello_is_taken_embedded_and_plain_and_the_server_hello_rides_the_next_response() {
    // The hybrid share makes Chromium 156's ClientHello two datagrams; so is ours.
    let groups = [NamedGroup::X25519MlKem768, NamedGroup::X25519];
    let offerer = Offerer::new(Mode::Sped, Versions::Dtls13, &groups);
    let (mut net, _) = Net::new(offerer, server(IceMode::Lite, true), "sped");
    net.handshake();
    let embedded: Vec<Vec<u8>> = net
        .sent
        .iter()
        .filter(|(_, to_server, _)| *to_server)
        .filter_map(|(_, _, bytes)| Message::parse(bytes).ok()?.dtls_in_stun().map(<[u8]>::to_vec))
        .collect();
    assert!(embedded.len() >= 2 && embedded[0] != embedded[1], "two fragments rode two checks");
    let (received, sent) = net.in_stun().expect("reported");
    assert!(received >= 1 && sent >= 1, "{received} {sent}");
    // Check 1 carried fragment 1: acked, nothing to send yet. Fragment 2 came in plain once
    // the offerer was writable (and again in check 2, a copy DTLS is not fed twice): the
    // response to check 2 carries the ServerHello.
    let responses = &net.offerer.responses;
    assert_eq!(responses[0], (Some(vec![dtls_datagram_crc(&embedded[0])]), None));
    let (acks, data) = &responses[1];
    assert!(acks.as_ref().is_some_and(|a| a.contains(&dtls_datagram_crc(&embedded[1]))), "{acks:?}");
    assert!(data.as_ref().is_some_and(|d| is_handshake_record(d, 2)), "the ServerHello");
    let summary = net.server_events.iter().find_map(|(_, e)| match e {
        PeerEvent::DtlsConnected(s) => Some(s.group),
        _ => None,
    });
    assert_eq!(summary, Some(Some(NamedGroup::X25519MlKem768)));
}

#[test]
fn checks_without_the_attributes_get_todays_answers_byte_for_byte() {
    let run = |dtls_in_stun: bool, options: &str| {
        let offerer = Offerer::new(Mode::Plain, Versions::Dtls13, &[NamedGroup::X25519]);
        let (mut net, _) = Net::new(offerer, server(IceMode::Lite, dtls_in_stun), options);
        net.handshake();
        assert_eq!(net.sped_state(), SpedState::Off);
        assert!(net.in_stun().is_none());
        assert!(net.offerer.responses.iter().all(|r| *r == (None, None)));
        // STUN byte for byte; DTLS by time and direction (certificates are fresh per run).
        let trace: Vec<(Instant, bool, Option<Vec<u8>>)> = net
            .sent
            .into_iter()
            .map(|(at, to_server, bytes)| (at, to_server, Message::parse(&bytes).is_ok().then_some(bytes)))
            .collect();
        trace
    };
    let before = run(false, "trickle");
    assert_eq!(run(true, "trickle sped googspedv1"), before, "announced, but the checks carry nothing");
    assert_eq!(run(true, "trickle"), before);
}

#[test]
fn a_server_with_it_switched_off_makes_a_sped_offerer_fall_back_to_plain_dtls() {
    let offerer = Offerer::new(Mode::Sped, Versions::Dtls13, &[NamedGroup::X25519]);
    let (mut net, answer) = Net::new(offerer, server(IceMode::Lite, false), "trickle sped googspedv1");
    assert!(!answer.contains("sped"));
    net.handshake();
    assert_eq!(net.offerer.responses[0], (None, None), "neither attribute");
    assert_eq!(net.offerer.phase, Phase::Off, "the offerer falls back");
    assert!(net.in_stun().is_none());
}

#[test]
fn sped_attributes_on_an_unauthenticated_check_are_ignored_and_junk_never_reaches_dtls() {
    let offerer = Offerer::new(Mode::Sped, Versions::Dtls13, &[NamedGroup::X25519]);
    let (mut net, _) = Net::new(offerer, server(IceMode::Lite, true), "sped");
    let username = net.offerer.username.clone();
    let from = net.client_addr;
    let hello = net.offerer.pending[0].1.clone();
    let wrong = IntegrityKey::short_term("not-the-password-at-all");
    let mut forged = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([0xee; 12]))
        .username(&username)
        .ice_controlling(1)
        .dtls_in_stun_ack(&[])
        .dtls_in_stun(&hello)
        .message_integrity(&wrong)
        .fingerprint()
        .into_bytes()
        .unwrap();
    net.server.handle_datagram(net.now, from, &mut forged);
    let answer = net.server.poll_transmit().expect("a 401");
    let answer = Message::parse(&answer.payload).unwrap();
    assert_eq!(answer.class(), Class::ErrorResponse);
    assert_eq!(answer.dtls_in_stun_ack(), Ok(None));
    assert!(net.server.poll_transmit().is_none(), "no DTLS came of it");
    assert_eq!(net.sped_state(), SpedState::Off);

    // Authenticated, but junk: an ACK of five entries, a DATA that is not DTLS.
    let key = net.offerer.server_key.clone().unwrap();
    let mut junk = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([0xef; 12]))
        .username(&username)
        .ice_controlling(1)
        .attribute(attr::META_DTLS_IN_STUN_ACK, &[7; 20])
        .dtls_in_stun(&[0xff; 1000])
        .message_integrity(&key)
        .fingerprint()
        .into_bytes()
        .unwrap();
    net.server.handle_datagram(net.now, from, &mut junk);
    let answer = net.server.poll_transmit().expect("a success response");
    let answer = Message::parse(&answer.payload).unwrap();
    assert_eq!(answer.class(), Class::SuccessResponse);
    assert_eq!(answer.dtls_in_stun_ack(), Ok(Some(vec![])), "on, nothing acked");
    assert_eq!(answer.dtls_in_stun(), None);
    // The session goes on: the real offerer's handshake completes.
    net.handshake();
    assert!(net.server_connected());
}

#[test]
fn dtls_embedded_in_checks_from_a_second_address_is_neither_taken_nor_acked() {
    let offerer = Offerer::new(Mode::Sped, Versions::Dtls13, &[NamedGroup::X25519]);
    let (mut net, _) = Net::new(offerer, server(IceMode::Lite, true), "sped");
    let key = net.offerer.server_key.clone().unwrap();
    let username = net.offerer.username.clone();
    // The offerer's first check (its ClientHello inside) gets there first.
    net.run_until(Duration::from_secs(1), |n| !n.offerer.responses.is_empty());
    let (acks, data) = net.offerer.responses[0].clone();
    assert!(acks.is_some() && data.is_some(), "the first address's check was taken");
    // The same browser checks from another of its addresses; its DTLS there is not fed.
    let other: SocketAddr = "127.0.0.1:50001".parse().unwrap();
    let record = [22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 9, 0, 4, 1, 0, 0, 0];
    let mut check = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([0xdd; 12]))
        .username(&username)
        .ice_controlling(42)
        .dtls_in_stun_ack(&[])
        .dtls_in_stun(&record)
        .message_integrity(&key)
        .fingerprint()
        .into_bytes()
        .unwrap();
    net.server.handle_datagram(net.now, other, &mut check);
    let answer = net.server.poll_transmit().expect("answered");
    assert_eq!(answer.dst, other);
    let answer = Message::parse(&answer.payload).unwrap();
    assert_eq!(answer.class(), Class::SuccessResponse);
    let acks = answer.dtls_in_stun_ack().unwrap().expect("an ACK: the exchange is on");
    assert!(!acks.contains(&dtls_datagram_crc(&record)), "not taken, so not acked: {acks:?}");
    assert_eq!(answer.dtls_in_stun(), data.as_deref(), "the one flight rides this response too");
    assert!(net.server.poll_transmit().is_none(), "no DTLS answer to the second address");
    net.handshake();
    assert_eq!(net.in_stun(), Some((1, 2)), "one datagram taken, the flight sent twice");
}

#[test]
fn a_full_server_takes_the_dtls_the_browser_embeds_in_its_response_to_our_check() {
    // The second ClientHello fragment reaches the server first in the offerer's response to
    // the server's triggered check (the offerer does not flush it in plain here).
    let groups = [NamedGroup::X25519MlKem768, NamedGroup::X25519];
    let mut offerer = Offerer::new(Mode::Sped, Versions::Dtls13, &groups);
    offerer.flush = false;
    let (mut net, _) = Net::new(offerer, server(IceMode::Full, true), "sped");
    net.handshake();
    assert_eq!(net.in_stun().map(|(received, _)| received), Some(2), "both fragments came in STUN");
    // Check 1 (fragment 1) reaches the server at one one-way delay, our triggered check the
    // offerer at two, its response (fragment 2) the server at three, which answers at once in
    // plain (the response also made the pair valid); the offerer's next check came later.
    let flight = net.sent.iter().find(|(_, to_server, bytes)| !to_server && Message::parse(bytes).is_err());
    let at = flight.map(|(at, _, _)| at.saturating_duration_since(net.start));
    assert_eq!(at, Some(ONE_WAY * 3), "our flight left when the response brought fragment 2");
    let fragment = net.offerer.pending.first().map(|(crc, _)| *crc);
    assert_eq!(fragment, None, "the server acked what it took from the response");
    let summary = net.server_events.iter().find_map(|(_, e)| match e {
        PeerEvent::DtlsConnected(s) => Some(s.group),
        _ => None,
    });
    assert_eq!(summary, Some(Some(NamedGroup::X25519MlKem768)));
}
