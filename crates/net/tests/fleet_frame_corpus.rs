//! The fleet_frame fuzz target's corpus, then each seed broken in many ways, through the frame
//! parser: nothing panics, and no broken frame opens under the fleet key.

use fastshake_testkit::mutation::Mutator;
use std::path::PathBuf;

#[test]
fn fleet_frame_corpus_and_mutations_never_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/fleet_frame");
    let seeds: Vec<Vec<u8>> =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    assert!(seeds.len() >= 3, "the corpus has its seeds");
    let fleet = fastshake_net::fleet::Fleet::new(1, Default::default(), &[0x42; 32]);
    let opened = seeds.iter().filter(|s| fastshake_net::fleet::open_frame(&fleet, s).is_ok()).count();
    assert_eq!(opened, 2, "the two sealed seeds open under the corpus key");
    let mut mutator = Mutator::new(0xf1ee7);
    for seed in &seeds {
        fastshake_net::fleet::fuzz_frame(seed);
        for _ in 0..2000 {
            let broken = mutator.mutate(seed);
            fastshake_net::fleet::fuzz_frame(&broken);
            if broken != *seed {
                assert!(fastshake_net::fleet::open_frame(&fleet, &broken).is_err(), "{broken:?}");
            }
        }
    }
}
