//! `counterpoint calibrate`: MASA's load calibration. Each probe runs alone on one CPU, then every
//! pair co-runs on two CPUs (SMT siblings where the machine has them); ΔT is how much longer a
//! fixed amount of the probe's work takes next to the other probe. ΔL needs a hardware PMU and
//! is reported as unavailable where there is none. `--masa FILE` measures MASA's own table
//! (ΔT and ΔL for the L2 and FP probes) for `agent --masa-calibration FILE`.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_core::{event, CpuSet};
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use counterpoint_host::probe;
use counterpoint_host::probe::{ProbeKind, ProbeSizes};
use counterpoint_policy::{Calibration, CalibrationEntry, LoadMetric};
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
    /// Instead of the ΔT table, measure MASA's load calibration (the L2 and FP probes solo and
    /// coupled, with the package's cache-miss and FP-op rates: ΔL needs a hardware PMU) and
    /// write it to FILE for `agent --policy masa --masa-calibration FILE`.
    #[arg(long, value_name = "FILE")]
    masa: Option<std::path::PathBuf>,
    /// Where the PMUs are described (`--masa`).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: std::path::PathBuf,
}

static STOP: AtomicBool = AtomicBool::new(false);

pub fn run(args: CalibrateArgs) -> Result<ExitCode> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds {}: must be a positive number", args.seconds);
    }
    let topo = counterpoint_host::sysfs::host_topology()?;
    if let Some(path) = &args.masa {
        let table = masa_table(&topo, &args, Duration::from_secs_f64(args.seconds))?;
        let text = serde_json::to_string_pretty(&table)? + "\n";
        std::fs::write(path, text).with_context(|| format!("--masa {}", path.display()))?;
        println!("wrote MASA's load calibration to {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
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

/// MASA's method on this host: for each load metric its probe runs alone on one CPU, then two
/// copies on two logical CPUs of one core (SMT siblings where there are), while the CPUs'
/// events are counted; ΔT from the probes' work rates, ΔL from the event rates.
fn masa_table(
    topo: &counterpoint_core::Topology,
    args: &CalibrateArgs,
    d: Duration,
) -> Result<Calibration> {
    let tree = PmuTree::new(&args.sysfs_root);
    let names = [event::CACHE_MISSES, event::FP_OPS];
    let list = parse_event_list(&names.join(","), &tree).with_context(|| {
        "MASA's calibration needs ΔL, the cache-miss and FP-op rates, from the PMU".to_string()
    })?;
    let Some((c0, c1, _)) = counterpoint_host::probe::calibration_cpus(topo) else {
        bail!("MASA's calibration needs two online CPUs");
    };
    let online = topo.online_cpus();
    let sizes = ProbeSizes::for_topology(topo);
    // (work units/s per copy, events/s of each counted event over the CPUs) of one run.
    let measure = |cpus: &[u32], kind: ProbeKind| -> Result<(f64, Vec<f64>)> {
        let target = Target::Cpus(cpus.iter().map(|&c| c as usize).collect());
        let mut set = CounterSet::open(&list, &target, &tree)?;
        // An event that did not open is refused before any probe runs.
        if let Some(r) = set.read_all()?.into_iter().find(|r| r.value.is_none()) {
            bail!(
                "MASA's calibration needs ΔL from the PMU: {} cannot be counted here ({:?})",
                r.spec.name,
                r.status
            );
        }
        let t0 = std::time::Instant::now();
        set.enable()?;
        let runs: Vec<Option<f64>> = std::thread::scope(|s| {
            let handles: Vec<_> = cpus
                .iter()
                .map(|&c| {
                    let online = &online;
                    s.spawn(move || {
                        // Pin this thread (tid 0 = self) so the probe runs where it is counted.
                        counterpoint_host::affinity::set(0, &CpuSet::single(c), online).ok()?;
                        Some(counterpoint_host::probe::run(kind, sizes, d, &STOP).units_per_s())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        set.disable()?;
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        let Some(rates) = runs.into_iter().collect::<Option<Vec<f64>>>() else {
            bail!("a {} probe could not be pinned or failed", kind.name());
        };
        let mut events = Vec::new();
        for r in set.read_all()? {
            match r.display_value() {
                Some(v) => events.push(v / secs),
                None => bail!(
                    "MASA's calibration needs ΔL from the PMU: {} cannot be counted here ({:?})",
                    r.spec.name,
                    r.status
                ),
            }
        }
        Ok((rates.iter().sum::<f64>() / rates.len() as f64, events))
    };
    let mut entries = Vec::new();
    for (i, (metric, kind)) in [
        (LoadMetric::L2Misses, ProbeKind::L2),
        (LoadMetric::FpUops, ProbeKind::Fp),
    ]
    .into_iter()
    .enumerate()
    {
        let (solo_rate, solo_ev) = measure(&[c0], kind)?;
        let (coupled_rate, coupled_ev) = measure(&[c0, c1], kind)?;
        entries.push(CalibrationEntry::from_rates(
            metric,
            kind.name(),
            solo_rate,
            coupled_rate,
            solo_ev[i],
            coupled_ev[i],
        ));
    }
    let table = Calibration { entries };
    // Refuse a table MASA could not rank (e.g. the coupled run did not raise the load).
    table
        .rank()
        .context("the measured calibration cannot be used")?;
    Ok(table)
}
