//! Runs the simulator's fuzz corpus (fuzz/corpus/sim_lowpan), plus thousands of random and
//! mutated inputs, through the entry point of `fuzz/fuzz_targets/sim_lowpan.rs`.

use fastshake_sim::fuzzing;
use fastshake_sim::mac::frag;
use fastshake_sim::mac::sixlowpan::UdpDatagram;
use fastshake_testkit::mutation::{corpus, Mutator};
use std::path::PathBuf;

/// An input in the target's format: each frame's body behind a length byte with the high bit
/// set (the target appends the FCS).
fn input_of(datagram: &UdpDatagram, from: usize, to: usize) -> Vec<u8> {
    let (frames, _) = frag::fragment(datagram, from, to, 0, 9, false).unwrap();
    let mut input = Vec::new();
    for f in frames {
        let body = &f[..f.len() - 2];
        input.push(0x80 | body.len() as u8);
        input.extend_from_slice(body);
    }
    input
}

#[test]
fn the_corpus_holds_real_frames() {
    // Regenerate with FASTSHAKE_WRITE_CORPUS=1 after a change to the framing.
    let seeds = [
        ("one-frame-link-local", input_of(&UdpDatagram::between(1, 2, 1, 5684, vec![0x16; 60]), 1, 2)),
        ("fragmented-link-local", input_of(&UdpDatagram::between(1, 2, 1, 5684, vec![0x16; 300]), 1, 2)),
        ("fragmented-mesh-relay", input_of(&UdpDatagram::between(1, 5, 3, 61617, vec![0x17; 250]), 3, 4)),
    ];
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/sim_lowpan");
    for (name, input) in &seeds {
        if std::env::var_os("FASTSHAKE_WRITE_CORPUS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), input).unwrap();
        }
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), input, "corpus file {name} is current");
    }
}

#[test]
fn the_target_runs_its_corpus_and_mutations() {
    let seeds = corpus("sim_lowpan");
    assert!(!seeds.is_empty(), "sim_lowpan has a seed corpus");
    for s in &seeds {
        fuzzing::lowpan_frames(s);
    }
    let mut rng = Mutator::new(0x6c6f_7770_616e);
    for i in 0..5000 {
        let input = if i % 4 == 0 {
            (0..rng.below(400)).map(|_| rng.next_u64() as u8).collect()
        } else {
            let seed = &seeds[rng.below(seeds.len())];
            rng.mutate(seed)
        };
        fuzzing::lowpan_frames(&input);
    }
}
