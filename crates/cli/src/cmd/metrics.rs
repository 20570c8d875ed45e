//! `counterpoint metrics`: the load metrics every part of Counterpoint computes, with their
//! formulas, so a user can see exactly what "IPC" or "LLC MPKI" means here.

use anyhow::Result;
use clap::Args;
use counterpoint_core::metric;
use std::process::ExitCode;

#[derive(Args)]
pub struct MetricsArgs {
    /// Print as JSON (name, unit, formula, events).
    #[arg(long)]
    json: bool,
}

pub fn run(args: MetricsArgs) -> Result<ExitCode> {
    let metrics = metric::standard();
    if args.json {
        let rows: Vec<_> = metrics
            .iter()
            .map(|m| {
                serde_json::json!({
                    "name": m.name,
                    "unit": m.unit,
                    "formula": m.expr.to_string(),
                    "events": m.events(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
    } else {
        let width = metrics.iter().map(|m| m.name.len()).max().unwrap_or(0);
        for m in &metrics {
            outln!("{:width$}  = {}   [{}]", m.name, m.expr, m.unit)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
