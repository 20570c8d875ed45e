//! One scenario file, run once, a line per task: `cargo run --release -p counterpoint-sim
//! --example quick -- SCENARIO.toml`. A closed output pipe ends it quietly.
use counterpoint_sim::*;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    // A closed output pipe (`| head`) ends the example quietly, as it ends the binary.
    // SAFETY: the first thing main does, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: quick SCENARIO.toml");
        return ExitCode::from(2);
    };
    let cat = Catalog::builtin();
    let sc = match Scenario::from_file(std::path::Path::new(&path), &cat) {
        Ok(sc) => sc,
        Err(e) => {
            eprintln!("quick: {e}");
            return ExitCode::FAILURE;
        }
    };
    let t = std::time::Instant::now();
    let r = match run(&sc, sc.seed, None, None, sc.epoch_ms * 1_000_000) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quick: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    for task in &r.tasks {
        let line = writeln!(
            out,
            "{:10} np={:.3} ipc={:.3} mpki={:.2} cs={} solo={} cpu={} wallpp={:?}",
            task.name,
            task.np.unwrap_or(0.0),
            task.ipc,
            task.llc_mpki,
            task.context_switches,
            task.solo_cpu_time_ns,
            task.cpu_time_ns,
            task.wall_ns_per_program.map(|v| v / 1e9)
        );
        // A closed pipe (`| head`) is the reader's choice, not an error.
        if line.is_err() {
            return ExitCode::SUCCESS;
        }
    }
    let _ = writeln!(
        out,
        "{:?} bus={:?} wall={:?}",
        r.metrics,
        r.mean_bus_utilization,
        t.elapsed()
    );
    ExitCode::SUCCESS
}
