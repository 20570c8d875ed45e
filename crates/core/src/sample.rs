//! Counter values and samples: what one counter read, or a set of reads over an interval, gives.
//!
//! Every value carries the time the counter was enabled and the time it was actually running on
//! the hardware; when counters are multiplexed the raw count covers only `time_running` and is
//! scaled up by `time_enabled / time_running`, and the fraction counted is reported beside it.

use crate::task::TaskId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One counter's reading (or delta between two readings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterValue {
    /// The count as read (not scaled).
    pub raw: u64,
    /// Time the event was enabled.
    pub time_enabled_ns: u64,
    /// Time it was actually counting (less than enabled when multiplexed).
    pub time_running_ns: u64,
}

impl CounterValue {
    /// A value that was counted the whole time (the simulator, software events).
    pub fn exact(raw: u64, time_ns: u64) -> Self {
        Self {
            raw,
            time_enabled_ns: time_ns,
            time_running_ns: time_ns,
        }
    }
    /// The count extrapolated to the whole enabled time. `None` when the counter never ran
    /// (perf's `<not counted>`): there is nothing to scale.
    pub fn scaled(&self) -> Option<f64> {
        if self.time_running_ns == 0 {
            if self.time_enabled_ns == 0 && self.raw != 0 {
                // Enabled/running times not reported: take the raw count as is.
                return Some(self.raw as f64);
            }
            return None;
        }
        if self.time_running_ns >= self.time_enabled_ns {
            return Some(self.raw as f64);
        }
        Some(self.raw as f64 * self.time_enabled_ns as f64 / self.time_running_ns as f64)
    }
    /// Fraction of the enabled time the counter was running, in [0, 1]; 1 when not multiplexed.
    pub fn counted_fraction(&self) -> f64 {
        if self.time_enabled_ns == 0 {
            return if self.time_running_ns == 0 { 1.0 } else { 0.0 };
        }
        (self.time_running_ns as f64 / self.time_enabled_ns as f64).min(1.0)
    }
    /// Whether the counter was multiplexed (ran for less than it was enabled).
    pub fn multiplexed(&self) -> bool {
        self.time_running_ns < self.time_enabled_ns
    }
    /// The delta `self - earlier` of two cumulative readings; wrapping-safe for the count.
    pub fn delta_since(&self, earlier: &CounterValue) -> CounterValue {
        CounterValue {
            raw: self.raw.wrapping_sub(earlier.raw),
            time_enabled_ns: self.time_enabled_ns.saturating_sub(earlier.time_enabled_ns),
            time_running_ns: self.time_running_ns.saturating_sub(earlier.time_running_ns),
        }
    }
}

/// Counter deltas for one task over one interval, keyed by event name (perf's spelling).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The task (`None` for a per-CPU sample).
    pub task: Option<TaskId>,
    /// Length of the interval.
    pub interval_ns: u64,
    /// Deltas by event name.
    pub values: BTreeMap<String, CounterValue>,
}

impl Sample {
    /// An empty sample.
    pub fn new(task: Option<TaskId>, interval_ns: u64) -> Self {
        Self {
            task,
            interval_ns,
            values: BTreeMap::new(),
        }
    }
    /// Set the delta of `event`.
    pub fn set(&mut self, event: &str, value: CounterValue) {
        self.values.insert(event.to_string(), value);
    }
    /// Scaled value of an event, if it was collected and ran.
    pub fn get(&self, event: &str) -> Option<f64> {
        self.values.get(event).and_then(CounterValue::scaled)
    }
    /// The smallest counted fraction over all events (1 when every event ran the whole time).
    pub fn counted_fraction(&self) -> f64 {
        self.values
            .values()
            .map(CounterValue::counted_fraction)
            .fold(1.0, f64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_multiplexed_values() {
        let v = CounterValue {
            raw: 1000,
            time_enabled_ns: 400,
            time_running_ns: 100,
        };
        assert_eq!(v.scaled(), Some(4000.0));
        assert!((v.counted_fraction() - 0.25).abs() < 1e-12);
        assert!(v.multiplexed());
        let never = CounterValue {
            raw: 0,
            time_enabled_ns: 400,
            time_running_ns: 0,
        };
        assert_eq!(never.scaled(), None);
        assert_eq!(never.counted_fraction(), 0.0);
    }

    #[test]
    fn delta_wraps() {
        let a = CounterValue::exact(u64::MAX - 1, 10);
        let b = CounterValue::exact(3, 30);
        let d = b.delta_since(&a);
        assert_eq!(d.raw, 5);
        assert_eq!(d.time_enabled_ns, 20);
    }
}
