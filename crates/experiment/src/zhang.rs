//! `zhang-spec` and `zhang-server`: Zhang et al. HotOS'07 §2.1 and §3 on the 2-CPU bus-sharing
//! SMP. Every policy in both forms — kernel level (pick-next hook, the paper's) and user space
//! (affinity-only epoch policy) — plus the counter-collection-share sweep of Figures 4/5 for
//! the kernel-level bus-pair scheduler.

use crate::lab::{Job, Lab, LabError, RunSpec};
use crate::progress::Progress;
use crate::result::{ours_cell, paper_cell, BarFigure, BarSeries, ExperimentResult, Table};
use counterpoint_core::machine::{PickNext, Policy};
use counterpoint_policy::{ComplementPick, Linux, LinuxPick, Multiplexed, PairingPolicy};
use rayon::prelude::*;

/// One of the two Zhang workloads.
#[derive(Clone, Debug)]
pub struct ZhangSetup {
    pub experiment: &'static str,
    pub title: &'static str,
    /// Catalog scenario.
    pub scenario: &'static str,
    pub machine: &'static str,
    /// (policy, normalized performance, unfairness) as published.
    pub paper: [(&'static str, f64, f64); 3],
    /// Counter-collection share the paper found sufficient.
    pub paper_share: f64,
    pub epoch_ns: u64,
}

pub const SPEC: ZhangSetup = ZhangSetup {
    experiment: "zhang-spec",
    title: "Zhang et al.: SPEC-CPU2000 mix on a 2-CPU bus-sharing SMP",
    scenario: "zhang-spec",
    machine: "2-CPU SMP, one shared memory bus (catalog scenario `zhang-spec`)",
    paper: [
        ("linux", 0.818, 0.178),
        ("ipc-pair", 0.829, 0.164),
        ("bus-pair", 0.883, 0.074),
    ],
    paper_share: 0.05,
    epoch_ns: 100_000_000,
};

pub const SERVER: ZhangSetup = ZhangSetup {
    experiment: "zhang-server",
    title: "Zhang et al.: web-clip + TPC-H servers on a 2-CPU bus-sharing SMP",
    scenario: "zhang-server",
    machine: "2-CPU SMP, one shared memory bus (catalog scenario `zhang-server`)",
    paper: [
        ("linux", 0.894, 0.118),
        ("ipc-pair", 0.951, 0.025),
        ("bus-pair", 0.952, 0.024),
    ],
    paper_share: 0.33,
    epoch_ns: 100_000_000,
};

/// NP differences below this are reported as noise rather than as gains.
const NOISE_NP: f64 = 0.01;

/// Counter-collection shares swept for the bus-pair hook (Figures 4 and 5).
pub const SHARES: [f64; 4] = [0.01, 0.05, 0.33, 1.0];

/// A fresh epoch policy and pick-next hook for one run.
type Pair = (Box<dyn Policy + Send>, Box<dyn PickNext + Send>);

/// A policy configuration: epoch policy + pick-next hook.
struct Config {
    key: String,
    /// Builds the pair for a run; the argument is the run's seed.
    make: Box<dyn Fn(u64) -> Pair + Sync>,
}

fn configs() -> Vec<Config> {
    let mut v: Vec<Config> = vec![
        Config {
            key: "linux".into(),
            make: Box::new(|_| (Box::new(Linux), Box::new(LinuxPick))),
        },
        Config {
            key: "ipc-pair".into(),
            make: Box::new(|_| (Box::new(Linux), Box::new(ComplementPick::ipc()))),
        },
        Config {
            key: "bus-pair".into(),
            make: Box::new(|_| (Box::new(Linux), Box::new(ComplementPick::bus()))),
        },
        Config {
            key: "ipc-pair-user".into(),
            make: Box::new(|_| (Box::new(PairingPolicy::ipc()), Box::new(LinuxPick))),
        },
        Config {
            key: "bus-pair-user".into(),
            make: Box::new(|_| (Box::new(PairingPolicy::bus()), Box::new(LinuxPick))),
        },
    ];
    for share in SHARES.into_iter().filter(|s| *s < 1.0) {
        v.push(Config {
            key: share_key(share),
            make: Box::new(move |seed| {
                (
                    Box::new(Linux),
                    Box::new(Multiplexed::new(ComplementPick::bus(), share).with_salt(seed)),
                )
            }),
        });
    }
    v
}

fn share_key(share: f64) -> String {
    if share >= 1.0 {
        "bus-pair".to_string()
    } else {
        format!("bus-pair@{}%", (share * 100.0).round() as u32)
    }
}

/// Run one Zhang experiment over `seeds`.
pub fn run(
    lab: &dyn Lab,
    setup: &ZhangSetup,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<ExperimentResult, LabError> {
    let job = Job::Scenario(setup.scenario.to_string());
    let configs = configs();
    let work: Vec<(usize, u64)> = (0..configs.len())
        .flat_map(|c| seeds.iter().map(move |s| (c, *s)))
        .collect();
    progress.add_total(work.len() as u64);
    let outcomes: Vec<(usize, u64, (f64, f64))> = work
        .par_iter()
        .map(|&(c, seed)| {
            let (mut policy, mut pick) = (configs[c].make)(seed);
            let spec = RunSpec {
                seed,
                epoch_ns: setup.epoch_ns,
            };
            let out = lab.run(&job, spec, policy.as_mut(), pick.as_mut())?;
            let m = out.system().ok_or_else(|| {
                LabError(format!(
                    "{} / {} seed {seed}: no normalized performance",
                    setup.experiment, configs[c].key
                ))
            })?;
            progress.done(&configs[c].key);
            Ok((c, seed, (m.normalized_performance, m.unfairness)))
        })
        .collect::<Result<_, LabError>>()?;

    let mut r = ExperimentResult::new(setup.experiment, setup.title, setup.machine, seeds);
    for (c, cfg) in configs.iter().enumerate() {
        let np: Vec<f64> = outcomes
            .iter()
            .filter(|o| o.0 == c)
            .map(|o| o.2 .0)
            .collect();
        let unf: Vec<f64> = outcomes
            .iter()
            .filter(|o| o.0 == c)
            .map(|o| o.2 .1)
            .collect();
        r.put(&cfg.key, "normalized_performance", &np);
        r.put(&cfg.key, "unfairness", &unf);
    }
    for (p, np, unf) in setup.paper {
        r.put_paper(p, "normalized_performance", np);
        r.put_paper(p, "unfairness", unf);
    }
    tables_and_findings(&mut r, setup);
    Ok(r)
}

fn tables_and_findings(r: &mut ExperimentResult, setup: &ZhangSetup) {
    const NP: &str = "normalized_performance";
    const UNF: &str = "unfairness";
    let mut t = Table::new(
        "Kernel-level schedulers (pick-next at every context switch), ours vs paper",
        &[
            "policy",
            "normalized performance",
            "paper",
            "Δ",
            "unfairness",
            "paper",
            "Δ",
        ],
    );
    for (p, _, _) in setup.paper {
        let np = r.get(p, NP);
        let unf = r.get(p, UNF);
        let pnp = r.paper_value(p, NP);
        let punf = r.paper_value(p, UNF);
        let delta = |a: Option<crate::Summary>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:+.3}", a.mean - b),
            _ => "—".into(),
        };
        t.row(vec![
            p.to_string(),
            ours_cell(np, 3),
            paper_cell(pnp, 3),
            delta(np, pnp),
            ours_cell(unf, 3),
            paper_cell(punf, 3),
            delta(unf, punf),
        ]);
    }
    r.tables.push(t);

    let mut g = Table::new(
        "Kernel level (pick-next) vs user space (affinity every epoch): the gap",
        &[
            "policy",
            "NP kernel",
            "NP user space",
            "NP gap",
            "unfairness kernel",
            "unfairness user space",
        ],
    );
    for p in ["ipc-pair", "bus-pair"] {
        let user = format!("{p}-user");
        let (k, u) = (r.get(p, NP), r.get(&user, NP));
        let gap = match (k, u) {
            (Some(k), Some(u)) => format!("{:+.3}", k.mean - u.mean),
            _ => "—".into(),
        };
        g.row(vec![
            p.to_string(),
            ours_cell(k, 3),
            ours_cell(u, 3),
            gap,
            ours_cell(r.get(p, UNF), 3),
            ours_cell(r.get(&user, UNF), 3),
        ]);
    }
    r.tables.push(g);

    let mut s = Table::new(
        "Counter-collection share for the kernel-level bus-pair scheduler (Figures 4/5)",
        &[
            "share of counter time",
            "normalized performance",
            "unfairness",
        ],
    );
    for share in SHARES {
        let k = share_key(share);
        s.row(vec![
            format!("{}%", (share * 100.0).round() as u32),
            ours_cell(r.get(&k, NP), 3),
            ours_cell(r.get(&k, UNF), 3),
        ]);
    }
    r.tables.push(s);

    // Figure: NP and unfairness, ours vs paper.
    let cats: Vec<String> = setup.paper.iter().map(|p| p.0.to_string()).collect();
    for (metric, label, file) in [
        (NP, "normalized performance", "np"),
        (UNF, "unfairness", "unfairness"),
    ] {
        r.figures.push(BarFigure {
            file: format!("{}-{file}.svg", setup.experiment),
            title: format!("{}: {label}", setup.experiment),
            y_label: label.to_string(),
            categories: cats.clone(),
            series: vec![
                BarSeries {
                    name: "ours (kernel level)".into(),
                    values: cats
                        .iter()
                        .map(|c| r.get(c, metric).map(|s| s.mean))
                        .collect(),
                    errors: cats
                        .iter()
                        .map(|c| r.get(c, metric).map(|s| s.std))
                        .collect(),
                },
                BarSeries {
                    name: "ours (user space)".into(),
                    values: cats
                        .iter()
                        .map(|c| {
                            let key = if c == "linux" {
                                c.clone()
                            } else {
                                format!("{c}-user")
                            };
                            r.get(&key, metric).map(|s| s.mean)
                        })
                        .collect(),
                    errors: cats
                        .iter()
                        .map(|c| {
                            let key = if c == "linux" {
                                c.clone()
                            } else {
                                format!("{c}-user")
                            };
                            r.get(&key, metric).map(|s| s.std)
                        })
                        .collect(),
                },
                BarSeries {
                    name: "paper".into(),
                    values: cats.iter().map(|c| r.paper_value(c, metric)).collect(),
                    errors: vec![None; cats.len()],
                },
            ],
        });
    }

    // Findings, computed from the numbers.
    for (p, pnp, punf) in setup.paper {
        if let (Some(np), Some(unf)) = (r.get(p, NP), r.get(p, UNF)) {
            let ok = (np.mean - pnp).abs() <= 0.03 && (unf.mean - punf).abs() <= 0.03;
            r.findings.push(format!(
                "{p}: NP {:.3} vs {pnp:.3} ({:+.3}), unfairness {:.3} vs {punf:.3} ({:+.3}) — {}",
                np.mean,
                np.mean - pnp,
                unf.mean,
                unf.mean - punf,
                if ok {
                    "within ±0.03 of the paper"
                } else {
                    "NOT within ±0.03 of the paper"
                }
            ));
        }
    }
    let mut findings = Vec::new();
    let get = |p: &str, m: &str| r.get(p, m).map(|s| s.mean);
    if let (Some(b), Some(l), Some(i), Some(bu), Some(lu), Some(iu)) = (
        get("bus-pair", NP),
        get("linux", NP),
        get("ipc-pair", NP),
        get("bus-pair", UNF),
        get("linux", UNF),
        get("ipc-pair", UNF),
    ) {
        findings.push(format!(
            "bus-pair vs linux and ipc-pair: NP {} ({:.3} vs {:.3} / {:.3}), unfairness {} \
             ({:.3} vs {:.3} / {:.3}); the paper's ordering is bus-pair best on both",
            if b > l && b > i { "best" } else { "not best" },
            b,
            l,
            i,
            if bu < lu && bu < iu {
                "lowest"
            } else {
                "not lowest"
            },
            bu,
            lu,
            iu
        ));
    }
    for p in ["ipc-pair", "bus-pair"] {
        if let (Some(k), Some(u), Some(l)) =
            (get(p, NP), get(&format!("{p}-user"), NP), get("linux", NP))
        {
            let kernel_gain = k - l;
            let user_gain = u - l;
            // Below one hundredth of NP the ratio is noise, not a result.
            let kept = if kernel_gain.abs() >= NOISE_NP {
                format!(
                    "user space keeps {:.0}% of the kernel-level gain",
                    100.0 * user_gain / kernel_gain
                )
            } else {
                "the kernel-level gain is below 0.01, too small to compare".into()
            };
            findings.push(format!(
                "{p} kernel level vs user space: NP {k:.3} vs {u:.3} (gain over linux {:+.3} vs \
                 {:+.3}; {kept})",
                kernel_gain, user_gain
            ));
        }
    }
    let share_np: Vec<(f64, f64)> = SHARES
        .iter()
        .filter_map(|s| get(&share_key(*s), NP).map(|v| (*s, v)))
        .collect();
    if let Some(&(_, full)) = share_np.last() {
        if let Some(l) = get("linux", NP) {
            if full - l < NOISE_NP {
                findings.push(format!(
                    "counter-collection share: the full-share NP gain ({:+.3}) is below 0.01, \
                     so no share threshold can be read (paper: about {:.0}%)",
                    full - l,
                    setup.paper_share * 100.0
                ));
            } else {
                let enough = share_np
                    .iter()
                    .find(|(_, v)| (full - v) <= 0.1 * (full - l))
                    .map(|(s, _)| format!("{:.0}%", s * 100.0))
                    .unwrap_or_else(|| "100%".into());
                findings.push(format!(
                    "counter-collection share reaching 90% of the full-share NP gain: {enough} \
                     (paper: about {:.0}%)",
                    setup.paper_share * 100.0
                ));
            }
        }
    }
    r.findings.extend(findings);
}
