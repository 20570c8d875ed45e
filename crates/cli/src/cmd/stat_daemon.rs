//! `counterpoint stat --daemon [SOCKET]`: the same counts and output as direct counting, but
//! counted through the broker (`counterpoint daemon`), which shares the counters by share and
//! applies its access policy. A child module of `stat`, so it prints with `stat`'s own printer.

use super::{
    parse_events_for, print_counts_at, spawn_stopped, Aggr, Format, Row, StatArgs, Summary,
    DEFAULT_EVENTS, DEFAULT_EVENTS_SYSTEM_WIDE,
};
use anyhow::{bail, Context, Result};
use counterpoint_broker::client::Client;
use counterpoint_broker::proto::Reading;
use counterpoint_core::sample::CounterValue;
use counterpoint_counters::count::{ChildExit, EventReading, Status};
use counterpoint_counters::PmuTree;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Whether the counts are per CPU rather than per task (`-a`, `-C`).
fn system_wide(args: &StatArgs) -> bool {
    args.all_cpus || args.cpus.is_some()
}

/// One run's counts over `span`, as `stat`'s printer takes them; `cpu`: the command's user and
/// system time, when `stat` ran it.
fn one_run(
    readings: Vec<EventReading>,
    span: Duration,
    cpu: Option<(Duration, Duration)>,
) -> Summary {
    Summary {
        rows: vec![Row {
            label: None,
            readings,
        }],
        wall: span,
        runs: 1,
        noise_pct: Vec::new(),
        wall_noise: None,
        cpu,
    }
}

/// Broker readings (one per registration, same event list) summed into `stat`'s readings.
fn to_readings(args: &StatArgs, readings: &[Reading]) -> Result<Vec<EventReading>> {
    let tree = PmuTree::new(&args.sysfs_root);
    let list = parse_events_for(&args.events, &tree, system_wide(args))?;
    let mut out = Vec::new();
    for (i, spec) in list.events().enumerate() {
        let mut value: Option<CounterValue> = None;
        let mut reason = None;
        for r in readings {
            let Some(e) = r.events.get(i) else {
                bail!(
                    "the broker returned {} events, expected {}",
                    r.events.len(),
                    list.len()
                );
            };
            if e.supported {
                let v = value.get_or_insert_with(CounterValue::default);
                v.raw = v.raw.wrapping_add(e.raw);
                let (enabled_ns, running_ns) = counter_times(r, e);
                v.time_enabled_ns += enabled_ns;
                v.time_running_ns += running_ns;
            } else {
                reason = e.reason.clone();
            }
        }
        let status = match (&value, reason) {
            (Some(_), _) => Status::Counting,
            (None, r) => Status::NotSupported(r.unwrap_or_else(|| "not counted".into())),
        };
        out.push(EventReading {
            spec: spec.clone(),
            value,
            status,
        });
    }
    Ok(out)
}

/// An event's (enabled, running) times as direct counting gives them, so the run-time column
/// (and JSON's times) mean what perf's do: running is the kernel counter's own running time
/// while the consumer was scheduled (a task's time on a CPU, not wall time; 0 for a task that
/// never ran, printed `<not counted>` as directly). Enabled is that time scaled by the
/// consumer's coverage, so `% running` and the scaled value stay the broker's (exact at 100 %,
/// estimated when the broker multiplexed). A broker without the counter's time: its own.
fn counter_times(r: &Reading, e: &counterpoint_broker::proto::EventCount) -> (u64, u64) {
    match e.counted_ns {
        Some(counted) if r.running_ns > 0 => {
            let enabled = u128::from(counted) * u128::from(r.enabled_ns) / u128::from(r.running_ns);
            (u64::try_from(enabled).unwrap_or(u64::MAX), counted)
        }
        Some(counted) => (counted, counted),
        None => (r.enabled_ns, r.running_ns),
    }
}

fn targets(args: &StatArgs) -> Result<Vec<String>> {
    if let Some(p) = &args.pid {
        let mut t = Vec::new();
        for pid in p.split(',') {
            let n: i32 = pid
                .trim()
                .parse()
                .with_context(|| format!("-p {p}: '{pid}' is not a process id"))?;
            t.push(format!("pid:{n}"));
        }
        return Ok(t);
    }
    if let Some(c) = &args.cpus {
        return Ok(vec![format!("cpus:{c}")]);
    }
    if args.all_cpus {
        let text = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .context("reading /sys/devices/system/cpu/online")?;
        return Ok(vec![format!("cpus:{}", text.trim())]);
    }
    Ok(Vec::new())
}

/// What `--daemon` refuses, each option named with what it accepts there: the broker counts
/// one run summed over its target.
fn check_daemon_modes(args: &StatArgs) -> Result<()> {
    if args.repeat != 1 {
        bail!(
            "-r {}: with --daemon the number of runs must be 1 (the broker counts one run; \
             direct counting, without --daemon, repeats 1 to {} times)",
            args.repeat,
            super::MAX_REPEAT
        );
    }
    if args.no_aggr {
        bail!("-A/--no-aggr: --daemon prints the sum over the target's CPUs only; per-CPU rows are for direct counting");
    }
    if args.per_thread {
        bail!("--per-thread: --daemon prints the sum over the target's threads only; per-thread rows are for direct counting");
    }
    Ok(())
}

pub(super) fn run(args: &StatArgs, socket: Option<&Path>) -> Result<ExitCode> {
    if let Some(ms) = args.interval_ms {
        if ms < 10 {
            bail!("-I {ms}: the interval must be at least 10 ms");
        }
    }
    let socket = socket.map_or_else(
        counterpoint_broker::server::default_socket,
        Path::to_path_buf,
    );
    check_daemon_modes(args)?;
    let events = if args.events.is_empty() && system_wide(args) {
        DEFAULT_EVENTS_SYSTEM_WIDE.to_string()
    } else if args.events.is_empty() {
        DEFAULT_EVENTS.to_string()
    } else {
        args.events.join(",")
    };
    // Parse here too, so a bad list fails before anything is started.
    parse_events_for(
        &args.events,
        &PmuTree::new(&args.sysfs_root),
        system_wide(args),
    )?;
    let mut client = Client::connect(&socket)?;
    let mut tgts = targets(args)?;
    let mut stopped = None;
    if tgts.is_empty() {
        if args.command.is_empty() {
            bail!("nothing to count: give a command after `--`, or -p PID, -a or -C CPUS");
        }
        let child = spawn_stopped(&args.command)?;
        tgts.push(format!("pid:{}", child.pid()));
        stopped = Some(child);
    }
    if stopped.is_none() && args.command.is_empty() {
        // No command: a stop signal ends the count. Caught before the counters are registered,
        // as in direct counting (one that came in between killed `stat` unprinted).
        super::install_stop_handler();
    }
    let mut ids = Vec::new();
    for t in &tgts {
        ids.push(client.register(&events, t, 1, None)?);
    }
    // As direct counting: user/sys time for a command `stat` counts itself (from its rusage,
    // reaped by us), none where the command only times -p/-a/-C (those processes are not our
    // children; perf prints none either).
    let counts_command = stopped.is_some();
    let cpu_before = super::children_cpu_time();
    let start = Instant::now();
    let mut child = None;
    // A stop signal sent to `stat` is passed on to the command (see `stat`'s own path).
    if let Some(s) = stopped {
        child = Some(super::start_forwarding(s)?);
    } else if !args.command.is_empty() {
        child = Some(super::start_forwarding(spawn_stopped(&args.command)?)?);
    }
    let pids = super::target_pids(args);
    let mut exit = None;
    // Whether counting is over: the command ended, a stop signal came, or every -p process.
    let ended = |exit: &mut Option<ChildExit>| -> Result<bool> {
        if let Some(c) = &child {
            // Not reaped until it has ended: its pid stays ours while signals are passed on.
            if !super::super::child::has_ended(c.pid()).context("waiting for the command")? {
                return Ok(false);
            }
            super::CHILD.store(0, std::sync::atomic::Ordering::SeqCst);
            *exit = Some(c.wait()?);
            return Ok(true);
        }
        Ok(super::STOP.load(std::sync::atomic::Ordering::SeqCst) != 0
            || (!pids.is_empty() && pids.iter().all(|&p| super::process_ended(p))))
    };
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => {
            let file = match std::fs::File::create(p) {
                Ok(file) => file,
                Err(e) => {
                    // The command has started: stopped, as direct counting does, not left
                    // running with nobody to count it.
                    if let Some(c) = &child {
                        let _ = c.terminate(super::TERM_GRACE);
                        super::CHILD.store(0, std::sync::atomic::Ordering::SeqCst);
                    }
                    return Err(e).with_context(|| format!("creating {}", p.display()));
                }
            };
            Box::new(super::NamedOutput::new(file, p))
        }
        None => Box::new(std::io::stderr()),
    };
    let fmt = Format {
        sep: args.separator.clone(),
        json: args.json,
        aggr: Aggr::Global,
    };
    // A read the broker did not answer (it stopped, or dropped the connection).
    let mut lost: Option<anyhow::Error> = None;
    let read_all = |client: &mut Client| -> Result<Vec<EventReading>> {
        let mut rs = Vec::new();
        for &id in &ids {
            rs.push(client.read(id)?);
        }
        to_readings(args, &rs)
    };
    match args.interval_ms {
        Some(ms) => {
            let step = Duration::from_millis(ms);
            let mut next = start + step;
            let mut prev: Option<Vec<EventReading>> = None;
            // perf's column header, as direct counting prints it (it was missing here: a
            // parser skipping one `#` line then ate a data line; CLI probe, session 27).
            if fmt.sep.is_none() && !fmt.json {
                writeln!(out, "{}", super::interval_header(fmt.aggr))?;
            }
            loop {
                let mut over = false;
                loop {
                    if ended(&mut exit)? {
                        over = true;
                        break;
                    }
                    let now = Instant::now();
                    if now >= next {
                        break;
                    }
                    std::thread::sleep((next - now).min(Duration::from_millis(5)));
                }
                let now = Instant::now();
                let cur = match read_all(&mut client) {
                    Ok(cur) => cur,
                    Err(e) => {
                        lost = Some(e);
                        break;
                    }
                };
                let delta = super::deltas(&cur, prev.as_deref());
                let wall = now.duration_since(start);
                let span = match &prev {
                    Some(_) => now.duration_since(next - step).min(step),
                    None => wall.min(step),
                };
                print_counts_at(
                    &mut *out,
                    &fmt,
                    &one_run(delta, span, None),
                    Some(wall),
                    args,
                )?;
                prev = Some(cur);
                if over {
                    break;
                }
                next += step;
            }
        }
        None => {
            while !ended(&mut exit)? {
                std::thread::sleep(Duration::from_millis(5));
            }
            let span = start.elapsed();
            match read_all(&mut client) {
                Ok(readings) => {
                    let cpu = counts_command.then(|| {
                        let after = super::children_cpu_time();
                        (
                            after.0.saturating_sub(cpu_before.0),
                            after.1.saturating_sub(cpu_before.1),
                        )
                    });
                    print_counts_at(&mut *out, &fmt, &one_run(readings, span, cpu), None, args)?;
                }
                Err(e) => lost = Some(e),
            }
        }
    }
    out.flush()?;
    if let Some(e) = lost {
        // The broker held the counts: they are gone with it. The command is ours to see to
        // the end (signals still passed on) and its exit status is still the one returned,
        // as documented; without a command there is nothing left to report.
        eprintln!(
            "counterpoint: stat: reading the counts from the broker at {} failed {:.1} s into \
             the run ({e}): its counts are lost",
            socket.display(),
            start.elapsed().as_secs_f64()
        );
        if child.is_some() {
            while exit.is_none() && !ended(&mut exit)? {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        return Ok(match exit {
            Some(e) => ExitCode::from(e.shell_code().clamp(0, 255) as u8),
            None => ExitCode::FAILURE,
        });
    }
    // The counts are printed: a broker that stops now costs only its cleanup, not the
    // command's exit status.
    for &id in &ids {
        if let Err(e) = client.unregister(id) {
            eprintln!("counterpoint: stat: unregistering from the broker: {e}");
            break;
        }
    }
    Ok(match exit {
        Some(e) => ExitCode::from(e.shell_code().clamp(0, 255) as u8),
        None => super::no_command_status(),
    })
}
