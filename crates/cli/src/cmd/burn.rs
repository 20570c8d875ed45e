//! `counterpoint burn`: run one of MASA's probe programs (int, fp, l2, mem) on this thread.

use anyhow::{bail, Result};
use clap::Args;
use counterpoint_host::probe::{self, ProbeKind, ProbeSizes};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Args)]
#[command(after_help = "\
Runs on the calling thread for --seconds of wall time (a decimal number of seconds, e.g. 0.5),
then prints the work done in units (a fixed amount of work each; units/s compare runs of the same
kind only):
  int  65536 steps of a dependent integer multiply/xor/shift/add chain (the integer ALUs)
  fp   16384 rounds of eight independent fused multiply-add chains (the FP units)
  l2   16384 dependent loads in a random ring of half the L2 (L2 hits, L1 misses)
  mem  1 MiB read and written, streaming through a buffer 8x the LLC (at least 64 MiB)

Examples:
  counterpoint burn --kind int --seconds 2
  counterpoint burn --kind mem --seconds 0.5 --json
  taskset -c 1 counterpoint burn --kind l2 &   # a 10 s background load on CPU 1")]
pub struct BurnArgs {
    /// int (integer ALU chain), fp (FMA chains), l2 (L2-sized pointer chase), mem (streaming).
    #[arg(long)]
    kind: String,
    /// How long to run, in seconds of wall time (decimal: 0.25 is a quarter second).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
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
