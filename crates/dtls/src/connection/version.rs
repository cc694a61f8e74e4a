//! A client that offers DTLS 1.3 and 1.2 in one ClientHello (RFC 8446 §4.2.1, RFC 9147 §5.3).
//!
//! The session starts as a DTLS 1.2 handshake whose hello also carries the 1.3 offer (key
//! shares, supported_versions, a PSK binder). The server's first answer decides: a
//! HelloVerifyRequest or a 1.2 ServerHello keeps the 1.2 handshake (the ServerHello checked for
//! the downgrade sentinel, RFC 8446 §4.1.3); a 1.3 ServerHello or HelloRetryRequest hands the
//! session to the 1.3 handshake, which takes the hello sent, its numbering and its timer.

use super::client::{ClientStep, ExpectServerHello};
use super::handshake::{Handshake, HandshakeTimer};
use super::tls13::{ClientStep13, ExpectServerHello13, Handshake13, Step13, Timer13, Tls13};
use super::{Connection, Step};
use crate::connection::VersionState;
use crate::handshake::{parse_fragments, HandshakeType, HELLO_RETRY_REQUEST_RANDOM};
use crate::record::unified::is_unified;
use crate::record::{ContentType, RecordHeader};
use fastshake_core::codec::Reader;
use rand_core::{RngCore, SeedableRng};

/// The version a server's answer to a hello offering both is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Dtls12,
    Dtls13,
}

/// What the first records of a datagram show of the server's version: any protected 1.3
/// record, or a ServerHello's first fragment whose random names a HelloRetryRequest or whose
/// suite is a 1.3 one (TLS 1.3 suites are 0x13XX, RFC 8446 §B.4), says 1.3; a
/// HelloVerifyRequest or a ServerHello with a 1.2 suite says 1.2. `None`: nothing tells.
pub(super) fn answer_version(datagram: &[u8]) -> Option<Answer> {
    let mut pos = 0;
    while pos < datagram.len() {
        let rest = &datagram[pos..];
        if is_unified(rest[0]) {
            return Some(Answer::Dtls13);
        }
        let mut r = Reader::new(rest);
        let header = RecordHeader::parse(&mut r, 0).ok()?;
        let end = header.len() + header.length as usize;
        let body = rest.get(header.len()..end)?;
        pos += end;
        if header.content_type != ContentType::Handshake || header.epoch != 0 {
            continue;
        }
        for (h, data) in parse_fragments(body).map_while(Result::ok) {
            match h.msg_type {
                HandshakeType::HelloVerifyRequest => return Some(Answer::Dtls12),
                HandshakeType::ServerHello if h.fragment_offset == 0 => {
                    // legacy_version, random, legacy_session_id, cipher_suite.
                    let random = data.get(2..34)?;
                    if random == HELLO_RETRY_REQUEST_RANDOM {
                        return Some(Answer::Dtls13);
                    }
                    let sid_len = *data.get(34)? as usize;
                    let suite = data.get(35 + sid_len..37 + sid_len)?;
                    return Some(if suite[0] == 0x13 { Answer::Dtls13 } else { Answer::Dtls12 });
                }
                _ => {}
            }
        }
    }
    None
}

impl Connection {
    /// Whether the handshake still waits for the answer to a hello offering both versions.
    pub(super) fn offers_both(&self) -> bool {
        !self.version.is13()
            && self.waits_for_server_hello()
            && self.hs.as_ref().is_some_and(|hs| match &hs.step {
                Some(Step::Client(ClientStep::ExpectServerHello(state))) => state.offer13.is_some(),
                _ => false,
            })
    }

    /// The server answered in DTLS 1.3: the 1.2 handshake hands over the hello it sent (the 1.3
    /// transcript starts with it), its message and record numbers, its timer and its deadline.
    pub(super) fn switch_to13(&mut self) {
        let Some(mut hs) = self.hs.take() else { return };
        let Some(Step::Client(ClientStep::ExpectServerHello(state))) = hs.step.take() else {
            self.hs = Some(hs);
            return;
        };
        let ExpectServerHello { hello_seq, offer13, resume13, .. } = state;
        let Some(offer13) = offer13 else { return };
        let give_up =
            hs.timers.get(HandshakeTimer::GiveUp).map_or(std::time::Duration::ZERO, |at| at - hs.started);
        let Handshake {
            started,
            mut rng,
            flight,
            timers,
            epoch0_write_seq,
            next_message_seq,
            reassembler,
            ..
        } = *hs;
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let mut hs13 =
            Handshake13::new(started, rand_chacha::ChaCha20Rng::from_seed(seed), flight.timer, give_up);
        hs13.epoch0_write_seq = epoch0_write_seq;
        // The 1.2 handshake's budget (what the configuration takes from the peer) goes on.
        hs13.reassembler = reassembler;
        hs13.reassembler.reset(hello_seq);
        // The hello sent is the flight in progress: resent by the same timer until answered.
        hs13.next_message_seq = hello_seq;
        hs13.push_message(0, HandshakeType::ClientHello, offer13.hello.clone(), false);
        hs13.next_message_seq = next_message_seq;
        hs13.resume = resume13;
        if let Some(at) = timers.get(HandshakeTimer::Retransmit) {
            hs13.timers.set(Timer13::Retransmit, at);
        }
        hs13.step = Some(Step13::Client(Box::new(ClientStep13::ExpectServerHello(*offer13))));
        self.version = VersionState::Dtls13(Tls13::new(Some(hs13)));
    }
}

/// The 1.3 offer of a hello that offers both versions, with the same client random.
pub(super) fn offer13(config: &crate::config::ClientConfig, hs: &mut Handshake) -> Box<ExpectServerHello13> {
    let random = hs.client_random;
    Box::new(ExpectServerHello13::new(config, random, &mut hs.rng))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::HandshakeHeader;
    use crate::record::write_record;

    fn hello_record(msg_type: HandshakeType, offset: u32, body: &[u8]) -> Vec<u8> {
        let mut fragment = Vec::new();
        HandshakeHeader {
            msg_type,
            length: 200,
            message_seq: 0,
            fragment_offset: offset,
            fragment_length: body.len() as u32,
        }
        .write(&mut fragment);
        fragment.extend_from_slice(body);
        let mut out = vec![0u8; crate::record::HEADER_LEN + fragment.len()];
        write_record(&mut out, ContentType::Handshake, 0, 0, None, &[&fragment]);
        out
    }

    fn server_hello_start(random: [u8; 32], suite: u16) -> Vec<u8> {
        let mut b = vec![0xfe, 0xfd];
        b.extend_from_slice(&random);
        b.push(0);
        b.extend_from_slice(&suite.to_be_bytes());
        b
    }

    #[test]
    fn the_first_answer_tells_the_version() {
        let sh12 = hello_record(HandshakeType::ServerHello, 0, &server_hello_start([7; 32], 0xc0a8));
        assert_eq!(answer_version(&sh12), Some(Answer::Dtls12));
        let sh13 = hello_record(HandshakeType::ServerHello, 0, &server_hello_start([7; 32], 0x1301));
        assert_eq!(answer_version(&sh13), Some(Answer::Dtls13));
        let hrr = hello_record(
            HandshakeType::ServerHello,
            0,
            &server_hello_start(HELLO_RETRY_REQUEST_RANDOM, 0xc0a8),
        );
        assert_eq!(answer_version(&hrr), Some(Answer::Dtls13));
        let hvr = hello_record(HandshakeType::HelloVerifyRequest, 0, &[0xfe, 0xff, 0]);
        assert_eq!(answer_version(&hvr), Some(Answer::Dtls12));
        // A later fragment alone tells nothing; a protected 1.3 record behind it does.
        let mut later = hello_record(HandshakeType::ServerHello, 100, &[0; 20]);
        assert_eq!(answer_version(&later), None);
        later.extend_from_slice(&[0x2c, 0, 0, 0, 17]);
        assert_eq!(answer_version(&later), Some(Answer::Dtls13));
        // Cut anywhere, never a panic.
        for cut in 0..sh13.len() {
            let _ = answer_version(&sh13[..cut]);
        }
    }
}
