//! Alert protocol (RFC 5246 §7.2, RFC 4279 §2, RFC 5746 §3.5).

use std::fmt;

/// Severity of an alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertLevel {
    /// The session goes on.
    Warning,
    /// The session ends.
    Fatal,
}

impl AlertLevel {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            AlertLevel::Warning => 1,
            AlertLevel::Fatal => 2,
        }
    }
    pub(crate) fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(AlertLevel::Warning),
            2 => Some(AlertLevel::Fatal),
            _ => None,
        }
    }
}

macro_rules! alert_descriptions {
    ($($variant:ident = $code:literal, $name:literal;)*) => {
        /// What an alert says, with the names of RFC 5246 (and RFC 4279 for `unknown_psk_identity`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum AlertDescription {
            $(
                #[doc = $name]
                $variant,
            )*
            /// A code this implementation does not name.
            Unknown(u8),
        }

        impl AlertDescription {
            /// The wire code.
            pub fn code(self) -> u8 {
                match self {
                    $(AlertDescription::$variant => $code,)*
                    AlertDescription::Unknown(c) => c,
                }
            }

            /// The description for a wire code.
            pub fn from_code(code: u8) -> Self {
                match code {
                    $($code => AlertDescription::$variant,)*
                    other => AlertDescription::Unknown(other),
                }
            }

            /// The RFC name, e.g. `bad_record_mac`.
            pub fn name(self) -> &'static str {
                match self {
                    $(AlertDescription::$variant => $name,)*
                    AlertDescription::Unknown(_) => "unknown_alert",
                }
            }
        }
    };
}

alert_descriptions! {
    CloseNotify = 0, "close_notify";
    UnexpectedMessage = 10, "unexpected_message";
    BadRecordMac = 20, "bad_record_mac";
    RecordOverflow = 22, "record_overflow";
    HandshakeFailure = 40, "handshake_failure";
    BadCertificate = 42, "bad_certificate";
    UnsupportedCertificate = 43, "unsupported_certificate";
    CertificateRevoked = 44, "certificate_revoked";
    CertificateExpired = 45, "certificate_expired";
    CertificateUnknown = 46, "certificate_unknown";
    IllegalParameter = 47, "illegal_parameter";
    UnknownCa = 48, "unknown_ca";
    AccessDenied = 49, "access_denied";
    DecodeError = 50, "decode_error";
    DecryptError = 51, "decrypt_error";
    TooManyCidsRequested = 52, "too_many_cids_requested";
    ProtocolVersion = 70, "protocol_version";
    InsufficientSecurity = 71, "insufficient_security";
    InternalError = 80, "internal_error";
    UserCanceled = 90, "user_canceled";
    NoRenegotiation = 100, "no_renegotiation";
    MissingExtension = 109, "missing_extension";
    UnsupportedExtension = 110, "unsupported_extension";
    UnknownPskIdentity = 115, "unknown_psk_identity";
    CertificateRequired = 116, "certificate_required";
}

impl fmt::Display for AlertDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlertDescription::Unknown(c) => write!(f, "unknown_alert({c})"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_display_rfc_names() {
        for code in 0..=255u8 {
            assert_eq!(AlertDescription::from_code(code).code(), code);
        }
        assert_eq!(AlertDescription::BadRecordMac.to_string(), "bad_record_mac");
        assert_eq!(AlertDescription::from_code(115), AlertDescription::UnknownPskIdentity);
        assert_eq!(AlertDescription::Unknown(7).to_string(), "unknown_alert(7)");
    }
}
