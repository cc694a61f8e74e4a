//! One socket, several protocols: RFC 7983 (as updated by RFC 9443) tells them apart by the
//! first byte of the datagram.
//!
//! | first byte | protocol                                   |
//! |------------|--------------------------------------------|
//! | 0–3        | STUN                                       |
//! | 16–19      | ZRTP                                       |
//! | 20–63      | DTLS (1.2 content types 20–25; 1.3 unified headers 32–63) |
//! | 64–79      | TURN channel data                          |
//! | 128–191    | RTP / RTCP                                 |
//!
//! A data-channel peer uses only STUN and DTLS; everything else is dropped.

/// The protocol a datagram belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// A STUN message (ICE connectivity checks and consent).
    Stun,
    /// A DTLS record (either version).
    Dtls,
    /// ZRTP, TURN channel data, RTP or RTCP: not used by data channels.
    Other,
    /// An empty datagram or a first byte no protocol of RFC 7983 claims.
    Unknown,
}

/// Classifies a datagram by its first byte (RFC 7983 §7, RFC 9443 §3).
pub fn classify(datagram: &[u8]) -> Protocol {
    match datagram.first() {
        Some(0..=3) => Protocol::Stun,
        Some(20..=63) => Protocol::Dtls,
        Some(16..=19 | 64..=79 | 128..=191) => Protocol::Other,
        _ => Protocol::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_first_byte_has_the_class_the_rfc_gives_it() {
        for b in 0..=255u8 {
            let want = match b {
                0..=3 => Protocol::Stun,
                20..=63 => Protocol::Dtls,
                16..=19 | 64..=79 | 128..=191 => Protocol::Other,
                _ => Protocol::Unknown,
            };
            assert_eq!(classify(&[b, 0, 0]), want, "first byte {b}");
        }
        assert_eq!(classify(&[]), Protocol::Unknown);
    }

    #[test]
    fn both_dtls_versions_and_a_binding_request_are_told_apart() {
        // A 1.2 handshake record, a 1.3 unified header (0b001CSLEE), a STUN Binding request.
        assert_eq!(classify(&[22, 0xfe, 0xfd]), Protocol::Dtls);
        assert_eq!(classify(&[0b0010_1100, 0, 1]), Protocol::Dtls);
        assert_eq!(classify(&[0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42]), Protocol::Stun);
    }
}
