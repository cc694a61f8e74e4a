//! Fuzzes the SCTP packet parser (and its encoder round trip) through `fastshake_sctp::fuzzing::packet`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_sctp::fuzzing::packet(data);
});
