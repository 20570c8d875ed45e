//! The [`Lab`] over the real simulator (`counterpoint-sim`): jobs become scenarios (catalog
//! scenario files, or `Scenario::builder` on a catalog machine), runs go through
//! `counterpoint_sim::run`, and per-task outcomes are read from its `RunResult` (NP, rate-based
//! time per program, completion times and event totals from the per-epoch series).

use crate::lab::{Job, Lab, LabError, Outcome, RunRecord, RunSpec, TaskOutcome};
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::{PickNext, Policy};
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use counterpoint_policy::registry::{
    self, BuildError, Built, CalibrationSource, Context, Need, OracleInput,
};
use counterpoint_policy::{Calibration, FnCost, Linux, OracleSearch, PlacementCost};
use counterpoint_sim::{Catalog, Model, RunOptions, Scenario, TaskSpec, Workload};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The simulator with its built-in catalog and the scenario files of `scenarios/`.
pub struct SimLab {
    catalog: Catalog,
    scenario_dirs: Vec<PathBuf>,
    /// Physics every job runs under, overriding the scenario's and the machine's.
    model: Option<Model>,
    /// The models and lengths of the runs since the last [`Lab::take_record`].
    record: std::sync::Mutex<RunRecord>,
}

impl SimLab {
    /// The built-in catalog; scenario files are looked up in `./scenarios` and in the
    /// repository's `scenarios/` (where this crate was built from).
    pub fn new() -> Result<Self, LabError> {
        let mut dirs = vec![PathBuf::from("scenarios")];
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        dirs.push(repo);
        Ok(Self {
            catalog: Catalog::builtin(),
            scenario_dirs: dirs,
            model: None,
            record: Default::default(),
        })
    }

    /// The same lab, running every job under `model` (the validation table's side by side).
    pub fn with_model(mut self, model: Model) -> Self {
        self.model = Some(model);
        self
    }

    /// The same lab building its jobs from `catalog` instead of the built-in one (a machine or
    /// program edited for a sensitivity run; the built-in catalog is what every experiment
    /// reports).
    pub fn with_catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// The catalog jobs are built from.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    fn scenario_file(&self, name: &str) -> Result<Scenario, LabError> {
        for d in &self.scenario_dirs {
            let p = d.join(format!("{name}.toml"));
            if p.is_file() {
                return Scenario::from_file(&p, &self.catalog).map_err(|e| LabError(e.to_string()));
            }
        }
        Err(LabError(format!(
            "scenario {name:?} not found (looked for {name}.toml in {})",
            self.scenario_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// The scenario a job stands for.
    pub fn scenario(&self, job: &Job) -> Result<Scenario, LabError> {
        let mut sc = self.scenario_as_given(job)?;
        if let Some(m) = self.model {
            sc.machine.model = m;
        }
        Ok(sc)
    }

    fn scenario_as_given(&self, job: &Job) -> Result<Scenario, LabError> {
        match job {
            Job::Scenario(name) => self.scenario_file(name),
            Job::Custom {
                machine,
                tasks,
                duration_ns,
                tick_ns,
            } => {
                let mut b = Scenario::builder(&self.catalog, machine)
                    .map_err(LabError)?
                    .name("experiment")
                    .duration_ms((duration_ns / 1_000_000).max(1));
                if let Some(t) = tick_ns {
                    b = b.tick_us((t / 1_000).max(10));
                }
                for t in tasks {
                    let mut progs = Vec::new();
                    for p in &t.programs {
                        progs.push(self.catalog.program(p).ok_or_else(|| {
                            LabError(format!(
                                "unknown program {p:?}; the catalog has: {}",
                                self.catalog.program_names().join(", ")
                            ))
                        })?);
                    }
                    let workload = match progs.len() {
                        0 => return Err(LabError(format!("task {} has no program", t.name))),
                        1 => Workload::Program(progs.remove(0)),
                        _ => Workload::Shell(progs),
                    };
                    b = b.task_spec(TaskSpec {
                        name: t.name.clone(),
                        workload,
                        affinity: t.affinity.clone(),
                        repeat: t.repeat,
                        start_ms: 0,
                    });
                }
                b.build().map_err(|e| LabError(e.to_string()))
            }
        }
    }
    /// [`Lab::run`] on a scenario (through `counterpoint_sim::run`, i.e. the driver).
    pub fn run_scenario(
        &self,
        scenario: &Scenario,
        spec: RunSpec,
        policy: &mut dyn Policy,
        pick: &mut dyn PickNext,
    ) -> Result<Outcome, LabError> {
        let r = counterpoint_sim::run(scenario, spec.seed, Some(policy), Some(pick), spec.epoch_ns)
            .map_err(|e| LabError(e.to_string()))?;
        self.note(scenario, r.duration_ns);
        let mut tasks = Vec::with_capacity(r.tasks.len());
        for (i, t) in r.tasks.iter().enumerate() {
            let series = r.series.tasks.get(i);
            let sum = |f: fn(&counterpoint_sim::TaskSeries) -> &Vec<u64>| -> f64 {
                series.map_or(0.0, |s| f(s).iter().map(|v| *v as f64).sum())
            };
            let events = BTreeMap::from([
                (event::INSTRUCTIONS.to_string(), sum(|s| &s.instructions)),
                (event::CYCLES.to_string(), sum(|s| &s.cycles)),
                (event::CACHE_MISSES.to_string(), sum(|s| &s.llc_misses)),
                (
                    event::MEM_TRANSACTIONS.to_string(),
                    sum(|s| &s.mem_transactions),
                ),
                (event::FP_OPS.to_string(), sum(|s| &s.fp_ops)),
                (event::TASK_CLOCK.to_string(), sum(|s| &s.task_clock_ns)),
            ]);
            let spec_task = scenario.tasks.get(i);
            // Completion of a run-once task: the end of the epoch in which its cumulative
            // instructions reached its work.
            let completion_ns = match (spec_task, series) {
                (Some(st), Some(s)) if !st.repeat => {
                    work_instructions(&st.workload).and_then(|w| {
                        let mut acc = 0.0;
                        s.instructions
                            .iter()
                            .zip(&r.series.time_ns)
                            .find_map(|(d, tns)| {
                                acc += *d as f64;
                                (acc >= w * (1.0 - 1e-9)).then_some(*tns)
                            })
                    })
                }
                _ => None,
            };
            tasks.push(TaskOutcome {
                name: t.name.clone(),
                np: t.np.unwrap_or(0.0),
                completion_ns,
                wall_ns_per_program: t.wall_ns_per_program,
                events,
            });
        }
        Ok(Outcome {
            tasks,
            elapsed_ns: r.duration_ns,
        })
    }

    /// [`Lab::run_light`] on a scenario: the policy through the driver
    /// ([`counterpoint_sim::drive`]), event totals only.
    pub fn run_light_scenario(
        &self,
        scenario: &Scenario,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError> {
        let err = |e: counterpoint_sim::SimError| LabError(e.to_string());
        let sim = counterpoint_sim::drive(
            scenario,
            spec.seed,
            policy,
            None,
            &RunOptions::new(spec.epoch_ns.max(1)),
        )
        .map_err(err)?;
        let mut tasks = Vec::with_capacity(sim.task_count());
        for i in 0..sim.task_count() {
            let c = sim
                .counters(i)
                .ok_or_else(|| LabError(format!("task {i} vanished")))?;
            tasks.push(TaskOutcome {
                name: sim.task_name(i).unwrap_or_default().to_string(),
                np: f64::NAN,
                completion_ns: None,
                wall_ns_per_program: None,
                events: BTreeMap::from([
                    (event::INSTRUCTIONS.to_string(), c.instructions),
                    (event::CYCLES.to_string(), c.cycles),
                    (event::CACHE_MISSES.to_string(), c.llc_misses),
                    (event::MEM_TRANSACTIONS.to_string(), c.mem_transactions),
                    (event::FP_OPS.to_string(), c.fp_ops),
                    (event::TASK_CLOCK.to_string(), c.task_clock_ns as f64),
                ]),
            });
        }
        self.note(scenario, sim.now_ns());
        Ok(Outcome {
            tasks,
            elapsed_ns: sim.now_ns(),
        })
    }

    /// Record a run of `scenario` that lasted `length_ns` (for [`Lab::take_record`]).
    fn note(&self, scenario: &Scenario, length_ns: u64) {
        if let Ok(mut r) = self.record.lock() {
            r.add(scenario.machine.model, length_ns);
        }
    }
}

/// Instructions of one pass of a workload (`None` for servers).
fn work_instructions(w: &Workload) -> Option<f64> {
    match w {
        Workload::Program(p) => Some(p.instructions() as f64),
        Workload::Shell(ps) => Some(ps.iter().map(|p| p.instructions() as f64).sum()),
        Workload::Server(_) => None,
    }
}

impl Lab for SimLab {
    fn forced_model(&self) -> Option<Model> {
        self.model
    }

    fn take_record(&self) -> RunRecord {
        self.record
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    fn topology(&self, job: &Job) -> Result<Topology, LabError> {
        let machine = match job {
            Job::Scenario(_) => self.scenario(job)?.machine,
            Job::Custom { machine, .. } => self.catalog.machine(machine).ok_or_else(|| {
                LabError(format!(
                    "unknown machine {machine:?}; the catalog has: {}",
                    self.catalog.machine_names().join(", ")
                ))
            })?,
        };
        machine.topology().map_err(|e| LabError(e.to_string()))
    }

    fn run(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
        pick: &mut dyn PickNext,
    ) -> Result<Outcome, LabError> {
        self.run_scenario(&self.scenario(job)?, spec, policy, pick)
    }

    fn run_light(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError> {
        self.run_light_scenario(&self.scenario(job)?, spec, policy)
    }

    fn mix_programs(&self) -> Vec<String> {
        // The probe aliases (INT, FP, L2C, MEM) duplicate SPEC programs under other names.
        self.catalog
            .program_names()
            .into_iter()
            .filter(|n| n.chars().any(|c| c.is_ascii_lowercase()))
            .collect()
    }
}

/// Another lab's jobs, all moved to one machine (a scenario's own machine, which need not be in
/// the catalog): how MASA's calibration run measures the machine a policy will run on.
struct OnMachine<'a> {
    lab: &'a SimLab,
    machine: counterpoint_sim::MachineSpec,
}

impl OnMachine<'_> {
    fn scenario(&self, job: &Job) -> Result<Scenario, LabError> {
        let mut sc = self.lab.scenario(job)?;
        sc.machine = self.machine.clone();
        Ok(sc)
    }
}

impl Lab for OnMachine<'_> {
    fn topology(&self, _job: &Job) -> Result<Topology, LabError> {
        self.machine.topology().map_err(|e| LabError(e.to_string()))
    }
    fn run(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
        pick: &mut dyn PickNext,
    ) -> Result<Outcome, LabError> {
        self.lab
            .run_scenario(&self.scenario(job)?, spec, policy, pick)
    }
    fn run_light(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError> {
        self.lab
            .run_light_scenario(&self.scenario(job)?, spec, policy)
    }
    fn mix_programs(&self) -> Vec<String> {
        self.lab.mix_programs()
    }
}

/// The oracle searches scenarios of at most this many tasks...
pub const ORACLE_MAX_TASKS: usize = 8;
/// ...and at most this many canonical (symmetry-reduced) static placements.
pub const ORACLE_MAX_PLACEMENTS: u64 = 2_000;
/// Each placement is evaluated by a run of this much simulated time (or the scenario's
/// duration if shorter).
pub const ORACLE_SCREEN_NS: u64 = 2_000_000_000;

/// The oracle's cost on the simulator: a short light run of the scenario with every task
/// pinned where the placement says; cost = -sum(ln(instructions per CPU-second)), i.e. the
/// placement with the best geometric-mean rate (the solo rates are the same for every
/// placement, so ranking by rate is ranking by normalized performance).
struct SimCost<'a> {
    lab: &'a SimLab,
    scenario: Scenario,
    seed: u64,
    epoch_ns: u64,
    error: Option<LabError>,
}

impl PlacementCost for SimCost<'_> {
    fn cost(&mut self, placement: &[CpuId]) -> f64 {
        let mut sc = self.scenario.clone();
        for (t, c) in sc.tasks.iter_mut().zip(placement) {
            t.affinity = Some(CpuSet::single(*c));
        }
        let spec = RunSpec {
            seed: self.seed,
            epoch_ns: self.epoch_ns,
        };
        match self.lab.run_light_scenario(&sc, spec, &mut Linux) {
            Ok(o) => -o
                .tasks
                .iter()
                .map(|t| {
                    let i = t.events.get(event::INSTRUCTIONS).copied().unwrap_or(0.0);
                    let ns = t.events.get(event::TASK_CLOCK).copied().unwrap_or(0.0);
                    // A task that did not run counts as one instruction per second.
                    let ips = if ns > 0.0 { i / (ns * 1e-9) } else { 0.0 };
                    ips.max(1.0).ln()
                })
                .sum::<f64>(),
            Err(e) => {
                self.error.get_or_insert(e);
                f64::INFINITY
            }
        }
    }
}

/// What `build_policy` may use besides the registry's defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimPolicyOptions {
    /// MASA: use the paper's 2002 Xeon table instead of calibrating the scenario's machine.
    pub paper_calibration: bool,
    /// `spread`: CPUs used from which a task counts as hungry.
    pub hungry_cpus: Option<f64>,
}

impl SimLab {
    /// MASA's load calibration measured on `machine`: the probe solo and co-runs of
    /// [`crate::masa::calibrate`] (the paper's method), on the simulated `machine`.
    pub fn calibrate_machine(
        &self,
        machine: &counterpoint_sim::MachineSpec,
        seed: u64,
    ) -> Result<Calibration, LabError> {
        let topology = machine.topology().map_err(|e| LabError(e.to_string()))?;
        let tree = counterpoint_policy::tree::MachineTree::new(&topology);
        if tree.packages.first().map_or(0, |p| p.cpus().len()) < 2 {
            return Err(LabError(format!(
                "MASA calibrates by co-running probes on two logical CPUs of one package; \
                 {} has one CPU per package",
                machine.name
            )));
        }
        crate::masa::calibrate(
            &OnMachine {
                lab: self,
                machine: machine.clone(),
            },
            seed,
        )
        .map_err(|e| LabError(format!("calibrating {} for MASA: {e}", machine.name)))
    }

    /// Build a registry policy for a simulated run of `scenario`: MASA gets the calibration of
    /// the scenario's machine (or the paper's table when asked), the oracle a search of the
    /// scenario's static placements with short simulated runs (refused above
    /// [`ORACLE_MAX_TASKS`] tasks or [`ORACLE_MAX_PLACEMENTS`] placements).
    pub fn build_policy(
        &self,
        name: &str,
        scenario: &Scenario,
        seed: u64,
        options: &SimPolicyOptions,
    ) -> Result<Built, LabError> {
        let err = |e: BuildError| LabError(e.to_string());
        let entry = registry::lookup(name).map_err(err)?;
        let topology = scenario
            .machine
            .topology()
            .map_err(|e| LabError(e.to_string()))?;
        let calibration = if !entry.needs.contains(&Need::Calibration) {
            CalibrationSource::None
        } else if options.paper_calibration {
            CalibrationSource::PaperXeon
        } else {
            CalibrationSource::Measured(self.calibrate_machine(&scenario.machine, seed)?)
        };
        let mut ctx = Context {
            topology: Some(&topology),
            calibration,
            oracle: None,
            options: registry::Options {
                hungry_cpus: options.hungry_cpus,
                foreign_cpus: None,
            },
        };
        if !entry.needs.contains(&Need::PlacementCost) {
            return registry::build(name, &mut ctx).map_err(err);
        }
        let n = scenario.tasks.len();
        if n == 0 || n > ORACLE_MAX_TASKS {
            return Err(LabError(format!(
                "oracle: searches scenarios of 1 to {ORACLE_MAX_TASKS} tasks; {} has {n}",
                scenario.name
            )));
        }
        // Count the canonical placements first (no simulation), to refuse a search too big.
        let mut count = 0u64;
        OracleSearch {
            max_evaluations: ORACLE_MAX_PLACEMENTS + 1,
            ..OracleSearch::default()
        }
        .search(
            &topology,
            n,
            &mut FnCost(|_: &[CpuId]| {
                count += 1;
                0.0
            }),
        );
        if count > ORACLE_MAX_PLACEMENTS {
            return Err(LabError(format!(
                "oracle: {n} tasks on {} CPUs have more than {ORACLE_MAX_PLACEMENTS} static \
                 placements to simulate; use a smaller scenario",
                topology.online_cpus().len()
            )));
        }
        let mut screen = scenario.clone();
        screen.duration_ms = screen.duration_ms.clamp(1, ORACLE_SCREEN_NS / 1_000_000);
        let mut cost = SimCost {
            lab: self,
            scenario: screen,
            seed,
            epoch_ns: (scenario.epoch_ms * 1_000_000).max(1),
            error: None,
        };
        ctx.oracle = Some(OracleInput {
            tasks: (0..n as u64).map(TaskId).collect(),
            cost: &mut cost,
            search: OracleSearch::default(),
        });
        let built = registry::build(name, &mut ctx).map_err(err);
        drop(ctx);
        if let Some(e) = cost.error {
            return Err(LabError(format!("oracle: evaluating a placement: {e}")));
        }
        built
    }
}
