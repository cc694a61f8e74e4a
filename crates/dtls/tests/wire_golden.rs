//! The bytes on the wire, pinned. Every exchange below is deterministic (seeded randomness, a
//! fixed test PKI in `tests/data`, virtual time), so the SHA-256 of everything both sides sent
//! is a fingerprint of the engine's wire format: handshake messages, record layout, fragmentation,
//! retransmission packing, tickets, Connection IDs. A change to the engine's internals must leave
//! every fingerprint as it is; a deliberate change of the wire format updates them here, in the
//! same commit, with the reason.

use fastshake_dtls::Instant;
use fastshake_dtls::{
    CertifiedKey, CipherSuite, ClientAuth, ClientConfig, Mobility, ServerConfig, SessionCacheConfig,
    TicketKeys, TrustAnchors, Versions, WallClock,
};
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::{Dir, Fate};
use std::sync::Arc;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
/// When the PKI in `tests/data/pki-p256` was made (valid for a century from then).
const PKI_MADE: u64 = 1_795_483_385;
const CLOCK: Option<WallClock> = Some(WallClock { at: Instant::ZERO, unix_secs: PKI_MADE + 3_600 });

fn data(name: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pki-p256").join(name))
        .unwrap()
}

fn fingerprint(pair: &Pair) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for d in &pair.log {
        ctx.update(&[d.dir as u8]);
        ctx.update(&(d.payload.len() as u32).to_be_bytes());
        ctx.update(&d.payload);
    }
    ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Three records each way, then close_notify from the client.
fn talk(pair: &mut Pair) {
    let h = pair.server_handle();
    for i in 0..3 {
        pair.client.send(format!("client record {i}").as_bytes()).unwrap();
        pair.server.send(h, format!("server record {i}").as_bytes()).unwrap();
    }
    pair.run_for(Duration::from_secs(1));
    pair.client.close();
    pair.run_for(Duration::from_secs(1));
}

fn psk(suite: CipherSuite) -> (ClientConfig, ServerConfig) {
    let mut c = client_config();
    c.suites = vec![suite];
    c.wall_clock = CLOCK;
    let mut s = server_config();
    s.wall_clock = CLOCK;
    (c, s)
}

fn ecdsa(suite: CipherSuite) -> (ClientConfig, ServerConfig) {
    let anchors = Arc::new(TrustAnchors::from_pem(&data("ca.pem")).unwrap());
    let key = |chain: &str, key: &str| Arc::new(CertifiedKey::from_pem(&data(chain), &data(key)).unwrap());
    let c = ClientConfig {
        versions: Versions::Dtls12,
        suites: vec![suite],
        trust_anchors: Some(anchors.clone()),
        server_name: Some("localhost".into()),
        certified_key: Some(key("client.pem", "client.key")),
        wall_clock: CLOCK,
        ..Default::default()
    };
    let s = ServerConfig {
        versions: Versions::Dtls12,
        certified_key: Some(key("server.pem", "server.key")),
        client_auth: ClientAuth::Require,
        client_trust_anchors: Some(anchors),
        wall_clock: CLOCK,
        ..Default::default()
    };
    (c, s)
}

fn full(c: ClientConfig, s: ServerConfig, setup: impl FnOnce(&mut Pair)) -> String {
    let mut pair = Pair::with_seed(c, s, 7);
    setup(&mut pair);
    pair.handshake(MINUTE).expect("handshake");
    talk(&mut pair);
    fingerprint(&pair)
}

fn resumed(c: ClientConfig, s: ServerConfig) -> String {
    let mut pair = Pair::with_seed(c.clone(), s, 7);
    let (summary, _) = pair.handshake(MINUTE).expect("full handshake");
    talk(&mut pair);
    pair.client_addr.set_port(pair.client_addr.port() + 1);
    pair.resume_client(c, summary.session, 8);
    pair.server_events.clear();
    let (c, _) = pair.handshake(MINUTE).expect("abbreviated handshake");
    assert!(c.resumed);
    talk(&mut pair);
    fingerprint(&pair)
}

#[test]
fn the_wire_bytes_stay_what_they_were() {
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "psk ccm8",
            full(psk(CipherSuite::PskWithAes128Ccm8).0, psk(CipherSuite::PskWithAes128Ccm8).1, |_| {}),
            "1ff20bd889823abc34aca0692c91ef4a49915c0ce71f7e60b87410df33baf8c7",
        ),
        (
            "psk gcm, mtu 96, losses",
            full(
                ClientConfig { mtu: 96, ..psk(CipherSuite::PskWithAes128GcmSha256).0 },
                ServerConfig { mtu: 96, ..psk(CipherSuite::PskWithAes128GcmSha256).1 },
                |pair| {
                    pair.filter = Box::new(|d| match (d.dir, d.index) {
                        (Dir::ToServer, 2) | (Dir::ToClient, 1) => Fate::Drop,
                        (Dir::ToClient, 3) => Fate::Duplicate,
                        _ => Fate::Deliver,
                    })
                },
            ),
            "2c95ba64005c42e1c9e562e84f63d503c90e9a8b5f68e15ba91d8494b425d68e",
        ),
        (
            "psk resumed by session id",
            resumed(psk(CipherSuite::PskWithAes128Ccm8).0, psk(CipherSuite::PskWithAes128Ccm8).1),
            "39a419c77f09f48e21b8a3eca6cf62d299fd467cc5e32cccf1e87656fbb798eb",
        ),
        (
            "psk resumed by ticket",
            resumed(
                ClientConfig { ..psk(CipherSuite::PskWithAes128GcmSha256).0 },
                ServerConfig {
                    tickets: Some(TicketKeys::new(3, [5; 16])),
                    session_cache: SessionCacheConfig { max_entries: 0, ..Default::default() },
                    ..psk(CipherSuite::PskWithAes128GcmSha256).1
                },
            ),
            "0204641d14a8723058db59d3a0aa61f741f53922ff8334041614bc26fd158c47",
        ),
        (
            "psk with connection id and rrc",
            full(
                ClientConfig {
                    mobility: Mobility {
                        connection_id: Some(2),
                        return_routability_check: true,
                        follow_server_port: false,
                    },
                    ..psk(CipherSuite::PskWithAes128Ccm8).0
                },
                ServerConfig {
                    mobility: Mobility {
                        connection_id: Some(8),
                        return_routability_check: true,
                        follow_server_port: false,
                    },
                    ..psk(CipherSuite::PskWithAes128Ccm8).1
                },
                |_| {},
            ),
            "2779d4664af25b43db460fa9f4d0eb160319bf2c863b9a49494511d2b882bb93",
        ),
        (
            "ecdsa mutual ccm8",
            full(
                ecdsa(CipherSuite::EcdheEcdsaWithAes128Ccm8).0,
                ecdsa(CipherSuite::EcdheEcdsaWithAes128Ccm8).1,
                |_| {},
            ),
            "eb6cc7d78ee48a6c4a1c889a74690173b4db88110d023a26a7f7669cad12499d",
        ),
        (
            "ecdsa mutual gcm, reordered",
            full(
                ecdsa(CipherSuite::EcdheEcdsaWithAes128GcmSha256).0,
                ecdsa(CipherSuite::EcdheEcdsaWithAes128GcmSha256).1,
                |pair| pair.reorder = true,
            ),
            "706ce1bc445c2f69f1880dc67d252c20127f2b4e45a61d5341d1e045f55d8d1f",
        ),
    ];
    let mut changed = Vec::new();
    for (name, got, want) in &cases {
        println!("{name:40} {got}");
        if got != want {
            changed.push(*name);
        }
    }
    assert!(changed.is_empty(), "the wire bytes changed for {changed:?}");
}
