//! A fleet of servers acting as one: ticket keys every node loads from one file, node ids in
//! Connection IDs (in the manner of QUIC-LB, draft-ietf-quic-load-balancers), and the channel
//! over which a node hands a CID record to the node that holds its session.
//!
//! CID layout (`SERVER_CID_LENGTH` = 8 bytes): a first octet as in QUIC-LB §2.3 (three config
//! rotation bits, then the CID length less one in the low five bits), the node id, the worker,
//! then random bytes. A router reads the node from the second byte with no key (QUIC-LB's
//! plaintext algorithm: a CID links to its node, never to another CID of the same client).
//!
//! Forwarding frame (UDP between nodes), every field covered by HMAC-SHA256 under the fleet key:
//! `version(1) kind(1) sender(1) sequence(8) family(1) address(4|16) port(2) datagram(..) tag(32)`.
//! Kind 1 carries a client's datagram to its session's node; kind 2 carries that node's answer
//! back to the node the client sent to, which sends it from the address the client expects.

use fastshake_dtls::{TicketKey, TicketKeys};
use rand_core::{OsRng, RngCore};
use ring::hmac;
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::SystemTime;

/// Config rotation bits of our CIDs (QUIC-LB §2.3): one configuration, number 0.
const CONFIG_ROTATION: u8 = 0;

/// The first bytes of every CID a worker of `node` issues: QUIC-LB's first octet, node, worker.
pub fn cid_prefix(cid_len: u8, node: u8, worker: u8) -> [u8; 3] {
    [(CONFIG_ROTATION << 5) | (cid_len.saturating_sub(1) & 0x1f), node, worker]
}

/// Where a `tls12_cid` record's session lives, read from its CID (RFC 9146 §4: the CID follows
/// type, version, epoch and sequence number; in a DTLS 1.3 record, the first byte, RFC 9147 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CidOwner {
    /// Another node of the fleet.
    Node(u8),
    /// Another worker of this node.
    Worker(usize),
}

/// The owner of the session a Connection ID names ([`fastshake_dtls::Incoming::connection_id`])
/// when it is not this worker of this node; `None` for a datagram that carries none of our CIDs
/// elsewhere (the engine then deals with it).
pub fn cid_owner(cid: Option<&[u8]>, node: Option<u8>, me: u8, workers: usize) -> Option<CidOwner> {
    let cid = cid?;
    let worker = match node {
        Some(node) => {
            if cid.len() < 3 || cid[0] >> 5 != CONFIG_ROTATION {
                return None;
            }
            if cid[1] != node {
                return Some(CidOwner::Node(cid[1]));
            }
            cid[2]
        }
        None if workers < 2 => return None,
        None => *cid.first()?,
    };
    (worker != me && usize::from(worker) < workers).then_some(CidOwner::Worker(usize::from(worker)))
}

// ---------------------------------------------------------------------------------------------
// Ticket keys in a file shared by every node.

/// Reads a ticket-key file: `current ID KEY` and optionally `previous ID KEY` (hex), `#` comments.
pub fn load_ticket_keys(path: &Path) -> io::Result<TicketKeys> {
    parse_ticket_keys(&std::fs::read_to_string(path)?)
        .map_err(|why| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display())))
}

fn parse_ticket_keys(text: &str) -> Result<TicketKeys, String> {
    let mut current = None;
    let mut previous = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [role, id, key] = fields[..] else { return Err(format!("bad line {line:?}")) };
        let id = u32::from_str_radix(id, 16).map_err(|_| format!("bad key id {id:?}"))?;
        let key: [u8; 16] = hex::decode(key)
            .ok()
            .and_then(|k| k.try_into().ok())
            .ok_or_else(|| "a key is 32 hex digits".to_owned())?;
        let slot = match role {
            "current" => &mut current,
            "previous" => &mut previous,
            _ => return Err(format!("unknown role {role:?}")),
        };
        *slot = Some(TicketKey::new(id, key));
    }
    let mut keys = match current {
        Some(current) => TicketKeys::new(current.id, *key_bytes(&current)),
        None => return Err("no current key".into()),
    };
    keys.previous = previous;
    Ok(keys)
}

fn key_bytes(key: &TicketKey) -> &[u8; 16] {
    key.secret()
}

fn ticket_keys_text(keys: &TicketKeys) -> String {
    let mut text = String::from("# fastshake ticket keys (RFC 5077): current seals, previous still opens\n");
    let line = |role: &str, k: &TicketKey| format!("{role} {:08x} {}\n", k.id, hex::encode(key_bytes(k)));
    text.push_str(&line("current", &keys.current));
    if let Some(previous) = &keys.previous {
        text.push_str(&line("previous", previous));
    }
    text
}

/// Writes `text` to `path` with mode 0600, through a new file renamed over the old one, so a
/// node reading it sees the old keys or the new ones, never half of them.
fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".new");
    let temporary = path.with_file_name(name);
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

fn os_ticket_key() -> TicketKey {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    TicketKey::new(OsRng.next_u32(), key)
}

/// Writes a new ticket-key file with one fresh current key.
pub fn create_ticket_key_file(path: &Path) -> io::Result<TicketKeys> {
    let key = os_ticket_key();
    let keys = TicketKeys::new(key.id, *key_bytes(&key));
    write_private(path, &ticket_keys_text(&keys))?;
    Ok(keys)
}

/// Rotates a ticket-key file: a fresh key becomes current, the current one previous (tickets
/// in flight still open), the previous one is dropped.
pub fn rotate_ticket_key_file(path: &Path) -> io::Result<TicketKeys> {
    let mut keys = load_ticket_keys(path)?;
    let mut next = os_ticket_key();
    while next.id == keys.current.id {
        next = os_ticket_key();
    }
    keys.rotate(next);
    write_private(path, &ticket_keys_text(&keys))?;
    Ok(keys)
}

/// What tells a changed key file: its modification time and length.
pub(crate) fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

// ---------------------------------------------------------------------------------------------
// The fleet file.

/// The nodes of a fleet and the key of their forwarding channel, from a TOML file:
///
/// ```toml
/// key = "64 hex digits"          # HMAC-SHA256 key shared by every node
/// [[node]]
/// id = 1
/// forward = "10.0.0.1:4500"      # where this node receives forwarded records
/// ```
#[derive(Clone)]
pub struct Fleet {
    /// This node.
    pub node: u8,
    /// Every node's forwarding address, this one's included.
    pub nodes: HashMap<u8, SocketAddr>,
    key: hmac::Key,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet").field("node", &self.node).field("nodes", &self.nodes).finish()
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    key: String,
    node: Vec<NodeEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeEntry {
    id: u8,
    forward: SocketAddr,
}

impl Fleet {
    /// Node `node` of the fleet in `path`.
    pub fn load(path: &Path, node: u8) -> io::Result<Fleet> {
        let bad =
            |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
        let file: FleetFile =
            toml::from_str(&std::fs::read_to_string(path)?).map_err(|e| bad(e.to_string()))?;
        let key = hex::decode(file.key.trim()).map_err(|e| bad(format!("key: {e}")))?;
        if key.len() < 32 {
            return Err(bad("the key needs at least 32 bytes (64 hex digits)".into()));
        }
        let mut nodes = HashMap::new();
        for entry in file.node {
            if nodes.insert(entry.id, entry.forward).is_some() {
                return Err(bad(format!("node {} listed twice", entry.id)));
            }
        }
        if !nodes.contains_key(&node) {
            return Err(bad(format!("node {node} is not listed")));
        }
        Ok(Fleet::new(node, nodes, &key))
    }

    /// A fleet from its parts (tests, and [`Fleet::load`]).
    pub fn new(node: u8, nodes: HashMap<u8, SocketAddr>, key: &[u8]) -> Fleet {
        Fleet { node, nodes, key: hmac::Key::new(hmac::HMAC_SHA256, key) }
    }

    /// Where this node receives forwarded records.
    pub fn own_address(&self) -> SocketAddr {
        self.nodes[&self.node]
    }
}

// ---------------------------------------------------------------------------------------------
// Forwarding frames.

const FRAME_VERSION: u8 = 1;
const TAG_LEN: usize = 32;
/// Version, kind, sender, sequence.
const FRAME_FIXED: usize = 1 + 1 + 1 + 8;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A client's datagram for the node that holds its session; `address` is the client.
    Forward,
    /// The holding node's answer, to be sent to `address` from the receiving node.
    Answer,
}

/// One frame's fields, authenticated.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// What it carries.
    pub kind: FrameKind,
    /// The node that sent it.
    pub sender: u8,
    /// The sender's frame counter (replay protection).
    pub sequence: u64,
    /// The client: the datagram's source (Forward) or destination (Answer).
    pub address: SocketAddr,
    /// The datagram.
    pub datagram: &'a [u8],
}

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Too short, unknown version, kind or address family.
    #[error("malformed frame")]
    Malformed,
    /// The tag does not verify under the fleet key.
    #[error("frame tag does not verify")]
    BadTag,
    /// Seen before, or too old for the replay window.
    #[error("replayed frame")]
    Replayed,
}

/// Writes a frame and its tag.
pub fn seal_frame(
    fleet: &Fleet,
    kind: FrameKind,
    sequence: u64,
    address: SocketAddr,
    datagram: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_FIXED + 19 + datagram.len() + TAG_LEN);
    out.push(FRAME_VERSION);
    out.push(match kind {
        FrameKind::Forward => 1,
        FrameKind::Answer => 2,
    });
    out.push(fleet.node);
    out.extend_from_slice(&sequence.to_be_bytes());
    match address.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&address.port().to_be_bytes());
    out.extend_from_slice(datagram);
    let tag = hmac::sign(&fleet.key, &out);
    out.extend_from_slice(tag.as_ref());
    out
}

/// Checks a frame's tag (constant time, ring's `hmac::verify`), then reads its fields.
pub fn open_frame<'a>(fleet: &Fleet, bytes: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    let body_len = bytes.len().checked_sub(TAG_LEN).ok_or(FrameError::Malformed)?;
    let (body, tag) = bytes.split_at(body_len);
    hmac::verify(&fleet.key, body, tag).map_err(|_| FrameError::BadTag)?;
    parse_frame_body(body)
}

/// Reads the fields of an authenticated frame body (public for the fuzz target).
pub fn parse_frame_body(body: &[u8]) -> Result<Frame<'_>, FrameError> {
    fn take(bytes: &[u8], at: usize, n: usize) -> Result<&[u8], FrameError> {
        bytes.get(at..at + n).ok_or(FrameError::Malformed)
    }
    if take(body, 0, 1)? != [FRAME_VERSION] {
        return Err(FrameError::Malformed);
    }
    let kind = match take(body, 1, 1)?[0] {
        1 => FrameKind::Forward,
        2 => FrameKind::Answer,
        _ => return Err(FrameError::Malformed),
    };
    let sender = take(body, 2, 1)?[0];
    let sequence = u64::from_be_bytes(take(body, 3, 8)?.try_into().map_err(|_| FrameError::Malformed)?);
    let (ip, at): (IpAddr, usize) = match take(body, FRAME_FIXED, 1)?[0] {
        4 => {
            let o: [u8; 4] = take(body, FRAME_FIXED + 1, 4)?.try_into().map_err(|_| FrameError::Malformed)?;
            (Ipv4Addr::from(o).into(), FRAME_FIXED + 5)
        }
        6 => {
            let o: [u8; 16] =
                take(body, FRAME_FIXED + 1, 16)?.try_into().map_err(|_| FrameError::Malformed)?;
            (Ipv6Addr::from(o).into(), FRAME_FIXED + 17)
        }
        _ => return Err(FrameError::Malformed),
    };
    let port = u16::from_be_bytes(take(body, at, 2)?.try_into().map_err(|_| FrameError::Malformed)?);
    Ok(Frame { kind, sender, sequence, address: SocketAddr::new(ip, port), datagram: &body[at + 2..] })
}

/// The fuzz target's body: `data` as a frame, as an authenticated body, and as a datagram
/// sealed and opened again; nothing may panic and a sealed frame must open to what went in.
pub fn fuzz_frame(data: &[u8]) {
    let fleet = Fleet::new(1, HashMap::new(), &[0x42; 32]);
    let _ = open_frame(&fleet, data);
    if let Ok(frame) = parse_frame_body(data) {
        let again = seal_frame(&fleet, frame.kind, frame.sequence, frame.address, frame.datagram);
        let opened = open_frame(&fleet, &again).expect("a sealed frame opens");
        assert_eq!(
            (opened.kind, opened.address, opened.datagram),
            (frame.kind, frame.address, frame.datagram)
        );
    }
    let mut windows = ReplayWindows::default();
    for pair in data.chunks_exact(9) {
        let _ =
            windows.check_and_mark(pair[0], u64::from_be_bytes(pair[1..9].try_into().unwrap_or_default()));
    }
}

/// Frames accepted at most this far behind the newest from the same sender.
const REPLAY_WINDOW: u64 = 64;

/// Per sender, the newest sequence number and which of the 64 before it were seen (as the
/// DTLS record layer's window, RFC 6347 §4.1.2.6). Senders start their counter at their start
/// time in nanoseconds, so a restarted node is not taken for a replay.
#[derive(Default)]
pub struct ReplayWindows {
    windows: HashMap<u8, (u64, u64)>,
}

impl ReplayWindows {
    /// Accepts `sequence` from `sender` once.
    pub fn check_and_mark(&mut self, sender: u8, sequence: u64) -> Result<(), FrameError> {
        let Some((newest, seen)) = self.windows.get_mut(&sender) else {
            self.windows.insert(sender, (sequence, 1));
            return Ok(());
        };
        if sequence > *newest {
            let shift = sequence - *newest;
            *seen = if shift >= REPLAY_WINDOW { 1 } else { (*seen << shift) | 1 };
            *newest = sequence;
            return Ok(());
        }
        let behind = *newest - sequence;
        if behind >= REPLAY_WINDOW || *seen & (1 << behind) != 0 {
            return Err(FrameError::Replayed);
        }
        *seen |= 1 << behind;
        Ok(())
    }
}

/// A sender's first sequence number: nanoseconds since the Unix epoch, so it grows across restarts.
pub fn first_sequence() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(node: u8) -> Fleet {
        let nodes = [(1, "127.0.0.1:1".parse().unwrap()), (2, "127.0.0.1:2".parse().unwrap())].into();
        Fleet::new(node, nodes, &[7; 32])
    }

    #[test]
    fn frames_round_trip_and_any_flipped_bit_is_refused() {
        let (a, b) = (fleet(1), fleet(2));
        for address in ["192.0.2.1:4433", "[2001:db8::1]:9"] {
            let address: SocketAddr = address.parse().unwrap();
            let frame = seal_frame(&a, FrameKind::Forward, 42, address, b"record");
            let opened = open_frame(&b, &frame).unwrap();
            assert_eq!(
                opened,
                Frame { kind: FrameKind::Forward, sender: 1, sequence: 42, address, datagram: b"record" }
            );
            for i in 0..frame.len() {
                let mut forged = frame.clone();
                forged[i] ^= 0x10;
                assert_eq!(open_frame(&b, &forged), Err(FrameError::BadTag), "byte {i}");
            }
            for n in 0..frame.len() {
                assert!(open_frame(&b, &frame[..n]).is_err());
            }
        }
        let other = Fleet::new(2, HashMap::new(), &[8; 32]);
        let frame = seal_frame(&a, FrameKind::Answer, 1, "127.0.0.1:5".parse().unwrap(), b"x");
        assert_eq!(open_frame(&other, &frame), Err(FrameError::BadTag), "another fleet's key");
    }

    #[test]
    fn replay_window_takes_each_sequence_once_and_nothing_too_old() {
        let mut w = ReplayWindows::default();
        assert!(w.check_and_mark(1, 1000).is_ok());
        assert_eq!(w.check_and_mark(1, 1000), Err(FrameError::Replayed));
        assert!(w.check_and_mark(1, 1002).is_ok());
        assert!(w.check_and_mark(1, 1001).is_ok(), "late but inside the window");
        assert_eq!(w.check_and_mark(1, 1001), Err(FrameError::Replayed));
        assert!(w.check_and_mark(1, 1100).is_ok());
        assert_eq!(w.check_and_mark(1, 1002), Err(FrameError::Replayed), "behind the window");
        assert!(w.check_and_mark(2, 5).is_ok(), "windows are per sender");
    }

    #[test]
    fn ticket_key_files_rotate_current_into_previous() {
        let dir = std::env::temp_dir().join(format!("fastshake-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ticket.keys");
        let first = create_ticket_key_file(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load_ticket_keys(&path).unwrap(), first);
        let second = rotate_ticket_key_file(&path).unwrap();
        assert_eq!(second.previous.as_ref(), Some(&first.current));
        assert_eq!(load_ticket_keys(&path).unwrap(), second);
        let third = rotate_ticket_key_file(&path).unwrap();
        assert_eq!(third.previous.as_ref(), Some(&second.current));
        assert!(parse_ticket_keys("previous 1 00").is_err());
        assert!(parse_ticket_keys("current 1 0011").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cid_owner_reads_a_dtls13_record_too() {
        // A unified header with the C bit (RFC 9147 §4): the CID right after the first byte.
        let mut record = vec![0b0011_1100];
        record.extend_from_slice(&cid_prefix(8, 2, 1));
        record.extend_from_slice(&[9; 5]);
        record.extend_from_slice(&[0, 7, 0, 20]);
        record.extend_from_slice(&[0; 20]);
        let incoming = fastshake_dtls::Incoming::new(&mut record, 8);
        let cid = incoming.connection_id();
        assert_eq!(cid.map(<[u8]>::len), Some(8), "the engine reads the CID");
        assert_eq!(cid_owner(cid, Some(1), 0, 2), Some(CidOwner::Node(2)));
        assert_eq!(cid_owner(cid, Some(2), 0, 2), Some(CidOwner::Worker(1)));
        assert_eq!(cid_owner(cid, Some(2), 1, 2), None, "ours");
        // Without the C bit there is no CID to route by.
        record[0] = 0b0010_1100;
        assert_eq!(fastshake_dtls::Incoming::new(&mut record, 8).connection_id(), None);
    }

    #[test]
    fn cid_owner_reads_node_then_worker() {
        let mut record = vec![25, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 1];
        record.extend_from_slice(&cid_prefix(8, 2, 1));
        record.extend_from_slice(&[9; 5]);
        record.extend_from_slice(&[0, 0]);
        let incoming = fastshake_dtls::Incoming::new(&mut record, 8);
        let cid = incoming.connection_id();
        assert_eq!(cid.map(<[u8]>::len), Some(8), "the engine reads the CID");
        assert_eq!(cid_owner(cid, Some(1), 0, 2), Some(CidOwner::Node(2)));
        assert_eq!(cid_owner(cid, Some(2), 0, 2), Some(CidOwner::Worker(1)));
        assert_eq!(cid_owner(cid, Some(2), 1, 2), None, "ours");
        assert_eq!(cid_owner(cid, Some(2), 0, 1), None, "no such worker: the engine drops it");
        let mut cut = record[..12].to_vec();
        assert_eq!(
            cid_owner(fastshake_dtls::Incoming::new(&mut cut, 8).connection_id(), Some(1), 0, 2),
            None
        );
    }
}
