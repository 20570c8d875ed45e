//! How IPC pairing and bus pairing choose on Zhang's SPEC mix under model v2 (issue 13; they
//! chose alike until session 15's measured CPIs, docs/sim-catalog.md):
//!
//! 1. every pairing of a CPU-0 program (gzip, parser, swim) with a CPU-1 program (mesa,
//!    wupwise, art), pinned, steady state: each side's CPI stack (core components from the
//!    catalog, memory = the measured rest), IPC and bus traffic;
//! 2. `zhang-spec` under v2 with the `ipc-pair` and the `bus-pair` pick-next hooks (and the
//!    baseline): the share of time each pair co-runs, and the NP, per seed;
//! 3. the counter-experiment (profiles changed in memory, never in the catalog): wupwise's
//!    core CPI raised from its fitted value until its IPC is below mesa's, and the bus-pair
//!    minus ipc-pair NP each gives (docs/sim-catalog.md, "The measured CPIs");
//! 4. the baseline scheduler at 60, 300 and 900 s of run, with slices drifting by 0.02 %, the
//!    catalog's 0.1 % and 0.5 % background ticks: how much of the calibrated baseline is the
//!    initial phase of the rotations.
//!
//! `cargo run --release -p counterpoint-experiment --example zhang_v2_diag [-- SEEDS]`
//! (default 5 seeds; the scenario file is read from `scenarios/zhang-spec.toml`).

use counterpoint_core::machine::PickNext;
use counterpoint_core::CpuSet;
use counterpoint_policy::{ComplementPick, LinuxPick};
use counterpoint_sim::*;
use std::collections::BTreeMap;
use std::path::Path;

const Q0: [&str; 3] = ["gzip", "parser", "swim"];
const Q1: [&str; 3] = ["mesa", "wupwise", "art"];

fn fail(msg: String) -> ! {
    eprintln!("zhang_v2_diag: {msg}");
    std::process::exit(1)
}

/// IPC, bus MB/s (own transactions) and memory CPI of one task between two counter snapshots.
fn rates(a: &Counters, b: &Counters, line_bytes: f64) -> (f64, f64, f64) {
    let ins = (b.instructions - a.instructions).max(1.0);
    let cyc = b.cycles - a.cycles;
    let secs = (b.task_clock_ns - a.task_clock_ns) as f64 / 1e9;
    let bus = (b.mem_transactions - a.mem_transactions) * line_bytes / secs.max(1e-9) / 1e6;
    (ins / cyc.max(1.0), bus, cyc / ins)
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
    let cat = Catalog::builtin();
    let Some(spec) = cat.machine("zhang-smp") else {
        fail("no machine zhang-smp".into())
    };
    let line = spec.line_bytes as f64;
    let core_cpi = |name: &str| -> f64 {
        let Some(p) = cat.program(name) else {
            fail(format!("no program {name}"))
        };
        let Some(ph) = p.phases.first() else {
            fail(format!("{name} has no phases"))
        };
        let prof = &ph.profile;
        match &prof.v2 {
            Some(v) => v.core_cpi(prof.fp_fraction, &spec.v2),
            None => prof.cpi_core,
        }
    };

    println!(
        "1. Pairs co-running on zhang-smp (v2), steady state (1-3 s), memory = CPI - core CPI"
    );
    println!(
        "{:8} {:8} | {:>6} {:>6} {:>6} {:>7} | {:>6} {:>6} {:>6} {:>7} | {:>6}",
        "cpu0", "cpu1", "core0", "mem0", "IPC0", "MB/s0", "core1", "mem1", "IPC1", "MB/s1", "bus%"
    );
    let mut solo_rows = Vec::new();
    for a in Q0.iter().chain(Q1.iter()) {
        solo_rows.push(*a);
    }
    let run_pair = |tasks: &[(&str, u32)]| -> Vec<(f64, f64, f64)> {
        let mut b = Scenario::builder(&cat, "zhang-smp")
            .unwrap_or_else(|e| fail(e))
            .model(Model::V2)
            .duration_ms(3000);
        for (n, cpu) in tasks {
            b = b
                .task(n, Some(CpuSet::single(*cpu)))
                .unwrap_or_else(|e| fail(e));
        }
        let sc = b.build().unwrap();
        let mut sim = Simulation::new(&sc, 1).unwrap_or_else(|e| fail(e.to_string()));
        sim.advance_quiet(1_000_000_000, None);
        let before: Vec<Counters> = (0..tasks.len())
            .map(|i| sim.counters(i).copied().unwrap_or_default())
            .collect();
        sim.advance_quiet(2_000_000_000, None);
        (0..tasks.len())
            .map(|i| {
                let after = sim.counters(i).copied().unwrap_or_default();
                rates(&before[i], &after, line)
            })
            .collect()
    };
    for name in &solo_rows {
        let r = run_pair(&[(name, 0)]);
        let (ipc, bus, cpi) = r[0];
        let core = core_cpi(name);
        println!(
            "{:8} {:8} | {:6.3} {:6.3} {:6.3} {:7.0} | alone",
            name,
            "-",
            core,
            cpi - core,
            ipc,
            bus
        );
    }
    for a in Q0 {
        for b in Q1 {
            let r = run_pair(&[(a, 0), (b, 1)]);
            let (ca, cb) = (core_cpi(a), core_cpi(b));
            let util = (r[0].1 + r[1].1) / (spec.v2.sustained_bandwidth_gb_per_s * 1e3) * 100.0;
            println!(
                "{:8} {:8} | {:6.3} {:6.3} {:6.3} {:7.0} | {:6.3} {:6.3} {:6.3} {:7.0} | {:6.1}",
                a,
                b,
                ca,
                r[0].2 - ca,
                r[0].0,
                r[0].1,
                cb,
                r[1].2 - cb,
                r[1].0,
                r[1].1,
                util
            );
        }
    }

    println!("\n2. zhang-spec (v2): share of time each pair co-runs, NP per seed");
    let hooks = policies(&cat, seeds, true);
    let gap: Vec<f64> = hooks[2].iter().zip(&hooks[1]).map(|(b, i)| b - i).collect();
    println!("bus-pair minus ipc-pair per seed: {}", show(&gap));

    // 3. What would have to differ: counterfactual profiles (never written to the catalog).
    println!(
        "\n3. Counter-experiment (not the catalog): wupwise's core CPI raised until its IPC falls below mesa's"
    );
    println!(
        "{:8} {:>29} {:>7} {:>9} | {:>8} {:>8} {:>8} | bus-ipc per seed",
        "program", "change", "IPC", "bus MB/s", "linux", "ipc-pair", "bus-pair"
    );
    let base = cat
        .program("wupwise")
        .and_then(|p| p.phases[0].profile.v2.as_ref().map(|v| v.base_cpi))
        .unwrap_or_else(|| fail("wupwise has no v2 profile".into()));
    let cases: [(&str, &str, f64); 4] = [
        ("wupwise", "base_cpi", base),
        ("wupwise", "base_cpi", 1.0),
        ("wupwise", "base_cpi", 1.3),
        ("wupwise", "base_cpi", 1.6),
    ];
    let bus0 = solo_rate(&cat, "wupwise", line).1;
    let mut rows: Vec<(String, Catalog)> = cases
        .iter()
        .map(|&(prog, field, value)| {
            (
                format!("{field}={value}"),
                catalog_with(&cat, prog, field, value),
            )
        })
        .collect();
    // The same core CPIs with wupwise's misses scaled so that it moves as many bytes alone as
    // the catalog's wupwise (raising its core CPI alone also lowers its bus rate): only its
    // IPC changes, not its bus use.
    for &(_, field, value) in &cases[1..] {
        let c2 = catalog_with(&cat, "wupwise", field, value);
        let (mut lo, mut hi) = (0.0f64, 1.0 / miss_top(&c2, "wupwise"));
        for _ in 0..30 {
            let mid = 0.5 * (lo + hi);
            if solo_rate(&with_misses_scaled(&c2, "wupwise", mid), "wupwise", line).1 < bus0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let k = 0.5 * (lo + hi);
        rows.push((
            format!("{field}={value}, misses x{k:.2}"),
            with_misses_scaled(&c2, "wupwise", k),
        ));
    }
    for (label, c2) in rows {
        let prog = "wupwise";
        let solo = solo_rate(&c2, prog, line);
        let r = policies(&c2, seeds, false);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let gap: Vec<f64> = r[2].iter().zip(&r[1]).map(|(b, i)| b - i).collect();
        println!(
            "{:8} {:>29} {:7.3} {:9.0} | {:8.3} {:8.3} {:8.3} | {}",
            prog,
            label,
            solo.0,
            solo.1,
            mean(&r[0]),
            mean(&r[1]),
            mean(&r[2]),
            show(&gap)
        );
    }
    println!("\nPairs with wupwise at base_cpi 1.6 (IPC below mesa's: IPC no longer misleads):");
    policies(&catalog_with(&cat, "wupwise", "base_cpi", 1.6), seeds, true);

    // 4. The baseline against run length: v2's slices drift only by the ticks woken
    // background tasks take (as a Linux 2.6 O(1) rotation's do), so the two CPUs' rotations
    // keep most of the offset each run starts with (a new task's first slice is half of its
    // parent's remaining slice) and mix only slowly as the run goes on.
    println!("\n4. zhang-spec (v2), baseline scheduler, by background tick share and run length");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/zhang-spec.toml");
    let catalog_share = spec.v2.background_tick_share;
    for share in [0.0002, catalog_share, 0.005] {
        for duration_ms in [60_000u64, 300_000, 900_000] {
            let mut sc = Scenario::from_file(&path, &cat).unwrap_or_else(|e| fail(e.to_string()));
            sc.machine.model = Model::V2;
            sc.machine.v2.background_tick_share = share;
            sc.duration_ms = duration_ms;
            let mut np = Vec::new();
            let mut unf = Vec::new();
            for seed in 1..=seeds {
                let r =
                    run(&sc, seed, None, None, 100_000_000).unwrap_or_else(|e| fail(e.to_string()));
                let m = r.metrics.unwrap_or_else(|| fail("no metrics".into()));
                np.push(m.normalized_performance);
                unf.push(m.unfairness);
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            println!(
                "share {:.2} %{} {:4} s: NP {:.3} (per seed {}), unfairness {:.3}",
                share * 100.0,
                if share == catalog_share {
                    " (catalog)"
                } else {
                    ""
                },
                duration_ms / 1000,
                mean(&np),
                np.iter()
                    .map(|x| format!("{x:.3}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                mean(&unf)
            );
        }
    }
}

/// `cat` with `prog`'s v2 profile changed by `edit` (a counterfactual, never the catalog).
fn edited(cat: &Catalog, prog: &str, edit: impl Fn(&mut ProfileV2)) -> Catalog {
    let mut c2 = cat.clone();
    let Some(mut p) = c2.program(prog) else {
        fail(format!("no program {prog}"))
    };
    for ph in &mut p.phases {
        if let Some(v) = ph.profile.v2.as_mut() {
            edit(v);
        }
    }
    c2.set_program(p);
    c2
}

/// `cat` with one v2 field of one program changed.
fn catalog_with(cat: &Catalog, prog: &str, field: &str, value: f64) -> Catalog {
    edited(cat, prog, |v| match field {
        "fp_dep_cycles" => v.fp_dep_cycles = value,
        "base_cpi" => v.base_cpi = value,
        _ => v.branch_mpki = value,
    })
}

/// Miss ratio of `prog`'s v2 knee curve with no cache (floor plus every working set).
fn miss_top(cat: &Catalog, prog: &str) -> f64 {
    cat.program(prog)
        .and_then(|p| p.phases[0].profile.v2.as_ref()?.miss_curve.knee_total())
        .unwrap_or_else(|| fail(format!("{prog} has no v2 knee curve")))
}

/// `cat` with `prog`'s v2 miss curve scaled by `k`.
fn with_misses_scaled(cat: &Catalog, prog: &str, k: f64) -> Catalog {
    edited(cat, prog, |v| v.miss_curve = v.miss_curve.scaled(k))
}

fn show(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:+.3}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A program alone on CPU 0 of zhang-smp under v2, steady state: (IPC, bus MB/s).
fn solo_rate(cat: &Catalog, name: &str, line: f64) -> (f64, f64) {
    let sc = Scenario::builder(cat, "zhang-smp")
        .unwrap_or_else(|e| fail(e))
        .model(Model::V2)
        .duration_ms(3000)
        .task(name, Some(CpuSet::single(0)))
        .unwrap_or_else(|e| fail(e))
        .build()
        .unwrap();
    let mut sim = Simulation::new(&sc, 1).unwrap_or_else(|e| fail(e.to_string()));
    sim.advance_quiet(1_000_000_000, None);
    let a = sim.counters(0).copied().unwrap_or_default();
    sim.advance_quiet(2_000_000_000, None);
    let b = sim.counters(0).copied().unwrap_or_default();
    let (ipc, bus, _) = rates(&a, &b, line);
    (ipc, bus)
}

/// zhang-spec under v2 with the baseline, ipc-pair and bus-pair hooks: NP per seed of each
/// (and, when `verbose`, the share of time each pair co-ran).
fn policies(cat: &Catalog, seeds: u64, verbose: bool) -> Vec<Vec<f64>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/zhang-spec.toml");
    let mut sc = Scenario::from_file(&path, cat).unwrap_or_else(|e| fail(e.to_string()));
    sc.machine.model = Model::V2;
    let names: Vec<String> = sc.tasks.iter().map(|t| t.name.clone()).collect();
    type MakePick = fn() -> Box<dyn PickNext>;
    let hooks: [(&str, MakePick); 3] = [
        ("linux", || Box::new(LinuxPick)),
        ("ipc-pair", || Box::new(ComplementPick::ipc())),
        ("bus-pair", || Box::new(ComplementPick::bus())),
    ];
    let mut all = Vec::new();
    for (label, make) in hooks {
        let mut share: BTreeMap<(String, String), f64> = BTreeMap::new();
        let mut nps = Vec::new();
        for seed in 1..=seeds {
            let mut pick = make();
            let mut sim = Simulation::new(&sc, seed).unwrap_or_else(|e| fail(e.to_string()));
            let step_ns = 1_000_000;
            let steps = if verbose { sc.duration_ms } else { 0 };
            for _ in 0..steps {
                sim.advance_quiet(step_ns, Some(pick.as_mut()));
                let on = sim.cpu_rates();
                let t0 = on.first().and_then(|c| c.0);
                let t1 = on.get(1).and_then(|c| c.0);
                if let (Some(a), Some(b)) = (t0, t1) {
                    *share
                        .entry((names[a].clone(), names[b].clone()))
                        .or_default() += 1.0 / (steps * seeds) as f64;
                }
            }
            let mut pick = make();
            let r = run(&sc, seed, None, Some(pick.as_mut()), 100_000_000)
                .unwrap_or_else(|e| fail(e.to_string()));
            nps.push(r.metrics.map_or(f64::NAN, |m| m.normalized_performance));
        }
        if !verbose {
            all.push(nps);
            continue;
        }
        let np_list: Vec<String> = nps.iter().map(|v| format!("{v:.3}")).collect();
        println!("{label}: NP per seed {}", np_list.join(" "));
        all.push(nps);
        let mut cells = Vec::new();
        for a in Q0 {
            for b in Q1 {
                let s = share
                    .get(&(a.to_string(), b.to_string()))
                    .copied()
                    .unwrap_or(0.0);
                cells.push(format!("{a}-{b} {:.2}", s));
            }
        }
        println!("  {}", cells.join(", "));
    }
    all
}
