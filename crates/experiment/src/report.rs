//! The `report/` directory: `report.md` (every table ours vs the paper, findings, figures),
//! `results.json` (everything, machine-readable) and one SVG bar chart per figure (plotters).

use crate::result::{BarFigure, ExperimentResult};
use plotters::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

/// Why the report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be written.
    #[error("cannot write {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A figure could not be drawn.
    #[error("cannot draw {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
    /// The results could not be encoded.
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
}

fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    fs::write(path, text).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The Markdown of a set of results (also used for `docs/experiments.md`).
pub fn markdown(results: &[ExperimentResult], preamble: &str) -> String {
    let mut md =
        String::from("# Counterpoint experiments: seed results on the simulated machine\n\n");
    md.push_str(preamble);
    md.push('\n');
    for r in results {
        md.push_str(&format!("## {} (`{}`)\n\n", r.title, r.experiment));
        md.push_str(&format!(
            "Machine: {}. Seeds: {} ({}). Values are mean ± sample standard deviation over seeds.\n\n",
            r.machine,
            r.seeds.len(),
            r.seeds
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for t in &r.tables {
            md.push_str(&t.markdown());
            md.push('\n');
        }
        for f in &r.figures {
            md.push_str(&format!("![{}]({})\n\n", f.title, f.file));
        }
        if !r.findings.is_empty() {
            md.push_str("Findings:\n\n");
            for f in &r.findings {
                md.push_str(&format!("- {f}\n"));
            }
            md.push('\n');
        }
    }
    md
}

/// Write `report.md`, `results.json` and the SVG figures into `dir` (created if needed).
pub fn write_report(
    dir: &Path,
    results: &[ExperimentResult],
    preamble: &str,
) -> Result<(), ReportError> {
    fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for r in results {
        for f in &r.figures {
            draw_bars(&dir.join(&f.file), f)?;
        }
    }
    write(&dir.join("report.md"), &markdown(results, preamble))?;
    write(
        &dir.join("results.json"),
        &serde_json::to_string_pretty(results)?,
    )?;
    Ok(())
}

const PALETTE: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// A grouped bar chart with error bars.
pub fn draw_bars(path: &Path, fig: &BarFigure) -> Result<(), ReportError> {
    let err = |e: String| ReportError::Plot {
        path: path.to_path_buf(),
        message: e,
    };
    let ncat = fig.categories.len().max(1);
    let ends = || {
        fig.series.iter().flat_map(|s| {
            s.values
                .iter()
                .zip(&s.errors)
                .filter_map(|(v, e)| v.map(|v| (v - e.unwrap_or(0.0), v + e.unwrap_or(0.0))))
        })
    };
    let ymax = ends().map(|e| e.1).fold(0.0f64, f64::max);
    let ymin = ends().map(|e| e.0).fold(0.0f64, f64::min);
    let pad = ((ymax - ymin).max(1e-9)) * 0.15;
    let (ymin, ymax) = (if ymin < 0.0 { ymin - pad } else { 0.0 }, ymax + pad);
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&fig.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..ncat as f64, ymin..ymax)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(fig.y_label.as_str())
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let nser = fig.series.len().max(1) as f64;
    let group = 0.8;
    let width = group / nser;
    for (si, s) in fig.series.iter().enumerate() {
        let color = PALETTE[si % PALETTE.len()];
        let x0 = |ci: usize| ci as f64 + (1.0 - group) / 2.0 + si as f64 * width;
        chart
            .draw_series(s.values.iter().enumerate().filter_map(|(ci, v)| {
                v.map(|v| {
                    Rectangle::new([(x0(ci), 0.0), (x0(ci) + width * 0.9, v)], color.filled())
                })
            }))
            .map_err(|e| err(e.to_string()))?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        chart
            .draw_series(
                s.values
                    .iter()
                    .zip(&s.errors)
                    .enumerate()
                    .filter_map(|(ci, (v, e))| {
                        let (v, e) = ((*v)?, (*e)?);
                        let xm = x0(ci) + width * 0.45;
                        Some(PathElement::new(vec![(xm, v - e), (xm, v + e)], BLACK))
                    }),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    // Category names under the axis, centred on their group.
    for (ci, name) in fig.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(ci as f64 + 0.5, ymin));
        root.draw(&Text::new(
            name.clone(),
            (px - (name.len() as i32 * 7) / 2, py + 8),
            ("sans-serif", 14),
        ))
        .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{BarSeries, Table};

    #[test]
    fn writes_markdown_json_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = ExperimentResult::new("zhang-spec", "Zhang SPEC", "2-CPU SMP", &[1, 2]);
        r.put("linux", "normalized_performance", &[0.80, 0.82]);
        r.put_paper("linux", "normalized_performance", 0.818);
        let mut t = Table::new("NP", &["policy", "ours", "paper"]);
        t.row(vec!["linux".into(), "0.81".into(), "0.818".into()]);
        r.tables.push(t);
        r.figures.push(BarFigure {
            file: "zhang-spec.svg".into(),
            title: "NP".into(),
            y_label: "normalized performance".into(),
            categories: vec!["linux".into(), "bus-pair".into()],
            series: vec![
                BarSeries {
                    name: "ours".into(),
                    values: vec![Some(0.81), Some(0.88)],
                    errors: vec![Some(0.01), None],
                },
                BarSeries {
                    name: "paper".into(),
                    values: vec![Some(0.818), Some(0.883)],
                    errors: vec![None, None],
                },
            ],
        });
        r.findings.push("close".into());
        write_report(dir.path(), &[r], "pre\n").unwrap();
        let md = fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains("| linux | 0.81 | 0.818 |"));
        assert!(md.contains("![NP](zhang-spec.svg)"));
        let svg = fs::read_to_string(dir.path().join("zhang-spec.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<rect"));
        let json: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.path().join("results.json")).unwrap())
                .unwrap();
        assert_eq!(json[0]["paper"]["linux"]["normalized_performance"], 0.818);
    }
}
