//! `counterpoint bench selfmon`: what self-monitoring costs on this machine — a region
//! begin/end pair, a counter read through our layer (the `read(2)` fallback here), a raw
//! `read(2)` on the same descriptor, and the user-space seqlock read on a synthetic control
//! page with a fake `rdpmc` (the protocol's own cost, without the instruction).

use anyhow::{Context, Result};
use clap::Args;
use counterpoint_selfmon::counter::read_fd;
use counterpoint_selfmon::page::{
    read_page, write_page, FakeCpu, PageRead, PerfEventMmapPage, CAP_USER_RDPMC,
};
use counterpoint_selfmon::{parse_events, Region, SelfCounter};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct BenchSelfmonArgs {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Timed rounds per path, 1 to 1000 (median reported); the paths are interleaved round by
    /// round.
    #[arg(long, default_value_t = 11,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_ROUNDS))]
    rounds: usize,
    /// Operations per round and path (1 to 1000000).
    #[arg(long, default_value_t = 100_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_ITERATIONS))]
    iterations: usize,
}

/// The most `--rounds` accepts: far more than a stable median needs.
const MAX_ROUNDS: u64 = 1000;
/// The most `--iterations` accepts: ten times the default. An operation of all four paths
/// costs about 3 us here, so even both bounds together stay under an hour on a 2-vCPU machine.
const MAX_ITERATIONS: u64 = 1_000_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn time_ns(iters: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

pub fn bench(args: BenchSelfmonArgs) -> Result<ExitCode> {
    counterpoint_selfmon::init("task-clock").context("opening task-clock for the regions")?;
    let spec = parse_events("task-clock")?.remove(0);
    let counter = SelfCounter::open(&spec).context("opening task-clock on this thread")?;
    let user_space = counter.user_space_capable();
    let fd = counter.fd();

    let mut page = Box::<PerfEventMmapPage>::default();
    let cpu = FakeCpu::default();
    let p: *mut PerfEventMmapPage = &mut *page;
    // SAFETY: the page is live for the whole function and only this thread touches it.
    unsafe {
        write_page(p, |w| {
            w.index(1);
            w.offset(1000);
            w.pmc_width(48);
            w.capabilities(CAP_USER_RDPMC);
            w.times(1, 1);
        });
    }

    let (mut region, mut ours, mut raw, mut synthetic) = (vec![], vec![], vec![], vec![]);
    let n = args.iterations;
    let mut failures = 0u64;
    for _ in 0..args.rounds {
        region.push(time_ns(n, || {
            let _r = Region::begin("bench");
        }));
        ours.push(time_ns(n, || {
            if std::hint::black_box(counter.read()).is_err() {
                failures += 1;
            }
        }));
        raw.push(time_ns(n, || {
            if std::hint::black_box(read_fd(fd)).is_err() {
                failures += 1;
            }
        }));
        synthetic.push(time_ns(n, || {
            // SAFETY: see above.
            let r = unsafe { read_page(p, &cpu) };
            if !matches!(std::hint::black_box(r), PageRead::Counted(_)) {
                failures += 1;
            }
        }));
    }
    anyhow::ensure!(
        failures == 0,
        "{failures} reads failed during the benchmark"
    );
    let (region, ours, raw, synthetic) =
        (median(region), median(ours), median(raw), median(synthetic));
    // The 1-minute load average: a number in the JSON (null when /proc/loadavg cannot be read).
    let load_1m: Option<f64> = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok());
    let load = load_1m.map_or_else(|| "?".to_string(), |l| format!("{l:.2}"));
    let path = if user_space {
        "rdpmc (cap_user_rdpmc = 1)".to_string()
    } else {
        "read(2) fallback: cap_user_rdpmc is 0 (no hardware PMU / software event), no user-space read here".to_string()
    };
    if args.json {
        let v = serde_json::json!({
            "rounds": args.rounds,
            "iterations": args.iterations,
            "loadavg_1m": load_1m,
            "read_path": path,
            "region_begin_end_ns": region,
            "read_ours_ns": ours,
            "read_raw_syscall_ns": raw,
            "ours_over_raw": ours / raw,
            "synthetic_page_read_ns": synthetic,
            "lock_costs": "see `counterpoint bench lockprof`",
        });
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        outln!(
            "counterpoint bench selfmon: medians of {} rounds x {} ops (load average {load})",
            args.rounds,
            args.iterations
        )?;
        outln!("  read path here: {path}")?;
        outln!("  region begin+end (task-clock read at both ends)  {region:>9.1} ns")?;
        outln!("  read through selfmon                            {ours:>9.1} ns")?;
        outln!(
            "  raw read(2) on the same fd                      {raw:>9.1} ns  (ours/raw {:.3})",
            ours / raw
        )?;
        outln!("  seqlock read, synthetic page, fake rdpmc        {synthetic:>9.1} ns  (protocol cost only; no rdpmc on this machine)")?;
        outln!("  lock+unlock with and without the profiler: `counterpoint bench lockprof`")?;
    }
    Ok(ExitCode::SUCCESS)
}
