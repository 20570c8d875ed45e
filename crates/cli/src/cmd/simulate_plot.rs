//! SVG figures of a simulation run (plotters): per-task NP bars, bus utilization and IPC over
//! time.

use anyhow::{anyhow, Result};
use counterpoint_sim::RunResult;
use plotters::prelude::*;
use std::path::Path;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// Per-task normalized performance as bars, with 1.0 (no slowdown) as the top.
pub fn np_bars(path: &Path, r: &RunResult) -> Result<()> {
    let n = r.tasks.len().max(1);
    let width = (120 + 40 * n as u32).clamp(480, 4000);
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = match &r.metrics {
        Some(m) => format!(
            "{} / {}: NP {:.3}, unfairness {:.3}",
            r.scenario, r.policy, m.normalized_performance, m.unfairness
        ),
        None => format!("{} / {}", r.scenario, r.policy),
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(60)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n as f64, 0f64..1.1f64)
        .map_err(err)?;
    let names: Vec<String> = r.tasks.iter().map(|t| t.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.min(64))
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (*x - i as f64 - 0.5).abs() < 0.26 {
                names.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("normalized performance")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(r.tasks.iter().enumerate().map(|(i, t)| {
            let v = t.np.unwrap_or(0.0);
            Rectangle::new(
                [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, v)],
                BLUE.mix(0.7).filled(),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn lines(
    path: &Path,
    title: &str,
    y_desc: &str,
    times_ns: &[u64],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let t_max = times_ns.last().copied().unwrap_or(1).max(1) as f64 * 1e-9;
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("simulated time (s)")
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (i, (name, ys)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                times_ns.iter().zip(ys).map(|(t, y)| (*t as f64 * 1e-9, *y)),
                color.stroke_width(1),
            ))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    if series.len() <= 16 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Utilization of each bus / memory controller per epoch.
pub fn bus_lines(path: &Path, r: &RunResult) -> Result<()> {
    let series: Vec<(String, Vec<f64>)> = r
        .series
        .bus_utilization
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("bus {i}"), s.clone()))
        .collect();
    lines(
        path,
        &format!("{}: memory bus utilization", r.scenario),
        "utilization",
        &r.series.time_ns,
        &series,
    )
}

/// IPC of each task per epoch (the first 32 tasks on large runs).
pub fn ipc_lines(path: &Path, r: &RunResult) -> Result<()> {
    let series: Vec<(String, Vec<f64>)> = r
        .series
        .tasks
        .iter()
        .take(32)
        .map(|t| (r.tasks[t.id as usize].name.clone(), t.ipc.clone()))
        .collect();
    lines(
        path,
        &format!("{}: IPC per epoch", r.scenario),
        "IPC",
        &r.series.time_ns,
        &series,
    )
}
