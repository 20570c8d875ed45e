//! Model v2 and Zhang et al.'s point that IPC misleads (issue 13; docs/sim-catalog.md, "Why
//! ipc-pair and bus-pair chose alike on Zhang's mix before session 15", and "The measured CPIs",
//! where the catalog's measured IPCs make it mislead). IPC pairing and bus pairing differ only when a program
//! loses cycles that use no bus: these tests make one low-bus program of the mix FP-latency
//! bound (a counterfactual profile, never the catalog's) and check that its IPC falls while its
//! bus use per instruction does not, and that the IPC hook then picks worse co-runners than the
//! bus hook. Deterministic: the simulator is a pure function of scenario and seed.

use counterpoint_core::CpuSet;
use counterpoint_policy::ComplementPick;
use counterpoint_sim::{run, Catalog, Model, Scenario, Simulation};
use std::path::Path;

/// The catalog with mesa's exposed FP latency per FP instruction set to `fp_dep_cycles`.
fn catalog_with_mesa_fp_dep(fp_dep_cycles: f64) -> Catalog {
    let mut cat = Catalog::builtin();
    let mut mesa = cat.program("mesa").expect("mesa is in the catalog");
    for ph in &mut mesa.phases {
        ph.profile
            .v2
            .as_mut()
            .expect("mesa has a v2 profile")
            .fp_dep_cycles = fp_dep_cycles;
    }
    cat.set_program(mesa);
    cat
}

/// mesa alone on CPU 0 of zhang-smp under v2, from 1 s to 3 s: (IPC, bus lines per
/// instruction).
fn mesa_alone(cat: &Catalog) -> (f64, f64) {
    let sc = Scenario::builder(cat, "zhang-smp")
        .expect("zhang-smp")
        .model(Model::V2)
        .duration_ms(3000)
        .task("mesa", Some(CpuSet::single(0)))
        .expect("mesa")
        .build()
        .unwrap();
    let mut sim = Simulation::new(&sc, 1).expect("scenario is valid");
    sim.advance_quiet(1_000_000_000, None);
    let a = *sim.counters(0).expect("task 0");
    sim.advance_quiet(2_000_000_000, None);
    let b = *sim.counters(0).expect("task 0");
    let ins = b.instructions - a.instructions;
    (
        ins / (b.cycles - a.cycles),
        (b.mem_transactions - a.mem_transactions) / ins,
    )
}

#[test]
fn fp_latency_lowers_ipc_without_changing_bus_use_per_instruction() {
    let (ipc_cat, lines_cat) = mesa_alone(&catalog_with_mesa_fp_dep(0.6));
    let (ipc_slow, lines_slow) = mesa_alone(&catalog_with_mesa_fp_dep(4.0));
    assert!(
        ipc_slow < 0.7 * ipc_cat,
        "IPC {ipc_slow} vs {ipc_cat}: 3.4 more exposed cycles per FP instruction must cost IPC"
    );
    assert!(
        (lines_slow - lines_cat).abs() <= 1e-6 * lines_cat,
        "bus lines per instruction {lines_slow} vs {lines_cat}: FP latency moves no lines"
    );
}

#[test]
fn ipc_pairing_misleads_when_a_low_bus_program_is_fp_latency_bound() {
    let cat = catalog_with_mesa_fp_dep(4.0);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/zhang-spec.toml");
    let mut sc = Scenario::from_file(&path, &cat).expect("zhang-spec.toml parses");
    sc.machine.model = Model::V2;
    let np = |mut pick: ComplementPick| -> f64 {
        run(&sc, 1, None, Some(&mut pick), 100_000_000)
            .expect("run")
            .metrics
            .expect("tasks ran")
            .normalized_performance
    };
    let ipc = np(ComplementPick::ipc());
    let bus = np(ComplementPick::bus());
    // mesa (IPC about 0.42 here, bus about 6 MB/s) now looks like a memory-bound task to the
    // IPC hook, which runs it beside swim about half as often as the bus hook does and swim
    // beside wupwise three times as often (examples/zhang_v2_diag.rs, part 3).
    assert!(
        bus > ipc + 0.02,
        "bus-pair NP {bus} should beat ipc-pair NP {ipc} when IPC misleads"
    );
}
