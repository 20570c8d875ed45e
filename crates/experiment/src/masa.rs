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
use placement::{machine, run_baseline, seconds, topology_of};
pub use placement::{placement, placement_runs};
use shells::shell_job;
pub use shells::{shells, start_order};
pub use testcases::{testcases, testcases_runs};

#[cfg(test)]
mod tests {
    use super::*;

    /// The real placement figures: every bar of ours draws its summary's mean and the 95 %
    /// interval of that mean (shortened runs; two seeds, so there is an interval).
    #[test]
    fn every_placement_bar_finds_its_summary() {
        let lab = crate::lab::ShortLab {
            lab: crate::sim_lab::SimLab::new().expect("the built-in catalog loads"),
            cap_ns: 1_000_000_000,
        };
        let r = placement(&lab, &[1, 2], &crate::progress::NoProgress).expect("runs");
        assert_eq!(r.figures.len(), 2);
        for f in &r.figures {
            let tn = f
                .file
                .strip_prefix("masa-table")
                .and_then(|x| x.strip_suffix(".svg"))
                .expect("a table figure");
            let ours = f.series.iter().find(|s| s.name == "ours").expect("ours");
            for (ci, c) in f.categories.iter().enumerate() {
                let s = r
                    .get(&format!("table{tn} {c}"), "total_time_s")
                    .expect("its summary");
                assert_eq!(ours.values[ci], Some(s.mean));
                assert_eq!(ours.errors[ci], s.half_width95());
            }
        }
    }
}
