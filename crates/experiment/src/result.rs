//! What an experiment produces: per-policy summaries over seeds beside the paper's numbers,
//! tables for the report, figure data, and the findings (where and why we differ).

use crate::paper::{self, Basis};
use crate::summary::Summary;
use serde::Serialize;
use std::collections::BTreeMap;

/// One reported quantity: its summary over seeds and whether it was fitted or predicted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// Mean, spread and range over seeds.
    #[serde(flatten)]
    pub summary: Summary,
    /// `calibrated` (a calibration target of the fit) or `predicted`.
    pub basis: Basis,
    /// The samples the summary is over, in run order (one per seed; one per distinct run
    /// where seeds repeated a run; one per mix in di-vs-oracle), so a reader of
    /// results.json can recompute a paired interval (report audit, session 29). Empty for a
    /// summary carried from elsewhere (`model-validation`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
}

impl std::ops::Deref for Entry {
    type Target = Summary;
    fn deref(&self) -> &Summary {
        &self.summary
    }
}

/// One experiment's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct ExperimentResult {
    /// The name `counterpoint experiment` takes.
    pub experiment: String,
    /// Heading.
    pub title: String,
    /// The simulated machine(s), in words.
    pub machine: String,
    /// The physics it ran under (`model_label`).
    #[serde(default)]
    pub model: String,
    /// The simulated runs' lengths in words (`60 s each`), from what ran (`lab::RunRecord`);
    /// empty where the experiment does not run the engine's scenarios (its `machine` says
    /// what it runs).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub run_length: String,
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// Why the seeds differ from those the command was given, if they do (`schedtask` under
    /// `all`); empty otherwise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub seeds_note: String,
    /// Policy → metric (`normalized_performance`, `unfairness`, `gain`, ...) → summary with
    /// its basis (`calibrated` or `predicted`, from [`paper::basis`]).
    pub policies: BTreeMap<String, BTreeMap<String, Entry>>,
    /// The paper's numbers, same shape as `policies` (absent where the paper gives none).
    pub paper: BTreeMap<String, BTreeMap<String, f64>>,
    /// Same shape as `paper`: whether each published figure was a calibration target of the
    /// fit (`calibrated`) or is only compared with (`predicted`).
    pub paper_basis: BTreeMap<String, BTreeMap<String, Basis>>,
    /// Tables for the report (ours vs paper).
    pub tables: Vec<Table>,
    #[serde(skip)]
    /// Bar charts (not in the JSON).
    pub figures: Vec<BarFigure>,
    #[serde(skip)]
    /// How to draw some of the bar charts, by file name (the others: the defaults).
    pub figure_options: BTreeMap<String, FigureOptions>,
    /// Where the result differs from the paper and why; what it shows.
    pub findings: Vec<String>,
    #[serde(skip)]
    /// Figures drawn by the experiment itself: (file name, caption, SVG text).
    pub svgs: Vec<(String, String, String)>,
}

impl ExperimentResult {
    /// An empty result for `experiment` over `seeds`.
    pub fn new(experiment: &str, title: &str, machine: &str, seeds: &[u64]) -> Self {
        Self {
            experiment: experiment.to_string(),
            title: title.to_string(),
            machine: machine.to_string(),
            model: String::new(),
            run_length: String::new(),
            seeds: seeds.to_vec(),
            seeds_note: String::new(),
            policies: BTreeMap::new(),
            paper: BTreeMap::new(),
            paper_basis: BTreeMap::new(),
            tables: Vec::new(),
            figures: Vec::new(),
            figure_options: BTreeMap::new(),
            findings: Vec::new(),
            svgs: Vec::new(),
        }
    }

    /// Record one metric of one policy over seeds (skipped if it has no finite value).
    pub fn put(&mut self, policy: &str, metric: &str, values: &[f64]) -> Option<Summary> {
        let s = Summary::of(values)?;
        let basis = paper::basis(&self.experiment, policy, metric);
        self.policies.entry(policy.to_string()).or_default().insert(
            metric.to_string(),
            Entry {
                summary: s,
                basis,
                values: values.to_vec(),
            },
        );
        Some(s)
    }

    /// Record a summary made elsewhere (another experiment's, as `model-validation` carries
    /// each model's figures), with the basis that figure has there.
    pub fn put_summary(&mut self, policy: &str, metric: &str, summary: Summary, basis: Basis) {
        self.policies.entry(policy.to_string()).or_default().insert(
            metric.to_string(),
            Entry {
                summary,
                basis,
                values: Vec::new(),
            },
        );
    }

    /// Whether `policy`'s `metric` was fitted or predicted (predicted if never recorded).
    pub fn basis(&self, policy: &str, metric: &str) -> Basis {
        self.policies
            .get(policy)
            .and_then(|m| m.get(metric))
            .map_or(Basis::Predicted, |e| e.basis)
    }

    /// Record the paper's value of `policy`'s `metric`.
    pub fn put_paper(&mut self, policy: &str, metric: &str, value: f64) {
        let basis = paper::basis(&self.experiment, policy, metric);
        self.paper_basis
            .entry(policy.to_string())
            .or_default()
            .insert(metric.to_string(), basis);
        self.paper
            .entry(policy.to_string())
            .or_default()
            .insert(metric.to_string(), value);
    }

    /// Our summary of `policy`'s `metric`.
    pub fn get(&self, policy: &str, metric: &str) -> Option<Summary> {
        self.policies.get(policy)?.get(metric).map(|e| e.summary)
    }

    /// The paper's value of `policy`'s `metric`, if it gives one.
    pub fn paper_value(&self, policy: &str, metric: &str) -> Option<f64> {
        self.paper.get(policy)?.get(metric).copied()
    }
}

/// A Markdown table. Every row carries its basis (`calibrated` or `predicted`), shown as the
/// last column.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    /// Caption.
    pub title: String,
    /// Column headers (without the basis column).
    pub columns: Vec<String>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
    /// Per row: fitted or predicted.
    pub basis: Vec<Basis>,
}

impl Table {
    /// An empty table.
    pub fn new(title: &str, columns: &[&str]) -> Self {
        Self {
            title: title.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            basis: Vec::new(),
        }
    }
    /// Add a row of predicted quantities (anything a policy produces).
    pub fn row(&mut self, cells: Vec<String>) {
        self.row_with(Basis::Predicted, cells);
    }
    /// Add a row with an explicit basis.
    pub fn row_with(&mut self, basis: Basis, cells: Vec<String>) {
        self.rows.push(cells);
        self.basis.push(basis);
    }
    /// Columns and cells with the basis column appended.
    fn full(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let mut cols = self.columns.clone();
        cols.push("basis".into());
        let rows = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut r = r.clone();
                let b = self.basis.get(i).copied().unwrap_or(Basis::Predicted);
                r.push(b.label().to_string());
                r
            })
            .collect();
        (cols, rows)
    }
    /// The table in Markdown.
    pub fn markdown(&self) -> String {
        let (columns, rows) = self.full();
        let mut out = format!("**{}**\n\n", self.title);
        out.push_str(&format!("| {} |\n", columns.join(" | ")));
        out.push_str(&format!(
            "|{}\n",
            columns.iter().map(|_| "---|").collect::<String>()
        ));
        for r in &rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
    /// Plain text for the terminal: columns padded to width.
    pub fn text(&self) -> String {
        let (columns, rows) = self.full();
        let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(c.chars().count());
                }
            }
        }
        let line = |cells: &[String]| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let w = widths.get(i).copied().unwrap_or(0);
                    format!("{c}{}", " ".repeat(w.saturating_sub(c.chars().count())))
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&columns));
        out.push('\n');
        for r in &rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// Data for a grouped bar chart.
#[derive(Clone, Debug)]
pub struct BarFigure {
    /// File name inside the report directory (`*.svg`).
    pub file: String,
    /// Caption.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// One group of bars per category.
    pub categories: Vec<String>,
    /// One bar per series in each group.
    pub series: Vec<BarSeries>,
}

/// How to draw one bar chart beyond its data (a field of [`ExperimentResult`] rather than of
/// [`BarFigure`], so that the figures built elsewhere keep their shape).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FigureOptions {
    /// The x axis' label (the categories' name); none by default.
    pub x_label: Option<String>,
    /// The smallest value an error bar may reach down to: a quantity no run was below (DI's
    /// distance from the oracle, none of whose mixes came out ahead of it), whose symmetric
    /// interval would reach below every run. The axis then does not go below it either.
    pub floor: Option<f64>,
}

/// What the error bars of every figure are, as the report says it beside them.
pub const ERROR_BARS: &str = "Error bars: the 95 % confidence interval of each bar's mean \
     (Student's t over the runs it averages: seeds, or for `leak` keys x seeds); a bar from one \
     run has none. Tables give mean ± sample standard deviation.";

/// One bar per category.
#[derive(Clone, Debug)]
pub struct BarSeries {
    /// Legend entry.
    pub name: String,
    /// Per category; `None` = no bar.
    pub values: Vec<Option<f64>>,
    /// Error bar half-length per category, in the values' units: the half-width of the 95 %
    /// confidence interval of the bar's mean (`Summary::half_width95`: Student's t over the
    /// runs the mean is over); `None` = no error bar (a published figure, or one run: no
    /// interval). Every figure of the report draws this, and says so ([`ERROR_BARS`]).
    pub errors: Vec<Option<f64>>,
}

impl BarSeries {
    /// A series without error bars (a published figure, or one that does not vary by seed).
    pub fn plain(name: &str, values: Vec<Option<f64>>) -> Self {
        Self {
            name: name.to_string(),
            errors: vec![None; values.len()],
            values,
        }
    }
}

/// Format an optional paper number.
pub fn paper_cell(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) => format!("{v:.digits$}"),
        None => "—".to_string(),
    }
}

/// Format an optional summary.
pub fn ours_cell(s: Option<Summary>, digits: usize) -> String {
    match s {
        Some(s) => s.show(digits),
        None => "n/a".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render() {
        let mut t = Table::new("T", &["policy", "NP"]);
        t.row(vec!["linux".into(), "0.818".into()]);
        assert_eq!(
            t.markdown(),
            "**T**\n\n| policy | NP | basis |\n|---|---|---|\n| linux | 0.818 | predicted |\n"
        );
        t.row_with(Basis::Calibrated, vec!["x".into(), "1".into()]);
        assert_eq!(
            t.text(),
            "T\npolicy  NP     basis\nlinux   0.818  predicted\nx       1      calibrated\n"
        );
    }

    #[test]
    fn put_and_get() {
        let mut r = ExperimentResult::new("x", "X", "m", &[1, 2]);
        assert!(r.put("linux", "np", &[0.8, 0.9]).is_some());
        assert!(r.put("linux", "bad", &[f64::NAN]).is_none());
        r.put_paper("linux", "np", 0.818);
        assert!((r.get("linux", "np").unwrap().mean - 0.85).abs() < 1e-12);
        assert_eq!(r.paper_value("linux", "np"), Some(0.818));
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["paper"]["linux"]["np"], 0.818);
        assert_eq!(j["policies"]["linux"]["np"]["n"], 2);
        assert_eq!(j["policies"]["linux"]["np"]["basis"], "predicted");
        // The samples themselves, so a reader can recompute a paired interval.
        assert_eq!(
            j["policies"]["linux"]["np"]["values"],
            serde_json::json!([0.8, 0.9])
        );
        let mut z = ExperimentResult::new("zhang-spec", "Z", "m", &[1]);
        z.put("linux", "normalized_performance", &[0.8]);
        z.put("bus-pair", "normalized_performance", &[0.9]);
        let j = serde_json::to_value(&z).unwrap();
        assert_eq!(
            j["policies"]["linux"]["normalized_performance"]["basis"],
            "calibrated"
        );
        assert_eq!(
            j["policies"]["bus-pair"]["normalized_performance"]["basis"],
            "predicted"
        );
        z.put_paper("linux", "unfairness", 0.178);
        let j = serde_json::to_value(&z).unwrap();
        assert_eq!(j["paper"]["linux"]["unfairness"], 0.178);
        assert_eq!(j["paper_basis"]["linux"]["unfairness"], "calibrated");
    }
}
