//! `masa-placement` (Nakajima & Pallipadi Tables 1 and 2) and `masa-testcases` (§4.3, Tables 7
//! and 8) on the simulated dual-package Hyper-Threading machine.
//!
//! Placement tables are static bindings under the baseline scheduler. The test cases run four
//! "shells" (SPEC programs back to back) without and with MASA; MASA's load calibration is
//! measured on the simulated machine first, exactly as the paper prescribes: each probe program
//! (177.mesa for FP, 197.parser for L2C) solo on a package with the other package idle, then
//! two copies coupled on one package.

use crate::lab::{Job, JobTask, Lab, LabError, Outcome, RunSpec};
use crate::paper::{self, Basis};
use crate::progress::Progress;
use crate::result::{ours_cell, BarFigure, BarSeries, ExperimentResult, Table};
use crate::summary::Verdict;
use counterpoint_core::cpuset::{CpuId, CpuSet};
use counterpoint_core::topology::Topology;
use counterpoint_policy::masa::{
    Calibration, CalibrationEntry, LimitCheck, LoadMetric, Masa, MasaParams,
};
use counterpoint_policy::tree::MachineTree;
use counterpoint_policy::{Linux, LinuxPick};
use rayon::prelude::*;

/// The catalog machine standing for the paper's dual Xeon with HT.
pub const MACHINE: &str = "masa-2x2ht";
/// The same machine with HT disabled.
pub const MACHINE_HT_OFF: &str = "masa-2x1";
/// Placement runs: programs repeat (constant contention) for this long and each program's
/// time to complete is its instructions at its average rate.
pub const PLACEMENT_DURATION_NS: u64 = 60_000_000_000;
/// Calibration probes and test cases run their work once, to completion, within this limit.
pub const RUN_LIMIT_NS: u64 = 200_000_000_000_000;
/// Tick for the long runs (probes, shells): 10 ms, a tenth of the scheduler's time slice.
pub const LONG_TICK_NS: u64 = 10_000_000;
/// The paper's INT probe (its build of 164.gzip: the catalog's `INT`, whose v2 core CPI is
/// fitted to MASA's solo time; the catalog's `gzip` is the gcc build Weaver & McKee measured).
pub const INT: &str = "INT";
/// The paper's FP probe (its build of 177.mesa).
pub const FP: &str = "FP";
/// The paper's L2C probe (its build of 197.parser).
pub const L2C: &str = "L2C";
/// Epoch between MASA's looks at the counters (it accumulates to its 5 s period).
pub const EPOCH_NS: u64 = 1_000_000_000;

mod calibration;
mod placement;
mod shells;
mod testcases;

pub use calibration::calibrate;
pub use placement::placement_runs;
use placement::{machine, run_baseline, seconds, topology_of};
use shells::shell_job;
pub use shells::{shells, start_order};
pub use testcases::testcases_runs;

/// `masa-placement`: Tables 1 and 2 (`placement::placement`), every figure's error bars the
/// 95 % interval of the bar's mean ([`bars_at_95`]).
pub fn placement(
    lab: &dyn Lab,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<ExperimentResult, LabError> {
    let mut r = placement::placement(lab, seeds, progress)?;
    // Said beside the runs' length (60 s), which the times to complete exceed.
    r.machine.push_str(
        "; programs repeat for the whole run, and a program's time to complete is its \
         instructions at its average rate",
    );
    bars_at_95(&mut r);
    Ok(r)
}

/// `masa-testcases`: test cases 1 and 2 without and with MASA (`testcases::testcases`),
/// every figure's error bars the 95 % interval of the bar's mean ([`bars_at_95`]).
pub fn testcases(
    lab: &dyn Lab,
    seeds: &[u64],
    progress: &dyn Progress,
) -> Result<ExperimentResult, LabError> {
    let mut r = testcases::testcases(lab, seeds, progress)?;
    bars_at_95(&mut r);
    Ok(r)
}

/// The summary each of our bars in MASA's figures draws, by figure file, series and category:
/// (result key, metric, factor from the summary's units to the bar's).
fn bar_source(file: &str, series: &str, category: &str) -> Option<(String, &'static str, f64)> {
    if let Some(tn) = file
        .strip_prefix("masa-table")
        .and_then(|f| f.strip_suffix(".svg"))
    {
        (series == "ours").then(|| (format!("table{tn} {category}"), "total_time_s", 1.0))
    } else if file == "masa-testcases.svg" {
        let variant = series.strip_prefix("ours (")?.strip_suffix(')')?;
        Some((format!("{category} {variant}"), "gain", 100.0))
    } else {
        None
    }
}

/// Our bars' error bars in MASA's figures set to the 95 % confidence interval of each bar's
/// mean (`Summary::half_width95`: none for one run), as every figure of the report draws
/// them; the figure code drew ±1 sample standard deviation (report audit, session 29). Each
/// bar is matched to its summary by [`bar_source`]; a bar whose summary is missing or has
/// another mean loses its error bar (and fails a debug build: the figure and the result
/// disagree).
fn bars_at_95(r: &mut ExperimentResult) {
    let mut figures = std::mem::take(&mut r.figures);
    for f in &mut figures {
        for s in &mut f.series {
            for (ci, category) in f.categories.iter().enumerate() {
                let Some((key, metric, factor)) = bar_source(&f.file, &s.name, category) else {
                    continue;
                };
                let summary = r.get(&key, metric);
                let bar = s.values.get(ci).copied().flatten();
                let same = match (summary, bar) {
                    (Some(m), Some(v)) => (m.mean * factor - v).abs() <= 1e-9 * v.abs().max(1.0),
                    (None, None) => true,
                    _ => false,
                };
                debug_assert!(
                    same,
                    "{}: bar {category:?} of {:?} is {bar:?}, its summary {key:?}/{metric} {summary:?}",
                    f.file, s.name
                );
                if let Some(e) = s.errors.get_mut(ci) {
                    *e = summary
                        .filter(|_| same)
                        .and_then(|m| m.half_width95())
                        .map(|h| h * factor);
                }
            }
        }
    }
    r.figures = figures;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{BarFigure, BarSeries};

    /// Error bars drawn as ±1 standard deviation become the 95 % interval of the same
    /// summary, in the bar's units; the paper's bars keep none.
    #[test]
    fn masa_figures_draw_the_95_percent_interval() {
        let mut r = ExperimentResult::new("masa-testcases", "t", "m", &[1, 2, 3]);
        let gain = r
            .put("test case 1 masa", "gain", &[0.01, 0.02, 0.04])
            .unwrap();
        let total = r
            .put(
                "table2 (INT, L2C) (INT, L2C)",
                "total_time_s",
                &[1460.0, 1462.0, 1461.0],
            )
            .unwrap();
        let std_of = |s: crate::Summary, k: f64| s.std.map(|x| x * k);
        r.figures.push(BarFigure {
            file: "masa-testcases.svg".into(),
            title: "t".into(),
            y_label: "gain (%)".into(),
            categories: vec!["test case 1".into()],
            series: vec![
                BarSeries {
                    name: "ours (masa)".into(),
                    values: vec![Some(100.0 * gain.mean)],
                    errors: vec![std_of(gain, 100.0)],
                },
                BarSeries::plain("paper", vec![Some(2.9)]),
            ],
        });
        r.figures.push(BarFigure {
            file: "masa-table2.svg".into(),
            title: "t".into(),
            y_label: "total time (s)".into(),
            categories: vec!["(INT, L2C) (INT, L2C)".into()],
            series: vec![BarSeries {
                name: "ours".into(),
                values: vec![Some(total.mean)],
                errors: vec![std_of(total, 1.0)],
            }],
        });
        bars_at_95(&mut r);
        let e = r.figures[0].series[0].errors[0].unwrap();
        assert!(
            (e - 100.0 * gain.half_width95().unwrap()).abs() < 1e-9,
            "{e}"
        );
        // t(2) = 4.303: the interval's half-width is 2.48 standard deviations over 3 seeds.
        assert!((e / (100.0 * gain.std.unwrap()) - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(r.figures[0].series[1].errors, vec![None]);
        let e = r.figures[1].series[0].errors[0].unwrap();
        assert!((e - total.half_width95().unwrap()).abs() < 1e-9, "{e}");
    }

    /// The real placement figures: every bar of ours is matched to its summary (shortened
    /// runs; two seeds, so there is an interval).
    #[test]
    fn every_placement_bar_finds_its_summary() {
        let lab = crate::lab::ShortLab {
            lab: crate::sim_lab::SimLab::new().expect("the built-in catalog loads"),
            cap_ns: 1_000_000_000,
        };
        let r = placement(&lab, &[1, 2], &crate::progress::NoProgress).expect("runs");
        assert_eq!(r.figures.len(), 2);
        for f in &r.figures {
            let ours = f.series.iter().find(|s| s.name == "ours").expect("ours");
            for (ci, c) in f.categories.iter().enumerate() {
                let (key, metric, _) = bar_source(&f.file, "ours", c).expect("a source");
                let s = r.get(&key, metric).expect("its summary");
                assert_eq!(ours.values[ci], Some(s.mean));
                assert_eq!(ours.errors[ci], s.half_width95());
            }
        }
    }
}
