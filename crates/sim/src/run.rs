//! Whole runs: the shared run with optional policies, automatic solo runs, and the result.
//!
//! `NP_i = T_alone / T_shared` with T the CPU time the task needs for the work it did in the
//! shared run; `T_alone` comes from running the task alone on the same machine (same affinity)
//! until it has retired the same number of instructions. Solo runs are shared between tasks
//! with the same workload (and, for servers, the same request stream).

use crate::catalog::Catalog;
use crate::engine::{Counters, Simulation};
use crate::scenario::{Scenario, Workload};
use crate::spec::Model;
use crate::SimError;
use counterpoint_core::driver::{Driver, DriverConfig, DriverError, Observer};
use counterpoint_core::stats::{system_metrics_with_progress, SystemMetrics};
use counterpoint_core::{event, Machine, PickNext, Policy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One task's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// Task index in the scenario.
    pub id: u64,
    /// Task name.
    pub name: String,
    /// Program, shell or server label.
    pub workload: String,
    /// Instructions retired in the shared run.
    pub instructions: u64,
    /// Cycles it ran.
    pub cycles: u64,
    /// LLC references (perf's `cache-references`) in the shared run.
    #[serde(default)]
    pub llc_references: u64,
    /// LLC misses (perf's `cache-misses`) in the shared run.
    #[serde(default)]
    pub llc_misses: u64,
    /// Lines it moved on the memory bus (fills, dirty victims, device DMA): the bus
    /// transactions a `BUS_TRANS_MEM`-like counter would count.
    #[serde(default)]
    pub mem_transactions: u64,
    /// Floating-point operations retired.
    #[serde(default)]
    pub fp_ops: u64,
    /// CPU time it got.
    pub cpu_time_ns: u64,
    /// CPU time the same work takes alone on the machine.
    pub solo_cpu_time_ns: u64,
    /// Normalized performance `T_alone / T_shared` (CPU time); `None` if the task never ran.
    pub np: Option<f64>,
    /// Wall-clock progress (Eyerman & Eeckhout): the time the work it retired takes alone over
    /// the wall time it lived (arrival to finish, or to the end of the run); unlike NP it
    /// charges the time the task waited for a CPU. 0 if it retired nothing.
    pub progress: f64,
    /// Instructions per cycle over the run.
    pub ipc: f64,
    /// LLC misses per thousand instructions.
    pub llc_mpki: f64,
    /// Times it was switched out.
    pub context_switches: u64,
    /// Times it moved CPU.
    pub migrations: u64,
    /// Programs (or server requests) completed.
    pub completions: u64,
    /// When the task finished its work (tasks that do not repeat), since the start.
    pub finish_ns: Option<u64>,
    /// Wall time per completed program at the task's average rate (MASA's "time to complete"):
    /// the time it lived (arrival to finish, or to the end of the run) x program instructions /
    /// instructions retired. `None` for servers.
    pub wall_ns_per_program: Option<f64>,
}

/// Per-epoch time series.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// End of each epoch.
    pub time_ns: Vec<u64>,
    /// Per bus: utilization averaged over each epoch.
    pub bus_utilization: Vec<Vec<f64>>,
    /// Per task.
    pub tasks: Vec<TaskSeries>,
}

/// One task's counters per epoch (deltas over the epoch).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskSeries {
    /// Task index.
    pub id: u64,
    /// Instructions per epoch.
    pub instructions: Vec<u64>,
    /// Cycles per epoch.
    pub cycles: Vec<u64>,
    /// LLC misses per epoch.
    pub llc_misses: Vec<u64>,
    /// Memory-bus transactions per epoch.
    pub mem_transactions: Vec<u64>,
    /// Floating-point operations per epoch.
    pub fp_ops: Vec<u64>,
    /// CPU time per epoch.
    pub task_clock_ns: Vec<u64>,
    /// IPC per epoch.
    pub ipc: Vec<f64>,
}

/// Everything a run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// Machine name.
    pub machine: String,
    /// Physics the run used (every figure depends on it).
    #[serde(default)]
    pub model: Model,
    /// The engine's tick (a warming task's rates hold for one).
    #[serde(default)]
    pub tick_ns: u64,
    /// Seed of the run.
    pub seed: u64,
    /// Epoch-level policy (`linux` = none).
    pub policy: String,
    /// Pick-next hook, if any.
    pub pick: Option<String>,
    /// Simulated time the run took.
    pub duration_ns: u64,
    /// Interval between policy decisions.
    pub epoch_ns: u64,
    /// Per task.
    pub tasks: Vec<TaskResult>,
    /// Over tasks that ran (`None` when none did).
    pub metrics: Option<SystemMetrics>,
    /// Instructions retired per second of simulated time, all tasks.
    pub throughput_instructions_per_s: f64,
    /// Completions (programs or requests) per second of simulated time, all tasks.
    pub throughput_completions_per_s: f64,
    /// Mean utilization of each bus over the run.
    pub mean_bus_utilization: Vec<f64>,
    /// Per-epoch time series.
    pub series: Series,
}

/// How a run drives its epoch-level policy: the live agent's options, through the same
/// [`Driver`] loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Interval between policy decisions.
    pub epoch_ns: u64,
    /// Hold-back: a task moved by the policy is not moved again for this many epochs
    /// (0 = none, the default of [`run`]; the agent's default is 3).
    pub min_residency_intervals: u32,
    /// Decisions are made and counted but none is applied.
    pub dry_run: bool,
}

impl RunOptions {
    /// Decisions every `epoch_ns`, no hold-back, applied.
    pub fn new(epoch_ns: u64) -> Self {
        Self {
            epoch_ns,
            min_residency_intervals: 0,
            dry_run: false,
        }
    }
}

/// The counters of `program` run alone on CPU 0 of catalog machine `machine` under `model` for
/// `duration_ms` (a solo measurement, as the calibration programs and checks take it: CPI is
/// `cycles / instructions`).
pub fn solo_counters(
    cat: &Catalog,
    machine: &str,
    program: &str,
    model: Model,
    duration_ms: u64,
) -> Result<Counters, SimError> {
    let sc = Scenario::builder(cat, machine)
        .and_then(|b| {
            b.model(model)
                .duration_ms(duration_ms)
                .task(program, Some(counterpoint_core::CpuSet::single(0)))
        })
        .map_err(SimError::Invalid)?
        .build()
        .map_err(|e| SimError::Invalid(e.to_string()))?;
    let mut sim = Simulation::new(&sc, 1)?;
    sim.advance_quiet(duration_ms.saturating_mul(1_000_000), None);
    sim.counters(0)
        .copied()
        .ok_or_else(|| SimError::Invalid(format!("{program} on {machine}: no counters")))
}

/// `program` alone on CPU 0 of catalog machine `machine` (as [`solo_counters`]): its CPI and
/// the share of its time on memory, `1 - core CPI / CPI`, the core CPI being its first phase's
/// on that machine under `model` (`Profile::core_cpi_on`). The checks put a program whose share
/// is under 5 % in the calibration set of a core's speed (`calibrate_v2`, `core2_check`,
/// `smt_check`).
pub fn solo_cpi_and_memory_share(
    cat: &Catalog,
    machine: &str,
    program: &str,
    model: Model,
    duration_ms: u64,
) -> Result<(f64, f64), SimError> {
    let c = solo_counters(cat, machine, program, model, duration_ms)?;
    let spec = cat
        .machine(machine)
        .ok_or_else(|| SimError::Invalid(format!("no machine {machine}")))?;
    let core = cat
        .program(program)
        .and_then(|p| {
            p.phases
                .first()
                .map(|ph| ph.profile.core_cpi_on(&spec, model))
        })
        .ok_or_else(|| SimError::Invalid(format!("no program {program} with a phase")))?;
    Ok((
        c.cycles / c.instructions.max(1.0),
        1.0 - core * c.instructions / c.cycles.max(1.0),
    ))
}

/// A core's throughput with two copies of `program` on its two SMT threads (CPUs 0 and 1 of
/// catalog machine `machine`, siblings in every catalog topology with two threads per core)
/// against one copy alone on CPU 0, both over `duration_ms` under `model`: the instructions the
/// pair retires over those the single copy retires, what a SPEC rate score with two copies
/// over the one-copy score measures. Refuses a machine without two threads per core.
pub fn pair_throughput(
    cat: &Catalog,
    machine: &str,
    program: &str,
    model: Model,
    duration_ms: u64,
) -> Result<f64, SimError> {
    let spec = cat
        .machine(machine)
        .ok_or_else(|| SimError::Invalid(format!("no machine {machine}")))?;
    if spec.threads_per_core != 2 {
        return Err(SimError::Invalid(format!(
            "{machine} has {} threads per core, not 2",
            spec.threads_per_core
        )));
    }
    let solo = solo_counters(cat, machine, program, model, duration_ms)?;
    let sc = Scenario::builder(cat, machine)
        .and_then(|b| {
            b.model(model)
                .duration_ms(duration_ms)
                .task(program, Some(counterpoint_core::CpuSet::single(0)))?
                .task(program, Some(counterpoint_core::CpuSet::single(1)))
        })
        .map_err(SimError::Invalid)?
        .build()
        .map_err(|e| SimError::Invalid(e.to_string()))?;
    let mut sim = Simulation::new(&sc, 1)?;
    sim.advance_quiet(duration_ms.saturating_mul(1_000_000), None);
    let mut pair = 0.0;
    for t in 0..2 {
        pair += sim
            .counters(t)
            .ok_or_else(|| SimError::Invalid(format!("{program} on {machine}: no counters")))?
            .instructions;
    }
    Ok(pair / solo.instructions.max(1.0))
}

/// Run a scenario. The epoch-level `policy` decides after every epoch of `epoch_ns` and its
/// actions are applied (through the [`Driver`], without hold-back); the `pick` hook is
/// consulted at every context switch.
pub fn run<'p, 'k>(
    scenario: &Scenario,
    seed: u64,
    policy: Option<&mut (dyn Policy + 'p)>,
    pick: Option<&mut (dyn PickNext + 'k)>,
    epoch_ns: u64,
) -> Result<RunResult, SimError> {
    run_with(
        scenario,
        seed,
        policy,
        pick,
        &RunOptions::new(epoch_ns),
        &mut |_, _| {},
    )
}

/// [`run`] with a progress callback `(simulated_ns_done, total_ns)` after each epoch.
pub fn run_with_progress<'p, 'k>(
    scenario: &Scenario,
    seed: u64,
    policy: Option<&mut (dyn Policy + 'p)>,
    pick: Option<&mut (dyn PickNext + 'k)>,
    epoch_ns: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RunResult, SimError> {
    run_with(
        scenario,
        seed,
        policy,
        pick,
        &RunOptions::new(epoch_ns),
        progress,
    )
}

/// The baseline's epoch-level policy: decides nothing (the machine's scheduler alone).
struct NoPolicy;

impl Policy for NoPolicy {
    fn name(&self) -> &str {
        "linux"
    }
    fn required_events(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn decide(
        &mut self,
        _topology: &counterpoint_core::Topology,
        _observation: &counterpoint_core::Observation,
    ) -> Vec<counterpoint_core::Action> {
        Vec::new()
    }
    fn reads_observations(&self) -> bool {
        false
    }
}

/// The simulation as the driver sees it: advances stop at the scenario's duration, and every
/// observation is also recorded into the run's time series.
struct Recorded<'a, 'k> {
    sim: Simulation,
    pick: Option<&'a mut (dyn PickNext + 'k)>,
    total_ns: u64,
    series: Series,
    bus_sum: Vec<f64>,
    deltas: Vec<Counters>,
    /// An epoch-level policy reads the observations; without one, or with one that does not
    /// ([`Policy::reads_observations`]: the baseline, and runs of pick-next hooks), the interval
    /// is read from the engine directly and the driver gets an observation with no tasks: building one per epoch cloned every task's affinity set (1024 CPUs for an
    /// unpinned task), 30 % of `scale-1024`'s time.
    observe: bool,
    bus: Vec<f64>,
}

impl Machine for Recorded<'_, '_> {
    type Error = SimError;
    fn topology(&self) -> &counterpoint_core::Topology {
        self.sim.topology()
    }
    fn tasks(&self) -> Vec<counterpoint_core::TaskInfo> {
        self.sim.tasks()
    }
    fn advance(&mut self, interval_ns: u64) -> Result<counterpoint_core::Observation, SimError> {
        let step = interval_ns.min(self.total_ns.saturating_sub(self.sim.now_ns()));
        let obs = if self.observe {
            let obs = self.sim.advance_with(step, self.pick.as_deref_mut());
            self.deltas.clear();
            self.deltas
                .extend(obs.tasks.iter().map(|t| counters_of(&t.sample)));
            obs
        } else {
            self.sim.advance_quiet(step, self.pick.as_deref_mut());
            let interval_ns = self.sim.take_interval(&mut self.deltas, &mut self.bus);
            counterpoint_core::Observation {
                time_ns: self.sim.now_ns(),
                interval_ns,
                tasks: Vec::new(),
                cpus: Vec::new(),
                memory_utilization: self.bus.clone(),
            }
        };
        record(
            &mut self.series,
            self.sim.now_ns(),
            &self.deltas,
            &obs.memory_utilization,
        );
        if self.bus_sum.is_empty() {
            self.bus_sum = vec![0.0; obs.memory_utilization.len()];
        }
        let tick = self.sim.tick_ns();
        let interval = step.div_ceil(tick) * tick;
        for (s, u) in self.bus_sum.iter_mut().zip(&obs.memory_utilization) {
            *s += u * interval as f64;
        }
        Ok(obs)
    }
    fn apply(&mut self, action: &counterpoint_core::Action) -> Result<(), SimError> {
        self.sim.apply(action)
    }
    fn finished(&self) -> bool {
        self.sim.now_ns() >= self.total_ns || self.sim.all_done()
    }
}

/// The simulation bounded by the scenario's duration, as the driver sees it (no series): it
/// is [`finished`](Machine::finished) once the duration is over or every task is done, and its
/// last interval is cut at the end of the duration. A bare [`Simulation`] runs on for as long
/// as it is advanced: what `agent --source sim:` ran (it never ended).
pub struct Bounded<'a, 'k> {
    sim: Simulation,
    pick: Option<&'a mut (dyn PickNext + 'k)>,
    total_ns: u64,
}

impl Bounded<'static, 'static> {
    /// The scenario's simulation with `seed`, bounded by its `duration_ms`, without a pick-next
    /// hook.
    pub fn new(scenario: &Scenario, seed: u64) -> Result<Self, SimError> {
        Ok(Bounded {
            sim: Simulation::new(scenario, seed)?,
            pick: None,
            total_ns: scenario.duration_ms * 1_000_000,
        })
    }
}

impl Machine for Bounded<'_, '_> {
    type Error = SimError;
    fn topology(&self) -> &counterpoint_core::Topology {
        self.sim.topology()
    }
    fn tasks(&self) -> Vec<counterpoint_core::TaskInfo> {
        self.sim.tasks()
    }
    fn advance(&mut self, interval_ns: u64) -> Result<counterpoint_core::Observation, SimError> {
        let step = interval_ns.min(self.total_ns.saturating_sub(self.sim.now_ns()));
        Ok(self.sim.advance_with(step, self.pick.as_deref_mut()))
    }
    fn apply(&mut self, action: &counterpoint_core::Action) -> Result<(), SimError> {
        self.sim.apply(action)
    }
    fn finished(&self) -> bool {
        self.sim.now_ns() >= self.total_ns || self.sim.all_done()
    }
}

/// Drive a scenario's simulation with `policy` (and `pick`) through the [`Driver`] until its
/// duration is over or every task is done, without time series or solo reference runs; the
/// caller reads the final counters from the returned simulation. What searches that evaluate
/// many placements use.
pub fn drive<'p, 'k>(
    scenario: &Scenario,
    seed: u64,
    policy: &mut (dyn Policy + 'p),
    pick: Option<&mut (dyn PickNext + 'k)>,
    options: &RunOptions,
) -> Result<Simulation, SimError> {
    if options.epoch_ns == 0 {
        return Err(SimError::Invalid("epoch must be positive".into()));
    }
    let mut machine = Bounded {
        sim: Simulation::new(scenario, seed)?,
        pick,
        total_ns: scenario.duration_ms * 1_000_000,
    };
    let config = DriverConfig {
        min_residency_intervals: options.min_residency_intervals,
        dry_run: options.dry_run,
        ..DriverConfig::new(options.epoch_ns)
    };
    Driver::new(config)
        .run(
            &mut machine,
            policy,
            &mut counterpoint_core::driver::NoObserver,
        )
        .map_err(driver_error)?;
    Ok(machine.sim)
}

fn driver_error(e: DriverError<SimError>) -> SimError {
    match e {
        DriverError::Machine(e) => e,
        DriverError::ZeroInterval => SimError::Invalid("epoch must be positive".into()),
    }
}

/// Reports progress after each epoch.
struct ProgressObserver<'f> {
    progress: &'f mut dyn FnMut(u64, u64),
}

impl Observer<Recorded<'_, '_>> for ProgressObserver<'_> {
    fn observed(
        &mut self,
        machine: &Recorded<'_, '_>,
        _interval: u64,
        _observation: &counterpoint_core::Observation,
    ) {
        (self.progress)(machine.sim.now_ns(), machine.total_ns);
    }
}

/// [`run`] with explicit [`RunOptions`] and a progress callback. The epoch loop is the
/// [`Driver`] the live agent uses, over the simulation as a [`Machine`].
pub fn run_with<'p, 'k>(
    scenario: &Scenario,
    seed: u64,
    policy: Option<&mut (dyn Policy + 'p)>,
    pick: Option<&mut (dyn PickNext + 'k)>,
    options: &RunOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RunResult, SimError> {
    let epoch_ns = options.epoch_ns;
    if epoch_ns == 0 {
        return Err(SimError::Invalid("epoch must be positive".into()));
    }
    let sim = Simulation::new(scenario, seed)?;
    let n = sim.task_count();
    let pick_name = pick.as_ref().map(|p| p.name().to_string());
    let observe = policy.as_ref().is_some_and(|p| p.reads_observations());
    let mut machine = Recorded {
        sim,
        pick,
        total_ns: scenario.duration_ms * 1_000_000,
        series: Series {
            tasks: (0..n)
                .map(|i| TaskSeries {
                    id: i as u64,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        bus_sum: Vec::new(),
        deltas: Vec::with_capacity(n),
        observe,
        bus: Vec::new(),
    };
    let mut baseline = NoPolicy;
    let policy: &mut (dyn Policy + '_) = match policy {
        Some(p) => p,
        None => &mut baseline,
    };
    let config = DriverConfig {
        min_residency_intervals: options.min_residency_intervals,
        dry_run: options.dry_run,
        ..DriverConfig::new(epoch_ns)
    };
    Driver::new(config)
        .run(&mut machine, policy, &mut ProgressObserver { progress })
        .map_err(driver_error)?;
    let policy_name = policy.name().to_string();
    let Recorded {
        sim,
        series,
        bus_sum,
        ..
    } = machine;
    let duration_ns = sim.now_ns();
    // Solo references, one per distinct workload (servers: per task, their streams differ).
    let mut solo_cache: BTreeMap<String, SoloCurve> = BTreeMap::new();
    let mut targets: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    for i in 0..n {
        let key = solo_key(scenario, i);
        let instr = sim.counters(i).map_or(0.0, |c| c.instructions);
        let e = targets.entry(key).or_insert((i, 0.0));
        e.1 = e.1.max(instr);
    }
    // Every task's request stream key, computed once (a solo run takes the key its task has in
    // the whole scenario).
    let stream_keys = crate::engine::stream_keys(scenario);
    for (key, (i, target)) in &targets {
        // A task that retired nothing has no NP and needs no reference: without this skip, each
        // of 100,000 servers that never ran built its own solo machine (1024 CPUs on
        // bench-1024: 218 s and 1 GB for 1 ms simulated; physics probe, session 22).
        if *target <= 0.0 {
            solo_cache.insert(key.clone(), SoloCurve { points: Vec::new() });
            continue;
        }
        let stream_key = stream_keys.get(*i).copied().unwrap_or(0);
        solo_cache.insert(
            key.clone(),
            solo_curve(scenario, seed, *i, stream_key, *target)?,
        );
    }
    let mut tasks = Vec::with_capacity(n);
    let mut nps = Vec::with_capacity(n);
    let mut progresses = Vec::with_capacity(n);
    let mut total_instr = 0.0;
    let mut total_completions = 0u64;
    for i in 0..n {
        let c = *sim
            .counters(i)
            .ok_or(SimError::Invalid("task vanished".into()))?;
        let curve = &solo_cache[&solo_key(scenario, i)];
        let solo_ns = curve.cpu_ns_for(c.instructions);
        let np =
            (c.instructions > 0.0 && c.task_clock_ns > 0).then(|| solo_ns / c.task_clock_ns as f64);
        nps.push(np);
        total_instr += c.instructions;
        total_completions += c.completions;
        let spec = &scenario.tasks[i];
        // The time the task lived: from its arrival to its finish (or the end). Over the whole
        // run, a task that finished early or arrived late was charged for time it did not
        // exist (physics probe, session 19: art finished at 34.6 s of a 60 s run and reported
        // 60 s per program).
        let start_ns = spec.start_ms.saturating_mul(1_000_000).min(duration_ns);
        let end_ns = sim.finish_ns(i).unwrap_or(duration_ns).max(start_ns);
        let lived_ns = (end_ns - start_ns) as f64;
        let progress = if c.instructions > 0.0 && lived_ns > 0.0 {
            solo_ns / lived_ns
        } else {
            0.0
        };
        progresses.push(progress);
        let prog_instr = match &spec.workload {
            Workload::Program(p) => Some(p.instructions() as f64),
            Workload::Shell(ps) => Some(ps.iter().map(|p| p.instructions() as f64).sum()),
            Workload::Server(_) => None,
        };
        tasks.push(TaskResult {
            id: i as u64,
            name: spec.name.clone(),
            workload: spec.workload.label(),
            instructions: c.instructions.round() as u64,
            cycles: c.cycles.round() as u64,
            llc_references: c.llc_references.round() as u64,
            llc_misses: c.llc_misses.round() as u64,
            mem_transactions: c.mem_transactions.round() as u64,
            fp_ops: c.fp_ops.round() as u64,
            cpu_time_ns: c.task_clock_ns,
            solo_cpu_time_ns: solo_ns.round() as u64,
            np,
            progress,
            ipc: if c.cycles > 0.0 {
                c.instructions / c.cycles
            } else {
                0.0
            },
            llc_mpki: if c.instructions > 0.0 {
                c.llc_misses * 1000.0 / c.instructions
            } else {
                0.0
            },
            context_switches: c.context_switches,
            migrations: c.migrations,
            completions: c.completions,
            finish_ns: sim.finish_ns(i),
            wall_ns_per_program: prog_instr.and_then(|pi| {
                (c.instructions > 0.0 && lived_ns > 0.0).then(|| lived_ns * pi / c.instructions)
            }),
        });
    }
    let secs = duration_ns as f64 * 1e-9;
    Ok(RunResult {
        scenario: scenario.name.clone(),
        machine: scenario.machine.name.clone(),
        model: scenario.machine.model,
        tick_ns: scenario.tick_us * 1000,
        seed,
        policy: policy_name,
        pick: pick_name,
        duration_ns,
        epoch_ns,
        tasks,
        metrics: system_metrics_with_progress(&nps, &progresses),
        throughput_instructions_per_s: if secs > 0.0 { total_instr / secs } else { 0.0 },
        throughput_completions_per_s: if secs > 0.0 {
            total_completions as f64 / secs
        } else {
            0.0
        },
        mean_bus_utilization: bus_sum
            .iter()
            .map(|s| {
                if duration_ns > 0 {
                    s / duration_ns as f64
                } else {
                    0.0
                }
            })
            .collect(),
        series,
    })
}

/// Counters of an observation's sample, rounded as the sample carries them.
fn counters_of(s: &counterpoint_core::Sample) -> Counters {
    let g = |e: &str| s.values.get(e).map_or(0, |v| v.raw);
    Counters {
        cycles: g(event::CYCLES) as f64,
        instructions: g(event::INSTRUCTIONS) as f64,
        llc_references: g(event::CACHE_REFERENCES) as f64,
        llc_misses: g(event::CACHE_MISSES) as f64,
        mem_transactions: g(event::MEM_TRANSACTIONS) as f64,
        fp_ops: g(event::FP_OPS) as f64,
        task_clock_ns: g(event::TASK_CLOCK),
        context_switches: g(event::CONTEXT_SWITCHES),
        migrations: g(event::CPU_MIGRATIONS),
        completions: 0,
    }
}

fn record(series: &mut Series, time_ns: u64, deltas: &[Counters], bus: &[f64]) {
    series.time_ns.push(time_ns);
    if series.bus_utilization.is_empty() {
        series.bus_utilization = vec![Vec::new(); bus.len()];
    }
    for (s, u) in series.bus_utilization.iter_mut().zip(bus) {
        s.push(*u);
    }
    // Rounded as an observation's counters are, so both paths give the same series.
    let r = |v: f64| v.round().max(0.0) as u64;
    for (ts, d) in series.tasks.iter_mut().zip(deltas) {
        let (instr, cyc) = (r(d.instructions), r(d.cycles));
        ts.instructions.push(instr);
        ts.cycles.push(cyc);
        ts.llc_misses.push(r(d.llc_misses));
        ts.mem_transactions.push(r(d.mem_transactions));
        ts.fp_ops.push(r(d.fp_ops));
        ts.task_clock_ns.push(d.task_clock_ns);
        ts.ipc.push(if cyc > 0 {
            instr as f64 / cyc as f64
        } else {
            0.0
        });
    }
}

fn solo_key(scenario: &Scenario, i: usize) -> String {
    let t = &scenario.tasks[i];
    let aff = t.affinity.as_ref().map_or("all".into(), |a| a.to_list());
    match &t.workload {
        // Request streams are drawn per task: a server's solo run is its own.
        Workload::Server(_) => format!("server-task-{i}"),
        w => format!("{}|{}", w.label(), aff),
    }
}

/// Cumulative (instructions, cpu_ns) of a solo run, one point per tick.
struct SoloCurve {
    points: Vec<(f64, f64)>,
}

impl SoloCurve {
    /// CPU time to retire `instr` alone (linear within a tick, extrapolated past the end).
    fn cpu_ns_for(&self, instr: f64) -> f64 {
        if instr <= 0.0 || self.points.is_empty() {
            return 0.0;
        }
        let i = self.points.partition_point(|p| p.0 < instr);
        let (a, b) = if i == 0 {
            ((0.0, 0.0), self.points[0])
        } else if i < self.points.len() {
            (self.points[i - 1], self.points[i])
        } else {
            let l = self.points.len();
            if l == 1 {
                ((0.0, 0.0), self.points[0])
            } else {
                (self.points[l - 2], self.points[l - 1])
            }
        };
        if b.0 <= a.0 {
            return b.1;
        }
        a.1 + (instr - a.0) * (b.1 - a.1) / (b.0 - a.0)
    }
}

/// Run task `i` alone until it has retired `target` instructions.
fn solo_curve(
    scenario: &Scenario,
    seed: u64,
    i: usize,
    stream_key: u64,
    target: f64,
) -> Result<SoloCurve, SimError> {
    let mut task = scenario.tasks[i].clone();
    task.start_ms = 0;
    task.repeat = true;
    // The scenario with task i alone, built without cloning every other task (a scenario of
    // thousands of servers takes one solo run per server).
    let solo = Scenario {
        name: scenario.name.clone(),
        machine: scenario.machine.clone(),
        sched: scenario.sched,
        tick_us: scenario.tick_us,
        duration_ms: scenario.duration_ms,
        epoch_ms: scenario.epoch_ms,
        seed: scenario.seed,
        policy: scenario.policy.clone(),
        tasks: vec![task],
    };
    // Same request stream as in the shared run: servers draw from a generator derived from the
    // seed and the task's stream key in the whole scenario (its name, affinity and occurrence).
    let mut sim = Simulation::new_solo(&solo, seed, stream_key)?;
    let mut points = Vec::new();
    let tick = sim.tick_ns();
    // Bound: the shared run's duration times a generous factor (a task alone is never slower).
    let max_ticks = (scenario.duration_ms * 1_000_000 / tick + 2) * 4;
    let mut ticks = 0;
    while ticks < max_ticks {
        // No observation per tick: building one walks every CPU of the machine and allocates
        // a sample for each, most of a solo run's time on a large machine.
        sim.advance_quiet(tick, None);
        ticks += 1;
        // A tick that crossed into a new phase ran at two rates: the crossing is a point of
        // the curve, or a target inside that tick would be placed by the wrong rate.
        points.extend(sim.crossings().iter().map(|&(_, i, ns)| (i, ns)));
        let c = sim
            .counters(0)
            .ok_or(SimError::Invalid("solo task vanished".into()))?;
        points.push((c.instructions, c.task_clock_ns as f64));
        if c.instructions >= target {
            break;
        }
    }
    Ok(SoloCurve { points })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use counterpoint_core::{Action, CpuSet, Observation, TaskId, Topology};

    /// A solo measurement of a machine or program the catalog lacks is an error, not a panic;
    /// of a catalog program, its counters.
    #[test]
    fn solo_counters_refuses_unknown_names() {
        let cat = Catalog::builtin();
        assert!(solo_counters(&cat, "no-such-machine", "gzip", Model::V2, 10).is_err());
        assert!(solo_counters(&cat, "zhang-smp", "no-such-program", Model::V2, 10).is_err());
        let c = solo_counters(&cat, "zhang-smp", "gzip", Model::V2, 10).expect("gzip alone");
        assert!(c.instructions > 0.0 && c.cycles > 0.0);
    }

    /// A pair's throughput needs two threads per core; with them, a second thread adds work
    /// but never doubles it (the sibling always costs something), under both models.
    #[test]
    fn pair_throughput_needs_smt_and_stays_below_two() {
        let cat = Catalog::builtin();
        let e = pair_throughput(&cat, "zhang-smp", "gzip", Model::V1, 10).unwrap_err();
        assert!(e.to_string().contains("1 threads per core"), "{e}");
        assert!(pair_throughput(&cat, "no-such-machine", "gzip", Model::V1, 10).is_err());
        for model in [Model::V1, Model::V2] {
            for (machine, p) in [("masa-2x2ht", "gzip"), ("x5650-2s", "456.hmmer")] {
                let r = pair_throughput(&cat, machine, p, model, 200).unwrap();
                assert!(r > 1.0 && r < 2.0, "{machine} {p} {model:?}: {r}");
            }
        }
    }

    fn scenario() -> Scenario {
        let catalog = Catalog::builtin();
        Scenario::builder(&catalog, "zhang-smp")
            .expect("catalog machine")
            .name("driver")
            .duration_ms(2_000)
            .task("gzip", None)
            .and_then(|b| b.task("swim", None))
            .expect("catalog programs")
            .build()
            .expect("a valid scenario")
    }

    /// Moves task 0 to the other CPU every epoch.
    struct PingPong;
    impl Policy for PingPong {
        fn name(&self) -> &str {
            "ping-pong"
        }
        fn required_events(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn decide(&mut self, _t: &Topology, o: &Observation) -> Vec<Action> {
            let now = o.task(TaskId(0)).and_then(|t| t.affinity.first());
            vec![Action::SetAffinity {
                task: TaskId(0),
                cpus: CpuSet::single(if now == Some(1) { 0 } else { 1 }),
            }]
        }
    }

    #[test]
    fn dry_run_is_the_baseline_and_hold_back_limits_moves() {
        let sc = scenario();
        let epoch = 100_000_000;
        let base = run(&sc, 3, None, None, epoch).unwrap();
        let dry = RunOptions {
            dry_run: true,
            ..RunOptions::new(epoch)
        };
        let mut r = run_with(&sc, 3, Some(&mut PingPong), None, &dry, &mut |_, _| {}).unwrap();
        r.policy = base.policy.clone();
        assert_eq!(r, base, "a dry run changes nothing");

        let moves = |residency: u32| {
            let o = RunOptions {
                min_residency_intervals: residency,
                ..RunOptions::new(epoch)
            };
            let r = run_with(&sc, 3, Some(&mut PingPong), None, &o, &mut |_, _| {}).unwrap();
            r.tasks[0].migrations
        };
        // 20 epochs: a move every epoch without hold-back, at most every third with it.
        let (free, held) = (moves(0), moves(3));
        assert!(free >= 15, "{free}");
        assert!(held <= 8 && held < free, "{held} vs {free}");
    }
}
