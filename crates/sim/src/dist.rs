//! Random draws for the link models, all taken from the simulator's one seeded RNG.
//!
//! Only the few distributions the link model needs are here, each a textbook transform of a
//! uniform draw, so a run depends on nothing but the seed and the order of events.

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

/// A uniform draw in [0, 1) with 53 bits of precision.
pub fn unit(rng: &mut dyn RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `true` with probability `p` (values outside [0, 1] are clamped). Draws nothing when `p` is
/// 0 or 1, so an unused model leaves the random stream of the others untouched.
pub fn chance(rng: &mut dyn RngCore, p: f64) -> bool {
    if p <= 0.0 {
        false
    } else if p >= 1.0 {
        true
    } else {
        unit(rng) < p
    }
}

/// A standard normal draw (Box–Muller; the second value is discarded to keep no hidden state).
pub fn standard_normal(rng: &mut dyn RngCore) -> f64 {
    // 1 - unit is in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - unit(rng);
    let u2 = unit(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The random part of a link's one-way delay, added to the fixed part. Every sample is clipped
/// to [0, `max_ms`] (when `max_ms` is given) so a delay is never negative or unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Jitter {
    /// No jitter.
    #[default]
    None,
    /// Uniform in [`min_ms`, `max_ms`].
    Uniform {
        /// Lower bound in milliseconds.
        #[serde(default)]
        min_ms: f64,
        /// Upper bound in milliseconds.
        max_ms: f64,
    },
    /// Normal with the given mean and standard deviation, clipped to [0, `max_ms`].
    Normal {
        /// Mean in milliseconds.
        #[serde(default)]
        mean_ms: f64,
        /// Standard deviation in milliseconds.
        sd_ms: f64,
        /// Upper clip in milliseconds (none if absent).
        #[serde(default)]
        max_ms: Option<f64>,
    },
    /// Exponential with the given mean, clipped to [0, `max_ms`].
    Exponential {
        /// Mean in milliseconds.
        mean_ms: f64,
        /// Upper clip in milliseconds (none if absent).
        #[serde(default)]
        max_ms: Option<f64>,
    },
}

impl Jitter {
    /// One sample in nanoseconds.
    pub fn sample_ns(&self, rng: &mut dyn RngCore) -> u64 {
        let ms = match *self {
            Jitter::None => return 0,
            Jitter::Uniform { min_ms, max_ms } => min_ms + (max_ms - min_ms) * unit(rng),
            Jitter::Normal { mean_ms, sd_ms, max_ms } => clip(mean_ms + sd_ms * standard_normal(rng), max_ms),
            Jitter::Exponential { mean_ms, max_ms } => clip(-mean_ms * (1.0 - unit(rng)).ln(), max_ms),
        };
        ms_to_ns(ms)
    }
}

fn clip(ms: f64, max_ms: Option<f64>) -> f64 {
    let ms = ms.max(0.0);
    match max_ms {
        Some(max) => ms.min(max),
        None => ms,
    }
}

/// Milliseconds (possibly fractional, negative or NaN from a careless scenario) to whole
/// nanoseconds, saturating instead of panicking.
pub fn ms_to_ns(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        0
    } else {
        // `as` saturates for floats beyond u64::MAX.
        (ms * 1e6).round() as u64
    }
}
