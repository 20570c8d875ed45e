//! Counterpoint's seed experiments on the simulated machine.
//!
//! Each experiment builds the published setup as a simulator job, runs every policy over
//! several seeds (in parallel with rayon), and summarizes per policy the paper's metrics
//! (normalized performance, unfairness, gain, swap counts) as mean and spread beside the
//! paper's numbers. `counterpoint experiment NAME` prints or writes them; `experiment all`
//! writes `report/` (Markdown, SVG figures via plotters, JSON). Policy results are predictions
//! of the calibrated baseline: nothing here tunes a profile or model parameter towards a
//! paper number. The experiments see the simulator through the [`lab::Lab`] trait; every run
//! drives its policy through the same driver loop as the live agent, and policies come from
//! the `counterpoint-policy` registry by name.
//!
//! ```
//! use counterpoint_experiment::lab::{Job, JobTask, Lab, RunSpec};
//! use counterpoint_experiment::sim_lab::SimLab;
//! use counterpoint_policy::{by_name, LinuxPick};
//!
//! let lab = SimLab::new().unwrap();
//! let job = Job::Custom {
//!     machine: "masa-2x2ht".into(),
//!     tasks: vec![JobTask::program("a", "mcf", None), JobTask::program("b", "swim", None)],
//!     duration_ns: 500_000_000,
//!     tick_ns: None,
//! };
//! let spec = RunSpec { seed: 1, epoch_ns: 100_000_000 };
//! let mut di = by_name("di").unwrap();
//! let out = lab.run(&job, spec, di.as_mut(), &mut LinuxPick).unwrap();
//! assert_eq!(out.tasks.len(), 2);
//! let np = out.system().unwrap().normalized_performance;
//! assert!(np > 0.0 && np <= 1.0 + 1e-9);
//! ```

#![warn(missing_docs)]

pub mod clock_scaling;
pub mod corun_slowdown;
pub mod di_oracle;
pub mod exit;
pub mod lab;
pub mod leak;
#[allow(missing_docs)] // documented by its owner
pub mod masa;
pub mod paper;
pub mod progress;
pub mod replica;
#[allow(missing_docs)] // documented by its owner
pub mod report;
pub mod requests;
#[allow(missing_docs)] // documented by its owner
pub mod result;
pub mod schedtask;
pub mod sim_lab;
#[allow(missing_docs)] // documented by its owner
pub mod summary;
pub mod validation;
#[allow(missing_docs)] // documented by its owner
pub mod zhang;

pub use lab::{Lab, LabError};
pub use progress::{CountProgress, NoProgress, Progress};
pub use result::{BarFigure, BarSeries, ExperimentResult, Table};
pub use summary::Summary;

/// Experiments by name, with a one-line description.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("zhang-spec", "Zhang et al. SPEC-CPU2000 mix: IPC and bus-utilization pairing, kernel vs user space, counter share"),
    ("zhang-server", "Zhang et al. web-clip + TPC-H servers: the same policies"),
    ("masa-placement", "Nakajima & Pallipadi Tables 1 and 2: static placements, HT on/off"),
    ("masa-testcases", "Nakajima & Pallipadi test cases 1 and 2: four shells without/with MASA, swaps per metric"),
    ("clock-scaling", "Each of the catalog's 20 SPEC CPU2000 programs alone on a Pentium 4 at 1.3 and 1.7 GHz against Intel's SPEC results: how much of each program's time is memory (outside the seeds)"),
    ("corun-slowdown", "The catalog's SPEC CPU2000 programs in pairs on a dual-core Xeon 5150 with a shared 4 MB L2 against Tian et al.'s measured co-run slowdowns (outside the seeds)"),
    ("di-vs-oracle", "Distributed Intensity and others vs the best static placement on random mixes per machine shape"),
    ("leak", "The SMT side channel: key bits an attacker on the sibling recovers from per-core vs per-task counts, by sampling interval"),
    ("replica", "Döbel & Härtig replica placement: notification cost vs shared-L3 misses, crossover map, replica policy vs fixed placements"),
    ("model-validation", "Every published figure under simulator model v1 and v2 side by side: value, error, tag (reruns the Zhang, MASA, clock-scaling and corun-slowdown experiments under each model)"),
    ("requests", "Per-request counter statistics on a real PostgreSQL (TPC-H-shaped): classes with and without counters (ARI), projection; needs PostgreSQL"),
    ("schedtask", "SchedTask vs Linux, SelectiveOffload, FlexSC, RegionSched, SLICC on 8 OS-intensive benchmarks (32 cores): throughput, i/d-cache hit rates, idleness, ablations"),
    ("all", "every experiment above; writes report/ (Markdown, SVG, JSON)"),
];

/// Names `run` accepts.
pub fn names() -> Vec<&'static str> {
    EXPERIMENTS.iter().map(|(n, _)| *n).collect()
}

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("unknown experiment {name:?}; known: {}", known.join(", "))]
    /// The name is not an experiment.
    Unknown {
        /// The name asked for.
        name: String,
        /// Every experiment's name.
        known: Vec<&'static str>,
    },
    #[error("experiment {experiment}: {source}")]
    /// A run inside the experiment failed.
    Lab {
        /// The experiment.
        experiment: &'static str,
        /// What failed.
        source: LabError,
    },
    #[error("at least one seed is needed")]
    /// An empty seed list.
    NoSeeds,
}

/// The experiments `name` runs, in order (`all`: every one).
fn selection(name: &str) -> Result<Vec<&'static str>, ExperimentError> {
    if !names().contains(&name) {
        return Err(ExperimentError::Unknown {
            name: name.to_string(),
            known: names(),
        });
    }
    Ok(if name == "all" {
        names().into_iter().filter(|n| *n != "all").collect()
    } else {
        names().into_iter().filter(|n| *n == name).collect()
    })
}

/// The runs experiment `exp` reports to its progress over `seeds` seeds; `v1_reused`: for
/// `model-validation`, the first model's results come from the experiments run before it;
/// `all`: run as part of `experiment all` (schedtask then takes its first seeds only).
fn planned(
    exp: &'static str,
    lab: &dyn Lab,
    seeds: u64,
    v1_reused: bool,
    all: bool,
) -> Result<u64, ExperimentError> {
    let wrap = |source| ExperimentError::Lab {
        experiment: exp,
        source,
    };
    Ok(match exp {
        "zhang-spec" => zhang::planned_runs(&zhang::SPEC, seeds),
        "zhang-server" => zhang::planned_runs(&zhang::SERVER, seeds),
        "masa-placement" => masa::placement_runs(seeds),
        "masa-testcases" => masa::testcases_runs(seeds),
        "clock-scaling" => clock_scaling::planned_runs(seeds),
        "corun-slowdown" => corun_slowdown::planned_runs(seeds),
        "di-vs-oracle" => di_oracle::planned_runs(lab, seeds).map_err(wrap)?,
        "leak" => leak::PLANNED_RUNS,
        "replica" => replica::planned_runs(),
        "model-validation" => validation::covered_runs(seeds) * if v1_reused { 1 } else { 2 },
        "requests" => requests::planned_runs(seeds),
        "schedtask" => schedtask::planned_runs(if all {
            seeds.min(schedtask::ALL_SEEDS as u64)
        } else {
            seeds
        }),
        other => return Err(wrap(LabError(format!("experiment {other} has no runner")))),
    })
}

/// How many runs [`run`] of `name` over `seeds` seeds reports to its progress, counted before
/// any runs (from how each experiment plans its runs), so a progress bar's total is the whole
/// from the start.
pub fn planned_runs(name: &str, lab: &dyn Lab, seeds: u64) -> Result<u64, ExperimentError> {
    let v1_reused = name == "all" && runs_v1(lab.forced_model());
    selection(name)?
        .into_iter()
        .map(|exp| planned(exp, lab, seeds, v1_reused, name == "all"))
        .sum()
}

/// One experiment's progress inside [`run`]: its runs were added to the total up front, so
/// its own `add_total` passes on only what goes beyond its plan (none, when the plan is
/// right: tests check that it is).
struct Planned<'a> {
    inner: &'a dyn Progress,
    planned: u64,
    added: std::sync::atomic::AtomicU64,
}

impl Progress for Planned<'_> {
    fn add_total(&self, runs: u64) {
        use std::sync::atomic::Ordering;
        let before = self.added.fetch_add(runs, Ordering::Relaxed);
        let over = before.saturating_add(runs).saturating_sub(self.planned)
            - before.saturating_sub(self.planned);
        if over > 0 {
            self.inner.add_total(over);
        }
    }
    fn done(&self, label: &str) {
        self.inner.done(label);
    }
}

/// Run one experiment (or `all`) over `seeds`. The progress hears the whole number of runs
/// ([`planned_runs`]) before the first one starts.
pub fn run(
    name: &str,
    lab: &dyn Lab,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<Vec<ExperimentResult>, ExperimentError> {
    let selected = selection(name)?;
    if seeds.is_empty() {
        return Err(ExperimentError::NoSeeds);
    }
    // `all` runs the covered experiments before model-validation, which then reuses them.
    let v1_reused = name == "all" && runs_v1(lab.forced_model());
    let plans: Vec<u64> = selected
        .iter()
        .map(|exp| planned(exp, lab, seeds.len() as u64, v1_reused, name == "all"))
        .collect::<Result<_, _>>()?;
    progress.add_total(plans.iter().sum());
    let mut out = Vec::new();
    for (exp, plan) in selected.into_iter().zip(plans) {
        let wrap = |source| ExperimentError::Lab {
            experiment: exp,
            source,
        };
        // What the experiments before this one ran is theirs.
        drop(lab.take_record());
        let progress = &Planned {
            inner: progress,
            planned: plan,
            added: std::sync::atomic::AtomicU64::new(0),
        };
        let r = match exp {
            "zhang-spec" => zhang::run(lab, &zhang::SPEC, seeds, progress),
            "zhang-server" => zhang::run(lab, &zhang::SERVER, seeds, progress),
            "masa-placement" => masa::placement(lab, seeds, progress),
            "masa-testcases" => masa::testcases(lab, seeds, progress),
            "clock-scaling" => clock_scaling::run(lab, seeds, progress),
            "corun-slowdown" => corun_slowdown::run(lab, seeds, progress),
            "di-vs-oracle" => di_oracle::run(lab, seeds, progress),
            "leak" => leak::run(seeds, progress).map_err(LabError),
            "replica" => replica::run(seeds, progress, lab.forced_model()).map_err(LabError),
            "model-validation" => {
                // v1 as the lab runs it: reuse this call's results when `all` computed them
                // under v1 (not when `--model v2` forced the lab to the second model).
                let lab_runs_v1 = runs_v1(lab.forced_model());
                let have: Vec<ExperimentResult> = out
                    .iter()
                    .filter(|r: &&ExperimentResult| {
                        validation::COVERED.contains(&r.experiment.as_str())
                    })
                    .cloned()
                    .collect();
                let v1 = if lab_runs_v1 && have.len() == validation::COVERED.len() {
                    Ok(have)
                } else {
                    validation::run_model(counterpoint_sim::Model::V1, seeds, progress)
                };
                v1.and_then(|v1| {
                    let v2 = validation::run_model(counterpoint_sim::Model::V2, seeds, progress)?;
                    Ok(validation::compare(&v1, &v2, seeds))
                })
            }
            "requests" => requests::run(seeds, progress).map_err(LabError),
            // Under `all` its first seeds only, to keep the whole report's time (about 5 s a
            // seed); run alone, every seed asked for.
            "schedtask" => schedtask::run(
                if name == "all" {
                    &seeds[..seeds.len().min(schedtask::ALL_SEEDS)]
                } else {
                    seeds
                },
                progress,
            )
            .map_err(LabError),
            other => Err(LabError(format!("experiment {other} has no runner"))),
        }
        .map_err(wrap)?;
        let mut r = r;
        let ran = lab.take_record();
        // An experiment that runs the engine outside the lab (replica) says its own model.
        if r.model.is_empty() || !ran.models.is_empty() {
            r.model = model_label(exp, lab.forced_model(), &ran.models);
        }
        if let Some(lengths) = ran.lengths() {
            r.run_length = lengths;
        }
        r.seeds_note = seeds_note(exp, r.seeds.len(), seeds.len());
        out.push(r);
    }
    Ok(out)
}

/// Why experiment `exp` ran `ran` of the `asked` seeds (empty when it ran them all): the
/// report's header counts the seeds asked for, and said nothing of schedtask's two (report
/// audit, session 29).
fn seeds_note(exp: &str, ran: usize, asked: usize) -> String {
    if ran >= asked {
        return String::new();
    }
    match exp {
        "schedtask" => format!(
            "under `all` schedtask runs only the first {ran} of the {asked} seeds (each costs \
             about 5 s of CPU; `schedtask::ALL_SEEDS` keeps the whole report's time down); \
             `counterpoint experiment schedtask --seeds {asked}` runs them all. With {ran} \
             seeds an interval is wide (Student's t with {} degree(s) of freedom), so a \
             \"no measurable\" verdict below says little; more seeds narrow it (report audit, \
             session 30)",
            ran.saturating_sub(1)
        ),
        _ => format!("{ran} of the {asked} seeds"),
    }
}

/// Which physics experiment `exp` ran under, in words for its result: every figure depends
/// on it, and a result that did not say could not be told from the other model's. `ran`: the
/// models its runs used (`lab::RunRecord`), said as they are when `--model` did not force one
/// ("v1" when every run was v1: "each scenario's own (v1 unless it names v2)" left the reader
/// to find out that none named v2; report audit, session 29).
pub fn model_label(
    exp: &str,
    forced: Option<counterpoint_sim::Model>,
    ran: &std::collections::BTreeSet<counterpoint_sim::Model>,
) -> String {
    use counterpoint_sim::Model;
    match (exp, forced) {
        ("model-validation", _) => "v1 and v2".to_string(),
        // These run on their own models, not the catalog's physics: `--model` does not reach
        // them (requests measures a real PostgreSQL; leak and schedtask have their own).
        ("leak" | "requests" | "schedtask", _) => "its own (--model does not reach it)".to_string(),
        (_, Some(m)) => format!("{} (--model)", m.label()),
        (_, None) => match ran.iter().copied().collect::<Vec<_>>()[..] {
            [m] => m.label().to_string(),
            [Model::V1, Model::V2] => "v1 and v2 (each scenario's own)".to_string(),
            _ => "each scenario's own (v1 unless it names v2)".to_string(),
        },
    }
}

/// Whether a lab forced to `model` (None: each scenario's own, v1 for the covered ones) runs
/// the first model, so that `all`'s results can stand as model-validation's v1 column.
fn runs_v1(model: Option<counterpoint_sim::Model>) -> bool {
    matches!(model, None | Some(counterpoint_sim::Model::V1))
}

/// The `--json` shape: experiment name → {policies, paper, ...}.
pub fn to_json(results: &[ExperimentResult]) -> serde_json::Value {
    serde_json::Value::Object(
        results
            .iter()
            .map(|r| {
                (
                    r.experiment.clone(),
                    serde_json::to_value(r).unwrap_or(serde_json::Value::Null),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each result says the model and the simulated lengths its runs had, as recorded by the
    /// lab, not what the scenarios were expected to name (shortened runs: 200 ms each).
    #[test]
    fn results_say_what_their_runs_were() {
        let lab = lab::ShortLab {
            lab: sim_lab::SimLab::new().unwrap(),
            cap_ns: 200_000_000,
        };
        let r = run("di-vs-oracle", &lab, &[7], &NoProgress).unwrap();
        assert_eq!(r[0].model, "v1");
        assert_eq!(r[0].run_length, "200 ms each");
        assert_eq!(r[0].seeds_note, "");
        let v2 = lab::ShortLab {
            lab: sim_lab::SimLab::new()
                .unwrap()
                .with_model(counterpoint_sim::Model::V2),
            cap_ns: 200_000_000,
        };
        let r = run("di-vs-oracle", &v2, &[7], &NoProgress).unwrap();
        assert_eq!(r[0].model, "v2 (--model)");
        // Nothing left over for the next experiment.
        assert_eq!(v2.take_record(), lab::RunRecord::default());
    }

    /// `all`'s total is every experiment's, less the first model's runs of model-validation,
    /// which reuses the experiments run before it (not under `--model v2`), and less
    /// schedtask's seeds beyond its first `ALL_SEEDS`, which `all` leaves out (alone, it runs
    /// every seed).
    #[test]
    fn all_plans_every_experiment_once() {
        let seeds = 3;
        let singles = |lab: &dyn Lab| -> u64 {
            names()
                .into_iter()
                .filter(|n| *n != "all")
                .map(|n| planned_runs(n, lab, seeds).unwrap())
                .sum()
        };
        let schedtask_left_out =
            schedtask::planned_runs(seeds) - schedtask::planned_runs(schedtask::ALL_SEEDS as u64);
        assert!(schedtask_left_out > 0);
        let lab = sim_lab::SimLab::new().unwrap();
        assert_eq!(
            planned_runs("all", &lab, seeds).unwrap(),
            singles(&lab) - validation::covered_runs(seeds) - schedtask_left_out
        );
        let v2 = sim_lab::SimLab::new()
            .unwrap()
            .with_model(counterpoint_sim::Model::V2);
        assert_eq!(
            planned_runs("all", &v2, seeds).unwrap(),
            singles(&v2) - schedtask_left_out
        );
        let none = std::collections::BTreeSet::new();
        assert_eq!(
            model_label("zhang-spec", Some(counterpoint_sim::Model::V2), &none),
            "v2 (--model)"
        );
        assert_eq!(model_label("model-validation", None, &none), "v1 and v2");
        assert_eq!(seeds_note("schedtask", 5, 5), "");
        assert!(seeds_note("schedtask", 2, 5)
            .starts_with("under `all` schedtask runs only the first 2 of the 5 seeds"));
        // Unforced, said from what ran.
        use counterpoint_sim::Model::{V1, V2};
        assert_eq!(model_label("zhang-spec", None, &[V1].into()), "v1");
        assert_eq!(model_label("zhang-spec", None, &[V2].into()), "v2");
        assert_eq!(
            model_label("zhang-spec", None, &[V1, V2].into()),
            "v1 and v2 (each scenario's own)"
        );
        assert_eq!(
            model_label("schedtask", Some(counterpoint_sim::Model::V2), &none),
            "its own (--model does not reach it)"
        );
        // Alone, schedtask runs every seed asked for (it ran two, silently; CLI probe).
        assert_eq!(
            planned_runs("schedtask", &lab, 3).unwrap(),
            3 * planned_runs("schedtask", &lab, 1).unwrap()
        );
        // Seeds multiply what runs per seed; leak and replica run a fixed set.
        assert_eq!(
            planned_runs("zhang-spec", &lab, 2).unwrap() * 2,
            planned_runs("zhang-spec", &lab, 4).unwrap()
        );
        assert_eq!(
            planned_runs("leak", &lab, 1).unwrap(),
            planned_runs("leak", &lab, 9).unwrap()
        );
        assert!(matches!(
            planned_runs("nope", &lab, 1),
            Err(ExperimentError::Unknown { .. })
        ));
    }

    /// `experiment all --model v2` must not pass its v2 results off as model-validation's v1.
    #[test]
    fn only_v1_results_stand_for_the_v1_column() {
        assert!(runs_v1(None));
        assert!(runs_v1(Some(counterpoint_sim::Model::V1)));
        assert!(!runs_v1(Some(counterpoint_sim::Model::V2)));
    }
}
