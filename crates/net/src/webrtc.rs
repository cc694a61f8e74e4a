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
use fastshake_webrtc::peer::PeerEvent;
use fastshake_webrtc::server::{Server, ServerConfig, SessionId, ANSWER_RANDOM_LEN};
use rand_core::{OsRng, RngCore};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{mpsc, oneshot};

use crate::Clock;

/// The page `GET /` serves: it opens a channel to this server, sends messages and shows (and
/// reports) their echoes.
const PAGE: &str = include_str!("webrtc_page.html");

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

/// Runs the server until `until_reports` pages have reported (or for ever), telling `note`
/// what happens.
pub async fn serve(options: WebrtcOptions, mut note: impl FnMut(ServerNote)) -> io::Result<()> {
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
    });
    let hex: Vec<String> = fingerprint.iter().map(|b| format!("{b:02X}")).collect();
    note(ServerNote::Listening { http, udp, fingerprint: hex.join(":") });

    let (offers, mut offer_rx) = mpsc::channel::<Offer>(64);
    let (reports, mut report_rx) = mpsc::channel::<String>(64);
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/offer", post(offer).options(preflight))
        .route("/report", post(report).options(preflight))
        .with_state(Http { offers, reports });
    let http_task = tokio::spawn(async move { axum::serve(listener, app).await });

    let mut buf = vec![0u8; 65_536];
    let mut reported = 0usize;
    let result = loop {
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
                    Ok((id, _)) => note(ServerNote::Answered(*id)),
                    Err(e) => note(ServerNote::Refused(e.to_string())),
                }
                let _ = answer.send(result.map(|(_, sdp)| sdp).map_err(|e| e.to_string()));
            }
            Some(text) = report_rx.recv() => {
                note(ServerNote::Report(text));
                reported += 1;
                if options.until_reports.is_some_and(|n| reported >= n) {
                    break Ok(());
                }
            }
            () = deadline => server.handle_timeout(clock.now()),
        }
        while let Some((id, event)) = server.poll_event() {
            if let (true, PeerEvent::Message { stream, data, binary }) = (options.echo, &event) {
                if let Err(e) = server.send(clock.now(), id, *stream, data, *binary) {
                    note(ServerNote::Refused(format!("echo on stream {stream}: {e}")));
                }
            }
            note(ServerNote::Session(id, event));
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
    let text: String = body.chars().take(4096).filter(|c| !c.is_control()).collect();
    let _ = http.reports.send(text).await;
    let mut response = StatusCode::NO_CONTENT.into_response();
    cors(response.headers_mut());
    response
}
