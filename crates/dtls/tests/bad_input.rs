//! Random, truncated and bit-flipped datagrams against a listening endpoint and an established
//! session: no panic, the session goes on, and new clients still connect.

use fastshake_dtls::ConnectionHandle;
use fastshake_testkit::dtls::*;
use fastshake_testkit::net::Datagram;
use proptest::prelude::*;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Garbage {
    Random(Vec<u8>),
    /// A real datagram of the handshake cut short.
    Truncated {
        index: usize,
        len: usize,
    },
    /// A real datagram with one bit flipped.
    BitFlip {
        index: usize,
        bit: usize,
    },
}

/// After the garbage: a record each way in the session `h` arrives.
fn data_still_flows(pair: &mut Pair, h: ConnectionHandle) -> Result<(), TestCaseError> {
    pair.client.send(b"after garbage").unwrap();
    pair.server.send(h, b"reply after garbage").unwrap();
    pair.run_for(Duration::from_secs(1));
    prop_assert_eq!(pair.server_data().last().cloned(), Some(b"after garbage".to_vec()));
    prop_assert_eq!(pair.client_data().last().cloned(), Some(b"reply after garbage".to_vec()));
    Ok(())
}

fn garbage() -> impl Strategy<Value = Garbage> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Garbage::Random),
        (0usize..16, 0usize..400).prop_map(|(index, len)| Garbage::Truncated { index, len }),
        (0usize..16, 0usize..4000).prop_map(|(index, bit)| Garbage::BitFlip { index, bit }),
    ]
}

fn realize(g: &Garbage, log: &[Datagram]) -> Vec<u8> {
    match g {
        Garbage::Random(d) => d.clone(),
        Garbage::Truncated { index, len } => {
            let d = &log[index % log.len()].payload;
            d[..(*len).min(d.len())].to_vec()
        }
        Garbage::BitFlip { index, bit } => {
            let mut d = log[index % log.len()].payload.clone();
            let b = bit % (d.len() * 8);
            d[b / 8] ^= 1 << (b % 8);
            d
        }
    }
}

/// Datagrams of another session (other seeds, so other keys): realistic bytes that must not
/// authenticate in the session under test.
fn reference_log() -> Vec<Datagram> {
    session_log(Pair::with_seed(client_config(), server_config(), 77))
}

/// Everything `pair` sent in a handshake and a record each way.
fn session_log(mut pair: Pair) -> Vec<Datagram> {
    pair.handshake(Duration::from_secs(60)).unwrap();
    pair.client.send(b"reference data").unwrap();
    let h = pair.server_handle();
    pair.server.send(h, b"reference reply").unwrap();
    pair.run_for(Duration::from_secs(1));
    pair.log
}

/// Client and server with Connection IDs both ways and the return-routability check.
fn cid_configs() -> (fastshake_dtls::ClientConfig, fastshake_dtls::ServerConfig) {
    let mobility = |n| fastshake_dtls::Mobility {
        connection_id: Some(n),
        return_routability_check: true,
        follow_server_port: false,
    };
    let client = fastshake_dtls::ClientConfig { mobility: mobility(3), ..client_config() };
    let server = fastshake_dtls::ServerConfig { mobility: mobility(4), ..server_config() };
    (client, server)
}

/// Datagrams of another session with CIDs (other seeds: other keys and CIDs).
fn cid_reference_log() -> Vec<Datagram> {
    let (client, server) = cid_configs();
    session_log(Pair::with_seed(client, server, 78))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn connection_id_session_survives_garbage_from_anywhere(
        inputs in proptest::collection::vec(garbage(), 1..8),
    ) {
        let log = cid_reference_log();
        let (client, server) = cid_configs();
        let mut pair = Pair::new(client, server);
        pair.handshake(Duration::from_secs(60)).unwrap();
        pair.run_for(Duration::from_millis(100));
        let h = pair.server_handle();
        let (ca, sa) = (pair.client_addr, pair.server_addr);
        // The session's own records, truncated and bit-flipped, from its client and from elsewhere.
        let own_log = pair.log.clone();
        let stranger: SocketAddr = "203.0.113.66:666".parse().unwrap();
        for g in &inputs {
            for (from, source) in [(ca, &log), (stranger, &log), (stranger, &own_log)] {
                let mut d = realize(g, source);
                pair.server.handle_datagram(pair.now, sa, from, &mut d);
            }
            let mut d = realize(g, &log);
            pair.client.handle_datagram(pair.now, sa, &mut d);
            // A stranger may get a stateless HelloVerifyRequest (epoch 0) for a ClientHello it
            // sent, never a record of the session (epoch 1: the session did not move there).
            let mut to_client = Vec::new();
            while let Some(t) = pair.server.poll_transmit(pair.now) {
                if t.dst == ca {
                    to_client.push(t.payload);
                } else {
                    prop_assert_eq!((t.payload[0], &t.payload[3..5]), (22, &[0u8, 0][..]));
                }
            }
            for mut d in to_client {
                pair.client.handle_datagram(pair.now, sa, &mut d);
            }
        }
        pair.run_for(Duration::from_secs(2));
        prop_assert!(pair.client.is_established());
        prop_assert_eq!(pair.server.handle_for(ca), Some(h));
        prop_assert_eq!(pair.server.handle_for(stranger), None);
        prop_assert_eq!(pair.server.connection(h).unwrap().mobility_stats().path_challenges_sent, 0);
        data_still_flows(&mut pair, h)?;
    }

    #[test]
    fn established_session_survives_garbage(inputs in proptest::collection::vec(garbage(), 1..8)) {
        let log = reference_log();
        let mut pair = Pair::new(client_config(), server_config());
        pair.handshake(Duration::from_secs(60)).unwrap();
        pair.run_for(Duration::from_millis(100));
        let h = pair.server_handle();
        let (ca, sa) = (pair.client_addr, pair.server_addr);
        for g in &inputs {
            let mut d = realize(g, &log);
            pair.server.handle_datagram(pair.now, sa, ca, &mut d);
            let mut d = realize(g, &log);
            pair.client.handle_datagram(pair.now, sa, &mut d);
        }
        pair.run_for(Duration::from_secs(2));
        prop_assert!(pair.client.is_established());
        prop_assert_eq!(pair.server.handle_for(ca), Some(h));
        data_still_flows(&mut pair, h)?;
    }

    #[test]
    fn listening_endpoint_survives_garbage_and_accepts_clients(
        inputs in proptest::collection::vec(garbage(), 1..8),
    ) {
        let log = reference_log();
        let mut pair = Pair::new(client_config(), server_config());
        let sa = pair.server_addr;
        // Garbage from several addresses, including the one the honest client will use.
        for (i, g) in inputs.iter().enumerate() {
            let from: SocketAddr = if i % 2 == 0 { pair.client_addr } else { format!("203.0.113.{i}:4000").parse().unwrap() };
            let mut d = realize(g, &log);
            pair.server.handle_datagram(pair.now, sa, from, &mut d);
        }
        while pair.server.poll_transmit(pair.now).is_some() {}
        while pair.server.poll_event().is_some() {}
        prop_assert!(pair.handshake(Duration::from_secs(60)).is_some(), "an honest client still connects");
    }
}
