//! The live Linux host as a Counterpoint [`counterpoint_core::machine::Machine`]: which tasks
//! exist (`procfs`, `targets`), what the CPUs look like (`sysfs`), how to move tasks
//! (`affinity`), how to always put them back (`journal`, `signals`), and the live agent that
//! runs a placement policy on them (`agent`). Every change of a task's affinity is journaled
//! before it is made, so a normal exit, a signal, or the next start after a crash restores what
//! the task had, unless someone else changed it since.
//!
//! ```
//! use counterpoint_core::cpuset::CpuSet;
//! use counterpoint_host::Journal;
//!
//! // The safety net on its own: journal a change to this thread, make it, restore it.
//! let dir = tempfile::tempdir()?;
//! let mut journal = Journal::open(&dir.path().join("agent.journal"))?;
//! let me = std::process::id();
//! let online = counterpoint_host::affinity::online_cpus();
//! let before = counterpoint_host::affinity::get(me)?;
//! let target = CpuSet::single(online.first().unwrap_or(0));
//! journal.before_change(me, me, &target)?;
//! let applied = counterpoint_host::affinity::set(me, &target, &online)?;
//! journal.after_change(me, Some(&applied))?;
//! assert!(journal.has_entries());
//!
//! let report = journal.restore_all(&online);
//! assert_eq!(report.restored.len(), 1);
//! assert_eq!(counterpoint_host::affinity::get(me)?, before.intersection(&online));
//! assert!(!journal.has_entries());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod actuate;
pub mod affinity;
pub mod agent;
pub mod c2c;
pub mod code;
pub mod duration;
pub mod exits;
pub mod files;
pub mod journal;
pub mod machine;
pub mod replica_burn;
// Documented by their owner (the counter layer's move to `crates/counters`).
#[allow(missing_docs)]
pub mod perf;
#[allow(missing_docs)]
pub mod probe;
#[allow(missing_docs)]
pub mod procfs;
pub mod signals;
pub mod sysfs;
pub mod targets;
pub mod taskstats;

pub use journal::{Journal, JournalError};
pub use machine::{Host, HostError};
pub use targets::{TargetSpec, TargetsParseError};
