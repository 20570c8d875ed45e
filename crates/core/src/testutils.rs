//! Shared test fixtures (feature `testutils`): symmetric topologies, hand-built observations and
//! a [`ScriptedMachine`], so the policy, simulator and host tests do not each rebuild them.
//!
//! Enable with `counterpoint-core = { workspace = true, features = ["testutils"] }` under
//! `[dev-dependencies]`. Nothing here is for production use: constructors panic on bad shapes.

use crate::action::Action;
use crate::cpuset::{CpuId, CpuSet};
use crate::event;
use crate::machine::Machine;
use crate::observation::{CpuObservation, Observation, TaskObservation};
use crate::sample::{CounterValue, Sample};
use crate::task::{TaskId, TaskInfo};
use crate::topology::{SymmetricSpec, Topology};

/// The interval of the hand-built observations: one second.
pub const INTERVAL_NS: u64 = 1_000_000_000;

/// A symmetric machine of `packages` x `cores` x `threads` (panics on a zero dimension).
pub fn topo(packages: u32, cores: u32, threads: u32) -> Topology {
    Topology::symmetric(&SymmetricSpec {
        packages,
        cores_per_package: cores,
        threads_per_core: threads,
        ..Default::default()
    })
    .expect("a test topology needs non-zero dimensions")
}

/// A task that ran the whole interval on `cpu`, allowed on `all`, with the given event counts
/// (task-clock is the whole interval unless `events` sets it).
pub fn task(id: u64, cpu: CpuId, all: &CpuSet, events: &[(&str, f64)]) -> TaskObservation {
    let mut s = Sample::new(Some(TaskId(id)), INTERVAL_NS);
    s.set(
        event::TASK_CLOCK,
        CounterValue::exact(INTERVAL_NS, INTERVAL_NS),
    );
    for (e, v) in events {
        s.set(e, CounterValue::exact(*v as u64, INTERVAL_NS));
    }
    TaskObservation {
        id: TaskId(id),
        name: format!("t{id}"),
        affinity: all.clone(),
        cpu: Some(cpu),
        sample: s,
        runnable: true,
        finished: false,
        code: None,
    }
}

/// An observation of one [`INTERVAL_NS`] ending at `INTERVAL_NS`: the tasks (sorted by id)
/// and every online CPU running the task that sits on it, exactly as busy as the task-clock of
/// the tasks on it says (no load from other processes).
pub fn observation(topology: &Topology, tasks: Vec<TaskObservation>) -> Observation {
    observation_at(topology, tasks, INTERVAL_NS)
}

/// [`observation`] ending at `time_ns`.
pub fn observation_at(
    topology: &Topology,
    mut tasks: Vec<TaskObservation>,
    time_ns: u64,
) -> Observation {
    tasks.sort_by_key(|t| t.id);
    let cpus = topology
        .online_cpus()
        .iter()
        .map(|c| CpuObservation {
            cpu: c,
            running: tasks.iter().find(|t| t.cpu == Some(c)).map(|t| t.id),
            busy_fraction: tasks
                .iter()
                .filter(|t| t.cpu == Some(c))
                .filter_map(|t| t.sample.get(event::TASK_CLOCK))
                .map(|ns| ns / INTERVAL_NS as f64)
                .sum::<f64>()
                .min(1.0),
            sample: Sample::new(None, INTERVAL_NS),
        })
        .collect();
    Observation {
        time_ns,
        interval_ns: INTERVAL_NS,
        tasks,
        cpus,
        memory_utilization: vec![],
    }
}

/// The error of a [`ScriptedMachine`] told to fail its applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scripted apply failure for {0:?}")]
pub struct ScriptedError(pub Action);

/// A machine whose tasks are always busy (task-clock = interval, fixed instruction counts),
/// that records and carries out the actions applied to it. For driver and policy tests.
#[derive(Clone, Debug)]
pub struct ScriptedMachine {
    topology: Topology,
    /// Current affinity of each task (ids 1..=n).
    pub affinity: Vec<CpuSet>,
    /// Actions applied, in order.
    pub applied: Vec<Action>,
    /// Simulated time.
    pub now_ns: u64,
    /// Every task reports `finished` from this interval on (1-based).
    pub finish_after: Option<u64>,
    /// Every apply fails with [`ScriptedError`].
    pub fail_applies: bool,
    intervals: u64,
}

impl ScriptedMachine {
    /// `packages` x `cores` x `threads` with `tasks` tasks (ids 1..=tasks) allowed everywhere.
    pub fn new(packages: u32, cores: u32, threads: u32, tasks: u64) -> Self {
        let topology = topo(packages, cores, threads);
        let all = topology.online_cpus();
        Self {
            affinity: (0..tasks).map(|_| all.clone()).collect(),
            topology,
            applied: Vec::new(),
            now_ns: 0,
            finish_after: None,
            fail_applies: false,
            intervals: 0,
        }
    }

    fn index(&self, t: TaskId) -> Result<usize, ScriptedError> {
        let i = t.0.checked_sub(1).map(|i| i as usize);
        i.filter(|&i| i < self.affinity.len()).ok_or_else(|| {
            ScriptedError(Action::SetAffinity {
                task: t,
                cpus: CpuSet::new(),
            })
        })
    }
}

impl Machine for ScriptedMachine {
    type Error = ScriptedError;
    fn topology(&self) -> &Topology {
        &self.topology
    }
    fn tasks(&self) -> Vec<TaskInfo> {
        self.affinity
            .iter()
            .enumerate()
            .map(|(i, a)| TaskInfo {
                id: TaskId(i as u64 + 1),
                name: format!("t{}", i + 1),
                affinity: a.clone(),
                last_cpu: a.first(),
                threads: 1,
            })
            .collect()
    }
    fn advance(&mut self, interval_ns: u64) -> Result<Observation, ScriptedError> {
        self.now_ns += interval_ns;
        self.intervals += 1;
        let finished = self.finish_after.is_some_and(|f| self.intervals >= f);
        let tasks = self
            .affinity
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let cpu = a.first().unwrap_or(0);
                let mut t = task(i as u64 + 1, cpu, a, &[(event::INSTRUCTIONS, 1e9)]);
                t.finished = finished;
                t.runnable = !finished;
                t
            })
            .collect();
        let mut obs = observation_at(&self.topology, tasks, self.now_ns);
        obs.interval_ns = interval_ns;
        Ok(obs)
    }
    fn apply(&mut self, action: &Action) -> Result<(), ScriptedError> {
        if self.fail_applies {
            return Err(ScriptedError(action.clone()));
        }
        match action {
            // One thread per task: a thread-level action sets the task.
            Action::SetAffinity { task, cpus } | Action::SetThreadAffinity { task, cpus, .. } => {
                let i = self.index(*task)?;
                self.affinity[i] = cpus.intersection(&self.topology.online_cpus());
            }
            Action::Swap { a, b } => {
                let (i, j) = (self.index(*a)?, self.index(*b)?);
                self.affinity.swap(i, j);
            }
        }
        self.applied.push(action.clone());
        Ok(())
    }
}
