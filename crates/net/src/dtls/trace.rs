//! The datagram trace hook, and the names of the records in a datagram that `-v` traces print.

use fastshake_core::codec::{DecodeError, Reader};
use fastshake_dtls::dtls13::{is_unified, UnifiedHeader};
use fastshake_dtls::{wire, AlertLevel};
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

/// The content type of a record with a Connection ID (RFC 9146 §4).
const TLS12_CID: u8 = 25;
/// The C bit of a DTLS 1.3 unified header: a Connection ID follows (RFC 9147 §4).
const UNIFIED_CID_BIT: u8 = 0x10;
/// The cookie extension (RFC 8446 §4.2.2), where DTLS 1.3 carries the cookie.
const COOKIE_EXTENSION: u16 = 44;
/// The supported_versions extension (RFC 8446 §4.2.1).
const SUPPORTED_VERSIONS_EXTENSION: u16 = 43;
/// The random of a ServerHello that is a HelloRetryRequest: SHA-256 of "HelloRetryRequest"
/// (RFC 8446 §4.1.3).
const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2,
    0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// Names the DTLS records in a datagram, from their plaintext headers only: content type, epoch,
/// and for unencrypted handshake records the message names (and fragment ranges). For the demo
/// and for tracing; it never fails, it describes what it cannot parse as such. Records are read
/// by the engine's own reader ([`fastshake_dtls::wire`]). A DTLS 1.3 protected record (unified
/// header) shows only its epoch's two low bits and length: its content type is encrypted too.
pub fn describe_datagram(datagram: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = datagram;
    // The rest of a record its sender split across datagrams (RFC 6347 §4.1.1 forbids it; OpenSSL
    // 3.0 does it on loopback): bytes that are no record header, followed by whole records.
    if let Some(k) = split_record_rest(datagram) {
        out.push(format!("{k} B continuing a record split across datagrams"));
        rest = &datagram[k..];
    }
    while !rest.is_empty() {
        if is_unified(rest[0]) {
            match UnifiedHeader::parse(&mut Reader::new(rest), 0) {
                Ok(head) => {
                    out.push(describe_unified(&head));
                    rest = &rest[head.header_len() + usize::from(head.length)..];
                    continue;
                }
                // Only the receiver knows how long its Connection IDs are.
                Err(_) if rest[0] & UNIFIED_CID_BIT != 0 => {
                    out.push("encrypted record with a connection ID (unparsed)".to_owned())
                }
                Err(_) => out.push(format!("truncated encrypted record ({} B)", rest.len())),
            }
            break;
        }
        if rest.len() < wire::RECORD_HEADER_LEN {
            out.push(format!("{} trailing byte(s)", rest.len()));
            break;
        }
        let Some(head) = record_head(rest) else {
            out.push(match rest[0] {
                TLS12_CID => "tls12_cid record (unparsed)".to_owned(),
                other => format!("record of content type {other}"),
            });
            break;
        };
        let Some(body) = rest.get(head.header_len()..head.record_len()) else {
            let got = rest.len() - head.header_len();
            out.push(format!("truncated record (type {}, {got} of {} B)", head.content_type, head.body_len));
            break;
        };
        rest = &rest[head.record_len()..];
        match (head.content_type, head.epoch) {
            (TLS12_CID, _) => {
                out.push(format!("tls12_cid record (CID {} B, {} B encrypted)", head.cid_len, head.body_len))
            }
            (20, _) => out.push("ChangeCipherSpec".to_owned()),
            (21, 0) => out.push(describe_plain_alert(body)),
            (21, _) => out.push("Alert (encrypted)".to_owned()),
            (22, 0) => describe_handshake(body, &mut out),
            // In DTLS 1.2 the only handshake message of epoch 1 is Finished.
            (22, _) => out.push("Finished (encrypted)".to_owned()),
            (23, _) => out.push(format!("ApplicationData ({} B encrypted)", head.body_len)),
            (27, _) => out.push("return_routability_check (encrypted)".to_owned()),
            (other, _) => out.push(format!("record of content type {other}")),
        }
    }
    out
}

/// The header of the record at the start of `bytes`, with or without a Connection ID (whose
/// length only the receiver knows: the one that makes the record end where `bytes` do or
/// another record starts).
fn record_head(bytes: &[u8]) -> Option<wire::RecordHead> {
    wire::record_head(bytes).ok().or_else(|| wire::cid_record_head(bytes))
}

/// How many leading bytes of `datagram` continue a record split across datagrams: the datagram
/// does not start with a record header, and from some point on holds whole records only.
fn split_record_rest(datagram: &[u8]) -> Option<usize> {
    // A DTLS 1.3 record's unified header is read as one.
    if record_head(datagram).is_some() || datagram.first().is_some_and(|&b| is_unified(b)) {
        return None;
    }
    let whole = |mut d: &[u8]| {
        while !d.is_empty() {
            match record_head(d).and_then(|head| d.get(head.record_len()..)) {
                Some(next) => d = next,
                None => return false,
            }
        }
        true
    };
    (1..datagram.len()).find(|&k| whole(&datagram[k..]))
}

/// A DTLS 1.3 protected record: the epoch's low bits say which keys (2: handshake, 3: the first
/// application keys, RFC 9147 §6.1); what it holds is encrypted.
fn describe_unified(head: &UnifiedHeader) -> String {
    let epoch = match head.epoch_bits {
        bits @ (2 | 3) => format!("epoch {bits}"),
        bits => format!("epoch bits {bits}"),
    };
    format!("encrypted record ({epoch}, {} B)", head.length)
}

/// What the extensions of a ClientHello or ServerHello body (RFC 8446 §4.1.2, §4.1.3), whole or
/// a first fragment, show: the cookie extension's cookie length, if it is there.
#[derive(Default)]
struct HelloExtensions {
    cookie: Option<usize>,
    /// supported_versions: a DTLS 1.3 hello (RFC 8446 §4.2.1).
    supported_versions: bool,
}

/// The extensions of a hello body, as far as the body goes.
fn hello_extensions(body: &[u8], client_hello: bool) -> HelloExtensions {
    let mut found = HelloExtensions::default();
    let _ = scan_hello_extensions(body, client_hello, &mut found);
    found
}

fn scan_hello_extensions(body: &[u8], client_hello: bool, found: &mut HelloExtensions) -> Option<()> {
    let mut r = Reader::new(body);
    r.take(2 + 32).ok()?;
    let session_id = r.u8().ok()?;
    r.take(usize::from(session_id)).ok()?;
    if client_hello {
        let cookie = r.u8().ok()?;
        r.take(usize::from(cookie)).ok()?;
        let suites = r.u16().ok()?;
        r.take(usize::from(suites)).ok()?;
        let compression = r.u8().ok()?;
        r.take(usize::from(compression)).ok()?;
    } else {
        r.take(2 + 1).ok()?;
    }
    let len = r.u16().ok()?;
    // A first fragment holds the start of the list only.
    let mut extensions = Reader::new(r.take(usize::from(len).min(r.remaining())).ok()?);
    while extensions.remaining() > 0 {
        let (kind, len) = (extensions.u16().ok()?, extensions.u16().ok()?);
        match kind {
            SUPPORTED_VERSIONS_EXTENSION => found.supported_versions = true,
            COOKIE_EXTENSION => {
                found.cookie = Reader::new(extensions.take(2).ok()?).u16().ok().map(usize::from)
            }
            _ => {}
        }
        if kind == COOKIE_EXTENSION {
            len.checked_sub(2)?;
            extensions.take(usize::from(len - 2).min(extensions.remaining())).ok()?;
        } else {
            extensions.take(usize::from(len)).ok()?;
        }
    }
    Some(())
}

fn describe_plain_alert(body: &[u8]) -> String {
    match wire::alert(body) {
        Ok((level, description)) => {
            let level = if level == AlertLevel::Fatal { "fatal" } else { "warning" };
            format!("Alert ({level}, description {})", description.code())
        }
        Err(DecodeError::Truncated) => "Alert (truncated)".to_owned(),
        // Not two bytes of a known level: the engine drops it.
        Err(_) => "Alert (malformed)".to_owned(),
    }
}

fn describe_handshake(mut body: &[u8], out: &mut Vec<String>) {
    const UNKNOWN: &str = "unknown handshake message";
    while !body.is_empty() {
        if body.len() < wire::FRAGMENT_HEADER_LEN {
            out.push("truncated handshake header".to_owned());
            return;
        }
        let fragment = match wire::fragment_head(body) {
            Ok(fragment) => fragment,
            // A type the engine does not read, or a fragment beyond its message: its length is
            // not to be trusted, so nothing after it is either.
            Err(_) => {
                out.push(match wire::handshake_name(body[0]) {
                    Some(name) => format!("{name} (fragment beyond its message)"),
                    None => UNKNOWN.to_owned(),
                });
                return;
            }
        };
        let name = wire::handshake_name(fragment.msg_type).unwrap_or(UNKNOWN);
        let end = wire::FRAGMENT_HEADER_LEN + fragment.len as usize;
        let Some(data) = body.get(wire::FRAGMENT_HEADER_LEN..end) else {
            out.push(format!("{name} (truncated)"));
            return;
        };
        body = &body[end..];
        let mut name = name.to_owned();
        let whole = fragment.offset == 0 && fragment.len == fragment.message_len;
        if fragment.offset == 0 {
            let cookie = match fragment.msg_type {
                // DTLS 1.3 leaves the ClientHello's legacy cookie empty and sends the cookie in
                // an extension (RFC 9147 §5.3).
                1 if fragment.cookie_len == Some(0) => {
                    let found = hello_extensions(data, true);
                    // A DTLS 1.3 hello cut before its cookie extension says nothing of it.
                    found.cookie.or((whole || !found.supported_versions).then_some(0))
                }
                1 => fragment.cookie_len,
                3 => wire::hello_verify_cookie_len(data),
                _ => None,
            };
            let retry = fragment.msg_type == 2 && data.get(2..34) == Some(&HELLO_RETRY_RANDOM[..]);
            match (fragment.msg_type, cookie) {
                _ if retry => {
                    name = match hello_extensions(data, false).cookie {
                        Some(cookie) => format!("HelloRetryRequest (cookie {cookie} B)"),
                        None => "HelloRetryRequest".to_owned(),
                    }
                }
                (1, Some(0)) => name = "ClientHello (no cookie)".to_owned(),
                (1, Some(cookie)) => name = format!("ClientHello (cookie {cookie} B)"),
                (3, Some(cookie)) => name = format!("HelloVerifyRequest (cookie {cookie} B)"),
                _ => {}
            }
        }
        let (offset, total) = (fragment.offset, fragment.message_len);
        if offset != 0 || fragment.len != total {
            name.push_str(&format!(" [fragment {offset}..{} of {total} B]", offset + fragment.len));
        }
        out.push(name);
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

    /// A ClientHello or ServerHello body (RFC 8446 §4.1.2, §4.1.3) with a cookie extension.
    fn hello13(client: bool, random: [u8; 32], cookie: &[u8]) -> Vec<u8> {
        let mut h = vec![0xfe, 0xfd];
        h.extend_from_slice(&random);
        h.push(0); // legacy session id
        if client {
            h.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]); // no legacy cookie, one suite, null compression
        } else {
            h.extend_from_slice(&[0x13, 0x01, 0]);
        }
        let mut ext = vec![0, 43, 0, 2, 0xfe, 0xfc]; // supported_versions: DTLS 1.3
        if !cookie.is_empty() {
            ext.extend_from_slice(&[0, 44]);
            ext.extend_from_slice(&(cookie.len() as u16 + 2).to_be_bytes());
            ext.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
            ext.extend_from_slice(cookie);
        }
        h.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        h.extend(ext);
        h
    }

    #[test]
    fn names_the_dtls13_handshake() {
        let hello = |cookie: &[u8]| {
            let body = hello13(true, [7; 32], cookie);
            record(22, 0, &handshake(1, body.len(), 0, &body))
        };
        assert_eq!(describe_datagram(&hello(&[])), vec!["ClientHello (no cookie)"]);
        assert_eq!(describe_datagram(&hello(&[5; 40])), vec!["ClientHello (cookie 40 B)"]);
        // A first fragment: the cookie named if the fragment reaches it, nothing said if not.
        let body = hello13(true, [7; 32], &[5; 40]);
        let first = |len: usize| record(22, 0, &handshake(1, body.len(), 0, &body[..len]));
        let total = body.len();
        assert_eq!(
            describe_datagram(&first(total - 20)),
            vec![format!("ClientHello (cookie 40 B) [fragment 0..{} of {total} B]", total - 20)]
        );
        assert_eq!(
            describe_datagram(&first(total - 43)),
            vec![format!("ClientHello [fragment 0..{} of {total} B]", total - 43)]
        );
        let retry = hello13(false, HELLO_RETRY_RANDOM, &[5; 40]);
        let retry = record(22, 0, &handshake(2, retry.len(), 0, &retry));
        assert_eq!(describe_datagram(&retry), vec!["HelloRetryRequest (cookie 40 B)"]);
        // A ServerHello, then records with the unified header: 16-bit sequence number and a
        // length in epoch 2, then one that runs to the datagram's end in epoch 3.
        let server_hello = hello13(false, [9; 32], &[]);
        let mut flight = record(22, 0, &handshake(2, server_hello.len(), 0, &server_hello));
        flight.extend_from_slice(&[0x2e, 0, 0, 0, 20]);
        flight.extend_from_slice(&[0xa5; 20]);
        flight.extend_from_slice(&[0x2b, 0, 1]);
        flight.extend_from_slice(&[0xa5; 30]);
        assert_eq!(
            describe_datagram(&flight),
            vec!["ServerHello", "encrypted record (epoch 2, 20 B)", "encrypted record (epoch 3, 30 B)"]
        );
        assert_eq!(describe_datagram(&[0x2e, 0, 0, 0, 20, 1]), vec!["truncated encrypted record (6 B)"]);
        assert_eq!(
            describe_datagram(&[0x3e, 1, 2, 3, 0, 0, 0, 1, 1]),
            vec!["encrypted record with a connection ID (unparsed)"]
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

    #[test]
    fn names_the_fields_of_plaintext_messages() {
        let verify = record(22, 0, &handshake(3, 5, 0, &[0xfe, 0xff, 2, 9, 9]));
        assert_eq!(describe_datagram(&verify), vec!["HelloVerifyRequest (cookie 2 B)"]);
        assert_eq!(describe_datagram(&record(21, 0, &[2, 40])), vec!["Alert (fatal, description 40)"]);
        assert_eq!(describe_datagram(&record(21, 0, &[1, 0])), vec!["Alert (warning, description 0)"]);
        assert_eq!(describe_datagram(&record(21, 0, &[2])), vec!["Alert (truncated)"]);
        assert_eq!(describe_datagram(&record(22, 0, &[1, 0, 0])), vec!["truncated handshake header"]);
        let mut hello = handshake(2, 50, 0, &[0; 50]);
        hello.truncate(30);
        assert_eq!(describe_datagram(&record(22, 0, &hello)), vec!["ServerHello (truncated)"]);
    }

    #[test]
    fn stops_at_what_the_engine_would_not_read() {
        // No record header: an unknown content type, a TLS version, a length RFC 5246 forbids.
        for (header, content_type) in [(&[24, 0xfe, 0xfd][..], 24), (&[22, 3, 3][..], 22)] {
            let mut datagram = header.to_vec();
            datagram.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1]);
            assert_eq!(describe_datagram(&datagram), vec![format!("record of content type {content_type}")]);
            // Whole records after it: the rest of a record split across datagrams.
            datagram.extend(record(20, 0, &[1]));
            assert_eq!(describe_datagram(&datagram)[0], "14 B continuing a record split across datagrams");
        }
        let mut too_long = record(23, 1, &[]);
        too_long[11..13].copy_from_slice(&20_000u16.to_be_bytes());
        assert_eq!(describe_datagram(&too_long), vec!["record of content type 23"]);
        // An alert the engine drops; a fragment beyond its message; a type it does not know.
        assert_eq!(describe_datagram(&record(21, 0, &[2, 40, 0])), vec!["Alert (malformed)"]);
        assert_eq!(describe_datagram(&record(21, 0, &[9, 40])), vec!["Alert (malformed)"]);
        let beyond = record(22, 0, &handshake(12, 10, 5, &[0; 20]));
        assert_eq!(describe_datagram(&beyond), vec!["ServerKeyExchange (fragment beyond its message)"]);
        let mut unknown = handshake(99, 4, 0, &[0; 4]);
        unknown.extend(handshake(14, 0, 0, &[]));
        assert_eq!(describe_datagram(&record(22, 0, &unknown)), vec!["unknown handshake message"]);
    }

    #[test]
    fn garbage_never_panics() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut flight = record(22, 0, &handshake(1, 60, 0, &[0; 60]));
        flight.extend(record(20, 0, &[1]));
        flight.extend([25, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9, 1, 2, 3, 4, 0, 3, 7, 7, 7]);
        for _ in 0..20_000 {
            let mut datagram = flight.clone();
            for _ in 0..1 + next() % 4 {
                let bit = next() as usize % (datagram.len() * 8);
                datagram[bit / 8] ^= 1 << (bit % 8);
            }
            datagram.truncate(next() as usize % (datagram.len() + 1));
            describe_datagram(&datagram);
            let random: Vec<u8> = (0..next() % 120).map(|_| next() as u8).collect();
            describe_datagram(&random);
        }
    }
}
