//! Canonical event names shared by the live host and the simulator.
//!
//! Names follow `perf list`'s generic spelling so a metric written against them runs unchanged on
//! a real PMU and on the simulated machine. Two names have no generic perf event and are
//! Counterpoint's own: [`MEM_TRANSACTIONS`] (memory-bus transactions, Zhang's bus utilization)
//! and [`FP_OPS`] (floating-point operations retired), and [`LLC_MISSES`] pins LLC misses to each
//! vendor's own event; on a host they resolve to vendor events through the `counters` crate's
//! per-microarchitecture alias table, and are otherwise reported as unavailable with the reason.

pub const CYCLES: &str = "cycles";
pub const INSTRUCTIONS: &str = "instructions";
/// LLC references (perf's `cache-references` counts last-level cache accesses).
pub const CACHE_REFERENCES: &str = "cache-references";
/// LLC misses (perf's `cache-misses`).
pub const CACHE_MISSES: &str = "cache-misses";
pub const LLC_LOADS: &str = "LLC-loads";
pub const LLC_LOAD_MISSES: &str = "LLC-load-misses";
pub const BRANCH_MISSES: &str = "branch-misses";
pub const TASK_CLOCK: &str = "task-clock";
pub const CPU_CLOCK: &str = "cpu-clock";
pub const CONTEXT_SWITCHES: &str = "context-switches";
pub const CPU_MIGRATIONS: &str = "cpu-migrations";
pub const PAGE_FAULTS: &str = "page-faults";
/// Memory-bus transactions (cache-line transfers between LLC and memory).
pub const MEM_TRANSACTIONS: &str = "mem-transactions";
/// Floating-point operations retired.
pub const FP_OPS: &str = "fp-ops";
/// Last-level cache misses by each vendor's own LLC-miss event (the generic `cache-misses`
/// means this on Intel only).
pub const LLC_MISSES: &str = "llc-misses";

/// Counterpoint's own names, resolved per microarchitecture by the `counters` crate.
pub const ABSTRACT_EVENTS: &[&str] = &[MEM_TRANSACTIONS, FP_OPS, LLC_MISSES];

/// Events every Linux kernel counts in software, PMU or not.
pub const SOFTWARE_EVENTS: &[&str] = &[
    TASK_CLOCK,
    CPU_CLOCK,
    CONTEXT_SWITCHES,
    CPU_MIGRATIONS,
    PAGE_FAULTS,
];

/// Whether `name` is one of the kernel's software events (always available).
pub fn is_software(name: &str) -> bool {
    SOFTWARE_EVENTS.contains(&name)
        || matches!(
            name,
            "cs" | "migrations"
                | "faults"
                | "minor-faults"
                | "major-faults"
                | "alignment-faults"
                | "emulation-faults"
                | "dummy"
        )
}
