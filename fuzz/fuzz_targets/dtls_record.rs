//! DTLS record layer: record splitting, replay window, fragments and message parsers.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_dtls::fuzzing::record_layer(data);
});
