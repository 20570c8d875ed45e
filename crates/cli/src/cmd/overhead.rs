//! `counterpoint agent-overhead`: the agent's own CPU cost. A helper process holds N sleeping
//! threads; a real `counterpoint agent --policy spread` watches it for a number of intervals;
//! the agent's user+system CPU time (from `wait4`'s rusage) over its wall time is the overhead.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::Read;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct OverheadArgs {
    /// Threads in the watched helper process.
    #[arg(long, default_value_t = 500)]
    threads: u32,
    /// Agent interval.
    #[arg(long, default_value = "1s")]
    interval: String,
    /// Intervals to run the agent for.
    #[arg(long, default_value_t = 30)]
    intervals: u64,
    /// Repetitions (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Internal: be the helper (hold this many sleeping threads until stdin closes).
    #[arg(long, hide = true)]
    hold_threads: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn hold(n: u32) -> Result<ExitCode> {
    let mut handles = Vec::new();
    for _ in 0..n {
        handles.push(std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_secs(3600));
        }));
    }
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    Ok(ExitCode::SUCCESS)
}

/// Run a child and return (user+sys CPU seconds, wall seconds, exit status).
fn run_measured(cmd: &mut Command) -> Result<(f64, f64, i32)> {
    let t0 = Instant::now();
    let child = cmd.spawn().context("spawn agent")?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data, zero-initialisable; wait4 on our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if rc != pid {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    let wall = t0.elapsed().as_secs_f64();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok((tv(ru.ru_utime) + tv(ru.ru_stime), wall, code))
}

pub fn run(args: OverheadArgs) -> Result<ExitCode> {
    if let Some(n) = args.hold_threads {
        return hold(n);
    }
    let exe = std::env::current_exe().context("own executable")?;
    let mut helper = Command::new(&exe)
        .args([
            "agent-overhead",
            "--hold-threads",
            &args.threads.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn helper")?;
    let mut line = [0u8; 6];
    if let Some(out) = helper.stdout.as_mut() {
        out.read_exact(&mut line).context("helper did not start")?;
    }
    let hp = helper.id();
    let threads =
        counterpoint_counters::tasks::thread_ids(std::path::Path::new("/proc"), hp as i32)
            .map(|t| t.len())
            .unwrap_or(0);
    let dir = tempfile_dir()?;
    let mut runs = Vec::new();
    for i in 0..args.repeat {
        let journal = dir.join(format!("overhead-{i}.journal"));
        let (cpu_s, wall_s, code) = run_measured(
            Command::new(&exe)
                .args(["agent", "--policy", "spread", "--interval", &args.interval])
                .args(["--targets", &format!("pid:{hp}")])
                .args(["--max-intervals", &args.intervals.to_string()])
                .arg("--journal")
                .arg(&journal)
                .stderr(Stdio::null()),
        )?;
        if code != 0 {
            let _ = helper.kill();
            bail!("agent exited with {code}");
        }
        runs.push(cpu_s / wall_s * 100.0);
        if !args.json {
            println!(
                "run {}: agent CPU {:.4} s over {:.2} s wall = {:.3} % of one core",
                i + 1,
                cpu_s,
                wall_s,
                cpu_s / wall_s * 100.0
            );
        }
    }
    drop(helper.stdin.take());
    let _ = helper.wait();
    let _ = std::fs::remove_dir_all(&dir);
    runs.sort_by(f64::total_cmp);
    let median = runs[runs.len() / 2];
    if args.json {
        println!(
            "{}",
            serde_json::json!({"watched_threads": threads, "interval": args.interval,
                "intervals": args.intervals, "percent_of_one_core": runs, "median_percent": median})
        );
    } else {
        println!(
            "watching {threads} threads at {} for {} intervals: median {:.3} % of one core (goal < 0.5 %)",
            args.interval, args.intervals, median
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("counterpoint-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    Ok(d)
}
