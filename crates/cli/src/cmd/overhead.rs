//! `counterpoint agent-overhead`: the agent's own CPU cost. A helper process holds N sleeping
//! threads; a real `counterpoint agent --policy spread` watches it for a number of intervals.
//! The overhead is the agent's CPU time in the steady state over the wall time: its threads'
//! run time (`/proc/PID/task/*/schedstat`, in ns) sampled mid-interval after the first
//! [`skip_intervals`] intervals (start-up: opening a counter group per thread, the first
//! snapshot) and again mid-way through the last interval. The whole run's user+system time
//! (from `wait4`'s rusage), start-up and restore included, is printed next to it. The verdict
//! is against [`GOAL_PERCENT`] of one core, the goal for 500 threads at 1 s.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::{BufRead, Read};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct OverheadArgs {
    /// Threads in the watched helper process (0 to 10000).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(0..=MAX_THREADS))]
    threads: u32,
    /// Agent interval: `1s`, `500ms`, `2.5s` (10ms to 1h, as the agent's `--interval`; a unit
    /// is required: ms, s, m or h).
    #[arg(long, default_value = "1s")]
    interval: String,
    /// Intervals to run the agent for; at least 4 (the first quarter of the run, at least 1
    /// and at most 3 start-up intervals, is left out, then the steady state is measured over at least two
    /// intervals, from the middle of the next interval to the middle of the last).
    #[arg(long, default_value_t = 30)]
    intervals: u64,
    /// Repetitions (the median is reported); at least 1.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// One more thread in the watched process wakes every this many ms, so the process is
    /// never idle for a whole interval and every thread is read each time (0: all sleep).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    waker_ms: u64,
    /// Internal: be the helper (hold this many sleeping threads until stdin closes).
    #[arg(long, hide = true, value_parser = clap::value_parser!(u32).range(0..=MAX_THREADS))]
    hold_threads: Option<u32>,
    /// Run the agent with `--read-every-thread` (no idle or thread gate): the cost of reading all
    /// threads each interval.
    #[arg(long)]
    read_every_thread: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The agent's goal: under this share of one core (percent) watching 500 threads at 1 s.
pub const GOAL_PERCENT: f64 = 0.2;

/// The verdict of a run watching `threads` threads at `interval_ns` that cost `percent` of one
/// core: met when the run is at least as demanding as the goal's 500 threads at 1 s and stayed
/// under [`GOAL_PERCENT`]; missed when it is at most as demanding and did not; otherwise none
/// (an easier run under the goal, or a harder one over it, says nothing about the goal).
fn verdict(threads: u32, interval_ns: u64, percent: f64) -> Option<bool> {
    let harder = threads >= 500 && interval_ns <= 1_000_000_000;
    let easier = threads <= 500 && interval_ns >= 1_000_000_000;
    let under = percent < GOAL_PERCENT;
    match (under, harder, easier) {
        (true, true, _) => Some(true),
        (false, _, true) => Some(false),
        _ => None,
    }
}

/// The most threads `--threads` (and the helper's `--hold-threads`) accepts: twenty times the
/// goal's 500, well within the kernel's thread limits; a typo's millions are refused before
/// anything starts.
const MAX_THREADS: i64 = 10_000;

/// The longest measurement `agent-overhead` starts (repetitions x intervals x interval): a day.
const MAX_TOTAL_S: f64 = 86_400.0;

/// Intervals left out at the start: the first interval opens the counters and takes the
/// first snapshot; one more lets lazily opened state settle.
pub fn skip_intervals(intervals: u64) -> u64 {
    (intervals / 4).clamp(1, 3)
}

/// Total run time in ns of every thread of `pid` (`/proc/PID/task/*/schedstat`, first field).
pub(crate) fn run_time_ns(pid: u32) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = 0u64;
    for e in dir.flatten() {
        let p = e.path().join("schedstat");
        if let Ok(t) = std::fs::read_to_string(p) {
            sum += t
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(sum)
}

/// What one agent run cost.
struct Cost {
    /// Steady-state CPU share of one core, percent (None if the run was too short to window).
    steady_percent: Option<f64>,
    /// The agent's start line's `idle_gate` field.
    idle_gate: String,
    /// Whole run: CPU seconds and wall seconds.
    total_cpu_s: f64,
    total_wall_s: f64,
    window_s: f64,
}

/// The first SIGINT, SIGTERM or SIGHUP received (0: none): the run stops, the agent restores
/// and exits, and the helper and the temporary directory are removed.
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);
/// The running agent's pid while it is not yet reaped (0 otherwise): where a stop is passed on.
static AGENT: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Async-signal-safe only: atomics and kill(2).
    let _ = STOPPED_BY.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo (a terminal's signal reached
    // the agent in the same foreground group too).
    let from_kernel = unsafe { super::child::sent_by_kernel(info) };
    let agent = AGENT.load(Ordering::SeqCst);
    if agent > 0 && !from_kernel {
        // SAFETY: kill on our own unreaped child; the agent restores on SIGTERM.
        unsafe {
            libc::kill(agent, libc::SIGTERM);
        }
    }
}

fn stopped() -> bool {
    STOPPED_BY.load(Ordering::SeqCst) != 0
}

/// The helper process and the temporary directory, ended and removed on every way out (an
/// error, a stop signal, the end).
struct Cleanup {
    helper: Child,
    dir: Option<std::path::PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Closing its stdin ends the helper; kill it too in case it is not reading.
        drop(self.helper.stdin.take());
        let _ = self.helper.kill();
        let _ = self.helper.wait();
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Run the agent and measure its steady state between mid-interval samples.
fn run_agent(cmd: &mut Command, interval: Duration, intervals: u64) -> Result<Cost> {
    cmd.stderr(Stdio::piped());
    let t0 = Instant::now();
    if stopped() {
        bail!("stopped before the agent started");
    }
    let mut child = cmd.spawn().context("spawn agent")?;
    let pid = child.id();
    AGENT.store(pid as i32, Ordering::SeqCst);
    if stopped() {
        // The stop came between the check and the pid being known: pass it on now.
        // SAFETY: kill on our own unreaped child.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    // Drain the log (a full pipe would block the agent); say when it has started.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let log = child.stderr.take();
    let drain = std::thread::Builder::new()
        .name("agent-log".into())
        .spawn(move || {
            let Some(log) = log else { return };
            let mut started = false;
            for line in std::io::BufReader::new(log).lines() {
                let Ok(line) = line else { break };
                if !started && line.contains("event=\"start\"") {
                    started = true;
                    let _ = tx.send(idle_gate_of(&line));
                }
            }
        });
    let drain = match drain {
        Ok(d) => d,
        Err(e) => {
            // The agent is ours and not yet reaped: end it (it restores on SIGTERM) and reap it.
            // SAFETY: kill on our own unreaped child.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
            // Cleared before it is reaped (as below): a reaped pid may name another process.
            let _ = super::child::wait_unreaped(pid as libc::pid_t);
            AGENT.store(0, Ordering::SeqCst);
            let _ = child.wait();
            return Err(e).context("starting the thread that reads the agent's log");
        }
    };
    let skip = skip_intervals(intervals);
    let mut steady = None;
    let mut window_s = 0.0;
    // The start line, or the end of the log (the agent exited), or a stop signal.
    let mut start_line = None;
    for _ in 0..2400 {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(l) => {
                start_line = Some(l);
                break;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if stopped() => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    let idle_gate = start_line.clone().unwrap_or_default();
    if intervals >= skip + 3 && start_line.is_some() {
        let started = Instant::now();
        let at = |k: u64| started + interval * k as u32 + interval / 2;
        // In short steps, so a stop signal ends the wait.
        let sleep_until = |t: Instant| loop {
            let now = Instant::now();
            if t <= now || stopped() {
                break;
            }
            std::thread::sleep((t - now).min(Duration::from_millis(50)));
        };
        sleep_until(at(skip));
        let a = (run_time_ns(pid), Instant::now());
        sleep_until(at(intervals - 1));
        let b = (run_time_ns(pid), Instant::now());
        if let ((Some(ca), ta), (Some(cb), tb)) = (a, b) {
            window_s = tb.duration_since(ta).as_secs_f64();
            if window_s > 0.0 && cb >= ca {
                steady = Some((cb - ca) as f64 / 1e9 / window_s * 100.0);
            }
        }
    }
    // Ended but not reaped first: until then its pid cannot name another process, so a stop
    // signal can still be passed on to it.
    let ended = super::child::wait_unreaped(pid as libc::pid_t);
    AGENT.store(0, Ordering::SeqCst);
    ended.context("waiting for the agent")?;
    let (cpu_s, code) = wait_rusage(pid as libc::pid_t)?;
    // Reaped by wait4 above; dropping a Child neither waits nor kills.
    drop(child);
    let _ = drain.join();
    if code != 0 {
        bail!("agent exited with {code}");
    }
    Ok(Cost {
        steady_percent: steady,
        idle_gate,
        total_cpu_s: cpu_s,
        total_wall_s: t0.elapsed().as_secs_f64(),
        window_s,
    })
}

/// The `idle_gate="..."` field of the agent's start line (text log format).
fn idle_gate_of(line: &str) -> String {
    line.split_once("idle_gate=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(v, _)| v.to_string())
        .unwrap_or_else(|| "not stated".into())
}

/// Wait for child `pid`: (user+sys CPU seconds, exit code or -1).
fn wait_rusage(pid: libc::pid_t) -> Result<(f64, i32)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data, zero-initialisable; wait4 on our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = loop {
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if rc < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break rc;
    };
    if rc != pid {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok((tv(ru.ru_utime) + tv(ru.ru_stime), code))
}

fn hold(n: u32, waker_ms: u64) -> Result<ExitCode> {
    let mut handles = Vec::new();
    if waker_ms > 0 {
        let waker = std::thread::Builder::new().spawn(move || loop {
            std::thread::sleep(Duration::from_millis(waker_ms));
        });
        handles.push(waker.context("starting the waker thread")?);
    }
    for i in 0..n {
        let t = std::thread::Builder::new().spawn(|| loop {
            std::thread::sleep(Duration::from_secs(3600));
        });
        handles.push(t.with_context(|| format!("starting sleeping thread {} of {n}", i + 1))?);
    }
    outln!("ready")?;
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: OverheadArgs) -> Result<ExitCode> {
    if let Some(n) = args.hold_threads {
        return hold(n, args.waker_ms);
    }
    // Refused before the helper and its threads start.
    let interval_ns = super::parse_interval(&args.interval)?;
    let skip = skip_intervals(args.intervals);
    if args.intervals < skip + 3 {
        bail!(
            "--intervals {}: at least {} are needed ({skip} start-up interval{} left out, then \
             a steady-state window of two intervals from the middle of the next interval to \
             the middle of the last: {skip} + 1/2 + 2 + 1/2)",
            args.intervals,
            skip + 3,
            if skip == 1 { " is" } else { "s are" }
        );
    }
    // A waker slower than a whole agent run never wakes while the agent watches: the summary
    // would say "one of them wakes every N ms" of a run where none did (CLI probe, session 30).
    let run_ms = interval_ns as f64 * 1e-6 * args.intervals as f64;
    if args.waker_ms > 0 && args.waker_ms as f64 > run_ms {
        bail!(
            "--waker-ms {}: longer than an agent run ({} intervals of {} = {:.0} ms), so the \
             thread would never wake while the agent watches: at most {:.0} ms here, or more \
             --intervals",
            args.waker_ms,
            args.intervals,
            args.interval,
            run_ms,
            run_ms.floor()
        );
    }
    // The whole measurement runs `repeat` agents of `intervals` intervals each: a typo's
    // billions of repetitions or hour-long intervals would run for years in silence.
    let total_s = interval_ns as f64 * 1e-9 * args.intervals as f64 * f64::from(args.repeat);
    if total_s > MAX_TOTAL_S {
        bail!(
            "--repeat {} x --intervals {} x --interval {} is {} of measuring: at most {} \
             (fewer repetitions, intervals or a shorter interval)",
            args.repeat,
            args.intervals,
            args.interval,
            super::human_time(total_s),
            super::human_time(MAX_TOTAL_S)
        );
    }
    if total_s >= 60.0 {
        eprintln!(
            "agent-overhead: {} agent run(s) of {} x {}: about {}",
            args.repeat,
            args.intervals,
            args.interval,
            super::human_time(total_s)
        );
    }
    let exe = std::env::current_exe().context("own executable")?;
    // Caught before anything starts (the agent and the helper get the default actions back at
    // exec): a stop ends the agent through its restore path, then everything is cleaned up.
    super::child::catch_stop_signals(on_stop)?;
    let helper = Command::new(&exe)
        .args([
            "agent-overhead",
            "--hold-threads",
            &args.threads.to_string(),
            "--waker-ms",
            &args.waker_ms.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn helper")?;
    let mut run = Cleanup { helper, dir: None };
    let mut line = [0u8; 6];
    if let Some(out) = run.helper.stdout.as_mut() {
        if let Err(e) = out.read_exact(&mut line) {
            let what = format!(
                "the helper holding --threads {} sleeping threads did not start",
                args.threads
            );
            if e.kind() != std::io::ErrorKind::UnexpectedEof {
                return Err(e).context(what);
            }
            // Its output ended: it has exited, after printing its own error (its stderr is ours).
            let ended = match run.helper.wait() {
                Ok(st) => st.to_string(),
                Err(w) => format!("status unknown: {w}"),
            };
            bail!("{what} (it ended with {ended}; its own error is above)");
        }
    }
    let hp = run.helper.id();
    let threads =
        counterpoint_counters::tasks::thread_ids(std::path::Path::new("/proc"), hp as i32)
            .map(|t| t.len())
            .unwrap_or(0);
    let interval = Duration::from_nanos(interval_ns);
    let dir = tempfile_dir()?;
    run.dir = Some(dir.clone());
    let mut steady = Vec::new();
    let mut totals = Vec::new();
    let mut idle_gate = String::new();
    for i in 0..args.repeat {
        let journal = dir.join(format!("overhead-{i}.journal"));
        let cost = run_agent(
            Command::new(&exe)
                .args(["agent", "--policy", "spread", "--interval", &args.interval])
                .args(["--targets", &format!("pid:{hp}")])
                .args(["--max-intervals", &args.intervals.to_string()])
                .args(args.read_every_thread.then_some("--read-every-thread"))
                .arg("--journal")
                .arg(&journal),
            interval,
            args.intervals,
        );
        if stopped() {
            break;
        }
        let cost = cost?;
        let total = cost.total_cpu_s / cost.total_wall_s * 100.0;
        idle_gate = cost.idle_gate.clone();
        totals.push(total);
        if let Some(p) = cost.steady_percent {
            steady.push(p);
        }
        if !args.json {
            outln!(
                "run {}: steady state {} over {:.2} s (intervals {}..{}); whole run {:.4} s CPU over {:.2} s = {:.3} % (start-up and restore included)",
                i + 1,
                cost.steady_percent
                    .map(|p| format!("{p:.3} % of one core"))
                    .unwrap_or_else(|| "not measured".into()),
                cost.window_s,
                skip + 1,
                args.intervals,
                cost.total_cpu_s,
                cost.total_wall_s,
                total
            )?;
        }
    }
    drop(run);
    // After a stop, the runs that were measured still say what they measured (a stop after two
    // of three runs said "nothing measured" under their printed results; CLI probe, session 30).
    let stopped = stop_code(steady.len(), args.repeat);
    if stopped.is_none() || !steady.is_empty() {
        let complete = stopped.is_none();
        summarize(
            &args,
            threads,
            interval_ns,
            &mut steady,
            &mut totals,
            &idle_gate,
            complete,
        )?;
    }
    Ok(stopped.unwrap_or(ExitCode::SUCCESS))
}

/// The median of the runs made (all of them when `complete`), as text or JSON.
fn summarize(
    args: &OverheadArgs,
    threads: usize,
    interval_ns: u64,
    steady: &mut Vec<f64>,
    totals: &mut Vec<f64>,
    idle_gate: &str,
    complete: bool,
) -> Result<()> {
    let skip = skip_intervals(args.intervals);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let steady_median = median(steady);
    let total_median = median(totals);
    let Some(m) = steady_median else {
        bail!("the steady state could not be measured (the agent's start line was not seen)");
    };
    // The goal is stated for 500 threads at 1 s: a run at least as demanding that stays under
    // it meets it, a run at most as demanding that does not misses it; any other says nothing.
    let meets = verdict(args.threads, interval_ns, m);
    if args.json {
        outln!(
            "{}",
            serde_json::json!({"watched_threads": threads, "interval": args.interval,
                "intervals": args.intervals, "skipped_intervals": skip,
                "steady_percent_of_one_core": steady, "median_percent": m,
                "whole_run_percent": totals, "whole_run_median_percent": total_median,
                "goal_percent": GOAL_PERCENT, "meets_goal": meets,
                "waker_ms": args.waker_ms, "idle_gate": idle_gate,
                "runs": totals.len(), "complete": complete})
        )?;
    } else {
        let waker = if args.waker_ms > 0 {
            format!(" (one of them wakes every {} ms)", args.waker_ms)
        } else {
            " (all asleep)".into()
        };
        outln!("idle gate: {idle_gate}")?;
        let of_runs = if complete {
            String::new()
        } else {
            format!(" (of the {} run(s) that finished)", totals.len())
        };
        outln!(
            "watching {threads} thread{}{waker} at {} for {} intervals: steady state median{of_runs} {m:.3} % of one core; \
             goal < {GOAL_PERCENT} % (500 threads at 1 s): {}",
            if threads == 1 { "" } else { "s" },
            args.interval,
            args.intervals,
            match meets {
                Some(true) => "MET",
                Some(false) => "NOT MET",
                None => "not comparable (a run easier than the goal's under it, or a harder one over it)",
            }
        )?;
    }
    Ok(())
}

/// After a stop signal: say so and give the shell's status for it (128+N); the caller has
/// ended the helper and removed the temporary directory.
fn stop_code(finished: usize, repeat: u32) -> Option<ExitCode> {
    let sig = STOPPED_BY.load(Ordering::SeqCst);
    (sig != 0).then(|| {
        use std::io::Write;
        // Only runs whose steady state was measured have a median to give.
        let measured = match finished {
            0 => "nothing measured".to_string(),
            n => format!("{n} of {repeat} run(s) measured: their median follows"),
        };
        let _ = writeln!(
            std::io::stderr(),
            "counterpoint agent-overhead: stopped by {}; the agent was ended through its restore \
             path and the temporary files were removed; {measured}",
            counterpoint_host::signals::name(sig)
        );
        ExitCode::from(128 + sig as u8)
    })
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("counterpoint-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_intervals_are_left_out() {
        assert_eq!(skip_intervals(4), 1);
        assert_eq!(skip_intervals(20), 3);
        assert_eq!(skip_intervals(8), 2);
        // The agent's own threads are found and their run time read.
        let me = std::process::id();
        assert!(run_time_ns(me).is_some_and(|ns| ns > 0));
        assert!(run_time_ns(u32::MAX).is_none());
    }

    /// A verdict only where the run's figure decides the goal: the goal's own shape either way,
    /// a harder run only when under it, an easier one only when over it.
    #[test]
    fn a_verdict_only_where_the_run_decides_the_goal() {
        let s = 1_000_000_000;
        assert_eq!(verdict(500, s, 0.1), Some(true));
        assert_eq!(verdict(500, s, 0.3), Some(false));
        assert_eq!(verdict(2000, s / 10, 0.1), Some(true));
        assert_eq!(verdict(2000, s / 10, 0.3), None);
        assert_eq!(verdict(0, s / 10, 0.1), None);
        assert_eq!(verdict(0, 2 * s, 0.1), None);
        assert_eq!(verdict(100, 2 * s, 0.3), Some(false));
        assert_eq!(verdict(499, s, 0.1), None);
    }

    #[test]
    fn the_idle_gate_is_read_off_the_start_line() {
        let line = r#"... INFO agent started event="start" policy="spread" idle_gate="off: turned off" pid=3"#;
        assert_eq!(idle_gate_of(line), "off: turned off");
        assert_eq!(idle_gate_of("event=\"start\""), "not stated");
    }
}
