//! Fuzzes an established association: arbitrary chunks under the right tags and checksum,
//! through `fastshake_sctp::fuzzing::association`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_sctp::fuzzing::association(data);
});
