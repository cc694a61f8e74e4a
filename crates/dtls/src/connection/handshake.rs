//! What both roles' handshakes share: the boxed handshake state (transcript, reassembly, the
//! flight, timers, randomness), the typed step the handshake is at, the key schedule, the
//! Finished check, ECDHE and signing helpers, and the fatal-condition type.

use super::Step;
use crate::alert::AlertDescription;
use crate::crypto::{prf_sha256, MasterSecret, TrafficKeys};
use crate::error::{Error, Mismatch};
use crate::flight::{Flight, FlightItem};
use crate::handshake::{parse_finished, HandshakeHeader, HandshakeType, NamedGroup, Reassembler};
use crate::record::{Keys, RecordHeader, SplitRecord};
use crate::suite::{CipherSuite, KeyExchange};
use crate::timer::RetransmitTimer;
use fastshake_core::codec::DecodeError;
use fastshake_core::Instant;
use fastshake_core::{TimerKind, TimerTable};
use fastshake_pki::{CertDer, KeyAlgorithm, PkiError, SignatureScheme, Validation, VerifiedChain};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use ring::digest;
use std::time::Duration;

/// Protected records kept while their keys are not derived yet, and application records that
/// authenticated before the peer's Finished.
pub(super) const MAX_EARLY_RECORDS: usize = 4;
/// Bytes of protected records kept while their keys are not derived yet: nothing has
/// authenticated them, so this is memory an unauthenticated peer can pin. A Finished, an alert
/// and a first application record fit.
pub(super) const MAX_EARLY_RECORD_BYTES: usize = 4096;

/// Signature schemes we offer and accept, in our order of preference.
pub(super) const SCHEMES: [u16; 3] = [
    SignatureScheme::EcdsaSecp256r1Sha256.code(),
    SignatureScheme::RsaPssRsaeSha256.code(),
    SignatureScheme::RsaPkcs1Sha256.code(),
];

/// The timers of a handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HandshakeTimer {
    /// The handshake did not complete in time (RFC 6347 leaves the limit to the implementation).
    GiveUp,
    /// The last flight was kept long enough: the peer has it or is gone.
    Retain,
    /// Resend the current flight (RFC 6347 §4.2.4.1).
    Retransmit,
}

impl TimerKind for HandshakeTimer {
    const ALL: &'static [Self] =
        &[HandshakeTimer::GiveUp, HandshakeTimer::Retain, HandshakeTimer::Retransmit];
    fn index(self) -> usize {
        self as usize
    }
}

/// The transcript of the handshake messages (RFC 5246 §7.4.9), and the messages themselves
/// when a CertificateVerify will be made or checked (its signature covers them all, and ring
/// hashes inside the signature).
pub(super) struct Transcript {
    hash: digest::Context,
    raw: Option<Vec<u8>>,
}

impl Transcript {
    fn new() -> Self {
        Transcript { hash: digest::Context::new(&digest::SHA256), raw: None }
    }

    /// From now on the raw messages are kept too (for a CertificateVerify).
    pub fn keep_raw(&mut self) {
        self.raw = Some(Vec::new());
    }

    /// Adds one message, with its header as if it had come in one fragment.
    pub fn add(&mut self, msg_type: HandshakeType, message_seq: u16, body: &[u8]) {
        let header = HandshakeHeader::unfragmented(msg_type, message_seq, body.len() as u32);
        self.hash.update(&header);
        self.hash.update(body);
        if let Some(raw) = self.raw.as_mut() {
            raw.extend_from_slice(&header);
            raw.extend_from_slice(body);
        }
    }

    pub fn current_hash(&self) -> digest::Digest {
        self.hash.clone().finish()
    }

    /// The raw messages so far (for a CertificateVerify), no longer kept after this.
    pub fn take_raw(&mut self) -> Option<Vec<u8>> {
        self.raw.take()
    }
}

/// A protected handshake record of the peer that did not authenticate before any did.
#[derive(Clone, Copy)]
pub(super) struct AuthFailure {
    pub at: Instant,
    /// `stats.datagrams_received` when it came, to tell later datagrams from it.
    pub datagram: u64,
    /// The peer resent its flight (a handshake message or ChangeCipherSpec again) in a later datagram.
    pub peer_resent: bool,
}

/// State that exists only while handshaking (and, for the side that sent the last flight, until
/// the peer shows it arrived). Boxed in the connection and freed afterwards.
pub(super) struct Handshake {
    pub started: Instant,
    pub rng: ChaCha20Rng,
    pub client_random: [u8; 32],
    pub server_random: [u8; 32],
    pub transcript: Transcript,
    pub reassembler: Reassembler,
    /// message_seq of our next handshake message.
    pub next_message_seq: u16,
    /// Next record sequence number in epoch 0.
    pub epoch0_write_seq: u64,
    pub flight: Flight,
    pub timers: TimerTable<HandshakeTimer, 3>,
    /// message_seq of the last message of the peer's previous flight: seeing it again means our
    /// answer to it was lost.
    pub peer_prev_flight_last: Option<u16>,
    /// Datagrams that repeated messages of the peer already received, and the datagram count
    /// when the last one was counted (so a datagram counts once).
    pub peer_retransmissions: u32,
    pub peer_retransmission_seen_at: u64,
    pub extended_master_secret: bool,
    pub psk_identity: Vec<u8>,
    /// The peer's chain was taken from the validated-key cache, not validated again.
    pub chain_validation_skipped: bool,
    /// The record number of the epoch-0 record being handled (a HelloVerifyRequest echoes the
    /// one of the ClientHello it answers).
    pub record_seq_in: u64,
    /// The next record number expected from the peer in epochs 0 and 1: a jump shows records
    /// it sent that never arrived, so its flight got through only by its loss recovery.
    pub peer_next_seq: [Option<u64>; 2],
    /// Protected records that arrived before their keys (reordered ahead of ClientKeyExchange).
    pub early_records: Vec<(RecordHeader, Vec<u8>)>,
    /// A record the peer split across two datagrams, waiting for its rest.
    pub split_record: Option<SplitRecord>,
    /// The first protected handshake record of the peer that failed authentication while none
    /// had authenticated yet: a wrong key, or a forgery.
    pub auth_failure: Option<AuthFailure>,
    /// Application records that authenticated before the peer's Finished (sent right behind
    /// it and reordered ahead): delivered once the handshake completes, not dropped.
    pub early_data: Vec<Vec<u8>>,
    /// Client: the cookie its latest ClientHello carried (empty if none).
    pub cookie: Vec<u8>,
    /// The typed step; `None` only while a message is being handled.
    pub step: Option<Step>,
}

impl Handshake {
    pub fn new(now: Instant, seed: [u8; 32], timer: RetransmitTimer, give_up: Duration) -> Box<Self> {
        let mut timers = TimerTable::default();
        timers.set(HandshakeTimer::GiveUp, now + give_up);
        Box::new(Handshake {
            started: now,
            rng: ChaCha20Rng::from_seed(seed),
            client_random: [0; 32],
            server_random: [0; 32],
            transcript: Transcript::new(),
            reassembler: Reassembler::new(0),
            next_message_seq: 0,
            epoch0_write_seq: 0,
            flight: Flight::new(timer),
            timers,
            peer_prev_flight_last: None,
            peer_retransmissions: 0,
            peer_retransmission_seen_at: 0,
            extended_master_secret: false,
            psk_identity: Vec::new(),
            chain_validation_skipped: false,
            record_seq_in: 0,
            peer_next_seq: [None; 2],
            early_records: Vec::new(),
            split_record: None,
            auth_failure: None,
            early_data: Vec::new(),
            cookie: Vec::new(),
            step: None,
        })
    }

    /// Adds a message of ours to the current flight, and to the transcript when `hash` (the
    /// last message of a handshake is hashed by nobody).
    pub fn push_message(&mut self, epoch: u16, msg_type: HandshakeType, body: Vec<u8>, hash: bool) {
        let message_seq = self.next_message_seq;
        self.next_message_seq = self.next_message_seq.wrapping_add(1);
        if hash {
            self.transcript.add(msg_type, message_seq, &body);
        }
        self.flight.push(FlightItem::Handshake { epoch, msg_type, message_seq, body });
    }

    /// ChangeCipherSpec and our Finished over the transcript so far (RFC 5246 §7.4.9): the
    /// end of every handshake flight that switches to epoch 1.
    pub fn push_change_cipher_spec_and_finished(&mut self, master: &MasterSecret, client: bool, hash: bool) {
        let verify = master.verify_data(client, self.transcript.current_hash().as_ref());
        self.flight.push(FlightItem::ChangeCipherSpec);
        self.push_message(1, HandshakeType::Finished, verify.to_vec(), hash);
    }

    /// Checks the peer's Finished against the transcript so far, in constant time
    /// (`from_client`: whose Finished it is). A mismatch is decrypt_error (RFC 5246 §7.4.9).
    pub fn check_peer_finished(
        &self,
        master: &MasterSecret,
        body: &[u8],
        from_client: bool,
    ) -> Result<(), Abort> {
        let verify = parse_finished(body).map_err(Abort::decode)?;
        let expected = master.verify_data(from_client, self.transcript.current_hash().as_ref());
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&verify[..], &expected[..])) {
            return Err(Abort::alert(AlertDescription::DecryptError));
        }
        Ok(())
    }

    /// The master secret (extended when negotiated, RFC 7627 §4) from the premaster secret.
    pub fn derive_master(&self, premaster: &[u8]) -> MasterSecret {
        let session_hash = self.transcript.current_hash();
        MasterSecret::derive(
            premaster,
            self.extended_master_secret.then_some(session_hash.as_ref()),
            &self.client_random,
            &self.server_random,
        )
    }

    /// The epoch-1 keys of `suite` from the master secret and this handshake's randoms
    /// (RFC 5246 §6.3), oriented for the client or the server.
    pub fn keys(&self, suite: CipherSuite, master: &MasterSecret, client: bool) -> Keys {
        let mut block = zeroize::Zeroizing::new([0u8; 40]);
        prf_sha256(&master.0, b"key expansion", &[&self.server_random, &self.client_random], &mut block[..]);
        let TrafficKeys { client_write, server_write } = TrafficKeys::from_key_block(&block);
        let (read, write) = if client { (server_write, client_write) } else { (client_write, server_write) };
        Keys { cipher: suite.params().cipher, read, write }
    }

    /// A record of the peer in `epoch` numbered `seq` was opened: whether numbers were skipped
    /// since the last one (records lost, or resent under new numbers, RFC 6347 §4.2.4).
    pub fn note_peer_record(&mut self, epoch: u16, seq: u64) -> bool {
        let Some(next) = self.peer_next_seq.get_mut(usize::from(epoch)) else { return false };
        let skipped = next.is_some_and(|n| seq > n);
        if next.is_none_or(|n| seq >= n) {
            *next = Some(seq.saturating_add(1));
        }
        skipped
    }

    /// Counts a datagram of the peer that repeated messages we had, once per datagram.
    pub fn count_peer_retransmission(&mut self, datagram: u64) {
        if self.peer_retransmission_seen_at != datagram {
            self.peer_retransmission_seen_at = datagram;
            self.peer_retransmissions += 1;
        }
    }
}

/// A fatal condition found while handling input: the alert to send (if any) and the error.
pub(super) struct Abort {
    pub alert: Option<AlertDescription>,
    pub error: Error,
}

impl Abort {
    pub fn alert(desc: AlertDescription) -> Self {
        Abort { alert: Some(desc), error: Error::AlertSent(desc) }
    }

    pub fn decode(_: DecodeError) -> Self {
        Abort::alert(AlertDescription::DecodeError)
    }

    /// The peer's certificate or signature was refused.
    pub fn peer(e: PkiError) -> Self {
        let alert = AlertDescription::from_code(e.alert_code());
        Abort { alert: Some(alert), error: Error::PeerAuthentication { alert, reason: e.to_string() } }
    }

    /// The peer's offer and our configuration share nothing of one kind: handshake_failure.
    pub fn no_match(mismatch: Mismatch) -> Self {
        Abort::no_match_alert(AlertDescription::HandshakeFailure, mismatch)
    }

    /// The peer's proof of the PSK named `identity` did not verify: decrypt_error.
    pub fn psk_mismatch(identity: &[u8]) -> Self {
        let alert = AlertDescription::DecryptError;
        let identity = String::from_utf8_lossy(identity).into_owned();
        Abort { alert: Some(alert), error: Error::PskMismatch { identity, alert, sent: true } }
    }

    /// As [`Abort::no_match`], with the alert the RFC names for this mismatch.
    pub fn no_match_alert(alert: AlertDescription, mismatch: Mismatch) -> Self {
        Abort { alert: Some(alert), error: Error::NoMatch { alert, mismatch } }
    }

    /// The peer sent a message that has no place here.
    pub fn unexpected() -> Self {
        Abort::alert(AlertDescription::UnexpectedMessage)
    }
}

/// A server's chain (the DER certificates of its Certificate message) as a client validates it,
/// in either version: against `anchors`, the configured name and time, through the client's
/// validated-key cache. The chain comes back with the result, for what the caller keeps of it.
pub(super) fn validate_server_chain(
    config: &crate::config::ClientConfig,
    anchors: &fastshake_pki::TrustAnchors,
    now: Instant,
    certs: &[&[u8]],
) -> Result<(Vec<CertDer>, VerifiedChain, Validation), Abort> {
    let chain: Vec<CertDer> = certs.iter().map(|c| CertDer::from(c.to_vec())).collect();
    let (verified, validation) = fastshake_pki::verify_server_chain_cached(
        config.key_cache.as_deref(),
        &chain,
        anchors,
        config.wall_clock.map_or(0, |w| w.unix_at(now)),
        config.server_name.as_deref(),
    )
    .map_err(Abort::peer)?;
    Ok((chain, verified, validation))
}

/// A client's chain as a server validates it, in either version: against `anchors` and the
/// configured time, through the server's validated-key cache.
pub(super) fn validate_client_chain(
    config: &crate::config::ServerConfig,
    anchors: &fastshake_pki::TrustAnchors,
    now: Instant,
    certs: &[&[u8]],
) -> Result<(Vec<CertDer>, VerifiedChain, Validation), Abort> {
    let chain: Vec<CertDer> = certs.iter().map(|c| CertDer::from(c.to_vec())).collect();
    let (verified, validation) = fastshake_pki::verify_client_chain_cached(
        config.key_cache.as_deref(),
        &chain,
        anchors,
        config.wall_clock.map_or(0, |w| w.unix_at(now)),
    )
    .map_err(Abort::peer)?;
    Ok((chain, verified, validation))
}

/// The key algorithm a certificate suite's server must have.
pub(super) fn suite_key_algorithm(suite: CipherSuite) -> Option<KeyAlgorithm> {
    match suite.params().key_exchange {
        KeyExchange::Psk | KeyExchange::Tls13 => None,
        KeyExchange::EcdheEcdsa => Some(KeyAlgorithm::EcdsaP256),
        KeyExchange::EcdheRsa => Some(KeyAlgorithm::Rsa),
    }
}

/// Our ephemeral key-exchange secret, drawn from the seeded RNG (each type zeroizes on drop).
pub(super) enum EcdheSecret {
    X25519(X25519Secret),
    P256(p256::ecdh::EphemeralSecret),
    /// The client's half of X25519MLKEM768: the ML-KEM-768 decapsulation key and an x25519 key.
    Hybrid(Box<MlKemSecret>, X25519Secret),
}

/// An ML-KEM-768 decapsulation key, wiped when dropped (libcrux's own type is not).
pub(super) struct MlKemSecret(libcrux_ml_kem::mlkem768::MlKem768PrivateKey);

impl Drop for MlKemSecret {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        for i in 0..libcrux_ml_kem::mlkem768::MlKem768PrivateKey::len() {
            self.0[i].zeroize();
        }
    }
}

/// ML-KEM-768 (FIPS 203) as the hybrid uses it, every random input from the seeded RNG.
mod ml_kem768 {
    use super::MlKemSecret;
    use libcrux_ml_kem::mlkem768;
    use rand_chacha::ChaCha20Rng;
    use rand_core::RngCore;
    use zeroize::Zeroizing;

    /// ML-KEM.KeyGen (§7.1) from 64 bytes of `rng` (its seeds d and z): the decapsulation key and
    /// the encapsulation key as sent.
    pub fn generate(rng: &mut ChaCha20Rng) -> (MlKemSecret, Vec<u8>) {
        let mut seed = Zeroizing::new([0u8; libcrux_ml_kem::KEY_GENERATION_SEED_SIZE]);
        rng.fill_bytes(&mut seed[..]);
        let (private, public) = mlkem768::generate_key_pair(*seed).into_parts();
        (MlKemSecret(private), public.as_slice().to_vec())
    }

    /// ML-KEM.Encaps (§7.2) to `encapsulation_key` with 32 bytes of `rng`: the ciphertext and
    /// the shared secret. `None` for a key that fails §7.2's input checks (its length, and its
    /// coefficients reduced mod q).
    pub fn encapsulate(
        encapsulation_key: &[u8],
        rng: &mut ChaCha20Rng,
    ) -> Option<(Vec<u8>, Zeroizing<[u8; 32]>)> {
        let key = mlkem768::MlKem768PublicKey::try_from(encapsulation_key).ok()?;
        if !mlkem768::validate_public_key(&key) {
            return None;
        }
        let mut m = Zeroizing::new([0u8; libcrux_ml_kem::ENCAPS_SEED_SIZE]);
        rng.fill_bytes(&mut m[..]);
        let (ciphertext, shared) = mlkem768::encapsulate(&key, *m);
        Some((ciphertext.as_slice().to_vec(), Zeroizing::new(shared)))
    }

    /// ML-KEM.Decaps (§7.3) of `ciphertext` (`None` unless it has the ciphertext's length).
    pub fn decapsulate(secret: &MlKemSecret, ciphertext: &[u8]) -> Option<Zeroizing<[u8; 32]>> {
        let ciphertext = mlkem768::MlKem768Ciphertext::try_from(ciphertext).ok()?;
        Some(Zeroizing::new(mlkem768::decapsulate(&secret.0, &ciphertext)))
    }
}

/// An ephemeral x25519 key: 32 bytes of the seeded RNG (RFC 7748 §5: any 32 bytes are a private
/// key; the function clamps them), held by aws-lc, which zeroizes it when dropped.
pub(super) struct X25519Secret(aws_lc_rs::agreement::PrivateKey);

impl X25519Secret {
    /// A fresh key and its public key as sent.
    fn generate(rng: &mut ChaCha20Rng) -> (X25519Secret, [u8; 32]) {
        use aws_lc_rs::agreement::{PrivateKey, X25519};
        let mut scalar = zeroize::Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut scalar[..]);
        // Neither step can fail: the key has x25519's length, and its public key is computed,
        // not parsed.
        let key = PrivateKey::from_private_key(&X25519, &scalar[..]).expect("32 bytes make an x25519 key");
        let mut public = [0u8; 32];
        public.copy_from_slice(key.compute_public_key().expect("an x25519 public key").as_ref());
        (X25519Secret(key), public)
    }

    /// The shared secret with the peer's public key; `None` for an all-zero result, a peer key of
    /// small order (RFC 7748 §6.1, RFC 8422 §5.11).
    fn agree(&self, peer: &[u8; 32]) -> Option<zeroize::Zeroizing<Vec<u8>>> {
        use aws_lc_rs::agreement::{agree, UnparsedPublicKey, X25519};
        agree(&self.0, UnparsedPublicKey::new(&X25519, peer), (), |shared| {
            // AWS-LC refuses the all-zero result itself; the check stays so that the refusal does
            // not rest on one library's choice.
            if shared.iter().all(|&b| b == 0) {
                return Err(());
            }
            Ok(zeroize::Zeroizing::new(shared.to_vec()))
        })
        .ok()
    }
}

/// A fresh ephemeral key of `group` and its public key as sent (uncompressed point for P-256).
pub(super) fn ephemeral(group: NamedGroup, rng: &mut ChaCha20Rng) -> (EcdheSecret, Vec<u8>) {
    match group {
        NamedGroup::X25519 => {
            let (secret, public) = X25519Secret::generate(rng);
            (EcdheSecret::X25519(secret), public.to_vec())
        }
        NamedGroup::Secp256r1 => {
            use p256::elliptic_curve::sec1::ToSec1Point;
            use p256::elliptic_curve::Generate;
            let secret = p256::ecdh::EphemeralSecret::generate_from_rng(&mut fastshake_pki::RngCompat(rng));
            let public = secret.public_key().to_sec1_point(false).as_bytes().to_vec();
            (EcdheSecret::P256(secret), public)
        }
        NamedGroup::X25519MlKem768 => {
            let (dk, mut public) = ml_kem768::generate(rng);
            let (x, x_public) = X25519Secret::generate(rng);
            // draft-ietf-tls-ecdhe-mlkem §3: ML-KEM's part first, then x25519's.
            public.extend_from_slice(&x_public);
            (EcdheSecret::Hybrid(Box::new(dk), x), public)
        }
    }
}

/// Server side of a key exchange: from the client's share, the shared secret and our share
/// (for ECDH an ephemeral key; for the hybrid the ML-KEM ciphertext and an x25519 key).
pub(super) fn answer_share(
    group: NamedGroup,
    client: &[u8],
    rng: &mut ChaCha20Rng,
) -> Result<(zeroize::Zeroizing<Vec<u8>>, Vec<u8>), Abort> {
    if group != NamedGroup::X25519MlKem768 {
        let (secret, public) = ephemeral(group, rng);
        return Ok((agree(secret, group, client)?, public));
    }
    let illegal = || Abort::alert(AlertDescription::IllegalParameter);
    if client.len() != group.public_len() {
        return Err(illegal());
    }
    let (ek, x) = client.split_at(crate::handshake::MLKEM768_ENCAPSULATION_KEY_LEN);
    // An encapsulation key that fails FIPS 203's check is illegal_parameter
    // (draft-ietf-tls-ecdhe-mlkem §4).
    let (ciphertext, kem_secret) = ml_kem768::encapsulate(ek, rng).ok_or_else(illegal)?;
    let (x_shared, x_public) = {
        let (secret, public) = ephemeral(NamedGroup::X25519, rng);
        (agree(secret, NamedGroup::X25519, x)?, public)
    };
    let mut shared = zeroize::Zeroizing::new(kem_secret.to_vec());
    shared.extend_from_slice(&x_shared);
    let mut public = ciphertext;
    public.extend_from_slice(&x_public);
    Ok((shared, public))
}

/// ECDH with the peer's public key; the shared secret is the premaster secret (RFC 8422 §5.10).
/// A malformed point, a point not on the curve, or a small-order X25519 key is illegal_parameter.
pub(super) fn agree(
    secret: EcdheSecret,
    group: NamedGroup,
    peer: &[u8],
) -> Result<zeroize::Zeroizing<Vec<u8>>, Abort> {
    let illegal = || Abort::alert(AlertDescription::IllegalParameter);
    let expected = match group {
        NamedGroup::X25519MlKem768 => crate::handshake::MLKEM768_CIPHERTEXT_LEN + 32,
        _ => group.public_len(),
    };
    if peer.len() != expected {
        return Err(illegal());
    }
    match secret {
        EcdheSecret::X25519(secret) => {
            let bytes: &[u8; 32] = peer.try_into().map_err(|_| illegal())?;
            secret.agree(bytes).ok_or_else(illegal)
        }
        EcdheSecret::P256(secret) => {
            // Uncompressed points only (RFC 8422 §5.1.2: the only format we offer).
            if peer.first() != Some(&4) {
                return Err(illegal());
            }
            let public = p256::PublicKey::from_sec1_bytes(peer).map_err(|_| illegal())?;
            let shared = secret.diffie_hellman(&public);
            Ok(zeroize::Zeroizing::new(shared.raw_secret_bytes().to_vec()))
        }
        EcdheSecret::Hybrid(dk, x) => {
            let (ciphertext, x_public) = peer.split_at(crate::handshake::MLKEM768_CIPHERTEXT_LEN);
            let kem_secret = ml_kem768::decapsulate(&dk, ciphertext).ok_or_else(illegal)?;
            let mut shared = zeroize::Zeroizing::new(kem_secret.to_vec());
            shared.extend_from_slice(&agree(EcdheSecret::X25519(x), NamedGroup::X25519, x_public)?);
            Ok(shared)
        }
    }
}

pub(super) fn sign(
    key: &fastshake_pki::SigningKey,
    scheme: SignatureScheme,
    message: &[u8],
    rng: &mut ChaCha20Rng,
) -> Result<Vec<u8>, Abort> {
    key.sign(scheme, message, rng).map_err(|_| Abort::alert(AlertDescription::InternalError))
}

/// NewSessionTicket's lifetime hint in seconds.
pub(super) fn lifetime_hint(lifetime: Duration) -> u32 {
    u32::try_from(lifetime.as_secs()).unwrap_or(u32::MAX)
}

/// First 4 bytes of a client random: tells a late duplicate ClientHello from a new one (a new
/// random matching by chance, 1 in 2^32, is taken for a duplicate and gets no new session).
pub(crate) fn hello_id(random: &[u8; 32]) -> u32 {
    u32::from_be_bytes([random[0], random[1], random[2], random[3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ml_kem::{Decapsulate, KeyExport};

    /// The hybrid's ML-KEM-768 (libcrux) gives, from the same random inputs, the bytes of a
    /// second implementation of FIPS 203, RustCrypto's `ml-kem`, both ways.
    #[test]
    fn ml_kem_768_agrees_with_a_second_implementation() {
        for n in 0..8u8 {
            let mut rng = ChaCha20Rng::from_seed([n; 32]);
            let mut seed = [0u8; 64];
            let mut m = [0u8; 32];
            let mut copy = rng.clone();
            copy.fill_bytes(&mut seed);
            let (ours, public) = ml_kem768::generate(&mut rng);
            let theirs = ml_kem::DecapsulationKey::<ml_kem::MlKem768>::from_seed(seed.into());
            assert_eq!(public, theirs.encapsulation_key().to_bytes().to_vec(), "seed {n}: key");

            let mut copy = rng.clone();
            copy.fill_bytes(&mut m);
            let (ciphertext, secret) = ml_kem768::encapsulate(&public, &mut rng).expect("a valid key");
            let (their_ciphertext, their_secret) =
                theirs.encapsulation_key().encapsulate_deterministic(&m.into());
            assert_eq!(ciphertext, their_ciphertext.to_vec(), "seed {n}: ciphertext");
            assert_eq!(secret.to_vec(), their_secret.to_vec(), "seed {n}: encapsulated secret");

            let opened = ml_kem768::decapsulate(&ours, &ciphertext).expect("a ciphertext's length");
            let their_ciphertext = ml_kem::Ciphertext::<ml_kem::MlKem768>::try_from(&ciphertext[..]).unwrap();
            assert_eq!(
                opened.to_vec(),
                theirs.decapsulate(&their_ciphertext).to_vec(),
                "seed {n}: decapsulated"
            );
            assert_eq!(opened, secret);
        }
    }

    #[test]
    fn an_encapsulation_key_failing_fips_203_checks_is_refused() {
        let mut rng = ChaCha20Rng::from_seed([1; 32]);
        let (_, mut public) = ml_kem768::generate(&mut rng);
        assert!(ml_kem768::encapsulate(&public[1..], &mut rng).is_none(), "a byte short");
        // The first coefficient 0xfff, above q = 3329 (§7.2's modulus check).
        public[0] = 0xff;
        public[1] |= 0x0f;
        assert!(ml_kem768::encapsulate(&public, &mut rng).is_none(), "a coefficient not reduced");
        let mut share = public;
        share.extend_from_slice(&[9; 32]);
        let refused = answer_share(NamedGroup::X25519MlKem768, &share, &mut rng).err().and_then(|a| a.alert);
        assert_eq!(refused, Some(AlertDescription::IllegalParameter));
    }
}
