//! Task identity. On a live host a task is a process (its threads placed together); in the
//! simulator it is one simulated program or server.

use crate::cpuset::{CpuId, CpuSet};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A task: the PID on a live host, an index in the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a machine knows about a task between intervals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// The task.
    pub id: TaskId,
    /// Command name (`comm`) or catalog program name.
    pub name: String,
    /// CPUs the task may run on.
    pub affinity: CpuSet,
    /// CPU the task ran on last, if known.
    pub last_cpu: Option<CpuId>,
    /// Number of threads (1 in the simulator).
    pub threads: u32,
}
