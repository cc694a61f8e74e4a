//! SDP offer/answer against real Chromium offers, and DCEP.
//!
//! The fixtures are offers captured from headless Chromium 156.0.8078.108 (Debian 12) in a
//! network namespace with one veth address pair (192.0.2.10, 2001:db8::10):
//! - `chromium_offer.sdp`: `createDataChannel('x')`, default settings (mDNS host candidates);
//! - `chromium_offer_snap.sdp`: the same with `--force-fieldtrials=WebRTC-Sctp-Snap/Enabled/`;
//! - `chromium_offer_ip.sdp`: with `--disable-features=WebRtcHideLocalIpsWithMdns`;
//! - `chromium_offer_av.sdp`: `addTransceiver('audio')`, `addTransceiver('video')`, then the
//!   data channel.

use fastshake_webrtc::dcep::{
    self, priority, ChannelEvent, ChannelState, ChannelType, Channels, DcepError, DcepMessage, DtlsRole,
    MessageError, Open, Outgoing, Ppid, Reliability,
};
use fastshake_webrtc::sdp::{
    self, candidate_priority, Answer, Candidate, CandidateAddress, CandidateType, Fingerprint,
    FingerprintError, HashFunction, Offer, SdpError, Setup,
};
use proptest::prelude::*;
use std::net::{IpAddr, SocketAddr};

const OFFER: &str = include_str!("fixtures/chromium_offer.sdp");
const OFFER_SNAP: &str = include_str!("fixtures/chromium_offer_snap.sdp");
const OFFER_IP: &str = include_str!("fixtures/chromium_offer_ip.sdp");
const OFFER_AV: &str = include_str!("fixtures/chromium_offer_av.sdp");

fn fp(hex_colons: &str) -> Fingerprint {
    Fingerprint::parse(&format!("sha-256 {hex_colons}")).unwrap()
}

fn answer() -> Answer {
    Answer {
        session_id: 4_242_424_242,
        ice_lite: true,
        ice_ufrag: "srvU".to_owned(),
        ice_pwd: "serverpasswordserverpw".to_owned(),
        ice_options: Vec::new(),
        fingerprint: Fingerprint::of_certificate(b"our certificate"),
        max_message_size: 262_144,
        sctp_init: None,
        addresses: vec!["192.0.2.1:4000".parse().unwrap(), "[2001:db8::1]:4001".parse().unwrap()],
    }
}

/// A minimal offer in RFC style, for edits.
fn minimal(extra_session: &str, data_attrs: &str) -> String {
    format!(
        "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n{extra_session}\
         m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\n{data_attrs}"
    )
}

const DATA_ATTRS: &str = "a=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\n\
    a=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\n\
    a=setup:actpass\r\na=mid:0\r\n";

#[test]
fn chromium_offer_every_field() {
    let offer = Offer::parse(OFFER).unwrap();
    assert_eq!(offer.media.len(), 1);
    assert_eq!(offer.bundle_groups, vec![vec!["0".to_owned()]]);
    assert!(!offer.ice_lite);
    let m = &offer.media[0];
    assert_eq!(
        (m.media.as_str(), m.port, m.proto.as_str(), m.fmt.as_str()),
        ("application", 9, "UDP/DTLS/SCTP", "webrtc-datachannel")
    );
    assert!(m.is_data_channel());
    let d = &offer.data;
    assert_eq!(d.index, 0);
    assert_eq!(d.mid.as_deref(), Some("0"));
    assert_eq!(d.ice_ufrag, "mI7X");
    assert_eq!(d.ice_pwd, "5HJ89i2hsmdeSaUJiRx6JBkE");
    assert_eq!(d.ice_options, ["trickle"]);
    assert!(d.trickle());
    assert_eq!(
        d.fingerprints,
        [fp(
            "AB:C1:02:C8:42:7E:74:54:50:71:04:D3:FF:CC:A9:15:69:71:9B:39:B2:70:A7:DD:4C:99:50:9D:14:17:66:2E"
        )]
    );
    assert_eq!(d.sha256_fingerprints().count(), 1);
    assert_eq!(d.setup, Some(Setup::ActPass));
    assert_eq!(d.sctp_port, 5000);
    assert_eq!(d.max_message_size, 262_144);
    assert_eq!(d.max_message_limit(), Some(262_144));
    assert_eq!(d.sctp_init, None);
    assert_eq!(d.tls_id, None);
    assert!(!d.end_of_candidates);
    assert_eq!(
        d.candidates,
        [
            Candidate {
                foundation: "1768271309".to_owned(),
                component: 1,
                transport: "udp".to_owned(),
                priority: 2_113_937_151,
                address: CandidateAddress::Hostname("f364a45d-c1e5-4b99-99e2-6ba9e8720686.local".to_owned()),
                port: 45453,
                kind: CandidateType::Host,
                related_address: None,
                related_port: None,
            },
            Candidate {
                foundation: "3662453591".to_owned(),
                component: 1,
                transport: "udp".to_owned(),
                priority: 2_113_939_711,
                address: CandidateAddress::Hostname("74c4d114-59ba-4aaa-b5bf-b4a5c1b9e54b.local".to_owned()),
                port: 33156,
                kind: CandidateType::Host,
                related_address: None,
                related_port: None,
            },
        ]
    );
    assert!(d.candidates.iter().all(Candidate::is_udp));
}

#[test]
fn chromium_offer_with_ip_candidates() {
    let offer = Offer::parse(OFFER_IP).unwrap();
    assert_eq!(offer.media[0].port, 38836);
    let addresses: Vec<_> = offer.data.candidates.iter().map(|c| (c.address.clone(), c.port)).collect();
    assert_eq!(
        addresses,
        [
            (CandidateAddress::Ip("192.0.2.10".parse().unwrap()), 38836),
            (CandidateAddress::Ip("2001:db8::10".parse().unwrap()), 42921)
        ]
    );
    assert_eq!(offer.data.ice_ufrag, "ELlO");
}

#[test]
fn chromium_snap_offer_carries_its_init_chunk() {
    let offer = Offer::parse(OFFER_SNAP).unwrap();
    let init = offer.data.sctp_init.as_deref().expect("Chromium with WebRTC-Sctp-Snap sends a=sctp-init");
    // RFC 9260 §3.3.2 INIT: type 1, flags 0, length 30, initiate tag, a_rwnd 0x500000, 65535
    // streams each way, initial TSN, then Forward-TSN-Supported and Supported Extensions
    // (RE-CONFIG, FORWARD-TSN) parameters.
    assert_eq!(
        init,
        hex::decode("0100001eebacf2df00500000ffffffff49cd9d62c000000480080006 82c0".replace(' ', ""))
            .unwrap()
    );
    assert_eq!(offer.data.ice_ufrag, "uZy0");

    // The answer carries ours only because the offer had one.
    let mut ours = answer();
    ours.sctp_init = Some(vec![1, 0, 0, 20, 9, 9, 9, 9, 0, 0, 0x80, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]);
    let sdp = ours.to_sdp(&offer).unwrap();
    assert!(sdp.contains("\r\na=sctp-init:AQAAFAkJCQkAAIAA/////wECAwQ=\r\n"), "{sdp}");
    assert_eq!(Offer::parse(&sdp).unwrap().data.sctp_init, ours.sctp_init);
    let plain = ours.to_sdp(&Offer::parse(OFFER).unwrap()).unwrap();
    assert!(!plain.contains("sctp-init"), "SNAP draft: no a=sctp-init unless the offer had a valid one");
}

#[test]
fn sctp_init_that_is_not_base64_is_ignored() {
    for bad in ["not base64!", "AQAAHuus8t8", "AQ==AQ==", ""] {
        let offer = Offer::parse(&minimal("", &format!("{DATA_ATTRS}a=sctp-init:{bad}\r\n"))).unwrap();
        assert_eq!(offer.data.sctp_init, None, "{bad}");
    }
    let long = "A".repeat(4 * (sdp::MAX_SCTP_INIT_LEN / 3 + 2));
    let offer = Offer::parse(&minimal("", &format!("{DATA_ATTRS}a=sctp-init:{long}\r\n"))).unwrap();
    assert_eq!(offer.data.sctp_init, None, "longer than MAX_SCTP_INIT_LEN");
}

#[test]
fn answer_is_exactly_what_we_expect() {
    let offer = Offer::parse(OFFER).unwrap();
    let mut ours = answer();
    ours.fingerprint = Fingerprint::sha256([0xAB; 32]);
    let sdp = ours.to_sdp(&offer).unwrap();
    let ab = ["AB"; 32].join(":");
    let expected = format!(
        "v=0\r\n\
         o=- 4242424242 1 IN IP4 0.0.0.0\r\n\
         s=-\r\n\
         t=0 0\r\n\
         a=ice-lite\r\n\
         a=group:BUNDLE 0\r\n\
         m=application 4000 UDP/DTLS/SCTP webrtc-datachannel\r\n\
         c=IN IP4 192.0.2.1\r\n\
         a=ice-ufrag:srvU\r\n\
         a=ice-pwd:serverpasswordserverpw\r\n\
         a=fingerprint:sha-256 {ab}\r\n\
         a=setup:passive\r\n\
         a=mid:0\r\n\
         a=sctp-port:5000\r\n\
         a=max-message-size:262144\r\n\
         a=candidate:1 1 UDP 2130706431 192.0.2.1 4000 typ host\r\n\
         a=candidate:2 1 UDP 2130706175 2001:db8::1 4001 typ host\r\n\
         a=end-of-candidates\r\n"
    );
    assert_eq!(sdp, expected);
}

#[test]
fn a_full_agent_answers_without_ice_lite_and_otherwise_the_same() {
    let offer = Offer::parse(OFFER).unwrap();
    let mut ours = answer();
    ours.fingerprint = Fingerprint::sha256([0xAB; 32]);
    let lite = ours.to_sdp(&offer).unwrap();
    ours.ice_lite = false;
    let full = ours.to_sdp(&offer).unwrap();
    let ab = ["AB"; 32].join(":");
    let expected = format!(
        "v=0\r\n\
         o=- 4242424242 1 IN IP4 0.0.0.0\r\n\
         s=-\r\n\
         t=0 0\r\n\
         a=group:BUNDLE 0\r\n\
         m=application 4000 UDP/DTLS/SCTP webrtc-datachannel\r\n\
         c=IN IP4 192.0.2.1\r\n\
         a=ice-ufrag:srvU\r\n\
         a=ice-pwd:serverpasswordserverpw\r\n\
         a=fingerprint:sha-256 {ab}\r\n\
         a=setup:passive\r\n\
         a=mid:0\r\n\
         a=sctp-port:5000\r\n\
         a=max-message-size:262144\r\n\
         a=candidate:1 1 UDP 2130706431 192.0.2.1 4000 typ host\r\n\
         a=candidate:2 1 UDP 2130706175 2001:db8::1 4001 typ host\r\n\
         a=end-of-candidates\r\n"
    );
    assert_eq!(full, expected);
    assert_eq!(lite.replace("a=ice-lite\r\n", ""), full, "the one line is all that differs");
    assert!(!Offer::parse(&full).unwrap().ice_lite);
}

#[test]
fn answers_to_every_fixture_parse_back() {
    for (name, text) in [("plain", OFFER), ("snap", OFFER_SNAP), ("ip", OFFER_IP), ("av", OFFER_AV)] {
        let offer = Offer::parse(text).unwrap();
        let ours = answer();
        let sdp = ours.to_sdp(&offer).unwrap();
        assert!(sdp.ends_with("\r\n"));
        assert_eq!(sdp.matches('\n').count(), sdp.matches("\r\n").count(), "{name}: CRLF only");
        let back = Offer::parse(&sdp).unwrap();
        assert!(back.ice_lite, "{name}");
        assert_eq!(back.media.len(), offer.media.len(), "{name}");
        assert_eq!(back.data.index, offer.data.index, "{name}");
        assert_eq!(back.data.mid, offer.data.mid, "{name}");
        assert_eq!(back.bundle_groups, vec![vec![offer.data.mid.clone().unwrap()]], "{name}");
        assert_eq!(back.data.ice_ufrag, "srvU");
        assert_eq!(back.data.ice_pwd, "serverpasswordserverpw");
        assert!(back.data.ice_options.is_empty());
        assert_eq!(back.data.fingerprints, std::slice::from_ref(&ours.fingerprint));
        assert!(back.data.certificate_matches(b"our certificate"));
        assert!(!back.data.certificate_matches(b"another certificate"));
        assert_eq!(back.data.setup, Some(Setup::Passive));
        assert_eq!(back.data.sctp_port, 5000);
        assert_eq!(back.media[back.data.index].sctp_port, Some(5000), "written, not defaulted");
        assert_eq!(back.data.max_message_size, 262_144);
        assert!(back.data.end_of_candidates);
        let candidates: Vec<_> =
            back.data.candidates.iter().map(|c| (c.address.clone(), c.port, c.priority)).collect();
        assert_eq!(
            candidates,
            [
                (CandidateAddress::Ip(IpAddr::from([192, 0, 2, 1])), 4000, candidate_priority(126, 65535, 1)),
                (
                    CandidateAddress::Ip("2001:db8::1".parse().unwrap()),
                    4001,
                    candidate_priority(126, 65534, 1)
                ),
            ]
        );
        assert!(back
            .data
            .candidates
            .iter()
            .all(|c| c.kind == CandidateType::Host && c.component == 1 && c.is_udp()));
    }
}

#[test]
fn audio_video_data_offer_gets_two_rejected_sections_in_order() {
    let offer = Offer::parse(OFFER_AV).unwrap();
    let kinds: Vec<_> = offer.media.iter().map(|m| (m.media.as_str(), m.mid.as_deref().unwrap())).collect();
    assert_eq!(kinds, [("audio", "0"), ("video", "1"), ("application", "2")]);
    assert_eq!(offer.bundle_groups, vec![vec!["0".to_owned(), "1".to_owned(), "2".to_owned()]]);
    assert_eq!(offer.data.index, 2);
    assert_eq!(offer.data.ice_ufrag, "+sSw");
    assert_eq!(offer.data.candidates.len(), 2);
    assert_eq!(offer.media[0].proto, "UDP/TLS/RTP/SAVPF");
    assert_eq!(offer.media[0].fmt, "111 63 9 0 8 13 110 126");

    let sdp = answer().to_sdp(&offer).unwrap();
    let m_lines: Vec<_> = sdp.lines().filter(|l| l.starts_with("m=")).collect();
    assert_eq!(
        m_lines,
        [
            "m=audio 0 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126",
            &format!("m=video 0 UDP/TLS/RTP/SAVPF {}", offer.media[1].fmt),
            "m=application 4000 UDP/DTLS/SCTP webrtc-datachannel",
        ]
    );
    // A rejected section is its m=, c= and mid, nothing else.
    let audio: Vec<_> = sdp.split("m=").nth(1).unwrap().lines().skip(1).collect();
    assert_eq!(audio, ["c=IN IP4 0.0.0.0", "a=mid:0"]);
    assert!(sdp.contains("a=group:BUNDLE 2\r\n"));
    let back = Offer::parse(&sdp).unwrap();
    assert_eq!(back.media.iter().map(|m| m.port).collect::<Vec<_>>(), [0, 0, 4000]);
    assert_eq!(back.media.iter().map(|m| m.mid.clone().unwrap()).collect::<Vec<_>>(), ["0", "1", "2"]);
}

#[test]
fn answer_without_addresses_uses_placeholders() {
    let mut ours = answer();
    ours.addresses.clear();
    ours.ice_options = vec!["ice2".to_owned()];
    let sdp = ours.to_sdp(&Offer::parse(OFFER).unwrap()).unwrap();
    assert!(sdp.contains("m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\n"));
    assert!(sdp.contains("a=ice-options:ice2\r\n"));
    assert!(sdp.contains("a=end-of-candidates\r\n"));
    assert!(!sdp.contains("a=candidate"));
    let mut v6 = answer();
    v6.addresses.reverse();
    let sdp = v6.to_sdp(&Offer::parse(OFFER).unwrap()).unwrap();
    assert!(sdp.contains("m=application 4001 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP6 2001:db8::1\r\n"));
}

#[test]
fn answer_refuses_what_sdp_cannot_carry() {
    let offer = Offer::parse(OFFER).unwrap();
    type Edit = fn(&mut Answer);
    let bad: [(&str, Edit); 8] = [
        ("ice_ufrag", |a| a.ice_ufrag = "abc".into()),
        ("ice_ufrag", |a| a.ice_ufrag = "abcd\r\na=evil".into()),
        ("ice_pwd", |a| a.ice_pwd = "short".into()),
        ("ice_options", |a| a.ice_options = vec!["tri ckle".into()]),
        ("fingerprint", |a| a.fingerprint.bytes.truncate(31)),
        ("fingerprint", |a| a.fingerprint.algorithm = HashFunction::Other("x y".into())),
        ("sctp_init", |a| a.sctp_init = Some(Vec::new())),
        ("addresses", |a| a.addresses = vec![SocketAddr::from(([192, 0, 2, 1], 0))]),
    ];
    for (what, edit) in bad {
        let mut a = answer();
        edit(&mut a);
        match a.to_sdp(&offer) {
            Err(SdpError::BadAnswer { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        }
    }
    let passive = OFFER.replace("a=setup:actpass", "a=setup:passive");
    assert_eq!(
        answer().to_sdp(&Offer::parse(&passive).unwrap()),
        Err(SdpError::SetupConflict(Setup::Passive))
    );
    let active = OFFER.replace("a=setup:actpass", "a=setup:active");
    assert!(answer().to_sdp(&Offer::parse(&active).unwrap()).unwrap().contains("a=setup:passive"));
}

#[test]
fn session_level_values_and_media_level_overrides() {
    let session = "a=ice-ufrag:sess\r\na=ice-pwd:sessionpasswordsession\r\na=ice-options:trickle\r\n\
                   a=fingerprint:SHA-256 00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff\r\n\
                   a=setup:active\r\n";
    let offer = Offer::parse(&minimal(session, "a=mid:d\r\n")).unwrap();
    assert_eq!(offer.data.ice_ufrag, "sess");
    assert_eq!(offer.data.ice_pwd, "sessionpasswordsession");
    assert_eq!(offer.data.ice_options, ["trickle"]);
    assert_eq!(offer.data.setup, Some(Setup::Active));
    assert_eq!(offer.data.fingerprints[0].algorithm, HashFunction::Sha256);
    assert_eq!(offer.data.fingerprints[0].bytes[10], 0xAA);
    assert!(offer.data.fingerprints[0]
        .to_string()
        .starts_with("sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB"));
    // No a=sctp-port, no a=max-message-size: RFC 8841 defaults.
    assert_eq!(offer.data.sctp_port, 5000);
    assert_eq!(offer.data.max_message_size, 65536);

    let offer = Offer::parse(&minimal(session, DATA_ATTRS)).unwrap();
    assert_eq!(offer.data.ice_ufrag, "abcd", "media level overrides session level");
    assert_eq!(offer.data.ice_pwd, "abcdefghijklmnopqrstuv");
    assert_eq!(offer.data.setup, Some(Setup::ActPass));
    assert_eq!(offer.data.fingerprints.len(), 1);
    assert_eq!(offer.data.fingerprints[0].bytes[10], 0xAA);
    assert_eq!(offer.session.ice_ufrag.as_deref(), Some("sess"));

    let lf_only = minimal(session, "a=max-message-size:0\r\na=sctp-port:5001\r\n").replace("\r\n", "\n");
    let offer = Offer::parse(&lf_only).unwrap();
    assert_eq!(offer.data.max_message_limit(), None, "0 means no limit (RFC 8841 §6)");
    assert_eq!(offer.data.sctp_port, 5001);
}

#[test]
fn other_attributes_of_the_subset() {
    let extra = "a=tls-id:abcdefghij0123456789-_+/\r\na=end-of-candidates\r\n\
                 a=fingerprint:sha-1 4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF:3E:5D:49:6B:19:E5:7C:AB\r\n\
                 a=candidate:a0+B/3 1 udp 2130706432 74.125.127.126 2345 typ srflx raddr 192.168.1.5 rport 2346 generation 2\r\n\
                 a=candidate:4 1 tcp 1518280447 192.0.2.3 9 typ host tcptype active\r\n\
                 a=unknown-attribute:whatever at all\r\na=rtcp-mux\r\nb=AS:30\r\n";
    let offer = Offer::parse(&minimal("a=msid-semantic: WMS\r\n", &format!("{DATA_ATTRS}{extra}"))).unwrap();
    let d = &offer.data;
    assert_eq!(d.tls_id.as_deref(), Some("abcdefghij0123456789-_+/"));
    assert!(d.end_of_candidates);
    assert_eq!(d.fingerprints.len(), 2);
    assert_eq!(d.fingerprints[1].algorithm, HashFunction::Sha1);
    assert_eq!(d.sha256_fingerprints().count(), 1, "sha-1 kept but not used for verification");
    let srflx = &d.candidates[0];
    assert_eq!(srflx.foundation, "a0+B/3");
    assert_eq!(srflx.kind, CandidateType::ServerReflexive);
    assert_eq!(srflx.related_address, Some(CandidateAddress::Ip("192.168.1.5".parse().unwrap())));
    assert_eq!(srflx.related_port, Some(2346));
    assert_eq!(
        srflx.to_string(),
        "a0+B/3 1 udp 2130706432 74.125.127.126 2345 typ srflx raddr 192.168.1.5 rport 2346"
    );
    assert_eq!(Candidate::parse(&srflx.to_string()).as_ref(), Ok(srflx));
    assert!(!d.candidates[1].is_udp());
}

#[test]
fn bundle_only_data_section_takes_the_tag_transport() {
    let text = "v=0\r\no=- 1 2 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE a d\r\n\
                m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\n\
                a=candidate:1 1 UDP 2130706431 192.0.2.9 5000 typ host\r\n"
        .to_owned()
        + &DATA_ATTRS.replace("a=mid:0", "a=mid:a")
        + "m=application 0 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=bundle-only\r\na=mid:d\r\n";
    let offer = Offer::parse(&text).unwrap();
    assert_eq!(offer.data.index, 1);
    assert_eq!(offer.data.ice_ufrag, "abcd");
    assert_eq!(offer.data.candidates.len(), 1);
    let sdp = answer().to_sdp(&offer).unwrap();
    assert!(
        sdp.contains(
            "a=group:BUNDLE d\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:a\r\n"
        ),
        "{sdp}"
    );
}

#[test]
fn offers_lacking_what_we_need() {
    let no_ufrag = OFFER.replace("a=ice-ufrag:mI7X\r\n", "");
    assert_eq!(Offer::parse(&no_ufrag), Err(SdpError::MissingIceUfrag { section: 1 }));
    let no_pwd = OFFER.replace("a=ice-pwd:5HJ89i2hsmdeSaUJiRx6JBkE\r\n", "");
    assert_eq!(Offer::parse(&no_pwd), Err(SdpError::MissingIcePwd { section: 1 }));
    let no_fp: String =
        OFFER.lines().filter(|l| !l.starts_with("a=fingerprint")).map(|l| format!("{l}\n")).collect();
    assert_eq!(Offer::parse(&no_fp), Err(SdpError::MissingFingerprint { section: 1 }));
    let no_data: String = OFFER_AV.split("m=application").next().unwrap().to_owned();
    assert_eq!(Offer::parse(&no_data), Err(SdpError::NoDataSection { sections: 2 }));
    let rejected = OFFER.replace("m=application 9", "m=application 0");
    assert_eq!(Offer::parse(&rejected), Err(SdpError::NoDataSection { sections: 1 }));
    let legacy = OFFER.replace("UDP/DTLS/SCTP webrtc-datachannel", "DTLS/SCTP 5000");
    assert_eq!(Offer::parse(&legacy), Err(SdpError::NoDataSection { sections: 1 }));
    // Without v=, o= or s=, the first line out of place is refused (RFC 8866 §5 order).
    for (at, line) in [(1, "v=0\r\n"), (2, "o=- 8092653970316037715 2 IN IP4 127.0.0.1\r\n"), (3, "s=-\r\n")]
    {
        let text = OFFER.replace(line, "");
        assert!(matches!(Offer::parse(&text), Err(SdpError::Malformed { line, .. }) if line == at), "{line}");
    }
    assert_eq!(Offer::parse("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n"), Err(SdpError::MissingLine('s')));
    assert_eq!(Offer::parse(""), Err(SdpError::MissingLine('v')));
    assert_eq!(Offer::parse(&OFFER.replace("t=0 0\r\n", "")), Err(SdpError::MissingLine('t')));
}

#[test]
fn hostile_offers_are_refused_with_the_reason() {
    let huge = format!("{OFFER}{}", "a=x\r\n".repeat(sdp::MAX_SDP_LEN / 5));
    assert_eq!(Offer::parse(&huge), Err(SdpError::TooLarge { len: huge.len(), max: sdp::MAX_SDP_LEN }));
    let many_lines = format!("{OFFER}{}", "\n".repeat(sdp::MAX_LINES));
    assert_eq!(Offer::parse(&many_lines), Err(SdpError::TooManyLines { max: sdp::MAX_LINES }));
    let many_sections = format!("{OFFER}{}", "m=audio 0 RTP/AVP 0\r\n".repeat(sdp::MAX_MEDIA_SECTIONS));
    assert!(matches!(Offer::parse(&many_sections), Err(SdpError::TooManyMediaSections { line: 83, .. })));
    let many_candidates =
        format!("{OFFER}{}", "a=candidate:1 1 udp 1 192.0.2.1 1 typ host\r\n".repeat(sdp::MAX_CANDIDATES));
    assert!(matches!(Offer::parse(&many_candidates), Err(SdpError::TooMany { what: "candidates", .. })));
    let many_fp = format!(
        "{OFFER}{}",
        "a=fingerprint:md5 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\r\n".repeat(8)
    );
    assert!(matches!(Offer::parse(&many_fp), Err(SdpError::TooMany { what: "fingerprints", max: 8, .. })));

    let cases: &[(&str, &str, SdpError)] = &[
        ("66:2E\r\n", "66:2G\r\n",
            SdpError::BadFingerprint { line: 15, reason: FingerprintError::BadHex { index: 31 } }),
        ("sha-256 AB:C1:02:C8:42:7E:74:54:50:71:04:D3:FF:CC:A9:15:69:71:9B:39:B2:70:A7:DD:4C:99:50:9D:14:17:66:2E", "sha-256 AB:C1:02",
            SdpError::BadFingerprint { line: 15, reason: FingerprintError::WrongLength { expected: 32, got: 3 } }),
        ("m=application 9 ", "m=application 70000 ",
            SdpError::Malformed { line: 8, reason: "the m= port is not a number from 0 to 65535" }),
        ("a=sctp-port:5000", "a=sctp-port:0",
            SdpError::Malformed { line: 18, reason: "a=sctp-port is not a number from 1 to 65535" }),
        ("a=max-message-size:262144", "a=max-message-size:99999999999999999999999",
            SdpError::Malformed { line: 19, reason: "a=max-message-size is not a decimal number below 2^64" }),
        ("udp 2113937151", "udp 2147483648",
            SdpError::BadCandidate { line: 10, reason: sdp::CandidateError { reason: "the priority is not a number from 1 to 2^31-1" } }),
        ("1768271309 1 udp", "1768271309 0 udp",
            SdpError::BadCandidate { line: 10, reason: sdp::CandidateError { reason: "the component id is not a number from 1 to 256" } }),
        ("45453 typ host", "45453 typo host",
            SdpError::BadCandidate { line: 10, reason: sdp::CandidateError { reason: "\"typ\" expected after the port" } }),
        ("a=setup:actpass", "a=setup:maybe",
            SdpError::Malformed { line: 16, reason: "a=setup must be active, passive, actpass or holdconn" }),
        ("a=ice-ufrag:mI7X", "a=ice-ufrag:mI7",
            SdpError::Malformed { line: 12, reason: "a=ice-ufrag must be 4 to 256 ice-chars (A-Z a-z 0-9 + /)" }),
        ("a=mid:0", "a=mid:0\r\na=mid:1", SdpError::Duplicate { line: 18, attribute: "mid" }),
        ("a=ice-pwd:", "a=ice-pwd:5HJ89i2hsmdeSaUJiRx6JBkE\r\na=ice-pwd:", SdpError::Duplicate { line: 14, attribute: "ice-pwd" }),
        ("v=0", "v=1", SdpError::Malformed { line: 1, reason: "only SDP version 0 exists (v=0)" }),
        ("s=-", "s=-\r\nx=1", SdpError::UnknownLineType { line: 4, letter: 'x' }),
        ("s=-", "s=-\r\nhello", SdpError::Malformed { line: 4, reason: "a line must be <lower-case letter>=<value>" }),
        ("s=-", "s=-\0", SdpError::ForbiddenCharacter { line: 3 }),
        ("s=-", "s=-\rx", SdpError::ForbiddenCharacter { line: 3 }),
        ("a=sctp-port:5000", "a=sctp-port", SdpError::Malformed { line: 18, reason: "this attribute needs a value after ':'" }),
    ];
    for (from, to, expected) in cases {
        assert!(OFFER.contains(from), "{from}");
        let text = OFFER.replacen(from, to, 1);
        assert_eq!(Offer::parse(&text).as_ref(), Err(expected), "{to}");
        assert!(!expected.to_string().is_empty());
    }
    let twice = format!("{OFFER}m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:0\r\n");
    assert_eq!(Offer::parse(&twice), Err(SdpError::DuplicateMid { line: 21, mid: "0".to_owned() }));
}

#[test]
fn fingerprints_parse_format_and_verify() {
    let f = Fingerprint::parse("SHA-256 ab:c1:02:C8:42:7E:74:54:50:71:04:D3:FF:CC:A9:15:69:71:9B:39:B2:70:A7:DD:4C:99:50:9D:14:17:66:2E").unwrap();
    assert_eq!(f.algorithm, HashFunction::Sha256);
    assert_eq!(f.to_string(), "sha-256 AB:C1:02:C8:42:7E:74:54:50:71:04:D3:FF:CC:A9:15:69:71:9B:39:B2:70:A7:DD:4C:99:50:9D:14:17:66:2E");
    assert_eq!(Fingerprint::parse(&f.to_string()), Ok(f));
    let other = Fingerprint::parse("x-hash 01:02").unwrap();
    assert_eq!(other.algorithm, HashFunction::Other("x-hash".to_owned()));
    assert_eq!(other.to_string(), "x-hash 01:02");
    for (bad, err) in [
        ("sha-256", FingerprintError::Shape),
        ("sha-256 ", FingerprintError::Shape),
        ("sha\"256 00", FingerprintError::BadHashName),
        ("sha-256 0:11", FingerprintError::BadHex { index: 0 }),
        ("sha-256 00:11:", FingerprintError::BadHex { index: 2 }),
        ("sha-256 00::11", FingerprintError::BadHex { index: 1 }),
        ("sha-256 00:1é", FingerprintError::BadHex { index: 1 }),
        ("md5 00:11", FingerprintError::WrongLength { expected: 16, got: 2 }),
        ("x-hash 00:11 22", FingerprintError::BadHex { index: 1 }),
    ] {
        assert_eq!(Fingerprint::parse(bad), Err(err), "{bad}");
    }
    let long = format!("x-hash {}", ["00"; 65].join(":"));
    assert_eq!(Fingerprint::parse(&long), Err(FingerprintError::TooLong));

    let der = b"\x30\x82 not really a certificate";
    let ours = Fingerprint::of_certificate(der);
    assert_eq!(ours.bytes.len(), 32);
    assert!(ours.matches_certificate(der));
    assert!(!ours.matches_certificate(b"other"));
    // SHA-256("abc"), FIPS 180-2 appendix B.1.
    let abc =
        fp("BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD");
    assert!(abc.matches_certificate(b"abc"));
    let sha1 =
        Fingerprint::parse("sha-1 A9:99:3E:36:47:06:81:6A:BA:3E:25:71:78:50:C2:6C:9C:D0:D8:9D").unwrap();
    assert!(!sha1.matches_certificate(b"abc"), "SHA-1 is never accepted");
}

#[test]
fn fuzz_target_survives_inputs_near_the_limits() {
    // Sections with long format lists bring the offer near MAX_SDP_LEN; the answer repeats
    // them, so it can be longer than the offer.
    let fmt = vec!["96"; 700].join(" ");
    let mut text = OFFER.to_owned();
    while text.len() + fmt.len() + 40 < sdp::MAX_SDP_LEN
        && text.matches("m=").count() < sdp::MAX_MEDIA_SECTIONS
    {
        text.push_str(&format!("m=video 9 UDP/TLS/RTP/SAVPF {fmt}\r\n"));
    }
    let offer = Offer::parse(&text).unwrap();
    assert!(offer.media.len() > 60);
    assert!(answer().to_sdp(&offer).unwrap().len() > sdp::MAX_SDP_LEN);
    sdp::fuzz(text.as_bytes());
    sdp::fuzz(&[0xff; 4096]);
    dcep::fuzz(&[0xff; 4096]);
}

proptest! {
    #[test]
    fn offer_parser_never_panics(text in ".{0,600}") {
        let _ = Offer::parse(&text);
        sdp::fuzz(text.as_bytes());
    }

    #[test]
    fn mutated_chromium_offers_never_panic(
        which in 0usize..4,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..8),
    ) {
        let mut bytes = [OFFER, OFFER_SNAP, OFFER_IP, OFFER_AV][which].as_bytes().to_vec();
        for (at, byte, op) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => { bytes.remove(i); }
                2 => bytes.insert(i, byte),
                _ => { // drop the line holding byte i
                    let start = bytes[..i].iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
                    let end = bytes[i..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |p| i + p + 1);
                    bytes.drain(start..end);
                }
            }
        }
        sdp::fuzz(&bytes);
    }

    #[test]
    fn candidates_round_trip(
        foundation in "[a-zA-Z0-9+/]{1,32}",
        component in 1u16..=256,
        priority in 1u32..=0x7fff_ffff,
        ip in any::<IpAddr>(),
        port in any::<u16>(),
    ) {
        let c = Candidate {
            foundation, component, transport: "UDP".into(), priority,
            address: CandidateAddress::Ip(ip), port, kind: CandidateType::Relay,
            related_address: Some(CandidateAddress::Hostname("x.local".into())), related_port: Some(port),
        };
        prop_assert_eq!(Candidate::parse(&c.to_string()), Ok(c));
    }
}

// ---------------------------------------------------------------------------------------------
// DCEP

fn open_msg(channel_type: ChannelType, priority: u16, label: &str, protocol: &str) -> DcepMessage {
    DcepMessage::Open(Open { channel_type, priority, label: label.to_owned(), protocol: protocol.to_owned() })
}

const TYPES: [ChannelType; 6] = [
    ChannelType::Reliable { ordered: true },
    ChannelType::Reliable { ordered: false },
    ChannelType::PartialReliableRexmit { ordered: true, max_retransmits: 3 },
    ChannelType::PartialReliableRexmit { ordered: false, max_retransmits: 0 },
    ChannelType::PartialReliableTimed { ordered: true, lifetime_ms: 1500 },
    ChannelType::PartialReliableTimed { ordered: false, lifetime_ms: u32::MAX },
];

#[test]
fn every_channel_type_round_trips() {
    let codes: Vec<u8> = TYPES.iter().map(|t| t.code()).collect();
    assert_eq!(codes, [0x00, 0x80, 0x01, 0x81, 0x02, 0x82]);
    for t in TYPES {
        let message = open_msg(t, priority::HIGH, "label ✓", "proto");
        let bytes = message.encode().unwrap();
        assert_eq!(bytes[1], t.code());
        assert_eq!(DcepMessage::parse(&bytes), Ok(message));
        assert_eq!(ChannelType::from_wire(t.code(), t.reliability_parameter()), Ok(t));
    }
    assert_eq!(TYPES[2].reliability(), Reliability::MaxRetransmits(3));
    assert_eq!(TYPES[4].reliability(), Reliability::MaxLifetimeMs(1500));
    assert!(!TYPES[5].ordered() && TYPES[4].ordered());
    // RFC 8832 §5.1: a reliable channel's parameter is ignored on receipt.
    assert_eq!(ChannelType::from_wire(0x80, 77), Ok(ChannelType::Reliable { ordered: false }));
    assert_eq!(ChannelType::from_wire(0x03, 0), Err(MessageError::UnknownChannelType(0x03)));
    assert_eq!(ChannelType::from_wire(0xff, 0), Err(MessageError::UnknownChannelType(0xff)));
    assert_eq!(DcepMessage::Ack.encode().unwrap(), [0x02]);
    assert_eq!(DcepMessage::parse(&[0x02]), Ok(DcepMessage::Ack));
}

#[test]
fn open_bytes_match_the_rfc_layout() {
    // RFC 8832 §5.1: type 0x03, channel type, priority (2), reliability parameter (4),
    // label length (2), protocol length (2), label, protocol.
    let chat = open_msg(ChannelType::RELIABLE, priority::NORMAL, "chat", "").encode().unwrap();
    assert_eq!(chat, [0x03, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0x00, 0x04, 0x00, 0x00, b'c', b'h', b'a', b't']);
    let timed = ChannelType::PartialReliableTimed { ordered: false, lifetime_ms: 1500 };
    let bytes = open_msg(timed, priority::HIGH, "x", "proto").encode().unwrap();
    assert_eq!(
        bytes,
        [
            0x03, 0x82, 0x02, 0x00, 0x00, 0x00, 0x05, 0xDC, 0x00, 0x01, 0x00, 0x05, b'x', b'p', b'r', b'o',
            b't', b'o'
        ]
    );
    let too_long = "a".repeat(65536);
    assert_eq!(
        open_msg(ChannelType::RELIABLE, 0, &too_long, "").encode(),
        Err(DcepError::NameTooLong { field: "label", len: 65536 })
    );
}

#[test]
fn malformed_messages_are_refused() {
    let good = open_msg(ChannelType::RELIABLE, 256, "chat", "p").encode().unwrap();
    assert_eq!(DcepMessage::parse(&[]), Err(MessageError::Empty));
    for n in 1..good.len() {
        assert_eq!(DcepMessage::parse(&good[..n]), Err(MessageError::Truncated), "prefix of {n}");
    }
    let mut long = good.clone();
    long.push(0);
    assert_eq!(DcepMessage::parse(&long), Err(MessageError::TrailingBytes));
    // An ACK is its type byte; pion/datachannel pads it to 4 bytes, which are ignored.
    assert_eq!(DcepMessage::parse(&[0x02]), Ok(DcepMessage::Ack));
    assert_eq!(DcepMessage::parse(&[0x02, 0x00, 0x00, 0x00]), Ok(DcepMessage::Ack));
    assert_eq!(DcepMessage::parse(&[0x04]), Err(MessageError::UnknownType(0x04)));
    let mut bad_label = good.clone();
    bad_label[12] = 0xff;
    assert_eq!(DcepMessage::parse(&bad_label), Err(MessageError::InvalidUtf8 { field: "label" }));
    let mut bad_protocol = good.clone();
    bad_protocol[16] = 0xc3; // a lead byte with nothing after it
    assert_eq!(DcepMessage::parse(&bad_protocol), Err(MessageError::InvalidUtf8 { field: "protocol" }));
}

fn peer_open(
    table: &mut Channels,
    stream: u16,
    label: &str,
    t: ChannelType,
) -> Result<Option<ChannelEvent>, DcepError> {
    let bytes = open_msg(t, priority::NORMAL, label, "").encode().unwrap();
    table.handle(stream, Ppid::Dcep.value(), &bytes)
}

#[test]
fn browser_opens_on_even_streams_and_we_on_odd() {
    // Our answer is a=setup:passive: we are the DTLS server, the browser the client.
    let mut table = Channels::new(DtlsRole::Server);
    let event = peer_open(&mut table, 0, "chat", ChannelType::RELIABLE).unwrap();
    let ack = Outgoing {
        stream: 0,
        ppid: 50,
        unordered: false,
        reliability: Reliability::Reliable,
        data: vec![0x02],
    };
    assert_eq!(
        event,
        Some(ChannelEvent::Opened {
            stream: 0,
            label: "chat".into(),
            protocol: String::new(),
            channel_type: ChannelType::RELIABLE,
            priority: 256,
            ack
        })
    );
    assert_eq!(table.get(0).unwrap().state, ChannelState::Open);
    assert!(!table.get(0).unwrap().opened_locally);
    assert_eq!(
        table.handle(0, 51, b"hello").unwrap(),
        Some(ChannelEvent::Message { stream: 0, data: b"hello".to_vec(), binary: false })
    );
    assert_eq!(
        table.handle(0, 53, &[1, 2]).unwrap(),
        Some(ChannelEvent::Message { stream: 0, data: vec![1, 2], binary: true })
    );
    assert_eq!(
        table.handle(0, 56, &[0]).unwrap(),
        Some(ChannelEvent::Message { stream: 0, data: vec![], binary: false })
    );
    assert_eq!(
        table.handle(0, 57, &[0]).unwrap(),
        Some(ChannelEvent::Message { stream: 0, data: vec![], binary: true })
    );
    assert!(matches!(
        peer_open(&mut table, 2, "second", ChannelType::RELIABLE),
        Ok(Some(ChannelEvent::Opened { stream: 2, .. }))
    ));

    let (s1, open1) = table.open("server", "proto", ChannelType::RELIABLE, priority::HIGH).unwrap();
    let (s3, _) = table.open("server2", "", ChannelType::RELIABLE, priority::HIGH).unwrap();
    assert_eq!((s1, s3), (1, 3));
    assert_eq!(
        (open1.stream, open1.ppid, open1.unordered, open1.reliability),
        (1, 50, false, Reliability::Reliable)
    );
    assert_eq!(DcepMessage::parse(&open1.data), Ok(open_msg(ChannelType::RELIABLE, 512, "server", "proto")));
    assert_eq!(table.get(1).unwrap().state, ChannelState::Opening);
    assert_eq!(table.handle(1, 50, &[0x02]).unwrap(), Some(ChannelEvent::Acked { stream: 1 }));
    assert_eq!(table.get(1).unwrap().state, ChannelState::Open);
    assert_eq!(table.handle(1, 50, &[0x02]), Err(DcepError::UnexpectedAck { stream: 1 }), "a second ACK");
    assert_eq!(
        table.handle(0, 50, &[0x02]),
        Err(DcepError::UnexpectedAck { stream: 0 }),
        "the peer's channel"
    );
    assert_eq!(table.len(), 4);

    let mut client = Channels::new(DtlsRole::Client);
    assert_eq!(client.open("a", "", ChannelType::RELIABLE, 256).unwrap().0, 0);
    assert_eq!(client.open("b", "", ChannelType::RELIABLE, 256).unwrap().0, 2);
    assert!(matches!(
        peer_open(&mut client, 1, "s", ChannelType::RELIABLE),
        Ok(Some(ChannelEvent::Opened { .. }))
    ));
    assert_eq!(client.role(), DtlsRole::Client);
}

#[test]
fn data_before_the_ack_is_accepted_and_ordering_waits_for_it() {
    let unordered = ChannelType::PartialReliableRexmit { ordered: false, max_retransmits: 2 };
    let mut table = Channels::new(DtlsRole::Server);
    let (stream, _) = table.open("u", "", unordered, 256).unwrap();
    // Until the peer answers, our messages go ordered so none overtakes the OPEN.
    let early = table.send(stream, b"early", true).unwrap();
    assert_eq!((early.unordered, early.reliability, early.ppid), (false, Reliability::MaxRetransmits(2), 53));
    // The peer may send before its ACK arrives (RFC 8832 §6).
    assert_eq!(
        table.handle(stream, 51, b"hi").unwrap(),
        Some(ChannelEvent::Message { stream, data: b"hi".to_vec(), binary: false })
    );
    assert!(table.send(stream, b"now", false).unwrap().unordered);
    assert_eq!(table.handle(stream, 50, &[2]).unwrap(), Some(ChannelEvent::Acked { stream }), "the late ACK");
    // Empty messages: one zero byte with PPID 56/57 (RFC 8831 §6.6).
    let empty = table.send(stream, b"", false).unwrap();
    assert_eq!((empty.ppid, empty.data), (56, vec![0]));
    assert_eq!(table.send(stream, b"", true).unwrap().ppid, 57);

    // The peer's unordered channel is open at once.
    assert!(peer_open(&mut table, 4, "p", unordered).is_ok());
    assert!(table.send(4, b"x", false).unwrap().unordered);
}

#[test]
fn refused_opens_name_the_stream_to_reset() {
    let mut table = Channels::new(DtlsRole::Server);
    peer_open(&mut table, 0, "chat", ChannelType::RELIABLE).unwrap();
    let dup = peer_open(&mut table, 0, "again", ChannelType::RELIABLE).unwrap_err();
    assert_eq!(dup, DcepError::StreamInUse { stream: 0 });
    assert_eq!(dup.stream_to_reset(), Some(0));
    assert_eq!(table.get(0).unwrap().state, ChannelState::Closing, "RFC 8832 §6: the channel is closed");
    assert_eq!(table.get(0).unwrap().label, "chat");
    assert_eq!(table.send(0, b"x", false), Err(DcepError::Closing { stream: 0 }));

    let wrong = peer_open(&mut table, 7, "odd", ChannelType::RELIABLE).unwrap_err();
    assert_eq!(wrong, DcepError::WrongParity { stream: 7 });
    assert_eq!(wrong.stream_to_reset(), Some(7));
    assert!(table.get(7).is_none());
    assert_eq!(
        peer_open(&mut Channels::new(DtlsRole::Client), 2, "even", ChannelType::RELIABLE),
        Err(DcepError::WrongParity { stream: 2 })
    );
    assert_eq!(
        peer_open(&mut table, 65535, "reserved", ChannelType::RELIABLE),
        Err(DcepError::ReservedStream)
    );

    let mut bad = open_msg(ChannelType::RELIABLE, 1, "ab", "").encode().unwrap();
    bad[13] = 0x80;
    let err = table.handle(2, 50, &bad).unwrap_err();
    assert_eq!(err, DcepError::BadOpen { stream: 2, error: MessageError::InvalidUtf8 { field: "label" } });
    assert_eq!(err.stream_to_reset(), Some(2));
    assert!(table.get(2).is_none(), "no channel, no ACK");
    let truncated = table.handle(4, 50, &bad[..5]).unwrap_err();
    assert_eq!(truncated, DcepError::BadOpen { stream: 4, error: MessageError::Truncated });
    let on_open = table.handle(0, 50, &[0x09]).unwrap_err();
    assert_eq!(on_open, DcepError::Malformed { stream: 0, error: MessageError::UnknownType(9) });
    assert_eq!(on_open.stream_to_reset(), None);
}

#[test]
fn messages_that_fit_no_channel_are_refused() {
    let mut table = Channels::new(DtlsRole::Server);
    assert_eq!(table.handle(6, 51, b"x"), Err(DcepError::UnknownStream { stream: 6 }));
    assert_eq!(table.handle(6, 50, &[2]), Err(DcepError::UnknownStream { stream: 6 }));
    assert_eq!(table.send(6, b"x", false), Err(DcepError::UnknownStream { stream: 6 }));
    peer_open(&mut table, 0, "c", ChannelType::RELIABLE).unwrap();
    assert_eq!(table.handle(0, 52, b"part"), Err(DcepError::DeprecatedPpid { stream: 0, ppid: 52 }));
    assert_eq!(table.handle(0, 54, b"part"), Err(DcepError::DeprecatedPpid { stream: 0, ppid: 54 }));
    assert_eq!(table.handle(0, 0, b"x"), Err(DcepError::UnknownPpid { stream: 0, ppid: 0 }));
    assert_eq!(table.handle(0, 55, b"x"), Err(DcepError::UnknownPpid { stream: 0, ppid: 55 }));
    for e in [DcepError::UnknownStream { stream: 6 }, DcepError::DeprecatedPpid { stream: 0, ppid: 52 }] {
        assert_eq!(e.stream_to_reset(), None);
    }
    assert_eq!(Ppid::from_value(53), Some(Ppid::Binary));
    assert_eq!(Ppid::from_value(55), None);
}

#[test]
fn close_reset_and_reuse() {
    let mut table = Channels::new(DtlsRole::Server);
    let (stream, _) = table.open("a", "", ChannelType::RELIABLE, 256).unwrap();
    table.close(stream).unwrap();
    assert_eq!(table.get(stream).unwrap().state, ChannelState::Closing);
    // What the peer sent before it saw the reset is still delivered.
    assert!(matches!(table.handle(stream, 51, b"late"), Ok(Some(ChannelEvent::Message { .. }))));
    assert_eq!(table.reset(stream).unwrap().label, "a");
    assert!(table.is_empty());
    assert_eq!(table.reset(stream), None);
    assert_eq!(table.close(stream), Err(DcepError::UnknownStream { stream }));
    assert_eq!(table.open("b", "", ChannelType::RELIABLE, 256).unwrap().0, stream, "the id is free again");
    peer_open(&mut table, 0, "p", ChannelType::RELIABLE).unwrap();
    table.reset(0);
    assert!(peer_open(&mut table, 0, "p again", ChannelType::RELIABLE).is_ok());
}

#[test]
fn negotiated_channels_skip_dcep() {
    let mut table = Channels::new(DtlsRole::Server);
    table.add_negotiated(0, "neg", "", ChannelType::RELIABLE, 256).unwrap();
    assert_eq!(table.get(0).unwrap().state, ChannelState::Open);
    assert!(matches!(table.handle(0, 53, &[9]), Ok(Some(ChannelEvent::Message { .. }))));
    assert_eq!(table.handle(0, 50, &[2]), Err(DcepError::UnexpectedAck { stream: 0 }));
    assert_eq!(
        table.add_negotiated(0, "x", "", ChannelType::RELIABLE, 256),
        Err(DcepError::StreamTaken { stream: 0 })
    );
    assert_eq!(
        table.add_negotiated(65535, "x", "", ChannelType::RELIABLE, 256),
        Err(DcepError::StreamTaken { stream: 65535 })
    );
    assert_eq!(table.open("o", "", ChannelType::RELIABLE, 256).unwrap().0, 1);
}

#[test]
fn the_table_is_bounded() {
    let mut table = Channels::new(DtlsRole::Server);
    for n in 0..dcep::MAX_CHANNELS / 2 {
        assert_eq!(table.open("ours", "", ChannelType::RELIABLE, 256).unwrap().0, 2 * n as u16 + 1);
        assert!(peer_open(&mut table, 2 * n as u16, "theirs", ChannelType::RELIABLE).is_ok());
    }
    assert_eq!(table.len(), dcep::MAX_CHANNELS);
    assert_eq!(table.open("one more", "", ChannelType::RELIABLE, 256), Err(DcepError::NoFreeStream));
    let full = peer_open(&mut table, 5000, "one more", ChannelType::RELIABLE).unwrap_err();
    assert_eq!(full, DcepError::TableFull { stream: 5000 });
    assert_eq!(full.stream_to_reset(), Some(5000));

    // Labels and protocols together are bounded too: 16 OPENs of 128 KiB would be 2 MiB.
    let mut table = Channels::new(DtlsRole::Server);
    let big = "l".repeat(65535);
    let refused = (0..16u16)
        .map(|n| {
            let bytes = DcepMessage::Open(Open {
                channel_type: ChannelType::RELIABLE,
                priority: 0,
                label: big.clone(),
                protocol: big.clone(),
            })
            .encode()
            .unwrap();
            table.handle(2 * n, 50, &bytes)
        })
        .filter(|r| matches!(r, Err(DcepError::TableFull { .. })))
        .count();
    assert_eq!(refused, 8);
    assert!(
        table.iter().map(|(_, c)| c.label.len() + c.protocol.len()).sum::<usize>() <= dcep::MAX_NAME_BYTES
    );
}

proptest! {
    #[test]
    fn dcep_parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = DcepMessage::parse(&data);
        dcep::fuzz(&data);
    }

    #[test]
    fn dcep_table_fuzz_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        dcep::fuzz(&data);
    }

    #[test]
    fn opens_round_trip(code in prop::sample::select(vec![0u8, 0x80, 1, 0x81, 2, 0x82]), parameter in any::<u32>(),
                        priority in any::<u16>(), label in ".{0,40}", protocol in ".{0,20}") {
        let channel_type = ChannelType::from_wire(code, parameter).unwrap();
        let message = DcepMessage::Open(Open { channel_type, priority, label, protocol });
        let bytes = message.encode().unwrap();
        prop_assert_eq!(DcepMessage::parse(&bytes), Ok(message));
        prop_assert_eq!(bytes[1], code);
    }
}
