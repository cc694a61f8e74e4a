//! Handshake caching: extension bodies and the client cache store's byte format.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_dtls::fuzzing::caching(data);
});
