//! Fuzzes the WebRTC DCEP message parser and channel table through `fastshake_webrtc::dcep::fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_webrtc::dcep::fuzz(data);
});
