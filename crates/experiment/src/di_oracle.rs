//! `di-vs-oracle`: Zhuravlev et al. report Distributed Intensity within 2 % of the optimal
//! schedule. Here, per machine shape, seeded random mixes are drawn from the program catalog;
//! each policy runs the mix dynamically and the oracle searches every canonical static
//! placement (`counterpoint_policy::oracle`, symmetry-reduced) with the simulator as its cost.
//! The distance of a policy from the oracle is `1 - NP_policy / NP_oracle` (geometric-mean
//! normalized performance), so 0 is optimal and negative means the dynamic policy beat the
//! best static placement.
//!
//! Cost: every run here is a light run (no automatic solo runs); a task's NP is its
//! instructions per CPU-second in the mix over the same program's alone on the machine (one
//! solo run per program and seed, same duration and tick), for the policies and the oracle
//! alike. The oracle screens every canonical placement with a short run
//! ([`SCREEN_DURATION_NS`]) and re-runs the best [`CONFIRM`] at the full duration; its NP is
//! the best confirmed one (programs are single-phase, so the short run ranks placements by
//! their steady state).

use crate::lab::{Job, JobTask, Lab, LabError, Outcome, RunSpec};
use crate::progress::Progress;
use crate::result::{ours_cell, BarFigure, BarSeries, ExperimentResult, Table};
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_policy::{FnCost, Linux, OracleSearch};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// A machine shape of the comparison.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Label in tables.
    pub label: &'static str,
    /// Catalog machine.
    pub machine: &'static str,
    /// Tasks per mix.
    pub tasks: usize,
}

/// The machine shapes compared.
pub fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            label: "SMP bus",
            machine: "zhang-smp",
            tasks: 4,
        },
        Shape {
            label: "2x2 SMT",
            machine: "masa-2x2ht",
            tasks: 4,
        },
        Shape {
            label: "4-package 32-thread",
            machine: "xeon-4s-32t",
            tasks: 6,
        },
    ]
}

/// Policies compared with the oracle (registry names; epoch-level, as a live agent runs them).
pub const POLICIES: [&str; 5] = [
    "linux",
    "spread",
    "di",
    "ipc-pair-affinity",
    "bus-pair-affinity",
];

/// A compared policy, from the registry with its defaults.
fn make(policy: &str) -> Result<Box<dyn Policy + Send>, LabError> {
    counterpoint_policy::build_epoch(policy, &mut counterpoint_policy::Context::default())
        .map_err(|e| LabError(e.to_string()))
}

/// Epoch between policy decisions.
pub const EPOCH_NS: u64 = 100_000_000;
/// Each mix runs (programs repeating) for this long, dynamic policies and static placements
/// alike.
pub const MIX_DURATION_NS: u64 = 10_000_000_000;
/// Screening runs of the oracle's candidate placements.
pub const SCREEN_DURATION_NS: u64 = 2_000_000_000;
/// Placements re-run at the full duration.
pub const CONFIRM: usize = 8;
/// Simulation tick of these runs (a tenth of the scheduler's time slice).
pub const TICK_NS: u64 = 10_000_000;

/// Mixes drawn per seed and machine shape. The claim is judged over mixes, and one mix per
/// seed left five mixes per shape: seeds 1-5 called DI within 2 % of the oracle on two of
/// three shapes, seeds 101-120 on none (report audit, session 29). Four per seed give twenty
/// mixes per shape at the default five seeds.
pub const MIXES_PER_SEED: u64 = 4;

/// The seeded random mix `k` (0 to [`MIXES_PER_SEED`] - 1) for one shape: `n` distinct programs
/// where the catalog has enough. Mix 0 of a seed is the one drawn before mixes per seed were
/// more than one.
pub fn mix(programs: &[String], n: usize, seed: u64, shape_index: usize, k: u64) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ shape_index as u64 ^ k.rotate_right(16),
    );
    let mut pool = programs.to_vec();
    pool.sort();
    pool.shuffle(&mut rng);
    let mut out: Vec<String> = pool.iter().take(n).cloned().collect();
    // A small catalog: draw the rest with repetition.
    while out.len() < n && !pool.is_empty() {
        if let Some(p) = pool.choose(&mut rng) {
            out.push(p.clone());
        }
    }
    out
}

fn job(machine: &str, programs: &[String], placement: Option<&[CpuId]>) -> Job {
    job_for(machine, programs, placement, MIX_DURATION_NS)
}

fn job_for(
    machine: &str,
    programs: &[String],
    placement: Option<&[CpuId]>,
    duration_ns: u64,
) -> Job {
    Job::Custom {
        machine: machine.to_string(),
        duration_ns,
        tick_ns: Some(TICK_NS),
        tasks: programs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                JobTask::program(
                    &format!("{p}#{i}"),
                    p,
                    placement.map(|pl| CpuSet::single(pl[i])),
                )
            })
            .collect(),
    }
}

/// Instructions per CPU-second of each task.
fn ips(o: &Outcome) -> Vec<f64> {
    o.tasks
        .iter()
        .map(|t| {
            let i = t.events.get(event::INSTRUCTIONS).copied().unwrap_or(0.0);
            let ns = t.events.get(event::TASK_CLOCK).copied().unwrap_or(0.0);
            if ns > 0.0 {
                i / (ns / 1e9)
            } else {
                0.0
            }
        })
        .collect()
}

/// Geometric-mean NP of a light run against the solo rates.
fn np(o: &Outcome, solo_ips: &[f64]) -> Result<f64, LabError> {
    let nps: Vec<f64> = ips(o)
        .iter()
        .zip(solo_ips)
        .map(|(s, a)| if *a > 0.0 { s / a } else { 0.0 })
        .collect();
    counterpoint_core::stats::geometric_mean(&nps)
        .ok_or_else(|| LabError("a task of the mix never ran".into()))
}

/// Result of one (shape, seed, mix).
struct MixResult {
    shape: usize,
    mix: Vec<String>,
    oracle_np: f64,
    placements: usize,
    policy_np: Vec<f64>,
}

/// The canonical placements of each shape's tasks (they depend on the shape only): what the
/// oracle screens, one run each.
fn canonical_placements(lab: &dyn Lab, shapes: &[Shape]) -> Result<Vec<Vec<Vec<CpuId>>>, LabError> {
    let mut canon = Vec::new();
    for s in shapes {
        let topo = lab.topology(&job(s.machine, &[], None))?;
        let mut all = Vec::new();
        let found = OracleSearch {
            max_evaluations: 200_000,
            ..Default::default()
        }
        .search(
            &topo,
            s.tasks,
            &mut FnCost(|p: &[CpuId]| {
                all.push(p.to_vec());
                0.0
            }),
        );
        if found.is_none() || all.is_empty() {
            return Err(LabError(format!(
                "{}: no placement of {} tasks",
                s.label, s.tasks
            )));
        }
        canon.push(all);
    }
    Ok(canon)
}

/// Runs per mix and shape: every canonical placement (the oracle's screen) and every policy;
/// [`MIXES_PER_SEED`] mixes per seed.
fn runs_over(canon: &[Vec<Vec<CpuId>>], seeds: u64) -> u64 {
    canon
        .iter()
        .map(|c| (c.len() + POLICIES.len()) as u64)
        .sum::<u64>()
        * seeds
        * MIXES_PER_SEED
}

/// The runs [`run`] reports to its progress over `seeds` seeds, counted before any runs.
pub fn planned_runs(lab: &dyn Lab, seeds: u64) -> Result<u64, LabError> {
    Ok(runs_over(&canonical_placements(lab, &shapes())?, seeds))
}

/// Run the comparison.
pub fn run(
    lab: &dyn Lab,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<ExperimentResult, LabError> {
    let shapes = shapes();
    let programs = lab.mix_programs();
    if programs.is_empty() {
        return Err(LabError(
            "the catalog offers no programs for random mixes".into(),
        ));
    }
    let canon = canonical_placements(lab, &shapes)?;
    let work: Vec<(usize, u64, u64)> = (0..shapes.len())
        .flat_map(|i| {
            seeds
                .iter()
                .flat_map(move |s| (0..MIXES_PER_SEED).map(move |k| (i, *s, k)))
        })
        .collect();
    progress.add_total(runs_over(&canon, seeds.len() as u64));
    let results: Vec<MixResult> = work
        .par_iter()
        .map(|&(si, seed, k)| {
            let s = &shapes[si];
            let m = mix(&programs, s.tasks, seed, si, k);
            let spec = RunSpec {
                seed,
                epoch_ns: EPOCH_NS,
            };
            // Solo rates: each program alone on the machine, same duration and tick.
            let solo_ips: Vec<f64> = m
                .iter()
                .map(|p| {
                    let o = lab.run_light(
                        &job(s.machine, std::slice::from_ref(p), None),
                        spec,
                        &mut Linux,
                    )?;
                    Ok(ips(&o).first().copied().unwrap_or(0.0))
                })
                .collect::<Result<_, LabError>>()?;
            // The oracle: screen every canonical static placement, confirm the best.
            let mut screened: Vec<(f64, usize)> = canon[si]
                .par_iter()
                .enumerate()
                .map(|(k, pl)| {
                    let o = lab.run_light(
                        &job_for(s.machine, &m, Some(pl), SCREEN_DURATION_NS),
                        spec,
                        &mut Linux,
                    )?;
                    progress.done("oracle placement");
                    Ok((np(&o, &solo_ips)?, k))
                })
                .collect::<Result<_, LabError>>()?;
            screened.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let confirmed: Vec<f64> = screened
                .iter()
                .take(CONFIRM)
                .map(|&(_, k)| {
                    let o =
                        lab.run_light(&job(s.machine, &m, Some(&canon[si][k])), spec, &mut Linux)?;
                    np(&o, &solo_ips)
                })
                .collect::<Result<_, LabError>>()?;
            let oracle_np = confirmed.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let policy_np: Vec<f64> = POLICIES
                .iter()
                .map(|p| {
                    let mut pol = make(p)?;
                    let o = lab.run_light(&job(s.machine, &m, None), spec, pol.as_mut())?;
                    progress.done(p);
                    np(&o, &solo_ips)
                })
                .collect::<Result<_, LabError>>()?;
            Ok(MixResult {
                shape: si,
                mix: m,
                oracle_np,
                placements: canon[si].len(),
                policy_np,
            })
        })
        .collect::<Result<_, LabError>>()?;

    let mut r = ExperimentResult::new(
        "di-vs-oracle",
        "Distributed Intensity vs the best static placement (oracle) on random mixes",
        &format!(
            "{}; {MIXES_PER_SEED} random mixes per seed and shape, the claim judged over the \
             mixes",
            shapes
                .iter()
                .map(|s| format!("{} (`{}`, {} tasks)", s.label, s.machine, s.tasks))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        seeds,
    );
    let mut t = Table::new(
        "Distance from the oracle, 1 - NP/NP_oracle (%; mean ± std over mixes; lower is better)",
        &std::iter::once("machine")
            .chain(std::iter::once("oracle NP"))
            .chain(POLICIES.iter().copied())
            .chain(std::iter::once("placements searched"))
            .collect::<Vec<_>>(),
    );
    let mut all_di = Vec::new();
    for (si, s) in shapes.iter().enumerate() {
        let mine: Vec<&MixResult> = results.iter().filter(|x| x.shape == si).collect();
        let key = |p: &str| format!("{} {p}", s.label);
        r.put(
            &key("oracle"),
            "normalized_performance",
            &mine.iter().map(|x| x.oracle_np).collect::<Vec<_>>(),
        );
        let mut row = vec![
            s.label.to_string(),
            ours_cell(r.get(&key("oracle"), "normalized_performance"), 3),
        ];
        for (pi, p) in POLICIES.iter().enumerate() {
            let nps: Vec<f64> = mine.iter().map(|x| x.policy_np[pi]).collect();
            let dist: Vec<f64> = mine
                .iter()
                .map(|x| 100.0 * (1.0 - x.policy_np[pi] / x.oracle_np))
                .collect();
            if *p == "di" {
                all_di.extend(dist.iter().copied());
            }
            r.put(&key(p), "normalized_performance", &nps);
            let d = r.put(&key(p), "distance_from_oracle_pct", &dist);
            row.push(ours_cell(d, 2));
            // DI's claim judged per machine shape, on the 95 % interval over the mixes.
            if let (true, Some(d)) = (*p == "di", d) {
                let bound = crate::paper::DI_DISTANCE_FROM_ORACLE_PCT;
                let verdict = match d.interval95() {
                    // One mix per shape (a lab that draws one): no interval to judge on.
                    None => crate::summary::UNDECIDED_ONE_SEED,
                    Some((_, hi)) if hi <= bound => "reproduced",
                    Some((lo, _)) if lo > bound => "not reproduced",
                    Some(_) => "not decided (the interval straddles the bound)",
                };
                r.findings.push(format!(
                    "di on {}: {:.2}% [{}] from the oracle ({}: within {bound}%) — {verdict}",
                    s.label,
                    d.mean,
                    distance_ci(&d),
                    crate::paper::DI_SOURCE
                ));
            }
        }
        row.push(
            mine.first()
                .map(|x| x.placements.to_string())
                .unwrap_or_default(),
        );
        t.row(row);
        for x in &mine {
            r.findings.push(format!(
                "{} mix: {} — oracle NP {:.3}; {}",
                s.label,
                x.mix.join(", "),
                x.oracle_np,
                POLICIES
                    .iter()
                    .zip(&x.policy_np)
                    .map(|(p, v)| format!("{p} {v:.3}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    r.tables.push(t);
    r.put_paper(
        "di",
        "distance_from_oracle_pct",
        crate::paper::DI_DISTANCE_FROM_ORACLE_PCT,
    );
    if let Some(d) = crate::Summary::of(&all_di) {
        r.put("di", "distance_from_oracle_pct", &all_di);
        r.findings.insert(
            0,
            format!(
                "di over all mixes: {}% from the oracle ({}: within {}%) — {} (the verdicts \
                 per machine shape below are the ones that count)",
                match d.std {
                    Some(std) => format!("{:.2}% ± {std:.2}", d.mean),
                    None => format!("{:.2}", d.mean),
                },
                crate::paper::DI_SOURCE,
                crate::paper::DI_DISTANCE_FROM_ORACLE_PCT,
                match d.interval95() {
                    None => "undecided on average: one mix",
                    Some((_, hi)) if hi <= crate::paper::DI_DISTANCE_FROM_ORACLE_PCT => {
                        "reproduced on average"
                    }
                    Some((lo, _)) if lo > crate::paper::DI_DISTANCE_FROM_ORACLE_PCT => {
                        "not reproduced on average"
                    }
                    Some(_) => "not decided on average",
                }
            ),
        );
    }
    // No mix came out ahead of the oracle: the bars' intervals stop at 0 too (they reached
    // -0.76, and the axis went to -0.5 and below, for distances none of which is negative).
    let smallest = r
        .policies
        .values()
        .filter_map(|m| m.get("distance_from_oracle_pct"))
        .map(|e| e.min)
        .fold(f64::INFINITY, f64::min);
    if smallest >= 0.0 {
        r.figure_options.insert(
            "di-vs-oracle.svg".into(),
            crate::result::FigureOptions {
                floor: Some(0.0),
                ..Default::default()
            },
        );
    }
    r.figures.push(BarFigure {
        file: "di-vs-oracle.svg".into(),
        title: "Distance from the oracle (%)".into(),
        y_label: "1 - NP/NP_oracle (%)".into(),
        categories: shapes.iter().map(|s| s.label.to_string()).collect(),
        series: POLICIES
            .iter()
            .map(|p| BarSeries {
                name: p.to_string(),
                values: shapes
                    .iter()
                    .map(|s| {
                        r.get(&format!("{} {p}", s.label), "distance_from_oracle_pct")
                            .map(|v| v.mean)
                    })
                    .collect(),
                errors: shapes
                    .iter()
                    .map(|s| {
                        r.get(&format!("{} {p}", s.label), "distance_from_oracle_pct")
                            .and_then(|v| v.half_width95())
                    })
                    .collect(),
            })
            .collect(),
    });
    Ok(r)
}

/// A distance's 95 % interval as the findings show it: the t interval, its lower end clamped at
/// 0 when it falls below 0 and no mix was below 0, and said so. The distance can be negative (a
/// dynamic policy may beat the best static placement), but none of these mixes did, and the
/// symmetric t interval over a few skewed distances reached below all of them (SMP bus: 1.55 %
/// [-0.44, 3.54] over distances from 0.04 to 3.42; report audit, session 29). The verdicts read
/// the upper end only, so the clamp changes none.
fn distance_ci(d: &crate::Summary) -> String {
    match d.interval95() {
        Some((lo, hi)) if lo < 0.0 && d.min >= 0.0 && !d.all_seeds_equal() => format!(
            "95 % CI 0.00, {hi:.2}; the t interval's lower end, {lo:.2}, shown clamped at 0: \
             no mix came out ahead of the oracle"
        ),
        _ => d.show_ci(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_are_seeded_and_distinct() {
        let progs: Vec<String> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let m1 = mix(&progs, 4, 7, 0, 0);
        assert_eq!(m1, mix(&progs, 4, 7, 0, 0));
        assert_ne!(m1, mix(&progs, 4, 8, 0, 0));
        // A seed's mixes differ from each other and from the next seed's first.
        let seeds_mixes: Vec<Vec<String>> = (0..MIXES_PER_SEED)
            .map(|k| mix(&progs, 4, 7, 0, k))
            .chain([mix(&progs, 4, 8, 0, 0)])
            .collect();
        for a in 0..seeds_mixes.len() {
            for b in a + 1..seeds_mixes.len() {
                assert_ne!(seeds_mixes[a], seeds_mixes[b], "mixes {a} and {b}");
            }
        }
        let mut d = m1.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 4);
        assert_eq!(mix(&progs[..2], 3, 1, 0, 0).len(), 3);
    }

    #[test]
    fn a_distance_interval_stops_at_zero_when_no_mix_was_below() {
        let skewed = crate::Summary::of(&[0.04, 0.2, 0.5, 1.6, 3.42]).unwrap();
        assert!(skewed.interval95().unwrap().0 < 0.0);
        let shown = distance_ci(&skewed);
        assert!(
            shown.starts_with(
                "95 % CI 0.00, 2.90; the t interval's lower end, -0.59, shown clamped"
            ),
            "{shown}"
        );
        // A mix ahead of the oracle: the interval as it is.
        let ahead = crate::Summary::of(&[-0.3, 0.2, 0.5, 1.6, 3.42]).unwrap();
        assert_eq!(distance_ci(&ahead), ahead.show_ci(2));
        // Above zero already: nothing to clamp.
        let tight = crate::Summary::of(&[1.0, 1.1, 1.2]).unwrap();
        assert_eq!(distance_ci(&tight), tight.show_ci(2));
    }

    #[test]
    fn one_seed_judges_each_shape_over_its_mixes() {
        // Every mix cut to 0.2 s of simulated time: the verdicts' plumbing, not the figures.
        let lab = crate::lab::ShortLab {
            lab: crate::sim_lab::SimLab::new().expect("the built-in catalog loads"),
            cap_ns: 200_000_000,
        };
        let r = run(&lab, &[7], &crate::progress::NoProgress).expect("runs");
        let per_shape: Vec<&String> = r
            .findings
            .iter()
            .filter(|f| f.starts_with("di on "))
            .collect();
        assert_eq!(per_shape.len(), shapes().len());
        for f in per_shape {
            // Four mixes per shape from one seed: an interval, and a verdict on it.
            assert!(
                f.contains("95 % CI") || f.contains("all 4 seeds equal"),
                "{f}"
            );
            assert!(!f.contains("one seed"), "{f}");
        }
        let j = serde_json::to_value(&r).expect("json");
        let d = &j["policies"]["SMP bus di"]["distance_from_oracle_pct"];
        assert_eq!(d["n"], MIXES_PER_SEED);
        assert!(d["std"].is_number(), "{d}");
        assert_eq!(
            j["policies"]["di"]["distance_from_oracle_pct"]["n"],
            3 * MIXES_PER_SEED
        );
    }
}
