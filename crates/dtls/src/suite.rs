//! Cipher suites and their parameters.
//!
//! Each suite maps to a [`SuiteParams`] row: its key exchange, record protection and PRF hash.
//! Certificate suites add rows (and [`KeyExchange`] variants) without touching the handshake.

use crate::crypto::tls13::Suite13;

/// A cipher suite this engine implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CipherSuite {
    /// `TLS_PSK_WITH_AES_128_CCM_8` (0xC0A8, RFC 6655), the RFC 7925 IoT profile.
    PskWithAes128Ccm8,
    /// `TLS_PSK_WITH_AES_128_GCM_SHA256` (0x00A8, RFC 5487).
    PskWithAes128GcmSha256,
    /// `TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8` (0xC0AE, RFC 7251), the RFC 7925 certificate profile.
    EcdheEcdsaWithAes128Ccm8,
    /// `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256` (0xC02B, RFC 5289).
    EcdheEcdsaWithAes128GcmSha256,
    /// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256` (0xC02F, RFC 5289).
    EcdheRsaWithAes128GcmSha256,
    /// `TLS_AES_128_GCM_SHA256` (0x1301), DTLS 1.3.
    Aes128GcmSha256,
    /// `TLS_AES_256_GCM_SHA384` (0x1302), DTLS 1.3.
    Aes256GcmSha384,
    /// `TLS_CHACHA20_POLY1305_SHA256` (0x1303), DTLS 1.3.
    Chacha20Poly1305Sha256,
    /// `TLS_AES_128_CCM_SHA256` (0x1304), DTLS 1.3.
    Aes128CcmSha256,
    /// `TLS_AES_128_CCM_8_SHA256` (0x1305), DTLS 1.3 (RFC 7925's profile carried over).
    Aes128Ccm8Sha256,
}

/// How the premaster secret is agreed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyExchange {
    /// Plain pre-shared key (RFC 4279 §2).
    Psk,
    /// Ephemeral ECDH signed with an ECDSA certificate key (RFC 8422).
    EcdheEcdsa,
    /// Ephemeral ECDH signed with an RSA certificate key (RFC 8422).
    EcdheRsa,
    /// DTLS 1.3: the suite names only the AEAD and hash; the key exchange is negotiated by
    /// extensions (RFC 8446 §4.1.1).
    Tls13,
}

/// How records are protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordCipher {
    /// AES-128-GCM, 16-byte tag.
    Aes128Gcm,
    /// AES-128-CCM with an 8-byte tag.
    Aes128Ccm8,
}

impl RecordCipher {
    pub(crate) const KEY_LEN: usize = 16;
    pub(crate) const FIXED_IV_LEN: usize = 4;
    pub(crate) const EXPLICIT_NONCE_LEN: usize = 8;

    pub(crate) fn tag_len(self) -> usize {
        match self {
            RecordCipher::Aes128Gcm => 16,
            RecordCipher::Aes128Ccm8 => 8,
        }
    }

    /// Bytes a protected record adds to its plaintext, excluding the record header.
    pub(crate) fn overhead(self) -> usize {
        Self::EXPLICIT_NONCE_LEN + self.tag_len()
    }
}

/// One row of the suite table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SuiteParams {
    pub suite: CipherSuite,
    pub id: u16,
    pub iana_name: &'static str,
    pub key_exchange: KeyExchange,
    pub cipher: RecordCipher,
}

const SUITES: &[SuiteParams] = &[
    SuiteParams {
        suite: CipherSuite::PskWithAes128Ccm8,
        id: 0xC0A8,
        iana_name: "TLS_PSK_WITH_AES_128_CCM_8",
        key_exchange: KeyExchange::Psk,
        cipher: RecordCipher::Aes128Ccm8,
    },
    SuiteParams {
        suite: CipherSuite::PskWithAes128GcmSha256,
        id: 0x00A8,
        iana_name: "TLS_PSK_WITH_AES_128_GCM_SHA256",
        key_exchange: KeyExchange::Psk,
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::EcdheEcdsaWithAes128Ccm8,
        id: 0xC0AE,
        iana_name: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8",
        key_exchange: KeyExchange::EcdheEcdsa,
        cipher: RecordCipher::Aes128Ccm8,
    },
    SuiteParams {
        suite: CipherSuite::EcdheEcdsaWithAes128GcmSha256,
        id: 0xC02B,
        iana_name: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        key_exchange: KeyExchange::EcdheEcdsa,
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::EcdheRsaWithAes128GcmSha256,
        id: 0xC02F,
        iana_name: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        key_exchange: KeyExchange::EcdheRsa,
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::Aes128GcmSha256,
        id: 0x1301,
        iana_name: "TLS_AES_128_GCM_SHA256",
        key_exchange: KeyExchange::Tls13,
        // Not a DTLS 1.2 record cipher: 1.3 records are protected by `crypto::tls13`.
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::Aes256GcmSha384,
        id: 0x1302,
        iana_name: "TLS_AES_256_GCM_SHA384",
        key_exchange: KeyExchange::Tls13,
        // Not a DTLS 1.2 record cipher: 1.3 records are protected by `crypto::tls13`.
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::Chacha20Poly1305Sha256,
        id: 0x1303,
        iana_name: "TLS_CHACHA20_POLY1305_SHA256",
        key_exchange: KeyExchange::Tls13,
        // Not a DTLS 1.2 record cipher: 1.3 records are protected by `crypto::tls13`.
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::Aes128CcmSha256,
        id: 0x1304,
        iana_name: "TLS_AES_128_CCM_SHA256",
        key_exchange: KeyExchange::Tls13,
        // Not a DTLS 1.2 record cipher: 1.3 records are protected by `crypto::tls13`.
        cipher: RecordCipher::Aes128Gcm,
    },
    SuiteParams {
        suite: CipherSuite::Aes128Ccm8Sha256,
        id: 0x1305,
        iana_name: "TLS_AES_128_CCM_8_SHA256",
        key_exchange: KeyExchange::Tls13,
        // Not a DTLS 1.2 record cipher: 1.3 records are protected by `crypto::tls13`.
        cipher: RecordCipher::Aes128Gcm,
    },
];

impl CipherSuite {
    /// Every DTLS 1.2 suite, in the default order of preference.
    pub const ALL: &'static [CipherSuite] = &[
        CipherSuite::PskWithAes128Ccm8,
        CipherSuite::PskWithAes128GcmSha256,
        CipherSuite::EcdheEcdsaWithAes128Ccm8,
        CipherSuite::EcdheEcdsaWithAes128GcmSha256,
        CipherSuite::EcdheRsaWithAes128GcmSha256,
    ];

    /// Every DTLS 1.3 suite, in the default order of preference.
    pub const TLS13: &'static [CipherSuite] = &[
        CipherSuite::Aes128GcmSha256,
        CipherSuite::Aes256GcmSha384,
        CipherSuite::Chacha20Poly1305Sha256,
        CipherSuite::Aes128CcmSha256,
        CipherSuite::Aes128Ccm8Sha256,
    ];

    /// Whether this is a DTLS 1.3 suite.
    pub fn is_tls13(self) -> bool {
        self.params().key_exchange == KeyExchange::Tls13
    }

    pub(crate) fn params(self) -> &'static SuiteParams {
        // The table has a row for every variant; the fallback is never reached.
        SUITES.iter().find(|p| p.suite == self).unwrap_or(&SUITES[0])
    }

    /// The IANA code point.
    pub fn id(self) -> u16 {
        self.params().id
    }

    /// The suite with IANA code point `id`, if implemented.
    pub fn from_id(id: u16) -> Option<Self> {
        SUITES.iter().find(|p| p.id == id).map(|p| p.suite)
    }

    /// The IANA name, e.g. `TLS_PSK_WITH_AES_128_CCM_8`.
    pub fn iana_name(self) -> &'static str {
        self.params().iana_name
    }

    /// The suite with this IANA name (case-insensitive), if implemented.
    pub fn from_iana_name(name: &str) -> Option<Self> {
        SUITES.iter().find(|p| p.iana_name.eq_ignore_ascii_case(name.trim())).map(|p| p.suite)
    }

    /// Whether the suite authenticates with a pre-shared key.
    pub fn is_psk(self) -> bool {
        self.params().key_exchange == KeyExchange::Psk
    }
}

impl From<Suite13> for CipherSuite {
    fn from(s: Suite13) -> Self {
        match s {
            Suite13::Aes128GcmSha256 => CipherSuite::Aes128GcmSha256,
            Suite13::Aes256GcmSha384 => CipherSuite::Aes256GcmSha384,
            Suite13::Chacha20Poly1305Sha256 => CipherSuite::Chacha20Poly1305Sha256,
            Suite13::Aes128CcmSha256 => CipherSuite::Aes128CcmSha256,
            Suite13::Aes128Ccm8Sha256 => CipherSuite::Aes128Ccm8Sha256,
        }
    }
}

impl CipherSuite {
    /// The DTLS 1.3 suite this is, if it is one.
    pub fn tls13(self) -> Option<Suite13> {
        Suite13::from_id(self.id())
    }
}

impl std::fmt::Display for CipherSuite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.iana_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for &s in CipherSuite::ALL.iter().chain(CipherSuite::TLS13) {
            assert_eq!(CipherSuite::from_id(s.id()), Some(s));
            assert_eq!(CipherSuite::from_iana_name(s.iana_name()), Some(s));
        }
        assert_eq!(CipherSuite::PskWithAes128Ccm8.id(), 0xC0A8);
        assert_eq!(CipherSuite::PskWithAes128GcmSha256.id(), 0x00A8);
        assert_eq!(
            CipherSuite::from_iana_name("tls_psk_with_aes_128_gcm_sha256"),
            Some(CipherSuite::PskWithAes128GcmSha256)
        );
        assert_eq!(CipherSuite::from_iana_name("TLS_NULL"), None);
    }
}
