//! Simulator speed: simulated core-ticks per wall-clock second of the tick engine alone (no solo
//! runs), on one thread. `counterpoint bench sim` reports these; nothing here asserts a time.

use crate::catalog::Catalog;
use crate::engine::Simulation;
use crate::scenario::Scenario;
use crate::spec::{Model, SchedParams};
use crate::SimError;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchPoint {
    /// Catalog machine simulated.
    pub machine: String,
    /// Logical CPUs of the machine.
    pub cpus: usize,
    /// Tasks in the scenario.
    pub tasks: usize,
    /// Simulated time.
    pub simulated_ms: u64,
    /// CPU-ticks simulated (CPUs x ticks).
    pub core_ticks: u64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// Simulation speed: CPU-ticks per wall-clock second.
    pub core_ticks_per_s: f64,
    /// Which physics ran (`v1` or `v2`).
    pub model: String,
    /// Whole contention solves per simulated tick (the engine's main cost: a context switch,
    /// a phase change, or a burst of warm-ups ending makes a bus dirty). Deterministic for a
    /// scenario and seed, unlike the speed.
    pub solves_per_tick: f64,
    /// Fixed-point iterations per whole solve (deterministic, like the counts per tick).
    pub iterations_per_solve: f64,
    /// Light updates per simulated tick (a warming task's miss ratio moved, or on the v2 fast
    /// path a context switch: its bus iterates the fixed point to a loose tolerance instead of
    /// taking a whole solve).
    pub light_updates_per_tick: f64,
    /// Fixed-point iterations per light update (deterministic; until session 26 always 1, or 3
    /// on a v2 bus where both threads of a core ran).
    #[serde(default)]
    pub iterations_per_light_update: f64,
    /// v2 with snoops between sockets: latency updates per simulated tick (another socket's
    /// demand moved; this one's latency and CPIs were re-solved for the new snoop load alone).
    #[serde(default)]
    pub latency_updates_per_tick: f64,
    /// v2: warm-up steps per simulated tick taken by the warming task alone (its miss ratio
    /// and CPI at its new occupancy; the bus is touched only when the drift passes a bound).
    #[serde(default)]
    pub local_steps_per_tick: f64,
}

/// Run `scenario`'s engine for its duration, taking each epoch's counter deltas as `run` does
/// without an epoch-level policy, after an untimed warm-up of one round of slices (every task
/// has then run its first slice: under v2 a new task's first slice is half a slice at most,
/// so the first round has more context switches per tick, and it lasts longer the more tasks
/// wait on each CPU). Speed and work per tick are those of the steady state that follows.
pub fn measure(scenario: &Scenario) -> Result<BenchPoint, SimError> {
    let mut sim = Simulation::new(scenario, scenario.seed)?;
    let epoch_ns = scenario.epoch_ms * 1_000_000;
    let per_cpu = scenario
        .tasks
        .len()
        .div_ceil(scenario.machine.cpus().max(1)) as f64;
    let warm_ns = (per_cpu * scenario.sched.timeslice_ms * 1e6) as u64;
    let (mut deltas, mut bus) = (Vec::new(), Vec::new());
    let mut run_to = |sim: &mut Simulation, end_ns: u64| {
        while sim.now_ns() < end_ns {
            let step = epoch_ns.min(end_ns - sim.now_ns());
            sim.advance_quiet(step, None);
            sim.take_interval(&mut deltas, &mut bus);
        }
    };
    run_to(&mut sim, warm_ns);
    let (t0, solves0, light0) = (sim.now_ns(), sim.solves(), sim.light_updates());
    let (latency0, local0, iters0, light_iters0) = (
        sim.latency_updates(),
        sim.local_steps(),
        sim.solve_iterations(),
        sim.light_iterations(),
    );
    let start = Instant::now();
    run_to(&mut sim, t0 + scenario.duration_ms * 1_000_000);
    let wall_s = start.elapsed().as_secs_f64();
    let ticks = (sim.now_ns() - t0) / sim.tick_ns();
    let core_ticks = ticks * scenario.machine.cpus() as u64;
    let per_tick = |n: u64| n as f64 / ticks.max(1) as f64;
    let solves = sim.solves() - solves0;
    let light = sim.light_updates() - light0;
    Ok(BenchPoint {
        machine: scenario.machine.name.clone(),
        cpus: scenario.machine.cpus(),
        tasks: scenario.tasks.len(),
        simulated_ms: scenario.duration_ms,
        core_ticks,
        wall_s,
        core_ticks_per_s: core_ticks as f64 / wall_s.max(1e-9),
        model: scenario.machine.model.label().to_string(),
        solves_per_tick: per_tick(solves),
        light_updates_per_tick: per_tick(light),
        iterations_per_light_update: (sim.light_iterations() - light_iters0) as f64
            / light.max(1) as f64,
        latency_updates_per_tick: per_tick(sim.latency_updates() - latency0),
        local_steps_per_tick: per_tick(sim.local_steps() - local0),
        iterations_per_solve: (sim.solve_iterations() - iters0) as f64 / solves.max(1) as f64,
    })
}

/// The benchmark mix: equal numbers of eight SPEC CPU2000 programs, placed by the scheduler,
/// under the machine's default physics (v1; set `scenario.machine.model` for v2). Listed so
/// that every LLC domain gets every program: wake-up placement deals arriving tasks round the
/// domains (idlest memory domain, then idlest LLC domain), so task `i` lands in domain
/// `i mod domains` and gets program `(i / domains + i mod domains) mod 8`. (Listed `i mod 8`,
/// a period-8 list dealt round 8 domains gave each domain one program: bench-64's swim and art
/// all on one socket.)
pub fn mix(
    catalog: &Catalog,
    machine: &str,
    tasks: usize,
    duration_ms: u64,
) -> Result<Scenario, SimError> {
    const MIX: [&str; 8] = [
        "gzip", "parser", "swim", "mesa", "wupwise", "art", "mcf", "gcc",
    ];
    let spec = catalog
        .machine(machine)
        .ok_or_else(|| SimError::Invalid(format!("unknown machine {machine:?}")))?;
    let domains = (spec.packages * spec.llc_domains_per_package).max(1) as usize;
    let mut b = Scenario::builder(catalog, machine)
        .map_err(SimError::Invalid)?
        .name(&format!("bench-{machine}-{tasks}"))
        .duration_ms(duration_ms)
        .seed(1);
    for i in 0..tasks {
        let program = (i / domains + i % domains) % MIX.len();
        b = b.task(MIX[program], None).map_err(SimError::Invalid)?;
    }
    Ok(b.build()?)
}

/// The 20 SPEC CPU2000 programs of the catalog, which the random scenario families draw from
/// (`random_scenario`, `invariants::random_case`).
pub const SPEC2000: [&str; 20] = [
    "gzip", "parser", "swim", "mesa", "wupwise", "art", "mcf", "gcc", "vpr", "twolf", "bzip2",
    "vortex", "gap", "lucas", "mgrid", "eon", "crafty", "perlbmk", "facerec", "sixtrack",
];

/// A draw below `below` (a number in `0..below`, 0 when `below` is 0) from a small linear
/// congruential generator started at `seed`: the random families are the same on every
/// machine and in every build.
pub fn drawer(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |below: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % below.max(1)
    }
}

/// The `i`-th of a fixed family of random scenarios for checking the engine's fast path
/// against its reference path beyond the benchmark mixes (`examples/fast_vs_reference --
/// random`, `tests/speed_paths.rs`): one of five machines (bench-8, x5650-2s, zhang-smp,
/// masa-2x2ht, dualcore-shared-l2), either model, one to three tasks per CPU drawn from the
/// 20 SPEC CPU2000 programs, 2-100 ms slices drifting by 5 %, 1 or 2 ms ticks, 200-600 ms.
/// Drawn from `i` alone (a small linear congruential generator), so scenario `i` is the same
/// on every machine and in every build.
pub fn random_scenario(catalog: &Catalog, i: u64) -> Result<Scenario, SimError> {
    const MACHINES: [&str; 5] = [
        "bench-8",
        "x5650-2s",
        "zhang-smp",
        "masa-2x2ht",
        "dualcore-shared-l2",
    ];
    let mut draw = drawer(1000 + i);
    let machine = MACHINES[draw(MACHINES.len() as u64) as usize];
    let model = [Model::V1, Model::V2][draw(2) as usize];
    let spec = catalog
        .machine(machine)
        .ok_or_else(|| SimError::Invalid(format!("unknown machine {machine:?}")))?;
    let cpus = u64::from(spec.packages * spec.cores_per_package * spec.threads_per_core);
    let tasks = cpus + draw(2 * cpus + 1);
    let slice_ms = [2.0, 5.0, 10.0, 100.0][draw(4) as usize];
    let tick_ms = 1 + draw(2);
    let ms = (200 + draw(400)) / tick_ms * tick_ms;
    let mut b = Scenario::builder(catalog, machine)
        .map_err(SimError::Invalid)?
        .name(&format!("random-{i}"))
        .duration_ms(ms)
        .seed(draw(1 << 31))
        .model(model)
        .tick_us(tick_ms * 1000)
        .sched(SchedParams {
            timeslice_ms: slice_ms,
            timeslice_jitter: 0.05,
            ..SchedParams::default()
        });
    for _ in 0..tasks {
        b = b
            .task(SPEC2000[draw(SPEC2000.len() as u64) as usize], None)
            .map_err(SimError::Invalid)?;
    }
    Ok(b.build()?)
}

/// Whether the cost per simulated tick stays flat as waiting tasks grow: the speed with the
/// most waiting tasks against the speed with one waiting task per CPU. Both must run the same
/// machine and model. With no waiting task at all there are no context switches, hence no
/// contention solves after the start: that point is reported but is not the reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingVerdict {
    /// Physics (`v1` or `v2`).
    pub model: String,
    /// Tasks at the reference point (two per CPU: one running, one waiting).
    pub reference_tasks: usize,
    /// Tasks at the largest point.
    pub largest_tasks: usize,
    /// Speed at the largest point over the speed at the reference (1 = flat).
    pub speed_ratio: f64,
    /// The deterministic part of the cost (the speed also carries the machine's load): of the
    /// engine's kinds of work per tick (fixed-point iterations of whole solves and of light
    /// updates, latency updates, local warm-up steps), the largest ratio of the largest point
    /// to the reference, over the kinds the reference does.
    pub work_ratio: f64,
    /// True when the speed ratio is at least `FLAT_SPEED_RATIO`.
    pub flat: bool,
}

/// The largest point may be this much slower than the reference and still count as flat:
/// repeated runs on the shared 2-vCPU VM differ by up to about 1.5x under other builds.
pub const FLAT_SPEED_RATIO: f64 = 0.67;

/// The verdict for the points of one machine and model (`None` without a point at two tasks
/// per CPU and a larger one).
pub fn scaling_verdict(points: &[BenchPoint]) -> Option<ScalingVerdict> {
    let reference = points.iter().find(|p| p.tasks == 2 * p.cpus)?;
    let largest = points
        .iter()
        .filter(|p| p.cpus == reference.cpus && p.model == reference.model)
        .max_by_key(|p| p.tasks)?;
    if largest.tasks <= reference.tasks {
        return None;
    }
    let work = |p: &BenchPoint| {
        [
            p.solves_per_tick * p.iterations_per_solve,
            p.light_updates_per_tick * p.iterations_per_light_update.max(1.0),
            p.latency_updates_per_tick,
            p.local_steps_per_tick,
        ]
    };
    let work_ratio = work(largest)
        .iter()
        .zip(work(reference))
        .filter(|&(_, r)| r > 0.0)
        .map(|(l, r)| l / r)
        .fold(0.0, f64::max);
    let speed_ratio = largest.core_ticks_per_s / reference.core_ticks_per_s.max(1e-9);
    Some(ScalingVerdict {
        model: reference.model.clone(),
        reference_tasks: reference.tasks,
        largest_tasks: largest.tasks,
        speed_ratio,
        work_ratio,
        flat: speed_ratio >= FLAT_SPEED_RATIO,
    })
}

/// Median speed of `repeat` runs of `scenario` (`measure` each time; the point returned is the
/// median run's).
pub fn median_point(scenario: &Scenario, repeat: u64) -> Result<BenchPoint, SimError> {
    let mut pts = Vec::new();
    for _ in 0..repeat.max(1) {
        pts.push(measure(scenario)?);
    }
    Ok(median_of(pts))
}

fn median_of(mut pts: Vec<BenchPoint>) -> BenchPoint {
    pts.sort_by(|a, b| a.core_ticks_per_s.total_cmp(&b.core_ticks_per_s));
    pts.swap_remove(pts.len() / 2)
}

/// Simulated time of every scaling point: the default bench scenario's. At 10 s (before
/// session 13) a bench-64 point took 2-20 ms of wall time, so one scheduler preemption on the
/// shared 2-vCPU VM moved a speed by a third and the v1 verdict flipped between runs
/// (x0.63 and x0.95 for the same binary).
pub const SCALING_SIMULATED_MS: u64 = 60_000;

/// The scaling points `counterpoint bench sim --scaling` reports: cores (bench-8, bench-64,
/// bench-512 at four tasks per core, under `cores_model`), then waiting tasks (bench-64 with
/// 64 to 4096 tasks, under v1 and then v2), each the median of `repeat` runs; and a verdict
/// per model for the waiting-tasks points. The runs of one series go in rounds (each point
/// once per round), so a change of the machine's load falls on every point of the round
/// alike instead of on whichever point was running. `progress` is called before each run
/// with the point's label.
pub fn scaling(
    catalog: &Catalog,
    cores_model: Model,
    repeat: u64,
    progress: impl FnMut(&str),
) -> Result<(Vec<BenchPoint>, Vec<ScalingVerdict>), SimError> {
    scaling_with(catalog, &SHIPPED_PLAN, cores_model, repeat, progress)
}

/// The plan `scaling` runs.
const SHIPPED_PLAN: ScalingPlan<'static> = ScalingPlan {
    cores: &[("bench-8", 32), ("bench-64", 256), ("bench-512", 2048)],
    waiting_machine: "bench-64",
    waiting_tasks: &[64, 128, 256, 1024, 4096],
    simulated_ms: SCALING_SIMULATED_MS,
};

/// Runs of one repeat of `scaling` (the cores points, and the waiting-tasks points under each
/// model): for a progress bar.
pub const SCALING_RUNS_PER_REPEAT: u64 =
    (SHIPPED_PLAN.cores.len() + 2 * SHIPPED_PLAN.waiting_tasks.len()) as u64;

/// The points `scaling` runs (smaller plans in tests).
struct ScalingPlan<'a> {
    cores: &'a [(&'a str, usize)],
    waiting_machine: &'a str,
    waiting_tasks: &'a [usize],
    simulated_ms: u64,
}

fn scaling_with(
    catalog: &Catalog,
    plan: &ScalingPlan<'_>,
    cores_model: Model,
    repeat: u64,
    mut progress: impl FnMut(&str),
) -> Result<(Vec<BenchPoint>, Vec<ScalingVerdict>), SimError> {
    let mut series: Vec<Vec<(String, Scenario)>> = Vec::new();
    let mut cores = Vec::new();
    for &(machine, tasks) in plan.cores {
        let mut sc = mix(catalog, machine, tasks, plan.simulated_ms)?;
        sc.machine.model = cores_model;
        let label = format!("{} {machine} {tasks} tasks", cores_model.label());
        cores.push((label, sc));
    }
    series.push(cores);
    let machine = plan.waiting_machine;
    for m in [Model::V1, Model::V2] {
        let mut waiting = Vec::new();
        for &tasks in plan.waiting_tasks {
            let mut sc = mix(catalog, machine, tasks, plan.simulated_ms)?;
            sc.machine.model = m;
            waiting.push((format!("{} {machine} {tasks} tasks", m.label()), sc));
        }
        series.push(waiting);
    }
    let (mut points, mut verdicts) = (Vec::new(), Vec::new());
    for (k, s) in series.iter().enumerate() {
        let mut runs: Vec<Vec<BenchPoint>> = vec![Vec::new(); s.len()];
        for _ in 0..repeat.max(1) {
            for (i, (label, sc)) in s.iter().enumerate() {
                progress(label);
                runs[i].push(measure(sc)?);
            }
        }
        let medians: Vec<BenchPoint> = runs.into_iter().map(median_of).collect();
        if k > 0 {
            verdicts.extend(scaling_verdict(&medians));
        }
        points.extend(medians);
    }
    Ok((points, verdicts))
}

/// Parse `v1` / `v2`.
pub fn parse_model(s: &str) -> Result<Model, SimError> {
    match s {
        "v1" => Ok(Model::V1),
        "v2" => Ok(Model::V2),
        other => Err(SimError::Invalid(format!(
            "unknown model {other:?}, expected v1 or v2"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(model: &str, tasks: usize, speed: f64, solves: f64) -> BenchPoint {
        BenchPoint {
            machine: "bench-64".into(),
            cpus: 64,
            tasks,
            simulated_ms: 10_000,
            core_ticks: 640_000,
            wall_s: 640_000.0 / speed,
            core_ticks_per_s: speed,
            model: model.into(),
            solves_per_tick: solves,
            iterations_per_solve: 10.0,
            light_updates_per_tick: 0.0,
            iterations_per_light_update: 0.0,
            latency_updates_per_tick: 0.0,
            local_steps_per_tick: 0.0,
        }
    }

    #[test]
    fn verdict_compares_two_tasks_per_cpu_with_the_largest_point() {
        let flat = [
            point("v1", 64, 100e6, 0.0),
            point("v1", 128, 30e6, 0.12),
            point("v1", 4096, 25e6, 0.12),
        ];
        let v = scaling_verdict(&flat).unwrap();
        assert_eq!((v.reference_tasks, v.largest_tasks), (128, 4096));
        assert!(v.flat && (v.work_ratio - 1.0).abs() < 1e-12);
        let grows = [point("v2", 128, 30e6, 0.1), point("v2", 4096, 10e6, 0.5)];
        let v = scaling_verdict(&grows).unwrap();
        assert!(!v.flat && (v.work_ratio - 5.0).abs() < 1e-9);
        assert!(scaling_verdict(&[point("v1", 64, 1e6, 0.0)]).is_none());
        // Every kind of work counts: local steps growing x3 while solves stay put.
        let mut steps = [point("v2", 128, 30e6, 0.1), point("v2", 4096, 28e6, 0.1)];
        steps[0].local_steps_per_tick = 2.0;
        steps[1].local_steps_per_tick = 6.0;
        let v = scaling_verdict(&steps).unwrap();
        assert!(v.flat && (v.work_ratio - 3.0).abs() < 1e-9);
        assert!(parse_model("v3").is_err() && matches!(parse_model("v2"), Ok(Model::V2)));
    }

    #[test]
    fn scaling_runs_every_point_repeat_times_in_rounds_with_a_verdict_per_model() {
        let catalog = Catalog::builtin();
        let plan = ScalingPlan {
            cores: &[("bench-8", 16)],
            waiting_machine: "bench-8",
            waiting_tasks: &[8, 16, 32],
            simulated_ms: 200,
        };
        let mut labels = Vec::new();
        let (points, verdicts) = scaling_with(&catalog, &plan, Model::V2, 2, |l| {
            labels.push(l.to_string())
        })
        .unwrap();
        // Rounds: every point of a series once before any point twice.
        let series = |m: &str| [8, 16, 32].map(|t| format!("{m} bench-8 {t} tasks"));
        let mut expect = vec!["v2 bench-8 16 tasks".to_string(); 2];
        for m in ["v1", "v2"] {
            expect.extend(series(m));
            expect.extend(series(m));
        }
        assert_eq!(labels, expect);
        let shape: Vec<(&str, usize, u64)> = points
            .iter()
            .map(|p| (p.model.as_str(), p.tasks, p.simulated_ms))
            .collect();
        assert_eq!(
            shape,
            [
                ("v2", 16, 200),
                ("v1", 8, 200),
                ("v1", 16, 200),
                ("v1", 32, 200),
                ("v2", 8, 200),
                ("v2", 16, 200),
                ("v2", 32, 200),
            ]
        );
        // The cores series has no verdict; each waiting-tasks series has one, 16 against 32.
        let v: Vec<(&str, usize, usize)> = verdicts
            .iter()
            .map(|v| (v.model.as_str(), v.reference_tasks, v.largest_tasks))
            .collect();
        assert_eq!(v, [("v1", 16, 32), ("v2", 16, 32)]);
        // The progress bar's count is the number of progress calls per repeat.
        let plan_runs = (plan.cores.len() + 2 * plan.waiting_tasks.len()) as u64;
        assert_eq!(labels.len() as u64, 2 * plan_runs);
    }
}
