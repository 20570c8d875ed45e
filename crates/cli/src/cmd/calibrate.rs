//! `counterpoint calibrate`: MASA's load calibration. Each probe runs alone on one CPU, then every
//! pair co-runs on two CPUs (SMT siblings where the machine has them); ΔT is how much longer a
//! fixed amount of the probe's work takes next to the other probe. ΔL needs a hardware PMU and
//! is reported as unavailable where there is none.

use anyhow::{bail, Result};
use clap::Args;
use counterpoint_host::probe;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Args)]
pub struct CalibrateArgs {
    /// Seconds per run (4 solo runs + 10 pairs).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

pub fn run(args: CalibrateArgs) -> Result<ExitCode> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds {}: must be a positive number", args.seconds);
    }
    let topo = counterpoint_host::sysfs::host_topology()?;
    let Some(t) = probe::calibrate(&topo, Duration::from_secs_f64(args.seconds), &STOP) else {
        bail!("calibration needs two online CPUs");
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&t)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "load calibration on CPUs {} and {} ({}), {:.1} s per run; l2 working set {} KiB, mem buffer {} MiB",
        t.cpus.0,
        t.cpus.1,
        if t.smt_siblings { "SMT siblings" } else { "separate cores, no SMT" },
        t.seconds_per_run,
        t.sizes.l2_working_set_bytes >> 10,
        t.sizes.mem_buffer_bytes >> 20
    );
    println!("{:<6} {:<6} {:>10} {:>10}", "a", "b", "ΔT a %", "ΔT b %");
    for p in &t.pairs {
        println!(
            "{:<6} {:<6} {:>10.1} {:>10.1}",
            p.a.name(),
            p.b.name(),
            p.delta_t_a * 100.0,
            p.delta_t_b * 100.0
        );
    }
    if let Some(note) = &t.delta_l {
        println!("{note}");
    }
    Ok(ExitCode::SUCCESS)
}
