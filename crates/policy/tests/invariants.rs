//! Property tests: whatever the machine shape and the counters, every policy's actions are
//! well-formed (non-empty CPU sets of online CPUs, only live observed tasks, each task once),
//! every pick is a valid index, and the oracle is never beaten by a random placement.

use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuId;
use counterpoint_core::event;
use counterpoint_core::machine::{PickContext, TaskStats};
use counterpoint_core::observation::{CpuObservation, Observation, TaskObservation};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_core::task::TaskId;
use counterpoint_core::testutils::topo as topology;
use counterpoint_core::topology::Topology;
use counterpoint_policy::registry::{self, CalibrationSource, Context, Level, OracleInput};
use counterpoint_policy::{pick_by_name, pick_names, FnCost, OracleSearch};
use proptest::prelude::*;
use std::collections::BTreeSet;

const NS: u64 = 1_000_000_000;

/// (cpu index, utilization, insns, misses, fp, finished)
type TaskSpec = (usize, f64, f64, f64, f64, bool);

fn observation(topo: &Topology, specs: &[TaskSpec], time_ns: u64) -> Observation {
    let cpus: Vec<CpuId> = topo.online_cpus().iter().collect();
    let tasks = specs
        .iter()
        .enumerate()
        .map(|(i, &(cpu, util, insns, misses, fp, finished))| {
            let mut s = Sample::new(Some(TaskId(i as u64 + 1)), NS);
            s.set(
                event::TASK_CLOCK,
                CounterValue::exact((util * NS as f64) as u64, NS),
            );
            s.set(event::INSTRUCTIONS, CounterValue::exact(insns as u64, NS));
            s.set(
                event::CYCLES,
                CounterValue::exact((util * 2e9) as u64 + 1, NS),
            );
            s.set(event::CACHE_MISSES, CounterValue::exact(misses as u64, NS));
            s.set(
                event::MEM_TRANSACTIONS,
                CounterValue::exact(misses as u64, NS),
            );
            s.set(event::FP_OPS, CounterValue::exact(fp as u64, NS));
            TaskObservation {
                id: TaskId(i as u64 + 1),
                name: format!("t{i}"),
                affinity: topo.online_cpus(),
                cpu: Some(cpus[cpu % cpus.len()]),
                sample: s,
                runnable: !finished,
                finished,
                code: None,
            }
        })
        .collect();
    Observation {
        time_ns,
        interval_ns: NS,
        tasks,
        cpus: cpus
            .iter()
            .map(|&c| CpuObservation {
                cpu: c,
                running: None,
                busy_fraction: 1.0,
                sample: Sample::new(None, NS),
            })
            .collect(),
        memory_utilization: vec![],
    }
}

fn task_spec() -> impl Strategy<Value = TaskSpec> {
    (
        0usize..64,
        0.0f64..1.0,
        0.0f64..4e9,
        0.0f64..5e7,
        0.0f64..2e9,
        prop::bool::weighted(0.1),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn actions_are_well_formed(
        shape in (1u32..=3, 1u32..=3, 1u32..=2),
        specs in prop::collection::vec(task_spec(), 0..12),
    ) {
        let topo = topology(shape.0, shape.1, shape.2);
        let online = topo.online_cpus();
        for name in registry::names_at(Level::Epoch) {
            // Every epoch-level policy of the registry, with what its constructor may need: the
            // paper's MASA table and, for the oracle, a cost that prefers low CPU numbers.
            let mut cost = FnCost(|p: &[CpuId]| p.iter().map(|c| *c as f64).sum::<f64>());
            let mut ctx = Context {
                topology: Some(&topo),
                calibration: CalibrationSource::PaperXeon,
                oracle: Some(OracleInput {
                    tasks: (1..=specs.len() as u64).map(TaskId).collect(),
                    cost: &mut cost,
                    search: OracleSearch { max_evaluations: 200, ..OracleSearch::default() },
                }),
                ..Context::default()
            };
            let mut policy = match registry::build_epoch(name, &mut ctx) {
                Ok(p) => p,
                // The oracle has nothing to place without tasks.
                Err(_) if name == "oracle" && specs.is_empty() => continue,
                Err(e) => return Err(TestCaseError::fail(format!("{name}: {e}"))),
            };
            // Several periods so the periodic policies (MASA: 5 s) decide at least once.
            for epoch in 1..=6u64 {
                let obs = observation(&topo, &specs, epoch * NS);
                let actions = policy.decide(&topo, &obs);
                let mut seen = BTreeSet::new();
                for a in &actions {
                    for t in a.tasks() {
                        let o = obs.task(t);
                        prop_assert!(o.is_some_and(|o| !o.finished), "{name}: acted on {t}");
                        prop_assert!(seen.insert(t), "{name}: {t} twice");
                    }
                    if let Action::SetAffinity { cpus, .. } = a {
                        prop_assert!(!cpus.is_empty(), "{name}: empty set");
                        prop_assert!(cpus.is_subset(&online), "{name}: offline CPU");
                    }
                }
            }
        }
    }

    #[test]
    fn picks_are_valid_indices(
        ready in prop::collection::vec((0.0f64..3.0, 0.0f64..1.0), 1..8),
        others in prop::collection::vec(prop::option::of((0.0f64..3.0, 0.0f64..1.0)), 0..4),
    ) {
        let topo = topology(1, 4, 1);
        let st = |i: usize, (ipc, bus): (f64, f64)| TaskStats {
            task: TaskId(i as u64),
            ipc,
            bus_utilization: bus,
            llc_mpki: 1.0,
            fp_fraction: 0.0,
        };
        let ready: Vec<TaskStats> = ready.into_iter().enumerate().map(|(i, v)| st(i, v)).collect();
        let others: Vec<(CpuId, Option<TaskStats>)> = others
            .into_iter()
            .enumerate()
            .map(|(i, o)| (i as CpuId + 1, o.map(|v| st(100 + i, v))))
            .collect();
        for name in pick_names() {
            let mut hook = pick_by_name(name).unwrap();
            let ctx = PickContext {
                cpu: 0,
                now_ns: 10,
                topology: &topo,
                ready: &ready,
                others: &others,
                bus_peak_transactions_per_s: 1e8,
            };
            prop_assert!(hook.pick(&ctx) < ready.len());
        }
    }

    #[test]
    fn oracle_is_never_beaten_by_a_random_placement(
        weights in prop::collection::vec(0.0f64..10.0, 1..6),
        random in prop::collection::vec(0usize..8, 6),
    ) {
        // 2 packages x 2 cores x 2 threads; cost: squared package sums plus a core-sharing
        // penalty: invariant under the machine's symmetry, as the oracle requires.
        let topo = topology(2, 2, 2);
        let w = weights.clone();
        let cost = move |p: &[CpuId]| {
            let mut pkg = [0.0f64; 2];
            let mut core = [0.0f64; 4];
            for (i, c) in p.iter().enumerate() {
                pkg[(*c / 4) as usize] += w[i];
                core[(*c / 2) as usize] += w[i];
            }
            pkg.iter().map(|s| s * s).sum::<f64>() + core.iter().map(|s| s * s).sum::<f64>()
        };
        let c1 = cost.clone();
        let best = OracleSearch::default().search(&topo, weights.len(), &mut FnCost(cost)).unwrap();
        prop_assert!(best.exhaustive);
        // A random placement with at most one task per CPU.
        let mut used = BTreeSet::new();
        let mut placement = Vec::new();
        for r in random.iter().take(weights.len()) {
            let mut c = *r as CpuId;
            while used.contains(&c) { c = (c + 1) % 8; }
            used.insert(c);
            placement.push(c);
        }
        prop_assert!(best.cost <= c1(&placement) + 1e-9);
    }
}
