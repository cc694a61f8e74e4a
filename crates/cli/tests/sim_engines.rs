//! `fastshake sim` with the lab's DTLS and SCTP apps: the summary has a handshakes table
//! (completed/failed, durations, bytes, kinds), `--json` carries the same, and a run that misses
//! one of the file's `[[expect]]` tables fails the command after printing it.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name)
}

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastshake")).arg("sim").args(args).output().expect("run fastshake sim")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "fastshake sim failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn app<'a>(report: &'a Value, name: &str) -> &'a Value {
    let apps = report["apps"].as_array().expect("apps");
    apps.iter().find(|a| a["name"] == name).unwrap_or_else(|| panic!("no app {name}"))
}

#[test]
fn the_summary_has_a_handshakes_table_beside_the_apps() {
    let path = scenario("sctp-zero-rtt.toml");
    let text = stdout(&sim(&[path.to_str().unwrap()]));
    let table = text.split("\nhandshakes").nth(1).expect("a handshakes table");
    let row = table.lines().find(|l| l.starts_with("zero-rtt ")).expect("a row for the zero-RTT client");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["3/3", "0", "0"], "{row}");
    assert!(row.contains("alt-cached+0rtt 2") && row.contains("alt-cookie+0rtt 1"), "{row}");
    assert!(text.contains("expectations: 11 checked, all met"), "{text}");
}

#[test]
fn json_carries_the_handshakes_and_a_seed_fixes_them() {
    let path = scenario("dtls-cid-handover.toml");
    let run =
        || -> Value { serde_json::from_str(&stdout(&sim(&[path.to_str().unwrap(), "--json"]))).unwrap() };
    let report = run();
    let client = &app(&report, "client")["handshakes"];
    assert_eq!(client["planned"], 1);
    assert_eq!(client["completed"], 1, "one handshake across the handover: {client}");
    assert_eq!(client["failed"], 0);
    assert_eq!(client["kinds"]["full"], 1);
    assert!(client["duration_p50_ms"].as_f64().unwrap() > 0.0);
    assert!(client["bytes"].as_u64().unwrap() > 0);
    assert_eq!(app(&report, "client")["replies"], 60, "every record echoed from both addresses");
    assert_eq!(report["nats"][0]["counters"]["mappings_created"], 2, "the client did change address");
    assert_eq!(report["expectations"]["unmet"].as_array().map(Vec::len), Some(0));
    assert_eq!(report, run());
    let ping = serde_json::from_str::<Value>(&stdout(&sim(&[
        scenario("lossy-link.toml").to_str().unwrap(),
        "--json",
    ])))
    .unwrap();
    assert!(app(&ping, "client:ping")["handshakes"].is_null(), "ping has no handshakes");
}

#[test]
fn an_unmet_expectation_fails_the_command() {
    let text = std::fs::read_to_string(scenario("dtls-resumption.toml")).unwrap();
    let wrong = text.replacen("replies = 12", "replies = 13", 1);
    assert_ne!(text, wrong);
    let path = std::env::temp_dir().join(format!("fastshake-sim-expect-{}.toml", std::process::id()));
    std::fs::write(&path, wrong).unwrap();
    let out = sim(&[path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success(), "the command fails");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not met: ecdsa: replies 12, expected 13"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 expectation(s)"));
}

#[test]
fn an_engine_app_with_a_bad_setting_is_refused_by_name() {
    let text = std::fs::read_to_string(scenario("dtls-strategies.toml")).unwrap();
    let wrong = text.replacen("mobility = \"tcs\"", "mobility = \"roaming\"", 1);
    let path = std::env::temp_dir().join(format!("fastshake-sim-bad-{}.toml", std::process::id()));
    std::fs::write(&path, wrong).unwrap();
    let out = sim(&[path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("roaming") && err.contains("ipc"), "{err}");
}

/// The UDP payloads of a raw-IPv4 pcap the simulator wrote (big-endian, LINKTYPE_RAW): every
/// datagram once per link it crossed.
fn udp_payloads(pcap: &[u8]) -> Vec<Vec<u8>> {
    let be32 = |b: &[u8], at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    assert_eq!(&pcap[..2], [0xa1, 0xb2], "a big-endian pcap");
    let (mut at, mut out) = (24, Vec::new());
    while at + 16 <= pcap.len() {
        let len = be32(pcap, at + 8);
        let packet = &pcap[at + 16..at + 16 + len];
        at += 16 + len;
        let ihl = usize::from(packet[0] & 0x0f) * 4;
        if packet[9] == 17 {
            out.push(packet[ihl + 8..].to_vec());
        }
    }
    out
}

/// The (header, body) lengths of the DTLS records of a datagram: the DTLS 1.2 header (13 bytes,
/// RFC 6347 §4.1) or DTLS 1.3's unified header (RFC 9147 §4: first byte 001CSLEE), with the
/// epoch (two low bits for the unified header).
fn records(mut datagram: &[u8]) -> Vec<(usize, usize, u16)> {
    let mut out = Vec::new();
    while !datagram.is_empty() {
        let first = datagram[0];
        let (header, body, epoch) = if first & 0xe0 == 0x20 {
            assert_eq!(first & 0x10, 0, "no connection ID in these runs");
            let seq = if first & 0x08 != 0 { 2 } else { 1 };
            let header = 1 + seq + if first & 0x04 != 0 { 2 } else { 0 };
            let body = if first & 0x04 != 0 {
                usize::from(u16::from_be_bytes([datagram[1 + seq], datagram[2 + seq]]))
            } else {
                datagram.len() - header
            };
            (header, body, u16::from(first & 0x03))
        } else {
            let body = usize::from(u16::from_be_bytes([datagram[11], datagram[12]]));
            (13, body, u16::from_be_bytes([datagram[3], datagram[4]]))
        };
        out.push((header, body, epoch));
        datagram = &datagram[header + body..];
    }
    out
}

/// scenarios/dtls13-tsch.toml runs dtls-tsch.toml's sessions with DTLS 1.3: every handshake
/// completes as a 1.3 one, the run prints the frames and the handshake bytes, and its protected
/// records are 1.3's: the unified header instead of 13 bytes, no explicit nonce, and one byte of
/// inner content type, so a 32-byte request with CCM_8's 8-byte tag is 13 + 8 + 32 + 8 bytes in
/// DTLS 1.2 and at most 5 + 32 + 1 + 8 in DTLS 1.3.
#[test]
fn dtls13_over_tsch_completes_with_the_unified_header() {
    let dir = std::env::temp_dir();
    let run = |file: &str| {
        let pcap = dir.join(format!("fastshake-sim-{file}-{}.pcap", std::process::id()));
        let out = sim(&[scenario(file).to_str().unwrap(), "--json", "--pcap", pcap.to_str().unwrap()]);
        let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
        // The third run of the sweep, C = 3, resends no request in either version.
        let third = pcap.with_file_name(format!("fastshake-sim-{file}-{}-2.pcap", std::process::id()));
        let captured = std::fs::read(&third).unwrap();
        for i in 0..3 {
            let _ = std::fs::remove_file(
                pcap.with_file_name(format!("fastshake-sim-{file}-{}-{i}.pcap", std::process::id())),
            );
        }
        (report, udp_payloads(&captured))
    };
    let (v13, pcap13) = run("dtls13-tsch.toml");
    let (v12, pcap12) = run("dtls-tsch.toml");
    let runs = v13.as_array().expect("a sweep");
    assert_eq!(runs.len(), 3);
    for (r13, r12) in runs.iter().zip(v12.as_array().unwrap()) {
        for name in ["sensor", "root"] {
            let hs = &app(r13, name)["handshakes"];
            assert_eq!(hs["completed"], 3, "{name}: {hs}");
            assert_eq!(hs["failed"], 0);
            assert_eq!(hs["kinds"], serde_json::json!({ "dtls13-full": 3 }), "{name}");
            assert!(hs["bytes"].as_u64().unwrap() > 0);
            assert_eq!(app(r12, name)["handshakes"]["kinds"], serde_json::json!({ "full": 3 }));
        }
        assert_eq!(app(r13, "sensor")["replies"], 6);
        assert!(r13["links"].as_array().unwrap().iter().all(|l| l["a_to_b"]["frames"].as_u64() > Some(0)));
        assert_eq!(r13["expectations"]["unmet"].as_array().map(Vec::len), Some(0));
    }
    assert_eq!(app(&runs[2], "sensor")["retransmissions"], 0);
    assert_eq!(app(&v12[2], "sensor")["retransmissions"], 0);

    let all = |pcap: &[Vec<u8>]| pcap.iter().flat_map(|d| records(d)).collect::<Vec<_>>();
    let (r13, r12) = (all(&pcap13), all(&pcap12));
    // DTLS 1.2: every record has the 13-byte header; a request or an echo is 8 + 32 + 8 bytes.
    assert!(r12.iter().all(|&(header, ..)| header == 13));
    let data12 = r12.iter().filter(|&&(_, body, epoch)| epoch == 1 && body == 8 + 32 + 8).count();
    // DTLS 1.3: the ClientHellos and the HelloRetryRequest keep the 1.2 header in epoch 0, every
    // other record has the unified header; a request or an echo is 32 + 1 + 8 bytes of
    // ciphertext in epoch 3 (application data, RFC 9147 §6.1).
    assert!(r13.iter().all(|&(header, _, epoch)| header == 13 && epoch == 0 || header <= 5));
    assert!(r13.iter().any(|&(header, _, epoch)| header <= 5 && epoch == 2), "the encrypted flight");
    let data13: Vec<_> = r13.iter().filter(|&&(header, body, _)| header <= 5 && body == 32 + 1 + 8).collect();
    assert!(data13.iter().all(|&&(_, _, epoch)| epoch == 3), "{data13:?}");
    // Each request and its echo, once per hop, in both runs: 6 requests, 6 echoes, 2 hops.
    assert_eq!((data12, data13.len()), (24, 24));
}

#[test]
fn a_bad_dtls_version_in_a_scenario_is_refused_by_key_and_values() {
    let text = std::fs::read_to_string(scenario("dtls13-tsch.toml")).unwrap();
    let client = "port = 20000\ndtls = \"1.3\"";
    for (value, says) in [
        ("\"1.4\"", "dtls = \"1.4\": accepted values are \"1.2\", \"1.3\" and \"both\""),
        ("1.3", "dtls = 1.3: accepted values are \"1.2\", \"1.3\" and \"both\""),
    ] {
        let wrong = text.replacen(client, &format!("port = 20000\ndtls = {value}"), 1);
        assert_ne!(text, wrong);
        let path = std::env::temp_dir().join(format!("fastshake-sim-version-{}.toml", std::process::id()));
        std::fs::write(&path, wrong).unwrap();
        let out = sim(&[path.to_str().unwrap()]);
        let _ = std::fs::remove_file(&path);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says) && err.contains("sensor"), "{err}");
    }
}

/// scenarios/dtls13-cid-rebinding.toml: a DTLS 1.3 session with Connection IDs carries on when
/// the NAT gives it a new outside port; the same run without CIDs stalls there.
#[test]
fn a_dtls13_cid_session_follows_a_nat_rebinding() {
    let path = scenario("dtls13-cid-rebinding.toml");
    let report: Value = serde_json::from_str(&stdout(&sim(&[path.to_str().unwrap(), "--json"]))).unwrap();
    let client = app(&report, "client");
    assert_eq!(client["handshakes"]["kinds"], serde_json::json!({ "dtls13-full": 1 }), "{client}");
    assert_eq!(client["replies"], 60, "every record echoed from both ports");
    assert_eq!(app(&report, "server")["handshakes"]["completed"], 1, "one handshake across the rebinding");
    assert_eq!(report["nats"][0]["counters"]["mappings_created"], 2, "the server saw a new port");

    let standard =
        std::fs::read_to_string(&path).unwrap().replace("mobility = \"cid\"", "mobility = \"standard\"");
    let copy = std::env::temp_dir().join(format!("fastshake-sim-cid13-{}.toml", std::process::id()));
    std::fs::write(&copy, standard).unwrap();
    let out = sim(&[copy.to_str().unwrap(), "--json"]);
    let _ = std::fs::remove_file(&copy);
    assert!(!out.status.success(), "without CIDs the session stalls at the rebinding");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(app(&report, "client")["replies"].as_u64().unwrap() < 60);
}
