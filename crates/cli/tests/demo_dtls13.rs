//! `fastshake demo --dtls 1.3`: the DTLS 1.3 handshake datagram by datagram, in order, with
//! what each encrypted datagram holds as the demo labels it, then the echoed records.

use std::process::Command;

fn demo(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fastshake")).arg("demo").args(args).output().expect("run");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The handshake's datagrams as (sender, records without their sizes, label).
fn handshake_lines(out: &str) -> Vec<(String, String, String)> {
    let section = out.split("datagram by datagram:\n").nth(1).expect("the handshake section");
    let section = section.split("\n\n").next().unwrap();
    section
        .lines()
        .map(|line| {
            let (sender, rest) = match line.split_once("client -> server") {
                Some((_, rest)) => ("client", rest),
                None => ("server", line.split_once("server -> client").expect(line).1),
            };
            // "  219 B  records  [label]"
            let rest = rest.trim_start().split_once(" B  ").expect(line).1;
            let (records, label) = match rest.split_once("  [") {
                Some((records, label)) => (records, label.trim_end_matches(']')),
                None => (rest, ""),
            };
            let mut records = records.to_owned();
            // Encrypted records' lengths depend on the suite: named without them.
            while let Some(at) = records.find(", ") {
                let end = records[at..].find(" B)").map_or(records.len(), |e| at + e + 2);
                records.replace_range(at..end, "");
            }
            (sender.to_owned(), records, label.to_owned())
        })
        .collect()
}

#[test]
fn the_dtls13_handshake_datagram_by_datagram() {
    let (ok, out, err) = demo(&["--dtls", "1.3"]);
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("a DTLS 1.3 server and a client"), "{out}");
    let lines = handshake_lines(&out);
    let cookie = |line: &str| line.split("cookie ").nth(1).map(|c| c.split(' ').next().unwrap().to_owned());
    let names: Vec<(&str, &str, &str)> =
        lines.iter().map(|(s, r, l)| (s.as_str(), r.as_str(), l.as_str())).collect();
    let hrr_cookie = cookie(names[1].1).expect("a cookie in the HelloRetryRequest");
    assert_eq!(cookie(names[2].1), Some(hrr_cookie.clone()), "the second ClientHello returns it");
    assert_eq!(
        names,
        [
            ("client", "ClientHello (no cookie)", ""),
            ("server", format!("HelloRetryRequest (cookie {hrr_cookie} B)").as_str(), ""),
            ("client", format!("ClientHello (cookie {hrr_cookie} B)").as_str(), ""),
            (
                "server",
                // One record holds the flight's messages while the datagram has room.
                "ServerHello + encrypted record (epoch 2)",
                "encrypted flight: EncryptedExtensions, Finished"
            ),
            ("client", "encrypted record (epoch 2)", "encrypted: Finished"),
            ("server", "encrypted record (epoch 3)", "encrypted: ACK"),
        ],
        "{out}"
    );
    assert!(out.contains(
        "client: handshake done: TLS_AES_128_GCM_SHA256 (DTLS 1.3; x25519; after a cookie exchange (HelloRetryRequest))"
    ));
    assert!(out.contains("got back \"hello, server\""), "{out}");
}

#[test]
fn groups_and_suite_reach_the_dtls13_handshake() {
    let (ok, out, err) = demo(&["--dtls", "1.3", "--groups", "", "--suite", "TLS_AES_128_CCM_8_SHA256"]);
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("offers no group: the PSK alone keys the session (psk_ke)"), "{out}");
    assert!(out.contains("client: handshake done: TLS_AES_128_CCM_8_SHA256 (DTLS 1.3; "), "{out}");
    assert!(!out.contains("x25519"), "no group negotiated: {out}");
    assert_eq!(handshake_lines(&out).len(), 6, "{out}");

    let (ok, _, err) = demo(&["--groups", "x25519"]);
    assert!(!ok && err.contains("--dtls 1.3"), "{err}");
    let (ok, _, err) = demo(&["--dtls", "1.3", "--groups", "x448"]);
    assert!(!ok && err.contains("unknown group \"x448\""), "{err}");
}
