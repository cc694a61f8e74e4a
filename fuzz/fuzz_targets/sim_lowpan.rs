//! Fuzzes the simulator's 6LoWPAN receiving side (IEEE 802.15.4 data frames, IPHC and UDP NHC
//! decompression, FRAG1/FRAGN reassembly) through `fastshake_sim::fuzzing::lowpan_frames`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_sim::fuzzing::lowpan_frames(data);
});
