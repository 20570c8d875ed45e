//! `counterpoint heatmap --pid PID`: SchedTask's 512-bit code-page heatmaps of a live process's
//! threads, from instruction pointers sampled with the software `cpu-clock` event (no PMU
//! needed), split user/kernel, with the threads' pairwise overlaps and the sampler's own CPU
//! cost in % of a core. docs/schedtask.md.

use anyhow::{Context, Result};
use clap::Args;
use counterpoint_core::heatmap::OverlapTable;
use counterpoint_counters::sampling::{parse_code_maps, thread_heatmaps, IpSampler};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct HeatmapArgs {
    /// Process whose threads to sample (every thread present when sampling starts).
    #[arg(long)]
    pid: u32,
    /// How long to sample, ms.
    #[arg(long, default_value_t = 2000)]
    duration_ms: u64,
    /// Sampling period per thread, µs of the thread's CPU time (cpu-clock).
    #[arg(long, default_value_t = 1000)]
    period_us: u64,
    /// User-mode samples only (when perf_event_paranoid forbids kernel samples).
    #[arg(long)]
    no_kernel: bool,
    /// Print the heatmaps (hex), overlaps and overhead as JSON.
    #[arg(long)]
    json: bool,
}

/// CPU time this process has used, ns (user + system).
fn own_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn comm(pid: u32, tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

pub fn run(args: HeatmapArgs) -> Result<ExitCode> {
    let maps_path = format!("/proc/{}/maps", args.pid);
    let maps_text = std::fs::read_to_string(&maps_path)
        .with_context(|| format!("reading {maps_path} (does process {} exist?)", args.pid))?;
    let maps = parse_code_maps(&maps_text);
    let mut sampler = IpSampler::open_pid(args.pid, args.period_us.max(10) * 1000, !args.no_kernel)
        .context(
            "opening the cpu-clock samplers (try --no-kernel if kernel samples are refused)",
        )?;
    let names: Vec<(u32, String)> = sampler
        .threads()
        .into_iter()
        .map(|t| (t, comm(args.pid, t)))
        .collect();
    let cpu0 = own_cpu_ns();
    let t0 = Instant::now();
    sampler.enable().context("enabling the samplers")?;
    let mut samples = Vec::new();
    let end = t0 + Duration::from_millis(args.duration_ms);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now().min(end)));
        sampler.drain(&mut samples);
    }
    sampler.disable().context("disabling the samplers")?;
    sampler.drain(&mut samples);
    let wall_ns = t0.elapsed().as_nanos().max(1) as f64;
    let overhead_pct = 100.0 * (own_cpu_ns().saturating_sub(cpu0)) as f64 / wall_ns;
    let maps_by_thread = thread_heatmaps(&samples, &maps);
    let table = OverlapTable::build(
        &maps_by_thread
            .iter()
            .map(|h| h.combined())
            .collect::<Vec<_>>(),
    );
    let name_of = |tid: u32| {
        names
            .iter()
            .find(|n| n.0 == tid)
            .map_or("?".to_string(), |n| n.1.clone())
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = serde_json::json!({
            "pid": args.pid,
            "duration_ms": args.duration_ms,
            "period_us": args.period_us,
            "samples": samples.len(),
            "lost": sampler.lost,
            "sampler_cpu_pct_of_a_core": overhead_pct,
            "threads": maps_by_thread.iter().map(|h| serde_json::json!({
                "tid": h.tid,
                "comm": name_of(h.tid),
                "user_samples": h.user_samples,
                "kernel_samples": h.kernel_samples,
                "user_pages": h.user.popcount(),
                "kernel_pages": h.kernel.popcount(),
                "user_heatmap": h.user.to_hex(),
                "kernel_heatmap": h.kernel.to_hex(),
                "top_mapping": h.top_mapping,
            })).collect::<Vec<_>>(),
            "overlap": table.overlap,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "pid {}: {} samples in {:.2} s ({} lost), period {} µs per thread; sampler CPU {:.2} % of a core",
        args.pid,
        samples.len(),
        wall_ns / 1e9,
        sampler.lost,
        args.period_us,
        overhead_pct
    )?;
    writeln!(
        out,
        "{:>8}  {:<16} {:>8} {:>8} {:>6} {:>6}  top mapping",
        "tid", "comm", "user", "kernel", "upages", "kpages"
    )?;
    for h in &maps_by_thread {
        writeln!(
            out,
            "{:>8}  {:<16} {:>8} {:>8} {:>6} {:>6}  {}",
            h.tid,
            name_of(h.tid),
            h.user_samples,
            h.kernel_samples,
            h.user.popcount(),
            h.kernel.popcount(),
            h.top_mapping.as_deref().unwrap_or("-")
        )?;
    }
    writeln!(
        out,
        "overlap (popcount of AND of user+kernel heatmaps), most overlapping other thread:"
    )?;
    for (i, h) in maps_by_thread.iter().enumerate() {
        let best = table.ranked(i).first().map(|&j| {
            format!(
                "{} ({}) overlap {}",
                maps_by_thread[j].tid,
                name_of(maps_by_thread[j].tid),
                table.get(i, j)
            )
        });
        writeln!(
            out,
            "{:>8}  {:<16} own {:>3}  -> {}",
            h.tid,
            name_of(h.tid),
            table.get(i, i),
            best.unwrap_or_else(|| "none".into())
        )?;
    }
    if samples.is_empty() {
        writeln!(
            out,
            "no samples: the threads used no CPU while sampled (cpu-clock counts CPU time)"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct BenchSchedtaskArgs {
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

/// `counterpoint bench schedtask`: the SchedTask model's speed per benchmark.
pub fn bench_schedtask(args: BenchSchedtaskArgs) -> Result<ExitCode> {
    use counterpoint_sim::schedtask::{bench, Options, Technique};
    let rows = bench(
        &Options::default(),
        &[Technique::Linux, Technique::SCHEDTASK],
        1,
    )?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<10} {:<10} {:>8} {:>14} {:>16}",
        "benchmark", "technique", "wall s", "invocations/s", "core-ms sim/s"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<10} {:<10} {:>8.3} {:>14.0} {:>16.1}",
            r.benchmark, r.technique, r.wall_s, r.invocations_per_s, r.core_ms_per_s
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
