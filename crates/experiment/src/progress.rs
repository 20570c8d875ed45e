//! Progress reporting without a terminal dependency: the binary draws a bar, tests count.

use std::sync::atomic::{AtomicU64, Ordering};

/// Receives progress from experiments (called from rayon worker threads).
pub trait Progress: Sync {
    /// More runs are planned.
    fn add_total(&self, runs: u64);
    /// One run finished.
    fn done(&self, label: &str);
}

/// Ignores progress.
pub struct NoProgress;

impl Progress for NoProgress {
    fn add_total(&self, _runs: u64) {}
    fn done(&self, _label: &str) {}
}

/// Counts planned and finished runs (for tests and summaries).
#[derive(Default)]
pub struct CountProgress {
    /// Runs announced.
    pub total: AtomicU64,
    /// Runs finished.
    pub finished: AtomicU64,
}

impl Progress for CountProgress {
    fn add_total(&self, runs: u64) {
        self.total.fetch_add(runs, Ordering::Relaxed);
    }
    fn done(&self, _label: &str) {
        self.finished.fetch_add(1, Ordering::Relaxed);
    }
}
