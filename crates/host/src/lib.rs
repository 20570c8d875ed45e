//! The live Linux host as a Counterpoint [`counterpoint_core::machine::Machine`]: which tasks
//! exist (`procfs`, `targets`), what the CPUs look like (`sysfs`), how to move tasks
//! (`affinity`) and how to always put them back (`journal`). Every change of a task's affinity
//! is journaled atomically before it is made, so a normal exit, a signal, or the next start after
//! a crash restores what the task had, unless the task changed its own affinity since.

pub mod actuate;
pub mod affinity;
pub mod journal;
pub mod machine;
pub mod perf;
pub mod probe;
pub mod procfs;
pub mod sysfs;
pub mod targets;

pub use journal::{Journal, JournalError};
pub use machine::{Host, HostError};
pub use targets::{TargetSpec, TargetsParseError};
