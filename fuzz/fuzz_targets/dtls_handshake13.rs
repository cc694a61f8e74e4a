//! DTLS 1.3 handshake messages: the first byte picks the message type, the rest is its body,
//! read by every 1.3 parser of that type (hello extensions included).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_dtls::fuzzing::handshake13_message(data);
});
