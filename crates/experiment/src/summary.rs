//! Statistics over seeds: every number an experiment reports is a mean with its spread.

use serde::{Deserialize, Serialize};

/// Mean, sample standard deviation and range of one quantity over seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for a single seed.
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
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
}
