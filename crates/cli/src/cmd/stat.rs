//! `counterpoint stat`: count events for a command, processes or CPUs, as `perf stat` does, with
//! the same `-x` column layout so existing parsers work. Output goes to stderr (like perf) unless
//! `-o FILE` is given, so the command's own stdout stays clean.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::metric::{self, Metric};
use counterpoint_core::sample::{CounterValue, Sample};
use counterpoint_counters::count::{spawn_stopped, ChildExit, EventReading, RunningChild, Status};
use counterpoint_counters::spec::{EventList, EventSpec};
use counterpoint_counters::{parse_event_list, CounterSet, PmuTree, Target};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// perf stat's default event set (the hardware ones are reported unsupported without a PMU).
pub const DEFAULT_EVENTS: &str =
    "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,branches,branch-misses";

#[derive(Args)]
#[command(after_help = "\
Examples:
  counterpoint stat -- ls -R /usr/share            perf's default set for one command
  counterpoint stat -e cycles,task-clock -- true   cycles: <not supported> (no hardware PMU here)
  counterpoint stat -x, -e task-clock,page-faults -- gzip -c big > /dev/null
  counterpoint stat -e '{task-clock,page-faults},cs:u' -p 1234 -- sleep 2
  counterpoint stat -a -I 1000 -e cpu-clock,context-switches      (Ctrl-C to stop)
  counterpoint stat -C 0-1 --json -e msr/tsc/,cpu-clock -- sleep 1

Events: perf names (cycles, instructions, cache-misses, LLC-load-misses, task-clock, cs, ...),
modifiers :u :k :h, raw rNNNN, sys:tracepoint, pmu/term=value,.../ and pmu/named-event/
resolved through /sys/bus/event_source/devices, groups {a,b,c}.
-x columns: value,unit,event,run time (ns),% running,metric value,metric unit.
The command's exit code is returned (128+N when killed by signal N).")]
pub struct StatArgs {
    /// Events to count (repeatable; comma-separated; groups in braces).
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    events: Vec<String>,
    /// Count these processes (comma-separated PIDs): every thread now, and what they create.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pid: Option<String>,
    /// Count every task on every online CPU.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Count every task on these CPUs (kernel list format, e.g. 0-3,6).
    #[arg(short = 'C', long = "cpu", value_name = "CPUS",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    cpus: Option<String>,
    /// Print counts every MS milliseconds (deltas), as `perf stat -I`.
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    interval_ms: Option<u64>,
    /// CSV-like output with this separator, in perf stat -x's column layout.
    #[arg(short = 'x', long = "field-separator", value_name = "SEP",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    separator: Option<String>,
    /// Print one JSON object (one per interval with -I).
    #[arg(long, conflicts_with = "separator")]
    json: bool,
    /// Write the counts to FILE instead of stderr.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Root of the sysfs tree used to resolve PMU names (fixture trees in tests).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: PathBuf,
    /// Count through the broker (`counterpoint daemon`) at SOCKET (default socket without it).
    #[arg(long, value_name = "SOCKET", num_args = 0..=1, default_missing_value = "")]
    daemon: Option<PathBuf>,
    /// Command to run (after `--`); with -p/-a/-C it only sets how long to count.
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_stop_handler() {
    let h = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
    }
}

fn ignore_sigint() {
    // The terminal's Ctrl-C goes to the child; we print its counts when it ends, as perf does.
    // SAFETY: setting a signal disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

/// Parse every `-e` (or the default set).
pub fn parse_events(events: &[String], tree: &PmuTree) -> Result<EventList> {
    let mut list = EventList::default();
    if events.is_empty() {
        return Ok(parse_event_list(DEFAULT_EVENTS, tree)?);
    }
    for e in events {
        list.extend(parse_event_list(e, tree)?);
    }
    Ok(list)
}

fn online_cpus() -> Result<Vec<usize>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let set = CpuSet::parse_list(text.trim()).with_context(|| format!("parsing {path}"))?;
    Ok(set.iter().map(|c| c as usize).collect())
}

fn build_target(args: &StatArgs) -> Result<Option<Target>> {
    let n = usize::from(args.pid.is_some())
        + usize::from(args.all_cpus)
        + usize::from(args.cpus.is_some());
    if n > 1 {
        bail!("choose one target: -p, -a or -C");
    }
    if let Some(p) = &args.pid {
        let mut tids = Vec::new();
        for part in p.split(',').map(str::trim) {
            let pid: i32 = part
                .parse()
                .ok()
                .filter(|&v: &i32| v > 0)
                .with_context(|| format!("-p: '{part}' is not a process id"))?;
            match Target::process(pid)? {
                Target::Threads(t) => tids.extend(t),
                other => return Ok(Some(other)),
            }
        }
        return Ok(Some(Target::Threads(tids)));
    }
    if args.all_cpus {
        return Ok(Some(Target::Cpus(online_cpus()?)));
    }
    if let Some(c) = &args.cpus {
        let set = CpuSet::parse_list(c).map_err(|e| anyhow::anyhow!("-C '{c}': {e}"))?;
        let online = online_cpus()?;
        let cpus: Vec<usize> = set.iter().map(|c| c as usize).collect();
        if let Some(bad) = cpus.iter().find(|c| !online.contains(c)) {
            bail!(
                "-C: CPU {bad} is not online (online: {})",
                CpuSet::from_iter(online.iter().map(|&c| c as u32))
            );
        }
        return Ok(Some(Target::Cpus(cpus)));
    }
    Ok(None)
}

/// Shell status of a process ended by SIGPIPE: what `stat` exits with when its own output is a
/// closed pipe, as a program with SIGPIPE at its default would.
const EXIT_SIGPIPE: u8 = 128 + libc::SIGPIPE as u8;

/// How long a command stopped by `stat` (closed output, error) gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// Whether `err` is a write to a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether process `pid` has ended: gone from `/proc`, or a zombie nobody reaped yet.
fn process_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(text) => text
            .rfind(')')
            .and_then(|i| text[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// The processes of `-p`, to stop counting when every one has ended (as perf does).
fn target_pids(args: &StatArgs) -> Vec<i32> {
    args.pid
        .as_deref()
        .map(|p| p.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Whether stderr is a pipe nobody reads any more (where an error message would go nowhere,
/// and printing it would fail).
fn stderr_gone() -> bool {
    let mut p = libc::pollfd {
        fd: libc::STDERR_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: polling one descriptor with a zero timeout; `p` is ours.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLERR != 0
}

// [stat --daemon: broker] counting through the broker lives in its own file.
#[path = "stat_daemon.rs"]
mod stat_daemon;

pub fn run(args: StatArgs) -> Result<ExitCode> {
    if let Some(socket) = args.daemon.clone() {
        return stat_daemon::run(&args, Some(&socket));
    }
    match run_counting(args) {
        // An error nobody can read: end as quietly as a closed output does.
        Err(_) if stderr_gone() => Ok(ExitCode::from(EXIT_SIGPIPE)),
        other => other,
    }
}

fn run_counting(args: StatArgs) -> Result<ExitCode> {
    let tree = PmuTree::new(&args.sysfs_root);
    let list = parse_events(&args.events, &tree)?;
    if let Some(ms) = args.interval_ms {
        if ms < 10 {
            bail!("-I {ms}: the interval must be at least 10 ms");
        }
    }
    let explicit = build_target(&args)?;
    if explicit.is_none() && args.command.is_empty() {
        bail!("nothing to count: give a command after `--`, or -p PID, -a or -C CPUS");
    }
    let out: Box<dyn Write> = match &args.output {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => Box::new(std::io::stderr()),
    };
    let fmt = Format {
        sep: args.separator.clone(),
        json: args.json,
    };

    // Set up the target; a command is forked stopped so counting starts exactly at its exec.
    // If anything fails before it starts, dropping it kills and reaps it.
    let mut stopped = None;
    let target = match explicit {
        Some(t) => t,
        None => {
            let child = spawn_stopped(&args.command)?;
            let t = Target::Child(child.pid());
            stopped = Some(child);
            t
        }
    };
    let workload_only =
        matches!(target, Target::Threads(_) | Target::Cpus(_)) && !args.command.is_empty();
    let mut set = CounterSet::open(&list, &target, &tree)?;
    let start = Instant::now();
    let mut child: Option<RunningChild> = None;
    if let Some(s) = stopped {
        child = Some(s.start()?);
        ignore_sigint();
    } else {
        set.enable()?;
        if let (Some(pids), Target::Threads(first)) = (&args.pid, &target) {
            follow_setup_threads(&mut set, &tree, pids, first)?;
        }
        if workload_only {
            // With -p/-a/-C the command only times the measurement.
            let s = spawn_stopped(&args.command)?;
            child = Some(s.start()?);
            ignore_sigint();
        } else {
            install_stop_handler();
        }
    }
    let mut session = Session {
        args: &args,
        fmt,
        out,
        set,
        child,
        exit: None,
        start,
    };
    match session.count() {
        Ok(()) => Ok(match session.exit {
            Some(e) => ExitCode::from(e.shell_code().clamp(0, 255) as u8),
            None => ExitCode::SUCCESS,
        }),
        Err(err) => {
            // Never leave the command we started running (or unreaped) behind us.
            if let (Some(c), None) = (&session.child, session.exit) {
                let _ = c.terminate(TERM_GRACE);
            }
            if is_broken_pipe(&err) {
                // Our output is gone: end quietly, as a program killed by SIGPIPE would.
                return Ok(ExitCode::from(EXIT_SIGPIPE));
            }
            Err(err)
        }
    }
}

/// A measurement under way: the counters, the command started (if any) and where to print.
struct Session<'a> {
    args: &'a StatArgs,
    fmt: Format,
    out: Box<dyn Write>,
    set: CounterSet,
    child: Option<RunningChild>,
    /// How the command ended, once it has.
    exit: Option<ChildExit>,
    start: Instant,
}

impl Session<'_> {
    /// Whether to stop waiting: the command ended, a stop signal came, or every `-p` process
    /// ended.
    fn poll_end(&mut self, pids: &[i32]) -> Result<bool> {
        if let Some(c) = &self.child {
            if let Some(e) = c.try_wait()? {
                self.exit = Some(e);
                return Ok(true);
            }
        }
        if STOP.load(Ordering::SeqCst) {
            return Ok(true);
        }
        // With a command, the command sets the duration; otherwise the processes' lives do.
        Ok(self.child.is_none() && !pids.is_empty() && pids.iter().all(|&p| process_ended(p)))
    }

    fn count(&mut self) -> Result<()> {
        let pids = target_pids(self.args);
        let mut prev: Option<Vec<EventReading>> = None;
        match self.args.interval_ms {
            Some(ms) => {
                let step = Duration::from_millis(ms);
                let mut next = self.start + step;
                loop {
                    // Wait for the next tick, the end of what is counted or a stop signal.
                    let mut ended = false;
                    loop {
                        if self.poll_end(&pids)? {
                            ended = true;
                            break;
                        }
                        let now = Instant::now();
                        if now >= next {
                            break;
                        }
                        std::thread::sleep((next - now).min(Duration::from_millis(5)));
                    }
                    let now = Instant::now();
                    let cur = self.set.read_all()?;
                    let delta = deltas(&cur, prev.as_deref());
                    let wall = now.duration_since(self.start);
                    let span = match &prev {
                        Some(_) => now.duration_since(next - step).min(step),
                        None => wall.min(step),
                    };
                    print_counts(
                        &mut self.out,
                        &self.fmt,
                        &delta,
                        span,
                        Some(wall),
                        self.args,
                    )?;
                    prev = Some(cur);
                    if ended {
                        break;
                    }
                    next += step;
                }
            }
            None => {
                match &self.child {
                    Some(c) => self.exit = Some(c.wait()?),
                    None => {
                        while !self.poll_end(&pids)? {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                let wall = self.start.elapsed();
                let r = self.set.read_all()?;
                print_counts(&mut self.out, &self.fmt, &r, wall, None, self.args)?;
            }
        }
        self.out.flush()?;
        Ok(())
    }
}

/// Threads created while the counters were being opened, by threads not yet watched, escape
/// inheritance: rescan `/proc/PID/task` and add them until a rescan finds nothing new. Once a
/// rescan is clean every live thread is watched or inherits from a watched one.
fn follow_setup_threads(
    set: &mut CounterSet,
    tree: &PmuTree,
    pids: &str,
    first: &[i32],
) -> Result<()> {
    let mut known: std::collections::BTreeSet<i32> = first.iter().copied().collect();
    for _ in 0..100 {
        let mut new = Vec::new();
        for part in pids.split(',').map(str::trim) {
            let Ok(pid) = part.parse::<i32>() else {
                continue;
            };
            // The process may have exited; its counts so far are kept.
            if let Ok(Target::Threads(tids)) = Target::process(pid) {
                new.extend(tids.into_iter().filter(|t| !known.contains(t)));
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        known.extend(new.iter().copied());
        set.add_threads(&new, tree)?;
    }
    Ok(())
}

fn deltas(cur: &[EventReading], prev: Option<&[EventReading]>) -> Vec<EventReading> {
    match prev {
        None => cur.to_vec(),
        Some(p) => cur
            .iter()
            .zip(p)
            .map(|(c, p)| EventReading {
                value: match (c.value, p.value) {
                    (Some(a), Some(b)) => Some(a.delta_since(&b)),
                    (a, _) => a,
                },
                ..c.clone()
            })
            .collect(),
    }
}

struct Format {
    sep: Option<String>,
    json: bool,
}

/// A metric value printed on an event's line.
struct LineMetric {
    value: f64,
    unit: String,
    name: &'static str,
}

/// Metrics per event line: the core metrics (attached to their first event), and for other
/// software counts a per-second rate over wall time.
fn line_metrics(readings: &[EventReading], span: Duration) -> Vec<Vec<LineMetric>> {
    let mut sample = Sample::new(None, span.as_nanos() as u64);
    // The same event asked for twice (or with other modifiers) counts the same thing again:
    // metrics use its first occurrence only.
    let mut seen: Vec<&EventSpec> = Vec::new();
    for r in readings {
        if seen
            .iter()
            .any(|s| s.canonical == r.spec.canonical && s.type_ == r.spec.type_)
        {
            continue;
        }
        seen.push(&r.spec);
        if let Some(v) = r.value {
            // Hybrid machines count one generic event per core PMU (different PMU types, same
            // canonical name): metrics use their sum.
            let sum = match sample.values.get(&r.spec.canonical) {
                Some(prev) => CounterValue {
                    raw: prev.raw.wrapping_add(v.raw),
                    time_enabled_ns: prev.time_enabled_ns + v.time_enabled_ns,
                    time_running_ns: prev.time_running_ns + v.time_running_ns,
                },
                None => v,
            };
            sample.set(&r.spec.canonical, sum);
        }
    }
    let secs = span.as_secs_f64();
    let mut out: Vec<Vec<LineMetric>> = readings.iter().map(|_| Vec::new()).collect();
    let core: Vec<Metric> = metric::standard();
    for m in &core {
        let Some(first) = m.events().first().copied() else {
            continue;
        };
        let Some(idx) = readings
            .iter()
            .position(|r| r.spec.canonical == first && r.value.is_some())
        else {
            continue;
        };
        if let Some(v) = m.eval_sample(&sample) {
            out[idx].push(LineMetric {
                value: v,
                unit: m.unit.to_string(),
                name: m.name,
            });
        }
    }
    for (i, r) in readings.iter().enumerate() {
        if !out[i].is_empty() || secs <= 0.0 {
            continue;
        }
        let sw_count =
            r.spec.type_ == counterpoint_counters::spec::TYPE_SOFTWARE && r.spec.unit.is_none();
        if let (true, Some(v)) = (sw_count, r.display_value()) {
            let rate = v / secs;
            let (value, unit) = if rate >= 1e6 {
                (rate / 1e6, "M/sec")
            } else if rate >= 1e3 {
                (rate / 1e3, "K/sec")
            } else {
                (rate, "/sec")
            };
            out[i].push(LineMetric {
                value,
                unit: unit.to_string(),
                name: "rate_per_s",
            });
        }
    }
    out
}

fn value_text(r: &EventReading) -> String {
    match (&r.status, r.value) {
        (Status::NotSupported(_), _) | (_, None) => "<not supported>".into(),
        (_, Some(v)) => match v.scaled() {
            None => "<not counted>".into(),
            Some(x) => {
                let x = x * r.spec.scale;
                if r.spec.scale != 1.0 {
                    format!("{x:.2}")
                } else {
                    format!("{}", x.round() as u64)
                }
            }
        },
    }
}

fn print_counts(
    out: &mut dyn Write,
    fmt: &Format,
    readings: &[EventReading],
    span: Duration,
    interval_ts: Option<Duration>,
    args: &StatArgs,
) -> Result<()> {
    let metrics = line_metrics(readings, span);
    if fmt.json {
        let events: Vec<_> = readings
            .iter()
            .zip(&metrics)
            .map(|(r, ms)| {
                let v = r.value.unwrap_or_default();
                serde_json::json!({
                    "event": r.spec.name,
                    "canonical": r.spec.canonical,
                    "supported": r.status == Status::Counting,
                    "reason": match &r.status { Status::NotSupported(s) => Some(s.clone()), _ => None },
                    "value": r.display_value(),
                    "unit": r.spec.unit,
                    "raw": r.value.map(|v| v.raw),
                    "time_enabled_ns": r.value.map(|_| v.time_enabled_ns),
                    "time_running_ns": r.value.map(|_| v.time_running_ns),
                    "counted_percent": r.counted_percent(),
                    "metrics": ms.iter().map(|m| serde_json::json!({"name": m.name, "value": m.value, "unit": m.unit})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let obj = serde_json::json!({
            "command": args.command,
            "interval_end_s": interval_ts.map(|t| t.as_secs_f64()),
            "elapsed_ns": span.as_nanos() as u64,
            "events": events,
        });
        writeln!(out, "{obj}")?;
        return Ok(());
    }
    if let Some(sep) = &fmt.sep {
        let prefix = interval_ts
            .map(|t| format!("{:.9}{sep}", t.as_secs_f64()))
            .unwrap_or_default();
        for (r, ms) in readings.iter().zip(&metrics) {
            let v = r.value.unwrap_or_default();
            let pct = r.counted_percent().unwrap_or(100.0);
            let (mv, mu) = match ms.first() {
                Some(m) => (format!("{:.3}", m.value), m.unit.clone()),
                None => (String::new(), String::new()),
            };
            writeln!(
                out,
                "{prefix}{}{sep}{}{sep}{}{sep}{}{sep}{:.2}{sep}{mv}{sep}{mu}",
                value_text(r),
                r.spec.unit.as_deref().unwrap_or(""),
                r.spec.name,
                v.time_running_ns,
                pct,
            )?;
            for m in ms.iter().skip(1) {
                writeln!(
                    out,
                    "{prefix}{sep}{sep}{sep}{sep}{sep}{:.3}{sep}{}",
                    m.value, m.unit
                )?;
            }
        }
        return Ok(());
    }
    // Human format, after perf's.
    let ts = interval_ts.map(|t| format!("{:>15.9} ", t.as_secs_f64()));
    if ts.is_none() {
        let what = match (&args.pid, &args.cpus, args.all_cpus) {
            (Some(p), _, _) => format!("process id '{p}'"),
            (_, Some(c), _) => format!("CPU(s) {c}"),
            (_, _, true) => "system wide".into(),
            _ => format!("'{}'", args.command.join(" ")),
        };
        writeln!(out, "\n Performance counter stats for {what}:\n")?;
    }
    let ts = ts.unwrap_or_default();
    for (r, ms) in readings.iter().zip(&metrics) {
        let unit = r.spec.unit.as_deref().unwrap_or("");
        let mut line = format!("{ts}{:>18} {:<5} {:<32}", value_text(r), unit, r.spec.name);
        if let Some(m) = ms.first() {
            line.push_str(&format!(" # {:>9.3} {}", m.value, m.unit));
        }
        if let Some(v) = r.value {
            if v.multiplexed() {
                line.push_str(&format!("  ({:.2}%)", 100.0 * v.counted_fraction()));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
        for m in ms.iter().skip(1) {
            writeln!(out, "{ts}{:>57} # {:>9.3} {}", "", m.value, m.unit)?;
        }
    }
    if interval_ts.is_none() {
        // Each distinct reason once, naming its events.
        let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
        for r in readings {
            if let Status::NotSupported(why) = &r.status {
                match reasons.iter_mut().find(|(w, _)| w == why) {
                    Some((_, names)) => names.push(r.spec.name.clone()),
                    None => reasons.push((why.clone(), vec![r.spec.name.clone()])),
                }
            }
        }
        writeln!(out)?;
        for (why, names) in reasons {
            writeln!(out, "   <not supported>: {}: {why}", names.join(", "))?;
        }
        writeln!(out, "\n{:>18.9} seconds time elapsed\n", span.as_secs_f64())?;
    }
    Ok(())
}

/// `counterpoint bench read`.
#[derive(Args)]
pub struct BenchReadArgs {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Timed rounds (median reported).
    #[arg(long, default_value_t = 21)]
    rounds: usize,
    /// Reads per round and path.
    #[arg(long, default_value_t = 100_000)]
    iterations: usize,
}

/// ns per read: our layer vs raw read(2) on the same fd, perf-event2's read, a group of three,
/// and the user-space path (here: none).
pub fn bench_read(args: BenchReadArgs) -> Result<ExitCode> {
    if args.rounds == 0 || args.iterations == 0 {
        bail!("--rounds and --iterations must be positive");
    }
    let b = counterpoint_counters::readbench::measure(args.rounds, args.iterations)
        .context("opening task-clock counters on this thread")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&b)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "counter read cost, task-clock on this thread (median of {} rounds x {} reads)",
        b.rounds, b.iterations_per_round
    );
    println!(
        "  our layer (one read(2), stack buffer)  {:>8.1} ns",
        b.ours_ns
    );
    println!(
        "  raw read(2), same fd                   {:>8.1} ns",
        b.raw_read_ns
    );
    println!(
        "  ours / raw (median per round)          {:>8.3}x",
        b.ours_over_raw
    );
    println!(
        "  perf-event2 Counter::read_full         {:>8.1} ns",
        b.perf_event2_read_full_ns
    );
    println!(
        "  group of three, one read(2)            {:>8.1} ns",
        b.group3_ns
    );
    println!("  user-space read (rdpmc): {}", b.user_space.explanation);
    if let Some(cap) = b.user_space.software_cap_user_rdpmc {
        println!(
            "    task-clock mmap page: cap_user_rdpmc = {}",
            u8::from(cap)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: StatArgs,
    }

    fn reading(list: &str, raw: u64, enabled: u64, running: u64) -> EventReading {
        let spec = parse_event_list(list, &PmuTree::new("/nonexistent"))
            .unwrap()
            .groups[0]
            .members[0]
            .clone();
        EventReading {
            spec,
            value: Some(CounterValue {
                raw,
                time_enabled_ns: enabled,
                time_running_ns: running,
            }),
            status: Status::Counting,
        }
    }

    fn render(args: &[&str], readings: &[EventReading]) -> String {
        let w = Wrap::parse_from(std::iter::once("stat").chain(args.iter().copied()));
        let fmt = Format {
            sep: w.args.separator.clone(),
            json: w.args.json,
        };
        let mut out = Vec::new();
        print_counts(
            &mut out,
            &fmt,
            readings,
            Duration::from_secs(1),
            None,
            &w.args,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn multiplexed_counts_are_scaled_with_percentage() {
        let r = [reading("page-faults", 1000, 400, 100)];
        let csv = render(&["-x,", "--", "true"], &r);
        assert_eq!(csv.trim(), "4000,,page-faults,100,25.00,4.000,K/sec");
        let human = render(&["--", "true"], &r);
        let line = human.lines().find(|l| l.contains("page-faults")).unwrap();
        assert!(line.starts_with("              4000"), "{line}");
        assert!(line.ends_with("(25.00%)"), "{line}");
    }

    #[test]
    fn never_running_counter_is_not_counted() {
        let r = [reading("cs", 0, 400, 0)];
        let csv = render(&["-x,", "--", "true"], &r);
        assert!(csv.starts_with("<not counted>,,cs,0,0.00,"), "{csv}");
    }

    #[test]
    fn ipc_and_mpki_on_their_event_lines() {
        let r = [
            reading("cycles", 2000, 10, 10),
            reading("instructions", 3000, 10, 10),
            reading("cache-misses", 6, 10, 10),
        ];
        let csv = render(&["-x,", "--", "true"], &r);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "2000,,cycles,10,100.00,0.667,cycles per insn");
        assert_eq!(
            lines[1],
            "3000,,instructions,10,100.00,1.500,insn per cycle"
        );
        assert_eq!(
            lines[2],
            "6,,cache-misses,10,100.00,2.000,LLC misses per 1k insn"
        );
        // A second metric on the same event: an extra row, first five columns empty.
        assert_eq!(lines[3], ",,,,,384.000,bytes/s memory (LLC misses x 64 B)");
    }

    #[test]
    fn duplicate_event_is_not_summed_into_metrics() {
        // 0.5 s of task-clock over 1 s: 0.5 CPUs, whether asked for once or twice.
        let one = reading("task-clock", 500_000_000, 10, 10);
        let ms = line_metrics(&[one.clone(), one], Duration::from_secs(1));
        assert_eq!(ms[0].len(), 1);
        assert!((ms[0][0].value - 0.5).abs() < 1e-9, "{}", ms[0][0].value);
        assert!(ms[1].is_empty());
        // A user-only copy is not a hybrid sibling (same PMU): not summed either.
        let u = reading("task-clock:u", 100_000_000, 10, 10);
        let ms = line_metrics(
            &[reading("task-clock", 500_000_000, 10, 10), u],
            Duration::from_secs(1),
        );
        assert!((ms[0][0].value - 0.5).abs() < 1e-9, "{}", ms[0][0].value);
        assert!(ms[1].is_empty());
    }
}
