//! Writes the seed corpus of the DTLS fuzz targets from a real in-memory handshake:
//! `cargo run -p fastshake-dtls --example capture_corpus -- fuzz/corpus`

use std::path::Path;

fn main() {
    let out = std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus".into());
    let out = Path::new(&out);
    let (_, _, log) = fastshake_dtls::fuzzing::established_pair();
    let mut n = 0;
    for (i, (to_server, datagram)) in log.iter().enumerate() {
        let name = format!("seed-{i:03}-{}", if *to_server { "c2s" } else { "s2c" });
        for target in ["dtls_record", "dtls_session"] {
            write(&out.join(target), &name, datagram);
        }
        if *to_server {
            write(&out.join("dtls_endpoint"), &name, datagram);
        }
        // Handshake record bodies (content type 22, epoch 0): the handshake target's input.
        let mut pos = 0;
        let mut r = 0;
        while pos + 13 <= datagram.len() {
            let len = u16::from_be_bytes([datagram[pos + 11], datagram[pos + 12]]) as usize;
            let end = (pos + 13 + len).min(datagram.len());
            if datagram[pos] == 22 && datagram[pos + 3] == 0 && datagram[pos + 4] == 0 {
                write(&out.join("dtls_handshake"), &format!("{name}-r{r}"), &datagram[pos + 13..end]);
                n += 1;
            }
            pos = end;
            r += 1;
        }
    }
    // A session with Connection IDs both ways (tls12_cid records) and the mobility extensions.
    let cid = |n| fastshake_dtls::Mobility {
        connection_id: Some(n),
        return_routability_check: true,
        follow_server_port: true,
    };
    let (_, _, cid_log) = fastshake_dtls::fuzzing::established_pair_with(cid(3), cid(4));
    for (i, (to_server, datagram)) in cid_log.iter().enumerate() {
        let name = format!("cid-seed-{i:03}-{}", if *to_server { "c2s" } else { "s2c" });
        for target in ["dtls_record", "dtls_session"] {
            write(&out.join(target), &name, datagram);
        }
        if *to_server {
            write(&out.join("dtls_endpoint"), &name, datagram);
        }
    }
    // A DTLS 1.3 session with CIDs both ways: unified headers with the C bit.
    let (_, _, cid13_log) = fastshake_dtls::fuzzing::established_pair13_with(cid(3), cid(4));
    for (i, (to_server, datagram)) in cid13_log.iter().enumerate() {
        let name = format!("cid13-seed-{i:03}-{}", if *to_server { "c2s" } else { "s2c" });
        write(&out.join("dtls_record"), &name, datagram);
        if *to_server {
            write(&out.join("dtls_endpoint"), &name, datagram);
        }
    }
    println!(
        "wrote {} datagrams and {n} handshake records under {}",
        log.len() + cid_log.len() + cid13_log.len(),
        out.display()
    );
}

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::create_dir_all(dir).expect("create corpus directory");
    std::fs::write(dir.join(name), data).expect("write corpus file");
}
