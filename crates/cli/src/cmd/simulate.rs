//! `counterpoint simulate SCENARIO`: run a scenario on the simulated machine and report per-task
//! normalized performance, system metrics and counter time series (terminal table, JSON, CSV and
//! SVG figures).

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_core::{PickNext, Policy};
use counterpoint_experiment::sim_lab::{SimLab, SimPolicyOptions};
use counterpoint_policy::Built;
use counterpoint_sim::{run_with, Catalog, RunOptions, RunResult, Scenario};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct SimulateArgs {
    /// Scenario file (TOML; see scenarios/).
    scenario: PathBuf,
    /// Policy to run instead of the scenario's: any name of `counterpoint policies`
    /// (`linux` = the baseline scheduler alone; pick-next hooks run inside the scheduler,
    /// epoch-level policies through the same driver loop as `agent`).
    #[arg(long)]
    policy: Option<String>,
    /// Seed instead of the scenario's.
    #[arg(long)]
    seed: Option<u64>,
    /// `masa`: use the 2002 dual Xeon's table from the paper instead of calibrating the
    /// scenario's machine with MASA's probe co-runs.
    #[arg(long)]
    paper_calibration: bool,
    /// Epoch-level policies that move tasks: a task moved is not moved again for this many
    /// epochs (the agent's hold-back; default 0 = none). Refused for `linux` and the pick-next
    /// policies, which move none.
    #[arg(long, default_value_t = 0)]
    min_residency: u32,
    /// `spread` only: CPUs used from which a task counts as hungry (a finite number above 0).
    #[arg(long, value_name = "CPUS", value_parser = super::parse_cpus)]
    hungry_cpus: Option<f64>,
    /// Print the whole result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write result.json, series.csv, bus.csv and SVG figures into this directory: all the new
    /// files or, when interrupted or failing, all the old ones. Files there of another origin
    /// under those names are refused unless --force.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run even beyond the simulated-work budget (2e9 task-ticks: tasks x duration in ticks;
    /// the task count and time-series limits still apply), and let --out overwrite files under
    /// its names that simulate did not write.
    #[arg(long)]
    force: bool,
}

/// A scenario file's `policy` must name a registry policy: the message names the file and the
/// field (no flag was passed).
fn check_scenario_policy(path: &Path, scenario: &Scenario) -> Result<()> {
    if counterpoint_policy::registry::lookup(&scenario.policy).is_err() {
        // At the key's line and column, as the scenario parser's own errors are.
        let at = policy_key_at(path).map_or(String::new(), |(l, c)| format!(":{l}:{c}"));
        anyhow::bail!(
            "{}{at}: policy: unknown policy {:?} (known: {})",
            path.display(),
            scenario.policy,
            counterpoint_policy::registry::names().join(", ")
        );
    }
    Ok(())
}

pub fn run(args: SimulateArgs) -> Result<ExitCode> {
    let catalog = Catalog::builtin();
    let limits = if args.force {
        counterpoint_sim::scenario::Limits::unbounded()
    } else {
        counterpoint_sim::scenario::Limits::default()
    };
    let scenario = Scenario::from_file_with(&args.scenario, &catalog, limits)?;
    if scenario.epoch_ms > scenario.duration_ms {
        // Legal, but rarely meant: one observation, at the end, and an epoch-level policy
        // never gets to decide.
        eprintln!(
            "counterpoint: warning: {}: epoch_ms {} is longer than duration_ms {}: the time \
             series has one point (at the end) and an epoch-level policy never acts",
            args.scenario.display(),
            scenario.epoch_ms,
            scenario.duration_ms
        );
    }
    if args.policy.is_none() {
        check_scenario_policy(&args.scenario, &scenario)?;
    }
    // Before the run, which can be long: a directory that cannot be written, or whose files
    // under our names are someone else's, fails now.
    if let Some(dir) = &args.out {
        super::check_out_dir(dir, "results")?;
        refuse_foreign(dir, args.force)?;
        // Ctrl-C ends the run with a message, and never between two renames of the files.
        super::exit_on_interrupt()?;
    }
    let seed = args.seed.unwrap_or(scenario.seed);
    let policy_name = args
        .policy
        .clone()
        .unwrap_or_else(|| scenario.policy.clone());
    // The registry builds the policy; the simulator supplies what it needs (MASA's
    // calibration of this machine, the oracle's cost).
    let lab = SimLab::new().map_err(|e| anyhow::anyhow!("{e}"))?;
    let options = SimPolicyOptions {
        paper_calibration: args.paper_calibration,
        hungry_cpus: args.hungry_cpus,
    };
    let entry = counterpoint_policy::registry::lookup(&policy_name);
    let needs_calibration = entry.as_ref().is_ok_and(|e| {
        e.needs
            .contains(&counterpoint_policy::registry::Need::Calibration)
    });
    // (An unknown name is refused below, with the names the registry has.)
    if args.paper_calibration && entry.is_ok() && !needs_calibration {
        bail!(
            "--paper-calibration: policy {policy_name:?} uses no load calibration (only the \
             MASA policies do)"
        );
    }
    // A flag the policy does not take is the flag's mistake, named as such (it came out as
    // the scenario file's, "base.toml: policy \"linux\": does not take hungry-cpus"; CLI
    // probe, session 27).
    if let (Some(_), Ok(e)) = (args.hungry_cpus, &entry) {
        if !e.options.contains(&"hungry-cpus") {
            let takers: Vec<&str> = counterpoint_policy::registry::REGISTRY
                .iter()
                .filter(|e| e.options.contains(&"hungry-cpus"))
                .map(|e| e.name)
                .collect();
            bail!(
                "--hungry-cpus: policy {policy_name:?} does not take it (only {} do{})",
                takers.join(", "),
                if takers.len() == 1 { "es" } else { "" }
            );
        }
    }
    // The hold-back delays an epoch policy's next move of a task; a policy that moves none
    // would run the same with and without it.
    if args.min_residency > 0 {
        if let Ok(e) = &entry {
            if e.level == counterpoint_policy::registry::Level::PickNext {
                bail!(
                    "--min-residency: policy {policy_name:?} picks the next task at each switch \
                     and moves no task between epochs; drop --min-residency"
                );
            }
            if e.name == "linux" {
                bail!(
                    "--min-residency: policy \"linux\" (the baseline) moves no task; drop \
                     --min-residency"
                );
            }
        }
    }
    let built = lab
        .build_policy(&policy_name, &scenario, seed, &options)
        .map_err(|e| {
            // The prefix names the policy already.
            let msg = e.to_string();
            let own = format!("policy {policy_name:?}: ");
            let msg = msg.strip_prefix(&own).unwrap_or(&msg);
            // The way out of a calibration that cannot be made here is this command's flag.
            let msg = if needs_calibration && !args.paper_calibration {
                format!("{msg}; pass --paper-calibration to use the paper's table")
            } else {
                msg.to_string()
            };
            match &args.policy {
                Some(_) => anyhow::anyhow!("--policy {policy_name}: {msg}"),
                None => {
                    anyhow::anyhow!("{}: policy {policy_name:?}: {msg}", args.scenario.display())
                }
            }
        })?;
    let mut epoch: Option<Box<dyn Policy + Send>> = None;
    let mut pick: Option<Box<dyn PickNext + Send>> = None;
    match built {
        Built::Epoch(p) => epoch = Some(p),
        Built::PickNext(k) => pick = Some(k),
    }
    let total_ticks = scenario.duration_ms * 1000 / scenario.tick_us.max(1);
    let core_ticks = total_ticks * scenario.machine.cpus() as u64;
    // A bar only where a human watches a run that takes a while.
    let bar = if std::io::stderr().is_terminal() && core_ticks > 50_000_000 {
        let b = indicatif::ProgressBar::new(scenario.duration_ms);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} simulated {pos}/{len} ms [{bar:40}] {elapsed} (eta {eta})",
            )
            .context("progress bar template")?
            .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let options = RunOptions {
        min_residency_intervals: args.min_residency,
        ..RunOptions::new(scenario.epoch_ms * 1_000_000)
    };
    let mut progress = |done_ns: u64, _total: u64| bar.set_position(done_ns / 1_000_000);
    let mut result = run_with(
        &scenario,
        seed,
        epoch.as_deref_mut().map(|p| p as &mut dyn Policy),
        pick.as_deref_mut().map(|p| p as &mut dyn PickNext),
        &options,
        &mut progress,
    )
    .with_context(|| format!("simulating {}", args.scenario.display()))?;
    bar.finish_and_clear();
    result.policy = policy_name;
    // The files first: a stdout that fails (a full disk, a closed pipe) does not lose them.
    if let Some(dir) = &args.out {
        let files =
            out_files(&result).with_context(|| format!("writing results to {}", dir.display()))?;
        // Again: the directory may have changed during the run.
        refuse_foreign(dir, args.force).context("the results were not written")?;
        // Its names are fixed: a new set replaces every file of the old one.
        super::write_out_set(dir, &files, &[], "results")?;
    }
    let mut text = if args.json {
        serde_json::to_string_pretty(&result)? + "\n"
    } else {
        summary(&result)
    };
    if let (Some(dir), false) = (&args.out, args.json) {
        let _ = writeln!(
            text,
            "wrote {}/{{result.json,series.csv,bus.csv,np.svg,bus.svg,ipc.svg}}",
            dir.display()
        );
    }
    super::write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Tasks that never ran named in the summary's line about them; the others are counted.
const STARVED_NAMED: usize = 10;

/// Simulated time in the unit that shows it: `0.0 s` said nothing of a 10 ms run.
fn simulated_time(ns: u64) -> String {
    if ns < 1_000_000_000 {
        // At most microseconds: a run may end mid-tick.
        let ms = format!("{:.3}", ns as f64 / 1e6);
        format!("{} ms", ms.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{:.1} s", ns as f64 * 1e-9)
    }
}

/// The terminal summary table.
pub fn summary(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "scenario {} on {} (model {}, {} us ticks, seed {}, policy {}{}), {} simulated",
        super::printable(&r.scenario),
        super::printable(&r.machine),
        r.model.label(),
        r.tick_ns / 1000,
        r.seed,
        r.policy,
        r.pick
            .as_ref()
            .map_or(String::new(), |p| format!(", pick {p}")),
        simulated_time(r.duration_ns)
    );
    let w = r
        .tasks
        .iter()
        .map(|t| super::display_width(&super::printable(&t.name)))
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "{:>4}  {}  {:>6}  {:>6}  {:>8}  {:>9}  {:>9}  {:>6}  {:>5}",
        "id",
        super::pad_right("task", w),
        "NP",
        "IPC",
        "LLC-MPKI",
        "cpu s",
        "solo s",
        "ctxsw",
        "migr"
    );
    for t in &r.tasks {
        // A task that never ran has no IPC nor MPKI (its 0 read as a stalled task).
        let ran = |v: String| {
            if t.cpu_time_ns == 0 {
                "-".to_string()
            } else {
                v
            }
        };
        let _ = writeln!(
            s,
            "{:>4}  {}  {:>6}  {:>6}  {:>8}  {:>9.3}  {:>9.3}  {:>6}  {:>5}",
            t.id,
            super::pad_right(&super::printable(&t.name), w),
            t.np.map_or("-".to_string(), |v| format!("{v:.3}")),
            ran(format!("{:.3}", t.ipc)),
            ran(format!("{:.2}", t.llc_mpki)),
            t.cpu_time_ns as f64 * 1e-9,
            t.solo_cpu_time_ns as f64 * 1e-9,
            t.context_switches,
            t.migrations
        );
    }
    match &r.metrics {
        Some(m) => {
            let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
            let _ = writeln!(
                s,
                "normalized performance {:.3}  unfairness {:.3}  STP {}  ANTT {}",
                m.normalized_performance,
                m.unfairness,
                opt(m.stp),
                opt(m.antt)
            );
            if m.tasks_without_np > 0 {
                // A starved task has no NP: the geometric mean and the unfairness are over the
                // others, which must be said (they read 1.000 / 0.000 beside two starved tasks).
                // The first few by name (the table's NP column marks every one): 100,000 tasks
                // on bench-1024 made this one line of 99,000 names (1.1 MB).
                let starved: Vec<&str> = r
                    .tasks
                    .iter()
                    .filter(|t| t.np.is_none())
                    .map(|t| t.name.as_str())
                    .collect();
                let mut named = starved
                    .iter()
                    .take(STARVED_NAMED)
                    .map(|n| super::printable(n))
                    .collect::<Vec<_>>()
                    .join(", ");
                if starved.len() > STARVED_NAMED {
                    named.push_str(&format!(
                        " and {} more: NP - in the table",
                        starved.len() - STARVED_NAMED
                    ));
                }
                let _ = writeln!(
                    s,
                    "{} of {} tasks never ran ({named}): NP and unfairness are over the other {}; \
                     their turnaround is unbounded (ANTT -)",
                    m.tasks_without_np,
                    r.tasks.len(),
                    r.tasks.len() - m.tasks_without_np
                );
            }
        }
        None => {
            let _ = writeln!(s, "no task ran: no system metrics");
        }
    }
    let _ = writeln!(
        s,
        "throughput {:.3e} instructions/s, {:.3} completions/s; mean bus utilization {}",
        r.throughput_instructions_per_s,
        r.throughput_completions_per_s,
        r.mean_bus_utilization
            .iter()
            .map(|u| format!("{u:.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    s
}

/// Line and column (1-based) of the top-level `policy` key of scenario file `path`: the first
/// line that sets it before any table header.
fn policy_key_at(path: &Path) -> Option<(usize, usize)> {
    let text = super::read_input_file("scenario", path).ok()?;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[') {
            return None;
        }
        let key = t.strip_prefix("policy").map(str::trim_start);
        if key.is_some_and(|rest| rest.starts_with('=')) {
            return Some((i + 1, line.len() - t.len() + 1));
        }
    }
    None
}

/// The files `--out` writes, in the order they are written.
const OUT_FILES: [&str; 6] = [
    "result.json",
    "series.csv",
    "bus.csv",
    "np.svg",
    "bus.svg",
    "ipc.svg",
];

/// The first line of `series.csv`.
const SERIES_HEADER: &str =
    "time_ns,task,name,instructions,cycles,ipc,llc_misses,mem_transactions,fp_ops,task_clock_ns";
/// The first line of `bus.csv`.
const BUS_HEADER: &str = "time_ns,bus,utilization";

/// Refuse to overwrite a file of `dir` under one of [`OUT_FILES`]'s names that simulate did
/// not write (see [`is_own_output`]); with `force`, only a directory under one of them.
fn refuse_foreign(dir: &Path, force: bool) -> Result<()> {
    super::refuse_foreign_outputs(
        dir,
        &OUT_FILES,
        &is_own_output,
        "`counterpoint simulate --out`",
        force,
    )
}

/// Whether the file `name` at `path` is one `simulate --out` writes: `result.json` a run's
/// result (its scenario, machine, seed, policy, tasks and series; read whole, as a stream),
/// the CSV files by their header line, the figures as drawn by plotters.
fn is_own_output(name: &str, path: &Path) -> bool {
    /// What every `result.json` has held; other fields are ignored (older or newer versions).
    #[derive(serde::Deserialize)]
    #[allow(dead_code)] // read to be checked, never used
    struct Shape {
        scenario: String,
        machine: String,
        seed: u64,
        policy: String,
        tasks: Vec<serde::de::IgnoredAny>,
        series: serde::de::IgnoredAny,
    }
    if name == "result.json" {
        return std::fs::File::open(path).is_ok_and(|f| {
            serde_json::from_reader::<_, Shape>(std::io::BufReader::new(f)).is_ok()
        });
    }
    let Some(line) = super::first_line(path) else {
        return false;
    };
    let header = |h: &str| line.strip_suffix(b"\n") == Some(h.as_bytes());
    match name {
        "series.csv" => header(SERIES_HEADER),
        "bus.csv" => header(BUS_HEADER),
        _ if name.ends_with(".svg") => counterpoint_experiment::report::is_plotters_svg(&line),
        _ => false,
    }
}

/// The contents of [`OUT_FILES`], in their order: built whole before any is written, so the
/// files are written as one set.
fn out_files(r: &RunResult) -> Result<Vec<(String, Vec<u8>)>> {
    let mut csv = format!("{SERIES_HEADER}\n");
    for ts in &r.series.tasks {
        let name = &r.tasks[ts.id as usize].name;
        for (k, t) in r.series.time_ns.iter().enumerate() {
            let _ = writeln!(
                csv,
                "{t},{},{},{},{},{:.6},{},{},{},{}",
                ts.id,
                csv_field(name),
                ts.instructions[k],
                ts.cycles[k],
                ts.ipc[k],
                ts.llc_misses[k],
                ts.mem_transactions[k],
                ts.fp_ops[k],
                ts.task_clock_ns[k]
            );
        }
    }
    let mut bus = format!("{BUS_HEADER}\n");
    for (b, series) in r.series.bus_utilization.iter().enumerate() {
        for (t, u) in r.series.time_ns.iter().zip(series) {
            let _ = writeln!(bus, "{t},{b},{u:.6}");
        }
    }
    let contents = [
        serde_json::to_string_pretty(r).context("encoding result.json")?,
        csv,
        bus,
        super::simulate_plot::np_bars(r).context("drawing np.svg")?,
        super::simulate_plot::bus_lines(r).context("drawing bus.svg")?,
        super::simulate_plot::ipc_lines(r).context("drawing ipc.svg")?,
    ];
    Ok(OUT_FILES
        .iter()
        .zip(contents)
        .map(|(name, text)| (name.to_string(), text.into_bytes()))
        .collect())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `counterpoint bench sim`: simulated core-ticks per wall second of the tick engine, one thread.
#[derive(clap::Args)]
pub struct SimBenchArgs {
    /// Scenario to time (default: scenarios/bench-64.toml, 64 cores and 256 tasks).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Physics to run instead of the scenario's: v1 or v2 (also the model of the cores
    /// scaling points; the waiting-tasks points always run both).
    #[arg(long, value_parser = ["v1", "v2"])]
    model: Option<String>,
    /// Repetitions (1 to 1000); the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=MAX_REPEAT))]
    repeat: u64,
    /// Also measure how the cost grows with cores (8, 64, 512 at 4 tasks per core) and with
    /// waiting tasks (64 cores with 64 to 4096 tasks, under v1 and v2), with a verdict per
    /// model on whether the cost per tick stays flat from 128 to 4096 tasks. Every point
    /// simulates 60 s and takes the median of `--repeat` runs (at most 3), run in rounds;
    /// about 10 s of wall time on an idle 2-vCPU machine with the default repeat.
    #[arg(long)]
    scaling: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The most `bench sim --repeat` accepts: far more than a stable median needs, and a bound on a
/// typo's cost.
const MAX_REPEAT: u64 = 1000;

pub fn bench(args: SimBenchArgs) -> Result<ExitCode> {
    use counterpoint_sim::bench::{median_point, parse_model};
    let catalog = Catalog::builtin();
    let path = args
        .scenario
        .clone()
        .unwrap_or_else(|| PathBuf::from("scenarios/bench-64.toml"));
    let mut main_sc = Scenario::from_file(&path, &catalog).with_context(|| {
        // The hint only for the default path, which is relative to the repository.
        let hint = if args.scenario.is_none() {
            " (run from the repository root or pass --scenario)"
        } else {
            ""
        };
        format!("loading the bench scenario {}{hint}", path.display())
    })?;
    check_scenario_policy(&path, &main_sc)?;
    // What is timed is the tick engine under the default scheduler: a scenario's policy is
    // not run, and saying nothing let a reader think it was (CLI probe, session 27).
    if main_sc.policy != "linux" {
        eprintln!(
            "counterpoint: bench sim times the tick engine alone, under the default scheduler: \
             {}'s policy {:?} is not run",
            path.display(),
            main_sc.policy
        );
    }
    let model = args.model.as_deref().map(parse_model).transpose()?;
    if let Some(m) = model {
        main_sc.machine.model = m;
    }
    let main = median_point(&main_sc, args.repeat)?;
    let (scaling, verdicts) = if args.scaling {
        // About 10 s of runs with the default repeat: say what is running.
        let runs = counterpoint_sim::bench::SCALING_RUNS_PER_REPEAT * args.repeat.min(3);
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(runs),
            indicatif::ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template("scaling {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let out = counterpoint_sim::bench::scaling(
            &catalog,
            main_sc.machine.model,
            args.repeat.min(3),
            |label| {
                bar.set_message(label.to_string());
                bar.inc(1);
            },
        )?;
        bar.finish_and_clear();
        out
    } else {
        (Vec::new(), Vec::new())
    };
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "scenario": path.display().to_string(),
                "median_of": args.repeat,
                "result": main,
                "scaling": scaling,
                "verdicts": verdicts,
            }))?
        )?;
    } else {
        outln!(
            "{} (model {}): {} CPUs, {} tasks, {} ms simulated: {:.1} M core-ticks/s (median of {}, {:.3} s wall; {:.3} solves, {:.3} light updates of {:.2} iterations, {:.3} latency updates and {:.3} local warm-up steps per tick)",
            path.display(),
            main.model,
            main.cpus,
            main.tasks,
            main.simulated_ms,
            main.core_ticks_per_s / 1e6,
            args.repeat,
            main.wall_s,
            main.solves_per_tick,
            main.light_updates_per_tick,
            main.iterations_per_light_update,
            main.latency_updates_per_tick,
            main.local_steps_per_tick,
        )?;
        for p in &scaling {
            outln!(
                "  {} {:>10} {:>5} CPUs {:>5} tasks: {:>7.1} M core-ticks/s ({:.3} s wall for {} ms; {:.3} solves, {:.3} light updates per tick)",
                p.model,
                p.machine,
                p.cpus,
                p.tasks,
                p.core_ticks_per_s / 1e6,
                p.wall_s,
                p.simulated_ms,
                p.solves_per_tick,
                p.light_updates_per_tick,
            )?;
        }
        for v in &verdicts {
            outln!(
                "  {}: {} -> {} tasks on 64 CPUs: speed x{:.2}, work per tick (solve and light-update iterations, latency updates, local steps) at most x{:.2}: cost per tick {} (goal: flat, speed ratio >= {})",
                v.model,
                v.reference_tasks,
                v.largest_tasks,
                v.speed_ratio,
                v.work_ratio,
                if v.flat { "stays flat" } else { "GROWS" },
                counterpoint_sim::bench::FLAT_SPEED_RATIO,
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
