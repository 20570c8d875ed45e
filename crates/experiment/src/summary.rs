//! Statistics over seeds: every number an experiment reports is a mean with its spread.

use serde::{Deserialize, Serialize};

/// Mean, sample standard deviation and range of one quantity over seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Mean over seeds.
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for a single seed.
    pub std: f64,
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
}

impl Verdict {
    /// The words the reports use.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Gain => "gain",
            Verdict::Loss => "loss",
            Verdict::NoMeasurableGain => "no measurable gain",
        }
    }
}

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
        let std = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Self {
            mean,
            std,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n,
        })
    }

    /// The 95 % confidence interval of the mean (Student's t over the seeds). One seed gives
    /// the point itself when its value is exact (std 0), as deterministic runs are.
    pub fn interval95(&self) -> (f64, f64) {
        if self.std == 0.0 {
            return (self.mean, self.mean);
        }
        let half = t975(self.n.saturating_sub(1)) * self.std / (self.n as f64).sqrt();
        (self.mean - half, self.mean + half)
    }

    /// Gain, loss, or no measurable gain: whether the 95 % interval of this difference
    /// excludes zero, by more than [`RESOLUTION`] (a deterministic difference of 1e-6 is not a
    /// gain the reports could show).
    pub fn verdict(&self) -> Verdict {
        let (lo, hi) = self.interval95();
        if lo > RESOLUTION {
            Verdict::Gain
        } else if hi < -RESOLUTION {
            Verdict::Loss
        } else {
            Verdict::NoMeasurableGain
        }
    }

    /// `mean [lo, hi]` with `digits` decimals and a sign (a difference with its interval).
    pub fn show_interval(&self, digits: usize) -> String {
        let (lo, hi) = self.interval95();
        format!("{:+.d$} [{:+.d$}, {:+.d$}]", self.mean, lo, hi, d = digits)
    }

    /// `mean ± std` with `digits` decimals (just the mean for one seed).
    pub fn show(&self, digits: usize) -> String {
        if self.n > 1 {
            format!("{:.d$} ± {:.d$}", self.mean, self.std, d = digits)
        } else {
            format!("{:.d$}", self.mean, d = digits)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_spread() {
        let s = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.mean, 2.0);
        assert!((s.std - 1.0).abs() < 1e-12);
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
        assert_eq!(Summary::of(&[0.1]).unwrap().verdict(), Verdict::Gain);
        // A deterministic difference below the resolution is no gain and no loss.
        let tiny = Summary::of(&[-1e-6, -1e-6]).unwrap();
        assert_eq!(tiny.verdict(), Verdict::NoMeasurableGain);
        // Two seeds with spread: the t quantile is wide.
        let two = Summary::of(&[0.01, 0.03]).unwrap();
        let (lo, hi) = two.interval95();
        assert!(lo < 0.0 && hi > 0.04, "{lo} {hi}");
        assert_eq!(g.show_interval(3), "+0.020 [+0.011, +0.029]");
    }
}
