//! Bad input never panics and never disturbs an established association; the fuzz corpus and a
//! few thousand random and mutated inputs go through the fuzz entry points.

use std::path::PathBuf;
use std::time::Duration;

use fastshake_sctp::packet::{self, Chunk, Packet};
use fastshake_sctp::{fuzzing, AssociationState, ConnectOptions, HandshakeMode};
use fastshake_testkit::net;
use fastshake_testkit::sctp::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every datagram of a session that exercises most chunk types.
fn captured_session() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (client_mode, server_mode, cookieless) in [
        (HandshakeMode::Regular, HandshakeMode::Both, false),
        (HandshakeMode::Both, HandshakeMode::Both, false),
        (HandshakeMode::Both, HandshakeMode::Both, true),
    ] {
        let mut client = client_config(client_mode);
        client.extra_local_addresses = vec![client_addr2().ip()];
        let mut server = server_config(server_mode);
        server.cookieless = cookieless;
        server.extra_local_addresses = vec!["10.0.5.5".parse().unwrap()];
        let mut pair = Pair::new(client, server);
        pair.echo = true;
        let mut n = 0u32;
        pair.filter = net::drop_if(move |_| {
            n += 1;
            n.is_multiple_of(7)
        });
        let h = pair.connect(ConnectOptions { zero_rtt: vec![msg(0, b"zero rtt")], ..Default::default() });
        for i in 0..6u8 {
            pair.client.send(h, msg(u16::from(i % 3), &vec![i; 1 + 700 * usize::from(i)])).unwrap();
        }
        pair.run_for(Duration::from_secs(40));
        pair.client.shutdown(h);
        pair.run_for(Duration::from_secs(40));
        out.extend(pair.log.iter().map(|d| d.payload.clone()));
    }
    out
}

fn corpus_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(name)
}

fn chunks_of(packet: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = &packet[packet::COMMON_HEADER_LEN..];
    while let Ok((_, used)) = Chunk::parse(rest) {
        out.push(rest[..used].to_vec());
        rest = &rest[used..];
    }
    out
}

fn params_of(packet: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for c in chunks_of(packet) {
        // INIT / INIT-ACK parameters start after 20 bytes; causes of ERROR / ABORT after 4.
        let start = match c[0] {
            1 | 2 => 20,
            6 | 9 => 4,
            _ => continue,
        };
        let mut rest = &c[start.min(c.len())..];
        while let Ok((_, used)) = fastshake_sctp::packet::Param::parse(rest) {
            out.push(rest[..used].to_vec());
            rest = &rest[used..];
        }
    }
    out
}

/// Writes the seed corpus when FASTSHAKE_WRITE_CORPUS is set; otherwise checks it is there.
#[test]
fn seed_corpus_is_current() {
    let packets = captured_session();
    if std::env::var_os("FASTSHAKE_WRITE_CORPUS").is_none() {
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, items) in [
        ("sctp_packet", packets.clone()),
        ("sctp_chunk", packets.iter().flat_map(|p| chunks_of(p)).collect()),
        ("sctp_param", packets.iter().flat_map(|p| params_of(p)).collect()),
    ] {
        let dir = corpus_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut kinds = std::collections::BTreeSet::new();
        for item in items {
            // One sample per (first bytes) kind keeps the corpus small.
            let key: Vec<u8> =
                item.iter().skip(if name == "sctp_packet" { 12 } else { 0 }).take(2).copied().collect();
            if !kinds.insert((key, item.len().min(64) / 16)) || !seen.insert(item.clone()) {
                continue;
            }
            std::fs::write(dir.join(format!("seed-{:03}", kinds.len())), &item).unwrap();
        }
    }
}

#[test]
fn corpus_and_mutations_go_through_fuzz_targets() {
    let mut inputs: Vec<(&str, Vec<u8>)> = Vec::new();
    for name in ["sctp_packet", "sctp_chunk", "sctp_param", "sctp_association"] {
        if let Ok(dir) = std::fs::read_dir(corpus_dir(name)) {
            for entry in dir.flatten() {
                inputs.push((name, std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    assert!(inputs.len() >= 30, "seed corpus present ({} files)", inputs.len());
    let base: Vec<(&str, Vec<u8>)> = inputs.clone();
    let mut rng = Rng(42);
    for i in 0..3000 {
        let (name, seed) = &base[rng.below(base.len())];
        let mut data = seed.clone();
        match i % 4 {
            0 => {
                for _ in 0..1 + rng.below(4) {
                    if !data.is_empty() {
                        let at = rng.below(data.len());
                        data[at] ^= 1 << rng.below(8);
                    }
                }
            }
            1 => data.truncate(rng.below(data.len() + 1)),
            2 => {
                let at = rng.below(data.len() + 1);
                let junk: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
                data.splice(at..at, junk);
            }
            _ => data = (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
        }
        inputs.push((name, data));
    }
    for (name, data) in &inputs {
        match *name {
            "sctp_packet" => fuzzing::packet(data),
            "sctp_chunk" => fuzzing::chunk(data),
            "sctp_association" => fuzzing::association(data),
            _ => fuzzing::param(data),
        }
    }
}

#[test]
fn garbage_never_disturbs_an_established_association() {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut pair = Pair::new(client_config(HandshakeMode::Both), server);
    pair.echo = true;
    let h = pair.connect(ConnectOptions::default());
    pair.client.send(h, msg(0, b"before")).unwrap();
    pair.run_for(Duration::from_secs(2));
    let server_handle = pair.server.associations()[0];
    let captured: Vec<Vec<u8>> = pair.log.iter().map(|s| s.payload.clone()).collect();
    let tags = {
        let i = pair.server.association(server_handle).unwrap();
        (i.local_tag, i.peer_tag)
    };
    let mut rng = Rng(7);
    let now = pair.now;
    for round in 0..4000 {
        let base = &captured[rng.below(captured.len())];
        let mut data = base.clone();
        match round % 5 {
            0 => data = (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
            1 => data.truncate(rng.below(data.len())),
            2 => {
                // Bit flips under the original checksum: caught by CRC32c.
                let at = rng.below(data.len());
                data[at] ^= 1 << rng.below(8);
            }
            _ => {
                // A blind attacker: any content, valid checksum, but not the association's tag.
                let at = 12 + rng.below(data.len().saturating_sub(12).max(1));
                if at < data.len() {
                    data[at] ^= 1 << rng.below(8);
                }
                let mut vtag = rng.next() as u32;
                if vtag == tags.0 || vtag == tags.1 {
                    vtag ^= 1;
                }
                if data.len() >= 8 {
                    data[4..8].copy_from_slice(&vtag.to_be_bytes());
                }
                packet::seal(&mut data);
            }
        }
        // Sometimes from the client's address (the association's), sometimes from elsewhere.
        let from = if round % 2 == 0 { client_addr() } else { "10.7.7.7:9899".parse().unwrap() };
        pair.server.handle_datagram(now, server_addr(), from, &mut data);
        pair.client.handle_datagram(now, client_addr(), server_addr(), &mut data.clone());
    }
    // Drain what the garbage provoked (ABORTs with T-bit, ERRORs) without delivering it.
    while pair.server.poll_transmit(now).is_some() {}
    while pair.client.poll_transmit(now).is_some() {}
    let info = pair.server.association(server_handle).expect("server association still there");
    assert_eq!(info.state, AssociationState::Established);
    assert_eq!(pair.client.association(h).unwrap().state, AssociationState::Established);
    pair.client.send(h, msg(0, b"after")).unwrap();
    pair.run_for(Duration::from_secs(5));
    assert_eq!(pair.server_messages(), vec![msg(0, b"before"), msg(0, b"after")]);
    assert_eq!(pair.client_messages(), vec![msg(0, b"before"), msg(0, b"after")]);
    assert!(pair.server.stats().malformed > 0);
    let _ = Packet::parse(&captured[0]).unwrap();
}

fn data_chunk(tsn: u32, text: &[u8]) -> Chunk {
    Chunk::Data(packet::DataChunk {
        tsn,
        stream: 0,
        ssn: 0,
        ppid: 0,
        unordered: true,
        beginning: true,
        ending: true,
        immediate: true,
        data: text.to_vec(),
    })
}

#[test]
fn unknown_chunks_follow_their_high_bits() {
    let mut server = server_config(HandshakeMode::Both);
    server.cookieless = true;
    let mut ep = fastshake_sctp::Endpoint::new(std::sync::Arc::new(server), [4; 32]);
    let now = fastshake_sctp::Instant::from_millis(1);
    // Open an association by a cookieless INIT we write ourselves.
    let init = Chunk::Init(packet::InitChunk {
        initiate_tag: 0x5151,
        a_rwnd: 65536,
        outbound_streams: 2,
        inbound_streams: 2,
        initial_tsn: 100,
        params: vec![
            packet::Param::Unknown { param_type: 0xC123, value: vec![1, 2, 3] },
            packet::Param::AltCookie(vec![]),
        ],
    });
    ep.handle_datagram(now, server_addr(), client_addr(), &mut crafted(0, vec![init]));
    let ack = Packet::parse(&ep.poll_transmit(now).unwrap().payload).unwrap();
    let Chunk::InitAck(ack) = &ack.chunks[0] else { panic!("INIT-ACK expected") };
    // 0xC123: skip, go on, report.
    let reported = packet::Param::Unknown { param_type: 0xC123, value: vec![1, 2, 3] }.to_bytes();
    assert!(ack.params.iter().any(|p| *p == packet::Param::UnrecognizedParameter(reported[..7].to_vec())));
    assert!(ack.alt_cookie().is_some(), "the ALT-COOKIE after the unknown parameter was still read");
    let tag = ack.initiate_tag;
    let deliver = |chunks: Vec<Chunk>, ep: &mut fastshake_sctp::Endpoint| {
        ep.handle_datagram(now, server_addr(), client_addr(), &mut crafted(tag, chunks));
        let mut out = Vec::new();
        while let Some(t) = ep.poll_transmit(now) {
            out.push(Packet::parse(&t.payload).unwrap());
        }
        let mut msgs = Vec::new();
        while let Some((_, e)) = ep.poll_event() {
            if let fastshake_sctp::Event::Message(m) = e {
                msgs.push(m.data);
            }
        }
        (out, msgs)
    };
    let unknown = |t: u8| Chunk::Unknown { chunk_type: t, flags: 0, value: vec![9, 9] };
    // 0x40 (01): stop, discard the rest, report.
    let (out, msgs) = deliver(vec![unknown(0x40), data_chunk(100, b"lost")], &mut ep);
    assert!(msgs.is_empty());
    assert!(out.iter().any(|p| p.chunks.iter().any(|c| matches!(c, Chunk::Error { causes } if matches!(causes[..], [packet::ErrorCause::UnrecognizedChunk(_)])))));
    // 0x80 (10): skip silently, go on.
    let (out, msgs) = deliver(vec![unknown(0x80), data_chunk(100, b"one")], &mut ep);
    assert_eq!(msgs, vec![b"one".to_vec()]);
    assert!(out.iter().all(|p| !p.chunks.iter().any(|c| matches!(c, Chunk::Error { .. }))));
    // 0xC0 (11): skip, go on, report.
    let (out, msgs) = deliver(vec![unknown(0xC0), data_chunk(101, b"two")], &mut ep);
    assert_eq!(msgs, vec![b"two".to_vec()]);
    assert!(out.iter().any(|p| p.chunks.iter().any(|c| matches!(c, Chunk::Error { .. }))));
    // 0x00 (00): stop silently.
    let (out, msgs) = deliver(vec![unknown(0x3f), data_chunk(102, b"gone")], &mut ep);
    assert!(msgs.is_empty());
    assert!(out.iter().all(|p| !p.chunks.iter().any(|c| matches!(c, Chunk::Error { .. }))));
}
