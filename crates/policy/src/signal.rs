//! Per-task signals the policies read from an [`Observation`](counterpoint_core::Observation): IPC, bus utilization, LLC miss
//! rate, CPU use. Each comes from a `core::metric` formula or a plain event rate, so a policy
//! computes the same number on the live host and in the simulator.

use counterpoint_core::event;
use counterpoint_core::metric;
use counterpoint_core::observation::TaskObservation;
use counterpoint_core::sample::Sample;

/// Seconds the task was on a CPU during the interval (task-clock), if counted.
pub fn cpu_seconds(sample: &Sample) -> Option<f64> {
    sample.get(event::TASK_CLOCK).map(|ns| ns / 1e9)
}

/// CPUs used over the interval (task-clock over wall time); 0 when nothing was counted.
pub fn cpu_utilization(sample: &Sample) -> f64 {
    metric::cpu_utilization().eval_sample(sample).unwrap_or(0.0)
}

/// Events per second of wall time over the interval.
pub fn wall_rate(sample: &Sample, event_name: &str) -> Option<f64> {
    let secs = sample.interval_ns as f64 / 1e9;
    if secs <= 0.0 {
        return None;
    }
    sample.get(event_name).map(|n| n / secs)
}

/// Events per second of the task's own CPU time: what the task demands while it runs. Falls
/// back to wall time when task-clock is missing.
pub fn running_rate(sample: &Sample, event_name: &str) -> Option<f64> {
    let n = sample.get(event_name)?;
    match cpu_seconds(sample) {
        Some(s) if s > 0.0 => Some(n / s),
        Some(_) => None,
        None => wall_rate(sample, event_name),
    }
}

/// Instructions per cycle over the interval.
pub fn ipc(sample: &Sample) -> Option<f64> {
    metric::ipc().eval_sample(sample)
}

/// LLC misses per thousand instructions.
pub fn llc_mpki(sample: &Sample) -> Option<f64> {
    metric::llc_mpki().eval_sample(sample)
}

/// Memory-bus transactions per second of running time (Zhang's bus utilization up to the
/// bus's constant peak, which does not change a ranking). Where the source has no
/// `mem-transactions` event, LLC misses (one line transfer each) stand in for it.
pub fn bus_rate(sample: &Sample) -> Option<f64> {
    running_rate(sample, event::MEM_TRANSACTIONS)
        .or_else(|| running_rate(sample, event::CACHE_MISSES))
}

/// Whether a task is a live candidate for placement (not finished).
pub fn is_live(t: &TaskObservation) -> bool {
    !t.finished
}

/// Whether the task ran at all during the interval.
pub fn ran(t: &TaskObservation) -> bool {
    cpu_seconds(&t.sample).is_some_and(|s| s > 0.0)
        || t.sample.get(event::INSTRUCTIONS).is_some_and(|n| n > 0.0)
}
