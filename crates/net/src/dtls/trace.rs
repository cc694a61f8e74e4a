//! The datagram trace hook, and the names of the records in a datagram that `-v` traces print.

use std::net::SocketAddr;
use std::sync::Arc;

/// Which way a traced datagram went, seen from the side that traces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// This side sent it.
    Sent,
    /// This side received it (traced before the engine decrypts it in place).
    Received,
}

/// Called with every datagram a driver sends or receives, and the peer's address. For
/// demonstrations and debugging; keep it cheap.
pub type DatagramTrace = Arc<dyn Fn(Direction, SocketAddr, &[u8]) + Send + Sync>;

/// Whether a record header can start with these bytes: a known content type and DTLS version.
fn plausible_record_header(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(20..=23 | 25 | 27)) && matches!(bytes.get(1..3), Some([0xfe, 0xfd | 0xff]))
}

/// How many leading bytes of `datagram` continue a record split across datagrams: the datagram
/// does not start with a record header, and from some point on holds whole records only.
fn split_record_rest(datagram: &[u8]) -> Option<usize> {
    if plausible_record_header(datagram) {
        return None;
    }
    let whole = |mut d: &[u8]| {
        while d.len() >= 13 && plausible_record_header(d) {
            let end = 13 + usize::from(u16::from_be_bytes([d[11], d[12]]));
            let Some(next) = d.get(end..) else { return false };
            d = next;
        }
        d.is_empty()
    };
    (1..datagram.len()).find(|&k| plausible_record_header(&datagram[k..]) && whole(&datagram[k..]))
}

/// Names the DTLS records in a datagram, from their plaintext headers only: content type, epoch,
/// and for unencrypted handshake records the message names (and fragment ranges). For the demo
/// and for tracing; it never fails, it describes what it cannot parse as such.
pub fn describe_datagram(datagram: &[u8]) -> Vec<String> {
    const RECORD_HEADER: usize = 13;
    let mut out = Vec::new();
    let mut rest = datagram;
    // The rest of a record its sender split across datagrams (RFC 6347 §4.1.1 forbids it; OpenSSL
    // 3.0 does it on loopback): bytes that are no record header, followed by whole records.
    if let Some(k) = split_record_rest(datagram) {
        out.push(format!("{k} B continuing a record split across datagrams"));
        rest = &datagram[k..];
    }
    while !rest.is_empty() {
        let Some(header) = rest.get(..RECORD_HEADER) else {
            out.push(format!("{} trailing byte(s)", rest.len()));
            break;
        };
        let content_type = header[0];
        let epoch = u16::from_be_bytes([header[3], header[4]]);
        if content_type == 25 {
            // tls12_cid (RFC 9146): the CID sits between the sequence number and the length,
            // and only its receiver knows how long it is; take the length that makes the record
            // end where the datagram or a next record header does.
            match tls12_cid_record_len(rest) {
                Some((cid_len, length)) => {
                    out.push(format!("tls12_cid record (CID {cid_len} B, {length} B encrypted)"));
                    rest = &rest[RECORD_HEADER + cid_len + length..];
                    continue;
                }
                None => {
                    out.push("tls12_cid record (unparsed)".to_owned());
                    break;
                }
            }
        }
        let length = usize::from(u16::from_be_bytes([header[11], header[12]]));
        let Some(body) = rest.get(RECORD_HEADER..RECORD_HEADER + length) else {
            let got = rest.len() - RECORD_HEADER.min(rest.len());
            out.push(format!("truncated record (type {content_type}, {got} of {length} B)"));
            break;
        };
        rest = &rest[RECORD_HEADER + length..];
        match (content_type, epoch) {
            (20, _) => out.push("ChangeCipherSpec".to_owned()),
            (21, 0) => out.push(describe_plain_alert(body)),
            (21, _) => out.push("Alert (encrypted)".to_owned()),
            (22, 0) => describe_handshake(body, &mut out),
            // In DTLS 1.2 the only handshake message of epoch 1 is Finished.
            (22, _) => out.push("Finished (encrypted)".to_owned()),
            (23, _) => out.push(format!("ApplicationData ({length} B encrypted)")),
            (27, _) => out.push("return_routability_check (encrypted)".to_owned()),
            (other, _) => out.push(format!("record of content type {other}")),
        }
    }
    out
}

/// The CID length and ciphertext length of the `tls12_cid` record at the start of `rest`.
fn tls12_cid_record_len(rest: &[u8]) -> Option<(usize, usize)> {
    (0..=usize::from(u8::MAX)).find_map(|cid_len| {
        let at = 11 + cid_len;
        let length = usize::from(u16::from_be_bytes([*rest.get(at)?, *rest.get(at + 1)?]));
        let end = at + 2 + length;
        let next_is_header =
            rest.get(end..end + 3).is_some_and(|h| (20..=27).contains(&h[0]) && h[1..] == [0xfe, 0xfd]);
        (end == rest.len() || next_is_header).then_some((cid_len, length))
    })
}

fn describe_plain_alert(body: &[u8]) -> String {
    match body {
        [level, description, ..] => {
            format!("Alert ({}, description {description})", if *level == 2 { "fatal" } else { "warning" })
        }
        _ => "Alert (truncated)".to_owned(),
    }
}

fn describe_handshake(mut body: &[u8], out: &mut Vec<String>) {
    const HANDSHAKE_HEADER: usize = 12;
    while !body.is_empty() {
        let Some(header) = body.get(..HANDSHAKE_HEADER) else {
            out.push("truncated handshake header".to_owned());
            return;
        };
        let msg_type = header[0];
        let total = u24(&header[1..4]);
        let offset = u24(&header[6..9]);
        let fragment_len = u24(&header[9..12]);
        let Some(fragment) = body.get(HANDSHAKE_HEADER..HANDSHAKE_HEADER + fragment_len) else {
            out.push(format!("{} (truncated)", handshake_name(msg_type)));
            return;
        };
        body = &body[HANDSHAKE_HEADER + fragment_len..];
        let mut name = handshake_name(msg_type).to_owned();
        if offset == 0 {
            match msg_type {
                1 => {
                    if let Some(cookie) = client_hello_cookie_len(fragment) {
                        name = if cookie == 0 {
                            "ClientHello (no cookie)".to_owned()
                        } else {
                            format!("ClientHello (cookie {cookie} B)")
                        };
                    }
                }
                3 => {
                    if let Some(&cookie) = fragment.get(2) {
                        name = format!("HelloVerifyRequest (cookie {cookie} B)");
                    }
                }
                _ => {}
            }
        }
        if offset != 0 || fragment_len != total {
            name.push_str(&format!(" [fragment {offset}..{} of {total} B]", offset + fragment_len));
        }
        out.push(name);
    }
}

fn u24(bytes: &[u8]) -> usize {
    bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
}

/// The cookie length of a ClientHello body: version(2) random(32) session_id<0..32> cookie<0..255>.
fn client_hello_cookie_len(body: &[u8]) -> Option<usize> {
    let session_id_len = usize::from(*body.get(34)?);
    body.get(35 + session_id_len).map(|&len| usize::from(len))
}

fn handshake_name(msg_type: u8) -> &'static str {
    match msg_type {
        0 => "HelloRequest",
        1 => "ClientHello",
        2 => "ServerHello",
        3 => "HelloVerifyRequest",
        4 => "NewSessionTicket",
        11 => "Certificate",
        12 => "ServerKeyExchange",
        13 => "CertificateRequest",
        14 => "ServerHelloDone",
        15 => "CertificateVerify",
        16 => "ClientKeyExchange",
        20 => "Finished",
        _ => "unknown handshake message",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(content_type: u8, epoch: u16, body: &[u8]) -> Vec<u8> {
        let mut r = vec![content_type, 0xfe, 0xfd];
        r.extend_from_slice(&epoch.to_be_bytes());
        r.extend_from_slice(&[0, 0, 0, 0, 0, 1]);
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    }

    fn handshake(msg_type: u8, total: usize, offset: usize, fragment: &[u8]) -> Vec<u8> {
        let mut h = vec![msg_type];
        h.extend_from_slice(&(total as u32).to_be_bytes()[1..]);
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&(offset as u32).to_be_bytes()[1..]);
        h.extend_from_slice(&(fragment.len() as u32).to_be_bytes()[1..]);
        h.extend_from_slice(fragment);
        h
    }

    #[test]
    fn describes_a_flight_of_several_records() {
        let mut hello = vec![0xfe, 0xfd];
        hello.extend_from_slice(&[7; 32]);
        hello.push(0); // session id
        hello.push(3); // cookie length
        hello.extend_from_slice(&[1, 2, 3]);
        let mut datagram = record(22, 0, &handshake(1, hello.len(), 0, &hello));
        datagram.extend(record(20, 0, &[1]));
        datagram.extend(record(22, 1, &[0; 40]));
        assert_eq!(
            describe_datagram(&datagram),
            vec!["ClientHello (cookie 3 B)", "ChangeCipherSpec", "Finished (encrypted)"]
        );
    }

    #[test]
    fn names_fragments_and_survives_garbage() {
        let datagram = record(22, 0, &handshake(12, 100, 40, &[0; 20]));
        assert_eq!(describe_datagram(&datagram), vec!["ServerKeyExchange [fragment 40..60 of 100 B]"]);
        assert_eq!(describe_datagram(&[22, 0xfe]), vec!["2 trailing byte(s)"]);
        let mut truncated = record(23, 1, &[0; 30]);
        truncated.truncate(20);
        assert_eq!(describe_datagram(&truncated), vec!["truncated record (type 23, 7 of 30 B)"]);
        // The rest of a split record, then a ChangeCipherSpec.
        let mut continued = vec![0x83, 7, 7];
        continued.extend(record(20, 0, &[1]));
        assert_eq!(
            describe_datagram(&continued),
            vec!["3 B continuing a record split across datagrams", "ChangeCipherSpec"]
        );
    }

    #[test]
    fn finds_the_length_of_a_tls12_cid_record_behind_its_cid() {
        let cid_record = |cid: &[u8], length: usize| {
            let mut r = vec![25, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9];
            r.extend_from_slice(cid);
            r.extend_from_slice(&(length as u16).to_be_bytes());
            r.extend(std::iter::repeat_n(0xa5, length));
            r
        };
        assert_eq!(
            describe_datagram(&cid_record(&[1, 2, 3, 4], 30)),
            vec!["tls12_cid record (CID 4 B, 30 B encrypted)"]
        );
        let mut two = cid_record(&[9; 8], 20);
        two.extend(record(21, 1, &[0; 26]));
        assert_eq!(
            describe_datagram(&two),
            vec!["tls12_cid record (CID 8 B, 20 B encrypted)", "Alert (encrypted)"]
        );
    }
}
