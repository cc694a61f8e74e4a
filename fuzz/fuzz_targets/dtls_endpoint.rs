//! A listening DTLS endpoint given one arbitrary datagram.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_dtls::fuzzing::endpoint_datagram(data);
});
