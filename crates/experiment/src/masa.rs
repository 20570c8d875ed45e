//! `masa-placement` (Nakajima & Pallipadi Tables 1 and 2) and `masa-testcases` (§4.3, Tables 7
//! and 8) on the simulated dual-package Hyper-Threading machine.
//!
//! Placement tables are static bindings under the baseline scheduler. The test cases run four
//! "shells" (SPEC programs back to back) without and with MASA; MASA's load calibration is
//! measured on the simulated machine first, exactly as the paper prescribes: each probe program
//! (177.mesa for FP, 197.parser for L2C) solo on a package with the other package idle, then
//! two copies coupled on one package.

use crate::lab::{Job, JobTask, Lab, LabError, Outcome, RunSpec};
use crate::paper::{self, Basis};
use crate::progress::Progress;
use crate::result::{ours_cell, BarFigure, BarSeries, ExperimentResult, Table};
use crate::summary::Verdict;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::Topology;
use counterpoint_policy::masa::{
    Calibration, CalibrationEntry, LimitCheck, LoadMetric, Masa, MasaParams,
};
use counterpoint_policy::tree::MachineTree;
use counterpoint_policy::{Linux, LinuxPick};
use rayon::prelude::*;

/// The catalog machine standing for the paper's dual Xeon with HT.
pub const MACHINE: &str = "masa-2x2ht";
/// The same machine with HT disabled.
pub const MACHINE_HT_OFF: &str = "masa-2x1";
/// Placement runs: programs repeat (constant contention) for this long and each program's
/// time to complete is its instructions at its average rate.
pub const PLACEMENT_DURATION_NS: u64 = 60_000_000_000;
/// Calibration probes and test cases run their work once, to completion, within this limit.
pub const RUN_LIMIT_NS: u64 = 200_000_000_000_000;
/// Tick for the long runs (probes, shells): 10 ms, a tenth of the scheduler's time slice.
pub const LONG_TICK_NS: u64 = 10_000_000;
pub const INT: &str = "gzip";
pub const FP: &str = "mesa";
pub const L2C: &str = "parser";
/// Epoch between MASA's looks at the counters (it accumulates to its 5 s period).
pub const EPOCH_NS: u64 = 1_000_000_000;

/// One placement row of Tables 1/2: which program on which package, HT on or off.
struct Placement {
    label: &'static str,
    ht: bool,
    /// Programs of package 0, then of package 1 ("(INT, FP) (INT, FP)").
    pkg: [[&'static str; 2]; 2],
    /// Paper's per-program times (INT, INT, other, other) and total.
    paper: [f64; 5],
}

/// The placements of Table 1 (`other` = FP) or 2 (L2C); the published times come from
/// [`paper::MASA_TABLES`] (calibration targets).
fn table(other: &'static str) -> Vec<Placement> {
    let fp = other == FP;
    let tn = if fp { 1 } else { 2 };
    // Filled in below from the paper module, by label.
    const PAPER: [f64; 5] = [f64::NAN; 5];
    let mut rows = vec![
        Placement {
            label: if fp {
                "(INT, FP) (INT, FP)"
            } else {
                "(INT, L2C) (INT, L2C)"
            },
            ht: true,
            pkg: [[INT, other], [INT, other]],
            paper: PAPER,
        },
        Placement {
            label: if fp {
                "(INT, INT) (FP, FP)"
            } else {
                "(INT, INT) (L2C, L2C)"
            },
            ht: true,
            pkg: [[INT, INT], [other, other]],
            paper: PAPER,
        },
        Placement {
            label: if fp {
                "[INT, FP] [INT, FP]"
            } else {
                "[INT, L2C] [INT, L2C]"
            },
            ht: false,
            pkg: [[INT, other], [INT, other]],
            paper: PAPER,
        },
        Placement {
            label: if fp {
                "[INT, INT] [FP, FP]"
            } else {
                "[INT, INT] [L2C, L2C]"
            },
            ht: false,
            pkg: [[INT, INT], [other, other]],
            paper: PAPER,
        },
    ];
    for r in &mut rows {
        if let Some(published) = paper::masa_row(tn, r.label) {
            r.paper = published.times_s;
        }
    }
    rows
}

fn machine(ht: bool) -> String {
    if ht { MACHINE } else { MACHINE_HT_OFF }.to_string()
}

fn topology_of(lab: &dyn Lab, ht: bool) -> Result<Topology, LabError> {
    lab.topology(&Job::Custom {
        machine: machine(ht),
        tasks: vec![],
        duration_ns: 1,
        tick_ns: None,
    })
}

/// Per package, the CPUs programs are bound to: with HT one logical CPU each; without HT both
/// programs of a package share its one CPU (time-shared, as in the paper's "[ ]" rows).
fn placement_job(lab: &dyn Lab, p: &Placement) -> Result<(Job, Vec<String>), LabError> {
    let topo = topology_of(lab, p.ht)?;
    let tree = MachineTree::new(&topo);
    if tree.packages.len() < 2 {
        return Err(LabError(format!(
            "{MACHINE}: expected 2 packages, found {}",
            tree.packages.len()
        )));
    }
    let mut tasks = Vec::new();
    let mut names = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    // Order the tasks INT, INT, other, other so the columns match the paper's.
    let mut slots: Vec<(&str, CpuId)> = Vec::new();
    for (pi, progs) in p.pkg.iter().enumerate() {
        let cpus = tree.packages[pi].cpus();
        for (k, prog) in progs.iter().enumerate() {
            let cpu = if p.ht {
                cpus[k.min(cpus.len() - 1)]
            } else {
                cpus[0]
            };
            slots.push((prog, cpu));
        }
    }
    slots.sort_by_key(|(prog, _)| if *prog == INT { 0 } else { 1 });
    for (prog, cpu) in slots {
        let class = if prog == INT {
            "INT"
        } else if prog == FP {
            "FP"
        } else {
            "L2C"
        };
        let n = counts.entry(class).or_insert(0);
        *n += 1;
        let name = format!("{class}#{n}");
        names.push(name.clone());
        tasks.push(JobTask::program(&name, prog, Some(CpuSet::single(cpu))));
    }
    Ok((
        Job::Custom {
            machine: machine(p.ht),
            tasks,
            duration_ns: PLACEMENT_DURATION_NS,
            tick_ns: None,
        },
        names,
    ))
}

fn seconds(ns: Option<u64>) -> Option<f64> {
    ns.map(|n| n as f64 / 1e9)
}

fn run_baseline(lab: &dyn Lab, job: &Job, seed: u64) -> Result<Outcome, LabError> {
    lab.run(
        job,
        RunSpec {
            seed,
            epoch_ns: EPOCH_NS,
        },
        &mut Linux,
        &mut LinuxPick,
    )
}

/// `masa-placement`: Tables 1 and 2.
pub fn placement(
    lab: &dyn Lab,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<ExperimentResult, LabError> {
    let mut r = ExperimentResult::new(
        "masa-placement",
        "Nakajima & Pallipadi Tables 1 and 2: static placement on 2 packages x 2 HT threads",
        &format!(
            "catalog machine `{MACHINE}` (2 packages x 1 core x 2 threads; HT off = 1 thread)"
        ),
        seeds,
    );
    for (tn, other) in [(1, FP), (2, L2C)] {
        let rows = table(other);
        let jobs: Vec<(Job, Vec<String>)> = rows
            .iter()
            .map(|p| placement_job(lab, p))
            .collect::<Result<_, _>>()?;
        let work: Vec<(usize, u64)> = (0..rows.len())
            .flat_map(|i| seeds.iter().map(move |s| (i, *s)))
            .collect();
        progress.add_total(work.len() as u64);
        let outs: Vec<(usize, Outcome)> = work
            .par_iter()
            .map(|&(i, seed)| {
                let o = run_baseline(lab, &jobs[i].0, seed)?;
                progress.done(rows[i].label);
                Ok((i, o))
            })
            .collect::<Result<_, LabError>>()?;
        let other_name = if other == FP { "FP" } else { "L2C" };
        let mut t = Table::new(
            &format!("Table {tn}: average time (s) to complete (INT, {other_name}) — ours / paper"),
            &["placement", "INT", "INT", other_name, other_name, "total"],
        );
        let mut totals = Vec::new();
        for (i, p) in rows.iter().enumerate() {
            let mine: Vec<&Outcome> = outs.iter().filter(|o| o.0 == i).map(|o| &o.1).collect();
            let mut cells = vec![p.label.to_string()];
            let mut total_per_seed = vec![0.0; mine.len()];
            for (col, name) in jobs[i].1.iter().enumerate() {
                let vals: Vec<f64> = mine
                    .iter()
                    .filter_map(|o| {
                        o.tasks
                            .iter()
                            .find(|t| &t.name == name)
                            .and_then(|t| t.wall_ns_per_program)
                            .map(|ns| ns / 1e9)
                    })
                    .collect();
                for (k, v) in vals.iter().enumerate() {
                    if let Some(tot) = total_per_seed.get_mut(k) {
                        *tot += v;
                    }
                }
                let s = crate::Summary::of(&vals);
                cells.push(format!("{} / {:.1}", ours_cell(s, 1), p.paper[col]));
            }
            let key = format!("table{tn} {}", p.label);
            let tot = r.put(&key, "total_time_s", &total_per_seed);
            r.put_paper(&key, "total_time_s", p.paper[4]);
            let np: Vec<f64> = mine
                .iter()
                .filter_map(|o| o.system().map(|m| m.normalized_performance))
                .collect();
            let unf: Vec<f64> = mine
                .iter()
                .filter_map(|o| o.system().map(|m| m.unfairness))
                .collect();
            r.put(&key, "normalized_performance", &np);
            r.put(&key, "unfairness", &unf);
            cells.push(format!("{} / {:.1}", ours_cell(tot, 1), p.paper[4]));
            // Pinned baseline placements: the fit's targets.
            t.row_with(Basis::Calibrated, cells);
            totals.push((tot.map(|s| s.mean), p.paper[4]));
        }
        r.tables.push(t);
        // The paper's two claims, as reductions of total time.
        if let [(Some(mix), pmix), (Some(same), psame), (Some(off_a), poff_a), (Some(off_b), poff_b)] =
            totals[..]
        {
            let mix_gain = 1.0 - mix / same;
            let pmix_gain = 1.0 - pmix / psame;
            let ht_gain = 1.0 - mix.min(same) / off_a.min(off_b);
            let pht_gain = 1.0 - pmix.min(psame) / poff_a.min(poff_b);
            let key = format!("table{tn}");
            r.put(&key, "mix_gain", &[mix_gain]);
            r.put(&key, "ht_gain", &[ht_gain]);
            r.put_paper(&key, "mix_gain", pmix_gain);
            r.put_paper(&key, "ht_gain", pht_gain);
            r.findings.push(format!(
                "Table {tn}: mixing INT with {other_name} in a package beats pairing alike \
                 programs by {:.1}% of total time (paper {:.1}%); HT on beats HT off by {:.1}% \
                 (paper {:.1}%) (means over seeds)",
                100.0 * mix_gain,
                100.0 * pmix_gain,
                100.0 * ht_gain,
                100.0 * pht_gain
            ));
        }
        r.figures.push(BarFigure {
            file: format!("masa-table{tn}.svg"),
            title: format!("MASA Table {tn}: total time (s) per placement"),
            y_label: "total time (s)".into(),
            categories: rows.iter().map(|p| p.label.to_string()).collect(),
            series: vec![
                BarSeries {
                    name: "ours".into(),
                    values: rows
                        .iter()
                        .map(|p| {
                            r.get(&format!("table{tn} {}", p.label), "total_time_s")
                                .map(|s| s.mean)
                        })
                        .collect(),
                    errors: rows
                        .iter()
                        .map(|p| {
                            r.get(&format!("table{tn} {}", p.label), "total_time_s")
                                .map(|s| s.std)
                        })
                        .collect(),
                },
                BarSeries {
                    name: "paper".into(),
                    values: rows.iter().map(|p| Some(p.paper[4])).collect(),
                    errors: vec![None; rows.len()],
                },
            ],
        });
    }
    Ok(r)
}

/// The paper's shells (§4.3).
pub fn shells() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "shell_0",
            vec!["gzip", "gcc", "crafty", "eon", "gap", "bzip2"],
        ),
        (
            "shell_1",
            vec!["vpr", "mcf", "parser", "perlbmk", "vortex", "twolf"],
        ),
        (
            "shell_2",
            vec![
                "wupwise", "mgrid", "mesa", "art", "facerec", "lucas", "sixtrack",
            ],
        ),
        ("shell_fp", vec!["mesa"; 7]),
        ("shell_l2c", vec!["parser"; 5]),
    ]
}

/// Start orders of a test case's four shells. The baseline's wake-up placement puts the 1st
/// and 3rd started shells on one package and the 2nd and 4th on the other, so the three
/// orders give the three distinct initial package pairings; the seed picks one (the paper
/// averages three runs and does not say how its shells were paired at start).
pub fn start_order(shells: &[&'static str; 4], seed: u64) -> [&'static str; 4] {
    let [a, b, c, d] = *shells;
    match seed.wrapping_sub(1) % 3 {
        0 => [a, b, c, d],
        1 => [a, c, b, d],
        _ => [a, b, d, c],
    }
}

fn shell_job(names: &[&str]) -> Job {
    let all = shells();
    let tasks = names
        .iter()
        .filter_map(|n| all.iter().find(|(s, _)| s == n))
        .map(|(s, progs)| JobTask {
            name: s.to_string(),
            programs: progs.iter().map(|p| p.to_string()).collect(),
            affinity: None,
            repeat: false,
        })
        .collect();
    Job::Custom {
        machine: machine(true),
        tasks,
        duration_ns: RUN_LIMIT_NS,
        tick_ns: Some(LONG_TICK_NS),
    }
}

/// Measure the load-calibration table on the simulated machine (one seed).
pub fn calibrate(lab: &dyn Lab, seed: u64) -> Result<Calibration, LabError> {
    let topo: Topology = topology_of(lab, true)?;
    let tree = MachineTree::new(&topo);
    let pkg0 = tree
        .packages
        .first()
        .map(|p| p.cpus())
        .filter(|c| c.len() >= 2)
        .ok_or_else(|| LabError(format!("{MACHINE}: package 0 needs two logical CPUs")))?;
    let mut entries = Vec::new();
    for (metric, probe) in [(LoadMetric::FpUops, FP), (LoadMetric::L2Misses, L2C)] {
        let solo = Job::Custom {
            machine: machine(true),
            tasks: vec![JobTask::program("solo", probe, Some(CpuSet::single(pkg0[0]))).once()],
            duration_ns: RUN_LIMIT_NS,
            tick_ns: Some(LONG_TICK_NS),
        };
        let coupled = Job::Custom {
            machine: machine(true),
            tasks: vec![
                JobTask::program("a", probe, Some(CpuSet::single(pkg0[0]))).once(),
                JobTask::program("b", probe, Some(CpuSet::single(pkg0[1]))).once(),
            ],
            duration_ns: RUN_LIMIT_NS,
            tick_ns: Some(LONG_TICK_NS),
        };
        let s = run_baseline(lab, &solo, seed)?;
        let c = run_baseline(lab, &coupled, seed)?;
        let ev = metric.event();
        let time = |o: &Outcome| -> Result<(f64, f64, f64), LabError> {
            let times: Vec<f64> = o
                .tasks
                .iter()
                .filter_map(|t| seconds(t.completion_ns))
                .collect();
            if times.len() != o.tasks.len() || times.is_empty() {
                return Err(LabError(format!(
                    "calibration probe {probe} did not finish"
                )));
            }
            let events: f64 = o
                .tasks
                .iter()
                .map(|t| t.events.get(ev).copied().unwrap_or(0.0))
                .sum();
            let mean = times.iter().sum::<f64>() / times.len() as f64;
            let longest = times.iter().copied().fold(0.0, f64::max);
            Ok((mean, events, longest))
        };
        let (ts, es, ls) = time(&s)?;
        let (tc, ec, lc) = time(&c)?;
        entries.push(CalibrationEntry {
            metric,
            probe: probe.to_string(),
            solo_time_s: ts,
            coupled_time_s: tc,
            solo_events_per_s: es / ls,
            coupled_events_per_s: ec / lc,
        });
    }
    Ok(Calibration { entries })
}

/// One test case's shells and paper numbers: totals without/with MASA, gain, swaps (L2, FP).
struct TestCase {
    name: &'static str,
    shells: [&'static str; 4],
    paper: (f64, f64, f64, u64, u64),
}

fn test_cases() -> [TestCase; 2] {
    let published = |i: usize| {
        let t = paper::MASA_TEST_CASES[i];
        (t.without_s, t.with_s, t.gain, t.swaps_l2, t.swaps_fp)
    };
    [
        TestCase {
            name: paper::MASA_TEST_CASES[0].name,
            shells: ["shell_0", "shell_1", "shell_2", "shell_l2c"],
            paper: published(0),
        },
        TestCase {
            name: paper::MASA_TEST_CASES[1].name,
            shells: ["shell_0", "shell_1", "shell_2", "shell_fp"],
            paper: published(1),
        },
    ]
}

/// The configurations of a test case: the baseline and MASA under the three readings of the
/// step-4d limit check (the literal one is MASA's default).
const VARIANTS: [(&str, Option<LimitCheck>); 4] = [
    ("linux", None),
    ("masa", Some(LimitCheck::Strict)),
    ("masa-no-new-excess", Some(LimitCheck::NoNewExcess)),
    ("masa-own-metric", Some(LimitCheck::OwnMetric)),
];

struct TcRun {
    tc: usize,
    seed: u64,
    variant: usize,
    total_s: f64,
    np: f64,
    unfairness: f64,
    swaps_l2: u64,
    swaps_fp: u64,
    migrations: u64,
}

fn pct(s: Option<crate::Summary>) -> String {
    s.map(|g| crate::Summary {
        mean: g.mean * 100.0,
        std: g.std * 100.0,
        min: g.min * 100.0,
        max: g.max * 100.0,
        n: g.n,
    })
    .map(|g| g.show(1))
    .unwrap_or_else(|| "n/a".into())
}

/// `masa-testcases`: test cases 1 and 2 without and with MASA, swap counts per metric.
pub fn testcases(
    lab: &dyn Lab,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<ExperimentResult, LabError> {
    let tcs = test_cases();
    progress.add_total((seeds.len() * (tcs.len() * VARIANTS.len() + 1)) as u64);
    // Calibration per seed (as MASA does at start-up), in parallel.
    let cals: Vec<(u64, Calibration)> = seeds
        .par_iter()
        .map(|&s| {
            let c = calibrate(lab, s)?;
            progress.done("calibration");
            Ok((s, c))
        })
        .collect::<Result<_, LabError>>()?;
    let work: Vec<(usize, u64, usize)> = (0..tcs.len())
        .flat_map(|t| {
            seeds
                .iter()
                .flat_map(move |s| (0..VARIANTS.len()).map(move |v| (t, *s, v)))
        })
        .collect();
    let runs: Vec<TcRun> = work
        .par_iter()
        .map(|&(tc, seed, variant)| {
            let job = shell_job(&start_order(&tcs[tc].shells, seed));
            let spec = RunSpec {
                seed,
                epoch_ns: EPOCH_NS,
            };
            let cal = cals
                .iter()
                .find(|c| c.0 == seed)
                .map(|c| &c.1)
                .ok_or_else(|| LabError(format!("no calibration for seed {seed}")))?;
            let (out, l2, fp, mig) = match VARIANTS[variant].1 {
                Some(limit_check) => {
                    let params = MasaParams {
                        limit_check,
                        ..MasaParams::default()
                    };
                    let mut m = Masa::new(params, cal)
                        .map_err(|e| LabError(format!("MASA calibration: {e}")))?;
                    let out = lab.run(&job, spec, &mut m, &mut LinuxPick)?;
                    let counts = m.swap_counts();
                    (
                        out,
                        counts.get("l2_misses").copied().unwrap_or(0),
                        counts.get("fp_uops").copied().unwrap_or(0),
                        m.migrations(),
                    )
                }
                None => (lab.run(&job, spec, &mut Linux, &mut LinuxPick)?, 0, 0, 0),
            };
            let total_s: f64 = out
                .tasks
                .iter()
                .map(|t| seconds(t.completion_ns).unwrap_or(out.elapsed_ns as f64 / 1e9))
                .sum();
            let m = out
                .system()
                .ok_or_else(|| LabError("test case without normalized performance".into()))?;
            progress.done(tcs[tc].name);
            Ok(TcRun {
                tc,
                seed,
                variant,
                total_s,
                np: m.normalized_performance,
                unfairness: m.unfairness,
                swaps_l2: l2,
                swaps_fp: fp,
                migrations: mig,
            })
        })
        .collect::<Result<_, LabError>>()?;

    let mut r = ExperimentResult::new(
        "masa-testcases",
        "Nakajima & Pallipadi test cases 1 and 2: four shells without and with MASA",
        &format!(
            "catalog machine `{MACHINE}` (2 packages x 2 HT threads); shells run once to \
             completion (tick 10 ms); the seed chooses which shells start paired on a package \
             (seed 1, 4: 0+2 / 1+X; 2, 5: 0+1 / 2+X; 3: 0+X / 1+2); MASA period 5 s, \
             decisions looked at every 1 s epoch"
        ),
        seeds,
    );
    // Calibration table (first seed) for the report.
    if let Some((s, cal)) = cals.first() {
        let mut t = Table::new(
            &format!("Load calibration measured on the simulated machine (seed {s})"),
            &[
                "metric",
                "probe",
                "solo time (s)",
                "coupled time (s)",
                "solo rate (/s) = limit",
                "coupled package rate (/s)",
                "ΔT/ΔL (relative)",
            ],
        );
        for e in &cal.entries {
            t.row(vec![
                e.metric.name().to_string(),
                e.probe.clone(),
                format!("{:.1}", e.solo_time_s),
                format!("{:.1}", e.coupled_time_s),
                format!("{:.4e}", e.solo_events_per_s),
                format!("{:.4e}", e.coupled_events_per_s),
                e.impact()
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_else(|err| err.to_string()),
            ]);
        }
        r.tables.push(t);
        if let Ok(rank) = cal.rank() {
            r.findings.push(format!(
                "calibrated priority: {} (paper: L2 misses before FP uops, ratio 1.03)",
                rank.iter()
                    .map(|m| format!("{} ({:.3})", m.metric.name(), m.impact))
                    .collect::<Vec<_>>()
                    .join(" > ")
            ));
        }
    }
    let mut t = Table::new(
        "Table 8: total time (s), gain and swaps — ours / paper",
        &[
            "test case",
            "MASA variant",
            "total w/o MASA",
            "total w/ MASA",
            "gain (%)",
            "swaps (L2 miss)",
            "swaps (FP uops)",
            "step-3 migrations",
        ],
    );
    for (i, tc) in tcs.iter().enumerate() {
        let sel = |v: usize| -> Vec<&TcRun> {
            runs.iter()
                .filter(|x| x.tc == i && x.variant == v)
                .collect()
        };
        let lin = sel(0);
        let key_l = format!("{} linux", tc.name);
        let (pl, pm, pg, pl2, pfp) = tc.paper;
        r.put_paper(&key_l, "total_time_s", pl);
        for (v, (vname, _)) in VARIANTS.iter().enumerate() {
            let set = sel(v);
            let key = format!("{} {vname}", tc.name);
            r.put(
                &key,
                "total_time_s",
                &set.iter().map(|x| x.total_s).collect::<Vec<_>>(),
            );
            r.put(
                &key,
                "normalized_performance",
                &set.iter().map(|x| x.np).collect::<Vec<_>>(),
            );
            r.put(
                &key,
                "unfairness",
                &set.iter().map(|x| x.unfairness).collect::<Vec<_>>(),
            );
            if v == 0 {
                continue;
            }
            let gains: Vec<f64> = seeds
                .iter()
                .filter_map(|s| {
                    let l = lin.iter().find(|x| x.seed == *s)?;
                    let m = set.iter().find(|x| x.seed == *s)?;
                    Some(1.0 - m.total_s / l.total_s)
                })
                .collect();
            let gain = r.put(&key, "gain", &gains);
            let l2 = r.put(
                &key,
                "swaps_l2_misses",
                &set.iter().map(|x| x.swaps_l2 as f64).collect::<Vec<_>>(),
            );
            let fp = r.put(
                &key,
                "swaps_fp_uops",
                &set.iter().map(|x| x.swaps_fp as f64).collect::<Vec<_>>(),
            );
            let mig = r.put(
                &key,
                "migrations",
                &set.iter().map(|x| x.migrations as f64).collect::<Vec<_>>(),
            );
            r.put_paper(&key, "total_time_s", pm);
            r.put_paper(&key, "gain", pg);
            r.put_paper(&key, "swaps_l2_misses", pl2 as f64);
            r.put_paper(&key, "swaps_fp_uops", pfp as f64);
            t.row(vec![
                tc.name.to_string(),
                vname.to_string(),
                format!("{} / {pl:.0}", ours_cell(r.get(&key_l, "total_time_s"), 0)),
                format!("{} / {pm:.0}", ours_cell(r.get(&key, "total_time_s"), 0)),
                format!(
                    "{} / {:.1} ({})",
                    pct(gain),
                    pg * 100.0,
                    gain.map_or("—", |g| g.verdict().label())
                ),
                format!("{} / {pl2}", ours_cell(l2, 1)),
                format!("{} / {pfp}", ours_cell(fp, 1)),
                ours_cell(mig, 1),
            ]);
            // The swap order, paired by seed: L2-miss swaps minus FP-uop swaps.
            let order = crate::Summary::of(
                &set.iter()
                    .map(|x| x.swaps_l2 as f64 - x.swaps_fp as f64)
                    .collect::<Vec<_>>(),
            );
            if let (Some(g), Some(l2), Some(fp), Some(order)) = (gain, l2, fp, order) {
                let (lo, hi) = g.interval95();
                let paper_order = if pl2 > pfp {
                    Verdict::Gain
                } else {
                    Verdict::Loss
                };
                r.findings.push(format!(
                    "{} ({vname}): gain {:.1}% [95 % CI {:.1}, {:.1}] (paper {:.1}%) — {}; swaps \
                     L2 {:.1} vs FP {:.1} (paper {pl2} vs {pfp}) — {}",
                    tc.name,
                    100.0 * g.mean,
                    100.0 * lo,
                    100.0 * hi,
                    100.0 * pg,
                    g.verdict().label(),
                    l2.mean,
                    fp.mean,
                    if order.verdict() == paper_order {
                        "the paper's order of swaps, reproduced"
                    } else {
                        "the paper's order of swaps not reproduced"
                    }
                ));
            }
        }
    }
    r.tables.insert(r.tables.len().min(1), t);
    r.figures.push(BarFigure {
        file: "masa-testcases.svg".into(),
        title: "MASA test cases: gain (%) over the baseline".into(),
        y_label: "gain (%)".into(),
        categories: tcs.iter().map(|t| t.name.to_string()).collect(),
        series: VARIANTS[1..]
            .iter()
            .map(|(vname, _)| BarSeries {
                name: format!("ours ({vname})"),
                values: tcs
                    .iter()
                    .map(|t| {
                        r.get(&format!("{} {vname}", t.name), "gain")
                            .map(|s| 100.0 * s.mean)
                    })
                    .collect(),
                errors: tcs
                    .iter()
                    .map(|t| {
                        r.get(&format!("{} {vname}", t.name), "gain")
                            .map(|s| 100.0 * s.std)
                    })
                    .collect(),
            })
            .chain(std::iter::once(BarSeries {
                name: "paper".into(),
                values: tcs.iter().map(|t| Some(100.0 * t.paper.2)).collect(),
                errors: vec![None; tcs.len()],
            }))
            .collect(),
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_rows_read_every_published_time_from_the_paper_module() {
        for (tn, other) in [(1, FP), (2, L2C)] {
            let rows = table(other);
            assert_eq!(rows.len(), 4);
            for r in rows {
                let published = paper::masa_row(tn, r.label).expect("row in the paper module");
                assert_eq!(r.paper, published.times_s, "{}", r.label);
            }
        }
        let tcs = test_cases();
        assert_eq!(tcs[0].paper.3, 51);
        assert_eq!(tcs[1].paper.4, 20);
    }
}
