//! SVG figures of a simulation run (plotters): per-task NP bars, bus utilization and IPC over
//! time. Legends sit in their own column right of the plot (never over the data), task names
//! under the axis, and y ranges show the differences (`crates/cli/tests/simulate_figures.rs`
//! checks the geometry).

use anyhow::{anyhow, Result};
use counterpoint_experiment::report;
use counterpoint_sim::RunResult;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// Per-task normalized performance as bars, task names under the axis; the y axis starts at
/// zero (a solid baseline) unless the tasks' NPs are close, then just below them (said in the
/// axis label), so the differences show.
/// The figures are returned, not written: `simulate --out` writes them with the rest of its
/// files as one set.
pub fn np_bars(r: &RunResult) -> Result<String> {
    let mut svg = String::new();
    np_bars_svg(&mut svg, r)?;
    Ok(svg)
}

fn np_bars_svg(svg: &mut String, r: &RunResult) -> Result<()> {
    let n = r.tasks.len().max(1);
    let width = (120 + 40 * n as u32).clamp(640, 4000);
    let root = SVGBackend::with_string(svg, (width, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = match &r.metrics {
        Some(m) => format!(
            "{} / {}: NP {:.3}, unfairness {:.3}",
            r.scenario, r.policy, m.normalized_performance, m.unfairness
        ),
        None => format!("{} / {}", r.scenario, r.policy),
    };
    let nps: Vec<f64> = r.tasks.iter().filter_map(|t| t.np).collect();
    let lo = nps.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = nps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (ymin, ymax, cut) = if lo.is_finite() {
        report::bar_y_range(lo, hi)
    } else {
        (0.0, 1.1, false)
    };
    let base = if cut { ymin } else { 0.0 };
    let y_desc = if cut {
        format!("normalized performance (axis from {ymin:.2}, not 0)")
    } else {
        "normalized performance".to_string()
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(70)
        .y_label_area_size(95)
        .build_cartesian_2d(0f64..n as f64, ymin..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        // The ticks bar_y_range ends the axis on.
        .y_labels(report::Y_LABELS)
        .y_label_formatter(&|v| report::short(*v))
        .y_desc(y_desc.as_str())
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(err)?;
    if !cut {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (n as f64, 0.0)],
                BLACK.stroke_width(2),
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(r.tasks.iter().enumerate().filter_map(|(i, t)| {
            let v = t.np?;
            Some(Rectangle::new(
                [(i as f64 + 0.15, base), (i as f64 + 0.85, v)],
                BLUE.mix(0.7).filled(),
            ))
        }))
        .map_err(err)?;
    // Task names under their bars (every one up to 64 tasks; beyond, every k-th).
    let step = n.div_ceil(64);
    let label =
        TextStyle::from(("sans-serif", 16).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, t) in r.tasks.iter().enumerate().step_by(step) {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, ymin));
        root.draw(&Text::new(t.name.clone(), (px, py + 8), label.clone()))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

fn lines(
    title: &str,
    y_desc: &str,
    times_ns: &[u64],
    series: &[(String, Vec<f64>)],
) -> Result<String> {
    let mut svg = String::new();
    lines_svg(&mut svg, title, y_desc, times_ns, series)?;
    Ok(svg)
}

fn lines_svg(
    svg: &mut String,
    title: &str,
    y_desc: &str,
    times_ns: &[u64],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    let names: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
    let legend_w = report::legend_width(&names);
    let height = (70 + 22 * series.len() as u32).max(440);
    let root = SVGBackend::with_string(svg, (900 + legend_w, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plot, legend) = root.split_horizontally(900);
    let t_max = times_ns.last().copied().unwrap_or(1).max(1) as f64 * 1e-9;
    let values = || {
        series
            .iter()
            .flat_map(|s| s.1.iter().copied())
            .filter(|v| v.is_finite())
    };
    let lo = values().fold(f64::INFINITY, f64::min);
    let hi = values().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    // Lines need no zero: the range hugs the data (padded), so the differences show; a range
    // that reaches zero anyway starts there.
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-3);
    let y_min = if lo >= 0.0 && lo - pad <= 0.0 {
        0.0
    } else {
        lo - pad
    };
    let y_max = hi + pad;
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(95)
        .build_cartesian_2d(0f64..t_max, y_min..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("simulated time (s)")
        .y_label_formatter(&|v| report::short(*v))
        .y_desc(y_desc)
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(err)?;
    let mut entries = Vec::new();
    for (i, (name, ys)) in series.iter().enumerate() {
        let color = if i < report::PALETTE.len() {
            report::PALETTE[i].to_rgba()
        } else {
            Palette99::pick(i).to_rgba()
        };
        chart
            .draw_series(LineSeries::new(
                times_ns.iter().zip(ys).map(|(t, y)| (*t as f64 * 1e-9, *y)),
                color.stroke_width(2),
            ))
            .map_err(err)?;
        entries.push((name.clone(), color));
    }
    report::draw_legend(&legend, &entries, true).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Utilization of each bus / memory controller per epoch.
pub fn bus_lines(r: &RunResult) -> Result<String> {
    let series: Vec<(String, Vec<f64>)> = r
        .series
        .bus_utilization
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("bus {i}"), s.clone()))
        .collect();
    lines(
        &format!("{}: memory bus utilization", r.scenario),
        "utilization",
        &r.series.time_ns,
        &series,
    )
}

/// IPC of each task per epoch (the first 32 tasks on large runs).
pub fn ipc_lines(r: &RunResult) -> Result<String> {
    let series: Vec<(String, Vec<f64>)> = r
        .series
        .tasks
        .iter()
        .take(32)
        .map(|t| (r.tasks[t.id as usize].name.clone(), t.ipc.clone()))
        .collect();
    lines(
        &format!("{}: IPC per epoch", r.scenario),
        "IPC",
        &r.series.time_ns,
        &series,
    )
}
