//! Why the user-space (affinity-only) pairing policy gains nothing on `zhang-spec` at slice
//! jitter 0 (docs/sim.md, "Moving a task between run queues"): a queued task moved by affinity
//! joins the tail of its new CPU's queue (Linux O(1): `activate_task` appends to the active
//! array; CFS renormalises vruntime to the new queue's `min_vruntime`, which keeps the same
//! relative place). Swapping two tasks that are both last in their queues therefore swaps
//! their rotation slots, and with the CPUs' rotations in lockstep every co-running pair stays
//! what it was. Which placement the tasks are in decides which pairs are *possible*; only the
//! phase of the rotations decides which pairs *run*.

use counterpoint_core::{Action, CpuSet, Machine, TaskId};
use counterpoint_sim::*;
use std::collections::BTreeSet;

fn pinned(cpus: &str) -> Option<CpuSet> {
    Some(CpuSet::parse_list(cpus).unwrap())
}

/// The zhang-spec mix with the given (program, cpu) in scenario order.
fn scenario(tasks: &[(&str, &str)], ms: u64) -> Scenario {
    let mut b = Scenario::builder(&Catalog::builtin(), "zhang-smp")
        .unwrap()
        .duration_ms(ms)
        .seed(1);
    for (p, c) in tasks {
        b = b.task(p, pinned(c)).unwrap();
    }
    b.build().unwrap()
}

const ZHANG: [(&str, &str); 6] = [
    ("gzip", "0"),
    ("parser", "0"),
    ("swim", "0"),
    ("mesa", "1"),
    ("wupwise", "1"),
    ("art", "1"),
];

/// Co-running pairs (by task id) observed at every 100 ms boundary, after `moves` are applied
/// at their times (ms).
fn pairs(moves: &[(u64, u64, &str)], slots: u64) -> Vec<BTreeSet<u64>> {
    let sc = scenario(&ZHANG, slots * 100);
    let mut sim = Simulation::new(&sc, 1).unwrap();
    let mut out = Vec::new();
    for slot in 0..slots {
        for (at, task, cpus) in moves {
            if *at == slot * 100 {
                sim.apply(&Action::SetAffinity {
                    task: TaskId(*task),
                    cpus: CpuSet::parse_list(cpus).unwrap(),
                })
                .unwrap();
            }
        }
        let obs = sim.advance(100_000_000).unwrap();
        let running: BTreeSet<u64> = obs
            .cpus
            .iter()
            .filter_map(|c| c.running)
            .map(|t| t.0)
            .collect();
        out.push(running);
    }
    out
}

#[test]
fn swapping_tasks_that_are_last_in_their_queues_keeps_every_pair() {
    // At 100 ms CPU 0 runs parser with [swim, gzip] queued, CPU 1 wupwise with [art, mesa]:
    // gzip (0) and mesa (3) are both last. The daemon's first move swaps exactly them.
    let base = pairs(&[], 12);
    let swapped = pairs(&[(100, 0, "1"), (100, 3, "0")], 12);
    assert_eq!(base, swapped);
    // The tasks did move: after the swap gzip runs on CPU 1 in mesa's old slot.
    let sc = scenario(&ZHANG, 400);
    let mut sim = Simulation::new(&sc, 1).unwrap();
    sim.advance(100_000_000).unwrap();
    sim.apply(&Action::SetAffinity {
        task: TaskId(0),
        cpus: CpuSet::single(1),
    })
    .unwrap();
    let o = sim.advance(300_000_000).unwrap();
    assert_eq!(o.cpus[1].running, Some(TaskId(0)));
    assert_eq!(sim.counters(0).unwrap().migrations, 1);
}

#[test]
fn the_same_placement_gives_the_baseline_or_the_kernel_result_by_phase_alone() {
    // CPU 0: swim, mesa, wupwise; CPU 1: gzip, parser, art — the placement the user-space
    // daemon reaches. Scenario order sets each queue's rotation order, hence the phase.
    let np = |order: &[(&str, &str)]| {
        run(&scenario(order, 6000), 1, None, None, 100_000_000)
            .unwrap()
            .metrics
            .unwrap()
            .normalized_performance
    };
    // Pairs swim-art, mesa-gzip, wupwise-parser: the baseline's pairs.
    let baseline_pairs = np(&[
        ("swim", "0"),
        ("art", "1"),
        ("mesa", "0"),
        ("gzip", "1"),
        ("wupwise", "0"),
        ("parser", "1"),
    ]);
    // Pairs swim-gzip, mesa-art, wupwise-parser: the daemon's plan (high with low).
    let planned_pairs = np(&[
        ("swim", "0"),
        ("gzip", "1"),
        ("mesa", "0"),
        ("art", "1"),
        ("wupwise", "0"),
        ("parser", "1"),
    ]);
    let zhang: Vec<(&str, &str)> = ZHANG.to_vec();
    let linux = np(&zhang);
    assert!(
        (baseline_pairs - linux).abs() < 0.005,
        "{baseline_pairs} vs {linux}"
    );
    assert!(
        planned_pairs > baseline_pairs + 0.05,
        "{planned_pairs} vs {baseline_pairs}"
    );
}
