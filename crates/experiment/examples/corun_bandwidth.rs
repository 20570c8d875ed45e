//! How much the `corun-slowdown` check depends on the one estimated value of its machine: the
//! Xeon 5150's sustained bandwidth (no STREAM figure of the platform was found). Runs the
//! check with it at one thread's measured read rate (3.7 GB/s, a lower bound), as shipped (6.9,
//! 65 % of the bus's 10.7 GB/s) and at the bus's peak (10.7), under both models, and prints each
//! run's findings (mean slowdown, bounds, rank correlation, contradictions).
//!
//! Last, under v2 at the shipped bandwidth, the same check with the L2 divided by the
//! footprints' natural partition under LRU instead of by frequency of access
//! (`LlcSharing::Footprint`, opt-in; docs/sim.md "LLC sharing").
//!
//! `cargo run --release -p counterpoint-experiment --example corun_bandwidth [-- SEEDS]`
//! (default 1 seed: the pinned pairs give the same value for every seed).

use counterpoint_experiment::corun_slowdown::{self, MACHINE};
use counterpoint_experiment::sim_lab::SimLab;
use counterpoint_experiment::NoProgress;
use counterpoint_sim::{Catalog, LlcSharing, Model};

fn fail(msg: String) -> ! {
    eprintln!("corun_bandwidth: {msg}");
    std::process::exit(1)
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
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
    for bw_gb_per_s in [3.7, shipped.v2.sustained_bandwidth_gb_per_s, 10.7] {
        let mut cat = builtin.clone();
        let mut m = shipped.clone();
        // Both models read it: v1 as its peak, v2 as the sustained figure (catalog.rs).
        m.v2.sustained_bandwidth_gb_per_s = bw_gb_per_s;
        m.peak_bandwidth_gb_per_s = bw_gb_per_s;
        cat.set_machine(m);
        for model in [Model::V1, Model::V2] {
            let lab = SimLab::new()
                .unwrap_or_else(|e| fail(e.to_string()))
                .with_catalog(cat.clone())
                .with_model(model);
            let r = corun_slowdown::run(&lab, &seeds, &NoProgress)
                .unwrap_or_else(|e| fail(e.to_string()));
            println!("{MACHINE} at {bw_gb_per_s} GB/s, {model:?}:");
            for f in r.findings.iter().take(2) {
                println!("  - {f}");
            }
        }
    }
    // The run as shipped (frequency of access) is the v2 one at the shipped bandwidth above.
    for sharing in [LlcSharing::Footprint] {
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
        for f in r.findings.iter().take(2) {
            println!("  - {f}");
        }
    }
}
