//! `counterpoint experiment NAME`: the seed papers' experiments on the simulated machine
//! (Zhang et al. pairing schedulers, MASA placement tables and test cases, DI vs the oracle),
//! each over several seeds with mean and spread beside the paper's numbers. `all` writes the
//! `report/` directory (Markdown, SVG figures, JSON).

use anyhow::{bail, Context, Result};
use clap::Args;
use counterpoint_experiment::{self as experiment, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Args)]
pub struct ExperimentArgs {
    /// Experiment: zhang-spec, zhang-server, masa-placement, masa-testcases, clock-scaling (each
    /// program alone on a Pentium 4 at 1.3 and 1.7 GHz against Intel's SPEC results),
    /// corun-slowdown (programs in pairs on a dual-core Xeon 5150 with a shared L2 against Tian
    /// et al.'s measured slowdowns), di-vs-oracle, leak, replica, model-validation (every published figure under simulator models v1 and v2),
    /// requests (needs PostgreSQL), schedtask, all.
    name: String,
    /// Number of seeds, 1 to 4294967295 (each experiment runs every configuration once per
    /// seed; a run estimated beyond the 30-minute budget needs --force). Verdicts come from
    /// 95 % intervals over the seeds: with one seed there is no interval and every verdict
    /// reads "undecided: one seed"; use 2 or more.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    seeds: u32,
    /// First seed; seeds are consecutive from here.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Print the results as JSON on stdout (per policy, ours beside the paper's under "paper").
    #[arg(long)]
    json: bool,
    /// Write the report (report.md, results.json, SVG figures) into this directory
    /// (default for `all`: report/). A report it replaces goes whole: its figures that this
    /// one does not write are removed once the new report is in place.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Start even when the estimated time exceeds the budget (30 min on 2 vCPUs), or when
    /// `--out` holds a report of other experiments that this run would replace, or files under
    /// the report's names that are not a report's.
    #[arg(long)]
    force: bool,
    /// replica only: notification costs from a `counterpoint bench c2c --json` file instead of
    /// seed 001's X5650 figures (distances the file lacks take the nearest measured one).
    #[arg(long, value_name = "FILE")]
    c2c: Option<PathBuf>,
    /// Simulator physics for the simulated experiments: v1 (fitted) or v2 (physics from
    /// sources, slices drifting; docs/sim.md, "Model v2"). Default: each scenario's own (v1
    /// unless its file says `model = "v2"`; replica: x5650-2s's, v1). model-validation (which
    /// always runs both), leak and schedtask (models of their own) and requests (a real
    /// PostgreSQL) refuse it; under `all` they run as without it.
    #[arg(long, value_name = "v1|v2")]
    model: Option<String>,
}

/// Why experiment `name` would run the same with and without `--model` (None: it takes it).
fn ignores_model(name: &str) -> Option<&'static str> {
    match name {
        "model-validation" => Some("always runs both models side by side"),
        "leak" => Some(
            "runs its own sub-microsecond model of two SMT threads (counterpoint_sim::smt_probe), \
             not the engine's physics",
        ),
        "schedtask" => Some(
            "runs its own model of OS-intensive programs (counterpoint_sim::schedtask), not \
             the engine's physics",
        ),
        "requests" => Some(
            "runs a real PostgreSQL; its projection of the requests onto other machines always \
             runs v1",
        ),
        _ => None,
    }
}

/// `dir`'s report (its `results.json`) holds experiments other than `name`'s: writing `name`'s
/// report there would replace theirs (`experiment leak --out report` turned the 12-experiment
/// report into a one-experiment one and left its figures unreferenced). `all` replaces any.
fn refuse_to_replace_other_reports(dir: &std::path::Path, name: &str) -> Result<()> {
    if name == "all" {
        return Ok(());
    }
    // Not there, not a file (a FIFO would block the read), unreadable or not a report: no
    // report to lose (a file that is not a report is refused by `refuse_foreign_outputs`).
    let path = dir.join("results.json");
    if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let Ok(file) = std::fs::File::open(&path) else {
        return Ok(());
    };
    let Some(entries) = experiment::report::report_experiments(std::io::BufReader::new(file))
    else {
        return Ok(());
    };
    let others: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(String::as_str)
        .filter(|&e| e != name)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    bail!(
        "--out {}: it holds a report of {} other experiment(s) ({}) that this run of {name} would replace; choose another directory, or pass --force to replace it",
        dir.display(),
        others.len(),
        others.into_iter().collect::<Vec<_>>().join(", ")
    )
}

/// Whether the regular file `name` at `path`, in a report directory, is one a report wrote
/// (see `report::is_own_file`): `results.json` read as a stream, the others by their first
/// line.
fn is_report_file(name: &str, path: &std::path::Path) -> bool {
    if name == "results.json" {
        return std::fs::File::open(path).is_ok_and(|f| {
            experiment::report::report_experiments(std::io::BufReader::new(f)).is_some()
        });
    }
    super::first_line(path).is_some_and(|b| experiment::report::is_own_file(name, &b))
}

/// The writer of a report, as the refusal of other files names it.
const REPORT_WRITER: &str = "`counterpoint experiment`";

/// An indicatif bar when stderr is a terminal; otherwise, for long runs, a plain progress line
/// at every tenth of the runs.
struct Bar {
    bar: ProgressBar,
    /// Print plain lines (stderr is not a terminal and the run is long).
    lines: bool,
    /// Every run of the command: `experiment::run` gives the whole before the first starts.
    total: AtomicU64,
    finished: AtomicU64,
    started: Instant,
}

impl Progress for Bar {
    fn add_total(&self, runs: u64) {
        self.bar.inc_length(runs);
        self.total.fetch_add(runs, Ordering::Relaxed);
    }
    fn done(&self, label: &str) {
        self.bar.set_message(label.to_string());
        self.bar.inc(1);
        let done = self.finished.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.total.load(Ordering::Relaxed).max(1);
        // One line per tenth of the whole.
        if self.lines && (done * 10 / total) != ((done - 1) * 10 / total) {
            eprintln!(
                "counterpoint: {done}/{total} runs ({:.0} %), {:.0} s",
                100.0 * done as f64 / total as f64,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

pub fn run(args: ExperimentArgs) -> Result<ExitCode> {
    if !experiment::names().contains(&args.name.as_str()) {
        bail!(
            "unknown experiment {:?}; known: {}",
            args.name,
            experiment::names().join(", ")
        );
    }
    let model = match args.model.as_deref() {
        None => None,
        Some("v1") => Some(counterpoint_sim::Model::V1),
        Some("v2") => Some(counterpoint_sim::Model::V2),
        Some(other) => bail!("--model {other:?}: expected v1 or v2"),
    };
    if model.is_some() {
        if let Some(why) = ignores_model(&args.name) {
            bail!("--model: experiment {} {why}; drop --model", args.name);
        }
    }
    let last = args
        .first_seed
        .checked_add(u64::from(args.seeds) - 1)
        .with_context(|| {
            format!(
                "--first-seed {} with --seeds {} goes past the largest seed {}",
                args.first_seed,
                args.seeds,
                u64::MAX
            )
        })?;
    // Estimated before the seed list exists: `--seeds 4000000000` must not allocate first.
    let estimate_s =
        experiment::progress::estimate_seconds(&args.name, u64::from(args.seeds)).unwrap_or(0.0);
    if estimate_s > experiment::progress::BUDGET_SECONDS && !args.force {
        bail!(
            "experiment {} over {} seed(s) would take about {} on 2 vCPUs, beyond the budget of \
             {}; use fewer --seeds or pass --force",
            args.name,
            args.seeds,
            super::human_time(estimate_s),
            super::human_time(experiment::progress::BUDGET_SECONDS)
        );
    }
    let seeds: Vec<u64> = (args.first_seed..=last).collect();
    let out_dir = match (&args.out, args.name.as_str()) {
        (Some(d), _) => Some(d.clone()),
        (None, "all") => Some(PathBuf::from("report")),
        _ => None,
    };
    if let Some(dir) = &out_dir {
        super::check_out_dir(dir, "report")?;
        // The figures' names are known only once the runs are done: checked again then.
        super::refuse_foreign_outputs(
            dir,
            &["report.md", "results.json"],
            &is_report_file,
            REPORT_WRITER,
            args.force,
        )?;
        if !args.force {
            refuse_to_replace_other_reports(dir, &args.name)?;
        }
    }
    // Ctrl-C ends the command with a message, never between two renames of the report's files;
    // during `requests` it stops the private PostgreSQL cluster first.
    experiment::requests::set_stop_flag(counterpoint_host::signals::stop_flag());
    super::exit_on_interrupt()?;
    let mut lab = experiment::sim_lab::SimLab::new()
        .context("cannot load the simulator's scenario catalog")?;
    if let Some(m) = model {
        lab = lab.with_model(m);
    }
    let pb = ProgressBar::new(0);
    let terminal = std::io::stderr().is_terminal();
    if !terminal {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let long = estimate_s >= 60.0;
    // Said when the run starts, after the checks of its options (`--c2c` below).
    let announce = || {
        if long {
            eprintln!(
                "counterpoint: experiment {} over {} seed(s): about {} on 2 vCPUs",
                args.name,
                seeds.len(),
                super::human_time(estimate_s)
            );
        }
    };
    let started = Instant::now();
    let bar = Bar {
        bar: pb,
        lines: !terminal && long,
        total: AtomicU64::new(0),
        finished: AtomicU64::new(0),
        started,
    };
    if args.c2c.is_none() {
        announce();
    }
    // The error names the experiment (and the run) already.
    let results = match &args.c2c {
        None => match experiment::run(&args.name, &lab, &seeds, &bar) {
            Ok(results) => results,
            // Interrupted: the error says what became of the cluster.
            Err(e) if counterpoint_host::signals::stop_requested() => {
                bar.bar.finish_and_clear();
                super::end_interrupted(Some(&crate::cmd::error_chain(&anyhow::Error::new(e))))
            }
            Err(e) => return Err(e.into()),
        },
        Some(path) => {
            if args.name != "replica" {
                anyhow::bail!("--c2c applies to `experiment replica` only");
            }
            let text = crate::cmd::read_input_file("--c2c", path)?;
            let costs = experiment::replica::costs_from_c2c(&text, &path.display().to_string())
                .map_err(anyhow::Error::msg)?;
            announce();
            vec![experiment::replica::run_with(&seeds, &bar, costs, model)
                .map_err(anyhow::Error::msg)?]
        }
    };
    bar.bar.finish_and_clear();
    let elapsed = started.elapsed();

    if let Some(dir) = &out_dir {
        let preamble =
            experiment::report::preamble(&args.name, &seeds, elapsed.as_secs_f64(), &results);
        let files = experiment::report::render(&results, &preamble)
            .with_context(|| format!("drawing the report for {}", dir.display()))?;
        // Again, with the figures now named (and in case the directory changed during the
        // runs).
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        super::refuse_foreign_outputs(dir, &names, &is_report_file, REPORT_WRITER, args.force)
            .context("the report was not written")?;
        // The replaced report's figures that this one does not write: removed with it (they
        // stayed beside the new report; CLI probe, session 29).
        let replaced = experiment::report::replaced_figures(dir, &names);
        // All the new files or all the old ones, whatever the signal (see write_out_set).
        let removed = super::write_out_set(dir, &files, &replaced, "report")?;
        eprintln!(
            "counterpoint: wrote {} ({} experiment(s), {:.1} s)",
            dir.display(),
            results.len(),
            elapsed.as_secs_f64()
        );
        if !removed.is_empty() {
            eprintln!(
                "counterpoint: removed the replaced report's figures: {}",
                removed
                    .iter()
                    .map(|n| super::printable(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let mut text = String::new();
    if args.json {
        text = serde_json::to_string_pretty(&experiment::to_json(&results))?;
        text.push('\n');
    } else if out_dir.is_none() || args.name != "all" {
        for r in &results {
            text.push_str(&format!("== {} ({})\n", r.title, r.experiment));
            text.push_str(&format!(
                "machine: {}; model: {}; seeds: {}\n",
                r.machine,
                r.model,
                r.seeds.len()
            ));
            for t in &r.tables {
                text.push('\n');
                text.push_str(&t.text());
            }
            if !r.findings.is_empty() {
                text.push('\n');
                for f in &r.findings {
                    text.push_str(&format!("- {f}\n"));
                }
            }
            text.push('\n');
        }
    }
    if !text.is_empty() {
        super::write_stdout(&text)?;
    }
    // The run's time, said once: `wrote DIR` already said it (a CLI probe saw it twice).
    if !args.json && out_dir.is_none() {
        eprintln!(
            "counterpoint: {} experiment(s) in {:.1} s",
            results.len(),
            elapsed.as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}
