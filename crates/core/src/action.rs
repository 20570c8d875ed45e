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
    /// Restrict one thread of a task to a set of CPUs (SchedTask's placement of threads by
    /// their code: a process whose threads run different code is split across cores). On a
    /// live host `tid` is a Linux thread id of process `task`; the simulator's tasks have one
    /// thread each, so there it sets the whole task whatever `tid` says.
    SetThreadAffinity {
        /// The task (process) the thread belongs to.
        task: TaskId,
        /// The thread.
        tid: u64,
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
            Action::SetAffinity { task, .. } | Action::SetThreadAffinity { task, .. } => {
                vec![*task]
            }
            Action::Swap { a, b } => vec![*a, *b],
        }
    }

    /// The thread this action places on its own, if it is a thread-level action.
    pub fn thread(&self) -> Option<u64> {
        match self {
            Action::SetThreadAffinity { tid, .. } => Some(*tid),
            _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_tagged_in_json_and_name_their_tasks() {
        let a = Action::SetThreadAffinity {
            task: TaskId(7),
            tid: 9,
            cpus: CpuSet::single(1),
        };
        let j = serde_json::to_string(&a).unwrap();
        assert!(j.contains("\"action\":\"set_thread_affinity\""), "{j}");
        assert!(j.contains("\"tid\":9"), "{j}");
        assert_eq!(serde_json::from_str::<Action>(&j).unwrap(), a);
        assert_eq!(a.tasks(), vec![TaskId(7)]);
        assert_eq!(a.thread(), Some(9));
        let p = Action::SetAffinity {
            task: TaskId(7),
            cpus: CpuSet::single(1),
        };
        assert_eq!(p.thread(), None);
    }
}
