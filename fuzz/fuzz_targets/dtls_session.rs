//! An established DTLS session given one arbitrary datagram on both sides.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_dtls::fuzzing::established_session(data);
});
