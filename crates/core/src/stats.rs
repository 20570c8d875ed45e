//! System-level metrics of a co-run, as the seeds define them.
//!
//! Per task, normalized performance `NP = T_alone / T_shared` (or throughput shared / alone).
//! System normalized performance is the geometric mean of NP and unfairness is the coefficient of
//! variation std/mean of NP (Zhang et al.); STP = sum NP and ANTT = mean 1/NP (Eyerman & Eeckhout).

use serde::{Deserialize, Serialize};

/// Summary of a set of per-task normalized performances.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemMetrics {
    /// Geometric mean of the NPs.
    pub normalized_performance: f64,
    /// Coefficient of variation of the NPs.
    pub unfairness: f64,
    /// System throughput: the sum of the NPs.
    pub stp: f64,
    /// Average normalized turnaround time: the mean of 1/NP.
    pub antt: f64,
}

/// Geometric mean; `None` for an empty slice or a non-positive value.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan() || *v <= 0.0) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// Arithmetic mean and population standard deviation.
pub fn mean_std(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    Some((mean, var.sqrt()))
}

/// All system metrics from per-task NP values.
pub fn system_metrics(np: &[f64]) -> Option<SystemMetrics> {
    let gm = geometric_mean(np)?;
    let (mean, std) = mean_std(np)?;
    Some(SystemMetrics {
        normalized_performance: gm,
        unfairness: if mean > 0.0 { std / mean } else { 0.0 },
        stp: np.iter().sum(),
        antt: np.iter().map(|v| 1.0 / v).sum::<f64>() / np.len() as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_slowdowns_are_fair() {
        let m = system_metrics(&[0.5, 0.5, 0.5]).unwrap();
        assert!((m.normalized_performance - 0.5).abs() < 1e-12);
        assert_eq!(m.unfairness, 0.0);
        assert!((m.stp - 1.5).abs() < 1e-12);
        assert!((m.antt - 2.0).abs() < 1e-12);
    }

    #[test]
    fn unequal_slowdowns() {
        let m = system_metrics(&[1.0, 0.25]).unwrap();
        assert!((m.normalized_performance - 0.5).abs() < 1e-12);
        assert!((m.unfairness - 0.6).abs() < 1e-12);
        assert!(system_metrics(&[]).is_none());
        assert!(geometric_mean(&[1.0, 0.0]).is_none());
    }
}
