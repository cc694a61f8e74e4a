//! The IEEE 802.15.4 capture of `fastshake sim --frames-pcap` is real 6LoWPAN: Wireshark's
//! dissectors (tshark, which CI installs) read every data frame as 6LoWPAN → IPv6 → UDP → DTLS,
//! reassemble the fragmented datagrams, find every UDP checksum good, raise no expert info, and
//! see the handshake's messages. One scenario crosses a relay (mesh addresses, compressed with
//! context 0 = fd00::/64, which tshark is told), one is a single hop (link-local addresses, fully
//! elided, which tshark derives from the MAC addresses with no hint).

use fastshake_sim::scenario::{ieee802154_chain_toml, tsch_fields};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// sensor —tsch— root, one hop.
fn one_hop_scenario() -> String {
    let radios = ieee802154_chain_toml(&["sensor", "root"], "radio", &tsch_fields(11, 1));
    format!("name = \"dtls-tsch-one-hop\"\nseed = 2\nduration_s = 300\n\n{radios}{ONE_HOP_APPS}")
}

const ONE_HOP_APPS: &str = r#"
[[app]]
name = "sensor"
node = "sensor"
kind = "dtls-client"
port = 20000
server = "10.0.0.1:5684"
sessions = 2
records = 1
retransmit_ms = 2000
handshake_timeout_s = 300

[[app]]
name = "root"
node = "root"
kind = "dtls-server"
port = 5684
retransmit_ms = 2000
handshake_timeout_s = 300

[[expect]]
app = "sensor"
handshakes = 2
"#;

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fastshake-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn frames_pcap(scenario: &Path, pcap: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_fastshake"))
        .arg("sim")
        .arg(scenario)
        .arg("--frames-pcap")
        .arg(pcap)
        .output()
        .expect("run fastshake sim");
    assert!(out.status.success(), "fastshake sim failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn tshark(pcap: &Path, context: bool, args: &[&str]) -> String {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap).args(["-o", "udp.check_checksum:TRUE", "-d", "udp.port==5684,dtls"]);
    if context {
        cmd.args(["-o", "6lowpan.context0:fd00::/64"]);
    }
    let out = cmd.args(args).output().expect("tshark is installed (.ci/run installs it)");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Checks one capture; returns the handshake message types tshark saw.
fn check_capture(pcap: &Path, context: bool) -> BTreeSet<u8> {
    let expert = tshark(pcap, context, &["-Y", "_ws.expert || _ws.malformed"]);
    assert!(expert.is_empty(), "tshark raised expert info on {}:\n{expert}", pcap.display());
    let fields = tshark(
        pcap,
        context,
        &["-T", "fields", "-E", "separator=|", "-e", "frame.protocols", "-e", "wpan.frame_type"]
            .iter()
            .chain(&[
                "-e",
                "6lowpan.reassembled.length",
                "-e",
                "udp.checksum.status",
                "-e",
                "dtls.handshake.type",
            ])
            .copied()
            .collect::<Vec<_>>(),
    );
    let (mut data_frames, mut dtls_datagrams, mut reassembled) = (0, 0, 0);
    let mut types = BTreeSet::new();
    for line in fields.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let (protocols, frame_type) = (f[0], f[1]);
        if frame_type != "0x0001" || !protocols.contains("6lowpan") {
            assert!(!protocols.contains("6lowpan") || frame_type == "0x0001", "{line}");
            continue;
        }
        data_frames += 1;
        assert!(protocols.starts_with("wpan:6lowpan"), "{line}");
        if protocols.contains("ipv6") {
            // A whole datagram here: unfragmented, or the frame that completed it.
            assert_eq!(protocols, "wpan:6lowpan:ipv6:udp:dtls", "{line}");
            assert_eq!(f[3], "1", "UDP checksum good: {line}");
            dtls_datagrams += 1;
            reassembled += usize::from(!f[2].is_empty());
            types.extend(f[4].split(',').filter(|t| !t.is_empty()).map(|t| t.parse::<u8>().unwrap()));
        }
    }
    eprintln!(
        "{}: {data_frames} data frames, {dtls_datagrams} DTLS datagrams ({reassembled} reassembled from fragments), handshake types {types:?}",
        pcap.display()
    );
    assert!(reassembled > 0, "some datagrams took several frames");
    assert!(dtls_datagrams < data_frames, "fragments are counted as data frames too");
    types
}

#[test]
fn tshark_decodes_the_frames_down_to_the_dtls_handshake() {
    let scratch = Scratch::new("lowpan-tshark");
    // ClientHello, HelloVerifyRequest, ServerHello, ServerHelloDone, ClientKeyExchange (PSK;
    // Finished is encrypted).
    let expected: BTreeSet<u8> = [1, 2, 3, 14, 16].into();

    // sensor — relay — root over TSCH: the file's sweep writes one capture per run.
    let relayed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/dtls-tsch.toml");
    frames_pcap(&relayed, &scratch.0.join("relayed.pcap"));
    let types = check_capture(&scratch.0.join("relayed-0.pcap"), true);
    assert!(types.is_superset(&expected), "{types:?}");
    // Without the context the mesh addresses decompress wrong and every checksum fails: the
    // check above can fail.
    let unhinted = tshark(&scratch.0.join("relayed-0.pcap"), false, &["-Y", "udp.checksum.status == 0"]);
    assert!(!unhinted.is_empty(), "mesh addresses need context 0");

    let one_hop = scratch.0.join("one-hop.toml");
    std::fs::write(&one_hop, one_hop_scenario()).unwrap();
    frames_pcap(&one_hop, &scratch.0.join("one-hop.pcap"));
    let types = check_capture(&scratch.0.join("one-hop.pcap"), false);
    assert!(types.is_superset(&expected), "{types:?}");
}
