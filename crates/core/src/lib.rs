//! The shared vocabulary of Counterpoint.
//!
//! Every other crate speaks these types: the live Linux host (`counters`, `host`), the simulated
//! machine (`sim`) and the placement policies (`policy`). A policy sees a [`Topology`], an
//! [`Observation`] per interval, and answers with [`Action`]s; it cannot tell whether a real host
//! or the simulator is behind the [`Machine`] trait. Load metrics are defined here once, as
//! formulas over event names ([`metric`]), so the agent and the simulator compute IPC, MPKI or
//! bandwidth the same way. This crate does no I/O: parsing sysfs, opening counters and simulating
//! live in the crates that own those worlds. The [`driver`] is the one observe → decide → act
//! loop that runs a policy on any machine; the `testutils` feature offers shared fixtures.
//!
//! ```
//! use counterpoint_core::{event, metric, CounterValue, CpuSet, Sample, TaskId};
//!
//! // CPU lists as the kernel prints them.
//! let cpus: CpuSet = "0-3,8".parse().unwrap();
//! assert_eq!((cpus.len(), cpus.to_list()), (5, "0-3,8".to_string()));
//!
//! // One task's counter deltas over one second, and a metric computed from them.
//! let mut s = Sample::new(Some(TaskId(42)), 1_000_000_000);
//! s.set(event::INSTRUCTIONS, CounterValue::exact(3_000_000_000, 1_000_000_000));
//! s.set(event::CYCLES, CounterValue::exact(2_000_000_000, 1_000_000_000));
//! let ipc = metric::ipc().eval_sample(&s).unwrap();
//! assert!((ipc - 1.5).abs() < 1e-12);
//! ```

#![warn(missing_docs)]

pub mod action;
pub mod cpuset;
pub mod driver;
pub mod heatmap;
// Item docs of these two are their owners' to finish (counters and host topology work).
#[allow(missing_docs)]
pub mod event;
pub mod machine;
pub mod metric;
pub mod observation;
pub mod sample;
pub mod stats;
pub mod superfunction;
pub mod task;
#[cfg(any(test, feature = "testutils"))]
pub mod testutils;
pub mod text;
#[allow(missing_docs)]
pub mod topology;

pub use action::{Action, Placement};
pub use cpuset::{CpuId, CpuSet, CpuSetParseError};
pub use driver::{Driver, DriverConfig, Observer};
pub use heatmap::{OverlapTable, PageHeatmap};
pub use machine::{Machine, PickContext, PickNext, Policy, TaskStats};
pub use metric::{Expr, Metric, MetricValues};
pub use observation::{CpuObservation, Observation, TaskObservation};
pub use sample::{CounterValue, Sample};
pub use superfunction::{CodeHeatmap, SuperFunction, TaskCode};
pub use task::{TaskId, TaskInfo};
pub use topology::{CacheDomain, CacheKind, Cpu, CpuKind, NumaNode, Topology, TopologyError};
