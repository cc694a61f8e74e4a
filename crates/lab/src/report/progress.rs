//! Progress on the terminal: one bar per experiment under an overall bar. An experiment says how
//! many steps it has (cells, grid points, benchmarks, phases: [`Step::steps`]) and marks each as
//! it begins or ends; its bar then shows steps done of the total and an ETA from the pace so far.
//! Until it says, the bar fills with elapsed time against the estimate, stopping short of full.
//! Hidden when stderr is not a terminal.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Progress {
    bars: MultiProgress,
    overall: ProgressBar,
}

/// One experiment's bar.
pub struct Step {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    ticker: Mutex<Option<JoinHandle<()>>>,
    /// Steps begun with [`Step::begin`].
    begun: AtomicU64,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Progress {
    /// `estimated`: the sum of the experiments' estimates.
    pub fn new(estimated: Duration, visible: bool) -> Progress {
        let target = if visible { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bars = MultiProgress::with_draw_target(target);
        let overall = bars.add(ProgressBar::new(estimated.as_secs().max(1)));
        overall.set_style(style("all   [{bar:30}] {elapsed:>4} of about {len}s  {wide_msg}"));
        overall.enable_steady_tick(Duration::from_millis(500));
        Progress { bars, overall }
    }

    /// A bar for one experiment expected to take `estimate`.
    pub fn step(&self, id: &str, estimate: Duration) -> Step {
        let len = estimate.as_secs().max(1);
        let bar = self.bars.add(ProgressBar::new(len));
        bar.set_style(style("{prefix:5} [{bar:30}] {elapsed:>4} of about {len}s  {wide_msg}"));
        bar.set_prefix(id.to_string());
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = (!bar.is_hidden()).then(|| {
            let (bar, stop) = (bar.clone(), stop.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    // Never full before the end: an estimate is not a promise.
                    bar.set_position(started.elapsed().as_secs().min(len * 95 / 100));
                    std::thread::sleep(Duration::from_millis(250));
                }
            })
        });
        Step { bar, stop, ticker: Mutex::new(ticker), begun: AtomicU64::new(0) }
    }

    /// The overall bar after an experiment: seconds of estimate done, and the last verdict.
    pub fn done(&self, estimate_done: Duration, message: String) {
        self.overall.set_position(estimate_done.as_secs());
        self.overall.set_message(message);
    }

    pub fn finish(&self) {
        self.overall.finish_and_clear();
    }
}

impl Step {
    /// What runs now.
    pub fn running(&self, what: impl Into<String>) {
        self.bar.set_message(what.into());
    }

    /// From now on the bar counts `total` steps (and their ETA) instead of time.
    pub fn steps(&self, total: u64) {
        self.stop_ticker();
        self.bar.set_style(style(
            "{prefix:5} [{bar:30}] {pos:>3}/{len:<3} {elapsed:>4}, ETA {eta:<4} {wide_msg}",
        ));
        self.bar.set_length(total.max(1));
        self.bar.set_position(0);
        self.bar.reset_eta();
        self.begun.store(0, Ordering::Relaxed);
    }

    /// A step begins: the one begun before is done.
    pub fn begin(&self, what: impl Into<String>) {
        if self.begun.fetch_add(1, Ordering::Relaxed) > 0 {
            self.bar.inc(1);
        }
        self.bar.set_message(what.into());
    }

    /// A step ended (for callers told of a step when it is over).
    pub fn did(&self, what: impl Into<String>) {
        self.bar.inc(1);
        self.bar.set_message(what.into());
    }

    fn stop_ticker(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let ticker = self.ticker.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = ticker {
            let _ = t.join();
        }
    }

    pub fn finish(self, summary: impl Into<String>) {
        self.stop_ticker();
        self.bar.set_position(self.bar.length().unwrap_or(1));
        self.bar.finish_with_message(summary.into());
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
