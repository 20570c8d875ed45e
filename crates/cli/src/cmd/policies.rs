//! `counterpoint policies`: the policy registry as a table (name, level, required events,
//! description) or JSON. Everything that takes a policy name (`simulate`, `experiment`,
//! `agent`) reads the same registry.

use anyhow::Result;
use clap::Args;
use counterpoint_policy::registry::REGISTRY;
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(Args)]
pub struct PoliciesArgs {
    /// Print the registry as JSON (name, level, events, description, paper, needs, options).
    #[arg(long)]
    json: bool,
}

pub fn run(args: PoliciesArgs) -> Result<ExitCode> {
    let out = if args.json {
        let v: Vec<serde_json::Value> = REGISTRY
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "level": e.level,
                    "events": e.events,
                    "description": e.description,
                    "paper": e.paper,
                    "needs": e.needs,
                    "options": e.options,
                    "runs_on": runs_on(e),
                })
            })
            .collect();
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        table()
    };
    super::write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Where a policy can run: pick-next hooks and the oracle (whose cost is simulated runs) only
/// in the simulator.
fn runs_on(e: &counterpoint_policy::Entry) -> Vec<&'static str> {
    if !counterpoint_policy::registry::runs_live(e) {
        vec!["simulator"]
    } else {
        vec!["simulator", "host"]
    }
}

/// The terminal table.
pub fn table() -> String {
    let name_w = REGISTRY.iter().map(|e| e.name.len()).max().unwrap_or(4);
    let events = |e: &counterpoint_policy::Entry| {
        if e.events.is_empty() {
            "-".to_string()
        } else {
            e.events.join(",")
        }
    };
    let ev_w = REGISTRY.iter().map(|e| events(e).len()).max().unwrap_or(6);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:name_w$}  {:9}  {:ev_w$}  description",
        "name", "level", "events"
    );
    for e in REGISTRY {
        let _ = writeln!(
            s,
            "{:name_w$}  {:9}  {:ev_w$}  {}",
            e.name,
            e.level.label(),
            events(e),
            e.description
        );
    }
    let _ = writeln!(
        s,
        "\npick-next: a kernel-level hook at each context switch (simulator only); \
         epoch: affinity decisions each interval (simulator and `agent` on a host)."
    );
    s
}
