//! The paper's statements, each checked against our figures with a verdict and, where they
//! differ, the reason found.

use serde::Serialize;

/// Ours and the paper's agree when they differ by at most this share.
pub const TOLERANCE: f64 = 0.25;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Within the tolerance (or the qualitative statement holds).
    Agrees,
    /// Outside it; `why` says what we found.
    Differs,
}

#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    /// The paper's statement, quoted or closely paraphrased.
    pub paper: String,
    /// What we measured for it.
    pub ours: String,
    pub verdict: Verdict,
    /// Where the figures differ: model, parameters or defect, as found.
    pub why: String,
}

impl Claim {
    pub fn new(
        paper: impl Into<String>,
        ours: impl Into<String>,
        agrees: bool,
        why: impl Into<String>,
    ) -> Self {
        Claim {
            paper: paper.into(),
            ours: ours.into(),
            verdict: if agrees { Verdict::Agrees } else { Verdict::Differs },
            why: if agrees { String::new() } else { why.into() },
        }
    }
}

/// Relative difference of `ours` from `paper`.
pub fn diff(ours: f64, paper: f64) -> f64 {
    (ours - paper) / paper
}

/// Whether `ours` is within [`TOLERANCE`] of `paper`.
pub fn close(ours: f64, paper: f64) -> bool {
    diff(ours, paper).abs() <= TOLERANCE
}

/// Whether the range `[lo, hi]` matches the paper's `[plo, phi]` at both ends.
pub fn range_close(lo: f64, hi: f64, plo: f64, phi: f64) -> bool {
    close(lo, plo) && close(hi, phi)
}

/// R² of the least-squares line through `points`: how linear a trend is.
pub fn r_squared(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 3 {
        return 1.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 || syy == 0.0 {
        return 1.0;
    }
    sxy * sxy / (sxx * syy)
}

pub fn print(title: &str, claims: &[Claim]) {
    println!("{title}: the paper's statements, checked (agree = within {:.0} %)", TOLERANCE * 100.0);
    for (i, c) in claims.iter().enumerate() {
        let verdict = match c.verdict {
            Verdict::Agrees => "AGREES",
            Verdict::Differs => "DIFFERS",
        };
        println!("  {}. paper: {}", i + 1, c.paper);
        println!("     ours:  {}  -> {verdict}", c.ours);
        if !c.why.is_empty() {
            println!("     why:   {}", c.why);
        }
    }
}
