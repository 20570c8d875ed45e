//! `masa-placement`: Tables 1 and 2, static placements of INT with FP or L2C programs on the
//! dual Xeon with HT on and off (pinned baseline runs, the calibration targets).

use super::*;

/// One placement row of Tables 1/2: which program on which package, HT on or off.
pub(super) struct Placement {
    label: &'static str,
    ht: bool,
    /// Programs of package 0, then of package 1 ("(INT, FP) (INT, FP)").
    pkg: [[&'static str; 2]; 2],
    /// Paper's per-program times (INT, INT, other, other) and total.
    paper: [f64; 5],
}

/// The placements of Table 1 (`other` = FP) or 2 (L2C); the published times come from
/// [`paper::MASA_TABLES`] (calibration targets).
pub(super) fn table(other: &'static str) -> Vec<Placement> {
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

pub(super) fn machine(ht: bool) -> String {
    if ht { MACHINE } else { MACHINE_HT_OFF }.to_string()
}

pub(super) fn topology_of(lab: &dyn Lab, ht: bool) -> Result<Topology, LabError> {
    lab.topology(&Job::Custom {
        machine: machine(ht),
        tasks: vec![],
        duration_ns: 1,
        tick_ns: None,
    })
}

/// Per package, the CPUs programs are bound to: with HT one logical CPU each; without HT both
/// programs of a package share its one CPU (time-shared, as in the paper's "[ ]" rows).
pub(super) fn placement_job(lab: &dyn Lab, p: &Placement) -> Result<(Job, Vec<String>), LabError> {
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

pub(super) fn seconds(ns: Option<u64>) -> Option<f64> {
    ns.map(|n| n as f64 / 1e9)
}

pub(super) fn run_baseline(lab: &dyn Lab, job: &Job, seed: u64) -> Result<Outcome, LabError> {
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

/// The runs [`placement`] reports to its progress over `seeds` seeds: every row of both tables,
/// once per seed.
pub fn placement_runs(seeds: u64) -> u64 {
    (table(FP).len() + table(L2C).len()) as u64 * seeds
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
            "catalog machine `{MACHINE}` (2 packages x 1 core x 2 threads; HT off = 1 thread); \
             programs repeat for the whole run, and a program's time to complete is its \
             instructions at its average rate"
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
                            // The 95 % interval of the mean, as every figure draws it.
                            r.get(&format!("table{tn} {}", p.label), "total_time_s")
                                .and_then(|s| s.half_width95())
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
    }
}
