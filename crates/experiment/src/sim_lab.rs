//! The [`Lab`] over the real simulator (`counterpoint-sim`): jobs become scenarios (catalog
//! scenario files, or `Scenario::builder` on a catalog machine), runs go through
//! `counterpoint_sim::run`, and per-task outcomes are read from its `RunResult` (NP, rate-based
//! time per program, completion times and event totals from the per-epoch series).

use crate::lab::{Job, Lab, LabError, Outcome, RunSpec, TaskOutcome};
use counterpoint_core::event;
use counterpoint_core::machine::{PickNext, Policy};
use counterpoint_core::topology::Topology;
use counterpoint_sim::{Catalog, Scenario, TaskSpec, Workload};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The simulator with its built-in catalog and the scenario files of `scenarios/`.
pub struct SimLab {
    catalog: Catalog,
    scenario_dirs: Vec<PathBuf>,
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
        })
    }

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
                Ok(b.build())
            }
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
        let scenario = self.scenario(job)?;
        let r = counterpoint_sim::run(
            &scenario,
            spec.seed,
            Some(policy),
            Some(pick),
            spec.epoch_ns,
        )
        .map_err(|e| LabError(e.to_string()))?;
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

    fn run_light(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError> {
        use counterpoint_core::machine::Machine;
        let scenario = self.scenario(job)?;
        let err = |e: counterpoint_sim::SimError| LabError(e.to_string());
        let mut sim = counterpoint_sim::Simulation::new(&scenario, spec.seed).map_err(err)?;
        let total_ns = scenario.duration_ms * 1_000_000;
        let epoch = spec.epoch_ns.max(1);
        while sim.now_ns() < total_ns && !sim.all_done() {
            let obs = sim
                .advance(epoch.min(total_ns - sim.now_ns()))
                .map_err(err)?;
            let topo = sim.topology().clone();
            for a in policy.decide(&topo, &obs) {
                sim.apply(&a).map_err(err)?;
            }
        }
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
        Ok(Outcome {
            tasks,
            elapsed_ns: sim.now_ns(),
        })
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
