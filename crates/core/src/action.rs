//! What policies ask a machine to do.

use crate::cpuset::CpuSet;
use crate::task::TaskId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One placement change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Restrict a task (every thread of it) to a set of CPUs.
    SetAffinity {
        /// The task.
        task: TaskId,
        /// Where it may run.
        cpus: CpuSet,
    },
    /// Exchange the CPU sets of two tasks (MASA's process swap between packages).
    Swap {
        /// One task.
        a: TaskId,
        /// The other.
        b: TaskId,
    },
}

impl Action {
    /// Tasks this action touches.
    pub fn tasks(&self) -> Vec<TaskId> {
        match self {
            Action::SetAffinity { task, .. } => vec![*task],
            Action::Swap { a, b } => vec![*a, *b],
        }
    }
}

/// A static placement: each task's CPU set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement(pub BTreeMap<TaskId, CpuSet>);

impl Placement {
    /// The actions that impose this placement.
    pub fn actions(&self) -> Vec<Action> {
        self.0
            .iter()
            .map(|(t, c)| Action::SetAffinity {
                task: *t,
                cpus: c.clone(),
            })
            .collect()
    }
}
