//! The shared vocabulary of Counterpoint.
//!
//! Every other crate speaks these types: the live Linux host (`counters`, `host`), the simulated
//! machine (`sim`) and the placement policies (`policy`). A policy sees a [`Topology`], an
//! [`Observation`] per interval, and answers with [`Action`]s; it cannot tell whether a real host
//! or the simulator is behind the [`Machine`] trait. Load metrics are defined here once, as
//! formulas over event names ([`metric`]), so the agent and the simulator compute IPC, MPKI or
//! bandwidth the same way. This crate does no I/O: parsing sysfs, opening counters and simulating
//! live in the crates that own those worlds.

pub mod action;
pub mod cpuset;
pub mod driver;
pub mod event;
pub mod machine;
pub mod metric;
pub mod observation;
pub mod sample;
pub mod stats;
pub mod task;
#[cfg(any(test, feature = "testutils"))]
pub mod testutils;
pub mod topology;

pub use action::{Action, Placement};
pub use cpuset::{CpuId, CpuSet, CpuSetParseError};
pub use driver::{Driver, DriverConfig, Observer};
pub use machine::{Machine, PickContext, PickNext, Policy, TaskStats};
pub use metric::{Expr, Metric, MetricValues};
pub use observation::{CpuObservation, Observation, TaskObservation};
pub use sample::{CounterValue, Sample};
pub use task::{TaskId, TaskInfo};
pub use topology::{CacheDomain, CacheKind, Cpu, CpuKind, NumaNode, Topology, TopologyError};
