use counterpoint_core::Machine;
use counterpoint_sim::*;
fn main() {
    let cat = Catalog::builtin();
    let name = std::env::args().nth(1).unwrap();
    let sc = Scenario::builder(&cat, "zhang-smp")
        .unwrap()
        .task(&name, Some(counterpoint_core::CpuSet::single(0)))
        .unwrap()
        .build();
    let mut sim = Simulation::new(&sc, 1).unwrap();
    for i in 0..10 {
        sim.advance(if i < 5 { 1_000_000 } else { 1_000_000_000 })
            .unwrap();
        let c = sim.counters(0).unwrap();
        println!(
            "t={} instr={:.3e} ipc={:.3} occ={:?} rates={:?} bus={:?}",
            sim.now_ns(),
            c.instructions,
            c.instructions / c.cycles,
            sim.cache_occupancy(),
            sim.cpu_rates(),
            sim.bus_utilization()
        );
    }
}
