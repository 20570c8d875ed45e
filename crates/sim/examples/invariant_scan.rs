//! Physical invariants over random pinned scenarios on every catalog machine, both models, on
//! the fast path and the reference path (`counterpoint_sim::invariants`; docs/sim.md,
//! "Invariants on random scenarios"). Exits 1 if any case breaks one.
//!
//! `cargo run --release -p counterpoint-sim --example invariant_scan -- 6000`
//! `cargo run --release -p counterpoint-sim --example invariant_scan -- 6000 17` (case 17 only)
use counterpoint_sim::invariants::{check_case, np_above_one, random_case, run_checked};
use counterpoint_sim::{bench, Catalog};
use std::process::ExitCode;

fn main() -> ExitCode {
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parse = |s: &String| s.parse::<u64>().map_err(|e| format!("{s:?}: {e}"));
    let res = match args.as_slice() {
        [n] => parse(n).and_then(|n| scan(n, None)),
        [n, k] => parse(n).and_then(|n| parse(k).and_then(|k| scan(n, Some(k)))),
        _ => Err("usage: invariant_scan <cases> [one of them]".into()),
    };
    match res {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("invariant_scan: {e}");
            ExitCode::from(2)
        }
    }
}

fn scan(n: u64, only: Option<u64>) -> Result<bool, String> {
    let cat = Catalog::builtin();
    let (mut cases, mut broken) = (0, 0);
    // Per change: tasks slowed beside co-runners, and the largest loss (share, program, case).
    let mut allowed: Vec<(&str, usize, f64, &str, u64)> = Vec::new();
    let (mut fast_gain, mut exact_gain) = ((0.0f64, 0), (0.0f64, 0));
    for i in 0..n {
        if only.is_some_and(|k| k != i) {
            continue;
        }
        let Some(case) = random_case(&cat, i) else {
            continue;
        };
        let r = check_case(&cat, &case).map_err(|e| format!("case {i}: {e}"))?;
        cases += 1;
        for &(what, program, loss) in &r.allowed {
            match allowed.iter_mut().find(|a| a.0 == what) {
                Some(a) => {
                    a.1 += 1;
                    if loss > a.2 {
                        (a.2, a.3, a.4) = (loss, program, i);
                    }
                }
                None => allowed.push((what, 1, loss, program, i)),
            }
        }
        if r.fast_gain > fast_gain.0 {
            fast_gain = (r.fast_gain, i);
        }
        if r.exact_gain > exact_gain.0 {
            exact_gain = (r.exact_gain, i);
        }
        if !r.breaks.is_empty() || only.is_some() {
            broken += usize::from(!r.breaks.is_empty());
            println!(
                "{i:5} {} {:?}, {} pinned + {} on CPU {}, {} ms ticks, {} ms",
                case.machine,
                case.model,
                case.base
                    .iter()
                    .map(|(p, c)| format!("{p}@{c}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                case.extra.0,
                case.extra.1,
                case.tick_ms,
                case.duration_ms
            );
            for b in &r.breaks {
                println!("      {b}");
            }
        }
    }
    // The time-shared family of `fast_vs_reference` (more tasks than CPUs, the default
    // scheduler, short slices): its counters must be physical too.
    let mut shared_broken = 0;
    for i in 0..n {
        if only.is_some_and(|k| k != i) {
            continue;
        }
        let sc = bench::random_scenario(&cat, i).map_err(|e| e.to_string())?;
        for exact in [true, false] {
            let (_, breaks) = run_checked(&sc, exact).map_err(|e| format!("random {i}: {e}"))?;
            if !breaks.is_empty() {
                shared_broken += 1;
                println!(
                    "random scenario {i} ({}, {:?}, exact {exact}):",
                    sc.machine.name, sc.machine.model
                );
                for b in &breaks {
                    println!("      {b}");
                }
            }
        }
    }
    println!("{shared_broken} time-shared runs of {n} random scenarios (both paths) with unphysical counters.");
    // The same scenarios at coarse ticks and over short runs: no task beats running alone.
    let mut np_broken = 0;
    for i in 0..n {
        if only.is_some_and(|k| k != i) {
            continue;
        }
        let above = np_above_one(&cat, i).map_err(|e| format!("random {i}: {e}"))?;
        if !above.is_empty() {
            np_broken += 1;
            println!("random scenario {i}, short and coarse: NP above 1: {above:?}");
        }
    }
    println!("{np_broken} of {n} short, coarse-tick runs of them with an NP above 1.");
    println!(
        "{broken} of {cases} pinned cases broke an invariant. Largest gain from an added co-runner: \
         reference path {:+.2e} (case {}), fast path {:+.2e} (case {}).",
        exact_gain.0, exact_gain.1, fast_gain.0, fast_gain.1
    );
    println!("Tasks a better machine slowed beside co-runners (physical, not breaks):");
    if allowed.is_empty() {
        println!("  none");
    }
    for (what, count, loss, program, i) in allowed {
        println!("  {what}: {count} tasks, the most {program} by {loss:.2e} of its instructions (case {i})");
    }
    Ok(broken == 0 && shared_broken == 0 && np_broken == 0)
}
