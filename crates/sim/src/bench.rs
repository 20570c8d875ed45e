//! Simulator speed: simulated core-ticks per wall-clock second of the tick engine alone (no solo
//! runs), on one thread. `counterpoint bench sim` reports these; nothing here asserts a time.

use crate::catalog::Catalog;
use crate::engine::Simulation;
use crate::scenario::Scenario;
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
    /// Contention solves per simulated tick (the engine's main cost: context switches and
    /// cold caches warming up make buses dirty).
    pub solves_per_tick: f64,
}

/// Run `scenario`'s engine for its duration, taking each epoch's counter deltas as `run` does
/// without an epoch-level policy.
pub fn measure(scenario: &Scenario) -> Result<BenchPoint, SimError> {
    let mut sim = Simulation::new(scenario, scenario.seed)?;
    let total_ns = scenario.duration_ms * 1_000_000;
    let epoch_ns = scenario.epoch_ms * 1_000_000;
    let (mut deltas, mut bus) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while sim.now_ns() < total_ns {
        let step = epoch_ns.min(total_ns - sim.now_ns());
        sim.advance_quiet(step, None);
        sim.take_interval(&mut deltas, &mut bus);
    }
    let wall_s = start.elapsed().as_secs_f64();
    let ticks = sim.now_ns() / sim.tick_ns();
    let core_ticks = ticks * scenario.machine.cpus() as u64;
    Ok(BenchPoint {
        machine: scenario.machine.name.clone(),
        cpus: scenario.machine.cpus(),
        tasks: scenario.tasks.len(),
        simulated_ms: scenario.duration_ms,
        core_ticks,
        wall_s,
        core_ticks_per_s: core_ticks as f64 / wall_s.max(1e-9),
        solves_per_tick: sim.solves() as f64 / ticks.max(1) as f64,
    })
}

/// The benchmark mix: equal numbers of eight SPEC CPU2000 programs, placed by the scheduler.
pub fn mix(
    catalog: &Catalog,
    machine: &str,
    tasks: usize,
    duration_ms: u64,
) -> Result<Scenario, SimError> {
    const MIX: [&str; 8] = [
        "gzip", "parser", "swim", "mesa", "wupwise", "art", "mcf", "gcc",
    ];
    let mut b = Scenario::builder(catalog, machine)
        .map_err(SimError::Invalid)?
        .name(&format!("bench-{machine}-{tasks}"))
        .duration_ms(duration_ms)
        .seed(1);
    for i in 0..tasks {
        b = b
            .task(MIX[i % MIX.len()], None)
            .map_err(SimError::Invalid)?;
    }
    Ok(b.build())
}
