//! What a machine reports after each interval: per-task and per-CPU samples.

use crate::cpuset::{CpuId, CpuSet};
use crate::sample::Sample;
use crate::superfunction::TaskCode;
use crate::task::TaskId;
use serde::{Deserialize, Serialize};

/// One task over the interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskObservation {
    /// The task.
    pub id: TaskId,
    /// Its command or program name.
    pub name: String,
    /// CPUs it may run on at the end of the interval.
    pub affinity: CpuSet,
    /// CPU the task was on at the end of the interval (or last ran on).
    pub cpu: Option<CpuId>,
    /// Counter deltas over the interval (with counted fractions).
    pub sample: Sample,
    /// Whether the task wanted to run at the end of the interval.
    pub runnable: bool,
    /// Whether the task ended during (or before) the interval.
    pub finished: bool,
    /// Its sampled code pages and SuperFunction types, when the policy asked for them
    /// ([`crate::Policy::wants_code_heatmaps`]) and the source can sample (a live host; the
    /// simulator leaves it `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<TaskCode>,
}

/// One CPU over the interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuObservation {
    /// The CPU.
    pub cpu: CpuId,
    /// Task running at the end of the interval.
    pub running: Option<TaskId>,
    /// Fraction of the interval the CPU was busy, in [0, 1].
    pub busy_fraction: f64,
    /// Per-CPU counters over the interval, where the source has them.
    pub sample: Sample,
}

/// Everything observed over one interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Time at the end of the interval, since the machine started.
    pub time_ns: u64,
    /// Length of the interval.
    pub interval_ns: u64,
    /// Sorted by task id.
    pub tasks: Vec<TaskObservation>,
    /// Sorted by CPU id.
    pub cpus: Vec<CpuObservation>,
    /// Utilization of each memory bus / controller in [0, 1], where the source knows it.
    pub memory_utilization: Vec<f64>,
}

impl Observation {
    /// The observation of task `id`.
    pub fn task(&self, id: TaskId) -> Option<&TaskObservation> {
        self.tasks
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .map(|i| &self.tasks[i])
    }
}
