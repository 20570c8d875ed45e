//! Baseline calibration (docs/calibration.md): fit the catalog's free parameters once so that
//! the Linux-like baseline reproduces Zhang's SPEC mix under the default scheduler and MASA's
//! pinned placements (tables 1 and 2). Coordinate descent in log space over named parameters;
//! prints the chosen values and residuals.
//! `cargo run --release -p counterpoint-sim --example calibrate [-- --fit]`.
//!
//! Every published number comes from the paper module through
//! `paper::calibration_target`, which refuses validation figures (policy results): the fit never
//! sees what the experiments later predict. `crates/sim/tests/calibration.rs` checks this file.

use counterpoint_core::CpuSet;
use counterpoint_experiment::paper::{self, CalibrationTarget};
use counterpoint_sim::*;

/// The published value of calibration target `id` (the program stops if it is not one).
fn target(id: &str) -> f64 {
    match paper::calibration_target(id) {
        Ok(t) => t.value(),
        Err(e) => {
            eprintln!("calibrate: {e}");
            std::process::exit(2)
        }
    }
}

/// The fit's inputs: calibration targets only (the type cannot hold a validation figure).
struct Targets {
    zhang_np: CalibrationTarget,
    zhang_unfairness: CalibrationTarget,
}

impl Targets {
    fn load() -> Result<Self, paper::PaperError> {
        Ok(Self {
            zhang_np: paper::calibration_target("zhang-spec/linux/normalized_performance")?,
            zhang_unfairness: paper::calibration_target("zhang-spec/linux/unfairness")?,
        })
    }
}

type Setter = fn(&mut Catalog, f64);
type Getter = fn(&Catalog) -> f64;

fn prof_mut(c: &mut Program) -> &mut Profile {
    &mut c.phases[0].profile
}

macro_rules! pparam {
    ($prog:literal, $field:ident) => {
        (
            concat!($prog, ".", stringify!($field)),
            (|c: &Catalog| c.program($prog).unwrap().phases[0].profile.$field) as Getter,
            (|c: &mut Catalog, v: f64| {
                let mut p = c.program($prog).unwrap();
                prof_mut(&mut p).$field = v;
                c.set_program(p);
            }) as Setter,
        )
    };
}
macro_rules! cparam {
    ($prog:literal, $field:ident) => {
        (
            concat!($prog, ".miss_curve.", stringify!($field)),
            (|c: &Catalog| match c.program($prog).unwrap().phases[0].profile.miss_curve {
                MissCurve::PowerLaw { $field, .. } => $field,
                _ => unreachable!(),
            }) as Getter,
            (|c: &mut Catalog, v: f64| {
                let mut p = c.program($prog).unwrap();
                if let MissCurve::PowerLaw { $field, .. } = &mut prof_mut(&mut p).miss_curve {
                    *$field = v;
                }
                c.set_program(p);
            }) as Setter,
        )
    };
}
macro_rules! sparam {
    ($field:ident) => {
        (
            concat!("masa-2x2ht.smt.", stringify!($field)),
            (|c: &Catalog| c.machine("masa-2x2ht").unwrap().smt.$field) as Getter,
            (|c: &mut Catalog, v: f64| {
                for name in ["masa-2x2ht"] {
                    let mut m = c.machine(name).unwrap();
                    m.smt.$field = v;
                    c.set_machine(m);
                }
            }) as Setter,
        )
    };
}

fn one(s: &str) -> Option<CpuSet> {
    Some(CpuSet::parse_list(s).unwrap())
}

/// Zhang SPEC mix: (NP, unfairness, per-task NP).
fn zhang(c: &Catalog, ms: u64) -> (f64, f64, Vec<f64>) {
    let mut b = Scenario::builder(c, "zhang-smp")
        .unwrap()
        .duration_ms(ms)
        .seed(1);
    for (p, cpu) in [
        ("gzip", "0"),
        ("parser", "0"),
        ("swim", "0"),
        ("mesa", "1"),
        ("wupwise", "1"),
        ("art", "1"),
    ] {
        b = b.task(p, one(cpu)).unwrap();
    }
    let r = run(&b.build().unwrap(), 1, None, None, 100_000_000).unwrap();
    let m = r.metrics.unwrap();
    (
        m.normalized_performance,
        m.unfairness,
        r.tasks.iter().map(|t| t.np.unwrap()).collect(),
    )
}

/// Wall-clock slowdowns of each task of a MASA placement, continuous co-run.
fn masa(c: &Catalog, machine: &str, tasks: &[(&str, &str)], ms: u64) -> Vec<f64> {
    let mut b = Scenario::builder(c, machine)
        .unwrap()
        .duration_ms(ms)
        .seed(1);
    for (p, cpu) in tasks {
        b = b.task(p, one(cpu)).unwrap();
    }
    let r = run(&b.build().unwrap(), 1, None, None, 100_000_000).unwrap();
    r.tasks
        .iter()
        .map(|t| r.duration_ns as f64 / t.solo_cpu_time_ns as f64)
        .collect()
}

struct Eval {
    loss: f64,
    lines: Vec<String>,
}

fn solo_s(p: &str) -> f64 {
    target(&format!("masa-solo/{p}/time_s"))
}

/// Published per-task times (INT, INT, other, other order of the paper module) of a MASA row,
/// reordered to the task order `tasks` uses.
fn masa_times(table: u8, label: &str, tasks: &[(&str, &str)]) -> Vec<f64> {
    let names = ["INT#1", "INT#2", "other#1", "other#2"];
    let pub_s: Vec<f64> = names
        .iter()
        .map(|n| target(&format!("masa-table{table}/{label}/{n}_s")))
        .collect();
    let (mut int_i, mut other_i) = (0, 2);
    tasks
        .iter()
        .map(|(p, _)| {
            let i = if *p == "INT" {
                int_i += 1;
                int_i - 1
            } else {
                other_i += 1;
                other_i - 1
            };
            pub_s[i]
        })
        .collect()
}

fn evaluate(c: &Catalog, ms: u64, targets: &Targets) -> Eval {
    let mut loss = 0.0;
    let mut lines = Vec::new();
    let (np, unf, per) = zhang(c, ms * 10);
    let (p_np, p_unf) = (targets.zhang_np.value(), targets.zhang_unfairness.value());
    loss += ((np - p_np) / 0.01).powi(2) + ((unf - p_unf) / 0.01).powi(2);
    lines.push(format!(
        "zhang-spec: NP {np:.3} ({p_np}, residual {:+.3}), unfairness {unf:.3} ({p_unf}, residual {:+.3}); per task {:?}",
        np - p_np,
        unf - p_unf,
        per.iter().map(|v| (v * 1000.0).round() / 1000.0).collect::<Vec<_>>()
    ));
    // MASA: (placement, machine, tasks, (table, label) of the published row).
    let tables = [
        (
            "T1 (INT,FP)(INT,FP)",
            "masa-2x2ht",
            vec![("INT", "0"), ("FP", "1"), ("INT", "2"), ("FP", "3")],
            (1, "(INT, FP) (INT, FP)"),
        ),
        (
            "T1 (INT,INT)(FP,FP)",
            "masa-2x2ht",
            vec![("INT", "0"), ("INT", "1"), ("FP", "2"), ("FP", "3")],
            (1, "(INT, INT) (FP, FP)"),
        ),
        (
            "T1 [INT,FP][INT,FP]",
            "masa-2x1",
            vec![("INT", "0"), ("FP", "0"), ("INT", "1"), ("FP", "1")],
            (1, "[INT, FP] [INT, FP]"),
        ),
        (
            "T1 [INT,INT][FP,FP]",
            "masa-2x1",
            vec![("INT", "0"), ("INT", "0"), ("FP", "1"), ("FP", "1")],
            (1, "[INT, INT] [FP, FP]"),
        ),
        (
            "T2 (INT,L2C)(INT,L2C)",
            "masa-2x2ht",
            vec![("INT", "0"), ("L2C", "1"), ("INT", "2"), ("L2C", "3")],
            (2, "(INT, L2C) (INT, L2C)"),
        ),
        (
            "T2 (INT,INT)(L2C,L2C)",
            "masa-2x2ht",
            vec![("INT", "0"), ("INT", "1"), ("L2C", "2"), ("L2C", "3")],
            (2, "(INT, INT) (L2C, L2C)"),
        ),
        (
            "T2 [INT,L2C][INT,L2C]",
            "masa-2x1",
            vec![("INT", "0"), ("L2C", "0"), ("INT", "1"), ("L2C", "1")],
            (2, "[INT, L2C] [INT, L2C]"),
        ),
        (
            "T2 [INT,INT][L2C,L2C]",
            "masa-2x1",
            vec![("INT", "0"), ("INT", "0"), ("L2C", "1"), ("L2C", "1")],
            (2, "[INT, INT] [L2C, L2C]"),
        ),
    ];
    let mut totals = Vec::new();
    for (name, machine, tasks, (tn, label)) in &tables {
        let published = masa_times(*tn, label, tasks);
        let sd = masa(c, machine, tasks, ms);
        let times: Vec<f64> = tasks
            .iter()
            .zip(&sd)
            .map(|((p, _), s)| solo_s(p) * s)
            .collect();
        let total: f64 = times.iter().sum();
        let ptotal: f64 = published.iter().sum();
        for (t, p) in times.iter().zip(&published) {
            loss += ((t / p).ln() / 0.02).powi(2);
        }
        lines.push(format!(
            "{name}: total {total:.1} s (published {ptotal:.1}, residual {:+.1} %); per task {:?} (published {:?})",
            (total / ptotal - 1.0) * 100.0,
            times.iter().map(|v| v.round()).collect::<Vec<_>>(),
            published
        ));
        totals.push(total);
    }
    for (i, t) in [(0, "table 1"), (4, "table 2")] {
        let (mixed, alike, off) = (totals[i], totals[i + 1], totals[i + 3]);
        let total = |label: &str| target(&format!("masa-table{}/{label}/total_s", i / 4 + 1));
        let (pm, pa, po) = if i == 0 {
            (
                total("(INT, FP) (INT, FP)"),
                total("(INT, INT) (FP, FP)"),
                total("[INT, INT] [FP, FP]"),
            )
        } else {
            (
                total("(INT, L2C) (INT, L2C)"),
                total("(INT, INT) (L2C, L2C)"),
                total("[INT, INT] [L2C, L2C]"),
            )
        };
        let g_mix = 1.0 - mixed / alike;
        let g_ht = 1.0 - mixed / off;
        let (pg_mix, pg_ht) = (1.0 - pm / pa, 1.0 - pm / po);
        loss += ((g_mix - pg_mix) / 0.01).powi(2) + ((g_ht - pg_ht) / 0.01).powi(2);
        if totals[i] >= totals[i + 1] {
            loss += 1e3;
        }
        lines.push(format!(
            "{t}: mixed packages faster than alike by {:.1} % (published {:.1} %); HT on (mixed) faster than HT off (alike) by {:.1} % (published {:.1} %)",
            g_mix * 100.0, pg_mix * 100.0, g_ht * 100.0, pg_ht * 100.0
        ));
    }
    Eval { loss, lines }
}

/// Plausible ranges (published characterizations of SPEC CPU2000 on Pentium 4 / Xeon systems:
/// core CPI 0.5-2, L2 MPKI at 1 MB within a factor of two of measured values, MLP 1-6; SMT
/// penalties non-negative). The fit may not leave them.
fn bounds(name: &str) -> (f64, f64) {
    match name {
        n if n.ends_with("cpi_core") => (0.5, 2.0),
        n if n.ends_with("fp_fraction") => (0.2, 0.6),
        n if n.ends_with("m_ref") => (0.01, 0.95),
        n if n.ends_with("alpha") => (0.1, 1.0),
        n if n.ends_with("mlp") => (1.0, 6.0),
        "swim.llc_apki" => (20.0, 60.0),
        "art.llc_apki" => (20.0, 80.0),
        "wupwise.llc_apki" => (5.0, 30.0),
        "parser.llc_apki" => (5.0, 30.0),
        "gzip.llc_apki" | "mesa.llc_apki" => (0.5, 10.0),
        "zhang-smp.peak_bandwidth_gb_per_s" => (2.0, 4.3),
        n if n.contains("smt") => (0.0, 10.0),
        _ => (0.0, f64::INFINITY),
    }
}

fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let targets = match Targets::load() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("calibrate: {e}");
            std::process::exit(2)
        }
    };
    let mut cat = Catalog::builtin();
    let params: Vec<(&str, Getter, Setter)> = vec![
        sparam!(issue_penalty),
        sparam!(same_unit_penalty),
        sparam!(fp_unit_weight),
        pparam!("gzip", cpi_core),
        pparam!("mesa", cpi_core),
        pparam!("mesa", fp_fraction),
        pparam!("parser", cpi_core),
        pparam!("parser", llc_apki),
        cparam!("parser", m_ref),
        cparam!("parser", alpha),
        pparam!("swim", llc_apki),
        pparam!("swim", mlp),
        pparam!("art", llc_apki),
        pparam!("art", mlp),
        cparam!("art", m_ref),
        pparam!("wupwise", llc_apki),
        cparam!("wupwise", m_ref),
        pparam!("gzip", llc_apki),
        pparam!("mesa", llc_apki),
        (
            "zhang-smp.peak_bandwidth_gb_per_s",
            (|c: &Catalog| c.machine("zhang-smp").unwrap().peak_bandwidth_gb_per_s) as Getter,
            (|c: &mut Catalog, v: f64| {
                let mut m = c.machine("zhang-smp").unwrap();
                m.peak_bandwidth_gb_per_s = v;
                c.set_machine(m);
            }) as Setter,
        ),
    ];
    let fit = std::env::args().any(|a| a == "--fit");
    let ms = 2000;
    let sync = |c: &mut Catalog| {
        for (probe, of) in [
            ("INT", "gzip"),
            ("FP", "mesa"),
            ("L2C", "parser"),
            ("MEM", "swim"),
        ] {
            let mut p = c.program(of).unwrap();
            p.name = probe.into();
            c.set_program(p);
        }
    };
    sync(&mut cat);
    let mut best = evaluate(&cat, ms, &targets);
    if fit {
        let mut step = 0.2f64;
        while step > 0.01 {
            let mut improved = false;
            for (name, get, set) in &params {
                for dir in [1.0, -1.0] {
                    let mut c2 = cat.clone();
                    let v = get(&c2);
                    let (lo, hi) = bounds(name);
                    let nv = (v * (dir * step).exp()).clamp(lo, hi);
                    if nv == v {
                        continue;
                    }
                    set(&mut c2, nv);
                    sync(&mut c2);
                    let e = evaluate(&c2, ms, &targets);
                    if e.loss < best.loss {
                        eprintln!(
                            "{name}: {v:.4} -> {nv:.4}  loss {:.2} -> {:.2}",
                            best.loss, e.loss
                        );
                        best = e;
                        cat = c2;
                        improved = true;
                        break;
                    }
                }
            }
            if !improved {
                step /= 2.0;
            }
            println!("# step {step} loss {:.2}", best.loss);
            for (name, get, _) in &params {
                println!("#  {name} = {:.4}", get(&cat));
            }
        }
    }
    println!("loss {:.2}", best.loss);
    for l in &best.lines {
        println!("{l}");
    }
    println!("parameters:");
    for (name, get, _) in &params {
        println!("  {name} = {:.4}", get(&cat));
    }
}
