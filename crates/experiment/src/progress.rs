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
    /// Runs planned so far.
    pub total: AtomicU64,
    /// Runs finished so far.
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

/// Seconds one seed of each experiment takes with a release build on an otherwise idle 2-vCPU
/// machine: CPU (user) time of `counterpoint experiment all --seeds 5` split by experiment, over
/// 5 seeds and 2 vCPUs (docs/experiments.md, "Run time"). A loaded machine takes longer; the
/// estimate is for refusing runaway requests before they start, not a promise.
pub const SECONDS_PER_SEED: &[(&str, f64)] = &[
    ("zhang-spec", 2.5),
    ("zhang-server", 0.8),
    ("masa-placement", 0.3),
    ("masa-testcases", 2.5),
    ("di-vs-oracle", 2.0),
    // Measured user time per seed: release `experiment leak --seeds 150` 10.1 s (21 s wall at
    // load average 8), `--seeds 20` 1.35 s; a debug build 23.3 s for 20 seeds (17x).
    ("leak", 0.07),
    // Mostly fixed: ~20 short engine runs whatever the seeds (3 seeds: 1.2 s, debug build).
    ("replica", 0.2),
    // Both models of the six covered experiments (under `all`, v1 is reused: half of this);
    // corun-slowdown adds about 0.6 s per seed to the five before it. Session 19, release,
    // load average 1.2: `--seeds 1` 20.2 s wall (34.9 s of CPU); a probe saw 73 s for 2 seeds
    // on a loaded machine against the 25.6 s the old 12.8 promised.
    ("model-validation", 20.0),
    // A PostgreSQL load, 400 requests and their analysis: 3.4 s per seed in release (session
    // 19: `--seeds 2` 6.7 s wall; the 40 s this said was a debug build's under load average
    // 14, and the estimate is the release binary's).
    ("requests", 4.0),
    // Under `all` it runs 2 seeds only (schedtask::ALL_SEEDS), so `all`'s estimate is high
    // beyond 2; alone it runs every seed.
    ("schedtask", 5.0),
    // 40 runs of 3 s alone per seed: 0.57 s wall for 5 seeds in release.
    ("clock-scaling", 0.12),
    // 55 runs of 3 s (10 alone, 45 pairs) per seed, two CPUs.
    ("corun-slowdown", 0.3),
];

/// Longest run `counterpoint experiment` starts without `--force`, in estimated seconds.
pub const BUDGET_SECONDS: f64 = 1800.0;

/// Estimated wall-clock seconds of experiment `name` (or `all`) over `seeds` seeds on a
/// 2-vCPU machine; `None` for an unknown name.
pub fn estimate_seconds(name: &str, seeds: u64) -> Option<f64> {
    let per_seed = if name == "all" {
        SECONDS_PER_SEED.iter().map(|(_, s)| s).sum()
    } else {
        SECONDS_PER_SEED.iter().find(|(n, _)| *n == name)?.1
    };
    Some(per_seed * seeds as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_scale_with_seeds_and_cover_every_experiment() {
        for (name, _) in crate::EXPERIMENTS {
            assert!(estimate_seconds(name, 1).is_some(), "{name}");
        }
        let one = estimate_seconds("all", 1).unwrap();
        assert!((estimate_seconds("all", 100_000).unwrap() - one * 1e5).abs() < 1e-6);
        // 100000 seeds are far beyond the budget; the default 5 are well within it.
        assert!(estimate_seconds("all", 100_000).unwrap() > BUDGET_SECONDS);
        assert!(estimate_seconds("all", 5).unwrap() < BUDGET_SECONDS);
        assert_eq!(estimate_seconds("nope", 1), None);
    }
}
