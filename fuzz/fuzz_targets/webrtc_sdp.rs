//! Fuzzes the WebRTC SDP offer parser and the answer written to it through `fastshake_webrtc::sdp::fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_webrtc::sdp::fuzz(data);
});
