//! A DTLS 1.3 session (RFC 9147) inside a [`Connection`]: its record layer, and while it runs
//! its handshake (transcript, key schedule, flight with per-record acknowledgement, the typed
//! step it is at). The connection's queues, counters, phase and events are shared with DTLS 1.2;
//! what differs is here.
//!
//! Flights are kept as messages. Each transmission packs them afresh into records whose numbers
//! are remembered, so an ACK (§7) names what arrived and only the rest is sent again (§5.8.1);
//! the timer is the same [`RetransmitTimer`] as DTLS 1.2's.

mod cached;
mod cid;
mod client;
pub(crate) mod resume;
mod server;

pub(super) use client::{client_hello13, ClientStep13, ExpectServerHello13, HelloParts, Legacy12};
pub(crate) use server::VerifiedHello13;

use super::{Connection, DataSink, Event, Phase};
use crate::alert::{AlertDescription, AlertLevel};
use crate::connection::VersionState;
use crate::crypto::tls13::{KeySchedule, LabelPrefix, RecordKeys, Suite13, SuiteHash};
use crate::error::Error;
use crate::flight::Resend;
use crate::handshake::{
    choose_compression, parse_fragments, transcript_header, CertificateCompression, CompressedCertificate,
    CompressionAlgorithm, Fragment, HandshakeHeader, HandshakeType, Insert, Reassembler,
    HANDSHAKE_HEADER_LEN,
};
use crate::record::ack::{write_ack, Ack, RecordNumber, CONTENT_ACK};
use crate::record::{
    epoch, write_record, ContentType, Framing, RecordHeader, RecordReader13, RecordWriter13, Unopened13,
    HEADER_LEN, MAX_PLAINTEXT,
};
use crate::timer::RetransmitTimer;
use fastshake_core::codec::Reader;
use fastshake_core::{Instant, TimerKind, TimerTable};
use rand_chacha::ChaCha20Rng;
use ring::digest;
use std::net::SocketAddr;

/// The timers of a 1.3 handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer13 {
    /// The handshake did not complete in time.
    GiveUp,
    /// Resend what of the current flight was not acknowledged (§5.8).
    Retransmit,
    /// Acknowledge the peer's records of an incomplete flight (§7.1).
    Ack,
}

impl TimerKind for Timer13 {
    const ALL: &'static [Self] = &[Timer13::GiveUp, Timer13::Retransmit, Timer13::Ack];
    fn index(self) -> usize {
        self as usize
    }
}

/// The DTLS 1.3 transcript (RFC 9147 §5.2): each message with TLS 1.3's four-byte header. Until
/// the suite (and so the hash) is known the messages are kept as they are.
pub(super) enum Transcript13 {
    Pending(Vec<u8>),
    Hashing(digest::Context),
}

impl Transcript13 {
    pub fn add(&mut self, msg_type: HandshakeType, body: &[u8]) {
        let header = transcript_header(msg_type, body.len() as u32);
        match self {
            Transcript13::Pending(raw) => {
                raw.extend_from_slice(&header);
                raw.extend_from_slice(body);
            }
            Transcript13::Hashing(ctx) => {
                ctx.update(&header);
                ctx.update(body);
            }
        }
    }

    /// The hash is known: what was kept is hashed.
    pub fn start_hashing(&mut self, hash: SuiteHash) {
        if let Transcript13::Pending(raw) = self {
            let mut ctx = digest::Context::new(hash.digest_algorithm());
            ctx.update(raw);
            *self = Transcript13::Hashing(ctx);
        }
    }

    /// After a HelloRetryRequest, ClientHello1 is replaced by its hash in a `message_hash`
    /// message (RFC 8446 §4.4.1).
    pub fn replace_with_message_hash(&mut self, hash: SuiteHash) {
        let current = self.current(hash);
        let mut ctx = digest::Context::new(hash.digest_algorithm());
        ctx.update(&crate::handshake::message_hash_prefix(hash.len() as u8));
        ctx.update(current.as_ref());
        *self = Transcript13::Hashing(ctx);
    }

    pub fn current(&self, hash: SuiteHash) -> digest::Digest {
        match self {
            Transcript13::Pending(raw) => digest::digest(hash.digest_algorithm(), raw),
            Transcript13::Hashing(ctx) => ctx.clone().finish(),
        }
    }
}

/// One message of our flight and what of it the peer acknowledged.
struct Message13 {
    epoch: u64,
    msg_type: HandshakeType,
    message_seq: u16,
    body: Vec<u8>,
    /// Byte ranges of the body whose records the peer acknowledged, sorted and merged.
    acked: Vec<(u32, u32)>,
    /// An empty body's one record was acknowledged.
    empty_acked: bool,
}

impl Message13 {
    fn done(&self) -> bool {
        if self.body.is_empty() {
            return self.empty_acked;
        }
        self.acked.first() == Some(&(0, self.body.len() as u32))
    }

    /// The byte ranges still to send (§5.8.1: only what was not acknowledged is sent again).
    fn missing(&self) -> Vec<(u32, u32)> {
        if self.body.is_empty() {
            return if self.empty_acked { Vec::new() } else { vec![(0, 0)] };
        }
        let mut out = Vec::new();
        let mut at = 0;
        for &(start, end) in &self.acked {
            if start > at {
                out.push((at, start));
            }
            at = at.max(end);
        }
        if at < self.body.len() as u32 {
            out.push((at, self.body.len() as u32));
        }
        out
    }

    /// Whether the bytes `start..end` were acknowledged (an empty body's one record, if it was).
    fn covers(&self, start: u32, end: u32) -> bool {
        if self.body.is_empty() {
            return self.empty_acked;
        }
        self.acked.iter().any(|&(s, e)| s <= start && end <= e)
    }

    fn acknowledge(&mut self, start: u32, end: u32) {
        if self.body.is_empty() {
            self.empty_acked = true;
            return;
        }
        self.acked.push((start, end));
        self.acked.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.acked.len());
        for &(s, e) in &self.acked {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.acked = merged;
    }
}

/// Our current flight: its messages and, per record sent (every transmission of the flight),
/// which bytes of which message it carried.
pub(super) struct Flight13 {
    messages: Vec<Message13>,
    sent: Vec<(RecordNumber, usize, u32, u32)>,
    pub timer: RetransmitTimer,
    /// Resent on our timer (not a server's last flight, which waits to be asked again).
    timed: bool,
    /// The timer of this transmission was started again when the peer's answer began.
    waited_for_answer: bool,
    pub flights: u32,
    pub resent: u32,
}

impl Flight13 {
    fn new(timer: RetransmitTimer) -> Self {
        Flight13 {
            messages: Vec::new(),
            sent: Vec::new(),
            timer,
            timed: true,
            waited_for_answer: false,
            flights: 0,
            resent: 0,
        }
    }

    fn all_acked(&self) -> bool {
        self.messages.iter().all(Message13::done)
    }
}

/// The handshake state of a 1.3 session; freed once it is over.
pub(super) struct Handshake13 {
    pub started: Instant,
    pub rng: ChaCha20Rng,
    pub step: Option<Step13>,
    pub transcript: Transcript13,
    pub reassembler: Reassembler,
    pub next_message_seq: u16,
    pub epoch0_write_seq: u64,
    pub flight: Flight13,
    pub timers: TimerTable<Timer13, 3>,
    /// The handshake epoch's writer, for the flight's records in it: kept while a flight in it
    /// may need to be resent (a client's Finished in epoch 2 after it writes in epoch 3).
    write_handshake: Option<RecordWriter13>,
    /// Record numbers of the peer's handshake records in its current flight, to acknowledge.
    pub received: Vec<RecordNumber>,
    /// Datagrams that repeated messages already received.
    pub peer_retransmissions: u32,
    pub hello_retry: bool,
    pub cookie: Option<Vec<u8>>,
    /// RFC 8879: the algorithm our chain went in and the peer's came in, if compressed.
    pub compression_sent: Option<CompressionAlgorithm>,
    pub compression_received: Option<CompressionAlgorithm>,
    /// Protected records that came before their keys (a flight reordered ahead of its
    /// ServerHello), tried again once keys are added; bounded, as nothing authenticated them.
    early_records: Vec<Vec<u8>>,
    /// The datagram being handled repeated handshake records of the peer: acknowledge (and,
    /// with our last flight unacknowledged, resend it) once the datagram is done.
    peer_resent: bool,
    /// Our KeyUpdate is in the flight: the new write keys are used once it is acknowledged
    /// (RFC 9147 §8).
    write_update_pending: bool,
    /// A post-handshake message arrived whole: acknowledge it once the datagram is done.
    ack_now: bool,
    /// Made after the handshake for a KeyUpdate; dropped once that exchange is over.
    pub post_handshake: bool,
    /// The plaintext (epoch 0) record that brought the first fragment of the message last
    /// begun: a ServerHello or HelloRetryRequest names by it the transmission of ours it
    /// answers.
    pub plaintext_record: Option<u64>,
    /// Server: the client's application records that came before its Finished.
    pub early_data: Vec<Vec<u8>>,
    /// Resumption and 0-RTT, when either is in play.
    pub resume: Option<Box<resume::Resume13>>,
}

/// ACK records one acknowledgement sends at most (64 record numbers at MTU 99, hundreds at
/// larger ones): enough for any flight of ours, a bound on what one event makes us send.
const MAX_ACKS_AT_ONCE: usize = 16;
/// Protected records kept before their keys exist, and their bytes.
const MAX_EARLY_RECORDS: usize = 8;
/// Application records a server keeps while the client's Finished is still to come.
const MAX_EARLY_DATA_RECORDS: usize = 4;
const MAX_EARLY_RECORD_BYTES: usize = 16 * 1024;

/// Where a 1.3 handshake is.
pub(super) enum Step13 {
    Client(Box<client::ClientStep13>),
    Server(Box<server::ServerStep13>),
    /// Completed: the last flight is kept until the peer acknowledges it.
    Complete,
}

/// The 1.3 half of a connection. What every record we seal needs is inline, in the room a 1.2
/// session's record layer takes in the connection; the rest is boxed, so that 1.3 costs a 1.2
/// session nothing. An established 1.3 session (a server's, of a SHA-256 suite) keeps its read
/// keys and both traffic secrets in that one box, and makes no other allocation.
pub(super) struct Tls13 {
    pub write: RecordWriter13,
    pub state: Box<State13>,
}

/// What a 1.3 session keeps besides its write half.
pub(super) struct State13 {
    pub read: RecordReader13,
    pub hs: Option<Box<Handshake13>>,
    /// The application traffic secrets, for key updates (RFC 9147 §8), once the handshake
    /// derives them.
    pub secrets: Option<AppSecrets>,
    /// Server: until when the client's handshake epoch is still read, so that a Finished the
    /// client resends (our ACK of it lost) is acknowledged again (RFC 9147 §7); its keys go
    /// then, and an established session reads one epoch. `Instant::MAX` when there are none
    /// (a sentinel, not an `Option`: every session keeps this field).
    pub handshake_keys_until: Instant,
}

impl Tls13 {
    /// A 1.3 session with no keys yet, running `hs`.
    pub fn new(hs: Option<Box<Handshake13>>) -> Self {
        Tls13 {
            write: RecordWriter13::default(),
            state: Box::new(State13 {
                read: RecordReader13::default(),
                hs,
                secrets: None,
                handshake_keys_until: Instant::MAX,
            }),
        }
    }

    /// Forgets every key (the session failed or closed).
    pub fn discard_keys(&mut self) {
        self.write.discard_keys();
        self.state.read.discard_keys();
    }
}

/// The current application traffic secrets of both directions and the message numbering the
/// handshake left, for the messages after it. The epochs they belong to are kept once, by the
/// record writer (its epoch) and reader (its highest epoch).
pub(super) struct AppSecrets {
    pub suite: Suite13,
    /// Ours to write, then the peer's, then (client) resumption_master_secret (RFC 8446 §7.1),
    /// which the server's tickets' PSKs derive from (a server issues its tickets at the end of
    /// the handshake and keeps none): each the hash's length.
    secrets: SecretBytes,
    /// message_seq of our next handshake message, and the peer's next one expected.
    pub next_message_seq: u16,
    pub peer_next_message_seq: u16,
}

/// The secrets, wiped when dropped. A SHA-256 suite's two traffic secrets are inline: a
/// server's session state (the common suite, and every suite of the IoT profile) is then one
/// allocation. What else there is goes apart, laid end to end: a client's
/// resumption_master_secret, or a SHA-384 suite's secrets, all of them.
struct SecretBytes {
    inline: zeroize::Zeroizing<[u8; INLINE_SECRETS]>,
    /// Boxed once more, so that a server keeps a thin pointer here rather than a slice's two
    /// words.
    apart: Option<Box<zeroize::Zeroizing<Box<[u8]>>>>,
}

/// Two SHA-256 secrets.
const INLINE_SECRETS: usize = 64;

impl SecretBytes {
    /// `parts`, each `len` bytes long.
    fn new(len: usize, parts: &[&[u8]]) -> Self {
        let mut inline = zeroize::Zeroizing::new([0u8; INLINE_SECRETS]);
        let held = parts.iter().enumerate().take_while(|&(i, _)| Self::locate(len, i).0).count();
        for (i, p) in parts[..held].iter().enumerate() {
            inline[Self::locate(len, i).1].copy_from_slice(p);
        }
        let rest = &parts[held..];
        // `concat` allocates exactly, so the box takes the buffer over: no copy is left unwiped.
        let apart = rest
            .iter()
            .any(|p| !p.is_empty())
            .then(|| Box::new(zeroize::Zeroizing::new(rest.concat().into())));
        SecretBytes { inline, apart }
    }

    /// Where secret `index`, each `len` bytes long, lies: inline or apart, and at which bytes.
    fn locate(len: usize, index: usize) -> (bool, std::ops::Range<usize>) {
        // Only a SHA-256 suite's two traffic secrets fill the inline room exactly.
        let held = if len * 2 == INLINE_SECRETS { 2 } else { 0 };
        let (inline, at) = if index < held { (true, index) } else { (false, index - held) };
        (inline, at * len..(at + 1) * len)
    }

    /// Secret `index`, each `len` bytes long; empty if there is none.
    fn part(&self, len: usize, index: usize) -> &[u8] {
        match Self::locate(len, index) {
            (true, range) => &self.inline[range],
            (false, range) => self.apart.as_deref().and_then(|a| a.get(range)).unwrap_or_default(),
        }
    }

    fn part_mut(&mut self, len: usize, index: usize) -> &mut [u8] {
        match Self::locate(len, index) {
            (true, range) => &mut self.inline[range],
            (false, range) => self.apart.as_deref_mut().and_then(|a| a.get_mut(range)).unwrap_or_default(),
        }
    }
}

impl AppSecrets {
    pub fn new(suite: Suite13, write: &[u8], read: &[u8], resumption: Option<&[u8]>) -> Self {
        let parts = [write, read, resumption.unwrap_or_default()];
        let secrets = SecretBytes::new(suite.hash().len(), &parts);
        AppSecrets { suite, secrets, next_message_seq: 0, peer_next_message_seq: 0 }
    }

    fn part(&self, index: usize) -> &[u8] {
        self.secrets.part(self.suite.hash().len(), index)
    }

    /// Our current application traffic secret.
    pub fn write(&self) -> &[u8] {
        self.part(0)
    }

    /// The peer's current application traffic secret.
    pub fn read(&self) -> &[u8] {
        self.part(1)
    }

    /// Client: resumption_master_secret.
    pub fn resumption(&self) -> Option<&[u8]> {
        Some(self.part(2)).filter(|r| !r.is_empty())
    }

    /// Our next secret (a KeyUpdate of ours), in place of the current one.
    pub fn update_write(&mut self, next: &[u8]) {
        self.secrets.part_mut(self.suite.hash().len(), 0).copy_from_slice(next);
    }

    /// The peer's next secret (its KeyUpdate), in place of the current one.
    pub fn update_read(&mut self, next: &[u8]) {
        self.secrets.part_mut(self.suite.hash().len(), 1).copy_from_slice(next);
    }
}

/// A fatal condition of a 1.3 handshake: the alert to send (if any) and the error to report.
pub(super) use super::handshake::Abort;

impl Handshake13 {
    /// Queues our Certificate (body `certificate`), compressed with the first of our algorithms
    /// that the peer listed (`theirs`, from its ClientHello or CertificateRequest), RFC 8879 §4.
    /// An empty chain goes as it is: there is nothing to gain.
    pub fn push_certificate(
        &mut self,
        ours: &CertificateCompression,
        theirs: Option<&[u8]>,
        certificate: Vec<u8>,
        empty: bool,
    ) {
        match theirs.filter(|_| !empty).and_then(|t| choose_compression(ours.algorithms(), t)) {
            Some(algorithm) => {
                let message = ours.compressed_message(algorithm, &certificate);
                self.compression_sent = Some(algorithm);
                self.push_message(epoch::HANDSHAKE, HandshakeType::CompressedCertificate, message, true);
            }
            None => self.push_message(epoch::HANDSHAKE, HandshakeType::Certificate, certificate, true),
        }
    }

    /// The Certificate body a peer's CompressedCertificate carries (see
    /// [`decompress_certificate`]), noting the algorithm for the summary.
    pub fn decompress_certificate(
        &mut self,
        ours: &CertificateCompression,
        body: &[u8],
    ) -> Result<Vec<u8>, Abort> {
        let (algorithm, certificate) = decompress_certificate(ours, body)?;
        self.compression_received = Some(algorithm);
        Ok(certificate)
    }
}

/// The Certificate body a peer's CompressedCertificate carries, and its algorithm. We offered
/// `ours` (nothing offered: the message is unexpected); another algorithm is an illegal
/// parameter, and a stream that does not decompress to its stated length within our bound a bad
/// certificate (RFC 8879 §4).
fn decompress_certificate(
    ours: &CertificateCompression,
    body: &[u8],
) -> Result<(CompressionAlgorithm, Vec<u8>), Abort> {
    if ours.is_off() {
        return Err(Abort::unexpected());
    }
    let message = CompressedCertificate::parse(body).map_err(Abort::decode)?;
    let algorithm = CompressionAlgorithm::from_code(message.algorithm)
        .filter(|a| ours.algorithms().contains(a))
        .ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
    let certificate = algorithm
        .decompress(message.compressed, message.uncompressed_length as usize)
        .map_err(|_| Abort::alert(AlertDescription::BadCertificate))?;
    Ok((algorithm, certificate))
}

/// Key derivation labels of DTLS 1.3 (RFC 9147 §5.9).
pub(super) const PREFIX: LabelPrefix = LabelPrefix::Dtls13;

impl Handshake13 {
    pub fn new(
        now: Instant,
        rng: ChaCha20Rng,
        timer: RetransmitTimer,
        give_up: std::time::Duration,
    ) -> Box<Self> {
        let mut timers = TimerTable::default();
        timers.set(Timer13::GiveUp, now + give_up);
        Box::new(Handshake13 {
            started: now,
            rng,
            step: None,
            transcript: Transcript13::Pending(Vec::new()),
            reassembler: Reassembler::new(0),
            next_message_seq: 0,
            epoch0_write_seq: 0,
            flight: Flight13::new(timer),
            timers,
            write_handshake: None,
            received: Vec::new(),
            peer_retransmissions: 0,
            hello_retry: false,
            cookie: None,
            compression_sent: None,
            compression_received: None,
            early_records: Vec::new(),
            peer_resent: false,
            write_update_pending: false,
            ack_now: false,
            post_handshake: false,
            plaintext_record: None,
            early_data: Vec::new(),
            resume: None,
        })
    }

    /// Starts a new flight (the peer's last one answered ours).
    pub fn begin_flight(&mut self) {
        self.flight.messages.clear();
        self.flight.sent.clear();
    }

    /// Adds a message to the flight being built, and to the transcript when `hash`.
    pub fn push_message(&mut self, epoch: u64, msg_type: HandshakeType, body: Vec<u8>, hash: bool) {
        if hash {
            self.transcript.add(msg_type, &body);
        }
        let message_seq = self.next_message_seq;
        self.next_message_seq = self.next_message_seq.wrapping_add(1);
        self.flight.messages.push(Message13 {
            epoch,
            msg_type,
            message_seq,
            body,
            acked: Vec::new(),
            empty_acked: false,
        });
    }

    /// The handshake epoch's write keys: the flight's encrypted messages go out under them.
    pub fn set_handshake_write(&mut self, keys: RecordKeys) {
        self.write_handshake = Some(RecordWriter13::new(epoch::HANDSHAKE, keys));
    }
}

impl Connection {
    // ------------------------------------------------------------ flights

    /// Packs what of the flight is not acknowledged into datagrams and queues them. Fragments
    /// of one protected epoch share a record while the datagram has room (RFC 9147 §4 lets a
    /// record carry several handshake messages): a record's header, content type and tag are
    /// paid once per datagram rather than once per message.
    fn transmit_flight13(&mut self, hs: &mut Handshake13, record: &mut RecordWriter13) -> u32 {
        let mtu = self.mtu();
        let cid = self.peer_cid().to_vec();
        let mut datagrams: Vec<Vec<u8>> = Vec::new();
        let mut current: Vec<u8> = Vec::with_capacity(mtu);
        // Accepted early data goes again in front of the client's Finished (see
        // `early_copies13`), in its datagram when there is room.
        for copy in Self::early_copies13(hs) {
            if !current.is_empty() && current.len() + copy.len() > mtu {
                datagrams.push(std::mem::replace(&mut current, Vec::with_capacity(mtu)));
            }
            current.extend_from_slice(&copy);
        }
        let mut sent = Vec::new();
        // The protected record being filled: its epoch, plaintext and the ranges it carries.
        let mut open: Option<OpenRecord> = None;
        for (index, m) in hs.flight.messages.iter().enumerate() {
            if open.as_ref().is_some_and(|o| o.epoch != m.epoch) {
                flush_record(&mut open, &mut hs.write_handshake, record, &cid, &mut current, &mut sent);
            }
            let overhead =
                if m.epoch == 0 { HEADER_LEN } else { record.sealed_len(cid.len(), 0, Framing::Packed) + 16 };
            // Room for the next fragment's body: in the datagram, and in the record, which holds
            // at most 2^14 bytes of content however large the MTU (RFC 8446 §5.1, RFC 9147 §4).
            let room_in = |current: &[u8], open: &Option<OpenRecord>| {
                let in_record = open.as_ref().map_or(0, |o| o.plaintext.len());
                let datagram = mtu.saturating_sub(current.len() + overhead + in_record);
                datagram.min(MAX_PLAINTEXT.saturating_sub(in_record)).saturating_sub(HANDSHAKE_HEADER_LEN)
            };
            for (gap_start, gap_end) in m.missing() {
                let (mut offset, end) = (gap_start as usize, gap_end as usize);
                loop {
                    let mut room = room_in(&current, &open);
                    let remaining = end - offset;
                    if room < remaining && room < 32 && (!current.is_empty() || open.is_some()) {
                        flush_record(
                            &mut open,
                            &mut hs.write_handshake,
                            record,
                            &cid,
                            &mut current,
                            &mut sent,
                        );
                        // The datagram goes too, unless the record alone was full.
                        if !current.is_empty() && room_in(&current, &None) < remaining.min(32) {
                            datagrams.push(std::mem::replace(&mut current, Vec::with_capacity(mtu)));
                        }
                        room = room_in(&current, &None);
                    }
                    let n = remaining.min(room.max(1));
                    let header = HandshakeHeader {
                        msg_type: m.msg_type,
                        length: m.body.len() as u32,
                        message_seq: m.message_seq,
                        fragment_offset: offset as u32,
                        fragment_length: n as u32,
                    };
                    if m.epoch == 0 {
                        let mut fragment = Vec::with_capacity(HANDSHAKE_HEADER_LEN + n);
                        header.write(&mut fragment);
                        fragment.extend_from_slice(&m.body[offset..offset + n]);
                        let seq = hs.epoch0_write_seq;
                        hs.epoch0_write_seq += 1;
                        let start = current.len();
                        current.resize(start + HEADER_LEN + fragment.len(), 0);
                        write_record(
                            &mut current[start..],
                            ContentType::Handshake,
                            0,
                            seq,
                            None,
                            &[&fragment],
                        );
                        sent.push((
                            RecordNumber { epoch: 0, seq },
                            index,
                            offset as u32,
                            (offset + n) as u32,
                        ));
                    } else {
                        let o = open.get_or_insert_with(|| OpenRecord {
                            epoch: m.epoch,
                            plaintext: Vec::with_capacity(mtu),
                            ranges: Vec::new(),
                        });
                        header.write(&mut o.plaintext);
                        o.plaintext.extend_from_slice(&m.body[offset..offset + n]);
                        o.ranges.push((index, offset as u32, (offset + n) as u32));
                    }
                    offset += n;
                    if offset >= end {
                        break;
                    }
                }
            }
        }
        flush_record(&mut open, &mut hs.write_handshake, record, &cid, &mut current, &mut sent);
        if !current.is_empty() {
            datagrams.push(current);
        }
        hs.flight.sent.extend(sent);
        let bytes = datagrams.iter().map(Vec::len).sum::<usize>().min(u32::MAX as usize) as u32;
        self.queued.get_or_insert_with(Box::default).outgoing.extend(datagrams);
        bytes
    }

    /// Sends the flight just built for the first time; `timed` when our timer resends it.
    pub(super) fn send_flight13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        record: &mut RecordWriter13,
        timed: bool,
    ) {
        let first = hs.epoch0_write_seq;
        let bytes = self.transmit_flight13(hs, record);
        let received = self.stats.bytes_received;
        hs.flight.flights += 1;
        hs.flight.timed = timed;
        hs.flight.waited_for_answer = false;
        let due = hs.flight.timer.on_sent(now, bytes, first..hs.epoch0_write_seq, received);
        if timed {
            hs.timers.set(Timer13::Retransmit, due);
        } else {
            hs.flight.timer.expect_no_answer();
            hs.timers.stop(Timer13::Retransmit);
        }
        self.stats.flights_sent = self.stats.flights_sent.saturating_add(1);
    }

    fn retransmit_flight13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        record: &mut RecordWriter13,
        cause: Resend,
    ) {
        if hs.flight.messages.is_empty() || hs.flight.all_acked() {
            hs.timers.stop(Timer13::Retransmit);
            return;
        }
        let first = hs.epoch0_write_seq;
        self.transmit_flight13(hs, record);
        hs.flight.resent += 1;
        hs.flight.waited_for_answer = false;
        let due = hs.flight.timer.on_resent(now, first..hs.epoch0_write_seq, cause);
        if hs.flight.timed {
            hs.timers.set(Timer13::Retransmit, due);
        }
        self.stats.flights_resent = self.stats.flights_resent.saturating_add(1);
    }

    /// An ACK arrived: the messages all of whose records it names are done; a gap (records
    /// sent before an acknowledged one but not named) has the flight's unacknowledged rest
    /// resent at once (§7.1). Records sent after the newest named may still be on their way,
    /// or named by the next ACK of the same acknowledgement: they alone resend nothing.
    fn on_ack13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        record: &mut RecordWriter13,
        secrets: Option<&mut AppSecrets>,
        ack: Ack<'_>,
    ) {
        let named: Vec<RecordNumber> = ack.numbers().collect();
        if named.is_empty() {
            return;
        }
        // The last record sent that the ACK names: what was sent after it may still be on its
        // way; what was sent before it and is not acknowledged is a gap.
        let mut newest_named = None;
        for (position, &(number, index, start, end)) in hs.flight.sent.iter().enumerate() {
            if named.contains(&number) {
                if let Some(m) = hs.flight.messages.get_mut(index) {
                    m.acknowledge(start, end);
                    newest_named = Some(position);
                }
            }
        }
        // A gap sent again after the newest named record is on its way too: the other ACKs of
        // one acknowledgement do not have it resent once more each.
        let gap = newest_named.is_some_and(|newest| {
            let (before, after) = hs.flight.sent.split_at(newest);
            before.iter().any(|&(_, index, start, end)| {
                let unacknowledged = hs.flight.messages.get(index).is_some_and(|m| !m.covers(start, end));
                let sent_again = after.iter().any(|&(_, i, s, e)| i == index && s <= start && end <= e);
                unacknowledged && !sent_again
            })
        });
        if hs.flight.all_acked() {
            hs.timers.stop(Timer13::Retransmit);
            hs.flight.timer.on_answer(now, self.stats.bytes_received);
            if let (true, Some(secrets)) = (std::mem::take(&mut hs.write_update_pending), secrets) {
                next_write_keys13(record, secrets);
            }
            if matches!(hs.step, Some(Step13::Complete)) {
                // Our last flight arrived: what the handshake measured is kept for the next
                // with this peer, and the handshake state can go.
                self.keep_rtt(&hs.flight.timer);
                self.finish_handshake13();
            }
        } else if gap {
            self.retransmit_flight13(now, hs, record, Resend::PeerRetransmission);
        }
    }

    fn finish_handshake13(&mut self) {
        if let Some(v13) = self.version.v13_mut() {
            v13.state.hs = None;
            v13.state.read.drop_below(epoch::APPLICATION);
        }
    }

    /// Acknowledges the peer's handshake records received in its current flight: `whole`,
    /// every one of them, in as many ACKs as the MTU makes it take (a peer resends what an ACK
    /// leaves out before the newest it names, RFC 9147 §7.1: at MTU 99 one ACK holds four
    /// record numbers, a certificate flight sends dozens of records); else one ACK naming the
    /// newest (for a datagram that repeated records: what it carried is what the peer needs
    /// to hear of, and one ACK per such datagram keeps the answer no larger than the copy).
    pub(super) fn send_ack13(&mut self, hs: &mut Handshake13, record: &mut RecordWriter13, whole: bool) {
        if hs.received.is_empty() {
            return;
        }
        let cid = self.peer_cid().to_vec();
        // Record numbers one ACK holds: within the MTU and 2^14 bytes (RFC 9147 §4).
        let room = self.mtu().saturating_sub(record.sealed_len(cid.len(), 2, Framing::EndsDatagram));
        let fits = (room.min(MAX_PLAINTEXT - 2) / 16).max(1);
        let count = if whole { hs.received.len().min(fits * MAX_ACKS_AT_ONCE) } else { fits };
        let newest = &hs.received[hs.received.len().saturating_sub(count)..];
        for numbers in newest.chunks(fits) {
            let mut body = Vec::with_capacity(2 + 16 * numbers.len());
            write_ack(&mut body, numbers);
            let writer = match hs.write_handshake.as_mut() {
                Some(w) if record.epoch().is_none_or(|e| e < epoch::APPLICATION) => w,
                _ => &mut *record,
            };
            let sealed =
                writer.seal(CONTENT_ACK, &cid, &[&body], Framing::EndsDatagram).ok().map(|(r, _, _)| r);
            if let Some(datagram) = sealed {
                self.push_datagram(datagram);
            }
        }
        hs.timers.stop(Timer13::Ack);
    }

    // ------------------------------------------------------------ input

    /// The records of one datagram of a 1.3 session.
    pub(super) fn handle_input13(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        datagram: &mut [u8],
        on_data: &mut DataSink<'_>,
    ) {
        let Some(mut v13) = self.version.take13() else { return };
        if let Some(hs) = v13.state.hs.as_mut() {
            hs.flight.timer.on_datagram(self.stats.datagrams_received, now, datagram.len());
        }
        let waited_server_hello = waits_for_server_hello13(&v13);
        let own_cid_len = self.path.as_deref().map_or(0, |p| p.own_cid().len() as u8);
        let (len, mut seen, mut rrc) = (datagram.len(), super::Authenticated::default(), Vec::new());
        let mut pos = 0;
        while pos < datagram.len() && !matches!(self.phase, Phase::Failed | Phase::Closed) {
            let rest = &mut datagram[pos..];
            if crate::record::unified::is_unified(rest[0]) {
                if let Some(skip) = self.foreign_cid13(rest) {
                    pos += skip;
                    self.stats.records_dropped += 1;
                    continue;
                }
                let (used, opened) = v13.state.read.open(rest, own_cid_len);
                pos += used;
                match opened {
                    Ok(o) => {
                        seen.any = true;
                        seen.newest |= o.newest;
                        if rest[0] & crate::record::unified::CID_BIT != 0 {
                            self.note_own_cid13(&rest[1..1 + usize::from(own_cid_len)]);
                        }
                        // Read where it was decrypted: no copy per record.
                        let plaintext = &rest[o.plaintext.clone()];
                        self.handle_record13(
                            now,
                            &mut v13,
                            o.content_type,
                            RecordNumber { epoch: o.epoch, seq: o.seq },
                            plaintext,
                            on_data,
                            &mut rrc,
                        );
                    }
                    Err(Unopened13::IntegrityLimit) => {
                        self.version = VersionState::Dtls13(v13);
                        self.fail(Abort::alert(AlertDescription::BadRecordMac));
                        return;
                    }
                    Err(Unopened13::Overflow) => {
                        // Authenticated, so the peer's own: a broken protocol, not damage that
                        // RFC 9147 §4.5.2 lets us drop (RFC 8446 §5.2, §5.4: record_overflow).
                        self.stats.records_dropped += 1;
                        self.v13_fail(&mut v13, Abort::alert(AlertDescription::RecordOverflow));
                        self.version = VersionState::Dtls13(v13);
                        return;
                    }
                    Err(Unopened13::NoKeys) if v13.state.hs.is_some() => {
                        // Kept as it arrived (nothing of it was decrypted) and opened again
                        // once the datagram's other records added keys.
                        let kept = v13.state.hs.as_mut().is_some_and(|hs| {
                            let bytes: usize = hs.early_records.iter().map(Vec::len).sum();
                            let room = hs.early_records.len() < MAX_EARLY_RECORDS
                                && bytes + used <= MAX_EARLY_RECORD_BYTES;
                            if room {
                                hs.early_records.push(rest[..used].to_vec());
                            }
                            room
                        });
                        if !kept {
                            self.stats.records_dropped += 1;
                        }
                    }
                    Err(_) => self.stats.records_dropped += 1,
                }
                continue;
            }
            let mut r = Reader::new(rest);
            let header = match RecordHeader::parse(&mut r, 0) {
                Ok(h) if r.remaining() >= h.length as usize => h,
                _ => {
                    self.stats.records_dropped += 1;
                    break;
                }
            };
            let end = header.len() + header.length as usize;
            pos += end;
            // Only the plaintext hellos, and alerts before keys, travel in epoch 0 (§4); over
            // 2^14 bytes (RFC 8446 §5.1) and unauthenticated, a record is dropped (§4.5.2).
            if header.epoch != 0
                || !matches!(header.content_type, ContentType::Handshake | ContentType::Alert)
                || usize::from(header.length) > MAX_PLAINTEXT
            {
                self.stats.records_dropped += 1;
                continue;
            }
            let body = rest[header.len()..end].to_vec();
            let number = RecordNumber { epoch: 0, seq: header.seq };
            let content_type = header.content_type as u8;
            self.handle_record13(now, &mut v13, content_type, number, &body, on_data, &mut rrc);
        }
        self.after_datagram13(now, &mut v13, own_cid_len, on_data, &mut rrc);
        let answered = waited_server_hello && !waits_for_server_hello13(&v13);
        if !self.version.is13() {
            self.version = VersionState::Dtls13(v13);
        }
        // The moves of DTLS 1.2 (RFC 9146 §6, RFC 9853): the same path state and checks.
        for message in rrc {
            self.handle_rrc(now, remote, &message);
        }
        self.answer_owed_cids13(now);
        if self.path.is_some() {
            self.after_datagram(now, local, remote, len, seen, answered);
        }
    }

    /// What a datagram leaves to do once all its records are handled: records kept for keys
    /// that now exist, and the answer to a peer that resent its flight.
    fn after_datagram13(
        &mut self,
        now: Instant,
        v13: &mut Tls13,
        own_cid_len: u8,
        on_data: &mut DataSink<'_>,
        rrc: &mut Vec<Vec<u8>>,
    ) {
        let early = v13.state.hs.as_mut().map(|hs| std::mem::take(&mut hs.early_records)).unwrap_or_default();
        for mut record in early {
            if matches!(self.phase, Phase::Failed | Phase::Closed) {
                return;
            }
            let (_, opened) = v13.state.read.open(&mut record, own_cid_len);
            match opened {
                Ok(o) => {
                    let plaintext = record[o.plaintext.clone()].to_vec();
                    let number = RecordNumber { epoch: o.epoch, seq: o.seq };
                    self.handle_record13(now, v13, o.content_type, number, &plaintext, on_data, rrc);
                }
                Err(Unopened13::NoKeys) => {
                    if let Some(hs) = v13.state.hs.as_mut() {
                        hs.early_records.push(record);
                    }
                }
                Err(Unopened13::Overflow) => {
                    // As in `handle_input13`: RFC 8446 §5.2, §5.4.
                    self.stats.records_dropped += 1;
                    self.v13_fail(v13, Abort::alert(AlertDescription::RecordOverflow));
                    return;
                }
                Err(_) => self.stats.records_dropped += 1,
            }
        }
        let Some(mut hs) = v13.state.hs.take() else { return };
        if std::mem::take(&mut hs.ack_now) {
            self.send_ack13(&mut hs, &mut v13.write, true);
            hs.received.clear();
        }
        if std::mem::take(&mut hs.peer_resent) {
            hs.peer_retransmissions += 1;
            self.send_ack13(&mut hs, &mut v13.write, false);
            // The peer's flight is whole and now acknowledged: its next copy brings new record
            // numbers, and only those need naming (RFC 9147 §7: an ACK covers the current
            // flight). Listing every copy would grow the ACK with each resend.
            if matches!(hs.step, Some(Step13::Complete)) && !hs.reassembler.holds_fragments() {
                hs.received.clear();
            }
            // Our last flight is unacknowledged and the peer still resends the flight it
            // answered: ours was lost.
            if matches!(hs.step, Some(Step13::Complete)) && !hs.flight.all_acked() {
                let mut record = std::mem::take(&mut v13.write);
                self.retransmit_flight13(now, &mut hs, &mut record, Resend::PeerRetransmission);
                v13.write = record;
            }
        }
        if let Some(secrets) = v13.state.secrets.as_mut() {
            if self.phase == Phase::Established && matches!(hs.step, Some(Step13::Complete)) {
                secrets.peer_next_message_seq = hs.reassembler.next_seq();
                secrets.next_message_seq = hs.next_message_seq;
                // A post-handshake exchange, or a server's handshake (the client's Finished
                // arrived and was acknowledged), with nothing of ours unacknowledged is over: a
                // late copy of the peer's last flight gets its ACK from a state made anew.
                if hs.post_handshake && hs.flight.all_acked() && !hs.reassembler.holds_fragments() {
                    return;
                }
            }
        }
        v13.state.hs = Some(hs);
    }

    /// The state for messages after the handshake (a KeyUpdate), numbered on from it.
    fn post_handshake13(&mut self, now: Instant, v13: &Tls13) -> Option<Box<Handshake13>> {
        use rand_core::SeedableRng;
        let secrets = v13.state.secrets.as_ref()?;
        let (initial, max) = self.retransmit_bounds();
        let timer = RetransmitTimer::new(initial, max, crate::config::RetransmitPolicy::Fixed, None);
        let rng = ChaCha20Rng::from_seed([0; 32]);
        let mut hs = Handshake13::new(now, rng, timer, self.handshake_timeout());
        hs.step = Some(Step13::Complete);
        hs.post_handshake = true;
        hs.next_message_seq = secrets.next_message_seq;
        hs.reassembler.reset(secrets.peer_next_message_seq);
        Some(hs)
    }

    /// Starts a key update (RFC 9147 §8): a KeyUpdate in the current epoch, resent until
    /// acknowledged; our records use the next keys after that. With `request_peer` the peer
    /// is asked to update its keys too.
    pub(super) fn update_keys13(&mut self, now: Instant, request_peer: bool) -> Result<(), Error> {
        let Some(mut v13) = self.version.take13() else { return Err(Error::NotEstablished) };
        let result = self.start_key_update13(now, &mut v13, request_peer);
        self.version = VersionState::Dtls13(v13);
        result
    }

    fn start_key_update13(&mut self, now: Instant, v13: &mut Tls13, request_peer: bool) -> Result<(), Error> {
        if self.phase != Phase::Established {
            return Err(Error::NotEstablished);
        }
        let mut hs = match v13.state.hs.take() {
            Some(hs) if hs.flight.all_acked() && !hs.write_update_pending => hs,
            Some(hs) => {
                v13.state.hs = Some(hs);
                return Err(Error::NotNegotiated("a key update while another awaits its acknowledgement"));
            }
            None => self.post_handshake13(now, v13).ok_or(Error::NotEstablished)?,
        };
        hs.begin_flight();
        let mut body = Vec::with_capacity(1);
        crate::handshake::encode_key_update(&mut body, request_peer);
        let epoch = v13.write.epoch().unwrap_or(epoch::APPLICATION);
        hs.push_message(epoch, HandshakeType::KeyUpdate, body, false);
        hs.write_update_pending = true;
        let mut record = std::mem::take(&mut v13.write);
        self.send_flight13(now, &mut hs, &mut record, true);
        v13.write = record;
        if let Some(secrets) = v13.state.secrets.as_mut() {
            secrets.next_message_seq = hs.next_message_seq;
        }
        v13.state.hs = Some(hs);
        Ok(())
    }

    /// The peer's KeyUpdate: its next records use its next keys; acknowledged, and answered
    /// with ours when it asks (RFC 8446 §4.6.3).
    fn on_key_update13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        body: &[u8],
    ) -> Result<(), Abort> {
        let requested = crate::handshake::parse_key_update(body).map_err(Abort::decode)?;
        let secrets = v13.state.secrets.as_mut().ok_or_else(Abort::unexpected)?;
        let next = KeySchedule::next_traffic_secret(secrets.suite.hash(), PREFIX, secrets.read());
        let epoch = v13.state.read.epoch().unwrap_or(epoch::APPLICATION) + 1;
        v13.state.read.add(epoch, RecordKeys::from_secret(secrets.suite, PREFIX, &next));
        secrets.update_read(&next);
        hs.ack_now = true;
        if requested && !hs.write_update_pending {
            hs.begin_flight();
            let mut answer = Vec::with_capacity(1);
            crate::handshake::encode_key_update(&mut answer, false);
            let epoch = v13.write.epoch().unwrap_or(epoch::APPLICATION);
            hs.push_message(epoch, HandshakeType::KeyUpdate, answer, false);
            hs.write_update_pending = true;
            let mut record = std::mem::take(&mut v13.write);
            self.send_flight13(now, hs, &mut record, true);
            v13.write = record;
        }
        Ok(())
    }

    /// One record that opened (or an epoch-0 one). Return-routability messages go to `rrc`,
    /// handled once the datagram is done (their answers are sealed with the record layer).
    #[allow(clippy::too_many_arguments)]
    fn handle_record13(
        &mut self,
        now: Instant,
        v13: &mut Tls13,
        content_type: u8,
        number: RecordNumber,
        plaintext: &[u8],
        on_data: &mut DataSink<'_>,
        rrc: &mut Vec<Vec<u8>>,
    ) {
        // Epoch 1 carries early application data only (RFC 9147 §5.6: no EndOfEarlyData).
        if number.epoch == epoch::EARLY_DATA && content_type != ContentType::ApplicationData as u8 {
            self.stats.records_dropped += 1;
            return;
        }
        match content_type {
            t if t == ContentType::ReturnRoutabilityCheck as u8 => {
                // RFC 9853 §3: protected, application epochs only; a message is at most 9 bytes.
                if number.epoch < epoch::APPLICATION || plaintext.len() > 9 || self.path.is_none() {
                    self.stats.records_dropped += 1;
                    return;
                }
                rrc.push(plaintext.to_vec());
            }
            t if t == ContentType::Handshake as u8 => {
                let hs = match v13.state.hs.take() {
                    Some(hs) => Some(hs),
                    // A message after the handshake (KeyUpdate): its state is made for it.
                    None if self.phase == Phase::Established => self.post_handshake13(now, v13),
                    None => None,
                };
                let Some(mut hs) = hs else { return };
                if let Err(abort) = self.handle_handshake_record13(now, &mut hs, v13, number, plaintext) {
                    v13.state.hs = Some(hs);
                    self.v13_fail(v13, abort);
                    return;
                }
                if v13.state.hs.is_none() && !matches!(self.phase, Phase::Failed | Phase::Closed) {
                    v13.state.hs = Some(hs);
                }
            }
            CONTENT_ACK => {
                if number.epoch < epoch::HANDSHAKE {
                    self.stats.records_dropped += 1;
                    return;
                }
                let Ok(ack) = Ack::parse(plaintext) else {
                    self.stats.records_dropped += 1;
                    return;
                };
                if let Some(mut hs) = v13.state.hs.take() {
                    let mut record = std::mem::take(&mut v13.write);
                    self.on_ack13(now, &mut hs, &mut record, v13.state.secrets.as_mut(), ack);
                    v13.write = record;
                    if !matches!(hs.step, Some(Step13::Complete)) || !hs.flight.all_acked() {
                        v13.state.hs = Some(hs);
                    } else {
                        v13.state.read.drop_below(epoch::APPLICATION);
                    }
                }
            }
            t if t == ContentType::Alert as u8 => {
                if plaintext.len() != 2 {
                    self.stats.records_dropped += 1;
                    return;
                }
                if number.epoch == 0 && self.phase == Phase::Established {
                    self.stats.records_dropped += 1;
                    return;
                }
                let desc = AlertDescription::from_code(plaintext[1]);
                if desc == AlertDescription::CloseNotify {
                    self.end(Phase::Closed);
                    // Its flights and timers go with the session: nothing is resent.
                    v13.state.hs = None;
                    v13.discard_keys();
                    self.push_event(Event::Closed);
                } else {
                    // Every other alert is fatal in 1.3 (RFC 8446 §6).
                    let before_server_hello = waits_for_server_hello13(v13);
                    let error = self.fatal_alert_error(desc, before_server_hello, true);
                    self.end(Phase::Failed);
                    v13.state.hs = None;
                    v13.discard_keys();
                    self.push_event(Event::Failed(error));
                }
            }
            t if t == ContentType::ApplicationData as u8 => {
                // Accepted 0-RTT data is the client's to act on now (RFC 8446 §4.2.10); the
                // endpoint let its ClientHello in once.
                let early = number.epoch == epoch::EARLY_DATA && Self::take_early13(v13, plaintext.len());
                if number.epoch < epoch::APPLICATION && !early {
                    self.stats.records_dropped += 1;
                    return;
                }
                if early {
                    self.stats.app_records_received += 1;
                    match on_data {
                        Some(f) => f(plaintext),
                        None => self.push_event(Event::ApplicationData(plaintext.to_vec())),
                    }
                    return;
                }
                if self.phase != Phase::Established {
                    // A server reads the client's first records before the client's Finished
                    // has come (the client sends them with it): kept, a few, and delivered once
                    // the Finished is checked (RFC 8446 §4.4.4: not before).
                    let kept = v13.state.hs.as_mut().is_some_and(|hs| {
                        let room = hs.early_data.len() < MAX_EARLY_DATA_RECORDS
                            && hs.early_data.iter().map(Vec::len).sum::<usize>() + plaintext.len()
                                <= MAX_EARLY_RECORD_BYTES;
                        if room {
                            hs.early_data.push(plaintext.to_vec());
                        }
                        room
                    });
                    if !kept {
                        self.stats.records_dropped += 1;
                    }
                    return;
                }
                self.stats.app_records_received += 1;
                match on_data {
                    Some(f) => f(plaintext),
                    None => self.push_event(Event::ApplicationData(plaintext.to_vec())),
                }
            }
            _ => self.stats.records_dropped += 1,
        }
    }

    /// A failure of the 1.3 session: the alert goes out in the best epoch we can write.
    pub(super) fn v13_fail(&mut self, v13: &mut Tls13, abort: Abort) {
        if let Some(desc) = abort.alert {
            let body = [AlertLevel::Fatal.to_u8(), desc.code()];
            let cid = self.peer_cid().to_vec();
            let datagram =
                match v13.write.seal(ContentType::Alert as u8, &cid, &[&body], Framing::EndsDatagram) {
                    Ok((d, _, _)) => Some(d),
                    Err(_) => {
                        let seq = v13.state.hs.as_mut().map_or(0, |hs| {
                            hs.epoch0_write_seq += 1;
                            hs.epoch0_write_seq - 1
                        });
                        let mut out = vec![0u8; HEADER_LEN + 2];
                        write_record(&mut out, ContentType::Alert, 0, seq, None, &[&body]);
                        Some(out)
                    }
                };
            if let Some(d) = datagram {
                self.push_datagram(d);
            }
        }
        v13.state.hs = None;
        v13.discard_keys();
        self.end(Phase::Failed);
        self.push_event(Event::Failed(abort.error));
    }

    fn handle_handshake_record13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        number: RecordNumber,
        body: &[u8],
    ) -> Result<(), Abort> {
        let mut fresh = false;
        // Named in our next ACK, a resent record too: the peer tracks its latest transmission.
        if !hs.received.contains(&number) {
            hs.received.push(number);
        }
        for fragment in parse_fragments(body) {
            let Ok((header, data)) = fragment else {
                self.stats.records_dropped += 1;
                return Ok(());
            };
            match hs.reassembler.insert(&Fragment { header, data }) {
                // The peer resent: what we sent in answer was lost (or its ACK was).
                Insert::Old => hs.peer_resent = true,
                Insert::Dropped => self.stats.records_dropped += 1,
                Insert::Accepted => {
                    // Part of the peer's flight: the pace its datagrams come at (once each).
                    hs.flight.timer.on_answer_datagram();
                    fresh = true;
                    // A message's first fragment carries the record number that names our
                    // transmission (a hybrid's ServerHello spans two records).
                    if number.epoch == 0 && header.fragment_offset == 0 {
                        hs.plaintext_record = Some(number.seq);
                    }
                }
            }
        }
        // Adaptive policy: new messages of the peer's during the handshake show its answer to
        // our flight has begun (a copy of its previous flight is not fresh). On a duty-cycled
        // link the rest takes seconds to cross, and a copy of ours sent meanwhile only queues
        // behind it: our timer starts its wait again from now, once per transmission, so a
        // stalled answer still has ours resent within two waits (RFC 9147 §5.8).
        if fresh
            && hs.flight.timer.adaptive()
            && !hs.flight.waited_for_answer
            && !matches!(hs.step, Some(Step13::Complete))
            && hs.timers.is_set(Timer13::Retransmit)
        {
            hs.flight.waited_for_answer = true;
            hs.timers.set(Timer13::Retransmit, now + hs.flight.timer.wait());
        }
        while let Some((msg_type, _message_seq, message)) = hs.reassembler.pop() {
            self.step13(now, hs, v13, msg_type, &message)?;
            if matches!(self.phase, Phase::Failed | Phase::Closed) {
                return Ok(());
            }
        }
        // A flight that is not complete yet: acknowledge what came so the peer resends only
        // the rest (§7.1), once the rest has had time to arrive.
        if fresh && hs.reassembler.holds_fragments() && !hs.timers.is_set(Timer13::Ack) {
            let (initial, _) = self.retransmit_bounds();
            let delay = hs.flight.timer.ack_delay(initial / 4, hs.reassembler.missing_bytes());
            hs.timers.set(Timer13::Ack, now + delay);
        }
        Ok(())
    }

    /// One whole handshake message, in order.
    fn step13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        msg_type: HandshakeType,
        body: &[u8],
    ) -> Result<(), Abort> {
        match hs.step.take() {
            Some(Step13::Client(step)) => {
                let next = self.client_step13(now, hs, v13, *step, msg_type, body)?;
                hs.step = Some(next);
                Ok(())
            }
            Some(Step13::Server(step)) => {
                let next = self.server_step13(now, hs, v13, *step, msg_type, body)?;
                hs.step = Some(next);
                Ok(())
            }
            Some(Step13::Complete) => {
                hs.step = Some(Step13::Complete);
                match msg_type {
                    HandshakeType::KeyUpdate if self.phase == Phase::Established => {
                        self.on_key_update13(now, hs, v13, body)
                    }
                    HandshakeType::NewSessionTicket
                        if self.phase == Phase::Established && self.client_config().is_some() =>
                    {
                        self.on_new_session_ticket13(now, hs, v13, body)
                    }
                    HandshakeType::NewConnectionId | HandshakeType::RequestConnectionId
                        if self.phase == Phase::Established =>
                    {
                        self.on_connection_id_message13(now, hs, v13, msg_type, body)
                    }
                    _ => Err(Abort::unexpected()),
                }
            }
            None => Err(Abort::unexpected()),
        }
    }

    // ------------------------------------------------------------ timers and output

    pub(super) fn poll_timeout13(&self) -> Option<Instant> {
        let v13 = self.version.v13()?;
        let handshake = v13.state.hs.as_ref().and_then(|hs| hs.timers.next());
        let keys = Some(v13.state.handshake_keys_until).filter(|t| *t != Instant::MAX);
        [handshake, keys].into_iter().flatten().min()
    }

    pub(super) fn handle_timeout13(&mut self, now: Instant) {
        let Some(mut v13) = self.version.take13() else { return };
        if v13.state.handshake_keys_until != Instant::MAX && now >= v13.state.handshake_keys_until {
            v13.state.handshake_keys_until = Instant::MAX;
            v13.state.read.drop_below(epoch::APPLICATION);
        }
        if let Some(mut hs) = v13.state.hs.take() {
            let mut keep = true;
            while let Some(timer) = hs.timers.expire(now) {
                match timer {
                    Timer13::GiveUp => {
                        if matches!(hs.step, Some(Step13::Complete)) {
                            // The peer never acknowledged our last flight but the session is up.
                            keep = false;
                            break;
                        }
                        let retransmissions = hs.flight.resent;
                        v13.state.hs = Some(hs);
                        self.v13_fail(
                            &mut v13,
                            Abort { alert: None, error: Error::HandshakeTimeout { retransmissions } },
                        );
                        self.version = VersionState::Dtls13(v13);
                        return;
                    }
                    Timer13::Retransmit => {
                        let mut record = std::mem::take(&mut v13.write);
                        self.retransmit_flight13(now, &mut hs, &mut record, Resend::Timer);
                        v13.write = record;
                    }
                    Timer13::Ack => self.send_ack13(&mut hs, &mut v13.write, true),
                }
            }
            if keep {
                v13.state.hs = Some(hs);
            }
        }
        self.version = VersionState::Dtls13(v13);
    }

    /// Application data in the current epoch.
    pub(super) fn send13(&mut self, data: &[u8]) -> Result<(), Error> {
        let cid = self.peer_cid().to_vec();
        let mtu = self.mtu();
        let Some(v13) = self.version.v13_mut() else { return Err(Error::NotEstablished) };
        // What fits the MTU, and at most 2^14 bytes a record (RFC 8446 §5.1, RFC 9147 §4).
        let room = mtu.saturating_sub(v13.write.sealed_len(cid.len(), 0, Framing::EndsDatagram));
        let max = room.clamp(1, MAX_PLAINTEXT);
        let mut out = Vec::new();
        for chunk in data.chunks(max).chain(data.is_empty().then_some(&[][..])) {
            let (record, _, _) =
                v13.write.seal(ContentType::ApplicationData as u8, &cid, &[chunk], Framing::EndsDatagram)?;
            out.push(record);
        }
        for record in out {
            self.stats.app_records_sent += 1;
            self.push_datagram(record);
        }
        Ok(())
    }

    /// One application record into `out`; no heap allocation.
    pub(super) fn seal_into13(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let mtu = self.mtu();
        let cid_len = self.path.as_deref().map_or(0, |p| p.peer_cid().len());
        let Some(v13) = self.version.v13_mut() else { return Err(Error::NotEstablished) };
        let len = v13.write.sealed_len(cid_len, data.len(), Framing::EndsDatagram);
        if len > mtu {
            return Err(Error::TooLarge { len: data.len(), mtu });
        }
        if data.len() > MAX_PLAINTEXT {
            return Err(Error::RecordTooLarge { len: data.len(), max: MAX_PLAINTEXT });
        }
        if out.len() < len {
            return Err(Error::BufferTooSmall { needed: len });
        }
        let cid = self.path.as_deref().map_or(&[][..], |p| p.peer_cid());
        v13.write.seal_into(
            ContentType::ApplicationData as u8,
            cid,
            &[data],
            Framing::EndsDatagram,
            &mut out[..len],
        )?;
        self.stats.app_records_sent += 1;
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
        Ok(len)
    }

    pub(super) fn close13(&mut self) {
        let cid = self.peer_cid().to_vec();
        let mut sealed = None;
        if let Some(v13) = self.version.v13_mut() {
            let body = [AlertLevel::Warning.to_u8(), AlertDescription::CloseNotify.code()];
            sealed = v13
                .write
                .seal(ContentType::Alert as u8, &cid, &[&body], Framing::EndsDatagram)
                .ok()
                .map(|(d, _, _)| d);
            v13.state.hs = None;
        }
        if let Some(d) = sealed {
            self.push_datagram(d);
        }
        self.end(Phase::Closed);
    }
}

/// Our KeyUpdate was acknowledged: from now on we write with the next secret's keys.
fn next_write_keys13(record: &mut RecordWriter13, secrets: &mut AppSecrets) {
    let next = KeySchedule::next_traffic_secret(secrets.suite.hash(), PREFIX, secrets.write());
    let epoch = record.epoch().unwrap_or(epoch::APPLICATION) + 1;
    record.set(epoch, RecordKeys::from_secret(secrets.suite, PREFIX, &next));
    secrets.update_write(&next);
}

/// A protected record of a flight being filled with handshake fragments.
struct OpenRecord {
    epoch: u64,
    plaintext: Vec<u8>,
    /// (message index, start, end) of each fragment in it.
    ranges: Vec<(usize, u32, u32)>,
}

/// Seals the record being filled (in the handshake epoch's keys, or the record layer's) into
/// the datagram, and notes which message ranges its number carries.
fn flush_record(
    open: &mut Option<OpenRecord>,
    write_handshake: &mut Option<RecordWriter13>,
    record: &mut RecordWriter13,
    cid: &[u8],
    current: &mut Vec<u8>,
    sent: &mut Vec<(RecordNumber, usize, u32, u32)>,
) {
    let Some(o) = open.take() else { return };
    let writer = match write_handshake.as_mut() {
        Some(w) if w.epoch() == Some(o.epoch) => w,
        _ => record,
    };
    let Ok((bytes, epoch, seq)) =
        writer.seal(ContentType::Handshake as u8, cid, &[&o.plaintext], Framing::Packed)
    else {
        return;
    };
    let number = RecordNumber { epoch, seq };
    current.extend_from_slice(&bytes);
    sent.extend(o.ranges.into_iter().map(|(index, start, end)| (number, index, start, end)));
}

/// A client whose ClientHello awaits its ServerHello.
fn waits_for_server_hello13(v13: &Tls13) -> bool {
    v13.state.hs.as_ref().is_some_and(
        |hs| matches!(&hs.step, Some(Step13::Client(c)) if matches!(**c, ClientStep13::ExpectServerHello(_))),
    )
}

#[cfg(test)]
mod app_secrets_tests {
    use super::*;

    #[test]
    fn secrets_read_back_and_update_in_place_inline_or_not() {
        let cases = [
            (Suite13::Aes128GcmSha256, None, true),
            (Suite13::Aes128GcmSha256, Some(&[3u8; 32][..]), false),
            (Suite13::Aes256GcmSha384, None, false),
        ];
        for (suite, resumption, inline) in cases {
            let len = suite.hash().len();
            let (write, read) = (vec![1u8; len], vec![2u8; len]);
            let mut secrets = AppSecrets::new(suite, &write, &read, resumption);
            assert_eq!(secrets.secrets.apart.is_none(), inline, "{suite}");
            assert_eq!((secrets.write(), secrets.read()), (&write[..], &read[..]));
            assert_eq!(secrets.resumption(), resumption);
            secrets.update_write(&vec![4u8; len]);
            secrets.update_read(&vec![5u8; len]);
            assert_eq!((secrets.write(), secrets.read()), (&vec![4u8; len][..], &vec![5u8; len][..]));
            assert_eq!(secrets.resumption(), resumption, "{suite}: the resumption secret stays");
        }
    }
}

#[cfg(test)]
mod compressed_certificate_tests {
    use super::*;
    use CompressionAlgorithm::{Brotli, Zlib, Zstd};

    fn alert(ours: &CertificateCompression, body: &[u8]) -> Option<AlertDescription> {
        decompress_certificate(ours, body).err().and_then(|a| a.alert)
    }

    /// A Certificate body of a chain of one 600-byte certificate.
    fn certificate() -> Vec<u8> {
        let mut body = Vec::new();
        crate::handshake::encode_certificate13(&mut body, &[], &[&[0x30; 600][..]]);
        body
    }

    fn message(algorithm: u16, uncompressed_length: usize, compressed: &[u8]) -> Vec<u8> {
        let mut body = algorithm.to_be_bytes().to_vec();
        body.extend_from_slice(&(uncompressed_length as u32).to_be_bytes()[1..]);
        body.extend_from_slice(&(compressed.len() as u32).to_be_bytes()[1..]);
        body.extend_from_slice(compressed);
        body
    }

    #[test]
    fn what_we_offered_is_taken() {
        let ours = CertificateCompression::all();
        for algorithm in CompressionAlgorithm::ALL {
            let body = ours.compressed_message(algorithm, &certificate());
            let (taken, plain) = decompress_certificate(&ours, &body).ok().expect("decompressed");
            assert_eq!((taken, plain), (algorithm, certificate()));
        }
    }

    #[test]
    fn unasked_unknown_and_broken_messages_get_the_alert_rfc_8879_names() {
        let all = CertificateCompression::all();
        let zlib = Zlib.compress(&certificate());
        // Nothing offered: the message itself is unexpected.
        assert_eq!(
            alert(&CertificateCompression::none(), &message(1, certificate().len(), &zlib)),
            Some(AlertDescription::UnexpectedMessage)
        );
        // An algorithm we did not list, or none known.
        let only_brotli = CertificateCompression::new(&[Brotli]);
        assert_eq!(
            alert(&only_brotli, &message(1, certificate().len(), &zlib)),
            Some(AlertDescription::IllegalParameter)
        );
        assert_eq!(
            alert(&all, &message(0x4242, certificate().len(), &zlib)),
            Some(AlertDescription::IllegalParameter)
        );
        // A length that is not the stream's, a truncated stream, a bomb's announced length.
        for (length, stream) in [
            (certificate().len() + 1, &zlib[..]),
            (certificate().len() - 1, &zlib[..]),
            (certificate().len(), &zlib[..zlib.len() - 3]),
            (0xff_ffff, &zlib[..]),
        ] {
            assert_eq!(
                alert(&all, &message(1, length, stream)),
                Some(AlertDescription::BadCertificate),
                "{length}"
            );
        }
        let zstd = Zstd.compress(&[0u8; 200_000]);
        assert_eq!(alert(&all, &message(3, 4096, &zstd)), Some(AlertDescription::BadCertificate));
        // Not even the message's form.
        assert_eq!(alert(&all, &[0, 1, 0]), Some(AlertDescription::DecodeError));
        assert_eq!(alert(&all, &message(1, 10, &[])), Some(AlertDescription::DecodeError));
    }
}

#[cfg(test)]
mod record_limit_tests {
    use super::*;
    use crate::fuzzing::{client_addr, established_pair13_with, server_addr};

    /// A record over 2^14 + 256 bytes on the wire is dropped unread (RFC 9147 §4.5.2); one that
    /// authenticates with more than 2^14 + 1 bytes inside is the peer's own breach of RFC 8446
    /// §5.4: record_overflow (§5.2). Both count as dropped.
    #[test]
    fn a_record_over_the_rfc_limits_is_dropped_or_ends_the_session() {
        let (mut client, server, _) = established_pair13_with(Default::default(), Default::default());
        let now = Instant::from_millis(5);
        let h = server.handle_for(client_addr()).unwrap();
        let write = &server.connection(h).unwrap().version.v13().unwrap().write;
        let data = ContentType::ApplicationData as u8;
        let mut unread = write.seal_unchecked(3, data, &[0x61; MAX_PLAINTEXT + 256], Framing::EndsDatagram);
        let mut overflow = write.seal_unchecked(4, data, &[0x61; MAX_PLAINTEXT + 1], Framing::EndsDatagram);
        let before = client.stats().records_dropped;
        client.handle_datagram(now, server_addr(), &mut unread);
        assert_eq!(client.stats().records_dropped, before + 1);
        assert!(client.is_established());
        assert_eq!(client.poll_event(), None);

        client.handle_datagram(now, server_addr(), &mut overflow);
        assert_eq!(client.stats().records_dropped, before + 2);
        let overflowed = Error::AlertSent(AlertDescription::RecordOverflow);
        assert_eq!(client.poll_event(), Some(Event::Failed(overflowed)));
        // The alert goes out protected: the server reads record_overflow.
        let mut alert = client.poll_transmit(now).expect("the fatal alert").payload;
        let mut server = server;
        server.handle_datagram(now, server_addr(), client_addr(), &mut alert);
        let seen = std::iter::from_fn(|| server.poll_event())
            .any(|(_, e)| e == Event::Failed(Error::AlertReceived(AlertDescription::RecordOverflow)));
        assert!(seen, "the server got the client's record_overflow alert");
    }
}
