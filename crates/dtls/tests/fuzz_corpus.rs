//! Runs every fuzz target's seed corpus, plus thousands of random and mutated inputs, through
//! the same entry points as `fuzz/fuzz_targets/dtls_*.rs`, so `cargo test` exercises each target.

use fastshake_dtls::fuzzing;
use fastshake_testkit::mutation::{corpus, Mutator};

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("dtls_record", fuzzing::record_layer),
    ("dtls_handshake", handshake_target),
    ("dtls_endpoint", fuzzing::endpoint_datagram),
    ("dtls_session", fuzzing::established_session),
    ("dtls_caching", fuzzing::caching),
    ("dtls_handshake13", fuzzing::handshake13_message),
];

fn handshake_target(data: &[u8]) {
    fuzzing::handshake_record(data);
    fuzzing::client_datagram(data);
}

#[test]
fn every_target_runs_its_corpus_and_mutations() {
    let mut rng = Mutator::new(0x5eed_f00d);
    for (name, target) in TARGETS {
        let seeds = corpus(name);
        assert!(!seeds.is_empty(), "{name} has a seed corpus");
        for s in &seeds {
            target(s);
        }
        // The session target runs a handshake per input; fewer rounds keep the suite fast.
        let rounds = if *name == "dtls_session" || *name == "dtls_endpoint" { 300 } else { 3000 };
        for i in 0..rounds {
            let input = if i % 4 == 0 {
                (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect()
            } else {
                let s = &seeds[rng.below(seeds.len())];
                rng.mutate(s)
            };
            target(&input);
        }
    }
}
