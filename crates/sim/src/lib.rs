//! The simulated machine of Counterpoint (DESIGN §3): where placement policies are evaluated on
//! machines we do not have, and where the seeds' experiments are reproduced.
//!
//! A [`Simulation`] is a machine of packages, cores and SMT threads with an LLC per cache domain
//! and memory behind a shared bus or per-package controllers. Tasks run programs made of phases
//! with profiles (core CPI, LLC accesses, a miss-ratio curve, memory-level parallelism, FP
//! fraction). Every tick the co-runners are turned into CPIs by a contention fixed point
//! (frequency-of-access LLC sharing, queueing latency on the bus, SMT issue sharing), and the
//! counters a PMU would show are accumulated under the canonical event names. A Linux-like
//! baseline scheduler (per-CPU run queues, round-robin slices, load balancing by queue length,
//! idle-core-first wake-up placement) moves tasks; a [`counterpoint_core::PickNext`] hook can
//! replace its choice at each context switch, and [`counterpoint_core::Policy`] acts per epoch
//! through the same [`counterpoint_core::Machine`] trait as the live host. Everything is a pure
//! function of the scenario and the seed.

pub mod bench;
pub mod catalog;
pub mod engine;
pub mod run;
pub mod scenario;
pub mod spec;

pub use catalog::Catalog;
pub use engine::{Counters, Simulation};
pub use run::{
    drive, run, run_with, run_with_progress, RunOptions, RunResult, Series, TaskResult, TaskSeries,
};
pub use scenario::{Scenario, ScenarioBuilder, ScenarioError, TaskSpec, Workload};
pub use spec::{
    MachineSpec, MemoryKind, MissCurve, Phase, Profile, Program, RequestClass, SchedParams, Server,
    SmtSpec,
};

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid simulation input: {0}")]
    Invalid(String),
    #[error("bad topology: {0}")]
    Topology(#[from] counterpoint_core::TopologyError),
    #[error("scenario: {0}")]
    Scenario(#[from] ScenarioError),
    #[error("action refused: {0}")]
    BadAction(String),
}
