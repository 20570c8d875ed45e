//! How far the engine's fast paths move a run from the reference path (whole solves at every
//! warm-up step, docs/sim.md "Speed and scaling"): per-task instructions, total instructions
//! and per-task LLC MPKI, under v2, for a scenario file or the benchmark mix on a catalog
//! machine. What a change to the fast path must be checked with before it is timed.
//!
//! `cargo run --release -p counterpoint-sim --example fast_vs_reference -- scenarios/bench-64.toml 60000`
//! `cargo run --release -p counterpoint-sim --example fast_vs_reference -- bench-8 3000 64`
//!
//! `-- random <n>` runs `n` random scenarios instead (machine, model, task count, programs
//! among the 20 SPEC CPU2000 ones, slice of 2-100 ms, tick of 1 or 2 ms, 200-600 ms; drawn
//! from the scenario's number, so the same `n` gives the same scenarios) and prints each one's largest per-task work gap, then the
//! worst per model: the check for scenarios the benchmark mixes do not cover (short slices,
//! caches warming all the time). `-- random <n> <k>` runs only the `k`-th of them and prints
//! each task's work and LLC MPKI on both paths.
use counterpoint_sim::*;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fast_vs_reference: {e}");
            eprintln!(
                "usage: fast_vs_reference <scenario.toml | machine> <ms> [tasks, for a machine]\n       fast_vs_reference random <scenarios> [one of them]"
            );
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let [what, ms, rest @ ..] = args else {
        return Err("two arguments at least".into());
    };
    if what == "random" {
        let n: u64 = ms.parse().map_err(|e| format!("<scenarios> {ms:?}: {e}"))?;
        let only = match rest.first() {
            Some(k) => Some(
                k.parse::<u64>()
                    .map_err(|e| format!("[one of them] {k:?}: {e}"))?,
            ),
            None => None,
        };
        return random(n, only);
    }
    let ms: u64 = ms.parse().map_err(|e| format!("<ms> {ms:?}: {e}"))?;
    let cat = Catalog::builtin();
    let mut sc = if what.ends_with(".toml") {
        Scenario::from_file(Path::new(what), &cat).map_err(|e| e.to_string())?
    } else {
        let tasks: usize = match rest.first() {
            Some(t) => t.parse().map_err(|e| format!("[tasks] {t:?}: {e}"))?,
            None => 64,
        };
        let mut sc = bench::mix(&cat, what, tasks, ms).map_err(|e| e.to_string())?;
        sc.seed = 7;
        sc
    };
    sc.machine.model = Model::V2;
    sc.duration_ms = ms;
    let (fast, exact) = both_paths(&sc)?;
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-12);
    let max_mean = |v: Vec<f64>| {
        let n = v.len().max(1) as f64;
        (
            v.iter().cloned().fold(0.0, f64::max),
            v.iter().sum::<f64>() / n,
        )
    };
    let pairs = || fast.iter().zip(&exact);
    let (work_max, work_mean) = max_mean(pairs().map(|(a, b)| rel(a.0, b.0)).collect());
    let (mpki_max, mpki_mean) = max_mean(pairs().map(|(a, b)| rel(a.1, b.1)).collect());
    let total = rel(
        fast.iter().map(|f| f.0).sum(),
        exact.iter().map(|e| e.0).sum(),
    );
    println!(
        "{what}, {ms} ms, v2: per-task work max {work_max:.2e} mean {work_mean:.2e}; \
         total work {total:.2e}; per-task MPKI max {mpki_max:.2e} mean {mpki_mean:.2e}"
    );
    Ok(())
}

/// Each task's (instructions, LLC misses per 1000 instructions) on the fast path and on the
/// reference path.
type Work = Vec<(f64, f64)>;
fn both_paths(sc: &Scenario) -> Result<(Work, Work), String> {
    let work = |exact: bool| -> Result<Work, String> {
        let mut sim = Simulation::new(sc, sc.seed).map_err(|e| e.to_string())?;
        sim.set_exact_warmup(exact);
        sim.advance_quiet(sc.duration_ms * 1_000_000, None);
        Ok((0..sim.task_count())
            .filter_map(|i| sim.counters(i))
            .map(|c| {
                (
                    c.instructions,
                    c.llc_misses * 1000.0 / c.instructions.max(1.0),
                )
            })
            .collect())
    };
    Ok((work(false)?, work(true)?))
}

fn random(n: u64, only: Option<u64>) -> Result<(), String> {
    let cat = Catalog::builtin();
    let mut worst = [(0.0f64, 0u64); 2];
    for i in 0..n {
        if only.is_some_and(|k| k != i) {
            continue;
        }
        let sc = bench::random_scenario(&cat, i).map_err(|e| e.to_string())?;
        let (machine, model, tasks) = (&sc.machine.name, sc.machine.model, sc.tasks.len());
        let (slice_ms, tick_ms, ms) = (sc.sched.timeslice_ms, sc.tick_us / 1000, sc.duration_ms);
        let (fast, exact) = both_paths(&sc)?;
        let gap = fast
            .iter()
            .zip(&exact)
            .map(|(f, e)| (f.0 - e.0).abs() / e.0.abs().max(1.0))
            .fold(0.0, f64::max);
        if only.is_some() {
            for (k, (f, e)) in fast.iter().zip(&exact).enumerate() {
                println!(
                    "  task {k:3} {:10} work {:.6e} / {:.6e} ({:+.2e}), LLC MPKI {:.3} / {:.3}",
                    sc.tasks[k].name,
                    f.0,
                    e.0,
                    f.0 / e.0.max(1.0) - 1.0,
                    f.1,
                    e.1
                );
            }
        }
        let w = &mut worst[usize::from(model == Model::V2)];
        if gap > w.0 {
            *w = (gap, i);
        }
        println!(
            "{i:4} {machine:18} {model:?} {tasks:3} tasks, {slice_ms:>3} ms slices, {tick_ms} ms ticks, {ms} ms: per-task work gap {gap:.2e}"
        );
    }
    for (model, (gap, i)) in ["v1", "v2"].iter().zip(worst) {
        println!("worst {model}: {gap:.2e} (scenario {i})");
    }
    Ok(())
}
