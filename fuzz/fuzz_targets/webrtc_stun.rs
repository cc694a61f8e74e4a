//! Fuzzes the WebRTC STUN message parser, integrity and fingerprint checks and builder round trip through `fastshake_webrtc::stun::fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_webrtc::stun::fuzz(data);
});
