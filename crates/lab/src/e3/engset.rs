//! The Engset model of a server with R session slots and N clients (seed 002, Section IV): an
//! M/M/R/R/N loss system, and the statistics that put simulated replications beside it.

use serde::Serialize;

/// C(n, k) as a float (n ≤ a few hundred here).
fn binomial(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Share of time all `r` slots are busy with `n` clients of load `rho` = λ/µ:
/// C(N,R)ρ^R / Σ_{i≤R} C(N,i)ρ^i.
pub fn time_congestion(n: usize, r: usize, rho: f64) -> f64 {
    if r > n {
        return 0.0;
    }
    let term = |i: usize| binomial(n, i) * rho.powi(i as i32);
    term(r) / (0..=r).map(term).sum::<f64>()
}

/// Share of requests refused: the time congestion seen by one of the other N − 1 clients,
/// since a client asking for a session holds none (arrival theorem for finite sources).
pub fn call_congestion(n: usize, r: usize, rho: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    time_congestion(n - 1, r, rho)
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The mean of independent replications and the half-width of its 95 % confidence interval
/// (Student's t with K − 1 degrees of freedom).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub half_width: f64,
    pub replications: usize,
}

impl Estimate {
    pub fn of(samples: &[f64]) -> Estimate {
        let k = samples.len();
        if k == 0 {
            return Estimate::default();
        }
        let mean = samples.iter().sum::<f64>() / k as f64;
        if k == 1 {
            return Estimate { mean, half_width: f64::INFINITY, replications: 1 };
        }
        let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
        let t = T_975.get(k - 2).copied().unwrap_or(1.96);
        Estimate { mean, half_width: t * (variance / k as f64).sqrt(), replications: k }
    }

    pub fn low(&self) -> f64 {
        self.mean - self.half_width
    }

    pub fn high(&self) -> f64 {
        self.mean + self.half_width
    }

    pub fn contains(&self, value: f64) -> bool {
        self.low() <= value && value <= self.high()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_point() {
        // Seed 002, Section IV: R = 3, N = 5, ρ = 0.5.
        assert!((time_congestion(5, 3, 0.5) - 0.1724).abs() < 5e-5);
        assert!((call_congestion(5, 3, 0.5) - 0.1000).abs() < 5e-5);
    }

    #[test]
    fn edges() {
        assert_eq!(time_congestion(5, 6, 1.0), 0.0);
        // R = N: all busy only when everyone holds one; no request can find them so.
        assert!(time_congestion(4, 4, 1.0) > 0.0);
        assert_eq!(call_congestion(4, 4, 1.0), 0.0);
        // One client, one slot: busy ρ/(1+ρ) of the time.
        assert!((time_congestion(1, 1, 1.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn confidence_interval() {
        let e = Estimate::of(&[1.0, 2.0, 3.0]);
        assert_eq!(e.mean, 2.0);
        assert!((e.half_width - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert!(e.contains(0.0) && !e.contains(-1.0));
    }
}
