//! `counterpoint agent`: MASA's user-level daemon made safe. Every interval it observes the
//! target processes, asks the policy for actions, and applies them (or only logs them with
//! `--dry-run`). Every affinity change is journaled before it is made; on normal exit, SIGINT or
//! SIGTERM every task is put back, and a journal left by a crashed agent is restored at start.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_core::action::Action;
use counterpoint_core::cpuset::CpuSet;
use counterpoint_core::machine::{Machine, Policy};
use counterpoint_core::observation::Observation;
use counterpoint_core::task::TaskId;
use counterpoint_host::journal::RestoreReport;
use counterpoint_host::{Host, Journal, TargetSpec};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use tracing::{debug, error, info, warn};

#[derive(Args)]
pub struct AgentArgs {
    /// Placement policy (see `counterpoint policies`; `spread` runs without a PMU).
    #[arg(long)]
    policy: Option<String>,
    /// Observation interval: `1s`, `500ms`, `2.5s`.
    #[arg(long, default_value = "1s")]
    interval: String,
    /// Log decisions without applying them (MASA's log-only mode). No journal is needed.
    #[arg(long)]
    dry_run: bool,
    /// Which processes: all, pid:1,2,..., comm:REGEX, cgroup:PATH, user:NAME.
    #[arg(long, default_value = "all")]
    targets: String,
    /// The safety-net journal (locked; a second agent on it refuses to start).
    #[arg(long, default_value = "/run/counterpoint-agent.journal")]
    journal: PathBuf,
    /// A task changed by the agent is not changed again for this many intervals (hysteresis).
    #[arg(long, default_value_t = 3)]
    min_residency: u32,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,
    /// Restore what the journal records and exit.
    #[arg(long)]
    restore_only: bool,
    /// `spread` only: CPUs used (task-clock / wall time) from which a task counts as hungry.
    #[arg(long)]
    hungry_cpus: Option<f64>,
    /// Where to run: `host` (this machine) or `sim:SCENARIO` (a scenario TOML file run by the
    /// simulator in real time: one simulated interval per wall interval; nothing on the host
    /// changes and no journal is used).
    #[arg(long, default_value = "host")]
    source: String,
    /// Simulator seed for `--source sim:...`.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many intervals (then restore), for scripted runs.
    #[arg(long)]
    max_intervals: Option<u64>,
    /// `masa`: the load-calibration table measured on this machine (a JSON file of
    /// `counterpoint_policy::Calibration`), or `paper` for the 2002 dual Xeon's table.
    #[arg(long, value_name = "FILE|paper")]
    masa_calibration: Option<String>,
}

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work: two atomic stores.
    SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to atomics, which is async-signal-safe.
        let prev = unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        if prev == libc::SIG_ERR {
            bail!("cannot install a handler for signal {sig}");
        }
    }
    Ok(())
}

/// Parse `1s`, `250ms`, `2.5s`, `1m` into nanoseconds.
pub fn parse_interval(s: &str) -> Result<u64> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e9)
    } else {
        bail!("--interval {s:?}: expected a number with ms, s or m (e.g. 1s, 500ms)");
    };
    let v: f64 = num
        .parse()
        .with_context(|| format!("--interval {s:?}: {num:?} is not a number"))?;
    let ns = v * mult;
    if !(ns.is_finite() && ns >= 10e6) {
        bail!("--interval {s:?}: must be at least 10ms");
    }
    Ok(ns as u64)
}

/// Decisions and lifecycle events go through `tracing`: a human-readable line per event on
/// stderr, or with `--log-json` one JSON object per line whose fields are flattened to the top
/// level (`event`, `interval`, `policy`, `task`, `from`, `to`, `reason`, `dry_run`, ...).
/// `COUNTERPOINT_LOG` (an `EnvFilter` directive, default `info`) selects the verbosity.
fn init_logging(json: bool) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("COUNTERPOINT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false);
    // A second call (tests in one process) finds a subscriber already set: keep it.
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init()
    } else {
        builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init()
    };
}

/// Log a restore report: counts as fields, the per-thread detail as one JSON string.
fn log_restore(event: &str, signal: i32, r: &RestoreReport) {
    let detail = json!({
        "restored": r.restored.iter().map(|(t, s)| json!({"tid": t, "cpus": s.to_list()})).collect::<Vec<_>>(),
        "left_alone": r.left_alone.iter().map(|(t, s)| json!({"tid": t, "cpus": s.to_list()})).collect::<Vec<_>>(),
        "gone": r.gone,
        "failed": r.failed.iter().map(|(t, e)| json!({"tid": t, "error": e})).collect::<Vec<_>>(),
    });
    info!(
        event,
        signal,
        restored = r.restored.len(),
        left_alone = r.left_alone.len(),
        gone = r.gone.len(),
        failed = r.failed.len(),
        detail = %detail,
        "affinities restored from the journal"
    );
}

/// One task's move within an action, for the decision log.
struct Move {
    task: u64,
    from: String,
    to: String,
    /// Share of one CPU the task used in the interval, when observed.
    cpus_used: Option<f64>,
}

fn moves(action: &Action, obs: &Observation, online: &CpuSet) -> Vec<Move> {
    let seen = |t: TaskId| obs.task(t);
    let used = |t: TaskId| {
        seen(t).and_then(|o| {
            o.sample
                .get(counterpoint_core::event::TASK_CLOCK)
                .map(|ns| ns / obs.interval_ns.max(1) as f64)
        })
    };
    let aff = |t: TaskId| seen(t).map(|o| o.affinity.to_list()).unwrap_or_default();
    match action {
        Action::SetAffinity { task, cpus } => vec![Move {
            task: task.0,
            from: aff(*task),
            to: cpus.intersection(online).to_list(),
            cpus_used: used(*task),
        }],
        Action::Swap { a, b } => vec![
            Move {
                task: a.0,
                from: aff(*a),
                to: aff(*b),
                cpus_used: used(*a),
            },
            Move {
                task: b.0,
                from: aff(*b),
                to: aff(*a),
                cpus_used: used(*b),
            },
        ],
    }
}

pub fn run(args: AgentArgs) -> Result<ExitCode> {
    init_logging(args.log_json);
    let online = counterpoint_host::affinity::online_cpus();

    if args.restore_only {
        let mut j = Journal::open(&args.journal)?;
        let r = j.restore_all(&online)?;
        log_restore("restored", 0, &r);
        return Ok(ExitCode::SUCCESS);
    }

    // Everything that can be refused is checked before anything on the host changes.
    let Some(policy_name) = args.policy.as_deref() else {
        bail!(
            "--policy is required (known: {})",
            counterpoint_policy::registry::names_at(counterpoint_policy::Level::Epoch).join(", ")
        );
    };
    // The registry builds the policy (pick-next hooks are refused: they need the simulator).
    let calibration = match args.masa_calibration.as_deref() {
        None => counterpoint_policy::CalibrationSource::None,
        Some("paper") => counterpoint_policy::CalibrationSource::PaperXeon,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--masa-calibration {path}"))?;
            let table: counterpoint_policy::Calibration = serde_json::from_str(&text)
                .with_context(|| format!("--masa-calibration {path}: not a calibration table"))?;
            counterpoint_policy::CalibrationSource::Measured(table)
        }
    };
    let mut policy = counterpoint_policy::build_epoch(
        policy_name,
        &mut counterpoint_policy::Context {
            calibration,
            options: counterpoint_policy::registry::Options {
                hungry_cpus: args.hungry_cpus,
            },
            ..Default::default()
        },
    )?;
    // Hardware events are probed once (opened on this thread); what does not open is
    // missing, and a policy that needs it does not start.
    let avail = counterpoint_host::perf::availability();
    let countable = avail.countable_events();
    let missing: Vec<&str> = policy
        .required_events()
        .into_iter()
        .filter(|e| !countable.contains(e))
        .collect();
    // The simulator counts every event; only the live host lacks a PMU.
    if !missing.is_empty() && !args.source.starts_with("sim:") {
        let why: Vec<String> = avail
            .missing_hardware()
            .iter()
            .map(|(n, r)| format!("{n}: {r}"))
            .collect();
        let pmu = if avail.hardware_events().is_empty() {
            " (no hardware PMU)"
        } else {
            ""
        };
        bail!(
            "policy {policy_name:?} needs events this host cannot count{pmu}: {}; \
             available: {}{}",
            missing.join(", "),
            countable.join(", "),
            if why.is_empty() {
                String::new()
            } else {
                format!("; perf_event: {}", why.join("; "))
            }
        );
    }
    let interval_ns = parse_interval(&args.interval)?;
    let targets = TargetSpec::parse(&args.targets)?;

    if let Some(path) = args.source.strip_prefix("sim:") {
        let catalog = counterpoint_sim::Catalog::builtin();
        let scenario = counterpoint_sim::Scenario::from_file(std::path::Path::new(path), &catalog)
            .with_context(|| format!("--source {}", args.source))?;
        let mut sim = counterpoint_sim::Simulation::new(&scenario, args.seed)
            .with_context(|| format!("--source {}", args.source))?;
        install_signal_handlers()?;
        info!(
            event = "start",
            policy = policy.name(),
            interval_ns,
            source = %args.source,
            seed = args.seed,
            dry_run = args.dry_run,
            "agent started on the simulator"
        );
        run_loop(&mut sim, policy.as_mut(), interval_ns, &args, true, |_| {
            false
        })?;
        info!(
            event = "stopped",
            signal = SIGNAL.load(Ordering::SeqCst),
            "agent stopped"
        );
        return Ok(ExitCode::SUCCESS);
    } else if args.source != "host" {
        bail!(
            "--source {:?}: expected host or sim:SCENARIO.toml",
            args.source
        );
    }

    let journal = if args.dry_run {
        None
    } else {
        let mut j = Journal::open(&args.journal)?;
        if j.has_entries() {
            // A previous agent died without restoring: put its tasks back first.
            let r = j.restore_all(&online)?;
            warn!(
                journal = %args.journal.display(),
                "a previous agent left changes in its journal; restoring them first"
            );
            log_restore("recovered", 0, &r);
        }
        Some(j)
    };
    let mut host = Host::new(targets, journal)?;
    if !args.dry_run {
        host.check_permissions()
            .context("insufficient privileges for the target processes; nothing was changed")?;
    }
    install_signal_handlers()?;
    host.set_stop_flag(&STOP);
    let src = host.counter_sources();
    info!(
        event = "start",
        policy = policy.name(),
        interval_ns,
        dry_run = args.dry_run,
        targets = %args.targets,
        journal = %args.journal.display(),
        online = %online.to_list(),
        pid = std::process::id(),
        events = %host.counted_events().join(","),
        perf_threads = src.perf_threads,
        proc_threads = src.proc_threads,
        perf_off = src.perf_off_reason.as_deref().unwrap_or(""),
        "agent started"
    );

    let result = run_loop(
        &mut host,
        policy.as_mut(),
        interval_ns,
        &args,
        false,
        // A task that exited or refused mid-action does not stop the agent; journal errors do.
        |e| matches!(e, counterpoint_host::HostError::Affinity(_)),
    );
    let restore = host.restore();
    let sig = SIGNAL.load(Ordering::SeqCst);
    match &restore {
        Ok(r) => log_restore("restored", sig, r),
        Err(e) => error!(event = "restore_failed", error = %e, "restoring affinities failed"),
    }
    result?;
    restore?;
    Ok(ExitCode::SUCCESS)
}

/// Observe → decide → act on any `Machine`. `real_time` sleeps one interval of wall time after
/// each (simulated) interval; `transient` says which apply errors are logged and skipped.
fn run_loop<M: Machine>(
    host: &mut M,
    policy: &mut dyn Policy,
    interval_ns: u64,
    args: &AgentArgs,
    real_time: bool,
    transient: impl Fn(&M::Error) -> bool,
) -> Result<()> {
    let mut last_change: BTreeMap<TaskId, u64> = BTreeMap::new();
    let mut epoch: u64 = 0;
    while !STOP.load(Ordering::SeqCst) {
        if args.max_intervals.is_some_and(|m| epoch >= m) {
            break;
        }
        let obs = host.advance(interval_ns)?;
        if real_time {
            let t0 = std::time::Instant::now();
            let want = std::time::Duration::from_nanos(interval_ns);
            while t0.elapsed() < want && !STOP.load(Ordering::SeqCst) {
                std::thread::sleep((want - t0.elapsed()).min(std::time::Duration::from_millis(50)));
            }
        }
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        if !obs.tasks.is_empty() && obs.tasks.iter().all(|t| t.finished) {
            info!(
                event = "all_finished",
                interval = epoch + 1,
                "every task finished"
            );
            break;
        }
        epoch += 1;
        let topology = host.topology().clone();
        let online = topology.online_cpus();
        let actions = policy.decide(&topology, &obs);
        let policy_name = policy.name().to_string();
        for action in actions {
            let tasks = action.tasks();
            // Already where the policy wants it: nothing to do.
            if let Action::SetAffinity { task, cpus } = &action {
                let want = cpus.intersection(&online);
                if obs.task(*task).is_some_and(|t| t.affinity == want) {
                    debug!(event = "unchanged", interval = epoch, task = task.0, cpus = %want.to_list(),
                           "task already has the affinity the policy wants");
                    continue;
                }
            }
            let kind = match &action {
                Action::SetAffinity { .. } => "set_affinity",
                Action::Swap { .. } => "swap",
            };
            let held = tasks.iter().find_map(|t| {
                last_change
                    .get(t)
                    .filter(|&&e| epoch - e < args.min_residency as u64)
                    .map(|&e| (*t, e))
            });
            if let Some((t, since)) = held {
                for m in moves(&action, &obs, &online) {
                    info!(
                        event = "held", interval = epoch, policy = %policy_name, action = kind,
                        task = m.task, from = %m.from, to = %m.to, dry_run = args.dry_run,
                        reason = %format!(
                            "minimum residency: task {} was moved at interval {since}, {} interval(s) required",
                            t.0, args.min_residency
                        ),
                        "decision held back"
                    );
                }
                continue;
            }
            let result = if args.dry_run {
                Ok(())
            } else {
                host.apply(&action)
            };
            match result {
                Ok(()) => {
                    for m in moves(&action, &obs, &online) {
                        let reason = match m.cpus_used {
                            Some(u) => format!(
                                "{policy_name} placement; task used {u:.2} CPUs in the interval"
                            ),
                            None => format!("{policy_name} placement"),
                        };
                        info!(
                            event = "decision", interval = epoch, policy = %policy_name, action = kind,
                            task = m.task, from = %m.from, to = %m.to, reason = %reason,
                            dry_run = args.dry_run, applied = !args.dry_run,
                            "{}", if args.dry_run { "would move task (dry run)" } else { "moved task" }
                        );
                    }
                    if !args.dry_run {
                        for t in tasks {
                            last_change.insert(t, epoch);
                        }
                    }
                }
                Err(e) if transient(&e) => {
                    for m in moves(&action, &obs, &online) {
                        warn!(
                            event = "action_failed", interval = epoch, policy = %policy_name, action = kind,
                            task = m.task, from = %m.from, to = %m.to, dry_run = args.dry_run,
                            reason = %e, "action failed; the agent goes on"
                        );
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_interval;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("1s").ok(), Some(1_000_000_000));
        assert_eq!(parse_interval("250ms").ok(), Some(250_000_000));
        assert_eq!(parse_interval("1.5s").ok(), Some(1_500_000_000));
        assert!(parse_interval("5").is_err());
        assert!(parse_interval("1ms").is_err());
        assert!(parse_interval("xs").is_err());
    }
}
