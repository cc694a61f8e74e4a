//! Our own certified key: the chain we send and the private key that signs for it.

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivatePkcs8KeyDer;
use zeroize::Zeroize;

use crate::{CertDer, KeyAlgorithm, PeerPublicKey, PkiError, SignatureScheme};

/// A private key that signs handshakes. The key material is held by ring; the PKCS#8 bytes it was
/// read from are zeroized once ring has parsed them.
pub struct SigningKey {
    inner: KeyInner,
}

enum KeyInner {
    EcdsaP256(EcdsaKeyPair),
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
    /// ring checks the key pair's consistency with its own system RNG; no randomness is drawn here
    /// that a signature depends on.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, PkiError> {
        let ec =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, der, &SystemRandom::new());
        let ec_error = match ec {
            Ok(key) => return Ok(SigningKey { inner: KeyInner::EcdsaP256(key) }),
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
            KeyInner::EcdsaP256(_) => KeyAlgorithm::EcdsaP256,
            KeyInner::Rsa(_) => KeyAlgorithm::Rsa,
        }
    }

    /// Bits of the key: 256 for P-256, the modulus length for RSA.
    pub fn bits(&self) -> usize {
        match &self.inner {
            KeyInner::EcdsaP256(_) => 256,
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
            KeyInner::EcdsaP256(_) => 72,
            KeyInner::Rsa(key) => key.public().modulus_len(),
        }
    }

    /// Signs `message` (the whole signed content; hashing is part of the scheme).
    ///
    /// ECDSA and PSS draw their nonce or salt from `rng`. ring only takes its own
    /// [`ring::rand::SystemRandom`] (its `SecureRandom` is sealed), so signatures are not
    /// reproducible from a seed even when everything else in a run is; PKCS#1 v1.5 is deterministic.
    pub fn sign(
        &self,
        scheme: SignatureScheme,
        message: &[u8],
        rng: &dyn SecureRandom,
    ) -> Result<Vec<u8>, PkiError> {
        if !self.algorithm().makes(scheme) {
            return Err(PkiError::SchemeNotForOurKey { scheme, key: self.algorithm() });
        }
        match &self.inner {
            KeyInner::EcdsaP256(key) => {
                key.sign(rng, message).map(|sig| sig.as_ref().to_vec()).map_err(|_| PkiError::SigningFailed)
            }
            KeyInner::Rsa(key) => {
                let padding: &'static dyn signature::RsaEncoding = match scheme {
                    SignatureScheme::RsaPssRsaeSha256 => &signature::RSA_PSS_SHA256,
                    _ => &signature::RSA_PKCS1_SHA256,
                };
                let mut sig = vec![0u8; key.public().modulus_len()];
                key.sign(padding, rng, message, &mut sig).map_err(|_| PkiError::SigningFailed)?;
                Ok(sig)
            }
        }
    }

    /// The public half as SubjectPublicKeyInfo bits (a point or an RSAPublicKey).
    fn public_key_bytes(&self) -> &[u8] {
        match &self.inner {
            KeyInner::EcdsaP256(key) => key.public_key().as_ref(),
            KeyInner::Rsa(key) => key.public().as_ref(),
        }
    }
}

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
