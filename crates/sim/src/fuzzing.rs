//! Entry points of the simulator's fuzz targets (`fuzz/fuzz_targets/sim_*.rs`), also run over
//! the corpora by `cargo test` (tests/fuzz_corpus.rs).

use crate::mac::frag::{self, MAX_MAC_PAYLOAD};
use crate::mac::sixlowpan::{self, Reassembler};

/// The 6LoWPAN receiving side: `data` is a run of frames, each one length byte then that many
/// bytes. A length byte with the high bit set gives the frame's body (MAC header and payload,
/// `len & 0x7f` bytes) and a correct FCS is appended, so that mutations reach past the FCS
/// check. Every datagram rebuilt must survive being sent again and rebuilt unchanged.
pub fn lowpan_frames(data: &[u8]) {
    let mut reassembler = Reassembler::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len & 0x7f).min(tail.len());
        let (body, tail) = tail.split_at(n);
        rest = tail;
        let mut frame = body.to_vec();
        if len & 0x80 != 0 {
            frame.extend_from_slice(&frag::fcs(body).to_le_bytes());
        }
        if let Ok(Some(received)) = reassembler.push(&frame) {
            resend(&received);
        }
        assert!(reassembler.pending() <= sixlowpan::MAX_PARTIAL);
    }
}

fn resend(received: &sixlowpan::Received) {
    let (src, dst) = (&received.mac_src, &received.mac_dst);
    let (payloads, _) = sixlowpan::encode(&received.datagram, src, dst, 0x5a5a, MAX_MAC_PAYLOAD)
        .expect("a datagram that was received fits 6LoWPAN");
    let mut again = Reassembler::new();
    let mut rebuilt = None;
    for (seq, payload) in payloads.iter().enumerate() {
        let frame = frag::data_frame(seq as u8, src, dst, false, payload);
        rebuilt = again.push(&frame).expect("our own frames decode");
    }
    assert_eq!(rebuilt.as_ref(), Some(received), "a datagram survives being sent again");
}
