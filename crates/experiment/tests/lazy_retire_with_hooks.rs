//! Lazy retire on the v2 fast path (docs/sim.md, "v2, sixth pass") with a pick-next hook: the
//! hook reads the running tasks' current slices at every context switch, so the engine
//! retires their deferred ticks first. The hooks then choose exactly as with every tick
//! retired eagerly, and every counter agrees up to the rounding of a product against a sum.

use counterpoint_core::machine::PickNext;
use counterpoint_policy::ComplementPick;
use counterpoint_sim::*;
use std::path::Path;

fn counters(lazy: bool, make: fn() -> ComplementPick) -> Vec<Counters> {
    let cat = Catalog::builtin();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/zhang-spec.toml");
    let mut sc = Scenario::from_file(&path, &cat).unwrap();
    sc.machine.model = Model::V2;
    let mut sim = Simulation::new(&sc, 3).unwrap();
    sim.set_lazy_retire(lazy);
    let mut pick = make();
    for _ in 0..100 {
        sim.advance_quiet(100_000_000, Some(&mut pick as &mut dyn PickNext));
    }
    (0..sim.task_count())
        .map(|i| *sim.counters(i).unwrap())
        .collect()
}

#[test]
fn hooks_choose_alike_with_lazy_retire() {
    for make in [
        ComplementPick::bus as fn() -> ComplementPick,
        ComplementPick::ipc,
    ] {
        let (eager, lazy) = (counters(false, make), counters(true, make));
        for (e, l) in eager.iter().zip(&lazy) {
            assert_eq!(e.context_switches, l.context_switches);
            assert_eq!(e.task_clock_ns, l.task_clock_ns);
            for (a, b) in [
                (e.instructions, l.instructions),
                (e.llc_misses, l.llc_misses),
                (e.mem_transactions, l.mem_transactions),
            ] {
                assert!(
                    (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                    "{a} eager, {b} lazy"
                );
            }
        }
    }
}
