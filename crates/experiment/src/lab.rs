//! The experiments' view of the simulated machine: a [`Lab`] runs a [`Job`] (a catalog scenario
//! or machine + programs + initial affinities) under a policy and a pick-next hook for one seed
//! and reports per-task outcomes. The experiments are written against this trait only; the
//! simulator implements it (`sim_lab`); the tests run the experiments on it with shortened jobs
//! (`tests/experiments.rs`), there is no second model.

use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::machine::{PickNext, Policy};
use counterpoint_core::topology::Topology;
use std::collections::BTreeMap;

/// One task of a custom job: a program, or a sequence of programs run back to back (a MASA
/// "shell"), with an optional initial affinity.
#[derive(Clone, Debug, PartialEq)]
pub struct JobTask {
    /// Display name (`shell_0`, `INT#1`, ...).
    pub name: String,
    /// Catalog program names, run in order.
    pub programs: Vec<String>,
    /// Initial affinity (`None` = every CPU).
    pub affinity: Option<CpuSet>,
    /// Start the work over when it is done (constant contention, rate-based measures);
    /// `false` = run once, so completion times are measured.
    pub repeat: bool,
}

impl JobTask {
    /// A repeating single-program task.
    pub fn program(name: &str, program: &str, affinity: Option<CpuSet>) -> Self {
        Self {
            name: name.to_string(),
            programs: vec![program.to_string()],
            affinity,
            repeat: true,
        }
    }
    /// Run the work once (completion times are measured) instead of repeating it.
    pub fn once(mut self) -> Self {
        self.repeat = false;
        self
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    /// A scenario from the catalog, as it is.
    Scenario(String),
    /// A machine and tasks.
    Custom {
        /// Catalog machine name.
        machine: String,
        /// The tasks.
        tasks: Vec<JobTask>,
        /// Simulated time limit (the run also ends when every non-repeating task is done).
        duration_ns: u64,
        /// Simulation tick; `None` = the simulator's default (1 ms).
        tick_ns: Option<u64>,
    },
}

/// How to run it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSpec {
    /// Simulator seed.
    pub seed: u64,
    /// Interval between policy decisions.
    pub epoch_ns: u64,
}

/// One task's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskOutcome {
    /// The task's display name.
    pub name: String,
    /// Normalized performance: time alone / time shared (or throughput ratio).
    pub np: f64,
    /// Simulated time from start to finishing its work, for non-repeating tasks that finished
    /// (resolution: one epoch).
    pub completion_ns: Option<u64>,
    /// Wall time per completion of its work at the task's average rate (MASA's "time to
    /// complete" with constant contention).
    pub wall_ns_per_program: Option<f64>,
    /// Event totals over the run (canonical event names).
    pub events: BTreeMap<String, f64>,
}

/// One run's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Per task, in job order.
    pub tasks: Vec<TaskOutcome>,
    /// Simulated time the run took.
    pub elapsed_ns: u64,
}

impl Outcome {
    /// Every task's NP.
    pub fn np(&self) -> Vec<f64> {
        self.tasks.iter().map(|t| t.np).collect()
    }
    /// System metrics over the tasks' NPs.
    pub fn system(&self) -> Option<counterpoint_core::stats::SystemMetrics> {
        counterpoint_core::stats::system_metrics(&self.np())
    }
}

/// A failure inside the lab (unknown scenario, bad job, simulator error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LabError(pub String);

/// The simulated machine as the experiments use it.
pub trait Lab: Sync {
    /// The topology a job runs on (for building placements before the run).
    fn topology(&self, job: &Job) -> Result<Topology, LabError>;
    /// Run a job under an epoch-level policy and a pick-next hook.
    fn run(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
        pick: &mut dyn PickNext,
    ) -> Result<Outcome, LabError>;
    /// Run a job under an epoch-level policy only, without the automatic solo reference runs:
    /// `np` is NaN and the caller derives what it needs from the event totals (the oracle
    /// search evaluates thousands of placements this way).
    fn run_light(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError>;
    /// Catalog program names usable in random mixes, with their class (for the report).
    fn mix_programs(&self) -> Vec<String>;
    /// The simulator physics every job is forced to, if any (`--model`); `None` runs each
    /// scenario under its own.
    fn forced_model(&self) -> Option<counterpoint_sim::Model> {
        None
    }
    /// What the runs since the last call ran under and how long they were, and forget them:
    /// how `crate::run` says each experiment's model and run lengths from what actually ran,
    /// not from what the scenarios were expected to name. A lab that keeps no record gives an
    /// empty one.
    fn take_record(&self) -> RunRecord {
        RunRecord::default()
    }
}

/// The models and simulated lengths of a set of runs ([`Lab::take_record`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRecord {
    /// Every model a run used.
    pub models: std::collections::BTreeSet<counterpoint_sim::Model>,
    /// Every simulated length a run had, ns (the scenario's duration, or less where every
    /// task ran its work once and finished).
    pub lengths_ns: std::collections::BTreeSet<u64>,
}

impl RunRecord {
    /// Add one run.
    pub fn add(&mut self, model: counterpoint_sim::Model, length_ns: u64) {
        self.models.insert(model);
        self.lengths_ns.insert(length_ns);
    }

    /// The runs' simulated lengths in words (`None` when nothing was recorded): `60 s each`,
    /// `2 s or 10 s`, or the range where they vary more (runs to completion).
    pub fn lengths(&self) -> Option<String> {
        let all: Vec<String> = self.lengths_ns.iter().map(|&ns| seconds(ns)).collect();
        Some(match all.len() {
            0 => return None,
            1 => format!("{} each", all[0]),
            2 | 3 => all.join(" or "),
            _ => format!("{} to {}", all[0], all[all.len() - 1]),
        })
    }
}

/// A simulated length in words: `60 s`, `2.5 s`, `7038 s`, `400 ms`.
fn seconds(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    let text = if s < 1.0 {
        return format!("{} ms", trim(format!("{:.1}", s * 1e3)));
    } else if s < 10.0 {
        format!("{s:.2}")
    } else if s < 100.0 {
        format!("{s:.1}")
    } else {
        format!("{s:.0}")
    };
    format!("{} s", trim(text))
}

/// `2.50` → `2.5`, `60.0` → `60`.
fn trim(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A lab that runs every job whose tasks all repeat for at most `cap_ns` of simulated time
/// (jobs that run their work once keep their length: their completion times are the point).
/// For exercising an experiment's plumbing (jobs, seeds, summaries, verdicts) in seconds;
/// its figures are not the report's.
pub struct ShortLab<L> {
    /// The lab that runs the shortened jobs.
    pub lab: L,
    /// Longest simulated time of a repeating job, ns.
    pub cap_ns: u64,
}

impl<L: Lab> ShortLab<L> {
    fn cut(&self, job: &Job) -> Job {
        match job {
            Job::Custom {
                machine,
                tasks,
                duration_ns,
                tick_ns,
            } if tasks.iter().all(|t| t.repeat) => Job::Custom {
                machine: machine.clone(),
                tasks: tasks.clone(),
                duration_ns: (*duration_ns).min(self.cap_ns),
                tick_ns: *tick_ns,
            },
            other => other.clone(),
        }
    }
}

impl<L: Lab> Lab for ShortLab<L> {
    fn topology(&self, job: &Job) -> Result<Topology, LabError> {
        self.lab.topology(job)
    }
    fn run(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
        pick: &mut dyn PickNext,
    ) -> Result<Outcome, LabError> {
        self.lab.run(&self.cut(job), spec, policy, pick)
    }
    fn run_light(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError> {
        self.lab.run_light(&self.cut(job), spec, policy)
    }
    fn mix_programs(&self) -> Vec<String> {
        self.lab.mix_programs()
    }
    fn forced_model(&self) -> Option<counterpoint_sim::Model> {
        self.lab.forced_model()
    }
    fn take_record(&self) -> RunRecord {
        self.lab.take_record()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counterpoint_sim::Model;

    #[test]
    fn run_lengths_are_said_as_they_were() {
        let mut r = RunRecord::default();
        assert_eq!(r.lengths(), None);
        r.add(Model::V1, 60_000_000_000);
        r.add(Model::V1, 60_000_000_000);
        assert_eq!(r.lengths().unwrap(), "60 s each");
        r.add(Model::V1, 2_000_000_000);
        assert_eq!(r.lengths().unwrap(), "2 s or 60 s");
        r.add(Model::V2, 500_000_000);
        r.add(Model::V2, 7_038_400_000_000);
        assert_eq!(r.lengths().unwrap(), "500 ms to 7038 s");
        assert_eq!(r.models.len(), 2);
        assert_eq!(seconds(2_500_000_000), "2.5 s");
        assert_eq!(seconds(12_340_000_000), "12.3 s");
    }
}
