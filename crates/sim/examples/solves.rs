//! Where the tick engine's time goes as waiting tasks grow: whole contention solves, light
//! (warm-up) updates, latency updates, local warm-up steps (v2) and context switches per
//! simulated tick on `bench-64` with 64 to 4096
//! tasks (10 s simulated each), on the default path and, with `exact`, on the reference path
//! that re-solves the whole fixed point at every warm-up step.
//! `cargo run --release -p counterpoint-sim --example solves [-- v2] [exact]`.
use counterpoint_sim::*;
fn main() {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cat = Catalog::builtin();
    let model = if std::env::args().any(|a| a == "v2") {
        Model::V2
    } else {
        Model::V1
    };
    let exact = std::env::args().any(|a| a == "exact");
    for tasks in [64, 128, 256, 1024, 4096] {
        let sc = match bench::mix(&cat, "bench-64", tasks, 10_000) {
            Ok(mut s) => {
                s.machine.model = model;
                s
            }
            Err(e) => {
                eprintln!("solves: {e}");
                std::process::exit(1)
            }
        };
        let mut sim = match Simulation::new(&sc, 1) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("solves: {e}");
                std::process::exit(1)
            }
        };
        sim.set_exact_warmup(exact);
        let t = std::time::Instant::now();
        sim.advance_quiet(10_000_000_000, None);
        let wall = t.elapsed().as_secs_f64();
        let ticks = sim.now_ns() / sim.tick_ns();
        let cs: u64 = (0..sim.task_count())
            .filter_map(|i| sim.counters(i).map(|c| c.context_switches))
            .sum();
        println!(
            "{tasks:>5} tasks: {:.3} solves/tick ({:.1} iterations each), {:.3} light updates/tick, {:.3} latency updates/tick, {:.3} local warm-up steps/tick, {:.3} context switches/tick, {:.3} s wall",
            sim.solves() as f64 / ticks as f64,
            sim.solve_iterations() as f64 / sim.solves().max(1) as f64,
            sim.light_updates() as f64 / ticks as f64,
            sim.latency_updates() as f64 / ticks as f64,
            sim.local_steps() as f64 / ticks as f64,
            cs as f64 / ticks as f64,
            wall
        );
    }
}
