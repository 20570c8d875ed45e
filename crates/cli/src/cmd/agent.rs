//! `counterpoint agent`: parses the command line and runs `counterpoint_host::agent` (the loop,
//! the safety net, signals and restoring live there). Every affinity change is journaled before
//! it is made; every catchable terminating signal, a closed log, or the end of the run puts every
//! task back, and a journal left by a killed agent is restored at start.

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_host::agent::{self, HostAgentConfig, Level, Logger, LoopConfig, Outcome};
use counterpoint_host::TargetSpec;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct AgentArgs {
    /// Placement policy (see `counterpoint policies`; `spread` runs without a PMU).
    #[arg(long)]
    policy: Option<String>,
    /// Observation interval: `1s`, `500ms`, `2.5s` (10ms to 1h; a unit is required: ms, s, m
    /// or h).
    #[arg(long, default_value = "1s")]
    interval: String,
    /// Log decisions without applying them (MASA's log-only mode). No journal is needed.
    #[arg(long)]
    dry_run: bool,
    /// Which processes: all, pid:1,2,..., comm:REGEX, cgroup:PATH, user:NAME (host source only;
    /// a simulated source runs its scenario's tasks). A thread id in pid: stands for its
    /// process.
    #[arg(long, default_value = DEFAULT_TARGETS)]
    targets: String,
    /// The safety-net journal (locked; a second agent on it refuses to start). Host source only.
    #[arg(long, default_value = DEFAULT_JOURNAL)]
    journal: PathBuf,
    /// A task changed by the agent is not changed again for this many intervals (hysteresis;
    /// default 3). Above 0 it is refused for `linux`, which changes no task.
    #[arg(long)]
    min_residency: Option<u32>,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,
    /// Restore what the journal records and exit. The journal must exist: a missing one is
    /// refused (exit 2), never created. It restores every thread the journal records: the
    /// options of a run (--policy, --targets, --interval, ...) are refused with it, not ignored.
    #[arg(long, conflicts_with_all = [
        "policy", "interval", "dry_run", "targets", "min_residency", "hungry_cpus",
        "foreign_cpus", "max_intervals", "masa_calibration", "daemon", "direct",
        "read_every_thread", "heatmap_period_us", "syscalls",
    ])]
    restore_only: bool,
    /// `spread` only: CPUs used (task-clock / wall time) from which a task counts as hungry
    /// (default 0.5; above 0).
    #[arg(long, value_name = "CPUS", value_parser = super::parse_cpus)]
    hungry_cpus: Option<f64>,
    /// `spread` only: share of a CPU that other (non-target) processes must keep busy for the
    /// CPU to count as taken (default 0.5; above 1 other load is ignored).
    #[arg(long)]
    foreign_cpus: Option<f64>,
    /// Where to run: `host` (this machine) or `sim:SCENARIO` (a scenario TOML file run by the
    /// simulator in real time: one simulated interval per wall interval, until the scenario's
    /// duration is over; nothing on the host changes and no journal is used).
    #[arg(long, default_value = "host")]
    source: String,
    /// `--source sim:...` only: the simulator's seed (default 1). Refused with the host source,
    /// which has no seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after this many intervals (then restore), for scripted runs (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_intervals: Option<u64>,
    /// `masa`: the load-calibration table measured on this machine (a JSON file of
    /// `counterpoint_policy::Calibration`), or `paper` for the 2002 dual Xeon's table.
    #[arg(long, value_name = "FILE|paper")]
    masa_calibration: Option<String>,
    /// Count through the broker (`counterpoint daemon`) at SOCKET, or at the default socket
    /// without it; when none answers there, count directly. The default socket is tried
    /// even without this flag. Host source only.
    // Absent: None; bare: Some(None), the default socket; with SOCKET: Some(Some(SOCKET)).
    #[arg(long, value_name = "SOCKET", num_args = 0..=1)]
    daemon: Option<Option<PathBuf>>,
    /// Never use a broker: open the agent's own counters. Host source only.
    #[arg(long, conflicts_with = "daemon")]
    direct: bool,
    /// Read every thread's counters every interval. By default a process none of whose
    /// threads ran since the last interval (the kernel's taskstats say so in one query; needs
    /// CAP_NET_ADMIN) keeps its last readings: its counts cannot have changed; and in a process
    /// that ran, a thread idle at its last read whose perf control page shows no switch since
    /// is not read either (one memory load instead of a read). Host source only.
    #[arg(long)]
    read_every_thread: bool,
    /// `schedtask` (policies that read code heatmaps) only: one instruction-pointer sample per
    /// this many µs of each thread's CPU time (software cpu-clock; no PMU needed; default 1000;
    /// 10 µs to 10 s, as `heatmap --period-us`: the kernel does not sample a cpu-clock faster
    /// than every 10 µs). Host source only: the simulator gives schedtask its heatmaps.
    #[arg(long, value_name = "US",
          value_parser = clap::value_parser!(u64).range(super::HEATMAP_PERIOD_US_MIN..=super::HEATMAP_PERIOD_US_MAX))]
    heatmap_period_us: Option<u64>,
    /// `schedtask`: attribute kernel samples to the system call in progress (raw_syscalls
    /// tracepoints; needs tracefs mounted, and costs the watched threads a record per call).
    /// Host source only.
    #[arg(long)]
    syscalls: bool,
}

/// `--min-residency` when not given.
const DEFAULT_MIN_RESIDENCY: u32 = 3;
/// `--heatmap-period-us` when not given.
const DEFAULT_HEATMAP_PERIOD_US: u64 = 1000;
/// `--targets` when not given.
const DEFAULT_TARGETS: &str = "all";
/// `--journal` when not given.
const DEFAULT_JOURNAL: &str = "/run/counterpoint-agent.journal";

/// Parse `1s`, `250ms`, `2.5s`, `1m` into nanoseconds (the CLI's one parser, which names an
/// unsupported unit as such).
pub fn parse_interval(s: &str) -> Result<u64> {
    super::parse_interval(s)
}

/// The log goes to stderr, text or JSON lines; `COUNTERPOINT_LOG=debug` shows debug events.
fn logger(json: bool) -> Logger {
    let min = match std::env::var("COUNTERPOINT_LOG").as_deref() {
        Ok("debug") | Ok("trace") => Level::Debug,
        Ok("warn") => Level::Warn,
        Ok("error") => Level::Error,
        _ => Level::Info,
    };
    Logger::stderr(json, min)
}

pub fn run(args: AgentArgs) -> Result<ExitCode> {
    let mut log = logger(args.log_json);

    if args.restore_only {
        // It restores the host's journal: a simulated (or unknown) source and a seed would be
        // ignored, and the user may have meant something else.
        if args.source != "host" {
            bail!(
                "--restore-only restores the host's journal; --source {} has none to restore",
                args.source
            );
        }
        if let Some(seed) = args.seed {
            bail!("--seed {seed}: --restore-only runs nothing to seed");
        }
        let out = agent::restore_only(&args.journal, &mut log)?;
        return Ok(exit_code(&out));
    }

    // Everything that can be refused is checked before anything on the host changes.
    use counterpoint_policy::registry::{Need, REGISTRY};
    // The source first: what else is refused depends on it (a simulated source counts every
    // event, the host only what its PMU has).
    if args.source != "host" && !args.source.starts_with("sim:") {
        bail!(
            "--source {:?}: expected host or sim:SCENARIO.toml",
            args.source
        );
    }
    // `sim:` alone was read as the scenario file "" (`--source sim:: : cannot read`).
    if args
        .source
        .strip_prefix("sim:")
        .is_some_and(|p| p.trim().is_empty())
    {
        bail!(
            "--source {:?}: no scenario file after `sim:` (e.g. sim:scenarios/zhang-spec.toml)",
            args.source
        );
    }
    // A seed only seeds the simulator: with the host source it would be ignored.
    if let (Some(seed), false) = (args.seed, args.source.starts_with("sim:")) {
        bail!(
            "--seed {seed}: only --source sim:SCENARIO uses a seed; the host source {:?} \
             would ignore it",
            args.source
        );
    }
    // The host's options are refused with a simulated source, which would ignore them: the
    // simulator's tasks are the scenario's, it changes nothing on the host (no journal), counts
    // every event itself (no broker) and gives schedtask its code heatmaps (no sampling).
    if args.source.starts_with("sim:") {
        let host_only = [
            (args.targets != DEFAULT_TARGETS, "--targets"),
            (args.journal.as_os_str() != DEFAULT_JOURNAL, "--journal"),
            (args.daemon.is_some(), "--daemon"),
            (args.direct, "--direct"),
            (args.read_every_thread, "--read-every-thread"),
            (args.heatmap_period_us.is_some(), "--heatmap-period-us"),
            (args.syscalls, "--syscalls"),
        ];
        if let Some((_, flag)) = host_only.iter().find(|(given, _)| *given) {
            bail!(
                "{flag}: only the host source uses it; --source {} would ignore it (the \
                 scenario names the tasks, and the simulator counts and samples them itself)",
                args.source
            );
        }
    }
    let Some(policy_name) = args.policy.as_deref() else {
        // Only what the agent can run: epoch-level policies that need no placement cost (the
        // oracle's comes from the simulator's short runs, which the agent has none of).
        bail!(
            "--policy is required (the agent runs: {}; see `counterpoint policies`)",
            counterpoint_policy::live_names().join(", ")
        );
    };
    // A table the policy would ignore is refused, as --syscalls is below (an unknown name is
    // refused with the list by the build).
    if let (Some(_), Ok(entry)) = (
        &args.masa_calibration,
        counterpoint_policy::registry::lookup(policy_name),
    ) {
        if !entry.needs.contains(&Need::Calibration) {
            let users: Vec<&str> = REGISTRY
                .iter()
                .filter(|e| e.needs.contains(&Need::Calibration))
                .map(|e| e.name)
                .collect();
            bail!(
                "--masa-calibration: policy {policy_name:?} uses no load calibration, so the \
                 table would be ignored (only {} do)",
                users.join(" and ")
            );
        }
    }
    // The hold-back delays the policy's next move of a task; the baseline moves none, so the
    // value would do nothing (as `simulate` refuses it).
    if let (Some(n @ 1..), "linux") = (args.min_residency, policy_name) {
        bail!("--min-residency {n}: policy \"linux\" (the baseline) moves no task; drop --min-residency");
    }
    // Cheap checks before MASA's calibration of a simulated machine, which takes a while.
    let interval_ns = parse_interval(&args.interval)?;
    let targets = TargetSpec::parse(&args.targets)?;
    // A thread id stands for its process: pinning one thread's process and watching only that
    // thread left the threads born later pinned, unjournaled and never restored.
    let (targets, threads) =
        targets.threads_as_processes(&counterpoint_host::procfs::Proc::default());
    for (tid, pid) in threads {
        log.emit(
            Level::Info,
            "thread_target",
            &format!("pid:{tid} is a thread of process {pid}: the agent watches the process"),
            &[("tid", json!(tid)), ("pid", json!(pid))],
        );
    }
    // A simulated source is read before the policy is built: MASA calibrates its machine.
    let sim = match args.source.strip_prefix("sim:") {
        Some(path) => {
            let catalog = counterpoint_sim::Catalog::builtin();
            let scenario =
                counterpoint_sim::Scenario::from_file(std::path::Path::new(path), &catalog)
                    .with_context(|| format!("--source {}", args.source))?;
            Some(scenario)
        }
        None => None,
    };
    let seed = args.seed.unwrap_or(1);
    let needs_calibration = counterpoint_policy::registry::lookup(policy_name)
        .is_ok_and(|e| e.needs.contains(&Need::Calibration));
    // The registry builds the policy; an unknown name, a pick-next hook or the oracle is
    // refused with the names the agent runs (never the simulator-only ones).
    let calibration = match args.masa_calibration.as_deref() {
        // The simulated machine is calibrated as `simulate` does it: MASA's probes co-run on
        // it (a host has no such runs: there the table must be measured and given).
        None if needs_calibration && sim.is_some() => {
            let scenario = sim.as_ref().expect("checked");
            let lab = counterpoint_experiment::sim_lab::SimLab::new()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let table = lab
                .calibrate_machine(&scenario.machine, seed)
                .map_err(|e| anyhow::anyhow!("--source {}: {e}", args.source))?;
            counterpoint_policy::CalibrationSource::Measured(table)
        }
        None => counterpoint_policy::CalibrationSource::None,
        Some("paper") => counterpoint_policy::CalibrationSource::PaperXeon,
        Some(path) => {
            let text =
                crate::cmd::read_input_file("--masa-calibration", std::path::Path::new(path))?;
            let table: counterpoint_policy::Calibration = serde_json::from_str(&text)
                .with_context(|| format!("--masa-calibration {path}: not a calibration table"))?;
            counterpoint_policy::CalibrationSource::Measured(table)
        }
    };
    let mut policy = counterpoint_policy::build_live(
        policy_name,
        &mut counterpoint_policy::Context {
            calibration,
            options: counterpoint_policy::registry::Options {
                hungry_cpus: args.hungry_cpus,
                foreign_cpus: args.foreign_cpus,
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
    if args.syscalls && !policy.wants_code_heatmaps() {
        bail!(
            "--syscalls: policy {policy_name:?} reads no code heatmaps, so nothing is sampled \
             (schedtask does)"
        );
    }
    if let (Some(us), false) = (args.heatmap_period_us, policy.wants_code_heatmaps()) {
        bail!(
            "--heatmap-period-us {us}: policy {policy_name:?} reads no code heatmaps, so nothing \
             is sampled (schedtask does)"
        );
    }
    let loop_cfg = LoopConfig {
        interval_ns,
        min_residency: args.min_residency.unwrap_or(DEFAULT_MIN_RESIDENCY),
        dry_run: args.dry_run,
        max_intervals: args.max_intervals,
        real_time: args.source.starts_with("sim:"),
    };

    if let Some(scenario) = &sim {
        // Bounded by the scenario's duration: the loop ends with `all_finished` when it is over
        // (or every task is done), as `simulate` does.
        let mut sim = counterpoint_sim::Bounded::new(scenario, seed)
            .with_context(|| format!("--source {}", args.source))?;
        let out = agent::run_on_machine(
            &mut sim,
            policy.as_mut(),
            &loop_cfg,
            &mut log,
            &[("source", json!(args.source)), ("seed", json!(seed))],
        )?;
        return Ok(exit_code(&out));
    }
    // (Any other source than host was refused first.)
    let source = if args.direct {
        None
    } else {
        let socket = args.daemon.as_ref().and_then(Option::as_deref);
        let (source, line) = super::daemon::host_counter_source(socket, true);
        // The start line says where counting goes (`counters`); a broker asked for and not
        // found is worth a warning of its own.
        if source.is_none() && args.daemon.is_some() {
            log.emit(Level::Warn, "no_broker", &line, &[]);
        }
        source
    };
    let out = agent::run_on_host_with(
        HostAgentConfig {
            targets,
            targets_text: args.targets.clone(),
            journal: args.journal.clone(),
            loop_cfg,
            read_every_thread: args.read_every_thread,
            code: counterpoint_host::code::CodeSamplingConfig {
                period_ns: args.heatmap_period_us.unwrap_or(DEFAULT_HEATMAP_PERIOD_US) * 1000,
                syscalls: args.syscalls,
            },
        },
        source,
        policy.as_mut(),
        &mut log,
    )?;
    Ok(exit_code(&out))
}

/// 0 when everything was put back; 1 when a thread could not be restored, the journal could not
/// be cleared, or the log could not be written.
fn exit_code(out: &Outcome) -> ExitCode {
    let restore_ok = out
        .restore
        .as_ref()
        .map_or(true, |r| r.failed.is_empty() && r.clear_failed.is_none());
    if restore_ok && out.log_failed.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
