//! Fuzzes the SCTP chunk parser (and its encoder round trip) through `fastshake_sctp::fuzzing::chunk`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_sctp::fuzzing::chunk(data);
});
