//! System-level metrics of a co-run, as the seeds define them.
//!
//! Per task, normalized performance `NP = T_alone / T_shared` over the CPU time the task had
//! (or throughput shared / alone). System normalized performance is the geometric mean of NP and
//! unfairness is the coefficient of variation std/mean of NP (Zhang et al.). NP does not charge
//! a task for the time it waited for a CPU; Eyerman & Eeckhout's STP and ANTT do: they are over
//! each task's *progress*, the time its work takes alone over the wall-clock time it took in
//! the run (from its arrival to its finish or the end), so three copies time-sharing one CPU
//! have STP about 1, not 3. STP is the sum of the progresses and ANTT the mean of their
//! inverses ([`system_metrics_with_progress`]).

use serde::{Deserialize, Serialize};

/// Summary of a set of per-task normalized performances.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemMetrics {
    /// Geometric mean of the NPs (of the tasks that ran).
    pub normalized_performance: f64,
    /// Coefficient of variation of the NPs (of the tasks that ran).
    pub unfairness: f64,
    /// System throughput: the sum of the tasks' wall-clock progresses; `None` when only NPs
    /// were given ([`system_metrics`]).
    pub stp: Option<f64>,
    /// Average normalized turnaround time: the mean of 1/progress; `None` when only NPs were
    /// given or when a task made no progress at all (its turnaround is unbounded).
    pub antt: Option<f64>,
    /// Tasks that never ran: they have no NP and are not in the geometric mean or the
    /// unfairness (a starved task must not vanish from a summary unannounced).
    pub tasks_without_np: usize,
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

/// NP geometric mean and unfairness from per-task NP values (STP and ANTT need progresses:
/// [`system_metrics_with_progress`]).
pub fn system_metrics(np: &[f64]) -> Option<SystemMetrics> {
    let gm = geometric_mean(np)?;
    let (mean, std) = mean_std(np)?;
    Some(SystemMetrics {
        normalized_performance: gm,
        unfairness: if mean > 0.0 { std / mean } else { 0.0 },
        stp: None,
        antt: None,
        tasks_without_np: 0,
    })
}

/// Every system metric: `np[i]` is task `i`'s NP (`None` if it never ran) and `progress[i]`
/// its wall-clock progress (0 if it retired nothing). `None` when no task has an NP.
pub fn system_metrics_with_progress(np: &[Option<f64>], progress: &[f64]) -> Option<SystemMetrics> {
    let ran: Vec<f64> = np.iter().flatten().copied().collect();
    let mut m = system_metrics(&ran)?;
    m.tasks_without_np = np.len() - ran.len();
    m.stp = Some(progress.iter().sum());
    m.antt = (!progress.is_empty() && progress.iter().all(|&p| p > 0.0))
        .then(|| progress.iter().map(|p| 1.0 / p).sum::<f64>() / progress.len() as f64);
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_slowdowns_are_fair() {
        let m = system_metrics(&[0.5, 0.5, 0.5]).unwrap();
        assert!((m.normalized_performance - 0.5).abs() < 1e-12);
        assert_eq!(m.unfairness, 0.0);
        assert_eq!((m.stp, m.antt), (None, None));
    }

    #[test]
    fn stp_and_antt_are_over_wall_clock_progress() {
        // Three copies time-sharing one CPU: each runs at full speed while it runs (NP 1) but
        // progresses at a third of its solo speed.
        let np = [Some(1.0); 3];
        let m = system_metrics_with_progress(&np, &[1.0 / 3.0; 3]).unwrap();
        assert!((m.normalized_performance - 1.0).abs() < 1e-12);
        assert!((m.stp.unwrap() - 1.0).abs() < 1e-12);
        assert!((m.antt.unwrap() - 3.0).abs() < 1e-12);
        assert_eq!(m.tasks_without_np, 0);
    }

    #[test]
    fn a_starved_task_is_counted_not_dropped() {
        let m = system_metrics_with_progress(&[Some(1.0), None, None], &[1.0, 0.0, 0.0]).unwrap();
        assert_eq!(m.tasks_without_np, 2);
        assert!((m.stp.unwrap() - 1.0).abs() < 1e-12);
        // No progress: an unbounded turnaround, not a mean over the tasks that ran.
        assert_eq!(m.antt, None);
        assert!(system_metrics_with_progress(&[None], &[0.0]).is_none());
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
