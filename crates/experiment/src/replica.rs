//! `experiment replica`: seed 001 (Döbel & Härtig) — where to put the replicas of a
//! triple-modular-redundant program on a two-socket Xeon X5650.
//!
//! The seed gives two opposite rules: notifications are cheaper close by (~6,000 cycles on a
//! socket, ~14,300 across), so *prefer one socket*; replicas sharing an L3 multiply its misses,
//! so *prefer different sockets*. On the simulated `x5650-2s` (replicated execution of
//! `counterpoint_sim::replica`: the cache side from the engine, the meetings drawn per seed):
//!
//! 1. the seed's miss table: L3 misses of two and three replicas on one socket, and of three
//!    spread, for mcf, libquantum and omnetpp, beside the seed's counts;
//! 2. the crossover map over meeting rate x LLC pressure: which placement wins where, and the
//!    meeting interval at which the two cost the same;
//! 3. the `replica` policy (from the registry, driven epoch by epoch on observations built from
//!    the model, starting from one socket on odd seeds and spread on even ones, its learning
//!    epochs charged) against always-one-socket and always-spread, over SPEC INT 2006-like
//!    programs and points of the map.
//!
//! Seeds draw the number of meetings of each run (Poisson) and the policy's starting placement.

use crate::progress::Progress;
use crate::result::{BarFigure, BarSeries, ExperimentResult, Table};
use crate::summary::Summary;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::event;
use counterpoint_core::machine::Policy;
use counterpoint_core::observation::{Observation, TaskObservation};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_core::task::TaskId;
use counterpoint_core::topology::Topology;
use counterpoint_policy::registry::{self, Built, Context};
use counterpoint_policy::replica::Replica as ReplicaPolicy;
use counterpoint_sim::catalog::knee_curve;
use counterpoint_sim::replica::{
    self, ComputeResult, NotifyCosts, PlacementKind, ReplicaOutcome, ReplicaRun, RunLengths,
};
use counterpoint_sim::{Catalog, Model, Phase, Profile, Program};
use rayon::prelude::*;
use std::collections::BTreeMap;

/// The seed's platform in the catalog.
pub const MACHINE: &str = "x5650-2s";
/// Triple modular redundancy, as in the seed's tables.
pub const REPLICAS: usize = 3;
/// Instructions of one replicated run (meetings are drawn over these).
pub const RUN_INSTRUCTIONS: f64 = 1e11;
/// Epochs of a policy run; the first ones are spent where the policy found or put the group.
pub const EPOCHS: usize = 50;
/// Meeting intervals of the crossover map (instructions).
pub const SYNC_EVERY: &[f64] = &[1e4, 3e4, 1e5, 3e5, 1e6, 1e7];
/// LLC accesses per kilo-instruction of the map's synthetic program (a 5 MB working set: fits
/// half an L3, not a third).
pub const MAP_APKI: &[f64] = &[0.1, 0.3, 1.0, 3.0, 10.0, 30.0];

/// Seed 001's L3 miss counts (its "secondary effects" slides): (program, two replicas, three
/// replicas, three replicas on different sockets).
pub const SEED_L3_MISSES: &[(&str, f64, f64, f64)] = &[
    ("429.mcf", 1_300_000.0, 5_200_000.0, 3_600_000.0),
    ("462.libquantum", 570.0, 387_000.0, 8_700.0),
    ("471.omnetpp", 6_900_000.0, 21_200_000.0, 16_400_000.0),
];

fn synthetic(apki: f64) -> Program {
    let name = format!("synthetic-5MB-apki{apki}");
    Program {
        name: name.clone(),
        phases: vec![Phase {
            instructions: 1_000_000_000_000,
            profile: Profile {
                cpi_core: 0.8,
                llc_apki: apki,
                miss_curve: knee_curve(5.0 * 1024.0 * 1024.0, 0.01),
                mlp: 1.5,
                fp_fraction: 0.0,
                code_pages: 0,
                v2: None,
            },
        }],
    }
}

/// Compute results of one program: alone, and under each placement (engine runs, no seed).
#[derive(Clone, Debug)]
struct Computed {
    native: ComputeResult,
    placed: BTreeMap<PlacementKind, (Vec<u32>, ComputeResult)>,
}

fn computed(run: &ReplicaRun<'_>, program: &str) -> Result<Computed, String> {
    let native = run.native(program).map_err(|e| e.to_string())?;
    let mut placed = BTreeMap::new();
    for k in [PlacementKind::SameSocket, PlacementKind::Spread] {
        placed.insert(k, run.replicated(program, k).map_err(|e| e.to_string())?);
    }
    Ok(Computed { native, placed })
}

fn outcome(
    t: &Topology,
    c: &Computed,
    costs: &NotifyCosts,
    k: PlacementKind,
    sync_every: f64,
    seed: u64,
) -> ReplicaOutcome {
    let (cpus, rep) = &c.placed[&k];
    replica::combine(
        t,
        k,
        cpus,
        &c.native,
        rep,
        costs,
        sync_every,
        RUN_INSTRUCTIONS,
        seed,
    )
}

/// One epoch's observation of a group as the live agent would see it: per replica, its CPU,
/// one second of task-clock, instructions at the replicated rate, LLC misses, and one context
/// switch per meeting (a replica blocks at each).
pub fn observation(name: &str, o: &ReplicaOutcome, freq_ghz: f64, epoch: usize) -> Observation {
    let ns: u64 = 1_000_000_000;
    let syncs_per_instr = o.syncs as f64 / RUN_INSTRUCTIONS;
    let cycles_per_instr = o.replica_cpi + syncs_per_instr * o.sync_cycles;
    let ips = freq_ghz * 1e9 / cycles_per_instr;
    let tasks = o
        .cpus
        .iter()
        .enumerate()
        .map(|(i, &cpu)| {
            let mut s = Sample::new(Some(TaskId(i as u64 + 1)), ns);
            let mut put = |e: &str, v: f64| s.set(e, CounterValue::exact(v.round() as u64, ns));
            put(event::TASK_CLOCK, ns as f64);
            put(event::INSTRUCTIONS, ips);
            put(event::CACHE_MISSES, ips * o.replica_llc_mpki / 1000.0);
            put(event::CONTEXT_SWITCHES, ips * syncs_per_instr);
            TaskObservation {
                id: TaskId(i as u64 + 1),
                name: name.to_string(),
                affinity: CpuSet::single(cpu),
                cpu: Some(cpu),
                sample: s,
                runnable: true,
                finished: false,
                code: None,
            }
        })
        .collect();
    Observation {
        time_ns: (epoch as u64 + 1) * ns,
        interval_ns: ns,
        tasks,
        cpus: vec![],
        memory_utilization: vec![],
    }
}

/// Where a group is after `actions` (tasks without an action stay where they ran).
fn placement_after(t: &Topology, obs: &Observation, actions: &[Action]) -> PlacementKind {
    let mut pkgs = Vec::new();
    for task in &obs.tasks {
        let set = actions
            .iter()
            .find_map(|a| match a {
                Action::SetAffinity { task: id, cpus } if *id == task.id => Some(cpus.clone()),
                _ => None,
            })
            .unwrap_or_else(|| task.affinity.clone());
        let p: Vec<Option<u32>> = set
            .iter()
            .map(|c| t.cpu(c).and_then(|x| x.package))
            .collect();
        pkgs.push(p.first().copied().flatten());
    }
    if pkgs.windows(2).all(|w| w[0] == w[1]) {
        PlacementKind::SameSocket
    } else {
        PlacementKind::Spread
    }
}

/// The policy's run: epochs of observe → decide → move; returns the mean overhead over the
/// epochs (each epoch in the placement it ran in) and the final placement.
fn policy_run(
    t: &Topology,
    c: &Computed,
    costs: &NotifyCosts,
    name: &str,
    sync_every: f64,
    freq_ghz: f64,
    seed: u64,
) -> Result<(f64, PlacementKind), String> {
    // The registry's `replica` (seed 001's costs) unless the costs differ: then the same
    // policy told the costs it runs with.
    let near_ns = costs.same_package_cycles / freq_ghz;
    let far_ns = costs.other_package_cycles / freq_ghz;
    let mut p: Box<dyn Policy> = if *costs == NotifyCosts::seed_x5650() {
        match registry::build("replica", &mut Context::default()).map_err(|e| e.to_string())? {
            Built::Epoch(p) => p,
            Built::PickNext(_) => return Err("replica is not an epoch-level policy".into()),
        }
    } else {
        Box::new(ReplicaPolicy::with_notify_ns(near_ns, far_ns))
    };
    let mut at = if seed % 2 == 1 {
        PlacementKind::SameSocket
    } else {
        PlacementKind::Spread
    };
    let mut sum = 0.0;
    for e in 0..EPOCHS {
        let o = outcome(
            t,
            c,
            costs,
            at,
            sync_every,
            seed.wrapping_mul(1000) + e as u64,
        );
        sum += o.overhead;
        let obs = observation(name, &o, freq_ghz, e);
        let actions = p.decide(t, &obs);
        at = placement_after(t, &obs, &actions);
    }
    Ok((sum / EPOCHS as f64, at))
}

fn pct(s: &Summary) -> String {
    s.scaled(100.0).show(2)
}

fn diff_cell(v: &[f64]) -> (String, Option<Summary>) {
    match Summary::of(v) {
        Some(s) => (
            format!(
                "{} ({})",
                s.scaled(100.0).show_interval(2),
                s.verdict().label()
            ),
            Some(s),
        ),
        None => ("—".into(), None),
    }
}

/// Notification costs from a `bench c2c --json` document, in cycles of [`MACHINE`]'s clock.
/// A group must have measured at least one pair: `"pairs": 0` (which `bench c2c` never
/// writes) gave costs from a median over nothing (CLI probe, session 29).
pub fn costs_from_c2c(text: &str, file: &str) -> Result<NotifyCosts, String> {
    let spec = Catalog::builtin()
        .machine(MACHINE)
        .ok_or_else(|| format!("no machine {MACHINE}"))?;
    check_c2c_pairs(text, file)?;
    NotifyCosts::from_c2c_json(text, file, spec.freq_ghz).map_err(|e| e.to_string())
}

/// Refuses a group whose `pairs` is present and not a whole number of at least one, naming
/// the file, the group and the field. A document that is not JSON, or has no groups, is left
/// to [`NotifyCosts::from_c2c_json`], which says what is wrong with it.
fn check_c2c_pairs(text: &str, file: &str) -> Result<(), String> {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    let Some(groups) = doc.get("groups").and_then(|g| g.as_array()) else {
        return Ok(());
    };
    for (k, g) in groups.iter().enumerate() {
        let Some(pairs) = g.get("pairs") else {
            continue;
        };
        if pairs.as_u64().is_some_and(|n| n >= 1) {
            continue;
        }
        let distance = g
            .get("distance")
            .and_then(|d| d.as_str())
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        return Err(format!(
            "{file}: not a `counterpoint bench c2c --json` document: groups[{k}]{distance}.pairs = \
             {pairs}: a group's medians are over its CPU pairs, at least one"
        ));
    }
    Ok(())
}

/// The experiment over `seeds` with seed 001's notification costs, under `model` (None: the
/// machine's own, v1).
pub fn run(
    seeds: &[u64],
    progress: &dyn Progress,
    model: Option<Model>,
) -> Result<ExperimentResult, String> {
    let costs = NotifyCosts::for_machine(MACHINE).ok_or("no notification costs for x5650-2s")?;
    run_with(seeds, progress, costs, model)
}

/// The runs [`run_with`] reports to its progress, whatever the seeds: one per SPEC program and
/// per synthetic program of the crossover map, and the policy runs.
pub fn planned_runs() -> u64 {
    (replica::spec_int_2006().len() + MAP_APKI.len()) as u64 + 1
}

/// The experiment with other notification costs (e.g. [`costs_from_c2c`]): the machine's shape
/// and caches stay the X5650's. `model` forces the engine's physics for the compute side (None:
/// the machine's own).
pub fn run_with(
    seeds: &[u64],
    progress: &dyn Progress,
    costs: NotifyCosts,
    model: Option<Model>,
) -> Result<ExperimentResult, String> {
    let mut catalog = Catalog::builtin();
    if let Some(model) = model {
        let mut m = catalog
            .machine(MACHINE)
            .ok_or_else(|| format!("no machine {MACHINE}"))?;
        m.model = model;
        catalog.set_machine(m);
    }
    for &a in MAP_APKI {
        catalog.set_program(synthetic(a));
    }
    let run3 = ReplicaRun {
        catalog: &catalog,
        machine: MACHINE,
        costs: &costs,
        replicas: REPLICAS,
        lengths: RunLengths::default(),
        instructions: RUN_INSTRUCTIONS,
    };
    let (spec, t) = run3.machine().map_err(|e| e.to_string())?;
    let freq = spec.freq_ghz;
    let spec_progs = replica::spec_int_2006();
    let map_progs: Vec<String> = MAP_APKI.iter().map(|&a| synthetic(a).name).collect();
    let mut names: Vec<String> = spec_progs.iter().map(|p| p.program.clone()).collect();
    names.extend(map_progs.iter().cloned());
    debug_assert_eq!(names.len() as u64 + 1, planned_runs());
    progress.add_total(planned_runs());
    let done: Vec<Result<(String, Computed), String>> = names
        .par_iter()
        .map(|n| {
            let c = computed(&run3, n);
            progress.done(&format!("replica: {n}"));
            c.map(|c| (n.clone(), c))
        })
        .collect();
    let mut comp = BTreeMap::new();
    for d in done {
        let (n, c) = d?;
        comp.insert(n, c);
    }
    let mut r = ExperimentResult::new(
        "replica",
        "Replica placement (seed 001): notification cost against shared-cache misses",
        &format!(
            "catalog machine `{MACHINE}` (2 x Xeon X5650: 6 cores x 2 threads, 12 MB L3 per \
             socket, {freq} GHz); {REPLICAS} replicas, one per core; notifications {} / {} / \
             {} cycles (same core / socket / across; {}{}) + {} cycles state comparison; \
             meetings Poisson over {RUN_INSTRUCTIONS:e} instructions",
            costs.smt_sibling_cycles.round(),
            costs.same_package_cycles.round(),
            costs.other_package_cycles.round(),
            costs.source,
            if costs.assumed.is_empty() {
                String::new()
            } else {
                format!(
                    "; not measured there, assumed from the nearest distance: {}",
                    costs
                        .assumed
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            replica::COMPARE_CYCLES
        ),
        seeds,
    );
    // Said here, not only by `crate::run`: `--c2c` calls this directly (its text said
    // `model: `, its report "not recorded"; CLI probe, session 29).
    let ran = model.unwrap_or(catalog.machine(MACHINE).map_or(Model::V1, |m| m.model));
    r.model = crate::model_label("replica", model, &[ran].into());

    // 1. The seed's miss table.
    let run2 = ReplicaRun {
        replicas: 2,
        ..run3.clone()
    };
    let mut miss = Table::new(
        "L3 misses per kilo-instruction per replica: two and three replicas on one socket, three \
         spread (model) beside seed 001's L3 miss counts (different units: compare the ratios; \
         the seed's counts are taken as totals over the replicas, so the model's 3/2 ratio is \
         1.5 x its per-replica ratio)",
        &[
            "program",
            "alone",
            "2 on one socket",
            "3 on one socket",
            "3 spread",
            "3/2 ratio (seed)",
            "spread/one-socket ratio (seed)",
        ],
    );
    for &(p, s2, s3, s3x) in SEED_L3_MISSES {
        let (_, two) = run2
            .replicated(p, PlacementKind::SameSocket)
            .map_err(|e| e.to_string())?;
        let c = &comp[p];
        let m = |x: &ComputeResult| x.llc_mpki.iter().sum::<f64>() / x.llc_mpki.len() as f64;
        let (m2, m3, m3x) = (
            m(&two),
            m(&c.placed[&PlacementKind::SameSocket].1),
            m(&c.placed[&PlacementKind::Spread].1),
        );
        let basis = if p == "462.libquantum" {
            // Its working set was chosen from this very table (docs/sim-catalog.md).
            crate::paper::Basis::Calibrated
        } else {
            crate::paper::Basis::Predicted
        };
        // Totals over the same work: 3 replicas do 1.5x the work of 2.
        miss.row_with(
            basis,
            vec![
                p.into(),
                format!("{:.3}", m(&c.native)),
                format!("{m2:.3}"),
                format!("{m3:.3}"),
                format!("{m3x:.3}"),
                format!("{:.1} ({:.1})", 1.5 * m3 / m2.max(1e-12), s3 / s2),
                format!("{:.2} ({:.2})", m3x / m3.max(1e-12), s3x / s3),
            ],
        );
    }
    r.tables.push(miss);

    // 2. The crossover map.
    let mut cols: Vec<String> = vec!["LLC MPKI one socket / spread".into()];
    cols.extend(SYNC_EVERY.iter().map(|k| format!("sync every {k:.0e}")));
    cols.push("crossover interval".into());
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut map = Table::new(
        "Crossover map: overhead of spread minus one socket, percentage points (mean [95 % CI] \
         over seeds; > 0: one socket wins), 5 MB working set, rows by LLC accesses",
        &col_refs,
    );
    let mut same_wins = 0usize;
    let mut spread_wins = 0usize;
    let mut undecided = 0usize;
    for (ai, &apki) in MAP_APKI.iter().enumerate() {
        let c = &comp[&map_progs[ai]];
        let same_c = &c.placed[&PlacementKind::SameSocket].1;
        let spr_c = &c.placed[&PlacementKind::Spread].1;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let mut row = vec![format!(
            "{:.3} / {:.3} (apki {apki})",
            mean(&same_c.llc_mpki),
            mean(&spr_c.llc_mpki)
        )];
        for &k in SYNC_EVERY {
            let d: Vec<f64> = seeds
                .iter()
                .map(|&s| {
                    outcome(&t, c, &costs, PlacementKind::Spread, k, s).overhead
                        - outcome(&t, c, &costs, PlacementKind::SameSocket, k, s).overhead
                })
                .collect();
            let (cell, s) = diff_cell(&d);
            if let Some(s) = s {
                match s.verdict() {
                    crate::summary::Verdict::Gain => same_wins += 1,
                    crate::summary::Verdict::Loss => spread_wins += 1,
                    crate::summary::Verdict::OneSeed => undecided += 1,
                    crate::summary::Verdict::NoMeasurableGain => {}
                }
                r.put("same-socket-minus-spread", &format!("apki{apki}@{k:e}"), &d);
            }
            row.push(cell);
        }
        // Equal cost: notification saving per meeting = extra compute per interval.
        let o_same = outcome(&t, c, &costs, PlacementKind::SameSocket, 1e6, 0);
        let o_spr = outcome(&t, c, &costs, PlacementKind::Spread, 1e6, 0);
        let d_cpi = o_same.replica_cpi - o_spr.replica_cpi;
        let d_sync = o_spr.sync_cycles - o_same.sync_cycles;
        row.push(if d_cpi > 1e-9 {
            format!("{:.2e} instructions", d_sync / d_cpi)
        } else {
            "none: one socket always wins".into()
        });
        map.row(row);
    }
    r.tables.push(map);

    // 3. Policy vs the fixed placements.
    let mut cmp = Table::new(
        "Overhead of triple replication over native, % (mean ± std over seeds): the replica \
         policy vs the two fixed placements",
        &[
            "program",
            "sync every (instructions)",
            "LLC MPKI alone",
            "always one socket",
            "always spread",
            "replica policy",
            "policy's final placement",
            "policy minus best fixed, percentage points",
        ],
    );
    let mut cases: Vec<(String, f64, bool)> = spec_progs
        .iter()
        .map(|p| (p.program.clone(), p.sync_every_instructions, true))
        .collect();
    for (ai, &apki) in MAP_APKI.iter().enumerate() {
        if [0.1, 3.0, 30.0].contains(&apki) {
            for k in [1e4, 1e5, 1e6] {
                cases.push((map_progs[ai].clone(), k, false));
            }
        }
    }
    let mut right = 0usize;
    let mut wrong_max_diff: f64 = 0.0;
    let mut total = 0usize;
    let mut worse_than_best = Vec::new();
    let mut programs_under_5pct = 0usize;
    let mut max_spec_sync_saving: f64 = 0.0;
    // The smallest overhead any run of the figure's bars had.
    let mut fig_min = f64::INFINITY;
    let mut fig = BarFigure {
        file: "replica-overhead.svg".into(),
        title: "Triple replication overhead on x5650-2s by placement (SPEC INT 2006-like)".into(),
        y_label: "overhead over native, %".into(),
        categories: Vec::new(),
        series: ["always one socket", "always spread", "replica policy"]
            .iter()
            .map(|n| BarSeries {
                name: (*n).into(),
                values: Vec::new(),
                errors: Vec::new(),
            })
            .collect(),
    };
    for (name, k, is_spec) in &cases {
        let c = &comp[name];
        let mut same = Vec::new();
        let mut spread = Vec::new();
        let mut pol = Vec::new();
        let mut finals = BTreeMap::new();
        for &s in seeds {
            same.push(outcome(&t, c, &costs, PlacementKind::SameSocket, *k, s).overhead);
            spread.push(outcome(&t, c, &costs, PlacementKind::Spread, *k, s).overhead);
            let (o, fin) = policy_run(&t, c, &costs, name, *k, freq, s)?;
            pol.push(o);
            *finals.entry(fin.name()).or_insert(0usize) += 1;
        }
        let key = format!("{name}@{k:e}");
        let (Some(ss), Some(sp), Some(po)) = (
            r.put("always-same-socket", &key, &same),
            r.put("always-spread", &key, &spread),
            r.put("replica", &key, &pol),
        ) else {
            continue;
        };
        let best: Vec<f64> = same.iter().zip(&spread).map(|(a, b)| a.min(*b)).collect();
        let gap: Vec<f64> = pol.iter().zip(&best).map(|(p, b)| p - b).collect();
        let best_kind = if ss.mean <= sp.mean {
            "same-socket"
        } else {
            "spread"
        };
        total += 1;
        if finals.len() == 1 && finals.contains_key(best_kind) {
            right += 1;
        } else {
            wrong_max_diff = wrong_max_diff.max((ss.mean - sp.mean).abs());
        }
        if *is_spec {
            if ss.mean.min(sp.mean) < 0.05 {
                programs_under_5pct += 1;
            }
            let seed0 = seeds.first().copied().unwrap_or(0);
            let o = |kind| outcome(&t, c, &costs, kind, *k, seed0);
            max_spec_sync_saving = max_spec_sync_saving.max(
                o(PlacementKind::Spread).sync_overhead - o(PlacementKind::SameSocket).sync_overhead,
            );
            fig.categories.push(
                name.trim_start_matches(char::is_numeric)
                    .trim_start_matches('.')
                    .to_string(),
            );
            for (i, s) in [ss, sp, po].iter().enumerate() {
                fig_min = fig_min.min(s.min);
                fig.series[i].values.push(Some(s.mean * 100.0));
                fig.series[i]
                    .errors
                    .push(s.half_width95().map(|h| h * 100.0));
            }
        }
        let gs = Summary::of(&gap);
        if let Some(g) = gs {
            worse_than_best.push(g.mean);
        }
        cmp.row(vec![
            name.clone(),
            format!("{k:.0e}"),
            format!(
                "{:.3}",
                c.native.llc_mpki.first().copied().unwrap_or(f64::NAN)
            ),
            pct(&ss),
            pct(&sp),
            pct(&po),
            finals
                .iter()
                .map(|(k, n)| format!("{k} x{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            gs.map_or("—".into(), |g| g.scaled(100.0).show_interval(2)),
        ]);
    }
    r.tables.push(cmp);
    // No run was faster than native: a bar's interval stops at 0 (the policy's libquantum
    // bar, 3.26 with a half-width of 3.67 over five skewed runs, took the axis to -50).
    if fig_min >= 0.0 {
        r.figure_options.insert(
            fig.file.clone(),
            crate::result::FigureOptions {
                floor: Some(0.0),
                ..Default::default()
            },
        );
    }
    r.figures.push(fig);
    progress.done("replica: policy runs");

    // Findings, from the numbers above.
    let cells = MAP_APKI.len() * SYNC_EVERY.len();
    r.findings.push(format!(
        "Crossover map: one socket wins in {same_wins} cells, spread in {spread_wins}, of \
         {cells} ({}). {}",
        if undecided > 0 {
            format!("{undecided} undecided: one seed, no interval")
        } else {
            "the rest: no measurable gain either way".to_string()
        },
        if undecided > 0 {
            "With one seed neither of seed 001's rules can be judged: run two or more seeds."
        } else if same_wins > 0 && spread_wins > 0 {
            "Both of seed 001's rules are reproduced, each in its region: frequent meetings \
             with little LLC traffic favour one socket (the notification saving is paid per \
             meeting), LLC-heavy groups favour spreading once the three working sets no longer \
             fit one L3; the crossover interval column gives the boundary per row. The one-socket \
             rule follows from the seed's notification costs, which the model takes as input; \
             the spread rule comes from the engine's cache model."
        } else if same_wins > 0 {
            "Only the one-socket rule shows on this map."
        } else if spread_wins > 0 {
            "Only the spread rule shows on this map."
        } else {
            "Neither rule shows on this map."
        }
    ));
    r.findings.push(format!(
        "The replica policy ends in the better fixed placement in {right} of {total} cases (in \
         the others the two fixed placements differ by at most {:.2} percentage points); its \
         mean gap to the better fixed placement (learning epochs included: it starts from \
         one socket on odd seeds and spread on even ones, and must try a placement to measure \
         its misses) is {:.3} percentage points (largest {:.3}).",
        wrong_max_diff * 100.0,
        worse_than_best.iter().sum::<f64>() / worse_than_best.len().max(1) as f64 * 100.0,
        worse_than_best
            .iter()
            .cloned()
            .fold(f64::NEG_INFINITY, f64::max)
            * 100.0
    ));
    r.findings.push(format!(
        "SPEC INT 2006-like programs (meeting rates and profiles estimated): \
         {programs_under_5pct} of {} replicate three times with under 5 % overhead in their \
         better placement (seed 001: under 5 % for most of SPEC INT 2006). At their estimated \
         meeting rates the notification saving of one socket is at most {:.2} % of native \
         time, so for them the cache side decides (the map's crossover column gives the \
         meeting interval below which one socket wins).",
        spec_progs.len(),
        max_spec_sync_saving * 100.0
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    #[test]
    fn the_registry_policy_has_the_seed_costs() {
        let f = 2.66;
        let d = ReplicaPolicy::default();
        let s = NotifyCosts::seed_x5650();
        assert!((d.notify_near_ns - s.same_package_cycles / f).abs() < 1e-9);
        assert!((d.notify_far_ns - s.other_package_cycles / f).abs() < 1e-9);
        assert_eq!(
            Catalog::builtin().machine(MACHINE).map(|m| m.freq_ghz),
            Some(f)
        );
    }

    /// A `bench c2c` file's costs run the same experiment: its result says which model it
    /// ran under, as `crate::run`'s do (the `--c2c` path said `model: `; CLI probe, session
    /// 29).
    #[test]
    fn a_c2c_run_says_its_model() {
        let costs = NotifyCosts::seed_x5650();
        let r = run_with(&[1], &NoProgress, costs.clone(), None).expect("runs");
        assert_eq!(r.model, "v1");
        // No run beats native: the figure's error bars stop at 0.
        assert_eq!(
            r.figure_options
                .get("replica-overhead.svg")
                .and_then(|o| o.floor),
            Some(0.0)
        );
        let r = run_with(&[1], &NoProgress, costs, Some(Model::V2)).expect("runs");
        assert_eq!(r.model, "v2 (--model)");
    }

    /// A group of no pairs is refused, naming the file, the group and the field; one pair or
    /// more (or a group that does not say, as a hand-written file may) is read.
    #[test]
    fn a_c2c_group_of_no_pairs_is_refused() {
        let doc = |pairs: &str| {
            format!(
                "{{\"schema\":1,\"groups\":[{{\"distance\":\"same_llc\",{pairs}\
                 \"futex_median_ns\":20000}}]}}"
            )
        };
        for bad in ["0", "-1", "1.5", "\"2\"", "null"] {
            let e = costs_from_c2c(&doc(&format!("\"pairs\":{bad},")), "c2c.json").expect_err(bad);
            assert!(
                e.contains("c2c.json")
                    && e.contains(&format!("groups[0] (same_llc).pairs = {bad}")),
                "{e}"
            );
        }
        for good in ["\"pairs\":1,", "\"pairs\":6,", ""] {
            let c = costs_from_c2c(&doc(good), "c2c.json").expect(good);
            assert!((c.same_llc_cycles - 10000.0 * 2.66).abs() < 1e-6, "{good}");
        }
    }

    #[test]
    fn same_seeds_same_json() {
        let a = run(&[1, 2], &NoProgress, None).expect("runs");
        let b = run(&[1, 2], &NoProgress, None).expect("runs");
        let ja = serde_json::to_string(&a).expect("json");
        let jb = serde_json::to_string(&b).expect("json");
        assert_eq!(ja, jb);
        assert_eq!(a.tables.len(), 3);
    }

    /// Every table cell of a result.
    fn cells(r: &ExperimentResult) -> Vec<&str> {
        r.tables
            .iter()
            .flat_map(|t| t.rows.iter().flatten())
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn one_seed_gives_no_interval_and_no_verdict() {
        let one = run(&[3], &NoProgress, None).expect("runs");
        // The crossover map's cells: a mean, no interval, and no gain/loss verdict.
        let map = &one.tables[1];
        let mut judged = 0;
        for c in map.rows.iter().flat_map(|r| &r[1..r.len() - 1]) {
            assert!(c.ends_with("[one seed] (undecided: one seed)"), "{c}");
            judged += 1;
        }
        assert_eq!(judged, MAP_APKI.len() * SYNC_EVERY.len());
        for c in cells(&one) {
            for word in ["(gain)", "(loss)", "no measurable gain", "CI"] {
                assert!(!c.contains(word), "{word} in {c}");
            }
        }
        let crossover = one
            .findings
            .iter()
            .find(|f| f.starts_with("Crossover map"))
            .expect("crossover finding");
        assert!(
            crossover.contains("one socket wins in 0 cells, spread in 0")
                && crossover.contains("undecided: one seed")
                && !crossover.contains("reproduced"),
            "{crossover}"
        );
        // JSON: one seed carries no spread at all, not a spread of 0.
        let j = serde_json::to_value(&one).expect("json");
        let mut entries = 0;
        for metrics in j["policies"].as_object().expect("policies").values() {
            for e in metrics.as_object().expect("metrics").values() {
                assert_eq!(e["n"], 1);
                assert!(e["std"].is_null(), "{e}");
                entries += 1;
            }
        }
        assert!(entries > 0);

        // Two seeds decide: every map cell carries an interval and a verdict.
        let two = run(&[3, 4], &NoProgress, None).expect("runs");
        for c in two.tables[1].rows.iter().flat_map(|r| &r[1..r.len() - 1]) {
            assert!(
                c.ends_with("(gain)")
                    || c.ends_with("(loss)")
                    || c.ends_with("(no measurable gain)"),
                "{c}"
            );
        }
        assert!(cells(&two).iter().all(|c| !c.contains("one seed")));
    }

    #[test]
    fn policy_places_sync_heavy_light_group_together_and_heavy_one_apart() {
        let mut catalog = Catalog::builtin();
        for &a in MAP_APKI {
            catalog.set_program(synthetic(a));
        }
        let costs = NotifyCosts::seed_x5650();
        let run3 = ReplicaRun {
            catalog: &catalog,
            machine: MACHINE,
            costs: &costs,
            replicas: REPLICAS,
            lengths: RunLengths {
                warm_ms: 500,
                measure_ms: 500,
            },
            instructions: RUN_INSTRUCTIONS,
        };
        let (spec, t) = run3.machine().expect("machine");
        for seed in [1, 2] {
            // Meets every 10,000 instructions, 0.1 LLC accesses per kilo-instruction.
            let light = computed(&run3, &synthetic(0.1).name).expect("light");
            let (_, fin) =
                policy_run(&t, &light, &costs, "light", 1e4, spec.freq_ghz, seed).expect("run");
            assert_eq!(fin, PlacementKind::SameSocket, "seed {seed}");
            // libquantum: 25 accesses per kilo-instruction into a 5 MB working set.
            let heavy = computed(&run3, "462.libquantum").expect("heavy");
            let (_, fin) =
                policy_run(&t, &heavy, &costs, "lq", 2e8, spec.freq_ghz, seed).expect("run");
            assert_eq!(fin, PlacementKind::Spread, "seed {seed}");
        }
    }
}
