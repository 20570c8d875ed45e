//! What the Pentium 4 clock-scaling check (`counterpoint experiment clock-scaling`) would do to
//! Zhang's ipc-pair vs bus-pair result if the two programs it finds furthest off were moved to
//! the hardware's memory share: wupwise (v2 37 % of its time on memory at 1.3 GHz, hardware
//! 12 %) and art (v2 75 %, hardware 91 %).
//!
//! Each program is moved by one knob at a time, found by bisection so that its speed-up from
//! `p4-1300` to `p4-1700` equals Intel's published one — the demand overlap (`mlp`: bus traffic
//! per instruction unchanged), or a second knob (wupwise's L2 accesses per instruction, which
//! moves its traffic too; art's exposed FP latency, its core time) — and `zhang-spec` is run
//! under v2 with the baseline,
//! ipc-pair and bus-pair hooks. Counterfactuals only, in this program's memory: the catalog is
//! not changed, and the zhang-spec figures they give are not fitted to anything.
//!
//! `cargo run --release -p counterpoint-experiment --example hardware_shares [-- SEEDS]`
//! (default 5 seeds; reads `scenarios/zhang-spec.toml`).

use counterpoint_core::machine::PickNext;
use counterpoint_core::CpuSet;
use counterpoint_experiment::clock_scaling::{FAST_GHZ, FAST_MACHINE, SLOW_GHZ, SLOW_MACHINE};
use counterpoint_experiment::paper::P4_CLOCK_SCALING;
use counterpoint_experiment::Summary;
use counterpoint_policy::{ComplementPick, LinuxPick};
use counterpoint_sim::*;
use std::path::Path;

fn fail(msg: String) -> ! {
    eprintln!("hardware_shares: {msg}");
    std::process::exit(1)
}

/// Which knob of a v2 profile a counterfactual moves.
#[derive(Clone, Copy, Debug)]
enum Knob {
    Mlp,
    LlcApki,
    FpDepCycles,
}

impl Knob {
    /// The `ProfileV2` field it moves.
    fn name(self) -> &'static str {
        match self {
            Knob::Mlp => "mlp",
            Knob::LlcApki => "llc_apki",
            Knob::FpDepCycles => "fp_dep_cycles",
        }
    }

    /// That field of `v`.
    fn field(self, v: &mut ProfileV2) -> &mut f64 {
        match self {
            Knob::Mlp => &mut v.mlp,
            Knob::LlcApki => &mut v.llc_apki,
            Knob::FpDepCycles => &mut v.fp_dep_cycles,
        }
    }
}

fn with_knob(cat: &Catalog, prog: &str, knob: Knob, value: f64) -> Catalog {
    let mut c2 = cat.clone();
    let Some(mut p) = c2.program(prog) else {
        fail(format!("no program {prog}"))
    };
    for ph in &mut p.phases {
        if let Some(v) = ph.profile.v2.as_mut() {
            *knob.field(v) = value;
        }
    }
    c2.set_program(p);
    c2
}

fn knob_value(cat: &Catalog, prog: &str, knob: Knob) -> f64 {
    let p = cat
        .program(prog)
        .unwrap_or_else(|| fail(format!("no program {prog}")));
    let mut v = p.phases[0]
        .profile
        .v2
        .clone()
        .unwrap_or_else(|| fail(format!("{prog} has no v2 profile")));
    *knob.field(&mut v)
}

/// Nanoseconds per instruction of `prog` alone on `machine` (v2), second half of a 600 ms run.
fn ns_per_instruction(cat: &Catalog, machine: &str, prog: &str) -> f64 {
    let sc = Scenario::builder(cat, machine)
        .unwrap_or_else(|e| fail(e))
        .model(Model::V2)
        .duration_ms(600)
        .task(prog, Some(CpuSet::single(0)))
        .unwrap_or_else(|e| fail(e))
        .build()
        .unwrap();
    let mut sim = Simulation::new(&sc, 1).unwrap_or_else(|e| fail(e.to_string()));
    sim.advance_quiet(300_000_000, None);
    let a = sim.counters(0).copied().unwrap_or_default();
    sim.advance_quiet(300_000_000, None);
    let b = sim.counters(0).copied().unwrap_or_default();
    (b.task_clock_ns - a.task_clock_ns) as f64 / (b.instructions - a.instructions).max(1.0)
}

fn speedup(cat: &Catalog, prog: &str) -> f64 {
    ns_per_instruction(cat, SLOW_MACHINE, prog) / ns_per_instruction(cat, FAST_MACHINE, prog)
}

fn memory_share(s: f64) -> f64 {
    counterpoint_experiment::clock_scaling::memory_share(s, FAST_GHZ / SLOW_GHZ)
}

/// The knob value in `[lo, hi]` at which `prog`'s speed-up is `target`, or, when no value in
/// the range reaches it, the sampled value nearest it (`false`). The speed-up need not be
/// monotone in a knob (more overlap shortens latency-bound memory time until the program
/// saturates the bus; beyond that it is bandwidth-bound and scales with the clock less, not
/// more), so the range is first sampled at 24 log-spaced points and the first bracket where
/// the speed-up crosses the target is bisected.
fn solve_knob(cat: &Catalog, prog: &str, knob: Knob, lo: f64, hi: f64, target: f64) -> (f64, bool) {
    let at = |x: f64| speedup(&with_knob(cat, prog, knob, x), prog) - target;
    // Log spacing needs a positive start; a range from 0 is sampled linearly.
    let points: Vec<f64> = (0..24)
        .map(|k| {
            let f = k as f64 / 23.0;
            if lo > 0.0 {
                lo * (hi / lo).powf(f)
            } else {
                lo + (hi - lo) * f
            }
        })
        .collect();
    let values: Vec<f64> = points.iter().map(|&x| at(x)).collect();
    let Some(k) = (1..points.len()).find(|&k| values[k - 1].signum() != values[k].signum()) else {
        let (i, _) = values
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap_or((0, &0.0));
        return (points[i], false);
    };
    let (mut a, mut b, fa) = (points[k - 1], points[k], values[k - 1]);
    for _ in 0..40 {
        let mid = 0.5 * (a + b);
        if at(mid).signum() == fa.signum() {
            a = mid;
        } else {
            b = mid;
        }
    }
    (0.5 * (a + b), true)
}

/// zhang-spec (v2) NP per seed under the baseline, ipc-pair and bus-pair hooks.
fn policies(cat: &Catalog, seeds: u64) -> [Vec<f64>; 3] {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/zhang-spec.toml");
    let mut sc = Scenario::from_file(&path, cat).unwrap_or_else(|e| fail(e.to_string()));
    sc.machine.model = Model::V2;
    type MakePick = fn() -> Box<dyn PickNext>;
    let hooks: [MakePick; 3] = [
        || Box::new(LinuxPick),
        || Box::new(ComplementPick::ipc()),
        || Box::new(ComplementPick::bus()),
    ];
    hooks.map(|make| {
        (1..=seeds)
            .map(|seed| {
                let mut pick = make();
                let r = run(&sc, seed, None, Some(pick.as_mut()), 100_000_000)
                    .unwrap_or_else(|e| fail(e.to_string()));
                r.metrics.map_or(f64::NAN, |m| m.normalized_performance)
            })
            .collect()
    })
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
        .unwrap_or(5);
    if !(1..=50).contains(&seeds) {
        fail(format!("seeds must be 1-50, not {seeds}"));
    }
    let cat = Catalog::builtin();
    let published = |p: &str| {
        P4_CLOCK_SCALING
            .iter()
            .find(|r| r.0 == p)
            .map(|r| r.2 / r.1)
            .unwrap_or_else(|| fail(format!("no published row for {p}")))
    };
    // (program, knob, search range): each range holds the catalog value and the target.
    // wupwise: more overlap or fewer accesses (less memory time); art: more overlap (it then
    // saturates the bus and becomes bandwidth-bound) or less exposed FP latency (less core
    // time). Each range holds the catalog value.
    let moves: [(&str, Knob, f64, f64); 4] = [
        ("wupwise", Knob::Mlp, 1.5, 40.0),
        ("wupwise", Knob::LlcApki, 0.5, 18.0),
        ("art", Knob::Mlp, 3.0, 40.0),
        ("art", Knob::FpDepCycles, 0.0, 2.5),
    ];
    println!("Counterfactual profiles at the hardware's memory share (v2; not the catalog):");
    let mut moved: Vec<(&str, Knob, f64)> = Vec::new();
    for (prog, knob, lo, hi) in moves {
        let target = published(prog);
        let before = knob_value(&cat, prog, knob);
        let s_before = speedup(&cat, prog);
        let (v, reached) = solve_knob(&cat, prog, knob, lo, hi, target);
        let s_after = speedup(&with_knob(&cat, prog, knob, v), prog);
        println!(
            "  {prog:8} {}: {before:.3} -> {v:.3}{}; speed-up {s_before:.3} -> {s_after:.3} \
             (hardware {target:.3}); memory share {:.0} % -> {:.0} % (hardware {:.0} %)",
            knob.name(),
            if reached {
                ""
            } else {
                " (end of its range: the hardware's share is out of its reach)"
            },
            100.0 * memory_share(s_before),
            100.0 * memory_share(s_after),
            100.0 * memory_share(target)
        );
        moved.push((prog, knob, v));
    }
    println!("\nzhang-spec under v2, {seeds} seed(s): NP means; bus-pair minus ipc-pair with its 95 % interval");
    // Indices into `moved`: the catalog, each move alone, then pairs of a wupwise and an art
    // move.
    let cases: [&[usize]; 8] = [&[], &[0], &[1], &[2], &[3], &[0, 2], &[1, 3], &[1, 2]];
    let cases: Vec<(String, Catalog)> = cases
        .iter()
        .map(|idx| {
            let label = if idx.is_empty() {
                "catalog".to_string()
            } else {
                idx.iter()
                    .map(|&k| format!("{} {} {:.2}", moved[k].0, moved[k].1.name(), moved[k].2))
                    .collect::<Vec<_>>()
                    .join(" + ")
            };
            let c = idx.iter().fold(cat.clone(), |c, &k| {
                with_knob(&c, moved[k].0, moved[k].1, moved[k].2)
            });
            (label, c)
        })
        .collect();
    println!(
        "{:46} {:>7} {:>9} {:>9}   bus-pair - ipc-pair",
        "profiles", "linux", "ipc-pair", "bus-pair"
    );
    for (label, c) in cases {
        let [l, i, b] = policies(&c, seeds);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let gap: Vec<f64> = b.iter().zip(&i).map(|(b, i)| b - i).collect();
        println!(
            "{label:46} {:7.3} {:9.3} {:9.3}   {}",
            mean(&l),
            mean(&i),
            mean(&b),
            Summary::of(&gap).map_or_else(|| "n/a".into(), |d| d.show_interval(3))
        );
    }
}
