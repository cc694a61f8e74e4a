//! The library API of the WebRTC server: an application answers on the channels through
//! [`Sessions`] while it handles the server's notes, over loopback with our own offerer.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastshake_dtls::{NamedGroup, Versions};
use fastshake_net::webrtc::{connect, serve, ConnectOptions, ServerNote, Sessions, WebrtcOptions};
use fastshake_webrtc::client::SctpSetup;
use fastshake_webrtc::dcep::ChannelType;
use fastshake_webrtc::ice::IceMode;
use fastshake_webrtc::peer::PeerEvent;

fn options(http: SocketAddr) -> WebrtcOptions {
    WebrtcOptions {
        http,
        udp: "127.0.0.1:0".parse().unwrap(),
        versions: Versions::Both,
        groups: NamedGroup::WITH_HYBRID.to_vec(),
        // The server itself echoes nothing: whatever comes back is the application's doing.
        echo: false,
        max_sessions: 4,
        until_reports: None,
        ice_mode: IceMode::Lite,
        dtls_in_stun: true,
    }
}

fn connect_options(http: SocketAddr, timeout: Duration) -> ConnectOptions {
    ConnectOptions {
        url: format!("http://{http}/offer"),
        versions: Versions::Both,
        groups: NamedGroup::WITH_HYBRID.to_vec(),
        messages: 5,
        size: 100,
        timeout,
        sctp_setup: SctpSetup::Regular,
    }
}

/// Starts a server whose application is `app`; returns its HTTP address once it listens.
async fn start(mut app: impl FnMut(ServerNote, &mut Sessions<'_>) + Send + 'static) -> SocketAddr {
    let (listening, address) = tokio::sync::oneshot::channel();
    let mut listening = Some(listening);
    let options = options("127.0.0.1:0".parse().unwrap());
    tokio::spawn(serve(options, move |note, sessions| {
        if let ServerNote::Listening { http, .. } = &note {
            if let Some(tell) = listening.take() {
                let _ = tell.send(*http);
            }
        }
        app(note, sessions);
    }));
    tokio::time::timeout(Duration::from_secs(10), address).await.expect("listening").expect("an address")
}

#[tokio::test]
async fn an_application_replies_on_a_channel_and_opens_one_of_its_own() {
    let opened = Arc::new(Mutex::new(Vec::new()));
    let seen = opened.clone();
    let http = start(move |note, sessions| {
        if let ServerNote::Session(id, event) = note {
            match event {
                // The echo is the application's: the server was told not to.
                PeerEvent::Message { stream, data, binary } => {
                    sessions.send(id, stream, &data, binary).expect("a reply on the channel");
                }
                PeerEvent::ChannelOpened { .. } => {
                    let stream = sessions.open_channel(id, "from-the-server", ChannelType::RELIABLE);
                    seen.lock().unwrap().push(stream.expect("a channel of ours"));
                }
                _ => {}
            }
        }
    })
    .await;
    let report = connect(connect_options(http, Duration::from_secs(10))).await.expect("the echoes");
    assert_eq!((report.echoed, report.bad), (5, 0), "{report:?}");
    let opened = opened.lock().unwrap().clone();
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0] % 2, 1, "the DTLS server's channels take odd stream ids (RFC 8832 §6)");
}

#[tokio::test]
async fn without_an_application_that_replies_nothing_comes_back() {
    let http = start(|_, _| {}).await;
    let error = connect(connect_options(http, Duration::from_secs(2))).await.expect_err("no echo");
    assert_eq!(error.kind(), std::io::ErrorKind::TimedOut, "{error}");
    assert!(error.to_string().contains("0 of 5 messages echoed"), "{error}");
}
