//! A complete new placement policy to copy: `balance-cores` gives each core the same CPU load.
//! Each interval it sorts the tasks by the CPUs they used (task-clock, a software event, so it
//! runs without a PMU) and puts each on the least-loaded core (longest-processing-time first).
//!
//! `cargo run -p counterpoint-policy --example template` runs it on the simulated machine
//! beside the baseline. `-- --live` runs it on this host against two busy child processes,
//! in dry-run mode (decisions logged, nothing changed); `-- --live --apply` applies them
//! through the host's journal and restores every affinity at the end. To make it a registry
//! policy: move `BalanceCores` into `src/balance.rs` and add one `Entry` to `REGISTRY`.

use counterpoint_core::driver::{Decision, Driver, DriverConfig, Observer, Verdict};
use counterpoint_core::{event, Action, Machine, Observation, Policy, Topology};
use std::error::Error;

/// The policy: its state is whatever it must remember between intervals (here nothing).
struct BalanceCores;

impl Policy for BalanceCores {
    fn name(&self) -> &str {
        "balance-cores"
    }
    fn required_events(&self) -> Vec<&'static str> {
        vec![event::TASK_CLOCK]
    }
    fn decide(&mut self, topology: &Topology, obs: &Observation) -> Vec<Action> {
        let cores = topology.cores();
        let mut load = vec![0.0f64; cores.len()];
        // CPUs each live task used over its sample's interval (on a host, the time since its
        // own last read), heaviest first (ties by id: deterministic).
        let mut tasks: Vec<(f64, _)> = obs
            .tasks
            .iter()
            .filter(|t| !t.finished)
            .map(|t| {
                let ns = t.sample.get(event::TASK_CLOCK).unwrap_or(0.0);
                (ns / t.sample.interval_ns.max(1) as f64, t.id)
            })
            .collect();
        tasks.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut actions = Vec::new();
        for (used, task) in tasks {
            // Least-loaded core; on a tie the one the task is on (moving costs its cache).
            let cpu = obs.task(task).and_then(|t| t.cpu);
            let here = |c: usize| cpu.is_some_and(|cpu| cores[c].contains(cpu));
            let best = (0..cores.len())
                .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(here(b).cmp(&here(a))));
            let Some(core) = best else {
                break;
            };
            load[core] += used;
            // The driver drops this when the task is already there, and holds it back when the
            // task moved too recently.
            actions.push(Action::SetAffinity {
                task,
                cpus: cores[core].clone(),
            });
        }
        actions
    }
}

/// Logs each decision; a task that exited mid-action is not a reason to stop.
struct Log;

impl<M: Machine> Observer<M> for Log {
    fn decision(&mut self, d: &Decision<'_>) -> Result<(), M::Error> {
        if let (Verdict::Apply | Verdict::DryRun, Action::SetAffinity { task, cpus }) =
            (d.verdict, d.action)
        {
            let from = d
                .observation
                .task(*task)
                .map(|t| t.affinity.to_list())
                .unwrap_or_default();
            let what = if d.verdict == Verdict::DryRun {
                "would move"
            } else {
                "moves"
            };
            println!(
                "interval {}: {} {what} task {task} from {from} to {}",
                d.interval,
                d.policy,
                cpus.to_list()
            );
        }
        Ok(())
    }
    fn failed(&mut self, _d: &Decision<'_>, e: &M::Error) -> bool {
        eprintln!("apply failed (task gone?): {e}");
        true
    }
}

fn simulated() -> Result<(), Box<dyn Error>> {
    let catalog = counterpoint_sim::Catalog::builtin();
    let mut b = counterpoint_sim::Scenario::builder(&catalog, "masa-2x2ht")?
        .name("template")
        .duration_ms(5_000);
    // Four programs all started on CPU 0 (an affinity inherited from a launcher): the
    // baseline scheduler must respect it; the policy spreads them.
    for p in ["mcf", "swim", "gzip", "mesa"] {
        b = b.task(p, Some(counterpoint_core::CpuSet::single(0)))?;
    }
    let scenario = b.build()?;
    let options = counterpoint_sim::RunOptions {
        min_residency_intervals: 3,
        ..counterpoint_sim::RunOptions::new(100_000_000)
    };
    let base = counterpoint_sim::run(&scenario, 1, None, None, options.epoch_ns)?;
    let ours = counterpoint_sim::run_with(
        &scenario,
        1,
        Some(&mut BalanceCores),
        None,
        &options,
        &mut |_, _| {},
    )?;
    // NP compares CPU time with the same work alone, so crowding one CPU costs no NP; the
    // throughput shows what the crowding costs.
    for r in [&base, &ours] {
        let migrations: u64 = r.tasks.iter().map(|t| t.migrations).sum();
        println!(
            "{:>14}: {:.2e} instructions/s, normalized performance {:.3}, {migrations} migrations",
            r.policy,
            r.throughput_instructions_per_s,
            r.metrics
                .as_ref()
                .map_or(f64::NAN, |m| m.normalized_performance)
        );
    }
    Ok(())
}

fn live(apply: bool) -> Result<(), Box<dyn Error>> {
    use counterpoint_host::{Host, Journal, TargetSpec};
    let mut children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let pids: Vec<String> = children.iter().map(|c| c.id().to_string()).collect();
    let journal_path =
        std::env::temp_dir().join(format!("template-{}.journal", std::process::id()));
    let journal = if apply {
        Some(Journal::open(&journal_path)?)
    } else {
        None
    };
    let mut host = Host::new(
        TargetSpec::parse(&format!("pid:{}", pids.join(",")))?,
        journal,
    )?;
    let config = DriverConfig {
        dry_run: !apply,
        max_intervals: Some(3),
        min_residency_intervals: 2,
        ..DriverConfig::new(300_000_000)
    };
    let report = Driver::new(config).run(&mut host, &mut BalanceCores, &mut Log);
    if apply {
        let restored = host.restore();
        println!("restored {} thread(s)", restored.restored.len());
        let _ = std::fs::remove_file(&journal_path);
    }
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    println!("{:?}", report?);
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let known = ["--live", "--apply"];
    if let Some(a) = args.iter().find(|a| !known.contains(&a.as_str())) {
        return Err(format!("unknown argument {a:?}; usage: template [--live [--apply]]").into());
    }
    if args.iter().any(|a| a == "--live") {
        live(args.iter().any(|a| a == "--apply"))
    } else {
        simulated()
    }
}
