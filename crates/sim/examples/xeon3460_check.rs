//! A check of the v2 SPEC CPU2000 profiles on a second machine (docs/sim-catalog.md, "A check
//! on a second NetBurst machine"): each program's v2 CPI alone on `xeon-3460` against the CPI
//! Weaver & McKee measured with the same gcc builds on that 3.46 GHz Xeon with a 2 MB L2
//! (`paper::XEON3460_SOLO`, validation figures: no fit reads them). The profiles were fitted on
//! the 2.8 GHz Xeon with a 512 KB L2 (`calibrate_v2`), so this tests what the fit could not
//! see: how each program's time moves with four times the cache, a faster bus and a deeper
//! pipeline. The machine's bus, latency and core are estimates (catalog.rs), so a miss here
//! mixes the profiles' error with the machine's.
//!
//! `cargo run --release -p counterpoint-sim --example xeon3460_check [-- LATENCY_NS GB_PER_S]`
//! (the optional pair replaces the machine's estimated memory latency and sustained bandwidth,
//! to see how much of the error the machine's estimates carry).

use counterpoint_experiment::paper;
use counterpoint_sim::*;

fn fail(msg: String) -> ! {
    eprintln!("xeon3460_check: {msg}");
    std::process::exit(1)
}

/// v2 CPI of `program` alone on `machine` over a 3 s run (as `calibrate_v2` measures it).
fn solo_cpi(cat: &Catalog, machine: &str, program: &str) -> f64 {
    let c = solo_counters(cat, machine, program, Model::V2, 3000)
        .unwrap_or_else(|e| fail(e.to_string()));
    c.cycles / c.instructions.max(1.0)
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let mut cat = Catalog::builtin();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [lat, bw] = args.as_slice() {
        let parse = |v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .unwrap_or_else(|| fail(format!("not a positive number: {v:?}")))
        };
        let mut m = cat
            .machine("xeon-3460")
            .unwrap_or_else(|| fail("no machine xeon-3460".into()));
        m.mem_latency_ns = parse(lat);
        m.v2.sustained_bandwidth_gb_per_s = parse(bw);
        cat.set_machine(m);
        println!("xeon-3460 with {lat} ns and {bw} GB/s (not the catalog's estimates)");
    } else if !args.is_empty() {
        fail("give both LATENCY_NS and GB_PER_S, or neither".into());
    }
    let figures = paper::figures();
    let measured = |id: String| {
        figures
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.value)
            .unwrap_or_else(|| fail(format!("no figure {id}")))
    };
    println!(
        "{:9} {:>10} {:>10} | {:>10} {:>10} {:>8}",
        "program", "2.8 meas.", "2.8 v2", "3.46 meas.", "3.46 v2", "error"
    );
    // The 2.8 GHz CPIs are fitted exactly, so the error on xeon-3460 is also the error of how
    // the CPI moves from one machine to the other.
    let (mut n, mut abs_err) = (0usize, 0.0);
    for &(p, _, _, _) in paper::XEON3460_SOLO {
        let (m28, m346) = (
            measured(format!("xeon-2800-solo/{p}/cpi")),
            measured(format!("xeon-3460-solo/{p}/cpi")),
        );
        let (o28, o346) = (
            solo_cpi(&cat, "xeon-2800", p),
            solo_cpi(&cat, "xeon-3460", p),
        );
        let err = o346 / m346 - 1.0;
        n += 1;
        abs_err += err.abs();
        println!(
            "{p:9} {m28:>10.3} {o28:>10.3} | {m346:>10.3} {o346:>10.3} {:>+7.1} %",
            err * 100.0
        );
    }
    println!(
        "mean absolute error of the CPI on xeon-3460 over {n} programs: {:.1} %",
        abs_err / n as f64 * 100.0
    );
}
