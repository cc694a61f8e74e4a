//! A server requiring a client certificate refuses a client without one, or with one from
//! another PKI, by a fatal alert. The client learns that alert from every call that waits on
//! the session: the handshake (DTLS 1.2, where the server's Finished never comes), a send once
//! the session is gone, the event stream and the close (DTLS 1.3, where the client is done
//! before the server has judged its certificate; RFC 8446 §4.4.2.4).

mod common;

use common::loopback;
use fastshake_dtls::{
    AlertDescription, CertifiedKey, ClientAuth, ClientConfig, Error as DtlsError, ServerConfig, TrustAnchors,
    Versions,
};
use fastshake_net::dtls::{ClientEvent, ClientOptions, DriverError, DtlsClient, DtlsServer, ServerOptions};
use fastshake_pki::generate::{generate, KeyKind, TestPki};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long any one expected thing may take before the test fails.
const STEP: Duration = Duration::from_secs(20);
/// Sessions refused per case: the task's end raced the caller's next call each time.
const ROUNDS: usize = 10;

async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    common::within(STEP, what, f).await
}

fn pki() -> TestPki {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
    generate(1, KeyKind::P256, &[], now, 2).expect("a test PKI")
}

fn anchors(pki: &TestPki) -> Arc<TrustAnchors> {
    Arc::new(TrustAnchors::from_pem(pki.ca_pem().as_bytes()).expect("the CA"))
}

/// A server of `pki` that requires a client certificate of `pki`.
async fn strict_server(pki: &TestPki, versions: Versions) -> (SocketAddr, DtlsServer) {
    let config = Arc::new(ServerConfig {
        versions,
        certified_key: Some(Arc::new(pki.server_certified_key().expect("server key"))),
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(anchors(pki)),
        ..Default::default()
    });
    let server = DtlsServer::bind(loopback(), config, ServerOptions::default()).await.expect("bind");
    (server.local_addr(), server)
}

fn client_config(pki: &TestPki, versions: Versions, key: Option<Arc<CertifiedKey>>) -> Arc<ClientConfig> {
    Arc::new(ClientConfig {
        versions,
        trust_anchors: Some(anchors(pki)),
        server_name: Some("localhost".into()),
        certified_key: key,
        ..Default::default()
    })
}

/// `error` is the server's `alert`, as the peer's fatal alert.
fn assert_alert(error: &DriverError, alert: AlertDescription, what: &str) {
    match error {
        DriverError::Dtls(e @ DtlsError::AlertReceived(_)) => {
            assert_eq!(e.alert(), Some(alert), "{what}: {error}");
            assert!(error.to_string().contains(&alert.to_string()), "{what}: {error}");
        }
        other => panic!("{what}: expected the server's {alert} alert, got: {other}"),
    }
}

/// A DTLS 1.3 client the server refuses after the client's handshake is done: the refusal
/// reaches a send made after the session ended (as `fastshake client` sends a line of its
/// input), then the event stream, then the close, each time.
async fn refused_after_the_handshake(pki: &TestPki, key: Option<Arc<CertifiedKey>>, alert: AlertDescription) {
    let (addr, _server) = strict_server(pki, Versions::Dtls13).await;
    for round in 0..ROUNDS {
        let config = client_config(pki, Versions::Dtls13, key.clone());
        let mut client =
            match step("the handshake", DtlsClient::connect(addr, config, ClientOptions::default())).await {
                Ok(client) => client,
                Err(error) => {
                    panic!("round {round}: the client's side of a 1.3 handshake completes: {error}")
                }
            };
        // Sends until the session is gone; none of them reads the event stream.
        let refused = step("the refusal to reach a send", async {
            loop {
                match client.send(b"line".to_vec()) {
                    Ok(()) => tokio::time::sleep(Duration::from_millis(5)).await,
                    Err(error) => break error,
                }
            }
        })
        .await;
        assert_alert(&refused, alert, &format!("round {round}: send"));
        // Once ended, every later send says the same.
        let again = client.send(b"again".to_vec()).expect_err("the session has ended");
        assert_alert(&again, alert, &format!("round {round}: a later send"));
        let reconnect = client.reconnect(true).expect_err("the session has ended");
        assert_alert(&reconnect, alert, &format!("round {round}: reconnect"));
        loop {
            match step("the failure event", client.recv()).await {
                Some(ClientEvent::Failed(error)) => {
                    assert_alert(&error, alert, &format!("round {round}: event"));
                    break;
                }
                Some(ClientEvent::SessionTicket(_) | ClientEvent::Data(_)) => {}
                other => panic!("round {round}: expected the failure, got {other:?}"),
            }
        }
        assert!(
            step("the end of the events", client.recv()).await.is_none(),
            "round {round}: nothing follows"
        );
        let closed = step("the close", client.close()).await.expect_err("the session failed");
        assert_alert(&closed, alert, &format!("round {round}: close"));
    }
}

#[tokio::test]
async fn a_client_without_a_certificate_is_told_certificate_required_by_every_call() {
    let pki = pki();
    refused_after_the_handshake(&pki, None, AlertDescription::CertificateRequired).await;
}

#[tokio::test]
async fn a_client_of_another_pki_is_told_unknown_ca_by_every_call() {
    let (pki, other) = (pki(), pki());
    let key = Arc::new(other.client_certified_key().expect("client key"));
    refused_after_the_handshake(&pki, Some(key), AlertDescription::UnknownCa).await;
}

#[tokio::test]
async fn a_dtls_1_2_client_refused_is_told_the_alert_by_its_handshake() {
    let (pki, other) = (pki(), pki());
    let (addr, _server) = strict_server(&pki, Versions::Dtls12).await;
    let foreign = Arc::new(other.client_certified_key().expect("client key"));
    let cases = [(None, AlertDescription::HandshakeFailure), (Some(foreign), AlertDescription::UnknownCa)];
    for (key, alert) in cases {
        for round in 0..ROUNDS {
            let config = client_config(&pki, Versions::Dtls12, key.clone());
            let connect = DtlsClient::connect(addr, config, ClientOptions::default());
            match step("the refused handshake", connect).await {
                Ok(_) => panic!("round {round}: the server refuses this client ({alert})"),
                Err(error) => assert_alert(&error, alert, &format!("round {round}: handshake")),
            }
        }
    }
}
