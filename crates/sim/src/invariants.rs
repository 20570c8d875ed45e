//! Physical invariants checked on random pinned scenarios over every catalog machine, both
//! models, on the fast path and the reference path (docs/sim.md, "Invariants on random
//! scenarios"). The property tests reach a few synthetic machines; this reaches the catalog's
//! corners (two-socket snoops, Hyper-Threading, sector reads, shared L2s).
//!
//! Scenario `i` ([`random_case`]): a victim pinned on CPU 0, up to five co-runners pinned on
//! other cores, one more co-runner pinned on a core none of them uses, 10-500 ms at a 1, 2, 5
//! or 10 ms tick. [`check_case`] runs it and reports each break of:
//! - **more contention never speeds a task up**: with the added co-runner no task retires
//!   more instructions, and no task that had its cache to itself misses less per instruction
//!   (reference path: to rounding; fast path: within its 1e-2 of the reference path);
//! - **counters are physical**: LLC misses at most LLC references, every miss a line on the
//!   bus, instructions at most the issue width times the cycles, cycles at most the clock
//!   times the time on a CPU, no task on a CPU longer than the run and no more CPU time than
//!   the CPUs have, bytes over the buses at most their bandwidth (v2's sustained figure, v1's
//!   peak) times the time;
//! - **a better machine never slows a task that is alone on it**: twice the LLC, half as
//!   much bandwidth again, a fifth less unloaded latency, a quarter more clock.
//!
//! Beside co-runners a better machine may slow a task, and that is physics: with a faster
//! clock, a co-runner that spends part of its time in its core sends more requests, and a
//! program that spends nearly all its time waiting on memory gets a smaller part of the
//! shared bus (a closed queueing network: the class that "thinks" faster takes more of the
//! server). Those are counted in [`CaseReport::allowed`], not reported as breaks.

use crate::{Catalog, Counters, MachineSpec, MemoryKind, Model, Scenario, SimError, Simulation};
use counterpoint_core::CpuSet;

/// A comparison of two fast-path runs may be off by the fast path's own error against the
/// reference path (docs/sim.md, "Speed and scaling": within 1e-2 on random scenarios).
pub const FAST_TOL: f64 = 1e-2;
/// A comparison of two reference-path runs: rounding only.
pub const EXACT_TOL: f64 = 1e-9;

/// One random case: the machine, the model, the pinned tasks (program, CPU) and the added
/// co-runner.
#[derive(Clone, Debug)]
pub struct Case {
    /// Catalog machine.
    pub machine: String,
    /// Physics.
    pub model: Model,
    /// The victim (on CPU 0) and its co-runners, each pinned on a core of its own.
    pub base: Vec<(&'static str, u32)>,
    /// The co-runner added, on a core none of `base` uses.
    pub extra: (&'static str, u32),
    /// Simulated time.
    pub duration_ms: u64,
    /// Tick.
    pub tick_ms: u64,
}

/// What [`check_case`] found.
#[derive(Clone, Debug, Default)]
pub struct CaseReport {
    /// Each break of an invariant, in words.
    pub breaks: Vec<String>,
    /// Tasks a better machine slowed beside co-runners (physical, see the module's docs): the
    /// change, the program and the share of its instructions it lost.
    pub allowed: Vec<(&'static str, &'static str, f64)>,
    /// The largest relative gain in instructions a task made from the added co-runner on the
    /// fast path (its approximations allow up to [`FAST_TOL`]).
    pub fast_gain: f64,
    /// The same on the reference path (0 unless an invariant broke).
    pub exact_gain: f64,
}

/// Case `i` of the random family (the same `i`, the same case), or `None` where the drawn
/// machine has a single core.
pub fn random_case(catalog: &Catalog, i: u64) -> Option<Case> {
    let machines = catalog.machine_names();
    let mut draw = crate::bench::drawer(77 + i);
    let machine = catalog.machine(&machines[draw(machines.len() as u64) as usize])?;
    let model = [Model::V1, Model::V2][draw(2) as usize];
    let tpc = machine.threads_per_core;
    let cores = (machine.cpus() as u32) / tpc;
    if cores < 2 {
        return None;
    }
    // The cores other than the victim's, shuffled; each co-runner takes one thread of one, so
    // no co-runner shares a core with another (a sibling slowed by contention frees issue
    // slots and sends less traffic: physical, and not what this checks).
    let mut free: Vec<u32> = (1..cores).collect();
    for k in (1..free.len()).rev() {
        free.swap(k, draw(k as u64 + 1) as usize);
    }
    let k = draw(free.len().min(6) as u64) as usize;
    use crate::bench::SPEC2000;
    let mut pick = || SPEC2000[draw(SPEC2000.len() as u64) as usize];
    let mut base = vec![(pick(), 0)];
    let mut picks: Vec<&'static str> = (0..=k).map(|_| pick()).collect();
    let extra_program = picks.pop().unwrap_or("gzip");
    let mut threads = Vec::with_capacity(k + 1);
    for _ in 0..=k {
        threads.push(draw(u64::from(tpc)) as u32);
    }
    for (j, &core) in free[..k].iter().enumerate() {
        base.push((picks[j], core * tpc + threads[j]));
    }
    let extra = (extra_program, free[k] * tpc + threads[k]);
    // Coarse ticks and short runs too: a tick holds a warming task's rates for its length, and
    // a run of a few ticks shows what one tick's error does.
    let tick_ms = [1, 2, 5, 10][draw(4) as usize];
    let duration_ms = ((10 + draw(490)) / tick_ms).max(1) * tick_ms;
    Some(Case {
        machine: machine.name,
        model,
        base,
        extra,
        duration_ms,
        tick_ms,
    })
}

/// The scenario of `case` with `tasks` pinned.
pub fn case_scenario(
    catalog: &Catalog,
    case: &Case,
    tasks: &[(&str, u32)],
) -> Result<Scenario, SimError> {
    let mut b = Scenario::builder(catalog, &case.machine)
        .map_err(SimError::Invalid)?
        .duration_ms(case.duration_ms)
        .model(case.model)
        .tick_us(case.tick_ms * 1000)
        .seed(1);
    for &(p, cpu) in tasks {
        b = b
            .task(p, Some(CpuSet::single(cpu)))
            .map_err(SimError::Invalid)?;
    }
    Ok(b.build()?)
}

/// Each task's counters at the end of `sc` (on the reference path if `exact`), and the
/// run's breaks of the per-run checks ([`physical_breaks`]).
pub fn run_checked(sc: &Scenario, exact: bool) -> Result<(Vec<Counters>, Vec<String>), SimError> {
    let mut sim = Simulation::new(sc, sc.seed)?;
    sim.set_exact_warmup(exact);
    sim.advance_quiet(sc.duration_ms * 1_000_000, None);
    let counters: Vec<Counters> = (0..sim.task_count())
        .filter_map(|i| sim.counters(i).cloned())
        .collect();
    let breaks = physical_breaks(sc, &counters);
    Ok((counters, breaks))
}

/// Whether the counters of a run of `sc` (one per task, at the end of the run) are physical:
/// each break in words.
pub fn physical_breaks(sc: &Scenario, counters: &[Counters]) -> Vec<String> {
    let m = &sc.machine;
    let width = m.smt_for_model().issue_width;
    let mut breaks = Vec::new();
    let mut bytes = 0.0;
    let duration_ns = sc.duration_ms * 1_000_000;
    let mut cpu_ns = 0u64;
    for (t, c) in sc.tasks.iter().zip(counters) {
        if !(c.instructions.is_finite() && c.instructions >= 0.0) {
            breaks.push(format!("{}: instructions {}", t.name, c.instructions));
        }
        if c.llc_misses > c.llc_references * (1.0 + EXACT_TOL) + 1.0 {
            breaks.push(format!(
                "{}: LLC misses {:.6e} above its references {:.6e}",
                t.name, c.llc_misses, c.llc_references
            ));
        }
        if c.instructions > width * c.cycles * (1.0 + EXACT_TOL) + 1.0 {
            breaks.push(format!(
                "{}: {:.6e} instructions in {:.6e} cycles, above the issue width {width}",
                t.name, c.instructions, c.cycles
            ));
        }
        if c.mem_transactions < c.llc_misses * (1.0 - EXACT_TOL) - 1.0 {
            breaks.push(format!(
                "{}: {:.6e} bus lines for {:.6e} LLC misses (each miss fills a line)",
                t.name, c.mem_transactions, c.llc_misses
            ));
        }
        // A task runs on one CPU at a time, at the machine's clock.
        if c.task_clock_ns > duration_ns {
            breaks.push(format!(
                "{}: {} ns on a CPU in a {duration_ns} ns run",
                t.name, c.task_clock_ns
            ));
        }
        if c.cycles > c.task_clock_ns as f64 * m.freq_ghz * (1.0 + EXACT_TOL) + 1.0 {
            breaks.push(format!(
                "{}: {:.6e} cycles in {} ns at {} GHz",
                t.name, c.cycles, c.task_clock_ns, m.freq_ghz
            ));
        }
        cpu_ns += c.task_clock_ns;
        bytes += c.mem_transactions * f64::from(m.line_bytes);
    }
    if cpu_ns > duration_ns * m.cpus() as u64 {
        breaks.push(format!(
            "{cpu_ns} ns of CPU time in a {duration_ns} ns run on {} CPUs",
            m.cpus()
        ));
    }
    let buses = match m.memory {
        MemoryKind::SharedBus => 1,
        _ => m.packages as usize,
    };
    let gb_per_s = match m.model {
        Model::V1 => m.peak_bandwidth_gb_per_s,
        Model::V2 => m.v2.sustained_bandwidth_gb_per_s,
    };
    // GB/s x ms = 1e6 bytes.
    let most = gb_per_s * sc.duration_ms as f64 * 1e6;
    // Tasks each pinned on one CPU are each on one bus: every bus is checked on its own (a
    // bus at twice its bandwidth beside an idle one is a break). Otherwise the buses together.
    let cpus_per_bus = (m.cpus() / buses).max(1) as u32;
    let bus_of = |t: &crate::TaskSpec| {
        t.affinity
            .as_ref()
            .filter(|a| a.len() == 1)
            .and_then(|a| a.iter().next())
            .map(|cpu| (cpu / cpus_per_bus) as usize)
    };
    let per_bus: Option<Vec<usize>> = sc.tasks.iter().map(bus_of).collect();
    match per_bus {
        Some(bus) => {
            let mut moved = vec![0.0; buses];
            for (b, c) in bus.iter().zip(counters) {
                moved[(*b).min(buses - 1)] += c.mem_transactions * f64::from(m.line_bytes);
            }
            for (b, bytes) in moved.iter().enumerate() {
                if *bytes > most * (1.0 + EXACT_TOL) {
                    breaks.push(format!(
                        "{bytes:.6e} bytes over bus {b} in {} ms, above {gb_per_s} GB/s",
                        sc.duration_ms
                    ));
                }
            }
        }
        None => {
            if bytes > buses as f64 * most * (1.0 + EXACT_TOL) {
                breaks.push(format!(
                    "{bytes:.6e} bytes over {buses} bus(es) in {} ms, above {gb_per_s} GB/s \
                     each",
                    sc.duration_ms
                ));
            }
        }
    }
    breaks
}

/// Tasks of time-shared scenario `i` whose normalized performance passes 1 (by more than
/// rounding): the scenario of `bench::random_scenario(i)` (more tasks than CPUs, the default
/// scheduler), at a 1, 2, 5 or 10 ms tick and over 10 ms to its own length, so that a tick's
/// error weighs in a short run. Each (task name, NP).
pub fn np_above_one(catalog: &Catalog, i: u64) -> Result<Vec<(String, f64)>, SimError> {
    let mut sc = crate::bench::random_scenario(catalog, i)?;
    let tick_ms = [1, 2, 5, 10][(i % 4) as usize];
    let ms = [10, 20, 50, sc.duration_ms][((i / 4) % 4) as usize];
    sc.tick_us = tick_ms * 1000;
    // A slice is at least a tick.
    sc.sched.timeslice_ms = sc.sched.timeslice_ms.max(tick_ms as f64);
    sc.duration_ms = (ms / tick_ms).max(1) * tick_ms;
    sc.epoch_ms = sc.duration_ms;
    let r = crate::run(&sc, sc.seed, None, None, sc.duration_ms * 1_000_000)?;
    Ok(r.tasks
        .iter()
        .filter_map(|t| {
            t.np.filter(|&np| np > 1.0 + 1e-6)
                .map(|np| (t.name.clone(), np))
        })
        .collect())
}

/// The machine changes a task alone on the machine never loses from.
type Better = (&'static str, fn(&mut MachineSpec));
const BETTER: [Better; 4] = [
    ("LLC x2", |m| m.llc_bytes *= 2),
    ("bandwidth x1.5", |m| {
        m.peak_bandwidth_gb_per_s *= 1.5;
        m.v2.sustained_bandwidth_gb_per_s *= 1.5;
    }),
    ("unloaded latency x0.8", |m| m.mem_latency_ns *= 0.8),
    ("clock x1.25", |m| m.freq_ghz *= 1.25),
];

/// Run `case` and check it (see the module's docs).
pub fn check_case(catalog: &Catalog, case: &Case) -> Result<CaseReport, SimError> {
    let mut report = CaseReport::default();
    let mut more_tasks = case.base.clone();
    more_tasks.push(case.extra);
    let base = case_scenario(catalog, case, &case.base)?;
    let more = case_scenario(catalog, case, &more_tasks)?;
    // Each base task's LLC domain, and whether another base task shares it.
    let topo = base.machine.topology()?;
    let domain = |cpu: u32| topo.llc_domain_of(cpu);
    let shares: Vec<bool> = case
        .base
        .iter()
        .enumerate()
        .map(|(k, t)| {
            case.base
                .iter()
                .enumerate()
                .any(|(j, o)| j != k && domain(o.1) == domain(t.1))
        })
        .collect();
    for exact in [true, false] {
        let path = if exact { "reference" } else { "fast" };
        let (a, breaks_a) = run_checked(&base, exact)?;
        let (b, breaks_b) = run_checked(&more, exact)?;
        for br in breaks_a.iter().chain(&breaks_b) {
            report.breaks.push(format!("{path} path: {br}"));
        }
        let tol = if exact { EXACT_TOL } else { FAST_TOL };
        for (k, (a, b)) in a.iter().zip(&b).enumerate() {
            let gain = b.instructions / a.instructions.max(1.0) - 1.0;
            let worst = if exact {
                &mut report.exact_gain
            } else {
                &mut report.fast_gain
            };
            *worst = worst.max(gain);
            if gain > tol {
                report.breaks.push(format!(
                    "{path} path: {} on CPU {} retired {gain:+.3e} more beside {} added on CPU {}",
                    more.tasks[k].name, more_tasks[k].1, case.extra.0, case.extra.1
                ));
            }
            // A task alone in its cache before keeps at least its misses per instruction:
            // the added co-runner can only take cache from it and slow it (fewer
            // instructions over the same warm-up). Beside another task it may gain cache
            // from a co-runner the bus slowed more than itself: physics, not checked.
            let mpi = |c: &Counters| c.llc_misses / c.instructions.max(1.0);
            if !shares[k] && mpi(b) < mpi(a) * (1.0 - tol) {
                report.breaks.push(format!(
                    "{path} path: {} on CPU {}, alone in its cache, missed {:+.3e} less per \
                     instruction beside {} added on CPU {}",
                    more.tasks[k].name,
                    more_tasks[k].1,
                    1.0 - mpi(b) / mpi(a),
                    case.extra.0,
                    case.extra.1
                ));
            }
        }
    }
    // A better machine, one change at a time, on the reference path, with and without the
    // added co-runner.
    for (sc0, alone) in [(&base, case.base.len() == 1), (&more, false)] {
        let (c0, _) = run_checked(sc0, true)?;
        for (what, edit) in BETTER {
            let mut sc = sc0.clone();
            edit(&mut sc.machine);
            let (c1, breaks) = run_checked(&sc, true)?;
            for br in breaks {
                report.breaks.push(format!("{what}: {br}"));
            }
            for (k, (c0, c1)) in c0.iter().zip(&c1).enumerate() {
                let loss = 1.0 - c1.instructions / c0.instructions.max(1.0);
                if loss <= EXACT_TOL {
                    continue;
                }
                if alone {
                    report.breaks.push(format!(
                        "{what}: {} alone on the machine retired {:+.3e}",
                        sc0.tasks[k].name, -loss
                    ));
                } else {
                    let program = if k < case.base.len() {
                        case.base[k].0
                    } else {
                        case.extra.0
                    };
                    report.allowed.push((what, program, loss));
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_drawn_alike_and_pin_one_task_per_core() {
        let cat = Catalog::builtin();
        for i in 0..200 {
            let (Some(a), Some(b)) = (random_case(&cat, i), random_case(&cat, i)) else {
                continue;
            };
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
            let m = cat.machine(&a.machine).unwrap();
            let tpc = m.threads_per_core;
            let mut cores: Vec<u32> = a.base.iter().map(|t| t.1 / tpc).collect();
            cores.push(a.extra.1 / tpc);
            assert_eq!(a.base[0].1, 0, "the victim is on CPU 0");
            let n = cores.len();
            cores.sort_unstable();
            cores.dedup();
            assert_eq!(cores.len(), n, "case {i}: two tasks on one core: {a:?}");
            assert!(a.extra.1 < m.cpus() as u32);
        }
    }

    #[test]
    fn unphysical_counters_are_reported_and_a_real_run_has_none() {
        let cat = Catalog::builtin();
        let case = Case {
            machine: "zhang-smp".into(),
            model: Model::V2,
            base: vec![("swim", 0), ("art", 1)],
            extra: ("gzip", 1),
            duration_ms: 100,
            tick_ms: 1,
        };
        let sc = case_scenario(&cat, &case, &case.base).unwrap();
        let (counters, breaks) = run_checked(&sc, true).unwrap();
        assert!(breaks.is_empty(), "{breaks:?}");
        assert!(counters.iter().all(|c| c.instructions > 0.0));
        // Each check fires on counters that break it, and names what broke.
        let mut bad = counters.clone();
        bad[0].llc_misses = bad[0].llc_references * 2.0;
        bad[1].instructions = bad[1].cycles * 4.0;
        bad[1].mem_transactions = bad[1].llc_misses * 0.5;
        bad[1].task_clock_ns = 200_000_000;
        let broke = physical_breaks(&sc, &bad);
        let expect = [
            "swim: LLC misses",
            "swim: ",
            "art: ",
            "art: ",
            "art: ",
            "300000000 ns of CPU time in a 100000000 ns run on 2 CPUs",
        ];
        assert_eq!(broke.len(), expect.len(), "{broke:?}");
        for (b, e) in broke.iter().zip(expect) {
            assert!(b.starts_with(e), "{broke:?}");
        }
        // swim's misses passed its bus lines too; art broke the issue width, its lines and its
        // time on a CPU, and with it the CPUs' time.
        assert!(broke[1].contains("bus lines"), "{broke:?}");
        assert!(broke[2].contains("issue width"), "{broke:?}");
        assert!(broke[3].contains("bus lines"), "{broke:?}");
        assert!(
            broke[4].contains("ns on a CPU in a 100000000 ns run"),
            "{broke:?}"
        );
        let mut slow = sc.clone();
        let bytes: f64 = counters.iter().map(|c| c.mem_transactions * 64.0).sum();
        // A bus that carries half of what the run moved in its 100 ms.
        slow.machine.v2.sustained_bandwidth_gb_per_s = bytes / 2.0 / 100.0 / 1e6;
        let broke = physical_breaks(&slow, &counters);
        assert_eq!(broke.len(), 1, "{broke:?}");
        assert!(broke[0].contains("bytes over bus 0 in 100 ms"), "{broke:?}");
    }
}
