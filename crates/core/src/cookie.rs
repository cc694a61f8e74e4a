//! The keyed MAC behind every stateless cookie in fastshake.
//!
//! A cookie is one key-epoch byte followed by a 120-bit tag (SipHash-2-4-128, truncated) over
//! length-framed inputs (the client's address, the fields of its hello, ...). Sixteen bytes in all,
//! so the SCTP ERROR that carries an ALT-COOKIE is no larger than the smallest INIT announcing it
//! (36 bytes each): answering costs an attacker no amplification. 120 bits leave forgery out of
//! reach for a key's lifetime. SipHash is a keyed PRF built for
//! short inputs: a server under an INIT or ClientHello flood answers each one with a few hundred
//! cycles of hashing and no state. Two keys live at once, the current and the previous one, so a
//! rotation never breaks a handshake that got its cookie just before it.

use siphasher::sip128::{Hasher128, SipHasher24};
use std::hash::Hasher;
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

/// Bytes of the MAC tag inside a cookie.
pub const COOKIE_TAG_LEN: usize = 15;
/// Bytes of the shortest tag a cookie may carry, when it gives room to other fields (a dated
/// DTLS cookie's issue time): 96 bits, still out of reach of forgery for a key's lifetime.
pub const MIN_COOKIE_TAG_LEN: usize = 12;
/// Bytes of a whole cookie: the key epoch and the tag.
pub const COOKIE_LEN: usize = 1 + COOKIE_TAG_LEN;

#[derive(Clone, Zeroize)]
#[zeroize(drop)]
struct EpochKey {
    epoch: u8,
    key: [u8; 16],
}

impl EpochKey {
    fn tag(&self, inputs: &[&[u8]]) -> [u8; COOKIE_TAG_LEN] {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write_u8(self.epoch);
        for part in inputs {
            // Length framing keeps ("ab","c") and ("a","bc") apart.
            h.write_u64(part.len() as u64);
            h.write(part);
        }
        let full = h.finish128().as_bytes();
        let mut tag = [0u8; COOKIE_TAG_LEN];
        tag.copy_from_slice(&full[..COOKIE_TAG_LEN]);
        tag
    }
}

/// Signs and verifies stateless cookies under a current and a previous key.
#[derive(Clone)]
pub struct CookieMac {
    current: EpochKey,
    previous: Option<EpochKey>,
}

impl std::fmt::Debug for CookieMac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieMac").field("epoch", &self.current.epoch).finish_non_exhaustive()
    }
}

impl CookieMac {
    /// A MAC whose first key is `key`, at epoch 0.
    pub fn new(key: [u8; 16]) -> Self {
        CookieMac { current: EpochKey { epoch: 0, key }, previous: None }
    }

    /// Makes `key` current; the current key becomes the previous one and the older one is
    /// forgotten, so cookies signed two rotations ago no longer verify.
    pub fn rotate(&mut self, key: [u8; 16]) {
        let next = EpochKey { epoch: self.current.epoch.wrapping_add(1), key };
        self.previous = Some(std::mem::replace(&mut self.current, next));
    }

    /// The epoch of the current key.
    pub fn epoch(&self) -> u8 {
        self.current.epoch
    }

    /// A cookie over `inputs` under the current key.
    pub fn sign(&self, inputs: &[&[u8]]) -> [u8; COOKIE_LEN] {
        let mut cookie = [0u8; COOKIE_LEN];
        self.sign_into(inputs, &mut cookie);
        cookie
    }

    /// Writes a cookie over `inputs` under the current key into `out`: the key epoch, then the
    /// tag truncated to the rest of `out` ([`MIN_COOKIE_TAG_LEN`] to [`COOKIE_TAG_LEN`] bytes).
    ///
    /// # Panics
    /// If `out` does not have room for such a tag: a caller's fixed layout, never input.
    pub fn sign_into(&self, inputs: &[&[u8]], out: &mut [u8]) {
        let tag_len = out.len() - 1;
        assert!((MIN_COOKIE_TAG_LEN..=COOKIE_TAG_LEN).contains(&tag_len), "cookie tag of {tag_len} bytes");
        out[0] = self.current.epoch;
        out[1..].copy_from_slice(&self.current.tag(inputs)[..tag_len]);
    }

    /// Whether `cookie` was signed over `inputs` by the current or the previous key.
    /// The tag comparison is constant-time.
    pub fn verify(&self, cookie: &[u8], inputs: &[&[u8]]) -> bool {
        cookie.len() == COOKIE_LEN && self.verify_truncated(cookie, inputs)
    }

    /// [`Self::verify`] for a cookie written by [`Self::sign_into`], whose tag may be shorter.
    pub fn verify_truncated(&self, cookie: &[u8], inputs: &[&[u8]]) -> bool {
        if !(1 + MIN_COOKIE_TAG_LEN..=COOKIE_LEN).contains(&cookie.len()) {
            return false;
        }
        let key = if cookie[0] == self.current.epoch {
            &self.current
        } else {
            match &self.previous {
                Some(prev) if prev.epoch == cookie[0] => prev,
                _ => return false,
            }
        };
        key.tag(inputs)[..cookie.len() - 1].ct_eq(&cookie[1..]).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_own_cookie_and_rejects_others() {
        let mac = CookieMac::new([7; 16]);
        let c = mac.sign(&[b"10.0.0.1:5684", b"hello"]);
        assert_eq!(c.len(), COOKIE_LEN);
        assert!(mac.verify(&c, &[b"10.0.0.1:5684", b"hello"]));
        assert!(!mac.verify(&c, &[b"10.0.0.2:5684", b"hello"]));
        assert!(!mac.verify(&c, &[b"10.0.0.1:5684hello"]), "framing must separate inputs");
        let mut bad = c;
        bad[5] ^= 1;
        assert!(!mac.verify(&bad, &[b"10.0.0.1:5684", b"hello"]));
        assert!(!mac.verify(&c[..COOKIE_LEN - 1], &[b"10.0.0.1:5684", b"hello"]));
        assert!(!CookieMac::new([8; 16]).verify(&c, &[b"10.0.0.1:5684", b"hello"]));
    }

    #[test]
    fn a_truncated_tag_verifies_only_at_its_length() {
        let mac = CookieMac::new([7; 16]);
        let mut short = [0u8; 1 + MIN_COOKIE_TAG_LEN];
        mac.sign_into(&[b"x"], &mut short);
        assert!(mac.verify_truncated(&short, &[b"x"]));
        assert!(!mac.verify_truncated(&short, &[b"y"]));
        assert!(!mac.verify(&short, &[b"x"]), "a full cookie is 16 bytes");
        assert!(!mac.verify_truncated(&short[..short.len() - 1], &[b"x"]), "below the shortest tag");
        assert_eq!(&mac.sign(&[b"x"])[..short.len()], &short[..], "the same tag, cut");
    }

    #[test]
    fn rotation_keeps_previous_key_only() {
        let mut mac = CookieMac::new([1; 16]);
        let old = mac.sign(&[b"x"]);
        mac.rotate([2; 16]);
        assert!(mac.verify(&old, &[b"x"]), "previous key still verifies");
        let mid = mac.sign(&[b"x"]);
        mac.rotate([3; 16]);
        assert!(!mac.verify(&old, &[b"x"]), "two rotations ago no longer verifies");
        assert!(mac.verify(&mid, &[b"x"]));
    }
}
