//! Counterpoint's seed experiments on the simulated machine.
//!
//! Each experiment builds the published setup as a simulator scenario, runs every policy over
//! several seeds (in parallel with rayon), and summarizes per policy the paper's metrics
//! (normalized performance, unfairness, gain, swap counts) as mean and spread beside the
//! paper's numbers. `counterpoint experiment NAME` prints or writes them; `experiment all`
//! writes `report/` (Markdown, SVG figures via plotters, JSON). Policy results are predictions
//! of the calibrated baseline: nothing here tunes a profile or model parameter towards a
//! paper number.

pub mod report;
pub mod result;
pub mod summary;

pub use result::{BarFigure, BarSeries, ExperimentResult, Table};
pub use summary::Summary;
