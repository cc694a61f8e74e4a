//! Runs every fuzz target's seed corpus, plus thousands of random and mutated inputs, through
//! the same entry points as `fuzz/fuzz_targets/dtls_*.rs`, so `cargo test` exercises each target.

use fastshake_dtls::fuzzing;
use std::path::PathBuf;

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("dtls_record", fuzzing::record_layer),
    ("dtls_handshake", handshake_target),
    ("dtls_endpoint", fuzzing::endpoint_datagram),
    ("dtls_session", fuzzing::established_session),
    ("dtls_caching", fuzzing::caching),
];

fn handshake_target(data: &[u8]) {
    fuzzing::handshake_record(data);
    fuzzing::client_datagram(data);
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] = rng.next() as u8;
            }
            2 => d.truncate(rng.below(d.len() + 1)),
            3 => {
                let i = rng.below(d.len() + 1);
                d.insert(i, rng.next() as u8);
            }
            _ if d.len() > 2 => {
                // Length fields are the interesting bytes: set one to an extreme.
                let i = rng.below(d.len() - 1);
                d[i] = 0xff;
                d[i + 1] = 0xff;
            }
            _ => {}
        }
    }
    d
}

#[test]
fn every_target_runs_its_corpus_and_mutations() {
    let mut rng = Rng(0x5eed_f00d);
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
                (0..rng.below(200)).map(|_| rng.next() as u8).collect()
            } else {
                let s = &seeds[rng.below(seeds.len())];
                mutate(&mut rng, s)
            };
            target(&input);
        }
    }
}
