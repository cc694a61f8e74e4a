//! Application records of the request/echo exchange, numbered so that a copy the application
//! resent is told apart from one record the engine delivered twice.
//!
//! DTLS records are unreliable (RFC 6347 §4.1), so the client application resends a request
//! until its echo arrives. Each transmission of a request is a distinct record, named by
//! `(seq, attempt)`; the server echoes every copy it receives, each echo a distinct record
//! named by a per-session `echo_id`. Replay protection is the engine's job (RFC 6347 §4.1.2.6):
//! a name that arrives twice means the engine delivered the same record twice.
//!
//! Wire layout (big-endian), padded with zeros to the configured length:
//! - request: `'Q'`, seq (u16), attempt (u16)
//! - echo:    `'E'`, seq (u16), attempt (u16), echo_id (u32)

const REQUEST: u8 = b'Q';
const ECHO: u8 = b'E';
const REQUEST_HEADER: usize = 5;
const ECHO_HEADER: usize = 9;

/// One transmission of a request: its number in the session and which copy it is (0 first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId {
    /// The request's number in its session.
    pub seq: u16,
    /// 0 for the first transmission, then one more per resend.
    pub attempt: u16,
}

/// A request record of `len` bytes (at least its header).
pub fn request(id: RequestId, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.max(REQUEST_HEADER)];
    out[0] = REQUEST;
    out[1..3].copy_from_slice(&id.seq.to_be_bytes());
    out[3..5].copy_from_slice(&id.attempt.to_be_bytes());
    out
}

/// The request a record carries, if it is one.
pub fn parse_request(data: &[u8]) -> Option<RequestId> {
    if data.len() < REQUEST_HEADER || data[0] != REQUEST {
        return None;
    }
    Some(RequestId {
        seq: u16::from_be_bytes([data[1], data[2]]),
        attempt: u16::from_be_bytes([data[3], data[4]]),
    })
}

/// The echo of request `id`, named `echo_id`, as long as the request was (at least its header).
pub fn echo(id: RequestId, echo_id: u32, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.max(ECHO_HEADER)];
    out[0] = ECHO;
    out[1..3].copy_from_slice(&id.seq.to_be_bytes());
    out[3..5].copy_from_slice(&id.attempt.to_be_bytes());
    out[5..9].copy_from_slice(&echo_id.to_be_bytes());
    out
}

/// The request an echo answers and the echo's name, if the record is an echo.
pub fn parse_echo(data: &[u8]) -> Option<(RequestId, u32)> {
    if data.len() < ECHO_HEADER || data[0] != ECHO {
        return None;
    }
    let id = RequestId {
        seq: u16::from_be_bytes([data[1], data[2]]),
        attempt: u16::from_be_bytes([data[3], data[4]]),
    };
    Some((id, u32::from_be_bytes([data[5], data[6], data[7], data[8]])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_echoes_round_trip_and_are_not_confused() {
        let id = RequestId { seq: 513, attempt: 2 };
        let q = request(id, 32);
        assert_eq!(q.len(), 32);
        assert_eq!(parse_request(&q), Some(id));
        assert_eq!(parse_echo(&q), None);
        let e = echo(id, 70_000, 3);
        assert_eq!(e.len(), ECHO_HEADER, "never shorter than the header");
        assert_eq!(parse_echo(&e), Some((id, 70_000)));
        assert_eq!(parse_request(&e), None);
        assert_eq!(parse_request(b"Q\x00"), None);
    }
}
