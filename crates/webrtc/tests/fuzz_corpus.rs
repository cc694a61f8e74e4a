//! The seed corpora of the WebRTC fuzz targets (`fuzz/fuzz_targets/webrtc_*.rs`): real
//! messages (a Chromium offer, an ICE check and its answer, DCEP messages), checked to be
//! current, then replayed with thousands of mutations through the targets' entry points.

use std::path::PathBuf;

use fastshake_testkit::mutation::{corpus, Mutator};
use fastshake_webrtc::dcep::{self, ChannelType, DcepMessage, Open};
use fastshake_webrtc::ice::{self, Credentials, IceAgent};
use fastshake_webrtc::stun::{self, Class, IntegrityKey, MessageBuilder, Method, TransactionId};
use fastshake_webrtc::{sdp, Instant};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

/// A browser's nominating check to an agent with the fuzz entry's credentials, and our answer.
fn stun_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let local = Credentials::from_random(&[7; Credentials::RANDOM_LEN]);
    let request = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([1; 12]))
        .username(&format!("{}:abcd", local.ufrag()))
        .priority(1_853_824_767)
        .ice_controlling(0x0102_0304_0506_0708)
        .use_candidate()
        .message_integrity(&IntegrityKey::short_term(local.pwd()))
        .fingerprint()
        .into_bytes()
        .unwrap();
    // DTLS in STUN (draft-hancke-webrtc-sped): an ACK of two and an embedded record.
    let record = [22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0];
    let sped = MessageBuilder::new(Class::Request, Method::Binding, TransactionId([2; 12]))
        .username(&format!("{}:abcd", local.ufrag()))
        .priority(1_853_824_767)
        .ice_controlling(0x0102_0304_0506_0708)
        .dtls_in_stun_ack(&[0x399e_425c, 7])
        .dtls_in_stun(&record)
        .message_integrity(&IntegrityKey::short_term(local.pwd()))
        .fingerprint()
        .into_bytes()
        .unwrap();
    let mut agent = IceAgent::new(local, "abcd").unwrap();
    let response = agent.handle(Instant::from_millis(1), "127.0.0.1:9".parse().unwrap(), &request).unwrap();
    vec![
        ("binding-request", request),
        ("binding-success", response),
        ("binding-request-sped", sped),
        // Chromium 156's first check with WebRTC-IceHandshakeDtls (PQC off): ClientHello inside.
        ("binding-request-sped-chromium", fixture("chromium_sped_check.stun")),
    ]
}

fn dcep_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let open = |channel_type, label: &str| {
        DcepMessage::Open(Open { channel_type, priority: 256, label: label.into(), protocol: "chat".into() })
            .encode()
            .unwrap()
    };
    vec![
        ("open-reliable", open(ChannelType::Reliable { ordered: true }, "echo")),
        ("open-rexmit", open(ChannelType::PartialReliableRexmit { ordered: false, max_retransmits: 0 }, "u")),
        ("ack", DcepMessage::Ack.encode().unwrap()),
    ]
}

fn sdp_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("chromium-offer", fixture("chromium_offer.sdp")),
        ("chromium-offer-snap", fixture("chromium_offer_snap.sdp")),
        ("chromium-offer-av", fixture("chromium_offer_av.sdp")),
    ]
}

fn check_current(target: &str, seeds: &[(&str, Vec<u8>)]) {
    // Regenerate with FASTSHAKE_WRITE_CORPUS=1 after a change to the codecs.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    for (name, input) in seeds {
        if std::env::var_os("FASTSHAKE_WRITE_CORPUS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), input).unwrap();
        }
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), input, "{target}: corpus file {name} is current");
    }
}

#[test]
fn the_corpora_hold_real_messages() {
    check_current("webrtc_stun", &stun_seeds());
    check_current("webrtc_ice", &stun_seeds());
    check_current("webrtc_dcep", &dcep_seeds());
    check_current("webrtc_sdp", &sdp_seeds());
}

fn replay(target: &str, seed: u64, entry: fn(&[u8])) {
    let seeds = corpus(target);
    assert!(!seeds.is_empty(), "{target} has a seed corpus");
    for s in &seeds {
        entry(s);
    }
    let mut rng = Mutator::new(seed);
    for i in 0..3000 {
        let input = if i % 4 == 0 {
            (0..rng.below(300)).map(|_| rng.next_u64() as u8).collect()
        } else {
            let seed = &seeds[rng.below(seeds.len())];
            rng.mutate(seed)
        };
        entry(&input);
    }
}

#[test]
fn the_targets_run_their_corpora_and_mutations() {
    replay("webrtc_stun", 0x5354_554e, stun::fuzz);
    replay("webrtc_ice", 0x1ce, ice::fuzz);
    replay("webrtc_dcep", 0xdce9, dcep::fuzz);
    replay("webrtc_sdp", 0x5d9, sdp::fuzz);
}
