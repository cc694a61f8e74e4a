//! `results.json`: one object per experiment, each figure beside the paper's or the anchor's.
//! The schema is docs/results.schema.json (a test validates a real run against it); bump
//! [`SCHEMA`] when a field changes meaning.

use serde::{Deserialize, Serialize};

/// The schema's name and version, written into every file.
pub const SCHEMA: &str = "fastshake-lab-results/1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub schema: String,
    /// The seed every simulated experiment derived its seeds from.
    pub seed: u64,
    pub quick: bool,
    /// The experiments asked for, in order.
    pub only: Vec<String>,
    /// Wall-clock seconds of the whole run (measured, varies).
    pub elapsed_s: f64,
    pub experiments: Vec<Section>,
}

/// One experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Section {
    /// "E1", "E2", ..., "BENCH".
    pub id: String,
    pub title: String,
    /// The paper (or anchor) this experiment re-runs.
    pub source: String,
    /// What the paper measured, and how.
    pub paper_method: String,
    /// How we measure it here.
    pub our_setup: String,
    pub status: Status,
    /// The headline figures; the summary table at the top of the page lists them all.
    pub figures: Vec<Figure>,
    /// Further tables, already formatted.
    pub tables: Vec<Table>,
    pub plots: Vec<Plot>,
    /// A capture of one representative run, beside results.json.
    pub capture: Option<Capture>,
    /// What the difference from the paper means, in a sentence or two.
    pub meaning: String,
    /// Wall-clock seconds this experiment took (measured, varies).
    pub elapsed_s: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Status {
    Ran,
    /// Not run, and why (a missing binary or anchor, not root).
    Skipped {
        reason: String,
    },
    /// Started and failed: the error.
    Failed {
        reason: String,
    },
}

/// Where a figure comes from: the page tells simulated (reproducible from the seed) from
/// measured (timed on this machine, varies from run to run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Origin {
    /// Virtual time or counted bytes: the same seed gives the same figure.
    Simulated,
    /// A closed formula.
    Analytic,
    /// Timed on this machine: the median of `runs` runs.
    Measured { runs: u32 },
}

/// One figure: ours beside the paper's or the anchor's, with a verdict and a sentence.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    pub name: String,
    pub unit: String,
    /// Ours; none when it could not be measured (then `note` says why).
    pub ours: Option<f64>,
    /// The paper's or the anchor's value.
    pub anchor: Option<f64>,
    /// Whose value `anchor` is: "seed 002 Table I", "OpenSSL, same run".
    pub anchor_source: String,
    /// ours / anchor.
    pub ratio: Option<f64>,
    /// Whether the target was met; none where there is no target.
    pub met: Option<bool>,
    /// What "met" means for this figure.
    pub criterion: String,
    pub origin: Origin,
    /// The difference, in a sentence.
    pub note: String,
}

impl Figure {
    fn new(name: impl Into<String>, unit: impl Into<String>, ours: Option<f64>, origin: Origin) -> Figure {
        Figure {
            name: name.into(),
            unit: unit.into(),
            ours: ours.filter(|v| v.is_finite()),
            anchor: None,
            anchor_source: String::new(),
            ratio: None,
            met: None,
            criterion: String::new(),
            origin,
            note: String::new(),
        }
    }

    pub fn simulated(name: impl Into<String>, unit: impl Into<String>, ours: f64) -> Figure {
        Figure::new(name, unit, Some(ours), Origin::Simulated)
    }

    /// The median of `runs` timed runs.
    pub fn measured(
        name: impl Into<String>,
        unit: impl Into<String>,
        median: Option<f64>,
        runs: u32,
    ) -> Figure {
        Figure::new(name, unit, median, Origin::Measured { runs })
    }

    pub fn against(mut self, anchor: f64, source: impl Into<String>) -> Figure {
        self.anchor = Some(anchor).filter(|v| v.is_finite());
        self.anchor_source = source.into();
        self.ratio = match (self.ours, self.anchor) {
            (Some(ours), Some(anchor)) if anchor != 0.0 => Some(ours / anchor),
            _ => None,
        };
        self
    }

    pub fn met_if(mut self, met: bool, criterion: impl Into<String>) -> Figure {
        self.met = Some(met);
        self.criterion = criterion.into();
        self
    }

    /// Met when ours is within `tolerance` (a share) of the anchor.
    pub fn within(self, tolerance: f64) -> Figure {
        let met = self.ratio.is_some_and(|r| (r - 1.0).abs() <= tolerance);
        self.met_if(met, format!("within {:.0} % of the paper", tolerance * 100.0))
    }

    /// Met when ours / anchor is at least `at_least`.
    pub fn at_least(self, at_least: f64) -> Figure {
        let met = self.ratio.is_some_and(|r| r >= at_least);
        self.met_if(met, format!("ours / anchor ≥ {at_least}"))
    }

    pub fn note(mut self, note: impl Into<String>) -> Figure {
        self.note = note.into();
        self
    }

    pub fn is_simulated(&self) -> bool {
        !matches!(self.origin, Origin::Measured { .. })
    }
}

/// A table as the page shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        self.rows.push(cells.into_iter().collect());
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plot {
    /// The SVG's file name in the output directory.
    pub file: String,
    pub title: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Capture {
    /// The pcap's file name in the output directory.
    pub file: String,
    /// What run it holds.
    pub what: String,
}

/// A value with a sensible number of digits for a table.
pub fn format_value(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 0.1 => format!("{v:.3}"),
        Some(v) => format!("{v:.4}"),
    }
}

pub fn verdict_label(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "not met",
        None => "—",
    }
}

/// The figures as a terminal table (the experiments' own commands print this after their
/// tables, so `lab e3` and `lab all` state the same verdicts).
pub fn print_figures(title: &str, figures: &[Figure]) {
    println!("{title}: figure, paper/anchor, ours, ratio, verdict");
    for f in figures {
        println!(
            "  {:<64} {:>10} {:>10} {:>7} {:<8} {} {}",
            f.name,
            format_value(f.anchor),
            format_value(f.ours),
            f.ratio.map_or("—".into(), |r| format!("{r:.2}x")),
            verdict_label(f.met),
            f.unit,
            if f.anchor_source.is_empty() { String::new() } else { format!("({})", f.anchor_source) },
        );
        if !f.note.is_empty() {
            println!("  {:<64} {}", "", f.note);
        }
    }
}
