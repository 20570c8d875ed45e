use counterpoint_sim::*;
fn main() {
    let cat = Catalog::builtin();
    let path = std::env::args().nth(1).unwrap();
    let sc = Scenario::from_file(std::path::Path::new(&path), &cat).unwrap();
    let t = std::time::Instant::now();
    let r = run(&sc, sc.seed, None, None, sc.epoch_ms * 1_000_000).unwrap();
    for t in &r.tasks {
        println!(
            "{:10} np={:.3} ipc={:.3} mpki={:.2} cs={} solo={} cpu={} wallpp={:?}",
            t.name,
            t.np.unwrap_or(0.0),
            t.ipc,
            t.llc_mpki,
            t.context_switches,
            t.solo_cpu_time_ns,
            t.cpu_time_ns,
            t.wall_ns_per_program.map(|v| v / 1e9)
        );
    }
    println!(
        "{:?} bus={:?} wall={:?}",
        r.metrics,
        r.mean_bus_utilization,
        t.elapsed()
    );
}
