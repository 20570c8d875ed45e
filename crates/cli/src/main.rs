//! The `counterpoint` command: one binary for counting (`stat`, `topology`, `bench`), simulating
//! (`simulate`, `experiment`), placing (`agent`, `top`, `calibrate`, `burn`) and self-monitoring
//! (`lockprof`). Each subcommand lives in its own module under `cmd/`; this file only parses the
//! command line and dispatches.

mod cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "counterpoint",
    version,
    about = "Hardware performance counters as a first-class resource on Linux",
    long_about = "Counterpoint measures hardware performance counters cheaply and correctly, \
                  shares them among competing users, and uses them to place tasks so that \
                  co-runners on a core, a cache or a memory bus hurt each other less. A \
                  calibrated simulated machine runs the same placement policies on machines you \
                  do not have.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the load metrics (IPC, LLC MPKI, bandwidth, ...) and their formulas over events.
    Metrics(cmd::metrics::MetricsArgs),
    /// Measure Counterpoint's own costs: counter reads, simulator speed, self-monitoring.
    Bench(cmd::bench::BenchArgs),
    // [commands: counters]
    /// Count events for a command, processes or CPUs (perf stat compatible, -x and --json).
    Stat(cmd::stat::StatArgs),
    /// SchedTask page heatmaps of a live process's threads from cpu-clock IP samples, with overlaps.
    Heatmap(cmd::heatmap::HeatmapArgs),

    // [commands: sim]
    /// Run a scenario on the simulated machine: per-task NP, system metrics, time series.
    Simulate(cmd::simulate::SimulateArgs),
    // [commands: policy]
    /// Run the seed papers' experiments and checks from outside them, on the simulated machine
    /// unless named (zhang-spec, zhang-server, masa-placement, masa-testcases, clock-scaling,
    /// corun-slowdown, di-vs-oracle, leak, replica, model-validation, requests on PostgreSQL,
    /// schedtask, all).
    Experiment(cmd::experiment::ExperimentArgs),
    /// List the placement policies: name, level (pick-next or epoch), required events.
    Policies(cmd::policies::PoliciesArgs),
    // [commands: host]
    /// The machine's topology from sysfs: packages, cores, threads, caches, NUMA nodes, kinds.
    Topology(cmd::topology::TopologyArgs),
    /// Observe, decide, act on this host with a placement policy; always restores affinities.
    Agent(cmd::agent::AgentArgs),
    /// Run a MASA probe program: int, fp, l2 (cache-resident) or mem (streaming); or replica, a
    /// group of processes meeting at a futex barrier (seed 001).
    Burn(cmd::burn::BurnArgs),
    /// Co-run the probe programs in pairs and report ΔT per pair (ΔL where a PMU exists).
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Measure the agent's own CPU time per wall second while it watches many threads.
    AgentOverhead(cmd::overhead::OverheadArgs),
    /// Per-task CPU %, context switches, migrations (IPC/MPKI where a PMU exists), placement.
    Top(cmd::top::TopArgs),
    // [commands: selfmon]
    /// Per-request counter statistics: a PostgreSQL TPC-H harness (run-pg) or any server (--pid).
    Requests(cmd::requests::RequestsArgs),

    // [commands: broker]
    /// The counter broker: consumers share counters by share over a Unix socket, under a policy.
    #[command(visible_alias = "broker")]
    Daemon(cmd::daemon::DaemonArgs),
    // [commands: lockprof]
    /// Run a program with the pthread lock profiler preloaded and print a lockstat-style report.
    Lockprof(cmd::lockprof::LockprofArgs),
}

/// A closed output pipe ends a command quietly: the default SIGPIPE action (Rust starts with it
/// ignored, which turns every print into a panic on a closed pipe). Not for `agent`, which must
/// restore affinities before it exits (it catches SIGPIPE and stops on a failed log write), nor
/// `stat`, which ends its counted command itself on EPIPE, nor `agent-overhead`, which ends its
/// helper and removes its temporary directory on the way out (killed by SIGPIPE it left both
/// behind; CLI probe, session 30): there a closed pipe is an EPIPE error, status 141 all the same.
fn default_sigpipe_unless_agent_or_stat() {
    let sub = std::env::args_os()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'));
    if sub.as_ref().is_some_and(|s| s == "agent") {
        // The agent catches every terminating signal from its first instruction on, so a
        // signal that arrives during start-up (SIGPIPE included, which is ignored by default
        // here) is never lost: the loop sees the stop flag before it changes anything. A
        // failure is reported when the agent installs them again.
        let _ = counterpoint_host::signals::install();
        return;
    }
    let keeps_ignored = sub.is_some_and(|s| s == "stat" || s == "agent-overhead");
    if !keeps_ignored {
        // SAFETY: setting a signal's disposition to SIG_DFL before any thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

/// The command line's grammar. A negative number after an option that takes a value
/// (`burn --seconds -1`, `agent --hungry-cpus -0.5`, `--interval -1s`) is that option's value,
/// refused by its own parser with the range it takes, rather than clap's "unexpected argument
/// '-1' found" (`cmd::negative`).
fn cli_command() -> clap::Command {
    cmd::negative::negative_values_as_values(Cli::command())
}

fn main() -> ExitCode {
    default_sigpipe_unless_agent_or_stat();
    let command = cli_command();
    let argv = cmd::negative::attach_negative_durations(std::env::args_os().collect());
    let matches = command
        .clone()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| cmd::negative::explain_negative(e, &command, &argv).exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result: anyhow::Result<ExitCode> = match cli.command {
        Command::Metrics(args) => cmd::metrics::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        // [dispatch: broker]
        Command::Daemon(args) => cmd::daemon::run(args),
        // [dispatch: counters]
        Command::Stat(args) => cmd::stat::run(args),
        Command::Heatmap(args) => cmd::heatmap::run(args),

        // [dispatch: sim]
        Command::Simulate(args) => cmd::simulate::run(args),
        // [dispatch: policy]
        Command::Experiment(args) => cmd::experiment::run(args),
        Command::Policies(args) => cmd::policies::run(args),
        // [dispatch: host]
        Command::Topology(args) => cmd::topology::run(args),
        Command::Agent(args) => cmd::agent::run(args),
        Command::Burn(args) => cmd::burn::run(args),
        Command::Calibrate(args) => cmd::calibrate::run(args),
        Command::AgentOverhead(args) => cmd::overhead::run(args),
        Command::Top(args) => cmd::top::run(args),
        // [dispatch: selfmon]
        Command::Requests(args) => cmd::requests::run(args),

        // [dispatch: lockprof]
        Command::Lockprof(args) => cmd::lockprof::run(args),
    };
    match result {
        Ok(code) => code,
        // A reader that went away ends the command quietly, as SIGPIPE at its default would.
        Err(err) if cmd::is_stdout_closed(&err) => ExitCode::from(128 + libc::SIGPIPE as u8),
        Err(err) => {
            // Never a panic on a closed stderr: the exit status still says it failed.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "counterpoint: error: {}",
                cmd::error_chain(&err)
            );
            ExitCode::from(2)
        }
    }
}
