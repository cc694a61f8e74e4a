//! Deterministic byte mutations for replaying a fuzz target's corpus in `cargo test`: the seeds
//! as they are, then each a little broken (bit flips, random bytes, truncation, insertion, a length field set to 0xffff), from a
//! fixed seed so a failure reproduces.

use std::path::PathBuf;

/// The seed inputs checked in for fuzz target `target` (`fuzz/corpus/<target>`), in file-name
/// order so a replay is the same every time.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("a readable corpus directory").path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).collect()
}

/// xorshift64*: small, deterministic, good enough to pick mutations.
pub struct Mutator(u64);

impl Mutator {
    /// A generator from `seed` (not zero).
    pub fn new(seed: u64) -> Self {
        Mutator(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// `seed` with one to five random edits.
    pub fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut d = seed.to_vec();
        for _ in 0..=self.below(4) {
            match self.below(5) {
                0 if !d.is_empty() => {
                    let i = self.below(d.len());
                    d[i] ^= 1 << self.below(8);
                }
                1 if !d.is_empty() => {
                    let i = self.below(d.len());
                    d[i] = self.next_u64() as u8;
                }
                2 => d.truncate(self.below(d.len() + 1)),
                3 => {
                    let i = self.below(d.len() + 1);
                    d.insert(i, self.next_u64() as u8);
                }
                _ if d.len() > 2 => {
                    // Length fields are the interesting bytes: set one to an extreme.
                    let i = self.below(d.len() - 1);
                    d[i] = 0xff;
                    d[i + 1] = 0xff;
                }
                _ => {}
            }
        }
        d
    }
}
