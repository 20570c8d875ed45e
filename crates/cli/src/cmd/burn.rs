//! `counterpoint burn`: run one of MASA's probe programs (int, fp, l2, mem) on this thread.

use anyhow::{bail, Result};
use clap::Args;
use counterpoint_host::probe::{self, ProbeKind, ProbeSizes};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Args)]
pub struct BurnArgs {
    /// int (integer ALU chain), fp (FMA chains), l2 (L2-sized pointer chase), mem (streaming).
    #[arg(long)]
    kind: String,
    /// How long to run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

pub fn run(args: BurnArgs) -> Result<ExitCode> {
    let Some(kind) = ProbeKind::parse(&args.kind) else {
        bail!("--kind {:?}: expected int, fp, l2 or mem", args.kind);
    };
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds {}: must be a positive number", args.seconds);
    }
    let topo = counterpoint_host::sysfs::host_topology()?;
    let sizes = ProbeSizes::for_topology(&topo);
    let r = probe::run(kind, sizes, Duration::from_secs_f64(args.seconds), &STOP);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"kind": kind, "units": r.units, "elapsed_s": r.elapsed_s,
                "units_per_s": r.units_per_s(), "sizes": sizes})
        );
    } else {
        println!(
            "burn {}: {} units in {:.2} s ({:.1} units/s)",
            kind.name(),
            r.units,
            r.elapsed_s,
            r.units_per_s()
        );
    }
    Ok(ExitCode::SUCCESS)
}
