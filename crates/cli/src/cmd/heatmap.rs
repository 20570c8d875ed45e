//! `counterpoint heatmap --pid PID`: SchedTask's 512-bit code-page heatmaps of a live process's
//! threads, from instruction pointers sampled with the software `cpu-clock` event (no PMU
//! needed), split user/kernel (and, with `--syscalls`, per system call through the
//! `raw_syscalls` tracepoints), each thread's dominant SuperFunction, the threads' pairwise
//! overlaps and the sampler's own CPU cost in % of a core. docs/schedtask.md.

use anyhow::{Context, Result};
use clap::Args;
use counterpoint_core::heatmap::OverlapTable;
use counterpoint_counters::sampling::{
    parse_code_maps, thread_heatmaps, IpSampler, SyscallTracepoints,
};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct HeatmapArgs {
    /// Process whose threads to sample (every thread present when sampling starts).
    #[arg(long)]
    pid: u32,
    /// How long to sample, ms (1 ms to a day).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    duration_ms: u64,
    /// Sampling period per thread, µs of the thread's CPU time (cpu-clock; 10 µs to 10 s: the
    /// kernel does not sample a cpu-clock faster than every 10 µs).
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(super::HEATMAP_PERIOD_US_MIN..=super::HEATMAP_PERIOD_US_MAX))]
    period_us: u64,
    /// User-mode samples only (when perf_event_paranoid forbids kernel samples).
    #[arg(long, conflicts_with = "syscalls")]
    no_kernel: bool,
    /// Attribute kernel samples to the system call in progress, with one heatmap per call
    /// (raw_syscalls:sys_enter/sys_exit tracepoints: needs tracefs mounted; every call of the
    /// sampled threads then writes two records, which slows syscall-heavy threads).
    #[arg(long)]
    syscalls: bool,
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

/// A thread's system calls by samples, most first, at most `n`: `read 40 (12 pages)`.
fn top_syscalls(c: &counterpoint_core::CodeHeatmap, n: usize) -> String {
    let mut v: Vec<_> = c.syscalls.iter().collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.nr.cmp(&b.nr)));
    v.iter()
        .take(n)
        .map(|s| {
            format!(
                "{} {} ({} pages)",
                counterpoint_core::SuperFunction::Syscall(s.nr)
                    .to_string()
                    .trim_start_matches("syscall:"),
                s.samples,
                s.kernel.popcount()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why reading `/proc/PID/maps` was refused: another user's process, or (for its owner or
/// root) the kernel's ptrace access check, which a container without `CAP_SYS_PTRACE` or
/// `kernel.yama.ptrace_scope = 3` refuses even to root (the hint had told root to run as root).
fn denied_hint(pid: u32) -> String {
    if super::stat::foreign_owner(pid).is_none() {
        format!(
            " (we are root or its owner, but the kernel refused ptrace access to process \
             {pid}: reading another process's memory map needs CAP_SYS_PTRACE in a container \
             and kernel.yama.ptrace_scope below 3)"
        )
    } else {
        format!(" (process {pid} belongs to another user: run as its owner or as root)")
    }
}

pub fn run(args: HeatmapArgs) -> Result<ExitCode> {
    // Ctrl-C or SIGTERM end the sampling early and the heatmap of what was sampled is still
    // printed, as `perf record` keeps what it recorded. Installed before the samplers open.
    super::stat::install_stop_handler();
    let maps_path = format!("/proc/{}/maps", args.pid);
    let maps_text = std::fs::read_to_string(&maps_path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => format!(" (no process {})", args.pid),
            std::io::ErrorKind::PermissionDenied => denied_hint(args.pid),
            _ => String::new(),
        };
        anyhow::Error::new(e).context(format!("reading {maps_path}{why}"))
    })?;
    // A kernel thread has no user code and no memory map: its sampling gave an empty table
    // after the whole run (CLI probe, session 27), where `top` and the agent refuse it.
    if let Some(st) = counterpoint_host::procfs::Proc::default().stat(args.pid) {
        if counterpoint_host::procfs::is_kernel_stat(args.pid, Some(&st)) {
            anyhow::bail!(
                "--pid {}: a kernel thread ({}), which runs no user code: there are no code \
                 pages to map",
                args.pid,
                st.comm
            );
        }
    }
    let maps = parse_code_maps(&maps_text);
    let tracepoints = if args.syscalls {
        Some(SyscallTracepoints::find().context("--syscalls")?)
    } else {
        None
    };
    let mut sampler = IpSampler::open_pid_with(
        args.pid,
        args.period_us * 1000,
        !args.no_kernel,
        tracepoints,
    )
    .map_err(|e| {
        // Refused: say which setting refuses it. Kernel samples of another process need
        // perf_event_paranoid <= 1 (or CAP_PERFMON); user-mode ones <= 2.
        let refused = matches!(
            &e,
            counterpoint_counters::sampling::SamplingError::Open { source, .. }
                | counterpoint_counters::sampling::SamplingError::OpenTracepoint { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied
        );
        let hint = match (refused, counterpoint_counters::count::read_paranoid()) {
            // Debian's 3 (and Android's): no sampling of any kind without privilege.
            (true, Some(p)) if p >= 3 => format!(
                "{} is {p}: no sampling at all without privilege (user-mode samples need 2 or \
                 less, kernel ones 1 or less); run as root or lower it",
                counterpoint_counters::count::PARANOID_PATH
            ),
            (true, Some(p)) if !args.no_kernel && p >= 2 => format!(
                "{} is {p}: kernel samples need 1 or less, or root; --no-kernel samples user \
                 mode only",
                counterpoint_counters::count::PARANOID_PATH
            ),
            (true, Some(p)) => format!(
                "{} is {p}: run as root or lower it (sysctl kernel.perf_event_paranoid=1)",
                counterpoint_counters::count::PARANOID_PATH
            ),
            _ => "try --no-kernel if kernel samples are refused".to_string(),
        };
        anyhow::Error::new(e).context(format!("opening the cpu-clock samplers ({hint})"))
    })?;
    let visible = sampler.syscalls_visible();
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
    // A target that exits ends the sampling (and the rate is over the time it lived).
    let (mut exited, mut stopped) = (false, false);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now().min(end)));
        sampler.drain(&mut samples);
        if super::stat::process_ended(args.pid as i32) {
            exited = true;
            break;
        }
        if super::stat::stop_requested() {
            stopped = true;
            break;
        }
    }
    // Sampling is over: a second Ctrl-C or SIGTERM ends the command again, as by default.
    // SAFETY: setting signal dispositions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
    }
    sampler.disable().context("disabling the samplers")?;
    sampler.drain(&mut samples);
    let wall_ns = t0.elapsed().as_nanos().max(1) as f64;
    if exited {
        eprintln!(
            "counterpoint heatmap: process {} exited after {:.2} s of the {} ms asked: sampled \
             until then",
            args.pid,
            wall_ns / 1e9,
            args.duration_ms
        );
    }
    if stopped {
        eprintln!(
            "counterpoint heatmap: interrupted after {:.2} s of the {} ms asked: sampled until \
             then",
            wall_ns / 1e9,
            args.duration_ms
        );
    }
    let overhead_pct = 100.0 * (own_cpu_ns().saturating_sub(cpu0)) as f64 / wall_ns;
    let maps_by_thread = thread_heatmaps(&samples, &maps, visible);
    let table = OverlapTable::build(
        &maps_by_thread
            .iter()
            .map(|h| h.code.code.combined())
            .collect::<Vec<_>>(),
    );
    let name_of = |tid: u64| {
        names
            .iter()
            .find(|n| u64::from(n.0) == tid)
            .map_or("?".to_string(), |n| n.1.clone())
    };
    let syscalls_note = if visible {
        "per system call (raw_syscalls tracepoints)".to_string()
    } else if args.no_kernel {
        "not visible (--no-kernel)".to_string()
    } else {
        match SyscallTracepoints::find() {
            Ok(_) => "not attributed (pass --syscalls)".to_string(),
            Err(e) => format!("not visible: {e}"),
        }
    };
    let mut out = String::new();
    if args.json {
        let v = serde_json::json!({
            "pid": args.pid,
            "duration_ms": args.duration_ms,
            "period_us": args.period_us,
            "samples": samples.len(),
            "lost": sampler.lost(),
            "lost_syscall_events": sampler.lost_syscall_events(),
            "syscalls": syscalls_note,
            "sampler_cpu_pct_of_a_core": overhead_pct,
            "threads": maps_by_thread.iter().map(|h| {
                let c = &h.code.code;
                serde_json::json!({
                    "tid": h.code.tid,
                    "comm": name_of(h.code.tid),
                    "dominant": c.dominant().map(|d| d.to_string()),
                    "user_samples": c.user_samples,
                    "kernel_samples": c.kernel_samples,
                    "outside_syscall_samples": c.outside_syscall_samples,
                    "unattributed_samples": c.unattributed_samples,
                    "user_pages": c.user.popcount(),
                    "kernel_pages": c.kernel.popcount(),
                    "user_heatmap": c.user.to_hex(),
                    "kernel_heatmap": c.kernel.to_hex(),
                    "syscalls": c.syscalls.iter().map(|s| serde_json::json!({
                        "nr": s.nr,
                        "name": counterpoint_core::SuperFunction::Syscall(s.nr).to_string(),
                        "samples": s.samples,
                        "kernel_pages": s.kernel.popcount(),
                        "kernel_heatmap": s.kernel.to_hex(),
                    })).collect::<Vec<_>>(),
                    "top_mapping": h.top_mapping,
                })
            }).collect::<Vec<_>>(),
            "overlap": table.overlap,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        super::write_stdout(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "pid {}: {} samples in {:.2} s ({} lost), period {} µs per thread; sampler CPU {:.2} % of a core",
        args.pid,
        samples.len(),
        wall_ns / 1e9,
        sampler.lost(),
        args.period_us,
        overhead_pct
    )?;
    writeln!(out, "system calls: {syscalls_note}")?;
    if visible && sampler.lost_syscall_events() > 0 {
        writeln!(
            out,
            "  {} tracepoint records lost (ring buffer full): some kernel samples may be misattributed",
            sampler.lost_syscall_events()
        )?;
    }
    writeln!(
        out,
        "{:>8}  {:<16} {:>8} {:>8} {:>6} {:>6}  {:<22} top mapping",
        "tid", "comm", "user", "kernel", "upages", "kpages", "dominant"
    )?;
    for h in &maps_by_thread {
        let c = &h.code.code;
        writeln!(
            out,
            "{:>8}  {:<16} {:>8} {:>8} {:>6} {:>6}  {:<22} {}",
            h.code.tid,
            name_of(h.code.tid),
            c.user_samples,
            c.kernel_samples,
            c.user.popcount(),
            c.kernel.popcount(),
            c.dominant_label(),
            h.top_mapping.as_deref().unwrap_or("-")
        )?;
        if visible && c.kernel_samples > 0 {
            writeln!(
                out,
                "{:>8}  syscalls: {}; outside any call {}; unknown (records lost) {}",
                "",
                // A thread whose kernel samples all fell outside any call has none to list.
                Some(top_syscalls(c, 4))
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "none".into()),
                c.outside_syscall_samples,
                c.unattributed_samples
            )?;
        }
    }
    writeln!(
        out,
        "overlap (popcount of AND of user+kernel heatmaps), most overlapping other thread:"
    )?;
    for (i, h) in maps_by_thread.iter().enumerate() {
        let best = table.ranked(i).first().map(|&j| {
            format!(
                "{} ({}) overlap {}",
                maps_by_thread[j].code.tid,
                name_of(maps_by_thread[j].code.tid),
                table.get(i, j)
            )
        });
        writeln!(
            out,
            "{:>8}  {:<16} own {:>3}  -> {}",
            h.code.tid,
            name_of(h.code.tid),
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
    super::write_stdout(&out)?;
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
    let mut out = String::new();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        super::write_stdout(&out)?;
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
    super::write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    /// Our own process is ours: a refusal there is the kernel's ptrace check, never "another
    /// user" (which the hint told root, about pid 1 in a sandbox).
    #[test]
    fn a_refusal_on_our_own_process_is_blamed_on_ptrace_access() {
        let hint = super::denied_hint(std::process::id());
        assert!(hint.contains("ptrace"), "{hint}");
        assert!(!hint.contains("another user"), "{hint}");
    }
}
