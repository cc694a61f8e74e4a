//! What the driver tests share: bounded waits, a loopback address, the echo a client waits for.
#![allow(dead_code)]

use fastshake_net::dtls::{ClientEvent, DtlsClient};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// What `f` gives, which must come within `limit`: the test fails naming `what` otherwise.
pub async fn within<T>(limit: Duration, what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f).await.unwrap_or_else(|_| panic!("{what} did not happen within {limit:?}"))
}

/// Any free port on 127.0.0.1.
pub fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Waits for the echo of `message`, each event within `limit`, passing over path changes (and
/// reconnections, when `reconnections` may happen); anything else fails the test.
pub async fn expect_echo(client: &mut DtlsClient, message: &[u8], limit: Duration, reconnections: bool) {
    loop {
        match within(limit, "echo", client.recv()).await {
            Some(ClientEvent::Data(data)) => {
                assert_eq!(data, message);
                return;
            }
            Some(ClientEvent::PathChanged(_)) => {}
            Some(ClientEvent::Reconnected(_)) if reconnections => {}
            other => panic!("expected the echo of {message:?}, got {other:?}"),
        }
    }
}
