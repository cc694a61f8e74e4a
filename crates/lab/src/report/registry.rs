//! The experiments `lab all` runs: one [`Experiment`] per module in [`super::experiments`],
//! listed once in [`all`]. Adding an experiment is writing its module and one line here.

use super::experiments;
use super::progress::Step;
use super::results::Section;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What every experiment gets from the command line.
#[derive(Clone, Debug)]
pub struct Context {
    pub quick: bool,
    /// The seed every simulated figure derives from.
    pub seed: u64,
    /// The output directory (plots and captures go here).
    pub out: PathBuf,
    /// `fastshake-bench`, when found (the benchmarks and E5's floods need it).
    pub bench: Option<PathBuf>,
    /// Threads for replications that run side by side.
    pub threads: usize,
    /// Run the real-socket parts too (E1 and E6 in network namespaces; root only).
    pub real: bool,
}

impl Context {
    pub fn path(&self, file: &str) -> PathBuf {
        self.out.join(file)
    }

    pub fn out(&self) -> &Path {
        &self.out
    }
}

/// What the page and the progress bars know of an experiment before it runs.
pub struct About {
    /// "E1", "E2", ...: what `--only` takes.
    pub id: &'static str,
    /// The section's heading.
    pub title: &'static str,
    /// Wall time in seconds of a quick and of a full run on a loaded 2-core machine, release
    /// build (for the estimate printed at the start and the progress bars).
    pub seconds: (u64, u64),
    /// What the real-socket part adds with `--real` (as root), quick and full.
    pub real_seconds: (u64, u64),
}

impl About {
    /// An experiment with no real-socket part.
    pub const fn new(id: &'static str, title: &'static str, seconds: (u64, u64)) -> About {
        About { id, title, seconds, real_seconds: (0, 0) }
    }

    /// With a real-socket part that takes `seconds` (quick, full) more.
    pub const fn with_real(self, seconds: (u64, u64)) -> About {
        About { real_seconds: seconds, ..self }
    }
}

/// One section of the report.
pub trait Experiment {
    /// Its id, title and expected run time.
    fn about(&self) -> About;
    /// Runs and reports; plots and captures are written into `ctx.out`. A part that cannot run
    /// here (no binary, not root) is skipped inside the section with its reason, not an error.
    fn run(&self, ctx: &Context, step: &Step) -> anyhow::Result<Section>;

    /// [`About::id`].
    fn id(&self) -> &'static str {
        self.about().id
    }
    /// [`About::title`].
    fn title(&self) -> &'static str {
        self.about().title
    }
    /// [`About::seconds`] of a quick or a full run.
    fn estimate(&self, quick: bool) -> Duration {
        let (q, full) = self.about().seconds;
        Duration::from_secs(if quick { q } else { full })
    }
    /// [`About::real_seconds`] of a quick or a full run.
    fn estimate_real(&self, quick: bool) -> Duration {
        let (q, full) = self.about().real_seconds;
        Duration::from_secs(if quick { q } else { full })
    }
}

/// Every experiment, in the page's order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(experiments::e1::E1),
        Box::new(experiments::e2::E2),
        Box::new(experiments::e3::E3),
        Box::new(experiments::e4::E4),
        Box::new(experiments::e5::E5),
        Box::new(experiments::e6::E6),
        Box::new(experiments::bench::Benchmarks),
    ]
}
