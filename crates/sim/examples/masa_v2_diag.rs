//! Where MASA's test cases lose time under model v2: each test case (four shells on the dual
//! Xeon with Hyper-Threading, the default scheduler, the shells in the scenario file's order:
//! one pairing of them, where `masa-testcases` varies the pairing with the seed) run as the
//! catalog has it and with one source of co-run slowdown removed at a time —
//! Hyper-Threading's issue and unit sharing, the bus's queueing (a bus a hundred times wider),
//! the shared L2 (each package's L2 a hundred times larger) — and with all three, each beside
//! the sum of the shells' solo times on the same edited machine (a wider bus or a larger L2
//! also speeds a shell alone, so co-running's cost is the difference). The paper's totals (11036 s and
//! 9322 s without MASA) are validation figures: this says which mechanism would have to be
//! stronger for the model to reach them, not what to fit.
//!
//! `cargo run --release -p counterpoint-sim --example masa_v2_diag [-- SEEDS]` (default 1 seed;
//! four shells on four logical CPUs never queue, so the seeds give the same totals).
//! Counterfactual machines exist only in this program, never in the catalog.

use counterpoint_sim::*;

fn fail(msg: String) -> ! {
    eprintln!("masa_v2_diag: {msg}");
    std::process::exit(1)
}

/// Sum over the shells of their completion times (s), the test cases' "total".
fn total_s(sc: &Scenario, seed: u64) -> f64 {
    let mut sim = Simulation::new(sc, seed).unwrap_or_else(|e| fail(e.to_string()));
    let step_ns = 10_000_000_000;
    let limit_ns = sc.duration_ms * 1_000_000;
    let mut t = 0;
    while t < limit_ns && (0..sim.task_count()).any(|i| sim.finish_ns(i).is_none()) {
        sim.advance_quiet(step_ns, None);
        t += step_ns;
    }
    (0..sim.task_count())
        .map(|i| sim.finish_ns(i).unwrap_or(limit_ns) as f64 / 1e9)
        .sum()
}

/// Hyper-Threading's issue and unit sharing off (both models' parameters).
fn no_ht(m: &mut MachineSpec) {
    if let Some(smt) = &mut m.v2.smt {
        smt.issue_penalty = 0.0;
        smt.same_unit_penalty = 0.0;
    }
    m.smt.issue_penalty = 0.0;
    m.smt.same_unit_penalty = 0.0;
}

/// A bus a hundred times wider: no queueing.
fn wide_bus(m: &mut MachineSpec) {
    m.v2.sustained_bandwidth_gb_per_s *= 100.0;
    m.peak_bandwidth_gb_per_s *= 100.0;
}

/// Each package's L2 a hundred times larger: no sharing worth the name.
fn big_l2(m: &mut MachineSpec) {
    m.llc_bytes *= 100;
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let seeds: u64 = std::env::args()
        .nth(1)
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| fail(format!("bad seed count {s:?}")))
        })
        .unwrap_or(1);
    let cat = Catalog::builtin();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    println!(
        "Sums of the four shells' times (s), v2, the scenario file's order of shells (one pairing), \
         {seeds} seed(s);\nco-running costs the total minus the shells' solo times on the same machine"
    );
    println!(
        "{:15} {:>9} {:>22} {:>22} {:>22} {:>22} {:>22}",
        "test case", "published", "catalog", "no HT sharing", "bus x100", "L2 x100", "all three"
    );
    type Edit = fn(&mut MachineSpec);
    for (case, published) in [("masa-testcase1", 11036.0), ("masa-testcase2", 9322.0)] {
        let path = dir.join(format!("{case}.toml"));
        let mut base = Scenario::from_file(&path, &cat).unwrap_or_else(|e| fail(e.to_string()));
        base.machine.model = Model::V2;
        // (total of the four together, sum of each shell alone) on the edited machine.
        let variant = |f: Edit| {
            let mut sc = base.clone();
            f(&mut sc.machine);
            let together = (1..=seeds).map(|s| total_s(&sc, s)).sum::<f64>() / seeds as f64;
            let mut solo = 0.0;
            for k in 0..sc.tasks.len() {
                let mut one = sc.clone();
                one.tasks = vec![sc.tasks[k].clone()];
                solo += total_s(&one, 1);
            }
            format!("{together:6.0} = {solo:5.0} + {:5.0}", together - solo)
        };
        println!(
            "{case:15} {published:9.0} {:>22} {:>22} {:>22} {:>22} {:>22}",
            variant(|_| {}),
            variant(no_ht),
            variant(wide_bus),
            variant(big_l2),
            variant(|m| {
                no_ht(m);
                wide_bus(m);
                big_l2(m);
            })
        );
    }
    println!("(each cell: together = alone + co-running's cost)");
}
