//! What the way co-runners divide a shared cache does to the `corun-slowdown` check: runs it
//! under model v2 with the Xeon 5150's L2 divided by frequency of access (as shipped) and by
//! the footprints' natural partition under LRU (`LlcSharing::Footprint`, opt-in), and prints
//! each run's findings (mean slowdown, bounds, rank correlation, contradictions).
//!
//! `cargo run --release -p counterpoint-experiment --example llc_sharing [-- SEEDS]`
//! (default 1 seed: the pinned pairs give the same value for every seed).

use counterpoint_experiment::corun_slowdown::{self, MACHINE};
use counterpoint_experiment::sim_lab::SimLab;
use counterpoint_experiment::NoProgress;
use counterpoint_sim::{Catalog, LlcSharing, Model};

fn fail(msg: String) -> ! {
    eprintln!("llc_sharing: {msg}");
    std::process::exit(1)
}

fn main() {
    let seeds: u64 = match std::env::args().nth(1) {
        None => 1,
        Some(s) => match s.parse() {
            Ok(n) if (1..=20).contains(&n) => n,
            _ => fail(format!("SEEDS must be 1 to 20, got {s:?}")),
        },
    };
    let seeds: Vec<u64> = (1..=seeds).collect();
    let builtin = Catalog::builtin();
    let Some(shipped) = builtin.machine(MACHINE) else {
        fail(format!("no machine {MACHINE} in the catalog"))
    };
    for sharing in [LlcSharing::Foa, LlcSharing::Footprint] {
        let mut cat = builtin.clone();
        let mut m = shipped.clone();
        m.v2.llc_sharing = sharing;
        cat.set_machine(m);
        let lab = SimLab::new()
            .unwrap_or_else(|e| fail(e.to_string()))
            .with_catalog(cat)
            .with_model(Model::V2);
        let r =
            corun_slowdown::run(&lab, &seeds, &NoProgress).unwrap_or_else(|e| fail(e.to_string()));
        println!("{MACHINE}, v2, LLC divided by {sharing:?}:");
        for f in &r.findings {
            println!("  - {f}");
        }
    }
}
