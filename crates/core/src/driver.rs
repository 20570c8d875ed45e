//! The one observe → decide → act loop, shared by the live agent, the simulator's runs and the
//! experiments, so a policy is evaluated exactly as it runs on a host.
//!
//! Each interval the [`Driver`] advances the [`Machine`] (which observes it), lets the
//! [`Policy`] decide, and filters each action before it reaches [`Machine::apply`]:
//! - **no-op filtering**: an affinity the task (or thread) already has, or a swap of two tasks
//!   with the same affinity, is reported as [`Verdict::Unchanged`] and not applied;
//! - **hold-back** (hysteresis): a task (or a thread, for [`Action::SetThreadAffinity`]) moved
//!   less than [`DriverConfig::min_residency_intervals`] intervals ago is not moved again
//!   ([`Verdict::HeldBack`]), so a policy cannot make tasks ping-pong;
//! - **dry run**: decisions are reported ([`Verdict::DryRun`]) and none is applied.
//!
//! A caller-supplied [`Observer`] sees every observation and every decision *before* it is
//! applied (to log or journal it), learns the outcome, and says which apply errors are
//! transient (a task that exited mid-action) rather than fatal. The loop stops after
//! [`DriverConfig::max_intervals`], when every observed task has finished, when
//! [`Machine::finished`] says there is nothing left to run, or when the external stop flag
//! ([`Driver::with_stop_flag`], e.g. set by a signal handler) is raised.
//!
//! The driver does no I/O and never sleeps: a caller that paces a simulated machine in real
//! time does it in [`Observer::observed`].
//!
//! Moving a hand-written loop (such as the agent's) onto the driver: the stop flag set by the
//! signal handler goes to [`Driver::with_stop_flag`]; `--max-intervals`, `--min-residency` and
//! `--dry-run` are the [`DriverConfig`] fields; the "held back" / "unchanged" / "decision" log
//! lines are written from [`Observer::decision`] by [`Verdict`] (the journal write belongs
//! there too, before the apply); "which apply errors are transient" is [`Observer::failed`];
//! "every task finished" is [`StopReason::AllFinished`] in the returned [`DriverReport`];
//! restoring affinities stays with the caller, after `run` returns (also when it returns an
//! error).
//!
//! ```
//! use counterpoint_core::driver::{Driver, DriverConfig, NoObserver, StopReason};
//! use counterpoint_core::testutils::ScriptedMachine;
//! use counterpoint_core::{Action, CpuSet, Observation, Policy, TaskId, Topology};
//!
//! /// Pins task 1 to CPU 0, every interval.
//! struct PinFirst;
//! impl Policy for PinFirst {
//!     fn name(&self) -> &str { "pin-first" }
//!     fn required_events(&self) -> Vec<&'static str> { Vec::new() }
//!     fn decide(&mut self, _t: &Topology, _o: &Observation) -> Vec<Action> {
//!         vec![Action::SetAffinity { task: TaskId(1), cpus: CpuSet::single(0) }]
//!     }
//! }
//!
//! let mut machine = ScriptedMachine::new(1, 2, 1, 2); // 1 package x 2 cores, 2 tasks
//! let config = DriverConfig { max_intervals: Some(5), ..DriverConfig::new(1_000_000) };
//! let report = Driver::new(config)
//!     .run(&mut machine, &mut PinFirst, &mut NoObserver)
//!     .unwrap();
//! assert_eq!(report.stop, StopReason::MaxIntervals);
//! assert_eq!(report.intervals, 5);
//! // Applied once; afterwards the task is already where the policy wants it.
//! assert_eq!((report.applied, report.unchanged), (1, 4));
//! assert_eq!(machine.applied.len(), 1);
//! ```

use crate::action::Action;
use crate::machine::{Machine, Policy};
use crate::observation::Observation;
use crate::task::TaskId;
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the loop runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    /// Length of one interval (observation and decision period).
    pub interval_ns: u64,
    /// A task changed by the driver is not changed again until this many intervals have
    /// passed (0 = no hold-back).
    pub min_residency_intervals: u32,
    /// Report decisions, apply none.
    pub dry_run: bool,
    /// Stop after this many intervals.
    pub max_intervals: Option<u64>,
}

impl DriverConfig {
    /// Intervals of `interval_ns`, no hold-back, applying, no interval limit.
    pub fn new(interval_ns: u64) -> Self {
        Self {
            interval_ns,
            min_residency_intervals: 0,
            dry_run: false,
            max_intervals: None,
        }
    }
}

/// What the driver does with one action of the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It will be applied.
    Apply,
    /// Dry run: it would be applied.
    DryRun,
    /// Every task of the action is already where the action would put it.
    Unchanged,
    /// `task` (or its thread) was changed at interval `since`, less than the minimum
    /// residency ago. A thread-level action is held by a recent move of its thread or of its
    /// whole task; a task-level action by a recent move of the task or of any of its threads.
    HeldBack {
        /// The task that may not move yet.
        task: TaskId,
        /// The thread, for a thread-level action.
        tid: Option<u64>,
        /// The interval in which it was last changed.
        since: u64,
    },
}

/// One decision as the [`Observer`] sees it.
#[derive(Clone, Copy, Debug)]
pub struct Decision<'a> {
    /// 1-based interval number.
    pub interval: u64,
    /// The deciding policy's name.
    pub policy: &'a str,
    /// The action the policy asked for.
    pub action: &'a Action,
    /// What the driver does with it.
    pub verdict: Verdict,
    /// The observation the policy decided on.
    pub observation: &'a Observation,
    /// The machine's topology.
    pub topology: &'a Topology,
}

/// The caller's hook into the loop: logging, journaling, pacing, error policy. Every method
/// has a do-nothing default.
pub trait Observer<M: Machine + ?Sized> {
    /// After each advance, before the policy sees the observation (`interval` is 1-based;
    /// the stop flag is checked again after this returns).
    fn observed(&mut self, _machine: &M, _interval: u64, _observation: &Observation) {}
    /// Every decision, whatever its verdict, *before* an `Apply` is carried out: journal it
    /// here. An error stops the driver and nothing of this action is applied.
    fn decision(&mut self, _decision: &Decision<'_>) -> Result<(), M::Error> {
        Ok(())
    }
    /// An `Apply` decision was carried out.
    fn applied(&mut self, _decision: &Decision<'_>) {}
    /// Applying failed. Return `true` if the error is transient (reported, loop goes on),
    /// `false` to stop the driver with it (the default).
    fn failed(&mut self, _decision: &Decision<'_>, _error: &M::Error) -> bool {
        false
    }
}

/// An observer that does nothing: every apply error is fatal.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl<M: Machine + ?Sized> Observer<M> for NoObserver {}

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// [`DriverConfig::max_intervals`] reached.
    MaxIntervals,
    /// Every observed task has finished.
    AllFinished,
    /// [`Machine::finished`] (e.g. the simulated duration is over).
    MachineFinished,
    /// The external stop flag was raised.
    Stopped,
}

/// What a run of the loop did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverReport {
    /// Intervals observed and decided on.
    pub intervals: u64,
    /// Actions applied.
    pub applied: u64,
    /// Actions reported in dry-run mode.
    pub dry_run: u64,
    /// Actions filtered as already satisfied.
    pub unchanged: u64,
    /// Actions held back by the minimum residency.
    pub held_back: u64,
    /// Actions whose apply failed with a transient error.
    pub failed: u64,
    /// Why the loop ended.
    pub stop: StopReason,
}

impl DriverReport {
    /// Nothing done yet (`stop` is a placeholder until the loop ends).
    pub fn new() -> Self {
        Self {
            intervals: 0,
            applied: 0,
            dry_run: 0,
            unchanged: 0,
            held_back: 0,
            failed: 0,
            stop: StopReason::Stopped,
        }
    }
}

impl Default for DriverReport {
    fn default() -> Self {
        Self::new()
    }
}

/// A failure that ended the loop.
#[derive(Debug, thiserror::Error)]
pub enum DriverError<E: std::error::Error + 'static> {
    /// A zero-length interval would never advance the machine.
    #[error("the driver's interval must be positive")]
    ZeroInterval,
    /// The machine (advance, apply) or the observer failed.
    #[error(transparent)]
    Machine(E),
}

/// The observe → decide → act loop. One driver keeps its hold-back state across
/// [`Driver::run`] calls.
#[derive(Debug)]
pub struct Driver<'s> {
    config: DriverConfig,
    stop: Option<&'s AtomicBool>,
    interval: u64,
    /// When each task (`None`) or thread of a task (`Some(tid)`) was last changed.
    last_change: BTreeMap<(TaskId, Option<u64>), u64>,
}

impl<'s> Driver<'s> {
    /// A driver with `config` and no stop flag.
    pub fn new(config: DriverConfig) -> Self {
        Self {
            config,
            stop: None,
            interval: 0,
            last_change: BTreeMap::new(),
        }
    }

    /// Stop (before the next advance, or right after one) once `flag` is set.
    pub fn with_stop_flag(mut self, flag: &'s AtomicBool) -> Self {
        self.stop = Some(flag);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// Intervals run so far.
    pub fn intervals(&self) -> u64 {
        self.interval
    }

    fn stopped(&self) -> bool {
        self.stop.is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// Run until a stop condition. Errors of the machine and of the observer end the loop
    /// (except apply errors the observer calls transient).
    pub fn run<M: Machine + ?Sized>(
        &mut self,
        machine: &mut M,
        policy: &mut (dyn Policy + '_),
        observer: &mut (dyn Observer<M> + '_),
    ) -> Result<DriverReport, DriverError<M::Error>> {
        let mut report = DriverReport::new();
        report.stop = loop {
            if let Some(reason) = self.step(machine, policy, observer, &mut report)? {
                break reason;
            }
        };
        Ok(report)
    }

    /// One interval: observe, decide, act. `Ok(None)` when an interval was run and the loop
    /// may go on; `Ok(Some(reason))` when a stop condition holds (nothing more was done).
    /// For callers that do their own work between intervals (the live agent's safety-net
    /// sweep needs the machine mutably); [`Driver::run`] is a loop over it. Counts go to
    /// `report`.
    pub fn step<M: Machine + ?Sized>(
        &mut self,
        machine: &mut M,
        policy: &mut (dyn Policy + '_),
        observer: &mut (dyn Observer<M> + '_),
        report: &mut DriverReport,
    ) -> Result<Option<StopReason>, DriverError<M::Error>> {
        if self.config.interval_ns == 0 {
            return Err(DriverError::ZeroInterval);
        }
        if self.stopped() {
            return Ok(Some(StopReason::Stopped));
        }
        if self
            .config
            .max_intervals
            .is_some_and(|m| self.interval >= m)
        {
            return Ok(Some(StopReason::MaxIntervals));
        }
        if machine.finished() {
            return Ok(Some(StopReason::MachineFinished));
        }
        let obs = machine
            .advance(self.config.interval_ns)
            .map_err(DriverError::Machine)?;
        observer.observed(machine, self.interval + 1, &obs);
        if self.stopped() {
            return Ok(Some(StopReason::Stopped));
        }
        if !obs.tasks.is_empty() && obs.tasks.iter().all(|t| t.finished) {
            return Ok(Some(StopReason::AllFinished));
        }
        self.interval += 1;
        report.intervals += 1;
        self.act(machine, policy, observer, &obs, report)?;
        Ok(None)
    }

    fn verdict(&self, action: &Action, obs: &Observation, topology: &Topology) -> Verdict {
        let affinity = |t: TaskId| obs.task(t).map(|o| &o.affinity);
        let online = topology.online_cpus();
        let unchanged = match action {
            Action::SetAffinity { task, cpus } => {
                let want = cpus.intersection(&online);
                // Every thread, where the source says (one placed on its own may differ).
                obs.task(*task).is_some_and(|o| {
                    o.affinity == want
                        && o.code
                            .as_ref()
                            .map_or(true, |c| c.thread_affinity.values().all(|a| *a == want))
                })
            }
            Action::SetThreadAffinity { task, tid, cpus } => {
                let want = cpus.intersection(&online);
                match obs.task(*task) {
                    None => false,
                    Some(o) => match o.code.as_ref().map(|c| &c.thread_affinity) {
                        // A source that reads thread affinities: the thread's own.
                        Some(m) if !m.is_empty() => m.get(tid).is_some_and(|a| *a == want),
                        // One that does not (the simulator's one-thread tasks): the task's.
                        _ => o.affinity == want,
                    },
                }
            }
            Action::Swap { a, b } => {
                matches!((affinity(*a), affinity(*b)), (Some(x), Some(y)) if x == y)
            }
        };
        if unchanged {
            return Verdict::Unchanged;
        }
        let min = u64::from(self.config.min_residency_intervals);
        let recent = |key: &(TaskId, Option<u64>)| {
            self.last_change
                .get(key)
                .filter(|&&since| self.interval - since < min)
                .copied()
        };
        let thread = action.thread();
        let held = action.tasks().into_iter().find_map(|t| {
            let since = match thread {
                // A thread moves with its process and on its own.
                Some(tid) => recent(&(t, None)).or_else(|| recent(&(t, Some(tid)))),
                // A process moves all its threads: any recent move of one holds it back.
                None => self
                    .last_change
                    .range((t, None)..=(t, Some(u64::MAX)))
                    .filter(|(_, &since)| self.interval - since < min)
                    .map(|(_, &since)| since)
                    .max(),
            };
            since.map(|s| (t, s))
        });
        if let Some((task, since)) = held {
            return Verdict::HeldBack {
                task,
                tid: thread,
                since,
            };
        }
        if self.config.dry_run {
            Verdict::DryRun
        } else {
            Verdict::Apply
        }
    }

    fn act<M: Machine + ?Sized>(
        &mut self,
        machine: &mut M,
        policy: &mut (dyn Policy + '_),
        observer: &mut (dyn Observer<M> + '_),
        obs: &Observation,
        report: &mut DriverReport,
    ) -> Result<(), DriverError<M::Error>> {
        // A move older than the residency holds nothing back: forget it, or the map grows with
        // every thread ever moved (thread pools start and end threads all the time).
        let (now, min) = (
            self.interval,
            u64::from(self.config.min_residency_intervals),
        );
        self.last_change.retain(|_, since| now - *since < min);
        let topology = machine.topology().clone();
        let actions = policy.decide(&topology, obs);
        let name = policy.name().to_string();
        for action in &actions {
            // A stop (a signal) must not wait for a long batch of actions.
            if self.stopped() {
                break;
            }
            let d = Decision {
                interval: self.interval,
                policy: &name,
                action,
                verdict: self.verdict(action, obs, &topology),
                observation: obs,
                topology: &topology,
            };
            observer.decision(&d).map_err(DriverError::Machine)?;
            match d.verdict {
                Verdict::Unchanged => report.unchanged += 1,
                Verdict::HeldBack { .. } => report.held_back += 1,
                Verdict::DryRun => report.dry_run += 1,
                Verdict::Apply => match machine.apply(action) {
                    Ok(()) => {
                        report.applied += 1;
                        for t in action.tasks() {
                            self.last_change.insert((t, action.thread()), self.interval);
                        }
                        observer.applied(&d);
                    }
                    Err(e) => {
                        if observer.failed(&d, &e) {
                            report.failed += 1;
                        } else {
                            return Err(DriverError::Machine(e));
                        }
                    }
                },
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::CpuSet;
    use crate::testutils::ScriptedMachine;

    /// Moves task 1 between CPU 0 and CPU 1 every interval (a ping-pong policy).
    struct PingPong;
    impl Policy for PingPong {
        fn name(&self) -> &str {
            "ping-pong"
        }
        fn required_events(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn decide(&mut self, _t: &Topology, o: &Observation) -> Vec<Action> {
            let cpu = if (o.time_ns / o.interval_ns.max(1)) % 2 == 0 {
                0
            } else {
                1
            };
            vec![Action::SetAffinity {
                task: TaskId(1),
                cpus: CpuSet::single(cpu),
            }]
        }
    }

    fn config(max: u64) -> DriverConfig {
        DriverConfig {
            max_intervals: Some(max),
            ..DriverConfig::new(1_000)
        }
    }

    #[test]
    fn hold_back_limits_moves_to_one_per_residency() {
        let mut m = ScriptedMachine::new(1, 2, 1, 1);
        let cfg = DriverConfig {
            min_residency_intervals: 3,
            ..config(9)
        };
        let r = Driver::new(cfg)
            .run(&mut m, &mut PingPong, &mut NoObserver)
            .unwrap();
        // Wanted: CPU 1, 0, 1, 0, ... Applied at 1, 4, 7; held at 2, 5, 8 (moved 1 interval
        // ago); at 3, 6, 9 the task is still where the policy wants it.
        assert_eq!((r.applied, r.held_back, r.unchanged), (3, 3, 3));
        assert_eq!(m.applied.len(), 3);
    }

    #[test]
    fn dry_run_applies_nothing_and_holds_nothing_back() {
        let mut m = ScriptedMachine::new(1, 2, 1, 1);
        let cfg = DriverConfig {
            dry_run: true,
            min_residency_intervals: 3,
            ..config(4)
        };
        let r = Driver::new(cfg)
            .run(&mut m, &mut PingPong, &mut NoObserver)
            .unwrap();
        assert_eq!((r.applied, r.dry_run, r.held_back), (0, 4, 0));
        assert!(m.applied.is_empty());
    }

    #[test]
    fn stops_when_every_task_finished_or_the_flag_is_set() {
        let mut m = ScriptedMachine::new(1, 2, 1, 2);
        m.finish_after = Some(2);
        let r = Driver::new(config(100))
            .run(&mut m, &mut PingPong, &mut NoObserver)
            .unwrap();
        assert_eq!(r.stop, StopReason::AllFinished);
        // The interval in which everything finished is not decided on.
        assert_eq!(r.intervals, 1);

        let flag = AtomicBool::new(true);
        let mut m = ScriptedMachine::new(1, 2, 1, 2);
        let r = Driver::new(config(100))
            .with_stop_flag(&flag)
            .run(&mut m, &mut PingPong, &mut NoObserver)
            .unwrap();
        assert_eq!((r.stop, r.intervals), (StopReason::Stopped, 0));
    }

    /// Places two threads of task 1 apart every interval and, at interval 3, asks for task 1
    /// as a whole too.
    struct Threads;
    impl Policy for Threads {
        fn name(&self) -> &str {
            "threads"
        }
        fn required_events(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn decide(&mut self, _t: &Topology, o: &Observation) -> Vec<Action> {
            let n = o.time_ns / o.interval_ns.max(1);
            let mut v = vec![
                Action::SetThreadAffinity {
                    task: TaskId(1),
                    tid: 10,
                    cpus: CpuSet::single(0),
                },
                Action::SetThreadAffinity {
                    task: TaskId(1),
                    tid: 11,
                    cpus: CpuSet::single(1),
                },
            ];
            if n == 3 {
                v.push(Action::SetAffinity {
                    task: TaskId(1),
                    cpus: CpuSet::single(0),
                });
            }
            v
        }
    }

    #[test]
    fn threads_of_one_task_are_held_back_one_by_one() {
        // The scripted machine has one thread per task, so applying tid 11 after tid 10 leaves
        // the task on CPU 1 and tid 10's action is a change again in interval 2.
        let mut m = ScriptedMachine::new(1, 2, 1, 1);
        let cfg = DriverConfig {
            min_residency_intervals: 3,
            ..config(3)
        };
        let mut log = Log::default();
        let r = Driver::new(cfg)
            .run(&mut m, &mut Threads, &mut log)
            .unwrap();
        // Interval 1: both threads move (one does not hold the other back). Interval 2: tid 10
        // is held (moved at 1), tid 11 unchanged. Interval 3: the same, and the task-level
        // action is held by its threads' moves.
        assert_eq!(
            log.verdicts,
            vec![
                Verdict::Apply,
                Verdict::Apply,
                Verdict::HeldBack {
                    task: TaskId(1),
                    tid: Some(10),
                    since: 1
                },
                Verdict::Unchanged,
                Verdict::HeldBack {
                    task: TaskId(1),
                    tid: Some(10),
                    since: 1
                },
                Verdict::Unchanged,
                Verdict::HeldBack {
                    task: TaskId(1),
                    tid: None,
                    since: 1
                },
            ]
        );
        assert_eq!((r.applied, r.held_back, r.unchanged), (2, 3, 2));
    }

    /// Moves a new thread of task 1 every interval (a thread pool whose threads come and go),
    /// alternating CPUs so each move is a change.
    struct Churn;
    impl Policy for Churn {
        fn name(&self) -> &str {
            "churn"
        }
        fn required_events(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn decide(&mut self, _t: &Topology, o: &Observation) -> Vec<Action> {
            let n = o.time_ns / o.interval_ns.max(1);
            vec![Action::SetThreadAffinity {
                task: TaskId(1),
                tid: 1000 + n,
                cpus: CpuSet::single((n % 2) as u32),
            }]
        }
    }

    #[test]
    fn moves_older_than_the_residency_are_forgotten() {
        let mut m = ScriptedMachine::new(1, 2, 1, 1);
        let cfg = DriverConfig {
            min_residency_intervals: 3,
            ..config(50)
        };
        let mut d = Driver::new(cfg);
        let r = d.run(&mut m, &mut Churn, &mut Log::default()).unwrap();
        assert_eq!((r.intervals, r.applied), (50, 50));
        // Only moves that can still hold an action back are remembered.
        assert!(d.last_change.len() <= 3, "{:?}", d.last_change);
    }

    /// Records verdicts; calls every apply error transient.
    #[derive(Default)]
    struct Log {
        verdicts: Vec<Verdict>,
        failures: u64,
    }
    impl Observer<ScriptedMachine> for Log {
        fn decision(&mut self, d: &Decision<'_>) -> Result<(), crate::testutils::ScriptedError> {
            self.verdicts.push(d.verdict);
            Ok(())
        }
        fn failed(&mut self, _d: &Decision<'_>, _e: &crate::testutils::ScriptedError) -> bool {
            self.failures += 1;
            true
        }
    }

    #[test]
    fn observer_sees_each_decision_and_transient_errors_do_not_stop() {
        let mut m = ScriptedMachine::new(1, 2, 1, 1);
        m.fail_applies = true;
        let mut log = Log::default();
        let r = Driver::new(config(3))
            .run(&mut m, &mut PingPong, &mut log)
            .unwrap();
        assert_eq!(r.failed, 3);
        assert_eq!(log.failures, 3);
        assert_eq!(log.verdicts, vec![Verdict::Apply; 3]);
        // Without the observer the first failure is fatal.
        let mut m = ScriptedMachine::new(1, 2, 1, 1);
        m.fail_applies = true;
        let e = Driver::new(config(3))
            .run(&mut m, &mut PingPong, &mut NoObserver)
            .unwrap_err();
        assert!(matches!(e, DriverError::Machine(_)));
        let e = Driver::new(DriverConfig::new(0))
            .run(&mut m, &mut PingPong, &mut NoObserver)
            .unwrap_err();
        assert!(matches!(e, DriverError::ZeroInterval));
    }
}
