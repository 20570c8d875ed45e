//! A small analytical stand-in for the simulator, for testing the experiments' plumbing
//! (jobs, seeds, summaries, tables, JSON) without running the real model. Each program has an
//! intensity derived from its name; a task's NP falls with the intensity of the tasks sharing
//! its package and with time-sharing its CPU. The policy sees one observation and its affinity
//! actions are applied before NP is computed, so a placement policy changes the outcome.

use crate::lab::{Job, JobTask, Lab, LabError, Outcome, RunSpec, TaskOutcome};
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::{PickContext, PickNext, Policy, TaskStats};
use counterpoint_core::observation::{CpuObservation, Observation, TaskObservation};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::{SymmetricSpec, Topology};
use std::collections::BTreeMap;

pub struct ToyLab;

fn intensity(program: &str) -> f64 {
    let h = program
        .bytes()
        .fold(17u64, |a, b| a.wrapping_mul(31).wrapping_add(b as u64));
    (h % 100) as f64 / 100.0
}

fn machine(m: &str) -> Result<Topology, LabError> {
    let (p, c, t) = match m {
        "masa-2x2ht" => (2, 1, 2),
        "masa-2x1" => (2, 1, 1),
        "zhang-smp" => (2, 1, 1),
        "xeon-4s-32t" => (4, 4, 2),
        other => return Err(LabError(format!("toy lab has no machine {other}"))),
    };
    Topology::symmetric(&SymmetricSpec {
        packages: p,
        cores_per_package: c,
        threads_per_core: t,
        ..Default::default()
    })
    .map_err(|e| LabError(e.to_string()))
}

fn expand(job: &Job) -> Result<(String, Vec<JobTask>), LabError> {
    match job {
        Job::Custom { machine, tasks, .. } => Ok((machine.clone(), tasks.clone())),
        Job::Scenario(name) if name.starts_with("zhang-spec") || name == "zhang-server" => {
            let progs: &[(&str, CpuId)] = if name.starts_with("zhang-spec") {
                &[
                    ("gzip", 0),
                    ("parser", 0),
                    ("swim", 0),
                    ("mesa", 1),
                    ("wupwise", 1),
                    ("art", 1),
                ]
            } else {
                &[("web-clip", 0), ("tpch", 1)]
            };
            Ok((
                "zhang-smp".to_string(),
                progs
                    .iter()
                    .map(|(p, c)| JobTask::program(p, p, Some(CpuSet::single(*c))))
                    .collect(),
            ))
        }
        Job::Scenario(other) => Err(LabError(format!("toy lab has no scenario {other}"))),
    }
}

impl Lab for ToyLab {
    fn topology(&self, job: &Job) -> Result<Topology, LabError> {
        machine(&expand(job)?.0)
    }

    fn run(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
        pick: &mut dyn PickNext,
    ) -> Result<Outcome, LabError> {
        let (m, tasks) = expand(job)?;
        let topo = machine(&m)?;
        let cpus: Vec<CpuId> = topo.online_cpus().iter().collect();
        let mut cpu_of: Vec<CpuId> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                t.affinity
                    .as_ref()
                    .and_then(|a| a.first())
                    .unwrap_or(cpus[i % cpus.len()])
            })
            .collect();
        let inten: Vec<f64> = tasks
            .iter()
            .map(|t| {
                t.programs.iter().map(|p| intensity(p)).sum::<f64>()
                    / t.programs.len().max(1) as f64
            })
            .collect();
        let ns = 1_000_000_000u64;
        let obs_tasks = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut s = Sample::new(Some(TaskId(i as u64)), ns);
                s.set(event::TASK_CLOCK, CounterValue::exact(ns, ns));
                s.set(event::INSTRUCTIONS, CounterValue::exact(1_000_000_000, ns));
                s.set(
                    event::CYCLES,
                    CounterValue::exact((1e9 * (1.0 + inten[i])) as u64, ns),
                );
                s.set(
                    event::CACHE_MISSES,
                    CounterValue::exact((inten[i] * 2e7) as u64, ns),
                );
                s.set(
                    event::MEM_TRANSACTIONS,
                    CounterValue::exact((inten[i] * 2e7) as u64, ns),
                );
                s.set(
                    event::FP_OPS,
                    CounterValue::exact((inten[i] * 1e8) as u64, ns),
                );
                TaskObservation {
                    id: TaskId(i as u64),
                    name: t.name.clone(),
                    affinity: t.affinity.clone().unwrap_or_else(|| topo.online_cpus()),
                    cpu: Some(cpu_of[i]),
                    sample: s,
                    runnable: true,
                    finished: false,
                }
            })
            .collect();
        let obs = Observation {
            time_ns: 6 * ns,
            interval_ns: 6 * ns,
            tasks: obs_tasks,
            cpus: cpus
                .iter()
                .map(|&c| CpuObservation {
                    cpu: c,
                    running: None,
                    busy_fraction: 1.0,
                    sample: Sample::new(None, ns),
                })
                .collect(),
            memory_utilization: vec![],
        };
        for a in policy.decide(&topo, &obs) {
            if let Action::SetAffinity { task, cpus } = a {
                if let (Some(slot), Some(c)) = (cpu_of.get_mut(task.0 as usize), cpus.first()) {
                    *slot = c;
                }
            }
        }
        // Exercise the hook once (the toy has no context switches to speak of).
        let stats: Vec<TaskStats> = (0..tasks.len())
            .map(|i| TaskStats {
                task: TaskId(i as u64),
                ipc: 1.0 / (1.0 + inten[i]),
                bus_utilization: inten[i],
                llc_mpki: 10.0 * inten[i],
                fp_fraction: 0.1,
            })
            .collect();
        if !stats.is_empty() {
            let _ = pick.pick(&PickContext {
                cpu: 0,
                now_ns: 0,
                topology: &topo,
                ready: &stats,
                others: &[],
                bus_peak_transactions_per_s: 1e8,
            });
        }
        let pkg = |c: CpuId| topo.cpu(c).and_then(|x| x.package).unwrap_or(0);
        let jitter = 1.0 + (spec.seed % 7) as f64 * 0.001;
        let out = (0..tasks.len())
            .map(|i| {
                let mut pressure = 0.0;
                let mut sharing = 0.0;
                for j in 0..tasks.len() {
                    if j != i && pkg(cpu_of[j]) == pkg(cpu_of[i]) {
                        pressure += inten[j] * inten[i];
                    }
                    if j != i && cpu_of[j] == cpu_of[i] {
                        sharing += 1.0;
                    }
                }
                let np = 1.0 / (1.0 + 0.3 * pressure) / jitter;
                let alone_s = 100.0 * tasks[i].programs.len() as f64;
                let time_s = alone_s * (1.0 + sharing) / np;
                TaskOutcome {
                    name: tasks[i].name.clone(),
                    np,
                    completion_ns: (!tasks[i].repeat).then_some((time_s * 1e9) as u64),
                    wall_ns_per_program: Some(time_s * 1e9),
                    events: BTreeMap::from([
                        (event::INSTRUCTIONS.to_string(), 1e9 * np * time_s),
                        (event::TASK_CLOCK.to_string(), 1e9 * time_s),
                        (
                            event::FP_OPS.to_string(),
                            inten[i] * 1e8 * time_s * (1.0 + 0.2 * sharing),
                        ),
                        (
                            event::CACHE_MISSES.to_string(),
                            inten[i] * 2e7 * time_s * (1.0 + 0.3 * sharing),
                        ),
                    ]),
                }
            })
            .collect::<Vec<_>>();
        let elapsed = out
            .iter()
            .filter_map(|t| t.completion_ns)
            .max()
            .unwrap_or(0);
        Ok(Outcome {
            tasks: out,
            elapsed_ns: elapsed,
        })
    }

    fn run_light(
        &self,
        job: &Job,
        spec: RunSpec,
        policy: &mut dyn Policy,
    ) -> Result<Outcome, LabError> {
        let mut out = self.run(job, spec, policy, &mut counterpoint_policy::LinuxPick)?;
        for t in &mut out.tasks {
            t.np = f64::NAN;
        }
        Ok(out)
    }

    fn mix_programs(&self) -> Vec<String> {
        [
            "gzip", "mcf", "art", "swim", "mesa", "parser", "eon", "lucas",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::CountProgress;
    use std::sync::atomic::Ordering;

    #[test]
    fn every_experiment_produces_tables_and_paper_numbers() {
        let p = CountProgress::default();
        let results = crate::run("all", &ToyLab, &[1, 2], &p).unwrap();
        let names: Vec<&str> = results.iter().map(|r| r.experiment.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "zhang-spec",
                "zhang-server",
                "masa-placement",
                "masa-testcases",
                "di-vs-oracle"
            ]
        );
        for r in &results {
            assert!(!r.tables.is_empty(), "{}", r.experiment);
            assert!(!r.paper.is_empty(), "{}", r.experiment);
            for (policy, metrics) in &r.policies {
                for (m, s) in metrics {
                    assert!(s.mean.is_finite(), "{} {policy} {m}", r.experiment);
                }
            }
        }
        assert_eq!(
            p.total.load(Ordering::Relaxed),
            p.finished.load(Ordering::Relaxed)
        );
        let json = crate::to_json(&results);
        let spec = &json["zhang-spec"];
        assert_eq!(
            spec["policies"]["bus-pair"]["normalized_performance"]["n"],
            2
        );
        assert_eq!(spec["paper"]["bus-pair"]["normalized_performance"], 0.883);
        let masa = &json["masa-testcases"];
        assert!(masa["policies"]["test case 1 masa"]["gain"]["mean"].is_number());
        assert_eq!(masa["paper"]["test case 2 masa"]["swaps_fp_uops"], 20.0);
        // The oracle is never beaten by a static-affinity policy in the toy (all static).
        let di = &json["di-vs-oracle"]["policies"]["2x2 SMT di"]["distance_from_oracle_pct"];
        assert!(di["min"].as_f64().unwrap() >= -1e-9);
    }

    #[test]
    fn unknown_experiment_lists_names() {
        let e = crate::run("zhang", &ToyLab, &[1], &crate::NoProgress).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("\"zhang\"") && msg.contains("zhang-spec") && msg.contains("all"));
        assert!(matches!(
            crate::run("zhang-spec", &ToyLab, &[], &crate::NoProgress),
            Err(crate::ExperimentError::NoSeeds)
        ));
    }
}
