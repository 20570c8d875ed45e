//! `counterpoint top`: what the agent sees, per task: CPU %, context switches and migrations per
//! second always; IPC, LLC MPKI and bandwidth only where a hardware PMU counts them (never
//! here: shown as unavailable, not invented); the current placement per CPU.
//! `--once --json` prints one interval for pipes; without `--once` the table refreshes.

use anyhow::{bail, Result};
use clap::Args;
use counterpoint_core::event;
use counterpoint_core::machine::Machine;
use counterpoint_core::observation::Observation;
use counterpoint_host::{Host, TargetSpec};
use serde_json::json;
use std::process::ExitCode;

#[derive(Args)]
pub struct TopArgs {
    /// Which processes (same syntax as `agent --targets`).
    #[arg(long, default_value = "all")]
    targets: String,
    /// Refresh interval.
    #[arg(long, default_value = "1s")]
    interval: String,
    /// Sort by: cpu, cs, migrations, pid.
    #[arg(long, default_value = "cpu")]
    sort: String,
    /// Print one interval and exit.
    #[arg(long)]
    once: bool,
    /// JSON output (with --once: one document).
    #[arg(long)]
    json: bool,
    /// Rows to show.
    #[arg(long, default_value_t = 20)]
    rows: usize,
}

struct Row {
    pid: u64,
    name: String,
    cpu_pct: f64,
    cs_per_s: f64,
    mig_per_s: Option<f64>,
    affinity: String,
    last_cpu: Option<u32>,
}

fn rows(obs: &Observation) -> Vec<Row> {
    let secs = (obs.interval_ns as f64 / 1e9).max(1e-9);
    obs.tasks
        .iter()
        .map(|t| Row {
            pid: t.id.0,
            name: t.name.clone(),
            cpu_pct: t.sample.get(event::TASK_CLOCK).unwrap_or(0.0) / obs.interval_ns as f64
                * 100.0,
            cs_per_s: t.sample.get(event::CONTEXT_SWITCHES).unwrap_or(0.0) / secs,
            mig_per_s: t.sample.get(event::CPU_MIGRATIONS).map(|m| m / secs),
            affinity: t.affinity.to_list(),
            last_cpu: t.cpu,
        })
        .collect()
}

pub fn run(args: TopArgs) -> Result<ExitCode> {
    let interval_ns = super::agent::parse_interval(&args.interval)?;
    if !matches!(args.sort.as_str(), "cpu" | "cs" | "migrations" | "pid") {
        bail!(
            "--sort {:?}: expected cpu, cs, migrations or pid",
            args.sort
        );
    }
    let targets = TargetSpec::parse(&args.targets)?;
    let mut host = Host::new(targets, None)?;
    host.set_detailed(true);
    loop {
        let obs = host.advance(interval_ns)?;
        let mut rs = rows(&obs);
        match args.sort.as_str() {
            "cpu" => rs.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct)),
            "cs" => rs.sort_by(|a, b| b.cs_per_s.total_cmp(&a.cs_per_s)),
            "migrations" => rs.sort_by(|a, b| {
                b.mig_per_s
                    .unwrap_or(0.0)
                    .total_cmp(&a.mig_per_s.unwrap_or(0.0))
            }),
            _ => rs.sort_by_key(|r| r.pid),
        }
        let placement: Vec<_> = obs
            .cpus
            .iter()
            .map(|c| {
                let on: Vec<u64> = rs
                    .iter()
                    .filter(|r| r.last_cpu == Some(c.cpu) && r.cpu_pct > 1.0)
                    .map(|r| r.pid)
                    .collect();
                (c.cpu, c.busy_fraction, on)
            })
            .collect();
        if args.json {
            let doc = json!({
                "interval_ns": obs.interval_ns,
                "unavailable": {"ipc": "no hardware PMU", "llc_mpki": "no hardware PMU", "bandwidth": "no hardware PMU"},
                "tasks": rs.iter().take(args.rows).map(|r| json!({
                    "pid": r.pid, "comm": r.name, "cpu_percent": r.cpu_pct,
                    "context_switches_per_s": r.cs_per_s, "migrations_per_s": r.mig_per_s,
                    "affinity": r.affinity, "last_cpu": r.last_cpu,
                })).collect::<Vec<_>>(),
                "cpus": placement.iter().map(|(c, b, on)| json!({"cpu": c, "busy_fraction": b, "running_pids": on})).collect::<Vec<_>>(),
            });
            println!("{doc}");
        } else {
            if !args.once {
                print!("\x1b[2J\x1b[H");
            }
            for (c, b, on) in &placement {
                println!("cpu{c}: {:5.1} % busy  tasks {on:?}", b * 100.0);
            }
            println!("IPC / LLC MPKI / bandwidth: unavailable (no hardware PMU)");
            println!(
                "{:>8} {:<16} {:>7} {:>9} {:>8} {:>5} {:<10}",
                "PID", "COMM", "CPU%", "CS/s", "MIG/s", "CPU", "AFFINITY"
            );
            for r in rs.iter().take(args.rows) {
                println!(
                    "{:>8} {:<16} {:>7.1} {:>9.1} {:>8} {:>5} {:<10}",
                    r.pid,
                    r.name,
                    r.cpu_pct,
                    r.cs_per_s,
                    r.mig_per_s.map(|m| format!("{m:.1}")).unwrap_or("-".into()),
                    r.last_cpu.map(|c| c.to_string()).unwrap_or("-".into()),
                    r.affinity
                );
            }
        }
        if args.once {
            return Ok(ExitCode::SUCCESS);
        }
    }
}
