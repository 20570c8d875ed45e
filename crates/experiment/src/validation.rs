//! `model-validation`: every published figure the experiments compare against, under the first
//! model (v1, as shipped: fitted to the baselines, slices in lockstep) and the second (v2:
//! physics from independent sources, slices drifting), side by side with the error and the
//! figure's tag (calibration target or validation), so a reader sees what the new physics
//! bought and where it did not.
//!
//! It reruns the seed experiments (`zhang-spec`, `zhang-server`, `masa-placement`,
//! `masa-testcases`) and two checks from outside the seeds (`clock-scaling`, Intel's Pentium 4
//! results at two clocks; `corun-slowdown`, Tian et al.'s co-run slowdowns on a Xeon 5150) on a
//! [`SimLab`] forced to each model and reads every published number each experiment registered
//! (`ExperimentResult::paper`) beside its own summary.

use crate::paper::Basis;
use crate::progress::Progress;
use crate::result::{ExperimentResult, Table};
use crate::sim_lab::SimLab;
use crate::{masa, zhang, LabError, Summary};
use counterpoint_sim::Model;

/// The experiments whose published figures the table covers: the seeds' four, and two from
/// outside the seeds (`clock-scaling`, Intel's Pentium 4 results at two clocks;
/// `corun-slowdown`, Tian et al.'s co-run slowdowns on a Xeon 5150).
pub const COVERED: [&str; 6] = [
    "zhang-spec",
    "zhang-server",
    "masa-placement",
    "masa-testcases",
    "clock-scaling",
    "corun-slowdown",
];
/// The covered experiments whose figures come from outside the seed papers, with what their
/// mean error is over: each is averaged apart from the seeds' and from each other (a speed-up's
/// or a slowdown's relative error is on another scale than a policy figure's).
const OUTSIDE_SEEDS: [(&str, &str); 2] = [
    (
        "clock-scaling",
        "the clock-scaling speed-ups (outside the seeds)",
    ),
    (
        "corun-slowdown",
        "the co-run slowdowns on the Xeon 5150 (outside the seeds; errors of the co-run \
         time ratio against means over 15 co-runners, 6 not simulated: corun-slowdown \
         compares against the bounds for the same co-runners)",
    ),
];

/// The runs [`run_model`] reports to its progress over `seeds` seeds.
pub fn covered_runs(seeds: u64) -> u64 {
    zhang::planned_runs(&zhang::SPEC, seeds)
        + zhang::planned_runs(&zhang::SERVER, seeds)
        + masa::placement_runs(seeds)
        + masa::testcases_runs(seeds)
        + crate::clock_scaling::planned_runs(seeds)
        + crate::corun_slowdown::planned_runs(seeds)
}

/// Run the covered experiments under `model`.
pub fn run_model(
    model: Model,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<Vec<ExperimentResult>, LabError> {
    let lab = SimLab::new()?.with_model(model);
    Ok(vec![
        zhang::run(&lab, &zhang::SPEC, seeds, progress)?,
        zhang::run(&lab, &zhang::SERVER, seeds, progress)?,
        masa::placement(&lab, seeds, progress)?,
        masa::testcases(&lab, seeds, progress)?,
        crate::clock_scaling::run(&lab, seeds, progress)?,
        crate::corun_slowdown::run(&lab, seeds, progress)?,
    ])
}

/// One row of the side-by-side table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Experiment name.
    pub experiment: String,
    /// Row of the experiment (policy or placement).
    pub row: String,
    /// Quantity.
    pub metric: String,
    /// The published value.
    pub published: f64,
    /// Calibration target (the model was fitted to it) or prediction.
    pub basis: Basis,
    /// The first model's summary over seeds.
    pub v1: Option<Summary>,
    /// The second model's.
    pub v2: Option<Summary>,
}

impl Row {
    /// Relative error of a summary's mean against the published value.
    pub fn error(s: Option<Summary>, published: f64) -> Option<f64> {
        let s = s?;
        (published != 0.0).then(|| (s.mean - published) / published.abs())
    }
}

/// A calibrated figure further than this (relative) from its target is named in the findings
/// as a target the fit missed.
const CALIBRATION_MISS: f64 = 0.05;

/// Every published figure present in both result sets, in the experiments' order.
pub fn rows(v1: &[ExperimentResult], v2: &[ExperimentResult]) -> Vec<Row> {
    let mut out = Vec::new();
    for a in v1 {
        let Some(b) = v2.iter().find(|b| b.experiment == a.experiment) else {
            continue;
        };
        for (row, metrics) in &a.paper {
            for (metric, &published) in metrics {
                let basis = a
                    .paper_basis
                    .get(row)
                    .and_then(|m| m.get(metric))
                    .copied()
                    .unwrap_or(Basis::Predicted);
                out.push(Row {
                    experiment: a.experiment.clone(),
                    row: row.clone(),
                    metric: metric.clone(),
                    published,
                    basis,
                    v1: a.get(row, metric),
                    v2: b.get(row, metric),
                });
            }
        }
    }
    out
}

/// A published value as printed: up to four decimals, trailing zeros dropped.
fn published_cell(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn cell(s: Option<Summary>) -> String {
    s.map(|s| s.show(3)).unwrap_or_else(|| "n/a".into())
}

fn err_cell(e: Option<f64>) -> String {
    e.map(|e| format!("{:+.1} %", e * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

/// The `model-validation` result from both models' results of the covered experiments.
pub fn compare(
    v1: &[ExperimentResult],
    v2: &[ExperimentResult],
    seeds: &[u64],
) -> ExperimentResult {
    let mut r = ExperimentResult::new(
        "model-validation",
        "Every published figure under the first model (v1) and the second (v2), side by side",
        "the seed experiments' own machines; v1 as shipped (fitted, slices in lockstep), v2 \
         (physics from sources, slices drifting by default)",
        seeds,
    );
    let rows = rows(v1, v2);
    let mut t = Table::new(
        "Validation table: published figure, v1, v2, relative error, tag",
        &[
            "experiment",
            "row",
            "quantity",
            "published",
            "v1",
            "v1 error",
            "v2",
            "v2 error",
        ],
    );
    // Mean absolute relative errors of the validation figures both models predict: the
    // seeds' figures [0], then each experiment of `OUTSIDE_SEEDS` [1..].
    const GROUPS: usize = 1 + OUTSIDE_SEEDS.len();
    let mut n = [0usize; GROUPS];
    let mut abs1 = [0.0; GROUPS];
    let mut abs2 = [0.0; GROUPS];
    // Calibration targets a model misses: the error averages read only the predicted rows, so
    // a fit that missed its own targets went unsaid (v2's Zhang baseline +5.2 %, MASA table
    // 2's mixing gain with its sign reversed; report audit, session 30).
    let mut missed: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for row in &rows {
        let e1 = Row::error(row.v1, row.published);
        let e2 = Row::error(row.v2, row.published);
        if row.basis == Basis::Calibrated {
            // v1's fit reads no clock speed-up: its clock-scaling rows are predictions.
            let v1_fitted = row.experiment != "clock-scaling";
            for (m, (e, s)) in [(e1, row.v1), (e2, row.v2)].into_iter().enumerate() {
                let (Some(e), Some(s)) = (e, s) else { continue };
                if (m == 0 && !v1_fitted) || e.abs() <= CALIBRATION_MISS {
                    continue;
                }
                let flipped = s.mean * row.published < 0.0;
                missed[m].push(format!(
                    "{} {} {} {:+.1} %{}",
                    row.experiment,
                    row.row,
                    row.metric,
                    e * 100.0,
                    if flipped { " (sign reversed)" } else { "" }
                ));
            }
        }
        if row.basis == Basis::Predicted {
            if let (Some(a), Some(b)) = (e1, e2) {
                let k = OUTSIDE_SEEDS
                    .iter()
                    .position(|(e, _)| *e == row.experiment)
                    .map_or(0, |i| i + 1);
                n[k] += 1;
                abs1[k] += a.abs();
                abs2[k] += b.abs();
            }
        }
        // The clock speed-ups v2's fit reads are v1's predictions all the same.
        let row_name = if row.experiment == "clock-scaling" && row.basis == Basis::Calibrated {
            format!("{} (calibrated for v2 only; v1 predicts it)", row.row)
        } else {
            row.row.clone()
        };
        t.row_with(
            row.basis,
            vec![
                row.experiment.clone(),
                row_name,
                row.metric.clone(),
                published_cell(row.published),
                cell(row.v1),
                err_cell(e1),
                cell(row.v2),
                err_cell(e2),
            ],
        );
        // The JSON keeps each model's whole summary over seeds and the figure's basis (it
        // kept only the mean, as one value, and called every figure predicted).
        let key = format!("{}/{}", row.experiment, row.row);
        if let Some(s) = row.v1 {
            // v1's fit reads no clock speed-up: those rows are its predictions.
            let v1_basis = if row.experiment == "clock-scaling" {
                Basis::Predicted
            } else {
                row.basis
            };
            r.put_summary(&format!("v1 {key}"), &row.metric, s, v1_basis);
        }
        if let Some(s) = row.v2 {
            r.put_summary(&format!("v2 {key}"), &row.metric, s, row.basis);
        }
    }
    r.tables.push(t);
    let groups = std::iter::once("the seeds' validation figures")
        .chain(OUTSIDE_SEEDS.iter().map(|(_, what)| *what));
    for (k, what) in groups.enumerate() {
        if n[k] > 0 {
            r.findings.push(format!(
                "mean absolute relative error over {what} both models predict ({}): v1 {:.1} %, \
                 v2 {:.1} %",
                n[k],
                abs1[k] / n[k] as f64 * 100.0,
                abs2[k] / n[k] as f64 * 100.0
            ));
        }
    }
    for (label, list) in ["v1", "v2"].iter().zip(&missed) {
        if !list.is_empty() {
            r.findings.push(format!(
                "{label} misses {} of its own calibration targets by more than {:.0} % (relative error, \
                 ours against the published value): {}",
                list.len(),
                CALIBRATION_MISS * 100.0,
                list.join("; ")
            ));
        }
    }
    let published_gap = crate::paper::zhang("zhang-spec").map(|rows| {
        let np = |p: &str| rows.iter().find(|r| r.0 == p).map_or(f64::NAN, |r| r.1);
        np("bus-pair") - np("ipc-pair")
    });
    for (label, set) in [("v1", v1), ("v2", v2)] {
        if let Some(d) = set
            .iter()
            .find(|e| e.experiment == "zhang-spec")
            .and_then(|e| e.get(crate::zhang::BUS_MINUS_IPC, crate::zhang::NP_DIFFERENCE))
        {
            r.findings.push(format!(
                "{label}: zhang-spec bus-pair minus ipc-pair NP {} over {} seeds (paper: {:+.3})",
                d.show_interval(3),
                d.n,
                published_gap.unwrap_or(f64::NAN)
            ));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(exp: &str, np: f64) -> ExperimentResult {
        let mut r = ExperimentResult::new(exp, "t", "m", &[1, 2]);
        r.put("linux", "normalized_performance", &[np - 0.01, np + 0.01]);
        r.put_paper("linux", "normalized_performance", 0.8);
        r
    }

    #[test]
    fn rows_pair_each_published_figure_with_both_models() {
        let v1 = vec![result("zhang-spec", 0.9)];
        let v2 = vec![result("zhang-spec", 0.82)];
        let rows = rows(&v1, &v2);
        assert_eq!(rows.len(), 1);
        let e1 = Row::error(rows[0].v1, rows[0].published).unwrap();
        let e2 = Row::error(rows[0].v2, rows[0].published).unwrap();
        assert!((e1 - 0.125).abs() < 1e-12, "{e1}");
        assert!((e2 - 0.025).abs() < 1e-12, "{e2}");
        let c = compare(&v1, &v2, &[1]);
        assert_eq!(c.tables[0].rows.len(), 1);
        assert_eq!(c.tables[0].rows[0][4], "0.900 ± 0.014");
        assert_eq!(c.tables[0].rows[0][3], "0.8");
        assert_eq!(published_cell(0.17495501390479296), "0.175");
        assert_eq!(published_cell(11036.0), "11036");
        // The JSON entry is the model's whole summary, with the figure's basis (zhang-spec's
        // linux NP is a calibration target).
        let e = &c.policies["v1 zhang-spec/linux"]["normalized_performance"];
        // zhang-spec's bus-pair minus ipc-pair, a difference of NPs, gives the finding.
        let mut v1d = v1.clone();
        v1d[0].put(
            crate::zhang::BUS_MINUS_IPC,
            crate::zhang::NP_DIFFERENCE,
            &[-0.004, -0.006],
        );
        let cd = compare(&v1d, &v2, &[1, 2]);
        assert!(
            cd.findings
                .iter()
                .any(|f| f.starts_with("v1: zhang-spec bus-pair minus ipc-pair NP -0.005")),
            "{:?}",
            cd.findings
        );
        assert_eq!(e.n, 2);
        assert!(e.std.is_some_and(|s| s > 0.0));
        assert_eq!(e.basis, Basis::Calibrated);
        // A calibration target missed by more than 5 % is named, per model: v1 at 0.9
        // (+12.5 %) is, v2 at 0.82 (+2.5 %) is not.
        assert!(
            c.findings.iter().any(|f| f.starts_with(
                "v1 misses 1 of its own calibration targets by more than 5 % (relative \
                 error, ours against the published value): zhang-spec linux \
                 normalized_performance +12.5 %"
            )),
            "{:?}",
            c.findings
        );
        assert!(!c.findings.iter().any(|f| f.starts_with("v2 misses")));
        // A sign reversed is said.
        let cs = compare(&v1, &[result("zhang-spec", -0.5)], &[1, 2]);
        assert!(
            cs.findings
                .iter()
                .any(|f| f.starts_with("v2 misses") && f.ends_with("(sign reversed)")),
            "{:?}",
            cs.findings
        );
    }
}
