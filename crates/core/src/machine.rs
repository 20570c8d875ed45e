//! The seam between machines and policies.
//!
//! [`Machine`] is implemented by the live host and by the simulator; [`Policy`] is an epoch-level
//! placement policy that works on both; [`PickNext`] is a kernel-level hook (what a scheduler does
//! at each context switch) that only the simulator can call.

use crate::action::Action;
use crate::cpuset::CpuId;
use crate::observation::Observation;
use crate::task::{TaskId, TaskInfo};
use crate::topology::Topology;

/// A machine that runs tasks and can be observed and steered.
pub trait Machine {
    /// Why observing or acting failed.
    type Error: std::error::Error + Send + Sync + 'static;
    /// The machine's CPUs, caches and memory.
    fn topology(&self) -> &Topology;
    /// Tasks currently known (sorted by id).
    fn tasks(&self) -> Vec<TaskInfo>;
    /// Run (or wait) for `interval_ns` and report what happened.
    fn advance(&mut self, interval_ns: u64) -> Result<Observation, Self::Error>;
    /// Carry out one action.
    fn apply(&mut self, action: &Action) -> Result<(), Self::Error>;
    /// Nothing is left to run (the simulator reached its duration or every task is done); the
    /// [`driver`](crate::driver) stops. A live host finishes only when it watches an explicit
    /// list of processes and every one of them has exited; other target specs can always gain
    /// new matching tasks.
    fn finished(&self) -> bool {
        false
    }
}

/// An epoch-level placement policy: sees each interval's observation, returns actions.
pub trait Policy {
    /// The policy's name as the command line spells it.
    fn name(&self) -> &str;
    /// Events the policy needs; a host without them must refuse to run it.
    fn required_events(&self) -> Vec<&'static str>;
    /// Decide on the actions for the next interval.
    fn decide(&mut self, topology: &Topology, observation: &Observation) -> Vec<Action>;
    /// Why the last [`Policy::decide`] asked for `action`, in the policy's own terms (for the
    /// agent's log); `None` when the policy does not say.
    fn reason(&self, _action: &Action) -> Option<String> {
        None
    }
    /// Whether the policy reads [`TaskObservation::code`](crate::TaskObservation::code): a
    /// host samples instruction pointers (and pays for it) only for policies that say so.
    fn wants_code_heatmaps(&self) -> bool {
        false
    }
    /// Whether [`Policy::decide`] reads the observation at all. A policy that never acts on it
    /// (the baseline) says `false`, and a simulated machine then skips building one per epoch
    /// (for 10,000 tasks on 1024 CPUs, most of a run's time went to it).
    fn reads_observations(&self) -> bool {
        true
    }
}

/// Last-value statistics of a task, as a kernel-level scheduler would keep them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskStats {
    /// The task.
    pub task: TaskId,
    /// Instructions per cycle over the task's last time slice.
    pub ipc: f64,
    /// Lines the task moved over the memory bus per second over the last slice (its
    /// `mem-transactions`, in cache lines) divided by the bus's peak in lines per second.
    pub bus_utilization: f64,
    /// LLC misses per thousand instructions over the last slice.
    pub llc_mpki: f64,
    /// Fraction of retired instructions that were floating point.
    pub fp_fraction: f64,
}

/// What a CPU sees when choosing its next task.
#[derive(Clone, Copy, Debug)]
pub struct PickContext<'a> {
    /// The CPU choosing.
    pub cpu: CpuId,
    /// Simulated time now.
    pub now_ns: u64,
    /// The machine.
    pub topology: &'a Topology,
    /// Candidates, in run-queue order (the baseline would take the first).
    pub ready: &'a [TaskStats],
    /// What the other CPUs are running now (`None` = idle), sorted by CPU.
    pub others: &'a [(CpuId, Option<TaskStats>)],
    /// Peak memory-bus bandwidth in transactions per second (for utilization arithmetic).
    pub bus_peak_transactions_per_s: f64,
}

/// A kernel-level scheduling hook: pick which ready task runs next on a CPU.
pub trait PickNext {
    /// The hook's name as the command line spells it.
    fn name(&self) -> &str;
    /// Index into `ctx.ready` of the task to run. Called only with a non-empty `ready`.
    fn pick(&mut self, ctx: &PickContext<'_>) -> usize;
}
