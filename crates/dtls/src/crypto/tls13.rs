//! DTLS 1.3's cryptography (RFC 8446 §7, RFC 9147 §5.9): the cipher suites, the key schedule
//! from the (external or resumption) PSK and the (EC)DHE secret to the traffic secrets,
//! Finished and binder MACs, each direction's record keys, and the AEAD of a record
//! (RFC 8446 §5.2 and §5.3). Only ring and RustCrypto primitives; this module places them.

use crate::record::unified::SequenceCipher;
use ccm::aead::generic_array::GenericArray;
use ccm::aead::{AeadInPlace, KeyInit};
use ring::{digest, hkdf, hmac};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// A DTLS 1.3 cipher suite (RFC 8446 §B.4; the CCM ones as RFC 9147 and RFC 7925's profile
/// use them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Suite13 {
    /// `TLS_AES_128_GCM_SHA256` (0x1301).
    Aes128GcmSha256,
    /// `TLS_AES_256_GCM_SHA384` (0x1302).
    Aes256GcmSha384,
    /// `TLS_CHACHA20_POLY1305_SHA256` (0x1303).
    Chacha20Poly1305Sha256,
    /// `TLS_AES_128_CCM_SHA256` (0x1304).
    Aes128CcmSha256,
    /// `TLS_AES_128_CCM_8_SHA256` (0x1305), the IoT profile's.
    Aes128Ccm8Sha256,
}

impl Suite13 {
    /// Every 1.3 suite, in the default order of preference.
    pub const ALL: [Suite13; 5] = [
        Suite13::Aes128GcmSha256,
        Suite13::Aes256GcmSha384,
        Suite13::Chacha20Poly1305Sha256,
        Suite13::Aes128CcmSha256,
        Suite13::Aes128Ccm8Sha256,
    ];

    /// The IANA code point.
    pub fn id(self) -> u16 {
        match self {
            Suite13::Aes128GcmSha256 => 0x1301,
            Suite13::Aes256GcmSha384 => 0x1302,
            Suite13::Chacha20Poly1305Sha256 => 0x1303,
            Suite13::Aes128CcmSha256 => 0x1304,
            Suite13::Aes128Ccm8Sha256 => 0x1305,
        }
    }

    /// The suite with code point `id`, if it is a 1.3 suite.
    pub fn from_id(id: u16) -> Option<Self> {
        Suite13::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The IANA name.
    pub fn iana_name(self) -> &'static str {
        match self {
            Suite13::Aes128GcmSha256 => "TLS_AES_128_GCM_SHA256",
            Suite13::Aes256GcmSha384 => "TLS_AES_256_GCM_SHA384",
            Suite13::Chacha20Poly1305Sha256 => "TLS_CHACHA20_POLY1305_SHA256",
            Suite13::Aes128CcmSha256 => "TLS_AES_128_CCM_SHA256",
            Suite13::Aes128Ccm8Sha256 => "TLS_AES_128_CCM_8_SHA256",
        }
    }

    /// The suite with this IANA name (case-insensitive).
    pub fn from_iana_name(name: &str) -> Option<Self> {
        Suite13::ALL.into_iter().find(|s| s.iana_name().eq_ignore_ascii_case(name.trim()))
    }

    /// The hash its key schedule runs on.
    pub fn hash(self) -> SuiteHash {
        match self {
            Suite13::Aes256GcmSha384 => SuiteHash::Sha384,
            _ => SuiteHash::Sha256,
        }
    }

    /// Bytes of its AEAD key (and of its sequence number key).
    pub fn key_len(self) -> usize {
        match self {
            Suite13::Aes256GcmSha384 | Suite13::Chacha20Poly1305Sha256 => 32,
            _ => 16,
        }
    }

    /// Bytes of its AEAD tag.
    pub fn tag_len(self) -> usize {
        match self {
            Suite13::Aes128Ccm8Sha256 => 8,
            _ => 16,
        }
    }

    /// The cipher that encrypts record numbers (RFC 9147 §4.2.3).
    pub fn sequence_cipher(self) -> SequenceCipher {
        match self {
            Suite13::Aes256GcmSha384 => SequenceCipher::Aes256,
            Suite13::Chacha20Poly1305Sha256 => SequenceCipher::ChaCha20,
            _ => SequenceCipher::Aes128,
        }
    }

    /// Records this suite may protect under one key before the keys must be updated
    /// (RFC 9147 §4.5.3: 2^24.5 for GCM and ChaCha20 is 2^23.5 for CCM; CCM_8's
    /// forgery bound is far lower, and its receiver limit binds first).
    pub fn confidentiality_limit(self) -> u64 {
        match self {
            Suite13::Aes128GcmSha256 | Suite13::Aes256GcmSha384 => 1 << 24,
            Suite13::Chacha20Poly1305Sha256 => 1 << 62,
            Suite13::Aes128CcmSha256 => 1 << 23,
            Suite13::Aes128Ccm8Sha256 => 1 << 23,
        }
    }

    /// Records that may fail authentication under one key before the session must end
    /// (RFC 9147 §4.5.3: 2^36 for GCM, 2^36 for ChaCha20, 2^23.5 for CCM; CCM_8 has no
    /// analysis, so the RFC's conservative 2^7 for short tags is taken).
    pub fn integrity_limit(self) -> u64 {
        match self {
            Suite13::Aes128GcmSha256 | Suite13::Aes256GcmSha384 => 1 << 36,
            Suite13::Chacha20Poly1305Sha256 => 1 << 36,
            Suite13::Aes128CcmSha256 => 1 << 23,
            Suite13::Aes128Ccm8Sha256 => 1 << 7,
        }
    }
}

impl std::fmt::Display for Suite13 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.iana_name())
    }
}

/// The prefix of every HKDF label (RFC 8446 §7.1): DTLS 1.3 has its own (RFC 9147 §5.9), so
/// that keys of one protocol never serve the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelPrefix {
    /// `"dtls13"`, DTLS 1.3's.
    Dtls13,
    /// `"tls13 "`, TLS 1.3's (RFC 8448's traces use it).
    Tls13,
}

impl LabelPrefix {
    fn bytes(self) -> &'static [u8] {
        match self {
            LabelPrefix::Dtls13 => b"dtls13",
            LabelPrefix::Tls13 => b"tls13 ",
        }
    }
}

/// The hash of a TLS 1.3 cipher suite, which its key schedule runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuiteHash {
    /// SHA-256 (every suite but TLS_AES_256_GCM_SHA384).
    Sha256,
    /// SHA-384.
    Sha384,
}

impl SuiteHash {
    fn hkdf(self) -> hkdf::Algorithm {
        match self {
            SuiteHash::Sha256 => hkdf::HKDF_SHA256,
            SuiteHash::Sha384 => hkdf::HKDF_SHA384,
        }
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) of `secret` into `out`: the `HkdfLabel` is the length,
/// the prefixed label and the context, each behind its length, as the RFC lays it out.
///
/// # Panics
/// If `out` is longer than HKDF allows (255 hash lengths), or `label` or `context` longer than
/// their one-byte lengths: the protocol's labels and contexts (a hash) never are.
pub fn expand_label(
    hash: SuiteHash,
    prefix: LabelPrefix,
    secret: &[u8],
    label: &[u8],
    context: &[u8],
    out: &mut [u8],
) {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let length = u16::try_from(out.len()).expect("an output of at most 255 hash lengths").to_be_bytes();
    let label_len = [u8::try_from(prefix.bytes().len() + label.len()).expect("a label of at most 255 bytes")];
    let context_len = [u8::try_from(context.len()).expect("a context of at most 255 bytes")];
    let info: [&[u8]; 6] = [&length, &label_len, prefix.bytes(), label, &context_len, context];
    hkdf::Prk::new_less_safe(hash.hkdf(), secret)
        .expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("an output of at most 255 hash lengths");
}

/// One direction's record protection keys from its traffic secret (RFC 8446 §7.3, RFC 9147
/// §4.2.3): the AEAD key, the IV its nonces are made from, and the sequence number key.
pub struct TrafficKeys {
    /// `[sender]_write_key`.
    pub key: Zeroizing<Vec<u8>>,
    /// `[sender]_write_iv`.
    pub iv: [u8; 12],
    /// `sn_key`, of the AEAD key's length.
    pub sn_key: Zeroizing<Vec<u8>>,
}

impl TrafficKeys {
    /// The keys of `secret` for an AEAD with `key_len`-byte keys.
    pub fn derive(hash: SuiteHash, prefix: LabelPrefix, secret: &[u8], key_len: usize) -> Self {
        let mut key = Zeroizing::new(vec![0u8; key_len]);
        let mut iv = [0u8; 12];
        let mut sn_key = Zeroizing::new(vec![0u8; key_len]);
        expand_label(hash, prefix, secret, b"key", &[], &mut key);
        expand_label(hash, prefix, secret, b"iv", &[], &mut iv);
        expand_label(hash, prefix, secret, b"sn", &[], &mut sn_key);
        TrafficKeys { key, iv, sn_key }
    }
}

impl SuiteHash {
    /// Bytes of its output.
    #[allow(clippy::len_without_is_empty)] // a hash's length, never empty
    pub fn len(self) -> usize {
        match self {
            SuiteHash::Sha256 => 32,
            SuiteHash::Sha384 => 48,
        }
    }

    pub(crate) fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            SuiteHash::Sha256 => &digest::SHA256,
            SuiteHash::Sha384 => &digest::SHA384,
        }
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            SuiteHash::Sha256 => hmac::HMAC_SHA256,
            SuiteHash::Sha384 => hmac::HMAC_SHA384,
        }
    }

    /// The hash of `data`.
    pub fn hash(self, data: &[u8]) -> digest::Digest {
        digest::digest(self.digest_algorithm(), data)
    }

    /// HKDF-Extract (RFC 5869 §2.2) of `ikm` under `salt`; the output is a hash long. ring keeps
    /// its PRK opaque, so the extraction is the HMAC it is defined as.
    fn extract(self, salt: &[u8], ikm: &[u8]) -> Zeroizing<Vec<u8>> {
        let key = hmac::Key::new(self.hmac_algorithm(), salt);
        Zeroizing::new(hmac::sign(&key, ikm).as_ref().to_vec())
    }

    /// HMAC of `data` under `key` (Finished and binders, RFC 8446 §4.4.4).
    pub fn hmac(self, key: &[u8], data: &[u8]) -> hmac::Tag {
        hmac::sign(&hmac::Key::new(self.hmac_algorithm(), key), data)
    }
}

/// The stage of the key schedule (RFC 8446 §7.1) a secret belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Early,
    Handshake,
    Master,
}

/// The key schedule of one handshake (RFC 8446 §7.1): Early Secret, then Handshake Secret,
/// then Master Secret, each extracted from the one before; the traffic secrets are derived
/// from the current one with a transcript hash.
pub struct KeySchedule {
    hash: SuiteHash,
    prefix: LabelPrefix,
    stage: Stage,
    secret: Zeroizing<Vec<u8>>,
}

impl KeySchedule {
    /// The Early Secret from `psk` (an external or resumption PSK), or from zeros without one.
    pub fn new(hash: SuiteHash, prefix: LabelPrefix, psk: Option<&[u8]>) -> Self {
        let zeros = [0u8; 48];
        let ikm = psk.unwrap_or(&zeros[..hash.len()]);
        KeySchedule { hash, prefix, stage: Stage::Early, secret: hash.extract(&zeros[..hash.len()], ikm) }
    }

    /// The hash this schedule runs on.
    pub fn hash(&self) -> SuiteHash {
        self.hash
    }

    /// Derive-Secret (RFC 8446 §7.1) of the current secret with `label` over a transcript whose
    /// hash is `transcript_hash`.
    pub fn derive(&self, label: &[u8], transcript_hash: &[u8]) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(vec![0u8; self.hash.len()]);
        expand_label(self.hash, self.prefix, &self.secret, label, transcript_hash, &mut out);
        out
    }

    /// The binder key (`ext binder` for an external PSK, `res binder` for a ticket's), from
    /// the Early Secret.
    pub fn binder_key(&self, external: bool) -> Zeroizing<Vec<u8>> {
        debug_assert_eq!(self.stage, Stage::Early);
        let empty = self.hash.hash(&[]);
        self.derive(if external { b"ext binder" } else { b"res binder" }, empty.as_ref())
    }

    /// The next stage: the current secret's `derived` salt over `ikm` (the (EC)DHE secret for
    /// the Handshake Secret, zeros without one and for the Master Secret).
    fn advance(&mut self, ikm: Option<&[u8]>, stage: Stage) {
        let empty = self.hash.hash(&[]);
        let salt = self.derive(b"derived", empty.as_ref());
        let zeros = [0u8; 48];
        self.secret = self.hash.extract(&salt, ikm.unwrap_or(&zeros[..self.hash.len()]));
        self.stage = stage;
    }

    /// Early Secret → Handshake Secret, with the (EC)DHE shared secret (none in psk_ke mode).
    pub fn into_handshake(&mut self, shared: Option<&[u8]>) {
        debug_assert_eq!(self.stage, Stage::Early);
        self.advance(shared, Stage::Handshake);
    }

    /// Handshake Secret → Master Secret.
    pub fn into_master(&mut self) {
        debug_assert_eq!(self.stage, Stage::Handshake);
        self.advance(None, Stage::Master);
    }

    /// `finished_key` of a base secret (a handshake traffic secret or a binder key), RFC 8446
    /// §4.4.4.
    pub fn finished_key(&self, base: &[u8]) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(vec![0u8; self.hash.len()]);
        expand_label(self.hash, self.prefix, base, b"finished", &[], &mut out);
        out
    }

    /// verify_data (or a binder): HMAC(finished_key(base), transcript_hash).
    pub fn verify_data(&self, base: &[u8], transcript_hash: &[u8]) -> hmac::Tag {
        self.hash.hmac(&self.finished_key(base), transcript_hash)
    }

    /// The PSK a ticket stands for (RFC 8446 §4.6.1) from the resumption master secret.
    pub fn ticket_psk(
        hash: SuiteHash,
        prefix: LabelPrefix,
        resumption_master: &[u8],
        nonce: &[u8],
    ) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(vec![0u8; hash.len()]);
        expand_label(hash, prefix, resumption_master, b"resumption", nonce, &mut out);
        out
    }

    /// The next application traffic secret (RFC 8446 §7.2, KeyUpdate).
    pub fn next_traffic_secret(hash: SuiteHash, prefix: LabelPrefix, secret: &[u8]) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(vec![0u8; hash.len()]);
        expand_label(hash, prefix, secret, b"traffic upd", &[], &mut out);
        out
    }
}

/// Record authentication failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadRecord;

/// One direction's record keys of one epoch, raw: the AEAD key schedule is expanded per
/// record (well under a microsecond), which keeps a session small. Keys of the 128-bit suites
/// (AES-128-GCM, both CCMs: the common and the IoT profile's) are kept inline at their own
/// length; a 256-bit suite's are boxed, so that they do not make every session carry 32 unused
/// bytes per key set.
#[derive(Clone)]
pub(crate) enum RecordKeys {
    Short(SizedKeys<16>),
    Long(Box<SizedKeys<32>>),
}

/// Keys of a suite whose key is `N` bytes long (`sn_key` is as long, RFC 9147 §4.2.3).
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct SizedKeys<const N: usize> {
    #[zeroize(skip)]
    suite: Suite13,
    key: [u8; N],
    iv: [u8; 12],
    sn_key: [u8; N],
}

impl<const N: usize> SizedKeys<N> {
    fn new(suite: Suite13, derived: &TrafficKeys) -> Self {
        let mut keys = SizedKeys { suite, key: [0; N], iv: derived.iv, sn_key: [0; N] };
        keys.key.copy_from_slice(&derived.key);
        keys.sn_key.copy_from_slice(&derived.sn_key);
        keys
    }
}

impl RecordKeys {
    /// The keys of a traffic secret.
    pub fn from_secret(suite: Suite13, prefix: LabelPrefix, secret: &[u8]) -> Self {
        let derived = TrafficKeys::derive(suite.hash(), prefix, secret, suite.key_len());
        match suite.key_len() {
            16 => RecordKeys::Short(SizedKeys::new(suite, &derived)),
            _ => RecordKeys::Long(Box::new(SizedKeys::new(suite, &derived))),
        }
    }

    /// The suite these keys are for.
    pub fn suite(&self) -> Suite13 {
        match self {
            RecordKeys::Short(k) => k.suite,
            RecordKeys::Long(k) => k.suite,
        }
    }

    fn key(&self) -> &[u8] {
        match self {
            RecordKeys::Short(k) => &k.key,
            RecordKeys::Long(k) => &k.key,
        }
    }

    fn iv(&self) -> [u8; 12] {
        match self {
            RecordKeys::Short(k) => k.iv,
            RecordKeys::Long(k) => k.iv,
        }
    }

    /// The sequence number key (`sn_key`) of these keys.
    pub fn sequence_key(&self) -> Option<crate::record::unified::SequenceKey> {
        let sn_key: &[u8] = match self {
            RecordKeys::Short(k) => &k.sn_key,
            RecordKeys::Long(k) => &k.sn_key,
        };
        crate::record::unified::SequenceKey::new(self.suite().sequence_cipher(), sn_key)
    }

    /// The per-record nonce (RFC 8446 §5.3): the IV XOR the 64-bit record sequence number.
    fn nonce(&self, seq: u64) -> [u8; 12] {
        let mut nonce = self.iv();
        for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }

    /// Encrypts `payload` in place under record number `seq` with `aad`, writing the tag into
    /// `tag` (exactly `tag_len` bytes).
    pub fn seal(&self, seq: u64, aad: &[u8], payload: &mut [u8], tag: &mut [u8]) {
        let nonce = self.nonce(seq);
        let key = self.key();
        match ring_algorithm(self.suite()) {
            Some(algorithm) => {
                // A key of the algorithm's length is always valid, and sealing fails only past
                // GCM's input limit, far above any record.
                if let Ok(unbound) = ring::aead::UnboundKey::new(algorithm, key) {
                    let key = ring::aead::LessSafeKey::new(unbound);
                    let nonce = ring::aead::Nonce::assume_unique_for_key(nonce);
                    if let Ok(t) = key.seal_in_place_separate_tag(nonce, ring::aead::Aad::from(aad), payload)
                    {
                        tag.copy_from_slice(t.as_ref());
                    }
                }
            }
            None => {
                let nonce = GenericArray::from_slice(&nonce);
                let sealed = match self.suite() {
                    Suite13::Aes128Ccm8Sha256 => Ccm8::new(GenericArray::from_slice(key))
                        .encrypt_in_place_detached(nonce, aad, payload)
                        .map(|t| tag.copy_from_slice(&t)),
                    _ => Ccm16::new(GenericArray::from_slice(key))
                        .encrypt_in_place_detached(nonce, aad, payload)
                        .map(|t| tag.copy_from_slice(&t)),
                };
                debug_assert!(sealed.is_ok());
            }
        }
    }

    /// Decrypts `sealed` (ciphertext then tag) in place; returns the plaintext's length.
    pub fn open(&self, seq: u64, aad: &[u8], sealed: &mut [u8]) -> Result<usize, BadRecord> {
        let tag_len = self.suite().tag_len();
        let len = sealed.len().checked_sub(tag_len).ok_or(BadRecord)?;
        let nonce = self.nonce(seq);
        let key = self.key();
        match ring_algorithm(self.suite()) {
            Some(algorithm) => {
                let key = ring::aead::LessSafeKey::new(
                    ring::aead::UnboundKey::new(algorithm, key).map_err(|_| BadRecord)?,
                );
                let nonce = ring::aead::Nonce::assume_unique_for_key(nonce);
                key.open_in_place(nonce, ring::aead::Aad::from(aad), sealed).map_err(|_| BadRecord)?;
            }
            None => {
                let (body, tag) = sealed.split_at_mut(len);
                let nonce = GenericArray::from_slice(&nonce);
                let opened = match self.suite() {
                    Suite13::Aes128Ccm8Sha256 => Ccm8::new(GenericArray::from_slice(key))
                        .decrypt_in_place_detached(nonce, aad, body, GenericArray::from_slice(tag)),
                    _ => Ccm16::new(GenericArray::from_slice(key)).decrypt_in_place_detached(
                        nonce,
                        aad,
                        body,
                        GenericArray::from_slice(tag),
                    ),
                };
                opened.map_err(|_| BadRecord)?;
            }
        }
        Ok(len)
    }
}

type Ccm8 = ccm::Ccm<aes::Aes128, ccm::consts::U8, ccm::consts::U12>;
type Ccm16 = ccm::Ccm<aes::Aes128, ccm::consts::U16, ccm::consts::U12>;

/// ring's AEAD for the suite, or `None` for the CCM suites (RustCrypto's `ccm`).
fn ring_algorithm(suite: Suite13) -> Option<&'static ring::aead::Algorithm> {
    match suite {
        Suite13::Aes128GcmSha256 => Some(&ring::aead::AES_128_GCM),
        Suite13::Aes256GcmSha384 => Some(&ring::aead::AES_256_GCM),
        Suite13::Chacha20Poly1305Sha256 => Some(&ring::aead::CHACHA20_POLY1305),
        Suite13::Aes128CcmSha256 | Suite13::Aes128Ccm8Sha256 => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).unwrap()
    }

    /// RFC 8448 §3 (a full 1-RTT handshake, TLS_AES_128_GCM_SHA256, x25519): every secret of
    /// the schedule from the shared secret and the two transcript hashes, with TLS 1.3's labels
    /// (DTLS 1.3 differs only in the prefix, checked by the record keys' test).
    #[test]
    fn the_key_schedule_follows_rfc_8448() {
        let h = SuiteHash::Sha256;
        let mut ks = KeySchedule::new(h, LabelPrefix::Tls13, None);
        assert_eq!(
            &ks.secret[..],
            &unhex("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a")[..]
        );
        let shared = unhex("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d");
        ks.into_handshake(Some(&shared));
        assert_eq!(
            &ks.secret[..],
            &unhex("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac")[..]
        );
        let th_sh = unhex("860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8");
        let c_hs = ks.derive(b"c hs traffic", &th_sh);
        assert_eq!(&c_hs[..], &unhex("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")[..]);
        let s_hs = ks.derive(b"s hs traffic", &th_sh);
        assert_eq!(&s_hs[..], &unhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")[..]);
        ks.into_master();
        assert_eq!(
            &ks.secret[..],
            &unhex("18df06843d13a08bf2a449844c5f8a478001bc4d4c627984d5a41da8d0402919")[..]
        );
        let th_sf = unhex("9608102a0f1ccc6db6250b7b7e417b1a000eaada3daae4777a7686c9ff83df13");
        let c_ap = ks.derive(b"c ap traffic", &th_sf);
        assert_eq!(&c_ap[..], &unhex("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5")[..]);
        let s_ap = ks.derive(b"s ap traffic", &th_sf);
        assert_eq!(&s_ap[..], &unhex("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643")[..]);
    }

    #[test]
    fn every_suite_seals_and_opens_and_refuses_a_change() {
        for suite in Suite13::ALL {
            assert_eq!(Suite13::from_id(suite.id()), Some(suite));
            assert_eq!(Suite13::from_iana_name(suite.iana_name()), Some(suite));
            let keys = RecordKeys::from_secret(suite, LabelPrefix::Dtls13, &[7; 48][..suite.hash().len()]);
            let mut buf = b"a record".to_vec();
            let n = buf.len();
            buf.resize(n + suite.tag_len(), 0);
            let (payload, tag) = buf.split_at_mut(n);
            keys.seal(5, b"header", payload, tag);
            assert_ne!(&buf[..n], b"a record");
            let mut copy = buf.clone();
            assert_eq!(keys.open(5, b"header", &mut copy), Ok(n));
            assert_eq!(&copy[..n], b"a record");
            assert!(keys.open(6, b"header", &mut buf.clone()).is_err(), "{suite}: another number");
            assert!(keys.open(5, b"Header", &mut buf.clone()).is_err(), "{suite}: another header");
            assert!(keys.open(5, b"header", &mut buf[..n - 1].to_vec()).is_err(), "{suite}: cut");
            assert!(keys.sequence_key().is_some());
        }
    }

    /// RFC 8448 §3: the server's first application record keys (key and IV from s_ap) give
    /// the nonce of record 0 as the IV itself.
    #[test]
    fn the_nonce_is_the_iv_xor_the_record_number() {
        let keys = RecordKeys::from_secret(
            Suite13::Aes128GcmSha256,
            LabelPrefix::Tls13,
            &unhex("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643"),
        );
        assert_eq!(keys.nonce(0).to_vec(), unhex("cf782b88dd83549aadf1e984"));
        assert_eq!(keys.nonce(1).to_vec(), unhex("cf782b88dd83549aadf1e985"));
    }
}
