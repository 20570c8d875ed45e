//! Property test of SchedTask's thread-level placement on odd live input (threads with no
//! samples, empty maps, zero CPU time, threads that come and go between intervals or exit
//! after their samples within one): it never
//! panics, and its actions are well-formed: non-empty sets of online CPUs, only observed tasks,
//! each thread at most once, a thread-level action only for a thread alive now (the source
//! lists live threads' affinities, as the live host does), never a process-level and a
//! thread-level action for one task at once, and a reason for each.

use counterpoint_core::action::Action;
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::Observation;
use counterpoint_core::superfunction::{CodeHeatmap, TaskCode, ThreadCode};
use counterpoint_core::testutils::{observation, task, topo};
use counterpoint_policy::schedtask::SchedTask;
use proptest::prelude::*;
use std::collections::BTreeSet;

/// A thread: (tid, pages it was sampled on: (page, kernel, samples), whether it exited
/// before the end of the interval, after its samples).
type ThreadSpec = (u64, Vec<(u64, bool, u8)>, bool);
/// A task: (CPU-seconds used, its threads).
type TaskSpec = (f64, Vec<ThreadSpec>);

fn thread_spec() -> impl Strategy<Value = ThreadSpec> {
    (
        1u64..12,
        prop::collection::vec((0u64..40, any::<bool>(), 0u8..40), 0..5),
        prop::bool::weighted(0.2),
    )
}

fn obs(t: &counterpoint_core::topology::Topology, tasks: &[TaskSpec], n: u64) -> Observation {
    let all = t.online_cpus();
    let tasks = tasks
        .iter()
        .enumerate()
        .map(|(i, (cpus, threads))| {
            let id = i as u64 + 1;
            let mut o = task(id, 0, &all, &[(event::TASK_CLOCK, cpus * 1e9)]);
            let mut seen = BTreeSet::new();
            let mut exited = BTreeSet::new();
            let threads = threads
                .iter()
                // One entry per tid; tids shift with the interval (threads come and go).
                .filter(|(tid, _, _)| seen.insert(*tid))
                .map(|(tid, pages, gone)| {
                    let tid = id * 100 + (tid + n) % 12;
                    if *gone {
                        exited.insert(tid);
                    }
                    let mut c = CodeHeatmap::new(true);
                    for &(p, kernel, k) in pages {
                        for _ in 0..k {
                            c.add(kernel, p, kernel.then_some(1));
                        }
                    }
                    ThreadCode { tid, code: c }
                })
                .collect();
            let mut code = TaskCode::from_threads(threads, true, 1_000_000);
            // As the live host: every live thread's affinity, sampled or not (one more thread
            // that slept through the interval); a thread that exited after its samples has
            // none.
            for tid in code
                .threads
                .iter()
                .map(|th| th.tid)
                .filter(|t| !exited.contains(t))
                .chain([id * 100 + 99])
                .collect::<Vec<_>>()
            {
                code.thread_affinity.insert(tid, all.clone());
            }
            o.code = Some(code);
            o
        })
        .collect();
    let mut o = observation(t, tasks);
    o.time_ns = n * o.interval_ns;
    o
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn thread_placement_is_well_formed(
        shape in (1u32..=2, 1u32..=3, 1u32..=2),
        tasks in prop::collection::vec(
            (prop_oneof![Just(0.0), 0.0f64..2.0], prop::collection::vec(thread_spec(), 0..5)),
            0..5,
        ),
    ) {
        let t = topo(shape.0, shape.1, shape.2);
        let online = t.online_cpus();
        let mut p = SchedTask::default();
        for n in 1..=5u64 {
            let o = obs(&t, &tasks, n);
            let actions = p.decide(&t, &o);
            let mut threads = BTreeSet::new();
            let mut whole = BTreeSet::new();
            let mut split = BTreeSet::new();
            for a in &actions {
                let (task, cpus) = match a {
                    Action::SetAffinity { task, cpus } => {
                        prop_assert!(whole.insert(*task), "{task} placed whole twice");
                        (*task, cpus)
                    }
                    Action::SetThreadAffinity { task, tid, cpus } => {
                        prop_assert!(threads.insert((*task, *tid)), "{task}/{tid} twice");
                        split.insert(*task);
                        // Only a thread alive now (an exited one's id may be reused).
                        let live = o
                            .task(*task)
                            .and_then(|x| x.code.as_ref())
                            .is_some_and(|c| c.thread_affinity.contains_key(tid));
                        prop_assert!(live, "{task}/{tid} is not a live thread");
                        (*task, cpus)
                    }
                    Action::Swap { .. } => return Err(TestCaseError::fail("a swap")),
                };
                prop_assert!(o.task(task).is_some(), "{task} not observed");
                prop_assert!(!cpus.is_empty() && cpus.is_subset(&online), "{}", cpus.to_list());
                prop_assert!(p.reason(a).is_some(), "no reason for {a:?}");
            }
            prop_assert!(whole.is_disjoint(&split), "{whole:?} {split:?}");
        }
    }
}
