//! DTLS handshake layer: one record body through fragment parsing, reassembly and the message
//! parsers, and as a datagram to a client waiting for the server's first flight.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fastshake_dtls::fuzzing::handshake_record(data);
    fastshake_dtls::fuzzing::client_datagram(data);
});
