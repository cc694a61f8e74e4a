//! Our own certified key: the chain we send and the private key that signs for it.

use p256::ecdsa::signature::rand_core::{TryCryptoRng, TryRng};
use p256::ecdsa::signature::RandomizedSigner;
use p256::pkcs8::DecodePrivateKey;
use rand_core::{CryptoRng, RngCore};
use ring::rand::SystemRandom;
use ring::signature::{self, RsaKeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivatePkcs8KeyDer;
use zeroize::Zeroize;

use crate::{CertDer, KeyAlgorithm, PeerPublicKey, PkiError, SignatureScheme};

/// A private key that signs handshakes. The PKCS#8 bytes it was read from are zeroized once parsed.
///
/// P-256 keys sign with RustCrypto's `p256` (RFC 6979 nonces hedged with the caller's RNG), so a
/// seeded run reproduces its signatures; its precomputed table of multiples of the generator
/// (built once per process) makes `k·G`, most of a signature's cost, a few times cheaper; RSA keys sign with ring, whose constant-time private-key
/// code we prefer over the alternatives (see [`SigningKey::sign`]).
pub struct SigningKey {
    inner: KeyInner,
}

enum KeyInner {
    EcdsaP256 {
        key: p256::ecdsa::SigningKey,
        /// Uncompressed SEC1 point, as the leaf's SubjectPublicKeyInfo carries it.
        public: Vec<u8>,
    },
    Rsa(RsaKeyPair),
}

impl SigningKey {
    /// Reads the first PKCS#8 `PRIVATE KEY` section of PEM text.
    pub fn from_pkcs8_pem(pem: &[u8]) -> Result<Self, PkiError> {
        let mut der = PrivatePkcs8KeyDer::from_pem_slice(pem).map_err(|e| match e {
            rustls_pki_types::pem::Error::NoItemsFound => PkiError::NoPrivateKey,
            other => PkiError::Pem(other.to_string()),
        })?;
        let key = Self::from_pkcs8_der(der.secret_pkcs8_der());
        der.zeroize();
        key
    }

    /// Reads a PKCS#8 DER private key: P-256 ECDSA or RSA (ring accepts 2048 to 4096 bits).
    ///
    /// No randomness is drawn here.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, PkiError> {
        let ec_error = match p256::ecdsa::SigningKey::from_pkcs8_der(der) {
            Ok(key) => {
                let public = key.verifying_key().to_sec1_point(false).as_bytes().to_vec();
                return Ok(SigningKey { inner: KeyInner::EcdsaP256 { key, public } });
            }
            Err(e) => e,
        };
        match RsaKeyPair::from_pkcs8(der) {
            Ok(key) => Ok(SigningKey { inner: KeyInner::Rsa(key) }),
            Err(rsa_error) => {
                Err(PkiError::UnsupportedPrivateKey(format!("as P-256: {ec_error}; as RSA: {rsa_error}")))
            }
        }
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        match self.inner {
            KeyInner::EcdsaP256 { .. } => KeyAlgorithm::EcdsaP256,
            KeyInner::Rsa(_) => KeyAlgorithm::Rsa,
        }
    }

    /// Bits of the key: 256 for P-256, the modulus length for RSA.
    pub fn bits(&self) -> usize {
        match &self.inner {
            KeyInner::EcdsaP256 { .. } => 256,
            KeyInner::Rsa(key) => key.public().modulus_len() * 8,
        }
    }

    /// The schemes this key makes, in our order of preference.
    pub fn schemes(&self) -> &'static [SignatureScheme] {
        self.algorithm().schemes()
    }

    /// The largest signature this key makes, in bytes (for sizing a handshake message).
    pub fn max_signature_len(&self) -> usize {
        match &self.inner {
            // SEQUENCE { INTEGER r, INTEGER s }, each up to 33 bytes with its sign byte.
            KeyInner::EcdsaP256 { .. } => 72,
            KeyInner::Rsa(key) => key.public().modulus_len(),
        }
    }

    /// Signs `message` (the whole signed content; hashing is part of the scheme).
    ///
    /// ECDSA derives its nonce by RFC 6979 from the key and message, hedged with bytes from `rng`:
    /// the engine passes its seeded RNG, so a seeded run signs identically every time.
    ///
    /// RSA-PSS is the exception: its salt comes from ring's own OS randomness (ring accepts no
    /// other source, and the RustCrypto `rsa` crate's private-key code is not constant-time,
    /// RUSTSEC-2023-0071), so PSS signatures differ between seeded runs in their bytes, never in
    /// their length. PKCS#1 v1.5 takes no randomness: ring's private-key operation is
    /// constant-time without blinding, and its padding is fixed.
    pub fn sign<R: RngCore + CryptoRng>(
        &self,
        scheme: SignatureScheme,
        message: &[u8],
        rng: &mut R,
    ) -> Result<Vec<u8>, PkiError> {
        if !self.algorithm().makes(scheme) {
            return Err(PkiError::SchemeNotForOurKey { scheme, key: self.algorithm() });
        }
        match &self.inner {
            KeyInner::EcdsaP256 { key, .. } => {
                let sig: p256::ecdsa::Signature = key
                    .try_sign_with_rng(&mut RngCompat(rng), message)
                    .map_err(|_| PkiError::SigningFailed)?;
                Ok(sig.to_der().as_bytes().to_vec())
            }
            KeyInner::Rsa(key) => {
                let padding: &'static dyn signature::RsaEncoding = match scheme {
                    SignatureScheme::RsaPssRsaeSha256 => &signature::RSA_PSS_SHA256,
                    _ => &signature::RSA_PKCS1_SHA256,
                };
                let mut sig = vec![0u8; key.public().modulus_len()];
                key.sign(padding, &SystemRandom::new(), message, &mut sig)
                    .map_err(|_| PkiError::SigningFailed)?;
                Ok(sig)
            }
        }
    }

    /// The public half as SubjectPublicKeyInfo bits (a point or an RSAPublicKey).
    fn public_key_bytes(&self) -> &[u8] {
        match &self.inner {
            KeyInner::EcdsaP256 { public, .. } => public,
            KeyInner::Rsa(key) => key.public().as_ref(),
        }
    }
}

/// A caller's RNG of rand_core 0.6 (the engines' seeded ChaCha) in the rand_core 0.10 traits that
/// `p256` 0.14 asks for: the same bytes, drawn in the same order.
pub struct RngCompat<'a, R>(pub &'a mut R);

impl<R: RngCore> TryRng for RngCompat<'_, R> {
    type Error = core::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.0.next_u32())
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.0.fill_bytes(dst);
        Ok(())
    }
}

impl<R: RngCore + CryptoRng> TryCryptoRng for RngCompat<'_, R> {}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        write!(f, "SigningKey({}, {} bits)", self.algorithm(), self.bits())
    }
}

/// Our certificate chain (leaf first, then intermediates, never the root) and the key it certifies.
#[derive(Debug)]
pub struct CertifiedKey {
    /// Leaf, then the intermediates towards the root: what a Certificate message carries.
    pub chain: Vec<CertDer>,
    /// The leaf's private key.
    pub key: SigningKey,
}

impl CertifiedKey {
    /// Pairs a chain with its key, checking the key is the one the leaf certifies.
    pub fn new(chain: Vec<CertDer>, key: SigningKey) -> Result<Self, PkiError> {
        let leaf = chain.first().ok_or(PkiError::NoCertificate)?;
        let public = PeerPublicKey::from_certificate(leaf)?;
        if public.algorithm() != key.algorithm() || public.key_bytes() != key.public_key_bytes() {
            return Err(PkiError::KeyMismatch);
        }
        Ok(CertifiedKey { chain, key })
    }

    /// Reads a PEM chain (leaf first) and a PKCS#8 PEM key.
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, PkiError> {
        let chain = certificates_from_pem(chain_pem)?;
        Self::new(chain, SigningKey::from_pkcs8_pem(key_pem)?)
    }

    /// The leaf certificate (`None` only if the owner emptied `chain`).
    pub fn leaf(&self) -> Option<&CertDer> {
        self.chain.first()
    }

    /// Bytes of all certificates' DER (without TLS length prefixes).
    pub fn chain_der_len(&self) -> usize {
        self.chain.iter().map(|c| c.len()).sum()
    }
}

/// Every `CERTIFICATE` section of PEM text, in order; other sections are skipped.
pub fn certificates_from_pem(pem: &[u8]) -> Result<Vec<CertDer>, PkiError> {
    let chain = CertDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PkiError::Pem(e.to_string()))?;
    if chain.is_empty() {
        return Err(PkiError::NoCertificate);
    }
    Ok(chain)
}
