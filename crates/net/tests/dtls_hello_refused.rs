//! A DTLS 1.3 server driver reports the ClientHellos its endpoint refused before any session
//! existed (no common version, suite or group) as `ServerEvent::HelloRefused`, with the client's
//! address, what did not match and the alert sent; the client's handshake fails with that alert.

mod common;

use common::loopback;
use fastshake_dtls::{AlertDescription, ClientConfig, Mismatch, NamedGroup, ServerConfig, Versions};
use fastshake_net::dtls::{ClientOptions, DtlsClient, DtlsServer, ServerEvent, ServerOptions};
use std::sync::Arc;
use std::time::Duration;

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(20);
const KEY: [u8; 16] = [0x5a; 16];

#[tokio::test]
async fn a_refused_hello_is_a_server_event_naming_the_mismatch() {
    let config = ServerConfig {
        versions: Versions::Dtls13,
        groups: vec![NamedGroup::Secp256r1],
        ..ServerConfig::psk("id", KEY)
    };
    let mut server = DtlsServer::bind(loopback(), Arc::new(config), ServerOptions::default()).await.unwrap();
    let addr = server.local_addr();
    let cases: [(ClientConfig, Mismatch, AlertDescription); 2] = [
        (
            ClientConfig {
                versions: Versions::Dtls13,
                groups: vec![NamedGroup::X25519],
                ..ClientConfig::psk("id", KEY)
            },
            Mismatch::Group {
                offered: vec![NamedGroup::X25519.code()],
                ours: vec![NamedGroup::Secp256r1.code()],
            },
            AlertDescription::HandshakeFailure,
        ),
        (
            ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk("id", KEY) },
            Mismatch::Versions { offered: vec![0xfefd], ours: vec![0xfefc] },
            AlertDescription::ProtocolVersion,
        ),
    ];
    for (client, reason, alert) in cases {
        let connect = DtlsClient::connect(addr, Arc::new(client), ClientOptions::default());
        let refused = common::within(STEP, "the refused handshake", connect).await;
        let error = refused.err().expect("the server refuses the client").to_string();
        assert!(error.contains(&alert.to_string()), "{error}");
        match common::within(STEP, "the server's event", server.next_event()).await {
            Some(ServerEvent::HelloRefused { remote, reason: got, alert: sent }) => {
                assert_eq!((got, sent), (reason, alert));
                assert!(remote.ip().is_loopback(), "{remote}");
            }
            other => panic!("expected HelloRefused, got {other:?}"),
        }
    }
}
