//! A check of the v2 SPEC CPU2000 profiles on a Core 2 (docs/sim-catalog.md, "A check on a
//! Core 2"): each program's v2 CPI alone on `dualcore-shared-l2` (a Core 2 with a 4 MB L2 and a
//! 1066 MT/s bus) against the CPI Weaver & McKee measured with the same gcc builds on a Core 2
//! Quad Q6600 (`paper::CORE2_Q6600_SOLO`). The fit (`calibrate_v2`, stage 4) read only the six
//! programs of `paper::CORE2_CORE_PROGRAMS`, whose time is their core's, to find the Core 2
//! core's speed (`core_cpi_scale`); the other fourteen are validation: how the profiles'
//! memory time, fitted on a NetBurst Xeon with a 512 KB L2, carries to a machine with eight
//! times the cache, other prefetchers and a faster bus. The column "NetBurst core" runs the
//! same machine with a NetBurst core (`core_cpi_scale` 1), as v2 did before session 20.
//!
//! `cargo run --release -p counterpoint-sim --example core2_check`

use counterpoint_experiment::paper;
use counterpoint_sim::*;

fn fail(msg: String) -> ! {
    eprintln!("core2_check: {msg}");
    std::process::exit(1)
}

const MACHINE: &str = "dualcore-shared-l2";

/// v2 CPI of `program` alone on `MACHINE` of `cat` over a 3 s run (as `calibrate_v2` measures
/// it), with the share of its time on memory (the CPI above its core CPI).
fn solo(cat: &Catalog, program: &str) -> (f64, f64) {
    let (cpi, memory) = solo_cpi_and_memory_share(cat, MACHINE, program, Model::V2, 3000)
        .unwrap_or_else(|e| fail(e.to_string()));
    (cpi, memory.max(0.0))
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cat = Catalog::builtin();
    let mut netburst = cat.clone();
    let mut m = cat
        .machine(MACHINE)
        .unwrap_or_else(|| fail(format!("no machine {MACHINE}")));
    println!(
        "{MACHINE}: core_cpi_scale {} (the catalog's); NetBurst core: 1",
        m.v2.core_cpi_scale
    );
    m.v2.core_cpi_scale = 1.0;
    netburst.set_machine(m);
    let figures = paper::figures();
    let measured = |id: String| {
        figures
            .iter()
            .find(|f| f.id == id)
            .map(|f| (f.value, f.use_))
            .unwrap_or_else(|| fail(format!("no figure {id}")))
    };
    println!(
        "{:9} {:>11} {:>8} {:>8} {:>7} | {:>13} {:>8}",
        "program", "Q6600 meas.", "v2", "error", "memory", "NetBurst core", "error"
    );
    let mut sums = [(0usize, 0.0, 0.0); 2];
    for &(p, _, _, _) in paper::CORE2_Q6600_SOLO {
        let (want, use_) = measured(format!("core2-q6600-solo/{p}/cpi"));
        let (cpi, mem) = solo(&cat, p);
        let (old, _) = solo(&netburst, p);
        let (err, old_err) = (cpi / want - 1.0, old / want - 1.0);
        let k = usize::from(use_ == paper::Use::Validation);
        sums[k].0 += 1;
        sums[k].1 += err.abs();
        sums[k].2 += old_err.abs();
        let tag = if k == 0 { " (fitted)" } else { "" };
        println!(
            "{p:9} {want:>11.3} {cpi:>8.3} {:>+7.1} % {:>5.0} % | {old:>13.3} {:>+7.1} %{tag}",
            err * 100.0,
            mem * 100.0,
            old_err * 100.0
        );
    }
    for (k, what) in [(0, "fitted (calibration)"), (1, "validation")] {
        let (n, e, o) = sums[k];
        println!(
            "mean absolute error, {what}, {n} programs: {:.1} % (NetBurst core: {:.1} %)",
            e / n.max(1) as f64 * 100.0,
            o / n.max(1) as f64 * 100.0
        );
    }
}
