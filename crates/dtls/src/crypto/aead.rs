//! AEAD record protection for DTLS 1.2 (RFC 5246 §6.2.3.3, RFC 6347 §4.1.2.1, RFC 5288, RFC 6655).
//!
//! Only raw keys are stored per session (40 bytes for both directions); the AES key schedule is
//! expanded per record, which keeps an established session small and costs well under a
//! microsecond.

use crate::suite::RecordCipher;
use ccm::aead::generic_array::GenericArray;
use ccm::aead::{AeadInPlace, KeyInit};
use ccm::consts::{U12, U8};
use ring::aead as ring_aead;
use zeroize::Zeroize;

type Aes128Ccm8 = ccm::Ccm<aes::Aes128, U8, U12>;

/// The write key and salt of one direction.
#[derive(Clone, Zeroize)]
#[zeroize(drop)]
pub(crate) struct DirectionKeys {
    pub key: [u8; RecordCipher::KEY_LEN],
    pub salt: [u8; RecordCipher::FIXED_IV_LEN],
}

/// Both directions' keys of one epoch, from the key block (RFC 5246 §6.3).
#[derive(Clone)]
pub(crate) struct TrafficKeys {
    pub client_write: DirectionKeys,
    pub server_write: DirectionKeys,
}

impl TrafficKeys {
    pub fn from_key_block(block: &[u8; 40]) -> Self {
        let mut ck = [0u8; 16];
        let mut sk = [0u8; 16];
        let mut ci = [0u8; 4];
        let mut si = [0u8; 4];
        ck.copy_from_slice(&block[0..16]);
        sk.copy_from_slice(&block[16..32]);
        ci.copy_from_slice(&block[32..36]);
        si.copy_from_slice(&block[36..40]);
        TrafficKeys {
            client_write: DirectionKeys { key: ck, salt: ci },
            server_write: DirectionKeys { key: sk, salt: si },
        }
    }
}

/// Record authentication failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadRecordMac;

/// Longest additional data: the RFC 9146 form with a 255-byte CID.
const MAX_AAD: usize = 8 + 3 + 2 + 8 + 255 + 2;

/// The nonce and the additional data of one record; `cid` is the record's Connection ID
/// (empty: a record without one).
// The record header fields are the AEAD inputs themselves; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn nonce_and_aad(
    keys: &DirectionKeys,
    explicit_nonce: [u8; 8],
    epoch_seq: u64,
    content_type: u8,
    version: u16,
    plaintext_len: usize,
    cid: &[u8],
    aad: &mut [u8; MAX_AAD],
) -> ([u8; 12], usize) {
    // Nonce: the 4-byte salt from the key block, then the explicit nonce carried in the record
    // (we send the record's epoch and sequence number, unique per key by construction; a peer
    // may send anything unique, so the receiver uses what is on the wire).
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(&keys.salt);
    nonce[4..].copy_from_slice(&explicit_nonce);
    if cid.is_empty() {
        // Additional data: epoch+seq, type, version, plaintext length (RFC 6347 §4.1.2.1).
        aad[..8].copy_from_slice(&epoch_seq.to_be_bytes());
        aad[8] = content_type;
        aad[9..11].copy_from_slice(&version.to_be_bytes());
        aad[11..13].copy_from_slice(&(plaintext_len as u16).to_be_bytes());
        return (nonce, 13);
    }
    // RFC 9146 §5.3: seq_num_placeholder (8 x 0xff), tls12_cid, cid_length, tls12_cid, version,
    // epoch, sequence_number, cid, length_of_DTLSInnerPlaintext (the plaintext here).
    let cid = &cid[..cid.len().min(255)];
    aad[..8].fill(0xff);
    aad[8] = crate::mobility::CONTENT_TLS12_CID;
    aad[9] = cid.len() as u8;
    aad[10] = crate::mobility::CONTENT_TLS12_CID;
    aad[11..13].copy_from_slice(&version.to_be_bytes());
    aad[13..21].copy_from_slice(&epoch_seq.to_be_bytes());
    aad[21..21 + cid.len()].copy_from_slice(cid);
    let end = 21 + cid.len();
    aad[end..end + 2].copy_from_slice(&(plaintext_len as u16).to_be_bytes());
    (nonce, end + 2)
}

/// Encrypts `payload` in place and writes the tag into `tag` (exactly `cipher.tag_len()` bytes).
// The record header fields are the AEAD inputs themselves; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn seal_in_place(
    cipher: RecordCipher,
    keys: &DirectionKeys,
    epoch_seq: u64,
    content_type: u8,
    version: u16,
    cid: &[u8],
    payload: &mut [u8],
    tag: &mut [u8],
) {
    let mut aad_buf = [0u8; MAX_AAD];
    let (nonce, aad_len) = nonce_and_aad(
        keys,
        epoch_seq.to_be_bytes(),
        epoch_seq,
        content_type,
        version,
        payload.len(),
        cid,
        &mut aad_buf,
    );
    let aad = &aad_buf[..aad_len];
    match cipher {
        RecordCipher::Aes128Gcm => {
            // A 16-byte key always makes a valid AES-128 key, and sealing fails only on
            // inputs larger than GCM's limit, far above any record.
            if let Ok(unbound) = ring_aead::UnboundKey::new(&ring_aead::AES_128_GCM, &keys.key) {
                let key = ring_aead::LessSafeKey::new(unbound);
                let nonce = ring_aead::Nonce::assume_unique_for_key(nonce);
                if let Ok(t) = key.seal_in_place_separate_tag(nonce, ring_aead::Aad::from(aad), payload) {
                    tag.copy_from_slice(t.as_ref());
                }
            }
        }
        RecordCipher::Aes128Ccm8 => {
            let c = Aes128Ccm8::new(GenericArray::from_slice(&keys.key));
            if let Ok(t) = c.encrypt_in_place_detached(GenericArray::from_slice(&nonce), aad, payload) {
                tag.copy_from_slice(&t);
            }
        }
    }
}

/// Decrypts `ciphertext_and_tag` in place; returns the plaintext length (a prefix of the buffer).
// The record header fields are the AEAD inputs themselves; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_in_place(
    cipher: RecordCipher,
    keys: &DirectionKeys,
    explicit_nonce: [u8; 8],
    epoch_seq: u64,
    content_type: u8,
    version: u16,
    cid: &[u8],
    ciphertext_and_tag: &mut [u8],
) -> Result<usize, BadRecordMac> {
    let tag_len = cipher.tag_len();
    let plaintext_len = ciphertext_and_tag.len().checked_sub(tag_len).ok_or(BadRecordMac)?;
    let mut aad_buf = [0u8; MAX_AAD];
    let (nonce, aad_len) = nonce_and_aad(
        keys,
        explicit_nonce,
        epoch_seq,
        content_type,
        version,
        plaintext_len,
        cid,
        &mut aad_buf,
    );
    let aad = &aad_buf[..aad_len];
    match cipher {
        RecordCipher::Aes128Gcm => {
            let unbound =
                ring_aead::UnboundKey::new(&ring_aead::AES_128_GCM, &keys.key).map_err(|_| BadRecordMac)?;
            let key = ring_aead::LessSafeKey::new(unbound);
            let nonce = ring_aead::Nonce::assume_unique_for_key(nonce);
            let plain = key
                .open_in_place(nonce, ring_aead::Aad::from(aad), ciphertext_and_tag)
                .map_err(|_| BadRecordMac)?;
            Ok(plain.len())
        }
        RecordCipher::Aes128Ccm8 => {
            let c = Aes128Ccm8::new(GenericArray::from_slice(&keys.key));
            let (body, tag) = ciphertext_and_tag.split_at_mut(plaintext_len);
            c.decrypt_in_place_detached(
                GenericArray::from_slice(&nonce),
                aad,
                body,
                GenericArray::from_slice(tag),
            )
            .map_err(|_| BadRecordMac)?;
            Ok(plaintext_len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The AEAD primitives under the record layer, checked against published vectors. The
    // record layer builds nonce and additional data itself, so the primitives are called
    // directly here with the vectors' nonce and AAD.

    /// AES-128-GCM, Test Case 4 of McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)"
    /// (the vectors NIST's GCM validation reuses): 60-byte plaintext with 20 bytes of AAD.
    #[test]
    fn aes128_gcm_known_answer() {
        let key = hex::decode("feffe9928665731c6d6a8f9467308308").unwrap();
        let iv: [u8; 12] = hex::decode("cafebabefacedbaddecaf888").unwrap().try_into().unwrap();
        let aad = hex::decode("feedfacedeadbeeffeedfacedeadbeefabaddad2").unwrap();
        let mut data = hex::decode(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
             1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        )
        .unwrap();
        let k =
            ring_aead::LessSafeKey::new(ring_aead::UnboundKey::new(&ring_aead::AES_128_GCM, &key).unwrap());
        let tag = k
            .seal_in_place_separate_tag(
                ring_aead::Nonce::assume_unique_for_key(iv),
                ring_aead::Aad::from(&aad),
                &mut data,
            )
            .unwrap();
        assert_eq!(
            hex::encode(&data),
            "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091"
        );
        assert_eq!(hex::encode(tag.as_ref()), "5bc94fbc3221a5db94fae95ae7121a47");
    }

    /// AES-128-CCM with an 8-byte tag and a 12-byte nonce: NIST SP 800-38C Appendix C, Example 3
    /// (Tlen = 64, Nlen = 96), the exact parameters of TLS_PSK_WITH_AES_128_CCM_8 (RFC 6655).
    #[test]
    fn aes128_ccm8_known_answer() {
        let key = hex::decode("404142434445464748494a4b4c4d4e4f").unwrap();
        let nonce = hex::decode("101112131415161718191a1b").unwrap();
        let aad = hex::decode("000102030405060708090a0b0c0d0e0f10111213").unwrap();
        let mut data = hex::decode("202122232425262728292a2b2c2d2e2f3031323334353637").unwrap();
        let c = Aes128Ccm8::new(GenericArray::from_slice(&key));
        let tag = c.encrypt_in_place_detached(GenericArray::from_slice(&nonce), &aad, &mut data).unwrap();
        assert_eq!(hex::encode(&data), "e3b201a9f5b71a7a9b1ceaeccd97e70b6176aad9a4428aa5");
        assert_eq!(hex::encode(tag), "484392fbc1b09951");
    }

    #[test]
    fn record_seal_open_round_trip_and_tamper() {
        let keys = DirectionKeys { key: [3; 16], salt: [9; 4] };
        for cipher in [RecordCipher::Aes128Gcm, RecordCipher::Aes128Ccm8] {
            let mut buf = b"hello records".to_vec();
            let n = buf.len();
            buf.resize(n + cipher.tag_len(), 0);
            let (p, t) = buf.split_at_mut(n);
            seal_in_place(cipher, &keys, (1 << 48) | 7, 23, 0xfefd, &[], p, t);
            // The explicit nonce is the epoch and sequence number, as the record layer sends it.
            let open = |epoch_seq: u64, record: &mut [u8]| {
                open_in_place(cipher, &keys, epoch_seq.to_be_bytes(), epoch_seq, 23, 0xfefd, &[], record)
            };
            let mut copy = buf.clone();
            assert_eq!(open((1 << 48) | 7, &mut copy), Ok(n));
            assert_eq!(&copy[..n], b"hello records");
            let mut copy = buf.clone();
            assert!(open((1 << 48) | 8, &mut copy).is_err());
            let mut copy = buf.clone();
            copy[0] ^= 1;
            assert!(open((1 << 48) | 7, &mut copy).is_err());
            assert!(open_in_place(cipher, &keys, [0; 8], 0, 23, 0xfefd, &[], &mut [0u8; 3]).is_err());
        }
    }
}
