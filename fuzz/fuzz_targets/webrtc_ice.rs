//! Fuzzes the WebRTC ICE-lite agent answering arbitrary datagrams through `fastshake_webrtc::ice::fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_webrtc::ice::fuzz(data);
});
