//! Statistics over seeds: every number an experiment reports is a mean with its spread.

use serde::{Deserialize, Serialize};

/// Mean, sample standard deviation and range of one quantity over seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Mean over seeds.
    pub mean: f64,
    /// Sample standard deviation (n - 1); `None` (JSON `null`) for a single seed: one value
    /// has no measurable spread, and a 0 would read as seeds that agree exactly.
    pub std: Option<f64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of seeds.
    pub n: usize,
}

/// What a difference over seeds shows, judged by its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The whole interval is above zero.
    Gain,
    /// The whole interval is below zero.
    Loss,
    /// The interval includes zero.
    NoMeasurableGain,
    /// One seed: there is no interval, so neither gain nor loss nor "no gain" can be said.
    OneSeed,
}

impl Verdict {
    /// The words the reports use.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Gain => "gain",
            Verdict::Loss => "loss",
            Verdict::NoMeasurableGain => "no measurable gain",
            Verdict::OneSeed => UNDECIDED_ONE_SEED,
        }
    }
}

/// What every interval-derived verdict says when it rests on one seed.
pub const UNDECIDED_ONE_SEED: &str = "undecided: one seed";

/// Differences smaller than this are below the reports' last digit (0.001 of NP, 0.1 % of a
/// gain) and never count as a gain or a loss.
pub const RESOLUTION: f64 = 5e-4;

/// Two-sided 97.5 % quantile of Student's t for `df` degrees of freedom (1..=30; 1.96 beyond).
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        d if d <= 30 => T[d - 1],
        _ => 1.96,
    }
}

impl Summary {
    /// `None` for no values or a non-finite value.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let std = (n > 1).then(|| {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        });
        Some(Self {
            mean,
            std,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n,
        })
    }

    /// The same summary in other units (every figure times `factor`, e.g. 100 for percent).
    pub fn scaled(&self, factor: f64) -> Self {
        let (a, b) = (self.min * factor, self.max * factor);
        Self {
            mean: self.mean * factor,
            std: self.std.map(|s| s * factor.abs()),
            min: a.min(b),
            max: a.max(b),
            n: self.n,
        }
    }

    /// The 95 % confidence interval of the mean (Student's t over the seeds); `None` for one
    /// seed, which has no spread to build an interval from. Seeds that all agree (std 0, as
    /// deterministic runs do) give the zero-width interval at the mean: that is a finding.
    pub fn interval95(&self) -> Option<(f64, f64)> {
        let std = self.std?;
        if self.n < 2 {
            return None;
        }
        if std == 0.0 {
            return Some((self.mean, self.mean));
        }
        let half = t975(self.n - 1) * std / (self.n as f64).sqrt();
        Some((self.mean - half, self.mean + half))
    }

    /// Gain, loss, or no measurable gain: whether the 95 % interval of this difference
    /// excludes zero, by more than [`RESOLUTION`] (a deterministic difference of 1e-6 is not a
    /// gain the reports could show). [`Verdict::OneSeed`] when there is no interval.
    pub fn verdict(&self) -> Verdict {
        let Some((lo, hi)) = self.interval95() else {
            return Verdict::OneSeed;
        };
        if lo > RESOLUTION {
            Verdict::Gain
        } else if hi < -RESOLUTION {
            Verdict::Loss
        } else {
            Verdict::NoMeasurableGain
        }
    }

    /// Whether every seed gave the same value (a deterministic run repeated, as at zero slice
    /// drift): its zero-width interval is the model's exact figure, not a spread measured
    /// over varied runs, and the reports say so instead of printing `[x, x]` (report audit,
    /// session 29).
    pub fn all_seeds_equal(&self) -> bool {
        self.n > 1 && self.min == self.max
    }

    /// `mean [lo, hi]` with `digits` decimals and a sign (a difference with its interval);
    /// `mean [one seed]` when there is no interval; `mean [all N seeds equal]` when every seed
    /// gave the same value.
    pub fn show_interval(&self, digits: usize) -> String {
        if self.all_seeds_equal() {
            return format!(
                "{:+.d$} [all {} seeds equal]",
                self.mean,
                self.n,
                d = digits
            );
        }
        match self.interval95() {
            Some((lo, hi)) => {
                format!("{:+.d$} [{:+.d$}, {:+.d$}]", self.mean, lo, hi, d = digits)
            }
            None => format!("{:+.d$} [one seed]", self.mean, d = digits),
        }
    }

    /// `95 % CI lo, hi` with `digits` decimals (unsigned), or `one seed, no CI`: the bracket
    /// text of the findings.
    pub fn show_ci(&self, digits: usize) -> String {
        if self.all_seeds_equal() {
            return format!("all {} seeds equal", self.n);
        }
        match self.interval95() {
            Some((lo, hi)) => format!("95 % CI {lo:.d$}, {hi:.d$}", d = digits),
            None => "one seed, no CI".to_string(),
        }
    }

    /// `mean ± std` with `digits` decimals (just the mean for one seed).
    pub fn show(&self, digits: usize) -> String {
        match self.std {
            Some(std) => format!("{:.d$} ± {:.d$}", self.mean, std, d = digits),
            None => format!("{:.d$}", self.mean, d = digits),
        }
    }

    /// Half the 95 % interval's width, for an error bar (`None` for one seed: no bar).
    pub fn half_width95(&self) -> Option<f64> {
        self.interval95().map(|(lo, hi)| 0.5 * (hi - lo))
    }
}

/// The seeds whose runs are not repeats of an earlier seed's, by `fingerprint` (everything a
/// run measured, compared exactly), and each repeat with the seed it repeats. A seed that only
/// picks among a few setups (MASA's three start orders) under a model with nothing else random
/// gives the same run again: counted as another sample, it narrowed intervals it does not
/// inform (report audit, session 29: five seeds were three runs weighted 2:2:1).
pub fn distinct_seeds<K: PartialEq>(
    seeds: &[u64],
    fingerprint: impl Fn(u64) -> K,
) -> (Vec<u64>, Vec<(u64, u64)>) {
    let mut kept: Vec<(u64, K)> = Vec::new();
    let mut repeats = Vec::new();
    for &s in seeds {
        let f = fingerprint(s);
        match kept.iter().find(|(_, k)| *k == f) {
            Some((first, _)) => repeats.push((s, *first)),
            None => kept.push((s, f)),
        }
    }
    (kept.into_iter().map(|(s, _)| s).collect(), repeats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_runs_are_found_by_their_whole_fingerprint() {
        // Seeds 1 and 4, 2 and 5 give the same runs; 3 a run of its own.
        let run = |s: u64| vec![(s - 1) % 3, 7];
        let (kept, repeats) = distinct_seeds(&[1, 2, 3, 4, 5], run);
        assert_eq!(kept, [1, 2, 3]);
        assert_eq!(repeats, [(4, 1), (5, 2)]);
        // Runs that differ anywhere are distinct.
        let (kept, repeats) = distinct_seeds(&[1, 2, 3], |s| s);
        assert_eq!((kept.len(), repeats.len()), (3, 0));
    }

    #[test]
    fn mean_and_sample_spread() {
        let s = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.mean, 2.0);
        assert!((s.std.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!((s.min, s.max, s.n), (1.0, 3.0, 3));
        assert_eq!(s.show(2), "2.00 ± 1.00");
        assert_eq!(Summary::of(&[0.5]).unwrap().show(3), "0.500");
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn verdicts_follow_the_interval() {
        // mean 0.02, std 0.0071, n 5: half-width 2.776 * 0.0071 / sqrt(5) = 0.0088 -> gain.
        let g = Summary::of(&[0.01, 0.02, 0.03, 0.02, 0.02]).unwrap();
        assert_eq!(g.verdict(), Verdict::Gain);
        // A spread that straddles zero.
        let n = Summary::of(&[-0.02, 0.03, 0.01, -0.01, 0.02]).unwrap();
        assert_eq!(n.verdict(), Verdict::NoMeasurableGain);
        let l = Summary::of(&[-0.05, -0.04, -0.05]).unwrap();
        assert_eq!(l.verdict(), Verdict::Loss);
        // Exact repeats: the point is the interval.
        let e = Summary::of(&[0.0, 0.0]).unwrap();
        assert_eq!(e.verdict(), Verdict::NoMeasurableGain);
        // A deterministic difference below the resolution is no gain and no loss.
        let tiny = Summary::of(&[-1e-6, -1e-6]).unwrap();
        assert_eq!(tiny.verdict(), Verdict::NoMeasurableGain);
        // Two seeds with spread: the t quantile is wide.
        let two = Summary::of(&[0.01, 0.03]).unwrap();
        let (lo, hi) = two.interval95().unwrap();
        assert!(lo < 0.0 && hi > 0.04, "{lo} {hi}");
        assert_eq!(g.show_interval(3), "+0.020 [+0.011, +0.029]");
        assert_eq!(g.show_ci(3), "95 % CI 0.011, 0.029");
    }

    #[test]
    fn one_seed_has_no_spread_no_interval_and_no_verdict() {
        for v in [0.1, -0.1, 0.0, -0.001, 0.005] {
            let s = Summary::of(&[v]).unwrap();
            assert_eq!((s.n, s.std, s.min, s.max), (1, None, v, v));
            assert_eq!(s.interval95(), None, "{v}");
            assert_eq!(s.half_width95(), None);
            // Not gain, not loss, and not "no measurable gain" either.
            assert_eq!(s.verdict(), Verdict::OneSeed, "{v}");
            assert_eq!(s.verdict().label(), "undecided: one seed");
        }
        let s = Summary::of(&[-0.001]).unwrap();
        assert_eq!(s.show_interval(3), "-0.001 [one seed]");
        assert_eq!(s.show_ci(2), "one seed, no CI");
        assert_eq!(s.show(3), "-0.001");
        // JSON: the spread is null, not a fake 0; the other fields are as before.
        let j = serde_json::to_value(s).unwrap();
        assert!(j["std"].is_null(), "{j}");
        assert_eq!(j["n"], 1);
        assert_eq!(j["mean"], -0.001);
        // Old files with `"std": 0.0` and one seed still read, and still give no interval.
        let old: Summary =
            serde_json::from_str(r#"{"mean":0.5,"std":0.0,"min":0.5,"max":0.5,"n":1}"#).unwrap();
        assert_eq!(old.verdict(), Verdict::OneSeed);
        let back: Summary = serde_json::from_value(j).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn seeds_that_agree_keep_their_zero_width_interval() {
        // A deterministic experiment over several seeds: std 0 is measured, and a real finding.
        let s = Summary::of(&[0.125, 0.125, 0.125]).unwrap();
        assert_eq!(s.std, Some(0.0));
        assert_eq!(s.interval95(), Some((0.125, 0.125)));
        assert_eq!(s.verdict(), Verdict::Gain);
        // Said as what it is, not as `[+0.125, +0.125]`, which reads as a measured spread.
        assert_eq!(s.show_interval(3), "+0.125 [all 3 seeds equal]");
        assert_eq!(s.show_ci(3), "all 3 seeds equal");
        // Repeats whose mean is not exact in binary: a spread of ~1e-17, still a point.
        let r = Summary::of(&[0.099, 0.099, 0.099]).unwrap();
        assert_eq!(r.show_interval(3), "+0.099 [all 3 seeds equal]");
        // Nearly equal is not equal.
        let near = Summary::of(&[0.099, 0.099, 0.0991]).unwrap();
        assert!(!near.all_seeds_equal());
        assert!(near.show_interval(3).starts_with("+0.099 [+0."));
        assert_eq!(r.verdict(), Verdict::Gain);
        assert_eq!(s.half_width95(), Some(0.0));
        assert_eq!(
            Summary::of(&[-0.05, -0.05]).unwrap().verdict(),
            Verdict::Loss
        );
        let j = serde_json::to_value(s).unwrap();
        assert_eq!(j["std"], 0.0);
    }

    #[test]
    fn scaling_keeps_the_interval_and_the_order() {
        let s = Summary::of(&[0.01, 0.02, 0.03]).unwrap();
        let p = s.scaled(100.0);
        assert!((p.mean - 2.0).abs() < 1e-12 && (p.std.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!((p.min, p.max, p.n), (1.0, 3.0, 3));
        let (lo, hi) = s.interval95().unwrap();
        let (plo, phi) = p.interval95().unwrap();
        assert!((plo - 100.0 * lo).abs() < 1e-9 && (phi - 100.0 * hi).abs() < 1e-9);
        let neg = s.scaled(-1.0);
        assert_eq!((neg.min, neg.max), (-0.03, -0.01));
        assert!(neg.std.unwrap() > 0.0);
        assert_eq!(Summary::of(&[0.2]).unwrap().scaled(100.0).std, None);
    }
}
