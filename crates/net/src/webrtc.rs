//! A WebRTC data-channel server for browsers: HTTP signalling in the manner of WHIP (RFC 9725:
//! `POST /offer` with the SDP offer, the SDP answer back), a page that opens a channel, and one
//! UDP socket that carries ICE, DTLS and SCTP for every session ([`fastshake_webrtc::server`]).
//!
//! The HTTP side only passes offers to the socket task, which owns every session; the answer
//! comes back over a oneshot channel. Each session's engines are seeded from the OS, and the
//! server's certificate is a fresh self-signed P-256 one (RFC 8827 §6.5).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use fastshake_dtls::{NamedGroup, Versions};
use fastshake_webrtc::dcep::ChannelType;
use fastshake_webrtc::ice::IceMode;
use fastshake_webrtc::peer::{PeerError, PeerEvent};
use fastshake_webrtc::server::{Server, ServerConfig, SessionId, ANSWER_RANDOM_LEN};
use rand_core::{OsRng, RngCore};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{mpsc, oneshot};

use crate::Clock;

/// The page `GET /` serves: it opens a channel to this server, sends messages and shows (and
/// reports) their echoes.
const PAGE: &str = include_str!("webrtc_page.html");

/// Most characters of a page's report kept (a benchmark's sessions, ~120 each).
const MAX_REPORT_CHARS: usize = 64 * 1024;

/// Biggest offer read: Chromium's are about 700 bytes, with every codec a few kilobytes.
const MAX_OFFER_BYTES: usize = 64 * 1024;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct WebrtcOptions {
    /// The HTTP signalling address.
    pub http: SocketAddr,
    /// The UDP address for ICE, DTLS and SCTP (port 0: any); its IP is the host candidate.
    pub udp: SocketAddr,
    /// DTLS versions accepted.
    pub versions: Versions,
    /// DTLS 1.3 groups, most preferred first.
    pub groups: Vec<NamedGroup>,
    /// Echo every message back on its channel.
    pub echo: bool,
    /// Sessions held at most.
    pub max_sessions: usize,
    /// Stop after this many reports from pages (`POST /report`); `None`: run until killed.
    pub until_reports: Option<usize>,
    /// ICE-lite answers (`a=ice-lite`, the default) or a full, controlled agent that checks back
    /// and may send before the browser nominates (RFC 8445 §12.1): with Chromium, which
    /// nominates about 48 ms after its first check succeeds, the first byte comes that much
    /// sooner. See [`fastshake_webrtc::ice::IceAgent`].
    pub ice_mode: IceMode,
    /// DTLS in STUN with browsers whose offer announces it (`a=ice-options:sped` or
    /// `googspedv1`); see [`fastshake_webrtc::server::ServerConfig::dtls_in_stun`].
    pub dtls_in_stun: bool,
}

/// What an application may do in the sessions while it handles a [`ServerNote`]: send on a
/// channel, open and close channels. What it does leaves with the server's next datagrams.
pub struct Sessions<'a> {
    server: &'a mut Server,
    now: fastshake_core::Instant,
}

impl Sessions<'_> {
    /// Sends `data` on channel `stream` of session `id` (a string unless `binary`).
    pub fn send(&mut self, id: SessionId, stream: u16, data: &[u8], binary: bool) -> Result<(), PeerError> {
        self.server.send(self.now, id, stream, data, binary)
    }

    /// Opens a channel of ours in session `id`; messages may follow at once (RFC 8831 §6.6).
    pub fn open_channel(
        &mut self,
        id: SessionId,
        label: &str,
        channel_type: ChannelType,
    ) -> Result<u16, PeerError> {
        self.server.open_channel(self.now, id, label, channel_type)
    }

    /// Closes channel `stream` of session `id` (RFC 8831 §6.7).
    pub fn close_channel(&mut self, id: SessionId, stream: u16) -> Result<(), PeerError> {
        self.server.close_channel(self.now, id, stream)
    }
}

/// What the server tells its caller, one line each.
#[derive(Clone, Debug)]
pub enum ServerNote {
    /// Listening: the HTTP and UDP addresses and our certificate's fingerprint.
    Listening {
        /// HTTP signalling.
        http: SocketAddr,
        /// The socket of every session.
        udp: SocketAddr,
        /// SHA-256 of our certificate, as the answers carry it.
        fingerprint: String,
    },
    /// An offer was answered.
    Answered(SessionId),
    /// An offer was refused.
    Refused(String),
    /// Something happened in a session.
    Session(SessionId, PeerEvent),
    /// A page reported its results (the request body, as text).
    Report(String),
}

struct Offer {
    sdp: String,
    answer: oneshot::Sender<Result<String, String>>,
}

#[derive(Clone)]
struct Http {
    offers: mpsc::Sender<Offer>,
    reports: mpsc::Sender<String>,
}

/// Runs the server until `until_reports` pages have reported (or for ever), telling `app` what
/// happens; `app` may act on the sessions (reply, open and close channels) with [`Sessions`].
pub async fn serve(
    options: WebrtcOptions,
    mut app: impl FnMut(ServerNote, &mut Sessions<'_>),
) -> io::Result<()> {
    let clock = Clock::new();
    let socket = UdpSocket::bind(options.udp).await?;
    let udp = socket.local_addr()?;
    let listener = TcpListener::bind(options.http).await?;
    let http = listener.local_addr()?;
    let wall = clock.wall_clock();
    let (certified_key, fingerprint) = fastshake_pki::generate::self_signed_p256(wall.unix_secs, 30)
        .map_err(|e| io::Error::other(format!("certificate: {e}")))?;
    let mut server = Server::new(ServerConfig {
        certified_key: Arc::new(certified_key),
        fingerprint,
        addresses: vec![udp],
        versions: options.versions,
        groups: options.groups.clone(),
        wall_clock: wall,
        max_sessions: options.max_sessions,
        ice_mode: options.ice_mode,
        dtls_in_stun: options.dtls_in_stun,
    });
    let hex: Vec<String> = fingerprint.iter().map(|b| format!("{b:02X}")).collect();
    // Each note goes to the application with the sessions in hand, to act on at once.
    let mut note =
        |server: &mut Server, note: ServerNote| app(note, &mut Sessions { server, now: clock.now() });
    note(&mut server, ServerNote::Listening { http, udp, fingerprint: hex.join(":") });

    let (offers, mut offer_rx) = mpsc::channel::<Offer>(64);
    let (reports, mut report_rx) = mpsc::channel::<String>(64);
    let router = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/offer", post(offer).options(preflight))
        .route("/report", post(report).options(preflight))
        .with_state(Http { offers, reports });
    let http_task = tokio::spawn(async move { axum::serve(listener, router).await });

    let mut buf = vec![0u8; 65_536];
    let mut reported = 0usize;
    let mut timed_out = false;
    let result = loop {
        // Work the engines left due now runs now: tokio's timer wheel would hold it to its next
        // millisecond tick, once per step of a handshake. Not twice in a row, so the socket and
        // the offers are read in between whatever the engines say.
        if !timed_out && clock.is_due(server.poll_timeout()) {
            timed_out = true;
            server.handle_timeout(clock.now());
        } else {
            timed_out = false;
            let deadline = clock.sleep_until(server.poll_timeout());
            tokio::select! {
                received = socket.recv_from(&mut buf) => {
                    match received {
                        Ok((n, from)) => server.handle_datagram(clock.now(), from, &mut buf[..n]),
                        // An ICMP error of an earlier send (a browser gone): not this socket's end.
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                        Err(e) => break Err(e),
                    }
                }
                Some(Offer { sdp, answer }) = offer_rx.recv() => {
                    let mut random = [0u8; ANSWER_RANDOM_LEN];
                    OsRng.fill_bytes(&mut random);
                    let result = server.answer(&sdp, udp, &random);
                    match &result {
                        Ok((id, _)) => note(&mut server, ServerNote::Answered(*id)),
                        Err(e) => note(&mut server, ServerNote::Refused(e.to_string())),
                    }
                    let _ = answer.send(result.map(|(_, sdp)| sdp).map_err(|e| e.to_string()));
                }
                Some(text) = report_rx.recv() => {
                    note(&mut server, ServerNote::Report(text));
                    reported += 1;
                    if options.until_reports.is_some_and(|n| reported >= n) {
                        break Ok(());
                    }
                }
                () = deadline => server.handle_timeout(clock.now()),
            }
        }
        while let Some((id, event)) = server.poll_event() {
            if let (true, PeerEvent::Message { stream, data, binary }) = (options.echo, &event) {
                if let Err(e) = server.send(clock.now(), id, *stream, data, *binary) {
                    note(&mut server, ServerNote::Refused(format!("echo on stream {stream}: {e}")));
                }
            }
            note(&mut server, ServerNote::Session(id, event));
        }
        while let Some(t) = server.poll_transmit() {
            // A send that fails is a datagram lost: the engines resend.
            let _ = socket.send_to(&t.payload, t.dst).await;
        }
    };
    http_task.abort();
    result
}

/// CORS for a page served from another origin (WHIP clients are, RFC 9725 §4.2).
fn cors(headers: &mut HeaderMap) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST, OPTIONS"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("content-type"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("location"));
}

async fn preflight() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    cors(response.headers_mut());
    response
}

async fn offer(State(http): State<Http>, headers: HeaderMap, body: String) -> Response {
    let mut response = answer_offer(&http, &headers, body).await;
    cors(response.headers_mut());
    response
}

async fn answer_offer(http: &Http, headers: &HeaderMap, body: String) -> Response {
    let is_sdp = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/sdp"));
    if !is_sdp {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "the offer must be sent as application/sdp\n")
            .into_response();
    }
    if body.len() > MAX_OFFER_BYTES {
        return (StatusCode::PAYLOAD_TOO_LARGE, format!("an offer of at most {MAX_OFFER_BYTES} bytes\n"))
            .into_response();
    }
    let (tx, rx) = oneshot::channel();
    if http.offers.send(Offer { sdp: body, answer: tx }).await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the server is stopping\n").into_response();
    }
    match rx.await {
        Ok(Ok(sdp)) => {
            let mut response = (StatusCode::CREATED, sdp).into_response();
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/sdp"));
            response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/offer"));
            response
        }
        Ok(Err(why)) => (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "the server is stopping\n").into_response(),
    }
}

async fn report(State(http): State<Http>, body: String) -> Response {
    let text: String = body.chars().take(MAX_REPORT_CHARS).filter(|c| !c.is_control()).collect();
    let _ = http.reports.send(text).await;
    let mut response = StatusCode::NO_CONTENT.into_response();
    cors(response.headers_mut());
    response
}

/// How `connect` runs.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// The server's offer URL (`http://host:port/offer`).
    pub url: String,
    /// DTLS versions offered.
    pub versions: Versions,
    /// DTLS 1.3 groups, the first with a key share.
    pub groups: Vec<NamedGroup>,
    /// Messages sent on the channel, each to be echoed.
    pub messages: usize,
    /// Bytes per message.
    pub size: usize,
    /// Give up after this long.
    pub timeout: std::time::Duration,
    /// How the SCTP association inside DTLS is opened.
    pub sctp_setup: fastshake_webrtc::client::SctpSetup,
}

/// What one `connect` measured.
#[derive(Clone, Debug)]
pub struct ConnectReport {
    /// The DTLS handshake's summary.
    pub dtls: Option<Box<fastshake_dtls::HandshakeSummary>>,
    /// From the first connectivity check sent to the channel's ACK.
    pub channel_open: Option<std::time::Duration>,
    /// From the first connectivity check sent to the first echo received.
    pub first_echo: Option<std::time::Duration>,
    /// Messages echoed back (each counted once).
    pub echoed: usize,
    /// Messages that came back more than once or changed.
    pub bad: usize,
    /// The channel was closed both ways (its stream reset, RFC 8831 §6.7) after the echoes.
    pub channel_closed: bool,
}

/// Opens a session to a data-channel server (ours or another stack's), sends `messages` on a
/// reliable channel and waits for each to come back.
pub async fn connect(options: ConnectOptions) -> io::Result<ConnectReport> {
    use fastshake_webrtc::client::{Client, ClientConfig, Nomination};
    use fastshake_webrtc::dcep::ChannelType;
    use fastshake_webrtc::ice::Credentials;

    let clock = Clock::new();
    let (host, port) = http_host(&options.url)?;
    let server_ip = tokio::net::lookup_host((host.as_str(), port))
        .await?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address")))?
        .ip();
    let unspecified: std::net::IpAddr = if server_ip.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind(SocketAddr::new(unspecified, 0)).await?;
    let local = socket.local_addr()?;
    let wall = clock.wall_clock();
    let (certified_key, fingerprint) = fastshake_pki::generate::self_signed_p256(wall.unix_secs, 30)
        .map_err(|e| io::Error::other(format!("certificate: {e}")))?;
    let mut random = [0u8; Credentials::RANDOM_LEN + 32 + 8];
    OsRng.fill_bytes(&mut random);
    let (credential_bytes, rest) = random.split_at(Credentials::RANDOM_LEN);
    let credentials = Credentials::from_random(credential_bytes.try_into().expect("RANDOM_LEN bytes"));
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&rest[..32]);
    let tiebreaker = u64::from_be_bytes(rest[32..40].try_into().expect("8 bytes"));
    let config = ClientConfig {
        credentials,
        certified_key: Arc::new(certified_key),
        fingerprint,
        versions: options.versions,
        groups: options.groups.clone(),
        wall_clock: wall,
        tiebreaker,
        sctp_setup: options.sctp_setup,
        nomination: Nomination::Aggressive,
    };
    let mut client = Client::new(config, local, seed);
    let answer = post_offer(&options.url, &host, port, client.offer(tiebreaker >> 1)).await?;
    let started = clock.now();
    client
        .accept_answer(started, &answer)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    // The messages follow the OPEN at once (RFC 8831 §6.6): they ride with the SCTP handshake.
    let channel = client
        .open_channel(started, "fastshake", ChannelType::Reliable { ordered: true })
        .map_err(io::Error::other)?;
    for i in 0..options.messages {
        client.send(started, channel, &numbered(i, options.size), true).map_err(io::Error::other)?;
    }

    let mut report = ConnectReport {
        dtls: None,
        channel_open: None,
        first_echo: None,
        echoed: 0,
        bad: 0,
        channel_closed: false,
    };
    let mut timed_out = false;
    let mut seen = vec![0u32; options.messages];
    let deadline = tokio::time::Instant::now() + options.timeout;
    let mut buf = vec![0u8; 65_536];
    loop {
        while let Some(t) = client.poll_transmit() {
            let _ = socket.send_to(&t.payload, t.dst).await;
        }
        while let Some(event) = client.poll_event() {
            let now = clock.now();
            match event {
                PeerEvent::DtlsConnected(summary) => report.dtls = Some(summary),
                PeerEvent::ChannelAcked { .. } => {
                    report.channel_open = Some(now.saturating_duration_since(started));
                }
                PeerEvent::Message { data, .. } => {
                    report.first_echo.get_or_insert(now.saturating_duration_since(started));
                    let index = data.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
                    match index.filter(|&i| i < options.messages && data == numbered(i, options.size)) {
                        Some(i) => seen[i] += 1,
                        None => report.bad += 1,
                    }
                    report.echoed = seen.iter().filter(|&&c| c > 0).count();
                    report.bad += usize::from(index.is_some_and(|i| seen.get(i).is_some_and(|&c| c > 1)));
                    if report.echoed == options.messages {
                        client.close_channel(now, channel).map_err(io::Error::other)?;
                    }
                }
                PeerEvent::ChannelClosed { .. } => report.channel_closed = true,
                PeerEvent::Closed(why) => return Err(io::Error::other(why)),
                _ => {}
            }
        }
        while let Some(t) = client.poll_transmit() {
            let _ = socket.send_to(&t.payload, t.dst).await;
        }
        if report.channel_closed {
            // close_notify, so the server frees the session now rather than when consent ends.
            client.close(clock.now());
            while let Some(t) = client.poll_transmit() {
                let _ = socket.send_to(&t.payload, t.dst).await;
            }
            return Ok(report);
        }
        // As in `serve`: work due now runs now, not at the timer wheel's next tick.
        if !timed_out && clock.is_due(client.poll_timeout()) {
            timed_out = true;
            client.handle_timeout(clock.now());
            continue;
        }
        timed_out = false;
        let timer = clock.sleep_until(client.poll_timeout());
        tokio::select! {
            received = socket.recv_from(&mut buf) => {
                if let Ok((n, from)) = received {
                    client.handle_datagram(clock.now(), from, &mut buf[..n]);
                }
            }
            () = timer => client.handle_timeout(clock.now()),
            () = tokio::time::sleep_until(deadline) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} of {} messages echoed after {:?}", report.echoed, options.messages, options.timeout),
                ));
            }
        }
    }
}

/// Message `i`: its number, then a pattern, `size` bytes in all (at least 4).
fn numbered(i: usize, size: usize) -> Vec<u8> {
    let mut data: Vec<u8> = (0..size.max(4)).map(|j| (i * 31 + j) as u8).collect();
    data[..4].copy_from_slice(&(i as u32).to_be_bytes());
    data
}

/// Host and port of an `http://` URL.
fn http_host(url: &str) -> io::Result<(String, u16)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: need http://HOST[:PORT]/PATH"));
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or_default();
    let uri: axum::http::uri::Authority = authority.parse().map_err(|_| bad())?;
    Ok((uri.host().trim_start_matches('[').trim_end_matches(']').to_owned(), uri.port_u16().unwrap_or(80)))
}

/// `POST url` with the offer (application/sdp); the answer's body.
async fn post_offer(url: &str, host: &str, port: u16, offer: String) -> io::Result<String> {
    use http_body_util::{BodyExt, Full};
    let stream = tokio::net::TcpStream::connect((host, port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
    tokio::spawn(connection);
    let request = axum::http::Request::post(url)
        .header(header::HOST, format!("{host}:{port}"))
        .header(header::CONTENT_TYPE, "application/sdp")
        .body(Full::new(axum::body::Bytes::from(offer)))
        .map_err(io::Error::other)?;
    let response = sender.send_request(request).await.map_err(io::Error::other)?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        return Err(io::Error::other(format!("{url} refused the offer: {status}: {}", body.trim())));
    }
    Ok(body)
}
