//! A forwarding frame between fleet nodes: arbitrary bytes as a whole frame (the tag check),
//! as an authenticated body (the field parser), and sealed then opened again.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_net::fleet::fuzz_frame(data);
});
