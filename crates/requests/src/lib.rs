//! Per-request counter statistics for an unmodified server (seed 000 §2.2, issue 15).
//!
//! - [`attrib`]: external attribution: a server task's counters, opened through
//!   `counterpoint-counters` (the only code that opens perf events), read at each
//!   client-delimited request boundary; per request wall time, task-clock, context switches,
//!   page faults (and cycles, instructions, LLC misses, memory transactions with coverage where a
//!   PMU exists); JSON lines and CSV.
//! - [`pg`]: a private PostgreSQL cluster in a temporary directory on a Unix socket.
//! - [`tpch`]: a TPC-H-shaped schema, a documented deterministic generator and eight templates
//!   with checked row counts.
//! - [`run`]: concurrent clients issuing the mix, each reading its own backend's counters.
//! - [`classify`]: k-means (linfa) on time alone vs time + counters, k by silhouette, adjusted
//!   Rand index against the templates, the paper's Figure 3 as SVG.
//! - [`project`]: per class a simulated-machine profile from its features and a stated
//!   assumption, run on a faster CPU and on more memory bandwidth.

#![warn(missing_docs)]

pub mod analysis;
pub mod attrib;
pub mod classify;
pub mod pg;
pub mod project;
pub mod run;
pub mod tpch;

/// Why attribution, the harness or the analysis failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestsError {
    /// The event list does not parse here.
    #[error(transparent)]
    Spec(#[from] counterpoint_counters::SpecError),
    /// Opening or reading the counters failed.
    #[error(transparent)]
    Count(#[from] counterpoint_counters::CountError),
    /// A counter went backwards between two boundaries.
    #[error("counter '{0}' went backwards between two request boundaries")]
    Backwards(String),
    /// The run was asked to stop (its `stop` flag was set) before it finished.
    #[error("interrupted before the last request; the PostgreSQL cluster was stopped and removed")]
    Interrupted,
    /// PostgreSQL is absent or would not start.
    #[error("PostgreSQL unavailable: {0}")]
    NoPostgres(String),
    /// A query or connection failed.
    #[error("{0}: {1}")]
    Pg(String, #[source] postgres::Error),
    /// The server returned a result of the wrong shape.
    #[error("request {id} ({template}): {rows} rows, expected {expected}")]
    WrongRows {
        /// Request id.
        id: u64,
        /// Template.
        template: String,
        /// Rows returned.
        rows: u64,
        /// What the template requires.
        expected: String,
    },
    /// A file or OS operation failed.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// The counted task exited (or is a zombie): its counters can no longer change, so no
    /// further request can be measured on it.
    #[error("task {tid} has exited: no further request can be measured on it")]
    TaskGone {
        /// The task.
        tid: i32,
    },
    /// Bad parameters or input.
    #[error("{0}")]
    Invalid(String),
    /// Clustering failed.
    #[error("clustering: {0}")]
    Cluster(String),
    /// The simulator refused a projection scenario.
    #[error("projection: {0}")]
    Sim(String),
}
