//! The bytes on the wire, pinned. Every exchange below is deterministic (seeded randomness,
//! virtual time, loss decided by rule), so the SHA-256 of every packet either side sent — its
//! direction, whether the network dropped it, when it was sent, its length and its bytes — is a
//! fingerprint of the engine's behaviour on the wire: handshakes, chunk bundling, delayed SACK,
//! retransmission and congestion, heartbeats, shutdown. A change to the engine's internals must
//! leave every fingerprint as it is; a deliberate change of the wire format or of a timer updates
//! them here, in the same commit, with the reason.

use std::time::Duration;

use fastshake_sctp::{ConnectOptions, Event, HandshakeMode, Message};
use fastshake_testkit::net::{self, Datagram, Dir, Fate};
use fastshake_testkit::sctp::*;

fn fingerprint(logs: &[&[Datagram]]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for log in logs {
        for s in *log {
            ctx.update(&[u8::from(s.dir == Dir::ToServer), u8::from(s.fate == Fate::Drop)]);
            ctx.update(&s.at.as_nanos().to_be_bytes());
            ctx.update(&(s.payload.len() as u32).to_be_bytes());
            ctx.update(&s.payload);
        }
    }
    ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn cookieless_server() -> fastshake_sctp::Config {
    fastshake_sctp::Config { cookieless: true, ..server_config(HandshakeMode::Both) }
}

/// Messages of every size class: one chunk, several in a packet, fragmented over packets.
fn messages(n: u32) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let len = [1usize, 100, 1500, 4000][(i % 4) as usize];
            let data: Vec<u8> = (0..len).map(|b| (b as u32 ^ i) as u8).collect();
            Message { stream: (i % 3) as u16, unordered: i % 5 == 2, ppid: i, data }
        })
        .collect()
}

/// Data both ways (the server echoes), an idle pause for delayed SACKs, then the client's
/// graceful shutdown.
fn talk_and_close(pair: &mut Pair) {
    let h = pair.client.associations()[0];
    pair.echo = true;
    for m in messages(8) {
        pair.client.send(h, m).unwrap();
    }
    pair.run_for(Duration::from_secs(5));
    pair.client.send(h, msg(0, b"one more")).unwrap();
    pair.run_for(Duration::from_secs(2));
    pair.client.shutdown(h);
    pair.run_for(Duration::from_secs(5));
    assert!(pair.client_events.iter().any(|(_, e)| *e == Event::Closed), "closed");
}

fn open(pair: &mut Pair, opts: ConnectOptions) {
    pair.connect(opts);
    assert!(pair.run_until(pair.now + Duration::from_secs(60), Pair::both_connected), "connected");
}

/// A cookie for the client's address from one alternative handshake, and that exchange.
fn fetch_cookie() -> (Pair, Vec<u8>) {
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Both));
    open(&mut pair, ConnectOptions::default());
    let cookie = pair
        .client_events
        .iter()
        .find_map(|(_, e)| match e {
            Event::AltCookie { cookie, .. } => Some(cookie.clone()),
            _ => None,
        })
        .expect("cookie");
    talk_and_close(&mut pair);
    (pair, cookie)
}

fn regular() -> String {
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server_config(HandshakeMode::Both));
    open(&mut pair, ConnectOptions::default());
    talk_and_close(&mut pair);
    fingerprint(&[&pair.log])
}

fn alt_cookie() -> String {
    let (pair, _) = fetch_cookie();
    fingerprint(&[&pair.log])
}

fn cached_zero_rtt() -> String {
    let (first, cookie) = fetch_cookie();
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Both));
    pair.echo = true;
    open(&mut pair, ConnectOptions { cached_cookie: Some(cookie), zero_rtt: vec![msg(1, b"request")] });
    talk_and_close(&mut pair);
    fingerprint(&[&first.log, &pair.log])
}

/// Cookieless with zero-RTT data, then idle long enough for heartbeats on the path.
fn cookieless_idle() -> String {
    let mut pair = Pair::new(client_config(HandshakeMode::Both), cookieless_server());
    open(
        &mut pair,
        ConnectOptions { zero_rtt: vec![msg(0, b"early"), msg(2, b"also early")], ..Default::default() },
    );
    let h = pair.client.associations()[0];
    pair.client.send(h, msg(1, b"after")).unwrap();
    pair.run_for(Duration::from_secs(100));
    assert!(!pair.sent_with(fastshake_sctp::packet::CHUNK_HEARTBEAT).is_empty(), "heartbeats");
    talk_and_close(&mut pair);
    fingerprint(&[&pair.log])
}

/// Lost INIT (T1), then a transfer with 12 % loss and jitter (fast retransmit, T3-rtx, cwnd),
/// then a shutdown through losses (T2).
fn losses() -> String {
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server_config(HandshakeMode::Both));
    let mut state = 7u64;
    let mut jitter = net::jitter(Duration::from_millis(15), 3);
    pair.filter = Box::new(move |d| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        if d.nth == 0 || (state >> 33) % 100 < 12 {
            Fate::Drop
        } else {
            Fate::Late(jitter())
        }
    });
    open(&mut pair, ConnectOptions { zero_rtt: vec![msg(0, b"early")], ..Default::default() });
    let h = pair.client.associations()[0];
    pair.echo = true;
    for m in messages(40) {
        pair.client.send(h, m).unwrap();
    }
    pair.run_for(Duration::from_secs(300));
    let stats = pair.client.association(h).expect("open").stats;
    assert!(stats.fast_retransmits > 0 && stats.t3_expiries > 0, "{stats:?}");
    pair.client.shutdown(h);
    pair.run_for(Duration::from_secs(300));
    assert!(pair.client_events.iter().any(|(_, e)| *e == Event::Closed), "closed");
    fingerprint(&[&pair.log])
}

/// The regular handshake with its COOKIE-ECHO and COOKIE-ACK lost once each.
fn regular_losses() -> String {
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server_config(HandshakeMode::Regular));
    pair.filter = net::drop_if(|d| d.nth == 2 || d.nth == 4);
    pair.connect(ConnectOptions::default());
    let h = pair.client.associations()[0];
    pair.client.send(h, msg(0, b"behind the cookie")).unwrap();
    assert!(pair.run_until(pair.now + Duration::from_secs(60), Pair::both_connected));
    talk_and_close(&mut pair);
    fingerprint(&[&pair.log])
}

fn collisions() -> String {
    let mut logs = Vec::new();
    for (mode, cookieless) in
        [(HandshakeMode::Both, true), (HandshakeMode::Regular, false), (HandshakeMode::Both, false)]
    {
        let mut b = client_config(mode);
        b.listen = true;
        b.cookieless = cookieless;
        let mut a = server_config(mode);
        a.cookieless = cookieless;
        let mut pair = Pair::new(b, a);
        pair.connect(ConnectOptions { zero_rtt: vec![msg(0, b"from client")], ..Default::default() });
        pair.server.connect(
            pair.now,
            Some(server_addr()),
            client_addr(),
            CLIENT_PORT,
            ConnectOptions { zero_rtt: vec![msg(0, b"from server")], ..Default::default() },
        );
        pair.run_for(Duration::from_secs(10));
        assert_eq!(pair.server_messages(), vec![msg(0, b"from client")], "{mode:?}");
        assert_eq!(pair.client_messages(), vec![msg(0, b"from server")], "{mode:?}");
        logs.push(pair.log);
    }
    let logs: Vec<&[Datagram]> = logs.iter().map(Vec::as_slice).collect();
    fingerprint(&logs)
}

/// A multihomed client: path cookies fetched, the second path confirmed by HEARTBEAT, then the
/// first path goes dark and data fails over.
fn multihomed() -> String {
    let mut client = client_config(HandshakeMode::Both);
    client.extra_local_addresses = vec![client_addr2().ip()];
    let mut server = server_config(HandshakeMode::Both);
    server.path_max_retransmits = 1;
    let mut pair = Pair::new(client, server);
    open(&mut pair, ConnectOptions::default());
    let h = pair.client.associations()[0];
    pair.client.send(h, msg(0, b"hello")).unwrap();
    pair.run_for(Duration::from_secs(2));
    let sh = pair.server.associations()[0];
    pair.filter = net::drop_if(|s| s.dst == client_addr());
    pair.server.send(sh, msg(0, b"after the outage")).unwrap();
    pair.run_for(Duration::from_secs(60));
    assert_eq!(pair.server.association(sh).expect("open").remote, client_addr2(), "failed over");
    assert!(pair.client_events.iter().any(|(_, e)| matches!(e, Event::AltCookie { local: Some(_), .. })));
    fingerprint(&[&pair.log])
}

/// A shutdown the peer never answers ends by the T5 guard; a dead peer under data ends by
/// Association.Max.Retrans.
fn dead_peers() -> String {
    let mut pair = Pair::new(client_config(HandshakeMode::Both), cookieless_server());
    open(&mut pair, ConnectOptions::default());
    let h = pair.client.associations()[0];
    pair.client.send(h, msg(0, b"last words")).unwrap();
    pair.run_for(Duration::from_secs(1));
    pair.filter = net::drop_if(|s| s.dir == Dir::ToClient);
    pair.client.shutdown(h);
    pair.run_for(Duration::from_secs(1000));
    assert!(pair
        .client_events
        .iter()
        .any(|(_, e)| matches!(e, Event::Aborted { reason } if reason.contains("T5"))));
    let mut second = Pair::new(client_config(HandshakeMode::Both), cookieless_server());
    open(&mut second, ConnectOptions::default());
    let h = second.client.associations()[0];
    second.filter = net::drop_if(|s| s.dir == Dir::ToServer);
    second.client.send(h, msg(0, b"into the void")).unwrap();
    second.run_for(Duration::from_secs(3600));
    assert!(second.client_events.iter().any(|(_, e)| matches!(e, Event::Failed(_))));
    fingerprint(&[&pair.log, &second.log])
}

/// A stale state cookie restarts the regular handshake; a restarted peer replaces the old
/// association.
fn stale_and_restart() -> String {
    let mut server = server_config(HandshakeMode::Regular);
    server.cookie_lifetime = Duration::from_millis(15);
    let mut stale = Pair::new(client_config(HandshakeMode::Regular), server);
    stale.connect(ConnectOptions::default());
    stale.run_for(Duration::from_secs(30));
    assert!(!stale.sent_with(fastshake_sctp::packet::CHUNK_ERROR).is_empty(), "stale cookie reported");
    let mut pair = Pair::new(client_config(HandshakeMode::Regular), server_config(HandshakeMode::Both));
    open(&mut pair, ConnectOptions::default());
    pair.client =
        fastshake_sctp::Endpoint::new(std::sync::Arc::new(client_config(HandshakeMode::Regular)), [9; 32]);
    pair.connect(ConnectOptions::default());
    pair.run_for(Duration::from_secs(5));
    assert!(pair
        .server_events
        .iter()
        .any(|(_, e)| matches!(e, Event::Aborted { reason } if reason.contains("restart"))));
    fingerprint(&[&stale.log, &pair.log])
}

/// A name, the exchange, and its fingerprint.
type Case = (&'static str, fn() -> String, &'static str);

#[test]
fn the_wire_bytes_stay_what_they_were() {
    let cases: Vec<Case> = vec![
        (
            "regular, data both ways, shutdown",
            regular,
            "3485d60ac99b23709e9dc09b665e74c047f570e7cc2f631510206c0462393179",
        ),
        (
            "alt-cookie exchange, data, shutdown",
            alt_cookie,
            "81e530c3ccd5662a0eea16b12128d931f1af3ccca943b0fa2f654d8a10725272",
        ),
        (
            "cached cookie with zero-RTT data",
            cached_zero_rtt,
            "f7e009085e0b900df80e4206d27c75c9767097648b710ac6a4aae29bc41d2fb6",
        ),
        (
            "cookieless zero-RTT, idle heartbeats",
            cookieless_idle,
            "328e2d9adc979647dc6b82164a13b43761171707f88fc71acf86bee65bc3bc12",
        ),
        (
            "lost INIT, 12 % loss with jitter, shutdown",
            losses,
            "e86e355b180872a4f80624d6ba7c169e3cb52838e723b22a34ae7d3038c92630",
        ),
        (
            "regular handshake with COOKIE-ECHO and COOKIE-ACK lost",
            regular_losses,
            "04dd22ada1033d65c4fcc0784ae1732cf6ba8b387f83f2f7b90d974f58ab238e",
        ),
        (
            "INIT collisions: cookieless, regular, cookie exchange",
            collisions,
            "0b5bba92d6c4493b18cdf3f410e6545093812d4904f9a193282cc9e77d01b387",
        ),
        (
            "multihomed: path cookies, heartbeats, failover",
            multihomed,
            "3d0b79bba4fd590bddc4d0ee2624a46e98a9a987233e0c39709c70b3d092420e",
        ),
        (
            "T5 shutdown guard, retransmission limit",
            dead_peers,
            "21d43379753ab36d4b076771944a9ed9a568d732faf195731a3e9909dc06a02c",
        ),
        (
            "stale cookie, peer restart",
            stale_and_restart,
            "27aa239d2ccb9c175f32b8b8ac8bbbd1275f1749f4ff104b3e5a16df582be830",
        ),
    ];
    let mut wrong = Vec::new();
    for (name, run, want) in cases {
        let got = run();
        assert_eq!(got, run(), "{name}: deterministic");
        if got != want {
            wrong.push(format!("{name}: {got}"));
        }
    }
    assert!(wrong.is_empty(), "fingerprints changed:\n{}", wrong.join("\n"));
}
